/* Kernels against an independent framework: outputs and gradients of PyTorch
 * (float64, cast to float32) for conv2d, lstm, multi-head attention and batch
 * norm, stored as text fixtures under tests/fixtures by scripts/make_fixtures.py
 * (see its header for the format and the layouts). Both kernels, reference and
 * fast, on the whole tile and on tiles of a batch split stitched together (not
 * for batch norm, whose batch split changes the statistics), must match torch
 * within 1e-4 relative (max-norm). Needs SF_SOURCE_DIR (CTest sets it), never
 * torch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

#include "soapflow/graph.h"
#include "soapflow/kernels.h"

#define FX_MAX_TENSORS 16
#define FX_MAX_PARAMS 16
#define MAX_IO 3

/* ---- the fixture file -------------------------------------------------- */

typedef struct fx_tensor {
    char name[16];
    sf_shape shape;
    int64_t n;
    float *v;
} fx_tensor;

typedef struct fixture {
    char op[32];
    int n_params, n_tensors;
    char pname[FX_MAX_PARAMS][32];
    double pval[FX_MAX_PARAMS];
    fx_tensor t[FX_MAX_TENSORS];
} fixture;

static void fx_free(fixture *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->t[i].v);
    memset(f, 0, sizeof *f);
}

/* Reads path into f; fails the test with the reason when it cannot. */
static void fx_load(const char *path, fixture *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "r");
    if (!fp) fail_msg("cannot open %s (is SF_SOURCE_DIR right?)", path);
    char tok[64];
    int version = 0;
    if (fscanf(fp, "%63s %d", tok, &version) != 2 || strcmp(tok, "soapflow-fixture") != 0 ||
        version != 1)
        fail_msg("%s: not a soapflow-fixture 1 file", path);
    while (fscanf(fp, "%63s", tok) == 1) {
        if (tok[0] == '#') {
            int c;
            while ((c = fgetc(fp)) != EOF && c != '\n') {
            }
        } else if (strcmp(tok, "op") == 0) {
            if (fscanf(fp, "%31s", f->op) != 1) fail_msg("%s: op without a name", path);
        } else if (strcmp(tok, "param") == 0) {
            if (f->n_params == FX_MAX_PARAMS) fail_msg("%s: too many params", path);
            if (fscanf(fp, "%31s %lf", f->pname[f->n_params], &f->pval[f->n_params]) != 2)
                fail_msg("%s: bad param", path);
            f->n_params++;
        } else if (strcmp(tok, "tensor") == 0) {
            if (f->n_tensors == FX_MAX_TENSORS) fail_msg("%s: too many tensors", path);
            fx_tensor *t = &f->t[f->n_tensors++];
            if (fscanf(fp, "%15s %d", t->name, &t->shape.ndim) != 2 || t->shape.ndim < 1 ||
                t->shape.ndim > SF_MAX_DIMS)
                fail_msg("%s: bad tensor header", path);
            t->n = 1;
            for (int i = 0; i < t->shape.ndim; i++) {
                long long d;
                if (fscanf(fp, "%lld", &d) != 1 || d < 1 || d > 1000000)
                    fail_msg("%s: bad dimension of %s", path, t->name);
                t->shape.d[i] = d;
                t->n *= d;
            }
            t->v = malloc((size_t)t->n * sizeof *t->v);
            assert_non_null(t->v);
            for (int64_t e = 0; e < t->n; e++)
                if (fscanf(fp, "%f", &t->v[e]) != 1)
                    fail_msg("%s: %s ends after %lld of %lld numbers", path, t->name, (long long)e,
                             (long long)t->n);
        } else {
            fail_msg("%s: unknown keyword '%s'", path, tok);
        }
    }
    fclose(fp);
}

/* The tensor called name, or NULL. */
static const fx_tensor *fx_get(const fixture *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

static const fx_tensor *fx_get_i(const fixture *f, const char *prefix, int i) {
    char name[16];
    snprintf(name, sizeof name, "%s%d", prefix, i);
    return fx_get(f, name);
}

static double fx_param(const fixture *f, const char *name) {
    for (int i = 0; i < f->n_params; i++)
        if (strcmp(f->pname[i], name) == 0) return f->pval[i];
    fail_msg("fixture for %s lacks param %s", f->op, name);
    return 0;
}

static int64_t fx_int(const fixture *f, const char *name) {
    return (int64_t)llround(fx_param(f, name));
}

/* ---- the operator of a fixture ----------------------------------------- */

static sf_graph *fx_build(const fixture *f, const sf_op **op) {
    sf_op_type type;
    if (sf_op_type_from_name(f->op, &type) != SF_OK) fail_msg("unknown op %s", f->op);
    sf_op_params p;
    sf_op_params_default(type, &p);
    switch (type) {
    case SF_OP_CONV2D:
        p.conv2d.out_channels = fx_int(f, "out_channels");
        p.conv2d.kernel[0] = fx_int(f, "kernel_h");
        p.conv2d.kernel[1] = fx_int(f, "kernel_w");
        p.conv2d.stride[0] = fx_int(f, "stride_h");
        p.conv2d.stride[1] = fx_int(f, "stride_w");
        p.conv2d.padding[0] = fx_int(f, "pad_h");
        p.conv2d.padding[1] = fx_int(f, "pad_w");
        p.conv2d.dilation[0] = fx_int(f, "dilation_h");
        p.conv2d.dilation[1] = fx_int(f, "dilation_w");
        p.conv2d.groups = fx_int(f, "groups");
        p.conv2d.bias = (int)fx_int(f, "bias");
        break;
    case SF_OP_LSTM: p.lstm.hidden = fx_int(f, "hidden"); break;
    case SF_OP_ATTENTION:
        p.attention.embed_dim = fx_int(f, "embed_dim");
        p.attention.heads = fx_int(f, "heads");
        p.attention.causal = (int)fx_int(f, "causal");
        p.attention.bias = (int)fx_int(f, "bias");
        break;
    case SF_OP_BATCHNORM:
        p.norm.eps = fx_param(f, "eps");
        p.norm.affine = (int)fx_int(f, "affine");
        break;
    default: fail_msg("no fixture support for %s", f->op);
    }
    sf_error err = {0};
    sf_graph *g = sf_graph_new("fixture");
    assert_non_null(g);
    sf_tensor_ref refs[MAX_IO];
    int n_in = 0;
    for (const fx_tensor *t; n_in < MAX_IO && (t = fx_get_i(f, "in", n_in)); n_in++) {
        char name[8] = {'x', (char)('0' + n_in), 0};
        int id = sf_graph_add_input(g, name, &t->shape, 0, &err);
        assert_true(id >= 0);
        refs[n_in] = (sf_tensor_ref){id, 0};
    }
    int id = sf_graph_add_op(g, type, "op", &p, refs, n_in, &err);
    if (id < 0) fail_msg("%s: %s", f->op, err.msg);
    *op = sf_graph_op(g, id);
    /* the fixture's shapes are the operator's */
    for (int k = 0; k < (*op)->n_outputs; k++) {
        const fx_tensor *o = fx_get_i(f, "out", k);
        assert_non_null(o);
        assert_true(sf_shape_equal(&o->shape, &(*op)->out_shapes[k]));
    }
    const fx_tensor *w = fx_get(f, "w");
    assert_int_equal(w ? w->n : 0, (*op)->n_params);
    return g;
}

/* ---- running tiles ----------------------------------------------------- */

/* Forward and backward of tile t with the fixture's inputs, weights and R_k:
 * outputs stitched into y, gradients added into dx and dw. */
static void run_tile(const sf_op *op, const fixture *f, const sf_tile *t, int fast, float **y,
                     float **dx, float *dw) {
    sf_tile r[MAX_IO], ot[MAX_IO];
    float *xb[MAX_IO] = {0}, *dxb[MAX_IO] = {0}, *yb[MAX_IO] = {0}, *dyb[MAX_IO] = {0};
    for (int i = 0; i < op->n_inputs; i++) {
        sf_op_input_region(op, t, i, &r[i]);
        xb[i] = falloc(sf_tile_numel(&r[i]));
        dxb[i] = falloc(sf_tile_numel(&r[i]));
        region_copy(fx_get_i(f, "in", i)->v, &op->in_shapes[i], &r[i], xb[i], 0);
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_op_output_tile(op, t, k, &ot[k]);
        yb[k] = falloc(sf_tile_numel(&ot[k]));
        dyb[k] = falloc(sf_tile_numel(&ot[k]));
        region_copy(fx_get_i(f, "gout", k)->v, &op->out_shapes[k], &ot[k], dyb[k], 0);
    }
    size_t ws = sf_kernel_workspace_bytes(op, t, 0), wsb = sf_kernel_workspace_bytes(op, t, 1);
    if (wsb > ws) ws = wsb;
    float *wsp = ws_alloc(ws);
    const float *in_arr[MAX_IO] = {xb[0], xb[1], xb[2]};
    const float *dy_arr[MAX_IO] = {dyb[0], dyb[1], dyb[2]};
    const fx_tensor *w = fx_get(f, "w");
    sf_kernel_args a = {
        .op = op,
        .tile = *t,
        .n_inputs = op->n_inputs,
        .in = in_arr,
        .in_region = r,
        .n_outputs = op->n_outputs,
        .out = yb,
        .weights = w ? w->v : NULL,
        .grad_out = dy_arr,
        .grad_in = dxb,
        .grad_weights = dw,
        .workspace = wsp,
        .workspace_bytes = ws,
    };
    if (!sf_tile_empty(t)) {
        assert_int_equal(sf_kernel_forward(&a, fast), SF_OK);
        assert_int_equal(sf_kernel_backward(&a, fast), SF_OK);
        for (int k = 0; k < op->n_outputs; k++)
            region_copy(y[k], &op->out_shapes[k], &ot[k], yb[k], 1);
        for (int i = 0; i < op->n_inputs; i++)
            region_copy(dx[i], &op->in_shapes[i], &r[i], dxb[i], 2);
    }
    for (int i = 0; i < MAX_IO; i++) {
        free(xb[i]);
        free(dxb[i]);
        free(yb[i]);
        free(dyb[i]);
    }
    ws_free(wsp, ws);
}

static void expect_close(const char *c, const char *what, int fast, int parts, const float *got,
                         const fx_tensor *want) {
    assert_non_null(want);
    double e = rel_err(got, want->v, want->n);
    if (e > 1e-4) fail_msg("%s: %s fast=%d batch parts=%d: error %g", c, what, fast, parts, e);
}

/* Case `name`: both kernels, whole tile and (when batch_split) 2 and 3 batch
 * parts, against torch. */
static void check_fixture(const char *name, int batch_split) {
    const char *dir = getenv("SF_SOURCE_DIR");
    if (!dir) fail_msg("SF_SOURCE_DIR is not set (CTest sets it to the source tree)");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s.txt", dir, name);
    fixture f;
    fx_load(path, &f);
    const sf_op *op;
    sf_graph *g = fx_build(&f, &op);
    for (int parts = 1; parts <= (batch_split ? 3 : 1); parts++)
        for (int fast = 0; fast < 2; fast++) {
            float *y[MAX_IO] = {0}, *dx[MAX_IO] = {0};
            for (int k = 0; k < op->n_outputs; k++)
                y[k] = falloc(sf_shape_numel(&op->out_shapes[k]));
            for (int i = 0; i < op->n_inputs; i++)
                dx[i] = falloc(sf_shape_numel(&op->in_shapes[i]));
            float *dw = falloc(op->n_params);
            for (int p = 0; p < parts; p++) {
                sf_tile t = sf_tile_full(&op->space);
                sf_split_range(op->space.d[0], parts, p, &t.lo[0], &t.hi[0]);
                run_tile(op, &f, &t, fast, y, dx, dw);
            }
            for (int k = 0; k < op->n_outputs; k++)
                expect_close(name, k == 0 ? "output 0" : "output 1+", fast, parts, y[k],
                             fx_get_i(&f, "out", k));
            for (int i = 0; i < op->n_inputs; i++)
                expect_close(name, i == 0 ? "grad input 0" : "grad input 1+", fast, parts, dx[i],
                             fx_get_i(&f, "gin", i));
            if (op->n_params > 0)
                expect_close(name, "grad weights", fast, parts, dw, fx_get(&f, "gw"));
            for (int i = 0; i < MAX_IO; i++) {
                free(y[i]);
                free(dx[i]);
            }
            free(dw);
        }
    sf_graph_free(g);
    fx_free(&f);
}

static void test_conv2d(void **state) {
    (void)state;
    check_fixture("conv2d_strided_grouped", 1);
    check_fixture("conv2d_depthwise", 1);
    check_fixture("conv2d_dilated", 1);
}

static void test_lstm(void **state) {
    (void)state;
    check_fixture("lstm_state", 1);
    check_fixture("lstm_nostate", 1);
}

static void test_attention(void **state) {
    (void)state;
    check_fixture("mha_self", 1);
    check_fixture("mha_self_causal", 1);
    check_fixture("mha_cross", 1);
    check_fixture("mha_cross_causal_nobias", 1);
}

/* Training mode: batch statistics. Whole tile only: a batch split normalizes
 * each part with its own statistics (per-device batch norm), unlike torch. */
static void test_batchnorm(void **state) {
    (void)state;
    check_fixture("batchnorm2d_train", 0);
    check_fixture("batchnorm1d_train", 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_batchnorm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
