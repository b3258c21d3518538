/*
 * optcnn_cost.c - OptCNN's additive cost model (optcnn.c gives the model;
 * this file prices it). Everything that moves is the task graph's steps,
 * priced by the task graph's one pricing function (sf_tg_price_step), as the
 * simulator prices them: the same pairs, shards, sync schemes, routes,
 * calibrated all-reduce curve, copies and shared cores. What is OptCNN's own
 * is only how the prices add up:
 *   node(op, c) = compute + (sync + update) / G
 *     compute: the largest, over the resources devices compute on (a device,
 *              or the core devices share: sf_machine_compute_unit), of the
 *              forward + backward times of the parts it runs, plus the steps
 *              inside the operator (sf_taskgraph_op_inner: a group's one
 *              after another, the slowest group);
 *     sync:    the shards' steps (but updates) in levels (a step's level is
 *              one more than its deepest dependency's); per level, the
 *              busiest resource's summed use (a link, or a compute unit for
 *              copies); summed over the levels: a ring is its reduce-scatter's
 *              slowest link plus its all-gather's, shards that share a link
 *              queue on it;
 *     update:  the busiest compute unit's summed update times;
 *     G:       the operators that share the weights (an RNN layer's steps),
 *              each charged its share of what it would pay alone
 *              (sf_taskgraph_op_sync_steps);
 *   edge(u -> v, cu, cv) = the largest, over devices, of the steps of the
 *     pairs that deliver into it (transfers and copies of each pair's forward
 *     direction, each a chain, so their uses add), or over links, of the
 *     messages that cross it (a node's NIC queues every message out of the
 *     node), whichever is larger; plus the same for the gradients flowing back
 *     (sf_taskgraph_pair_steps).
 * Levels and resources are kept in a small open-addressing table cleared
 * through the list of slots used, so a cost allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optcnn_impl.h"

#define OC_MAX_LEVELS 16 /* the deepest list a scheme lowers to has 7 levels */

sf_status oc_scratch_init(oc_scratch *s, const sf_graph *g, const sf_machine *m,
                          const sf_cost_model *cm, sf_sync_scheme scheme) {
    memset(s, 0, sizeof *s);
    int n_dev = sf_machine_num_devices(m), n_ops = sf_graph_num_ops(g);
    size_t n = (size_t)(n_dev > 0 ? n_dev : 1);
    s->g = g;
    s->m = m;
    s->cm = cm;
    s->n_dev = n_dev;
    s->sharers = calloc((size_t)(n_ops > 0 ? n_ops : 1), sizeof *s->sharers);
    if (!s->sharers) return SF_ERR_NOMEM;
    /* count each group at its owner (weight_owner names the owner itself), then
     * give every member its owner's count */
    for (int i = 0; i < n_ops; i++) {
        const sf_op *op = sf_graph_op(g, i);
        s->sharers[op->weight_owner >= 0 ? op->weight_owner : i]++;
    }
    for (int i = 0; i < n_ops; i++) {
        int owner = sf_graph_op(g, i)->weight_owner;
        if (owner >= 0) s->sharers[i] = s->sharers[owner];
    }
    s->fwd = calloc(n, sizeof *s->fwd);
    s->bwd = calloc(n, sizeof *s->bwd);
    s->busy = calloc(n, sizeof *s->busy);
    s->touched = calloc(n, sizeof *s->touched);
    s->mark = calloc(n, sizeof *s->mark);
    s->s = sf_strategy_new(g);
    s->tg = sf_taskgraph_new(g, n_dev, NULL);
    s->routes = sf_tg_routes_new(m, n_dev < SF_MAX_PARTS ? n_dev : SF_MAX_PARTS);
    s->uses_cap = 4 * SF_MAX_ROUTE * (int)(n > SF_MAX_PARTS ? n : SF_MAX_PARTS);
    s->uses = calloc((size_t)s->uses_cap, sizeof *s->uses);
    s->level = calloc(2 * n + 64, sizeof *s->level);
    s->dmem = calloc(n, sizeof *s->dmem);
    s->dtouched = calloc(n, sizeof *s->dtouched);
    s->dmark = calloc(n, sizeof *s->dmark);
    s->upd = calloc(n, sizeof *s->upd);
    s->kept = calloc((size_t)(n_ops > 0 ? n_ops : 1), sizeof *s->kept);
    for (int i = 0; s->kept && i < n_ops; i++) s->kept[i] = sf_graph_kept_mask(g, i);
    /* the simulator's constants (sim.c, sim_build.c's weight_mem) */
    s->act_scale = (double)sf_cost_elem_bytes(cm) / SF_ELEM_BYTES;
    s->w_state = 2.0 + sf_optimizer_state_slots(sf_cost_optimizer(cm));
    s->w_elem = sf_cost_elem_bytes(cm);
    s->w_mixed = sf_dtype_mixed(sf_cost_dtype(cm));
    if (!s->fwd || !s->bwd || !s->busy || !s->touched || !s->mark || !s->s || !s->tg ||
        !s->routes || !s->uses || !s->level || !s->dmem || !s->dtouched || !s->dmark || !s->upd ||
        !s->kept) {
        oc_scratch_free(s);
        return SF_ERR_NOMEM;
    }
    s->cap_level = 2 * (int)n + 64;
    sf_taskgraph_set_strategy(s->tg, s->s);
    sf_taskgraph_set_comm(s->tg, m, scheme);
    return SF_OK;
}

void oc_scratch_free(oc_scratch *s) {
    free(s->sharers);
    free(s->kept);
    free(s->fwd);
    free(s->bwd);
    free(s->busy);
    free(s->touched);
    free(s->mark);
    free(s->uses);
    free(s->level);
    free(s->dmem);
    free(s->dtouched);
    free(s->dmark);
    free(s->upd);
    free(s->acc);
    free(s->acc_used);
    sf_strategy_free(s->s);
    sf_taskgraph_free(s->tg);
    sf_tg_routes_free(s->routes);
    memset(s, 0, sizeof *s);
}

void oc_set_config(oc_scratch *s, int op, const sf_config *c, const sf_tile *tiles) {
    if (sf_taskgraph_reserve_tiles(s->tg, op, c->n_parts) != SF_OK) {
        s->nomem = 1; /* the old config and its tiles stay, consistent; the caller fails */
        return;
    }
    sf_config_copy(sf_strategy_config(s->s, op), c);
    if (tiles)
        memcpy(sf_taskgraph_tiles(s->tg, op), tiles, (size_t)c->n_parts * sizeof *tiles);
    else
        sf_taskgraph_set_tiles(s->tg, op);
}

/* ---- per-(level, resource) sums ---------------------------------------------------- */

static uint64_t acc_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Room for n more keys (the table at most half full); -1 when out of memory. */
static int acc_reserve(oc_scratch *s, int n) {
    if (2 * (s->n_acc + n) <= s->cap_acc) return 0;
    int cap = s->cap_acc ? s->cap_acc : 256;
    while (2 * (s->n_acc + n) > cap) cap *= 2;
    oc_acc *a = calloc((size_t)cap, sizeof *a);
    int *used = malloc((size_t)cap * sizeof *used);
    if (!a || !used) {
        free(a);
        free(used);
        return -1;
    }
    int m = 0;
    for (int i = 0; i < s->n_acc; i++) { /* rehash what is there */
        const oc_acc *e = &s->acc[s->acc_used[i]];
        uint32_t h = (uint32_t)acc_hash((uint64_t)e->key) & (uint32_t)(cap - 1);
        while (a[h].used) h = (h + 1) & (uint32_t)(cap - 1);
        a[h] = *e;
        used[m++] = (int)h;
    }
    free(s->acc);
    free(s->acc_used);
    s->acc = a;
    s->acc_used = used;
    s->cap_acc = cap;
    return 0;
}

/* Add t to the sum of key; returns the new sum. */
static double acc_add(oc_scratch *s, int64_t key, double t) {
    uint32_t mask = (uint32_t)(s->cap_acc - 1), h = (uint32_t)acc_hash((uint64_t)key) & mask;
    while (s->acc[h].used && s->acc[h].key != key) h = (h + 1) & mask;
    oc_acc *e = &s->acc[h];
    if (!e->used) {
        e->used = 1;
        e->key = key;
        e->sum = 0;
        s->acc_used[s->n_acc++] = (int)h;
    }
    e->sum += t;
    return e->sum;
}

static void acc_clear(oc_scratch *s) {
    for (int i = 0; i < s->n_acc; i++) s->acc[s->acc_used[i]].used = 0;
    s->n_acc = 0;
}

/* The key of a use's resource at a level: a link, or the unit a device computes on. */
static int64_t use_key(const oc_scratch *s, int level, const sf_tg_use *u) {
    int64_t r =
        u->link >= 0 ? (int64_t)s->n_dev + u->link : (int64_t)sf_machine_compute_unit(s->m, u->dev);
    return ((int64_t)level << 40) | r;
}

/* ---- the additive cost of one operator and one edge ---------------------------------- */

/* Sync and update of op's shards (op's config and tiles set), not yet divided
 * among its group; -1 when out of memory. */
static double sync_cost(oc_scratch *s, int opi) {
    sf_tg_sync sy;
    sf_tg_steps ss;
    if (sf_taskgraph_op_sync_steps(s->tg, opi, &sy, &ss) != SF_OK) return -1;
    if (ss.n_steps > s->cap_level) {
        int *q = realloc(s->level, (size_t)ss.n_steps * sizeof *q);
        if (!q) return -1;
        s->level = q;
        s->cap_level = ss.n_steps;
    }
    double level_max[OC_MAX_LEVELS] = {0}, update = 0;
    acc_clear(s);
    const sf_tile *tiles = sf_taskgraph_tiles(s->tg, opi);
    sf_tg_pricer pr = {
        .m = s->m, .cm = s->cm, .segments = 1, .op = sf_graph_op(s->g, opi), .routes = s->routes};
    for (int sh = 0; sh < sy.n_shards; sh++) {
        pr.tile = &tiles[sy.shards[sh].rep_part];
        for (int i = ss.shard_start[sh]; i < ss.shard_start[sh + 1]; i++) {
            const sf_tg_step *st = &ss.steps[i];
            int lv = 0;
            for (int d = 0; d < st->n_deps; d++) {
                int l = s->level[ss.deps[st->dep + d]] + 1;
                if (l > lv) lv = l;
            }
            if (lv >= OC_MAX_LEVELS) lv = OC_MAX_LEVELS - 1;
            s->level[i] = lv;
            int need = sf_tg_step_max_uses(st, 1);
            if (need > s->uses_cap || acc_reserve(s, need)) return -1;
            int nu = sf_tg_price_step(&pr, st, ss.devs, s->uses);
            int is_update = st->kind == SF_STEP_UPDATE;
            double chain = 0;
            for (int u = 0; u < nu; u++) chain += s->uses[u].dur_s;
            for (int u = 0; u < nu; u++) {
                /* a P2P is a chain: its hops add, charged to each link it crosses */
                double t = st->kind == SF_STEP_P2P ? chain : s->uses[u].dur_s;
                double sum = acc_add(s, use_key(s, is_update ? OC_MAX_LEVELS : lv, &s->uses[u]), t);
                double *mx = is_update ? &update : &level_max[lv];
                if (sum > *mx) *mx = sum;
            }
        }
    }
    double sync = 0;
    for (int l = 0; l < OC_MAX_LEVELS; l++) sync += level_max[l];
    return sync + update;
}

/* The steps inside an operator split along its inner dimension
 * (sf_taskgraph_op_inner: softmax_ce's per-row statistics), added to its
 * compute: a group's steps one after another, the groups side by side; -1
 * when out of memory or a step has more uses than the scratch holds. */
static double inner_cost(oc_scratch *s, int opi) {
    sf_tg_inner in;
    int n = sf_taskgraph_op_inner(s->tg, opi, &in);
    if (n <= 0) return n;
    sf_tg_pricer pr = {.m = s->m, .cm = s->cm, .segments = 1, .routes = s->routes};
    double worst = 0;
    for (int g = 0; g < in.n; g++) {
        const sf_tg_inner_group *gr = &in.groups[g];
        double t = 0;
        for (int q = gr->step_start; q < gr->step_start + gr->n_steps; q++) {
            const sf_tg_step *st = &in.steps[q];
            if (sf_tg_step_max_uses(st, 1) > s->uses_cap) return -1;
            int nu = sf_tg_price_step(&pr, st, in.devs, s->uses);
            double step = 0;
            for (int u = 0; u < nu; u++) step = s->uses[u].dur_s > step ? s->uses[u].dur_s : step;
            t += step;
        }
        if (t > worst) worst = t;
    }
    return worst;
}

double oc_node_cost(oc_scratch *s, int opi, const sf_config *c) {
    const sf_op *op = sf_graph_op(s->g, opi);
    oc_set_config(s, opi, c, NULL);
    if (s->nomem) return NAN;
    const sf_tile *tiles = sf_taskgraph_tiles(s->tg, opi);
    int n = c->n_parts, nt = 0;
    int has_bwd = op->type != SF_OP_INPUT;
    for (int p = 0; p < n; p++) {
        int d = sf_machine_compute_unit(s->m, c->device[p]);
        if (!s->mark[d]) {
            s->mark[d] = 1;
            s->busy[d] = 0;
            s->touched[nt++] = d;
        }
        double t = sf_cost_task_s(s->cm, op, &tiles[p], c->device[p], SF_PASS_FWD);
        if (has_bwd) t += sf_cost_task_s(s->cm, op, &tiles[p], c->device[p], SF_PASS_BWD);
        s->busy[d] += t;
    }
    double compute = 0;
    for (int k = 0; k < nt; k++) {
        if (s->busy[s->touched[k]] > compute) compute = s->busy[s->touched[k]];
        s->mark[s->touched[k]] = 0;
    }
    double inner = inner_cost(s, opi);
    if (inner < 0) return NAN;
    compute += inner;
    if (op->n_params == 0) return compute;
    double sync = sync_cost(s, opi);
    if (sync < 0) return NAN;
    return compute + sync / s->sharers[opi];
}

/* The reductions of a partial-sum producer's groups (sf_taskgraph_edge_reduce
 * of the edge just listed), added to the edge's cost: a group's steps one after
 * another (a collective takes its slowest position, a message its chain), the
 * groups side by side (the slowest counts), forward and, with grad, the
 * gradient's dual; -1 when a step has more uses than the scratch holds. */
static void dm_add(oc_scratch *s, int d, double bytes, int kind, double *kinds);

static double reduce_cost(oc_scratch *s, int grad, int mem, double *kinds) {
    sf_tg_reduces rd;
    if (!sf_taskgraph_edge_reduce(s->tg, &rd)) return 0;
    sf_tg_pricer pr = {.m = s->m, .cm = s->cm, .segments = 1, .routes = s->routes};
    double worst[2] = {0, 0};
    for (int g = 0; g < rd.n; g++) {
        const sf_tg_reduce *gr = &rd.groups[g];
        double t[2] = {0, 0};
        for (int q = gr->step_start; q < gr->step_start + gr->n_steps; q++) {
            int back = q >= gr->step_start + gr->n_fwd;
            if (back && !grad) break;
            const sf_tg_step *st = &rd.steps[q];
            if (sf_tg_step_max_uses(st, 1) > s->uses_cap) return -1;
            /* the partial sum a message brings stays until the group's gradients
             * are in, in fp32 (sim_build.c's reduced edge) */
            if (mem && !back && st->kind == SF_STEP_P2P)
                dm_add(s, st->peer, (double)st->numel * SF_ELEM_BYTES, SF_SIM_MEM_RECEIVED, kinds);
            int nu = sf_tg_price_step(&pr, st, rd.devs, s->uses);
            double step = 0;
            for (int u = 0; u < nu; u++) {
                double d = s->uses[u].dur_s;
                step = st->kind == SF_STEP_P2P ? step + d : d > step ? d : step;
            }
            t[back] += step;
        }
        for (int b = 0; b < 2; b++)
            if (t[b] > worst[b]) worst[b] = t[b];
    }
    return worst[0] + worst[1];
}

/* ---- the memory model ----------------------------------------------------------- */

/* bytes of a kind on device d, summed per device (and, with kinds, by kind) */
static void dm_add(oc_scratch *s, int d, double bytes, int kind, double *kinds) {
    if (d < 0 || d >= s->n_dev) return;
    if (!s->dmark[d]) {
        s->dmark[d] = 1;
        s->dmem[d] = 0;
        s->dtouched[s->n_dt++] = d;
    }
    s->dmem[d] += bytes;
    if (kinds) kinds[(size_t)d * SF_SIM_MEM_KIND_COUNT + (size_t)kind] += bytes;
}

/* The largest device's sum since the last call; clears the sums. */
static double dm_take(oc_scratch *s) {
    double worst = 0;
    for (int i = 0; i < s->n_dt; i++) {
        int d = s->dtouched[i];
        if (s->dmem[d] > worst) worst = s->dmem[d];
        s->dmark[d] = 0;
    }
    s->n_dt = 0;
    return worst;
}

/* n weight elements on a device that holds them (sim_build.c's weight_mem). */
static double weight_bytes(const oc_scratch *s, int64_t n, int updates) {
    if (!s->w_mixed) return (double)(n * SF_ELEM_BYTES) * (updates ? s->w_state : 2.0);
    if (!updates) return (double)n * 2.0 * s->w_elem;
    return (double)n * (SF_ELEM_BYTES * (s->w_state - 1.0) + 2.0 * s->w_elem);
}

double oc_node_mem(oc_scratch *s, int opi, const sf_config *c, double *kinds) {
    const sf_op *op = sf_graph_op(s->g, opi);
    oc_set_config(s, opi, c, NULL);
    if (s->nomem) return NAN;
    const sf_tile *tiles = sf_taskgraph_tiles(s->tg, opi);
    for (int p = 0; p < c->n_parts; p++) {
        /* the part's outputs the backward keeps and what it saves beyond its
         * inputs (build_core) */
        double b = sf_op_tile_kept_bytes(op, &tiles[p], s->kept[opi]);
        dm_add(s, c->device[p], b * s->act_scale, SF_SIM_MEM_ACTIVATIONS, kinds);
    }
    if (op->n_params > 0) {
        sf_tg_sync sy;
        sf_tg_steps ss;
        if (sf_taskgraph_op_sync_steps(s->tg, opi, &sy, &ss) != SF_OK) {
            dm_take(s);
            return NAN;
        }
        double share = 1.0 / s->sharers[opi];
        for (int sh = 0; sh < sy.n_shards; sh++) {
            const sf_tg_shard *x = &sy.shards[sh];
            for (int q = ss.shard_start[sh]; q < ss.shard_start[sh + 1]; q++)
                if (ss.steps[q].kind == SF_STEP_UPDATE && ss.steps[q].dev >= 0 &&
                    ss.steps[q].dev < s->n_dev)
                    s->upd[ss.steps[q].dev] = 1;
            for (int r = x->dev_start; r < x->dev_start + x->n_devs; r++) {
                int d = sy.devs[r];
                dm_add(s, d, weight_bytes(s, x->numel, s->upd[d]) * share, SF_SIM_MEM_WEIGHTS,
                       kinds);
            }
            for (int q = ss.shard_start[sh]; q < ss.shard_start[sh + 1]; q++)
                if (ss.steps[q].dev >= 0 && ss.steps[q].dev < s->n_dev) s->upd[ss.steps[q].dev] = 0;
        }
    }
    return dm_take(s);
}

double oc_edge_cost_set(oc_scratch *s, int vi, int k) {
    return oc_edge_cost_mem_set(s, vi, k, NULL, NULL);
}

double oc_edge_cost_mem_set(oc_scratch *s, int vi, int k, double *memo, double *kinds) {
    const sf_op *v = sf_graph_op(s->g, vi);
    int grad = sf_graph_op(s->g, v->inputs[k].op)->type != SF_OP_INPUT;
    const sf_tg_pair *pairs;
    int np = sf_taskgraph_edge_moves(s->tg, vi, k, &pairs);
    if (np < 0) return NAN;
    sf_tg_pricer pr = {.m = s->m, .cm = s->cm, .segments = 1, .routes = s->routes};
    int nt = 0;
    double link_max[2] = {0, 0}; /* forward, backward: the busiest link's queue */
    acc_clear(s);
    int mem = memo != NULL;
    for (int q = 0; q < np; q++) {
        sf_tg_step st[SF_TG_PAIR_STEPS];
        int32_t deps[SF_TG_PAIR_STEPS];
        /* the copy received lives on the consumer's device (sim_build.c's edge_pair) */
        if (mem && pairs[q].src_dev != pairs[q].dst_dev)
            dm_add(s, pairs[q].dst_dev, (double)pairs[q].numel * SF_ELEM_BYTES * s->act_scale,
                   SF_SIM_MEM_RECEIVED, kinds);
        int n_fwd, n = sf_taskgraph_pair_steps(s->tg, &pairs[q], grad, st, deps, &n_fwd);
        for (int i = 0; i < n; i++) {
            int back = i >= n_fwd, into = back ? pairs[q].src_dev : pairs[q].dst_dev;
            if (!s->mark[into]) {
                s->mark[into] = 1;
                s->fwd[into] = s->bwd[into] = 0;
                s->touched[nt++] = into;
            }
            double t = sf_tg_step_chain_s(&pr, &st[i]);
            *(back ? &s->bwd[into] : &s->fwd[into]) += t;
            if (st[i].kind != SF_STEP_P2P) continue;
            /* messages that share a link (a node's NIC) queue on it, as they do
             * in the simulator: each message's chain charged to every link of it */
            int nu = sf_tg_price_step(&pr, &st[i], NULL, s->uses);
            /* a route of one link is a link of its own pair, which only messages
             * into the same device cross: the device's sum covers it */
            if (nu <= 1) continue;
            if (acc_reserve(s, nu)) {
                dm_take(s);
                return NAN;
            }
            for (int u = 0; u < nu; u++) {
                double sum = acc_add(s, use_key(s, back, &s->uses[u]), t);
                if (sum > link_max[back]) link_max[back] = sum;
            }
        }
    }
    double fmax = link_max[0], bmax = link_max[1];
    for (int q = 0; q < nt; q++) {
        int d = s->touched[q];
        if (s->fwd[d] > fmax) fmax = s->fwd[d];
        if (s->bwd[d] > bmax) bmax = s->bwd[d];
        s->mark[d] = 0;
    }
    double red = reduce_cost(s, grad, mem, kinds);
    double worst = dm_take(s);
    if (mem) *memo = worst;
    return red < 0 ? NAN : fmax + bmax + red;
}

double oc_edge_cost(oc_scratch *s, int vi, int k, const sf_config *cu, const sf_config *cv) {
    oc_set_config(s, sf_graph_op(s->g, vi)->inputs[k].op, cu, NULL);
    oc_set_config(s, vi, cv, NULL);
    if (s->nomem) return NAN;
    return oc_edge_cost_set(s, vi, k);
}
