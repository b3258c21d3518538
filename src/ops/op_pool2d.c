/*
 * op_pool2d.c - 2-D max, average and adaptive average pooling, NCHW.
 *
 * Output sizes follow PyTorch exactly: floor((H + 2p - k) / s) + 1, or with
 * ceil_mode the ceiling, minus one when the last window would start past the
 * input and its left padding (PyTorch drops a window that covers only right
 * padding). Padding may be at most half the kernel, as PyTorch requires, so no
 * window lies wholly in the padding. Adaptive pooling maps output row i to input
 * rows [floor(i*H/out), ceil((i+1)*H/out)); windows may overlap and differ in size.
 *
 * Parallel space: the output (N, C, H_out, W_out); N is the sample dimension and
 * C, H, W are attributes (there are no weights, so splitting channels keeps
 * nothing apart). A tile needs its own samples and channels and the input rows
 * and columns under its windows.
 *
 * FLOPs: one compare (max) or add (average) per window element and output, the
 * same again backward (routing or spreading the gradient). Adaptive windows are
 * summed exactly over the tile's rows and columns.
 *
 * Kernels (buffers in soapflow/kernels.h): output (n, c, oh, ow) of the tile
 * reads the region at (n, c, ih - ih0, iw - iw0) for the window's positions
 * inside the input; positions in the padding are skipped, which is what
 * PyTorch does (max ignores them, like -inf; average adds zeros).
 *   max           the largest element of the window; backward recomputes the
 *                 argmax from the input (the first maximum in row-major window
 *                 order, PyTorch's tie rule) and adds dy there. A NaN wins
 *                 (max_takes), as in PyTorch: the window gives NaN and its
 *                 gradient goes to the last NaN.
 *   avg           the sum over the window divided by PyTorch's divisor: with
 *                 count_include_pad, the window clipped to the padded input
 *                 [-p, n + p) (with ceil_mode the last window may reach past
 *                 it); without, the number of positions inside the input.
 *   adaptive_avg  the mean of rows [floor(i*H/O), ceil((i+1)*H/O)) x columns alike.
 * Backward spreads dy over the same windows with the same weights, accumulated.
 * The reference loops over windows per output element. The fast kernels work on
 * one output row at a time: for each kernel tap (i, j) they update the whole
 * row, ow over the range whose input column exists, as a strided (contiguous
 * when the stride is 1) vectorizable loop; max keeps the row's running maxima
 * and argmaxes in the workspace (2 * W_out-tile values), avg the row's
 * dy / divisor. Adaptive windows
 * differ per output, so its fast kernels are the reference ones.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const char *const pool_mode_names[] = {"max", "avg", "adaptive_avg"};

static const sf_attr_desc pool2d_attrs[] = {
    {.name = "mode",
     .type = SF_ATTR_ENUM,
     .offset = offsetof(sf_op_params, pool2d.mode),
     .enum_names = pool_mode_names,
     .n_enum = (int)(sizeof pool_mode_names / sizeof pool_mode_names[0])},
    {.name = "kernel",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, pool2d.kernel),
     .count = 2},
    {.name = "stride",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, pool2d.stride),
     .count = 2},
    {.name = "padding",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, pool2d.padding),
     .count = 2},
    {.name = "output_size",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, pool2d.output_size),
     .count = 2},
    {.name = "ceil_mode", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, pool2d.ceil_mode)},
    {.name = "count_include_pad",
     .type = SF_ATTR_BOOL,
     .offset = offsetof(sf_op_params, pool2d.count_include_pad)},
};

/* PyTorch has stride default to the kernel when it is not given; a plain struct
 * cannot tell "not given", so stride defaults to 1 and model builders set it. */
static void pool2d_defaults(sf_op_params *p) {
    sf_pool2d_params *q = &p->pool2d;
    q->mode = SF_POOL_MAX;
    q->kernel[0] = q->kernel[1] = 1;
    q->stride[0] = q->stride[1] = 1;
    q->output_size[0] = q->output_size[1] = 1;
    q->count_include_pad = 1;
}

/* Adaptive window of output index i over n inputs and `out` outputs. */
static int64_t adaptive_start(int64_t i, int64_t n, int64_t out) { return i * n / out; }
static int64_t adaptive_end(int64_t i, int64_t n, int64_t out) {
    return ((i + 1) * n + out - 1) / out;
}

static sf_status pool2d_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_pool2d_params *q = &p->pool2d;
    if (in[0].ndim != 4)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 4-D (N, C, H, W), got %d-D",
                            in[0].ndim);
    if (q->mode < SF_POOL_MAX || q->mode > SF_POOL_ADAPTIVE_AVG)
        return sf_error_set(err, SF_ERR_INVALID, "unknown pooling mode %d", q->mode);
    int64_t o[2];
    if (q->mode == SF_POOL_ADAPTIVE_AVG) {
        for (int i = 0; i < 2; i++) {
            if (q->output_size[i] < 1)
                return sf_error_set(err, SF_ERR_INVALID, "output_size must be >= 1, got %lld",
                                    (long long)q->output_size[i]);
            o[i] = q->output_size[i];
        }
    } else {
        for (int i = 0; i < 2; i++) {
            int64_t k = q->kernel[i], s = q->stride[i], pad = q->padding[i], n = in[0].d[2 + i];
            if (k < 1 || s < 1 || pad < 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "kernel and stride must be >= 1 and padding >= 0");
            if (pad > k / 2)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "padding (%lld) must be at most half the kernel (%lld)",
                                    (long long)pad, (long long)k);
            if (n + 2 * pad < k)
                return sf_error_set(err, SF_ERR_SHAPE,
                                    "kernel (%lld) larger than padded input (%lld)", (long long)k,
                                    (long long)(n + 2 * pad));
            int64_t num = n + 2 * pad - k + (q->ceil_mode ? s - 1 : 0);
            o[i] = num / s + 1;
            /* the last window must start inside the input or its left padding */
            if (q->ceil_mode && (o[i] - 1) * s >= n + pad) o[i]--;
        }
    }
    out[0] = sf_shape_make(4, (int64_t[]){in[0].d[0], in[0].d[1], o[0], o[1]});
    *n_out = 1;
    return SF_OK;
}

static void pool2d_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = kinds[2] = kinds[3] = SF_DIM_ATTRIBUTE;
}

static void pool2d_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_pool2d_params *q = &op->params.pool2d;
    const sf_shape *in = &op->in_shapes[0];
    const sf_shape *os = &op->out_shapes[0];
    *r = *t;
    r->ndim = 4;
    for (int i = 0; i < 2; i++) {
        int64_t lo = t->lo[2 + i], hi = t->hi[2 + i], n = in->d[2 + i];
        if (q->mode != SF_POOL_ADAPTIVE_AVG) {
            sf_window_range(lo, hi, q->stride[i], q->padding[i], q->kernel[i], 1, n, &r->lo[2 + i],
                            &r->hi[2 + i]);
        } else if (hi <= lo) {
            r->lo[2 + i] = r->hi[2 + i] = 0;
        } else {
            r->lo[2 + i] = adaptive_start(lo, n, os->d[2 + i]);
            r->hi[2 + i] = adaptive_end(hi - 1, n, os->d[2 + i]);
        }
    }
}

/* Window elements summed over output rows [lo, hi) along dimension i. */
static double window_sum(const sf_op *op, int i, int64_t lo, int64_t hi) {
    const sf_pool2d_params *q = &op->params.pool2d;
    if (hi <= lo) return 0;
    if (q->mode != SF_POOL_ADAPTIVE_AVG) return (double)(hi - lo) * (double)q->kernel[i];
    int64_t n = op->in_shapes[0].d[2 + i], o = op->out_shapes[0].d[2 + i];
    double s = 0;
    for (int64_t k = lo; k < hi; k++)
        s += (double)(adaptive_end(k, n, o) - adaptive_start(k, n, o));
    return s;
}

static void pool2d_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double outs = (double)sf_tile_numel(t);
    double flops = 0;
    if (outs > 0)
        flops = (double)(t->hi[0] - t->lo[0]) * (double)(t->hi[1] - t->lo[1]) *
                window_sum(op, 0, t->lo[2], t->hi[2]) * window_sum(op, 1, t->lo[3], t->hi[3]);
    cost->flops_fwd = flops;
    cost->flops_bwd = flops;
    sf_tile r;
    pool2d_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + out_b;
    /* backward reads the output gradient (and the input, for max) and writes the input's */
    cost->bytes_bwd = 2 * in_b + out_b;
}

/* ---- kernels ----------------------------------------------------------- */

/* The extents of a tile and its region, read once. */
typedef struct pool_geom {
    int64_t nt, ct, oh0, oht, ow0, owt; /* output tile (samples, channels, rows, cols) */
    int64_t ih0, ihn, iw0, iwn;         /* input region rows and columns */
    int64_t H, W, OH, OW;               /* full input and output sizes */
} pool_geom;

static void pool_geom_init(const sf_kernel_args *a, pool_geom *g) {
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    g->nt = t->hi[0] - t->lo[0];
    g->ct = t->hi[1] - t->lo[1];
    g->oh0 = t->lo[2];
    g->oht = t->hi[2] - t->lo[2];
    g->ow0 = t->lo[3];
    g->owt = t->hi[3] - t->lo[3];
    g->ih0 = r->lo[2];
    g->ihn = r->hi[2] - r->lo[2];
    g->iw0 = r->lo[3];
    g->iwn = r->hi[3] - r->lo[3];
    g->H = a->op->in_shapes[0].d[2];
    g->W = a->op->in_shapes[0].d[3];
    g->OH = a->op->out_shapes[0].d[2];
    g->OW = a->op->out_shapes[0].d[3];
}

/* The window of global output index o along dimension i: input positions
 * [*lo, *hi) inside the input, and the average divisor's factor (PyTorch's). */
static void pool_window(const sf_op *op, int i, int64_t o, int64_t *lo, int64_t *hi, int64_t *div) {
    const sf_pool2d_params *q = &op->params.pool2d;
    int64_t n = op->in_shapes[0].d[2 + i];
    if (q->mode == SF_POOL_ADAPTIVE_AVG) {
        int64_t on = op->out_shapes[0].d[2 + i];
        *lo = adaptive_start(o, n, on);
        *hi = adaptive_end(o, n, on);
        *div = *hi - *lo;
        return;
    }
    int64_t start = o * q->stride[i] - q->padding[i];
    int64_t end = start + q->kernel[i];
    if (end > n + q->padding[i]) end = n + q->padding[i];
    int64_t padded = end - start;
    if (start < 0) start = 0;
    if (end > n) end = n;
    *lo = start;
    *hi = end;
    *div = q->count_include_pad && q->mode == SF_POOL_AVG ? padded : end - start;
}

/* Whether max pooling takes tap v over the maximum m so far: when it is larger,
 * or NaN. PyTorch's max_pool2d kernels test (v > m) || isnan(v), so a window
 * holding a NaN gives NaN and its gradient goes to the window's last NaN; a
 * plain v > m would skip NaNs and turn a NaN activation into a finite one. */
static inline int max_takes(float v, float m) { return v > m || v != v; }

/* y (nt, ct, oht, owt) from x region (nt, ct, ihn, iwn), window by window. */
static sf_status pool2d_fwd_ref(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    pool_geom g;
    pool_geom_init(a, &g);
    const float *x = a->in[0];
    float *y = a->out[0];
    int is_max = op->params.pool2d.mode == SF_POOL_MAX;
    for (int64_t nc = 0; nc < g.nt * g.ct; nc++) {
        const float *xp = x + nc * g.ihn * g.iwn;
        for (int64_t oh = 0; oh < g.oht; oh++) {
            int64_t h0, h1, dh;
            pool_window(op, 0, g.oh0 + oh, &h0, &h1, &dh);
            for (int64_t ow = 0; ow < g.owt; ow++) {
                int64_t w0, w1, dw;
                pool_window(op, 1, g.ow0 + ow, &w0, &w1, &dw);
                float acc = 0.0f;
                int first = 1;
                for (int64_t ih = h0; ih < h1; ih++) {
                    for (int64_t iw = w0; iw < w1; iw++) {
                        float v = xp[(ih - g.ih0) * g.iwn + (iw - g.iw0)];
                        if (!is_max)
                            acc += v;
                        else if (first || max_takes(v, acc))
                            acc = v;
                        first = 0;
                    }
                }
                y[(nc * g.oht + oh) * g.owt + ow] = is_max ? acc : acc / (float)(dh * dw);
            }
        }
    }
    return SF_OK;
}

static sf_status pool2d_bwd_ref(const sf_kernel_args *a) {
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    const sf_op *op = a->op;
    pool_geom g;
    pool_geom_init(a, &g);
    const float *x = a->in[0], *dy = a->grad_out[0];
    float *dx = a->grad_in[0];
    int is_max = op->params.pool2d.mode == SF_POOL_MAX;
    for (int64_t nc = 0; nc < g.nt * g.ct; nc++) {
        const float *xp = x + nc * g.ihn * g.iwn;
        float *dxp = dx + nc * g.ihn * g.iwn;
        for (int64_t oh = 0; oh < g.oht; oh++) {
            int64_t h0, h1, dh;
            pool_window(op, 0, g.oh0 + oh, &h0, &h1, &dh);
            for (int64_t ow = 0; ow < g.owt; ow++) {
                int64_t w0, w1, dw;
                pool_window(op, 1, g.ow0 + ow, &w0, &w1, &dw);
                float d = dy[(nc * g.oht + oh) * g.owt + ow];
                if (is_max) {
                    int64_t best = -1;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) {
                            int64_t at = (ih - g.ih0) * g.iwn + (iw - g.iw0);
                            if (best < 0 || max_takes(xp[at], xp[best])) best = at;
                        }
                    if (best >= 0) dxp[best] += d;
                } else {
                    float share = d / (float)(dh * dw);
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            dxp[(ih - g.ih0) * g.iwn + (iw - g.iw0)] += share;
                }
            }
        }
    }
    return SF_OK;
}

/* Outputs [*lo, *hi) of [0, count) whose tap at base + o * stride lies in [0, n). */
static void pool_valid(int64_t base, int64_t stride, int64_t n, int64_t count, int64_t *lo,
                       int64_t *hi) {
    int64_t a = base >= 0 ? 0 : (-base + stride - 1) / stride;
    int64_t b = n - base <= 0 ? 0 : (n - base + stride - 1) / stride;
    if (a > count) a = count;
    if (b > count) b = count;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* Per output column of the tile, the tap geometry: column j of the kernel reads
 * region column wbase(j) + ow * sw, valid for ow in [wlo(j), whi(j)). */
typedef struct pool_taps {
    int64_t kh, kw, sh, sw, ph, pw;
} pool_taps;

static pool_taps pool_taps_get(const sf_op *op) {
    const sf_pool2d_params *q = &op->params.pool2d;
    pool_taps k = {q->kernel[0], q->kernel[1],  q->stride[0],
                   q->stride[1], q->padding[0], q->padding[1]};
    return k;
}

/* Backward of max and avg: one output row's argmaxes (int32 positions in the
 * plane, first, so that a malloc'd workspace aligns them; sized as int64) and
 * running maxima or scaled gradients (float). */
static size_t pool2d_workspace(const sf_op *op, const sf_tile *t, int backward) {
    if (!backward || op->params.pool2d.mode == SF_POOL_ADAPTIVE_AVG) return 0;
    return (size_t)(t->hi[3] - t->lo[3]) * (sizeof(int64_t) + sizeof(float));
}

/* The common max pool: 2x2 windows, stride 2, no padding, every window of the
 * tile whole (floor mode, or a ceil-mode tile short of the edge). The general
 * loops below run taps over rows of W_out elements, which for LeNet's 14- and
 * 5-wide rows is mostly loop overhead, and their backward select of the
 * argmax branched (about 13 ns an output on pool1, against 2 here). These do a
 * window at a time, with the same comparisons in the same order, so they give
 * the same bits as the general loops. */
static int pool_is_2x2(const sf_op *op, const pool_geom *g) {
    const sf_pool2d_params *q = &op->params.pool2d;
    return q->mode == SF_POOL_MAX && q->kernel[0] == 2 && q->kernel[1] == 2 && q->stride[0] == 2 &&
           q->stride[1] == 2 && q->padding[0] == 0 && q->padding[1] == 0 &&
           2 * (g->oh0 + g->oht) <= g->H && 2 * (g->ow0 + g->owt) <= g->W;
}

/* y (nt, ct, oht, owt): the maximum of each window (max_takes: a NaN wins). */
static void pool2d_fwd_2x2(const pool_geom *g, const float *x, float *y) {
    for (int64_t nc = 0; nc < g->nt * g->ct; nc++) {
        const float *xp = x + nc * g->ihn * g->iwn + (2 * g->ow0 - g->iw0);
        for (int64_t oh = 0; oh < g->oht; oh++) {
            const float *restrict r0 = xp + (2 * (g->oh0 + oh) - g->ih0) * g->iwn;
            const float *restrict r1 = r0 + g->iwn;
            float *restrict yr = y + (nc * g->oht + oh) * g->owt;
            for (int64_t ow = 0; ow < g->owt; ow++) {
                float m = -HUGE_VALF, v;
                v = r0[2 * ow], m = max_takes(v, m) ? v : m;
                v = r0[2 * ow + 1], m = max_takes(v, m) ? v : m;
                v = r1[2 * ow], m = max_takes(v, m) ? v : m;
                v = r1[2 * ow + 1], m = max_takes(v, m) ? v : m;
                yr[ow] = m;
            }
        }
    }
}

/* v where mask is all ones, +0 where it is zero: a select in integer bits,
 * because GCC turns a float select on a comparison into a branch here. */
static inline float masked(float v, uint32_t mask) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u &= mask;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* dx += dy at each window's first maximum in row-major order (the first tap is
 * taken whatever it holds, then strict >, as the general loop). The windows do
 * not overlap, so each input element gets its window's dy or 0, selected
 * without a branch (the argmax of a window is data, and mispredicted). */
static void pool2d_bwd_2x2(const pool_geom *g, const float *x, const float *dy, float *dx) {
    for (int64_t nc = 0; nc < g->nt * g->ct; nc++) {
        int64_t plane = nc * g->ihn * g->iwn + (2 * g->ow0 - g->iw0);
        for (int64_t oh = 0; oh < g->oht; oh++) {
            int64_t row = plane + (2 * (g->oh0 + oh) - g->ih0) * g->iwn;
            const float *restrict r0 = x + row, *restrict r1 = r0 + g->iwn;
            float *restrict d0 = dx + row, *restrict d1 = d0 + g->iwn;
            const float *restrict dyr = dy + (nc * g->oht + oh) * g->owt;
            for (int64_t ow = 0; ow < g->owt; ow++) {
                float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
                /* tX: X beats the maximum so far (all ones or zero) */
                uint32_t tb = -(uint32_t)max_takes(b, a);
                float m = tb ? b : a;
                uint32_t tc = -(uint32_t)max_takes(c, m);
                m = tc ? c : m;
                uint32_t td = -(uint32_t)max_takes(d, m);
                float gy = dyr[ow];
                d0[2 * ow] += masked(gy, ~(tb | tc | td));
                d0[2 * ow + 1] += masked(gy, tb & ~tc & ~td);
                d1[2 * ow] += masked(gy, tc & ~td);
                d1[2 * ow + 1] += masked(gy, td);
            }
        }
    }
}

/* Max (forward, or backward with argmaxes) and avg of one output row, tap by tap. */
static sf_status pool2d_fwd_fast(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    if (op->params.pool2d.mode == SF_POOL_ADAPTIVE_AVG) return pool2d_fwd_ref(a);
    pool_geom g;
    pool_geom_init(a, &g);
    if (pool_is_2x2(op, &g)) {
        pool2d_fwd_2x2(&g, a->in[0], a->out[0]);
        return SF_OK;
    }
    pool_taps k = pool_taps_get(op);
    int is_max = op->params.pool2d.mode == SF_POOL_MAX;
    const float *x = a->in[0];
    float *y = a->out[0];
    const int64_t owt = g.owt, sw = k.sw;
    for (int64_t nc = 0; nc < g.nt * g.ct; nc++) {
        const float *xp = x + nc * g.ihn * g.iwn;
        for (int64_t oh = 0; oh < g.oht; oh++) {
            float *restrict yr = y + (nc * g.oht + oh) * owt;
            /* every window holds an input element (padding <= kernel / 2), so no
             * maximum stays at -inf */
            for (int64_t ow = 0; ow < owt; ow++) yr[ow] = is_max ? -HUGE_VALF : 0.0f;
            int64_t hs = (g.oh0 + oh) * k.sh - k.ph;
            for (int64_t i = 0; i < k.kh; i++) {
                int64_t ih = hs + i;
                if (ih < 0 || ih >= g.H) continue;
                const float *xrow = xp + (ih - g.ih0) * g.iwn;
                for (int64_t j = 0; j < k.kw; j++) {
                    int64_t wbase = g.ow0 * sw - k.pw + j; /* global column of ow = 0 */
                    int64_t lo, hi;
                    pool_valid(wbase, sw, g.W, owt, &lo, &hi);
                    const float *restrict src = xrow + (wbase - g.iw0);
                    if (is_max) {
                        for (int64_t ow = lo; ow < hi; ow++) {
                            float v = src[ow * sw];
                            yr[ow] = max_takes(v, yr[ow]) ? v : yr[ow];
                        }
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++) yr[ow] += src[ow * sw];
                    }
                }
            }
            if (!is_max) {
                int64_t h0, h1, dh;
                pool_window(op, 0, g.oh0 + oh, &h0, &h1, &dh);
                for (int64_t ow = 0; ow < owt; ow++) {
                    int64_t w0, w1, dw;
                    pool_window(op, 1, g.ow0 + ow, &w0, &w1, &dw);
                    yr[ow] /= (float)(dh * dw);
                }
            }
        }
    }
    return SF_OK;
}

static sf_status pool2d_bwd_fast(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    if (op->params.pool2d.mode == SF_POOL_ADAPTIVE_AVG) return pool2d_bwd_ref(a);
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    pool_geom g;
    pool_geom_init(a, &g);
    if (pool_is_2x2(op, &g)) {
        pool2d_bwd_2x2(&g, a->in[0], a->grad_out[0], a->grad_in[0]);
        return SF_OK;
    }
    pool_taps k = pool_taps_get(op);
    int is_max = op->params.pool2d.mode == SF_POOL_MAX;
    const float *x = a->in[0], *dy = a->grad_out[0];
    float *dx = a->grad_in[0];
    const int64_t owt = g.owt, sw = k.sw;
    /* 32-bit positions when a plane's region has fewer than 2^31 elements (always,
     * in practice): the argmax loop below then compares and selects in lanes of
     * one width, without branches, which took a tenth of ResNet-18's 3x3 max
     * pool backward where the 64-bit form mispredicted on every other tap */
    if ((uintptr_t)a->workspace % sizeof(int64_t) != 0 || g.ihn * g.iwn >= INT32_MAX)
        return pool2d_bwd_ref(a);
    int32_t *restrict arg = a->workspace;                /* (owt) max: argmax in the plane */
    float *restrict best = (float *)(void *)(arg + owt); /* (owt) max: running maximum;
                                                          * avg: dy / divisor */
    for (int64_t nc = 0; nc < g.nt * g.ct; nc++) {
        const float *xp = x + nc * g.ihn * g.iwn;
        float *dxp = dx + nc * g.ihn * g.iwn;
        for (int64_t oh = 0; oh < g.oht; oh++) {
            const float *dyr = dy + (nc * g.oht + oh) * owt;
            int64_t hs = (g.oh0 + oh) * k.sh - k.ph;
            if (is_max) {
                for (int64_t ow = 0; ow < owt; ow++) {
                    best[ow] = -HUGE_VALF;
                    arg[ow] = -1;
                }
            } else {
                int64_t h0, h1, dh;
                pool_window(op, 0, g.oh0 + oh, &h0, &h1, &dh);
                for (int64_t ow = 0; ow < owt; ow++) {
                    int64_t w0, w1, dw;
                    pool_window(op, 1, g.ow0 + ow, &w0, &w1, &dw);
                    best[ow] = dyr[ow] / (float)(dh * dw);
                }
            }
            for (int64_t i = 0; i < k.kh; i++) {
                int64_t ih = hs + i;
                if (ih < 0 || ih >= g.H) continue;
                int64_t roff = (ih - g.ih0) * g.iwn;
                for (int64_t j = 0; j < k.kw; j++) {
                    int64_t wbase = g.ow0 * sw - k.pw + j;
                    int64_t lo, hi;
                    pool_valid(wbase, sw, g.W, owt, &lo, &hi);
                    int64_t off = roff + wbase - g.iw0;
                    if (is_max) {
                        /* strict >: the first maximum in (i, j) order wins (the
                         * last NaN, as max_takes says) */
                        const float *restrict src = xp + off;
                        for (int64_t ow = lo; ow < hi; ow++) {
                            float v = src[ow * sw], b = best[ow];
                            int32_t at = arg[ow];
                            int take = (v > b) | (v != v) | (at < 0);
                            best[ow] = take ? v : b;
                            arg[ow] = take ? (int32_t)(off + ow * sw) : at;
                        }
                    } else {
                        /* one tap: distinct ow touch distinct columns */
                        float *restrict dst = dxp + off;
                        for (int64_t ow = lo; ow < hi; ow++) dst[ow * sw] += best[ow];
                    }
                }
            }
            if (is_max)
                for (int64_t ow = 0; ow < owt; ow++)
                    if (arg[ow] >= 0) dxp[arg[ow]] += dyr[ow];
        }
    }
    return SF_OK;
}

/* Every pool saves its input (max_pool2d_with_indices, avg_pool2d and
 * adaptive_avg_pool2d keep `self`); a max pool also keeps the index of each
 * output's maximum, an int64 (two 4-byte elements) a value. */
static void pool2d_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    sf_tile r;
    pool2d_region(op, t, 0, &r);
    double n = (double)sf_tile_numel(t);
    m->output_bytes = n * SF_ELEM_BYTES;
    m->saved_bytes = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    if (op->params.pool2d.mode == SF_POOL_MAX) m->saved_bytes += 2 * n * SF_ELEM_BYTES;
}

const sf_op_class sf_op_pool2d_class = {
    .type = SF_OP_POOL2D,
    .name = "pool2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = pool2d_attrs,
    .n_attrs = (int)(sizeof pool2d_attrs / sizeof pool2d_attrs[0]),
    .defaults = pool2d_defaults,
    .infer = pool2d_infer,
    .space = pool2d_space,
    .region = pool2d_region,
    .cost = pool2d_cost,
    .memory = pool2d_memory,
    .fwd_ref = pool2d_fwd_ref,
    .fwd_fast = pool2d_fwd_fast,
    .bwd_ref = pool2d_bwd_ref,
    .bwd_fast = pool2d_bwd_fast,
    .workspace = pool2d_workspace,
};
