/*
 * op_rnn.c - what lstm (op_lstm.c) and gru (op_gru.c) share: one recurrent layer
 * over a whole sequence, batch first, with PyTorch's weights. Each operator file
 * keeps its class table and its cell (sf_rnn_cell: the gate count, the states,
 * the counts the cost model needs and the pointwise step forward and backward)
 * and passes the cell to this file, which holds the rest, the same for both.
 * (The cell is an argument, not looked up by op->type here, so that no operator
 * file and this one depend on each other: check_cycles.)
 *
 * Inputs x (N, T, I) and optionally every initial state (N, H) (zero when
 * absent): h0 for both, then c0 for lstm. Outputs y (N, T, H) and the final
 * states (N, H) in the same order. Weights, with G = gates * H rows in PyTorch's
 * gate order: W_ih (G, I), then W_hh (G, H), then b_ih (G), then b_hh (G), so a
 * layer has G(I + H) + 2G parameters, exactly what torch counts.
 *
 * Parallel space: y (N, T, H). N is the sample dimension. T cannot be split
 * inside one operator: step t needs h(t-1), so the steps are sequential; FlexFlow
 * gets parallelism across time by unrolling the RNN into one operator per chunk
 * of steps (models do that), not by splitting T here. H cannot be split either
 * (SF_DIM_NONE), although it looks like a parameter dimension: a part owning
 * the gate rows of its hidden units computes their gates and states alone,
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
 * the weights are never sharded, only replicated: every tile reads and
 * accumulates into all of them (the default sf_op_weight_slices). The regions:
 * all of x's features and all of h0 for the tile's samples; c0 for the tile's
 * own hidden units (all of them, H being never split).
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemms
 * 2 * n * G * (I + H), plus the cell's elementwise operations per unit.
 * Backward: twice the gemms (input and weight gradients) plus the same
 * elementwise count.
 *
 * Kernels (buffers in soapflow/kernels.h). Supported tiles: an N range with the
 * whole of T and of H, which is every tile of the space. A tile with a part of H
 * or of T (outside the space, see above: the exchange of h, and final states
 * that would not be the last step's) returns SF_ERR_UNSUPPORTED from every
 * kernel. Workspace (floats), forward: the projections (sf_rnn_ws.proj, one or
 * two (n, T, G) buffers) and the states of every step (n, T+1, H) each, slot 0
 * the initial state. Backward recomputes that forward into the same buffers (the
 * outputs are not trusted to be there), then runs back through time, the cell
 * turning each step's projections into their gradients in place, with one (n, H)
 * gradient per state carried to the previous step and the next dh. The fast
 * kernel projects the inputs of every step in one SGEMM forward and takes dx,
 * dW_ih (one SGEMM each over all steps) and dW_hh (one per step) after the time
 * loop; only the recurrent products are per step. The reference kernel does the
 * same with loops, element by element. The cell is shared by both: it holds no
 * product to get wrong in the fast path, and the finite-difference tests check it.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

/* H, the one attribute, held in each type's own parameters. */
static int64_t rnn_hidden(const sf_op *op) {
    return op->type == SF_OP_GRU ? op->params.gru.hidden : op->params.lstm.hidden;
}

sf_status sf_rnn_infer(const sf_rnn_cell *c, int64_t h, const sf_shape *in, int n_in, sf_shape *out,
                       int *n_out, sf_error *err) {
    if (h < 1)
        return sf_error_set(err, SF_ERR_INVALID, "hidden must be >= 1, got %lld", (long long)h);
    if (n_in != 1 && n_in != 1 + c->n_states)
        return sf_error_set(err, SF_ERR_INVALID, "takes %s, got %d", c->inputs, n_in);
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
    for (int s = 1; s <= c->n_states; s++) out[s] = sf_shape_make(2, (int64_t[]){n, h});
    *n_out = 1 + c->n_states;
    return SF_OK;
}

int64_t sf_rnn_param_count(const sf_rnn_cell *c, int64_t h, int64_t in) {
    int64_t g = sf_count_mul(c->gates, h);
    return sf_count_add(sf_count_mul(g, sf_count_add(in, h)), sf_count_mul(2 * c->gates, h));
}

void sf_rnn_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_NONE;
    kinds[2] = SF_DIM_NONE; /* the exchange of h each step: see the header */
}

void sf_rnn_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    *r = sf_tile_full(&op->in_shapes[input]);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    if (input >= 2) { /* c0: the tile's own hidden units (all of them: H is never split) */
        r->lo[1] = t->lo[2];
        r->hi[1] = t->hi[2];
    }
}

void sf_rnn_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o) {
    if (output == 0) {
        *o = *t;
        return;
    }
    memset(o, 0, sizeof *o);
    if (output < 0 || output >= op->n_outputs) return;
    o->ndim = 2; /* a final state: (N, H) */
    o->lo[0] = t->lo[0];
    o->hi[0] = t->hi[0];
    o->lo[1] = t->lo[2];
    o->hi[1] = t->hi[2];
}

/* y is the space itself; the final states (N, H) follow the space's N and H. */
int sf_rnn_out_axes(const sf_op *op, int output, int *axis, int64_t *shift) {
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

void sf_rnn_cost(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    double n = (double)(t->hi[0] - t->lo[0]), steps = (double)(t->hi[1] - t->lo[1]);
    double h = (double)(t->hi[2] - t->lo[2]);
    double fan_in = (double)(op->in_shapes[0].d[2] + rnn_hidden(op)); /* I + H */
    double gemm = 2 * n * c->gates * h * fan_in * steps;
    double ew = c->ew_flops * n * h * steps;
    cost->flops_fwd = gemm + ew;
    cost->flops_bwd = 2 * gemm + ew;
    double in_b = 0, out_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        sf_rnn_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        sf_rnn_out_tile(op, t, k, &o);
        out_b += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    /* what the cell keeps of every step, written forward and read back */
    double saved_b = c->saved_per_unit * n * h * steps * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b + saved_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + saved_b;
}

void sf_rnn_memory(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        sf_rnn_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    /* what the cell keeps per step and unit for backward */
    m->saved_bytes += c->saved_per_unit * (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        sf_rnn_out_tile(op, t, k, &o);
        m->output_bytes += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
}

/* torch.nn.LSTM / GRU (I, H) of one layer: every tensor U(+-1/sqrt(H)). No
 * weight_slices: H is never split, every tile uses all the weights. */
int sf_rnn_param_descs(const sf_rnn_cell *c, const sf_op *op, sf_param_desc *out) {
    int64_t h = rnn_hidden(op), i = op->in_shapes[0].d[2], g = c->gates * h;
    double bound = 1.0 / sqrt((double)h);
    out[0] = sf_param_make("weight_ih_l0", 2, (int64_t[]){g, i}, 0, SF_INIT_UNIFORM, bound);
    out[1] = sf_param_make("weight_hh_l0", 2, (int64_t[]){g, h}, g * i, SF_INIT_UNIFORM, bound);
    out[2] = sf_param_make("bias_ih_l0", 1, (int64_t[]){g}, g * (i + h), SF_INIT_UNIFORM, bound);
    out[3] =
        sf_param_make("bias_hh_l0", 1, (int64_t[]){g}, g * (i + h) + g, SF_INIT_UNIFORM, bound);
    return 4;
}

/* ---- kernels ----------------------------------------------------------- */

static void rnn_geom_init(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, sf_rnn_geom *g) {
    g->n = t->hi[0] - t->lo[0];
    g->steps = op->in_shapes[0].d[1];
    g->in = op->in_shapes[0].d[2];
    g->hid = rnn_hidden(op);
    g->has_state = op->n_inputs == 1 + c->n_states;
    g->whole = t->lo[1] == 0 && t->hi[1] == g->steps && t->lo[2] == 0 && t->hi[2] == g->hid;
}

/* Floats of the forward workspace (projections, states) and of the backward
 * extras (a gradient per state and the next dh). */
size_t sf_rnn_workspace(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, int backward) {
    sf_rnn_geom g;
    rnn_geom_init(c, op, t, &g);
    int64_t floats = c->n_proj * g.n * g.steps * c->gates * g.hid +
                     c->n_states * g.n * (g.steps + 1) * g.hid +
                     (backward ? (c->n_states + 1) * g.n * g.hid : 0);
    return (size_t)floats * sizeof(float);
}

static sf_rnn_ws rnn_ws_carve(const sf_rnn_cell *c, const sf_rnn_geom *g, void *workspace,
                              int backward) {
    float *p = workspace;
    sf_rnn_ws w = {0};
    for (int b = 0; b < c->n_proj; b++, p += g->n * g->steps * c->gates * g->hid) w.proj[b] = p;
    for (int s = 0; s < c->n_states; s++, p += g->n * (g->steps + 1) * g->hid) w.state[s] = p;
    if (backward) {
        for (int s = 0; s < c->n_states; s++, p += g->n * g->hid) w.dstate[s] = p;
        w.dh_next = p;
    }
    return w;
}

/* Slot 0 of every state: the given initial state, or zeros. */
static void rnn_init_state(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                           const sf_rnn_ws *w) {
    const int64_t H = g->hid, srow = (g->steps + 1) * H;
    for (int64_t n = 0; n < g->n; n++)
        for (int s = 0; s < c->n_states; s++) {
            float *st = w->state[s] + n * srow;
            if (g->has_state)
                memcpy(st, a->in[1 + s] + n * H, (size_t)H * sizeof *st);
            else
                memset(st, 0, (size_t)H * sizeof *st);
        }
}

/* Forward into the workspace, element by element. With one projection buffer
 * the recurrent sum continues the input one (bias_ih + bias_hh first); with two
 * each starts from its own bias. */
static void rnn_run_ref(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                        const sf_rnn_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = c->gates * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    const float *x = a->in[0];
    const int two = c->n_proj == 2;
    rnn_init_state(a, c, g, w);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t n = 0; n < g->n; n++) {
            const float *xt = x + (n * T + t) * I, *hp = w->state[0] + n * srow + t * H;
            float *px = w->proj[0] + (n * T + t) * G,
                  *ph = w->proj[c->n_proj - 1] + (n * T + t) * G;
            for (int64_t j = 0; j < G; j++) {
                float ax = two ? bih[j] : bih[j] + bhh[j];
                for (int64_t k = 0; k < I; k++) ax += wih[j * I + k] * xt[k];
                float ah = two ? bhh[j] : ax;
                for (int64_t k = 0; k < H; k++) ah += whh[j * H + k] * hp[k];
                if (two) px[j] = ax;
                ph[j] = ah;
            }
        }
        c->forward(g, w, t);
    }
}

/* Forward into the workspace: the input projection of all steps in one SGEMM,
 * then one recurrent SGEMM per step. */
static void rnn_run_fast(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                         const sf_rnn_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = c->gates * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    const int two = c->n_proj == 2;
    float *px = w->proj[0], *ph = w->proj[c->n_proj - 1];
    rnn_init_state(a, c, g, w);
    for (int64_t r = 0; r < g->n * T; r++)
        for (int64_t j = 0; j < G; j++) {
            px[r * G + j] = two ? bih[j] : bih[j] + bhh[j];
            if (two) ph[r * G + j] = bhh[j];
        }
    sf_sgemm(0, 1, g->n * T, G, I, 1.0f, a->in[0], I, wih, I, 1.0f, px, G);
    for (int64_t t = 0; t < T; t++) {
        /* ph[:, t] (n, G), row stride T*G; h_{t-1} = hs[:, t], row stride (T+1)*H */
        sf_sgemm(0, 1, g->n, G, H, 1.0f, w->state[0] + t * H, srow, whh, H, 1.0f, ph + t * G,
                 T * G);
        c->forward(g, w, t);
    }
}

/* y and the final states from the workspace. */
static void rnn_write_outputs(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                              const sf_rnn_ws *w) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        memcpy(a->out[0] + n * T * H, w->state[0] + n * srow + H, (size_t)(T * H) * sizeof(float));
        for (int s = 0; s < c->n_states; s++)
            memcpy(a->out[1 + s] + n * H, w->state[s] + n * srow + T * H,
                   (size_t)H * sizeof(float));
    }
}

/* What every kernel call starts with: the cell, the geometry, the workspace and
 * the forward run into it (the fast or the reference way); 0 for a tile the
 * kernels do not support. */
static int rnn_forward(const sf_rnn_cell *c, const sf_kernel_args *a, int fast, int backward,
                       sf_rnn_geom *g, sf_rnn_ws *w) {
    rnn_geom_init(c, a->op, &a->tile, g);
    if (!g->whole) return 0;
    *w = rnn_ws_carve(c, g, a->workspace, backward);
    if (fast)
        rnn_run_fast(a, c, g, w);
    else
        rnn_run_ref(a, c, g, w);
    return 1;
}

sf_status sf_rnn_fwd(const sf_rnn_cell *c, const sf_kernel_args *a, int fast) {
    sf_rnn_geom g;
    sf_rnn_ws w;
    if (!rnn_forward(c, a, fast, 0, &g, &w)) return SF_ERR_UNSUPPORTED;
    rnn_write_outputs(a, c, &g, &w);
    return SF_OK;
}

/* Before the time loop: each state's gradient from its final output (zero when
 * none is given). */
static void rnn_bwd_init(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                         const sf_rnn_ws *w) {
    size_t bytes = (size_t)(g->n * g->hid) * sizeof(float);
    for (int s = 0; s < c->n_states; s++)
        if (a->grad_out[1 + s])
            memcpy(w->dstate[s], a->grad_out[1 + s], bytes);
        else
            memset(w->dstate[s], 0, bytes);
}

/* After it: the initial states' gradients += what reached step 0, when wanted. */
static void rnn_bwd_state(const sf_kernel_args *a, const sf_rnn_cell *c, const sf_rnn_geom *g,
                          const sf_rnn_ws *w) {
    if (!g->has_state || !a->grad_in) return;
    const int64_t nh = g->n * g->hid;
    for (int s = 0; s < c->n_states; s++)
        if (a->grad_in[1 + s])
            for (int64_t e = 0; e < nh; e++) a->grad_in[1 + s][e] += w->dstate[s][e];
}

/* Back through time; then dx, dW, db from the gradients of the projections of
 * all steps. The fast kernel takes dh_{t-1} with one SGEMM per step, dx and
 * dW_ih with one each over all steps, dW_hh with one per step; the reference
 * kernel the same with loops, element by element. */
sf_status sf_rnn_bwd(const sf_rnn_cell *c, const sf_kernel_args *a, int fast) {
    sf_rnn_geom g;
    sf_rnn_ws w;
    if (!rnn_forward(c, a, fast, 1, &g, &w)) return SF_ERR_UNSUPPORTED;
    const int64_t H = g.hid, I = g.in, T = g.steps, G = c->gates * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *x = a->in[0];
    const float *px = w.proj[0], *ph = w.proj[c->n_proj - 1];
    rnn_bwd_init(a, c, &g, &w);
    for (int64_t t = T - 1; t >= 0; t--) {
        c->backward(&g, &w, a->grad_out[0], t);
        /* dh_{t-1} (n, H) = [direct part +] dA_t (n, G; row stride T*G) W_hh (G, H) */
        if (fast) {
            if (c->dh_direct) memcpy(w.dh_next, w.dstate[0], (size_t)(g.n * H) * sizeof(float));
            sf_sgemm(0, 0, g.n, H, G, 1.0f, ph + t * G, T * G, whh, H, c->dh_direct ? 1.0f : 0.0f,
                     w.dh_next, H);
            float *tmp = w.dstate[0];
            w.dstate[0] = w.dh_next;
            w.dh_next = tmp;
            continue;
        }
        float *dh = w.dstate[0];
        for (int64_t n = 0; n < g.n; n++) {
            const float *da = ph + (n * T + t) * G;
            for (int64_t k = 0; k < H; k++) {
                float acc = c->dh_direct ? dh[n * H + k] : 0.0f;
                for (int64_t j = 0; j < G; j++) acc += da[j] * whh[j * H + k];
                dh[n * H + k] = acc;
            }
        }
    }
    rnn_bwd_state(a, c, &g, &w);
    float *dx = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    float *dwih = dw, *dwhh = dw ? dw + G * I : NULL;
    if (fast) { /* the projections' gradients of all steps: (n*T, G) */
        if (dx) sf_sgemm(0, 0, g.n * T, I, G, 1.0f, px, G, wih, I, 1.0f, dx, I);
        if (dw) sf_sgemm(1, 0, G, I, g.n * T, 1.0f, px, G, x, I, 1.0f, dwih, I);
        /* dW_hh += sum over steps t of dA_t^T (G, n) h_{t-1} (n, H): one GEMM per
         * step with the batch as its inner dimension (a GEMM per sample would have
         * an inner dimension of T and stream all of dW_hh n times). dA_t rows are
         * T*G apart, h_{t-1} rows (hs[n, t]) srow apart. */
        for (int64_t t = 0; dw && t < T; t++)
            sf_sgemm(1, 0, G, H, g.n, 1.0f, ph + t * G, T * G, w.state[0] + t * H, srow, 1.0f, dwhh,
                     H);
    } else {
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t t = 0; t < T; t++) {
                const float *di = px + (n * T + t) * G, *dhh = ph + (n * T + t) * G;
                const float *xt = x + (n * T + t) * I, *hp = w.state[0] + n * srow + t * H;
                for (int64_t j = 0; j < G; j++) {
                    if (dx)
                        for (int64_t k = 0; k < I; k++)
                            dx[(n * T + t) * I + k] += di[j] * wih[j * I + k];
                    if (dw) {
                        for (int64_t k = 0; k < I; k++) dwih[j * I + k] += di[j] * xt[k];
                        for (int64_t k = 0; k < H; k++) dwhh[j * H + k] += dhh[j] * hp[k];
                    }
                }
            }
    }
    if (dw) { /* both kernels: the bias gradients, step after step */
        float *dbih = dw + G * (I + H), *dbhh = dbih + G;
        for (int64_t r = 0; r < g.n * T; r++)
            for (int64_t j = 0; j < G; j++) {
                dbih[j] += px[r * G + j];
                dbhh[j] += ph[r * G + j];
            }
    }
    return SF_OK;
}
