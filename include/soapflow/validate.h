/*
 * soapflow/validate.h - the simulator's predicted iteration time beside the
 * measured one, strategy by strategy, on the ranks of this host, and where the
 * difference comes from.
 *
 * FlexFlow claims its simulator predicts real iteration times within 30% and
 * keeps the order of strategies; this module checks soapflow's claim the same
 * way. Fill one row per strategy (name and strategy), then on every rank:
 *
 *     sf_validate_options o;
 *     sf_validate_options_default(&o);       // 20 steps in 4 rounds, after 2 warm-up
 *     sf_validate_row rows[2] = {{.name = "data", .strategy = s0},
 *                                {.name = "model", .strategy = s1}};
 *     sf_validate_summary sum;
 *     sf_status st = sf_validate_predict(g, m, cm, rows, 2, &o, NULL, &err);
 *     if (st == SF_OK) st = sf_validate_measure(c, g, rows, 2, &o, &err); // collective
 *     if (st == SF_OK) st = sf_validate_summarize(rows, 2, &o, &sum, &err);
 *
 * Predicted: each strategy simulated once with o.sim (the table's figures),
 * and once under each sync model of o.models (which of the simulator's models
 * the runtime behaves like). Measured: a fresh runtime per strategy and round
 * from the same initial weights, trained on synthetic batches; the median of
 * o.iters steps. The steps are taken in rounds over all strategies, each
 * round a share of every strategy's steps after its own warm-up, so that a
 * burst of load on a shared host spreads over all strategies instead of
 * landing on one and reordering them. Then the error of each prediction, the
 * median |error|, the worst strategy and Kendall's tau between the predicted
 * and the measured order (soapflow/stats.h).
 *
 * Where the error comes from: on each strategy's critical device (the one the
 * simulator keeps busiest), predicted and measured seconds by task kind:
 * compute (forward and backward kernels), transfer, sync, update, copy (of
 * tile regions and shards; predicted only on a machine with a copy
 * bandwidth) and idle (the iteration less compute, update and copy).
 * Predicted transfer and sync are link time (sf_sim_kind_totals: the messages
 * the device receives, the all-reduce traffic it sends); measured ones are the
 * time the rank waited for its messages and all-reduces (sf_runtime_events),
 * which is what a CPU rank without an asynchronous progress thread spends on
 * them. A compute gap says the cost model is off; an idle or sync gap with
 * compute right says the scheduling or communication rules are.
 *
 * Nothing is printed or written here: the rows and the summary are plain
 * values for the caller to print, and the hooks of the options hand the
 * caller each strategy's simulator and runtime for traces.
 */
#ifndef SOAPFLOW_VALIDATE_H
#define SOAPFLOW_VALIDATE_H

#include <stdint.h>

#include "soapflow/core.h"
#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/runtime.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Task kinds of the breakdown: the simulator's five, then idle. */
typedef enum sf_validate_kind {
    SF_VALIDATE_COMPUTE = SF_SIM_TOTAL_COMPUTE,
    SF_VALIDATE_TRANSFER = SF_SIM_TOTAL_TRANSFER,
    SF_VALIDATE_SYNC = SF_SIM_TOTAL_SYNC,
    SF_VALIDATE_UPDATE = SF_SIM_TOTAL_UPDATE,
    SF_VALIDATE_COPY = SF_SIM_TOTAL_COPY,
    SF_VALIDATE_IDLE = SF_SIM_TOTAL_COUNT,
    SF_VALIDATE_KIND_COUNT
} sf_validate_kind;

/* "compute", "transfer", "sync", "update", "copy", "idle"; NULL out of range. */
SF_API const char *sf_validate_kind_name(int kind);

/* One of the simulator's sync models: when gradient syncs start and how they run. */
typedef struct sf_validate_sync_model {
    sf_sync_mode mode;
    sf_sync_scheme scheme;
} sf_validate_sync_model;

#define SF_VALIDATE_MAX_SYNC_MODELS 16

/* After strategy i's prediction, with its schedule kept: the place for its
 * predicted trace (sf_sim_write_trace). */
typedef sf_status (*sf_validate_predicted_fn)(void *user, int i, const sf_sim *sim, sf_error *err);
/* After strategy i's last timed step, on every rank (collective: the runtime's
 * events are that step's; sf_runtime_events); the ranks then agree on the
 * outcome. The place for its measured trace. */
typedef sf_status (*sf_validate_measured_fn)(void *user, int i, sf_comm *c, const sf_runtime *rt,
                                             sf_error *err);
/* After each step, warm-up or timed, on every rank: done of total steps. */
typedef void (*sf_validate_step_fn)(void *user, int64_t done, int64_t total, const char *name);

typedef struct sf_validate_options {
    sf_sim_options sim; /* the predictions of the table; the runtime runs its sync */
    /* the sync models every strategy is also predicted under (default:
     * sf_validate_default_sync_models, overlap and bulk of ring, ps and
     * hierarchical) */
    const sf_validate_sync_model *models;
    int n_models;                /* 0 .. SF_VALIDATE_MAX_SYNC_MODELS */
    int64_t iters;               /* timed steps per strategy, >= 1 (default 20) */
    int64_t warmup;              /* untimed steps before each round's, >= 0 (default 2) */
    int64_t rounds;              /* rounds over the strategies, >= 1; iters when more (default 4) */
    uint64_t seed;               /* initial weights, synthetic batches, the runtime (default 1) */
    sf_optimizer_kind optimizer; /* the runtime's, with sf_optimizer_default's settings
                                  * (default sgd); the predictions take the cost model's */
    const sf_machine *machine;   /* the ranks' machine, for the runtime's sync steps (the
                                  * hierarchical scheme's nodes); NULL: one node */
    sf_validate_predicted_fn on_predicted; /* each may be NULL */
    sf_validate_measured_fn on_measured;
    sf_validate_step_fn on_step;
    void *user;
} sf_validate_options;

SF_API void sf_validate_options_default(sf_validate_options *o);
/* The default table of sync models: *out points at n of them (static). */
SF_API int sf_validate_default_sync_models(const sf_validate_sync_model **out);
/* The rounds the measurement takes: o->rounds, or o->iters when fewer. */
SF_API int64_t sf_validate_rounds(const sf_validate_options *o);

/* One strategy: the caller fills name and strategy, the module the rest. */
typedef struct sf_validate_row {
    const char *name;            /* for messages and on_step */
    const sf_strategy *strategy; /* valid for g and m */
    /* predicted (sf_validate_predict) */
    double pred_s;                             /* iteration, under o.sim */
    int fits;                                  /* the memory fits */
    int crit;                                  /* the device the simulator keeps busiest */
    double pred[SF_VALIDATE_KIND_COUNT];       /* seconds on crit, by kind */
    double alt_s[SF_VALIDATE_MAX_SYNC_MODELS]; /* iteration under each o.models[a] */
    /* measured (sf_validate_measure) */
    double meas_s;                       /* median step (rank 0's) */
    double meas_min_s;                   /* fastest step */
    double meas[SF_VALIDATE_KIND_COUNT]; /* crit's rank's medians, by kind */
    int meas_crit;                       /* the rank with the most compute + update */
    double error;                        /* pred_s / meas_s - 1 */
} sf_validate_row;

/* Simulate every row's strategy under o->sim (crit, the breakdown, fits),
 * then under each of o->models. Not collective. With a profiled cost model,
 * *coverage (when non-NULL) counts the task times the costs file had and
 * missed over the first pass only (zeros for other models). A failure names
 * the row: "NAME: message". */
SF_API sf_status sf_validate_predict(const sf_graph *g, const sf_machine *m, sf_cost_model *cm,
                                     sf_validate_row *rows, int n, const sf_validate_options *o,
                                     sf_profile_stats *coverage, sf_error *err);

/* Train every row's strategy on the ranks of c (one rank a device of the
 * machine the strategies are for) and fill the measured fields, the same on
 * every rank. Collective; needs rows[i].crit from sf_validate_predict. A
 * failure names the row and is the same on every rank. */
SF_API sf_status sf_validate_measure(sf_comm *c, const sf_graph *g, sf_validate_row *rows, int n,
                                     const sf_validate_options *o, sf_error *err);

/* How one set of predictions fits one set of measurements. */
typedef struct sf_validate_fit {
    double median_abs; /* median |predicted / measured - 1| */
    int worst;         /* the row of the largest |error| */
    double tau;        /* Kendall's tau-b of predicted against measured; NaN: undefined */
} sf_validate_fit;

typedef struct sf_validate_summary {
    sf_validate_fit main;    /* pred_s against the median steps */
    sf_validate_fit fastest; /* pred_s against each strategy's fastest step */
    sf_validate_fit models[SF_VALIDATE_MAX_SYNC_MODELS]; /* alt_s[a] against the medians */
} sf_validate_summary;

/* How predictions p[0 .. n) fit measurements m[0 .. n) (n >= 1). */
SF_API sf_status sf_validate_fit_of(const double *p, const double *m, int n, sf_validate_fit *out,
                                    sf_error *err);
/* The summary of measured rows (n >= 1), o->n_models of them by sync model. */
SF_API sf_status sf_validate_summarize(const sf_validate_row *rows, int n,
                                       const sf_validate_options *o, sf_validate_summary *out,
                                       sf_error *err);
/* The kind whose measured time is furthest from its prediction. */
SF_API sf_validate_kind sf_validate_largest_gap(const sf_validate_row *r);

#ifdef __cplusplus
}
#endif

#endif
