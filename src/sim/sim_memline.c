/*
 * sim_memline.c - memory as the schedule lives it: every memory entry of every
 * block (sim_mem) is alive from the start of its `from` task to the finish of
 * its `to` task in a schedule, and a device's peak is the largest sum of the
 * entries alive on it at one instant.
 *
 * What lives when (sim_build.c makes the entries):
 *   - weights, their gradients and the optimizer's state: the whole iteration;
 *   - a part's outputs and what it saves beyond its inputs: from its forward
 *     task to its backward task (which waits for every consumer's gradient, so
 *     every backward reader is done by then); the input's to the end;
 *   - a copy of an input region received from another device: from its
 *     transfer's first task to the consumer's backward task;
 *   - a partial sum received for a reduction: to the group's gradients;
 *   - a compute task's workspace while it runs; a shard's packed gradient
 *     from its packing copy to its unpacking one;
 *   - the gradient of an activation region (the timeline's alone): on the
 *     consumer's device from its backward task to the gradient's arrival at the
 *     producer, and there until the producer's backward task. A region read by
 *     several consumers is counted once per consumer (their gradients add up
 *     into one buffer in a runtime), which errs high.
 *
 * The sweep sorts the 2 x entries events by (time, frees first) and keeps a
 * running sum per device: O(E log E) per call, about what scheduling costs.
 * The events are visited in canonical block order and sorted by a key that
 * does not depend on the layout, so a delta-simulated schedule gives the same
 * peaks as a full one (its start and finish times are the same).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

static int event_cmp(const void *pa, const void *pb) {
    const sim_mem_event *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    int fa = a->bytes < 0, fb = b->bytes < 0; /* frees first */
    if (fa != fb) return fa ? -1 : 1;
    if (a->dev != b->dev) return a->dev < b->dev ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return 0;
}

static double ref_time(const sf_sim *sim, const sim_sched *f, int64_t ref, int at_end) {
    if (ref == SIM_MEM_ALWAYS) return at_end ? f->makespan_s : 0.0;
    int bid = (int)(ref >> SIM_IDX_BITS);
    int64_t slot = sim->lay.span[sim->pos[bid]].base + (ref & ((INT64_C(1) << SIM_IDX_BITS) - 1));
    return at_end ? f->finish[slot] : f->start[slot];
}

int64_t sim_mem_events(const sf_sim *sim, const sim_sched *f, sim_mem_event **out) {
    *out = NULL;
    int64_t n = 0;
    for (int k = 0; k < sim->n_order; k++) n += sim->blocks[sim->pos[sim->order[k]]].n_mem;
    sim_mem_event *ev = malloc((size_t)(2 * n + 1) * sizeof *ev);
    if (!ev) return -1;
    int64_t m = 0;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[sim->pos[sim->order[k]]];
        for (int i = 0; i < b->n_mem; i++) {
            const sim_mem *e = &b->mem[i];
            if (e->bytes <= 0 || e->only == SIM_MEM_SUMS) continue;
            double t0 = ref_time(sim, f, e->from, 0), t1 = ref_time(sim, f, e->to, 1);
            if (t1 < t0) t1 = t0; /* an entry freed by a task that ends before it starts */
            ev[m] = (sim_mem_event){t0, e->bytes, e->dev, e->kind, m};
            m++;
            ev[m] = (sim_mem_event){t1, -e->bytes, e->dev, e->kind, m};
            m++;
        }
    }
    /* by device first (a stable counting sort), then each device's in time
     * order: the order event_cmp gives, in sorts of one device's events */
    sim_mem_event *by = malloc((size_t)(m + 1) * sizeof *by);
    int64_t *at = calloc((size_t)sim->n_dev + 1, sizeof *at);
    if (!by || !at) {
        free(by);
        free(at);
        free(ev);
        return -1;
    }
    for (int64_t i = 0; i < m; i++) at[ev[i].dev + 1]++;
    for (int d = 0; d < sim->n_dev; d++) at[d + 1] += at[d];
    for (int64_t i = 0; i < m; i++) by[at[ev[i].dev]++] = ev[i];
    free(ev);
    int64_t lo = 0;
    for (int d = 0; d < sim->n_dev; d++) { /* at[d] is now device d's end */
        int64_t hi = at[d];
        if (hi - lo > 1) qsort(by + lo, (size_t)(hi - lo), sizeof *by, event_cmp);
        lo = hi;
    }
    free(at);
    *out = by;
    return m;
}

const char *sf_sim_mem_kind_name(sf_sim_mem_kind k) {
    static const char *const names[SF_SIM_MEM_KIND_COUNT] = {"weights", "activations", "received",
                                                             "activation gradients", "gathered weights",
                                                             "weight gradients", "recomputed", "workspace",
                                                             "comm buffers"};
    return k >= 0 && k < SF_SIM_MEM_KIND_COUNT ? names[k] : NULL;
}

int sim_mem_timeline(const sf_sim *sim, const sim_sched *f, double *peak, double *peak_t,
                     double *peak_kinds) {
    enum { K = SF_SIM_MEM_KIND_COUNT };
    sim_mem_event *ev;
    int64_t n = sim_mem_events(sim, f, &ev);
    if (n < 0) return -1;
    double *cur = calloc((size_t)sim->n_dev * (K + 1) + 1, sizeof *cur);
    if (!cur) {
        free(ev);
        return -1;
    }
    double *kinds = cur + sim->n_dev; /* [n_dev * K] the running sums by kind */
    for (int d = 0; d < sim->n_dev; d++) peak[d] = peak_t[d] = 0;
    memset(peak_kinds, 0, (size_t)sim->n_dev * K * sizeof *peak_kinds);
    for (int64_t i = 0; i < n; i++) {
        int d = ev[i].dev;
        cur[d] += ev[i].bytes;
        kinds[(int64_t)d * K + ev[i].kind] += ev[i].bytes;
        if (ev[i].bytes > 0 && cur[d] > peak[d]) {
            peak[d] = cur[d];
            peak_t[d] = ev[i].t;
            memcpy(&peak_kinds[(int64_t)d * K], &kinds[(int64_t)d * K], K * sizeof *kinds);
        }
    }
    free(cur);
    free(ev);
    return 0;
}
