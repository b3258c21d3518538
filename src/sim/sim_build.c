/*
 * sim_build.c - the simulator's block builders: what each block of the task
 * graph holds (sim_impl.h), priced.
 *
 * core(op) gets the forward and backward task of every part, edge(op, k) the
 * steps of the task graph's pairs that feed input k (build_edge, edge_pair:
 * transfers and the runtime's copies, sf_taskgraph_pair_steps), sync(owner) the
 * steps the sync scheme lowers every weight shard to (build_sync:
 * sf_taskgraph_sync_steps, ring, parameter server or hierarchical) and the
 * updates; in bulk sync mode one barrier block joins each device's backward
 * tasks. Every step becomes tasks through one function (step_tasks), which
 * makes a task of each use the task graph's pricing (sf_tg_price_step) gives,
 * so nothing here decides what a transfer or a collective costs. A block is a deterministic
 * function of a few operators' configs, which is what lets delta simulation rebuild only the blocks
 * a change touches (sim_rebuild_block, called by sim.c). The builders live apart from the layout
 * and the scheduler because they are the part that decides what communication costs; they read the
 * machine, the cost model and the task graph, and call nothing else of the simulator's but its link
 * resources (sim_links.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"
#include "soapflow/kernels.h"

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

/* bytes of a kind on dev from the start of task `from` to the finish of task
 * `to` (SIM_MEM_ALWAYS: the iteration's start or end), in both pictures or in
 * `only` one. Activation gradients are the timeline's alone (sim_mem_summed):
 * the all-at-once sums price the end of the forward pass and have never held
 * them. */
static int block_mem_in(sim_block *b, int dev, sf_sim_mem_kind kind, double bytes, int64_t from,
                        int64_t to, int only) {
    if (sim_grow_int((void **)&b->mem, &b->cap_mem, b->n_mem + 1, sizeof *b->mem)) return -1;
    sim_mem *e = &b->mem[b->n_mem++];
    *e = (sim_mem){dev, (uint8_t)kind, (uint8_t)only, bytes, from, to};
    if (sim_mem_summed(e) && !(bytes >= 0 && bytes <= SIM_EXACT_BYTES && bytes == floor(bytes)))
        b->mem_inexact = 1;
    return 0;
}

static int block_mem(sim_block *b, int dev, sf_sim_mem_kind kind, double bytes, int64_t from,
                     int64_t to) {
    return block_mem_in(b, dev, kind, bytes, from, to, SIM_MEM_BOTH);
}

/* ---- block builders --------------------------------------------------------- */

static int op_has_bwd(const sf_op *op) { return op->type != SF_OP_INPUT; }

/* The workspace of compute task `task` of op's tile t (backward: its
 * backward pass), in the plan's dtype, while the task runs (the kernels'
 * scratch: im2col columns and the like, as the runtime reserves it). */
static int task_workspace(sf_sim *sim, sim_block *b, const sf_op *op, const sf_tile *t, int dev,
                          int backward, int64_t task) {
    double ws = (double)sf_kernel_workspace_bytes(op, t, backward) * sim->act_scale;
    return ws > 0 ? block_mem_in(b, dev, SF_SIM_MEM_WORKSPACE, ws, task, task, SIM_MEM_TIMELINE)
                  : 0;
}

/* ---- recomputation ------------------------------------------------------------ *
 * A recomputing operator (its config's recompute flag; the input has nothing to
 * recompute) adds to its core block, after the forward and backward tasks, a
 * recompute task per part (2n + p), a gate (3n) and a read barrier (3n + 1):
 * its parts' outputs are freed at the read barrier, what they save beyond them
 * after their forward task, and the recompute task makes both again, kept to
 * the backward task. The edge blocks of its consumers (recompute_pair) say
 * what the two barriers wait for:
 *   - in a chain (the operator's one consumer recomputes too: the chain is the
 *     operator, its consumer, the consumer's ... up to the first operator whose
 *     output is read by several or by one that keeps it) the outputs go once
 *     the consumer's forward tasks have read them, the gate waits for the
 *     consumer's gate, and a consumer part that reads them in place recomputes
 *     after the part it reads: the chain is made again in forward order once
 *     the gradient reaches its end;
 *   - else the outputs stay until each consumer part is done with them (its
 *     backward task when it reads them in place, else its forward) and the
 *     gate waits for the consumers' backward tasks: the operator recomputes
 *     just before its own backward, for what it saves beyond its outputs.
 * Inputs received from another device stay until the consumer's backward, and
 * forward communication (partial-sum reductions, transfers) is not done again.
 * The recompute tasks of a chain reach only operators upstream of its end, and
 * gates wait only for tasks downstream of it, so the graph stays acyclic. */
enum { RC_GATE = 0, RC_READ = 1 };

static int recomputes(const sf_sim *sim, int opi) {
    const sf_op *op = sf_graph_op(sim->g, opi);
    const sf_config *c = sf_strategy_get(sim->s, opi);
    if (!c->recompute || !op_has_bwd(op)) return 0;
    /* soapflow's runtime does not recompute an operator that holds partial
     * sums (their reductions would run again): runtime_memory follows it */
    for (int d = 0; d < op->space.ndim && sim->opt.runtime_memory; d++)
        if (op->kinds[d] == SF_DIM_REDUCE && c->degree[d] > 1) return 0;
    return 1;
}

/* Task i of a recomputing operator's recomputation: i < n the recompute task
 * of part i, n + RC_GATE its gate, n + RC_READ its read barrier. */
static int64_t rc_task(const sf_sim *sim, int opi, int i) {
    int n = sf_strategy_get(sim->s, opi)->n_parts;
    return REF(sim_block_id(opi, SLOT_CORE), 2 * n + i);
}

static int build_inner(sf_sim *sim, sim_block *b, int opi, int n, int bwd, const sf_tg_inner *in);

/* ---- pipelines ------------------------------------------------------------------ *
 * The inner simulator of a pipeline (sim_pipe.c) runs each stage's slots in its
 * schedule's order: a slot's tasks (an operator copy's forward tasks, or its
 * backward and recompute tasks) wait for the barrier that ends the stage's
 * slot before, and the slot's barrier waits for them. The barriers are in the
 * barrier block, after the bulk ones. Transfers between stages are no slot's:
 * a stage goes on while its activations travel. The weights' updates wait for
 * the last slot of their stage (the optimizer steps after the flush). */
static int pipe_slot_edges(sf_sim *sim, sim_block *b, int opi, int backward, int first, int n) {
    if (!sim->pipe_bar) return 0;
    int bid = sim_block_id(opi, SLOT_CORE);
    int32_t bar = sim->pipe_bar[4 * opi + 2 * backward], prev = sim->pipe_bar[4 * opi + 2 * backward + 1];
    int base = sim->dev_barriers ? sim->n_dev : 0;
    for (int p = first; p < first + n; p++) {
        if (prev >= 0 && block_edge(b, REF(BARRIER_BLOCK(sim), base + prev), REF(bid, p))) return -1;
        if (block_edge(b, REF(bid, p), REF(BARRIER_BLOCK(sim), base + bar))) return -1;
    }
    return 0;
}

/* Where the output of an operator without a backward pass stops being held:
 * the iteration's end, or a pipeline's backward slot of its micro-batch. */
static int64_t no_bwd_end(const sf_sim *sim, int opi) {
    if (!sim->pipe_bar) return SIM_MEM_ALWAYS;
    int base = sim->dev_barriers ? sim->n_dev : 0;
    return REF(BARRIER_BLOCK(sim), base + sim->pipe_bar[4 * opi + 2]);
}

static int build_core(sf_sim *sim, int opi) {
    sim_block *b = &sim->blocks[sim->pos[sim_block_id(opi, SLOT_CORE)]];
    block_reset(b);
    const sf_op *op = sf_graph_op(sim->g, opi);
    const sf_config *c = sf_strategy_get(sim->s, opi);
    int n = c->n_parts, bwd = op_has_bwd(op), bid = sim_block_id(opi, SLOT_CORE);
    int rc = recomputes(sim, opi);
    /* The part tiles, kept by the task graph for the edge and sync blocks of
     * this operator and of its neighbours: computing them costs divisions, and
     * every block that touches the operator needs them. */
    if (sf_taskgraph_set_tiles(sim->tg, opi) != SF_OK) return -1;
    const sf_tile *tiles = sim_part_tiles(sim, opi);
    /* both passes are costed at once, the backward tasks come later */
    if (n > sim->cap_bwd_s) {
        double *q = realloc(sim->bwd_s, (size_t)n * sizeof *q);
        if (!q) return -1;
        sim->bwd_s = q;
        sim->cap_bwd_s = n;
    }
    double *bwd_s = sim->bwd_s;
    for (int p = 0; p < n; p++) {
        const sf_tile t = tiles[p];
        int dev = c->device[p];
        double d;
        sf_cost_task_fwd_bwd_s(sim->cm, op, &t, dev, &d, &bwd_s[p]);
        int fwd = device_task(sim, b, SIM_FWD, dev, opi, p, d);
        if (fwd < 0 || task_workspace(sim, b, op, &t, dev, 0, REF(bid, fwd))) return -1;
        b->st.compute_s += b->tasks[fwd].dur_s;
        /* Activations: the part's outputs that the backward pass keeps (its own
         * backward or a consumer's saves them, and no consumer ran in place over
         * them: sf_graph_output_kept; frameworks free the others once read),
         * plus whatever it saves beyond its inputs (LSTM gates, attention
         * scores, masks, max-pool indices). Inputs are the outputs of other
         * parts, counted there, or copies received from another device, counted
         * by the edge block that brings them. The runtime keeps every output. */
        sf_op_mem mem;
        sf_op_tile_memory(op, &t, &mem);
        double in_bytes = 0;
        for (int k = 0; k < op->n_inputs; k++) {
            sf_tile r;
            sf_op_input_region(op, &t, k, &r);
            in_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
        }
        double extra = mem.saved_bytes > in_bytes ? mem.saved_bytes - in_bytes : 0;
        if (sim->opt.runtime_memory) extra = 0; /* soapflow's kernels keep their outputs alone */
        else mem.output_bytes = sf_op_tile_kept_bytes(op, &t, sim->kept[opi]) - extra;
        double out_b = mem.output_bytes * sim->act_scale, extra_b = extra * sim->act_scale;
        /* the operator counts fp32 elements; activations live in the dtype. They
         * live from the part's forward task to its backward task (which runs
         * after every consumer's backward: it waits for their gradients); an
         * operator without a backward pass (the input) keeps its output to the
         * iteration's end, or in a pipeline to the end of its micro-batch's
         * backward slot on its stage. A recomputing part keeps its outputs until its
         * consumers have read them (rc_task(RC_READ)) and what it saves beyond
         * them not past its forward task; its recompute task makes both again,
         * kept to its backward task. */
        if (rc) { /* the sums (the forward pass's end) take the outputs kept to then,
                   * from the first consumer's edge block (rc_kept) */
            if (block_mem_in(b, dev, SF_SIM_MEM_ACTIVATIONS, out_b, REF(bid, fwd),
                             rc_task(sim, opi, n + RC_READ), SIM_MEM_TIMELINE) ||
                block_mem_in(b, dev, SF_SIM_MEM_ACTIVATIONS, extra_b, REF(bid, fwd), REF(bid, fwd),
                             SIM_MEM_TIMELINE) ||
                block_mem(b, dev, SF_SIM_MEM_RECOMPUTED, out_b + extra_b,
                          rc_task(sim, opi, p), REF(bid, n + p)))
                return -1;
        } else if (block_mem(b, dev, SF_SIM_MEM_ACTIVATIONS, out_b + extra_b, REF(bid, fwd),
                             bwd ? REF(bid, n + p) : no_bwd_end(sim, opi))) {
            return -1;
        }
    }
    if (pipe_slot_edges(sim, b, opi, 0, 0, n)) return -1;
    if (bwd) {
        for (int p = 0; p < n; p++) {
            int dev = c->device[p];
            if (device_task(sim, b, SIM_BWD, dev, opi, p, bwd_s[p]) < 0 ||
                task_workspace(sim, b, op, &tiles[p], dev, 1, REF(bid, n + p)))
                return -1;
            b->st.compute_s += b->tasks[b->n_tasks - 1].dur_s;
            if (block_edge(b, REF(bid, p), REF(bid, n + p))) return -1;
            if (sim->dev_barriers && block_edge(b, REF(bid, n + p), REF(BARRIER_BLOCK(sim), dev)))
                return -1;
        }
        if (pipe_slot_edges(sim, b, opi, 1, n, n)) return -1;
    }
    /* recomputation: each part's forward again (priced as its forward task),
     * after the gate and before its backward; the gate and the read barrier
     * wait for the forward tasks here and for the consumers' tasks in their
     * edge blocks (recompute_pair) */
    if (rc) {
        for (int p = 0; p < n; p++) {
            int r = device_task(sim, b, SIM_RECOMPUTE, c->device[p], opi, p, b->tasks[p].dur_s);
            if (r < 0 || task_workspace(sim, b, op, &tiles[p], c->device[p], 0, REF(bid, r)))
                return -1;
            b->st.compute_s += b->tasks[r].dur_s;
        }
        if (pipe_slot_edges(sim, b, opi, 1, 2 * n, n)) return -1;
        int g = block_task(b, SIM_BARRIER, SIM_NO_RES, opi, 0, 0, 0);
        if (g < 0 || block_task(b, SIM_BARRIER, SIM_NO_RES, opi, 0, 0, 0) < 0) return -1;
        for (int p = 0; p < n; p++)
            if (block_edge(b, REF(bid, p), rc_task(sim, opi, p)) ||
                block_edge(b, REF(bid, g), rc_task(sim, opi, p)) ||
                block_edge(b, rc_task(sim, opi, p), REF(bid, n + p)) ||
                block_edge(b, REF(bid, p), REF(bid, g)) ||
                block_edge(b, REF(bid, p), rc_task(sim, opi, n + RC_READ)))
                return -1;
    }
    /* communication inside the operator (softmax_ce split on its classes),
     * after the forward tasks, the backward ones and the recomputation's:
     * tasks 2n.. (3n + 2.. when it recomputes) of the block */
    sf_tg_inner in;
    int ni = sf_taskgraph_op_inner(sim->tg, opi, &in);
    if (ni < 0) return -1;
    return ni ? build_inner(sim, b, opi, n, bwd, &in) : 0;
}

/* ---- steps ------------------------------------------------------------------- */

/* Room for n more task references in sim->ends; -1 when out of memory. */
static int ends_reserve(sf_sim *sim, int64_t n) {
    int64_t need = sim->n_ends + n;
    if (need <= sim->cap_ends) return 0;
    int64_t cap = sim->cap_ends ? sim->cap_ends : 256;
    while (cap < need) cap *= 2;
    void *q = realloc(sim->ends, (size_t)cap * sizeof *sim->ends);
    if (!q) return -1;
    sim->ends = q;
    sim->cap_ends = cap;
    return 0;
}

static int end_push(sf_sim *sim, int64_t ref) {
    if (ends_reserve(sim, 1)) return -1;
    sim->ends[sim->n_ends++] = ref;
    return 0;
}

/* A step over a ring of devices (reduce-scatter, all-gather, all-reduce, broadcast). */
static int collective(const sf_tg_step *st) {
    return st->kind != SF_STEP_P2P && st->kind != SF_STEP_COPY && st->kind != SF_STEP_UPDATE;
}

/* The tasks of one step in block b (bid), priced by the task graph's pricing
 * function: a device task for a copy or an update; a chain of link tasks per
 * segment of a message (store-and-forward, the segments pipelined hop by hop:
 * each link takes them in key order); the link tasks of a collective's ring
 * positions, all held at once, between a barrier in (or the exit barrier of a
 * collective it follows alone) and a barrier out. Link tasks are of kind
 * `kind` (transfer, gradient or sync). The step's entry tasks (what its
 * dependencies point at) and exit tasks (what its dependents wait for) are
 * appended to sim->ends: *entry (count *n_entry) and *exit (*n_exit). */
static int step_tasks(sf_sim *sim, sim_block *b, int bid, const sf_tg_pricer *pr,
                      const sf_tg_step *st, const sf_tg_step *then, const int16_t *devs,
                      sim_kind kind, int op, int part, int64_t chained_in, int32_t *ends4) {
    int need = sf_tg_step_max_uses(st, sim->opt.segments);
    if (2 * need > sim->cap_uses) {
        void *q = realloc(sim->uses, 2 * (size_t)need * sizeof *sim->uses);
        if (!q) return -1;
        sim->uses = q;
        sim->cap_uses = 2 * need;
    }
    int nu = sf_tg_price_step(pr, st, devs, sim->uses);
    sf_tg_use *u = sim->uses;
    if (then) { /* the second phase of the same ring: the same positions and links */
        int nt = sf_tg_price_step(pr, then, devs, u + need);
        for (int i = 0; i < nu && i < nt; i++) {
            u[i].dur_s += u[need + i].dur_s;
            u[i].bytes += u[need + i].bytes;
        }
    }
    if (sim->fold) { /* identical replicas: what replica 0's nodes do, no more */
        int per = sim->fold->per, k = 0;
        if ((st->kind == SF_STEP_COPY || st->kind == SF_STEP_UPDATE) &&
            !sim_fold_keeps_node(sim, st->dev / per)) {
            ends4[0] = ends4[2] = (int32_t)sim->n_ends;
            ends4[1] = ends4[3] = 0;
            return 0;
        }
        int64_t D = sim->fold->D;
        for (int i = 0; i < nu; i++) {
            sf_link lb;
            const sf_link *l = u[i].link >= 0 ? sf_machine_link(sim->m, u[i].link, &lb) : NULL;
            int keep = sim_fold_keeps_node(sim, l ? l->node : u[i].dev / per);
            if (kind == SIM_SYNC) { /* every replica's bytes, less D times the kept ones */
                int64_t w = keep ? 1 - D : 1, by = u[i].bytes;
                if (u[i].hop == 0) b->st.fold_sync_bytes += w * by;
                *(u[i].inter_node ? &b->st.fold_inter_bytes : &b->st.fold_intra_bytes) += w * by;
            }
            if (keep) u[k++] = u[i];
        }
        nu = k;
    }
    int sync = kind == SIM_SYNC;
    int64_t bytes = 0;
    if (st->kind == SF_STEP_COPY || st->kind == SF_STEP_UPDATE) {
        int idx = device_task(sim, b, st->kind == SF_STEP_COPY ? SIM_COPY : SIM_UPDATE, st->dev, op,
                              part, nu ? u[0].dur_s : 0);
        if (idx < 0) return -1;
        b->st.compute_s += b->tasks[idx].dur_s;
        if (st->kind == SF_STEP_UPDATE && sim->pipe_bar && op >= 0) {
            /* a pipeline's optimizer step waits for the flush: its stage's last slot */
            int32_t at = sim->pipe_bar[4 * op + 2], per = sim->pipe_per;
            int base = sim->dev_barriers ? sim->n_dev : 0;
            if (block_edge(b, REF(BARRIER_BLOCK(sim), base + at / per * per + per - 1),
                           REF(bid, idx)))
                return -1;
        }
        ends4[0] = ends4[2] = (int32_t)sim->n_ends;
        ends4[1] = ends4[3] = 1;
        return end_push(sim, REF(bid, idx));
    }
    int coll = collective(st);
    int64_t in = chained_in, out = -1;
    if (coll) {
        if (in < 0) {
            int bi = block_task(b, SIM_BARRIER, SIM_NO_RES, op, part, 0, 0);
            if (bi < 0) return -1;
            in = REF(bid, bi);
        }
        int bo = block_task(b, SIM_BARRIER, SIM_NO_RES, op, part, 0, 0);
        if (bo < 0) return -1;
        out = REF(bid, bo);
        /* a collective among other replicas' nodes alone (folded): its barriers */
        if (nu == 0 && block_edge(b, in, out)) return -1;
    }
    /* entries and exits: a collective's barriers; a message's first and last hops */
    int64_t first_entry = sim->n_ends;
    if (ends_reserve(sim, 2 * (int64_t)nu + 2)) return -1;
    int64_t *ent = sim->ends + sim->n_ends, *ex = ent + nu + 1;
    int n_ent = 0, n_ex = 0;
    if (coll) ent[n_ent++] = in;
    int64_t prev = -1;
    for (int i = 0; i < nu; i++) {
        int res = sim_link_res(sim, u[i].link);
        int idx = res < 0 ? -1 : block_task(b, kind, res, op, part, u[i].dur_s, u[i].bytes);
        if (idx < 0) return -1;
        int64_t ref = REF(bid, idx);
        *(sync ? &b->st.sync_s : &b->st.xfer_s) += b->tasks[idx].dur_s;
        *(u[i].inter_node ? &b->st.inter_bytes : &b->st.intra_bytes) += u[i].bytes;
        if (u[i].hop == 0) bytes += u[i].bytes;
        if (coll) {
            if (block_edge(b, in, ref) || block_edge(b, ref, out)) return -1;
            continue;
        }
        if (u[i].hop == 0) {
            ent[n_ent++] = ref;
        } else if (block_edge(b, prev, ref)) {
            return -1;
        }
        if (i + 1 == nu || u[i + 1].hop == 0) ex[n_ex++] = ref;
        prev = ref;
    }
    if (coll) ex[n_ex++] = out;
    *(sync ? &b->st.sync_bytes : &b->st.xfer_bytes) += bytes;
    /* pack the exits right after the entries */
    memmove(ent + n_ent, ex, (size_t)n_ex * sizeof *ex);
    ends4[0] = (int32_t)first_entry;
    ends4[1] = n_ent;
    ends4[2] = (int32_t)(first_entry + n_ent);
    ends4[3] = n_ex;
    sim->n_ends += n_ent + n_ex;
    return 0;
}

/* Edges from every exit of step `from` to every entry of step `to`. */
static int wire(sf_sim *sim, sim_block *b, const int32_t *from4, const int32_t *to4) {
    for (int i = 0; i < from4[3]; i++)
        for (int j = 0; j < to4[1]; j++)
            if (block_edge(b, sim->ends[from4[2] + i], sim->ends[to4[0] + j])) return -1;
    return 0;
}

static int wire_from(sf_sim *sim, sim_block *b, int64_t from, const int32_t *to4) {
    for (int j = 0; j < to4[1]; j++)
        if (block_edge(b, from, sim->ends[to4[0] + j])) return -1;
    return 0;
}

static int wire_to(sf_sim *sim, sim_block *b, const int32_t *from4, int64_t to) {
    for (int i = 0; i < from4[3]; i++)
        if (block_edge(b, sim->ends[from4[2] + i], to)) return -1;
    return 0;
}

static int end_at_reserve(sf_sim *sim, int64_t n_steps) {
    if (4 * n_steps <= sim->cap_end_at) return 0;
    int64_t cap = 4 * n_steps + 64;
    void *q = realloc(sim->end_at, (size_t)cap * sizeof *sim->end_at);
    if (!q) return -1;
    sim->end_at = q;
    sim->cap_end_at = cap;
    return 0;
}

/* The steps inside operator opi (sf_taskgraph_op_inner) in its core block b:
 * each group's first step after the forward tasks of its parts, the next after
 * it, and the parts' backward tasks after the last. */
static int build_inner(sf_sim *sim, sim_block *b, int opi, int n, int bwd, const sf_tg_inner *in) {
    int bid = sim_block_id(opi, SLOT_CORE);
    if (end_at_reserve(sim, in->n_steps)) return -1;
    sf_tg_pricer prc = {.m = sim->m, .cm = sim->cm, .segments = sim->opt.segments};
    sim->n_ends = 0;
    for (int g = 0; g < in->n; g++) {
        const sf_tg_inner_group *gr = &in->groups[g];
        int rep = in->parts[gr->part_start], last = gr->step_start + gr->n_steps - 1;
        for (int q = gr->step_start; q <= last; q++) {
            const sf_tg_step *st = &in->steps[q];
            int32_t *e4 = &sim->end_at[4 * q];
            if (step_tasks(sim, b, bid, &prc, st, NULL, in->devs, SIM_XFER, opi, rep, -1, e4))
                return -1;
            for (int d = 0; d < st->n_deps; d++)
                if (wire(sim, b, &sim->end_at[4 * in->deps[st->dep + d]], e4)) return -1;
            for (int r = 0; r < gr->n_parts; r++) {
                int part = in->parts[gr->part_start + r];
                if (!st->n_deps && wire_from(sim, b, REF(bid, part), e4)) return -1;
                if (q == last && bwd && wire_to(sim, b, e4, REF(bid, n + part))) return -1;
            }
        }
    }
    return 0;
}

/* ---- edges ------------------------------------------------------------------- */

/* Whether op opi's output is a chain link (above): one consumer, which
 * recomputes (a fact of the graph and of the consumer's config). */
static int rc_chain(const sf_sim *sim, int opi) {
    const sf_tensor_ref *cons;
    return sf_taskgraph_consumers(sim->tg, opi, &cons) == 1 && recomputes(sim, cons[0].op);
}

/* The all-at-once sums of a recomputing producer outside a chain: its parts'
 * outputs, alive at the forward pass's end, entered once, by its first
 * consumer's edge block (a chain's are freed by then). */
static int rc_kept(sf_sim *sim, sim_block *b, int pi, int xi, int k) {
    const sf_tensor_ref *cons;
    if (!recomputes(sim, pi) || rc_chain(sim, pi) || sf_taskgraph_consumers(sim->tg, pi, &cons) < 1 ||
        cons[0].op != xi || cons[0].out != k)
        return 0;
    const sf_op *op = sf_graph_op(sim->g, pi);
    const sf_config *c = sf_strategy_get(sim->s, pi);
    const sf_tile *tiles = sim_part_tiles(sim, pi);
    for (int p = 0; p < c->n_parts; p++) {
        sf_op_mem mem;
        sf_op_tile_memory(op, &tiles[p], &mem);
        if (block_mem_in(b, c->device[p], SF_SIM_MEM_ACTIVATIONS, mem.output_bytes * sim->act_scale,
                         SIM_MEM_ALWAYS, SIM_MEM_ALWAYS, SIM_MEM_SUMS))
            return -1;
    }
    return 0;
}

/* Recomputation across one pair (the rules above build_core): what the
 * recomputing producer's read barrier and gate wait for on the consumer's
 * side, and in a chain the order of the two recomputations where the
 * consumer part reads the producer's output in place. The consumer's gate
 * into the producer's is one edge per block (build_edge). */
static int recompute_pair(sf_sim *sim, sim_block *b, int pi, int xi, const sf_tg_pair *pr,
                          int in_place, int64_t x_fwd, int64_t x_b) {
    if (!recomputes(sim, pi)) return 0;
    int np = sf_strategy_get(sim->s, pi)->n_parts, chain = rc_chain(sim, pi);
    if (block_edge(b, chain || !in_place ? x_fwd : x_b, rc_task(sim, pi, np + RC_READ)))
        return -1;
    if (!chain) return block_edge(b, x_b, rc_task(sim, pi, np + RC_GATE));
    return in_place ? block_edge(b, rc_task(sim, pi, pr->prod_part), rc_task(sim, xi, pr->cons_part))
                    : 0;
}

/* The tasks of one pair: the task graph's steps for it (its transfers and, on a
 * machine that prices them, the runtime's copies), between the producer part's
 * forward task and the consumer part's, and the gradient's back between their
 * backward tasks; a local pair with no steps is a dependency alone. */
static int edge_pair(sf_sim *sim, sim_block *b, int bid, int xi, int pi, const sf_tg_pair *pr,
                     int p_bwd, int np, int nx, int64_t sum, int64_t grads_in, int scatter) {
    int core_x = sim_block_id(xi, SLOT_CORE), core_p = sim_block_id(pi, SLOT_CORE);
    int i = pr->prod_part, j = pr->cons_part;
    int64_t p_fwd = REF(core_p, i), x_fwd = REF(core_x, j);
    int64_t p_b = REF(core_p, np + i), x_b = REF(core_x, nx + j);
    if (sum >= 0) { /* a partial sum's pair: after its reduction, before its dual */
        p_fwd = sum;
        p_b = grads_in;
    }
    sf_tg_step st[SF_TG_PAIR_STEPS];
    int32_t deps[SF_TG_PAIR_STEPS], e4[4 * SF_TG_PAIR_STEPS];
    int n_fwd, n = sf_taskgraph_pair_steps(sim->tg, pr, p_bwd, st, deps, &n_fwd);
    sf_tg_pricer prc = {.m = sim->m, .cm = sim->cm, .segments = sim->opt.segments};
    sim->n_ends = 0;
    int first_fwd = b->n_tasks, first_grad = -1;
    for (int q = 0; q < n; q++) {
        sim_kind kind = q < n_fwd ? SIM_XFER : SIM_GRAD;
        if (q == n_fwd) first_grad = b->n_tasks;
        if (step_tasks(sim, b, bid, &prc, &st[q], NULL, NULL, kind, xi, j, -1, &e4[4 * q]))
            return -1;
        if (st[q].n_deps ? wire(sim, b, &e4[4 * deps[st[q].dep]], &e4[4 * q])
                         : wire_from(sim, b, q < n_fwd ? p_fwd : x_b, &e4[4 * q]))
            return -1;
    }
    if (n_fwd ? wire_to(sim, b, &e4[4 * (n_fwd - 1)], x_fwd) : block_edge(b, p_fwd, x_fwd))
        return -1;
    /* the received copy lives on the consumer's device, from its transfer to
     * the consumer's backward task */
    double bytes = (double)pr->numel * SF_ELEM_BYTES * sim->act_scale;
    if (pr->src_dev != pr->dst_dev && block_mem(b, pr->dst_dev, SF_SIM_MEM_RECEIVED, bytes,
                                                n_fwd ? REF(bid, first_fwd) : x_fwd, x_b))
        return -1;
    /* runtime_memory: a local pair not read in place is copied into the
     * consumer's input buffer (a reduce-scatter's holder has a chunk, never
     * the piece in place), kept to its backward */
    if (sim->opt.runtime_memory && pr->src_dev == pr->dst_dev && (!pr->in_place || scatter) &&
        block_mem(b, pr->dst_dev, SF_SIM_MEM_RECEIVED, bytes, x_fwd, x_b))
        return -1;
    if (recompute_pair(sim, b, pi, xi, pr, sum < 0 && pr->src_dev == pr->dst_dev, x_fwd, x_b))
        return -1;
    if (!p_bwd) return 0;
    /* the gradient of the region: on the consumer's device from its backward
     * task to the gradient's arrival, on the producer's from then to the
     * producer's backward task */
    int64_t arrive = n > n_fwd ? REF(bid, b->n_tasks - 1) : x_b;
    if (pr->src_dev != pr->dst_dev &&
        block_mem(b, pr->dst_dev, SF_SIM_MEM_ACT_GRADS, bytes, x_b, arrive))
        return -1;
    if (block_mem(b, pr->src_dev, SF_SIM_MEM_ACT_GRADS, bytes,
                  n > n_fwd ? REF(bid, first_grad) : x_b, p_b))
        return -1;
    /* runtime_memory: a gradient sent to another device is also the packed
     * send copy, kept to the step's end, and on the producer's side its
     * receive buffer beside the output gradient it is added into */
    if (sim->opt.runtime_memory && pr->src_dev != pr->dst_dev &&
        (block_mem(b, pr->dst_dev, SF_SIM_MEM_ACT_GRADS, bytes, x_b, SIM_MEM_ALWAYS) ||
         block_mem(b, pr->src_dev, SF_SIM_MEM_ACT_GRADS, bytes,
                   n > n_fwd ? REF(bid, first_grad) : x_b, p_b)))
        return -1;
    return n > n_fwd ? wire_to(sim, b, &e4[4 * (n - 1)], p_b) : block_edge(b, x_b, p_b);
}

/* Edges from the forward tasks of group g's parts on the devices step st
 * involves into the step's entries. */
static int parts_into(sf_sim *sim, sim_block *b, const sf_tg_reduces *rd, const sf_tg_reduce *g,
                      const sf_tg_step *st, int pi, const int32_t *to4) {
    const sf_config *cp = sf_strategy_get(sim->s, pi);
    int core_p = sim_block_id(pi, SLOT_CORE);
    for (int r = 0; r < g->n_parts; r++) {
        int part = rd->parts[g->part_start + r], dev = cp->device[part], in = st->dev == dev;
        for (int q = 0; q < st->n_group && st->dev < 0; q++) in |= rd->devs[st->group + q] == dev;
        if (in && wire_from(sim, b, REF(core_p, part), to4)) return -1;
    }
    return 0;
}

/* An edge from a producer split along a reduction dimension: per group of
 * partial sums (sf_taskgraph_edge_reduce), its reduction steps after its parts'
 * forward tasks into a barrier the group's pairs start from, and the pairs'
 * gradients into a barrier its dual steps start from, which the parts'
 * backward tasks wait for. */
static int build_reduced_edge(sf_sim *sim, sim_block *b, int bid, int xi, int pi,
                              const sf_tg_pair *pr, int n, const sf_tg_reduces *rd, int p_bwd,
                              int np, int nx) {
    int core_p = sim_block_id(pi, SLOT_CORE);
    const sf_config *cp = sf_strategy_get(sim->s, pi);
    int64_t sum[SF_MAX_PARTS], gin[SF_MAX_PARTS];
    int of[SF_MAX_PARTS]; /* the group of each producer part */
    if (end_at_reserve(sim, rd->n_steps)) return -1;
    sf_tg_pricer prc = {.m = sim->m, .cm = sim->cm, .segments = sim->opt.segments};
    for (int g = 0; g < rd->n; g++) {
        const sf_tg_reduce *gr = &rd->groups[g];
        int rep = rd->parts[gr->part_start];
        for (int r = 0; r < gr->n_parts; r++) of[rd->parts[gr->part_start + r]] = g;
        int s = block_task(b, SIM_BARRIER, SIM_NO_RES, xi, rep, 0, 0);
        int t = s < 0 ? -1 : block_task(b, SIM_BARRIER, SIM_NO_RES, xi, rep, 0, 0);
        if (t < 0) return -1;
        sum[g] = REF(bid, s);
        gin[g] = REF(bid, t);
        for (int r = 0; r < gr->n_parts; r++)
            if (block_edge(b, REF(core_p, rd->parts[gr->part_start + r]), sum[g])) return -1;
        sim->n_ends = 0;
        for (int q = gr->step_start; q < gr->step_start + gr->n_fwd; q++) {
            const sf_tg_step *st = &rd->steps[q];
            int32_t *e4 = &sim->end_at[4 * q];
            int first = b->n_tasks;
            if (step_tasks(sim, b, bid, &prc, st, NULL, rd->devs, SIM_XFER, xi, rep, -1, e4) ||
                parts_into(sim, b, rd, gr, st, pi, e4) || wire_to(sim, b, e4, sum[g]))
                return -1;
            for (int d = 0; d < st->n_deps; d++)
                if (wire(sim, b, &sim->end_at[4 * rd->deps[st->dep + d]], e4)) return -1;
            if (st->kind == SF_STEP_P2P &&
                block_mem(b, st->peer, SF_SIM_MEM_RECEIVED, (double)st->numel * SF_ELEM_BYTES,
                          REF(bid, first), gin[g]))
                return -1; /* the partial sum received, until the group's gradients are in */
        }
    }
    for (int q = 0; q < n; q++) {
        int g = of[pr[q].prod_part];
        if (edge_pair(sim, b, bid, xi, pi, &pr[q], p_bwd, np, nx, sum[g], gin[g],
                      rd->groups[g].kind == SF_REDUCE_SCATTER))
            return -1;
    }
    if (!p_bwd) return 0;
    for (int g = 0; g < rd->n; g++) {
        const sf_tg_reduce *gr = &rd->groups[g];
        int rep = rd->parts[gr->part_start];
        int o = block_task(b, SIM_BARRIER, SIM_NO_RES, xi, rep, 0, 0);
        if (o < 0 || block_edge(b, gin[g], REF(bid, o))) return -1;
        sim->n_ends = 0;
        for (int q = gr->step_start + gr->n_fwd; q < gr->step_start + gr->n_steps; q++) {
            const sf_tg_step *st = &rd->steps[q];
            int32_t *e4 = &sim->end_at[4 * q];
            if (step_tasks(sim, b, bid, &prc, st, NULL, rd->devs, SIM_GRAD, xi, rep, -1, e4) ||
                wire_to(sim, b, e4, REF(bid, o)))
                return -1;
            if (st->n_deps) {
                for (int d = 0; d < st->n_deps; d++)
                    if (wire(sim, b, &sim->end_at[4 * rd->deps[st->dep + d]], e4)) return -1;
            } else if (wire_from(sim, b, gin[g], e4)) {
                return -1;
            }
        }
        for (int r = 0; r < gr->n_parts; r++)
            if (block_edge(b, REF(bid, o),
                           REF(core_p, cp->n_parts + rd->parts[gr->part_start + r])))
                return -1;
    }
    return 0;
}

/* The transfers and dependencies that feed input k of xi: the task graph's
 * pairs (taskgraph.c), priced; a partial-sum producer's reductions before them. */
static int build_edge(sf_sim *sim, int xi, int k) {
    int bid = sim_block_id(xi, 1 + k);
    sim_block *b = &sim->blocks[sim->pos[bid]];
    block_reset(b);
    int pi = sf_graph_op(sim->g, xi)->inputs[k].op;
    int p_bwd = op_has_bwd(sf_graph_op(sim->g, pi));
    int np = sf_strategy_get(sim->s, pi)->n_parts, nx = sf_strategy_get(sim->s, xi)->n_parts;
    const sf_tg_pair *pr;
    int n = sf_taskgraph_edge(sim->tg, xi, k, &pr);
    if (n < 0) return -1;
    if (recomputes(sim, pi) && rc_chain(sim, pi) &&
        block_edge(b, rc_task(sim, xi, nx + RC_GATE), rc_task(sim, pi, np + RC_GATE)))
        return -1;
    if (rc_kept(sim, b, pi, xi, k)) return -1;
    sf_tg_reduces rd;
    if (sf_taskgraph_edge_reduce(sim->tg, &rd))
        return build_reduced_edge(sim, b, bid, xi, pi, pr, n, &rd, p_bwd, np, nx);
    for (int q = 0; q < n; q++)
        if (edge_pair(sim, b, bid, xi, pi, &pr[q], p_bwd, np, nx, -1, -1, 0)) return -1;
    return 0;
}

/* ---- gradient syncs -------------------------------------------------------------- */

/* Edges from the shard's gradients on device d (its row of the shard: the
 * backward tasks of its entries there, or in bulk mode d's barrier) into the
 * entries of a step. */
/* The row of device d among shard sh's devices (its entries on d). */
static int shard_row(const sf_tg_sync *sy, const sf_tg_shard *sh, int d) {
    /* the shard's devices are in id order: find d's row by bisection (a ring
     * over 4096 devices asks for each of them) */
    int lo = sh->dev_start, hi = sh->dev_start + sh->n_devs - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sy->devs[mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    int row = lo;
    if (row >= sh->dev_start + sh->n_devs || sy->devs[row] != d) {
        row = sh->dev_start; /* not in order after all: look at every row */
        while (row < sh->dev_start + sh->n_devs && sy->devs[row] != d) row++;
    }
    return row;
}

/* The task of entry e of a shard: its forward (bwd 0) or backward task. */
static int64_t entry_task(const sf_sim *sim, const sf_tg_entry *e, int bwd) {
    int n = bwd ? sf_strategy_get(sim->s, e->op)->n_parts : 0;
    return REF(sim_block_id(e->op, SLOT_CORE), n + e->part);
}

static int grads_into(sf_sim *sim, sim_block *b, const sf_tg_sync *sy, const sf_tg_shard *sh, int d,
                      const int32_t *to4) {
    if (sim->opt.sync == SF_SYNC_BULK) return wire_from(sim, b, REF(BARRIER_BLOCK(sim), d), to4);
    int row = shard_row(sy, sh, d);
    if (row >= sh->dev_start + sh->n_devs) return 0;
    for (int32_t i = sy->ent_start[row]; i < sy->ent_start[row + 1]; i++) {
        const sf_tg_entry *e = &sy->ents[i];
        if (wire_from(sim, b, entry_task(sim, e, 1), to4)) return -1;
    }
    return 0;
}

/* ---- ZeRO ---------------------------------------------------------------------- */

/* The gate of stage 3's gathers (the prefetch of FSDP): a weight group's
 * forward gather waits for the forward tasks of the operator two before its
 * first member (the producer of its first input's producer; one when there is
 * no second), so that it overlaps the operator just before; its backward
 * gather for the backward tasks of the operator two after its last member
 * (along first consumers), or one after, or with no consumer for its own
 * forward tasks. The operator, with *bwd whether its backward tasks; -1 for
 * none. sim.c's delta update rebuilds the sync blocks whose gate may have
 * changed (sim_zero_gated). */
int sim_zero_gate(const sf_sim *sim, int owner, int phase, int *bwd) {
    const int *members;
    int nm = sf_taskgraph_members(sim->tg, owner, &members);
    if (nm < 1) return -1;
    *bwd = 0;
    if (phase == SF_PHASE_FORWARD) {
        const sf_op *m = sf_graph_op(sim->g, members[0]);
        int p = m->n_inputs ? m->inputs[0].op : -1;
        const sf_op *po = p >= 0 ? sf_graph_op(sim->g, p) : NULL;
        int pp = po && po->n_inputs ? po->inputs[0].op : -1;
        return pp >= 0 ? pp : p;
    }
    int last = members[nm - 1], at = last;
    for (int k = 0; k < 2; k++) {
        const sf_tensor_ref *cons;
        if (sf_taskgraph_consumers(sim->tg, at, &cons) < 1) break;
        at = cons[0].op;
    }
    *bwd = at != last;
    return at;
}

/* Edges from gate op's tasks (forward or backward, sim_zero_gate) on the
 * devices of step st into the step's entries; the devices are marked first. */
static int gate_into(sf_sim *sim, sim_block *b, const sf_tg_step *st, const int16_t *devs,
                     int gate, int bwd, const int32_t *to4) {
    if (gate < 0) return 0;
    if (++sim->upd_stamp == INT32_MAX) {
        memset(sim->upd_mark, 0, (size_t)sim->n_dev * sizeof *sim->upd_mark);
        sim->upd_stamp = 1;
    }
    if (st->dev >= 0) {
        sim->upd_mark[st->dev] = sim->upd_stamp;
    } else {
        for (int g = 0; g < st->n_group; g++) sim->upd_mark[devs[st->group + g]] = sim->upd_stamp;
    }
    const sf_config *c = sf_strategy_get(sim->s, gate);
    int bid = sim_block_id(gate, SLOT_CORE);
    for (int p = 0; p < c->n_parts; p++)
        if (sim->upd_mark[c->device[p]] == sim->upd_stamp &&
            wire_from(sim, b, REF(bid, (bwd ? c->n_parts : 0) + p), to4))
            return -1;
    return 0;
}

/* Edges from step st's exits into the forward (phase FORWARD) or backward
 * tasks of shard sh's entries on the devices st involves, and with rc_gate
 * (the gather waits for the gate of a recomputing last member) into their
 * recompute tasks. Without it a member's recompute task does not wait for the
 * gather: its chain may reach past the gather's gate. */
static int gather_into(sf_sim *sim, sim_block *b, const sf_tg_sync *sy, const sf_tg_shard *sh,
                       const sf_tg_step *st, const int16_t *devs, int rc_gate, const int32_t *e4) {
    int n = st->dev >= 0 ? 1 : st->n_group;
    for (int g = 0; g < n; g++) {
        int d = st->dev >= 0 ? st->dev : devs[st->group + g];
        int row = shard_row(sy, sh, d);
        if (row >= sh->dev_start + sh->n_devs) continue;
        for (int32_t i = sy->ent_start[row]; i < sy->ent_start[row + 1]; i++) {
            const sf_tg_entry *e = &sy->ents[i];
            int bwd = st->phase == SF_PHASE_BACKWARD;
            if (wire_to(sim, b, e4, entry_task(sim, e, bwd)) ||
                (bwd && rc_gate && recomputes(sim, e->op) &&
                 wire_to(sim, b, e4, rc_task(sim, e->op, e->part))))
                return -1;
        }
    }
    return 0;
}

/* The gradient sync and update of every shard of owner's weight group: the
 * steps its scheme lowers to (the task graph's, comm.c), priced. A step that
 * waits for gradients waits for those of each device it involves; a message
 * that does (a parameter server's) starts from a barrier that joins them. */
/* The memory of n weight elements on a device that holds them: in fp32 the
 * weights and their gradients, and where the device updates them, the
 * optimizer's state (state = 2 + its factor, the weight's bytes each). Under
 * mixed precision (ZeRO's count, Rajbhandari et al. 2020, section 3.1) a device
 * that updates keeps the fp32 master (4 bytes) and state (4 x factor), the
 * 16-bit compute copy and the 16-bit gradient; a device that only computes
 * (a parameter server's replica) the compute copy and the gradient. */
static double weight_mem(const sf_sim *sim, int64_t n, int updates, double state) {
    if (!sf_dtype_mixed(sf_cost_dtype(sim->cm)))
        return (double)(n * SF_ELEM_BYTES) * (updates ? state : 2.0);
    double eb = sf_cost_elem_bytes(sim->cm);
    if (!updates) return (double)n * 2.0 * eb;
    return (double)n * (SF_ELEM_BYTES * (state - 1.0) + 2.0 * eb);
}

/* The memory of a ZeRO shard of n elements on each of its R devices, which
 * updates chunk c of it (its UPDATE step's numel), per element: w the compute
 * copy, g the gradient, k the fp32 master (mixed precision) and the
 * optimizer's state. Kept the whole iteration: the compute copy whole below
 * stage 3 (else chunk c), the gradient whole below stage 2 (else c), master
 * and state for c. For the timeline alone: from stage 2, the whole gradient
 * from the first backward task on the device to the reduce-scatter's end;
 * at stage 3, the whole compute copy from each gather's start to the end of
 * the forward (backward) task it serves (Rajbhandari et al. 2020, 3.1-3.2). */
static int zero_mem(sf_sim *sim, sim_block *b, const sf_tg_sync *sy, const sf_tg_shard *sh,
                    const sf_tg_steps *ss, int first, int last, int stage, double factor) {
    double eb = sf_cost_elem_bytes(sim->cm);
    int mixed = sf_dtype_mixed(sf_cost_dtype(sim->cm));
    double w = mixed ? eb : SF_ELEM_BYTES, g = w;
    double k = (mixed ? SF_ELEM_BYTES : 0) + SF_ELEM_BYTES * factor;
    double n = (double)sh->numel;
    int64_t rs_end = -1, gather_in[SF_PHASE_COUNT] = {-1, -1, -1};
    for (int q = first; q < last; q++) {
        const sf_tg_step *st = &ss->steps[q];
        const int32_t *e4 = &sim->end_at[4 * q];
        if (st->kind == SF_STEP_REDUCE_SCATTER && st->phase == SF_PHASE_SYNC)
            rs_end = sim->ends[e4[2]];
        if (st->kind == SF_STEP_ALL_GATHER && st->phase != SF_PHASE_SYNC)
            gather_in[st->phase] = sim->ends[e4[0]];
    }
    for (int q = first; q < last; q++) {
        const sf_tg_step *st = &ss->steps[q];
        if (st->kind != SF_STEP_UPDATE || st->dev < 0) continue;
        int d = st->dev, row = shard_row(sy, sh, d);
        double c = (double)st->numel;
        double keep = (stage < SF_ZERO_WEIGHTS ? n : c) * w +
                      (stage < SF_ZERO_GRADIENTS ? n : c) * g + c * k;
        if (block_mem(b, d, SF_SIM_MEM_WEIGHTS, keep, SIM_MEM_ALWAYS, SIM_MEM_ALWAYS)) return -1;
        if (row >= sh->dev_start + sh->n_devs || n == c) continue;
        const sf_tg_entry *e0 = &sy->ents[sy->ent_start[row]];
        const sf_tg_entry *e1 = &sy->ents[sy->ent_start[row + 1] - 1];
        if (stage >= SF_ZERO_GRADIENTS && rs_end >= 0 &&
            block_mem(b, d, SF_SIM_MEM_WEIGHT_GRADS, (n - c) * g, entry_task(sim, e1, 1), rs_end))
            return -1;
        if (stage >= SF_ZERO_WEIGHTS) {
            if (gather_in[SF_PHASE_FORWARD] >= 0 &&
                block_mem(b, d, SF_SIM_MEM_GATHERED, (n - c) * w, gather_in[SF_PHASE_FORWARD],
                          entry_task(sim, e1, 0)))
                return -1;
            if (gather_in[SF_PHASE_BACKWARD] >= 0 &&
                block_mem(b, d, SF_SIM_MEM_GATHERED, (n - c) * w, gather_in[SF_PHASE_BACKWARD],
                          entry_task(sim, e0, 1)))
                return -1;
        }
    }
    return 0;
}

/* The packed gradients of a shard whose collectives run on a packed copy
 * (the task graph lowers packing and unpacking copies where copies are
 * priced, taskgraph/comm.c): on each device from its packing copy's first
 * task to its unpacking copy's last, in the gradient's dtype. */
static int pack_buffers(sf_sim *sim, sim_block *b, const sf_tg_steps *ss, int first, int last) {
    for (int q = first; q < last; q++) {
        const sf_tg_step *st = &ss->steps[q];
        if (st->kind != SF_STEP_COPY || !st->grads || st->dev < 0) continue;
        for (int u = q + 1; u < last; u++) {
            const sf_tg_step *un = &ss->steps[u];
            if (un->kind != SF_STEP_COPY || un->grads || un->dev != st->dev) continue;
            double bytes = (double)st->numel * sf_cost_elem_bytes(sim->cm);
            if (block_mem_in(b, st->dev, SF_SIM_MEM_BUFFERS, bytes,
                             sim->ends[sim->end_at[4 * q]], sim->ends[sim->end_at[4 * u + 2]],
                             SIM_MEM_TIMELINE))
                return -1;
            break;
        }
    }
    return 0;
}

static int build_sync(sf_sim *sim, int owner) {
    int bid = sim_block_id(owner, SLOT_SYNC);
    sim_block *b = &sim->blocks[sim->pos[bid]];
    block_reset(b);
    sf_tg_sync sy;
    sf_tg_steps ss;
    if (!sim->upd_mark) {
        sim->upd_mark = calloc((size_t)(sim->n_dev > 0 ? sim->n_dev : 1), sizeof *sim->upd_mark);
        if (!sim->upd_mark) return -1;
    }
    if (sf_taskgraph_sync_steps(sim->tg, owner, &sy, &ss) != SF_OK) return -1;
    if (end_at_reserve(sim, ss.n_steps)) return -1;
    double factor = sim->opt.optimizer_state_factor > 0
                        ? sim->opt.optimizer_state_factor
                        : sf_optimizer_state_slots(sf_cost_optimizer(sim->cm));
    double state = 2.0 + factor;
    int stage = sf_strategy_get(sim->s, owner)->zero;
    for (int cls = 0; cls < sy.n_shards; cls++) {
        const sf_tg_shard *sh = &sy.shards[cls];
        sf_tg_pricer prc = {.m = sim->m,
                            .cm = sim->cm,
                            .segments = sim->opt.segments,
                            .op = sf_graph_op(sim->g, sh->rep_op),
                            .tile = &sim_part_tiles(sim, sh->rep_op)[sh->rep_part]};
        sim->n_ends = 0;
        int first = ss.shard_start[cls], last = ss.shard_start[cls + 1];
        for (int q = first; q < last; q++) {
            const sf_tg_step *st = &ss.steps[q];
            int32_t *e4 = &sim->end_at[4 * q];
            /* A reduce-scatter that an all-gather over the same ring follows
             * alone is an all-reduce: one kernel (NCCL) or one MPI_Allreduce
             * (the runtime) runs both phases and holds the ring's links through
             * them, so they are priced as one task per link, which no other
             * transfer can cut in two. */
            const sf_tg_step *then = NULL;
            if (st->kind == SF_STEP_REDUCE_SCATTER && q + 1 < last) {
                const sf_tg_step *n2 = &ss.steps[q + 1];
                if (n2->kind == SF_STEP_ALL_GATHER && n2->n_deps == 1 && ss.deps[n2->dep] == q &&
                    n2->group == st->group && n2->n_group == st->n_group && n2->numel == st->numel)
                    then = n2;
            }
            /* a collective that follows one collective alone starts at its exit */
            int64_t chained = -1;
            if (st->n_deps == 1 && collective(st) && collective(&ss.steps[ss.deps[st->dep]]))
                chained = sim->ends[sim->end_at[4 * ss.deps[st->dep] + 2]];
            if (st->kind == SF_STEP_P2P && st->grads) { /* join the sender's gradients first */
                int j = block_task(b, SIM_BARRIER, SIM_NO_RES, owner, cls, 0, 0);
                if (j < 0) return -1;
                int32_t j4[4] = {(int32_t)sim->n_ends, 1, (int32_t)sim->n_ends, 1};
                if (end_push(sim, REF(bid, j)) || grads_into(sim, b, &sy, sh, st->dev, j4) ||
                    step_tasks(sim, b, bid, &prc, st, NULL, ss.devs, SIM_SYNC, owner, cls, -1,
                               e4) ||
                    wire(sim, b, j4, e4))
                    return -1;
            } else {
                if (step_tasks(sim, b, bid, &prc, st, then, ss.devs, SIM_SYNC, owner, cls, chained,
                               e4))
                    return -1;
                if (st->grads) {
                    if (st->dev >= 0) {
                        if (grads_into(sim, b, &sy, sh, st->dev, e4)) return -1;
                    } else {
                        for (int g = 0; g < st->n_group; g++)
                            if (grads_into(sim, b, &sy, sh, ss.devs[st->group + g], e4)) return -1;
                    }
                }
                /* the runtime runs the sync's collectives after its backward pass
                 * (but ZeRO-2/3's reduce-scatter, waited for in the pass) */
                if (sim->late_sync && collective(st) && st->phase == SF_PHASE_SYNC &&
                    !(stage >= SF_ZERO_GRADIENTS && st->kind == SF_STEP_REDUCE_SCATTER))
                    for (int g = 0; g < st->n_group; g++)
                        if (wire_from(sim, b, REF(BARRIER_BLOCK(sim), ss.devs[st->group + g]), e4))
                            return -1;
            }
            for (int d = 0; d < st->n_deps && chained < 0; d++)
                if (wire(sim, b, &sim->end_at[4 * ss.deps[st->dep + d]], e4)) return -1;
            if (st->phase != SF_PHASE_SYNC) { /* ZeRO-3: a gather before a use */
                /* the recompute tasks need the weights before the backward
                 * ones, and a chain's recomputation waits for its gate: a group
                 * whose last member recomputes gathers at that member's gate */
                const int *mem;
                int nm = sf_taskgraph_members(sim->tg, owner, &mem), gbwd;
                int lm = nm > 0 ? mem[nm - 1] : owner;
                int rc_gate = st->phase == SF_PHASE_BACKWARD && recomputes(sim, lm);
                int gate = rc_gate ? -1 : sim_zero_gate(sim, owner, st->phase, &gbwd);
                if (!st->n_deps &&
                    (rc_gate ? wire_from(sim, b,
                                         rc_task(sim, lm, sf_strategy_get(sim->s, lm)->n_parts + RC_GATE),
                                         e4)
                             : gate_into(sim, b, st, ss.devs, gate, gbwd, e4)))
                    return -1;
                if (gather_into(sim, b, &sy, sh, st, ss.devs, rc_gate, e4)) return -1;
            }
            if (then) { /* the all-gather ends where the fused task does */
                memcpy(&sim->end_at[4 * (q + 1)], e4, 4 * sizeof *e4);
                q++;
            }
        }
        if (pack_buffers(sim, b, &ss, first, last)) return -1;
        /* weights, gradients and, where the shard is updated, the optimizer's
         * state; the devices that update are marked first (one pass over the
         * steps, not one per device) */
        if (++sim->upd_stamp == INT32_MAX) {
            memset(sim->upd_mark, 0, (size_t)sim->n_dev * sizeof *sim->upd_mark);
            sim->upd_stamp = 1;
        }
        for (int q = first; q < last; q++)
            if (ss.steps[q].kind == SF_STEP_UPDATE && ss.steps[q].dev >= 0 &&
                ss.steps[q].dev < sim->n_dev)
                sim->upd_mark[ss.steps[q].dev] = sim->upd_stamp;
        if (stage != SF_ZERO_NONE && sh->n_devs > 1) {
            if (zero_mem(sim, b, &sy, sh, &ss, first, last, stage, factor)) return -1;
            continue;
        }
        for (int r = sh->dev_start; r < sh->dev_start + sh->n_devs; r++) {
            int d = sy.devs[r], updates = sim->upd_mark[d] == sim->upd_stamp;
            if (block_mem(b, d, SF_SIM_MEM_WEIGHTS, weight_mem(sim, sh->numel, updates, state),
                          SIM_MEM_ALWAYS, SIM_MEM_ALWAYS))
                return -1;
        }
    }
    return 0;
}

/* ---- assembly ----------------------------------------------------------------- */

/* Bulk sync mode: one zero-time barrier per device (core blocks wire every
 * backward task into its device's barrier, sync blocks start from them). */
static int build_barriers(sf_sim *sim) {
    sim_block *b = &sim->blocks[sim->pos[BARRIER_BLOCK(sim)]];
    block_reset(b);
    if (sim->dev_barriers)
        for (int d = 0; d < sim->n_dev; d++)
            if (block_task(b, SIM_BARRIER, SIM_NO_RES, -1, d, 0, 0) < 0) return -1;
    for (int k = 0; sim->pipe_bar && k < sim->pipe_n_bar; k++) /* a pipeline's slots */
        if (block_task(b, SIM_BARRIER, SIM_NO_RES, -1, 0, 0, 0) < 0) return -1;
    return 0;
}

static int build_block(sf_sim *sim, int bid) {
    int opi = bid / SIM_SLOTS, slot = bid % SIM_SLOTS;
    if (opi == sim->n_ops) return build_barriers(sim);
    if (slot == SLOT_CORE) return build_core(sim, opi);
    if (slot == SLOT_SYNC) {
        if (sf_taskgraph_owner(sim->tg, opi) == opi) return build_sync(sim, opi);
        block_reset(&sim->blocks[sim->pos[bid]]);
        return 0;
    }
    return build_edge(sim, opi, slot - 1);
}

/* Copy a block's stats to the dense array collect reads; called whenever the
 * block in place changes (built, or restored by a revert). */
void sim_publish_stats(sf_sim *sim, int bid) { sim->stats[sim->pos[bid]] = sim->blocks[sim->pos[bid]].st; }

int sim_rebuild_block(sf_sim *sim, int bid) {
    if (build_block(sim, bid)) return -1;
    int opi = bid / SIM_SLOTS;
    if (sim->pipe_only && opi < sim->n_ops && sim->pipe_only[opi] == SIM_PIPE_LATE) {
        /* a micro-batch no stage holds with the first ones at once: the sums
         * (everything alive at once) leave its activations to the timeline */
        sim_block *b = &sim->blocks[sim->pos[bid]];
        for (int i = 0; i < b->n_mem; i++) {
            sim_mem *e = &b->mem[i];
            if (e->kind != SF_SIM_MEM_ACTIVATIONS && e->kind != SF_SIM_MEM_RECEIVED) continue;
            if (e->only == SIM_MEM_BOTH) e->only = SIM_MEM_TIMELINE;
            else if (e->only == SIM_MEM_SUMS) e->bytes = 0;
        }
    } else if (sim->pipe_only && opi < sim->n_ops && sim->pipe_only[opi] == SIM_PIPE_FIRST) {
        /* a stage recomputes one micro-batch's chunk at a time, in its backward
         * slots, while the others' kept activations wait: the sums take the
         * first micro-batch's recomputed activations as activations */
        sim_block *b = &sim->blocks[sim->pos[bid]];
        for (int i = 0, n = b->n_mem; i < n; i++) {
            sim_mem e = b->mem[i];
            if (e.kind == SF_SIM_MEM_RECOMPUTED &&
                block_mem_in(b, e.dev, SF_SIM_MEM_ACTIVATIONS, e.bytes, SIM_MEM_ALWAYS,
                             SIM_MEM_ALWAYS, SIM_MEM_SUMS))
                return -1;
        }
    }
    sim_publish_stats(sim, bid);
    return 0;
}
