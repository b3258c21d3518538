/*
 * test_runtime_eval.c - evaluation in inference mode, and batch norm's running
 * statistics (issue 29, item 2). A model with batch norm and dropout:
 *   x (8, 3, 4, 4) -> batchnorm -> relu -> dropout(0.5) -> flatten -> linear(5) -> loss
 * trained a few steps on synthetic batches, ranks as threads:
 *   - the running mean and variance after the steps are PyTorch's (momentum 0.1,
 *     unbiased variance), computed here from the batches in double;
 *   - on 2 ranks, split on samples, channels or rows, they are one rank's, on
 *     every rank alike (the batch's sums are added over the parts);
 *   - sf_runtime_eval's loss and accuracy are those of the model in inference
 *     mode, computed here another way (in double, by the definitions): no
 *     dropout, batch norm on the running statistics; fast and reference
 *     kernels agree. Before, evaluation ran in training mode (dropout on, batch
 *     statistics) and no running statistics were kept at all.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/runtime.h"
#include "soapflow/strategy.h"

#define N 8
#define C 3
#define H 4
#define W 4
#define K 5 /* classes */
#define STEPS 6
#define MAX_RANKS 2

enum { OP_X, OP_BN, OP_RELU, OP_DROP, OP_FLAT, OP_FC, OP_LOSS, N_OPS };

static sf_graph *model(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("bn_dropout");
    sf_shape in = {4, {N, C, H, W}};
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    int bn = sf_graph_add_op(g, SF_OP_BATCHNORM, "bn", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &p);
    int r = sf_graph_add_op(g, SF_OP_RELU, "relu", &p, (sf_tensor_ref[]){{bn, 0}}, 1, &err);
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = 0.5;
    int d = sf_graph_add_op(g, SF_OP_DROPOUT, "drop", &p, (sf_tensor_ref[]){{r, 0}}, 1, &err);
    sf_op_params_default(SF_OP_FLATTEN, &p);
    p.flatten.start_dim = 1;
    int f = sf_graph_add_op(g, SF_OP_FLATTEN, "flat", &p, (sf_tensor_ref[]){{d, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = K;
    int fc = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{f, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    int l = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "loss", &p, (sf_tensor_ref[]){{fc, 0}}, 1, &err);
    if (l != OP_LOSS) fail_msg("model: %s", err.msg);
    return g;
}

typedef struct job {
    const sf_graph *g;
    const sf_strategy *s;
    int fast;
    float **w0;
    /* rank r's results */
    float run[MAX_RANKS][2 * C]; /* running mean, variance after the steps */
    float **w_out;               /* rank 0's gathered weights */
    double eval_loss;
    int64_t eval_correct;
    double eval_loss2; /* a second evaluation: inference is deterministic */
    sf_error err[MAX_RANKS];
} job;

static sf_status rank_main(sf_comm *c, void *arg) {
    job *j = arg;
    int r = sf_comm_rank(c);
    sf_error *e = &j->err[r];
    sf_runtime_options o;
    sf_runtime_options_default(&o);
    o.lr = 0.05;
    o.fast_kernels = j->fast;
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, &o, e);
    if (!rt) return e->code ? e->code : SF_ERR_INTERNAL;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w0, e);
    sf_batch_bufs *bb = sf_batch_bufs_new(j->g, e);
    if (!bb) st = SF_ERR_NOMEM;
    for (int it = 0; it < STEPS && st == SF_OK; it++) {
        sf_batch_synthetic(bb, j->g, 7, it);
        st = sf_runtime_step(rt, &bb->batch, NULL, e);
    }
    float *bufs[N_OPS] = {0};
    bufs[OP_BN] = j->run[r];
    if (st == SF_OK) st = sf_runtime_get_buffers(rt, bufs, e);
    if (st == SF_OK) st = sf_runtime_get_params(rt, SF_RT_WEIGHTS, r == 0 ? j->w_out : NULL, e);
    double l1 = 0, l2 = 0;
    int64_t ok = 0;
    if (st == SF_OK) {
        sf_batch_synthetic(bb, j->g, 7, 1000);
        st = sf_runtime_eval(rt, &bb->batch, &l1, &ok, e);
    }
    if (st == SF_OK) st = sf_runtime_eval(rt, &bb->batch, &l2, NULL, e);
    if (r == 0) {
        j->eval_loss = l1;
        j->eval_correct = ok;
        j->eval_loss2 = l2;
    }
    sf_batch_bufs_free(bb);
    sf_runtime_free(rt);
    return st;
}

static void run(job *j, const sf_graph *g, const sf_strategy *s, int ranks, int fast) {
    sf_error err = {0};
    memset(j, 0, sizeof *j);
    j->g = g;
    j->s = s;
    j->fast = fast;
    j->w0 = sf_params_new(g, 42, 0, &err);
    j->w_out = sf_params_new(g, 0, 1, &err);
    assert_non_null(j->w0);
    assert_non_null(j->w_out);
    sf_status st = sf_comm_local_run(ranks, rank_main, j, &err);
    if (st != SF_OK) fail_msg("%d ranks: %s", ranks, err.msg);
}

static void job_free(job *j) {
    sf_params_free(j->g, j->w0);
    sf_params_free(j->g, j->w_out);
}

/* PyTorch's running statistics of bn after the training batches, in double. */
static void reference_running(const sf_graph *g, double *rm, double *rv) {
    sf_error err = {0};
    sf_batch_bufs *bb = sf_batch_bufs_new(g, &err);
    assert_non_null(bb);
    for (int c = 0; c < C; c++) rm[c] = 0, rv[c] = 1;
    for (int it = 0; it < STEPS; it++) {
        sf_batch_synthetic(bb, g, 7, it);
        const float *x = bb->inputs[OP_X];
        for (int c = 0; c < C; c++) {
            double s = 0, v = 0, m = N * H * W;
            for (int n = 0; n < N; n++)
                for (int q = 0; q < H * W; q++) s += x[(n * C + c) * H * W + q];
            s /= m;
            for (int n = 0; n < N; n++)
                for (int q = 0; q < H * W; q++) {
                    double d = x[(n * C + c) * H * W + q] - s;
                    v += d * d;
                }
            rm[c] = 0.9 * rm[c] + 0.1 * s;
            rv[c] = 0.9 * rv[c] + 0.1 * v / (m - 1);
        }
    }
    sf_batch_bufs_free(bb);
}

/* The eval batch through the model in inference mode, by the definitions, in
 * double: the mean cross-entropy and the rows whose largest logit is the label. */
static void reference_eval(const sf_graph *g, float *const *w, const float *run_stats, double *loss,
                           int64_t *correct) {
    sf_error err = {0};
    sf_batch_bufs *bb = sf_batch_bufs_new(g, &err);
    assert_non_null(bb);
    sf_batch_synthetic(bb, g, 7, 1000);
    const float *x = bb->inputs[OP_X], *gamma = w[OP_BN], *beta = w[OP_BN] + C;
    const float *fw = w[OP_FC], *fb = w[OP_FC] + K * C * H * W;
    const double eps = 1e-5;
    double total = 0;
    int64_t ok = 0;
    for (int n = 0; n < N; n++) {
        double h[C * H * W], z[K];
        for (int c = 0; c < C; c++)
            for (int q = 0; q < H * W; q++) {
                double v = (x[(n * C + c) * H * W + q] - run_stats[c]) /
                               sqrt(run_stats[C + c] + eps) * gamma[c] +
                           beta[c];
                h[c * H * W + q] = v > 0 ? v : 0; /* relu; dropout is the identity */
            }
        double mx = -INFINITY;
        int best = 0;
        for (int k = 0; k < K; k++) {
            z[k] = fb[k];
            for (int i = 0; i < C * H * W; i++) z[k] += fw[k * C * H * W + i] * h[i];
            if (z[k] > mx) mx = z[k], best = k;
        }
        double se = 0;
        for (int k = 0; k < K; k++) se += exp(z[k] - mx);
        int label = bb->labels[OP_LOSS][n];
        total += -(z[label] - mx - log(se));
        ok += best == label;
    }
    *loss = total / N;
    *correct = ok;
    sf_batch_bufs_free(bb);
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-3); }

/* One rank: the running statistics are PyTorch's, evaluation is inference. */
static void test_one_rank(void **state) {
    (void)state;
    sf_graph *g = model();
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_single(s, g, 0);
    double rm[C], rv[C];
    reference_running(g, rm, rv);
    for (int fast = 0; fast < 2; fast++) {
        job j;
        run(&j, g, s, 1, fast);
        for (int c = 0; c < C; c++) {
            if (rel(j.run[0][c], rm[c]) > 1e-5 || rel(j.run[0][C + c], rv[c]) > 1e-5)
                fail_msg("fast=%d channel %d: running %g %g, PyTorch's %g %g", fast, c,
                         (double)j.run[0][c], (double)j.run[0][C + c], rm[c], rv[c]);
            assert_true(fabs(rm[c]) > 1e-3 && fabs(rv[c] - 1) > 1e-3); /* they moved */
        }
        double want;
        int64_t want_ok;
        reference_eval(g, j.w_out, j.run[0], &want, &want_ok);
        if (rel(j.eval_loss, want) > 1e-5)
            fail_msg("fast=%d: eval loss %.9g, inference mode gives %.9g", fast, j.eval_loss, want);
        assert_int_equal(j.eval_correct, want_ok);
        assert_true(j.eval_loss == j.eval_loss2); /* no dropout mask drawn */
        job_free(&j);
    }
    sf_strategy_free(s);
    sf_graph_free(g);
}

/* Two ranks, the batch norm split on samples (data parallelism: each part
 * normalizes with its own statistics), on channels and on rows, or the linear
 * split on its input features (partial sums), or the loss on its classes: the
 * running statistics are one rank's, the same on both ranks, and evaluation is
 * inference with them (its loss and accuracy). */
static void test_two_ranks(void **state) {
    (void)state;
    sf_graph *g = model();
    sf_error err = {0};
    sf_machine *m = sf_machine_open("cpu[2]", &err);
    assert_non_null(m);
    double rm[C], rv[C];
    reference_running(g, rm, rv);
    for (int split = 0; split < 6; split++) {
        sf_strategy *s = sf_strategy_new(g);
        if (split == 0) {
            sf_strategy_data(s, g, m);
        } else if (split >= 4) {
            /* the loss on its classes (vocabulary-parallel: K = 5 in parts of 3
             * and 2), across the ranks; or also on its samples, the first half's
             * classes across the ranks, the second half's both on rank 1 */
            sf_strategy_single(s, g, 0);
            sf_config *cfg = sf_strategy_config(s, OP_LOSS);
            int deg[SF_MAX_DIMS] = {split == 4 ? 1 : 2, 2, 1, 1, 1, 1};
            assert_int_equal(sf_config_set_degrees(cfg, 2, deg), SF_OK);
            static const int16_t dev[4] = {0, 1, 1, 1};
            for (int q = 0; q < cfg->n_parts; q++) cfg->device[q] = dev[q];
        } else if (split == 3) {
            /* the linear on its input features: partial sums, reduced to rank 0 for
             * the loss, in the step and in evaluation alike */
            sf_strategy_single(s, g, 0);
            sf_config *cfg = sf_strategy_config(s, OP_FC);
            int deg[SF_MAX_DIMS] = {1, 1, 2, 1, 1, 1};
            assert_int_equal(sf_config_set_degrees(cfg, 3, deg), SF_OK);
            cfg->device[0] = 0;
            cfg->device[1] = 1;
        } else {
            sf_strategy_single(s, g, 0);
            sf_config *cfg = sf_strategy_config(s, OP_BN);
            int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
            deg[split == 1 ? 1 : 2] = 2; /* C = 3 in two uneven parts, or H */
            sf_config_set_degrees(cfg, 4, deg);
            cfg->device[0] = 0;
            cfg->device[1] = 1;
        }
        job j;
        run(&j, g, s, 2, 1);
        for (int k = 0; k < 2 * C; k++) {
            double want = k < C ? rm[k] : rv[k - C];
            if (rel(j.run[0][k], want) > 1e-5)
                fail_msg("split %d: running[%d] %g, one rank's %g", split, k, (double)j.run[0][k],
                         want);
            assert_true(j.run[1][k] == j.run[0][k]); /* every rank holds the same */
        }
        double want;
        int64_t want_ok;
        reference_eval(g, j.w_out, j.run[0], &want, &want_ok);
        if (rel(j.eval_loss, want) > 1e-5)
            fail_msg("split %d: eval loss %.9g, inference mode gives %.9g", split, j.eval_loss,
                     want);
        assert_int_equal(j.eval_correct, want_ok);
        job_free(&j);
        sf_strategy_free(s);
    }
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Buffers set on the runtime come back, and sf_buffers_new starts from
 * PyTorch's values. */
static void test_buffers_roundtrip(void **state) {
    (void)state;
    sf_graph *g = model();
    sf_error err = {0};
    float **b = sf_buffers_new(g, &err);
    assert_non_null(b);
    for (int op = 0; op < N_OPS; op++) assert_true((b[op] != NULL) == (op == OP_BN));
    assert_int_equal(sf_buffers_numel(sf_graph_op(g, OP_BN)), 2 * C);
    for (int c = 0; c < C; c++) {
        assert_true(b[OP_BN][c] == 0.0f);
        assert_true(b[OP_BN][C + c] == 1.0f);
    }
    sf_param_desc d[SF_MAX_PARAMS];
    assert_int_equal(sf_buffer_descs(sf_graph_op(g, OP_BN), d), 2);
    assert_string_equal(d[0].name, "running_mean");
    assert_string_equal(d[1].name, "running_var");
    assert_int_equal(d[1].offset, C);
    sf_params_free(g, b);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffers_roundtrip),
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_two_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
