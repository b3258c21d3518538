/*
 * taskgraph_impl.h - the task graph's state, shared by taskgraph.c (tiles,
 * pairs, shards) and comm.c (the steps a scheme lowers a shard's sync into).
 * Calls go one way: comm.c uses taskgraph.c, never the reverse.
 */
#ifndef SOAPFLOW_TASKGRAPH_IMPL_H
#define SOAPFLOW_TASKGRAPH_IMPL_H

#include "soapflow/taskgraph.h"

struct sf_taskgraph {
    const sf_graph *g;
    const sf_strategy *s;
    int n_ops, n_dev;
    int *owner;     /* [n_ops] */
    int *mem_start; /* [n_ops + 1] members of owner i: mem[mem_start[i] .. mem_start[i+1]] */
    int *mem;
    int *cons_start; /* [n_ops + 1] */
    sf_tensor_ref *cons;
    sf_tile **tiles;   /* [n_ops] each operator's part tiles, [tiles_cap[op]] held */
    int *tiles_cap;    /* [n_ops] */
    sf_tile *tp;       /* [cap_tp] producer output pieces of the last edge */
    int tp_op, tp_out; /* ... of this output of this operator (-1: none) */
    sf_config tp_cfg;  /* ... under these degrees (ndim, degree[] only) */
    sf_tile *rg;       /* [cap_rg] consumer input regions of the last edge */
    int rg_op, rg_k;
    sf_config rg_cfg;
    int64_t cap_tp, cap_rg;
    int32_t *feeds; /* [cap_feeds] pairs each producer part feeds (set_in_place) */
    int64_t cap_feeds;
    sf_tg_pair *pairs;
    int cap_pairs;
    /* sync scratch */
    struct tg_ent {
        int64_t lo[SF_MAX_DIMS], hi[SF_MAX_DIMS];
        int op, part, dev, cls;
    } * ents;
    int64_t cap_ents;
    struct tg_ent_slices { /* a tied group's entries: their weight slices */
        int n;
        sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    } * ent_sl;
    int64_t cap_ent_sl;
    sf_tg_shard *shards;
    int64_t cap_shards;
    int16_t *devs;
    int32_t *ent_start;
    int64_t cap_devs, cap_ent_start;
    sf_tg_entry *out_ents;
    int64_t cap_out_ents;
    int32_t *dev_count; /* [n_dev] entries of the shard on each device, then its row */
    int32_t *cursor;    /* [n_dev] next free entry of each row */
    /* communication (comm.c) */
    const sf_machine *m; /* NULL: one node, no copies */
    sf_sync_scheme scheme;
    int per_node; /* devices per node */
    int copies;   /* the machine prices the runtime's copies: list COPY steps */
    sf_tg_step *steps;
    int64_t cap_steps;
    int16_t *step_devs;
    int64_t cap_step_devs;
    int32_t *step_deps;
    int64_t cap_step_deps;
    int32_t *shard_start;
    int64_t cap_shard_start;
    /* ring order (comm.c): a shard's sort keys and its devices in ring order,
     * and the rank of each node and each PCIe switch ([2 * n_dev], -1 between
     * shards) */
    int64_t *ring_key;
    int64_t cap_ring_key;
    int16_t *ring_dev;
    int64_t cap_ring_dev;
    int32_t *ring_rank;
    int64_t cap_ring_rank;
    /* identical data-parallel replicas simulated once (sf_taskgraph_set_replicas):
     * rep_to[r * n_dev + d] is replica r's device for replica 0's device d; a
     * shard's devices are replica 0's, its steps run over every replica's */
    int n_rep;
    const int16_t *rep_to;
    int16_t *rep_dev;
    int64_t cap_rep_dev;
    /* partial sums of the last edge (reduce.c) */
    sf_tg_reduce *red;
    int64_t cap_red;
    int n_red;
    int32_t *red_parts; /* [n_red * R] the parts of each group along the reduction */
    int64_t cap_red_parts;
    sf_tile *red_chunks; /* [n_red * R] a reduce-scatter's regions by position */
    int64_t cap_red_chunks;
    sf_tg_step *red_steps;
    int64_t n_red_steps, cap_red_steps;
    int32_t *red_deps;
    int64_t cap_red_deps;
    int16_t *red_devs;
    int64_t cap_red_devs;
    sf_tg_pair *red_pairs; /* the re-sourced pairs, before they replace pairs */
    int cap_red_pairs;
    /* communication inside the last operator asked (inner.c) */
    sf_tg_inner_group *in_groups;
    int32_t *in_parts;
    sf_tg_step *in_steps;
    int16_t *in_devs;
    int32_t *in_deps;
    int64_t cap_in_groups, cap_in_parts, cap_in_steps, cap_in_devs, cap_in_deps;
};

/* Grow *p (of *cap elements of elem bytes) to hold need; 0, or -1 when out of
 * memory (nothing changed). */
int tg_grow(void **p, int64_t *cap, int64_t need, size_t elem);

/* The shards of the weight group of the nm operators `members` (owner's
 * dimensions name the shards), as sf_taskgraph_sync gives them for a whole
 * group: sf_taskgraph_sync passes the group, sf_taskgraph_op_sync_steps one
 * operator alone. */
sf_status tg_shards(sf_taskgraph *tg, const int *members, int nm, int owner, sf_tg_sync *out);

/* Partial sums (reduce.c). The reduction dimension of producer p split under cp
 * (degree above 1), or -1: then its edges have no reductions. */
int tg_reduce_dim(const sf_op *p, const sf_config *cp);
/* 1 when part is the first of its group (index 0 along dimension rd). */
int tg_reduce_rep(const sf_config *cp, int rd, int part);
/* Given the n pairs (tg->pairs) of the groups' first parts, with tp the
 * producer's output pieces: pick each group's reduction, lower its steps, and
 * replace the pairs by the re-sourced ones (*n_pairs updated). 0, or -1 when
 * out of memory. */
int tg_reduce_edge(sf_taskgraph *tg, const sf_config *cp, int rd, const sf_tile *tp, int *n_pairs);

#endif
