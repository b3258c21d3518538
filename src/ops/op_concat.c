/*
 * op_concat.c - concatenation of one or more tensors along one axis.
 *
 * All inputs have the same rank and agree on every dimension but the axis; the
 * axis may be negative (counted from the end, as in PyTorch and ONNX). Input i
 * occupies [off_i, off_i + size_i) of the output's axis, so the region a tile
 * needs from input i is the tile's intersection with that range shifted to the
 * input's own coordinates, and nothing (lo = hi = 0 on the axis) when the tile
 * does not touch it. A tile straddling two inputs needs a piece of each.
 *
 * Parallel space: the output; dimension 0 is the sample and the others are
 * attributes, the axis included: splitting along it only decides which inputs
 * each part copies. No FLOPs; bytes are the copy, forward and backward.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc concat_attrs[] = {
    {.name = "axis", .type = SF_ATTR_SMALLINT, .offset = offsetof(sf_op_params, concat.axis)},
};

static int concat_axis(const sf_op_params *p, int ndim) {
    return p->concat.axis < 0 ? p->concat.axis + ndim : p->concat.axis;
}

static sf_status concat_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    int nd = in[0].ndim;
    if (nd < 1) return sf_error_set(err, SF_ERR_SHAPE, "inputs must have at least 1 dimension");
    int axis = concat_axis(p, nd);
    if (axis < 0 || axis >= nd)
        return sf_error_set(err, SF_ERR_INVALID, "axis %d out of range for %d-D inputs",
                            p->concat.axis, nd);
    out[0] = in[0];
    char a[96], b[96];
    for (int k = 1; k < n_in; k++) {
        if (in[k].ndim != nd)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "input %d has rank %d but input 0 has rank %d", k, in[k].ndim, nd);
        for (int i = 0; i < nd; i++) {
            if (i != axis && in[k].d[i] != in[0].d[i])
                return sf_error_set(err, SF_ERR_SHAPE,
                                    "input %d (%s) differs from input 0 (%s) in dimension %d, "
                                    "which is not the axis (%d)",
                                    k, sf_shape_str(&in[k], a, sizeof a),
                                    sf_shape_str(&in[0], b, sizeof b), i, axis);
        }
        out[0].d[axis] += in[k].d[axis];
    }
    *n_out = 1;
    return SF_OK;
}

static void concat_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void concat_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    int axis = concat_axis(&op->params, op->out_shapes[0].ndim);
    int64_t off = 0;
    for (int k = 0; k < input; k++) off += op->in_shapes[k].d[axis];
    int64_t size = op->in_shapes[input].d[axis];
    *r = *t;
    int64_t lo = t->lo[axis] > off ? t->lo[axis] : off;
    int64_t hi = t->hi[axis] < off + size ? t->hi[axis] : off + size;
    if (hi <= lo) {
        r->lo[axis] = r->hi[axis] = 0;
    } else {
        r->lo[axis] = lo - off;
        r->hi[axis] = hi - off;
    }
}

static void concat_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double in_b = 0;
    for (int k = 0; k < op->n_inputs; k++) {
        sf_tile r;
        concat_region(op, t, k, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double out_b = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + out_b;
    cost->bytes_bwd = in_b + out_b;
}

/* The backward pass only slices the output gradient: nothing is saved. */
static void concat_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

const sf_op_class sf_op_concat_class = {
    .type = SF_OP_CONCAT,
    .name = "concat",
    .min_inputs = 1,
    .max_inputs = -1,
    .attrs = concat_attrs,
    .n_attrs = (int)(sizeof concat_attrs / sizeof concat_attrs[0]),
    .infer = concat_infer,
    .space = concat_space,
    .region = concat_region,
    .cost = concat_cost,
    .memory = concat_memory,
};
