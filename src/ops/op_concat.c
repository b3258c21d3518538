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
 *
 * Kernels (buffers in soapflow/kernels.h): forward copies each input's region
 * into its place in the output tile; backward adds the matching slice of the
 * output gradient into each input's gradient. An input the tile does not touch
 * has an empty region and is skipped (its buffer may be NULL). The reference
 * finds, for every output element, the input it comes from by its global axis
 * coordinate. The fast kernels view the tile as (outer, axis, inner), with outer
 * the dimensions before the axis and inner those after, so that each input's
 * piece is `outer` contiguous runs of (its axis extent * inner) elements:
 * memcpy forward, a vectorizable add backward.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
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

/* ---- kernels ----------------------------------------------------------- */

/* Offset of multi-index idx (relative to the rectangle's lo) in a row-major
 * buffer holding rectangle r, with idx[axis] replaced by ia. */
static int64_t concat_offset(const sf_tile *r, const int64_t *idx, int axis, int64_t ia) {
    int64_t off = 0;
    for (int i = 0; i < r->ndim; i++) off = off * (r->hi[i] - r->lo[i]) + (i == axis ? ia : idx[i]);
    return off;
}

/* For each element of the tile: its input k and position in k's region. */
static void concat_ref(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    int nd = t->ndim, axis = concat_axis(&a->op->params, nd);
    int64_t idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(t);
    for (int64_t e = 0; e < n; e++) {
        int64_t g = t->lo[axis] + idx[axis], off = 0;
        int k = 0;
        while (g >= off + a->op->in_shapes[k].d[axis]) off += a->op->in_shapes[k++].d[axis];
        int64_t at = concat_offset(&a->in_region[k], idx, axis, g - off - a->in_region[k].lo[axis]);
        if (!backward) {
            a->out[0][e] = a->in[k][at];
        } else if (a->grad_in[k]) {
            a->grad_in[k][at] += a->grad_out[0][e];
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

static sf_status concat_fwd_ref(const sf_kernel_args *a) {
    concat_ref(a, 0);
    return SF_OK;
}

static sf_status concat_bwd_ref(const sf_kernel_args *a) {
    if (a->grad_in) concat_ref(a, 1);
    return SF_OK;
}

/* The (outer, axis, inner) view of a tile. */
static void concat_view(const sf_tile *t, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= t->hi[i] - t->lo[i];
    for (int i = axis + 1; i < t->ndim; i++) *inner *= t->hi[i] - t->lo[i];
}

static void concat_fast(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    int axis = concat_axis(&a->op->params, t->ndim);
    int64_t outer, inner, ta = t->hi[axis] - t->lo[axis], off = 0;
    concat_view(t, axis, &outer, &inner);
    for (int k = 0; k < a->n_inputs; k++) {
        const sf_tile *r = &a->in_region[k];
        int64_t ra = r->hi[axis] - r->lo[axis];
        int64_t pos = off + r->lo[axis] - t->lo[axis]; /* where the piece starts in the tile */
        off += a->op->in_shapes[k].d[axis];
        if (ra <= 0) continue;
        const int64_t run = ra * inner;
        for (int64_t o = 0; o < outer; o++) {
            int64_t ti = (o * ta + pos) * inner, ri = o * run;
            if (!backward) {
                memcpy(a->out[0] + ti, a->in[k] + ri, (size_t)run * sizeof(float));
            } else if (a->grad_in[k]) {
                const float *restrict src = a->grad_out[0] + ti;
                float *restrict dst = a->grad_in[k] + ri;
                for (int64_t j = 0; j < run; j++) dst[j] += src[j];
            }
        }
    }
}

static sf_status concat_fwd_fast(const sf_kernel_args *a) {
    concat_fast(a, 0);
    return SF_OK;
}

static sf_status concat_bwd_fast(const sf_kernel_args *a) {
    if (a->grad_in) concat_fast(a, 1);
    return SF_OK;
}

/* Nothing saved: the backward only slices the gradient. */
static unsigned concat_saves(const sf_op *op) {
    (void)op;
    return 0;
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
    .saves = concat_saves,
    .memory = concat_memory,
    .fwd_ref = concat_fwd_ref,
    .fwd_fast = concat_fwd_fast,
    .bwd_ref = concat_bwd_ref,
    .bwd_fast = concat_bwd_fast,
};
