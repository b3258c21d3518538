/*
 * bench.c - the planning library's speed (soapflow/bench.h): the simulator's
 * full, delta, bounded and reverted updates, and a large machine.
 *
 * The moves are drawn again from the same seed for every pass, so that each
 * pass times the same work and the passes can be checked against each other:
 * the delta updates' iteration times must sum, bit for bit, to those of the
 * same strategies simulated in full, and after every revert the simulator must
 * give the starting result again. The passes that read the schedule in ways
 * that evict the simulator's arrays from the caches (the delta statistics) are
 * not timed.
 */
#include "soapflow/bench.h"

#include <stdlib.h>
#include <string.h>

/* ---- the simulator ---------------------------------------------------------- */

/* One random single-operator move from strategy s, as every pass of the
 * benchmarks draws them: a random operator gets a random config from its whole
 * SOAP space. A draw that splits tied weights two ways (an embedding against its
 * LM head, src/strategy/tie.c) is invalid and drawn again; a graph without ties
 * never draws again, so its moves are those of before ties could be split. */
static int random_move(const sf_graph *g, const sf_machine *m, const sf_strategy *s, sf_rng *rng,
                       sf_config *c) {
    for (int tries = 0;; tries++) {
        int op = (int)sf_rng_below(rng, (uint64_t)sf_graph_num_ops(g));
        sf_config_random(sf_graph_op(g, op), m, rng, c);
        if (sf_graph_num_ties(g) == 0 || sf_strategy_check_ties(s, g, 1, &op, c, NULL) == SF_OK)
            return op;
        if (tries == 1000) { /* the operator's config again: a move that changes nothing */
            sf_config_copy(c, sf_strategy_get(s, op));
            return op;
        }
    }
}

/* The measurements themselves. sim2: a second simulator on the same graph and
 * machine, which simulates each changed strategy in full. */
static sf_status measure(sf_sim *sim, sf_sim *sim2, const sf_graph *g, const sf_machine *m,
                         const sf_strategy *s, int64_t reps, int64_t moves, uint64_t seed,
                         sf_bench_sim_result *out, sf_error *err) {
    sf_sim_result r0, r;
    sf_status st = sf_sim_run(sim, s, &r0, err); /* warm-up: arrays reach their size */
    if (st != SF_OK) return st;
    double best = 1e300;
    for (int64_t i = 0; i < reps; i++) {
        double t0 = sf_now_s();
        st = sf_sim_run(sim, s, &r, err);
        double dt = sf_now_s() - t0;
        if (st != SF_OK) return st;
        if (dt < best) best = dt;
    }
    out->full_us = best * 1e6;
    out->tasks = r0.tasks;

    sf_rng rng;
    sf_rng_seed(&rng, seed);
    int n_ops = sf_graph_num_ops(g);
    double upd = 0, both = 0, tasks = 0, resched = 0, changed = 0, uneven = 0;
    double iter_sum = 0; /* the moves' iteration times, summed in move order */
    for (int64_t i = 0; i < moves && n_ops > 0; i++) {
        sf_config c;
        int op = random_move(g, m, s, &rng, &c);
        double t0 = sf_now_s();
        st = sf_sim_update(sim, op, &c, &r, err);
        double t1 = sf_now_s();
        if (st != SF_OK) return st;
        tasks += (double)r.tasks;
        iter_sum += r.iter_s;
        resched += (double)r.rescheduled / (double)r.tasks;
        double t3 = sf_now_s();
        st = sf_sim_revert(sim, &r, err);
        double t4 = sf_now_s();
        if (st != SF_OK) return st;
        upd += t1 - t0;
        both += (t1 - t0) + (t4 - t3);
    }
    /* The same moves again, bounded as the MCMC search bounds them: Metropolis-
     * Hastings with beta 50 draws u and accepts a proposal at most cur * (1 - ln u / 50)
     * long, 1.02 x cur on average, so the simulation can stop once that is passed. */
    sf_rng_seed(&rng, seed);
    double bnd = 0;
    int64_t cuts = 0;
    for (int64_t i = 0; i < moves && n_ops > 0; i++) {
        sf_config c;
        int op = random_move(g, m, s, &rng, &c);
        double t0 = sf_now_s();
        st = sf_sim_update_bounded(sim, op, &c, r0.iter_s * 1.02, &r, err);
        if (st == SF_OK) {
            cuts += r.cut_off;
            st = sf_sim_revert(sim, &r, err);
        }
        bnd += sf_now_s() - t0;
        if (st != SF_OK) return st;
    }
    /* The same moves once more, untimed, for what they change in the schedule:
     * sf_sim_delta_stats_get sorts every task, which would evict the simulator's
     * arrays from the caches between timed updates. */
    sf_rng_seed(&rng, seed);
    for (int64_t i = 0; i < moves && n_ops > 0; i++) {
        sf_config c;
        int op = random_move(g, m, s, &rng, &c);
        sf_sim_delta_stats ds;
        st = sf_sim_update(sim, op, &c, &r, err);
        if (st == SF_OK) st = sf_sim_delta_stats_get(sim, &ds, err);
        if (st != SF_OK) return st;
        changed += (double)ds.changed / (double)r.tasks;
        uneven += (double)ds.uneven / (double)r.tasks;
        st = sf_sim_revert(sim, &r, err);
        if (st != SF_OK) return st;
    }
    /* The same moves, each simulated in full from scratch by the second simulator:
     * the cost a delta update replaces (a move often makes the graph larger). */
    sf_rng_seed(&rng, seed);
    sf_strategy *moved = sf_strategy_clone(s);
    if (!moved) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    double fm = 0, full_iter_sum = 0;
    sf_sim_result r2;
    for (int64_t i = 0; i < moves && n_ops > 0 && st == SF_OK; i++) {
        sf_config c;
        int op = random_move(g, m, s, &rng, &c);
        *sf_strategy_config(moved, op) = c;
        double t0 = sf_now_s();
        st = sf_sim_run(sim2, moved, &r2, err);
        fm += sf_now_s() - t0;
        full_iter_sum += r2.iter_s;
        *sf_strategy_config(moved, op) = *sf_strategy_get(s, op);
    }
    sf_strategy_free(moved);
    if (st != SF_OK) return st;
    /* the same sums bit for bit when every delta result equals its full run */
    if (full_iter_sum != iter_sum)
        return sf_error_set(err, SF_ERR_INTERNAL,
                            "delta and full simulation disagree: the %lld moves' iteration times "
                            "sum to %.17g s and %.17g s",
                            (long long)moves, iter_sum, full_iter_sum);
    out->full_moved_us = moves > 0 ? fm / (double)moves * 1e6 : 0;
    out->bounded_us = moves > 0 ? bnd / (double)moves * 1e6 : 0;
    out->cut_frac = moves > 0 ? (double)cuts / (double)moves : 0;
    out->delta_us = moves > 0 ? upd / (double)moves * 1e6 : 0;
    out->delta_revert_us = moves > 0 ? both / (double)moves * 1e6 : 0;
    out->delta_tasks = moves > 0 ? tasks / (double)moves : 0;
    out->resched_frac = moves > 0 ? resched / (double)moves : 0;
    out->changed_frac = moves > 0 ? changed / (double)moves : 0;
    out->uneven_frac = moves > 0 ? uneven / (double)moves : 0;
    /* same answer by another route: every move was undone */
    if (moves > 0 && (r.iter_s != r0.iter_s || r.tasks != r0.tasks))
        return sf_error_set(err, SF_ERR_INTERNAL,
                            "after %lld moves and reverts the simulator gives %.17g s and %lld "
                            "tasks, it started from %.17g s and %lld tasks",
                            (long long)moves, r.iter_s, (long long)r.tasks, r0.iter_s,
                            (long long)r0.tasks);
    return SF_OK;
}

sf_status sf_bench_sim(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                       const sf_sim_options *so, const sf_strategy *s, int64_t reps, int64_t moves,
                       uint64_t seed, sf_bench_sim_result *out, sf_error *err) {
    memset(out, 0, sizeof *out);
    if (reps < 1 || moves < 0)
        return sf_error_set(err, SF_ERR_INVALID, "%lld reps and %lld moves: want >= 1 and >= 0",
                            (long long)reps, (long long)moves);
    sf_sim *sim = sf_sim_new(g, m, cm, so, err);
    sf_sim *sim2 = sim ? sf_sim_new(g, m, cm, so, err) : NULL;
    sf_status st = sim && sim2 ? measure(sim, sim2, g, m, s, reps, moves, seed, out, err)
                               : (err && err->code ? err->code : SF_ERR_NOMEM);
    sf_sim_free(sim);
    sf_sim_free(sim2);
    return st;
}

/* ---- a large machine ------------------------------------------------------- */

sf_status sf_bench_machine_build(const sf_machine_desc *d, int64_t reps, sf_machine **out,
                                 double *best_s, sf_error *err) {
    *out = NULL;
    *best_s = 1e300;
    if (reps < 1) return sf_error_set(err, SF_ERR_INVALID, "%lld reps: want >= 1", (long long)reps);
    for (int64_t i = 0; i < reps; i++) {
        sf_machine_free(*out);
        double t0 = sf_now_s();
        *out = sf_machine_build(d, err);
        double dt = sf_now_s() - t0;
        if (!*out) return err && err->code ? err->code : SF_ERR_NOMEM;
        if (dt < *best_s) *best_s = dt;
    }
    return SF_OK;
}

sf_status sf_bench_machine_routes(const sf_machine *m, int64_t pairs, uint64_t seed, double *mean_s,
                                  sf_error *err) {
    /* routes between random pairs, and what a simulator reads of their links */
    int n_dev = sf_machine_num_devices(m);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    double sink = 0;
    double t0 = sf_now_s();
    for (int64_t i = 0; i < pairs; i++) {
        int x = (int)sf_rng_below(&rng, (uint64_t)n_dev),
            y = (int)sf_rng_below(&rng, (uint64_t)n_dev);
        sf_route r;
        sf_machine_route(m, x, y, &r);
        for (int k = 0; k < r.n_links; k++) {
            sf_link lb;
            const sf_link *l = sf_machine_link(m, r.links[k], &lb);
            sink += l->latency_s + 1.0 / l->bandwidth_Bps;
        }
    }
    *mean_s = pairs > 0 ? (sf_now_s() - t0) / (double)pairs : 0;
    if (!(sink >= 0)) return sf_error_set(err, SF_ERR_INTERNAL, "a route has a negative time");
    return SF_OK;
}

sf_status sf_bench_machine_sim(const sf_graph *g, const sf_machine *m, const sf_strategy *s,
                               int64_t reps, int64_t moves, uint64_t seed,
                               sf_bench_machine_sim_result *out, sf_error *err) {
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    if (!cm) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.keep_schedule = 0;
    sf_sim *sim = NULL;
    sf_sim_result r;
    sf_status st = SF_OK;
    out->sim_new_s = out->full_s = 1e300;
    for (int64_t i = 0; i < reps && st == SF_OK; i++) {
        sf_sim_free(sim);
        double t0 = sf_now_s();
        sim = sf_sim_new(g, m, cm, &so, err);
        double t1 = sf_now_s();
        if (!sim) {
            st = err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
            break;
        }
        st = sf_sim_run(sim, s, &r, err);
        double t2 = sf_now_s();
        if (t1 - t0 < out->sim_new_s) out->sim_new_s = t1 - t0;
        if (t2 - t1 < out->full_s) out->full_s = t2 - t1;
        out->tasks = r.tasks;
    }
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    double sum = 0;
    int n_ops = sf_graph_num_ops(g);
    for (int64_t i = 0; i < moves && n_ops > 0 && st == SF_OK; i++) {
        sf_config c;
        int op = random_move(g, m, s, &rng, &c);
        double t0 = sf_now_s();
        st = sf_sim_update(sim, op, &c, &r, err);
        if (st == SF_OK) st = sf_sim_revert(sim, &r, err);
        sum += sf_now_s() - t0;
    }
    out->delta_s = moves > 0 ? sum / (double)moves : 0;
    sf_sim_free(sim);
    sf_cost_free(cm);
    return st;
}
