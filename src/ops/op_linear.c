/*
 * op_linear.c - a fully connected layer over the last dimension: y = x W^T + b.
 *
 * Input (..., in_features), output (..., out_features); any leading dimensions
 * (batch, sequence) pass through. Parallel space: the output; dimension 0 is the
 * sample, middle dimensions are attributes (e.g. sequence), the last is a
 * parameter dimension: splitting it splits W by rows, and each part then needs
 * the whole input row (every input feature).
 *
 * FLOPs: forward 2 * MACs (+ bias adds); backward 4 * MACs (+ bias sums).
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc linear_attrs[] = {
    {.name = "out_features", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, linear.out_features)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, linear.bias)},
};

static void linear_defaults(sf_op_params *p) { p->linear.bias = 1; }

static sf_status linear_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 2 dimensions, got %d",
                            in[0].ndim);
    if (p->linear.out_features < 1)
        return sf_error_set(err, SF_ERR_INVALID, "out_features must be >= 1");
    out[0] = in[0];
    out[0].d[in[0].ndim - 1] = p->linear.out_features;
    *n_out = 1;
    return SF_OK;
}

static int64_t linear_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    int64_t k = in[0].d[in[0].ndim - 1];
    return p->linear.out_features * k + (p->linear.bias ? p->linear.out_features : 0);
}

static void linear_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_PARAMETER;
}

static void linear_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_shape *in = &op->in_shapes[0];
    *r = *t;
    r->lo[in->ndim - 1] = 0;
    r->hi[in->ndim - 1] = in->d[in->ndim - 1];
}

static void linear_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    const sf_shape *in = &op->in_shapes[0];
    double outs = (double)sf_tile_numel(t);
    double macs = outs * (double)in->d[in->ndim - 1];
    double bias = op->params.linear.bias ? outs : 0;
    cost->flops_fwd = 2 * macs + bias;
    cost->flops_bwd = 4 * macs + bias;
    sf_tile r;
    linear_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b;
}

const sf_op_class sf_op_linear_class = {
    .type = SF_OP_LINEAR,
    .name = "linear",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = linear_attrs,
    .n_attrs = (int)(sizeof linear_attrs / sizeof linear_attrs[0]),
    .defaults = linear_defaults,
    .infer = linear_infer,
    .param_count = linear_params,
    .space = linear_space,
    .region = linear_region,
    .cost = linear_cost,
};
