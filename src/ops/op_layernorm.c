/*
 * op_layernorm.c - layer normalization over the last dimension (torch.nn.LayerNorm(D)).
 *
 * Input (..., D), output the same shape; with `affine`, a learnable scale and
 * shift of D elements each (2*D parameters). Unlike batch normalization there
 * are no running statistics and nothing couples samples.
 *
 * Parallel space: the output. Dimension 0 is the sample, middle dimensions
 * attributes, and D cannot be split: each row's mean and variance need all of
 * it. The weights are therefore never split, only replicated. Region: the tile.
 *
 * FLOPs per element: forward mean (1), variance (3: subtract, square, add),
 * normalize (2), and scale and shift (2) when affine; backward about 8 (the two
 * row reductions of the input gradient and its combination) plus 2 for the
 * scale and shift gradients when affine.
 */
#include <math.h>
#include <stddef.h>

#include "op_impl.h"

#define LAYERNORM_FWD_FLOPS 6.0
#define LAYERNORM_BWD_FLOPS 8.0
#define LAYERNORM_AFFINE_FLOPS 2.0

static const sf_attr_desc layernorm_attrs[] = {
    {.name = "eps", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, norm.eps)},
    {.name = "affine", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, norm.affine)},
};

static void layernorm_defaults(sf_op_params *p) {
    p->norm.eps = 1e-5;
    p->norm.affine = 1;
}

static sf_status layernorm_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "input must have at least 2 dimensions (N, ..., D), got %d",
                            in[0].ndim);
    if (!(p->norm.eps >= 0) || !isfinite(p->norm.eps))
        return sf_error_set(err, SF_ERR_INVALID, "eps must be finite and >= 0, got %g",
                            p->norm.eps);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t layernorm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return p->norm.affine ? 2 * in[0].d[in[0].ndim - 1] : 0;
}

static void layernorm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_NONE;
}

static void layernorm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void layernorm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double n = (double)sf_tile_numel(t);
    int affine = op->params.norm.affine;
    double aff = affine ? LAYERNORM_AFFINE_FLOPS * n : 0;
    cost->flops_fwd = LAYERNORM_FWD_FLOPS * n + aff;
    cost->flops_bwd = LAYERNORM_BWD_FLOPS * n + aff;
    double io_b = n * SF_ELEM_BYTES;
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    cost->bytes_fwd = 2 * io_b + w_b;
    /* backward reads input and output gradient, writes the input gradient */
    cost->bytes_bwd = 3 * io_b + 2 * w_b;
}

const sf_op_class sf_op_layernorm_class = {
    .type = SF_OP_LAYERNORM,
    .name = "layernorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = layernorm_attrs,
    .n_attrs = (int)(sizeof layernorm_attrs / sizeof layernorm_attrs[0]),
    .defaults = layernorm_defaults,
    .infer = layernorm_infer,
    .param_count = layernorm_params,
    .space = layernorm_space,
    .region = layernorm_region,
    .cost = layernorm_cost,
};
