/*
 * comm.c - what moves in an iteration, as explicit steps (soapflow/taskgraph.h):
 * the sync schemes lowered into steps per weight shard, and each pair of an
 * edge into its transfer and copies. The simulator prices these steps (with
 * price.c), OptCNN prices the same ones, and the runtime executes them, so
 * the meaning of a scheme is written here once.
 *
 * A shard's steps are appended in an order where each step's dependencies come
 * before it. Gradient dependencies are not steps: a step with `grads` set waits
 * for the shard's gradients on the devices it involves, which the simulator
 * wires to backward tasks (or per-device barriers in bulk mode) and the
 * runtime to the point where its backward loop has passed the shard.
 *
 * Ring order. A collective runs over its devices in an order that a relabelling
 * of the machine's devices cannot change the meaning of: the order in which the
 * strategy names them (the device of the shard's first entry in entry order,
 * then of the next entry on another device, ...: the rank order of the
 * communicator a framework makes for the replicas), grouped the way NCCL builds
 * its rings from the topology, so that consecutive devices are nearest: the
 * devices of one node together, the nodes in the order of their first device,
 * and inside a node the devices of one PCIe switch together, the switches
 * likewise. A ring then crosses each node and switch boundary once each way.
 * The parameter server's messages go in the same order, and the hierarchical
 * scheme's node groups are the ring's runs, its cross-node groups their l-th
 * devices.
 *
 * Why not id order, as before: ids are labels. On a pairwise (or shared-memory)
 * node a ring's links are the pairs it visits, so a ring in id order of the
 * relabelled devices is not the image of the original's and meets other
 * transfers and rings on other links; across nodes the device that ends a
 * node's run picks the NIC (a NIC per device on a DGX); and a server's messages
 * share its links in their order. Relabelling a symmetric machine moved 12 of
 * 30 random lenet5 strategies on p100-4x4[4] by up to 4.0% (ring), 29 of 30 on
 * dgx-a100[16] by up to 5.7% (ring), 16 of 30 on dgx-a100[8] by up to 0.33%
 * (parameter server). In the strategy's order, a relabelling by
 * a symmetry of the machine maps every group onto the relabelled strategy's
 * and every figure is kept (tests/test_taskgraph_comm.c). A strategy that lists
 * each node's devices in ascending order, and the nodes so (every baseline and
 * OptCNN's strategies), gets rings in id order as before.
 *
 * The hierarchical scheme needs every node that holds the shard to hold the
 * same number L of its devices (the 2D layout Horovod and NCCL's trees rely
 * on). Otherwise, and when it would have one level only (one node, or one
 * device per node), it is the ring: the same steps a ring gives, so the two
 * schemes price and run the same there.
 */
#include <stdlib.h>
#include <string.h>

#include "taskgraph_impl.h"

static const char *const sync_names[SF_SYNC_MODE_COUNT] = {"overlap", "bulk"};
static const char *const scheme_names[SF_SCHEME_COUNT] = {"ring", "ps", "hierarchical"};
_Static_assert(sizeof scheme_names / sizeof scheme_names[0] == SF_SCHEME_COUNT,
               "a name for every scheme");

static int name_index(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n && name; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

const char *sf_sync_mode_name(sf_sync_mode m) {
    return (int)m >= 0 && m < SF_SYNC_MODE_COUNT ? sync_names[m] : NULL;
}

int sf_sync_mode_parse(const char *name, sf_sync_mode *out) {
    int i = name_index(sync_names, SF_SYNC_MODE_COUNT, name);
    if (i < 0) return -1;
    *out = (sf_sync_mode)i;
    return 0;
}

const char *sf_sync_scheme_name(sf_sync_scheme s) {
    return (int)s >= 0 && s < SF_SCHEME_COUNT ? scheme_names[s] : NULL;
}

int sf_sync_scheme_parse(const char *name, sf_sync_scheme *out) {
    int i = name_index(scheme_names, SF_SCHEME_COUNT, name);
    if (i < 0) return -1;
    *out = (sf_sync_scheme)i;
    return 0;
}

void sf_taskgraph_set_comm(sf_taskgraph *tg, const sf_machine *m, sf_sync_scheme scheme) {
    tg->m = m;
    tg->scheme = scheme;
    tg->per_node = m ? sf_machine_get_desc(m)->devices_per_node : (tg->n_dev > 0 ? tg->n_dev : 1);
    tg->copies = m && sf_machine_get_desc(m)->copy_bw_Bps > 0;
}

sf_sync_scheme sf_taskgraph_scheme(const sf_taskgraph *tg) { return tg->scheme; }

void sf_taskgraph_set_replicas(sf_taskgraph *tg, int n_rep, const int16_t *to) {
    tg->n_rep = to && n_rep > 1 ? n_rep : 1;
    tg->rep_to = tg->n_rep > 1 ? to : NULL;
}

/* The R devices of replica 0 followed by every other replica's in the same
 * order, into tg->rep_dev; NULL when out of memory. */
static const int16_t *every_replica(sf_taskgraph *tg, const int16_t *devs, int R) {
    int64_t n = (int64_t)R * tg->n_rep;
    if (tg_grow((void **)&tg->rep_dev, &tg->cap_rep_dev, n, sizeof *tg->rep_dev)) return NULL;
    for (int r = 0; r < tg->n_rep; r++)
        for (int i = 0; i < R; i++)
            tg->rep_dev[(int64_t)r * R + i] = tg->rep_to[(int64_t)r * tg->n_dev + devs[i]];
    return tg->rep_dev;
}

/* ---- building a list ---------------------------------------------------------- */

typedef struct lower {
    sf_taskgraph *tg;
    int n, n_devs, n_deps;
    int failed;
    /* the shard's collectives run on a packed copy of its gradient, priced:
     * copies are, and its slices are not one run (the runtime syncs one run in
     * place, sf_weight_slices_one_run) */
    int pack;
    int64_t runs; /* the memcpy calls of packing or unpacking the shard: its slices' rows */
} lower;

/* Append a step waiting for the n_deps steps in deps (indices); its index, or
 * -1 (and l->failed) when out of memory. */
static int add_step(lower *l, const sf_tg_step *st, const int32_t *deps, int n_deps) {
    sf_taskgraph *tg = l->tg;
    if (l->failed || tg_grow((void **)&tg->steps, &tg->cap_steps, l->n + 1, sizeof *tg->steps) ||
        tg_grow((void **)&tg->step_deps, &tg->cap_step_deps, l->n_deps + n_deps + 1,
                sizeof *tg->step_deps)) {
        l->failed = 1;
        return -1;
    }
    sf_tg_step *s = &tg->steps[l->n];
    *s = *st;
    /* a pack or unpack moves the shard's slices a row at a time (the runtime's
     * slices_move); an accumulation adds one packed buffer to another */
    if (s->kind == SF_STEP_COPY) s->runs = s->moved == 3.0 ? 1 : l->runs;
    s->dep = l->n_deps;
    s->n_deps = n_deps;
    for (int i = 0; i < n_deps; i++) tg->step_deps[l->n_deps++] = deps[i];
    return l->n++;
}

/* Append a group of n devices; its start in step_devs, or -1. */
static int add_group(lower *l, const int16_t *devs, int n) {
    sf_taskgraph *tg = l->tg;
    if (l->failed || tg_grow((void **)&tg->step_devs, &tg->cap_step_devs, l->n_devs + n,
                             sizeof *tg->step_devs)) {
        l->failed = 1;
        return -1;
    }
    memcpy(tg->step_devs + l->n_devs, devs, (size_t)n * sizeof *devs);
    l->n_devs += n;
    return l->n_devs - n;
}

static sf_tg_step device_step(sf_tg_step_kind kind, int dev, int64_t numel, double moved,
                              int grads) {
    return (sf_tg_step){.kind = (uint8_t)kind,
                        .payload = SF_PAYLOAD_GRAD,
                        .grads = (uint8_t)grads,
                        .dev = dev,
                        .peer = -1,
                        .group = -1,
                        .numel = numel,
                        .moved = moved,
                        .runs = kind == SF_STEP_COPY};
}

static sf_tg_step collective(sf_tg_step_kind kind, int group, int n_group, int64_t numel,
                             int64_t offset, int grads) {
    return (sf_tg_step){.kind = (uint8_t)kind,
                        .payload = SF_PAYLOAD_GRAD,
                        .grads = (uint8_t)grads,
                        .dev = -1,
                        .peer = -1,
                        .group = group,
                        .n_group = n_group,
                        .numel = numel,
                        .offset = offset};
}

static sf_tg_step p2p(int from, int to, int64_t numel, sf_tg_payload what, int grads) {
    return (sf_tg_step){.kind = SF_STEP_P2P,
                        .payload = (uint8_t)what,
                        .grads = (uint8_t)grads,
                        .dev = from,
                        .peer = to,
                        .group = -1,
                        .numel = numel};
}

/* ---- the schemes ------------------------------------------------------------------ */

/* Packing copies (when priced) of the R devices, each waiting for its
 * gradients: their indices into out, and how many (0 when copies are not
 * priced; the next step then waits for the gradients itself). */
static int pack_all(lower *l, const int16_t *devs, int R, int64_t n, int32_t *out) {
    if (!l->pack) return 0;
    for (int r = 0; r < R; r++) {
        sf_tg_step c = device_step(SF_STEP_COPY, devs[r], n, 2.0, 1);
        out[r] = add_step(l, &c, NULL, 0);
    }
    return R;
}

/* After the nd steps `done` that leave device d with the summed shard: its
 * unpacking copy (when priced) and its update. */
static void unpack_update(lower *l, int d, int64_t n, const int32_t *done, int nd) {
    int32_t after;
    if (l->pack) {
        sf_tg_step c = device_step(SF_STEP_COPY, d, n, 2.0, 0);
        if ((after = add_step(l, &c, done, nd)) < 0) return;
        done = &after;
        nd = 1;
    }
    sf_tg_step u = device_step(SF_STEP_UPDATE, d, n, 0, 0);
    add_step(l, &u, done, nd);
}

static void lower_ring(lower *l, const int16_t *devs, int R, int64_t n, int32_t *scratch) {
    int g = add_group(l, devs, R);
    int np = pack_all(l, devs, R, n, scratch);
    sf_tg_step s = collective(SF_STEP_REDUCE_SCATTER, g, R, n, 0, np == 0);
    int32_t rs = add_step(l, &s, scratch, np);
    sf_tg_step a = collective(SF_STEP_ALL_GATHER, g, R, n, 0, 0);
    int32_t ag = add_step(l, &a, &rs, 1);
    for (int r = 0; r < R && !l->failed; r++) unpack_update(l, devs[r], n, &ag, 1);
}

/* ZeRO (Rajbhandari et al. 2020) over the R replicas: the gradient's
 * reduce-scatter leaves position r with chunk r of the sum, which it alone
 * updates; stages 1-2 then all-gather the new weights, stage 3 keeps them
 * sharded and gathers them before each use, forward and backward. */
static void lower_zero(lower *l, const int16_t *devs, int R, int64_t n, int stage,
                       int32_t *scratch) {
    int g = add_group(l, devs, R);
    if (stage >= SF_ZERO_WEIGHTS) {
        for (int ph = SF_PHASE_FORWARD; ph <= SF_PHASE_BACKWARD; ph++) {
            sf_tg_step a = collective(SF_STEP_ALL_GATHER, g, R, n, 0, 0);
            a.payload = SF_PAYLOAD_WEIGHTS;
            a.phase = (uint8_t)ph;
            int32_t ag = add_step(l, &a, NULL, 0);
            for (int r = 0; r < R && l->pack; r++) {
                sf_tg_step c = device_step(SF_STEP_COPY, devs[r], n, 2.0, 0);
                c.payload = SF_PAYLOAD_WEIGHTS;
                c.phase = (uint8_t)ph;
                add_step(l, &c, &ag, 1);
            }
        }
    }
    int np = pack_all(l, devs, R, n, scratch);
    sf_tg_step s = collective(SF_STEP_REDUCE_SCATTER, g, R, n, 0, np == 0);
    int32_t rs = add_step(l, &s, scratch, np);
    for (int r = 0; r < R && !l->failed; r++) {
        int64_t off, len;
        sf_tg_chunk(n, R, r, &off, &len);
        sf_tg_step u = device_step(SF_STEP_UPDATE, devs[r], len, 0, 0);
        u.offset = off;
        scratch[r] = add_step(l, &u, &rs, 1);
    }
    if (stage >= SF_ZERO_WEIGHTS) return;
    sf_tg_step a = collective(SF_STEP_ALL_GATHER, g, R, n, 0, 0);
    a.payload = SF_PAYLOAD_WEIGHTS;
    int32_t ag = add_step(l, &a, scratch, R);
    for (int r = 0; r < R && l->pack; r++) {
        sf_tg_step c = device_step(SF_STEP_COPY, devs[r], n, 2.0, 0);
        c.payload = SF_PAYLOAD_WEIGHTS;
        add_step(l, &c, &ag, 1);
    }
}

static void lower_ps(lower *l, const int16_t *devs, int R, int64_t n, int server,
                     int32_t *scratch) {
    int np = 0;
    for (int r = 0; r < R; r++) {
        int d = devs[r];
        if (d == server) continue;
        int32_t prev = -1;
        if (l->tg->copies) {
            sf_tg_step c = device_step(SF_STEP_COPY, d, n, 2.0, 1);
            prev = add_step(l, &c, NULL, 0);
        }
        sf_tg_step m = p2p(d, server, n, SF_PAYLOAD_GRAD, prev < 0);
        prev = add_step(l, &m, &prev, prev >= 0);
        if (l->tg->copies) { /* accumulated into the server's gradient */
            sf_tg_step c = device_step(SF_STEP_COPY, server, n, 3.0, 0);
            prev = add_step(l, &c, &prev, 1);
        }
        scratch[np++] = prev;
    }
    sf_tg_step u = device_step(SF_STEP_UPDATE, server, n, 0, 1);
    int32_t up = add_step(l, &u, scratch, np);
    for (int r = 0; r < R && !l->failed; r++) {
        int d = devs[r];
        if (d == server) continue;
        int32_t prev = up;
        if (l->tg->copies) {
            sf_tg_step c = device_step(SF_STEP_COPY, server, n, 2.0, 0);
            prev = add_step(l, &c, &prev, 1);
        }
        sf_tg_step m = p2p(server, d, n, SF_PAYLOAD_WEIGHTS, 0);
        prev = add_step(l, &m, &prev, 1);
        if (l->tg->copies) {
            sf_tg_step c = device_step(SF_STEP_COPY, d, n, 2.0, 0);
            c.payload = SF_PAYLOAD_WEIGHTS;
            add_step(l, &c, &prev, 1);
        }
    }
}

/* The 2D all-reduce: node k's L devices are devs[k * L .. + L] (ring order,
 * so node by node); N nodes. */
static void lower_hier(lower *l, const int16_t *devs, int N, int L, int64_t n, int32_t *scratch) {
    int32_t *rs = scratch, *ar = scratch + N, *tmp = scratch + N + L;
    for (int k = 0; k < N; k++) {
        const int16_t *nd = devs + (size_t)k * L;
        int g = add_group(l, nd, L);
        int np = pack_all(l, nd, L, n, tmp);
        sf_tg_step s = collective(SF_STEP_REDUCE_SCATTER, g, L, n, 0, np == 0);
        rs[k] = add_step(l, &s, tmp, np);
    }
    int16_t across[SF_MAX_DEVICES];
    for (int j = 0; j < L; j++) {
        for (int k = 0; k < N; k++) across[k] = devs[(size_t)k * L + j];
        int g = add_group(l, across, N);
        int64_t off, len;
        sf_tg_chunk(n, L, j, &off, &len);
        sf_tg_step s = collective(SF_STEP_ALL_REDUCE, g, N, len, off, 0);
        ar[j] = add_step(l, &s, rs, N);
    }
    for (int k = 0; k < N && !l->failed; k++) {
        int g = l->tg->steps[rs[k]].group; /* the node's group again */
        sf_tg_step a = collective(SF_STEP_ALL_GATHER, g, L, n, 0, 0);
        int32_t ag = add_step(l, &a, ar, L);
        for (int j = 0; j < L && !l->failed; j++)
            unpack_update(l, devs[(size_t)k * L + j], n, &ag, 1);
    }
}

/* Whether the R devices (ring order: node by node) fill N >= 2 nodes with L >= 2
 * each. */
static int two_levels(const sf_taskgraph *tg, const int16_t *devs, int R, int *N, int *L) {
    int per = tg->per_node, first = devs[0] / per, run = 0;
    while (run < R && devs[run] / per == first) run++;
    if (run < 2 || run == R || R % run) return 0;
    for (int k = 0; k < R / run; k++) {
        int node = devs[k * run] / per;
        for (int j = 0; j < run; j++)
            if (devs[k * run + j] / per != node) return 0;
        if (k > 0 && node == devs[(k - 1) * run] / per) return 0;
    }
    *N = R / run;
    *L = run;
    return 1;
}

/* ---- ring order ------------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Where the shard's entry (op, part) comes in the entry order of the nm
 * members (members in order, each one's parts in order). */
static int64_t entry_rank(const sf_taskgraph *tg, const int *members, int nm, sf_tg_entry e) {
    int64_t before = 0;
    for (int k = 0; k < nm && members[k] != e.op; k++)
        before += sf_strategy_get(tg->s, members[k])->n_parts;
    return before + e.part;
}

#define RING_BITS 13 /* a field of a ring key: room for SF_MAX_DEVICES values */
_Static_assert(SF_MAX_DEVICES <= (1 << RING_BITS), "ring key fields hold a device count");

/* The shard's devices in ring order, into tg->ring_dev; NULL when out of
 * memory. See "Ring order" at the top of this file. */
static const int16_t *ring_order(sf_taskgraph *tg, const int *members, int nm, const sf_tg_sync *sy,
                                 const sf_tg_shard *sh) {
    int R = sh->n_devs, nd = tg->n_dev > 0 ? tg->n_dev : 1;
    int64_t old = tg->cap_ring_rank;
    if (tg_grow((void **)&tg->ring_key, &tg->cap_ring_key, R, sizeof *tg->ring_key) ||
        tg_grow((void **)&tg->ring_dev, &tg->cap_ring_dev, R, sizeof *tg->ring_dev) ||
        tg_grow((void **)&tg->ring_rank, &tg->cap_ring_rank, 2 * (int64_t)nd,
                sizeof *tg->ring_rank))
        return NULL;
    for (int64_t i = old; i < tg->cap_ring_rank; i++) tg->ring_rank[i] = -1;
    const int16_t *devs = sy->devs + sh->dev_start;
    int64_t *key = tg->ring_key;
    /* the order in which the members' parts name the devices: the first entry
     * of each device's row is its earliest (rows are in entry order) */
    for (int r = 0; r < R; r++)
        key[r] = entry_rank(tg, members, nm, sy->ents[sy->ent_start[sh->dev_start + r]])
                     << RING_BITS |
                 r;
    qsort(key, (size_t)R, sizeof *key, cmp_i64);
    /* nodes and PCIe switches ranked by their first device in that order */
    const sf_machine_desc *md = tg->m ? sf_machine_get_desc(tg->m) : NULL;
    int per = tg->per_node > 0 ? tg->per_node : nd;
    int sw = md && md->intra == SF_INTRA_PCIE_TREE && md->pcie_group > 0 ? md->pcie_group : per;
    int32_t *node_rank = tg->ring_rank, *sw_rank = tg->ring_rank + nd;
    int n_nodes = 0, n_sw = 0;
    for (int i = 0; i < R; i++) {
        int r = (int)(key[i] & ((1 << RING_BITS) - 1)), d = devs[r];
        if (node_rank[d / per] < 0) node_rank[d / per] = n_nodes++;
        if (sw_rank[d / sw] < 0) sw_rank[d / sw] = n_sw++;
        key[i] = (((int64_t)node_rank[d / per] << RING_BITS | sw_rank[d / sw]) << RING_BITS | i)
                     << RING_BITS |
                 r;
    }
    qsort(key, (size_t)R, sizeof *key, cmp_i64);
    for (int i = 0; i < R; i++) {
        int d = devs[key[i] & ((1 << RING_BITS) - 1)];
        tg->ring_dev[i] = (int16_t)d;
        node_rank[d / per] = sw_rank[d / sw] = -1;
    }
    return tg->ring_dev;
}

/* Lower the shards in *sy (just made for the nm operators `members`) into steps. */
/* 1 when the shard's elements are one run of its group's layout; *runs: the
 * rows of its slices, which packing copies one at a time. */
static int one_run(sf_taskgraph *tg, const sf_tg_shard *sh, int64_t *runs) {
    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    const sf_op *op = sf_graph_op(tg->g, sh->rep_op);
    int n = sf_op_weight_slices(op, &sf_taskgraph_tiles(tg, sh->rep_op)[sh->rep_part], sl);
    *runs = 0;
    for (int i = 0; i < n; i++) *runs += sl[i].count;
    if (*runs < 1) *runs = 1;
    return sf_weight_slices_one_run(sl, n);
}

static sf_status lower_shards(sf_taskgraph *tg, const int *members, int nm, const sf_tg_sync *sy,
                              sf_tg_steps *out) {
    /* scratch for step indices: at most 2 per device of a shard, and a node count */
    if (tg_grow((void **)&tg->shard_start, &tg->cap_shard_start,
                (int64_t)sy->n_shards + 1 + 3 * ((int64_t)tg->n_dev + 1), sizeof *tg->shard_start))
        return SF_ERR_NOMEM;
    lower l = {.tg = tg};
    int own = nm > 0 ? sf_taskgraph_owner(tg, members[0]) : -1; /* the group's stage */
    int stage = own >= 0 ? sf_strategy_get(tg->s, own)->zero : SF_ZERO_NONE;
    for (int s = 0; s < sy->n_shards && !l.failed; s++) {
        int32_t *scratch = tg->shard_start + sy->n_shards + 1;
        tg->shard_start[s] = l.n;
        const sf_tg_shard *sh = &sy->shards[s];
        const int16_t *devs = sy->devs + sh->dev_start;
        int R = sh->n_devs, N, L;
        if (R > 1 && !(devs = ring_order(tg, members, nm, sy, sh))) return SF_ERR_NOMEM;
        if (tg->n_rep > 1) {
            if (!(devs = every_replica(tg, devs, R))) return SF_ERR_NOMEM;
            R *= tg->n_rep;
        }
        l.pack = tg->copies && !one_run(tg, sh, &l.runs);
        if (R == 1) {
            sf_tg_step u = device_step(SF_STEP_UPDATE, devs[0], sh->numel, 0, 1);
            add_step(&l, &u, NULL, 0);
        } else if (stage != SF_ZERO_NONE) {
            lower_zero(&l, devs, R, sh->numel, stage, scratch);
        } else if (tg->scheme == SF_SCHEME_PS) {
            lower_ps(&l, devs, R, sh->numel, sh->rep_dev, scratch);
        } else if (tg->scheme == SF_SCHEME_HIERARCHICAL && two_levels(tg, devs, R, &N, &L)) {
            lower_hier(&l, devs, N, L, sh->numel, scratch);
        } else {
            lower_ring(&l, devs, R, sh->numel, scratch);
        }
    }
    if (l.failed) return SF_ERR_NOMEM;
    tg->shard_start[sy->n_shards] = l.n;
    out->n_steps = l.n;
    out->steps = tg->steps;
    out->devs = tg->step_devs;
    out->deps = tg->step_deps;
    out->shard_start = tg->shard_start;
    return SF_OK;
}

sf_status sf_taskgraph_sync_steps(sf_taskgraph *tg, int owner, sf_tg_sync *sy, sf_tg_steps *out) {
    sf_status st = sf_taskgraph_sync(tg, owner, sy);
    const int *members;
    int nm = sf_taskgraph_members(tg, owner, &members);
    return st != SF_OK ? st : lower_shards(tg, members, nm, sy, out);
}

sf_status sf_taskgraph_op_sync_steps(sf_taskgraph *tg, int op, sf_tg_sync *sy, sf_tg_steps *out) {
    sf_status st = tg_shards(tg, &op, 1, op, sy);
    return st != SF_OK ? st : lower_shards(tg, &op, 1, sy, out);
}

/* ---- pairs ----------------------------------------------------------------------- */

/* A pair's copy of e elements in `runs` runs (a pair built by hand may leave
 * its runs 0: one run). */
static sf_tg_step copy_runs(int dev, int64_t e, double moved, int64_t runs) {
    sf_tg_step c = device_step(SF_STEP_COPY, dev, e, moved, 0);
    c.runs = runs > 1 ? runs : 1;
    return c;
}

int sf_taskgraph_pair_steps(const sf_taskgraph *tg, const sf_tg_pair *pr, int grad, sf_tg_step *out,
                            int32_t *deps, int *n_fwd) {
    int n = 0, di = pr->src_dev, dj = pr->dst_dev, copies = tg->copies;
    int64_t e = pr->numel;
    /* each step waits for the one before it in its direction: deps[i] = i - 1 */
#define PUSH(st, first)                                                                            \
    do {                                                                                           \
        out[n] = (st);                                                                             \
        out[n].dep = n;                                                                            \
        out[n].n_deps = !(first);                                                                  \
        deps[n] = n - 1;                                                                           \
        n++;                                                                                       \
    } while (0)
    sf_tg_step c;
    if (di == dj) {
        c = copy_runs(dj, e, 2.0, pr->runs_local);
        if (copies && !pr->in_place) PUSH(c, 1);
        *n_fwd = n;
        c = copy_runs(dj, e, 3.0, pr->runs_local);
        if (grad && copies && pr->in_place != 2) PUSH(c, 1);
        return n;
    }
    if (copies) {
        c = copy_runs(di, e, 2.0, pr->runs_src);
        c.payload = SF_PAYLOAD_ACT;
        PUSH(c, 1);
    }
    PUSH(p2p(di, dj, e, SF_PAYLOAD_ACT, 0), n == 0);
    if (copies) {
        c = copy_runs(dj, e, 2.0, pr->runs_dst);
        c.payload = SF_PAYLOAD_ACT;
        PUSH(c, 0);
    }
    *n_fwd = n;
    if (!grad) return n;
    int first = n;
    if (copies) PUSH(copy_runs(dj, e, 2.0, pr->runs_dst), 1);
    PUSH(p2p(dj, di, e, SF_PAYLOAD_GRAD, 0), n == first);
    if (copies) PUSH(copy_runs(di, e, 3.0, pr->runs_src), 0);
#undef PUSH
    return n;
}
