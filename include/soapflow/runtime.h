/*
 * soapflow/runtime.h - train with a strategy: one rank per device, the real
 * kernels, real messages, real gradient all-reduces.
 *
 *     sf_runtime_options o;                                // on every rank, with its comm
 *     sf_runtime_options_default(&o);                      // c: sf_comm_mpi_new under mpirun,
 *     sf_runtime *rt = sf_runtime_new(g, s, c, &o, &err);  // or from sf_comm_local_run
 *     sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)w, &err); // same on all
 *     double loss = 0;
 *     for (int i = 0; i < 10; i++) sf_runtime_step(rt, batch, &loss, &err);
 *     sf_runtime_get_params(rt, SF_RT_WEIGHTS, w, &err);   // gathered on rank 0
 *     sf_runtime_free(rt);
 *
 * The runtime executes the task graph of soapflow/taskgraph.h on the ranks:
 * rank r is device r of the strategy. Every rank derives the same static
 * schedule: forward over the operators in id order, backward in reverse,
 * each rank running the parts it holds. Every pair of the task graph whose
 * producer and consumer parts sit on different ranks is one message of
 * exactly its region (posted as soon as the producer part is done, received
 * into a buffer posted before the iteration starts), and its gradient goes
 * back the same way. Each weight shard held by several ranks is synchronized
 * by the task graph's steps of the sync scheme (sf_taskgraph_sync_steps): a
 * ring's reduce-scatter and all-gather as one nonblocking all-reduce, a
 * parameter server's messages, the hierarchical scheme's reduce-scatter,
 * all-reduce and all-gather, each collective on a group made once per distinct
 * set of ranks; started as soon as every rank's tasks of the shard are done
 * (overlap), or after the backward pass (bulk), in the same global order on
 * every rank (the shard's lowest operator, latest first). Then the ranks that
 * update a shard (every replica; under a parameter server the server, which
 * sends the others the new weights) do so with the options' optimizer
 * (sf_optimizer_step, cost.h: SGD with momentum and weight decay as PyTorch's,
 * v = mu v + g + wd w; w -= lr v; or Adam, AdamW with PyTorch's formulas and
 * bias correction from the step count, sf_runtime_steps + 1).
 *
 * A pipelined strategy (sf_strategy_pipeline) runs on the micro-batch graph
 * under the unrolled strategy: each rank runs its stage's slots in the order
 * of the schedule, each copy's loss is over the whole batch, the copies'
 * gradients accumulate in their shared weight groups and every shard is
 * synced once after the flush (docs/runtime.md, "Pipelines").
 *
 * Memory: the output and output-gradient tiles of the parts a rank runs, the
 * input regions (and their gradients) they read, message buffers, each alive
 * only over its points of the step (docs/runtime.md, "Memory"), so that
 * buffers whose lives do not meet share memory; and of every weight group the
 * rank takes part in, the elements of its shards (kernels address weights in
 * full layout; only the shard's elements are touched, reduced and updated;
 * under ZeRO the rank's chunks). All of it is planned first and reserved at
 * once: a step allocates nothing.
 */
#ifndef SOAPFLOW_RUNTIME_H
#define SOAPFLOW_RUNTIME_H

#include "soapflow/core.h"
#include "soapflow/graph.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- communication --------------------------------------------------------- */

typedef struct sf_comm sf_comm;

/* This process as one of the ranks mpirun started (MPI_Init). Without mpirun,
 * a world of one rank. */
SF_API sf_comm *sf_comm_mpi_new(sf_error *err);
/* Run fn on n ranks that are threads of this process, each with its own comm;
 * returns when all have returned: SF_OK, or the status and message (prefixed
 * "rank R: ") of the lowest rank that failed. A rank that fails makes the
 * others' pending waits fail too, so nobody hangs. */
typedef sf_status (*sf_comm_rank_fn)(sf_comm *c, void *arg);
SF_API sf_status sf_comm_local_run(int n, sf_comm_rank_fn fn, void *arg, sf_error *err);
SF_API int sf_comm_rank(const sf_comm *c);
SF_API int sf_comm_size(const sf_comm *c);
SF_API const char *sf_comm_kind(const sf_comm *c); /* "MPI", "threads" */
/* The cores of this rank's host when the ranks on it outnumber them, else 0:
 * the MPI back end then pins each rank to one core and yields the core while
 * it waits, and the ranks of a core take turns (a machine's
 * runtime.cores_per_node, which calibrate writes from this). Threads: 0. */
SF_API int sf_comm_shared_cores(const sf_comm *c);
SF_API void sf_comm_free(sf_comm *c);
/* Every rank passes its own status; all learn whether any failed, and the
 * message of the lowest failing rank (prefixed "rank R: " when there are
 * several ranks) lands in err on every rank. Returns that rank's status, or
 * SF_OK when none failed. Collective. */
SF_API sf_status sf_comm_agree(sf_comm *c, sf_status st, sf_error *err);
/* Blocking world-wide helpers for the commands: sum of doubles, max of ints,
 * broadcast of bytes from root. */
SF_API sf_status sf_comm_sum(sf_comm *c, double *v, int n);
SF_API sf_status sf_comm_max(sf_comm *c, int *v, int n);
SF_API sf_status sf_comm_bcast(sf_comm *c, void *buf, size_t bytes, int root);
/* Blocking point-to-point messages, an in-place sum of floats over every rank
 * and a barrier, for the commands that measure the ranks (calibrate). */
SF_API sf_status sf_comm_send(sf_comm *c, const void *buf, size_t bytes, int dst, int tag);
SF_API sf_status sf_comm_recv(sf_comm *c, void *buf, size_t bytes, int src, int tag);
SF_API sf_status sf_comm_sum_floats(sf_comm *c, float *buf, int64_t n);
SF_API sf_status sf_comm_barrier(sf_comm *c);

/* ---- the runtime ------------------------------------------------------------ */

typedef struct sf_runtime_options {
    double lr;                 /* learning rate (default 0.01) */
    double momentum;           /* SGD momentum (default 0.9) */
    double weight_decay;       /* SGD, Adam: L2, added to the gradient; AdamW: decoupled,
                                * w *= 1 - lr wd before the step (default 0) */
    sf_sync_mode sync;         /* when a shard's sync starts: overlap (default) or bulk */
    sf_sync_scheme scheme;     /* how it runs: the task graph's steps of the scheme (ring) */
    const sf_machine *machine; /* the machine of the ranks: its nodes place the hierarchical
                                * scheme's levels (NULL: one node) */
    int fast_kernels;          /* 1: the fast kernels (default), 0: the reference ones */
    uint64_t seed;             /* dropout masks: step s uses a hash of (seed, s) */

    /* the optimizer (cost.h, sf_optimizer_step), with lr, momentum and weight_decay */
    sf_optimizer_kind optimizer; /* sgd (default), adam or adamw */
    double beta1, beta2, eps;    /* Adam, AdamW (default 0.9, 0.999, 1e-8) */
} sf_runtime_options;

SF_API void sf_runtime_options_default(sf_runtime_options *o);

typedef struct sf_runtime sf_runtime;

/* Set up rank sf_comm_rank(c) for strategy s (validated by the caller for a
 * machine of sf_comm_size(c) devices; a part on a device >= the rank count is
 * SF_ERR_INVALID). Collective: every rank must call it with the same graph
 * and strategy. */
SF_API sf_runtime *sf_runtime_new(const sf_graph *g, const sf_strategy *s, sf_comm *c,
                                  const sf_runtime_options *o, sf_error *err);
SF_API void sf_runtime_free(sf_runtime *rt);

/* One batch: the whole input tensors and labels (every rank takes the tiles
 * it needs from them). */
typedef struct sf_batch {
    const float *const *inputs;   /* [n_ops]: each input operator's whole tensor
                                   * (token ids as floats); NULL for the others */
    const int32_t *const *labels; /* [n_ops]: each softmax_ce operator's class per
                                   * row (its leading dimensions, row-major) */
} sf_batch;

/* One training iteration; *loss (when non-NULL) gets the summed loss of every
 * softmax_ce operator, the same on every rank. Collective. */
SF_API sf_status sf_runtime_step(sf_runtime *rt, const sf_batch *b, double *loss, sf_error *err);
/* Forward only (no gradients, no update), in inference mode as PyTorch's
 * module.eval(): dropout is the identity and batch norm normalizes with its
 * running statistics. The loss, and, for classification, the number of rows
 * whose largest probability is at their label (correct), summed over every
 * softmax_ce operator. Collective. */
SF_API sf_status sf_runtime_eval(sf_runtime *rt, const sf_batch *b, double *loss, int64_t *correct,
                                 sf_error *err);
/* The same forward in either mode: train 0 is sf_runtime_eval; train 1 runs it
 * as a step's forward does (dropout drawn, batch norm on the batch's
 * statistics) without updating anything, to compare with a framework's loss
 * in training mode. Collective. */
SF_API sf_status sf_runtime_forward(sf_runtime *rt, const sf_batch *b, int train, double *loss,
                                    int64_t *correct, sf_error *err);

/* What a weight group holds: its weights, and the optimizer's state: SGD's
 * momentum or Adam's first moment (exp_avg) in SF_RT_MOMENTUM, Adam's second
 * moment (exp_avg_sq) in SF_RT_SECOND_MOMENT, which SGD does not keep
 * (SF_ERR_INVALID). */
typedef enum sf_rt_params {
    SF_RT_WEIGHTS = 0,
    SF_RT_MOMENTUM,
    SF_RT_SECOND_MOMENT,
    SF_RT_PARAMS_COUNT
} sf_rt_params;

/* Set every weight group's full layout (or optimizer state) from bufs[owner op]
 * (NULL for operators that own no weights); every rank passes the same. */
SF_API sf_status sf_runtime_set_params(sf_runtime *rt, sf_rt_params which, const float *const *bufs,
                                       sf_error *err);
/* Gather them on rank 0 into bufs[owner op] (other ranks may pass NULL):
 * each shard's elements come from its first device. Collective. */
SF_API sf_status sf_runtime_get_params(sf_runtime *rt, sf_rt_params which, float *const *bufs,
                                       sf_error *err);
/* Buffers: the state that is not trained but kept, batch norm's running mean
 * and variance (PyTorch's running_mean and running_var). Each training step
 * updates them from the statistics of its whole batch, added over every part
 * and rank (momentum 0.1, unbiased variance, as nn.BatchNorm*d), so that every
 * rank holds the same numbers and they are those one device would have, however
 * the operator is split: docs/runtime.md. bufs[op] is op's full buffer layout
 * (sf_buffers_numel floats; NULL for operators without buffers): set on every
 * rank alike, got from this rank (all hold the same). */
SF_API sf_status sf_runtime_set_buffers(sf_runtime *rt, const float *const *bufs, sf_error *err);
SF_API sf_status sf_runtime_get_buffers(const sf_runtime *rt, float *const *bufs, sf_error *err);
/* The learning rate of the next steps (a schedule sets it before each). */
SF_API void sf_runtime_set_lr(sf_runtime *rt, double lr);
/* Steps taken (sf_runtime_step calls, or as set for a resumed run): Adam's
 * bias correction counts from it, so a resumed run sets it before its first step. */
SF_API int64_t sf_runtime_steps(const sf_runtime *rt);
SF_API void sf_runtime_set_steps(sf_runtime *rt, int64_t steps);
/* Bytes this rank reserved: the one block its tensors and buffers share (each
 * alive over its part of the step, those whose lives do not meet in the same
 * memory), and what it holds of its weight groups (its shards' weights,
 * gradients and optimizer state; under ZeRO its chunks, and the rest of a
 * shard as far as a pass gathers it). */
SF_API int64_t sf_runtime_reserved_bytes(const sf_runtime *rt);
/* The most bytes this rank holds at one point of a step (training): the
 * tensors and buffers alive there and the weight groups' share, as the memory
 * plan lays the step out (docs/runtime.md, "Memory"). */
SF_API int64_t sf_runtime_peak_bytes(const sf_runtime *rt);

/* What this rank did in its last step, for a measured timeline. */
typedef enum sf_rt_event_kind {
    SF_RT_FWD = 0,
    SF_RT_BWD,
    SF_RT_UPDATE,
    SF_RT_XFER, /* an activation message this rank received: posted .. arrived */
    SF_RT_GRAD, /* an activation-gradient message received */
    SF_RT_SYNC, /* a step of a shard's sync (collective or message): posted .. done */
    SF_RT_COPY, /* a copy of a tile region (into an input, a message, a gradient)
                 * or of a shard (packed for its all-reduce, unpacked after) */
    SF_RT_EVENT_KIND_COUNT
} sf_rt_event_kind;

typedef struct sf_rt_event {
    double t0_s, t1_s; /* seconds since the step began */
    int op, part;      /* for SYNC: the group's owner op and the shard */
    int peer;          /* XFER/GRAD: the sending rank; SYNC: -1 */
    uint8_t kind;      /* sf_rt_event_kind */
    int64_t bytes;
} sf_rt_event;

SF_API int sf_runtime_events(const sf_runtime *rt, const sf_rt_event **events);
/* The graph rt runs, whose operator ids the events name: the caller's, or for
 * a pipelined strategy its micro-batch graph (sf_graph_micro_batches: copy j
 * of operator i at id j n + i). */
SF_API const sf_graph *sf_runtime_graph(const sf_runtime *rt);

/* A Chrome trace (Perfetto) of one measured step of n_ranks ranks on machine m
 * (ranks are its devices): the tracks and task names of the simulator's trace
 * (sf_sim_write_trace), so the two open side by side. Compute on the device
 * tracks; a message on each link of its route, from the moment its receiver
 * waited for it to its arrival; an all-reduce on the links from the rank to
 * the next one. Written atomically. */
struct sf_machine;
SF_API sf_status sf_runtime_write_trace(const char *path, const sf_graph *g,
                                        const struct sf_machine *m, int n_ranks,
                                        const sf_rt_event *const *events, const int *counts,
                                        sf_error *err);

/* Gather every rank's events of rt's last step on rank 0 and write them there
 * as a measured trace (sf_runtime_write_trace). Collective over c. */
SF_API sf_status sf_runtime_write_measured_trace(sf_comm *c, const sf_runtime *rt, const char *path,
                                                 const sf_graph *g, const struct sf_machine *m,
                                                 sf_error *err);

/* ---- parameters in full layout ------------------------------------------------- */

/* A malloc'd full-layout buffer for every operator that owns weights (NULL for
 * the others; the array has sf_graph_num_ops entries), initialized as
 * PyTorch's modules are (sf_op_params) from a generator seeded with seed, or
 * zero when zero is non-zero. The same seed gives the same weights whatever
 * the strategy. */
SF_API float **sf_params_new(const sf_graph *g, uint64_t seed, int zero, sf_error *err);
SF_API void sf_params_free(const sf_graph *g, float **bufs);
/* Floats of op's buffers: 2 C for a batch norm (running_mean (C), then
 * running_var (C)), 0 for every other operator. */
SF_API int64_t sf_buffers_numel(const sf_op *op);
/* The buffer tensors of op as sf_op_param_descs describes parameters (out has
 * room for SF_MAX_PARAMS): PyTorch's state_dict names "running_mean" and
 * "running_var", shape (C), their offsets and constant initial values (0, 1).
 * Checkpoints name them "<op>.<name>". Returns the count (0 without buffers). */
SF_API int sf_buffer_descs(const sf_op *op, sf_param_desc *out);
/* A malloc'd buffer layout for every operator that has buffers (NULL for the
 * others), at PyTorch's initial values: running mean 0, running variance 1.
 * Free with sf_params_free. */
SF_API float **sf_buffers_new(const sf_graph *g, sf_error *err);

/* ---- batches held in memory ------------------------------------------------------ */

/* Whole-batch buffers for every input and softmax_ce operator of a graph,
 * with the sf_batch that points at them. */
typedef struct sf_batch_bufs {
    int n_ops;
    float **inputs;   /* [n_ops] */
    int32_t **labels; /* [n_ops] */
    int64_t *numel;   /* [n_ops] elements of inputs[op] or labels[op] */
    int64_t *bound;   /* [n_ops] index inputs: ids < bound (the embedding's rows);
                       * labels: classes; 0 otherwise */
    sf_batch batch;
} sf_batch_bufs;

SF_API sf_batch_bufs *sf_batch_bufs_new(const sf_graph *g, sf_error *err);
SF_API void sf_batch_bufs_free(sf_batch_bufs *b);
/* Synthetic data, a function of (seed, step): inputs uniform in [0, 1) (token
 * ids uniform below their bound), labels uniform over the classes. */
SF_API void sf_batch_synthetic(sf_batch_bufs *b, const sf_graph *g, uint64_t seed, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
