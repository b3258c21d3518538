/* The operators issue 28 added for imported models (add_param, mul_param,
 * scale, ...): shapes and parameter counts against PyTorch's, every check of
 * their shape inference with the operator and the numbers in the message,
 * their parallel dimensions and weight slices by hand, FLOPs by hand and
 * summed over split parts, and their attributes through the model JSON and
 * back. Kernels are tested in test_kernels_ops.c, every split in
 * test_ops_slices.c, and the ONNX mappings in test_io_onnx.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "ops_check.h"
#include "soapflow/graph.h"
#include "soapflow/io.h"

static void expect_fail(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p, int x,
                        sf_status code, const char *needle) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, t, name, p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (id >= 0) fail_msg("'%s' was accepted; expected \"%s\"", name, needle);
    assert_int_equal(err.code, code);
    if (!strstr(err.msg, name)) fail_msg("message does not name %s: %s", name, err.msg);
    if (!strstr(err.msg, needle)) fail_msg("message lacks \"%s\": %s", needle, err.msg);
}

static int add_ok(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p, int x) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, t, name, p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (id < 0) fail_msg("%s: %s", name, err.msg);
    return id;
}

static sf_op_params param_p(sf_op_type t, int nd, const int64_t *d) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    p.param.ndim = nd;
    for (int k = 0; k < nd; k++) p.param.shape[k] = d[k];
    return p;
}

/* ---- add_param, mul_param ---------------------------------------------------- */

static void test_param_shapes_and_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("p");
    int x = add_input(g, "x", 3, (int64_t[]){2, 5, 8});
    /* ViT's pos_embedding (1, T, D): T * D parameters, the input's shape out */
    sf_op_params p = param_p(SF_OP_ADD_PARAM, 3, (int64_t[]){1, 5, 8});
    int a = add_ok(g, SF_OP_ADD_PARAM, "pos", &p, x);
    const sf_op *op = sf_graph_op(g, a);
    assert_int_equal(op->n_params, 40);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){2, 5, 8});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_PARAMETER, SF_DIM_PARAMETER});
    /* a layer scale (D,): D parameters, T an attribute */
    p = param_p(SF_OP_MUL_PARAM, 1, (int64_t[]){8});
    op = sf_graph_op(g, add_ok(g, SF_OP_MUL_PARAM, "gamma", &p, x));
    assert_int_equal(op->n_params, 8);
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_PARAMETER});
    /* a scalar: no parameter dimension */
    p = param_p(SF_OP_MUL_PARAM, 0, NULL);
    op = sf_graph_op(g, add_ok(g, SF_OP_MUL_PARAM, "temp", &p, x));
    assert_int_equal(op->n_params, 1);
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});

    p = param_p(SF_OP_ADD_PARAM, 3, (int64_t[]){1, 4, 8});
    expect_fail(g, SF_OP_ADD_PARAM, "bad_t", &p, x, SF_ERR_SHAPE,
                "the weight is 4 along dimension 1 of the input 2x5x8 (must be 5 or 1)");
    p = param_p(SF_OP_ADD_PARAM, 3, (int64_t[]){2, 5, 8});
    expect_fail(g, SF_OP_ADD_PARAM, "bad_batch", &p, x, SF_ERR_SHAPE,
                "the weight is 2 along the batch");
    p = param_p(SF_OP_MUL_PARAM, 4, (int64_t[]){1, 1, 5, 8});
    expect_fail(g, SF_OP_MUL_PARAM, "bad_rank", &p, x, SF_ERR_SHAPE,
                "the weight has 4 dimensions, the input 2x5x8 only 3");
    p = param_p(SF_OP_MUL_PARAM, 2, (int64_t[]){0, 8});
    expect_fail(g, SF_OP_MUL_PARAM, "bad_zero", &p, x, SF_ERR_SHAPE, "weight dimension 0 is 0");
    sf_graph_free(g);
}

/* The slices of a (1, T, D) embedding: rows of T and columns of D. */
static void test_param_slices(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("p");
    int x = add_input(g, "x", 4, (int64_t[]){2, 3, 4, 5});
    sf_op_params p = param_p(SF_OP_MUL_PARAM, 3, (int64_t[]){3, 1, 5}); /* (C, 1, W) */
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_MUL_PARAM, "s", &p, x));
    check_kinds(
        op, 4,
        (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_PARAMETER, SF_DIM_ATTRIBUTE, SF_DIM_PARAMETER});
    sf_tile t = mk_tile(4, (int64_t[]){0, 1, 0, 2}, (int64_t[]){1, 3, 2, 4});
    sf_weight_slice s[SF_MAX_WEIGHT_SLICES];
    assert_int_equal(sf_op_weight_slices(op, &t, s), 1);
    /* channels 1, 2 (rows of 5), columns 2, 3 */
    assert_int_equal(s[0].offset, 1 * 5 + 2);
    assert_int_equal(s[0].len, 2);
    assert_int_equal(s[0].stride, 5);
    assert_int_equal(s[0].count, 2);
    assert_int_equal(sf_op_tile_weights(op, &t), 4);
    /* FLOPs: 1 forward and 3 backward per element; the parts add up */
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 120 && c.flops_bwd == 360);
    double sum = 0;
    for (int k = 0; k < 3; k++) {
        sf_tile part = full;
        part.lo[1] = k;
        part.hi[1] = k + 1;
        sf_op_cost pc;
        sf_op_tile_cost(op, &part, &pc);
        sum += pc.flops_bwd;
    }
    assert_true(sum == c.flops_bwd);
    sf_graph_free(g);
}

/* ---- scale -------------------------------------------------------------------- */

static void test_scale_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("s");
    int x = add_input(g, "x", 2, (int64_t[]){2, 5});
    sf_op_params p;
    sf_op_params_default(SF_OP_SCALE, &p);
    assert_true(p.scale.mul == 1 && p.scale.add == 0);
    p.scale.mul = NAN;
    expect_fail(g, SF_OP_SCALE, "bad_mul", &p, x, SF_ERR_INVALID, "must be finite numbers");
    p.scale.mul = 2;
    p.scale.add = INFINITY;
    expect_fail(g, SF_OP_SCALE, "bad_add", &p, x, SF_ERR_INVALID, "must be finite numbers");
    p.scale.add = 1;
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_SCALE, "ok", &p, x));
    assert_int_equal(op->n_params, 0);
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 20 && c.flops_bwd == 10);
    sf_graph_free(g);
}

/* ---- concat_param ------------------------------------------------------------- */

static sf_op_params cp_p(int axis, int last, int nd, const int64_t *d) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT_PARAM, &p);
    p.concat_param.axis = axis;
    p.concat_param.last = last;
    p.concat_param.ndim = nd;
    for (int k = 0; k < nd; k++) p.concat_param.shape[k] = d[k];
    return p;
}

static void test_concat_param_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("c");
    int x = add_input(g, "x", 3, (int64_t[]){2, 196, 16});
    /* ViT-B/16's class token at width 16: (1, 1, D), 197 tokens out */
    sf_op_params p = cp_p(1, 0, 3, (int64_t[]){1, 1, 16});
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_CONCAT_PARAM, "cls", &p, x));
    assert_int_equal(op->n_params, 16);
    check_shape(&op->out_shapes[0], 3, (int64_t[]){2, 197, 16});
    check_kinds(op, 3, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});
    /* the region: token rows need none of x, the rest x shifted by one */
    sf_tile t = mk_tile(3, (int64_t[]){0, 0, 0}, (int64_t[]){2, 1, 16}), r;
    sf_op_input_region(op, &t, 0, &r);
    assert_int_equal(sf_tile_numel(&r), 0);
    t = mk_tile(3, (int64_t[]){1, 0, 4}, (int64_t[]){2, 10, 8});
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 3, (int64_t[]){1, 0, 4}, (int64_t[]){2, 9, 8});
    /* backward FLOPs: the token's gradient, summed over the batch */
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 0 && c.flops_bwd == 32);

    p = cp_p(0, 0, 3, (int64_t[]){1, 1, 16});
    expect_fail(g, SF_OP_CONCAT_PARAM, "cp_batch", &p, x, SF_ERR_INVALID, "axis 0");
    p = cp_p(1, 0, 2, (int64_t[]){1, 16});
    expect_fail(g, SF_OP_CONCAT_PARAM, "cp_rank", &p, x, SF_ERR_SHAPE,
                "the learned tensor has rank 2, the input 2x196x16 3");
    p = cp_p(1, 0, 3, (int64_t[]){1, 1, 8});
    expect_fail(g, SF_OP_CONCAT_PARAM, "cp_width", &p, x, SF_ERR_SHAPE,
                "is 8 along dimension 2; it must be 16");
    p = cp_p(1, 0, 3, (int64_t[]){2, 1, 16});
    expect_fail(g, SF_OP_CONCAT_PARAM, "cp_n", &p, x, SF_ERR_SHAPE,
                "is 2 along dimension 0; it must be 1");
    sf_graph_free(g);
}

/* ---- transpose ------------------------------------------------------------------- */

static sf_op_params tr_p(int nd, const int64_t *perm) {
    sf_op_params p;
    sf_op_params_default(SF_OP_TRANSPOSE, &p);
    p.transpose.ndim = nd;
    for (int k = 0; k < nd; k++) p.transpose.perm[k] = perm[k];
    return p;
}

static void test_transpose_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    int x = add_input(g, "x", 4, (int64_t[]){2, 3, 4, 5});
    sf_op_params p = tr_p(4, (int64_t[]){0, 2, 3, 1}); /* NCHW to NHWC */
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_TRANSPOSE, "nhwc", &p, x));
    check_shape(&op->out_shapes[0], 4, (int64_t[]){2, 4, 5, 3});
    check_kinds(
        op, 4,
        (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});
    /* an output tile (n, h, w, c) needs the input's (n, c, h, w) */
    sf_tile t = mk_tile(4, (int64_t[]){1, 1, 0, 2}, (int64_t[]){2, 3, 5, 3}), r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 4, (int64_t[]){1, 2, 1, 0}, (int64_t[]){2, 3, 3, 5});
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 0 && c.bytes_fwd == 2.0 * 120 * 4);
    assert_int_equal(op->n_params, 0);

    p = tr_p(3, (int64_t[]){0, 2, 1});
    expect_fail(g, SF_OP_TRANSPOSE, "tr_rank", &p, x, SF_ERR_SHAPE, "perm has 3 entries");
    p = tr_p(4, (int64_t[]){0, 2, 2, 1});
    expect_fail(g, SF_OP_TRANSPOSE, "tr_dup", &p, x, SF_ERR_INVALID,
                "perm is not a permutation of 0..3 (entry 2 is 2)");
    p = tr_p(4, (int64_t[]){1, 0, 2, 3});
    expect_fail(g, SF_OP_TRANSPOSE, "tr_batch", &p, x, SF_ERR_UNSUPPORTED, "perm moves the batch");
    sf_graph_free(g);
}

/* ---- pad --------------------------------------------------------------------------- */

static sf_op_params pad_p(int n, const int64_t *pads) {
    sf_op_params p;
    sf_op_params_default(SF_OP_PAD, &p);
    p.pad.n_pads = n;
    for (int k = 0; k < n; k++) p.pad.pads[k] = pads[k];
    return p;
}

static void test_pad_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("p");
    int x = add_input(g, "x", 4, (int64_t[]){2, 3, 4, 5});
    /* ZeroPad2d((1, 0, 2, 0)): 2 rows on top, 1 column on the left */
    sf_op_params p = pad_p(8, (int64_t[]){0, 0, 2, 1, 0, 0, 0, 0});
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_PAD, "zpad", &p, x));
    check_shape(&op->out_shapes[0], 4, (int64_t[]){2, 3, 6, 6});
    /* a tile of the top rows needs nothing; one across the border the rows it covers */
    sf_tile t = mk_tile(4, (int64_t[]){0, 0, 0, 0}, (int64_t[]){2, 3, 2, 6}), r;
    sf_op_input_region(op, &t, 0, &r);
    assert_int_equal(sf_tile_numel(&r), 0);
    t = mk_tile(4, (int64_t[]){0, 1, 1, 0}, (int64_t[]){1, 2, 4, 3});
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 4, (int64_t[]){0, 1, 0, 0}, (int64_t[]){1, 2, 2, 2});
    sf_op_cost c;
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 0 && c.bytes_fwd == (9.0 + 4.0) * 4);

    p = pad_p(6, (int64_t[]){0, 0, 1, 0, 0, 1});
    expect_fail(g, SF_OP_PAD, "pad_n", &p, x, SF_ERR_SHAPE, "pads has 6 values");
    p = pad_p(8, (int64_t[]){0, 0, -1, 0, 0, 0, 0, 0});
    expect_fail(g, SF_OP_PAD, "pad_neg", &p, x, SF_ERR_INVALID, "pads -1 and 0 of dimension 2");
    p = pad_p(8, (int64_t[]){1, 0, 0, 0, 0, 0, 0, 0});
    expect_fail(g, SF_OP_PAD, "pad_batch", &p, x, SF_ERR_UNSUPPORTED, "pads the batch");
    sf_graph_free(g);
}

/* ---- reduce_mean ------------------------------------------------------------------- */

static sf_op_params rm_p(int n, const int64_t *axes, int keep) {
    sf_op_params p;
    sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
    p.reduce.n_axes = n;
    p.reduce.keepdims = keep;
    for (int k = 0; k < n; k++) p.reduce.axes[k] = axes[k];
    return p;
}

static void test_reduce_mean_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("r");
    int x = add_input(g, "x", 4, (int64_t[]){2, 3, 4, 5});
    sf_op_params p;
    sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
    assert_int_equal(p.reduce.keepdims, 1); /* ONNX's default */
    /* x.mean([2, 3]): (N, C) */
    p = rm_p(2, (int64_t[]){2, 3}, 0);
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_REDUCE_MEAN, "gap", &p, x));
    check_shape(&op->out_shapes[0], 2, (int64_t[]){2, 3});
    check_kinds(op, 2, (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE});
    sf_tile t = mk_tile(2, (int64_t[]){1, 1}, (int64_t[]){2, 3}), r;
    sf_op_input_region(op, &t, 0, &r);
    check_tile(&r, 4, (int64_t[]){1, 1, 0, 0}, (int64_t[]){2, 3, 4, 5});
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 120 + 6 && c.flops_bwd == 240);
    /* x.mean(1, keepdim=True): the kept size-1 dimension cannot be split */
    p = rm_p(1, (int64_t[]){1}, 1);
    op = sf_graph_op(g, add_ok(g, SF_OP_REDUCE_MEAN, "m1", &p, x));
    check_shape(&op->out_shapes[0], 4, (int64_t[]){2, 1, 4, 5});
    check_kinds(op, 4,
                (sf_dim_kind[]){SF_DIM_SAMPLE, SF_DIM_NONE, SF_DIM_ATTRIBUTE, SF_DIM_ATTRIBUTE});

    p = rm_p(1, (int64_t[]){0}, 1);
    expect_fail(g, SF_OP_REDUCE_MEAN, "rm_batch", &p, x, SF_ERR_INVALID,
                "axis 0 of the input 2x3x4x5: axes are 1 to 3");
    p = rm_p(2, (int64_t[]){3, 2}, 1);
    expect_fail(g, SF_OP_REDUCE_MEAN, "rm_order", &p, x, SF_ERR_INVALID, "axes must increase");
    p = rm_p(0, NULL, 1);
    expect_fail(g, SF_OP_REDUCE_MEAN, "rm_none", &p, x, SF_ERR_INVALID, "0 axes");
    sf_graph_free(g);
}

/* ---- hard_sigmoid, hard_swish ---------------------------------------------------- */

static void test_hard_defaults(void **state) {
    (void)state;
    sf_op_params p;
    sf_op_params_default(SF_OP_HARD_SIGMOID, &p); /* torch's nn.Hardsigmoid */
    assert_true(p.hard_sigmoid.alpha == 1.0 / 6.0 && p.hard_sigmoid.beta == 0.5);
    sf_graph *g = sf_graph_new("h");
    int x = add_input(g, "x", 2, (int64_t[]){2, 5});
    p.hard_sigmoid.beta = NAN;
    expect_fail(g, SF_OP_HARD_SIGMOID, "hs_nan", &p, x, SF_ERR_INVALID, "must be finite numbers");
    sf_op_params_default(SF_OP_HARD_SWISH, &p);
    const sf_op *op = sf_graph_op(g, add_ok(g, SF_OP_HARD_SWISH, "hsw", &p, x));
    sf_op_cost c;
    sf_tile full = sf_tile_full(&op->space);
    sf_op_tile_cost(op, &full, &c);
    assert_true(c.flops_fwd == 40 && c.flops_bwd == 40);
    sf_graph_free(g);
}

/* ---- through the model JSON ------------------------------------------------------- */

static void test_json_round_trip(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("rt");
    int x = add_input(g, "x", 3, (int64_t[]){2, 5, 8});
    sf_op_params p = param_p(SF_OP_ADD_PARAM, 3, (int64_t[]){1, 5, 8});
    int a = add_ok(g, SF_OP_ADD_PARAM, "pos", &p, x);
    p = param_p(SF_OP_MUL_PARAM, 2, (int64_t[]){1, 8});
    int b = add_ok(g, SF_OP_MUL_PARAM, "gamma", &p, a);
    sf_op_params_default(SF_OP_SCALE, &p);
    p.scale.mul = -0.25;
    p.scale.add = 3.5;
    int sc = add_ok(g, SF_OP_SCALE, "sc", &p, b);
    p = cp_p(2, 1, 3, (int64_t[]){1, 5, 3});
    int tok = add_ok(g, SF_OP_CONCAT_PARAM, "tok", &p, sc);
    p = tr_p(3, (int64_t[]){0, 2, 1});
    int tr = add_ok(g, SF_OP_TRANSPOSE, "tr", &p, tok);
    p = pad_p(6, (int64_t[]){0, 1, 0, 0, 2, 3});
    int pd = add_ok(g, SF_OP_PAD, "pd", &p, tr);
    p = rm_p(1, (int64_t[]){2}, 0);
    int rm = add_ok(g, SF_OP_REDUCE_MEAN, "rm", &p, pd);
    sf_op_params_default(SF_OP_HARD_SIGMOID, &p);
    p.hard_sigmoid.alpha = 0.2;
    p.hard_sigmoid.beta = 0.25;
    add_ok(g, SF_OP_HARD_SIGMOID, "hs", &p, rm);
    sf_error err = {0};
    char *json = sf_model_to_json(g, &err);
    assert_non_null(json);
    sf_graph *back = sf_model_parse_json(json, "rt.json", &err);
    if (!back) fail_msg("%s\n%s", err.msg, json);
    assert_int_equal(sf_graph_num_ops(back), sf_graph_num_ops(g));
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *o = sf_graph_op(g, i), *q = sf_graph_op(back, i);
        assert_int_equal(o->type, q->type);
        assert_int_equal(o->n_params, q->n_params);
        assert_true(sf_shape_equal(&o->out_shapes[0], &q->out_shapes[0]));
        if (o->type == SF_OP_ADD_PARAM || o->type == SF_OP_MUL_PARAM) {
            assert_int_equal(o->params.param.ndim, q->params.param.ndim);
            for (int k = 0; k < o->params.param.ndim; k++)
                assert_int_equal(o->params.param.shape[k], q->params.param.shape[k]);
        }
        if (o->type == SF_OP_CONCAT_PARAM)
            assert_true(q->params.concat_param.axis == 2 && q->params.concat_param.last == 1 &&
                        q->params.concat_param.ndim == 3 && q->params.concat_param.shape[2] == 3);
        if (o->type == SF_OP_TRANSPOSE)
            assert_true(q->params.transpose.ndim == 3 && q->params.transpose.perm[1] == 2 &&
                        q->params.transpose.perm[2] == 1);
        if (o->type == SF_OP_PAD)
            assert_true(q->params.pad.n_pads == 6 && q->params.pad.pads[1] == 1 &&
                        q->params.pad.pads[4] == 2 && q->params.pad.pads[5] == 3);
        if (o->type == SF_OP_REDUCE_MEAN)
            assert_true(q->params.reduce.n_axes == 1 && q->params.reduce.axes[0] == 2 &&
                        q->params.reduce.keepdims == 0);
        if (o->type == SF_OP_HARD_SIGMOID)
            assert_true(q->params.hard_sigmoid.alpha == 0.2 && q->params.hard_sigmoid.beta == 0.25);
        if (o->type == SF_OP_SCALE)
            assert_true(q->params.scale.mul == -0.25 && q->params.scale.add == 3.5);
    }
    free(json);
    sf_graph_free(back);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_shapes_and_errors),
        cmocka_unit_test(test_param_slices),
        cmocka_unit_test(test_scale_errors),
        cmocka_unit_test(test_concat_param_shapes),
        cmocka_unit_test(test_transpose_shapes),
        cmocka_unit_test(test_pad_shapes),
        cmocka_unit_test(test_reduce_mean_shapes),
        cmocka_unit_test(test_hard_defaults),
        cmocka_unit_test(test_json_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
