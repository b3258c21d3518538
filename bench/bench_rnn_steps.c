/*
 * bench_rnn_steps.c - does the runtime's CPU LSTM (and GRU) follow the per-step
 * shape the cost model gives recurrences (issue 30, item 2)?
 *
 *     bench_rnn_steps [machine] [reps] [hidden]     (default cpu, 5, 256)
 *
 * The analytic model on a device with rnn_per_step prices a tile of n samples
 * and S steps as an input projection of all steps, then S recurrent products
 * and gate kernels one after another, then batched backward products: a time
 * affine in S whose per-step term does not shrink with n as fast as the
 * FLOPs do (one step's small product reads the whole W_hh). The profiled model
 * answers a tile it has no entry for with S times a measured one-step tile.
 * This program measures the real fast kernels with the profiler
 * (sf_profile_model: one thread, `warmup` untimed runs, medians of `reps`
 * timed ones) on one-operator graphs and prints, for each operator and batch:
 *
 *   - the measured forward and backward times at S = 1 .. 64, the least-squares
 *     line a + b S through them and its largest residual (the affine shape);
 *   - the profiled model's answer S x t(1) and its error;
 *   - the analytic per-step model's time on `machine` with rnn_per_step set
 *     (the machine's own figures: a file from `soapflow calibrate` for this
 *     host's rates), as ratios t(S) / t(1) beside the measured ones;
 *
 * and a sweep at fixed FLOPs (n x S = 256): there the one-product model gives
 * one time for every S and the per-step model a time that grows with S.
 * Figures go to bench/RESULTS.md with the command; the unit test
 * (tests/test_rnn_steps.c) checks the model's shape and holds it against the
 * figures this program stored in tests/fixtures/rnn_steps_cpu.txt (--fixture).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"

static sf_graph *rnn_graph(sf_op_type type, int64_t n, int64_t steps, int64_t in, int64_t h) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new(type == SF_OP_GRU ? "gru" : "lstm");
    sf_shape s = sf_shape_make(3, (int64_t[]){n, steps, in});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(type, &p);
    if (type == SF_OP_GRU)
        p.gru.hidden = h;
    else
        p.lstm.hidden = h;
    if (x < 0 || sf_graph_add_op(g, type, "rnn", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err) < 0) {
        fprintf(stderr, "bench_rnn_steps: %s\n", err.msg);
        sf_graph_free(g);
        return NULL;
    }
    return g;
}

typedef struct point {
    double fwd_s, bwd_s;       /* measured medians */
    double a_fwd_s, a_bwd_s;   /* the analytic per-step model */
    double a1_fwd_s, a1_bwd_s; /* the analytic one-product model (rnn_per_step off) */
} point;

/* Measure one (type, n, S, H) tile on the CPU kernels; 0 on success. */
static int measure(sf_op_type type, int64_t n, int64_t steps, int64_t h, const sf_machine *m,
                   sf_cost_model *step_cm, sf_cost_model *one_cm, int reps, point *pt) {
    sf_error err = {0};
    sf_graph *g = rnn_graph(type, n, steps, h, h);
    if (!g) return 1;
    const sf_op *op = sf_graph_op(g, 1);
    sf_tile t = sf_tile_full(&op->space);
    sf_profile_db *db = sf_profile_db_new(NULL);
    sf_profile_options o;
    sf_profile_options_default(&o);
    o.reps = reps;
    o.max_devices = 1;
    sf_profile_report r;
    int rc = 1;
    char key[SF_PROFILE_KEY_MAX];
    const sf_profile_entry *e = NULL;
    if (db && sf_profile_model(g, m, db, &o, &r, &err) == SF_OK &&
        sf_profile_key(op, &t, key, sizeof key))
        e = sf_profile_db_lookup(db, key);
    if (e) {
        pt->fwd_s = e->fwd_s;
        pt->bwd_s = e->bwd_s;
        sf_cost_task_fwd_bwd_s(step_cm, op, &t, 0, &pt->a_fwd_s, &pt->a_bwd_s);
        sf_cost_task_fwd_bwd_s(one_cm, op, &t, 0, &pt->a1_fwd_s, &pt->a1_bwd_s);
        rc = 0;
    } else {
        fprintf(stderr, "bench_rnn_steps: not measured: %s\n", err.msg[0] ? err.msg : "no entry");
    }
    sf_profile_db_free(db);
    sf_graph_free(g);
    return rc;
}

/* Least squares y = a + b x in relative terms (weights 1 / y^2, so that the
 * short runs count as much as the long ones); the largest |residual| / y. */
static void fit(const double *x, const double *y, int k, double *a, double *b, double *worst) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < k; i++) {
        double w = 1 / (y[i] * y[i]);
        sw += w;
        sx += w * x[i];
        sy += w * y[i];
        sxx += w * x[i] * x[i];
        sxy += w * x[i] * y[i];
    }
    *b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    *a = (sy - *b * sx) / sw;
    *worst = 0;
    for (int i = 0; i < k; i++) {
        double r = fabs(*a + *b * x[i] - y[i]) / y[i];
        if (r > *worst) *worst = r;
    }
}

enum { NSTEPS = 7 };
static const int64_t STEPS[NSTEPS] = {1, 2, 4, 8, 16, 32, 64};

static int series(FILE *fx, sf_op_type type, int64_t n, int64_t h, const sf_machine *m,
                  sf_cost_model *step_cm, sf_cost_model *one_cm, int reps) {
    const char *name = type == SF_OP_GRU ? "gru" : "lstm";
    point pts[NSTEPS];
    double x[NSTEPS], yf[NSTEPS], yb[NSTEPS];
    for (int i = 0; i < NSTEPS; i++) {
        if (measure(type, n, STEPS[i], h, m, step_cm, one_cm, reps, &pts[i])) return 1;
        x[i] = (double)STEPS[i];
        yf[i] = pts[i].fwd_s;
        yb[i] = pts[i].bwd_s;
        if (fx)
            fprintf(fx, "%s %lld %lld %lld %.6e %.6e\n", name, (long long)n, (long long)STEPS[i],
                    (long long)h, pts[i].fwd_s, pts[i].bwd_s);
    }
    double af, bf, wf, ab, bb, wb;
    fit(x, yf, NSTEPS, &af, &bf, &wf);
    fit(x, yb, NSTEPS, &ab, &bb, &wb);
    printf("\n%s, n = %lld, H = I = %lld: fwd line %.3f + %.4f S ms (worst residual %.1f%%), "
           "bwd %.3f + %.4f S ms (%.1f%%)\n",
           name, (long long)n, (long long)h, af * 1e3, bf * 1e3, 100 * wf, ab * 1e3, bb * 1e3,
           100 * wb);
    printf("| S | fwd ms | bwd ms | S x t(1) fwd err | bwd err | fwd t(S)/t(1) measured | "
           "per-step model | bwd measured | per-step model |\n|---:|---:|---:|---:|---:|---:|---:|"
           "---:|---:|\n");
    for (int i = 0; i < NSTEPS; i++) {
        double s = x[i];
        printf("| %lld | %.3f | %.3f | %+.1f%% | %+.1f%% | %.2f | %.2f | %.2f | %.2f |\n",
               (long long)STEPS[i], pts[i].fwd_s * 1e3, pts[i].bwd_s * 1e3,
               100 * (s * pts[0].fwd_s / pts[i].fwd_s - 1),
               100 * (s * pts[0].bwd_s / pts[i].bwd_s - 1), pts[i].fwd_s / pts[0].fwd_s,
               pts[i].a_fwd_s / pts[0].a_fwd_s, pts[i].bwd_s / pts[0].bwd_s,
               pts[i].a_bwd_s / pts[0].a_bwd_s);
    }
    return 0;
}

/* n x S = 256: the same FLOPs at every S. */
static int fixed_flops(FILE *fx, sf_op_type type, int64_t h, const sf_machine *m,
                       sf_cost_model *step_cm, sf_cost_model *one_cm, int reps) {
    const char *name = type == SF_OP_GRU ? "gru" : "lstm";
    static const int64_t S[] = {1, 4, 16, 64, 256};
    point pts[5];
    printf("\n%s, n x S = 256, H = I = %lld (the same FLOPs):\n", name, (long long)h);
    printf("| S | n | fwd ms | bwd ms | fwd / S=1 measured | per-step model | one product | "
           "bwd / S=1 measured | per-step model | one product |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < 5; i++) {
        int64_t n = 256 / S[i];
        if (measure(type, n, S[i], h, m, step_cm, one_cm, reps, &pts[i])) return 1;
        if (fx)
            fprintf(fx, "%s %lld %lld %lld %.6e %.6e\n", name, (long long)n, (long long)S[i],
                    (long long)h, pts[i].fwd_s, pts[i].bwd_s);
        printf("| %lld | %lld | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
               (long long)S[i], (long long)n, pts[i].fwd_s * 1e3, pts[i].bwd_s * 1e3,
               pts[i].fwd_s / pts[0].fwd_s, pts[i].a_fwd_s / pts[0].a_fwd_s,
               pts[i].a1_fwd_s / pts[0].a1_fwd_s, pts[i].bwd_s / pts[0].bwd_s,
               pts[i].a_bwd_s / pts[0].a_bwd_s, pts[i].a1_bwd_s / pts[0].a1_bwd_s);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *machine = "cpu", *fixture = NULL;
    int reps = 5;
    int64_t h = 256;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fixture") == 0 && i + 1 < argc) {
            fixture = argv[++i];
            continue;
        }
        if (pos == 0)
            machine = argv[i];
        else if (pos == 1)
            reps = atoi(argv[i]);
        else if (pos == 2)
            h = atoll(argv[i]);
        pos++;
    }
    if (reps < 1 || h < 1) {
        fprintf(stderr, "usage: bench_rnn_steps [machine] [reps] [hidden] [--fixture FILE]\n");
        return 2;
    }
    sf_error err = {0};
    sf_machine *base = sf_machine_open(machine, &err);
    if (!base) {
        fprintf(stderr, "bench_rnn_steps: %s\n", err.msg);
        return 1;
    }
    sf_machine_desc d = *sf_machine_get_desc(base);
    d.kind.rnn_per_step = 1;
    sf_machine *m = sf_machine_build(&d, &err);
    d.kind.rnn_per_step = 0;
    sf_machine *m1 = sf_machine_build(&d, &err);
    if (!m || !m1) {
        fprintf(stderr, "bench_rnn_steps: %s\n", err.msg);
        return 1;
    }
    sf_cost_model *step_cm = sf_cost_analytic_new(m, NULL),
                  *one_cm = sf_cost_analytic_new(m1, NULL);
    FILE *fx = fixture ? fopen(fixture, "w") : NULL;
    if (fixture && !fx) {
        fprintf(stderr, "bench_rnn_steps: cannot write %s\n", fixture);
        return 1;
    }
    if (fx)
        fprintf(fx,
                "# bench_rnn_steps %s %d %lld: op n steps hidden(=input) fwd_s bwd_s "
                "(medians of the CPU fast kernels, one thread)\n",
                machine, reps, (long long)h);
    const sf_device_kind *k = sf_machine_device_kind(m, 0);
    printf("machine %s: device %s, %.1f GFLOP/s fp32, %.1f GB/s, the model's launch %.1f us; "
           "median of %d runs a key\n",
           machine, k->name, k->peak_flops[SF_DTYPE_FP32] / 1e9, k->mem_bw_Bps / 1e9,
           (k->launch_s > 0 ? k->launch_s : 5e-6) * 1e6, reps);
    int rc = 0;
    static const sf_op_type types[] = {SF_OP_LSTM, SF_OP_GRU};
    static const int64_t batches[] = {4, 32};
    for (int ti = 0; ti < 2 && !rc; ti++)
        for (int bi = 0; bi < 2 && !rc; bi++)
            rc = series(fx, types[ti], batches[bi], h, m, step_cm, one_cm, reps);
    for (int ti = 0; ti < 2 && !rc; ti++)
        rc = fixed_flops(fx, types[ti], h, m, step_cm, one_cm, reps);
    if (fx) fclose(fx);
    sf_cost_free(step_cm);
    sf_cost_free(one_cm);
    sf_machine_free(m);
    sf_machine_free(m1);
    sf_machine_free(base);
    return rc;
}
