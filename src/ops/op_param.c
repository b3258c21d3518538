/*
 * op_param.c - element-wise operators with a constant operand: add_param and
 * mul_param (x + w, x * w, w a learned tensor the operator owns) and scale
 * (x * mul + add, two constants that are attributes, not weights); add_const,
 * mul_const (x + c, x * c) and masked_fill (value where a mask holds, else x),
 * whose c and mask are a fixed tensor the operator holds (sf_op.fixed: a
 * registered buffer, a constant mask), never trained, synced or counted.
 *
 * add_param is how a learned position embedding reaches a graph (ViT's and
 * BERT's `x + self.pos_embedding`, an nn.Parameter of shape (1, T, D)), and
 * mul_param a learned scale (ConvNeXt's layer scale, `gamma * x` with gamma
 * (C,)); the tensor is a weight, trained with the rest. Its shape is PyTorch's
 * (attribute `shape`), aligned with the input's last dimensions as NumPy
 * broadcasting aligns them: each size is the input's or 1, and the batch's is 1
 * (a weight is the same for every sample). scale covers ONNX's Add, Sub, Mul and
 * Div by a scalar constant (`x * 0.5`, `x / 8`), which PyTorch does not train.
 *
 * Parallel space: the output (the input's shape). Dimension 0 is the sample.
 * Dimension i > 0 is a parameter dimension when the weight varies along it
 * (size > 1) and it is one of the first two such dimensions: a part owns the
 * rows of the weight in its range, one strided run (sf_weight_slice: rows of
 * the first dimension, columns of the second, and whole along everything after
 * the second). The other dimensions are attributes: along a broadcast one every
 * part reads the same weights; along a third varying one (a (C, H, W) weight,
 * which no model here has) the parts of one shard read and accumulate into
 * different elements of it, and the runtime sums the shard's replicas, which
 * is the whole gradient. scale: dimension 0 the sample, the rest attributes.
 *
 * FLOPs per output element: add_param 1 forward, 1 backward (the weight
 * gradient's sum; the input gradient is a copy); mul_param 1 forward, 3 backward
 * (dx = dy * w, dw += dy * x); scale 2 forward (multiply, add), 1 backward.
 * Bytes: the input, the output and the weights of the tile forward; backward
 * the output gradient, the input gradient, the weights (and, for mul_param,
 * the input) read, the weight gradient read and written.
 *
 * add_const, mul_const, masked_fill: dimension 0 the sample, the rest
 * attributes (every part holds the whole fixed tensor; there is no gradient of
 * it to slice or sync). FLOPs per element: add_const 1 and 1 (dx += dy),
 * mul_const 1 and 2 (dx += dy * c), masked_fill 1 and 1 (a select); bytes the
 * input and output (their gradients backward) and the fixed elements the tile
 * reads. Their backward passes save nothing (the fixed tensor is all they
 * read); the fixed tensor is held as a buffer is, not charged as weights.
 * masked_fill's gradient is dy where the mask is 0 and 0 where it fills.
 *
 * Kernels (buffers in soapflow/kernels.h; weights: the tensor in PyTorch's
 * layout, row-major): output element at global position p reads weight
 * element sum_i p[i] * ws[i], where ws[i] is the weight's stride along output
 * dimension i, 0 where it is broadcast. Forward y = x + w (x * w); backward
 * dx += dy (dy * w), dw[.] += dy (dy * x), a broadcast weight summing every
 * element that read it. The reference walks the tile element by element; the
 * fast kernels walk rows of the last dimension with the row's weight offset
 * kept incrementally and an inner loop specialised on the weight's last stride
 * (1: a vector, 0: one value per row), which vectorizes.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

/* ---- add_param, mul_param --------------------------------------------------- */

static const sf_attr_desc param_attrs[] = {
    {.name = "shape",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, param.shape),
     .count = 0,
     .count_offset = offsetof(sf_op_params, param.ndim),
     .max_count = SF_MAX_DIMS},
};

/* Size of the weight along output dimension i of an nd-dimensional output
 * (1 where it is broadcast, or before its first dimension). */
static int64_t param_dim(const sf_param_tensor_params *p, int nd, int i) {
    int j = i - (nd - p->ndim);
    return j >= 0 ? p->shape[j] : 1;
}

/* The broadcast tensor's shape of an operator: the weight's, the fixed
 * operand's, or masked_fill's mask's (a copy in the add_param form). */
static sf_param_tensor_params tensor_of(const sf_op *op) {
    if (op->type != SF_OP_MASKED_FILL) return op->params.param;
    sf_param_tensor_params q;
    q.ndim = op->params.masked_fill.ndim;
    memcpy(q.shape, op->params.masked_fill.shape, sizeof q.shape);
    return q;
}

static int is_mul(const sf_op *op) {
    return op->type == SF_OP_MUL_PARAM || op->type == SF_OP_MUL_CONST;
}

static sf_status param_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)n_in;
    const sf_param_tensor_params *q = &p->param;
    int nd = in[0].ndim;
    char a[96];
    if (nd < 1) return sf_error_set(err, SF_ERR_SHAPE, "the input must have at least 1 dimension");
    if (q->ndim < 0 || q->ndim > nd)
        return sf_error_set(err, SF_ERR_SHAPE, "the weight has %d dimensions, the input %s only %d",
                            q->ndim, sf_shape_str(&in[0], a, sizeof a), nd);
    for (int i = 0; i < nd; i++) {
        int64_t w = param_dim(q, nd, i);
        if (w < 1)
            return sf_error_set(err, SF_ERR_SHAPE, "weight dimension %d is %lld",
                                i - (nd - q->ndim), (long long)w);
        if (w != 1 && w != in[0].d[i])
            return sf_error_set(err, SF_ERR_SHAPE,
                                "the weight is %lld along dimension %d of the input %s (must be "
                                "%lld or 1)",
                                (long long)w, i, sf_shape_str(&in[0], a, sizeof a),
                                (long long)in[0].d[i]);
        if (i == 0 && w != 1)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "the weight is %lld along the batch (dimension 0): it must be 1, "
                                "one weight for every sample",
                                (long long)w);
    }
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t param_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)in;
    (void)n_in;
    int64_t n = 1;
    for (int j = 0; j < p->param.ndim; j++) n = sf_count_mul(n, p->param.shape[j]);
    return n;
}

/* The weight's strides along the output dimensions (0 where it is broadcast). */
static void param_strides(const sf_op *op, int64_t *ws) {
    int nd = op->out_shapes[0].ndim;
    int64_t s = 1;
    sf_param_tensor_params q = tensor_of(op);
    for (int i = nd - 1; i >= 0; i--) {
        int64_t w = param_dim(&q, nd, i);
        ws[i] = w == 1 ? 0 : s;
        s *= w;
    }
}

/* The first two dimensions along which the weight varies (-1: none). */
static void param_split_dims(const sf_op *op, int *a, int *b) {
    int nd = op->out_shapes[0].ndim;
    *a = *b = -1;
    for (int i = 1; i < nd; i++) {
        if (param_dim(&op->params.param, nd, i) == 1) continue;
        if (*a < 0)
            *a = i;
        else if (*b < 0)
            *b = i;
    }
}

static void param_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int a, b;
    param_split_dims(op, &a, &b);
    for (int i = 0; i < space->ndim; i++)
        kinds[i] = i == 0 ? SF_DIM_SAMPLE : i == a || i == b ? SF_DIM_PARAMETER : SF_DIM_ATTRIBUTE;
}

static void same_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

/* Rows of the first parameter dimension a, columns of the second b, whole after b. */
static int param_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    int a, b;
    param_split_dims(op, &a, &b);
    if (a < 0) {
        out[0] = sf_weight_run(0, op->n_params);
        return 1;
    }
    int64_t ws[SF_MAX_DIMS];
    param_strides(op, ws);
    if (b < 0) {
        out[0] = sf_weight_run(t->lo[a] * ws[a], (t->hi[a] - t->lo[a]) * ws[a]);
        return 1;
    }
    out[0] = (sf_weight_slice){.offset = t->lo[a] * ws[a] + t->lo[b] * ws[b],
                               .len = (t->hi[b] - t->lo[b]) * ws[b],
                               .stride = ws[a],
                               .count = t->hi[a] - t->lo[a]};
    return 1;
}

/* PyTorch has no default for an nn.Parameter: a position embedding starts as
 * ViT's, N(0, 0.02^2), a scale at 1 (the identity). */
static int param_param_descs(const sf_op *op, sf_param_desc *out) {
    const sf_param_tensor_params *q = &op->params.param;
    int mul = op->type == SF_OP_MUL_PARAM;
    out[0] = sf_param_make("weight", q->ndim, q->shape, 0, mul ? SF_INIT_CONST : SF_INIT_NORMAL,
                           mul ? 1.0 : 0.02);
    return 1;
}

static void param_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    double n = (double)sf_tile_numel(t);
    double w = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    double b = n * SF_ELEM_BYTES;
    int mul = op->type == SF_OP_MUL_PARAM;
    c->flops_fwd = n;
    c->flops_bwd = mul ? 3 * n : n;
    c->bytes_fwd = 2 * b + w;
    c->bytes_bwd = (mul ? 3 : 2) * b + 3 * w;
}

/* add_param needs nothing saved for backward; mul_param its input. */
static void param_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    double b = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    m->weight_bytes = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    m->saved_bytes = op->type == SF_OP_MUL_PARAM ? b : 0;
    m->output_bytes = b;
}

/* Offset in the weights of the tile's first element. */
static int64_t param_base(const sf_kernel_args *a, const int64_t *ws) {
    int64_t o = 0;
    for (int i = 0; i < a->tile.ndim; i++) o += a->tile.lo[i] * ws[i];
    return o;
}

/* The reference: element by element over the tile's multi-index. */
static sf_status param_ref(const sf_kernel_args *a, int backward) {
    int nd = a->tile.ndim, mul = is_mul(a->op);
    int64_t ws[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    param_strides(a->op, ws);
    for (int i = 0; i < nd; i++) ext[i] = a->tile.hi[i] - a->tile.lo[i];
    int64_t n = sf_tile_numel(&a->tile), w0 = param_base(a, ws);
    const float *x = a->in[0], *w = a->weights;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    float *dw = backward ? a->grad_weights : NULL;
    for (int64_t e = 0; e < n; e++) {
        int64_t q = w0;
        for (int i = 0; i < nd; i++) q += idx[i] * ws[i];
        if (!backward) {
            a->out[0][e] = mul ? x[e] * w[q] : x[e] + w[q];
        } else {
            float g = a->grad_out[0][e];
            if (dx) dx[e] += mul ? g * w[q] : g;
            if (dw) dw[q] += mul ? g * x[e] : g;
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < ext[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status param_fwd_ref(const sf_kernel_args *a) { return param_ref(a, 0); }
static sf_status param_bwd_ref(const sf_kernel_args *a) { return param_ref(a, 1); }

/* The fast kernels: rows of the last dimension, the weight offset of each row
 * kept as the row index advances. */
typedef struct param_rows {
    int nd;
    int64_t len, lw; /* elements per row; the weight's stride along it (1 or 0) */
    int64_t ws[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS];
    int64_t ow; /* the row's weight offset */
} param_rows;

static void param_rows_init(const sf_kernel_args *a, param_rows *r) {
    memset(r, 0, sizeof *r);
    r->nd = a->tile.ndim;
    param_strides(a->op, r->ws);
    for (int i = 0; i < r->nd; i++) r->ext[i] = a->tile.hi[i] - a->tile.lo[i];
    r->len = r->ext[r->nd - 1];
    r->lw = r->ws[r->nd - 1];
    r->ow = param_base(a, r->ws);
}

static int param_rows_next(param_rows *r) {
    for (int i = r->nd - 2; i >= 0; i--) {
        r->ow += r->ws[i];
        if (++r->idx[i] < r->ext[i]) return 1;
        r->ow -= r->ws[i] * r->ext[i];
        r->idx[i] = 0;
    }
    return 0;
}

static sf_status param_fwd_fast(const sf_kernel_args *a) {
    param_rows r;
    param_rows_init(a, &r);
    const float *x = a->in[0];
    float *y = a->out[0];
    int mul = is_mul(a->op);
    do {
        const float *restrict w = a->weights + r.ow;
        const float *restrict xr = x;
        float *restrict yr = y;
        const int64_t n = r.len;
        if (r.lw) {
            if (mul)
                for (int64_t j = 0; j < n; j++) yr[j] = xr[j] * w[j];
            else
                for (int64_t j = 0; j < n; j++) yr[j] = xr[j] + w[j];
        } else {
            const float c = w[0];
            if (mul)
                for (int64_t j = 0; j < n; j++) yr[j] = xr[j] * c;
            else
                for (int64_t j = 0; j < n; j++) yr[j] = xr[j] + c;
        }
        x += n;
        y += n;
    } while (param_rows_next(&r));
    return SF_OK;
}

static sf_status param_bwd_fast(const sf_kernel_args *a) {
    float *dx0 = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    if (!dx0 && !dw) return SF_OK;
    param_rows r;
    param_rows_init(a, &r);
    const float *x = a->in[0], *dy = a->grad_out[0];
    int mul = is_mul(a->op);
    int64_t off = 0;
    do {
        const int64_t n = r.len;
        const float *restrict g = dy + off;
        const float *restrict xr = x + off;
        const float *restrict w = a->weights + r.ow;
        if (dx0) {
            float *restrict dx = dx0 + off;
            if (!mul)
                for (int64_t j = 0; j < n; j++) dx[j] += g[j];
            else if (r.lw)
                for (int64_t j = 0; j < n; j++) dx[j] += g[j] * w[j];
            else
                for (int64_t j = 0; j < n; j++) dx[j] += g[j] * w[0];
        }
        if (dw) {
            float *restrict d = dw + r.ow;
            if (r.lw) {
                if (mul)
                    for (int64_t j = 0; j < n; j++) d[j] += g[j] * xr[j];
                else
                    for (int64_t j = 0; j < n; j++) d[j] += g[j];
            } else {
                float s = 0.0f;
                if (mul)
                    for (int64_t j = 0; j < n; j++) s += g[j] * xr[j];
                else
                    for (int64_t j = 0; j < n; j++) s += g[j];
                d[0] += s;
            }
        }
        off += n;
    } while (param_rows_next(&r));
    return SF_OK;
}

#define SF_PARAM_CLASS(var, type_, name_)                                                          \
    const sf_op_class var = {                                                                      \
        .type = type_,                                                                             \
        .name = name_,                                                                             \
        .min_inputs = 1,                                                                           \
        .max_inputs = 1,                                                                           \
        .attrs = param_attrs,                                                                      \
        .n_attrs = (int)(sizeof param_attrs / sizeof param_attrs[0]),                              \
        .infer = param_infer,                                                                      \
        .param_count = param_params,                                                               \
        .space = param_space,                                                                      \
        .region = same_region,                                                                     \
        .cost = param_cost,                                                                        \
        .memory = param_memory,                                                                    \
        .weight_slices = param_weight_slices,                                                      \
        .param_descs = param_param_descs,                                                          \
        .fwd_ref = param_fwd_ref,                                                                  \
        .fwd_fast = param_fwd_fast,                                                                \
        .bwd_ref = param_bwd_ref,                                                                  \
        .bwd_fast = param_bwd_fast,                                                                \
    }

SF_PARAM_CLASS(sf_op_add_param_class, SF_OP_ADD_PARAM, "add_param");
SF_PARAM_CLASS(sf_op_mul_param_class, SF_OP_MUL_PARAM, "mul_param");

/* ---- add_const, mul_const, masked_fill: a fixed tensor ------------------------- */

/* The fixed tensor's size: the product of its shape. */
static int64_t shape_numel(int nd, const int64_t *d) {
    int64_t n = 1;
    for (int j = 0; j < nd; j++) n = sf_count_mul(n, d[j]);
    return n;
}

static int64_t const_fixed_count(const sf_op_params *p) {
    return p->param.ndim < 0 || p->param.ndim > SF_MAX_DIMS ? -1
                                                             : shape_numel(p->param.ndim, p->param.shape);
}

/* Every dimension but the batch is an attribute: every part holds the whole
 * fixed tensor (it is not a weight, so there is no shard to split) and reads
 * the elements its tile covers. */
static void const_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

/* Elements of the fixed tensor a tile reads: its extent along the dimensions
 * the tensor varies along. */
static double const_tile_elems(const sf_op *op, const sf_tile *t) {
    sf_param_tensor_params q = tensor_of(op);
    int nd = op->out_shapes[0].ndim;
    double n = 1;
    for (int i = 0; i < nd; i++)
        if (param_dim(&q, nd, i) != 1) n *= (double)(t->hi[i] - t->lo[i]);
    return sf_tile_empty(t) ? 0 : n;
}

/* add_const: 1 FLOP an element forward, 1 backward (dx += dy); mul_const 1 and
 * 2 (dx += dy * c). Bytes: the input (the output gradient), the output (the
 * input gradient) and the fixed elements the tile reads. */
static void const_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    double n = (double)sf_tile_numel(t);
    double w = const_tile_elems(op, t) * SF_ELEM_BYTES, b = n * SF_ELEM_BYTES;
    c->flops_fwd = n;
    c->flops_bwd = is_mul(op) ? 2 * n : n;
    c->bytes_fwd = 2 * b + w;
    c->bytes_bwd = 2 * b + (is_mul(op) ? w : 0);
}

/* The backward pass needs neither input nor output (dx = dy, dy * c, or dy
 * where the mask passes x). The fixed tensor is held as the model is, like a
 * buffer: not weights (no gradient, no optimizer state), not activations. */
static void const_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

static unsigned saves_nothing(const sf_op *op) {
    (void)op;
    return 0;
}

/* The param kernels over the fixed tensor, without a weight gradient. */
static sf_kernel_args const_args(const sf_kernel_args *a) {
    sf_kernel_args b = *a;
    b.weights = a->op->fixed;
    b.grad_weights = NULL;
    return b;
}

static sf_status const_fwd_ref(const sf_kernel_args *a) {
    sf_kernel_args b = const_args(a);
    return param_ref(&b, 0);
}
static sf_status const_bwd_ref(const sf_kernel_args *a) {
    sf_kernel_args b = const_args(a);
    return param_ref(&b, 1);
}
static sf_status const_fwd_fast(const sf_kernel_args *a) {
    sf_kernel_args b = const_args(a);
    return param_fwd_fast(&b);
}
static sf_status const_bwd_fast(const sf_kernel_args *a) {
    sf_kernel_args b = const_args(a);
    return param_bwd_fast(&b);
}

#define SF_CONST_CLASS(var, type_, name_)                                                          \
    const sf_op_class var = {                                                                      \
        .type = type_,                                                                             \
        .name = name_,                                                                             \
        .min_inputs = 1,                                                                           \
        .max_inputs = 1,                                                                           \
        .attrs = param_attrs,                                                                      \
        .n_attrs = (int)(sizeof param_attrs / sizeof param_attrs[0]),                              \
        .infer = param_infer,                                                                      \
        .fixed_count = const_fixed_count,                                                          \
        .space = const_space,                                                                      \
        .region = same_region,                                                                     \
        .cost = const_cost,                                                                        \
        .memory = const_memory,                                                                    \
        .saves = saves_nothing,                                                                    \
        .fwd_ref = const_fwd_ref,                                                                  \
        .fwd_fast = const_fwd_fast,                                                                \
        .bwd_ref = const_bwd_ref,                                                                  \
        .bwd_fast = const_bwd_fast,                                                                \
    }

SF_CONST_CLASS(sf_op_add_const_class, SF_OP_ADD_CONST, "add_const");
SF_CONST_CLASS(sf_op_mul_const_class, SF_OP_MUL_CONST, "mul_const");

/* masked_fill: y = value where the mask is 1, x where it is 0 (torch's
 * x.masked_fill(mask, value); torch.where(mask, x, value) is the mask
 * negated). The mask is the fixed tensor, broadcast as add_const's operand. */
static const sf_attr_desc masked_attrs[] = {
    {.name = "shape",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, masked_fill.shape),
     .count = 0,
     .count_offset = offsetof(sf_op_params, masked_fill.ndim),
     .max_count = SF_MAX_DIMS},
    {.name = "value",
     .type = SF_ATTR_FLOAT,
     .offset = offsetof(sf_op_params, masked_fill.value),
     .allow_inf = 1},
};

static sf_status masked_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    if (isnan(p->masked_fill.value))
        return sf_error_set(err, SF_ERR_INVALID, "the fill value must be a number (or inf, -inf)");
    sf_op_params q;
    memset(&q, 0, sizeof q);
    q.param.ndim = p->masked_fill.ndim;
    memcpy(q.param.shape, p->masked_fill.shape, sizeof q.param.shape);
    sf_status st = param_infer(&q, in, n_in, out, n_out, err);
    if (st != SF_OK && err && !strncmp(err->msg, "the weight", 10)) {
        char m[SF_ERRMSG_MAX];
        snprintf(m, sizeof m, "the mask%s", err->msg + 10);
        sf_error_set(err, st, "%s", m);
    }
    return st;
}

static int64_t masked_fixed_count(const sf_op_params *p) {
    const sf_masked_fill_params *q = &p->masked_fill;
    return q->ndim < 0 || q->ndim > SF_MAX_DIMS ? -1 : shape_numel(q->ndim, q->shape);
}

static sf_status masked_check(const float *v, int64_t n, sf_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (v[i] != 0.0f && v[i] != 1.0f)
            return sf_error_set(err, SF_ERR_INVALID,
                                "mask value %lld is %g: a mask holds 0 (x passes) and 1 (filled)",
                                (long long)i, (double)v[i]);
    return SF_OK;
}

/* 1 FLOP (a select) an element each way; bytes: the input and output (their
 * gradients backward) and the mask elements the tile reads. */
static void masked_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    double n = (double)sf_tile_numel(t);
    double w = const_tile_elems(op, t) * SF_ELEM_BYTES, b = n * SF_ELEM_BYTES;
    c->flops_fwd = n;
    c->flops_bwd = n;
    c->bytes_fwd = 2 * b + w;
    c->bytes_bwd = 2 * b + w;
}

static sf_status masked_ref(const sf_kernel_args *a, int backward) {
    int nd = a->tile.ndim;
    int64_t ws[SF_MAX_DIMS], ext[SF_MAX_DIMS], idx[SF_MAX_DIMS] = {0};
    param_strides(a->op, ws);
    for (int i = 0; i < nd; i++) ext[i] = a->tile.hi[i] - a->tile.lo[i];
    int64_t n = sf_tile_numel(&a->tile), m0 = param_base(a, ws);
    const float *m = a->op->fixed, *x = a->in[0];
    const float v = (float)a->op->params.masked_fill.value;
    float *dx = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx) return SF_OK;
    for (int64_t e = 0; e < n; e++) {
        int64_t q = m0;
        for (int i = 0; i < nd; i++) q += idx[i] * ws[i];
        if (!backward)
            a->out[0][e] = m[q] != 0.0f ? v : x[e];
        else if (m[q] == 0.0f)
            dx[e] += a->grad_out[0][e];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < ext[i]) break;
            idx[i] = 0;
        }
    }
    return SF_OK;
}

static sf_status masked_fwd_ref(const sf_kernel_args *a) { return masked_ref(a, 0); }
static sf_status masked_bwd_ref(const sf_kernel_args *a) { return masked_ref(a, 1); }

/* Rows of the last dimension, the row's mask offset kept as for param_fwd_fast;
 * branch-free selects. */
static sf_status masked_fast(const sf_kernel_args *a, int backward) {
    float *dx0 = backward && a->grad_in ? a->grad_in[0] : NULL;
    if (backward && !dx0) return SF_OK;
    param_rows r;
    param_rows_init(a, &r);
    const float v = (float)a->op->params.masked_fill.value;
    int64_t off = 0;
    do {
        const int64_t n = r.len;
        const float *restrict m = a->op->fixed + r.ow;
        if (!backward) {
            const float *restrict x = a->in[0] + off;
            float *restrict y = a->out[0] + off;
            if (r.lw)
                for (int64_t j = 0; j < n; j++) y[j] = m[j] != 0.0f ? v : x[j];
            else if (m[0] != 0.0f)
                for (int64_t j = 0; j < n; j++) y[j] = v;
            else
                memcpy(y, x, (size_t)n * sizeof *y);
        } else {
            const float *restrict g = a->grad_out[0] + off;
            float *restrict dx = dx0 + off;
            if (r.lw)
                for (int64_t j = 0; j < n; j++) dx[j] += m[j] != 0.0f ? 0.0f : g[j];
            else if (m[0] == 0.0f)
                for (int64_t j = 0; j < n; j++) dx[j] += g[j];
        }
        off += n;
    } while (param_rows_next(&r));
    return SF_OK;
}

static sf_status masked_fwd_fast(const sf_kernel_args *a) { return masked_fast(a, 0); }
static sf_status masked_bwd_fast(const sf_kernel_args *a) { return masked_fast(a, 1); }

const sf_op_class sf_op_masked_fill_class = {
    .type = SF_OP_MASKED_FILL,
    .name = "masked_fill",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = masked_attrs,
    .n_attrs = (int)(sizeof masked_attrs / sizeof masked_attrs[0]),
    .infer = masked_infer,
    .fixed_count = masked_fixed_count,
    .fixed_check = masked_check,
    .space = const_space,
    .region = same_region,
    .cost = masked_cost,
    .memory = const_memory,
    .saves = saves_nothing,
    .fwd_ref = masked_fwd_ref,
    .fwd_fast = masked_fwd_fast,
    .bwd_ref = masked_bwd_ref,
    .bwd_fast = masked_bwd_fast,
};

/* ---- scale -------------------------------------------------------------------- */

static const sf_attr_desc scale_attrs[] = {
    {.name = "mul", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, scale.mul)},
    {.name = "add", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, scale.add)},
};

static void scale_defaults(sf_op_params *p) {
    p->scale.mul = 1.0;
    p->scale.add = 0.0;
}

static sf_status scale_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)n_in;
    if (!isfinite(p->scale.mul) || !isfinite(p->scale.add))
        return sf_error_set(err, SF_ERR_INVALID, "mul (%g) and add (%g) must be finite numbers",
                            p->scale.mul, p->scale.add);
    if (in[0].ndim < 1) return sf_error_set(err, SF_ERR_SHAPE, "the input must have a dimension");
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void scale_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void scale_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    (void)op;
    double n = (double)sf_tile_numel(t);
    c->flops_fwd = 2 * n;
    c->flops_bwd = n;
    c->bytes_fwd = 2 * n * SF_ELEM_BYTES;
    c->bytes_bwd = 2 * n * SF_ELEM_BYTES;
}

/* Backward needs neither the input nor the output. */
static void scale_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    (void)op;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
}

static sf_status scale_fwd_ref(const sf_kernel_args *a) {
    int64_t n = sf_tile_numel(&a->tile);
    double mul = a->op->params.scale.mul, add = a->op->params.scale.add;
    for (int64_t i = 0; i < n; i++) a->out[0][i] = (float)(a->in[0][i] * mul + add);
    return SF_OK;
}

static sf_status scale_bwd_ref(const sf_kernel_args *a) {
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    int64_t n = sf_tile_numel(&a->tile);
    double mul = a->op->params.scale.mul;
    for (int64_t i = 0; i < n; i++) a->grad_in[0][i] += (float)(a->grad_out[0][i] * mul);
    return SF_OK;
}

/* In float, branch-free: the compiler vectorizes it. */
static sf_status scale_fwd_fast(const sf_kernel_args *a) {
    const int64_t n = sf_tile_numel(&a->tile);
    const float mul = (float)a->op->params.scale.mul, add = (float)a->op->params.scale.add;
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * mul + add;
    return SF_OK;
}

static sf_status scale_bwd_fast(const sf_kernel_args *a) {
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    const int64_t n = sf_tile_numel(&a->tile);
    const float mul = (float)a->op->params.scale.mul;
    const float *restrict dy = a->grad_out[0];
    float *restrict dx = a->grad_in[0];
    for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * mul;
    return SF_OK;
}

const sf_op_class sf_op_scale_class = {
    .type = SF_OP_SCALE,
    .name = "scale",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = scale_attrs,
    .n_attrs = (int)(sizeof scale_attrs / sizeof scale_attrs[0]),
    .defaults = scale_defaults,
    .infer = scale_infer,
    .space = scale_space,
    .region = same_region,
    .cost = scale_cost,
    .memory = scale_memory,
    .fwd_ref = scale_fwd_ref,
    .fwd_fast = scale_fwd_fast,
    .bwd_ref = scale_bwd_ref,
    .bwd_fast = scale_bwd_fast,
};
