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
 * (sim_layout_delta; sim_layout.c says how).
 *
 * Scheduling is event-driven list scheduling: each device and each link is a
 * resource that runs one task at a time in the order tasks become ready, ties
 * broken by canonical key. A binary heap of ready tasks keyed by (ready time,
 * barriers first, canonical key) gives that order even where zero-time barriers
 * pass readiness on (sim_sched.c says why). Because keys are
 * canonical, the schedule of a patched task graph is identical to that of a
 * graph built from scratch: delta equals full, bit for bit.
 *
 * Delta scheduling does not start over: nothing can differ before t0, the
 * earliest ready time of any removed, added or re-wired task (t0_bound), so the
 * tasks the old schedule ran before t0 keep their times and the event loop
 * resumes from there (sim_schedule_resume). The alternative, propagating changes
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
 * Gradient synchronization is the task graph's steps for the chosen scheme
 * (taskgraph/comm.c: a ring's reduce-scatter and all-gather, a parameter
 * server's messages, the hierarchical scheme's two levels), priced by the task
 * graph's one pricing function (taskgraph/price.c) and turned into tasks by
 * sim_build.c. A ring's links are held for both of its phases at once: 2(R-1)
 * steps of latency plus 2(R-1)/R * S / bandwidth, as before the steps.
 *
 * Memory per device: weights, their gradients and optimizer state (factor from
 * the options, else the cost model's optimizer's) for every distinct shard it
 * holds, plus the outputs of every part it runs, what those parts save beyond
 * their inputs, and the copies of input regions it receives from other devices, all counted as alive at once (the
 * peak of a training iteration is at the end of the forward pass, when every
 * activation kept for the backward pass is alive).
 *
 * The parts live in their own files, each called from here and calling nothing
 * back: sim_build.c builds the blocks, sim_layout.c lays them out, sim_sched.c
 * schedules them; this file holds the setup, the results, the delta bookkeeping
 * (saving blocks, t0) and the public entry points.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

void sf_sim_options_default(sf_sim_options *o) {
    memset(o, 0, sizeof *o);
    o->keep_schedule = 1;
    o->sync = SF_SYNC_OVERLAP;
    o->segments = 1;
}

/* ---- setup ----------------------------------------------------------------- */

static int sched_alloc_fixed(sim_sched *f, int n_dev, int n_res) {
    f->res_total = calloc((size_t)n_res + 1, sizeof *f->res_total);
    f->device_busy = calloc((size_t)n_dev + 1, sizeof *f->device_busy);
    f->device_mem = calloc((size_t)n_dev + 1, sizeof *f->device_mem);
    f->device_live = calloc((size_t)n_dev + 1, sizeof *f->device_live);
    f->live_t = calloc((size_t)n_dev + 1, sizeof *f->live_t);
    f->live_kinds = calloc((size_t)n_dev * SF_SIM_MEM_KIND_COUNT + 1, sizeof *f->live_kinds);
    return f->res_total && f->device_busy && f->device_mem && f->device_live && f->live_t &&
                   f->live_kinds
               ? 0
               : -1;
}

static void sched_free(sim_sched *f) {
    free(f->ready);
    free(f->start);
    free(f->finish);
    free(f->device_busy);
    free(f->device_mem);
    free(f->device_live);
    free(f->live_t);
    free(f->live_kinds);
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

static sf_sim *sim_make(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_sim_options *o, int period, sf_error *err);

sf_sim *sf_sim_new(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                   const sf_sim_options *o, sf_error *err) {
    return sim_make(g, m, cm, o, 0, err);
}

/* sf_sim_new whose strategy holds one config per `period` operators
 * (sf_strategy_new_periodic: a micro-batch graph's copies), 0 one each. */
static sf_sim *sim_make(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_sim_options *o, int period, sf_error *err) {
    if (!g || !m || !cm) {
        sf_error_set(err, SF_ERR_INVALID, "simulator needs a graph, a machine and a cost model");
        return NULL;
    }
    /* a plan in a dtype the devices cannot compute in is refused here, for
     * every caller (simulate, search, bench, the predictions of train) */
    if (sf_machine_check_dtype(m, sf_cost_dtype(cm), err) != SF_OK) return NULL;
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
    sim->act_scale = (double)sf_cost_elem_bytes(cm) / SF_ELEM_BYTES;
    sim->copy_bw = sf_machine_get_desc(m)->copy_bw_Bps;
    sim->per_node = sf_machine_get_desc(m)->devices_per_node;
    if (sf_machine_get_desc(m)->cores_per_node < sim->per_node)
        sim->cores = sf_machine_get_desc(m)->cores_per_node;
    if (o)
        sim->opt = *o;
    else
        sf_sim_options_default(&sim->opt);
    sim->late_sync =
        sf_machine_get_desc(m)->sync_after_backward && sim->opt.sync == SF_SYNC_OVERLAP;
    sim->dev_barriers = sim->opt.sync == SF_SYNC_BULK || sim->late_sync;
    if (!sf_sync_mode_name(sim->opt.sync) || !sf_sync_scheme_name(sim->opt.scheme) ||
        sim->opt.segments < 1 || sim->opt.segments > SF_SIM_MAX_SEGMENTS) {
        int mode = (int)sim->opt.sync, scheme = (int)sim->opt.scheme, seg = sim->opt.segments;
        free(sim);
        sf_error_set(err, SF_ERR_INVALID,
                     "invalid simulator options: sync mode %d, scheme %d, segments %d (1 to %d)",
                     mode, scheme, seg, SF_SIM_MAX_SEGMENTS);
        return NULL;
    }
    if (!(sim->opt.memory_headroom >= 0 && sim->opt.memory_headroom < 1)) {
        double h = sim->opt.memory_headroom;
        free(sim);
        sf_error_set(err, SF_ERR_INVALID, "invalid simulator options: memory headroom %g (0 to 1)",
                     h);
        return NULL;
    }
    sim->n_ops = n_ops;
    sim->n_undo = 0;
    sim->n_dev = sf_machine_num_devices(m);
    /* links become resources as tasks use them (sim_links.c) */
    sim->n_links = 0;
    sim->n_res = sim->n_dev;
    sim->cap_res = sim->n_dev + 256;
    sim->s = sf_strategy_new_periodic(g, period);
    sim->tg = sf_taskgraph_new(g, sim->n_dev, NULL);
    sim->n_blocks = n_ops * SIM_SLOTS + 1; /* + the barrier block */
    /* the blocks an operator has, dense in canonical order (sim->pos): a slot
     * for every possible input would be 66 a node of a micro-batch graph */
    int64_t n_dense = 1;
    for (int i = 0; i < n_ops; i++) n_dense += sf_graph_op(g, i)->n_inputs + 2;
    sim->blocks = calloc((size_t)n_dense + 1, sizeof *sim->blocks);
    sim->order = malloc((size_t)n_dense * sizeof *sim->order);
    sim->pos = malloc((size_t)sim->n_blocks * sizeof *sim->pos);
    sim->stats = calloc((size_t)n_dense, sizeof *sim->stats);
    sim->dirty = calloc((size_t)sim->n_blocks + 1, 1);
    sim->res_free = calloc((size_t)sim->cap_res + 1, sizeof *sim->res_free);
    sim->remaining = calloc((size_t)sim->cap_res + 1, sizeof *sim->remaining);
    sim->input_samples = calloc(2 * (size_t)sim->n_dev + 1, sizeof *sim->input_samples);
    sim->kept = calloc((size_t)n_ops + 1, sizeof *sim->kept);
    for (int i = 0; sim->kept && i < n_ops; i++) sim->kept[i] = sf_graph_kept_mask(g, i);
    sim->lay.span = calloc((size_t)n_dense, sizeof *sim->lay.span);
    sim->lay.rank_base = calloc((size_t)n_dense, sizeof *sim->lay.rank_base);
    sim->lay.rank_cap = calloc((size_t)n_dense, sizeof *sim->lay.rank_cap);
    sim->old_span = calloc((size_t)n_dense, sizeof *sim->old_span);
    sim->cur = &sim->sched[0];
    sim->prev = &sim->sched[1];
    sim->rank_room_max = UINT32_MAX;
    sim->compact_slack = 4096;
    if (!sim->s || !sim->blocks || !sim->order || !sim->pos || !sim->stats || !sim->dirty ||
        !sim->tg || !sim->res_free || !sim->remaining || !sim->input_samples || !sim->kept || !sim->lay.span || !sim->lay.rank_base ||
        !sim->lay.rank_cap || !sim->old_span ||
        sched_alloc_fixed(&sim->sched[0], sim->n_dev, sim->cap_res) ||
        sched_alloc_fixed(&sim->sched[1], sim->n_dev, sim->cap_res))
        goto oom;

    /* canonical block order: each operator's core, input edges and sync, then
     * the barrier block (pseudo-operator n_ops) */
    for (int i = 0; i < n_ops; i++) {
        int n_in = sf_graph_op(g, i)->n_inputs;
        for (int slot = 0; slot <= n_in; slot++) sim->order[sim->n_order++] = sim_block_id(i, slot);
        sim->order[sim->n_order++] = sim_block_id(i, SLOT_SYNC);
    }
    sim->order[sim->n_order++] = BARRIER_BLOCK(sim);
    for (int b = 0; b < sim->n_blocks; b++) sim->pos[b] = -1;
    for (int k = 0; k < sim->n_order; k++) sim->pos[sim->order[k]] = k;

    sf_taskgraph_set_strategy(sim->tg, sim->s);
    sf_taskgraph_set_comm(sim->tg, m, sim->opt.scheme);
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

/* ---- pipelines: the inner simulator on the micro-batch graph (sim_pipe.c) ---- */

/* Room for n changed operators in the undo arrays: 0, or -1 (nothing lost). */
static int sim_undo_room(sf_sim *sim, int n);
/* The update with no limit on how many operators change (the inner simulator
 * of a pipeline changes n m); sf_sim_update_ops checks the public limit. */
static sf_status sim_update_many(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                                 double bound_s, sf_sim_result *r, sf_error *err);

static void pipe_free(sf_sim *sim) {
    if (!sim->pipe) return;
    sf_sim_free(sim->pipe->inner);
    sim_pipe_release(sim->pipe);
    sim->pipe = NULL;
}

/* A pipe of `copies` micro-batches at batch / m with its inner simulator
 * (of replica 0 at batch / (m D) when D identical replicas fold). */
static struct sim_pipe *pipe_new(sf_sim *sim, int m, int copies, sf_error *err) {
    const struct sim_fold *f = sim->replicas;
    struct sim_pipe *p = sim_pipe_make(sim->g, m, f ? f->D : 1, copies, err);
    if (!p) return NULL;
    p->inner = sim_make(p->gu, sim->m, sim->cm, &sim->opt, sim->n_ops, err);
    if (!p->inner) {
        sim_pipe_release(p);
        return NULL;
    }
    if (f) {
        p->inner->fold = f;
        sf_taskgraph_set_replicas(p->inner->tg, f->D, f->to);
    }
    p->inner->pipe_bar = p->bar;
    p->inner->pipe_only = p->only;
    return p;
}

/* The inner simulator for m micro-batches (made anew when m changed). */
static sf_status pipe_ready(sf_sim *sim, int m, sf_error *err) {
    if (sim->pipe && sim->pipe->m == m && sim->pipe->copies == m) return SF_OK;
    pipe_free(sim);
    sim->pipe = pipe_new(sim, m, m, err);
    return sim->pipe ? SF_OK : err ? err->code : SF_ERR_NOMEM;
}

static sf_status sim_run_own(sf_sim *sim, sf_sim_result *r, sf_error *err);

/* A full run of s on pipe p: every copy's config written into the inner
 * simulator's strategy, which it runs (a copy of a micro-batch graph's
 * strategy would cost as much again: 10^5 configs). */
static sf_status pipe_go(sf_sim *sim, struct sim_pipe *p, const sf_strategy *s, sf_sim_result *r,
                         sf_error *err) {
    sf_status st = sim_pipe_prepare(p, sim->g, sim->replicas ? sim->replicas->s : s, err);
    if (st != SF_OK) return st;
    p->inner->pipe_n_bar = p->n_bar;
    p->inner->pipe_per = p->per;
    sf_sim_set_max_tasks(p->inner, sim->opt.max_tasks);
    st = sf_strategy_validate(p->inner->s, p->gu, sim->m, err);
    if (st != SF_OK) return st;
    p->inner->n_undo = 0;
    return sim_run_own(p->inner, r, err);
}

/* The iteration of a pipeline from its inner result r: the inner graph's
 * input pipeline counts one micro-batch (its copies are alike and it takes the
 * input that needs most), and the loader feeds all m of them. */
static void pipe_finish(sf_sim_result *r, int m) {
    r->input_s *= m;
    r->iter_s = r->makespan_s + r->host_s;
    if (r->input_s > r->iter_s) r->iter_s = r->input_s;
}

/* ---- identical replicas (sim_fold.c) ---- */

static void fast_free(sf_sim *sim);

/* sim->replicas for a strategy whose replicas fold as f (sim_fold_detect;
 * NULL: not at all), which this takes: 1 when they fold as the current ones
 * do (or neither folds), their strategy now f's; 0 when that changed: the
 * pipes of the old ones are freed and f in place. */
static int fold_ready(sf_sim *sim, struct sim_fold *f) {
    if (sim_fold_same(f, sim->replicas)) {
        if (f) sf_strategy_copy(sim->replicas->s, f->s);
        sim_fold_free(f);
        return 1;
    }
    pipe_free(sim);
    fast_free(sim);
    sim_fold_free(sim->replicas);
    sim->replicas = f;
    return 0;
}

/* A pipeline's result as the caller sees it: every replica's when they fold. */
static void fold_finish(sf_sim *sim, sf_sim_result *r) {
    if (sim->replicas && r && !r->cut_off) sim_fold_result(sim->replicas, r);
}

/* A block's sums into a result's. */
static void add_stats(sf_sim_result *r, const sim_stats *x) {
    r->compute_s += x->compute_s;
    r->transfer_s += x->xfer_s;
    r->sync_s += x->sync_s;
    r->transfer_bytes += x->xfer_bytes;
    r->sync_bytes += x->sync_bytes;
    r->intra_bytes += x->intra_bytes;
    r->inter_bytes += x->inter_bytes;
}

/* Sums of replica 0's tasks as every replica's, D times each. */
static void fold_scale(int64_t D, sf_sim_result *r) {
    r->compute_s *= (double)D;
    r->transfer_s *= (double)D;
    r->sync_s *= (double)D;
    r->transfer_bytes *= D;
    r->sync_bytes *= D;
    r->intra_bytes *= D;
    r->inter_bytes *= D;
}

/* The sums of a folded simulator's result r as every replica's: D times
 * replica 0's, the collectives' bytes made exact. */
static void fold_sums(const sf_sim *sim, sf_sim_result *r) {
    fold_scale(sim->fold->D, r);
    for (int k = 0; k < sim->n_order; k++) {
        r->sync_bytes += sim->stats[k].fold_sync_bytes;
        r->intra_bytes += sim->stats[k].fold_intra_bytes;
        r->inter_bytes += sim->stats[k].fold_inter_bytes;
    }
}

/* ---- the fast path of a pipeline of many micro-batches ---------------------------- */

static void kind_totals(const sf_sim *sim, int device, double *out, int lo, int hi);

static void fast_free(sf_sim *sim) {
    if (!sim->fast) return;
    sim_fast_result_free(&sim->fast->cur);
    sim_fast_result_free(&sim->fast->prev);
    free(sim->fast);
    sim->fast = NULL;
}

/* The micro-batches of the fast path's first run for pipeline pl
 * (docs/simulator.md, "Pipelines"): 1F1B only, enough for three copies steady
 * on every stage; 0 when the path is off or would not save work. */
static int fast_first(const sf_sim *sim, const sf_pipeline *pl) {
    if (!sim->opt.pipeline_fast || sim->opt.keep_schedule || pl->schedule != SF_PIPE_1F1B)
        return 0;
    int k = 2 * pl->stages + 2;
    return 2 * k <= pl->micro_batches ? k : 0;
}

/* Slot of task i of block bid in in's layout. */
static int64_t task_slot(const sf_sim *in, int bid, int i) {
    return in->lay.span[in->pos[bid]].base + i;
}

/* The period of an inner run of k copies of an n-operator graph under 1F1B on p
 * stages: every task of copies j, j + 1, j + 2 (j = k - p - 2, the last three
 * copies whose forward and backward are both between their stage's warm-up and
 * cool-down) starts lambda after the same task of the copy before. That
 * repeats for ever, since what a copy waits for is the copies before it and
 * their resources. 0 when not; *end the latest finish among those copies. */
static double copy_period(const sf_sim *in, int n, int k, int p, double *end) {
    int j = k - p - 2;
    const double *st = in->cur->start, *fin = in->cur->finish;
    double lambda = NAN, tol = 1e-9 * in->cur->makespan_s;
    *end = 0;
    for (int i = 0; i < n; i++)
        for (int slot = 0; slot < SLOT_SYNC; slot++) {
            int b0 = sim_block_id(j * n + i, slot);
            if (in->pos[b0] < 0) continue; /* an input slot the operator lacks */
            int nt = in->blocks[in->pos[b0]].n_tasks;
            for (int c = 1; c <= 2; c++)
                if (in->blocks[in->pos[sim_block_id((j + c) * n + i, slot)]].n_tasks != nt) return 0;
            for (int t = 0; t < nt; t++) {
                double s0 = st[task_slot(in, b0, t)];
                for (int c = 1; c <= 2; c++) {
                    int bc = sim_block_id((j + c) * n + i, slot);
                    double sc = st[task_slot(in, bc, t)];
                    double d = sc - st[task_slot(in, sim_block_id((j + c - 1) * n + i, slot), t)];
                    if (isnan(lambda)) lambda = d;
                    if (!(fabs(d - lambda) <= tol)) return 0;
                    double f = fin[task_slot(in, bc, t)];
                    if (f > *end) *end = f;
                }
                if (s0 > *end) *end = s0;
            }
        }
    return lambda > 0 ? lambda : 0;
}

/* What one copy (operators [lo, hi) of the inner simulator) adds: its tasks,
 * their sums, each device's work and kind totals. */
static void copy_adds(const sf_sim *in, int lo, int hi, sf_sim_result *add, double *busy,
                      double *totals) {
    memset(add, 0, sizeof *add);
    memset(busy, 0, (size_t)in->n_dev * sizeof *busy);
    for (int u = lo; u < hi; u++)
        for (int slot = 0; slot < SLOT_SYNC; slot++) {
            int bid = sim_block_id(u, slot);
            if (in->pos[bid] < 0) continue; /* an input slot the operator lacks */
            const sim_block *b = &in->blocks[in->pos[bid]];
            const sim_stats *x = &in->stats[in->pos[bid]];
            add->tasks += b->n_tasks;
            add_stats(add, x);
            for (int t = 0; t < b->n_tasks; t++)
                if (b->tasks[t].res >= 0 && b->tasks[t].res < in->n_dev)
                    busy[b->tasks[t].res] += b->tasks[t].dur_s;
        }
    kind_totals(in, -1, totals, lo, hi);
}

/* The fast path on s: a run of k micro-batches (made longer while its middle
 * copies are not periodic yet), carried to s's m in out; *periodic 0 when no
 * run short enough was (the micro-batch graph must decide). */
static sf_status fast_eval(sf_sim *sim, const sf_strategy *s, int k, sim_fast_result *out,
                           int *periodic, sf_error *err) {
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    int m = pl->micro_batches, n = sim->n_ops, nd = sim->n_dev;
    *periodic = 0;
    /* longer runs while the runs so far stay under half the micro-batch graph */
    for (int64_t spent = k; 2 * spent <= m; k += k / 2, spent += k) {
        struct sim_pipe *p = pipe_new(sim, m, k, err);
        if (!p) return err ? err->code : SF_ERR_NOMEM;
        sf_sim_result r;
        sf_status st = pipe_go(sim, p, s, &r, err);
        double end = 0, lambda = st == SF_OK ? copy_period(p->inner, n, k, pl->stages, &end) : 0;
        if (lambda > 0) {
            /* m - k more copies like the steady ones: everything after them later by
             * lambda each, the sums more by one copy's worth each */
            double more = m - k;
            sf_sim_result add;
            int j = k - pl->stages - 2;
            double *busy = malloc((size_t)nd * (1 + SF_SIM_TOTAL_COUNT) * sizeof *busy);
            if (!busy) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
                goto done;
            }
            double *tot = busy + nd;
            copy_adds(p->inner, j * n, (j + 1) * n, &add, busy, tot);
            if (p->inner->fold) fold_scale(p->inner->fold->D, &add); /* every replica's */
            add.tasks += p->n_bar / k; /* its slots' barriers */
            kind_totals(p->inner, -1, out->totals, 0, INT_MAX);
            for (int q = 0; q < nd * SF_SIM_TOTAL_COUNT; q++) out->totals[q] += more * tot[q];
            sf_sim_result *o = &out->r;
            *o = r;
            o->makespan_s = r.makespan_s + more * lambda;
            pipe_finish(o, m);
            o->compute_s += more * add.compute_s;
            o->transfer_s += more * add.transfer_s;
            o->sync_s += more * add.sync_s;
            o->transfer_bytes += (int64_t)more * add.transfer_bytes;
            o->sync_bytes += (int64_t)more * add.sync_bytes;
            o->intra_bytes += (int64_t)more * add.intra_bytes;
            o->inter_bytes += (int64_t)more * add.inter_bytes;
            o->tasks += (int64_t)more * add.tasks;
            o->fast_copies = k;
            for (int d = 0; d < nd; d++) out->busy[d] = r.device_busy_s[d] + more * busy[d];
            free(busy);
            memcpy(out->mem, r.device_mem_bytes, (size_t)nd * sizeof *out->mem);
            o->device_busy_s = out->busy;
            o->device_mem_bytes = out->mem;
            if (r.device_live_bytes) {
                memcpy(out->live, r.device_live_bytes, (size_t)nd * sizeof *out->live);
                memcpy(out->kinds, r.device_live_kinds,
                       (size_t)nd * SF_SIM_MEM_KIND_COUNT * sizeof *out->kinds);
                for (int d = 0; d < nd; d++) { /* a peak after the steady copies comes later */
                    double at = r.device_live_peak_s[d];
                    out->live_t[d] = at + (at > end ? more * lambda : 0);
                }
                o->device_live_bytes = out->live;
                o->device_live_peak_s = out->live_t;
                o->device_live_kinds = out->kinds;
            }
            *periodic = 1;
        }
    done:
        sf_sim_free(p->inner);
        sim_pipe_release(p);
        if (st != SF_OK || *periodic) return st;
    }
    return SF_OK;
}

static sf_status pipe_run_folded(sf_sim *sim, const sf_strategy *s, sf_sim_result *r,
                                 sf_error *err);

/* A full run of pipelined strategy s. */
static sf_status pipe_run(sf_sim *sim, const sf_strategy *s, sf_sim_result *r, sf_error *err) {
    int nomem;
    struct sim_fold *f = sim_fold_detect(sim->g, sim->m, &sim->opt, s, &nomem);
    if (nomem) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    fold_ready(sim, f);
    sim->refold = 0;
    sf_status st = pipe_run_folded(sim, s, r, err);
    if (st == SF_OK) fold_finish(sim, r);
    return st;
}

/* pipe_run once sim->replicas is s's: replica 0's result when they fold. */
static sf_status pipe_run_folded(sf_sim *sim, const sf_strategy *s, sf_sim_result *r,
                                 sf_error *err) {
    int k = fast_first(sim, sf_strategy_pipeline(s));
    if (k) {
        pipe_free(sim);
        if (!sim->fast) {
            sim->fast = calloc(1, sizeof *sim->fast);
            if (!sim->fast || sim_fast_result_alloc(&sim->fast->cur, sim->n_dev) ||
                sim_fast_result_alloc(&sim->fast->prev, sim->n_dev)) {
                fast_free(sim);
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            }
        }
        sim->fast->k = k;
        sim->fast->revert_to_fast = 0;
        int periodic;
        sf_status st = fast_eval(sim, s, k, &sim->fast->cur, &periodic, err);
        if (st != SF_OK || periodic) {
            if (st == SF_OK) *r = sim->fast->cur.r;
            else fast_free(sim);
            return st;
        }
    }
    fast_free(sim); /* not periodic in time, or not long enough: every micro-batch */
    int m = sf_strategy_pipeline(s)->micro_batches;
    sf_status st = pipe_ready(sim, m, err);
    if (st == SF_OK) st = pipe_go(sim, sim->pipe, s, r, err);
    if (st == SF_OK) pipe_finish(r, m);
    return st;
}

static void fast_swap(struct sim_fast *f) {
    sim_fast_result t = f->cur;
    f->cur = f->prev;
    f->prev = t;
}

/* A delta update of n operators of the original graph: every micro-batch's
 * copy of each, in one update of the inner simulator. */
static sf_status pipe_update(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                             double bound_s, sf_sim_result *r, sf_error *err) {
    struct sim_pipe *p = sim->pipe;
    for (int j = 0; j < n; j++) {
        if (ops[j] < 0 || ops[j] >= sim->n_ops)
            return sf_error_set(err, SF_ERR_INVALID, "operator %d out of range", ops[j]);
        for (int i = 0; i < j; i++)
            if (ops[i] == ops[j])
                return sf_error_set(err, SF_ERR_INVALID,
                                    "operator '%s' changed twice in one update",
                                    sf_graph_op(sim->g, ops[j])->name);
    }
    if (sim_undo_room(sim, n)) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    /* the whole strategy's rules (the stages' devices) with the change in */
    sf_strategy *t = sf_strategy_clone(sim->s);
    if (!t) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int j = 0; j < n; j++) sf_config_copy(sf_strategy_config(t, ops[j]), &cfgs[j]);
    sf_status st = sf_pipeline_validate(sf_strategy_pipeline(t), t, sim->g, sim->m, err);
    /* a change of how the replicas fold past the task limit (about the same
     * tasks over fewer folded replicas) is cut off as a delta update is, with
     * nothing changed: its revert is the configs back */
    sim->refold = 0;
    int nomem = 0, same = 1;
    struct sim_fold *nf = st == SF_OK ? sim_fold_detect(sim->g, sim->m, &sim->opt, t, &nomem) : NULL;
    int64_t all = p ? p->inner->lay.n_tasks : sim->fast ? sim->fast->cur.r.tasks : 0;
    if (sim->replicas) all *= sim->replicas->D;
    if (nomem) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    } else if (st == SF_OK && sim->opt.max_tasks > 0 && !sim_fold_same(nf, sim->replicas) &&
               all / (nf ? nf->D : 1) > sim->opt.max_tasks) {
        memset(r, 0, sizeof *r);
        r->cut_off = 1;
        r->iter_s = INFINITY;
        sim->refold = 2;
        sim_fold_free(nf);
    } else if (st == SF_OK) {
        same = fold_ready(sim, nf);
    }
    p = sim->pipe; /* gone when the replicas changed */
    if (sim->refold == 2) {
        /* cut off above */
    } else if (st == SF_OK && !same) {
        /* the replicas fold otherwise (or no more, or now): a full run, and one
         * of the strategy before for a revert */
        st = pipe_run_folded(sim, t, r, err);
        if (st == SF_ERR_RANGE) { /* the task limit after all: cut off likewise */
            memset(r, 0, sizeof *r);
            r->cut_off = 1;
            r->iter_s = INFINITY;
            st = SF_OK;
        }
        sim->refold = st == SF_OK;
        if (st != SF_OK) sim->has_run = 0; /* the replicas are t's: the next call runs in full */
    } else if (st == SF_OK && p) {
        fast_free(sim); /* the last update was kept: no revert goes back past it */
        const sf_config *fc = cfgs;
        sf_config *folded = NULL;
        if (sim->replicas) { /* replica 0's configs of the changed operators */
            if (!(folded = malloc((size_t)n * sizeof *folded))) {
                sf_strategy_free(t);
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            }
            for (int j = 0; j < n; j++)
                sf_config_copy(&folded[j], sf_strategy_get(sim->replicas->s, ops[j]));
            fc = folded;
        }
        st = sim_pipe_copies(p, sim->g, n, ops, fc, err);
        free(folded);
        if (st == SF_OK)
            st = sim_update_many(p->inner, n * p->copies, p->ops, p->cfgs, bound_s, r, err);
        if (st == SF_OK && !r->cut_off) pipe_finish(r, p->m);
    } else if (st == SF_OK) {
        /* the fast path: the changed strategy's runs; the result before for a revert */
        struct sim_fast *f = sim->fast;
        int periodic;
        if (!f) { /* a cut-off refold left nothing to update */
            sf_strategy_free(t);
            return sf_error_set(err, SF_ERR_INVALID, "a cut-off update must be reverted first");
        }
        fast_swap(f);
        st = fast_eval(sim, t, f->k, &f->cur, &periodic, err);
        if (st == SF_OK && periodic) {
            *r = f->cur.r;
        } else if (st == SF_OK) { /* every micro-batch, this once */
            st = pipe_ready(sim, sf_strategy_pipeline(t)->micro_batches, err);
            if (st == SF_OK) st = pipe_go(sim, sim->pipe, t, r, err);
            if (st == SF_OK) pipe_finish(r, sim->pipe->m);
            else pipe_free(sim);
            f->revert_to_fast = 1;
        }
        if (st != SF_OK) fast_swap(f);
    }
    sf_strategy_free(t);
    if (st != SF_OK) return st;
    fold_finish(sim, r);
    /* the outer strategy follows, with what a revert needs */
    for (int j = 0; j < n; j++) {
        sim->undo_ops[j] = ops[j];
        sf_config_copy(&sim->undo_cfg[j], sf_strategy_get(sim->s, ops[j]));
        sf_config_copy(sf_strategy_config(sim->s, ops[j]), &cfgs[j]);
    }
    sim->n_undo = n;
    return SF_OK;
}

void sf_sim_free(sf_sim *sim) {
    if (!sim) return;
    if (sim->blocks)
        for (int i = 0; i < sim->n_order; i++) block_free(&sim->blocks[i]);
    for (int i = 0; i < sim->cap_saved; i++) block_free(&sim->saved[i].block);
    free(sim->saved);
    for (int j = 0; j < sim->cap_undo; j++) free(sim->undo_tiles[j]);
    free(sim->undo_tiles);
    free(sim->undo_tiles_cap);
    free(sim->undo_ops);
    free(sim->undo_cfg);
    pipe_free(sim);
    fast_free(sim);
    sim_fold_free(sim->replicas);
    free(sim->bwd_s);
    free(sim->upd_mark);
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
    free(sim->input_samples);
    free(sim->kept);
    sim_links_free(sim);
    free(sim->scratch);
    free(sim->uses);
    free(sim->ends);
    free(sim->end_at);
    sf_strategy_free(sim->s);
    free(sim);
}

const sf_strategy *sf_sim_strategy(const sf_sim *sim) { return sim->s; }

/* ---- visiting blocks ---------------------------------------------------------- */

/* Visit every block in canonical (id) order (sim->order). */
#define FOR_ALL_BLOCKS(sim, bid)                                                                   \
    for (int bid##_k = 0, bid = 0; bid##_k < (sim)->n_order && (bid = (sim)->order[bid##_k], 1);   \
         bid##_k++)

/* ---- results ------------------------------------------------------------------ */

/* Per-device memory summed over every block in canonical order, as a full run
 * does; also says whether the sums are exact (see mem_delta). */
static void mem_full(sf_sim *sim, sim_sched *f) {
    memset(f->device_mem, 0, (size_t)sim->n_dev * sizeof *f->device_mem);
    int exact = 1;
    FOR_ALL_BLOCKS(sim, bid) {
        const sim_block *b = &sim->blocks[sim->pos[bid]];
        exact &= !b->mem_inexact;
        for (int i = 0; i < b->n_mem; i++)
            if (sim_mem_summed(&b->mem[i])) f->device_mem[b->mem[i].dev] += b->mem[i].bytes;
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
        if (sim->blocks[sim->pos[sim->saved[i].bid]].mem_inexact) return 0;
    memcpy(f->device_mem, o->device_mem, (size_t)sim->n_dev * sizeof *f->device_mem);
    for (int i = 0; i < sim->n_saved; i++) {
        const sim_block *ob = &sim->saved[i].block, *nb = &sim->blocks[sim->pos[sim->saved[i].bid]];
        for (int k = 0; k < ob->n_mem; k++)
            if (sim_mem_summed(&ob->mem[k])) f->device_mem[ob->mem[k].dev] -= ob->mem[k].bytes;
        for (int k = 0; k < nb->n_mem; k++)
            if (sim_mem_summed(&nb->mem[k])) f->device_mem[nb->mem[k].dev] += nb->mem[k].bytes;
    }
    for (int d = 0; d < sim->n_dev; d++)
        if (f->device_mem[d] > SIM_EXACT_BYTES) return 0;
    f->mem_exact = 1;
    return 1;
}

/* The device's per-iteration host overhead (every device of a machine is of
 * one kind). */
static double host_s(const sf_sim *sim) {
    return sim->n_dev > 0 ? sf_machine_device_kind(sim->m, 0)->host_overhead_s : 0;
}

/* The input pipeline's time: each device loads the samples of its parts of the
 * graph's inputs (of the input that needs most, where there are several: a
 * sample's inputs come together), at its device's rate. The loader prepares
 * batch i + 1 while batch i runs, so in the steady state of training this is a
 * task that overlaps the previous iteration, and an iteration takes the longer
 * of it and the rest: the closed form of that overlap. 0 without a rate. */
static double input_s(sf_sim *sim) {
    double rate = sim->n_dev > 0 ? sf_machine_device_kind(sim->m, 0)->input_samples_per_s : 0;
    if (!(rate > 0)) return 0;
    double *most = sim->input_samples, *here = sim->input_samples + sim->n_dev;
    for (int d = 0; d < sim->n_dev; d++) most[d] = 0;
    for (int i = 0; i < sim->n_ops; i++) {
        if (sf_graph_op(sim->g, i)->type != SF_OP_INPUT) continue;
        const sf_config *c = sf_strategy_get(sim->s, i);
        const sf_tile *t = sim_part_tiles(sim, i);
        for (int d = 0; d < sim->n_dev; d++) here[d] = 0;
        for (int k = 0; k < c->n_parts; k++) here[c->device[k]] += (double)(t[k].hi[0] - t[k].lo[0]);
        for (int d = 0; d < sim->n_dev; d++)
            if (here[d] > most[d]) most[d] = here[d];
    }
    double worst = 0;
    for (int d = 0; d < sim->n_dev; d++)
        if (most[d] > worst) worst = most[d];
    return worst / rate;
}

/* The iteration's time from its makespan (sf_sim_result.iter_s). */
static void finish_time(sf_sim *sim, sf_sim_result *r, double makespan) {
    r->makespan_s = makespan;
    r->host_s = host_s(sim);
    r->input_s = input_s(sim);
    r->iter_s = makespan + r->host_s;
    if (r->input_s > r->iter_s) r->iter_s = r->input_s;
}

/* The result of the schedule in f. o: the layout before a delta update (its
 * memory totals are reused when exact), NULL after a full run. */
static int collect(sf_sim *sim, sim_sched *f, const sim_sched *o) {
    sf_sim_result *r = &f->result;
    memset(r, 0, sizeof *r);
    r->tasks = sim->lay.n_tasks;
    r->rescheduled = sim->last_resimulated;
    r->n_devices = sim->n_dev;
    finish_time(sim, r, f->makespan_s);
    memcpy(f->device_busy, f->res_total, (size_t)sim->n_dev * sizeof *f->device_busy);
    /* each sum in canonical block order, whichever blocks changed */
    for (int k = 0; k < sim->n_order; k++) add_stats(r, &sim->stats[k]);
    if (sim->fold) fold_sums(sim, r);
    if (!o || !mem_delta(sim, f, o)) mem_full(sim, f);
    r->fits = 1;
    for (int d = 0; d < sim->n_dev; d++) {
        if (f->device_mem[d] > r->peak_mem_bytes) r->peak_mem_bytes = f->device_mem[d];
        if (f->device_mem[d] > sf_machine_device_kind(sim->m, d)->mem_bytes) r->fits = 0;
    }
    r->device_busy_s = f->device_busy;
    r->device_mem_bytes = f->device_mem;
    if (!sim->opt.memory_timeline) return 0;
    /* the timeline decides whether it fits: each device's peak within its
     * memory less the headroom */
    if (sim_mem_timeline(sim, f, f->device_live, f->live_t, f->live_kinds)) return -1;
    r->fits = 1;
    for (int d = 0; d < sim->n_dev; d++) {
        double cap =
            sf_machine_device_kind(sim->m, d)->mem_bytes * (1.0 - sim->opt.memory_headroom);
        if (f->device_live[d] > r->live_peak_bytes) r->live_peak_bytes = f->device_live[d];
        if (f->device_live[d] > cap) r->fits = 0;
    }
    r->device_live_bytes = f->device_live;
    r->device_live_peak_s = f->live_t;
    r->device_live_kinds = f->live_kinds;
    return 0;
}

/* ---- the public entry points ---------------------------------------------------- */

void sf_sim_set_max_tasks(sf_sim *sim, int64_t max_tasks) {
    sim->opt.max_tasks = max_tasks > 0 ? max_tasks : 0;
    if (sim->pipe) sf_sim_set_max_tasks(sim->pipe->inner, max_tasks);
}

sf_status sf_sim_run(sf_sim *sim, const sf_strategy *s, sf_sim_result *r, sf_error *err) {
    sf_status st = sf_strategy_validate(s, sim->g, sim->m, err);
    if (st != SF_OK) return st;
    sf_strategy_copy(sim->s, s);
    sim->n_undo = 0;
    sim->in_pipe = sf_strategy_pipeline(s) != NULL;
    if (!sim->in_pipe) { /* the micro-batch graph's simulator is not kept */
        pipe_free(sim);
        fast_free(sim);
        sim_fold_free(sim->replicas);
        sim->replicas = NULL;
    }
    if (sim->in_pipe) {
        sim->has_run = 0;
        st = pipe_run(sim, s, r, err);
        sim->has_run = st == SF_OK;
        return st;
    }
    return sim_run_own(sim, r, err);
}

/* A full run of sim->s (no pipeline). */
static sf_status sim_run_own(sf_sim *sim, sf_sim_result *r, sf_error *err) {
    sf_status st;
    sim->cut_pending = 0;
    sim->cut_early = 0;
    sim->n_saved = 0;
    sim->has_run = 0;
    /* cores first: the edge and sync blocks read every operator's part tiles */
    int64_t n_tasks = 0;
    for (int pass = 0; pass < 2; pass++) {
        FOR_ALL_BLOCKS(sim, bid) {
            if ((bid % SIM_SLOTS == SLOT_CORE) != (pass == 0)) continue;
            if (sim_rebuild_block(sim, bid))
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
            n_tasks += sim->blocks[sim->pos[bid]].n_tasks;
            if (sim->opt.max_tasks > 0 && n_tasks > sim->opt.max_tasks)
                return sf_error_set(err, SF_ERR_RANGE,
                                    "the task graph has more than %lld tasks (the limit)",
                                    (long long)sim->opt.max_tasks);
        }
    }
    if (sim_layout_full(sim))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
    st = sim_schedule_full(sim, sim->cur, err);
    if (st != SF_OK) return st;
    if (collect(sim, sim->cur, NULL))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory following memory over the schedule");
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
    sim_block tmp = sim->blocks[sim->pos[bid]];
    sim->blocks[sim->pos[bid]] = sv->block;
    sv->block = tmp;
    sv->bid = bid;
    sim->dirty[bid] = 1;
    return 0;
}

/* The earliest time at which the schedule can change: the old ready time of every
 * removed task and of every kept task whose predecessors changed, the finish of
 * every kept task that feeds a rebuilt block, and a lower bound on the new ready
 * time of kept tasks fed by rebuilt blocks. Called after sim_layout_delta: a slot at
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
        const sim_block *nw = &sim->blocks[sim->pos[sim->saved[i].bid]];
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
        const sim_block *nw = &sim->blocks[sim->pos[bid]];
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
/* Room for n tiles in *t (of *cap); 0, or -1 when out of memory. */
static int undo_room(sf_tile **t, int64_t *cap, int n) {
    if (n <= *cap) return 0;
    sf_tile *q = realloc(*t, (size_t)n * sizeof *q);
    if (!q) return -1;
    *t = q;
    *cap = n;
    return 0;
}

/* Save the sync block of x's weight group when it is at ZeRO stage 3 and
 * one of its gathers is gated by op's tasks. */
static int save_if_gated(sf_sim *sim, int x, int op) {
    int owner = sf_taskgraph_owner(sim->tg, x), bwd;
    if (owner < 0 || sf_strategy_get(sim->s, owner)->zero != SF_ZERO_WEIGHTS) return 0;
    if (sim_zero_gate(sim, owner, SF_PHASE_FORWARD, &bwd) != op &&
        sim_zero_gate(sim, owner, SF_PHASE_BACKWARD, &bwd) != op)
        return 0;
    return save_block(sim, sim_block_id(owner, SLOT_SYNC));
}

/* The ZeRO-3 sync blocks that op's tasks gate (sim_zero_gate: operators up
 * to two before or after it) are rebuilt with op's. */
static int save_zero_gated(sf_sim *sim, int op) {
    int fail = 0;
    const sf_tensor_ref *c1, *c2;
    int n1 = sf_taskgraph_consumers(sim->tg, op, &c1);
    for (int i = 0; i < n1; i++) {
        fail |= save_if_gated(sim, c1[i].op, op);
        int n2 = sf_taskgraph_consumers(sim->tg, c1[i].op, &c2);
        for (int j = 0; j < n2; j++) fail |= save_if_gated(sim, c2[j].op, op);
    }
    const sf_op *o = sf_graph_op(sim->g, op);
    for (int i = 0; i < o->n_inputs; i++) {
        const sf_op *p = sf_graph_op(sim->g, o->inputs[i].op);
        fail |= save_if_gated(sim, p->id, op);
        for (int j = 0; j < p->n_inputs; j++) fail |= save_if_gated(sim, p->inputs[j].op, op);
    }
    return fail;
}

/* Cut an update off before anything is laid out (the rebuilt blocks stay
 * saved for the revert that must follow): r says cut_off with time iter_s. */
static void cut_early(sf_sim *sim, sf_sim_result *r, double iter_s) {
    for (int i = 0; i < sim->n_saved; i++) sim->dirty[sim->saved[i].bid] = 0;
    memset(r, 0, sizeof *r);
    r->iter_s = iter_s;
    r->cut_off = 1;
    sim->cut_pending = 1;
    sim->cut_early = 1;
}

/* Room for n changed operators in the undo arrays; 0, or -1 (nothing lost). */
static int sim_undo_room(sf_sim *sim, int n) {
    if (n <= sim->cap_undo) return 0;
    int cap = n > 2 * sim->cap_undo ? n : 2 * sim->cap_undo;
    int *ops = realloc(sim->undo_ops, (size_t)cap * sizeof *ops);
    if (ops) sim->undo_ops = ops;
    sf_config *cfg = realloc(sim->undo_cfg, (size_t)cap * sizeof *cfg);
    if (cfg) sim->undo_cfg = cfg;
    sf_tile **t = realloc(sim->undo_tiles, (size_t)cap * sizeof *t);
    if (t) sim->undo_tiles = t;
    int64_t *tc = realloc(sim->undo_tiles_cap, (size_t)cap * sizeof *tc);
    if (tc) sim->undo_tiles_cap = tc;
    if (!ops || !cfg || !t || !tc) return -1;
    for (int j = sim->cap_undo; j < cap; j++) {
        sim->undo_tiles[j] = NULL;
        sim->undo_tiles_cap[j] = 0;
    }
    sim->cap_undo = cap;
    return 0;
}

sf_status sf_sim_update_ops(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                            double bound_s, sf_sim_result *r, sf_error *err) {
    if (n < 1 || n > SF_SIM_MAX_UPDATE_OPS)
        return sf_error_set(err, SF_ERR_INVALID, "an update changes 1 to %d operators, not %d",
                            SF_SIM_MAX_UPDATE_OPS, n);
    return sf_sim_update_many(sim, n, ops, cfgs, bound_s, r, err);
}

sf_status sf_sim_update_many(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                             double bound_s, sf_sim_result *r, sf_error *err) {
    if (n < 1) return sf_error_set(err, SF_ERR_INVALID, "an update changes no operator");
    if (sim->in_pipe) {
        if (!sim->has_run)
            return sf_error_set(err, SF_ERR_INVALID, "delta simulation before a full simulation");
        return pipe_update(sim, n, ops, cfgs, bound_s, r, err);
    }
    return sim_update_many(sim, n, ops, cfgs, bound_s, r, err);
}

static sf_status sim_update_many(sf_sim *sim, int n, const int *ops, const sf_config *cfgs,
                                 double bound_s, sf_sim_result *r, sf_error *err) {
    if (!sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "delta simulation before a full simulation");
    if (sim->cut_pending)
        return sf_error_set(err, SF_ERR_INVALID, "a bounded update was cut off: revert it first");
    if (n < 1) return sf_error_set(err, SF_ERR_INVALID, "an update changes no operator");
    if (sim_undo_room(sim, n))
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory updating the task graph");
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
    {
        sf_status st = sf_strategy_check_ties(sim->s, sim->g, n, ops, cfgs, err);
        if (st != SF_OK) return st;
    }
    /* Room first, so that nothing changes when there is none: the old tiles'
     * copy for a revert, and the new config's tiles in the task graph. */
    for (int j = 0; j < n; j++) {
        int old = sf_strategy_get(sim->s, ops[j])->n_parts;
        if (undo_room(&sim->undo_tiles[j], &sim->undo_tiles_cap[j], old) ||
            sf_taskgraph_reserve_tiles(sim->tg, ops[j], cfgs[j].n_parts) != SF_OK)
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory updating the task graph");
    }
    sf_status st;
    /* The update before this one is kept for good: if the dead slots or list
     * entries it and its predecessors left outnumber the live ones, lay out
     * afresh first. */
    const sim_layout *L = &sim->lay;
    if (L->n_slots - L->n_tasks > L->n_tasks + sim->compact_slack ||
        L->n_succ - L->n_edges > L->n_edges + sim->compact_slack ||
        L->n_pred - L->n_edges > L->n_edges + sim->compact_slack) {
        if (sim_layout_compact(sim)) {
            sim->has_run = 0;
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
        }
    }
    sim->n_undo = n;
    sim->n_saved = 0;
    int fail = 0;
    /* every config before any changes: a pipeline's copies share one
     * (sf_strategy_new_periodic) */
    for (int j = 0; j < n; j++) {
        sim->undo_ops[j] = ops[j];
        sf_config_copy(&sim->undo_cfg[j], sf_strategy_get(sim->s, ops[j]));
        memcpy(sim->undo_tiles[j], sim_part_tiles(sim, ops[j]),
               (size_t)sim->undo_cfg[j].n_parts * sizeof *sim->undo_tiles[j]);
    }
    for (int j = 0; j < n; j++) {
        sf_config_copy(sf_strategy_config(sim->s, ops[j]), &cfgs[j]);
        /* cores first: they are rebuilt in this order, and the edge and sync
         * blocks read the part tiles of every operator they join */
        fail |= save_block(sim, sim_block_id(ops[j], SLOT_CORE));
    }
    for (int j = 0; j < n; j++) {
        int opi = ops[j];
        const sf_op *op = sf_graph_op(sim->g, opi);
        for (int k = 0; k < op->n_inputs; k++) fail |= save_block(sim, sim_block_id(opi, 1 + k));
        /* cons[] pairs are (consumer op, input index) */
        const sf_tensor_ref *cons;
        int n_cons = sf_taskgraph_consumers(sim->tg, opi, &cons);
        for (int i = 0; i < n_cons; i++)
            fail |= save_block(sim, sim_block_id(cons[i].op, 1 + cons[i].out));
        int owner = sf_taskgraph_owner(sim->tg, opi);
        if (owner >= 0) fail |= save_block(sim, sim_block_id(owner, SLOT_SYNC));
        fail |= save_zero_gated(sim, opi);
    }
    for (int i = 0; i < sim->n_saved && !fail; i++)
        fail |= sim_rebuild_block(sim, sim->saved[i].bid);
    if (!fail && sim->opt.max_tasks > 0) {
        /* past the task limit: cut off before anything is laid out */
        int64_t n_tasks = sim->lay.n_tasks;
        for (int i = 0; i < sim->n_saved; i++)
            n_tasks += sim->blocks[sim->pos[sim->saved[i].bid]].n_tasks - sim->saved[i].block.n_tasks;
        if (n_tasks > sim->opt.max_tasks) {
            cut_early(sim, r, INFINITY);
            r->tasks = n_tasks;
            return SF_OK;
        }
    }
    /* the schedule's own bound: the host overhead comes on top of its makespan
     * (the input pipeline only ever lengthens an iteration, so a cut stays right) */
    double host = host_s(sim);
    bound_s -= host;
    if (!fail && bound_s < INFINITY) {
        /* Before laying anything out: a resource runs one task at a time, so the
         * iteration takes at least the work queued on any one resource. The new
         * totals are the current ones with the rebuilt blocks' work swapped in. */
        double *tot = sim->remaining;
        memcpy(tot, sim->cur->res_total, (size_t)sim->n_res * sizeof *tot);
        for (int i = 0; i < sim->n_saved; i++) {
            const sim_block *ob = &sim->saved[i].block, *nb = &sim->blocks[sim->pos[sim->saved[i].bid]];
            for (int k = 0; k < ob->n_tasks; k++)
                if (ob->tasks[k].res >= 0) tot[ob->tasks[k].res] -= ob->tasks[k].dur_s;
            for (int k = 0; k < nb->n_tasks; k++)
                if (nb->tasks[k].res >= 0) tot[nb->tasks[k].res] += nb->tasks[k].dur_s;
        }
        double lb = 0;
        for (int q = 0; q < sim->n_res; q++)
            if (tot[q] > lb) lb = tot[q];
        if (lb - 1e-9 * bound_s > bound_s) { /* margin: the totals are sums in another order */
            cut_early(sim, r, lb + host);
            return SF_OK;
        }
    }
    sim_sched *o = sim->cur, *f = sim->prev;
    if (fail || sim_layout_delta(sim)) {
        sim->has_run = 0; /* the block set is inconsistent: a full run must follow */
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory building the task graph");
    }
    double t0 = t0_bound(sim, o);
    int cut = 0;
    st = sim_schedule_resume(sim, f, o, t0, bound_s, &cut, err);
    for (int i = 0; i < sim->n_saved; i++) sim->dirty[sim->saved[i].bid] = 0;
    if (st != SF_OK) {
        sim->has_run = 0;
        return st;
    }
    sim->cur = f;
    sim->prev = o;
    if (cut) {
        memset(r, 0, sizeof *r);
        r->iter_s = f->result.iter_s + host;
        r->cut_off = 1;
        r->tasks = L->n_tasks;
        sim->cut_pending = 1;
        return SF_OK;
    }
    if (collect(sim, f, o)) {
        sim->has_run = 0; /* the next call must be a full run */
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory following memory over the schedule");
    }
    *r = f->result;
    return SF_OK;
}

sf_status sf_sim_revert(sf_sim *sim, sf_sim_result *r, sf_error *err) {
    if (sim->n_undo == 0 || !sim->has_run)
        return sf_error_set(err, SF_ERR_INVALID, "nothing to revert");
    if (sim->in_pipe && sim->refold == 2) { /* cut off before anything changed */
        for (int j = 0; j < sim->n_undo; j++)
            sf_config_copy(sf_strategy_config(sim->s, sim->undo_ops[j]), &sim->undo_cfg[j]);
        sim->n_undo = 0;
        sim->refold = 0;
        if (r && sim->pipe) {
            *r = sim->pipe->inner->cur->result;
            pipe_finish(r, sim->pipe->m);
        } else if (r && sim->fast) {
            *r = sim->fast->cur.r;
        }
        fold_finish(sim, r);
        return SF_OK;
    }
    if (sim->in_pipe && sim->refold) { /* the update changed the replicas: a full run back */
        for (int j = 0; j < sim->n_undo; j++)
            sf_config_copy(sf_strategy_config(sim->s, sim->undo_ops[j]), &sim->undo_cfg[j]);
        sim->n_undo = 0;
        sf_sim_result tmp;
        sf_status st = pipe_run(sim, sim->s, r ? r : &tmp, err);
        if (st != SF_OK) sim->has_run = 0;
        return st;
    }
    if (sim->in_pipe) { /* the inner simulator reverts; the outer strategy's configs back */
        struct sim_fast *f = sim->fast;
        if (f && (!sim->pipe || f->revert_to_fast)) { /* the fast path's result before */
            pipe_free(sim);
            fast_swap(f);
            f->revert_to_fast = 0;
            if (r) *r = f->cur.r;
        } else {
            sf_status st = sf_sim_revert(sim->pipe->inner, r, err);
            if (st != SF_OK) return st;
            if (r) pipe_finish(r, sim->pipe->m);
        }
        for (int j = 0; j < sim->n_undo; j++) {
            sf_config_copy(sf_strategy_config(sim->s, sim->undo_ops[j]), &sim->undo_cfg[j]);
        }
        sim->n_undo = 0;
        if (sim->replicas) { /* replica 0's configs of the strategy back, and the result */
            int nomem;
            struct sim_fold *rf = sim_fold_detect(sim->g, sim->m, &sim->opt, sim->s, &nomem);
            if (nomem) {
                sim->has_run = 0;
                return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            }
            if (fold_ready(sim, rf) != 1) { /* the strategy before folded as now */
                sim->has_run = 0;
                return sf_error_set(err, SF_ERR_INTERNAL, "a revert changed the replicas");
            }
            fold_finish(sim, r);
        }
        return SF_OK;
    }
    for (int j = 0; j < sim->n_undo; j++) {
        sf_config_copy(sf_strategy_config(sim->s, sim->undo_ops[j]), &sim->undo_cfg[j]);
        memcpy(sim_part_tiles(sim, sim->undo_ops[j]), sim->undo_tiles[j],
               (size_t)sim->undo_cfg[j].n_parts * sizeof *sim->undo_tiles[j]);
    }
    for (int i = sim->n_saved - 1; i >= 0; i--) {
        sim_saved_block *sv = &sim->saved[i];
        sim_block tmp = sim->blocks[sim->pos[sv->bid]];
        sim->blocks[sim->pos[sv->bid]] = sv->block;
        sv->block = tmp;
        sim_publish_stats(sim, sv->bid);
    }
    sim->cut_pending = 0;
    sim->n_undo = 0;
    if (sim->cut_early) { /* nothing was laid out: the layout and schedule are the old ones */
        sim->cut_early = 0;
        sim->n_saved = 0;
        if (r) *r = sim->cur->result;
        return SF_OK;
    }
    sim_layout_undo(sim);
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
    if (sim->in_pipe && sim->pipe) return sf_sim_delta_stats_get(sim->pipe->inner, out, err);
    if (sim->in_pipe)
        return sf_error_set(err, SF_ERR_INVALID,
                            "the pipeline took the fast path, which keeps no schedule to compare");
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
    return &sim->blocks[sim->pos[bid]].tasks[k & ((1u << SIM_IDX_BITS) - 1)];
}

/* ---- where one device's time goes ------------------------------------------------ */

/* A walk over the blocks in canonical order, charging each task to the device
 * it runs on or, for a link task, to the device at the end of its link that
 * the runtime measures it on: the receiver of a message, the sender of a
 * gradient-sync message. The blocks hold every task's duration, so this needs
 * no kept schedule. */
/* The totals of one device (device >= 0: out[kind]) or of all (device < 0:
 * out[d * SF_SIM_TOTAL_COUNT + kind]), over the blocks of operators [lo, hi). */
static void kind_totals(const sf_sim *sim, int device, double *out, int lo, int hi) {
    int n = device >= 0 ? SF_SIM_TOTAL_COUNT : sim->n_dev * SF_SIM_TOTAL_COUNT;
    for (int k = 0; k < n; k++) out[k] = 0;
#define CHARGE(d, kind)                                                                            \
    do {                                                                                           \
        if (device < 0 && (d) >= 0)                                                                \
            out[(d) * SF_SIM_TOTAL_COUNT + (kind)] += t->dur_s;                                    \
        else if (device >= 0 && (d) == device)                                                     \
            out[kind] += t->dur_s;                                                                 \
    } while (0)
    for (int k = 0; k < sim->n_order; k++) {
        int op = sim->order[k] / SIM_SLOTS;
        if (op < lo || op >= hi) continue;
        const sim_block *b = &sim->blocks[sim->pos[sim->order[k]]];
        for (int i = 0; i < b->n_tasks; i++) {
            const sim_task *t = &b->tasks[i];
            if (t->res == SIM_NO_RES) continue;
            sf_link lb;
            int link = sim_res_link(sim, t->res);
            const sf_link *l = link >= 0 ? sf_machine_link(sim->m, link, &lb) : NULL;
            switch ((sim_kind)t->kind) {
            case SIM_FWD:
            case SIM_BWD:
            case SIM_RECOMPUTE: CHARGE(t->dev, SF_SIM_TOTAL_COMPUTE); break;
            case SIM_UPDATE: CHARGE(t->dev, SF_SIM_TOTAL_UPDATE); break;
            case SIM_COPY: CHARGE(t->dev, SF_SIM_TOTAL_COPY); break;
            case SIM_XFER:
            case SIM_GRAD:
                if (l) CHARGE(l->dst_dev, SF_SIM_TOTAL_TRANSFER);
                break;
            case SIM_SYNC:
                if (l) CHARGE(l->src_dev, SF_SIM_TOTAL_SYNC);
                break;
            default: break;
            }
        }
    }
#undef CHARGE
}

sf_status sf_sim_kind_totals(const sf_sim *sim, int device, double out[SF_SIM_TOTAL_COUNT],
                             sf_error *err) {
    /* folded replicas: a device's figures are its replica-0 device's */
    if (sim && sim->has_run && sim->in_pipe && sim->replicas && device >= 0 &&
        device < sim->n_dev)
        device = sim->replicas->base[device];
    if (sim && sim->has_run && sim->in_pipe && sim->fast && !sim->pipe) {
        if (device < 0 || device >= sim->n_dev)
            return sf_error_set(err, SF_ERR_INVALID, "device %d is not one of the %d devices",
                                device, sim->n_dev);
        memcpy(out, &sim->fast->cur.totals[device * SF_SIM_TOTAL_COUNT],
               SF_SIM_TOTAL_COUNT * sizeof *out);
        return SF_OK;
    }
    if (sim && sim->has_run) sim = sim_shown(sim);
    if (!sim || !sim->has_run || sim->cut_pending)
        return sf_error_set(err, SF_ERR_INVALID, "no simulated schedule to sum");
    if (device < 0 || device >= sim->n_dev)
        return sf_error_set(err, SF_ERR_INVALID, "device %d is not one of the %d devices", device,
                            sim->n_dev);
    kind_totals(sim, device, out, 0, INT_MAX);
    return SF_OK;
}
