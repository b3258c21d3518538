/*
 * op_conv_transpose2d.c - 2-D transposed convolution (torch.nn.ConvTranspose2d,
 * ONNX ConvTranspose), NCHW, with stride, padding, output_padding and bias;
 * groups 1 and dilation 1.
 *
 * Each input pixel (n, ci, ih, iw) adds x * W[ci, co, i, j] to output pixel
 * (n, co, ih*s - p + i, iw*s - p + j): the input gradient of a conv2d with the
 * same kernel, stride and padding. Output size per spatial dimension:
 * (in - 1) * stride - 2 * padding + kernel + output_padding (output_padding <
 * stride: the rows it adds at the end get the bias and what windows reach them).
 *
 * Parallel space: the output (N, C_out, H_out, W_out): N the sample, C_out a
 * parameter dimension (a part reads and accumulates into W[:, o0:o1, :, :] and
 * b[o0:o1], one strided slice), H and W attributes: output rows [o0, o1) need
 * the input rows i with i*s - p + k' in [o0, o1) for some tap k' < kernel, i.e.
 * [ceil((o0 + p - k + 1) / s), floor((o1 - 1 + p) / s) + 1) clamped to the
 * input: a halo. The input channels are not offered as a reduction.
 * The parameter tensors are torch's: weight (C_in, C_out, kh, kw) and bias
 * (C_out), both U(+-1/sqrt(fan_in)) with torch's fan_in of this weight,
 * C_out * kh * kw (its dimension 1 times the kernel).
 *
 * FLOPs: the kernels multiply every input pixel of the tile's region by its
 * channels' filters, 2 * nt * C_in * (cot * kh * kw) * region pixels forward
 * (a halo row is counted where it is computed), plus one add per output element
 * for the bias; backward the input and weight gradients cost as much each,
 * plus the bias gradient's sum. Bytes as conv2d's.
 *
 * Kernels (soapflow/kernels.h: W (C_in, C_out, kh, kw), then the bias): the
 * reference scatters each input pixel into the tile's output by loops. The fast
 * one, per image, multiplies col (cot*kh*kw, P) = W[:, o0:o1]^T X (C_in, P),
 * P the region's pixels, by SGEMM and folds the columns into the tile with
 * col2im (the window of a conv2d from the output tile to the input region);
 * backward unfolds dy with im2col, dX += W[:, o0:o1] col and dW[:, o0:o1] +=
 * X col^T. Workspace: one image's col (floats).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define CT_P(f) offsetof(sf_op_params, conv_transpose2d.f)

static const sf_attr_desc convt_attrs[] = {
    {.name = "out_channels", .type = SF_ATTR_INT, .offset = CT_P(out_channels)},
    {.name = "kernel", .type = SF_ATTR_INTS, .offset = CT_P(kernel), .count = 2},
    {.name = "stride", .type = SF_ATTR_INTS, .offset = CT_P(stride), .count = 2},
    {.name = "padding", .type = SF_ATTR_INTS, .offset = CT_P(padding), .count = 2},
    {.name = "output_padding", .type = SF_ATTR_INTS, .offset = CT_P(output_padding), .count = 2},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = CT_P(bias)},
};

static void convt_defaults(sf_op_params *p) {
    sf_conv_transpose2d_params *c = &p->conv_transpose2d;
    c->kernel[0] = c->kernel[1] = 1;
    c->stride[0] = c->stride[1] = 1;
    c->bias = 1;
}

static sf_status convt_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)n_in;
    const sf_conv_transpose2d_params *c = &p->conv_transpose2d;
    if (in[0].ndim != 4)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 4-D (N, C, H, W), got %d-D",
                            in[0].ndim);
    if (c->out_channels < 1) return sf_error_set(err, SF_ERR_INVALID, "out_channels must be >= 1");
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        if (c->kernel[i] < 1 || c->stride[i] < 1 || c->padding[i] < 0 || c->output_padding[i] < 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "kernel and stride must be >= 1, padding and output_padding >= 0");
        if (c->output_padding[i] >= c->stride[i])
            return sf_error_set(err, SF_ERR_INVALID,
                                "output_padding (%lld) must be smaller than stride (%lld)",
                                (long long)c->output_padding[i], (long long)c->stride[i]);
        o[i] = (in[0].d[2 + i] - 1) * c->stride[i] - 2 * c->padding[i] + c->kernel[i] +
               c->output_padding[i];
        if (o[i] < 1)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "padding %lld leaves no output of input %lld with kernel %lld "
                                "and stride %lld",
                                (long long)c->padding[i], (long long)in[0].d[2 + i],
                                (long long)c->kernel[i], (long long)c->stride[i]);
    }
    out[0] = sf_shape_make(4, (int64_t[]){in[0].d[0], c->out_channels, o[0], o[1]});
    *n_out = 1;
    return SF_OK;
}

static int64_t convt_khw(const sf_op_params *p) {
    return p->conv_transpose2d.kernel[0] * p->conv_transpose2d.kernel[1];
}

static int64_t convt_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    const sf_conv_transpose2d_params *c = &p->conv_transpose2d;
    int64_t w = sf_count_mul(sf_count_mul(in[0].d[1], c->out_channels), convt_khw(p));
    return sf_count_add(w, c->bias ? c->out_channels : 0);
}

static void convt_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_PARAMETER;
    kinds[2] = kinds[3] = SF_DIM_ATTRIBUTE;
}

/* floor(a / b) for b > 0 */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Input rows [lo, hi) that reach output rows [o0, o1) along one dimension. */
static void convt_range(int64_t o0, int64_t o1, int64_t s, int64_t p, int64_t k, int64_t n,
                        int64_t *lo, int64_t *hi) {
    if (o1 <= o0) {
        *lo = *hi = 0;
        return;
    }
    int64_t a = -floor_div(-(o0 + p - k + 1), s); /* ceil */
    int64_t b = floor_div(o1 - 1 + p, s) + 1;
    if (a < 0) a = 0;
    if (b > n) b = n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

static void convt_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    const sf_shape *in = &op->in_shapes[0];
    memset(r, 0, sizeof *r);
    r->ndim = 4;
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    r->hi[1] = t->hi[1] > t->lo[1] ? in->d[1] : 0;
    for (int i = 0; i < 2; i++)
        convt_range(t->lo[2 + i], t->hi[2 + i], c->stride[i], c->padding[i], c->kernel[i],
                    in->d[2 + i], &r->lo[2 + i], &r->hi[2 + i]);
}

static void convt_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    double outs = (double)sf_tile_numel(t);
    sf_tile r;
    convt_region(op, t, 0, &r);
    double in_n = (double)sf_tile_numel(&r); /* nt * C_in * region pixels */
    double macs = in_n * (double)(t->hi[1] - t->lo[1]) * (double)convt_khw(&op->params);
    double bias = c->bias ? outs : 0;
    cost->flops_fwd = 2 * macs + bias;
    cost->flops_bwd = 4 * macs + bias;
    double in_b = in_n * SF_ELEM_BYTES;
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b;
}

/* W[:, o0:o1, :, :] (one strided slice of C_in rows), then b[o0:o1]. */
static int convt_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    int64_t khw = convt_khw(&op->params), cin = op->in_shapes[0].d[1];
    int64_t o0 = t->lo[1], ot = t->hi[1] - t->lo[1], row = c->out_channels * khw;
    out[0] = ot == c->out_channels ? sf_weight_run(0, cin * row)
                                   : (sf_weight_slice){o0 * khw, ot * khw, row, cin};
    if (!c->bias) return 1;
    out[1] = sf_weight_run(cin * row + o0, ot);
    return 2;
}

/* torch.nn.ConvTranspose2d: kaiming_uniform(a = sqrt(5)) of a weight whose fan_in
 * torch takes as dimension 1 times the kernel (C_out * kh * kw): U(+-1/sqrt(fan_in)),
 * and the bias by the same bound. */
static int convt_param_descs(const sf_op *op, sf_param_desc *out) {
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    int64_t cin = op->in_shapes[0].d[1], fan_in = c->out_channels * convt_khw(&op->params);
    double bound = 1.0 / sqrt((double)fan_in);
    out[0] =
        sf_param_make("weight", 4, (int64_t[]){cin, c->out_channels, c->kernel[0], c->kernel[1]}, 0,
                      SF_INIT_UNIFORM, bound);
    if (!c->bias) return 1;
    out[1] = sf_param_make("bias", 1, (int64_t[]){c->out_channels},
                           cin * c->out_channels * convt_khw(&op->params), SF_INIT_UNIFORM, bound);
    return 2;
}

/* ---- kernels ----------------------------------------------------------- */

typedef struct convt_geom {
    int64_t nt, cin, cout, co0, cot, kh, kw, khw;
    int64_t oh0, ohn, ow0, own; /* the output tile's rows and columns */
    int64_t ih0, ihn, iw0, iwn; /* the input region's */
    int64_t sh, sw, ph, pw;
    int bias;
} convt_geom;

static void convt_geom_init(const sf_op *op, const sf_tile *t, convt_geom *g) {
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    sf_tile r;
    convt_region(op, t, 0, &r);
    g->nt = t->hi[0] - t->lo[0];
    g->cin = op->in_shapes[0].d[1];
    g->cout = c->out_channels;
    g->co0 = t->lo[1];
    g->cot = t->hi[1] - t->lo[1];
    g->kh = c->kernel[0];
    g->kw = c->kernel[1];
    g->khw = g->kh * g->kw;
    g->oh0 = t->lo[2];
    g->ohn = t->hi[2] - t->lo[2];
    g->ow0 = t->lo[3];
    g->own = t->hi[3] - t->lo[3];
    g->ih0 = r.lo[2];
    g->ihn = r.hi[2] - r.lo[2];
    g->iw0 = r.lo[3];
    g->iwn = r.hi[3] - r.lo[3];
    g->sh = c->stride[0];
    g->sw = c->stride[1];
    g->ph = c->padding[0];
    g->pw = c->padding[1];
    g->bias = c->bias != 0;
}

/* The conv2d window whose input gradient this is: from the input region (the
 * conv's output) to the output tile (the conv's input), over the tile's output
 * channels. */
static sf_window2d convt_window(const convt_geom *g) {
    sf_window2d w = {
        .channels = g->cot,
        .kh = g->kh,
        .kw = g->kw,
        .sh = g->sh,
        .sw = g->sw,
        .ph = g->ph,
        .pw = g->pw,
        .dh = 1,
        .dw = 1,
        .oh0 = g->ih0,
        .ow0 = g->iw0,
        .ohn = g->ihn,
        .own = g->iwn,
        .ih0 = g->oh0,
        .iw0 = g->ow0,
        .ihn = g->ohn,
        .iwn = g->own,
    };
    return w;
}

static size_t convt_workspace(const sf_op *op, const sf_tile *t, int backward) {
    (void)backward;
    convt_geom g;
    convt_geom_init(op, t, &g);
    return (size_t)(g.cot * g.khw * g.ihn * g.iwn) * sizeof(float);
}

/* y = the bias of the tile's channels (or 0), per image. */
static void convt_bias(const convt_geom *g, const float *b, float *y) {
    const int64_t plane = g->ohn * g->own;
    for (int64_t co = 0; co < g->cot; co++) {
        float v = b ? b[g->co0 + co] : 0.0f;
        for (int64_t e = 0; e < plane; e++) y[co * plane + e] = v;
    }
}

/* The reference: every input pixel of the region into the tile's outputs it
 * reaches (forward), or the same pairs backward. */
static void convt_ref(const sf_kernel_args *a, int backward) {
    convt_geom g;
    convt_geom_init(a->op, &a->tile, &g);
    const float *W = a->weights, *b = g.bias ? W + g.cin * g.cout * g.khw : NULL;
    float *dW = backward ? a->grad_weights : NULL;
    float *db = dW && g.bias ? dW + g.cin * g.cout * g.khw : NULL;
    const int64_t in_plane = g.ihn * g.iwn, out_plane = g.ohn * g.own;
    for (int64_t n = 0; n < g.nt; n++) {
        const float *x = a->in[0] + n * g.cin * in_plane;
        float *dx =
            backward && a->grad_in && a->grad_in[0] ? a->grad_in[0] + n * g.cin * in_plane : NULL;
        float *y = backward ? NULL : a->out[0] + n * g.cot * out_plane;
        const float *dy = backward ? a->grad_out[0] + n * g.cot * out_plane : NULL;
        if (!backward) convt_bias(&g, b, y);
        if (db)
            for (int64_t co = 0; co < g.cot; co++)
                for (int64_t e = 0; e < out_plane; e++) db[g.co0 + co] += dy[co * out_plane + e];
        for (int64_t ci = 0; ci < g.cin; ci++)
            for (int64_t ih = 0; ih < g.ihn; ih++)
                for (int64_t iw = 0; iw < g.iwn; iw++) {
                    int64_t xi = (ci * g.ihn + ih) * g.iwn + iw;
                    for (int64_t co = 0; co < g.cot; co++) {
                        const int64_t wo = (ci * g.cout + g.co0 + co) * g.khw;
                        for (int64_t i = 0; i < g.kh; i++) {
                            int64_t oh = (g.ih0 + ih) * g.sh - g.ph + i - g.oh0;
                            if (oh < 0 || oh >= g.ohn) continue;
                            for (int64_t j = 0; j < g.kw; j++) {
                                int64_t ow = (g.iw0 + iw) * g.sw - g.pw + j - g.ow0;
                                if (ow < 0 || ow >= g.own) continue;
                                int64_t yo = (co * g.ohn + oh) * g.own + ow;
                                float wv = W[wo + i * g.kw + j];
                                if (!backward) {
                                    y[yo] += x[xi] * wv;
                                } else {
                                    if (dx) dx[xi] += dy[yo] * wv;
                                    if (dW) dW[wo + i * g.kw + j] += dy[yo] * x[xi];
                                }
                            }
                        }
                    }
                }
    }
}

static void convt_fast(const sf_kernel_args *a, int backward) {
    convt_geom g;
    convt_geom_init(a->op, &a->tile, &g);
    const float *W = a->weights, *b = g.bias ? W + g.cin * g.cout * g.khw : NULL;
    float *dW = backward ? a->grad_weights : NULL;
    float *db = dW && g.bias ? dW + g.cin * g.cout * g.khw : NULL;
    const int64_t P = g.ihn * g.iwn, out_plane = g.ohn * g.own, rows = g.cot * g.khw;
    const int64_t ldw = g.cout * g.khw;
    const float *Wt = W + g.co0 * g.khw;
    float *col = a->workspace;
    sf_window2d win = convt_window(&g);
    for (int64_t n = 0; n < g.nt; n++) {
        const float *x = a->in[0] + n * g.cin * P;
        if (!backward) {
            float *y = a->out[0] + n * g.cot * out_plane;
            convt_bias(&g, b, y);
            if (P == 0 || rows == 0) continue;
            sf_sgemm(1, 0, rows, P, g.cin, 1.0f, Wt, ldw, x, P, 0.0f, col, P);
            sf_col2im(&win, col, P, 0, y);
            continue;
        }
        const float *dy = a->grad_out[0] + n * g.cot * out_plane;
        if (db)
            for (int64_t co = 0; co < g.cot; co++)
                for (int64_t e = 0; e < out_plane; e++) db[g.co0 + co] += dy[co * out_plane + e];
        if (P == 0 || rows == 0) continue;
        sf_im2col(&win, dy, col, P, 0);
        float *dx = a->grad_in && a->grad_in[0] ? a->grad_in[0] + n * g.cin * P : NULL;
        if (dx) sf_sgemm(0, 0, g.cin, P, rows, 1.0f, Wt, ldw, col, P, 1.0f, dx, P);
        if (dW) sf_sgemm(0, 1, g.cin, rows, P, 1.0f, x, P, col, P, 1.0f, dW + g.co0 * g.khw, ldw);
    }
}

static sf_status convt_fwd_ref(const sf_kernel_args *a) {
    convt_ref(a, 0);
    return SF_OK;
}
static sf_status convt_bwd_ref(const sf_kernel_args *a) {
    convt_ref(a, 1);
    return SF_OK;
}
static sf_status convt_fwd_fast(const sf_kernel_args *a) {
    convt_fast(a, 0);
    return SF_OK;
}
static sf_status convt_bwd_fast(const sf_kernel_args *a) {
    convt_fast(a, 1);
    return SF_OK;
}

/* Saves its input (for dW), as conv2d. */
static unsigned convt_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_INPUT(0);
}

const sf_op_class sf_op_conv_transpose2d_class = {
    .type = SF_OP_CONV_TRANSPOSE2D,
    .name = "conv_transpose2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = convt_attrs,
    .n_attrs = (int)(sizeof convt_attrs / sizeof convt_attrs[0]),
    .defaults = convt_defaults,
    .infer = convt_infer,
    .param_count = convt_params,
    .space = convt_space,
    .region = convt_region,
    .cost = convt_cost,
    .saves = convt_saves,
    .weight_slices = convt_weight_slices,
    .param_descs = convt_param_descs,
    .fwd_ref = convt_fwd_ref,
    .fwd_fast = convt_fwd_fast,
    .bwd_ref = convt_bwd_ref,
    .bwd_fast = convt_bwd_fast,
    .workspace = convt_workspace,
};
