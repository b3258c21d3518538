/*
 * A small GPT (2 blocks, width 32, 4 heads, 8 positions, vocabulary 16, batch
 * 2) trained by soapflow's runtime on one rank and by PyTorch from the same
 * weights on the same batches (tests/gpt_torch_check.py): the losses of the
 * first steps agree within a relative 1e-4. That holds the whole model to an
 * independent definition: causal attention, the pre-norm blocks, exact GELU,
 * learned positions and the LM head tied to wte (whose two gradients must
 * both reach the one weight group, or the losses part after the first step).
 * Three times: with SGD (momentum, weight decay) against torch.optim.SGD, with
 * Adam (L2 weight decay) against torch.optim.Adam and with AdamW (decoupled)
 * against torch.optim.AdamW, which holds the runtime's optimizers (bias
 * correction from the step count, the decays) to PyTorch's.
 * Skipped where /usr/bin/python3 (or python3) has no torch.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/strategy.h"

#define STEPS 5
#define LR 0.05
#define MOMENTUM 0.9
#define WD 1e-3
/* Adam's: a rate that moves the loss in STEPS steps, a decay that shows */
#define ADAM_LR 0.01
#define ADAM_WD 0.05
#define BETA1 0.8
#define BETA2 0.99
#define EPS 1e-7

typedef struct job {
    sf_optimizer_kind optimizer;
    const sf_graph *g;
    const sf_strategy *s;
    float **w0;
    FILE *dump;
    double losses[STEPS];
    sf_error err;
} job;

static void dump_ints(FILE *f, const char *what, const float *v, const int32_t *l, int64_t n) {
    fprintf(f, "%s", what);
    for (int64_t q = 0; q < n; q++) fprintf(f, " %lld", (long long)(v ? (int64_t)v[q] : l[q]));
    fprintf(f, "\n");
}

static sf_status train(sf_comm *c, void *arg) {
    job *j = arg;
    sf_runtime_options o;
    sf_runtime_options_default(&o);
    o.optimizer = j->optimizer;
    int adam = j->optimizer != SF_OPTIMIZER_SGD;
    o.lr = adam ? ADAM_LR : LR;
    o.momentum = MOMENTUM;
    o.weight_decay = adam ? ADAM_WD : WD;
    o.beta1 = BETA1;
    o.beta2 = BETA2;
    o.eps = EPS;
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, &o, &j->err);
    if (!rt) return j->err.code;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w0, &j->err);
    sf_batch_bufs *bb = sf_batch_bufs_new(j->g, &j->err);
    if (!bb) st = SF_ERR_NOMEM;
    int tok = sf_graph_find(j->g, "tokens"), pos = sf_graph_find(j->g, "positions");
    int loss = sf_graph_find(j->g, "loss");
    for (int it = 0; it < STEPS && st == SF_OK; it++) {
        sf_batch_synthetic(bb, j->g, 9, it);
        dump_ints(j->dump, "tokens", bb->inputs[tok], NULL, bb->numel[tok]);
        dump_ints(j->dump, "positions", bb->inputs[pos], NULL, bb->numel[pos]);
        dump_ints(j->dump, "labels", NULL, bb->labels[loss], bb->numel[loss]);
        st = sf_runtime_step(rt, &bb->batch, &j->losses[it], &j->err);
    }
    sf_batch_bufs_free(bb);
    sf_runtime_free(rt);
    return st;
}

static const char *python_with_torch(void) {
    static const char *const py[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof py / sizeof py[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", py[i]);
        if (system(cmd) == 0) return py[i];
    }
    return NULL;
}

static void gpt_matches_torch(sf_optimizer_kind optimizer) {
    const char *src = getenv("SF_SOURCE_DIR");
    const char *py = python_with_torch();
    if (!src || !py) {
        print_message("python3 with torch (or SF_SOURCE_DIR) not available: skipped\n");
        skip();
    }
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 2, mo.layers = 2, mo.hidden = 32, mo.heads = 4, mo.seq_len = 8, mo.vocab = 16;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &mo, &err);
    assert_non_null(g);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_single(s, g, 0), SF_OK);

    char dir[] = "/tmp/sf-gpt-torch.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char dump_path[128], out_path[128];
    snprintf(dump_path, sizeof dump_path, "%s/dump.txt", dir);
    snprintf(out_path, sizeof out_path, "%s/torch.txt", dir);
    job j = {.optimizer = optimizer, .g = g, .s = s};
    int adam = optimizer != SF_OPTIMIZER_SGD;
    j.w0 = sf_params_new(g, 42, 0, &err);
    assert_non_null(j.w0);
    j.dump = fopen(dump_path, "w");
    assert_non_null(j.dump);
    fprintf(j.dump, "model %lld %lld %lld %lld %lld %lld %lld %.17g %.17g %.17g\n",
            (long long)mo.layers, (long long)mo.hidden, (long long)mo.heads, (long long)mo.seq_len,
            (long long)mo.vocab, (long long)mo.batch, (long long)mo.seq_len, adam ? ADAM_LR : LR,
            MOMENTUM, adam ? ADAM_WD : WD);
    if (adam)
        fprintf(j.dump, "optimizer %s %.17g %.17g %.17g\n", sf_optimizer_name(optimizer), BETA1,
                BETA2, EPS);
    int owners = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        if (!j.w0[op]) continue;
        owners++;
        sf_param_desc d[SF_MAX_PARAMS];
        int n = sf_op_param_descs(sf_graph_op(g, op), d);
        for (int k = 0; k < n; k++) {
            int64_t numel = sf_shape_numel(&d[k].shape);
            fprintf(j.dump, "param %s %s %lld", sf_graph_op(g, op)->name, d[k].name,
                    (long long)numel);
            for (int64_t q = 0; q < numel; q++)
                fprintf(j.dump, " %.9g", (double)j.w0[op][d[k].offset + q]);
            fprintf(j.dump, "\n");
        }
    }
    assert_null(j.w0[sf_graph_find(g, "lm_head")]); /* tied: wte owns the matrix */
    assert_true(owners > 0);
    assert_int_equal(sf_comm_local_run(1, train, &j, &err), SF_OK);
    assert_int_equal(fclose(j.dump), 0);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s '%s/tests/gpt_torch_check.py' '%s' > '%s'", py, src, dump_path,
             out_path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(out_path, "r");
    assert_non_null(f);
    int got = 0, step;
    double v;
    while (fscanf(f, " loss %d %lf", &step, &v) == 2) {
        assert_in_range(step, 0, STEPS - 1);
        double rel = fabs(v - j.losses[step]) / fmax(fabs(v), 1e-12);
        print_message("%s step %d: soapflow %.7f torch %.7f (relative %.2g)\n",
                      sf_optimizer_name(optimizer), step, j.losses[step], v, rel);
        if (!(rel <= 1e-4)) fail_msg("step %d: loss %.9g, torch %.9g", step, j.losses[step], v);
        got++;
    }
    fclose(f);
    assert_int_equal(got, STEPS);
    assert_true(fabs(j.losses[STEPS - 1] - j.losses[0]) > 1e-4); /* training moved */
    remove(dump_path);
    remove(out_path);
    rmdir(dir);
    sf_params_free(g, j.w0);
    sf_strategy_free(s);
    sf_graph_free(g);
}

static void test_gpt_matches_torch(void **state) {
    (void)state;
    gpt_matches_torch(SF_OPTIMIZER_SGD);
}

static void test_gpt_adam_matches_torch(void **state) {
    (void)state;
    gpt_matches_torch(SF_OPTIMIZER_ADAM);
}

static void test_gpt_adamw_matches_torch(void **state) {
    (void)state;
    gpt_matches_torch(SF_OPTIMIZER_ADAMW);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_matches_torch),
        cmocka_unit_test(test_gpt_adam_matches_torch),
        cmocka_unit_test(test_gpt_adamw_matches_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
