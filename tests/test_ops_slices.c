/* The weights of every operator and every split the planner offers.
 *
 * For every operator type in the registry (small graphs of each, with the
 * variants that change the layout: bias or not, groups, states, cross
 * attention, affine or not, weights shared) and for partitions along every
 * splittable dimension and random combinations of them, as
 * sf_config_part_tile cuts them:
 *   - sf_op_weight_slices lies in the layout, is sorted, disjoint and merged,
 *     adds up to sf_op_tile_weights; parts that differ on a parameter dimension
 *     get disjoint slices, parts that agree get the same ones, and the shards of
 *     a partition cover the layout; a tile whole on its parameter dimensions
 *     covers all of it;
 *   - the output pieces of the parts cover every output exactly once, and the
 *     regions lie inside the inputs;
 *   - sf_op_param_descs are contiguous from 0, their shapes multiply out to
 *     n_params, their names unique, their inits PyTorch's (by hand for each
 *     operator with weights);
 * and for every splittable dimension of every operator (and random multi-
 * dimensional parts), with both kernels: forward and backward accept the tile
 * (no SF_ERR_UNSUPPORTED for anything the space offers), forward overwrites
 * every output element, neither reads a weight outside the tile's slices (they
 * hold NaN, which would reach the results), and backward leaves every
 * grad_weights element outside the slices at zero. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "kernel_check.h"
#include "ops/op_impl.h"
#include "ops_check.h"

#include "soapflow/graph.h"
#include "soapflow/kernels.h"
#include "soapflow/strategy.h"

#define MAX_IO 4 /* most inputs or outputs of an operator built here */

/* ---- the operators --------------------------------------------------------- */

static int add_op(sf_graph *g, sf_op_type t, const char *name, const sf_op_params *p,
                  const sf_tensor_ref *ins, int n) {
    sf_error err = {0};
    int id = sf_graph_add_op(g, t, name, p, ins, n, &err);
    if (id < 0) fail_msg("%s: %s", name, err.msg);
    return id;
}

static int add_index_input(sf_graph *g, const char *name, int nd, const int64_t *d) {
    sf_error err = {0};
    sf_shape s = sf_shape_make(nd, d);
    int id = sf_graph_add_input(g, name, &s, 1, &err);
    if (id < 0) fail_msg("input %s: %s", name, err.msg);
    return id;
}

/* One input x of shape d and operator t on it. */
static int unary_on(sf_graph *g, sf_op_type t, const sf_op_params *p, int nd, const int64_t *d) {
    int x = add_input(g, "x", nd, d);
    return add_op(g, t, "op", p, (sf_tensor_ref[]){{x, 0}}, 1);
}

static int b_input(sf_graph *g) { return add_input(g, "op", 3, (int64_t[]){4, 3, 5}); }

static int conv_with(sf_graph *g, const int64_t *x, int64_t cout, int64_t kh, int64_t kw,
                     int64_t sh, int64_t ph, int64_t groups, int bias) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = cout;
    p.conv2d.kernel[0] = kh;
    p.conv2d.kernel[1] = kw;
    p.conv2d.stride[0] = sh;
    p.conv2d.padding[0] = ph;
    p.conv2d.padding[1] = kw / 2;
    p.conv2d.groups = groups;
    p.conv2d.bias = bias;
    return unary_on(g, SF_OP_CONV2D, &p, 4, x);
}

/* grouped and strided: the im2col route */
static int b_conv_grouped(sf_graph *g) {
    return conv_with(g, (int64_t[]){3, 4, 7, 6}, 6, 3, 2, 2, 1, 2, 1);
}
/* small, stride 1: the direct route; without bias */
static int b_conv_direct(sf_graph *g) {
    return conv_with(g, (int64_t[]){2, 3, 6, 5}, 5, 3, 3, 1, 1, 1, 0);
}
/* direct, with bias */
static int b_conv_direct_bias(sf_graph *g) {
    return conv_with(g, (int64_t[]){2, 2, 5, 5}, 7, 3, 3, 1, 1, 1, 1);
}

/* stride 2, output_padding 1, with bias: a U-Net decoder's upsampling */
static int b_conv_transpose(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV_TRANSPOSE2D, &p);
    p.conv_transpose2d.out_channels = 5;
    p.conv_transpose2d.kernel[0] = p.conv_transpose2d.kernel[1] = 3;
    p.conv_transpose2d.stride[0] = p.conv_transpose2d.stride[1] = 2;
    p.conv_transpose2d.padding[0] = p.conv_transpose2d.padding[1] = 1;
    p.conv_transpose2d.output_padding[0] = 1;
    return unary_on(g, SF_OP_CONV_TRANSPOSE2D, &p, 4, (int64_t[]){3, 4, 5, 4});
}

/* bilinear to a size whose ratio is not whole (halos), and nearest */
static int resize_with(sf_graph *g, int mode, int align) {
    sf_op_params p;
    sf_op_params_default(SF_OP_RESIZE, &p);
    p.resize.mode = mode;
    p.resize.align_corners = align;
    p.resize.size[0] = 11;
    p.resize.size[1] = 7;
    return unary_on(g, SF_OP_RESIZE, &p, 4, (int64_t[]){3, 2, 5, 4});
}
static int b_resize_bilinear(sf_graph *g) { return resize_with(g, SF_RESIZE_BILINEAR, 0); }
static int b_resize_corners(sf_graph *g) { return resize_with(g, SF_RESIZE_BILINEAR, 1); }
static int b_resize_nearest(sf_graph *g) { return resize_with(g, SF_RESIZE_NEAREST, 0); }

static int pool_with(sf_graph *g, int mode, int ceil_mode, int include_pad) {
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.mode = mode;
    p.pool2d.kernel[0] = p.pool2d.kernel[1] = 3;
    p.pool2d.stride[0] = p.pool2d.stride[1] = 2;
    p.pool2d.padding[0] = p.pool2d.padding[1] = 1;
    p.pool2d.ceil_mode = ceil_mode;
    p.pool2d.count_include_pad = include_pad;
    p.pool2d.output_size[0] = 3;
    p.pool2d.output_size[1] = 2;
    return unary_on(g, SF_OP_POOL2D, &p, 4, (int64_t[]){2, 3, 7, 6});
}

static int b_pool_max(sf_graph *g) { return pool_with(g, SF_POOL_MAX, 0, 1); }
static int b_pool_avg(sf_graph *g) { return pool_with(g, SF_POOL_AVG, 1, 0); }
static int b_pool_adaptive(sf_graph *g) { return pool_with(g, SF_POOL_ADAPTIVE_AVG, 0, 1); }

static int b_linear(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 6;
    return unary_on(g, SF_OP_LINEAR, &p, 2, (int64_t[]){5, 7});
}

static int b_linear_seq_nobias(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 5;
    p.linear.bias = 0;
    return unary_on(g, SF_OP_LINEAR, &p, 3, (int64_t[]){3, 4, 7});
}

/* fc2 shares fc1's weights (fc1: 4 -> 4, so fc2 reads fc1's output) */
static int b_linear_shared(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 4;
    int x = add_input(g, "x", 2, (int64_t[]){5, 4});
    int a = add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1);
    int b = add_op(g, SF_OP_LINEAR, "op", &p, (sf_tensor_ref[]){{a, 0}}, 1);
    sf_error err = {0};
    assert_int_equal(sf_graph_share_weights(g, b, a, &err), SF_OK);
    return b;
}

static int b_matmul(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    int a = add_input(g, "a", 3, (int64_t[]){2, 5, 4});
    int b = add_input(g, "b", 3, (int64_t[]){2, 4, 3});
    return add_op(g, SF_OP_MATMUL, "op", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}}, 2);
}

static int b_matmul_t(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    p.matmul.transpose_a = p.matmul.transpose_b = 1;
    int a = add_input(g, "a", 2, (int64_t[]){4, 5}); /* A^T: (5, 4) */
    int b = add_input(g, "b", 2, (int64_t[]){3, 4}); /* B^T: (4, 3) */
    return add_op(g, SF_OP_MATMUL, "op", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}}, 2);
}

static int b_embedding(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 7;
    p.embedding.embedding_dim = 5;
    int ids = add_index_input(g, "ids", 2, (int64_t[]){3, 4});
    return add_op(g, SF_OP_EMBEDDING, "op", &p, (sf_tensor_ref[]){{ids, 0}}, 1);
}

static int b_lstm_state(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 3;
    int x = add_input(g, "x", 3, (int64_t[]){3, 4, 5});
    int h0 = add_input(g, "h0", 2, (int64_t[]){3, 3});
    int c0 = add_input(g, "c0", 2, (int64_t[]){3, 3});
    return add_op(g, SF_OP_LSTM, "op", &p, (sf_tensor_ref[]){{x, 0}, {h0, 0}, {c0, 0}}, 3);
}

static int b_lstm(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = 4;
    return unary_on(g, SF_OP_LSTM, &p, 3, (int64_t[]){4, 3, 2});
}

static int b_gru_state(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = 3;
    int x = add_input(g, "x", 3, (int64_t[]){3, 4, 5});
    int h0 = add_input(g, "h0", 2, (int64_t[]){3, 3});
    return add_op(g, SF_OP_GRU, "op", &p, (sf_tensor_ref[]){{x, 0}, {h0, 0}}, 2);
}

static int b_gru(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = 4;
    return unary_on(g, SF_OP_GRU, &p, 3, (int64_t[]){4, 3, 2});
}

static int b_attention_self(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 8;
    p.attention.heads = 2;
    p.attention.causal = 1;
    return unary_on(g, SF_OP_ATTENTION, &p, 3, (int64_t[]){2, 5, 8});
}

static int b_attention_cross(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 6;
    p.attention.heads = 3;
    p.attention.bias = 0;
    int q = add_input(g, "q", 3, (int64_t[]){2, 3, 6});
    int m = add_input(g, "m", 3, (int64_t[]){2, 4, 6});
    return add_op(g, SF_OP_ATTENTION, "op", &p, (sf_tensor_ref[]){{q, 0}, {m, 0}}, 2);
}

static int act(sf_graph *g, sf_op_type t) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    return unary_on(g, t, &p, 3, (int64_t[]){3, 4, 5});
}
static int b_relu(sf_graph *g) { return act(g, SF_OP_RELU); }
static int b_sigmoid(sf_graph *g) { return act(g, SF_OP_SIGMOID); }
static int b_tanh(sf_graph *g) { return act(g, SF_OP_TANH); }
static int b_gelu(sf_graph *g) { return act(g, SF_OP_GELU); }
static int b_relu6(sf_graph *g) { return act(g, SF_OP_RELU6); }
static int b_leaky_relu(sf_graph *g) { return act(g, SF_OP_LEAKY_RELU); }
static int b_hard_sigmoid(sf_graph *g) { return act(g, SF_OP_HARD_SIGMOID); }
static int b_hard_swish(sf_graph *g) { return act(g, SF_OP_HARD_SWISH); }

static int binary(sf_graph *g, sf_op_type t, const int64_t *a, const int64_t *b) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    int x = add_input(g, "a", 3, a);
    int y = add_input(g, "b", 3, b);
    return add_op(g, t, "op", &p, (sf_tensor_ref[]){{x, 0}, {y, 0}}, 2);
}
static int b_add(sf_graph *g) {
    return binary(g, SF_OP_ADD, (int64_t[]){3, 4, 5}, (int64_t[]){1, 4, 1});
}
static int b_mul(sf_graph *g) {
    return binary(g, SF_OP_MUL, (int64_t[]){3, 1, 5}, (int64_t[]){3, 4, 5});
}

static int b_concat(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = 1;
    int a = add_input(g, "a", 3, (int64_t[]){3, 2, 4});
    int b = add_input(g, "b", 3, (int64_t[]){3, 3, 4});
    int c = add_input(g, "c", 3, (int64_t[]){3, 1, 4});
    return add_op(g, SF_OP_CONCAT, "op", &p, (sf_tensor_ref[]){{a, 0}, {b, 0}, {c, 0}}, 3);
}

static int b_split(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 1;
    p.split.parts = 3;
    return unary_on(g, SF_OP_SPLIT, &p, 3, (int64_t[]){3, 7, 4});
}

static int b_reshape(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_RESHAPE, &p);
    p.reshape.ndim = 3;
    p.reshape.shape[0] = 0;
    p.reshape.shape[1] = 8;
    p.reshape.shape[2] = -1;
    return unary_on(g, SF_OP_RESHAPE, &p, 3, (int64_t[]){3, 4, 6});
}

static int b_flatten(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_FLATTEN, &p);
    return unary_on(g, SF_OP_FLATTEN, &p, 4, (int64_t[]){3, 2, 3, 4});
}

static int b_softmax_ce(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    return unary_on(g, SF_OP_SOFTMAX_CE, &p, 3, (int64_t[]){4, 3, 5});
}

static int norm(sf_graph *g, sf_op_type t, int affine, int nd, const int64_t *d) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    p.norm.affine = affine;
    return unary_on(g, t, &p, nd, d);
}
static int b_bn2d(sf_graph *g) { return norm(g, SF_OP_BATCHNORM, 1, 4, (int64_t[]){3, 4, 3, 2}); }
static int b_bn1d(sf_graph *g) { return norm(g, SF_OP_BATCHNORM, 1, 2, (int64_t[]){5, 4}); }
static int b_bn_plain(sf_graph *g) { return norm(g, SF_OP_BATCHNORM, 0, 3, (int64_t[]){3, 4, 5}); }
static int b_ln(sf_graph *g) { return norm(g, SF_OP_LAYERNORM, 1, 3, (int64_t[]){3, 4, 6}); }
static int b_ln_plain(sf_graph *g) { return norm(g, SF_OP_LAYERNORM, 0, 2, (int64_t[]){3, 6}); }

static int b_dropout(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = 0.3;
    return unary_on(g, SF_OP_DROPOUT, &p, 3, (int64_t[]){3, 4, 5});
}

/* add_param and mul_param: a learned tensor of PyTorch's shape, broadcast. */
static int param_with(sf_graph *g, sf_op_type t, int nd, const int64_t *x, int pnd,
                      const int64_t *shape) {
    sf_op_params p;
    sf_op_params_default(t, &p);
    p.param.ndim = pnd;
    for (int k = 0; k < pnd; k++) p.param.shape[k] = shape[k];
    return unary_on(g, t, &p, nd, x);
}
/* a position embedding (1, T, D): T and D parameter dimensions */
static int b_add_param_pos(sf_graph *g) {
    return param_with(g, SF_OP_ADD_PARAM, 3, (int64_t[]){3, 5, 4}, 3, (int64_t[]){1, 5, 4});
}
/* a scale (C, 1, W) of a 4-D input: C and W parameter dimensions, H broadcast between */
static int b_mul_param_channel(sf_graph *g) {
    return param_with(g, SF_OP_MUL_PARAM, 4, (int64_t[]){2, 4, 3, 5}, 3, (int64_t[]){4, 1, 5});
}
/* three varying dimensions: the third an attribute that parts of a shard share */
static int b_mul_param_3d(sf_graph *g) {
    return param_with(g, SF_OP_MUL_PARAM, 4, (int64_t[]){2, 3, 4, 5}, 3, (int64_t[]){3, 4, 5});
}
/* a scalar parameter */
static int b_add_param_scalar(sf_graph *g) {
    return param_with(g, SF_OP_ADD_PARAM, 3, (int64_t[]){3, 4, 2}, 0, NULL);
}
static int b_scale(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_SCALE, &p);
    p.scale.mul = -0.5;
    p.scale.add = 2;
    return unary_on(g, SF_OP_SCALE, &p, 3, (int64_t[]){3, 4, 5});
}

/* a fixed tensor of n values (a mask of every third element, or values k/7 - 1) */
static int fixed_with(sf_graph *g, sf_op_type t, const sf_op_params *p, int nd, const int64_t *x) {
    int64_t n = sf_op_fixed_count(t, p);
    float v[64];
    assert_true(n > 0 && n <= 64);
    for (int64_t k = 0; k < n; k++)
        v[k] = t == SF_OP_MASKED_FILL ? (float)(k % 3 == 0) : (float)k / 7.0f - 1.0f;
    int in = add_input(g, "x", nd, x);
    sf_error err = {0};
    int id = sf_graph_add_op_fixed(g, t, "op", p, (sf_tensor_ref[]){{in, 0}}, 1, v, n, &err);
    if (id < 0) fail_msg("%s", err.msg);
    return id;
}
/* a fixed position encoding (1, T, D) added; a fixed (C, 1, W) scale */
static int b_add_const(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_ADD_CONST, &p);
    p.param.ndim = 3;
    p.param.shape[0] = 1, p.param.shape[1] = 5, p.param.shape[2] = 4;
    return fixed_with(g, SF_OP_ADD_CONST, &p, 3, (int64_t[]){3, 5, 4});
}
static int b_mul_const(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_MUL_CONST, &p);
    p.param.ndim = 3;
    p.param.shape[0] = 4, p.param.shape[1] = 1, p.param.shape[2] = 5;
    return fixed_with(g, SF_OP_MUL_CONST, &p, 4, (int64_t[]){2, 4, 3, 5});
}
/* a (T, D) mask filled with -inf, and a (1, T, 1) one */
static int b_masked_fill(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_MASKED_FILL, &p);
    p.masked_fill.ndim = 2;
    p.masked_fill.shape[0] = 5, p.masked_fill.shape[1] = 4;
    p.masked_fill.value = -INFINITY;
    return fixed_with(g, SF_OP_MASKED_FILL, &p, 3, (int64_t[]){3, 5, 4});
}
static int b_masked_fill_rows(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_MASKED_FILL, &p);
    p.masked_fill.ndim = 3;
    p.masked_fill.shape[0] = 1, p.masked_fill.shape[1] = 5, p.masked_fill.shape[2] = 1;
    p.masked_fill.value = 0.25;
    return fixed_with(g, SF_OP_MASKED_FILL, &p, 3, (int64_t[]){3, 5, 4});
}

/* ViT's class token (1, 1, D) before x (N, T, D) */
static int b_concat_param(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT_PARAM, &p);
    p.concat_param.axis = 1;
    p.concat_param.ndim = 3;
    p.concat_param.shape[0] = 1;
    p.concat_param.shape[1] = 2;
    p.concat_param.shape[2] = 4;
    return unary_on(g, SF_OP_CONCAT_PARAM, &p, 3, (int64_t[]){3, 5, 4});
}

/* ConvNeXt's permute to NHWC */
static int b_transpose(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_TRANSPOSE, &p);
    p.transpose.ndim = 4;
    p.transpose.perm[0] = 0;
    p.transpose.perm[1] = 2;
    p.transpose.perm[2] = 3;
    p.transpose.perm[3] = 1;
    return unary_on(g, SF_OP_TRANSPOSE, &p, 4, (int64_t[]){2, 3, 4, 5});
}

/* nn.ZeroPad2d((1, 0, 2, 0)) */
static int b_pad(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_PAD, &p);
    p.pad.n_pads = 8;
    p.pad.pads[2] = 2;
    p.pad.pads[3] = 1;
    return unary_on(g, SF_OP_PAD, &p, 4, (int64_t[]){2, 3, 4, 3});
}

/* x.mean([1, 3], keepdim=True) */
static int b_reduce_mean(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
    p.reduce.n_axes = 2;
    p.reduce.axes[0] = 1;
    p.reduce.axes[1] = 3;
    return unary_on(g, SF_OP_REDUCE_MEAN, &p, 4, (int64_t[]){3, 2, 4, 3});
}
/* x.mean(2): dropped */
static int b_reduce_mean_drop(sf_graph *g) {
    sf_op_params p;
    sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
    p.reduce.n_axes = 1;
    p.reduce.axes[0] = 2;
    p.reduce.keepdims = 0;
    return unary_on(g, SF_OP_REDUCE_MEAN, &p, 3, (int64_t[]){3, 4, 5});
}

typedef struct op_case {
    const char *name;
    int (*build)(sf_graph *g); /* returns the operator to test */
} op_case;

static const op_case cases[] = {
    {"input", b_input},
    {"conv2d grouped", b_conv_grouped},
    {"conv2d direct", b_conv_direct},
    {"conv2d direct bias", b_conv_direct_bias},
    {"conv_transpose2d", b_conv_transpose},
    {"resize bilinear", b_resize_bilinear},
    {"resize align_corners", b_resize_corners},
    {"resize nearest", b_resize_nearest},
    {"pool2d max", b_pool_max},
    {"pool2d avg", b_pool_avg},
    {"pool2d adaptive", b_pool_adaptive},
    {"linear", b_linear},
    {"linear seq nobias", b_linear_seq_nobias},
    {"linear shared", b_linear_shared},
    {"matmul", b_matmul},
    {"matmul transposed", b_matmul_t},
    {"embedding", b_embedding},
    {"lstm state", b_lstm_state},
    {"lstm", b_lstm},
    {"gru state", b_gru_state},
    {"gru", b_gru},
    {"attention self causal", b_attention_self},
    {"attention cross", b_attention_cross},
    {"relu", b_relu},
    {"sigmoid", b_sigmoid},
    {"tanh", b_tanh},
    {"gelu", b_gelu},
    {"relu6", b_relu6},
    {"leaky_relu", b_leaky_relu},
    {"hard_sigmoid", b_hard_sigmoid},
    {"hard_swish", b_hard_swish},
    {"add", b_add},
    {"mul", b_mul},
    {"concat", b_concat},
    {"split", b_split},
    {"reshape", b_reshape},
    {"flatten", b_flatten},
    {"softmax_ce", b_softmax_ce},
    {"batchnorm2d", b_bn2d},
    {"batchnorm1d", b_bn1d},
    {"batchnorm plain", b_bn_plain},
    {"layernorm", b_ln},
    {"layernorm plain", b_ln_plain},
    {"dropout", b_dropout},
    {"add_param pos", b_add_param_pos},
    {"add_param scalar", b_add_param_scalar},
    {"mul_param channel", b_mul_param_channel},
    {"mul_param 3d", b_mul_param_3d},
    {"scale", b_scale},
    {"add_const", b_add_const},
    {"mul_const", b_mul_const},
    {"masked_fill", b_masked_fill},
    {"masked_fill rows", b_masked_fill_rows},
    {"concat_param", b_concat_param},
    {"transpose", b_transpose},
    {"pad", b_pad},
    {"reduce_mean", b_reduce_mean},
    {"reduce_mean dropped", b_reduce_mean_drop},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const sf_op *build_case(const op_case *c, sf_graph **g) {
    *g = sf_graph_new(c->name);
    assert_non_null(*g);
    return sf_graph_op(*g, c->build(*g));
}

/* ---- partitions --------------------------------------------------------------- */

static void config_of(const sf_op *op, const int *deg, sf_config *c) {
    memset(c, 0, sizeof *c);
    assert_int_equal(sf_config_set_degrees(c, op->space.ndim, deg), SF_OK);
}

/* Degrees of a partition: dimension `dim` (or, dim < 0, random splittable
 * dimensions) cut into 2..min(size, 4) parts. */
static void pick_degrees(const sf_op *op, int dim, sf_rng *rng, int *deg) {
    int parts = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) deg[i] = 1;
    for (int i = 0; i < op->space.ndim; i++) {
        /* not an inner dimension (softmax_ce's classes): a part of it runs
         * only with the rows' statistics (sf_kernel_args.stats, tested in
         * test_kernels_ops.c); test_kernels_on_split_tiles checks that the
         * kernels refuse it without them */
        if (op->kinds[i] == SF_DIM_NONE || i == sf_op_inner_dim(op) || op->space.d[i] < 2)
            continue;
        if (dim >= 0 && i != dim) continue;
        int64_t most = op->space.d[i] < 4 ? op->space.d[i] : 4;
        deg[i] = dim >= 0 ? (int)(2 + sf_rng_below(rng, (uint64_t)most - 1))
                          : (int)(1 + sf_rng_below(rng, (uint64_t)most));
        if (parts * deg[i] > SF_MAX_PARTS) deg[i] = SF_MAX_PARTS / parts;
        parts *= deg[i];
    }
}

/* Element e of the layout is in the slices. */
static int in_slices(const sf_weight_slice *s, int n, int64_t e) {
    for (int k = 0; k < n; k++) {
        if (e < s[k].offset) continue;
        int64_t row = (e - s[k].offset) / s[k].stride, col = (e - s[k].offset) % s[k].stride;
        if (row < s[k].count && col < s[k].len) return 1;
    }
    return 0;
}

/* Slices of tile t as a membership map of the layout (n_params bytes), after
 * checking their form: inside the layout, none empty, sorted, disjoint, the
 * contiguous ones merged, and as many elements as sf_op_tile_weights. */
static void slices_map(const sf_op *op, const sf_tile *t, unsigned char *map, const char *what) {
    sf_weight_slice s[SF_MAX_WEIGHT_SLICES];
    int n = sf_op_weight_slices(op, t, s);
    char tb[160];
    sf_tile_str(t, tb, sizeof tb);
    if (op->n_params == 0) {
        if (n != 0) fail_msg("%s: no weights but %d slices", what, n);
        return;
    }
    if (n < 1 || n > SF_MAX_WEIGHT_SLICES) fail_msg("%s %s: %d slices", what, tb, n);
    memset(map, 0, (size_t)op->n_params);
    int64_t total = 0, end = 0;
    for (int k = 0; k < n; k++) {
        const sf_weight_slice *x = &s[k];
        if (x->len < 1 || x->count < 1 || x->stride < x->len || x->offset < end)
            fail_msg("%s %s: slice %d {%lld, %lld, %lld, %lld} empty, overlapping or unsorted",
                     what, tb, k, (long long)x->offset, (long long)x->len, (long long)x->stride,
                     (long long)x->count);
        if (x->count == 1 && x->stride != x->len)
            fail_msg("%s %s: slice %d of one row has stride %lld, not its len %lld", what, tb, k,
                     (long long)x->stride, (long long)x->len);
        if (k > 0 && x->count == 1 && s[k - 1].count == 1 && x->offset == end)
            fail_msg("%s %s: slices %d and %d touch but are not merged", what, tb, k - 1, k);
        int64_t last = x->offset + (x->count - 1) * x->stride + x->len;
        if (last > op->n_params)
            fail_msg("%s %s: slice %d ends at %lld, past the layout's %lld", what, tb, k,
                     (long long)last, (long long)op->n_params);
        for (int64_t r = 0; r < x->count; r++)
            for (int64_t j = 0; j < x->len; j++) {
                unsigned char *m = &map[x->offset + r * x->stride + j];
                if (*m)
                    fail_msg("%s %s: element %lld twice", what, tb,
                             (long long)(x->offset + r * x->stride + j));
                *m = 1;
            }
        total += x->len * x->count;
        end = last;
    }
    if (total != sf_op_tile_weights(op, t))
        fail_msg("%s %s: slices hold %lld elements, sf_op_tile_weights says %lld", what, tb,
                 (long long)total, (long long)sf_op_tile_weights(op, t));
}

static int same_parameter_ranges(const sf_op *op, const sf_tile *a, const sf_tile *b) {
    for (int i = 0; i < op->space.ndim; i++)
        if ((op->kinds[i] == SF_DIM_PARAMETER || op->kinds[i] == SF_DIM_REDUCE) &&
            (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]))
            return 0;
    return 1;
}

static int whole_on_parameters(const sf_op *op, const sf_tile *t) {
    for (int i = 0; i < op->space.ndim; i++)
        if ((op->kinds[i] == SF_DIM_PARAMETER || op->kinds[i] == SF_DIM_REDUCE) &&
            (t->lo[i] != 0 || t->hi[i] != op->space.d[i]))
            return 0;
    return 1;
}

/* Everything about the parts of one partition that needs no kernel. */
static void check_partition(const sf_op *op, const int *deg, const char *name) {
    sf_config c;
    config_of(op, deg, &c);
    char what[200];
    snprintf(what, sizeof what, "%s (%d,%d,%d,%d)", name, deg[0], deg[1], deg[2], deg[3]);
    int64_t np = op->n_params > 0 ? op->n_params : 1;
    unsigned char *maps = calloc((size_t)(c.n_parts * np), 1), *cover = calloc((size_t)np, 1);
    assert_non_null(maps);
    assert_non_null(cover);
    sf_tile tiles[SF_MAX_PARTS];
    for (int p = 0; p < c.n_parts; p++) {
        sf_config_part_tile(op, &c, p, &tiles[p]);
        assert_false(sf_tile_empty(&tiles[p]));
        slices_map(op, &tiles[p], maps + p * np, what);
        if (op->n_params > 0 && whole_on_parameters(op, &tiles[p]))
            for (int64_t e = 0; e < op->n_params; e++)
                if (!maps[p * np + e])
                    fail_msg("%s part %d: whole on parameter dimensions, misses element %lld", what,
                             p, (long long)e);
        for (int q = 0; q < p && op->n_params > 0; q++) {
            int same = same_parameter_ranges(op, &tiles[p], &tiles[q]);
            for (int64_t e = 0; e < op->n_params; e++) {
                unsigned char a = maps[p * np + e], b = maps[q * np + e];
                if (same && a != b)
                    fail_msg("%s parts %d, %d: same shard, different slices at %lld", what, q, p,
                             (long long)e);
                if (!same && a && b)
                    fail_msg("%s parts %d, %d: different shards share element %lld", what, q, p,
                             (long long)e);
            }
        }
        for (int64_t e = 0; e < op->n_params; e++) cover[e] |= maps[p * np + e];
        for (int i = 0; i < op->n_inputs; i++) {
            sf_tile r;
            sf_op_input_region(op, &tiles[p], i, &r);
            assert_int_equal(r.ndim, op->in_shapes[i].ndim);
            for (int d = 0; d < r.ndim; d++)
                if (r.lo[d] < 0 || r.hi[d] > op->in_shapes[i].d[d])
                    fail_msg("%s part %d: region of input %d leaves the input in dimension %d",
                             what, p, i, d);
        }
    }
    for (int64_t e = 0; e < op->n_params; e++)
        if (!cover[e]) fail_msg("%s: no part holds weight element %lld", what, (long long)e);
    /* every output element produced by exactly one part */
    for (int k = 0; k < op->n_outputs; k++) {
        const sf_shape *s = &op->out_shapes[k];
        int64_t n = sf_shape_numel(s);
        unsigned char *hits = calloc((size_t)n, 1);
        assert_non_null(hits);
        /* parts along a reduction dimension share their output piece (partial sums) */
        int reduce_parts = 1;
        for (int d = 0; d < op->space.ndim; d++)
            if (op->kinds[d] == SF_DIM_REDUCE) reduce_parts *= c.degree[d];
        for (int p = 0; p < c.n_parts; p++) {
            sf_tile o;
            sf_op_output_tile(op, &tiles[p], k, &o);
            if (sf_tile_numel(&o) == 0) continue;
            assert_int_equal(o.ndim, s->ndim);
            int64_t idx[SF_MAX_DIMS] = {0}, m = sf_tile_numel(&o);
            for (int64_t e = 0; e < m; e++) {
                int64_t off = 0;
                for (int d = 0; d < s->ndim; d++) {
                    assert_true(o.lo[d] >= 0 && o.hi[d] <= s->d[d]);
                    off = off * s->d[d] + o.lo[d] + idx[d];
                }
                if (hits[off]++ >= reduce_parts)
                    fail_msg("%s: output %d element %lld twice", what, k, (long long)off);
                for (int d = s->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < o.hi[d] - o.lo[d]) break;
                    idx[d] = 0;
                }
            }
        }
        for (int64_t e = 0; e < n; e++)
            if (!hits[e])
                fail_msg("%s: output %d element %lld from no part", what, k, (long long)e);
        free(hits);
    }
    free(maps);
    free(cover);
}

static void test_every_type_has_a_case(void **state) {
    (void)state;
    int seen[SF_OP_COUNT] = {0};
    for (int i = 0; i < N_CASES; i++) {
        sf_graph *g;
        seen[build_case(&cases[i], &g)->type] = 1;
        sf_graph_free(g);
    }
    for (int t = 0; t < SF_OP_COUNT; t++)
        if (!seen[t]) fail_msg("no case builds a %s", sf_op_type_name((sf_op_type)t));
}

/* The callbacks an operator with weights must set: parameter tensors always,
 * slices when it has a parameter dimension (the default, the whole layout,
 * would make different shards overlap). */
static void test_classes_set_their_callbacks(void **state) {
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        sf_graph *g;
        const sf_op *op = build_case(&cases[i], &g);
        const sf_op_class *c = sf_op_class_get(op->type);
        int has_p = 0;
        for (int d = 0; d < op->space.ndim; d++) has_p |= op->kinds[d] == SF_DIM_PARAMETER;
        if (op->n_params > 0 && !c->param_descs)
            fail_msg("%s has weights but no param_descs", cases[i].name);
        if (has_p && !c->weight_slices)
            fail_msg("%s has a parameter dimension but no weight_slices", cases[i].name);
        sf_graph_free(g);
    }
}

static void test_slices_of_partitions(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 17);
    for (int i = 0; i < N_CASES; i++) {
        sf_graph *g;
        const sf_op *op = build_case(&cases[i], &g);
        int deg[SF_MAX_DIMS];
        for (int d = -1; d < op->space.ndim; d++) { /* -1: the whole tile */
            if (d >= 0 && (op->kinds[d] == SF_DIM_NONE || op->space.d[d] < 2)) continue;
            for (int rep = 0; rep < (d < 0 ? 1 : 3); rep++) {
                pick_degrees(op, d, &rng, deg);
                if (d < 0)
                    for (int k = 0; k < SF_MAX_DIMS; k++) deg[k] = 1;
                check_partition(op, deg, cases[i].name);
            }
        }
        for (int rep = 0; rep < 12; rep++) {
            pick_degrees(op, -1, &rng, deg);
            check_partition(op, deg, cases[i].name);
        }
        sf_graph_free(g);
    }
}

/* A sharing operator answers for its layout as the owner would. */
static void test_shared_weights_same_answers(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("shared");
    const sf_op *op = sf_graph_op(g, b_linear_shared(g));
    const sf_op *own = sf_graph_op(g, op->weight_owner);
    assert_true(op->n_params == own->n_params);
    sf_tile t = sf_tile_full(&op->space);
    t.lo[1] = 1;
    t.hi[1] = 3;
    sf_weight_slice a[SF_MAX_WEIGHT_SLICES], b[SF_MAX_WEIGHT_SLICES];
    int na = sf_op_weight_slices(op, &t, a), nb = sf_op_weight_slices(own, &t, b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof a[0]);
    sf_param_desc pa[SF_MAX_PARAMS], pb[SF_MAX_PARAMS];
    assert_int_equal(sf_op_param_descs(op, pa), sf_op_param_descs(own, pb));
    assert_string_equal(pa[1].name, pb[1].name);
    sf_graph_free(g);
}

/* ---- slices by hand ----------------------------------------------------------- */

static void expect_slices(const sf_op *op, const sf_tile *t, int n, const sf_weight_slice *want) {
    sf_weight_slice s[SF_MAX_WEIGHT_SLICES];
    int got = sf_op_weight_slices(op, t, s);
    assert_int_equal(got, n);
    for (int k = 0; k < n; k++)
        if (s[k].offset != want[k].offset || s[k].len != want[k].len ||
            s[k].stride != want[k].stride || s[k].count != want[k].count)
            fail_msg("%s slice %d: {%lld, %lld, %lld, %lld}, expected {%lld, %lld, %lld, %lld}",
                     op->name, k, (long long)s[k].offset, (long long)s[k].len,
                     (long long)s[k].stride, (long long)s[k].count, (long long)want[k].offset,
                     (long long)want[k].len, (long long)want[k].stride, (long long)want[k].count);
}

static void test_slices_by_hand(void **state) {
    (void)state;
    sf_graph *g = sf_graph_new("conv");
    /* 6 filters of 2 * 3 * 2 = 12, then 6 biases: channels [2, 5) */
    const sf_op *op = sf_graph_op(g, b_conv_grouped(g));
    sf_tile t = sf_tile_full(&op->space);
    t.lo[1] = 2;
    t.hi[1] = 5;
    t.lo[0] = 1; /* samples and rows change nothing */
    t.hi[2] = 2;
    expect_slices(op, &t, 2, (sf_weight_slice[]){{24, 36, 36, 1}, {74, 3, 3, 1}});
    t = sf_tile_full(&op->space); /* the last filters touch the first bias: one run */
    expect_slices(op, &t, 1, (sf_weight_slice[]){{0, 78, 78, 1}});
    t.hi[0] = 0; /* empty: none */
    expect_slices(op, &t, 0, NULL);
    sf_graph_free(g);

    g = sf_graph_new("linear"); /* W (6, 7), bias 6: features [1, 4) */
    op = sf_graph_op(g, b_linear(g));
    t = mk_tile(3, (int64_t[]){0, 1, 0}, (int64_t[]){5, 4, 7});
    expect_slices(op, &t, 2, (sf_weight_slice[]){{7, 21, 21, 1}, {43, 3, 3, 1}});
    /* a partial sum: input features [2, 5) of those rows, no bias (not the first part) */
    t = mk_tile(3, (int64_t[]){0, 1, 2}, (int64_t[]){5, 4, 5});
    expect_slices(op, &t, 1, (sf_weight_slice[]){{9, 3, 7, 3}});
    assert_int_equal(sf_op_tile_weights(op, &t), 9);
    /* the first part along the input features holds the biases */
    t = mk_tile(3, (int64_t[]){0, 1, 0}, (int64_t[]){5, 4, 3});
    expect_slices(op, &t, 2, (sf_weight_slice[]){{7, 3, 7, 3}, {43, 3, 3, 1}});
    assert_int_equal(sf_op_tile_weights(op, &t), 12);
    sf_graph_free(g);

    g = sf_graph_new("emb"); /* table (7, 5): columns [2, 4) of every row */
    op = sf_graph_op(g, b_embedding(g));
    t = mk_tile(3, (int64_t[]){0, 1, 2}, (int64_t[]){2, 4, 4});
    expect_slices(op, &t, 1, (sf_weight_slice[]){{2, 2, 5, 7}});
    t.lo[2] = 0;
    t.hi[2] = 5; /* all columns: one run */
    expect_slices(op, &t, 1, (sf_weight_slice[]){{0, 35, 35, 1}});
    sf_graph_free(g);

    g = sf_graph_new("bn"); /* scale (4), shift (4): channels [1, 3) */
    op = sf_graph_op(g, b_bn2d(g));
    t = sf_tile_full(&op->space);
    t.lo[1] = 1;
    t.hi[1] = 3;
    expect_slices(op, &t, 2, (sf_weight_slice[]){{1, 2, 2, 1}, {5, 2, 2, 1}});
    sf_graph_free(g);

    g = sf_graph_new("bn"); /* no weights, no slices */
    op = sf_graph_op(g, b_bn_plain(g));
    t = sf_tile_full(&op->space);
    expect_slices(op, &t, 0, NULL);
    sf_graph_free(g);
}

/* ---- parameter tensors ------------------------------------------------------ */

/* Contiguous from 0, shapes multiplying out to n_params, unique names, sane inits. */
static void test_param_descs_add_up(void **state) {
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        sf_graph *g;
        const sf_op *op = build_case(&cases[i], &g);
        sf_param_desc d[SF_MAX_PARAMS];
        int n = sf_op_param_descs(op, d);
        if (op->n_params == 0) {
            assert_int_equal(n, 0);
            sf_graph_free(g);
            continue;
        }
        assert_true(n >= 1 && n <= SF_MAX_PARAMS);
        int64_t at = 0;
        for (int k = 0; k < n; k++) {
            assert_non_null(d[k].name);
            if (d[k].offset != at)
                fail_msg("%s: %s starts at %lld, expected %lld", cases[i].name, d[k].name,
                         (long long)d[k].offset, (long long)at);
            /* rank 0: a scalar nn.Parameter (add_param), shape () as in PyTorch */
            assert_true(d[k].shape.ndim >=
                        (op->type == SF_OP_ADD_PARAM || op->type == SF_OP_MUL_PARAM ? 0 : 1));
            at += sf_shape_numel(&d[k].shape);
            assert_true((unsigned)d[k].init < SF_INIT_COUNT);
            assert_true(isfinite(d[k].a));
            if (d[k].init != SF_INIT_CONST) assert_true(d[k].a > 0);
            for (int j = 0; j < k; j++) assert_string_not_equal(d[j].name, d[k].name);
        }
        if (at != op->n_params)
            fail_msg("%s: tensors hold %lld elements, the layout %lld", cases[i].name,
                     (long long)at, (long long)op->n_params);
        sf_graph_free(g);
    }
    assert_string_equal(sf_param_init_name(SF_INIT_NORMAL), "normal");
    assert_string_equal(sf_param_init_name(SF_INIT_COUNT), "?");
}

static void expect_param(const sf_param_desc *d, const char *name, int nd, const int64_t *shape,
                         int64_t offset, sf_param_init init, double a) {
    assert_string_equal(d->name, name);
    check_shape(&d->shape, nd, shape);
    assert_true(d->offset == offset);
    assert_int_equal(d->init, init);
    if (fabs(d->a - a) > 1e-12 * fabs(a)) fail_msg("%s: a = %.17g, expected %.17g", name, d->a, a);
}

/* Names, shapes and inits as torch.nn's modules have them. */
static void test_param_descs_are_pytorchs(void **state) {
    (void)state;
    sf_param_desc d[SF_MAX_PARAMS];
    sf_graph *g = sf_graph_new("p");
    /* Conv2d(4, 6, (3, 2), groups=2): fan_in 2 * 3 * 2 = 12 */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_conv_grouped(g)), d), 2);
    expect_param(&d[0], "weight", 4, (int64_t[]){6, 2, 3, 2}, 0, SF_INIT_UNIFORM, 1 / sqrt(12.0));
    expect_param(&d[1], "bias", 1, (int64_t[]){6}, 72, SF_INIT_UNIFORM, 1 / sqrt(12.0));
    sf_graph_free(g);

    g = sf_graph_new("p"); /* Conv2d(3, 5, 3, bias=False) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_conv_direct(g)), d), 1);
    expect_param(&d[0], "weight", 4, (int64_t[]){5, 3, 3, 3}, 0, SF_INIT_UNIFORM, 1 / sqrt(27.0));
    sf_graph_free(g);

    g = sf_graph_new("p"); /* Linear(7, 6) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_linear(g)), d), 2);
    expect_param(&d[0], "weight", 2, (int64_t[]){6, 7}, 0, SF_INIT_UNIFORM, 1 / sqrt(7.0));
    expect_param(&d[1], "bias", 1, (int64_t[]){6}, 42, SF_INIT_UNIFORM, 1 / sqrt(7.0));
    sf_graph_free(g);

    g = sf_graph_new("p"); /* Embedding(7, 5) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_embedding(g)), d), 1);
    expect_param(&d[0], "weight", 2, (int64_t[]){7, 5}, 0, SF_INIT_NORMAL, 1.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* BatchNorm2d(4) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_bn2d(g)), d), 2);
    expect_param(&d[0], "weight", 1, (int64_t[]){4}, 0, SF_INIT_CONST, 1.0);
    expect_param(&d[1], "bias", 1, (int64_t[]){4}, 4, SF_INIT_CONST, 0.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* LayerNorm(6) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_ln(g)), d), 2);
    expect_param(&d[0], "weight", 1, (int64_t[]){6}, 0, SF_INIT_CONST, 1.0);
    expect_param(&d[1], "bias", 1, (int64_t[]){6}, 6, SF_INIT_CONST, 0.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* LSTM(5, 3) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_lstm_state(g)), d), 4);
    double b = 1 / sqrt(3.0);
    expect_param(&d[0], "weight_ih_l0", 2, (int64_t[]){12, 5}, 0, SF_INIT_UNIFORM, b);
    expect_param(&d[1], "weight_hh_l0", 2, (int64_t[]){12, 3}, 60, SF_INIT_UNIFORM, b);
    expect_param(&d[2], "bias_ih_l0", 1, (int64_t[]){12}, 96, SF_INIT_UNIFORM, b);
    expect_param(&d[3], "bias_hh_l0", 1, (int64_t[]){12}, 108, SF_INIT_UNIFORM, b);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* GRU(5, 3) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_gru_state(g)), d), 4);
    expect_param(&d[0], "weight_ih_l0", 2, (int64_t[]){9, 5}, 0, SF_INIT_UNIFORM, b);
    expect_param(&d[1], "weight_hh_l0", 2, (int64_t[]){9, 3}, 45, SF_INIT_UNIFORM, b);
    expect_param(&d[2], "bias_ih_l0", 1, (int64_t[]){9}, 72, SF_INIT_UNIFORM, b);
    expect_param(&d[3], "bias_hh_l0", 1, (int64_t[]){9}, 81, SF_INIT_UNIFORM, b);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* MultiheadAttention(8, 2) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_attention_self(g)), d), 4);
    expect_param(&d[0], "in_proj_weight", 2, (int64_t[]){24, 8}, 0, SF_INIT_UNIFORM,
                 sqrt(6.0 / 32));
    expect_param(&d[1], "out_proj.weight", 2, (int64_t[]){8, 8}, 192, SF_INIT_UNIFORM,
                 1 / sqrt(8.0));
    expect_param(&d[2], "in_proj_bias", 1, (int64_t[]){24}, 256, SF_INIT_CONST, 0.0);
    expect_param(&d[3], "out_proj.bias", 1, (int64_t[]){8}, 280, SF_INIT_CONST, 0.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* nn.Parameter (1, 5, 4), a position embedding: ViT's init */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_add_param_pos(g)), d), 1);
    expect_param(&d[0], "weight", 3, (int64_t[]){1, 5, 4}, 0, SF_INIT_NORMAL, 0.02);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* nn.Parameter (4, 1, 5), a scale: ones */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_mul_param_channel(g)), d), 1);
    expect_param(&d[0], "weight", 3, (int64_t[]){4, 1, 5}, 0, SF_INIT_CONST, 1.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* a class token nn.Parameter (1, 2, 4): ViT's zeros */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_concat_param(g)), d), 1);
    expect_param(&d[0], "weight", 3, (int64_t[]){1, 2, 4}, 0, SF_INIT_CONST, 0.0);
    sf_graph_free(g);

    g = sf_graph_new("p"); /* MultiheadAttention(6, 3, bias=False) */
    assert_int_equal(sf_op_param_descs(sf_graph_op(g, b_attention_cross(g)), d), 2);
    expect_param(&d[1], "out_proj.weight", 2, (int64_t[]){6, 6}, 108, SF_INIT_UNIFORM,
                 1 / sqrt(6.0));
    sf_graph_free(g);
}

/* ---- kernels on the tiles the space offers ---------------------------------- */

/* Random inputs the operator accepts: token ids in [0, V) for an embedding,
 * uniform in [-1, 1) otherwise. */
static void fill_input(const sf_op *op, int i, sf_rng *rng, float *x, int64_t n) {
    if (op->type == SF_OP_EMBEDDING) {
        for (int64_t e = 0; e < n; e++)
            x[e] = (float)sf_rng_below(rng, (uint64_t)op->params.embedding.num_embeddings);
        return;
    }
    (void)i;
    fill_random(rng, x, n);
}

static int has_nan(const float *p, int64_t n) {
    for (int64_t e = 0; e < n; e++)
        if (isnan(p[e])) return 1;
    return 0;
}

/* Forward and backward of tile t with one kernel: weights outside the tile's
 * slices are NaN, grad_weights starts at zero. */
static void check_tile_kernels(const sf_op *op, const sf_tile *t, int fast, uint64_t seed,
                               const char *name) {
    char tb[160], what[240];
    sf_tile_str(t, tb, sizeof tb);
    snprintf(what, sizeof what, "%s tile %s fast=%d", name, tb, fast);
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
    int nsl = sf_op_weight_slices(op, t, sl);
    int64_t nw = op->n_params;
    float *w = falloc(nw), *dw = falloc(nw);
    fill_random(&rng, w, nw);
    for (int64_t e = 0; e < nw; e++)
        if (!in_slices(sl, nsl, e)) w[e] = NAN;

    sf_tile r[MAX_IO], ot[MAX_IO];
    float *x[MAX_IO] = {0}, *dx[MAX_IO] = {0}, *y[MAX_IO] = {0}, *dy[MAX_IO] = {0};
    assert_true(op->n_inputs <= MAX_IO && op->n_outputs <= MAX_IO);
    for (int i = 0; i < op->n_inputs; i++) {
        sf_op_input_region(op, t, i, &r[i]);
        x[i] = falloc(sf_tile_numel(&r[i]));
        fill_input(op, i, &rng, x[i], sf_tile_numel(&r[i]));
        dx[i] = falloc(sf_tile_numel(&r[i]));
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_op_output_tile(op, t, k, &ot[k]);
        int64_t n = sf_tile_numel(&ot[k]);
        y[k] = falloc(n);
        for (int64_t e = 0; e < n; e++) y[k][e] = NAN; /* forward must overwrite all */
        dy[k] = falloc(n);
        fill_random(&rng, dy[k], n);
    }
    int64_t rows = 0;
    int32_t *labels = NULL;
    if (op->type == SF_OP_SOFTMAX_CE) {
        int64_t c = op->space.d[op->space.ndim - 1];
        rows = sf_tile_numel(t) / c;
        labels = calloc((size_t)rows, sizeof *labels);
        assert_non_null(labels);
        for (int64_t e = 0; e < rows; e++) labels[e] = (int32_t)sf_rng_below(&rng, (uint64_t)c);
    }
    size_t ws = sf_kernel_workspace_bytes(op, t, 0), wsb = sf_kernel_workspace_bytes(op, t, 1);
    if (wsb > ws) ws = wsb;
    float *wsp = ws_alloc(ws);
    double loss = 0;
    const float *in_arr[MAX_IO] = {x[0], x[1], x[2], x[3]};
    const float *dy_arr[MAX_IO] = {dy[0], dy[1], dy[2], dy[3]};
    sf_kernel_args a = {
        .op = op,
        .tile = *t,
        .n_inputs = op->n_inputs,
        .in = in_arr,
        .in_region = r,
        .n_outputs = op->n_outputs,
        .out = y,
        .weights = nw > 0 ? w : NULL,
        .grad_out = dy_arr,
        .grad_in = dx,
        .grad_weights = nw > 0 ? dw : NULL,
        .workspace = wsp,
        .workspace_bytes = ws,
        .seed = seed,
        .labels = labels,
        .loss = op->type == SF_OP_SOFTMAX_CE ? &loss : NULL,
    };
    sf_status s = sf_kernel_forward(&a, fast);
    if (s != SF_OK) fail_msg("%s: forward says %s", what, sf_status_str(s));
    for (int k = 0; k < op->n_outputs; k++)
        if (has_nan(y[k], sf_tile_numel(&ot[k])))
            fail_msg("%s: output %d holds NaN (unwritten, or a weight outside the slices read)",
                     what, k);
    s = sf_kernel_backward(&a, fast);
    if (s != SF_OK) fail_msg("%s: backward says %s", what, sf_status_str(s));
    for (int i = 0; i < op->n_inputs; i++)
        if (has_nan(dx[i], sf_tile_numel(&r[i])))
            fail_msg("%s: gradient of input %d holds NaN (a weight outside the slices read)", what,
                     i);
    for (int64_t e = 0; e < nw; e++) {
        int inside = in_slices(sl, nsl, e);
        if (!inside && dw[e] != 0.0f)
            fail_msg("%s: grad_weights[%lld] = %g, outside the tile's slices", what, (long long)e,
                     (double)dw[e]);
        if (inside && isnan(dw[e])) fail_msg("%s: grad_weights[%lld] is NaN", what, (long long)e);
    }
    ws_free(wsp, ws);
    for (int i = 0; i < MAX_IO; i++) {
        free(x[i]);
        free(dx[i]);
        free(y[i]);
        free(dy[i]);
    }
    free(labels);
    free(w);
    free(dw);
}

/* A tile cut along an inner dimension (softmax_ce's classes) needs statistics
 * from the other parts (sf_kernel_args.stats): without them both kernels
 * refuse it before writing anything. */
static void check_inner_refused(const sf_op *op, int d) {
    sf_tile t = sf_tile_full(&op->space);
    t.hi[d] = op->space.d[d] / 2;
    int64_t n = sf_tile_numel(&t), rows = n / t.hi[d];
    float *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
    int32_t *labels = calloc((size_t)rows, sizeof *labels);
    assert_true(x && y && labels);
    size_t ws = sf_kernel_workspace_bytes(op, &t, 1);
    float *wsp = ws ? calloc(1, ws) : NULL;
    const float *in_arr[1] = {x};
    float *out_arr[1] = {y};
    sf_tile r = t;
    double loss = 0;
    sf_kernel_args a = {.op = op,
                        .tile = t,
                        .n_inputs = 1,
                        .in = in_arr,
                        .in_region = &r,
                        .n_outputs = 1,
                        .out = out_arr,
                        .workspace = wsp,
                        .workspace_bytes = ws,
                        .labels = labels,
                        .loss = &loss};
    for (int fast = 0; fast < 2; fast++)
        assert_int_equal(sf_kernel_forward(&a, fast), SF_ERR_INVALID);
    free(x);
    free(y);
    free(labels);
    free(wsp);
}

static void test_kernels_on_split_tiles(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 23);
    for (int i = 0; i < N_CASES; i++) {
        sf_graph *g;
        const sf_op *op = build_case(&cases[i], &g);
        if (op->type == SF_OP_INPUT) {
            /* no kernels on purpose: the runtime loads an input's tiles (op_input.c) */
            assert_int_equal(sf_kernel_available(op->type, 0), 0);
            assert_int_equal(sf_kernel_available(op->type, 1), 0);
            sf_graph_free(g);
            continue;
        }
        assert_int_equal(sf_kernel_available(op->type, 0), 1);
        assert_int_equal(sf_kernel_available(op->type, 1), 1);
        int deg[SF_MAX_DIMS];
        sf_config c;
        /* every splittable dimension alone, each of its parts; then random parts
         * of random multi-dimensional partitions */
        for (int d = 0; d < op->space.ndim; d++) {
            if (op->kinds[d] == SF_DIM_NONE || op->space.d[d] < 2) continue;
            if (d == sf_op_inner_dim(op)) {
                check_inner_refused(op, d);
                continue;
            }
            pick_degrees(op, d, &rng, deg);
            config_of(op, deg, &c);
            for (int p = 0; p < c.n_parts; p++) {
                sf_tile t;
                sf_config_part_tile(op, &c, p, &t);
                for (int fast = 0; fast < 2; fast++)
                    check_tile_kernels(op, &t, fast, 100u * (uint64_t)i + (uint64_t)p,
                                       cases[i].name);
            }
        }
        for (int rep = 0; rep < 6; rep++) {
            pick_degrees(op, -1, &rng, deg);
            config_of(op, deg, &c);
            sf_tile t;
            sf_config_part_tile(op, &c, (int)sf_rng_below(&rng, (uint64_t)c.n_parts), &t);
            for (int fast = 0; fast < 2; fast++)
                check_tile_kernels(op, &t, fast, 7000u + 10u * (uint64_t)i + (uint64_t)rep,
                                   cases[i].name);
        }
        sf_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_has_a_case),
        cmocka_unit_test(test_classes_set_their_callbacks),
        cmocka_unit_test(test_slices_of_partitions),
        cmocka_unit_test(test_shared_weights_same_answers),
        cmocka_unit_test(test_slices_by_hand),
        cmocka_unit_test(test_param_descs_add_up),
        cmocka_unit_test(test_param_descs_are_pytorchs),
        cmocka_unit_test(test_kernels_on_split_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
