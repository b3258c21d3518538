/*
 * sim_impl.h - the simulator's internal state, shared by sim.c (setup, results,
 * entry points), sim_build.c (block builders), sim_layout.c (layout),
 * sim_sched.c (scheduling), sim_links.c (link resources) and sim_trace.c
 * (pictures of the schedule).
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

#include <stdlib.h>

#include "soapflow/sim.h"
#include "soapflow/taskgraph.h"

/* Blocks per operator; inputs per operator <= SIM_SLOTS - 2. As many inputs as
 * a split makes outputs: a zoo RNN concatenates up to SF_MAX_SPLIT chunks (at
 * 64 slots, --seq-len 64 --chunk 1 built but would not simulate). */
#define SIM_SLOTS (SF_MAX_SPLIT + 2)
#define SIM_IDX_BITS 24 /* tasks per block < 2^24 */
#define SIM_NO_RES (-1) /* pseudo task (barrier) that holds no resource */

typedef enum sim_kind {
    SIM_FWD = 0,
    SIM_BWD,
    SIM_UPDATE,
    SIM_XFER,    /* activation transfer (forward) */
    SIM_GRAD,    /* activation-gradient transfer (backward) */
    SIM_SYNC,    /* all-reduce traffic on one link */
    SIM_COPY,    /* the runtime's copy of a tile region or a shard on a device
                  * (priced only when the machine has copy_bw_Bps) */
    SIM_RECOMPUTE, /* a recomputing part's forward again, before its backward */
    SIM_BARRIER, /* zero-time join */
    SIM_KIND_COUNT
} sim_kind;

typedef struct sim_task {
    double dur_s;
    int64_t bytes; /* link tasks: bytes carried */
    int32_t res;   /* device id, a link resource (sim_link_res), or SIM_NO_RES */
    int32_t op;    /* operator it belongs to */
    int16_t part;  /* part of op (or ring position for sync) */
    int16_t dev;   /* device tasks: the device (res is its core's resource) */
    uint8_t kind;  /* sim_kind */
    uint8_t pad;
} sim_task;

/* Edge between two tasks named by canonical references (block << 24 | index). */
typedef struct sim_edge {
    int64_t from, to;
} sim_edge;

/* What a block adds to the result's sums (sf_sim_result). */
typedef struct sim_stats {
    double compute_s, xfer_s, sync_s;                         /* task seconds */
    int64_t xfer_bytes, sync_bytes, intra_bytes, inter_bytes; /* whole bytes */
    /* folded replicas (sim_fold.c): a collective's bytes over every replica
     * less D times replica 0's (a ring's positions send chunks whose sizes
     * differ by an element when D R does not divide the shard) */
    int64_t fold_sync_bytes, fold_intra_bytes, fold_inter_bytes;
} sim_stats;

/* Memory a block places on a device, and when it lives in the schedule: from
 * the start of task `from` to the finish of task `to` (canonical references,
 * REF), SIM_MEM_ALWAYS for the start or the end of the iteration. The sums
 * (device_mem) take every entry as alive at once; the timeline
 * (sim_mem_timeline, sim_memline.c) takes the lifetimes. */
#define SIM_MEM_ALWAYS (-1)
/* Which of the two pictures takes an entry (sim_mem.only). */
enum { SIM_MEM_BOTH = 0, SIM_MEM_TIMELINE, SIM_MEM_SUMS };
/* A pipeline copy's part in the sums (sf_sim.pipe_only). */
enum { SIM_PIPE_MIDDLE = 0, SIM_PIPE_LATE, SIM_PIPE_FIRST };
typedef struct sim_mem {
    int32_t dev;
    uint8_t kind; /* sf_sim_mem_kind */
    uint8_t only; /* SIM_MEM_BOTH, or the picture that alone takes it */
    double bytes;
    int64_t from, to;
} sim_mem;

/* Whether the all-at-once sums (device_mem, the end of the forward pass)
 * count an entry: all but the activation gradients, ZeRO's whole weights and
 * gradients around their uses, recomputed activations, workspace, buffers and
 * the timeline's own entries. */
static inline int sim_mem_summed(const sim_mem *e) {
    return e->only != SIM_MEM_TIMELINE && e->kind != SF_SIM_MEM_ACT_GRADS &&
           e->kind != SF_SIM_MEM_GATHERED && e->kind != SF_SIM_MEM_WEIGHT_GRADS &&
           e->kind != SF_SIM_MEM_RECOMPUTED && e->kind != SF_SIM_MEM_WORKSPACE &&
           e->kind != SF_SIM_MEM_BUFFERS;
}

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
 * 64 bits, its order word (sim_layout.rank: whether it holds a resource, then
 * its rank, which orders like its canonical key) in the next 32 and its slot in
 * the low 32, so that one unsigned comparison orders entries by (ready, barriers
 * first, canonical key) - see sim_sched.c. */
typedef unsigned __int128 sim_heap_item;

/* The order word of a task (sim_layout.rank): its rank in the low 31 bits, and
 * bit 31 set when it holds a resource, so that at one instant every barrier is
 * passed before any device or link takes a task. */
#define SIM_RANK_HOLDS (UINT32_C(1) << 31)
#define SIM_RANK_MAX (SIM_RANK_HOLDS - 1) /* ranks are below it */

/* Where a block's tasks lie in the layout: slots base .. base + n - 1. */
typedef struct sim_span {
    int32_t base, n;
} sim_span;

/* An adjacency list: succ[start .. start + n - 1] (or pred[]). */
typedef struct sim_adj {
    int32_t start, n;
} sim_adj;

/* The task graph laid out flat, one slot per task (sim_layout.c).
 * Slots are stable: a delta update leaves the tasks of every kept block where
 * they are and puts the rebuilt blocks' tasks in fresh slots at the end, so it
 * costs what it rebuilds, not what it keeps. Slots of replaced blocks are dead
 * until a compaction lays everything out afresh; nothing live refers to them. */
typedef struct sim_layout {
    int64_t n_slots, cap_slots; /* slots handed out (live and dead), allocated */
    int64_t n_succ, n_pred;     /* entries handed out in succ[] and pred[] */
    int64_t cap_adj;            /* entries allocated in each */
    int64_t n_tasks, n_edges;   /* live ones */
    sim_span *span;             /* [n_order] each block's slots, in canonical order */
    uint32_t *rank_base;        /* [n_order] first rank of each block's range */
    uint32_t *rank_cap;         /* [n_order] ranks in the range (>= the block's tasks) */
    /* [cap_slots] per slot */
    double *dur;          /* seconds */
    int32_t *res;         /* device id, a link resource (sim_link_res), or SIM_NO_RES */
    uint64_t *key;        /* canonical key: block << SIM_IDX_BITS | index */
    uint32_t *rank;       /* rank_base of its block + index, | SIM_RANK_HOLDS
                           * when it holds a resource */
    sim_adj *sadj, *padj; /* successor and predecessor lists */
    int32_t *succ, *pred; /* [cap_adj] slots */
} sim_layout;

/* A schedule of the layout's tasks, with its result. The simulator keeps two:
 * the current one and the one before the last delta update, so that a rejected
 * MCMC proposal is undone by swapping them back. */
typedef struct sim_sched {
    double *ready, *start, *finish; /* [cap_slots] seconds */
    double *device_busy;            /* [n_dev] */
    double *device_mem;             /* [n_dev] */
    double *device_live, *live_t;   /* [n_dev] the timeline's peaks and when (memory_timeline) */
    double *live_kinds;             /* [n_dev * SF_SIM_MEM_KIND_COUNT] what each peak holds */
    double *res_total;              /* [n_res] work (seconds) queued on each resource, summed in
                                     * canonical task order by the scheduling passes */
    int mem_exact;                  /* device_mem holds exact sums (every block's entries whole
                                     * numbers of bytes, every total at most SIM_EXACT_BYTES) */
    double makespan_s;              /* latest finish, kept by the scheduling passes */
    sf_sim_result result;
} sim_sched;

/* A block saved by a delta update, restored by a revert, with its slots. */
typedef struct sim_saved_block {
    int bid;
    sim_span span;
    sim_block block;
} sim_saved_block;

/* A kept task's adjacency lists before a delta update rewrote them. */
typedef struct sim_adj_undo {
    int32_t slot;
    sim_adj s, p;
} sim_adj_undo;

struct sf_sim {
    const sf_graph *g;
    const sf_machine *m;
    const sf_cost_model *cm;
    sf_sim_options opt;
    sf_strategy *s; /* current strategy */
    int n_ops, n_dev;
    double copy_bw;      /* the machine's copy_bw_Bps (0: copies not priced) */
    int late_sync;       /* overlap mode on a machine whose runtime runs the sync's collectives
                          * after its backward pass (sync_after_backward): they wait for
                          * their devices' barriers, as in bulk mode */
    int dev_barriers;    /* the barrier block starts with one barrier per device, joining its
                          * backward tasks (bulk mode, late_sync) */
    double act_scale;    /* the cost model's element bytes over SF_ELEM_BYTES: what an
                          * operator's fp32 activation bytes take in the plan's dtype */
    int cores, per_node; /* cores_per_node when fewer than devices_per_node, else 0 */
    /* resources: devices 0..n_dev-1, then the links tasks have used (sim_links.c),
     * n_dev..n_res-1; the per-resource arrays hold cap_res + 1 entries */
    int n_links, n_res, cap_res;
    int32_t *res_link; /* [n_links] machine link id of resource n_dev + i */
    int cap_res_link;
    int32_t *link_hash; /* [link_hash_cap] machine link id -> i, -1 empty (a power of 2) */
    int link_hash_cap;
    int has_run;
    int n_undo; /* operators changed by the last update, 0 when none to revert */
    int cap_undo; /* room in the undo arrays below (SF_SIM_MAX_UPDATE_OPS at least; an
                   * inner simulator of a pipeline changes every micro-batch's copy) */
    int *undo_ops; /* [cap_undo] which */
    int cut_pending; /* the last update was cut off: only a revert or a run may follow */
    int cut_early;   /* ... before its task graph was laid out */
    sf_config *undo_cfg; /* [cap_undo] their configs before that update */
    sim_saved_block *saved;
    int n_saved, cap_saved;

    /* the task graph's structure: part tiles, pairs, shards, weight groups and
     * consumers (taskgraph.c); the blocks below price it */
    sf_taskgraph *tg;

    sim_block *blocks; /* [n_order] in canonical order: block bid is blocks[pos[bid]] */
    int n_blocks;
    int *order; /* [n_order] the ids of every block in canonical order: each
                 * operator's core, input edges and sync, then the barrier block */
    int n_order;
    int *pos;             /* [n_blocks] position of a block in order[] */
    sim_stats *stats;     /* [n_order] each block's stats in canonical order, copied from
                           * the block whenever it changes: collect streams them from
                           * one dense array instead of visiting every block */
    unsigned char *dirty; /* [n_blocks] */

    sim_layout lay;
    sim_sched sched[2];
    sim_sched *cur, *prev;
    /* per slot, [cap_slots] */
    int32_t *pending; /* scheduling: predecessors not yet finished, -1 when carried over */
    sim_heap_item *heap;
    int32_t *touch_ix; /* sim_layout_delta: a slot's place among the tasks whose lists it
                        * rewrites; -1 between updates */
    /* the last delta update, for a revert */
    int64_t fresh; /* first slot it handed out (n_slots before it) */
    int64_t undo_succ, undo_pred, undo_tasks, undo_edges; /* layout counters before it */
    int undo_ranks;                                       /* it drew the rank ranges again */
    sim_adj_undo *undo_adj;                               /* kept tasks whose lists it rewrote */
    int64_t n_undo_adj, cap_undo_adj;
    sim_span *old_span; /* [n_order] scratch for a compaction */
    /* test hooks (sim_set_test_limits): the rare paths on demand */
    uint32_t rank_room_max; /* spare ranks per block at most (default: all there are) */
    int64_t compact_slack;  /* dead slots or list entries tolerated beyond the live ones */

    double *res_free;  /* [n_res] (cap_res + 1 allocated) */
    double *input_samples; /* [2 n_dev] scratch: samples each device's input pipeline loads */
    uint64_t *kept;        /* [n_ops] bit k: output k stays alive for the backward pass
                            * (sf_graph_output_kept); the others are transients */
    double *remaining; /* [n_res] bounded runs: work still queued per resource */
    sf_tile **undo_tiles; /* [cap_undo] the changed operators' tiles before the update,
                           * [undo_cfg[j].n_parts] */
    int64_t *undo_tiles_cap; /* [cap_undo] */

    /* pipelines (sim_pipe.c). The outer simulator of a pipelined strategy hands
     * it to an inner one on the micro-batch graph (pipe); the inner one orders
     * its stages' passes by barriers: pipe_bar[4 u] and [4 u + 1] the barrier
     * that operator u's forward slot ends in and the one before it (-1: the
     * stage's first slot), [4 u + 2], [4 u + 3] the same for its backward slot,
     * barriers numbered after the bulk ones in the barrier block; pipe_only[u]
     * SIM_PIPE_LATE when u's micro-batch is one a stage never holds with the
     * first ones at once (the sums leave its activations to the timeline),
     * SIM_PIPE_FIRST for micro-batch 0 (the sums count its recomputed
     * activations: a stage recomputes one micro-batch at a time), else 0. */
    struct sim_pipe *pipe;
    struct sim_fast *fast; /* the last result came from the fast path (docs/simulator.md,
                            * "Pipelines"): pipe is NULL then */
    int in_pipe; /* 1: the last run or update went to pipe (the strategy has a pipeline) */
    const int32_t *pipe_bar; /* borrowed from the outer simulator's struct sim_pipe */
    int32_t pipe_n_bar;
    int32_t pipe_per; /* slots a stage (barrier s * pipe_per + k: stage s's slot k) */
    const uint8_t *pipe_only;
    /* identical data-parallel replicas (sim_fold.c): fold is the outer
     * simulator's when its pipeline's replicas are folded; an inner simulator
     * borrows it and simulates replica 0, dropping what other replicas' nodes do */
    const struct sim_fold *fold;
    struct sim_fold *replicas; /* the outer simulator's: the current pipeline's, or NULL */
    int refold; /* the last update changed how the replicas fold: 1, its revert is a
                 * full run; 2, it was cut off before anything changed */

    /* the builders' scratch (sim_build.c): a step's priced uses, and the
     * entry and exit tasks of each step of a list */
    sf_tg_use *uses;
    int cap_uses;
    int64_t *ends; /* task references */
    int64_t n_ends, cap_ends;
    int32_t *end_at; /* [4 * steps]: entry start, entries, exit start, exits */
    int64_t cap_end_at;
    double *bwd_s; /* [cap_bwd_s] build_core: the backward times of one operator's parts */
    int cap_bwd_s;
    int32_t *upd_mark; /* [n_dev] build_sync: upd_stamp where the shard's updates run */
    int32_t upd_stamp;
    int32_t *scratch; /* for the layout and scheduling passes, carved into index arrays */
    int64_t cap_scratch;
    int64_t last_resimulated; /* tasks the last schedule pass handled (sf_sim_result.rescheduled) */
};

/* A memory entry's start (bytes > 0) or end (bytes < 0) in a schedule. */
typedef struct sim_mem_event {
    double t, bytes;
    int32_t dev;
    int32_t kind; /* sf_sim_mem_kind */
    int64_t seq;  /* place before sorting: a total order */
} sim_mem_event;
/* Every memory entry's two events in schedule f, device by device, each device's sorted
 * by (time, frees first, place); *out is malloc'd. The count, or -1 when out of memory
 * (sim_memline.c). */
int64_t sim_mem_events(const sf_sim *sim, const sim_sched *f, sim_mem_event **out);
/* Per device, the peak of the bytes alive at once in schedule f and when it is reached
 * (peak[], peak_t[]: [n_dev]). -1 when out of memory. */
int sim_mem_timeline(const sf_sim *sim, const sim_sched *f, double *peak, double *peak_t,
                     double *peak_kinds);

/* Slot -> the block's task record (for traces). */
const sim_task *sim_task_of(const sf_sim *sim, int64_t slot, int *block);

/* For tests, before the first run: at most rank_room spare ranks per block, and
 * a compaction before an update whenever dead slots (or dead list entries)
 * outnumber the live ones by more than compact_slack; a slack below minus the
 * task count compacts before every update. */
void sim_set_test_limits(sf_sim *sim, uint32_t rank_room, int64_t compact_slack);
/* For tests: 1 when the layout holds exactly the blocks' tasks and edges. */
int sim_layout_consistent(const sf_sim *sim);

/* ---- shared by the simulator's files (sim.c, sim_build.c, sim_layout.c,
 * sim_sched.c) ---- */

/* A task's canonical reference: block << SIM_IDX_BITS | index in block. */
#define REF(block, idx) (((int64_t)(block) << SIM_IDX_BITS) | (int64_t)(idx))

static inline int sim_block_id(int op, int slot) { return op * SIM_SLOTS + slot; }
#define SLOT_CORE 0
#define SLOT_SYNC (SIM_SLOTS - 1)
/* The one block that belongs to no operator: in bulk sync mode, a zero-time
 * barrier per device that joins every backward task on the device. It is built
 * once per full run and never rebuilt: core blocks hold the edges into it. */
#define BARRIER_BLOCK(sim) sim_block_id((sim)->n_ops, 0)

/* The slot of the task a canonical reference names, in the current layout. */
#define SLOT_OF(sim, ref)                                                                          \
    ((int64_t)(sim)->lay.span[(sim)->pos[(ref) >> SIM_IDX_BITS]].base +                            \
     ((ref) & (((int64_t)1 << SIM_IDX_BITS) - 1)))

static inline sf_tile *sim_part_tiles(const sf_sim *sim, int opi) {
    return sf_taskgraph_tiles(sim->tg, opi);
}

/* ---- growable arrays ------------------------------------------------------ */

/* The capacity to grow an array of cap elements to so that it holds need. */
static inline int64_t sim_grown_cap(int64_t cap, int64_t need) {
    int64_t nc = cap ? cap : 8; /* small: a block of a big graph holds a few */
    while (nc < need) nc *= 2;
    return nc;
}

static inline int sim_resize(void **p, int64_t n, size_t elem) {
    size_t bytes;
    if (sf_mul_overflow_size((size_t)n, elem, &bytes)) return -1;
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q) return -1;
    *p = q;
    return 0;
}

static inline int sim_grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = sim_grown_cap(*cap, need);
    if (sim_resize(p, nc, elem)) return -1;
    *cap = nc;
    return 0;
}

static inline int sim_grow_int(void **p, int *cap, int need, size_t elem) {
    int64_t c = *cap;
    if (sim_grow(p, &c, need, elem)) return -1;
    *cap = (int)c;
    return 0;
}

/* ---- block builders (sim_build.c) ---- */

/* Build block bid afresh from the current strategy and publish its stats. */
int sim_rebuild_block(sf_sim *sim, int bid);
/* The operator whose tasks gate a ZeRO-3 group's gather of phase `phase`
 * (SF_PHASE_FORWARD or _BACKWARD), *bwd whether its backward tasks; -1 for
 * none (sim_build.c). */
int sim_zero_gate(const sf_sim *sim, int owner, int phase, int *bwd);
/* Copy a block's stats to the dense array collect reads; called whenever the
 * block in place changes (built, or restored by a revert). */
void sim_publish_stats(sf_sim *sim, int bid);

/* ---- pipelines (sim_pipe.c) ---- */

/* The simulator whose tasks a picture or a total shows: the inner one when the
 * last run was a pipeline's. */
static inline const sf_sim *sim_shown(const sf_sim *sim);
/* The inner simulator's inputs for m micro-batches of g (of one of D identical
 * replicas: the graph cut into m D micro-batches): the micro-batch graph of
 * `copies` of them and room for the rest; NULL (err set) when g cannot be cut so. */
struct sim_pipe *sim_pipe_make(const sf_graph *g, int m, int D, int copies, sf_error *err);
/* Fill the strategy of p's simulator (every copy its operator's config in s)
 * and p's barriers (the slots of s's pipeline, whose micro-batches are p's). */
sf_status sim_pipe_prepare(struct sim_pipe *p, const sf_graph *g, const sf_strategy *s,
                           sf_error *err);
/* p->ops and p->cfgs: every micro-batch's copy of n changed operators of g. */
sf_status sim_pipe_copies(struct sim_pipe *p, const sf_graph *g, int n, const int *ops,
                          const sf_config *cfgs, sf_error *err);
/* Free p (not its simulator: sim.c frees that first). */
void sim_pipe_release(struct sim_pipe *p);

/* ---- layout (sim_layout.c) ---- */

/* Lay every block out afresh: slots in canonical order without gaps. */
int sim_layout_full(sf_sim *sim);
/* After a delta update rebuilt the blocks in sim->saved: their tasks into fresh
 * slots, and the lists that changed rewritten. */
int sim_layout_delta(sf_sim *sim);
/* Undo sim_layout_delta. */
void sim_layout_undo(sf_sim *sim);
/* Lay everything out afresh and carry the current schedule and result over to
 * the new slots (into the spare schedule, which becomes the current one). */
int sim_layout_compact(sf_sim *sim);

/* ---- scheduling (sim_sched.c) ---- */

/* Schedule everything into f, after sim_layout_full. */
sf_status sim_schedule_full(sf_sim *sim, sim_sched *f, sf_error *err);
/* Delta scheduling into f from the old schedule o: tasks ready before t0 keep
 * their times; *cut set when a bounded run exceeds bound. */
sf_status sim_schedule_resume(sf_sim *sim, sim_sched *f, const sim_sched *o, double t0,
                              double bound, int *cut, sf_error *err);

/* ---- link resources (sim_links.c) ---- */

/* The resource of machine link `link`, numbered on first use (n_dev + i); the
 * per-resource arrays grow as needed. -1 when out of memory. */
int sim_link_res(sf_sim *sim, int link);
/* The machine link id of link resource res; -1 for a device or no resource. */
int sim_res_link(const sf_sim *sim, int res);
/* The link resources (n_links of them) in machine link id order; the caller
 * frees it. NULL when out of memory. */
int32_t *sim_link_res_sorted(const sf_sim *sim);
void sim_links_free(sf_sim *sim);

struct sim_pipe {
    int m;                /* the strategy's micro-batches: gu's are at batch / m */
    int copies;           /* micro-batches gu holds and the schedule runs: m, or fewer
                           * in a run of the fast path */
    sf_graph *gu;         /* the micro-batch graph */
    sf_sim *inner;        /* its simulator (sim.c's to make and free) */
    int32_t *bar;         /* [4 n(gu)] the inner simulator's pipe_bar */
    uint8_t *only;        /* [n(gu)] its pipe_only */
    int32_t n_bar;        /* its pipe_n_bar */
    int32_t per;          /* its pipe_per */
    int *ops;             /* [cap] scratch of an update: the copies changed */
    sf_config *cfgs;      /* [cap] */
    int cap;
};

/* A result of the fast path and the arrays it points to, which the outer
 * simulator owns. totals: [n_dev * SF_SIM_TOTAL_COUNT] what sf_sim_kind_totals
 * gives each device. */
typedef struct sim_fast_result {
    sf_sim_result r;
    double *busy, *mem, *live, *live_t, *kinds, *totals;
} sim_fast_result;

/* The fast path of a 1F1B pipeline of many micro-batches (docs/simulator.md,
 * "Pipelines"): a run of k micro-batches whose middle copies repeat at a fixed
 * period, carried to m. cur: the result of the current strategy; prev: the one
 * before the last update (a revert's). */
struct sim_fast {
    int k;
    sim_fast_result cur, prev;
    int revert_to_fast; /* an update fell back to the micro-batch graph: its revert
                         * goes back to prev and frees that graph's simulator */
};

int sim_fast_result_alloc(sim_fast_result *f, int n_dev);
void sim_fast_result_free(sim_fast_result *f);

/* ---- identical replicas (sim_fold.c) ---- */

/* D identical data-parallel replicas of a pipelined strategy, replica 0
 * simulated alone. */
struct sim_fold {
    int D, n_dev, per;
    int16_t *to;       /* [D n_dev] replica r's device for replica 0's device d (-1: none) */
    int16_t *base;     /* [n_dev] the replica-0 device whose figures device d reports */
    int16_t *node_rep; /* [nodes] the replica whose parts a node holds, -1 none */
    sf_strategy *s;    /* replica 0: the strategy's pipeline, each operator's config of
                        * replica 0's parts on the graph at batch / D */
    double *busy, *mem, *live, *live_t, *kinds; /* a result's per-device arrays, mapped */
};

/* The replicas of s on g and m when they can be folded (the conditions at the
 * top of sim_fold.c), else NULL; *nomem 1 when out of memory. */
struct sim_fold *sim_fold_detect(const sf_graph *g, const sf_machine *m, const sf_sim_options *o,
                                 const sf_strategy *s, int *nomem);
/* Both NULL, or the same replicas on the same devices. */
int sim_fold_same(const struct sim_fold *a, const struct sim_fold *b);
/* Replica 0's result r (its sums already every replica's: sim.c's collect)
 * as the whole strategy's: every device its replica-0 device's figures (arrays
 * in f), r->replicas D. */
void sim_fold_result(struct sim_fold *f, sf_sim_result *r);
void sim_fold_free(struct sim_fold *f);
/* Whether the folded simulator keeps a task of node `node` (a device's, or a
 * machine link's): one of replica 0's nodes, or of no replica's. */
static inline int sim_fold_keeps_node(const sf_sim *sim, int node) {
    return !sim->fold || sim->fold->node_rep[node] <= 0;
}

static inline const sf_sim *sim_shown(const sf_sim *sim) {
    return sim->in_pipe && sim->pipe ? sim->pipe->inner : sim;
}

#endif
