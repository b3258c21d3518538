/*
 * bench_kernels.c - how fast the fast conv2d, linear, lstm and attention kernels
 * run on one core.
 *
 * The yardstick is single-thread SGEMM on 1024^3, the best this BLAS does on
 * this core; each kernel is timed forward + backward (input and weight
 * gradients) on a whole layer at a representative shape, and its rate is
 * (flops_fwd + flops_bwd from sf_op_tile_cost) / time, so that it is counted the
 * way the cost model counts it and im2col, permutes and col2im are overhead.
 * Every figure is the best of `reps` runs after one warm-up run: the best run is
 * the one least disturbed by the rest of the machine. SGEMM is measured before
 * and after the kernels and the better rate is the yardstick.
 *
 * One thread, because the runtime gives one core per rank and because the
 * target (>= 60% of SGEMM at every shape) is a per-core statement.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_impl.h"

typedef struct bench_case {
    const char *name;
    sf_op_type type;
    int ndim;
    int64_t in[4];
    int64_t out;      /* out_channels, out_features, hidden, or heads (attention) */
    int64_t k, s, p;  /* conv: square kernel, stride, padding */
} bench_case;

static const bench_case bench_cases[] = {
    {"conv2d:lenet5.conv2 b64", SF_OP_CONV2D, 4, {64, 6, 14, 14}, 16, 5, 1, 0},
    {"linear:lenet5.fc1 b64", SF_OP_LINEAR, 2, {64, 400, 0, 0}, 120, 0, 0, 0},
    {"conv2d:alexnet.conv2 b64", SF_OP_CONV2D, 4, {64, 64, 27, 27}, 192, 5, 1, 2},
    {"conv2d:alexnet.conv3 b64", SF_OP_CONV2D, 4, {64, 192, 13, 13}, 384, 3, 1, 1},
    {"linear:alexnet.fc6 b64", SF_OP_LINEAR, 2, {64, 9216, 0, 0}, 4096, 0, 0, 0},
    /* batch 16, not 64: a whole-batch pass takes seconds on one core */
    {"conv2d:resnet.3x3 64->64 56x56 b16", SF_OP_CONV2D, 4, {16, 64, 56, 56}, 64, 3, 1, 1},
    /* one chunk of nmt's LSTM (4 steps, 1024 -> 1024) */
    {"lstm:nmt.lstm 1024 t4 b64", SF_OP_LSTM, 3, {64, 4, 1024, 0}, 1024, 0, 0, 0},
    /* one BERT-base self-attention layer at batch 8 (sequence 128, width 768, 12 heads) */
    {"attention:bert d768 h12 t128 b8", SF_OP_ATTENTION, 3, {8, 128, 768, 0}, 12, 0, 0, 0},
};

static double bench_sgemm(int reps, sf_error *err, sf_status *st) {
    const int64_t n = 1024;
    float *a = malloc((size_t)(3 * n * n) * sizeof *a);
    if (!a) {
        *st = sf_error_set(err, SF_ERR_NOMEM, "out of memory for the SGEMM benchmark");
        return 0;
    }
    float *b = a + n * n, *c = b + n * n;
    for (int64_t i = 0; i < 2 * n * n; i++) a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* run 0 warms up */
        double t0 = sf_now_s();
        sf_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = sf_now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    free(a);
    *st = SF_OK;
    return 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
}

/* Forward + backward of one whole layer; returns GFLOP/s or 0 with *st set. */
static double bench_case_run(const bench_case *bc, int reps, sf_error *err, sf_status *st) {
    sf_graph *g = sf_graph_new("bench");
    if (!g) {
        *st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return 0;
    }
    sf_shape s = sf_shape_make(bc->ndim, bc->in);
    sf_op_params p;
    sf_op_params_default(bc->type, &p);
    if (bc->type == SF_OP_CONV2D) {
        p.conv2d.out_channels = bc->out;
        p.conv2d.kernel[0] = p.conv2d.kernel[1] = bc->k;
        p.conv2d.stride[0] = p.conv2d.stride[1] = bc->s;
        p.conv2d.padding[0] = p.conv2d.padding[1] = bc->p;
    } else if (bc->type == SF_OP_LSTM) {
        p.lstm.hidden = bc->out;
    } else if (bc->type == SF_OP_ATTENTION) {
        p.attention.embed_dim = bc->in[2];
        p.attention.heads = bc->out;
    } else {
        p.linear.out_features = bc->out;
    }
    double gflops = 0;
    float *mem = NULL;
    int x = sf_graph_add_input(g, "x", &s, 0, err);
    sf_tensor_ref xr = {x, 0};
    int id = x < 0 ? x : sf_graph_add_op(g, bc->type, bc->name, &p, &xr, 1, err);
    if (id < 0) {
        *st = (sf_status)id;
        goto done;
    }
    const sf_op *op = sf_graph_op(g, id);
    sf_tile t = sf_tile_full(&op->space), r;
    sf_op_input_region(op, &t, 0, &r);
    enum { MAX_OUT = 3 };
    sf_tile ot[MAX_OUT];
    int64_t n_in = sf_tile_numel(&r), n_w = op->n_params, n_out = 0, n_o[MAX_OUT];
    int nout = op->n_outputs < MAX_OUT ? op->n_outputs : MAX_OUT;
    for (int k = 0; k < nout; k++) {
        sf_op_output_tile(op, &t, k, &ot[k]);
        n_o[k] = sf_tile_numel(&ot[k]);
        n_out += n_o[k];
    }
    size_t ws_f = sf_kernel_workspace_bytes(op, &t, 0), ws_b = sf_kernel_workspace_bytes(op, &t, 1);
    size_t ws = ws_f > ws_b ? ws_f : ws_b;
    int64_t n_ws = (int64_t)(ws / sizeof(float)) + 1;
    int64_t total = 2 * n_in + 2 * n_out + 2 * n_w + n_ws;
    mem = malloc((size_t)total * sizeof *mem);
    if (!mem) {
        *st = sf_error_set(err, SF_ERR_NOMEM, "out of memory for %s", bc->name);
        goto done;
    }
    float *xb = mem, *dx = xb + n_in, *ys = dx + n_in, *dys = ys + n_out, *w = dys + n_out;
    float *dw = w + n_w, *wsb = dw + n_w;
    for (int64_t i = 0; i < total; i++) mem[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    /* Weights scaled as a framework initializes them, U(-1, 1) / sqrt(fan-in): with
     * unscaled weights an LSTM's gates saturate and its backward pass runs on
     * denormal numbers, which x86 cores process a hundred times slower. */
    int64_t units = bc->type == SF_OP_LSTM ? 4 * bc->out
                    : bc->type == SF_OP_ATTENTION ? 4 * bc->in[2] : bc->out;
    float scale = 2.0f / sqrtf((float)(n_w / (units > 0 ? units : 1) + 1));
    for (int64_t i = 0; i < n_w; i++) w[i] *= scale;
    const float *in_arr[1] = {xb};
    float *out_arr[MAX_OUT];
    const float *dy_arr[MAX_OUT];
    float *dx_arr[1] = {dx};
    for (int k = 0, off = 0; k < nout; off += (int)n_o[k], k++) {
        out_arr[k] = ys + off;
        dy_arr[k] = dys + off;
    }
    sf_kernel_args a = {
        .op = op, .tile = t, .n_inputs = 1, .in = in_arr, .in_region = &r, .n_outputs = nout,
        .out = out_arr, .weights = w, .grad_out = dy_arr, .grad_in = dx_arr, .grad_weights = dw,
        .workspace = wsb, .workspace_bytes = ws,
    };
    double best = 1e30;
    for (int rep = 0; rep <= reps; rep++) {
        double t0 = sf_now_s();
        *st = sf_kernel_forward(&a, 1);
        if (*st == SF_OK) *st = sf_kernel_backward(&a, 1);
        double dt = sf_now_s() - t0;
        if (*st != SF_OK) {
            sf_error_set(err, *st, "%s: kernel failed", bc->name);
            goto done;
        }
        if (rep > 0 && dt < best) best = dt;
    }
    sf_op_cost cost;
    sf_op_tile_cost(op, &t, &cost);
    gflops = (cost.flops_fwd + cost.flops_bwd) / best * 1e-9;
    *st = SF_OK;
done:
    free(mem);
    sf_graph_free(g);
    return gflops;
}

sf_status sf_bench_kernels(FILE *out, int json, int reps, sf_error *err) {
    if (!out || reps < 1) return sf_error_set(err, SF_ERR_INVALID, "bench: reps must be >= 1");
    sf_kernels_set_threads(1);
    enum { N_CASES = (int)(sizeof bench_cases / sizeof bench_cases[0]) };
    double rate[N_CASES];
    sf_status st;
    double sgemm = bench_sgemm(reps, err, &st);
    if (st != SF_OK) return st;
    for (int i = 0; i < N_CASES; i++) {
        rate[i] = bench_case_run(&bench_cases[i], reps, err, &st);
        if (st != SF_OK) return st;
    }
    /* SGEMM again at the end: on a shared machine the clock drifts, and the
     * better of the two keeps the ratios conservative */
    double again = bench_sgemm(reps, err, &st);
    if (st != SF_OK) return st;
    if (again > sgemm) sgemm = again;
    if (json) {
        fprintf(out, "{\"sgemm_gflops\": %.2f, \"kernels\": [", sgemm);
        for (int i = 0; i < N_CASES; i++)
            fprintf(out, "%s{\"name\": \"%s\", \"gflops\": %.2f, \"ratio\": %.3f}", i ? ", " : "",
                    bench_cases[i].name, rate[i], rate[i] / sgemm);
        fprintf(out, "]}\n");
    } else {
        fprintf(out, "single-thread SGEMM 1024^3: %.2f GFLOP/s (best of %d)\n", sgemm, reps);
        fprintf(out, "%-38s %10s %8s\n", "kernel (fast, forward+backward)", "GFLOP/s", "ratio");
        for (int i = 0; i < N_CASES; i++)
            fprintf(out, "%-38s %10.2f %8.3f\n", bench_cases[i].name, rate[i], rate[i] / sgemm);
    }
    return ferror(out) ? sf_error_set(err, SF_ERR_IO, "bench: write failed") : SF_OK;
}
