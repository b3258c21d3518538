/*
 * soapflow/strategy.h - parallel configs and strategies.
 *
 *     sf_strategy *s = sf_strategy_new(g);
 *     sf_strategy_data(s, g, m);                       // a baseline
 *     sf_config *c = sf_strategy_config(s, op_id);     // one operator's config
 *     if (sf_strategy_validate(s, g, m, &err) != SF_OK) puts(err.msg);
 *
 * A parallel config gives a degree for each dimension of an operator's parallel
 * space (their product is the number of parts) and a device for each part. Parts
 * are numbered row-major over the grid of degrees (the last dimension varies
 * fastest); part p covers, in dimension i, sf_split_range(size_i, degree_i, idx_i),
 * so degrees need not divide a dimension: parts then differ by at most one.
 */
#ifndef SOAPFLOW_STRATEGY_H
#define SOAPFLOW_STRATEGY_H

#include "soapflow/graph.h"
#include "soapflow/machine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most parts of one operator: one per device of the largest machine, so that
 * every device can hold a part of every operator. */
#define SF_MAX_PARTS SF_MAX_DEVICES

/* A plain value with the placement inline (8 KB), so that c->device[p] is an
 * array access and a config can live on the stack. Only device[0 .. n_parts)
 * means anything: copy with sf_config_copy, which copies those and no more,
 * where a config is copied often (the searches, the simulator's undo). */
typedef struct sf_config {
    int ndim;    /* = the operator's space rank */
    int n_parts; /* product of degrees */
    int degree[SF_MAX_DIMS];
    /* Sharded data parallelism of the operator's weight group (read from the
     * group's owner, sf_taskgraph_owner; the other members leave it 0 or repeat
     * it): SF_ZERO_NONE .. SF_ZERO_WEIGHTS, across each shard's replicas. */
    uint8_t zero;
    /* 1: the operator's saved activations are dropped after its forward task
     * and its backward recomputes the forward first (activation recomputation). */
    uint8_t recompute;
    uint8_t flag_pad[2];
    int16_t device[SF_MAX_PARTS]; /* device of each part, [n_parts] used */
} sf_config;

/* ZeRO's stages (Rajbhandari et al. 2020) for a weight group's replicas:
 * stage 1 shards the optimizer state, 2 also the gradients (a reduce-scatter
 * instead of an all-reduce), 3 also the weights, gathered before each use in
 * forward and backward and freed after (FSDP). docs/strategies.md. */
typedef enum sf_zero_stage {
    SF_ZERO_NONE = 0,
    SF_ZERO_OPTIMIZER = 1,
    SF_ZERO_GRADIENTS = 2,
    SF_ZERO_WEIGHTS = 3,
    SF_ZERO_STAGE_COUNT
} sf_zero_stage;

/* Tile of part `part` (0 <= part < n_parts) of op's space. */
SF_API void sf_config_part_tile(const sf_op *op, const sf_config *c, int part, sf_tile *t);
/* Set degrees (recomputes n_parts) and clear the flags (zero, recompute): a
 * fresh config; SF_ERR_RANGE when the product exceeds SF_MAX_PARTS. */
SF_API sf_status sf_config_set_degrees(sf_config *c, int ndim, const int *degree);
SF_API int sf_config_equal(const sf_config *a, const sf_config *b);
/* *dst = *src, copying only the n_parts devices in use (the rest of dst's
 * device array is left as it was). */
SF_API void sf_config_copy(sf_config *dst, const sf_config *src);
/* Check one config against its operator and machine, with a message naming the
 * operator: degree above a dimension's size or on a dimension that cannot be split,
 * wrong dimension count, device out of range, too many parts, a ZeRO stage
 * above 3 or on an operator without weights, a recompute flag other than 0/1. */
SF_API sf_status sf_config_validate(const sf_op *op, const sf_machine *m, const sf_config *c,
                                    sf_error *err);
/* "n2 c4 @0-7" style short text for tables and pictures. */
SF_API char *sf_config_str(const sf_op *op, const sf_config *c, char *buf, size_t n);

typedef struct sf_strategy sf_strategy;

SF_API sf_strategy *sf_strategy_new(const sf_graph *g);
/* A strategy of g whose operator u has the config of operator u % period
 * (configs held once: writing one writes every operator it stands for). A
 * pipeline's micro-batch graph, whose copy j of operator i is j * period + i,
 * under configs repeated on every copy costs the original graph's configs,
 * not m times them (8 KB each). period outside 1 .. ops: one config each. */
SF_API sf_strategy *sf_strategy_new_periodic(const sf_graph *g, int period);
SF_API sf_strategy *sf_strategy_clone(const sf_strategy *s);
SF_API void sf_strategy_copy(sf_strategy *dst, const sf_strategy *src); /* same graph */
SF_API void sf_strategy_free(sf_strategy *s);
SF_API int sf_strategy_num_ops(const sf_strategy *s);
SF_API sf_config *sf_strategy_config(sf_strategy *s, int op);
SF_API const sf_config *sf_strategy_get(const sf_strategy *s, int op);
SF_API sf_status sf_strategy_validate(const sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                      sf_error *err);

/* ---- pipelines (src/strategy/pipeline.c) --------------------------------------- */

/* A pipeline cuts the operators (in id order, a topological order) into p x v
 * contiguous chunks; chunk c runs on stage c % p (v model chunks a stage:
 * Megatron's interleaving puts chunks s, s + p, s + 2p, ... on stage s). Each
 * stage is the set of devices its operators' configs place parts on; stages
 * share no device. The batch is cut into m equal micro-batches; each stage runs
 * the forward and backward passes of its chunks micro-batch by micro-batch in
 * the order of its schedule (sf_pipeline_slots), the gradients of the m
 * micro-batches are summed, and then the weights are synced and updated once.
 * An input operator belongs to the chunk of its first consumer (the data a
 * stage reads is loaded there). A pipeline of one stage is gradient
 * accumulation. docs/formats-strategy.md, "Pipelines". */
typedef enum sf_pipe_schedule {
    SF_PIPE_GPIPE = 0,   /* all forwards, then all backwards (GPipe) */
    SF_PIPE_1F1B,        /* p - s - 1 forwards, then one forward one backward, then the
                          * rest of the backwards (PipeDream-Flush, Megatron's default) */
    SF_PIPE_INTERLEAVED, /* 1F1B over v chunks a stage (Megatron's interleaved schedule:
                          * m a multiple of p) */
    SF_PIPE_SCHEDULE_COUNT
} sf_pipe_schedule;

#define SF_MAX_PIPE_CHUNKS 512

typedef struct sf_pipeline {
    int stages;        /* p >= 1 */
    int chunks;        /* v >= 1 model chunks a stage: 1 for gpipe and 1f1b, >= 2 interleaved */
    int micro_batches; /* m >= 1, dividing the batch */
    int schedule;      /* sf_pipe_schedule */
    int first[SF_MAX_PIPE_CHUNKS]; /* [p * v] the first operator id of each chunk: first[0]
                                    * is 0, increasing; chunk c holds the operators (inputs
                                    * aside) with ids in [first[c], first[c + 1]) */
} sf_pipeline;

/* One step of a stage's schedule: the forward or backward pass of one chunk
 * for one micro-batch. */
typedef struct sf_pipe_slot {
    int mb;       /* micro-batch, 0 .. m - 1 */
    int chunk;    /* the chunk (its stage is chunk % p) */
    int backward; /* 0 forward, 1 backward */
} sf_pipe_slot;

/* "gpipe", "1f1b", "interleaved"; NULL out of range. */
SF_API const char *sf_pipe_schedule_name(sf_pipe_schedule s);
/* "gpipe", "1f1b", "interleaved:V" (V >= 2 chunks a stage; plain "interleaved"
 * is 2): the schedule and *chunks; -1 when not one of them. */
SF_API int sf_pipe_schedule_parse(const char *text, sf_pipe_schedule *out, int *chunks);
/* The pipeline's schedule as the strategy files and tables write it: "1f1b",
 * "interleaved:2". */
SF_API char *sf_pipe_schedule_str(const sf_pipeline *pl, char *buf, size_t n);

/* The strategy's pipeline, or NULL when it has none (one batch, all at once). */
SF_API const sf_pipeline *sf_strategy_pipeline(const sf_strategy *s);
/* Give s a pipeline (copied), or none with NULL. Checked by sf_strategy_validate. */
SF_API void sf_strategy_set_pipeline(sf_strategy *s, const sf_pipeline *pl);

/* The chunk of every operator of g under pl ([n_ops] out): by id range, an input
 * the chunk of its first consumer (0 when it has none). */
SF_API void sf_pipeline_op_chunks(const sf_pipeline *pl, const sf_graph *g, int *chunk);
/* Stage s's schedule into out (room for 2 m v slots): its forward and backward
 * slots in the order the stage runs them. Returns how many (2 m v). Every
 * stage's schedule runs without deadlock against the others': a forward slot
 * needs the previous chunk's forward of its micro-batch, a backward slot the
 * next chunk's backward (the last chunk's backward its own forward). */
SF_API int sf_pipeline_slots(const sf_pipeline *pl, int stage, sf_pipe_slot *out);
/* The most micro-batches stage s holds forward activations of at once under
 * its schedule (forwards begun minus backwards done, counted in chunks: with v
 * chunks a stage, the count of chunk passes in flight divided by v, rounded
 * up): m for GPipe, min(m, p - s) for 1F1B. */
SF_API int sf_pipeline_in_flight(const sf_pipeline *pl, int stage);
/* Check pl against s, g and m: counts and boundaries, m dividing the batch and
 * at least every operator's split of the samples, schedule constraints
 * (interleaved: m a multiple of p), ZeRO at most stage 1 inside a pipeline (as
 * DeepSpeed: sharded gradients or weights would be reduced or gathered once per
 * micro-batch), and stages on disjoint devices; one line naming what is wrong.
 * sf_strategy_validate calls it. */
SF_API sf_status sf_pipeline_validate(const sf_pipeline *pl, const sf_strategy *s,
                                      const sf_graph *g, const sf_machine *m, sf_error *err);
/* A pipeline with p stages (v chunks each) cutting g's non-input operators into
 * chunks of as equal FLOPs as boundaries between operators allow: for baselines
 * and the search's starting points. SF_ERR_INVALID when g has fewer than p v
 * non-input operators. */
SF_API sf_status sf_pipeline_even(sf_pipeline *pl, const sf_graph *g, int p, int v, int m,
                                  sf_pipe_schedule schedule, sf_error *err);

/* One line for tables: "4 stages, 16 micro-batches of 8, 1f1b, chunks from
 * h6.ln1 | h12.ln1 | h18.ln1" (the boundaries cut short with "..." past n).
 * Returns buf. */
SF_API char *sf_pipeline_describe(const sf_pipeline *pl, const sf_graph *g, char *buf, size_t n);

/* A pipeline with p stages (v chunks each) whose boundaries are transformer
 * blocks: chunk c starts at the first operator of block floor(c B / (p v)) of
 * g's B blocks (a block starts where the branch into its attention leaves the
 * residual stream: GPT's ln_1), so the embeddings go with the first chunk and
 * the final norm, the LM head and the loss with the last. A graph without
 * attention gets sf_pipeline_even's cuts; SF_ERR_INVALID when it has fewer
 * blocks than p v chunks. */
SF_API sf_status sf_pipeline_blocks(sf_pipeline *pl, const sf_graph *g, int p, int v, int m,
                                    sf_pipe_schedule schedule, sf_error *err);

/* The strategy of the micro-batch graph gu (sf_graph_micro_batches(g, m)) that
 * gives every copy of an operator its config in s; no pipeline. NULL when out
 * of memory. */
SF_API sf_strategy *sf_strategy_unroll(const sf_strategy *s, const sf_graph *g,
                                       const sf_graph *gu);

/* ---- tied weights (src/strategy/tie.c) -------------------------------------- */

/* Operators that share weights across types (sf_graph_share_weights: GPT-2's
 * token embedding and its LM head) must split them alike: every part's weight
 * slices (sf_op_weight_slices) equal to or disjoint from every part's of the
 * other, so that each shard is one tile's slices of either. sf_strategy_validate
 * checks every tie. */

/* SF_OK when a under ca and b under cb (two operators of one weight group, each
 * config valid) split the weights alike; SF_ERR_INVALID with one line naming both
 * operators and their configs otherwise. */
SF_API sf_status sf_config_check_tie(const sf_op *a, const sf_config *ca, const sf_op *b,
                                     const sf_config *cb, sf_error *err);
/* The ties of s, with the n operators ops[] taking cfgs[] instead of their
 * configs in s (n = 0: s as it is); with n > 0 only the ties of those operators.
 * SF_OK at once for a graph without ties. */
SF_API sf_status sf_strategy_check_ties(const sf_strategy *s, const sf_graph *g, int n,
                                        const int *ops, const sf_config *cfgs, sf_error *err);
/* The operator op is tied to (its owner, or for an owner its first member of
 * another type), -1 when op is tied to none. */
SF_API int sf_strategy_tie_partner(const sf_graph *g, int op);
/* b's config lined up with a's under ca by the weight elements: each dimension
 * of a split as the dimension of b that splits the same weights (the sample and
 * the sequence as themselves), each part on the device of a's part at the same
 * coordinates. 1 with *cb set when that config is valid on m, splits no
 * dimension above the opt-in level reduce (sf_op_dim_opt_in) and ties with ca;
 * 0 (cb untouched) otherwise. */
SF_API int sf_config_tie_follow(const sf_op *a, const sf_config *ca, const sf_op *b,
                                const sf_machine *m, int reduce, sf_config *cb);
/* Line every tied member of s up with its owner (sf_config_tie_follow, any
 * level) where the two do not tie: for strategies drawn operator by operator at
 * random. Returns how many ties are left that could not be lined up. */
SF_API int sf_strategy_align_ties(sf_strategy *s, const sf_graph *g, const sf_machine *m);

/* The devices of 0..n_devices-1 that no part of any operator runs on, written in order to idle[]
 * when non-NULL ([n_devices]); the count. */
SF_API int sf_strategy_idle_devices(const sf_strategy *s, int n_devices, int *idle);

/* A random valid config from the whole SOAP space of `op` on `m`: degrees over
 * any of its splittable dimensions (product at most the device count and
 * SF_MAX_PARTS), placed on a contiguous run of devices or on distinct devices
 * drawn at random. The proposal of the MCMC search. */
SF_API void sf_config_random(const sf_op *op, const sf_machine *m, sf_rng *rng, sf_config *c);
/* sf_config_random over the splittable dimensions and the opt-in dimensions up
 * to level reduce (sf_op_dim_opt_in): with SF_OPT_IN_REDUCE (1) the reduction
 * dimensions too (partial sums, SF_DIM_REDUCE), with SF_OPT_IN_INNER (2) also
 * the inner ones (softmax_ce's classes; the runtime trains both); sf_config_random is
 * reduce 0, which draws exactly what it drew before reduction dimensions existed
 * (so that seeded searches stay as they were, the searches propose them only when
 * asked: sf_mcmc_options.reduce, sf_optcnn_options.reduce). */
SF_API void sf_config_random_in(const sf_op *op, const sf_machine *m, int reduce, sf_rng *rng,
                                sf_config *c);

/* ---- baselines ----------------------------------------------------------- */

/* Data parallelism: every operator split on its sample dimension over all
 * devices (fewer when the batch is smaller), part i on device i. */
SF_API sf_status sf_strategy_data(sf_strategy *s, const sf_graph *g, const sf_machine *m);
/* OptCNN's model parallelism: every operator with weights split on its parameter
 * dimension over all devices (as far as the dimension allows); others data parallel. */
SF_API sf_status sf_strategy_model(sf_strategy *s, const sf_graph *g, const sf_machine *m);
/* Krizhevsky's "one weird trick": convolutions and pools data parallel, linear
 * layers model parallel. */
SF_API sf_status sf_strategy_owt(sf_strategy *s, const sf_graph *g, const sf_machine *m);
/* GNMT-style expert strategy for RNNs: each layer depth on its own device within a
 * node, data parallel across nodes; non-recurrent operators follow their inputs.
 * A graph without LSTM operators (a CNN, the transformer) gets data parallelism,
 * exactly sf_strategy_data's configs. */
SF_API sf_status sf_strategy_expert(sf_strategy *s, const sf_graph *g, const sf_machine *m);
/* Megatron-LM's tensor parallelism (src/strategy/megatron.c): groups of tp
 * consecutive devices inside a node (tp <= 0: a node's devices), data parallel
 * across groups; attention split on its heads, linear layers column- then
 * row-parallel (an MLP's first on its outputs, second on its inputs, a partial
 * sum), the token embedding and a tied LM head on the vocabulary, softmax_ce on
 * the classes where it can be; the other operators split over the group on the
 * sequence (sp: sequence parallelism) or, without sp, on the group's samples.
 * SF_ERR_UNSUPPORTED with err naming what is missing for a graph without
 * attention and linear layers or an operator that cannot be split so;
 * SF_ERR_INVALID for a tp that does not divide the nodes or a batch smaller
 * than the groups. */
SF_API sf_status sf_strategy_megatron(sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                      int tp, int sp, sf_error *err);
/* Megatron-LM's 3D parallelism (Narayanan et al. 2021): tensor x data x
 * pipeline. The devices are ranked as Megatron ranks them, tensor fastest,
 * then data, then pipeline: stage s holds devices [s T D, (s + 1) T D), its
 * data-parallel group d the T devices from s T D + d T (a tensor group never
 * crosses a node). Stage boundaries are transformer blocks
 * (sf_pipeline_blocks); every stage's operators are laid out as
 * sf_strategy_megatron's on its devices, tensor parallel T ways and data
 * parallel D ways over each micro-batch. The batch is cut into m = batch / (D
 * B) micro-batches. */
typedef struct sf_megatron3d_options {
    int tp;          /* T, the tensor-parallel degree, dividing a node (0: a node's devices) */
    int pp;          /* P, the pipeline stages (0 or 1: none) */
    int dp;          /* D, the data-parallel degree (0: devices / (T P)); T P D must divide
                      * the devices (the rest idle) */
    int micro_batch; /* B, samples of one micro-batch on one data-parallel rank (Megatron's
                      * --micro-batch-size); 0: 1 with P > 1, else batch / D (one
                      * micro-batch, exactly sf_strategy_megatron) */
    int schedule;    /* sf_pipe_schedule (default SF_PIPE_1F1B) */
    int chunks;      /* v chunks a stage for SF_PIPE_INTERLEAVED (0 or 1: 2) */
    int sp;          /* sequence parallelism (megatron-sp) */
} sf_megatron3d_options;

/* tp 0 (a node), pp 1, dp 0, micro_batch 0, 1F1B, no sp. */
SF_API void sf_megatron3d_options_default(sf_megatron3d_options *o);
/* The 3D layout into s (with its pipeline, or none when P = 1 and m = 1).
 * SF_ERR_INVALID with one line for a T that does not divide a node, T P D
 * above or not dividing the devices, a batch that is not a whole number of
 * micro-batches of D B samples, fewer transformer blocks than chunks, and
 * whatever sf_strategy_validate refuses (interleaved with m not a multiple of
 * P); SF_ERR_UNSUPPORTED as sf_strategy_megatron. */
SF_API sf_status sf_strategy_megatron3d(sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                        const sf_megatron3d_options *o, sf_error *err);
/* Everything on one device, unsplit. */
SF_API sf_status sf_strategy_single(sf_strategy *s, const sf_graph *g, int device);
/* By name: "data", "model", "owt", "expert", "single", "megatron[:T]",
 * "megatron-sp[:T]", "fsdp", "zero1".."zero3", each with ":OPTIONS"; megatron's
 * options tp=T, pp=P, dp=D, mb=B, schedule=gpipe|1f1b|interleaved[:V] and sp
 * give sf_strategy_megatron3d (docs/strategies.md). */
/* 1 when name names a baseline: one of those, or megatron / megatron-sp followed
 * by ':' and anything (sf_strategy_baseline then checks what follows). */
SF_API int sf_strategy_is_baseline_name(const char *name);
SF_API sf_status sf_strategy_baseline(sf_strategy *s, const char *name, const sf_graph *g,
                                      const sf_machine *m, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
