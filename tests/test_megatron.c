/*
 * test_megatron.c - the Megatron baselines (src/strategy/megatron.c) and the
 * per-device weight count (sf_taskgraph_device_weights): refusals in one line,
 * the layout by operator role on a small GPT (heads, column and row linears,
 * the elementwise operators between them, the rest over the group on samples
 * or, with -sp, on the sequence), every device used, a valid strategy that
 * simulates, and at most 1/T + the replicated share of data parallelism's
 * weights on a device.
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
#include "soapflow/taskgraph.h"

static sf_graph *small_gpt(int64_t batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.layers = 2;
    o.hidden = 64;
    o.heads = 4;
    o.seq_len = 16;
    o.vocab = 96;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

static int op_of(const sf_graph *g, const char *name) {
    int i = sf_graph_find(g, name);
    if (i < 0) fail_msg("no operator %s", name);
    return i;
}

/* The degree of op's first dimension of kind k under c (0 when there is none). */
static int degree_of(const sf_op *op, const sf_config *c, sf_dim_kind k, int last) {
    int at = -1;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == k && (at < 0 || last)) at = i;
    return at < 0 ? 0 : c->degree[at];
}

static int has_heads(const sf_graph *g) {
    const sf_op *a = sf_graph_op(g, op_of(g, "h0.attn"));
    for (int i = 0; i < a->space.ndim; i++)
        if (a->kinds[i] == SF_DIM_REDUCE) return 1;
    return 0;
}

static void test_refusals(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_open("p100-4x4[8]", &err);
    assert_non_null(m);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 16;
    sf_graph *lenet = sf_model_build("lenet5", &o, &err);
    assert_non_null(lenet);
    sf_strategy *s = sf_strategy_new(lenet);
    assert_int_equal(sf_strategy_baseline(s, "megatron", lenet, m, &err), SF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "megatron: graph 'lenet5' has no transformer layer"));
    assert_null(strchr(err.msg, '\n'));
    sf_strategy_free(s);
    sf_graph_free(lenet);

    sf_graph *g = small_gpt(16);
    s = sf_strategy_new(g);
    const char *bad[] = {"megatron:3", "megatron-sp:8", "megatron:0", "megatron:x", "megatron:"};
    for (int i = 0; i < 5; i++) {
        memset(&err, 0, sizeof err);
        sf_status st = sf_strategy_baseline(s, bad[i], g, m, &err);
        assert_int_equal(st, SF_ERR_INVALID);
        assert_null(strchr(err.msg, '\n'));
    }
    assert_int_equal(sf_strategy_is_baseline_name("megatron-sp:4"), 1);
    assert_int_equal(sf_strategy_is_baseline_name("megatronx"), 0);
    /* every baseline takes options after ':', checked when it is built */
    assert_int_equal(sf_strategy_is_baseline_name("data:2"), 1);
    memset(&err, 0, sizeof err);
    assert_int_equal(sf_strategy_baseline(s, "data:2", g, m, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unknown option '2'"));
    /* more data-parallel groups than samples */
    sf_graph *g1 = small_gpt(1);
    sf_strategy *s1 = sf_strategy_new(g1);
    memset(&err, 0, sizeof err);
    sf_status st = sf_strategy_baseline(s1, "megatron:2", g1, m, &err);
    assert_true(st == SF_ERR_INVALID || st == SF_ERR_UNSUPPORTED);
    sf_strategy_free(s1);
    sf_graph_free(g1);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Data parallelism holds every weight on every device; the weight counts add
 * up over the shards of a model-parallel strategy. */
static void test_device_weights(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_open("p100-4x4[4]", &err);
    sf_graph *g = small_gpt(8);
    sf_graph_stats gs;
    sf_graph_stats_compute(g, &gs);
    sf_strategy *s = sf_strategy_new(g);
    int64_t w[4];
    const char *names[] = {"data", "model"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sf_strategy_baseline(s, names[k], g, m, &err), SF_OK);
        sf_taskgraph *tg = sf_taskgraph_new(g, 4, &err);
        sf_taskgraph_set_strategy(tg, s);
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            assert_int_equal(sf_taskgraph_set_tiles(tg, i), SF_OK);
        assert_int_equal(sf_taskgraph_device_weights(tg, w), SF_OK);
        for (int d = 0; d < 4; d++) {
            if (k == 0) assert_int_equal(w[d], gs.params);
            assert_true(w[d] > 0 && w[d] <= gs.params);
        }
        if (k == 1) assert_true(w[0] < gs.params); /* the linears are split */
        sf_taskgraph_free(tg);
    }
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* The layout on two nodes of 4 (T = 4, D = 2), both variants. */
static void test_layout(void **state) {
    (void)state;
    sf_graph *g = small_gpt(16);
    if (!has_heads(g)) {
        sf_graph_free(g);
        skip(); /* attention cannot be split on heads in this build */
    }
    sf_error err = {0};
    sf_machine *m = sf_machine_open("p100-4x4[8]", &err);
    assert_non_null(m);
    for (int sp = 0; sp < 2; sp++) {
        sf_strategy *s = sf_strategy_new(g);
        sf_status st = sf_strategy_baseline(s, sp ? "megatron-sp" : "megatron", g, m, &err);
        if (st != SF_OK) fail_msg("%s", err.msg);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        assert_int_equal(sf_strategy_idle_devices(s, 8, NULL), 0);
        const sf_op *fc1 = sf_graph_op(g, op_of(g, "h0.mlp.fc1"));
        const sf_op *fc2 = sf_graph_op(g, op_of(g, "h1.mlp.fc2"));
        const sf_op *gelu = sf_graph_op(g, op_of(g, "h0.mlp.gelu"));
        const sf_op *attn = sf_graph_op(g, op_of(g, "h1.attn"));
        const sf_op *ln = sf_graph_op(g, op_of(g, "h0.ln_2"));
        const sf_config *c1 = sf_strategy_get(s, fc1->id), *c2 = sf_strategy_get(s, fc2->id);
        const sf_config *cg = sf_strategy_get(s, gelu->id), *ca = sf_strategy_get(s, attn->id);
        const sf_config *cl = sf_strategy_get(s, ln->id);
        /* column fc1: samples 2, out features 4; row fc2: samples 2, inputs 4 */
        assert_int_equal(degree_of(fc1, c1, SF_DIM_SAMPLE, 0), 2);
        assert_int_equal(degree_of(fc1, c1, SF_DIM_PARAMETER, 1), 4);
        assert_int_equal(degree_of(fc1, c1, SF_DIM_REDUCE, 0), 1);
        assert_int_equal(degree_of(fc2, c2, SF_DIM_REDUCE, 0), 4);
        assert_int_equal(degree_of(fc2, c2, SF_DIM_PARAMETER, 1), 1);
        assert_int_equal(degree_of(attn, ca, SF_DIM_REDUCE, 0), 4);
        assert_int_equal(cg->degree[gelu->space.ndim - 1], 4);
        /* the layer norm over the group: samples 8 ways, or samples 2 x sequence 4 */
        assert_int_equal(cl->degree[0], sp ? 2 : 8);
        if (sp) assert_int_equal(cl->degree[1], 4);
        /* part d * 4 + t on device d * 4 + t: group 1's parts on node 1 */
        for (int p = 0; p < c2->n_parts; p++) assert_int_equal(c2->device[p], p);
        /* it simulates, and a device holds about a quarter of the layers' weights */
        sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
        assert_non_null(cm);
        sf_sim_options so;
        sf_sim_options_default(&so);
        sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
        assert_non_null(sim);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
        assert_true(r.iter_s > 0);
        sf_sim_free(sim);
        sf_cost_free(cm);
        sf_strategy_free(s);
    }
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_device_weights),
        cmocka_unit_test(test_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
