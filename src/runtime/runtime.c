/*
 * runtime.c - one rank of a training run: executes the task graph of
 * soapflow/taskgraph.h with the real kernels (soapflow/kernels.h) and the
 * communication interface of comm_impl.h. The schedule and the memory are
 * described in soapflow/runtime.h; this file says how.
 *
 * Set-up walks the task graph once, in the same order on every rank: the
 * pairs of every (operator, input) in id order give the messages (a message's
 * number in that walk is its tag, 2n forward and 2n + 1 for its gradient), the
 * weight groups give the shards. Every rank sees every record and keeps those
 * that touch it, so that all ranks agree on tags, on the groups made for the
 * collectives and on the order they are posted in, without
 * talking. Then it sizes every buffer, reserves them in one block, and carves
 * it (the same walk twice: once counting, once placing).
 *
 * The walk also gives, per consumer edge of a producer split along a reduction
 * dimension, the reductions of its partial sums (rt_red, setup_reds): after the
 * producer's parts a rank runs the forward steps of those it takes part in, in
 * walk order, and the pairs read the sum from their buffers; backward, before
 * the producer's parts, the duals give every part the gradient of the sum.
 *
 * A step posts every receive first (activations and gradients), then runs the
 * forward pass: a part copies the regions of local producers into its input
 * buffers and unpacks the messages of remote ones as they arrive, runs its
 * kernel and sends each remote consumer its region at once. Backward runs the
 * parts in reverse; a part's output gradient is the sum of what its consumers'
 * input gradients give back over the same pairs. A shard's sync (the task
 * graph's steps of the scheme this rank takes part in) starts when the
 * backward loop passes the lowest operator with an entry of the shard (every
 * rank has then done its entries), so all ranks post in one order. Finally
 * each rank runs the rest of each shard's steps in that order, each waited for
 * (finish_sync), updates the shards it updates and waits for its sends. Batch norm's running
 * statistics are kept whole on every rank: the step's per-channel sums are added over the ranks and
 * every rank updates them alike (update_buffers); sf_runtime_eval runs the forward in inference
 * mode (docs/runtime.md, "Training and inference mode").
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "comm_impl.h"
#include "soapflow/kernels.h"
#include "soapflow/taskgraph.h"

#define ALIGN 64

/* The memory plan (place_tensors, plan_memory). A step is a sequence of
 * points, the same on every rank: START, the forward of each operator in id
 * order (pt_f), the backward of each in reverse (pt_b), END. Every buffer the
 * runtime carves lives over up to RT_LIVES intervals of points (inclusive);
 * buffers whose lives do not meet share memory in the one block, whose size
 * the plan decides before anything is allocated (ggml-alloc's way: measure,
 * then reserve once), so a step still allocates nothing. A `virt` record is
 * memory held outside the block (weights, gradients, optimizer state, in the
 * groups' buffers): counted, not placed. */
#define RT_LIVES 4
typedef struct rt_life {
    int n;
    int32_t from[RT_LIVES], to[RT_LIVES];
    uint8_t zero; /* zeroed at the start of each life (accumulated gradients) */
    uint8_t virt;
} rt_life;

typedef struct rt_rec {
    size_t bytes, off;
    rt_life life;
} rt_rec;

typedef struct rt_zero { /* a buffer zeroed at the start of a point */
    int32_t point;
    float *p;
    size_t n;
} rt_zero;

typedef struct rt_part rt_part;

/* One pair of the task graph that touches this rank. */
typedef struct rt_link {
    int k;                  /* the consumer's input */
    int out;                /* the producer's output */
    rt_part *prod;          /* the producer part when local, else NULL */
    rt_part *cons;          /* the consumer part when local, else NULL */
    int peer;               /* the other rank; -1 for a local pair */
    int cons_op, cons_part; /* the consumer (names the message in traces) */
    int tag;                /* forward tag (2n); the gradient goes back with tag + 1 */
    int grad;               /* the producer has a backward pass: the gradient goes back */
    sf_tile region;         /* in the coordinates of the producer's output */
    int64_t numel;
    int alias;          /* sf_tg_pair.in_place: 1, the consumer reads the producer's
                         * output in place (no copy); 2, its input gradient is also the
                         * producer's output gradient, accumulated in place */
    float *fbuf, *gbuf; /* remote: the region's activations and gradients */
    int freq, greq;     /* requests in flight, -1 when none */
    int red;            /* the producer holds partial sums: the rt->reds index of the
                         * reduction whose result the pair reads (at the producer's
                         * side), -1 otherwise */
} rt_link;

struct rt_part {
    int op, part;
    sf_tile tile;
    const sf_op *o;
    float **out, **gout;    /* [n_outputs] output tiles and their gradients */
    sf_tile *out_tile;      /* [n_outputs] */
    float **in, **gin;      /* [n_inputs] input regions and their gradients (gin[k]
                             * NULL when the producer has no backward) */
    sf_tile *in_region;     /* [n_inputs] */
    rt_link **in_alias;     /* [n_inputs] the aliasing link of each input, or NULL */
    int32_t *labels;        /* softmax_ce: the tile's rows' labels */
    int64_t rows;           /* softmax_ce: rows of the tile */
    int cons_start, n_cons; /* links where this part consumes: rt->cons_links[] */
    int prod_start, n_prod; /* remote links where it produces: rt->prod_links[] */
    int group;              /* rt->groups index of its weight group, -1 when none */
    rt_life *out_life;      /* [n_outputs] the outputs' lives when not [forward, backward]
                             * (recomputation), else NULL */
    int inner;              /* softmax_ce split on its classes: the rt->inner index of
                             * its group of parts, -1 otherwise */
};

/* A group of the parts of a softmax_ce split on its classes (sf_op_inner_dim:
 * the parts that differ only in their classes, Megatron's vocabulary-parallel
 * cross-entropy) on a rank that holds parts of it: the rows' statistics they
 * share (soapflow/kernels.h, sf_kernel_args.stats), which this rank's parts
 * combine into one buffer, and, when the group spans ranks, the task graph's
 * two all-reduces (sf_taskgraph_op_inner): the maxima, then the sums and the
 * targets' logits. */
typedef struct rt_inner {
    int op, first;    /* the operator and the group's first part */
    int64_t rows;     /* rows of each part's tile */
    int mcomm, scomm; /* the two all-reduces' groups; -1 when the group is on this rank alone */
    float *stats;     /* 3 rows: maxima, sums of exp(x - max), targets' logits */
} rt_inner;

/* One group of a producer's parts split along a reduction dimension (partial
 * sums of one output piece) on one consumer edge, on a rank that holds a part
 * of it: the task graph's reduction (sf_taskgraph_edge_reduce) as this rank
 * runs it. buf holds what this rank has of the sum once the forward steps are
 * done (SF_REDUCE_ALL, and SF_REDUCE_ONE on the first part's rank: the piece;
 * SF_REDUCE_SCATTER: the chunks in position order, this rank's at off), and
 * the pairs it sources read it there (lay: the layout of the region at off);
 * gbuf gathers those pairs' gradients in the same layout, the backward steps
 * make it the gradient of the sum, which every local part of the group adds
 * to its output gradient. */
typedef struct rt_red {
    int prod_op, out; /* the producer and its output */
    int cons_op;      /* the consumer of the edge */
    int kind;         /* sf_tg_reduce_kind */
    int R;            /* parts of the group, along the reduction */
    int root;         /* SF_REDUCE_ONE: this rank holds the first part */
    int d0;           /* the first part's rank */
    int pos;          /* SF_REDUCE_ALL, _SCATTER: this rank's position (its part) */
    int fcomm, bcomm; /* the forward and backward collectives' groups, -1 when none */
    rt_part **mine;   /* [R] the group's parts on this rank, NULL elsewhere */
    int *devs;        /* [R] the parts' ranks */
    int *tags;        /* [R] SF_REDUCE_ONE: the tag of part r's message to d0, -1 */
    sf_tile *chunks;  /* [R] SF_REDUCE_SCATTER: position r's region of the piece */
    sf_tile piece, lay;
    int64_t numel, off;
    float *buf, *gbuf, *rbuf; /* rbuf: the root's, a message as it arrives */
    int link_start, n_links;  /* the remote pairs it sources: rt->red_links[] */
} rt_red;

typedef struct rt_group {
    int owner;
    int64_t n;        /* elements of the full layout */
    float *w, *g, *v; /* weights, gradient, SGD's momentum or Adam's first moment */
    float *v2;        /* Adam's second moment; NULL under SGD */
} rt_group;

/* One step of a shard's sync that this rank takes part in: the task graph's
 * steps (comm.c), as this rank runs them. The runtime's own copies (packing
 * the shard's slices into one buffer, unpacking) are what the COPY steps
 * price; they are done around the steps, not listed. */
typedef struct rt_step {
    uint8_t kind;    /* sf_tg_step_kind; a fused reduce-scatter: SF_STEP_ALL_REDUCE */
    uint8_t payload; /* sf_tg_payload */
    uint8_t send;    /* P2P: this rank sends (else receives) */
    int group;       /* collectives: the communication group */
    int peer, tag;   /* P2P */
    int64_t numel, offset;
} rt_step;

/* A weight shard held by this rank. */
typedef struct rt_shard {
    int global;       /* its position in the global order */
    int owner, group; /* owner op, rt->groups index */
    int key_op;       /* lowest operator with an entry of the shard */
    int max_op;       /* highest one */
    int fgather_op;   /* ZeRO-3: the forward gather runs when the forward reaches this
                       * operator, the backward one when the backward does (zero_gates) */
    int bgather_op;
    int n_devs;
    int comm; /* 1: its sync moves data (its gradient is packed into buf) */
    /* 1: buf is the gradient itself: the slices are one run of the group's
     * layout and every step is a collective or the update, so nothing is packed */
    int in_place;
    int n_slices;
    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    int64_t numel;
    float *buf;         /* packed gradient (then, under a parameter server, weights) */
    float *rbuf;        /* a parameter server's: one replica's gradient as it arrives */
    int step0, n_steps; /* its steps: rt->sync_steps[step0 .. step0 + n_steps] */
    int zero;           /* its weight group's ZeRO stage (sf_config.zero) */
    int zgroup;         /* with a stage, the group of its reduce-scatter and gathers */
    double rs_t0;       /* ZeRO-2/3: when its reduce-scatter was posted */
    int rs_wait_op;     /* ... and the operator whose backward it overlaps (the next
                         * one below its lowest that has weights), -1: the step's end */
    int cur;            /* the next step to finish */
    int req;            /* the request of step cur, -1 when not posted */
} rt_shard;

struct sf_runtime {
    const sf_graph *g;
    sf_strategy *s;
    sf_comm *c;
    sf_runtime_options o;
    sf_taskgraph *tg;
    int rank, n_ops;
    rt_part *parts;
    int n_parts;
    rt_part **part_of;   /* [part_start[n_ops]]: part p of op at part_start[op] + p */
    int64_t *part_start; /* [n_ops + 1] */
    rt_link *links;
    int n_links;
    rt_link **cons_links, **prod_links;
    rt_link **recv_links; /* remote links where this rank consumes */
    int n_recv;
    rt_link **send_links; /* remote links where this rank produces */
    int n_send;
    rt_red *reds; /* partial sums' reductions this rank takes part in, in walk order */
    int n_reds, cap_reds;
    int *red_order;      /* [n_reds] by producer, then walk order */
    rt_link **red_links; /* remote links sourced by a reduction, by reduction */
    int cap_red_pending; /* SF_REDUCE_ONE messages this rank sends */
    struct rt_set {      /* the reductions' communication groups, made once */
        int n, comm;
        int *devs; /* [n] */
    } * sets;
    int n_sets;
    rt_inner *inner; /* groups of class-split softmax_ce parts here, by operator and part */
    int n_inner;
    rt_group *groups;
    int n_groups;
    int *group_of;    /* [n_ops] owner -> groups index, -1 */
    rt_shard *shards; /* the shards this rank holds, in the global order (latest key_op first) */
    int n_shards;
    rt_step *sync_steps; /* their steps this rank takes part in */
    int n_sync_steps;
    int *pending; /* [n_steps] requests of parameter-server sends, waited for at the end */
    int n_pending;
    unsigned char *block;
    size_t block_bytes;
    int sizing;
    rt_rec *recs; /* the plan's records, in carve order */
    int n_recs, cap_recs, rec_at;
    int n_points;
    rt_zero *zl; /* by point */
    int n_zl;
    int *zl_start;        /* [n_points + 1] */
    int64_t held_bytes;   /* weights, gradients and state at rest (virt records) */
    int64_t peak_bytes;   /* the plan's largest sum of live records at one point */
    int64_t *point_bytes; /* [n_points] live bytes at each point */
    int *fwd_wait_req;    /* forward sends and partial sums sent, waited one operator later */
    int *fwd_wait_op;
    int n_fwd_wait, cap_fwd_wait;
    void **ws_at;      /* [n_points] the kernels' workspace at each point (each
                        * forward and backward point has its own, sized by what
                        * runs there, so that it lives only there) */
    size_t *ws_bytes;  /* [n_points] */
    int32_t cur_point; /* the point the step is at (at_point) */
    int recomputing;   /* a forward kernel re-run for a backward: no loss, no statistics */
    int *rc_start;     /* [n_ops + 1] the parts each backward recomputes first: */
    rt_part **rc_list; /* rc_list[rc_start[op] .. rc_start[op + 1]], in forward order */
    sf_rt_event *ev;
    int n_ev, cap_ev;
    double t_begin;
    int64_t steps;
    /* Batch norm's running statistics (buffers): every rank holds every batch
     * norm's, the same numbers, since each step adds the batch's per-channel
     * sums over every part and rank (one sum of doubles) before updating them,
     * so they are the whole batch's whatever the split. */
    int64_t *bn_chan;  /* [n_ops] first channel of a batchnorm in the arrays, -1 */
    int64_t bn_n;      /* channels of every batchnorm */
    float *bn_running; /* (2 C) per batchnorm at 2 * bn_chan: running mean, variance */
    double *bn_sums;   /* (3 C) per batchnorm at 3 * bn_chan: the step's sums */
    int eval;          /* the forward in progress is sf_runtime_eval's */
    /* What this rank runs, in order (setup_seq): entries 2 op + backward; entry k
     * at point 1 + k. Without a pipeline the forward of every operator in id
     * order, then every backward in reverse; with one, its stage's slots
     * (sf_pipeline_slots), each the forward (backward) of its chunk's operators
     * of one micro-batch copy in (reverse) id order. */
    int *seq;
    int n_seq;
    int cur_pos;          /* the entry in progress: forward sends are waited one entry later */
    int32_t *fpt, *bpt;   /* [n_ops] each operator's forward and backward point; a
                           * pipeline's operators of other stages: END and START, so
                           * that a life reaching them only widens */
    int *lp_start;        /* [n_ops + 1] this rank's parts of op: parts[lp_start[op] ..) */
    int *lr_start;        /* [n_ops + 1] its reductions of producer op: red_order[lr_start[op] ..) */
    int bulk;             /* every shard's sync starts after the backward pass */
    int counting;         /* sf_runtime_forward in progress: count the correct rows */
    int64_t correct;      /* ... rows whose best class is the label */
    /* Pipelines (docs/runtime.md, "Pipelines"): rt->g is the micro-batch graph of
     * the caller's graph (owned) and rt->s the unrolled strategy; a step's batch
     * is cut into the copies' inputs and labels. */
    sf_graph *gu;
    int pipe_m;                     /* micro-batches; 0 without a pipeline */
    int user_ops;                   /* operators of the caller's graph */
    const float **mb_inputs;        /* [n_ops] a step's batch, per copy */
    const int32_t **mb_labels;      /* [n_ops] */
    int64_t *mb_off;                /* [n_ops] the copy's offset into its operator's batch */
    sf_batch mb_batch;
};

void sf_runtime_options_default(sf_runtime_options *o) {
    memset(o, 0, sizeof *o);
    o->optimizer = SF_OPTIMIZER_SGD;
    o->lr = 0.01;
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0;
    o->sync = SF_SYNC_OVERLAP;
    o->scheme = SF_SCHEME_RING;
    o->machine = NULL;
    o->fast_kernels = 1;
    o->seed = 1;
}

/* ---- boxes ---------------------------------------------------------------- */

/* Pack (unpack) the elements of a shard's slices of a full layout. */
static void slices_move(const rt_shard *sh, float *full, float *packed, int pack) {
    int64_t q = 0;
    for (int i = 0; i < sh->n_slices; i++) {
        const sf_weight_slice *s = &sh->sl[i];
        for (int64_t r = 0; r < s->count; r++) {
            float *f = full + s->offset + r * s->stride;
            if (pack)
                memcpy(packed + q, f, (size_t)s->len * sizeof *f);
            else
                memcpy(f, packed + q, (size_t)s->len * sizeof *f);
            q += s->len;
        }
    }
}

/* Where link l's pair reads its producer's output on the producer's rank, and
 * the layout there: the producer part's output tile, or what its reduction
 * holds of the sum. NULL before the buffers are placed. */
static float *link_src(const sf_runtime *rt, const rt_link *l, const sf_tile **lay) {
    if (l->red >= 0) {
        const rt_red *r = &rt->reds[l->red];
        *lay = &r->lay;
        return r->buf ? r->buf + r->off : NULL;
    }
    *lay = &l->prod->out_tile[l->out];
    return l->prod->out[l->out];
}

/* Where the gradient coming back along link l is added on the producer's rank. */
static float *link_gdst(const sf_runtime *rt, const rt_link *l, const sf_tile **lay) {
    if (l->red >= 0) {
        const rt_red *r = &rt->reds[l->red];
        *lay = &r->lay;
        return r->gbuf ? r->gbuf + r->off : NULL;
    }
    *lay = &l->prod->out_tile[l->out];
    return l->prod->gout[l->out];
}

/* ---- set-up ---------------------------------------------------------------- */

/* The points of a step (the memory plan's clock). */
static int32_t pt_f(const sf_runtime *rt, int op) { return rt->fpt[op]; }
static int32_t pt_b(const sf_runtime *rt, int op) { return rt->bpt[op]; }
static int32_t pt_end(const sf_runtime *rt) { return 1 + rt->n_seq; }
#define PT_START 0

static rt_life life1(int32_t from, int32_t to, int zero) {
    rt_life l;
    memset(&l, 0, sizeof l);
    l.n = 1;
    l.from[0] = from;
    l.to[0] = to < from ? from : to;
    l.zero = (uint8_t)zero;
    return l;
}

static void life_add(rt_life *l, int32_t from, int32_t to) {
    if (to < from) to = from;
    for (int i = 0; i < l->n; i++) /* one that meets or touches an interval widens it */
        if (from <= l->to[i] + 1 && l->from[i] <= to + 1) {
            if (from < l->from[i]) l->from[i] = from;
            if (to > l->to[i]) l->to[i] = to;
            return;
        }
    if (l->n >= RT_LIVES) { /* merge into the last: a longer life, never a shorter one */
        if (from < l->from[l->n - 1]) l->from[l->n - 1] = from;
        if (to > l->to[l->n - 1]) l->to[l->n - 1] = to;
        return;
    }
    l->from[l->n] = from;
    l->to[l->n] = to;
    l->n++;
}

/* Record (sizing pass) or place (placing pass: the plan's offset of the same
 * record, the carves coming in the same order) n bytes living over *lf. */
static void *carve_life(sf_runtime *rt, size_t n, const rt_life *lf) {
    if (rt->sizing) {
        if (rt->n_recs == rt->cap_recs) {
            int cap = rt->cap_recs ? 2 * rt->cap_recs : 256;
            rt_rec *q = realloc(rt->recs, (size_t)cap * sizeof *q);
            if (!q) {
                rt->sizing = -1; /* out of memory: set-up fails */
                return NULL;
            }
            rt->recs = q;
            rt->cap_recs = cap;
        }
        rt->recs[rt->n_recs++] = (rt_rec){.bytes = n, .off = 0, .life = *lf};
        return NULL;
    }
    if (rt->sizing < 0) return NULL;
    rt_rec *r = &rt->recs[rt->rec_at++];
    return rt->block + r->off;
}

static float *carve_f(sf_runtime *rt, int64_t n, const rt_life *lf) {
    return carve_life(rt, (size_t)n * sizeof(float), lf);
}

/* Memory held outside the block, counted in the plan (sizing pass only). */
static void hold(sf_runtime *rt, double bytes, rt_life lf) {
    if (rt->sizing <= 0 || bytes <= 0) return;
    lf.virt = 1;
    carve_life(rt, (size_t)bytes, &lf);
}

static int lives_meet(const rt_life *a, const rt_life *b) {
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (a->from[i] <= b->to[j] && b->from[j] <= a->to[i]) return 1;
    return 0;
}

static int rec_size_cmp(const void *pa, const void *pb) {
    const rt_rec *a = *(rt_rec *const *)pa, *b = *(rt_rec *const *)pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int rec_off_cmp(const void *pa, const void *pb) {
    const rt_rec *a = *(rt_rec *const *)pa, *b = *(rt_rec *const *)pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Offsets for the block's records: largest first, each at the lowest aligned
 * offset where it meets no placed record that is alive at a point it is
 * (greedy best-fit by size, as ggml-alloc's planner). The block's size, the
 * peak of live bytes and the bytes held outside it. -1 when out of memory. */
static int plan_memory(sf_runtime *rt) {
    int n = rt->n_recs;
    rt_rec **by = malloc((size_t)(n ? n : 1) * sizeof *by);
    rt_rec **meet = malloc((size_t)(n ? n : 1) * sizeof *meet);
    rt->point_bytes = calloc((size_t)rt->n_points + 1, sizeof *rt->point_bytes);
    if (!by || !meet || !rt->point_bytes) {
        free(by);
        free(meet);
        return -1;
    }
    int nb = 0;
    for (int i = 0; i < n; i++)
        if (!rt->recs[i].life.virt) by[nb++] = &rt->recs[i];
    qsort(by, (size_t)nb, sizeof *by, rec_size_cmp);
    size_t top = 0;
    for (int i = 0; i < nb; i++) {
        rt_rec *r = by[i];
        int nm = 0;
        for (int j = 0; j < i; j++)
            if (lives_meet(&by[j]->life, &r->life)) meet[nm++] = by[j];
        qsort(meet, (size_t)nm, sizeof *meet, rec_off_cmp);
        size_t at = 0;
        for (int j = 0; j < nm; j++) {
            if (meet[j]->off >= at + r->bytes) break; /* the gap before it fits */
            size_t end = (meet[j]->off + meet[j]->bytes + ALIGN - 1) / ALIGN * ALIGN;
            if (end > at) at = end;
        }
        r->off = at;
        if (at + r->bytes > top) top = at + r->bytes;
    }
    free(by);
    free(meet);
    rt->block_bytes = top + ALIGN;
    /* live bytes per point: a difference array over the lives */
    int64_t *d = rt->point_bytes;
    rt->held_bytes = 0;
    for (int i = 0; i < n; i++) {
        const rt_rec *r = &rt->recs[i];
        for (int k = 0; k < r->life.n; k++) {
            d[r->life.from[k]] += (int64_t)r->bytes;
            d[r->life.to[k] + 1] -= (int64_t)r->bytes;
        }
        if (r->life.virt && r->life.n == 1 && r->life.from[0] == PT_START &&
            r->life.to[0] == pt_end(rt))
            rt->held_bytes += (int64_t)r->bytes;
    }
    rt->peak_bytes = 0;
    for (int p = 0; p < rt->n_points; p++) {
        if (p) d[p] += d[p - 1];
        if (d[p] > rt->peak_bytes) rt->peak_bytes = d[p];
    }
    return 0;
}

/* After placing: the buffers to zero at the start of each point (the
 * gradients the kernels accumulate into), by point. -1 when out of memory. */
static int plan_zeroing(sf_runtime *rt) {
    int n = 0;
    for (int i = 0; i < rt->n_recs; i++)
        if (rt->recs[i].life.zero && !rt->recs[i].life.virt) n += rt->recs[i].life.n;
    rt->zl = malloc((size_t)(n ? n : 1) * sizeof *rt->zl);
    rt->zl_start = calloc((size_t)rt->n_points + 1, sizeof *rt->zl_start);
    if (!rt->zl || !rt->zl_start) return -1;
    for (int i = 0; i < rt->n_recs; i++) {
        const rt_rec *r = &rt->recs[i];
        if (!r->life.zero || r->life.virt) continue;
        for (int k = 0; k < r->life.n; k++) rt->zl_start[r->life.from[k] + 1]++;
    }
    for (int p = 0; p < rt->n_points; p++) rt->zl_start[p + 1] += rt->zl_start[p];
    int *fill = calloc((size_t)rt->n_points + 1, sizeof *fill);
    if (!fill) return -1;
    for (int i = 0; i < rt->n_recs; i++) {
        const rt_rec *r = &rt->recs[i];
        if (!r->life.zero || r->life.virt) continue;
        for (int k = 0; k < r->life.n; k++) {
            int32_t p = r->life.from[k];
            rt->zl[rt->zl_start[p] + fill[p]++] =
                (rt_zero){p, (float *)(rt->block + r->off), r->bytes / sizeof(float)};
        }
    }
    free(fill);
    rt->n_zl = n;
    return 0;
}

/* What starts at point p: its gradients zeroed. */
static void at_point(sf_runtime *rt, int32_t p) {
    rt->cur_point = p;
    for (int i = rt->zl_start[p]; i < rt->zl_start[p + 1]; i++)
        memset(rt->zl[i].p, 0, rt->zl[i].n * sizeof(float));
}

static int op_has_bwd(const sf_op *op) { return op->type != SF_OP_INPUT; }

/* Rows of a softmax_ce tile: the product of its leading dimensions. */
static int64_t tile_rows(const sf_tile *t) {
    int64_t r = 1;
    for (int d = 0; d + 1 < t->ndim; d++) r *= t->hi[d] - t->lo[d];
    return r;
}

/* The first point at which part p's output gradient receives anything: the
 * backward of its latest local consumer (they add into it, or write in
 * place), else its own backward (remote consumers' gradients arrive then). */
static int32_t gout_from(const sf_runtime *rt, const rt_part *p) {
    int32_t from = pt_b(rt, p->op);
    for (int i = 0; i < rt->n_links; i++) {
        const rt_link *l = &rt->links[i];
        if (l->prod == p && l->peer < 0 && l->red < 0 && l->grad && pt_b(rt, l->cons_op) < from)
            from = pt_b(rt, l->cons_op);
    }
    return from;
}

/* The elements of this rank's chunk of shard sh (its UPDATE step's), or -1
 * when it does not update the shard (a parameter server's replica). */
static int64_t shard_chunk(const sf_runtime *rt, const rt_shard *sh) {
    if (!sh->comm) return sh->numel;
    for (int q = 0; q < sh->n_steps; q++)
        if (rt->sync_steps[sh->step0 + q].kind == SF_STEP_UPDATE)
            return rt->sync_steps[sh->step0 + q].numel;
    return -1;
}

/* What a rank holds of its weight groups, counted into the plan (their buffers
 * are the groups' own, in full layout, of which the rank touches only these
 * elements): per shard its weights and gradient, and where it updates, the
 * optimizer's state; under ZeRO the chunk it updates of the state (stage 1),
 * of the gradient (2) and of the weights (3), the rest of the gradient held
 * from the shard's first backward to the sync's end, and at stage 3 the rest of
 * the weights from each gather to the last use it serves (the simulator's
 * entries, sim_build.c zero_mem). */
static void hold_weights(sf_runtime *rt) {
    int slots = rt->o.optimizer == SF_OPTIMIZER_SGD ? 1 : 2;
    rt_life always = life1(PT_START, pt_end(rt), 0);
    for (int i = 0; i < rt->n_shards; i++) {
        const rt_shard *sh = &rt->shards[i];
        double n = (double)sh->numel * 4, c = (double)shard_chunk(rt, sh) * 4;
        int z = sh->comm ? sh->zero : 0;
        hold(rt, z >= SF_ZERO_WEIGHTS ? c : n, always);
        hold(rt, z >= SF_ZERO_GRADIENTS ? c : n, always);
        if (c >= 0) hold(rt, slots * (z >= SF_ZERO_OPTIMIZER ? c : n), always);
        if (z >= SF_ZERO_GRADIENTS) /* to its reduce-scatter's end (rs_wait) */
            hold(rt, n - c,
                 life1(pt_b(rt, sh->max_op),
                       rt->bulk || sh->rs_wait_op < 0 ? pt_end(rt)
                                                                        : pt_b(rt, sh->rs_wait_op),
                       0));
        if (z >= SF_ZERO_WEIGHTS) {
            rt_life lw = life1(pt_f(rt, sh->fgather_op), pt_f(rt, sh->max_op), 0);
            life_add(&lw, pt_b(rt, sh->bgather_op), pt_b(rt, sh->key_op));
            hold(rt, n - c, lw);
        }
    }
}

/* Operators whose backward kernels never read their forward output (the
 * partial-sum producers: their sum may then replace their output). */
static int bwd_reads_no_output(sf_op_type t) {
    return t == SF_OP_LINEAR || t == SF_OP_MATMUL || t == SF_OP_CONV2D || t == SF_OP_ATTENTION ||
           t == SF_OP_EMBEDDING || t == SF_OP_CONV_TRANSPOSE2D;
}

/* Whether reduction r's all-reduce runs in place on its part's output (which
 * then holds the sum, as Megatron's row-parallel layer all-reduces its output):
 * an all-reduce of the one part this rank holds of the group, the only
 * reduction of that output here, from an operator whose backward does not
 * read its output. */
static int red_in_place(const sf_runtime *rt, const rt_red *r) {
    if (r->kind != SF_REDUCE_ALL || r->pos < 0 || !r->mine[r->pos]) return 0;
    const rt_part *p = r->mine[r->pos];
    if (!bwd_reads_no_output(p->o->type) || sf_tile_numel(&p->out_tile[r->out]) != r->numel)
        return 0;
    for (int q = 0; q < r->R; q++)
        if (q != r->pos && r->mine[q]) return 0;
    for (int i = 0; i < rt->n_reds; i++) {
        const rt_red *o = &rt->reds[i];
        if (o == r || o->prod_op != r->prod_op || o->out != r->out) continue;
        for (int q = 0; q < o->R; q++)
            if (o->mine[q] == p) return 0;
    }
    return 1;
}

/* The tensors of every part, each with its life in the step. */
static void place_tensors(sf_runtime *rt) {
    const sf_tile *lay;
    int32_t end = pt_end(rt);
    for (int i = 0; i < rt->n_parts; i++) {
        rt_part *p = &rt->parts[i];
        const sf_op *o = p->o;
        int32_t f = pt_f(rt, p->op), b = op_has_bwd(o) ? pt_b(rt, p->op) : end;
        for (int k = 0; k < o->n_outputs; k++) {
            rt_life lf = p->out_life ? p->out_life[k] : life1(f, b, 0);
            p->out[k] = carve_f(rt, sf_tile_numel(&p->out_tile[k]), &lf);
        }
    }
    for (int i = 0; i < rt->n_reds; i++) {
        rt_red *r = &rt->reds[i];
        int sum_here = r->kind != SF_REDUCE_ONE || r->root;
        /* the sum is read by the pairs: sent at once, copied by a local
         * consumer's forward, or read in place there, backward too */
        int32_t last = pt_f(rt, r->cons_op);
        for (int q = 0; q < rt->n_links; q++)
            if (rt->links[q].red == i && rt->links[q].alias) last = pt_b(rt, r->prod_op);
        rt_life lf = life1(pt_f(rt, r->prod_op), last, 0);
        rt_life lr = life1(pt_f(rt, r->prod_op), pt_f(rt, r->prod_op), 0);
        if (red_in_place(rt, r))
            r->buf = r->mine[r->pos]->out[r->out];
        else
            r->buf = sum_here ? carve_f(rt, r->numel, &lf) : NULL;
        r->rbuf = r->kind == SF_REDUCE_ONE && r->root ? carve_f(rt, r->numel, &lr) : NULL;
    }
    for (int i = 0; i < rt->n_parts; i++) {
        rt_part *p = &rt->parts[i];
        const sf_op *o = p->o;
        int32_t f = pt_f(rt, p->op), b = op_has_bwd(o) ? pt_b(rt, p->op) : end;
        rt_life li = life1(f, b, 0);
        for (int k = 0; k < o->n_inputs; k++) {
            const rt_link *l = p->in_alias[k];
            if (l)
                p->in[k] = link_src(rt, l, &lay);
            else
                p->in[k] = carve_f(rt, sf_tile_numel(&p->in_region[k]), &li);
        }
        if (o->type == SF_OP_SOFTMAX_CE)
            p->labels = carve_life(rt, (size_t)(p->rows > 0 ? p->rows : 1) * sizeof(int32_t), &li);
    }
    for (int i = 0; i < rt->n_inner; i++) {
        rt_life lf = life1(pt_f(rt, rt->inner[i].op), pt_b(rt, rt->inner[i].op), 0);
        rt->inner[i].stats = carve_f(rt, 3 * rt->inner[i].rows, &lf);
    }
    for (int i = 0; i < rt->n_links; i++) {
        rt_link *l = &rt->links[i];
        if (l->peer < 0) continue;
        /* a receive is posted when the step begins; a send is waited for once
         * the next operator's forward is done (a pipeline: the next entry) */
        int32_t f = pt_f(rt, l->prod ? l->prod->op : 0);
        rt_life lf = l->cons ? life1(PT_START, pt_f(rt, l->cons_op), 0)
                     : rt->pipe_m ? life1(f, f + 1 < end ? f + 1 : f, 0)
                                  : life1(f,
                                          pt_f(rt, l->prod->op + 1 < rt->n_ops ? l->prod->op + 1
                                                                              : l->prod->op),
                                          0);
        l->fbuf = carve_f(rt, l->numel, &lf);
    }
    for (int i = 0; i < rt->n_reds; i++) {
        rt_red *r = &rt->reds[i];
        rt_life lf = life1(pt_b(rt, r->cons_op), pt_b(rt, r->prod_op), 1);
        r->gbuf = carve_f(rt, r->numel, &lf);
    }
    for (int i = 0; i < rt->n_parts; i++) {
        rt_part *p = &rt->parts[i];
        const sf_op *o = p->o;
        if (!op_has_bwd(o)) {
            for (int k = 0; k < o->n_outputs; k++) p->gout[k] = NULL;
            for (int k = 0; k < o->n_inputs; k++) p->gin[k] = NULL;
            continue;
        }
        int32_t b = pt_b(rt, p->op);
        rt_life lg = life1(gout_from(rt, p), b, 1), lb = life1(b, b, 1);
        for (int k = 0; k < o->n_outputs; k++)
            p->gout[k] = carve_f(rt, sf_tile_numel(&p->out_tile[k]), &lg);
        for (int k = 0; k < o->n_inputs; k++) {
            const sf_op *src = sf_graph_op(rt->g, o->inputs[k].op);
            const rt_link *l = p->in_alias[k];
            if (!op_has_bwd(src))
                p->gin[k] = NULL;
            else if (l && l->alias == 2)
                p->gin[k] = link_gdst(rt, l, &lay);
            else
                p->gin[k] = carve_f(rt, sf_tile_numel(&p->in_region[k]), &lb);
        }
    }
    for (int i = 0; i < rt->n_links; i++) {
        rt_link *l = &rt->links[i];
        if (l->peer < 0 || !l->grad) continue;
        /* a gradient's receive is posted by the producer's backward, which waits
         * for it; its send is waited for at the end of the step */
        rt_life lf = l->prod ? life1(pt_b(rt, l->prod->op), pt_b(rt, l->prod->op), 0)
                             : life1(pt_b(rt, l->cons_op), end, 0);
        l->gbuf = carve_f(rt, l->numel, &lf);
    }
    for (int i = 0; i < rt->n_shards; i++) {
        rt_shard *sh = &rt->shards[i];
        /* packed: from the sync's start (the backward of its lowest operator;
         * bulk: the end); at stage 3 also around each gather before a pass */
        int32_t s0 = rt->bulk ? end : pt_b(rt, sh->key_op);
        rt_life lf = life1(s0, end, 0);
        if (sh->comm && sh->zero >= SF_ZERO_WEIGHTS) {
            life_add(&lf, pt_f(rt, sh->fgather_op), pt_f(rt, sh->fgather_op));
            life_add(&lf, pt_b(rt, sh->bgather_op), pt_b(rt, sh->bgather_op));
        }
        if (sh->in_place && !rt->sizing)
            sh->buf = rt->groups[sh->group].g + sh->sl[0].offset;
        else if (sh->comm && !sh->in_place)
            sh->buf = carve_f(rt, sh->numel, &lf);
        for (int q = 0; q < sh->n_steps; q++) {
            const rt_step *st = &rt->sync_steps[sh->step0 + q];
            if (st->kind == SF_STEP_P2P && !st->send && st->payload == SF_PAYLOAD_GRAD) {
                sh->rbuf = carve_f(rt, sh->numel, &lf);
                break;
            }
        }
    }
    for (int32_t q = 0; q < rt->n_points; q++) {
        rt_life lw = life1(q, q, 0);
        rt->ws_at[q] = rt->ws_bytes[q] ? carve_life(rt, rt->ws_bytes[q], &lw) : NULL;
    }
    if (rt->sizing > 0) hold_weights(rt);
}

/* What this rank runs and in which order (rt->seq), and the points of every
 * operator's passes (docs/runtime.md, "Pipelines"). Without a pipeline: every
 * forward in id order, then every backward in reverse, on every rank. With
 * one: the slots of this rank's stage (the stage of the chunks its parts are
 * in) in its schedule's order, each slot the forward (backward) of its chunk's
 * operators of its micro-batch copy in (reverse) id order; the operators of
 * other stages have no point here (END forward, START backward: the lives
 * that name them, the partial sums a remote consumer reads, only widen). */
static sf_status setup_seq(sf_runtime *rt, const sf_pipeline *pl, const sf_graph *ug,
                           sf_error *err) {
    int n = rt->n_ops, un = rt->user_ops;
    size_t nn = (size_t)(n ? n : 1);
    rt->fpt = malloc(nn * sizeof *rt->fpt);
    rt->bpt = malloc(nn * sizeof *rt->bpt);
    rt->seq = malloc(2 * nn * sizeof *rt->seq);
    if (!rt->fpt || !rt->bpt || !rt->seq) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    if (!pl) {
        for (int op = 0; op < n; op++) {
            rt->seq[op] = 2 * op;
            rt->seq[2 * n - 1 - op] = 2 * op + 1;
            rt->fpt[op] = 1 + op;
            rt->bpt[op] = 2 * n - op;
        }
        rt->n_seq = 2 * n;
        return SF_OK;
    }
    int p = pl->stages, m = pl->micro_batches, nslots = 2 * m * pl->chunks;
    int *chunk = malloc((size_t)(un ? un : 1) * sizeof *chunk);
    sf_pipe_slot *sl = malloc((size_t)nslots * sizeof *sl);
    if (!chunk || !sl) {
        free(chunk);
        free(sl);
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    }
    sf_pipeline_op_chunks(pl, ug, chunk);
    int stage = -1, at = -1;
    sf_status st = SF_OK;
    for (int u = 0; u < n && st == SF_OK; u++) {
        const sf_config *c = sf_strategy_get(rt->s, u);
        for (int q = 0; q < c->n_parts; q++) {
            if (c->device[q] != rt->rank) continue;
            int here = chunk[u % un] % p;
            if (stage < 0) {
                stage = here;
                at = u % un;
            } else if (here != stage) {
                st = sf_error_set(err, SF_ERR_INVALID,
                                  "pipeline: rank %d holds parts of stage %d ('%s') and of stage "
                                  "%d ('%s'); stages must not share devices",
                                  rt->rank, stage, sf_graph_op(ug, at)->name, here,
                                  sf_graph_op(ug, u % un)->name);
                break;
            }
        }
    }
    rt->n_seq = 0;
    for (int u = 0; u < n; u++) rt->fpt[u] = rt->bpt[u] = -1;
    if (st == SF_OK && stage >= 0) {
        int k = sf_pipeline_slots(pl, stage, sl);
        for (int i = 0; i < k; i++) {
            int c = sl[i].chunk, base = sl[i].mb * un;
            for (int q = 0; q < un; q++) {
                int op = sl[i].backward ? un - 1 - q : q;
                if (chunk[op] != c) continue;
                int u = base + op;
                rt->seq[rt->n_seq] = 2 * u + sl[i].backward;
                if (sl[i].backward)
                    rt->bpt[u] = 1 + rt->n_seq;
                else
                    rt->fpt[u] = 1 + rt->n_seq;
                rt->n_seq++;
            }
        }
    }
    for (int u = 0; u < n; u++) {
        if (rt->fpt[u] < 0) rt->fpt[u] = 1 + rt->n_seq;
        if (rt->bpt[u] < 0) rt->bpt[u] = PT_START;
    }
    free(chunk);
    free(sl);
    return st;
}

/* Where each operator's parts and reductions are in rt->parts (made in
 * operator order) and rt->red_order (by producer). */
static sf_status setup_ranges(sf_runtime *rt, sf_error *err) {
    rt->lp_start = calloc((size_t)rt->n_ops + 1, sizeof *rt->lp_start);
    rt->lr_start = calloc((size_t)rt->n_ops + 1, sizeof *rt->lr_start);
    if (!rt->lp_start || !rt->lr_start) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rt->n_parts; i++) rt->lp_start[rt->parts[i].op + 1]++;
    for (int i = 0; i < rt->n_reds; i++) rt->lr_start[rt->reds[rt->red_order[i]].prod_op + 1]++;
    for (int op = 0; op < rt->n_ops; op++) {
        rt->lp_start[op + 1] += rt->lp_start[op];
        rt->lr_start[op + 1] += rt->lr_start[op];
    }
    return SF_OK;
}

/* A pipeline: the micro-batch graph the runtime runs (rt->g), the unrolled
 * strategy (rt->s) and where each copy's rows start in the caller's batch. */
static sf_status setup_pipe(sf_runtime *rt, const sf_graph *g, const sf_strategy *s,
                            sf_error *err) {
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    for (int i = 0; i < rt->user_ops; i++)
        if (sf_graph_op(g, i)->type == SF_OP_BATCHNORM)
            return sf_error_set(err, SF_ERR_UNSUPPORTED,
                                "pipeline: batch norm '%s' would normalize each micro-batch on "
                                "its own; the runtime pipelines graphs without batch norm",
                                sf_graph_op(g, i)->name);
    rt->gu = sf_graph_micro_batches(g, pl->micro_batches, err);
    if (!rt->gu) return err && err->code ? err->code : SF_ERR_NOMEM;
    rt->g = rt->gu;
    rt->n_ops = sf_graph_num_ops(rt->gu);
    rt->pipe_m = pl->micro_batches;
    rt->s = sf_strategy_unroll(s, g, rt->gu);
    size_t nn = (size_t)(rt->n_ops ? rt->n_ops : 1);
    rt->mb_inputs = calloc(nn, sizeof *rt->mb_inputs);
    rt->mb_labels = calloc(nn, sizeof *rt->mb_labels);
    rt->mb_off = calloc(nn, sizeof *rt->mb_off);
    if (!rt->s || !rt->mb_inputs || !rt->mb_labels || !rt->mb_off)
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int u = 0; u < rt->n_ops; u++) {
        const sf_op *o = sf_graph_op(rt->gu, u);
        int64_t j = u / rt->user_ops;
        if (o->type == SF_OP_INPUT)
            rt->mb_off[u] = j * sf_shape_numel(&o->out_shapes[0]);
        else if (o->type == SF_OP_SOFTMAX_CE)
            rt->mb_off[u] = j * (sf_shape_numel(&o->in_shapes[0]) /
                                 o->in_shapes[0].d[o->in_shapes[0].ndim - 1]);
    }
    return SF_OK;
}

static sf_status setup_parts(sf_runtime *rt, sf_error *err) {
    int n = 0;
    rt->n_points = pt_end(rt) + 1;
    rt->ws_at = calloc((size_t)rt->n_points, sizeof *rt->ws_at);
    rt->ws_bytes = calloc((size_t)rt->n_points, sizeof *rt->ws_bytes);
    if (!rt->ws_at || !rt->ws_bytes) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++) {
        const sf_config *c = sf_strategy_get(rt->s, op);
        const sf_op *o = sf_graph_op(rt->g, op);
        int id = sf_op_inner_dim(o);
        if (id >= 0 && id < c->ndim && c->degree[id] > 1 && o->type != SF_OP_SOFTMAX_CE)
            return sf_error_set(err, SF_ERR_UNSUPPORTED,
                                "operator '%s' (%s) is split along its inner dimension %d, which "
                                "the runtime executes for softmax_ce only",
                                o->name, sf_op_type_name(o->type), id);
        for (int p = 0; p < c->n_parts; p++) {
            if (c->device[p] >= sf_comm_size(rt->c))
                return sf_error_set(err, SF_ERR_INVALID,
                                    "operator '%s' part %d is on device %d, but there are %d ranks",
                                    sf_graph_op(rt->g, op)->name, p, c->device[p],
                                    sf_comm_size(rt->c));
            if (c->device[p] == rt->rank) n++;
        }
    }
    rt->parts = calloc((size_t)(n ? n : 1), sizeof *rt->parts);
    rt->part_start = calloc((size_t)rt->n_ops + 1, sizeof *rt->part_start);
    if (!rt->parts || !rt->part_start) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++)
        rt->part_start[op + 1] = rt->part_start[op] + sf_strategy_get(rt->s, op)->n_parts;
    rt->part_of = calloc((size_t)(rt->part_start[rt->n_ops] ? rt->part_start[rt->n_ops] : 1),
                         sizeof *rt->part_of);
    if (!rt->part_of) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++) {
        const sf_op *o = sf_graph_op(rt->g, op);
        const sf_config *c = sf_strategy_get(rt->s, op);
        const sf_tile *tiles = sf_taskgraph_tiles(rt->tg, op);
        for (int p = 0; p < c->n_parts; p++) {
            if (c->device[p] != rt->rank) continue;
            rt_part *q = &rt->parts[rt->n_parts++];
            rt->part_of[rt->part_start[op] + p] = q;
            q->op = op;
            q->part = p;
            q->o = o;
            q->tile = tiles[p];
            q->group = -1;
            q->inner = -1;
            q->out = calloc((size_t)o->n_outputs, sizeof *q->out);
            q->gout = calloc((size_t)o->n_outputs, sizeof *q->gout);
            q->out_tile = calloc((size_t)o->n_outputs, sizeof *q->out_tile);
            int ni = o->n_inputs ? o->n_inputs : 1;
            q->in = calloc((size_t)ni, sizeof *q->in);
            q->gin = calloc((size_t)ni, sizeof *q->gin);
            q->in_region = calloc((size_t)ni, sizeof *q->in_region);
            q->in_alias = calloc((size_t)ni, sizeof *q->in_alias);
            if (!q->out || !q->gout || !q->out_tile || !q->in || !q->gin || !q->in_region ||
                !q->in_alias)
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            for (int k = 0; k < o->n_outputs; k++)
                sf_op_output_tile(o, &q->tile, k, &q->out_tile[k]);
            for (int k = 0; k < o->n_inputs; k++)
                sf_op_input_region(o, &q->tile, k, &q->in_region[k]);
            if (o->type == SF_OP_SOFTMAX_CE) q->rows = tile_rows(&q->tile);
            for (int b = 0; b < 2; b++) {
                size_t w = sf_kernel_workspace_bytes(o, &q->tile, b);
                int32_t at = b ? pt_b(rt, op) : pt_f(rt, op);
                if (w > rt->ws_bytes[at]) rt->ws_bytes[at] = w;
            }
            if (o->type != SF_OP_INPUT && !sf_kernel_available(o->type, rt->o.fast_kernels))
                return sf_error_set(
                    err, SF_ERR_UNSUPPORTED, "operator '%s': no %s kernel for type %s", o->name,
                    rt->o.fast_kernels ? "fast" : "reference", sf_op_type_name(o->type));
        }
    }
    return SF_OK;
}

/* Local links the task graph marks in place (sf_tg_pair.in_place) need no
 * copy: the consumer reads the producer's output tile where it lies, and with
 * in_place 2 its kernel also accumulates its input gradient straight into the
 * producer's output gradient (kernels accumulate into grad_in,
 * soapflow/kernels.h); otherwise each keeps its own gradient buffer, so that no
 * kernel call gets two grad_in that alias. Most edges of a chain split the same
 * way on both sides are such. The simulator prices the copies of the others. */
static void set_aliases(sf_runtime *rt) {
    for (int i = 0; i < rt->n_links; i++) {
        rt_link *l = &rt->links[i];
        if (l->alias) l->cons->in_alias[l->k] = l;
    }
}

/* The communication group of the n ranks d (in that order: position i is
 * d[i]) for a reduction's collective, made on first sight by its members (every
 * member meets the reductions in the same order); -1 on failure. */
static int red_comm(sf_runtime *rt, const int16_t *d, int n) {
    for (int i = 0; i < rt->n_sets; i++) {
        const struct rt_set *e = &rt->sets[i];
        int same = e->n == n;
        for (int q = 0; q < n && same; q++) same = e->devs[q] == d[q];
        if (same) return e->comm;
    }
    struct rt_set *ns = realloc(rt->sets, (size_t)(rt->n_sets + 1) * sizeof *ns);
    if (!ns) return -1;
    rt->sets = ns;
    struct rt_set *e = &rt->sets[rt->n_sets];
    e->n = n;
    e->devs = malloc((size_t)n * sizeof *e->devs);
    if (!e->devs) return -1;
    for (int q = 0; q < n; q++) e->devs[q] = d[q];
    rt->n_sets++; /* freed with the runtime from here on */
    if (rt->c->vt->group_new(rt->c, e->devs, n, &e->comm) != SF_OK) return -1;
    return e->comm;
}

#define RED_BAD(what)                                                                              \
    sf_error_set(err, SF_ERR_INTERNAL, "operator '%s': partial sums for '%s': %s", po->name,       \
                 sf_graph_op(rt->g, x)->name, what)

/* The reductions of the edge into input k of x whose pairs (np of them) were
 * just walked (sf_taskgraph_edge_reduce): every rank counts the tags of their
 * messages alike (from *tag); in the filling walk (fill), those this rank
 * holds a part of become rt->reds, and red_of[part] their index for the
 * group's parts on this rank (-1 for every other part of the producer). scr:
 * room for 3 ints a part of the producer. */
static sf_status setup_reds(sf_runtime *rt, int x, int k, const sf_tg_pair *pr, int np, int fill,
                            int *tag, int *red_of, int *scr, sf_error *err) {
    sf_tg_reduces rd;
    int n = sf_taskgraph_edge_reduce(rt->tg, &rd);
    const sf_op *o = sf_graph_op(rt->g, x);
    int prod = o->inputs[k].op;
    const sf_op *po = sf_graph_op(rt->g, prod);
    const sf_config *cp = sf_strategy_get(rt->s, prod);
    int *devs = scr, *tags = scr + cp->n_parts, *read = scr + 2 * cp->n_parts;
    for (int q = 0; q < cp->n_parts; q++) {
        red_of[q] = -1;
        read[q] = 0;
    }
    for (int i = 0; i < np; i++) read[pr[i].prod_part] = 1; /* the parts some pair reads */
    for (int g = 0; g < n; g++) {
        const sf_tg_reduce *gr = &rd.groups[g];
        const int32_t *parts = rd.parts + gr->part_start;
        int R = gr->n_parts;
        int needed = 0, involved = 0;
        for (int r = 0; r < R; r++) {
            devs[r] = cp->device[parts[r]];
            tags[r] = -1;
            involved |= devs[r] == rt->rank;
            needed |= read[parts[r]];
        }
        if (!needed) continue;
        const sf_tg_step *st = rd.steps + gr->step_start;
        int nb = gr->n_steps - gr->n_fwd; /* backward steps */
        if (gr->kind == SF_REDUCE_ONE) {
            /* a message from each part on another rank, in part order */
            int q = 0;
            for (int r = 1; r < R; r++) {
                if (devs[r] == devs[0]) continue;
                while (q < gr->n_fwd && st[q].kind == SF_STEP_COPY) q++;
                if (q >= gr->n_fwd || st[q].kind != SF_STEP_P2P || st[q].dev != devs[r] ||
                    st[q].peer != devs[0] || st[q].numel != gr->numel)
                    return RED_BAD("the reduction's messages are not one per part on another rank");
                q++;
                tags[r] = 2 * (*tag)++;
            }
            if (nb > 1 || (nb == 1 && st[gr->n_fwd].kind != SF_STEP_BROADCAST))
                return RED_BAD("the gradient's dual is not one broadcast");
        } else {
            int fk = gr->kind == SF_REDUCE_ALL ? SF_STEP_ALL_REDUCE : SF_STEP_REDUCE_SCATTER;
            int bk = gr->kind == SF_REDUCE_ALL ? SF_STEP_ALL_REDUCE : SF_STEP_ALL_GATHER;
            if (gr->n_fwd != 1 || nb != 1 || st[0].kind != fk || st[1].kind != bk ||
                st[0].n_group != R || st[0].numel != gr->numel)
                return RED_BAD("the reduction is not one collective each way");
        }
        if (*tag > (1 << 29))
            return sf_error_set(err, SF_ERR_RANGE, "too many messages in the task graph");
        if (!fill || !involved) continue;
        if (rt->n_reds == rt->cap_reds) {
            int cap = rt->cap_reds ? 2 * rt->cap_reds : 16;
            rt_red *nr = realloc(rt->reds, (size_t)cap * sizeof *nr);
            if (!nr) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            rt->reds = nr;
            rt->cap_reds = cap;
        }
        rt_red *r = &rt->reds[rt->n_reds];
        memset(r, 0, sizeof *r);
        r->prod_op = prod;
        r->cons_op = x;
        r->out = o->inputs[k].out;
        r->kind = gr->kind;
        r->R = R;
        r->d0 = devs[0];
        r->root = devs[0] == rt->rank;
        r->pos = -1;
        r->fcomm = r->bcomm = -1;
        r->piece = gr->piece;
        r->lay = gr->piece;
        r->numel = gr->numel;
        r->mine = calloc((size_t)R, sizeof *r->mine);
        r->devs = malloc((size_t)R * sizeof *r->devs);
        r->tags = malloc((size_t)R * sizeof *r->tags);
        r->chunks = gr->kind == SF_REDUCE_SCATTER ? malloc((size_t)R * sizeof *r->chunks) : NULL;
        rt->n_reds++; /* freed with the runtime from here on */
        if (!r->mine || !r->devs || !r->tags || (gr->kind == SF_REDUCE_SCATTER && !r->chunks))
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        for (int q = 0; q < R; q++) {
            r->devs[q] = devs[q];
            r->tags[q] = tags[q];
            if (devs[q] != rt->rank) continue;
            r->mine[q] = rt->part_of[rt->part_start[prod] + parts[q]];
            red_of[parts[q]] = rt->n_reds - 1;
            if (r->kind != SF_REDUCE_ONE) r->pos = q;
            if (r->kind == SF_REDUCE_ONE && devs[q] != devs[0]) rt->cap_red_pending++;
        }
        if (gr->kind == SF_REDUCE_SCATTER) {
            for (int q = 0; q < R; q++) {
                int64_t off, len;
                r->chunks[q] = rd.chunks[gr->part_start + q];
                sf_tg_chunk(r->numel, R, q, &off, &len);
                if (sf_tile_numel(&r->chunks[q]) != len)
                    return RED_BAD("a reduce-scatter's region is not its chunk");
                if (q == r->pos) {
                    r->off = off;
                    r->lay = r->chunks[q];
                }
            }
        }
        if (gr->kind != SF_REDUCE_ONE) {
            r->fcomm = red_comm(rt, rd.devs + st[0].group, st[0].n_group);
            r->bcomm = red_comm(rt, rd.devs + st[1].group, st[1].n_group);
            if (r->fcomm < 0 || r->bcomm < 0)
                return sf_error_set(err, SF_ERR_IO, "cannot make a communication group of %d ranks",
                                    R);
        } else if (nb == 1) {
            const sf_tg_step *b = &st[gr->n_fwd];
            if (b->n_group < 2 || rd.devs[b->group] != devs[0])
                return RED_BAD("the gradient's broadcast does not start at the first part");
            r->bcomm = red_comm(rt, rd.devs + b->group, b->n_group);
            if (r->bcomm < 0)
                return sf_error_set(err, SF_ERR_IO, "cannot make a communication group of %d ranks",
                                    b->n_group);
        }
    }
    return SF_OK;
}

static sf_status setup_link_walks(sf_runtime *rt, int *red_of, int *scr, sf_error *err);

/* Every pair of the task graph, in the same order on every rank; those that
 * touch this rank become links. Two walks: count, then fill. */
static sf_status setup_links(sf_runtime *rt, sf_error *err) {
    int max_parts = 1;
    for (int op = 0; op < rt->n_ops; op++)
        if (sf_strategy_get(rt->s, op)->n_parts > max_parts)
            max_parts = sf_strategy_get(rt->s, op)->n_parts;
    int *red_of = malloc((size_t)max_parts * 4 * sizeof *red_of); /* then setup_reds' room */
    if (!red_of) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    sf_status st = setup_link_walks(rt, red_of, red_of + max_parts, err);
    free(red_of);
    return st;
}

/* setup_links' two walks (red_of, scr: room for every part of an operator, and
 * 3 ints a part). */
static sf_status setup_link_walks(sf_runtime *rt, int *red_of, int *scr, sf_error *err) {
    for (int pass = 0; pass < 2; pass++) {
        int tag = 0, nl = 0;
        for (int x = 0; x < rt->n_ops; x++) {
            const sf_op *o = sf_graph_op(rt->g, x);
            for (int k = 0; k < o->n_inputs; k++) {
                const sf_tg_pair *pr;
                int np = sf_taskgraph_edge(rt->tg, x, k, &pr);
                if (np < 0) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
                const sf_op *po = sf_graph_op(rt->g, o->inputs[k].op);
                sf_status rs = setup_reds(rt, x, k, pr, np, pass, &tag, red_of, scr, err);
                if (rs != SF_OK) return rs;
                for (int i = 0; i < np; i++) {
                    int remote = pr[i].src_dev != pr[i].dst_dev;
                    int t = remote ? 2 * tag++ : -1;
                    if (tag > (1 << 29))
                        return sf_error_set(err, SF_ERR_RANGE,
                                            "too many messages in the task graph");
                    if (pr[i].src_dev != rt->rank && pr[i].dst_dev != rt->rank) continue;
                    if (pass == 0) {
                        nl++;
                        continue;
                    }
                    rt_link *l = &rt->links[nl++];
                    memset(l, 0, sizeof *l);
                    l->k = k;
                    l->cons_op = x;
                    l->cons_part = pr[i].cons_part;
                    l->out = o->inputs[k].out;
                    l->prod = pr[i].src_dev == rt->rank
                                  ? rt->part_of[rt->part_start[o->inputs[k].op] + pr[i].prod_part]
                                  : NULL;
                    l->cons = pr[i].dst_dev == rt->rank
                                  ? rt->part_of[rt->part_start[x] + pr[i].cons_part]
                                  : NULL;
                    l->peer = !remote ? -1 : l->prod ? pr[i].dst_dev : pr[i].src_dev;
                    l->tag = t;
                    l->grad = op_has_bwd(po) && op_has_bwd(o);
                    l->region = pr[i].region;
                    l->alias = pr[i].in_place;
                    l->numel = pr[i].numel;
                    l->freq = l->greq = -1;
                    l->red = l->prod ? red_of[pr[i].prod_part] : -1;
                    /* a reduce-scatter's holder has a chunk, not the piece */
                    if (l->red >= 0 && rt->reds[l->red].kind == SF_REDUCE_SCATTER) l->alias = 0;
                }
            }
        }
        if (pass == 0) {
            rt->links = calloc((size_t)(nl ? nl : 1), sizeof *rt->links);
            if (!rt->links) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        }
        rt->n_links = nl;
    }
    /* per-part lists, by counting */
    size_t nl1 = (size_t)(rt->n_links ? rt->n_links : 1);
    rt->cons_links = malloc(nl1 * sizeof *rt->cons_links);
    rt->prod_links = malloc(nl1 * sizeof *rt->prod_links);
    rt->recv_links = malloc(nl1 * sizeof *rt->recv_links);
    rt->send_links = malloc(nl1 * sizeof *rt->send_links);
    if (!rt->cons_links || !rt->prod_links || !rt->recv_links || !rt->send_links)
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    rt->red_links = malloc(nl1 * sizeof *rt->red_links);
    rt->red_order = malloc((size_t)(rt->n_reds ? rt->n_reds : 1) * sizeof *rt->red_order);
    if (!rt->red_links || !rt->red_order) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rt->n_links; i++) {
        rt_link *l = &rt->links[i];
        if (l->cons) l->cons->n_cons++;
        if (l->prod && l->peer >= 0 && l->red < 0) l->prod->n_prod++;
        if (l->prod && l->peer >= 0 && l->red >= 0) rt->reds[l->red].n_links++;
    }
    /* reductions run after their producer's parts, in walk order */
    int at = 0;
    for (int op = 0; op < rt->n_ops; op++)
        for (int i = 0; i < rt->n_reds; i++)
            if (rt->reds[i].prod_op == op) rt->red_order[at++] = i;
    int ar = 0;
    for (int i = 0; i < rt->n_reds; i++) {
        rt->reds[i].link_start = ar;
        ar += rt->reds[i].n_links;
        rt->reds[i].n_links = 0;
    }
    int ac = 0, ap = 0;
    for (int i = 0; i < rt->n_parts; i++) {
        rt->parts[i].cons_start = ac;
        rt->parts[i].prod_start = ap;
        ac += rt->parts[i].n_cons;
        ap += rt->parts[i].n_prod;
        rt->parts[i].n_cons = rt->parts[i].n_prod = 0;
    }
    for (int i = 0; i < rt->n_links; i++) {
        rt_link *l = &rt->links[i];
        if (l->cons) rt->cons_links[l->cons->cons_start + l->cons->n_cons++] = l;
        if (l->prod && l->peer >= 0 && l->red < 0)
            rt->prod_links[l->prod->prod_start + l->prod->n_prod++] = l;
        if (l->prod && l->peer >= 0 && l->red >= 0) {
            rt_red *r = &rt->reds[l->red];
            rt->red_links[r->link_start + r->n_links++] = l;
        }
        if (l->peer >= 0 && l->cons) rt->recv_links[rt->n_recv++] = l;
        if (l->peer >= 0 && l->prod) rt->send_links[rt->n_send++] = l;
    }
    set_aliases(rt);
    return SF_OK;
}

#define INNER_BAD(what)                                                                            \
    sf_error_set(err, SF_ERR_INTERNAL, "operator '%s': the statistics of its classes' parts: %s",  \
                 o->name, what)

/* The groups of op's parts split along its inner dimension that this rank
 * holds parts of (counted into rt->n_inner when fill is 0, else made), with
 * the task graph's steps of those that span ranks. */
static sf_status setup_inner_op(sf_runtime *rt, int op, int fill, sf_error *err) {
    const sf_op *o = sf_graph_op(rt->g, op);
    const sf_config *c = sf_strategy_get(rt->s, op);
    int id = sf_op_inner_dim(o);
    if (id < 0 || id >= c->ndim || c->degree[id] <= 1) return SF_OK;
    sf_tg_inner in;
    memset(&in, 0, sizeof in);
    if (fill && sf_taskgraph_op_inner(rt->tg, op, &in) < 0)
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    int deg = c->degree[id], stride = 1;
    for (int d = id + 1; d < c->ndim; d++) stride *= c->degree[d];
    const sf_tile *tiles = sf_taskgraph_tiles(rt->tg, op);
    for (int p = 0; p < c->n_parts; p++) {
        if ((p / stride) % deg != 0) continue; /* not the first of its group */
        int mine = 0;
        for (int k = 0; k < deg; k++) mine |= c->device[p + k * stride] == rt->rank;
        if (!mine) continue;
        if (!fill) {
            rt->n_inner++;
            continue;
        }
        rt_inner *g = &rt->inner[rt->n_inner];
        *g = (rt_inner){
            .op = op, .first = p, .rows = tile_rows(&tiles[p]), .mcomm = -1, .scomm = -1};
        for (int k = 0; k < deg; k++)
            if (c->device[p + k * stride] == rt->rank)
                rt->part_of[rt->part_start[op] + p + k * stride]->inner = rt->n_inner;
        rt->n_inner++;
        for (int q = 0; q < in.n; q++) {
            const sf_tg_inner_group *tg = &in.groups[q];
            if (in.parts[tg->part_start] != p) continue;
            const sf_tg_step *st = in.steps + tg->step_start;
            if (tg->n_steps != 2 || tg->n_parts != deg || tg->rows != g->rows ||
                st[0].kind != SF_STEP_ALL_REDUCE || st[1].kind != SF_STEP_ALL_REDUCE ||
                st[0].numel != g->rows || st[1].numel != 2 * g->rows || st[0].n_group < 2)
                return INNER_BAD("the task graph's steps are not two all-reduces of its rows");
            g->mcomm = red_comm(rt, in.devs + st[0].group, st[0].n_group);
            g->scomm = red_comm(rt, in.devs + st[1].group, st[1].n_group);
            if (g->mcomm < 0 || g->scomm < 0)
                return sf_error_set(err, SF_ERR_IO, "cannot make a communication group of %d ranks",
                                    st[0].n_group);
        }
    }
    return SF_OK;
}

/* Every operator's groups split along its inner dimension, in operator order
 * and, in each, part order (every rank alike: the communication groups are
 * made, and the all-reduces posted, in that order). */
static sf_status setup_inner(sf_runtime *rt, sf_error *err) {
    for (int op = 0; op < rt->n_ops; op++) {
        sf_status st = setup_inner_op(rt, op, 0, err);
        if (st != SF_OK) return st;
    }
    int n = rt->n_inner;
    rt->n_inner = 0;
    rt->inner = calloc((size_t)(n ? n : 1), sizeof *rt->inner);
    if (!rt->inner) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++) {
        sf_status st = setup_inner_op(rt, op, 1, err);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}

/* A shard of the global list, before this rank keeps the ones it holds. */
typedef struct g_shard {
    int owner, idx, key_op, max_op, n_devs, dev_start;
    int rep_op, rep_part;
    int64_t numel;
    int step0, n_steps; /* its steps in the global step list */
} g_shard;

static int g_shard_cmp(const void *pa, const void *pb) {
    const g_shard *a = pa, *b = pb;
    if (a->key_op != b->key_op) return a->key_op > b->key_op ? -1 : 1; /* latest first */
    if (a->owner != b->owner) return a->owner < b->owner ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* A distinct device set of the collectives, and its communication group. */
typedef struct g_set {
    int start, len; /* devices: g_lists.devs[start .. start + len] */
    int comm;       /* -1 when this rank is no member */
} g_set;

/* The global lists every rank builds alike: shards, their steps (with the
 * groups' devices), and the communication groups made for them. */
typedef struct g_lists {
    g_shard *gs;
    int n, cap;
    sf_tg_step *st;
    int n_st, cap_st;
    int16_t *devs; /* shard devices and step groups */
    int n_devs, cap_devs;
    g_set *sets;
    int n_sets, cap_sets;
} g_lists;

static void g_lists_free(g_lists *L) {
    free(L->gs);
    free(L->st);
    free(L->devs);
    free(L->sets);
}

static int g_grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int g_push_devs(g_lists *L, const int16_t *d, int n) {
    if (g_grow((void **)&L->devs, &L->cap_devs, L->n_devs + n, sizeof *L->devs)) return -1;
    memcpy(L->devs + L->n_devs, d, (size_t)n * sizeof *d);
    L->n_devs += n;
    return L->n_devs - n;
}

static int in_devs(const int16_t *d, int n, int rank) {
    for (int i = 0; i < n; i++)
        if (d[i] == rank) return 1;
    return 0;
}

/* The communication group of a collective over the n devices at L->devs[at]
 * (made on first sight, by its members, in the order every rank meets them):
 * its id, -1 when this rank is no member, < -1 on failure. */
static int g_comm(sf_runtime *rt, g_lists *L, int at, int n) {
    const int16_t *d = L->devs + at;
    for (int i = 0; i < L->n_sets; i++)
        if (L->sets[i].len == n && !memcmp(L->devs + L->sets[i].start, d, (size_t)n * sizeof *d))
            return L->sets[i].comm;
    if (g_grow((void **)&L->sets, &L->cap_sets, L->n_sets + 1, sizeof *L->sets)) return -2;
    int comm = -1;
    if (in_devs(d, n, rt->rank)) {
        int *rk = malloc((size_t)n * sizeof *rk);
        if (!rk) return -2;
        for (int q = 0; q < n; q++) rk[q] = d[q];
        sf_status st = rt->c->vt->group_new(rt->c, rk, n, &comm);
        free(rk);
        if (st != SF_OK) return -3;
    }
    L->sets[L->n_sets++] = (g_set){at, n, comm};
    return comm;
}

/* Whether step b (an all-gather) follows step a (the last one kept) alone over
 * the same ring: the two are one all-reduce. */
static int fuses(const g_lists *L, const sf_tg_step *a, const sf_tg_step *b, int b_dep_is_a) {
    return a->kind == SF_STEP_REDUCE_SCATTER && b->kind == SF_STEP_ALL_GATHER && b_dep_is_a &&
           a->n_group == b->n_group && a->numel == b->numel && a->offset == b->offset &&
           !memcmp(L->devs + a->group, L->devs + b->group, (size_t)b->n_group * sizeof *L->devs);
}

static sf_status setup_shards(sf_runtime *rt, sf_error *err) {
    g_lists L;
    memset(&L, 0, sizeof L);
    /* groups this rank takes part in */
    rt->group_of = malloc((size_t)(rt->n_ops ? rt->n_ops : 1) * sizeof *rt->group_of);
    rt->groups = calloc((size_t)(rt->n_ops ? rt->n_ops : 1), sizeof *rt->groups);
    if (!rt->group_of || !rt->groups) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++) rt->group_of[op] = -1;
    for (int i = 0; i < rt->n_parts; i++) {
        int ow = sf_taskgraph_owner(rt->tg, rt->parts[i].op);
        if (ow < 0) continue;
        if (rt->group_of[ow] < 0) {
            rt->group_of[ow] = rt->n_groups;
            rt->groups[rt->n_groups++] =
                (rt_group){.owner = ow, .n = sf_graph_op(rt->g, ow)->n_params};
        }
        rt->parts[i].group = rt->group_of[ow];
    }
    /* every shard of every group with its steps, as every rank sees them */
    for (int ow = 0; ow < rt->n_ops; ow++) {
        if (sf_taskgraph_owner(rt->tg, ow) != ow) continue;
        sf_tg_sync sy;
        sf_tg_steps ss;
        if (sf_taskgraph_sync_steps(rt->tg, ow, &sy, &ss) != SF_OK) goto oom;
        for (int s = 0; s < sy.n_shards; s++) {
            const sf_tg_shard *sh = &sy.shards[s];
            if (g_grow((void **)&L.gs, &L.cap, L.n + 1, sizeof *L.gs)) goto oom;
            int key = rt->n_ops, top = -1;
            int e0 = sy.ent_start[sh->dev_start], e1 = sy.ent_start[sh->dev_start + sh->n_devs];
            for (int e = e0; e < e1; e++) {
                if (sy.ents[e].op < key) key = sy.ents[e].op;
                if (sy.ents[e].op > top) top = sy.ents[e].op;
            }
            int ds = g_push_devs(&L, sy.devs + sh->dev_start, sh->n_devs);
            int q0 = ss.shard_start[s], q1 = ss.shard_start[s + 1];
            if (ds < 0 || g_grow((void **)&L.st, &L.cap_st, L.n_st + (q1 - q0), sizeof *L.st))
                goto oom;
            int step0 = L.n_st;
            for (int q = q0; q < q1; q++) {
                sf_tg_step st = ss.steps[q];
                if (st.kind == SF_STEP_COPY) continue; /* the runtime's own packing */
                if (st.group >= 0 &&
                    (st.group = g_push_devs(&L, ss.devs + st.group, st.n_group)) < 0)
                    goto oom;
                /* a reduce-scatter that its all-gather follows alone runs as one
                 * all-reduce (MPI_Allreduce: what calibrate measured) */
                if (L.n_st > step0 && st.n_deps == 1 && ss.deps[st.dep] == q - 1 &&
                    fuses(&L, &L.st[L.n_st - 1], &st, 1)) {
                    L.st[L.n_st - 1].kind = SF_STEP_ALL_REDUCE;
                    continue;
                }
                L.st[L.n_st++] = st;
            }
            L.gs[L.n++] = (g_shard){.owner = ow,
                                    .idx = s,
                                    .key_op = key,
                                    .max_op = top,
                                    .n_devs = sh->n_devs,
                                    .dev_start = ds,
                                    .rep_op = sh->rep_op,
                                    .rep_part = sh->rep_part,
                                    .numel = sh->numel,
                                    .step0 = step0,
                                    .n_steps = L.n_st - step0};
        }
    }
    if (L.n > 1) qsort(L.gs, (size_t)L.n, sizeof *L.gs, g_shard_cmp);
    rt->shards = calloc((size_t)(L.n ? L.n : 1), sizeof *rt->shards);
    rt->sync_steps = calloc((size_t)(L.n_st ? L.n_st : 1), sizeof *rt->sync_steps);
    rt->pending = calloc((size_t)(L.n_st ? L.n_st : 1), sizeof *rt->pending);
    if (!rt->shards || !rt->sync_steps || !rt->pending) goto oom;
    /* In the global order: the communication groups (made by their members as
     * every rank meets them), message tags above the activations' (which are
     * below 2^29), and this rank's shards with the steps it takes part in. */
    int tag = 1 << 29;
    for (int i = 0; i < L.n; i++) {
        const g_shard *g = &L.gs[i];
        const int16_t *d = L.devs + g->dev_start;
        int member = in_devs(d, g->n_devs, rt->rank);
        rt_shard *sh = member ? &rt->shards[rt->n_shards] : NULL;
        if (sh) {
            sh->global = i;
            sh->owner = g->owner;
            sh->group = rt->group_of[g->owner];
            sh->key_op = g->key_op;
            sh->max_op = g->max_op;
            sh->n_devs = g->n_devs;
            sh->comm = g->n_devs > 1;
            sh->step0 = rt->n_sync_steps;
            sh->req = -1;
            sh->zero = sf_strategy_get(rt->s, g->owner)->zero;
            sh->zgroup = -1;
            const sf_op *rop = sf_graph_op(rt->g, g->rep_op);
            sh->n_slices = sf_op_weight_slices(
                rop, &sf_taskgraph_tiles(rt->tg, g->rep_op)[g->rep_part], sh->sl);
            int64_t m = 0;
            for (int q = 0; q < sh->n_slices; q++) m += sh->sl[q].len * sh->sl[q].count;
            sh->numel = m;
            if (sh->group < 0) {
                g_lists_free(&L);
                return sf_error_set(err, SF_ERR_INTERNAL,
                                    "shard of '%s' on rank %d without its group", rop->name,
                                    rt->rank);
            }
        }
        for (int q = g->step0; q < g->step0 + g->n_steps; q++) {
            const sf_tg_step *st = &L.st[q];
            rt_step rs = {.kind = st->kind,
                          .payload = st->payload,
                          .group = -1,
                          .peer = -1,
                          .numel = st->numel,
                          .offset = st->offset};
            int mine = 0;
            if (st->kind == SF_STEP_P2P) {
                rs.tag = tag++;
                rs.send = st->dev == rt->rank;
                rs.peer = rs.send ? st->peer : st->dev;
                mine = st->dev == rt->rank || st->peer == rt->rank;
            } else if (st->kind == SF_STEP_UPDATE) {
                mine = st->dev == rt->rank;
            } else {
                int comm = g_comm(rt, &L, st->group, st->n_group);
                if (comm < -1) {
                    g_lists_free(&L);
                    return sf_error_set(err, comm == -2 ? SF_ERR_NOMEM : SF_ERR_IO,
                                        "cannot make a communication group of %d ranks",
                                        st->n_group);
                }
                rs.group = comm;
                mine = comm >= 0;
                if (sh && mine && sh->zero) sh->zgroup = comm;
                /* ZeRO-3's gathers before each pass run from gather_weights */
                if (st->phase != SF_PHASE_SYNC) continue;
            }
            if (sh && mine) rt->sync_steps[rt->n_sync_steps++] = rs;
        }
        if (sh) {
            sh->n_steps = rt->n_sync_steps - sh->step0;
            /* one run of the layout, collectives alone: synced where it lies (a
             * ZeRO shard's reduce-scatter on its gradient, its all-gathers on
             * its weights or state), no packed copy */
            sh->in_place = sh->comm && sf_weight_slices_one_run(sh->sl, sh->n_slices);
            for (int q = 0; q < sh->n_steps; q++)
                if (rt->sync_steps[sh->step0 + q].kind == SF_STEP_P2P) sh->in_place = 0;
            rt->n_shards++;
        }
    }
    g_lists_free(&L);
    return SF_OK;
oom:
    g_lists_free(&L);
    return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
}

/* ZeRO-3's prefetch, as the simulator schedules it (sim_build.c,
 * sim_zero_gate): a shard's forward gather waits for the operator two before
 * its group's first member (along first inputs) and so runs while the one just
 * before computes: here, at the start of the forward of the operator after that
 * gate; its backward gather waits for the backward of the operator two after
 * its last member (along first consumers): here, at the start of the backward
 * of the operator before that gate (with no consumer, at the backward's start). */
static void zero_gates(sf_runtime *rt) {
    for (int i = 0; i < rt->n_shards; i++) {
        rt_shard *sh = &rt->shards[i];
        sh->rs_wait_op = -1;
        for (int op = sh->key_op - 1; op >= 0 && sh->rs_wait_op < 0; op--)
            if (sf_taskgraph_owner(rt->tg, op) >= 0) sh->rs_wait_op = op;
        sh->fgather_op = sh->key_op;
        sh->bgather_op = sh->max_op;
        const int *members;
        int nm = sf_taskgraph_members(rt->tg, sh->owner, &members);
        if (nm < 1) continue;
        const sf_op *m = sf_graph_op(rt->g, members[0]);
        int p = m->n_inputs ? m->inputs[0].op : -1;
        const sf_op *po = p >= 0 ? sf_graph_op(rt->g, p) : NULL;
        int gate = po && po->n_inputs ? po->inputs[0].op : p;
        if (gate >= 0 && gate + 1 < sh->fgather_op) sh->fgather_op = gate + 1;
        int last = members[nm - 1], at = last;
        for (int k = 0; k < 2; k++) {
            const sf_tensor_ref *cons;
            if (sf_taskgraph_consumers(rt->tg, at, &cons) < 1) break;
            at = cons[0].op;
        }
        if (at == last)
            sh->bgather_op = rt->n_ops - 1;
        else if (at - 1 > sh->bgather_op)
            sh->bgather_op = at - 1;
    }
}

/* Every batch norm's running statistics, on every rank, at PyTorch's initial
 * values (mean 0, variance 1); allocated here, so that a step allocates nothing. */
static sf_status setup_buffers(sf_runtime *rt, sf_error *err) {
    rt->bn_chan = malloc((size_t)(rt->n_ops ? rt->n_ops : 1) * sizeof *rt->bn_chan);
    if (!rt->bn_chan) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int op = 0; op < rt->n_ops; op++) {
        const sf_op *o = sf_graph_op(rt->g, op);
        rt->bn_chan[op] = o->type == SF_OP_BATCHNORM ? rt->bn_n : -1;
        if (o->type == SF_OP_BATCHNORM) rt->bn_n += sf_buffers_numel(o) / 2;
    }
    if (!rt->bn_n) return SF_OK;
    rt->bn_running = malloc((size_t)(2 * rt->bn_n) * sizeof *rt->bn_running);
    rt->bn_sums = calloc((size_t)(3 * rt->bn_n), sizeof *rt->bn_sums);
    if (!rt->bn_running || !rt->bn_sums) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return sf_runtime_set_buffers(rt, NULL, err);
}

/* After a step's backward: the batch's sums of every batch norm added over
 * every rank (ranks without a part of it add zeros), then the running
 * statistics updated alike on all. Collective; nothing for a graph without
 * batch norm. */
static sf_status update_buffers(sf_runtime *rt, sf_error *err) {
    if (!rt->bn_n) return SF_OK;
    sf_status cs = rt->c->vt->sum_doubles(rt->c, rt->bn_sums, (int)(3 * rt->bn_n));
    if (cs != SF_OK) return sf_error_set(err, cs, "rank %d: communication failed", rt->rank);
    for (int op = 0; op < rt->n_ops; op++) {
        if (rt->bn_chan[op] < 0) continue;
        int64_t c0 = rt->bn_chan[op], ch = sf_buffers_numel(sf_graph_op(rt->g, op)) / 2;
        sf_batchnorm_update_running(ch, rt->bn_sums + 3 * c0, rt->bn_running + 2 * c0);
    }
    return SF_OK;
}

/* Whether part p is recomputed: its operator is flagged (sf_config.recompute),
 * has a backward, and holds no partial sums (whose reductions would have to
 * run again). */
static int rc_flagged(const sf_runtime *rt, const rt_part *p) {
    if (!sf_strategy_get(rt->s, p->op)->recompute || !op_has_bwd(p->o)) return 0;
    for (int i = 0; i < rt->n_reds; i++)
        if (rt->reds[i].prod_op == p->op) return 0;
    return 1;
}

/* Recomputation (sf_config.recompute), the simulator's rules: a flagged part
 * keeps each output until the forward of its consumers that are flagged and
 * the backward of those that are not (what it saves beyond that is dropped at
 * once: an output nobody reads dies with its forward); before a backward that
 * needs it (its own, or a local consumer's reading it in place) it re-runs its
 * forward kernel on its inputs (copies and received regions are kept to the
 * consumer's backward, so nothing is sent again; a flagged local producer read
 * in place is recomputed first, in forward order), and the recomputed output
 * lives to its own backward. Walks the backward points as a step does, once. */
static sf_status setup_recompute(sf_runtime *rt, sf_error *err) {
    int n = rt->n_parts;
    int32_t *end1 = malloc((size_t)(n ? n : 1) * sizeof *end1);
    int32_t *again = malloc((size_t)(n ? n : 1) * sizeof *again);
    rt_part **stack = malloc((size_t)(n ? n : 1) * sizeof *stack);
    rt->rc_start = calloc((size_t)rt->n_ops + 1, sizeof *rt->rc_start);
    rt->rc_list = malloc((size_t)(n ? n : 1) * sizeof *rt->rc_list);
    sf_status st = SF_OK;
    if (!end1 || !again || !stack || !rt->rc_start || !rt->rc_list) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        rt_part *p = &rt->parts[i];
        again[i] = -1;
        end1[i] = pt_f(rt, p->op);
        if (!rc_flagged(rt, p)) continue;
        for (int q = 0; q < rt->n_links; q++) {
            const rt_link *l = &rt->links[q];
            if (l->prod != p || l->peer >= 0 || !l->cons) continue;
            int32_t use = rc_flagged(rt, l->cons) ? pt_f(rt, l->cons_op) : pt_b(rt, l->cons_op);
            if (use > end1[i]) end1[i] = use;
        }
    }
    int nl = 0;
    for (int op = rt->n_ops - 1; op >= 0; op--) {
        int32_t at = pt_b(rt, op);
        rt->rc_start[op] = nl; /* filled in backward order, turned below */
        int ns = 0;
        /* the parts whose kernels run here: this operator's, then what they need */
        for (int i = 0; i < n; i++)
            if (rt->parts[i].op == op && op_has_bwd(rt->parts[i].o)) stack[ns++] = &rt->parts[i];
        int first = nl;
        for (int k = 0; k < ns; k++) {
            rt_part *q = stack[k];
            int qi = (int)(q - rt->parts);
            if (k >= 0 && rc_flagged(rt, q) && again[qi] < 0 && end1[qi] < at) {
                again[qi] = at;
                rt->rc_list[nl++] = q;
            } else if (q->op != op) {
                continue; /* alive: its inputs are not needed */
            }
            for (int c = 0; c < q->n_cons; c++) {
                const rt_link *l = rt->cons_links[q->cons_start + c];
                if (!l->alias || !l->prod || l->red >= 0) continue;
                int pi = (int)(l->prod - rt->parts);
                if (rc_flagged(rt, l->prod) && again[pi] < 0 && end1[pi] < at) {
                    int dup = 0;
                    for (int z = 0; z < ns; z++) dup |= stack[z] == l->prod;
                    if (!dup && ns < n) stack[ns++] = l->prod;
                }
            }
        }
        /* in forward order: operator, then part */
        for (int a = first; a < nl; a++)
            for (int b = a + 1; b < nl; b++) {
                const rt_part *x = rt->rc_list[a], *y = rt->rc_list[b];
                if (y->op < x->op || (y->op == x->op && y->part < x->part)) {
                    rt->rc_list[a] = rt->rc_list[b];
                    rt->rc_list[b] = (rt_part *)x;
                }
            }
        /* their forward kernels run at this point: its workspace fits them */
        for (int a = first; a < nl; a++) {
            size_t w = sf_kernel_workspace_bytes(rt->rc_list[a]->o, &rt->rc_list[a]->tile, 0);
            if (w > rt->ws_bytes[at]) rt->ws_bytes[at] = w;
        }
    }
    /* rc_start by operator: the lists were made from the highest operator down */
    {
        int *cnt = calloc((size_t)rt->n_ops + 1, sizeof *cnt);
        rt_part **tmp = malloc((size_t)(nl ? nl : 1) * sizeof *tmp);
        if (!cnt || !tmp) {
            free(cnt);
            free(tmp);
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int op = rt->n_ops - 1; op >= 0; op--) {
            int from = rt->rc_start[op], to = op > 0 ? rt->rc_start[op - 1] : nl;
            if (op == rt->n_ops - 1) from = 0;
            cnt[op] = to - from;
        }
        /* rebuild: rc_start[op] .. rc_start[op + 1] */
        int at2 = 0, from = 0;
        int *starts = calloc((size_t)rt->n_ops + 1, sizeof *starts);
        if (!starts) {
            free(cnt);
            free(tmp);
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        int *src = calloc((size_t)rt->n_ops + 1, sizeof *src);
        if (!src) {
            free(cnt);
            free(tmp);
            free(starts);
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int op = rt->n_ops - 1; op >= 0; op--) {
            src[op] = from;
            from += cnt[op];
        }
        for (int op = 0; op < rt->n_ops; op++) {
            starts[op] = at2;
            for (int c = 0; c < cnt[op]; c++) tmp[at2++] = rt->rc_list[src[op] + c];
        }
        starts[rt->n_ops] = at2;
        memcpy(rt->rc_list, tmp, (size_t)nl * sizeof *tmp);
        memcpy(rt->rc_start, starts, ((size_t)rt->n_ops + 1) * sizeof *starts);
        free(cnt);
        free(tmp);
        free(starts);
        free(src);
    }
    /* the lives of the flagged parts' outputs */
    for (int i = 0; i < n && st == SF_OK; i++) {
        rt_part *p = &rt->parts[i];
        if (!rc_flagged(rt, p)) continue;
        p->out_life = calloc((size_t)p->o->n_outputs, sizeof *p->out_life);
        if (!p->out_life) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            break;
        }
        for (int k = 0; k < p->o->n_outputs; k++) {
            int32_t e = pt_f(rt, p->op);
            for (int q = 0; q < rt->n_links; q++) {
                const rt_link *l = &rt->links[q];
                if (l->prod != p || l->out != k || l->peer >= 0 || !l->cons) continue;
                int32_t use = rc_flagged(rt, l->cons) ? pt_f(rt, l->cons_op) : pt_b(rt, l->cons_op);
                if (use > e) e = use;
            }
            p->out_life[k] = life1(pt_f(rt, p->op), e, 0);
            int32_t r = again[i] >= 0 ? again[i] : pt_b(rt, p->op);
            if (again[i] >= 0 || e < pt_b(rt, p->op)) life_add(&p->out_life[k], r, pt_b(rt, p->op));
        }
    }
done:
    free(end1);
    free(again);
    free(stack);
    return st;
}

sf_runtime *sf_runtime_new(const sf_graph *g, const sf_strategy *s, sf_comm *c,
                           const sf_runtime_options *o, sf_error *err) {
    sf_runtime *rt = calloc(1, sizeof *rt);
    sf_status st = SF_OK;
    if (!rt) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    } else {
        rt->g = g;
        rt->c = c;
        rt->rank = sf_comm_rank(c);
        rt->n_ops = rt->user_ops = sf_graph_num_ops(g);
        if (o)
            rt->o = *o;
        else
            sf_runtime_options_default(&rt->o);
        if (sf_strategy_pipeline(s))
            st = setup_pipe(rt, g, s, err);
        else
            rt->s = sf_strategy_clone(s);
        rt->bulk = rt->o.sync == SF_SYNC_BULK || rt->pipe_m;
        if (st == SF_OK) rt->tg = sf_taskgraph_new(rt->g, sf_comm_size(c), err);
        if (st == SF_OK && (!rt->s || !rt->tg)) st = err && err->code ? err->code : SF_ERR_NOMEM;
        int adam = rt->o.optimizer != SF_OPTIMIZER_SGD;
        if (st == SF_OK &&
            ((unsigned)rt->o.optimizer >= SF_OPTIMIZER_COUNT ||
             (adam && !(rt->o.beta1 >= 0 && rt->o.beta1 < 1)) ||
             (adam && !(rt->o.beta2 >= 0 && rt->o.beta2 < 1)) || (adam && !(rt->o.eps > 0))))
            st = sf_error_set(err, SF_ERR_INVALID,
                              "invalid optimizer options: kind %d, betas %g and %g (each in [0, "
                              "1)), eps %g (> 0)",
                              (int)rt->o.optimizer, rt->o.beta1, rt->o.beta2, rt->o.eps);
        /* a tie split two ways would give shards that overlap in part */
        if (st == SF_OK) st = sf_strategy_check_ties(rt->s, rt->g, 0, NULL, NULL, err);
        if (st == SF_OK) st = setup_seq(rt, sf_strategy_pipeline(s), g, err);
    }
    if (st == SF_OK) {
        sf_taskgraph_set_strategy(rt->tg, rt->s);
        sf_taskgraph_set_comm(rt->tg, rt->o.machine, rt->o.scheme);
        for (int op = 0; op < rt->n_ops && st == SF_OK; op++)
            if (sf_taskgraph_set_tiles(rt->tg, op) != SF_OK)
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        if (st == SF_OK) st = setup_parts(rt, err);
    }
    /* agree before anything collective: a bad strategy stops every rank here */
    st = sf_comm_agree(c, st, err);
    if (st == SF_OK) st = setup_links(rt, err);
    if (st == SF_OK) st = setup_inner(rt, err);
    if (st == SF_OK) st = setup_shards(rt, err);
    if (st == SF_OK) st = setup_ranges(rt, err);
    if (st == SF_OK) zero_gates(rt);
    if (st == SF_OK) st = setup_buffers(rt, err);
    if (st == SF_OK) {
        rt->cap_ev = 2 * rt->n_parts + 2 * rt->n_recv + 2 * rt->n_send + 4 * rt->n_shards +
                     2 * rt->n_links + 8;
        for (int i = 0; i < rt->n_reds; i++)
            rt->cap_ev += 2 * rt->reds[i].R + 2 * rt->reds[i].n_links + 4;
        rt->cap_ev += 2 * rt->n_parts + 2 * rt->n_inner; /* the classes' phases, all-reduces */
        rt->ev = malloc((size_t)rt->cap_ev * sizeof *rt->ev);
        rt->n_points = pt_end(rt) + 1;
        rt->cap_fwd_wait = rt->n_send + rt->cap_red_pending + 1;
        rt->fwd_wait_req = malloc((size_t)rt->cap_fwd_wait * sizeof *rt->fwd_wait_req);
        rt->fwd_wait_op = malloc((size_t)rt->cap_fwd_wait * sizeof *rt->fwd_wait_op);
        /* the groups' buffers, in full layout: the kernels' addressing; a rank
         * touches only its shards' elements (calloc leaves the rest of a large
         * one untouched pages), and the plan counts those (hold_weights) */
        int gok = rt->ev && rt->fwd_wait_req && rt->fwd_wait_op;
        for (int i = 0; i < rt->n_groups && gok; i++) {
            rt_group *gr = &rt->groups[i];
            size_t n = (size_t)(gr->n ? gr->n : 1);
            gr->w = calloc(n, sizeof(float));
            gr->g = calloc(n, sizeof(float));
            gr->v = calloc(n, sizeof(float));
            gr->v2 = rt->o.optimizer == SF_OPTIMIZER_SGD ? NULL : calloc(n, sizeof(float));
            gok = gr->w && gr->g && gr->v && (gr->v2 || rt->o.optimizer == SF_OPTIMIZER_SGD);
        }
        if (gok) st = setup_recompute(rt, err);
        if (gok && st == SF_OK) {
            rt->sizing = 1;
            place_tensors(rt);
            gok = rt->sizing > 0 && plan_memory(rt) == 0;
        }
        rt->block = gok && st == SF_OK
                        ? aligned_alloc(ALIGN, (rt->block_bytes + ALIGN - 1) / ALIGN * ALIGN)
                        : NULL;
        if (st == SF_OK && !rt->block) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory reserving %.0f MiB",
                              (double)rt->block_bytes / 1048576.0);
        } else if (st == SF_OK) {
            memset(rt->block, 0, rt->block_bytes);
            rt->sizing = 0;
            rt->rec_at = 0;
            place_tensors(rt);
            if (plan_zeroing(rt)) st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        }
    }
    st = sf_comm_agree(c, st, err);
    if (st != SF_OK) {
        sf_runtime_free(rt);
        return NULL;
    }
    return rt;
}

void sf_runtime_free(sf_runtime *rt) {
    if (!rt) return;
    for (int i = 0; i < rt->n_parts; i++) {
        rt_part *p = &rt->parts[i];
        free(p->out_life);
        free(p->out);
        free(p->gout);
        free(p->out_tile);
        free(p->in);
        free(p->gin);
        free(p->in_region);
        free(p->in_alias);
    }
    for (int i = 0; i < rt->n_reds; i++) {
        free(rt->reds[i].mine);
        free(rt->reds[i].devs);
        free(rt->reds[i].tags);
        free(rt->reds[i].chunks);
    }
    free(rt->reds);
    free(rt->inner);
    free(rt->red_order);
    free(rt->red_links);
    for (int i = 0; i < rt->n_sets; i++) free(rt->sets[i].devs);
    free(rt->sets);
    free(rt->parts);
    free(rt->part_of);
    free(rt->part_start);
    free(rt->links);
    free(rt->cons_links);
    free(rt->prod_links);
    free(rt->recv_links);
    free(rt->send_links);
    for (int i = 0; i < rt->n_groups; i++) {
        free(rt->groups[i].w);
        free(rt->groups[i].g);
        free(rt->groups[i].v);
        free(rt->groups[i].v2);
    }
    free(rt->groups);
    free(rt->group_of);
    free(rt->recs);
    free(rt->zl);
    free(rt->zl_start);
    free(rt->point_bytes);
    free(rt->fwd_wait_req);
    free(rt->fwd_wait_op);
    free(rt->ws_at);
    free(rt->ws_bytes);
    free(rt->rc_start);
    free(rt->rc_list);
    free(rt->shards);
    free(rt->sync_steps);
    free(rt->pending);
    free(rt->bn_chan);
    free(rt->bn_running);
    free(rt->bn_sums);
    free(rt->block);
    free(rt->ev);
    free(rt->seq);
    free(rt->fpt);
    free(rt->bpt);
    free(rt->lp_start);
    free(rt->lr_start);
    free(rt->mb_inputs);
    free(rt->mb_labels);
    free(rt->mb_off);
    sf_taskgraph_free(rt->tg);
    sf_strategy_free(rt->s);
    sf_graph_free(rt->gu);
    free(rt);
}

/* ---- a step ------------------------------------------------------------------ */

static void event(sf_runtime *rt, sf_rt_event_kind k, double t0, int op, int part, int peer,
                  int64_t bytes) {
    if (rt->n_ev >= rt->cap_ev) return;
    rt->ev[rt->n_ev++] = (sf_rt_event){.t0_s = t0 - rt->t_begin,
                                       .t1_s = sf_now_s() - rt->t_begin,
                                       .op = op,
                                       .part = part,
                                       .peer = peer,
                                       .kind = (uint8_t)k,
                                       .bytes = bytes};
}

/* A copy of link l's region made for part p. */
static void copy_event(sf_runtime *rt, double t0, const rt_part *p, const rt_link *l) {
    event(rt, SF_RT_COPY, t0, p->op, p->part, -1, l->numel * 4);
}

#define COMM(call, what)                                                                           \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ < 0)                                                                               \
            return sf_error_set(err, (sf_status)rc_, "rank %d: %s failed", rt->rank, what);        \
    } while (0)

/* The forward messages' receives, posted when a step begins (so that a
 * sender may wait for its send one operator later); a gradient's receive is
 * posted by the producer's backward, just before it waits for it. */
static sf_status post_receives(sf_runtime *rt, sf_error *err) {
    for (int i = 0; i < rt->n_recv; i++) {
        rt_link *l = rt->recv_links[i];
        int id = rt->c->vt->irecv(rt->c, l->fbuf, (size_t)l->numel * 4, l->peer, l->tag);
        COMM(id, "posting a receive");
        l->freq = id;
    }
    return SF_OK;
}

/* A forward send of the entry at position op (request id: without a pipeline
 * the entry is the operator's forward, at position op), waited for once the
 * next entry is done: its buffer lives until then (place_tensors). */
static void fwd_wait_add(sf_runtime *rt, int id, int op) {
    rt->fwd_wait_req[rt->n_fwd_wait] = id;
    rt->fwd_wait_op[rt->n_fwd_wait++] = op;
}

/* Wait for the forward sends of the entries below position op (all with INT_MAX). */
static sf_status fwd_wait(sf_runtime *rt, int op, sf_error *err) {
    int keep = 0;
    for (int i = 0; i < rt->n_fwd_wait; i++) {
        if (rt->fwd_wait_op[i] < op) {
            COMM(rt->c->vt->wait(rt->c, rt->fwd_wait_req[i]), "sending activations");
            continue;
        }
        rt->fwd_wait_req[keep] = rt->fwd_wait_req[i];
        rt->fwd_wait_op[keep++] = rt->fwd_wait_op[i];
    }
    rt->n_fwd_wait = keep;
    return SF_OK;
}

/* Post the receive of the gradient that comes back along link l. */
static sf_status post_grad_recv(sf_runtime *rt, rt_link *l, sf_error *err) {
    int id = rt->c->vt->irecv(rt->c, l->gbuf, (size_t)l->numel * 4, l->peer, l->tag + 1);
    COMM(id, "posting a receive");
    l->greq = id;
    return SF_OK;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Part p's forward (phase: SF_CE_PHASE_*, for a softmax_ce split on its
 * classes) or backward kernel. */
static sf_status run_kernel_phase(sf_runtime *rt, rt_part *p, int backward, int phase, double *loss,
                                  sf_error *err) {
    const sf_op *o = p->o;
    sf_kernel_args a;
    memset(&a, 0, sizeof a);
    a.op = o;
    a.tile = p->tile;
    a.n_inputs = o->n_inputs;
    a.in = (const float *const *)p->in;
    a.in_region = p->in_region;
    a.n_outputs = o->n_outputs;
    a.out = p->out;
    a.weights = p->group >= 0 ? rt->groups[p->group].w : NULL;
    a.workspace = rt->ws_at[rt->cur_point];
    a.workspace_bytes = rt->ws_bytes[rt->cur_point];
    a.seed = mix64(rt->o.seed ^ mix64((uint64_t)rt->steps + 1));
    a.labels = p->labels;
    a.loss = backward || rt->recomputing || phase != SF_CE_PHASE_FULL ? NULL : loss;
    a.eval = rt->eval;
    a.stats = p->inner >= 0 ? rt->inner[p->inner].stats : NULL;
    a.phase = phase;
    if (o->type == SF_OP_SOFTMAX_CE && rt->pipe_m) /* the mean over the whole batch */
        a.mean_rows = sf_shape_numel(&o->in_shapes[0]) /
                      o->in_shapes[0].d[o->in_shapes[0].ndim - 1] * rt->pipe_m;
    if (o->type == SF_OP_BATCHNORM) {
        int64_t c0 = rt->bn_chan[p->op];
        a.running = rt->bn_running + 2 * c0;
        a.bn_sums = backward || rt->eval || rt->recomputing ? NULL : rt->bn_sums + 3 * c0;
    }
    if (backward) {
        a.grad_out = (const float *const *)p->gout;
        a.grad_in = p->gin;
        a.grad_weights = p->group >= 0 ? rt->groups[p->group].g : NULL;
    }
    sf_status st = backward ? sf_kernel_backward(&a, rt->o.fast_kernels)
                            : sf_kernel_forward(&a, rt->o.fast_kernels);
    if (st != SF_OK)
        return sf_error_set(err, st, "operator '%s' part %d: %s kernel failed: %s", o->name,
                            p->part, backward ? "backward" : "forward", sf_status_str(st));
    return SF_OK;
}

static sf_status run_kernel(sf_runtime *rt, rt_part *p, int backward, double *loss, sf_error *err) {
    return run_kernel_phase(rt, p, backward, SF_CE_PHASE_FULL, loss, err);
}

/* Gather part p's inputs: copies of local producers' regions, messages of
 * remote ones (and a softmax_ce's labels, from the batch). */
static sf_status part_inputs(sf_runtime *rt, rt_part *p, const sf_batch *b, sf_error *err) {
    const sf_op *o = p->o;
    for (int i = 0; i < p->n_cons; i++) {
        rt_link *l = rt->cons_links[p->cons_start + i];
        if (l->peer < 0) {
            if (!l->alias) {
                double t0 = sf_now_s();
                const sf_tile *lay;
                const float *src = link_src(rt, l, &lay);
                sf_box_move(src, lay, p->in[l->k], &p->in_region[l->k], &l->region, 0);
                copy_event(rt, t0, p, l);
            }
            continue;
        }
        double t0 = sf_now_s();
        COMM(rt->c->vt->wait(rt->c, l->freq), "receiving activations");
        l->freq = -1;
        event(rt, SF_RT_XFER, t0, p->op, p->part, l->peer, l->numel * 4);
        t0 = sf_now_s();
        sf_box_move(l->fbuf, &l->region, p->in[l->k], &p->in_region[l->k], &l->region, 0);
        copy_event(rt, t0, p, l);
    }
    if (o->type == SF_OP_SOFTMAX_CE) {
        if (!b->labels || !b->labels[p->op])
            return sf_error_set(err, SF_ERR_INVALID, "no labels for '%s'", o->name);
        sf_tile whole = sf_tile_full(&o->out_shapes[0]), rows = p->tile;
        whole.ndim--;
        rows.ndim--;
        sf_box_move(b->labels[p->op], &whole, p->labels, &rows, &rows, 0);
    }
    return SF_OK;
}

/* Send part p's pieces to its remote consumers. */
static sf_status part_outputs(sf_runtime *rt, rt_part *p, sf_error *err) {
    for (int i = 0; i < p->n_prod; i++) {
        rt_link *l = rt->prod_links[p->prod_start + i];
        double t1 = sf_now_s();
        sf_box_move(p->out[l->out], &p->out_tile[l->out], l->fbuf, &l->region, &l->region, 0);
        copy_event(rt, t1, p, l);
        int id = rt->c->vt->isend(rt->c, l->fbuf, (size_t)l->numel * 4, l->peer, l->tag);
        COMM(id, "sending activations");
        fwd_wait_add(rt, id, rt->cur_pos);
    }
    return SF_OK;
}

/* The forward task of part p: gather its inputs, run it, send its pieces. */
static sf_status forward_part(sf_runtime *rt, rt_part *p, const sf_batch *b, double *loss,
                              sf_error *err) {
    const sf_op *o = p->o;
    sf_status st = part_inputs(rt, p, b, err);
    if (st != SF_OK) return st;
    double t0 = sf_now_s();
    if (o->type == SF_OP_INPUT) {
        if (!b->inputs || !b->inputs[p->op])
            return sf_error_set(err, SF_ERR_INVALID, "no data for input '%s'", o->name);
        sf_tile whole = sf_tile_full(&o->out_shapes[0]);
        sf_box_move(b->inputs[p->op], &whole, p->out[0], &p->out_tile[0], &p->out_tile[0], 0);
    } else {
        st = run_kernel(rt, p, 0, loss, err);
        if (st != SF_OK) return st;
    }
    event(rt, SF_RT_FWD, t0, p->op, p->part, -1, 0);
    return part_outputs(rt, p, err);
}

/* ---- softmax_ce split on its classes ----------------------------------------------- */

/* One phase of the statistics of group g (SF_CE_PHASE_MAX or _SUMS) over
 * parts[0 .. n) of its operator on this rank: each part of the group adds its
 * figures into the group's buffer, then the task graph's all-reduce combines
 * the ranks' (each waited for as soon as it is posted, as the partial sums'
 * collectives are: red_forward). */
static sf_status inner_phase(sf_runtime *rt, rt_inner *g, rt_part *parts, int n, int phase,
                             sf_error *err) {
    int64_t R = g->rows;
    float *buf = phase == SF_CE_PHASE_MAX ? g->stats : g->stats + R;
    int64_t len = phase == SF_CE_PHASE_MAX ? R : 2 * R;
    for (int64_t e = 0; e < len; e++) buf[e] = phase == SF_CE_PHASE_MAX ? -INFINITY : 0.0f;
    for (int i = 0; i < n; i++) {
        rt_part *p = &parts[i];
        if (p->inner != (int)(g - rt->inner)) continue;
        double t0 = sf_now_s();
        sf_status st = run_kernel_phase(rt, p, 0, phase, NULL, err);
        if (st != SF_OK) return st;
        event(rt, SF_RT_FWD, t0, p->op, p->part, -1, 0);
    }
    int comm = phase == SF_CE_PHASE_MAX ? g->mcomm : g->scomm;
    if (comm < 0) return SF_OK;
    double t0 = sf_now_s();
    rt->c->defer = 1;
    int id = phase == SF_CE_PHASE_MAX ? rt->c->vt->iallreduce_max(rt->c, buf, len, comm)
                                      : rt->c->vt->iallreduce(rt->c, buf, len, comm);
    sf_status st = id < 0 ? (sf_status)id : rt->c->vt->wait(rt->c, id);
    rt->c->defer = 0;
    if (st != SF_OK)
        return sf_error_set(err, st, "rank %d: the all-reduce of '%s''s row %s failed", rt->rank,
                            sf_graph_op(rt->g, g->op)->name,
                            phase == SF_CE_PHASE_MAX ? "maxima" : "sums");
    event(rt, SF_RT_SYNC, t0, g->op, g->first, -1, len * 4);
    return SF_OK;
}

/* The forward of parts[0 .. n), every part of a softmax_ce split on its classes
 * on this rank: their inputs; per group (in part order), the rows' maxima and
 * then the sums, each combined over the group's parts; then each part's
 * probabilities and loss from them, and its pieces sent. */
static sf_status forward_inner(sf_runtime *rt, rt_part *parts, int n, const sf_batch *b,
                               double *loss, sf_error *err) {
    sf_status st = SF_OK;
    for (int i = 0; i < n && st == SF_OK; i++) st = part_inputs(rt, &parts[i], b, err);
    int g0 = 0;
    while (g0 < rt->n_inner && rt->inner[g0].op != parts[0].op) g0++;
    int g1 = g0;
    while (g1 < rt->n_inner && rt->inner[g1].op == parts[0].op) g1++;
    for (int g = g0; g < g1 && st == SF_OK; g++) {
        st = inner_phase(rt, &rt->inner[g], parts, n, SF_CE_PHASE_MAX, err);
        if (st == SF_OK) st = inner_phase(rt, &rt->inner[g], parts, n, SF_CE_PHASE_SUMS, err);
    }
    for (int i = 0; i < n && st == SF_OK; i++) {
        double t0 = sf_now_s();
        st = run_kernel(rt, &parts[i], 0, loss, err);
        if (st != SF_OK) break;
        event(rt, SF_RT_FWD, t0, parts[i].op, parts[i].part, -1, 0);
        st = part_outputs(rt, &parts[i], err);
    }
    return st;
}

/* The backward task of part p: collect its output gradient, run it, give
 * its input gradients back. */
static sf_status backward_part(sf_runtime *rt, rt_part *p, sf_error *err) {
    for (int i = 0; i < p->n_prod; i++) {
        rt_link *l = rt->prod_links[p->prod_start + i];
        if (!l->grad) continue;
        double t0 = sf_now_s();
        sf_status ps = post_grad_recv(rt, l, err);
        if (ps != SF_OK) return ps;
        COMM(rt->c->vt->wait(rt->c, l->greq), "receiving gradients");
        l->greq = -1;
        event(rt, SF_RT_GRAD, t0, l->cons_op, l->cons_part, l->peer, l->numel * 4);
        t0 = sf_now_s();
        sf_box_move(l->gbuf, &l->region, p->gout[l->out], &p->out_tile[l->out], &l->region, 1);
        copy_event(rt, t0, p, l);
    }
    double t0 = sf_now_s();
    sf_status st = run_kernel(rt, p, 1, NULL, err);
    if (st != SF_OK) return st;
    event(rt, SF_RT_BWD, t0, p->op, p->part, -1, 0);
    for (int i = 0; i < p->n_cons; i++) {
        rt_link *l = rt->cons_links[p->cons_start + i];
        if (!l->grad) continue;
        double t1 = sf_now_s();
        if (l->peer < 0) {
            if (l->alias != 2) {
                const sf_tile *lay;
                float *dst = link_gdst(rt, l, &lay);
                sf_box_move(p->gin[l->k], &p->in_region[l->k], dst, lay, &l->region, 1);
                copy_event(rt, t1, p, l);
            }
            continue;
        }
        sf_box_move(p->gin[l->k], &p->in_region[l->k], l->gbuf, &l->region, &l->region, 0);
        copy_event(rt, t1, p, l);
        int id = rt->c->vt->isend(rt->c, l->gbuf, (size_t)l->numel * 4, l->peer, l->tag + 1);
        COMM(id, "sending gradients");
        l->greq = id;
    }
    return SF_OK;
}

/* ---- partial sums -------------------------------------------------------------- */

/* Wait for request id of reduction r's step (an event of kind k, from peer). */
static sf_status red_wait(sf_runtime *rt, const rt_red *r, int id, sf_rt_event_kind k, int peer,
                          double t0, sf_error *err) {
    COMM(id, "posting a partial sums' reduction");
    COMM(rt->c->vt->wait(rt->c, id), "reducing partial sums");
    event(rt, k, t0, r->prod_op, 0, peer, r->numel * 4);
    return SF_OK;
}

/* The forward steps of reduction r, after its producer's parts on this rank:
 * the partial sums of this rank's parts go into buf (in the collective's
 * layout: a reduce-scatter's chunks in position order), the step runs, and the
 * remote pairs it sources are sent from the result. */
static sf_status red_forward_steps(sf_runtime *rt, rt_red *r, sf_error *err);

/* Each collective of a reduction is waited for as soon as it is posted, so it
 * may run blocking (comm_impl.h, defer: MPI's tuned algorithms, where each rank
 * has its core). */
static sf_status red_forward(sf_runtime *rt, rt_red *r, sf_error *err) {
    rt->c->defer = 1;
    sf_status st = red_forward_steps(rt, r, err);
    rt->c->defer = 0;
    return st;
}

static sf_status red_forward_steps(sf_runtime *rt, rt_red *r, sf_error *err) {
    double t0 = sf_now_s();
    sf_status st = SF_OK;
    if (r->kind == SF_REDUCE_ONE) {
        for (int q = 0; q < r->R && st == SF_OK; q++) {
            const rt_part *p = r->mine[q];
            if (r->root && p) { /* a part on the first part's rank: added here */
                sf_box_move(p->out[r->out], &p->out_tile[r->out], r->buf, &r->piece, &r->piece,
                            q > 0);
            } else if (r->root && q > 0 && r->tags[q] >= 0) {
                int id =
                    rt->c->vt->irecv(rt->c, r->rbuf, (size_t)r->numel * 4, r->devs[q], r->tags[q]);
                st = red_wait(rt, r, id, SF_RT_XFER, r->devs[q], t0, err);
                for (int64_t e = 0; e < r->numel && st == SF_OK; e++) r->buf[e] += r->rbuf[e];
                t0 = sf_now_s();
            } else if (p) { /* a part elsewhere: its partial sum to the first part's rank */
                int id = rt->c->vt->isend(rt->c, p->out[r->out], (size_t)r->numel * 4, r->d0,
                                          r->tags[q]);
                COMM(id, "sending partial sums");
                fwd_wait_add(rt, id, rt->cur_pos);
            }
        }
    } else {
        const rt_part *p = r->mine[r->pos];
        if (r->kind == SF_REDUCE_ALL) {
            if (r->buf != p->out[r->out])
                memcpy(r->buf, p->out[r->out], (size_t)r->numel * sizeof *r->buf);
        } else {
            for (int q = 0; q < r->R; q++) {
                int64_t off, len;
                sf_tg_chunk(r->numel, r->R, q, &off, &len);
                sf_box_move(p->out[r->out], &p->out_tile[r->out], r->buf + off, &r->chunks[q],
                            &r->chunks[q], 0);
            }
        }
        int id = r->kind == SF_REDUCE_ALL
                     ? rt->c->vt->iallreduce(rt->c, r->buf, r->numel, r->fcomm)
                     : rt->c->vt->ireduce_scatter(rt->c, r->buf, r->numel, r->fcomm);
        st = red_wait(rt, r, id, SF_RT_SYNC, -1, t0, err);
    }
    for (int i = 0; i < r->n_links && st == SF_OK; i++) {
        rt_link *l = rt->red_links[r->link_start + i];
        double t1 = sf_now_s();
        sf_box_move(r->buf + r->off, &r->lay, l->fbuf, &l->region, &l->region, 0);
        copy_event(rt, t1, l->prod, l);
        int id = rt->c->vt->isend(rt->c, l->fbuf, (size_t)l->numel * 4, l->peer, l->tag);
        COMM(id, "sending activations");
        fwd_wait_add(rt, id, rt->cur_pos);
    }
    return st;
}

/* The backward steps of reduction r, before its producer's parts on this
 * rank: the gradients of the remote pairs it sourced join gbuf (the local
 * ones are there already), the dual step makes it the gradient of the sum,
 * and every part of the group here adds it to its output gradient. */
static sf_status red_backward_steps(sf_runtime *rt, rt_red *r, sf_error *err);

static sf_status red_backward(sf_runtime *rt, rt_red *r, sf_error *err) {
    rt->c->defer = 1;
    sf_status st = red_backward_steps(rt, r, err);
    rt->c->defer = 0;
    return st;
}

static sf_status red_backward_steps(sf_runtime *rt, rt_red *r, sf_error *err) {
    for (int i = 0; i < r->n_links; i++) {
        rt_link *l = rt->red_links[r->link_start + i];
        if (!l->grad) continue;
        double t0 = sf_now_s();
        sf_status ps = post_grad_recv(rt, l, err);
        if (ps != SF_OK) return ps;
        COMM(rt->c->vt->wait(rt->c, l->greq), "receiving gradients");
        l->greq = -1;
        event(rt, SF_RT_GRAD, t0, l->cons_op, l->cons_part, l->peer, l->numel * 4);
        sf_box_move(l->gbuf, &l->region, r->gbuf + r->off, &r->lay, &l->region, 1);
    }
    double t0 = sf_now_s();
    sf_status st = SF_OK;
    if (r->kind == SF_REDUCE_ALL) {
        st = red_wait(rt, r, rt->c->vt->iallreduce(rt->c, r->gbuf, r->numel, r->bcomm), SF_RT_SYNC,
                      -1, t0, err);
    } else if (r->kind == SF_REDUCE_SCATTER) {
        st = red_wait(rt, r, rt->c->vt->iallgather(rt->c, r->gbuf, r->numel, r->bcomm), SF_RT_SYNC,
                      -1, t0, err);
    } else if (r->bcomm >= 0) {
        st = red_wait(rt, r, rt->c->vt->ibcast(rt->c, r->gbuf, r->numel, r->bcomm), SF_RT_SYNC, -1,
                      t0, err);
    }
    for (int q = 0; q < r->R && st == SF_OK; q++) {
        rt_part *p = r->mine[q];
        if (!p) continue;
        if (r->kind != SF_REDUCE_SCATTER) {
            sf_box_move(r->gbuf, &r->piece, p->gout[r->out], &p->out_tile[r->out], &r->piece, 1);
            continue;
        }
        for (int c = 0; c < r->R; c++) {
            int64_t off, len;
            sf_tg_chunk(r->numel, r->R, c, &off, &len);
            sf_box_move(r->gbuf + off, &r->chunks[c], p->gout[r->out], &p->out_tile[r->out],
                        &r->chunks[c], 1);
        }
    }
    return st;
}

/* Where shard sh's collectives run on `full` (a group's buffer): in place
 * when the shard is one run of the layout, else in its packed buffer. */
static float *shard_base(const sf_runtime *rt, const rt_shard *sh, const float *full) {
    (void)rt;
    return sh->in_place ? (float *)full + sh->sl[0].offset : sh->buf;
}

/* Post step q of shard sh (a request in sh->req; none for an update). */
static sf_status post_step(sf_runtime *rt, rt_shard *sh, sf_error *err) {
    const rt_step *st = &rt->sync_steps[sh->step0 + sh->cur];
    const rt_group *gr = &rt->groups[sh->group];
    float *b = shard_base(rt, sh, st->payload == SF_PAYLOAD_WEIGHTS ? gr->w : gr->g) + st->offset;
    int id = -1;
    switch ((sf_tg_step_kind)st->kind) {
    case SF_STEP_ALL_REDUCE: id = rt->c->vt->iallreduce(rt->c, b, st->numel, st->group); break;
    case SF_STEP_REDUCE_SCATTER:
        id = rt->c->vt->ireduce_scatter(rt->c, b, st->numel, st->group);
        break;
    case SF_STEP_ALL_GATHER: id = rt->c->vt->iallgather(rt->c, b, st->numel, st->group); break;
    case SF_STEP_P2P: {
        size_t bytes = (size_t)st->numel * sizeof(float);
        if (st->send)
            id = rt->c->vt->isend(rt->c, sh->buf, bytes, st->peer, st->tag);
        else
            id = rt->c->vt->irecv(rt->c, st->payload == SF_PAYLOAD_GRAD ? sh->rbuf : sh->buf, bytes,
                                  st->peer, st->tag);
        break;
    }
    case SF_STEP_UPDATE: return SF_OK;
    case SF_STEP_BROADCAST:
    case SF_STEP_COPY:
    case SF_STEP_KIND_COUNT:
        return sf_error_set(err, SF_ERR_UNSUPPORTED, "rank %d: no runtime for a %s step", rt->rank,
                            st->kind == SF_STEP_BROADCAST ? "broadcast" : "copy");
    }
    COMM(id, "posting a gradient sync");
    sh->req = id;
    return SF_OK;
}

/* Start shard sh's sync, when its gradients on this rank are done: pack them
 * into one buffer and post its first step. */
static sf_status post_sync(sf_runtime *rt, rt_shard *sh, sf_error *err) {
    if (!sh->comm || sh->n_steps == 0) return SF_OK;
    if (!sh->in_place) {
        double t0 = sf_now_s();
        slices_move(sh, rt->groups[sh->group].g, sh->buf, 1);
        event(rt, SF_RT_COPY, t0, sh->owner, sh->global, -1, sh->numel * 4);
    }
    /* a collective that would only run inside its wait is left to finish_sync,
     * which runs it there, blocking (comm_impl.h, can_defer) */
    const rt_step *st = &rt->sync_steps[sh->step0 + sh->cur];
    if (sh->zero >= SF_ZERO_GRADIENTS && st->kind == SF_STEP_REDUCE_SCATTER &&
        !rt->bulk) {
        /* ZeRO-2/3: the reduce-scatter is waited for once the next operator's
         * backward is done (rs_wait), so that the rest of the gradient is dead
         * from there on (what the plan counts: hold_weights) */
        rt->c->defer = 1;
        sf_status ps = post_step(rt, sh, err);
        rt->c->defer = 0;
        sh->rs_t0 = sf_now_s();
        return ps;
    }
    if (rt->c->can_defer && st->kind != SF_STEP_P2P) return SF_OK;
    return post_step(rt, sh, err);
}

/* The optimizer's step (sf_optimizer_step: SGD with momentum and weight
 * decay, Adam or AdamW) on the len elements of the shard's packed layout
 * from off (all of them, or under ZeRO this rank's chunk), which also zeroes their
 * gradient for the next step: the kernels of this rank write gradients only
 * into the elements of the shards it holds (each part's weight tile is one
 * shard's), so this replaces a memset of every group in full layout at each
 * step (mlp: 80 MB a rank) by one store in a loop that streams the same
 * memory anyway. The block starts zeroed. Adam's step count is the step this
 * is part of, from 1 (rt->steps counts the finished ones). */
static void update_shard(sf_runtime *rt, rt_shard *sh, int64_t off, int64_t len) {
    rt_group *gr = &rt->groups[sh->group];
    sf_optimizer opt = {.kind = rt->o.optimizer,
                        .lr = rt->o.lr,
                        .momentum = rt->o.momentum,
                        .beta1 = rt->o.beta1,
                        .beta2 = rt->o.beta2,
                        .eps = rt->o.eps,
                        .weight_decay = rt->o.weight_decay};
    int64_t t = rt->steps + 1, pos = 0, end = off + len;
    for (int i = 0; i < sh->n_slices; i++) {
        const sf_weight_slice *s = &sh->sl[i];
        for (int64_t r = 0; r < s->count; r++, pos += s->len) {
            int64_t lo = pos > off ? pos : off, hi = pos + s->len < end ? pos + s->len : end;
            if (lo >= hi) continue;
            int64_t at = s->offset + r * s->stride + (lo - pos);
            sf_optimizer_step(&opt, t, gr->w + at, gr->g + at, gr->v + at,
                              gr->v2 ? gr->v2 + at : NULL, hi - lo);
        }
    }
}

/* Zero the gradient of a shard this rank does not update (a parameter
 * server's replica): the update would have. */
static void zero_grad(rt_shard *sh, float *g) {
    for (int i = 0; i < sh->n_slices; i++) {
        const sf_weight_slice *s = &sh->sl[i];
        for (int64_t r = 0; r < s->count; r++)
            memset(g + s->offset + r * s->stride, 0, (size_t)s->len * sizeof *g);
    }
}

/* Run the rest of shard sh's steps on this rank, in order, each waited for:
 * a received gradient is added to the packed one (the server), an update
 * unpacks the sum and steps the optimizer (and packs the new weights when the
 * server sends them back), received weights are unpacked in place. */
static sf_status finish_steps(sf_runtime *rt, rt_shard *sh, sf_error *err);

static sf_status finish_sync(sf_runtime *rt, rt_shard *sh, sf_error *err) {
    rt->c->defer = 1;
    sf_status st = finish_steps(rt, sh, err);
    rt->c->defer = 0;
    return st;
}

/* finish_sync's steps. */
static sf_status finish_steps(sf_runtime *rt, rt_shard *sh, sf_error *err) {
    rt_group *gr = &rt->groups[sh->group];
    for (; sh->cur < sh->n_steps; sh->cur++) {
        const rt_step *st = &rt->sync_steps[sh->step0 + sh->cur];
        double t0 = sf_now_s();
        if (st->kind == SF_STEP_UPDATE) {
            if (sh->comm && !sh->in_place) {
                slices_move(sh, gr->g, sh->buf, 0);
                event(rt, SF_RT_COPY, t0, sh->owner, sh->global, -1, sh->numel * 4);
                t0 = sf_now_s();
            }
            update_shard(rt, sh, st->offset, st->numel);
            if (sh->zero) zero_grad(sh, gr->g); /* the chunks other ranks updated */
            event(rt, SF_RT_UPDATE, t0, sh->owner, sh->global, -1, 0);
            if (sh->cur + 1 < sh->n_steps && !sh->in_place) /* the new weights go out */
                slices_move(sh, gr->w, sh->buf, 1);
            continue;
        }
        if (sh->req < 0) {
            sf_status ps = post_step(rt, sh, err);
            if (ps != SF_OK) return ps;
        }
        if (st->kind == SF_STEP_P2P && st->send && st->payload == SF_PAYLOAD_WEIGHTS) {
            rt->pending[rt->n_pending++] = sh->req; /* waited for at the end of the step */
            sh->req = -1;
            continue;
        }
        int rc = rt->c->vt->wait(rt->c, sh->req);
        sh->req = -1;
        if (rc < 0)
            return sf_error_set(err, (sf_status)rc, "rank %d: gradient sync failed", rt->rank);
        event(rt, SF_RT_SYNC, t0, sh->owner, sh->global, st->kind == SF_STEP_P2P ? st->peer : -1,
              st->numel * 4);
        if (st->kind == SF_STEP_P2P && !st->send && st->payload == SF_PAYLOAD_GRAD) {
            for (int64_t e = 0; e < sh->numel; e++) sh->buf[e] += sh->rbuf[e];
        } else if (st->kind == SF_STEP_ALL_GATHER && st->payload == SF_PAYLOAD_WEIGHTS) {
            if (!sh->in_place) slices_move(sh, gr->w, sh->buf, 0); /* ZeRO-1/2: every chunk's */
        } else if (st->kind == SF_STEP_P2P && !st->send) {         /* the server's weights */
            t0 = sf_now_s();
            slices_move(sh, gr->w, sh->buf, 0);
            zero_grad(sh, gr->g);
            event(rt, SF_RT_COPY, t0, sh->owner, sh->global, -1, sh->numel * 4);
        }
    }
    sh->cur = 0;
    return SF_OK;
}

static float *group_buf(rt_group *gr, sf_rt_params which) {
    return which == SF_RT_WEIGHTS ? gr->w : which == SF_RT_MOMENTUM ? gr->v : gr->v2;
}

/* ZeRO: every shard of this rank at stage `min` or above gathers `which`
 * (weights, optimizer state) whole from the chunks its ranks keep: stage 3's
 * weights before each pass (the steps of phase FORWARD and BACKWARD), and
 * before sf_runtime_get_params reads a shard whole. In the global shard order
 * on every rank, blocking. */
static sf_status gather_shard(sf_runtime *rt, rt_shard *sh, sf_rt_params which, sf_error *err) {
    float *full = group_buf(&rt->groups[sh->group], which);
    if (!full) return SF_OK;
    double t0 = sf_now_s();
    float *b = shard_base(rt, sh, full);
    if (!sh->in_place) slices_move(sh, full, b, 1);
    int id = rt->c->vt->iallgather(rt->c, b, sh->numel, sh->zgroup);
    if (id < 0 || rt->c->vt->wait(rt->c, id) != SF_OK)
        return sf_error_set(err, SF_ERR_IO, "rank %d: gathering a ZeRO shard failed", rt->rank);
    if (!sh->in_place) slices_move(sh, full, b, 0);
    event(rt, SF_RT_SYNC, t0, sh->owner, sh->global, -1, sh->numel * 4);
    return SF_OK;
}

static sf_status zero_gather(sf_runtime *rt, sf_rt_params which, int min, sf_error *err) {
    for (int i = 0; i < rt->n_shards; i++) {
        rt_shard *sh = &rt->shards[i];
        if (sh->zero < min || !sh->comm || sh->zgroup < 0) continue;
        sf_status st = gather_shard(rt, sh, which, err);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}

static sf_status wait_sends(sf_runtime *rt, int train, sf_error *err) {
    sf_status st = fwd_wait(rt, INT_MAX, err);
    if (st != SF_OK || !train) return st;
    for (int i = 0; i < rt->n_recv; i++) {
        rt_link *l = rt->recv_links[i];
        if (l->greq >= 0) COMM(rt->c->vt->wait(rt->c, l->greq), "sending gradients");
        l->greq = -1;
    }
    return SF_OK;
}

/* ZeRO-3: gather the weights of this rank's stage-3 shards whose first use in
 * the pass is op (forward: the shard's lowest operator; backward: its highest),
 * in the global shard order (every rank meets the operators in one order). */
static sf_status gather_op(sf_runtime *rt, int op, int backward, sf_error *err) {
    for (int i = 0; i < rt->n_shards; i++) {
        rt_shard *sh = &rt->shards[i];
        if (sh->zero < SF_ZERO_WEIGHTS || !sh->comm || sh->zgroup < 0) continue;
        if ((backward ? sh->bgather_op : sh->fgather_op) != op) continue;
        sf_status st = gather_shard(rt, sh, SF_RT_WEIGHTS, err);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}

/* Before the backward of op: the recomputation of the flagged parts it needs
 * (setup_recompute), in forward order. */
static sf_status recompute_before(sf_runtime *rt, int op, sf_error *err) {
    sf_status st = SF_OK;
    rt->recomputing = 1;
    for (int i = rt->rc_start[op]; i < rt->rc_start[op + 1] && st == SF_OK; i++) {
        rt_part *p = rt->rc_list[i];
        double t0 = sf_now_s();
        st = run_kernel(rt, p, 0, NULL, err);
        event(rt, SF_RT_FWD, t0, p->op, p->part, -1, 0);
    }
    rt->recomputing = 0;
    return st;
}

/* Rows of part p's tile whose largest probability is at their label (split
 * on its classes: the part that holds the label counts the row when its best
 * class is the label and its logit the row's maximum; a tie with a class of
 * an earlier part counts here, not there). */
static int64_t count_correct(const sf_runtime *rt, const rt_part *p) {
    int nd = p->tile.ndim;
    int64_t C = p->tile.hi[nd - 1] - p->tile.lo[nd - 1], lo = p->tile.lo[nd - 1], ok = 0;
    const float *mx = p->inner >= 0 ? rt->inner[p->inner].stats : NULL;
    for (int64_t r = 0; r < p->rows; r++) {
        const float *row = p->out[0] + r * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;
        ok += lo + best == p->labels[r] && (!mx || p->in[0][r * C + best] >= mx[r]);
    }
    return ok;
}

/* The forward of op at its point of the plan (entry position pos): ZeRO-3's
 * gathers of the shards it uses first, its parts, its reductions; an
 * evaluation counts the rows it classifies right as soon as they are there (a
 * pipeline's plan may reuse their memory later in the pass). */
static sf_status forward_op(sf_runtime *rt, int op, int pos, const sf_batch *b, double *loss,
                            sf_error *err) {
    at_point(rt, pt_f(rt, op));
    rt->cur_pos = pos;
    sf_status st = gather_op(rt, op, 0, err);
    int i = rt->lp_start[op], e = rt->lp_start[op + 1];
    if (st == SF_OK && i < e && rt->parts[i].inner >= 0) { /* the operator's parts here, together */
        st = forward_inner(rt, &rt->parts[i], e - i, b, loss, err);
    } else {
        for (int q = i; q < e && st == SF_OK; q++) st = forward_part(rt, &rt->parts[q], b, loss, err);
    }
    if (rt->counting)
        for (int q = i; q < e && st == SF_OK; q++)
            if (rt->parts[q].o->type == SF_OP_SOFTMAX_CE)
                rt->correct += count_correct(rt, &rt->parts[q]);
    for (int ri = rt->lr_start[op]; ri < rt->lr_start[op + 1] && st == SF_OK; ri++)
        st = red_forward(rt, &rt->reds[rt->red_order[ri]], err);
    return st;
}

/* The backward of op at its point: ZeRO-3's gathers, its reductions' duals
 * (in the reverse of the forward order), the recomputation it needs, its
 * parts in reverse. */
static sf_status backward_op(sf_runtime *rt, int op, int pos, sf_error *err) {
    at_point(rt, pt_b(rt, op));
    rt->cur_pos = pos;
    sf_status st = gather_op(rt, op, 1, err);
    for (int ri = rt->lr_start[op + 1] - 1; ri >= rt->lr_start[op] && st == SF_OK; ri--)
        st = red_backward(rt, &rt->reds[rt->red_order[ri]], err);
    if (st == SF_OK) st = recompute_before(rt, op, err);
    for (int q = rt->lp_start[op + 1] - 1; q >= rt->lp_start[op] && st == SF_OK; q--)
        if (op_has_bwd(rt->parts[q].o)) st = backward_part(rt, &rt->parts[q], err);
    return st;
}

/* The forward entries of this rank in order, each operator's forward sends
 * waited for once the next entry is done: without a pipeline, every operator
 * in id order; with one, the forward slots of its stage's schedule (a
 * subsequence of a schedule that runs without deadlock, so it does too). */
static sf_status forward_pass(sf_runtime *rt, const sf_batch *b, double *loss, sf_error *err) {
    sf_status st = SF_OK;
    for (int k = 0; k < rt->n_seq && st == SF_OK; k++) {
        if (rt->seq[k] & 1) continue;
        st = forward_op(rt, rt->seq[k] >> 1, k, b, loss, err);
        if (st == SF_OK) st = fwd_wait(rt, k, err);
    }
    if (st != SF_OK) return st;
    return fwd_wait(rt, INT_MAX, err);
}

/* ZeRO-2/3: after the backward of op, wait for the reduce-scatters that
 * overlap it (FSDP's: a unit's reduce-scatter runs during the next unit's
 * backward), in the global shard order. */
static sf_status rs_wait(sf_runtime *rt, int op, sf_error *err) {
    for (int i = 0; i < rt->n_shards; i++) {
        rt_shard *sh = &rt->shards[i];
        if (sh->rs_wait_op != op || sh->req < 0 || sh->cur != 0) continue;
        const rt_step *st = &rt->sync_steps[sh->step0];
        if (sh->zero < SF_ZERO_GRADIENTS || st->kind != SF_STEP_REDUCE_SCATTER) continue;
        rt->c->defer = 1;
        int rc = rt->c->vt->wait(rt->c, sh->req);
        rt->c->defer = 0;
        sh->req = -1;
        if (rc < 0)
            return sf_error_set(err, (sf_status)rc, "rank %d: gradient sync failed", rt->rank);
        event(rt, SF_RT_SYNC, sh->rs_t0, sh->owner, sh->global, -1, st->numel * 4);
        sh->cur = 1;
    }
    return SF_OK;
}

/* The batch of the graph the runtime runs: b itself, or for a pipeline each
 * copy's micro-batch, copy j of an input or softmax_ce taking the rows
 * [j B / m, (j + 1) B / m) of the caller's tensor (the batch leads: one run). */
static const sf_batch *pipe_batch(sf_runtime *rt, const sf_batch *b) {
    if (!rt->pipe_m || !b) return b;
    static const sf_batch none = {NULL, NULL};
    for (int u = 0; u < rt->n_ops; u++) {
        int i = u % rt->user_ops;
        rt->mb_inputs[u] = b->inputs && b->inputs[i] ? b->inputs[i] + rt->mb_off[u] : NULL;
        rt->mb_labels[u] = b->labels && b->labels[i] ? b->labels[i] + rt->mb_off[u] : NULL;
    }
    rt->mb_batch.inputs = b->inputs ? rt->mb_inputs : none.inputs;
    rt->mb_batch.labels = b->labels ? rt->mb_labels : none.labels;
    return &rt->mb_batch;
}

/* A pipeline's step: this rank's entries in its stage's order (forward and
 * backward passes of the micro-batch copies interleaved as the schedule says),
 * each entry's forward sends waited for once the next one is done; the
 * copies' gradients accumulate in their shared weight groups, whose shards
 * are synced once, after the last entry (every stage flushes first), in the
 * global shard order. */
static sf_status pipe_entries(sf_runtime *rt, const sf_batch *b, double *loss, sf_error *err) {
    sf_status st = SF_OK;
    for (int k = 0; k < rt->n_seq && st == SF_OK; k++) {
        int op = rt->seq[k] >> 1;
        st = rt->seq[k] & 1 ? backward_op(rt, op, k, err) : forward_op(rt, op, k, b, loss, err);
        if (st == SF_OK) st = fwd_wait(rt, k, err);
    }
    if (st == SF_OK) st = fwd_wait(rt, INT_MAX, err);
    return st;
}

static sf_status step_local(sf_runtime *rt, const sf_batch *b, double *loss, sf_error *err) {
    rt->n_ev = 0;
    rt->t_begin = sf_now_s();
    at_point(rt, PT_START);
    sf_status st = post_receives(rt, err);
    int next = 0;
    if (rt->pipe_m) {
        if (st == SF_OK) st = pipe_entries(rt, b, loss, err);
    } else {
        if (st == SF_OK) st = forward_pass(rt, b, loss, err);
        /* backward in reverse, with each shard's all-reduce posted once the loop
         * has passed its lowest operator (rt->shards are in that order) */
        for (int op = rt->n_ops - 1; op >= 0 && st == SF_OK; op--) {
            st = backward_op(rt, op, 2 * rt->n_ops - 1 - op, err);
            if (rt->bulk) continue;
            if (st == SF_OK) st = rs_wait(rt, op, err);
            for (; next < rt->n_shards && rt->shards[next].key_op == op && st == SF_OK; next++)
                st = post_sync(rt, &rt->shards[next], err);
        }
    }
    if (st == SF_OK) at_point(rt, pt_end(rt));
    for (; next < rt->n_shards && st == SF_OK; next++) st = post_sync(rt, &rt->shards[next], err);
    for (int i = 0; i < rt->n_shards && st == SF_OK; i++) st = finish_sync(rt, &rt->shards[i], err);
    for (int i = 0; i < rt->n_pending && st == SF_OK; i++)
        if (rt->c->vt->wait(rt->c, rt->pending[i]) != SF_OK)
            st = sf_error_set(err, SF_ERR_IO, "rank %d: sending updated weights failed", rt->rank);
    rt->n_pending = 0;
    if (st == SF_OK) st = wait_sends(rt, 1, err);
    return st;
}

sf_status sf_runtime_step(sf_runtime *rt, const sf_batch *b, double *loss, sf_error *err) {
    double l = 0;
    if (rt->bn_n) memset(rt->bn_sums, 0, (size_t)(3 * rt->bn_n) * sizeof *rt->bn_sums);
    sf_status st = step_local(rt, pipe_batch(rt, b), &l, err);
    /* one small world-wide sum: the loss, and whether every rank succeeded */
    double v[2] = {l, st != SF_OK ? 1.0 : 0.0};
    sf_status cs = rt->c->vt->sum_doubles(rt->c, v, 2);
    if (st != SF_OK) return st;
    if (cs != SF_OK) return sf_error_set(err, cs, "rank %d: communication failed", rt->rank);
    if (v[1] > 0) return sf_error_set(err, SF_ERR_IO, "another rank failed during the step");
    st = update_buffers(rt, err);
    if (st != SF_OK) return st;
    rt->steps++;
    if (loss) *loss = v[0];
    return SF_OK;
}

sf_status sf_runtime_eval(sf_runtime *rt, const sf_batch *b, double *loss, int64_t *correct,
                          sf_error *err) {
    return sf_runtime_forward(rt, b, 0, loss, correct, err);
}

sf_status sf_runtime_forward(sf_runtime *rt, const sf_batch *b, int train, double *loss,
                             int64_t *correct, sf_error *err) {
    double l = 0;
    rt->n_ev = 0;
    rt->correct = 0;
    rt->t_begin = sf_now_s();
    at_point(rt, PT_START);
    sf_status st = post_receives(rt, err);
    /* inference mode: dropout off, batch norm on running statistics; training
     * mode leaves the buffers alone (a step clears the sums it adds) */
    rt->eval = !train;
    rt->counting = 1;
    b = pipe_batch(rt, b);
    if (st == SF_OK) st = forward_pass(rt, b, &l, err);
    rt->eval = 0;
    rt->counting = 0;
    if (st == SF_OK) st = wait_sends(rt, 0, err);
    double ok = (double)rt->correct;
    double v[3] = {l, ok, st != SF_OK ? 1.0 : 0.0};
    sf_status cs = rt->c->vt->sum_doubles(rt->c, v, 3);
    if (st != SF_OK) return st;
    if (cs != SF_OK) return sf_error_set(err, cs, "rank %d: communication failed", rt->rank);
    if (v[2] > 0) return sf_error_set(err, SF_ERR_IO, "another rank failed during evaluation");
    if (loss) *loss = v[0];
    if (correct) *correct = (int64_t)llround(v[1]);
    return SF_OK;
}

/* ---- parameters ------------------------------------------------------------------ */

/* SF_OK when the runtime keeps `which`: a kind it knows, and a second moment
 * only under Adam. */
static sf_status params_kind_ok(const sf_runtime *rt, sf_rt_params which, sf_error *err) {
    if (which < 0 || which >= SF_RT_PARAMS_COUNT)
        return sf_error_set(err, SF_ERR_INVALID, "bad parameter kind");
    if (which == SF_RT_SECOND_MOMENT && rt->o.optimizer == SF_OPTIMIZER_SGD)
        return sf_error_set(err, SF_ERR_INVALID, "sgd keeps no second moment (adam, adamw do)");
    return SF_OK;
}

sf_status sf_runtime_set_params(sf_runtime *rt, sf_rt_params which, const float *const *bufs,
                                sf_error *err) {
    sf_status kst = params_kind_ok(rt, which, err);
    if (kst != SF_OK) return kst;
    /* only the elements of this rank's shards: the rest of a group's layout
     * is never touched (its pages never backed) */
    for (int i = 0; i < rt->n_shards; i++) {
        const rt_shard *sh = &rt->shards[i];
        rt_group *gr = &rt->groups[sh->group];
        float *dst = group_buf(gr, which);
        const float *src = bufs ? bufs[gr->owner] : NULL;
        for (int q = 0; q < sh->n_slices; q++) {
            const sf_weight_slice *sl = &sh->sl[q];
            for (int64_t r = 0; r < sl->count; r++) {
                int64_t at = sl->offset + r * sl->stride;
                if (src)
                    memcpy(dst + at, src + at, (size_t)sl->len * sizeof *dst);
                else
                    memset(dst + at, 0, (size_t)sl->len * sizeof *dst);
            }
        }
    }
    return SF_OK;
}

sf_status sf_runtime_get_params(sf_runtime *rt, sf_rt_params which, float *const *bufs,
                                sf_error *err) {
    sf_status kst = params_kind_ok(rt, which, err);
    if (kst != SF_OK) return kst;
    /* a ZeRO shard's chunks are whole on its first device first */
    kst = zero_gather(rt, which, which == SF_RT_WEIGHTS ? SF_ZERO_WEIGHTS : SF_ZERO_OPTIMIZER, err);
    kst = sf_comm_agree(rt->c, kst, err);
    if (kst != SF_OK) return kst;
    /* Each shard from its first device, in the global order on every rank:
     * rank 0 takes them one by one. Tags above every message tag. */
    sf_status st = SF_OK;
    float *tmp = NULL;
    int64_t tmp_n = 0;
    for (int i = 0; i < rt->n_shards; i++) {
        int64_t m = rt->shards[i].numel;
        if (m > tmp_n) tmp_n = m;
    }
    /* rank 0 needs room for shards it does not hold: size by every group */
    if (rt->rank == 0)
        for (int op = 0; op < rt->n_ops; op++)
            if (sf_taskgraph_owner(rt->tg, op) == op && sf_graph_op(rt->g, op)->n_params > tmp_n)
                tmp_n = sf_graph_op(rt->g, op)->n_params;
    tmp = malloc((size_t)(tmp_n ? tmp_n : 1) * sizeof *tmp);
    if (!tmp) st = SF_ERR_NOMEM;
    st = sf_comm_agree(rt->c, st, err);
    if (st != SF_OK) {
        free(tmp);
        return st;
    }
    /* Walk the global shard list again (every rank can: the task graph is the
     * same), so rank 0 knows what to receive even for shards it does not hold. */
    int gidx = 0;
    for (int ow = 0; ow < rt->n_ops && st == SF_OK; ow++) {
        if (sf_taskgraph_owner(rt->tg, ow) != ow) continue;
        sf_tg_sync sy;
        if (sf_taskgraph_sync(rt->tg, ow, &sy) != SF_OK) {
            st = SF_ERR_NOMEM;
            break;
        }
        for (int s = 0; s < sy.n_shards && st == SF_OK; s++, gidx++) {
            const sf_tg_shard *sh = &sy.shards[s];
            /* a parameter server's replicas keep no optimizer state */
            int src =
                sf_taskgraph_scheme(rt->tg) == SF_SCHEME_PS ? sh->rep_dev : sy.devs[sh->dev_start];
            rt_shard tmp_sh;
            memset(&tmp_sh, 0, sizeof tmp_sh);
            tmp_sh.n_slices = sf_op_weight_slices(
                sf_graph_op(rt->g, sh->rep_op),
                &sf_taskgraph_tiles(rt->tg, sh->rep_op)[sh->rep_part], tmp_sh.sl);
            int64_t m = 0;
            for (int q = 0; q < tmp_sh.n_slices; q++) m += tmp_sh.sl[q].len * tmp_sh.sl[q].count;
            int tag = (1 << 30) + (gidx & 0x3fffffff);
            if (src == rt->rank) {
                rt_group *gr = &rt->groups[rt->group_of[ow]];
                if (rt->rank == 0) {
                    if (bufs && bufs[ow]) {
                        slices_move(&tmp_sh, group_buf(gr, which), tmp, 1);
                        slices_move(&tmp_sh, bufs[ow], tmp, 0);
                    }
                } else {
                    slices_move(&tmp_sh, group_buf(gr, which), tmp, 1);
                    int id = rt->c->vt->isend(rt->c, tmp, (size_t)m * 4, 0, tag);
                    if (id < 0 || rt->c->vt->wait(rt->c, id) != SF_OK) st = SF_ERR_IO;
                }
            } else if (rt->rank == 0) {
                int id = rt->c->vt->irecv(rt->c, tmp, (size_t)m * 4, src, tag);
                if (id < 0 || rt->c->vt->wait(rt->c, id) != SF_OK) st = SF_ERR_IO;
                if (st == SF_OK && bufs && bufs[ow]) slices_move(&tmp_sh, bufs[ow], tmp, 0);
            }
        }
    }
    free(tmp);
    st = sf_comm_agree(rt->c, st, err);
    if (st != SF_OK && err && !err->msg[0]) sf_error_set(err, st, "gathering parameters failed");
    return st;
}

/* ---- buffers ------------------------------------------------------------------ */

sf_status sf_runtime_set_buffers(sf_runtime *rt, const float *const *bufs, sf_error *err) {
    (void)err;
    for (int op = 0; op < rt->n_ops; op++) {
        if (rt->bn_chan[op] < 0) continue;
        const sf_op *o = sf_graph_op(rt->g, op);
        float *dst = rt->bn_running + 2 * rt->bn_chan[op];
        int64_t m = sf_buffers_numel(o);
        if (bufs && bufs[op]) {
            memcpy(dst, bufs[op], (size_t)m * sizeof *dst);
        } else {
            for (int64_t i = 0; i < m; i++) dst[i] = i < m / 2 ? 0.0f : 1.0f;
        }
    }
    return SF_OK;
}

sf_status sf_runtime_get_buffers(const sf_runtime *rt, float *const *bufs, sf_error *err) {
    (void)err;
    for (int op = 0; op < rt->n_ops && bufs; op++)
        if (rt->bn_chan[op] >= 0 && bufs[op])
            memcpy(bufs[op], rt->bn_running + 2 * rt->bn_chan[op],
                   (size_t)sf_buffers_numel(sf_graph_op(rt->g, op)) * sizeof *bufs[op]);
    return SF_OK;
}

void sf_runtime_set_lr(sf_runtime *rt, double lr) { rt->o.lr = lr; }
int64_t sf_runtime_steps(const sf_runtime *rt) { return rt->steps; }
void sf_runtime_set_steps(sf_runtime *rt, int64_t steps) { rt->steps = steps; }
int64_t sf_runtime_reserved_bytes(const sf_runtime *rt) {
    /* the block, and what the rank holds of its weight groups at most */
    int64_t held = 0;
    for (int i = 0; i < rt->n_recs; i++)
        if (rt->recs[i].life.virt) held += (int64_t)rt->recs[i].bytes;
    return (int64_t)rt->block_bytes + held;
}
int64_t sf_runtime_peak_bytes(const sf_runtime *rt) { return rt->peak_bytes; }

const sf_graph *sf_runtime_graph(const sf_runtime *rt) { return rt->g; }

int sf_runtime_events(const sf_runtime *rt, const sf_rt_event **events) {
    *events = rt->ev;
    return rt->n_ev;
}
