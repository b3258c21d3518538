/*
 * sim_fold.c - identical data-parallel replicas of a pipeline simulated once
 * (docs/simulator.md, "Identical replicas").
 *
 * Under tensor x pipeline x data parallelism every data-parallel replica runs
 * the same tasks on its own nodes: replica r's parts are replica 0's, on the
 * devices of other nodes with the same local indices, and the replicas meet
 * only in the gradient syncs, each shard's ring visiting its devices in every
 * replica. On a machine whose nodes are alike and whose network treats every
 * pair of nodes alike (what sf_machine_build makes), the schedule is then the
 * same in every replica: replica r's nodes see replica 0's tasks, each link of
 * a ring out of (or into) one of them held as the corresponding link of
 * replica 0 is. So the simulator runs replica 0 alone, at batch / D: the
 * micro-batch graph of the graph cut into D m micro-batches with replica 0's
 * configs, whose shards' sync steps the task graph extends over every
 * replica's devices (sf_taskgraph_set_replicas) and whose tasks on other
 * replicas' nodes the builder drops (sim_build.c, step_tasks). Devices of
 * replica r report replica 0's figures and the sums count D replicas.
 *
 * What must hold, checked here (else the pipeline is simulated whole, as
 * before): a pipeline; no ZeRO; not the parameter server (its server is one
 * replica's); every operator split along its sample dimension (dimension 0,
 * the batch) into a multiple of D parts, evenly at batch / m; replica r's part
 * (sample index i + r s / D of s) on the device with the same local index as
 * replica 0's part i, in a node that holds no other replica's part, through
 * one node map per replica for all operators; and every tile of a replica's
 * samples reading inputs of those samples alone. Replicas that share nodes
 * fold in groups that fill nodes: D is the largest divisor of the operators'
 * common sample degree that passes.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

void sim_fold_free(struct sim_fold *f) {
    if (!f) return;
    sf_strategy_free(f->s);
    free(f->to);
    free(f->base);
    free(f->node_rep);
    free(f->busy);
    free(f);
}

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The sample dimension of op's parallel space when it is dimension 0 and
 * spans the batch B; -1 otherwise. */
static int sample_dim(const sf_op *op, int64_t B) {
    return op->space.ndim > 0 && op->kinds[0] == SF_DIM_SAMPLE && op->space.d[0] == B ? 0 : -1;
}

/* Whether every tile of the first b samples of op reads the first b samples
 * of each input alone. */
static int reads_own_samples(const sf_op *op, int64_t b) {
    sf_tile t = sf_tile_full(&op->space);
    t.hi[0] = b;
    for (int k = 0; k < op->n_inputs; k++) {
        sf_tile reg;
        sf_op_input_region(op, &t, k, &reg);
        if (reg.ndim < 1 || reg.lo[0] < 0 || reg.hi[0] > b) return 0;
    }
    return 1;
}

/* Replica 0's config of c (D replicas along sample dimension 0) into out:
 * dimension 0 varies slowest, so its parts are c's first n_parts / D. */
static void fold_config(const sf_config *c, int D, sf_config *out) {
    sf_config_copy(out, c);
    out->degree[0] = c->degree[0] / D;
    out->n_parts = c->n_parts / D;
}

/* The fold of s into D replicas (each D-th of every operator's samples), or
 * NULL when they are not alike as the top of this file says. */
static struct sim_fold *fold_make(const sf_graph *g, const sf_machine *m, const sf_strategy *s,
                                  int D, int *nomem) {
    int n_nodes = sf_machine_num_nodes(m), per = sf_machine_get_desc(m)->devices_per_node;
    int n_dev = sf_machine_num_devices(m), n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++)
        if (!reads_own_samples(sf_graph_op(g, i), sf_graph_batch(g) / D)) return NULL;
    struct sim_fold *f = calloc(1, sizeof *f);
    /* nu[r n_nodes + k]: replica 0's node k in replica r; inv[k]: node k's
     * replica-0 node */
    int16_t *nu = malloc((size_t)(D + 1) * n_nodes * sizeof *nu), *inv = nu + (size_t)D * n_nodes;
    if (!f || !nu) goto nomem;
    f->D = D;
    f->n_dev = n_dev;
    f->per = per;
    f->to = malloc((size_t)D * n_dev * sizeof *f->to);
    f->base = malloc((size_t)n_dev * sizeof *f->base);
    f->node_rep = malloc((size_t)n_nodes * sizeof *f->node_rep);
    f->busy = malloc((size_t)n_dev * (4 + SF_SIM_MEM_KIND_COUNT) * sizeof *f->busy);
    f->s = sf_strategy_clone(s);
    if (!f->to || !f->base || !f->node_rep || !f->busy || !f->s) goto nomem;
    f->mem = f->busy + n_dev;
    f->live = f->mem + n_dev;
    f->live_t = f->live + n_dev;
    f->kinds = f->live_t + n_dev;
    for (int k = 0; k < n_nodes; k++) f->node_rep[k] = inv[k] = -1;
    for (int k = 0; k < D * n_nodes; k++) nu[k] = -1;
    for (int i = 0; i < n; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        int sp = c->degree[0] / D, st = c->n_parts / c->degree[0];
        for (int p = 0; p < c->n_parts; p++) {
            int r = p / st / sp, d = c->device[p], d0 = c->device[p - r * sp * st];
            int k = d / per, k0 = d0 / per;
            if (f->node_rep[k] < 0) f->node_rep[k] = (int16_t)r;
            if (inv[k] < 0) inv[k] = (int16_t)k0;
            if (nu[r * n_nodes + k0] < 0) nu[r * n_nodes + k0] = (int16_t)k;
            if (f->node_rep[k] != r || inv[k] != k0 || nu[r * n_nodes + k0] != k ||
                d % per != d0 % per)
                goto no;
        }
    }
    for (int d = 0; d < n_dev; d++) {
        int k = d / per, l = d % per;
        for (int r = 0; r < D; r++) {
            int kr = f->node_rep[k] == 0 ? nu[r * n_nodes + k] : -1;
            f->to[(int64_t)r * n_dev + d] = (int16_t)(kr >= 0 ? kr * per + l : -1);
        }
    }
    for (int d = 0; d < n_dev; d++) {
        int k = d / per;
        f->base[d] = (int16_t)(inv[k] >= 0 ? inv[k] * per + d % per : d);
    }
    for (int i = 0; i < n; i++)
        fold_config(sf_strategy_get(s, i), D, sf_strategy_config(f->s, i));
    free(nu);
    return f;
no:
    free(nu);
    sim_fold_free(f);
    return NULL;
nomem:
    free(nu);
    sim_fold_free(f);
    *nomem = 1;
    return NULL;
}

struct sim_fold *sim_fold_detect(const sf_graph *g, const sf_machine *m, const sf_sim_options *o,
                                 const sf_strategy *s, int *nomem) {
    *nomem = 0;
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    int n = sf_graph_num_ops(g);
    if (!pl || o->every_replica || o->scheme == SF_SCHEME_PS || sf_machine_num_nodes(m) < 2)
        return NULL;
    int64_t B = sf_graph_batch(g), mb = B / pl->micro_batches;
    int D = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        const sf_config *c = sf_strategy_get(s, i);
        if (c->zero || sample_dim(op, B) < 0 || mb % c->degree[0]) return NULL;
        D = gcd(D, c->degree[0]);
    }
    /* the most replicas that fold: replicas sharing a node fold in groups of
     * a node (data parallelism 16 of tensor 4 on 8-device nodes: 8 groups) */
    for (int d = D; d >= 2; d--) {
        if (D % d) continue;
        struct sim_fold *f = fold_make(g, m, s, d, nomem);
        if (f || *nomem) return f;
    }
    return NULL;
}

int sim_fold_same(const struct sim_fold *a, const struct sim_fold *b) {
    if (!a || !b) return a == b;
    return a->D == b->D && a->n_dev == b->n_dev &&
           !memcmp(a->to, b->to, (size_t)a->D * a->n_dev * sizeof *a->to);
}

void sim_fold_result(struct sim_fold *f, sf_sim_result *r) {
    int nd = f->n_dev, K = SF_SIM_MEM_KIND_COUNT;
    r->replicas = f->D; /* the sums are every replica's already (sim.c, fold_sums) */
    for (int d = 0; d < nd; d++) {
        int b = f->base[d];
        f->busy[d] = r->device_busy_s[b];
        f->mem[d] = r->device_mem_bytes[b];
    }
    r->device_busy_s = f->busy;
    r->device_mem_bytes = f->mem;
    if (r->device_live_bytes) {
        for (int d = 0; d < nd; d++) {
            int b = f->base[d];
            f->live[d] = r->device_live_bytes[b];
            f->live_t[d] = r->device_live_peak_s[b];
            memcpy(&f->kinds[(size_t)d * K], &r->device_live_kinds[(size_t)b * K],
                   (size_t)K * sizeof *f->kinds);
        }
        r->device_live_bytes = f->live;
        r->device_live_peak_s = f->live_t;
        r->device_live_kinds = f->kinds;
    }
}
