/*
 * op_input.c - a graph input: the batch of samples (images, token ids, labels).
 *
 * It has no inputs; its only attribute is its shape, batch in dimension 0. The
 * parallel space is that shape: dimension 0 is the sample dimension, the others
 * are attributes (a tile of an image batch may be split by rows like any other
 * activation). Its cost is the loading of the tile into device memory: no FLOPs,
 * the tile's bytes written once; there is no gradient to compute for it.
 * It has no region callback: with no inputs, sf_op_input_region never asks.
 *
 * Kernels: none, on purpose. An input computes nothing: the runtime fills each
 * tile of it with the batch's samples (or token ids, stored as floats), and its
 * gradient, if any, is dropped. sf_kernel_args has no source buffer that a
 * forward "copy" could read - the output tile is the only buffer, and what goes
 * into it is the data loader's business, not a kernel's - so a kernel would be
 * either a no-op that leaves the output unwritten (breaking "forward overwrites
 * the output") or a copy from a field invented for one operator. The slots stay
 * NULL: sf_kernel_available(SF_OP_INPUT, ...) is 0 and sf_kernel_forward returns
 * SF_ERR_UNSUPPORTED, which tells the runtime to load the tile itself.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc input_attrs[] = {
    {.name = "shape",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, input.shape.d),
     .count = 0,
     .count_offset = offsetof(sf_op_params, input.shape.ndim),
     .max_count = SF_MAX_DIMS},
    {.name = "is_index", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, input.is_index)},
};

static sf_status input_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)in;
    (void)n_in;
    const sf_shape *s = &p->input.shape;
    if (s->ndim < 1 || s->ndim > SF_MAX_DIMS)
        return sf_error_set(err, SF_ERR_SHAPE, "shape must have 1..%d dimensions, got %d",
                            SF_MAX_DIMS, s->ndim);
    for (int i = 0; i < s->ndim; i++) {
        if (s->d[i] < 1)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "dimension %d of the shape must be >= 1, got %lld", i,
                                (long long)s->d[i]);
    }
    out[0] = *s;
    *n_out = 1;
    return SF_OK;
}

static void input_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void input_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    cost->flops_fwd = 0;
    cost->flops_bwd = 0;
    cost->bytes_fwd = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    cost->bytes_bwd = 0;
}

/* No backward pass: nothing saved (its output is kept when a consumer saves it). */
static unsigned input_saves(const sf_op *op) {
    (void)op;
    return 0;
}

const sf_op_class sf_op_input_class = {
    .type = SF_OP_INPUT,
    .name = "input",
    .min_inputs = 0,
    .max_inputs = 0,
    .attrs = input_attrs,
    .n_attrs = (int)(sizeof input_attrs / sizeof input_attrs[0]),
    .infer = input_infer,
    .space = input_space,
    .cost = input_cost,
    .saves = input_saves,
};
