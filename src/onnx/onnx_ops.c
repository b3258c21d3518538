/*
 * onnx_ops.c - ONNX nodes that become soapflow operators, and the table of every
 * node type the importer knows.
 *
 * One handler per node type, for a node some input of which is an activation
 * (nodes on constants only are folded: onnx_fold.c). A handler reads its
 * attributes and constant inputs, checks what soapflow's operator cannot do
 * (asymmetric padding, a bidirectional LSTM, a Clip that is not ReLU6) with a
 * message naming the node, adds the operator, copies the weights into its full
 * layout, and sets its outputs' values: an ACT in the view the ONNX value has
 * (onnx_impl.h). Operators that work element by element (activations, dropout)
 * or on the last dimension (linear, layer norm) take any view and keep it, so a
 * sequence-first LSTM output flows into a linear layer without a transpose.
 *
 * What maps where:
 *   Conv (2-D)                  conv2d; pads must be symmetric, auto_pad SAME only when even
 *   Gemm, MatMul by a constant  linear (a following Add of a constant vector is its bias;
 *                               alpha and beta are folded into the weights); without a
 *                               bias and with an embedding's table as its weight, tied
 *                               to that embedding (GPT-2's LM head)
 *   MatMul of two activations   matmul (a transposed last pair of dimensions is transpose_a/b)
 *   ConvTranspose               conv_transpose2d (group 1, dilation 1, symmetric pads)
 *   Resize                      resize (nearest as torch's, bilinear; by sizes or whole scales)
 *   Einsum of two activations   matmul, when it is a batched matrix product ("bhqd,bhkd->bhqk")
 *   Relu, Sigmoid, Tanh         relu, sigmoid, tanh
 *   Clip(0, 6), Clip(0)         relu6, relu (others: unsupported)
 *   LeakyRelu                   leaky_relu
 *   HardSigmoid, HardSwish      hard_sigmoid (alpha, beta), hard_swish; torch's x *
 *                               hardsigmoid(x) stays a mul of the two
 *   MaxPool, AveragePool        pool2d (max, avg); GlobalAveragePool: adaptive avg 1x1;
 *                               GlobalMaxPool: max over the whole plane
 *   BatchNormalization          batchnorm (running statistics are buffers: not imported)
 *   LayerNormalization          layernorm over the last axis
 *   Add, Mul                    add, mul (same rank, broadcasting 1s)
 *   Add, Sub, Mul, Div by a     scale (x * mul + add) for a scalar literal; add_param,
 *   constant                    mul_param for a named initializer (a learned tensor:
 *                               position embeddings, layer scale), its weight;
 *                               add_const, mul_const for another constant tensor or a
 *                               buffer the caller listed (fixed, not learned)
 *   Where (constant mask)       masked_fill: a constant condition, one constant value
 *   Concat, Split, Slice        concat, split (a Slice of one axis, step 1, is a split
 *                               and one of its outputs); a Concat of an activation and a
 *                               named initializer Expanded over the batch (a class token)
 *                               is concat_param, the initializer its weight
 *   ReduceMean                  reduce_mean (not over the batch), or a step of torch's
 *                               layer normalization
 *   Pad (zeros)                 folded into the padding of the Conv or AveragePool that
 *                               reads it where that is exact, else pad
 *   Flatten, Reshape            flatten, reshape (the batch must stay dimension 0);
 *                               Squeeze, Unsqueeze, Transpose change the view only
 *   Gather                      embedding (a constant table indexed by token ids), or a
 *                               split when it picks one position of an activation
 *   Softmax, LogSoftmax         softmax_ce when it is the graph's output
 *   Dropout                     dropout (identity when training_mode is false)
 *   Identity, Cast              nothing: the same tensor
 *   LSTM                        lstm (forward, default activations; torch's gate order)
 *   GRU                         gru (forward, linear_before_reset 1, default activations;
 *                               torch's gate order r, z, n)
 *   torch's MultiheadAttention  attention (onnx_attn.c); so is GPT-2-style attention, whose
 *                               Where (masked_fill) on its scores is taken as its mask
 *   Add of Gather(wpe, arange)  learned positions: a positions input, an embedding, an add
 *   torch's LayerNorm, GELU     layernorm, gelu, from their steps before opset 17 (onnx_norm.c)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        sf_status st_ = (x);                                                                       \
        if (st_ != SF_OK) return st_;                                                              \
    } while (0)

/* Output k of node n is output `out` of operator id, in the identity view. */
static void set_natural(ox_ctx *c, const Onnx__NodeProto *n, int k, int id, int out, int is_index) {
    const sf_shape *s = &sf_graph_op(c->g, id)->out_shapes[out];
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    for (int i = 0; i < s->ndim; i++) {
        d[i] = s->d[i];
        map[i] = (int8_t)i;
    }
    ox_set_act(c, ox_out(c, n, k), (sf_tensor_ref){id, out}, s->ndim, d, map, is_index);
}

/* Output k in the view of value like (same ONNX shape but last dimension last_d,
 * or unchanged when last_d is 0), holding operator id's output. */
static void set_like(ox_ctx *c, const Onnx__NodeProto *n, int k, int id, int like, int64_t last_d) {
    const ox_value *x = &c->vals[like];
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    for (int i = 0; i < x->ndim; i++) {
        d[i] = x->d[i];
        map[i] = x->map[i];
    }
    if (last_d && x->ndim) d[x->ndim - 1] = last_d;
    ox_set_act(c, ox_out(c, n, k), (sf_tensor_ref){id, 0}, x->ndim, d, map, 0);
}

/* Outputs from k on are not modelled: reading them is an error. */
static void set_none_from(ox_ctx *c, const Onnx__NodeProto *n, int k) {
    for (int j = k; j < (int)n->n_output; j++) {
        int v = ox_out(c, n, j);
        if (v > 0) c->vals[v].kind = OX_NONE;
    }
}

static int present(const ox_ctx *c, const Onnx__NodeProto *n, int k) {
    int v = ox_in(c, n, k);
    return v > 0 && c->vals[v].kind != OX_ABSENT;
}

/* Value v (any view) is an identity copy into output 0 of n. */
static sf_status alias(ox_ctx *c, const Onnx__NodeProto *n, int v) {
    TRY(ox_act(c, v));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    const ox_value *x = &c->vals[v];
    ox_set_act(c, o, x->ref, x->ndim, x->d, x->map, x->is_index);
    return SF_OK;
}

/* ---- element-wise activations -------------------------------------------------- */

static sf_status unary(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type,
                       const sf_op_params *p) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    if (c->vals[x].is_index)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an activation of integers (token ids)");
    sf_tensor_ref in = c->vals[x].ref;
    int id = ox_add_op(c, type, p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_like(c, n, 0, id, x, 0);
    return SF_OK;
}

static sf_status simple_unary(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type) {
    sf_op_params p;
    sf_op_params_default(type, &p);
    return unary(c, n, type, &p);
}

static sf_status act_relu(ox_ctx *c, const Onnx__NodeProto *n) {
    return simple_unary(c, n, SF_OP_RELU);
}
static sf_status act_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
    return simple_unary(c, n, SF_OP_SIGMOID);
}
static sf_status act_tanh(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_pat_node(c, n, &st)) return st; /* a step of GELU's tanh form (onnx_norm.c) */
    return simple_unary(c, n, SF_OP_TANH);
}

static sf_status act_leaky_relu(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LEAKY_RELU, &p);
    TRY(ox_attr_float(c, n, "alpha", 0.01, &p.leaky_relu.alpha));
    return unary(c, n, SF_OP_LEAKY_RELU, &p);
}

/* ONNX's defaults (0.2, 0.5), not torch's (1/6, 0.5): torch writes its own. */
static sf_status act_hard_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_op_params p;
    sf_op_params_default(SF_OP_HARD_SIGMOID, &p);
    TRY(ox_attr_float(c, n, "alpha", 0.2, &p.hard_sigmoid.alpha));
    TRY(ox_attr_float(c, n, "beta", 0.5, &p.hard_sigmoid.beta));
    return unary(c, n, SF_OP_HARD_SIGMOID, &p);
}
static sf_status act_hard_swish(ox_ctx *c, const Onnx__NodeProto *n) {
    return simple_unary(c, n, SF_OP_HARD_SWISH);
}

static sf_status act_clip(ox_ctx *c, const Onnx__NodeProto *n) {
    double lo = -INFINITY, hi = INFINITY;
    if (c->opset < 11) {
        TRY(ox_attr_float(c, n, "min", -INFINITY, &lo));
        TRY(ox_attr_float(c, n, "max", INFINITY, &hi));
    } else {
        if (present(c, n, 1)) TRY(ox_const_scalar(c, ox_in(c, n, 1), "the minimum", &lo));
        if (present(c, n, 2)) TRY(ox_const_scalar(c, ox_in(c, n, 2), "the maximum", &hi));
    }
    /* torch writes ReLU6 as Relu then Clip(max 6) at some opsets: on a relu's
     * output (never negative) a minimum of 0 or below clips nothing */
    int x = ox_in(c, n, 0);
    if (lo < 0 && x > 0 && c->vals[x].kind == OX_ACT) {
        sf_op_type pt = sf_graph_op(c->g, c->vals[x].ref.op)->type;
        if (pt == SF_OP_RELU || pt == SF_OP_RELU6) lo = 0;
    }
    if (lo == 0 && hi == 6) return simple_unary(c, n, SF_OP_RELU6);
    if (lo == 0 && isinf(hi) && hi > 0) return simple_unary(c, n, SF_OP_RELU);
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "Clip(min %g, max %g): soapflow has Clip(0, 6) (relu6) and Clip(0) (relu)", lo,
                   hi);
}

static sf_status act_dropout(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st; /* the attention's dropout of its probabilities */
    double ratio;
    TRY(ox_dropout_ratio(c, n, &ratio));
    set_none_from(c, n, 1);
    if (ratio == 0) return alias(c, n, ox_in(c, n, 0));
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = ratio;
    return unary(c, n, SF_OP_DROPOUT, &p);
}

static sf_status act_identity(ox_ctx *c, const Onnx__NodeProto *n) {
    return alias(c, n, ox_in(c, n, 0));
}

static sf_status act_cast(ox_ctx *c, const Onnx__NodeProto *n) {
    int64_t to;
    TRY(ox_attr_int(c, n, "to", 1, &to));
    int x = ox_in(c, n, 0);
    TRY(alias(c, n, x));
    int o = ox_out(c, n, 0);
    /* a cast of token ids to floats (or back) keeps the ids exact: soapflow's
     * ids are floats already */
    if (o > 0) c->vals[o].is_index = c->vals[x].is_index;
    return SF_OK;
}

/* ---- convolution and pooling ------------------------------------------------------ */

/* Symmetric padding (h, w) from ONNX pads [hb, wb, he, we] or auto_pad. */
static sf_status spatial_pads(ox_ctx *c, const Onnx__NodeProto *n, const int64_t *in_hw,
                              const int64_t *k, const int64_t *s, const int64_t *dil,
                              int64_t *pad) {
    char ap[32];
    TRY(ox_attr_str(c, n, "auto_pad", "NOTSET", ap, sizeof ap));
    int64_t pads[4] = {0, 0, 0, 0};
    int np;
    TRY(ox_attr_ints(c, n, "pads", pads, 4, &np));
    if (np >= 0 && np != 4) return ox_fail(c, SF_ERR_PARSE, "pads has %d values, 4 expected", np);
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > SF_MAX_EXTENT)
            return ox_fail(c, SF_ERR_RANGE, "pads value %lld out of [0, 2^31]", (long long)pads[i]);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < 2; i++) {
            int64_t out = (in_hw[i] + s[i] - 1) / s[i];
            int64_t total = (out - 1) * s[i] + (k[i] - 1) * dil[i] + 1 - in_hw[i];
            if (total < 0) total = 0;
            if (total % 2)
                return ox_fail(c, SF_ERR_UNSUPPORTED,
                               "auto_pad %s pads %lld in total on axis %d: uneven, and soapflow "
                               "pads symmetrically",
                               ap, (long long)total, i + 2);
            pad[i] = total / 2;
        }
        return SF_OK;
    }
    if (!strcmp(ap, "VALID")) {
        pad[0] = pad[1] = 0;
        return SF_OK;
    }
    if (strcmp(ap, "NOTSET"))
        return ox_fail(c, SF_ERR_PARSE, "auto_pad '%s' is not an ONNX value", ap);
    for (int i = 0; i < 2; i++) {
        if (pads[i] != pads[i + 2])
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "asymmetric padding (%lld before, %lld after on axis %d); soapflow "
                           "pads both sides alike",
                           (long long)pads[i], (long long)pads[i + 2], i + 2);
        if (pads[i] < 0) return ox_fail(c, SF_ERR_PARSE, "negative padding");
        pad[i] = pads[i];
    }
    return SF_OK;
}

/* Two spatial values of an attribute (default dflt), 2-D only, each in
 * [dflt ? 1 : 0, 2^31] so that the arithmetic on them cannot overflow. */
static sf_status pair_attr(ox_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t dflt,
                           int64_t *out) {
    int64_t v[OX_MAX_RANK];
    int cnt;
    TRY(ox_attr_ints(c, n, name, v, OX_MAX_RANK, &cnt));
    if (cnt < 0) {
        out[0] = out[1] = dflt;
        return SF_OK;
    }
    if (cnt != 2)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s has %d values; soapflow's are 2-D", name, cnt);
    for (int i = 0; i < 2; i++) {
        if (v[i] < 1 || v[i] > SF_MAX_EXTENT)
            return ox_fail(c, SF_ERR_RANGE, "%s value %lld out of [1, 2^31]", name,
                           (long long)v[i]);
        out[i] = v[i];
    }
    return SF_OK;
}

static sf_status input_4d(ox_ctx *c, const Onnx__NodeProto *n, const char *what,
                          sf_tensor_ref *in) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    if (c->vals[x].ndim != 4)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a %s over %d spatial dimension%s; soapflow's is 2-D (N x C x H x W)", what,
                       c->vals[x].ndim - 2, c->vals[x].ndim == 3 ? "" : "s");
    return ox_natural(c, x, in);
}

/* A convolution's operator (conv2d or conv_transpose2d, params p) with its weight W
 * (all of Wv's elements) and the optional bias of input 2, out_ch values; *bias
 * (inside p) says whether there is one. */
static sf_status conv_op(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type, sf_op_params *p,
                         int *bias, sf_tensor_ref in, const float *W, const ox_value *Wv,
                         int64_t out_ch) {
    *bias = present(c, n, 2);
    const float *B = NULL;
    if (*bias) {
        int ok;
        B = ox_weight(c, ox_in(c, n, 2), "bias", &ok);
        if (!ok) return c->err->code;
        if (c->vals[ox_in(c, n, 2)].numel != out_ch)
            return ox_fail(c, SF_ERR_SHAPE, "the bias has %lld values for %lld output channels",
                           (long long)c->vals[ox_in(c, n, 2)].numel, (long long)out_ch);
    }
    int id = ox_add_op(c, type, p, &in, 1, Wv->name);
    if (id < 0) return (sf_status)id;
    TRY(ox_put_param(c, id, "weight", W, Wv->d[0] * Wv->d[1] * Wv->d[2] * Wv->d[3]));
    if (*bias) TRY(ox_put_param(c, id, "bias", B, out_ch));
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status act_conv(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_tensor_ref in;
    TRY(input_4d(c, n, "convolution", &in));
    const ox_value *X = &c->vals[ox_in(c, n, 0)];
    int wv = ox_in(c, n, 1), ok;
    const float *W = ox_weight(c, wv, "weight", &ok);
    if (!ok) return c->err->code;
    const ox_value *Wv = &c->vals[wv];
    if (Wv->ndim != 4)
        return ox_fail(c, SF_ERR_SHAPE, "the weight has rank %d, 4 expected", Wv->ndim);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    int64_t group;
    TRY(ox_attr_int(c, n, "group", 1, &group));
    if (group < 1 || group > SF_MAX_EXTENT)
        return ox_fail(c, SF_ERR_PARSE, "group %lld", (long long)group);
    int64_t ks[2];
    TRY(pair_attr(c, n, "kernel_shape", 0, ks));
    if (ks[0] && (ks[0] != Wv->d[2] || ks[1] != Wv->d[3]))
        return ox_fail(c, SF_ERR_SHAPE, "kernel_shape %lldx%lld but the weight is %lldx%lld",
                       (long long)ks[0], (long long)ks[1], (long long)Wv->d[2],
                       (long long)Wv->d[3]);
    if (group > X->d[1] || Wv->d[1] * group != X->d[1])
        return ox_fail(c, SF_ERR_SHAPE,
                       "the weight takes %lld input channels (%lld per group, %lld groups), the "
                       "input has %lld",
                       (long long)(group > X->d[1] ? -1 : Wv->d[1] * group), (long long)Wv->d[1],
                       (long long)group, (long long)X->d[1]);
    p.conv2d.out_channels = Wv->d[0];
    p.conv2d.kernel[0] = Wv->d[2];
    p.conv2d.kernel[1] = Wv->d[3];
    p.conv2d.groups = group;
    TRY(pair_attr(c, n, "strides", 1, p.conv2d.stride));
    TRY(pair_attr(c, n, "dilations", 1, p.conv2d.dilation));
    TRY(spatial_pads(c, n, X->d + 2, p.conv2d.kernel, p.conv2d.stride, p.conv2d.dilation,
                     p.conv2d.padding));
    p.conv2d.padding[0] += X->pad_fold[0]; /* a zero Pad before it (act_pad) */
    p.conv2d.padding[1] += X->pad_fold[1];
    return conv_op(c, n, SF_OP_CONV2D, &p, &p.conv2d.bias, in, W, Wv, Wv->d[0]);
}

/* ConvTranspose: conv_transpose2d with strides, symmetric pads and output_padding;
 * group 1, dilation 1, no output_shape and auto_pad NOTSET (others refused in one
 * line). The weight (C_in, C_out, kh, kw) is torch's and soapflow's layout. */
static sf_status act_conv_transpose(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_tensor_ref in;
    TRY(input_4d(c, n, "transposed convolution", &in));
    const ox_value *X = &c->vals[ox_in(c, n, 0)];
    int wv = ox_in(c, n, 1), ok;
    const float *W = ox_weight(c, wv, "weight", &ok);
    if (!ok) return c->err->code;
    const ox_value *Wv = &c->vals[wv];
    if (Wv->ndim != 4)
        return ox_fail(c, SF_ERR_SHAPE, "the weight has rank %d, 4 expected", Wv->ndim);
    int64_t group, dil[2], ks[2];
    TRY(ox_attr_int(c, n, "group", 1, &group));
    TRY(pair_attr(c, n, "dilations", 1, dil));
    if (group != 1 || dil[0] != 1 || dil[1] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "ConvTranspose with group %lld and dilations %lldx%lld; soapflow's "
                       "conv_transpose2d has group 1 and dilation 1",
                       (long long)group, (long long)dil[0], (long long)dil[1]);
    if (ox_attr(n, "output_shape"))
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "ConvTranspose with output_shape; soapflow takes pads and output_padding");
    char ap[32];
    TRY(ox_attr_str(c, n, "auto_pad", "NOTSET", ap, sizeof ap));
    if (strcmp(ap, "NOTSET"))
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "ConvTranspose with auto_pad %s; soapflow takes explicit pads", ap);
    TRY(pair_attr(c, n, "kernel_shape", 0, ks));
    if (ks[0] && (ks[0] != Wv->d[2] || ks[1] != Wv->d[3]))
        return ox_fail(c, SF_ERR_SHAPE, "kernel_shape %lldx%lld but the weight is %lldx%lld",
                       (long long)ks[0], (long long)ks[1], (long long)Wv->d[2],
                       (long long)Wv->d[3]);
    if (Wv->d[0] != X->d[1])
        return ox_fail(c, SF_ERR_SHAPE, "the weight takes %lld input channels, the input has %lld",
                       (long long)Wv->d[0], (long long)X->d[1]);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV_TRANSPOSE2D, &p);
    sf_conv_transpose2d_params *q = &p.conv_transpose2d;
    q->out_channels = Wv->d[1];
    q->kernel[0] = Wv->d[2];
    q->kernel[1] = Wv->d[3];
    TRY(pair_attr(c, n, "strides", 1, q->stride));
    int64_t one[2] = {1, 1};
    TRY(spatial_pads(c, n, X->d + 2, q->kernel, q->stride, one, q->padding));
    int64_t op[OX_MAX_RANK];
    int nop;
    TRY(ox_attr_ints(c, n, "output_padding", op, OX_MAX_RANK, &nop));
    if (nop >= 0 && nop != 2)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "output_padding has %d values; soapflow's are 2-D",
                       nop);
    for (int i = 0; nop == 2 && i < 2; i++) {
        if (op[i] < 0 || op[i] > SF_MAX_EXTENT)
            return ox_fail(c, SF_ERR_RANGE, "output_padding value %lld out of [0, 2^31]",
                           (long long)op[i]);
        q->output_padding[i] = op[i];
    }
    return conv_op(c, n, SF_OP_CONV_TRANSPOSE2D, &p, &q->bias, in, W, Wv, Wv->d[1]);
}

/* Resize of an NCHW activation: resize. Nearest with
 * asymmetric coordinates and nearest_mode floor (torch's nn.Upsample 'nearest'),
 * linear with half_pixel, pytorch_half_pixel or align_corners (torch's
 * 'bilinear'); the output by sizes, or by scales whose output size gives the same
 * ratio; N and C kept. Others refused in one line. */
static sf_status act_resize(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_tensor_ref in;
    TRY(input_4d(c, n, "resize", &in));
    const ox_value *X = &c->vals[ox_in(c, n, 0)];
    char mode[32], ctm[32], nm[32];
    TRY(ox_attr_str(c, n, "mode", "nearest", mode, sizeof mode));
    int old = c->opset < 11; /* Resize-10: (X, scales), asymmetric, floor */
    TRY(ox_attr_str(c, n, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel", ctm,
                    sizeof ctm));
    TRY(ox_attr_str(c, n, "nearest_mode", old ? "floor" : "round_prefer_floor", nm, sizeof nm));
    sf_op_params p;
    sf_op_params_default(SF_OP_RESIZE, &p);
    if (!strcmp(mode, "nearest") && !strcmp(ctm, "asymmetric") && !strcmp(nm, "floor")) {
        p.resize.mode = SF_RESIZE_NEAREST;
    } else if (!strcmp(mode, "linear") &&
               (!strcmp(ctm, "half_pixel") || !strcmp(ctm, "pytorch_half_pixel") ||
                !strcmp(ctm, "align_corners"))) {
        p.resize.mode = SF_RESIZE_BILINEAR;
        p.resize.align_corners = !strcmp(ctm, "align_corners");
    } else {
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "Resize mode %s with coordinate_transformation_mode %s and nearest_mode "
                       "%s; soapflow resizes nearest (asymmetric, floor: torch's) and linear "
                       "(half_pixel, pytorch_half_pixel, align_corners)",
                       mode, ctm, nm);
    }
    int ks = old ? 1 : 2, kz = 3; /* the inputs holding scales and sizes */
    int sv = ks < (int)n->n_input && present(c, n, ks) ? ox_in(c, n, ks) : -1;
    int zv = !old && kz < (int)n->n_input && present(c, n, kz) ? ox_in(c, n, kz) : -1;
    if (sv > 0 && ox_const_data(c, sv) != SF_OK) return c->err->code;
    if (sv > 0 && c->vals[sv].kind == OX_CONST && c->vals[sv].numel == 0) sv = -1;
    if (zv > 0) {
        int64_t sz[4];
        int cnt;
        TRY(ox_const_ints(c, zv, "the sizes", sz, 4, &cnt));
        if (cnt != 4 || sz[0] != X->d[0] || sz[1] != X->d[1])
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "Resize sizes must be 4 values keeping N and C; soapflow resizes H and "
                           "W");
        p.resize.size[0] = sz[2];
        p.resize.size[1] = sz[3];
    } else if (sv > 0) {
        const ox_value *S = &c->vals[sv];
        if (S->kind != OX_CONST || S->is_index || S->numel != 4)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "Resize scales must be 4 constant values");
        if (S->f[0] != 1.0f || S->f[1] != 1.0f)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "Resize scales %g, %g of N and C; soapflow resizes H and W", S->f[0],
                           S->f[1]);
        for (int i = 0; i < 2; i++) {
            double want = (double)X->d[2 + i] * (double)S->f[2 + i];
            int64_t o = (int64_t)floor(want);
            if (o < 1 || fabs(want - (double)o) > 1e-6 * want)
                return ox_fail(c, SF_ERR_UNSUPPORTED,
                               "Resize scale %g of an axis of %lld gives %g, not a whole size: "
                               "soapflow resizes to sizes whose ratio is the scale",
                               S->f[2 + i], (long long)X->d[2 + i], want);
            p.resize.size[i] = o;
        }
    } else {
        return ox_fail(c, SF_ERR_PARSE, "Resize without scales or sizes");
    }
    int id = ox_add_op(c, SF_OP_RESIZE, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status pool(ox_ctx *c, const Onnx__NodeProto *n, int mode) {
    sf_tensor_ref in;
    TRY(input_4d(c, n, mode == SF_POOL_MAX ? "max pooling" : "average pooling", &in));
    const ox_value *X = &c->vals[ox_in(c, n, 0)];
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.mode = mode;
    int64_t ks[2], dil[2];
    TRY(pair_attr(c, n, "kernel_shape", 0, ks));
    if (!ks[0]) return ox_fail(c, SF_ERR_PARSE, "kernel_shape is required");
    TRY(pair_attr(c, n, "dilations", 1, dil));
    if (dil[0] != 1 || dil[1] != 1) return ox_fail(c, SF_ERR_UNSUPPORTED, "dilated pooling");
    p.pool2d.kernel[0] = ks[0];
    p.pool2d.kernel[1] = ks[1];
    TRY(pair_attr(c, n, "strides", 1, p.pool2d.stride));
    int64_t ceil_mode = 0, cip = 0, order = 0;
    TRY(ox_attr_int(c, n, "ceil_mode", 0, &ceil_mode));
    p.pool2d.ceil_mode = ceil_mode != 0;
    int64_t pads[4];
    int np;
    TRY(ox_attr_ints(c, n, "pads", pads, 4, &np));
    if (mode == SF_POOL_MAX && !ceil_mode && np == 4 &&
        (pads[0] != pads[2] || pads[1] != pads[3])) {
        /* Before opset 10 MaxPool had no ceil_mode, and torch pads the end for it.
         * Padding never wins a max, so that is ceil mode with the front padding
         * when both give the same output size. */
        int same = 1;
        for (int i = 0; i < 2 && same; i++) {
            int64_t h = X->d[2 + i], k = ks[i], st = p.pool2d.stride[i], pb = pads[i],
                    pe = pads[i + 2];
            if (pe < pb || st < 1) {
                same = 0;
                break;
            }
            int64_t want = (h + pb + pe - k) / st + 1;
            int64_t got = (h + 2 * pb - k + st - 1) / st + 1;
            if ((got - 1) * st >= h + pb) got--;
            same = want == got;
        }
        if (same) {
            p.pool2d.padding[0] = pads[0];
            p.pool2d.padding[1] = pads[1];
            p.pool2d.ceil_mode = 1;
        }
    }
    if (!p.pool2d.ceil_mode || ceil_mode)
        TRY(spatial_pads(c, n, X->d + 2, p.pool2d.kernel, p.pool2d.stride, dil, p.pool2d.padding));
    if (mode == SF_POOL_AVG) {
        TRY(ox_attr_int(c, n, "count_include_pad", 0, &cip));
        p.pool2d.count_include_pad = cip != 0;
        if (X->pad_fold[0] || X->pad_fold[1]) { /* zeros a Pad added count (act_pad) */
            p.pool2d.padding[0] += X->pad_fold[0];
            p.pool2d.padding[1] += X->pad_fold[1];
            p.pool2d.count_include_pad = 1;
        }
    } else {
        TRY(ox_attr_int(c, n, "storage_order", 0, &order));
        if (order) return ox_fail(c, SF_ERR_UNSUPPORTED, "storage_order 1 (column major)");
        set_none_from(c, n, 1); /* the indices */
    }
    int id = ox_add_op(c, SF_OP_POOL2D, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status act_maxpool(ox_ctx *c, const Onnx__NodeProto *n) {
    return pool(c, n, SF_POOL_MAX);
}
static sf_status act_avgpool(ox_ctx *c, const Onnx__NodeProto *n) {
    return pool(c, n, SF_POOL_AVG);
}

static sf_status global_pool(ox_ctx *c, const Onnx__NodeProto *n, int max) {
    sf_tensor_ref in;
    TRY(input_4d(c, n, max ? "global max pooling" : "global average pooling", &in));
    const ox_value *X = &c->vals[ox_in(c, n, 0)];
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    if (max) { /* one window over the whole plane */
        p.pool2d.mode = SF_POOL_MAX;
        p.pool2d.kernel[0] = p.pool2d.stride[0] = X->d[2];
        p.pool2d.kernel[1] = p.pool2d.stride[1] = X->d[3];
    } else {
        p.pool2d.mode = SF_POOL_ADAPTIVE_AVG;
        p.pool2d.output_size[0] = p.pool2d.output_size[1] = 1;
    }
    int id = ox_add_op(c, SF_OP_POOL2D, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status act_gap(ox_ctx *c, const Onnx__NodeProto *n) { return global_pool(c, n, 0); }
static sf_status act_gmp(ox_ctx *c, const Onnx__NodeProto *n) { return global_pool(c, n, 1); }

/* ---- normalization ------------------------------------------------------------------- */

/* A weight input k of n with exactly count elements, or an error naming what. */
static sf_status vec_weight(ox_ctx *c, const Onnx__NodeProto *n, int k, const char *what,
                            int64_t count, const float **out) {
    int ok;
    *out = ox_weight(c, ox_in(c, n, k), what, &ok);
    if (!ok) return c->err->code;
    const ox_value *v = &c->vals[ox_in(c, n, k)];
    int64_t numel = 1;
    for (int i = 0; i < v->ndim; i++) numel *= v->d[i];
    if (numel != count)
        return ox_fail(c, SF_ERR_SHAPE, "the %s has %lld values, %lld expected", what,
                       (long long)numel, (long long)count);
    return SF_OK;
}

static sf_status act_batchnorm(ox_ctx *c, const Onnx__NodeProto *n) {
    int x = ox_in(c, n, 0);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    const ox_value *X = &c->vals[x];
    if (X->ndim < 2 || X->ndim > 5)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "batch normalization of rank %d (2 to 5)", X->ndim);
    int64_t ch = X->d[1];
    const float *scale, *bias, *unused;
    TRY(vec_weight(c, n, 1, "scale", ch, &scale));
    TRY(vec_weight(c, n, 2, "bias", ch, &bias));
    TRY(vec_weight(c, n, 3, "running mean", ch, &unused));
    TRY(vec_weight(c, n, 4, "running variance", ch, &unused));
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    TRY(ox_attr_float(c, n, "epsilon", 1e-5, &p.norm.eps));
    p.norm.affine = 1;
    int id = ox_add_op(c, SF_OP_BATCHNORM, &p, &in, 1, c->vals[ox_in(c, n, 1)].name);
    if (id < 0) return (sf_status)id;
    TRY(ox_put_param(c, id, "weight", scale, ch));
    TRY(ox_put_param(c, id, "bias", bias, ch));
    set_natural(c, n, 0, id, 0, 0);
    set_none_from(c, n, 1); /* running mean and variance, saved statistics */
    return SF_OK;
}

static sf_status act_layernorm(ox_ctx *c, const Onnx__NodeProto *n) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axis;
    TRY(ox_attr_int(c, n, "axis", -1, &axis));
    if (axis < 0) axis += X->ndim;
    if (axis != X->ndim - 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "layer normalization over axes %lld.. of %d; soapflow normalizes the last",
                       (long long)axis, X->ndim);
    const sf_shape *xs = &sf_graph_op(c->g, X->ref.op)->out_shapes[X->ref.out];
    sf_tensor_ref in = X->ref;
    if (X->map[X->ndim - 1] != xs->ndim - 1) TRY(ox_natural(c, x, &in));
    X = &c->vals[x];
    int64_t d = X->d[X->ndim - 1];
    const float *scale, *bias = NULL;
    TRY(vec_weight(c, n, 1, "scale", d, &scale));
    int has_b = present(c, n, 2);
    if (has_b) TRY(vec_weight(c, n, 2, "bias", d, &bias));
    sf_op_params p;
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    TRY(ox_attr_float(c, n, "epsilon", 1e-5, &p.norm.eps));
    p.norm.affine = 1;
    int id = ox_add_op(c, SF_OP_LAYERNORM, &p, &in, 1, c->vals[ox_in(c, n, 1)].name);
    if (id < 0) return (sf_status)id;
    TRY(ox_put_param(c, id, "weight", scale, d));
    if (has_b)
        TRY(ox_put_param(c, id, "bias", bias, d));
    else
        TRY(ox_fill_param(c, id, "bias", 0.0f)); /* ONNX's default: no shift */
    /* the operator keeps its input's view, or the order it was given */
    if (in.op == c->vals[x].ref.op && in.out == c->vals[x].ref.out)
        set_like(c, n, 0, id, x, 0);
    else
        set_natural(c, n, 0, id, 0, 0);
    set_none_from(c, n, 1);
    return SF_OK;
}

/* ---- linear layers and products ---------------------------------------------------- */

/* The embedding whose table holds the values of W, a linear layer's weight as
 * the MatMul reads it, (k, n), or, transposed (Gemm's transB), (n, k); -1 when
 * none does. That is how a tied LM head (F.linear(x, wte.weight), GPT-2's)
 * reaches an ONNX file: torch writes the head's MatMul on Transpose(wte), or
 * on a transposed copy of wte once constant folding (its default) has run, so
 * the tie is the same values, which a head trained apart from the embedding
 * does not have. The values are compared whether or not the caller wants the
 * weights (the data of both is read for it), so that an import counts the
 * same parameters either way; a file without its weights has no tie. *emb
 * gets the embedding's id, or -1. */
static sf_status tied_embedding(ox_ctx *c, int wv, int64_t n, int64_t k, int transposed, int *emb) {
    *emb = -1;
    for (int i = 0; i < c->n_emb; i++) {
        const sf_op *op = sf_graph_op(c->g, c->emb[i][0]);
        if (op->params.embedding.num_embeddings != n || op->params.embedding.embedding_dim != k)
            continue;
        TRY(ox_const_data(c, wv));
        TRY(ox_const_data(c, c->emb[i][1]));
        const float *w = c->vals[wv].f, *t = c->vals[c->emb[i][1]].f;
        if (!w || !t || c->vals[wv].kind != OX_CONST || c->vals[c->emb[i][1]].kind != OX_CONST)
            continue;
        int64_t q = 0;
        if (transposed) /* w (n, k) as the table */
            while (q < n * k && t[q] == w[q]) q++;
        else /* w (k, n): table row j is column j of w */
            while (q < n * k && t[q] == w[(q % k) * n + q / k]) q++;
        if (q == n * k) {
            *emb = c->emb[i][0];
            return SF_OK;
        }
    }
    return SF_OK;
}

/* Tie linear `id` (no bias) to embedding `emb`: it shares the table and owns
 * no weights of its own. */
static sf_status tie_linear(ox_ctx *c, int id, int emb) {
    sf_error local = {0};
    if (sf_graph_share_weights(c->g, id, emb, &local) != SF_OK)
        return ox_fail(c, local.code, "%s", local.msg);
    return SF_OK;
}

static sf_status act_gemm(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int64_t ta, tb;
    double alpha, beta;
    TRY(ox_attr_int(c, n, "transA", 0, &ta));
    TRY(ox_attr_int(c, n, "transB", 0, &tb));
    TRY(ox_attr_float(c, n, "alpha", 1.0, &alpha));
    TRY(ox_attr_float(c, n, "beta", 1.0, &beta));
    if (ta) return ox_fail(c, SF_ERR_UNSUPPORTED, "transA: a transposed activation");
    int a = ox_in(c, n, 0);
    sf_tensor_ref in;
    TRY(ox_natural(c, a, &in));
    const ox_value *A = &c->vals[a];
    if (A->ndim != 2) return ox_fail(c, SF_ERR_SHAPE, "input A has rank %d, 2 expected", A->ndim);
    int bv = ox_in(c, n, 1), ok;
    const float *B = ox_weight(c, bv, "weight (B)", &ok);
    if (!ok) return c->err->code;
    const ox_value *Bv = &c->vals[bv];
    if (Bv->ndim != 2) return ox_fail(c, SF_ERR_SHAPE, "B has rank %d, 2 expected", Bv->ndim);
    int64_t k = tb ? Bv->d[1] : Bv->d[0], nout = tb ? Bv->d[0] : Bv->d[1];
    if (k != A->d[1])
        return ox_fail(c, SF_ERR_SHAPE, "A has %lld columns but B%s has %lld rows",
                       (long long)A->d[1], tb ? " transposed" : "", (long long)k);
    const float *C = NULL;
    int has_c = present(c, n, 2);
    int64_t c_numel = 0;
    if (has_c) {
        C = ox_weight(c, ox_in(c, n, 2), "bias (C)", &ok);
        if (!ok) return c->err->code;
        const ox_value *Cv = &c->vals[ox_in(c, n, 2)];
        c_numel = 1;
        for (int i = 0; i < Cv->ndim; i++) c_numel *= Cv->d[i];
        int row = Cv->ndim == 1 || (Cv->ndim == 2 && Cv->d[0] == 1);
        if (!(c_numel == 1 || (row && c_numel == nout)))
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "C of %lld values: soapflow's bias is one value per output (%lld)",
                           (long long)c_numel, (long long)nout);
    }
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = nout;
    p.linear.bias = has_c && beta != 0;
    int id = ox_add_op(c, SF_OP_LINEAR, &p, &in, 1, Bv->name);
    if (id < 0) return (sf_status)id;
    int emb = -1;
    if (!p.linear.bias && alpha == 1.0) TRY(tied_embedding(c, bv, nout, k, tb != 0, &emb));
    float *w = NULL, *b = NULL;
    if (c->want_weights && B) {
        w = malloc((size_t)(k * nout) * sizeof *w);
        if (!w) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
        for (int64_t j = 0; j < nout; j++)
            for (int64_t i = 0; i < k; i++)
                w[j * k + i] = (float)(alpha * (tb ? B[j * k + i] : B[i * nout + j]));
    }
    st = emb >= 0 ? tie_linear(c, id, emb) : ox_put_param(c, id, "weight", B ? w : NULL, k * nout);
    free(w);
    TRY(st);
    if (p.linear.bias) {
        if (c->want_weights && C) {
            b = malloc((size_t)nout * sizeof *b);
            if (!b) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
            for (int64_t j = 0; j < nout; j++) b[j] = (float)(beta * C[c_numel == 1 ? 0 : j]);
        }
        st = ox_put_param(c, id, "bias", C ? b : NULL, nout);
        free(b);
        TRY(st);
    }
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* For a two-activation product: the tensor and whether it is read transposed. */
static sf_status matmul_operand(ox_ctx *c, int v, sf_tensor_ref *ref, int *trans) {
    TRY(ox_act(c, v));
    const ox_value *x = &c->vals[v];
    const sf_shape *s = &sf_graph_op(c->g, x->ref.op)->out_shapes[x->ref.out];
    *trans = 0;
    int r = x->ndim;
    if (r >= 2 && s->ndim == r) {
        int swapped = x->map[r - 1] == r - 2 && x->map[r - 2] == r - 1;
        for (int k = 0; swapped && k < r - 2; k++) swapped = x->map[k] == k;
        if (swapped && r - 2 >= 1) { /* keep the batch in dimension 0 */
            *ref = x->ref;
            *trans = 1;
            return SF_OK;
        }
    }
    return ox_natural(c, v, ref);
}

static sf_status act_matmul(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int a = ox_in(c, n, 0), b = ox_in(c, n, 1);
    ox_value *B = &c->vals[b];
    if (B->kind == OX_CONST || B->kind == OX_WEIGHT) {
        if (B->ndim != 2)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "a product with a constant of rank %d (a linear layer's is 2)", B->ndim);
        if (B->kind == OX_CONST && B->is_index)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "a product with integers");
        ox_value *A = &c->vals[a];
        if (A->kind == OX_PEND && A->pend == OX_PEND_ATTN) return ox_attn_refuse(c, a);
        if (A->kind == OX_CONST || A->kind == OX_WEIGHT)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "a product of two constants on activations");
        if (A->ndim < 1 || A->d[A->ndim - 1] != B->d[0])
            return ox_fail(c, SF_ERR_SHAPE, "A's last dimension is %lld, B has %lld rows",
                           (long long)(A->ndim ? A->d[A->ndim - 1] : 0), (long long)B->d[0]);
        if (c->n_lin == c->cap_lin) {
            int cap = c->cap_lin ? c->cap_lin * 2 : 16;
            ox_linear *nl = realloc(c->lin, (size_t)cap * sizeof *nl);
            if (!nl) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
            c->lin = nl;
            c->cap_lin = cap;
        }
        int r = c->n_lin++;
        c->lin[r] = (ox_linear){a, b, -1, c->cur_node, -1, B->d[0], B->d[1]};
        int o = ox_out(c, n, 0);
        if (o < 0) return SF_OK;
        ox_value *O = &c->vals[o];
        O->kind = OX_PEND;
        O->pend = OX_PEND_LINEAR;
        O->rec = r;
        O->ndim = A->ndim;
        for (int k = 0; k < A->ndim; k++) O->d[k] = A->d[k];
        O->d[A->ndim - 1] = B->d[1];
        return SF_OK;
    }
    if (c->vals[a].kind == OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a constant times an activation (B x A is not a "
                       "linear layer of soapflow's)");
    sf_tensor_ref in[2];
    int ta, tb;
    TRY(matmul_operand(c, a, &in[0], &ta));
    TRY(matmul_operand(c, b, &in[1], &tb));
    if (c->vals[a].ndim != c->vals[b].ndim)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a product of ranks %d and %d; soapflow's operands have equal ranks",
                       c->vals[a].ndim, c->vals[b].ndim);
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    p.matmul.transpose_a = ta;
    p.matmul.transpose_b = tb;
    int id = ox_add_op(c, SF_OP_MATMUL, &p, in, 2, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* The indices of one Einsum term (letters, each once) into t; its length, or -1. */
static int einsum_term(const char *s, size_t len, char *t) {
    if (len > SF_MAX_DIMS) return -1;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return -1;
        if (memchr(s, ch, i)) return -1;
        t[i] = ch;
    }
    return (int)len;
}

/* Einsum of two activations that is a batched matrix product: matmul, with
 * the operands' transposes folded into transpose_a/b. Taken: the same batch
 * indices leading all three terms in the same order, then A's two in either
 * order, B's two in either order, sharing one contracted index, and the output
 * (m, n); "bhqd,bhkd->bhqk" (B^T), "bij,bjk->bik". Anything else is refused in
 * one line naming the equation. */
static sf_status act_einsum(ox_ctx *c, const Onnx__NodeProto *n) {
    char eq[128], sp[128];
    TRY(ox_attr_str(c, n, "equation", "", eq, sizeof eq));
    size_t len = 0;
    for (const char *q = eq; *q && len + 1 < sizeof sp; q++)
        if (*q != ' ') sp[len++] = *q;
    sp[len] = 0;
    const char *comma = strchr(sp, ','), *arrow = strstr(sp, "->");
    char ta_[SF_MAX_DIMS], tb_[SF_MAX_DIMS], to[SF_MAX_DIMS];
    int ra = -1, rb = -1, ro = -1;
    if (n->n_input == 2 && comma && arrow && comma < arrow && !strchr(comma + 1, ',')) {
        ra = einsum_term(sp, (size_t)(comma - sp), ta_);
        rb = einsum_term(comma + 1, (size_t)(arrow - comma - 1), tb_);
        ro = einsum_term(arrow + 2, strlen(arrow + 2), to);
    }
    int a = ox_in(c, n, 0), b = n->n_input == 2 ? ox_in(c, n, 1) : -1;
    int ok = ra >= 2 && ra == rb && ra == ro && a > 0 && b > 0 && c->vals[a].ndim == ra &&
             c->vals[b].ndim == ra;
    int r = ra, trans_a = 0, trans_b = 0;
    for (int i = 0; ok && i < r - 2; i++) ok = ta_[i] == to[i] && tb_[i] == to[i];
    if (ok) {
        char m = to[r - 2], nn = to[r - 1];
        /* A holds m and the contracted k, B holds k and n */
        char ka = ta_[r - 2] == m ? ta_[r - 1] : ta_[r - 1] == m ? ta_[r - 2] : 0;
        char kb = tb_[r - 1] == nn ? tb_[r - 2] : tb_[r - 2] == nn ? tb_[r - 1] : 0;
        ok = m != nn && ka && ka == kb && ka != m && ka != nn;
        trans_a = ta_[r - 2] == ka;
        trans_b = tb_[r - 2] == nn;
    }
    if (!ok)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "Einsum '%s' is not a batched matrix product of two operands (soapflow maps "
                       "'...mk,...kn->...mn' with the same leading batch indices, either operand "
                       "transposed, to matmul)",
                       eq);
    for (int k = 0; k < 2; k++) {
        int v = k ? b : a;
        if (c->vals[v].kind == OX_CONST || c->vals[v].kind == OX_WEIGHT)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "Einsum '%s' of a constant: soapflow's matmul multiplies two "
                           "activations",
                           eq);
        if (c->vals[v].kind == OX_PEND && c->vals[v].pend == OX_PEND_ATTN)
            return ox_attn_refuse(c, v);
    }
    sf_tensor_ref in[2];
    int va, vb;
    TRY(matmul_operand(c, a, &in[0], &va));
    TRY(matmul_operand(c, b, &in[1], &vb));
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    p.matmul.transpose_a = trans_a ^ va;
    p.matmul.transpose_b = trans_b ^ vb;
    int id = ox_add_op(c, SF_OP_MATMUL, &p, in, 2, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* ---- element-wise binary ------------------------------------------------------------ */

/* Add of a pending linear layer (not yet biased, read only here) and a constant
 * vector of its width: the layer's bias. Returns 1 when fused. */
static int fuse_bias(ox_ctx *c, const Onnx__NodeProto *n, int lv, int bv) {
    ox_value *L = &c->vals[lv], *B = &c->vals[bv];
    if (L->kind != OX_PEND || L->pend != OX_PEND_LINEAR || L->uses != 1) return 0;
    if (B->kind != OX_CONST || B->is_index) return 0;
    ox_linear *rec = &c->lin[L->rec];
    if (rec->b >= 0 || B->numel != rec->n || B->ndim > L->ndim) return 0;
    for (int k = 0; k + 1 < B->ndim; k++)
        if (B->d[k] != 1) return 0;
    rec->b = bv;
    int o = ox_out(c, n, 0);
    if (o < 0) return 1;
    ox_value *O = &c->vals[o];
    O->kind = OX_PEND;
    O->pend = OX_PEND_LINEAR;
    O->rec = L->rec;
    O->ndim = L->ndim;
    for (int k = 0; k < L->ndim; k++) O->d[k] = L->d[k];
    return 1;
}

/* A pending linear layer made an operator (value v becomes its output): how
 * ox_act completes an OX_PEND_LINEAR value (onnx_ctx.h). */
sf_status ox_linear_force(ox_ctx *c, int v) {
    ox_linear *L = &c->lin[c->vals[v].rec];
    int saved = c->cur_node;
    c->cur_node = L->node;
    sf_status st = ox_act(c, L->x);
    if (st != SF_OK) return st;
    ox_value *x = &c->vals[L->x];
    const sf_shape *xs = ox_shape_of(c, x->ref);
    sf_tensor_ref in = x->ref;
    int8_t map[OX_MAX_RANK];
    int ndim = x->ndim;
    memcpy(map, x->map, sizeof map);
    /* a linear layer works on the last dimension: any view whose last dimension
     * is the tensor's last one will do; otherwise the input in order */
    if (x->ndim < 1 || x->map[x->ndim - 1] != xs->ndim - 1) {
        if ((st = ox_natural(c, L->x, &in)) != SF_OK) return st;
        for (int k = 0; k < ndim; k++) map[k] = (int8_t)k;
    }
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = L->n;
    p.linear.bias = L->b >= 0;
    int id = ox_add_op(c, SF_OP_LINEAR, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    int emb = -1;
    if (L->b < 0 && (st = tied_embedding(c, L->w, L->n, L->k, 0, &emb)) != SF_OK) return st;
    const ox_value *W = &c->vals[L->w];
    /* torch's weight (N, K) is the MatMul's (K, N) transposed */
    if (c->want_weights && W->f) {
        float *wt = malloc((size_t)(L->k * L->n) * sizeof *wt);
        if (!wt) return ox_oom(c);
        for (int64_t i = 0; i < L->k; i++)
            for (int64_t j = 0; j < L->n; j++) wt[j * L->k + i] = W->f[i * L->n + j];
        st = emb >= 0 ? tie_linear(c, id, emb) : ox_put_param(c, id, "weight", wt, L->k * L->n);
        free(wt);
    } else {
        st = emb >= 0 ? tie_linear(c, id, emb) : ox_put_param(c, id, "weight", W->f, L->k * L->n);
    }
    if (st == SF_OK && L->b >= 0) st = ox_put_param(c, id, "bias", c->vals[L->b].f, L->n);
    if (st != SF_OK) return st;
    int64_t d[OX_MAX_RANK];
    memcpy(d, c->vals[v].d, sizeof d);
    ox_set_act(c, v, (sf_tensor_ref){id, 0}, ndim, d, map, 0);
    c->cur_node = saved;
    return SF_OK;
}

/* Learned positions as GPT-2 and nanoGPT write them: x (N, T, D) plus
 * Gather(wpe, arange(T)) of a table initializer (P, D), which folds to a constant
 * (T, D) (or (1, T, D)). Made what the zoo's gpt has: an embedding of wpe reading
 * an index input `positions` (N, T), which the data must hold as 0 .. T-1, and
 * an add. Returns 1 when taken. */
static int positions_add(ox_ctx *c, const Onnx__NodeProto *n, int a, int b, sf_status *st) {
    const ox_value *B = &c->vals[b];
    if (B->kind != OX_CONST || B->is_index || B->producer < 0) return 0;
    if (c->vals[a].kind == OX_CONST || c->vals[a].kind == OX_WEIGHT) return 0;
    const Onnx__NodeProto *g = c->graph->node[B->producer];
    if (!g->op_type || strcmp(g->op_type, "Gather") || g->n_input != 2) return 0;
    int tv = ox_in(c, g, 0), iv = ox_in(c, g, 1);
    const ox_value *Tb = &c->vals[tv], *I = &c->vals[iv];
    if (Tb->kind != OX_CONST || !Tb->from_initializer || Tb->is_index || Tb->ndim != 2) return 0;
    const Onnx__AttributeProto *ax = ox_attr(g, "axis");
    if (ax && ax->i != 0) return 0;
    if ((*st = ox_act(c, a)) != SF_OK) return 1;
    const ox_value *A = &c->vals[a];
    B = &c->vals[b];
    Tb = &c->vals[tv];
    I = &c->vals[iv];
    if (A->kind != OX_ACT || A->is_index || A->ndim != 3) return 0;
    int64_t t = A->d[1], dm = A->d[2];
    if (I->kind != OX_CONST || !I->is_index || I->numel != t || Tb->d[1] != dm || Tb->d[0] < t)
        return 0;
    for (int64_t k = 0; k < t; k++)
        if (I->i[k] != k) return 0;
    if (!(B->ndim == 2 || (B->ndim == 3 && B->d[0] == 1)) || B->d[B->ndim - 2] != t ||
        B->d[B->ndim - 1] != dm)
        return 0;
    sf_tensor_ref in[2];
    if ((*st = ox_natural(c, a, &in[0])) != SF_OK) return 1;
    const sf_shape *xs = ox_shape_of(c, in[0]);
    if (xs->ndim != 3) return 0;
    /* the positions input (N, T) and the embedding of the table */
    sf_op_params p;
    sf_op_params_default(SF_OP_INPUT, &p);
    int64_t pd[2] = {xs->d[0], t};
    p.input.shape = sf_shape_make(2, pd);
    p.input.is_index = 1;
    char name[300];
    ox_unique_name(c, "positions", name, sizeof name);
    int saved = c->cur_node;
    c->cur_node = B->producer;
    int pid = ox_add_named(c, SF_OP_INPUT, name, &p, NULL, 0);
    if (pid < 0) {
        c->cur_node = saved;
        *st = (sf_status)pid;
        return 1;
    }
    sf_op_params e;
    sf_op_params_default(SF_OP_EMBEDDING, &e);
    e.embedding.num_embeddings = Tb->d[0];
    e.embedding.embedding_dim = dm;
    sf_tensor_ref pin = {pid, 0};
    int eid = ox_add_op(c, SF_OP_EMBEDDING, &e, &pin, 1, Tb->name);
    c->cur_node = saved;
    if (eid < 0) {
        *st = (sf_status)eid;
        return 1;
    }
    if ((*st = ox_const_data(c, tv)) != SF_OK) return 1;
    if ((*st = ox_put_param(c, eid, "weight", c->vals[tv].f, Tb->d[0] * dm)) != SF_OK) return 1;
    in[1] = (sf_tensor_ref){eid, 0};
    sf_op_params ap;
    sf_op_params_default(SF_OP_ADD, &ap);
    int id = ox_add_op(c, SF_OP_ADD, &ap, in, 2, NULL);
    if (id < 0) {
        *st = (sf_status)id;
        return 1;
    }
    set_natural(c, n, 0, id, 0, 0);
    *st = SF_OK;
    return 1;
}

/* A learned tensor: an initializer named as a module's state (torch writes
 * parameters by their state_dict names, "pos_embedding", "encoder.gamma";
 * constants it folds are "onnx::Mul_42", and literals are Constant nodes).
 * torch writes a buffer (register_buffer) the same way as a parameter, so a
 * named buffer is taken for a parameter too (docs/formats-onnx.md). */
static int named_param(const ox_ctx *c, int v) {
    const ox_value *k = &c->vals[v];
    return k->kind == OX_CONST && k->from_initializer && !k->is_index && k->name &&
           strncmp(k->name, "onnx::", 6) != 0 && !ox_is_buffer(c, k->name);
}

/* An activation x and a constant tensor k of an element-wise node: k fits
 * x's view as ONNX broadcasts it (its rank at most x's, each size 1 or x's). */
static sf_status const_fits(ox_ctx *c, int k, int x, const char *what) {
    const ox_value *K = &c->vals[k], *X = &c->vals[x];
    if (K->ndim > X->ndim)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "the %s '%.100s' has rank %d, the activation %d: soapflow broadcasts "
                       "a constant over an activation, not the activation over it",
                       what, K->name, K->ndim, X->ndim);
    for (int j = 0; j < K->ndim; j++) {
        int64_t kd = K->d[j], xd = X->d[j + X->ndim - K->ndim];
        if (kd != 1 && kd != xd)
            return ox_fail(c, SF_ERR_SHAPE, "the %s '%.100s' is %lld along axis %d, the "
                           "activation %lld", what, K->name, (long long)kd,
                           j + X->ndim - K->ndim, (long long)xd);
    }
    return SF_OK;
}

/* x + k, x - k, x * k with k a constant tensor that is not learned (a
 * registered buffer the caller listed, or a constant folded from one): an
 * add_const or mul_const holding k (x - k as x + (-k), which is exact). k - x
 * and x / k are refused: neither is one such operator exactly. */
static sf_status fixed_operand(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type, int k, int x,
                               int kfirst) {
    int sub = !strcmp(n->op_type, "Sub"), div = !strcmp(n->op_type, "Div");
    const ox_value *K = &c->vals[k], *X = &c->vals[x];
    if (div)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a division by the constant tensor '%.100s': soapflow multiplies by a "
                       "fixed tensor, and x * (1 / c) is not x / c in float",
                       K->name);
    if (sub && kfirst)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "the constant tensor '%.100s' less an activation: soapflow adds a fixed "
                       "tensor to an activation, not the activation's negation",
                       K->name);
    if (K->ndim == X->ndim && K->d[0] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "the constant tensor '%.100s' varies along the batch (%lld on axis 0)",
                       K->name, (long long)K->d[0]);
    if (X->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an activation of rank %d", X->ndim);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    K = &c->vals[k];
    sf_op_type ct = type == SF_OP_ADD ? SF_OP_ADD_CONST : SF_OP_MUL_CONST;
    sf_op_params p;
    sf_op_params_default(ct, &p);
    p.param.ndim = K->ndim;
    for (int j = 0; j < K->ndim; j++) p.param.shape[j] = K->d[j];
    float *v = malloc((size_t)(K->numel ? K->numel : 1) * sizeof *v);
    if (!v) return ox_oom(c);
    for (int64_t e = 0; e < K->numel; e++) v[e] = sub ? -K->f[e] : K->f[e];
    int id;
    if (K->from_initializer && K->name && strncmp(K->name, "onnx::", 6) != 0) {
        char name[300]; /* named after the buffer */
        ox_unique_name(c, K->name, name, sizeof name);
        id = ox_add_fixed(c, ct, name, &p, &in, 1, v, K->numel);
    } else {
        id = ox_add_op_fixed(c, ct, &p, &in, 1, v, K->numel);
    }
    free(v);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* An element-wise Add, Sub, Mul or Div (type SF_OP_ADD or SF_OP_MUL, the
 * division and difference said by the node) of an activation and a constant:
 * a scalar that is not a parameter is a scale operator (x * mul + add); a
 * named initializer is the weight of an add_param or mul_param, broadcast
 * over the activation as ONNX broadcasts; anything else is refused. */
static sf_status const_operand(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type, int a, int b) {
    int kfirst = c->vals[a].kind == OX_CONST, k = kfirst ? a : b, x = kfirst ? b : a;
    int sub = !strcmp(n->op_type, "Sub"), div = !strcmp(n->op_type, "Div");
    if (c->vals[x].kind == OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s of two constants on activations", n->op_type);
    /* a learned tensor Expanded first (pos_embedding.expand(N, -1, -1) + x): the
     * tensor itself, which broadcasts the same way */
    if (!named_param(c, k) && c->vals[k].expanded_from > 0 &&
        named_param(c, c->vals[k].expanded_from))
        k = c->vals[k].expanded_from;
    TRY(ox_const_data(c, k));
    TRY(ox_act(c, x));
    const ox_value *K = &c->vals[k], *X = &c->vals[x];
    if (K->is_index || X->is_index)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s of integers (token ids)", n->op_type);
    TRY(const_fits(c, k, x, "constant"));
    if (K->numel == 1 && !named_param(c, k)) {
        double v = K->f ? (double)K->f[0] : 0;
        sf_op_params p;
        sf_op_params_default(SF_OP_SCALE, &p);
        if (div && kfirst)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "a constant divided by an activation: soapflow has no reciprocal");
        if (div && v == 0) return ox_fail(c, SF_ERR_INVALID, "a division by the constant 0");
        if (type == SF_OP_MUL)
            p.scale.mul = div ? 1.0 / v : v;
        else if (sub && kfirst)
            p.scale.mul = -1, p.scale.add = v;
        else
            p.scale.add = sub ? -v : v;
        sf_tensor_ref in = X->ref;
        int id = ox_add_op(c, SF_OP_SCALE, &p, &in, 1, NULL);
        if (id < 0) return (sf_status)id;
        set_like(c, n, 0, id, x, 0);
        return SF_OK;
    }
    if (!named_param(c, k)) return fixed_operand(c, n, type, k, x, kfirst);
    if (sub || div)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "%s by the parameter '%.100s': soapflow adds and multiplies by a learned "
                       "tensor",
                       n->op_type, K->name);
    if (K->ndim == X->ndim && K->d[0] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "the parameter '%.100s' varies along the batch (%lld on axis 0)", K->name,
                       (long long)K->d[0]);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    K = &c->vals[k];
    X = &c->vals[x];
    if (X->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an activation of rank %d", X->ndim);
    sf_op_type pt = type == SF_OP_ADD ? SF_OP_ADD_PARAM : SF_OP_MUL_PARAM;
    sf_op_params p;
    sf_op_params_default(pt, &p);
    p.param.ndim = K->ndim;
    for (int j = 0; j < K->ndim; j++) p.param.shape[j] = K->d[j];
    char name[300]; /* named after the parameter: its checkpoint tensor is <name>.weight */
    ox_unique_name(c, K->name, name, sizeof name);
    int id = ox_add_named(c, pt, name, &p, &in, 1);
    if (id < 0) return (sf_status)id;
    TRY(ox_put_param(c, id, "weight", c->vals[k].f, c->vals[k].numel));
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status binary(ox_ctx *c, const Onnx__NodeProto *n, sf_op_type type) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int a = ox_in(c, n, 0), b = ox_in(c, n, 1);
    if (type == SF_OP_ADD && (fuse_bias(c, n, a, b) || fuse_bias(c, n, b, a))) return SF_OK;
    if (type == SF_OP_ADD && (positions_add(c, n, a, b, &st) || positions_add(c, n, b, a, &st)))
        return st;
    if (ox_pat_node(c, n, &st)) return st;
    ox_kind ka = c->vals[a].kind, kb = c->vals[b].kind;
    if (ka == OX_CONST || kb == OX_CONST) return const_operand(c, n, type, a, b);
    TRY(ox_act(c, a));
    TRY(ox_act(c, b));
    const ox_value *A = &c->vals[a], *B = &c->vals[b];
    if (A->ndim != B->ndim)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "operands of ranks %d and %d; soapflow broadcasts only between equal ranks",
                       A->ndim, B->ndim);
    int64_t d[OX_MAX_RANK];
    for (int k = 0; k < A->ndim; k++) {
        if (A->d[k] != B->d[k] && A->d[k] != 1 && B->d[k] != 1)
            return ox_fail(c, SF_ERR_SHAPE, "dimension %d: %lld and %lld do not broadcast", k,
                           (long long)A->d[k], (long long)B->d[k]);
        d[k] = A->d[k] > B->d[k] ? A->d[k] : B->d[k];
    }
    sf_tensor_ref in[2] = {A->ref, B->ref};
    int8_t map[OX_MAX_RANK];
    int same = 1;
    for (int k = 0; k < A->ndim; k++) same = same && A->map[k] == B->map[k] && A->map[k] >= 0;
    const sf_shape *sa = &sf_graph_op(c->g, A->ref.op)->out_shapes[A->ref.out];
    const sf_shape *sb = &sf_graph_op(c->g, B->ref.op)->out_shapes[B->ref.out];
    same = same && sa->ndim == A->ndim && sb->ndim == B->ndim;
    if (same) {
        for (int k = 0; k < A->ndim; k++) map[k] = A->map[k];
    } else {
        TRY(ox_natural(c, a, &in[0]));
        TRY(ox_natural(c, b, &in[1]));
        for (int k = 0; k < A->ndim; k++) map[k] = (int8_t)k;
    }
    sf_op_params p;
    sf_op_params_default(type, &p);
    int id = ox_add_op(c, type, &p, in, 2, NULL);
    if (id < 0) return (sf_status)id;
    ox_set_act(c, ox_out(c, n, 0), (sf_tensor_ref){id, 0}, c->vals[a].ndim, d, map, 0);
    return SF_OK;
}

static sf_status act_add(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, SF_OP_ADD); }
static sf_status act_mul(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, SF_OP_MUL); }

static sf_status act_div(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    if (ox_pat_node(c, n, &st)) return st;
    int a = ox_in(c, n, 0), b = ox_in(c, n, 1);
    if (c->vals[a].kind == OX_CONST || c->vals[b].kind == OX_CONST)
        return const_operand(c, n, SF_OP_MUL, a, b);
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "a division of activations: soapflow has no such operator (one is taken "
                   "only as a step of torch's attention, layer normalization or GELU)");
}

/* Where on activations: the causal mask of an attention's scores (onnx_attn.c),
 * or a masked_fill: a constant condition, one activation and one constant
 * value (x.masked_fill(mask, v) is Where(mask, v, x); torch.where(mask, x, v)
 * fills where the mask is false). */
static sf_status act_where(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int cv = ox_in(c, n, 0), av = ox_in(c, n, 1), bv = ox_in(c, n, 2);
    if (c->vals[cv].kind != OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a Where whose condition is an activation: soapflow takes a constant mask "
                       "(masked_fill) or an attention's causal mask");
    int ac = c->vals[av].kind == OX_CONST, bc = c->vals[bv].kind == OX_CONST;
    if (!ac && !bc)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a Where of two activations: soapflow fills with a constant value "
                       "(masked_fill), not with another activation");
    int x = ac ? bv : av, f = ac ? av : bv, fill_true = ac;
    TRY(ox_const_data(c, cv));
    TRY(ox_const_data(c, f));
    TRY(ox_act(c, x));
    const ox_value *C = &c->vals[cv], *F = &c->vals[f], *X = &c->vals[x];
    if (X->is_index) return ox_fail(c, SF_ERR_UNSUPPORTED, "a Where of integers (token ids)");
    if (F->numel != 1 || F->ndim > X->ndim)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a Where whose fill value '%.100s' is a tensor of %lld values (shape %s): "
                       "soapflow fills with one constant",
                       F->name, (long long)F->numel,
                       ox_dims_str(F->ndim, F->d, (char[64]){0}, 64));
    TRY(const_fits(c, cv, x, "mask"));
    C = &c->vals[cv];
    X = &c->vals[x];
    if (C->ndim == X->ndim && C->d[0] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "the mask '%.100s' varies along the batch (%lld on axis 0): soapflow's "
                       "masked_fill holds one mask for every sample",
                       C->name, (long long)C->d[0]);
    if (X->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an activation of rank %d", X->ndim);
    double v = F->is_index ? (double)F->i[0] : (double)F->f[0];
    if (isnan(v)) return ox_fail(c, SF_ERR_UNSUPPORTED, "a Where that fills with NaN");
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    C = &c->vals[cv];
    sf_op_params p;
    sf_op_params_default(SF_OP_MASKED_FILL, &p);
    p.masked_fill.ndim = C->ndim;
    for (int j = 0; j < C->ndim; j++) p.masked_fill.shape[j] = C->d[j];
    p.masked_fill.value = v;
    float *m = malloc((size_t)(C->numel ? C->numel : 1) * sizeof *m);
    if (!m) return ox_oom(c);
    for (int64_t e = 0; e < C->numel; e++) {
        int t = C->is_index ? C->i[e] != 0 : C->f[e] != 0.0f;
        m[e] = t == fill_true ? 1.0f : 0.0f;
    }
    int id = ox_add_op_fixed(c, SF_OP_MASKED_FILL, &p, &in, 1, m, C->numel);
    free(m);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* x - c, c - x (a scale), or a step of torch's layer normalization. */
static sf_status act_sub(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_pat_node(c, n, &st)) return st;
    int a = ox_in(c, n, 0), b = ox_in(c, n, 1);
    if (c->vals[a].kind == OX_CONST || c->vals[b].kind == OX_CONST)
        return const_operand(c, n, SF_OP_ADD, a, b);
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "a difference of activations: soapflow has no such operator (one is taken "
                   "only as a step of torch's layer normalization)");
}

/* Pow, Sqrt, Erf: only as steps of torch's layer normalization
 * and GELU (onnx_norm.c). */
static sf_status act_steps_only(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_pat_node(c, n, &st)) return st;
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "%s of an activation: soapflow has no such operator (one is taken only as "
                   "a step of torch's layer normalization or GELU)",
                   n->op_type);
}

/* ---- shapes: concat, split, flatten, reshape, views ---------------------------------- */

static int norm_axis(int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) return -1;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

/* Value v is a named initializer (a learned tensor) of size 1 along the batch,
 * expanded along the batch only: class_token.expand(N, -1, -1). */
static int expanded_param(const ox_ctx *c, int v) {
    const ox_value *V = &c->vals[v];
    int s = V->kind == OX_CONST ? V->expanded_from : 0;
    if (s <= 0 || !named_param(c, s)) return 0;
    const ox_value *S = &c->vals[s];
    if (S->ndim != V->ndim || V->ndim < 2 || S->d[0] != 1) return 0;
    for (int k = 1; k < V->ndim; k++)
        if (S->d[k] != V->d[k]) return 0;
    return 1;
}

/* Concat of one activation and a learned tensor repeated over the batch (input
 * tok, first or last): concat_param, the tensor its weight. */
static sf_status concat_param(ox_ctx *c, const Onnx__NodeProto *n, int tok, int x, int axis) {
    int s = c->vals[ox_in(c, n, tok)].expanded_from;
    if (axis == 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a learned tensor concatenated along the batch");
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    TRY(ox_const_data(c, s));
    const ox_value *X = &c->vals[x], *S = &c->vals[s];
    if (X->ndim != S->ndim || X->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_SHAPE, "the learned tensor '%.100s' has rank %d, the input %d",
                       S->name, S->ndim, X->ndim);
    for (int k = 1; k < X->ndim; k++)
        if (k != axis && X->d[k] != S->d[k])
            return ox_fail(c, SF_ERR_SHAPE,
                           "the learned tensor '%.100s' is %lld on axis %d, the "
                           "input %lld",
                           S->name, (long long)S->d[k], k, (long long)X->d[k]);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT_PARAM, &p);
    p.concat_param.axis = axis;
    p.concat_param.last = tok != 0;
    p.concat_param.ndim = S->ndim;
    for (int k = 0; k < S->ndim; k++) p.concat_param.shape[k] = S->d[k];
    char name[300];
    ox_unique_name(c, S->name, name, sizeof name);
    int id = ox_add_named(c, SF_OP_CONCAT_PARAM, name, &p, &in, 1);
    if (id < 0) return (sf_status)id;
    TRY(ox_put_param(c, id, "weight", c->vals[s].f, c->vals[s].numel));
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

static sf_status act_concat(ox_ctx *c, const Onnx__NodeProto *n) {
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 1, &axis64));
    int nin = (int)n->n_input;
    if (nin < 1) return ox_fail(c, SF_ERR_PARSE, "no inputs");
    if (nin > SF_MAX_SPLIT)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%d inputs (at most %d)", nin, SF_MAX_SPLIT);
    int tok = -1;
    for (int k = 0; k < nin; k++) {
        int v = ox_in(c, n, k);
        if (c->vals[v].kind == OX_CONST) {
            if (tok < 0 && expanded_param(c, v)) {
                tok = k;
                continue;
            }
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "concatenates the constant '%.100s' with activations (soapflow takes "
                           "a learned tensor expanded over the batch, a class token, first or "
                           "last)",
                           c->vals[v].name);
        }
        TRY(ox_act(c, v));
    }
    if (tok >= 0) {
        if (nin != 2)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "a learned tensor concatenated with %d activations (soapflow takes one)",
                           nin - 1);
        int x = ox_in(c, n, 1 - tok), axis;
        if (norm_axis(axis64, c->vals[x].ndim, &axis) != 0)
            return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64,
                           c->vals[x].ndim);
        return concat_param(c, n, tok, x, axis);
    }
    if (nin == 1) return alias(c, n, ox_in(c, n, 0));
    const ox_value *A = &c->vals[ox_in(c, n, 0)];
    int axis;
    if (norm_axis(axis64, A->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, A->ndim);
    int64_t d[OX_MAX_RANK];
    for (int k = 0; k < A->ndim; k++) d[k] = A->d[k];
    d[axis] = 0;
    int same = 1;
    for (int k = 0; k < nin; k++) {
        const ox_value *x = &c->vals[ox_in(c, n, k)];
        const sf_shape *s = &sf_graph_op(c->g, x->ref.op)->out_shapes[x->ref.out];
        if (x->ndim != A->ndim)
            return ox_fail(c, SF_ERR_SHAPE, "input %d has rank %d, input 0 %d", k, x->ndim,
                           A->ndim);
        for (int j = 0; j < A->ndim; j++) {
            if (j != axis && x->d[j] != A->d[j])
                return ox_fail(c, SF_ERR_SHAPE, "input %d is %lld on axis %d, input 0 %lld", k,
                               (long long)x->d[j], j, (long long)A->d[j]);
            same = same && x->map[j] == A->map[j];
        }
        same = same && s->ndim == x->ndim;
        d[axis] += x->d[axis];
    }
    same = same && A->map[axis] >= 0;
    sf_tensor_ref in[SF_MAX_SPLIT];
    int8_t map[OX_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        const ox_value *x = &c->vals[ox_in(c, n, k)];
        if (same)
            in[k] = x->ref;
        else
            TRY(ox_natural(c, ox_in(c, n, k), &in[k]));
    }
    A = &c->vals[ox_in(c, n, 0)];
    for (int k = 0; k < A->ndim; k++) map[k] = same ? A->map[k] : (int8_t)k;
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = same ? A->map[axis] : axis;
    int id = ox_add_op(c, SF_OP_CONCAT, &p, in, nin, NULL);
    if (id < 0) return (sf_status)id;
    ox_set_act(c, ox_out(c, n, 0), (sf_tensor_ref){id, 0}, A->ndim, d, map, 0);
    return SF_OK;
}

/* A split along ONNX axis `axis` of value x into pieces sizes[0..parts), emitted as
 * one split operator; piece k goes to value outv[k] (-1: unused). */
static sf_status split_into(ox_ctx *c, int x, int axis, const int64_t *sizes, int parts,
                            const int *outv) {
    TRY(ox_act(c, x));
    ox_value *X = &c->vals[x];
    int sfax = X->map[axis];
    if (sfax < 0) { /* a size-1 dimension the tensor does not have: each piece is it */
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a split of a dimension of size 1");
    }
    if (sfax == 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a slice of the batch dimension: soapflow keeps every sample");
    if (parts > SF_MAX_SPLIT)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%d pieces (at most %d)", parts, SF_MAX_SPLIT);
    sf_op_params p;
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = sfax;
    p.split.parts = parts;
    for (int k = 0; k < parts; k++) p.split.sizes[k] = sizes[k];
    sf_tensor_ref in = X->ref;
    int id = ox_add_op(c, SF_OP_SPLIT, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    X = &c->vals[x];
    for (int k = 0; k < parts; k++) {
        if (outv[k] < 0) continue;
        int64_t d[OX_MAX_RANK];
        for (int j = 0; j < X->ndim; j++) d[j] = X->d[j];
        d[axis] = sizes[k];
        ox_set_act(c, outv[k], (sf_tensor_ref){id, k}, X->ndim, d, X->map, X->is_index);
    }
    return SF_OK;
}

static sf_status act_split(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_split(c, n, &st)) return st;
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 0, &axis64));
    int axis;
    if (norm_axis(axis64, X->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, X->ndim);
    int parts = (int)n->n_output;
    if (parts < 1 || parts > SF_MAX_SPLIT)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%d outputs (1 to %d)", parts, SF_MAX_SPLIT);
    int64_t sizes[SF_MAX_SPLIT];
    int cnt = -1;
    if (c->opset < 13)
        TRY(ox_attr_ints(c, n, "split", sizes, SF_MAX_SPLIT, &cnt));
    else if (present(c, n, 1))
        TRY(ox_const_ints(c, ox_in(c, n, 1), "split", sizes, SF_MAX_SPLIT, &cnt));
    int64_t len = X->d[axis], sum = 0;
    if (cnt < 0) {
        if (len % parts)
            return ox_fail(c, SF_ERR_SHAPE, "%lld does not split into %d equal parts",
                           (long long)len, parts);
        for (int k = 0; k < parts; k++) sizes[k] = len / parts;
    } else if (cnt != parts) {
        return ox_fail(c, SF_ERR_SHAPE, "%d sizes for %d outputs", cnt, parts);
    }
    for (int k = 0; k < parts; k++) {
        if (sizes[k] < 1) return ox_fail(c, SF_ERR_UNSUPPORTED, "an empty piece");
        if (sizes[k] > len) return ox_fail(c, SF_ERR_SHAPE, "a piece longer than the axis");
        sum += sizes[k]; /* at most 64 pieces of at most 2^40: no overflow */
    }
    if (sum != len)
        return ox_fail(c, SF_ERR_SHAPE, "sizes add up to %lld, the axis has %lld", (long long)sum,
                       (long long)len);
    int outv[SF_MAX_SPLIT];
    for (int k = 0; k < parts; k++) outv[k] = ox_out(c, n, k);
    return split_into(c, x, axis, sizes, parts, outv);
}

/* Positions [lo, hi) of an axis of length len as a split: pieces before, the
 * slice, after; out gets the index of the slice among the pieces. */
static int slice_pieces(int64_t lo, int64_t hi, int64_t len, int64_t *sizes, int *which) {
    int parts = 0;
    if (lo > 0) sizes[parts++] = lo;
    *which = parts;
    sizes[parts++] = hi - lo;
    if (hi < len) sizes[parts++] = len - hi;
    return parts;
}

static sf_status act_slice(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_slice(c, n, &st)) return st;
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t starts[OX_MAX_RANK], ends[OX_MAX_RANK], axes[OX_MAX_RANK], steps[OX_MAX_RANK];
    int ns, ne, na = -1, nst = -1;
    if (c->opset < 10) {
        TRY(ox_attr_ints(c, n, "starts", starts, OX_MAX_RANK, &ns));
        TRY(ox_attr_ints(c, n, "ends", ends, OX_MAX_RANK, &ne));
        TRY(ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, &na));
    } else {
        TRY(ox_const_ints(c, ox_in(c, n, 1), "starts", starts, OX_MAX_RANK, &ns));
        TRY(ox_const_ints(c, ox_in(c, n, 2), "ends", ends, OX_MAX_RANK, &ne));
        if (present(c, n, 3)) TRY(ox_const_ints(c, ox_in(c, n, 3), "axes", axes, OX_MAX_RANK, &na));
        if (present(c, n, 4))
            TRY(ox_const_ints(c, ox_in(c, n, 4), "steps", steps, OX_MAX_RANK, &nst));
    }
    if (ns != 1 || ne != 1 || (na >= 0 && na != 1) || (nst >= 0 && nst != 1))
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a slice of an activation along %d axes; soapflow takes one", ns);
    if (nst == 1 && steps[0] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a slice with step %lld", (long long)steps[0]);
    int axis;
    if (norm_axis(na == 1 ? axes[0] : 0, X->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "slice axis out of range");
    int64_t len = X->d[axis], lo = starts[0], hi = ends[0];
    if (lo < 0) lo += len;
    if (hi < 0) hi += len;
    lo = lo < 0 ? 0 : lo > len ? len : lo;
    hi = hi < 0 ? 0 : hi > len ? len : hi;
    if (hi <= lo) return ox_fail(c, SF_ERR_UNSUPPORTED, "an empty slice");
    if (lo == 0 && hi == len) return alias(c, n, x);
    int64_t sizes[3];
    int which, outv[3] = {-1, -1, -1};
    int parts = slice_pieces(lo, hi, len, sizes, &which);
    outv[which] = ox_out(c, n, 0);
    return split_into(c, x, axis, sizes, parts, outv);
}

/* Gather on an activation: one constant position of a non-batch axis, as a
 * split piece without that axis (a view). */
static sf_status gather_position(ox_ctx *c, const Onnx__NodeProto *n, int x, int iv) {
    TRY(ox_act(c, x));
    const ox_value *I = &c->vals[iv];
    const ox_value *X = &c->vals[x];
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 0, &axis64));
    int axis;
    if (norm_axis(axis64, X->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, X->ndim);
    if (I->numel != 1 || I->ndim > 1 || !I->is_index)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a gather of an activation at %lld positions; soapflow takes one constant "
                       "position",
                       (long long)I->numel);
    int64_t len = X->d[axis], pos = I->i[0];
    if (pos < 0) pos += len;
    if (pos < 0 || pos >= len)
        return ox_fail(c, SF_ERR_RANGE, "index %lld out of [0, %lld)", (long long)I->i[0],
                       (long long)len);
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    int8_t map[OX_MAX_RANK];
    int64_t d[OX_MAX_RANK];
    sf_tensor_ref ref = X->ref;
    int nd = X->ndim;
    for (int k = 0; k < nd; k++) {
        map[k] = X->map[k];
        d[k] = X->d[k];
    }
    if (len > 1) {
        int64_t sizes[3];
        int which, outv[3] = {-1, -1, -1};
        int parts = slice_pieces(pos, pos + 1, len, sizes, &which);
        outv[which] = o;
        TRY(split_into(c, x, axis, sizes, parts, outv));
        ref = c->vals[o].ref;
    }
    /* drop the axis: (with a scalar index) the dimension goes */
    int k2 = 0;
    int8_t m2[OX_MAX_RANK];
    int64_t d2[OX_MAX_RANK];
    for (int k = 0; k < nd; k++) {
        if (k == axis && I->ndim == 0) continue;
        m2[k2] = map[k];
        d2[k2] = k == axis ? 1 : d[k];
        k2++;
    }
    ox_set_act(c, o, ref, k2, d2, m2, c->vals[x].is_index);
    return SF_OK;
}

static sf_status act_gather(ox_ctx *c, const Onnx__NodeProto *n) {
    int dv = ox_in(c, n, 0), iv = ox_in(c, n, 1);
    ox_value *D = &c->vals[dv];
    if (D->kind != OX_CONST && D->kind != OX_WEIGHT && D->kind != OX_INPUT) {
        if (c->vals[iv].kind != OX_CONST)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "a gather of an activation by computed indices");
        return gather_position(c, n, dv, iv);
    }
    if (D->kind == OX_INPUT && c->vals[iv].kind == OX_CONST) return gather_position(c, n, dv, iv);
    /* an embedding: a table of vectors looked up by token ids */
    int64_t axis;
    TRY(ox_attr_int(c, n, "axis", 0, &axis));
    if (axis != 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a lookup along axis %lld", (long long)axis);
    int ok;
    const float *table = ox_weight(c, dv, "table", &ok);
    if (!ok) return c->err->code;
    D = &c->vals[dv];
    if (D->ndim != 2)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a lookup table of rank %d (an embedding's is 2)",
                       D->ndim);
    TRY(ox_act(c, iv));
    const ox_value *I = &c->vals[iv];
    if (!I->is_index)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "indices '%.100s' are not integers (token ids)",
                       I->name);
    if (I->ndim + 1 > OX_MAX_RANK)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "indices of rank %d", I->ndim);
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = D->d[0];
    p.embedding.embedding_dim = D->d[1];
    sf_tensor_ref in = I->ref;
    int id = ox_add_op(c, SF_OP_EMBEDDING, &p, &in, 1, D->name);
    if (id < 0) return (sf_status)id;
    if (c->n_emb == c->cap_emb) { /* remembered for a linear layer tied to it */
        int cap = c->cap_emb ? 2 * c->cap_emb : 8;
        void *q = realloc(c->emb, (size_t)cap * sizeof *c->emb);
        if (!q) return ox_oom(c);
        c->emb = q;
        c->cap_emb = cap;
    }
    c->emb[c->n_emb][0] = id;
    c->emb[c->n_emb++][1] = dv;
    TRY(ox_put_param(c, id, "weight", table, D->d[0] * D->d[1]));
    /* the output appends D to the ids' view */
    I = &c->vals[iv];
    const sf_shape *is = &sf_graph_op(c->g, I->ref.op)->out_shapes[I->ref.out];
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    for (int k = 0; k < I->ndim; k++) {
        d[k] = I->d[k];
        map[k] = I->map[k];
    }
    d[I->ndim] = D->d[1];
    map[I->ndim] = (int8_t)is->ndim;
    ox_set_act(c, ox_out(c, n, 0), (sf_tensor_ref){id, 0}, I->ndim + 1, d, map, 0);
    return SF_OK;
}

static sf_status act_flatten(ox_ctx *c, const Onnx__NodeProto *n) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 1, &axis64));
    int axis;
    if (axis64 == X->ndim)
        axis = X->ndim;
    else if (norm_axis(axis64, X->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, X->ndim);
    int64_t lead = 1, rest = 1;
    for (int k = 0; k < X->ndim; k++) {
        if (k < axis)
            lead *= X->d[k];
        else
            rest *= X->d[k];
    }
    if (axis == 0 || lead != X->d[0])
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "flattens the batch dimension into others (axis %d of %d)", axis, X->ndim);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    X = &c->vals[x];
    if (X->ndim == 2 && axis == 1) return alias(c, n, x);
    sf_op_params p;
    int id;
    if (axis == 1) {
        sf_op_params_default(SF_OP_FLATTEN, &p);
        p.flatten.start_dim = 1;
        id = ox_add_op(c, SF_OP_FLATTEN, &p, &in, 1, NULL);
    } else { /* dimensions 1..axis-1 are all 1: the same as flattening from 1 */
        sf_op_params_default(SF_OP_RESHAPE, &p);
        p.reshape.ndim = 2;
        p.reshape.shape[0] = 0;
        p.reshape.shape[1] = rest;
        id = ox_add_op(c, SF_OP_RESHAPE, &p, &in, 1, NULL);
    }
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, c->vals[x].is_index);
    return SF_OK;
}

/* The dimensions of size other than 1, in order. */
static int big_dims(int ndim, const int64_t *d, int64_t *out, int *pos) {
    int m = 0;
    for (int k = 0; k < ndim; k++)
        if (d[k] != 1) {
            out[m] = d[k];
            if (pos) pos[m] = k;
            m++;
        }
    return m;
}

static sf_status act_reshape(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    int64_t shape[OX_MAX_RANK];
    int cnt;
    TRY(ox_const_ints(c, ox_in(c, n, 1), "the shape", shape, OX_MAX_RANK, &cnt));
    int64_t allowzero;
    TRY(ox_attr_int(c, n, "allowzero", 0, &allowzero));
    const ox_value *X = &c->vals[x];
    int64_t total = 1, known = 1;
    for (int k = 0; k < X->ndim; k++) total *= X->d[k];
    int infer = -1;
    for (int k = 0; k < cnt; k++) {
        if (shape[k] == 0 && !allowzero) {
            if (k >= X->ndim)
                return ox_fail(c, SF_ERR_SHAPE, "shape copies dimension %d of %d", k, X->ndim);
            shape[k] = X->d[k];
        }
        if (shape[k] == -1) {
            if (infer >= 0) return ox_fail(c, SF_ERR_SHAPE, "shape has two -1s");
            infer = k;
            continue;
        }
        if (shape[k] < 1)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "shape dimension %lld", (long long)shape[k]);
        if (sf_mul_overflow_i64(known, shape[k], &known))
            return ox_fail(c, SF_ERR_RANGE, "the shape overflows");
    }
    if (infer >= 0) {
        if (known == 0 || total % known) return ox_fail(c, SF_ERR_SHAPE, "cannot infer the -1");
        shape[infer] = total / known;
        known = total;
    }
    if (known != total) {
        char a[96], b[96];
        int64_t sd[OX_MAX_RANK];
        for (int k = 0; k < cnt; k++) sd[k] = shape[k];
        return ox_fail(
            c, SF_ERR_SHAPE, "%s elements cannot be reshaped to %s",
            (snprintf(a, sizeof a, "%lld", (long long)total), a),
            (snprintf(b, sizeof b, "%d dims: %lld..", cnt, (long long)(cnt ? sd[0] : 0)), b));
    }
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    /* only dimensions of size 1 change: a view */
    int64_t bx[OX_MAX_RANK], by[OX_MAX_RANK];
    int px[OX_MAX_RANK];
    int mx = big_dims(X->ndim, X->d, bx, px), my = big_dims(cnt, shape, by, NULL);
    int same = mx == my;
    for (int k = 0; same && k < mx; k++) same = bx[k] == by[k];
    if (same) {
        int8_t map[OX_MAX_RANK];
        for (int k = 0, j = 0; k < cnt; k++) map[k] = shape[k] == 1 ? -1 : X->map[px[j++]];
        /* a batch of 1 keeps its place */
        if (X->ndim && cnt && X->d[0] == 1 && shape[0] == 1 && X->map[0] >= 0) map[0] = X->map[0];
        ox_set_act(c, o, X->ref, cnt, shape, map, X->is_index);
        return SF_OK;
    }
    if (cnt > SF_MAX_DIMS) return ox_fail(c, SF_ERR_UNSUPPORTED, "a shape of rank %d", cnt);
    if (cnt < 1 || shape[0] != X->d[0])
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a reshape that changes the batch dimension (%lld to %lld): soapflow "
                       "keeps samples apart",
                       (long long)X->d[0], (long long)(cnt ? shape[0] : 0));
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    sf_op_params p;
    sf_op_params_default(SF_OP_RESHAPE, &p);
    p.reshape.ndim = cnt;
    p.reshape.shape[0] = 0;
    for (int k = 1; k < cnt; k++) p.reshape.shape[k] = shape[k];
    int id = ox_add_op(c, SF_OP_RESHAPE, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, c->vals[x].is_index);
    return SF_OK;
}

static sf_status act_transpose(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t perm[OX_MAX_RANK];
    int cnt;
    TRY(ox_attr_ints(c, n, "perm", perm, OX_MAX_RANK, &cnt));
    if (cnt < 0) {
        cnt = X->ndim;
        for (int k = 0; k < cnt; k++) perm[k] = cnt - 1 - k;
    }
    if (cnt != X->ndim)
        return ox_fail(c, SF_ERR_SHAPE, "perm has %d entries for rank %d", cnt, X->ndim);
    int seen[OX_MAX_RANK] = {0};
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    for (int k = 0; k < cnt; k++) {
        if (perm[k] < 0 || perm[k] >= cnt || seen[perm[k]]++)
            return ox_fail(c, SF_ERR_PARSE, "perm is not a permutation");
        d[k] = X->d[perm[k]];
        map[k] = X->map[perm[k]];
    }
    ox_set_act(c, ox_out(c, n, 0), X->ref, cnt, d, map, X->is_index);
    return SF_OK;
}

/* Axes of Squeeze/Unsqueeze: attribute before opset 13, input from 13. */
static sf_status squeeze_axes(ox_ctx *c, const Onnx__NodeProto *n, int64_t *axes, int *cnt) {
    if (c->opset < 13) return ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, cnt);
    *cnt = -1;
    if (present(c, n, 1)) return ox_const_ints(c, ox_in(c, n, 1), "axes", axes, OX_MAX_RANK, cnt);
    return SF_OK;
}

static sf_status act_squeeze(ox_ctx *c, const Onnx__NodeProto *n) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axes[OX_MAX_RANK];
    int cnt;
    TRY(squeeze_axes(c, n, axes, &cnt));
    int drop[OX_MAX_RANK] = {0};
    for (int k = 0; k < X->ndim; k++) drop[k] = cnt < 0 && X->d[k] == 1;
    for (int k = 0; k < cnt; k++) {
        int a;
        if (norm_axis(axes[k], X->ndim, &a) != 0)
            return ox_fail(c, SF_ERR_PARSE, "axis out of range");
        if (X->d[a] != 1)
            return ox_fail(c, SF_ERR_SHAPE, "squeezes axis %d of size %lld", a, (long long)X->d[a]);
        drop[a] = 1;
    }
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    int m = 0;
    for (int k = 0; k < X->ndim; k++)
        if (!drop[k]) {
            d[m] = X->d[k];
            map[m++] = X->map[k];
        }
    ox_set_act(c, ox_out(c, n, 0), X->ref, m, d, map, X->is_index);
    return SF_OK;
}

static sf_status act_unsqueeze(ox_ctx *c, const Onnx__NodeProto *n) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axes[OX_MAX_RANK];
    int cnt;
    TRY(squeeze_axes(c, n, axes, &cnt));
    if (cnt < 1) return ox_fail(c, SF_ERR_PARSE, "no axes");
    int r = X->ndim + cnt;
    if (r > OX_MAX_RANK) return ox_fail(c, SF_ERR_UNSUPPORTED, "rank %d", r);
    int ins[OX_MAX_RANK] = {0};
    for (int k = 0; k < cnt; k++) {
        int a;
        if (norm_axis(axes[k], r, &a) != 0 || ins[a]++) return ox_fail(c, SF_ERR_PARSE, "bad axes");
    }
    int64_t d[OX_MAX_RANK];
    int8_t map[OX_MAX_RANK];
    for (int k = 0, j = 0; k < r; k++) {
        if (ins[k]) {
            d[k] = 1;
            map[k] = -1;
        } else {
            d[k] = X->d[j];
            map[k] = X->map[j++];
        }
    }
    ox_set_act(c, ox_out(c, n, 0), X->ref, r, d, map, X->is_index);
    return SF_OK;
}

/* ---- reductions -------------------------------------------------------------------- */

/* ReduceMean: a step of torch's layer normalization (onnx_norm.c), or reduce_mean. */
static sf_status act_reduce_mean(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_pat_node(c, n, &st)) return st;
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    if (c->vals[x].is_index) return ox_fail(c, SF_ERR_UNSUPPORTED, "a mean of token ids");
    int rank = c->vals[x].ndim;
    int64_t axes[OX_MAX_RANK], keep;
    int cnt;
    TRY(ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, &cnt));
    TRY(ox_attr_int(c, n, "keepdims", 1, &keep));
    if (cnt < 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a mean over every axis, the batch too: soapflow keeps samples apart");
    int on[OX_MAX_RANK] = {0};
    for (int k = 0; k < cnt; k++) {
        int a;
        if (norm_axis(axes[k], rank, &a) != 0)
            return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axes[k], rank);
        if (a == 0)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "a mean over the batch (axis 0): soapflow keeps samples apart");
        on[a] = 1;
    }
    if (rank > SF_MAX_DIMS) return ox_fail(c, SF_ERR_UNSUPPORTED, "a tensor of rank %d", rank);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    sf_op_params p;
    sf_op_params_default(SF_OP_REDUCE_MEAN, &p);
    for (int a = 1; a < rank; a++)
        if (on[a]) p.reduce.axes[p.reduce.n_axes++] = a;
    p.reduce.keepdims = keep != 0;
    if (p.reduce.n_axes == 0) return alias(c, n, x);
    int id = ox_add_op(c, SF_OP_REDUCE_MEAN, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* ---- padding ---------------------------------------------------------------------- */

/* The one node that reads value v, or NULL. */
static const Onnx__NodeProto *only_reader(const ox_ctx *c, int v) {
    if (c->vals[v].uses != 1) return NULL;
    for (int j = 0; j < c->n_nodes; j++) {
        const Onnx__NodeProto *m = c->graph->node[j];
        for (size_t k = 0; k < m->n_input; k++)
            if (ox_in(c, m, (int)k) == v) return m;
    }
    return NULL;
}

/* Whether zero pads (h, w), symmetric, before node m (a Conv or an AveragePool
 * that reads the padded tensor) fold into its padding exactly: a convolution's
 * zero padding is the same zeros; an average pool counts the Pad's zeros, as
 * count_include_pad does, so it folds when the pool's own padding (if any) is
 * counted too, in floor mode (ceil mode adds windows the fold would not), and
 * the total stays within half the kernel (soapflow's and PyTorch's rule). */
static int pad_folds_into(ox_ctx *c, const Onnx__NodeProto *m, const int64_t *hw) {
    if (!m || !m->op_type) return 0;
    int conv = !strcmp(m->op_type, "Conv"), avg = !strcmp(m->op_type, "AveragePool");
    if (!conv && !avg) return 0;
    const Onnx__AttributeProto *ap = ox_attr(m, "auto_pad");
    if (ap && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6))) return 0;
    int64_t pads[4] = {0, 0, 0, 0}, ks[OX_MAX_RANK], cm = 0, cip = 0;
    int np = -1, nk = -1;
    const Onnx__AttributeProto *a = ox_attr(m, "pads");
    if (a) {
        np = (int)a->n_ints;
        for (int k = 0; k < np && k < 4; k++) pads[k] = a->ints[k];
    }
    if (np >= 0 && np != 4) return 0;
    if (conv) return 1;
    a = ox_attr(m, "kernel_shape");
    if (!a || a->n_ints != 2) return 0;
    nk = 2;
    for (int k = 0; k < nk; k++) ks[k] = a->ints[k];
    a = ox_attr(m, "ceil_mode");
    if (a) cm = a->i;
    a = ox_attr(m, "count_include_pad");
    if (a) cip = a->i;
    if (cm) return 0;
    for (int k = 0; k < 2; k++) {
        if (pads[k] && !cip) return 0;
        if (pads[k] != pads[k + 2] || pads[k] + hw[k] > ks[k] / 2) return 0;
    }
    (void)c;
    return 1;
}

static sf_status act_pad(ox_ctx *c, const Onnx__NodeProto *n) {
    char mode[32];
    TRY(ox_attr_str(c, n, "mode", "constant", mode, sizeof mode));
    if (strcmp(mode, "constant"))
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s padding (soapflow pads with zeros)", mode);
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    int rank = c->vals[x].ndim;
    int64_t pads[2 * OX_MAX_RANK];
    int np = -1;
    double value = 0;
    if (c->opset < 11) {
        TRY(ox_attr_ints(c, n, "pads", pads, 2 * OX_MAX_RANK, &np));
        TRY(ox_attr_float(c, n, "value", 0.0, &value));
    } else {
        if (!present(c, n, 1)) return ox_fail(c, SF_ERR_PARSE, "no pads input");
        TRY(ox_const_ints(c, ox_in(c, n, 1), "the pads", pads, 2 * OX_MAX_RANK, &np));
        if (present(c, n, 2)) TRY(ox_const_scalar(c, ox_in(c, n, 2), "the value", &value));
    }
    if (value != 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "padding with %g (soapflow pads with zeros)", value);
    if (np != 2 * rank)
        return ox_fail(c, SF_ERR_SHAPE, "%d pads for rank %d (%d expected)", np, rank, 2 * rank);
    int any = 0;
    for (int k = 0; k < 2 * rank; k++) {
        if (pads[k] < 0)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "a negative pad (%lld): a crop",
                           (long long)pads[k]);
        if (pads[k] > SF_MAX_EXTENT)
            return ox_fail(c, SF_ERR_RANGE, "pad %lld out of [0, 2^31]", (long long)pads[k]);
        any |= pads[k] != 0;
    }
    if (!any) return alias(c, n, x);
    if (pads[0] || pads[rank])
        return ox_fail(c, SF_ERR_UNSUPPORTED, "pads the batch: soapflow keeps samples apart");
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    /* symmetric zeros on H and W of a 4-D tensor, read by a Conv or an average
     * pool that can take them as its own padding */
    int64_t hw[2] = {pads[2], pads[3]};
    if (rank == 4 && !pads[1] && !pads[5] && pads[2] == pads[6] && pads[3] == pads[7] &&
        pad_folds_into(c, only_reader(c, o), hw)) {
        TRY(alias(c, n, x));
        c->vals[o].pad_fold[0] = hw[0] + c->vals[x].pad_fold[0];
        c->vals[o].pad_fold[1] = hw[1] + c->vals[x].pad_fold[1];
        return SF_OK;
    }
    if (rank > SF_MAX_DIMS) return ox_fail(c, SF_ERR_UNSUPPORTED, "a tensor of rank %d", rank);
    sf_tensor_ref in;
    TRY(ox_natural(c, x, &in));
    sf_op_params p;
    sf_op_params_default(SF_OP_PAD, &p);
    p.pad.n_pads = 2 * rank;
    for (int k = 0; k < 2 * rank; k++) p.pad.pads[k] = pads[k];
    int id = ox_add_op(c, SF_OP_PAD, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* ---- the head ----------------------------------------------------------------------- */

static sf_status act_softmax(ox_ctx *c, const Onnx__NodeProto *n) {
    sf_status st;
    if (ox_attn_node(c, n, &st)) return st;
    int x = ox_in(c, n, 0), o = ox_out(c, n, 0);
    const Onnx__GraphProto *gr = c->graph;
    int final = o > 0 && gr->n_output > 0 && gr->output[0]->name &&
                strcmp(gr->output[0]->name, c->vals[o].name) == 0 && c->vals[o].uses == 1;
    if (!final)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a softmax inside the model: soapflow has softmax only with the loss at "
                       "the end (and inside attention)");
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", c->opset < 13 ? 1 : -1, &axis64));
    int axis;
    if (norm_axis(axis64, X->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis out of range");
    if (axis != X->ndim - 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "a softmax over axis %d of %d; soapflow's is over "
                       "the last",
                       axis, X->ndim);
    const sf_shape *xs = &sf_graph_op(c->g, X->ref.op)->out_shapes[X->ref.out];
    sf_tensor_ref in = X->ref;
    if (X->map[X->ndim - 1] != xs->ndim - 1) TRY(ox_natural(c, x, &in));
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int id = ox_add_op(c, SF_OP_SOFTMAX_CE, &p, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    c->loss_op = id;
    if (in.op == c->vals[x].ref.op && in.out == c->vals[x].ref.out)
        set_like(c, n, 0, id, x, 0);
    else
        set_natural(c, n, 0, id, 0, 0);
    return SF_OK;
}

/* ---- LSTM ---------------------------------------------------------------------------- */

/* ONNX gate blocks i, o, f, c to PyTorch's i, f, g, o: torch block t is ONNX block
 * gate_from[t]. */
static const int gate_from[4] = {0, 2, 3, 1};

/* The ng gate blocks of h rows of `row` values each from ONNX's order to
 * PyTorch's: torch block t is ONNX block from[t]. */
static void reorder_gates(const float *src, float *dst, const int *from, int ng, int64_t h,
                          int64_t row) {
    for (int t = 0; t < ng; t++)
        memcpy(dst + (size_t)(t * h * row), src + (size_t)(from[t] * h * row),
               (size_t)(h * row) * sizeof *dst);
}

/* An RNN operator's weights from ONNX's W (ng*h, isz), R (ng*h, h) and B (2 ng*h:
 * the input's biases, then the recurrence's; NULL with has_b 0: zeros), in
 * PyTorch's gate order and names. */
static sf_status rnn_weights(ox_ctx *c, int id, const float *W, const float *R, const float *B,
                             int has_b, const int *from, int ng, int64_t hidden, int64_t isz) {
    int64_t g = ng * hidden;
    float *buf = NULL;
    if (c->want_weights && W && R) {
        size_t need = (size_t)(g * (isz > hidden ? isz : hidden));
        buf = malloc((need > (size_t)(2 * g) ? need : (size_t)(2 * g)) * sizeof *buf);
        if (!buf) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
    }
    sf_status st = SF_OK;
    if (buf) reorder_gates(W, buf, from, ng, hidden, isz);
    st = ox_put_param(c, id, "weight_ih_l0", W ? buf : NULL, g * isz);
    if (buf && st == SF_OK) reorder_gates(R, buf, from, ng, hidden, hidden);
    if (st == SF_OK) st = ox_put_param(c, id, "weight_hh_l0", R ? buf : NULL, g * hidden);
    if (st == SF_OK && has_b) {
        if (buf && B) reorder_gates(B, buf, from, ng, hidden, 1);
        st = ox_put_param(c, id, "bias_ih_l0", buf && B ? buf : NULL, g);
        if (buf && B) reorder_gates(B + g, buf, from, ng, hidden, 1);
        if (st == SF_OK) st = ox_put_param(c, id, "bias_hh_l0", buf && B ? buf : NULL, g);
    } else if (st == SF_OK) { /* ONNX's default: no bias */
        st = ox_fill_param(c, id, "bias_ih_l0", 0.0f);
        if (st == SF_OK) st = ox_fill_param(c, id, "bias_hh_l0", 0.0f);
    }
    free(buf);
    return st;
}

/* An initial state input: absent or all zeros (0), an activation (1), else -1. */
static int lstm_state(ox_ctx *c, const Onnx__NodeProto *n, int k) {
    if (!present(c, n, k)) return 0;
    if (ox_const_data(c, ox_in(c, n, k)) != SF_OK) return -2;
    const ox_value *v = &c->vals[ox_in(c, n, k)];
    if (v->kind == OX_CONST) {
        for (int64_t i = 0; i < v->numel; i++)
            if (v->is_index ? v->i[i] != 0 : v->f[i] != 0) return -1;
        return 0;
    }
    return 1;
}

/* X of an LSTM or GRU node (what names the node type in messages): a view of a
 * batch-first (N, T, I) tensor into *x, and its steps, batch and features. */
static sf_status rnn_x(ox_ctx *c, const Onnx__NodeProto *n, int64_t layout, const char *what,
                       sf_tensor_ref *x_ref, int64_t *t, int64_t *nb, int64_t *isz) {
    int x = ox_in(c, n, 0);
    TRY(ox_act(c, x));
    const ox_value *X = &c->vals[x];
    if (X->ndim != 3) return ox_fail(c, SF_ERR_SHAPE, "X has rank %d, 3 expected", X->ndim);
    /* ONNX dimension of the batch, the sequence and the features */
    int bd = layout ? 0 : 1, td = layout ? 1 : 0;
    const sf_shape *xs = &sf_graph_op(c->g, X->ref.op)->out_shapes[X->ref.out];
    if (xs->ndim == 3 && X->map[bd] == 0 && X->map[td] == 1 && X->map[2] == 2) {
        *x_ref = X->ref;
    } else if (layout) {
        TRY(ox_natural(c, x, x_ref));
    } else {
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "X (sequence first) is not a view of a batch-first tensor: soapflow's %s "
                       "takes (N, T, I) (export with batch_first=True, or a dynamic batch "
                       "dimension on the inputs)",
                       what);
    }
    X = &c->vals[x];
    *t = X->d[td];
    *nb = X->d[bd];
    *isz = X->d[2];
    return SF_OK;
}

/* sequence_lens (input 4): absent, or every sequence t steps long. */
static sf_status rnn_lengths(ox_ctx *c, const Onnx__NodeProto *n, int64_t t) {
    if (!present(c, n, 4)) return SF_OK;
    TRY(ox_const_data(c, ox_in(c, n, 4)));
    const ox_value *sl = &c->vals[ox_in(c, n, 4)];
    if (sl->kind != OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "sequence_lens computed by the model");
    for (int64_t i = 0; i < sl->numel; i++)
        if ((sl->is_index ? sl->i[i] : (int64_t)sl->f[i]) != t)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "sequences of different lengths");
    return SF_OK;
}

/* An initial state activation v: (1, N, H) (layout 0) or (N, 1, H) (layout 1)
 * of a soapflow (N, H), into *ref. */
static sf_status rnn_state_input(ox_ctx *c, int v, int64_t layout, int64_t nb, int64_t hidden,
                                 sf_tensor_ref *ref) {
    TRY(ox_act(c, v));
    const ox_value *S = &c->vals[v];
    const sf_shape *ss = &sf_graph_op(c->g, S->ref.op)->out_shapes[S->ref.out];
    int nd = layout ? 0 : 1, ud = layout ? 1 : 0;
    if (S->ndim != 3 || S->d[ud] != 1 || S->d[nd] != nb || S->d[2] != hidden || ss->ndim != 2 ||
        S->map[nd] != 0 || S->map[2] != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "initial state '%.100s' is not a batch-first (N, H) tensor", S->name);
    *ref = S->ref;
    return SF_OK;
}

/* The outputs of an LSTM or GRU operator id: Y (T, 1, N, H) or (N, T, 1, H) of
 * the soapflow (N, T, H), then n_states final states (1, N, H) or (N, 1, H) of
 * the soapflow (N, H) (Y_h; an LSTM's Y_c). */
static void rnn_outputs(ox_ctx *c, const Onnx__NodeProto *n, int id, int64_t layout, int64_t t,
                        int64_t nb, int64_t hidden, int n_states) {
    int64_t dy[4];
    int8_t my[4];
    if (layout) {
        dy[0] = nb, dy[1] = t, dy[2] = 1, dy[3] = hidden;
        my[0] = 0, my[1] = 1, my[2] = -1, my[3] = 2;
    } else {
        dy[0] = t, dy[1] = 1, dy[2] = nb, dy[3] = hidden;
        my[0] = 1, my[1] = -1, my[2] = 0, my[3] = 2;
    }
    ox_set_act(c, ox_out(c, n, 0), (sf_tensor_ref){id, 0}, 4, dy, my, 0);
    int64_t ds[3];
    int8_t ms[3];
    if (layout) {
        ds[0] = nb, ds[1] = 1, ds[2] = hidden;
        ms[0] = 0, ms[1] = -1, ms[2] = 1;
    } else {
        ds[0] = 1, ds[1] = nb, ds[2] = hidden;
        ms[0] = -1, ms[1] = 0, ms[2] = 1;
    }
    for (int k = 1; k <= n_states; k++)
        ox_set_act(c, ox_out(c, n, k), (sf_tensor_ref){id, k}, 3, ds, ms, 0);
}

/* The activations attribute, if there is one: the k defaults or a refusal. */
static sf_status rnn_default_acts(ox_ctx *c, const Onnx__NodeProto *n, const char *const *dflt,
                                  size_t k, const char *names) {
    const Onnx__AttributeProto *acts = ox_attr(n, "activations");
    if (!acts) return SF_OK;
    int ok = acts->n_strings == k;
    for (size_t i = 0; ok && i < k; i++)
        ok = acts->strings[i].len == strlen(dflt[i]) &&
             memcmp(acts->strings[i].data, dflt[i], acts->strings[i].len) == 0;
    return ok ? SF_OK : ox_fail(c, SF_ERR_UNSUPPORTED, "activations other than %s", names);
}

/* An RNN node's W (1, ng*h, isz), R (1, ng*h, h) and optional B (1, 2 ng*h),
 * *hidden from W when the node does not say it. */
static sf_status rnn_wrb(ox_ctx *c, const Onnx__NodeProto *n, int ng, int64_t isz,
                         int64_t *hidden, const float **W, const float **R, const float **B,
                         int *has_b) {
    int ok;
    *W = ox_weight(c, ox_in(c, n, 1), "W", &ok);
    if (!ok) return c->err->code;
    *R = ox_weight(c, ox_in(c, n, 2), "R", &ok);
    if (!ok) return c->err->code;
    const ox_value *Wv = &c->vals[ox_in(c, n, 1)], *Rv = &c->vals[ox_in(c, n, 2)];
    if (*hidden < 1 && Wv->ndim == 3) *hidden = Wv->d[1] / ng;
    int64_t h = *hidden, g = ng * h;
    if (h < 1 || h > SF_MAX_EXTENT)
        return ox_fail(c, SF_ERR_PARSE, "hidden_size %lld", (long long)h);
    if (Wv->ndim != 3 || Wv->d[0] != 1 || Wv->d[1] != g || Wv->d[2] != isz)
        return ox_fail(c, SF_ERR_SHAPE, "W must be 1x%lldx%lld", (long long)g, (long long)isz);
    if (Rv->ndim != 3 || Rv->d[0] != 1 || Rv->d[1] != g || Rv->d[2] != h)
        return ox_fail(c, SF_ERR_SHAPE, "R must be 1x%lldx%lld", (long long)g, (long long)h);
    *B = NULL;
    *has_b = present(c, n, 3);
    if (*has_b) {
        *B = ox_weight(c, ox_in(c, n, 3), "B", &ok);
        if (!ok) return c->err->code;
        const ox_value *Bv = &c->vals[ox_in(c, n, 3)];
        if (Bv->ndim != 2 || Bv->d[0] != 1 || Bv->d[1] != 2 * g)
            return ox_fail(c, SF_ERR_SHAPE, "B must be 1x%lld", (long long)(2 * g));
    }
    return SF_OK;
}

static sf_status act_lstm(ox_ctx *c, const Onnx__NodeProto *n) {
    char dir[32];
    TRY(ox_attr_str(c, n, "direction", "forward", dir, sizeof dir));
    if (strcmp(dir, "forward"))
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a %s LSTM; soapflow's runs forward", dir);
    int64_t hidden, layout = 0, input_forget = 0;
    TRY(ox_attr_int(c, n, "hidden_size", 0, &hidden));
    TRY(ox_attr_int(c, n, "layout", 0, &layout));
    TRY(ox_attr_int(c, n, "input_forget", 0, &input_forget));
    if (input_forget) return ox_fail(c, SF_ERR_UNSUPPORTED, "input_forget (coupled gates)");
    if (ox_attr(n, "clip")) return ox_fail(c, SF_ERR_UNSUPPORTED, "cell clipping");
    static const char *const dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
    TRY(rnn_default_acts(c, n, dflt, 3, "Sigmoid, Tanh, Tanh"));
    if (present(c, n, 7)) return ox_fail(c, SF_ERR_UNSUPPORTED, "peephole connections (P)");
    sf_tensor_ref in[3];
    int64_t t, nb, isz;
    TRY(rnn_x(c, n, layout, "LSTM", &in[0], &t, &nb, &isz));
    const float *W, *R, *B;
    int has_b;
    TRY(rnn_wrb(c, n, 4, isz, &hidden, &W, &R, &B, &has_b));
    TRY(rnn_lengths(c, n, t));
    int h0 = lstm_state(c, n, 5), c0 = lstm_state(c, n, 6);
    if (h0 == -2 || c0 == -2) return c->err->code;
    if (h0 < 0 || c0 < 0)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a constant non-zero initial state");
    if (h0 != c0)
        return ox_fail(
            c, SF_ERR_UNSUPPORTED,
            "one initial state given and the other zero; soapflow takes both or neither");
    int n_in = 1;
    if (h0) {
        for (int k = 0; k < 2; k++)
            TRY(rnn_state_input(c, ox_in(c, n, 5 + k), layout, nb, hidden, &in[1 + k]));
        n_in = 3;
    }
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = hidden;
    int id = ox_add_op(c, SF_OP_LSTM, &p, in, n_in, NULL);
    if (id < 0) return (sf_status)id;
    TRY(rnn_weights(c, id, W, R, B, has_b, gate_from, 4, hidden, isz));
    rnn_outputs(c, n, id, layout, t, nb, hidden, 2);
    return SF_OK;
}

/* ---- GRU ----------------------------------------------------------------------------- */

/* ONNX gate blocks z, r, h to PyTorch's r, z, n: torch block t is ONNX block
 * gru_from[t]. */
static const int gru_from[3] = {1, 0, 2};


/* torch.nn.GRU's export: forward, linear_before_reset = 1 (r multiplies
 * W_hn h + b_hn), default activations, one layer a node. */
static sf_status act_gru(ox_ctx *c, const Onnx__NodeProto *n) {
    char dir[32];
    TRY(ox_attr_str(c, n, "direction", "forward", dir, sizeof dir));
    if (strcmp(dir, "forward"))
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a %s GRU; soapflow's runs forward", dir);
    int64_t hidden, layout = 0, lbr = 0;
    TRY(ox_attr_int(c, n, "hidden_size", 0, &hidden));
    TRY(ox_attr_int(c, n, "layout", 0, &layout));
    TRY(ox_attr_int(c, n, "linear_before_reset", 0, &lbr));
    if (lbr != 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "linear_before_reset %lld; soapflow's GRU is torch's (1: the reset gate "
                       "multiplies W_hn h + b_hn)",
                       (long long)lbr);
    if (ox_attr(n, "clip")) return ox_fail(c, SF_ERR_UNSUPPORTED, "cell clipping");
    static const char *const dflt[2] = {"Sigmoid", "Tanh"};
    TRY(rnn_default_acts(c, n, dflt, 2, "Sigmoid, Tanh"));
    sf_tensor_ref in[2];
    int64_t t, nb, isz;
    TRY(rnn_x(c, n, layout, "GRU", &in[0], &t, &nb, &isz));
    const float *W, *R, *B;
    int has_b;
    TRY(rnn_wrb(c, n, 3, isz, &hidden, &W, &R, &B, &has_b));
    TRY(rnn_lengths(c, n, t));
    int h0 = lstm_state(c, n, 5);
    if (h0 == -2) return c->err->code;
    if (h0 < 0) return ox_fail(c, SF_ERR_UNSUPPORTED, "a constant non-zero initial state");
    if (h0) TRY(rnn_state_input(c, ox_in(c, n, 5), layout, nb, hidden, &in[1]));
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = hidden;
    int id = ox_add_op(c, SF_OP_GRU, &p, in, h0 ? 2 : 1, NULL);
    if (id < 0) return (sf_status)id;
    TRY(rnn_weights(c, id, W, R, B, has_b, gru_from, 3, hidden, isz));
    rnn_outputs(c, n, id, layout, t, nb, hidden, 1);
    return SF_OK;
}

/* ---- the table ------------------------------------------------------------------------ */

#define FOLD OX_CAN_FOLD
#define ACT OX_CAN_ACT
#define STEP OX_CAN_STEP

/* Sorted by op_type (strcmp), for bsearch. min_in is the fewest inputs ONNX
 * allows in any opset read (Slice takes 1 before opset 10, 3 from it; Gemm's C is
 * optional from 11): import_node checks it, so a handler may read its required
 * inputs without looking; inputs that some opsets require and others do not, the
 * handlers check (present, cin, ox_const_ints). */
static const ox_op_entry table[] = {
    {"Abs", FOLD, 1, ox_fold_node, NULL},
    {"Add", FOLD | ACT, 2, ox_fold_node, act_add},
    {"AveragePool", ACT, 1, NULL, act_avgpool},
    {"BatchNormalization", ACT, 5, NULL, act_batchnorm},
    {"Cast", FOLD | ACT, 1, ox_fold_node, act_cast},
    {"Ceil", FOLD, 1, ox_fold_node, NULL},
    {"Clip", ACT, 1, NULL, act_clip},
    {"Concat", FOLD | ACT, 1, ox_fold_node, act_concat},
    {"Constant", FOLD, 0, ox_fold_node, NULL},
    {"ConstantOfShape", FOLD, 1, ox_fold_node, NULL},
    {"Conv", ACT, 2, NULL, act_conv},
    {"ConvTranspose", ACT, 2, NULL, act_conv_transpose},
    {"Div", FOLD | ACT, 2, ox_fold_node, act_div},
    {"Dropout", ACT, 1, NULL, act_dropout},
    {"Einsum", ACT, 1, NULL, act_einsum},
    {"Equal", FOLD, 2, ox_fold_node, NULL},
    {"Erf", ACT | STEP, 1, NULL, act_steps_only},
    {"Expand", FOLD, 2, ox_fold_node, NULL},
    {"Flatten", FOLD | ACT, 1, ox_fold_node, act_flatten},
    {"Floor", FOLD, 1, ox_fold_node, NULL},
    {"GRU", ACT, 3, NULL, act_gru},
    {"Gather", FOLD | ACT, 2, ox_fold_node, act_gather},
    {"Gemm", ACT, 2, NULL, act_gemm},
    {"GlobalAveragePool", ACT, 1, NULL, act_gap},
    {"GlobalMaxPool", ACT, 1, NULL, act_gmp},
    {"Greater", FOLD, 2, ox_fold_node, NULL},
    {"HardSigmoid", ACT, 1, NULL, act_hard_sigmoid},
    {"HardSwish", ACT, 1, NULL, act_hard_swish},
    {"Identity", FOLD | ACT, 1, ox_fold_node, act_identity},
    {"LSTM", ACT, 3, NULL, act_lstm},
    {"LayerNormalization", ACT, 2, NULL, act_layernorm},
    {"LeakyRelu", ACT, 1, NULL, act_leaky_relu},
    {"Less", FOLD, 2, ox_fold_node, NULL},
    {"LogSoftmax", ACT, 1, NULL, act_softmax},
    {"MatMul", ACT, 2, NULL, act_matmul},
    {"Max", FOLD, 1, ox_fold_node, NULL},
    {"MaxPool", ACT, 1, NULL, act_maxpool},
    {"Min", FOLD, 1, ox_fold_node, NULL},
    {"Mod", FOLD, 2, ox_fold_node, NULL},
    {"Mul", FOLD | ACT, 2, ox_fold_node, act_mul},
    {"Neg", FOLD, 1, ox_fold_node, NULL},
    {"Not", FOLD, 1, ox_fold_node, NULL},
    {"Pad", ACT, 1, NULL, act_pad},
    {"Pow", FOLD | ACT | STEP, 2, ox_fold_node, act_steps_only},
    {"Range", FOLD, 3, ox_fold_node, NULL},
    {"Reciprocal", FOLD, 1, ox_fold_node, NULL},
    {"ReduceMean", ACT, 1, NULL, act_reduce_mean},
    {"ReduceProd", FOLD, 1, ox_fold_node, NULL},
    {"ReduceSum", FOLD, 1, ox_fold_node, NULL},
    {"Relu", ACT, 1, NULL, act_relu},
    {"Reshape", FOLD | ACT, 2, ox_fold_node, act_reshape},
    {"Resize", ACT, 1, NULL, act_resize},
    {"ScatterND", FOLD, 3, ox_fold_node, NULL},
    {"Shape", FOLD, 1, ox_fold_node, NULL},
    {"Sigmoid", ACT, 1, NULL, act_sigmoid},
    {"Size", FOLD, 1, ox_fold_node, NULL},
    {"Slice", FOLD | ACT, 1, ox_fold_node, act_slice},
    {"Softmax", ACT, 1, NULL, act_softmax},
    {"Split", ACT, 1, NULL, act_split},
    {"Sqrt", FOLD | ACT | STEP, 1, ox_fold_node, act_steps_only},
    {"Squeeze", FOLD | ACT, 1, ox_fold_node, act_squeeze},
    {"Sub", FOLD | ACT, 2, ox_fold_node, act_sub},
    {"Tanh", ACT, 1, NULL, act_tanh},
    {"Transpose", FOLD | ACT, 1, ox_fold_node, act_transpose},
    {"Unsqueeze", FOLD | ACT, 1, ox_fold_node, act_unsqueeze},
    {"Where", FOLD | ACT | STEP, 3, ox_fold_node, act_where},
};

static int cmp_entry(const void *key, const void *e) {
    return strcmp((const char *)key, ((const ox_op_entry *)e)->op_type);
}

const ox_op_entry *ox_op_find(const char *op_type) {
    if (!op_type) return NULL;
    return bsearch(op_type, table, sizeof table / sizeof table[0], sizeof table[0], cmp_entry);
}

int ox_op_count(void) { return (int)(sizeof table / sizeof table[0]); }

const ox_op_entry *ox_op_at(int i) { return i >= 0 && i < ox_op_count() ? &table[i] : NULL; }
