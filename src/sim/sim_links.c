/*
 * sim_links.c - the simulator's link resources: the machine's links that its
 * tasks use, numbered compactly.
 *
 * Every device and every link is a resource that runs one task at a time, and
 * the scheduler keeps a few figures per resource (when it is next free, the
 * work queued on it: res_free, remaining, each schedule's res_total). Indexing
 * them by machine link id would size them by the machine: a pairwise node of D
 * devices has D(D-1) links, 8 M at 2 x 2000, and every full run and delta update
 * clears those arrays, which made one update of a 3-operator model cost 25 ms
 * (bench/RESULTS.md, "Large machines"). A strategy uses few of them: at most
 * SF_MAX_PARTS parts per operator, so a few links per task at most. So a link
 * becomes a resource when a task is first put on it, numbered n_dev, n_dev + 1,
 * ... in that order, and keeps its number for the simulator's life (a delta
 * update and its revert may meet links the last schedule did not, never
 * renumber one the kept blocks hold). The per-resource arrays grow with the
 * count, so a simulator's memory and each run's clearing follow the links its
 * strategies have used, not the links the machine has.
 *
 * The schedule does not depend on the numbering: resources are never ordered
 * by number (ties between tasks are broken by canonical keys), so a delta
 * simulator whose links were met in another order gives a full run's result,
 * bit for bit. The pictures (sim_trace.c) name a link resource by its machine
 * link id and list the links in id order, as before the numbering.
 *
 * The map from machine link id to resource is an open-addressing hash table of
 * compact indices (-1 empty), probed linearly, at most half full; the key of
 * slot i is res_link[i], so the table holds one int32 per slot. A direct table
 * would hold one entry per machine link, the cost this file removes.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

static uint32_t link_hash(int32_t link, uint32_t mask) {
    return ((uint32_t)link * 2654435761u) & mask; /* Knuth's multiplicative hash */
}

/* Put compact index i (of link res_link[i]) into the table. */
static void hash_put(sf_sim *sim, int32_t i) {
    uint32_t mask = (uint32_t)sim->link_hash_cap - 1;
    uint32_t h = link_hash(sim->res_link[i], mask);
    while (sim->link_hash[h] >= 0) h = (h + 1) & mask;
    sim->link_hash[h] = i;
}

/* Room for one more link resource: the per-resource arrays, the index list and
 * the table (rebuilt at twice the size when it would be over half full). */
static int reserve_one(sf_sim *sim) {
    int need = sim->n_res + 1;
    if (need > sim->cap_res) {
        int64_t nc = (int64_t)sim->cap_res * 2;
        if (nc < need) nc = need;
        size_t bytes = ((size_t)nc + 1) * sizeof(double);
        double *p[4] = {sim->res_free, sim->remaining, sim->sched[0].res_total,
                        sim->sched[1].res_total};
        for (int k = 0; k < 4; k++) {
            double *q = realloc(p[k], bytes);
            if (!q) return -1; /* those already grown are only larger: still valid */
            p[k] = q;
            if (k == 0) sim->res_free = q;
            if (k == 1) sim->remaining = q;
            if (k == 2) sim->sched[0].res_total = q;
            if (k == 3) sim->sched[1].res_total = q;
        }
        sim->cap_res = (int)nc;
    }
    if (sim->n_links + 1 > sim->cap_res_link) {
        int nc = sim->cap_res_link ? 2 * sim->cap_res_link : 256;
        int32_t *q = realloc(sim->res_link, (size_t)nc * sizeof *q);
        if (!q) return -1;
        sim->res_link = q;
        sim->cap_res_link = nc;
    }
    if (2 * (sim->n_links + 1) > sim->link_hash_cap) {
        int nc = sim->link_hash_cap ? 2 * sim->link_hash_cap : 1024;
        int32_t *q = malloc((size_t)nc * sizeof *q);
        if (!q) return -1;
        memset(q, 0xff, (size_t)nc * sizeof *q);
        free(sim->link_hash);
        sim->link_hash = q;
        sim->link_hash_cap = nc;
        for (int32_t i = 0; i < sim->n_links; i++) hash_put(sim, i);
    }
    return 0;
}

int sim_link_res(sf_sim *sim, int link) {
    if (sim->link_hash_cap > 0) {
        uint32_t mask = (uint32_t)sim->link_hash_cap - 1;
        for (uint32_t h = link_hash(link, mask);; h = (h + 1) & mask) {
            int32_t i = sim->link_hash[h];
            if (i < 0) break;
            if (sim->res_link[i] == link) return sim->n_dev + i;
        }
    }
    if (reserve_one(sim)) return -1;
    int32_t i = sim->n_links++;
    int r = sim->n_res++;
    sim->res_link[i] = link;
    hash_put(sim, i);
    /* a new resource has run nothing, in either schedule */
    sim->res_free[r] = 0;
    sim->remaining[r] = 0;
    sim->sched[0].res_total[r] = 0;
    sim->sched[1].res_total[r] = 0;
    return r;
}

int sim_res_link(const sf_sim *sim, int res) {
    int i = res - sim->n_dev;
    return i >= 0 && i < sim->n_links ? sim->res_link[i] : -1;
}

typedef struct link_res {
    int32_t link, res;
} link_res;

static int cmp_link(const void *pa, const void *pb) {
    const link_res *a = pa, *b = pb;
    return (a->link > b->link) - (a->link < b->link);
}

int32_t *sim_link_res_sorted(const sf_sim *sim) {
    size_t n = (size_t)sim->n_links;
    int32_t *out = malloc((n + 1) * sizeof *out);
    link_res *v = malloc((n + 1) * sizeof *v);
    if (!out || !v) {
        free(out);
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) v[i] = (link_res){sim->res_link[i], sim->n_dev + (int32_t)i};
    qsort(v, n, sizeof *v, cmp_link);
    for (size_t i = 0; i < n; i++) out[i] = v[i].res;
    free(v);
    return out;
}

void sim_links_free(sf_sim *sim) {
    free(sim->res_link);
    free(sim->link_hash);
}
