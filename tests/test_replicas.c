/*
 * test_replicas.c - a pipeline's identical data-parallel replicas simulated
 * once give what simulating every replica gives (docs/simulator.md, "Identical
 * replicas"): Megatron 3D layouts of a small GPT on multi-node machines, every
 * figure compared, then delta updates that keep the replicas alike (each
 * operator's new config repeated in every replica) and updates that break them
 * (one replica's devices moved), with reverts, each against a full run of
 * every replica.
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
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static sf_graph *gpt(int batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.layers = 4;
    o.hidden = 64;
    o.heads = 8;
    o.seq_len = 16;
    o.vocab = 96;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    if (!g) fail_msg("gpt: %s", err.msg);
    return g;
}

static sf_machine *cluster(const char *preset, int nodes) {
    sf_machine_desc d;
    sf_error err = {0};
    assert_int_equal(sf_machine_preset_desc(preset, &d, &err), SF_OK);
    d.nodes = nodes;
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fail_msg("%s: %s", preset, err.msg);
    return m;
}

static int close_to(double a, double b, double scale) {
    double mag = fmax(fmax(fabs(a), fabs(b)), scale);
    return fabs(a - b) <= 1e-12 * mag;
}

/* Every figure of the folded result f equals every replica's w. */
static void same(const char *what, sf_sim *fs, const sf_sim_result *f, sf_sim *ws,
                 const sf_sim_result *w) {
    double T = w->iter_s;
    if (f->iter_s != w->iter_s)
        fail_msg("%s: folded %.17g s, every replica %.17g s", what, f->iter_s, w->iter_s);
    assert_true(f->makespan_s == w->makespan_s);
    assert_true(close_to(f->input_s, w->input_s, 0));
    assert_true(close_to(f->compute_s, w->compute_s, T));
    assert_true(close_to(f->transfer_s, w->transfer_s, T));
    if (!close_to(f->sync_s, w->sync_s, T))
        fail_msg("%s: sync %.17g s, every replica %.17g s", what, f->sync_s, w->sync_s);
    assert_true(f->transfer_bytes == w->transfer_bytes);
    if (f->sync_bytes != w->sync_bytes)
        fail_msg("%s: sync bytes %lld, every replica %lld", what, (long long)f->sync_bytes,
                 (long long)w->sync_bytes);
    assert_true(f->intra_bytes == w->intra_bytes);
    assert_true(f->inter_bytes == w->inter_bytes);
    assert_int_equal(f->fits, w->fits);
    assert_true(f->peak_mem_bytes == w->peak_mem_bytes);
    assert_true(f->live_peak_bytes == w->live_peak_bytes);
    assert_int_equal(f->n_devices, w->n_devices);
    for (int d = 0; d < w->n_devices; d++) {
        if (!close_to(f->device_busy_s[d], w->device_busy_s[d], T))
            fail_msg("%s: device %d busy %.17g, every replica %.17g", what, d,
                     f->device_busy_s[d], w->device_busy_s[d]);
        if (f->device_mem_bytes[d] != w->device_mem_bytes[d])
            fail_msg("%s: device %d memory %.17g, every replica %.17g", what, d,
                     f->device_mem_bytes[d], w->device_mem_bytes[d]);
        if (w->device_live_bytes) {
            assert_true(f->device_live_bytes[d] == w->device_live_bytes[d]);
            assert_true(f->device_live_peak_s[d] == w->device_live_peak_s[d]);
            for (int k = 0; k < SF_SIM_MEM_KIND_COUNT; k++)
                assert_true(f->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k] ==
                            w->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k]);
        }
        double a[SF_SIM_TOTAL_COUNT], b[SF_SIM_TOTAL_COUNT];
        sf_error err = {0};
        assert_int_equal(sf_sim_kind_totals(fs, d, a, &err), SF_OK);
        assert_int_equal(sf_sim_kind_totals(ws, d, b, &err), SF_OK);
        for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++)
            if (!close_to(a[k], b[k], T))
                fail_msg("%s: device %d total %d %.17g, every replica %.17g", what, d, k, a[k],
                         b[k]);
    }
}

static sf_sim_result run(sf_sim *sim, const sf_strategy *s) {
    sf_error err = {0};
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
    return r;
}

/* A random config of op inside the T devices [base, base + T) of replica 0,
 * repeated in each of the D replicas (replica r's devices r * shift further):
 * 0, or -1 when it splits the samples too finely. */
static int repeated(const sf_op *op, const sf_machine *node, sf_rng *rng, int base, int D,
                    int shift, sf_config *out) {
    sf_config c;
    sf_config_random(op, node, rng, &c);
    if (c.n_parts * D > SF_MAX_PARTS) return -1;
    *out = c;
    out->degree[0] = c.degree[0] * D;
    out->n_parts = c.n_parts * D;
    for (int r = 0; r < D; r++)
        for (int p = 0; p < c.n_parts; p++)
            out->device[r * c.n_parts + p] = (int16_t)(base + r * shift + c.device[p]);
    return 0;
}

typedef struct replica_case {
    const char *preset;
    int nodes, tp, pp, dp, batch, micro_batch;
    sf_pipe_schedule schedule;
    int chunks;
    sf_sync_mode sync;
    sf_sync_scheme scheme;
    int timeline, fast, folds, moves; /* folds: the replicas simulated as one (0: none) */
    uint64_t seed;
    int recompute; /* every operator but the inputs recomputes */
} replica_case;

static void check_case(const replica_case *rc) {
    sf_graph *g = gpt(rc->batch);
    sf_machine *mach = cluster(rc->preset, rc->nodes);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_error err = {0};
    sf_megatron3d_options mo;
    sf_megatron3d_options_default(&mo);
    mo.tp = rc->tp;
    mo.pp = rc->pp;
    mo.dp = rc->dp;
    mo.micro_batch = rc->micro_batch;
    mo.schedule = rc->schedule;
    mo.chunks = rc->chunks;
    sf_strategy *s = sf_strategy_new(g);
    if (sf_strategy_megatron3d(s, g, mach, &mo, &err) != SF_OK) fail_msg("%s", err.msg);
    for (int i = 0; rc->recompute && i < sf_graph_num_ops(g); i++)
        sf_strategy_config(s, i)->recompute = sf_graph_op(g, i)->type != SF_OP_INPUT;
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.sync = rc->sync;
    so.scheme = rc->scheme;
    so.memory_timeline = rc->timeline;
    so.pipeline_fast = rc->fast;
    so.keep_schedule = !rc->fast;
    sf_sim_options wo = so;
    wo.every_replica = 1;
    sf_sim *fs = sf_sim_new(g, mach, cm, &so, &err), *ws = sf_sim_new(g, mach, cm, &wo, &err);
    assert_non_null(fs);
    assert_non_null(ws);
    char what[160];
    snprintf(what, sizeof what, "%s[%d] tp %d pp %d dp %d %s", rc->preset, rc->nodes, rc->tp,
             rc->pp, rc->dp, sf_pipe_schedule_name(rc->schedule));
    sf_sim_result f = run(fs, s), w = run(ws, s);
    assert_int_equal(w.replicas, 0);
    if (f.replicas != rc->folds)
        fail_msg("%s: %d replicas folded, expected %d", what, f.replicas, rc->folds);
    same(what, fs, &f, ws, &w);
    if (f.replicas) assert_true(f.tasks < w.tasks);

    /* moves: each operator's config random inside replica 0's first node of
     * its stage, repeated over the replicas; one in four moves one replica
     * only (no longer alike: simulated whole, then alike again on a revert) */
    int per = sf_machine_get_desc(mach)->devices_per_node, T = rc->tp;
    int n = sf_graph_num_ops(g), stage_devs = rc->tp * rc->dp;
    sf_machine *node = sf_machine_subset(mach, T, &err);
    assert_non_null(node);
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_pipeline_op_chunks(sf_strategy_pipeline(s), g, chunk);
    sf_rng rng;
    sf_rng_seed(&rng, rc->seed);
    for (int it = 0, done = 0; it < 20 * rc->moves && done < rc->moves; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n - 1));
        int base = (chunk[op] % rc->pp) * stage_devs;
        sf_config c;
        if (repeated(sf_graph_op(g, op), node, &rng, base, rc->dp, T, &c)) continue;
        int odd = sf_rng_below(&rng, 4) == 0;
        if (odd) /* the last replica's parts one device along inside its node */
            for (int p = c.n_parts - c.n_parts / rc->dp; p < c.n_parts; p++)
                c.device[p] = (int16_t)(c.device[p] / per * per + (c.device[p] + 1) % per);
        sf_strategy *t = sf_strategy_clone(s);
        sf_config_copy(sf_strategy_config(t, op), &c);
        int ok = sf_strategy_validate(t, g, mach, NULL) == SF_OK;
        sf_strategy_free(t);
        if (!ok) continue;
        done++;
        assert_int_equal(sf_sim_update(fs, op, &c, &f, &err), SF_OK);
        int back = sf_rng_below(&rng, 3) == 0;
        if (back) assert_int_equal(sf_sim_revert(fs, &f, &err), SF_OK);
        else sf_config_copy(sf_strategy_config(s, op), &c);
        w = run(ws, s);
        char step[256];
        snprintf(step, sizeof step, "%s, move %d (%s%s)", what, done, odd ? "one replica" : "all",
                 back ? ", reverted" : "");
        same(step, fs, &f, ws, &w);
    }
    free(chunk);
    sf_machine_free(node);
    sf_strategy_free(s);
    sf_sim_free(fs);
    sf_sim_free(ws);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

static void test_replicas_fold(void **state) {
    (void)state;
    const replica_case cases[] = {
        /* a replica a node: folded */
        {"p100-4x4", 4, 4, 2, 2, 16, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_RING, 1, 0, 2,
         10, 71, 0},
        {"dgx-h100", 4, 8, 2, 2, 8, 1, SF_PIPE_GPIPE, 1, SF_SYNC_BULK, SF_SCHEME_RING, 0, 0, 2, 6,
         72, 0},
        {"dgx-h100", 8, 8, 2, 4, 16, 1, SF_PIPE_INTERLEAVED, 2, SF_SYNC_OVERLAP,
         SF_SCHEME_HIERARCHICAL, 1, 0, 4, 6, 73, 0},
        {"k80-16x4", 4, 4, 2, 2, 16, 2, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_RING, 1, 0, 2,
         6, 74, 0},
        /* two replicas a node: they fold by nodes, two replicas a group */
        {"p100-4x4", 4, 2, 2, 4, 16, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_RING, 1, 0, 2,
         6, 75, 0},
        {"dgx-h100", 4, 2, 2, 8, 32, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_HIERARCHICAL,
         0, 0, 2, 4, 78, 0},
        /* a parameter server is one replica's: all simulated */
        {"p100-4x4", 4, 4, 2, 2, 16, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_PS, 0, 0, 0,
         2, 76, 0},
        /* the fast path on a folded pipeline */
        {"p100-4x4", 4, 4, 2, 2, 96, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_RING, 1, 1, 2,
         4, 77, 0},
        /* recomputation */
        {"dgx-h100", 4, 8, 2, 2, 16, 1, SF_PIPE_1F1B, 1, SF_SYNC_OVERLAP, SF_SCHEME_RING, 1, 0, 2,
         4, 79, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

/* A move that breaks the replicas under a task limit only the folded graph
 * keeps: cut off as a delta update past the limit is, and its revert gives
 * the result before. */
static void test_replicas_limit(void **state) {
    (void)state;
    sf_graph *g = gpt(16);
    sf_machine *mach = cluster("p100-4x4", 4);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_error err = {0};
    sf_megatron3d_options mo;
    sf_megatron3d_options_default(&mo);
    mo.tp = 4;
    mo.pp = 2;
    mo.dp = 2;
    mo.micro_batch = 1;
    sf_strategy *s = sf_strategy_new(g);
    if (sf_strategy_megatron3d(s, g, mach, &mo, &err) != SF_OK) fail_msg("%s", err.msg);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_sim *sim = sf_sim_new(g, mach, cm, &so, &err);
    sf_sim_result a = run(sim, s);
    assert_int_equal(a.replicas, 2);
    sf_sim_set_max_tasks(sim, a.tasks + a.tasks / 2); /* one replica's, not both */
    /* the last operator's second replica one device along in its node */
    int op = sf_graph_num_ops(g) - 1;
    sf_config c = *sf_strategy_get(s, op);
    for (int p = c.n_parts / 2; p < c.n_parts; p++)
        c.device[p] = (int16_t)(c.device[p] / 4 * 4 + (c.device[p] + 1) % 4);
    sf_sim_result r;
    assert_int_equal(sf_sim_update(sim, op, &c, &r, &err), SF_OK);
    assert_int_equal(r.cut_off, 1);
    assert_int_equal(sf_sim_revert(sim, &r, &err), SF_OK);
    assert_true(r.iter_s == a.iter_s);
    assert_int_equal(r.replicas, 2);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicas_fold),
        cmocka_unit_test(test_replicas_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
