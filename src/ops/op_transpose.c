/*
 * op_transpose.c - a permutation of the input's dimensions (torch's permute,
 * ONNX Transpose): output dimension k is input dimension perm[k].
 *
 * The batch stays dimension 0 (perm[0] is 0), as everywhere in soapflow; the
 * other dimensions move freely: ConvNeXt's NHWC layer norm (permute(0, 2, 3, 1),
 * LayerNorm over C, permute back), ShuffleNet's channel shuffle (reshape to
 * (N, g, C/g, H, W), swap the two channel dimensions, reshape back), a head
 * reshape's (N, T, h, d) to (N, h, T, d).
 *
 * Parallel space: the output; dimension 0 is the sample, the others attributes:
 * an output tile is the input rectangle with its ranges permuted back
 * (input dimension perm[k] gets the tile's range along k), so every split is a
 * rectangle of the input and runs exactly.
 *
 * No FLOPs; bytes: the tile read and written, forward and backward. Nothing is
 * saved for backward.
 *
 * Kernels (buffers in soapflow/kernels.h): the input region holds the permuted
 * tile; output element idx reads region element sum_k idx[k] * s[perm[k]] (s the
 * region's row-major strides). Backward adds the output gradient to the input
 * gradient at the same places. The reference computes every offset from the
 * multi-index; the fast kernels walk rows of the output's last dimension with
 * the offset kept incrementally, an inner loop at a fixed input stride (1 when
 * the last dimension stays last: a copy).
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc transpose_attrs[] = {
    {.name = "perm",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, transpose.perm),
     .count = 0,
     .count_offset = offsetof(sf_op_params, transpose.ndim),
     .max_count = SF_MAX_DIMS},
};

static sf_status transpose_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                                 int *n_out, sf_error *err) {
    (void)n_in;
    const sf_transpose_params *q = &p->transpose;
    char a[96];
    if (q->ndim != in[0].ndim)
        return sf_error_set(err, SF_ERR_SHAPE, "perm has %d entries for the input %s of rank %d",
                            q->ndim, sf_shape_str(&in[0], a, sizeof a), in[0].ndim);
    int seen[SF_MAX_DIMS] = {0};
    for (int k = 0; k < q->ndim; k++) {
        if (q->perm[k] < 0 || q->perm[k] >= q->ndim || seen[q->perm[k]]++)
            return sf_error_set(err, SF_ERR_INVALID,
                                "perm is not a permutation of 0..%d (entry %d is %lld)",
                                q->ndim - 1, k, (long long)q->perm[k]);
    }
    if (q->perm[0] != 0)
        return sf_error_set(err, SF_ERR_UNSUPPORTED,
                            "perm moves the batch (dimension 0 would be input dimension %lld): "
                            "soapflow keeps the batch first",
                            (long long)q->perm[0]);
    out[0] = in[0];
    for (int k = 0; k < q->ndim; k++) out[0].d[k] = in[0].d[q->perm[k]];
    *n_out = 1;
    return SF_OK;
}

static void transpose_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void transpose_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_transpose_params *q = &op->params.transpose;
    *r = *t;
    for (int k = 0; k < q->ndim; k++) {
        r->lo[q->perm[k]] = t->lo[k];
        r->hi[q->perm[k]] = t->hi[k];
    }
}

static void transpose_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    (void)op;
    double b = 2.0 * (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    c->bytes_fwd = b;
    c->bytes_bwd = b;
}

static void transpose_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

/* Input-region strides along the output's dimensions. */
static void transpose_strides(const sf_kernel_args *a, int64_t *st) {
    const sf_tile *r = &a->in_region[0];
    const sf_transpose_params *q = &a->op->params.transpose;
    int64_t rs[SF_MAX_DIMS], s = 1;
    for (int i = r->ndim - 1; i >= 0; i--) {
        rs[i] = s;
        s *= r->hi[i] - r->lo[i];
    }
    for (int k = 0; k < q->ndim; k++) st[k] = rs[q->perm[k]];
}

static sf_status transpose_ref(const sf_kernel_args *a, int backward) {
    int nd = a->tile.ndim;
    int64_t st[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(&a->tile);
    transpose_strides(a, st);
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    for (int64_t e = 0; e < n; e++) {
        int64_t o = 0;
        for (int k = 0; k < nd; k++) o += idx[k] * st[k];
        if (backward)
            dx[o] += a->grad_out[0][e];
        else
            a->out[0][e] = a->in[0][o];
        for (int k = nd - 1; k >= 0; k--) {
            if (++idx[k] < a->tile.hi[k] - a->tile.lo[k]) break;
            idx[k] = 0;
        }
    }
    return SF_OK;
}

static sf_status transpose_fwd_ref(const sf_kernel_args *a) { return transpose_ref(a, 0); }
static sf_status transpose_bwd_ref(const sf_kernel_args *a) { return transpose_ref(a, 1); }

static sf_status transpose_fast(const sf_kernel_args *a, int backward) {
    int nd = a->tile.ndim, last = nd - 1;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    int64_t st[SF_MAX_DIMS], ext[SF_MAX_DIMS] = {0}, idx[SF_MAX_DIMS] = {0};
    transpose_strides(a, st);
    for (int k = 0; k < nd; k++) ext[k] = a->tile.hi[k] - a->tile.lo[k];
    int64_t len = ext[last], n = sf_tile_numel(&a->tile), ls = st[last], base = 0;
    if (n == 0) return SF_OK;
    const float *x = a->in[0], *dy = backward ? a->grad_out[0] : NULL;
    float *y = backward ? NULL : a->out[0];
    for (int64_t row = 0; row < n / len; row++) {
        if (backward) {
            const float *restrict g = dy + row * len;
            float *restrict d = dx + base;
            if (ls == 1)
                for (int64_t j = 0; j < len; j++) d[j] += g[j];
            else
                for (int64_t j = 0; j < len; j++) d[j * ls] += g[j];
        } else {
            const float *restrict s = x + base;
            float *restrict o = y + row * len;
            if (ls == 1)
                memcpy(o, s, (size_t)len * sizeof *o);
            else
                for (int64_t j = 0; j < len; j++) o[j] = s[j * ls];
        }
        for (int k = last - 1; k >= 0; k--) {
            base += st[k];
            if (++idx[k] < ext[k]) break;
            base -= st[k] * ext[k];
            idx[k] = 0;
        }
    }
    return SF_OK;
}

static sf_status transpose_fwd_fast(const sf_kernel_args *a) { return transpose_fast(a, 0); }
static sf_status transpose_bwd_fast(const sf_kernel_args *a) { return transpose_fast(a, 1); }

/* Nothing saved: the backward transposes the gradient back (a view in PyTorch). */
static unsigned transpose_saves(const sf_op *op) {
    (void)op;
    return 0;
}

const sf_op_class sf_op_transpose_class = {
    .type = SF_OP_TRANSPOSE,
    .name = "transpose",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = transpose_attrs,
    .n_attrs = (int)(sizeof transpose_attrs / sizeof transpose_attrs[0]),
    .infer = transpose_infer,
    .space = transpose_space,
    .region = transpose_region,
    .cost = transpose_cost,
    .saves = transpose_saves,
    .memory = transpose_memory,
    .fwd_ref = transpose_fwd_ref,
    .fwd_fast = transpose_fwd_fast,
    .bwd_ref = transpose_bwd_ref,
    .bwd_fast = transpose_bwd_fast,
};
