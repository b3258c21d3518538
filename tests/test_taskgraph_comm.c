/*
 * test_taskgraph_comm.c - the order of a sync's device groups (src/taskgraph/
 * comm.c, "Ring order"): the rule worked by hand on node-, switch- and
 * PCIe-tree-shaped shards, and its purpose as a property: relabelling the
 * devices of a strategy by a symmetry of the machine (any permutation inside a
 * switched, pairwise or shared-memory node; nodes permuted and devices inside
 * each; on a PCIe tree the switches of a node and the devices of a switch)
 * changes no simulated figure, under every scheme and sync mode.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

/* lenet5 at batch 64, its tiles set under s, on a task graph of m's devices. */
static sf_taskgraph *graph_of(const sf_graph *g, const sf_strategy *s, const sf_machine *m,
                              sf_sync_scheme scheme) {
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, sf_machine_num_devices(m), &err);
    assert_non_null(tg);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
    sf_taskgraph_set_comm(tg, m, scheme);
    return tg;
}

/* The first operator that owns weights. */
static int first_owner(const sf_graph *g) {
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        if (sf_graph_op(g, i)->n_params > 0) return i;
    fail();
    return -1;
}

/* Group `group` of step q of ss equals want[0 .. n]. */
static void group_is(const sf_tg_steps *ss, int q, sf_tg_step_kind kind, const int *want, int n) {
    assert_true(q < ss->n_steps);
    const sf_tg_step *st = &ss->steps[q];
    assert_int_equal(st->kind, kind);
    assert_int_equal(st->n_group, n);
    for (int i = 0; i < n; i++) assert_int_equal(ss->devs[st->group + i], want[i]);
}

/* The rule by hand. A 4-way data-parallel layer whose parts lie on devices
 * listed (5, 0, 4, 1) over two pairwise nodes of 4: the ring takes the devices
 * as the strategy lists them, node by node, the nodes in the order of their
 * first device: (5, 4, 0, 1). The hierarchical scheme's node groups are the
 * ring's runs, (5, 4) and (0, 1), and its cross-node groups their positions,
 * (5, 0) and (4, 1). Listed in id order the ring is in id order (what every
 * preset baseline lists, so their figures stay). On a PCIe tree the switches
 * of a node come together the same way: (3, 0, 2, 1) on k80's switches {0, 1}
 * and {2, 3} gives (3, 2, 0, 1). The parameter server's messages follow the
 * ring order too. */
static void test_ring_order_rule(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m8 = sf_machine_open("p100-4x4[8]", &err),
               *m4 = sf_machine_open("p100-4x4[4]", &err);
    sf_machine *k4 = sf_machine_open("k80-16x4[4]", &err);
    assert_non_null(m8);
    assert_non_null(m4);
    assert_non_null(k4);
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &o, &err);
    assert_non_null(g);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m4), SF_OK); /* 4 parts on devices 0..3 */
    int w = first_owner(g);
    sf_config *c = sf_strategy_config(s, w);
    assert_int_equal(c->n_parts, 4);
    sf_tg_sync sy;
    sf_tg_steps ss;

    /* id order stays */
    sf_taskgraph *tg = graph_of(g, s, m8, SF_SCHEME_RING);
    assert_int_equal(sf_taskgraph_sync_steps(tg, w, &sy, &ss), SF_OK);
    group_is(&ss, 0, SF_STEP_REDUCE_SCATTER, (int[]){0, 1, 2, 3}, 4);
    sf_taskgraph_free(tg);

    const int16_t listed[4] = {5, 0, 4, 1};
    memcpy(c->device, listed, sizeof listed);
    tg = graph_of(g, s, m8, SF_SCHEME_RING);
    assert_int_equal(sf_taskgraph_sync_steps(tg, w, &sy, &ss), SF_OK);
    assert_int_equal(sy.n_shards, 1);
    const int ids[4] = {0, 1, 4, 5};
    for (int i = 0; i < 4; i++) /* the shard's record keeps id order */
        assert_int_equal(sy.devs[sy.shards[0].dev_start + i], ids[i]);
    group_is(&ss, 0, SF_STEP_REDUCE_SCATTER, (int[]){5, 4, 0, 1}, 4);
    group_is(&ss, 1, SF_STEP_ALL_GATHER, (int[]){5, 4, 0, 1}, 4);
    sf_taskgraph_free(tg);

    tg = graph_of(g, s, m8, SF_SCHEME_HIERARCHICAL);
    assert_int_equal(sf_taskgraph_sync_steps(tg, w, &sy, &ss), SF_OK);
    group_is(&ss, 0, SF_STEP_REDUCE_SCATTER, (int[]){5, 4}, 2);
    group_is(&ss, 1, SF_STEP_REDUCE_SCATTER, (int[]){0, 1}, 2);
    group_is(&ss, 2, SF_STEP_ALL_REDUCE, (int[]){5, 0}, 2);
    group_is(&ss, 3, SF_STEP_ALL_REDUCE, (int[]){4, 1}, 2);
    group_is(&ss, 4, SF_STEP_ALL_GATHER, (int[]){5, 4}, 2);
    group_is(&ss, 7, SF_STEP_ALL_GATHER, (int[]){0, 1}, 2); /* after node (5, 4)'s updates */
    sf_taskgraph_free(tg);

    /* the server is the first part's device, 5; the others send in ring order */
    tg = graph_of(g, s, m8, SF_SCHEME_PS);
    assert_int_equal(sf_taskgraph_sync_steps(tg, w, &sy, &ss), SF_OK);
    int senders[3], n_send = 0;
    for (int q = 0; q < ss.n_steps; q++)
        if (ss.steps[q].kind == SF_STEP_P2P && ss.steps[q].payload == SF_PAYLOAD_GRAD) {
            assert_int_equal(ss.steps[q].peer, 5);
            assert_true(n_send < 3);
            senders[n_send++] = ss.steps[q].dev;
        }
    assert_int_equal(n_send, 3);
    assert_int_equal(senders[0], 4);
    assert_int_equal(senders[1], 0);
    assert_int_equal(senders[2], 1);
    sf_taskgraph_free(tg);

    const int16_t tree[4] = {3, 0, 2, 1};
    memcpy(c->device, tree, sizeof tree);
    tg = graph_of(g, s, k4, SF_SCHEME_RING);
    assert_int_equal(sf_taskgraph_sync_steps(tg, w, &sy, &ss), SF_OK);
    group_is(&ss, 0, SF_STEP_REDUCE_SCATTER, (int[]){3, 2, 0, 1}, 4);
    sf_taskgraph_free(tg);

    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m8);
    sf_machine_free(m4);
    sf_machine_free(k4);
}

/* A random symmetry of m into perm: nodes permuted, and inside each node its
 * devices (on a PCIe tree: its switches, and the devices of each switch). */
static void random_symmetry(const sf_machine *m, sf_rng *rng, int *perm) {
    const sf_machine_desc *d = sf_machine_get_desc(m);
    int per = d->devices_per_node, nodes = sf_machine_num_devices(m) / per;
    int G = d->intra == SF_INTRA_PCIE_TREE ? d->pcie_group : 1, ns = per / G;
    int node_of[64], sw_of[64], in_sw[64];
    assert_true(nodes <= 64 && per <= 64);
#define SHUFFLE(a, n)                                                                              \
    do {                                                                                           \
        for (int i_ = 0; i_ < (n); i_++) (a)[i_] = i_;                                             \
        for (int i_ = (n)-1; i_ > 0; i_--) {                                                       \
            int j_ = (int)sf_rng_below(rng, (uint64_t)i_ + 1), x_ = (a)[i_];                       \
            (a)[i_] = (a)[j_];                                                                     \
            (a)[j_] = x_;                                                                          \
        }                                                                                          \
    } while (0)
    SHUFFLE(node_of, nodes);
    for (int k = 0; k < nodes; k++) {
        SHUFFLE(sw_of, ns);
        for (int q = 0; q < ns; q++) {
            SHUFFLE(in_sw, G);
            for (int u = 0; u < G; u++)
                perm[k * per + q * G + u] = node_of[k] * per + sw_of[q] * G + in_sw[u];
        }
    }
#undef SHUFFLE
}

/* Every figure of a simulation that a relabelling by a symmetry must keep. */
static void same_result(const sf_sim_result *a, const sf_sim_result *b) {
    assert_true(a->iter_s == b->iter_s);
    assert_true(a->compute_s == b->compute_s);
    assert_true(a->transfer_s == b->transfer_s);
    assert_true(a->sync_s == b->sync_s);
    assert_int_equal(a->transfer_bytes, b->transfer_bytes);
    assert_int_equal(a->sync_bytes, b->sync_bytes);
    assert_int_equal(a->intra_bytes, b->intra_bytes);
    assert_int_equal(a->inter_bytes, b->inter_bytes);
    assert_true(a->peak_mem_bytes == b->peak_mem_bytes);
    assert_int_equal(a->tasks, b->tasks);
}

/* The property: random lenet5 strategies, each relabelled by a random symmetry
 * of its machine (every config's device list mapped alike), simulate to the
 * same figures, bit for bit, under the three schemes and both sync modes, with
 * and without segmented transfers: a switched node, pairwise and shared-memory
 * nodes (the last with copies and an all-reduce curve), and pairwise, switched (a NIC per device)
 * and PCIe-tree nodes joined by a network. Before rings and servers followed the strategy's order,
 * device ids picked the links of pairwise rings, a node's exit NIC and the server's message order:
 * 8 of 30 strategies moved on a pairwise node, by up to 3.4%. */
static void test_relabel_invariance(void **state) {
    (void)state;
    const char *machines[] = {"dgx-a100[8]", "p100-4x4[4]",  "cpu[4]",
                              "p100-4x4",    "dgx-a100[16]", "k80-16x4[8]"};
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &o, &err);
    assert_non_null(g);
    sf_strategy *s = sf_strategy_new(g), *t = sf_strategy_new(g);
    sf_rng rng;
    sf_rng_seed(&rng, 29);
    int syncing = 0;
    for (size_t mi = 0; mi < sizeof machines / sizeof *machines; mi++) {
        sf_machine *m = sf_machine_open(machines[mi], &err);
        assert_non_null(m);
        if (strcmp(machines[mi], "cpu[4]") == 0) { /* with the runtime's copies priced */
            sf_machine_desc d = *sf_machine_get_desc(m);
            d.copy_bw_Bps = 8e9;
            d.n_sync = 2;
            d.sync_bytes[0] = 4096;
            d.sync_bytes[1] = 1 << 24;
            d.sync_bw_Bps[0] = 0.7e9;
            d.sync_bw_Bps[1] = 2e9;
            sf_machine_free(m);
            m = sf_machine_build(&d, &err);
            assert_non_null(m);
        }
        sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
        int perm[SF_MAX_DEVICES];
        for (int k = 0; k < 2 * SF_SCHEME_COUNT * 2; k++) {
            sf_sim_options so;
            sf_sim_options_default(&so);
            so.scheme = (sf_sync_scheme)(k % SF_SCHEME_COUNT);
            so.sync = (k / SF_SCHEME_COUNT) % 2 ? SF_SYNC_BULK : SF_SYNC_OVERLAP;
            so.segments = k >= 2 * SF_SCHEME_COUNT ? 4 : 1;
            sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
            assert_non_null(sim);
            for (int trial = 0; trial < 6; trial++) {
                for (int i = 0; i < sf_graph_num_ops(g); i++)
                    sf_config_random(sf_graph_op(g, i), m, &rng, sf_strategy_config(s, i));
                random_symmetry(m, &rng, perm);
                sf_strategy_copy(t, s);
                for (int i = 0; i < sf_graph_num_ops(g); i++) {
                    sf_config *c = sf_strategy_config(t, i);
                    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)perm[c->device[p]];
                }
                sf_sim_result a, b;
                assert_int_equal(sf_sim_run(sim, s, &a, &err), SF_OK);
                assert_int_equal(sf_sim_run(sim, t, &b, &err), SF_OK);
                syncing += a.sync_bytes > 0;
                same_result(&a, &b);
            }
            sf_sim_free(sim);
        }
        sf_cost_free(cm);
        sf_machine_free(m);
    }
    assert_true(syncing > 0); /* the strategies synchronize something */
    sf_strategy_free(s);
    sf_strategy_free(t);
    sf_graph_free(g);
}

/* Count of step kind k among shard s's steps. */
static int count_kind(const sf_tg_steps *ss, int s, sf_tg_step_kind k) {
    int n = 0;
    for (int q = ss->shard_start[s]; q < ss->shard_start[s + 1]; q++) n += ss->steps[q].kind == k;
    return n;
}

/* On a machine that prices the runtime's copies, a shard whose weight elements
 * are one run of the layout (a data-parallel layer: all of W and b) syncs
 * without packing copies, as the runtime does (it all-reduces the gradient
 * where it lies); a shard of several runs (a linear split on its outputs: rows
 * of W and a piece of b) packs and unpacks, under ring and hierarchical alike.
 * The parameter server's messages always go through the packed buffer. */
static void test_copies_follow_the_layout(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m0 = sf_machine_open("p100-4x4[8]", &err);
    assert_non_null(m0);
    sf_machine_desc d = *sf_machine_get_desc(m0);
    d.copy_bw_Bps = 8e9;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    sf_model_options zo;
    sf_model_options_default(&zo);
    zo.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &zo, &err);
    assert_non_null(g);
    int fc = sf_graph_find(g, "fc1");
    assert_true(fc >= 0);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    for (int model = 0; model < 2; model++) {
        if (model) { /* fc1 in 2 parts on its outputs, each part replicated over 4 samples */
            sf_config *c = sf_strategy_config(s, fc);
            assert_int_equal(sf_config_set_degrees(c, 2, (int[]){4, 2}), SF_OK);
            for (int p = 0; p < 8; p++) c->device[p] = (int16_t)p;
        }
        for (int sc = 0; sc < 3; sc++) {
            sf_taskgraph *tg = graph_of(g, s, m, (sf_sync_scheme)sc);
            sf_tg_sync sy;
            sf_tg_steps ss;
            assert_int_equal(sf_taskgraph_sync_steps(tg, fc, &sy, &ss), SF_OK);
            assert_int_equal(sy.n_shards, model ? 2 : 1);
            for (int q = 0; q < sy.n_shards; q++) {
                int copies = count_kind(&ss, q, SF_STEP_COPY);
                if (sc == SF_SCHEME_PS || model)
                    assert_true(copies > 0);
                else
                    assert_int_equal(copies, 0);
            }
            sf_taskgraph_free(tg);
        }
    }
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(m0);
}

/* A copy is priced by its bytes and by its runs, one memcpy call each, as the
 * runtime copies a region (sf_tile_runs, runtime/box.c): LeNet-5's relu1 split
 * on its width reads conv1's whole output in rows of 14 floats, so the local
 * copy and the packing of the message cut conv1's piece into 64 x 6 x 28 rows,
 * while the unpacking writes the whole input region of the remote part in one
 * run (and its gradient is packed from there in one). */
static void test_copies_count_runs(void **state) {
    (void)state;
    sf_tile a = {.ndim = 3, .hi = {4, 3, 10}}, r = a;
    assert_true(sf_tile_runs(&a, &a, &a) == 1);
    r.hi[2] = 5; /* half of the last dimension: a row of each (i, j) */
    assert_true(sf_tile_runs(&r, &a, &r) == 12 && sf_tile_runs(&r, &r, &r) == 1);
    r = a, r.lo[0] = 2; /* half of the first: whole rows of whole planes, one run */
    assert_true(sf_tile_runs(&r, &a, &r) == 1);
    r = a, r.lo[1] = 1; /* the middle one: a run of each i */
    assert_true(sf_tile_runs(&r, &a, &r) == 4);
    r.hi[0] = 0;
    assert_true(sf_tile_runs(&r, &a, &r) == 0);

    sf_error err = {0};
    sf_machine *m0 = sf_machine_open("cpu[2]", &err);
    assert_non_null(m0);
    sf_machine_desc d = *sf_machine_get_desc(m0);
    d.copy_bw_Bps = 8e9;
    d.copy_run_s = 5e-9;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    sf_model_options zo;
    sf_model_options_default(&zo);
    zo.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &zo, &err);
    assert_non_null(g);
    int relu = sf_graph_find(g, "relu1");
    assert_true(relu >= 0 && sf_graph_find(g, "conv1") == sf_graph_op(g, relu)->inputs[0].op);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_single(s, g, 0), SF_OK);
    sf_config *c = sf_strategy_config(s, relu);
    assert_int_equal(sf_config_set_degrees(c, 4, (int[]){1, 1, 1, 2}), SF_OK);
    c->device[0] = 0;
    c->device[1] = 1;
    sf_taskgraph *tg = graph_of(g, s, m, SF_SCHEME_RING);
    const sf_tg_pair *pairs;
    int n = sf_taskgraph_edge(tg, relu, 0, &pairs);
    assert_int_equal(n, 2);
    const int64_t rows = 64 * 6 * 28;
    sf_tg_pricer pc = {.m = m, .segments = 1};
    for (int q = 0; q < n; q++) {
        const sf_tg_pair *pr = &pairs[q];
        assert_int_equal(pr->in_place, 0);
        sf_tg_step st[8];
        int32_t deps[8];
        int nf, ns = sf_taskgraph_pair_steps(tg, pr, 1, st, deps, &nf);
        /* local: the copy and its accumulation; remote: pack, message, unpack,
         * and back the same */
        int64_t want_local[] = {rows, rows};
        int64_t want_remote[] = {rows, 0, 1, 1, 0, rows};
        const int64_t *want = pr->src_dev == pr->dst_dev ? want_local : want_remote;
        assert_int_equal(ns, pr->src_dev == pr->dst_dev ? 2 : 6);
        for (int i = 0; i < ns; i++) {
            if (st[i].kind != SF_STEP_COPY) {
                assert_int_equal(want[i], 0);
                continue;
            }
            assert_true(st[i].runs == want[i]);
            sf_tg_use u;
            assert_int_equal(sf_tg_price_step(&pc, &st[i], NULL, &u), 1);
            double bytes_s = st[i].moved * (double)(st[i].numel * 4) / 8e9;
            assert_true(fabs(u.dur_s - (bytes_s + (double)want[i] * 5e-9)) < 1e-15);
        }
    }
    sf_taskgraph_free(tg);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(m0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_order_rule),
        cmocka_unit_test(test_relabel_invariance),
        cmocka_unit_test(test_copies_count_runs),
        cmocka_unit_test(test_copies_follow_the_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
