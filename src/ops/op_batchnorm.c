/*
 * op_batchnorm.c - batch normalization over (N, C, ...) with per-channel scale
 * and shift, ranks 2 to 5 (BatchNorm1d without and with length, 2d, 3d).
 *
 * Trainable parameters: scale and shift, 2 * C when affine. The running mean
 * and variance are buffers, not parameters (torchvision's counts leave them
 * out too), so they are not counted.
 *
 * Parallel space: the output, same shape as the input. N is the sample
 * dimension, C a parameter dimension (a channel's statistics and weights stay
 * with that channel), the rest attributes. A tile needs exactly its own region.
 * Splitting N or the spatial dimensions makes each part normalize with its own
 * statistics (per-device batch norm, as data-parallel frameworks do by default).
 *
 * What runs exactly, on both kernels: every split. A tile reads and accumulates
 * into the scale and shift of its channels only (sf_op_weight_slices: two runs,
 * [c0, c1) and C + [c0, c1)); parameter tensors as torch.nn.BatchNorm*d's,
 * weight (C) ones and bias (C) zeros. A split on N or on the positions is
 * exact per part but is not what one device computes: each part normalizes
 * with its own statistics (see the kernels below), so P ranks train a slightly
 * different model from one rank. That is kept on purpose: it is what
 * data-parallel training without SyncBatchNorm does, and taking N out of the
 * space would leave a CNN with batch norm no data parallelism at all.
 *
 * FLOPs per element: forward 8 with affine (1 for the mean, 3 for the variance,
 * 2 to normalize, 2 to scale and shift), 6 without; backward 12 with affine
 * (2 for the scale and shift gradients, 10 for the input gradient's two
 * reductions and combination), 10 without.
 *
 * Kernels (buffers in soapflow/kernels.h; weights: scale (C), then shift (C)):
 * training mode, the statistics of the batch. For each channel c of the tile,
 * mean and biased variance over the tile's samples and positions (N, H, W ...),
 * y = (x - mean) / sqrt(var + eps) * scale[c] + shift[c]. The statistics are
 * those of the tile the kernel is given: a tile split on channels is exact (a
 * channel's statistics need only that channel), while a tile split on samples
 * or positions normalizes with its own part's statistics - what a data-parallel
 * FlexFlow or PyTorch without SyncBatchNorm does per replica (per-device batch
 * norm), as the planning side above already assumes. Inference mode (eval, as
 * PyTorch's module.eval()) normalizes with the running statistics instead:
 * y = (x - running_mean) / sqrt(running_var + eps) * scale + shift. The
 * running statistics are buffers the caller keeps (a->running, 2 C floats,
 * PyTorch's running_mean and running_var); a training forward adds its tile's
 * per-channel count and sums of x - running_mean and of its square into
 * a->bn_sums when given, and the caller, having added every tile of the batch
 * (every part, on every rank), updates the buffers with
 * sf_batchnorm_update_running: momentum 0.1 and the unbiased variance, as
 * nn.BatchNorm*d. So the running statistics are those of the whole batch
 * however the operator is split, the same as one device's, although a
 * sample-split forward normalizes each part with its own statistics. Sums
 * around the running mean (the same number on every rank) keep the variance
 * accurate once the running mean is near the data's.
 * Backward (training mode only) recomputes the statistics from x and, with
 * xh = (x - mean) * rstd and M the elements of the channel in the tile, adds
 *   dx     += scale * rstd * (dy - sum(dy) / M - xh * sum(dy * xh) / M)
 *   dscale += sum(dy * xh),  dshift += sum(dy)
 * into the full-layout gradient at the tile's channels. The reference follows
 * these formulas with double accumulators. The fast kernels take one pass for
 * the statistics: sums of x - x0 and (x - x0)^2, with the pivot x0 the channel's
 * first element in the tile (shifted data: the sums stay at the scale of the
 * spread, so tiny or offset channels keep their accuracy), each (sample,
 * channel) row of positions summed in float over 8 independent lanes (a sum a
 * compiler vectorizes without reassociating on its own) and the rows in double.
 * They apply y = ((x - x0) - dm) * rstd * scale + shift and
 * dx += A * (dy - mean(dy)) + B * (x - mean) in contiguous loops. A channel with
 * one element in the tile has variance 0: y = shift and dx = 0 (PyTorch refuses
 * such a batch in training; a kernel computes what the formula gives).
 */
#include <math.h>
#include <stddef.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc batchnorm_attrs[] = {
    {.name = "eps", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, norm.eps)},
    {.name = "affine", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, norm.affine)},
};

static void batchnorm_defaults(sf_op_params *p) {
    p->norm.eps = 1e-5;
    p->norm.affine = 1;
}

static sf_status batchnorm_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    (void)n_in;
    if (in[0].ndim < 2 || in[0].ndim > 5)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 2-D to 5-D (N, C, ...), got %d-D",
                            in[0].ndim);
    if (!(p->norm.eps > 0))
        return sf_error_set(err, SF_ERR_INVALID, "eps must be > 0, got %g", p->norm.eps);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t batchnorm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return p->norm.affine ? 2 * in[0].d[1] : 0;
}

static void batchnorm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_PARAMETER;
}

static void batchnorm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void batchnorm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    int affine = op->params.norm.affine;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = (affine ? 8 : 6) * n;
    cost->flops_bwd = (affine ? 12 : 10) * n;
    double b = n * SF_ELEM_BYTES;
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    /* forward reads the input twice (statistics, then normalization) */
    cost->bytes_fwd = 2 * b + b + w_b;
    /* backward reads input and output gradient twice (reductions, then the
     * input gradient) and writes the input gradient and the weight gradients */
    cost->bytes_bwd = 4 * b + b + 2 * w_b;
}

/* The scale and the shift of the tile's channels [c0, c1). */
static int batchnorm_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    int64_t c = op->in_shapes[0].d[1], c0 = t->lo[1], ct = t->hi[1] - t->lo[1];
    out[0] = sf_weight_run(c0, ct);
    out[1] = sf_weight_run(c + c0, ct);
    return 2;
}

/* torch.nn.BatchNorm*d(affine=True): weight (C) ones, bias (C) zeros. */
static int batchnorm_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t c = op->in_shapes[0].d[1];
    out[0] = sf_param_make("weight", 1, (int64_t[]){c}, 0, SF_INIT_CONST, 1.0);
    out[1] = sf_param_make("bias", 1, (int64_t[]){c}, c, SF_INIT_CONST, 0.0);
    return 2;
}

/* ---- kernels ----------------------------------------------------------- */

/* The tile as (nt, ct, S): S the positions (product of dimensions 2..). */
typedef struct bn_geom {
    int64_t nt, c0, ct, S, C;
    const float *scale, *shift; /* NULL without affine */
} bn_geom;

static void bn_geom_init(const sf_kernel_args *a, bn_geom *g) {
    const sf_tile *t = &a->tile;
    g->nt = t->hi[0] - t->lo[0];
    g->c0 = t->lo[1];
    g->ct = t->hi[1] - t->lo[1];
    g->S = 1;
    for (int i = 2; i < t->ndim; i++) g->S *= t->hi[i] - t->lo[i];
    g->C = a->op->in_shapes[0].d[1];
    g->scale = a->op->params.norm.affine ? a->weights : NULL;
    g->shift = g->scale ? a->weights + g->C : NULL;
}

/* Mean and 1 / sqrt(var + eps) of channel c (tile-relative), in double. */
static void bn_stats_ref(const bn_geom *g, const float *x, int64_t c, double eps, double *mean,
                         double *rstd) {
    double m = (double)(g->nt * g->S), s = 0, v = 0;
    for (int64_t n = 0; n < g->nt; n++)
        for (int64_t q = 0; q < g->S; q++) s += x[(n * g->ct + c) * g->S + q];
    s /= m;
    for (int64_t n = 0; n < g->nt; n++)
        for (int64_t q = 0; q < g->S; q++) {
            double d = x[(n * g->ct + c) * g->S + q] - s;
            v += d * d;
        }
    *mean = s;
    *rstd = 1.0 / sqrt(v / m + eps);
}

/* bn_sums of channel c (tile-relative) around the running mean, in double. */
static void bn_sums_ref(const bn_geom *g, const float *x, int64_t c, double shift, double *out) {
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < g->nt; n++)
        for (int64_t q = 0; q < g->S; q++) {
            double d = x[(n * g->ct + c) * g->S + q] - shift;
            s1 += d;
            s2 += d * d;
        }
    out[0] += (double)(g->nt * g->S);
    out[1] += s1;
    out[2] += s2;
}

/* The running statistics (2 C) of an eval call, or a training call that adds sums. */
static sf_status bn_check_running(const sf_kernel_args *a) {
    if (a->eval && !a->running) return SF_ERR_INVALID; /* nothing to normalize with */
    return SF_OK;
}

static sf_status batchnorm_fwd_ref(const sf_kernel_args *a) {
    bn_geom g;
    bn_geom_init(a, &g);
    const float *x = a->in[0];
    float *y = a->out[0];
    if (bn_check_running(a) != SF_OK) return SF_ERR_INVALID;
    for (int64_t c = 0; c < g.ct; c++) {
        double mean, rstd;
        if (a->eval) {
            mean = a->running[g.c0 + c];
            rstd = 1.0 / sqrt((double)a->running[g.C + g.c0 + c] + a->op->params.norm.eps);
        } else {
            bn_stats_ref(&g, x, c, a->op->params.norm.eps, &mean, &rstd);
            if (a->bn_sums)
                bn_sums_ref(&g, x, c, a->running ? a->running[g.c0 + c] : 0.0,
                            a->bn_sums + 3 * (g.c0 + c));
        }
        double gm = g.scale ? g.scale[g.c0 + c] : 1.0, bt = g.shift ? g.shift[g.c0 + c] : 0.0;
        for (int64_t n = 0; n < g.nt; n++)
            for (int64_t q = 0; q < g.S; q++) {
                int64_t i = (n * g.ct + c) * g.S + q;
                y[i] = (float)((x[i] - mean) * rstd * gm + bt);
            }
    }
    return SF_OK;
}

static sf_status batchnorm_bwd_ref(const sf_kernel_args *a) {
    bn_geom g;
    bn_geom_init(a, &g);
    const float *x = a->in[0], *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dscale = g.scale ? a->grad_weights : NULL;
    float *dshift = dscale ? dscale + g.C : NULL;
    double m = (double)(g.nt * g.S);
    for (int64_t c = 0; c < g.ct; c++) {
        double mean, rstd;
        bn_stats_ref(&g, x, c, a->op->params.norm.eps, &mean, &rstd);
        double gm = g.scale ? g.scale[g.c0 + c] : 1.0, sdy = 0, sdyxh = 0;
        for (int64_t n = 0; n < g.nt; n++)
            for (int64_t q = 0; q < g.S; q++) {
                int64_t i = (n * g.ct + c) * g.S + q;
                sdy += dy[i];
                sdyxh += dy[i] * (x[i] - mean) * rstd;
            }
        if (dscale) {
            dscale[g.c0 + c] += (float)sdyxh;
            dshift[g.c0 + c] += (float)sdy;
        }
        if (!dx) continue;
        for (int64_t n = 0; n < g.nt; n++)
            for (int64_t q = 0; q < g.S; q++) {
                int64_t i = (n * g.ct + c) * g.S + q;
                double xh = (x[i] - mean) * rstd;
                dx[i] += (float)(gm * rstd * (dy[i] - sdy / m - xh * sdyxh / m));
            }
    }
    return SF_OK;
}

#define BN_LANES 8

/* Sums of dy and of dy * (x - x0 - dm) over a row, 8 lanes. */
static void bn_dots(const float *restrict dy, const float *restrict x, float x0, float dm,
                    int64_t n, float *s1, float *s2) {
    float a1[BN_LANES] = {0}, a2[BN_LANES] = {0};
    int64_t j = 0;
    for (; j + BN_LANES <= n; j += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) {
            a1[l] += dy[j + l];
            a2[l] += dy[j + l] * ((x[j + l] - x0) - dm);
        }
    float t1 = 0.0f, t2 = 0.0f;
    for (; j < n; j++) {
        t1 += dy[j];
        t2 += dy[j] * ((x[j] - x0) - dm);
    }
    for (int l = 0; l < BN_LANES; l++) {
        t1 += a1[l];
        t2 += a2[l];
    }
    *s1 = t1;
    *s2 = t2;
}

/* Statistics of channel c around a pivot x0 (its first element in the tile):
 * mean = x0 + dm, and rstd. Shifting by a value of the data keeps the sums at
 * the scale of the spread, so x - mean stays accurate even when the mean is
 * large against the spread (or the channel has 1 or 2 elements). */
static void bn_stats_fast(const bn_geom *g, const float *x, int64_t c, double eps, float *x0,
                          float *dm, float *rstd, double *sums) {
    double m = (double)(g->nt * g->S), s1 = 0, s2 = 0;
    float p = x[c * g->S];
    for (int64_t n = 0; n < g->nt; n++) {
        float r1, r2;
        sf_shifted_sums(x + (n * g->ct + c) * g->S, p, g->S, &r1, &r2);
        s1 += r1;
        s2 += r2;
    }
    double d = s1 / m, var = s2 / m - d * d;
    *x0 = p;
    *dm = (float)d;
    *rstd = (float)(1.0 / sqrt((var > 0 ? var : 0) + eps));
    if (sums) { /* m, sum (x - p), sum (x - p)^2 for the caller to move to its shift */
        sums[0] = m;
        sums[1] = s1;
        sums[2] = s2;
    }
}

/* Sums around pivot p (m, s1, s2) moved to sums around shift k, added into out:
 * x - k = (x - p) + (p - k). */
static void bn_sums_move(const double *ps, double p, double k, double *out) {
    double e = p - k;
    out[0] += ps[0];
    out[1] += ps[1] + ps[0] * e;
    out[2] += ps[2] + 2 * e * ps[1] + ps[0] * e * e;
}

static sf_status batchnorm_fwd_fast(const sf_kernel_args *a) {
    bn_geom g;
    bn_geom_init(a, &g);
    const float *x = a->in[0];
    float *y = a->out[0];
    if (bn_check_running(a) != SF_OK) return SF_ERR_INVALID;
    for (int64_t c = 0; c < g.ct; c++) {
        float x0, dm, rstd;
        if (a->eval) {
            /* (x - x0 - dm) with x0 = 0 and dm the running mean */
            x0 = 0.0f;
            dm = a->running[g.c0 + c];
            rstd = (float)(1.0 / sqrt((double)a->running[g.C + g.c0 + c] + a->op->params.norm.eps));
        } else {
            double ps[3];
            bn_stats_fast(&g, x, c, a->op->params.norm.eps, &x0, &dm, &rstd,
                          a->bn_sums ? ps : NULL);
            if (a->bn_sums)
                bn_sums_move(ps, x0, a->running ? a->running[g.c0 + c] : 0.0,
                             a->bn_sums + 3 * (g.c0 + c));
        }
        float gm = g.scale ? g.scale[g.c0 + c] : 1.0f, bt = g.shift ? g.shift[g.c0 + c] : 0.0f;
        const float mul = rstd * gm;
        for (int64_t n = 0; n < g.nt; n++) {
            const float *restrict xr = x + (n * g.ct + c) * g.S;
            float *restrict yr = y + (n * g.ct + c) * g.S;
            for (int64_t q = 0; q < g.S; q++) yr[q] = ((xr[q] - x0) - dm) * mul + bt;
        }
    }
    return SF_OK;
}

static sf_status batchnorm_bwd_fast(const sf_kernel_args *a) {
    bn_geom g;
    bn_geom_init(a, &g);
    const float *x = a->in[0], *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dscale = g.scale ? a->grad_weights : NULL;
    float *dshift = dscale ? dscale + g.C : NULL;
    if (!dx && !dscale) return SF_OK;
    double m = (double)(g.nt * g.S);
    for (int64_t c = 0; c < g.ct; c++) {
        float x0, dm, rstd;
        bn_stats_fast(&g, x, c, a->op->params.norm.eps, &x0, &dm, &rstd, NULL);
        double sdy = 0, sdyxc = 0; /* sum(dy), sum(dy * (x - mean)) */
        for (int64_t n = 0; n < g.nt; n++) {
            int64_t off = (n * g.ct + c) * g.S;
            float r1, r2;
            bn_dots(dy + off, x + off, x0, dm, g.S, &r1, &r2);
            sdy += r1;
            sdyxc += r2;
        }
        if (dscale) {
            dscale[g.c0 + c] += (float)(sdyxc * rstd);
            dshift[g.c0 + c] += (float)sdy;
        }
        if (!dx) continue;
        /* dx += A (dy - mean(dy)) + B (x - mean): the differences are taken
         * before the large factor rstd multiplies them */
        double gm = g.scale ? g.scale[g.c0 + c] : 1.0, r = rstd;
        const float A = (float)(gm * r), B = (float)(-gm * r * r * r * sdyxc / m);
        const float mdy = (float)(sdy / m);
        for (int64_t n = 0; n < g.nt; n++) {
            int64_t off = (n * g.ct + c) * g.S;
            const float *restrict xr = x + off, *restrict dyr = dy + off;
            float *restrict dxr = dx + off;
            for (int64_t q = 0; q < g.S; q++)
                dxr[q] += A * (dyr[q] - mdy) + B * ((xr[q] - x0) - dm);
        }
    }
    return SF_OK;
}

void sf_batchnorm_update_running(int64_t channels, const double *sums, float *running) {
    const double momentum = 0.1; /* nn.BatchNorm*d's default */
    for (int64_t c = 0; c < channels; c++) {
        double n = sums[3 * c], s1 = sums[3 * c + 1], s2 = sums[3 * c + 2];
        if (!(n > 0)) continue;
        double k = running[c], d = s1 / n;
        double mean = k + d;
        running[c] = (float)((1 - momentum) * running[c] + momentum * mean);
        if (n > 1) {
            double var = (s2 / n - d * d) * n / (n - 1); /* unbiased, as PyTorch */
            if (var < 0) var = 0;                        /* rounding; a NaN stays NaN */
            running[channels + c] =
                (float)((1 - momentum) * running[channels + c] + momentum * var);
        }
    }
}

/* Saves its input (and the batch's mean and inverse deviation, C values each,
 * left out), not its output: PyTorch's NativeBatchNormBackward. A ReLU after it
 * may run in place. */
static unsigned batchnorm_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_INPUT(0);
}

const sf_op_class sf_op_batchnorm_class = {
    .type = SF_OP_BATCHNORM,
    .name = "batchnorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = batchnorm_attrs,
    .n_attrs = (int)(sizeof batchnorm_attrs / sizeof batchnorm_attrs[0]),
    .defaults = batchnorm_defaults,
    .infer = batchnorm_infer,
    .param_count = batchnorm_params,
    .space = batchnorm_space,
    .region = batchnorm_region,
    .cost = batchnorm_cost,
    .saves = batchnorm_saves,
    .weight_slices = batchnorm_weight_slices,
    .param_descs = batchnorm_param_descs,
    .fwd_ref = batchnorm_fwd_ref,
    .fwd_fast = batchnorm_fwd_fast,
    .bwd_ref = batchnorm_bwd_ref,
    .bwd_fast = batchnorm_bwd_fast,
};
