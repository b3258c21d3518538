/*
 * Simulator tests: exact hand-computed schedules (two operators on two devices,
 * a multi-hop route, an all-reduce, two transfers contending for one link),
 * invariants (one device = sum of task times; relabelled devices of a symmetric
 * machine; data parallelism with free links), and delta simulation against full
 * simulation over thousands of random single-operator changes.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim/sim_impl.h" /* sim_set_test_limits, sim_layout_consistent */
#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

/* A cost model with round numbers: forward 1 ms, backward 2 ms and update
 * 0.5 ms for a whole operator, scaled by the tile's share; inputs 0.1 ms. */
static double fixed_task_s(void *self, const sf_op *op, const sf_tile *t,
                           const sf_device_kind *kind, sf_pass pass) {
    (void)self;
    (void)kind;
    double frac = (double)sf_tile_numel(t) / (double)sf_shape_numel(&op->space);
    if (op->type == SF_OP_INPUT) return 1e-4 * frac;
    if (pass == SF_PASS_UPDATE) return 0.5e-3;
    return (pass == SF_PASS_FWD ? 1e-3 : 2e-3) * frac;
}
static void fixed_free(void *self) { (void)self; }
static const sf_cost_model_vtable fixed_vt = {"fixed", fixed_task_s, fixed_free, NULL};

static sf_machine *make_machine(int nodes, int per_node, sf_intra_topology topo, double bw,
                                double lat, int pcie_group) {
    sf_machine_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "test");
    d.nodes = nodes;
    d.devices_per_node = per_node;
    snprintf(d.kind.name, sizeof d.kind.name, "dev");
    d.kind.peak_flops[SF_DTYPE_FP32] = 1e12;
    d.kind.mem_bw_Bps = 1e11;
    d.kind.mem_bytes = 1e12;
    d.intra = topo;
    d.intra_bw_Bps = bw;
    d.intra_latency_s = lat;
    d.pcie_group = pcie_group;
    d.pcie_up_bw_Bps = bw;
    d.nics_per_node = 1;
    d.inter_bw_Bps = bw;
    d.inter_latency_s = lat;
    sf_error err = {0};
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fprintf(stderr, "%s\n", err.msg);
    assert_non_null(m);
    return m;
}

static sf_op_params linear_params(int64_t out) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = out;
    return p;
}

/* devs holds n_devs entries, one per part; the loop is bounded by n_devs (not
 * c->n_parts) so the compiler can see every read stays inside the array. */
static void place(sf_strategy *s, int op, int ndim, const int *deg, int n_devs, const int *devs) {
    sf_config *c = sf_strategy_config(s, op);
    assert_int_equal(sf_config_set_degrees(c, ndim, deg), SF_OK);
    assert_int_equal(c->n_parts, n_devs);
    for (int p = 0; p < n_devs; p++) c->device[p] = (int16_t)devs[p];
}

/* The small graphs of the hand-computed cases: input x (4 x 8), then linear
 * layers of 8 outputs: a reading x and, unless b is NULL, b reading a (or x
 * when b_reads_x). */
static sf_graph *small_graph(const char *name, int *x, int *a, int *b, int b_reads_x) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new(name);
    sf_shape xs = sf_shape_make(2, (int64_t[]){4, 8});
    *x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params lp = linear_params(8);
    *a = sf_graph_add_op(g, SF_OP_LINEAR, "a", &lp, (sf_tensor_ref[]){{*x, 0}}, 1, &err);
    if (b) {
        int from = b_reads_x ? *x : *a;
        *b = sf_graph_add_op(g, SF_OP_LINEAR, "b", &lp, (sf_tensor_ref[]){{from, 0}}, 1, &err);
        assert_true(*b >= 0);
    }
    assert_true(*a >= 0);
    return g;
}

#define EPS 1e-12

/* x (4x8) -> a = linear(8) on device 0 -> b = linear(8) on device 1. */
static void test_two_ops_two_devices(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("two", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, b, 2, (int[]){1, 1}, 1, (int[]){1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    /* x.fwd 0.1; a.fwd 1; xfer 10us + 128 B / 1 MB/s = 138 us; b.fwd 1; b.bwd 2;
     * grad 138 us; a.bwd 2; a.update 0.5 (b's update overlaps on device 1). */
    double xfer = 10e-6 + 128.0 / 1e6;
    double expect = 0.1e-3 + 1e-3 + xfer + 1e-3 + 2e-3 + xfer + 2e-3 + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    assert_true(fabs(r.compute_s - 7.1e-3) < EPS);
    assert_int_equal(r.transfer_bytes, 256);
    assert_int_equal(r.sync_bytes, 0);
    assert_true(fabs(r.transfer_s - 2 * xfer) < EPS);
    /* x: 1, a: 2, b: 2, two transfers, two updates */
    assert_int_equal(r.tasks, 1 + 2 + 2 + 2 + 2);
    assert_true(r.fits);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Memory over the schedule of the case above (memory_timeline): on device 0,
 * a's output lives to a's backward task and the gradient b sends back arrives
 * before it; on device 1, the received copy and b's output live to b's
 * backward task, which makes the gradient of its input. Each device's peak is
 * its all-at-once sum plus one 128-byte gradient region, reached when that
 * gradient appears: at b's backward start on 1, at the gradient's transfer
 * on 0. */
static void test_memory_timeline(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("two", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, b, 2, (int[]){1, 1}, 1, (int[]){1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim_options o;
    sf_sim_options_default(&o);
    o.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, &cm, &o, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_non_null(r.device_live_bytes);
    double xfer = 10e-6 + 128.0 / 1e6;
    double b_bwd = 0.1e-3 + 1e-3 + xfer + 1e-3;
    for (int d = 0; d < 2; d++)
        assert_true(r.device_live_bytes[d] == r.device_mem_bytes[d] + 128.0);
    assert_true(fabs(r.device_live_peak_s[1] - b_bwd) < EPS);
    assert_true(fabs(r.device_live_peak_s[0] - (b_bwd + 2e-3)) < EPS);
    assert_true(r.live_peak_bytes == fmax(r.device_live_bytes[0], r.device_live_bytes[1]));
    /* what each peak holds: the one gradient region; device 1 also the copy it received */
    for (int d = 0; d < 2; d++) {
        const double *k = &r.device_live_kinds[d * SF_SIM_MEM_KIND_COUNT];
        double sum = 0;
        for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++) sum += k[i];
        assert_true(sum == r.device_live_bytes[d]);
        assert_true(k[SF_SIM_MEM_ACT_GRADS] == 128.0);
        assert_true(k[SF_SIM_MEM_RECEIVED] == (d == 1 ? 128.0 : 0.0));
        /* device 0 keeps a's output (b's backward reads it); b's output has no
         * reader, which a framework frees at once (sf_graph_output_kept) */
        assert_true(k[SF_SIM_MEM_WEIGHTS] > 0);
        assert_true(d == 0 ? k[SF_SIM_MEM_ACTIVATIONS] > 0 : k[SF_SIM_MEM_ACTIVATIONS] == 0);
    }
    assert_string_equal(sf_sim_mem_kind_name(SF_SIM_MEM_ACT_GRADS), "activation gradients");
    assert_null(sf_sim_mem_kind_name(SF_SIM_MEM_KIND_COUNT));
    assert_true(r.fits);
    /* a headroom that leaves less than the peak: it does not fit */
    sf_sim_free(sim);
    o.memory_headroom = 1.0 - r.live_peak_bytes / 1e12 * 0.99;
    sim = sf_sim_new(g, m, &cm, &o, &err);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_false(r.fits);
    sf_sim_free(sim);
    o.memory_headroom = 1.0;
    assert_null(sf_sim_new(g, m, &cm, &o, &err));
    assert_non_null(strstr(err.msg, "memory headroom"));
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* The same with the runtime's copies priced (copy_bw 1 MB/s): the message is
 * packed on device 0 and unpacked on device 1 (2 x 128 B moved each), its
 * gradient packed on 1 (2 x 128 B) and accumulated on 0 (3 x 128 B). x feeds
 * a in place (a local pair, x's whole tile, a's whole input): no copy. */
static void test_copies_priced(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m0 = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    sf_machine_desc d = *sf_machine_get_desc(m0);
    d.copy_bw_Bps = 1e6;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    int x, a, b;
    sf_graph *g = small_graph("copies", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, b, 2, (int[]){1, 1}, 1, (int[]){1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double xfer = 10e-6 + 128.0 / 1e6, two = 256.0 / 1e6, three = 384.0 / 1e6;
    double expect =
        0.1e-3 + 1e-3 + two + xfer + two + 1e-3 + 2e-3 + two + xfer + three + 2e-3 + 0.5e-3;
    if (fabs(r.iter_s - expect) > EPS) fail_msg("%.9g, expected %.9g", r.iter_s, expect);
    assert_true(fabs(r.compute_s - (7.1e-3 + 3 * two + three)) < EPS);
    assert_int_equal(r.tasks, 1 + 2 + 2 + 2 + 2 + 4);
    double t0[SF_SIM_TOTAL_COUNT], t1[SF_SIM_TOTAL_COUNT];
    assert_int_equal(sf_sim_kind_totals(sim, 0, t0, &err), SF_OK);
    assert_int_equal(sf_sim_kind_totals(sim, 1, t1, &err), SF_OK);
    assert_true(fabs(t0[SF_SIM_TOTAL_COPY] - (two + three)) < EPS);
    assert_true(fabs(t1[SF_SIM_TOTAL_COPY] - 2 * two) < EPS);
    sf_sim_free(sim);
    /* the same strategy without the copy bandwidth: as test_two_ops_two_devices */
    cm.machine = m0;
    sim = sf_sim_new(g, m0, &cm, NULL, &err);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_true(fabs(r.iter_s - (expect - 3 * two - three)) < EPS);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(m0);
}

/* The same on a PCIe tree where devices 0 and 2 sit under different switches:
 * four links, store-and-forward, each latency + bytes / bandwidth. */
static void test_multi_hop_route(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 4, SF_INTRA_PCIE_TREE, 1e6, 10e-6, 2);
    sf_route rt;
    sf_machine_route(m, 0, 2, &rt);
    assert_int_equal(rt.n_links, 4);
    int x, a, b;
    sf_graph *g = small_graph("hop", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, b, 2, (int[]){1, 1}, 1, (int[]){2});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double xfer = 4 * (10e-6 + 128.0 / 1e6);
    double expect = 0.1e-3 + 1e-3 + xfer + 1e-3 + 2e-3 + xfer + 2e-3 + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    assert_int_equal(r.intra_bytes, 2 * 4 * 128);
    assert_int_equal(r.tasks, 1 + 2 + 2 + 8 + 2);
    sf_sim_free(sim);
    /* In 2 segments of 64 bytes the hops pipeline: 4 + 2 - 1 link times of
     * 10 us + 64 B / 1 MB/s each way, and twice the link tasks. */
    sf_sim_options o;
    sf_sim_options_default(&o);
    o.segments = 2;
    sim = sf_sim_new(g, m, &cm, &o, &err);
    assert_non_null(sim);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    xfer = 5 * (10e-6 + 64.0 / 1e6);
    expect = 0.1e-3 + 1e-3 + xfer + 1e-3 + 2e-3 + xfer + 2e-3 + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    assert_int_equal(r.intra_bytes, 2 * 4 * 128);
    assert_int_equal(r.transfer_bytes, 2 * 128);
    assert_int_equal(r.tasks, 1 + 2 + 2 + 16 + 2);
    sf_sim_free(sim);
    /* In 3 segments the pieces are whole bytes, 43, 43 and 42, each 10 us + its
     * bytes / 1 MB/s: the first two take 53 us a link, the last 52 us. The last
     * piece leaves the first link at 106 + 52 = 158 us but waits for the second
     * piece on every later link, and is in at 265 + 52 = 317 us = (4 + 3 - 1) *
     * 53 - 1 us, each way. The bytes add up exactly. */
    o.segments = 3;
    sim = sf_sim_new(g, m, &cm, &o, &err);
    assert_non_null(sim);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    xfer = 317e-6;
    expect = 0.1e-3 + 1e-3 + xfer + 1e-3 + 2e-3 + xfer + 2e-3 + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    assert_int_equal(r.intra_bytes, 2 * 4 * 128);
    assert_int_equal(r.transfer_bytes, 2 * 128);
    assert_int_equal(r.tasks, 1 + 2 + 2 + 24 + 2);
    sf_sim_free(sim);
    o.segments = 0;
    assert_null(sf_sim_new(g, m, &cm, &o, &err));
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Data parallel linear over two devices: a ring all-reduce of its weights. */
static void test_allreduce(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a;
    sf_graph *g = small_graph("ar", &x, &a, NULL, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, x, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    place(s, a, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    /* weights 8*8+8 = 72 floats = 288 bytes; R = 2: each ring edge holds its link
     * for 2(R-1) latencies + 2(R-1)/R * 288 B. Both edges run in parallel. */
    double ar = 2 * 10e-6 + 288.0 / 1e6;
    double expect = 0.05e-3 + 0.5e-3 + 1e-3 + ar + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    assert_int_equal(r.sync_bytes, 2 * 288);
    assert_int_equal(r.transfer_bytes, 0);
    assert_true(fabs(r.sync_s - 2 * ar) < EPS);
    /* memory: weights + grads + momentum on each device */
    assert_true(r.device_mem_bytes[0] >= 288.0 * 3);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* sf_tg_pair.in_place, which the runtime follows (no copy) and the simulator
 * prices (copies of the others): a local pair of whole pieces is read in place,
 * and its gradient accumulated in place when the tensor has no other reader;
 * a piece that covers part of the input is copied; a message is never in place. */
static int edge_in_place(sf_taskgraph *tg, int op, int k, int q) {
    const sf_tg_pair *pr;
    int n = sf_taskgraph_edge(tg, op, k, &pr);
    assert_true(q < n);
    return pr[q].in_place;
}

static void test_in_place(void **state) {
    (void)state;
    sf_error err = {0};
    for (int reads_x = 0; reads_x < 2; reads_x++) {
        int x, a, b;
        sf_graph *g = small_graph("inplace", &x, &a, &b, reads_x);
        sf_strategy *s = sf_strategy_new(g);
        sf_taskgraph *tg = sf_taskgraph_new(g, 2, &err);
        assert_non_null(tg);
        sf_taskgraph_set_strategy(tg, s);
        for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
        /* all on device 0: x feeds a whole; with b reading x too, x has two readers */
        assert_int_equal(edge_in_place(tg, a, 0, 0), reads_x ? 1 : 2);
        /* b on device 1: a message */
        place(s, b, 2, (int[]){1, 1}, 1, (int[]){1});
        sf_taskgraph_set_tiles(tg, b);
        assert_int_equal(edge_in_place(tg, b, 0, 0), 0);
        /* a in two sample halves on device 0, b whole on 0: each half is copied
         * into b's input; a reads x's rows (a part of x's piece): copied too */
        place(s, a, 2, (int[]){2, 1}, 2, (int[]){0, 0});
        place(s, b, 2, (int[]){1, 1}, 1, (int[]){0});
        sf_taskgraph_set_tiles(tg, a);
        sf_taskgraph_set_tiles(tg, b);
        if (!reads_x) {
            assert_int_equal(edge_in_place(tg, b, 0, 0), 0);
            assert_int_equal(edge_in_place(tg, b, 0, 1), 0);
        }
        assert_int_equal(edge_in_place(tg, a, 0, 0), 0);
        sf_taskgraph_free(tg);
        sf_strategy_free(s);
        sf_graph_free(g);
    }
}

/* test_allreduce's data parallelism on a machine whose two devices share one
 * core (cores_per_node 1) and whose all-reduce steps run at 2 MB/s: the core
 * runs both x.fwd (0.05 ms), both a.fwd (0.5), both a.bwd (1), then the ring
 * (2 latencies + 288 B / 2 MB/s), then both updates (0.5). Each device keeps
 * its own task time in sf_sim_kind_totals; device_busy_s is the core's. */
static void test_shared_core(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m0 = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    sf_machine_desc d = *sf_machine_get_desc(m0);
    d.cores_per_node = 1;
    d.n_sync = 1; /* one point: the same rate at every size */
    d.sync_bytes[0] = 1e6;
    d.sync_bw_Bps[0] = 2e6;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    int x, a;
    sf_graph *g = small_graph("core", &x, &a, NULL, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, x, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    place(s, a, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double ar = 2 * 10e-6 + 288.0 / 2e6;
    double expect = 2 * (0.05e-3 + 0.5e-3 + 1e-3) + ar + 2 * 0.5e-3;
    if (fabs(r.iter_s - expect) > EPS) fail_msg("%.9g, expected %.9g", r.iter_s, expect);
    assert_true(fabs(r.device_busy_s[0] - 2 * (0.05e-3 + 0.5e-3 + 1e-3 + 0.5e-3)) < EPS);
    assert_true(r.device_busy_s[1] == 0);
    for (int dev = 0; dev < 2; dev++) {
        double t[SF_SIM_TOTAL_COUNT];
        assert_int_equal(sf_sim_kind_totals(sim, dev, t, &err), SF_OK);
        assert_true(fabs(t[SF_SIM_TOTAL_COMPUTE] - 1.55e-3) < EPS);
        assert_true(fabs(t[SF_SIM_TOTAL_UPDATE] - 0.5e-3) < EPS);
        assert_true(fabs(t[SF_SIM_TOTAL_SYNC] - ar) < EPS);
    }
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(m0);
}

/* A ring of 3 over a shard of 25 floats (x is 3 x 4, a = linear(5): 4*5 + 5
 * weights), which 3 does not divide: the chunks are 9, 8 and 8 floats, and each
 * position sends every chunk but two (reduce-scatter and all-gather each skip
 * one): 50 - 16 = 34 floats from device 0, 50 - 17 = 33 from devices 1 and 2,
 * 100 floats = 400 bytes in all, over one pair link each. (Counted as 3 times
 * (4/3) * 100 bytes, they summed to 399.99999999999994.) The time is that of
 * the mean, (4/3) * 100 B: x.fwd 0.1/3, a.fwd 1/3, a.bwd 2/3 ms on each device,
 * the ring 4 * 10 us + (4/3) * 100 B / 1 MB/s, the update 0.5 ms. */
static void test_ring_bytes_whole(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 3, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    sf_graph *g = sf_graph_new("ring3");
    sf_shape xs = sf_shape_make(2, (int64_t[]){3, 4});
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params lp = linear_params(5);
    int a = sf_graph_add_op(g, SF_OP_LINEAR, "a", &lp, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0);
    sf_strategy *s = sf_strategy_new(g);
    const int devs[3] = {0, 1, 2};
    place(s, x, 2, (int[]){3, 1}, 3, devs);
    place(s, a, 2, (int[]){3, 1}, 3, devs);
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_int_equal(r.sync_bytes, 400);
    assert_int_equal(r.intra_bytes, 400);
    assert_int_equal(r.inter_bytes, 0);
    double ar = 4 * 10e-6 + (4.0 / 3.0) * 100.0 / 1e6;
    double expect = 0.1e-3 / 3 + 1e-3 / 3 + 2e-3 / 3 + ar + 0.5e-3;
    assert_true(fabs(r.iter_s - expect) < EPS);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Two data-parallel linear layers on two devices, under both sync modes and
 * both schemes. With overlap, b's sync runs while a's backward computes; in bulk
 * mode both wait for the end of the backward pass and then share the links. */
static void test_sync_modes(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("sync", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    place(s, x, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    place(s, a, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    place(s, b, 2, (int[]){2, 1}, 2, (int[]){0, 1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    /* each device: x 0.05, a.fwd 0.5, b.fwd 0.5, b.bwd 1, a.bwd 1 -> 3.05 ms;
     * an all-reduce of 288 bytes holds both ring links for ar */
    double ar = 2 * 10e-6 + 288.0 / 1e6, bwd_end = 3.05e-3;
    /* parameter server on device 0: one message of 288 bytes each way */
    double ps = 10e-6 + 288.0 / 1e6;
    double expect[SF_SCHEME_COUNT][SF_SYNC_MODE_COUNT] = {
        {
            /* ring, overlap: b's ring [2.05, 2.05 + ar] under a.bwd; b.update
             * [3.05, 3.55]; a's ring [3.05, 3.05 + ar]; a.update [3.55, 4.05] */
            bwd_end + 0.5e-3 + 0.5e-3,
            /* ring, bulk: a's ring, then b's; a.update from 3.05 + ar, b.update after */
            bwd_end + ar + 0.5e-3 + 0.5e-3,
        },
        {
            /* ps, overlap: b's gradient 1 -> 0 under a.bwd; b.update [3.05, 3.55] on
             * device 0, its return [3.55, 3.55 + ps]; a's gradient [3.05, 3.05 + ps];
             * a.update [3.55, 4.05]; its return ends at 4.05 + ps */
            bwd_end + 0.5e-3 + 0.5e-3 + ps,
            /* ps, bulk: a's gradient, then b's, on link 1 -> 0; a.update from
             * 3.05 + ps, b.update after it, then b's return */
            bwd_end + ps + 0.5e-3 + 0.5e-3 + ps,
        },
        {
            /* hierarchical on one node: the ring */
            bwd_end + 0.5e-3 + 0.5e-3,
            bwd_end + ar + 0.5e-3 + 0.5e-3,
        },
    };
    _Static_assert(SF_SCHEME_COUNT == 3, "a row for every scheme");
    double sync_s[SF_SCHEME_COUNT] = {4 * ar, 4 * ps, 4 * ar};
    for (int scheme = 0; scheme < SF_SCHEME_COUNT; scheme++) {
        for (int mode = 0; mode < SF_SYNC_MODE_COUNT; mode++) {
            sf_sim_options o;
            sf_sim_options_default(&o);
            o.sync = (sf_sync_mode)mode;
            o.scheme = (sf_sync_scheme)scheme;
            sf_sim *sim = sf_sim_new(g, m, &cm, &o, &err);
            assert_non_null(sim);
            sf_sim_result r;
            assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
            assert_true(fabs(r.iter_s - expect[scheme][mode]) < EPS);
            assert_int_equal(r.sync_bytes, 4 * 288);
            assert_true(fabs(r.sync_s - sync_s[scheme]) < EPS);
            /* the server (ps) keeps the momentum; a ring's replicas all do */
            double per_weight_1 = scheme == SF_SCHEME_PS ? 2 * 288.0 : 3 * 288.0;
            assert_true(r.device_mem_bytes[0] - r.device_mem_bytes[1] ==
                        2 * (3 * 288.0 - per_weight_1));
            sf_sim_free(sim);
        }
    }
    sf_sim_options o;
    sf_sim_options_default(&o);
    assert_int_equal(o.sync, SF_SYNC_OVERLAP);
    sf_sync_mode parsed;
    assert_int_equal(sf_sync_mode_parse("bulk", &parsed), 0);
    assert_int_equal(parsed, SF_SYNC_BULK);
    assert_string_equal(sf_sync_mode_name(SF_SYNC_OVERLAP), "overlap");
    assert_int_equal(sf_sync_mode_parse("lazy", &parsed), -1);
    assert_null(sf_sync_mode_name(SF_SYNC_MODE_COUNT));
    sf_sync_scheme sch;
    assert_int_equal(sf_sync_scheme_parse("ps", &sch), 0);
    assert_int_equal(sch, SF_SCHEME_PS);
    assert_string_equal(sf_sync_scheme_name(SF_SCHEME_RING), "ring");
    assert_int_equal(sf_sync_scheme_parse("tree", &sch), -1);
    /* a runtime that runs the sync's collectives after its backward pass
     * (runtime.sync_after_backward: MPI) makes overlap mode's rings wait for
     * the pass as in bulk mode; a parameter server's messages still overlap */
    sf_machine_desc ld = *sf_machine_get_desc(m);
    ld.sync_after_backward = 1;
    sf_machine *late = sf_machine_build(&ld, &err);
    assert_non_null(late);
    cm.machine = late;
    for (int scheme = 0; scheme < SF_SCHEME_COUNT; scheme++) {
        for (int mode = 0; mode < SF_SYNC_MODE_COUNT; mode++) {
            o.sync = (sf_sync_mode)mode;
            o.scheme = (sf_sync_scheme)scheme;
            sf_sim *sim = sf_sim_new(g, late, &cm, &o, &err);
            assert_non_null(sim);
            sf_sim_result r;
            assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
            int as = scheme == SF_SCHEME_PS ? mode : SF_SYNC_BULK;
            assert_true(fabs(r.iter_s - expect[scheme][as]) < EPS);
            sf_sim_free(sim);
        }
    }
    cm.machine = m;
    sf_machine_free(late);
    o.sync = SF_SYNC_MODE_COUNT;
    o.scheme = SF_SCHEME_RING;
    assert_null(sf_sim_new(g, m, &cm, &o, &err));
    o.sync = SF_SYNC_OVERLAP;
    o.scheme = SF_SCHEME_COUNT;
    assert_null(sf_sim_new(g, m, &cm, &o, &err));
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Ties at a link are broken by canonical key even when readiness passes through
 * zero-time barriers (bulk mode's per-device barriers, the parameter server's
 * per-replica barriers). x -> a -> b, all data parallel over 2 nodes x 2
 * devices (0, 1 on node 0; 2, 3 on node 1), bulk sync through parameter
 * servers on device 0. Batch 4, one sample a part; every link has 10 us latency
 * and 7.2 MB/s, so a 288-byte shard (8*8+8 floats) crosses a link in
 * t = 10 us + 288 B / 7.2 MB/s = 50 us.
 *
 * Each device runs a quarter of every operator (fixed_vt): x.fwd 0.025, a.fwd
 * 0.25, b.fwd 0.25, b.bwd 0.5, a.bwd 0.5 ms, so the four devices' barriers are
 * all at T = 1.525 ms, and every gradient is ready to leave then: 1 -> 0 over
 * their pair link, 2 -> 0 and 3 -> 0 over node 1's NIC out, then node 0's NIC
 * in. Updates take 0.5 ms, on the server alone. Canonical order puts a's sync block before
 * b's, and inside a block replica 2 before replica 3, so node 1's NIC out takes
 * a2, a3, b2, b3 in [T, T+t], [T+t, T+2t], [T+2t, T+3t], [T+3t, T+4t], and
 * node 0's NIC in the same one t later, ending a3 at T+3t and b3 at T+5t. (Taken
 * in the order the barriers are passed, device 2's then device 3's, it would be
 * a2, b2, a3, b3: a3 in at T+4t.) Device 0 updates a over [T+3t, T+3t+0.5]
 * and b over [T+3t+0.5, T+3t+1] (b's gradients are in at T+5t, earlier). The
 * returns of b then leave at U = T+3t+1 = 2.675 ms: 0 -> 1 in [U, U+t]; node 0's
 * NIC out takes b's copies for 2 and 3 in [U, U+t], [U+t, U+2t], node 1's NIC in
 * one t later, so the last lands at U + 3t = 2.825 ms (a's returns, from
 * T+3t+0.5, are done by T+6t+0.5). Barrier order would give 2.875 ms. */
static void test_barrier_ties_by_key(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(2, 2, SF_INTRA_PAIRWISE, 7.2e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("ties", &x, &a, &b, 0);
    sf_strategy *s = sf_strategy_new(g);
    const int devs[4] = {0, 1, 2, 3};
    place(s, x, 2, (int[]){4, 1}, 4, devs);
    place(s, a, 2, (int[]){4, 1}, 4, devs);
    place(s, b, 2, (int[]){4, 1}, 4, devs);
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim_options o;
    sf_sim_options_default(&o);
    o.sync = SF_SYNC_BULK;
    o.scheme = SF_SCHEME_PS;
    sf_sim *sim = sf_sim_new(g, m, &cm, &o, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double t = 10e-6 + 288.0 / 7.2e6;
    assert_true(fabs(t - 50e-6) < EPS);
    assert_true(fabs(r.iter_s - (1.525e-3 + 3 * t + 1e-3 + 3 * t)) < EPS);
    /* per operator 3 gradients and 3 returns of 288 B; those of devices 2 and 3
     * cross two NIC links each way, that of device 1 one pair link */
    assert_int_equal(r.sync_bytes, 2 * 6 * 288);
    assert_int_equal(r.inter_bytes, 2 * 2 * 2 * 2 * 288);
    assert_int_equal(r.intra_bytes, 2 * 2 * 288);
    /* the same strategy reached by delta updates from data parallelism on the
     * first two devices schedules the same ties the same way */
    sf_strategy *s2 = sf_strategy_new(g);
    const int two[4] = {0, 1, 0, 1};
    place(s2, x, 2, (int[]){4, 1}, 4, two);
    place(s2, a, 2, (int[]){4, 1}, 4, two);
    place(s2, b, 2, (int[]){4, 1}, 4, two);
    sf_sim_result rd;
    assert_int_equal(sf_sim_run(sim, s2, &rd, &err), SF_OK);
    for (int op = 0; op < 3; op++)
        assert_int_equal(sf_sim_update(sim, op, sf_strategy_get(s, op), &rd, &err), SF_OK);
    assert_true(rd.iter_s == r.iter_s);
    sf_sim_free(sim);
    sf_strategy_free(s2);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* x on device 0 feeds a and b on device 1: both transfers need link 0->1 at
 * the same instant, so the second waits for the first. */
static void test_link_contention(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("cont", &x, &a, &b, 1);
    sf_strategy *s = sf_strategy_new(g);
    place(s, a, 2, (int[]){1, 1}, 1, (int[]){1});
    place(s, b, 2, (int[]){1, 1}, 1, (int[]){1});
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    /* x [0, 0.1]; xfer to a [0.1, 0.1+t]; xfer to b waits for the link: [0.1+t,
     * 0.1+2t]. Device 1 then runs, in ready order: a.fwd [0.1+t, 1.1+t], b.fwd
     * (ready 0.1+2t) [1.1+t, 2.1+t], a.bwd (ready 1.1+t) [2.1+t, 4.1+t], b.bwd
     * [4.1+t, 6.1+t], a.update (ready 4.1+t) [6.1+t, 6.6+t], b.update [6.6+t, 7.1+t].
     * The input gets no gradient. */
    double t = 10e-6 + 128.0 / 1e6;
    assert_true(fabs(r.iter_s - (7.1e-3 + t)) < EPS);
    assert_int_equal(r.transfer_bytes, 256);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* On one device the iteration time is the sum of all task times. */
static void test_single_device_sum(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 16;
    const char *models[] = {"lenet5", "resnet18", "rnnlm"};
    for (int i = 0; i < 3; i++) {
        sf_graph *g = sf_model_build(models[i], &o, &err);
        assert_non_null(g);
        sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
        sf_strategy *s = sf_strategy_new(g);
        assert_int_equal(sf_strategy_single(s, g, 0), SF_OK);
        sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
        assert_true(fabs(r.iter_s - r.compute_s) <= 1e-9 * r.compute_s);
        assert_true(r.transfer_bytes == 0 && r.sync_bytes == 0);
        assert_true(fabs(r.device_busy_s[0] - r.compute_s) <= 1e-9 * r.compute_s);
        sf_sim_free(sim);
        sf_strategy_free(s);
        sf_cost_free(cm);
        sf_graph_free(g);
    }
    sf_machine_free(m);
}

/* What a delta update changed: x -> a -> b on device 0, then a moves to device
 * 1. Its tasks and transfers are new; x.fwd keeps its time; b.fwd, b.bwd and
 * b.update all move. b.bwd moves exactly as much as b.fwd, the only input it
 * has, so it is a plain shift; b.fwd's input is new, and b.update moves by
 * another amount than b.bwd before it (a.bwd used to run between them). */
static void test_delta_stats(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a, b;
    sf_graph *g = small_graph("st", &x, &a, &b, 0);
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_strategy *s = sf_strategy_new(g);
    sf_sim_result r;
    sf_sim_delta_stats ds;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_int_equal(sf_sim_delta_stats_get(sim, &ds, &err), SF_ERR_INVALID); /* no update */
    sf_error_clear(&err);
    sf_config c = *sf_strategy_get(s, a);
    c.device[0] = 1;
    assert_int_equal(sf_sim_update(sim, a, &c, &r, &err), SF_OK);
    assert_int_equal(sf_sim_delta_stats_get(sim, &ds, &err), SF_OK);
    int64_t kept = 4; /* x.fwd, b.fwd, b.bwd, b.update */
    assert_int_equal(ds.changed, r.tasks - 1);
    assert_int_equal(ds.uneven, r.tasks - kept + 2);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Relabelling the devices of a symmetric machine (a permutation inside a node of
 * a switched machine) changes nothing under the ring scheme, in either sync mode
 * and with segmented transfers: every ring uses each member's up and down link
 * once, whatever its order. (Every scheme on every symmetric machine:
 * tests/test_taskgraph_comm.c.) */
static void test_relabel_symmetric(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 8, SF_INTRA_SWITCH, 50e9, 2e-6, 0);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 32;
    sf_graph *g = sf_model_build("resnet18", &o, &err);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_rng rng;
    sf_rng_seed(&rng, 11);
    sf_strategy *s = sf_strategy_new(g), *t = sf_strategy_new(g);
    int perm[8] = {3, 7, 1, 0, 6, 2, 5, 4};
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        sf_config *c = sf_strategy_config(s, i);
        sf_config_random(sf_graph_op(g, i), m, &rng, c);
        sf_config *d = sf_strategy_config(t, i);
        *d = *c;
        for (int p = 0; p < d->n_parts; p++) d->device[p] = (int16_t)perm[c->device[p]];
    }
    for (int k = 0; k < 4; k++) {
        sf_sim_options so;
        sf_sim_options_default(&so);
        so.sync = k & 1 ? SF_SYNC_BULK : SF_SYNC_OVERLAP;
        so.segments = k & 2 ? 4 : 1;
        sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
        sf_sim_result r1, r2;
        assert_int_equal(sf_sim_run(sim, s, &r1, &err), SF_OK);
        assert_int_equal(sf_sim_run(sim, t, &r2, &err), SF_OK);
        assert_true(fabs(r1.iter_s - r2.iter_s) <= 1e-12 * r1.iter_s);
        assert_int_equal(r1.transfer_bytes, r2.transfer_bytes);
        assert_int_equal(r1.sync_bytes, r2.sync_bytes);
        assert_true(r1.peak_mem_bytes == r2.peak_mem_bytes);
        sf_sim_free(sim);
    }
    sf_strategy_free(s);
    sf_strategy_free(t);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Data parallelism with (nearly) free links divides compute time by the devices,
 * when the batch splits evenly and the cost is linear in the tile. */
static void test_data_parallel_free_links(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m1 = make_machine(1, 1, SF_INTRA_SWITCH, 1e30, 0, 0);
    sf_machine *m4 = make_machine(1, 4, SF_INTRA_SWITCH, 1e30, 0, 0);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &o, &err);
    sf_cost_model c1 = {&fixed_vt, NULL, m1, SF_DTYPE_FP32, SF_OPTIMIZER_SGD},
                  c4 = {&fixed_vt, NULL, m4, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_strategy *s1 = sf_strategy_new(g), *s4 = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s1, g, m1), SF_OK);
    assert_int_equal(sf_strategy_data(s4, g, m4), SF_OK);
    sf_sim *a = sf_sim_new(g, m1, &c1, NULL, &err), *b = sf_sim_new(g, m4, &c4, NULL, &err);
    sf_sim_result r1, r4;
    assert_int_equal(sf_sim_run(a, s1, &r1, &err), SF_OK);
    assert_int_equal(sf_sim_run(b, s4, &r4, &err), SF_OK);
    /* updates do not shrink with more replicas: compare forward+backward only */
    int n_upd = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) n_upd += sf_graph_op(g, i)->n_params > 0;
    double upd = n_upd * 0.5e-3;
    double fb1 = r1.iter_s - upd, fb4 = r4.iter_s - upd;
    assert_true(fabs(fb4 - fb1 / 4) <= 1e-6 * fb1);
    sf_sim_free(a);
    sf_sim_free(b);
    sf_strategy_free(s1);
    sf_strategy_free(s4);
    sf_graph_free(g);
    sf_machine_free(m1);
    sf_machine_free(m4);
}

/* Delta and full simulation give the same result bit for bit: the same
 * schedule, and every sum taken in the same (canonical) order. Only
 * `rescheduled` may differ, which counts the work done, not the answer. */
static void results_equal(const sf_sim_result *a, const sf_sim_result *b) {
    assert_true(a->iter_s == b->iter_s);
    assert_true(a->compute_s == b->compute_s);
    assert_true(a->transfer_s == b->transfer_s);
    assert_true(a->sync_s == b->sync_s);
    assert_int_equal(a->transfer_bytes, b->transfer_bytes);
    assert_int_equal(a->sync_bytes, b->sync_bytes);
    assert_int_equal(a->intra_bytes, b->intra_bytes);
    assert_int_equal(a->inter_bytes, b->inter_bytes);
    assert_true(a->peak_mem_bytes == b->peak_mem_bytes);
    assert_int_equal(a->fits, b->fits);
    assert_int_equal(a->tasks, b->tasks);
    assert_int_equal(a->n_devices, b->n_devices);
    for (int d = 0; d < a->n_devices; d++) {
        assert_true(a->device_busy_s[d] == b->device_busy_s[d]);
        assert_true(a->device_mem_bytes[d] == b->device_mem_bytes[d]);
    }
    assert_true(a->live_peak_bytes == b->live_peak_bytes);
    assert_int_equal(!a->device_live_bytes, !b->device_live_bytes);
    for (int d = 0; d < a->n_devices && a->device_live_bytes; d++) {
        assert_true(a->device_live_bytes[d] == b->device_live_bytes[d]);
        assert_true(a->device_live_peak_s[d] == b->device_live_peak_s[d]);
        for (int k = 0; k < SF_SIM_MEM_KIND_COUNT; k++)
            assert_true(a->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k] ==
                        b->device_live_kinds[d * SF_SIM_MEM_KIND_COUNT + k]);
    }
}

/* One run of delta_vs_full; zero options take the simulator's defaults. */
typedef struct delta_case {
    const char *model;
    int64_t batch;
    int machine; /* DELTA_P100, DELTA_K8, DELTA_PW, DELTA_HOST or DELTA_LATE */
    int moves;
    uint64_t seed;
    sf_sync_mode sync;
    sf_sync_scheme scheme;
    int segments;
    double optimizer_state_factor;
    int squeeze;  /* no spare ranks and a compaction before every update (sim_set_test_limits) */
    int timeline; /* memory over the schedule too (memory_timeline) */
    int multi;    /* each move changes 1 to SF_SIM_MAX_UPDATE_OPS operators in one
                   * sf_sim_update_ops: a first one, then producers of the ones before
                   * (a producer and its consumer, as MCMC's pair moves) or any other */
} delta_case;

/* p100-4x4, the first 8 devices of k80-16x4, and a pairwise 2 x 40 (3,120 NVLinks)
 * on which random moves meet links in an order of their own in each simulator */
enum { DELTA_P100, DELTA_K8, DELTA_PW, DELTA_HOST, DELTA_LATE };

/* Operators for one move of a multi case: ops[0] given, then up to
 * SF_SIM_MAX_UPDATE_OPS - 1 more, distinct; returns how many. */
static int multi_ops(const sf_graph *g, sf_rng *rng, int *ops) {
    int n = sf_graph_num_ops(g), k = 1;
    int want = 1 + (int)sf_rng_below(rng, SF_SIM_MAX_UPDATE_OPS);
    for (int tries = 0; k < want && tries < 20; tries++) {
        const sf_op *last = sf_graph_op(g, ops[k - 1]);
        int cand = (int)sf_rng_below(rng, (uint64_t)n);
        if (last->n_inputs > 0 && sf_rng_below(rng, 4) != 0)
            cand = last->inputs[sf_rng_below(rng, (uint64_t)last->n_inputs)].op;
        int dup = 0;
        for (int i = 0; i < k; i++) dup |= ops[i] == cand;
        if (!dup) ops[k++] = cand;
    }
    return k;
}

/* sf_sim_kind_totals of two simulators of the same strategy, device by device:
 * equal bit for bit (both sum in canonical task order). */
static void kind_totals_equal(const sf_sim *a, const sf_sim *b, int n_dev) {
    sf_error err = {0};
    for (int d = 0; d < n_dev; d++) {
        double ta[SF_SIM_TOTAL_COUNT], tb[SF_SIM_TOTAL_COUNT];
        assert_int_equal(sf_sim_kind_totals(a, d, ta, &err), SF_OK);
        assert_int_equal(sf_sim_kind_totals(b, d, tb, &err), SF_OK);
        for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) assert_true(ta[k] == tb[k]);
    }
}

/* Delta simulation equals full simulation after every random change of one
 * operator (or of several at once: multi), and the delta simulator's layout
 * holds exactly its blocks' tasks and edges after every update and every
 * revert. */
static void delta_vs_full(const delta_case *dc, sf_machine *m) {
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = dc->batch;
    o.seq_len = 8;
    sf_graph *g = sf_model_build(dc->model, &o, &err);
    assert_non_null(g);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.sync = dc->sync;
    so.scheme = dc->scheme;
    if (dc->segments) so.segments = dc->segments;
    if (dc->optimizer_state_factor) so.optimizer_state_factor = dc->optimizer_state_factor;
    so.memory_timeline = dc->timeline;
    sf_sim *delta = sf_sim_new(g, m, cm, &so, &err), *full = sf_sim_new(g, m, cm, &so, &err);
    if (dc->squeeze) sim_set_test_limits(delta, 0, -((int64_t)1 << 40));
    sf_sim_result rd, rf;
    assert_int_equal(sf_sim_run(delta, s, &rd, &err), SF_OK);
    assert_true(sim_layout_consistent(delta));
    sf_rng rng;
    sf_rng_seed(&rng, dc->seed);
    int n = sf_graph_num_ops(g);
    int moves = dc->moves;
    for (int it = 0; it < moves; it++) {
        int ops[SF_SIM_MAX_UPDATE_OPS], nops = 1;
        sf_config cs[SF_SIM_MAX_UPDATE_OPS], old[SF_SIM_MAX_UPDATE_OPS];
        ops[0] = (int)sf_rng_below(&rng, (uint64_t)n);
        if (dc->multi) nops = multi_ops(g, &rng, ops);
        for (int j = 0; j < nops; j++) {
            old[j] = *sf_strategy_get(s, ops[j]);
            sf_config_random(sf_graph_op(g, ops[j]), m, &rng, &cs[j]);
            *sf_strategy_config(s, ops[j]) = cs[j];
        }
        if (dc->multi)
            assert_int_equal(sf_sim_update_ops(delta, nops, ops, cs, INFINITY, &rd, &err), SF_OK);
        else
            assert_int_equal(sf_sim_update(delta, ops[0], &cs[0], &rd, &err), SF_OK);
        assert_true(sim_layout_consistent(delta));
        assert_int_equal(sf_sim_run(full, s, &rf, &err), SF_OK);
        results_equal(&rd, &rf);
        if (it % 10 == 0) kind_totals_equal(delta, full, sf_machine_num_devices(m));
        /* what changed lies inside what was scheduled again (from t0 on) */
        sf_sim_delta_stats ds;
        assert_int_equal(sf_sim_delta_stats_get(delta, &ds, &err), SF_OK);
        assert_true(ds.changed >= 0 && ds.changed <= rd.rescheduled && rd.rescheduled <= rd.tasks);
        /* a task whose inputs moved unevenly was scheduled again too */
        assert_true(ds.uneven >= 0 && ds.uneven <= rd.rescheduled);
        /* the same move, bounded below its true time, is cut off and reverts cleanly */
        if (it % 7 == 0) {
            assert_int_equal(sf_sim_revert(delta, NULL, &err), SF_OK);
            sf_sim_result rb;
            assert_int_equal(sf_sim_update_ops(delta, nops, ops, cs, rf.iter_s * 0.999, &rb, &err),
                             SF_OK);
            assert_int_equal(rb.cut_off, 1);
            assert_true(rb.iter_s > rf.iter_s * 0.999);
            assert_int_not_equal(sf_sim_update(delta, ops[0], &cs[0], &rd, &err), SF_OK);
            sf_error_clear(&err);
            assert_int_equal(sf_sim_revert(delta, NULL, &err), SF_OK);
            assert_int_equal(sf_sim_update_ops(delta, nops, ops, cs, rf.iter_s, &rd, &err), SF_OK);
            assert_int_equal(rd.cut_off, 0);
            results_equal(&rd, &rf);
        }
        if (sf_rng_below(&rng, 2)) { /* a rejected proposal: undo it */
            for (int j = 0; j < nops; j++) *sf_strategy_config(s, ops[j]) = old[j];
            assert_int_equal(sf_sim_revert(delta, &rd, &err), SF_OK);
            assert_true(sim_layout_consistent(delta));
            assert_int_equal(sf_sim_run(full, s, &rf, &err), SF_OK);
            results_equal(&rd, &rf);
            for (int j = 0; j < nops; j++)
                assert_true(
                    sf_config_equal(sf_strategy_get(sf_sim_strategy(delta), ops[j]), &old[j]));
        }
    }
    sf_sim_free(delta);
    sf_sim_free(full);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_graph_free(g);
}

/* One line a case: model, batch, machine, moves, seed, then what differs from the defaults. */
/* clang-format off */
static const delta_case delta_cases[] = {
    {.model = "lenet5", .batch = 64, .machine = DELTA_P100, .moves = 1000, .seed = 1},
    {.model = "alexnet", .batch = 32, .machine = DELTA_K8, .moves = 300, .seed = 2},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_P100, .moves = 500, .seed = 3},
    {.model = "inception_v3", .batch = 16, .machine = DELTA_K8, .moves = 200, .seed = 4},
    {.model = "transformer", .batch = 8, .machine = DELTA_P100, .moves = 200, .seed = 5},
    /* bulk sync: the per-device barriers are kept tasks whose predecessors change */
    {.model = "lenet5", .batch = 64, .machine = DELTA_P100, .moves = 400, .seed = 6,
     .sync = SF_SYNC_BULK},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_K8, .moves = 300, .seed = 7,
     .sync = SF_SYNC_BULK},
    {.model = "inception_v3", .batch = 16, .machine = DELTA_P100, .moves = 150, .seed = 8,
     .sync = SF_SYNC_BULK},
    /* parameter servers, both ways */
    {.model = "alexnet", .batch = 32, .machine = DELTA_P100, .moves = 300, .seed = 9,
     .scheme = SF_SCHEME_PS},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_P100, .moves = 300, .seed = 10,
     .sync = SF_SYNC_BULK, .scheme = SF_SCHEME_PS},
    /* transfers over several links in pipelined segments (PCIe trees, NICs) */
    {.model = "alexnet", .batch = 32, .machine = DELTA_K8, .moves = 200, .seed = 11,
     .segments = 3},
    /* memory in fractions of a byte (optimizer state 0.3 per weight byte): the
     * per-device totals cannot be patched exactly and are summed again */
    {.model = "transformer", .batch = 8, .machine = DELTA_K8, .moves = 150, .seed = 12,
     .optimizer_state_factor = 0.3},
    /* the rare paths of the delta layout on every move: rank ranges drawn again
     * whenever a block grows, a compaction before every update */
    {.model = "lenet5", .batch = 64, .machine = DELTA_P100, .moves = 300, .seed = 13,
     .squeeze = 1},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_K8, .moves = 200, .seed = 14,
     .sync = SF_SYNC_BULK, .scheme = SF_SCHEME_PS, .squeeze = 1},
    {.model = "inception_v3", .batch = 16, .machine = DELTA_K8, .moves = 100, .seed = 15,
     .segments = 2, .squeeze = 1},
    /* link resources numbered as the delta and the full simulator each met them */
    {.model = "lenet5", .batch = 64, .machine = DELTA_PW, .moves = 300, .seed = 16},
    {.model = "alexnet", .batch = 32, .machine = DELTA_PW, .moves = 100, .seed = 17,
     .sync = SF_SYNC_BULK, .segments = 2},
    /* several operators in one update (MCMC's pair moves), under each sync setting */
    {.model = "lenet5", .batch = 64, .machine = DELTA_P100, .moves = 400, .seed = 16,
     .multi = 1},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_K8, .moves = 300, .seed = 17,
     .sync = SF_SYNC_BULK, .scheme = SF_SCHEME_PS, .multi = 1},
    {.model = "inception_v3", .batch = 16, .machine = DELTA_P100, .moves = 100, .seed = 18,
     .sync = SF_SYNC_BULK, .multi = 1},
    {.model = "alexnet", .batch = 32, .machine = DELTA_K8, .moves = 200, .seed = 19,
     .segments = 3, .squeeze = 1, .multi = 1},
    /* what a host runtime adds (the machine's runtime object): copies, all-reduce
     * steps at their own rate, and 4 devices a node on 2 cores */
    {.model = "lenet5", .batch = 64, .machine = DELTA_HOST, .moves = 400, .seed = 20},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_HOST, .moves = 300, .seed = 21,
     .sync = SF_SYNC_BULK, .multi = 1},
    {.model = "inception_v3", .batch = 16, .machine = DELTA_HOST, .moves = 100, .seed = 22,
     .squeeze = 1, .multi = 1},
    /* memory over the schedule: the same peaks, at the same times */
    {.model = "lenet5", .batch = 64, .machine = DELTA_P100, .moves = 300, .seed = 23,
     .timeline = 1},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_K8, .moves = 200, .seed = 24,
     .timeline = 1, .multi = 1, .squeeze = 1},
    {.model = "transformer", .batch = 8, .machine = DELTA_HOST, .moves = 100, .seed = 25,
     .timeline = 1, .sync = SF_SYNC_BULK},
    /* a runtime that runs the sync's collectives after its backward pass (MPI):
     * overlap mode's collectives wait for the per-device barriers */
    {.model = "lenet5", .batch = 64, .machine = DELTA_LATE, .moves = 400, .seed = 26},
    {.model = "rnnlm", .batch = 32, .machine = DELTA_LATE, .moves = 200, .seed = 27,
     .multi = 1, .squeeze = 1},
    {.model = "alexnet", .batch = 32, .machine = DELTA_LATE, .moves = 200, .seed = 28,
     .scheme = SF_SCHEME_PS},
};
/* clang-format on */

static void test_delta_equals_full(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *p100 = sf_machine_preset("p100-4x4", &err);
    sf_machine *k80 = sf_machine_preset("k80-16x4", &err);
    sf_machine *k8 = sf_machine_subset(k80, 8, &err);
    assert_non_null(k8);
    sf_machine_desc d = *sf_machine_get_desc(p100);
    d.nodes = 2;
    d.devices_per_node = 40;
    sf_machine *pw = sf_machine_build(&d, &err);
    assert_non_null(pw);
    d = *sf_machine_get_desc(p100);
    d.cores_per_node = 2;
    d.copy_bw_Bps = 2e10;
    d.n_sync = 2;
    d.sync_bytes[0] = 4096;
    d.sync_bw_Bps[0] = 5e9;
    d.sync_bytes[1] = 64e6;
    d.sync_bw_Bps[1] = 1e9;
    sf_machine *host = sf_machine_build(&d, &err);
    assert_non_null(host);
    d.sync_after_backward = 1;
    d.copy_run_s = 5e-9;
    sf_machine *late = sf_machine_build(&d, &err);
    assert_non_null(late);
    for (size_t i = 0; i < sizeof delta_cases / sizeof delta_cases[0]; i++) {
        int w = delta_cases[i].machine;
        delta_vs_full(&delta_cases[i], w == DELTA_K8     ? k8
                                       : w == DELTA_PW   ? pw
                                       : w == DELTA_HOST ? host
                                       : w == DELTA_LATE ? late
                                                         : p100);
    }
    sf_machine_free(late);
    sf_machine_free(host);
    sf_machine_free(pw);
    sf_machine_free(k8);
    sf_machine_free(k80);
    sf_machine_free(p100);
}

/* A file's bytes, which must exist. */
static char *slurp(const char *path, size_t *len) {
    sf_error err = {0};
    char *t = sf_read_file(path, len, &err);
    if (!t) fail_msg("%s", err.msg);
    return t;
}

/* Links become resources only as tasks use them (sim_links.c): on a pairwise
 * 2 x 2000 machine, 8 M links, an operator over four devices and its input on
 * a fifth hold a handful; each keeps its resource; and the trace names a link's
 * track by its machine link id and name. */
static void test_link_resources(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(2, 2000, SF_INTRA_PAIRWISE, 1e9, 1e-6, 0);
    int x, a;
    sf_graph *g = small_graph("pw", &x, &a, NULL, 0);
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    assert_non_null(sim);
    sf_strategy *s = sf_strategy_new(g);
    place(s, a, 2, (int[]){4, 1}, 4, (int[]){1, 7, 2000, 3999}); /* x stays on device 0 */
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    /* transfers 0 -> 1, 7 (NVLink), 2000, 3999 (NICs); the ring 1, 7, 2000, 3999 */
    assert_int_equal(sim->n_res, 4000 + sim->n_links);
    assert_true(sim->n_links >= 4 && sim->n_links <= 12);
    assert_true(sim->cap_res < 4000 + 1024);
    int n_links = sim->n_links;
    for (int i = 0; i < n_links; i++) {
        int id = sim_res_link(sim, 4000 + i);
        assert_true(id >= 0 && id < sf_machine_num_links(m));
        for (int k = 0; k < i; k++) assert_int_not_equal(sim_res_link(sim, 4000 + k), id);
        assert_int_equal(sim_link_res(sim, id), 4000 + i); /* met again: the same resource */
    }
    assert_int_equal(sim->n_links, n_links);
    assert_int_equal(sim_res_link(sim, 3), -1);
    /* the same run again: nothing new */
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_int_equal(sim->n_links, n_links);

    char dir[64], path[96], want[96];
    snprintf(dir, sizeof dir, "/tmp/sf_test_sim_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    assert_int_equal(sf_sim_write_trace(sim, path, &err), SF_OK);
    size_t len;
    char *t = slurp(path, &len);
    sf_route rt;
    sf_machine_route(m, 0, 7, &rt);
    assert_int_equal(rt.n_links, 1);
    snprintf(want, sizeof want, "\"tid\":%d,\"args\":{\"name\":\"n0.d0->n0.d7 (nvlink)\"}",
             rt.links[0]);
    if (!strstr(t, want)) fail_msg("no '%s' in the trace", want);
    free(t);
    remove(path);
    rmdir(dir);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-15;
}

/* Per-device kind totals add up to what the result says by another route: compute +
 * update is each device's busy time and, over all devices, compute_s; on a machine
 * of single-link routes (shared memory between ranks) transfer and sync add up to
 * transfer_s and sync_s, for ring all-reduces and parameter servers, random
 * strategies and data parallelism. Bad arguments are refused. */
static void test_kind_totals(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_open("cpu[4]", &err);
    assert_non_null(m);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 16;
    sf_graph *g = sf_model_build("lenet5", &o, &err);
    assert_non_null(g);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(g);
    sf_rng rng;
    sf_rng_seed(&rng, 77);
    for (int scheme = 0; scheme < SF_SCHEME_COUNT; scheme++) {
        sf_sim_options so;
        sf_sim_options_default(&so);
        so.scheme = (sf_sync_scheme)scheme;
        sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
        double t[SF_SIM_TOTAL_COUNT];
        assert_int_equal(sf_sim_kind_totals(sim, 0, t, &err), SF_ERR_INVALID); /* before a run */
        for (int trial = 0; trial < 20; trial++) {
            if (trial == 0) {
                assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
            } else {
                for (int i = 0; i < sf_graph_num_ops(g); i++)
                    sf_config_random(sf_graph_op(g, i), m, &rng, sf_strategy_config(s, i));
            }
            sf_sim_result r;
            assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
            double sum[SF_SIM_TOTAL_COUNT] = {0};
            for (int d = 0; d < r.n_devices; d++) {
                assert_int_equal(sf_sim_kind_totals(sim, d, t, &err), SF_OK);
                assert_true(
                    close_to(t[SF_SIM_TOTAL_COMPUTE] + t[SF_SIM_TOTAL_UPDATE], r.device_busy_s[d]));
                for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) sum[k] += t[k];
            }
            assert_true(
                close_to(sum[SF_SIM_TOTAL_COMPUTE] + sum[SF_SIM_TOTAL_UPDATE], r.compute_s));
            assert_true(close_to(sum[SF_SIM_TOTAL_TRANSFER], r.transfer_s));
            assert_true(close_to(sum[SF_SIM_TOTAL_SYNC], r.sync_s));
            if (trial == 0) assert_true(sum[SF_SIM_TOTAL_SYNC] > 0); /* data parallel syncs */
        }
        assert_int_equal(sf_sim_kind_totals(sim, 4, t, &err), SF_ERR_INVALID);
        assert_int_equal(sf_sim_kind_totals(sim, -1, t, &err), SF_ERR_INVALID);
        sf_sim_free(sim);
    }
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);

    /* by hand: input x on device 0 feeds a on device 1; x has no backward, so
     * the one message goes 0 -> 1 and is charged to its receiver */
    m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a;
    g = small_graph("k", &x, &a, NULL, 0);
    s = sf_strategy_new(g);
    place(s, a, 2, (int[]){1, 1}, 1, (int[]){1});
    sf_cost_model fixed = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &fixed, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double t0[SF_SIM_TOTAL_COUNT], t1[SF_SIM_TOTAL_COUNT];
    assert_int_equal(sf_sim_kind_totals(sim, 0, t0, &err), SF_OK);
    assert_int_equal(sf_sim_kind_totals(sim, 1, t1, &err), SF_OK);
    assert_true(fabs(t0[SF_SIM_TOTAL_COMPUTE] - 0.1e-3) < EPS && t0[SF_SIM_TOTAL_TRANSFER] == 0);
    assert_true(fabs(t1[SF_SIM_TOTAL_COMPUTE] - 3e-3) < EPS);
    assert_true(fabs(t1[SF_SIM_TOTAL_TRANSFER] - (10e-6 + 128.0 / 1e6)) < EPS);
    assert_true(fabs(t1[SF_SIM_TOTAL_UPDATE] - 0.5e-3) < EPS && t0[SF_SIM_TOTAL_UPDATE] == 0);
    assert_true(t0[SF_SIM_TOTAL_SYNC] == 0 && t1[SF_SIM_TOTAL_SYNC] == 0);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* The pictures do not depend on the order links were met: after random moves a
 * delta simulator has numbered its links otherwise than a fresh simulator of
 * the final strategy, and both write the same trace and SVG, byte for byte. */
static void test_pictures_independent_of_link_order(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(2, 12, SF_INTRA_PAIRWISE, 1e9, 1e-6, 0);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 48;
    sf_graph *g = sf_model_build("lenet5", &o, &err);
    assert_non_null(g);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    sf_sim *delta = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim_result rd, rf;
    assert_int_equal(sf_sim_run(delta, s, &rd, &err), SF_OK);
    sf_rng rng;
    sf_rng_seed(&rng, 99);
    for (int it = 0; it < 40; it++) {
        int op = (int)sf_rng_below(&rng, (uint64_t)sf_graph_num_ops(g));
        sf_config c;
        sf_config_random(sf_graph_op(g, op), m, &rng, &c);
        *sf_strategy_config(s, op) = c;
        assert_int_equal(sf_sim_update(delta, op, &c, &rd, &err), SF_OK);
    }
    sf_sim *full = sf_sim_new(g, m, cm, NULL, &err);
    assert_int_equal(sf_sim_run(full, s, &rf, &err), SF_OK);
    results_equal(&rd, &rf);
    /* the two met the links in different orders */
    int differ = delta->n_links != full->n_links;
    for (int i = 0; i < delta->n_links && i < full->n_links; i++)
        differ |= delta->res_link[i] != full->res_link[i];
    assert_true(differ);
    char dir[64], p1[96], p2[96];
    snprintf(dir, sizeof dir, "/tmp/sf_test_sim_XXXXXX");
    assert_non_null(mkdtemp(dir));
    for (int k = 0; k < 2; k++) {
        snprintf(p1, sizeof p1, "%s/delta.%s", dir, k ? "svg" : "json");
        snprintf(p2, sizeof p2, "%s/full.%s", dir, k ? "svg" : "json");
        if (k) {
            assert_int_equal(sf_sim_write_svg(delta, p1, &err), SF_OK);
            assert_int_equal(sf_sim_write_svg(full, p2, &err), SF_OK);
        } else {
            assert_int_equal(sf_sim_write_trace(delta, p1, &err), SF_OK);
            assert_int_equal(sf_sim_write_trace(full, p2, &err), SF_OK);
        }
        size_t n1, n2;
        char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
        assert_true(n1 == n2 && memcmp(a, b, n1) == 0);
        assert_non_null(strstr(a, "n0.d"));
        free(a);
        free(b);
        remove(p1);
        remove(p2);
    }
    rmdir(dir);
    sf_sim_free(delta);
    sf_sim_free(full);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
}

static void test_update_errors(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = make_machine(1, 2, SF_INTRA_PAIRWISE, 1e6, 10e-6, 0);
    int x, a;
    sf_graph *g = small_graph("e", &x, &a, NULL, 0);
    sf_cost_model cm = {&fixed_vt, NULL, m, SF_DTYPE_FP32, SF_OPTIMIZER_SGD};
    sf_sim *sim = sf_sim_new(g, m, &cm, NULL, &err);
    sf_config c = *sf_strategy_get(sf_sim_strategy(sim), a);
    sf_sim_result r;
    assert_int_not_equal(sf_sim_update(sim, a, &c, &r, &err), SF_OK); /* before a run */
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    c.device[0] = 5; /* out of range */
    sf_error_clear(&err);
    assert_int_not_equal(sf_sim_update(sim, a, &c, &r, &err), SF_OK);
    assert_non_null(strstr(err.msg, "a"));
    /* several operators at once: 1 to SF_SIM_MAX_UPDATE_OPS distinct ones, each valid */
    sf_config cs[SF_SIM_MAX_UPDATE_OPS + 1];
    int ops[SF_SIM_MAX_UPDATE_OPS + 1];
    for (int j = 0; j <= SF_SIM_MAX_UPDATE_OPS; j++) {
        ops[j] = j % 2 ? x : a;
        cs[j] = *sf_strategy_get(s, ops[j]);
    }
    sf_error_clear(&err);
    assert_int_equal(sf_sim_update_ops(sim, 0, ops, cs, INFINITY, &r, &err), SF_ERR_INVALID);
    sf_error_clear(&err);
    assert_int_equal(sf_sim_update_ops(sim, SF_SIM_MAX_UPDATE_OPS + 1, ops, cs, INFINITY, &r, &err),
                     SF_ERR_INVALID);
    sf_error_clear(&err);
    ops[1] = a;
    assert_int_equal(sf_sim_update_ops(sim, 2, ops, cs, INFINITY, &r, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "twice"));
    ops[1] = x;
    cs[1].device[0] = 5;
    sf_error_clear(&err);
    assert_int_not_equal(sf_sim_update_ops(sim, 2, ops, cs, INFINITY, &r, &err), SF_OK);
    /* a refused update changed nothing: there is nothing to revert */
    sf_error_clear(&err);
    assert_int_equal(sf_sim_revert(sim, NULL, &err), SF_ERR_INVALID);
    /* both moved to device 1 together, then back in one revert */
    sf_sim_result r0, r2;
    assert_int_equal(sf_sim_run(sim, s, &r0, &err), SF_OK);
    cs[0].device[0] = 1;
    cs[1].device[0] = 1;
    assert_int_equal(sf_sim_update_ops(sim, 2, ops, cs, INFINITY, &r, &err), SF_OK);
    assert_int_equal(sf_strategy_get(sf_sim_strategy(sim), a)->device[0], 1);
    assert_int_equal(sf_strategy_get(sf_sim_strategy(sim), x)->device[0], 1);
    assert_true(r.iter_s == r0.iter_s); /* the same schedule, mirrored */
    assert_int_equal(sf_sim_revert(sim, &r2, &err), SF_OK);
    assert_true(sf_config_equal(sf_strategy_get(sf_sim_strategy(sim), a), sf_strategy_get(s, a)));
    assert_true(sf_config_equal(sf_strategy_get(sf_sim_strategy(sim), x), sf_strategy_get(s, x)));
    assert_true(r2.iter_s == r0.iter_s);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* The task limit (sf_sim_set_max_tasks): a full run past it fails with
 * SF_ERR_RANGE and names the limit; an update that grows the graph past it is
 * cut off (infinite time) and its revert gives the old result back; within
 * it everything runs as without one. */
static void test_task_limit(void **state) {
    (void)state;
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_error err = {0};
    sf_graph *g = sf_model_build("mlp", &mo, &err);
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(g);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, "single", g, m, &err), SF_OK);
    sf_sim_result r0, r;
    assert_int_equal(sf_sim_run(sim, s, &r0, &err), SF_OK);
    sf_sim_set_max_tasks(sim, r0.tasks - 1);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "the limit"));
    err = (sf_error){0};
    sf_sim_set_max_tasks(sim, r0.tasks);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_true(r.iter_s == r0.iter_s);
    int op = 1;
    sf_config c;
    sf_config_copy(&c, sf_strategy_get(s, op));
    int deg[SF_MAX_DIMS] = {0};
    for (int d = 0; d < SF_MAX_DIMS; d++) deg[d] = 1;
    deg[0] = 4;
    assert_int_equal(sf_config_set_degrees(&c, sf_graph_op(g, op)->space.ndim, deg), SF_OK);
    for (int p = 0; p < c.n_parts; p++) c.device[p] = (int16_t)p;
    assert_int_equal(sf_sim_update(sim, op, &c, &r, &err), SF_OK);
    assert_true(r.cut_off && isinf(r.iter_s));
    assert_int_equal(sf_sim_revert(sim, &r, &err), SF_OK);
    assert_true(r.iter_s == r0.iter_s);
    sf_sim_set_max_tasks(sim, 0);
    assert_int_equal(sf_sim_update(sim, op, &c, &r, &err), SF_OK);
    assert_false(r.cut_off);
    assert_true(r.tasks > r0.tasks);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Workspace and communication buffers on the timeline: every compute task's
 * workspace is an entry of the kernels' size alive over the task, and where
 * copies are priced a shard whose gradient is packed has one buffer per
 * packing device (a pack and an unpack copy each), alive from the pack to the
 * unpack; neither enters the all-at-once sums. */
static void test_workspace_and_buffers(void **state) {
    (void)state;
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 32;
    sf_error err = {0};
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m0 = sf_machine_preset("p100-4x4", &err);
    assert_non_null(g);
    assert_non_null(m0);
    sf_machine_desc d = *sf_machine_get_desc(m0);
    d.copy_bw_Bps = 50e9;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_strategy *s = sf_strategy_new(g);
    sf_rng rng;
    sf_rng_seed(&rng, 7);
    int with_buffers = 0;
    for (int trial = 0; trial < 30; trial++) {
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            sf_config_random(sf_graph_op(g, i), m, &rng, sf_strategy_config(s, i));
        sf_sim_result r;
        if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
        double ws_expect = 0, ws = 0, buf = 0;
        int64_t copies = 0, n_buf = 0;
        for (int k = 0; k < sim->n_order; k++) {
            const sim_block *b = &sim->blocks[k]; /* dense, in canonical order */
            for (int t = 0; t < b->n_tasks; t++) {
                const sim_task *tk = &b->tasks[t];
                const sf_op *op = sf_graph_op(g, tk->op);
                if (tk->kind == SIM_FWD || tk->kind == SIM_BWD) {
                    sf_tile tile;
                    sf_config_part_tile(op, sf_strategy_get(s, tk->op), tk->part, &tile);
                    ws_expect += (double)sf_kernel_workspace_bytes(op, &tile, tk->kind == SIM_BWD);
                }
                if (tk->kind == SIM_COPY && sim->order[k] % SIM_SLOTS == SLOT_SYNC) copies++;
            }
            for (int i = 0; i < b->n_mem; i++) {
                const sim_mem *e = &b->mem[i];
                assert_false(sim_mem_summed(e) &&
                             (e->kind == SF_SIM_MEM_WORKSPACE || e->kind == SF_SIM_MEM_BUFFERS));
                if (e->kind == SF_SIM_MEM_WORKSPACE) {
                    ws += e->bytes;
                    assert_true(e->from == e->to);
                }
                if (e->kind == SF_SIM_MEM_BUFFERS) {
                    buf += e->bytes;
                    n_buf++;
                    assert_true(e->bytes > 0);
                    assert_true(sim->cur->start[SLOT_OF(sim, e->from)] <=
                                sim->cur->finish[SLOT_OF(sim, e->to)]);
                }
            }
        }
        assert_true(ws == ws_expect);
        assert_true(ws > 0); /* lenet5's convolutions unfold their input */
        assert_int_equal(2 * n_buf, copies);
        with_buffers += buf > 0;
    }
    assert_true(with_buffers > 0);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_machine_free(m0);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ops_two_devices),
        cmocka_unit_test(test_task_limit),
        cmocka_unit_test(test_workspace_and_buffers),
        cmocka_unit_test(test_multi_hop_route),
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_copies_priced),
        cmocka_unit_test(test_memory_timeline),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_shared_core),
        cmocka_unit_test(test_ring_bytes_whole),
        cmocka_unit_test(test_link_contention),
        cmocka_unit_test(test_sync_modes),
        cmocka_unit_test(test_barrier_ties_by_key),
        cmocka_unit_test(test_single_device_sum),
        cmocka_unit_test(test_relabel_symmetric),
        cmocka_unit_test(test_data_parallel_free_links),
        cmocka_unit_test(test_update_errors),
        cmocka_unit_test(test_kind_totals),
        cmocka_unit_test(test_delta_stats),
        cmocka_unit_test(test_delta_equals_full),
        cmocka_unit_test(test_link_resources),
        cmocka_unit_test(test_pictures_independent_of_link_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
