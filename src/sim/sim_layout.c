/*
 * sim_layout.c - the simulator's layout: the blocks' tasks and edges laid out
 * flat, one slot per task, for the scheduler (sim_sched.c), afresh for a full
 * run and patched for a delta update, with the undo log a revert replays.
 *
 * It lives apart from the builders and the scheduler because it is the one part
 * that knows how slots, ranks and adjacency lists are kept; it reads the blocks
 * and calls nothing else of the simulator's (sim.c calls it).
 */
#include <string.h>

#include "sim_impl.h"

/* ---- layout --------------------------------------------------------------------
 *
 * The scheduler works on flat arrays, one slot per task (sim_layout). A full run
 * lays every block out afresh, in canonical order and without gaps (sim_layout_full):
 * a counting sort of all edges into successor and predecessor lists.
 *
 * A delta update keeps every slot of the blocks it does not rebuild, with its
 * duration, resource and lists, and hands the rebuilt blocks fresh slots at the
 * end (sim_layout_delta); the replaced blocks' slots go dead. Nothing is copied or
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
 *    compaction: sim_layout_full, and the current schedule copied over to the new
 *    slots (sim_layout_compact).
 *  - The heap breaks ties by canonical key (see sim_sched.c), which
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

/* Room for need slots in every per-slot array; the fresh part of touch_ix
 * starts in its between-updates state. */
static int slots_reserve(sf_sim *sim, int64_t need) {
    sim_layout *L = &sim->lay;
    if (need <= L->cap_slots) return 0;
    if (need >= INT32_MAX) return -1;
    int64_t oc = L->cap_slots, nc = sim_grown_cap(oc, need);
    if (nc >= INT32_MAX) nc = INT32_MAX - 1;
    if (sim_resize((void **)&L->dur, nc, sizeof *L->dur) ||
        sim_resize((void **)&L->res, nc, sizeof *L->res) ||
        sim_resize((void **)&L->key, nc, sizeof *L->key) ||
        sim_resize((void **)&L->rank, nc, sizeof *L->rank) ||
        sim_resize((void **)&L->sadj, nc, sizeof *L->sadj) ||
        sim_resize((void **)&L->padj, nc, sizeof *L->padj) ||
        sim_resize((void **)&sim->pending, nc, sizeof *sim->pending) ||
        sim_resize((void **)&sim->heap, nc, sizeof *sim->heap) ||
        sim_resize((void **)&sim->touch_ix, nc, sizeof *sim->touch_ix))
        return -1;
    for (int i = 0; i < 2; i++) {
        sim_sched *f = &sim->sched[i];
        if (sim_resize((void **)&f->ready, nc, sizeof *f->ready) ||
            sim_resize((void **)&f->start, nc, sizeof *f->start) ||
            sim_resize((void **)&f->finish, nc, sizeof *f->finish))
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
    int64_t nc = sim_grown_cap(L->cap_adj, need);
    if (nc >= INT32_MAX) nc = INT32_MAX - 1;
    if (sim_resize((void **)&L->succ, nc, sizeof *L->succ) ||
        sim_resize((void **)&L->pred, nc, sizeof *L->pred))
        return -1;
    L->cap_adj = nc;
    return 0;
}

/* A block's tasks into slots base.. */
static void put_tasks(sf_sim *sim, int bid, int64_t base) {
    sim_layout *L = &sim->lay;
    const sim_block *b = &sim->blocks[sim->pos[bid]];
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
int sim_layout_full(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    int64_t nt = 0, ne = 0;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[sim->pos[sim->order[k]]];
        L->span[k] = (sim_span){(int32_t)nt, b->n_tasks};
        nt += b->n_tasks;
        ne += b->n_edges;
        if (nt >= INT32_MAX || ne >= INT32_MAX) return -1;
    }
    if (slots_reserve(sim, nt + 1) || adj_reserve(sim, ne + 1)) return -1;
    memset(L->sadj, 0, (size_t)nt * sizeof *L->sadj);
    memset(L->padj, 0, (size_t)nt * sizeof *L->padj);
    /* two passes over the blocks' edges (count, then fill) rather than a copy of
     * every edge's slots: 8 bytes an edge less at the peak */
    for (int k = 0; k < sim->n_order; k++) {
        int bid = sim->order[k];
        const sim_block *b = &sim->blocks[sim->pos[bid]];
        put_tasks(sim, bid, L->span[k].base);
        for (int i = 0; i < b->n_edges; i++) {
            L->sadj[SLOT_OF(sim, b->edges[i].from)].n++;
            L->padj[SLOT_OF(sim, b->edges[i].to)].n++;
        }
    }
    int32_t s = 0, p = 0;
    for (int64_t i = 0; i < nt; i++) {
        L->sadj[i].start = s;
        L->padj[i].start = p;
        s += L->sadj[i].n;
        p += L->padj[i].n;
    }
    /* pending serves as the fill cursor; edges in canonical order */
    int32_t *cs = sim->pending;
    for (int64_t i = 0; i < nt; i++) cs[i] = L->sadj[i].start;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[k];
        for (int i = 0; i < b->n_edges; i++) {
            int32_t f = (int32_t)SLOT_OF(sim, b->edges[i].from);
            L->succ[cs[f]++] = (int32_t)SLOT_OF(sim, b->edges[i].to);
        }
    }
    for (int64_t i = 0; i < nt; i++) cs[i] = L->padj[i].start;
    for (int k = 0; k < sim->n_order; k++) {
        const sim_block *b = &sim->blocks[k];
        for (int i = 0; i < b->n_edges; i++) {
            int32_t t = (int32_t)SLOT_OF(sim, b->edges[i].to);
            L->pred[cs[t]++] = (int32_t)SLOT_OF(sim, b->edges[i].from);
        }
    }
    L->n_slots = L->n_tasks = nt;
    L->n_succ = L->n_pred = L->n_edges = ne;
    assign_ranks(sim);
    return 0;
}

/* List slot g as touched by sim_layout_delta, once: touch_ix[g] is its place. */
static inline void touch(sf_sim *sim, int32_t *list, int64_t *n, int64_t g) {
    if (sim->touch_ix[g] >= 0) return;
    sim->touch_ix[g] = (int32_t)*n;
    list[(*n)++] = (int32_t)g;
}

/* After a delta update rebuilt the blocks in sim->saved: their tasks into fresh
 * slots, and the lists that changed rewritten (see the top of this file). */
int sim_layout_delta(sf_sim *sim) {
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
        add += sim->blocks[sim->pos[sim->saved[i].bid]].n_tasks;
        m += sim->blocks[sim->pos[sim->saved[i].bid]].n_edges;
        m_old += sim->saved[i].block.n_edges;
    }
    int64_t cap_touched = add + 2 * (m + m_old);
    if (slots_reserve(sim, L->n_slots + add + 1) ||
        sim_grow((void **)&sim->scratch, &sim->cap_scratch, 2 * m + 3 * cap_touched + 1,
                 sizeof *sim->scratch) ||
        sim_grow((void **)&sim->undo_adj, &sim->cap_undo_adj, cap_touched + 1,
                 sizeof *sim->undo_adj))
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
        const sim_block *nb = &sim->blocks[sim->pos[bid]];
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
        const sim_block *nb = &sim->blocks[sim->pos[sim->saved[i].bid]];
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
     * edges, placed by a counting sort as sim_layout_full does. A list may end short
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

/* Undo sim_layout_delta: the logged lists, the replaced blocks' spans, the counters;
 * the fresh slots and list entries are handed back. */
void sim_layout_undo(sf_sim *sim) {
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
int sim_layout_compact(sf_sim *sim) {
    sim_layout *L = &sim->lay;
    memcpy(sim->old_span, L->span, (size_t)sim->n_order * sizeof *L->span);
    if (sim_layout_full(sim)) return -1;
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
    memcpy(f->device_live, o->device_live, (size_t)sim->n_dev * sizeof *f->device_live);
    memcpy(f->live_t, o->live_t, (size_t)sim->n_dev * sizeof *f->live_t);
    memcpy(f->live_kinds, o->live_kinds,
           (size_t)sim->n_dev * SF_SIM_MEM_KIND_COUNT * sizeof *f->live_kinds);
    f->mem_exact = o->mem_exact;
    f->makespan_s = o->makespan_s;
    f->result = o->result;
    f->result.device_busy_s = f->device_busy;
    f->result.device_mem_bytes = f->device_mem;
    f->result.device_live_bytes = o->result.device_live_bytes ? f->device_live : NULL;
    f->result.device_live_peak_s = o->result.device_live_peak_s ? f->live_t : NULL;
    f->result.device_live_kinds = o->result.device_live_kinds ? f->live_kinds : NULL;
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
        const sim_block *b = &sim->blocks[sim->pos[bid]];
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
