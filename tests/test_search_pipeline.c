/*
 * test_search_pipeline.c - the MCMC search inside pipelines and with layer
 * templates: a GPT's templates are its blocks' operators; from a pipelined
 * start every proposal the chain simulates is a valid strategy (the simulator
 * refuses an invalid one with an error, which would end the search: in full
 * mode each proposal is validated whole by sf_sim_run, in delta mode each
 * update by the pipeline's rules), and the answer re-simulates to the reported
 * time; delta and full mode walk the same chain; boundary moves balance a
 * pipeline whose first stage holds all but one layer, and micro-batch moves
 * fill a pipeline that starts with one micro-batch; templates keep identical
 * layers' configs equal but for the moves that break a tie. Every budget is in
 * iterations: every result is deterministic.
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
#include "soapflow/search.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

#include "pipeline_fixtures.h"

static sf_graph *gpt(int layers, int batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.layers = layers;
    o.hidden = 64;
    o.heads = 4;
    o.seq_len = 16;
    o.vocab = 96;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    if (!g) fail_msg("gpt: %s", err.msg);
    return g;
}

static sf_machine *p100(int n) {
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("p100-4x4", &err);
    assert_non_null(full);
    if (n == sf_machine_num_devices(full)) return full;
    sf_machine *m = sf_machine_subset(full, n, &err);
    if (!m) fail_msg("subset: %s", err.msg);
    sf_machine_free(full);
    return m;
}

static double simulate(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                       const sf_strategy *s) {
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
    sf_sim_free(sim);
    return r.iter_s;
}

static sf_mcmc_options opts(int64_t iters, uint64_t seed, int templates, int delta) {
    sf_mcmc_options o;
    sf_mcmc_options_default(&o);
    o.budget_s = 0;
    o.iters = iters;
    o.seed = seed;
    o.templates = templates;
    o.use_delta = delta;
    return o;
}

/* The search from one start; the answer validated and re-simulated. */
static sf_mcmc_result search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                             const sf_strategy *start, const sf_mcmc_options *o,
                             sf_strategy *best) {
    sf_mcmc_result r;
    sf_error err = {0};
    const sf_strategy *starts[1] = {start};
    if (sf_mcmc_search(g, m, cm, starts, 1, o, best, &r, &err) != SF_OK)
        fail_msg("search: %s", err.msg);
    if (sf_strategy_validate(best, g, m, &err) != SF_OK) fail_msg("best: %s", err.msg);
    double t = simulate(g, m, cm, best);
    if (t != r.best_s) fail_msg("best re-simulates to %.17g, reported %.17g", t, r.best_s);
    assert_true(r.best_s <= r.start_best_s);
    return r;
}

/* A GPT's blocks: one template per operator of a block, a member per layer,
 * the layers' first operators as layer starts; the embeddings, the final
 * norm, the LM head and the loss in none. */
static void test_templates_found(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 8);
    sf_templates t;
    sf_error err = {0};
    assert_int_equal(sf_templates_find(g, &t, &err), SF_OK);
    int per_layer = sf_graph_find(g, "h1.ln_1") - sf_graph_find(g, "h0.ln_1");
    assert_true(per_layer > 1);
    assert_int_equal(t.n_classes, per_layer);
    for (int c = 0; c < t.n_classes; c++)
        assert_int_equal(t.member_start[c + 1] - t.member_start[c], 4);
    int a0 = sf_graph_find(g, "h0.attn"), a3 = sf_graph_find(g, "h3.attn");
    assert_true(t.cls[a0] >= 0);
    assert_int_equal(t.cls[a0], t.cls[a3]);
    assert_int_equal(t.layer[a3], 3);
    assert_int_not_equal(t.cls[a0], t.cls[sf_graph_find(g, "h0.mlp.fc1")]);
    assert_int_equal(t.cls[sf_graph_find(g, "lm_head")], -1);
    assert_int_equal(t.cls[sf_graph_find(g, "wte")], -1);
    assert_int_equal(t.cls[sf_graph_find(g, "ln_f")], -1);
    assert_int_equal(t.n_layers, 4);
    for (int l = 0; l < 4; l++) {
        char name[16];
        snprintf(name, sizeof name, "h%d.ln_1", l);
        assert_int_equal(t.layer_start[l], sf_graph_find(g, name));
    }
    sf_templates_free(&t);
    sf_graph_free(g);

    /* a chain of equal layers is one template; a wider last layer is not in it */
    g = chain(6, 256, 32);
    assert_int_equal(sf_templates_find(g, &t, &err), SF_OK);
    assert_int_equal(t.n_classes, 1);
    assert_int_equal(t.member_start[1], 6);
    sf_templates_free(&t);
    sf_graph_free(g);
}

/* From a pipelined GPT, with and without templates, in delta and full mode:
 * the search succeeds (every simulated proposal valid), proposes and accepts
 * pipeline moves, and the same seed walks the same chain in both modes. */
static void test_pipelined_gpt(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 16);
    sf_machine *mach = p100(8);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_pipeline pl = even(g, 2, 1, 4, SF_PIPE_1F1B);
    sf_strategy *start = staged(g, mach, &pl), *a = sf_strategy_new(g), *b = sf_strategy_new(g);
    for (int tp = 0; tp <= 1; tp++) {
        sf_mcmc_options o = opts(240, 7 + (uint64_t)tp, tp, 1);
        sf_mcmc_result rd = search(g, mach, cm, start, &o, a);
        assert_true(rd.pipe_proposals > 0);
        assert_true(rd.pipe_accepted > 0);
        assert_true(rd.best_s < rd.start_best_s);
        assert_non_null(sf_strategy_pipeline(a));
        if (tp) {
            assert_true(rd.templates > 0);
            assert_true(rd.template_moves > 0);
        }
        o.use_delta = 0;
        sf_mcmc_result rf = search(g, mach, cm, start, &o, b);
        if (rd.best_s != rf.best_s)
            fail_msg("templates %d: delta %.17g, full %.17g", tp, rd.best_s, rf.best_s);
        assert_int_equal(rd.accepted, rf.accepted);
        assert_int_equal(rd.pipe_accepted, rf.pipe_accepted);
    }
    /* an interleaved start: boundaries and micro-batches move, the schedule stays */
    sf_pipeline il = even(g, 2, 2, 4, SF_PIPE_INTERLEAVED);
    sf_strategy *si = staged(g, mach, &il);
    sf_mcmc_options o = opts(160, 11, 1, 1);
    sf_mcmc_result ri = search(g, mach, cm, si, &o, a);
    assert_true(ri.pipe_proposals > 0);
    assert_int_equal(sf_strategy_pipeline(a)->schedule, SF_PIPE_INTERLEAVED);
    assert_int_equal(sf_strategy_pipeline(a)->micro_batches % 2, 0);
    sf_strategy_free(si);
    sf_strategy_free(start);
    sf_strategy_free(a);
    sf_strategy_free(b);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

/* All but the last of 8 equal layers on stage 0 of 2: the search moves the
 * boundary and finds a pipeline at least 25% faster, with templates or not. */
static void test_unbalanced(void **state) {
    (void)state;
    sf_graph *g = chain(8, 1024, 256);
    sf_machine *mach = free_links(2);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_pipeline pl = even(g, 2, 1, 8, SF_PIPE_1F1B);
    pl.first[1] = sf_graph_find(g, "fc8");
    sf_strategy *start = staged(g, mach, &pl), *best = sf_strategy_new(g);
    for (int tp = 0; tp <= 1; tp++) {
        sf_mcmc_options o = opts(300, 3, tp, 1);
        sf_mcmc_result r = search(g, mach, cm, start, &o, best);
        const sf_pipeline *bp = sf_strategy_pipeline(best);
        assert_non_null(bp);
        assert_true(r.boundary_moves > 0);
        if (!(r.best_s < 0.75 * r.start_best_s))
            fail_msg("templates %d: %.6g s from %.6g s (boundary at %s)", tp, r.best_s,
                     r.start_best_s, sf_graph_op(g, bp->first[1])->name);
        assert_true(bp->first[1] < sf_graph_find(g, "fc7"));
        assert_true(bp->first[1] > sf_graph_find(g, "fc2"));
    }
    sf_strategy_free(start);
    sf_strategy_free(best);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

/* A balanced pipeline of one micro-batch runs its stages one after the other:
 * the search raises m. */
static void test_micro_batches(void **state) {
    (void)state;
    sf_graph *g = chain(8, 1024, 256);
    sf_machine *mach = free_links(2);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_pipeline pl = even(g, 2, 1, 1, SF_PIPE_GPIPE);
    sf_strategy *start = staged(g, mach, &pl), *best = sf_strategy_new(g);
    sf_mcmc_options o = opts(300, 5, 0, 1);
    sf_mcmc_result r = search(g, mach, cm, start, &o, best);
    assert_true(r.mb_moves > 0);
    assert_true(sf_strategy_pipeline(best)->micro_batches > 1);
    assert_true(r.best_s < 0.8 * r.start_best_s);
    sf_strategy_free(start);
    sf_strategy_free(best);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

/* The configs of a template's members: how many differ from the first
 * member's, summed over the templates (distinct configs less one). */
static int template_splits(const sf_templates *t, const sf_strategy *s) {
    int splits = 0;
    for (int c = 0; c < t->n_classes; c++) {
        int k0 = t->member_start[c], k1 = t->member_start[c + 1];
        for (int k = k0 + 1; k < k1; k++) {
            int seen = 0;
            for (int j = k0; j < k && !seen; j++)
                seen = sf_config_equal(sf_strategy_get(s, t->members[j]),
                                       sf_strategy_get(s, t->members[k]));
            splits += !seen;
        }
    }
    return splits;
}

/* Without a pipeline, from data parallelism (every layer alike): a template
 * splits into distinct configs only by the moves that break a tie, one
 * config at a time. */
static void test_templates_tie(void **state) {
    (void)state;
    sf_graph *g = gpt(4, 16);
    sf_machine *mach = p100(4);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_strategy *start = sf_strategy_new(g), *best = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(start, g, mach), SF_OK);
    sf_templates t;
    sf_error err = {0};
    assert_int_equal(sf_templates_find(g, &t, &err), SF_OK);
    assert_int_equal(template_splits(&t, start), 0);
    sf_mcmc_options o = opts(400, 9, 1, 1);
    sf_mcmc_result r = search(g, mach, cm, start, &o, best);
    assert_true(r.template_moves > 0);
    int splits = template_splits(&t, best);
    if (splits > r.template_breaks)
        fail_msg("%d splits, %lld breaks", splits, (long long)r.template_breaks);
    o.templates = 0;
    r = search(g, mach, cm, start, &o, best);
    assert_int_equal(r.template_moves, 0);
    assert_int_equal(r.template_breaks, 0);
    sf_templates_free(&t);
    sf_strategy_free(start);
    sf_strategy_free(best);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

/* Template moves of a whole GPT at once are more than SF_SIM_MAX_UPDATE_OPS
 * operators: sf_sim_update_many takes them, exactly as a full simulation. */
static void test_update_many(void **state) {
    (void)state;
    sf_graph *g = gpt(6, 16);
    sf_machine *mach = p100(4);
    sf_cost_model *cm = sf_cost_analytic_new(mach, NULL);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, mach), SF_OK);
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, mach, cm, NULL, &err);
    sf_sim_result r, back;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double t0 = r.iter_s;
    int ops[6];
    sf_config cfg[6];
    for (int l = 0; l < 6; l++) {
        char name[16];
        snprintf(name, sizeof name, "h%d.mlp.fc1", l);
        ops[l] = sf_graph_find(g, name);
        const sf_op *op = sf_graph_op(g, ops[l]);
        int deg[SF_MAX_DIMS], split = 0;
        for (int i = 0; i < op->space.ndim; i++) {
            deg[i] = 1;
            if (!split && op->kinds[i] == SF_DIM_PARAMETER) deg[i] = split = 4;
        }
        assert_int_equal(split, 4);
        assert_int_equal(sf_config_set_degrees(&cfg[l], op->space.ndim, deg), SF_OK);
        for (int p = 0; p < 4; p++) cfg[l].device[p] = (int16_t)p;
        sf_config_copy(sf_strategy_config(s, ops[l]), &cfg[l]);
    }
    assert_int_not_equal(sf_sim_update_ops(sim, 6, ops, cfg, INFINITY, &r, &err), SF_OK);
    assert_int_equal(sf_sim_update_many(sim, 6, ops, cfg, INFINITY, &r, &err), SF_OK);
    assert_true(r.iter_s == simulate(g, mach, cm, s));
    assert_int_equal(sf_sim_revert(sim, &back, &err), SF_OK);
    assert_true(back.iter_s == t0);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(mach);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates_found), cmocka_unit_test(test_pipelined_gpt),
        cmocka_unit_test(test_unbalanced),      cmocka_unit_test(test_micro_batches),
        cmocka_unit_test(test_templates_tie),   cmocka_unit_test(test_update_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
