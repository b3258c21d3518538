/*
 * taskgraph.c - the structure of a training iteration (soapflow/taskgraph.h),
 * shared by the simulator, which prices it, and the runtime, which runs it.
 *
 * Pairs: for each consumer part j, the region of input k it needs is met by the
 * producer parts whose output pieces intersect it. Most operators' outputs
 * follow their parallel space by index arithmetic (sf_op_output_axes), so the
 * producer parts that can meet a region form a box of the producer's grid of
 * parts, found by inverting sf_split_range; only those are intersected. An
 * output with no such map has every part tested.
 *
 * Shards: the entries of a weight group (every part of every member) that
 * use the same weight elements form one shard, in order of first appearance,
 * with its distinct devices in id order and each device's entries in entry
 * order. Members of one type (an RNN layer's steps) name the weights by the
 * same dimensions, so their entries are compared by their tiles' ranges on the
 * parameter and reduction dimensions. A tie (members of different types: an
 * embedding and its LM head, which name the table's rows and columns by
 * different dimensions) compares the entries' weight slices themselves
 * (sf_op_weight_slices, in the layout both share); the strategy guarantees
 * that two entries' slices are equal or disjoint (sf_strategy_check_ties).
 * Only tied groups pay for the slices. Grouping compares each unassigned entry
 * with the later ones: quadratic in the entries of a group, which are at most
 * members x SF_MAX_PARTS; data parallelism, whose entries all share the one
 * shard, takes one pass.
 *
 * Everything here is a function of the strategy alone; scratch arrays grow
 * and are kept, so that the simulator's delta updates do not allocate.
 */
#include <stdlib.h>
#include <string.h>

#include "taskgraph_impl.h"

sf_taskgraph *sf_taskgraph_new(const sf_graph *g, int n_devices, sf_error *err) {
    sf_taskgraph *tg = calloc(1, sizeof *tg);
    if (!tg) goto oom;
    int n = sf_graph_num_ops(g);
    tg->g = g;
    tg->n_ops = n;
    tg->n_dev = n_devices;
    tg->per_node = n_devices > 0 ? n_devices : 1;
    tg->scheme = SF_SCHEME_RING;
    tg->tp_op = tg->rg_op = -1;
    size_t n1 = (size_t)n + 1;
    tg->owner = malloc(n1 * sizeof *tg->owner);
    tg->mem_start = calloc(n1 + 1, sizeof *tg->mem_start);
    tg->mem = malloc(n1 * sizeof *tg->mem);
    tg->cons_start = calloc(n1 + 1, sizeof *tg->cons_start);
    tg->tiles = calloc(n1, sizeof *tg->tiles);
    tg->tiles_cap = calloc(n1, sizeof *tg->tiles_cap);
    tg->dev_count = calloc((size_t)(n_devices > 0 ? n_devices : 1), sizeof *tg->dev_count);
    tg->cursor = calloc((size_t)(n_devices > 0 ? n_devices : 1), sizeof *tg->cursor);
    if (!tg->owner || !tg->mem_start || !tg->mem || !tg->cons_start || !tg->tiles ||
        !tg->tiles_cap || !tg->dev_count || !tg->cursor)
        goto oom;
    /* weight groups, as counting sorts: members of each owner in id order */
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        tg->owner[i] = op->weight_owner >= 0 ? op->weight_owner : op->n_params > 0 ? i : -1;
        if (tg->owner[i] >= 0) tg->mem_start[tg->owner[i] + 1]++;
    }
    for (int i = 0; i < n; i++) tg->mem_start[i + 1] += tg->mem_start[i];
    {
        int *fill = calloc(n1, sizeof *fill);
        if (!fill) goto oom;
        for (int i = 0; i < n; i++)
            if (tg->owner[i] >= 0) tg->mem[tg->mem_start[tg->owner[i]] + fill[tg->owner[i]]++] = i;
        free(fill);
    }
    /* consumers, as (op, input index) */
    int n_cons = 0;
    for (int i = 0; i < n; i++) n_cons += sf_graph_op(g, i)->n_inputs;
    tg->cons = malloc((size_t)(n_cons ? n_cons : 1) * sizeof *tg->cons);
    if (!tg->cons) goto oom;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) tg->cons_start[op->inputs[k].op + 1]++;
    }
    for (int i = 0; i < n; i++) tg->cons_start[i + 1] += tg->cons_start[i];
    {
        int *fill = calloc(n1, sizeof *fill);
        if (!fill) goto oom;
        for (int i = 0; i < n; i++) {
            const sf_op *op = sf_graph_op(g, i);
            for (int k = 0; k < op->n_inputs; k++) {
                int p = op->inputs[k].op;
                tg->cons[tg->cons_start[p] + fill[p]++] = (sf_tensor_ref){i, k};
            }
        }
        free(fill);
    }
    return tg;
oom:
    sf_taskgraph_free(tg);
    sf_error_set(err, SF_ERR_NOMEM, "out of memory creating the task graph");
    return NULL;
}

void sf_taskgraph_free(sf_taskgraph *tg) {
    if (!tg) return;
    free(tg->owner);
    free(tg->mem_start);
    free(tg->mem);
    free(tg->cons_start);
    free(tg->cons);
    if (tg->tiles)
        for (int i = 0; i < tg->n_ops; i++) free(tg->tiles[i]);
    free(tg->tiles);
    free(tg->tiles_cap);
    free(tg->tp);
    free(tg->rg);
    free(tg->feeds);
    free(tg->pairs);
    free(tg->ents);
    free(tg->ent_sl);
    free(tg->shards);
    free(tg->devs);
    free(tg->ent_start);
    free(tg->out_ents);
    free(tg->dev_count);
    free(tg->cursor);
    free(tg->steps);
    free(tg->step_devs);
    free(tg->step_deps);
    free(tg->shard_start);
    free(tg->ring_key);
    free(tg->ring_dev);
    free(tg->rep_dev);
    free(tg->ring_rank);
    free(tg->red);
    free(tg->red_parts);
    free(tg->red_chunks);
    free(tg->red_steps);
    free(tg->red_deps);
    free(tg->red_devs);
    free(tg->red_pairs);
    free(tg->in_groups);
    free(tg->in_parts);
    free(tg->in_steps);
    free(tg->in_devs);
    free(tg->in_deps);
    free(tg);
}

void sf_taskgraph_set_strategy(sf_taskgraph *tg, const sf_strategy *s) { tg->s = s; }
const sf_graph *sf_taskgraph_graph(const sf_taskgraph *tg) { return tg->g; }

sf_tile *sf_taskgraph_tiles(sf_taskgraph *tg, int op) { return tg->tiles[op]; }

/* Each operator's tiles are an array of their own that only grows, so a
 * config of more parts than the last one moves no other operator's tiles,
 * and memory follows the parts the strategy has (a 4096-way data-parallel
 * operator holds 4096 tiles, a whole one a single tile), not SF_MAX_PARTS
 * for every operator. */
sf_status sf_taskgraph_reserve_tiles(sf_taskgraph *tg, int op, int n) {
    if (n <= tg->tiles_cap[op]) return SF_OK;
    int cap = tg->tiles_cap[op] ? tg->tiles_cap[op] : 1;
    while (cap < n) cap *= 2;
    if (cap > SF_MAX_PARTS) cap = n > SF_MAX_PARTS ? n : SF_MAX_PARTS;
    sf_tile *t = realloc(tg->tiles[op], (size_t)cap * sizeof *t);
    if (!t) return SF_ERR_NOMEM;
    tg->tiles[op] = t;
    tg->tiles_cap[op] = cap;
    return SF_OK;
}

sf_status sf_taskgraph_set_tiles(sf_taskgraph *tg, int opi) {
    const sf_op *op = sf_graph_op(tg->g, opi);
    const sf_config *c = sf_strategy_get(tg->s, opi);
    if (sf_taskgraph_reserve_tiles(tg, opi, c->n_parts) != SF_OK) return SF_ERR_NOMEM;
    sf_tile *t = sf_taskgraph_tiles(tg, opi);
    for (int p = 0; p < c->n_parts; p++) sf_config_part_tile(op, c, p, &t[p]);
    return SF_OK;
}

int sf_taskgraph_owner(const sf_taskgraph *tg, int op) { return tg->owner[op]; }

int sf_taskgraph_members(const sf_taskgraph *tg, int owner, const int **members) {
    *members = &tg->mem[tg->mem_start[owner]];
    return tg->mem_start[owner + 1] - tg->mem_start[owner];
}

int sf_taskgraph_consumers(const sf_taskgraph *tg, int op, const sf_tensor_ref **cons) {
    *cons = &tg->cons[tg->cons_start[op]];
    return tg->cons_start[op + 1] - tg->cons_start[op];
}

/* ---- pairs ---------------------------------------------------------------- */

/* Producer parts whose output pieces may meet region r (in the output's
 * coordinates), as a box [a, b] of the producer's grid of parts. Output
 * dimension e follows space dimension axis[e] less shift[e] (sf_op_output_axes),
 * so a part can meet r only if its space range along axis[e] meets r's range
 * along e moved back by the shift; along each space dimension those parts form
 * an index range, found by inverting sf_split_range (part of x = ((x+1)*k - 1) / n).
 * Space dimensions no output dimension follows keep every index. Returns 0 when
 * no part can meet r. The box may hold parts that miss r (a split's piece is
 * clipped to its slice); the caller intersects each exactly. */
static int grid_range(const sf_op *p, const sf_config *cp, const sf_tile *r, int ond,
                      const int *axis, const int64_t *shift, int *a, int *b) {
    for (int d = 0; d < cp->ndim; d++) {
        a[d] = 0;
        b[d] = cp->degree[d] - 1;
    }
    for (int e = 0; e < ond && e < r->ndim; e++) {
        int d = axis[e];
        int64_t n = p->space.d[d], k = cp->degree[d];
        int64_t lo = r->lo[e] + shift[e], hi = r->hi[e] + shift[e];
        if (lo < 0) lo = 0;
        if (hi > n) hi = n;
        if (hi <= lo) return 0;
        if (k == 1) continue; /* most dimensions are whole: skip the divisions */
        int x = (int)(((lo + 1) * k - 1) / n), y = (int)((hi * k - 1) / n);
        if (x > a[d]) a[d] = x;
        if (y < b[d]) b[d] = y;
        if (a[d] > b[d]) return 0;
    }
    return 1;
}

/* Add the pair (i, j) when piece i meets region rj. Most part pairs differ in
 * the first dimension (the sample) already, so the test stops at the first
 * empty dimension before building the intersection. */
static int try_pair(sf_taskgraph *tg, int *n, const sf_tile *piece, const sf_tile *rj, int i, int j,
                    int di, int dj, int remote_only) {
    if (remote_only && di == dj) return 0;
    int nd = piece->ndim < rj->ndim ? piece->ndim : rj->ndim;
    for (int d = 0; d < nd; d++) {
        int64_t lo = piece->lo[d] > rj->lo[d] ? piece->lo[d] : rj->lo[d];
        int64_t hi = piece->hi[d] < rj->hi[d] ? piece->hi[d] : rj->hi[d];
        if (hi <= lo) return 0;
    }
    if (*n >= tg->cap_pairs) {
        int64_t cap = tg->cap_pairs;
        if (tg_grow((void **)&tg->pairs, &cap, *n + 1, sizeof *tg->pairs)) return -1;
        tg->cap_pairs = (int)cap;
    }
    sf_tg_pair *q = &tg->pairs[(*n)++];
    q->prod_part = i;
    q->cons_part = j;
    q->src_dev = di;
    q->dst_dev = dj;
    /* the intersection, non-empty in every dimension (checked above) */
    q->region.ndim = nd;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        int64_t lo = piece->lo[d] > rj->lo[d] ? piece->lo[d] : rj->lo[d];
        int64_t hi = piece->hi[d] < rj->hi[d] ? piece->hi[d] : rj->hi[d];
        q->region.lo[d] = lo;
        q->region.hi[d] = hi;
        numel *= hi - lo;
    }
    for (int d = nd; d < SF_MAX_DIMS; d++) q->region.lo[d] = q->region.hi[d] = 0;
    q->numel = numel;
    q->in_place = 0;
    q->runs_local = sf_tile_runs(&q->region, piece, rj);
    q->runs_src = sf_tile_runs(&q->region, piece, &q->region);
    q->runs_dst = sf_tile_runs(&q->region, &q->region, rj);
    return 0;
}

/* 1 when input k of x is the only reader of the tensor it reads. */
static int sole_reader(const sf_taskgraph *tg, const sf_op *x, int k) {
    const sf_tensor_ref *cons;
    int n = sf_taskgraph_consumers(tg, x->inputs[k].op, &cons), readers = 0;
    for (int i = 0; i < n; i++)
        readers += sf_graph_op(tg->g, cons[i].op)->inputs[cons[i].out].out == x->inputs[k].out;
    return readers == 1;
}

/* sf_tg_pair.in_place of the n pairs of input k of x. The region is the
 * intersection of the piece and the input region, so it is either whole when
 * its element count is. */
static void set_in_place(const sf_taskgraph *tg, const sf_op *x, int k, const sf_tile *tp,
                         const sf_tile *rg, sf_tg_pair *pr, int n, int n_prod) {
    int sole = -1;              /* not yet known */
    int32_t *feeds = tg->feeds; /* [n_prod] pairs each producer part feeds, counted when needed */
    for (int q = 0; q < n; q++) {
        sf_tg_pair *a = &pr[q];
        if (a->src_dev != a->dst_dev || a->numel != sf_tile_numel(&tp[a->prod_part])) continue;
        if (a->numel != sf_tile_numel(&rg[a->cons_part])) continue;
        if (sole < 0) {
            sole = sole_reader(tg, x, k);
            memset(feeds, 0, (size_t)n_prod * sizeof *feeds);
            for (int i = 0; i < n; i++) feeds[pr[i].prod_part]++;
        }
        a->in_place = sole && feeds[a->prod_part] == 1 ? 2 : 1;
    }
}

static int same_degrees(const sf_config *a, const sf_config *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->degree[d] != b->degree[d]) return 0;
    return 1;
}

/* The pairs of input k of xi; with remote_only, only those across devices. */
static int edge_pairs(sf_taskgraph *tg, int xi, int k, int remote_only, const sf_tg_pair **pairs) {
    const sf_op *x = sf_graph_op(tg->g, xi);
    int pi = x->inputs[k].op, out = x->inputs[k].out;
    const sf_op *p = sf_graph_op(tg->g, pi);
    const sf_config *cx = sf_strategy_get(tg->s, xi);
    const sf_config *cp = sf_strategy_get(tg->s, pi);
    const sf_tile *ptiles = sf_taskgraph_tiles(tg, pi), *xtiles = sf_taskgraph_tiles(tg, xi);
    /* The producer's output pieces and the consumer's input regions follow
     * from the degrees alone: kept from the last call while they are the same
     * (OptCNN's tables ask for every pair of configs of one edge in a row). */
    if (tg_grow((void **)&tg->tp, &tg->cap_tp, cp->n_parts, sizeof *tg->tp) ||
        tg_grow((void **)&tg->rg, &tg->cap_rg, cx->n_parts, sizeof *tg->rg) ||
        tg_grow((void **)&tg->feeds, &tg->cap_feeds, cp->n_parts, sizeof *tg->feeds))
        return -1;
    sf_tile *tp = tg->tp, *rg = tg->rg;
    if (tg->tp_op != pi || tg->tp_out != out || !same_degrees(&tg->tp_cfg, cp)) {
        for (int i = 0; i < cp->n_parts; i++) sf_op_output_tile(p, &ptiles[i], out, &tp[i]);
        tg->tp_op = pi;
        tg->tp_out = out;
        tg->tp_cfg.ndim = cp->ndim;
        memcpy(tg->tp_cfg.degree, cp->degree, sizeof cp->degree);
    }
    if (tg->rg_op != xi || tg->rg_k != k || !same_degrees(&tg->rg_cfg, cx)) {
        for (int j = 0; j < cx->n_parts; j++) sf_op_input_region(x, &xtiles[j], k, &rg[j]);
        tg->rg_op = xi;
        tg->rg_k = k;
        tg->rg_cfg.ndim = cx->ndim;
        memcpy(tg->rg_cfg.degree, cx->degree, sizeof cx->degree);
    }
    int axis[SF_MAX_DIMS];
    int64_t shift[SF_MAX_DIMS];
    int grid = sf_op_output_axes(p, out, axis, shift) && cp->ndim <= p->space.ndim;
    int ond = p->out_shapes[out].ndim;
    int n = 0;
    /* A producer split along a reduction dimension: the pairs of each group's
     * first part, then the reduction (reduce.c) sources them anew; local pairs
     * take part in picking the reduction, so they are dropped only after it. */
    int rd = tg_reduce_dim(p, cp), drop_local = remote_only && rd >= 0;
    if (rd >= 0) remote_only = 0;
    tg->n_red = 0;
    tg->n_red_steps = 0;
    for (int j = 0; j < cx->n_parts; j++) {
        const sf_tile rj = rg[j];
        if (sf_tile_empty(&rj)) continue;
        int dj = cx->device[j];
        if (!grid) {
            for (int i = 0; i < cp->n_parts; i++)
                if ((rd < 0 || tg_reduce_rep(cp, rd, i)) &&
                    try_pair(tg, &n, &tp[i], &rj, i, j, cp->device[i], dj, remote_only))
                    return -1;
            continue;
        }
        int lo[SF_MAX_DIMS], hi[SF_MAX_DIMS], idx[SF_MAX_DIMS];
        if (!grid_range(p, cp, &rj, ond, axis, shift, lo, hi)) continue;
        if (rd >= 0) hi[rd] = 0; /* the groups' first parts */
        int nd = cp->ndim;
        for (int d = 0; d < nd; d++) idx[d] = lo[d];
        for (;;) {
            int i = 0;
            for (int d = 0; d < nd; d++) i = i * cp->degree[d] + idx[d];
            if (try_pair(tg, &n, &tp[i], &rj, i, j, cp->device[i], dj, remote_only)) return -1;
            int d = nd - 1;
            while (d >= 0 && idx[d] == hi[d]) {
                idx[d] = lo[d];
                d--;
            }
            if (d < 0) break;
            idx[d]++;
        }
    }
    if (rd >= 0 && tg_reduce_edge(tg, cp, rd, tp, &n)) return -1;
    if (!remote_only) set_in_place(tg, x, k, tp, rg, tg->pairs, n, cp->n_parts);
    if (drop_local) {
        int m = 0;
        for (int q = 0; q < n; q++)
            if (tg->pairs[q].src_dev != tg->pairs[q].dst_dev) tg->pairs[m++] = tg->pairs[q];
        n = m;
    }
    *pairs = tg->pairs;
    return n;
}

int sf_taskgraph_edge(sf_taskgraph *tg, int xi, int k, const sf_tg_pair **pairs) {
    return edge_pairs(tg, xi, k, 0, pairs);
}

int sf_taskgraph_edge_moves(sf_taskgraph *tg, int xi, int k, const sf_tg_pair **pairs) {
    return edge_pairs(tg, xi, k, !tg->copies, pairs);
}

/* ---- shards --------------------------------------------------------------- */

static int same_shard(const struct tg_ent *a, const struct tg_ent *b, int nd) {
    for (int i = 0; i < nd; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]) return 0;
    return 1;
}

/* Entries of a tied group: the same weight elements, slice for slice (the
 * slices are normalized, so equal elements are equal slices). */
static int same_slices(const struct tg_ent_slices *a, const struct tg_ent_slices *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->sl[i].offset != b->sl[i].offset || a->sl[i].len != b->sl[i].len ||
            a->sl[i].stride != b->sl[i].stride || a->sl[i].count != b->sl[i].count)
            return 0;
    return 1;
}

sf_status sf_taskgraph_device_weights(sf_taskgraph *tg, int64_t *per_device) {
    for (int d = 0; d < tg->n_dev; d++) per_device[d] = 0;
    for (int ow = 0; ow < tg->n_ops; ow++) {
        if (tg->owner[ow] != ow) continue;
        sf_tg_sync sy;
        sf_status st = sf_taskgraph_sync(tg, ow, &sy);
        if (st != SF_OK) return st;
        for (int k = 0; k < sy.n_shards; k++) {
            const sf_tg_shard *sh = &sy.shards[k];
            for (int r = 0; r < sh->n_devs; r++)
                per_device[sy.devs[sh->dev_start + r]] += sh->numel;
        }
    }
    return SF_OK;
}

sf_status sf_taskgraph_sync(sf_taskgraph *tg, int owner, sf_tg_sync *out) {
    const int *members;
    int nm = sf_taskgraph_members(tg, owner, &members);
    return tg_shards(tg, members, nm, owner, out);
}

sf_status tg_shards(sf_taskgraph *tg, const int *members, int nm, int owner, sf_tg_sync *out) {
    int64_t n_ent = 0;
    for (int i = 0; i < nm; i++) n_ent += sf_strategy_get(tg->s, members[i])->n_parts;
    if (tg_grow((void **)&tg->ents, &tg->cap_ents, n_ent, sizeof *tg->ents) ||
        tg_grow((void **)&tg->shards, &tg->cap_shards, n_ent, sizeof *tg->shards) ||
        tg_grow((void **)&tg->out_ents, &tg->cap_out_ents, n_ent, sizeof *tg->out_ents))
        return SF_ERR_NOMEM;
    /* at most one (shard, device) row per entry, and ent_start's end mark */
    if (tg_grow((void **)&tg->devs, &tg->cap_devs, n_ent + 1, sizeof *tg->devs) ||
        tg_grow((void **)&tg->ent_start, &tg->cap_ent_start, n_ent + 1, sizeof *tg->ent_start))
        return SF_ERR_NOMEM;
    struct tg_ent *e = tg->ents;
    const sf_op *own = sf_graph_op(tg->g, owner);
    int nd = own->space.ndim;
    /* a tie (members of another type than the owner's): entries are matched by
     * their weight slices, since the members split the weights along
     * dimensions of different indices */
    int tied = 0;
    for (int i = 0; i < nm && !tied; i++) tied = sf_graph_op(tg->g, members[i])->type != own->type;
    if (tied && tg_grow((void **)&tg->ent_sl, &tg->cap_ent_sl, n_ent, sizeof *tg->ent_sl))
        return SF_ERR_NOMEM;
    int64_t ne = 0;
    for (int i = 0; i < nm; i++) {
        const sf_op *op = sf_graph_op(tg->g, members[i]);
        const sf_config *c = sf_strategy_get(tg->s, members[i]);
        const sf_tile *mt = sf_taskgraph_tiles(tg, members[i]);
        for (int p = 0; p < c->n_parts; p++) {
            struct tg_ent *x = &e[ne++];
            memset(x, 0, sizeof *x);
            for (int d = 0; d < nd && d < mt[p].ndim; d++) {
                if (op->kinds[d] == SF_DIM_PARAMETER || op->kinds[d] == SF_DIM_REDUCE) {
                    x->lo[d] = mt[p].lo[d];
                    x->hi[d] = mt[p].hi[d];
                }
            }
            x->op = members[i];
            x->part = p;
            x->dev = c->device[p];
            x->cls = -1;
            if (tied) {
                struct tg_ent_slices *q = &tg->ent_sl[ne - 1];
                q->n = sf_op_weight_slices(op, &mt[p], q->sl);
            }
        }
    }
    int n_cls = 0;
    for (int64_t i = 0; i < ne; i++) {
        if (e[i].cls >= 0) continue;
        e[i].cls = n_cls;
        for (int64_t j = i + 1; j < ne; j++)
            if (e[j].cls < 0 &&
                (tied ? same_slices(&tg->ent_sl[i], &tg->ent_sl[j]) : same_shard(&e[i], &e[j], nd)))
                e[j].cls = n_cls;
        n_cls++;
    }
    /* Lay each shard out: its devices in id order with their entries in entry
     * order, by counting the entries per device. A shard's first entry in
     * entry order is its representative. */
    int n_dev_rows = 0, n_out = 0;
    int64_t first = 0;
    for (int cls = 0; cls < n_cls; cls++) {
        while (e[first].cls != cls) first++; /* classes are numbered in first-appearance order */
        sf_tg_shard *sh = &tg->shards[cls];
        sh->rep_op = e[first].op;
        sh->rep_part = e[first].part;
        sh->rep_dev = e[first].dev;
        sh->numel = sf_op_tile_weights(sf_graph_op(tg->g, e[first].op),
                                       &sf_taskgraph_tiles(tg, e[first].op)[e[first].part]);
        sh->dev_start = n_dev_rows;
        int lo_dev = tg->n_dev, hi_dev = -1;
        for (int64_t i = first; i < ne; i++) {
            if (e[i].cls != cls) continue;
            if (tg->dev_count[e[i].dev]++ == 0) {
                if (e[i].dev < lo_dev) lo_dev = e[i].dev;
                if (e[i].dev > hi_dev) hi_dev = e[i].dev;
            }
        }
        /* devices of the shard in id order; ent_start rows become running offsets */
        int rows = 0;
        for (int d = lo_dev; d <= hi_dev; d++) {
            if (!tg->dev_count[d]) continue;
            tg->devs[n_dev_rows + rows] = (int16_t)d;
            tg->ent_start[n_dev_rows + rows] = n_out;
            n_out += tg->dev_count[d];
            tg->dev_count[d] = rows; /* now the row of d within the shard */
            rows++;
        }
        sh->n_devs = rows;
        for (int r = 0; r < rows; r++) tg->cursor[r] = tg->ent_start[n_dev_rows + r];
        for (int64_t i = first; i < ne; i++)
            if (e[i].cls == cls)
                tg->out_ents[tg->cursor[tg->dev_count[e[i].dev]]++] =
                    (sf_tg_entry){e[i].op, e[i].part};
        for (int d = lo_dev; d <= hi_dev; d++) tg->dev_count[d] = 0;
        n_dev_rows += rows;
    }
    tg->ent_start[n_dev_rows] = n_out; /* the end of the last row */
    out->n_shards = n_cls;
    out->shards = tg->shards;
    out->devs = tg->devs;
    out->ent_start = tg->ent_start;
    out->ents = tg->out_ents;
    return SF_OK;
}
