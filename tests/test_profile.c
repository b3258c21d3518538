/* The profiled cost model: the database (insert, replace, lookup, save and
 * load bit for bit, strict reading), keys (position-free, halo-aware,
 * batch-free), the model (database times for hits, the analytic fallback for
 * misses, updates and other device kinds, misses counted by type), and the
 * profiler on LeNet-5 (entries for conv2d and linear, a second run measures
 * nothing, a simulation over its file misses only what has no kernel).
 * Never a wall-time assertion: measured times are only checked to be valid. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

/* x (8, 3, 16, 16) -> conv (4 out, 3x3, pad 1, bias) -> relu */
typedef struct fixture {
    sf_graph *g;
    sf_machine *cpu, *p100;
    const sf_op *x, *conv, *relu;
} fixture;

static sf_graph *small_graph(int64_t batch) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("small");
    sf_shape s = sf_shape_make(4, (int64_t[]){batch, 3, 16, 16});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 4;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c = sf_graph_add_op(g, SF_OP_CONV2D, "conv", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r = sf_graph_add_op(g, SF_OP_RELU, "relu", &p, (sf_tensor_ref[]){{c, 0}}, 1, &err);
    if (r < 0) {
        sf_graph_free(g);
        return NULL;
    }
    return g;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    sf_error err = {0};
    f->g = small_graph(8);
    f->cpu = sf_machine_preset("cpu", &err);
    f->p100 = sf_machine_preset("p100-4x4", &err);
    if (!f->g || !f->cpu || !f->p100) return -1;
    f->x = sf_graph_op(f->g, 0);
    f->conv = sf_graph_op(f->g, 1);
    f->relu = sf_graph_op(f->g, 2);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sf_machine_free(f->cpu);
    sf_machine_free(f->p100);
    sf_graph_free(f->g);
    free(f);
    return 0;
}

static char *tmp_path(char *buf, size_t n, const char *name) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/sf-test-profile-%ld-%s", dir && *dir ? dir : "/tmp", (long)getpid(), name);
    return buf;
}

/* Part p of op split `deg` ways on dimension `dim`. */
static sf_tile split_tile(const sf_op *op, int dim, int deg, int p) {
    sf_config c;
    memset(&c, 0, sizeof c);
    int degree[SF_MAX_DIMS];
    for (int i = 0; i < op->space.ndim; i++) degree[i] = 1;
    degree[dim] = deg;
    assert_int_equal(sf_config_set_degrees(&c, op->space.ndim, degree), SF_OK);
    sf_tile t;
    sf_config_part_tile(op, &c, p, &t);
    return t;
}

/* ---- keys --------------------------------------------------------------- */

static void test_key_text(void **state) {
    fixture *f = *state;
    char key[SF_PROFILE_KEY_MAX];
    sf_tile full = sf_tile_full(&f->conv->space);
    assert_non_null(sf_profile_key(f->conv, &full, key, sizeof key));
    assert_string_equal(key, "conv2d|out_channels=4,kernel=3x3,stride=1x1,padding=1x1,"
                             "dilation=1x1,groups=1,bias=1|tile=8x4x16x16|in=8x3x16x16");
    /* too small a buffer: NULL, never a truncated key */
    char tiny[16];
    assert_null(sf_profile_key(f->conv, &full, tiny, sizeof tiny));
}

static void test_key_extents_only(void **state) {
    fixture *f = *state;
    char a[SF_PROFILE_KEY_MAX], b[SF_PROFILE_KEY_MAX];
    /* samples 0-3 and 4-7: the same key */
    sf_tile t0 = split_tile(f->conv, 0, 2, 0), t1 = split_tile(f->conv, 0, 2, 1);
    assert_string_equal(sf_profile_key(f->conv, &t0, a, sizeof a),
                        sf_profile_key(f->conv, &t1, b, sizeof b));
    /* height split in four: an inner part reads a halo on both sides, a border part one */
    sf_tile h0 = split_tile(f->conv, 2, 4, 0), h1 = split_tile(f->conv, 2, 4, 1);
    assert_int_equal(h0.hi[2] - h0.lo[2], h1.hi[2] - h1.lo[2]);
    assert_string_not_equal(sf_profile_key(f->conv, &h0, a, sizeof a),
                            sf_profile_key(f->conv, &h1, b, sizeof b));
    /* the global batch is not in the key: half of batch 8 == whole of batch 4 */
    sf_graph *g4 = small_graph(4);
    assert_non_null(g4);
    const sf_op *conv4 = sf_graph_op(g4, 1);
    sf_tile full4 = sf_tile_full(&conv4->space);
    assert_string_equal(sf_profile_key(f->conv, &t0, a, sizeof a),
                        sf_profile_key(conv4, &full4, b, sizeof b));
    sf_graph_free(g4);
    /* another operator type, same shapes: another key */
    sf_tile rt = sf_tile_full(&f->relu->space);
    sf_tile ct = sf_tile_full(&f->conv->space);
    assert_string_not_equal(sf_profile_key(f->relu, &rt, a, sizeof a),
                            sf_profile_key(f->conv, &ct, b, sizeof b));
}

/* ---- the database ------------------------------------------------------- */

static void test_db_insert_lookup(void **state) {
    (void)state;
    sf_error err = {0};
    sf_profile_db *db = sf_profile_db_new("cpu-rank");
    assert_non_null(db);
    assert_string_equal(sf_profile_db_device_kind(db), "cpu-rank");
    char key[64];
    /* enough to grow the hash table several times */
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "linear|k%d", i);
        assert_int_equal(
            sf_profile_db_insert(db, key, SF_OP_LINEAR, i * 1e-6, i * 2e-6, 1 + i % 5, &err),
            SF_OK);
    }
    assert_int_equal(sf_profile_db_count(db), 1000);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "linear|k%d", i);
        const sf_profile_entry *e = sf_profile_db_lookup(db, key);
        assert_non_null(e);
        assert_true(e->fwd_s == i * 1e-6 && e->bwd_s == i * 2e-6);
        assert_int_equal(e->reps, 1 + i % 5);
    }
    assert_null(sf_profile_db_lookup(db, "linear|k1000"));
    /* insert of an existing key replaces its times, count unchanged */
    assert_int_equal(sf_profile_db_insert(db, "linear|k7", SF_OP_LINEAR, 1.0, 2.0, 9, &err), SF_OK);
    assert_int_equal(sf_profile_db_count(db), 1000);
    assert_true(sf_profile_db_lookup(db, "linear|k7")->fwd_s == 1.0);
    /* bad values are refused */
    assert_int_equal(sf_profile_db_insert(db, "x|y", SF_OP_LINEAR, -1, 0, 1, &err), SF_ERR_RANGE);
    assert_int_equal(sf_profile_db_insert(db, "x|y", SF_OP_LINEAR, NAN, 0, 1, &err), SF_ERR_RANGE);
    assert_int_equal(sf_profile_db_insert(db, "x|y", SF_OP_LINEAR, 0, 0, 0, &err), SF_ERR_RANGE);
    assert_int_equal(sf_profile_db_insert(db, "", SF_OP_LINEAR, 0, 0, 1, &err), SF_ERR_INVALID);
    assert_int_equal(sf_profile_db_count(db), 1000);
    sf_profile_db_free(db);
}

static void test_db_save_load(void **state) {
    (void)state;
    sf_error err = {0};
    char path[256];
    tmp_path(path, sizeof path, "db.json");
    sf_profile_db *db = sf_profile_db_new("kind \"quoted\"");
    /* awkward doubles: they must come back bit for bit */
    const double t[] = {0.1, 1.0 / 3.0, 1e-300, 0.0, 123456789.125, 2.2250738585072014e-308};
    char key[64];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "conv2d|z%d", 5 - i); /* inserted in reverse key order */
        assert_int_equal(sf_profile_db_insert(db, key, SF_OP_CONV2D, t[i], t[5 - i], i + 1, &err),
                         SF_OK);
    }
    assert_int_equal(sf_profile_db_save_json(db, path, &err), SF_OK);
    sf_profile_db *back = sf_profile_db_load_json(path, &err);
    assert_non_null(back);
    assert_string_equal(sf_profile_db_device_kind(back), "kind \"quoted\"");
    assert_int_equal(sf_profile_db_count(back), 6);
    for (int i = 0; i < 6; i++) {
        const sf_profile_entry *a = sf_profile_db_entry(db, i);
        const sf_profile_entry *b = sf_profile_db_lookup(back, a->key);
        assert_non_null(b);
        assert_memory_equal(&a->fwd_s, &b->fwd_s, sizeof(double));
        assert_memory_equal(&a->bwd_s, &b->bwd_s, sizeof(double));
        assert_int_equal(a->reps, b->reps);
        assert_int_equal(a->op, b->op);
    }
    /* the file lists entries sorted by key, and writing it again gives the same bytes */
    assert_string_equal(sf_profile_db_entry(back, 0)->key, "conv2d|z0");
    char *t1 = sf_profile_db_to_json(db, &err), *t2 = sf_profile_db_to_json(back, &err);
    assert_non_null(t1);
    assert_non_null(t2);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    sf_profile_db_free(back);
    sf_profile_db_free(db);

    /* an empty database round-trips too */
    db = sf_profile_db_new(NULL);
    assert_int_equal(sf_profile_db_save_json(db, path, &err), SF_OK);
    back = sf_profile_db_load_json(path, &err);
    assert_non_null(back);
    assert_int_equal(sf_profile_db_count(back), 0);
    assert_string_equal(sf_profile_db_device_kind(back), "");
    sf_profile_db_free(back);
    sf_profile_db_free(db);
    unlink(path);

    /* a missing file: an I/O error naming it */
    sf_error_clear(&err);
    assert_null(sf_profile_db_load_json("/nonexistent/costs.json", &err));
    assert_int_equal(err.code, SF_ERR_IO);
}

static void expect_parse_error(const char *text, const char *needle) {
    sf_error err = {0};
    sf_profile_db *db = sf_profile_db_parse_json(text, "c.json", &err);
    if (db) {
        sf_profile_db_free(db);
        fail_msg("accepted: %s", text);
    }
    assert_true(err.code < 0);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
    assert_non_null(strstr(err.msg, "c.json"));
}

#define HEAD "{\"format\": \"soapflow-costs\", \"version\": 1, \"device_kind\": \"k\", "

static void test_db_strict_reading(void **state) {
    (void)state;
    expect_parse_error("{\n  \"format\": \"soapflow-costs\",,\n}", "c.json:2:");
    expect_parse_error("{\"format\": \"soapflow-model\"}", "not a costs file");
    expect_parse_error(HEAD "\"entries\": [], \"extra\": 1}", "unknown key 'extra'");
    expect_parse_error("{\"format\": \"soapflow-costs\", \"version\": 1, \"entries\": []}",
                       "missing key 'device_kind'");
    expect_parse_error("{\"format\": \"soapflow-costs\", \"version\": 2, \"device_kind\": \"k\", "
                       "\"entries\": []}",
                       "version");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", "
                            "\"fwd_s\": -1, \"bwd_s\": 0, \"reps\": 1}]}",
                       "entries[0]: field 'fwd_s'");
    /* finite but beyond SF_PROFILE_TIME_MAX_S: sums of such times were infinite */
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", "
                            "\"fwd_s\": 0, \"bwd_s\": 1e308, \"reps\": 1}]}",
                       "entries[0]: field 'bwd_s': must be a number from 0 to 1e+09");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", "
                            "\"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 0}]}",
                       "field 'reps'");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"conv2d\", "
                            "\"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 1}]}",
                       "does not start with 'conv2d|'");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"nosuch\", "
                            "\"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 1}]}",
                       "field 'op'");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", "
                            "\"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 1, \"x\": 0}]}",
                       "unknown key 'x'");
    expect_parse_error(HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", "
                            "\"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 1}, {\"key\": \"linear|a\", "
                            "\"op\": \"linear\", \"fwd_s\": 1, \"bwd_s\": 0, \"reps\": 1}]}",
                       "entries[1]: duplicate key");
    /* integers are numbers too */
    sf_error err = {0};
    sf_profile_db *db = sf_profile_db_parse_json(
        HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", \"fwd_s\": 1, "
             "\"bwd_s\": 2, \"reps\": 3}]}",
        "c.json", &err);
    assert_non_null(db);
    assert_true(sf_profile_db_lookup(db, "linear|a")->bwd_s == 2.0);
    sf_profile_db_free(db);
}

/* A time of -0 (a fuzzer's find) is a time of 0: it was stored as -0 and
 * written "-0", which reads back as the integer 0 and writes "0", so a file
 * did not write the same twice. Stored as 0, it writes "0" from the start. */
static void test_db_negative_zero(void **state) {
    (void)state;
    sf_error err = {0};
    sf_profile_db *db = sf_profile_db_parse_json(
        HEAD "\"entries\": [{\"key\": \"linear|a\", \"op\": \"linear\", \"fwd_s\": -0.0e-6, "
             "\"bwd_s\": -0, \"reps\": 3}]}",
        "c.json", &err);
    assert_non_null(db);
    const sf_profile_entry *e = sf_profile_db_lookup(db, "linear|a");
    assert_false(signbit(e->fwd_s));
    assert_false(signbit(e->bwd_s));
    assert_int_equal(sf_profile_db_insert(db, "linear|b", SF_OP_LINEAR, -0.0, 1, 1, &err), SF_OK);
    assert_false(signbit(sf_profile_db_lookup(db, "linear|b")->fwd_s));
    char *text = sf_profile_db_to_json(db, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"fwd_s\": 0, \"bwd_s\": 0,"));
    assert_null(strstr(text, "-0"));
    free(text);
    sf_profile_db_free(db);
}

/* ---- the model ---------------------------------------------------------- */

static void test_model_hits_and_misses(void **state) {
    fixture *f = *state;
    sf_error err = {0};
    char key[SF_PROFILE_KEY_MAX];
    sf_tile full = sf_tile_full(&f->conv->space);
    sf_tile half = split_tile(f->conv, 0, 2, 0);
    sf_profile_db *db = sf_profile_db_new("cpu-rank");
    assert_non_null(sf_profile_key(f->conv, &full, key, sizeof key));
    assert_int_equal(sf_profile_db_insert(db, key, SF_OP_CONV2D, 1.25e-3, 2.5e-3, 3, &err), SF_OK);

    sf_cost_model *ref = sf_cost_analytic_new(f->cpu, NULL);
    sf_cost_model *cm = sf_cost_profiled_new(f->cpu, db, sf_cost_analytic_new(f->cpu, NULL));
    assert_non_null(cm);
    assert_string_equal(sf_cost_name(cm), "profiled");
    assert_ptr_equal(sf_cost_profiled_db(cm), db);
    assert_null(sf_cost_profiled_db(ref));

    /* hits: the database's times */
    assert_true(sf_cost_task_s(cm, f->conv, &full, 0, SF_PASS_FWD) == 1.25e-3);
    assert_true(sf_cost_task_s(cm, f->conv, &full, 3, SF_PASS_BWD) == 2.5e-3);
    /* updates and input operators: the fallback, and not misses */
    assert_true(sf_cost_task_s(cm, f->conv, &full, 0, SF_PASS_UPDATE) ==
                sf_cost_task_s(ref, f->conv, &full, 0, SF_PASS_UPDATE));
    sf_tile xt = sf_tile_full(&f->x->space);
    assert_true(sf_cost_task_s(cm, f->x, &xt, 0, SF_PASS_FWD) ==
                sf_cost_task_s(ref, f->x, &xt, 0, SF_PASS_FWD));
    /* misses: the fallback's times, counted by type */
    assert_true(sf_cost_task_s(cm, f->conv, &half, 0, SF_PASS_FWD) ==
                sf_cost_task_s(ref, f->conv, &half, 0, SF_PASS_FWD));
    sf_tile rt = sf_tile_full(&f->relu->space);
    assert_true(sf_cost_task_s(cm, f->relu, &rt, 1, SF_PASS_BWD) ==
                sf_cost_task_s(ref, f->relu, &rt, 1, SF_PASS_BWD));
    sf_cost_task_s(cm, f->relu, &rt, 1, SF_PASS_FWD);

    sf_profile_stats st;
    assert_int_equal(sf_cost_profiled_stats(cm, &st), SF_OK);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 3);
    assert_int_equal(st.misses_by_type[SF_OP_CONV2D], 1);
    assert_int_equal(st.misses_by_type[SF_OP_RELU], 2);
    assert_int_equal(st.misses_by_type[SF_OP_INPUT], 0);
    char buf[256];
    assert_int_equal(sf_cost_profiled_misses(cm, buf, sizeof buf), 2);
    assert_string_equal(buf, "conv2d (1 task), relu (2 tasks)");
    /* truncation is safe */
    char small[8];
    assert_int_equal(sf_cost_profiled_misses(cm, small, sizeof small), 2);
    assert_int_equal(strlen(small), sizeof small - 1);
    sf_cost_profiled_reset_stats(cm);
    assert_int_equal(sf_cost_profiled_misses(cm, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    /* an analytic model has no profile statistics */
    assert_int_equal(sf_cost_profiled_stats(ref, &st), SF_ERR_INVALID);
    assert_int_equal(sf_cost_profiled_misses(ref, buf, sizeof buf), 0);
    sf_cost_free(cm);

    /* on a machine of another device kind, the same key misses */
    db = sf_profile_db_new("cpu-rank");
    assert_int_equal(sf_profile_db_insert(db, key, SF_OP_CONV2D, 1.25e-3, 2.5e-3, 3, &err), SF_OK);
    cm = sf_cost_profiled_new(f->p100, db, sf_cost_analytic_new(f->p100, NULL));
    sf_cost_model *ref_p = sf_cost_analytic_new(f->p100, NULL);
    assert_true(sf_cost_task_s(cm, f->conv, &full, 0, SF_PASS_FWD) ==
                sf_cost_task_s(ref_p, f->conv, &full, 0, SF_PASS_FWD));
    assert_int_equal(sf_cost_profiled_stats(cm, &st), SF_OK);
    assert_int_equal(st.misses, 1);
    sf_cost_free(ref_p);
    sf_cost_free(cm);
    sf_cost_free(ref);

    /* NULL arguments: NULL, and whatever was passed is freed (ASan checks) */
    assert_null(sf_cost_profiled_new(f->cpu, sf_profile_db_new("k"), NULL));
    assert_null(sf_cost_profiled_new(f->cpu, NULL, sf_cost_analytic_new(f->cpu, NULL)));
}

/* ---- the profiler ------------------------------------------------------- */

static int count_op(const sf_profile_db *db, sf_op_type t) {
    int n = 0;
    for (int i = 0; i < sf_profile_db_count(db); i++)
        if (sf_profile_db_entry(db, i)->op == t) n++;
    return n;
}

static void test_profile_lenet5(void **state) {
    fixture *f = *state;
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 16;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    assert_non_null(g);
    sf_profile_db *db = sf_profile_db_new(NULL);
    sf_profile_options o;
    sf_profile_options_default(&o);
    o.reps = 1;
    o.warmup = 0;
    o.max_devices = 2;
    sf_profile_report r;
    assert_int_equal(sf_profile_model(g, f->cpu, db, &o, &r, &err), SF_OK);
    assert_string_equal(sf_profile_db_device_kind(db), "cpu-rank");
    assert_true(r.measured > 0);
    assert_int_equal(r.reused, 0);
    assert_int_equal(r.failed, 0);
    assert_int_equal(r.measured + r.reused + r.skipped, r.keys);
    assert_int_equal(sf_profile_db_count(db), r.measured);
    assert_true(count_op(db, SF_OP_CONV2D) > 0);
    assert_true(count_op(db, SF_OP_LINEAR) > 0);
    for (int i = 0; i < sf_profile_db_count(db); i++) {
        const sf_profile_entry *e = sf_profile_db_entry(db, i);
        assert_true(isfinite(e->fwd_s) && e->fwd_s >= 0 && isfinite(e->bwd_s) && e->bwd_s >= 0);
        assert_int_equal(e->reps, 1);
    }
    /* what was skipped for want of a kernel is what the kernels lack (the kernels of
     * lenet5's operators take every tile) */
    int skipped = 0;
    for (int t = 0; t < SF_OP_COUNT; t++) {
        if (r.skipped_by_type[t]) assert_false(sf_kernel_available((sf_op_type)t, 1));
        skipped += r.skipped_by_type[t];
    }
    assert_int_equal(skipped, r.skipped - r.too_large - r.failed);

    /* every key of every part of the data and model baselines on 2 devices is there */
    sf_machine *m2 = sf_machine_subset(f->cpu, 2, &err);
    assert_non_null(m2);
    sf_strategy *s = sf_strategy_new(g);
    char key[SF_PROFILE_KEY_MAX];
    for (int b = 0; b < 2; b++) {
        if (b == 0)
            assert_int_equal(sf_strategy_data(s, g, m2), SF_OK);
        else
            assert_int_equal(sf_strategy_model(s, g, m2), SF_OK);
        for (int i = 0; i < sf_graph_num_ops(g); i++) {
            const sf_op *op = sf_graph_op(g, i);
            const sf_config *c = sf_strategy_get(s, i);
            if (op->type == SF_OP_INPUT || !sf_kernel_available(op->type, 1)) continue;
            for (int p = 0; p < c->n_parts; p++) {
                sf_tile t;
                sf_config_part_tile(op, c, p, &t);
                assert_non_null(sf_profile_key(op, &t, key, sizeof key));
                if (!sf_profile_db_lookup(db, key)) fail_msg("not profiled: %s", key);
            }
        }
    }
    /* so a simulation over it misses only operators without kernels */
    sf_cost_model *cm = sf_cost_profiled_new(m2, db, sf_cost_analytic_new(m2, NULL));
    assert_non_null(cm);
    sf_sim *sim = sf_sim_new(g, m2, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result res;
    assert_int_equal(sf_strategy_data(s, g, m2), SF_OK);
    assert_int_equal(sf_sim_run(sim, s, &res, &err), SF_OK);
    assert_true(res.iter_s > 0);
    sf_profile_stats st;
    assert_int_equal(sf_cost_profiled_stats(cm, &st), SF_OK);
    assert_true(st.hits > 0);
    for (int t = 0; t < SF_OP_COUNT; t++)
        if (st.misses_by_type[t]) assert_false(sf_kernel_available((sf_op_type)t, 1));
    sf_sim_free(sim);

    /* a second run over the same database measures nothing */
    db = sf_profile_db_new(NULL);
    assert_int_equal(sf_profile_model(g, f->cpu, db, &o, &r, &err), SF_OK);
    int first = r.measured;
    sf_profile_report r2;
    assert_int_equal(sf_profile_model(g, f->cpu, db, &o, &r2, &err), SF_OK);
    assert_int_equal(r2.measured, 0);
    assert_int_equal(r2.reused, first);
    assert_int_equal(r2.keys, r.keys);
    assert_int_equal(sf_profile_db_count(db), first);

    /* a database of another device kind is refused */
    assert_int_equal(sf_profile_model(g, f->p100, db, &o, &r2, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "cpu-rank"));
    /* bad options */
    o.reps = 0;
    assert_int_equal(sf_profile_model(g, f->cpu, db, &o, &r2, NULL), SF_ERR_INVALID);

    sf_profile_db_free(db);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_machine_free(m2);
    sf_graph_free(g);
}

/* More devices, more keys; one device, one key per operator. */
static void test_profile_space_size(void **state) {
    fixture *f = *state;
    sf_error err = {0};
    sf_profile_options o;
    sf_profile_options_default(&o);
    o.reps = 1;
    o.warmup = 0;
    int keys[3];
    for (int d = 1; d <= 3; d++) {
        sf_profile_db *db = sf_profile_db_new(NULL);
        sf_profile_report r;
        o.max_devices = d;
        assert_int_equal(sf_profile_model(f->g, f->cpu, db, &o, &r, &err), SF_OK);
        keys[d - 1] = r.keys;
        sf_profile_db_free(db);
    }
    assert_int_equal(keys[0], 2); /* conv and relu, whole */
    assert_true(keys[1] > keys[0]);
    assert_true(keys[2] > keys[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_text),
        cmocka_unit_test(test_key_extents_only),
        cmocka_unit_test(test_db_insert_lookup),
        cmocka_unit_test(test_db_save_load),
        cmocka_unit_test(test_db_strict_reading),
        cmocka_unit_test(test_db_negative_zero),
        cmocka_unit_test(test_model_hits_and_misses),
        cmocka_unit_test(test_profile_lenet5),
        cmocka_unit_test(test_profile_space_size),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
