/*
 * mcmc.c - FlexFlow's Markov-chain Monte Carlo search over the SOAP space
 * (Jia, Zaharia, Aiken, SysML'19, section 6).
 *
 * Each start strategy (data parallelism, expert strategies, the OptCNN optimum,
 * random ones: whatever the caller passes) seeds one Metropolis-Hastings chain,
 * run in turn. A chain is simulated in full once; then every iteration picks an
 * operator uniformly at random, draws a config for it from the whole SOAP space
 * (sf_config_random: the symmetric proposal) and evaluates the changed strategy
 * by delta simulation, which rebuilds only that operator's tasks. A proposal is
 *
 *   - rejected outright when it does not fit in device memory (while the current
 *     strategy fits): memory is a hard constraint;
 *   - accepted when the current strategy does not fit and the proposal does;
 *   - otherwise accepted with probability min(1, exp(-beta * (new - cur) / ref)),
 *     ref = the chain's start cost, and undone with sf_sim_revert when rejected.
 *
 * Why divide by ref: FlexFlow's exp(-beta * delta) needs a beta per model, since
 * iteration times range from microseconds (LeNet) to seconds (NMT). Measuring
 * the change relative to the start makes beta scale-free. The default beta = 50
 * accepts a proposal 1% worse than the start with probability exp(-0.5) ~ 0.61,
 * 5% worse with exp(-2.5) ~ 0.08 and 10% worse with exp(-5) ~ 0.007: the chain
 * drifts across plateaus and small bumps but not down into clearly bad regions.
 *
 * A start that does not fit in memory is still searched from: until the chain
 * first fits, a non-fitting proposal is accepted when it does not increase the
 * total overflow (bytes over capacity summed over devices), deterministically,
 * so the chain walks downhill towards feasibility instead of freezing where no
 * single move fixes memory. Strategies are ranked "fits first, then iteration
 * time" (non-fitting ones among themselves by overflow), so a fitting answer is
 * always returned when any start fits, and the answer is never worse than the
 * best start.
 *
 * Budget: over all starts, in seconds and/or iterations. Start i of n gets an
 * equal share of what is left (so an early-stopped start leaves its remainder to
 * the later ones) and stops early once it has not improved its own best for half
 * of its share, as the paper does.
 *
 * Determinism: one sf_rng seeded from o->seed, consumed in a fixed order (the
 * operator, the config, then a uniform draw only when a worse fitting proposal
 * needs the Metropolis test). Delta simulation is exact, so full and delta modes
 * (o->use_delta) follow the same trajectory and, with an iteration budget, the
 * same seed gives the same strategy bit for bit. A wall-clock budget makes the
 * number of iterations depend on the machine's speed.
 *
 * Memory: strategies (best, and the working copy of full mode) and a per-device
 * capacity table are allocated once per search; the loop itself keeps a config
 * on the stack and never allocates (the simulator reuses its own buffers).
 */
#include "soapflow/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_mcmc_options_default(sf_mcmc_options *o) {
    memset(o, 0, sizeof *o);
    o->budget_s = 30;
    o->iters = 0;
    o->seed = 1;
    o->beta = 50;
    o->use_delta = 1;
    o->progress = 0;
}

/* What the search needs to know about one simulated strategy. */
typedef struct mc_point {
    double cost_s;       /* simulated iteration time */
    double excess_bytes; /* device memory over capacity, summed over devices; 0 when it fits */
    int fits;
} mc_point;

/* Strict order "a is better than b": fitting first, then time (or, when neither
 * fits, less overflow). */
static int point_better(const mc_point *a, const mc_point *b) {
    if (a->fits != b->fits) return a->fits;
    if (a->fits) return a->cost_s < b->cost_s;
    return a->excess_bytes < b->excess_bytes;
}

/* Everything one search holds; allocated once. */
typedef struct mc_search {
    const sf_graph *g;
    const sf_machine *m;
    const sf_mcmc_options *o;
    sf_sim *sim;
    sf_strategy *work;   /* full mode: the current strategy, edited in place */
    sf_strategy *best;   /* best seen over all chains */
    double *cap_bytes;   /* [n_dev] device memory capacities */
    int *movable;        /* [n_movable] operators a proposal can change */
    int n_movable;
    int n_dev;
    sf_rng rng;
    mc_point best_pt;
    int have_best;
    int best_start;
    int64_t iterations, accepted, sims;
    double t0_s;
    sf_progress bar;
} mc_search;

static mc_point point_of(const mc_search *s, const sf_sim_result *r) {
    mc_point p = {r->iter_s, 0, r->fits};
    if (!r->fits) {
        for (int d = 0; d < s->n_dev; d++) {
            double over = r->device_mem_bytes[d] - s->cap_bytes[d];
            if (over > 0) p.excess_bytes += over;
        }
    }
    return p;
}

/* An operator is worth proposing for when it has a dimension that can be split
 * or there is more than one device to move it to (inputs can move too). */
static int op_movable(const sf_op *op, int n_dev) {
    if (n_dev > 1) return 1;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] != SF_DIM_NONE && op->space.d[i] > 1) return 1;
    return 0;
}

/* Metropolis-Hastings acceptance of proposal p over current cur (see the top
 * of the file). Draws from the rng only for a worse fitting proposal. */
static int accept(mc_search *s, const mc_point *cur, const mc_point *p, double ref_s) {
    if (!p->fits) return !cur->fits && p->excess_bytes <= cur->excess_bytes;
    if (!cur->fits) return 1;
    if (p->cost_s <= cur->cost_s) return 1;
    double x = -s->o->beta * (p->cost_s - cur->cost_s) / ref_s;
    return sf_rng_uniform(&s->rng) < exp(x);
}

static void draw_progress(mc_search *s, double now_s) {
    const sf_mcmc_options *o = s->o;
    double frac = 0, elapsed = now_s - s->t0_s;
    if (o->iters > 0) frac = (double)s->iterations / (double)o->iters;
    if (o->budget_s > 0 && elapsed / o->budget_s > frac) frac = elapsed / o->budget_s;
    char extra[96];
    snprintf(extra, sizeof extra, "best %.3f ms  %.0f it/s", s->best_pt.cost_s * 1e3,
             elapsed > 0 ? (double)s->iterations / elapsed : 0.0);
    sf_progress_update(&s->bar, frac, extra);
}

/* Record the simulator's current strategy as the best when it beats it. */
static void offer_best(mc_search *s, const mc_point *p, const sf_strategy *strat, int start) {
    if (s->have_best && !point_better(p, &s->best_pt)) return;
    sf_strategy_copy(s->best, strat);
    s->best_pt = *p;
    s->best_start = start;
    s->have_best = 1;
}

/* One chain from starts[i] with a budget of share_it iterations (has_it) and
 * share_s seconds (budget_s > 0). */
static sf_status run_chain(mc_search *s, const sf_strategy *start, int i, int has_it,
                           int64_t share_it, double share_s, mc_point *start_pt,
                           sf_error *err) {
    const sf_mcmc_options *o = s->o;
    sf_sim_result r;
    sf_status st = sf_sim_run(s->sim, start, &r, err);
    if (st != SF_OK) return st;
    s->sims++;
    mc_point cur = point_of(s, &r);
    *start_pt = cur;
    offer_best(s, &cur, start, i);
    if (!o->use_delta) sf_strategy_copy(s->work, start);
    double ref_s = cur.cost_s > 0 ? cur.cost_s : 1.0;

    mc_point local = cur; /* this chain's best, for the early stop */
    int64_t it = 0, last_improve_it = 0;
    int64_t stall_it = (share_it + 1) / 2;
    double chain_t0 = sf_now_s(), last_improve_s = chain_t0;
    double deadline_s = chain_t0 + share_s;

    while (s->n_movable > 0) {
        if (has_it && (it >= share_it || it - last_improve_it >= stall_it)) break;
        if (o->budget_s > 0) {
            double now = sf_now_s();
            if (now >= deadline_s || now - last_improve_s >= share_s / 2) break;
        }
        int opi = s->movable[sf_rng_below(&s->rng, (uint64_t)s->n_movable)];
        const sf_op *op = sf_graph_op(s->g, opi);
        sf_config c;
        sf_config_random(op, s->m, &s->rng, &c);
        it++;
        s->iterations++;

        const sf_strategy *cur_strat = o->use_delta ? sf_sim_strategy(s->sim) : s->work;
        if (sf_config_equal(&c, sf_strategy_get(cur_strat, opi))) {
            /* the same strategy: a self-transition, accepted without simulating */
            s->accepted++;
            continue;
        }
        sf_config saved;
        if (o->use_delta) {
            st = sf_sim_update(s->sim, opi, &c, &r, err);
        } else {
            sf_config *wc = sf_strategy_config(s->work, opi);
            saved = *wc;
            *wc = c;
            st = sf_sim_run(s->sim, s->work, &r, err);
        }
        if (st != SF_OK) return st;
        s->sims++;
        mc_point p = point_of(s, &r);
        if (accept(s, &cur, &p, ref_s)) {
            cur = p;
            s->accepted++;
            if (point_better(&p, &local)) {
                local = p;
                last_improve_it = it;
                if (o->budget_s > 0) last_improve_s = sf_now_s();
                offer_best(s, &p, sf_sim_strategy(s->sim), i);
            }
        } else if (o->use_delta) {
            st = sf_sim_revert(s->sim, NULL, err);
            if (st != SF_OK) return st;
        } else {
            *sf_strategy_config(s->work, opi) = saved;
        }
        if (o->progress && (s->iterations & 63) == 0) draw_progress(s, sf_now_s());
    }
    return SF_OK;
}

static void search_free(mc_search *s) {
    sf_sim_free(s->sim);
    sf_strategy_free(s->work);
    sf_strategy_free(s->best);
    free(s->cap_bytes);
    free(s->movable);
}

sf_status sf_mcmc_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                         const sf_strategy *const *starts, int n_starts,
                         const sf_mcmc_options *o, sf_strategy *best, sf_mcmc_result *r,
                         sf_error *err) {
    sf_mcmc_options defaults;
    if (!o) {
        sf_mcmc_options_default(&defaults);
        o = &defaults;
    }
    if (!g || !m || !cm || !best)
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: graph, machine, cost model and output "
                                                 "strategy are required");
    if (!starts || n_starts < 1)
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: needs at least one start strategy");
    for (int i = 0; i < n_starts; i++)
        if (!starts[i] || sf_strategy_num_ops(starts[i]) != sf_graph_num_ops(g))
            return sf_error_set(err, SF_ERR_INVALID,
                                "mcmc: start %d is missing or is not for graph '%s'", i,
                                sf_graph_name(g));
    if (sf_strategy_num_ops(best) != sf_graph_num_ops(g))
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: output strategy is not for graph '%s'",
                            sf_graph_name(g));
    if (!(o->budget_s > 0) && o->iters <= 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "mcmc: needs a budget (seconds or iterations above 0)");
    if (!(o->beta >= 0) || !isfinite(o->beta) || !(o->budget_s >= 0) || !isfinite(o->budget_s))
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: beta and budget must be finite and >= 0");

    mc_search s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.m = m;
    s.o = o;
    s.n_dev = sf_machine_num_devices(m);
    int n_ops = sf_graph_num_ops(g);
    s.sim = sf_sim_new(g, m, cm, NULL, err);
    s.best = sf_strategy_new(g);
    s.work = o->use_delta ? NULL : sf_strategy_new(g);
    s.cap_bytes = malloc((size_t)s.n_dev * sizeof *s.cap_bytes);
    s.movable = malloc((size_t)(n_ops > 0 ? n_ops : 1) * sizeof *s.movable);
    if (!s.sim) {
        search_free(&s);
        return err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
    }
    if (!s.best || (!o->use_delta && !s.work) || !s.cap_bytes || !s.movable) {
        search_free(&s);
        return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
    }
    for (int d = 0; d < s.n_dev; d++) s.cap_bytes[d] = sf_machine_device_kind(m, d)->mem_bytes;
    for (int i = 0; i < n_ops; i++)
        if (op_movable(sf_graph_op(g, i), s.n_dev)) s.movable[s.n_movable++] = i;
    sf_rng_seed(&s.rng, o->seed);
    s.t0_s = sf_now_s();
    if (o->progress) sf_progress_start(&s.bar, stderr, "mcmc", 1.0);

    mc_point start_best = {0, 0, 0};
    int have_start_best = 0;
    sf_status st = SF_OK;
    for (int i = 0; i < n_starts && st == SF_OK; i++) {
        int left = n_starts - i;
        int64_t share_it = 0;
        if (o->iters > 0) share_it = (o->iters - s.iterations) / left;
        double share_s = 0;
        if (o->budget_s > 0) {
            share_s = (o->budget_s - (sf_now_s() - s.t0_s)) / left;
            if (share_s < 0) share_s = 0;
        }
        mc_point sp;
        st = run_chain(&s, starts[i], i, o->iters > 0, share_it, share_s, &sp, err);
        if (st == SF_OK && (!have_start_best || point_better(&sp, &start_best))) {
            start_best = sp;
            have_start_best = 1;
        }
    }
    if (o->progress) sf_progress_finish(&s.bar);
    if (st == SF_OK) {
        sf_strategy_copy(best, s.best);
        if (r) {
            memset(r, 0, sizeof *r);
            r->best_s = s.best_pt.cost_s;
            r->start_best_s = start_best.cost_s;
            r->best_start = s.best_start;
            r->iterations = s.iterations;
            r->accepted = s.accepted;
            r->seconds = sf_now_s() - s.t0_s;
            r->sims_per_s = r->seconds > 0 ? (double)s.sims / r->seconds : 0.0;
        }
    }
    search_free(&s);
    return st;
}
