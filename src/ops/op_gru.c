/*
 * op_gru.c - one GRU layer over a whole sequence, batch first (torch.nn.GRU's
 * gates and formula).
 *
 * Inputs x (N, T, I) and optionally the initial state h0 (N, H) (zero when
 * absent, so 1 or 2 inputs). Outputs y (N, T, H) and the final hidden state hT
 * (N, H). Weights: W_ih (3H, I), W_hh (3H, H) and PyTorch's two bias vectors
 * b_ih, b_hh (3H each), so a layer has 3H(I + H) + 6H parameters, exactly what
 * torch.nn.GRU counts. A stack of layers is one operator per layer, as for lstm.
 *
 * Everything but the cell is op_rnn.c's, shared with lstm: the parallel space
 * (only N splits: T is sequential, H would need an all-gather of h per step;
 * see there), the regions, cost, memory, parameters and the kernels' loops and
 * products.
 *
 * Per step, with gate blocks r, z, n in PyTorch's order (rows [0, H), [H, 2H),
 * [2H, 3H) of the weights):
 *   gi = x_t W_ih^T + b_ih,  gh = h_{t-1} W_hh^T + b_hh          (n, 3H) each
 *   r = sigmoid(gi_r + gh_r),  z = sigmoid(gi_z + gh_z)
 *   n = tanh(gi_n + r * gh_n)           (r multiplies W_hn h + b_hn: torch's form,
 *                                        ONNX's linear_before_reset = 1)
 *   h_t = (1 - z) * n + z * h_{t-1}
 * so the cell takes two projection buffers, gi (the activated r, z, n after the
 * cell) and gh (gh_n kept for backward). Backward turns gi into the gradients
 * of the input projections and gh into those of the recurrent ones (they differ
 * on the n block: d(gh_n) = d(gi_n) * r), and leaves z dh as the direct part of
 * dh_{t-1}.
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemms
 * 2 * n * 3h * (I + H), plus GRU_EW_FLOPS elementwise operations per unit (the
 * bias adds, two sigmoids, a tanh, the reset product and the interpolation:
 * about nine). Backward: twice the gemms plus the same elementwise count.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define GRU_EW_FLOPS 9.0 /* elementwise operations per hidden unit per step */

static const sf_attr_desc gru_attrs[] = {
    {.name = "hidden", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, gru.hidden)},
};

static void gru_defaults(sf_op_params *p) { p->gru.hidden = 0; }

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

/* Step t of the cell: gi[:, t] becomes r, z, n and h_t is written into hs
 * (slot t + 1); gh[:, t] is left as it is (its n block is read backward). */
static void gru_cell_forward(const sf_rnn_geom *g, const sf_rnn_ws *w, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *gi = w->proj[0] + (n * T + t) * 3 * H;
        const float *gh = w->proj[1] + (n * T + t) * 3 * H, *hp = w->state[0] + n * srow + t * H;
        float *h = w->state[0] + n * srow + (t + 1) * H;
        for (int64_t u = 0; u < H; u++) {
            float r = sigmoidf(gi[u] + gh[u]), z = sigmoidf(gi[H + u] + gh[H + u]);
            float nn = tanhf(gi[2 * H + u] + r * gh[2 * H + u]);
            gi[u] = r;
            gi[H + u] = z;
            gi[2 * H + u] = nn;
            h[u] = (1.0f - z) * nn + z * hp[u];
        }
    }
}

/* The adjoint of step t: with dh (n, H) = dL/dh_t from later steps, adds
 * dy[:, t], turns gi[:, t] into dL/d(gi) and gh[:, t] into dL/d(gh), and leaves
 * in dh the direct part z * dh of the gradient for h_{t-1} (op_rnn.c adds
 * dgh W_hh). */
static void gru_cell_backward(const sf_rnn_geom *g, const sf_rnn_ws *w, const float *dy,
                              int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *gi = w->proj[0] + (n * T + t) * 3 * H, *gh = w->proj[1] + (n * T + t) * 3 * H;
        const float *hp = w->state[0] + n * srow + t * H;
        float *dh = w->dstate[0] + n * H;
        for (int64_t u = 0; u < H; u++) {
            float r = gi[u], z = gi[H + u], nn = gi[2 * H + u], hn = gh[2 * H + u];
            float d = dh[u] + (dy ? dy[(n * T + t) * H + u] : 0.0f);
            float dan = d * (1.0f - z) * (1.0f - nn * nn);
            float dar = dan * hn * r * (1.0f - r);
            float daz = d * (hp[u] - nn) * z * (1.0f - z);
            gi[u] = gh[u] = dar;
            gi[H + u] = gh[H + u] = daz;
            gi[2 * H + u] = dan;
            gh[2 * H + u] = dan * r;
            dh[u] = d * z;
        }
    }
}

static const sf_rnn_cell gru_cell = {
    .gates = 3,
    .n_proj = 2,   /* gi, gh */
    .n_states = 1, /* h */
    .dh_direct = 1,
    .ew_flops = GRU_EW_FLOPS,
    .saved_per_unit = 4, /* r, z, n and W_hn h + b_hn */
    .inputs = "x alone or x and h0 (1 or 2 inputs)",
    .forward = gru_cell_forward,
    .backward = gru_cell_backward,
};

static sf_status gru_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                           int *n_out, sf_error *err) {
    return sf_rnn_infer(&gru_cell, p->gru.hidden, in, n_in, out, n_out, err);
}

static int64_t gru_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    return sf_rnn_param_count(&gru_cell, p->gru.hidden, in[0].d[2]);
}

/* The callbacks that need the cell: op_rnn.c's, given this one. */
static void gru_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c) {
    sf_rnn_cost(&gru_cell, op, t, c);
}

static void gru_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    sf_rnn_memory(&gru_cell, op, t, m);
}

static int gru_param_descs(const sf_op *op, sf_param_desc *out) {
    return sf_rnn_param_descs(&gru_cell, op, out);
}

static size_t gru_workspace(const sf_op *op, const sf_tile *t, int backward) {
    return sf_rnn_workspace(&gru_cell, op, t, backward);
}

static sf_status gru_fwd_ref(const sf_kernel_args *a) { return sf_rnn_fwd(&gru_cell, a, 0); }
static sf_status gru_fwd_fast(const sf_kernel_args *a) { return sf_rnn_fwd(&gru_cell, a, 1); }
static sf_status gru_bwd_ref(const sf_kernel_args *a) { return sf_rnn_bwd(&gru_cell, a, 0); }
static sf_status gru_bwd_fast(const sf_kernel_args *a) { return sf_rnn_bwd(&gru_cell, a, 1); }

const sf_op_class sf_op_gru_class = {
    .type = SF_OP_GRU,
    .name = "gru",
    .min_inputs = 1,
    .max_inputs = 2,
    .attrs = gru_attrs,
    .n_attrs = (int)(sizeof gru_attrs / sizeof gru_attrs[0]),
    .defaults = gru_defaults,
    .infer = gru_infer,
    .param_count = gru_params,
    .space = sf_rnn_space,
    .region = sf_rnn_region,
    .out_tile = sf_rnn_out_tile,
    .out_axes = sf_rnn_out_axes,
    .cost = gru_cost,
    .memory = gru_memory,
    .param_descs = gru_param_descs,
    .fwd_ref = gru_fwd_ref,
    .fwd_fast = gru_fwd_fast,
    .bwd_ref = gru_bwd_ref,
    .bwd_fast = gru_bwd_fast,
    .workspace = gru_workspace,
};
