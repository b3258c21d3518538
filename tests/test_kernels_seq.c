/* Kernels of matmul, lstm, gru, attention, conv_transpose2d and resize: fast against reference on
 * awkward shapes (sizes 1, primes, every transpose, causal and cross attention), tiles of uneven
 * partitions stitched against the whole operator, outputs against a double
 * forward and every gradient against double-precision central differences,
 * accumulation and NULL gradients, and the tiles an LSTM kernel refuses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first: its own block, so that
 * sorting includes keeps it last */
#include <cmocka.h>

#include "kernel_check.h"

/* max|a - b| / max|b| (the denominator at least 1e-30) */
static double rel_err(const float *a, const float *b, int64_t n) {
    return err_floor(a, b, n, 1e-30);
}

static double rel_err_d(const float *a, const double *b, int64_t n) {
    return err_floor_d(a, b, n, 1e-30);
}

#include "soapflow/graph.h"
#include "soapflow/kernels.h"

#define MAX_IO 3           /* most inputs and outputs of the operators tested here */
#define RUN_SEED 0x5eedull /* the kernels' seed (attention's dropout mask) */
static int run_eval;       /* run_tile in inference mode */

/* ---- helpers ----------------------------------------------------------- */

/* A graph with one graph input per operator input, and the operator. */
typedef struct opx {
    sf_graph *g;
    const sf_op *op;
    int n_in, n_out;
    int64_t in_n[MAX_IO], out_n[MAX_IO], n_w;
} opx;

static void opx_make(opx *o, sf_op_type type, const sf_shape *ins, int n_in,
                     const sf_op_params *p) {
    sf_error err = {0};
    memset(o, 0, sizeof *o);
    o->g = sf_graph_new("k");
    assert_non_null(o->g);
    sf_tensor_ref refs[MAX_IO];
    for (int i = 0; i < n_in; i++) {
        char name[8] = {'x', (char)('0' + i), 0};
        int id = sf_graph_add_input(o->g, name, &ins[i], 0, &err);
        assert_true(id >= 0);
        refs[i] = (sf_tensor_ref){id, 0};
    }
    int id = sf_graph_add_op(o->g, type, "op", p, refs, n_in, &err);
    if (id < 0) fail_msg("add_op: %s", err.msg);
    o->op = sf_graph_op(o->g, id);
    o->n_in = o->op->n_inputs;
    o->n_out = o->op->n_outputs;
    for (int i = 0; i < o->n_in; i++) o->in_n[i] = sf_shape_numel(&o->op->in_shapes[i]);
    for (int k = 0; k < o->n_out; k++) o->out_n[k] = sf_shape_numel(&o->op->out_shapes[k]);
    o->n_w = o->op->n_params;
}

/* Full tensors of one operator: inputs, weights, output gradients (random),
 * and the outputs and gradients a run produces (zeroed). */
typedef struct tensors {
    float *x[MAX_IO], *w, *dy[MAX_IO];
    float *y[MAX_IO], *dx[MAX_IO], *dw;
} tensors;

static void tensors_init(tensors *T, const opx *o, uint64_t seed) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    memset(T, 0, sizeof *T);
    for (int i = 0; i < o->n_in; i++) {
        T->x[i] = falloc(o->in_n[i]);
        fill_random(&rng, T->x[i], o->in_n[i]);
        T->dx[i] = falloc(o->in_n[i]);
    }
    T->w = falloc(o->n_w);
    fill_random(&rng, T->w, o->n_w);
    T->dw = falloc(o->n_w);
    for (int k = 0; k < o->n_out; k++) {
        T->dy[k] = falloc(o->out_n[k]);
        fill_random(&rng, T->dy[k], o->out_n[k]);
        T->y[k] = falloc(o->out_n[k]);
    }
}

/* Zero the results (y, dx, dw) for another run. */
static void tensors_clear(tensors *T, const opx *o) {
    for (int i = 0; i < o->n_in; i++) memset(T->dx[i], 0, (size_t)o->in_n[i] * sizeof(float));
    for (int k = 0; k < o->n_out; k++) memset(T->y[k], 0, (size_t)o->out_n[k] * sizeof(float));
    memset(T->dw, 0, (size_t)(o->n_w > 0 ? o->n_w : 1) * sizeof(float));
}

static void tensors_free(tensors *T, const opx *o) {
    for (int i = 0; i < o->n_in; i++) {
        free(T->x[i]);
        free(T->dx[i]);
    }
    for (int k = 0; k < o->n_out; k++) {
        free(T->dy[k]);
        free(T->y[k]);
    }
    free(T->w);
    free(T->dw);
}

/* Forward, then (when the forward succeeds and the tile is not empty) backward
 * of tile t, as a runtime would: region buffers cut from the full tensors,
 * outputs stitched into T->y, input gradients added into T->dx, weight
 * gradients accumulated into T->dw. Returns the forward's status. */
static sf_status run_tile(const opx *o, const sf_tile *t, int fast, tensors *T) {
    const sf_op *op = o->op;
    sf_tile r[MAX_IO], ot[MAX_IO];
    float *xb[MAX_IO] = {0}, *dxb[MAX_IO] = {0}, *yb[MAX_IO] = {0}, *dyb[MAX_IO] = {0};
    for (int i = 0; i < o->n_in; i++) {
        sf_op_input_region(op, t, i, &r[i]);
        xb[i] = falloc(sf_tile_numel(&r[i]));
        dxb[i] = falloc(sf_tile_numel(&r[i]));
        region_copy(T->x[i], &op->in_shapes[i], &r[i], xb[i], 0);
    }
    for (int k = 0; k < o->n_out; k++) {
        sf_op_output_tile(op, t, k, &ot[k]);
        yb[k] = falloc(sf_tile_numel(&ot[k]));
        dyb[k] = falloc(sf_tile_numel(&ot[k]));
        region_copy(T->dy[k], &op->out_shapes[k], &ot[k], dyb[k], 0);
    }
    size_t ws = sf_kernel_workspace_bytes(op, t, 0), wsb = sf_kernel_workspace_bytes(op, t, 1);
    if (wsb > ws) ws = wsb;
    float *wsp = ws_alloc(ws);
    const float *in_arr[MAX_IO] = {xb[0], xb[1], xb[2]};
    const float *dy_arr[MAX_IO] = {dyb[0], dyb[1], dyb[2]};
    sf_kernel_args a = {
        .op = op,
        .tile = *t,
        .n_inputs = o->n_in,
        .in = in_arr,
        .in_region = r,
        .n_outputs = o->n_out,
        .out = yb,
        .weights = T->w,
        .grad_out = dy_arr,
        .grad_in = dxb,
        .grad_weights = T->dw,
        .workspace = wsp,
        .workspace_bytes = ws,
        .seed = RUN_SEED,
        .eval = run_eval,
    };
    sf_status s = sf_kernel_forward(&a, fast);
    if (s == SF_OK && !sf_tile_empty(t)) {
        /* a tile cut along a reduction dimension (matmul's K) holds a partial
         * sum of its output piece: the parts' pieces add up */
        int partial = 0;
        for (int d = 0; d < op->space.ndim && d < t->ndim; d++)
            partial |= op->kinds[d] == SF_DIM_REDUCE && (t->lo[d] > 0 || t->hi[d] < op->space.d[d]);
        for (int k = 0; k < o->n_out; k++)
            region_copy(T->y[k], &op->out_shapes[k], &ot[k], yb[k], partial ? 2 : 1);
        assert_int_equal(sf_kernel_backward(&a, fast), SF_OK);
        for (int i = 0; i < o->n_in; i++)
            region_copy(T->dx[i], &op->in_shapes[i], &r[i], dxb[i], 2);
    }
    for (int i = 0; i < MAX_IO; i++) {
        free(xb[i]);
        free(dxb[i]);
        free(yb[i]);
        free(dyb[i]);
    }
    ws_free(wsp, ws);
    return s;
}

/* Parts of a partition, degrees per dimension, in row-major order. */
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

static void run_partition(const opx *o, const int *deg, int fast, tensors *T) {
    int parts = 1;
    for (int i = 0; i < o->op->space.ndim; i++) parts *= deg[i];
    for (int p = 0; p < parts; p++) {
        sf_tile t = partition_tile(&o->op->space, deg, p);
        assert_int_equal(run_tile(o, &t, fast, T), SF_OK);
    }
}

/* Every partition of degs (and the whole tile, fast) with both kernels gives the
 * whole tile's reference outputs and gradients. */
static void check_partitions(const opx *o, const int (*degs)[4], int n_degs, uint64_t seed) {
    tensors base, T;
    tensors_init(&base, o, seed);
    tensors_init(&T, o, seed);
    int whole[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
    run_partition(o, whole, 0, &base);
    for (int d = -1; d < n_degs; d++) {
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        if (d >= 0)
            for (int i = 0; i < o->op->space.ndim && i < 4; i++) deg[i] = degs[d][i];
        for (int fast = 0; fast < 2; fast++) {
            if (d < 0 && !fast) continue; /* the baseline itself */
            tensors_clear(&T, o);
            run_partition(o, deg, fast, &T);
            double e = 0;
            for (int k = 0; k < o->n_out; k++) e = fmax(e, rel_err(T.y[k], base.y[k], o->out_n[k]));
            for (int i = 0; i < o->n_in; i++) e = fmax(e, rel_err(T.dx[i], base.dx[i], o->in_n[i]));
            e = fmax(e, rel_err(T.dw, base.dw, o->n_w));
            if (e > 1e-4)
                fail_msg("%s partition (%d,%d,%d,%d) fast=%d: error %g",
                         sf_op_type_name(o->op->type), deg[0], deg[1], deg[2], deg[3], fast, e);
        }
    }
    tensors_free(&base, o);
    tensors_free(&T, o);
}

/* ---- double-precision forwards (the definitions, written again) -------- */

typedef void (*fwd_d_fn)(const sf_op *op, double *const *x, const double *w, double *const *y);

/* L = sum_k sum(y_k * dy_k) */
static double loss_d(const opx *o, fwd_d_fn f, double *const *x, const double *w, const tensors *T,
                     double *const *y) {
    f(o->op, x, w, y);
    double s = 0;
    for (int k = 0; k < o->n_out; k++)
        for (int64_t e = 0; e < o->out_n[k]; e++) s += y[k][e] * (double)T->dy[k][e];
    return s;
}

/* Outputs against the double forward (1e-5), then the gradients of both
 * kernels on the whole tile against central differences of L (1e-3). */
static void check_gradients_fd(const opx *o, fwd_d_fn f, uint64_t seed) {
    tensors T;
    tensors_init(&T, o, seed);
    double *x[MAX_IO] = {0}, *gx[MAX_IO] = {0}, *y[MAX_IO] = {0};
    for (int i = 0; i < o->n_in; i++) {
        x[i] = dalloc(o->in_n[i]);
        gx[i] = dalloc(o->in_n[i]);
        for (int64_t e = 0; e < o->in_n[i]; e++) x[i][e] = T.x[i][e];
    }
    for (int k = 0; k < o->n_out; k++) y[k] = dalloc(o->out_n[k]);
    double *w = dalloc(o->n_w), *gw = dalloc(o->n_w);
    for (int64_t e = 0; e < o->n_w; e++) w[e] = T.w[e];
    const double h = 1e-3;
    for (int i = 0; i <= o->n_in; i++) { /* i == n_in: the weights */
        double *v = i < o->n_in ? x[i] : w, *g = i < o->n_in ? gx[i] : gw;
        int64_t n = i < o->n_in ? o->in_n[i] : o->n_w;
        for (int64_t e = 0; e < n; e++) {
            double keep = v[e];
            v[e] = keep + h;
            double lp = loss_d(o, f, x, w, &T, y);
            v[e] = keep - h;
            double lm = loss_d(o, f, x, w, &T, y);
            v[e] = keep;
            g[e] = (lp - lm) / (2 * h);
        }
    }
    f(o->op, x, w, y); /* y at the point itself */
    sf_tile t = sf_tile_full(&o->op->space);
    for (int fast = 0; fast < 2; fast++) {
        tensors_clear(&T, o);
        assert_int_equal(run_tile(o, &t, fast, &T), SF_OK);
        for (int k = 0; k < o->n_out; k++) {
            double ey = rel_err_d(T.y[k], y[k], o->out_n[k]);
            if (ey > 1e-5)
                fail_msg("%s fast=%d: output %d err %g", sf_op_type_name(o->op->type), fast, k, ey);
        }
        for (int i = 0; i < o->n_in; i++) {
            double ex = rel_err_d(T.dx[i], gx[i], o->in_n[i]);
            if (ex > 1e-3)
                fail_msg("%s fast=%d: grad input %d err %g", sf_op_type_name(o->op->type), fast, i,
                         ex);
        }
        double ew = rel_err_d(T.dw, gw, o->n_w);
        if (ew > 1e-3)
            fail_msg("%s fast=%d: grad weights err %g", sf_op_type_name(o->op->type), fast, ew);
    }
    for (int i = 0; i < MAX_IO; i++) {
        free(x[i]);
        free(gx[i]);
        free(y[i]);
    }
    free(w);
    free(gw);
    tensors_free(&T, o);
}

/* ---- matmul ------------------------------------------------------------ */

typedef struct matmul_case {
    int nbatch; /* leading dimensions: 0, 1 or 2 */
    int64_t batch[2];
    int64_t m, k, n;
    int ta, tb;
} matmul_case;

static const matmul_case matmul_cases[] = {
    {0, {0, 0}, 1, 1, 1, 0, 0},    /* all ones */
    {0, {0, 0}, 7, 13, 5, 0, 0},   /* primes */
    {0, {0, 0}, 7, 13, 5, 1, 0},   /* A transposed */
    {0, {0, 0}, 11, 3, 17, 0, 1},  /* B transposed */
    {1, {3, 0}, 5, 7, 2, 1, 1},    /* batched, both transposed */
    {2, {2, 3}, 3, 1, 4, 0, 1},    /* K = 1, two batch dimensions */
    {1, {1, 0}, 13, 11, 1, 1, 0},  /* N = 1 */
    {1, {4, 0}, 37, 29, 31, 0, 0}, /* larger */
    {2, {3, 2}, 6, 5, 9, 1, 1},
};
#define N_MATMUL ((int)(sizeof matmul_cases / sizeof matmul_cases[0]))

static void matmul_make(opx *o, const matmul_case *c) {
    sf_shape s[2];
    int rank = c->nbatch + 2;
    for (int j = 0; j < 2; j++) {
        s[j].ndim = rank;
        for (int i = 0; i < c->nbatch; i++) s[j].d[i] = c->batch[i];
    }
    s[0].d[rank - 2] = c->ta ? c->k : c->m;
    s[0].d[rank - 1] = c->ta ? c->m : c->k;
    s[1].d[rank - 2] = c->tb ? c->n : c->k;
    s[1].d[rank - 1] = c->tb ? c->k : c->n;
    sf_op_params p;
    sf_op_params_default(SF_OP_MATMUL, &p);
    p.matmul.transpose_a = c->ta;
    p.matmul.transpose_b = c->tb;
    opx_make(o, SF_OP_MATMUL, s, 2, &p);
}

static void matmul_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    (void)w;
    const sf_shape *os = &op->out_shapes[0];
    int rank = os->ndim;
    int64_t M = os->d[rank - 2], N = os->d[rank - 1];
    int ta = op->params.matmul.transpose_a, tb = op->params.matmul.transpose_b;
    int64_t K = ta ? op->in_shapes[0].d[rank - 2] : op->in_shapes[0].d[rank - 1];
    int64_t B = sf_shape_numel(os) / (M * N);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double av = ta ? x[0][b * M * K + k * M + i] : x[0][b * M * K + i * K + k];
                    double bv = tb ? x[1][b * K * N + j * K + k] : x[1][b * K * N + k * N + j];
                    s += av * bv;
                }
                y[0][b * M * N + i * N + j] = s;
            }
}

static void test_matmul_tiles(void **state) {
    (void)state;
    static const int degs[][4] = {
        {2, 3, 1, 1}, {3, 2, 2, 1}, {1, 1, 3, 2}, {1, 4, 1, 3}, {2, 2, 2, 2}, {5, 1, 1, 1},
    };
    for (int i = 0; i < N_MATMUL; i++) {
        opx o;
        matmul_make(&o, &matmul_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 100 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_matmul_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_MATMUL - 2; i++) { /* the larger cases only add time */
        opx o;
        matmul_make(&o, &matmul_cases[i]);
        check_gradients_fd(&o, matmul_fwd_d, 200 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* ---- lstm -------------------------------------------------------------- */

typedef struct lstm_case {
    int64_t n, t, i, h;
    int state; /* h0 and c0 given */
} lstm_case;

static const lstm_case lstm_cases[] = {
    {1, 1, 1, 1, 0}, /* all ones */
    {3, 5, 7, 4, 1}, /* primes and initial states */
    {2, 4, 3, 5, 0}, {5, 3, 2, 3, 1},
    {4, 6, 5, 2, 1}, {2, 2, 1, 7, 1}, /* more hidden than input features */
};
#define N_LSTM ((int)(sizeof lstm_cases / sizeof lstm_cases[0]))

static void lstm_make(opx *o, const lstm_case *c) {
    sf_shape s[3];
    s[0] = sf_shape_make(3, (int64_t[]){c->n, c->t, c->i});
    s[1] = sf_shape_make(2, (int64_t[]){c->n, c->h});
    s[2] = s[1];
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = c->h;
    opx_make(o, SF_OP_LSTM, s, c->state ? 3 : 1, &p);
}

static double sigm_d(double v) { return 1.0 / (1.0 + exp(-v)); }

/* The LSTM step by step in double, PyTorch's definition and gate order. */
static void lstm_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    const sf_shape *xs = &op->in_shapes[0];
    int64_t N = xs->d[0], T = xs->d[1], I = xs->d[2], H = op->params.lstm.hidden, G = 4 * H;
    const double *wih = w, *whh = w + G * I, *bih = whh + G * H, *bhh = bih + G;
    double *h = dalloc(H), *c = dalloc(H), *gt = dalloc(G);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t u = 0; u < H; u++) {
            h[u] = op->n_inputs == 3 ? x[1][n * H + u] : 0.0;
            c[u] = op->n_inputs == 3 ? x[2][n * H + u] : 0.0;
        }
        for (int64_t t = 0; t < T; t++) {
            for (int64_t j = 0; j < G; j++) {
                double s = bih[j] + bhh[j];
                for (int64_t k = 0; k < I; k++) s += wih[j * I + k] * x[0][(n * T + t) * I + k];
                for (int64_t k = 0; k < H; k++) s += whh[j * H + k] * h[k];
                gt[j] = s;
            }
            for (int64_t u = 0; u < H; u++) {
                double ig = sigm_d(gt[u]), fg = sigm_d(gt[H + u]), gg = tanh(gt[2 * H + u]);
                double og = sigm_d(gt[3 * H + u]);
                c[u] = fg * c[u] + ig * gg;
                h[u] = og * tanh(c[u]);
                y[0][(n * T + t) * H + u] = h[u];
            }
        }
        for (int64_t u = 0; u < H; u++) {
            y[1][n * H + u] = h[u];
            y[2][n * H + u] = c[u];
        }
    }
    free(h);
    free(c);
    free(gt);
}

/* What the recurrent operators share: every case's sample partitions, its
 * gradients against finite differences of the reference in doubles, and the
 * refusal of a part of H or of T (no single call computes one). */
typedef void (*rnn_make_fn)(opx *o, const lstm_case *c);

static void rnn_tiles(rnn_make_fn make, uint64_t seed) {
    static const int degs[][4] = {{2, 1, 1, 1}, {3, 1, 1, 1}, {5, 1, 1, 1}, {4, 1, 1, 1}};
    for (int i = 0; i < N_LSTM; i++) {
        opx o;
        make(&o, &lstm_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), seed + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void rnn_gradients_fd(rnn_make_fn make, fwd_d_fn f, uint64_t seed) {
    for (int i = 0; i < N_LSTM; i++) {
        opx o;
        make(&o, &lstm_cases[i]);
        check_gradients_fd(&o, f, seed + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void rnn_unsupported_tiles(rnn_make_fn make, uint64_t seed) {
    opx o;
    make(&o, &lstm_cases[1]);
    tensors T;
    tensors_init(&T, &o, seed);
    const int degs[][3] = {{1, 1, 2}, {2, 1, 4}, {1, 5, 1}};
    for (int d = 0; d < 3; d++)
        for (int fast = 0; fast < 2; fast++) {
            sf_tile t = partition_tile(&o.op->space, degs[d], 0);
            assert_int_equal(run_tile(&o, &t, fast, &T), SF_ERR_UNSUPPORTED);
        }
    tensors_free(&T, &o);
    sf_graph_free(o.g);
}

static void test_lstm_tiles(void **state) {
    (void)state;
    rnn_tiles(lstm_make, 300);
}
static void test_lstm_gradients_fd(void **state) {
    (void)state;
    rnn_gradients_fd(lstm_make, lstm_fwd_d, 400);
}
static void test_lstm_unsupported_tiles(void **state) {
    (void)state;
    rnn_unsupported_tiles(lstm_make, 450);
}

/* ---- gru --------------------------------------------------------------- */

/* the LSTM's cases, h0 given where the LSTM has its states */
static void gru_make(opx *o, const lstm_case *c) {
    sf_shape s[2];
    s[0] = sf_shape_make(3, (int64_t[]){c->n, c->t, c->i});
    s[1] = sf_shape_make(2, (int64_t[]){c->n, c->h});
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = c->h;
    opx_make(o, SF_OP_GRU, s, c->state ? 2 : 1, &p);
}

/* torch.nn.GRU step by step in double: gates r, z, n, r applied to W_hn h + b_hn. */
static void gru_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    const sf_shape *xs = &op->in_shapes[0];
    int64_t N = xs->d[0], T = xs->d[1], I = xs->d[2], H = op->params.gru.hidden, G = 3 * H;
    const double *wih = w, *whh = w + G * I, *bih = whh + G * H, *bhh = bih + G;
    double *h = dalloc(H), *gi = dalloc(G), *gh = dalloc(G);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t u = 0; u < H; u++) h[u] = op->n_inputs == 2 ? x[1][n * H + u] : 0.0;
        for (int64_t t = 0; t < T; t++) {
            for (int64_t j = 0; j < G; j++) {
                double a = bih[j], b = bhh[j];
                for (int64_t k = 0; k < I; k++) a += wih[j * I + k] * x[0][(n * T + t) * I + k];
                for (int64_t k = 0; k < H; k++) b += whh[j * H + k] * h[k];
                gi[j] = a;
                gh[j] = b;
            }
            for (int64_t u = 0; u < H; u++) {
                double r = sigm_d(gi[u] + gh[u]), z = sigm_d(gi[H + u] + gh[H + u]);
                double nn = tanh(gi[2 * H + u] + r * gh[2 * H + u]);
                h[u] = (1 - z) * nn + z * h[u];
                y[0][(n * T + t) * H + u] = h[u];
            }
        }
        for (int64_t u = 0; u < H; u++) y[1][n * H + u] = h[u];
    }
    free(h);
    free(gi);
    free(gh);
}

static void test_gru_tiles(void **state) {
    (void)state;
    rnn_tiles(gru_make, 460);
}
static void test_gru_gradients_fd(void **state) {
    (void)state;
    rnn_gradients_fd(gru_make, gru_fwd_d, 470);
}
static void test_gru_unsupported_tiles(void **state) {
    (void)state;
    rnn_unsupported_tiles(gru_make, 480);
}

/* ---- attention --------------------------------------------------------- */

typedef struct attn_case {
    int64_t n, tq, tk; /* tk 0: self-attention */
    int64_t d, heads;
    int causal, bias;
    double drop; /* dropout of the probabilities */
} attn_case;

static const attn_case attn_cases[] = {
    {1, 1, 0, 1, 1, 0, 1, 0}, /* all ones */
    {2, 5, 0, 6, 2, 0, 1, 0}, /* self */
    {2, 5, 0, 6, 3, 1, 1, 0}, /* self, causal */
    {3, 4, 7, 4, 2, 0, 1, 0}, /* cross, more keys than queries */
    {2, 6, 3, 6, 3, 1, 0, 0}, /* cross, causal, fewer keys than queries, no bias */
    {1, 7, 0, 5, 5, 1, 0, 0}, /* prime D, one unit per head, causal */
    {2, 3, 0, 7, 1, 0, 1, 0}, /* prime D, one head */
    {1, 1, 5, 3, 3, 0, 1, 0}, /* one query */
    /* dropout: self causal, cross, one head, many heads */
    {2, 5, 0, 6, 3, 1, 1, 0.3},
    {3, 4, 7, 4, 2, 0, 1, 0.5},
    {2, 3, 0, 7, 1, 0, 0, 0.2},
    {2, 6, 0, 8, 4, 1, 1, 0.1},
};
#define N_ATTN ((int)(sizeof attn_cases / sizeof attn_cases[0]))

static void attn_make(opx *o, const attn_case *c) {
    sf_shape s[2];
    s[0] = sf_shape_make(3, (int64_t[]){c->n, c->tq, c->d});
    s[1] = sf_shape_make(3, (int64_t[]){c->n, c->tk, c->d});
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = c->d;
    p.attention.heads = c->heads;
    p.attention.causal = c->causal;
    p.attention.bias = c->bias;
    p.attention.dropout = c->drop;
    opx_make(o, SF_OP_ATTENTION, s, c->tk ? 2 : 1, &p);
}

/* The dropout mask, as op_dropout.c's header defines it (written again): element
 * e of the probabilities (N, heads, Tq, Tk) is kept when the top 24 bits of
 * splitmix64(key + e * golden) are at least p * 2^24, key = splitmix64(seed ^
 * op id * golden); kept ones are scaled by 1 / (1 - p). */
static uint64_t mix_d(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double attn_drop_d(const sf_op *op, int64_t e) {
    const uint64_t golden = 0x9e3779b97f4a7c15ull;
    double p = op->params.attention.dropout;
    if (p == 0) return 1.0;
    uint64_t key = mix_d(RUN_SEED ^ ((uint64_t)op->id * golden));
    int keep = (mix_d(key + (uint64_t)e * golden) >> 40) >= (uint64_t)(p * 16777216.0);
    return keep ? (double)(float)(1.0 / (1.0 - p)) : 0.0;
}

/* Multi-head attention in double, as torch.nn.MultiheadAttention defines it. */
static void attn_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    const sf_attention_params *p = &op->params.attention;
    int64_t N = op->in_shapes[0].d[0], Tq = op->in_shapes[0].d[1], D = p->embed_dim;
    int64_t Tk = op->in_shapes[op->n_inputs - 1].d[1], nh = p->heads, hd = D / nh;
    const double *mem = x[op->n_inputs - 1];
    const double *bq = p->bias ? w + 4 * D * D : NULL;
    double *q = dalloc(Tq * D), *k = dalloc(Tk * D), *v = dalloc(Tk * D), *ctx = dalloc(Tq * D);
    double *s = dalloc(Tk);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t r = 0; r < Tk || r < Tq; r++)
            for (int64_t o = 0; o < D; o++) {
                for (int m = 0; m < 3; m++) {
                    int64_t rows = m == 0 ? Tq : Tk;
                    if (r >= rows) continue;
                    const double *xr = (m == 0 ? x[0] : mem) + (n * rows + r) * D;
                    double acc = bq ? bq[m * D + o] : 0.0;
                    for (int64_t e = 0; e < D; e++) acc += w[m * D * D + o * D + e] * xr[e];
                    (m == 0 ? q : m == 1 ? k : v)[r * D + o] = acc;
                }
            }
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < Tq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < Tk; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < hd; e++)
                        acc += q[i * D + h * hd + e] * k[j * D + h * hd + e];
                    s[j] = acc / sqrt((double)hd);
                    if (!(p->causal && j > i) && s[j] > mx) mx = s[j];
                }
                for (int64_t j = 0; j < Tk; j++) {
                    s[j] = p->causal && j > i ? 0.0 : exp(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t j = 0; j < Tk; j++)
                    s[j] *= attn_drop_d(op, ((n * nh + h) * Tq + i) * Tk + j);
                for (int64_t e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Tk; j++) acc += s[j] / sum * v[j * D + h * hd + e];
                    ctx[i * D + h * hd + e] = acc;
                }
            }
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t o = 0; o < D; o++) {
                double acc = p->bias ? w[4 * D * D + 3 * D + o] : 0.0;
                for (int64_t e = 0; e < D; e++) acc += w[3 * D * D + o * D + e] * ctx[i * D + e];
                y[0][(n * Tq + i) * D + o] = acc;
            }
    }
    free(q);
    free(k);
    free(v);
    free(ctx);
    free(s);
}

static void test_attention_tiles(void **state) {
    (void)state;
    static const int degs[][4] = {
        {2, 3, 1, 1},
        {1, 2, 2, 1},
        {1, 1, 3, 1},
        {3, 1, 1, 1},
        {2, 2, 2, 1},
        {1, 4, 1, 1},
        {1, 1, 7, 1},
        {1, 8, 1, 1}, /* empty query tiles */
        /* heads (a reduction: the parts' outputs are partial sums that add up),
         * alone, with samples, rows (causal blocks) and D, more parts than heads */
        {1, 1, 1, 2},
        {2, 1, 1, 3},
        {1, 3, 1, 2},
        {1, 1, 2, 2},
        {1, 1, 1, 5},
    };
    for (int i = 0; i < N_ATTN; i++) {
        opx o;
        attn_make(&o, &attn_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 500 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_attention_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_ATTN; i++) {
        opx o;
        attn_make(&o, &attn_cases[i]);
        check_gradients_fd(&o, attn_fwd_d, 600 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* Larger shapes than finite differences allow: more heads and keys, causal. */
static void test_attention_larger(void **state) {
    (void)state;
    static const attn_case big[] = {
        {3, 33, 0, 48, 4, 1, 1, 0}, {2, 17, 41, 32, 8, 0, 1, 0}, {2, 33, 0, 48, 8, 1, 1, 0.1}};
    static const int degs[][4] = {{3, 2, 1, 1}, {1, 3, 2, 1}, {1, 2, 1, 4}, {2, 1, 1, 3}};
    for (int i = 0; i < 3; i++) {
        opx o;
        attn_make(&o, &big[i]);
        check_partitions(&o, degs, 4, 650 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* ---- accumulation, NULL gradients, dispatch ------------------------------ */

/* Backward of one (partial) tile twice gives twice once, for every gradient;
 * NULL grad_weights and NULL grad_in entries are skipped without touching the
 * others; the workspace is checked at the boundary. */
static void check_accumulates(const opx *o, const int *deg, int part, uint64_t seed) {
    const sf_op *op = o->op;
    sf_tile t = partition_tile(&op->space, deg, part);
    assert_false(sf_tile_empty(&t));
    tensors T;
    tensors_init(&T, o, seed);
    sf_tile r[MAX_IO], ot[MAX_IO];
    float *xb[MAX_IO] = {0}, *d1[MAX_IO] = {0}, *d2[MAX_IO] = {0}, *d3[MAX_IO] = {0};
    float *yb[MAX_IO] = {0}, *dyb[MAX_IO] = {0};
    for (int i = 0; i < o->n_in; i++) {
        sf_op_input_region(op, &t, i, &r[i]);
        int64_t n = sf_tile_numel(&r[i]);
        xb[i] = falloc(n);
        d1[i] = falloc(n);
        d2[i] = falloc(n);
        d3[i] = falloc(n);
        region_copy(T.x[i], &op->in_shapes[i], &r[i], xb[i], 0);
    }
    for (int k = 0; k < o->n_out; k++) {
        sf_op_output_tile(op, &t, k, &ot[k]);
        yb[k] = falloc(sf_tile_numel(&ot[k]));
        dyb[k] = falloc(sf_tile_numel(&ot[k]));
        region_copy(T.dy[k], &op->out_shapes[k], &ot[k], dyb[k], 0);
    }
    size_t ws = sf_kernel_workspace_bytes(op, &t, 1);
    assert_true(ws >= sf_kernel_workspace_bytes(op, &t, 0));
    float *wsp = ws_alloc(ws);
    float *dw1 = falloc(o->n_w), *dw2 = falloc(o->n_w);
    const float *in_arr[MAX_IO] = {xb[0], xb[1], xb[2]};
    const float *dy_arr[MAX_IO] = {dyb[0], dyb[1], dyb[2]};
    for (int fast = 0; fast < 2; fast++) {
        for (int i = 0; i < o->n_in; i++) {
            size_t b = (size_t)sf_tile_numel(&r[i]) * sizeof(float);
            memset(d1[i], 0, b);
            memset(d2[i], 0, b);
            memset(d3[i], 0, b);
        }
        memset(dw1, 0, (size_t)o->n_w * sizeof(float));
        memset(dw2, 0, (size_t)o->n_w * sizeof(float));
        sf_kernel_args a = {
            .op = op,
            .tile = t,
            .n_inputs = o->n_in,
            .in = in_arr,
            .in_region = r,
            .n_outputs = o->n_out,
            .out = yb,
            .weights = T.w,
            .grad_out = dy_arr,
            .grad_in = d1,
            .grad_weights = dw1,
            .workspace = wsp,
            .workspace_bytes = ws,
        };
        assert_int_equal(sf_kernel_forward(&a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&a, fast), SF_OK);
        sf_kernel_args twice = a;
        twice.grad_in = d2;
        twice.grad_weights = dw2;
        assert_int_equal(sf_kernel_backward(&twice, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&twice, fast), SF_OK);
        for (int64_t e = 0; e < o->n_w; e++) dw1[e] *= 2.0f;
        assert_true(rel_err(dw2, dw1, o->n_w) < 1e-5);
        for (int i = 0; i < o->n_in; i++) {
            int64_t n = sf_tile_numel(&r[i]);
            for (int64_t e = 0; e < n; e++) d1[i][e] *= 2.0f;
            assert_true(rel_err(d2[i], d1[i], n) < 1e-5);
        }
        /* only input 0 wanted, no weight gradient: input 0 gets exactly once */
        float *only0[MAX_IO] = {d3[0], NULL, NULL};
        sf_kernel_args some = a;
        some.grad_in = only0;
        some.grad_weights = NULL;
        assert_int_equal(sf_kernel_backward(&some, fast), SF_OK);
        int64_t n0 = sf_tile_numel(&r[0]);
        for (int64_t e = 0; e < n0; e++) d3[0][e] *= 2.0f;
        assert_true(rel_err(d3[0], d1[0], n0) < 1e-5);
        some.grad_in = NULL;
        assert_int_equal(sf_kernel_backward(&some, fast), SF_OK);
        /* a workspace one float short is refused */
        if (ws > 0) {
            sf_kernel_args bad = a;
            bad.workspace_bytes = ws - sizeof(float);
            assert_int_equal(sf_kernel_backward(&bad, fast), SF_ERR_INVALID);
        }
    }
    for (int i = 0; i < MAX_IO; i++) {
        free(xb[i]);
        free(d1[i]);
        free(d2[i]);
        free(d3[i]);
        free(yb[i]);
        free(dyb[i]);
    }
    ws_free(wsp, ws);
    free(dw1);
    free(dw2);
    tensors_free(&T, o);
}

static void test_accumulation(void **state) {
    (void)state;
    opx o;
    matmul_make(&o, &matmul_cases[4]);
    check_accumulates(&o, (int[]){3, 2, 2, 1}, 3, 700);
    check_accumulates(&o, (int[]){1, 2, 1, 2}, 3, 704); /* the second half of K */
    sf_graph_free(o.g);
    lstm_make(&o, &lstm_cases[1]);
    check_accumulates(&o, (int[]){2, 1, 1}, 1, 701);
    sf_graph_free(o.g);
    gru_make(&o, &lstm_cases[3]);
    check_accumulates(&o, (int[]){2, 1, 1}, 1, 706);
    sf_graph_free(o.g);
    attn_make(&o, &attn_cases[2]); /* self, causal: a middle block of rows, part of D */
    check_accumulates(&o, (int[]){1, 3, 2, 1}, 3, 702);
    check_accumulates(&o, (int[]){1, 3, 1, 3}, 4, 705); /* middle rows, the second head */
    sf_graph_free(o.g);
    attn_make(&o, &attn_cases[3]); /* cross */
    check_accumulates(&o, (int[]){3, 2, 2, 1}, 5, 703);
    check_accumulates(&o, (int[]){1, 2, 1, 2}, 3, 706); /* the second head, partial sum */
    sf_graph_free(o.g);
    attn_make(&o, &attn_cases[8]); /* self, causal, dropout: middle rows, the second head */
    check_accumulates(&o, (int[]){1, 3, 1, 3}, 4, 707);
    sf_graph_free(o.g);
}

/* Attention dropout is off in inference mode (the same results, bit for bit, as
 * without it) and on in training (other results). */
static void test_attention_dropout_eval(void **state) {
    (void)state;
    attn_case c = attn_cases[9], c0 = c;
    c0.drop = 0;
    opx o, o0;
    attn_make(&o, &c);
    attn_make(&o0, &c0);
    sf_tile t = sf_tile_full(&o.op->space);
    for (int fast = 0; fast < 2; fast++) {
        tensors T, T0;
        tensors_init(&T, &o, 900);
        tensors_init(&T0, &o0, 900);
        run_eval = 1;
        assert_int_equal(run_tile(&o, &t, fast, &T), SF_OK);
        run_eval = 0;
        assert_int_equal(run_tile(&o0, &t, fast, &T0), SF_OK);
        size_t ny = (size_t)o.out_n[0] * sizeof(float);
        assert_memory_equal(T.y[0], T0.y[0], ny);
        assert_memory_equal(T.dx[0], T0.dx[0], (size_t)o.in_n[0] * sizeof(float));
        assert_memory_equal(T.dw, T0.dw, (size_t)o.n_w * sizeof(float));
        tensors_clear(&T, &o);
        assert_int_equal(run_tile(&o, &t, fast, &T), SF_OK);
        assert_true(rel_err(T.y[0], T0.y[0], o.out_n[0]) > 1e-2);
        tensors_free(&T, &o);
        tensors_free(&T0, &o0);
    }
    sf_graph_free(o.g);
    sf_graph_free(o0.g);
}

/* ---- conv_transpose2d ------------------------------------------------------ */

typedef struct convt_case {
    int64_t n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, oph, opw;
    int bias;
} convt_case;

static const convt_case convt_cases[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1}, /* all ones */
    {2, 3, 4, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1}, /* U-Net's: stride 2, output_padding 1 */
    {2, 2, 3, 3, 3, 2, 2, 2, 2, 0, 0, 0, 0, 0}, /* kernel = stride: no overlap, no bias */
    {1, 3, 5, 4, 2, 4, 3, 3, 1, 2, 0, 2, 0, 1}, /* uneven strides, kernel above stride */
    {3, 2, 4, 4, 5, 3, 1, 1, 1, 1, 0, 0, 0, 1}, /* stride 1: a padded conv's transpose */
};
#define N_CONVT ((int)(sizeof convt_cases / sizeof convt_cases[0]))

static void convt_make(opx *o, const convt_case *c) {
    sf_shape s = sf_shape_make(4, (int64_t[]){c->n, c->cin, c->h, c->w});
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV_TRANSPOSE2D, &p);
    sf_conv_transpose2d_params *q = &p.conv_transpose2d;
    q->out_channels = c->cout;
    q->kernel[0] = c->kh;
    q->kernel[1] = c->kw;
    q->stride[0] = c->sh;
    q->stride[1] = c->sw;
    q->padding[0] = c->ph;
    q->padding[1] = c->pw;
    q->output_padding[0] = c->oph;
    q->output_padding[1] = c->opw;
    q->bias = c->bias;
    opx_make(o, SF_OP_CONV_TRANSPOSE2D, &s, 1, &p);
}

/* The definition, in double, written as a gather: y[n, co, oh, ow] = b[co] +
 * sum over ci, i, j with oh = ih*s - p + i (ih whole) of x[n, ci, ih, iw] W[ci, co, i, j]. */
static void convt_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    const sf_conv_transpose2d_params *c = &op->params.conv_transpose2d;
    const sf_shape *is = &op->in_shapes[0], *os = &op->out_shapes[0];
    int64_t N = is->d[0], CI = is->d[1], H = is->d[2], Wd = is->d[3];
    int64_t CO = os->d[1], OH = os->d[2], OW = os->d[3], kh = c->kernel[0], kw = c->kernel[1];
    for (int64_t n = 0; n < N; n++)
        for (int64_t co = 0; co < CO; co++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = c->bias ? w[CI * CO * kh * kw + co] : 0.0;
                    for (int64_t ci = 0; ci < CI; ci++)
                        for (int64_t i = 0; i < kh; i++)
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t th = oh + c->padding[0] - i, tw = ow + c->padding[1] - j;
                                if (th < 0 || tw < 0 || th % c->stride[0] || tw % c->stride[1])
                                    continue;
                                int64_t ih = th / c->stride[0], iw = tw / c->stride[1];
                                if (ih >= H || iw >= Wd) continue;
                                acc += x[0][((n * CI + ci) * H + ih) * Wd + iw] *
                                       w[((ci * CO + co) * kh + i) * kw + j];
                            }
                    y[0][((n * CO + co) * OH + oh) * OW + ow] = acc;
                }
}

static void test_convt_tiles(void **state) {
    (void)state;
    static const int degs[][4] = {
        {2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 3, 1}, {1, 1, 1, 2},
        {2, 2, 2, 2}, {1, 3, 2, 1}, {1, 1, 5, 4}, /* more parts than rows: empty tiles */
    };
    for (int i = 0; i < N_CONVT; i++) {
        opx o;
        convt_make(&o, &convt_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 800 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_convt_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_CONVT; i++) {
        opx o;
        convt_make(&o, &convt_cases[i]);
        check_gradients_fd(&o, convt_fwd_d, 850 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

/* ---- resize ------------------------------------------------------------- */

typedef struct resize_case {
    int64_t n, c, h, w, oh, ow;
    int mode, align;
} resize_case;

static const resize_case resize_cases[] = {
    {2, 3, 4, 5, 8, 10, SF_RESIZE_NEAREST, 0},  /* nn.Upsample(scale_factor=2) */
    {1, 2, 5, 3, 7, 4, SF_RESIZE_NEAREST, 0},   /* uneven factors */
    {2, 2, 4, 5, 8, 10, SF_RESIZE_BILINEAR, 0}, /* bilinear x2, half pixel */
    {1, 3, 3, 4, 7, 9, SF_RESIZE_BILINEAR, 1},  /* align_corners */
    {2, 1, 6, 5, 3, 2, SF_RESIZE_BILINEAR, 0},  /* downsampling */
    {1, 2, 1, 4, 3, 1, SF_RESIZE_BILINEAR, 1},  /* sizes of 1 */
};
#define N_RESIZE ((int)(sizeof resize_cases / sizeof resize_cases[0]))

static void resize_make(opx *o, const resize_case *c) {
    sf_shape s = sf_shape_make(4, (int64_t[]){c->n, c->c, c->h, c->w});
    sf_op_params p;
    sf_op_params_default(SF_OP_RESIZE, &p);
    p.resize.mode = c->mode;
    p.resize.size[0] = c->oh;
    p.resize.size[1] = c->ow;
    p.resize.align_corners = c->align;
    opx_make(o, SF_OP_RESIZE, &s, 1, &p);
}

/* torch's source coordinate of output index o (in -> out), the definition again */
static void resize_src_d(const sf_resize_params *p, int64_t in, int64_t out, int64_t o, int64_t *i0,
                         int64_t *i1, double *f) {
    if (p->mode == SF_RESIZE_NEAREST) {
        int64_t i = (int64_t)floor((double)o * (double)in / (double)out);
        *i0 = *i1 = i < in - 1 ? i : in - 1;
        *f = 0;
        return;
    }
    double s = p->align_corners ? (out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0)
                                : fmax(0.0, ((double)o + 0.5) * (double)in / (double)out - 0.5);
    *i0 = (int64_t)floor(s);
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *f = s - (double)*i0;
}

static void resize_fwd_d(const sf_op *op, double *const *x, const double *w, double *const *y) {
    (void)w;
    const sf_resize_params *p = &op->params.resize;
    const sf_shape *is = &op->in_shapes[0];
    int64_t planes = is->d[0] * is->d[1], H = is->d[2], W = is->d[3];
    int64_t OH = p->size[0], OW = p->size[1];
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                int64_t a0, a1, b0, b1;
                double fh, fw;
                resize_src_d(p, H, OH, i, &a0, &a1, &fh);
                resize_src_d(p, W, OW, j, &b0, &b1, &fw);
                const double *xp = x[0] + pl * H * W;
                y[0][(pl * OH + i) * OW + j] =
                    (1 - fh) * ((1 - fw) * xp[a0 * W + b0] + fw * xp[a0 * W + b1]) +
                    fh * ((1 - fw) * xp[a1 * W + b0] + fw * xp[a1 * W + b1]);
            }
}

static void test_resize_tiles(void **state) {
    (void)state;
    static const int degs[][4] = {{2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 3, 1},
                                  {1, 1, 1, 2}, {2, 1, 2, 3}, {1, 1, 7, 9}};
    for (int i = 0; i < N_RESIZE; i++) {
        opx o;
        resize_make(&o, &resize_cases[i]);
        check_partitions(&o, degs, (int)(sizeof degs / sizeof degs[0]), 880 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_resize_gradients_fd(void **state) {
    (void)state;
    for (int i = 0; i < N_RESIZE; i++) {
        opx o;
        resize_make(&o, &resize_cases[i]);
        check_gradients_fd(&o, resize_fwd_d, 890 + (uint64_t)i);
        sf_graph_free(o.g);
    }
}

static void test_available(void **state) {
    (void)state;
    const sf_op_type types[] = {SF_OP_MATMUL, SF_OP_LSTM, SF_OP_ATTENTION, SF_OP_CONV_TRANSPOSE2D,
                                SF_OP_GRU};
    for (int i = 0; i < 5; i++)
        assert_true(sf_kernel_available(types[i], 0) && sf_kernel_available(types[i], 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_available),
        cmocka_unit_test(test_matmul_tiles),
        cmocka_unit_test(test_matmul_gradients_fd),
        cmocka_unit_test(test_lstm_tiles),
        cmocka_unit_test(test_lstm_gradients_fd),
        cmocka_unit_test(test_lstm_unsupported_tiles),
        cmocka_unit_test(test_gru_tiles),
        cmocka_unit_test(test_gru_gradients_fd),
        cmocka_unit_test(test_gru_unsupported_tiles),
        cmocka_unit_test(test_attention_tiles),
        cmocka_unit_test(test_attention_gradients_fd),
        cmocka_unit_test(test_attention_larger),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_attention_dropout_eval),
        cmocka_unit_test(test_convt_tiles),
        cmocka_unit_test(test_convt_gradients_fd),
        cmocka_unit_test(test_resize_tiles),
        cmocka_unit_test(test_resize_gradients_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
