/*
 * op_lstm.c - one LSTM layer over a whole sequence, batch first (PyTorch gate order).
 *
 * Inputs x (N, T, I) and optionally both initial states h0 (N, H) and c0 (N, H)
 * (zero when absent, so 1 or 3 inputs). Outputs y (N, T, H), the final hidden
 * state hT (N, H) and the final cell state cT (N, H). Weights: W_ih (4H, I),
 * W_hh (4H, H) and PyTorch's two bias vectors b_ih, b_hh (4H each), so a layer
 * has 4H(I + H) + 8H parameters, exactly what torch.nn.LSTM counts.
 *
 * Parallel space: y (N, T, H). N is the sample dimension. T cannot be split
 * inside one operator: step t needs h(t-1), so the steps are sequential; FlexFlow
 * gets parallelism across time by unrolling the RNN into one operator per chunk
 * of steps (models do that), not by splitting T here. H cannot be split either
 * (SF_DIM_NONE), although it looks like a parameter dimension: a part owning
 * the gate rows of its hidden units computes their gates and cell state alone,
 * but the recurrent product W_hh h(t-1) needs the *whole* previous h, produced
 * by the other parts at step t-1. That is an all-gather of h after every step,
 * which neither a kernel call (one call runs every step) nor the task graph
 * (whose transfers are regions of operator inputs, once per iteration) can
 * express, and which the simulator never priced. Recomputing every unit in each
 * part is no way out: the weight gradients would land on rows the part does not
 * own. It was a parameter dimension until the runtime had to execute what the
 * planner offers (the `model` baseline split rnnlm's LSTMs 16 ways on H, which
 * the kernels refuse); splitting H end to end would need that per-step exchange
 * in the task graph, the simulator and the runtime. So the only split is N, and
 * the weights are never sharded, only replicated. The regions: all of x's
 * features, all of h0 and c0, for the tile's samples.
 *
 * Every tile reads and accumulates into all the weights (the default
 * sf_op_weight_slices). The parameter tensors are torch.nn.LSTM's for one layer,
 * weight_ih_l0 (4H, I), weight_hh_l0 (4H, H), bias_ih_l0 and bias_hh_l0 (4H),
 * every one U(+-1/sqrt(H)).
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemm
 * 2 * n * 4h * (I + H), plus LSTM_EW_FLOPS elementwise operations per hidden unit
 * (two bias adds per gate folded in with three sigmoids, two tanh, and the cell
 * and hidden updates: about ten). Backward: twice the gemm (input and weight
 * gradients) plus the same elementwise count.
 *
 * Kernels (buffers in soapflow/kernels.h). Weights, PyTorch's layout, gate order
 * i, f, g, o within each block of 4H rows:
 *   W_ih (4H, I), then W_hh (4H, H), then b_ih (4H), then b_hh (4H).
 * Per step, gates (n, 4H) = x_t W_ih^T + h_{t-1} W_hh^T + b_ih + b_hh;
 * i, f, o = sigmoid, g = tanh; c_t = f c_{t-1} + i g; h_t = o tanh(c_t).
 *
 * Supported tiles: an N range with the whole of T and of H, which is every tile
 * of the space. A tile with a part of H or of T (outside the space, see above:
 * the exchange of h, and final states that would not be hT and cT) returns
 * SF_ERR_UNSUPPORTED from both kernels.
 *
 * Workspace (floats), forward: gates (n, T, 4H) (activated), the hidden states
 * hs (n, T+1, H) with hs[:, 0] = h0 and the cell states cs (n, T+1, H) with
 * cs[:, 0] = c0. Backward recomputes that forward into the same buffers (the
 * outputs are not trusted to be there), then runs back through time, turning
 * each step's gates into the pre-activation gradients dA in place, with three
 * more (n, H) buffers: dh and dc carried to the previous step, and the next dh.
 * The fast kernel projects the inputs of every step in one SGEMM forward and
 * takes dx, dW_ih (one SGEMM each over all steps) and dW_hh (one per sample)
 * after the time loop; only the recurrent products are per step. The reference
 * kernel does the same with loops, element by element. The pointwise cell (its
 * forward and adjoint) is shared by both: it holds no product to get wrong in
 * the fast path, and the finite-difference tests check it.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define LSTM_EW_FLOPS 10.0 /* elementwise operations per hidden unit per step */

static const sf_attr_desc lstm_attrs[] = {
    {.name = "hidden", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, lstm.hidden)},
};

static void lstm_defaults(sf_op_params *p) { p->lstm.hidden = 0; }

static sf_status lstm_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                            int *n_out, sf_error *err) {
    int64_t h = p->lstm.hidden;
    if (h < 1)
        return sf_error_set(err, SF_ERR_INVALID, "hidden must be >= 1, got %lld", (long long)h);
    if (n_in != 1 && n_in != 3)
        return sf_error_set(err, SF_ERR_INVALID,
                            "takes x alone or x, h0 and c0 (1 or 3 inputs), got %d", n_in);
    if (in[0].ndim != 3)
        return sf_error_set(err, SF_ERR_SHAPE, "input x must be 3-D (N, T, I), got %d-D",
                            in[0].ndim);
    int64_t n = in[0].d[0];
    for (int i = 1; i < n_in; i++) {
        const char *nm = i == 1 ? "h0" : "c0";
        if (in[i].ndim != 2 || in[i].d[0] != n || in[i].d[1] != h)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "%s must be (N, H) = (%lld, %lld), got %d-D %lldx%lld", nm,
                                (long long)n, (long long)h, in[i].ndim,
                                (long long)(in[i].ndim > 0 ? in[i].d[0] : 0),
                                (long long)(in[i].ndim > 1 ? in[i].d[1] : 0));
    }
    out[0] = sf_shape_make(3, (int64_t[]){n, in[0].d[1], h});
    out[1] = sf_shape_make(2, (int64_t[]){n, h});
    out[2] = out[1];
    *n_out = 3;
    return SF_OK;
}

static int64_t lstm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    int64_t h = p->lstm.hidden, i = in[0].d[2];
    return sf_count_add(sf_count_mul(sf_count_mul(4, h), sf_count_add(i, h)), sf_count_mul(8, h));
}

static void lstm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_NONE;
    kinds[2] = SF_DIM_NONE; /* the exchange of h each step: see the header */
}

static void lstm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    const sf_shape *in = &op->in_shapes[input];
    *r = sf_tile_full(in);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    if (input == 2) { /* c0: the tile's own hidden units (all of them: H is never split) */
        r->lo[1] = t->lo[2];
        r->hi[1] = t->hi[2];
    }
}

static void lstm_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o) {
    if (output == 0) {
        *o = *t;
        return;
    }
    memset(o, 0, sizeof *o);
    if (output < 0 || output >= op->n_outputs) return;
    o->ndim = 2; /* hT, cT: (N, H) */
    o->lo[0] = t->lo[0];
    o->hi[0] = t->hi[0];
    o->lo[1] = t->lo[2];
    o->hi[1] = t->hi[2];
}

/* y is the space itself; hT and cT (N, H) follow the space's N and H. */
static int lstm_out_axes(const sf_op *op, int output, int *axis, int64_t *shift) {
    (void)op;
    static const int y_axes[3] = {0, 1, 2}, state_axes[2] = {0, 2};
    const int *a = output == 0 ? y_axes : state_axes;
    int nd = output == 0 ? 3 : 2;
    for (int e = 0; e < nd; e++) {
        axis[e] = a[e];
        shift[e] = 0;
    }
    return 1;
}

static void lstm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    double n = (double)(t->hi[0] - t->lo[0]), steps = (double)(t->hi[1] - t->lo[1]);
    double h = (double)(t->hi[2] - t->lo[2]);
    double fan_in = (double)(op->in_shapes[0].d[2] + op->params.lstm.hidden); /* I + H */
    double gemm = 2 * n * 4 * h * fan_in * steps;
    double ew = LSTM_EW_FLOPS * n * h * steps;
    cost->flops_fwd = gemm + ew;
    cost->flops_bwd = 2 * gemm + ew;
    double in_b = 0, out_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        lstm_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        lstm_out_tile(op, t, k, &o);
        out_b += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    /* the gates (4 per unit) and cell state of every step are written forward
     * and read back in the backward pass */
    double saved_b = 5 * n * h * steps * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b + saved_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + saved_b;
}

/* torch.nn.LSTM(I, H) of one layer: every tensor U(+-1/sqrt(H)). No
 * weight_slices: H is never split, every tile uses all the weights. */
static int lstm_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t h = op->params.lstm.hidden, i = op->in_shapes[0].d[2], g = 4 * h;
    double bound = 1.0 / sqrt((double)h);
    out[0] = sf_param_make("weight_ih_l0", 2, (int64_t[]){g, i}, 0, SF_INIT_UNIFORM, bound);
    out[1] = sf_param_make("weight_hh_l0", 2, (int64_t[]){g, h}, g * i, SF_INIT_UNIFORM, bound);
    out[2] = sf_param_make("bias_ih_l0", 1, (int64_t[]){g}, g * (i + h), SF_INIT_UNIFORM, bound);
    out[3] =
        sf_param_make("bias_hh_l0", 1, (int64_t[]){g}, g * (i + h) + g, SF_INIT_UNIFORM, bound);
    return 4;
}

static void lstm_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        lstm_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    /* four gates and the cell state per step and unit, kept for backward */
    m->saved_bytes += 5.0 * (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        lstm_out_tile(op, t, k, &o);
        m->output_bytes += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
}

/* ---- kernels ----------------------------------------------------------- */

typedef struct lstm_geom {
    int64_t n, steps, in, hid; /* tile samples, steps T, input features I, hidden H */
    int has_state;             /* h0 and c0 are inputs */
    int whole;                 /* the tile covers all of T and H (else unsupported) */
} lstm_geom;

static void lstm_geom_init(const sf_op *op, const sf_tile *t, lstm_geom *g) {
    g->n = t->hi[0] - t->lo[0];
    g->steps = op->in_shapes[0].d[1];
    g->in = op->in_shapes[0].d[2];
    g->hid = op->params.lstm.hidden;
    g->has_state = op->n_inputs == 3;
    g->whole = t->lo[1] == 0 && t->hi[1] == g->steps && t->lo[2] == 0 && t->hi[2] == g->hid;
}

/* Floats of the forward workspace (gates, hs, cs) and of the backward extras. */
static int64_t lstm_ws_fwd(const lstm_geom *g) {
    return g->n * g->steps * 4 * g->hid + 2 * g->n * (g->steps + 1) * g->hid;
}

static size_t lstm_workspace(const sf_op *op, const sf_tile *t, int backward) {
    lstm_geom g;
    lstm_geom_init(op, t, &g);
    int64_t floats = lstm_ws_fwd(&g) + (backward ? 3 * g.n * g.hid : 0);
    return (size_t)floats * sizeof(float);
}

/* The named pieces of the workspace. */
typedef struct lstm_ws {
    float *gates;             /* (n, T, 4H): activated i, f, g, o; backward: dA in place */
    float *hs;                /* (n, T+1, H) */
    float *cs;                /* (n, T+1, H) */
    float *dh, *dc, *dh_next; /* (n, H) each, backward only */
} lstm_ws;

static lstm_ws lstm_ws_carve(const lstm_geom *g, void *workspace, int backward) {
    float *p = workspace;
    lstm_ws w = {0};
    w.gates = p;
    p += g->n * g->steps * 4 * g->hid;
    w.hs = p;
    p += g->n * (g->steps + 1) * g->hid;
    w.cs = p;
    p += g->n * (g->steps + 1) * g->hid;
    if (backward) {
        w.dh = p;
        w.dc = p + g->n * g->hid;
        w.dh_next = p + 2 * g->n * g->hid;
    }
    return w;
}

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

/* hs[:, 0] = h0, cs[:, 0] = c0, or zeros without initial states. */
static void lstm_init_state(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    const int64_t H = g->hid, srow = (g->steps + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *h = w->hs + n * srow, *c = w->cs + n * srow;
        if (g->has_state) {
            memcpy(h, a->in[1] + n * H, (size_t)H * sizeof *h);
            memcpy(c, a->in[2] + n * H, (size_t)H * sizeof *c);
        } else {
            memset(h, 0, (size_t)H * sizeof *h);
            memset(c, 0, (size_t)H * sizeof *c);
        }
    }
}

/* Step t of the cell: pre-activations of gates[:, t] become activations, and
 * c_t, h_t are written into cs, hs (slot t + 1). */
static void lstm_cell_forward(const lstm_geom *g, const lstm_ws *w, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *ga = w->gates + (n * T + t) * 4 * H;
        const float *cp = w->cs + n * srow + t * H;
        float *c = w->cs + n * srow + (t + 1) * H, *h = w->hs + n * srow + (t + 1) * H;
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
 * and leaves in dc the gradient for c_{t-1}. dh is then stale (the caller
 * replaces it with dA W_hh). */
static void lstm_cell_backward(const lstm_geom *g, const lstm_ws *w, const float *dy, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *ga = w->gates + (n * T + t) * 4 * H;
        const float *cp = w->cs + n * srow + t * H, *c = w->cs + n * srow + (t + 1) * H;
        float *dh = w->dh + n * H, *dc = w->dc + n * H;
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

/* Forward into the workspace, element by element. */
static void lstm_run_ref(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = 4 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    const float *x = a->in[0];
    lstm_init_state(a, g, w);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t n = 0; n < g->n; n++) {
            const float *xt = x + (n * T + t) * I, *hp = w->hs + n * srow + t * H;
            float *ga = w->gates + (n * T + t) * G;
            for (int64_t j = 0; j < G; j++) {
                float acc = bih[j] + bhh[j];
                for (int64_t k = 0; k < I; k++) acc += wih[j * I + k] * xt[k];
                for (int64_t k = 0; k < H; k++) acc += whh[j * H + k] * hp[k];
                ga[j] = acc;
            }
        }
        lstm_cell_forward(g, w, t);
    }
}

/* Forward into the workspace: the input projection of all steps in one SGEMM,
 * then one recurrent SGEMM per step. */
static void lstm_run_fast(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = 4 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    lstm_init_state(a, g, w);
    for (int64_t r = 0; r < g->n * T; r++)
        for (int64_t j = 0; j < G; j++) w->gates[r * G + j] = bih[j] + bhh[j];
    sf_sgemm(0, 1, g->n * T, G, I, 1.0f, a->in[0], I, wih, I, 1.0f, w->gates, G);
    for (int64_t t = 0; t < T; t++) {
        /* gates[:, t] (n, 4H), row stride T*4H; h_{t-1} = hs[:, t], row stride (T+1)*H */
        sf_sgemm(0, 1, g->n, G, H, 1.0f, w->hs + t * H, srow, whh, H, 1.0f, w->gates + t * G,
                 T * G);
        lstm_cell_forward(g, w, t);
    }
}

/* y, hT, cT from the workspace. */
static void lstm_write_outputs(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        memcpy(a->out[0] + n * T * H, w->hs + n * srow + H, (size_t)(T * H) * sizeof(float));
        memcpy(a->out[1] + n * H, w->hs + n * srow + T * H, (size_t)H * sizeof(float));
        memcpy(a->out[2] + n * H, w->cs + n * srow + T * H, (size_t)H * sizeof(float));
    }
}

static sf_status lstm_fwd_ref(const sf_kernel_args *a) {
    lstm_geom g;
    lstm_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    lstm_ws w = lstm_ws_carve(&g, a->workspace, 0);
    lstm_run_ref(a, &g, &w);
    lstm_write_outputs(a, &g, &w);
    return SF_OK;
}

static sf_status lstm_fwd_fast(const sf_kernel_args *a) {
    lstm_geom g;
    lstm_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    lstm_ws w = lstm_ws_carve(&g, a->workspace, 0);
    lstm_run_fast(a, &g, &w);
    lstm_write_outputs(a, &g, &w);
    return SF_OK;
}

/* dh = dhT, dc = dcT (zero when no gradient is given). */
static void lstm_bwd_init(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    size_t bytes = (size_t)(g->n * g->hid) * sizeof(float);
    if (a->grad_out[1]) memcpy(w->dh, a->grad_out[1], bytes);
    else memset(w->dh, 0, bytes);
    if (a->grad_out[2]) memcpy(w->dc, a->grad_out[2], bytes);
    else memset(w->dc, 0, bytes);
}

/* dh0 += dh, dc0 += dc after the time loop, when wanted. */
static void lstm_bwd_state(const sf_kernel_args *a, const lstm_geom *g, const lstm_ws *w) {
    if (!g->has_state || !a->grad_in) return;
    const int64_t nh = g->n * g->hid;
    if (a->grad_in[1])
        for (int64_t e = 0; e < nh; e++) a->grad_in[1][e] += w->dh[e];
    if (a->grad_in[2])
        for (int64_t e = 0; e < nh; e++) a->grad_in[2][e] += w->dc[e];
}

/* Back through time, element by element; then dx, dW, db from the dA of all
 * steps (in gates) by loops. */
static sf_status lstm_bwd_ref(const sf_kernel_args *a) {
    lstm_geom g;
    lstm_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    const int64_t H = g.hid, I = g.in, T = g.steps, G = 4 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *x = a->in[0];
    lstm_ws w = lstm_ws_carve(&g, a->workspace, 1);
    lstm_run_ref(a, &g, &w);
    lstm_bwd_init(a, &g, &w);
    for (int64_t t = T - 1; t >= 0; t--) {
        lstm_cell_backward(&g, &w, a->grad_out[0], t);
        for (int64_t n = 0; n < g.n; n++) { /* dh_{t-1} = dA_t W_hh */
            const float *da = w.gates + (n * T + t) * G;
            for (int64_t k = 0; k < H; k++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < G; j++) acc += da[j] * whh[j * H + k];
                w.dh[n * H + k] = acc;
            }
        }
    }
    lstm_bwd_state(a, &g, &w);
    float *dx = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    float *dwih = dw, *dwhh = dw ? dw + G * I : NULL;
    float *dbih = dw ? dw + G * (I + H) : NULL, *dbhh = dw ? dbih + G : NULL;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t t = 0; t < T; t++) {
            const float *da = w.gates + (n * T + t) * G, *xt = x + (n * T + t) * I;
            const float *hp = w.hs + n * srow + t * H;
            for (int64_t j = 0; j < G; j++) {
                float d = da[j];
                if (dx)
                    for (int64_t k = 0; k < I; k++) dx[(n * T + t) * I + k] += d * wih[j * I + k];
                if (dw) {
                    for (int64_t k = 0; k < I; k++) dwih[j * I + k] += d * xt[k];
                    for (int64_t k = 0; k < H; k++) dwhh[j * H + k] += d * hp[k];
                    dbih[j] += d;
                    dbhh[j] += d;
                }
            }
        }
    return SF_OK;
}

static sf_status lstm_bwd_fast(const sf_kernel_args *a) {
    lstm_geom g;
    lstm_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    const int64_t H = g.hid, I = g.in, T = g.steps, G = 4 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I;
    lstm_ws w = lstm_ws_carve(&g, a->workspace, 1);
    lstm_run_fast(a, &g, &w);
    lstm_bwd_init(a, &g, &w);
    for (int64_t t = T - 1; t >= 0; t--) {
        lstm_cell_backward(&g, &w, a->grad_out[0], t);
        /* dh_{t-1} (n, H) = dA_t (n, 4H; row stride T*4H) W_hh (4H, H) */
        sf_sgemm(0, 0, g.n, H, G, 1.0f, w.gates + t * G, T * G, whh, H, 0.0f, w.dh_next, H);
        float *tmp = w.dh;
        w.dh = w.dh_next;
        w.dh_next = tmp;
    }
    lstm_bwd_state(a, &g, &w);
    float *dx = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    /* dA of all steps: (n*T, 4H) */
    if (dx) sf_sgemm(0, 0, g.n * T, I, G, 1.0f, w.gates, G, wih, I, 1.0f, dx, I);
    if (dw) {
        sf_sgemm(1, 0, G, I, g.n * T, 1.0f, w.gates, G, a->in[0], I, 1.0f, dw, I);
        /* dW_hh += sum over steps t of dA_t^T (4H, n) h_{t-1} (n, H): one GEMM per
         * step with the batch as its inner dimension (a GEMM per sample would have
         * an inner dimension of T and stream all of dW_hh n times). dA_t rows are
         * T*4H apart, h_{t-1} rows (hs[n, t]) srow apart. */
        for (int64_t t = 0; t < T; t++)
            sf_sgemm(1, 0, G, H, g.n, 1.0f, w.gates + t * G, T * G, w.hs + t * H, srow, 1.0f,
                     dw + G * I, H);
        float *dbih = dw + G * (I + H), *dbhh = dbih + G;
        for (int64_t r = 0; r < g.n * T; r++)
            for (int64_t j = 0; j < G; j++) {
                dbih[j] += w.gates[r * G + j];
                dbhh[j] += w.gates[r * G + j];
            }
    }
    return SF_OK;
}

/* Saves its inputs and outputs (and the gates, lstm_memory), as cuDNN's
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
    .space = lstm_space,
    .region = lstm_region,
    .out_tile = lstm_out_tile,
    .out_axes = lstm_out_axes,
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
