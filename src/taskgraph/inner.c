/*
 * inner.c - communication inside an operator: the per-row statistics that the
 * parts of an operator split along its inner dimension (sf_op_inner_dim)
 * combine between their forward and backward passes.
 *
 * softmax_ce split on its classes is Megatron-LM's vocabulary-parallel
 * cross-entropy: each part holds its classes' logits, takes each row's local
 * maximum, and an all-reduce (max) gives the global one; then each part sums
 * exp(x - max) over its classes and picks the target's logit when the target is
 * one of its classes (0 otherwise), and one all-reduce (sum) of both, two
 * elements per row, gives the normalizer and the target logit, so the loss and
 * the probabilities p = exp(x - max) / sum of the part's classes follow
 * locally, and the backward (p - onehot on the part's classes) needs nothing
 * more. The logits are never gathered: 3 elements per row move instead of C.
 *
 * Why steps of their own and not pairs: the statistics are no region of a
 * tensor the graph names, and they flow among the parts of one operator, so
 * they sit in the operator's core (the simulator's core block): delta
 * simulation rebuilds them with the operator's tasks. The simulator runs both
 * steps after the group's forward tasks and before its backward tasks, a
 * model of the three phases of the forward (local max; local sums; normalize)
 * with the phases' compute added up in the forward task.
 */
#include <string.h>

#include "taskgraph_impl.h"

int sf_taskgraph_op_inner(sf_taskgraph *tg, int op, sf_tg_inner *out) {
    memset(out, 0, sizeof *out);
    const sf_op *o = sf_graph_op(tg->g, op);
    const sf_config *c = sf_strategy_get(tg->s, op);
    int id = sf_op_inner_dim(o);
    if (id < 0 || id >= c->ndim || c->degree[id] <= 1) return 0;
    int deg = c->degree[id], stride = 1;
    for (int d = id + 1; d < c->ndim; d++) stride *= c->degree[d];
    int n_groups = c->n_parts / deg;
    if (tg_grow((void **)&tg->in_groups, &tg->cap_in_groups, n_groups, sizeof *tg->in_groups) ||
        tg_grow((void **)&tg->in_parts, &tg->cap_in_parts, c->n_parts, sizeof *tg->in_parts) ||
        tg_grow((void **)&tg->in_steps, &tg->cap_in_steps, 2 * (int64_t)n_groups,
                sizeof *tg->in_steps) ||
        tg_grow((void **)&tg->in_devs, &tg->cap_in_devs, c->n_parts, sizeof *tg->in_devs) ||
        tg_grow((void **)&tg->in_deps, &tg->cap_in_deps, n_groups, sizeof *tg->in_deps))
        return -1;
    const sf_tile *tiles = tg->tiles[op];
    int n = 0, n_parts = 0, n_steps = 0, n_devs = 0;
    for (int p = 0; p < c->n_parts; p++) {
        if ((p / stride) % deg != 0) continue; /* not the first of its group */
        int dev_start = n_devs, part_start = n_parts;
        for (int k = 0; k < deg; k++) {
            int q = p + k * stride, dev = c->device[q], seen = 0;
            tg->in_parts[n_parts++] = q;
            for (int i = dev_start; i < n_devs && !seen; i++) seen = tg->in_devs[i] == dev;
            if (!seen) tg->in_devs[n_devs++] = (int16_t)dev;
        }
        int n_group = n_devs - dev_start;
        const sf_tile *t = &tiles[p];
        int64_t ext = t->hi[id] - t->lo[id];
        int64_t rows = ext > 0 ? sf_tile_numel(t) / ext : 0;
        if (n_group < 2 || rows == 0) { /* one device combines its parts alone */
            n_devs = dev_start;
            n_parts = part_start;
            continue;
        }
        sf_tg_inner_group *g = &tg->in_groups[n];
        g->n_parts = deg;
        g->part_start = part_start;
        g->rows = rows;
        g->step_start = n_steps;
        g->n_steps = 2;
        for (int s = 0; s < 2; s++) {
            sf_tg_step *st = &tg->in_steps[n_steps + s];
            memset(st, 0, sizeof *st);
            st->kind = SF_STEP_ALL_REDUCE;
            st->payload = SF_PAYLOAD_ACT;
            st->dev = st->peer = -1;
            st->group = dev_start;
            st->n_group = n_group;
            st->numel = s == 0 ? rows : 2 * rows; /* the maxima; the sums and target logits */
        }
        tg->in_deps[n] = n_steps; /* the second waits for the first */
        tg->in_steps[n_steps + 1].dep = n;
        tg->in_steps[n_steps + 1].n_deps = 1;
        n_steps += 2;
        n++;
    }
    out->n = n;
    out->groups = tg->in_groups;
    out->parts = tg->in_parts;
    out->n_steps = n_steps;
    out->steps = tg->in_steps;
    out->devs = tg->in_devs;
    out->deps = tg->in_deps;
    return n;
}
