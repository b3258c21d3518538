/* Operators of CNNs and their glue: input, conv2d, pool2d, linear, relu/sigmoid/
 * tanh/gelu, add/mul, concat, reshape/flatten, batchnorm, dropout. Shapes against
 * PyTorch's formulas, parameter counts, FLOPs computed by hand, the input region
 * of awkward tiles, and every error path with the operator's name in the message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ops_check.h"

#include "soapflow/graph.h"

/* ---- helpers ------------------------------------------------------------ */

/* Add a one-input operator; on failure return the status with err filled. */
static int add1(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p, int in,
                sf_error *err) {
    sf_tensor_ref r = {in, 0};
    return sf_graph_add_op(g, t, name, p, &r, 1, err);
}

static int add_ok(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p,
                  const sf_tensor_ref *ins, int n) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, t, name, p, ins, n, &err);
    if (id < 0) fail_msg("%s: %s", name, err.msg);
    return id;
}

static void check_region(const sf_op *op, const sf_tile *t, int input, int nd, const int64_t *lo,
                         const int64_t *hi) {
    sf_tile r;
    sf_op_input_region(op, t, input, &r);
    check_tile(&r, nd, lo, hi);
}

/* The add must fail with `code` and a message that names the operator and
 * contains `needle`. */
static void check_fail(int id, const sf_error *err, sf_status code, const char *op_name,
                       const char *needle) {
    if (id >= 0) fail_msg("operator '%s' was accepted; expected failure (%s)", op_name, needle);
    assert_int_equal(id, code);
    assert_int_equal(err->code, code);
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", op_name);
    if (!strstr(err->msg, quoted)) fail_msg("message does not name %s: %s", quoted, err->msg);
    if (!strstr(err->msg, needle)) fail_msg("message lacks \"%s\": %s", needle, err->msg);
}

static sf_op_cost full_cost(const sf_op *op) {
    sf_tile t = sf_tile_full(&op->space);
    sf_op_cost c;
    sf_op_tile_cost(op, &t, &c);
    return c;
}

#define S SF_DIM_SAMPLE
#define A SF_DIM_ATTRIBUTE
#define P SF_DIM_PARAMETER
#define R SF_DIM_REDUCE
#define N SF_DIM_NONE
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define KINDS(...) ((const sf_dim_kind[]){__VA_ARGS__})

/* ---- conv_transpose2d --------------------------------------------------- */

static void test_conv_transpose2d(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("ct");
    sf_shape xs = sf_shape_make(4, I64(2, 4, 5, 6));
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV_TRANSPOSE2D, &p);
    sf_conv_transpose2d_params *q = &p.conv_transpose2d;
    q->out_channels = 3;
    q->kernel[0] = q->kernel[1] = 3;
    q->stride[0] = q->stride[1] = 2;
    q->padding[0] = q->padding[1] = 1;
    q->output_padding[0] = q->output_padding[1] = 1;
    const sf_op *op = sf_graph_op(g, add1(g, SF_OP_CONV_TRANSPOSE2D, "up", &p, x, &err));
    /* torch: (in - 1) * stride - 2 * padding + kernel + output_padding */
    check_shape(&op->out_shapes[0], 4, I64(2, 3, 10, 12));
    assert_int_equal(op->n_params, 4 * 3 * 9 + 3); /* weight (C_in, C_out, 3, 3), bias */
    assert_int_equal(op->space.ndim, 4);
    check_kinds(op, 4, KINDS(S, P, A, A));
    /* output rows [2, 5) are reached by input rows 1 (1, 2, 3) and 2 (3, 4, 5);
     * every output channel reads every input channel */
    sf_tile t = mk_tile(4, I64(0, 1, 2, 0), I64(2, 3, 5, 12));
    check_region(op, &t, 0, 4, I64(0, 0, 1, 0), I64(2, 4, 3, 6));
    /* the first row needs input rows 0 (-1, 0, 1) only; the last two, row 4 (7, 8, 9)
     * and the output_padding's row 9 (reached by nothing past input row 4) */
    t = mk_tile(4, I64(0, 0, 0, 0), I64(2, 3, 1, 12));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 0), I64(2, 4, 1, 6));
    t = mk_tile(4, I64(0, 0, 8, 0), I64(2, 3, 10, 12));
    check_region(op, &t, 0, 4, I64(0, 0, 4, 0), I64(2, 4, 5, 6));
    /* MACs N * C_in * H * W * C_out * 9 = 6480, the bias 720 adds */
    sf_op_cost c = full_cost(op);
    assert_true(c.flops_fwd == 2 * 6480.0 + 720);
    assert_true(c.flops_bwd == 4 * 6480.0 + 720);
    /* output channels [1, 3): W[:, 1:3] (4 rows of 18, 27 apart) and b[1:3] */
    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    t = mk_tile(4, I64(0, 1, 0, 0), I64(2, 3, 10, 12));
    assert_int_equal(sf_op_weight_slices(op, &t, sl), 2);
    assert_true(sl[0].offset == 9 && sl[0].len == 18 && sl[0].stride == 27 && sl[0].count == 4);
    assert_true(sl[1].offset == 108 + 1 && sl[1].len == 2 && sl[1].count == 1);
    assert_true(sf_op_tile_weights(op, &t) == 4 * 18 + 2);
    /* errors */
    q->output_padding[0] = 2;
    err = (sf_error){0};
    check_fail(add1(g, SF_OP_CONV_TRANSPOSE2D, "bad_op", &p, x, &err), &err, SF_ERR_INVALID,
               "bad_op", "output_padding (2) must be smaller than stride (2)");
    q->output_padding[0] = 0;
    q->padding[0] = 6;
    err = (sf_error){0};
    check_fail(add1(g, SF_OP_CONV_TRANSPOSE2D, "bad_pad", &p, x, &err), &err, SF_ERR_SHAPE,
               "bad_pad", "padding 6 leaves no output");
    q->padding[0] = 1;
    q->out_channels = 0;
    err = (sf_error){0};
    check_fail(add1(g, SF_OP_CONV_TRANSPOSE2D, "bad_c", &p, x, &err), &err, SF_ERR_INVALID, "bad_c",
               "out_channels must be >= 1");
    q->out_channels = 3;
    sf_shape s3 = sf_shape_make(3, I64(2, 4, 5));
    int x3 = sf_graph_add_input(g, "x3", &s3, 0, &err);
    err = (sf_error){0};
    check_fail(add1(g, SF_OP_CONV_TRANSPOSE2D, "bad_rank", &p, x3, &err), &err, SF_ERR_SHAPE,
               "bad_rank", "input must be 4-D");
    sf_graph_free(g);
}

/* ---- resize ------------------------------------------------------------- */

static void test_resize(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("rs");
    sf_shape xs = sf_shape_make(4, I64(2, 3, 4, 6));
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_RESIZE, &p);
    p.resize.mode = SF_RESIZE_BILINEAR;
    p.resize.size[0] = 8;
    p.resize.size[1] = 9;
    const sf_op *op = sf_graph_op(g, add1(g, SF_OP_RESIZE, "bl", &p, x, &err));
    check_shape(&op->out_shapes[0], 4, I64(2, 3, 8, 9));
    assert_int_equal(op->n_params, 0);
    check_kinds(op, 4, KINDS(S, A, A, A));
    /* 4 -> 8 rows, half pixel: s = (o + 0.5) / 2 - 0.5; rows 3, 4 read 1..2, 1..2
     * and 2..3 (s 1.25, 1.75); row 0 reads 0..1 (s below 0 is 0), row 7 row 3 */
    sf_tile t = mk_tile(4, I64(0, 1, 3, 0), I64(2, 2, 5, 9));
    check_region(op, &t, 0, 4, I64(0, 1, 1, 0), I64(2, 2, 3, 6));
    t = mk_tile(4, I64(0, 0, 0, 0), I64(1, 3, 1, 9));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 0), I64(1, 3, 2, 6));
    t = mk_tile(4, I64(0, 0, 7, 0), I64(1, 3, 8, 9));
    check_region(op, &t, 0, 4, I64(0, 0, 3, 0), I64(1, 3, 4, 6));
    sf_op_cost c = full_cost(op);
    assert_true(c.flops_fwd == 8 * 432.0 && c.flops_bwd == 8 * 432.0);
    /* nearest: rows 3, 4 read floor(3/2) = 1 and floor(4/2) = 2 */
    p.resize.mode = SF_RESIZE_NEAREST;
    op = sf_graph_op(g, add1(g, SF_OP_RESIZE, "nn", &p, x, &err));
    t = mk_tile(4, I64(0, 1, 3, 0), I64(2, 2, 5, 9));
    check_region(op, &t, 0, 4, I64(0, 1, 1, 0), I64(2, 2, 3, 6));
    c = full_cost(op);
    assert_true(c.flops_fwd == 0 && c.flops_bwd == 432.0);
    /* align_corners: s = o * 3 / 7; row 7 reads row 3 alone */
    p.resize.mode = SF_RESIZE_BILINEAR;
    p.resize.align_corners = 1;
    op = sf_graph_op(g, add1(g, SF_OP_RESIZE, "ac", &p, x, &err));
    t = mk_tile(4, I64(0, 0, 7, 0), I64(1, 3, 8, 9));
    check_region(op, &t, 0, 4, I64(0, 0, 3, 0), I64(1, 3, 4, 6));
    /* errors */
    p.resize.mode = SF_RESIZE_NEAREST;
    check_fail(add1(g, SF_OP_RESIZE, "bad_ac", &p, x, &err), &err, SF_ERR_INVALID, "bad_ac",
               "align_corners is for bilinear resizing only");
    err = (sf_error){0};
    p.resize.align_corners = 0;
    p.resize.size[1] = 0;
    check_fail(add1(g, SF_OP_RESIZE, "bad_size", &p, x, &err), &err, SF_ERR_INVALID, "bad_size",
               "size must be >= 1, got 8x0");
    err = (sf_error){0};
    p.resize.size[1] = 9;
    sf_shape s3 = sf_shape_make(3, I64(2, 4, 5));
    int x3 = sf_graph_add_input(g, "x3", &s3, 0, &err);
    check_fail(add1(g, SF_OP_RESIZE, "bad_rank", &p, x3, &err), &err, SF_ERR_SHAPE, "bad_rank",
               "input must be 4-D");
    sf_graph_free(g);
}

/* ---- input ------------------------------------------------------------- */

static void test_input(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(8, 3, 32, 32));
    const sf_op *op = sf_graph_op(g, x);
    assert_int_equal(op->n_outputs, 1);
    check_shape(&op->out_shapes[0], 4, I64(8, 3, 32, 32));
    check_kinds(op, 4, KINDS(S, A, A, A));
    assert_int_equal(op->n_params, 0);
    sf_tile t = mk_tile(4, I64(2, 0, 0, 16), I64(4, 3, 32, 32));
    sf_op_cost c;
    sf_op_tile_cost(op, &t, &c);
    assert_true(c.flops_fwd == 0 && c.flops_bwd == 0 && c.bytes_bwd == 0);
    assert_true(c.bytes_fwd == 2.0 * 3 * 32 * 16 * 4);

    sf_shape bad = sf_shape_make(2, I64(8, 0));
    check_fail(sf_graph_add_input(g, "zero", &bad, 0, &err), &err, SF_ERR_SHAPE, "zero",
               "dimension 1");
    sf_error_clear(&err);
    bad = sf_shape_make(0, NULL);
    check_fail(sf_graph_add_input(g, "scalar", &bad, 1, &err), &err, SF_ERR_SHAPE, "scalar",
               "1..6 dimensions");
    sf_error_clear(&err);
    sf_op_params p;
    sf_op_params_default(SF_OP_INPUT, &p);
    p.input.shape = sf_shape_make(1, I64(5));
    sf_tensor_ref r = {x, 0};
    check_fail(sf_graph_add_op(g, SF_OP_INPUT, "fed", &p, &r, 1, &err), &err, SF_ERR_INVALID,
               "fed", "(input): needs 0..0 inputs, got 1");
    int lab = add_ok(g, SF_OP_INPUT, "labels", &p, NULL, 0);
    check_shape(&sf_graph_op(g, lab)->out_shapes[0], 1, I64(5));
    check_kinds(sf_graph_op(g, lab), 1, KINDS(S));
    sf_graph_free(g);
}

/* ---- conv2d ------------------------------------------------------------ */

static void test_conv2d_alexnet(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    int x = add_input(g, "x", 4, I64(2, 3, 224, 224));
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    assert_int_equal(p.conv2d.stride[0], 1);
    assert_int_equal(p.conv2d.groups, 1);
    assert_int_equal(p.conv2d.bias, 1);
    p.conv2d.out_channels = 64;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 11;
    p.conv2d.stride[0] = p.conv2d.stride[1] = 4;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 2;
    int c = add_ok(g, SF_OP_CONV2D, "conv1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, c);
    check_shape(&op->out_shapes[0], 4, I64(2, 64, 55, 55));
    check_kinds(op, 5, KINDS(S, P, A, A, R));
    assert_int_equal(op->space.d[4], 3);                   /* the input channels, a reduction */
    assert_int_equal(op->n_params, 64 * 3 * 11 * 11 + 64); /* 23296 */

    /* outs = 2*64*55*55 = 387200, MACs = outs * 3 * 121 */
    sf_op_cost k = full_cost(op);
    assert_true(k.flops_fwd == 2.0 * 140553600 + 387200);
    assert_true(k.flops_bwd == 4.0 * 140553600 + 387200);
    assert_true(k.bytes_fwd == (2.0 * 3 * 224 * 224 + 23296 + 387200) * 4);

    /* H split 4 ways with sf_split_range: parts [0,13) [13,27) [27,41) [41,55) */
    int64_t lo, hi;
    sf_split_range(55, 4, 1, &lo, &hi);
    assert_int_equal(lo, 13);
    assert_int_equal(hi, 27);
    sf_tile t = mk_tile(4, I64(0, 0, lo, 0), I64(2, 64, hi, 55));
    check_region(op, &t, 0, 4, I64(0, 0, 50, 0), I64(2, 3, 113, 224));
    sf_split_range(55, 4, 0, &lo, &hi); /* top border: padding rows clamped away */
    t = mk_tile(4, I64(0, 0, lo, 0), I64(2, 64, hi, 55));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 0), I64(2, 3, 57, 224));
    sf_split_range(55, 4, 3, &lo, &hi); /* bottom border: 41*4-2 = 162, 54*4-2+11 = 225 -> 224 */
    t = mk_tile(4, I64(1, 32, lo, 54), I64(2, 64, hi, 55));
    check_region(op, &t, 0, 4, I64(1, 0, 162, 214), I64(2, 3, 224, 224));
    /* a channel-split tile uses half the weights and all input channels */
    t = mk_tile(4, I64(0, 32, 0, 0), I64(2, 64, 55, 55));
    assert_int_equal(sf_op_tile_weights(op, &t), 23296 / 2);
    check_region(op, &t, 0, 4, I64(0, 0, 0, 0), I64(2, 3, 224, 224));
    /* a sample-split tile holds a whole replica of the weights */
    t = mk_tile(4, I64(1, 0, 0, 0), I64(2, 64, 55, 55));
    assert_int_equal(sf_op_tile_weights(op, &t), 23296);
    {
        /* a partial sum: output channels [32, 64), input channels [1, 3) of every
         * image: reads those channels only, W[32:64, 1:3] (strided), no bias (the
         * part with channel 0 adds it); its output piece has the output's rank */
        sf_tile tp = {5, {0, 32, 0, 0, 1}, {2, 64, 55, 55, 3}}, r, o;
        sf_op_input_region(op, &tp, 0, &r);
        sf_tile want_r = {4, {0, 1, 0, 0}, {2, 3, 224, 224}};
        assert_true(sf_tile_equal(&r, &want_r));
        sf_op_output_tile(op, &tp, 0, &o);
        sf_tile want_o = {4, {0, 32, 0, 0}, {2, 64, 55, 55}};
        assert_true(sf_tile_equal(&o, &want_o));
        sf_op_cost kp;
        sf_op_tile_cost(op, &tp, &kp);
        double outs = 2.0 * 32 * 55 * 55; /* 193600 */
        assert_true(kp.flops_fwd == 2.0 * outs * 2 * 121);
        assert_true(kp.flops_bwd == 4.0 * outs * 2 * 121);
        assert_true(kp.bytes_fwd == (2.0 * 2 * 224 * 224 + 32 * 2 * 121 + outs) * 4);
        assert_int_equal(sf_op_tile_weights(op, &tp), 32 * 2 * 121);
        sf_weight_slice ws[SF_MAX_WEIGHT_SLICES];
        assert_int_equal(sf_op_weight_slices(op, &tp, ws), 1);
        assert_int_equal(ws[0].offset, 32 * 363 + 121);
        assert_int_equal(ws[0].len, 242);
        assert_int_equal(ws[0].stride, 363);
        assert_int_equal(ws[0].count, 32);
        sf_op_mem mp;
        sf_op_tile_memory(op, &tp, &mp);
        assert_true(mp.output_bytes == outs * SF_ELEM_BYTES);
        /* channel [0, 1): the bias of its output channels too */
        tp.lo[4] = 0;
        tp.hi[4] = 1;
        sf_op_tile_cost(op, &tp, &kp);
        assert_true(kp.flops_fwd == 2.0 * outs * 121 + outs);
        assert_int_equal(sf_op_tile_weights(op, &tp), 32 * 121 + 32);
        assert_int_equal(sf_op_weight_slices(op, &tp, ws), 2);
        assert_int_equal(ws[0].offset, 32 * 363);
        assert_int_equal(ws[0].len, 121);
        assert_int_equal(ws[0].stride, 363);
        assert_int_equal(ws[0].count, 32);
        assert_int_equal(ws[1].offset, 64 * 363 + 32);
        assert_int_equal(ws[1].len, 32);
        assert_int_equal(ws[1].count, 1);
        /* all the input channels: the same as a tile of the output's rank */
        tp.hi[4] = 3;
        sf_tile t4 = mk_tile(4, I64(0, 32, 0, 0), I64(2, 64, 55, 55));
        sf_op_cost k4;
        sf_op_tile_cost(op, &tp, &kp);
        sf_op_tile_cost(op, &t4, &k4);
        assert_true(kp.flops_fwd == k4.flops_fwd && kp.bytes_fwd == k4.bytes_fwd &&
                    kp.bytes_bwd == k4.bytes_bwd);
        assert_int_equal(sf_op_weight_slices(op, &tp, ws), 2);
        assert_int_equal(ws[0].offset, 32 * 363);
        assert_int_equal(ws[0].len, 32 * 363);
        assert_int_equal(ws[0].count, 1);
    }
    sf_graph_free(g);
}

static void test_conv2d_groups_dilation(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    int x = add_input(g, "x", 4, I64(2, 8, 10, 10));
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 12;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.stride[0] = p.conv2d.stride[1] = 2;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    p.conv2d.dilation[0] = p.conv2d.dilation[1] = 2;
    p.conv2d.groups = 4;
    int c = add_ok(g, SF_OP_CONV2D, "gconv", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, c);
    /* (10 + 2 - 2*2 - 1) / 2 + 1 = 4 */
    check_shape(&op->out_shapes[0], 4, I64(2, 12, 4, 4));
    /* with groups the input channels cannot be split: a reduction of size 1 */
    check_kinds(op, 5, KINDS(S, P, A, A, R));
    assert_int_equal(op->space.d[4], 1);
    assert_int_equal(op->n_params, 12 * 2 * 9 + 12);
    /* output channels [4,7) fall in groups 1 and 2 -> input channels [2,6);
     * rows [1,3): 1*2-1 = 1 .. 2*2-1 + 2*2 + 1 = 8 */
    sf_tile t = mk_tile(4, I64(0, 4, 1, 0), I64(2, 7, 3, 4));
    check_region(op, &t, 0, 4, I64(0, 2, 1, 0), I64(2, 6, 8, 10));
    sf_op_cost k;
    sf_op_tile_cost(op, &t, &k);
    /* 48 outputs, 2 input channels per group, 3x3 kernel: 864 MACs */
    assert_true(k.flops_fwd == 2.0 * 864 + 48);
    assert_true(k.flops_bwd == 4.0 * 864 + 48);
    /* one group exactly */
    t = mk_tile(4, I64(0, 9, 0, 0), I64(1, 12, 4, 1));
    check_region(op, &t, 0, 4, I64(0, 6, 0, 0), I64(1, 8, 10, 4));

    /* no bias */
    p.conv2d.bias = 0;
    p.conv2d.groups = 1;
    c = add_ok(g, SF_OP_CONV2D, "nobias", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    assert_int_equal(sf_graph_op(g, c)->n_params, 12 * 8 * 9);
    k = full_cost(sf_graph_op(g, c));
    assert_true(k.flops_fwd == 2.0 * (2 * 12 * 16) * 8 * 9);
    sf_graph_free(g);
}

static void test_conv2d_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x3 = add_input(g, "x3", 3, I64(2, 3, 9));
    int x = add_input(g, "x", 4, I64(2, 6, 5, 5));
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 4;
    check_fail(add1(g, SF_OP_CONV2D, "c_rank", &p, x3, &err), &err, SF_ERR_SHAPE, "c_rank",
               "4-D");
    sf_error_clear(&err);
    p.conv2d.groups = 4; /* divides 4 output channels, not 6 input channels */
    check_fail(add1(g, SF_OP_CONV2D, "c_groups", &p, x, &err), &err, SF_ERR_SHAPE, "c_groups",
               "groups (4) must divide input channels (6)");
    sf_error_clear(&err);
    p.conv2d.groups = 1;
    p.conv2d.kernel[0] = 7;
    check_fail(add1(g, SF_OP_CONV2D, "c_big", &p, x, &err), &err, SF_ERR_SHAPE, "c_big",
               "larger than padded input");
    sf_error_clear(&err);
    p.conv2d.kernel[0] = 3;
    p.conv2d.out_channels = 0;
    check_fail(add1(g, SF_OP_CONV2D, "c_out", &p, x, &err), &err, SF_ERR_INVALID, "c_out",
               "out_channels");
    sf_error_clear(&err);
    p.conv2d.out_channels = 4;
    p.conv2d.stride[1] = 0;
    check_fail(add1(g, SF_OP_CONV2D, "c_stride", &p, x, &err), &err, SF_ERR_INVALID, "c_stride",
               "stride");
    sf_error_clear(&err);
    p.conv2d.stride[1] = 1;
    check_fail(sf_graph_add_op(g, SF_OP_CONV2D, "c_two", &p,
                               (sf_tensor_ref[]){{x, 0}, {x, 0}}, 2, &err),
               &err, SF_ERR_INVALID, "c_two", "(conv2d): needs 1..1 inputs, got 2");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_CONV2D, "c_none", &p, NULL, 0, &err), &err,
               SF_ERR_INVALID, "c_none", "got 0");
    assert_int_equal(sf_graph_num_ops(g), 2); /* nothing failed was added */
    sf_graph_free(g);
}

/* ---- linear ------------------------------------------------------------ */

static void test_linear(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 2, I64(4, 512));
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    assert_int_equal(p.linear.bias, 1);
    p.linear.out_features = 10;
    int fc = add_ok(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, fc);
    check_shape(&op->out_shapes[0], 2, I64(4, 10));
    check_kinds(op, 3, KINDS(S, P, R));
    assert_int_equal(op->space.d[2], 512); /* the input features, a reduction */
    assert_int_equal(op->n_params, 5130);
    sf_op_cost k = full_cost(op);
    assert_true(k.flops_fwd == 2.0 * 20480 + 40);
    {
        /* a partial sum: input features [256, 512) of every row, no bias (the part
         * with the first features adds it), its output piece the whole output */
        sf_tile t = {3, {0, 0, 256}, {4, 10, 512}}, r, o;
        sf_op_input_region(op, &t, 0, &r);
        sf_tile want_r = {2, {0, 256}, {4, 512}};
        assert_true(sf_tile_equal(&r, &want_r));
        sf_op_output_tile(op, &t, 0, &o);
        sf_tile want_o = {2, {0, 0}, {4, 10}};
        assert_true(sf_tile_equal(&o, &want_o));
        sf_op_cost kp;
        sf_op_tile_cost(op, &t, &kp);
        assert_true(kp.flops_fwd == 2.0 * 4 * 10 * 256);
        assert_int_equal(sf_op_tile_weights(op, &t), 10 * 256);
        sf_op_mem mp;
        sf_op_tile_memory(op, &t, &mp);
        assert_true(mp.output_bytes == 40.0 * SF_ELEM_BYTES);
        t.lo[2] = 0;
        t.hi[2] = 256;
        sf_op_tile_cost(op, &t, &kp);
        assert_true(kp.flops_fwd == 2.0 * 4 * 10 * 256 + 40);
        assert_int_equal(sf_op_tile_weights(op, &t), 10 * 256 + 10);
    }
    assert_true(k.flops_bwd == 4.0 * 20480 + 40);
    assert_true(k.bytes_fwd == (2048.0 + 5130 + 40) * 4);
    /* uneven split of 10 output features into 3: [3,6) needs every input feature */
    int64_t lo, hi;
    sf_split_range(10, 3, 1, &lo, &hi);
    assert_int_equal(lo, 3);
    assert_int_equal(hi, 6);
    sf_tile t = mk_tile(2, I64(1, lo), I64(3, hi));
    check_region(op, &t, 0, 2, I64(1, 0), I64(3, 512));
    assert_int_equal(sf_op_tile_weights(op, &t), 1539); /* 5130 * 3/10 */

    int s = add_input(g, "seq", 3, I64(8, 16, 32));
    p.linear.out_features = 64;
    p.linear.bias = 0;
    fc = add_ok(g, SF_OP_LINEAR, "proj", &p, (sf_tensor_ref[]){{s, 0}}, 1);
    op = sf_graph_op(g, fc);
    check_shape(&op->out_shapes[0], 3, I64(8, 16, 64));
    check_kinds(op, 4, KINDS(S, A, P, R));
    assert_int_equal(op->n_params, 2048);
    t = mk_tile(3, I64(2, 5, 16), I64(4, 11, 32));
    check_region(op, &t, 0, 3, I64(2, 5, 0), I64(4, 11, 32));
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 2.0 * (2 * 6 * 16) * 32);

    int v = add_input(g, "vec", 1, I64(8));
    check_fail(add1(g, SF_OP_LINEAR, "l_rank", &p, v, &err), &err, SF_ERR_SHAPE, "l_rank",
               "at least 2 dimensions");
    sf_error_clear(&err);
    p.linear.out_features = 0;
    check_fail(add1(g, SF_OP_LINEAR, "l_out", &p, x, &err), &err, SF_ERR_INVALID, "l_out",
               "out_features");
    sf_graph_free(g);
}

/* ---- pool2d ------------------------------------------------------------ */

static sf_op_params pool(int mode, int64_t k, int64_t s, int64_t pad, int ceil) {
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.mode = mode;
    p.pool2d.kernel[0] = p.pool2d.kernel[1] = k;
    p.pool2d.stride[0] = p.pool2d.stride[1] = s;
    p.pool2d.padding[0] = p.pool2d.padding[1] = pad;
    p.pool2d.ceil_mode = ceil;
    return p;
}

/* Output height of pooling a 1x1xHxH input. */
static int64_t pool_out(sf_graph *g, const char *name, int64_t h, sf_op_params p) {
    char in_name[64];
    snprintf(in_name, sizeof in_name, "%s_in", name);
    int x = add_input(g, in_name, 4, I64(1, 1, h, h));
    int id = add_ok(g, SF_OP_POOL2D, name, &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_shape *s = &sf_graph_op(g, id)->out_shapes[0];
    assert_int_equal(s->d[2], s->d[3]);
    return s->d[2];
}

static void test_pool2d_shapes(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    assert_int_equal(p.pool2d.mode, SF_POOL_MAX);
    assert_int_equal(p.pool2d.kernel[0], 1);
    assert_int_equal(p.pool2d.stride[1], 1);
    assert_int_equal(p.pool2d.count_include_pad, 1);
    assert_int_equal(p.pool2d.ceil_mode, 0);

    assert_int_equal(pool_out(g, "alex", 55, pool(SF_POOL_MAX, 3, 2, 0, 0)), 27);
    assert_int_equal(pool_out(g, "alex2", 27, pool(SF_POOL_MAX, 3, 2, 0, 0)), 13);
    /* ceil_mode adds the partial window at the end ... */
    assert_int_equal(pool_out(g, "f6", 6, pool(SF_POOL_MAX, 3, 2, 0, 0)), 2);
    assert_int_equal(pool_out(g, "c6", 6, pool(SF_POOL_MAX, 3, 2, 0, 1)), 3);
    /* ... GoogLeNet's 112 -> 56 with ceil_mode (55 without) ... */
    assert_int_equal(pool_out(g, "g112", 112, pool(SF_POOL_MAX, 3, 2, 0, 1)), 56);
    assert_int_equal(pool_out(g, "g112f", 112, pool(SF_POOL_MAX, 3, 2, 0, 0)), 55);
    /* ... unless that window would start in the right padding: 5, k2 s2 p1 */
    assert_int_equal(pool_out(g, "c5", 5, pool(SF_POOL_MAX, 2, 2, 1, 1)), 3);
    assert_int_equal(pool_out(g, "c4", 4, pool(SF_POOL_MAX, 2, 2, 1, 1)), 3);
    /* an exact fit changes nothing */
    assert_int_equal(pool_out(g, "c7", 7, pool(SF_POOL_AVG, 3, 2, 0, 1)), 3);
    assert_int_equal(pool_out(g, "a7", 7, pool(SF_POOL_AVG, 3, 2, 1, 0)), 4);
    assert_int_equal(pool_out(g, "res", 112, pool(SF_POOL_MAX, 3, 2, 1, 0)), 56);

    /* adaptive: (2, 512, 7, 7) -> (2, 512, 1, 1) and 10x6 -> 3x4 */
    sf_op_params ap = pool(SF_POOL_ADAPTIVE_AVG, 1, 1, 0, 0);
    int x = add_input(g, "feat", 4, I64(2, 512, 7, 7));
    int gp = add_ok(g, SF_OP_POOL2D, "gap", &ap, (sf_tensor_ref[]){{x, 0}}, 1);
    check_shape(&sf_graph_op(g, gp)->out_shapes[0], 4, I64(2, 512, 1, 1));
    ap.pool2d.output_size[0] = 3;
    ap.pool2d.output_size[1] = 4;
    int y = add_input(g, "y", 4, I64(1, 2, 10, 6));
    int ad = add_ok(g, SF_OP_POOL2D, "adapt", &ap, (sf_tensor_ref[]){{y, 0}}, 1);
    const sf_op *op = sf_graph_op(g, ad);
    check_shape(&op->out_shapes[0], 4, I64(1, 2, 3, 4));
    check_kinds(op, 4, KINDS(S, A, A, A));
    assert_int_equal(op->n_params, 0);
    sf_graph_free(g);
}

static void test_pool2d_regions(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    int x = add_input(g, "x", 4, I64(2, 64, 55, 55));
    sf_op_params p = pool(SF_POOL_MAX, 3, 2, 0, 0);
    int mp = add_ok(g, SF_OP_POOL2D, "pool1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, mp);
    int64_t lo, hi;
    sf_split_range(27, 2, 1, &lo, &hi); /* [13, 27): rows 26 .. 26*2+3 = 55 */
    sf_tile t = mk_tile(4, I64(0, 10, lo, 0), I64(1, 20, hi, 27));
    check_region(op, &t, 0, 4, I64(0, 10, 26, 0), I64(1, 20, 55, 55));
    sf_split_range(27, 2, 0, &lo, &hi); /* [0, 13): rows 0 .. 12*2+3 = 27, overlap of one row */
    t = mk_tile(4, I64(0, 0, lo, 5), I64(2, 64, hi, 6));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 10), I64(2, 64, 27, 13));
    sf_op_cost k = full_cost(op);
    assert_true(k.flops_fwd == 2.0 * 64 * 27 * 27 * 9);
    assert_true(k.flops_bwd == k.flops_fwd);
    assert_true(k.bytes_fwd == (2.0 * 64 * 55 * 55 + 2.0 * 64 * 27 * 27) * 4);

    /* padding: 8 -> 4 with k3 s2 p1; row 0 needs [0,2), row 3 needs [5,8) */
    int y = add_input(g, "y", 4, I64(1, 1, 8, 8));
    p = pool(SF_POOL_AVG, 3, 2, 1, 0);
    int ap = add_ok(g, SF_OP_POOL2D, "avg", &p, (sf_tensor_ref[]){{y, 0}}, 1);
    op = sf_graph_op(g, ap);
    check_shape(&op->out_shapes[0], 4, I64(1, 1, 4, 4));
    t = mk_tile(4, I64(0, 0, 0, 3), I64(1, 1, 1, 4));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 5), I64(1, 1, 2, 8));
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 9.0);

    /* ceil mode: 6 -> 3; the last window [4, 7) is clamped to [4, 6) */
    int z = add_input(g, "z", 4, I64(1, 1, 6, 6));
    p = pool(SF_POOL_MAX, 3, 2, 0, 1);
    int cp = add_ok(g, SF_OP_POOL2D, "ceil", &p, (sf_tensor_ref[]){{z, 0}}, 1);
    t = mk_tile(4, I64(0, 0, 2, 0), I64(1, 1, 3, 1));
    check_region(sf_graph_op(g, cp), &t, 0, 4, I64(0, 0, 4, 0), I64(1, 1, 6, 3));

    /* adaptive 10 -> 3: windows [0,4) [3,7) [6,10); 5 -> 3: [0,2) [1,4) [3,5) */
    int w = add_input(g, "w", 4, I64(1, 2, 10, 5));
    p = pool(SF_POOL_ADAPTIVE_AVG, 1, 1, 0, 0);
    p.pool2d.output_size[0] = p.pool2d.output_size[1] = 3;
    int ad = add_ok(g, SF_OP_POOL2D, "adapt", &p, (sf_tensor_ref[]){{w, 0}}, 1);
    op = sf_graph_op(g, ad);
    check_shape(&op->out_shapes[0], 4, I64(1, 2, 3, 3));
    t = mk_tile(4, I64(0, 1, 1, 1), I64(1, 2, 3, 2));
    check_region(op, &t, 0, 4, I64(0, 1, 3, 1), I64(1, 2, 10, 4));
    t = mk_tile(4, I64(0, 0, 1, 0), I64(1, 2, 2, 1));
    check_region(op, &t, 0, 4, I64(0, 0, 3, 0), I64(1, 2, 7, 2));
    t = mk_tile(4, I64(0, 0, 2, 2), I64(1, 1, 3, 3));
    check_region(op, &t, 0, 4, I64(0, 0, 6, 3), I64(1, 1, 10, 5));
    /* FLOPs: rows 4+4+4 = 12, columns 2+3+2 = 7, two channels */
    k = full_cost(op);
    assert_true(k.flops_fwd == 2.0 * 12 * 7);
    t = mk_tile(4, I64(0, 0, 1, 1), I64(1, 1, 2, 3)); /* rows 4, columns 3+2 */
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 4.0 * 5);
    sf_graph_free(g);
}

static void test_pool2d_errors(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(1, 3, 4, 4));
    int x2 = add_input(g, "x2", 2, I64(1, 3));
    sf_op_params p = pool(SF_POOL_MAX, 3, 2, 2, 0);
    check_fail(add1(g, SF_OP_POOL2D, "p_pad", &p, x, &err), &err, SF_ERR_INVALID, "p_pad",
               "at most half the kernel");
    sf_error_clear(&err);
    p = pool(SF_POOL_MAX, 5, 1, 0, 0);
    check_fail(add1(g, SF_OP_POOL2D, "p_big", &p, x, &err), &err, SF_ERR_SHAPE, "p_big",
               "kernel (5) larger than padded input (4)");
    sf_error_clear(&err);
    p = pool(SF_POOL_MAX, 2, 0, 0, 0);
    check_fail(add1(g, SF_OP_POOL2D, "p_stride", &p, x, &err), &err, SF_ERR_INVALID, "p_stride",
               "stride");
    sf_error_clear(&err);
    p = pool(SF_POOL_MAX, 2, 2, 0, 0);
    check_fail(add1(g, SF_OP_POOL2D, "p_rank", &p, x2, &err), &err, SF_ERR_SHAPE, "p_rank",
               "4-D");
    sf_error_clear(&err);
    p.pool2d.mode = 7;
    check_fail(add1(g, SF_OP_POOL2D, "p_mode", &p, x, &err), &err, SF_ERR_INVALID, "p_mode",
               "mode 7");
    sf_error_clear(&err);
    p = pool(SF_POOL_ADAPTIVE_AVG, 1, 1, 0, 0);
    p.pool2d.output_size[1] = 0;
    check_fail(add1(g, SF_OP_POOL2D, "p_osz", &p, x, &err), &err, SF_ERR_INVALID, "p_osz",
               "output_size");
    assert_int_equal(sf_graph_num_ops(g), 2);
    sf_graph_free(g);
}

/* ---- activations, dropout --------------------------------------------- */

static void test_unary(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 3, I64(2, 3, 4));
    const sf_op_type types[] = {SF_OP_RELU, SF_OP_SIGMOID, SF_OP_TANH,
                                SF_OP_GELU, SF_OP_RELU6,   SF_OP_LEAKY_RELU};
    const char *names[] = {"relu", "sigmoid", "tanh", "gelu", "relu6", "leaky_relu"};
    const double fwd[] = {1, 4, 5, 8, 2, 2}, bwd[] = {1, 3, 3, 12, 2, 2};
    for (int i = 0; i < 6; i++) {
        assert_string_equal(sf_op_type_name(types[i]), names[i]);
        sf_op_type back;
        assert_int_equal(sf_op_type_from_name(names[i], &back), SF_OK);
        assert_int_equal(back, types[i]);
        sf_op_params p;
        sf_op_params_default(types[i], &p);
        int id = add_ok(g, types[i], names[i], &p, (sf_tensor_ref[]){{x, 0}}, 1);
        const sf_op *op = sf_graph_op(g, id);
        check_shape(&op->out_shapes[0], 3, I64(2, 3, 4));
        check_kinds(op, 3, KINDS(S, A, A));
        assert_int_equal(op->n_params, 0);
        sf_op_cost k = full_cost(op);
        assert_true(k.flops_fwd == fwd[i] * 24);
        assert_true(k.flops_bwd == bwd[i] * 24);
        assert_true(k.bytes_fwd == 2.0 * 24 * 4);
        assert_true(k.bytes_bwd == 3.0 * 24 * 4);
        sf_tile t = mk_tile(3, I64(1, 1, 3), I64(2, 3, 4));
        check_region(op, &t, 0, 3, I64(1, 1, 3), I64(2, 3, 4));
        check_fail(sf_graph_add_op(g, types[i], "bad", &p,
                                   (sf_tensor_ref[]){{x, 0}, {x, 0}}, 2, &err),
                   &err, SF_ERR_INVALID, "bad", "needs 1..1 inputs, got 2");
        sf_error_clear(&err);
    }
    /* leaky_relu's slope: 0.01 by default (torch), an attribute, finite */
    sf_op_params lp;
    sf_op_params_default(SF_OP_LEAKY_RELU, &lp);
    assert_true(lp.leaky_relu.alpha == 0.01);
    int na = 0;
    const sf_attr_desc *la = sf_op_attrs(SF_OP_LEAKY_RELU, &na);
    assert_int_equal(na, 1);
    assert_string_equal(la[0].name, "alpha");
    lp.leaky_relu.alpha = INFINITY;
    check_fail(sf_graph_add_op(g, SF_OP_LEAKY_RELU, "bad_alpha", &lp, (sf_tensor_ref[]){{x, 0}},
                               1, &err),
               &err, SF_ERR_INVALID, "bad_alpha", "alpha must be a finite number");
    sf_error_clear(&err);
    /* a tile of rank 6 passes through unchanged */
    int y = add_input(g, "y", 6, I64(2, 2, 2, 2, 2, 3));
    int r = add_ok(g, SF_OP_RELU, "relu_rank6", &(sf_op_params){0},
                   (sf_tensor_ref[]){{y, 0}}, 1);
    sf_tile t = mk_tile(6, I64(0, 1, 0, 1, 0, 1), I64(1, 2, 2, 2, 1, 3));
    check_region(sf_graph_op(g, r), &t, 0, 6, I64(0, 1, 0, 1, 0, 1), I64(1, 2, 2, 2, 1, 3));
    sf_graph_free(g);
}

static void test_dropout(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 2, I64(4, 100));
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    assert_true(p.dropout.p == 0.5);
    int d = add_ok(g, SF_OP_DROPOUT, "drop", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, d);
    check_shape(&op->out_shapes[0], 2, I64(4, 100));
    check_kinds(op, 2, KINDS(S, A));
    sf_op_cost k = full_cost(op);
    assert_true(k.flops_fwd == 800.0 && k.flops_bwd == 400.0);
    sf_tile t = mk_tile(2, I64(3, 50), I64(4, 75));
    check_region(op, &t, 0, 2, I64(3, 50), I64(4, 75));
    p.dropout.p = 0.0;
    add_ok(g, SF_OP_DROPOUT, "drop0", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    p.dropout.p = 1.0;
    check_fail(add1(g, SF_OP_DROPOUT, "d_one", &p, x, &err), &err, SF_ERR_INVALID, "d_one",
               "[0, 1)");
    sf_error_clear(&err);
    p.dropout.p = -0.1;
    check_fail(add1(g, SF_OP_DROPOUT, "d_neg", &p, x, &err), &err, SF_ERR_INVALID, "d_neg",
               "[0, 1)");
    sf_graph_free(g);
}

/* ---- add, mul ---------------------------------------------------------- */

static void test_binary(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(4, 3, 5, 6));
    int b = add_input(g, "b", 4, I64(1, 3, 1, 1));
    int a = add_ok(g, SF_OP_ADD, "addb", &(sf_op_params){0},
                   (sf_tensor_ref[]){{x, 0}, {b, 0}}, 2);
    const sf_op *op = sf_graph_op(g, a);
    check_shape(&op->out_shapes[0], 4, I64(4, 3, 5, 6));
    check_kinds(op, 4, KINDS(S, A, A, A));
    sf_tile t = mk_tile(4, I64(1, 1, 2, 0), I64(3, 2, 5, 6));
    check_region(op, &t, 0, 4, I64(1, 1, 2, 0), I64(3, 2, 5, 6));
    check_region(op, &t, 1, 4, I64(0, 1, 0, 0), I64(1, 2, 1, 1));
    sf_op_cost k;
    sf_op_tile_cost(op, &t, &k); /* 36 outputs; input 1 is broadcast */
    assert_true(k.flops_fwd == 36.0);
    assert_true(k.flops_bwd == 36.0);
    assert_true(k.bytes_fwd == (36.0 + 1 + 36) * 4);
    sf_op_mem m;
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.saved_bytes == 0 && m.weight_bytes == 0 && m.output_bytes == 36.0 * 4);

    /* both broadcast: (4, 1) * (1, 5) -> (4, 5) */
    int c = add_input(g, "col", 2, I64(4, 1));
    int r = add_input(g, "row", 2, I64(1, 5));
    int mu = add_ok(g, SF_OP_MUL, "outer", &(sf_op_params){0},
                    (sf_tensor_ref[]){{c, 0}, {r, 0}}, 2);
    op = sf_graph_op(g, mu);
    check_shape(&op->out_shapes[0], 2, I64(4, 5));
    int64_t lo, hi;
    sf_split_range(5, 3, 2, &lo, &hi); /* [3, 5) */
    t = mk_tile(2, I64(2, lo), I64(4, hi));
    check_region(op, &t, 0, 2, I64(2, 0), I64(4, 1));
    check_region(op, &t, 1, 2, I64(0, 3), I64(1, 5));
    sf_op_tile_cost(op, &t, &k); /* 4 outputs, both inputs broadcast */
    assert_true(k.flops_fwd == 4.0);
    assert_true(k.flops_bwd == 2.0 * 4 + 2 * 4);
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.saved_bytes == (2.0 + 2) * 4);
    /* same shapes: no reductions */
    mu = add_ok(g, SF_OP_MUL, "sq", &(sf_op_params){0},
                (sf_tensor_ref[]){{x, 0}, {x, 0}}, 2);
    k = full_cost(sf_graph_op(g, mu));
    assert_true(k.flops_bwd == 2.0 * 360);

    int y = add_input(g, "y", 2, I64(4, 3));
    int z = add_input(g, "z", 2, I64(4, 5));
    int w = add_input(g, "w", 3, I64(4, 5, 1));
    sf_op_params p = {0};
    check_fail(sf_graph_add_op(g, SF_OP_ADD, "bad_b", &p, (sf_tensor_ref[]){{y, 0}, {z, 0}}, 2,
                               &err),
               &err, SF_ERR_SHAPE, "bad_b", "do not broadcast (dimension 1: 3 vs 5)");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_MUL, "bad_r", &p, (sf_tensor_ref[]){{z, 0}, {w, 0}}, 2,
                               &err),
               &err, SF_ERR_SHAPE, "bad_r", "same rank");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_ADD, "one", &p, (sf_tensor_ref[]){{z, 0}}, 1, &err), &err,
               SF_ERR_INVALID, "one", "(add): needs 2..2 inputs, got 1");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_MUL, "three", &p,
                               (sf_tensor_ref[]){{z, 0}, {z, 0}, {z, 0}}, 3, &err),
               &err, SF_ERR_INVALID, "three", "(mul): needs 2..2 inputs, got 3");
    sf_graph_free(g);
}

/* ---- concat ------------------------------------------------------------ */

static void test_concat(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int a = add_input(g, "a", 4, I64(2, 3, 4, 4));
    int b = add_input(g, "b", 4, I64(2, 5, 4, 4));
    int c = add_input(g, "c", 4, I64(2, 2, 4, 4));
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = 1;
    const sf_tensor_ref ins[] = {{a, 0}, {b, 0}, {c, 0}};
    int cat = add_ok(g, SF_OP_CONCAT, "cat", &p, ins, 3);
    const sf_op *op = sf_graph_op(g, cat);
    check_shape(&op->out_shapes[0], 4, I64(2, 10, 4, 4));
    check_kinds(op, 4, KINDS(S, A, A, A));
    /* inputs occupy channels [0,3) [3,8) [8,10) of the output */
    int64_t lo, hi;
    sf_split_range(10, 3, 2, &lo, &hi); /* [6, 10): straddles b and c */
    assert_int_equal(lo, 6);
    sf_tile t = mk_tile(4, I64(1, lo, 0, 2), I64(2, hi, 4, 4));
    check_region(op, &t, 0, 4, I64(1, 0, 0, 2), I64(2, 0, 4, 4));
    check_region(op, &t, 1, 4, I64(1, 3, 0, 2), I64(2, 5, 4, 4));
    check_region(op, &t, 2, 4, I64(1, 0, 0, 2), I64(2, 2, 4, 4));
    sf_tile r;
    sf_op_input_region(op, &t, 0, &r);
    assert_true(sf_tile_empty(&r));
    assert_int_equal(sf_tile_numel(&r), 0);
    sf_split_range(10, 3, 0, &lo, &hi); /* [0, 3): exactly a */
    t = mk_tile(4, I64(0, lo, 0, 0), I64(2, hi, 4, 4));
    check_region(op, &t, 0, 4, I64(0, 0, 0, 0), I64(2, 3, 4, 4));
    check_region(op, &t, 1, 4, I64(0, 0, 0, 0), I64(2, 0, 4, 4));
    t = mk_tile(4, I64(0, 2, 1, 1), I64(1, 9, 2, 2)); /* touches all three */
    check_region(op, &t, 0, 4, I64(0, 2, 1, 1), I64(1, 3, 2, 2));
    check_region(op, &t, 1, 4, I64(0, 0, 1, 1), I64(1, 5, 2, 2));
    check_region(op, &t, 2, 4, I64(0, 0, 1, 1), I64(1, 1, 2, 2));
    sf_op_cost k;
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 0 && k.flops_bwd == 0);
    assert_true(k.bytes_fwd == (7.0 + 7.0) * 4);

    /* negative axis, and a single input */
    p.concat.axis = -1;
    int cw = add_ok(g, SF_OP_CONCAT, "catw", &p, (sf_tensor_ref[]){{a, 0}, {a, 0}}, 2);
    check_shape(&sf_graph_op(g, cw)->out_shapes[0], 4, I64(2, 3, 4, 8));
    t = mk_tile(4, I64(0, 0, 0, 3), I64(2, 3, 4, 5));
    check_region(sf_graph_op(g, cw), &t, 1, 4, I64(0, 0, 0, 0), I64(2, 3, 4, 1));
    p.concat.axis = 0;
    int c1 = add_ok(g, SF_OP_CONCAT, "cat1", &p, (sf_tensor_ref[]){{b, 0}}, 1);
    check_shape(&sf_graph_op(g, c1)->out_shapes[0], 4, I64(2, 5, 4, 4));

    int v = add_input(g, "v", 3, I64(2, 3, 4));
    int h = add_input(g, "h", 4, I64(2, 3, 5, 4));
    p.concat.axis = 1;
    check_fail(sf_graph_add_op(g, SF_OP_CONCAT, "k_dim", &p, (sf_tensor_ref[]){{a, 0}, {h, 0}}, 2,
                               &err),
               &err, SF_ERR_SHAPE, "k_dim", "dimension 2, which is not the axis (1)");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_CONCAT, "k_rank", &p, (sf_tensor_ref[]){{a, 0}, {v, 0}},
                               2, &err),
               &err, SF_ERR_SHAPE, "k_rank", "rank 3");
    sf_error_clear(&err);
    p.concat.axis = 4;
    check_fail(sf_graph_add_op(g, SF_OP_CONCAT, "k_axis", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err),
               &err, SF_ERR_INVALID, "k_axis", "axis 4 out of range");
    sf_error_clear(&err);
    p.concat.axis = -5;
    check_fail(sf_graph_add_op(g, SF_OP_CONCAT, "k_neg", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err),
               &err, SF_ERR_INVALID, "k_neg", "axis -5");
    sf_error_clear(&err);
    check_fail(sf_graph_add_op(g, SF_OP_CONCAT, "k_none", &p, NULL, 0, &err), &err,
               SF_ERR_INVALID, "k_none", "(concat): needs at least 1 inputs, got 0");
    sf_graph_free(g);
}

/* ---- reshape, flatten -------------------------------------------------- */

static int reshape_to(sf_graph *g, const char *name, int in, int nd, const int64_t *shape,
                      sf_error *err) {
    sf_op_params p;
    sf_op_params_default(SF_OP_RESHAPE, &p);
    p.reshape.ndim = nd;
    for (int i = 0; i < nd; i++) p.reshape.shape[i] = shape[i];
    return add1(g, SF_OP_RESHAPE, name, &p, in, err);
}

static void test_reshape(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(4, 3, 2, 2));
    int r = reshape_to(g, "r1", x, 2, I64(0, -1), &err);
    assert_true(r >= 0);
    const sf_op *op = sf_graph_op(g, r);
    check_shape(&op->out_shapes[0], 2, I64(4, 12));
    check_kinds(op, 2, KINDS(S, N));
    int64_t lo, hi;
    sf_split_range(4, 3, 1, &lo, &hi); /* [1, 2) */
    sf_tile t = mk_tile(2, I64(lo, 0), I64(hi, 12));
    check_region(op, &t, 0, 4, I64(1, 0, 0, 0), I64(2, 3, 2, 2));
    sf_op_cost k;
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 0 && k.bytes_fwd == 0 && k.bytes_bwd == 0);
    sf_op_mem m;
    sf_op_tile_memory(op, &t, &m);
    assert_true(m.saved_bytes == 0 && m.output_bytes == 12.0 * 4);

    r = reshape_to(g, "r2", r, 3, I64(4, 6, 2), &err);
    assert_true(r >= 0);
    op = sf_graph_op(g, r);
    check_shape(&op->out_shapes[0], 3, I64(4, 6, 2));
    check_kinds(op, 3, KINDS(S, N, N));
    r = reshape_to(g, "r3", x, 5, I64(4, -1, 1, 2, 3), &err);
    assert_true(r >= 0);
    check_shape(&sf_graph_op(g, r)->out_shapes[0], 5, I64(4, 2, 1, 2, 3));

    check_fail(reshape_to(g, "e_two", x, 3, I64(4, -1, -1), &err), &err, SF_ERR_INVALID, "e_two",
               "more than one -1");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_batch", x, 2, I64(8, 6), &err), &err, SF_ERR_SHAPE, "e_batch",
               "dimension 0 (the batch, 4)");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_batch2", x, 2, I64(-1, 24), &err), &err, SF_ERR_SHAPE,
               "e_batch2", "must be kept");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_count", x, 2, I64(4, 5), &err), &err, SF_ERR_SHAPE, "e_count",
               "element counts differ: input 4x3x2x2 has 48, target 4x5 has 20");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_div", x, 3, I64(4, 5, -1), &err), &err, SF_ERR_SHAPE, "e_div",
               "not a multiple of 20");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_copy", x, 5, I64(4, 3, 2, 2, 0), &err), &err, SF_ERR_INVALID,
               "e_copy", "dimension 4 is 0 (copy)");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_neg", x, 2, I64(4, -3), &err), &err, SF_ERR_INVALID, "e_neg",
               "is -3");
    sf_error_clear(&err);
    check_fail(reshape_to(g, "e_nd", x, 0, NULL, &err), &err, SF_ERR_INVALID, "e_nd",
               "1..6 dimensions");
    sf_graph_free(g);
}

static void test_flatten(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(4, 256, 6, 6));
    sf_op_params p;
    sf_op_params_default(SF_OP_FLATTEN, &p);
    assert_int_equal(p.flatten.start_dim, 1);
    int f = add_ok(g, SF_OP_FLATTEN, "flat", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, f);
    check_shape(&op->out_shapes[0], 2, I64(4, 9216));
    check_kinds(op, 2, KINDS(S, N));
    assert_int_equal(op->out_shapes[0].d[2], 0); /* no stale dimensions past ndim */
    sf_tile t = mk_tile(2, I64(3, 0), I64(4, 9216));
    check_region(op, &t, 0, 4, I64(3, 0, 0, 0), I64(4, 256, 6, 6));
    p.flatten.start_dim = 2;
    f = add_ok(g, SF_OP_FLATTEN, "flat2", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    check_shape(&sf_graph_op(g, f)->out_shapes[0], 3, I64(4, 256, 36));
    p.flatten.start_dim = -1; /* the last dimension alone: unchanged */
    f = add_ok(g, SF_OP_FLATTEN, "flat3", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    check_shape(&sf_graph_op(g, f)->out_shapes[0], 4, I64(4, 256, 6, 6));
    check_kinds(sf_graph_op(g, f), 4, KINDS(S, N, N, N));
    p.flatten.start_dim = -3;
    f = add_ok(g, SF_OP_FLATTEN, "flat4", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    check_shape(&sf_graph_op(g, f)->out_shapes[0], 2, I64(4, 9216));

    p.flatten.start_dim = 0;
    check_fail(add1(g, SF_OP_FLATTEN, "f_zero", &p, x, &err), &err, SF_ERR_INVALID, "f_zero",
               "the batch");
    sf_error_clear(&err);
    p.flatten.start_dim = 4;
    check_fail(add1(g, SF_OP_FLATTEN, "f_big", &p, x, &err), &err, SF_ERR_INVALID, "f_big",
               "start_dim 4 out of range for a 4-D input");
    sf_error_clear(&err);
    p.flatten.start_dim = -5;
    check_fail(add1(g, SF_OP_FLATTEN, "f_neg", &p, x, &err), &err, SF_ERR_INVALID, "f_neg",
               "start_dim -5");
    sf_graph_free(g);
}

/* ---- batchnorm --------------------------------------------------------- */

static void test_batchnorm(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    int x = add_input(g, "x", 4, I64(8, 16, 5, 5));
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    assert_true(p.norm.eps == 1e-5);
    assert_int_equal(p.norm.affine, 1);
    int bn = add_ok(g, SF_OP_BATCHNORM, "bn", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    const sf_op *op = sf_graph_op(g, bn);
    check_shape(&op->out_shapes[0], 4, I64(8, 16, 5, 5));
    check_kinds(op, 4, KINDS(S, P, A, A));
    assert_int_equal(op->n_params, 32);
    int64_t lo, hi;
    sf_split_range(16, 3, 2, &lo, &hi); /* [10, 16): 6 of 16 channels */
    sf_tile t = mk_tile(4, I64(0, lo, 1, 0), I64(8, hi, 4, 5));
    check_region(op, &t, 0, 4, I64(0, 10, 1, 0), I64(8, 16, 4, 5));
    assert_int_equal(sf_op_tile_weights(op, &t), 12);
    sf_op_cost k;
    sf_op_tile_cost(op, &t, &k);
    assert_true(k.flops_fwd == 8.0 * 720 && k.flops_bwd == 12.0 * 720);

    p.norm.affine = 0;
    bn = add_ok(g, SF_OP_BATCHNORM, "bn_plain", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    assert_int_equal(sf_graph_op(g, bn)->n_params, 0);
    assert_true(full_cost(sf_graph_op(g, bn)).flops_fwd == 6.0 * 3200);
    p.norm.affine = 1;
    int v = add_input(g, "v", 2, I64(8, 100));
    bn = add_ok(g, SF_OP_BATCHNORM, "bn1d", &p, (sf_tensor_ref[]){{v, 0}}, 1);
    check_kinds(sf_graph_op(g, bn), 2, KINDS(S, P));
    assert_int_equal(sf_graph_op(g, bn)->n_params, 200);

    int s = add_input(g, "s", 1, I64(8));
    int h = add_input(g, "h", 6, I64(2, 2, 2, 2, 2, 2));
    check_fail(add1(g, SF_OP_BATCHNORM, "b_1d", &p, s, &err), &err, SF_ERR_SHAPE, "b_1d",
               "2-D to 5-D");
    sf_error_clear(&err);
    check_fail(add1(g, SF_OP_BATCHNORM, "b_6d", &p, h, &err), &err, SF_ERR_SHAPE, "b_6d",
               "got 6-D");
    sf_error_clear(&err);
    p.norm.eps = 0;
    check_fail(add1(g, SF_OP_BATCHNORM, "b_eps", &p, x, &err), &err, SF_ERR_INVALID, "b_eps",
               "eps");
    sf_graph_free(g);
}

/* ---- attribute tables and a whole small network ----------------------- */

/* Sizes past SF_MAX_NUMEL (and attributes past SF_MAX_EXTENT) are refused with
 * SF_ERR_RANGE, before any product of them can overflow int64 (a linear layer
 * of 2^40 x 2^40 once made the parameter count a signed overflow: UBSan in
 * `graph --mlp-sizes`). */
static void test_size_bounds(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("t");
    sf_error err = {0};
    sf_shape big = {2, {(int64_t)1 << 30, (int64_t)1 << 30}};
    check_fail(sf_graph_add_input(g, "huge", &big, 0, &err), &err, SF_ERR_RANGE, "huge",
               "exceeds the limit");
    sf_error_clear(&err); /* the first error is sticky */
    int x = add_input(g, "x", 2, I64(1, (int64_t)1 << 20));
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = (int64_t)1 << 30; /* 2^50 weights */
    check_fail(add1(g, SF_OP_LINEAR, "fc", &p, x, &err), &err, SF_ERR_RANGE, "fc",
               "weights exceed the limit");
    sf_error_clear(&err);
    int ids = add_input(g, "ids", 2, I64(2, 3));
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = INT64_MAX / 2; /* the product alone overflows */
    p.embedding.embedding_dim = 4;
    check_fail(add1(g, SF_OP_EMBEDDING, "emb", &p, ids, &err), &err, SF_ERR_RANGE, "emb",
               "beyond the limit");
    sf_error_clear(&err);
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = (int64_t)1 << 31; /* each within bounds, 2^62 weights */
    p.embedding.embedding_dim = (int64_t)1 << 31;
    check_fail(add1(g, SF_OP_EMBEDDING, "emb2", &p, ids, &err), &err, SF_ERR_RANGE, "emb2",
               "weights exceed the limit");
    sf_graph_free(g);
}

static void test_attr_tables(void **state) {
    (void)state;
    for (int t = 0; t < SF_OP_COUNT; t++) {
        sf_op_type back;
        assert_int_equal(sf_op_type_from_name(sf_op_type_name((sf_op_type)t), &back), SF_OK);
        assert_int_equal(back, t);
    }
    int n = 0;
    const sf_attr_desc *a = sf_op_attrs(SF_OP_POOL2D, &n);
    assert_int_equal(n, 7);
    assert_string_equal(a[0].name, "mode");
    assert_int_equal(a[0].type, SF_ATTR_ENUM);
    assert_int_equal(a[0].n_enum, 3);
    assert_string_equal(a[0].enum_names[SF_POOL_ADAPTIVE_AVG], "adaptive_avg");
    assert_int_equal(a[0].offset, offsetof(sf_op_params, pool2d.mode));
    assert_string_equal(a[4].name, "output_size");
    assert_int_equal(a[4].count, 2);

    a = sf_op_attrs(SF_OP_INPUT, &n);
    assert_int_equal(n, 2);
    assert_string_equal(a[0].name, "shape");
    assert_int_equal(a[0].count, 0);
    assert_int_equal(a[0].count_offset, offsetof(sf_op_params, input.shape.ndim));
    assert_int_equal(a[0].offset, offsetof(sf_op_params, input.shape.d));
    assert_int_equal(a[0].max_count, SF_MAX_DIMS);

    a = sf_op_attrs(SF_OP_RESHAPE, &n);
    assert_int_equal(n, 1);
    assert_int_equal(a[0].count_offset, offsetof(sf_op_params, reshape.ndim));
    a = sf_op_attrs(SF_OP_CONCAT, &n);
    assert_int_equal(n, 1);
    assert_int_equal(a[0].type, SF_ATTR_SMALLINT);
    a = sf_op_attrs(SF_OP_BATCHNORM, &n);
    assert_int_equal(n, 2);
    assert_int_equal(a[0].type, SF_ATTR_FLOAT);
    assert_int_equal(a[0].offset, offsetof(sf_op_params, norm.eps));
    a = sf_op_attrs(SF_OP_DROPOUT, &n);
    assert_int_equal(n, 1);
    assert_string_equal(a[0].name, "p");
    a = sf_op_attrs(SF_OP_RELU, &n);
    assert_int_equal(n, 0);
    a = sf_op_attrs(SF_OP_FLATTEN, &n);
    assert_int_equal(n, 1);

    const char *mine[] = {"input",   "conv2d", "pool2d",  "linear",    "relu",   "sigmoid",
                          "tanh",    "gelu",   "add",     "mul",       "concat", "reshape",
                          "flatten", "dropout", "batchnorm"};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
        sf_op_type t;
        assert_int_equal(sf_op_type_from_name(mine[i], &t), SF_OK);
        assert_string_equal(sf_op_type_name(t), mine[i]);
    }
}

/* LeNet-5 as torchvision-style layers: 61706 parameters. */
static void test_lenet_totals(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("lenet");
    int x = add_input(g, "x", 4, I64(16, 1, 28, 28));
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 6;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 5;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 2;
    int c1 = add_ok(g, SF_OP_CONV2D, "c1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    sf_op_params r = {0};
    int a1 = add_ok(g, SF_OP_TANH, "a1", &r, (sf_tensor_ref[]){{c1, 0}}, 1);
    sf_op_params pp = pool(SF_POOL_AVG, 2, 2, 0, 0);
    int s2 = add_ok(g, SF_OP_POOL2D, "s2", &pp, (sf_tensor_ref[]){{a1, 0}}, 1);
    p.conv2d.out_channels = 16;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 0;
    int c3 = add_ok(g, SF_OP_CONV2D, "c3", &p, (sf_tensor_ref[]){{s2, 0}}, 1);
    int a3 = add_ok(g, SF_OP_TANH, "a3", &r, (sf_tensor_ref[]){{c3, 0}}, 1);
    int s4 = add_ok(g, SF_OP_POOL2D, "s4", &pp, (sf_tensor_ref[]){{a3, 0}}, 1);
    check_shape(&sf_graph_op(g, s4)->out_shapes[0], 4, I64(16, 16, 5, 5));
    sf_op_params fp;
    sf_op_params_default(SF_OP_FLATTEN, &fp);
    int fl = add_ok(g, SF_OP_FLATTEN, "flat", &fp, (sf_tensor_ref[]){{s4, 0}}, 1);
    sf_op_params lp;
    sf_op_params_default(SF_OP_LINEAR, &lp);
    int prev = fl;
    const int64_t widths[] = {120, 84, 10};
    const char *names[] = {"f5", "f6", "f7"};
    for (int i = 0; i < 3; i++) {
        lp.linear.out_features = widths[i];
        prev = add_ok(g, SF_OP_LINEAR, names[i], &lp, (sf_tensor_ref[]){{prev, 0}}, 1);
    }
    check_shape(&sf_graph_op(g, prev)->out_shapes[0], 2, I64(16, 10));
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    assert_int_equal(st.ops, 11);
    assert_int_equal(st.batch, 16);
    /* 156 + 2416 + 48120 + 10164 + 850 */
    assert_int_equal(st.params, 61706);
    /* forward FLOPs by hand, per sample:
     * c1 2*6*28*28*25 + 4704 = 239904; a1 5*4704 = 23520; s2 4*1176 = 4704;
     * c3 2*16*10*10*150 + 1600 = 481600; a3 5*1600 = 8000; s4 4*400 = 1600;
     * f5 2*400*120 + 120 = 96120; f6 2*120*84 + 84 = 20244; f7 2*84*10 + 10 = 1690 */
    assert_true(st.flops_fwd == 16.0 * (239904 + 23520 + 4704 + 481600 + 8000 + 1600 + 96120 +
                                        20244 + 1690));
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input),
        cmocka_unit_test(test_conv2d_alexnet),
        cmocka_unit_test(test_conv_transpose2d),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_conv2d_groups_dilation),
        cmocka_unit_test(test_conv2d_errors),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_pool2d_shapes),
        cmocka_unit_test(test_pool2d_regions),
        cmocka_unit_test(test_pool2d_errors),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_attr_tables),
        cmocka_unit_test(test_lenet_totals),
        cmocka_unit_test(test_size_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
