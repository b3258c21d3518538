/*
 * soapflow/taskgraph.h - the structure of one synchronous training iteration of
 * a (graph, strategy): which tiles each part computes, which producer part
 * sends which region to which consumer part, which devices share each weight
 * shard. The simulator prices these records (costs, routes, segments); the
 * runtime executes them (kernels, messages, all-reduces). Neither derives
 * regions or groups on its own, so what is simulated is what runs.
 *
 *     sf_taskgraph *tg = sf_taskgraph_new(g, n_devices, &err);
 *     sf_taskgraph_set_strategy(tg, s);          // s stays the caller's
 *     for (int i = 0; i < n_ops; i++) sf_taskgraph_set_tiles(tg, i);
 *     const sf_tg_pair *pairs;
 *     int n = sf_taskgraph_edge(tg, op, k, &pairs); // who feeds input k of op
 *     int messages = 0;                          // pairs across devices
 *     for (int i = 0; i < n; i++) messages += pairs[i].src_dev != pairs[i].dst_dev;
 *     sf_tg_sync sync;
 *     sf_taskgraph_sync(tg, owner, &sync);       // shards of owner's weights
 *     int replicas = sync.n_shards ? sync.shards[0].n_devs : 0;
 *     sf_taskgraph_free(tg);
 *
 * Tasks of one iteration, for every operator part p on device d:
 *   forward(op, p)   needs, for each input k, every pair of sf_taskgraph_edge
 *                    (op, k) with cons_part p: a local copy when the producer
 *                    part is on d (none when in_place), else one message of
 *                    `region` from src_dev;
 *   backward(op, p)  after the backward of every consumer part it fed, whose
 *                    gradients come back along the same pairs, reversed;
 *   sync(shard)      an all-reduce of the shard's gradient among its devices,
 *                    once the backward tasks of its entries are done;
 *   update(shard)    on every device of the shard.
 * Operators are numbered in a topological order (inputs before consumers), so
 * op-id order is a valid forward order and its reverse a valid backward order.
 *
 * Every consumer part's input region is covered exactly once by the regions of
 * its pairs (the producer's part tiles partition each output): tests check it.
 */
#ifndef SOAPFLOW_TASKGRAPH_H
#define SOAPFLOW_TASKGRAPH_H

#include "soapflow/graph.h"
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

/* Compute (again) the part tiles of op under the strategy's config. */
SF_API void sf_taskgraph_set_tiles(sf_taskgraph *tg, int op);
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
/* The shards of the weight group owned by `owner` (sf_taskgraph_owner(owner) ==
 * owner), in order of first appearance. The tiles of every member must be set.
 * SF_OK, or SF_ERR_NOMEM. */
SF_API sf_status sf_taskgraph_sync(sf_taskgraph *tg, int owner, sf_tg_sync *out);

#ifdef __cplusplus
}
#endif
#endif
