/*
 * MCMC search tests: the answer is never worse than the best start and
 * re-simulates to the reported time; the same seed gives the same strategy bit
 * for bit; delta and full simulation follow the same trajectory; on problems
 * small enough to enumerate, MCMC reaches the exhaustive optimum (FlexFlow
 * section 8.4's check); strategies that do not fit in memory are never returned
 * when a fitting start exists; bad arguments are refused. Every budget is in
 * iterations, so every result is deterministic.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

/* ---- fixtures ------------------------------------------------------------------ */

#define MAX_STARTS 8

/* One search problem: a graph, a machine, a cost model and start strategies. */
typedef struct problem {
    sf_graph *g;
    sf_machine *m;
    sf_cost_model *cm;
    sf_strategy *starts[MAX_STARTS];
    int n_starts;
} problem;

/* p100-4x4, or its first n devices (n > 0 and below 16). */
static sf_machine *p100(int n) {
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("p100-4x4", &err);
    assert_non_null(full);
    if (n <= 0 || n == sf_machine_num_devices(full)) return full;
    sf_machine *m = sf_machine_subset(full, n, &err);
    if (!m) fprintf(stderr, "subset: %s\n", err.msg);
    assert_non_null(m);
    sf_machine_free(full);
    return m;
}

static sf_graph *zoo(const char *name, int64_t batch, int64_t seq, int64_t chunk,
                     int64_t hidden, int64_t vocab) {
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    o.seq_len = seq;
    o.chunk = chunk;
    o.hidden = hidden;
    o.vocab = vocab;
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fprintf(stderr, "%s: %s\n", name, err.msg);
    assert_non_null(g);
    return g;
}

static void add_start(problem *p, const char *baseline) {
    sf_error err = {0};
    assert_true(p->n_starts < MAX_STARTS);
    sf_strategy *s = sf_strategy_new(p->g);
    assert_non_null(s);
    if (sf_strategy_baseline(s, baseline, p->g, p->m, &err) != SF_OK)
        fprintf(stderr, "%s: %s\n", baseline, err.msg);
    assert_int_equal(err.code, SF_OK);
    p->starts[p->n_starts++] = s;
}

/* A random strategy: one sf_config_random per operator. */
static void add_random_start(problem *p, uint64_t seed) {
    assert_true(p->n_starts < MAX_STARTS);
    sf_strategy *s = sf_strategy_new(p->g);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    for (int i = 0; i < sf_graph_num_ops(p->g); i++)
        sf_config_random(sf_graph_op(p->g, i), p->m, &rng, sf_strategy_config(s, i));
    p->starts[p->n_starts++] = s;
}

static void problem_init(problem *p, sf_graph *g, sf_machine *m) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->m = m;
    p->cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(p->cm);
}

static void problem_free(problem *p) {
    for (int i = 0; i < p->n_starts; i++) sf_strategy_free(p->starts[i]);
    sf_cost_free(p->cm);
    sf_graph_free(p->g);
    sf_machine_free(p->m);
}

static void options(sf_mcmc_options *o, int64_t iters, uint64_t seed) {
    sf_mcmc_options_default(o);
    o->budget_s = 0;
    o->iters = iters;
    o->seed = seed;
}

/* Run the search; the returned strategy must be valid. */
static sf_strategy *search(problem *p, const sf_mcmc_options *o, sf_mcmc_result *r) {
    sf_error err = {0};
    sf_strategy *best = sf_strategy_new(p->g);
    sf_status st = sf_mcmc_search(p->g, p->m, p->cm, (const sf_strategy *const *)p->starts,
                                  p->n_starts, o, best, r, &err);
    if (st != SF_OK) fprintf(stderr, "mcmc: %s\n", err.msg);
    assert_int_equal(st, SF_OK);
    assert_int_equal(sf_strategy_validate(best, p->g, p->m, &err), SF_OK);
    return best;
}

/* Full simulation of one strategy, from a fresh simulator. */
static sf_sim_result simulate(const problem *p, const sf_strategy *s) {
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(p->g, p->m, p->cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    r.device_busy_s = NULL;
    r.device_mem_bytes = NULL;
    sf_sim_free(sim);
    return r;
}

static int strategies_equal(const sf_strategy *a, const sf_strategy *b) {
    if (sf_strategy_num_ops(a) != sf_strategy_num_ops(b)) return 0;
    for (int i = 0; i < sf_strategy_num_ops(a); i++)
        if (!sf_config_equal(sf_strategy_get(a, i), sf_strategy_get(b, i))) return 0;
    return 1;
}

/* ---- 1. never worse than the best start ------------------------------------------ */

/* Search p from its starts and check the answer against them: it fits (every
 * start here fits), it is at least as fast as the fastest start, start_best_s is
 * that start's time, and the strategy re-simulates to exactly best_s. */
static void check_not_worse(problem *p, int64_t iters, uint64_t seed) {
    double fastest = INFINITY;
    for (int i = 0; i < p->n_starts; i++) {
        sf_sim_result r = simulate(p, p->starts[i]);
        assert_true(r.fits);
        if (r.iter_s < fastest) fastest = r.iter_s;
    }
    sf_mcmc_options o;
    options(&o, iters, seed);
    sf_mcmc_result mr;
    sf_strategy *best = search(p, &o, &mr);
    assert_true(mr.start_best_s == fastest);
    assert_true(mr.best_s <= mr.start_best_s);
    assert_true(mr.best_start >= 0 && mr.best_start < p->n_starts);
    assert_true(mr.iterations > 0 && mr.iterations <= iters);
    assert_true(mr.accepted >= 0 && mr.accepted <= mr.iterations);
    sf_sim_result r = simulate(p, best);
    assert_true(r.fits);
    assert_true(r.iter_s == mr.best_s);
    sf_strategy_free(best);
}

static void test_never_worse_lenet5(void **state) {
    (void)state;
    int devices[] = {4, 16};
    for (int k = 0; k < 2; k++) {
        problem p;
        problem_init(&p, zoo("lenet5", 64, 0, 0, 0, 0), p100(devices[k]));
        add_start(&p, "data");
        add_start(&p, "owt");
        add_start(&p, "model");
        add_start(&p, "single");
        check_not_worse(&p, 400, 11);
        problem_free(&p);
    }
}

static void test_never_worse_alexnet(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("alexnet", 16, 0, 0, 0, 0), p100(8));
    add_start(&p, "data");
    add_start(&p, "owt");
    add_random_start(&p, 5);
    check_not_worse(&p, 300, 12);
    problem_free(&p);
}

static void test_never_worse_rnnlm(void **state) {
    (void)state;
    int devices[] = {4, 16};
    for (int k = 0; k < 2; k++) {
        problem p;
        problem_init(&p, zoo("rnnlm", 64, 8, 0, 256, 2000), p100(devices[k]));
        add_start(&p, "data");
        add_start(&p, "expert");
        add_start(&p, "model");
        check_not_worse(&p, 400, 13);
        problem_free(&p);
    }
}

/* ---- 2. determinism --------------------------------------------------------------- */

static void test_same_seed_same_strategy(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("alexnet", 16, 0, 0, 0, 0), p100(4));
    add_start(&p, "data");
    add_random_start(&p, 3);
    sf_mcmc_options o;
    options(&o, 300, 42);
    sf_mcmc_result r1, r2;
    sf_strategy *a = search(&p, &o, &r1);
    sf_strategy *b = search(&p, &o, &r2);
    assert_true(r1.best_s == r2.best_s);
    assert_true(r1.start_best_s == r2.start_best_s);
    assert_int_equal(r1.best_start, r2.best_start);
    assert_true(r1.iterations == r2.iterations);
    assert_true(r1.accepted == r2.accepted);
    assert_true(strategies_equal(a, b));
    /* The seed is used: some other seed takes another path (a search that
     * ignored its seed would give the same counts and strategy every time). */
    int differs = 0;
    for (uint64_t seed = 43; seed < 47 && !differs; seed++) {
        o.seed = seed;
        sf_mcmc_result r3;
        sf_strategy *c = search(&p, &o, &r3);
        differs = r3.accepted != r1.accepted || r3.iterations != r1.iterations ||
                  !strategies_equal(a, c);
        sf_strategy_free(c);
    }
    assert_true(differs);
    sf_strategy_free(a);
    sf_strategy_free(b);
    problem_free(&p);
}

/* ---- 3. delta and full simulation follow the same trajectory ----------------------- */

static void same_trajectory(problem *p, int64_t iters, uint64_t seed) {
    sf_mcmc_options o;
    options(&o, iters, seed);
    o.use_delta = 1;
    sf_mcmc_result rd, rf;
    sf_strategy *d = search(p, &o, &rd);
    o.use_delta = 0;
    sf_strategy *f = search(p, &o, &rf);
    assert_true(rd.best_s == rf.best_s);
    assert_true(rd.start_best_s == rf.start_best_s);
    assert_int_equal(rd.best_start, rf.best_start);
    assert_true(rd.iterations == rf.iterations);
    assert_true(rd.accepted == rf.accepted);
    assert_true(strategies_equal(d, f));
    sf_strategy_free(d);
    sf_strategy_free(f);
}

static void test_delta_equals_full(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("lenet5", 64, 0, 0, 0, 0), p100(8));
    add_start(&p, "data");
    add_start(&p, "single");
    same_trajectory(&p, 400, 7);
    problem_free(&p);

    problem q;
    problem_init(&q, zoo("rnnlm", 32, 8, 0, 128, 1000), p100(16));
    add_start(&q, "expert");
    add_random_start(&q, 9);
    same_trajectory(&q, 300, 8);
    problem_free(&q);
}

/* ---- 4. MCMC reaches the exhaustive optimum (FlexFlow section 8.4) ------------------ */

/* sf_exhaustive_search enumerates OptCNN's candidate space under the simulator;
 * MCMC searches the whole SOAP space, a superset, so from a start that is not
 * the optimum it must reach a strategy at least as fast. The budgets were chosen
 * with margin: at 20,000 iterations every one of 40 seeds reached the optimum on
 * both problems (at 4,000, up to a quarter of seeds stopped early in a local
 * minimum). */
static void check_reaches_optimum(problem *p, int64_t max_states, int64_t iters, uint64_t seed) {
    sf_error err = {0};
    sf_strategy *opt = sf_strategy_new(p->g);
    double opt_s = 0;
    sf_status st = sf_exhaustive_search(p->g, p->m, p->cm, 1, max_states, opt, &opt_s, &err);
    if (st != SF_OK) fprintf(stderr, "exhaustive: %s\n", err.msg);
    assert_int_equal(st, SF_OK);
    assert_true(simulate(p, opt).iter_s == opt_s);
    sf_mcmc_options o;
    options(&o, iters, seed);
    sf_mcmc_result r;
    sf_strategy *best = search(p, &o, &r);
    assert_true(r.start_best_s > opt_s); /* the search has something to find */
    assert_true(simulate(p, best).iter_s == r.best_s);
    if (!(r.best_s <= opt_s * (1 + 1e-9)))
        fprintf(stderr, "%s: mcmc %.9g s, exhaustive %.9g s (start %.9g s)\n",
                sf_graph_name(p->g), r.best_s, opt_s, r.start_best_s);
    assert_true(r.best_s <= opt_s * (1 + 1e-9));
    sf_strategy_free(best);
    sf_strategy_free(opt);
}

/* LeNet-5's classifier (flattened 16x5x5 features -> fc 120 -> relu -> fc 84),
 * built by hand. The whole LeNet-5 has 14 operators with 3 to 15 OptCNN
 * candidates each on 4 devices (~8e12 strategies), far beyond brute force; these
 * 4 operators have about 1e3 to 1e4. (The 6-operator classifier down to fc3 and
 * the feature extractor on 2 devices were tried too: there a single-operator
 * move from data or model parallelism must climb a 14% bump, and a fixed seed
 * reaching the optimum would be luck rather than a property.) */
static sf_graph *lenet5_classifier(int64_t batch) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("lenet5-classifier");
    sf_shape xs = sf_shape_make(2, (int64_t[]){batch, 400});
    int x = sf_graph_add_input(g, "features", &xs, 0, &err);
    sf_op_params lp;
    sf_op_params_default(SF_OP_LINEAR, &lp);
    lp.linear.out_features = 120;
    int fc1 = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &lp, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params rp;
    sf_op_params_default(SF_OP_RELU, &rp);
    int r = sf_graph_add_op(g, SF_OP_RELU, "relu3", &rp, (sf_tensor_ref[]){{fc1, 0}}, 1, &err);
    lp.linear.out_features = 84;
    int fc2 = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &lp, (sf_tensor_ref[]){{r, 0}}, 1, &err);
    if (fc2 < 0) fprintf(stderr, "lenet5-classifier: %s\n", err.msg);
    assert_true(fc2 >= 0);
    return g;
}

static void test_optimum_lenet5(void **state) {
    (void)state;
    problem p;
    problem_init(&p, lenet5_classifier(64), p100(4));
    add_start(&p, "data");
    check_reaches_optimum(&p, 1000000, 20000, 21);
    problem_free(&p);
}

/* rnnlm unrolled 2 steps in one chunk (FlexFlow's "RNN with short unrolling"),
 * hidden 16, vocabulary 32: tokens, embedding, two LSTM layers, linear and loss
 * on 4 devices, ~7e4 strategies. Four steps (8 operators) would be ~3e6. */
static void test_optimum_rnnlm(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("rnnlm", 64, 2, 2, 16, 32), p100(4));
    add_start(&p, "data");
    check_reaches_optimum(&p, 1000000, 20000, 23);
    problem_free(&p);
}

/* ---- 5. pair moves: optima that two operators must reach together ------------------ */

/* features (batch x in) -> linear(out) [-> softmax_ce]: the smallest graphs where
 * MCMC must move a producer and its consumer at once. */
static sf_graph *linear_graph(int64_t batch, int64_t in, int64_t out, int with_loss) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new(with_loss ? "linear-loss" : "linear");
    sf_shape xs = sf_shape_make(2, (int64_t[]){batch, in});
    int x = sf_graph_add_input(g, "features", &xs, 0, &err);
    sf_op_params lp;
    sf_op_params_default(SF_OP_LINEAR, &lp);
    lp.linear.out_features = out;
    int last = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &lp, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (with_loss && last >= 0) {
        sf_op_params cp;
        sf_op_params_default(SF_OP_SOFTMAX_CE, &cp);
        last = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "loss", &cp, (sf_tensor_ref[]){{last, 0}}, 1,
                               &err);
    }
    if (last < 0) fprintf(stderr, "linear graph: %s\n", err.msg);
    assert_true(last >= 0);
    return g;
}

/* The regression for single-operator moves stopping short (issue 20, item 4).
 * On 4 P100s, features 128 x 8192 into a linear layer of 16: the optimum puts
 * both operators on one device (0.0558 ms), data parallelism takes 0.0857 ms,
 * but moving either operator alone onto one device makes the other's tiles cross
 * links: 0.105 ms (fc moved, 22% worse than the start, accepted at beta 50 with
 * probability e^-11) or 0.145 ms (the features moved). With 3000 proposals, as
 * `soapflow search --iters 3000` gives, from data parallelism and owt, single
 * moves alone end at 0.0857, 0.0798 and 0.0857 ms on seeds 1 to 3 (the chains
 * stop early, leaving about a third of the budget unused), and with the loss
 * after the linear layer at 0.0957 ms on every seed against an optimum of 0.0659
 * ms; with pair moves, in the last chain that gets what the others left, every
 * seed reaches the exhaustive optimum. The single-move runs check that the case
 * still needs pair moves. */
static void test_pair_moves_reach_optimum(void **state) {
    (void)state;
    for (int with_loss = 0; with_loss < 2; with_loss++) {
        problem p;
        problem_init(&p, linear_graph(128, 8192, 16, with_loss), p100(4));
        add_start(&p, "data");
        add_start(&p, "owt");
        sf_error err = {0};
        sf_strategy *opt = sf_strategy_new(p.g);
        double opt_s = 0;
        assert_int_equal(sf_exhaustive_search(p.g, p.m, p.cm, 1, 1000000, opt, &opt_s, &err),
                         SF_OK);
        for (uint64_t seed = 1; seed <= 3; seed++) {
            sf_mcmc_options o;
            options(&o, 3000, seed);
            /* the chains alone: the polish would find the optimum by itself (the
             * default search, polish included, is checked below) */
            o.polish = 0;
            sf_mcmc_result r;
            o.pair_moves = 0;
            sf_strategy *single = search(&p, &o, &r);
            assert_true(r.start_best_s > opt_s * 1.2); /* the search has something to find */
            assert_true(r.pair_proposals == 0);
            if (!(r.best_s > opt_s * 1.1))
                fprintf(stderr, "%s seed %d: single moves found %.9g s, optimum %.9g s\n",
                        sf_graph_name(p.g), (int)seed, r.best_s, opt_s);
            assert_true(r.best_s > opt_s * 1.1);
            o.pair_moves = 1;
            sf_strategy *paired = search(&p, &o, &r);
            if (!(r.best_s <= opt_s * (1 + 1e-9)))
                fprintf(stderr, "%s seed %d: pair moves found %.9g s, optimum %.9g s\n",
                        sf_graph_name(p.g), (int)seed, r.best_s, opt_s);
            assert_true(r.best_s <= opt_s * (1 + 1e-9));
            assert_true(simulate(&p, paired).iter_s == r.best_s);
            assert_true(r.pair_proposals > 0 && r.pair_accepted > 0);
            assert_true(r.pair_accepted <= r.pair_proposals && r.pair_proposals <= r.iterations);
            /* and the default search, polish included */
            options(&o, 3000, seed);
            sf_strategy *deflt = search(&p, &o, &r);
            assert_true(r.best_s <= opt_s * (1 + 1e-9));
            assert_true(simulate(&p, deflt).iter_s == r.best_s);
            sf_strategy_free(single);
            sf_strategy_free(paired);
            sf_strategy_free(deflt);
        }
        sf_strategy_free(opt);
        problem_free(&p);
    }
}

/* Pair moves only add a last chain after the others: with the same seed and
 * iteration budget the search is the same up to it, so its answer is never
 * worse than without pair moves, and it uses at least as many proposals. (Not
 * with the polish after it: a greedy descent from a better strategy can end
 * worse than one from a worse strategy, so the polish is off here.) */
static void test_pair_moves_never_worse(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("rnnlm", 64, 8, 0, 256, 2000), p100(8));
    add_start(&p, "data");
    add_start(&p, "expert");
    add_random_start(&p, 4);
    problem q;
    problem_init(&q, zoo("alexnet", 16, 0, 0, 0, 0), p100(4));
    add_start(&q, "data");
    add_start(&q, "owt");
    problem *probs[] = {&p, &q};
    for (int k = 0; k < 2; k++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            sf_mcmc_options o;
            options(&o, 600, seed);
            o.polish = 0;
            sf_mcmc_result r0, r1;
            o.pair_moves = 0;
            sf_strategy *a = search(probs[k], &o, &r0);
            o.pair_moves = 1;
            sf_strategy *b = search(probs[k], &o, &r1);
            assert_true(r1.best_s <= r0.best_s);
            assert_true(r1.start_best_s == r0.start_best_s);
            assert_true(r1.iterations >= r0.iterations && r1.iterations <= 600);
            assert_true(r1.accepted >= r0.accepted);
            assert_true(simulate(probs[k], b).iter_s == r1.best_s);
            sf_strategy_free(a);
            sf_strategy_free(b);
        }
    }
    problem_free(&p);
    problem_free(&q);
}

/* ---- 6. the polish: one- and two-operator improvements (issue 29, item 10) ---------- */

/* The best strategy that differs from `base` only in the configs of operators a
 * and b, by brute force over every degree tuple of their splittable dimensions
 * (at most n_dev parts) on every run of contiguous devices, wrapping around:
 * more placements than the polish tries. Returns its time under `so`. */
static double best_over_two(const problem *p, const sf_sim_options *so, const sf_strategy *base,
                            int a, int b) {
    sf_error err = {0};
    int n_dev = sf_machine_num_devices(p->m);
    enum { CAP = 4096 };
    static sf_config cand[2][CAP];
    int nc[2] = {0, 0}, ops[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        const sf_op *op = sf_graph_op(p->g, ops[k]);
        /* two dimensions, and a linear's reduction (whole: not proposed) */
        assert_true(op->space.ndim == 2 || (op->space.ndim == 3 && op->kinds[2] == SF_DIM_REDUCE));
        int top[2];
        for (int i = 0; i < 2; i++)
            top[i] = op->kinds[i] == SF_DIM_NONE ? 1
                     : op->space.d[i] < n_dev    ? (int)op->space.d[i]
                                                 : n_dev;
        for (int d0 = 1; d0 <= top[0]; d0++)
            for (int d1 = 1; d1 <= top[1] && d0 * d1 <= n_dev; d1++)
                for (int f = 0; f < n_dev; f++) {
                    assert_true(nc[k] < CAP);
                    sf_config *c = &cand[k][nc[k]];
                    memset(c, 0, sizeof *c);
                    assert_int_equal(sf_config_set_degrees(c, 2, (int[]){d0, d1}), SF_OK);
                    for (int q = 0; q < c->n_parts; q++) c->device[q] = (int16_t)((f + q) % n_dev);
                    if (sf_config_validate(op, p->m, c, NULL) == SF_OK) nc[k]++;
                }
    }
    sf_sim *sim = sf_sim_new(p->g, p->m, p->cm, so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, base, &r, &err), SF_OK);
    double best = r.iter_s;
    for (int i = 0; i < nc[0]; i++)
        for (int j = 0; j < nc[1]; j++) {
            sf_config cfg[2] = {cand[0][i], cand[1][j]};
            assert_int_equal(sf_sim_update_ops(sim, 2, ops, cfg, best, &r, &err), SF_OK);
            if (!r.cut_off && r.fits && r.iter_s < best) best = r.iter_s;
            assert_int_equal(sf_sim_revert(sim, NULL, &err), SF_OK);
        }
    sf_sim_free(sim);
    return best;
}

/* The regression for the chains drifting past small improvements (issue 29,
 * item 10). LeNet-5 at 64 samples per device on 8 K80s (two nodes of
 * k80-16x4), gradients synced after the backward pass (bulk): from data
 * parallelism, putting the classifier (fc3) and the loss both on four
 * devices (2-5) saves 0.9% (0.5081 against 0.5126 ms); the brute force
 * below finds it from data or owt parallelism changing only those two
 * operators. With 3000 proposals, before the polish, the search ended at data
 * parallelism itself on seeds 1 and 2 (0.5126 ms; on seed 3 it found 0.4807 ms
 * by another path), and with twice the budget on seed 2 still. The default
 * search must reach the brute force's time on every seed: an improvement of one
 * or two neighbouring operators is what the polish tries before it returns. */
static void test_polish_finds_classifier_moves(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("k80-16x4", &err);
    assert_non_null(full);
    sf_machine *m = sf_machine_subset(full, 8, &err);
    assert_non_null(m);
    sf_machine_free(full);
    problem p;
    problem_init(&p, zoo("lenet5", 64 * 8, 0, 0, 0, 0), m);
    add_start(&p, "data");
    add_start(&p, "owt");
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.sync = SF_SYNC_BULK;
    int loss = sf_graph_num_ops(p.g) - 1, fc = sf_graph_find(p.g, "fc3");
    assert_true(fc >= 0 && sf_graph_op(p.g, loss)->type == SF_OP_SOFTMAX_CE);
    double held_out = INFINITY, start = INFINITY;
    for (int i = 0; i < p.n_starts; i++) {
        sf_sim *sim = sf_sim_new(p.g, p.m, p.cm, &so, &err);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, p.starts[i], &r, &err), SF_OK);
        sf_sim_free(sim);
        if (r.iter_s < start) start = r.iter_s;
        double b = best_over_two(&p, &so, p.starts[i], fc, loss);
        if (b < held_out) held_out = b;
    }
    assert_true(held_out < start * (1 - 0.005)); /* something to find */
    int old_missed = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        sf_mcmc_options o;
        options(&o, 3000, seed);
        o.sim = so;
        sf_mcmc_result r;
        /* as the search was: no polish */
        o.polish = 0;
        sf_strategy *old = search(&p, &o, &r);
        old_missed += r.best_s > held_out * (1 + 1e-9);
        sf_strategy_free(old);
        options(&o, 3000, seed);
        o.sim = so;
        sf_strategy *best = search(&p, &o, &r);
        if (!(r.best_s <= held_out * (1 + 1e-9)))
            fprintf(stderr, "seed %d: search %.9g s, classifier and loss alone %.9g s\n",
                    (int)seed, r.best_s, held_out);
        assert_true(r.best_s <= held_out * (1 + 1e-9));
        assert_true(r.iterations <= 3000 && r.polish_moves > 0 && r.polish_improved >= 0);
        sf_sim *sim = sf_sim_new(p.g, p.m, p.cm, &so, &err);
        sf_sim_result br;
        assert_int_equal(sf_sim_run(sim, best, &br, &err), SF_OK);
        assert_true(br.iter_s == r.best_s);
        sf_sim_free(sim);
        sf_strategy_free(best);
    }
    assert_true(old_missed > 0); /* the case still needs what the polish adds */
    problem_free(&p);
}

/* ---- 7. memory is a hard constraint ----------------------------------------------- */

/* lenet5 at batch 16 on one node of four P100s: there the whole model on one
 * device is the fastest start (transfers and syncs cost more than they save), and
 * the search with ample memory returns a strategy that needs more memory per
 * device than "one weird trick" (owt: the convolutions data-parallel, the
 * classifier split by output; memory as frameworks keep it, where the
 * classifier's weights dominate). Cut the devices' memory to halfway between the
 * two: that answer no longer fits, owt does, and the search must return a
 * fitting strategy. */
static void test_memory_is_hard(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = zoo("lenet5", 16, 0, 0, 0, 0);
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, &err), SF_OK);
    d.nodes = 1;
    d.devices_per_node = 4;
    sf_machine *big = sf_machine_build(&d, &err);
    assert_non_null(big);
    sf_mcmc_options o;
    options(&o, 600, 3);

    problem probe;
    problem_init(&probe, g, big);
    add_start(&probe, "single");
    add_start(&probe, "owt");
    sf_sim_result low = simulate(&probe, probe.starts[1]);
    sf_mcmc_result r;
    sf_strategy *free_best = search(&probe, &o, &r);
    sf_sim_result fr = simulate(&probe, free_best);
    assert_true(fr.fits);
    assert_true(low.peak_mem_bytes < fr.peak_mem_bytes); /* the constraint will bind */
    d.kind.mem_bytes = (low.peak_mem_bytes + fr.peak_mem_bytes) / 2;
    snprintf(d.name, sizeof d.name, "p100-small-memory");
    probe.g = NULL; /* keep the graph for the real problem */
    problem_free(&probe);

    problem p;
    problem_init(&p, g, sf_machine_build(&d, &err));
    assert_non_null(p.m);
    add_start(&p, "single");
    add_start(&p, "owt");
    assert_false(simulate(&p, free_best).fits);
    assert_false(simulate(&p, p.starts[0]).fits);
    assert_true(simulate(&p, p.starts[1]).fits);
    sf_strategy_free(free_best);

    sf_strategy *best = search(&p, &o, &r);
    sf_sim_result br = simulate(&p, best);
    assert_true(br.fits);
    assert_true(br.iter_s == r.best_s);
    /* ranked among fitting starts only: owt's time */
    assert_true(r.start_best_s == simulate(&p, p.starts[1]).iter_s);
    assert_true(r.best_s <= r.start_best_s);
    sf_strategy_free(best);

    /* From the non-fitting start alone the chain walks to a fitting strategy. */
    sf_strategy_free(p.starts[1]);
    p.n_starts = 1;
    best = search(&p, &o, &r);
    assert_true(simulate(&p, best).fits);
    sf_strategy_free(best);
    problem_free(&p);
}

/* ---- arguments and budgets ------------------------------------------------------- */

static void test_bad_arguments(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("lenet5", 16, 0, 0, 0, 0), p100(2));
    add_start(&p, "data");
    sf_strategy *best = sf_strategy_new(p.g);
    const sf_strategy *const *starts = (const sf_strategy *const *)p.starts;
    sf_mcmc_options o;
    sf_mcmc_options_default(&o);
    assert_true(o.beta == 50 && o.anneal == 1 && o.use_delta == 1 && o.polish == 1);
    sf_error err = {0};
    o.budget_s = 0;
    o.iters = 0;
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, starts, 1, &o, best, NULL, &err),
                     SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "budget"));
    o.iters = 10;
    sf_error_clear(&err);
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, starts, 0, &o, best, NULL, &err),
                     SF_ERR_INVALID);
    sf_error_clear(&err);
    o.beta = -1;
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, starts, 1, &o, best, NULL, &err),
                     SF_ERR_INVALID);
    o.beta = 50;
    o.anneal = NAN;
    sf_error_clear(&err);
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, starts, 1, &o, best, NULL, &err),
                     SF_ERR_INVALID);
    o.anneal = 1;
    /* a start for another graph */
    sf_graph *other = zoo("alexnet", 16, 0, 0, 0, 0);
    sf_strategy *wrong = sf_strategy_new(other);
    const sf_strategy *bad[1] = {wrong};
    sf_error_clear(&err);
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, bad, 1, &o, best, NULL, &err),
                     SF_ERR_INVALID);
    sf_strategy_free(wrong);
    sf_graph_free(other);
    /* the output may alias a start */
    sf_mcmc_result r;
    sf_error_clear(&err);
    assert_int_equal(sf_mcmc_search(p.g, p.m, p.cm, starts, 1, &o, p.starts[0], &r, &err),
                     SF_OK);
    assert_true(simulate(&p, p.starts[0]).iter_s == r.best_s);
    sf_strategy_free(best);
    problem_free(&p);
}

/* A wall-clock budget ends the search; only the behaviour is checked, not time. */
static void test_time_budget(void **state) {
    (void)state;
    problem p;
    problem_init(&p, zoo("lenet5", 64, 0, 0, 0, 0), p100(4));
    add_start(&p, "data");
    add_start(&p, "owt");
    sf_mcmc_options o;
    sf_mcmc_options_default(&o);
    o.budget_s = 0.05;
    sf_mcmc_result r;
    sf_strategy *best = search(&p, &o, &r);
    assert_true(r.best_s <= r.start_best_s);
    assert_true(r.seconds > 0);
    assert_true(simulate(&p, best).iter_s == r.best_s);
    sf_strategy_free(best);
    problem_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_worse_lenet5),
        cmocka_unit_test(test_never_worse_alexnet),
        cmocka_unit_test(test_never_worse_rnnlm),
        cmocka_unit_test(test_same_seed_same_strategy),
        cmocka_unit_test(test_delta_equals_full),
        cmocka_unit_test(test_optimum_lenet5),
        cmocka_unit_test(test_optimum_rnnlm),
        cmocka_unit_test(test_pair_moves_reach_optimum),
        cmocka_unit_test(test_pair_moves_never_worse),
        cmocka_unit_test(test_polish_finds_classifier_moves),
        cmocka_unit_test(test_memory_is_hard),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_time_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
