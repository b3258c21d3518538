/*
 * sim_impl.h - the simulator's internal state, shared by sim.c (task graph,
 * scheduling) and sim_trace.c (pictures of the schedule).
 *
 * The task graph is kept in *blocks*, each a deterministic function of a few
 * operators' configs, so that delta simulation can rebuild exactly the blocks a
 * config change touches:
 *   core(op)        forward and backward task of each part of op
 *   edge(op, k)     transfers feeding input k of op (and the gradients going back)
 *   sync(op)        all-reduce and update of the weight group that op owns
 * A block's id is op * SIM_SLOTS + slot (slot 0 core, 1..SIM_SLOTS-2 edge of input
 * slot-1, SIM_SLOTS-1 sync), and a task's canonical key is (block id, index in
 * block): the same strategy yields the same keys whether the graph was built in
 * one go or patched by delta simulation, so ties are broken identically.
 */
#ifndef SOAPFLOW_SIM_IMPL_H
#define SOAPFLOW_SIM_IMPL_H

#include "soapflow/sim.h"

#define SIM_SLOTS 64      /* blocks per operator; inputs per operator <= SIM_SLOTS - 2 */
#define SIM_IDX_BITS 24   /* tasks per block < 2^24 */
#define SIM_NO_RES (-1)   /* pseudo task (barrier) that holds no resource */

typedef enum sim_kind {
    SIM_FWD = 0,
    SIM_BWD,
    SIM_UPDATE,
    SIM_XFER,     /* activation transfer (forward) */
    SIM_GRAD,     /* activation-gradient transfer (backward) */
    SIM_SYNC,     /* all-reduce traffic on one link */
    SIM_BARRIER,  /* zero-time join */
    SIM_KIND_COUNT
} sim_kind;

typedef struct sim_task {
    double dur_s;
    double bytes;     /* transfers: bytes carried */
    int32_t res;      /* device id, n_devices + link id, or SIM_NO_RES */
    int32_t op;       /* operator it belongs to */
    int16_t part;     /* part of op (or ring position for sync) */
    uint8_t kind;     /* sim_kind */
    uint8_t pad;
} sim_task;

/* Edge between two tasks named by canonical references (block << 24 | index). */
typedef struct sim_edge {
    int64_t from, to;
} sim_edge;

/* What a block adds to the result's sums (sf_sim_result). */
typedef struct sim_stats {
    double compute_s, xfer_s, sync_s;                        /* task seconds */
    double xfer_bytes, sync_bytes, intra_bytes, inter_bytes; /* bytes */
} sim_stats;

/* Memory a block places on a device. */
typedef struct sim_mem {
    int32_t dev;
    double bytes;
} sim_mem;

typedef struct sim_block {
    sim_task *tasks;
    int n_tasks, cap_tasks;
    sim_edge *edges;
    int n_edges, cap_edges;
    sim_mem *mem;
    int n_mem, cap_mem;
    int mem_inexact; /* some mem[] entry is not a whole number of bytes in [0, SIM_EXACT_BYTES] */
    sim_stats st;
} sim_block;

/* Whole numbers up to 2^52 and their sums up to 2^53 are exact in doubles, so
 * sums of such byte counts do not depend on the order they are taken in. */
#define SIM_EXACT_BYTES 4503599627370496.0 /* 2^52 */

/* Heap entry for list scheduling: the bits of the task's ready time in the high
 * 64 bits, its global id in the low ones, so that one unsigned comparison
 * orders entries by (ready, canonical key) - see sim.c's scheduling section. */
typedef unsigned __int128 sim_heap_item;

/* The task graph laid out flat, with its schedule. The simulator keeps two:
 * the current one and the one before the last delta update, so that a rejected
 * MCMC proposal is undone by swapping them back. */
typedef struct sim_flat {
    int64_t n_tasks, cap_tasks, n_edges, cap_edges;
    double *dur, *ready, *start, *finish;
    uint64_t *key;
    int32_t *res;
    int32_t *npred, *pending, *succ_start, *succ, *pred_start, *pred;
    int64_t *edge_from, *edge_to;
    int64_t *block_off;     /* [n_blocks]: first global id of each block */
    double *device_busy;    /* [n_dev] */
    double *device_mem;     /* [n_dev] */
    double *res_total;      /* [n_res] work (seconds) queued on each resource, summed in
                             * canonical task order while laying out (assemble) */
    int mem_exact;          /* device_mem holds exact sums (every block's entries whole
                             * numbers of bytes, every total at most SIM_EXACT_BYTES) */
    double makespan_s;      /* latest finish, kept by the scheduling passes */
    sf_sim_result result;
} sim_flat;

/* A block saved by a delta update, restored by a revert. */
typedef struct sim_saved_block {
    int bid;
    sim_block block;
} sim_saved_block;

struct sf_sim {
    const sf_graph *g;
    const sf_machine *m;
    const sf_cost_model *cm;
    sf_sim_options opt;
    sf_strategy *s; /* current strategy */
    int n_ops, n_dev, n_links, n_res;
    int has_run;
    int undo_op;          /* operator changed by the last update, -1 when none */
    int cut_pending;      /* the last update was cut off: only a revert or a run may follow */
    int cut_early;        /* ... before its task graph was laid out */
    sf_config undo_cfg;   /* its config before that update */
    sim_saved_block *saved;
    int n_saved, cap_saved;

    /* weight groups: owner of each op's weights (itself when it owns them) */
    int *group_owner;    /* [n_ops]: op id of the owner, -1 when no weights */
    int **group_members; /* [n_ops] for owners: member op ids (owner first) */
    int *group_size;
    /* consumers: for each op, (consumer op, input index) pairs in cons[cons_start[op]..] */
    int *cons_start;
    sf_tensor_ref *cons;

    sim_block *blocks;    /* [n_blocks] */
    int n_blocks;
    int *order;           /* [n_order] the ids of every block in canonical order: each
                           * operator's core, input edges and sync, then the barrier block */
    int n_order;
    int *pos;             /* [n_blocks] position of a block in order[] */
    sim_stats *stats;     /* [n_order] each block's stats in canonical order, copied from
                           * the block whenever it changes: collect streams them from
                           * one dense array instead of visiting every block */
    unsigned char *dirty; /* [n_blocks] */

    sim_flat flat[2];
    sim_flat *cur, *prev;
    sim_heap_item *heap;
    int64_t cap_heap;
    double *res_free;     /* [n_res] */
    double *remaining;    /* [n_res] bounded runs: work still queued per resource */
    int16_t *scratch_dev; /* [n_dev] */
    int32_t *dev_head;    /* [n_dev] build_sync: first entry of the current shard class on
                           * each device, -1: none (the rest chained by sync_entry.next) */
    void *sync_entries;   /* scratch for build_sync */
    int64_t cap_sync_entries;
    sf_tile *tiles_p, *tiles_c; /* scratch for build_edge: [SF_MAX_PARTS] each */
    sf_tile *tiles;       /* [n_ops * SF_MAX_PARTS] part tiles of every operator's config */
    sf_tile undo_tiles[SF_MAX_PARTS]; /* the changed operator's tiles before the update */

    int32_t *lay;         /* scratch for assemble_delta, carved into its index arrays */
    int64_t cap_lay;
    int64_t last_resimulated; /* tasks the last schedule pass handled (sf_sim_result.rescheduled) */
};

/* Global id -> the block's task record (for traces). */
const sim_task *sim_task_of(const sf_sim *sim, int64_t gid, int *block);

#endif
