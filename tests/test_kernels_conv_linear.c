/* Kernels of conv2d and linear: fast against reference on awkward shapes, tiles of
 * uneven partitions stitched against the whole tensor, every gradient against
 * double-precision central differences, accumulation, and the dispatcher's checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "kernel_check.h"

#include "soapflow/graph.h"
#include "soapflow/kernels.h"

/* ---- helpers ----------------------------------------------------------- */

/* max|a - b| / max|b| (the denominator at least 1e-30) */
static double rel_err(const float *a, const float *b, int64_t n) {
    return err_floor(a, b, n, 1e-30);
}

static double rel_err_d(const float *a, const double *b, int64_t n) {
    return err_floor_d(a, b, n, 1e-30);
}

/* A graph holding one input and one operator of the given type. */
typedef struct one_op {
    sf_graph *g;
    const sf_op *op;
    int64_t n_in, n_out, n_w;
} one_op;

static void one_op_make(one_op *o, sf_op_type type, const sf_shape *in, const sf_op_params *p) {
    sf_error err = {0};
    o->g = sf_graph_new("k");
    assert_non_null(o->g);
    int x = sf_graph_add_input(o->g, "x", in, 0, &err);
    assert_true(x >= 0);
    int id = sf_graph_add_op(o->g, type, "op", p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (id < 0) fail_msg("add_op: %s", err.msg);
    o->op = sf_graph_op(o->g, id);
    o->n_in = sf_shape_numel(&o->op->in_shapes[0]);
    o->n_out = sf_shape_numel(&o->op->out_shapes[0]);
    o->n_w = o->op->n_params;
}

/* Buffers of one tile and its kernel arguments. */
typedef struct tile_run {
    sf_tile t, r, o;
    float *x, *y, *dy, *dx, *ws;
    size_t ws_bytes;
    const float *in_arr[1];
    const sf_tile *reg_arr;
    float *out_arr[1];
    const float *dy_arr[1];
    float *dx_arr[1];
    sf_kernel_args a;
} tile_run;

/* Prepare tile t: x = region of the full input, dy = tile of full_dy (may be NULL). */
static void tile_run_init(tile_run *tr, const sf_op *op, const sf_tile *t, const float *x_full,
                          const float *w, const float *dy_full, float *dw) {
    memset(tr, 0, sizeof *tr);
    tr->t = *t;
    sf_op_input_region(op, t, 0, &tr->r);
    sf_op_output_tile(op, t, 0, &tr->o);
    tr->x = falloc(sf_tile_numel(&tr->r));
    region_copy((float *)x_full, &op->in_shapes[0], &tr->r, tr->x, 0);
    tr->y = falloc(sf_tile_numel(&tr->o));
    tr->dy = falloc(sf_tile_numel(&tr->o));
    if (dy_full) region_copy((float *)dy_full, &op->out_shapes[0], &tr->o, tr->dy, 0);
    tr->dx = falloc(sf_tile_numel(&tr->r));
    size_t wsb = sf_kernel_workspace_bytes(op, t, 0);
    size_t wsb_b = sf_kernel_workspace_bytes(op, t, 1);
    if (wsb_b > wsb) wsb = wsb_b;
    tr->ws = ws_alloc(wsb);
    tr->ws_bytes = wsb;
    tr->in_arr[0] = tr->x;
    tr->out_arr[0] = tr->y;
    tr->dy_arr[0] = tr->dy;
    tr->dx_arr[0] = tr->dx;
    tr->a = (sf_kernel_args){
        .op = op, .tile = *t, .n_inputs = 1, .in = tr->in_arr, .in_region = &tr->r,
        .n_outputs = 1, .out = tr->out_arr, .weights = w, .grad_out = tr->dy_arr,
        .grad_in = tr->dx_arr, .grad_weights = dw, .workspace = tr->ws, .workspace_bytes = wsb,
    };
}

static void tile_run_free(tile_run *tr) {
    free(tr->x);
    free(tr->y);
    free(tr->dy);
    free(tr->dx);
    ws_free(tr->ws, tr->ws_bytes);
}

/* Parts of a partition: degrees per dimension, parts enumerated in row-major order. */
static int partition_count(const int *deg, int ndim) {
    int n = 1;
    for (int i = 0; i < ndim; i++) n *= deg[i];
    return n;
}

static sf_tile partition_tile(const sf_shape *space, const int *deg, int part) {
    sf_tile t;
    memset(&t, 0, sizeof t);
    t.ndim = space->ndim;
    for (int i = space->ndim - 1; i >= 0; i--) {
        sf_split_range(space->d[i], deg[i], part % deg[i], &t.lo[i], &t.hi[i]);
        part /= deg[i];
    }
    return t;
}

/* Run the whole operator on one tile (forward, then backward with dy), with
 * either kernel: y_full (numel out), dx_full (numel in), dw (numel w) are
 * filled/accumulated. */
static void run_partition(const one_op *o, const int *deg, int fast, const float *x,
                          const float *w, const float *dy, float *y_full, float *dx_full,
                          float *dw) {
    const sf_op *op = o->op;
    int parts = partition_count(deg, op->space.ndim);
    /* parts split along a reduction dimension (a linear's input features) hold
     * partial sums of their output piece: they add up to it */
    int partial = 0;
    for (int i = 0; i < op->space.ndim; i++) partial |= op->kinds[i] == SF_DIM_REDUCE && deg[i] > 1;
    if (partial) memset(y_full, 0, (size_t)o->n_out * sizeof *y_full);
    for (int p = 0; p < parts; p++) {
        sf_tile t = partition_tile(&op->space, deg, p);
        tile_run tr;
        tile_run_init(&tr, op, &t, x, w, dy, dw);
        assert_int_equal(sf_kernel_forward(&tr.a, fast), SF_OK);
        if (!sf_tile_empty(&t)) {
            region_copy(y_full, &op->out_shapes[0], &tr.o, tr.y, partial ? 2 : 1);
            assert_int_equal(sf_kernel_backward(&tr.a, fast), SF_OK);
            if (sf_tile_numel(&tr.r) > 0)
                region_copy(dx_full, &op->in_shapes[0], &tr.r, tr.dx, 2);
        }
        tile_run_free(&tr);
    }
}

/* ---- double-precision references (the definition, written again) ------- */

static void conv_fwd_d(const sf_op *op, const double *x, const double *w, double *y) {
    const sf_conv2d_params *c = &op->params.conv2d;
    const sf_shape *is = &op->in_shapes[0], *os = &op->out_shapes[0];
    int64_t N = is->d[0], C = is->d[1], H = is->d[2], W = is->d[3];
    int64_t CO = os->d[1], OH = os->d[2], OW = os->d[3];
    int64_t cig = C / c->groups, cog = CO / c->groups, kh = c->kernel[0], kw = c->kernel[1];
    const double *b = c->bias ? w + CO * cig * kh * kw : NULL;
    for (int64_t n = 0; n < N; n++)
        for (int64_t co = 0; co < CO; co++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? b[co] : 0.0;
                    int64_t grp = co / cog;
                    for (int64_t ci = 0; ci < cig; ci++)
                        for (int64_t i = 0; i < kh; i++)
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t ih = oh * c->stride[0] - c->padding[0] + i * c->dilation[0];
                                int64_t iw = ow * c->stride[1] - c->padding[1] + j * c->dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += w[((co * cig + ci) * kh + i) * kw + j] *
                                     x[((n * C + grp * cig + ci) * H + ih) * W + iw];
                            }
                    y[((n * CO + co) * OH + oh) * OW + ow] = s;
                }
}

static void linear_fwd_d(const sf_op *op, const double *x, const double *w, double *y) {
    const sf_shape *is = &op->in_shapes[0];
    int64_t K = is->d[is->ndim - 1], O = op->params.linear.out_features;
    int64_t R = sf_shape_numel(is) / K;
    const double *b = op->params.linear.bias ? w + O * K : NULL;
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t k = 0; k < K; k++) s += x[r * K + k] * w[o * K + k];
            y[r * O + o] = s;
        }
}

typedef void (*fwd_d_fn)(const sf_op *, const double *, const double *, double *);

static double loss_d(const one_op *o, fwd_d_fn f, const double *x, const double *w,
                     const float *rnd, double *ytmp) {
    f(o->op, x, w, ytmp);
    double s = 0;
    for (int64_t i = 0; i < o->n_out; i++) s += ytmp[i] * (double)rnd[i];
    return s;
}

/* Central differences of L = sum(f(x, w) * rnd) in double, against the
 * gradients the kernels give (ref and fast) for dy = rnd. */
static void check_gradients_fd(const one_op *o, fwd_d_fn f, uint64_t seed) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    float *x = falloc(o->n_in), *w = falloc(o->n_w), *rnd = falloc(o->n_out);
    fill_random(&rng, x, o->n_in);
    fill_random(&rng, w, o->n_w);
    fill_random(&rng, rnd, o->n_out);
    double *xd = malloc((size_t)o->n_in * sizeof *xd), *wd = malloc((size_t)o->n_w * sizeof *wd);
    double *yd = malloc((size_t)o->n_out * sizeof *yd);
    double *gx = malloc((size_t)o->n_in * sizeof *gx), *gw = malloc((size_t)o->n_w * sizeof *gw);
    assert_true(xd && wd && yd && gx && gw);
    for (int64_t i = 0; i < o->n_in; i++) xd[i] = x[i];
    for (int64_t i = 0; i < o->n_w; i++) wd[i] = w[i];
    const double h = 1e-2;
    for (int64_t i = 0; i < o->n_in; i++) {
        double v = xd[i];
        xd[i] = v + h;
        double lp = loss_d(o, f, xd, wd, rnd, yd);
        xd[i] = v - h;
        double lm = loss_d(o, f, xd, wd, rnd, yd);
        xd[i] = v;
        gx[i] = (lp - lm) / (2 * h);
    }
    for (int64_t i = 0; i < o->n_w; i++) {
        double v = wd[i];
        wd[i] = v + h;
        double lp = loss_d(o, f, xd, wd, rnd, yd);
        wd[i] = v - h;
        double lm = loss_d(o, f, xd, wd, rnd, yd);
        wd[i] = v;
        gw[i] = (lp - lm) / (2 * h);
    }
    int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
    for (int fast = 0; fast < 2; fast++) {
        float *y = falloc(o->n_out), *dx = falloc(o->n_in), *dw = falloc(o->n_w);
        run_partition(o, deg, fast, x, w, rnd, y, dx, dw);
        double ex = rel_err_d(dx, gx, o->n_in), ew = rel_err_d(dw, gw, o->n_w);
        if (ex > 1e-3 || ew > 1e-3)
            fail_msg("%s fast=%d: grad input err %g, grad weight err %g",
                     sf_op_type_name(o->op->type), fast, ex, ew);
        /* the bias gradient alone, since its values are larger than W's */
        int bias = o->op->type == SF_OP_CONV2D ? o->op->params.conv2d.bias
                                               : o->op->params.linear.bias;
        if (bias) {
            int64_t nb = o->op->type == SF_OP_CONV2D ? o->op->params.conv2d.out_channels
                                                     : o->op->params.linear.out_features;
            double eb = rel_err_d(dw + o->n_w - nb, gw + o->n_w - nb, nb);
            if (eb > 1e-3) fail_msg("fast=%d: grad bias err %g", fast, eb);
        }
        free(y);
        free(dx);
        free(dw);
    }
    free(x);
    free(w);
    free(rnd);
    free(xd);
    free(wd);
    free(yd);
    free(gx);
    free(gw);
}

/* Every partition in degs (degrees of the first 5 dimensions, 0 read as 1): fast and
 * reference tiles stitched (partial sums added) == full reference. */
static void check_partitions(const one_op *o, const int (*degs)[5], int n_degs, uint64_t seed) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    float *x = falloc(o->n_in), *w = falloc(o->n_w), *dy = falloc(o->n_out);
    fill_random(&rng, x, o->n_in);
    fill_random(&rng, w, o->n_w);
    fill_random(&rng, dy, o->n_out);
    float *y0 = falloc(o->n_out), *dx0 = falloc(o->n_in), *dw0 = falloc(o->n_w);
    int whole[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
    run_partition(o, whole, 0, x, w, dy, y0, dx0, dw0);
    for (int d = -1; d < n_degs; d++) {
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        if (d >= 0)
            for (int i = 0; i < o->op->space.ndim && i < 5; i++)
                deg[i] = degs[d][i] > 0 ? degs[d][i] : 1;
        for (int fast = 0; fast < 2; fast++) {
            if (d < 0 && !fast) continue; /* that is the baseline itself */
            float *y = falloc(o->n_out), *dx = falloc(o->n_in), *dw = falloc(o->n_w);
            run_partition(o, deg, fast, x, w, dy, y, dx, dw);
            double ey = rel_err(y, y0, o->n_out), ex = rel_err(dx, dx0, o->n_in);
            double ew = rel_err(dw, dw0, o->n_w);
            if (ey > 1e-4 || ex > 1e-4 || ew > 1e-4)
                fail_msg("%s partition %d (%d,%d,%d,%d,%d) fast=%d: y %g dx %g dw %g",
                         sf_op_type_name(o->op->type), d, deg[0], deg[1], deg[2], deg[3], deg[4],
                         fast, ey, ex, ew);
            free(y);
            free(dx);
            free(dw);
        }
    }
    free(x);
    free(w);
    free(dy);
    free(y0);
    free(dx0);
    free(dw0);
}

/* ---- conv2d ------------------------------------------------------------ */

typedef struct conv_case {
    int64_t n, c, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int bias;
} conv_case;

static const conv_case conv_cases[] = {
    {1, 3, 7, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* batch 1, prime sizes */
    {2, 4, 11, 7, 6, 3, 5, 2, 3, 1, 2, 1, 1, 1, 0},   /* strides 2 and 3, no bias */
    {3, 4, 13, 11, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 1},  /* dilation 2, groups 2 */
    {2, 6, 9, 10, 6, 3, 3, 2, 2, 1, 1, 1, 1, 6, 1},   /* depthwise, stride 2 */
    {2, 3, 8, 7, 12, 3, 2, 1, 2, 0, 1, 1, 2, 3, 1},   /* groups 3, 4 filters per group */
    {2, 3, 5, 6, 4, 2, 2, 1, 1, 3, 3, 1, 1, 1, 1},    /* padding wider than the kernel */
    {1, 5, 7, 13, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},   /* 1x1 */
    {3, 2, 12, 9, 3, 5, 3, 3, 2, 2, 1, 2, 1, 1, 1},   /* mixed everything */
    /* stride 1, input channels >= output channels per group, region about the
     * tile: the fast backward computes dx as a convolution of dy */
    {2, 6, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* same padding */
    {2, 8, 7, 9, 4, 3, 5, 1, 1, 2, 3, 2, 1, 2, 0},    /* groups 2, dilation, uneven pads */
    {1, 4, 5, 6, 3, 2, 2, 1, 1, 2, 2, 1, 1, 1, 1},    /* padding wider than the kernel */
    /* groups 1, stride 1, C_out <= 32, C_in*kh*kw <= 256: the direct kernels
     * (channel blocks of 16 padded with zeros, pixel and tap blocks with
     * remainders, dX rows wider than one block of 16) */
    {2, 1, 6, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* one input, one output channel */
    {2, 3, 9, 8, 5, 5, 5, 1, 1, 0, 0, 1, 1, 1, 1},    /* LeNet-like 5x5, no padding */
    {1, 6, 8, 9, 16, 5, 3, 1, 1, 2, 1, 1, 1, 1, 0},   /* one full channel block */
    {2, 2, 7, 6, 17, 3, 3, 1, 1, 1, 1, 2, 1, 1, 1},   /* 17: a block of one, dilation */
    {1, 2, 5, 37, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* rows of 37: three dX blocks */
    {1, 5, 4, 5, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1},   /* 1x1, two full blocks */
    {18, 4, 7, 6, 3, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1},   /* dX: 16 images and 2, 4 channels */
    {1, 4, 6, 5, 33, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1},   /* 33: over the rule, im2col */
    /* forward blocks of 2 x 5 pixels: widths that are multiples of 5 */
    {2, 3, 9, 14, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1, 1},  /* 5 x 10: odd rows, two blocks */
    {1, 2, 3, 7, 5, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0},    /* 1 x 5: one row */
    {2, 2, 6, 15, 18, 2, 2, 1, 1, 0, 1, 1, 2, 1, 1},  /* 5 x 15 (dilation), 18 filters */
    /* dW blocks of 2 kernel rows x 5 taps (kw 5, no dilation across) */
    {2, 2, 10, 12, 17, 3, 5, 1, 1, 1, 0, 2, 1, 1, 1}, /* rows 2 + 1, width 8 = 5 + 3, 17 filters */
    {1, 3, 6, 16, 4, 2, 5, 1, 1, 0, 1, 1, 2, 1, 0},   /* kw 5 dilated across: 8-tap blocks */
    /* at most 8 output channels on planes of many pixels: the narrow kernels
     * (positions in the lanes, padded rows, a last block past the plane) */
    {2, 1, 20, 17, 6, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1},  /* LeNet's conv1, smaller: 4 + 2 channels */
    {3, 2, 12, 30, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  /* 4 + 3 channels, planes of whole blocks */
    {1, 2, 16, 40, 5, 3, 3, 1, 1, 2, 1, 2, 2, 1, 0},  /* dilation 2, uneven padding, no bias */
};
#define N_CONV_CASES ((int)(sizeof conv_cases / sizeof conv_cases[0]))

static void conv_make(one_op *o, const conv_case *k) {
    sf_shape s = sf_shape_make(4, (int64_t[]){k->n, k->c, k->h, k->w});
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = k->cout;
    p.conv2d.kernel[0] = k->kh;
    p.conv2d.kernel[1] = k->kw;
    p.conv2d.stride[0] = k->sh;
    p.conv2d.stride[1] = k->sw;
    p.conv2d.padding[0] = k->ph;
    p.conv2d.padding[1] = k->pw;
    p.conv2d.dilation[0] = k->dh;
    p.conv2d.dilation[1] = k->dw;
    p.conv2d.groups = k->groups;
    p.conv2d.bias = k->bias;
    one_op_make(o, SF_OP_CONV2D, &s, &p);
}

static void test_conv_tiles_fast_vs_ref(void **state) {
    (void)state;
    static const int degs[][5] = {
        {2, 3, 2, 3},
        {3, 2, 3, 2},
        {1, 1, 4, 5},
        {2, 1, 1, 1},
        {1, 5, 1, 1},
        {1, 1, 7, 1}, /* more parts than rows in some cases: empty tiles */
        {1, 2, 1, 4},
        /* partial sums over the input channels (groups 1; with groups the
         * dimension has size 1 and the extra parts are empty); more parts than
         * channels in some cases */
        {1, 1, 1, 1, 2},
        {2, 3, 1, 2, 3},
        {1, 2, 2, 1, 2},
        {1, 1, 1, 1, 5},
    };
    for (int i = 0; i < N_CONV_CASES; i++) {
        one_op o;
        conv_make(&o, &conv_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 100 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* Layers whose columns exceed the fast kernel's block: it works in bands of
 * output rows of one image. Too large for finite differences. */
static const conv_case conv_big_cases[] = {
    {2, 16, 90, 91, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 8, 160, 97, 6, 5, 3, 1, 2, 2, 1, 1, 1, 2, 0},
    {2, 16, 61, 67, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* dx as a convolution, in bands */
};

static void test_conv_big_tiles(void **state) {
    (void)state;
    static const int degs[][5] = {{2, 1, 3, 1}, {1, 2, 1, 2}, {1, 2, 1, 1, 3}};
    for (int i = 0; i < (int)(sizeof conv_big_cases / sizeof conv_big_cases[0]); i++) {
        one_op o;
        conv_make(&o, &conv_big_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 700 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_conv_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_CONV_CASES; i++) {
        one_op o;
        conv_make(&o, &conv_cases[i]);
        check_gradients_fd(&o, conv_fwd_d, 200 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* Forward of the full tile against the double reference: catches an error that
 * the two float kernels could share. */
static void test_conv_forward_vs_double(void **state) {
    (void)state;
    for (int i = 0; i < N_CONV_CASES; i++) {
        one_op o;
        conv_make(&o, &conv_cases[i]);
        sf_rng rng;
        sf_rng_seed(&rng, 300 + (uint64_t)i);
        float *x = falloc(o.n_in), *w = falloc(o.n_w), *y = falloc(o.n_out);
        fill_random(&rng, x, o.n_in);
        fill_random(&rng, w, o.n_w);
        double *xd = malloc((size_t)o.n_in * sizeof *xd), *wd = malloc((size_t)o.n_w * sizeof *wd);
        double *yd = malloc((size_t)o.n_out * sizeof *yd);
        assert_true(xd && wd && yd);
        for (int64_t j = 0; j < o.n_in; j++) xd[j] = x[j];
        for (int64_t j = 0; j < o.n_w; j++) wd[j] = w[j];
        conv_fwd_d(o.op, xd, wd, yd);
        sf_tile t = sf_tile_full(&o.op->space);
        for (int fast = 0; fast < 2; fast++) {
            tile_run tr;
            tile_run_init(&tr, o.op, &t, x, w, NULL, NULL);
            assert_int_equal(sf_kernel_forward(&tr.a, fast), SF_OK);
            assert_true(rel_err_d(tr.y, yd, o.n_out) < 1e-5);
            tile_run_free(&tr);
        }
        free(x);
        free(w);
        free(y);
        free(xd);
        free(wd);
        free(yd);
        sf_graph_free(o.g);
    }
}

/* The fast kernels stay inside the workspace they declare, forward and backward
 * each with its own size: every tile of a few partitions runs with exactly
 * sf_kernel_workspace_bytes of NaN followed by guard values (ws_alloc) that must
 * survive.
 * The last case has tiles whose windows lie wholly in the left padding
 * (padding 3 wider than a 1-wide kernel's span plus a 1- or 2-column tile): the
 * direct kernels' padded copy of the input once wrote its zero columns past
 * the row, and past the end of the workspace. */
static void run_with_guard(const sf_kernel_args *a0, int backward) {
    size_t bytes = sf_kernel_workspace_bytes(a0->op, &a0->tile, backward);
    float *buf = ws_alloc(bytes); /* NaN, then guards that ws_free checks */
    sf_kernel_args a = *a0;
    a.workspace = bytes ? buf : NULL;
    a.workspace_bytes = bytes;
    assert_int_equal(backward ? sf_kernel_backward(&a, 1) : sf_kernel_forward(&a, 1), SF_OK);
    ws_free(buf, bytes);
}

static void test_conv_workspace_bounds(void **state) {
    (void)state;
    static const conv_case all_padding = {3, 2, 10, 3, 1, 2, 1, 1, 1, 2, 3, 3, 2, 1, 0};
    /* partial sums (input channels split) first: the last partition is stitched */
    static const int degs[][5] = {
        {1, 2, 2, 1, 2}, {1, 1, 1, 1, 3}, {1, 1, 4, 4, 1}, {2, 1, 3, 2, 1}, {1, 1, 1, 9, 1}};
    for (int i = 0; i <= N_CONV_CASES; i++) {
        one_op o;
        conv_make(&o, i < N_CONV_CASES ? &conv_cases[i] : &all_padding);
        sf_rng rng;
        sf_rng_seed(&rng, 800 + (uint64_t)i);
        float *x = falloc(o.n_in), *w = falloc(o.n_w), *dy = falloc(o.n_out);
        float *dw = falloc(o.n_w), *y = falloc(o.n_out), *y_ref = falloc(o.n_out);
        fill_random(&rng, x, o.n_in);
        fill_random(&rng, w, o.n_w);
        fill_random(&rng, dy, o.n_out);
        for (int d = 0; d < (int)(sizeof degs / sizeof degs[0]); d++)
            for (int p = 0; p < partition_count(degs[d], 5); p++) {
                sf_tile t = partition_tile(&o.op->space, degs[d], p);
                tile_run tr;
                tile_run_init(&tr, o.op, &t, x, w, dy, dw);
                run_with_guard(&tr.a, 0);
                run_with_guard(&tr.a, 1);
                if (!sf_tile_empty(&t)) region_copy(y, &o.op->out_shapes[0], &tr.o, tr.y, 1);
                tile_run_free(&tr);
            }
        sf_tile whole = sf_tile_full(&o.op->space);
        tile_run tr;
        tile_run_init(&tr, o.op, &whole, x, w, NULL, NULL);
        assert_int_equal(sf_kernel_forward(&tr.a, 0), SF_OK);
        memcpy(y_ref, tr.y, (size_t)o.n_out * sizeof *y_ref);
        tile_run_free(&tr);
        assert_true(rel_err(y, y_ref, o.n_out) < 1e-5); /* the last partition, stitched */
        free(x);
        free(w);
        free(dy);
        free(dw);
        free(y);
        free(y_ref);
        sf_graph_free(o.g);
    }
}

/* ---- linear ------------------------------------------------------------ */

typedef struct linear_case {
    int ndim;
    int64_t d[3];
    int64_t out;
    int bias;
} linear_case;

static const linear_case linear_cases[] = {
    {2, {1, 7, 0}, 13, 1},
    {2, {5, 13, 0}, 7, 0},
    {3, {2, 3, 11}, 5, 1},
    {2, {64, 37, 0}, 17, 1},
    {3, {3, 5, 1}, 1, 0}, /* one input feature, one output */
    {2, {5, 97, 0}, 70, 1}, /* few rows, wide: dx computed transposed */
    {3, {2, 3, 101}, 66, 0}, /* likewise, rows from two leading dimensions */
};
#define N_LINEAR_CASES ((int)(sizeof linear_cases / sizeof linear_cases[0]))

static void linear_make(one_op *o, const linear_case *k) {
    sf_shape s = sf_shape_make(k->ndim, k->d);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = k->out;
    p.linear.bias = k->bias;
    one_op_make(o, SF_OP_LINEAR, &s, &p);
}

static void test_linear_tiles_fast_vs_ref(void **state) {
    (void)state;
    static const int degs[][5] = {
        {2, 3, 1, 1}, {3, 2, 2, 1}, {1, 5, 3, 1}, {4, 1, 1, 1}, {1, 1, 2, 1},
    };
    for (int i = 0; i < N_LINEAR_CASES; i++) {
        one_op o;
        linear_make(&o, &linear_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 400 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_linear_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_LINEAR_CASES; i++) {
        one_op o;
        linear_make(&o, &linear_cases[i]);
        check_gradients_fd(&o, linear_fwd_d, 500 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* ---- accumulation and the dispatcher ----------------------------------- */

/* Backward twice gives twice the gradients of once, input and weights alike. */
static void check_accumulates(const one_op *o, uint64_t seed) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    float *x = falloc(o->n_in), *w = falloc(o->n_w), *dy = falloc(o->n_out);
    fill_random(&rng, x, o->n_in);
    fill_random(&rng, w, o->n_w);
    fill_random(&rng, dy, o->n_out);
    sf_tile t = sf_tile_full(&o->op->space);
    for (int fast = 0; fast < 2; fast++) {
        float *dw1 = falloc(o->n_w), *dw2 = falloc(o->n_w);
        tile_run once, twice;
        tile_run_init(&once, o->op, &t, x, w, dy, dw1);
        tile_run_init(&twice, o->op, &t, x, w, dy, dw2);
        assert_int_equal(sf_kernel_backward(&once.a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&twice.a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&twice.a, fast), SF_OK);
        for (int64_t i = 0; i < o->n_w; i++) dw1[i] *= 2.0f;
        for (int64_t i = 0; i < o->n_in; i++) once.dx[i] *= 2.0f;
        assert_true(rel_err(dw2, dw1, o->n_w) < 1e-5);
        assert_true(rel_err(twice.dx, once.dx, o->n_in) < 1e-5);
        /* not wanted: NULL grad_in and grad_weights are left alone */
        once.a.grad_in = NULL;
        once.a.grad_weights = NULL;
        assert_int_equal(sf_kernel_backward(&once.a, fast), SF_OK);
        tile_run_free(&once);
        tile_run_free(&twice);
        free(dw1);
        free(dw2);
    }
    free(x);
    free(w);
    free(dy);
}

static void test_accumulation(void **state) {
    (void)state;
    one_op o;
    conv_make(&o, &conv_cases[2]);
    check_accumulates(&o, 600);
    sf_graph_free(o.g);
    conv_make(&o, &conv_cases[13]); /* direct kernels */
    check_accumulates(&o, 602);
    sf_graph_free(o.g);
    linear_make(&o, &linear_cases[2]);
    check_accumulates(&o, 601);
    sf_graph_free(o.g);
}

static void test_dispatch_checks(void **state) {
    (void)state;
    assert_int_equal(sf_kernel_forward(NULL, 1), SF_ERR_INVALID);
    assert_true(sf_kernel_available(SF_OP_CONV2D, 0) && sf_kernel_available(SF_OP_CONV2D, 1));
    assert_true(sf_kernel_available(SF_OP_LINEAR, 0) && sf_kernel_available(SF_OP_LINEAR, 1));
    assert_int_equal(sf_kernel_available(SF_OP_COUNT, 1), 0);

    one_op o;
    conv_make(&o, &conv_cases[0]);
    sf_rng rng;
    sf_rng_seed(&rng, 7);
    float *x = falloc(o.n_in), *w = falloc(o.n_w), *dy = falloc(o.n_out);
    fill_random(&rng, x, o.n_in);
    fill_random(&rng, w, o.n_w);
    sf_tile t = partition_tile(&o.op->space, (int[]){1, 2, 2, 1, 1}, 1);
    tile_run tr;
    tile_run_init(&tr, o.op, &t, x, w, dy, NULL);
    assert_true(sf_kernel_workspace_bytes(o.op, &t, 0) > 0);
    assert_int_equal(sf_kernel_forward(&tr.a, 1), SF_OK);

    sf_kernel_args bad = tr.a;
    sf_tile wrong = tr.r;
    wrong.hi[2] += 1; /* a region that is not the tile's */
    bad.in_region = &wrong;
    assert_int_equal(sf_kernel_forward(&bad, 0), SF_ERR_INVALID);
    bad = tr.a;
    bad.workspace_bytes = 4; /* too small */
    assert_int_equal(sf_kernel_forward(&bad, 1), SF_ERR_INVALID);
    bad = tr.a;
    bad.weights = NULL;
    assert_int_equal(sf_kernel_forward(&bad, 1), SF_ERR_INVALID);
    bad = tr.a;
    bad.out = NULL;
    assert_int_equal(sf_kernel_forward(&bad, 1), SF_ERR_INVALID);
    bad = tr.a;
    bad.grad_out = NULL;
    assert_int_equal(sf_kernel_backward(&bad, 1), SF_ERR_INVALID);
    bad = tr.a;
    bad.tile.hi[3] = o.op->space.d[3] + 1; /* outside the parallel space */
    assert_int_equal(sf_kernel_forward(&bad, 1), SF_ERR_INVALID);
    bad = tr.a;
    bad.n_inputs = 2;
    assert_int_equal(sf_kernel_forward(&bad, 1), SF_ERR_INVALID);

    /* an operator without kernels: the graph's input, while it has none */
    const sf_op *in_op = sf_graph_op(o.g, 0);
    if (!sf_kernel_available(in_op->type, 0)) {
        bad = tr.a;
        bad.op = in_op;
        assert_int_equal(sf_kernel_forward(&bad, 0), SF_ERR_UNSUPPORTED);
    }
    tile_run_free(&tr);
    free(x);
    free(w);
    free(dy);
    sf_graph_free(o.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_tiles_fast_vs_ref),
        cmocka_unit_test(test_conv_forward_vs_double),
        cmocka_unit_test(test_conv_big_tiles),
        cmocka_unit_test(test_conv_gradients_fd),
        cmocka_unit_test(test_conv_workspace_bounds),
        cmocka_unit_test(test_linear_tiles_fast_vs_ref),
        cmocka_unit_test(test_linear_gradients_fd),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_dispatch_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
