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
 */
#include <stddef.h>

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
};
