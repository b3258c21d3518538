/*
 * test_recompute.c - activation recomputation in the simulator: a recomputing
 * operator's forward priced again before its backward (the extra compute is
 * exactly its forward tasks), its outputs freed once read and made again, so
 * that the timeline's peak falls; the baselines' options; and delta
 * simulation equal to a full one, with no cycle, under random flags, configs
 * and ZeRO stages on models with chains, branches and residuals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static sf_graph *model(const char *name, int batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    if (strcmp(name, "gpt") == 0) {
        o.layers = 3;
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

/* The forward seconds of every part of the operators s flags. */
static double flagged_forward_s(const sf_graph *g, const sf_cost_model *cm, const sf_strategy *s) {
    double sum = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        const sf_config *c = sf_strategy_get(s, i);
        if (!c->recompute || op->type == SF_OP_INPUT) continue;
        for (int p = 0; p < c->n_parts; p++) {
            sf_tile t;
            sf_config_part_tile(op, c, p, &t);
            double f, b;
            sf_cost_task_fwd_bwd_s(cm, op, &t, c->device[p], &f, &b);
            sum += f > 1e-9 ? f : 1e-9;
        }
    }
    return sum;
}

/* data:recompute=full and =selective against data on a GPT: compute grows by
 * exactly the flagged operators' forward tasks, the iteration by at most that,
 * the peak falls (full below selective below none), and the peak's
 * recomputed bytes are the timeline's alone (the all-at-once sums hold none). */
static void test_prices_and_saves(void **state) {
    (void)state;
    sf_graph *g = model("gpt", 16);
    sf_machine *m = machine("dgx-a100");
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    if (!sim) fail_msg("%s", err.msg);
    sf_strategy *s = sf_strategy_new(g);
    const char *names[] = {"data", "data:recompute=selective", "data:recompute=full"};
    sf_sim_result r[3];
    double fwd[3];
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sf_strategy_baseline(s, names[k], g, m, &err), SF_OK);
        r[k] = run(sim, s);
        fwd[k] = flagged_forward_s(g, cm, s);
    }
    assert_true(fwd[0] == 0 && fwd[1] > 0 && fwd[2] > fwd[1]);
    for (int k = 1; k < 3; k++) {
        double extra = r[k].compute_s - r[0].compute_s;
        assert_true(extra > fwd[k] * (1 - 1e-9) && extra < fwd[k] * (1 + 1e-9));
        assert_true(r[k].iter_s >= r[0].iter_s); /* recomputation may hide behind the all-reduces */
        assert_true(r[k].iter_s <= r[0].iter_s + fwd[k]);
        assert_true(r[k].live_peak_bytes < r[k - 1].live_peak_bytes);
    }
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Flags on a chain alone: with every operator of an MLP recomputing but the
 * last, the peak's activations are below what the same strategy keeps
 * without recomputation, and a recompute task shows in the trace's kinds. */
static void test_chain(void **state) {
    (void)state;
    sf_graph *g = model("mlp", 64);
    sf_machine *m = machine("p100-4x4");
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    if (!sim) fail_msg("%s", err.msg);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, "model", g, m, &err), SF_OK);
    sf_sim_result a = run(sim, s);
    double act_a = 0, act_b = 0;
    for (int d = 0; d < sf_machine_num_devices(m); d++)
        act_a += a.device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + SF_SIM_MEM_ACTIVATIONS];
    int n = sf_graph_num_ops(g);
    for (int i = 1; i < n - 1; i++) sf_strategy_config(s, i)->recompute = 1;
    sf_sim_result b = run(sim, s);
    for (int d = 0; d < sf_machine_num_devices(m); d++)
        act_b += b.device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + SF_SIM_MEM_ACTIVATIONS];
    assert_true(b.compute_s > a.compute_s);
    assert_true(b.live_peak_bytes <= a.live_peak_bytes);
    assert_true(act_b < act_a);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Random moves on models with chains (mlp, gpt), branches that join
 * (inception_v3) and residuals (resnet18): each a random config, a random
 * recompute flag and on weight owners a random ZeRO stage. Every strategy
 * simulates (no cycle), and delta simulation equals a full one bit for bit in
 * time and peaks. */
static void delta_case(const char *name, int batch, int moves, uint64_t seed) {
    sf_graph *g = model(name, batch);
    sf_machine *m = machine("p100-4x4");
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err), *full = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    assert_non_null(full);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, "data:recompute=full", g, m, &err), SF_OK);
    sf_sim_result r = run(sim, s);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    int n_ops = sf_graph_num_ops(g), flagged = 0, done = 0;
    for (int it = 0; it < moves; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n_ops - 1));
        const sf_op *o = sf_graph_op(g, op);
        sf_config c;
        if (sf_rng_below(&rng, 3) == 0) {
            sf_config_copy(&c, sf_strategy_get(s, op)); /* the flags alone */
        } else {
            sf_config_random(o, m, &rng, &c);
        }
        c.recompute = (uint8_t)sf_rng_below(&rng, 2);
        if (o->n_params > 0 && o->weight_owner < 0 && !sf_graph_op_tied(g, op))
            c.zero = (uint8_t)sf_rng_below(&rng, SF_ZERO_STAGE_COUNT);
        if (sf_config_validate(o, m, &c, NULL) != SF_OK) continue;
        err = (sf_error){0};
        sf_status st = sf_sim_update(sim, op, &c, &r, &err);
        if (st == SF_ERR_INVALID) continue; /* a tie split two ways */
        if (st != SF_OK) fail_msg("%s move %d: %s", name, it, err.msg);
        sf_config_copy(sf_strategy_config(s, op), &c);
        flagged += c.recompute;
        done++;
        sf_sim_result f = run(full, s);
        assert_true(r.iter_s == f.iter_s);
        assert_true(r.live_peak_bytes == f.live_peak_bytes);
        assert_true(r.peak_mem_bytes == f.peak_mem_bytes);
    }
    assert_true(done > moves / 2);
    assert_true(flagged > done / 4);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_sim_free(full);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_delta_mlp(void **state) {
    (void)state;
    delta_case("mlp", 64, 200, 31);
}
static void test_delta_gpt(void **state) {
    (void)state;
    delta_case("gpt", 8, 200, 32);
}
static void test_delta_inception(void **state) {
    (void)state;
    delta_case("inception_v3", 8, 150, 33);
}
static void test_delta_resnet(void **state) {
    (void)state;
    delta_case("resnet18", 8, 150, 34);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prices_and_saves), cmocka_unit_test(test_chain),
        cmocka_unit_test(test_delta_mlp),        cmocka_unit_test(test_delta_gpt),
        cmocka_unit_test(test_delta_inception),  cmocka_unit_test(test_delta_resnet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
