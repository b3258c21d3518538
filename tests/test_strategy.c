/* Strategies: part tiles cover the space exactly, validation messages, the
 * short text, the baselines on hand-built and zoo graphs, and the JSON format
 * (round trip, stable bytes, and every error with file, line and operator). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/strategy.h"

/* ---- fixtures ------------------------------------------------------------ */

/* x(8,3,12,12) -> conv1(6) -> relu1 -> pool1 -> conv3(3) -> flatten -> fc1(10)
 * -> relu2 -> fc2(5) -> softmax. conv3 has 3 output channels so that a degree
 * of 5 on its parameter dimension is too many. */
static sf_graph *cnn_graph(int64_t batch) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("tinycnn");
    sf_shape s = sf_shape_make(4, (int64_t[]){batch, 3, 12, 12});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 6;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c1 = sf_graph_add_op(g, SF_OP_CONV2D, "conv1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r1 = sf_graph_add_op(g, SF_OP_RELU, "relu1", &p, (sf_tensor_ref[]){{c1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.kernel[0] = p.pool2d.kernel[1] = 2;
    p.pool2d.stride[0] = p.pool2d.stride[1] = 2;
    int p1 = sf_graph_add_op(g, SF_OP_POOL2D, "pool1", &p, (sf_tensor_ref[]){{r1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 3;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c3 = sf_graph_add_op(g, SF_OP_CONV2D, "conv3", &p, (sf_tensor_ref[]){{p1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_FLATTEN, &p);
    int fl = sf_graph_add_op(g, SF_OP_FLATTEN, "flatten", &p, (sf_tensor_ref[]){{c3, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 10;
    int f1 = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{fl, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r2 = sf_graph_add_op(g, SF_OP_RELU, "relu2", &p, (sf_tensor_ref[]){{f1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 5;
    int f2 = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{r2, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int sm = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "softmax", &p, (sf_tensor_ref[]){{f2, 0}}, 1,
                             &err);
    if (sm < 0) fprintf(stderr, "cnn_graph: %s\n", err.msg);
    assert_true(sm >= 0);
    assert_int_equal(sf_graph_num_ops(g), 10);
    return g;
}

/* Two LSTM layers unrolled in two chunks, as the zoo builds them:
 * tokens(4,8) -> emb -> split(axis 1, 2) -> l0.c0, l0.c1 -> l1.c0, l1.c1 -> concat
 * -> proj(50) -> softmax. */
static sf_graph *rnn_graph(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("tinyrnn");
    sf_shape s = sf_shape_make(2, (int64_t[]){4, 8});
    int tok = sf_graph_add_input(g, "tokens", &s, 1, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 50;
    p.embedding.embedding_dim = 16;
    int emb = sf_graph_add_op(g, SF_OP_EMBEDDING, "emb", &p, (sf_tensor_ref[]){{tok, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 1;
    p.split.parts = 2;
    int sp = sf_graph_add_op(g, SF_OP_SPLIT, "split", &p, (sf_tensor_ref[]){{emb, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 12;
    int a0 = sf_graph_add_op(g, SF_OP_LSTM, "l0.c0", &p, (sf_tensor_ref[]){{sp, 0}}, 1, &err);
    int a1 = sf_graph_add_op(g, SF_OP_LSTM, "l0.c1", &p,
                             (sf_tensor_ref[]){{sp, 1}, {a0, 1}, {a0, 2}}, 3, &err);
    assert_int_equal(sf_graph_share_weights(g, a1, a0, &err), SF_OK);
    int b0 = sf_graph_add_op(g, SF_OP_LSTM, "l1.c0", &p, (sf_tensor_ref[]){{a0, 0}}, 1, &err);
    int b1 = sf_graph_add_op(g, SF_OP_LSTM, "l1.c1", &p,
                             (sf_tensor_ref[]){{a1, 0}, {b0, 1}, {b0, 2}}, 3, &err);
    assert_int_equal(sf_graph_share_weights(g, b1, b0, &err), SF_OK);
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = 1;
    int cc = sf_graph_add_op(g, SF_OP_CONCAT, "concat", &p, (sf_tensor_ref[]){{b0, 0}, {b1, 0}}, 2,
                             &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 50;
    int pr = sf_graph_add_op(g, SF_OP_LINEAR, "proj", &p, (sf_tensor_ref[]){{cc, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int sm = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "softmax", &p, (sf_tensor_ref[]){{pr, 0}}, 1,
                             &err);
    if (sm < 0) fprintf(stderr, "rnn_graph: %s\n", err.msg);
    assert_true(sm >= 0);
    return g;
}

static sf_machine *machine(const char *preset, int nodes, int dpn) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc(preset, &d, &err), SF_OK);
    if (nodes > 0) {
        d.nodes = nodes;
        d.devices_per_node = dpn;
        snprintf(d.name, sizeof d.name, "test-%dx%d", nodes, dpn);
    }
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fprintf(stderr, "machine: %s\n", err.msg);
    assert_non_null(m);
    return m;
}

static const sf_config *cfg(const sf_strategy *s, const sf_graph *g, const char *name) {
    int id = sf_graph_find(g, name);
    assert_true(id >= 0);
    return sf_strategy_get(s, id);
}

/* The config has exactly these degrees and devices first, first+stride, ... */
static void expect_config(const sf_config *c, int ndim, const int *deg, int first, int stride) {
    if (c->ndim == ndim + 1) /* a linear's reduction dimension (its input features): whole */
        assert_int_equal(c->degree[ndim], 1);
    else
        assert_int_equal(c->ndim, ndim);
    int parts = 1;
    for (int i = 0; i < ndim; i++) {
        assert_int_equal(c->degree[i], deg[i]);
        parts *= deg[i];
    }
    assert_int_equal(c->n_parts, parts);
    for (int p = 0; p < parts; p++) assert_int_equal(c->device[p], first + p * stride);
}

/* ---- configs --------------------------------------------------------------- */

static void test_part_tiles_partition(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("t");
    sf_shape s = sf_shape_make(4, (int64_t[]){7, 5, 9, 11});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    const sf_op *op = sf_graph_op(g, x);
    sf_rng rng;
    sf_rng_seed(&rng, 1234);
    sf_tile tiles[SF_MAX_PARTS];
    for (int trial = 0; trial < 500; trial++) {
        int deg[4], prod = 1;
        for (int i = 0; i < 4; i++) {
            int64_t cap = SF_MAX_PARTS / prod;
            if (cap > s.d[i]) cap = s.d[i];
            deg[i] = 1 + (int)sf_rng_below(&rng, (uint64_t)cap);
            prod *= deg[i];
        }
        sf_config c;
        memset(&c, 0, sizeof c);
        assert_int_equal(sf_config_set_degrees(&c, 4, deg), SF_OK);
        assert_int_equal(c.n_parts, prod);
        int64_t total = 0;
        for (int p = 0; p < c.n_parts; p++) {
            sf_config_part_tile(op, &c, p, &tiles[p]);
            assert_int_equal(tiles[p].ndim, 4);
            assert_false(sf_tile_empty(&tiles[p]));
            for (int i = 0; i < 4; i++) {
                assert_true(tiles[p].lo[i] >= 0 && tiles[p].hi[i] <= s.d[i]);
                /* sizes differ by at most one along a dimension */
                int64_t ext = tiles[p].hi[i] - tiles[p].lo[i];
                assert_true(ext == s.d[i] / deg[i] || ext == s.d[i] / deg[i] + 1);
            }
            total += sf_tile_numel(&tiles[p]);
        }
        assert_true(total == sf_shape_numel(&s));
        for (int a = 0; a < c.n_parts; a++)
            for (int b = a + 1; b < c.n_parts; b++) {
                sf_tile t;
                assert_int_equal(sf_tile_intersect(&tiles[a], &tiles[b], &t), 0);
            }
        /* row-major: the last split dimension varies fastest */
        int last = -1;
        for (int i = 0; i < 4; i++)
            if (deg[i] > 1) last = i;
        if (last >= 0) {
            for (int i = 0; i < 4; i++)
                if (i != last) assert_true(tiles[0].lo[i] == tiles[1].lo[i]);
            assert_true(tiles[1].lo[last] == tiles[0].hi[last]);
        }
    }
    sf_graph_free(g);
}

static void test_set_degrees_and_equal(void **state) {
    (void)state;
    sf_config a, b;
    memset(&a, 0, sizeof a);
    assert_int_equal(sf_config_set_degrees(&a, 3, (int[]){2, 3, 4}), SF_OK);
    assert_int_equal(a.n_parts, 24);
    assert_int_equal(sf_config_set_degrees(&a, 3, (int[]){64, 32, 3}), SF_ERR_RANGE); /* > 4096 */
    assert_int_equal(a.n_parts, 24); /* unchanged on error */
    assert_int_equal(sf_config_set_degrees(&a, 2, (int[]){0, 2}), SF_ERR_INVALID);
    assert_int_equal(sf_config_set_degrees(&a, SF_MAX_DIMS + 1, (int[]){1, 1, 1, 1, 1, 1, 1}),
                     SF_ERR_INVALID);
    assert_int_equal(sf_config_set_degrees(&a, 2, (int[]){2, 1}), SF_OK);
    a.device[0] = 3;
    a.device[1] = 4;
    a.device[2] = 9; /* beyond n_parts: ignored */
    b = a;
    b.device[2] = 1;
    b.degree[5] = 7; /* beyond ndim: ignored */
    assert_true(sf_config_equal(&a, &b));
    b.device[1] = 5;
    assert_false(sf_config_equal(&a, &b));
    b = a;
    b.ndim = 3;
    assert_false(sf_config_equal(&a, &b));
}

static void test_config_validate_messages(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    sf_machine *m = machine("p100-4x4", 0, 0);
    const sf_op *conv3 = sf_graph_op(g, sf_graph_find(g, "conv3"));
    const sf_op *sm = sf_graph_op(g, sf_graph_find(g, "softmax"));
    sf_config c;
    sf_error err = {0};

    memset(&c, 0, sizeof c);
    sf_config_set_degrees(&c, 4, (int[]){1, 5, 1, 1});
    for (int p = 0; p < 5; p++) c.device[p] = (int16_t)p;
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_ERR_RANGE);
    assert_string_equal(err.msg,
                        "operator 'conv3': degree 5 on dimension 1 (parameter) exceeds its size 3");

    /* a dimension of kind none (a flatten's features); softmax_ce's classes
     * are its inner dimension and split (vocabulary-parallel) */
    sf_error_clear(&err);
    sf_config_set_degrees(&c, 2, (int[]){1, 2});
    const sf_op *fl = sf_graph_op(g, sf_graph_find(g, "flatten"));
    assert_int_equal(sf_config_validate(fl, m, &c, &err), SF_ERR_INVALID);
    assert_string_equal(err.msg, "operator 'flatten': degree 2 on dimension 1 (none), which "
                                 "cannot be split");
    sf_error_clear(&err);
    assert_int_equal(sf_config_validate(sm, m, &c, &err), SF_OK);

    sf_error_clear(&err);
    sf_config_set_degrees(&c, 3, (int[]){1, 1, 1});
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "operator 'conv3': config has 3 dimensions"));
    assert_non_null(strstr(err.msg, "has 5"));

    sf_error_clear(&err);
    sf_config_set_degrees(&c, 4, (int[]){2, 1, 1, 1});
    c.device[0] = 0;
    c.device[1] = 16;
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_ERR_RANGE);
    assert_string_equal(err.msg, "operator 'conv3': part 1 on device 16, but the machine has 16 "
                                 "devices (0-15)");
    sf_error_clear(&err);
    c.device[1] = -1;
    assert_int_equal(sf_config_validate(conv3, NULL, &c, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "device -1"));

    sf_error_clear(&err);
    c.device[1] = 1;
    c.degree[0] = 0;
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "degree 0 on dimension 0 (sample) is below 1"));

    sf_error_clear(&err);
    const sf_op *conv1 = sf_graph_op(g, sf_graph_find(g, "conv1"));
    c.degree[0] = 8; /* 8 x 6 x 12 x 12 = 6912 parts, above SF_MAX_PARTS; sizes allow it */
    c.degree[1] = 6;
    c.degree[2] = 12;
    c.degree[3] = 12;
    c.n_parts = 4096;
    assert_int_equal(sf_config_validate(conv1, m, &c, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "more than 4096 parts"));

    sf_error_clear(&err);
    sf_config_set_degrees(&c, 4, (int[]){2, 1, 1, 1});
    c.n_parts = 3;
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "not the product"));

    sf_error_clear(&err);
    sf_config_set_degrees(&c, 4, (int[]){2, 3, 2, 1});
    for (int p = 0; p < 12; p++) c.device[p] = (int16_t)(15 - p);
    assert_int_equal(sf_config_validate(conv3, m, &c, &err), SF_OK);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_config_str(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    const sf_op *conv1 = sf_graph_op(g, sf_graph_find(g, "conv1"));
    const sf_op *fc1 = sf_graph_op(g, sf_graph_find(g, "fc1"));
    sf_config c;
    char buf[128];
    memset(&c, 0, sizeof c);
    sf_config_set_degrees(&c, 4, (int[]){4, 2, 1, 1});
    for (int p = 0; p < 8; p++) c.device[p] = (int16_t)p;
    assert_string_equal(sf_config_str(conv1, &c, buf, sizeof buf), "s4 p2 @0-7");
    sf_config_set_degrees(&c, 4, (int[]){2, 1, 2, 1});
    c.device[0] = 0, c.device[1] = 1, c.device[2] = 2, c.device[3] = 5;
    assert_string_equal(sf_config_str(conv1, &c, buf, sizeof buf), "s2 a2=2 @0-2,5");
    sf_config_set_degrees(&c, 2, (int[]){1, 1});
    c.device[0] = 3;
    assert_string_equal(sf_config_str(fc1, &c, buf, sizeof buf), "1 @3");
    sf_config_set_degrees(&c, 2, (int[]){1, 3});
    c.device[0] = 6, c.device[1] = 4, c.device[2] = 5;
    assert_string_equal(sf_config_str(fc1, &c, buf, sizeof buf), "p3 @6,4-5");
    /* a small buffer truncates, never overflows */
    char small[6];
    sf_config_str(fc1, &c, small, sizeof small);
    assert_string_equal(small, "p3 @6");
    sf_graph_free(g);
}

/* ---- strategies and baselines ---------------------------------------------- */

static void test_strategy_basics(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    sf_machine *m = machine("p100-4x4", 0, 0);
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_num_ops(s), 10);
    for (int i = 0; i < 10; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        assert_int_equal(c->ndim, sf_graph_op(g, i)->space.ndim);
        assert_int_equal(c->n_parts, 1);
        assert_int_equal(c->device[0], 0);
    }
    assert_null(sf_strategy_get(s, 10));
    assert_null(sf_strategy_config(s, -1));
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);

    sf_strategy *t = sf_strategy_clone(s);
    assert_int_equal(sf_strategy_data(t, g, m), SF_OK);
    assert_false(sf_config_equal(sf_strategy_get(s, 1), sf_strategy_get(t, 1)));
    sf_strategy_copy(s, t);
    for (int i = 0; i < 10; i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(t, i)));

    /* validate names the first bad operator */
    sf_config *c = sf_strategy_config(t, sf_graph_find(g, "fc2"));
    c->device[0] = 99;
    assert_int_equal(sf_strategy_validate(t, g, m, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "operator 'fc2'"));

    sf_graph *other = sf_graph_new("other"); /* one operator */
    sf_shape sh = sf_shape_make(2, (int64_t[]){4, 3});
    assert_true(sf_graph_add_input(other, "x", &sh, 0, &err) >= 0);
    sf_error_clear(&err);
    assert_int_equal(sf_strategy_validate(s, other, m, &err), SF_ERR_INVALID);
    assert_int_equal(sf_strategy_data(s, other, m), SF_ERR_INVALID);
    sf_graph_free(other);
    sf_strategy_free(t);
    sf_strategy_free(s);
    sf_strategy_free(NULL);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_baselines_cnn(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    sf_machine *m = machine("p100-4x4", 0, 0); /* 16 devices, batch 8 */
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);

    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "conv1"), 4, (int[]){8, 1, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "fc1"), 2, (int[]){8, 1}, 0, 1);
    expect_config(cfg(s, g, "softmax"), 2, (int[]){8, 1}, 0, 1);

    assert_int_equal(sf_strategy_model(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "conv1"), 4, (int[]){1, 6, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "conv3"), 4, (int[]){1, 3, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "fc1"), 2, (int[]){1, 10}, 0, 1);
    expect_config(cfg(s, g, "fc2"), 2, (int[]){1, 5}, 0, 1);
    expect_config(cfg(s, g, "relu1"), 4, (int[]){8, 1, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "pool1"), 4, (int[]){8, 1, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "x"), 4, (int[]){8, 1, 1, 1}, 0, 1);

    assert_int_equal(sf_strategy_owt(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "conv1"), 4, (int[]){8, 1, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "conv3"), 4, (int[]){8, 1, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "flatten"), 2, (int[]){8, 1}, 0, 1);
    expect_config(cfg(s, g, "fc1"), 2, (int[]){1, 10}, 0, 1);
    expect_config(cfg(s, g, "relu2"), 2, (int[]){8, 1}, 0, 1);
    expect_config(cfg(s, g, "fc2"), 2, (int[]){1, 5}, 0, 1);
    expect_config(cfg(s, g, "softmax"), 2, (int[]){8, 1}, 0, 1);

    /* no LSTM: expert is data */
    sf_strategy *d = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(d, g, m), SF_OK);
    assert_int_equal(sf_strategy_expert(s, g, m), SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(d, i)));

    assert_int_equal(sf_strategy_single(s, g, 3), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        assert_int_equal(sf_strategy_get(s, i)->n_parts, 1);
        assert_int_equal(sf_strategy_get(s, i)->device[0], 3);
    }
    assert_int_equal(sf_strategy_single(s, g, -1), SF_ERR_INVALID);

    /* a batch larger than the machine: 16 parts */
    sf_graph *big = cnn_graph(40);
    sf_strategy *sb = sf_strategy_new(big);
    assert_int_equal(sf_strategy_baseline(sb, "data", big, m, &err), SF_OK);
    expect_config(cfg(sb, big, "conv3"), 4, (int[]){16, 1, 1, 1}, 0, 1);
    assert_int_equal(sf_strategy_baseline(sb, "owt", big, m, &err), SF_OK);
    expect_config(cfg(sb, big, "fc1"), 2, (int[]){1, 10}, 0, 1);
    assert_int_equal(sf_strategy_baseline(sb, "single", big, m, &err), SF_OK);
    expect_config(cfg(sb, big, "fc1"), 2, (int[]){1, 1}, 0, 1);
    assert_int_equal(sf_strategy_baseline(sb, "bogus", big, m, &err), SF_ERR_NOTFOUND);
    assert_non_null(strstr(err.msg, "'bogus'"));
    assert_non_null(strstr(err.msg, "data, model, owt, expert, single"));
    sf_strategy_free(sb);
    sf_graph_free(big);

    sf_strategy_free(d);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_expert_rnn(void **state) {
    (void)state;
    sf_graph *g = rnn_graph();
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);

    /* 2 nodes x 2 devices: data parallel 2 ways across nodes, layer l on local l */
    sf_machine *m = machine("p100-4x4", 2, 2);
    assert_int_equal(sf_strategy_expert(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "tokens"), 2, (int[]){2, 1}, 0, 2);
    expect_config(cfg(s, g, "emb"), 3, (int[]){2, 1, 1}, 0, 2);
    expect_config(cfg(s, g, "split"), 3, (int[]){2, 1, 1}, 0, 2);
    expect_config(cfg(s, g, "l0.c0"), 3, (int[]){2, 1, 1}, 0, 2);
    expect_config(cfg(s, g, "l0.c1"), 3, (int[]){2, 1, 1}, 0, 2);
    expect_config(cfg(s, g, "l1.c0"), 3, (int[]){2, 1, 1}, 1, 2);
    expect_config(cfg(s, g, "l1.c1"), 3, (int[]){2, 1, 1}, 1, 2);
    expect_config(cfg(s, g, "concat"), 3, (int[]){2, 1, 1}, 1, 2);
    expect_config(cfg(s, g, "proj"), 3, (int[]){2, 1, 1}, 1, 2);
    expect_config(cfg(s, g, "softmax"), 3, (int[]){2, 1, 1}, 1, 2);
    sf_machine_free(m);

    /* one node of 4: no data parallelism, layers on devices 0 and 1 */
    m = machine("p100-4x4", 1, 4);
    assert_int_equal(sf_strategy_baseline(s, "expert", g, m, &err), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "l0.c1"), 3, (int[]){1, 1, 1}, 0, 0);
    expect_config(cfg(s, g, "l1.c1"), 3, (int[]){1, 1, 1}, 1, 0);
    expect_config(cfg(s, g, "proj"), 3, (int[]){1, 1, 1}, 1, 0);
    sf_machine_free(m);

    /* one device per node, 8 nodes: the batch of 4 caps the degree; all local 0 */
    m = machine("p100-4x4", 8, 1);
    assert_int_equal(sf_strategy_expert(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "l1.c0"), 3, (int[]){4, 1, 1}, 0, 1);
    sf_machine_free(m);

    /* model parallelism on the RNN: embedding on D, proj on vocab; the lstm has
     * no parameter dimension (its hidden units need the whole previous h every
     * step, see op_lstm.c), so it is data parallel, capped by the batch of 4 */
    m = machine("p100-4x4", 0, 0);
    assert_int_equal(sf_strategy_model(s, g, m), SF_OK);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    expect_config(cfg(s, g, "l0.c0"), 3, (int[]){4, 1, 1}, 0, 1);
    expect_config(cfg(s, g, "emb"), 3, (int[]){1, 1, 16}, 0, 1);
    expect_config(cfg(s, g, "proj"), 3, (int[]){1, 1, 16}, 0, 1);
    expect_config(cfg(s, g, "concat"), 3, (int[]){4, 1, 1}, 0, 1);
    sf_machine_free(m);
    sf_strategy_free(s);
    sf_graph_free(g);
}

/* Every baseline is valid on every zoo model, on a cluster and a small machine. */
static void test_baselines_zoo(void **state) {
    (void)state;
    const char *names[] = {"data", "model", "owt", "expert", "single"};
    sf_machine *ms[2] = {machine("p100-4x4", 0, 0), machine("dgx-a100", 0, 0)};
    for (int i = 0; i < sf_model_count(); i++) {
        sf_model_options o;
        sf_model_options_default(&o);
        o.batch = 32;
        if (strcmp(sf_model_name(i), "nmt") == 0 || strcmp(sf_model_name(i), "rnnlm") == 0 ||
            strcmp(sf_model_name(i), "gnmt") == 0)
            o.seq_len = 8, o.hidden = 64, o.vocab = 1000;
        sf_error err = {0};
        sf_graph *g = sf_model_build(sf_model_name(i), &o, &err);
        if (!g) fprintf(stderr, "%s: %s\n", sf_model_name(i), err.msg);
        assert_non_null(g);
        sf_strategy *s = sf_strategy_new(g);
        for (int k = 0; k < 2; k++)
            for (int b = 0; b < 5; b++) {
                sf_error_clear(&err);
                assert_int_equal(sf_strategy_baseline(s, names[b], g, ms[k], &err), SF_OK);
                if (sf_strategy_validate(s, g, ms[k], &err) != SF_OK)
                    fprintf(stderr, "%s/%s: %s\n", sf_model_name(i), names[b], err.msg);
                assert_int_equal(err.code, SF_OK);
            }
        if (strcmp(sf_model_name(i), "nmt") == 0) {
            /* GNMT placement on p100-4x4: layer l on local device l, 4 nodes */
            assert_int_equal(sf_strategy_expert(s, g, ms[0]), SF_OK);
            const char *at0[] = {"enc.lstm0.c0", "dec.lstm0.c1"};
            const char *at1[] = {"enc.lstm1.c0", "dec.lstm1.c1", "attention"};
            for (int k = 0; k < 2; k++)
                expect_config(cfg(s, g, at0[k]), 3, (int[]){4, 1, 1}, 0, 4);
            for (int k = 0; k < 3; k++)
                expect_config(cfg(s, g, at1[k]), 3, (int[]){4, 1, 1}, 1, 4);
        }
        sf_strategy_free(s);
        sf_graph_free(g);
    }
    sf_machine_free(ms[0]);
    sf_machine_free(ms[1]);
}

/* ---- JSON -------------------------------------------------------------------- */

static char tmpdir[64];

static int setup_dir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_strategy_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A mixed strategy: owt, with a few operators changed by hand. */
static sf_strategy *mixed(const sf_graph *g, const sf_machine *m) {
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_owt(s, g, m), SF_OK);
    sf_config *c = sf_strategy_config(s, sf_graph_find(g, "conv1"));
    sf_config_set_degrees(c, 5, (int[]){2, 3, 2, 1, 1});
    for (int p = 0; p < 12; p++) c->device[p] = (int16_t)((p * 5) % 16);
    c = sf_strategy_config(s, sf_graph_find(g, "pool1"));
    sf_config_set_degrees(c, 4, (int[]){1, 1, 1, 1});
    c->device[0] = 7;
    return s;
}

static void test_json_round_trip(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    sf_machine *m = machine("p100-4x4", 0, 0);
    sf_error err = {0};
    sf_strategy *s = mixed(g, m);
    char path[128];
    path_in(path, sizeof path, "plan.json");
    assert_int_equal(sf_strategy_save_json_for(s, g, m, path, &err), SF_OK);

    sf_strategy *t = sf_strategy_new(g);
    if (sf_strategy_load_json(t, path, g, m, &err) != SF_OK) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(err.code, SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(t, i)));

    /* stable bytes: same text twice, and after a round trip */
    char *a = sf_strategy_to_json_for(s, g, m, &err);
    char *b = sf_strategy_to_json_for(t, g, m, &err);
    assert_non_null(a);
    assert_string_equal(a, b);
    char *text = sf_read_file(path, NULL, &err);
    assert_string_equal(text, a);
    assert_non_null(strstr(a, "\"machine\": \"p100-4x4\""));
    assert_non_null(strstr(a, "\"model\": \"tinycnn\""));
    assert_non_null(
        strstr(a, "\n    \"conv1\": {\"degrees\": [2, 3, 2, 1], \"devices\": [0, 5, 10, 15, 4, "
                  "9, 14, 3, 8, 13, 2, 7]},\n"));
    /* without a machine the field is left out, and a file without it loads */
    char *c = sf_strategy_to_json(s, g, &err);
    assert_null(strstr(c, "machine"));
    sf_strategy *u = sf_strategy_new(g);
    assert_int_equal(sf_strategy_parse_json(u, c, "mem", g, NULL, &err), SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(u, i)));
    free(a);
    free(b);
    free(c);
    free(text);

    /* an invalid strategy is not written, and no file appears */
    sf_config_set_degrees(sf_strategy_config(u, 1), 4, (int[]){1, 7, 1, 1});
    char bad[128];
    path_in(bad, sizeof bad, "bad.json");
    sf_error_clear(&err);
    assert_int_equal(sf_strategy_save_json(u, g, bad, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "operator 'conv1'"));
    assert_int_equal(access(bad, F_OK), -1);

    /* names that need escaping survive */
    sf_graph *q = sf_graph_new("we\"ird\\name");
    sf_shape sh = sf_shape_make(2, (int64_t[]){4, 3});
    sf_error_clear(&err);
    assert_true(sf_graph_add_input(q, "in\"put\n", &sh, 0, &err) >= 0);
    sf_strategy *qs = sf_strategy_new(q);
    assert_int_equal(sf_strategy_data(qs, q, m), SF_OK);
    char *qt = sf_strategy_to_json(qs, q, &err);
    sf_strategy *qr = sf_strategy_new(q);
    assert_int_equal(sf_strategy_parse_json(qr, qt, "q", q, m, &err), SF_OK);
    assert_true(sf_config_equal(sf_strategy_get(qs, 0), sf_strategy_get(qr, 0)));
    free(qt);
    sf_strategy_free(qs);
    sf_strategy_free(qr);
    sf_graph_free(q);

    sf_strategy_free(u);
    sf_strategy_free(t);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Replace the line of operator `op` (one per line, as written) with `line`. */
static char *with_op_line(const char *text, const char *op, const char *line) {
    char key[64];
    snprintf(key, sizeof key, "\n    \"%s\": ", op);
    const char *at = strstr(text, key);
    assert_non_null(at);
    at++;
    const char *end = strchr(at, '\n');
    size_t n = strlen(text) + strlen(line) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, line, end);
    return out;
}

/* Load `text` from a file and expect `code` and a message holding the file name
 * with `line` (0: no line check) and every one of `needles`. */
static void expect_load_error(const sf_graph *g, const sf_machine *m, const char *text,
                              sf_status code, int line, const char *n1, const char *n2) {
    char path[128];
    path_in(path, sizeof path, "err.json");
    write_text(path, text);
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 2);
    sf_error err = {0};
    sf_status st = sf_strategy_load_json(s, path, g, m, &err);
    if (st != code) fprintf(stderr, "got %d: %s\n", (int)st, err.msg);
    assert_int_equal(st, code);
    char want[192];
    if (line > 0)
        snprintf(want, sizeof want, "%s:%d:", path, line);
    else
        snprintf(want, sizeof want, "%s:", path);
    if (!strstr(err.msg, want)) fprintf(stderr, "message: %s\nwanted: %s\n", err.msg, want);
    assert_non_null(strstr(err.msg, want));
    if (n1) {
        if (!strstr(err.msg, n1)) fprintf(stderr, "message: %s\nwanted: %s\n", err.msg, n1);
        assert_non_null(strstr(err.msg, n1));
    }
    if (n2) {
        if (!strstr(err.msg, n2)) fprintf(stderr, "message: %s\nwanted: %s\n", err.msg, n2);
        assert_non_null(strstr(err.msg, n2));
    }
    /* a failed load leaves the strategy as it was */
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_int_equal(sf_strategy_get(s, i)->device[0], 2);
    sf_strategy_free(s);
}

static void test_json_errors(void **state) {
    (void)state;
    sf_graph *g = cnn_graph(8);
    sf_machine *m = machine("p100-4x4", 0, 0);
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    char *good = sf_strategy_to_json(s, g, &err); /* no machine line: op i on line 6 + i */
    assert_non_null(good);
    int conv3_line = 6 + sf_graph_find(g, "conv3");
    int fc1_line = 6 + sf_graph_find(g, "fc1");
    char *t;

    t = with_op_line(good, "conv3", "\"conv3\": {\"degrees\": [1, 5, 1, 1], \"devices\": [0, 1, 2, "
                                    "3, 4]},");
    expect_load_error(g, m, t, SF_ERR_RANGE, conv3_line, "operator 'conv3'",
                      "degree 5 on dimension 1 (parameter) exceeds its size 3");
    free(t);
    t = with_op_line(good, "conv3", "\"conv3\": {\"degrees\": [1, 1, 1], \"devices\": [0]},");
    expect_load_error(g, m, t, SF_ERR_INVALID, conv3_line, "operator 'conv3'",
                      "has 3 entries, its parallel space 8x3x6x6x6 has 5 dimensions");
    free(t);
    t = with_op_line(good, "fc1", "\"fc1\": {\"degrees\": [2, 1], \"devices\": [0, 16]},");
    expect_load_error(g, m, t, SF_ERR_RANGE, fc1_line, "operator 'fc1'",
                      "part 1 on device 16, but machine 'p100-4x4' has 16 devices");
    free(t);
    t = with_op_line(good, "fc1", "\"fc1\": {\"degrees\": [2, 1], \"devices\": [0, 1, 2]},");
    expect_load_error(g, m, t, SF_ERR_INVALID, fc1_line, "operator 'fc1'",
                      "\"devices\" has 3 entries, but the degrees make 2 parts");
    free(t);
    t = with_op_line(good, "fc1", "\"fc1\": {\"degrees\": [2, 1], \"devices\": [0, 1.5]},");
    expect_load_error(g, m, t, SF_ERR_PARSE, fc1_line, "operator 'fc1'", "not an integer");
    free(t);
    t = with_op_line(good, "fc1", "\"fc1\": {\"degrees\": [2, 1], \"devices\": [0, 1], \"x\": 1},");
    expect_load_error(g, m, t, SF_ERR_PARSE, fc1_line, "operator 'fc1'", "unknown field 'x'");
    free(t);
    t = with_op_line(good, "flatten",
                     "\"flatten\": {\"degrees\": [1, 2], \"devices\": [0, 1]},");
    expect_load_error(g, m, t, SF_ERR_INVALID, 6 + sf_graph_find(g, "flatten"),
                      "operator 'flatten'", "cannot be split");
    free(t);
    t = with_op_line(good, "fc1", "\"fc9\": {\"degrees\": [1, 1], \"devices\": [0]},");
    expect_load_error(g, m, t, SF_ERR_NOTFOUND, fc1_line, "unknown operator 'fc9'", "tinycnn");
    free(t);
    /* fc1 missing: the one missing name is listed */
    t = with_op_line(good, "fc1", "");
    expect_load_error(g, m, t, SF_ERR_INVALID, 5, "no config for 1 operator of model 'tinycnn'",
                      "'fc1'");
    free(t);
    /* all missing: the first few and a count */
    expect_load_error(g, m,
                      "{\"format\": \"soapflow-strategy\", \"version\": 1,\n\"ops\": {}}",
                      SF_ERR_INVALID, 2, "'x', 'conv1', 'relu1', 'pool1', 'conv3'", "and 5 more");
    /* syntax: jansson's line and column */
    expect_load_error(g, m, "{\"format\": \"soapflow-strategy\",\n \"version\": 1,\n \"ops\": {\n",
                      SF_ERR_PARSE, 4, NULL, NULL);
    expect_load_error(g, m, "{\"format\": \"soapflow-model\", \"version\": 1, \"ops\": {}}",
                      SF_ERR_PARSE, 1, "not a soapflow strategy", NULL);
    expect_load_error(g, m, "{\"format\": \"soapflow-strategy\", \"version\": 2, \"ops\": {}}",
                      SF_ERR_UNSUPPORTED, 1, "version 2", NULL);
    expect_load_error(g, m, "  \n", SF_ERR_PARSE, 0, "empty file", NULL);
    expect_load_error(g, m, "[1, 2]", SF_ERR_PARSE, 1, "top level", NULL);

    sf_error_clear(&err);
    assert_int_equal(sf_strategy_load_json(s, "/nonexistent/x.json", g, m, &err), SF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.json"));
    free(good);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_part_tiles_partition),
        cmocka_unit_test(test_set_degrees_and_equal),
        cmocka_unit_test(test_config_validate_messages),
        cmocka_unit_test(test_config_str),
        cmocka_unit_test(test_strategy_basics),
        cmocka_unit_test(test_baselines_cnn),
        cmocka_unit_test(test_expert_rnn),
        cmocka_unit_test(test_baselines_zoo),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_errors),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
