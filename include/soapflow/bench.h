/*
 * soapflow/bench.h - how fast the planning library plans: the simulator
 * (full, delta, bounded and reverted updates, as the MCMC search uses them)
 * and a large machine (building it, its routes, a simulator on it).
 *
 * Benchmarks are programs that print figures, never timed tests (`soapflow
 * bench sim`, `bench machine`; bench/RESULTS.md): these functions take the
 * times and return them as plain values, and check on the way that the
 * answers are right (delta against full simulation, every move undone), so
 * that a fast wrong simulator cannot report a speed-up.
 */
#ifndef SOAPFLOW_BENCH_H
#define SOAPFLOW_BENCH_H

#include <stdint.h>

#include "soapflow/core.h"
#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the simulator ---------------------------------------------------------- */

typedef struct sf_bench_sim_result {
    double full_us;         /* a full simulation of the strategy, best of reps */
    double delta_us;        /* mean delta update after a random single-operator move */
    double delta_revert_us; /* mean update + revert: what a rejected proposal costs */
    double full_moved_us;   /* mean full simulation of each changed strategy: what a delta
                             * update saves over simulating that strategy from scratch */
    double bounded_us;      /* mean bounded update + revert, bound 1.02 x the start */
    double cut_frac;        /* share of bounded updates that stopped early */
    double delta_tasks;     /* mean task count of the changed strategies */
    double resched_frac;    /* mean share of tasks a delta update scheduled again */
    double changed_frac;    /* mean share of tasks new or starting at another time: the
                             * part of the schedule any exact delta method must redo */
    double uneven_frac;     /* mean share new or whose predecessors moved unevenly: what a
                             * delta that shifted runs of the old schedule would still redo */
    int64_t tasks;          /* tasks of the strategy's task graph */
} sf_bench_sim_result;

/* Time the simulator on strategy s: one warm-up and reps (>= 1) full
 * simulations, then `moves` random single-operator moves (from seed; a random
 * operator gets a random config of its whole SOAP space), each applied with
 * sf_sim_update and undone with sf_sim_revert, the same moves bounded as
 * Metropolis-Hastings with beta 50 bounds them on average, once more untimed
 * for what they change (sf_sim_delta_stats_get), and each changed strategy
 * simulated in full by a second simulator. SF_ERR_INTERNAL when the delta and
 * the full results differ or the moves were not all undone. */
SF_API sf_status sf_bench_sim(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                              const sf_sim_options *so, const sf_strategy *s, int64_t reps,
                              int64_t moves, uint64_t seed, sf_bench_sim_result *out,
                              sf_error *err);

/* ---- a large machine ------------------------------------------------------- */

/* Build d reps (>= 1) times: *out the last machine (the caller frees it),
 * *best_s the fastest build. */
SF_API sf_status sf_bench_machine_build(const sf_machine_desc *d, int64_t reps, sf_machine **out,
                                        double *best_s, sf_error *err);

/* The mean time (s) of a route between two random devices (from seed) and of
 * reading its links' figures, over `pairs` pairs (0 when pairs is 0).
 * SF_ERR_INTERNAL when a route has a negative time. */
SF_API sf_status sf_bench_machine_routes(const sf_machine *m, int64_t pairs, uint64_t seed,
                                         double *mean_s, sf_error *err);

typedef struct sf_bench_machine_sim_result {
    double sim_new_s; /* a new simulator (analytic costs, no schedule kept), best of reps */
    double full_s;    /* its first full simulation, best of reps */
    double delta_s;   /* mean delta update + revert of a random move */
    int64_t tasks;
} sf_bench_machine_sim_result;

/* A fresh simulator and one full run per rep (the first run of a simulator is
 * what planning pays), then `moves` delta updates and reverts on the last. */
SF_API sf_status sf_bench_machine_sim(const sf_graph *g, const sf_machine *m, const sf_strategy *s,
                                      int64_t reps, int64_t moves, uint64_t seed,
                                      sf_bench_machine_sim_result *out, sf_error *err);

#ifdef __cplusplus
}
#endif

#endif
