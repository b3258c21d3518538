/*
 * op_conv2d.c - 2-D convolution, NCHW, with stride, padding, dilation, groups, bias.
 *
 * Parallel space: the output (N, C_out, H_out, W_out); N is the sample dimension,
 * C_out a parameter dimension (splitting it splits the filters), H and W attribute
 * dimensions (splitting them keeps the filters whole but needs a halo of input rows),
 * then one more, the input channels (a reduction dimension, SF_DIM_REDUCE: no output
 * dimension names it). A part with input channels [c0, c1) reads only those channels
 * of its input region and the columns [c0, c1) of the filters, W[:, c0:c1, :, :], and
 * produces a partial sum of its output piece, which the task graph reduces
 * (src/taskgraph/reduce.c); the bias belongs to the part with c0 = 0. The split needs
 * groups == 1: with groups the dimension has size 1 (it cannot be split).
 *
 * Every split runs exactly on both kernels (tests/test_ops_slices.c): a tile reads
 * and, backward, accumulates into the filters of its output channels (rows
 * [c0, c1) of W) and their biases, which is what sf_op_weight_slices gives, so
 * parts that differ on C_out own disjoint shards and the others replicate them.
 * The parameter tensors are torch.nn.Conv2d's: weight (C_out, C_in/groups, kh, kw)
 * and bias (C_out), both U(+-1/sqrt(fan_in)), fan_in = C_in/groups * kh * kw.
 *
 * FLOPs count a multiply-add as two. Forward: 2 * MACs, plus one add per output
 * element for the bias. Backward: the input gradient and the weight gradient each
 * cost as much as the forward pass (2 * 2 * MACs), plus the bias gradient's sum.
 *
 * Kernels (see soapflow/kernels.h for buffers and weight layout): the reference
 * kernels are direct convolution loops, the definition. The fast kernels unfold
 * the input region with im2col and multiply with SGEMM, one group at a time, block
 * by block. A block holds at most CONV_COL_ELEMS column elements (4 MiB, chosen
 * from measurements of 2^17..2^22 on AlexNet and ResNet shapes: near L2 size,
 * while GEMMs stay wide). With small feature maps (LeNet, AlexNet's 13x13) one image
 * gives GEMMs too narrow to run at BLAS speed, so a block is several whole images
 * and the (C_out, images*H*W) result is permuted back to NCHW (a copy of one
 * output, K times cheaper than the GEMM); with large ones (ResNet's 56x56) a block
 * is a band of output rows of one image, and the GEMM writes into y directly.
 * Backward multiplies the output gradient by the columns for the weight gradient,
 * then reuses the column buffer for W^T * dY and folds it back with col2im.
 * Per-image im2col of the whole tile was rejected: (K, N*H*W) columns of a ResNet
 * layer are hundreds of MiB.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static const sf_attr_desc conv2d_attrs[] = {
    {.name = "out_channels", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, conv2d.out_channels)},
    {.name = "kernel", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.kernel), .count = 2},
    {.name = "stride", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.stride), .count = 2},
    {.name = "padding", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.padding), .count = 2},
    {.name = "dilation", .type = SF_ATTR_INTS, .offset = offsetof(sf_op_params, conv2d.dilation), .count = 2},
    {.name = "groups", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, conv2d.groups)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, conv2d.bias)},
};

static void conv2d_defaults(sf_op_params *p) {
    sf_conv2d_params *c = &p->conv2d;
    c->kernel[0] = c->kernel[1] = 1;
    c->stride[0] = c->stride[1] = 1;
    c->dilation[0] = c->dilation[1] = 1;
    c->groups = 1;
    c->bias = 1;
}

static sf_status conv2d_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_conv2d_params *c = &p->conv2d;
    if (in[0].ndim != 4)
        return sf_error_set(err, SF_ERR_SHAPE, "input must be 4-D (N, C, H, W), got %d-D",
                            in[0].ndim);
    if (c->out_channels < 1) return sf_error_set(err, SF_ERR_INVALID, "out_channels must be >= 1");
    if (c->groups < 1) return sf_error_set(err, SF_ERR_INVALID, "groups must be >= 1");
    for (int i = 0; i < 2; i++) {
        if (c->kernel[i] < 1 || c->stride[i] < 1 || c->dilation[i] < 1 || c->padding[i] < 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "kernel, stride and dilation must be >= 1 and padding >= 0");
    }
    if (in[0].d[1] % c->groups || c->out_channels % c->groups)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "groups (%lld) must divide input channels (%lld) and out_channels (%lld)",
                            (long long)c->groups, (long long)in[0].d[1], (long long)c->out_channels);
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        int64_t span = c->dilation[i] * (c->kernel[i] - 1) + 1;
        int64_t padded = in[0].d[2 + i] + 2 * c->padding[i];
        if (padded < span)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "kernel (%lld with dilation %lld) larger than padded input (%lld)",
                                (long long)c->kernel[i], (long long)c->dilation[i],
                                (long long)padded);
        o[i] = (padded - span) / c->stride[i] + 1;
    }
    out[0] = sf_shape_make(4, (int64_t[]){in[0].d[0], c->out_channels, o[0], o[1]});
    *n_out = 1;
    return SF_OK;
}

static int64_t conv2d_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    const sf_conv2d_params *c = &p->conv2d;
    int64_t w = sf_count_mul(sf_count_mul(c->out_channels, in[0].d[1] / c->groups),
                             sf_count_mul(c->kernel[0], c->kernel[1]));
    return sf_count_add(w, c->bias ? c->out_channels : 0);
}

/* The output's dimensions, then the input channels (the reduction; size 1,
 * unsplittable, with groups). */
static void conv2d_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_PARAMETER;
    kinds[2] = kinds[3] = SF_DIM_ATTRIBUTE;
    space->d[4] = op->params.conv2d.groups == 1 ? op->in_shapes[0].d[1] : 1;
    kinds[4] = SF_DIM_REDUCE;
    space->ndim = 5;
}

/* The tile's input channels [c0, c1) of each group: its range on the reduction
 * dimension (groups == 1 only), or all of them. */
static void conv2d_crange(const sf_op *op, const sf_tile *t, int64_t *c0, int64_t *c1) {
    int split = t->ndim > 4 && op->params.conv2d.groups == 1;
    *c0 = split ? t->lo[4] : 0;
    *c1 = split ? t->hi[4] : op->in_shapes[0].d[1] / op->params.conv2d.groups;
}

/* Whether the tile covers all the input channels (no partial sum). */
static int conv2d_whole_c(const sf_op *op, const sf_tile *t) {
    int64_t c0, c1;
    conv2d_crange(op, t, &c0, &c1);
    return c0 == 0 && c1 == op->in_shapes[0].d[1] / op->params.conv2d.groups;
}

static void conv2d_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    const sf_conv2d_params *c = &op->params.conv2d;
    const sf_shape *in = &op->in_shapes[0];
    r->ndim = 4;
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    /* Channels: all of them without groups, else those of the groups the
     * tile's output channels fall in. */
    int64_t cout_per_g = c->out_channels / c->groups, cin_per_g = in->d[1] / c->groups;
    if (t->hi[1] <= t->lo[1]) {
        r->lo[1] = r->hi[1] = 0;
    } else {
        int64_t g0 = t->lo[1] / cout_per_g, g1 = (t->hi[1] - 1) / cout_per_g;
        r->lo[1] = g0 * cin_per_g;
        r->hi[1] = (g1 + 1) * cin_per_g;
        if (c->groups == 1) conv2d_crange(op, t, &r->lo[1], &r->hi[1]);
    }
    for (int i = 0; i < 2; i++)
        sf_window_range(t->lo[2 + i], t->hi[2 + i], c->stride[i], c->padding[i], c->kernel[i],
                        c->dilation[i], in->d[2 + i], &r->lo[2 + i], &r->hi[2 + i]);
    r->lo[4] = r->hi[4] = 0;
    for (int d = 5; d < SF_MAX_DIMS; d++) r->lo[d] = r->hi[d] = 0;
}

/* Filter elements per output channel: C_in/groups * kh * kw. */
static int64_t conv2d_fan_in(const sf_op *op) {
    const sf_conv2d_params *c = &op->params.conv2d;
    return op->in_shapes[0].d[1] / c->groups * c->kernel[0] * c->kernel[1];
}

/* Weight elements of a tile: its output channels' filters over its input
 * channels, and their biases on the part with c0 = 0. */
static int64_t conv2d_tile_weights(const sf_op *op, const sf_tile *t) {
    if (conv2d_whole_c(op, t)) return sf_tile_weight_share(op, t);
    const sf_conv2d_params *c = &op->params.conv2d;
    int64_t c0, c1;
    conv2d_crange(op, t, &c0, &c1);
    int64_t ot = t->hi[1] - t->lo[1], ct = c1 - c0;
    if (ot <= 0 || ct <= 0) return 0;
    return ot * ct * c->kernel[0] * c->kernel[1] + (c->bias && c0 == 0 ? ot : 0);
}

static void conv2d_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    const sf_conv2d_params *c = &op->params.conv2d;
    sf_tile o = *t;
    o.ndim = 4; /* the output piece */
    double outs = (double)sf_tile_numel(&o);
    int64_t c0, c1;
    conv2d_crange(op, t, &c0, &c1);
    double macs =
        outs * (double)(c1 > c0 ? c1 - c0 : 0) * (double)c->kernel[0] * (double)c->kernel[1];
    double bias = c->bias && c0 == 0 ? outs : 0;
    cost->flops_fwd = 2 * macs + bias;
    cost->flops_bwd = 4 * macs + bias;
    sf_tile r;
    conv2d_region(op, t, 0, &r);
    double in_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double w_b = (double)conv2d_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b;
    /* backward reads input, weights and output gradient; writes both gradients */
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b;
}

/* The filters of the tile's output channels (rows [o0, o1) of W): whole, one run,
 * or, for a part of the input channels [c0, c1), W[o0:o1, c0:c1, :, :] (a strided
 * slice); then their biases, on the part with c0 = 0. */
static int conv2d_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    const sf_conv2d_params *c = &op->params.conv2d;
    int64_t k = conv2d_fan_in(op), o0 = t->lo[1], ot = t->hi[1] - t->lo[1];
    if (conv2d_whole_c(op, t)) {
        out[0] = sf_weight_run(o0 * k, ot * k);
    } else {
        int64_t c0, c1, khw = c->kernel[0] * c->kernel[1];
        conv2d_crange(op, t, &c0, &c1);
        out[0] = (sf_weight_slice){o0 * k + c0 * khw, (c1 - c0) * khw, k, ot};
        if (c0 != 0) return 1;
    }
    if (!c->bias) return 1;
    int64_t c0 = o0;
    out[1] = sf_weight_run(c->out_channels * k + c0, ot);
    return 2;
}

/* torch.nn.Conv2d: weight and bias both U(+-1/sqrt(fan_in)) (kaiming_uniform
 * with a = sqrt(5) gives that bound for the weight). */
static int conv2d_param_descs(const sf_op *op, sf_param_desc *out) {
    const sf_conv2d_params *c = &op->params.conv2d;
    int64_t k = conv2d_fan_in(op);
    double bound = 1.0 / sqrt((double)k);
    out[0] = sf_param_make("weight", 4,
                           (int64_t[]){c->out_channels, op->in_shapes[0].d[1] / c->groups,
                                       c->kernel[0], c->kernel[1]},
                           0, SF_INIT_UNIFORM, bound);
    if (!c->bias) return 1;
    out[1] = sf_param_make("bias", 1, (int64_t[]){c->out_channels}, c->out_channels * k,
                           SF_INIT_UNIFORM, bound);
    return 2;
}

/* ---- kernels ----------------------------------------------------------- */

/* The direct kernels (below) need GCC's or clang's vector extensions. */
#if defined(__GNUC__) && defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define CONV_DIRECT_AVAILABLE 1
#endif
#endif

/* Most column-buffer elements (fp32) one fast-kernel block unfolds, unless that
 * leaves fewer than CONV_MIN_COLS columns. 2^18 (1 MiB: the columns, the GEMM's
 * packed copy of them and its output stay in a 2 MiB L2) ran LeNet's and
 * ResNet's GEMMs 15-40% faster than 2^20, but AlexNet's (K >= 1024) 5-20%
 * slower: they keep 2^20; the floor keeps GEMMs from being too narrow. A
 * build may override it (-DCONV_COL_ELEMS=64 makes every block one row: a stress
 * test of the block logic, the floor scaling down with it). */
#ifndef CONV_COL_ELEMS
#define CONV_COL_ELEMS ((int64_t)1 << 18)
#endif
#define CONV_MIN_COLS (CONV_COL_ELEMS / 512)

/* How a fast kernel walks an output of nt images of rows x row_len positions
 * whose columns have k rows: blocks of `chunk` whole images, or (chunk == 1)
 * bands of `band` rows of one image. */
typedef struct conv_blocking {
    int64_t nt, rows, row_len;
    int64_t chunk; /* images per block (1 when bands of rows are used) */
    int64_t band;  /* output rows per block: rows unless one image is too large */
} conv_blocking;

static conv_blocking conv_blocking_make(int64_t k, int64_t nt, int64_t rows, int64_t row_len) {
    conv_blocking b = {.nt = nt, .rows = rows, .row_len = row_len, .chunk = 1, .band = rows};
    /* deep columns (AlexNet's K = 1600, 1728) ran best with 4x the budget */
    int64_t budget = k >= 1024 ? 4 * CONV_COL_ELEMS : CONV_COL_ELEMS;
    int64_t cols = budget / (k > 0 ? k : 1);
    if (cols < CONV_MIN_COLS) cols = CONV_MIN_COLS;
    if (cols < 1) cols = 1;
    int64_t per_image = rows * row_len > 0 ? rows * row_len : 1;
    b.chunk = cols / per_image;
    if (b.chunk > nt) b.chunk = nt;
    if (b.chunk < 1) b.chunk = 1;
    if (per_image > cols) {
        b.band = cols / (row_len > 0 ? row_len : 1);
        if (b.band < 1) b.band = 1;
    }
    return b;
}

/* Most columns of one block. */
static int64_t conv_blocking_cols(const conv_blocking *b) {
    return b->chunk * b->band * b->row_len;
}

/* The extents of one tile and its input region, read once. */
typedef struct conv_geom {
    int64_t n0, nt, co0, cot, oh0, oht, ow0, owt; /* output tile */
    int64_t cr0, crn, ih0, ihn, iw0, iwn;         /* input region: channels, rows, cols */
    int64_t cin_g, cout_g, kh, kw;
    int64_t ci0, ci1; /* the tile's input channels of each group (a partial sum unless whole) */
    int64_t k;     /* rows of the columns: cin_g * kh * kw */
    int64_t p;          /* output positions per image: oht * owt */
    conv_blocking blk;  /* blocks of the output, for im2col of x */
    int64_t mmax;       /* most output channels of one group inside the tile */
    int direct;         /* direct kernels instead of im2col + SGEMM (see below) */
    int transposed_dx;  /* backward computes dx as a convolution of dy (see below) */
    int64_t kt;         /* rows of the columns of dy: mmax * kh * kw */
    conv_blocking tblk; /* blocks of the input region, for im2col of dy */
} conv_geom;

static void conv_geom_init(const sf_op *op, const sf_tile *t, const sf_tile *r, conv_geom *g) {
    const sf_conv2d_params *c = &op->params.conv2d;
    g->n0 = t->lo[0];
    g->nt = t->hi[0] - t->lo[0];
    g->co0 = t->lo[1];
    g->cot = t->hi[1] - t->lo[1];
    g->oh0 = t->lo[2];
    g->oht = t->hi[2] - t->lo[2];
    g->ow0 = t->lo[3];
    g->owt = t->hi[3] - t->lo[3];
    g->cr0 = r->lo[1];
    g->crn = r->hi[1] - r->lo[1];
    g->ih0 = r->lo[2];
    g->ihn = r->hi[2] - r->lo[2];
    g->iw0 = r->lo[3];
    g->iwn = r->hi[3] - r->lo[3];
    g->cin_g = op->in_shapes[0].d[1] / c->groups;
    conv2d_crange(op, t, &g->ci0, &g->ci1);
    g->cout_g = c->out_channels / c->groups;
    g->kh = c->kernel[0];
    g->kw = c->kernel[1];
    g->k = g->cin_g * g->kh * g->kw;
    g->p = g->oht * g->owt;
    g->blk = conv_blocking_make(g->k, g->nt, g->oht, g->owt);
    g->mmax = g->cot < g->cout_g ? g->cot : g->cout_g;
    /* With stride 1 every dx element is a dot product of a window of dy with the
     * flipped filters: a convolution whose GEMM accumulates straight into dx,
     * with no col2im and no zeroed (k, cols) buffer. It computes ihn * iwn
     * positions where col2im's route costs oht * owt, so it is taken only when
     * the region is about the tile (same padding: ResNet, AlexNet), not for
     * LeNet's 14x14 -> 10x10, where it would double the work; and only when its
     * GEMM has at least as many rows (cin_g) as col2im's has depth (output
     * channels): AlexNet's conv2 (64 -> 192) ran its backward 15% slower with it,
     * ResNet's 64 -> 64 6% faster. */
    g->transposed_dx = c->stride[0] == 1 && c->stride[1] == 1 &&
                       8 * g->ihn * g->iwn <= 9 * g->oht * g->owt && g->cin_g >= g->mmax;
    g->kt = g->mmax * g->kh * g->kw;
#ifdef CONV_DIRECT_AVAILABLE
    /* Direct kernels for layers too small for im2col + SGEMM (see the direct
     * section): LeNet's conv2 (6 -> 16, 5x5) ran 1.5x faster; AlexNet's and
     * ResNet's layers (>= 64 filters) are far outside the rule. Stride 1 only. */
    g->direct = c->groups == 1 && c->stride[0] == 1 && c->stride[1] == 1 &&
                c->out_channels <= 32 && g->k <= 256;
#else
    g->direct = 0;
#endif
    g->tblk = conv_blocking_make(g->kt, g->nt, g->ihn, g->iwn);
}

/* Window of one group's input channels, from the region to the tile. */
static sf_window2d conv_window(const sf_op *op, const conv_geom *g) {
    const sf_conv2d_params *c = &op->params.conv2d;
    sf_window2d w = {
        .channels = g->cin_g, .kh = g->kh, .kw = g->kw,
        .sh = c->stride[0], .sw = c->stride[1],
        .ph = c->padding[0], .pw = c->padding[1],
        .dh = c->dilation[0], .dw = c->dilation[1],
        .oh0 = g->oh0, .ow0 = g->ow0, .ohn = g->oht, .own = g->owt,
        .ih0 = g->ih0, .iw0 = g->iw0, .ihn = g->ihn, .iwn = g->iwn,
    };
    return w;
}

/* ---- direct convolution for small layers ------------------------------- */

/* LeNet-sized layers (a few input channels, 16 filters) spend most of the im2col
 * route in im2col, col2im and OpenBLAS's packing: the GEMMs are (16, 150) by
 * (150, cols), too thin to amortize them. The direct kernels below instead keep
 * the filters transposed, (ci, kh, kw, co) with co padded to 16, so that 16
 * output channels are one vector; each input value is broadcast onto it.
 *   forward: 8 output pixels per block, 8 independent accumulators (FMA latency
 *            times ports), one filter vector load shared by 8 broadcast FMAs;
 *   dW:      image by image against its dy transposed to (h, w, co), both in
 *            L1: for 5-wide kernels 2 kernel rows x 5 taps per block, each
 *            input broadcast once per 5 pixels; otherwise 8 taps per block;
 *   dX:      16 input pixels of one row per block, each a 16-wide sum over co,
 *            reduced once after all taps by a transposing butterfly.
 * The input is copied into a zero-padded buffer (dW: one image at a time), so
 * the loops carry no bounds checks. Rule: groups 1, stride 1
 * (dX by a stride-1 gather), at most 32 output channels and K = C_in*kh*kw <=
 * 256; measured on LeNet's conv2, see conv_geom_init.
 *
 * Written with GCC vector extensions (an aligned(4) 16-float type, also
 * clang's), because the build targets baseline x86-64 and compiles as ISO
 * C11, where GCC neither contracts a*b+c into FMA nor, with arrays of
 * accumulators, reliably keeps them in registers. Each hot function is cloned
 * for AVX-512, AVX2+FMA and the baseline and picked at load time (ifunc), and
 * fp-contract is enabled for these functions only. */

#ifdef CONV_DIRECT_AVAILABLE
#define DV 16 /* output channels per vector */
#define DXB_MAXCB 6 /* most input channels of one dX block */

typedef float conv_v16 __attribute__((vector_size(DV * sizeof(float)), aligned(4)));

/* not under ASan: its interceptors and ifunc resolvers run in an awkward order at load time */
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define CONV_DIRECT_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define CONV_DIRECT_CLONES
#endif

#if defined(__clang__)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

#define V_LOAD(v, p) memcpy(&(v), (p), sizeof(conv_v16))
#define V_STORE(p, v) memcpy((p), &(v), sizeof(conv_v16))

/* Geometry of the direct path for one tile (stride 1). */
typedef struct conv_direct {
    int narrow;         /* at most DV/2 output channels: pixels in the lanes (below) */
    int64_t cb;         /* blocks of DV output channels: ceil(cot / DV) */
    int64_t hh, hw;     /* kernel span minus one: (kh-1)*dh, (kw-1)*dw */
    int64_t ph, pw;     /* rows, cols of one padded input plane: oht + hh, owt + hw */
    int64_t dil_h, dil_w;
    int64_t pad_h, pad_w;
} conv_direct;

/* The narrow path's sizes: nw_npos positions (oht rows of the padded width pw)
 * per output plane, rounded up to whole blocks; the input read past a padded
 * image by the last block (zeroed). */
#define NW_POS 4                 /* position vectors per forward block */
#define NW_BLK (NW_POS * DV)     /* positions per forward block */
#define NW_CB 4                  /* output channels per block */
#define NW_TB 5                  /* taps per dW block */
static int64_t nw_npos(const conv_geom *g, const conv_direct *d) {
    return (g->oht * d->pw + NW_BLK - 1) / NW_BLK * NW_BLK;
}
static int64_t nw_slack(const conv_geom *g, const conv_direct *d) {
    return nw_npos(g, d) - g->oht * d->pw + d->hw;
}

static conv_direct conv_direct_make(const sf_op *op, const conv_geom *g) {
    const sf_conv2d_params *c = &op->params.conv2d;
    conv_direct d;
    d.cb = (g->cot + DV - 1) / DV;
    d.dil_h = c->dilation[0];
    d.dil_w = c->dilation[1];
    d.pad_h = c->padding[0];
    d.pad_w = c->padding[1];
    d.hh = (g->kh - 1) * d.dil_h;
    d.hw = (g->kw - 1) * d.dil_w;
    d.ph = g->oht + d.hh;
    d.pw = g->owt + d.hw;
    /* narrow when its lanes are at least twice as full as the channel
     * vectors' (cot / DV): LeNet's conv1 (6 channels, 28x28: 784 of 896
     * positions) ran 3x faster forward and 2x in dW; conv2 split to 8 output
     * channels (10x10: 100 of 192) ran its backward 1.5x slower */
    d.narrow = g->cot <= DV / 2 && 2 * g->cot * nw_npos(g, &d) <= DV * g->p;
    return d;
}


/* Workspace elements: transposed filters (cb, K, DV), padded input
 * (nt, cin, ph, pw), and backward one image's channels-last dy (cb, p, DV)
 * for dW plus one block of slack, then dX's buffers. */
static int64_t conv_direct_dx_elems(const conv_geom *g, const conv_direct *d) {
    int64_t cip = (g->cin_g + DXB_MAXCB - 1) / DXB_MAXCB * DXB_MAXCB;
    return g->cot * g->k / g->cin_g * cip       /* filters (co, kh, kw, cip) */
           + g->cot * g->oht * (g->owt + 2 * d->hw) * DV /* dy of 16 images */
           + cip * g->ihn * g->iwn * DV;         /* dx of 16 images */
}

static int64_t conv_direct_elems(const conv_geom *g, const conv_direct *d, int backward) {
    const int64_t plane = d->ph * d->pw;
    if (d->narrow) {
        /* forward: the padded input + slack, the output planes (cot, npos);
         * backward: one padded image + slack, its dy planes (cot, npos) and
         * dW's sums (cot, K, DV); then dX alone from the start */
        if (!backward) return g->nt * g->cin_g * plane + nw_slack(g, d) + g->cot * nw_npos(g, d);
        int64_t e = g->cin_g * plane + nw_slack(g, d) + g->cot * nw_npos(g, d) +
                    g->cot * g->k * DV;
        int64_t ex = conv_direct_dx_elems(g, d);
        return e > ex ? e : ex;
    }
    int64_t e = d->cb * g->k * DV + g->nt * g->cin_g * plane;
    if (backward) e += d->cb * g->p * DV + DV * DV + conv_direct_dx_elems(g, d);
    return e;
}

/* wt (cb, K, DV) = the tile's filters transposed, channels past cot zero. */
static void conv_direct_filters(const conv_geom *g, const conv_direct *d, const float *w,
                                float *wt) {
    for (int64_t b = 0; b < d->cb; b++)
        for (int64_t t = 0; t < g->k; t++)
            for (int64_t c = 0; c < DV; c++) {
                int64_t co = b * DV + c;
                wt[(b * g->k + t) * DV + c] = co < g->cot ? w[(g->co0 + co) * g->k + t] : 0.0f;
            }
}

/* xp (nt, cin, ph, pw): row r of a plane is global input row oh0 - pad_h + r;
 * zero where that is padding. */
static void conv_direct_pad_input(const conv_geom *g, const conv_direct *d, const float *x,
                                  float *xp) {
    for (int64_t n = 0; n < g->nt; n++)
        for (int64_t ci = 0; ci < g->cin_g; ci++) {
            const float *src = x + (n * g->crn + ci) * g->ihn * g->iwn;
            float *dst = xp + (n * g->cin_g + ci) * d->ph * d->pw;
            /* columns q0 <= q < q1 of a padded row are inside the region; a tile
             * whose windows lie wholly in the left padding (padding wider than
             * the kernel's span plus the tile) has none: q0 is clamped to the row */
            int64_t off = g->ow0 - d->pad_w - g->iw0;
            int64_t q0 = off < 0 ? -off : 0, q1 = g->iwn - off;
            if (q0 > d->pw) q0 = d->pw;
            if (q1 > d->pw) q1 = d->pw;
            if (q1 < q0) q1 = q0;
            for (int64_t r = 0; r < d->ph; r++) {
                int64_t ir = g->oh0 - d->pad_h + r - g->ih0;
                float *dr = dst + r * d->pw;
                if (ir < 0 || ir >= g->ihn) {
                    memset(dr, 0, (size_t)d->pw * sizeof *dr);
                    continue;
                }
                for (int64_t q = 0; q < q0; q++) dr[q] = 0.0f;
                if (q1 > q0) memcpy(dr + q0, src + ir * g->iwn + q0 + off, (size_t)(q1 - q0) * sizeof *dr);
                for (int64_t q = q1; q < d->pw; q++) dr[q] = 0.0f;
            }
        }
}

#define FWD_PIX 8

/* y (nt, cot, oht, owt) = conv(xp, wt) + bias, FWD_PIX output pixels of the
 * tile (in n, oy, ox order, crossing rows and images) per block. */
/* One block of R rows x 5 columns of one image at output (oy, ox): fixed
 * offsets, 5R accumulators. */
static inline __attribute__((always_inline)) void
conv_fwd_rc5(const conv_geom *g, const conv_direct *d, const float *restrict xp,
             const float *restrict wt, const float *restrict bias, float *restrict y,
             int64_t b, int64_t m, int64_t n, int64_t oy, int64_t ox, const int R) {
    const int64_t plane = d->ph * d->pw, pw = d->pw;
    const float *x0 = xp + n * g->cin_g * plane + oy * pw + ox;
    conv_v16 acc[10];
    for (int p = 0; p < 5 * R; p++) acc[p] = (conv_v16){0};
    const float *wv_p = wt + b * g->k * DV;
    for (int64_t ci = 0; ci < g->cin_g; ci++)
        for (int64_t i = 0; i < g->kh; i++) {
            const float *xr = x0 + ci * plane + i * d->dil_h * pw;
            for (int64_t j = 0; j < g->kw; j++, wv_p += DV) {
                const float *xt = xr + j * d->dil_w;
                conv_v16 wv;
                V_LOAD(wv, wv_p);
                for (int r = 0; r < R; r++)
                    for (int c = 0; c < 5; c++) acc[r * 5 + c] += xt[r * pw + c] * wv;
            }
        }
    float *yb = y + (n * g->cot + b * DV) * g->p + oy * g->owt + ox;
    for (int64_t c = 0; c < m; c++) {
        float bv = bias ? bias[g->co0 + b * DV + c] : 0.0f;
        for (int r = 0; r < R; r++)
            for (int q = 0; q < 5; q++) yb[c * g->p + r * g->owt + q] = acc[r * 5 + q][c] + bv;
    }
}

CONV_DIRECT_CLONES
static void conv_direct_fwd(const conv_geom *g, const conv_direct *d,
                            const float *restrict xp, const float *restrict wt,
                            const float *restrict bias, float *restrict y) {
    const int64_t q_all = g->nt * g->p, plane = d->ph * d->pw;
    if (g->owt % 5 == 0) {
        /* blocks of 2 rows x 5 columns tile the output exactly (an odd last row
         * in blocks of 1 x 5) */
        for (int64_t b = 0; b < d->cb; b++) {
            int64_t m = g->cot - b * DV < DV ? g->cot - b * DV : DV;
            for (int64_t n = 0; n < g->nt; n++) {
                int64_t oy = 0;
                for (; oy + 2 <= g->oht; oy += 2)
                    for (int64_t ox = 0; ox < g->owt; ox += 5)
                        conv_fwd_rc5(g, d, xp, wt, bias, y, b, m, n, oy, ox, 2);
                for (; oy < g->oht; oy++)
                    for (int64_t ox = 0; ox < g->owt; ox += 5)
                        conv_fwd_rc5(g, d, xp, wt, bias, y, b, m, n, oy, ox, 1);
            }
        }
        return;
    }
    for (int64_t b = 0; b < d->cb; b++) {
        int64_t m = g->cot - b * DV < DV ? g->cot - b * DV : DV;
        for (int64_t q0 = 0; q0 < q_all; q0 += FWD_PIX) {
            int64_t xo[FWD_PIX], yo[FWD_PIX];
            int valid = q_all - q0 < FWD_PIX ? (int)(q_all - q0) : FWD_PIX;
            for (int p = 0; p < FWD_PIX; p++) {
                /* past the end: repeat the last pixel, computed and dropped */
                int64_t q = q0 + (p < valid ? p : valid - 1);
                int64_t n = q / g->p, rem = q % g->p;
                xo[p] = n * g->cin_g * plane + rem / g->owt * d->pw + rem % g->owt;
                yo[p] = (n * g->cot + b * DV) * g->p + rem;
            }
            conv_v16 acc[FWD_PIX];
            for (int p = 0; p < FWD_PIX; p++) acc[p] = (conv_v16){0};
            const float *wv_p = wt + b * g->k * DV;
            for (int64_t ci = 0; ci < g->cin_g; ci++)
                for (int64_t i = 0; i < g->kh; i++) {
                    const float *xr = xp + ci * plane + i * d->dil_h * d->pw;
                    for (int64_t j = 0; j < g->kw; j++, wv_p += DV) {
                        const float *xt = xr + j * d->dil_w;
                        conv_v16 wv;
                        V_LOAD(wv, wv_p);
                        for (int p = 0; p < FWD_PIX; p++) acc[p] += xt[xo[p]] * wv;
                    }
                }
            for (int p = 0; p < valid; p++)
                for (int64_t c = 0; c < m; c++)
                    y[yo[p] + c * g->p] = acc[p][c] + (bias ? bias[g->co0 + b * DV + c] : 0.0f);
        }
    }
}

#define DW_TAPS 8
#define DW_PIX 5 /* output pixels of one row per block of the 5-wide dW kernel */

/* One image of the padded input, xpi (cin, ph, pw), as conv_direct_pad_input. */
static void conv_direct_pad_image(const conv_geom *g, const conv_direct *d, const float *x,
                                  int64_t n, float *xpi) {
    conv_geom g1 = *g;
    g1.nt = 1;
    conv_direct_pad_input(&g1, d, x + n * g->crn * g->ihn * g->iwn, xpi);
}

/* dyc (cb, p, DV): dy of image n channels-last, zero channels past cot. */
static void conv_direct_dy_image(const conv_geom *g, const conv_direct *d, const float *dy,
                                 int64_t n, float *restrict dyc) {
    for (int64_t b = 0; b < d->cb; b++) {
        int64_t m = g->cot - b * DV < DV ? g->cot - b * DV : DV;
        float *dst = dyc + b * g->p * DV;
        const float *src = dy + (n * g->cot + b * DV) * g->p;
        if (m < DV) memset(dst, 0, (size_t)(g->p * DV) * sizeof *dst);
        for (int64_t c = 0; c < m; c++)
            for (int64_t q = 0; q < g->p; q++) dst[q * DV + c] = src[c * g->p + q];
    }
}

/* kw = 5, dilation 1 across: R kernel rows (ky0..) x the 5 taps of each, for
 * input channel ci, summed over the image's pixels into accw. A block of
 * DW_PIX pixels of one row reads DW_PIX + 4 inputs per kernel row, each
 * broadcast once and shared by the taps that reach it, and DW_PIX dy vectors:
 * 5R accumulators at fixed offsets. */
static inline __attribute__((always_inline)) void
conv_dw_rk5(const conv_geom *g, const conv_direct *d, const float *restrict xpi,
            const float *restrict dyc, float *restrict accw, int64_t b, int64_t ci, int64_t ky0,
            const int R) {
    const int64_t plane = d->ph * d->pw, pw = d->pw, rs = d->dil_h * pw;
    conv_v16 acc[10];
    for (int t = 0; t < 5 * R; t++) acc[t] = (conv_v16){0};
    const float *xb = xpi + ci * plane + ky0 * rs;
    const float *db = dyc + b * g->p * DV;
    for (int64_t oy = 0; oy < g->oht; oy++) {
        const float *xr = xb + oy * pw;
        const float *dr = db + oy * g->owt * DV;
        int64_t ox = 0;
        for (; ox + DW_PIX <= g->owt; ox += DW_PIX) {
            conv_v16 dv[DW_PIX];
            for (int q = 0; q < DW_PIX; q++) V_LOAD(dv[q], dr + (ox + q) * DV);
            for (int r = 0; r < R; r++) {
                const float *xt = xr + r * rs + ox;
                /* input q + j meets pixel q at tap j (loaded once, shared) */
                for (int q = 0; q < DW_PIX; q++)
                    for (int j = 0; j < 5; j++) acc[r * 5 + j] += xt[q + j] * dv[q];
            }
        }
        for (; ox < g->owt; ox++) {
            conv_v16 dv;
            V_LOAD(dv, dr + ox * DV);
            for (int r = 0; r < R; r++)
                for (int j = 0; j < 5; j++) acc[r * 5 + j] += xr[r * rs + ox + j] * dv;
        }
    }
    float *ap = accw + (b * g->k + (ci * g->kh + ky0) * 5) * DV;
    for (int t = 0; t < 5 * R; t++) {
        conv_v16 s;
        V_LOAD(s, ap + t * DV);
        s += acc[t];
        V_STORE(ap + t * DV, s);
    }
}

/* dW (C_out, K) += sum over the tile's pixels of x * dy, image by image: its
 * padded input xpi (cin, ph, pw) and channels-last dy dyc (cb, p, DV), a few
 * KiB each, are built per image and stay in L1 across the tap blocks. With
 * kw = 5 and no dilation across, blocks of 2 kernel rows x 5 taps (above);
 * otherwise DW_TAPS taps (flat index over ci, kh, kw) per block, each a vector
 * of DV output channels. acc (cb, K, DV) collects the images' sums. */
CONV_DIRECT_CLONES
static void conv_direct_dw(const conv_geom *g, const conv_direct *d, const float *restrict x,
                           const float *restrict dy, float *restrict xpi, float *restrict dyc,
                           float *restrict accw, float *restrict dw) {
    const int64_t plane = d->ph * d->pw, taps = g->kh * g->kw;
    const int k5 = g->kw == 5 && d->dil_w == 1;
    memset(accw, 0, (size_t)(d->cb * g->k * DV) * sizeof *accw);
    for (int64_t n = 0; n < g->nt; n++) {
        conv_direct_pad_image(g, d, x, n, xpi);
        conv_direct_dy_image(g, d, dy, n, dyc);
        for (int64_t b = 0; b < d->cb; b++) {
            if (k5) {
                for (int64_t ci = 0; ci < g->cin_g; ci++) {
                    int64_t ky = 0;
                    for (; ky + 2 <= g->kh; ky += 2) conv_dw_rk5(g, d, xpi, dyc, accw, b, ci, ky, 2);
                    for (; ky < g->kh; ky++) conv_dw_rk5(g, d, xpi, dyc, accw, b, ci, ky, 1);
                }
                continue;
            }
            for (int64_t t0 = 0; t0 < g->k; t0 += DW_TAPS) {
                int64_t to[DW_TAPS];
                int valid = g->k - t0 < DW_TAPS ? (int)(g->k - t0) : DW_TAPS;
                for (int r = 0; r < DW_TAPS; r++) {
                    int64_t t = t0 + (r < valid ? r : valid - 1), tap = t % taps;
                    to[r] = t / taps * plane + tap / g->kw * d->dil_h * d->pw +
                            tap % g->kw * d->dil_w;
                }
                conv_v16 acc[DW_TAPS];
                for (int r = 0; r < DW_TAPS; r++) acc[r] = (conv_v16){0};
                for (int64_t oy = 0; oy < g->oht; oy++) {
                    const float *xr = xpi + oy * d->pw;
                    const float *dr = dyc + (b * g->p + oy * g->owt) * DV;
                    for (int64_t ox = 0; ox < g->owt; ox++) {
                        conv_v16 dv;
                        V_LOAD(dv, dr + ox * DV);
                        for (int r = 0; r < DW_TAPS; r++) acc[r] += xr[ox + to[r]] * dv;
                    }
                }
                float *ap = accw + (b * g->k + t0) * DV;
                for (int r = 0; r < valid; r++) {
                    conv_v16 s;
                    V_LOAD(s, ap + r * DV);
                    s += acc[r];
                    V_STORE(ap + r * DV, s);
                }
            }
        }
    }
    for (int64_t b = 0; b < d->cb; b++) {
        int64_t m = g->cot - b * DV < DV ? g->cot - b * DV : DV;
        for (int64_t t = 0; t < g->k; t++)
            for (int64_t c = 0; c < m; c++)
                dw[(g->co0 + b * DV + c) * g->k + t] += accw[(b * g->k + t) * DV + c];
    }
}

/* dX with the batch in the lanes: 16 images per vector, so that every tap that
 * reaches a dy row inside the tile is a full FMA and taps that reach only the
 * zero halo rows are skipped (computing dx as a 16-wide sum over output channels
 * of the zero-haloed dy wasted half its FMAs on LeNet's conv2, 14x14 <- 10x10).
 *   dyb (cot, oht, owt + 2hw, DV): dy of images n0.. n0+15, channels-last in
 *        the images, with a zero halo of hw columns; lanes past the tile zero;
 *   wtx (cot, kh, kw, cip): the filters with input channels innermost, padded
 *        with zero channels to cip, a multiple of the channel block;
 *   dxb (cip, ihn, iwn, DV): the block's dx, added to dx at the end.
 * One block is CB input channels by P consecutive pixels of one dx row (CB * P
 * accumulators): per (co, ky, kx), P dy vectors and CB filter broadcasts. */
static inline __attribute__((always_inline)) void
conv_dx_block(const conv_geom *g, const conv_direct *d, const float *restrict wtx,
              const float *restrict dyb, float *restrict dxb, int64_t cip, int64_t c0,
              int64_t iy, int64_t ix0, const int CB, const int P) {
    const int64_t a = g->ih0 + d->pad_h - g->oh0, bcol = g->iw0 + d->pad_w - g->ow0;
    const int64_t dwb = g->owt + 2 * d->hw, taps = g->kh * g->kw;
    conv_v16 acc[DXB_MAXCB * 16];
    for (int c = 0; c < CB * P; c++) acc[c] = (conv_v16){0};
    /* kx whose column reaches the tile for some pixel of the block */
    int64_t kx_lo = g->kw, kx_hi = -1;
    for (int64_t kx = 0; kx < g->kw; kx++) {
        int64_t ox_first = ix0 + bcol - kx * d->dil_w, ox_last = ox_first + P - 1;
        if (ox_last >= 0 && ox_first < g->owt) {
            if (kx < kx_lo) kx_lo = kx;
            kx_hi = kx;
        }
    }
    for (int64_t ky = 0; ky < g->kh; ky++) {
        int64_t oy = iy + a - ky * d->dil_h;
        if (oy < 0 || oy >= g->oht) continue;
        for (int64_t co = 0; co < g->cot; co++) {
            const float *dr = dyb + ((co * g->oht + oy) * dwb + ix0 + bcol + d->hw) * DV;
            const float *wr = wtx + (co * taps + ky * g->kw) * cip + c0;
            for (int64_t kx = kx_lo; kx <= kx_hi; kx++) {
                const float *dt = dr - kx * d->dil_w * DV;
                const float *wk = wr + kx * cip;
                conv_v16 dv[16];
                for (int p = 0; p < P; p++) V_LOAD(dv[p], dt + p * DV);
                for (int c = 0; c < CB; c++) {
                    float wb = wk[c];
                    for (int p = 0; p < P; p++) acc[c * P + p] += wb * dv[p];
                }
            }
        }
    }
    for (int c = 0; c < CB; c++)
        for (int p = 0; p < P; p++)
            V_STORE(dxb + (((c0 + c) * g->ihn + iy) * g->iwn + ix0 + p) * DV, acc[c * P + p]);
}

/* All dx of the block's images: rows in blocks of P pixels, a remainder one by one. */
static inline __attribute__((always_inline)) void
conv_dx_images(const conv_geom *g, const conv_direct *d, const float *restrict wtx,
               const float *restrict dyb, float *restrict dxb, int64_t cip, const int CB,
               const int P) {
    for (int64_t c0 = 0; c0 < cip; c0 += CB)
        for (int64_t iy = 0; iy < g->ihn; iy++) {
            int64_t ix0 = 0;
            for (; ix0 + P <= g->iwn; ix0 += P)
                conv_dx_block(g, d, wtx, dyb, dxb, cip, c0, iy, ix0, CB, P);
            for (; ix0 < g->iwn; ix0++)
                conv_dx_block(g, d, wtx, dyb, dxb, cip, c0, iy, ix0, CB, 1);
        }
}

/* dx (nt, cin, ihn, iwn) += the correlation of dy with the filters, 16 images at
 * a time: dx[n, ci, iy, ix] += sum over co, ky, kx of w[co, ci, ky, kx] *
 * dy[n, co, oy, ox], oy = iy + a - ky*dh, ox = ix + b - kx*dw (a = ih0 + pad_h
 * - oh0, b likewise), over the oy, ox inside the tile. */
CONV_DIRECT_CLONES
static void conv_direct_dx(const conv_geom *g, const conv_direct *d, const float *restrict w,
                           const float *restrict dy, float *restrict dx, float *restrict ws) {
    const int64_t cin = g->cin_g, taps = g->kh * g->kw;
    const int CB = cin >= 5 ? 6 : cin == 4 ? 2 : (int)cin;
    const int64_t cip = (cin + CB - 1) / CB * CB;
    const int64_t dwb = g->owt + 2 * d->hw, pix = g->ihn * g->iwn;
    float *wtx = ws, *dyb = wtx + g->cot * taps * cip, *dxb = dyb + g->cot * g->oht * dwb * DV;
    for (int64_t co = 0; co < g->cot; co++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t ci = 0; ci < cip; ci++)
                wtx[(co * taps + t) * cip + ci] =
                    ci < cin ? w[((g->co0 + co) * cin + ci) * taps + t] : 0.0f;
    memset(dyb, 0, (size_t)(g->cot * g->oht * dwb * DV) * sizeof *dyb);
    for (int64_t n0 = 0; n0 < g->nt; n0 += DV) {
        int nb = g->nt - n0 < DV ? (int)(g->nt - n0) : DV;
        for (int64_t co = 0; co < g->cot; co++)
            for (int64_t oy = 0; oy < g->oht; oy++) {
                float *dst = dyb + ((co * g->oht + oy) * dwb + d->hw) * DV;
                for (int n = 0; n < nb; n++) {
                    const float *src = dy + (((n0 + n) * g->cot + co) * g->oht + oy) * g->owt;
                    for (int64_t ox = 0; ox < g->owt; ox++) dst[ox * DV + n] = src[ox];
                }
            }
        switch (CB) {
        case 6: conv_dx_images(g, d, wtx, dyb, dxb, cip, 6, 4); break;
        case 3: conv_dx_images(g, d, wtx, dyb, dxb, cip, 3, 8); break;
        case 2: conv_dx_images(g, d, wtx, dyb, dxb, cip, 2, 8); break;
        default: conv_dx_images(g, d, wtx, dyb, dxb, cip, 1, 16); break;
        }
        for (int n = 0; n < nb; n++)
            for (int64_t ci = 0; ci < cin; ci++) {
                float *dst = dx + ((n0 + n) * g->crn + ci) * pix;
                const float *src = dxb + ci * pix * DV + n;
                for (int64_t q = 0; q < pix; q++) dst[q] += src[q * DV];
            }
    }
}


/* ---- narrow layers: pixels in the lanes --------------------------------

 * With at most DV/2 output channels (LeNet's conv1: 6) a vector of DV output
 * channels is mostly zero padding: conv1 ran at 21 GFLOP/s forward on 6 of
 * 16 lanes. These kernels put 16 output positions in the lanes instead. A
 * plane of the padded input xp (ph, pw) holds output pixel (oy, ox) at
 * position q = oy * pw + ox, and tap (ci, i, j) of every position at the fixed
 * offset ci * plane + i * dh * pw + j * dw: computing all oht * pw positions
 * (the hw columns past owt of each row are computed and dropped) makes every
 * tap one unaligned vector load, shared by the block's output channels.
 *   forward: NW_CB channels x NW_POS vectors of positions per block, each
 *            filter value broadcast once per block; the block's planes go to
 *            a buffer, whose valid columns are then copied out with the bias;
 *   dW:      NW_CB channels x NW_TB taps per block, over all positions of an
 *            image, against dy laid out the same way with zeros in the
 *            dropped columns and rows (so they add nothing); the vector sums
 *            per (channel, tap) collect all images and are reduced at the end.
 * The last block of an image reads up to nw_slack past its padded planes:
 * forward, whatever is there (it feeds dropped positions only); dW, zeros
 * written after the one padded image it holds (0 * NaN would not be 0). */

static inline __attribute__((always_inline)) void
nw_fwd_block(const conv_geom *g, const conv_direct *d, const float *restrict xn,
             const float *restrict w, float *restrict tmp, int64_t c0, int64_t q0,
             const int CB) {
    const int64_t plane = d->ph * d->pw, npos = nw_npos(g, d);
    conv_v16 acc[NW_CB * NW_POS];
    for (int c = 0; c < CB * NW_POS; c++) acc[c] = (conv_v16){0};
    const float *wc = w + (g->co0 + c0) * g->k;
    int64_t t = 0;
    for (int64_t ci = 0; ci < g->cin_g; ci++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++, t++) {
                const float *xt = xn + ci * plane + i * d->dil_h * d->pw + j * d->dil_w + q0;
                conv_v16 xv[NW_POS];
                for (int p = 0; p < NW_POS; p++) V_LOAD(xv[p], xt + p * DV);
                for (int c = 0; c < CB; c++) {
                    float wb = wc[c * g->k + t];
                    for (int p = 0; p < NW_POS; p++) acc[c * NW_POS + p] += wb * xv[p];
                }
            }
    for (int c = 0; c < CB; c++)
        for (int p = 0; p < NW_POS; p++)
            V_STORE(tmp + (c0 + c) * npos + q0 + p * DV, acc[c * NW_POS + p]);
}

/* y (nt, cot, oht, owt) = conv(xp, w) + bias; xp as conv_direct_pad_input,
 * followed by nw_slack zeros; tmp (cot, npos). */
CONV_DIRECT_CLONES
static void conv_narrow_fwd(const conv_geom *g, const conv_direct *d, const float *restrict xp,
                            const float *restrict w, const float *restrict bias,
                            float *restrict tmp, float *restrict y) {
    const int64_t plane = d->ph * d->pw, npos = nw_npos(g, d);
    for (int64_t n = 0; n < g->nt; n++) {
        const float *xn = xp + n * g->cin_g * plane;
        for (int64_t q0 = 0; q0 < npos; q0 += NW_BLK)
            for (int64_t c0 = 0; c0 < g->cot; c0 += NW_CB) {
                switch (g->cot - c0 < NW_CB ? g->cot - c0 : NW_CB) {
                case 4: nw_fwd_block(g, d, xn, w, tmp, c0, q0, 4); break;
                case 3: nw_fwd_block(g, d, xn, w, tmp, c0, q0, 3); break;
                case 2: nw_fwd_block(g, d, xn, w, tmp, c0, q0, 2); break;
                default: nw_fwd_block(g, d, xn, w, tmp, c0, q0, 1); break;
                }
            }
        for (int64_t co = 0; co < g->cot; co++) {
            float bv = bias ? bias[g->co0 + co] : 0.0f;
            for (int64_t oy = 0; oy < g->oht; oy++) {
                const float *src = tmp + co * npos + oy * d->pw;
                float *dst = y + ((n * g->cot + co) * g->oht + oy) * g->owt;
                for (int64_t ox = 0; ox < g->owt; ox++) dst[ox] = src[ox] + bv;
            }
        }
    }
}

static inline __attribute__((always_inline)) void
nw_dw_block(const conv_geom *g, const conv_direct *d, const float *restrict xpi,
            const float *restrict dyp, float *restrict accw, int64_t c0, int64_t t0,
            const int CB) {
    const int64_t plane = d->ph * d->pw, npos = nw_npos(g, d), taps = g->kh * g->kw;
    int valid = g->k - t0 < NW_TB ? (int)(g->k - t0) : NW_TB;
    int64_t to[NW_TB];
    for (int r = 0; r < NW_TB; r++) {
        /* past the last tap: repeat it, computed and dropped */
        int64_t t = t0 + (r < valid ? r : valid - 1), tap = t % taps;
        to[r] = t / taps * plane + tap / g->kw * d->dil_h * d->pw + tap % g->kw * d->dil_w;
    }
    conv_v16 acc[NW_CB * NW_TB];
    for (int c = 0; c < NW_CB * NW_TB; c++) acc[c] = (conv_v16){0};
    /* the vectors that hold a valid position; the rest of npos is zero in dyp */
    const int64_t nq = (g->oht * d->pw + DV - 1) / DV * DV;
    for (int64_t q = 0; q < nq; q += DV) {
        conv_v16 dv[NW_CB];
        for (int c = 0; c < CB; c++) V_LOAD(dv[c], dyp + (c0 + c) * npos + q);
        for (int r = 0; r < NW_TB; r++) {
            conv_v16 xv;
            V_LOAD(xv, xpi + to[r] + q);
            for (int c = 0; c < CB; c++) acc[c * NW_TB + r] += dv[c] * xv;
        }
    }
    for (int c = 0; c < CB; c++)
        for (int r = 0; r < valid; r++) {
            float *ap = accw + ((c0 + c) * g->k + t0 + r) * DV;
            conv_v16 s;
            V_LOAD(s, ap);
            s += acc[c * NW_TB + r];
            V_STORE(ap, s);
        }
}

/* dW (C_out, K) += sum over the tile's pixels of x * dy, image by image: xpi
 * (cin, ph, pw) and nw_slack zeros, dyp (cot, npos), accw (cot, K, DV). */
CONV_DIRECT_CLONES
static void conv_narrow_dw(const conv_geom *g, const conv_direct *d, const float *restrict x,
                           const float *restrict dy, float *restrict xpi, float *restrict dyp,
                           float *restrict accw, float *restrict dw) {
    const int64_t plane = d->ph * d->pw, npos = nw_npos(g, d);
    memset(accw, 0, (size_t)(g->cot * g->k * DV) * sizeof *accw);
    memset(xpi + g->cin_g * plane, 0, (size_t)nw_slack(g, d) * sizeof *xpi);
    memset(dyp, 0, (size_t)(g->cot * npos) * sizeof *dyp); /* dropped positions stay 0 */
    for (int64_t n = 0; n < g->nt; n++) {
        conv_direct_pad_image(g, d, x, n, xpi);
        for (int64_t co = 0; co < g->cot; co++)
            for (int64_t oy = 0; oy < g->oht; oy++)
                memcpy(dyp + co * npos + oy * d->pw, dy + ((n * g->cot + co) * g->oht + oy) * g->owt,
                       (size_t)g->owt * sizeof *dyp);
        for (int64_t c0 = 0; c0 < g->cot; c0 += NW_CB)
            for (int64_t t0 = 0; t0 < g->k; t0 += NW_TB) {
                switch (g->cot - c0 < NW_CB ? g->cot - c0 : NW_CB) {
                case 4: nw_dw_block(g, d, xpi, dyp, accw, c0, t0, 4); break;
                case 3: nw_dw_block(g, d, xpi, dyp, accw, c0, t0, 3); break;
                case 2: nw_dw_block(g, d, xpi, dyp, accw, c0, t0, 2); break;
                default: nw_dw_block(g, d, xpi, dyp, accw, c0, t0, 1); break;
                }
            }
    }
    for (int64_t co = 0; co < g->cot; co++)
        for (int64_t t = 0; t < g->k; t++) {
            const float *a = accw + (co * g->k + t) * DV;
            float s = 0.0f;
            for (int l = 0; l < DV; l++) s += a[l];
            dw[(g->co0 + co) * g->k + t] += s;
        }
}

#if !defined(__clang__)
#pragma GCC pop_options
#endif
#endif /* CONV_DIRECT_AVAILABLE */

static size_t conv2d_workspace_whole(const sf_op *op, const sf_tile *t, int backward) {
    sf_tile r;
    conv2d_region(op, t, 0, &r);
    conv_geom g;
    conv_geom_init(op, t, &r, &g);
#ifdef CONV_DIRECT_AVAILABLE
    if (g.direct) {
        conv_direct d = conv_direct_make(op, &g);
        return (size_t)conv_direct_elems(&g, &d, backward) * sizeof(float);
    }
#endif
    /* columns (k, cols) + a permuted output or gradient (mmax, cols); backward
     * without transposed_dx reuses the columns for W^T * dY */
    int64_t elems = (g.k + g.mmax) * conv_blocking_cols(&g.blk);
    if (backward && g.transposed_dx) {
        /* flipped filters (cin_g, kt) + columns of dy (kt, cols) + a permuted dx
         * (cin_g, cols); the dW pass before it is done with its buffers */
        int64_t te = g.cin_g * g.kt + (g.kt + g.cin_g) * conv_blocking_cols(&g.tblk);
        if (te > elems) elems = te;
    }
    return (size_t)elems * sizeof(float);
}

/* Output channels [c_lo, c_hi) of group `grp` that lie inside the tile. */
static void conv_group_channels(const conv_geom *g, int64_t grp, int64_t *c_lo, int64_t *c_hi) {
    int64_t a = grp * g->cout_g, b = a + g->cout_g;
    *c_lo = a > g->co0 ? a : g->co0;
    *c_hi = b < g->co0 + g->cot ? b : g->co0 + g->cot;
}

/* y (nt, cot, oht, owt) from x region (nt, crn, ihn, iwn), W (C_out, cin_g, kh, kw),
 * by direct summation over the window; taps in the padding contribute nothing. */
static sf_status conv2d_fwd_ref(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    const sf_conv2d_params *c = &op->params.conv2d;
    conv_geom g;
    conv_geom_init(op, &a->tile, &a->in_region[0], &g);
    const float *x = a->in[0], *w = a->weights;
    const float *bias = c->bias && g.ci0 == 0 ? w + c->out_channels * g.k : NULL;
    float *y = a->out[0];
    for (int64_t n = 0; n < g.nt; n++) {
        for (int64_t co = 0; co < g.cot; co++) {
            int64_t cg = g.co0 + co, grp = cg / g.cout_g;
            for (int64_t oh = 0; oh < g.oht; oh++) {
                for (int64_t ow = 0; ow < g.owt; ow++) {
                    float acc = bias ? bias[cg] : 0.0f;
                    for (int64_t ci = g.ci0; ci < g.ci1; ci++) {
                        const float *xc =
                            x + (n * g.crn + grp * g.cin_g + ci - g.cr0) * g.ihn * g.iwn;
                        const float *wc = w + (cg * g.cin_g + ci) * g.kh * g.kw;
                        for (int64_t i = 0; i < g.kh; i++) {
                            int64_t ih = (g.oh0 + oh) * c->stride[0] - c->padding[0] +
                                         i * c->dilation[0] - g.ih0;
                            if (ih < 0 || ih >= g.ihn) continue;
                            for (int64_t j = 0; j < g.kw; j++) {
                                int64_t iw = (g.ow0 + ow) * c->stride[1] - c->padding[1] +
                                             j * c->dilation[1] - g.iw0;
                                if (iw < 0 || iw >= g.iwn) continue;
                                acc += wc[i * g.kw + j] * xc[ih * g.iwn + iw];
                            }
                        }
                    }
                    y[((n * g.cot + co) * g.oht + oh) * g.owt + ow] = acc;
                }
            }
        }
    }
    return SF_OK;
}

/* The adjoint of conv2d_fwd_ref, tap by tap: dx += W * dy, dW += x * dy,
 * db += dy, all accumulated. */
static sf_status conv2d_bwd_ref(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    const sf_conv2d_params *c = &op->params.conv2d;
    conv_geom g;
    conv_geom_init(op, &a->tile, &a->in_region[0], &g);
    const float *x = a->in[0], *w = a->weights, *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dw = a->grad_weights;
    float *db = dw && c->bias && g.ci0 == 0 ? dw + c->out_channels * g.k : NULL;
    for (int64_t n = 0; n < g.nt; n++) {
        for (int64_t co = 0; co < g.cot; co++) {
            int64_t cg = g.co0 + co, grp = cg / g.cout_g;
            for (int64_t oh = 0; oh < g.oht; oh++) {
                for (int64_t ow = 0; ow < g.owt; ow++) {
                    float d = dy[((n * g.cot + co) * g.oht + oh) * g.owt + ow];
                    if (db) db[cg] += d;
                    for (int64_t ci = g.ci0; ci < g.ci1; ci++) {
                        int64_t xoff = (n * g.crn + grp * g.cin_g + ci - g.cr0) * g.ihn * g.iwn;
                        int64_t woff = (cg * g.cin_g + ci) * g.kh * g.kw;
                        for (int64_t i = 0; i < g.kh; i++) {
                            int64_t ih = (g.oh0 + oh) * c->stride[0] - c->padding[0] +
                                         i * c->dilation[0] - g.ih0;
                            if (ih < 0 || ih >= g.ihn) continue;
                            for (int64_t j = 0; j < g.kw; j++) {
                                int64_t iw = (g.ow0 + ow) * c->stride[1] - c->padding[1] +
                                             j * c->dilation[1] - g.iw0;
                                if (iw < 0 || iw >= g.iwn) continue;
                                int64_t xi = xoff + ih * g.iwn + iw, wi = woff + i * g.kw + j;
                                if (dx) dx[xi] += w[wi] * d;
                                if (dw) dw[wi] += x[xi] * d;
                            }
                        }
                    }
                }
            }
        }
    }
    return SF_OK;
}

/* One block of the fast kernels: images [n, n + nn) whole (nn > 1), or output
 * rows [r0, r0 + rn) of image n (nn == 1). Its columns are nn * rn * owt. */
typedef struct conv_block {
    int64_t n, nn, r0, rn, cols;
} conv_block;

/* Visit blocks in order; returns 0 after the last. */
static int conv_block_next(const conv_blocking *g, conv_block *b, int first) {
    if (first) {
        b->n = 0;
        b->r0 = 0;
    } else if (b->nn == 1 && b->r0 + b->rn < g->rows) {
        b->r0 += b->rn;
    } else {
        b->n += b->nn;
        b->r0 = 0;
    }
    if (b->n >= g->nt) return 0;
    b->nn = g->nt - b->n < g->chunk ? g->nt - b->n : g->chunk;
    b->rn = g->rows - b->r0 < g->band ? g->rows - b->r0 : g->band;
    b->cols = b->nn * b->rn * g->row_len;
    return 1;
}

/* Unfold the block's input, channels of group grp, into col (k, cols). */
static void conv_unfold(const conv_geom *g, sf_window2d win, const conv_block *b,
                        const float *x, int64_t grp, float *col) {
    win.oh0 = g->oh0 + b->r0;
    win.ohn = b->rn;
    for (int64_t j = 0; j < b->nn; j++) {
        const float *xi = x + ((b->n + j) * g->crn + grp * g->cin_g - g->cr0) * g->ihn * g->iwn;
        sf_im2col(&win, xi, col, b->cols, j * b->rn * g->owt);
    }
}

static void conv_fold(const conv_geom *g, sf_window2d win, const conv_block *b,
                      const float *col, int64_t grp, float *dx) {
    win.oh0 = g->oh0 + b->r0;
    win.ohn = b->rn;
    for (int64_t j = 0; j < b->nn; j++) {
        float *xi = dx + ((b->n + j) * g->crn + grp * g->cin_g - g->cr0) * g->ihn * g->iwn;
        sf_col2im(&win, col, b->cols, j * b->rn * g->owt, xi);
    }
}

static sf_status conv2d_fwd_fast_whole(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    const sf_conv2d_params *c = &op->params.conv2d;
    conv_geom g;
    conv_geom_init(op, &a->tile, &a->in_region[0], &g);
    sf_window2d win = conv_window(op, &g);
    const float *x = a->in[0], *w = a->weights;
    const float *bias = c->bias ? w + c->out_channels * g.k : NULL;
    float *y = a->out[0];
#ifdef CONV_DIRECT_AVAILABLE
    if (g.direct) {
        if (g.nt == 0 || g.cot == 0 || g.p == 0) return SF_OK;
        conv_direct d = conv_direct_make(op, &g);
        if (d.narrow) {
            float *xp = a->workspace, *tmp = xp + g.nt * g.cin_g * d.ph * d.pw + nw_slack(&g, &d);
            conv_direct_pad_input(&g, &d, x, xp); /* the slack feeds dropped positions only */
            conv_narrow_fwd(&g, &d, xp, w, bias, tmp, y);
            return SF_OK;
        }
        float *wt = a->workspace, *xp = wt + d.cb * g.k * DV;
        conv_direct_filters(&g, &d, w, wt);
        conv_direct_pad_input(&g, &d, x, xp);
        conv_direct_fwd(&g, &d, xp, wt, bias, y);
        return SF_OK;
    }
#endif
    float *col = a->workspace;                         /* (k, cols) */
    float *tmp = col + g.k * conv_blocking_cols(&g.blk); /* (mmax, cols) */
    int64_t grp_lo = g.co0 / g.cout_g, grp_hi = (g.co0 + g.cot - 1) / g.cout_g;
    for (int64_t grp = grp_lo; grp <= grp_hi; grp++) {
        int64_t c_lo, c_hi;
        conv_group_channels(&g, grp, &c_lo, &c_hi);
        int64_t m = c_hi - c_lo;
        const float *wg = w + c_lo * g.k; /* (m, k) */
        conv_block b = {0, 0, 0, 0, 0};
        for (int more = conv_block_next(&g.blk, &b, 1); more; more = conv_block_next(&g.blk, &b, 0)) {
            conv_unfold(&g, win, &b, x, grp, col);
            if (b.nn == 1) {
                /* rows of one image: channels c_lo.. of y are rows of stride p */
                float *yo = y + (b.n * g.cot + c_lo - g.co0) * g.p + b.r0 * g.owt;
                sf_sgemm(0, 0, m, b.cols, g.k, 1.0f, wg, g.k, col, b.cols, 0.0f, yo, g.p);
                if (bias)
                    for (int64_t co = 0; co < m; co++)
                        for (int64_t q = 0; q < b.cols; q++) yo[co * g.p + q] += bias[c_lo + co];
                continue;
            }
            sf_sgemm(0, 0, m, b.cols, g.k, 1.0f, wg, g.k, col, b.cols, 0.0f, tmp, b.cols);
            for (int64_t j = 0; j < b.nn; j++) {
                for (int64_t co = 0; co < m; co++) {
                    const float *src = tmp + co * b.cols + j * g.p;
                    float *dst = y + ((b.n + j) * g.cot + c_lo + co - g.co0) * g.p;
                    float bv = bias ? bias[c_lo + co] : 0.0f;
                    for (int64_t q = 0; q < g.p; q++) dst[q] = src[q] + bv;
                }
            }
        }
    }
    return SF_OK;
}

/* dx += the convolution of dy with the flipped filters, for stride 1 (chosen by
 * g->transposed_dx): dx (c, ih, iw) += sum over (co, i, j) of
 * W (co, c, kh-1-i, kw-1-j) * dy (co, ih + ph - (kh-1-i)*dh, iw + ...), i.e. a
 * convolution of the dy tile, as the region, onto the x region, as the tile,
 * with padding (kh-1)*dh - ph. Taps that land outside the dy tile read as zero:
 * they belong to other tiles, which add their own share. */
static void conv2d_bwd_dx_transposed(const sf_op *op, const conv_geom *g, const float *w,
                                     const float *dy, float *dx, float *ws) {
    const sf_conv2d_params *c = &op->params.conv2d;
    const int64_t taps = g->kh * g->kw, plane = g->ihn * g->iwn;
    float *wt = ws;                                      /* (cin_g, m*taps) */
    float *col = wt + g->cin_g * g->kt;                  /* (m*taps, cols) */
    float *tmp = col + g->kt * conv_blocking_cols(&g->tblk); /* (cin_g, cols) */
    sf_window2d win = {
        .kh = g->kh, .kw = g->kw, .sh = 1, .sw = 1,
        .ph = (g->kh - 1) * c->dilation[0] - c->padding[0],
        .pw = (g->kw - 1) * c->dilation[1] - c->padding[1],
        .dh = c->dilation[0], .dw = c->dilation[1],
        .oh0 = g->ih0, .ow0 = g->iw0, .ohn = g->ihn, .own = g->iwn,
        .ih0 = g->oh0, .iw0 = g->ow0, .ihn = g->oht, .iwn = g->owt,
    };
    int64_t grp_lo = g->co0 / g->cout_g, grp_hi = (g->co0 + g->cot - 1) / g->cout_g;
    for (int64_t grp = grp_lo; grp <= grp_hi; grp++) {
        int64_t c_lo, c_hi;
        conv_group_channels(g, grp, &c_lo, &c_hi);
        int64_t m = c_hi - c_lo, kt = m * taps;
        for (int64_t ci = 0; ci < g->cin_g; ci++)
            for (int64_t co = 0; co < m; co++) {
                const float *src = w + ((c_lo + co) * g->cin_g + ci) * taps;
                float *dst = wt + ci * kt + co * taps;
                for (int64_t q = 0; q < taps; q++) dst[q] = src[taps - 1 - q];
            }
        win.channels = m;
        conv_block b = {0, 0, 0, 0, 0};
        for (int more = conv_block_next(&g->tblk, &b, 1); more;
             more = conv_block_next(&g->tblk, &b, 0)) {
            sf_window2d bw = win;
            bw.oh0 = g->ih0 + b.r0;
            bw.ohn = b.rn;
            for (int64_t j = 0; j < b.nn; j++) {
                const float *dyi = dy + ((b.n + j) * g->cot + c_lo - g->co0) * g->p;
                sf_im2col(&bw, dyi, col, b.cols, j * b.rn * g->iwn);
            }
            /* dx of the group's channels, (cin_g, cols) */
            float *dxg = dx + (b.n * g->crn + grp * g->cin_g - g->cr0) * plane;
            if (b.nn == 1) {
                sf_sgemm(0, 0, g->cin_g, b.cols, kt, 1.0f, wt, kt, col, b.cols, 1.0f,
                         dxg + b.r0 * g->iwn, plane);
                continue;
            }
            sf_sgemm(0, 0, g->cin_g, b.cols, kt, 1.0f, wt, kt, col, b.cols, 0.0f, tmp, b.cols);
            for (int64_t j = 0; j < b.nn; j++)
                for (int64_t ci = 0; ci < g->cin_g; ci++) {
                    const float *src = tmp + ci * b.cols + j * plane;
                    float *dst = dxg + (j * g->crn + ci) * plane;
                    for (int64_t q = 0; q < plane; q++) dst[q] += src[q];
                }
        }
    }
}

static sf_status conv2d_bwd_fast_whole(const sf_kernel_args *a) {
    const sf_op *op = a->op;
    const sf_conv2d_params *c = &op->params.conv2d;
    conv_geom g;
    conv_geom_init(op, &a->tile, &a->in_region[0], &g);
    sf_window2d win = conv_window(op, &g);
    const float *x = a->in[0], *w = a->weights, *dy = a->grad_out[0];
    float *dx = a->grad_in ? a->grad_in[0] : NULL;
    float *dw = a->grad_weights;
    float *col = a->workspace;                         /* (k, cols): x, then dx columns */
    float *dyp = col + g.k * conv_blocking_cols(&g.blk); /* (mmax, cols): dy of one group */
    if (dw && c->bias) {
        float *db = dw + c->out_channels * g.k;
        for (int64_t n = 0; n < g.nt; n++) {
            for (int64_t co = 0; co < g.cot; co++) {
                const float *d = dy + (n * g.cot + co) * g.p;
                /* 8 partial sums: 8 independent add chains, not one */
                float s8[8] = {0};
                int64_t q = 0;
                for (; q + 8 <= g.p; q += 8)
                    for (int i = 0; i < 8; i++) s8[i] += d[q + i];
                float s = ((s8[0] + s8[4]) + (s8[1] + s8[5])) + ((s8[2] + s8[6]) + (s8[3] + s8[7]));
                for (; q < g.p; q++) s += d[q];
                db[g.co0 + co] += s;
            }
        }
    }
    if (!dx && !dw) return SF_OK;
#ifdef CONV_DIRECT_AVAILABLE
    if (g.direct) {
        if (g.nt == 0 || g.cot == 0 || g.p == 0) return SF_OK;
        conv_direct d = conv_direct_make(op, &g);
        if (d.narrow) {
            float *xpi = a->workspace, *dyq = xpi + g.cin_g * d.ph * d.pw + nw_slack(&g, &d);
            float *accw = dyq + g.cot * nw_npos(&g, &d);
            if (dw) conv_narrow_dw(&g, &d, x, dy, xpi, dyq, accw, dw);
            if (dx) conv_direct_dx(&g, &d, w, dy, dx, a->workspace);
            return SF_OK;
        }
        float *wt = a->workspace, *xp = wt + d.cb * g.k * DV;
        float *dyc = xp + g.nt * g.cin_g * d.ph * d.pw; /* (cb, p, DV) */
        /* wt, not filled by the backward, holds dW's sums (cb, K, DV); xp, one image */
        if (dw) conv_direct_dw(&g, &d, x, dy, xp, dyc, wt, dw);
        if (dx) conv_direct_dx(&g, &d, w, dy, dx, dyc + d.cb * g.p * DV + DV * DV);
        return SF_OK;
    }
#endif
    if (dx && g.transposed_dx) conv2d_bwd_dx_transposed(op, &g, w, dy, dx, a->workspace);
    if (!dw && (!dx || g.transposed_dx)) return SF_OK;
    int64_t grp_lo = g.co0 / g.cout_g, grp_hi = (g.co0 + g.cot - 1) / g.cout_g;
    for (int64_t grp = grp_lo; grp <= grp_hi; grp++) {
        int64_t c_lo, c_hi;
        conv_group_channels(&g, grp, &c_lo, &c_hi);
        int64_t m = c_hi - c_lo;
        const float *wg = w + c_lo * g.k;
        conv_block b = {0, 0, 0, 0, 0};
        for (int more = conv_block_next(&g.blk, &b, 1); more; more = conv_block_next(&g.blk, &b, 0)) {
            /* dy of this group and block as (m, cols); rows of one image already are */
            const float *dg;
            int64_t ldd;
            if (b.nn == 1) {
                dg = dy + (b.n * g.cot + c_lo - g.co0) * g.p + b.r0 * g.owt;
                ldd = g.p;
            } else {
                for (int64_t j = 0; j < b.nn; j++)
                    for (int64_t co = 0; co < m; co++)
                        memcpy(dyp + co * b.cols + j * g.p,
                               dy + ((b.n + j) * g.cot + c_lo + co - g.co0) * g.p,
                               (size_t)g.p * sizeof *dyp);
                dg = dyp;
                ldd = b.cols;
            }
            if (dw) {
                conv_unfold(&g, win, &b, x, grp, col);
                /* dW_g (m, k) += dy_g (m, cols) * col^T (cols, k) */
                sf_sgemm(0, 1, m, g.k, b.cols, 1.0f, dg, ldd, col, b.cols, 1.0f,
                         dw + c_lo * g.k, g.k);
            }
            if (dx && !g.transposed_dx) {
                /* dcol (k, cols) = W_g^T (k, m) * dy_g (m, cols), folded into dx */
                sf_sgemm(1, 0, g.k, b.cols, m, 1.0f, wg, g.k, dg, ldd, 0.0f, col, b.cols);
                conv_fold(&g, win, &b, col, grp, dx);
            }
        }
    }
    return SF_OK;
}

/* ---- partial sums: a part of the input channels ----------------------- */

/* The fast kernels run a part with input channels [c0, c1) (groups == 1) as the
 * whole convolution of a view: the same operator with ct = c1 - c0 input channels
 * (the bias only on the part with c0 = 0), the tile without its reduction
 * dimension, the region's channels renumbered from 0, and the filters
 * W[o0:o1, c0:c1, :, :] packed into the workspace (backward: their gradient too,
 * packed, then added back). Packing copies ot * ct * kh * kw weights, N * H * W
 * times fewer than the convolution's multiply-adds. */
typedef struct conv_part {
    sf_op op;
    sf_shape in_shape;
    sf_tile tile, region;
    int64_t o0, ot, c0, ct, khw, k, nout;
    int bias;
    int64_t packed; /* floats of one packed weight buffer, rounded up to 16 */
} conv_part;

static void conv_part_make(const sf_op *op, const sf_tile *t, conv_part *v) {
    const sf_conv2d_params *c = &op->params.conv2d;
    int64_t c1;
    conv2d_crange(op, t, &v->c0, &c1);
    v->ct = c1 - v->c0;
    v->o0 = t->lo[1];
    v->ot = t->hi[1] - t->lo[1];
    v->khw = c->kernel[0] * c->kernel[1];
    v->k = conv2d_fan_in(op);
    v->nout = c->out_channels;
    v->bias = c->bias && v->c0 == 0;
    v->op = *op;
    v->in_shape = op->in_shapes[0];
    v->in_shape.d[1] = v->ct;
    v->op.in_shapes = &v->in_shape;
    v->op.params.conv2d.bias = v->bias;
    v->tile = *t;
    v->tile.ndim = 4;
    v->tile.lo[4] = v->tile.hi[4] = 0;
    conv2d_region(&v->op, &v->tile, 0, &v->region);
    int64_t n = v->nout * v->ct * v->khw + (v->bias ? v->nout : 0);
    v->packed = (n + 15) / 16 * 16;
}

size_t sf_conv2d_workspace_bytes(const sf_op *op, const sf_tile *t, int backward) {
    if (conv2d_whole_c(op, t)) return conv2d_workspace_whole(op, t, backward);
    conv_part v;
    conv_part_make(op, t, &v);
    return (size_t)((backward ? 2 : 1) * v.packed) * sizeof(float) +
           conv2d_workspace_whole(&v.op, &v.tile, backward);
}

/* Copy the tile's filters W[o0:o1, c0:c1] (and their biases) from the full
 * layout `from` (row length k) into the view's layout `to` (row length ct * khw),
 * or back, adding, when `back`. */
static void conv_part_copy(const conv_part *v, const float *from, float *to, int back) {
    int64_t kv = v->ct * v->khw, len = kv;
    for (int64_t o = v->o0; o < v->o0 + v->ot; o++) {
        const float *f = back ? from + o * kv : from + o * v->k + v->c0 * v->khw;
        float *d = back ? to + o * v->k + v->c0 * v->khw : to + o * kv;
        if (back)
            for (int64_t i = 0; i < len; i++) d[i] += f[i];
        else
            memcpy(d, f, (size_t)len * sizeof *d);
    }
    if (!v->bias) return;
    const float *fb = from + v->nout * (back ? kv : v->k) + v->o0;
    float *db = to + v->nout * (back ? v->k : kv) + v->o0;
    for (int64_t o = 0; o < v->ot; o++) db[o] = back ? db[o] + fb[o] : fb[o];
}

static sf_status conv2d_fwd_fast(const sf_kernel_args *a) {
    if (conv2d_whole_c(a->op, &a->tile)) return conv2d_fwd_fast_whole(a);
    conv_part v;
    conv_part_make(a->op, &a->tile, &v);
    float *wp = a->workspace;
    conv_part_copy(&v, a->weights, wp, 0);
    sf_kernel_args b = *a;
    b.op = &v.op;
    b.tile = v.tile;
    b.in_region = &v.region;
    b.weights = wp;
    b.workspace = wp + v.packed;
    b.workspace_bytes = a->workspace_bytes - (size_t)v.packed * sizeof(float);
    return conv2d_fwd_fast_whole(&b);
}

static sf_status conv2d_bwd_fast(const sf_kernel_args *a) {
    if (conv2d_whole_c(a->op, &a->tile)) return conv2d_bwd_fast_whole(a);
    conv_part v;
    conv_part_make(a->op, &a->tile, &v);
    float *wp = a->workspace, *dwp = wp + v.packed;
    conv_part_copy(&v, a->weights, wp, 0);
    if (a->grad_weights) memset(dwp, 0, (size_t)v.packed * sizeof *dwp);
    sf_kernel_args b = *a;
    b.op = &v.op;
    b.tile = v.tile;
    b.in_region = &v.region;
    b.weights = wp;
    b.grad_weights = a->grad_weights ? dwp : NULL;
    b.workspace = dwp + v.packed;
    b.workspace_bytes = a->workspace_bytes - (size_t)(2 * v.packed) * sizeof(float);
    sf_status s = conv2d_bwd_fast_whole(&b);
    if (s == SF_OK && a->grad_weights) conv_part_copy(&v, dwp, a->grad_weights, 1);
    return s;
}

/* The backward saves the input (for dW; PyTorch's ConvolutionBackward keeps
 * input and weight), never its output: a ReLU or batch norm after it may run
 * in place over that. */
static unsigned conv2d_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_INPUT(0);
}

const sf_op_class sf_op_conv2d_class = {
    .type = SF_OP_CONV2D,
    .name = "conv2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = conv2d_attrs,
    .n_attrs = (int)(sizeof conv2d_attrs / sizeof conv2d_attrs[0]),
    .defaults = conv2d_defaults,
    .infer = conv2d_infer,
    .param_count = conv2d_params,
    .space = conv2d_space,
    .region = conv2d_region,
    .cost = conv2d_cost,
    .saves = conv2d_saves,
    .weight_slices = conv2d_weight_slices,
    .param_descs = conv2d_param_descs,
    .fwd_ref = conv2d_fwd_ref,
    .fwd_fast = conv2d_fwd_fast,
    .bwd_ref = conv2d_bwd_ref,
    .bwd_fast = conv2d_bwd_fast,
    .workspace = sf_conv2d_workspace_bytes,
};
