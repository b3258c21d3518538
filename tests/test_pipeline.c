/*
 * test_pipeline.c - pipelines in the strategy and the simulator: the
 * schedules' slot orders, GPipe's bubble (p - 1) / (m + p - 1) on a uniform
 * chain with free transfers, 1F1B's first stage holding p micro-batches'
 * activations where GPipe holds m, delta simulation equal to a full one under
 * random configs inside the stages (every schedule, chains and a GPT), the
 * JSON round trip, and the one-line refusals of bad pipelines.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

#include "pipeline_fixtures.h"

static sf_graph *model(const char *name, int batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    if (strcmp(name, "gpt") == 0) {
        o.layers = 4;
        o.hidden = 64;
        o.heads = 4;
        o.seq_len = 16;
        o.vocab = 96;
    }
    sf_error err = {0};
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fail_msg("%s: %s", name, err.msg);
    return g;
}

static sf_machine *machine(const char *name) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(name, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static sf_sim_result run(sf_sim *sim, const sf_strategy *s) {
    sf_error err = {0};
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
    return r;
}

/* Each stage runs every (micro-batch, chunk) forward and backward once, a
 * backward after its forward; 1F1B holds at most p - s micro-batches. */
static void test_slots(void **state) {
    (void)state;
    sf_pipeline pl = {0};
    sf_pipe_slot sl[2 * 64 * 4];
    for (int sch = 0; sch < SF_PIPE_SCHEDULE_COUNT; sch++) {
        for (int p = 1; p <= 4; p++) {
            for (int m = p; m <= 16; m += p) {
                pl.stages = p;
                pl.micro_batches = m;
                pl.schedule = sch;
                pl.chunks = sch == SF_PIPE_INTERLEAVED ? 2 : 1;
                for (int s = 0; s < p; s++) {
                    int k = sf_pipeline_slots(&pl, s, sl);
                    assert_int_equal(k, 2 * m * pl.chunks);
                    int seen[64][8][2];
                    memset(seen, 0, sizeof seen);
                    for (int i = 0; i < k; i++) {
                        assert_true(sl[i].mb >= 0 && sl[i].mb < m);
                        assert_int_equal(sl[i].chunk % p, s);
                        int l = sl[i].chunk / p;
                        assert_int_equal(seen[sl[i].mb][l][sl[i].backward]++, 0);
                        if (sl[i].backward) assert_int_equal(seen[sl[i].mb][l][0], 1);
                    }
                    int f = sf_pipeline_in_flight(&pl, s);
                    if (sch == SF_PIPE_GPIPE) assert_int_equal(f, m);
                    if (sch == SF_PIPE_1F1B) assert_int_equal(f, p - s < m ? p - s : m);
                }
            }
        }
    }
    sf_pipe_schedule out;
    int v;
    assert_int_equal(sf_pipe_schedule_parse("interleaved:3", &out, &v), 0);
    assert_int_equal(out, SF_PIPE_INTERLEAVED);
    assert_int_equal(v, 3);
    assert_int_equal(sf_pipe_schedule_parse("1f1b", &out, &v), 0);
    assert_int_equal(v, 1);
    assert_int_not_equal(sf_pipe_schedule_parse("interleaved:1", &out, &v), 0);
    assert_int_not_equal(sf_pipe_schedule_parse("pipedream", &out, &v), 0);
    assert_int_not_equal(sf_pipe_schedule_parse("gpipe:2", &out, &v), 0);
}

/* GPipe on L identical layers over p stages with free transfers: every stage
 * idles (p - 1) / (m + p - 1) of the iteration's pipelined part (the
 * iteration less the optimizer step after the flush), within 1%. */
static void test_gpipe_bubble(void **state) {
    (void)state;
    const int p = 4, L = 32, width = 2048;
    sf_machine *mach = free_links(p);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    for (int m = 4; m <= 16; m *= 2) {
        sf_graph *g = chain(L, width, 256 * m);
        sf_pipeline pl = even(g, p, 1, m, SF_PIPE_GPIPE);
        sf_strategy *s = staged(g, mach, &pl);
        sf_sim_options so;
        sf_sim_options_default(&so);
        sf_error err = {0};
        sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err);
        assert_non_null(sim);
        sf_sim_result r = run(sim, s);
        double want = (double)(p - 1) / (m + p - 1), t0[SF_SIM_TOTAL_COUNT];
        /* the flush: the iteration less the first stage's optimizer step after it */
        assert_int_equal(sf_sim_kind_totals(sim, 0, t0, &err), SF_OK);
        double flush = r.iter_s - t0[SF_SIM_TOTAL_UPDATE];
        for (int d = 0; d < p; d++) {
            double t[SF_SIM_TOTAL_COUNT];
            assert_int_equal(sf_sim_kind_totals(sim, d, t, &err), SF_OK);
            double bubble = 1 - t[SF_SIM_TOTAL_COMPUTE] / flush;
            if (fabs(bubble - want) > 0.01 * want)
                fail_msg("m %d, stage %d: bubble %.4f, want %.4f", m, d, bubble, want);
        }
        sf_sim_free(sim);
        sf_strategy_free(s);
        sf_graph_free(g);
    }
    sf_cost_free(cm);
    sf_machine_free(mach);
}

static double stage0_activations(const sf_graph *g, const sf_machine *mach,
                                 const sf_cost_model *cm, const sf_strategy *s) {
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r = run(sim, s);
    double a = r.device_live_kinds[0 * SF_SIM_MEM_KIND_COUNT + SF_SIM_MEM_ACTIVATIONS];
    sf_sim_free(sim);
    return a;
}

/* The first stage's peak activations: GPipe holds all m micro-batches', 1F1B
 * p micro-batches' worth (within 5%), each micro-batch's share the same. */
static void test_1f1b_memory(void **state) {
    (void)state;
    const int p = 4, m = 16;
    sf_machine *mach = free_links(p);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_graph *g = chain(16, 512, 16 * m);
    sf_pipeline gp = even(g, p, 1, m, SF_PIPE_GPIPE), ob = gp;
    ob.schedule = SF_PIPE_1F1B;
    sf_strategy *sg = staged(g, mach, &gp), *so = staged(g, mach, &ob);
    double a_g = stage0_activations(g, mach, cm, sg), a_1 = stage0_activations(g, mach, cm, so);
    double per_mb = a_g / m;
    assert_true(a_g > 0);
    if (fabs(a_1 - p * per_mb) > 0.05 * p * per_mb)
        fail_msg("1f1b holds %.0f bytes of activations, %.2f micro-batches' worth; want %d",
                 a_1, a_1 / per_mb, p);
    sf_strategy_free(sg);
    sf_strategy_free(so);
    sf_graph_free(g);
    sf_cost_free(cm);
    sf_machine_free(mach);
}

/* Random configs inside the stages (devices folded into the operator's
 * group): delta simulation equals a full one bit for bit, time and peaks. */
static void delta_case(const char *name, int batch, int p, int v, int m, sf_pipe_schedule sch,
                       int moves, uint64_t seed) {
    sf_graph *g = model(name, batch);
    sf_machine *mach = machine("p100-4x4");
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err), *full = sf_sim_new(g, mach, cm, &so, &err);
    assert_non_null(sim);
    assert_non_null(full);
    sf_pipeline pl = even(g, p, v, m, sch);
    sf_strategy *s = staged(g, mach, &pl);
    int n = sf_graph_num_ops(g), group = sf_machine_num_devices(mach) / p;
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_pipeline_op_chunks(&pl, g, chunk);
    sf_sim_result r = run(sim, s);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    int done = 0;
    for (int it = 0; it < moves; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n - 1));
        const sf_op *o = sf_graph_op(g, op);
        sf_config c;
        sf_config_random(o, mach, &rng, &c);
        for (int q = 0; q < c.n_parts; q++)
            c.device[q] = (int16_t)((chunk[op] % p) * group + c.device[q] % group);
        if (sf_rng_below(&rng, 4) == 0) c.recompute = 1;
        if (sf_config_validate(o, mach, &c, NULL) != SF_OK) continue;
        err = (sf_error){0};
        sf_status st = sf_sim_update(sim, op, &c, &r, &err);
        if (st == SF_ERR_INVALID) continue; /* too many samples a part, a tie split two ways */
        if (st != SF_OK) fail_msg("%s move %d: %s", name, it, err.msg);
        if (sf_rng_below(&rng, 5) == 0) { /* and back */
            assert_int_equal(sf_sim_revert(sim, &r, &err), SF_OK);
            sf_sim_result f = run(full, s);
            assert_true(r.iter_s == f.iter_s);
            continue;
        }
        sf_config_copy(sf_strategy_config(s, op), &c);
        done++;
        sf_sim_result f = run(full, s);
        if (r.iter_s != f.iter_s)
            fail_msg("%s move %d: delta %.17g, full %.17g", name, it, r.iter_s, f.iter_s);
        assert_true(r.live_peak_bytes == f.live_peak_bytes);
        assert_true(r.peak_mem_bytes == f.peak_mem_bytes);
    }
    assert_true(done > moves / 4);
    free(chunk);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_sim_free(full);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

static void test_delta_mlp(void **state) {
    (void)state;
    delta_case("mlp", 64, 2, 1, 4, SF_PIPE_GPIPE, 60, 41);
    delta_case("mlp", 64, 4, 1, 8, SF_PIPE_1F1B, 60, 42);
}
static void test_delta_gpt(void **state) {
    (void)state;
    delta_case("gpt", 8, 2, 1, 4, SF_PIPE_1F1B, 40, 43);
    delta_case("gpt", 8, 2, 2, 4, SF_PIPE_INTERLEAVED, 40, 44);
}

/* A pipeline without micro-batches' worth of splitting (m = 1, p = 1) is the
 * plain strategy; the file round trip keeps the pipeline. */
static void test_plain_and_json(void **state) {
    (void)state;
    sf_graph *g = model("mlp", 64);
    sf_machine *mach = machine("p100-4x4");
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err);
    sf_pipeline one = even(g, 1, 1, 1, SF_PIPE_1F1B);
    sf_strategy *s1 = staged(g, mach, &one), *s0 = sf_strategy_clone(s1);
    sf_strategy_set_pipeline(s0, NULL);
    assert_null(sf_strategy_pipeline(s0));
    sf_sim_result a = run(sim, s0), b = run(sim, s1);
    assert_true(fabs(a.iter_s - b.iter_s) <= 1e-12 * a.iter_s);

    sf_pipeline pl = even(g, 2, 2, 4, SF_PIPE_INTERLEAVED);
    sf_strategy *s = staged(g, mach, &pl);
    char *text = sf_strategy_to_json_for(s, g, mach, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"interleaved:2\""));
    sf_strategy *t = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(t, text, "rt.json", g, mach, &err), SF_OK);
    const sf_pipeline *q = sf_strategy_pipeline(t);
    assert_non_null(q);
    assert_int_equal(q->stages, 2);
    assert_int_equal(q->chunks, 2);
    assert_int_equal(q->micro_batches, 4);
    assert_int_equal(q->schedule, SF_PIPE_INTERLEAVED);
    for (int c = 0; c < 4; c++) assert_int_equal(q->first[c], pl.first[c]);
    sf_sim_result x = run(sim, s), y = run(sim, t);
    assert_true(x.iter_s == y.iter_s);
    free(text);
    sf_strategy_free(t);
    sf_strategy_free(s);
    sf_strategy_free(s0);
    sf_strategy_free(s1);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

/* text with the first `from` replaced by `to` (which must be there). */
static char *edited(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    if (!at) fail_msg("'%s' not in the strategy file", from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1, k = (size_t)(at - text);
    char *out = malloc(n);
    memcpy(out, text, k);
    strcpy(out + k, to);
    strcat(out, at + strlen(from));
    return out;
}

static void refused(const sf_graph *g, const sf_machine *m, const char *text, const char *from,
                    const char *to, const char *want) {
    char *json = edited(text, from, to);
    sf_strategy *s = sf_strategy_new(g);
    sf_error err = {0};
    sf_status st = sf_strategy_parse_json(s, json, "bad.json", g, m, &err);
    if (st == SF_OK) fail_msg("accepted: %s", json);
    if (!strstr(err.msg, want)) fail_msg("'%s' does not say '%s'", err.msg, want);
    assert_null(strchr(err.msg, '\n'));
    assert_non_null(strstr(err.msg, "bad.json"));
    assert_null(sf_strategy_pipeline(s));
    sf_strategy_free(s);
    free(json);
}

static void test_refusals(void **state) {
    (void)state;
    sf_graph *g = model("mlp", 64);
    sf_machine *mach = machine("p100-4x4");
    sf_pipeline pl = even(g, 2, 1, 4, SF_PIPE_1F1B);
    sf_strategy *s = staged(g, mach, &pl);
    sf_error err = {0};
    char *text = sf_strategy_to_json_for(s, g, mach, &err);
    assert_non_null(text);
    const char *b = sf_graph_op(g, pl.first[1])->name;
    char good[128], late[128];
    snprintf(good, sizeof good, "\"boundaries\": [\"%s\"]", b);
    snprintf(late, sizeof late, "\"boundaries\": [\"%s\"]",
             sf_graph_op(g, sf_graph_num_ops(g) - 1)->name);
    refused(g, mach, text, "\"micro_batches\": 4", "\"micro_batches\": 5", "do not divide the batch");
    refused(g, mach, text, "\"micro_batches\": 4", "\"micro_batches\": 0", "micro_batches");
    refused(g, mach, text, "\"1f1b\"", "\"pipedream\"", "schedule");
    refused(g, mach, text, "\"1f1b\"", "\"interleaved:1\"", "schedule");
    refused(g, mach, text, good, "\"boundaries\": [\"nope\"]", "not an operator");
    refused(g, mach, text, good, "\"boundaries\": []", "boundaries");
    refused(g, mach, text, good, late, "stages share no device");
    refused(g, mach, text, "\"stages\": 2", "\"stages\": 2, \"extra\": 1", "unknown field");
    free(text);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(mach);
}

/* ---- the fast path: three short runs carried to m ----------------------------- */

static int close_to(double a, double b, double scale) {
    double mag = fmax(fmax(fabs(a), fabs(b)), scale);
    return fabs(a - b) <= 1e-9 * mag;
}

/* Every figure of the fast path's result f equals the full run's (everything
 * every micro-batch), to rounding: sums of equal terms in another order. */
static void same_result(const char *what, sf_sim *fs, const sf_sim_result *f, sf_sim *ws,
                        const sf_sim_result *w) {
    double T = w->iter_s;
    if (!close_to(f->iter_s, w->iter_s, 0))
        fail_msg("%s: fast %.17g s, full %.17g s", what, f->iter_s, w->iter_s);
    assert_true(close_to(f->compute_s, w->compute_s, T));
    assert_true(close_to(f->transfer_s, w->transfer_s, T));
    assert_true(close_to(f->sync_s, w->sync_s, T));
    assert_true(f->transfer_bytes == w->transfer_bytes);
    assert_true(f->sync_bytes == w->sync_bytes);
    assert_true(f->intra_bytes == w->intra_bytes);
    assert_true(f->inter_bytes == w->inter_bytes);
    assert_true(f->tasks == w->tasks);
    assert_true(f->rescheduled < w->tasks);
    assert_int_equal(f->fits, w->fits);
    assert_true(close_to(f->peak_mem_bytes, w->peak_mem_bytes, 0));
    assert_true(close_to(f->live_peak_bytes, w->live_peak_bytes, 0));
    for (int d = 0; d < w->n_devices; d++) {
        if (!close_to(f->device_busy_s[d], w->device_busy_s[d], T))
            fail_msg("%s: device %d busy %.17g, full %.17g", what, d, f->device_busy_s[d],
                     w->device_busy_s[d]);
        assert_true(close_to(f->device_mem_bytes[d], w->device_mem_bytes[d], 0));
        if (!close_to(f->device_live_bytes[d], w->device_live_bytes[d], 0))
            fail_msg("%s: device %d live peak %.17g, full %.17g", what, d,
                     f->device_live_bytes[d], w->device_live_bytes[d]);
        assert_true(close_to(f->device_live_peak_s[d], w->device_live_peak_s[d], T));
        for (int k = 0; k < SF_SIM_MEM_KIND_COUNT; k++)
            assert_true(close_to(f->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k],
                                 w->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k], 0));
        double a[SF_SIM_TOTAL_COUNT], b[SF_SIM_TOTAL_COUNT];
        sf_error err = {0};
        assert_int_equal(sf_sim_kind_totals(fs, d, a, &err), SF_OK);
        assert_int_equal(sf_sim_kind_totals(ws, d, b, &err), SF_OK);
        for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) assert_true(close_to(a[k], b[k], T));
    }
}

/* A pipelined strategy with random configs inside its stages, simulated by
 * the fast path and by every micro-batch; then delta updates and reverts of
 * the fast one against full runs of the changed strategy. Returns 1 when the
 * fast path took the strategy. */
static int fast_case(const char *name, int batch, const char *mach_name, int p, int v, int m,
                     sf_pipe_schedule sch, int moves, uint64_t seed) {
    sf_graph *g = model(name, batch);
    sf_machine *mach = machine(mach_name);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim_options wo = so;
    so.pipeline_fast = 1;
    so.keep_schedule = 0;
    sf_error err = {0};
    sf_sim *fast = sf_sim_new(g, mach, cm, &so, &err), *full = sf_sim_new(g, mach, cm, &wo, &err);
    assert_non_null(fast);
    assert_non_null(full);
    sf_pipeline pl = even(g, p, v, m, sch);
    sf_strategy *s = staged(g, mach, &pl);
    int n = sf_graph_num_ops(g), group = sf_machine_num_devices(mach) / p;
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_pipeline_op_chunks(&pl, g, chunk);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    for (int op = 1; op < n; op++) { /* a random start inside the stages */
        sf_config c;
        sf_config_random(sf_graph_op(g, op), mach, &rng, &c);
        for (int q = 0; q < c.n_parts; q++)
            c.device[q] = (int16_t)((chunk[op] % p) * group + c.device[q] % group);
        sf_strategy *t = sf_strategy_clone(s);
        sf_config_copy(sf_strategy_config(t, op), &c);
        if (sf_config_validate(sf_graph_op(g, op), mach, &c, NULL) == SF_OK &&
            sf_strategy_validate(t, g, mach, NULL) == SF_OK)
            sf_config_copy(sf_strategy_config(s, op), &c);
        sf_strategy_free(t);
    }
    char what[160];
    snprintf(what, sizeof what, "%s p %d v %d m %d %s on %s", name, p, v, m,
             sf_pipe_schedule_name(sch), mach_name);
    sf_sim_result r = run(fast, s), w = run(full, s);
    int took = r.fast_copies > 0;
    assert_int_equal(w.fast_copies, 0);
    if (took) same_result(what, fast, &r, full, &w);
    else assert_true(r.iter_s == w.iter_s);
    for (int it = 0; it < moves; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n - 1));
        sf_config c;
        sf_config_random(sf_graph_op(g, op), mach, &rng, &c);
        for (int q = 0; q < c.n_parts; q++)
            c.device[q] = (int16_t)((chunk[op] % p) * group + c.device[q] % group);
        if (sf_config_validate(sf_graph_op(g, op), mach, &c, NULL) != SF_OK) continue;
        err = (sf_error){0};
        sf_status st = sf_sim_update(fast, op, &c, &r, &err);
        if (st == SF_ERR_INVALID) continue;
        if (st != SF_OK) fail_msg("%s move %d: %s", what, it, err.msg);
        if (sf_rng_below(&rng, 3) == 0) { /* and back */
            assert_int_equal(sf_sim_revert(fast, &r, &err), SF_OK);
        } else {
            sf_config_copy(sf_strategy_config(s, op), &c);
        }
        w = run(full, s);
        if (r.fast_copies) same_result(what, fast, &r, full, &w);
        else assert_true(close_to(r.iter_s, w.iter_s, 0));
    }
    free(chunk);
    sf_strategy_free(s);
    sf_sim_free(fast);
    sf_sim_free(full);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
    return took;
}

static void test_fast_path(void **state) {
    (void)state;
    int took = 0, cases = 0;
    took += fast_case("mlp", 48 * 2, "p100-4x4", 2, 1, 48, SF_PIPE_1F1B, 8, 51), cases++;
    took += fast_case("mlp", 24 * 4, "p100-4x4", 4, 1, 24, SF_PIPE_1F1B, 8, 52), cases++;
    took += fast_case("mlp", 64, "p100-4x4", 4, 1, 64, SF_PIPE_1F1B, 6, 53), cases++;
    took += fast_case("gpt", 32, "p100-4x4", 2, 1, 32, SF_PIPE_1F1B, 6, 54), cases++;
    took += fast_case("gpt", 64, "dgx-h100", 4, 1, 64, SF_PIPE_1F1B, 4, 56), cases++;
    took += fast_case("gpt", 48, "p100-4x4", 4, 1, 48, SF_PIPE_1F1B, 4, 57), cases++;
    took += fast_case("mlp", 64 * 2, "k80-16x4", 4, 1, 64, SF_PIPE_1F1B, 4, 58), cases++;
    /* too few micro-batches to save work, or another schedule: every micro-batch */
    assert_int_equal(fast_case("mlp", 64, "p100-4x4", 4, 1, 8, SF_PIPE_1F1B, 0, 59), 0);
    assert_int_equal(fast_case("gpt", 16, "p100-4x4", 2, 1, 16, SF_PIPE_GPIPE, 0, 60), 0);
    assert_int_equal(fast_case("gpt", 24, "p100-4x4", 2, 2, 24, SF_PIPE_INTERLEAVED, 0, 61), 0);
    if (getenv("SF_TEST_VERBOSE")) fprintf(stderr, "the fast path took %d of %d\n", took, cases);
    if (took < cases - 2) fail_msg("the fast path took %d of %d pipelines", took, cases);
}

/* The input pipeline of a pipelined strategy loads the whole batch, m
 * micro-batches of it, as the plain strategy does; the fast path keeps it. */
static void test_pipeline_input(void **state) {
    (void)state;
    sf_machine_desc d;
    sf_error err = {0};
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, &err), SF_OK);
    d.kind.input_samples_per_s = 2e4; /* input-bound: 96 samples on a device take 4.8 ms */
    d.kind.host_overhead_s = 1e-4;
    sf_machine *mach = sf_machine_build(&d, &err);
    assert_non_null(mach);
    sf_graph *g = model("mlp", 96 * 2);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_sim_options fo = so;
    fo.pipeline_fast = 1;
    fo.keep_schedule = 0;
    sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err), *fast = sf_sim_new(g, mach, cm, &fo, &err);
    sf_pipeline pl = even(g, 2, 1, 48, SF_PIPE_1F1B);
    sf_strategy *s = staged(g, mach, &pl), *plain = sf_strategy_clone(s);
    sf_strategy_set_pipeline(plain, NULL);
    sf_sim_result a = run(sim, plain), b = run(sim, s), c = run(fast, s);
    assert_true(a.input_s > 0);
    if (!close_to(a.input_s, b.input_s, 0))
        fail_msg("pipelined input %.9g s, plain %.9g s", b.input_s, a.input_s);
    assert_true(b.iter_s >= b.input_s && b.iter_s >= b.makespan_s + b.host_s);
    assert_true(close_to(b.iter_s, c.iter_s, 0));
    assert_true(close_to(b.input_s, c.input_s, 0));
    assert_true(close_to(b.makespan_s, c.makespan_s, 0));
    sf_strategy_free(s);
    sf_strategy_free(plain);
    sf_sim_free(sim);
    sf_sim_free(fast);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(mach);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),          cmocka_unit_test(test_gpipe_bubble),
        cmocka_unit_test(test_1f1b_memory),    cmocka_unit_test(test_delta_mlp),
        cmocka_unit_test(test_delta_gpt),      cmocka_unit_test(test_plain_and_json),
        cmocka_unit_test(test_refusals),       cmocka_unit_test(test_fast_path),
        cmocka_unit_test(test_pipeline_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
