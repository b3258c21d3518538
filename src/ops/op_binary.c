/*
 * op_binary.c - element-wise add and mul with NumPy-style broadcasting.
 *
 * Both inputs must have the same rank (models here broadcast a bias or a scale
 * of shape (1, C, 1, 1), never by prepending dimensions, so rank promotion is not
 * needed); in each dimension the sizes are equal or one of them is 1. The output
 * has the broadcast shape, and a tile needs [0, 1) of an input's size-1
 * dimensions and the tile's own range elsewhere.
 *
 * Parallel space: the output; dimension 0 is the sample, the others attributes.
 *
 * FLOPs per output element: add 1 forward; mul 1 forward and 2 backward (each
 * gradient is the output gradient times the other input). A broadcast input's
 * gradient is summed over the broadcast dimensions: one more add per output
 * element for each broadcast input.
 */
#include <stddef.h>

#include "op_impl.h"

static sf_status binary_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)p;
    (void)n_in;
    char a[96], b[96];
    if (in[0].ndim < 1 || in[0].ndim != in[1].ndim)
        return sf_error_set(err, SF_ERR_SHAPE, "inputs must have the same rank, got %s and %s",
                            sf_shape_str(&in[0], a, sizeof a), sf_shape_str(&in[1], b, sizeof b));
    out[0] = in[0];
    for (int i = 0; i < in[0].ndim; i++) {
        int64_t x = in[0].d[i], y = in[1].d[i];
        if (x != y && x != 1 && y != 1)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                                sf_shape_str(&in[0], a, sizeof a),
                                sf_shape_str(&in[1], b, sizeof b), i, (long long)x, (long long)y);
        out[0].d[i] = x == 1 ? y : x;
    }
    *n_out = 1;
    return SF_OK;
}

static void binary_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void binary_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    const sf_shape *in = &op->in_shapes[input];
    *r = *t;
    for (int i = 0; i < in->ndim; i++) {
        if (t->hi[i] <= t->lo[i]) {
            r->lo[i] = r->hi[i] = 0;
        } else if (in->d[i] == 1) {
            r->lo[i] = 0;
            r->hi[i] = 1;
        }
    }
}

/* 1 when input `input` is broadcast along some dimension. */
static int is_broadcast(const sf_op *op, int input) {
    return !sf_shape_equal(&op->in_shapes[input], &op->out_shapes[0]);
}

static void binary_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double outs = (double)sf_tile_numel(t);
    double reduce = outs * (double)(is_broadcast(op, 0) + is_broadcast(op, 1));
    double in_b = 0;
    for (int i = 0; i < 2; i++) {
        sf_tile r;
        binary_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double out_b = outs * SF_ELEM_BYTES;
    cost->flops_fwd = outs;
    cost->bytes_fwd = in_b + out_b;
    if (op->type == SF_OP_MUL) {
        cost->flops_bwd = 2 * outs + reduce;
        cost->bytes_bwd = 2 * in_b + out_b; /* reads both inputs, writes both gradients */
    } else {
        cost->flops_bwd = reduce;
        cost->bytes_bwd = in_b + out_b;
    }
}

/* Add needs nothing saved for backward; mul needs both inputs. */
static void binary_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    if (op->type != SF_OP_MUL) return;
    for (int i = 0; i < 2; i++) {
        sf_tile r;
        binary_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
}

const sf_op_class sf_op_add_class = {
    .type = SF_OP_ADD,
    .name = "add",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = binary_infer,
    .space = binary_space,
    .region = binary_region,
    .cost = binary_cost,
    .memory = binary_memory,
};

const sf_op_class sf_op_mul_class = {
    .type = SF_OP_MUL,
    .name = "mul",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = binary_infer,
    .space = binary_space,
    .region = binary_region,
    .cost = binary_cost,
    .memory = binary_memory,
};
