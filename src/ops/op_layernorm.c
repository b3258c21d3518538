/*
 * op_layernorm.c - layer normalization over the last dimension (torch.nn.LayerNorm(D)).
 *
 * Input (..., D), output the same shape; with `affine`, a learnable scale and
 * shift of D elements each (2*D parameters). Unlike batch normalization there
 * are no running statistics and nothing couples samples.
 *
 * Parallel space: the output. Dimension 0 is the sample, middle dimensions
 * attributes, and D cannot be split: each row's mean and variance need all of
 * it. The weights are therefore never split, only replicated. Region: the tile.
 *
 * Every tile holds all of D, so it reads and accumulates into all of the scale
 * and the shift (the default sf_op_weight_slices: the whole layout), and parts
 * hold replicas. Parameter tensors: torch.nn.LayerNorm's weight (D) ones and
 * bias (D) zeros.
 *
 * FLOPs per element: forward mean (1), variance (3: subtract, square, add),
 * normalize (2), and scale and shift (2) when affine; backward about 8 (the two
 * row reductions of the input gradient and its combination) plus 2 for the
 * scale and shift gradients when affine.
 *
 * Kernels (buffers in soapflow/kernels.h; weights: scale (D), then shift (D)):
 * the tile is R rows of D (its leading dimensions flattened; a tile must hold
 * all of D, else SF_ERR_INVALID). Per row, mean and biased variance,
 * y = (x - mean) * rstd * scale + shift with rstd = 1 / sqrt(var + eps), as
 * torch.nn.LayerNorm. Backward recomputes the row statistics and, with
 * xh = (x - mean) * rstd and dh = dy * scale, adds
 *   dx     += rstd * (dh - mean(dh) - xh * mean(dh * xh))
 *   dscale += dy * xh,  dshift += dy     (summed over the tile's rows)
 * The reference follows the formulas with double accumulators; the fast kernels
 * reduce each row in one pass, in float over 8 independent lanes (vectorizable
 * without reassociation by the compiler), as sums of x - x0 and (x - x0)^2 with
 * the pivot x0 the row's first element (shifted data: accurate for rows far
 * from zero), and apply contiguous loops over D.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define LAYERNORM_FWD_FLOPS 6.0
#define LAYERNORM_BWD_FLOPS 8.0
#define LAYERNORM_AFFINE_FLOPS 2.0

static const sf_attr_desc layernorm_attrs[] = {
    {.name = "eps", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, norm.eps)},
    {.name = "affine", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, norm.affine)},
};

static void layernorm_defaults(sf_op_params *p) {
    p->norm.eps = 1e-5;
    p->norm.affine = 1;
}

static sf_status layernorm_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "input must have at least 2 dimensions (N, ..., D), got %d",
                            in[0].ndim);
    if (!(p->norm.eps >= 0) || !isfinite(p->norm.eps))
        return sf_error_set(err, SF_ERR_INVALID, "eps must be finite and >= 0, got %g",
                            p->norm.eps);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t layernorm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return p->norm.affine ? 2 * in[0].d[in[0].ndim - 1] : 0;
}

static void layernorm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_NONE;
}

static void layernorm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void layernorm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double n = (double)sf_tile_numel(t);
    int affine = op->params.norm.affine;
    double aff = affine ? LAYERNORM_AFFINE_FLOPS * n : 0;
    cost->flops_fwd = LAYERNORM_FWD_FLOPS * n + aff;
    cost->flops_bwd = LAYERNORM_BWD_FLOPS * n + aff;
    double io_b = n * SF_ELEM_BYTES;
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    cost->bytes_fwd = 2 * io_b + w_b;
    /* backward reads input and output gradient, writes the input gradient */
    cost->bytes_bwd = 3 * io_b + 2 * w_b;
}

/* torch.nn.LayerNorm(D): weight (D) ones, bias (D) zeros. No weight_slices:
 * D is never split, so every tile reads and accumulates into all of both. */
static int layernorm_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t d = op->in_shapes[0].d[op->in_shapes[0].ndim - 1];
    out[0] = sf_param_make("weight", 1, (int64_t[]){d}, 0, SF_INIT_CONST, 1.0);
    out[1] = sf_param_make("bias", 1, (int64_t[]){d}, d, SF_INIT_CONST, 0.0);
    return 2;
}

/* ---- kernels ----------------------------------------------------------- */

/* Rows and width of a tile; 0 rows when the tile does not hold all of D. */
static void ln_geom(const sf_kernel_args *a, int64_t *rows, int64_t *d) {
    const sf_tile *t = &a->tile;
    int last = t->ndim - 1;
    *d = a->op->in_shapes[0].d[last];
    *rows = t->lo[last] == 0 && t->hi[last] == *d ? sf_tile_numel(t) / *d : -1;
}

static void ln_stats_ref(const float *x, int64_t d, double eps, double *mean, double *rstd) {
    double s = 0, v = 0;
    for (int64_t j = 0; j < d; j++) s += x[j];
    s /= (double)d;
    for (int64_t j = 0; j < d; j++) v += (x[j] - s) * (x[j] - s);
    *mean = s;
    *rstd = 1.0 / sqrt(v / (double)d + eps);
}

/* y (R, D) = (x - mean) * rstd * scale + shift */
static sf_status layernorm_fwd_ref(const sf_kernel_args *a) {
    int64_t rows, d;
    ln_geom(a, &rows, &d);
    if (rows < 0) return SF_ERR_INVALID;
    const float *scale = a->op->params.norm.affine ? a->weights : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * d;
        float *y = a->out[0] + r * d;
        double mean, rstd;
        ln_stats_ref(x, d, a->op->params.norm.eps, &mean, &rstd);
        for (int64_t j = 0; j < d; j++) {
            double v = (x[j] - mean) * rstd;
            y[j] = (float)(scale ? v * scale[j] + scale[d + j] : v);
        }
    }
    return SF_OK;
}

static sf_status layernorm_bwd_ref(const sf_kernel_args *a) {
    int64_t rows, d;
    ln_geom(a, &rows, &d);
    if (rows < 0) return SF_ERR_INVALID;
    const float *scale = a->op->params.norm.affine ? a->weights : NULL;
    float *dscale = scale ? a->grad_weights : NULL;
    float *dx_all = a->grad_in ? a->grad_in[0] : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a->in[0] + r * d, *dy = a->grad_out[0] + r * d;
        double mean, rstd, mdh = 0, mdhxh = 0;
        ln_stats_ref(x, d, a->op->params.norm.eps, &mean, &rstd);
        for (int64_t j = 0; j < d; j++) {
            double dh = dy[j] * (scale ? scale[j] : 1.0f), xh = (x[j] - mean) * rstd;
            mdh += dh;
            mdhxh += dh * xh;
            if (dscale) {
                dscale[j] += (float)(dy[j] * xh);
                dscale[d + j] += dy[j];
            }
        }
        mdh /= (double)d;
        mdhxh /= (double)d;
        if (!dx_all) continue;
        float *dx = dx_all + r * d;
        for (int64_t j = 0; j < d; j++) {
            double dh = dy[j] * (scale ? scale[j] : 1.0f), xh = (x[j] - mean) * rstd;
            dx[j] += (float)(rstd * (dh - mdh - xh * mdhxh));
        }
    }
    return SF_OK;
}

/* Row statistics around the pivot x0 = x[0]: mean = x0 + dm, and rstd. The
 * shifted sums stay at the scale of the row's spread, so (x - x0) - dm is
 * accurate even for a row far from zero. */
static void ln_stats_fast(const float *x, int64_t d, double eps, float *dm, float *rstd) {
    float s1, s2;
    sf_shifted_sums(x, x[0], d, &s1, &s2);
    double m = (double)s1 / (double)d, var = (double)s2 / (double)d - m * m;
    *dm = (float)m;
    *rstd = (float)(1.0 / sqrt((var > 0 ? var : 0) + eps));
}

static sf_status layernorm_fwd_fast(const sf_kernel_args *a) {
    int64_t rows, d;
    ln_geom(a, &rows, &d);
    if (rows < 0) return SF_ERR_INVALID;
    const float *scale = a->op->params.norm.affine ? a->weights : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = a->in[0] + r * d;
        float *restrict y = a->out[0] + r * d;
        float dm, rstd;
        ln_stats_fast(x, d, a->op->params.norm.eps, &dm, &rstd);
        const float x0 = x[0];
        if (scale) {
            const float *restrict gm = scale, *restrict bt = scale + d;
            for (int64_t j = 0; j < d; j++) y[j] = ((x[j] - x0) - dm) * rstd * gm[j] + bt[j];
        } else {
            for (int64_t j = 0; j < d; j++) y[j] = ((x[j] - x0) - dm) * rstd;
        }
    }
    return SF_OK;
}

#define LN_LANES 8

static sf_status layernorm_bwd_fast(const sf_kernel_args *a) {
    int64_t rows, d;
    ln_geom(a, &rows, &d);
    if (rows < 0) return SF_ERR_INVALID;
    const float *scale = a->op->params.norm.affine ? a->weights : NULL;
    float *dscale = scale ? a->grad_weights : NULL;
    float *dx_all = a->grad_in ? a->grad_in[0] : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = a->in[0] + r * d, *restrict dy = a->grad_out[0] + r * d;
        float dm, rstd;
        ln_stats_fast(x, d, a->op->params.norm.eps, &dm, &rstd);
        const float x0 = x[0];
        if (dscale) {
            float *restrict dg = dscale, *restrict db = dscale + d;
            for (int64_t j = 0; j < d; j++) {
                dg[j] += dy[j] * ((x[j] - x0) - dm) * rstd;
                db[j] += dy[j];
            }
        }
        if (!dx_all) continue;
        /* sums of dh and of dh * (x - mean), over LN_LANES lanes */
        float a1[LN_LANES] = {0}, a2[LN_LANES] = {0};
        int64_t j = 0;
        for (; j + LN_LANES <= d; j += LN_LANES)
            for (int l = 0; l < LN_LANES; l++) {
                float dh = dy[j + l] * (scale ? scale[j + l] : 1.0f);
                a1[l] += dh;
                a2[l] += dh * ((x[j + l] - x0) - dm);
            }
        float s1 = 0.0f, s2 = 0.0f;
        for (; j < d; j++) {
            float dh = dy[j] * (scale ? scale[j] : 1.0f);
            s1 += dh;
            s2 += dh * ((x[j] - x0) - dm);
        }
        for (int l = 0; l < LN_LANES; l++) {
            s1 += a1[l];
            s2 += a2[l];
        }
        const float mdh = s1 / (float)d, k2 = s2 * rstd * rstd / (float)d;
        float *restrict dx = dx_all + r * d;
        if (scale) {
            for (int64_t q = 0; q < d; q++)
                dx[q] += rstd * ((dy[q] * scale[q] - mdh) - ((x[q] - x0) - dm) * k2);
        } else {
            for (int64_t q = 0; q < d; q++)
                dx[q] += rstd * ((dy[q] - mdh) - ((x[q] - x0) - dm) * k2);
        }
    }
    return SF_OK;
}

/* Saves its input (and each row's mean and inverse deviation, left out), not
 * its output: NativeLayerNormBackward. */
static unsigned layernorm_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_INPUT(0);
}

const sf_op_class sf_op_layernorm_class = {
    .type = SF_OP_LAYERNORM,
    .name = "layernorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = layernorm_attrs,
    .n_attrs = (int)(sizeof layernorm_attrs / sizeof layernorm_attrs[0]),
    .defaults = layernorm_defaults,
    .infer = layernorm_infer,
    .param_count = layernorm_params,
    .space = layernorm_space,
    .region = layernorm_region,
    .cost = layernorm_cost,
    .saves = layernorm_saves,
    .param_descs = layernorm_param_descs,
    .fwd_ref = layernorm_fwd_ref,
    .fwd_fast = layernorm_fwd_fast,
    .bwd_ref = layernorm_bwd_ref,
    .bwd_fast = layernorm_bwd_fast,
};
