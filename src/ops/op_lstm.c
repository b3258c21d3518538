/*
 * op_lstm.c - one LSTM layer over a whole sequence, batch first (PyTorch gate order).
 *
 * Inputs x (N, T, I) and optionally both initial states h0 (N, H) and c0 (N, H)
 * (zero when absent, so 1 or 3 inputs). Outputs y (N, T, H), the final hidden
 * state hT (N, H) and the final cell state cT (N, H). Weights: W_ih (4H, I),
 * W_hh (4H, H) and PyTorch's two bias vectors b_ih, b_hh (4H each), so a layer
 * has 4H(I + H) + 8H parameters, exactly what torch.nn.LSTM counts: weight_ih_l0,
 * weight_hh_l0, bias_ih_l0 and bias_hh_l0, every one U(+-1/sqrt(H)).
 *
 * Everything but the cell is op_rnn.c's, shared with gru: the parallel space
 * (only N splits; why T and H cannot is told there), the regions, cost, memory,
 * parameters and the kernels' loops and products.
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemm
 * 2 * n * 4h * (I + H), plus LSTM_EW_FLOPS elementwise operations per hidden unit
 * (two bias adds per gate folded in with three sigmoids, two tanh, and the cell
 * and hidden updates: about ten). Backward: twice the gemm plus the same
 * elementwise count. The gates (4 per unit) and cell state of every step are
 * written forward and read back in the backward pass.
 *
 * The cell, gate order i, f, g, o within each block of 4H rows: one projection
 * buffer, gates (n, T, 4H) = x_t W_ih^T + h_{t-1} W_hh^T + b_ih + b_hh, turned
 * into the activations; i, f, o = sigmoid, g = tanh; c_t = f c_{t-1} + i g;
 * h_t = o tanh(c_t). Backward turns each step's gates into the pre-activation
 * gradients dA in place; dh is then replaced by dA W_hh.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define LSTM_EW_FLOPS 10.0 /* elementwise operations per hidden unit per step */

static const sf_attr_desc lstm_attrs[] = {
    {.name = "hidden", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, lstm.hidden)},
};

static void lstm_defaults(sf_op_params *p) { p->lstm.hidden = 0; }

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

/* Step t: gates[:, t] become activations, and c_t, h_t are written into cs, hs
 * (slot t + 1). */
static void lstm_cell_forward(const sf_rnn_geom *g, const sf_rnn_ws *w, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *ga = w->proj[0] + (n * T + t) * 4 * H;
        const float *cp = w->state[1] + n * srow + t * H;
        float *c = w->state[1] + n * srow + (t + 1) * H, *h = w->state[0] + n * srow + (t + 1) * H;
        for (int64_t u = 0; u < H; u++) {
            float i = sigmoidf(ga[u]), f = sigmoidf(ga[H + u]);
            float gg = tanhf(ga[2 * H + u]), o = sigmoidf(ga[3 * H + u]);
            ga[u] = i;
            ga[H + u] = f;
            ga[2 * H + u] = gg;
            ga[3 * H + u] = o;
            c[u] = f * cp[u] + i * gg;
            h[u] = o * tanhf(c[u]);
        }
    }
}

/* The adjoint of step t: with dh (n, H) = dL/dh_t from later steps and dc the
 * same for c_t, adds dy[:, t] to dh, turns gates[:, t] into dL/d(pre-activation)
 * and leaves in dc the gradient for c_{t-1}. dh is then stale (op_rnn.c
 * replaces it with dA W_hh). */
static void lstm_cell_backward(const sf_rnn_geom *g, const sf_rnn_ws *w, const float *dy,
                               int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *ga = w->proj[0] + (n * T + t) * 4 * H;
        const float *cp = w->state[1] + n * srow + t * H, *c = w->state[1] + n * srow + (t + 1) * H;
        float *dh = w->dstate[0] + n * H, *dc = w->dstate[1] + n * H;
        for (int64_t u = 0; u < H; u++) {
            float i = ga[u], f = ga[H + u], gg = ga[2 * H + u], o = ga[3 * H + u];
            float tc = tanhf(c[u]);
            float dhv = dh[u] + (dy ? dy[(n * T + t) * H + u] : 0.0f);
            float dcv = dc[u] + dhv * o * (1.0f - tc * tc);
            ga[u] = dcv * gg * i * (1.0f - i);
            ga[H + u] = dcv * cp[u] * f * (1.0f - f);
            ga[2 * H + u] = dcv * i * (1.0f - gg * gg);
            ga[3 * H + u] = dhv * tc * o * (1.0f - o);
            dc[u] = dcv * f;
        }
    }
}

static const sf_rnn_cell lstm_cell = {
    .gates = 4,
    .n_proj = 1,
    .n_states = 2, /* h, c */
    .dh_direct = 0,
    .ew_flops = LSTM_EW_FLOPS,
    .saved_per_unit = 5, /* the four gates and the cell state */
    .inputs = "x alone or x, h0 and c0 (1 or 3 inputs)",
    .forward = lstm_cell_forward,
    .backward = lstm_cell_backward,
};

static sf_status lstm_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                            int *n_out, sf_error *err) {
    return sf_rnn_infer(&lstm_cell, p->lstm.hidden, in, n_in, out, n_out, err);
}

static int64_t lstm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return sf_rnn_param_count(&lstm_cell, p->lstm.hidden, in[0].d[2]);
}

/* The callbacks that need the cell: op_rnn.c's, given this one. */
static void lstm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    sf_rnn_cost(&lstm_cell, op, t, c);
}

static void lstm_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    sf_rnn_memory(&lstm_cell, op, t, m);
}

static int lstm_param_descs(const sf_op *op, sf_param_desc *out) {
    return sf_rnn_param_descs(&lstm_cell, op, out);
}

static size_t lstm_workspace(const sf_op *op, const sf_tile *t, int backward) {
    return sf_rnn_workspace(&lstm_cell, op, t, backward);
}

static sf_status lstm_fwd_ref(const sf_kernel_args *a) { return sf_rnn_fwd(&lstm_cell, a, 0); }
static sf_status lstm_fwd_fast(const sf_kernel_args *a) { return sf_rnn_fwd(&lstm_cell, a, 1); }
static sf_status lstm_bwd_ref(const sf_kernel_args *a) { return sf_rnn_bwd(&lstm_cell, a, 0); }
static sf_status lstm_bwd_fast(const sf_kernel_args *a) { return sf_rnn_bwd(&lstm_cell, a, 1); }

/* Saves its inputs and outputs (and the gates, sf_rnn_memory), as cuDNN's
 * reserve space keeps what its backward reads. */
static unsigned lstm_saves(const sf_op *op) {
    (void)op;
    return SF_SAVES_ALL_INPUTS | SF_SAVES_OUTPUT;
}

const sf_op_class sf_op_lstm_class = {
    .type = SF_OP_LSTM,
    .name = "lstm",
    .min_inputs = 1,
    .max_inputs = 3,
    .attrs = lstm_attrs,
    .n_attrs = (int)(sizeof lstm_attrs / sizeof lstm_attrs[0]),
    .defaults = lstm_defaults,
    .infer = lstm_infer,
    .param_count = lstm_params,
    .space = sf_rnn_space,
    .region = sf_rnn_region,
    .out_tile = sf_rnn_out_tile,
    .out_axes = sf_rnn_out_axes,
    .cost = lstm_cost,
    .saves = lstm_saves,
    .memory = lstm_memory,
    .param_descs = lstm_param_descs,
    .fwd_ref = lstm_fwd_ref,
    .fwd_fast = lstm_fwd_fast,
    .bwd_ref = lstm_bwd_ref,
    .bwd_fast = lstm_bwd_fast,
    .workspace = lstm_workspace,
};
