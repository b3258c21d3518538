/*
 * sim.c - FlexFlow's execution simulator: task graph, full and delta simulation.
 *
 * The task graph lives in blocks (see sim_impl.h): core(op) holds the forward and
 * backward task of every part of op, edge(op, k) the transfers that feed input k
 * of op and the gradients that flow back, sync(owner) the all-reduce and update
 * tasks of a weight group. A full simulation builds every block; a delta
 * simulation rebuilds the blocks that one operator's config touches: its core,
 * its input edges, the input edges of its consumers and its weight group's sync.
 * Blocks are then laid out into flat arrays, one slot per task (no allocation
 * once the capacity is reached), and scheduled. A full run lays them out with a
 * counting sort of all edges; a delta update leaves the kept blocks' slots alone
 * and gives the rebuilt blocks fresh ones, so that it costs what it rebuilds
 * (layout_delta; the layout section says how).
 *
 * Scheduling is event-driven list scheduling: each device and each link is a
 * resource that runs one task at a time in the order tasks become ready, ties
 * broken by canonical key. A binary heap of ready tasks keyed by (ready time,
 * barriers first, canonical key) gives that order even where zero-time barriers
 * pass readiness on (the scheduling section says why). Because keys are
 * canonical, the schedule of a patched task graph is identical to that of a
 * graph built from scratch: delta equals full, bit for bit.
 *
 * Delta scheduling does not start over: nothing can differ before t0, the
 * earliest ready time of any removed, added or re-wired task (t0_bound), so the
 * tasks the old schedule ran before t0 keep their times and the event loop
 * resumes from there (schedule_resume). The alternative, propagating changes
 * task by task through per-resource queues as FlexFlow describes, touches the
 * same tasks in practice: a changed operator shifts everything after it on its
 * devices, and "after it" is most of the iteration. Two schedules are kept and
 * the layout logs what an update changed, so a rejected proposal is undone by
 * swapping the schedules back and replaying the log (sf_sim_revert), and a
 * bounded update (sf_sim_update_bounded) gives up as soon as the iteration is
 * sure to exceed the bound: when some resource's queued work exceeds it before
 * anything is laid out, or when a task's finish plus the work still queued on its
 * resource does during the event loop.
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
 * the options) for every distinct shard it holds, plus the outputs of every part
 * it runs, what those parts save beyond their inputs, and the copies of input
 * regions it receives from other devices, all counted as alive at once (the
 * peak of a training iteration is at the end of the forward pass, when every
 * activation kept for the backward pass is alive).
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
/* The one block that belongs to no operator: in bulk sync mode, a zero-time
 * barrier per device that joins every backward task on the device. It is built
 * once per full run and never rebuilt: core blocks hold the edges into it. */
#define BARRIER_BLOCK(sim) block_id((sim)->n_ops, 0)

void sf_sim_options_default(sf_sim_options *o) {
    memset(o, 0, sizeof *o);
    o->optimizer_state_factor = 1.0;
    o->keep_schedule = 1;
    o->sync = SF_SYNC_OVERLAP;
    o->segments = 1;
}

/* ---- growable arrays ------------------------------------------------------ */

/* The capacity to grow an array of cap elements to so that it holds need. */
static int64_t grown_cap(int64_t cap, int64_t need) {
    int64_t nc = cap ? cap : 256;
    while (nc < need) nc *= 2;
    return nc;
}

static int resize(void **p, int64_t n, size_t elem) {
    size_t bytes;
    if (sf_mul_overflow_size((size_t)n, elem, &bytes)) return -1;
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q) return -1;
    *p = q;
    return 0;
}

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = grown_cap(*cap, need);
    if (resize(p, nc, elem)) return -1;
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
    memset(&b->st, 0, sizeof b->st);
    b->mem_inexact = 0;
}

static int block_task(sim_block *b, sim_kind kind, int res, int op, int part, double dur,
                      int64_t bytes) {
    if (grow_int((void **)&b->tasks, &b->cap_tasks, b->n_tasks + 1, sizeof *b->tasks)) return -1;
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
    if (grow_int((void **)&b->edges, &b->cap_edges, b->n_edges + 1, sizeof *b->edges)) return -1;
    b->edges[b->n_edges++] = (sim_edge){from, to};
    return 0;
}

static int block_mem(sim_block *b, int dev, double bytes) {
    if (grow_int((void **)&b->mem, &b->cap_mem, b->n_mem + 1, sizeof *b->mem)) return -1;
    b->mem[b->n_mem++] = (sim_mem){dev, bytes};
    if (!(bytes >= 0 && bytes <= SIM_EXACT_BYTES && bytes == floor(bytes))) b->mem_inexact = 1;
    return 0;
}

/* ---- setup ----------------------------------------------------------------- */

static int sched_alloc_fixed(sim_sched *f, int n_dev, int n_res) {
    f->res_total = calloc((size_t)n_res + 1, sizeof *f->res_total);
    f->device_busy = calloc((size_t)n_dev + 1, sizeof *f->device_busy);
    f->device_mem = calloc((size_t)n_dev + 1, sizeof *f->device_mem);
    return f->res_total && f->device_busy && f->device_mem ? 0 : -1;
}

static void sched_free(sim_sched *f) {
    free(f->ready);
    free(f->start);
    free(f->finish);
    free(f->device_busy);
    free(f->device_mem);
    free(f->res_total);
}

static void layout_free(sim_layout *L) {
    free(L->span);
    free(L->rank_base);
    free(L->rank_cap);
    free(L->dur);
    free(L->res);
    free(L->key);
    free(L->rank);
    free(L->sadj);
    free(L->padj);
    free(L->succ);
    free(L->pred);
}

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
    sim->copy_bw = sf_machine_get_desc(m)->copy_bw_Bps;
    sim->per_node = sf_machine_get_desc(m)->devices_per_node;
    if (sf_machine_get_desc(m)->cores_per_node < sim->per_node)
        sim->cores = sf_machine_get_desc(m)->cores_per_node;
    if (o)
        sim->opt = *o;
    else
        sf_sim_options_default(&sim->opt);
    if (!sf_sync_mode_name(sim->opt.sync) || !sf_sync_scheme_name(sim->opt.scheme) ||
        sim->opt.segments < 1 || sim->opt.segments > SF_SIM_MAX_SEGMENTS) {
        int mode = (int)sim->opt.sync, scheme = (int)sim->opt.scheme, seg = sim->opt.segments;
        free(sim);
        sf_error_set(err, SF_ERR_INVALID,
                     "invalid simulator options: sync mode %d, scheme %d, segments %d (1 to %d)",
                     mode, scheme, seg, SF_SIM_MAX_SEGMENTS);
        return NULL;
    }
    sim->n_ops = n_ops;
    sim->n_undo = 0;
    sim->n_dev = sf_machine_num_devices(m);
    /* links become resources as tasks use them (sim_links.c) */
    sim->n_links = 0;
    sim->n_res = sim->n_dev;
    sim->cap_res = sim->n_dev + 256;
    sim->s = sf_strategy_new(g);
    sim->tg = sf_taskgraph_new(g, sim->n_dev, NULL);
    sim->n_blocks = n_ops * SIM_SLOTS + 1; /* + the barrier block */
    sim->blocks = calloc((size_t)sim->n_blocks + 1, sizeof *sim->blocks);
    sim->order = malloc((size_t)sim->n_blocks * sizeof *sim->order);
    sim->pos = malloc((size_t)sim->n_blocks * sizeof *sim->pos);
    sim->stats = calloc((size_t)sim->n_blocks, sizeof *sim->stats);
    sim->dirty = calloc((size_t)sim->n_blocks + 1, 1);
    sim->res_free = calloc((size_t)sim->cap_res + 1, sizeof *sim->res_free);
    sim->remaining = calloc((size_t)sim->cap_res + 1, sizeof *sim->remaining);
    sim->lay.span = calloc((size_t)sim->n_blocks, sizeof *sim->lay.span);
    sim->lay.rank_base = calloc((size_t)sim->n_blocks, sizeof *sim->lay.rank_base);
    sim->lay.rank_cap = calloc((size_t)sim->n_blocks, sizeof *sim->lay.rank_cap);
    sim->old_span = calloc((size_t)sim->n_blocks, sizeof *sim->old_span);
    sim->cur = &sim->sched[0];
    sim->prev = &sim->sched[1];
    sim->rank_room_max = UINT32_MAX;
    sim->compact_slack = 4096;
    if (!sim->s || !sim->blocks || !sim->order || !sim->pos || !sim->stats || !sim->dirty ||
        !sim->tg || !sim->res_free || !sim->remaining || !sim->lay.span || !sim->lay.rank_base ||
        !sim->lay.rank_cap || !sim->old_span ||
        sched_alloc_fixed(&sim->sched[0], sim->n_dev, sim->cap_res) ||
        sched_alloc_fixed(&sim->sched[1], sim->n_dev, sim->cap_res))
        goto oom;

    /* canonical block order: each operator's core, input edges and sync, then
     * the barrier block (pseudo-operator n_ops) */
    for (int i = 0; i < n_ops; i++) {
        int n_in = sf_graph_op(g, i)->n_inputs;
        for (int slot = 0; slot <= n_in; slot++) sim->order[sim->n_order++] = block_id(i, slot);
        sim->order[sim->n_order++] = block_id(i, SLOT_SYNC);
    }
    sim->order[sim->n_order++] = BARRIER_BLOCK(sim);
    for (int b = 0; b < sim->n_blocks; b++) sim->pos[b] = -1;
    for (int k = 0; k < sim->n_order; k++) sim->pos[sim->order[k]] = k;

    sf_taskgraph_set_strategy(sim->tg, sim->s);
    return sim;
oom:
    sf_sim_free(sim);
    sf_error_set(err, SF_ERR_NOMEM, "out of memory creating the simulator");
    return NULL;
}

static void block_free(sim_block *b) {
    free(b->tasks);
    free(b->edges);
    free(b->mem);
}

void sf_sim_free(sf_sim *sim) {
    if (!sim) return;
    if (sim->blocks)
        for (int i = 0; i < sim->n_blocks; i++) block_free(&sim->blocks[i]);
    for (int i = 0; i < sim->cap_saved; i++) block_free(&sim->saved[i].block);
    free(sim->saved);
    sf_taskgraph_free(sim->tg);
    free(sim->blocks);
    free(sim->order);
    free(sim->pos);
    free(sim->stats);
    free(sim->dirty);
    layout_free(&sim->lay);
    sched_free(&sim->sched[0]);
    sched_free(&sim->sched[1]);
    free(sim->pending);
    free(sim->heap);
    free(sim->touch_ix);
    free(sim->undo_adj);
    free(sim->old_span);
    free(sim->res_free);
    free(sim->remaining);
    sim_links_free(sim);
    free(sim->scratch);
    sf_strategy_free(sim->s);
    free(sim);
}

const sf_strategy *sf_sim_strategy(const sf_sim *sim) { return sim->s; }

/* ---- block builders --------------------------------------------------------- */

static int op_has_bwd(const sf_op *op) { return op->type != SF_OP_INPUT; }

static sf_tile *part_tiles(const sf_sim *sim, int opi) { return sf_taskgraph_tiles(sim->tg, opi); }

static int build_core(sf_sim *sim, int opi) {
    sim_block *b = &sim->blocks[block_id(opi, SLOT_CORE)];
    block_reset(b);
    const sf_op *op = sf_graph_op(sim->g, opi);
    const sf_config *c = sf_strategy_get(sim->s, opi);
    int n = c->n_parts, bwd = op_has_bwd(op);
    /* The part tiles, kept by the task graph for the edge and sync blocks of
     * this operator and of its neighbours: computing them costs divisions, and
     * every block that touches the operator needs them. */
    sf_taskgraph_set_tiles(sim->tg, opi);
    const sf_tile *tiles = part_tiles(sim, opi);
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
        int bid = block_id(opi, SLOT_CORE);
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
    int core_x = block_id(xi, SLOT_CORE), core_p = block_id(pi, SLOT_CORE);
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
    int bid = block_id(xi, 1 + k);
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
        if (block_edge(b, REF(block_id(e->op, SLOT_CORE), c->n_parts + e->part), to)) return -1;
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
    int bid = block_id(owner, SLOT_SYNC);
    sim_block *b = &sim->blocks[bid];
    block_reset(b);
    sf_tg_sync sy;
    if (sf_taskgraph_sync(sim->tg, owner, &sy) != SF_OK) return -1;
    for (int cls = 0; cls < sy.n_shards; cls++) {
        const sf_tg_shard *sh = &sy.shards[cls];
        const int16_t *devs = sy.devs + sh->dev_start;
        const sf_op *rop = sf_graph_op(sim->g, sh->rep_op);
        const sf_tile rt = part_tiles(sim, sh->rep_op)[sh->rep_part];
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

/* Visit every block in canonical (id) order (sim->order). */
#define FOR_ALL_BLOCKS(sim, bid)                                                                   \
    for (int bid##_k = 0, bid = 0; bid##_k < (sim)->n_order && (bid = (sim)->order[bid##_k], 1);   \
         bid##_k++)

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
static void publish_stats(sf_sim *sim, int bid) { sim->stats[sim->pos[bid]] = sim->blocks[bid].st; }

static int rebuild_block(sf_sim *sim, int bid) {
    if (build_block(sim, bid)) return -1;
    publish_stats(sim, bid);
    return 0;
}

/* ---- layout --------------------------------------------------------------------
 *
 * The scheduler works on flat arrays, one slot per task (sim_layout). A full run
 * lays every block out afresh, in canonical order and without gaps (layout_full):
 * a counting sort of all edges into successor and predecessor lists.
 *
 * A delta update keeps every slot of the blocks it does not rebuild, with its
 * duration, resource and lists, and hands the rebuilt blocks fresh slots at the
 * end (layout_delta); the replaced blocks' slots go dead. Nothing is copied or
 * renumbered, so the work is that of the rebuilt blocks and their neighbours:
 *
 *  - Where edges live: an edge owned by a rebuilt block always has an end in a
 *    rebuilt block (a transfer, a direct edge into or out of the changed
 *    operator's core, an edge into its group's sync), and an edge owned by a
 *    kept block joins two kept tasks (the rebuilt set holds every block that
 *    names the changed operator's tasks; bulk mode's barrier block owns no
 *    edges). So the lists that change are those of the rebuilt tasks (their
 *    blocks' edges alone) and of the kept tasks at the other end of a replaced
 *    or a new edge (their old entries into kept slots, plus the new edges).
 *  - A slot at or above sim->fresh (the slot count before the update) holds a
 *    rebuilt task; a slot below it a kept one, or a dead one nothing refers to.
 *  - A rewritten list goes to the end of succ[] or pred[] and the kept task's
 *    old lists into an undo log. A revert restores the logged lists and the
 *    replaced blocks' spans and hands the fresh slots and entries back: the
 *    replaced blocks' slots were never touched.
 *  - Dead slots and list entries pile up only as updates are kept; once they
 *    outnumber the live ones (plus some slack) the next update starts with a
 *    compaction: layout_full, and the current schedule copied over to the new
 *    slots (layout_compact).
 *  - The heap breaks ties by canonical key (see the scheduling section), which
 *    slot numbers no longer follow. Each task carries a 31-bit rank instead
 *    (in a 32-bit order word whose top bit says whether it holds a resource):
 *    each block owns a range of ranks in canonical order, with room to grow
 *    (assign_ranks), and a rebuilt block's tasks take the first ranks of its
 *    range. A block that outgrows its range makes all ranges be drawn again.
 *  - Sums over tasks that must come out as a full run's, bit for bit (res_total,
 *    hence per-device busy time), walk the blocks in canonical order.
 *
 * Rejected: slots in canonical order with spare room behind each block, so that
 * slot numbers could keep breaking ties. A move turns edge blocks of no tasks
 * (data parallelism: all transfers local) into hundreds, so rooms overflow all
 * the time and everything behind must move: with room for twice each block's
 * tasks plus 64, 586 of 598 inception_v3 / p100-4x4 updates of `bench sim`
 * overflowed, and 819 of 1500 in an MCMC search (more room helps little).
 * Fresh slots at the end never move anything; ranks cost a 4-byte load per
 * heap push, which does not show in the timings.
 */

#define SLOT_OF(sim, ref)                                                                          \
    ((int64_t)(sim)->lay.span[(sim)->pos[(ref) >> SIM_IDX_BITS]].base +                            \
     ((ref) & (((int64_t)1 << SIM_IDX_BITS) - 1)))

/* Room for need slots in every per-slot array; the fresh part of touch_ix
 * starts in its between-updates state. */
static int slots_reserve(sf_sim *sim, int64_t need) {
    sim_layout *L = &sim->lay;
    if (need <= L->cap_slots) return 0;
    if (need >= INT32_MAX) return -1;
    int64_t oc = L->cap_slots, nc = grown_cap(oc, need);
    if (nc >= INT32_MAX) nc = INT32_MAX - 1;
    if (resize((void **)&L->dur, nc, sizeof *L->dur) ||
        resize((void **)&L->res, nc, sizeof *L->res) ||
        resize((void **)&L->key, nc, sizeof *L->key) ||
        resize((void **)&L->rank, nc, sizeof *L->rank) ||
        resize((void **)&L->sadj, nc, sizeof *L->sadj) ||
        resize((void **)&L->padj, nc, sizeof *L->padj) ||
        resize((void **)&sim->pending, nc, sizeof *sim->pending) ||
        resize((void **)&sim->heap, nc, sizeof *sim->heap) ||
        resize((void **)&sim->touch_ix, nc, sizeof *sim->touch_ix))
        return -1;
    for (int i = 0; i < 2; i++) {
        sim_sched *f = &sim->sched[i];
        if (resize((void **)&f->ready, nc, sizeof *f->ready) ||
            resize((void **)&f->start, nc, sizeof *f->start) ||
            resize((void **)&f->finish, nc, sizeof *f->finish))
            return -1;
    }
    memset(sim->touch_ix + oc, 0xff, (size_t)(nc - oc) * sizeof *sim->touch_ix);
    L->cap_slots = nc;
    return 0;
}

/* Room for need entries in succ[] and in pred[]. */
static int adj_reserve(sf_sim *sim, int64_t need) {
    sim_layout *L = &sim->lay;
    if (need <= L->cap_adj) return 0;
    if (need >= INT32_MAX) return -1;
    int64_t nc = grown_cap(L->cap_adj, need);
    if (nc >= INT32_MAX) nc = INT32_MAX - 1;
    if (resize((void **)&L->succ, nc, sizeof *L->succ) ||
        resize((void **)&L->pred, nc, sizeof *L->pred))
        return -1;
    L->cap_adj = nc;
    return 0;
}

/* A block's tasks into slots base.. */
static void put_tasks(sf_sim *sim, int bid, int64_t base) {
    sim_layout *L = &sim->lay;
    const sim_block *b = &sim->blocks[bid];
    for (int i = 0; i < b->n_tasks; i++) {
        L->dur[base + i] = b->tasks[i].dur_s;
        L->res[base + i] = b->tasks[i].res;
        L->key[base + i] = (uint64_t)REF(bid, i);
    }
}

/* A block's order words (sim_layout.rank), after put_tasks has placed it. */
static void put_ranks(sim_layout *L, int k) {
    sim_span sp = L->span[k];
    for (int32_t i = 0; i < sp.n; i++) {
        int32_t g = sp.base + i;
        L->rank[g] = (L->rank_base[k] + (uint32_t)i) | (L->res[g] >= 0 ? SIM_RANK_HOLDS : 0);
    }
}

/* Draw every block's range of ranks: its tasks, plus an equal share of the
 * ranks left over (hundreds of thousands or more per block for the zoo's
 * graphs, at most rank_room_max), in canonical order. The ranks handed out
 * number n_tasks + n_order * room <= SIM_RANK_MAX, so they fit in 31 bits. */
static void assign_ranks(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    uint64_t room = ((uint64_t)SIM_RANK_MAX - (uint64_t)L->n_tasks) / (uint64_t)sim->n_order;
    if (room > sim->rank_room_max) room = sim->rank_room_max;
    uint64_t r = 0;
    for (int k = 0; k < sim->n_order; k++) {
        L->rank_base[k] = (uint32_t)r;
        L->rank_cap[k] = (uint32_t)((uint64_t)L->span[k].n + room);
        put_ranks(L, k);
        r += L->rank_cap[k];
    }
}

/* Lay every block out afresh: slots in canonical order without gaps, lists by
 * a counting sort of all edges. */
static int layout_full(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    int64_t nt = 0, ne = 0;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[sim->order[k]];
        L->span[k] = (sim_span){(int32_t)nt, b->n_tasks};
        nt += b->n_tasks;
        ne += b->n_edges;
        if (nt >= INT32_MAX || ne >= INT32_MAX) return -1;
    }
    if (slots_reserve(sim, nt + 1) || adj_reserve(sim, ne + 1) ||
        grow((void **)&sim->scratch, &sim->cap_scratch, 2 * ne + 1, sizeof *sim->scratch))
        return -1;
    int32_t *from = sim->scratch, *to = sim->scratch + ne; /* [ne] each: every edge's slots */
    memset(L->sadj, 0, (size_t)nt * sizeof *L->sadj);
    memset(L->padj, 0, (size_t)nt * sizeof *L->padj);
    int64_t e = 0;
    for (int k = 0; k < sim->n_order; k++) {
        int bid = sim->order[k];
        const sim_block *b = &sim->blocks[bid];
        put_tasks(sim, bid, L->span[k].base);
        for (int i = 0; i < b->n_edges; i++, e++) {
            from[e] = (int32_t)SLOT_OF(sim, b->edges[i].from);
            to[e] = (int32_t)SLOT_OF(sim, b->edges[i].to);
            L->sadj[from[e]].n++;
            L->padj[to[e]].n++;
        }
    }
    int32_t s = 0, p = 0;
    for (int64_t i = 0; i < nt; i++) {
        L->sadj[i].start = s;
        L->padj[i].start = p;
        s += L->sadj[i].n;
        p += L->padj[i].n;
    }
    /* pending serves as the fill cursor */
    for (int64_t i = 0; i < nt; i++) sim->pending[i] = L->sadj[i].start;
    for (int64_t i = 0; i < ne; i++) L->succ[sim->pending[from[i]]++] = to[i];
    for (int64_t i = 0; i < nt; i++) sim->pending[i] = L->padj[i].start;
    for (int64_t i = 0; i < ne; i++) L->pred[sim->pending[to[i]]++] = from[i];
    L->n_slots = L->n_tasks = nt;
    L->n_succ = L->n_pred = L->n_edges = ne;
    assign_ranks(sim);
    return 0;
}

/* List slot g as touched by layout_delta, once: touch_ix[g] is its place. */
static inline void touch(sf_sim *sim, int32_t *list, int64_t *n, int64_t g) {
    if (sim->touch_ix[g] >= 0) return;
    sim->touch_ix[g] = (int32_t)*n;
    list[(*n)++] = (int32_t)g;
}

/* After a delta update rebuilt the blocks in sim->saved: their tasks into fresh
 * slots, and the lists that changed rewritten (see the top of this section). */
static int layout_delta(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    sim->fresh = L->n_slots;
    sim->undo_succ = L->n_succ;
    sim->undo_pred = L->n_pred;
    sim->undo_tasks = L->n_tasks;
    sim->undo_edges = L->n_edges;
    sim->undo_ranks = 0;
    sim->n_undo_adj = 0;
    int64_t add = 0, m = 0, m_old = 0;
    for (int i = 0; i < sim->n_saved; i++) {
        add += sim->blocks[sim->saved[i].bid].n_tasks;
        m += sim->blocks[sim->saved[i].bid].n_edges;
        m_old += sim->saved[i].block.n_edges;
    }
    int64_t cap_touched = add + 2 * (m + m_old);
    if (slots_reserve(sim, L->n_slots + add + 1) ||
        grow((void **)&sim->scratch, &sim->cap_scratch, 2 * m + 3 * cap_touched + 1,
             sizeof *sim->scratch) ||
        grow((void **)&sim->undo_adj, &sim->cap_undo_adj, cap_touched + 1, sizeof *sim->undo_adj))
        return -1;
    int32_t *from = sim->scratch;           /* [m] the new edges' tails */
    int32_t *to = from + m;                 /* [m] ... and heads */
    int32_t *touched = to + m;              /* slots whose lists are rewritten */
    int32_t *cur_s = touched + cap_touched; /* [touched] fill cursors in succ[] */
    int32_t *cur_p = cur_s + cap_touched;   /* [touched] ... and in pred[] */
    int64_t n_touched = 0;

    /* the rebuilt blocks' tasks, in fresh slots */
    for (int i = 0; i < sim->n_saved; i++) {
        int bid = sim->saved[i].bid, k = sim->pos[bid];
        const sim_block *nb = &sim->blocks[bid];
        sim->saved[i].span = L->span[k];
        L->span[k] = (sim_span){(int32_t)L->n_slots, nb->n_tasks};
        put_tasks(sim, bid, L->n_slots);
        if ((uint32_t)nb->n_tasks > L->rank_cap[k])
            sim->undo_ranks = 1;
        else
            put_ranks(L, k);
        for (int j = 0; j < nb->n_tasks; j++) touch(sim, touched, &n_touched, L->n_slots + j);
        L->n_slots += nb->n_tasks;
        L->n_tasks += nb->n_tasks - sim->saved[i].block.n_tasks;
        L->n_edges += nb->n_edges - sim->saved[i].block.n_edges;
    }
    if (sim->undo_ranks) assign_ranks(sim);
    /* their edges; the kept ends of those and of the edges they replace are touched */
    int64_t e = 0;
    for (int i = 0; i < sim->n_saved; i++) {
        const sim_block *nb = &sim->blocks[sim->saved[i].bid];
        for (int j = 0; j < nb->n_edges; j++, e++) {
            from[e] = (int32_t)SLOT_OF(sim, nb->edges[j].from);
            to[e] = (int32_t)SLOT_OF(sim, nb->edges[j].to);
            touch(sim, touched, &n_touched, from[e]);
            touch(sim, touched, &n_touched, to[e]);
        }
        const sim_block *ob = &sim->saved[i].block;
        for (int j = 0; j < ob->n_edges; j++) {
            int64_t ends[2] = {ob->edges[j].from, ob->edges[j].to};
            for (int x = 0; x < 2; x++)
                if (!sim->dirty[ends[x] >> SIM_IDX_BITS])
                    touch(sim, touched, &n_touched, SLOT_OF(sim, ends[x]));
        }
    }
    /* The touched tasks' lists, rewritten at the end of succ[] and pred[]: room for
     * a kept task's old list (its entries into kept slots stay) and for the new
     * edges, placed by a counting sort as layout_full does. A list may end short
     * of its room (entries into replaced blocks go); the gap is dead. */
    int64_t need_s = L->n_succ + m, need_p = L->n_pred + m;
    for (int64_t j = 0; j < n_touched; j++) {
        int32_t g = touched[j];
        if (g < sim->fresh) {
            need_s += L->sadj[g].n;
            need_p += L->padj[g].n;
        }
        cur_s[j] = cur_p[j] = 0;
    }
    if (adj_reserve(sim, (need_s > need_p ? need_s : need_p) + 1)) {
        /* back to the between-updates state; the caller forces a full run */
        for (int64_t j = 0; j < n_touched; j++) sim->touch_ix[touched[j]] = -1;
        return -1;
    }
    const int32_t *ix = sim->touch_ix;
    for (int64_t i = 0; i < m; i++) {
        cur_s[ix[from[i]]]++;
        cur_p[ix[to[i]]]++;
    }
    int32_t *succ = L->succ, *pred = L->pred;
    int32_t ns = (int32_t)L->n_succ, np = (int32_t)L->n_pred;
    for (int64_t j = 0; j < n_touched; j++) {
        int32_t g = touched[j], cs = cur_s[j], cp = cur_p[j];
        if (g < sim->fresh) {
            /* a kept task: log its lists, keep their entries into kept slots */
            sim_adj os = L->sadj[g], op = L->padj[g];
            sim->undo_adj[sim->n_undo_adj++] = (sim_adj_undo){g, os, op};
            L->sadj[g].start = cur_s[j] = ns;
            L->padj[g].start = cur_p[j] = np;
            for (int32_t q = os.start; q < os.start + os.n; q++)
                if (!sim->dirty[L->key[succ[q]] >> SIM_IDX_BITS]) succ[cur_s[j]++] = succ[q];
            for (int32_t q = op.start; q < op.start + op.n; q++)
                if (!sim->dirty[L->key[pred[q]] >> SIM_IDX_BITS]) pred[cur_p[j]++] = pred[q];
            ns += os.n;
            np += op.n;
        } else {
            L->sadj[g].start = cur_s[j] = ns;
            L->padj[g].start = cur_p[j] = np;
        }
        ns += cs;
        np += cp;
    }
    for (int64_t i = 0; i < m; i++) {
        succ[cur_s[ix[from[i]]]++] = to[i];
        pred[cur_p[ix[to[i]]]++] = from[i];
    }
    for (int64_t j = 0; j < n_touched; j++) {
        int32_t g = touched[j];
        L->sadj[g].n = cur_s[j] - L->sadj[g].start;
        L->padj[g].n = cur_p[j] - L->padj[g].start;
        sim->touch_ix[g] = -1;
    }
    L->n_succ = ns;
    L->n_pred = np;
    return 0;
}

/* Undo layout_delta: the logged lists, the replaced blocks' spans, the counters;
 * the fresh slots and list entries are handed back. */
static void layout_undo(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    for (int64_t j = sim->n_undo_adj - 1; j >= 0; j--) {
        const sim_adj_undo *u = &sim->undo_adj[j];
        L->sadj[u->slot] = u->s;
        L->padj[u->slot] = u->p;
    }
    for (int i = 0; i < sim->n_saved; i++)
        L->span[sim->pos[sim->saved[i].bid]] = sim->saved[i].span;
    L->n_slots = sim->fresh;
    L->n_succ = sim->undo_succ;
    L->n_pred = sim->undo_pred;
    L->n_tasks = sim->undo_tasks;
    L->n_edges = sim->undo_edges;
    if (sim->undo_ranks) assign_ranks(sim); /* the restored blocks' slots kept the old ranks */
    sim->n_undo_adj = 0;
    sim->undo_ranks = 0;
}

/* Lay everything out afresh and carry the current schedule and result over to
 * the new slots (into the spare schedule, which becomes the current one). */
static int layout_compact(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    memcpy(sim->old_span, L->span, (size_t)sim->n_order * sizeof *L->span);
    if (layout_full(sim)) return -1;
    const sim_sched *o = sim->cur;
    sim_sched *f = sim->prev;
    for (int k = 0; k < sim->n_order; k++) {
        size_t n = (size_t)L->span[k].n;
        int32_t ob = sim->old_span[k].base, nb = L->span[k].base;
        memcpy(f->ready + nb, o->ready + ob, n * sizeof *f->ready);
        memcpy(f->start + nb, o->start + ob, n * sizeof *f->start);
        memcpy(f->finish + nb, o->finish + ob, n * sizeof *f->finish);
    }
    memcpy(f->res_total, o->res_total, (size_t)sim->n_res * sizeof *f->res_total);
    memcpy(f->device_busy, o->device_busy, (size_t)sim->n_dev * sizeof *f->device_busy);
    memcpy(f->device_mem, o->device_mem, (size_t)sim->n_dev * sizeof *f->device_mem);
    f->mem_exact = o->mem_exact;
    f->makespan_s = o->makespan_s;
    f->result = o->result;
    f->result.device_busy_s = f->device_busy;
    f->result.device_mem_bytes = f->device_mem;
    sim->prev = sim->cur;
    sim->cur = f;
    return 0;
}

void sim_set_test_limits(sf_sim *sim, uint32_t rank_room, int64_t compact_slack) {
    sim->rank_room_max = rank_room;
    sim->compact_slack = compact_slack;
}

static int list_has(const int32_t *a, sim_adj l, int32_t x) {
    for (int32_t q = l.start; q < l.start + l.n; q++)
        if (a[q] == x) return 1;
    return 0;
}

int sim_layout_consistent(const sf_sim *sim) {
    const sim_layout *L = &sim->lay;
    int64_t nt = 0, ne = 0, ns = 0, np = 0;
    uint64_t last_rank = 0;
    int first = 1;
    for (int k = 0; k < sim->n_order; k++) {
        int bid = sim->order[k];
        const sim_block *b = &sim->blocks[bid];
        sim_span sp = L->span[k];
        if (sp.n != b->n_tasks || sp.base < 0 || sp.base + sp.n > L->n_slots) return 0;
        if ((uint32_t)sp.n > L->rank_cap[k]) return 0;
        for (int i = 0; i < sp.n; i++) {
            int64_t g = sp.base + i;
            if (L->key[g] != (uint64_t)REF(bid, i) || L->dur[g] != b->tasks[i].dur_s ||
                L->res[g] != b->tasks[i].res)
                return 0;
            /* ranks order like canonical keys; the flag says whether it holds a resource */
            uint32_t rk = L->rank[g] & SIM_RANK_MAX;
            if (!first && rk <= last_rank) return 0;
            if (((L->rank[g] & SIM_RANK_HOLDS) != 0) != (L->res[g] >= 0)) return 0;
            last_rank = rk;
            first = 0;
            ns += L->sadj[g].n;
            np += L->padj[g].n;
        }
        /* every edge in both lists */
        for (int i = 0; i < b->n_edges; i++) {
            int64_t fg = SLOT_OF(sim, b->edges[i].from), tg = SLOT_OF(sim, b->edges[i].to);
            if (!list_has(L->succ, L->sadj[fg], (int32_t)tg) ||
                !list_has(L->pred, L->padj[tg], (int32_t)fg))
                return 0;
        }
        nt += b->n_tasks;
        ne += b->n_edges;
    }
    /* ... and nothing else: the lists hold as many entries as there are edges */
    return nt == L->n_tasks && ne == L->n_edges && ns == ne && np == ne;
}

/* ---- scheduling ---------------------------------------------------------------
 *
 * The rule (docs/simulator.md): every device and link takes its tasks in the
 * order they become ready, ties broken by canonical key. The event loop pops
 * tasks from a heap ordered by (ready time, barrier before resource-holding
 * task, key) and starts each at max(ready, its resource's free time), which
 * gives that rule exactly:
 *
 *  - pops never go back in time: what a resource-holding task releases is ready
 *    strictly after it (it lasts at least MIN_TASK_S), what a barrier releases
 *    no earlier than the barrier;
 *  - at one instant t, barriers come first: every barrier ready at t, including
 *    those that other barriers make ready at t, is passed before any
 *    resource-holding task ready at t is popped. So when the first of those is
 *    popped, all of them are in the heap, whatever chain of barriers made them
 *    ready, and they pop in key order.
 *
 * Ordering by (ready, key) alone is not enough: a barrier ready at t that comes
 * late in key order releases tasks ready at t after tasks of later keys have
 * already taken their links, which then run in the barriers' order
 * (test_barrier_ties_by_key in tests/test_sim.c).
 *
 * Heap entries are 128-bit integers (sim_impl.h): ready times are non-negative
 * doubles, whose bit patterns order like unsigned integers, and order words
 * (sim_layout.rank: SIM_RANK_HOLDS for a resource-holding task, then a rank
 * that orders like the canonical key, assign_ranks) order like (barrier first,
 * key), so (ready bits << 64 | order word << 32 | slot) orders as the rule
 * needs, and comparing it is one wide integer compare: entries are 16 bytes
 * and need no tie-break branch. */
static inline sim_heap_item heap_item(const sim_layout *L, double ready, int32_t slot) {
    uint64_t u;
    memcpy(&u, &ready, sizeof u);
    return (sim_heap_item)u << 64 | (sim_heap_item)L->rank[slot] << 32 | (uint32_t)slot;
}

static inline int32_t heap_item_slot(sim_heap_item it) { return (int32_t)(uint32_t)it; }

static inline double heap_item_ready(sim_heap_item it) {
    uint64_t u = (uint64_t)(it >> 64);
    double t;
    memcpy(&t, &u, sizeof t);
    return t;
}

static inline int heap_less(const sim_heap_item *a, const sim_heap_item *b) { return *a < *b; }

static inline void heap_push(sim_heap_item *h, int64_t *n, sim_heap_item it) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

/* Put `it` where the root was and sift it down: the root's removal and a push
 * in one pass. */
static inline void heap_replace_top(sim_heap_item *h, int64_t m, sim_heap_item it) {
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &it)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = it;
}

static inline void heap_drop_top(sim_heap_item *h, int64_t *n) {
    --(*n);
    if (*n > 0) heap_replace_top(h, *n, h[*n]);
}

/* The event loop over whatever is in the heap; sim->pending and f->ready hold
 * the state of the tasks not yet scheduled, sim->res_free that of the resources. */
static sf_status run_heap(sf_sim *sim, sim_sched *f, int64_t hn, int64_t expect, double bound,
                          int *cut, sf_error *err) {
    const sim_layout *L = &sim->lay;
    sim_heap_item *h = sim->heap;
    int32_t *pending = sim->pending;
    int64_t done = 0;
    double makespan = f->makespan_s; /* the callers start it at the latest carried finish */
    while (hn > 0) {
        /* The task leaves the heap only once its successors are known: the first
         * one that becomes ready takes its place at the root, which saves a sift
         * for the common chain of one task after another. The heap's order is
         * total (ready, barriers first, key), so its shape never changes what is
         * popped. */
        sim_heap_item it = h[0];
        int top_free = 1;
        int32_t t = heap_item_slot(it);
        int32_t r = L->res[t];
        double st = heap_item_ready(it);
        if (r >= 0 && sim->res_free[r] > st) st = sim->res_free[r];
        double fin = st + L->dur[t];
        if (bound < INFINITY) {
            /* the makespan is at least fin, and at least fin plus the work still
             * queued for this resource, which runs one task at a time */
            double lb = fin;
            if (r >= 0) {
                sim->remaining[r] -= L->dur[t];
                /* a sum taken in another order than the schedule's: keep a margin
                 * far above its rounding error so that a proposal exactly at the
                 * bound is never cut */
                lb += sim->remaining[r] - 1e-9 * bound;
            }
            if (fin > bound || lb > bound) {
                f->result.iter_s = lb > fin ? lb : fin;
                *cut = 1;
                return SF_OK;
            }
        }
        if (r >= 0) sim->res_free[r] = fin;
        f->start[t] = st;
        f->finish[t] = fin;
        if (fin > makespan) makespan = fin;
        done++;
        sim_adj sa = L->sadj[t];
        for (int32_t k = sa.start; k < sa.start + sa.n; k++) {
            int32_t s = L->succ[k];
            if (fin > f->ready[s]) f->ready[s] = fin;
            if (--pending[s] == 0) {
                sim_heap_item nx = heap_item(L, f->ready[s], s);
                if (top_free) {
                    heap_replace_top(h, hn, nx);
                    top_free = 0;
                } else {
                    heap_push(h, &hn, nx);
                }
            }
        }
        if (top_free) heap_drop_top(h, &hn);
    }
    f->makespan_s = makespan;
    sim->last_resimulated = done;
    if (done != expect)
        return sf_error_set(err, SF_ERR_INTERNAL, "task graph has a cycle (%lld of %lld scheduled)",
                            (long long)done, (long long)expect);
    return SF_OK;
}

/* Schedule everything, after layout_full: slots are in canonical order, so the
 * loop adds up res_total in the same order as schedule_resume's walk. */
static sf_status schedule_full(sf_sim *sim, sim_sched *f, sf_error *err) {
    const sim_layout *L = &sim->lay;
    int64_t nt = L->n_slots, hn = 0;
    memset(sim->res_free, 0, (size_t)sim->n_res * sizeof *sim->res_free);
    memset(f->res_total, 0, (size_t)sim->n_res * sizeof *f->res_total);
    f->makespan_s = 0;
    for (int64_t i = 0; i < nt; i++) {
        f->ready[i] = 0;
        sim->pending[i] = L->padj[i].n;
        if (L->res[i] >= 0) f->res_total[L->res[i]] += L->dur[i];
        if (L->padj[i].n == 0) heap_push(sim->heap, &hn, heap_item(L, 0.0, (int32_t)i));
    }
    int cut = 0;
    return run_heap(sim, f, hn, nt, INFINITY, &cut, err);
}

/* Delta scheduling. Before time t0 nothing differs between the old schedule (o)
 * and the new one (f): every task whose block was rebuilt, whose predecessors
 * changed, or that was removed becomes ready at t0 or later (see t0_bound). The
 * list scheduler pops tasks in order of ready time first (the scheduling
 * section), so its state after popping every task ready before t0 is the same
 * in both: those tasks keep their times, each resource is free from the latest
 * finish among them, and the event loop resumes from there over the rest.
 *
 * Two passes set that state up. The first walks the tasks in canonical order
 * (adding up res_total as schedule_full does); a kept task (a slot below
 * sim->fresh) that the old schedule made ready before t0 is carried over,
 * marked with pending = -1 and listed. The second releases the edges leaving
 * the listed tasks, which are few when t0 is early, rather than gathering the
 * predecessors of every task left, which are most of them; a task whose last
 * predecessor is released goes on the heap with its final ready time. */
static sf_status schedule_resume(sf_sim *sim, sim_sched *f, const sim_sched *o, double t0,
                                 double bound, int *cut, sf_error *err) {
    const sim_layout *L = &sim->lay;
    int64_t hn = 0, left = 0, n_done = 0;
    int bounded = bound < INFINITY;
    double makespan = 0;
    if (grow((void **)&sim->scratch, &sim->cap_scratch, L->n_tasks + 1, sizeof *sim->scratch))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory scheduling the task graph");
    int32_t *done = sim->scratch; /* the carried-over tasks */
    int32_t *pending = sim->pending;
    memset(sim->res_free, 0, (size_t)sim->n_res * sizeof *sim->res_free);
    memset(f->res_total, 0, (size_t)sim->n_res * sizeof *f->res_total);
    /* a bounded run also adds up the work each resource still has to do */
    if (bounded) memset(sim->remaining, 0, (size_t)sim->n_res * sizeof *sim->remaining);
    /* pass 1: carry over tasks done before t0 */
    for (int k = 0; k < sim->n_order; k++) {
        sim_span sp = L->span[k];
        for (int32_t g = sp.base; g < sp.base + sp.n; g++) {
            int32_t r = L->res[g];
            if (r >= 0) f->res_total[r] += L->dur[g];
            if (g < sim->fresh && o->ready[g] < t0) {
                f->ready[g] = o->ready[g];
                f->start[g] = o->start[g];
                f->finish[g] = o->finish[g];
                pending[g] = -1;
                done[n_done++] = g;
                if (r >= 0 && f->finish[g] > sim->res_free[r]) sim->res_free[r] = f->finish[g];
                if (f->finish[g] > makespan) makespan = f->finish[g];
                continue;
            }
            f->ready[g] = 0;
            pending[g] = L->padj[g].n;
            left++;
            if (bounded && r >= 0) sim->remaining[r] += L->dur[g];
            if (L->padj[g].n == 0) heap_push(sim->heap, &hn, heap_item(L, 0.0, g));
        }
    }
    /* pass 2: release the edges out of done tasks */
    for (int64_t j = 0; j < n_done; j++) {
        int32_t p = done[j];
        double fin = f->finish[p];
        sim_adj sa = L->sadj[p];
        for (int32_t k = sa.start; k < sa.start + sa.n; k++) {
            int32_t t = L->succ[k];
            if (pending[t] < 0) continue; /* done too */
            if (fin > f->ready[t]) f->ready[t] = fin;
            if (--pending[t] == 0) heap_push(sim->heap, &hn, heap_item(L, f->ready[t], t));
        }
    }
    f->makespan_s = makespan;
    return run_heap(sim, f, hn, left, bound, cut, err);
}

/* ---- results ------------------------------------------------------------------ */

/* Per-device memory summed over every block in canonical order, as a full run
 * does; also says whether the sums are exact (see mem_delta). */
static void mem_full(sf_sim *sim, sim_sched *f) {
    memset(f->device_mem, 0, (size_t)sim->n_dev * sizeof *f->device_mem);
    int exact = 1;
    FOR_ALL_BLOCKS(sim, bid) {
        const sim_block *b = &sim->blocks[bid];
        exact &= !b->mem_inexact;
        for (int i = 0; i < b->n_mem; i++) f->device_mem[b->mem[i].dev] += b->mem[i].bytes;
    }
    for (int d = 0; d < sim->n_dev; d++) exact &= f->device_mem[d] <= SIM_EXACT_BYTES;
    f->mem_exact = exact;
}

/* Per-device memory after a delta update, from the totals before it (o): minus
 * the replaced blocks' entries, plus the rebuilt ones'. That equals mem_full's
 * sums bit for bit only when no rounding happens in either: when every entry is
 * a whole number of bytes and every total at most 2^52 (SIM_EXACT_BYTES), all
 * partial sums are exact integers and the order of the additions cannot show.
 * Memory is counted in whole bytes in practice (4-byte elements, whole weight
 * shards times 2 + a whole optimizer factor); when not, returns 0 and the
 * caller sums everything again. */
static int mem_delta(sf_sim *sim, sim_sched *f, const sim_sched *o) {
    if (!o->mem_exact) return 0;
    for (int i = 0; i < sim->n_saved; i++)
        if (sim->blocks[sim->saved[i].bid].mem_inexact) return 0;
    memcpy(f->device_mem, o->device_mem, (size_t)sim->n_dev * sizeof *f->device_mem);
    for (int i = 0; i < sim->n_saved; i++) {
        const sim_block *ob = &sim->saved[i].block, *nb = &sim->blocks[sim->saved[i].bid];
        for (int k = 0; k < ob->n_mem; k++) f->device_mem[ob->mem[k].dev] -= ob->mem[k].bytes;
        for (int k = 0; k < nb->n_mem; k++) f->device_mem[nb->mem[k].dev] += nb->mem[k].bytes;
    }
    for (int d = 0; d < sim->n_dev; d++)
        if (f->device_mem[d] > SIM_EXACT_BYTES) return 0;
    f->mem_exact = 1;
    return 1;
}

/* The result of the schedule in f. o: the layout before a delta update (its
 * memory totals are reused when exact), NULL after a full run. */
static void collect(sf_sim *sim, sim_sched *f, const sim_sched *o) {
    sf_sim_result *r = &f->result;
    memset(r, 0, sizeof *r);
    r->tasks = sim->lay.n_tasks;
    r->rescheduled = sim->last_resimulated;
    r->n_devices = sim->n_dev;
    r->iter_s = f->makespan_s;
    memcpy(f->device_busy, f->res_total, (size_t)sim->n_dev * sizeof *f->device_busy);
    /* each sum in canonical block order, whichever blocks changed */
    for (int k = 0; k < sim->n_order; k++) {
        const sim_stats *b = &sim->stats[k];
        r->compute_s += b->compute_s;
        r->transfer_s += b->xfer_s;
        r->sync_s += b->sync_s;
        r->transfer_bytes += b->xfer_bytes;
        r->sync_bytes += b->sync_bytes;
        r->intra_bytes += b->intra_bytes;
        r->inter_bytes += b->inter_bytes;
    }
    if (!o || !mem_delta(sim, f, o)) mem_full(sim, f);
    r->fits = 1;
    for (int d = 0; d < sim->n_dev; d++) {
        if (f->device_mem[d] > r->peak_mem_bytes) r->peak_mem_bytes = f->device_mem[d];
        if (f->device_mem[d] > sf_machine_device_kind(sim->m, d)->mem_bytes) r->fits = 0;
    }
    r->device_busy_s = f->device_busy;
    r->device_mem_bytes = f->device_mem;
}

/* ---- the public entry points ---------------------------------------------------- */

sf_status sf_sim_run(sf_sim *sim, const sf_strategy *s, sf_sim_result *r, sf_error *err) {
    sf_status st = sf_strategy_validate(s, sim->g, sim->m, err);
    if (st != SF_OK) return st;
    sf_strategy_copy(sim->s, s);
    sim->n_undo = 0;
    sim->cut_pending = 0;
    sim->cut_early = 0;
    sim->n_saved = 0;
    sim->has_run = 0;
    /* cores first: the edge and sync blocks read every operator's part tiles */
    for (int pass = 0; pass < 2; pass++) {
        FOR_ALL_BLOCKS(sim, bid) {
            if ((bid % SIM_SLOTS == SLOT_CORE) != (pass == 0)) continue;
            if (rebuild_block(sim, bid))
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
        }
    }
    if (layout_full(sim))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
    st = schedule_full(sim, sim->cur, err);
    if (st != SF_OK) return st;
    collect(sim, sim->cur, NULL);
    sim->has_run = 1;
    *r = sim->cur->result;
    return SF_OK;
}

/* Mark a block dirty for a delta update, saving its current contents for a
 * revert; the block left in place keeps spare capacity from an older save. */
static int save_block(sf_sim *sim, int bid) {
    if (sim->dirty[bid]) return 0;
    if (sim->n_saved == sim->cap_saved) {
        int cap = sim->cap_saved ? 2 * sim->cap_saved : 16;
        sim_saved_block *nb = realloc(sim->saved, (size_t)cap * sizeof *nb);
        if (!nb) return -1;
        memset(nb + sim->cap_saved, 0, (size_t)(cap - sim->cap_saved) * sizeof *nb);
        sim->saved = nb;
        sim->cap_saved = cap;
    }
    sim_saved_block *sv = &sim->saved[sim->n_saved++];
    sim_block tmp = sim->blocks[bid];
    sim->blocks[bid] = sv->block;
    sv->block = tmp;
    sv->bid = bid;
    sim->dirty[bid] = 1;
    return 0;
}

/* The earliest time at which the schedule can change: the old ready time of every
 * removed task and of every kept task whose predecessors changed, the finish of
 * every kept task that feeds a rebuilt block, and a lower bound on the new ready
 * time of kept tasks fed by rebuilt blocks. Called after layout_delta: a slot at
 * or above sim->fresh holds a rebuilt task, a replaced block's tasks are still
 * in their old slots (saved[].span), and kept tasks are where they were. */
static double t0_bound(sf_sim *sim, const sim_sched *o) {
    const sim_layout *L = &sim->lay;
    double t0 = INFINITY;
    for (int i = 0; i < sim->n_saved; i++) {
        const sim_block *old = &sim->saved[i].block;
        sim_span os = sim->saved[i].span;
        for (int k = 0; k < old->n_tasks; k++) {
            double rd = o->ready[os.base + k];
            if (rd < t0) t0 = rd;
        }
        /* old edges: a kept task that lost a predecessor */
        for (int e = 0; e < old->n_edges; e++) {
            int64_t to = old->edges[e].to;
            if (sim->dirty[to >> SIM_IDX_BITS]) continue;
            double rd = o->ready[SLOT_OF(sim, to)];
            if (rd < t0) t0 = rd;
        }
        const sim_block *nw = &sim->blocks[sim->saved[i].bid];
        for (int e = 0; e < nw->n_edges; e++) {
            int64_t fr = nw->edges[e].from, to = nw->edges[e].to;
            if (!sim->dirty[fr >> SIM_IDX_BITS]) {
                double fin = o->finish[SLOT_OF(sim, fr)];
                if (fin < t0) t0 = fin;
            }
            if (!sim->dirty[to >> SIM_IDX_BITS]) {
                double rd = o->ready[SLOT_OF(sim, to)];
                if (rd < t0) t0 = rd;
            }
        }
    }
    /* kept tasks whose predecessors changed may now be ready as early as the
     * latest of their kept predecessors; new tasks without predecessors at 0 */
    for (int i = 0; i < sim->n_saved && t0 > 0; i++) {
        int bid = sim->saved[i].bid;
        const sim_block *nw = &sim->blocks[bid];
        sim_span sp = L->span[sim->pos[bid]];
        for (int k = 0; k < sp.n; k++)
            if (L->padj[sp.base + k].n == 0) t0 = 0;
        for (int e = 0; e < nw->n_edges; e++) {
            int64_t to = nw->edges[e].to;
            if (sim->dirty[to >> SIM_IDX_BITS]) continue;
            sim_adj pa = L->padj[SLOT_OF(sim, to)];
            double lb = 0;
            int kept = 0;
            for (int32_t q = pa.start; q < pa.start + pa.n; q++) {
                int32_t p = L->pred[q];
                if (p >= sim->fresh) continue;
                if (o->finish[p] > lb) lb = o->finish[p];
                kept = 1;
            }
            if (kept && lb < t0) t0 = lb;
        }
    }
    for (int i = 0; i < sim->n_saved && t0 > 0; i++) {
        /* a kept task that lost predecessors and kept none is ready at 0 */
        const sim_block *old = &sim->saved[i].block;
        for (int e = 0; e < old->n_edges; e++) {
            int64_t to = old->edges[e].to;
            if (sim->dirty[to >> SIM_IDX_BITS]) continue;
            sim_adj pa = L->padj[SLOT_OF(sim, to)];
            if (pa.n == 0) t0 = 0;
            double lb = 0;
            for (int32_t q = pa.start; q < pa.start + pa.n; q++) {
                int32_t p = L->pred[q];
                if (p >= sim->fresh) {
                    lb = INFINITY; /* a rebuilt predecessor: covered by induction */
                    break;
                }
                if (o->finish[p] > lb) lb = o->finish[p];
            }
            if (lb < t0) t0 = lb;
        }
    }
    return t0;
}

sf_status sf_sim_update(sf_sim *sim, int opi, const sf_config *c, sf_sim_result *r, sf_error *err) {
    return sf_sim_update_ops(sim, 1, &opi, c, INFINITY, r, err);
}

sf_status sf_sim_update_bounded(sf_sim *sim, int opi, const sf_config *c, double bound_s,
                                sf_sim_result *r, sf_error *err) {
    return sf_sim_update_ops(sim, 1, &opi, c, bound_s, r, err);
}

/* Several operators change in one update: the blocks rebuilt are the union of
 * what each one's change rebuilds (save_block skips a block already saved), so
 * the layout, t0 and the resumed schedule see one set of rebuilt blocks as for
 * one operator, and a revert swaps them all back. */
sf_status sf_sim_update_ops(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                            double bound_s, sf_sim_result *r, sf_error *err) {
    if (!sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "delta simulation before a full simulation");
    if (sim->cut_pending)
        return sf_error_set(err, SF_ERR_INVALID, "a bounded update was cut off: revert it first");
    if (n < 1 || n > SF_SIM_MAX_UPDATE_OPS)
        return sf_error_set(err, SF_ERR_INVALID, "an update changes 1 to %d operators, not %d",
                            SF_SIM_MAX_UPDATE_OPS, n);
    for (int j = 0; j < n; j++) {
        const sf_op *op = sf_graph_op(sim->g, ops[j]);
        if (!op) return sf_error_set(err, SF_ERR_INVALID, "operator %d out of range", ops[j]);
        for (int i = 0; i < j; i++)
            if (ops[i] == ops[j])
                return sf_error_set(err, SF_ERR_INVALID,
                                    "operator '%s' changed twice in one update", op->name);
        sf_status st = sf_config_validate(op, sim->m, &cfgs[j], err);
        if (st != SF_OK) return st;
    }
    sf_status st;
    /* The update before this one is kept for good: if the dead slots or list
     * entries it and its predecessors left outnumber the live ones, lay out
     * afresh first. */
    const sim_layout *L = &sim->lay;
    if (L->n_slots - L->n_tasks > L->n_tasks + sim->compact_slack ||
        L->n_succ - L->n_edges > L->n_edges + sim->compact_slack ||
        L->n_pred - L->n_edges > L->n_edges + sim->compact_slack) {
        if (layout_compact(sim)) {
            sim->has_run = 0;
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
        }
    }
    sim->n_undo = n;
    sim->n_saved = 0;
    int fail = 0;
    for (int j = 0; j < n; j++) {
        sim->undo_ops[j] = ops[j];
        sim->undo_cfg[j] = *sf_strategy_get(sim->s, ops[j]);
        memcpy(sim->undo_tiles[j], part_tiles(sim, ops[j]), sizeof sim->undo_tiles[j]);
        *sf_strategy_config(sim->s, ops[j]) = cfgs[j];
        /* cores first: they are rebuilt in this order, and the edge and sync
         * blocks read the part tiles of every operator they join */
        fail |= save_block(sim, block_id(ops[j], SLOT_CORE));
    }
    for (int j = 0; j < n; j++) {
        int opi = ops[j];
        const sf_op *op = sf_graph_op(sim->g, opi);
        for (int k = 0; k < op->n_inputs; k++) fail |= save_block(sim, block_id(opi, 1 + k));
        /* cons[] pairs are (consumer op, input index) */
        const sf_tensor_ref *cons;
        int n_cons = sf_taskgraph_consumers(sim->tg, opi, &cons);
        for (int i = 0; i < n_cons; i++)
            fail |= save_block(sim, block_id(cons[i].op, 1 + cons[i].out));
        int owner = sf_taskgraph_owner(sim->tg, opi);
        if (owner >= 0) fail |= save_block(sim, block_id(owner, SLOT_SYNC));
    }
    for (int i = 0; i < sim->n_saved && !fail; i++) fail |= rebuild_block(sim, sim->saved[i].bid);
    if (!fail && bound_s < INFINITY) {
        /* Before laying anything out: a resource runs one task at a time, so the
         * iteration takes at least the work queued on any one resource. The new
         * totals are the current ones with the rebuilt blocks' work swapped in. */
        double *tot = sim->remaining;
        memcpy(tot, sim->cur->res_total, (size_t)sim->n_res * sizeof *tot);
        for (int i = 0; i < sim->n_saved; i++) {
            const sim_block *ob = &sim->saved[i].block, *nb = &sim->blocks[sim->saved[i].bid];
            for (int k = 0; k < ob->n_tasks; k++)
                if (ob->tasks[k].res >= 0) tot[ob->tasks[k].res] -= ob->tasks[k].dur_s;
            for (int k = 0; k < nb->n_tasks; k++)
                if (nb->tasks[k].res >= 0) tot[nb->tasks[k].res] += nb->tasks[k].dur_s;
        }
        double lb = 0;
        for (int q = 0; q < sim->n_res; q++)
            if (tot[q] > lb) lb = tot[q];
        if (lb - 1e-9 * bound_s > bound_s) { /* margin: the totals are sums in another order */
            for (int i = 0; i < sim->n_saved; i++) sim->dirty[sim->saved[i].bid] = 0;
            memset(r, 0, sizeof *r);
            r->iter_s = lb;
            r->cut_off = 1;
            sim->cut_pending = 1;
            sim->cut_early = 1;
            return SF_OK;
        }
    }
    sim_sched *o = sim->cur, *f = sim->prev;
    if (fail || layout_delta(sim)) {
        sim->has_run = 0; /* the block set is inconsistent: a full run must follow */
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
    }
    double t0 = t0_bound(sim, o);
    int cut = 0;
    st = schedule_resume(sim, f, o, t0, bound_s, &cut, err);
    for (int i = 0; i < sim->n_saved; i++) sim->dirty[sim->saved[i].bid] = 0;
    if (st != SF_OK) {
        sim->has_run = 0;
        return st;
    }
    sim->cur = f;
    sim->prev = o;
    if (cut) {
        memset(r, 0, sizeof *r);
        r->iter_s = f->result.iter_s;
        r->cut_off = 1;
        r->tasks = L->n_tasks;
        sim->cut_pending = 1;
        return SF_OK;
    }
    collect(sim, f, o);
    *r = f->result;
    return SF_OK;
}

sf_status sf_sim_revert(sf_sim *sim, sf_sim_result *r, sf_error *err) {
    if (sim->n_undo == 0 || !sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "nothing to revert");
    for (int j = 0; j < sim->n_undo; j++) {
        *sf_strategy_config(sim->s, sim->undo_ops[j]) = sim->undo_cfg[j];
        memcpy(part_tiles(sim, sim->undo_ops[j]), sim->undo_tiles[j], sizeof sim->undo_tiles[j]);
    }
    for (int i = sim->n_saved - 1; i >= 0; i--) {
        sim_saved_block *sv = &sim->saved[i];
        sim_block tmp = sim->blocks[sv->bid];
        sim->blocks[sv->bid] = sv->block;
        sv->block = tmp;
        publish_stats(sim, sv->bid);
    }
    sim->cut_pending = 0;
    sim->n_undo = 0;
    if (sim->cut_early) { /* nothing was laid out: the layout and schedule are the old ones */
        sim->cut_early = 0;
        sim->n_saved = 0;
        if (r) *r = sim->cur->result;
        return SF_OK;
    }
    layout_undo(sim);
    sim->n_saved = 0;
    sim_sched *t = sim->cur;
    sim->cur = sim->prev;
    sim->prev = t;
    if (r) *r = sim->cur->result;
    return SF_OK;
}

/* Order of the tasks on their resources in a schedule (sf_sim_delta_stats_get). */
typedef struct res_slot {
    int32_t res, slot;
    uint32_t rank;
    double start;
} res_slot;

static int res_slot_cmp(const void *pa, const void *pb) {
    const res_slot *a = pa, *b = pb;
    if (a->res != b->res) return a->res < b->res ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank); /* ranks order like canonical keys */
}

sf_status sf_sim_delta_stats_get(sf_sim *sim, sf_sim_delta_stats *out, sf_error *err) {
    if (sim->n_undo == 0 || !sim->has_run || sim->cut_pending)
        return sf_error_set(err, SF_ERR_INVALID, "no uncut delta update to compare with");
    const sim_layout *L = &sim->lay;
    const sim_sched *f = sim->cur, *o = sim->prev;
    int64_t ns = L->n_slots, nt = L->n_tasks;
    /* by slot: how far each task moved (NaN for new ones, unequal to anything), and
     * the task before it on its resource in the new schedule (-1: none) */
    double *shift = malloc((size_t)(ns ? ns : 1) * sizeof *shift);
    int32_t *before = malloc((size_t)(ns ? ns : 1) * sizeof *before);
    res_slot *order = malloc((size_t)(nt ? nt : 1) * sizeof *order);
    if (!shift || !before || !order) {
        free(shift);
        free(before);
        free(order);
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    }
    int64_t n = 0;
    for (int k = 0; k < sim->n_order; k++) {
        for (int32_t g = L->span[k].base; g < L->span[k].base + L->span[k].n; g++) {
            /* kept tasks are in the same slot in both schedules; fresh slots are new */
            shift[g] = g >= sim->fresh ? NAN : f->start[g] - o->start[g];
            order[n++] = (res_slot){L->res[g], g, L->rank[g] & SIM_RANK_MAX, f->start[g]};
        }
    }
    qsort(order, (size_t)n, sizeof *order, res_slot_cmp);
    for (int64_t i = 0; i < n; i++)
        before[order[i].slot] =
            order[i].res >= 0 && i > 0 && order[i - 1].res == order[i].res ? order[i - 1].slot : -1;
    memset(out, 0, sizeof *out);
    /* shifts are differences of sums, equal only up to rounding: compare them to a
     * nanosecond per second of iteration time */
    double tol = 1e-9 * f->makespan_s;
    for (int64_t i = 0; i < n; i++) {
        int32_t g = order[i].slot;
        sim_adj pa = L->padj[g];
        /* a plain shift: the task moved by as much as every one of its inputs (its
         * predecessors and the task before it on its resource); with none, by 0 */
        double by = 0;
        if (before[g] >= 0)
            by = shift[before[g]];
        else if (pa.n > 0)
            by = shift[L->pred[pa.start]];
        int plain = fabs(shift[g] - by) <= tol; /* false when either is NaN */
        if (before[g] >= 0) plain = plain && fabs(shift[before[g]] - by) <= tol;
        for (int32_t q = pa.start; q < pa.start + pa.n && plain; q++)
            plain = fabs(shift[L->pred[q]] - by) <= tol;
        out->changed += !(shift[g] == 0);
        out->uneven += !plain;
    }
    free(shift);
    free(before);
    free(order);
    return SF_OK;
}

const sim_task *sim_task_of(const sf_sim *sim, int64_t slot, int *block) {
    uint64_t k = sim->lay.key[slot];
    int bid = (int)(k >> SIM_IDX_BITS);
    if (block) *block = bid;
    return &sim->blocks[bid].tasks[k & ((1u << SIM_IDX_BITS) - 1)];
}

/* ---- where one device's time goes ------------------------------------------------ */

/* A walk over the blocks in canonical order, charging each task to the device
 * it runs on or, for a link task, to the device at the end of its link that
 * the runtime measures it on: the receiver of a message, the sender of a
 * gradient-sync message. The blocks hold every task's duration, so this needs
 * no kept schedule. */
sf_status sf_sim_kind_totals(const sf_sim *sim, int device, double out[SF_SIM_TOTAL_COUNT],
                             sf_error *err) {
    if (!sim || !sim->has_run || sim->cut_pending)
        return sf_error_set(err, SF_ERR_INVALID, "no simulated schedule to sum");
    if (device < 0 || device >= sim->n_dev)
        return sf_error_set(err, SF_ERR_INVALID, "device %d is not one of the %d devices", device,
                            sim->n_dev);
    for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) out[k] = 0;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[sim->order[k]];
        for (int i = 0; i < b->n_tasks; i++) {
            const sim_task *t = &b->tasks[i];
            if (t->res == SIM_NO_RES) continue;
            sf_link lb;
            int link = sim_res_link(sim, t->res);
            const sf_link *l = link >= 0 ? sf_machine_link(sim->m, link, &lb) : NULL;
            switch ((sim_kind)t->kind) {
            case SIM_FWD:
            case SIM_BWD:
                if (t->dev == device) out[SF_SIM_TOTAL_COMPUTE] += t->dur_s;
                break;
            case SIM_UPDATE:
                if (t->dev == device) out[SF_SIM_TOTAL_UPDATE] += t->dur_s;
                break;
            case SIM_COPY:
                if (t->dev == device) out[SF_SIM_TOTAL_COPY] += t->dur_s;
                break;
            case SIM_XFER:
            case SIM_GRAD:
                if (l && l->dst_dev == device) out[SF_SIM_TOTAL_TRANSFER] += t->dur_s;
                break;
            case SIM_SYNC:
                if (l && l->src_dev == device) out[SF_SIM_TOTAL_SYNC] += t->dur_s;
                break;
            default: break;
            }
        }
    }
    return SF_OK;
}
