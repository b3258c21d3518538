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
 * Per step, with gate blocks r, z, n in PyTorch's order (rows [0, H), [H, 2H),
 * [2H, 3H) of the weights):
 *   gi = x_t W_ih^T + b_ih,  gh = h_{t-1} W_hh^T + b_hh          (n, 3H) each
 *   r = sigmoid(gi_r + gh_r),  z = sigmoid(gi_z + gh_z)
 *   n = tanh(gi_n + r * gh_n)           (r multiplies W_hn h + b_hn: torch's form,
 *                                        ONNX's linear_before_reset = 1)
 *   h_t = (1 - z) * n + z * h_{t-1}
 *
 * Parallel space: y (N, T, H), the kinds lstm has and for the same reasons
 * (op_lstm.c): N is the sample dimension; T is sequential (unroll into chunks
 * instead); H is NONE because every step's recurrent product needs the whole
 * previous h, an all-gather per step that no region or transfer expresses. So
 * the weights are replicated, never sharded. The regions: all of x's features
 * and all of h0, for the tile's samples.
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemms
 * 2 * n * 3h * (I + H), plus GRU_EW_FLOPS elementwise operations per unit (the
 * bias adds, two sigmoids, a tanh, the reset product and the interpolation:
 * about nine). Backward: twice the gemms plus the same elementwise count.
 *
 * Kernels (buffers in soapflow/kernels.h): weights W_ih (3H, I), then W_hh
 * (3H, H), then b_ih (3H), then b_hh (3H). Workspace (floats), forward: gi
 * (n, T, 3H) (the input projections; the activated r, z, n after the cell), gh
 * (n, T, 3H) (the recurrent projections, gh_n kept for backward) and the hidden
 * states hs (n, T+1, H) with hs[:, 0] = h0. Backward recomputes that forward,
 * then runs back through time turning gi into the gradients of the input
 * projections and gh into those of the recurrent ones (they differ on the n
 * block: d(gh_n) = d(gi_n) * r), with two more (n, H) buffers for dh. The fast
 * kernel projects every step's input in one SGEMM and takes dx, dW_ih and dW_hh
 * after the time loop; only the recurrent products are per step. The reference
 * kernel does the same with loops. The pointwise cell and its adjoint are shared.
 *
 * Supported tiles: an N range with the whole of T and of H, which is every tile
 * of the space; a part of H or of T returns SF_ERR_UNSUPPORTED from both kernels.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define GRU_EW_FLOPS 9.0 /* elementwise operations per hidden unit per step */

static const sf_attr_desc gru_attrs[] = {
    {.name = "hidden", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, gru.hidden)},
};

static void gru_defaults(sf_op_params *p) { p->gru.hidden = 0; }

static sf_status gru_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                           int *n_out, sf_error *err) {
    int64_t h = p->gru.hidden;
    if (h < 1)
        return sf_error_set(err, SF_ERR_INVALID, "hidden must be >= 1, got %lld", (long long)h);
    if (n_in != 1 && n_in != 2)
        return sf_error_set(err, SF_ERR_INVALID,
                            "takes x alone or x and h0 (1 or 2 inputs), got %d", n_in);
    if (in[0].ndim != 3)
        return sf_error_set(err, SF_ERR_SHAPE, "input x must be 3-D (N, T, I), got %d-D",
                            in[0].ndim);
    int64_t n = in[0].d[0];
    if (n_in == 2 && (in[1].ndim != 2 || in[1].d[0] != n || in[1].d[1] != h))
        return sf_error_set(err, SF_ERR_SHAPE,
                            "h0 must be (N, H) = (%lld, %lld), got %d-D %lldx%lld", (long long)n,
                            (long long)h, in[1].ndim, (long long)(in[1].ndim > 0 ? in[1].d[0] : 0),
                            (long long)(in[1].ndim > 1 ? in[1].d[1] : 0));
    out[0] = sf_shape_make(3, (int64_t[]){n, in[0].d[1], h});
    out[1] = sf_shape_make(2, (int64_t[]){n, h});
    *n_out = 2;
    return SF_OK;
}

static int64_t gru_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    int64_t h = p->gru.hidden, i = in[0].d[2];
    return sf_count_add(sf_count_mul(sf_count_mul(3, h), sf_count_add(i, h)), sf_count_mul(6, h));
}

static void gru_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_NONE;
    kinds[2] = SF_DIM_NONE; /* the exchange of h each step: see op_lstm.c */
}

static void gru_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    *r = sf_tile_full(&op->in_shapes[input]);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
}

static void gru_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o) {
    if (output == 0) {
        *o = *t;
        return;
    }
    memset(o, 0, sizeof *o);
    if (output < 0 || output >= op->n_outputs) return;
    o->ndim = 2; /* hT: (N, H) */
    o->lo[0] = t->lo[0];
    o->hi[0] = t->hi[0];
    o->lo[1] = t->lo[2];
    o->hi[1] = t->hi[2];
}

/* y is the space itself; hT (N, H) follows the space's N and H. */
static int gru_out_axes(const sf_op *op, int output, int *axis, int64_t *shift) {
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

static void gru_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    double n = (double)(t->hi[0] - t->lo[0]), steps = (double)(t->hi[1] - t->lo[1]);
    double h = (double)(t->hi[2] - t->lo[2]);
    double fan_in = (double)(op->in_shapes[0].d[2] + op->params.gru.hidden); /* I + H */
    double gemm = 2 * n * 3 * h * fan_in * steps;
    double ew = GRU_EW_FLOPS * n * h * steps;
    cost->flops_fwd = gemm + ew;
    cost->flops_bwd = 2 * gemm + ew;
    double in_b = 0, out_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        gru_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        gru_out_tile(op, t, k, &o);
        out_b += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
    double w_b = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    /* r, z, n and W_hn h + b_hn of every step, written forward and read back */
    double saved_b = 4 * n * h * steps * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b + saved_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + saved_b;
}

/* torch.nn.GRU(I, H) of one layer: every tensor U(+-1/sqrt(H)). No
 * weight_slices: H is never split, every tile uses all the weights. */
static int gru_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t h = op->params.gru.hidden, i = op->in_shapes[0].d[2], g = 3 * h;
    double bound = 1.0 / sqrt((double)h);
    out[0] = sf_param_make("weight_ih_l0", 2, (int64_t[]){g, i}, 0, SF_INIT_UNIFORM, bound);
    out[1] = sf_param_make("weight_hh_l0", 2, (int64_t[]){g, h}, g * i, SF_INIT_UNIFORM, bound);
    out[2] = sf_param_make("bias_ih_l0", 1, (int64_t[]){g}, g * (i + h), SF_INIT_UNIFORM, bound);
    out[3] =
        sf_param_make("bias_hh_l0", 1, (int64_t[]){g}, g * (i + h) + g, SF_INIT_UNIFORM, bound);
    return 4;
}

static void gru_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)sf_tile_weight_share(op, t) * SF_ELEM_BYTES;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        gru_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    /* three gates and W_hn h + b_hn per step and unit, kept for backward */
    m->saved_bytes += 4.0 * (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        gru_out_tile(op, t, k, &o);
        m->output_bytes += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
}

/* ---- kernels ----------------------------------------------------------- */

typedef struct gru_geom {
    int64_t n, steps, in, hid; /* tile samples, steps T, input features I, hidden H */
    int has_state;             /* h0 is an input */
    int whole;                 /* the tile covers all of T and H (else unsupported) */
} gru_geom;

static void gru_geom_init(const sf_op *op, const sf_tile *t, gru_geom *g) {
    g->n = t->hi[0] - t->lo[0];
    g->steps = op->in_shapes[0].d[1];
    g->in = op->in_shapes[0].d[2];
    g->hid = op->params.gru.hidden;
    g->has_state = op->n_inputs == 2;
    g->whole = t->lo[1] == 0 && t->hi[1] == g->steps && t->lo[2] == 0 && t->hi[2] == g->hid;
}

static int64_t gru_ws_fwd(const gru_geom *g) {
    return 2 * g->n * g->steps * 3 * g->hid + g->n * (g->steps + 1) * g->hid;
}

static size_t gru_workspace(const sf_op *op, const sf_tile *t, int backward) {
    gru_geom g;
    gru_geom_init(op, t, &g);
    int64_t floats = gru_ws_fwd(&g) + (backward ? 2 * g.n * g.hid : 0);
    return (size_t)floats * sizeof(float);
}

typedef struct gru_ws {
    float *gi;           /* (n, T, 3H): x W_ih^T + b_ih; r, z, n after the cell; backward: dgi */
    float *gh;           /* (n, T, 3H): h W_hh^T + b_hh; backward: dgh */
    float *hs;           /* (n, T+1, H) */
    float *dh, *dh_next; /* (n, H) each, backward only */
} gru_ws;

static gru_ws gru_ws_carve(const gru_geom *g, void *workspace, int backward) {
    float *p = workspace;
    gru_ws w = {0};
    int64_t gates = g->n * g->steps * 3 * g->hid;
    w.gi = p;
    w.gh = p + gates;
    w.hs = p + 2 * gates;
    if (backward) {
        w.dh = w.hs + g->n * (g->steps + 1) * g->hid;
        w.dh_next = w.dh + g->n * g->hid;
    }
    return w;
}

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

static void gru_init_state(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    const int64_t H = g->hid, srow = (g->steps + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *h = w->hs + n * srow;
        if (g->has_state)
            memcpy(h, a->in[1] + n * H, (size_t)H * sizeof *h);
        else
            memset(h, 0, (size_t)H * sizeof *h);
    }
}

/* Step t of the cell: gi[:, t] becomes r, z, n and h_t is written into hs
 * (slot t + 1); gh[:, t] is left as it is (its n block is read backward). */
static void gru_cell_forward(const gru_geom *g, const gru_ws *w, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *gi = w->gi + (n * T + t) * 3 * H;
        const float *gh = w->gh + (n * T + t) * 3 * H, *hp = w->hs + n * srow + t * H;
        float *h = w->hs + n * srow + (t + 1) * H;
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
 * in dh the direct part z * dh of the gradient for h_{t-1} (the caller adds
 * dgh W_hh). */
static void gru_cell_backward(const gru_geom *g, const gru_ws *w, const float *dy, int64_t t) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        float *gi = w->gi + (n * T + t) * 3 * H, *gh = w->gh + (n * T + t) * 3 * H;
        const float *hp = w->hs + n * srow + t * H;
        float *dh = w->dh + n * H;
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

/* Forward into the workspace, element by element. */
static void gru_run_ref(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = 3 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    const float *x = a->in[0];
    gru_init_state(a, g, w);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t n = 0; n < g->n; n++) {
            const float *xt = x + (n * T + t) * I, *hp = w->hs + n * srow + t * H;
            float *gi = w->gi + (n * T + t) * G, *gh = w->gh + (n * T + t) * G;
            for (int64_t j = 0; j < G; j++) {
                float ai = bih[j], ah = bhh[j];
                for (int64_t k = 0; k < I; k++) ai += wih[j * I + k] * xt[k];
                for (int64_t k = 0; k < H; k++) ah += whh[j * H + k] * hp[k];
                gi[j] = ai;
                gh[j] = ah;
            }
        }
        gru_cell_forward(g, w, t);
    }
}

/* Forward into the workspace: the input projection of all steps in one SGEMM,
 * then one recurrent SGEMM per step. */
static void gru_run_fast(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    const int64_t H = g->hid, I = g->in, T = g->steps, G = 3 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *bih = whh + G * H, *bhh = bih + G;
    gru_init_state(a, g, w);
    for (int64_t r = 0; r < g->n * T; r++)
        for (int64_t j = 0; j < G; j++) {
            w->gi[r * G + j] = bih[j];
            w->gh[r * G + j] = bhh[j];
        }
    sf_sgemm(0, 1, g->n * T, G, I, 1.0f, a->in[0], I, wih, I, 1.0f, w->gi, G);
    for (int64_t t = 0; t < T; t++) {
        /* gh[:, t] (n, 3H), row stride T*3H; h_{t-1} = hs[:, t], row stride (T+1)*H */
        sf_sgemm(0, 1, g->n, G, H, 1.0f, w->hs + t * H, srow, whh, H, 1.0f, w->gh + t * G, T * G);
        gru_cell_forward(g, w, t);
    }
}

/* y and hT from the workspace. */
static void gru_write_outputs(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    const int64_t H = g->hid, T = g->steps, srow = (T + 1) * H;
    for (int64_t n = 0; n < g->n; n++) {
        memcpy(a->out[0] + n * T * H, w->hs + n * srow + H, (size_t)(T * H) * sizeof(float));
        memcpy(a->out[1] + n * H, w->hs + n * srow + T * H, (size_t)H * sizeof(float));
    }
}

static sf_status gru_fwd(const sf_kernel_args *a, int fast) {
    gru_geom g;
    gru_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    gru_ws w = gru_ws_carve(&g, a->workspace, 0);
    if (fast)
        gru_run_fast(a, &g, &w);
    else
        gru_run_ref(a, &g, &w);
    gru_write_outputs(a, &g, &w);
    return SF_OK;
}

static sf_status gru_fwd_ref(const sf_kernel_args *a) { return gru_fwd(a, 0); }
static sf_status gru_fwd_fast(const sf_kernel_args *a) { return gru_fwd(a, 1); }

/* dh = dhT (zero when no gradient is given). */
static void gru_bwd_init(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    size_t bytes = (size_t)(g->n * g->hid) * sizeof(float);
    if (a->grad_out[1])
        memcpy(w->dh, a->grad_out[1], bytes);
    else
        memset(w->dh, 0, bytes);
}

/* dh0 += dh after the time loop, when wanted. */
static void gru_bwd_state(const sf_kernel_args *a, const gru_geom *g, const gru_ws *w) {
    if (!g->has_state || !a->grad_in || !a->grad_in[1]) return;
    const int64_t nh = g->n * g->hid;
    for (int64_t e = 0; e < nh; e++) a->grad_in[1][e] += w->dh[e];
}

/* Back through time, element by element; then dx, dW, db from the gradients
 * of the projections of all steps (in gi and gh) by loops. */
static sf_status gru_bwd_ref(const sf_kernel_args *a) {
    gru_geom g;
    gru_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    const int64_t H = g.hid, I = g.in, T = g.steps, G = 3 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I, *x = a->in[0];
    gru_ws w = gru_ws_carve(&g, a->workspace, 1);
    gru_run_ref(a, &g, &w);
    gru_bwd_init(a, &g, &w);
    for (int64_t t = T - 1; t >= 0; t--) {
        gru_cell_backward(&g, &w, a->grad_out[0], t);
        for (int64_t n = 0; n < g.n; n++) { /* dh_{t-1} = z dh_t + dgh_t W_hh */
            const float *da = w.gh + (n * T + t) * G;
            for (int64_t k = 0; k < H; k++) {
                float acc = w.dh[n * H + k];
                for (int64_t j = 0; j < G; j++) acc += da[j] * whh[j * H + k];
                w.dh[n * H + k] = acc;
            }
        }
    }
    gru_bwd_state(a, &g, &w);
    float *dx = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    float *dwih = dw, *dwhh = dw ? dw + G * I : NULL;
    float *dbih = dw ? dw + G * (I + H) : NULL, *dbhh = dw ? dbih + G : NULL;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t t = 0; t < T; t++) {
            const float *di = w.gi + (n * T + t) * G, *dhh = w.gh + (n * T + t) * G;
            const float *xt = x + (n * T + t) * I, *hp = w.hs + n * srow + t * H;
            for (int64_t j = 0; j < G; j++) {
                if (dx)
                    for (int64_t k = 0; k < I; k++)
                        dx[(n * T + t) * I + k] += di[j] * wih[j * I + k];
                if (dw) {
                    for (int64_t k = 0; k < I; k++) dwih[j * I + k] += di[j] * xt[k];
                    for (int64_t k = 0; k < H; k++) dwhh[j * H + k] += dhh[j] * hp[k];
                    dbih[j] += di[j];
                    dbhh[j] += dhh[j];
                }
            }
        }
    return SF_OK;
}

static sf_status gru_bwd_fast(const sf_kernel_args *a) {
    gru_geom g;
    gru_geom_init(a->op, &a->tile, &g);
    if (!g.whole) return SF_ERR_UNSUPPORTED;
    const int64_t H = g.hid, I = g.in, T = g.steps, G = 3 * H, srow = (T + 1) * H;
    const float *wih = a->weights, *whh = wih + G * I;
    gru_ws w = gru_ws_carve(&g, a->workspace, 1);
    gru_run_fast(a, &g, &w);
    gru_bwd_init(a, &g, &w);
    for (int64_t t = T - 1; t >= 0; t--) {
        gru_cell_backward(&g, &w, a->grad_out[0], t);
        /* dh_{t-1} (n, H) = z dh_t + dgh_t (n, 3H; row stride T*3H) W_hh (3H, H) */
        memcpy(w.dh_next, w.dh, (size_t)(g.n * H) * sizeof(float));
        sf_sgemm(0, 0, g.n, H, G, 1.0f, w.gh + t * G, T * G, whh, H, 1.0f, w.dh_next, H);
        float *tmp = w.dh;
        w.dh = w.dh_next;
        w.dh_next = tmp;
    }
    gru_bwd_state(a, &g, &w);
    float *dx = a->grad_in ? a->grad_in[0] : NULL, *dw = a->grad_weights;
    if (dx) sf_sgemm(0, 0, g.n * T, I, G, 1.0f, w.gi, G, wih, I, 1.0f, dx, I);
    if (dw) {
        sf_sgemm(1, 0, G, I, g.n * T, 1.0f, w.gi, G, a->in[0], I, 1.0f, dw, I);
        /* dW_hh += sum over steps of dgh_t^T (3H, n) h_{t-1} (n, H), the batch inner */
        for (int64_t t = 0; t < T; t++)
            sf_sgemm(1, 0, G, H, g.n, 1.0f, w.gh + t * G, T * G, w.hs + t * H, srow, 1.0f,
                     dw + G * I, H);
        float *dbih = dw + G * (I + H), *dbhh = dbih + G;
        for (int64_t r = 0; r < g.n * T; r++)
            for (int64_t j = 0; j < G; j++) {
                dbih[j] += w.gi[r * G + j];
                dbhh[j] += w.gh[r * G + j];
            }
    }
    return SF_OK;
}

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
    .space = gru_space,
    .region = gru_region,
    .out_tile = gru_out_tile,
    .out_axes = gru_out_axes,
    .cost = gru_cost,
    .memory = gru_memory,
    .param_descs = gru_param_descs,
    .fwd_ref = gru_fwd_ref,
    .fwd_fast = gru_fwd_fast,
    .bwd_ref = gru_bwd_ref,
    .bwd_fast = gru_bwd_fast,
    .workspace = gru_workspace,
};
