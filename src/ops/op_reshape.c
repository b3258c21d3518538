/*
 * op_reshape.c - reshape and flatten: the same elements under another shape.
 *
 * reshape takes a target shape where 0 copies the input's dimension at that
 * position and -1 (at most one) is inferred from the element count, as in ONNX.
 * flatten is torch.flatten(x, start_dim): dimensions start_dim.. merge into one.
 *
 * Both must keep dimension 0, the batch: the planner splits samples through a
 * reshape, and a sample range of the output is then the same sample range of the
 * input. Other dimensions are merged or cut, so an output tile of them maps to no
 * rectangle of the input in general; they are not split (SF_DIM_NONE), and a
 * tile needs its samples with everything else of the input. A reshape is a view:
 * no FLOPs, no bytes moved, nothing saved for the backward pass.
 *
 * Kernels (buffers in soapflow/kernels.h): the runtime keeps every tile in its
 * own buffer, so the kernels copy (forward) and add back (backward). Input and
 * output share the row-major order of elements: output element at global flat
 * index G is input element G, which lies at G - n0 * (elements per sample) in
 * the region (samples [n0, n1), everything else). The reference applies that
 * to every element of the tile; the fast kernels copy one memcpy when the tile
 * holds whole samples (the only tiles the planner makes) and one contiguous run
 * per row of the last dimension otherwise.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc reshape_attrs[] = {
    {.name = "shape",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, reshape.shape),
     .count = 0,
     .count_offset = offsetof(sf_op_params, reshape.ndim),
     .max_count = SF_MAX_DIMS},
};

static const sf_attr_desc flatten_attrs[] = {
    {.name = "start_dim",
     .type = SF_ATTR_SMALLINT,
     .offset = offsetof(sf_op_params, flatten.start_dim)},
};

static void flatten_defaults(sf_op_params *p) { p->flatten.start_dim = 1; }

static sf_status reshape_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                               int *n_out, sf_error *err) {
    (void)n_in;
    const sf_reshape_params *q = &p->reshape;
    char a[96], b[96];
    if (q->ndim < 1 || q->ndim > SF_MAX_DIMS)
        return sf_error_set(err, SF_ERR_INVALID, "target shape must have 1..%d dimensions, got %d",
                            SF_MAX_DIMS, q->ndim);
    if (in[0].ndim < 1) return sf_error_set(err, SF_ERR_SHAPE, "input must have a batch dimension");
    sf_shape s = sf_shape_make(q->ndim, q->shape);
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] == -1) {
            if (infer_at >= 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "target shape has more than one -1 (dimensions %d and %d)",
                                    infer_at, i);
            infer_at = i;
            continue;
        }
        if (s.d[i] == 0) {
            if (i >= in[0].ndim)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "target dimension %d is 0 (copy) but the input has only %d",
                                    i, in[0].ndim);
            s.d[i] = in[0].d[i];
        } else if (s.d[i] < 0) {
            return sf_error_set(err, SF_ERR_INVALID,
                                "target dimension %d is %lld; use >= 1, 0 (copy) or -1 (infer)", i,
                                (long long)s.d[i]);
        }
        if (sf_mul_overflow_i64(known, s.d[i], &known))
            return sf_error_set(err, SF_ERR_RANGE, "target shape overflows");
    }
    int64_t total = sf_shape_numel(&in[0]);
    if (infer_at >= 0) {
        if (total % known)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "cannot infer the -1 of the target: %lld elements of %s are not a "
                                "multiple of %lld",
                                (long long)total, sf_shape_str(&in[0], a, sizeof a),
                                (long long)known);
        s.d[infer_at] = total / known;
    } else if (known != total) {
        return sf_error_set(err, SF_ERR_SHAPE,
                            "element counts differ: input %s has %lld, target %s has %lld",
                            sf_shape_str(&in[0], a, sizeof a), (long long)total,
                            sf_shape_str(&s, b, sizeof b), (long long)known);
    }
    if (s.d[0] != in[0].d[0])
        return sf_error_set(err, SF_ERR_SHAPE,
                            "dimension 0 (the batch, %lld) must be kept, but the target %s "
                            "changes it",
                            (long long)in[0].d[0], sf_shape_str(&s, b, sizeof b));
    out[0] = s;
    *n_out = 1;
    return SF_OK;
}

static sf_status flatten_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                               int *n_out, sf_error *err) {
    (void)n_in;
    int nd = in[0].ndim, sd = p->flatten.start_dim;
    if (sd < 0) sd += nd;
    if (sd < 0 || sd >= nd)
        return sf_error_set(err, SF_ERR_INVALID, "start_dim %d out of range for a %d-D input",
                            p->flatten.start_dim, nd);
    if (sd == 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "start_dim 0 would merge dimension 0 (the batch); use start_dim >= 1");
    sf_shape s = in[0];
    s.ndim = sd + 1;
    for (int i = sd + 1; i < nd; i++) s.d[sd] *= in[0].d[i];
    for (int i = sd + 1; i < SF_MAX_DIMS; i++) s.d[i] = 0;
    out[0] = s;
    *n_out = 1;
    return SF_OK;
}

static void reshape_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_NONE;
}

static void reshape_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    sf_region_full(&op->in_shapes[0], r);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
}

static void reshape_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    (void)t;
    cost->flops_fwd = cost->flops_bwd = 0;
    cost->bytes_fwd = cost->bytes_bwd = 0;
}

static void reshape_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

/* ---- kernels ----------------------------------------------------------- */

/* Elements per sample, the same in the input and the output. */
static int64_t reshape_per_sample(const sf_op *op) {
    const sf_shape *os = &op->out_shapes[0];
    return sf_shape_numel(os) / os->d[0];
}

static void reshape_ref(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    const sf_shape *os = &a->op->out_shapes[0];
    int nd = t->ndim;
    int64_t base = t->lo[0] * reshape_per_sample(a->op), n = sf_tile_numel(t);
    int64_t idx[SF_MAX_DIMS] = {0};
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return;
    for (int64_t e = 0; e < n; e++) {
        int64_t g = 0;
        for (int i = 0; i < nd; i++) g = g * os->d[i] + t->lo[i] + idx[i];
        if (!backward) a->out[0][e] = a->in[0][g - base];
        else dx[g - base] += a->grad_out[0][e];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

static sf_status reshape_fwd_ref(const sf_kernel_args *a) {
    reshape_ref(a, 0);
    return SF_OK;
}

static sf_status reshape_bwd_ref(const sf_kernel_args *a) {
    reshape_ref(a, 1);
    return SF_OK;
}

static void reshape_fast(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile;
    const sf_shape *os = &a->op->out_shapes[0];
    int nd = t->ndim;
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return;
    int whole = 1;
    for (int i = 1; i < nd; i++) whole &= t->lo[i] == 0 && t->hi[i] == os->d[i];
    int64_t run = whole ? sf_tile_numel(t) : t->hi[nd - 1] - t->lo[nd - 1];
    int64_t rows = sf_tile_numel(t) / run, base = t->lo[0] * reshape_per_sample(a->op);
    int64_t idx[SF_MAX_DIMS] = {0};
    for (int64_t q = 0; q < rows; q++) {
        int64_t g = 0; /* global flat index of the row's first element */
        if (!whole)
            for (int i = 0; i < nd; i++) g = g * os->d[i] + t->lo[i] + (i < nd - 1 ? idx[i] : 0);
        else
            g = base;
        if (!backward) {
            memcpy(a->out[0] + q * run, a->in[0] + (g - base), (size_t)run * sizeof(float));
        } else {
            const float *restrict src = a->grad_out[0] + q * run;
            float *restrict dst = dx + (g - base);
            for (int64_t j = 0; j < run; j++) dst[j] += src[j];
        }
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < t->hi[i] - t->lo[i]) break;
            idx[i] = 0;
        }
    }
}

static sf_status reshape_fwd_fast(const sf_kernel_args *a) {
    reshape_fast(a, 0);
    return SF_OK;
}

static sf_status reshape_bwd_fast(const sf_kernel_args *a) {
    reshape_fast(a, 1);
    return SF_OK;
}

/* Nothing saved: a view in PyTorch, the backward reshapes the gradient. */
static unsigned reshape_saves(const sf_op *op) {
    (void)op;
    return 0;
}

const sf_op_class sf_op_reshape_class = {
    .type = SF_OP_RESHAPE,
    .name = "reshape",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = reshape_attrs,
    .n_attrs = (int)(sizeof reshape_attrs / sizeof reshape_attrs[0]),
    .infer = reshape_infer,
    .space = reshape_space,
    .region = reshape_region,
    .cost = reshape_cost,
    .memory = reshape_memory,
    .saves = reshape_saves,
    .fwd_ref = reshape_fwd_ref,
    .fwd_fast = reshape_fwd_fast,
    .bwd_ref = reshape_bwd_ref,
    .bwd_fast = reshape_bwd_fast,
};

const sf_op_class sf_op_flatten_class = {
    .type = SF_OP_FLATTEN,
    .name = "flatten",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = flatten_attrs,
    .n_attrs = (int)(sizeof flatten_attrs / sizeof flatten_attrs[0]),
    .defaults = flatten_defaults,
    .infer = flatten_infer,
    .space = reshape_space,
    .region = reshape_region,
    .cost = reshape_cost,
    .memory = reshape_memory,
    .saves = reshape_saves,
    .fwd_ref = reshape_fwd_ref,
    .fwd_fast = reshape_fwd_fast,
    .bwd_ref = reshape_bwd_ref,
    .bwd_fast = reshape_bwd_fast,
};
