/*
 * op_pad.c - zero padding: the input with zeros added before and after its
 * dimensions (torch.nn.functional.pad, nn.ZeroPad2d, ONNX Pad in constant mode
 * with value 0), any rank, asymmetric amounts allowed, none on the batch.
 *
 * Most zero pads in exports sit in front of a convolution or an average pool
 * that counts padding (Inception-v3 and DenseNet's nn.AvgPool2d(...,
 * count_include_pad=True) becomes Pad + AveragePool), and the ONNX importer
 * folds those into the operator's own padding, which is exact; this operator is
 * for the rest (asymmetric pads, a max pool after zeros, pads on channels).
 *
 * Parallel space: the output; dimension 0 is the sample, the others attributes.
 * An output tile needs the input rows it covers, shifted by the pad before and
 * clamped to the input (nothing, for a tile of zeros only).
 *
 * No FLOPs; bytes: the input region read and the tile written, forward; the
 * tile's gradient read and the region's written, backward. Nothing is saved.
 *
 * Kernels (buffers in soapflow/kernels.h): output element at global position g
 * is input element g - before when that lies inside the input, else 0.
 * Backward adds the output gradient at those positions into the input
 * gradient. The reference walks element by element; the fast kernels walk rows
 * of the last dimension: zeros on either side and a memcpy (an add backward) of
 * the part that is the input's.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc pad_attrs[] = {
    {.name = "pads",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, pad.pads),
     .count = 0,
     .count_offset = offsetof(sf_op_params, pad.n_pads),
     .max_count = 2 * SF_MAX_DIMS},
};

static sf_status pad_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                           int *n_out, sf_error *err) {
    (void)n_in;
    const sf_pad_params *q = &p->pad;
    int nd = in[0].ndim;
    char a[96];
    if (q->n_pads != 2 * nd)
        return sf_error_set(err, SF_ERR_SHAPE, "pads has %d values for the input %s: %d expected",
                            q->n_pads, sf_shape_str(&in[0], a, sizeof a), 2 * nd);
    out[0] = in[0];
    for (int i = 0; i < nd; i++) {
        int64_t b = q->pads[i], e = q->pads[nd + i];
        if (b < 0 || e < 0 || b > SF_MAX_EXTENT || e > SF_MAX_EXTENT)
            return sf_error_set(err, SF_ERR_INVALID,
                                "pads %lld and %lld of dimension %d: each must be in [0, 2^31]",
                                (long long)b, (long long)e, i);
        if (i == 0 && (b || e))
            return sf_error_set(err, SF_ERR_UNSUPPORTED,
                                "pads the batch (%lld before, %lld after): soapflow keeps "
                                "samples apart",
                                (long long)b, (long long)e);
        out[0].d[i] += b + e;
        if (out[0].d[i] > SF_MAX_EXTENT)
            return sf_error_set(err, SF_ERR_RANGE, "dimension %d comes to more than 2^31", i);
    }
    *n_out = 1;
    return SF_OK;
}

static void pad_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void pad_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_shape *in = &op->in_shapes[0];
    *r = *t;
    for (int i = 0; i < in->ndim; i++) {
        int64_t b = op->params.pad.pads[i];
        int64_t lo = t->lo[i] - b, hi = t->hi[i] - b;
        lo = lo < 0 ? 0 : lo > in->d[i] ? in->d[i] : lo;
        hi = hi < lo ? lo : hi > in->d[i] ? in->d[i] : hi;
        r->lo[i] = lo;
        r->hi[i] = hi;
    }
}

static void pad_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    sf_tile r;
    pad_region(op, t, 0, &r);
    double b = (double)(sf_tile_numel(t) + sf_tile_numel(&r)) * SF_ELEM_BYTES;
    c->bytes_fwd = b;
    c->bytes_bwd = b;
}

static void pad_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

/* Region strides (row-major over its own extents). */
static void region_strides(const sf_tile *r, int64_t *st) {
    int64_t s = 1;
    for (int i = r->ndim - 1; i >= 0; i--) {
        st[i] = s;
        s *= r->hi[i] - r->lo[i];
    }
}

static sf_status pad_ref(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    int nd = t->ndim;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    int64_t st[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(t);
    region_strides(r, st);
    for (int64_t e = 0; e < n; e++) {
        int64_t o = 0;
        int inside = 1;
        for (int i = 0; i < nd && inside; i++) {
            int64_t g = t->lo[i] + idx[i] - a->op->params.pad.pads[i];
            inside = g >= r->lo[i] && g < r->hi[i];
            o += (g - r->lo[i]) * st[i];
        }
        if (backward) {
            if (inside) dx[o] += a->grad_out[0][e];
        } else {
            a->out[0][e] = inside ? a->in[0][o] : 0.0f;
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status pad_fwd_ref(const sf_kernel_args *a) { return pad_ref(a, 0); }
static sf_status pad_bwd_ref(const sf_kernel_args *a) { return pad_ref(a, 1); }

static sf_status pad_fast(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    int nd = t->ndim, last = nd - 1;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    const int64_t *pads = a->op->params.pad.pads;
    int64_t st[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    region_strides(r, st);
    int64_t len = t->hi[last] - t->lo[last], n = sf_tile_numel(t);
    if (n == 0) return SF_OK;
    /* the columns of a row that are the input's: [c0, c1) of the tile's row */
    int64_t c0 = r->lo[last] + pads[last] - t->lo[last],
            c1 = r->hi[last] + pads[last] - t->lo[last];
    if (r->hi[last] <= r->lo[last]) c0 = c1 = 0;
    for (int64_t row = 0; row < n / len; row++) {
        int64_t o = 0;
        int inside = c1 > c0;
        for (int i = 0; i < last && inside; i++) {
            int64_t g = t->lo[i] + idx[i] - pads[i];
            inside = g >= r->lo[i] && g < r->hi[i];
            o += (g - r->lo[i]) * st[i];
        }
        if (backward) {
            if (inside) {
                const float *restrict g = a->grad_out[0] + row * len + c0;
                float *restrict d = dx + o;
                for (int64_t j = 0; j < c1 - c0; j++) d[j] += g[j];
            }
        } else {
            float *y = a->out[0] + row * len;
            if (!inside) {
                memset(y, 0, (size_t)len * sizeof *y);
            } else {
                memset(y, 0, (size_t)c0 * sizeof *y);
                memcpy(y + c0, a->in[0] + o, (size_t)(c1 - c0) * sizeof *y);
                memset(y + c1, 0, (size_t)(len - c1) * sizeof *y);
            }
        }
        for (int i = last - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status pad_fwd_fast(const sf_kernel_args *a) { return pad_fast(a, 0); }
static sf_status pad_bwd_fast(const sf_kernel_args *a) { return pad_fast(a, 1); }

const sf_op_class sf_op_pad_class = {
    .type = SF_OP_PAD,
    .name = "pad",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = pad_attrs,
    .n_attrs = (int)(sizeof pad_attrs / sizeof pad_attrs[0]),
    .infer = pad_infer,
    .space = pad_space,
    .region = pad_region,
    .cost = pad_cost,
    .memory = pad_memory,
    .fwd_ref = pad_fwd_ref,
    .fwd_fast = pad_fwd_fast,
    .bwd_ref = pad_bwd_ref,
    .bwd_fast = pad_bwd_fast,
};
