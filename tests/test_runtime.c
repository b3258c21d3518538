/*
 * Runtime tests, ranks as threads of this process (the local communication
 * back end): P ranks give the losses and weights of one rank for every case of
 * runtime_cases.h on 2 and 4 ranks; the task graph's pairs cover every input
 * region exactly once; a strategy that is invalid for the rank count is
 * refused on every rank with one message. mpi_runtime.c runs the same cases
 * under mpirun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first: its own block */
#include <cmocka.h>

#include "runtime_cases.h"

#define N_RANDOM 3

static void run_cases(int model, int n) {
    sf_graph *g = rc_model(model);
    assert_non_null(g);
    rc_job one;
    assert_int_equal(rc_train_one(&one, g, 0), SF_OK);
    sf_strategy *s = sf_strategy_new(g);
    char what[160];
    int bulk, ok, cases = 0, reduces[SF_REDUCE_KIND_COUNT] = {0}, conv_partial = 0, classes = 0;
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
        if (st != SF_OK) {
            for (int r = 0; r < n; r++)
                if (j.err[r].code) fprintf(stderr, "%s: rank %d: %s\n", what, r, j.err[r].msg);
        }
        assert_int_equal(st, SF_OK);
        assert_int_equal(rc_compare(&j, &one, what), 0);
        rc_job_free(&j);
        rc_count_reduces(g, s, n, reduces);
        classes += rc_count_inner(g, s, n) > 0;
        for (int op = 0; op < sf_graph_num_ops(g); op++) {
            const sf_op *x = sf_graph_op(g, op);
            int rd = rc_reduce_dim(x);
            conv_partial += x->type == SF_OP_CONV2D && rd >= 0 &&
                            sf_strategy_get(s, op)->ndim > rd &&
                            sf_strategy_get(s, op)->degree[rd] > 1;
        }
        cases++;
    }
    /* the CNNs run convolutions split on their input channels (partial sums) */
    if (model == 0 || model == 2) assert_true(conv_partial > 0);
    /* the models with linears run partial sums; the linears model every kind */
    if (model != 2) assert_true(reduces[SF_REDUCE_SCATTER] + reduces[SF_REDUCE_ONE] > 0);
    if (model == 6)
        for (int q = 0; q < SF_REDUCE_KIND_COUNT; q++) assert_true(reduces[q] > 0);
    /* every model ends in a softmax_ce: some cases split it on its classes
     * across ranks (vocabulary-parallel cross-entropy) */
    assert_true(classes >= 2);
    assert_true(cases >= 4 + N_RANDOM);
    rc_job_free(&one);
    sf_strategy_free(s);
    sf_graph_free(g);
}

static void test_lenet5(void **state) {
    (void)state;
    run_cases(0, 2);
    run_cases(0, 4);
}

static void test_mlp(void **state) {
    (void)state;
    run_cases(1, 2);
    run_cases(1, 4);
}

static void test_resnet_tiny(void **state) {
    (void)state;
    run_cases(2, 2);
    run_cases(2, 4);
}

static void test_rnnlm_small(void **state) {
    (void)state;
    run_cases(3, 2);
    run_cases(3, 4);
}

static void test_transformer_small(void **state) {
    (void)state;
    run_cases(4, 2);
    run_cases(4, 4);
}

static void test_gpt_small(void **state) {
    (void)state;
    run_cases(5, 2);
    run_cases(5, 4);
}

static void test_linears(void **state) {
    (void)state;
    run_cases(6, 2);
    run_cases(6, 4);
}

/* The cases of family f on 2 and 4 ranks give one rank's losses and weights. */
static void run_family(const rc_family *f) {
    for (int n = 2; n <= 4; n += 2) {
        sf_graph *g = NULL;
        rc_job one;
        memset(&one, 0, sizeof one);
        int model = -1;
        for (int i = 0; i < f->n; i++) {
            if (i % f->per == 0) { /* a new model or optimizer: its one-rank run */
                if (g) rc_job_free(&one);
                if (f->model(i) != model) {
                    sf_graph_free(g);
                    g = rc_model(model = f->model(i));
                    assert_non_null(g);
                }
                assert_int_equal(rc_train_one_with(&one, g, 0, f->opt(i)), SF_OK);
            }
            sf_strategy *s = sf_strategy_new(g);
            char what[160];
            rc_job j;
            assert_int_equal(f->make(g, n, i, N_RANDOM, s, what, sizeof what, &j), 1);
            sf_error err = {0};
            sf_status st = sf_comm_local_run(n, rc_rank_main, &j, &err);
            if (st != SF_OK) fprintf(stderr, "%s: %s\n", what, err.msg);
            assert_int_equal(st, SF_OK);
            assert_int_equal(rc_compare(&j, &one, what), 0);
            rc_job_free(&j);
            sf_strategy_free(s);
        }
        rc_job_free(&one);
        sf_graph_free(g);
    }
}

/* Adam and AdamW (rc_adam_case: data and a random strategy, ring and
 * parameter server). */
static void test_adam(void **state) {
    (void)state;
    run_family(&rc_adam_family);
}

/* ZeRO stages 1-3 (rc_zero_case: data and a random strategy, SGD and Adam). */
static void test_zero(void **state) {
    (void)state;
    run_family(&rc_zero_family);
}

/* Recomputation of every operator (rc_recompute_case: data and a random
 * strategy) against one rank without it. */
static void test_recompute(void **state) {
    (void)state;
    run_family(&rc_recompute_family);
}

/* Pipelines (rc_pipe_case: gpipe, 1f1b and interleaved:2 on lenet5, the MLP
 * and a small GPT, one rank a stage or with data or tensor parallelism inside
 * the stages) against one rank on the whole batch. */
static void test_pipeline(void **state) {
    (void)state;
    run_family(&rc_pipe_family);
}

/* Attention with dropout of its probabilities, split on heads among the rest:
 * the dropout is on (the losses differ from those without it), and P ranks
 * draw one rank's mask. */
static void test_attention_dropout(void **state) {
    (void)state;
    sf_graph *g = rc_attn_drop(0.25), *g0 = rc_attn_drop(0);
    assert_non_null(g);
    assert_non_null(g0);
    rc_job j, j0;
    assert_int_equal(rc_train_one(&j, g, 0), SF_OK);
    assert_int_equal(rc_train_one(&j0, g0, 0), SF_OK);
    for (int i = 0; i < RC_ITERS; i++) assert_true(fabs(j.losses[i] - j0.losses[i]) > 1e-6);
    rc_job_free(&j);
    rc_job_free(&j0);
    sf_graph_free(g);
    sf_graph_free(g0);
    run_cases(7, 2);
    run_cases(7, 4);
}

/* conv_transpose2d among convolutions: halos of its input rows, its output
 * channels' weight columns. */
static void test_upsample(void **state) {
    (void)state;
    run_cases(8, 2);
    run_cases(8, 4);
}

/* A part on a device past the rank count is refused on every rank, before
 * any work, with one message. */
typedef struct bad_job {
    const sf_graph *g;
    const sf_strategy *s;
    sf_error err[RC_MAX_RANKS];
} bad_job;

static sf_status bad_rank(sf_comm *c, void *arg) {
    bad_job *j = arg;
    sf_error *e = &j->err[sf_comm_rank(c)];
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, NULL, e);
    if (rt) {
        sf_runtime_free(rt);
        return SF_OK;
    }
    return e->code;
}

static void test_bad_strategy_refused_everywhere(void **state) {
    (void)state;
    sf_graph *g = rc_model(0);
    sf_machine *m = rc_machine(4);
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_data(s, g, m);
    bad_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.s = s;
    sf_error err = {0};
    assert_int_not_equal(sf_comm_local_run(2, bad_rank, &j, &err), SF_OK);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(j.err[r].code, SF_ERR_INVALID);
        assert_non_null(strstr(j.err[r].msg, "there are 2 ranks"));
        assert_string_equal(j.err[r].msg, j.err[0].msg);
    }
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Gathered weights equal what was set when no step ran (every element comes
 * back from the device that holds it), for a strategy that splits weights. */
static sf_status roundtrip_rank(sf_comm *c, void *arg) {
    rc_job *j = arg;
    sf_error *e = &j->err[sf_comm_rank(c)];
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, NULL, e);
    if (!rt) return e->code;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w0, e);
    if (st == SF_OK)
        st = sf_runtime_get_params(rt, SF_RT_WEIGHTS, sf_comm_rank(c) == 0 ? j->w_out : NULL, e);
    sf_runtime_free(rt);
    return st;
}

static void test_params_roundtrip(void **state) {
    (void)state;
    for (int model = 0; model < RC_MODELS; model++) {
        sf_graph *g = rc_model(model);
        sf_machine *m = rc_machine(4);
        sf_strategy *s = sf_strategy_new(g);
        sf_error err = {0};
        assert_int_equal(sf_strategy_baseline(s, "model", g, m, &err), SF_OK);
        rc_job j;
        assert_int_equal(rc_job_init(&j, g, s, 0), 0);
        assert_int_equal(sf_comm_local_run(4, roundtrip_rank, &j, &err), SF_OK);
        for (int op = 0; op < sf_graph_num_ops(g); op++)
            if (j.w0[op])
                assert_memory_equal(j.w0[op], j.w_out[op],
                                    (size_t)sf_graph_op(g, op)->n_params * sizeof(float));
        rc_job_free(&j);
        sf_strategy_free(s);
        sf_machine_free(m);
        sf_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_strategy_refused_everywhere),
        cmocka_unit_test(test_params_roundtrip),
        cmocka_unit_test(test_lenet5),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_resnet_tiny),
        cmocka_unit_test(test_rnnlm_small),
        cmocka_unit_test(test_transformer_small),
        cmocka_unit_test(test_gpt_small),
        cmocka_unit_test(test_linears),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_zero),
        cmocka_unit_test(test_recompute),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_attention_dropout),
        cmocka_unit_test(test_upsample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
