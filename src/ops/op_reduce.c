/*
 * op_reduce.c - reduce_mean: the mean of the input over some of its dimensions
 * (torch's x.mean(dims, keepdim), ONNX ReduceMean), never the batch.
 *
 * Attributes: `axes`, the input dimensions averaged over (increasing, each in
 * 1..rank-1), and `keepdims` (ONNX's default 1: they stay, of size 1; 0: they
 * go). MnasNet and EfficientNet-style heads write x.mean([2, 3]) where others
 * write a global average pool; a transformer's mean over tokens is x.mean(1).
 *
 * Parallel space: the output. Dimension 0 is the sample, the kept dimensions are
 * attributes; a reduced dimension kept as size 1 cannot be split (it has one
 * position). A tile needs the input rows of its kept ranges and the whole of
 * every reduced dimension. (Splitting a reduced dimension would make the parts
 * partial sums, which the task graph could reduce as it does a linear's input
 * features; it is not offered yet.)
 *
 * FLOPs: forward one add per input element of the region and one multiply per
 * output element (by 1 / count); backward one multiply-add per input element
 * (dx += dy / count). Bytes: the region and the tile. Nothing is saved.
 *
 * Kernels (buffers in soapflow/kernels.h): input element e of the region adds to
 * the output element with the same kept coordinates. The reference computes
 * each offset from the multi-index and divides at the end; the fast kernels walk
 * the region in order, rows of its last dimension, with the output offset kept
 * incrementally (0 stride along reduced dimensions): a row sum into one output
 * when the last dimension is reduced, a vector add otherwise, then one scaling
 * pass. Backward spreads dy / count the same way.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc reduce_attrs[] = {
    {.name = "axes",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, reduce.axes),
     .count = 0,
     .count_offset = offsetof(sf_op_params, reduce.n_axes),
     .max_count = SF_MAX_DIMS},
    {.name = "keepdims", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, reduce.keepdims)},
};

static void reduce_defaults(sf_op_params *p) { p->reduce.keepdims = 1; }

/* 1 when input dimension i is averaged over. */
static int reduced(const sf_reduce_params *q, int i) {
    for (int k = 0; k < q->n_axes; k++)
        if (q->axes[k] == i) return 1;
    return 0;
}

static sf_status reduce_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_reduce_params *q = &p->reduce;
    int nd = in[0].ndim;
    char a[96];
    if (q->n_axes < 1 || q->n_axes >= nd)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%d axes for the input %s: 1 to %d (the batch is never averaged)",
                            q->n_axes, sf_shape_str(&in[0], a, sizeof a), nd - 1);
    for (int k = 0; k < q->n_axes; k++) {
        if (q->axes[k] < 1 || q->axes[k] >= nd)
            return sf_error_set(err, SF_ERR_INVALID,
                                "axis %lld of the input %s: axes are 1 to %d (not the batch)",
                                (long long)q->axes[k], sf_shape_str(&in[0], a, sizeof a), nd - 1);
        if (k && q->axes[k] <= q->axes[k - 1])
            return sf_error_set(err, SF_ERR_INVALID, "axes must increase (%lld after %lld)",
                                (long long)q->axes[k], (long long)q->axes[k - 1]);
    }
    out[0].ndim = 0;
    for (int i = 0; i < nd; i++) {
        if (!reduced(q, i))
            out[0].d[out[0].ndim++] = in[0].d[i];
        else if (q->keepdims)
            out[0].d[out[0].ndim++] = 1;
    }
    *n_out = 1;
    return SF_OK;
}

/* For each input dimension, the output dimension that holds it (-1: gone). */
static void reduce_map(const sf_op *op, int *od) {
    const sf_reduce_params *q = &op->params.reduce;
    int m = 0;
    for (int i = 0; i < op->in_shapes[0].ndim; i++)
        od[i] = !reduced(q, i) || q->keepdims ? m++ : -1;
}

static void reduce_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int od[SF_MAX_DIMS];
    reduce_map(op, od);
    for (int i = 0; i < space->ndim; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    for (int i = 0; i < op->in_shapes[0].ndim; i++)
        if (reduced(&op->params.reduce, i) && od[i] >= 0) kinds[od[i]] = SF_DIM_NONE;
    kinds[0] = SF_DIM_SAMPLE;
}

static void reduce_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_shape *in = &op->in_shapes[0];
    int od[SF_MAX_DIMS];
    reduce_map(op, od);
    r->ndim = in->ndim;
    for (int i = 0; i < in->ndim; i++) {
        if (reduced(&op->params.reduce, i)) {
            r->lo[i] = 0;
            r->hi[i] = in->d[i];
        } else {
            r->lo[i] = t->lo[od[i]];
            r->hi[i] = t->hi[od[i]];
        }
    }
    if (sf_tile_numel(t) == 0) /* an empty tile reads nothing */
        for (int i = 0; i < in->ndim; i++) r->lo[i] = r->hi[i] = 0;
}

static void reduce_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    sf_tile r;
    reduce_region(op, t, 0, &r);
    double n_in = (double)sf_tile_numel(&r), n_out = (double)sf_tile_numel(t);
    c->flops_fwd = n_in + n_out;
    c->flops_bwd = 2 * n_in;
    c->bytes_fwd = (n_in + n_out) * SF_ELEM_BYTES;
    c->bytes_bwd = (n_in + n_out) * SF_ELEM_BYTES;
}

static void reduce_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

/* Elements averaged into each output. */
static int64_t reduce_count(const sf_op *op) {
    int64_t n = 1;
    for (int k = 0; k < op->params.reduce.n_axes; k++)
        n *= op->in_shapes[0].d[op->params.reduce.axes[k]];
    return n;
}

/* Strides, along the input region's dimensions, of the region itself and of
 * the output tile (0 along reduced dimensions). */
static void reduce_strides(const sf_kernel_args *a, int64_t *xs, int64_t *os) {
    const sf_tile *r = &a->in_region[0], *t = &a->tile;
    int od[SF_MAX_DIMS], nd = r->ndim;
    reduce_map(a->op, od);
    int64_t ts[SF_MAX_DIMS], s = 1;
    for (int k = t->ndim - 1; k >= 0; k--) {
        ts[k] = s;
        s *= t->hi[k] - t->lo[k];
    }
    s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        xs[i] = s;
        s *= r->hi[i] - r->lo[i];
        os[i] = reduced(&a->op->params.reduce, i) ? 0 : ts[od[i]];
    }
}

/* The reference: every input element added to its output at the offset of its
 * kept coordinates, then the division. */
static sf_status reduce_ref(const sf_kernel_args *a, int backward) {
    const sf_tile *r = &a->in_region[0];
    int nd = r->ndim;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    int64_t xs[SF_MAX_DIMS], os[SF_MAX_DIMS], ext[SF_MAX_DIMS], n_out = sf_tile_numel(&a->tile);
    reduce_strides(a, xs, os);
    for (int i = 0; i < nd; i++) ext[i] = r->hi[i] - r->lo[i];
    double count = (double)reduce_count(a->op);
    int64_t n_in = sf_tile_numel(r), idx[SF_MAX_DIMS] = {0};
    if (!backward)
        for (int64_t q = 0; q < n_out; q++) a->out[0][q] = 0.0f;
    for (int64_t e = 0; e < n_in; e++) {
        int64_t o = 0;
        for (int i = 0; i < nd; i++) o += idx[i] * os[i];
        if (backward)
            dx[e] += (float)(a->grad_out[0][o] / count);
        else
            a->out[0][o] += a->in[0][e];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < ext[i]) break;
            idx[i] = 0;
        }
    }
    if (!backward)
        for (int64_t q = 0; q < n_out; q++) a->out[0][q] = (float)(a->out[0][q] / count);
    return SF_OK;
}

static sf_status reduce_fwd_ref(const sf_kernel_args *a) { return reduce_ref(a, 0); }
static sf_status reduce_bwd_ref(const sf_kernel_args *a) { return reduce_ref(a, 1); }

static sf_status reduce_fast(const sf_kernel_args *a, int backward) {
    const sf_tile *r = &a->in_region[0];
    int nd = r->ndim, last = nd - 1;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    int64_t xs[SF_MAX_DIMS], os[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    reduce_strides(a, xs, os);
    for (int i = 0; i < nd; i++) ext[i] = r->hi[i] - r->lo[i];
    int64_t n_in = sf_tile_numel(r), n_out = sf_tile_numel(&a->tile), len = ext[last];
    const float inv = (float)(1.0 / (double)reduce_count(a->op));
    if (!backward) memset(a->out[0], 0, (size_t)n_out * sizeof(float));
    if (n_in == 0) return SF_OK;
    int64_t o = 0, lo = os[last];
    for (int64_t row = 0; row < n_in / len; row++) {
        const int64_t off = row * len;
        if (!backward) {
            const float *restrict x = a->in[0] + off;
            float *restrict y = a->out[0] + o;
            if (lo) {
                for (int64_t j = 0; j < len; j++) y[j] += x[j];
            } else {
                float s = 0.0f;
                for (int64_t j = 0; j < len; j++) s += x[j];
                y[0] += s;
            }
        } else {
            const float *restrict g = a->grad_out[0] + o;
            float *restrict d = dx + off;
            if (lo)
                for (int64_t j = 0; j < len; j++) d[j] += g[j] * inv;
            else
                for (int64_t j = 0; j < len; j++) d[j] += g[0] * inv;
        }
        for (int i = last - 1; i >= 0; i--) {
            o += os[i];
            if (++idx[i] < ext[i]) break;
            o -= os[i] * ext[i];
            idx[i] = 0;
        }
    }
    if (!backward)
        for (int64_t q = 0; q < n_out; q++) a->out[0][q] *= inv;
    return SF_OK;
}

static sf_status reduce_fwd_fast(const sf_kernel_args *a) { return reduce_fast(a, 0); }
static sf_status reduce_bwd_fast(const sf_kernel_args *a) { return reduce_fast(a, 1); }

const sf_op_class sf_op_reduce_mean_class = {
    .type = SF_OP_REDUCE_MEAN,
    .name = "reduce_mean",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = (int)(sizeof reduce_attrs / sizeof reduce_attrs[0]),
    .defaults = reduce_defaults,
    .infer = reduce_infer,
    .space = reduce_space,
    .region = reduce_region,
    .cost = reduce_cost,
    .memory = reduce_memory,
    .fwd_ref = reduce_fwd_ref,
    .fwd_fast = reduce_fwd_fast,
    .bwd_ref = reduce_bwd_ref,
    .bwd_fast = reduce_bwd_fast,
};
