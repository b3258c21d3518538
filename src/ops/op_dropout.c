/*
 * op_dropout.c - dropout: zero each element with probability p, scale the rest
 * by 1 / (1 - p) (inverted dropout, as PyTorch does in training).
 *
 * Any rank; the output has the input's shape and a tile needs exactly its own
 * region. Parallel space as for activations: dimension 0 is the sample, the
 * others attributes. FLOPs per element: forward 2 (compare a random number with
 * p, multiply by the mask and the scale), backward 1 (multiply by the saved
 * mask, scale folded in). Random number generation is not counted. Bytes: the
 * forward pass reads the input and writes the output and a 4-byte mask; the
 * backward pass reads the output gradient and the mask and writes the input
 * gradient.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc dropout_attrs[] = {
    {.name = "p", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, dropout.p)},
};

static void dropout_defaults(sf_op_params *p) { p->dropout.p = 0.5; }

static sf_status dropout_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                               int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 1)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 1 dimension, got 0");
    if (!(p->dropout.p >= 0 && p->dropout.p < 1))
        return sf_error_set(err, SF_ERR_INVALID, "p must be in [0, 1), got %g", p->dropout.p);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void dropout_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void dropout_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void dropout_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = 2 * n;
    cost->flops_bwd = n;
    cost->bytes_fwd = 3 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 3 * n * SF_ELEM_BYTES;
}

const sf_op_class sf_op_dropout_class = {
    .type = SF_OP_DROPOUT,
    .name = "dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = dropout_attrs,
    .n_attrs = (int)(sizeof dropout_attrs / sizeof dropout_attrs[0]),
    .defaults = dropout_defaults,
    .infer = dropout_infer,
    .space = dropout_space,
    .region = dropout_region,
    .cost = dropout_cost,
};
