/*
 * op_batchnorm.c - batch normalization over (N, C, ...) with per-channel scale
 * and shift, ranks 2 to 5 (BatchNorm1d without and with length, 2d, 3d).
 *
 * Trainable parameters: scale and shift, 2 * C when affine. The running mean
 * and variance are buffers, not parameters (torchvision's counts leave them
 * out too), so they are not counted.
 *
 * Parallel space: the output, same shape as the input. N is the sample
 * dimension, C a parameter dimension (a channel's statistics and weights stay
 * with that channel), the rest attributes. A tile needs exactly its own region.
 * Splitting N or the spatial dimensions makes each part normalize with its own
 * statistics (per-device batch norm, as data-parallel frameworks do by default).
 *
 * FLOPs per element: forward 8 with affine (1 for the mean, 3 for the variance,
 * 2 to normalize, 2 to scale and shift), 6 without; backward 12 with affine
 * (2 for the scale and shift gradients, 10 for the input gradient's two
 * reductions and combination), 10 without.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc batchnorm_attrs[] = {
    {.name = "eps", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, norm.eps)},
    {.name = "affine", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, norm.affine)},
};

static void batchnorm_defaults(sf_op_params *p) {
    p->norm.eps = 1e-5;
    p->norm.affine = 1;
}

static sf_status batchnorm_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2 || in[0].ndim > 5)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 2-D to 5-D (N, C, ...), got %d-D",
                            in[0].ndim);
    if (!(p->norm.eps > 0))
        return sf_error_set(err, SF_ERR_INVALID, "eps must be > 0, got %g", p->norm.eps);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t batchnorm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return p->norm.affine ? 2 * in[0].d[1] : 0;
}

static void batchnorm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_PARAMETER;
}

static void batchnorm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void batchnorm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    int affine = op->params.norm.affine;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = (affine ? 8 : 6) * n;
    cost->flops_bwd = (affine ? 12 : 10) * n;
    double b = n * SF_ELEM_BYTES;
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    /* forward reads the input twice (statistics, then normalization) */
    cost->bytes_fwd = 2 * b + b + w_b;
    /* backward reads input and output gradient twice (reductions, then the
     * input gradient) and writes the input gradient and the weight gradients */
    cost->bytes_bwd = 4 * b + b + 2 * w_b;
}

const sf_op_class sf_op_batchnorm_class = {
    .type = SF_OP_BATCHNORM,
    .name = "batchnorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = batchnorm_attrs,
    .n_attrs = (int)(sizeof batchnorm_attrs / sizeof batchnorm_attrs[0]),
    .defaults = batchnorm_defaults,
    .infer = batchnorm_infer,
    .param_count = batchnorm_params,
    .space = batchnorm_space,
    .region = batchnorm_region,
    .cost = batchnorm_cost,
};
