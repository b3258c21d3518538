/*
 * sim_build.c - the simulator's block builders: what each block of the task
 * graph holds (sim_impl.h), priced.
 *
 * core(op) gets the forward and backward task of every part, edge(op, k) the
 * transfers and runtime copies of the task graph's pairs that feed input k
 * (build_edge, edge_pair, add_transfer, add_copy), sync(owner) the gradient sync
 * of every weight shard (build_sync: a ring all-reduce, add_ring_edge, or a
 * parameter server, build_ps) and the updates; in bulk sync mode one barrier
 * block joins each device's backward tasks. A block is a deterministic function
 * of a few operators' configs, which is what lets delta simulation rebuild only
 * the blocks a change touches (sim_rebuild_block, called by sim.c). The builders
 * live apart from the layout and the scheduler because they are the part that
 * decides what communication costs; they read the machine, the cost model and
 * the task graph, and call nothing else of the simulator's but its link
 * resources (sim_links.c).
 */
#include <math.h>
#include <string.h>

#include "sim_impl.h"

#define MIN_TASK_S 1e-9 /* every resource-holding task takes some time */

/* ---- blocks ---------------------------------------------------------------- */

static void block_reset(sim_block *b) {
    b->n_tasks = 0;
    b->n_edges = 0;
    b->n_mem = 0;
    memset(&b->st, 0, sizeof b->st);
    b->mem_inexact = 0;
}

static int block_task(sim_block *b, sim_kind kind, int res, int op, int part, double dur,
                      int64_t bytes) {
    if (sim_grow_int((void **)&b->tasks, &b->cap_tasks, b->n_tasks + 1, sizeof *b->tasks))
        return -1;
    sim_task *t = &b->tasks[b->n_tasks];
    t->dur_s = res == SIM_NO_RES ? 0.0 : (dur > MIN_TASK_S ? dur : MIN_TASK_S);
    t->bytes = bytes;
    t->res = res;
    t->op = op;
    t->part = (int16_t)part;
    t->dev = -1;
    t->kind = (uint8_t)kind;
    t->pad = 0;
    return b->n_tasks++;
}

/* A task that runs on device dev: on the resource of the core dev computes on
 * when the machine's devices share cores (local device l on core l % cores, a
 * core's resource being that of the node's device of its number), so that
 * devices of one core take turns; else on dev's own. */
static int device_task(const sf_sim *sim, sim_block *b, sim_kind kind, int dev, int op, int part,
                       double dur) {
    int res = dev;
    if (sim->cores > 0) res = dev - dev % sim->per_node + dev % sim->per_node % sim->cores;
    int idx = block_task(b, kind, res, op, part, dur, 0);
    if (idx >= 0) b->tasks[idx].dev = (int16_t)dev;
    return idx;
}

static int block_edge(sim_block *b, int64_t from, int64_t to) {
    if (sim_grow_int((void **)&b->edges, &b->cap_edges, b->n_edges + 1, sizeof *b->edges))
        return -1;
    b->edges[b->n_edges++] = (sim_edge){from, to};
    return 0;
}

static int block_mem(sim_block *b, int dev, double bytes) {
    if (sim_grow_int((void **)&b->mem, &b->cap_mem, b->n_mem + 1, sizeof *b->mem)) return -1;
    b->mem[b->n_mem++] = (sim_mem){dev, bytes};
    if (!(bytes >= 0 && bytes <= SIM_EXACT_BYTES && bytes == floor(bytes))) b->mem_inexact = 1;
    return 0;
}

/* ---- block builders --------------------------------------------------------- */

static int op_has_bwd(const sf_op *op) { return op->type != SF_OP_INPUT; }

static int build_core(sf_sim *sim, int opi) {
    sim_block *b = &sim->blocks[sim_block_id(opi, SLOT_CORE)];
    block_reset(b);
    const sf_op *op = sf_graph_op(sim->g, opi);
    const sf_config *c = sf_strategy_get(sim->s, opi);
    int n = c->n_parts, bwd = op_has_bwd(op);
    /* The part tiles, kept by the task graph for the edge and sync blocks of
     * this operator and of its neighbours: computing them costs divisions, and
     * every block that touches the operator needs them. */
    sf_taskgraph_set_tiles(sim->tg, opi);
    const sf_tile *tiles = sim_part_tiles(sim, opi);
    double bwd_s[SF_MAX_PARTS]; /* both passes are costed at once, the backward tasks come later */
    for (int p = 0; p < n; p++) {
        const sf_tile t = tiles[p];
        int dev = c->device[p];
        double d;
        sf_cost_task_fwd_bwd_s(sim->cm, op, &t, dev, &d, &bwd_s[p]);
        if (device_task(sim, b, SIM_FWD, dev, opi, p, d) < 0) return -1;
        b->st.compute_s += b->tasks[b->n_tasks - 1].dur_s;
        /* Activations: the part's outputs, plus whatever it saves beyond its
         * inputs (LSTM gates, attention scores). Inputs are the outputs of other
         * parts, counted there, or copies received from another device, counted
         * by the edge block that brings them. */
        sf_op_mem mem;
        sf_op_tile_memory(op, &t, &mem);
        double in_bytes = 0;
        for (int k = 0; k < op->n_inputs; k++) {
            sf_tile r;
            sf_op_input_region(op, &t, k, &r);
            in_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
        }
        double extra = mem.saved_bytes > in_bytes ? mem.saved_bytes - in_bytes : 0;
        if (block_mem(b, dev, mem.output_bytes + extra)) return -1;
    }
    if (bwd) {
        int bid = sim_block_id(opi, SLOT_CORE);
        for (int p = 0; p < n; p++) {
            int dev = c->device[p];
            if (device_task(sim, b, SIM_BWD, dev, opi, p, bwd_s[p]) < 0) return -1;
            b->st.compute_s += b->tasks[b->n_tasks - 1].dur_s;
            if (block_edge(b, REF(bid, p), REF(bid, n + p))) return -1;
            if (sim->opt.sync == SF_SYNC_BULK &&
                block_edge(b, REF(bid, n + p), REF(BARRIER_BLOCK(sim), dev)))
                return -1;
        }
    }
    return 0;
}

/* Add a chain of link tasks from `from` to `to` (none when negative) along the
 * route a -> b, store-and-forward. A route of several links carries the message
 * in opt.segments pieces of whole bytes (the first bytes % segments of them one
 * byte longer), each a chain of its own: piece s crosses link i after crossing
 * link i-1, and each link takes the pieces in order (they become ready in key
 * order), so the hops work at once, as a pipeline. SIM_SYNC chains count as
 * gradient sync, the others as transfers. */
static int add_transfer(sf_sim *sim, sim_block *b, int bid, sim_kind kind, int op, int part, int a,
                        int dst, int64_t bytes, int64_t from, int64_t to) {
    sf_route r;
    sf_machine_route(sim->m, a, dst, &r);
    int sync = kind == SIM_SYNC;
    int nseg = r.n_links > 1 ? sim->opt.segments : 1;
    for (int s = 0; s < nseg; s++) {
        int64_t piece = bytes / nseg + (s < bytes % nseg);
        int64_t prev = from;
        for (int i = 0; i < r.n_links; i++) {
            sf_link lb;
            const sf_link *l = sf_machine_link(sim->m, r.links[i], &lb);
            double d = l->latency_s + (double)piece / l->bandwidth_Bps;
            int res = sim_link_res(sim, r.links[i]);
            int idx = res < 0 ? -1 : block_task(b, kind, res, op, part, d, piece);
            if (idx < 0) return -1;
            *(sync ? &b->st.sync_s : &b->st.xfer_s) += b->tasks[idx].dur_s;
            *(l->inter_node ? &b->st.inter_bytes : &b->st.intra_bytes) += piece;
            if (block_edge(b, prev, REF(bid, idx))) return -1;
            prev = REF(bid, idx);
        }
        if (to >= 0 && block_edge(b, prev, to)) return -1;
    }
    *(sync ? &b->st.sync_bytes : &b->st.xfer_bytes) += bytes;
    return 0;
}

/* A copy on dev that moves `moved` bytes (read plus written) at the machine's
 * copy bandwidth (sim->copy_bw > 0), after `from` (none when negative): its
 * reference, -1 when out of memory. */
static int64_t add_copy(sf_sim *sim, sim_block *b, int bid, int op, int part, int dev, double moved,
                        int64_t from) {
    int idx = device_task(sim, b, SIM_COPY, dev, op, part, moved / sim->copy_bw);
    if (idx < 0) return -1;
    b->st.compute_s += b->tasks[idx].dur_s;
    if (from >= 0 && block_edge(b, from, REF(bid, idx))) return -1;
    return REF(bid, idx);
}

/* The tasks of one pair. On a machine that prices copies, also the copies the
 * runtime makes (runtime.c): a local pair not in place copies its region into
 * the consumer's input (read + write) and, unless in place for gradients,
 * accumulates the input gradient back into the producer's (read, read,
 * write); a message is packed on the sender and unpacked on the receiver, and
 * its gradient packed on the consumer and accumulated on the producer. */
static int edge_pair(sf_sim *sim, sim_block *b, int bid, int xi, int pi, const sf_tg_pair *pr,
                     int p_bwd, int np, int nx) {
    int core_x = sim_block_id(xi, SLOT_CORE), core_p = sim_block_id(pi, SLOT_CORE);
    int i = pr->prod_part, j = pr->cons_part, di = pr->src_dev, dj = pr->dst_dev;
    int64_t p_fwd = REF(core_p, i), x_fwd = REF(core_x, j);
    int64_t p_b = REF(core_p, np + i), x_b = REF(core_x, nx + j);
    int64_t bytes = pr->numel * SF_ELEM_BYTES;
    double by = (double)bytes;
    int copies = sim->copy_bw > 0;
    if (di == dj) {
        int64_t f =
            !copies || pr->in_place ? p_fwd : add_copy(sim, b, bid, xi, j, dj, 2 * by, p_fwd);
        if (f < 0 || block_edge(b, f, x_fwd)) return -1;
        if (!p_bwd) return 0;
        int64_t g =
            !copies || pr->in_place == 2 ? x_b : add_copy(sim, b, bid, xi, j, dj, 3 * by, x_b);
        return g < 0 || block_edge(b, g, p_b) ? -1 : 0;
    }
    int64_t from = p_fwd, to = x_fwd;
    if (copies) {
        from = add_copy(sim, b, bid, xi, j, di, 2 * by, p_fwd);
        to = add_copy(sim, b, bid, xi, j, dj, 2 * by, -1);
        if (from < 0 || to < 0 || block_edge(b, to, x_fwd)) return -1;
    }
    if (add_transfer(sim, b, bid, SIM_XFER, xi, j, di, dj, bytes, from, to)) return -1;
    if (block_mem(b, dj, by)) return -1; /* the received copy lives on dj */
    if (!p_bwd) return 0;
    from = x_b;
    to = p_b;
    if (copies) {
        from = add_copy(sim, b, bid, xi, j, dj, 2 * by, x_b);
        to = add_copy(sim, b, bid, xi, j, di, 3 * by, -1);
        if (from < 0 || to < 0 || block_edge(b, to, p_b)) return -1;
    }
    return add_transfer(sim, b, bid, SIM_GRAD, xi, j, dj, di, bytes, from, to);
}

/* The transfers and dependencies that feed input k of xi: the task graph's
 * pairs (taskgraph.c), priced. */
static int build_edge(sf_sim *sim, int xi, int k) {
    int bid = sim_block_id(xi, 1 + k);
    sim_block *b = &sim->blocks[bid];
    block_reset(b);
    int pi = sf_graph_op(sim->g, xi)->inputs[k].op;
    int p_bwd = op_has_bwd(sf_graph_op(sim->g, pi));
    int np = sf_strategy_get(sim->s, pi)->n_parts, nx = sf_strategy_get(sim->s, xi)->n_parts;
    const sf_tg_pair *pr;
    int n = sf_taskgraph_edge(sim->tg, xi, k, &pr);
    if (n < 0) return -1;
    for (int q = 0; q < n; q++)
        if (edge_pair(sim, b, bid, xi, pi, &pr[q], p_bwd, np, nx)) return -1;
    return 0;
}

/* Bytes that position i of a ring of R sends in the all-reduce of a shard of n
 * elements, cut into R chunks of whole elements (n / R, the first n % R of them
 * one more): every chunk but one in the reduce-scatter (all but chunk i + 1)
 * and every chunk but one in the all-gather (all but i + 2). The R positions
 * send 2(R-1) n elements in all. */
static int64_t ring_send_bytes(int64_t n, int R, int i) {
    int64_t q = n / R, rem = n % R;
    int64_t skip = q + ((i + 1) % R < rem) + q + ((i + 2) % R < rem);
    return (2 * n - skip) * SF_ELEM_BYTES;
}

/* One ring edge a -> dst: each link of its route held for the whole all-reduce,
 * for steps latencies and send bytes (the mean over the ring's positions) at
 * sync_bw (the machine's all-reduce curve at the shard's size) or, when 0, at
 * the link's bandwidth, and counted as the `bytes` this position sends
 * (ring_send_bytes). */
static int add_ring_edge(sf_sim *sim, sim_block *b, int bid, int owner, int cls, int a, int dst,
                         double steps, double send, double sync_bw, int64_t bytes, int bar,
                         int bar2) {
    sf_route r;
    sf_machine_route(sim->m, a, dst, &r);
    for (int i = 0; i < r.n_links; i++) {
        sf_link lb;
        const sf_link *l = sf_machine_link(sim->m, r.links[i], &lb);
        double bw = sync_bw > 0 ? sync_bw : l->bandwidth_Bps;
        double d = steps * l->latency_s + send / bw;
        int res = sim_link_res(sim, r.links[i]);
        int idx = res < 0 ? -1 : block_task(b, SIM_SYNC, res, owner, cls, d, bytes);
        if (idx < 0) return -1;
        b->st.sync_s += b->tasks[idx].dur_s;
        if (l->inter_node)
            b->st.inter_bytes += bytes;
        else
            b->st.intra_bytes += bytes;
        if (block_edge(b, REF(bid, bar), REF(bid, idx))) return -1;
        if (block_edge(b, REF(bid, idx), REF(bid, bar2))) return -1;
    }
    b->st.sync_bytes += bytes;
    return 0;
}

/* The backward tasks of shard row `row` (one device d of a shard: its entries,
 * in entry order) into `to`; in bulk mode d's barrier instead. */
static int grads_done(sf_sim *sim, sim_block *b, const sf_tg_sync *sy, int row, int d, int64_t to) {
    if (sim->opt.sync == SF_SYNC_BULK) return block_edge(b, REF(BARRIER_BLOCK(sim), d), to);
    for (int32_t i = sy->ent_start[row]; i < sy->ent_start[row + 1]; i++) {
        const sf_tg_entry *e = &sy->ents[i];
        const sf_config *c = sf_strategy_get(sim->s, e->op);
        if (block_edge(b, REF(sim_block_id(e->op, SLOT_CORE), c->n_parts + e->part), to)) return -1;
    }
    return 0;
}

/* Parameter-server sync of one shard (as the simulator of FlexFlow's Legion
 * runtime, 2020-21, priced it; not its 2018 prototype): every other replica
 * device sends its gradient to the server, the device of the shard's first
 * entry, once its backward is done; the server updates the shard and sends it
 * back to each of them. The server holds the optimizer state; the others
 * weights and gradients. */
static int build_ps(sf_sim *sim, sim_block *b, int bid, int owner, int cls, const sf_tg_sync *sy,
                    const sf_tg_shard *sh, const sf_op *rop, const sf_tile *rt, int64_t shard) {
    int server = sh->rep_dev, srow = -1;
    for (int r = 0; r < sh->n_devs; r++)
        if (sy->devs[sh->dev_start + r] == server) srow = sh->dev_start + r;
    double u = sf_cost_task_s(sim->cm, rop, rt, server, SF_PASS_UPDATE);
    int ut = device_task(sim, b, SIM_UPDATE, server, owner, cls, u);
    if (ut < 0) return -1;
    b->st.compute_s += b->tasks[ut].dur_s;
    if (grads_done(sim, b, sy, srow, server, REF(bid, ut))) return -1;
    for (int r = sh->dev_start; r < sh->dev_start + sh->n_devs; r++) {
        int d = sy->devs[r];
        double state = d == server ? 2.0 + sim->opt.optimizer_state_factor : 2.0;
        if (block_mem(b, d, (double)shard * state)) return -1;
        if (d == server) continue;
        int j = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
        if (j < 0 || grads_done(sim, b, sy, r, d, REF(bid, j)) ||
            add_transfer(sim, b, bid, SIM_SYNC, owner, cls, d, server, shard, REF(bid, j),
                         REF(bid, ut)) ||
            add_transfer(sim, b, bid, SIM_SYNC, owner, cls, server, d, shard, REF(bid, ut), -1))
            return -1;
    }
    return 0;
}

/* The gradient sync and update of every shard of owner's weight group (the
 * task graph's shards, taskgraph.c): a ring all-reduce over the shard's devices
 * in id order, or a parameter server, then an update on each replica. */
static int build_sync(sf_sim *sim, int owner) {
    int bid = sim_block_id(owner, SLOT_SYNC);
    sim_block *b = &sim->blocks[bid];
    block_reset(b);
    sf_tg_sync sy;
    if (sf_taskgraph_sync(sim->tg, owner, &sy) != SF_OK) return -1;
    for (int cls = 0; cls < sy.n_shards; cls++) {
        const sf_tg_shard *sh = &sy.shards[cls];
        const int16_t *devs = sy.devs + sh->dev_start;
        const sf_op *rop = sf_graph_op(sim->g, sh->rep_op);
        const sf_tile rt = sim_part_tiles(sim, sh->rep_op)[sh->rep_part];
        int64_t shard_el = sh->numel, shard_bytes = shard_el * SF_ELEM_BYTES;
        int R = sh->n_devs;
        if (R > 1 && sim->opt.scheme == SF_SCHEME_PS) {
            if (build_ps(sim, b, bid, owner, cls, &sy, sh, rop, &rt, shard_bytes)) return -1;
            continue;
        }
        int64_t join = -1;
        if (R > 1) {
            int bar = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
            int bar2 = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
            if (bar < 0 || bar2 < 0) return -1;
            for (int r = 0; r < R; r++) {
                /* the runtime packs the shard's slices into one buffer first */
                int64_t pk = REF(bid, bar);
                if (sim->copy_bw > 0) {
                    pk = add_copy(sim, b, bid, owner, cls, devs[r], 2.0 * (double)shard_bytes, -1);
                    if (pk < 0 || block_edge(b, pk, REF(bid, bar))) return -1;
                }
                if (grads_done(sim, b, &sy, sh->dev_start + r, devs[r], pk)) return -1;
            }
            double steps = 2.0 * (R - 1);
            double send = steps / R * (double)shard_bytes;
            double sbw = sf_machine_sync_bw(sf_machine_get_desc(sim->m), (double)shard_bytes);
            for (int r = 1; r < R; r++)
                if (add_ring_edge(sim, b, bid, owner, cls, devs[r - 1], devs[r], steps, send, sbw,
                                  ring_send_bytes(shard_el, R, r - 1), bar, bar2))
                    return -1;
            if (add_ring_edge(sim, b, bid, owner, cls, devs[R - 1], devs[0], steps, send, sbw,
                              ring_send_bytes(shard_el, R, R - 1), bar, bar2))
                return -1;
            join = REF(bid, bar2);
        }
        for (int r = 0; r < R; r++) {
            int d = devs[r];
            double u = sf_cost_task_s(sim->cm, rop, &rt, d, SF_PASS_UPDATE);
            int ut = device_task(sim, b, SIM_UPDATE, d, owner, cls, u);
            if (ut < 0) return -1;
            b->st.compute_s += b->tasks[ut].dur_s;
            if (block_mem(b, d, (double)shard_bytes * (2.0 + sim->opt.optimizer_state_factor)))
                return -1;
            int64_t after = join;
            if (join >= 0 && sim->copy_bw > 0) { /* and unpacks the sums */
                after = add_copy(sim, b, bid, owner, cls, d, 2.0 * (double)shard_bytes, join);
                if (after < 0) return -1;
            }
            if (after >= 0 ? block_edge(b, after, REF(bid, ut))
                           : grads_done(sim, b, &sy, sh->dev_start + r, d, REF(bid, ut)))
                return -1;
        }
    }
    return 0;
}

/* ---- assembly ----------------------------------------------------------------- */

/* Bulk sync mode: one zero-time barrier per device (core blocks wire every
 * backward task into its device's barrier, sync blocks start from them). */
static int build_barriers(sf_sim *sim) {
    sim_block *b = &sim->blocks[BARRIER_BLOCK(sim)];
    block_reset(b);
    if (sim->opt.sync != SF_SYNC_BULK) return 0;
    for (int d = 0; d < sim->n_dev; d++)
        if (block_task(b, SIM_BARRIER, SIM_NO_RES, -1, d, 0, 0) < 0) return -1;
    return 0;
}

static int build_block(sf_sim *sim, int bid) {
    int opi = bid / SIM_SLOTS, slot = bid % SIM_SLOTS;
    if (opi == sim->n_ops) return build_barriers(sim);
    if (slot == SLOT_CORE) return build_core(sim, opi);
    if (slot == SLOT_SYNC) {
        if (sf_taskgraph_owner(sim->tg, opi) == opi) return build_sync(sim, opi);
        block_reset(&sim->blocks[bid]);
        return 0;
    }
    return build_edge(sim, opi, slot - 1);
}

/* Copy a block's stats to the dense array collect reads; called whenever the
 * block in place changes (built, or restored by a revert). */
void sim_publish_stats(sf_sim *sim, int bid) { sim->stats[sim->pos[bid]] = sim->blocks[bid].st; }

int sim_rebuild_block(sf_sim *sim, int bid) {
    if (build_block(sim, bid)) return -1;
    sim_publish_stats(sim, bid);
    return 0;
}
