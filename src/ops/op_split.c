/*
 * op_split.c - cut one tensor into `parts` slices along `axis` (torch.split).
 *
 * Attributes: axis (negative counts from the end), parts, and sizes. The sizes
 * list is a variable-count attribute whose count lives in `parts`, so a model
 * file may give either "parts": 3 alone (sizes all zero: slices as even as
 * sf_split_range makes them) or "sizes": [a, b, c], which sets parts to 3; given
 * sizes must all be >= 1, exactly `parts` of them, summing to the axis length.
 *
 * Parallel space: the *input* shape, not output 0's: a part of a split operator
 * is a block of the input it copies out, and it may feed several slices at once.
 * Dimension 0 is the sample, the others attributes (nothing has weights). The
 * region of the input is the tile itself; the piece of output k a tile produces
 * is the tile intersected with slice k, shifted into slice coordinates (empty
 * when the tile misses the slice).
 *
 * No FLOPs: only bytes copied (read and written once, forward and backward).
 *
 * Kernels (buffers in soapflow/kernels.h): the mirror of concat. Forward copies
 * the tile's elements of slice k into output k's piece (sf_op_output_tile);
 * backward adds each output gradient's piece into the input gradient. Outputs
 * the tile misses have empty pieces and are skipped (their buffers may be
 * NULL). The reference maps each input element of the tile to its slice by its
 * global axis coordinate; the fast kernels copy `outer` contiguous runs per
 * output, as concat does.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc split_attrs[] = {
    {.name = "axis", .type = SF_ATTR_SMALLINT, .offset = offsetof(sf_op_params, split.axis)},
    {.name = "parts", .type = SF_ATTR_SMALLINT, .offset = offsetof(sf_op_params, split.parts)},
    {.name = "sizes", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, split.sizes),
     .count = 0, .count_offset = offsetof(sf_op_params, split.parts), .max_count = SF_MAX_SPLIT},
};

/* No default count: a split must say how many parts (or give their sizes). */
static void split_defaults(sf_op_params *p) { memset(&p->split, 0, sizeof p->split); }

static int split_sizes_given(const sf_split_params *s) {
    for (int k = 0; k < SF_MAX_SPLIT; k++)
        if (s->sizes[k] != 0) return 1;
    return 0;
}

/* The axis in [0, ndim) (the parameter may count from the end). */
static int split_axis(const sf_split_params *s, int ndim) {
    return s->axis < 0 ? s->axis + ndim : s->axis;
}

/* Range [lo, hi) of slice k along an axis of length n. */
static void split_slice(const sf_split_params *s, int64_t n, int k, int64_t *lo, int64_t *hi) {
    if (!split_sizes_given(s)) {
        sf_split_range(n, s->parts, k, lo, hi);
        return;
    }
    int64_t off = 0;
    for (int i = 0; i < k; i++) off += s->sizes[i];
    *lo = off;
    *hi = off + s->sizes[k];
}

static sf_status split_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)n_in;
    const sf_split_params *s = &p->split;
    int nd = in[0].ndim;
    if (nd < 1) return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 1 dimension");
    if (s->axis < -nd || s->axis >= nd)
        return sf_error_set(err, SF_ERR_INVALID, "axis %d out of range for a %d-D input",
                            s->axis, nd);
    int ax = split_axis(s, nd);
    int64_t len = in[0].d[ax];
    if (s->parts < 1 || s->parts > SF_MAX_SPLIT)
        return sf_error_set(err, SF_ERR_INVALID,
                            "parts must be 1..%d, got %d (give parts or sizes)", SF_MAX_SPLIT,
                            s->parts);
    if (split_sizes_given(s)) {
        int64_t sum = 0;
        for (int k = 0; k < SF_MAX_SPLIT; k++) {
            if (k >= s->parts && s->sizes[k] != 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "sizes has more entries than parts (%d)", s->parts);
            if (k < s->parts && s->sizes[k] < 1)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "sizes[%d] is %lld: every size must be >= 1 (or omit sizes)",
                                    k, (long long)s->sizes[k]);
            if (k < s->parts) sum += s->sizes[k];
        }
        if (sum != len)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "sizes sum to %lld but axis %d has length %lld", (long long)sum,
                                ax, (long long)len);
    } else if (s->parts > len) {
        return sf_error_set(err, SF_ERR_SHAPE,
                            "cannot split axis %d of length %lld into %d non-empty parts", ax,
                            (long long)len, s->parts);
    }
    for (int k = 0; k < s->parts; k++) {
        int64_t lo, hi;
        split_slice(s, len, k, &lo, &hi);
        out[k] = in[0];
        out[k].d[ax] = hi - lo;
    }
    *n_out = s->parts;
    return SF_OK;
}

static void split_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->in_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
}

static void split_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void split_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o) {
    const sf_split_params *s = &op->params.split;
    const sf_shape *in = &op->in_shapes[0];
    memset(o, 0, sizeof *o);
    o->ndim = in->ndim;
    if (output < 0 || output >= op->n_outputs) return;
    int ax = split_axis(s, in->ndim);
    sf_tile slice = sf_tile_full(in);
    split_slice(s, in->d[ax], output, &slice.lo[ax], &slice.hi[ax]);
    sf_tile part;
    if (!sf_tile_intersect(t, &slice, &part)) return;
    part.lo[ax] -= slice.lo[ax];
    part.hi[ax] -= slice.lo[ax];
    *o = part;
}

/* Slice k's piece is the tile clipped to the slice and moved to the slice's
 * origin: along the axis it lies within the tile's range less the slice's
 * start; the other dimensions are the tile's. */
static int split_out_axes(const sf_op *op, int output, int *axis, int64_t *shift) {
    const sf_shape *in = &op->in_shapes[0];
    int ax = split_axis(&op->params.split, in->ndim);
    int64_t lo, hi;
    split_slice(&op->params.split, in->d[ax], output, &lo, &hi);
    for (int e = 0; e < in->ndim; e++) {
        axis[e] = e;
        shift[e] = e == ax ? lo : 0;
    }
    return 1;
}

static void split_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    double b = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    cost->bytes_fwd = 2 * b;
    cost->bytes_bwd = 2 * b;
}

/* ---- kernels ----------------------------------------------------------- */

/* For each element of the tile (= input region): its output k and position in
 * k's piece. */
static void split_ref(const sf_kernel_args *a, int backward) {
    const sf_op *op = a->op;
    const sf_tile *t = &a->tile;
    int nd = t->ndim, ax = split_axis(&op->params.split, nd);
    int64_t idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(t), len = op->in_shapes[0].d[ax];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return;
    for (int64_t e = 0; e < n; e++) {
        int64_t g = t->lo[ax] + idx[ax], lo = 0, hi = 0;
        int k = 0;
        for (;; k++) {
            split_slice(&op->params.split, len, k, &lo, &hi);
            if (g < hi) break;
        }
        sf_tile o;
        split_out_tile(op, t, k, &o);
        int64_t at = 0;
        for (int i = 0; i < nd; i++)
            at = at * (o.hi[i] - o.lo[i]) + (i == ax ? g - lo - o.lo[ax] : idx[i]);
        if (!backward) a->out[k][at] = a->in[0][e];
        else dx[e] += a->grad_out[k][at];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

static sf_status split_fwd_ref(const sf_kernel_args *a) {
    split_ref(a, 0);
    return SF_OK;
}

static sf_status split_bwd_ref(const sf_kernel_args *a) {
    split_ref(a, 1);
    return SF_OK;
}

static void split_fast(const sf_kernel_args *a, int backward) {
    const sf_op *op = a->op;
    const sf_tile *t = &a->tile;
    int nd = t->ndim, ax = split_axis(&op->params.split, nd);
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return;
    int64_t outer = 1, inner = 1, ta = t->hi[ax] - t->lo[ax], len = op->in_shapes[0].d[ax];
    for (int i = 0; i < ax; i++) outer *= t->hi[i] - t->lo[i];
    for (int i = ax + 1; i < nd; i++) inner *= t->hi[i] - t->lo[i];
    for (int k = 0; k < a->n_outputs; k++) {
        sf_tile o;
        split_out_tile(op, t, k, &o);
        if (sf_tile_empty(&o)) continue;
        int64_t lo, hi;
        split_slice(&op->params.split, len, k, &lo, &hi);
        int64_t oa = o.hi[ax] - o.lo[ax];
        int64_t pos = lo + o.lo[ax] - t->lo[ax]; /* where the piece starts in the tile */
        const int64_t run = oa * inner;
        for (int64_t q = 0; q < outer; q++) {
            int64_t ti = (q * ta + pos) * inner, pi = q * run;
            if (!backward) {
                memcpy(a->out[k] + pi, a->in[0] + ti, (size_t)run * sizeof(float));
            } else {
                const float *restrict src = a->grad_out[k] + pi;
                float *restrict dst = dx + ti;
                for (int64_t j = 0; j < run; j++) dst[j] += src[j];
            }
        }
    }
}

static sf_status split_fwd_fast(const sf_kernel_args *a) {
    split_fast(a, 0);
    return SF_OK;
}

static sf_status split_bwd_fast(const sf_kernel_args *a) {
    split_fast(a, 1);
    return SF_OK;
}

/* Nothing saved: the backward only joins the gradients (PyTorch: views). */
static unsigned split_saves(const sf_op *op) {
    (void)op;
    return 0;
}

const sf_op_class sf_op_split_class = {
    .type = SF_OP_SPLIT,
    .name = "split",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = split_attrs,
    .n_attrs = (int)(sizeof split_attrs / sizeof split_attrs[0]),
    .defaults = split_defaults,
    .infer = split_infer,
    .param_count = NULL,
    .space = split_space,
    .region = split_region,
    .out_tile = split_out_tile,
    .out_axes = split_out_axes,
    .cost = split_cost,
    .saves = split_saves,
    .fwd_ref = split_fwd_ref,
    .fwd_fast = split_fwd_fast,
    .bwd_ref = split_bwd_ref,
    .bwd_fast = split_bwd_fast,
};
