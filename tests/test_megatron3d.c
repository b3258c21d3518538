/*
 * test_megatron3d.c - Megatron's 3D parallelism (sf_strategy_megatron3d, the
 * megatron:tp=T,pp=P,... baseline) and block boundaries (sf_pipeline_blocks):
 * pp = 1 is megatron:tp=T config for config; a pipelined layout validates and
 * simulates; each stage owns the contiguous block of T D devices Megatron's
 * rank order gives it (tensor fastest), its tensor groups inside a node;
 * boundaries sit at transformer blocks with the embeddings first and the head
 * last; the baseline string gives the C API's strategy; refusals in one line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static sf_graph *gpt(int layers, int64_t batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.layers = layers;
    o.hidden = 64;
    o.heads = 8;
    o.seq_len = 16;
    o.vocab = 96;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

static sf_machine *machine(const char *name) {
    sf_error err = {0};
    sf_machine *m = sf_machine_open(name, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static sf_megatron3d_options opts(int tp, int pp, int dp, int mb, sf_pipe_schedule sch, int v) {
    sf_megatron3d_options o;
    sf_megatron3d_options_default(&o);
    o.tp = tp;
    o.pp = pp;
    o.dp = dp;
    o.micro_batch = mb;
    o.schedule = (int)sch;
    o.chunks = v;
    return o;
}

static double simulate(const sf_graph *g, const sf_machine *m, const sf_strategy *s, int *fits) {
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
    if (fits) *fits = r.fits;
    sf_sim_free(sim);
    sf_cost_free(cm);
    return r.iter_s;
}

/* pp 1 with one micro-batch: exactly megatron:tp=T, for T = 1, 2, 4, 8, sp or not. */
static void test_pp1_is_megatron(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 16);
    sf_machine *m = machine("dgx-a100[16]");
    for (int sp = 0; sp < 2; sp++) {
        for (int tp = 1; tp <= 8; tp *= 2) {
            sf_strategy *a = sf_strategy_new(g), *b = sf_strategy_new(g);
            sf_error err = {0};
            assert_int_equal(sf_strategy_megatron(a, g, m, tp, sp, &err), SF_OK);
            sf_megatron3d_options o = opts(tp, 1, 0, 0, SF_PIPE_1F1B, 1);
            o.sp = sp;
            if (sf_strategy_megatron3d(b, g, m, &o, &err) != SF_OK) fail_msg("%s", err.msg);
            assert_null(sf_strategy_pipeline(b));
            for (int i = 0; i < sf_graph_num_ops(g); i++)
                assert_true(sf_config_equal(sf_strategy_get(a, i), sf_strategy_get(b, i)));
            assert_true(simulate(g, m, a, NULL) == simulate(g, m, b, NULL));
            sf_strategy_free(a);
            sf_strategy_free(b);
        }
    }
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Every operator of stage s on devices [s T D, (s + 1) T D); each part of
 * data-parallel group d inside [s T D + d T, + T): a tensor group in a node. */
static void check_layout(const sf_graph *g, const sf_machine *m, const sf_strategy *s, int T,
                         int P, int D) {
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    assert_non_null(pl);
    assert_int_equal(pl->stages, P);
    int n = sf_graph_num_ops(g);
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_pipeline_op_chunks(pl, g, chunk);
    int dpn = sf_machine_get_desc(m)->devices_per_node;
    int used[SF_MAX_DEVICES] = {0};
    for (int i = 0; i < n; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        int stage = chunk[i] % P, lo = stage * T * D;
        int per = c->n_parts / D;
        for (int q = 0; q < c->n_parts; q++) {
            int d = c->device[q];
            assert_true(d >= lo && d < lo + T * D);
            int grp = lo + q / per * T;
            assert_true(d >= grp && d < grp + T);
            assert_int_equal(d / dpn, grp / dpn);
            used[d] = 1;
        }
    }
    for (int d = 0; d < T * P * D; d++) assert_true(used[d]);
    free(chunk);
}

/* Pipelined layouts validate, simulate, and keep to their devices; the
 * boundaries are the blocks' layer norms, the embeddings in chunk 0, the LM
 * head and the loss in the last. */
static void test_layouts(void **state) {
    (void)state;
    sf_graph *g = gpt(8, 32);
    sf_machine *m = machine("dgx-a100[16]");
    struct {
        int tp, pp, dp, mb, v;
        sf_pipe_schedule sch;
        int micro;
    } cases[] = {
        {4, 2, 0, 0, 1, SF_PIPE_1F1B, 16},      /* dp 2, mb 1: 16 micro-batches */
        {2, 4, 0, 2, 1, SF_PIPE_GPIPE, 8},      /* dp 2, mb 2 */
        {2, 2, 4, 4, 2, SF_PIPE_INTERLEAVED, 2}, /* interleaved over 4 chunks */
        {8, 2, 1, 4, 1, SF_PIPE_1F1B, 8},       /* one node a stage */
        {1, 8, 2, 8, 1, SF_PIPE_1F1B, 2},       /* one block a stage */
        {2, 2, 2, 0, 1, SF_PIPE_1F1B, 16},      /* 8 of 16 devices */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sf_strategy *s = sf_strategy_new(g);
        sf_error err = {0};
        sf_megatron3d_options o = opts(cases[k].tp, cases[k].pp, cases[k].dp, cases[k].mb,
                                       cases[k].sch, cases[k].v);
        if (sf_strategy_megatron3d(s, g, m, &o, &err) != SF_OK) fail_msg("case %zu: %s", k, err.msg);
        const sf_pipeline *pl = sf_strategy_pipeline(s);
        assert_non_null(pl);
        assert_int_equal(pl->micro_batches, cases[k].micro);
        assert_int_equal(pl->schedule, cases[k].sch);
        int D = cases[k].dp ? cases[k].dp : 16 / (cases[k].tp * cases[k].pp);
        check_layout(g, m, s, cases[k].tp, cases[k].pp, D);
        int nc = pl->stages * pl->chunks;
        for (int c = 1; c < nc; c++) {
            const char *nm = sf_graph_op(g, pl->first[c])->name;
            size_t len = strlen(nm);
            assert_true(len > 5 && strcmp(nm + len - 5, ".ln_1") == 0);
        }
        /* chunks of 8 / nc blocks each */
        int blocks_before = atoi(sf_graph_op(g, pl->first[1])->name + 1);
        assert_int_equal(blocks_before, 8 / nc);
        int *chunk = malloc((size_t)sf_graph_num_ops(g) * sizeof *chunk);
        sf_pipeline_op_chunks(pl, g, chunk);
        assert_int_equal(chunk[sf_graph_find(g, "wte")], 0);
        assert_int_equal(chunk[sf_graph_find(g, "lm_head")], nc - 1);
        free(chunk);
        int fits = 0;
        double t = simulate(g, m, s, &fits);
        assert_true(t > 0 && fits);
        sf_strategy_free(s);
    }
    sf_machine_free(m);
    sf_graph_free(g);
}

/* The baseline string gives the C API's strategy; recompute and zero apply on top. */
static void test_baseline_string(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 16);
    sf_machine *m = machine("dgx-a100[16]");
    sf_strategy *a = sf_strategy_new(g), *b = sf_strategy_new(g);
    sf_error err = {0};
    sf_megatron3d_options o = opts(2, 2, 0, 2, SF_PIPE_INTERLEAVED, 2);
    o.sp = 1;
    assert_int_equal(sf_strategy_megatron3d(a, g, m, &o, &err), SF_OK);
    if (sf_strategy_baseline(b, "megatron-sp:tp=2,pp=2,mb=2,schedule=interleaved:2", g, m, &err) !=
        SF_OK)
        fail_msg("%s", err.msg);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(a, i), sf_strategy_get(b, i)));
    assert_memory_equal(sf_strategy_pipeline(a), sf_strategy_pipeline(b), sizeof(sf_pipeline));
    assert_int_equal(sf_strategy_baseline(b, "megatron:tp=4,pp=2,recompute=full,zero=1", g, m, &err),
                     SF_OK);
    assert_non_null(sf_strategy_pipeline(b));
    int rec = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) rec += sf_strategy_get(b, i)->recompute;
    assert_true(rec > 0);
    assert_int_equal(sf_strategy_validate(b, g, m, &err), SF_OK);
    /* a plain baseline after it drops the pipeline */
    assert_int_equal(sf_strategy_baseline(b, "data", g, m, &err), SF_OK);
    assert_null(sf_strategy_pipeline(b));
    sf_strategy_free(a);
    sf_strategy_free(b);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void refused(const sf_graph *g, const sf_machine *m, const char *name, const char *says) {
    sf_strategy *s = sf_strategy_new(g);
    sf_error err = {0};
    sf_status st = sf_strategy_baseline(s, name, g, m, &err);
    if (st == SF_OK) fail_msg("%s: accepted", name);
    if (!strstr(err.msg, says)) fail_msg("%s: '%s' does not say '%s'", name, err.msg, says);
    assert_null(strchr(err.msg, '\n'));
    sf_strategy_free(s);
}

static void test_refusals(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 16);
    sf_machine *m = machine("dgx-a100[16]");
    refused(g, m, "megatron:tp=4,pp=3", "do not divide the 16 devices");
    refused(g, m, "megatron:tp=4,pp=8", "do not divide the 16 devices");
    refused(g, m, "megatron:tp=4,pp=2,dp=4", "tp 4 x pp 2 x dp 4 = 32");
    refused(g, m, "megatron:tp=3,pp=2", "does not divide a node");
    refused(g, m, "megatron:tp=4,pp=2,mb=3", "not a whole number of micro-batches");
    refused(g, m, "megatron:tp=4,pp=2,mb=0", "mb must be a whole number");
    refused(g, m, "megatron:tp=4,pp=x", "pp must be a whole number");
    refused(g, m, "megatron:tp=4,pp=2,schedule=foo", "schedule must be");
    refused(g, m, "megatron:tp=2,pp=8", "4 transformer blocks, fewer than the 8 chunks");
    refused(g, m, "megatron:tp=2,pp=4,schedule=interleaved:2", "fewer than the 8 chunks");
    /* interleaved with 2 micro-batches on 4 stages... of 2 chunks: 8 > 4 blocks; on
     * 2 stages with 1 micro-batch: not a multiple */
    refused(g, m, "megatron:tp=2,pp=2,mb=4,schedule=interleaved:2", "multiple of the stages");
    refused(g, m, "megatron:tp=4,pp=2,zero=3", "ZeRO stage 3");
    refused(g, m, "megatron:tp=4,pp=2,dp=2,mb=16", "micro-batches of dp 2 x mb 16");
    sf_model_options mo;
    sf_model_options_default(&mo);
    sf_error err = {0};
    sf_graph *cnn = sf_model_build("lenet5", &mo, &err);
    assert_non_null(cnn);
    refused(cnn, m, "megatron:pp=2", "no transformer layer");
    sf_graph_free(cnn);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Without attention the boundaries are sf_pipeline_even's. */
static void test_blocks_fallback(void **state) {
    (void)state;
    sf_model_options mo;
    sf_model_options_default(&mo);
    sf_error err = {0};
    sf_graph *cnn = sf_model_build("lenet5", &mo, &err);
    assert_non_null(cnn);
    sf_pipeline a, b;
    assert_int_equal(sf_pipeline_blocks(&a, cnn, 2, 1, 4, SF_PIPE_1F1B, &err), SF_OK);
    assert_int_equal(sf_pipeline_even(&b, cnn, 2, 1, 4, SF_PIPE_1F1B, &err), SF_OK);
    assert_memory_equal(&a, &b, sizeof a);
    sf_graph_free(cnn);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pp1_is_megatron), cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_baseline_string), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_blocks_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
