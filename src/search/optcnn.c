/*
 * optcnn.c - OptCNN (Jia, Lin, Qi, Aiken, ICML'18, section 5): layer-wise
 * parallelization found by dynamic programming over node and edge eliminations,
 * under an additive cost model.
 *
 * The space. A candidate config of an operator gives a degree to each of its
 * splittable dimensions (kind != none, degree <= the dimension's size); the
 * product p of the degrees (the number of parts) is a power of two or a divisor
 * of the device count, and p <= min(devices, SF_MAX_PARTS); part i runs on
 * device i (p contiguous devices from device 0, in part order). On 16 devices a
 * convolution (sample, channel, height, width) has 70 candidates. Tied
 * operators (an embedding and the LM head sharing its table) keep the table
 * whole: their candidates split samples and the sequence only (oc_candidates). With
 * check_memory, a config whose largest part (sf_op_tile_memory: saved and output
 * activations in the plan's dtype, plus fp32 weights x 3 for weights, gradients
 * and SGD's momentum, x 4 with Adam's two moments, which mixed precision's
 * masters and 16-bit copies and gradients take too) does
 * not fit the device is dropped; when none fits, the config with the smallest
 * largest part is kept so that the search always answers. max_configs > 0 keeps
 * the configs of lowest node cost (and always the data-parallel one).
 *
 * The additive cost of a strategy (sf_optcnn_cost computes exactly this, for any
 * strategy, with oc_node_cost and oc_edge_cost of optcnn_cost.c) is the sum over
 * operators of
 *     node(op, c) = compute + (sync + update) / G
 *       compute: the largest, over the resources devices compute on (a device,
 *                or the core devices share: sf_machine_compute_unit), of the
 *                summed forward + backward task times of the parts it runs;
 *       sync:    the steps the task graph lowers the gradient sync of op's
 *                shards into under the options' scheme (ring, parameter server,
 *                hierarchical: sf_taskgraph_op_sync_steps), each priced by the
 *                task graph's one pricing function (sf_tg_price_step) as the
 *                simulator prices it: routes, link times, the machine's
 *                calibrated all-reduce curve, copies. All steps but the updates
 *                are put in levels (a step's level is one more than its deepest
 *                dependency's); a level costs its busiest resource's summed use
 *                (a link, or the compute unit a copy runs on; a message charges
 *                its whole chain to each link it crosses), and the levels add.
 *                So a ring costs its reduce-scatter's busiest link plus its
 *                all-gather's, shards whose steps meet on a link at one level
 *                queue there, and a parameter server's messages into the
 *                server, all at one level, add on the links their routes share;
 *       update:  the busiest compute unit's summed update steps (every replica
 *                under a ring, the server alone under a parameter server);
 *       G:       the operators that share op's weights (below);
 * and over edges (input k of consumer v fed by output `out` of producer u) of
 *     edge(e, cu, cv) = the largest, over devices D, of the summed steps
 *                   (sf_taskgraph_pair_steps) of the pairs whose consumer part
 *                   is on D, forward: each a chain over its route
 *                   (sf_tg_step_chain_s: latency + bytes / bandwidth per link,
 *                   store-and-forward) or a copy
 *                 + the same for the activation gradients flowing back into the
 *                   producer's devices (none when the producer is an input).
 *                   The pairs are those across devices, and on a machine that
 *                   prices copies every pair (sf_taskgraph_edge_moves).
 * On a calibrated machine (copies, the all-reduce curve, shared cores) a
 * data-parallel layer costs what the simulator gives it under bulk sync
 * (tests/test_optcnn.c, test_layer_equals_simulator_calibrated).
 * Operators that share weights (the unrolled steps of an RNN layer) are synced
 * and updated once, by the simulator as in training: each of the G operators of
 * such a group is charged 1/G of the sync and update it would pay alone, which
 * keeps the model additive and is exact when they share a config, as the steps
 * of a layer do in every strategy OptCNN's candidates make sensible (the
 * simulator syncs the union of their shards' devices).
 *
 * The dynamic program. Operators are nodes with a cost vector, edges carry a
 * cost table T[cu][cv] (an operator reading one producer twice gives parallel
 * edges). Until nothing changes: parallel edges are merged by adding tables
 * (edge elimination); a node with two edges, to u and w, is removed and replaced
 * by an edge with T(cu, cw) = min over cv of T1(cu, cv) + node(v, cv) + T2(cv, cw)
 * (node elimination; the paper asks for one in-edge and one out-edge, but the
 * objective is a sum of pairwise terms, so direction does not matter and any
 * node of degree two qualifies); a node with one edge is folded into its
 * neighbour's vector (node(u, cu) += min over cv of T(cu, cv) + node(v, cv)); a
 * node with none takes its best config. Leaf and isolated elimination are an
 * extension consistent with the paper: both are exact, and they reduce trees
 * and series-parallel graphs (chains, diamonds, inception modules, residual
 * blocks) to nothing. What is left (nodes of degree three or more) is solved by
 * iterated coordinate descent from the data-parallel-like and the per-node best
 * configs, then, when at most max_left nodes are left, by branch and bound
 * seeded with that value; the answer is exact when branch and bound finishes
 * within OC_BB_MAX_EXPANSIONS. Eliminations are undone in reverse to recover
 * each operator's config: the argmin of an elimination is recomputed for the
 * configs its neighbours ended with, so no argmin table is stored.
 *
 * Speed. Building the edge tables dominates. The producer parts a consumer
 * region touches form a box of the producer's grid of degrees, which the task
 * graph finds per dimension by arithmetic (sf_taskgraph_edge), so a table costs
 * about sum over config pairs of (parts x dims + overlapping pairs), not parts x
 * parts. Edges whose tables would be computed from the same inputs (whether
 * gradients flow, devices, producer output tiles, consumer input regions, and on
 * a machine that prices copies the edge itself, since whether a local pair is
 * read in place depends on the producer's other readers: repeated inception and
 * residual blocks, and more) share one table; the key is compared in full, not
 * only hashed, so sharing is exact. Node elimination is a min-plus product
 * over contiguous rows. Everything lives in one arena and a few scratch buffers allocated up front.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optcnn_impl.h"

#define OC_BB_MAX_EXPANSIONS ((int64_t)1 << 24) /* branch-and-bound node visits */
#define OC_ICM_MAX_SWEEPS 200
#define OC_CHECK_REL 1e-9 /* DP optimum vs sf_optcnn_cost of its strategy */

void sf_optcnn_options_default(sf_optcnn_options *o) {
    memset(o, 0, sizeof *o);
    o->max_configs = 0;
    o->check_memory = 1;
    o->max_left = 16;
    o->scheme = SF_SCHEME_RING;
    o->memory_bound = 1;
    o->memory_headroom = 0;
    o->timeline = 0;
    sf_sim_options_default(&o->sim);
}

/* ---- the additive cost of a strategy (priced by optcnn_cost.c) --------------------- */

double sf_optcnn_cost(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                      const sf_optcnn_options *o, const sf_strategy *s) {
    sf_optcnn_options def;
    if (!o) {
        sf_optcnn_options_default(&def);
        o = &def;
    }
    if (!g || !m || !cm || !s || sf_strategy_num_ops(s) != sf_graph_num_ops(g)) return NAN;
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++)
        if (sf_config_validate(sf_graph_op(g, i), m, sf_strategy_get(s, i), NULL) != SF_OK)
            return NAN;
    oc_scratch sc;
    if (oc_scratch_init(&sc, g, m, cm, o->scheme) != SF_OK) return NAN;
    double total = 0;
    for (int vi = 0; vi < n; vi++) {
        const sf_op *v = sf_graph_op(g, vi);
        const sf_config *cv = sf_strategy_get(s, vi);
        total += oc_node_cost(&sc, vi, cv);
        for (int k = 0; k < v->n_inputs; k++)
            total += oc_edge_cost(&sc, vi, k, sf_strategy_get(s, v->inputs[k].op), cv);
    }
    if (sc.nomem) total = NAN;
    oc_scratch_free(&sc);
    return total;
}

/* ---- candidate configs --------------------------------------------------------- */

static int parts_allowed(int p, int n_dev) { return (p & (p - 1)) == 0 || n_dev % p == 0; }

/* Degree tuples of op with product exactly `rem` over dimensions d.., in
 * lexicographic order; writes them to out (when non-NULL) from index n. With
 * `whole`, the dimensions that split the weights (parameter, reduction) stay
 * whole: a tied operator's (see oc_candidates). */
static int enum_degrees(const sf_op *op, int reduce, int whole, int d, int rem, int *deg,
                        oc_cfg *out, int n) {
    if (d == op->space.ndim) {
        if (rem != 1) return n;
        if (out) {
            oc_cfg *c = &out[n];
            c->ndim = op->space.ndim;
            c->n_parts = 1;
            for (int i = 0; i < SF_MAX_DIMS; i++) {
                c->degree[i] = i < c->ndim ? deg[i] : 1;
                c->n_parts *= c->degree[i];
            }
        }
        return n + 1;
    }
    /* reduction and inner dimensions (sf_op_dim_opt_in) only with sf_optcnn_options.reduce */
    int64_t maxd = op->kinds[d] == SF_DIM_NONE || sf_op_dim_opt_in(op, d) > reduce ? 1 : rem;
    if (whole && (op->kinds[d] == SF_DIM_PARAMETER || op->kinds[d] == SF_DIM_REDUCE)) maxd = 1;
    if (op->space.d[d] < maxd) maxd = op->space.d[d];
    for (int x = 1; x <= maxd; x++) {
        if (rem % x) continue;
        deg[d] = x;
        n = enum_degrees(op, reduce, whole, d + 1, rem / x, deg, out, n);
    }
    deg[d] = 1;
    return n;
}

/* The degrees of k as a config for sf_config_part_tile, which reads no devices. */
static void degrees_of(const oc_cfg *k, sf_config *c) {
    c->ndim = k->ndim;
    c->n_parts = k->n_parts;
    memcpy(c->degree, k->degree, sizeof c->degree);
}

/* act_scale: the plan's element bytes over fp32's (activations are in the
 * dtype). w_scale: the fp32 bytes a weight keeps over its own, 2 + the
 * optimizer's state slots (SGD 3: weight, gradient, momentum; Adam 4), which
 * hold under mixed precision too: an fp32 master and momentum and 16-bit copy
 * and gradient are 4 + 4 + 2 + 2 bytes (Adam: 4 more for its second moment). */
static double largest_part_bytes(const sf_op *op, const oc_cfg *k, double act_scale,
                                 double w_scale) {
    double worst = 0;
    sf_config c;
    degrees_of(k, &c);
    for (int p = 0; p < k->n_parts; p++) {
        sf_tile t;
        sf_op_mem mem;
        sf_config_part_tile(op, &c, p, &t);
        sf_op_tile_memory(op, &t, &mem);
        double b = (mem.saved_bytes + mem.output_bytes) * act_scale + w_scale * mem.weight_bytes;
        if (b > worst) worst = b;
    }
    return worst;
}

static int data_like(const sf_op *op, const oc_cfg *c) {
    for (int d = 0; d < op->space.ndim; d++)
        if (c->degree[d] > 1 && op->kinds[d] != SF_DIM_SAMPLE) return 0;
    return 1;
}

typedef struct ranked {
    double cost;
    int idx;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

sf_status oc_candidates(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_optcnn_options *o, sf_arena *arena, oc_cands *out, sf_error *err) {
    int n_dev = sf_machine_num_devices(m);
    int pmax = n_dev < SF_MAX_PARTS ? n_dev : SF_MAX_PARTS;
    double mem_cap = sf_machine_device_kind(m, 0)->mem_bytes;
    double act_scale = (double)sf_cost_elem_bytes(cm) / SF_ELEM_BYTES;
    double w_scale = 2.0 + sf_optimizer_state_slots(sf_cost_optimizer(cm));
    oc_scratch sc;
    if (o->max_configs > 0 && oc_scratch_init(&sc, g, m, cm, o->scheme) != SF_OK)
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory enumerating configs");
    sf_config *one = o->max_configs > 0 ? malloc(sizeof *one) : NULL; /* a candidate, whole */
    if (o->max_configs > 0 && !one) {
        oc_scratch_free(&sc);
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory enumerating configs");
    }
    sf_status st = SF_OK;
    for (int i = 0; i < sf_graph_num_ops(g) && st == SF_OK; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int deg[SF_MAX_DIMS];
        for (int d = 0; d < SF_MAX_DIMS; d++) deg[d] = 1;
        /* Tied operators (an embedding and its LM head) must split their one
         * table alike (src/strategy/tie.c), a constraint between two operators
         * far apart that the additive model has no term for: their candidates
         * keep the weights whole (samples and sequence split), so that every
         * combination ties. */
        int whole = sf_graph_op_tied(g, i);
        int total = 0;
        for (int p = 1; p <= pmax; p++)
            if (parts_allowed(p, n_dev))
                total = enum_degrees(op, o->reduce, whole, 0, p, deg, NULL, total);
        oc_cfg *cfg = sf_arena_calloc(arena, (size_t)total, sizeof *cfg);
        double *bytes = sf_arena_calloc(arena, (size_t)total, sizeof *bytes);
        if (!cfg || !bytes) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory enumerating configs");
            break;
        }
        int nc = 0;
        for (int p = 1; p <= pmax; p++)
            if (parts_allowed(p, n_dev))
                nc = enum_degrees(op, o->reduce, whole, 0, p, deg, cfg, nc);
        if (o->check_memory) {
            int kept = 0, smallest = 0;
            for (int c = 0; c < nc; c++) {
                bytes[c] = largest_part_bytes(op, &cfg[c], act_scale, w_scale);
                if (bytes[c] < bytes[smallest]) smallest = c;
            }
            for (int c = 0; c < nc; c++)
                if (bytes[c] <= mem_cap) cfg[kept++] = cfg[c];
            if (kept == 0) cfg[kept++] = cfg[smallest];
            nc = kept;
        }
        int data = -1;
        for (int c = 0; c < nc; c++)
            if (data_like(op, &cfg[c]) && (data < 0 || cfg[c].n_parts > cfg[data].n_parts))
                data = c;
        if (data < 0) data = 0;
        if (o->max_configs > 0 && nc > o->max_configs) {
            ranked *rk = sf_arena_calloc(arena, (size_t)nc, sizeof *rk);
            if (!rk) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory enumerating configs");
                break;
            }
            for (int c = 0; c < nc; c++) {
                oc_cfg_get(&cfg[c], one);
                rk[c].cost = c == data ? -1.0 : oc_node_cost(&sc, i, one);
                rk[c].idx = c;
            }
            qsort(rk, (size_t)nc, sizeof *rk, cmp_ranked);
            unsigned char *keep = (unsigned char *)bytes; /* reuse: nc bytes needed */
            for (int c = 0; c < nc; c++) keep[c] = 0;
            for (int c = 0; c < o->max_configs; c++) keep[rk[c].idx] = 1;
            int kept = 0, new_data = 0;
            for (int c = 0; c < nc; c++) {
                if (!keep[c]) continue;
                if (c == data) new_data = kept;
                cfg[kept++] = cfg[c];
            }
            nc = kept;
            data = new_data;
        }
        out[i].n = nc;
        out[i].cfg = cfg;
        out[i].data_idx = data;
    }
    if (o->max_configs > 0) oc_scratch_free(&sc);
    free(one);
    return st;
}

/* ---- the reduction graph --------------------------------------------------------- */

typedef struct dp_node {
    int n;              /* configs */
    const double *tvec; /* [n] node cost (time) */
    const double *mvec; /* [n] node memory: its largest device's bytes */
    double *vec;        /* [n] tvec + lambda * mvec in a solve, grows as leaves fold in */
    int *adj;           /* incident edge ids (dead ones removed lazily) */
    int n_adj, cap_adj;
    int alive;
    int choice; /* final config index */
} dp_node;

typedef struct dp_edge {
    int a, b;        /* endpoints; table is [ca * n_b + cb] */
    const double *t; /* never modified once made (memoized tables are shared) */
    int alive;
} dp_edge;

enum { REC_ISOLATED, REC_LEAF, REC_SERIES };

typedef struct dp_rec {
    int kind;
    int v;
    int e1, e2;        /* LEAF: e1 joins v to its neighbour; SERIES: e1 to u, e2 to w */
    const double *vec; /* node(v) when eliminated */
} dp_rec;

typedef struct memo_entry memo_entry;

typedef struct dp {
    const sf_graph *g;
    const sf_machine *m;
    const sf_cost_model *cm;
    sf_arena *arena; /* what every solve shares: candidates, tables */
    sf_arena *run;   /* what one solve makes (dp_solve): vectors, adjacency, tables */
    oc_cands *cand;
    int n_nodes;
    dp_node *nodes;
    dp_edge *edges;
    int n_edges, cap_edges;
    dp_rec *recs;
    int n_recs;
    double constant; /* optimum of the components eliminated entirely */
    int *queue;
    unsigned char *inq;
    int q_head, q_len;
    double *tmp_a, *tmp_b; /* [max_n * max_n] min-plus scratch */
    int max_n;
    int n_tables;     /* distinct edge tables computed */
    memo_entry *memo; /* [n_tables] */
    int n_init;       /* the graph's edges: init_memo[q] is edge q's table */
    int *init_a, *init_b, *init_memo;
    const double **comb;    /* [n_tables] a solve's tables (time + lambda * memory) */
    sf_config cfg_a, cfg_b; /* candidates made whole (oc_cfg_get) for the cost functions */
} dp;

static double tab(const dp *s, const dp_edge *e, int x, int cx, int cy) {
    if (e->a == x) return e->t[(size_t)cx * (size_t)s->nodes[e->b].n + (size_t)cy];
    return e->t[(size_t)cy * (size_t)s->nodes[e->b].n + (size_t)cx];
}

static int other_end(const dp_edge *e, int x) { return e->a == x ? e->b : e->a; }

static int adj_push(dp *s, int x, int e) {
    dp_node *nd = &s->nodes[x];
    if (nd->n_adj == nd->cap_adj) {
        int cap = nd->cap_adj ? 2 * nd->cap_adj : 4;
        int *a = sf_arena_calloc(s->run, (size_t)cap, sizeof *a);
        if (!a) return -1;
        if (nd->n_adj) memcpy(a, nd->adj, (size_t)nd->n_adj * sizeof *a);
        nd->adj = a;
        nd->cap_adj = cap;
    }
    nd->adj[nd->n_adj++] = e;
    return 0;
}

static int edge_add(dp *s, int a, int b, const double *t) {
    if (s->n_edges == s->cap_edges) return -1; /* capacity is 2E: cannot happen */
    int id = s->n_edges++;
    s->edges[id] = (dp_edge){a, b, t, 1};
    if (adj_push(s, a, id) || adj_push(s, b, id)) return -1;
    return id;
}

static void push(dp *s, int x) {
    if (s->inq[x] || !s->nodes[x].alive) return;
    s->inq[x] = 1;
    s->queue[(s->q_head + s->q_len) % s->n_nodes] = x;
    s->q_len++;
}

static void compact_adj(dp *s, int x) {
    dp_node *nd = &s->nodes[x];
    int k = 0;
    for (int i = 0; i < nd->n_adj; i++)
        if (s->edges[nd->adj[i]].alive) nd->adj[k++] = nd->adj[i];
    nd->n_adj = k;
}

/* Merge parallel edges at x; returns -1 on out of memory. */
static int merge_parallel(dp *s, int x) {
    for (int again = 1; again;) {
        again = 0;
        compact_adj(s, x);
        dp_node *nd = &s->nodes[x];
        for (int i = 0; i < nd->n_adj && !again; i++) {
            for (int j = i + 1; j < nd->n_adj && !again; j++) {
                dp_edge *e1 = &s->edges[nd->adj[i]], *e2 = &s->edges[nd->adj[j]];
                int y = other_end(e1, x);
                if (other_end(e2, x) != y) continue;
                int nx = nd->n, ny = s->nodes[y].n;
                double *t = sf_arena_calloc(s->run, (size_t)nx * (size_t)ny, sizeof *t);
                if (!t) return -1;
                for (int cx = 0; cx < nx; cx++)
                    for (int cy = 0; cy < ny; cy++)
                        t[(size_t)cx * (size_t)ny + (size_t)cy] =
                            tab(s, e1, x, cx, cy) + tab(s, e2, x, cx, cy);
                e1->alive = e2->alive = 0;
                if (edge_add(s, x, y, t) < 0) return -1;
                push(s, y);
                again = 1;
            }
        }
    }
    return 0;
}

static int argmin_vec(const double *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] < v[best]) best = i;
    return best;
}

static int eliminate(dp *s, int x) {
    if (merge_parallel(s, x)) return -1;
    dp_node *nd = &s->nodes[x];
    int deg = nd->n_adj, nx = nd->n;
    if (deg > 2) return 0;
    dp_rec *r = &s->recs[s->n_recs++];
    r->v = x;
    r->vec = nd->vec;
    r->e1 = r->e2 = -1;
    nd->alive = 0;
    if (deg == 0) {
        r->kind = REC_ISOLATED;
        nd->choice = argmin_vec(nd->vec, nx);
        s->constant += nd->vec[nd->choice];
        return 0;
    }
    if (deg == 1) {
        r->kind = REC_LEAF;
        r->e1 = nd->adj[0];
        dp_edge *e = &s->edges[r->e1];
        int u = other_end(e, x);
        dp_node *nu = &s->nodes[u];
        for (int cu = 0; cu < nu->n; cu++) {
            double best = INFINITY;
            for (int cx = 0; cx < nx; cx++) {
                double val = tab(s, e, u, cu, cx) + nd->vec[cx];
                if (val < best) best = val;
            }
            nu->vec[cu] += best;
        }
        e->alive = 0;
        push(s, u);
        return 0;
    }
    r->kind = REC_SERIES;
    r->e1 = nd->adj[0];
    r->e2 = nd->adj[1];
    dp_edge *e1 = &s->edges[r->e1], *e2 = &s->edges[r->e2];
    int u = other_end(e1, x), w = other_end(e2, x);
    int nu = s->nodes[u].n, nw = s->nodes[w].n;
    /* A[cu][cx] = T1(cu, cx) + node(x, cx); B[cw][cx] = T2(cx, cw): rows contiguous */
    double *A = s->tmp_a, *B = s->tmp_b;
    for (int cu = 0; cu < nu; cu++)
        for (int cx = 0; cx < nx; cx++)
            A[(size_t)cu * (size_t)nx + (size_t)cx] = tab(s, e1, u, cu, cx) + nd->vec[cx];
    for (int cw = 0; cw < nw; cw++)
        for (int cx = 0; cx < nx; cx++)
            B[(size_t)cw * (size_t)nx + (size_t)cx] = tab(s, e2, x, cx, cw);
    double *t = sf_arena_calloc(s->run, (size_t)nu * (size_t)nw, sizeof *t);
    if (!t) return -1;
    for (int cu = 0; cu < nu; cu++) {
        const double *a = A + (size_t)cu * (size_t)nx;
        for (int cw = 0; cw < nw; cw++) {
            const double *b = B + (size_t)cw * (size_t)nx;
            double best = INFINITY;
            for (int cx = 0; cx < nx; cx++) {
                double val = a[cx] + b[cx];
                best = val < best ? val : best;
            }
            t[(size_t)cu * (size_t)nw + (size_t)cw] = best;
        }
    }
    e1->alive = e2->alive = 0;
    if (edge_add(s, u, w, t) < 0) return -1;
    push(s, u);
    push(s, w);
    return 0;
}

/* Undo in reverse: the argmin of each elimination for its neighbours' final configs,
 * computed with the same arithmetic as the elimination itself. */
static void undo_all(dp *s) {
    for (int k = s->n_recs - 1; k >= 0; k--) {
        const dp_rec *r = &s->recs[k];
        int x = r->v, nx = s->nodes[x].n;
        if (r->kind == REC_ISOLATED) continue; /* choice made when eliminated */
        const dp_edge *e1 = &s->edges[r->e1];
        int u = other_end(e1, x), cu = s->nodes[u].choice;
        int best_c = 0;
        double best = INFINITY;
        if (r->kind == REC_LEAF) {
            for (int cx = 0; cx < nx; cx++) {
                double val = tab(s, e1, u, cu, cx) + r->vec[cx];
                if (val < best) best = val, best_c = cx;
            }
        } else {
            const dp_edge *e2 = &s->edges[r->e2];
            int w = other_end(e2, x), cw = s->nodes[w].choice;
            for (int cx = 0; cx < nx; cx++) {
                double val = (tab(s, e1, u, cu, cx) + r->vec[cx]) + tab(s, e2, x, cx, cw);
                if (val < best) best = val, best_c = cx;
            }
        }
        s->nodes[x].choice = best_c;
    }
}

/* ---- edge tables ------------------------------------------------------------------- */

/* The tiles every candidate of one edge's two ends gives: the producer parts'
 * output tiles and the consumer parts' input regions (the memo's key), and the
 * consumer parts' tiles (put into the scratch strategy per table entry). */
typedef struct edge_scratch {
    sf_tile *ot, *rg, *vt; /* [max_sum_parts] */
    int *roff;             /* [max_n] first tile of each consumer candidate */
} edge_scratch;

static void prepare_producer(const sf_op *u, int out, const oc_cands *cu, edge_scratch *es) {
    int off = 0;
    sf_config dg;
    for (int c = 0; c < cu->n; c++) {
        const oc_cfg *cf = &cu->cfg[c];
        degrees_of(cf, &dg);
        for (int i = 0; i < cf->n_parts; i++) {
            sf_tile t;
            sf_config_part_tile(u, &dg, i, &t);
            sf_op_output_tile(u, &t, out, &es->ot[off + i]);
        }
        off += cf->n_parts;
    }
}

static void prepare_consumer(const sf_op *v, int k, const oc_cands *cv, edge_scratch *es) {
    int off = 0;
    sf_config dg;
    for (int c = 0; c < cv->n; c++) {
        const oc_cfg *cf = &cv->cfg[c];
        degrees_of(cf, &dg);
        es->roff[c] = off;
        for (int j = 0; j < cf->n_parts; j++) {
            sf_config_part_tile(v, &dg, j, &es->vt[off + j]);
            sf_op_input_region(v, &es->vt[off + j], k, &es->rg[off + j]);
        }
        off += cf->n_parts;
    }
}

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

/* A table is a function of the devices of every candidate's parts, the producer
 * parts' output tiles, the consumer parts' input regions and whether gradients
 * flow back: exactly what its key serializes. Edges with equal keys (repeated
 * blocks, and also edges whose operators differ in ways the transfers do not
 * see, such as a consumer convolution's output channels) share one table. */
static size_t key_side(int64_t *k, const oc_cands *c, const sf_tile *tiles) {
    size_t n = 0;
    int off = 0;
    k[n++] = c->n;
    for (int a = 0; a < c->n; a++) {
        const oc_cfg *cf = &c->cfg[a];
        k[n++] = cf->n_parts;
        for (int i = 0; i < cf->n_parts; i++) {
            const sf_tile *t = &tiles[off + i];
            k[n++] = i; /* the device of part i */
            k[n++] = t->ndim;
            for (int d = 0; d < t->ndim; d++) {
                k[n++] = t->lo[d];
                k[n++] = t->hi[d];
            }
        }
        off += cf->n_parts;
    }
    return n;
}

struct memo_entry {
    uint64_t hash;
    size_t len;
    const int64_t *key; /* [len] */
    const double *t;    /* [cu * n_v + cv] time */
    const double *mt;   /* the same for memory: the largest device's received bytes */
};

static sf_status build_edges(dp *s, oc_scratch *sc, sf_error *err) {
    const sf_graph *g = s->g;
    int n = s->n_nodes, n_init = 0, max_sum = 1;
    for (int i = 0; i < n; i++) {
        n_init += sf_graph_op(g, i)->n_inputs;
        int sum = 0;
        for (int c = 0; c < s->cand[i].n; c++) sum += s->cand[i].cfg[c].n_parts;
        if (sum > max_sum) max_sum = sum;
    }
    s->cap_edges = 2 * n_init + 1;
    s->edges = sf_arena_calloc(s->arena, (size_t)s->cap_edges, sizeof *s->edges);
    memo_entry *memo = sf_arena_calloc(s->arena, (size_t)n_init + 1, sizeof *memo);
    s->memo = memo;
    s->init_a = sf_arena_calloc(s->arena, (size_t)n_init + 1, sizeof *s->init_a);
    s->init_b = sf_arena_calloc(s->arena, (size_t)n_init + 1, sizeof *s->init_b);
    s->init_memo = sf_arena_calloc(s->arena, (size_t)n_init + 1, sizeof *s->init_memo);
    s->comb = sf_arena_calloc(s->arena, (size_t)n_init + 1, sizeof *s->comb);
    /* the key: whether gradients flow, both sides, and on a machine that prices
     * copies the edge itself (whether a local pair is read in place depends on
     * the producer's other readers, which the tiles do not show) */
    size_t key_cap = 2 * (1 + (size_t)s->max_n + (size_t)max_sum * (2 + 2 * SF_MAX_DIMS)) + 3;
    int64_t *key = calloc(key_cap, sizeof *key);
    int copies = sf_machine_get_desc(s->m)->copy_bw_Bps > 0;
    edge_scratch es;
    es.ot = calloc((size_t)max_sum, sizeof *es.ot);
    es.rg = calloc((size_t)max_sum, sizeof *es.rg);
    es.vt = calloc((size_t)max_sum, sizeof *es.vt);
    es.roff = calloc((size_t)s->max_n, sizeof *es.roff);
    sf_status st = SF_OK;
    if (!s->edges || !memo || !key || !es.ot || !es.rg || !es.vt || !es.roff || !s->init_a ||
        !s->init_b || !s->init_memo || !s->comb) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory building OptCNN edge tables");
        goto done;
    }
    int n_memo = 0;
    for (int vi = 0; vi < n && st == SF_OK; vi++) {
        const sf_op *v = sf_graph_op(g, vi);
        const oc_cands *cv = &s->cand[vi];
        for (int k = 0; k < v->n_inputs; k++) {
            int ui = v->inputs[k].op, out = v->inputs[k].out;
            const sf_op *u = sf_graph_op(g, ui);
            const oc_cands *cu = &s->cand[ui];
            int has_bwd = u->type != SF_OP_INPUT;
            prepare_producer(u, out, cu, &es);
            prepare_consumer(v, k, cv, &es);
            size_t len = 0;
            key[len++] = has_bwd;
            key[len++] = copies ? vi : -1;
            key[len++] = copies ? k : -1;
            len += key_side(key + len, cu, es.ot);
            len += key_side(key + len, cv, es.rg);
            uint64_t h = 0;
            for (size_t q = 0; q < len; q++) h = mix(h, (uint64_t)key[q]);
            int found = -1;
            for (int q = 0; q < n_memo && found < 0; q++) {
                const memo_entry *me = &memo[q];
                if (me->hash == h && me->len == len && memcmp(me->key, key, len * sizeof *key) == 0)
                    found = q;
            }
            if (found < 0) {
                size_t cells = (size_t)cu->n * (size_t)cv->n;
                double *nt = sf_arena_calloc(s->arena, cells, sizeof *nt);
                double *mt = sf_arena_calloc(s->arena, cells, sizeof *mt);
                int64_t *kc = sf_arena_calloc(s->arena, len, sizeof *kc);
                if (!nt || !mt || !kc) {
                    st = sf_error_set(err, SF_ERR_NOMEM, "out of memory building edge tables");
                    break;
                }
                memcpy(kc, key, len * sizeof *key);
                for (int a = 0; a < cu->n && st == SF_OK; a++) {
                    oc_cfg_get(&cu->cfg[a], &s->cfg_a);
                    oc_set_config(sc, ui, &s->cfg_a, NULL);
                    for (int b = 0; b < cv->n; b++) {
                        oc_cfg_get(&cv->cfg[b], &s->cfg_b);
                        oc_set_config(sc, vi, &s->cfg_b, &es.vt[es.roff[b]]);
                        double mem = 0;
                        double c = oc_edge_cost_mem_set(sc, vi, k, &mem, NULL);
                        if (isnan(c)) {
                            st = sf_error_set(err, SF_ERR_NOMEM,
                                              "out of memory building edge tables");
                            break;
                        }
                        nt[(size_t)a * (size_t)cv->n + (size_t)b] = c;
                        mt[(size_t)a * (size_t)cv->n + (size_t)b] = mem;
                    }
                }
                if (st != SF_OK) break;
                memo[n_memo] = (memo_entry){h, len, kc, nt, mt};
                found = n_memo++;
            }
            /* the edges are added by each solve (dp_solve), in this order */
            s->init_a[s->n_init] = ui;
            s->init_b[s->n_init] = vi;
            s->init_memo[s->n_init++] = found;
        }
    }
    s->n_tables = n_memo;
done:
    free(key);
    free(es.ot);
    free(es.rg);
    free(es.vt);
    free(es.roff);
    return st;
}

/* ---- what elimination leaves: coordinate descent, then branch and bound ---------- */

typedef struct rest {
    int n;     /* nodes left */
    int *node; /* [n] dp node ids, in branching order */
    int *pos;  /* [n_nodes] position in node[] or -1 */
    int *eid;  /* alive edge ids */
    int n_e;
    int *cfg; /* [n] current assignment */
} rest;

static double rest_value(const dp *s, const rest *R, const int *cfg) {
    double v = 0;
    for (int k = 0; k < R->n; k++) v += s->nodes[R->node[k]].vec[cfg[k]];
    for (int q = 0; q < R->n_e; q++) {
        const dp_edge *e = &s->edges[R->eid[q]];
        v += tab(s, e, e->a, cfg[R->pos[e->a]], cfg[R->pos[e->b]]);
    }
    return v;
}

/* Iterated conditional modes: each node in turn takes its best config given its
 * neighbours, until a sweep changes nothing. */
static void icm(const dp *s, const rest *R, int *cfg) {
    for (int sweep = 0; sweep < OC_ICM_MAX_SWEEPS; sweep++) {
        int changed = 0;
        for (int k = 0; k < R->n; k++) {
            int x = R->node[k];
            const dp_node *nd = &s->nodes[x];
            int best_c = cfg[k];
            double best = INFINITY;
            for (int c = 0; c < nd->n; c++) {
                double val = nd->vec[c];
                for (int i = 0; i < nd->n_adj; i++) {
                    const dp_edge *e = &s->edges[nd->adj[i]];
                    if (!e->alive) continue;
                    int y = other_end(e, x);
                    val += tab(s, e, x, c, cfg[R->pos[y]]);
                }
                if (val < best || (val == best && c == cfg[k])) {
                    if (val < best) best = val;
                    best_c = c;
                }
            }
            if (best_c != cfg[k]) {
                cfg[k] = best_c;
                changed = 1;
            }
        }
        if (!changed) break;
    }
}

/* Branch and bound over the remaining nodes in branching order; returns 1 when it
 * finished (the best assignment, in cfg, is then optimal), 0 when it ran out of
 * expansions. Every cost is >= 0, so the suffix sums of minimum node costs and
 * minimum table entries bound what the unassigned nodes can add. */
static int branch_and_bound(const dp *s, const rest *R, int *cfg, double *best, int *cur,
                            double *lbs, double *partial) {
    int n = R->n;
    for (int k = 0; k <= n; k++) lbs[k] = 0;
    for (int k = 0; k < n; k++) {
        const dp_node *nd = &s->nodes[R->node[k]];
        lbs[k] += nd->vec[argmin_vec(nd->vec, nd->n)];
    }
    for (int q = 0; q < R->n_e; q++) {
        const dp_edge *e = &s->edges[R->eid[q]];
        size_t cnt = (size_t)s->nodes[e->a].n * (size_t)s->nodes[e->b].n;
        double mn = INFINITY;
        for (size_t i = 0; i < cnt; i++)
            if (e->t[i] < mn) mn = e->t[i];
        int later = R->pos[e->a] > R->pos[e->b] ? R->pos[e->a] : R->pos[e->b];
        lbs[later] += mn;
    }
    for (int k = n - 1; k >= 0; k--) lbs[k] += lbs[k + 1];
    int64_t expansions = 0;
    int k = 0;
    cur[0] = -1;
    partial[0] = 0;
    while (k >= 0) {
        int x = R->node[k];
        const dp_node *nd = &s->nodes[x];
        if (++cur[k] >= nd->n) {
            k--;
            continue;
        }
        if (++expansions > OC_BB_MAX_EXPANSIONS) return 0;
        int c = cur[k];
        double add = nd->vec[c];
        for (int i = 0; i < nd->n_adj; i++) {
            const dp_edge *e = &s->edges[nd->adj[i]];
            if (!e->alive) continue;
            int py = R->pos[other_end(e, x)];
            if (py < k) add += tab(s, e, x, c, cur[py]);
        }
        double np = partial[k] + add;
        if (np + lbs[k + 1] >= *best) continue;
        if (k == n - 1) {
            *best = np;
            memcpy(cfg, cur, (size_t)n * sizeof *cfg);
            continue;
        }
        partial[k + 1] = np;
        cur[++k] = -1;
    }
    return 1;
}

static sf_status solve_rest(dp *s, const sf_optcnn_options *o, sf_optcnn_result *r, sf_error *err) {
    int n_left = 0, n_e = 0;
    for (int x = 0; x < s->n_nodes; x++) {
        if (!s->nodes[x].alive) continue;
        compact_adj(s, x);
        n_left++;
    }
    for (int q = 0; q < s->n_edges; q++) n_e += s->edges[q].alive;
    r->nodes_left = n_left;
    r->edges_left = n_e;
    r->exact = 1;
    r->method = "elimination";
    if (n_left == 0) return SF_OK;

    rest R;
    R.n = n_left;
    R.n_e = n_e;
    R.node = sf_arena_calloc(s->run, (size_t)n_left, sizeof *R.node);
    R.pos = sf_arena_calloc(s->run, (size_t)s->n_nodes, sizeof *R.pos);
    R.eid = sf_arena_calloc(s->run, (size_t)n_e + 1, sizeof *R.eid);
    R.cfg = sf_arena_calloc(s->run, (size_t)n_left, sizeof *R.cfg);
    int *alt = sf_arena_calloc(s->run, (size_t)n_left, sizeof *alt);
    int *bb_cfg = sf_arena_calloc(s->run, (size_t)n_left, sizeof *bb_cfg);
    int *cur = sf_arena_calloc(s->run, (size_t)n_left, sizeof *cur);
    double *lbs = sf_arena_calloc(s->run, (size_t)n_left + 1, sizeof *lbs);
    double *partial = sf_arena_calloc(s->run, (size_t)n_left + 1, sizeof *partial);
    if (!R.node || !R.pos || !R.eid || !R.cfg || !alt || !bb_cfg || !cur || !lbs || !partial)
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory solving the reduced graph");
    for (int x = 0; x < s->n_nodes; x++) R.pos[x] = -1;
    for (int q = 0, k = 0; q < s->n_edges; q++)
        if (s->edges[q].alive) R.eid[k++] = q;
    /* Branching order: the most connected node first, then repeatedly the node
     * with the most edges into the chosen ones, so edges are priced early. */
    for (int k = 0; k < n_left; k++) {
        int best = -1, best_in = -1, best_deg = -1;
        for (int x = 0; x < s->n_nodes; x++) {
            if (!s->nodes[x].alive || R.pos[x] >= 0) continue;
            int in = 0;
            for (int i = 0; i < s->nodes[x].n_adj; i++)
                in += R.pos[other_end(&s->edges[s->nodes[x].adj[i]], x)] >= 0;
            if (in > best_in || (in == best_in && s->nodes[x].n_adj > best_deg)) {
                best = x;
                best_in = in;
                best_deg = s->nodes[x].n_adj;
            }
        }
        R.node[k] = best;
        R.pos[best] = k;
    }
    /* Two starts for coordinate descent: data-parallel-like configs, per-node best. */
    for (int k = 0; k < n_left; k++) {
        int x = R.node[k];
        R.cfg[k] = s->cand[x].data_idx;
        alt[k] = argmin_vec(s->nodes[x].vec, s->nodes[x].n);
    }
    icm(s, &R, R.cfg);
    icm(s, &R, alt);
    double v1 = rest_value(s, &R, R.cfg), v2 = rest_value(s, &R, alt);
    if (v2 < v1) {
        memcpy(R.cfg, alt, (size_t)n_left * sizeof *alt);
        v1 = v2;
    }
    r->exact = 0;
    r->method = "coordinate descent";
    if (n_left <= o->max_left) {
        double best = v1;
        memcpy(bb_cfg, R.cfg, (size_t)n_left * sizeof *bb_cfg);
        int done = branch_and_bound(s, &R, bb_cfg, &best, cur, lbs, partial);
        if (done) {
            memcpy(R.cfg, bb_cfg, (size_t)n_left * sizeof *bb_cfg);
            r->exact = 1;
            r->method = "elimination + branch and bound";
        } else {
            r->method = "coordinate descent (branch and bound hit its cap)";
        }
    }
    for (int k = 0; k < n_left; k++) s->nodes[R.node[k]].choice = R.cfg[k];
    s->constant += rest_value(s, &R, R.cfg);
    return SF_OK;
}

/* ---- one solve: the dynamic program for a multiplier ------------------------------ */

/* The dynamic program over node costs tvec + lambda * mvec and edge tables
 * t + lambda * mt (lambda 0: the time alone, in the arithmetic of a search
 * without memory), from the graph's edges in the order build_edges found
 * them; every operator's choice in nodes[].choice, the optimum in constant. */
static sf_status dp_solve(dp *s, double lambda, const sf_optcnn_options *o, sf_optcnn_result *r,
                          sf_error *err) {
    sf_arena_free(s->run);
    s->run = sf_arena_new((size_t)1 << 20);
    if (!s->run) return sf_error_set(err, SF_ERR_NOMEM, "out of memory solving OptCNN's program");
    int n = s->n_nodes;
    for (int i = 0; i < n; i++) {
        dp_node *nd = &s->nodes[i];
        nd->vec = sf_arena_calloc(s->run, (size_t)nd->n, sizeof *nd->vec);
        if (!nd->vec) return sf_error_set(err, SF_ERR_NOMEM, "out of memory computing node costs");
        for (int c = 0; c < nd->n; c++)
            nd->vec[c] = lambda > 0 ? nd->tvec[c] + lambda * nd->mvec[c] : nd->tvec[c];
        nd->adj = NULL;
        nd->n_adj = nd->cap_adj = 0;
        nd->alive = 1;
        nd->choice = 0;
    }
    for (int q = 0; q < s->n_tables; q++) s->comb[q] = NULL;
    s->n_edges = 0;
    for (int q = 0; q < s->n_init; q++) {
        int mi = s->init_memo[q];
        if (!s->comb[mi]) {
            const memo_entry *me = &s->memo[mi];
            if (lambda > 0) {
                size_t cells = (size_t)s->nodes[s->init_a[q]].n * (size_t)s->nodes[s->init_b[q]].n;
                double *t = sf_arena_calloc(s->run, cells, sizeof *t);
                if (!t)
                    return sf_error_set(err, SF_ERR_NOMEM, "out of memory building edge tables");
                for (size_t c = 0; c < cells; c++) t[c] = me->t[c] + lambda * me->mt[c];
                s->comb[mi] = t;
            } else {
                s->comb[mi] = me->t;
            }
        }
        if (edge_add(s, s->init_a[q], s->init_b[q], s->comb[mi]) < 0)
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory building edge tables");
    }
    s->n_recs = 0;
    s->constant = 0;
    s->q_head = s->q_len = 0;
    memset(s->inq, 0, (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) push(s, i);
    while (s->q_len > 0) {
        int x = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % n;
        s->q_len--;
        s->inq[x] = 0;
        if (!s->nodes[x].alive) continue;
        if (eliminate(s, x))
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory eliminating nodes");
    }
    sf_status st = solve_rest(s, o, r, err);
    if (st != SF_OK) return st;
    undo_all(s);
    return SF_OK;
}

/* ---- the memory of a strategy ------------------------------------------------------ */

/* Strategy s term by term with the reference functions: the additive time (in
 * sf_optcnn_cost's order, so the same number), the memory proxy the program
 * bounds (each term's largest device, summed: at least the peak) and each
 * device's bytes by kind added into kinds ([n_dev * SF_SIM_MEM_KIND_COUNT]). */
static void oc_eval(oc_scratch *sc, const sf_strategy *s, double *time, double *proxy,
                    double *kinds) {
    const sf_graph *g = sc->g;
    double t = 0, p = 0;
    for (int vi = 0; vi < sf_graph_num_ops(g); vi++) {
        const sf_op *v = sf_graph_op(g, vi);
        const sf_config *cv = sf_strategy_get(s, vi);
        t += oc_node_cost(sc, vi, cv);
        p += oc_node_mem(sc, vi, cv, kinds);
        for (int k = 0; k < v->n_inputs; k++) {
            oc_set_config(sc, v->inputs[k].op, sf_strategy_get(s, v->inputs[k].op), NULL);
            oc_set_config(sc, vi, cv, NULL);
            double em = 0;
            t += oc_edge_cost_mem_set(sc, vi, k, &em, kinds);
            p += em;
        }
    }
    if (sc->nomem) t = p = NAN;
    *time = t;
    *proxy = p;
}

double sf_optcnn_memory(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_optcnn_options *o, const sf_strategy *s, double *per_device,
                        double *kinds) {
    sf_optcnn_options def;
    if (!o) {
        sf_optcnn_options_default(&def);
        o = &def;
    }
    if (!g || !m || !cm || !s || sf_strategy_num_ops(s) != sf_graph_num_ops(g)) return NAN;
    int n = sf_graph_num_ops(g), n_dev = sf_machine_num_devices(m);
    for (int i = 0; i < n; i++)
        if (sf_config_validate(sf_graph_op(g, i), m, sf_strategy_get(s, i), NULL) != SF_OK)
            return NAN;
    size_t nk = (size_t)(n_dev > 0 ? n_dev : 1) * SF_SIM_MEM_KIND_COUNT;
    double *k = kinds ? kinds : calloc(nk, sizeof *k);
    oc_scratch sc;
    if (!k || oc_scratch_init(&sc, g, m, cm, o->scheme) != SF_OK) {
        if (!kinds) free(k);
        return NAN;
    }
    if (kinds) memset(kinds, 0, nk * sizeof *kinds);
    double t, p, worst = 0;
    oc_eval(&sc, s, &t, &p, k);
    for (int d = 0; d < n_dev; d++) {
        double b = 0;
        for (int j = 0; j < SF_SIM_MEM_KIND_COUNT; j++)
            b += k[(size_t)d * SF_SIM_MEM_KIND_COUNT + j];
        if (per_device) per_device[d] = b;
        if (b > worst) worst = b;
    }
    if (isnan(t)) worst = NAN;
    oc_scratch_free(&sc);
    if (!kinds) free(k);
    return worst;
}

/* ---- the search ------------------------------------------------------------------- */

#define OC_LAMBDA_UP 24 /* multiplier steps of 8 up from the first one */
#define OC_HULL_STEPS                                                                              \
    32 /* hull vertices tried between an answer that fits and one that does not                    \
        */
#define OC_HULL_REL 1e-12

/* One answer's memory against the devices' capacities. */
typedef struct oc_mem {
    double time, proxy;
    double peak, cap, over; /* the device over by the most (else the fullest): bytes, what it may
                             * use, bytes over it (<= 0: fits) */
    int dev, fits;
} oc_mem;

static void mem_judge(const sf_machine *m, double headroom, const double *kinds, oc_mem *e) {
    e->over = -INFINITY;
    e->dev = 0;
    e->peak = e->cap = 0;
    for (int d = 0; d < sf_machine_num_devices(m); d++) {
        double b = 0, cap = sf_machine_device_kind(m, d)->mem_bytes * (1.0 - headroom);
        for (int j = 0; j < SF_SIM_MEM_KIND_COUNT; j++)
            b += kinds[(size_t)d * SF_SIM_MEM_KIND_COUNT + j];
        if (b - cap > e->over) {
            e->over = b - cap;
            e->dev = d;
            e->peak = b;
            e->cap = cap;
        }
    }
    e->fits = e->over <= 0;
}

/* With a simulator (sf_optcnn_options.timeline), the timeline's peak of
 * strategy st by kind into kinds in place of the model's; 1 when it judged,
 * 0 when it could not (a task graph over its max_tasks: the model's count
 * stays), -1 on another failure. */
static int sim_kinds(sf_sim *sim, const sf_strategy *st, double *kinds, int n_dev) {
    if (!sim) return 0;
    sf_error ignore = {0};
    sf_sim_result res;
    sf_status rc = sf_sim_run(sim, st, &res, &ignore);
    if (rc == SF_ERR_RANGE) return 0;
    if (rc != SF_OK || !res.device_live_kinds) return -1;
    memcpy(kinds, res.device_live_kinds, (size_t)n_dev * SF_SIM_MEM_KIND_COUNT * sizeof *kinds);
    return 1;
}

/* The search's state across solves for the memory bound. */
typedef struct oc_bound {
    dp *s;
    oc_scratch *sc;
    const sf_optcnn_options *o;
    sf_strategy *try_s, *fit_s; /* the last solve's answer; the fastest fitting one */
    sf_strategy *out;           /* the fastest answer, then the one of least overflow */
    sf_sim *sim;                /* with timeline: what judges whether an answer fits */
    double *kinds;              /* [n_dev * SF_SIM_MEM_KIND_COUNT] */
    oc_mem fit, least;
    double fit_lambda, least_lambda;
    int have_fit, fit_exact, least_exact;
    const char *fit_method, *least_method;
    int solves;
} oc_bound;

/* Solve for lambda and keep the answer where it is the fastest that fits or,
 * while none fits, the one over by the least; *e: its time, proxy and fit. */
static sf_status bound_try(oc_bound *b, double lambda, sf_optcnn_result *r, oc_mem *e,
                           sf_error *err) {
    dp *s = b->s;
    sf_status st = dp_solve(s, lambda, b->o, r, err);
    if (st != SF_OK) return st;
    b->solves++;
    for (int i = 0; i < s->n_nodes; i++)
        oc_cfg_get(&s->cand[i].cfg[s->nodes[i].choice], sf_strategy_config(b->try_s, i));
    size_t nk = (size_t)b->sc->n_dev * SF_SIM_MEM_KIND_COUNT;
    memset(b->kinds, 0, nk * sizeof *b->kinds);
    oc_eval(b->sc, b->try_s, &e->time, &e->proxy, b->kinds);
    if (isnan(e->time)) return sf_error_set(err, SF_ERR_NOMEM, "out of memory pricing an answer");
    /* the optimum of this solve is the objective of the strategy found */
    double check = e->time + lambda * e->proxy;
    if (!(fabs(check - s->constant) <= OC_CHECK_REL * fabs(check)))
        return sf_error_set(err, SF_ERR_INTERNAL,
                            "optcnn: optimum %.9g for multiplier %g differs from the cost of its "
                            "strategy %.9g",
                            s->constant, lambda, check);
    if (sim_kinds(b->sim, b->try_s, b->kinds, b->sc->n_dev) < 0)
        return sf_error_set(err, SF_ERR_NOMEM, "optcnn: could not simulate an answer's memory");
    mem_judge(s->m, b->o->memory_headroom, b->kinds, e);
    if (e->fits && (!b->have_fit || e->time < b->fit.time)) {
        b->have_fit = 1;
        b->fit = *e;
        b->fit_lambda = lambda;
        b->fit_exact = r->exact;
        b->fit_method = r->method;
        sf_strategy_copy(b->fit_s, b->try_s);
    }
    if (!b->have_fit && e->over < b->least.over) {
        b->least = *e;
        b->least_lambda = lambda;
        b->least_exact = r->exact;
        b->least_method = r->method;
        sf_strategy_copy(b->out, b->try_s);
    }
    return SF_OK;
}

/* The fastest answer (in out, judged in *e0) does not fit: search multipliers
 * for the fastest one that fits (docs/search.md, "OptCNN under memory").
 * Each solve's answer is a vertex of the lower convex hull of the space's
 * (proxy, time) points. First the multiplier grows by 8 from time / proxy of
 * the fastest answer until an answer fits (or the proxy stops falling: the
 * least memory the space has); then, between the last answer that does not
 * fit (A) and the first that does (B), the multiplier at which both cost the
 * same, (T_B - T_A) / (P_A - P_B): an answer cheaper there is a hull vertex
 * between them, which replaces A or B; none means A and B are neighbours on
 * the hull and B is the fastest fitting vertex. */
static sf_status bound_search(oc_bound *b, const oc_mem *e0, sf_optcnn_result *r, sf_error *err) {
    b->least = *e0;
    b->least_lambda = 0;
    b->least_exact = r->exact;
    b->least_method = r->method;
    double lam = e0->proxy > 0 ? e0->time / e0->proxy : 1e-12;
    if (!(lam > 0) || !isfinite(lam)) lam = 1e-12;
    oc_mem A = *e0, B, C;
    int same = 0, found = 0;
    sf_status st = SF_OK;
    for (int i = 0; i < OC_LAMBDA_UP; i++, lam *= 8) {
        st = bound_try(b, lam, r, &C, err);
        if (st != SF_OK) return st;
        if (C.fits) {
            B = C;
            found = 1;
            break;
        }
        /* the proxy no longer falls: the least memory of the space is reached */
        same = C.proxy >= A.proxy ? same + 1 : 0;
        A = C;
        if (same >= 3) break;
    }
    if (!found) return SF_OK;
    for (int i = 0; i < OC_HULL_STEPS && A.proxy > B.proxy; i++) {
        double mid = (B.time - A.time) / (A.proxy - B.proxy);
        if (!(mid > 0) || !isfinite(mid)) break;
        st = bound_try(b, mid, r, &C, err);
        if (st != SF_OK) return st;
        double va = A.time + mid * A.proxy;
        if (C.time + mid * C.proxy >= va - OC_HULL_REL * fabs(va)) break; /* on A-B */
        if (C.fits)
            B = C;
        else
            A = C;
    }
    return SF_OK;
}

sf_status sf_optcnn_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                           const sf_optcnn_options *o, sf_strategy *out, sf_optcnn_result *r,
                           sf_error *err) {
    double t0 = sf_now_s();
    if (!g || !m || !cm || !out)
        return sf_error_set(err, SF_ERR_INVALID,
                            "optcnn: graph, machine, cost model and output "
                            "strategy are required");
    if (sf_strategy_num_ops(out) != sf_graph_num_ops(g))
        return sf_error_set(err, SF_ERR_INVALID,
                            "optcnn: the strategy has %d operators, the graph %d",
                            sf_strategy_num_ops(out), sf_graph_num_ops(g));
    sf_status dst = sf_machine_check_dtype(m, sf_cost_dtype(cm), err);
    if (dst != SF_OK) return dst;
    sf_optcnn_options def;
    if (!o) {
        sf_optcnn_options_default(&def);
        o = &def;
    }
    if (o->max_configs < 0 || o->max_left < 0)
        return sf_error_set(err, SF_ERR_RANGE, "optcnn: max_configs and max_left must be >= 0");
    if (!(o->memory_headroom >= 0 && o->memory_headroom < 1))
        return sf_error_set(err, SF_ERR_RANGE, "optcnn: memory headroom %g is not in [0, 1)",
                            o->memory_headroom);
    sf_optcnn_result local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    r->method = "elimination";
    int n = sf_graph_num_ops(g);
    r->nodes_initial = n;
    r->exact = 1;

    dp s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.m = m;
    s.cm = cm;
    s.n_nodes = n;
    sf_status st = SF_OK;
    oc_scratch sc;
    memset(&sc, 0, sizeof sc);
    oc_bound b;
    memset(&b, 0, sizeof b);
    sf_sim *sim = NULL;
    int n_dev = sf_machine_num_devices(m);
    size_t nk = (size_t)(n_dev > 0 ? n_dev : 1) * SF_SIM_MEM_KIND_COUNT;
    double *kinds = calloc(nk, sizeof *kinds);
    s.arena = sf_arena_new((size_t)1 << 22);
    if (!kinds || !s.arena || oc_scratch_init(&sc, g, m, cm, o->scheme) != SF_OK) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory starting the OptCNN search");
        goto done;
    }
    s.cand = sf_arena_calloc(s.arena, (size_t)(n ? n : 1), sizeof *s.cand);
    s.nodes = sf_arena_calloc(s.arena, (size_t)(n ? n : 1), sizeof *s.nodes);
    s.recs = sf_arena_calloc(s.arena, (size_t)(n ? n : 1), sizeof *s.recs);
    s.queue = sf_arena_calloc(s.arena, (size_t)(n ? n : 1), sizeof *s.queue);
    s.inq = sf_arena_calloc(s.arena, (size_t)(n ? n : 1), 1);
    if (!s.cand || !s.nodes || !s.recs || !s.queue || !s.inq) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory starting the OptCNN search");
        goto done;
    }
    st = oc_candidates(g, m, cm, o, s.arena, s.cand, err);
    if (st != SF_OK) goto done;
    s.max_n = 1;
    for (int i = 0; i < n; i++) {
        dp_node *nd = &s.nodes[i];
        nd->n = s.cand[i].n;
        if (nd->n > s.max_n) s.max_n = nd->n;
        double *tv = sf_arena_calloc(s.arena, (size_t)nd->n, sizeof *tv);
        if (!tv) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory computing node costs");
            goto done;
        }
        for (int c = 0; c < nd->n; c++) {
            oc_cfg_get(&s.cand[i].cfg[c], &s.cfg_a);
            tv[c] = oc_node_cost(&sc, i, &s.cfg_a);
            if (isnan(tv[c])) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory computing node costs");
                goto done;
            }
        }
        nd->tvec = tv;
    }
    s.tmp_a = sf_arena_calloc(s.arena, (size_t)s.max_n * (size_t)s.max_n, sizeof *s.tmp_a);
    s.tmp_b = sf_arena_calloc(s.arena, (size_t)s.max_n * (size_t)s.max_n, sizeof *s.tmp_b);
    if (!s.tmp_a || !s.tmp_b) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory for elimination scratch");
        goto done;
    }
    st = build_edges(&s, &sc, err);
    if (st == SF_OK && sc.nomem)
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory computing edge costs");
    if (st != SF_OK) goto done;

    /* the fastest answer: the dynamic program over time alone */
    st = dp_solve(&s, 0, o, r, err);
    if (st != SF_OK) goto done;
    for (int i = 0; i < n; i++)
        oc_cfg_get(&s.cand[i].cfg[s.nodes[i].choice], sf_strategy_config(out, i));
    r->cost_s = s.constant;
    r->solves = 1;
    oc_mem e0;
    {
        /* Same answer by another route: the additive cost of the strategy found
         * (oc_eval sums sf_optcnn_cost's terms in its order), and its memory. */
        oc_eval(&sc, out, &e0.time, &e0.proxy, kinds);
        if (isnan(e0.time)) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory pricing the answer");
            goto done;
        }
        if (!(fabs(e0.time - r->cost_s) <= OC_CHECK_REL * fabs(e0.time))) {
            st = sf_error_set(err, SF_ERR_INTERNAL,
                              "optcnn: optimum %.9g differs from the cost of its strategy %.9g",
                              r->cost_s, e0.time);
            goto done;
        }
        if (o->timeline) {
            sf_sim_options so = o->sim;
            so.memory_timeline = 1;
            so.memory_headroom = o->memory_headroom;
            so.keep_schedule = 0;
            sim = sf_sim_new(g, m, cm, &so, err);
            if (!sim) {
                st = err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
                goto done;
            }
        }
        int judged = sim_kinds(sim, out, kinds, n_dev);
        if (judged < 0) {
            st = sf_error_set(err, SF_ERR_NOMEM, "optcnn: could not simulate the answer's memory");
            goto done;
        }
        r->timeline = judged;
        mem_judge(m, o->memory_headroom, kinds, &e0);
    }
    r->fastest_cost_s = r->cost_s;
    r->fastest_peak_bytes = e0.peak;
    if (o->memory_bound && !e0.fits) {
        /* the node memories, then multipliers until the fastest fitting answer */
        for (int i = 0; i < n && st == SF_OK; i++) {
            dp_node *nd = &s.nodes[i];
            double *mv = sf_arena_calloc(s.arena, (size_t)nd->n, sizeof *mv);
            if (!mv) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory computing node memory");
                goto done;
            }
            for (int c = 0; c < nd->n; c++) {
                oc_cfg_get(&s.cand[i].cfg[c], &s.cfg_a);
                mv[c] = oc_node_mem(&sc, i, &s.cfg_a, NULL);
                if (isnan(mv[c])) {
                    st = sf_error_set(err, SF_ERR_NOMEM, "out of memory computing node memory");
                    goto done;
                }
            }
            nd->mvec = mv;
        }
        b.s = &s;
        b.sc = &sc;
        b.o = o;
        b.out = out;
        b.kinds = kinds;
        b.sim = sim;
        b.solves = 1;
        b.try_s = sf_strategy_new(g);
        b.fit_s = sf_strategy_new(g);
        if (!b.try_s || !b.fit_s) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory for the memory bound");
            goto done;
        }
        st = bound_search(&b, &e0, r, err);
        if (st != SF_OK) goto done;
        const oc_mem *e = b.have_fit ? &b.fit : &b.least;
        if (b.have_fit) sf_strategy_copy(out, b.fit_s);
        r->bounded = 1;
        r->solves = b.solves;
        r->lambda = b.have_fit ? b.fit_lambda : b.least_lambda;
        r->exact = b.have_fit ? b.fit_exact : b.least_exact;
        r->method = b.have_fit ? b.fit_method : b.least_method;
        r->cost_s = e->time;
        /* the answer's memory by kind, once more (kinds holds the last solve's) */
        memset(kinds, 0, nk * sizeof *kinds);
        oc_eval(&sc, out, &e0.time, &e0.proxy, kinds);
        r->timeline = sim_kinds(sim, out, kinds, n_dev) > 0;
        mem_judge(m, o->memory_headroom, kinds, &e0);
    }
    r->peak_mem_bytes = e0.peak;
    r->mem_cap_bytes = e0.cap;
    r->fits = e0.fits;
    r->peak_device = e0.dev;
    for (int j = 0; j < SF_SIM_MEM_KIND_COUNT; j++)
        r->peak_kinds[j] = kinds[(size_t)e0.dev * SF_SIM_MEM_KIND_COUNT + j];
done:
    sf_sim_free(sim);
    sf_strategy_free(b.try_s);
    sf_strategy_free(b.fit_s);
    free(kinds);
    oc_scratch_free(&sc);
    sf_arena_free(s.run);
    sf_arena_free(s.arena);
    r->seconds = sf_now_s() - t0;
    return st;
}
