/*
 * sim_sched.c - the simulator's list scheduler: the event loop over the laid-out
 * task graph (run_heap), from scratch (sim_schedule_full) or resumed at t0 after
 * a delta update (sim_schedule_resume), with its heap.
 *
 * The heap functions are static inline here, in the one translation unit that
 * holds the event loop, so that the hot loop compiles as one piece; sim.c calls
 * in once per simulation and this file calls nothing else of the simulator's.
 */
#include <math.h>
#include <string.h>

#include "sim_impl.h"

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

/* Schedule everything, after sim_layout_full: slots are in canonical order, so the
 * loop adds up res_total in the same order as sim_schedule_resume's walk. */
sf_status sim_schedule_full(sf_sim *sim, sim_sched *f, sf_error *err) {
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
 * list scheduler pops tasks in order of ready time first (the top of this
 * file), so its state after popping every task ready before t0 is the same
 * in both: those tasks keep their times, each resource is free from the latest
 * finish among them, and the event loop resumes from there over the rest.
 *
 * Two passes set that state up. The first walks the tasks in canonical order
 * (adding up res_total as sim_schedule_full does); a kept task (a slot below
 * sim->fresh) that the old schedule made ready before t0 is carried over,
 * marked with pending = -1 and listed. The second releases the edges leaving
 * the listed tasks, which are few when t0 is early, rather than gathering the
 * predecessors of every task left, which are most of them; a task whose last
 * predecessor is released goes on the heap with its final ready time. */
sf_status sim_schedule_resume(sf_sim *sim, sim_sched *f, const sim_sched *o, double t0,
                              double bound, int *cut, sf_error *err) {
    const sim_layout *L = &sim->lay;
    int64_t hn = 0, left = 0, n_done = 0;
    int bounded = bound < INFINITY;
    double makespan = 0;
    if (sim_grow((void **)&sim->scratch, &sim->cap_scratch, L->n_tasks + 1, sizeof *sim->scratch))
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
