/*
 * op_softmax_ce.c - softmax over the last dimension fused with the cross-entropy loss.
 *
 * Input: logits (..., C). Output: the probabilities, same shape. The labels are
 * not a graph input: they come from the data set with each batch, like the
 * targets of a PyTorch loss, and the scalar loss is reduced in the backward pass,
 * whose gradient is simply probabilities minus the one-hot labels. Fusing the two
 * is what every framework does for numerical stability and speed.
 *
 * Parallel space: the output. Dimension 0 is the sample, middle dimensions
 * (sequence) attributes, and so is the class dimension, the operator's inner
 * dimension (sf_op_inner_dim): a row's normalization needs all of it, so parts
 * that split it (Megatron's vocabulary-parallel cross-entropy: each holds its
 * classes' logits, which are never gathered) combine per-row statistics inside
 * the operator: the task graph lists, per group of parts that differ only in
 * their classes, an all-reduce (max) of the rows' maxima and then one (sum) of
 * their sums of exponentials and the target's logit, 2 floats per row
 * (sf_taskgraph_op_inner), between the parts' forward and their backward; the
 * backward needs nothing more (p - onehot on the part's own classes). The
 * searches split it only with --reduce-splits (sf_op_dim_opt_in), so seeded
 * searches run as before. The region of the input is the tile itself.
 *
 * FLOPs: about 5 per element forward (max, subtract, exp, sum, divide) and 2
 * backward (subtract the label, scale by 1/batch).
 *
 * Kernels (buffers in soapflow/kernels.h): the tile is R rows of C (leading
 * dimensions flattened; a tile must hold all of C, else SF_ERR_INVALID, unless
 * the caller gives the rows' statistics, below). The
 * labels come in the kernel arguments (args->labels, one int32 class per row of
 * the tile, row-major over the leading dimensions), not as a graph input, as
 * said above. With N_total the rows of the whole tensor (the product of all
 * leading dimensions: N, or N * T for sequences), the loss is the mean over all
 * rows of -log p[label], PyTorch's CrossEntropyLoss(reduction='mean') over the
 * flattened rows, and
 *   forward   p = exp(x - max) / sum(exp(x - max)) per row (written to out);
 *             when args->loss is set, *loss += sum over the tile's rows of
 *             (log sum(exp(x - max)) - (x[label] - max)) / N_total, so the
 *             tiles' contributions add up to the mean loss
 *   backward  dx += (p - onehot(label)) / N_total, p recomputed from the logits
 * (the output gradient is not read: this operator ends the graph, and its
 * gradient is that of the loss itself). Labels outside [0, C) give
 * SF_ERR_INVALID before anything is written. The reference works in double per
 * row; the fast kernels take the row maximum and sum over 8 independent float
 * lanes (vectorizable), call expf once per element, and backward keeps the
 * row's exponentials in the workspace (C floats) so as not to call it twice.
 *
 * A tile that holds classes [lo, lo + n) of its rows (split on the classes)
 * runs in phases with the rows' statistics in args->stats (3 R floats: the
 * maxima, the sums of exp(x - max), the targets' logits, each over the whole
 * row; soapflow/kernels.h, SF_CE_PHASE_*): the max phase takes the tile's
 * maxima into them, the sums phase adds its sums of exp(x - max) given the
 * row's maximum and its target's logit when the label is one of its classes
 * (the caller combines the tiles' figures between the phases: the runtime by
 * the task graph's all-reduces), and then the forward writes
 * p = exp(x - max) / sum and adds the loss of the rows whose label it holds,
 * log(sum) - (x[label] - max), over N_total (so each row counts once, and the
 * tiles add up to the loss of the whole tensor); backward adds
 * (p - onehot) / N_total on its classes, the onehot only where it holds the
 * label. The reference sums in double, the fast kernels over 8 float lanes,
 * and neither needs a workspace; the kernels of a whole tile are untouched by
 * this (stats NULL), bit for bit.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define SOFTMAX_CE_FWD_FLOPS 5.0
#define SOFTMAX_CE_BWD_FLOPS 2.0

static sf_status softmax_ce_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                  sf_shape *out, int *n_out, sf_error *err) {
    (void)p;
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "logits must have at least 2 dimensions (N, ..., C), got %d",
                            in[0].ndim);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void softmax_ce_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_ATTRIBUTE; /* the classes: the inner dimension */
}

static int softmax_ce_inner_dim(const sf_op *op) { return op->space.ndim - 1; }

static void softmax_ce_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void softmax_ce_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = SOFTMAX_CE_FWD_FLOPS * n;
    cost->flops_bwd = SOFTMAX_CE_BWD_FLOPS * n;
    /* forward reads logits, writes probabilities; backward reads them (and the
     * labels, one per row, ignored here) and writes the logits' gradient */
    cost->bytes_fwd = 2 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 2 * n * SF_ELEM_BYTES;
}

/* ---- kernels ----------------------------------------------------------- */

/* Rows of the tile (-1 when it does not hold every class), classes, and rows of
 * the whole tensor. */
static void sce_geom(const sf_kernel_args *a, int64_t *rows, int64_t *c, int64_t *total) {
    const sf_tile *t = &a->tile;
    int last = t->ndim - 1;
    const sf_shape *s = &a->op->in_shapes[0];
    *c = s->d[last];
    *rows = t->lo[last] == 0 && t->hi[last] == *c ? sf_tile_numel(t) / *c : -1;
    *total = a->mean_rows > 0 ? a->mean_rows : sf_shape_numel(s) / *c;
}

/* A tile's rows and the classes [lo, lo + n) it holds (of c), for the kernels
 * of a tile split on its classes (args->stats). */
static void sce_split_geom(const sf_kernel_args *a, int64_t *rows, int64_t *lo, int64_t *n,
                           int64_t *c, int64_t *total) {
    const sf_tile *t = &a->tile;
    int last = t->ndim - 1;
    const sf_shape *s = &a->op->in_shapes[0];
    *c = s->d[last];
    *lo = t->lo[last];
    *n = t->hi[last] - t->lo[last];
    *rows = *n > 0 ? sf_tile_numel(t) / *n : 0;
    *total = a->mean_rows > 0 ? a->mean_rows : sf_shape_numel(s) / *c;
}

/* SF_OK when every label of the tile's rows is a class. */
static sf_status sce_check_labels(const int32_t *labels, int64_t rows, int64_t c) {
    if (!labels) return SF_ERR_INVALID;
    for (int64_t r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= c) return SF_ERR_INVALID;
    return SF_OK;
}

/* Row maximum and log of the sum of exp(x - max), in double. */
static void sce_row_ref(const float *x, int64_t c, double *mx, double *lse) {
    double m = x[0], s = 0;
    for (int64_t j = 1; j < c; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < c; j++) s += exp(x[j] - m);
    *mx = m;
    *lse = log(s);
}

static sf_status sce_split_fwd(const sf_kernel_args *a, int fast);
static sf_status sce_split_bwd(const sf_kernel_args *a, int fast);

static sf_status softmax_ce_fwd_ref(const sf_kernel_args *a) {
    if (a->stats || a->phase != SF_CE_PHASE_FULL) return sce_split_fwd(a, 0);
    int64_t rows, c, total;
    sce_geom(a, &rows, &c, &total);
    if (rows < 0) return SF_ERR_INVALID;
    if (a->loss && sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * c;
        float *y = a->out[0] + r * c;
        double m, lse;
        sce_row_ref(x, c, &m, &lse);
        for (int64_t j = 0; j < c; j++) y[j] = (float)exp(x[j] - m - lse);
        if (a->loss) loss += lse - (x[a->labels[r]] - m);
    }
    if (a->loss) *a->loss += loss / (double)total;
    return SF_OK;
}

static sf_status softmax_ce_bwd_ref(const sf_kernel_args *a) {
    if (a->stats) return sce_split_bwd(a, 0);
    int64_t rows, c, total;
    sce_geom(a, &rows, &c, &total);
    if (rows < 0 || sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * c;
        float *dx = a->grad_in[0] + r * c;
        double m, lse;
        sce_row_ref(x, c, &m, &lse);
        for (int64_t j = 0; j < c; j++) {
            double p = exp(x[j] - m - lse), onehot = j == a->labels[r] ? 1.0 : 0.0;
            dx[j] += (float)((p - onehot) / (double)total);
        }
    }
    return SF_OK;
}

#define SCE_LANES 8

static float sce_max(const float *restrict x, int64_t n) {
    float acc[SCE_LANES];
    for (int l = 0; l < SCE_LANES; l++) acc[l] = x[0];
    int64_t j = 0;
    for (; j + SCE_LANES <= n; j += SCE_LANES)
        for (int l = 0; l < SCE_LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    float m = x[0];
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    for (int l = 0; l < SCE_LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}

/* e[j] = exp(x[j] - m); returns the sum */
static float sce_exp(const float *restrict x, float m, int64_t n, float *restrict e) {
    for (int64_t j = 0; j < n; j++) e[j] = expf(x[j] - m);
    float acc[SCE_LANES] = {0};
    int64_t j = 0;
    for (; j + SCE_LANES <= n; j += SCE_LANES)
        for (int l = 0; l < SCE_LANES; l++) acc[l] += e[j + l];
    float s = 0.0f;
    for (; j < n; j++) s += e[j];
    for (int l = 0; l < SCE_LANES; l++) s += acc[l];
    return s;
}

static size_t softmax_ce_workspace(const sf_op *op, const sf_tile *t, int backward) {
    (void)t;
    if (!backward) return 0;
    return (size_t)op->in_shapes[0].d[op->in_shapes[0].ndim - 1] * sizeof(float);
}

static sf_status softmax_ce_fwd_fast(const sf_kernel_args *a) {
    if (a->stats || a->phase != SF_CE_PHASE_FULL) return sce_split_fwd(a, 1);
    int64_t rows, c, total;
    sce_geom(a, &rows, &c, &total);
    if (rows < 0) return SF_ERR_INVALID;
    if (a->loss && sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = a->in[0] + r * c;
        float *restrict y = a->out[0] + r * c;
        float m = sce_max(x, c), s = sce_exp(x, m, c, y), inv = 1.0f / s;
        for (int64_t j = 0; j < c; j++) y[j] *= inv;
        if (a->loss) loss += log((double)s) - (double)(x[a->labels[r]] - m);
    }
    if (a->loss) *a->loss += loss / (double)total;
    return SF_OK;
}

static sf_status softmax_ce_bwd_fast(const sf_kernel_args *a) {
    if (a->stats) return sce_split_bwd(a, 1);
    int64_t rows, c, total;
    sce_geom(a, &rows, &c, &total);
    if (rows < 0 || sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    float *restrict e = a->workspace; /* (C) */
    const float inv_total = (float)(1.0 / (double)total);
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = a->in[0] + r * c;
        float *restrict dx = a->grad_in[0] + r * c;
        float m = sce_max(x, c), k = inv_total / sce_exp(x, m, c, e);
        for (int64_t j = 0; j < c; j++) dx[j] += e[j] * k;
        dx[a->labels[r]] -= inv_total;
    }
    return SF_OK;
}

/* ---- kernels of a tile split on its classes (args->stats) -------------- */

/* The tile's labels, as classes of the whole row, are checked against all C
 * classes; a row's target is in the tile when lo <= label < lo + n. */
static int sce_holds(int32_t label, int64_t lo, int64_t n) { return label >= lo && label < lo + n; }

/* Phase SF_CE_PHASE_MAX: the rows' maxima of the tile into stats[0, R). */
static void sce_split_max(const sf_kernel_args *a, int64_t rows, int64_t n, int fast) {
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * n;
        float m;
        if (fast) {
            m = sce_max(x, n);
        } else {
            m = x[0];
            for (int64_t j = 1; j < n; j++) m = x[j] > m ? x[j] : m;
        }
        if (m > a->stats[r]) a->stats[r] = m;
    }
}

/* The sum of exp(x[j] - m) over 8 float lanes, as sce_exp sums, without
 * keeping the exponentials. */
static float sce_sum_exp(const float *restrict x, float m, int64_t n) {
    float acc[SCE_LANES] = {0};
    int64_t j = 0;
    for (; j + SCE_LANES <= n; j += SCE_LANES)
        for (int l = 0; l < SCE_LANES; l++) acc[l] += expf(x[j + l] - m);
    float s = 0.0f;
    for (; j < n; j++) s += expf(x[j] - m);
    for (int l = 0; l < SCE_LANES; l++) s += acc[l];
    return s;
}

/* Phase SF_CE_PHASE_SUMS: the tile's sums of exp(x - max) and its targets'
 * logits added into stats[R, 3 R); the fast kernel sums in float over 8
 * lanes, the reference in double. */
static void sce_split_sums(const sf_kernel_args *a, int64_t rows, int64_t lo, int64_t n, int fast) {
    float *st = a->stats;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * n;
        float m = st[r];
        if (fast) {
            st[rows + r] += sce_sum_exp(x, m, n);
        } else {
            double s = 0;
            for (int64_t j = 0; j < n; j++) s += exp((double)x[j] - m);
            st[rows + r] += (float)s;
        }
        int32_t l = a->labels[r];
        if (sce_holds(l, lo, n)) st[2 * rows + r] += x[l - lo];
    }
}

static sf_status sce_split_fwd(const sf_kernel_args *a, int fast) {
    int64_t rows, lo, n, c, total;
    sce_split_geom(a, &rows, &lo, &n, &c, &total);
    if (!a->stats) return SF_ERR_INVALID;
    int labels = a->phase == SF_CE_PHASE_SUMS || (a->phase == SF_CE_PHASE_FULL && a->loss);
    if (labels && sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    switch (a->phase) {
    case SF_CE_PHASE_MAX: sce_split_max(a, rows, n, fast); return SF_OK;
    case SF_CE_PHASE_SUMS: sce_split_sums(a, rows, lo, n, fast); return SF_OK;
    case SF_CE_PHASE_FULL: break;
    default: return SF_ERR_INVALID;
    }
    const float *st = a->stats;
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * n;
        float *y = a->out[0] + r * n;
        float m = st[r], s = st[rows + r];
        double lse = log((double)s);
        if (fast) {
            float inv = 1.0f / s;
            for (int64_t j = 0; j < n; j++) y[j] = expf(x[j] - m) * inv;
        } else {
            for (int64_t j = 0; j < n; j++) y[j] = (float)exp((double)x[j] - m - lse);
        }
        if (a->loss && sce_holds(a->labels[r], lo, n))
            loss += lse - ((double)st[2 * rows + r] - (double)m);
    }
    if (a->loss) *a->loss += loss / (double)total;
    return SF_OK;
}

static sf_status sce_split_bwd(const sf_kernel_args *a, int fast) {
    int64_t rows, lo, n, c, total;
    sce_split_geom(a, &rows, &lo, &n, &c, &total);
    if (sce_check_labels(a->labels, rows, c) != SF_OK) return SF_ERR_INVALID;
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    const float *st = a->stats;
    const float inv_total = (float)(1.0 / (double)total);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * n;
        float *dx = a->grad_in[0] + r * n;
        float m = st[r], s = st[rows + r];
        int32_t l = a->labels[r];
        if (fast) {
            float k = inv_total / s;
            for (int64_t j = 0; j < n; j++) dx[j] += expf(x[j] - m) * k;
            if (sce_holds(l, lo, n)) dx[l - lo] -= inv_total;
        } else {
            double lse = log((double)s);
            for (int64_t j = 0; j < n; j++) {
                double p = exp((double)x[j] - m - lse), onehot = lo + j == l ? 1.0 : 0.0;
                dx[j] += (float)((p - onehot) / (double)total);
            }
        }
    }
    return SF_OK;
}

/* Saves its output (the probabilities, from which the gradient is p - y:
 * log_softmax keeps its result), not the logits. */
static unsigned softmax_ce_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_OUTPUT;
}

const sf_op_class sf_op_softmax_ce_class = {
    .type = SF_OP_SOFTMAX_CE,
    .name = "softmax_ce",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = NULL,
    .n_attrs = 0,
    .defaults = NULL,
    .infer = softmax_ce_infer,
    .param_count = NULL,
    .space = softmax_ce_space,
    .region = softmax_ce_region,
    .inner_dim = softmax_ce_inner_dim,
    .cost = softmax_ce_cost,
    .saves = softmax_ce_saves,
    .fwd_ref = softmax_ce_fwd_ref,
    .fwd_fast = softmax_ce_fwd_fast,
    .bwd_ref = softmax_ce_bwd_ref,
    .bwd_fast = softmax_ce_bwd_fast,
    .workspace = softmax_ce_workspace,
};
