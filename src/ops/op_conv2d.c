/*
 * op_conv2d.c - 2-D convolution, NCHW, with stride, padding, dilation, groups, bias.
 *
 * Parallel space: the output (N, C_out, H_out, W_out); N is the sample dimension,
 * C_out a parameter dimension (splitting it splits the filters), H and W attribute
 * dimensions (splitting them keeps the filters whole but needs a halo of input rows).
 *
 * FLOPs count a multiply-add as two. Forward: 2 * MACs, plus one add per output
 * element for the bias. Backward: the input gradient and the weight gradient each
 * cost as much as the forward pass (2 * 2 * MACs), plus the bias gradient's sum.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc conv2d_attrs[] = {
    {.name = "out_channels", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, conv2d.out_channels)},
    {.name = "kernel", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.kernel), .count = 2},
    {.name = "stride", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.stride), .count = 2},
    {.name = "padding", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.padding), .count = 2},
    {.name = "dilation", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.dilation), .count = 2},
    {.name = "groups", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, conv2d.groups)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, conv2d.bias)},
};

static void conv2d_defaults(sf_op_params *p) {
    sf_conv2d_params *c = &p->conv2d;
    c->kernel[0] = c->kernel[1] = 1;
    c->stride[0] = c->stride[1] = 1;
    c->dilation[0] = c->dilation[1] = 1;
    c->groups = 1;
    c->bias = 1;
}

static sf_status conv2d_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_conv2d_params *c = &p->conv2d;
    if (in[0].ndim != 4)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 4-D (N, C, H, W), got %d-D",
                            in[0].ndim);
    if (c->out_channels < 1) return sf_error_set(err, SF_ERR_INVALID, "out_channels must be >= 1");
    if (c->groups < 1) return sf_error_set(err, SF_ERR_INVALID, "groups must be >= 1");
    for (int i = 0; i < 2; i++) {
        if (c->kernel[i] < 1 || c->stride[i] < 1 || c->dilation[i] < 1 || c->padding[i] < 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "kernel, stride and dilation must be >= 1 and padding >= 0");
    }
    if (in[0].d[1] % c->groups || c->out_channels % c->groups)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "groups (%lld) must divide input channels (%lld) and out_channels (%lld)",
                            (long long)c->groups, (long long)in[0].d[1], (long long)c->out_channels);
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        int64_t span = c->dilation[i] * (c->kernel[i] - 1) + 1;
        int64_t padded = in[0].d[2 + i] + 2 * c->padding[i];
        if (padded < span)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "kernel (%lld with dilation %lld) larger than padded input (%lld)",
                                (long long)c->kernel[i], (long long)c->dilation[i],
                                (long long)padded);
        o[i] = (padded - span) / c->stride[i] + 1;
    }
    out[0] = sf_shape_make(4, (int64_t[]){in[0].d[0], c->out_channels, o[0], o[1]});
    *n_out = 1;
    return SF_OK;
}

static int64_t conv2d_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    const sf_conv2d_params *c = &p->conv2d;
    int64_t w = c->out_channels * (in[0].d[1] / c->groups) * c->kernel[0] * c->kernel[1];
    return w + (c->bias ? c->out_channels : 0);
}

static void conv2d_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_PARAMETER;
    kinds[2] = kinds[3] = SF_DIM_ATTRIBUTE;
}

static void conv2d_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_conv2d_params *c = &op->params.conv2d;
    const sf_shape *in = &op->in_shapes[0];
    r->ndim = 4;
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    /* Channels: all of them without groups, else those of the groups the
     * tile's output channels fall in. */
    int64_t cout_per_g = c->out_channels / c->groups, cin_per_g = in->d[1] / c->groups;
    if (t->hi[1] <= t->lo[1]) {
        r->lo[1] = r->hi[1] = 0;
    } else {
        int64_t g0 = t->lo[1] / cout_per_g, g1 = (t->hi[1] - 1) / cout_per_g;
        r->lo[1] = g0 * cin_per_g;
        r->hi[1] = (g1 + 1) * cin_per_g;
    }
    for (int i = 0; i < 2; i++)
        sf_window_range(t->lo[2 + i], t->hi[2 + i], c->stride[i], c->padding[i], c->kernel[i],
                        c->dilation[i], in->d[2 + i], &r->lo[2 + i], &r->hi[2 + i]);
}

static void conv2d_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    const sf_conv2d_params *c = &op->params.conv2d;
    double outs = (double)sf_tile_numel(t);
    double macs = outs * (double)(op->in_shapes[0].d[1] / c->groups) * (double)c->kernel[0] *
                  (double)c->kernel[1];
    double bias = c->bias ? outs : 0;
    cost->flops_fwd = 2 * macs + bias;
    cost->flops_bwd = 4 * macs + bias;
    sf_tile r;
    conv2d_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b;
    /* backward reads input, weights and output gradient; writes both gradients */
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b;
}

const sf_op_class sf_op_conv2d_class = {
    .type = SF_OP_CONV2D,
    .name = "conv2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = conv2d_attrs,
    .n_attrs = (int)(sizeof conv2d_attrs / sizeof conv2d_attrs[0]),
    .defaults = conv2d_defaults,
    .infer = conv2d_infer,
    .param_count = conv2d_params,
    .space = conv2d_space,
    .region = conv2d_region,
    .cost = conv2d_cost,
};
