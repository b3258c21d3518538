/*
 * op_resize.c - 2-D resizing of NCHW images to a given output size
 * (torch.nn.Upsample, F.interpolate; ONNX Resize): nearest or bilinear.
 *
 * Source coordinates, per spatial dimension, in = input size, out = output
 * size, for output index o:
 *   nearest              i = floor(o * in / out) (torch's 'nearest'; ONNX
 *                        asymmetric with nearest_mode floor), at most in - 1
 *   bilinear             s = (o + 0.5) * in / out - 0.5, below 0 taken as 0
 *                        (torch's align_corners=False; ONNX half_pixel and
 *                        pytorch_half_pixel, the latter 0 when out is 1)
 *   bilinear, align_corners
 *                        s = o * (in - 1) / (out - 1) (0 when out is 1)
 * and bilinear blends rows i0 = floor(s) and i1 = min(i0 + 1, in - 1) with
 * weights 1 - f and f, f = s - i0 (columns alike). The scale is in / out as
 * the output size gives it; the ONNX importer takes scales only where the
 * output size they give makes the same ratio.
 *
 * Parallel space: the output (N, C, H_out, W_out), N the sample, the others
 * attributes; a tile of output rows [o0, o1) needs the input rows from the
 * first one row o0 reads to the last one row o1 - 1 reads (monotone in o):
 * a halo where bilinear blends across a tile border. No weights.
 *
 * FLOPs per output element: nearest 0 forward (a copy) and 1 backward (an add);
 * bilinear 8 forward (four products, three sums and a weight) and 8 backward
 * (four products and four sums). Bytes: the input region, the output tile,
 * backward the output gradient in and the input gradient out.
 *
 * Kernels: one implementation (loops over the tile with the source rows,
 * columns and weights of each output row and column worked out first) serves
 * as reference and fast kernel: every output element reads at most four inputs.
 * Backward adds each output gradient into the inputs it read, with the same
 * weights. Workspace: the two tables of rows and columns (indices and weights).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const char *const resize_mode_names[] = {"nearest", "bilinear"};

static const sf_attr_desc resize_attrs[] = {
    {.name = "mode",
     .type = SF_ATTR_ENUM,
     .offset = offsetof(sf_op_params, resize.mode),
     .enum_names = resize_mode_names,
     .n_enum = (int)(sizeof resize_mode_names / sizeof resize_mode_names[0])},
    {.name = "size",
     .type = SF_ATTR_INTS,
     .offset = offsetof(sf_op_params, resize.size),
     .count = 2},
    {.name = "align_corners",
     .type = SF_ATTR_BOOL,
     .offset = offsetof(sf_op_params, resize.align_corners)},
};

static void resize_defaults(sf_op_params *p) { p->resize.mode = SF_RESIZE_NEAREST; }

static sf_status resize_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_resize_params *r = &p->resize;
    if (in[0].ndim != 4)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 4-D (N, C, H, W), got %d-D",
                            in[0].ndim);
    if (r->mode != SF_RESIZE_NEAREST && r->mode != SF_RESIZE_BILINEAR)
        return sf_error_set(err, SF_ERR_INVALID, "mode %d is not nearest (0) or bilinear (1)",
                            r->mode);
    if (r->size[0] < 1 || r->size[1] < 1)
        return sf_error_set(err, SF_ERR_INVALID, "size must be >= 1, got %lldx%lld",
                            (long long)r->size[0], (long long)r->size[1]);
    if (r->align_corners && r->mode != SF_RESIZE_BILINEAR)
        return sf_error_set(err, SF_ERR_INVALID, "align_corners is for bilinear resizing only");
    out[0] = sf_shape_make(4, (int64_t[]){in[0].d[0], in[0].d[1], r->size[0], r->size[1]});
    *n_out = 1;
    return SF_OK;
}

static void resize_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = kinds[2] = kinds[3] = SF_DIM_ATTRIBUTE;
}

/* Output index o of one dimension (in -> out): the rows it reads, i0 and i1,
 * and the weight f of i1 (0 for nearest). */
static void resize_src(const sf_resize_params *r, int64_t in, int64_t out, int64_t o, int64_t *i0,
                       int64_t *i1, float *f) {
    if (r->mode == SF_RESIZE_NEAREST) {
        int64_t i = (int64_t)floor((double)o * (double)in / (double)out);
        *i0 = *i1 = i < in ? i : in - 1;
        *f = 0.0f;
        return;
    }
    double s;
    if (r->align_corners)
        s = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    else
        s = ((double)o + 0.5) * (double)in / (double)out - 0.5;
    if (s < 0) s = 0;
    int64_t a = (int64_t)floor(s);
    if (a > in - 1) a = in - 1;
    *i0 = a;
    *i1 = a + 1 < in ? a + 1 : in - 1;
    *f = (float)(s - (double)a);
    if (*i1 == *i0) *f = 0.0f;
}

static void resize_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_resize_params *p = &op->params.resize;
    const sf_shape *in = &op->in_shapes[0];
    *r = *t;
    for (int d = 2; d < 4; d++) {
        if (t->hi[d] <= t->lo[d]) {
            r->lo[d] = r->hi[d] = 0;
            continue;
        }
        int64_t a0, a1, b0, b1;
        float f;
        resize_src(p, in->d[d], p->size[d - 2], t->lo[d], &a0, &a1, &f);
        resize_src(p, in->d[d], p->size[d - 2], t->hi[d] - 1, &b0, &b1, &f);
        r->lo[d] = a0;
        r->hi[d] = b1 + 1;
    }
}

static void resize_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double outs = (double)sf_tile_numel(t);
    sf_tile r;
    resize_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES, out_b = outs * SF_ELEM_BYTES;
    int bil = op->params.resize.mode == SF_RESIZE_BILINEAR;
    cost->flops_fwd = bil ? 8 * outs : 0;
    cost->flops_bwd = bil ? 8 * outs : outs;
    cost->bytes_fwd = in_b + out_b;
    cost->bytes_bwd = 2 * in_b + out_b;
}

/* ---- kernels ----------------------------------------------------------- */

/* The source of each output row and column of the tile, relative to the
 * region: i0, i1 and the weight of i1. */
typedef struct resize_tab {
    int64_t *i0, *i1;
    float *f;
} resize_tab;

static size_t resize_workspace(const sf_op *op, const sf_tile *t, int backward) {
    (void)op;
    (void)backward;
    int64_t n = (t->hi[2] - t->lo[2]) + (t->hi[3] - t->lo[3]);
    return (size_t)n * (2 * sizeof(int64_t) + sizeof(float)) + 8; /* + realignment */
}

static resize_tab resize_tab_make(const sf_kernel_args *a, int d, void **ws) {
    const sf_resize_params *p = &a->op->params.resize;
    int64_t n = a->tile.hi[d] - a->tile.lo[d];
    resize_tab t;
    t.i0 = *ws;
    t.i1 = t.i0 + n;
    t.f = (float *)(void *)(t.i1 + n);
    *ws = t.f + n;
    for (int64_t o = 0; o < n; o++) {
        resize_src(p, a->op->in_shapes[0].d[d], p->size[d - 2], a->tile.lo[d] + o, &t.i0[o],
                   &t.i1[o], &t.f[o]);
        t.i0[o] -= a->in_region[0].lo[d];
        t.i1[o] -= a->in_region[0].lo[d];
    }
    return t;
}

static void resize_run(const sf_kernel_args *a, int backward) {
    const sf_tile *t = &a->tile, *r = &a->in_region[0];
    void *ws = a->workspace;
    /* the row table first: its int64 arrays stay aligned when the column's follow */
    int64_t oh = t->hi[2] - t->lo[2], ow = t->hi[3] - t->lo[3];
    resize_tab th = resize_tab_make(a, 2, &ws);
    /* the column table after the row table's floats: realign to 8 bytes */
    uintptr_t at = ((uintptr_t)ws + 7) & ~(uintptr_t)7;
    ws = (void *)at;
    resize_tab tw = resize_tab_make(a, 3, &ws);
    int64_t planes = (t->hi[0] - t->lo[0]) * (t->hi[1] - t->lo[1]);
    int64_t ih = r->hi[2] - r->lo[2], iw = r->hi[3] - r->lo[3];
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = backward ? NULL : a->in[0] + pl * ih * iw;
        float *dx = backward ? a->grad_in[0] + pl * ih * iw : NULL;
        float *y = backward ? NULL : a->out[0] + pl * oh * ow;
        const float *dy = backward ? a->grad_out[0] + pl * oh * ow : NULL;
        for (int64_t i = 0; i < oh; i++) {
            const float fh = th.f[i], gh = 1.0f - fh;
            const int64_t r0 = th.i0[i] * iw, r1 = th.i1[i] * iw;
            for (int64_t j = 0; j < ow; j++) {
                const float fw = tw.f[j], gw = 1.0f - fw;
                const int64_t c0 = tw.i0[j], c1 = tw.i1[j];
                if (!backward) {
                    y[i * ow + j] = gh * (gw * x[r0 + c0] + fw * x[r0 + c1]) +
                                    fh * (gw * x[r1 + c0] + fw * x[r1 + c1]);
                } else {
                    float g = dy[i * ow + j];
                    dx[r0 + c0] += gh * gw * g;
                    dx[r0 + c1] += gh * fw * g;
                    dx[r1 + c0] += fh * gw * g;
                    dx[r1 + c1] += fh * fw * g;
                }
            }
        }
    }
}

static sf_status resize_fwd(const sf_kernel_args *a) {
    resize_run(a, 0);
    return SF_OK;
}

static sf_status resize_bwd(const sf_kernel_args *a) {
    if (a->grad_in && a->grad_in[0]) resize_run(a, 1);
    return SF_OK;
}

const sf_op_class sf_op_resize_class = {
    .type = SF_OP_RESIZE,
    .name = "resize",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = resize_attrs,
    .n_attrs = (int)(sizeof resize_attrs / sizeof resize_attrs[0]),
    .defaults = resize_defaults,
    .infer = resize_infer,
    .space = resize_space,
    .region = resize_region,
    .cost = resize_cost,
    .fwd_ref = resize_fwd,
    .fwd_fast = resize_fwd,
    .bwd_ref = resize_bwd,
    .bwd_fast = resize_bwd,
    .workspace = resize_workspace,
};
