/* Sequence and tensor operators: matmul, embedding, lstm, attention, split,
 * softmax_ce, layernorm. Shapes, parameter counts, FLOPs worked out by hand,
 * tile -> region maps on uneven splits and transposes, output tiles of the
 * multi-output operators, and every error path with the operator's name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ops_check.h"

#include "ops/op_impl.h"
#include "soapflow/graph.h"
#include "soapflow/kernels.h"

/* ---- helpers ------------------------------------------------------------ */

/* Adding must fail with a message naming the operator and containing `what`. */
static void expect_fail(sf_graph *g, sf_op_type type, const char *name, const sf_op_params *p,
                        const sf_tensor_ref *in, int n_in, const char *what) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, type, name, p, in, n_in, &err);
    if (id >= 0) fail_msg("operator %s was accepted, expected '%s'", name, what);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "operator '%s' (%s)", name, sf_op_type_name(type));
    if (!strstr(err.msg, prefix) || !strstr(err.msg, what))
        fail_msg("message '%s' lacks '%s' or '%s'", err.msg, prefix, what);
    assert_int_equal(sf_graph_find(g, name), -1);
}

static int add_ok(sf_graph *g, sf_op_type type, const char *name, const sf_op_params *p,
                  const sf_tensor_ref *in, int n_in) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, type, name, p, in, n_in, &err);
    if (id < 0) fail_msg("operator %s: %s", name, err.msg);
    return id;
}

/* ---- matmul ------------------------------------------------------------- */

static void test_matmul(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("mm");
    int a = add_input(g, "a", 3, (int64_t[]){3, 5, 7});
    int b = add_input(g, "b", 3, (int64_t[]){3, 7, 4});
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    int id = add_ok(g, SF_OP_MATMUL, "mm", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}}, 2);
    const sf_op *op = sf_graph_op(g, id);
    assert_int_equal(op->n_outputs, 1);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){3, 5, 4});
    assert_true(op->n_params == 0);
    check_kinds(op, 4,
                (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE, SF_DIM_REDUCE});
    assert_int_equal(op->space.d[3], 7); /* K, contracted: a reduction */

    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 2.0 * 3 * 5 * 4 * 7); /* 840 */
    assert_true(c.flops_bwd == 1680.0);
    {
        /* a partial sum over K [2, 7): A's columns and B's rows of that range */
        sf_tile t = {4, {0, 0, 0, 2}, {3, 5, 4, 7}}, ra, rb, o;
        sf_op_input_region(op, &t, 0, &ra);
        sf_op_input_region(op, &t, 1, &rb);
        sf_tile want_a = {3, {0, 0, 2}, {3, 5, 7}}, want_b = {3, {0, 2, 0}, {3, 7, 4}};
        assert_true(sf_tile_equal(&ra, &want_a));
        assert_true(sf_tile_equal(&rb, &want_b));
        sf_op_output_tile(op, &t, 0, &o);
        assert_int_equal(o.ndim, 3);
        assert_int_equal(sf_tile_numel(&o), 60);
        sf_op_cost cp;
        sf_op_tile_cost(op, &t, &cp);
        assert_true(cp.flops_fwd == 2.0 * 3 * 5 * 4 * 5);
    }
    assert_true(c.bytes_fwd == (105.0 + 84.0 + 60.0) * 4);

    /* batch 1..3, M part 1 of 3 of 5 rows ([1, 3)), N 2..4 */
    int64_t mlo, mhi;
    sf_split_range(5, 3, 1, &mlo, &mhi);
    assert_true(mlo == 1 && mhi == 3);
    sf_tile t = mk_tile(3, (int64_t[]){1, mlo, 2}, (int64_t[]){3, mhi, 4});
    sf_tile r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){1, 1, 0}, (int64_t[]){3, 3, 7});
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 3, (int64_t[]){1, 0, 2}, (int64_t[]){3, 7, 4});
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 2.0 * 8 * 7);
    sf_op_input_region(op, &t, 2, &r); /* no such input: an empty tile */
    assert_int_equal(sf_tile_numel(&r), 0);

    /* transposes: A stored (3, 7, 5), B stored (3, 4, 7) */
    int at = add_input(g, "at", 3, (int64_t[]){3, 7, 5});
    int bt = add_input(g, "bt", 3, (int64_t[]){3, 4, 7});
    p.matmul.transpose_a = 1;
    p.matmul.transpose_b = 1;
    id = add_ok(g, SF_OP_MATMUL, "mm_tt", &p, (sf_tensor_ref[]){{at, 0}, {bt, 0}}, 2);
    op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){3, 5, 4});
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){1, 0, 1}, (int64_t[]){3, 7, 3});
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 3, (int64_t[]){1, 2, 0}, (int64_t[]){3, 4, 7});
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 840.0);

    /* only A transposed: B is (3, 7, 4) again */
    p.matmul.transpose_b = 0;
    id = add_ok(g, SF_OP_MATMUL, "mm_t", &p, (sf_tensor_ref[]){{at, 0}, {b, 0}}, 2);
    op = sf_graph_op(g, id);
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 3, (int64_t[]){1, 0, 2}, (int64_t[]){3, 7, 4});

    /* plain 2-D: dimension 0 (M) is the sample */
    int x = add_input(g, "x", 2, (int64_t[]){6, 10});
    int w = add_input(g, "w", 2, (int64_t[]){10, 3});
    sf_op_params_default(SF_OP_MATMUL, &p);
    id = add_ok(g, SF_OP_MATMUL, "mm2", &p, (sf_tensor_ref[]){{x, 0}, {w, 0}}, 2);
    op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 2, (int64_t[]){6, 3});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_REDUCE});
    sf_tile t2 = mk_tile(2, (int64_t[]){4, 1}, (int64_t[]){6, 2});
    sf_op_input_region(op, &t2, 0, &r);
    check_tile(&r, 2, (int64_t[]){4, 0}, (int64_t[]){6, 10});
    sf_op_input_region(op, &t2, 1, &r);
    check_tile(&r, 2, (int64_t[]){0, 1}, (int64_t[]){10, 2});

    /* errors */
    int v = add_input(g, "v", 1, (int64_t[]){7});
    expect_fail(g, SF_OP_MATMUL, "bad_k", &p, (sf_tensor_ref[]){{a, 0}, {a, 0}}, 2,
                "A has K = 7, B has K = 5");
    expect_fail(g, SF_OP_MATMUL, "bad_rank", &p, (sf_tensor_ref[]){{v, 0}, {b, 0}}, 2,
                "at least 2 dimensions");
    expect_fail(g, SF_OP_MATMUL, "mixed_rank", &p, (sf_tensor_ref[]){{a, 0}, {w, 0}}, 2,
                "same rank");
    int b4 = add_input(g, "b4", 3, (int64_t[]){4, 7, 4});
    expect_fail(g, SF_OP_MATMUL, "bad_batch", &p, (sf_tensor_ref[]){{a, 0}, {b4, 0}}, 2,
                "leading dimension 0 differs");
    p.matmul.transpose_a = 1; /* a read as (3, 7, 5) x (3, 7, 4): K 5 vs 7 */
    expect_fail(g, SF_OP_MATMUL, "bad_t", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}}, 2,
                "after transposes");
    expect_fail(g, SF_OP_MATMUL, "one_in", &p, (sf_tensor_ref[]){{a, 0}}, 1, "needs 2..2 inputs");
    sf_graph_free(g);
}

/* ---- embedding ---------------------------------------------------------- */

static void test_embedding(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("emb");
    sf_error err = {0};
    sf_shape s = sf_shape_make(2, (int64_t[]){8, 5});
    int ids = sf_graph_add_input(g, "ids", &s, 1, &err);
    assert_true(ids >= 0);
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 1000;
    p.embedding.embedding_dim = 16;
    int id = add_ok(g, SF_OP_EMBEDDING, "emb", &p, (sf_tensor_ref[]){{ids, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){8, 5, 16});
    assert_true(op->n_params == 16000);
    check_kinds(op, 4,
                (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_PARAMETER, SF_DIM_REDUCE});
    assert_int_equal(op->space.d[3], 1000); /* the vocabulary: a reduction */
    {
        /* rows [250, 500) of the table, columns [5, 10): a partial sum over the
         * vocabulary, reading every token's id */
        sf_tile tv = {4, {0, 0, 5, 250}, {8, 5, 10, 500}}, r, o;
        sf_op_input_region(op, &tv, 0, &r);
        sf_tile want = {2, {0, 0}, {8, 5}};
        assert_true(sf_tile_equal(&r, &want));
        sf_op_output_tile(op, &tv, 0, &o);
        assert_int_equal(sf_tile_numel(&o), 8 * 5 * 5);
        assert_int_equal(sf_op_tile_weights(op, &tv), 250 * 5);
        sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
        assert_int_equal(sf_op_weight_slices(op, &tv, sl), 1);
        assert_true(sl[0].offset == 250 * 16 + 5 && sl[0].len == 5 && sl[0].stride == 16 &&
                    sl[0].count == 250);
    }

    /* uneven split: tokens 2..5 of 5, D part 1 of 3 of 16 = [5, 10) */
    int64_t dlo, dhi;
    sf_split_range(16, 3, 1, &dlo, &dhi);
    assert_true(dlo == 5 && dhi == 10);
    sf_tile t = mk_tile(3, (int64_t[]){0, 2, dlo}, (int64_t[]){4, 5, dhi});
    sf_tile r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 2, (int64_t[]){0, 2}, (int64_t[]){4, 5});
    sf_op_cost c;
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 0.0);
    assert_true(c.flops_bwd == 4.0 * 3 * 5);           /* one add per gradient element */
    assert_true(c.bytes_fwd == (12.0 + 2 * 60.0) * 4); /* ids, gathered rows, output */
    assert_true(sf_op_tile_weights(op, &t) == 5000);   /* 1000 x 5 columns */

    /* a 1-D id vector (N) gives (N, D) */
    int v = add_input(g, "v", 1, (int64_t[]){7});
    id = add_ok(g, SF_OP_EMBEDDING, "emb1", &p, (sf_tensor_ref[]){{v, 0}}, 1);
    op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 2, (int64_t[]){7, 16});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_PARAMETER, SF_DIM_REDUCE});

    /* ids of rank 5: an output of SF_MAX_DIMS dimensions leaves no room for the
     * vocabulary, which then cannot be split */
    int five = add_input(g, "five", 5, (int64_t[]){2, 1, 1, 1, 3});
    id = add_ok(g, SF_OP_EMBEDDING, "emb5", &p, (sf_tensor_ref[]){{five, 0}}, 1);
    op = sf_graph_op(g, id);
    assert_int_equal(op->space.ndim, SF_MAX_DIMS);
    assert_int_equal(op->kinds[SF_MAX_DIMS - 1], SF_DIM_PARAMETER);

    int big = add_input(g, "big", 6, (int64_t[]){1, 1, 1, 1, 1, 2});
    expect_fail(g, SF_OP_EMBEDDING, "bad_rank", &p, (sf_tensor_ref[]){{big, 0}}, 1,
                "1 to 5 dimensions, got 6");
    p.embedding.num_embeddings = 0;
    expect_fail(g, SF_OP_EMBEDDING, "bad_v", &p, (sf_tensor_ref[]){{ids, 0}}, 1,
                "num_embeddings must be >= 1");
    p.embedding.num_embeddings = 10;
    p.embedding.embedding_dim = -1;
    expect_fail(g, SF_OP_EMBEDDING, "bad_d", &p, (sf_tensor_ref[]){{ids, 0}}, 1,
                "embedding_dim must be >= 1");
    sf_graph_free(g);
}

/* ---- lstm --------------------------------------------------------------- */

static void test_lstm_params_and_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("lstm");
    int x = add_input(g, "x", 3, (int64_t[]){64, 40, 1024});
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 1024;
    int id = add_ok(g, SF_OP_LSTM, "l1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    assert_true(op->n_params == 8396800); /* torch.nn.LSTM(1024, 1024) */
    assert_int_equal(op->n_outputs, 3);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){64, 40, 1024});
    check_shape(&op->out_shapes[1], 2, (int64_t[]){64, 1024});
    check_shape(&op->out_shapes[2], 2, (int64_t[]){64, 1024});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_NONE, SF_DIM_NONE});

    /* torch.nn.LSTM(512, 256): 4*256*(512+256) + 8*256 = 788480 */
    int x2 = add_input(g, "x2", 3, (int64_t[]){2, 3, 512});
    p.lstm.hidden = 256;
    id = add_ok(g, SF_OP_LSTM, "l2", &p, (sf_tensor_ref[]){{x2, 0}}, 1);
    assert_true(sf_graph_op(g, id)->n_params == 788480);

    /* errors */
    int h0 = add_input(g, "h0", 2, (int64_t[]){2, 256});
    int h0bad = add_input(g, "h0bad", 2, (int64_t[]){2, 255});
    int flat = add_input(g, "flat", 2, (int64_t[]){2, 512});
    expect_fail(g, SF_OP_LSTM, "two_in", &p, (sf_tensor_ref[]){{x2, 0}, {h0, 0}}, 2,
                "1 or 3 inputs");
    expect_fail(g, SF_OP_LSTM, "four_in", &p,
                (sf_tensor_ref[]){{x2, 0}, {h0, 0}, {h0, 0}, {h0, 0}}, 4, "needs 1..3 inputs");
    expect_fail(g, SF_OP_LSTM, "bad_x", &p, (sf_tensor_ref[]){{flat, 0}}, 1,
                "x must be 3-D (N, T, I), got 2-D");
    expect_fail(g, SF_OP_LSTM, "bad_c0", &p, (sf_tensor_ref[]){{x2, 0}, {h0, 0}, {h0bad, 0}},
                3, "c0 must be (N, H) = (2, 256)");
    p.lstm.hidden = 0;
    expect_fail(g, SF_OP_LSTM, "bad_h", &p, (sf_tensor_ref[]){{x2, 0}}, 1,
                "hidden must be >= 1");
    sf_graph_free(g);
}

/* ---- gru ---------------------------------------------------------------- */

static void test_gru_shapes_flops_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("gru");
    int x = add_input(g, "x", 3, (int64_t[]){64, 40, 1024});
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = 1024;
    int id = add_ok(g, SF_OP_GRU, "g1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    assert_true(op->n_params == 6297600); /* torch.nn.GRU(1024, 1024) */
    assert_int_equal(op->n_outputs, 2);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){64, 40, 1024});
    check_shape(&op->out_shapes[1], 2, (int64_t[]){64, 1024});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_NONE, SF_DIM_NONE});

    /* torch.nn.GRU(3, 6) with h0: 3*6*(3+6) + 6*6 = 198 */
    int x2 = add_input(g, "x2", 3, (int64_t[]){4, 5, 3});
    int h0 = add_input(g, "h0", 2, (int64_t[]){4, 6});
    p.gru.hidden = 6;
    id = add_ok(g, SF_OP_GRU, "g2", &p, (sf_tensor_ref[]){{x2, 0}, {h0, 0}}, 2);
    op = sf_graph_op(g, id);
    assert_true(op->n_params == 198);
    /* per step: gemm 2*4*18*9 = 1296, elementwise 9*4*6 = 216; 5 steps */
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 5 * (1296.0 + 216.0));
    assert_true(c.flops_bwd == 5 * (2 * 1296.0 + 216.0));
    /* samples [1, 3): half of it */
    sf_tile t = mk_tile(3, (int64_t[]){1, 0, 0}, (int64_t[]){3, 5, 6});
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 5 * (648.0 + 108.0));
    sf_tile r, o;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){1, 0, 0}, (int64_t[]){3, 5, 3});
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 2, (int64_t[]){1, 0}, (int64_t[]){3, 6});
    sf_op_output_tile(op, &t, 1, &o);
    check_tile(&o, 2, (int64_t[]){1, 0}, (int64_t[]){3, 6});
    sf_op_output_tile(op, &t, 2, &o); /* no such output */
    assert_int_equal(o.ndim, 0);
    assert_true(sf_op_tile_weights(op, &t) == op->n_params);
    sf_op_mem m;
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.output_bytes == (60.0 + 12) * 4);
    /* inputs 30 + 12, three gates and W_hn h + b_hn: 4 * 60 */
    assert_true(m.saved_bytes == (42.0 + 240.0) * 4);

    int h0bad = add_input(g, "h0bad", 2, (int64_t[]){4, 5});
    int flat = add_input(g, "flat", 2, (int64_t[]){4, 3});
    expect_fail(g, SF_OP_GRU, "three_in", &p, (sf_tensor_ref[]){{x2, 0}, {h0, 0}, {h0, 0}}, 3,
                "needs 1..2 inputs");
    expect_fail(g, SF_OP_GRU, "bad_x", &p, (sf_tensor_ref[]){{flat, 0}}, 1,
                "x must be 3-D (N, T, I), got 2-D");
    expect_fail(g, SF_OP_GRU, "bad_h0", &p, (sf_tensor_ref[]){{x2, 0}, {h0bad, 0}}, 2,
                "h0 must be (N, H) = (4, 6)");
    p.gru.hidden = 0;
    expect_fail(g, SF_OP_GRU, "bad_h", &p, (sf_tensor_ref[]){{x2, 0}}, 1, "hidden must be >= 1");
    sf_graph_free(g);
}

static void test_lstm_tiles_and_flops(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("lstm");
    int x = add_input(g, "x", 3, (int64_t[]){4, 5, 3});
    int h0 = add_input(g, "h0", 2, (int64_t[]){4, 6});
    int c0 = add_input(g, "c0", 2, (int64_t[]){4, 6});
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 6;
    int id = add_ok(g, SF_OP_LSTM, "l", &p, (sf_tensor_ref[]){{x, 0}, {h0, 0}, {c0, 0}}, 3);
    const sf_op *op = sf_graph_op(g, id);
    assert_true(op->n_params == 4 * 6 * 9 + 48);

    /* per step: gemm 2*4*24*9 = 1728, elementwise 10*4*6 = 240; 5 steps */
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 5 * (1728.0 + 240.0));
    assert_true(c.flops_bwd == 5 * (2 * 1728.0 + 240.0));

    /* samples [0, 2), all steps and units (H is not split: op_lstm.c):
     * gemm 2*2*24*9 = 864, elementwise 10*2*6 = 120 */
    sf_tile t = mk_tile(3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 5, 6});
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 5 * (864.0 + 120.0));
    assert_true(c.flops_bwd == 5 * (1728.0 + 120.0));
    sf_tile r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 5, 3});
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 2, (int64_t[]){0, 0}, (int64_t[]){2, 6});
    sf_op_input_region(op, &t, 2, &r);
    check_tile(&r, 2, (int64_t[]){0, 0}, (int64_t[]){2, 6});
    sf_tile o;
    sf_op_output_tile(op, &t, 0, &o);
    check_tile(&o, 3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 5, 6});
    sf_op_output_tile(op, &t, 1, &o);
    check_tile(&o, 2, (int64_t[]){0, 0}, (int64_t[]){2, 6});
    sf_op_output_tile(op, &t, 2, &o);
    check_tile(&o, 2, (int64_t[]){0, 0}, (int64_t[]){2, 6});
    sf_op_output_tile(op, &t, 3, &o); /* no such output */
    assert_int_equal(o.ndim, 0);
    assert_true(sf_op_tile_weights(op, &t) == op->n_params); /* replicas, never shards */

    sf_op_mem m;
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.output_bytes == (60.0 + 12 + 12) * 4);
    /* inputs 30 + 12 + 12, gates and cells 5 * 60 */
    assert_true(m.saved_bytes == (54.0 + 300.0) * 4);

    /* last of three uneven sample parts of 4: [2, 4) (sf_split_range) */
    int64_t lo, hi;
    sf_split_range(4, 3, 2, &lo, &hi);
    sf_tile t3 = mk_tile(3, (int64_t[]){lo, 0, 0}, (int64_t[]){hi, 5, 6});
    sf_op_input_region(op, &t3, 2, &r);
    check_tile(&r, 2, (int64_t[]){2, 0}, (int64_t[]){4, 6});
    sf_op_output_tile(op, &t3, 1, &o);
    check_tile(&o, 2, (int64_t[]){2, 0}, (int64_t[]){4, 6});
    sf_graph_free(g);
}

/* ---- attention ---------------------------------------------------------- */

static void test_attention_params(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("attn");
    int x = add_input(g, "x", 3, (int64_t[]){8, 128, 768});
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    assert_int_equal(p.attention.bias, 1);
    assert_int_equal(p.attention.causal, 0);
    p.attention.embed_dim = 768;
    p.attention.heads = 12;
    int id = add_ok(g, SF_OP_ATTENTION, "mha", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    assert_true(op->n_params == 2362368); /* torch.nn.MultiheadAttention(768, 12) */
    check_shape(&op->out_shapes[0], 3, (int64_t[]){8, 128, 768});
    check_kinds(op, 4,
                (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_NONE, SF_DIM_REDUCE});
    assert_true(op->space.d[3] == 12); /* the heads */
    p.attention.bias = 0;
    id = add_ok(g, SF_OP_ATTENTION, "mha_nobias", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    assert_true(sf_graph_op(g, id)->n_params == 4 * 768 * 768);

    /* errors */
    int mem_d = add_input(g, "mem_d", 3, (int64_t[]){8, 10, 512});
    int mem_n = add_input(g, "mem_n", 3, (int64_t[]){4, 10, 768});
    int flat = add_input(g, "flat", 2, (int64_t[]){8, 768});
    p.attention.heads = 10;
    expect_fail(g, SF_OP_ATTENTION, "bad_heads", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "heads (10) must divide embed_dim (768)");
    p.attention.heads = 12;
    p.attention.embed_dim = 384;
    expect_fail(g, SF_OP_ATTENTION, "bad_d", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "query's last dimension (768) must equal embed_dim (384)");
    p.attention.embed_dim = 768;
    expect_fail(g, SF_OP_ATTENTION, "bad_mem_d", &p, (sf_tensor_ref[]){{x, 0}, {mem_d, 0}}, 2,
                "memory's last dimension (512)");
    expect_fail(g, SF_OP_ATTENTION, "bad_mem_n", &p, (sf_tensor_ref[]){{x, 0}, {mem_n, 0}}, 2,
                "memory batch (4) differs from query batch (8)");
    expect_fail(g, SF_OP_ATTENTION, "bad_rank", &p, (sf_tensor_ref[]){{flat, 0}}, 1,
                "query must be 3-D");
    expect_fail(g, SF_OP_ATTENTION, "three_in", &p,
                (sf_tensor_ref[]){{x, 0}, {x, 0}, {x, 0}}, 3, "needs 1..2 inputs, got 3");
    p.attention.heads = 0;
    expect_fail(g, SF_OP_ATTENTION, "no_heads", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "heads must be >= 1");
    sf_graph_free(g);
}

static void test_attention_tiles_and_flops(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("attn");
    int q = add_input(g, "q", 3, (int64_t[]){2, 4, 8});
    int mem = add_input(g, "mem", 3, (int64_t[]){2, 6, 8});
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 8;
    p.attention.heads = 2;
    int self = add_ok(g, SF_OP_ATTENTION, "self", &p, (sf_tensor_ref[]){{q, 0}}, 1);
    const sf_op *op = sf_graph_op(g, self);
    assert_true(op->n_params == 4 * 64 + 32);

    /* N=2, T=4, D=8, 2 heads, bias: Q 1024, K+V 2048, scores 512, context 512,
     * output 1024, softmax 5*2*2*4*4 = 320, bias adds 64 + 128 + 64 = 256 */
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 5696.0);
    assert_true(c.flops_bwd == 2 * 5696.0);

    /* self attention split on Tq (D is never split: op_attention.c): the one
     * input is needed in all T rows, and the tile holds all the weights */
    sf_tile t = mk_tile(3, (int64_t[]){0, 1, 0}, (int64_t[]){1, 3, 8});
    sf_tile r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 4, 8});
    assert_true(sf_op_tile_weights(op, &t) == 288);

    /* causal: rows [1, 3) need keys [0, 3) only */
    p.attention.causal = 1;
    int causal = add_ok(g, SF_OP_ATTENTION, "causal", &p, (sf_tensor_ref[]){{q, 0}}, 1);
    op = sf_graph_op(g, causal);
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 3, 8});
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 5696.0); /* the full tile sees every key */
    /* rows [1, 3) project and score keys [0, 3): Q 256, K+V 768, scores +
     * context 192, output 256, softmax 5*2*2*3 = 60, bias adds 16 + 48 + 16 */
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 1612.0);

    /* cross attention without bias, Tk = 6: tile n=1, rows [1, 3):
     * Q 2*1*2*8*8 = 256, K+V 4*1*6*8*8 = 1536, scores + context 2*192,
     * output 256, softmax 5*1*2*2*6 = 120 */
    p.attention.causal = 0;
    p.attention.bias = 0;
    int cross = add_ok(g, SF_OP_ATTENTION, "cross", &p, (sf_tensor_ref[]){{q, 0}, {mem, 0}}, 2);
    op = sf_graph_op(g, cross);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){2, 4, 8});
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 1, 0}, (int64_t[]){1, 3, 8});
    sf_op_input_region(op, &t, 1, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 6, 8});
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 2552.0);
    /* saved: query rows 16 + memory 48, Q 16, K+V 96, probabilities 24, context 16 */
    sf_op_mem m;
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.saved_bytes == 216.0 * 4);
    assert_true(m.output_bytes == 16.0 * 4);
    assert_true(m.weight_bytes == 256.0 * 4);
    sf_graph_free(g);
}

/* A head part: its heads' Q, K, V, scores and context, its columns of W_o, the
 * output bias on the first; the two head parts add up to the whole tile. */
static void test_attention_heads(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("attn");
    int q = add_input(g, "q", 3, (int64_t[]){2, 4, 8});
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 8;
    p.attention.heads = 2;
    const sf_op *op =
        sf_graph_op(g, add_ok(g, SF_OP_ATTENTION, "self", &p, (sf_tensor_ref[]){{q, 0}}, 1));
    sf_tile h0 = mk_tile(4, (int64_t[]){0, 0, 0, 0}, (int64_t[]){2, 4, 8, 1});
    sf_tile h1 = mk_tile(4, (int64_t[]){0, 0, 0, 1}, (int64_t[]){2, 4, 8, 2});
    /* head 1: Q 2*32*8 + K, V 2*64*8, scores + context 4*32*4, output
     * 2*64*4, softmax 5*32, biases of Q, K, V 96 (b_o is head 0's) */
    sf_op_cost c;
    sf_op_tile_cost(op, &h1, &c);
    assert_true(c.flops_fwd == 2816.0);
    sf_op_tile_cost(op, &h0, &c);
    assert_true(c.flops_fwd == 2816.0 + 64); /* and b_o's 64 adds */
    assert_true(sf_op_tile_weights(op, &h1) == 4 * 8 * 4 + 12);
    assert_true(sf_op_tile_weights(op, &h0) == 4 * 8 * 4 + 12 + 8);
    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    assert_int_equal(sf_op_weight_slices(op, &h1, sl), 3);
    int64_t want1[3][4] = {{32, 32, 64, 3}, {196, 4, 8, 8}, {260, 4, 8, 3}};
    for (int i = 0; i < 3; i++) {
        assert_true(sl[i].offset == want1[i][0] && sl[i].len == want1[i][1]);
        assert_true(sl[i].stride == want1[i][2] && sl[i].count == want1[i][3]);
    }
    assert_int_equal(sf_op_weight_slices(op, &h0, sl), 4);
    assert_true(sl[0].offset == 0 && sl[1].offset == 192 && sl[2].offset == 256);
    assert_true(sl[3].offset == 280 && sl[3].len == 8 && sl[3].count == 1);
    sf_tile full = sf_tile_full(&op->space);
    assert_int_equal(sf_op_weight_slices(op, &full, sl), 1);
    assert_true(sl[0].offset == 0 && sl[0].len == op->n_params);
    /* a head part needs every input feature and writes the whole output piece */
    sf_tile r, o;
    sf_op_input_region(op, &h1, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 4, 8});
    sf_op_output_tile(op, &h1, 0, &o);
    check_tile(&o, 3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 4, 8});
    sf_op_mem m;
    sf_op_tile_memory(op, &h1, &m);
    assert_true(m.output_bytes == 64.0 * 4);
    assert_true(m.weight_bytes == 140.0 * 4);
    /* saved: the input 64, Q 32, K+V 64, probabilities 32, context 32 */
    assert_true(m.saved_bytes == 224.0 * 4);
    /* causal, rows [1, 3) of head 1: keys [0, 3) */
    p.attention.causal = 1;
    op = sf_graph_op(g, add_ok(g, SF_OP_ATTENTION, "causal", &p, (sf_tensor_ref[]){{q, 0}}, 1));
    sf_tile t = mk_tile(4, (int64_t[]){0, 1, 0, 1}, (int64_t[]){1, 3, 8, 2});
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 3, 8});
    /* Q 2*8*8, K+V 2*24*8, scores + context 4*8*3, output 2*16*4, softmax
     * 5*1*2*3, biases 8 + 24 */
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 128 + 384 + 96 + 128 + 30 + 32);
    sf_op_cost c0 = c;
    sf_op_mem m0;
    sf_op_tile_memory(op, &t, &m0);
    /* with dropout of the probabilities: 2 per score (1*1*2*3 of them) forward,
     * 1 backward, the 4-byte mask written, read back and kept */
    p.attention.dropout = 0.1;
    op = sf_graph_op(g, add_ok(g, SF_OP_ATTENTION, "drop", &p, (sf_tensor_ref[]){{q, 0}}, 1));
    assert_true(op->params.attention.dropout == 0.1);
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == c0.flops_fwd + 12);
    assert_true(c.flops_bwd == c0.flops_bwd + 6);
    assert_true(c.bytes_fwd == c0.bytes_fwd + 24 && c.bytes_bwd == c0.bytes_bwd + 24);
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.saved_bytes == m0.saved_bytes + 24);
    assert_true(m.output_bytes == m0.output_bytes && m.weight_bytes == m0.weight_bytes);
    assert_true(sf_kernel_workspace_bytes(op, &t, 1) >
                sf_kernel_workspace_bytes(sf_graph_op(g, sf_graph_find(g, "causal")), &t, 1));
    /* a ratio outside [0, 1) is refused */
    p.attention.dropout = 1.0;
    expect_fail(g, SF_OP_ATTENTION, "bad", &p, (sf_tensor_ref[]){{q, 0}}, 1,
                "dropout must be in [0, 1)");
    p.attention.dropout = -0.1;
    expect_fail(g, SF_OP_ATTENTION, "bad", &p, (sf_tensor_ref[]){{q, 0}}, 1,
                "dropout must be in [0, 1)");
    sf_graph_free(g);
}

/* ---- split -------------------------------------------------------------- */

static void test_split_even(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("split");
    int x = add_input(g, "x", 3, (int64_t[]){5, 10, 3});
    sf_op_params p;
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 1;
    p.split.parts = 3;
    int id = add_ok(g, SF_OP_SPLIT, "s", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    assert_int_equal(op->n_outputs, 3);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){5, 3, 3});
    check_shape(&op->out_shapes[1], 3, (int64_t[]){5, 3, 3});
    check_shape(&op->out_shapes[2], 3, (int64_t[]){5, 4, 3});
    check_shape(&op->space, 3, (int64_t[]){5, 10, 3}); /* the input, not output 0 */
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});

    /* a tile straddling all three slices [0,3) [3,6) [6,10) */
    sf_tile t = mk_tile(3, (int64_t[]){0, 2, 0}, (int64_t[]){5, 7, 3});
    sf_tile o, r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){0, 2, 0}, (int64_t[]){5, 7, 3});
    sf_op_output_tile(op, &t, 0, &o);
    check_tile(&o, 3, (int64_t[]){0, 2, 0}, (int64_t[]){5, 3, 3});
    sf_op_output_tile(op, &t, 1, &o);
    check_tile(&o, 3, (int64_t[]){0, 0, 0}, (int64_t[]){5, 3, 3});
    sf_op_output_tile(op, &t, 2, &o);
    check_tile(&o, 3, (int64_t[]){0, 0, 0}, (int64_t[]){5, 1, 3});
    /* a tile inside slice 0 misses slice 2 */
    sf_tile t0 = mk_tile(3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 3, 3});
    sf_op_output_tile(op, &t0, 2, &o);
    assert_true(sf_tile_empty(&o));
    assert_int_equal(o.ndim, 3);
    sf_op_output_tile(op, &t0, 0, &o);
    check_tile(&o, 3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 3, 3});

    sf_op_cost c;
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 0.0 && c.flops_bwd == 0.0);
    assert_true(c.bytes_fwd == 2.0 * 75 * 4);

    /* whatever the tiling, the output pieces partition the tile */
    for (int d0 = 1; d0 <= 2; d0++)
        for (int d1 = 1; d1 <= 4; d1++)
            for (int a = 0; a < d0; a++)
                for (int b = 0; b < d1; b++) {
                    sf_tile u = sf_tile_full(&op->space);
                    sf_split_range(5, d0, a, &u.lo[0], &u.hi[0]);
                    sf_split_range(10, d1, b, &u.lo[1], &u.hi[1]);
                    int64_t sum = 0;
                    for (int k = 0; k < op->n_outputs; k++) {
                        sf_op_output_tile(op, &u, k, &o);
                        sum += sf_tile_numel(&o);
                    }
                    assert_true(sum == sf_tile_numel(&u));
                }
    sf_graph_free(g);
}

static void test_split_sizes_and_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("split");
    int x = add_input(g, "x", 3, (int64_t[]){5, 10, 3});
    sf_op_params p;
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = -2; /* axis 1 */
    p.split.parts = 3;
    p.split.sizes[0] = 2;
    p.split.sizes[1] = 5;
    p.split.sizes[2] = 3;
    int id = add_ok(g, SF_OP_SPLIT, "s", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){5, 2, 3});
    check_shape(&op->out_shapes[1], 3, (int64_t[]){5, 5, 3});
    check_shape(&op->out_shapes[2], 3, (int64_t[]){5, 3, 3});
    sf_tile t = mk_tile(3, (int64_t[]){1, 1, 1}, (int64_t[]){4, 8, 2});
    sf_tile o;
    sf_op_output_tile(op, &t, 0, &o);
    check_tile(&o, 3, (int64_t[]){1, 1, 1}, (int64_t[]){4, 2, 2});
    sf_op_output_tile(op, &t, 1, &o);
    check_tile(&o, 3, (int64_t[]){1, 0, 1}, (int64_t[]){4, 5, 2});
    sf_op_output_tile(op, &t, 2, &o);
    check_tile(&o, 3, (int64_t[]){1, 0, 1}, (int64_t[]){4, 1, 2});
    /* the border: the last row of the axis only */
    sf_tile tb = mk_tile(3, (int64_t[]){0, 9, 0}, (int64_t[]){5, 10, 3});
    sf_op_output_tile(op, &tb, 2, &o);
    check_tile(&o, 3, (int64_t[]){0, 2, 0}, (int64_t[]){5, 3, 3});
    sf_op_output_tile(op, &tb, 1, &o);
    assert_true(sf_tile_empty(&o));

    /* split on the sample dimension: kinds unchanged */
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.parts = 2;
    id = add_ok(g, SF_OP_SPLIT, "s0", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){2, 10, 3});
    check_shape(&op->out_shapes[1], 3, (int64_t[]){3, 10, 3});
    assert_int_equal(op->kinds[0], SF_DIM_SAMPLE);

    /* errors */
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 1;
    expect_fail(g, SF_OP_SPLIT, "no_parts", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "parts must be 1..64, got 0");
    p.split.parts = 3;
    p.split.sizes[0] = 2;
    p.split.sizes[1] = 4;
    p.split.sizes[2] = 3;
    expect_fail(g, SF_OP_SPLIT, "bad_sum", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "sizes sum to 9 but axis 1 has length 10");
    p.split.sizes[2] = 0;
    expect_fail(g, SF_OP_SPLIT, "zero_size", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "sizes[2] is 0");
    p.split.sizes[2] = 3;
    p.split.sizes[3] = 1;
    expect_fail(g, SF_OP_SPLIT, "extra_size", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "more entries than parts (3)");
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 2;
    p.split.parts = 4;
    expect_fail(g, SF_OP_SPLIT, "too_many", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "axis 2 of length 3 into 4 non-empty parts");
    p.split.axis = 3;
    p.split.parts = 2;
    expect_fail(g, SF_OP_SPLIT, "bad_axis", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "axis 3 out of range for a 3-D input");
    p.split.axis = -4;
    expect_fail(g, SF_OP_SPLIT, "bad_axis2", &p, (sf_tensor_ref[]){{x, 0}}, 1, "axis -4");
    p.split.axis = 0;
    expect_fail(g, SF_OP_SPLIT, "two_in", &p, (sf_tensor_ref[]){{x, 0}, {x, 0}}, 2,
                "needs 1..1 inputs");

    /* the sizes attribute keeps its count in parts */
    int n = 0;
    const sf_attr_desc *attrs = sf_op_attrs(SF_OP_SPLIT, &n);
    assert_int_equal(n, 3);
    assert_string_equal(attrs[2].name, "sizes");
    assert_int_equal(attrs[2].type, SF_ATTR_INTS);
    assert_int_equal(attrs[2].count, 0);
    assert_true(attrs[2].count_offset == offsetof(sf_op_params, split.parts));
    assert_int_equal(attrs[2].max_count, SF_MAX_SPLIT);
    sf_graph_free(g);
}

/* ---- softmax_ce and layernorm ------------------------------------------- */

static void test_softmax_ce(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("sce");
    int x = add_input(g, "x", 3, (int64_t[]){8, 5, 10});
    int v = add_input(g, "v", 1, (int64_t[]){8});
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int id = add_ok(g, SF_OP_SOFTMAX_CE, "loss", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){8, 5, 10});
    assert_true(op->n_params == 0);
    /* the classes: an attribute, the inner dimension (vocabulary-parallel) */
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});
    assert_int_equal(sf_op_inner_dim(op), 2);
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 5.0 * 400 && c.flops_bwd == 2.0 * 400);
    sf_tile t = mk_tile(3, (int64_t[]){3, 2, 0}, (int64_t[]){6, 3, 10}), r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){3, 2, 0}, (int64_t[]){6, 3, 10});
    expect_fail(g, SF_OP_SOFTMAX_CE, "bad", &p, (sf_tensor_ref[]){{v, 0}}, 1,
                "at least 2 dimensions");
    sf_op_type ty;
    assert_int_equal(sf_op_type_from_name("softmax_ce", &ty), SF_OK);
    assert_int_equal(ty, SF_OP_SOFTMAX_CE);
    sf_graph_free(g);
}

static void test_layernorm(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("ln");
    int x = add_input(g, "x", 3, (int64_t[]){4, 6, 32});
    int v = add_input(g, "v", 1, (int64_t[]){4});
    sf_op_params p;
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    assert_true(p.norm.eps == 1e-5);
    assert_int_equal(p.norm.affine, 1);
    int id = add_ok(g, SF_OP_LAYERNORM, "ln", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, id);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){4, 6, 32});
    assert_true(op->n_params == 64);
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_NONE});
    sf_tile full = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 8.0 * 768 && c.flops_bwd == 10.0 * 768);
    /* a sample/sequence tile holds all the (unsplittable) weights */
    sf_tile t = mk_tile(3, (int64_t[]){1, 2, 0}, (int64_t[]){3, 5, 32}), r;
    assert_true(sf_op_tile_weights(op, &t) == 64);
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){1, 2, 0}, (int64_t[]){3, 5, 32});
    p.norm.affine = 0;
    id = add_ok(g, SF_OP_LAYERNORM, "ln_plain", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    op = sf_graph_op(g, id);
    assert_true(op->n_params == 0);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 6.0 * 768);
    p.norm.eps = -1;
    expect_fail(g, SF_OP_LAYERNORM, "bad_eps", &p, (sf_tensor_ref[]){{x, 0}}, 1,
                "eps must be finite and >= 0");
    p.norm.eps = 1e-5;
    expect_fail(g, SF_OP_LAYERNORM, "bad_rank", &p, (sf_tensor_ref[]){{v, 0}}, 1,
                "at least 2 dimensions");
    sf_graph_free(g);
}

/* A small transformer-ish / seq2seq-ish chain through all of them: names,
 * shapes and the graph totals line up. */
static void test_chain(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("chain");
    sf_error err = {0};
    sf_shape s = sf_shape_make(2, (int64_t[]){4, 6});
    int ids = sf_graph_add_input(g, "ids", &s, 1, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 50;
    p.embedding.embedding_dim = 8;
    int emb = add_ok(g, SF_OP_EMBEDDING, "emb", &p, (sf_tensor_ref[]){{ids, 0}}, 1);
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 8;
    int lstm = add_ok(g, SF_OP_LSTM, "lstm", &p, (sf_tensor_ref[]){{emb, 0}}, 1);
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 8;
    p.attention.heads = 4;
    int att = add_ok(g, SF_OP_ATTENTION, "att", &p, (sf_tensor_ref[]){{lstm, 0}, {emb, 0}}, 2);
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    int ln = add_ok(g, SF_OP_LAYERNORM, "ln", &p, (sf_tensor_ref[]){{att, 0}}, 1);
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 2;
    p.split.parts = 2;
    int sp = add_ok(g, SF_OP_SPLIT, "sp", &p, (sf_tensor_ref[]){{ln, 0}}, 1);
    sf_op_params_default(SF_OP_MATMUL, &p);
    p.matmul.transpose_b = 1;
    int mm = add_ok(g, SF_OP_MATMUL, "mm", &p, (sf_tensor_ref[]){{sp, 0}, {sp, 1}}, 2);
    check_shape(&sf_graph_op(g, mm)->out_shapes[0], 3, (int64_t[]){4, 6, 6});
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int loss = add_ok(g, SF_OP_SOFTMAX_CE, "loss", &p, (sf_tensor_ref[]){{mm, 0}}, 1);
    assert_int_equal(loss, 7);
    /* using hT (output 1) of the lstm as a 2-D tensor */
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int hl = add_ok(g, SF_OP_SOFTMAX_CE, "hloss", &p, (sf_tensor_ref[]){{lstm, 1}}, 1);
    check_shape(&sf_graph_op(g, hl)->out_shapes[0], 2, (int64_t[]){4, 8});
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    /* 400 + (4*8*16 + 64) + (4*64 + 32) + 16 */
    assert_true(st.params == 400 + 576 + 288 + 16);
    assert_true(st.batch == 4);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_lstm_params_and_shapes),
        cmocka_unit_test(test_gru_shapes_flops_errors),
        cmocka_unit_test(test_lstm_tiles_and_flops),
        cmocka_unit_test(test_attention_params),
        cmocka_unit_test(test_attention_tiles_and_flops),
        cmocka_unit_test(test_attention_heads),
        cmocka_unit_test(test_split_even),
        cmocka_unit_test(test_split_sizes_and_errors),
        cmocka_unit_test(test_softmax_ce),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
