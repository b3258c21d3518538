/*
 * soapflow/sim.h - FlexFlow's execution simulator: task graphs, full and delta
 * simulation of one synchronous training iteration.
 *
 *     sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
 *     sf_sim_result r;
 *     sf_sim_run(sim, strategy, &r, &err);        // full: build and schedule everything
 *     sf_config c = *sf_strategy_get(strategy, op);
 *     c.device[0] = 3;
 *     sf_sim_update(sim, op, &c, &r, &err);       // delta: replace one operator's config
 *     // r equals what sf_sim_run would give for the changed strategy, exactly
 *     sf_sim_free(sim);
 *
 * Task graph: a forward and a backward task per operator part on its device; a
 * transfer wherever a producer part's output tile intersects a consumer part's
 * input region on another device, sized by the intersection and crossing the
 * links of the route (store-and-forward: one task per link, chained; optionally
 * cut into segments that pipeline over the hops); gradients
 * of activations flow back along the same routes; each weight shard held by
 * several devices is all-reduced (a ring over the devices in the strategy's
 * order, node by node), then updated on each replica, or (parameter-server
 * scheme) sent to the first part's device, updated there and sent back. When
 * the all-reduce may start is the sync mode: as soon as the shard's backward
 * tasks are done (overlap, as PyTorch DDP and
 * Horovod run it), or only once each replica's device has finished its whole
 * backward pass (bulk, the bulk-synchronous model that the simulator of
 * FlexFlow's Legion runtime uses by default and OptCNN's additive cost model
 * assumes). Bytes are counted in whole numbers: a segmented message's pieces
 * and a ring's chunks are floor/ceil shares that add up to the message or the
 * shard exactly.
 *
 * Scheduling: event-driven list scheduling. A task is ready when its predecessors
 * are done; every device and every link runs its tasks one at a time, first-in
 * first-out in ready order, ties broken by a canonical task key (also for tasks
 * made ready through the zero-time barriers that join syncs), so the schedule
 * is a function of the strategy alone. The iteration time is the makespan.
 */
#ifndef SOAPFLOW_SIM_H
#define SOAPFLOW_SIM_H

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a device's memory holds (the timeline's breakdown of a peak). */
typedef enum sf_sim_mem_kind {
    SF_SIM_MEM_WEIGHTS = 0,  /* weights, their gradients and the optimizer's state */
    SF_SIM_MEM_ACTIVATIONS,  /* the parts' outputs and what they save for backward */
    SF_SIM_MEM_RECEIVED,     /* copies of input regions and partial sums from other devices */
    SF_SIM_MEM_ACT_GRADS,    /* gradients of activations during the backward pass */
    SF_SIM_MEM_GATHERED,     /* ZeRO-3: a shard's weights gathered whole around a use */
    SF_SIM_MEM_WEIGHT_GRADS, /* ZeRO-2/3: a shard's whole gradient before its reduce-scatter */
    SF_SIM_MEM_RECOMPUTED,   /* recomputation: a part's outputs and saved tensors, from its
                              * recompute task to its backward task */
    SF_SIM_MEM_WORKSPACE,    /* a compute task's scratch (im2col columns, ...: the kernels'
                              * sf_kernel_workspace_bytes) while it runs */
    SF_SIM_MEM_BUFFERS,      /* communication buffers: a shard's packed gradient from its
                              * packing copy to its unpacking one */
    SF_SIM_MEM_KIND_COUNT
} sf_sim_mem_kind;
/* "weights", "activations", "received", "activation gradients"; NULL out of range. */
SF_API const char *sf_sim_mem_kind_name(sf_sim_mem_kind k);

typedef struct sf_sim_options {
    double optimizer_state_factor; /* optimizer state per weight byte; 0 (default): the
                                    * cost model's optimizer's state slots (SGD's
                                    * momentum 1, Adam's two moments 2) */
    int keep_schedule;             /* keep per-task times for traces (sf_sim_write_*) */
    sf_sync_mode sync;             /* when gradient syncs start (default overlap) */
    sf_sync_scheme scheme;         /* how they run (default ring) */
    int segments;                  /* pieces a transfer over several links is cut into,
                                    * pipelined hop by hop (default 1: whole message) */
    int memory_timeline;           /* also follow memory over the schedule (each entry alive
                                    * from its first to its last use): device_live_bytes, and
                                    * `fits` from those peaks (default 0: every activation
                                    * alive at once, device_mem_bytes) */
    double memory_headroom;        /* with memory_timeline: the share of each device's memory
                                    * kept free (allocator slack, the framework's own), in [0, 1) */
    int runtime_memory;            /* count memory as soapflow's runtime holds it (train's
                                    * prediction of its ranks): a part saves its outputs
                                    * alone (its CPU kernels recompute the rest in backward:
                                    * attention's Q, K, V and probabilities, an LSTM's
                                    * gates), a local pair that is not read in place is a
                                    * copy in the consumer's input buffer from its forward
                                    * to its backward. Default 0: the operators' own counts
                                    * (what PyTorch's modules save) */
    int pipeline_fast;             /* 1: a 1F1B pipeline of many micro-batches may take the
                                    * fast path (one shorter run whose steady micro-batches
                                    * repeat task for task at a period, carried to m; else
                                    * every micro-batch; docs/simulator.md, "Pipelines");
                                    * only without keep_schedule. Default 0 */
    int every_replica;             /* 1: simulate every data-parallel replica of a pipeline
                                    * (default 0: identical replicas are simulated as one,
                                    * with the same result; docs/simulator.md, "Identical
                                    * replicas") */
    int64_t max_tasks;             /* 0 (default): no limit; else a full simulation whose task
                                    * graph grows past this many tasks stops with SF_ERR_RANGE
                                    * before it is laid out, and a delta update is cut off
                                    * (cut_off, iter_s infinite: revert it) */
} sf_sim_options;

#define SF_SIM_MAX_SEGMENTS 64

SF_API void sf_sim_options_default(sf_sim_options *o);

/* The simulator takes every machine sf_machine_build makes: up to SF_MAX_DEVICES
 * (4096) devices, whatever their links (a pairwise node of 4096 has 16.8 M). What it
 * keeps per link follows the links its tasks use, not the machine's (sim_links.c),
 * so a large machine costs a strategy's links, not the cluster's. */
#define SF_SIM_MAX_DEVICES SF_MAX_DEVICES

typedef struct sf_sim_result {
    double iter_s;          /* one iteration: the makespan of its tasks, plus the host
                             * overhead, or the input pipeline's time where that is longer */
    double compute_s;       /* sum of device task times (forward, backward, update, and
                             * copy on a machine that prices copies) */
    double transfer_s;      /* sum over link tasks carrying activations/gradients */
    double sync_s;          /* sum over link tasks of gradient all-reduces */
    int64_t transfer_bytes; /* activation + activation-gradient bytes moved between devices */
    int64_t sync_bytes;     /* bytes sent by gradient syncs (all-reduces, parameter servers) */
    int64_t intra_bytes;    /* bytes over intra-node links (per link crossed) */
    int64_t inter_bytes;    /* bytes over inter-node links */
    double peak_mem_bytes;  /* largest per-device memory */
    int fits;               /* 1 when every device's memory fits its capacity */
    int64_t tasks;          /* tasks in the task graph */
    int cut_off;            /* 1: a bounded update stopped early (iter_s > its bound) */
    int64_t rescheduled;    /* tasks this call scheduled: all of them for a full run, those
                             * from the earliest change on for a delta update */
    int fast_copies;        /* 0, or a pipeline's fast path: the micro-batches of the run
                             * carried to m (its tasks are `rescheduled`, `tasks` the
                             * whole micro-batch graph's) */
    int replicas;           /* 0, or a pipeline's D identical data-parallel replicas
                             * simulated as one (docs/simulator.md, "Identical
                             * replicas"): `tasks` and `rescheduled` are one replica's */
    int n_devices;
    double *device_busy_s;    /* [n_devices], owned by the simulator, valid until next call;
                               * on a machine whose devices share cores, per core: on the
                               * node's device of the core's number, 0 on the others */
    double *device_mem_bytes; /* [n_devices] every activation, received copy and weight a
                               * device holds, summed as if alive at once */
    /* with sf_sim_options.memory_timeline (else 0 and NULL): memory as the schedule lives
     * it, each entry alive from its first use to its last, activation gradients included */
    double live_peak_bytes;     /* largest of device_live_bytes */
    double *device_live_bytes;  /* [n_devices] each device's peak over the timeline */
    double *device_live_peak_s; /* [n_devices] when that peak is reached */
    double *device_live_kinds;  /* [n_devices * SF_SIM_MEM_KIND_COUNT] what each peak holds, by
                                 * sf_sim_mem_kind: device d's at d * SF_SIM_MEM_KIND_COUNT */
    /* What limits the iteration besides the task graph (docs/cost-model.md, "What limits
     * scaling"): iter_s = max(makespan_s + host_s, input_s). All 0 on a machine whose
     * device has neither figure (host_overhead_s, input_samples_per_s). */
    double makespan_s; /* the task graph's schedule alone */
    double host_s;     /* the device's per-iteration host overhead */
    double input_s;    /* the slowest device's input pipeline: its samples / its rate */
} sf_sim_result;

typedef struct sf_sim sf_sim;

SF_API sf_sim *sf_sim_new(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                          const sf_sim_options *o, sf_error *err);
SF_API void sf_sim_free(sf_sim *sim);

/* Full simulation of a (valid) strategy: builds the task graph from scratch. */
SF_API sf_status sf_sim_run(sf_sim *sim, const sf_strategy *s, sf_sim_result *r, sf_error *err);
/* Delta simulation: change operator `op` of the last simulated strategy to `c`,
 * rebuild only its tasks and the transfers and syncs that touch them, and
 * re-propagate times. The result equals sf_sim_run on the changed strategy. */
SF_API sf_status sf_sim_update(sf_sim *sim, int op, const sf_config *c, sf_sim_result *r,
                               sf_error *err);
/* sf_sim_update that gives up as soon as the iteration is sure to take longer
 * than bound_s: then r->cut_off is 1, r->iter_s is a lower bound above bound_s,
 * the other fields are not filled, and the next call must be sf_sim_revert (or
 * a full sf_sim_run). Metropolis-Hastings knows before simulating how slow a
 * proposal may be and still be accepted, so most bad proposals end early. */
SF_API sf_status sf_sim_update_bounded(sf_sim *sim, int op, const sf_config *c, double bound_s,
                                       sf_sim_result *r, sf_error *err);
/* One delta update that changes n operators at once (1 <= n <=
 * SF_SIM_MAX_UPDATE_OPS, no operator twice): ops[j] gets cfgs[j]. The result
 * equals sf_sim_run on the changed strategy, bound_s acts as in
 * sf_sim_update_bounded (INFINITY: none), and one sf_sim_revert undoes the whole
 * change. The MCMC search moves a producer and its consumer together with it. */
#define SF_SIM_MAX_UPDATE_OPS 4
SF_API sf_status sf_sim_update_ops(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                                   double bound_s, sf_sim_result *r, sf_error *err);
/* sf_sim_update_ops without its limit on n (n >= 1 operators, none twice):
 * the MCMC search's template moves change one operator in every layer at once.
 * The update is as exact as any, and one sf_sim_revert undoes it. */
SF_API sf_status sf_sim_update_many(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                                    double bound_s, sf_sim_result *r, sf_error *err);
/* Undo the last sf_sim_update, _bounded, _ops or _many (one level): the simulator
 * returns to the strategy and schedule it had before, and r (when non-NULL) gets
 * that result again. The MCMC search calls it for every rejected proposal. */
SF_API sf_status sf_sim_revert(sf_sim *sim, sf_sim_result *r, sf_error *err);
/* What the last uncut sf_sim_update changed in the schedule: floors on what any
 * exact delta simulation has to redo, which bound what it can save over a full
 * one (bench sim reports the shares; docs/simulator.md). */
typedef struct sf_sim_delta_stats {
    int64_t changed; /* tasks new (in a rebuilt block) or starting at another time */
    int64_t uneven;  /* tasks new, or whose predecessors did not all move by the same
                      * amount: even a method that only shifted runs of the old
                      * schedule would have to work out each of their times anew */
} sf_sim_delta_stats;
/* SF_OK and *out filled; SF_ERR_INVALID when no uncut update is there to compare. */
SF_API sf_status sf_sim_delta_stats_get(sf_sim *sim, sf_sim_delta_stats *out, sf_error *err);
/* The strategy the simulator holds now (after run/update). */
SF_API const sf_strategy *sf_sim_strategy(const sf_sim *sim);
/* Change sf_sim_options.max_tasks for the next full simulations. */
SF_API void sf_sim_set_max_tasks(sf_sim *sim, int64_t max_tasks);

/* ---- where one device's time goes ------------------------------------------ */

/* Kinds of task time charged to one device (sf_sim_kind_totals). */
typedef enum sf_sim_total {
    SF_SIM_TOTAL_COMPUTE = 0, /* its forward and backward tasks */
    SF_SIM_TOTAL_TRANSFER,    /* activation and activation-gradient link tasks on links
                               * into it (the hop that delivers a message it receives) */
    SF_SIM_TOTAL_SYNC,        /* gradient-sync link tasks on links out of it (its ring
                               * edge; parameter server: what it sends) */
    SF_SIM_TOTAL_UPDATE,      /* its update tasks */
    SF_SIM_TOTAL_COPY,        /* its copies of tile regions and shards (machines with
                               * copy_bw_Bps only) */
    SF_SIM_TOTAL_COUNT
} sf_sim_total;

/* Seconds of task time of the last schedule that fall to `device`, by kind:
 * sums of task durations (link tasks hold their link, overlap or not), in
 * canonical task order, so a delta update gives exactly what a full run of
 * the same strategy gives. compute + update + copy is device_busy_s[device];
 * summed over every device, it is sf_sim_result.compute_s, and on a
 * machine of single-link routes transfer and sync are transfer_s and sync_s.
 * SF_ERR_INVALID when nothing (or only a cut-off update) was simulated or
 * device is out of range. */
SF_API sf_status sf_sim_kind_totals(const sf_sim *sim, int device, double out[SF_SIM_TOTAL_COUNT],
                                    sf_error *err);

/* ---- pictures of the last schedule ---------------------------------------- */

/* Chrome trace JSON (Perfetto): a track per device and per link. Needs a
 * simulator made with keep_schedule (the default) that has run. */
SF_API sf_status sf_sim_write_trace(const sf_sim *sim, const char *path, sf_error *err);
/* SVG Gantt chart. */
SF_API sf_status sf_sim_write_svg(const sf_sim *sim, const char *path, sf_error *err);
/* The same pictures as malloc'd text (caller frees; NULL and err on failure),
 * for a caller that writes several files as one (sf_write_files_atomic). */
SF_API char *sf_sim_trace_to_json(const sf_sim *sim, sf_error *err);
SF_API char *sf_sim_to_svg(const sf_sim *sim, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
