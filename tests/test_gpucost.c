/* The GPU cost model (issue 30; docs/cost-model.md, "Efficiencies by device"
 * and "Recurrent operators step by step"): efficiencies looked up by operator
 * class, dtype and device, overridable from a machine file; tf32 where a
 * device has it; Winograd's count for 3x3 convolutions; an LSTM priced step
 * by step on the devices that say so, and as before on the others.
 *
 * The expected times are worked out here from the formulas and the presets'
 * figures, not read back from the code's own helpers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"

#define LAUNCH 5e-6

static void assert_close(double got, double want, double rel) {
    double tol = rel * fabs(want) + 1e-15;
    if (!(fabs(got - want) <= tol)) fail_msg("got %.12g, want %.12g", got, want);
}

static sf_machine *preset(const char *name) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(name, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static sf_analytic_params params(sf_dtype t) {
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    p.dtype = t;
    return p;
}

/* kind x dtype x device class: the tensor-core presets answer with their own
 * figures, the others (and the memory-bound operators) with the model's. */
static void test_efficiency_lookup(void **state) {
    (void)state;
    sf_machine *v100 = preset("dgx-1v"), *a100 = preset("dgx-a100"), *p100 = preset("p100-4x4");
    const sf_device_kind *kv = sf_machine_device_kind(v100, 0);
    const sf_device_kind *ka = sf_machine_device_kind(a100, 0);
    const sf_device_kind *kp = sf_machine_device_kind(p100, 0);
    sf_analytic_params f32 = params(SF_DTYPE_FP32), f16 = params(SF_DTYPE_FP16);
    sf_analytic_params t32 = params(SF_DTYPE_TF32);
    /* V100: CUDA cores in fp32, tensor cores in fp16 */
    assert_true(sf_analytic_efficiency(&f32, kv, SF_OP_CONV2D) == 0.75);
    assert_true(sf_analytic_efficiency(&f16, kv, SF_OP_CONV2D) == 0.6);
    assert_true(sf_analytic_efficiency(&f32, kv, SF_OP_LINEAR) == 0.85);
    assert_true(sf_analytic_efficiency(&f16, kv, SF_OP_MATMUL) == 0.55);
    assert_true(sf_analytic_efficiency(&f16, kv, SF_OP_ATTENTION) == 0.55);
    /* A100 in tf32: its own figures, apart from fp32's */
    assert_true(sf_analytic_efficiency(&t32, ka, SF_OP_CONV2D) == 0.35);
    assert_true(sf_analytic_efficiency(&f32, ka, SF_OP_CONV2D) == 0.75);
    assert_true(sf_analytic_efficiency(&t32, ka, SF_OP_LINEAR) == 0.6);
    assert_true(sf_analytic_efficiency(&f16, ka, SF_OP_LINEAR) == 0.55);
    /* memory-bound operators and devices without figures: the model's defaults */
    assert_true(sf_analytic_efficiency(&f16, ka, SF_OP_RELU) == 0.5);
    assert_true(sf_analytic_efficiency(&f32, kp, SF_OP_CONV2D) == 0.6);
    assert_true(sf_analytic_efficiency(&f32, kp, SF_OP_LSTM) == 0.7);
    assert_true(sf_analytic_efficiency(&f16, kp, SF_OP_LINEAR) == 0.7);
    assert_int_equal(sf_analytic_eff_class(SF_OP_BATCHNORM), -1);
    assert_int_equal(sf_analytic_eff_class(SF_OP_LSTM), SF_EFF_LSTM);
    assert_string_equal(sf_eff_class_name(SF_EFF_LSTM_STEP), "lstm_step");
    sf_machine_free(v100);
    sf_machine_free(a100);
    sf_machine_free(p100);
}

/* x (n, f) -> linear (f): compute-bound for large n and f. */
static sf_graph *linear_graph(int64_t n, int64_t f) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("fc");
    sf_shape s = sf_shape_make(2, (int64_t[]){n, f});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = f;
    assert_true(sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err) >=
                0);
    return g;
}

static const char *machine_text(const char *cost) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"name\": \"one\", \"nodes\": 1, \"devices_per_node\": 1,"
             " \"device\": {\"name\": \"gpu\", \"peak_tflops\": {\"fp32\": 10, \"fp16\": 100},"
             " \"mem_bw_GBps\": 1000, \"mem_GB\": 16%s},"
             " \"intra\": {\"topology\": \"switch\", \"bandwidth_GBps\": 100, \"latency_us\": 1},"
             " \"inter\": {\"nics_per_node\": 1, \"bandwidth_GBps\": 10, \"latency_us\": 2}}",
             cost);
    return buf;
}

/* A machine file's device.cost overrides the model's figures, round-trips
 * through the writer, and a task is priced with them. */
static void test_machine_file_overrides(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine_desc d;
    const char *text = machine_text(", \"cost\": {\"efficiency\": {\"gemm\": {\"fp32\": 0.4, "
                                    "\"fp16\": 0.25}}, \"mem_efficiency\": 0.9, \"launch_us\": 7, "
                                    "\"rnn_per_step\": true}");
    assert_int_equal(sf_machine_desc_parse_json(text, "m.json", &d, &err), SF_OK);
    assert_true(d.kind.efficiency[SF_EFF_GEMM][SF_DTYPE_FP32] == 0.4);
    assert_true(d.kind.efficiency[SF_EFF_GEMM][SF_DTYPE_FP16] == 0.25);
    assert_true(d.kind.efficiency[SF_EFF_CONV][SF_DTYPE_FP32] == 0);
    assert_true(d.kind.mem_efficiency == 0.9);
    assert_close(d.kind.launch_s, 7e-6, 1e-12);
    assert_int_equal(d.kind.rnn_per_step, 1);
    /* written and read back: the same figures */
    char *out = sf_machine_desc_to_json(&d, &err);
    assert_non_null(out);
    sf_machine_desc e;
    assert_int_equal(sf_machine_desc_parse_json(out, "out.json", &e, &err), SF_OK);
    free(out);
    assert_memory_equal(&d.kind, &e.kind, sizeof d.kind);

    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    sf_graph *g = linear_graph(8192, 8192);
    const sf_op *fc = sf_graph_op(g, 1);
    sf_tile t = sf_tile_full(&fc->space);
    sf_op_cost c;
    sf_op_tile_cost(fc, &t, &c);
    for (int k = 0; k < 2; k++) {
        sf_analytic_params p = params(k ? SF_DTYPE_FP16 : SF_DTYPE_FP32);
        sf_cost_model *cm = sf_cost_analytic_new(m, &p);
        assert_non_null(cm);
        double want = 7e-6 + c.flops_fwd / (k ? 100e12 * 0.25 : 10e12 * 0.4);
        assert_close(sf_cost_task_s(cm, fc, &t, 0, SF_PASS_FWD), want, 1e-9);
        /* the update is bandwidth-bound at the file's mem_efficiency */
        double ub = k ? 22 : 24;
        assert_close(sf_cost_task_s(cm, fc, &t, 0, SF_PASS_UPDATE),
                     7e-6 + (double)fc->n_params * ub / (1000e9 * 0.9), 1e-9);
        sf_cost_free(cm);
    }
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Bad figures in a machine file: one line naming the file and the field. */
static void test_machine_file_refusals(void **state) {
    (void)state;
    static const struct {
        const char *cost, *want;
    } bad[] = {
        /* an efficiency for a dtype the device lacks */
        {", \"cost\": {\"efficiency\": {\"gemm\": {\"bf16\": 0.5}}}", "no bf16 peak"},
        {", \"cost\": {\"efficiency\": {\"gemm\": {\"tf32\": 0.5}}}", "no tf32 peak"},
        {", \"cost\": {\"efficiency\": {\"conv2d\": {\"fp32\": 1.5}}}", "conv2d"},
        {", \"cost\": {\"efficiency\": {\"pool\": {\"fp32\": 0.5}}}", "unknown field"},
        {", \"cost\": {\"efficiency\": {\"gemm\": {\"int8\": 0.5}}}", "unknown field"},
        {", \"cost\": {\"conv3x3_flop_ratio\": {\"fp32\": 2}}", "conv3x3_flop_ratio"},
        {", \"cost\": {\"mem_efficiency\": -0.1}", "mem_efficiency"},
        {", \"cost\": {\"rnn_per_step\": 1}", "rnn_per_step"},
        {", \"cost\": 3", "device.cost"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sf_error err = {0};
        sf_machine_desc d;
        sf_status st = sf_machine_desc_parse_json(machine_text(bad[i].cost), "m.json", &d, &err);
        if (st == SF_OK) {
            /* the parser takes it; the description's check must not */
            st = sf_machine_desc_validate(&d, &err);
        }
        assert_int_not_equal(st, SF_OK);
        if (!strstr(err.msg, bad[i].want)) fail_msg("case %zu: '%s'", i, err.msg);
        assert_null(strchr(err.msg, '\n'));
    }
}

/* tf32: fp32 storage on tensor cores, refused where a device has none. */
static void test_tf32(void **state) {
    (void)state;
    sf_dtype t;
    assert_int_equal(sf_dtype_parse("tf32", &t), 0);
    assert_int_equal(t, SF_DTYPE_TF32);
    assert_int_equal(sf_dtype_bytes(SF_DTYPE_TF32), 4);
    assert_int_equal(sf_dtype_mixed(SF_DTYPE_TF32), 0);
    assert_int_equal(sf_dtype_mixed(SF_DTYPE_BF16), 1);
    static const char *const lacking[] = {"p100-4x4", "k80-16x4", "dgx-1v", "cpu"};
    for (size_t i = 0; i < sizeof lacking / sizeof lacking[0]; i++) {
        sf_machine *m = preset(lacking[i]);
        sf_error err = {0};
        assert_int_equal(sf_machine_check_dtype(m, SF_DTYPE_TF32, &err), SF_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "no tf32 peak"));
        assert_null(strchr(err.msg, '\n'));
        sf_machine_free(m);
    }
    sf_machine *a = preset("dgx-a100");
    sf_error err = {0};
    assert_int_equal(sf_machine_check_dtype(a, SF_DTYPE_TF32, &err), SF_OK);
    /* a compute-bound product at 156 TFLOP/s x 0.6; its update as fp32's (24 bytes) */
    sf_graph *g = linear_graph(8192, 8192);
    const sf_op *fc = sf_graph_op(g, 1);
    sf_tile tl = sf_tile_full(&fc->space);
    sf_op_cost c;
    sf_op_tile_cost(fc, &tl, &c);
    sf_analytic_params p = params(SF_DTYPE_TF32);
    sf_cost_model *cm = sf_cost_analytic_new(a, &p);
    assert_int_equal(sf_cost_elem_bytes(cm), 4);
    assert_close(sf_cost_task_s(cm, fc, &tl, 0, SF_PASS_FWD), LAUNCH + c.flops_fwd / (156e12 * 0.6),
                 1e-9);
    assert_close(sf_cost_task_s(cm, fc, &tl, 0, SF_PASS_UPDATE),
                 LAUNCH + (double)fc->n_params * 24 / (2000e9 * 0.8), 1e-9);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(a);
}

/* x (n, c, hw, hw) -> conv k x k, stride s, c -> c channels */
static sf_graph *conv_graph(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t s) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("conv");
    sf_shape sh = sf_shape_make(4, (int64_t[]){n, c, hw, hw});
    int x = sf_graph_add_input(g, "x", &sh, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = c;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = k;
    p.conv2d.stride[0] = p.conv2d.stride[1] = s;
    p.conv2d.padding[0] = p.conv2d.padding[1] = k / 2;
    assert_true(sf_graph_add_op(g, SF_OP_CONV2D, "conv", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err) >=
                0);
    return g;
}

/* Winograd F(2x2, 3x3) on the V100 in fp32: 3x3 stride-1 convolutions do 1 /
 * 2.25 of the direct count; stride 2 and 1x1 do not, nor fp16 (tensor cores). */
static void test_winograd(void **state) {
    (void)state;
    sf_machine *m = preset("dgx-1v");
    static const struct {
        int64_t k, s;
        sf_dtype t;
        double ratio, peak, eff;
    } cases[] = {
        {3, 1, SF_DTYPE_FP32, 1 / 2.25, 15.7e12, 0.75},
        {3, 2, SF_DTYPE_FP32, 1, 15.7e12, 0.75},
        {1, 1, SF_DTYPE_FP32, 1, 15.7e12, 0.75},
        {3, 1, SF_DTYPE_FP16, 1, 125e12, 0.6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sf_graph *g = conv_graph(64, 256, 56, cases[i].k, cases[i].s);
        const sf_op *cv = sf_graph_op(g, 1);
        sf_tile t = sf_tile_full(&cv->space);
        sf_op_cost c;
        sf_op_tile_cost(cv, &t, &c);
        sf_analytic_params p = params(cases[i].t);
        sf_cost_model *cm = sf_cost_analytic_new(m, &p);
        double compute = c.flops_fwd * cases[i].ratio / (cases[i].peak * cases[i].eff);
        double memory = c.bytes_fwd * sf_dtype_bytes(cases[i].t) / 4 / (900e9 * 0.8);
        assert_close(sf_cost_task_s(cm, cv, &t, 0, SF_PASS_FWD),
                     LAUNCH + (compute > memory ? compute : memory), 1e-9);
        sf_cost_free(cm);
        sf_graph_free(g);
    }
    sf_machine_free(m);
}

/* one lstm over x (n, steps, in), hidden h */
static sf_graph *lstm_graph(int64_t n, int64_t steps, int64_t in, int64_t h) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("lstm");
    sf_shape s = sf_shape_make(3, (int64_t[]){n, steps, in});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = h;
    int l = sf_graph_add_op(g, SF_OP_LSTM, "lstm", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (l < 0) fail_msg("%s", err.msg);
    return g;
}

/* At fixed FLOPs (n x steps constant), an LSTM's time grows with its steps on
 * a device that prices it step by step, at least by the launches of each
 * step's kernels; on the P100 (no rnn_per_step) it is one roofline as before. */
static void test_lstm_steps(void **state) {
    (void)state;
    sf_machine *v = preset("dgx-1v"), *pm = preset("p100-4x4");
    sf_analytic_params p = params(SF_DTYPE_FP16);
    sf_cost_model *cv = sf_cost_analytic_new(v, &p);
    sf_analytic_params p32 = params(SF_DTYPE_FP32);
    sf_cost_model *cp = sf_cost_analytic_new(pm, &p32);
    double flops0 = 0, prev_f = 0, prev_b = 0;
    static const int64_t steps[] = {1, 4, 16, 64};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int64_t s = steps[i], n = 256 / s;
        sf_graph *g = lstm_graph(n, s, 1024, 1024);
        const sf_op *op = sf_graph_op(g, 1);
        sf_tile t = sf_tile_full(&op->space);
        sf_op_cost c;
        sf_op_tile_cost(op, &t, &c);
        if (i == 0) flops0 = c.flops_fwd;
        assert_close(c.flops_fwd, flops0, 1e-12);
        double f = sf_cost_task_s(cv, op, &t, 0, SF_PASS_FWD);
        double b = sf_cost_task_s(cv, op, &t, 0, SF_PASS_BWD);
        double f2, b2;
        sf_cost_task_fwd_bwd_s(cv, op, &t, 0, &f2, &b2);
        assert_true(f == f2 && b == b2);
        /* each step: a recurrent product and a gate kernel, forward and backward */
        assert_true(f >= 2 * (double)s * LAUNCH && b >= 2 * (double)s * LAUNCH);
        if (i > 0 && !(f > prev_f && b > prev_b))
            fail_msg("steps %lld: fwd %.4g <= %.4g or bwd %.4g <= %.4g", (long long)s, f, prev_f, b,
                     prev_b);
        prev_f = f;
        prev_b = b;
        /* the P100: launch + max(flops / (10.6e12 x 0.7), bytes / (732e9 x 0.8)) */
        double compute = c.flops_fwd / (10.6e12 * 0.7), memory = c.bytes_fwd / (732e9 * 0.8);
        assert_close(sf_cost_task_s(cp, op, &t, 0, SF_PASS_FWD),
                     LAUNCH + (compute > memory ? compute : memory), 1e-12);
        sf_graph_free(g);
    }
    /* one step of n = 256: the recurrent product alone is at least its FLOPs at
     * the step efficiency (0.11 of 125 TFLOP/s) */
    sf_graph *g = lstm_graph(256, 1, 1024, 1024);
    const sf_op *op = sf_graph_op(g, 1);
    sf_tile t = sf_tile_full(&op->space);
    double rec = 2.0 * 256 * 4 * 1024 * 1024 / (125e12 * 0.11);
    assert_true(sf_cost_task_s(cv, op, &t, 0, SF_PASS_FWD) > rec);
    sf_graph_free(g);
    sf_cost_free(cv);
    sf_cost_free(cp);
    sf_machine_free(v);
    sf_machine_free(pm);
}

/* one gru over x (n, steps, in), hidden h */
static sf_graph *gru_graph(int64_t n, int64_t steps, int64_t in, int64_t h) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("gru");
    sf_shape s = sf_shape_make(3, (int64_t[]){n, steps, in});
    int x = sf_graph_add_input(g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_GRU, &p);
    p.gru.hidden = h;
    int l = sf_graph_add_op(g, SF_OP_GRU, "gru", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    if (l < 0) fail_msg("%s", err.msg);
    return g;
}

/* A GRU is priced step by step as the LSTM (3 gate blocks, not 4): its time
 * grows with the steps at fixed FLOPs, each step at least two launches each
 * way, and one step's recurrent product alone is at least its 3-gate FLOPs at
 * the step efficiency; it is cheaper than the LSTM of the same sizes. */
static void test_gru_steps(void **state) {
    (void)state;
    sf_machine *v = preset("dgx-1v");
    sf_analytic_params p = params(SF_DTYPE_FP16);
    sf_cost_model *cv = sf_cost_analytic_new(v, &p);
    double prev_f = 0, prev_b = 0;
    static const int64_t steps[] = {1, 4, 16, 64};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int64_t s = steps[i], n = 256 / s;
        sf_graph *g = gru_graph(n, s, 1024, 1024), *gl = lstm_graph(n, s, 1024, 1024);
        const sf_op *op = sf_graph_op(g, 1), *lop = sf_graph_op(gl, 1);
        sf_tile t = sf_tile_full(&op->space);
        double f = sf_cost_task_s(cv, op, &t, 0, SF_PASS_FWD);
        double b = sf_cost_task_s(cv, op, &t, 0, SF_PASS_BWD);
        double f2, b2;
        sf_cost_task_fwd_bwd_s(cv, op, &t, 0, &f2, &b2);
        assert_true(f == f2 && b == b2);
        assert_true(f >= 2 * (double)s * LAUNCH && b >= 2 * (double)s * LAUNCH);
        assert_true(i == 0 || (f > prev_f && b > prev_b));
        assert_true(f < sf_cost_task_s(cv, lop, &t, 0, SF_PASS_FWD));
        assert_true(b < sf_cost_task_s(cv, lop, &t, 0, SF_PASS_BWD));
        prev_f = f;
        prev_b = b;
        sf_graph_free(g);
        sf_graph_free(gl);
    }
    sf_graph *g = gru_graph(256, 1, 1024, 1024);
    const sf_op *op = sf_graph_op(g, 1);
    sf_tile t = sf_tile_full(&op->space);
    double rec = 2.0 * 256 * 3 * 1024 * 1024 / (125e12 * 0.3);
    assert_true(sf_cost_task_s(cv, op, &t, 0, SF_PASS_FWD) > rec);
    sf_graph_free(g);
    sf_cost_free(cv);
    sf_machine_free(v);
}

/* The profiled model on a device with rnn_per_step: an LSTM tile of S steps
 * not in the database is S times the measured tile of the one-step LSTM of
 * the same batch and sizes (the key the profiler writes for it); without the
 * flag it is the fallback's. A one-step tile of the S-step operator itself is
 * no such key: its tiles read all S steps of x. */
static sf_machine *one_gpu(int per_step) {
    sf_error err = {0};
    sf_machine_desc d;
    const char *text = machine_text(per_step ? ", \"cost\": {\"rnn_per_step\": true}" : "");
    assert_int_equal(sf_machine_desc_parse_json(text, "m.json", &d, &err), SF_OK);
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    return m;
}

static void test_profiled_steps(void **state) {
    (void)state;
    sf_graph *g = lstm_graph(16, 8, 64, 64), *g1 = lstm_graph(16, 1, 64, 64);
    const sf_op *op = sf_graph_op(g, 1), *op1 = sf_graph_op(g1, 1);
    sf_tile t = sf_tile_full(&op->space), one = sf_tile_full(&op1->space), part = t;
    part.hi[1] = 1;
    for (int per_step = 0; per_step < 2; per_step++) {
        sf_error err = {0};
        sf_machine *m = one_gpu(per_step);
        sf_profile_db *db = sf_profile_db_new("gpu");
        char key[SF_PROFILE_KEY_MAX];
        char part_key[SF_PROFILE_KEY_MAX];
        assert_non_null(sf_profile_key(op, &part, part_key, sizeof part_key));
        assert_non_null(sf_profile_key(op1, &one, key, sizeof key));
        assert_string_not_equal(key, part_key);
        assert_int_equal(sf_profile_db_insert(db, key, SF_OP_LSTM, 1e-3, 2e-3, 1, &err), SF_OK);
        sf_cost_model *fb = sf_cost_analytic_new(m, NULL);
        double fb_fwd = sf_cost_task_s(fb, op, &t, 0, SF_PASS_FWD);
        sf_cost_model *cm = sf_cost_profiled_new(m, db, fb);
        assert_non_null(cm);
        assert_close(sf_cost_task_s(cm, op1, &one, 0, SF_PASS_FWD), 1e-3, 1e-12);
        if (per_step) {
            assert_close(sf_cost_task_s(cm, op, &t, 0, SF_PASS_FWD), 8e-3, 1e-12);
            assert_close(sf_cost_task_s(cm, op, &t, 0, SF_PASS_BWD), 16e-3, 1e-12);
        } else {
            assert_close(sf_cost_task_s(cm, op, &t, 0, SF_PASS_FWD), fb_fwd, 1e-12);
        }
        sf_cost_free(cm);
        sf_machine_free(m);
    }
    sf_graph_free(g);
    sf_graph_free(g1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_efficiency_lookup),
        cmocka_unit_test(test_machine_file_overrides),
        cmocka_unit_test(test_machine_file_refusals),
        cmocka_unit_test(test_tf32),
        cmocka_unit_test(test_winograd),
        cmocka_unit_test(test_lstm_steps),
        cmocka_unit_test(test_gru_steps),
        cmocka_unit_test(test_profiled_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
