/* Cost models: the analytic roofline against times worked out by hand for a
 * compute-bound convolution and a memory-bound relu (launch included), the
 * update pass, monotonicity in the tile, parameters, and the vtable dispatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/models.h"

/* P100-SXM2 of the p100-4x4 preset (DESIGN.md): 10.6 TFLOP/s fp32, 732 GB/s. */
#define PEAK 10.6e12
#define BW 732e9
#define LAUNCH 5e-6

/* x (8, 64, 16, 16) -> conv (64 out, 3x3, pad 1, bias) -> relu */
typedef struct fixture {
    sf_graph *g;
    sf_machine *m;
    const sf_op *conv, *relu;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    sf_error err = {0};
    f->g = sf_graph_new("c");
    sf_shape s = sf_shape_make(4, (int64_t[]){8, 64, 16, 16});
    int x = sf_graph_add_input(f->g, "x", &s, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 64;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    p.conv2d.bias = 1;
    int c = sf_graph_add_op(f->g, SF_OP_CONV2D, "conv", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r = sf_graph_add_op(f->g, SF_OP_RELU, "relu", &p, (sf_tensor_ref[]){{c, 0}}, 1, &err);
    f->m = sf_machine_preset("p100-4x4", &err);
    if (r < 0 || !f->m) return -1;
    f->conv = sf_graph_op(f->g, c);
    f->relu = sf_graph_op(f->g, r);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sf_machine_free(f->m);
    sf_graph_free(f->g);
    free(f);
    return 0;
}

static void assert_close(double got, double want) {
    double tol = 1e-9 * (want < 0 ? -want : want) + 1e-15;
    if (!(got >= want - tol && got <= want + tol))
        fail_msg("got %.12g, want %.12g", got, want);
}

static void test_defaults(void **state) {
    (void)state;
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    assert_close(p.launch_s, LAUNCH);
    assert_close(p.efficiency[SF_OP_CONV2D], 0.6);
    assert_close(p.efficiency[SF_OP_LINEAR], 0.7);
    assert_close(p.efficiency[SF_OP_LSTM], 0.7);
    assert_close(p.mem_efficiency, 0.8);
    assert_int_equal(p.dtype, SF_DTYPE_FP32);
    for (int i = 0; i < SF_OP_COUNT; i++) assert_true(p.efficiency[i] > 0 && p.efficiency[i] <= 1);
}

static void test_conv_compute_bound(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, NULL);
    assert_non_null(cm);
    assert_string_equal(sf_cost_name(cm), "analytic");
    sf_tile t = sf_tile_full(&f->conv->space);
    /* by hand: 8*64*16*16 outputs, each 64*3*3 multiply-adds, plus the bias */
    double outs = 8.0 * 64 * 16 * 16, macs = outs * 64 * 9;
    double fwd_flops = 2 * macs + outs, bwd_flops = 4 * macs + outs;
    double in_b = 8.0 * 64 * 16 * 16 * 4, w_b = (64.0 * 64 * 9 + 64) * 4, out_b = outs * 4;
    sf_op_cost c;
    sf_op_tile_cost(f->conv, &t, &c);
    assert_close(c.flops_fwd, fwd_flops);
    assert_close(c.bytes_fwd, in_b + w_b + out_b);
    /* compute-bound: ~23.8 us of FLOPs against ~2 us of memory */
    double compute = fwd_flops / (PEAK * 0.6), memory = (in_b + w_b + out_b) / (BW * 0.8);
    assert_true(compute > 5 * memory);
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_FWD), LAUNCH + compute);
    assert_close(sf_cost_task_s(cm, f->conv, &t, 7, SF_PASS_BWD),
                 LAUNCH + bwd_flops / (PEAK * 0.6));
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_FWD), 5e-6 + 151126016.0 / 6.36e12);
    sf_cost_free(cm);
}

static void test_relu_memory_bound(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, NULL);
    sf_tile t = sf_tile_full(&f->relu->space);
    double n = 8.0 * 64 * 16 * 16;
    /* forward reads and writes n floats; backward reads two and writes one */
    double fwd = LAUNCH + 2 * n * 4 / (BW * 0.8), bwd = LAUNCH + 3 * n * 4 / (BW * 0.8);
    assert_true(n / (PEAK * 0.5) < (fwd - LAUNCH) / 10);
    assert_close(sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_FWD), fwd);
    assert_close(sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_BWD), bwd);
    assert_close(sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_FWD), 5e-6 + 1048576.0 / 585.6e9);
    /* no weights: no update task */
    assert_close(sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_UPDATE), 0);
    /* an empty tile is no task */
    sf_tile e = t;
    e.hi[0] = e.lo[0];
    assert_close(sf_cost_task_s(cm, f->relu, &e, 3, SF_PASS_FWD), 0);
    sf_cost_free(cm);
}

static void test_update(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, NULL);
    sf_tile t = sf_tile_full(&f->conv->space);
    double w = 64.0 * 64 * 9 + 64;
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_UPDATE),
                 LAUNCH + w * 6 * 4 / (BW * 0.8));
    /* half the output channels: half the weights */
    t.hi[1] = 32;
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_UPDATE),
                 LAUNCH + w / 2 * 6 * 4 / (BW * 0.8));
    /* a sample slice holds a replica of the whole shard */
    t = sf_tile_full(&f->conv->space);
    t.hi[0] = 1;
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_UPDATE),
                 LAUNCH + w * 6 * 4 / (BW * 0.8));
    sf_cost_free(cm);
}

static void test_monotonic(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, NULL);
    const sf_op *ops[2] = {f->conv, f->relu};
    for (int k = 0; k < 2; k++)
        for (int dim = 0; dim < 4; dim++) {
            double prev[3] = {0, 0, 0};
            for (int64_t hi = 1; hi <= ops[k]->space.d[dim]; hi++) {
                sf_tile t = sf_tile_full(&ops[k]->space);
                t.hi[dim] = hi;
                for (int pass = 0; pass < 3; pass++) {
                    double s = sf_cost_task_s(cm, ops[k], &t, 0, (sf_pass)pass);
                    assert_true(s >= prev[pass]);
                    /* forward and backward grow strictly with the tile */
                    if (pass < 2 && hi > 1) assert_true(s > prev[pass]);
                    prev[pass] = s;
                }
            }
        }
    sf_cost_free(cm);
}

static void test_params(void **state) {
    fixture *f = *state;
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    p.launch_s = 0;
    p.efficiency[SF_OP_CONV2D] = 1.0;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, &p);
    assert_non_null(cm);
    sf_tile t = sf_tile_full(&f->conv->space);
    double outs = 8.0 * 64 * 16 * 16, flops = 2 * outs * 64 * 9 + outs;
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_FWD), flops / PEAK);
    sf_cost_free(cm);

    /* fp16 uses its own peak; bf16, which the P100 lacks, falls back to fp32 */
    p.dtype = SF_DTYPE_FP16;
    cm = sf_cost_analytic_new(f->m, &p);
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_FWD), flops / (2 * PEAK));
    sf_cost_free(cm);
    p.dtype = SF_DTYPE_BF16;
    cm = sf_cost_analytic_new(f->m, &p);
    assert_close(sf_cost_task_s(cm, f->conv, &t, 0, SF_PASS_FWD), flops / PEAK);
    sf_cost_free(cm);

    /* parameters that would divide by zero or make no sense are refused */
    sf_analytic_params bad = p;
    bad.efficiency[SF_OP_RELU] = 0;
    assert_null(sf_cost_analytic_new(f->m, &bad));
    bad = p;
    bad.mem_efficiency = 1.5;
    assert_null(sf_cost_analytic_new(f->m, &bad));
    bad = p;
    bad.launch_s = -1;
    assert_null(sf_cost_analytic_new(f->m, &bad));
    bad = p;
    bad.dtype = SF_DTYPE_COUNT;
    assert_null(sf_cost_analytic_new(f->m, &bad));
    assert_null(sf_cost_analytic_new(NULL, NULL));
    sf_cost_free(NULL);
}

/* A model plugged in through the table: sf_cost_task_s hands it the device's
 * kind, and sf_cost_free calls its destructor. */
static int fake_freed;
static double fake_task_s(void *self, const sf_op *op, const sf_tile *t,
                          const sf_device_kind *kind, sf_pass pass) {
    (void)op;
    return *(double *)self + (double)sf_tile_numel(t) / kind->mem_bw_Bps + (double)pass;
}
static void fake_free(void *self) {
    fake_freed = 1;
    free(self);
}
static const sf_cost_model_vtable fake_vt = {"fake", fake_task_s, fake_free, NULL};

static void test_vtable_dispatch(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = calloc(1, sizeof *cm);
    double *self = malloc(sizeof *self);
    *self = 1.0;
    cm->vt = &fake_vt;
    cm->self = self;
    cm->machine = f->m;
    sf_tile t = sf_tile_full(&f->relu->space);
    assert_close(sf_cost_task_s(cm, f->relu, &t, 9, SF_PASS_BWD),
                 1.0 + (double)sf_tile_numel(&t) / BW + 1.0);
    assert_string_equal(sf_cost_name(cm), "fake");
    fake_freed = 0;
    sf_cost_free(cm);
    assert_int_equal(fake_freed, 1);
}

/* sf_cost_task_fwd_bwd_s gives exactly sf_cost_task_s's two figures: through
 * the analytic model's one-call path on every operator of several zoo models
 * (whole tiles, halves along each dimension, an empty tile), and through the
 * fallback (two task_s calls) for a model without it. */
static void test_fwd_bwd_same_figures(void **state) {
    fixture *f = *state;
    sf_cost_model *cm = sf_cost_analytic_new(f->m, NULL);
    assert_non_null(cm->vt->task_fwd_bwd_s);
    const char *models[] = {"nmt", "inception_v3", "transformer", "rnntc"};
    int checked = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        sf_model_options o;
        sf_model_options_default(&o);
        o.batch = 12;
        sf_error err = {0};
        sf_graph *g = sf_model_build(models[mi], &o, &err);
        assert_non_null(g);
        for (int id = 0; id < sf_graph_num_ops(g); id++) {
            const sf_op *op = sf_graph_op(g, id);
            for (int d = -1; d <= op->space.ndim; d++) {
                sf_tile t = sf_tile_full(&op->space);
                if (d >= 0 && d < op->space.ndim) t.hi[d] = (t.hi[d] + 1) / 2;
                if (d == op->space.ndim) t.hi[0] = t.lo[0]; /* empty */
                double fwd, bwd;
                sf_cost_task_fwd_bwd_s(cm, op, &t, id % 16, &fwd, &bwd);
                if (fwd != sf_cost_task_s(cm, op, &t, id % 16, SF_PASS_FWD) ||
                    bwd != sf_cost_task_s(cm, op, &t, id % 16, SF_PASS_BWD))
                    fail_msg("%s %s: one-call figures differ", models[mi], op->name);
                checked++;
            }
        }
        sf_graph_free(g);
    }
    assert_true(checked > 500);
    sf_cost_free(cm);

    cm = calloc(1, sizeof *cm);
    double *self = malloc(sizeof *self);
    *self = 1.0;
    cm->vt = &fake_vt;
    cm->self = self;
    cm->machine = f->m;
    sf_tile t = sf_tile_full(&f->relu->space);
    double fwd, bwd;
    sf_cost_task_fwd_bwd_s(cm, f->relu, &t, 3, &fwd, &bwd);
    assert_true(fwd == sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_FWD));
    assert_true(bwd == sf_cost_task_s(cm, f->relu, &t, 3, SF_PASS_BWD));
    assert_true(bwd == fwd + 1.0);
    sf_cost_free(cm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_conv_compute_bound),
        cmocka_unit_test(test_relu_memory_bound),
        cmocka_unit_test(test_update),
        cmocka_unit_test(test_monotonic),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_vtable_dispatch),
        cmocka_unit_test(test_fwd_bwd_same_figures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
