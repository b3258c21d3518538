/*
 * op_unary.c - element-wise activations: relu, sigmoid, tanh, gelu, relu6,
 * leaky_relu, hard_sigmoid, hard_swish.
 *
 * The eight share every callback and differ only in their FLOPs per element (and
 * leaky_relu in its one attribute, the slope alpha below zero, hard_sigmoid in
 * its two, the slope alpha and the offset beta), so one file holds eight
 * classes over one set of static functions. Any rank;
 * the output has the input's shape and a tile needs exactly the same region of
 * the input. Parallel space: dimension 0 is the sample, all others attributes.
 *
 * FLOPs per element (forward / backward), counting exp and tanh as one each:
 *   relu     1 / 1   (max; select the gradient)
 *   sigmoid  4 / 3   (negate, exp, add, divide; g * s * (1 - s))
 *   tanh     5 / 3   (as two exps and a divide; g * (1 - t * t))
 *   gelu     8 / 12  (tanh approximation: cube, 2 mul-adds, tanh, 1 + t, halve, scale;
 *                     the derivative also needs 1 - t * t and the inner derivative)
 *   relu6    2 / 2   (max and min; two compares select the gradient)
 *   leaky    2 / 2   (compare, multiply; compare, multiply)
 *   hsig     3 / 2   (multiply-add, two clamps; compare, select alpha)
 *   hswish   4 / 4   (hard_sigmoid, multiply; compares, multiply-add)
 * Bytes: forward reads the input and writes the output; backward reads the output
 * gradient and the saved input, and writes the input gradient.
 *
 * Kernels (buffers in soapflow/kernels.h): the region is the tile, so input,
 * output and gradients are flat arrays of numel(tile) elements and the position
 * does not matter. Backward recomputes from the input x (always present) rather
 * than reading the forward output, and accumulates dx += dy * f'(x).
 *   relu     f = max(x, 0); f'(0) = 0, as PyTorch
 *   sigmoid  f = 1 / (1 + e^-x)
 *   tanh     f = tanh x
 *   gelu     f = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), the exact form, which is
 *            PyTorch's default nn.GELU() (approximate='none'), so that trained
 *            models and imported ONNX Gelu nodes match; f' = Phi(x) + x * phi(x).
 *            With approximate "tanh" (F.gelu(approximate='tanh'), GPT-2's gelu_new):
 *            f = x/2 * (1 + t), t = tanh(k (x + 0.044715 x^3)), k = sqrt(2 / pi);
 *            f' = (1 + t) / 2 + x/2 * (1 - t^2) * k (1 + 3 * 0.044715 x^2).
 *            (The FLOP counts above, from the tanh approximation, are close enough
 *            for the cost model: erf costs about as much as tanh.)
 *   relu6    f = min(max(x, 0), 6); f' = 1 on (0, 6), else 0 (PyTorch's hardtanh
 *            gradient, which is 0 at both kinks)
 *   leaky    f = x for x > 0, else alpha * x; f' = 1 for x > 0, else alpha
 *            (PyTorch: the slope at 0 is alpha)
 *   hsig     f = min(max(alpha x + beta, 0), 1) (torch's nn.Hardsigmoid: alpha 1/6,
 *            beta 1/2; ONNX HardSigmoid's defaults 0.2, 0.5); f' = alpha where
 *            0 < alpha x + beta < 1, else 0 (torch's: 0 at the kinks)
 *   hswish   f = x * hsig(x) at torch's alpha and beta (nn.Hardswish, ONNX
 *            HardSwish); f' = 0 below -3, x / 3 + 1/2 up to 3 (included, as
 *            torch's hardswish_backward has it), 1 above
 * NaN propagates as in PyTorch, in both kernels: every comparison is written so
 * that a NaN x falls through to x (relu and relu6 are x <= 0 ? 0 : x, as
 * clamp_min and hardtanh give NaN for NaN), their gradients pass dy for a NaN x
 * (threshold_backward and hardtanh_backward zero only where x <= 0 or x >= 6),
 * and the exponential of a NaN is NaN. A NaN weight then makes the loss NaN
 * from the first step, as it does in PyTorch, instead of vanishing in a relu.
 * The reference kernels call libm (expf, tanhf, erff) element by element. Such
 * calls keep a compiler from vectorizing the loop, so the fast kernels evaluate
 * e^x with their own branch-free polynomial (fast_expf: Cody-Waite range
 * reduction, Cephes' degree-7 minimax polynomial, 2^n built in the exponent
 * bits; about 2 ulp; inputs clamped to [-87, 88], so sigmoid(x < -87) is 6e-39,
 * not smaller), tanh from it (a polynomial for |x| < 0.625), and erf with
 * Abramowitz-Stegun 7.1.26 (absolute error below 1.5e-7), over restrict pointers
 * in one contiguous branch-free loop (selects). GCC 12 vectorizes these loops at
 * -O3 with -fno-trapping-math (otherwise it will not if-convert the comparisons);
 * the default -O2 build runs them scalar, still without libm calls.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

static void unary_flops(sf_op_type type, double *fwd, double *bwd) {
    switch (type) {
    case SF_OP_RELU: *fwd = 1, *bwd = 1; break;
    case SF_OP_SIGMOID: *fwd = 4, *bwd = 3; break;
    case SF_OP_TANH: *fwd = 5, *bwd = 3; break;
    case SF_OP_GELU: *fwd = 8, *bwd = 12; break;
    case SF_OP_RELU6: *fwd = 2, *bwd = 2; break;
    case SF_OP_LEAKY_RELU: *fwd = 2, *bwd = 2; break;
    case SF_OP_HARD_SIGMOID: *fwd = 3, *bwd = 2; break;
    case SF_OP_HARD_SWISH: *fwd = 4, *bwd = 4; break;
    default: *fwd = *bwd = 0; break;
    }
}

static sf_status unary_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                             int *n_out, sf_error *err) {
    (void)p;
    (void)n_in;
    if (in[0].ndim < 1)
        return sf_error_set(err, SF_ERR_SHAPE, "input must have at least 1 dimension, got 0");
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void unary_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_ATTRIBUTE;
}

static void unary_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void unary_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    double n = (double)sf_tile_numel(t), fwd, bwd;
    unary_flops(op->type, &fwd, &bwd);
    cost->flops_fwd = fwd * n;
    cost->flops_bwd = bwd * n;
    cost->bytes_fwd = 2 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 3 * n * SF_ELEM_BYTES;
}

/* ---- kernels ----------------------------------------------------------- */

#define SQRT1_2 0.70710678118654752440 /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794

/* hard_swish: x * min(max(x / 6 + 1/2, 0), 1), written as torch's hardswish. */
static inline float hswish_f(float x) {
    return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
}
static inline float hswish_df(float x) {
    return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
}
/* hard_sigmoid: a NaN falls through the clamps to NaN */
static inline float hsig_f(float alpha, float beta, float x) {
    float v = alpha * x + beta;
    return v <= 0.0f ? 0.0f : v >= 1.0f ? 1.0f : v;
}
static inline float hsig_df(float alpha, float beta, float x) {
    float v = alpha * x + beta;
    return v > 0.0f && v < 1.0f ? alpha : 0.0f;
}

/* The reference: f and f' by definition, one element at a time, with libm.
 * alpha is leaky_relu's slope and hard_sigmoid's, beta hard_sigmoid's offset
 * (unused by the others). */
static float unary_ref_f(sf_op_type type, float alpha, float beta, float x) {
    switch (type) {
    case SF_OP_RELU: return x <= 0.0f ? 0.0f : x;
    case SF_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case SF_OP_TANH: return tanhf(x);
    case SF_OP_GELU: return 0.5f * x * (1.0f + erff(x * (float)SQRT1_2));
    case SF_OP_RELU6: return x <= 0.0f ? 0.0f : x >= 6.0f ? 6.0f : x;
    case SF_OP_LEAKY_RELU: return x > 0.0f ? x : alpha * x;
    case SF_OP_HARD_SIGMOID: return hsig_f(alpha, beta, x);
    case SF_OP_HARD_SWISH: return hswish_f(x);
    default: return 0.0f;
    }
}

static float unary_ref_df(sf_op_type type, float alpha, float beta, float x) {
    switch (type) {
    case SF_OP_RELU: return x <= 0.0f ? 0.0f : 1.0f;
    case SF_OP_SIGMOID: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f - s);
    }
    case SF_OP_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case SF_OP_GELU: {
        float cdf = 0.5f * (1.0f + erff(x * (float)SQRT1_2));
        float pdf = (float)INV_SQRT_2PI * expf(-0.5f * x * x);
        return cdf + x * pdf;
    }
    case SF_OP_RELU6: return x <= 0.0f || x >= 6.0f ? 0.0f : 1.0f;
    case SF_OP_LEAKY_RELU: return x > 0.0f ? 1.0f : alpha;
    case SF_OP_HARD_SIGMOID: return hsig_df(alpha, beta, x);
    case SF_OP_HARD_SWISH: return hswish_df(x);
    default: return 0.0f;
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

static int gelu_tanh(const sf_op *op) {
    return op->type == SF_OP_GELU && op->params.gelu.approximate == SF_GELU_TANH;
}

/* The tanh form by definition, with libm (the fast kernels spell it out with
 * their own tanh). */
static float gelu_tanh_f(float x) {
    float t = tanhf((float)GELU_K * (x + (float)GELU_C * x * x * x));
    return 0.5f * x * (1.0f + t);
}
static float gelu_tanh_df(float x) {
    float t = tanhf((float)GELU_K * (x + (float)GELU_C * x * x * x));
    float inner = (float)GELU_K * (1.0f + 3.0f * (float)GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner;
}

static float leaky_alpha(const sf_op *op) {
    return op->type == SF_OP_LEAKY_RELU     ? (float)op->params.leaky_relu.alpha
           : op->type == SF_OP_HARD_SIGMOID ? (float)op->params.hard_sigmoid.alpha
                                            : 0.0f;
}

static float hsig_beta(const sf_op *op) {
    return op->type == SF_OP_HARD_SIGMOID ? (float)op->params.hard_sigmoid.beta : 0.0f;
}

/* y (numel) = f(x) */
static sf_status unary_fwd_ref(const sf_kernel_args *a) {
    int64_t n = sf_tile_numel(&a->tile);
    const float *x = a->in[0];
    float *y = a->out[0];
    float alpha = leaky_alpha(a->op), beta = hsig_beta(a->op);
    if (gelu_tanh(a->op))
        for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh_f(x[i]);
    else
        for (int64_t i = 0; i < n; i++) y[i] = unary_ref_f(a->op->type, alpha, beta, x[i]);
    return SF_OK;
}

/* dx (numel) += dy * f'(x) */
static sf_status unary_bwd_ref(const sf_kernel_args *a) {
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    int64_t n = sf_tile_numel(&a->tile);
    const float *x = a->in[0], *dy = a->grad_out[0];
    float *dx = a->grad_in[0];
    float alpha = leaky_alpha(a->op), beta = hsig_beta(a->op);
    if (gelu_tanh(a->op))
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * gelu_tanh_df(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dx[i] += dy[i] * unary_ref_df(a->op->type, alpha, beta, x[i]);
    return SF_OK;
}

/* e^x without a libm call, so loops over it vectorize. x is clamped to where
 * e^x is a normal float; x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two
 * parts so that r is exact), e^r by Cephes' degree-7 minimax polynomial, and 2^n
 * written into the exponent field. */
static inline float fast_expf(float x_in) {
    /* a NaN goes round the polynomial as 0 (converting it to an integer below
     * is undefined) and comes out as itself, selected at the end */
    float x = x_in == x_in ? x_in : 0.0f;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* n = round(x / ln2) by adding and removing 1.5 * 2^23 (|x / ln2| < 2^22): no
     * conditional conversion, which a vectorizer may not if-convert */
    float fn = x * 1.44269504088896341f;
    fn = (fn + 12582912.0f) - 12582912.0f;
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)fn + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x_in == x_in ? p * scale : x_in;
}

static inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

/* tanh x = sign(x) (1 - 2 / (e^{2|x|} + 1)) for |x| >= 0.625; below, where that
 * form cancels (tanh x ~ x), Cephes' odd minimax polynomial. Both are computed
 * and one selected, so the loop has no branch. */
static inline float fast_tanhf(float x) {
    float ax = x < 0.0f ? -x : x;
    float t = 1.0f - 2.0f / (fast_expf(2.0f * ax) + 1.0f);
    t = x < 0.0f ? -t : t;
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = p * z * x + x;
    return ax < 0.625f ? small : t;
}

/* erf by Abramowitz and Stegun 7.1.26, |error| < 1.5e-7. */
static inline float fast_erff(float x) {
    float ax = x < 0.0f ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = 1.0f - poly * fast_expf(-ax * ax);
    return x < 0.0f ? -e : e;
}

static sf_status unary_fwd_fast(const sf_kernel_args *a) {
    const int64_t n = sf_tile_numel(&a->tile);
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    switch (a->op->type) {
    case SF_OP_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
        break;
    case SF_OP_SIGMOID:
        for (int64_t i = 0; i < n; i++) y[i] = fast_sigmoid(x[i]);
        break;
    case SF_OP_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = fast_tanhf(x[i]);
        break;
    case SF_OP_GELU:
        if (gelu_tanh(a->op))
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                float t = fast_tanhf((float)GELU_K * (v + (float)GELU_C * v * v * v));
                y[i] = 0.5f * v * (1.0f + t);
            }
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = 0.5f * x[i] * (1.0f + fast_erff(x[i] * (float)SQRT1_2));
        break;
    case SF_OP_RELU6:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] <= 0.0f ? 0.0f : x[i];
            y[i] = v >= 6.0f ? 6.0f : v;
        }
        break;
    case SF_OP_LEAKY_RELU: {
        const float alpha = leaky_alpha(a->op);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
        break;
    }
    case SF_OP_HARD_SIGMOID: {
        const float alpha = leaky_alpha(a->op), beta = hsig_beta(a->op);
        for (int64_t i = 0; i < n; i++) y[i] = hsig_f(alpha, beta, x[i]);
        break;
    }
    case SF_OP_HARD_SWISH:
        for (int64_t i = 0; i < n; i++) y[i] = hswish_f(x[i]);
        break;
    default: return SF_ERR_UNSUPPORTED;
    }
    return SF_OK;
}

static sf_status unary_bwd_fast(const sf_kernel_args *a) {
    if (!a->grad_in || !a->grad_in[0]) return SF_OK;
    const int64_t n = sf_tile_numel(&a->tile);
    const float *restrict x = a->in[0];
    const float *restrict dy = a->grad_out[0];
    float *restrict dx = a->grad_in[0];
    switch (a->op->type) {
    case SF_OP_RELU:
        /* a select, not dy * (x > 0 ? 1 : 0): GCC keeps the multiply by zero
         * (it can trap, and -0 and NaN must come out), so it branched on the
         * sign of x, mispredicted half the time on pre-activations; the select
         * compiles to compare-and-mask, vectorized (about 20x faster on
         * LeNet's relu1, bench/RESULTS.md). dy is 0 where x <= 0, as in
         * PyTorch's threshold_backward (x <= 0 ? 0 : dy, so a NaN x passes dy). */
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] += x[i] <= 0.0f ? 0.0f : g;
        }
        break;
    case SF_OP_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float s = fast_sigmoid(x[i]);
            dx[i] += dy[i] * s * (1.0f - s);
        }
        break;
    case SF_OP_TANH:
        for (int64_t i = 0; i < n; i++) {
            float t = fast_tanhf(x[i]);
            dx[i] += dy[i] * (1.0f - t * t);
        }
        break;
    case SF_OP_GELU:
        if (gelu_tanh(a->op)) {
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                float t = fast_tanhf((float)GELU_K * (v + (float)GELU_C * v * v * v));
                float inner = (float)GELU_K * (1.0f + 3.0f * (float)GELU_C * v * v);
                dx[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * inner);
            }
            break;
        }
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float cdf = 0.5f * (1.0f + fast_erff(v * (float)SQRT1_2));
            float pdf = (float)INV_SQRT_2PI * fast_expf(-0.5f * v * v);
            dx[i] += dy[i] * (cdf + v * pdf);
        }
        break;
    case SF_OP_RELU6:
        for (int64_t i = 0; i < n; i++) dx[i] += x[i] <= 0.0f || x[i] >= 6.0f ? 0.0f : dy[i];
        break;
    case SF_OP_LEAKY_RELU: {
        const float alpha = leaky_alpha(a->op);
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * (x[i] > 0.0f ? 1.0f : alpha);
        break;
    }
    case SF_OP_HARD_SIGMOID: {
        const float alpha = leaky_alpha(a->op), beta = hsig_beta(a->op);
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * hsig_df(alpha, beta, x[i]);
        break;
    }
    case SF_OP_HARD_SWISH:
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * hswish_df(x[i]);
        break;
    default: return SF_ERR_UNSUPPORTED;
    }
    return SF_OK;
}

static const sf_attr_desc leaky_relu_attrs[] = {
    {.name = "alpha", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, leaky_relu.alpha)},
};

static void leaky_relu_defaults(sf_op_params *p) { p->leaky_relu.alpha = 0.01; }

static sf_status leaky_relu_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                  sf_shape *out, int *n_out, sf_error *err) {
    if (!isfinite(p->leaky_relu.alpha))
        return sf_error_set(err, SF_ERR_INVALID, "alpha must be a finite number");
    return unary_infer(p, in, n_in, out, n_out, err);
}

static const sf_attr_desc hard_sigmoid_attrs[] = {
    {.name = "alpha", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, hard_sigmoid.alpha)},
    {.name = "beta", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, hard_sigmoid.beta)},
};

/* torch's nn.Hardsigmoid: relu6(x + 3) / 6 */
static void hard_sigmoid_defaults(sf_op_params *p) {
    p->hard_sigmoid.alpha = 1.0 / 6.0;
    p->hard_sigmoid.beta = 0.5;
}

static sf_status hard_sigmoid_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                    sf_shape *out, int *n_out, sf_error *err) {
    if (!isfinite(p->hard_sigmoid.alpha) || !isfinite(p->hard_sigmoid.beta))
        return sf_error_set(err, SF_ERR_INVALID, "alpha (%g) and beta (%g) must be finite numbers",
                            p->hard_sigmoid.alpha, p->hard_sigmoid.beta);
    return unary_infer(p, in, n_in, out, n_out, err);
}

/* What each backward reads (PyTorch's autograd formulas): relu, sigmoid and
 * tanh their output (relu may then run in place over a convolution's or batch
 * norm's output, which nothing else keeps: torchvision's inplace=True), the
 * others their input. */
static unsigned unary_saves(const sf_op *op) {
    switch (op->type) {
    case SF_OP_RELU: return SF_SAVES_OUTPUT | SF_SAVES_IN_PLACE;
    case SF_OP_SIGMOID:
    case SF_OP_TANH: return SF_SAVES_OUTPUT;
    default: return SF_SAVES_INPUT(0);
    }
}

#define SF_UNARY_CLASS(var, type_, name_, attrs_, n_attrs_, defaults_, infer_)                     \
    const sf_op_class var = {                                                                      \
        .type = type_,                                                                             \
        .name = name_,                                                                             \
        .min_inputs = 1,                                                                           \
        .max_inputs = 1,                                                                           \
        .attrs = attrs_,                                                                           \
        .n_attrs = n_attrs_,                                                                       \
        .defaults = defaults_,                                                                     \
        .infer = infer_,                                                                           \
        .space = unary_space,                                                                      \
        .region = unary_region,                                                                    \
        .cost = unary_cost,                                                                        \
        .saves = unary_saves,                                                                      \
        .fwd_ref = unary_fwd_ref,                                                                  \
        .fwd_fast = unary_fwd_fast,                                                                \
        .bwd_ref = unary_bwd_ref,                                                                  \
        .bwd_fast = unary_bwd_fast,                                                                \
    }

SF_UNARY_CLASS(sf_op_relu_class, SF_OP_RELU, "relu", NULL, 0, NULL, unary_infer);
SF_UNARY_CLASS(sf_op_sigmoid_class, SF_OP_SIGMOID, "sigmoid", NULL, 0, NULL, unary_infer);
SF_UNARY_CLASS(sf_op_tanh_class, SF_OP_TANH, "tanh", NULL, 0, NULL, unary_infer);
static const char *const gelu_approx_names[] = {"none", "tanh"};

static const sf_attr_desc gelu_attrs[] = {
    {.name = "approximate",
     .type = SF_ATTR_ENUM,
     .offset = offsetof(sf_op_params, gelu.approximate),
     .enum_names = gelu_approx_names,
     .n_enum = (int)(sizeof gelu_approx_names / sizeof gelu_approx_names[0])},
};

static void gelu_defaults(sf_op_params *p) { p->gelu.approximate = SF_GELU_NONE; }

SF_UNARY_CLASS(sf_op_gelu_class, SF_OP_GELU, "gelu", gelu_attrs,
               (int)(sizeof gelu_attrs / sizeof gelu_attrs[0]), gelu_defaults, unary_infer);
SF_UNARY_CLASS(sf_op_relu6_class, SF_OP_RELU6, "relu6", NULL, 0, NULL, unary_infer);
SF_UNARY_CLASS(sf_op_leaky_relu_class, SF_OP_LEAKY_RELU, "leaky_relu", leaky_relu_attrs,
               (int)(sizeof leaky_relu_attrs / sizeof leaky_relu_attrs[0]), leaky_relu_defaults,
               leaky_relu_infer);
SF_UNARY_CLASS(sf_op_hard_sigmoid_class, SF_OP_HARD_SIGMOID, "hard_sigmoid", hard_sigmoid_attrs,
               (int)(sizeof hard_sigmoid_attrs / sizeof hard_sigmoid_attrs[0]),
               hard_sigmoid_defaults, hard_sigmoid_infer);
SF_UNARY_CLASS(sf_op_hard_swish_class, SF_OP_HARD_SWISH, "hard_swish", NULL, 0, NULL, unary_infer);
