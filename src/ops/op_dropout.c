/*
 * op_dropout.c - dropout: zero each element with probability p, scale the rest
 * by 1 / (1 - p) (inverted dropout, as PyTorch does in training).
 *
 * Any rank; the output has the input's shape and a tile needs exactly its own
 * region. Parallel space as for activations: dimension 0 is the sample, the
 * others attributes. FLOPs per element: forward 2 (compare a random number with
 * p, multiply by the mask and the scale), backward 1 (multiply by the saved
 * mask, scale folded in). Random number generation is not counted. Bytes: the
 * forward pass reads the input and writes the output and a 4-byte mask; the
 * backward pass reads the output gradient and the mask and writes the input
 * gradient.
 *
 * Kernels (buffers in soapflow/kernels.h): the mask is not a stored tensor but a
 * counter-based hash: element e (its global row-major index in the whole output
 * tensor) is kept when the top 24 bits of splitmix64(key + e * golden) are at
 * least p * 2^24, with key = splitmix64(seed ^ op id * golden) and seed the
 * kernel argument. So the mask depends only on (seed, operator, element), any
 * tiling of the tensor draws the same one, and backward recomputes it rather
 * than reading a saved one; the runtime passes one seed per iteration to the
 * forward and backward of every dropout (the operator id makes two dropout layers
 * differ). Kept elements are scaled by 1 / (1 - p); p = 0 keeps every element
 * with scale 1, the identity. The comparison is in integers, so reference and
 * fast kernels agree on every bit of the mask. The reference computes the global
 * index of each element from its multi-index; the fast kernels hoist it per row
 * of the last dimension, and the row loop (integer hash, select, multiply)
 * vectorizes. Both multiply every element by its factor (0 or the scale), so a
 * dropped NaN stays NaN as in PyTorch (input * mask), bit for bit alike.
 * In inference mode (a->eval) dropout is the identity, as after module.eval().
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc dropout_attrs[] = {
    {.name = "p", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, dropout.p)},
};

static void dropout_defaults(sf_op_params *p) { p->dropout.p = 0.5; }

static sf_status dropout_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                               int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 1)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 1 dimension, got 0");
    if (!(p->dropout.p >= 0 && p->dropout.p < 1))
        return sf_error_set(err, SF_ERR_INVALID, "p must be in [0, 1), got %g", p->dropout.p);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void dropout_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void dropout_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void dropout_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = 2 * n;
    cost->flops_bwd = n;
    cost->bytes_fwd = 3 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 3 * n * SF_ELEM_BYTES;
}

/* ---- kernels ----------------------------------------------------------- */

/* What a kernel call needs to draw the mask. */
typedef struct dropout_mask {
    uint64_t key;       /* hash of (seed, operator) */
    uint64_t threshold; /* keep when the 24-bit draw is >= this */
    float scale;        /* 1 / (1 - p) */
} dropout_mask;

static dropout_mask dropout_mask_get(const sf_kernel_args *a) {
    double p = a->op->params.dropout.p;
    dropout_mask m;
    m.key = sf_drop_key(a->seed, a->op->id);
    m.threshold = sf_drop_threshold(p);
    m.scale = (float)(1.0 / (1.0 - p));
    return m;
}

/* 1 when global element e is kept. */
static inline int dropout_keep(const dropout_mask *m, uint64_t e) {
    return sf_drop_keep(m->key, m->threshold, e);
}

/* forward: y = x * keep * scale; backward: dx += dy * keep * scale */
static void dropout_ref(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    const sf_shape *s = &a->op->out_shapes[0];
    dropout_mask m = dropout_mask_get(a);
    int nd = t->ndim;
    int64_t idx[SF_MAX_DIMS] = {0}, n = sf_tile_numel(t);
    for (int64_t e = 0; e < n; e++) {
        int64_t g = 0;
        for (int i = 0; i < nd; i++) g = g * s->d[i] + t->lo[i] + idx[i];
        float f = dropout_keep(&m, (uint64_t)g) ? m.scale : 0.0f;
        if (!backward)
            a->out[0][e] = a->in[0][e] * f;
        else
            a->grad_in[0][e] += a->grad_out[0][e] * f;
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

/* Inference mode: the identity, y = x (backward dx += dy), as module.eval(). */
static void dropout_eval(const sf_kernel_args *a, int backward) {
    int64_t n = sf_tile_numel(&a->tile);
    if (!backward) {
        memcpy(a->out[0], a->in[0], (size_t)n * sizeof(float));
    } else {
        const float *restrict dy = a->grad_out[0];
        float *restrict dx = a->grad_in[0];
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
    }
}

static sf_status dropout_fwd_ref(const sf_kernel_args *a) {
    if (a->eval)
        dropout_eval(a, 0);
    else
        dropout_ref(a, 0);
    return SF_OK;
}

static sf_status dropout_bwd_ref(const sf_kernel_args *a) {
    if (a->grad_in && a->grad_in[0]) {
        if (a->eval)
            dropout_eval(a, 1);
        else
            dropout_ref(a, 1);
    }
    return SF_OK;
}

/* dst[j] (+)= src[j] * keep(g0 + j) * scale over one row */
static void dropout_row(const dropout_mask *m, uint64_t g0, int64_t len, const float *restrict src,
                        float *restrict dst, int accumulate) {
    const uint64_t key = m->key, thr = m->threshold;
    const float scale = m->scale;
    if (!accumulate) {
        for (int64_t j = 0; j < len; j++) {
            uint64_t h = sf_splitmix64(key + (g0 + (uint64_t)j) * SF_DROP_GOLDEN);
            dst[j] = src[j] * ((h >> 40) >= thr ? scale : 0.0f);
        }
    } else {
        for (int64_t j = 0; j < len; j++) {
            uint64_t h = sf_splitmix64(key + (g0 + (uint64_t)j) * SF_DROP_GOLDEN);
            dst[j] += src[j] * ((h >> 40) >= thr ? scale : 0.0f);
        }
    }
}

static void dropout_fast(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    const sf_shape *s = &a->op->out_shapes[0];
    dropout_mask m = dropout_mask_get(a);
    int nd = t->ndim;
    int64_t len = t->hi[nd - 1] - t->lo[nd - 1], rows = sf_tile_numel(t) / len;
    const float *src = backward ? a->grad_out[0] : a->in[0];
    float *dst = backward ? a->grad_in[0] : a->out[0];
    int64_t idx[SF_MAX_DIMS] = {0};
    for (int64_t q = 0; q < rows; q++) {
        int64_t g = 0;
        for (int i = 0; i < nd; i++) g = g * s->d[i] + t->lo[i] + (i < nd - 1 ? idx[i] : 0);
        dropout_row(&m, (uint64_t)g, len, src + q * len, dst + q * len, backward);
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

static sf_status dropout_fwd_fast(const sf_kernel_args *a) {
    if (a->eval)
        dropout_eval(a, 0);
    else
        dropout_fast(a, 0);
    return SF_OK;
}

static sf_status dropout_bwd_fast(const sf_kernel_args *a) {
    if (a->grad_in && a->grad_in[0]) {
        if (a->eval)
            dropout_eval(a, 1);
        else
            dropout_fast(a, 1);
    }
    return SF_OK;
}

/* The backward needs the mask alone (PyTorch's native_dropout keeps it, one
 * byte an element), neither the input nor the output. */
static unsigned dropout_saves(const sf_op *op) {
    (void)op;
    return 0;
}

static void dropout_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    sf_tile r;
    dropout_region(op, t, 0, &r);
    double n = (double)sf_tile_numel(t);
    m->output_bytes = n * SF_ELEM_BYTES;
    /* saved beyond the input: the mask (sf_op_saved_extra_bytes) */
    m->saved_bytes = (double)sf_tile_numel(&r) * SF_ELEM_BYTES + n;
}

const sf_op_class sf_op_dropout_class = {
    .type = SF_OP_DROPOUT,
    .name = "dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = dropout_attrs,
    .n_attrs = (int)(sizeof dropout_attrs / sizeof dropout_attrs[0]),
    .defaults = dropout_defaults,
    .infer = dropout_infer,
    .space = dropout_space,
    .region = dropout_region,
    .cost = dropout_cost,
    .memory = dropout_memory,
    .saves = dropout_saves,
    .fwd_ref = dropout_fwd_ref,
    .fwd_fast = dropout_fwd_fast,
    .bwd_ref = dropout_bwd_ref,
    .bwd_fast = dropout_bwd_fast,
};
