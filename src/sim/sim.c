/*
 * sim.c - FlexFlow's execution simulator: task graph, full and delta simulation.
 *
 * The task graph lives in blocks (see sim_impl.h): core(op) holds the forward and
 * backward task of every part of op, edge(op, k) the transfers that feed input k
 * of op and the gradients that flow back, sync(owner) the all-reduce and update
 * tasks of a weight group. A full simulation builds every block; a delta
 * simulation rebuilds the blocks that one operator's config touches: its core,
 * its input edges, the input edges of its consumers and its weight group's sync.
 * Blocks are then laid out into flat arrays (one pass, no allocation once the
 * capacity is reached) and scheduled.
 *
 * Scheduling is event-driven list scheduling: a binary heap of ready tasks keyed
 * by (ready time, canonical key); each device and each link is a resource that
 * runs one task at a time in the order tasks become ready. Every resource-holding
 * task has a positive duration, so a successor is always ready strictly after its
 * predecessor is, and (ready, key) order is a valid execution order. Because keys
 * are canonical, the schedule of a patched task graph is identical to that of a
 * graph built from scratch: delta equals full, bit for bit.
 *
 * Gradient synchronization is a ring all-reduce over the devices that hold a
 * weight shard, in device-id order. A ring is bandwidth-optimal (each device sends
 * 2(R-1)/R of the shard) and, with devices in id order, crosses each node
 * boundary once, so the NICs carry one ring edge each - what NCCL's rings do on
 * these machines. Every link of every ring edge is held for the whole all-reduce:
 * 2(R-1) steps of latency plus 2(R-1)/R * S / bandwidth. A hierarchical scheme
 * moves the same bytes over the NICs; the ring is simpler and as fast here.
 *
 * Memory per device: weights, their gradients and optimizer state (factor from
 * the options) for every distinct shard it holds, plus the saved activations and
 * outputs of every part it runs, all counted as alive at once (the peak of a
 * training iteration is at the end of the forward pass, when all are alive).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

#define REF(block, idx) (((int64_t)(block) << SIM_IDX_BITS) | (int64_t)(idx))
#define MIN_TASK_S 1e-9 /* every resource-holding task takes some time */

static int block_id(int op, int slot) { return op * SIM_SLOTS + slot; }
#define SLOT_CORE 0
#define SLOT_SYNC (SIM_SLOTS - 1)

void sf_sim_options_default(sf_sim_options *o) {
    memset(o, 0, sizeof *o);
    o->optimizer_state_factor = 1.0;
    o->keep_schedule = 1;
}

/* ---- growable arrays ------------------------------------------------------ */

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    size_t bytes;
    if (sf_mul_overflow_size((size_t)nc, elem, &bytes)) return -1;
    void *q = realloc(*p, bytes);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int grow_int(void **p, int *cap, int need, size_t elem) {
    int64_t c = *cap;
    if (grow(p, &c, need, elem)) return -1;
    *cap = (int)c;
    return 0;
}

/* ---- blocks ---------------------------------------------------------------- */

static void block_reset(sim_block *b) {
    b->n_tasks = 0;
    b->n_edges = 0;
    b->n_mem = 0;
    b->xfer_bytes = b->sync_bytes = b->intra_bytes = b->inter_bytes = 0;
    b->xfer_s = b->sync_s = b->compute_s = 0;
}

static int block_task(sim_block *b, sim_kind kind, int res, int op, int part, double dur,
                      double bytes) {
    if (grow_int((void **)&b->tasks, &b->cap_tasks, b->n_tasks + 1, sizeof *b->tasks)) return -1;
    sim_task *t = &b->tasks[b->n_tasks];
    t->dur_s = res == SIM_NO_RES ? 0.0 : (dur > MIN_TASK_S ? dur : MIN_TASK_S);
    t->bytes = bytes;
    t->res = res;
    t->op = op;
    t->part = (int16_t)part;
    t->kind = (uint8_t)kind;
    t->pad = 0;
    return b->n_tasks++;
}

static int block_edge(sim_block *b, int64_t from, int64_t to) {
    if (grow_int((void **)&b->edges, &b->cap_edges, b->n_edges + 1, sizeof *b->edges)) return -1;
    b->edges[b->n_edges++] = (sim_edge){from, to};
    return 0;
}

static int block_mem(sim_block *b, int dev, double bytes) {
    if (grow_int((void **)&b->mem, &b->cap_mem, b->n_mem + 1, sizeof *b->mem)) return -1;
    b->mem[b->n_mem++] = (sim_mem){dev, bytes};
    return 0;
}

/* ---- setup ----------------------------------------------------------------- */

sf_sim *sf_sim_new(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                   const sf_sim_options *o, sf_error *err) {
    if (!g || !m || !cm) {
        sf_error_set(err, SF_ERR_INVALID, "simulator needs a graph, a machine and a cost model");
        return NULL;
    }
    int n_ops = sf_graph_num_ops(g);
    for (int i = 0; i < n_ops; i++) {
        if (sf_graph_op(g, i)->n_inputs > SIM_SLOTS - 2) {
            sf_error_set(err, SF_ERR_UNSUPPORTED, "operator '%s' has more than %d inputs",
                         sf_graph_op(g, i)->name, SIM_SLOTS - 2);
            return NULL;
        }
    }
    sf_sim *sim = calloc(1, sizeof *sim);
    if (!sim) goto oom;
    sim->g = g;
    sim->m = m;
    sim->cm = cm;
    if (o)
        sim->opt = *o;
    else
        sf_sim_options_default(&sim->opt);
    sim->n_ops = n_ops;
    sim->undo_op = -1;
    sim->n_dev = sf_machine_num_devices(m);
    sim->n_links = sf_machine_num_links(m);
    sim->n_res = sim->n_dev + sim->n_links;
    sim->s = sf_strategy_new(g);
    sim->n_blocks = n_ops * SIM_SLOTS;
    sim->blocks = calloc((size_t)sim->n_blocks, sizeof *sim->blocks);
    sim->block_off = calloc((size_t)sim->n_blocks + 1, sizeof *sim->block_off);
    sim->dirty = calloc((size_t)sim->n_blocks, 1);
    sim->group_owner = malloc((size_t)(n_ops ? n_ops : 1) * sizeof *sim->group_owner);
    sim->group_members = calloc((size_t)(n_ops ? n_ops : 1), sizeof *sim->group_members);
    sim->group_size = calloc((size_t)(n_ops ? n_ops : 1), sizeof *sim->group_size);
    sim->cons_start = calloc((size_t)n_ops + 1, sizeof *sim->cons_start);
    sim->res_free = calloc((size_t)sim->n_res + 1, sizeof *sim->res_free);
    sim->device_busy = calloc((size_t)sim->n_dev, sizeof *sim->device_busy);
    sim->device_mem = calloc((size_t)sim->n_dev, sizeof *sim->device_mem);
    sim->scratch_dev = calloc((size_t)sim->n_dev, sizeof *sim->scratch_dev);
    if (!sim->s || !sim->blocks || !sim->block_off || !sim->dirty || !sim->group_owner ||
        !sim->group_members || !sim->group_size || !sim->cons_start || !sim->res_free ||
        !sim->device_busy || !sim->device_mem || !sim->scratch_dev)
        goto oom;

    /* weight groups */
    for (int i = 0; i < n_ops; i++) {
        const sf_op *op = sf_graph_op(g, i);
        sim->group_owner[i] = op->weight_owner >= 0 ? op->weight_owner : op->n_params > 0 ? i : -1;
        if (sim->group_owner[i] >= 0) sim->group_size[sim->group_owner[i]]++;
    }
    for (int i = 0; i < n_ops; i++) {
        if (sim->group_size[i] > 0) {
            sim->group_members[i] = malloc((size_t)sim->group_size[i] * sizeof(int));
            if (!sim->group_members[i]) goto oom;
            sim->group_size[i] = 0;
        }
    }
    for (int i = 0; i < n_ops; i++) {
        int ow = sim->group_owner[i];
        if (ow >= 0) sim->group_members[ow][sim->group_size[ow]++] = i;
    }
    /* consumers, as (op, input index) */
    int n_cons = 0;
    for (int i = 0; i < n_ops; i++) n_cons += sf_graph_op(g, i)->n_inputs;
    sim->cons = malloc((size_t)(n_cons ? n_cons : 1) * sizeof *sim->cons);
    if (!sim->cons) goto oom;
    for (int i = 0; i < n_ops; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) sim->cons_start[op->inputs[k].op + 1]++;
    }
    for (int i = 0; i < n_ops; i++) sim->cons_start[i + 1] += sim->cons_start[i];
    {
        int *fill = calloc((size_t)n_ops + 1, sizeof *fill);
        if (!fill) goto oom;
        for (int i = 0; i < n_ops; i++) {
            const sf_op *op = sf_graph_op(g, i);
            for (int k = 0; k < op->n_inputs; k++) {
                int p = op->inputs[k].op;
                sim->cons[sim->cons_start[p] + fill[p]++] = (sf_tensor_ref){i, k};
            }
        }
        free(fill);
    }
    return sim;
oom:
    sf_sim_free(sim);
    sf_error_set(err, SF_ERR_NOMEM, "out of memory creating the simulator");
    return NULL;
}

void sf_sim_free(sf_sim *sim) {
    if (!sim) return;
    if (sim->blocks) {
        for (int i = 0; i < sim->n_blocks; i++) {
            free(sim->blocks[i].tasks);
            free(sim->blocks[i].edges);
            free(sim->blocks[i].mem);
        }
    }
    if (sim->group_members)
        for (int i = 0; i < sim->n_ops; i++) free(sim->group_members[i]);
    free(sim->group_members);
    free(sim->group_size);
    free(sim->group_owner);
    free(sim->blocks);
    free(sim->block_off);
    free(sim->dirty);
    free(sim->cons_start);
    free(sim->cons);
    free(sim->dur);
    free(sim->ready);
    free(sim->start);
    free(sim->finish);
    free(sim->key);
    free(sim->res);
    free(sim->npred);
    free(sim->pending);
    free(sim->succ_start);
    free(sim->succ);
    free(sim->edge_from);
    free(sim->edge_to);
    free(sim->heap);
    free(sim->res_free);
    free(sim->device_busy);
    free(sim->device_mem);
    free(sim->scratch_dev);
    free(sim->sync_entries);
    sf_strategy_free(sim->s);
    free(sim);
}

const sf_strategy *sf_sim_strategy(const sf_sim *sim) { return sim->s; }

/* ---- block builders --------------------------------------------------------- */

static int op_has_bwd(const sf_op *op) { return op->type != SF_OP_INPUT; }

static int build_core(sf_sim *sim, int opi) {
    sim_block *b = &sim->blocks[block_id(opi, SLOT_CORE)];
    block_reset(b);
    const sf_op *op = sf_graph_op(sim->g, opi);
    const sf_config *c = sf_strategy_get(sim->s, opi);
    int n = c->n_parts, bwd = op_has_bwd(op);
    for (int p = 0; p < n; p++) {
        sf_tile t;
        sf_config_part_tile(op, c, p, &t);
        int dev = c->device[p];
        double d = sf_cost_task_s(sim->cm, op, &t, dev, SF_PASS_FWD);
        if (block_task(b, SIM_FWD, dev, opi, p, d, 0) < 0) return -1;
        b->compute_s += b->tasks[b->n_tasks - 1].dur_s;
        sf_op_mem mem;
        sf_op_tile_memory(op, &t, &mem);
        if (block_mem(b, dev, mem.saved_bytes + mem.output_bytes)) return -1;
    }
    if (bwd) {
        int bid = block_id(opi, SLOT_CORE);
        for (int p = 0; p < n; p++) {
            sf_tile t;
            sf_config_part_tile(op, c, p, &t);
            int dev = c->device[p];
            double d = sf_cost_task_s(sim->cm, op, &t, dev, SF_PASS_BWD);
            if (block_task(b, SIM_BWD, dev, opi, p, d, 0) < 0) return -1;
            b->compute_s += b->tasks[b->n_tasks - 1].dur_s;
            if (block_edge(b, REF(bid, p), REF(bid, n + p))) return -1;
        }
    }
    return 0;
}

/* Add a chain of link tasks from `from` to `to` along the route a -> b. */
static int add_transfer(sf_sim *sim, sim_block *b, int bid, sim_kind kind, int op, int part, int a,
                        int dst, double bytes, int64_t from, int64_t to) {
    sf_route r;
    sf_machine_route(sim->m, a, dst, &r);
    int64_t prev = from;
    for (int i = 0; i < r.n_links; i++) {
        const sf_link *l = sf_machine_link(sim->m, r.links[i]);
        double d = l->latency_s + bytes / l->bandwidth_Bps;
        int idx = block_task(b, kind, sim->n_dev + r.links[i], op, part, d, bytes);
        if (idx < 0) return -1;
        b->xfer_s += b->tasks[idx].dur_s;
        if (l->inter_node)
            b->inter_bytes += bytes;
        else
            b->intra_bytes += bytes;
        if (block_edge(b, prev, REF(bid, idx))) return -1;
        prev = REF(bid, idx);
    }
    if (block_edge(b, prev, to)) return -1;
    b->xfer_bytes += bytes;
    return 0;
}

static int build_edge(sf_sim *sim, int xi, int k) {
    int bid = block_id(xi, 1 + k);
    sim_block *b = &sim->blocks[bid];
    block_reset(b);
    const sf_op *x = sf_graph_op(sim->g, xi);
    int pi = x->inputs[k].op, out = x->inputs[k].out;
    const sf_op *p = sf_graph_op(sim->g, pi);
    const sf_config *cx = sf_strategy_get(sim->s, xi);
    const sf_config *cp = sf_strategy_get(sim->s, pi);
    int core_x = block_id(xi, SLOT_CORE), core_p = block_id(pi, SLOT_CORE);
    int p_bwd = op_has_bwd(p);
    for (int j = 0; j < cx->n_parts; j++) {
        sf_tile tj, rj;
        sf_config_part_tile(x, cx, j, &tj);
        sf_op_input_region(x, &tj, k, &rj);
        if (sf_tile_empty(&rj)) continue;
        int dj = cx->device[j];
        for (int i = 0; i < cp->n_parts; i++) {
            sf_tile ti, oi, inter;
            sf_config_part_tile(p, cp, i, &ti);
            sf_op_output_tile(p, &ti, out, &oi);
            if (!sf_tile_intersect(&oi, &rj, &inter)) continue;
            int di = cp->device[i];
            int64_t p_fwd = REF(core_p, i), x_fwd = REF(core_x, j);
            int64_t p_b = REF(core_p, cp->n_parts + i), x_b = REF(core_x, cx->n_parts + j);
            if (di == dj) {
                if (block_edge(b, p_fwd, x_fwd)) return -1;
                if (p_bwd && block_edge(b, x_b, p_b)) return -1;
                continue;
            }
            double bytes = (double)sf_tile_numel(&inter) * SF_ELEM_BYTES;
            if (add_transfer(sim, b, bid, SIM_XFER, xi, j, di, dj, bytes, p_fwd, x_fwd)) return -1;
            if (p_bwd && add_transfer(sim, b, bid, SIM_GRAD, xi, j, dj, di, bytes, x_b, p_b))
                return -1;
        }
    }
    return 0;
}

/* One (op, part) of a weight group, with the key of its parameter shard. */
typedef struct sync_entry {
    int64_t lo[SF_MAX_DIMS], hi[SF_MAX_DIMS];
    int op, part, dev, cls;
} sync_entry;

static int same_shard(const sync_entry *a, const sync_entry *b, int nd) {
    for (int i = 0; i < nd; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]) return 0;
    return 1;
}

static int add_ring_edge(sf_sim *sim, sim_block *b, int bid, int owner, int cls, int a, int dst,
                         double steps, double send, int bar, int bar2) {
    sf_route r;
    sf_machine_route(sim->m, a, dst, &r);
    for (int i = 0; i < r.n_links; i++) {
        const sf_link *l = sf_machine_link(sim->m, r.links[i]);
        double d = steps * l->latency_s + send / l->bandwidth_Bps;
        int idx = block_task(b, SIM_SYNC, sim->n_dev + r.links[i], owner, cls, d, send);
        if (idx < 0) return -1;
        b->sync_s += b->tasks[idx].dur_s;
        if (l->inter_node)
            b->inter_bytes += send;
        else
            b->intra_bytes += send;
        if (block_edge(b, REF(bid, bar), REF(bid, idx))) return -1;
        if (block_edge(b, REF(bid, idx), REF(bid, bar2))) return -1;
    }
    b->sync_bytes += send;
    return 0;
}

static int build_sync(sf_sim *sim, int owner) {
    int bid = block_id(owner, SLOT_SYNC);
    sim_block *b = &sim->blocks[bid];
    block_reset(b);
    const int *members = sim->group_members[owner];
    int nm = sim->group_size[owner];
    int64_t n_ent = 0;
    for (int i = 0; i < nm; i++) n_ent += sf_strategy_get(sim->s, members[i])->n_parts;
    if (grow((void **)&sim->sync_entries, &sim->cap_sync_entries, n_ent, sizeof(sync_entry)))
        return -1;
    sync_entry *e = sim->sync_entries;
    const sf_op *own = sf_graph_op(sim->g, owner);
    int nd = own->space.ndim;
    int64_t ne = 0;
    for (int i = 0; i < nm; i++) {
        const sf_op *op = sf_graph_op(sim->g, members[i]);
        const sf_config *c = sf_strategy_get(sim->s, members[i]);
        for (int p = 0; p < c->n_parts; p++) {
            sf_tile t;
            sf_config_part_tile(op, c, p, &t);
            sync_entry *x = &e[ne++];
            memset(x, 0, sizeof *x);
            for (int d = 0; d < nd && d < t.ndim; d++) {
                if (op->kinds[d] == SF_DIM_PARAMETER) {
                    x->lo[d] = t.lo[d];
                    x->hi[d] = t.hi[d];
                }
            }
            x->op = members[i];
            x->part = p;
            x->dev = c->device[p];
            x->cls = -1;
        }
    }
    /* Group entries into shard classes, in order of first appearance. */
    int n_cls = 0;
    for (int64_t i = 0; i < ne; i++) {
        if (e[i].cls >= 0) continue;
        e[i].cls = n_cls;
        for (int64_t j = i + 1; j < ne; j++)
            if (e[j].cls < 0 && same_shard(&e[i], &e[j], nd)) e[j].cls = n_cls;
        n_cls++;
    }
    for (int cls = 0; cls < n_cls; cls++) {
        /* distinct devices of the class, in id order, and a representative entry */
        memset(sim->scratch_dev, 0, (size_t)sim->n_dev * sizeof *sim->scratch_dev);
        int rep = -1;
        for (int64_t i = 0; i < ne; i++) {
            if (e[i].cls != cls) continue;
            if (rep < 0) rep = (int)i;
            sim->scratch_dev[e[i].dev] = 1;
        }
        const sf_op *rop = sf_graph_op(sim->g, e[rep].op);
        sf_tile rt;
        sf_config_part_tile(rop, sf_strategy_get(sim->s, e[rep].op), e[rep].part, &rt);
        double shard_bytes = (double)sf_op_tile_weights(rop, &rt) * SF_ELEM_BYTES;
        int R = 0;
        for (int d = 0; d < sim->n_dev; d++) R += sim->scratch_dev[d];
        int64_t join = -1;
        if (R > 1) {
            int bar = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
            int bar2 = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
            if (bar < 0 || bar2 < 0) return -1;
            for (int64_t i = 0; i < ne; i++) {
                if (e[i].cls != cls) continue;
                const sf_config *c = sf_strategy_get(sim->s, e[i].op);
                int core = block_id(e[i].op, SLOT_CORE);
                if (block_edge(b, REF(core, c->n_parts + e[i].part), REF(bid, bar))) return -1;
            }
            int first = -1, prev = -1;
            double steps = 2.0 * (R - 1);
            double send = steps / R * shard_bytes;
            for (int d = 0; d < sim->n_dev; d++) {
                if (!sim->scratch_dev[d]) continue;
                if (first < 0) first = d;
                if (prev >= 0 &&
                    add_ring_edge(sim, b, bid, owner, cls, prev, d, steps, send, bar, bar2))
                    return -1;
                prev = d;
            }
            if (add_ring_edge(sim, b, bid, owner, cls, prev, first, steps, send, bar, bar2))
                return -1;
            join = REF(bid, bar2);
        }
        for (int d = 0; d < sim->n_dev; d++) {
            if (!sim->scratch_dev[d]) continue;
            double u = sf_cost_task_s(sim->cm, rop, &rt, d, SF_PASS_UPDATE);
            int ut = block_task(b, SIM_UPDATE, d, owner, cls, u, 0);
            if (ut < 0) return -1;
            b->compute_s += b->tasks[ut].dur_s;
            if (block_mem(b, d, shard_bytes * (2.0 + sim->opt.optimizer_state_factor))) return -1;
            if (join >= 0) {
                if (block_edge(b, join, REF(bid, ut))) return -1;
            } else {
                for (int64_t i = 0; i < ne; i++) {
                    if (e[i].cls != cls || e[i].dev != d) continue;
                    const sf_config *c = sf_strategy_get(sim->s, e[i].op);
                    int core = block_id(e[i].op, SLOT_CORE);
                    if (block_edge(b, REF(core, c->n_parts + e[i].part), REF(bid, ut))) return -1;
                }
            }
        }
    }
    return 0;
}

/* ---- assembly and scheduling ------------------------------------------------ */

/* Visit the blocks an operator can own, in canonical (id) order. */
#define FOR_OP_BLOCKS(sim, opi, bid)                                                     \
    for (int slot_ = 0, nin_ = sf_graph_op((sim)->g, (opi))->n_inputs; slot_ < SIM_SLOTS; \
         slot_ = slot_ < nin_ ? slot_ + 1 : (slot_ == SLOT_SYNC ? SIM_SLOTS : SLOT_SYNC))  \
        for (int bid = block_id((opi), slot_), once_ = 1; once_; once_ = 0)

static int rebuild_dirty(sf_sim *sim) {
    for (int opi = 0; opi < sim->n_ops; opi++) {
        FOR_OP_BLOCKS(sim, opi, bid) {
            if (!sim->dirty[bid]) continue;
            int slot = bid % SIM_SLOTS, rc;
            if (slot == SLOT_CORE)
                rc = build_core(sim, opi);
            else if (slot == SLOT_SYNC)
                rc = sim->group_owner[opi] == opi ? build_sync(sim, opi) : 0;
            else
                rc = build_edge(sim, opi, slot - 1);
            if (rc) return -1;
            sim->dirty[bid] = 0;
        }
    }
    return 0;
}

static int assemble(sf_sim *sim) {
    int64_t nt = 0, ne = 0;
    for (int opi = 0; opi < sim->n_ops; opi++) {
        FOR_OP_BLOCKS(sim, opi, bid) {
            sim->block_off[bid] = nt;
            nt += sim->blocks[bid].n_tasks;
            ne += sim->blocks[bid].n_edges;
        }
    }
    int64_t ct = sim->cap_tasks, ce = sim->cap_edges;
    if (nt > ct) {
        int64_t c;
        c = ct;
        if (grow((void **)&sim->dur, &c, nt, sizeof(double))) return -1;
        c = ct;
        if (grow((void **)&sim->ready, &c, nt, sizeof(double))) return -1;
        c = ct;
        if (grow((void **)&sim->start, &c, nt, sizeof(double))) return -1;
        c = ct;
        if (grow((void **)&sim->finish, &c, nt, sizeof(double))) return -1;
        c = ct;
        if (grow((void **)&sim->key, &c, nt, sizeof(uint64_t))) return -1;
        c = ct;
        if (grow((void **)&sim->res, &c, nt, sizeof(int32_t))) return -1;
        c = ct;
        if (grow((void **)&sim->npred, &c, nt, sizeof(int32_t))) return -1;
        c = ct;
        if (grow((void **)&sim->pending, &c, nt, sizeof(int32_t))) return -1;
        c = ct;
        if (grow((void **)&sim->succ_start, &c, nt + 1, sizeof(int32_t))) return -1;
        c = ct;
        if (grow((void **)&sim->heap, &c, nt, sizeof(sim_heap_item))) return -1;
        sim->cap_tasks = c;
    }
    if (ne > ce) {
        int64_t c;
        c = ce;
        if (grow((void **)&sim->succ, &c, ne, sizeof(int32_t))) return -1;
        c = ce;
        if (grow((void **)&sim->edge_from, &c, ne, sizeof(int64_t))) return -1;
        c = ce;
        if (grow((void **)&sim->edge_to, &c, ne, sizeof(int64_t))) return -1;
        sim->cap_edges = c;
    }
    if (nt >= INT32_MAX || ne >= INT32_MAX) return -1;
    sim->n_tasks = nt;
    sim->n_edges = ne;
    memset(sim->npred, 0, (size_t)nt * sizeof *sim->npred);
    memset(sim->succ_start, 0, (size_t)(nt + 1) * sizeof *sim->succ_start);
    int64_t e = 0;
    for (int opi = 0; opi < sim->n_ops; opi++) {
        FOR_OP_BLOCKS(sim, opi, bid) {
            const sim_block *b = &sim->blocks[bid];
            int64_t off = sim->block_off[bid];
            for (int i = 0; i < b->n_tasks; i++) {
                sim->dur[off + i] = b->tasks[i].dur_s;
                sim->res[off + i] = b->tasks[i].res;
                sim->key[off + i] = (uint64_t)REF(bid, i);
            }
            for (int i = 0; i < b->n_edges; i++) {
                int64_t f = b->edges[i].from, t = b->edges[i].to;
                int64_t fg = sim->block_off[f >> SIM_IDX_BITS] + (f & ((1 << SIM_IDX_BITS) - 1));
                int64_t tg = sim->block_off[t >> SIM_IDX_BITS] + (t & ((1 << SIM_IDX_BITS) - 1));
                sim->edge_from[e] = fg;
                sim->edge_to[e] = tg;
                sim->npred[tg]++;
                sim->succ_start[fg + 1]++;
                e++;
            }
        }
    }
    for (int64_t i = 0; i < nt; i++) sim->succ_start[i + 1] += sim->succ_start[i];
    /* pending doubles as the fill cursor while scattering successors */
    for (int64_t i = 0; i < nt; i++) sim->pending[i] = sim->succ_start[i];
    for (int64_t i = 0; i < ne; i++) sim->succ[sim->pending[sim->edge_from[i]]++] = (int32_t)sim->edge_to[i];
    return 0;
}

static int heap_less(const sim_heap_item *a, const sim_heap_item *b) {
    return a->ready < b->ready || (a->ready == b->ready && a->key < b->key);
}

static void heap_push(sim_heap_item *h, int64_t *n, sim_heap_item it) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static sim_heap_item heap_pop(sim_heap_item *h, int64_t *n) {
    sim_heap_item top = h[0], last = h[--(*n)];
    int64_t i = 0, m = *n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (m > 0) h[i] = last;
    return top;
}

static sf_status schedule(sf_sim *sim, double *makespan, sf_error *err) {
    int64_t nt = sim->n_tasks, hn = 0, done = 0;
    memset(sim->ready, 0, (size_t)nt * sizeof *sim->ready);
    memset(sim->res_free, 0, (size_t)sim->n_res * sizeof *sim->res_free);
    memcpy(sim->pending, sim->npred, (size_t)nt * sizeof *sim->pending);
    for (int64_t i = 0; i < nt; i++)
        if (sim->npred[i] == 0) heap_push(sim->heap, &hn, (sim_heap_item){0.0, sim->key[i], (int32_t)i});
    double end = 0;
    while (hn > 0) {
        sim_heap_item it = heap_pop(sim->heap, &hn);
        int32_t t = it.gid;
        int32_t r = sim->res[t];
        double st = it.ready;
        if (r >= 0 && sim->res_free[r] > st) st = sim->res_free[r];
        double fin = st + sim->dur[t];
        if (r >= 0) sim->res_free[r] = fin;
        sim->start[t] = st;
        sim->finish[t] = fin;
        if (fin > end) end = fin;
        done++;
        for (int32_t k = sim->succ_start[t]; k < sim->succ_start[t + 1]; k++) {
            int32_t s = sim->succ[k];
            if (fin > sim->ready[s]) sim->ready[s] = fin;
            if (--sim->pending[s] == 0)
                heap_push(sim->heap, &hn, (sim_heap_item){sim->ready[s], sim->key[s], s});
        }
    }
    if (done != nt)
        return sf_error_set(err, SF_ERR_INTERNAL, "task graph has a cycle (%lld of %lld scheduled)",
                            (long long)done, (long long)nt);
    *makespan = end;
    return SF_OK;
}

static void collect(sf_sim *sim, double makespan, sf_sim_result *r) {
    memset(r, 0, sizeof *r);
    r->iter_s = makespan;
    r->tasks = sim->n_tasks;
    r->n_devices = sim->n_dev;
    memset(sim->device_busy, 0, (size_t)sim->n_dev * sizeof *sim->device_busy);
    memset(sim->device_mem, 0, (size_t)sim->n_dev * sizeof *sim->device_mem);
    for (int opi = 0; opi < sim->n_ops; opi++) {
        FOR_OP_BLOCKS(sim, opi, bid) {
            const sim_block *b = &sim->blocks[bid];
            r->compute_s += b->compute_s;
            r->transfer_s += b->xfer_s;
            r->sync_s += b->sync_s;
            r->transfer_bytes += b->xfer_bytes;
            r->sync_bytes += b->sync_bytes;
            r->intra_bytes += b->intra_bytes;
            r->inter_bytes += b->inter_bytes;
            for (int i = 0; i < b->n_mem; i++) sim->device_mem[b->mem[i].dev] += b->mem[i].bytes;
            for (int i = 0; i < b->n_tasks; i++)
                if (b->tasks[i].res >= 0 && b->tasks[i].res < sim->n_dev)
                    sim->device_busy[b->tasks[i].res] += b->tasks[i].dur_s;
        }
    }
    r->fits = 1;
    for (int d = 0; d < sim->n_dev; d++) {
        if (sim->device_mem[d] > r->peak_mem_bytes) r->peak_mem_bytes = sim->device_mem[d];
        if (sim->device_mem[d] > sf_machine_device_kind(sim->m, d)->mem_bytes) r->fits = 0;
    }
    r->device_busy_s = sim->device_busy;
    r->device_mem_bytes = sim->device_mem;
    sim->last = *r;
}

static sf_status simulate(sf_sim *sim, sf_sim_result *r, sf_error *err) {
    if (rebuild_dirty(sim) || assemble(sim))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
    double makespan = 0;
    sf_status st = schedule(sim, &makespan, err);
    if (st != SF_OK) return st;
    collect(sim, makespan, r);
    sim->has_run = 1;
    return SF_OK;
}

sf_status sf_sim_run(sf_sim *sim, const sf_strategy *s, sf_sim_result *r, sf_error *err) {
    sf_status st = sf_strategy_validate(s, sim->g, sim->m, err);
    if (st != SF_OK) return st;
    sf_strategy_copy(sim->s, s);
    sim->undo_op = -1;
    for (int opi = 0; opi < sim->n_ops; opi++) {
        FOR_OP_BLOCKS(sim, opi, bid) { sim->dirty[bid] = 1; }
    }
    return simulate(sim, r, err);
}

sf_status sf_sim_update(sf_sim *sim, int opi, const sf_config *c, sf_sim_result *r,
                        sf_error *err) {
    if (!sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "delta simulation before a full simulation");
    const sf_op *op = sf_graph_op(sim->g, opi);
    if (!op) return sf_error_set(err, SF_ERR_INVALID, "operator %d out of range", opi);
    sf_status st = sf_config_validate(op, sim->m, c, err);
    if (st != SF_OK) return st;
    sim->undo_op = opi;
    sim->undo_cfg = *sf_strategy_get(sim->s, opi);
    *sf_strategy_config(sim->s, opi) = *c;
    sim->dirty[block_id(opi, SLOT_CORE)] = 1;
    for (int k = 0; k < op->n_inputs; k++) sim->dirty[block_id(opi, 1 + k)] = 1;
    for (int i = sim->cons_start[opi]; i < sim->cons_start[opi + 1]; i++)
        sim->dirty[block_id(sim->cons[i].op, 1 + sim->cons[i].out)] = 1;
    if (sim->group_owner[opi] >= 0) sim->dirty[block_id(sim->group_owner[opi], SLOT_SYNC)] = 1;
    return simulate(sim, r, err);
}

sf_status sf_sim_revert(sf_sim *sim, sf_sim_result *r, sf_error *err) {
    if (sim->undo_op < 0) return sf_error_set(err, SF_ERR_INVALID, "nothing to revert");
    int op = sim->undo_op;
    sf_config c = sim->undo_cfg;
    sf_sim_result tmp;
    sf_status st = sf_sim_update(sim, op, &c, r ? r : &tmp, err);
    sim->undo_op = -1;
    return st;
}

const sim_task *sim_task_of(const sf_sim *sim, int64_t gid, int *block) {
    uint64_t k = sim->key[gid];
    int bid = (int)(k >> SIM_IDX_BITS);
    if (block) *block = bid;
    return &sim->blocks[bid].tasks[k & ((1u << SIM_IDX_BITS) - 1)];
}
