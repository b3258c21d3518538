/*
 * op_unary.c - element-wise activations: relu, sigmoid, tanh, gelu.
 *
 * The four share every callback and differ only in their FLOPs per element,
 * so one file holds four classes over one set of static functions. Any rank;
 * the output has the input's shape and a tile needs exactly the same region of
 * the input. Parallel space: dimension 0 is the sample, all others attributes.
 *
 * FLOPs per element (forward / backward), counting exp and tanh as one each:
 *   relu     1 / 1   (max; select the gradient)
 *   sigmoid  4 / 3   (negate, exp, add, divide; g * s * (1 - s))
 *   tanh     5 / 3   (as two exps and a divide; g * (1 - t * t))
 *   gelu     8 / 12  (tanh approximation: cube, 2 mul-adds, tanh, 1 + t, halve, scale;
 *                     the derivative also needs 1 - t * t and the inner derivative)
 * Bytes: forward reads the input and writes the output; backward reads the output
 * gradient and the saved input, and writes the input gradient.
 */
#include <stddef.h>

#include "op_impl.h"

static void unary_flops(sf_op_type type, double *fwd, double *bwd) {
    switch (type) {
    case SF_OP_RELU: *fwd = 1, *bwd = 1; break;
    case SF_OP_SIGMOID: *fwd = 4, *bwd = 3; break;
    case SF_OP_TANH: *fwd = 5, *bwd = 3; break;
    case SF_OP_GELU: *fwd = 8, *bwd = 12; break;
    default: *fwd = *bwd = 0; break;
    }
}

static sf_status unary_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)p;
    (void)n_in;
    if (in[0].ndim < 1)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 1 dimension, got 0");
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void unary_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void unary_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void unary_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double n = (double)sf_tile_numel(t), fwd, bwd;
    unary_flops(op->type, &fwd, &bwd);
    cost->flops_fwd = fwd * n;
    cost->flops_bwd = bwd * n;
    cost->bytes_fwd = 2 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 3 * n * SF_ELEM_BYTES;
}

#define SF_UNARY_CLASS(var, type_, name_)                                                          \
    const sf_op_class var = {                                                                      \
        .type = type_,                                                                             \
        .name = name_,                                                                             \
        .min_inputs = 1,                                                                           \
        .max_inputs = 1,                                                                           \
        .infer = unary_infer,                                                                      \
        .space = unary_space,                                                                      \
        .region = unary_region,                                                                    \
        .cost = unary_cost,                                                                        \
    }

SF_UNARY_CLASS(sf_op_relu_class, SF_OP_RELU, "relu");
SF_UNARY_CLASS(sf_op_sigmoid_class, SF_OP_SIGMOID, "sigmoid");
SF_UNARY_CLASS(sf_op_tanh_class, SF_OP_TANH, "tanh");
SF_UNARY_CLASS(sf_op_gelu_class, SF_OP_GELU, "gelu");
