/* Precision (docs/cost-model.md, "Precision"): a plan in bf16 or fp16 computes
 * at the device's peak for it, moves and keeps activations and gradients in its
 * bytes and keeps fp32 master weights beside a 16-bit compute copy; a device
 * without the peak is refused with one line; fp32 is what it always was.
 *
 * Checked here by another route than the code's: compute-bound task times
 * against the data-sheet peak ratio (989 / 67 on an H100), simulated bytes
 * against the fp32 run's halves, memory against ZeRO's per-parameter count, and
 * the update against its byte count worked out by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define H100_FP32 67e12
#define H100_BF16 989e12
#define H100_BW 3350e9
#define LAUNCH 5e-6

static void assert_close(double got, double want, double rel) {
    double tol = rel * fabs(want) + 1e-15;
    if (!(fabs(got - want) <= tol)) fail_msg("got %.12g, want %.12g", got, want);
}

/* x (N, F) -> fc1 (F) -> fc2 (F): two large square products, compute-bound on
 * any GPU in any dtype. */
static sf_graph *mlp(int64_t n, int64_t f) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("mlp");
    sf_shape s = sf_shape_make(2, (int64_t[]){n, f});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = f;
    int a = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    int b = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    assert_true(x >= 0 && a >= 0 && b >= 0);
    return g;
}

static sf_cost_model *analytic(const sf_machine *m, sf_dtype t) {
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    p.dtype = t;
    sf_cost_model *cm = sf_cost_analytic_new(m, &p);
    assert_non_null(cm);
    return cm;
}

static void test_names_and_sizes(void **state) {
    (void)state;
    sf_dtype t = SF_DTYPE_COUNT;
    assert_int_equal(sf_dtype_parse("bf16", &t), 0);
    assert_int_equal(t, SF_DTYPE_BF16);
    assert_int_equal(sf_dtype_parse("fp16", &t), 0);
    assert_int_equal(t, SF_DTYPE_FP16);
    assert_int_equal(sf_dtype_parse("fp32", &t), 0);
    assert_int_equal(t, SF_DTYPE_FP32);
    assert_int_equal(sf_dtype_parse("int8", &t), -1);
    assert_int_equal(sf_dtype_parse(NULL, &t), -1);
    assert_int_equal(sf_dtype_bytes(SF_DTYPE_FP32), 4);
    assert_int_equal(sf_dtype_bytes(SF_DTYPE_FP16), 2);
    assert_int_equal(sf_dtype_bytes(SF_DTYPE_BF16), 2);
    assert_int_equal(sf_dtype_bytes(SF_DTYPE_COUNT), 0);
    /* a model made by hand (calloc) and NULL are fp32 */
    assert_int_equal(sf_cost_dtype(NULL), SF_DTYPE_FP32);
    assert_int_equal(sf_cost_elem_bytes(NULL), 4);
}

/* The data sheets' dense peaks in the presets, and the refusals they imply. */
static void test_presets_and_refusal(void **state) {
    (void)state;
    sf_error err = {0};
    static const struct {
        const char *preset;
        double fp32, fp16, bf16;
    } want[] = {{"p100-4x4", 10.6e12, 21.2e12, 0},
                {"k80-16x4", 4.37e12, 0, 0},
                {"dgx-a100", 19.5e12, 312e12, 312e12},
                {"dgx-h100", 67e12, 989e12, 989e12}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sf_machine *m = sf_machine_preset(want[i].preset, &err);
        assert_non_null(m);
        const sf_device_kind *k = sf_machine_device_kind(m, 0);
        assert_true(k->peak_flops[SF_DTYPE_FP32] == want[i].fp32);
        assert_true(k->peak_flops[SF_DTYPE_FP16] == want[i].fp16);
        assert_true(k->peak_flops[SF_DTYPE_BF16] == want[i].bf16);
        for (int t = 0; t < SF_DTYPE_COUNT; t++) {
            memset(&err, 0, sizeof err);
            sf_status st = sf_machine_check_dtype(m, (sf_dtype)t, &err);
            if (k->peak_flops[t] > 0) {
                assert_int_equal(st, SF_OK);
                continue;
            }
            assert_int_equal(st, SF_ERR_UNSUPPORTED);
            /* one line naming the device and the dtype */
            assert_non_null(strstr(err.msg, k->name));
            assert_non_null(strstr(err.msg, sf_dtype_name((sf_dtype)t)));
            assert_null(strchr(err.msg, '\n'));
        }
        sf_machine_free(m);
    }
}

/* The simulator and OptCNN refuse a plan in a dtype the device lacks. */
static void test_sim_refuses(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    sf_graph *g = mlp(64, 256);
    sf_cost_model *cm = analytic(m, SF_DTYPE_BF16);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_null(sim);
    assert_int_equal(err.code, SF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "device P100-SXM2 has no bf16 peak"));
    sf_strategy *s = sf_strategy_new(g);
    memset(&err, 0, sizeof err);
    assert_int_equal(sf_optcnn_search(g, m, cm, NULL, s, NULL, &err), SF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "bf16"));
    sf_strategy_free(s);
    sf_cost_free(cm);
    /* fp16 it has (21.2 TFLOP/s) */
    cm = analytic(m, SF_DTYPE_FP16);
    memset(&err, 0, sizeof err);
    sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* A compute-bound task's time above the launch scales by the peak ratio; a
 * memory-bound one's bytes halve; the update moves 22 bytes an element in
 * bf16 (fp32 master and momentum read and written, the 16-bit gradient read
 * and zeroed, the compute copy written) against fp32's 24. */
static void test_task_times(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("dgx-h100", &err);
    sf_graph *g = mlp(8192, 8192);
    const sf_op *fc = sf_graph_op(g, 1), *x = sf_graph_op(g, 0);
    sf_cost_model *c32 = analytic(m, SF_DTYPE_FP32), *c16 = analytic(m, SF_DTYPE_BF16);
    assert_int_equal(sf_cost_dtype(c16), SF_DTYPE_BF16);
    assert_int_equal(sf_cost_elem_bytes(c16), 2);
    sf_tile t = sf_tile_full(&fc->space);
    for (int pass = SF_PASS_FWD; pass <= SF_PASS_BWD; pass++) {
        double a = sf_cost_task_s(c32, fc, &t, 0, (sf_pass)pass) - LAUNCH;
        double b = sf_cost_task_s(c16, fc, &t, 0, (sf_pass)pass) - LAUNCH;
        assert_close(a / b, H100_BF16 / H100_FP32, 1e-9);
        sf_op_cost oc;
        sf_op_tile_cost(fc, &t, &oc);
        double flops = pass == SF_PASS_FWD ? oc.flops_fwd : oc.flops_bwd;
        assert_close(b, flops / (H100_BF16 * 0.7), 1e-9);
    }
    /* the input's task is its bytes alone: half of them in bf16 */
    sf_tile tx = sf_tile_full(&x->space);
    double a = sf_cost_task_s(c32, x, &tx, 0, SF_PASS_FWD) - LAUNCH;
    double b = sf_cost_task_s(c16, x, &tx, 0, SF_PASS_FWD) - LAUNCH;
    assert_close(a, 8192.0 * 8192 * 4 / (H100_BW * 0.8), 1e-9);
    assert_close(b, a / 2, 1e-9);
    /* the update */
    double w = (double)fc->n_params;
    assert_close(sf_cost_task_s(c32, fc, &t, 0, SF_PASS_UPDATE), LAUNCH + w * 24 / (H100_BW * 0.8),
                 1e-12);
    assert_close(sf_cost_task_s(c16, fc, &t, 0, SF_PASS_UPDATE), LAUNCH + w * 22 / (H100_BW * 0.8),
                 1e-12);
    sf_cost_free(c32);
    sf_cost_free(c16);
    sf_graph_free(g);
    sf_machine_free(m);
}

static void run(const sf_graph *g, const sf_machine *m, sf_dtype t, const char *baseline,
                sf_sim_result *r, double *mem0) {
    sf_error err = {0};
    sf_cost_model *cm = analytic(m, t);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, baseline, g, m, &err), SF_OK);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    assert_int_equal(sf_sim_run(sim, s, r, &err), SF_OK);
    *mem0 = r->device_mem_bytes[0];
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_cost_free(cm);
}

/* On one H100 a compute-bound iteration takes 67 / 989 of its fp32 time, up
 * to the launches, the input's copy and the update, which are memory-bound. */
static void test_sim_compute_bound(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("dgx-h100", &err);
    sf_machine *m = sf_machine_subset(full, 1, &err);
    sf_graph *g = mlp(65536, 8192); /* a batch of 64 Ki rows: the updates weigh little */
    sf_sim_result a, b;
    double ma, mb;
    run(g, m, SF_DTYPE_FP32, "data", &a, &ma);
    run(g, m, SF_DTYPE_BF16, "data", &b, &mb);
    double ratio = a.iter_s / b.iter_s;
    if (!(ratio > 0.97 * H100_BF16 / H100_FP32 && ratio <= H100_BF16 / H100_FP32))
        fail_msg("fp32 / bf16 iteration %.4g, peak ratio %.4g", ratio, H100_BF16 / H100_FP32);
    /* memory: A activation bytes in fp32 (half in bf16) and W weights at 4 (weight) +
     * 4 (gradient) + 4 (momentum) bytes in fp32, 4 (master) + 4 (momentum) + 2
     * (copy) + 2 (gradient) in bf16: the same 12 */
    double w12 = 12.0 * (double)(2 * 8192 * 8192 + 2 * 8192);
    assert_close(mb, (ma - w12) / 2 + w12, 1e-12);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(full);
}

/* Activation transfers and gradient syncs move half the bytes in bf16 (the
 * fp32 figures are whole multiples of 4 bytes, so exactly half), on a node
 * and across nodes. */
static void test_bytes_halve(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("dgx-h100", &err);
    sf_machine *m = sf_machine_subset(full, 16, &err);
    assert_non_null(m);
    sf_graph *g = mlp(256, 1024);
    static const char *const baselines[] = {"data", "model", "owt"};
    for (size_t i = 0; i < 3; i++) {
        sf_sim_result a, b;
        double ma, mb;
        run(g, m, SF_DTYPE_FP32, baselines[i], &a, &ma);
        int64_t t32 = a.transfer_bytes, s32 = a.sync_bytes, i32 = a.intra_bytes,
                x32 = a.inter_bytes;
        run(g, m, SF_DTYPE_BF16, baselines[i], &b, &mb);
        assert_true(t32 + s32 > 0);
        assert_true(b.transfer_bytes * 2 == t32);
        assert_true(b.sync_bytes * 2 == s32);
        assert_true(b.intra_bytes * 2 == i32);
        assert_true(b.inter_bytes * 2 == x32);
        assert_true(b.iter_s < a.iter_s);
        assert_int_equal(b.tasks, a.tasks); /* the same task graph, priced in other bytes */
    }
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(full);
}

/* The profiled model's times are fp32 measurements: a fallback in another
 * dtype is refused (NULL), and the fp32 one gives an fp32 model. */
static void test_profiled_fp32_only(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("dgx-h100", &err);
    sf_cost_model *cm = sf_cost_profiled_new(m, sf_profile_db_new("x"), analytic(m, SF_DTYPE_BF16));
    assert_null(cm);
    cm = sf_cost_profiled_new(m, sf_profile_db_new("x"), analytic(m, SF_DTYPE_FP32));
    assert_non_null(cm);
    assert_int_equal(sf_cost_dtype(cm), SF_DTYPE_FP32);
    sf_cost_free(cm);
    sf_machine_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_sizes),    cmocka_unit_test(test_presets_and_refusal),
        cmocka_unit_test(test_sim_refuses),        cmocka_unit_test(test_task_times),
        cmocka_unit_test(test_sim_compute_bound),  cmocka_unit_test(test_bytes_halve),
        cmocka_unit_test(test_profiled_fp32_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
