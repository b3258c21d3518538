/*
 * The runtime on issue 28's operators: every small model scripts/make_onnx_fixtures.py
 * exports for them (position embeddings and scales, a class token, transposes,
 * pads, means, hard activations, a GRU language model, GELU's tanh form, masked_fill with
 * constant masks, registered buffers held fixed; tests/fixtures/onnx/),
 * imported, trained on 2 and 4 ranks (threads) under the strategies of runtime_cases.h (data,
 * model, one weird trick, a searched one, random ones over the whole SOAP space and with partial
 * sums) gives the losses and weights of one rank. The random strategies split add_param's and
 * mul_param's parameter dimensions, so each part syncs and updates only its slice of the learned
 * tensor. Needs SF_SOURCE_DIR (CTest sets it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "runtime_cases.h"

#define N_RANDOM 3

static const char *const models[] = {"constops_op13",  "clstoken_op17",      "permute_op13",
                                     "pad_op17",       "mean_op13",          "hard_op17",
                                     "gru_op17_train", "gelutanh_op13_train",
                                     /* fixed tensors: constant masks, registered buffers */
                                     "maskfill_op13_train", "buffers_op17_train"};

static sf_graph *load(const char *name) {
    const char *dir = getenv("SF_SOURCE_DIR");
    if (!dir) fail_msg("SF_SOURCE_DIR is not set (CTest sets it to the source tree)");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/onnx/%s.onnx", dir, name);
    sf_graph *g = NULL;
    sf_error err = {0};
    if (sf_onnx_load(path, 4, &g, NULL, &err) != SF_OK) fail_msg("%s", err.msg);
    return g;
}

static void run_model(const char *name, int n) {
    sf_graph *g = load(name);
    rc_job one;
    assert_int_equal(rc_train_one(&one, g, 0), SF_OK);
    sf_strategy *s = sf_strategy_new(g);
    char what[160];
    int bulk, ok, cases = 0, param_splits = 0, reduces[SF_REDUCE_KIND_COUNT] = {0};
    (void)rc_model; /* runtime_cases.h's own models: test_runtime.c trains them */
    for (int k = 0; (ok = rc_strategy(g, n, k, N_RANDOM, s, what, sizeof what, &bulk)) != 0; k++) {
        assert_int_equal(ok, 1);
        assert_int_equal(rc_check_coverage(g, s, n), 0);
        rc_job j;
        assert_int_equal(rc_job_init(&j, g, s, bulk), 0);
        rc_job_scheme(&j, k, n);
        size_t len = strlen(what);
        snprintf(what + len, sizeof what - len, ", %s", rc_scheme_name(&j));
        sf_error err = {0};
        sf_status st = sf_comm_local_run(n, rc_rank_main, &j, &err);
        if (st != SF_OK)
            for (int r = 0; r < n; r++)
                if (j.err[r].code) fprintf(stderr, "%s: rank %d: %s\n", what, r, j.err[r].msg);
        assert_int_equal(st, SF_OK);
        assert_int_equal(rc_compare(&j, &one, what), 0);
        rc_job_free(&j);
        rc_count_reduces(g, s, n, reduces);
        for (int op = 0; op < sf_graph_num_ops(g); op++) {
            const sf_op *x = sf_graph_op(g, op);
            const sf_config *c = sf_strategy_get(s, op);
            if (x->type != SF_OP_ADD_PARAM && x->type != SF_OP_MUL_PARAM) continue;
            for (int d = 0; d < c->ndim; d++)
                param_splits += x->kinds[d] == SF_DIM_PARAMETER && c->degree[d] > 1;
        }
        cases++;
    }
    assert_true(cases >= 4 + N_RANDOM);
    /* every model has a linear whose input features some strategy splits */
    assert_true(reduces[SF_REDUCE_SCATTER] + reduces[SF_REDUCE_ONE] > 0);
    /* the learned tensors were split on their parameter dimensions somewhere */
    if (!strncmp(name, "constops", 8)) assert_true(param_splits > 0);
    rc_job_free(&one);
    sf_strategy_free(s);
    sf_graph_free(g);
}

static void test_models_2_ranks(void **state) {
    (void)state;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) run_model(models[m], 2);
}

static void test_models_4_ranks(void **state) {
    (void)state;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) run_model(models[m], 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_2_ranks),
        cmocka_unit_test(test_models_4_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
