/*
 * OptCNN tests: the additive cost model against a hand computation; the dynamic
 * program against brute force (sf_exhaustive_search, additive model) on many
 * random small graphs - series-parallel ones, which elimination must reduce to
 * nothing, and arbitrary DAGs with repeated inputs, where branch and bound
 * finishes the job - on 2- and 4-device machines with one and two nodes; the
 * reduction of chains and of Inception-v3; OptCNN beating data parallelism under
 * its own model on AlexNet and VGG-16; a recurrent graph that does not reduce;
 * the simulator-priced exhaustive search; argument errors and options.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define REL_EQ(a, b) (fabs((a) - (b)) <= 1e-12 * fmax(fabs(a), fabs(b)))

static sf_machine *machine_subset(int n) {
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("p100-4x4", &err);
    assert_non_null(full);
    sf_machine *m = sf_machine_subset(full, n, &err);
    assert_non_null(m);
    sf_machine_free(full);
    return m;
}

/* Two nodes of two devices: routes of one (NVLink) and two or more links (NICs). */
static sf_machine *machine_2x2(double mem_bytes) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, &err), SF_OK);
    d.nodes = 2;
    d.devices_per_node = 2;
    if (mem_bytes > 0) d.kind.mem_bytes = mem_bytes;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    return m;
}

/* ---- random graphs ------------------------------------------------------------ */

typedef struct gen {
    sf_graph *g;
    sf_rng *rng;
    int conv;  /* 1: (4, 4, 1, 4) tensors and conv2d; 0: (8, 6) and linear */
    int n;     /* operators added */
    int t[64]; /* operators whose output has the common shape */
    int nt;
} gen;

static int add(gen *G, sf_op_type type, const sf_op_params *p, const int *in, int n_in) {
    sf_error err = {0};
    char name[32];
    snprintf(name, sizeof name, "op%d", G->n++);
    sf_tensor_ref refs[4];
    for (int i = 0; i < n_in; i++) refs[i] = (sf_tensor_ref){in[i], 0};
    sf_op_params def;
    if (!p) {
        sf_op_params_default(type, &def);
        p = &def;
    }
    int id = sf_graph_add_op(G->g, type, name, p, refs, n_in, &err);
    if (id < 0) fail_msg("%s", err.msg);
    return id;
}

/* The operator that maps a tensor back to the common shape: conv2d 1x3 to 4
 * channels, or linear to 6 features. */
static int layer(gen *G, int x) {
    sf_op_params p;
    if (G->conv) {
        sf_op_params_default(SF_OP_CONV2D, &p);
        p.conv2d.out_channels = 4;
        p.conv2d.kernel[0] = 1;
        p.conv2d.kernel[1] = 3;
        p.conv2d.padding[1] = 1;
        return add(G, SF_OP_CONV2D, &p, &x, 1);
    }
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 6;
    return add(G, SF_OP_LINEAR, &p, &x, 1);
}

static int unary(gen *G, int x) {
    return sf_rng_below(G->rng, 2) ? layer(G, x) : add(G, SF_OP_RELU, NULL, &x, 1);
}

/* Join two tensors: add, or concat on channels/features then a layer (two ops). */
static int join(gen *G, int a, int b) {
    int in[2] = {a, b};
    if (sf_rng_below(G->rng, 2)) return add(G, SF_OP_ADD, NULL, in, 2);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = 1;
    return layer(G, add(G, SF_OP_CONCAT, &p, in, 2));
}

static void gen_init(gen *G, sf_rng *rng, int conv) {
    memset(G, 0, sizeof *G);
    G->g = sf_graph_new("random");
    G->rng = rng;
    G->conv = conv;
    sf_error err = {0};
    sf_shape s =
        conv ? sf_shape_make(4, (int64_t[]){4, 4, 1, 4}) : sf_shape_make(2, (int64_t[]){8, 6});
    G->t[G->nt++] = sf_graph_add_input(G->g, "x", &s, 0, &err);
    G->n = 1;
}

/* Series-parallel: a chain of steps, each a unary op or a diamond (two short
 * branches from the current tensor, joined). */
static sf_graph *random_sp(sf_rng *rng, int conv, int max_ops) {
    gen G;
    gen_init(&G, rng, conv);
    int cur = G.t[0];
    while (G.n < max_ops) {
        if (G.n + 4 <= max_ops && sf_rng_below(rng, 2)) {
            int a = unary(&G, cur), b = sf_rng_below(rng, 3) ? unary(&G, cur) : cur;
            cur = join(&G, a, b);
        } else {
            cur = unary(&G, cur);
        }
    }
    return G.g;
}

/* Any DAG: ops add two random earlier tensors (possibly the same one twice, which
 * gives parallel edges), concatenate three (then a layer), or apply a unary op;
 * dense enough that many graphs hold a K4 minor and elimination leaves work for
 * branch and bound. */
static sf_graph *random_dag(sf_rng *rng, int conv, int n_ops) {
    gen G;
    gen_init(&G, rng, conv);
    G.t[G.nt++] = unary(&G, G.t[0]);
    while (G.n < n_ops) {
        int a = G.t[sf_rng_below(rng, (uint64_t)G.nt)], b = G.t[sf_rng_below(rng, (uint64_t)G.nt)];
        int c = G.t[sf_rng_below(rng, (uint64_t)G.nt)], id, r = (int)sf_rng_below(rng, 4);
        if (r == 0 && G.n + 2 <= n_ops) {
            sf_op_params p;
            sf_op_params_default(SF_OP_CONCAT, &p);
            p.concat.axis = 1;
            id = layer(&G, add(&G, SF_OP_CONCAT, &p, (int[]){a, b, c}, 3));
        } else if (r <= 2) {
            id = add(&G, SF_OP_ADD, NULL, (int[]){a, b}, 2);
        } else {
            id = unary(&G, a);
        }
        G.t[G.nt++] = id;
    }
    return G.g;
}

/* A rugged cost model: task times drawn from a hash of the operator, the tile and
 * the pass, on the scale of the small graphs' transfers (microseconds), so that
 * local moves get stuck and only an exact search finds the optimum. */
static double hashed_task_s(void *self, const sf_op *op, const sf_tile *t,
                            const sf_device_kind *kind, sf_pass pass) {
    (void)self;
    (void)kind;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)op->id * 0x100000001b3ull ^ (uint64_t)pass;
    for (int d = 0; d < t->ndim; d++) {
        h = (h ^ (uint64_t)t->lo[d]) * 0xff51afd7ed558ccdull;
        h = (h ^ (uint64_t)t->hi[d]) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    return 1e-6 * (double)(h % 97) / 8.0;
}
static void hashed_free(void *self) { (void)self; }
static const sf_cost_model_vtable hashed_vt = {"hashed", hashed_task_s, hashed_free, NULL};

/* DP against brute force on one graph; returns 0 when the space was too big to
 * compare, 1 when compared, 2 when compared and elimination left nodes. */
static int check_against_exhaustive(sf_graph *g, sf_machine *m, int rugged, int expect_reduced) {
    sf_error err = {0};
    sf_cost_model rug = {&hashed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_cost_model *cm = rugged ? &rug : sf_cost_analytic_new(m, NULL);
    sf_strategy *dp = sf_strategy_new(g), *bf = sf_strategy_new(g);
    double best = 0;
    sf_status st = sf_exhaustive_search(g, m, cm, 0, 60000, bf, &best, &err);
    int compared = 0;
    if (st == SF_OK) {
        sf_optcnn_result r;
        assert_int_equal(sf_optcnn_search(g, m, cm, NULL, dp, &r, &err), SF_OK);
        assert_int_equal(sf_strategy_validate(dp, g, m, &err), SF_OK);
        assert_int_equal(r.exact, 1);
        assert_int_equal(r.nodes_initial, sf_graph_num_ops(g));
        if (expect_reduced) {
            assert_int_equal(r.nodes_left, 0);
            assert_int_equal(r.edges_left, 0);
        }
        double c_dp = sf_optcnn_cost(g, m, cm, NULL, dp);
        double c_bf = sf_optcnn_cost(g, m, cm, NULL, bf);
        if (!REL_EQ(r.cost_s, best))
            fail_msg("dp %.17g vs exhaustive %.17g (%d ops, %d left)", r.cost_s, best,
                     sf_graph_num_ops(g), r.nodes_left);
        assert_true(REL_EQ(c_dp, r.cost_s));
        assert_true(c_bf == best); /* the oracle prices with sf_optcnn_cost's arithmetic */
        compared = r.nodes_left > 0 ? 2 : 1;
    } else {
        assert_int_equal(st, SF_ERR_RANGE);
    }
    sf_strategy_free(dp);
    sf_strategy_free(bf);
    if (!rugged) sf_cost_free(cm);
    return compared;
}

static void test_dp_equals_exhaustive_series_parallel(void **state) {
    (void)state;
    sf_machine *ms[3] = {machine_subset(2), machine_subset(4), machine_2x2(0)};
    sf_rng rng;
    sf_rng_seed(&rng, 1234);
    int compared = 0;
    for (int it = 0; it < 200; it++) {
        sf_machine *m = ms[it % 3];
        int conv = (it / 3) % 2;
        int max_ops = 3 + (int)sf_rng_below(&rng, 6);
        sf_graph *g = random_sp(&rng, conv, max_ops);
        compared += check_against_exhaustive(g, m, it % 2, 1) > 0;
        sf_graph_free(g);
    }
    assert_true(compared >= 120);
    for (int i = 0; i < 3; i++) sf_machine_free(ms[i]);
}

static void test_dp_equals_exhaustive_random_dags(void **state) {
    (void)state;
    sf_machine *ms[3] = {machine_subset(2), machine_subset(4), machine_2x2(0)};
    sf_rng rng;
    sf_rng_seed(&rng, 99);
    int compared = 0, left = 0;
    for (int it = 0; it < 300; it++) {
        sf_machine *m = ms[it % 3];
        int conv = (it / 3) % 2;
        sf_graph *g = random_dag(&rng, conv, 3 + (int)sf_rng_below(&rng, 6));
        int c = check_against_exhaustive(g, m, it % 2, 0);
        compared += c > 0;
        left += c == 2;
        sf_graph_free(g);
    }
    assert_true(compared >= 180);
    assert_true(left >= 10); /* branch and bound had work to do */
    for (int i = 0; i < 3; i++) sf_machine_free(ms[i]);
}

/* A graph that elimination cannot finish: x feeds a, b, c, d and they all meet
 * pairwise (K4 among a..d), so branch and bound solves what is left. */
static void test_dp_branch_and_bound(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 5);
    gen G;
    gen_init(&G, &rng, 0);
    int x = G.t[0];
    int a = add(&G, SF_OP_RELU, NULL, &x, 1);
    int b = add(&G, SF_OP_ADD, NULL, (int[]){a, x}, 2);
    int c = add(&G, SF_OP_ADD, NULL, (int[]){a, b}, 2);
    int d = add(&G, SF_OP_ADD, NULL, (int[]){c, b}, 2);
    add(&G, SF_OP_ADD, NULL, (int[]){d, a}, 2);
    sf_machine *m = machine_2x2(0);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(G.g);
    sf_optcnn_result r;
    sf_error err = {0};
    assert_int_equal(sf_optcnn_search(G.g, m, cm, NULL, s, &r, &err), SF_OK);
    assert_true(r.nodes_left >= 4);
    assert_int_equal(r.exact, 1);
    assert_int_equal(check_against_exhaustive(G.g, m, 0, 0), 2);
    assert_int_equal(check_against_exhaustive(G.g, m, 1, 0), 2);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(G.g);
}

/* ---- the additive model by hand -------------------------------------------------- */

static void test_cost_by_hand(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = machine_2x2(0);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_graph *g = sf_graph_new("two");
    sf_shape s = sf_shape_make(2, (int64_t[]){8, 6});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 10;
    int y = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    assert_true(y > 0);
    const sf_op *ox = sf_graph_op(g, x), *oy = sf_graph_op(g, y);
    sf_strategy *st = sf_strategy_new(g);
    /* x whole on device 0; fc split on samples over devices 0 and 2 (other node) */
    sf_config *cy = sf_strategy_config(st, y);
    assert_int_equal(sf_config_set_degrees(cy, 2, (int[]){2, 1}), SF_OK);
    cy->device[0] = 0;
    cy->device[1] = 2;
    sf_tile tx = sf_tile_full(&ox->space), t0, t1;
    sf_config_part_tile(oy, cy, 0, &t0);
    sf_config_part_tile(oy, cy, 1, &t1);
    double node_x = sf_cost_task_s(cm, ox, &tx, 0, SF_PASS_FWD);
    double c0 =
        sf_cost_task_s(cm, oy, &t0, 0, SF_PASS_FWD) + sf_cost_task_s(cm, oy, &t0, 0, SF_PASS_BWD);
    double c1 =
        sf_cost_task_s(cm, oy, &t1, 2, SF_PASS_FWD) + sf_cost_task_s(cm, oy, &t1, 2, SF_PASS_BWD);
    /* both replicas hold the whole weight: ring of 2 over 0 <-> 2, a
     * reduce-scatter and an all-gather, each holding every link of both
     * positions' routes at once for one latency and half the shard, as the
     * simulator runs them: each costs its slowest link */
    double shard = (double)oy->n_params * SF_ELEM_BYTES;
    double half = 0;
    for (int dir = 0; dir < 2; dir++) {
        sf_route r;
        sf_machine_route(m, dir ? 2 : 0, dir ? 0 : 2, &r);
        for (int i = 0; i < r.n_links; i++) {
            sf_link lb;
            const sf_link *l = sf_machine_link(m, r.links[i], &lb);
            half = fmax(half, l->latency_s + 0.5 * shard / l->bandwidth_Bps);
        }
    }
    double sync = 2 * half;
    /* each replica updates the shard (priced on the first part's tile) */
    double upd = fmax(sf_cost_task_s(cm, oy, &t0, 0, SF_PASS_UPDATE),
                      sf_cost_task_s(cm, oy, &t0, 2, SF_PASS_UPDATE));
    /* device 2 receives rows 4..8 of x: 4 x 6 floats; no gradient flows to an input */
    double xfer = sf_machine_transfer_time_s(m, 0, 2, 4 * 6 * 4.0);
    double want = node_x + fmax(c0, c1) + sync + upd + xfer;
    double got = sf_optcnn_cost(g, m, cm, NULL, st);
    assert_true(fabs(got - want) <= 1e-12 * want);
    /* a parameter server on device 0 (the first part's): the gradient from 2 in,
     * the shard back out, and only the server updates */
    sf_optcnn_options po;
    sf_optcnn_options_default(&po);
    po.scheme = SF_SCHEME_PS;
    double ps = sf_machine_transfer_time_s(m, 2, 0, shard) +
                sf_machine_transfer_time_s(m, 0, 2, shard);
    double want_ps =
        node_x + fmax(c0, c1) + ps + sf_cost_task_s(cm, oy, &t0, 0, SF_PASS_UPDATE) + xfer;
    double got_ps = sf_optcnn_cost(g, m, cm, &po, st);
    assert_true(fabs(got_ps - want_ps) <= 1e-12 * want_ps);
    /* a second layer reading x with fc's weights, as unrolled RNN steps share
     * theirs, in the same config: one group, synced and updated once */
    sf_graph *g2 = sf_graph_new("shared");
    int x2 = sf_graph_add_input(g2, "x", &s, 0, &err);
    int y2 = sf_graph_add_op(g2, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x2, 0}}, 1, &err);
    int z2 = sf_graph_add_op(g2, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{x2, 0}}, 1, &err);
    assert_int_equal(sf_graph_share_weights(g2, z2, y2, &err), SF_OK);
    sf_strategy *st2 = sf_strategy_new(g2);
    *sf_strategy_config(st2, y2) = *cy;
    *sf_strategy_config(st2, z2) = *cy;
    double want2 = node_x + 2 * (fmax(c0, c1) + xfer) + sync + upd;
    double got2 = sf_optcnn_cost(g2, m, cm, NULL, st2);
    assert_true(fabs(got2 - want2) <= 1e-12 * want2);
    sf_strategy_free(st2);
    sf_graph_free(g2);
    /* a bad strategy has no cost */
    cy->device[1] = 99;
    assert_true(isnan(sf_optcnn_cost(g, m, cm, NULL, st)));
    sf_strategy_free(st);
    sf_graph_free(g);
    sf_cost_free(cm);
    sf_machine_free(m);
}

/* OptCNN prices a layer as the simulator does (the task graph's steps through
 * the one pricing function) on a machine of the kind calibrate writes: two
 * ranks sharing one core, priced copies, an all-reduce curve. A data-parallel
 * linear layer fed by its input in place: in bulk mode the simulator's
 * schedule is a chain (the core runs both ranks' forward, backward, packing,
 * unpacking and update in turn; the ring between), so its makespan is the
 * additive cost, for ring and parameter server alike. */
static void test_layer_equals_simulator_calibrated(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("cpu", &d, &err), SF_OK);
    d.nodes = 1;
    d.devices_per_node = 2;
    d.cores_per_node = 1;
    d.copy_bw_Bps = 7e9;
    d.n_sync = 2;
    d.sync_bytes[0] = 4096;
    d.sync_bw_Bps[0] = 0.8e9;
    d.sync_bytes[1] = 1 << 26;
    d.sync_bw_Bps[1] = 2.5e9;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_graph *g = sf_graph_new("layer");
    sf_shape xs = sf_shape_make(2, (int64_t[]){64, 300});
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 200;
    int y = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    assert_true(x >= 0 && y > 0);
    sf_strategy *st = sf_strategy_new(g);
    for (int op = 0; op < 2; op++) {
        sf_config *c = sf_strategy_config(st, op);
        assert_int_equal(sf_config_set_degrees(c, 2, (int[]){2, 1}), SF_OK);
        c->device[0] = 0;
        c->device[1] = 1;
    }
    for (int scheme = SF_SCHEME_RING; scheme <= SF_SCHEME_PS; scheme++) {
        sf_optcnn_options po;
        sf_optcnn_options_default(&po);
        po.scheme = (sf_sync_scheme)scheme;
        double additive = sf_optcnn_cost(g, m, cm, &po, st);
        sf_sim_options so;
        sf_sim_options_default(&so);
        so.sync = SF_SYNC_BULK;
        so.scheme = (sf_sync_scheme)scheme;
        sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
        assert_non_null(sim);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, st, &r, &err), SF_OK);
        if (!(fabs(additive - r.iter_s) <= 1e-9 * r.iter_s))
            fprintf(stderr, "%s: optcnn %.12g, simulated %.12g\n",
                    sf_sync_scheme_name((sf_sync_scheme)scheme), additive, r.iter_s);
        assert_true(fabs(additive - r.iter_s) <= 1e-9 * r.iter_s);
        sf_sim_free(sim);
    }
    sf_strategy_free(st);
    sf_graph_free(g);
    sf_cost_free(cm);
    sf_machine_free(m);
}

/* ---- reduction of real graphs ------------------------------------------------------ */

static void test_chain_reduces_to_nothing(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 3);
    gen G;
    gen_init(&G, &rng, 1);
    int cur = G.t[0];
    for (int i = 0; i < 12; i++) cur = unary(&G, cur);
    sf_machine *m = machine_subset(4);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(G.g);
    sf_optcnn_result r;
    sf_error err = {0};
    assert_int_equal(sf_optcnn_search(G.g, m, cm, NULL, s, &r, &err), SF_OK);
    assert_int_equal(r.nodes_initial, 13);
    assert_int_equal(r.nodes_left, 0);
    assert_int_equal(r.exact, 1);
    /* deterministic: the same answer twice */
    sf_strategy *s2 = sf_strategy_new(G.g);
    sf_optcnn_result r2;
    assert_int_equal(sf_optcnn_search(G.g, m, cm, NULL, s2, &r2, &err), SF_OK);
    for (int i = 0; i < 13; i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(s2, i)));
    assert_true(r.cost_s == r2.cost_s);
    sf_strategy_free(s);
    sf_strategy_free(s2);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(G.g);
}

typedef struct zoo_run {
    sf_optcnn_result r;
    double dp_cost, data_cost;
} zoo_run;

static void run_zoo(const char *model, const char *machine, zoo_run *z) {
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    sf_graph *g = sf_model_build(model, &mo, &err);
    assert_non_null(g);
    sf_machine *m = sf_machine_preset(machine, &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(g), *data = sf_strategy_new(g);
    assert_int_equal(sf_optcnn_search(g, m, cm, NULL, s, &z->r, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    assert_int_equal(sf_strategy_data(data, g, m), SF_OK);
    z->dp_cost = sf_optcnn_cost(g, m, cm, NULL, s);
    z->data_cost = sf_optcnn_cost(g, m, cm, NULL, data);
    assert_true(REL_EQ(z->dp_cost, z->r.cost_s));
    /* data parallelism is in OptCNN's space, so the optimum is never worse */
    assert_true(z->r.cost_s <= z->data_cost * (1 + 1e-12));
    sf_strategy_free(s);
    sf_strategy_free(data);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Inception modules are series-parallel: elimination leaves nothing (observed 0
 * nodes on p100-4x4; the bound leaves room for a zoo that nests branches). */
static void test_inception_reduces(void **state) {
    (void)state;
    zoo_run z;
    run_zoo("inception_v3", "p100-4x4", &z);
    assert_true(z.r.nodes_initial > 300);
    assert_true(z.r.nodes_left <= 4);
    assert_int_equal(z.r.exact, 1);
}

static void test_beats_data_parallel(void **state) {
    (void)state;
    const char *models[] = {"alexnet", "vgg16"};
    for (int i = 0; i < 2; i++) {
        zoo_run z;
        run_zoo(models[i], "p100-4x4", &z);
        assert_int_equal(z.r.exact, 1);
        assert_true(z.r.cost_s < z.data_cost * 0.95);
    }
}

/* An unrolled RNN: the split and concat hubs over the time chunks leave a core
 * that elimination cannot remove; the answer is still a valid strategy. */
static void test_rnn_does_not_reduce(void **state) {
    (void)state;
    zoo_run z;
    run_zoo("rnnlm", "p100-4x4", &z);
    assert_true(z.r.nodes_left > 0);
    assert_true(z.r.edges_left >= z.r.nodes_left);
    assert_non_null(z.r.method);
    assert_true(z.r.exact == 0 || z.r.exact == 1);
}

/* ---- exhaustive search with the simulator, options and errors ------------------------- */

static void test_exhaustive_simulator(void **state) {
    (void)state;
    sf_error err = {0};
    sf_rng rng;
    sf_rng_seed(&rng, 11);
    sf_graph *g = random_sp(&rng, 0, 4);
    sf_machine *m = machine_subset(2);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *best = sf_strategy_new(g), *data = sf_strategy_new(g);
    double best_s = 0;
    assert_int_equal(sf_exhaustive_search(g, m, cm, 1, 100000, best, &best_s, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(best, g, m, &err), SF_OK);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result res;
    assert_int_equal(sf_sim_run(sim, best, &res, &err), SF_OK);
    assert_true(res.iter_s == best_s); /* delta updates along the walk equal a full run */
    assert_int_equal(sf_strategy_data(data, g, m), SF_OK);
    assert_int_equal(sf_sim_run(sim, data, &res, &err), SF_OK);
    assert_true(best_s <= res.iter_s);
    sf_sim_free(sim);
    /* too many states */
    assert_int_equal(sf_exhaustive_search(g, m, cm, 0, 10, best, &best_s, &err), SF_ERR_RANGE);
    sf_strategy_free(best);
    sf_strategy_free(data);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_options_and_errors(void **state) {
    (void)state;
    sf_error err = {0};
    sf_rng rng;
    sf_rng_seed(&rng, 21);
    sf_graph *g = random_sp(&rng, 1, 7);
    sf_machine *m = machine_subset(4);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(g);
    sf_optcnn_options o;
    sf_optcnn_options_default(&o);
    assert_int_equal(o.check_memory, 1);
    assert_true(o.max_left > 0);
    sf_optcnn_result full, capped;
    assert_int_equal(sf_optcnn_search(g, m, cm, &o, s, &full, &err), SF_OK);
    /* fewer configs: still valid and consistent, never better than the full space */
    o.max_configs = 2;
    assert_int_equal(sf_optcnn_search(g, m, cm, &o, s, &capped, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    assert_true(REL_EQ(sf_optcnn_cost(g, m, cm, NULL, s), capped.cost_s));
    assert_true(capped.cost_s >= full.cost_s * (1 - 1e-12));
    /* a machine too small for anything still gets an answer */
    sf_machine *tiny = machine_2x2(1.0);
    sf_cost_model *cmt = sf_cost_analytic_new(tiny, NULL);
    sf_optcnn_options_default(&o);
    assert_int_equal(sf_optcnn_search(g, tiny, cmt, &o, s, NULL, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, tiny, &err), SF_OK);
    /* argument errors */
    assert_int_equal(sf_optcnn_search(NULL, m, cm, NULL, s, NULL, &err), SF_ERR_INVALID);
    sf_error_clear(&err);
    sf_graph *other = random_sp(&rng, 0, 3);
    sf_strategy *wrong = sf_strategy_new(other);
    assert_int_equal(sf_optcnn_search(g, m, cm, NULL, wrong, NULL, &err), SF_ERR_INVALID);
    sf_error_clear(&err);
    o.max_left = -1;
    assert_int_equal(sf_optcnn_search(g, m, cm, &o, s, NULL, &err), SF_ERR_RANGE);
    sf_error_clear(&err);
    double c;
    assert_int_equal(sf_exhaustive_search(g, m, cm, 0, 10, wrong, &c, &err), SF_ERR_INVALID);
    assert_true(isnan(sf_optcnn_cost(g, m, cm, NULL, wrong)));
    sf_strategy_free(wrong);
    sf_graph_free(other);
    sf_strategy_free(s);
    sf_cost_free(cmt);
    sf_machine_free(tiny);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* ---- memory --------------------------------------------------------------------- */

/* A machine of one node of n devices of a preset, with mem_bytes each (0: the preset's). */
static sf_machine *machine_node(const char *preset, int n, double mem_bytes) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc(preset, &d, &err), SF_OK);
    d.nodes = 1;
    d.devices_per_node = n;
    if (mem_bytes > 0) d.kind.mem_bytes = mem_bytes;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    return m;
}

static sf_cost_model *cost_for(const sf_machine *m, sf_dtype dtype, sf_optimizer_kind opt) {
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    p.dtype = dtype;
    p.optimizer = opt;
    sf_cost_model *cm = sf_cost_analytic_new(m, &p);
    assert_non_null(cm);
    return cm;
}

static sf_graph *zoo(const char *name, int64_t batch, const int64_t *mlp, int n_mlp) {
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = batch;
    if (strcmp(name, "gpt") == 0) {
        mo.layers = 1;
        mo.hidden = 64;
        mo.heads = 4;
        mo.seq_len = 16;
        mo.vocab = 100;
    }
    for (int i = 0; i < n_mlp; i++) mo.mlp_sizes[i] = mlp[i];
    mo.n_mlp = n_mlp;
    sf_graph *g = sf_model_build(name, &mo, &err);
    if (!g) fail_msg("%s: %s", name, err.msg);
    return g;
}

/* Each device's bytes of the memory model against the simulator's all-at-once
 * count, for data parallelism, OptCNN's answer and random strategies (partial
 * sums and split classes included), under fp32 with SGD and bf16 with Adam. */
static void memory_matches(sf_graph *g, sf_machine *m, sf_cost_model *cm, uint64_t seed) {
    sf_error err = {0};
    int n_dev = sf_machine_num_devices(m);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_strategy *s = sf_strategy_new(g);
    double dev[64], kinds[64 * SF_SIM_MEM_KIND_COUNT];
    assert_true(n_dev <= 64);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    for (int trial = 0; trial < 8; trial++) {
        if (trial == 0) {
            assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
        } else if (trial == 1) {
            assert_int_equal(sf_optcnn_search(g, m, cm, NULL, s, NULL, &err), SF_OK);
        } else {
            for (int i = 0; i < sf_graph_num_ops(g); i++)
                sf_config_random_in(sf_graph_op(g, i), m, SF_OPT_IN_INNER, &rng,
                                    sf_strategy_config(s, i));
            sf_strategy_align_ties(s, g, m);
        }
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            sf_strategy_config(s, i)->zero = sf_strategy_config(s, i)->recompute = 0;
        double peak = sf_optcnn_memory(g, m, cm, NULL, s, dev, kinds);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
        double worst = 0;
        for (int d = 0; d < n_dev; d++) {
            double sum = 0;
            for (int k = 0; k < SF_SIM_MEM_KIND_COUNT; k++)
                sum += kinds[d * SF_SIM_MEM_KIND_COUNT + k];
            if (!(fabs(dev[d] - r.device_mem_bytes[d]) <= 1e-9 * r.device_mem_bytes[d] + 1e-6))
                fail_msg("%s trial %d device %d: model %.17g, simulator %.17g", sf_graph_name(g),
                         trial, d, dev[d], r.device_mem_bytes[d]);
            assert_true(fabs(sum - dev[d]) <= 1e-9 * dev[d] + 1e-6);
            worst = fmax(worst, dev[d]);
        }
        assert_true(peak == worst);
        assert_true(fabs(peak - r.peak_mem_bytes) <= 1e-9 * peak);
    }
    sf_strategy_free(s);
    sf_sim_free(sim);
}

static void test_memory_equals_simulator(void **state) {
    (void)state;
    const int64_t mlp[] = {96, 200, 64, 10};
    const char *names[] = {"mlp", "lenet5", "gpt", "rnnlm"};
    for (int fam = 0; fam < 2; fam++) {
        sf_machine *m = fam ? machine_node("dgx-h100", 4, 0) : machine_2x2(0);
        sf_cost_model *cm = fam ? cost_for(m, SF_DTYPE_BF16, SF_OPTIMIZER_ADAM)
                                : cost_for(m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD);
        for (int k = 0; k < 4; k++) {
            sf_graph *g = zoo(names[k], 8, mlp, k == 0 ? 4 : 0);
            /* rnnlm's steps share their layer's weights: exact when they share a
             * config, as in data parallelism and OptCNN's answer (trials 0, 1) */
            if (k == 3) {
                sf_error err = {0};
                sf_strategy *s = sf_strategy_new(g);
                double dev[4];
                assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
                sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
                sf_sim_result r;
                assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
                sf_optcnn_memory(g, m, cm, NULL, s, dev, NULL);
                for (int d = 0; d < 4; d++)
                    assert_true(fabs(dev[d] - r.device_mem_bytes[d]) <=
                                1e-9 * r.device_mem_bytes[d]);
                sf_sim_free(sim);
                sf_strategy_free(s);
            } else {
                memory_matches(g, m, cm, 100 + (uint64_t)(10 * fam + k));
            }
            sf_graph_free(g);
        }
        sf_cost_free(cm);
        sf_machine_free(m);
    }
}

/* Does every device's bytes of the simulator's all-at-once count stay within
 * its memory less the headroom? */
static int sim_fits(sf_graph *g, sf_machine *m, sf_cost_model *cm, const sf_strategy *s,
                    double headroom, double *peak) {
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    int fits = 1;
    for (int d = 0; d < r.n_devices; d++)
        if (r.device_mem_bytes[d] > sf_machine_device_kind(m, d)->mem_bytes * (1 - headroom))
            fits = 0;
    *peak = r.peak_mem_bytes;
    sf_sim_free(sim);
    return fits;
}

static int same_strategy(const sf_graph *g, const sf_strategy *a, const sf_strategy *b) {
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        if (!sf_config_equal(sf_strategy_get(a, i), sf_strategy_get(b, i))) return 0;
    return 1;
}

/* The memory bound: where the fastest answer fits nothing changes; where it
 * does not and something in the space fits, the answer fits (by the model and
 * by the simulator's count), costs at least the fastest, and is found again
 * bit for bit; where nothing fits, the answer says by how much and what it
 * holds, and holds no more than the fastest. */
static void test_memory_bound(void **state) {
    (void)state;
    sf_error err = {0};
    const int64_t mlp[] = {4096, 4096, 4096, 4096, 4096, 16};
    sf_graph *g = zoo("mlp", 16384, mlp, 6);
    sf_optcnn_options o;
    sf_optcnn_options_default(&o);
    assert_int_equal(o.memory_bound, 1);
    o.memory_headroom = 0.1;
    sf_strategy *fast = sf_strategy_new(g), *s = sf_strategy_new(g), *again = sf_strategy_new(g);
    /* the fastest answer's peak on a machine with room for it */
    sf_machine *big = machine_node("dgx-h100", 4, 0);
    sf_cost_model *cmb = cost_for(big, SF_DTYPE_BF16, SF_OPTIMIZER_ADAM);
    sf_optcnn_result rb, ru;
    assert_int_equal(sf_optcnn_search(g, big, cmb, &o, fast, &rb, &err), SF_OK);
    assert_true(rb.fits && !rb.bounded && rb.solves == 1);
    assert_true(rb.fastest_peak_bytes == rb.peak_mem_bytes && rb.fastest_cost_s == rb.cost_s);
    o.memory_bound = 0;
    assert_int_equal(sf_optcnn_search(g, big, cmb, &o, s, &ru, &err), SF_OK);
    assert_true(same_strategy(g, fast, s) && ru.cost_s == rb.cost_s);
    o.memory_bound = 1;
    double fast_peak = rb.peak_mem_bytes;
    /* the least memory of the space: the answer on a machine where nothing fits */
    sf_machine *tiny = machine_node("dgx-h100", 4, 1e6);
    sf_cost_model *cmt = cost_for(tiny, SF_DTYPE_BF16, SF_OPTIMIZER_ADAM);
    sf_optcnn_result rt;
    assert_int_equal(sf_optcnn_search(g, tiny, cmt, &o, s, &rt, &err), SF_OK);
    assert_true(!rt.fits && rt.bounded);
    assert_true(rt.peak_mem_bytes > rt.mem_cap_bytes);
    assert_true(fabs(rt.mem_cap_bytes - 0.9e6) <= 1e-6);
    assert_true(rt.peak_mem_bytes < fast_peak);
    double sum = 0, top = 0;
    for (int k = 0; k < SF_SIM_MEM_KIND_COUNT; k++) {
        sum += rt.peak_kinds[k];
        top = fmax(top, rt.peak_kinds[k]);
    }
    assert_true(fabs(sum - rt.peak_mem_bytes) <= 1e-9 * sum);
    assert_true(top == rt.peak_kinds[SF_SIM_MEM_WEIGHTS] ||
                top == rt.peak_kinds[SF_SIM_MEM_ACTIVATIONS] ||
                top == rt.peak_kinds[SF_SIM_MEM_RECEIVED]);
    double least = rt.peak_mem_bytes;
    assert_true(least < fast_peak * 0.9); /* room for a machine between the two */
    /* memory between the least and the fastest's: the fastest does not fit, the answer does */
    double mem = (least + 0.25 * (fast_peak - least)) / 0.9;
    sf_machine *mid = machine_node("dgx-h100", 4, mem);
    sf_cost_model *cmm = cost_for(mid, SF_DTYPE_BF16, SF_OPTIMIZER_ADAM);
    sf_optcnn_result rm, rm2;
    assert_int_equal(sf_optcnn_search(g, mid, cmm, &o, s, &rm, &err), SF_OK);
    assert_true(rm.bounded && rm.fits && rm.solves > 1 && rm.lambda > 0);
    assert_true(rm.fastest_peak_bytes > rm.mem_cap_bytes);
    assert_true(fabs(rm.fastest_cost_s - rb.cost_s) <= 1e-12 * rb.cost_s);
    assert_true(rm.peak_mem_bytes <= rm.mem_cap_bytes);
    assert_true(rm.cost_s >= rm.fastest_cost_s);
    assert_true(fabs(sf_optcnn_cost(g, mid, cmm, &o, s) - rm.cost_s) <= 1e-9 * rm.cost_s);
    assert_true(fabs(sf_optcnn_memory(g, mid, cmm, &o, s, NULL, NULL) - rm.peak_mem_bytes) <=
                1e-9 * rm.peak_mem_bytes);
    assert_int_equal(sf_strategy_validate(s, g, mid, &err), SF_OK);
    double sim_peak, fast_sim_peak;
    assert_true(sim_fits(g, mid, cmm, s, 0.1, &sim_peak));
    assert_false(sim_fits(g, mid, cmm, fast, 0.1, &fast_sim_peak));
    /* deterministic */
    assert_int_equal(sf_optcnn_search(g, mid, cmm, &o, again, &rm2, &err), SF_OK);
    assert_true(same_strategy(g, s, again) && rm2.cost_s == rm.cost_s && rm2.solves == rm.solves);
    /* without the bound, the fastest, which does not fit, and says so */
    o.memory_bound = 0;
    assert_int_equal(sf_optcnn_search(g, mid, cmm, &o, again, &ru, &err), SF_OK);
    assert_true(same_strategy(g, fast, again) && !ru.fits && !ru.bounded);
    assert_true(ru.peak_mem_bytes == rm.fastest_peak_bytes);
    /* judged by the simulator's timeline (activation gradients too): the
     * answer's peak and fit are the timeline's */
    o.memory_bound = 1;
    o.timeline = 1;
    sf_optcnn_result rl;
    assert_int_equal(sf_optcnn_search(g, mid, cmm, &o, again, &rl, &err), SF_OK);
    assert_true(rl.timeline && rl.bounded && rl.fits);
    {
        sf_sim_options so;
        sf_sim_options_default(&so);
        so.memory_timeline = 1;
        so.memory_headroom = o.memory_headroom;
        sf_sim *sim = sf_sim_new(g, mid, cmm, &so, &err);
        assert_non_null(sim);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, again, &r, &err), SF_OK);
        assert_true(r.fits);
        assert_true(fabs(r.device_live_bytes[rl.peak_device] - rl.peak_mem_bytes) <=
                    1e-9 * rl.peak_mem_bytes);
        assert_true(rl.peak_kinds[SF_SIM_MEM_ACT_GRADS] > 0); /* the model has none */
        /* the fastest answer's timeline does not fit */
        assert_int_equal(sf_sim_run(sim, fast, &r, &err), SF_OK);
        assert_false(r.fits);
        assert_true(fabs(r.live_peak_bytes - rl.fastest_peak_bytes) <= 1e-9 * r.live_peak_bytes);
        sf_sim_free(sim);
    }
    o.timeline = 0;
    /* a headroom out of range */
    o.memory_headroom = 1;
    assert_int_equal(sf_optcnn_search(g, mid, cmm, &o, again, NULL, &err), SF_ERR_RANGE);
    sf_error_clear(&err);
    sf_strategy_free(fast);
    sf_strategy_free(s);
    sf_strategy_free(again);
    sf_cost_free(cmb);
    sf_cost_free(cmt);
    sf_cost_free(cmm);
    sf_machine_free(big);
    sf_machine_free(tiny);
    sf_machine_free(mid);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_by_hand),
        cmocka_unit_test(test_layer_equals_simulator_calibrated),
        cmocka_unit_test(test_dp_equals_exhaustive_series_parallel),
        cmocka_unit_test(test_dp_equals_exhaustive_random_dags),
        cmocka_unit_test(test_dp_branch_and_bound),
        cmocka_unit_test(test_chain_reduces_to_nothing),
        cmocka_unit_test(test_inception_reduces),
        cmocka_unit_test(test_beats_data_parallel),
        cmocka_unit_test(test_rnn_does_not_reduce),
        cmocka_unit_test(test_exhaustive_simulator),
        cmocka_unit_test(test_options_and_errors),
        cmocka_unit_test(test_memory_equals_simulator),
        cmocka_unit_test(test_memory_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
