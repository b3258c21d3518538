/* Recurrences step by step against the runtime's CPU kernels (issue 30, item
 * 2; docs/cost-model.md, "Recurrent operators step by step"). The model's
 * shape, exactly: on a device with rnn_per_step an LSTM or GRU tile is affine
 * in its steps S (an input projection and batched backward products, plus S
 * recurrent products and gate kernels), its per-step term at least the step's
 * launches and recurrent product, and at fixed FLOPs (n x S constant) its time
 * grows with S where the one-product model's does not. Then the same shape
 * held against what the profiler measured of soapflow's own CPU LSTM and GRU
 * kernels on this host (tests/fixtures/rnn_steps_cpu.txt, written by
 * `build/bench_rnn_steps cpu 5 256 --fixture ...`; bench/RESULTS.md): stored
 * figures, so the test is deterministic, with bounds wide enough for a noisy
 * shared host. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"

static sf_graph *rnn_graph(sf_op_type type, int64_t n, int64_t steps, int64_t in, int64_t h) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("rnn");
    sf_shape s = sf_shape_make(3, (int64_t[]){n, steps, in});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(type, &p);
    if (type == SF_OP_GRU)
        p.gru.hidden = h;
    else
        p.lstm.hidden = h;
    int l = sf_graph_add_op(g, type, "rnn", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (l < 0) fail_msg("%s", err.msg);
    return g;
}

/* a preset with rnn_per_step set to `on` */
static sf_machine *with_steps(const char *preset, int on) {
    sf_error err = {0};
    sf_machine_desc d;
    if (sf_machine_preset_desc(preset, &d, &err) != SF_OK) fail_msg("%s", err.msg);
    d.kind.rnn_per_step = on;
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static void task(sf_cost_model *cm, sf_op_type type, int64_t n, int64_t steps, int64_t h,
                 double *fwd, double *bwd) {
    sf_graph *g = rnn_graph(type, n, steps, h, h);
    const sf_op *op = sf_graph_op(g, 1);
    sf_tile t = sf_tile_full(&op->space);
    sf_cost_task_fwd_bwd_s(cm, op, &t, 0, fwd, bwd);
    sf_graph_free(g);
}

static const sf_op_type TYPES[] = {SF_OP_LSTM, SF_OP_GRU};

/* At fixed n, compute-bound sizes (n 64, H = I = 1024 on a V100 in fp32): the
 * time is a + b S exactly, b is at least two launches and the recurrent
 * product each way, and a is what the batched products do not scale (their
 * launches): positive and smaller than one step. */
static void test_affine_in_steps(void **state) {
    (void)state;
    sf_machine *m = with_steps("dgx-1v", 1);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    const double launch = 5e-6, n = 64, h = 1024;
    for (int ti = 0; ti < 2; ti++) {
        double gates = TYPES[ti] == SF_OP_GRU ? 3 : 4;
        double f1, b1, f2, b2;
        task(cm, TYPES[ti], 64, 1, 1024, &f1, &b1);
        task(cm, TYPES[ti], 64, 2, 1024, &f2, &b2);
        double slope_f = f2 - f1, slope_b = b2 - b1;
        for (int64_t s = 4; s <= 256; s *= 4) {
            double f, b;
            task(cm, TYPES[ti], 64, s, 1024, &f, &b);
            double sd = (double)s;
            if (fabs(f - (f1 + (sd - 1) * slope_f)) > 1e-9 * f ||
                fabs(b - (b1 + (sd - 1) * slope_b)) > 1e-9 * b)
                fail_msg("op %d, S %lld: fwd %.6g, bwd %.6g off the line", ti, (long long)s, f, b);
        }
        /* one step's recurrent product at lstm_step's fp32 0.4 of 15.7 TFLOP/s */
        double rec = 2 * n * gates * h * h / (15.7e12 * 0.4);
        assert_true(slope_f > 2 * launch + rec);
        assert_true(slope_b > 2 * launch + rec);
        double a_f = f1 - slope_f, a_b = b1 - slope_b;
        assert_true(a_f > 0 && a_f < slope_f);
        assert_true(a_b > 0 && a_b < slope_b);
    }
    sf_cost_free(cm);
    sf_machine_free(m);
}

/* On the cpu preset: n x S = 256 at every S, the same FLOPs. The per-step
 * model's time grows with S, the one-product model's (rnn_per_step off)
 * stays within a few percent (its bytes change a little). */
static void test_fixed_flops_cpu(void **state) {
    (void)state;
    sf_machine *ms = with_steps("cpu", 1), *m1 = with_steps("cpu", 0);
    sf_cost_model *cs = sf_cost_analytic_new(ms, NULL), *c1 = sf_cost_analytic_new(m1, NULL);
    for (int ti = 0; ti < 2; ti++) {
        double pf = 0, pb = 0, f0 = 0, b0 = 0;
        for (int64_t s = 1; s <= 256; s *= 4) {
            double f, b, of, ob;
            task(cs, TYPES[ti], 256 / s, s, 256, &f, &b);
            task(c1, TYPES[ti], 256 / s, s, 256, &of, &ob);
            if (s == 1) {
                f0 = of;
                b0 = ob;
            }
            assert_true(s == 1 || (f > pf && b > pb));
            assert_true(fabs(of / f0 - 1) < 0.1 && fabs(ob / b0 - 1) < 0.1);
            pf = f;
            pb = b;
        }
    }
    sf_cost_free(cs);
    sf_cost_free(c1);
    sf_machine_free(ms);
    sf_machine_free(m1);
}

/* ---- against the measured CPU kernels ---------------------------------- */

enum { MAXROWS = 128 };
typedef struct row {
    char op[8];
    long long n, steps, h;
    double fwd_s, bwd_s;
} row;

static int load(row *rows) {
    const char *dir = getenv("SF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/rnn_steps_cpu.txt", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot open (set SF_SOURCE_DIR to the source tree)", path);
    char line[512];
    int k = 0;
    while (fgets(line, sizeof line, f) && k < MAXROWS) {
        if (line[0] == '#') continue;
        row *r = &rows[k];
        if (sscanf(line, "%7s %lld %lld %lld %lf %lf", r->op, &r->n, &r->steps, &r->h, &r->fwd_s,
                   &r->bwd_s) == 6)
            k++;
    }
    fclose(f);
    return k;
}

static const row *find(const row *rows, int k, const char *op, long long n, long long steps) {
    for (int i = 0; i < k; i++)
        if (strcmp(rows[i].op, op) == 0 && rows[i].n == n && rows[i].steps == steps)
            return &rows[i];
    return NULL;
}

/* The measured times follow the per-step shape: affine in S with a per-step
 * term, the line through S = 8 and 64 within RESID of every point from S = 4
 * on, and its intercept small against one step's share (CPU kernels have no
 * launch to speak of); and the profiled model's answer for a tile it has no
 * entry for, S times the measured one-step tile of the same n and H (asked
 * through sf_cost_profiled_new on the cpu preset with rnn_per_step), within
 * PROFILED of what the S-step tile measured. */
#define RESID 0.25
#define PROFILED 0.35
static void test_measured_affine(void **state) {
    (void)state;
    row rows[MAXROWS];
    int k = load(rows);
    assert_true(k >= 20);
    static const char *ops[] = {"lstm", "gru"};
    static const long long ns[] = {4, 32};
    int series = 0;
    for (int oi = 0; oi < 2; oi++)
        for (int ni = 0; ni < 2; ni++) {
            const row *r1 = find(rows, k, ops[oi], ns[ni], 1),
                      *r8 = find(rows, k, ops[oi], ns[ni], 8),
                      *r64 = find(rows, k, ops[oi], ns[ni], 64);
            if (!r1 || !r8 || !r64) fail_msg("%s n %lld: rows missing", ops[oi], ns[ni]);
            series++;
            for (int pass = 0; pass < 2; pass++) {
                double y8 = pass ? r8->bwd_s : r8->fwd_s, y64 = pass ? r64->bwd_s : r64->fwd_s;
                double b = (y64 - y8) / 56, a = y8 - 8 * b;
                assert_true(b > 0);
                if (fabs(a) > 4 * b)
                    fail_msg("%s n %lld pass %d: intercept %.3g against %.3g a step", ops[oi],
                             ns[ni], pass, a, b);
                for (long long s = 4; s <= 64; s *= 2) {
                    const row *r = find(rows, k, ops[oi], ns[ni], s);
                    if (!r) continue;
                    double y = pass ? r->bwd_s : r->fwd_s;
                    if (fabs(a + b * (double)s - y) > RESID * y)
                        fail_msg("%s n %lld pass %d S %lld: %.4g measured, line %.4g", ops[oi],
                                 ns[ni], pass, s, y, a + b * (double)s);
                }
            }
            /* the profiled model: 64 x the one-step entry */
            sf_error err = {0};
            sf_machine *m = with_steps("cpu", 1);
            sf_graph *g1 = rnn_graph(oi ? SF_OP_GRU : SF_OP_LSTM, ns[ni], 1, r1->h, r1->h);
            sf_graph *g64 = rnn_graph(oi ? SF_OP_GRU : SF_OP_LSTM, ns[ni], 64, r1->h, r1->h);
            const sf_op *o1 = sf_graph_op(g1, 1), *o64 = sf_graph_op(g64, 1);
            sf_tile t1 = sf_tile_full(&o1->space), t64 = sf_tile_full(&o64->space);
            sf_profile_db *db = sf_profile_db_new("cpu-rank");
            char key[SF_PROFILE_KEY_MAX];
            assert_non_null(sf_profile_key(o1, &t1, key, sizeof key));
            assert_int_equal(sf_profile_db_insert(db, key, o1->type, r1->fwd_s, r1->bwd_s, 5, &err),
                             SF_OK);
            sf_cost_model *cm = sf_cost_profiled_new(m, db, sf_cost_analytic_new(m, NULL));
            assert_non_null(cm);
            double f, b;
            f = sf_cost_task_s(cm, o64, &t64, 0, SF_PASS_FWD);
            b = sf_cost_task_s(cm, o64, &t64, 0, SF_PASS_BWD);
            if (f != 64 * r1->fwd_s || b != 64 * r1->bwd_s)
                fail_msg("%s n %lld: profiled 64 steps %.6g %.6g, not 64 x %.6g %.6g", ops[oi],
                         ns[ni], f, b, r1->fwd_s, r1->bwd_s);
            if (fabs(f / r64->fwd_s - 1) > PROFILED || fabs(b / r64->bwd_s - 1) > PROFILED)
                fail_msg("%s n %lld: profiled 64 steps fwd %.4g bwd %.4g, measured %.4g %.4g",
                         ops[oi], ns[ni], f, b, r64->fwd_s, r64->bwd_s);
            sf_profile_stats st;
            assert_int_equal(sf_cost_profiled_stats(cm, &st), SF_OK);
            assert_int_equal(st.misses, 0);
            sf_cost_free(cm);
            sf_graph_free(g1);
            sf_graph_free(g64);
            sf_machine_free(m);
        }
    assert_int_equal(series, 4);
}

/* At fixed FLOPs (n x S = 256) the measured time grows with S, as the
 * per-step model says and the one-product model does not: 256 steps of one
 * sample take at least GROWTH times one step of 256 samples, and the growth
 * is within a factor FACTOR of the per-step model's on the cpu preset. */
#define GROWTH 1.5
#define FACTOR 1.5
static void test_measured_fixed_flops(void **state) {
    (void)state;
    row rows[MAXROWS];
    int k = load(rows);
    static const char *ops[] = {"lstm", "gru"};
    sf_machine *m = with_steps("cpu", 1);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    for (int oi = 0; oi < 2; oi++) {
        const row *a = find(rows, k, ops[oi], 256, 1), *z = find(rows, k, ops[oi], 1, 256);
        if (!a || !z) fail_msg("%s: fixed-FLOPs rows missing", ops[oi]);
        if (z->fwd_s < GROWTH * a->fwd_s || z->bwd_s < GROWTH * a->bwd_s)
            fail_msg("%s: 256 x 1 sample %.4g / %.4g s against 1 x 256 samples %.4g / %.4g s",
                     ops[oi], z->fwd_s, z->bwd_s, a->fwd_s, a->bwd_s);
        double af, ab, zf, zb;
        task(cm, oi ? SF_OP_GRU : SF_OP_LSTM, 256, 1, a->h, &af, &ab);
        task(cm, oi ? SF_OP_GRU : SF_OP_LSTM, 1, 256, a->h, &zf, &zb);
        double mf = (z->fwd_s / a->fwd_s) / (zf / af), mb = (z->bwd_s / a->bwd_s) / (zb / ab);
        if (mf > FACTOR || mf < 1 / FACTOR || mb > FACTOR || mb < 1 / FACTOR)
            fail_msg("%s: growth measured %.2f / %.2f, per-step model %.2f / %.2f", ops[oi],
                     z->fwd_s / a->fwd_s, z->bwd_s / a->bwd_s, zf / af, zb / ab);
    }
    sf_cost_free(cm);
    sf_machine_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_affine_in_steps),
        cmocka_unit_test(test_fixed_flops_cpu),
        cmocka_unit_test(test_measured_affine),
        cmocka_unit_test(test_measured_fixed_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
