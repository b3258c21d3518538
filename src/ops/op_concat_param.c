/*
 * op_concat_param.c - a learned tensor concatenated with the input along one
 * axis, the same tensor for every sample: ViT's class token,
 * torch.cat([self.class_token.expand(N, -1, -1), x], dim=1), with class_token an
 * nn.Parameter of shape (1, 1, D).
 *
 * The tensor's shape (attribute `shape`) is PyTorch's: the input's rank, 1 along
 * the batch, P along the axis, and the input's sizes elsewhere. The output is the
 * input with P more along the axis: the tensor's P positions first (`last`
 * false, ViT's order) or after the input's T. The tensor is a weight, trained.
 *
 * Parallel space: the output; dimension 0 is the sample, the others attributes,
 * the axis included (a part copies the tensor's rows, the input's, or both, as
 * concat's parts do). Every part reads the whole tensor (it is small: one token)
 * and accumulates into the elements its tile covers; the replicas of the one
 * shard sum those, which is the whole gradient (the weights are not split, so
 * no dimension is a parameter one).
 *
 * FLOPs: none forward (a copy); backward the weight gradient sums the output
 * gradient of the token's positions over the batch: one add per element there.
 * Bytes: the input's region, the tensor's part and the output forward; the
 * same and the weight gradient backward.
 *
 * Kernels (buffers in soapflow/kernels.h; weights: the tensor, row-major): the
 * output element at global position g is the input's at g less the input's
 * offset on the axis, or the tensor's at g with the batch coordinate 0 and the
 * axis less the tensor's offset. Backward adds the output gradient to the input
 * gradient or to the weight gradient at the same places. The reference walks
 * element by element; the fast kernels copy rows of the last dimension
 * (memcpy, or two pieces when the axis is the last dimension).
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc cp_attrs[] = {
    {.name = "axis", .type = SF_ATTR_SMALLINT, .offset = offsetof(sf_op_params, concat_param.axis)},
    {.name = "last", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, concat_param.last)},
    {.name = "shape",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, concat_param.shape),
     .count = 0,
     .count_offset = offsetof(sf_op_params, concat_param.ndim),
     .max_count = SF_MAX_DIMS},
};

static void cp_defaults(sf_op_params *p) { p->concat_param.axis = 1; }

static sf_status cp_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                          int *n_out, sf_error *err) {
    (void)n_in;
    const sf_concat_param_params *q = &p->concat_param;
    int nd = in[0].ndim;
    char a[96];
    if (q->axis < 1 || q->axis >= nd)
        return sf_error_set(err, SF_ERR_INVALID,
                            "axis %d: the learned tensor goes along a dimension 1 to %d of the "
                            "input %s (not the batch)",
                            q->axis, nd - 1, sf_shape_str(&in[0], a, sizeof a));
    if (q->ndim != nd)
        return sf_error_set(err, SF_ERR_SHAPE, "the learned tensor has rank %d, the input %s %d",
                            q->ndim, sf_shape_str(&in[0], a, sizeof a), nd);
    for (int i = 0; i < nd; i++) {
        int64_t want = i == 0 ? 1 : in[0].d[i];
        if (i == q->axis ? q->shape[i] < 1 : q->shape[i] != want)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "the learned tensor is %lld along dimension %d; it must be %s%lld "
                                "(input %s)",
                                (long long)q->shape[i], i, i == q->axis ? "at least " : "",
                                (long long)(i == q->axis ? 1 : want),
                                sf_shape_str(&in[0], a, sizeof a));
    }
    out[0] = in[0];
    if (q->shape[q->axis] > SF_MAX_EXTENT || out[0].d[q->axis] > SF_MAX_EXTENT)
        return sf_error_set(err, SF_ERR_RANGE, "the axis is longer than 2^31");
    out[0].d[q->axis] += q->shape[q->axis];
    *n_out = 1;
    return SF_OK;
}

static int64_t cp_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)in;
    (void)n_in;
    int64_t n = 1;
    for (int j = 0; j < p->concat_param.ndim; j++) n = sf_count_mul(n, p->concat_param.shape[j]);
    return n;
}

static void cp_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

/* Offsets along the axis of the input's and the tensor's positions. */
static void cp_offsets(const sf_op *op, int64_t *xoff, int64_t *toff) {
    const sf_concat_param_params *q = &op->params.concat_param;
    int64_t p = q->shape[q->axis], t = op->in_shapes[0].d[q->axis];
    *xoff = q->last ? 0 : p;
    *toff = q->last ? t : 0;
}

static void cp_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    int axis = op->params.concat_param.axis;
    int64_t xoff, toff, len = op->in_shapes[0].d[axis];
    cp_offsets(op, &xoff, &toff);
    *r = *t;
    int64_t lo = t->lo[axis] > xoff ? t->lo[axis] : xoff;
    int64_t hi = t->hi[axis] < xoff + len ? t->hi[axis] : xoff + len;
    if (hi <= lo) {
        r->lo[axis] = r->hi[axis] = 0;
    } else {
        r->lo[axis] = lo - xoff;
        r->hi[axis] = hi - xoff;
    }
}

/* Elements of the tile that are the tensor's (the rest are the input's). */
static double cp_token_elems(const sf_op *op, const sf_tile *t) {
    sf_tile r;
    cp_region(op, t, 0, &r);
    return (double)(sf_tile_numel(t) - sf_tile_numel(&r));
}

static void cp_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    sf_tile r;
    cp_region(op, t, 0, &r);
    double tok = cp_token_elems(op, t), in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double out_b = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    double w_b = (double)op->n_params * SF_ELEM_BYTES;
    c->flops_fwd = 0;
    c->flops_bwd = tok;
    c->bytes_fwd = in_b + out_b + (tok > 0 ? w_b : 0);
    c->bytes_bwd = in_b + out_b + (tok > 0 ? 2 * w_b : 0);
}

/* Backward reads only the output gradient: nothing saved. */
static void cp_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)op->n_params * SF_ELEM_BYTES;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

/* PyTorch has no default: ViT starts its class token at zeros. */
static int cp_param_descs(const sf_op *op, sf_param_desc *out) {
    const sf_concat_param_params *q = &op->params.concat_param;
    out[0] = sf_param_make("weight", q->ndim, q->shape, 0, SF_INIT_CONST, 0.0);
    return 1;
}

/* ---- kernels ----------------------------------------------------------- */

/* Row-major strides of a rectangle's extents. */
static void rect_strides(const sf_tile *r, int64_t *st) {
    int64_t s = 1;
    for (int i = r->ndim - 1; i >= 0; i--) {
        st[i] = s;
        s *= r->hi[i] - r->lo[i];
    }
}

/* Strides of the tensor's layout (the batch's unused: it is 1). */
static void cp_wstrides(const sf_op *op, int64_t *ws) {
    const sf_concat_param_params *q = &op->params.concat_param;
    int64_t s = 1;
    for (int i = q->ndim - 1; i >= 0; i--) {
        ws[i] = s;
        s *= q->shape[i];
    }
    ws[0] = 0;
}

static sf_status cp_ref(const sf_kernel_args *a, int backward) {
    const sf_op *op = a->op;
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    int nd = t->ndim, axis = op->params.concat_param.axis;
    int64_t xoff, toff, len = op->in_shapes[0].d[axis];
    cp_offsets(op, &xoff, &toff);
    int64_t xs[SF_MAX_DIMS], ws[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(t);
    rect_strides(r, xs);
    cp_wstrides(op, ws);
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    for (int64_t e = 0; e < n; e++) {
        int64_t ga = t->lo[axis] + idx[axis];
        if (ga >= xoff && ga < xoff + len) {
            int64_t o = 0;
            for (int i = 0; i < nd; i++)
                o += (i == axis ? ga - xoff - r->lo[i] : t->lo[i] + idx[i] - r->lo[i]) * xs[i];
            if (!backward)
                a->out[0][e] = a->in[0][o];
            else if (dx)
                dx[o] += a->grad_out[0][e];
        } else {
            int64_t o = 0;
            for (int i = 1; i < nd; i++) o += (i == axis ? ga - toff : t->lo[i] + idx[i]) * ws[i];
            if (!backward)
                a->out[0][e] = a->weights[o];
            else if (dw)
                dw[o] += a->grad_out[0][e];
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status cp_fwd_ref(const sf_kernel_args *a) { return cp_ref(a, 0); }
static sf_status cp_bwd_ref(const sf_kernel_args *a) { return cp_ref(a, 1); }

/* y (n) = x, or dx (n) += dy */
static void run_copy(int backward, float *restrict dst, const float *restrict src, int64_t n) {
    if (!backward) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t j = 0; j < n; j++) dst[j] += src[j];
}

/* Rows of the last dimension: each from the input or the tensor (the axis
 * before the last), or a piece of each (the axis the last). */
static sf_status cp_fast(const sf_kernel_args *a, int backward) {
    const sf_op *op = a->op;
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    int nd = t->ndim, axis = op->params.concat_param.axis, last = nd - 1;
    int64_t xoff, toff, len = op->in_shapes[0].d[axis];
    cp_offsets(op, &xoff, &toff);
    int64_t xs[SF_MAX_DIMS], ws[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    rect_strides(r, xs);
    cp_wstrides(op, ws);
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    int64_t rowlen = t->hi[last] - t->lo[last], rows = rowlen ? sf_tile_numel(t) / rowlen : 0;
    for (int64_t q = 0; q < rows; q++) {
        float *y = backward ? NULL : a->out[0] + q * rowlen;
        const float *g = backward ? a->grad_out[0] + q * rowlen : NULL;
        /* the row's offsets in the input region and in the tensor, at column lo */
        int64_t xo = 0, wo = 0;
        for (int i = 0; i < last; i++) {
            int64_t gi = t->lo[i] + idx[i];
            if (i == axis) {
                xo += (gi - xoff - r->lo[i]) * xs[i];
                wo += (gi - toff) * ws[i];
            } else {
                xo += (gi - r->lo[i]) * xs[i];
                wo += gi * ws[i];
            }
        }
        int64_t c0 = t->lo[last], c1 = t->hi[last];
        /* the columns of the row that are the input's: all or none unless the
         * axis is the last dimension */
        int64_t x0, x1;
        if (axis == last) {
            x0 = c0 > xoff ? c0 : xoff;
            x0 = x0 < c1 ? x0 : c1;
            x1 = c1 < xoff + len ? c1 : xoff + len;
            x1 = x1 > x0 ? x1 : x0;
        } else {
            int64_t ga = t->lo[axis] + idx[axis];
            int in_x = ga >= xoff && ga < xoff + len;
            x0 = in_x ? c0 : c1;
            x1 = c1;
        }
        for (int piece = 0; piece < 3; piece++) {
            /* columns [c0, x0) and [x1, c1) are the tensor's, [x0, x1) the input's */
            int64_t p0 = piece == 0 ? c0 : piece == 1 ? x0 : x1;
            int64_t p1 = piece == 0 ? x0 : piece == 1 ? x1 : c1;
            if (p1 <= p0) continue;
            int64_t at = p0 - c0;
            if (piece == 1) {
                int64_t src =
                    axis == last ? xo + (p0 - xoff - r->lo[last]) : xo + (p0 - r->lo[last]);
                if (!backward)
                    run_copy(0, y + at, a->in[0] + src, p1 - p0);
                else if (dx)
                    run_copy(1, dx + src, g + at, p1 - p0);
            } else {
                int64_t src = axis == last ? wo + (p0 - toff) : wo + p0;
                if (!backward)
                    run_copy(0, y + at, a->weights + src, p1 - p0);
                else if (dw)
                    run_copy(1, dw + src, g + at, p1 - p0);
            }
        }
        for (int i = last - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status cp_fwd_fast(const sf_kernel_args *a) { return cp_fast(a, 0); }
static sf_status cp_bwd_fast(const sf_kernel_args *a) { return cp_fast(a, 1); }

const sf_op_class sf_op_concat_param_class = {
    .type = SF_OP_CONCAT_PARAM,
    .name = "concat_param",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = cp_attrs,
    .n_attrs = (int)(sizeof cp_attrs / sizeof cp_attrs[0]),
    .defaults = cp_defaults,
    .infer = cp_infer,
    .param_count = cp_params,
    .space = cp_space,
    .region = cp_region,
    .cost = cp_cost,
    .memory = cp_memory,
    .param_descs = cp_param_descs,
    .fwd_ref = cp_fwd_ref,
    .fwd_fast = cp_fwd_fast,
    .bwd_ref = cp_bwd_ref,
    .bwd_fast = cp_bwd_fast,
};
