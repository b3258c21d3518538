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
 *
 * Kernels (buffers in soapflow/kernels.h): output element at tile offset idx
 * reads input k at idx with every broadcast dimension (size 1 in that input)
 * replaced by 0 - the region holds [0, 1) there and the tile's range elsewhere.
 * So an input is addressed with strides in its region that are 0 along its
 * broadcast dimensions. Backward: add gives da += dy, db += dy; mul gives
 * da += dy * b, db += dy * a; a broadcast input's gradient sums every output
 * element that read the same input element (the reduction over the broadcast
 * dimensions). The reference walks the tile element by element with a
 * multi-index; the fast kernels walk rows of the last dimension with the row
 * bases hoisted, and pick one of the inner loops specialised on the inputs'
 * last-dimension strides (1 or 0), which are contiguous (or a scalar) and so
 * vectorize; a stride-0 gradient row is a sum. When both inputs have stride 0
 * along the last dimension the output is a broadcast scalar per row.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
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

/* ---- kernels ----------------------------------------------------------- */

/* Strides (elements) of input k's region buffer, indexed by tile dimension:
 * 0 along the input's broadcast dimensions. */
static void binary_strides(const sf_kernel_args *a, int k, int64_t *st) {
    const sf_tile *r = &a->in_region[k];
    int nd = a->tile.ndim;
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int64_t ext = r->hi[i] - r->lo[i];
        st[i] = a->op->in_shapes[k].d[i] == 1 ? 0 : s;
        s *= ext;
    }
}

/* Advance the multi-index idx over extents ext (row-major); 0 after the last. */
static int next_index(int64_t *idx, const int64_t *ext, int nd) {
    for (int i = nd - 1; i >= 0; i--) {
        if (++idx[i] < ext[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

/* y (tile) = a op b, element by element with the broadcast multi-index. */
static sf_status binary_fwd_ref(const sf_kernel_args *a) {
    int nd = a->tile.ndim, mul = a->op->type == SF_OP_MUL;
    int64_t sa[SF_MAX_DIMS], sb[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    binary_strides(a, 0, sa);
    binary_strides(a, 1, sb);
    for (int i = 0; i < nd; i++) ext[i] = a->tile.hi[i] - a->tile.lo[i];
    float *y = a->out[0];
    int64_t e = 0;
    do {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < nd; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        float va = a->in[0][oa], vb = a->in[1][ob];
        y[e++] = mul ? va * vb : va + vb;
    } while (next_index(idx, ext, nd));
    return SF_OK;
}

/* da += dy (* b), db += dy (* a), summed where an input was broadcast. */
static sf_status binary_bwd_ref(const sf_kernel_args *a) {
    if (!a->grad_in) return SF_OK;
    int nd = a->tile.ndim, mul = a->op->type == SF_OP_MUL;
    int64_t sa[SF_MAX_DIMS], sb[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    binary_strides(a, 0, sa);
    binary_strides(a, 1, sb);
    for (int i = 0; i < nd; i++) ext[i] = a->tile.hi[i] - a->tile.lo[i];
    const float *dy = a->grad_out[0];
    float *da = a->grad_in[0], *db = a->grad_in[1];
    int64_t e = 0;
    do {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < nd; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        float d = dy[e++];
        if (da) da[oa] += mul ? d * a->in[1][ob] : d;
        if (db) db[ob] += mul ? d * a->in[0][oa] : d;
    } while (next_index(idx, ext, nd));
    return SF_OK;
}

/* The rows of a tile: every dimension but the last, and each input's offset at
 * the start of the current row. */
typedef struct binary_rows {
    int nd;
    int64_t len;                 /* elements per row: the tile's last extent */
    int64_t la, lb;              /* inputs' strides along the last dimension: 1 or 0 */
    int64_t sa[SF_MAX_DIMS], sb[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS];
    int64_t oa, ob;              /* row bases in a and b */
} binary_rows;

static void binary_rows_init(const sf_kernel_args *a, binary_rows *w) {
    memset(w, 0, sizeof *w);
    w->nd = a->tile.ndim;
    binary_strides(a, 0, w->sa);
    binary_strides(a, 1, w->sb);
    for (int i = 0; i < w->nd; i++) w->ext[i] = a->tile.hi[i] - a->tile.lo[i];
    w->len = w->ext[w->nd - 1];
    w->la = w->sa[w->nd - 1];
    w->lb = w->sb[w->nd - 1];
}

/* Next row; 0 after the last. Bases are updated incrementally. */
static int binary_rows_next(binary_rows *w) {
    for (int i = w->nd - 2; i >= 0; i--) {
        w->oa += w->sa[i];
        w->ob += w->sb[i];
        if (++w->idx[i] < w->ext[i]) return 1;
        w->oa -= w->sa[i] * w->ext[i];
        w->ob -= w->sb[i] * w->ext[i];
        w->idx[i] = 0;
    }
    return 0;
}

static void row_add(int64_t n, const float *restrict x, int64_t lx, const float *restrict z,
                    int64_t lz, float *restrict y) {
    if (lx && lz) {
        for (int64_t j = 0; j < n; j++) y[j] = x[j] + z[j];
    } else if (lx) {
        const float c = z[0];
        for (int64_t j = 0; j < n; j++) y[j] = x[j] + c;
    } else if (lz) {
        const float c = x[0];
        for (int64_t j = 0; j < n; j++) y[j] = c + z[j];
    } else {
        const float c = x[0] + z[0];
        for (int64_t j = 0; j < n; j++) y[j] = c;
    }
}

static void row_mul(int64_t n, const float *restrict x, int64_t lx, const float *restrict z,
                    int64_t lz, float *restrict y) {
    if (lx && lz) {
        for (int64_t j = 0; j < n; j++) y[j] = x[j] * z[j];
    } else if (lx) {
        const float c = z[0];
        for (int64_t j = 0; j < n; j++) y[j] = x[j] * c;
    } else if (lz) {
        const float c = x[0];
        for (int64_t j = 0; j < n; j++) y[j] = c * z[j];
    } else {
        const float c = x[0] * z[0];
        for (int64_t j = 0; j < n; j++) y[j] = c;
    }
}

static sf_status binary_fwd_fast(const sf_kernel_args *a) {
    binary_rows w;
    binary_rows_init(a, &w);
    const float *x = a->in[0], *z = a->in[1];
    float *y = a->out[0];
    int mul = a->op->type == SF_OP_MUL;
    do {
        if (mul) row_mul(w.len, x + w.oa, w.la, z + w.ob, w.lb, y);
        else row_add(w.len, x + w.oa, w.la, z + w.ob, w.lb, y);
        y += w.len;
    } while (binary_rows_next(&w));
    return SF_OK;
}

/* g (n elements at stride lg: 1, or 0 for a broadcast row that sums) += dy * o,
 * where o is the other input's row (stride lo; NULL for add: o = 1). */
static void row_grad(int64_t n, const float *restrict dy, const float *restrict o, int64_t lo,
                     float *restrict g, int64_t lg) {
    if (lg) {
        if (!o) {
            for (int64_t j = 0; j < n; j++) g[j] += dy[j];
        } else if (lo) {
            for (int64_t j = 0; j < n; j++) g[j] += dy[j] * o[j];
        } else {
            const float c = o[0];
            for (int64_t j = 0; j < n; j++) g[j] += dy[j] * c;
        }
        return;
    }
    float s = 0.0f;
    if (!o) {
        for (int64_t j = 0; j < n; j++) s += dy[j];
    } else if (lo) {
        for (int64_t j = 0; j < n; j++) s += dy[j] * o[j];
    } else {
        for (int64_t j = 0; j < n; j++) s += dy[j];
        s *= o[0];
    }
    g[0] += s;
}

static sf_status binary_bwd_fast(const sf_kernel_args *a) {
    if (!a->grad_in) return SF_OK;
    float *da = a->grad_in[0], *db = a->grad_in[1];
    if (!da && !db) return SF_OK;
    binary_rows w;
    binary_rows_init(a, &w);
    const float *x = a->in[0], *z = a->in[1], *dy = a->grad_out[0];
    int mul = a->op->type == SF_OP_MUL;
    do {
        if (da) row_grad(w.len, dy, mul ? z + w.ob : NULL, w.lb, da + w.oa, w.la);
        if (db) row_grad(w.len, dy, mul ? x + w.oa : NULL, w.la, db + w.ob, w.lb);
        dy += w.len;
    } while (binary_rows_next(&w));
    return SF_OK;
}

/* add saves nothing and may run in place over input 0 (a residual's `out +=
 * identity`); mul saves both inputs (binary_memory). */
static unsigned binary_saves(const sf_op *op) {
    return op->type == SF_OP_MUL ? SF_SAVES_INPUT(0) | SF_SAVES_INPUT(1) : SF_SAVES_IN_PLACE;
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
    .saves = binary_saves,
    .fwd_ref = binary_fwd_ref,
    .fwd_fast = binary_fwd_fast,
    .bwd_ref = binary_bwd_ref,
    .bwd_fast = binary_bwd_fast,
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
    .saves = binary_saves,
    .fwd_ref = binary_fwd_ref,
    .fwd_fast = binary_fwd_fast,
    .bwd_ref = binary_bwd_ref,
    .bwd_fast = binary_bwd_fast,
};
