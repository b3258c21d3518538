/*
 * soapflow/taskgraph.h - the structure of one synchronous training iteration of
 * a (graph, strategy) and everything it moves: which tiles each part computes,
 * which producer part sends which region to which consumer part, which devices
 * share each weight shard, and the communication steps (messages, collectives,
 * copies, updates) that the transfers and gradient syncs are lowered into. The
 * simulator prices these steps with the one pricing function below (routes,
 * link times, segments, the all-reduce curve, copies, updates), OptCNN's
 * additive model prices the same steps with it, and the runtime executes them
 * (kernels, messages, collectives): none of them derives regions, groups or a
 * sync scheme on its own, so what is simulated is what runs.
 *
 *     sf_taskgraph *tg = sf_taskgraph_new(g, n_devices, &err);
 *     sf_taskgraph_set_strategy(tg, s);          // s stays the caller's
 *     for (int i = 0; i < n_ops; i++) sf_taskgraph_set_tiles(tg, i);
 *     const sf_tg_pair *pairs;
 *     int n = sf_taskgraph_edge(tg, op, k, &pairs); // who feeds input k of op
 *     int messages = 0;                          // pairs across devices
 *     for (int i = 0; i < n; i++) messages += pairs[i].src_dev != pairs[i].dst_dev;
 *     sf_tg_sync sync;                           // shards of owner's weights,
 *     sf_tg_steps steps;                         // and the steps of their sync
 *     sf_taskgraph_sync_steps(tg, owner, &sync, &steps); // (no machine: a ring)
 *     int replicas = sync.n_shards ? sync.shards[0].n_devs : 0;
 *     sf_taskgraph_free(tg);
 *
 * One iteration, for every operator part p on device d:
 *   forward(op, p)   needs, for each input k, every pair of sf_taskgraph_edge
 *                    (op, k) with cons_part p: nothing when the producer part
 *                    is on d and the pair is in_place, a local copy when it is
 *                    on d otherwise, else one message of `region` from src_dev
 *                    (sf_taskgraph_pair_steps: [pack], P2P, [unpack]);
 *   backward(op, p)  after the backward of every consumer part it fed, whose
 *                    gradients come back along the same pairs, reversed
 *                    ([pack], P2P, [accumulate]);
 *   sync(shard)      the steps sf_taskgraph_sync_steps lowers the shard's
 *                    gradient sync into under the scheme of
 *                    sf_taskgraph_set_comm (ring, parameter server,
 *                    hierarchical); its first steps wait for the shard's
 *                    backward tasks on the devices they involve (sync mode
 *                    overlap) or for those devices' whole backward passes
 *                    (bulk);
 *   update(shard)    an UPDATE step of that list: on every device of the shard,
 *                    or under a parameter server on the server alone, which
 *                    then sends the new weights back.
 * Bracketed copies are listed only on a machine that prices the runtime's
 * copies (runtime.copy_GBps); elsewhere nothing depends on them. A shard whose
 * elements are one run of its layout (sf_weight_slices_one_run) has no packing
 * copies under ring and hierarchical: the runtime syncs it in place.
 * Operators are numbered in a topological order (inputs before consumers), so
 * op-id order is a valid forward order and its reverse a valid backward order.
 *
 * Every consumer part's input region is covered exactly once by the regions of
 * its pairs (the producer's part tiles partition each output): tests check it.
 * The step kinds (point-to-point, reduce-scatter, all-gather, all-reduce,
 * broadcast, copy, update) are meant to carry other kinds of communication
 * too; sf_tg_price_step prices each kind wherever it appears.
 */
#ifndef SOAPFLOW_TASKGRAPH_H
#define SOAPFLOW_TASKGRAPH_H

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One producer part feeding one consumer part through input k of an operator. */
typedef struct sf_tg_pair {
    int prod_part;  /* part of the producer operator (op->inputs[k].op) */
    int cons_part;  /* part of the consumer operator */
    int src_dev;    /* device of the producer part */
    int dst_dev;    /* device of the consumer part; == src_dev: no transfer */
    int64_t numel;  /* elements of region (> 0) */
    sf_tile region; /* the intersection of the producer part's output piece and the
                     * consumer part's input region, in the coordinates of the tensor
                     * op->inputs[k] */
    int in_place;   /* a local pair whose region is the producer's whole piece and the
                     * consumer's whole input: 1, the consumer reads the piece where it
                     * lies; 2, also its input gradient is accumulated straight into
                     * the producer's output gradient (the tensor has no other reader
                     * and the piece feeds no other pair). 0: the region is copied (a
                     * message is packed and unpacked, its gradient too) */
    /* The contiguous runs the runtime copies region in (sf_tile_runs): between the
     * producer part's output piece and the consumer part's input region (a local
     * copy and its gradient), between the piece and the packed region (a message's
     * packing, its gradient's unpacking), between the packed region and the
     * input region (the unpacking, the gradient's packing). */
    int64_t runs_local, runs_src, runs_dst;
} sf_tg_pair;

/* One (operator, part) holding a weight shard. */
typedef struct sf_tg_entry {
    int op, part;
} sf_tg_entry;

/* A weight shard of one weight group: the parts (of the group's operators)
 * whose tiles use the same weight elements, and the devices they are on. */
typedef struct sf_tg_shard {
    int rep_op, rep_part; /* the first entry: its tile names the shard */
    int rep_dev;          /* its device (a parameter server's) */
    int64_t numel;        /* weight elements of the shard (sf_op_tile_weights) */
    int n_devs;           /* distinct devices; > 1: its gradient is all-reduced */
    int dev_start;        /* its devices: sf_tg_sync.devs[dev_start .. + n_devs], id order */
} sf_tg_shard;

/* The shards of one weight group (sf_taskgraph_sync), valid until the next call. */
typedef struct sf_tg_sync {
    int n_shards;
    const sf_tg_shard *shards;
    const int16_t *devs; /* devices of every shard, see sf_tg_shard */
    /* entries of shard s on its i-th device, in entry order (the group's members
     * in order, parts in order): ents[ent_start[dev_start + i] ..
     * ent_start[dev_start + i + 1]] */
    const int32_t *ent_start;
    const sf_tg_entry *ents;
} sf_tg_sync;

typedef struct sf_taskgraph sf_taskgraph;

SF_API sf_taskgraph *sf_taskgraph_new(const sf_graph *g, int n_devices, sf_error *err);
SF_API void sf_taskgraph_free(sf_taskgraph *tg);
/* The strategy the records describe (not copied: changes to it show after
 * sf_taskgraph_set_tiles of the operators that changed). */
SF_API void sf_taskgraph_set_strategy(sf_taskgraph *tg, const sf_strategy *s);
SF_API const sf_graph *sf_taskgraph_graph(const sf_taskgraph *tg);

/* Compute (again) the part tiles of op under the strategy's config; SF_ERR_NOMEM
 * when there is no room for them (nothing changed). */
SF_API sf_status sf_taskgraph_set_tiles(sf_taskgraph *tg, int op);
/* Room for n part tiles of op (they are kept per operator, as many as its
 * largest config so far had): SF_OK, or SF_ERR_NOMEM with nothing changed. */
SF_API sf_status sf_taskgraph_reserve_tiles(sf_taskgraph *tg, int op, int n);
/* op's part tiles, [n_parts] (sf_config_part_tile); writable, so that a caller
 * that changes a config and changes it back may save and restore them. */
SF_API sf_tile *sf_taskgraph_tiles(sf_taskgraph *tg, int op);

/* The operator that owns op's weights (op itself, the one it shares them with),
 * -1 when op has none; the members of a group whose owner is `owner`, owner
 * first, in id order. */
SF_API int sf_taskgraph_owner(const sf_taskgraph *tg, int op);
SF_API int sf_taskgraph_members(const sf_taskgraph *tg, int owner, const int **members);
/* The (consumer op, input index) pairs that read op's outputs, in id order. */
SF_API int sf_taskgraph_consumers(const sf_taskgraph *tg, int op, const sf_tensor_ref **cons);

/* The pairs that feed input k of op, ordered by consumer part, then producer
 * part (row-major over the producer's grid). Valid until the next call on tg.
 * Returns how many, or -1 when out of memory. The tiles of op and of its
 * producer must be set. */
SF_API int sf_taskgraph_edge(sf_taskgraph *tg, int op, int k, const sf_tg_pair **pairs);
/* The pairs of sf_taskgraph_edge that cost something: those across devices,
 * and on a machine that prices copies (sf_taskgraph_set_comm) every pair. For a
 * caller that prices edges and nothing else (OptCNN's tables). */
SF_API int sf_taskgraph_edge_moves(sf_taskgraph *tg, int op, int k, const sf_tg_pair **pairs);
/* The shards of the weight group owned by `owner` (sf_taskgraph_owner(owner) ==
 * owner), in order of first appearance. The tiles of every member must be set.
 * SF_OK, or SF_ERR_NOMEM. */
SF_API sf_status sf_taskgraph_sync(sf_taskgraph *tg, int owner, sf_tg_sync *out);
/* The weight elements each device holds under the strategy (set, with every
 * operator's tiles): every shard's elements once on each of its devices, a
 * weight group shared by several operators (unrolled steps, a tied head) once.
 * per_device has n_devices entries; SF_ERR_NOMEM. Multiplied by the bytes a
 * weight element keeps (weights, gradient, optimizer state) it is the device's
 * weight state. */
SF_API sf_status sf_taskgraph_device_weights(sf_taskgraph *tg, int64_t *per_device);

/* ---- communication: how gradients are synchronized ------------------------- */

/* When a weight shard's first sync steps may start (docs/simulator.md). */
typedef enum sf_sync_mode {
    SF_SYNC_OVERLAP = 0, /* as soon as the shard's backward tasks are done (default) */
    SF_SYNC_BULK,        /* after each replica device's whole backward pass */
    SF_SYNC_MODE_COUNT
} sf_sync_mode;

/* "overlap", "bulk"; NULL for an invalid mode. */
SF_API const char *sf_sync_mode_name(sf_sync_mode m);
/* Parse a mode name; -1 when unknown. */
SF_API int sf_sync_mode_parse(const char *name, sf_sync_mode *out);

/* How a weight shard's replicas combine their gradients, lowered into steps by
 * sf_taskgraph_sync_steps (docs/simulator.md). */
typedef enum sf_sync_scheme {
    SF_SCHEME_RING = 0,     /* ring all-reduce over the replicas in ring order (default;
                             * see sf_taskgraph_sync_steps): a reduce-scatter, then an
                             * all-gather */
    SF_SCHEME_PS,           /* parameter server on the device of the shard's first entry:
                             * every other replica (in ring order) sends its gradient
                             * there, the server updates, and sends the shard back, as
                             * the simulator of FlexFlow's 2020-21 Legion runtime models
                             * it */
    SF_SCHEME_HIERARCHICAL, /* two levels: a reduce-scatter inside each node, an
                             * all-reduce of each chunk across the nodes (the devices
                             * of one local position), an all-gather inside each node
                             * (Horovod's hierarchical all-reduce); a ring where every
                             * node holds one replica or all are on one node, and where
                             * the nodes hold different numbers of replicas */
    SF_SCHEME_COUNT
} sf_sync_scheme;

/* "ring", "ps", "hierarchical"; NULL for an invalid scheme. */
SF_API const char *sf_sync_scheme_name(sf_sync_scheme s);
/* Parse a scheme name; -1 when unknown. */
SF_API int sf_sync_scheme_parse(const char *name, sf_sync_scheme *out);

/* The kinds of step an iteration's communication is made of. The collectives
 * run over a group of devices in ring order (sf_tg_steps.devs); chunk i of a
 * buffer of n elements is the i-th of n_group runs of n / n_group elements, the
 * first n % n_group of them one longer. */
typedef enum sf_tg_step_kind {
    SF_STEP_P2P = 0,        /* dev sends numel elements to peer */
    SF_STEP_REDUCE_SCATTER, /* position i of the group ends with chunk i of the sum */
    SF_STEP_ALL_GATHER,     /* position i holds chunk i; every position ends with all */
    SF_STEP_ALL_REDUCE,     /* every position ends with the sum (a reduce-scatter and an
                             * all-gather in one collective) */
    SF_STEP_BROADCAST,      /* the group's first device sends the buffer to the others */
    SF_STEP_COPY,           /* dev copies numel elements (moved: bytes read and written
                             * per element): packing, unpacking, accumulating */
    SF_STEP_UPDATE,         /* the optimizer on dev over the shard's numel weights */
    SF_STEP_KIND_COUNT
} sf_tg_step_kind;

/* Chunk i (0 <= i < parts) of a buffer of n elements: its first element and
 * length, the rule every collective step follows (the simulator's byte
 * counts, the hierarchical scheme's chunks, the runtime's reduce-scatter and
 * all-gather). */
static inline void sf_tg_chunk(int64_t n, int parts, int i, int64_t *off, int64_t *len) {
    int64_t q = n / parts, rem = n % parts;
    *len = q + (i < rem);
    *off = q * i + (i < rem ? i : rem);
}

/* What a step moves. */
typedef enum sf_tg_payload {
    SF_PAYLOAD_GRAD = 0, /* gradients (of weights or of activations) */
    SF_PAYLOAD_WEIGHTS,  /* updated weights (a parameter server's return) */
    SF_PAYLOAD_ACT       /* activations */
} sf_tg_payload;

/* When a weight shard's step runs (ZeRO stage 3 gathers its weights before
 * each use; everything else is the sync after the backward pass). */
typedef enum sf_tg_step_phase {
    SF_PHASE_SYNC = 0,     /* the gradient sync and update, after the backward tasks */
    SF_PHASE_FORWARD = 1,  /* before the shard's forward tasks on the devices it involves */
    SF_PHASE_BACKWARD = 2, /* before the shard's backward tasks on the devices it involves */
    SF_PHASE_COUNT
} sf_tg_step_phase;

/* One step. Steps come in lists whose dependencies point backwards. */
typedef struct sf_tg_step {
    uint8_t kind;    /* sf_tg_step_kind */
    uint8_t payload; /* sf_tg_payload */
    uint8_t grads;   /* 1: it also waits for the shard's gradients on the devices it
                      * involves (the group, the sender, the copy's or the update's
                      * device): its backward tasks there, or under SF_SYNC_BULK that
                      * device's whole backward pass */
    uint8_t phase;   /* sf_tg_step_phase: when in the iteration it runs */
    int dev;         /* P2P: the sender; COPY, UPDATE: the device; else -1 */
    int peer;        /* P2P: the receiver; else -1 */
    int group;       /* collectives: devices devs[group .. group + n_group] in ring order */
    int n_group;
    int64_t numel;   /* elements: a collective's whole buffer, a message, a copy, the
                      * weights an update steps */
    int64_t offset;  /* the buffer's first element within the shard's packed layout */
    double moved;    /* COPY: bytes read and written per byte copied (2: a copy, 3: an
                      * accumulation) */
    int64_t runs;    /* COPY: the contiguous runs it copies in (one memcpy call each,
                      * priced by the machine's copy_run_s), at least 1; other steps 0 */
    int dep, n_deps; /* it waits for steps deps[dep .. dep + n_deps] of the same list */
} sf_tg_step;

/* Steps of the shards of one weight group (sf_taskgraph_sync_steps), valid
 * until the next call. Shard s's steps are steps[shard_start[s] ..
 * shard_start[s + 1]], in an order where every dependency comes first. */
typedef struct sf_tg_steps {
    int n_steps;
    const sf_tg_step *steps;
    const int16_t *devs;        /* devices of the collectives' groups */
    const int32_t *deps;        /* step indices (into steps) */
    const int32_t *shard_start; /* [n_shards + 1] */
} sf_tg_steps;

/* What the lowering needs of the machine: its nodes and PCIe switches
 * (hierarchical scheme, the order of rings) and whether it prices the runtime's
 * copies (COPY steps are listed only then; nothing else depends on them). m may
 * be NULL: one node of n_devices devices, no copies. */
SF_API void sf_taskgraph_set_comm(sf_taskgraph *tg, const sf_machine *m, sf_sync_scheme scheme);
SF_API sf_sync_scheme sf_taskgraph_scheme(const sf_taskgraph *tg);
/* The strategy is replica 0 of n_rep identical data-parallel replicas
 * (docs/simulator.md, "Identical replicas"): to[r * n_devices + d] is the
 * device of replica r that plays replica 0's device d. Each shard's sync steps
 * then run over its devices in every replica: replica 0's in ring order, then
 * each other replica's the same way (their nodes one after another, as the
 * ring of the whole strategy visits them). The steps name devices of other
 * replicas, which hold no parts here; the simulator keeps what replica 0's
 * nodes do. n_rep <= 1 (or to NULL) is one replica, the default; `to` is
 * borrowed and must live as long as tg uses it. */
SF_API void sf_taskgraph_set_replicas(sf_taskgraph *tg, int n_rep, const int16_t *to);

/* The shards of owner's weight group (as sf_taskgraph_sync, into *sync) and the
 * steps of their gradient sync and update under the scheme of
 * sf_taskgraph_set_comm. The steps take a shard's devices in ring order: as the
 * strategy names them (the devices of the shard's entries in entry order, each
 * at its first), one node's together, the nodes in the order of their first
 * device, and inside a node one PCIe switch's together likewise; so that
 * relabelling the devices of a strategy by a symmetry of the machine relabels
 * its steps alike and changes no simulated time, and a strategy that lists
 * devices in ascending order gets id order (comm.c, "Ring order"):
 *   ring:   [COPY pack on each device], REDUCE_SCATTER, ALL_GATHER over the
 *           shard's devices, [COPY unpack on each], UPDATE on each;
 *   ps:     per replica other than the server: [COPY pack], P2P of the gradient
 *           to the server, [COPY accumulate on the server]; UPDATE on the server;
 *           per replica: [COPY pack on the server], P2P of the weights back,
 *           [COPY unpack];
 *   hierarchical: [COPY pack], REDUCE_SCATTER inside each node, ALL_REDUCE of
 *           chunk l across the nodes' l-th devices, ALL_GATHER inside each node,
 *           [COPY unpack], UPDATE on each device;
 * a shard on one device: its UPDATE alone. Bracketed copies only on a machine
 * that prices copies. A weight group whose owner's config has a ZeRO stage
 * (sf_config.zero) lowers its replicated shards into a ring under every
 * scheme, each position updating its chunk alone (UPDATE with that chunk's
 * offset and numel):
 *   stage 1, 2: [COPY pack], REDUCE_SCATTER, UPDATE of chunk r on position r,
 *           ALL_GATHER of the updated weights (payload WEIGHTS), [COPY unpack];
 *   stage 3: ALL_GATHER of the weights (payload WEIGHTS, phase FORWARD),
 *           [COPY unpack], then the same again in phase BACKWARD, then [COPY
 *           pack], REDUCE_SCATTER, UPDATE of chunk r on position r (the
 *           weights stay sharded until the next forward gathers them).
 * Stages 1 and 2 lower alike: they differ in what a device keeps (the
 * simulator's memory), not in what moves. */
SF_API sf_status sf_taskgraph_sync_steps(sf_taskgraph *tg, int owner, sf_tg_sync *sync,
                                         sf_tg_steps *out);

/* The shards and steps op's weights would have if op alone held its weight
 * group (its tiles must be set): OptCNN's additive model charges each of a
 * group's G members 1/G of what it would pay alone. */
SF_API sf_status sf_taskgraph_op_sync_steps(sf_taskgraph *tg, int op, sf_tg_sync *sync,
                                            sf_tg_steps *out);

/* The steps of one pair of sf_taskgraph_edge (out: room for SF_TG_PAIR_STEPS),
 * forward steps first: a remote pair is [COPY pack on the producer's device],
 * P2P of the activations, [COPY unpack on the consumer's]; with grad, then
 * [COPY pack on the consumer's device], P2P of the gradient back, [COPY
 * accumulate on the producer's]. A local pair has no transfer: a COPY into the
 * consumer's input unless in place, and with grad an accumulation back unless in
 * place for gradients, on a machine that prices copies; else nothing. Each
 * step's deps name the step before it in its direction (n_deps 0 for the first
 * of each); *n_fwd gets how many are forward steps. Returns how many. */
#define SF_TG_PAIR_STEPS 6
SF_API int sf_taskgraph_pair_steps(const sf_taskgraph *tg, const sf_tg_pair *pr, int grad,
                                   sf_tg_step *out, int32_t *deps, int *n_fwd);

/* ---- partial sums ------------------------------------------------------------ */

/* A producer split along a reduction dimension (SF_DIM_REDUCE: a row-parallel
 * linear) holds, in each group of parts that differ only along it, partial sums
 * of one output piece. Before its pairs, each group's partial sums are reduced
 * into what the consumer's parts need (reduce.c); the pairs of
 * sf_taskgraph_edge then come from the parts that hold the sum. */
typedef enum sf_tg_reduce_kind {
    SF_REDUCE_ALL = 0, /* every device of the group needs the whole piece: an ALL_REDUCE;
                        * each need is read on its device (or from the first part);
                        * backward an ALL_REDUCE of the gradients the parts received */
    SF_REDUCE_SCATTER, /* the group's devices each need one region, which tile the piece
                        * in the collective's chunk sizes: a REDUCE_SCATTER, position i
                        * ending with chunks[part_start + i] (the regions packed in
                        * position order are its chunks); backward an ALL_GATHER */
    SF_REDUCE_ONE,     /* otherwise: to the first part's device, a P2P of the piece from
                        * each other part's device, each followed by [COPY accumulate
                        * there] (a part on that device: [COPY accumulate] alone);
                        * backward a BROADCAST from there to the group's other devices */
    SF_REDUCE_KIND_COUNT
} sf_tg_reduce_kind;

/* One group's reduction. */
typedef struct sf_tg_reduce {
    uint8_t kind;   /* sf_tg_reduce_kind */
    int n_parts;    /* parts of the group (the degree of the reduction) */
    int part_start; /* sf_tg_reduces.parts[part_start .. + n_parts]: in order along it */
    int64_t numel;  /* elements of the piece */
    sf_tile piece;  /* the output piece, in the output's coordinates */
    int step_start; /* steps[step_start .. + n_fwd]: the reduction, after the forward
                     * tasks of the group's parts on the devices each step involves;
                     * the pairs read the sum after all of them */
    int n_fwd;      /* then steps[.. step_start + n_steps]: the gradient's dual, after
                     * every pair's gradient has come back, before the group's
                     * backward tasks */
    int n_steps;
} sf_tg_reduce;

typedef struct sf_tg_reduces {
    int n; /* groups; 0 when the producer is whole along its reduction dimensions */
    const sf_tg_reduce *groups;
    const int32_t *parts;
    const sf_tile *chunks; /* SF_REDUCE_SCATTER: the region of each position */
    int n_steps;
    const sf_tg_step *steps; /* deps index steps */
    const int16_t *devs;     /* the collectives' groups, in part order */
    const int32_t *deps;
} sf_tg_reduces;

/* The reductions of the last sf_taskgraph_edge or sf_taskgraph_edge_moves call
 * (valid until the next call on tg); returns out->n. */
SF_API int sf_taskgraph_edge_reduce(const sf_taskgraph *tg, sf_tg_reduces *out);

/* ---- communication inside an operator ------------------------------------------ */

/* An operator split along its inner dimension (sf_op_inner_dim: softmax_ce's
 * classes) combines per-row statistics among each group of parts that differ
 * only along it, between their forward pass and their backward (Megatron's
 * vocabulary-parallel cross-entropy): an ALL_REDUCE (max) of the rows' maxima,
 * then an ALL_REDUCE (sum) of their sums of exponentials and target logits, two
 * elements per row, over the group's distinct devices in part order. A group
 * whose parts share one device combines them there and is not listed. */
typedef struct sf_tg_inner_group {
    int n_parts;    /* parts of the group (the degree along the inner dimension) */
    int part_start; /* sf_tg_inner.parts[part_start .. + n_parts], in order along it */
    int64_t rows;   /* rows of statistics: elements of the piece per inner index */
    int step_start; /* steps[step_start .. + n_steps]: after the forward tasks of the */
    int n_steps;    /* group's parts, before their backward tasks */
} sf_tg_inner_group;

typedef struct sf_tg_inner {
    int n; /* groups with steps; 0 when op is whole along its inner dimension */
    const sf_tg_inner_group *groups;
    const int32_t *parts;
    int n_steps;
    const sf_tg_step *steps; /* deps index steps */
    const int16_t *devs;     /* the collectives' groups */
    const int32_t *deps;
} sf_tg_inner;

/* The steps inside op under the strategy (its tiles must be set), valid until
 * the next call on tg; returns out->n, or -1 when out of memory. */
SF_API int sf_taskgraph_op_inner(sf_taskgraph *tg, int op, sf_tg_inner *out);

/* ---- pricing: the one function that turns steps into time ------------------- */

/* One use of a resource by a step: a link for `dur_s` (a link task), or a
 * device (COPY, UPDATE: link -1). */
typedef struct sf_tg_use {
    int link;  /* machine link id, or -1 for a device task */
    int dev;   /* device task: the device (sf_machine_compute_unit gives the
                * resource it runs on) */
    int chain; /* P2P: the segment; collectives: the ring position */
    int hop;   /* the link's place in its route (0 first) */
    double dur_s;
    int64_t bytes; /* bytes this use carries, counted once per step and position:
                    * the step's sent bytes sum over its uses of hop 0 */
    uint8_t inter_node;
} sf_tg_use;

/* The routes among devices 0 .. n-1 of a machine with their links' figures,
 * worked out once: a pricer that prices many steps among few devices (OptCNN's
 * tables) looks them up instead of routing each message anew. */
typedef struct sf_tg_routes sf_tg_routes;
SF_API sf_tg_routes *sf_tg_routes_new(const sf_machine *m, int n);
SF_API void sf_tg_routes_free(sf_tg_routes *r);

/* What pricing needs besides the steps. */
typedef struct sf_tg_pricer {
    const sf_machine *m;
    const sf_cost_model *cm;
    int segments;    /* P2P over several links: pieces pipelined hop by hop (>= 1) */
    const sf_op *op; /* UPDATE: the operator and tile whose weights it steps */
    const sf_tile *tile;
    const sf_tg_routes *routes; /* optional (NULL): routes of m among its first devices */
} sf_tg_pricer;

/* The most uses one step can give: a collective's positions times the links of
 * a route, or a P2P's segments times the links of its route. */
SF_API int sf_tg_step_max_uses(const sf_tg_step *st, int segments);
/* The uses of step st (of a list whose groups are in devs) into out (room for
 * sf_tg_step_max_uses): links in route order, P2P segment by segment; a ring
 * collective of R positions holds each link of position i's route (i to i + 1)
 * for its steps (R - 1 each for a reduce-scatter or an all-gather, 2(R - 1) for
 * an all-reduce, 1 for each hop of a broadcast's chain) of latency plus the mean
 * bytes a position sends at the machine's all-reduce curve at the buffer's size
 * (sf_machine_sync_bw) or else the link's bandwidth; a COPY moved * bytes at
 * the machine's copy bandwidth plus its runs at the machine's copy_run_s (no
 * use when it prices no copies); an UPDATE the cost
 * model's update time of the pricer's op and tile. Returns how many. */
SF_API int sf_tg_price_step(const sf_tg_pricer *p, const sf_tg_step *st, const int16_t *devs,
                            sf_tg_use *out);
/* The sum of the durations of a P2P's or a device step's uses (what the uses
 * of sf_tg_price_step add up to, without listing them): a message's chain
 * over its route (one segment), a copy, an update. */
SF_API double sf_tg_step_chain_s(const sf_tg_pricer *p, const sf_tg_step *st);

#ifdef __cplusplus
}
#endif
#endif
