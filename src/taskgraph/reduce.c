/*
 * reduce.c - partial sums: how the pieces of a producer split along a
 * reduction dimension (SF_DIM_REDUCE, Megatron's row-parallel linear) reach
 * their consumers (soapflow/taskgraph.h, sf_taskgraph_edge_reduce).
 *
 * The parts of a producer that differ only along its reduction dimension form
 * a group: they hold partial sums of one output piece P, each on its device.
 * edge_pairs (taskgraph.c) finds the pairs of the group's first part alone, as
 * if it held the sum: what each consumer part needs of P. This file picks the
 * reduction those needs call for, lowers it into steps, and sources each pair
 * from the part that holds its region once the reduction is done:
 *   - an all-reduce when every device of the group needs the whole piece (the
 *     consumer wants replicas: a column-parallel linear after the row-parallel
 *     one); each such need reads the sum on its own device, the others the
 *     first part's; backward, the gradients the holders received are
 *     all-reduced, which gives every part the gradient of the sum;
 *   - a reduce-scatter when the group's devices each need one distinct region
 *     and those regions tile P in chunks of the collective's sizes
 *     (sf_tg_chunk: Megatron's sequence parallelism, a layernorm split on T
 *     after the row-parallel linear); position i ends with the i-th device's
 *     region (packed in position order, the regions are the collective's
 *     chunks), every need reads what it needs from the positions holding it;
 *     backward, an all-gather of the gradient;
 *   - else a reduce to the first part's device: a message of P from every other
 *     part's device with an accumulation there (a COPY, listed where copies are
 *     priced; a part on the first part's device accumulates locally), every need
 *     reads the first part's piece; backward, a broadcast of the gradient from
 *     there to the group's other devices.
 * The group's collectives take its devices in part order (along the reduction),
 * not the ring order of the weight syncs (comm.c). A piece the consumer does not
 * read is not reduced (its group has no steps). Each edge reduces for itself:
 * a partial output that two operators read is reduced once for each; an output
 * no operator reads stays partial.
 *
 * Everything here is a function of the producer's and the consumer's configs,
 * so the simulator keeps it in the consumer's edge block, which delta
 * simulation rebuilds when either changes.
 */
#include <stdlib.h>
#include <string.h>

#include "taskgraph_impl.h"

int tg_reduce_dim(const sf_op *p, const sf_config *cp) {
    if (cp->ndim != p->space.ndim) return -1;
    for (int d = 0; d < cp->ndim; d++)
        if (p->kinds[d] == SF_DIM_REDUCE && cp->degree[d] > 1) return d;
    return -1;
}

/* Stride of dimension rd in the row-major grid of parts. */
static int grid_stride(const sf_config *cp, int rd) {
    int s = 1;
    for (int d = rd + 1; d < cp->ndim; d++) s *= cp->degree[d];
    return s;
}

int tg_reduce_rep(const sf_config *cp, int rd, int part) {
    return (part / grid_stride(cp, rd)) % cp->degree[rd] == 0;
}

static int grow_steps(sf_taskgraph *tg, int64_t need_steps, int64_t need_devs) {
    return tg_grow((void **)&tg->red_steps, &tg->cap_red_steps, need_steps,
                   sizeof *tg->red_steps) ||
           tg_grow((void **)&tg->red_deps, &tg->cap_red_deps, need_steps, sizeof *tg->red_deps) ||
           tg_grow((void **)&tg->red_devs, &tg->cap_red_devs, need_devs, sizeof *tg->red_devs);
}

static sf_tg_step *add_step(sf_taskgraph *tg, int kind, int payload, int dev, int peer,
                            int64_t numel, int dep) {
    sf_tg_step *st = &tg->red_steps[tg->n_red_steps];
    memset(st, 0, sizeof *st);
    st->kind = (uint8_t)kind;
    st->payload = (uint8_t)payload;
    st->dev = dev;
    st->peer = peer;
    st->group = -1;
    st->numel = numel;
    st->moved = kind == SF_STEP_COPY ? 3.0 : 0.0; /* an accumulation */
    st->runs = kind == SF_STEP_COPY;              /* of one buffer into another */
    st->dep = dep >= 0 ? (int)tg->n_red_steps : 0;
    st->n_deps = dep >= 0;
    if (dep >= 0) tg->red_deps[tg->n_red_steps] = dep;
    tg->n_red_steps++;
    return st;
}

static sf_tg_step *add_collective(sf_taskgraph *tg, int kind, int payload, int group, int n_group,
                                  int64_t numel) {
    sf_tg_step *st = add_step(tg, kind, payload, -1, -1, numel, -1);
    st->group = group;
    st->n_group = n_group;
    return st;
}

static int cmp_pair(const void *a, const void *b) {
    const sf_tg_pair *x = a, *y = b;
    if (x->cons_part != y->cons_part) return x->cons_part < y->cons_part ? -1 : 1;
    return x->prod_part < y->prod_part ? -1 : x->prod_part > y->prod_part;
}

static int push_pair(sf_taskgraph *tg, int *n, const sf_tg_pair *q) {
    if (*n >= tg->cap_red_pairs) {
        int64_t cap = tg->cap_red_pairs;
        if (tg_grow((void **)&tg->red_pairs, &cap, *n + 1, sizeof *tg->red_pairs)) return -1;
        tg->cap_red_pairs = (int)cap;
    }
    tg->red_pairs[(*n)++] = *q;
    return 0;
}

/* The kind of reduction group g's needs call for (see the file's comment);
 * for a reduce-scatter, chunk[r] gets the region of the need on the r-th device. */
static int pick_kind(const sf_tg_pair *pr, int n, int rep, const int32_t *parts, int R,
                     const sf_config *cp, int64_t numel, sf_tile *chunk) {
    int devs[SF_MAX_PARTS];
    for (int r = 0; r < R; r++) {
        devs[r] = cp->device[parts[r]];
        for (int s = 0; s < r; s++)
            if (devs[s] == devs[r]) return SF_REDUCE_ONE;
    }
    int whole = 1, scatter = 1;
    int64_t total = 0;
    for (int r = 0; r < R; r++) {
        int has_whole = 0, count = 0;
        for (int q = 0; q < n; q++) {
            if (pr[q].prod_part != rep || pr[q].dst_dev != devs[r]) continue;
            has_whole |= pr[q].numel == numel;
            if (count++ == 0) chunk[r] = pr[q].region;
        }
        whole &= has_whole;
        int64_t off, len;
        sf_tg_chunk(numel, R, r, &off, &len);
        if (count != 1 || sf_tile_numel(&chunk[r]) != len) scatter = 0;
        if (scatter) {
            total += len;
            for (int s = 0; s < r; s++)
                if (sf_tile_intersect(&chunk[s], &chunk[r], NULL)) scatter = 0;
        }
    }
    if (whole) return SF_REDUCE_ALL;
    if (scatter && total == numel) return SF_REDUCE_SCATTER;
    return SF_REDUCE_ONE;
}

int tg_reduce_edge(sf_taskgraph *tg, const sf_config *cp, int rd, const sf_tile *tp, int *n_pairs) {
    int n = *n_pairs, R = cp->degree[rd], stride = grid_stride(cp, rd);
    int n_groups = cp->n_parts / R;
    tg->n_red = 0;
    tg->n_red_steps = 0;
    int64_t n_dev_rows = 0;
    if (tg_grow((void **)&tg->red, &tg->cap_red, n_groups, sizeof *tg->red) ||
        tg_grow((void **)&tg->red_parts, &tg->cap_red_parts, cp->n_parts, sizeof *tg->red_parts) ||
        tg_grow((void **)&tg->red_chunks, &tg->cap_red_chunks, cp->n_parts,
                sizeof *tg->red_chunks) ||
        grow_steps(tg, (int64_t)cp->n_parts * 2 + 2, (int64_t)cp->n_parts * 2))
        return -1;
    int m = 0; /* the re-sourced pairs, in red_pairs */
    for (int rep = 0; rep < cp->n_parts; rep++) {
        if (!tg_reduce_rep(cp, rd, rep)) continue;
        sf_tg_reduce *gr = &tg->red[tg->n_red++];
        int32_t *parts = &tg->red_parts[(int64_t)(tg->n_red - 1) * R];
        sf_tile *chunk = &tg->red_chunks[(int64_t)(tg->n_red - 1) * R];
        for (int r = 0; r < R; r++) {
            parts[r] = rep + r * stride;
            memset(&chunk[r], 0, sizeof chunk[r]);
        }
        int64_t numel = sf_tile_numel(&tp[rep]);
        int kind = pick_kind(tg->pairs, n, rep, parts, R, cp, numel, chunk);
        memset(gr, 0, sizeof *gr);
        gr->kind = (uint8_t)kind;
        gr->n_parts = R;
        gr->part_start = (tg->n_red - 1) * R;
        gr->numel = numel;
        gr->piece = tp[rep];
        gr->step_start = (int)tg->n_red_steps;
        int d0 = cp->device[rep], needed = 0;
        for (int q = 0; q < n && !needed; q++) needed = tg->pairs[q].prod_part == rep;
        /* the steps: forward, then the gradient's dual; none for a piece this
         * consumer does not read */
        if (!needed) {
            gr->n_fwd = 0;
        } else if (kind == SF_REDUCE_ALL || kind == SF_REDUCE_SCATTER) {
            int group = (int)n_dev_rows;
            for (int r = 0; r < R; r++) tg->red_devs[n_dev_rows++] = (int16_t)cp->device[parts[r]];
            add_collective(tg, kind == SF_REDUCE_ALL ? SF_STEP_ALL_REDUCE : SF_STEP_REDUCE_SCATTER,
                           SF_PAYLOAD_ACT, group, R, numel);
            gr->n_fwd = 1;
            add_collective(tg, kind == SF_REDUCE_ALL ? SF_STEP_ALL_REDUCE : SF_STEP_ALL_GATHER,
                           SF_PAYLOAD_GRAD, group, R, numel);
        } else {
            for (int r = 1; r < R; r++) {
                int dr = cp->device[parts[r]];
                if (dr != d0) {
                    add_step(tg, SF_STEP_P2P, SF_PAYLOAD_ACT, dr, d0, numel, -1);
                    if (tg->copies)
                        add_step(tg, SF_STEP_COPY, SF_PAYLOAD_ACT, d0, -1, numel,
                                 (int)tg->n_red_steps - 1);
                } else if (tg->copies) {
                    add_step(tg, SF_STEP_COPY, SF_PAYLOAD_ACT, d0, -1, numel, -1);
                }
            }
            gr->n_fwd = (int)tg->n_red_steps - gr->step_start;
            int group = (int)n_dev_rows, ng = 0;
            tg->red_devs[group + ng++] = (int16_t)d0;
            for (int r = 1; r < R; r++) {
                int dr = cp->device[parts[r]], seen = 0;
                for (int s = 0; s < ng; s++) seen |= tg->red_devs[group + s] == dr;
                if (!seen) tg->red_devs[group + ng++] = (int16_t)dr;
            }
            if (ng > 1) {
                n_dev_rows += ng;
                add_collective(tg, SF_STEP_BROADCAST, SF_PAYLOAD_GRAD, group, ng, numel);
            }
        }
        gr->n_steps = (int)tg->n_red_steps - gr->step_start;
        /* the pairs, from the parts that hold their regions after the reduction */
        for (int q = 0; q < n; q++) {
            const sf_tg_pair *a = &tg->pairs[q];
            if (a->prod_part != rep) continue;
            if (kind == SF_REDUCE_ONE) {
                if (push_pair(tg, &m, a)) return -1;
            } else if (kind == SF_REDUCE_ALL) {
                sf_tg_pair b = *a;
                for (int r = 0; r < R; r++)
                    if (cp->device[parts[r]] == a->dst_dev) {
                        b.prod_part = parts[r];
                        b.src_dev = a->dst_dev;
                    }
                if (push_pair(tg, &m, &b)) return -1;
            } else {
                for (int r = 0; r < R; r++) {
                    sf_tg_pair b = *a;
                    if (!sf_tile_intersect(&a->region, &chunk[r], &b.region)) continue;
                    b.prod_part = parts[r];
                    b.src_dev = cp->device[parts[r]];
                    b.numel = sf_tile_numel(&b.region);
                    if (push_pair(tg, &m, &b)) return -1;
                }
            }
        }
    }
    qsort(tg->red_pairs, (size_t)m, sizeof *tg->red_pairs, cmp_pair);
    if (m > tg->cap_pairs) {
        int64_t cap = tg->cap_pairs;
        if (tg_grow((void **)&tg->pairs, &cap, m, sizeof *tg->pairs)) return -1;
        tg->cap_pairs = (int)cap;
    }
    memcpy(tg->pairs, tg->red_pairs, (size_t)m * sizeof *tg->pairs);
    *n_pairs = m;
    return 0;
}

int sf_taskgraph_edge_reduce(const sf_taskgraph *tg, sf_tg_reduces *out) {
    memset(out, 0, sizeof *out);
    out->n = tg->n_red;
    if (!tg->n_red) return 0;
    out->groups = tg->red;
    out->parts = tg->red_parts;
    out->chunks = tg->red_chunks;
    out->n_steps = (int)tg->n_red_steps;
    out->steps = tg->red_steps;
    out->devs = tg->red_devs;
    out->deps = tg->red_deps;
    return tg->n_red;
}
