/*
 * op_linear.c - a fully connected layer over the last dimension: y = x W^T + b.
 *
 * Input (..., in_features), output (..., out_features); any leading dimensions
 * (batch, sequence) pass through. Parallel space: the output's dimensions, then
 * one more, the input features (a reduction dimension, SF_DIM_REDUCE: no output
 * dimension names it). Dimension 0 is the sample, middle dimensions are
 * attributes (e.g. sequence), the output's last is a parameter dimension:
 * splitting it splits W by rows, and each part then needs the whole input row
 * (every input feature). Splitting the input features [k0, k1) is Megatron's
 * row-parallel layer: the part reads columns [k0, k1) of its input rows and of W
 * and produces a partial sum of its output piece, which the task graph reduces
 * (src/taskgraph/reduce.c); the bias belongs to the part with k0 = 0, so
 * that the sum adds it once.
 *
 * Every split runs exactly on both kernels: a tile reads and accumulates into
 * rows [o0, o1), columns [k0, k1) of W and, when k0 = 0, the biases [o0, o1)
 * (sf_op_weight_slices), nothing else. The parameter tensors are
 * torch.nn.Linear's: weight (out, in) and bias (out), both U(+-1/sqrt(in)).
 *
 * FLOPs: forward 2 * MACs (+ bias adds); backward 4 * MACs (+ bias sums).
 *
 * Kernels (buffers and weight layout in soapflow/kernels.h): a tile is rows
 * [leading dimensions of the tile, flattened] x output features [o0, o1) x
 * input features [k0, k1). Its input region is those rows with input features
 * [k0, k1), contiguous, so the region is an (R, k1 - k0) matrix and the output
 * piece an (R, o1 - o0) one (below, kin is k1 - k0 and W's rows are read with
 * the full row stride): the reference
 * kernel is a triple loop, the fast one three SGEMMs (y = x W^T, dx += dy W,
 * dW += dy^T x) on the rows [o0, o1) of W. Backward of a short, wide tile
 * (few rows, many input features: AlexNet's fc6, 64 x 9216) computes dx
 * transposed, (kin, R) = W^T dy^T, into the workspace and adds it to dx: OpenBLAS
 * ran that GEMM 15-25% faster than the (R, kin) one with only 64 rows, and the
 * transposing add touches R * kin elements, 4096 times fewer than the GEMM's
 * flops. Forward and other tiles need no workspace.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc linear_attrs[] = {
    {.name = "out_features", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, linear.out_features)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, linear.bias)},
};

static void linear_defaults(sf_op_params *p) { p->linear.bias = 1; }

static sf_status linear_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 2 dimensions, got %d",
                            in[0].ndim);
    if (p->linear.out_features < 1)
        return sf_error_set(err, SF_ERR_INVALID, "out_features must be >= 1");
    out[0] = in[0];
    out[0].d[in[0].ndim - 1] = p->linear.out_features;
    *n_out = 1;
    return SF_OK;
}

static int64_t linear_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    int64_t k = in[0].d[in[0].ndim - 1];
    return sf_count_add(sf_count_mul(p->linear.out_features, k),
                        p->linear.bias ? p->linear.out_features : 0);
}

/* The output's dimensions, then the input features (the reduction). */
static void linear_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_PARAMETER;
    if (n == SF_MAX_DIMS) return; /* no room: the reduction stays whole */
    space->d[n] = op->in_shapes[0].d[op->in_shapes[0].ndim - 1];
    kinds[n] = SF_DIM_REDUCE;
    space->ndim = n + 1;
}

/* The tile's input features [k0, k1): its range on the reduction dimension, or
 * all of them for a tile of the output's rank (one that names no reduction). */
static void linear_krange(const sf_op *op, const sf_tile *t, int64_t *k0, int64_t *k1) {
    int n = op->out_shapes[0].ndim;
    *k0 = t->ndim > n ? t->lo[n] : 0;
    *k1 = t->ndim > n ? t->hi[n] : op->in_shapes[0].d[n - 1];
}

/* The tile's output rows, input features [k0, k1) (the reduce dimension). */
static void linear_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    int n = op->in_shapes[0].ndim;
    *r = *t;
    r->ndim = n;
    linear_krange(op, t, &r->lo[n - 1], &r->hi[n - 1]);
    for (int d = n; d < SF_MAX_DIMS; d++) r->lo[d] = r->hi[d] = 0;
}

/* Weight elements of a tile: W's rows [o0, o1) x columns [k0, k1), and the
 * biases [o0, o1) on the part that starts at k0 = 0. */
static int64_t linear_tile_weights(const sf_op *op, const sf_tile *t) {
    int n = op->out_shapes[0].ndim;
    int64_t k0, k1;
    linear_krange(op, t, &k0, &k1);
    int64_t ot = t->hi[n - 1] - t->lo[n - 1], kt = k1 - k0;
    if (ot <= 0 || kt <= 0) return 0;
    return ot * kt + (op->params.linear.bias && k0 == 0 ? ot : 0);
}

static void linear_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    int n = op->out_shapes[0].ndim;
    sf_tile o = *t;
    o.ndim = n; /* the output piece */
    double outs = (double)sf_tile_numel(&o);
    int64_t k0, k1;
    linear_krange(op, t, &k0, &k1);
    double kt = (double)(k1 - k0);
    double macs = outs * (kt > 0 ? kt : 0);
    double bias = op->params.linear.bias && k0 == 0 ? outs : 0;
    cost->flops_fwd = 2 * macs + bias;
    cost->flops_bwd = 4 * macs + bias;
    sf_tile r;
    linear_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double w_b = (double)linear_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b;
}

/* Rows [o0, o1) of W (the tile's output features), columns [k0, k1) of them (the
 * tile's input features: whole rows, one run, unless split), then their biases
 * when k0 = 0. */
static int linear_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    int last = op->out_shapes[0].ndim - 1;
    int64_t kin = op->in_shapes[0].d[op->in_shapes[0].ndim - 1];
    int64_t o0 = t->lo[last], ot = t->hi[last] - t->lo[last];
    int64_t k0, k1;
    linear_krange(op, t, &k0, &k1);
    int64_t kt = k1 - k0;
    out[0] = (sf_weight_slice){o0 * kin + k0, kt, kin, ot};
    if (!op->params.linear.bias || k0 != 0) return 1;
    out[1] = sf_weight_run(op->params.linear.out_features * kin + o0, ot);
    return 2;
}

/* torch.nn.Linear: weight (out, in) and bias (out), both U(+-1/sqrt(in)). */
static int linear_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t kin = op->in_shapes[0].d[op->in_shapes[0].ndim - 1];
    int64_t nout = op->params.linear.out_features;
    double bound = 1.0 / sqrt((double)kin);
    out[0] = sf_param_make("weight", 2, (int64_t[]){nout, kin}, 0, SF_INIT_UNIFORM, bound);
    if (!op->params.linear.bias) return 1;
    out[1] = sf_param_make("bias", 1, (int64_t[]){nout}, nout * kin, SF_INIT_UNIFORM, bound);
    return 2;
}

/* ---- kernels ----------------------------------------------------------- */

/* The matrix view of a tile: R rows, features [o0, o0 + ot) of out, inputs
 * [k0, k0 + kin) of the ldw = in_features columns of W; bias: whether this
 * part adds the bias (the one with k0 = 0). */
typedef struct linear_geom {
    int64_t rows, o0, ot, k0, kin, ldw, nout;
    int bias;
} linear_geom;

static void linear_geom_init(const sf_op *op, const sf_tile *t, linear_geom *g) {
    int last = op->out_shapes[0].ndim - 1;
    g->rows = 1;
    for (int i = 0; i < last; i++) g->rows *= t->hi[i] - t->lo[i];
    g->o0 = t->lo[last];
    g->ot = t->hi[last] - t->lo[last];
    int64_t k1;
    linear_krange(op, t, &g->k0, &k1);
    g->kin = k1 - g->k0;
    g->ldw = op->in_shapes[0].d[op->in_shapes[0].ndim - 1];
    g->nout = op->params.linear.out_features;
    g->bias = op->params.linear.bias && g->k0 == 0;
}

/* y (R, ot) = x (R, kin) W[o0:o0+ot, k0:k0+kin]^T (+ b[o0:o0+ot]) */
static sf_status linear_fwd_ref(const sf_kernel_args *a) {
    linear_geom g;
    linear_geom_init(a->op, &a->tile, &g);
    const float *x = a->in[0], *w = a->weights;
    const float *bias = g.bias ? w + g.nout * g.ldw : NULL;
    float *y = a->out[0];
    for (int64_t r = 0; r < g.rows; r++) {
        for (int64_t o = 0; o < g.ot; o++) {
            const float *wr = w + (g.o0 + o) * g.ldw + g.k0;
            float acc = bias ? bias[g.o0 + o] : 0.0f;
            for (int64_t k = 0; k < g.kin; k++) acc += x[r * g.kin + k] * wr[k];
            y[r * g.ot + o] = acc;
        }
    }
    return SF_OK;
}

/* dx (R, kin) += dy W[o0:, k0:], dW[o0:, k0:] += dy^T x, db[o0:] += sum over rows
 * of dy (the part with the bias) */
static sf_status linear_bwd_ref(const sf_kernel_args *a) {
    linear_geom g;
    linear_geom_init(a->op, &a->tile, &g);
    const float *x = a->in[0], *w = a->weights, *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dw = a->grad_weights;
    float *db = dw && g.bias ? dw + g.nout * g.ldw : NULL;
    for (int64_t r = 0; r < g.rows; r++) {
        for (int64_t o = 0; o < g.ot; o++) {
            float d = dy[r * g.ot + o];
            int64_t wr = (g.o0 + o) * g.ldw + g.k0;
            if (db) db[g.o0 + o] += d;
            for (int64_t k = 0; k < g.kin; k++) {
                if (dx) dx[r * g.kin + k] += w[wr + k] * d;
                if (dw) dw[wr + k] += x[r * g.kin + k] * d;
            }
        }
    }
    return SF_OK;
}

static sf_status linear_fwd_fast(const sf_kernel_args *a) {
    linear_geom g;
    linear_geom_init(a->op, &a->tile, &g);
    const float *w = a->weights;
    float *y = a->out[0];
    float beta = 0.0f;
    if (g.bias) {
        const float *bias = w + g.nout * g.ldw + g.o0;
        for (int64_t r = 0; r < g.rows; r++)
            for (int64_t o = 0; o < g.ot; o++) y[r * g.ot + o] = bias[o];
        beta = 1.0f;
    }
    sf_sgemm(0, 1, g.rows, g.ot, g.kin, 1.0f, a->in[0], g.kin, w + g.o0 * g.ldw + g.k0, g.ldw, beta,
             y, g.ot);
    return SF_OK;
}

/* dx computed transposed (see the header): few rows, many input features. */
static int linear_dx_transposed(const linear_geom *g) {
    return g->rows <= 128 && 16 * g->rows <= g->kin && g->ot >= 64;
}

static size_t linear_workspace_bytes(const sf_op *op, const sf_tile *t, int backward) {
    linear_geom g;
    linear_geom_init(op, t, &g);
    if (!backward || !linear_dx_transposed(&g)) return 0;
    return (size_t)(g.rows * g.kin) * sizeof(float);
}

static sf_status linear_bwd_fast(const sf_kernel_args *a) {
    linear_geom g;
    linear_geom_init(a->op, &a->tile, &g);
    const float *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dw = a->grad_weights;
    const float *wp = a->weights + g.o0 * g.ldw + g.k0;
    if (dx && linear_dx_transposed(&g)) {
        /* dxt (kin, R) = W[o0:, k0:]^T dy^T, then dx (R, kin) += dxt^T */
        float *dxt = a->workspace;
        sf_sgemm(1, 1, g.kin, g.rows, g.ot, 1.0f, wp, g.ldw, dy, g.ot, 0.0f, dxt, g.rows);
        for (int64_t k0 = 0; k0 < g.kin; k0 += 64) {
            int64_t k1 = k0 + 64 < g.kin ? k0 + 64 : g.kin;
            for (int64_t r = 0; r < g.rows; r++)
                for (int64_t k = k0; k < k1; k++) dx[r * g.kin + k] += dxt[k * g.rows + r];
        }
    } else if (dx) {
        sf_sgemm(0, 0, g.rows, g.kin, g.ot, 1.0f, dy, g.ot, wp, g.ldw, 1.0f, dx, g.kin);
    }
    if (dw) {
        sf_sgemm(1, 0, g.ot, g.kin, g.rows, 1.0f, dy, g.ot, a->in[0], g.kin, 1.0f,
                 dw + g.o0 * g.ldw + g.k0, g.ldw);
        if (g.bias) {
            float *db = dw + g.nout * g.ldw + g.o0;
            for (int64_t r = 0; r < g.rows; r++)
                for (int64_t o = 0; o < g.ot; o++) db[o] += dy[r * g.ot + o];
        }
    }
    return SF_OK;
}

/* Saves its input (for dW; AddmmBackward keeps it and the weight), not its output. */
static unsigned linear_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_INPUT(0);
}

const sf_op_class sf_op_linear_class = {
    .type = SF_OP_LINEAR,
    .name = "linear",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = linear_attrs,
    .n_attrs = (int)(sizeof linear_attrs / sizeof linear_attrs[0]),
    .defaults = linear_defaults,
    .infer = linear_infer,
    .param_count = linear_params,
    .space = linear_space,
    .region = linear_region,
    .cost = linear_cost,
    .saves = linear_saves,
    .weight_slices = linear_weight_slices,
    .param_descs = linear_param_descs,
    .fwd_ref = linear_fwd_ref,
    .fwd_fast = linear_fwd_fast,
    .bwd_ref = linear_bwd_ref,
    .bwd_fast = linear_bwd_fast,
    .workspace = linear_workspace_bytes,
};
