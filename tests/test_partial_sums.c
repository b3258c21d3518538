/*
 * test_partial_sums.c - a linear split along its input features (a reduction
 * dimension) in the planner: the task graph reduces its partial sums into what
 * the consumer needs (an all-reduce, a reduce-scatter, a reduce to one device),
 * with the duals backward; the simulator prices the steps and delta simulation
 * equals full simulation with reduce splits; strategy JSON leaves a reduce
 * degree of 1 out and reads it back; the proposal draws reduce degrees only
 * when asked (the searches with them: tests/cli_partial_sums.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "soapflow/graph.h"
#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

/* x (8, 16, 32) -> fc1 (column-parallel, 64 out) -> fc2 (row-parallel, 32 out) -> ln */
static sf_graph *mlp(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("mlp");
    sf_shape s = sf_shape_make(3, (int64_t[]){8, 16, 32});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 64;
    int a = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    p.linear.out_features = 32;
    int b = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    sf_op_params q;
    sf_op_params_default(SF_OP_LAYERNORM, &q);
    int c = sf_graph_add_op(g, SF_OP_LAYERNORM, "ln", &q, (sf_tensor_ref[]){{b, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0 && b >= 0 && c >= 0);
    return g;
}

static void set(sf_strategy *s, const sf_graph *g, const char *name, const int *deg, int first) {
    const sf_op *op = sf_graph_op(g, sf_graph_find(g, name));
    sf_config *c = sf_strategy_config(s, op->id);
    memset(c, 0, sizeof *c);
    assert_int_equal(sf_config_set_degrees(c, op->space.ndim, deg), SF_OK);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(first + p);
}

/* fc2 split 4 ways on its input features on devices 0-3; ln as given; the
 * reductions of edge ln <- fc2. */
static int reduce_of(sf_taskgraph *tg, const sf_graph *g, sf_strategy *s, sf_tg_reduces *rd,
                     const sf_tg_pair **pr, int *n_pairs) {
    for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
    *n_pairs = sf_taskgraph_edge(tg, sf_graph_find(g, "ln"), 0, pr);
    assert_true(*n_pairs >= 0);
    (void)s;
    return sf_taskgraph_edge_reduce(tg, rd);
}

static void test_reduction_kinds(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = mlp();
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    set(s, g, "fc1", (int[]){1, 1, 4, 1}, 0);
    set(s, g, "fc2", (int[]){1, 1, 1, 4}, 0);
    sf_taskgraph *tg = sf_taskgraph_new(g, 4, &err);
    assert_non_null(tg);
    sf_taskgraph_set_strategy(tg, s);
    sf_tg_reduces rd;
    const sf_tg_pair *pr;
    int n;

    /* ln whole on device 0: a reduce to device 0, three messages, a broadcast back */
    set(s, g, "ln", (int[]){1, 1, 1}, 0);
    assert_int_equal(reduce_of(tg, g, s, &rd, &pr, &n), 1);
    assert_int_equal(rd.groups[0].kind, SF_REDUCE_ONE);
    assert_int_equal(rd.groups[0].n_parts, 4);
    assert_int_equal(rd.groups[0].numel, 8 * 16 * 32);
    assert_int_equal(rd.groups[0].n_fwd, 3);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(rd.steps[q].kind, SF_STEP_P2P);
        assert_int_equal(rd.steps[q].dev, q + 1);
        assert_int_equal(rd.steps[q].peer, 0);
    }
    assert_int_equal(rd.groups[0].n_steps, 4);
    assert_int_equal(rd.steps[3].kind, SF_STEP_BROADCAST);
    assert_int_equal(rd.steps[3].n_group, 4);
    assert_int_equal(n, 1); /* one pair from the first part, local */
    assert_int_equal(pr[0].prod_part, 0);
    assert_int_equal(pr[0].src_dev, 0);

    /* ln split on T over the same devices: a reduce-scatter (sequence parallelism) */
    set(s, g, "ln", (int[]){1, 4, 1}, 0);
    assert_int_equal(reduce_of(tg, g, s, &rd, &pr, &n), 1);
    assert_int_equal(rd.groups[0].kind, SF_REDUCE_SCATTER);
    assert_int_equal(rd.steps[0].kind, SF_STEP_REDUCE_SCATTER);
    assert_int_equal(rd.steps[1].kind, SF_STEP_ALL_GATHER);
    assert_int_equal(n, 4);
    for (int q = 0; q < 4; q++) { /* each ln part reads its chunk where it lies */
        assert_int_equal(pr[q].src_dev, pr[q].dst_dev);
        assert_int_equal(pr[q].numel, 8 * 4 * 32);
        assert_int_equal(rd.chunks[rd.groups[0].part_start + q].lo[1], 4 * q);
    }

    sf_strategy_free(s);
    sf_taskgraph_free(tg);
    sf_graph_free(g);

    /* an all-reduce: x -> fc2 (row-parallel) -> fc3 (column-parallel) */
    g = sf_graph_new("ar");
    sf_shape sh = sf_shape_make(2, (int64_t[]){8, 32});
    int x = sf_graph_add_input(g, "x", &sh, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 16;
    int b = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    int c = sf_graph_add_op(g, SF_OP_LINEAR, "fc3", &p, (sf_tensor_ref[]){{b, 0}}, 1, &err);
    assert_true(c >= 0);
    s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    set(s, g, "fc2", (int[]){1, 1, 4}, 0);
    set(s, g, "fc3", (int[]){1, 4, 1}, 0);
    tg = sf_taskgraph_new(g, 4, &err);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < 3; i++) sf_taskgraph_set_tiles(tg, i);
    n = sf_taskgraph_edge(tg, c, 0, &pr);
    assert_int_equal(sf_taskgraph_edge_reduce(tg, &rd), 1);
    assert_int_equal(rd.groups[0].kind, SF_REDUCE_ALL);
    assert_int_equal(rd.n_steps, 2);
    assert_int_equal(rd.steps[0].kind, SF_STEP_ALL_REDUCE);
    assert_int_equal(rd.steps[0].payload, SF_PAYLOAD_ACT);
    assert_int_equal(rd.steps[1].kind, SF_STEP_ALL_REDUCE);
    assert_int_equal(rd.steps[1].payload, SF_PAYLOAD_GRAD);
    assert_int_equal(n, 4);
    for (int q = 0; q < 4; q++) {
        assert_int_equal(pr[q].prod_part, q); /* each reads the sum on its device */
        assert_int_equal(pr[q].src_dev, q);
        assert_int_equal(pr[q].numel, 8 * 16);
    }
    /* the same edge unsplit: no reductions */
    set(s, g, "fc2", (int[]){1, 4, 1}, 0);
    sf_taskgraph_set_tiles(tg, b);
    sf_taskgraph_edge(tg, c, 0, &pr);
    assert_int_equal(sf_taskgraph_edge_reduce(tg, &rd), 0);
    sf_taskgraph_free(tg);
    sf_strategy_free(s);
    sf_graph_free(g);
}

static double run_full(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                       const sf_strategy *s) {
    sf_error err = {0};
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    sf_sim_free(sim);
    return r.iter_s;
}

/* How many dimensions of one kind a move splits: a counter of random_moves. */
typedef int (*split_count)(const sf_graph *g, int op, const sf_config *c);

/* iters random moves from s: an operator in [1, 1 + n_choice), a config drawn at
 * opt-in level `level`, each applied by delta simulation (from a full run of s)
 * and compared with a full simulation of the strategy, exactly. Returns the
 * sum of count over the valid moves. */
static int random_moves(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        sf_strategy *s, uint64_t seed, int iters, int n_choice, int level,
                        split_count count) {
    sf_error err = {0};
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    int n = 0;
    for (int it = 0; it < iters; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)n_choice);
        const sf_op *o = sf_graph_op(g, op);
        sf_config c;
        sf_config_random_in(o, m, level, &rng, &c);
        if (sf_config_validate(o, m, &c, NULL) != SF_OK) continue;
        n += count(g, op, &c);
        assert_int_equal(sf_sim_update(sim, op, &c, &r, &err), SF_OK);
        sf_config_copy(sf_strategy_config(s, op), &c);
        assert_true(r.iter_s == run_full(g, m, cm, s));
    }
    sf_sim_free(sim);
    return n;
}

/* Random moves with reduce splits: delta equals full, exactly; and the
 * all-reduce after a row-parallel linear costs time. */
static void test_sim_delta_equals_full(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = mlp();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(cm);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    sf_rng rng;
    sf_rng_seed(&rng, 25);
    int n_ops = sf_graph_num_ops(g), reduced = 0;
    for (int it = 0; it < 400; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n_ops - 1));
        const sf_op *o = sf_graph_op(g, op);
        sf_config c;
        sf_config_random(o, m, &rng, &c);
        if (o->kinds[o->space.ndim - 1] == SF_DIM_REDUCE && sf_rng_below(&rng, 2)) {
            /* a reduce degree beside what the proposal drew, within the part budget */
            int deg[SF_MAX_DIMS];
            for (int d = 0; d < c.ndim; d++) deg[d] = c.degree[d];
            int rdeg = 2 << sf_rng_below(&rng, 2);
            if (c.n_parts * rdeg > 16) /* keep the sample split alone */
                for (int d = 1; d < c.ndim; d++) deg[d] = 1;
            if (deg[0] * rdeg > 16) deg[0] = 16 / rdeg;
            {
                deg[c.ndim - 1] = rdeg;
                int first = (int)sf_rng_below(&rng, 16), mix = (int)sf_rng_below(&rng, 2);
                assert_int_equal(sf_config_set_degrees(&c, c.ndim, deg), SF_OK);
                /* distinct devices, or pairs of parts sharing one (a local reduction) */
                for (int p = 0; p < c.n_parts; p++)
                    c.device[p] = (int16_t)((first + (mix ? p / 2 : p)) % 16);
            }
        }
        if (sf_config_validate(o, m, &c, NULL) != SF_OK) continue;
        for (int d = 0; d < c.ndim; d++) reduced += o->kinds[d] == SF_DIM_REDUCE && c.degree[d] > 1;
        assert_int_equal(sf_sim_update(sim, op, &c, &r, &err), SF_OK);
        *sf_strategy_config(s, op) = c;
        double full = run_full(g, m, cm, s);
        assert_true(r.iter_s == full);
    }
    assert_true(reduced > 50);
    sf_sim_free(sim);

    /* Megatron's MLP on 4 devices with sequence parallelism: the reduce-scatter
     * takes time, so the same plan with fc2 column-parallel (no partial sums,
     * and ln then reads pieces by messages) differs */
    sf_strategy_single(s, g, 0);
    set(s, g, "fc1", (int[]){1, 1, 4, 1}, 0);
    set(s, g, "fc2", (int[]){1, 1, 1, 4}, 0);
    set(s, g, "ln", (int[]){1, 4, 1}, 0);
    double rs = run_full(g, m, cm, s);
    set(s, g, "fc2", (int[]){1, 1, 1, 1}, 0);
    double one = run_full(g, m, cm, s);
    assert_true(rs > 0 && one > 0 && rs != one);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* x (8, 16, 10, 10) -> conv1 (32, 3x3, pad 1) -> relu -> conv2 (16, 3x3, pad 1)
 * -> gconv (16, 1x1, groups 4) */
static sf_graph *cnn(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("cnn");
    sf_shape s = sf_shape_make(4, (int64_t[]){8, 16, 10, 10});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 32;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int a = sf_graph_add_op(g, SF_OP_CONV2D, "conv1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params q;
    sf_op_params_default(SF_OP_RELU, &q);
    int r = sf_graph_add_op(g, SF_OP_RELU, "relu", &q, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    p.conv2d.out_channels = 16;
    int b = sf_graph_add_op(g, SF_OP_CONV2D, "conv2", &p, (sf_tensor_ref[]){{r, 0}}, 1, &err);
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 1;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 0;
    p.conv2d.groups = 4;
    int c = sf_graph_add_op(g, SF_OP_CONV2D, "gconv", &p, (sf_tensor_ref[]){{b, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0 && r >= 0 && b >= 0 && c >= 0);
    return g;
}

/* conv2d split on its input channels: the task graph reduces the partial sums
 * for the consumer (a reduce to one device, an all-reduce), random moves with
 * channel splits keep delta equal to full simulation, exactly; a grouped conv
 * cannot be split so; a file with four conv degrees reads as reduce degree 1. */
/* The reduction dimensions c splits when op is of type t. */
static int reduce_splits(const sf_graph *g, int op, const sf_config *c, sf_op_type t) {
    const sf_op *o = sf_graph_op(g, op);
    int n = 0;
    for (int d = 0; d < c->ndim; d++)
        n += o->type == t && o->kinds[d] == SF_DIM_REDUCE && c->degree[d] > 1;
    return n;
}

static int conv_channel_splits(const sf_graph *g, int op, const sf_config *c) {
    return reduce_splits(g, op, c, SF_OP_CONV2D);
}

static int head_splits(const sf_graph *g, int op, const sf_config *c) {
    return reduce_splits(g, op, c, SF_OP_ATTENTION);
}

static int class_splits(const sf_graph *g, int op, const sf_config *c) {
    const sf_op *o = sf_graph_op(g, op);
    int d = sf_op_inner_dim(o);
    return o->type == SF_OP_SOFTMAX_CE && d >= 0 && d < c->ndim && c->degree[d] > 1;
}

static void test_conv_channels(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = cnn();
    const sf_op *c2 = sf_graph_op(g, sf_graph_find(g, "conv2"));
    const sf_op *gc = sf_graph_op(g, sf_graph_find(g, "gconv"));
    assert_int_equal(c2->space.ndim, 5);
    assert_int_equal(c2->kinds[4], SF_DIM_REDUCE);
    assert_int_equal(c2->space.d[4], 32);
    assert_int_equal(gc->space.d[4], 1); /* groups: not splittable */
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    sf_config bad;
    memset(&bad, 0, sizeof bad);
    sf_config_set_degrees(&bad, 5, (int[]){1, 1, 1, 1, 2});
    bad.device[1] = 1;
    assert_int_not_equal(sf_config_validate(gc, m, &bad, NULL), SF_OK);

    /* conv2 on devices 0-3, 4 ways on its input channels; gconv whole on 0: a
     * reduce to device 0, three messages and a broadcast back */
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    set(s, g, "conv2", (int[]){1, 1, 1, 1, 4}, 0);
    sf_taskgraph *tg = sf_taskgraph_new(g, 4, &err);
    assert_non_null(tg);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
    const sf_tg_pair *pr;
    assert_true(sf_taskgraph_edge(tg, gc->id, 0, &pr) >= 0);
    sf_tg_reduces rd;
    assert_int_equal(sf_taskgraph_edge_reduce(tg, &rd), 1);
    assert_int_equal(rd.groups[0].kind, SF_REDUCE_ONE);
    assert_int_equal(rd.groups[0].n_parts, 4);
    assert_int_equal(rd.groups[0].numel, 8 * 16 * 10 * 10);
    assert_int_equal(rd.groups[0].n_fwd, 3);
    sf_taskgraph_free(tg);

    /* the partial sums and their reduction cost time: whole conv2 differs */
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(cm);
    double split = run_full(g, m, cm, s);
    set(s, g, "conv2", (int[]){1, 1, 1, 1, 1}, 0);
    double whole = run_full(g, m, cm, s);
    assert_true(split > 0 && whole > 0 && split != whole);

    /* JSON: four degrees read as a reduce degree of 1; a channel split reads back */
    set(s, g, "conv2", (int[]){2, 1, 1, 1, 4}, 0);
    char *text = sf_strategy_to_json(s, g, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"conv2\": {\"degrees\": [2, 1, 1, 1, 4]"));
    assert_non_null(strstr(text, "\"conv1\": {\"degrees\": [1, 1, 1, 1], \"devices\": [0]}"));
    sf_strategy *back = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(back, text, "mem.json", g, NULL, &err), SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(back, i), sf_strategy_get(s, i)));
    free(text);
    sf_strategy_free(back);

    /* random moves with channel splits: delta equals full, exactly */
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int reduced = random_moves(g, m, cm, s, 2525, 300, sf_graph_num_ops(g) - 1, SF_OPT_IN_REDUCE,
                               conv_channel_splits);
    assert_true(reduced > 20);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* A reduce degree of 1 is left out of the file, so files written before
 * partial sums read and write the same bytes; a reduce degree above 1 is the
 * last entry of "degrees" and reads back. */
static void test_json_round_trip(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = mlp();
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    char *text = sf_strategy_to_json(s, g, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"fc2\": {\"degrees\": [1, 1, 1], \"devices\": [0]}"));
    free(text);
    set(s, g, "fc2", (int[]){2, 1, 1, 4}, 0);
    text = sf_strategy_to_json(s, g, &err);
    assert_non_null(strstr(text, "\"fc2\": {\"degrees\": [2, 1, 1, 4]"));
    sf_strategy *back = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(back, text, "mem.json", g, NULL, &err), SF_OK);
    int fc2 = sf_graph_find(g, "fc2");
    assert_true(sf_config_equal(sf_strategy_get(back, fc2), sf_strategy_get(s, fc2)));
    free(text);
    sf_strategy_free(back);
    sf_strategy_free(s);
    sf_graph_free(g);
}

/* Operators tied across types (GPT's wte and lm_head) keep their reduction
 * dimension; files leave its degree out when it is 1 (written before the
 * embedding's reduction existed, and by the writer since). */
static void test_json_tied_tail(void **state) {
    (void)state;
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 4;
    o.layers = 1;
    o.hidden = 32;
    o.heads = 4;
    o.seq_len = 8;
    o.vocab = 16;
    sf_graph *g = sf_model_build("gpt", &o, &err);
    assert_non_null(g);
    int wte = sf_graph_find(g, "wte");
    assert_true(wte >= 0);
    assert_int_equal(sf_graph_op(g, wte)->space.ndim, 4);
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    char *text = sf_strategy_to_json(s, g, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"wte\": {\"degrees\": [1, 1, 1], \"devices\": [0]}"));
    assert_non_null(strstr(text, "\"lm_head\": {\"degrees\": [1, 1, 1], \"devices\": [0]}"));
    sf_strategy *back = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(back, text, "old.json", g, NULL, &err), SF_OK);
    assert_true(sf_config_equal(sf_strategy_get(back, wte), sf_strategy_get(s, wte)));
    free(text);
    sf_strategy_free(back);
    sf_strategy_free(s);
    sf_graph_free(g);
}

/* The proposal: reduction dimensions only when asked, and without them the
 * same draws as sf_config_random. */
static void test_random_proposals(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = mlp();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    const sf_op *fc2 = sf_graph_op(g, sf_graph_find(g, "fc2"));
    sf_rng a, b, c;
    sf_rng_seed(&a, 7);
    sf_rng_seed(&b, 7);
    sf_rng_seed(&c, 7);
    int split = 0;
    for (int i = 0; i < 500; i++) {
        sf_config x, y, z;
        sf_config_random(fc2, m, &a, &x);
        sf_config_random_in(fc2, m, 0, &b, &y);
        assert_true(sf_config_equal(&x, &y));
        assert_int_equal(x.degree[3], 1);
        sf_config_random_in(fc2, m, 1, &c, &z);
        assert_int_equal(sf_config_validate(fc2, m, &z, &err), SF_OK);
        split += z.degree[3] > 1;
    }
    assert_true(split > 100);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* A matmul split on K feeds a consumer on one device: a reduce to it; and the
 * size limit of a parallel space leaves its reduction out (a linear of 2^36
 * outputs over 2^14 inputs: the space's product is 2^50, its output's 2^36). */
static void test_matmul_and_limits(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("mm");
    sf_shape sa = sf_shape_make(2, (int64_t[]){8, 32}), sb = sf_shape_make(2, (int64_t[]){32, 16});
    int a = sf_graph_add_input(g, "a", &sa, 0, &err), b = sf_graph_add_input(g, "b", &sb, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    int mm = sf_graph_add_op(g, SF_OP_MATMUL, "mm", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}}, 2, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r = sf_graph_add_op(g, SF_OP_RELU, "r", &p, (sf_tensor_ref[]){{mm, 0}}, 1, &err);
    assert_true(a >= 0 && b >= 0 && mm >= 0 && r >= 0);
    assert_int_equal(sf_graph_op(g, mm)->kinds[2], SF_DIM_REDUCE);
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    set(s, g, "mm", (int[]){1, 1, 4}, 0);
    sf_taskgraph *tg = sf_taskgraph_new(g, 4, &err);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < 4; i++) sf_taskgraph_set_tiles(tg, i);
    const sf_tg_pair *pr;
    sf_taskgraph_edge(tg, r, 0, &pr);
    sf_tg_reduces rd;
    assert_int_equal(sf_taskgraph_edge_reduce(tg, &rd), 1);
    assert_int_equal(rd.groups[0].kind, SF_REDUCE_ONE);
    assert_int_equal(rd.groups[0].numel, 8 * 16);
    /* the operands' pairs: part i reads columns [8i, 8i + 8) of a */
    int n = sf_taskgraph_edge(tg, mm, 0, &pr);
    assert_int_equal(n, 4);
    for (int q = 0; q < 4; q++) assert_int_equal(pr[q].region.lo[1], 8 * q);
    sf_taskgraph_free(tg);
    sf_strategy_free(s);
    sf_graph_free(g);

    g = sf_graph_new("wide");
    sf_shape sx = sf_shape_make(2, (int64_t[]){(int64_t)1 << 16, (int64_t)1 << 14});
    int x = sf_graph_add_input(g, "x", &sx, 0, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = (int64_t)1 << 20;
    p.linear.bias = 0;
    assert_true(sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err) >=
                0);
    sf_graph_free(g);
}

/* OptCNN with reduction degrees: on fc1 (4096 -> 8192) then fc2 (8192 -> 16)
 * at batch 8 on four P100s its optimum splits fc2 on its inputs, below the
 * optimum without them, and the additive cost of the strategy it returns is
 * the optimum it reports (the edge tables and the direct sum price the
 * reductions alike). */
static void test_optcnn_reduce(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("rp");
    sf_shape s = sf_shape_make(2, (int64_t[]){8, 4096});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 8192;
    int a = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    p.linear.out_features = 16;
    int b = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    assert_true(b >= 0);
    sf_machine *full = sf_machine_preset("p100-4x4", &err);
    sf_machine *m = sf_machine_subset(full, 4, &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    double cost[2];
    for (int r = 0; r < 2; r++) {
        sf_optcnn_options o;
        sf_optcnn_options_default(&o);
        o.reduce = r;
        sf_strategy *st = sf_strategy_new(g);
        sf_optcnn_result res;
        assert_int_equal(sf_optcnn_search(g, m, cm, &o, st, &res, &err), SF_OK);
        assert_true(res.exact);
        const sf_config *c2 = sf_strategy_get(st, b);
        int rdeg = c2->ndim == 3 ? c2->degree[2] : 1;
        assert_true(r ? rdeg > 1 : rdeg == 1);
        double direct = sf_optcnn_cost(g, m, cm, &o, st);
        assert_true(fabs(direct - res.cost_s) <= 1e-12 * res.cost_s);
        cost[r] = res.cost_s;
        sf_strategy_free(st);
    }
    assert_true(cost[1] < cost[0]);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_machine_free(full);
    sf_graph_free(g);
}

/* x (8, 16, 32) -> attn (self, causal, 4 heads) -> fc (32 out) -> ln */
static sf_graph *attn_net(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("attn");
    sf_shape s = sf_shape_make(3, (int64_t[]){8, 16, 32});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 32;
    p.attention.heads = 4;
    p.attention.causal = 1;
    int a = sf_graph_add_op(g, SF_OP_ATTENTION, "attn", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 32;
    int b = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    int c = sf_graph_add_op(g, SF_OP_LAYERNORM, "ln", &p, (sf_tensor_ref[]){{b, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0 && b >= 0 && c >= 0);
    return g;
}

/* Attention split on its heads: the proposal draws head degrees when asked;
 * random moves with them keep delta equal to full simulation, exactly; a head
 * degree reads back from JSON, and a file without one means one head part. */
static void test_attention_heads(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = attn_net();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(cm);
    int attn = sf_graph_find(g, "attn");
    const sf_op *ao = sf_graph_op(g, attn);
    assert_int_equal(ao->space.ndim, 4);
    assert_int_equal(ao->kinds[3], SF_DIM_REDUCE);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int heads =
        random_moves(g, m, cm, s, 26, 400, sf_graph_num_ops(g) - 1, SF_OPT_IN_INNER, head_splits);
    assert_true(heads > 30);

    /* heads 4 ways on devices 0-3 feeding fc on device 0 (a reduce to one),
     * against the whole attention on device 0: the reduce is priced */
    sf_strategy_single(s, g, 0);
    double one = run_full(g, m, cm, s);
    set(s, g, "attn", (int[]){1, 1, 1, 4}, 0);
    double four = run_full(g, m, cm, s);
    assert_true(one > 0 && four > 0 && four != one);
    char *text = sf_strategy_to_json(s, g, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"attn\": {\"degrees\": [1, 1, 1, 4]"));
    sf_strategy *back = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(back, text, "mem.json", g, NULL, &err), SF_OK);
    assert_true(sf_config_equal(sf_strategy_get(back, attn), sf_strategy_get(s, attn)));
    free(text);
    set(s, g, "attn", (int[]){2, 1, 1, 1}, 0);
    text = sf_strategy_to_json(s, g, &err);
    assert_non_null(strstr(text, "\"attn\": {\"degrees\": [2, 1, 1], \"devices\": [0, 1]}"));
    assert_int_equal(sf_strategy_parse_json(back, text, "mem.json", g, NULL, &err), SF_OK);
    assert_true(sf_config_equal(sf_strategy_get(back, attn), sf_strategy_get(s, attn)));
    free(text);
    sf_strategy_free(back);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* x (8, 16, 32) -> fc (64 classes) -> sce (softmax_ce) */
static sf_graph *lm_head(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("lm");
    sf_shape s = sf_shape_make(3, (int64_t[]){8, 16, 32});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 64;
    int a = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int b = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "sce", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0 && b >= 0);
    return g;
}

/* Vocabulary-parallel cross-entropy: softmax_ce's classes are its inner
 * dimension, proposed only when asked; a class split lists, per group of parts
 * that differ only in their classes, two all-reduces of per-row statistics
 * (max; sum of exponentials and target logit) over the group's devices; the
 * simulator runs them (delta equals full) and counts their bytes; OptCNN adds
 * them to the node. */
static void test_softmax_ce_classes(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = lm_head();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(cm);
    int sce = sf_graph_find(g, "sce"), fc = sf_graph_find(g, "fc");
    const sf_op *so = sf_graph_op(g, sce), *fo = sf_graph_op(g, fc);
    assert_int_equal(sf_op_inner_dim(so), 2);
    assert_int_equal(so->kinds[2], SF_DIM_ATTRIBUTE);
    assert_true(sf_op_dim_opt_in(so, 2) == SF_OPT_IN_INNER && !sf_op_dim_opt_in(so, 0) &&
                !sf_op_dim_opt_in(so, 1));
    assert_int_equal(sf_op_inner_dim(fo), -1);
    assert_true(sf_op_dim_opt_in(fo, 3) && !sf_op_dim_opt_in(fo, 2));
    sf_rng a, b;
    sf_rng_seed(&a, 8);
    sf_rng_seed(&b, 8);
    int split = 0;
    for (int i = 0; i < 300; i++) {
        sf_config x, y;
        sf_config_random_in(so, m, 0, &a, &x);
        assert_int_equal(x.degree[2], 1);
        sf_config_random_in(so, m, SF_OPT_IN_REDUCE, &a, &x); /* reductions alone */
        assert_int_equal(x.degree[2], 1);
        sf_config_random_in(so, m, SF_OPT_IN_INNER, &b, &y);
        split += y.degree[2] > 1;
    }
    assert_true(split > 50);

    /* the steps: samples in 2, classes in 4 on devices 0-7 */
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    set(s, g, "sce", (int[]){2, 1, 4}, 0);
    sf_taskgraph *tg = sf_taskgraph_new(g, 16, &err);
    assert_non_null(tg);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
    sf_tg_inner in;
    assert_int_equal(sf_taskgraph_op_inner(tg, sce, &in), 2);
    assert_int_equal(in.n_steps, 4);
    for (int gi = 0; gi < 2; gi++) {
        const sf_tg_inner_group *gr = &in.groups[gi];
        assert_int_equal(gr->n_parts, 4);
        assert_true(gr->rows == 4 * 16);
        for (int r = 0; r < 4; r++) assert_int_equal(in.parts[gr->part_start + r], 4 * gi + r);
        const sf_tg_step *s0 = &in.steps[gr->step_start], *s1 = s0 + 1;
        assert_int_equal(s0->kind, SF_STEP_ALL_REDUCE);
        assert_int_equal(s1->kind, SF_STEP_ALL_REDUCE);
        assert_true(s0->numel == 64 && s1->numel == 128);
        assert_int_equal(s0->n_group, 4);
        assert_int_equal(in.devs[s0->group], 4 * gi);
        assert_int_equal(s0->n_deps, 0);
        assert_int_equal(s1->n_deps, 1);
        assert_int_equal(in.deps[s1->dep], gr->step_start);
    }
    assert_int_equal(sf_taskgraph_op_inner(tg, fc, &in), 0); /* none inside a linear */
    /* parts sharing devices in pairs: a ring of two; all on one device: none */
    sf_config *c = sf_strategy_config(s, sce);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(p / 2);
    sf_taskgraph_set_tiles(tg, sce);
    assert_int_equal(sf_taskgraph_op_inner(tg, sce, &in), 2);
    assert_int_equal(in.steps[0].n_group, 2);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(p < 4 ? 0 : 1);
    sf_taskgraph_set_tiles(tg, sce);
    assert_int_equal(sf_taskgraph_op_inner(tg, sce, &in), 0);
    sf_taskgraph_free(tg);

    /* the simulator: fc column-parallel on 0-3, sce on the same classes: x goes
     * to devices 1-3 (3 x 4096 floats), the pairs into sce are in place, and
     * the statistics' two ring all-reduces of 128 and 256 floats over 4
     * devices send 2 * 3 * (128 + 256) floats */
    sf_strategy_single(s, g, 0);
    set(s, g, "fc", (int[]){1, 1, 4, 1}, 0);
    set(s, g, "sce", (int[]){1, 1, 4}, 0);
    sf_sim_options so_;
    sf_sim_options_default(&so_);
    sf_sim *sim = sf_sim_new(g, m, cm, &so_, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_true(r.transfer_bytes == (3 * 4096 + 2 * 3 * (128 + 256)) * 4);
    double split_s = r.iter_s;
    set(s, g, "sce", (int[]){1, 1, 1}, 0);
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    assert_true(r.iter_s != split_s);
    sf_sim_free(sim);

    /* OptCNN's node cost of the class split holds the two all-reduces: more
     * than its compute alone (the same config with the parts on one device
     * has no steps and the same tiles) */
    sf_optcnn_options o;
    sf_optcnn_options_default(&o);
    set(s, g, "sce", (int[]){1, 1, 4}, 0);
    double four = sf_optcnn_cost(g, m, cm, &o, s);
    c = sf_strategy_config(s, sce);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = 0;
    double one = sf_optcnn_cost(g, m, cm, &o, s);
    assert_true(four > 0 && one > 0 && four != one);

    /* random moves with class splits: delta equals full, exactly */
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int classes = random_moves(g, m, cm, s, 27, 300, 2, SF_OPT_IN_INNER, class_splits);
    assert_true(classes > 30);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* A small GPT: wte (N, T, D | V) and lm_head (N, T, V | D) tied, V = 16, D = 32. */
static sf_graph *tied_gpt(void) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 4, o.layers = 1, o.hidden = 32, o.heads = 4, o.seq_len = 8, o.vocab = 16;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    assert_non_null(g);
    return g;
}

/* deg over the four dimensions of wte or lm_head, parts on devices first + p * step. */
static void set_tied(sf_strategy *s, const sf_graph *g, const char *name, int d2, int d3, int first,
                     int step) {
    int deg[SF_MAX_DIMS] = {1, 1, d2, d3, 1, 1};
    const sf_op *op = sf_graph_op(g, sf_graph_find(g, name));
    sf_config *c = sf_strategy_config(s, op->id);
    assert_int_equal(sf_config_set_degrees(c, op->space.ndim, deg), SF_OK);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(first + p * step);
}

/* Tied weights split alike are valid, whatever the devices; split differently
 * (overlapping in part) they are refused by validation, by the simulator's full
 * run and by its delta update, with one line naming both operators; the task
 * graph's shards are the table's pieces, each on the devices of both
 * operators' parts, and every device holds its pieces once. */
static void test_tied_vocab_split(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = tied_gpt();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    assert_non_null(m);
    int wte = sf_graph_find(g, "wte"), head = sf_graph_find(g, "lm_head");
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    struct {
        int w2, w3, h2, h3, ok;
    } cases[] = {
        {1, 2, 2, 1, 1}, /* vocabulary 2 ways on both */
        {1, 3, 3, 1, 1}, /* 3 ways: 16 rows split unevenly, alike */
        {2, 1, 1, 2, 1}, /* width 2 ways on both (the head's a partial sum) */
        {2, 2, 2, 2, 1}, /* both */
        {1, 2, 4, 1, 0}, /* vocabulary 2 ways against 4 */
        {2, 1, 2, 1, 0}, /* wte's width against the head's vocabulary */
        {1, 2, 1, 2, 0}, /* wte's vocabulary against the head's width */
        {1, 1, 2, 1, 0}, /* whole against split */
    };
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        set_tied(s, g, "wte", cases[k].w2, cases[k].w3, 0, 1);
        set_tied(s, g, "lm_head", cases[k].h2, cases[k].h3, 4, 1); /* other devices */
        err = (sf_error){0};
        sf_status st = sf_strategy_validate(s, g, m, &err);
        if (!cases[k].ok) {
            assert_int_equal(st, SF_ERR_INVALID);
            assert_non_null(strstr(err.msg, "'wte'"));
            assert_non_null(strstr(err.msg, "'lm_head'"));
            assert_null(strchr(err.msg, '\n'));
            sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
            sf_sim_result r;
            assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_ERR_INVALID);
            sf_sim_free(sim);
            continue;
        }
        assert_int_equal(st, SF_OK);
        sf_taskgraph *tg = sf_taskgraph_new(g, 16, &err);
        sf_taskgraph_set_strategy(tg, s);
        for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
        sf_tg_sync sy;
        assert_int_equal(sf_taskgraph_sync(tg, wte, &sy), SF_OK);
        int pieces = cases[k].w2 * cases[k].w3;
        assert_int_equal(sy.n_shards, pieces);
        int64_t total = 0;
        for (int i = 0; i < sy.n_shards; i++) {
            total += sy.shards[i].numel;
            assert_int_equal(sy.shards[i].n_devs, 2); /* a part of each, devices 0-3 and 4-7 */
            assert_true(sy.devs[sy.shards[i].dev_start] < 4);
            assert_true(sy.devs[sy.shards[i].dev_start + 1] >= 4);
        }
        assert_true(total == 16 * 32);
        /* on one device set, both operators' parts of a piece are one copy */
        set_tied(s, g, "lm_head", cases[k].h2, cases[k].h3, 0, 1);
        sf_config c;
        assert_int_equal(sf_config_tie_follow(sf_graph_op(g, wte), sf_strategy_get(s, wte),
                                              sf_graph_op(g, head), m, SF_OPT_IN_INNER, &c),
                         1);
        sf_config_copy(sf_strategy_config(s, head), &c);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
        assert_int_equal(sf_taskgraph_sync(tg, wte, &sy), SF_OK);
        assert_int_equal(sy.n_shards, pieces);
        int64_t want[16] = {0};
        for (int i = 0; i < sy.n_shards; i++) {
            assert_int_equal(sy.shards[i].n_devs, 1);
            int e0 = sy.ent_start[sy.shards[i].dev_start];
            int e1 = sy.ent_start[sy.shards[i].dev_start + 1];
            assert_int_equal(e1 - e0, 2); /* wte's part and the head's */
            assert_true(sy.ents[e0].op == wte && sy.ents[e0 + 1].op == head);
            want[sy.devs[sy.shards[i].dev_start]] += sy.shards[i].numel;
        }
        /* per device: each piece once, beside the other groups' shards */
        for (int ow = 0; ow < sf_graph_num_ops(g); ow++) {
            if (ow == wte || sf_taskgraph_owner(tg, ow) != ow) continue;
            assert_int_equal(sf_taskgraph_sync(tg, ow, &sy), SF_OK);
            for (int i = 0; i < sy.n_shards; i++)
                for (int q = 0; q < sy.shards[i].n_devs; q++)
                    want[sy.devs[sy.shards[i].dev_start + q]] += sy.shards[i].numel;
        }
        int64_t per[16];
        assert_int_equal(sf_taskgraph_device_weights(tg, per), SF_OK);
        for (int d = 0; d < 16; d++) assert_true(per[d] == want[d]);
        sf_taskgraph_free(tg);
    }
    /* the simulator refuses a delta update that breaks the tie, and keeps its state */
    set_tied(s, g, "wte", 1, 2, 0, 1);
    set_tied(s, g, "lm_head", 2, 1, 0, 1);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    double before = r.iter_s;
    sf_config c;
    sf_config_copy(&c, sf_strategy_get(s, head));
    c.degree[2] = 4, c.n_parts = 4;
    for (int p = 0; p < 4; p++) c.device[p] = (int16_t)p;
    err = (sf_error){0};
    assert_int_equal(sf_sim_update(sim, head, &c, &r, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tied"));
    /* both at once is fine */
    sf_config cw;
    assert_int_equal(sf_config_tie_follow(sf_graph_op(g, head), &c, sf_graph_op(g, wte), m,
                                          SF_OPT_IN_REDUCE, &cw),
                     1);
    assert_int_equal(cw.degree[3], 4);
    const int ops[2] = {head, wte};
    const sf_config cfgs[2] = {c, cw};
    assert_int_equal(sf_sim_update_ops(sim, 2, ops, cfgs, INFINITY, &r, &err), SF_OK);
    sf_config_copy(sf_strategy_config(s, head), &c);
    sf_config_copy(sf_strategy_config(s, wte), &cw);
    assert_true(r.iter_s == run_full(g, m, cm, s));
    assert_int_equal(sf_sim_revert(sim, &r, &err), SF_OK);
    assert_true(r.iter_s == before);
    /* a follower above the opt-in level is refused: the head's width is a reduction */
    set_tied(s, g, "wte", 2, 1, 0, 1);
    assert_int_equal(sf_config_tie_follow(sf_graph_op(g, wte), sf_strategy_get(s, wte),
                                          sf_graph_op(g, head), m, 0, &c),
                     0);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Random moves on the tied GPT from Megatron's layout (wte and the head split
 * 4 ways on the vocabulary): a move of wte or the head that breaks the tie is
 * refused by the simulator, and made with the other lined up by the weights
 * (sf_config_tie_follow); delta equals full, exactly, on every move. Then MCMC
 * with reduction splits keeps every tie. */
static void test_tied_delta_equals_full(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = tied_gpt();
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    assert_non_null(cm);
    int wte = sf_graph_find(g, "wte"), head = sf_graph_find(g, "lm_head");
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_megatron(s, g, m, 4, 0, &err), SF_OK);
    assert_int_equal(sf_strategy_get(s, wte)->degree[3], 4);
    assert_int_equal(sf_strategy_get(s, head)->degree[2], 4);
    for (int p = 0; p < 16; p++)
        assert_int_equal(sf_strategy_get(s, wte)->device[p], sf_strategy_get(s, head)->device[p]);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    sf_rng rng;
    sf_rng_seed(&rng, 28);
    int n_ops = sf_graph_num_ops(g), followed = 0, split = 0;
    for (int it = 0; it < 300; it++) {
        /* half the moves on the tied pair */
        int op = sf_rng_below(&rng, 2) ? (sf_rng_below(&rng, 2) ? wte : head)
                                       : 1 + (int)sf_rng_below(&rng, (uint64_t)(n_ops - 1));
        int ops[2] = {op, -1};
        sf_config cfgs[2];
        sf_config_random_in(sf_graph_op(g, op), m, SF_OPT_IN_REDUCE, &rng, &cfgs[0]);
        int n = 1;
        if (sf_strategy_check_ties(s, g, 1, ops, cfgs, NULL) != SF_OK) {
            assert_int_equal(sf_sim_update(sim, op, &cfgs[0], &r, &err), SF_ERR_INVALID);
            ops[1] = sf_strategy_tie_partner(g, op);
            if (!sf_config_tie_follow(sf_graph_op(g, op), &cfgs[0], sf_graph_op(g, ops[1]), m,
                                      SF_OPT_IN_REDUCE, &cfgs[1]))
                continue;
            n = 2;
            followed++;
        }
        assert_int_equal(sf_sim_update_ops(sim, n, ops, cfgs, INFINITY, &r, &err), SF_OK);
        for (int j = 0; j < n; j++) sf_config_copy(sf_strategy_config(s, ops[j]), &cfgs[j]);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        const sf_config *cw = sf_strategy_get(s, wte);
        split += (cw->ndim > 3 && cw->degree[3] > 1) || cw->degree[2] > 1;
        assert_true(r.iter_s == run_full(g, m, cm, s));
    }
    assert_true(followed > 20);
    assert_true(split > 50);
    sf_sim_free(sim);

    /* MCMC with reduction splits from data parallelism and Megatron's layout */
    sf_strategy *data = sf_strategy_new(g), *best = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(data, g, m), SF_OK);
    assert_int_equal(sf_strategy_megatron(s, g, m, 4, 0, &err), SF_OK);
    const sf_strategy *starts[2] = {data, s};
    sf_mcmc_options mo;
    sf_mcmc_options_default(&mo);
    mo.iters = 600;
    mo.budget_s = 0;
    mo.seed = 3;
    mo.progress = 0;
    mo.reduce = SF_OPT_IN_REDUCE;
    sf_mcmc_result mr;
    assert_int_equal(sf_mcmc_search(g, m, cm, starts, 2, &mo, best, &mr, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(best, g, m, &err), SF_OK);
    sf_strategy_free(data);
    sf_strategy_free(best);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduction_kinds),   cmocka_unit_test(test_sim_delta_equals_full),
        cmocka_unit_test(test_conv_channels),     cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_tied_tail),    cmocka_unit_test(test_random_proposals),
        cmocka_unit_test(test_matmul_and_limits), cmocka_unit_test(test_optcnn_reduce),
        cmocka_unit_test(test_attention_heads),   cmocka_unit_test(test_softmax_ce_classes),
        cmocka_unit_test(test_tied_vocab_split),  cmocka_unit_test(test_tied_delta_equals_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
