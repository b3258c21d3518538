/* Validation (soapflow/validate.h): the fit of predictions to measurements on
 * hand-checked figures, the summary and the largest gap of hand-made rows,
 * and a real prediction and measurement of lenet5 on two ranks that are
 * threads: the table of sync models is the caller's, the hooks are called as
 * documented, and every rank ends with the same figures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/validate.h"

static void test_fit(void **state) {
    (void)state;
    sf_validate_fit f;
    sf_error err = {0};
    /* errors -20%, 0%, -25%: median |error| 20%, the worst the third, the
     * same order (tau 1) */
    double p[] = {1, 2, 3}, m[] = {1.25, 2, 4};
    assert_int_equal(sf_validate_fit_of(p, m, 3, &f, &err), SF_OK);
    assert_true(fabs(f.median_abs - 0.2) < 1e-15);
    assert_int_equal(f.worst, 2);
    assert_true(f.tau == 1);
    /* the order reversed in one pair of three: tau 1/3 */
    double m2[] = {1, 3, 2};
    assert_int_equal(sf_validate_fit_of(p, m2, 3, &f, &err), SF_OK);
    assert_true(fabs(f.tau - 1.0 / 3) < 1e-15);
    assert_int_equal(f.worst, 2);                      /* 3 / 2 - 1 = +50% */
    assert_true(fabs(f.median_abs - 1.0 / 3) < 1e-15); /* |2/3 - 1| */
    /* one strategy: an error, but no order */
    assert_int_equal(sf_validate_fit_of(p, m, 1, &f, &err), SF_OK);
    assert_true(fabs(f.median_abs - 0.2) < 1e-15 && isnan(f.tau));
    assert_int_equal(sf_validate_fit_of(p, m, 0, &f, &err), SF_ERR_INVALID);
}

static void test_summary(void **state) {
    (void)state;
    sf_validate_options o;
    sf_validate_options_default(&o);
    /* the six sync models (overlap and bulk of each scheme), in the order the
     * tables print them */
    assert_int_equal(o.n_models, 6);
    assert_true(o.models[0].mode == SF_SYNC_OVERLAP && o.models[0].scheme == SF_SCHEME_RING);
    assert_true(o.models[1].mode == SF_SYNC_BULK && o.models[1].scheme == SF_SCHEME_RING);
    assert_true(o.models[2].mode == SF_SYNC_OVERLAP && o.models[2].scheme == SF_SCHEME_PS);
    assert_true(o.models[3].mode == SF_SYNC_BULK && o.models[3].scheme == SF_SCHEME_PS);
    assert_true(o.models[4].mode == SF_SYNC_OVERLAP && o.models[4].scheme == SF_SCHEME_HIERARCHICAL);
    assert_true(o.models[5].mode == SF_SYNC_BULK && o.models[5].scheme == SF_SCHEME_HIERARCHICAL);
    assert_true(o.iters == 20 && o.warmup == 2 && o.rounds == 4 && o.seed == 1);
    assert_int_equal(sf_validate_rounds(&o), 4);
    o.iters = 3;
    assert_int_equal(sf_validate_rounds(&o), 3);

    static const sf_validate_sync_model two[] = {{SF_SYNC_BULK, SF_SCHEME_PS},
                                                 {SF_SYNC_OVERLAP, SF_SCHEME_RING}};
    o.models = two;
    o.n_models = 2;
    sf_validate_row rows[3];
    memset(rows, 0, sizeof rows);
    double pred[] = {1, 2, 3}, med[] = {1.25, 2, 4}, fast[] = {1, 1.5, 4};
    for (int i = 0; i < 3; i++) {
        rows[i].pred_s = pred[i];
        rows[i].meas_s = med[i];
        rows[i].meas_min_s = fast[i];
        rows[i].alt_s[0] = 4 - pred[i]; /* the reverse order */
        rows[i].alt_s[1] = pred[i];
    }
    sf_validate_summary s;
    sf_error err = {0};
    assert_int_equal(sf_validate_summarize(rows, 3, &o, &s, &err), SF_OK);
    assert_true(fabs(s.main.median_abs - 0.2) < 1e-15 && s.main.tau == 1);
    /* against the fastest steps: 0%, +33%, -25% */
    assert_true(fabs(s.fastest.median_abs - 0.25) < 1e-15);
    assert_int_equal(s.fastest.worst, 1);
    assert_true(s.models[0].tau == -1);
    assert_true(s.models[1].tau == s.main.tau && s.models[1].median_abs == s.main.median_abs);
    assert_int_equal(sf_validate_summarize(rows, 0, &o, &s, &err), SF_ERR_INVALID);
    sf_error_clear(&err);
    o.n_models = SF_VALIDATE_MAX_SYNC_MODELS + 1;
    assert_int_equal(sf_validate_summarize(rows, 3, &o, &s, &err), SF_ERR_INVALID);

    /* the largest gap is the kind furthest from its prediction, either way */
    sf_validate_row r;
    memset(&r, 0, sizeof r);
    r.pred[SF_VALIDATE_COMPUTE] = 1;
    r.meas[SF_VALIDATE_COMPUTE] = 1.5;
    r.pred[SF_VALIDATE_SYNC] = 0.9;
    r.meas[SF_VALIDATE_SYNC] = 0.2;
    assert_int_equal(sf_validate_largest_gap(&r), SF_VALIDATE_SYNC);
    r.meas[SF_VALIDATE_IDLE] = 0.8;
    assert_int_equal(sf_validate_largest_gap(&r), SF_VALIDATE_IDLE);
    static const char *const names[] = {"compute", "transfer", "sync", "update", "copy", "idle"};
    for (int k = 0; k < SF_VALIDATE_KIND_COUNT; k++)
        assert_string_equal(sf_validate_kind_name(k), names[k]);
    assert_null(sf_validate_kind_name(SF_VALIDATE_KIND_COUNT));
    assert_null(sf_validate_kind_name(-1));
}

/* ---- a real validation on two threads ---------------------------------------- */

#define N_ROWS 2
#define ITERS 3
#define WARMUP 1
#define ROUNDS 2

typedef struct job {
    const sf_graph *g;
    const sf_machine *m;
    const sf_strategy *s[N_ROWS];
    sf_validate_row rows[2][N_ROWS];
    int predicted[2][N_ROWS], measured[2][N_ROWS];
    int64_t steps[2], last_done[2], total[2];
} job;

typedef struct hook_user {
    job *j;
    int rank;
} hook_user;

static sf_status on_predicted(void *user, int i, const sf_sim *sim, sf_error *err) {
    hook_user *u = user;
    u->j->predicted[u->rank][i]++;
    char *trace = sf_sim_trace_to_json(sim, err); /* the schedule is there to draw */
    if (!trace) return err->code;
    free(trace);
    return SF_OK;
}

static sf_status on_measured(void *user, int i, sf_comm *c, const sf_runtime *rt, sf_error *err) {
    hook_user *u = user;
    (void)err;
    const sf_rt_event *ev;
    if (sf_comm_rank(c) != u->rank || sf_runtime_events(rt, &ev) <= 0) return SF_ERR_INTERNAL;
    u->j->measured[u->rank][i]++;
    return SF_OK;
}

static void on_step(void *user, int64_t done, int64_t total, const char *name) {
    hook_user *u = user;
    assert_non_null(name);
    u->j->steps[u->rank]++;
    u->j->last_done[u->rank] = done;
    u->j->total[u->rank] = total;
}

static sf_status validate_rank(sf_comm *c, void *arg) {
    job *j = arg;
    int me = sf_comm_rank(c);
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(j->m, NULL);
    if (!cm) return SF_ERR_NOMEM;
    static const sf_validate_sync_model models[] = {{SF_SYNC_BULK, SF_SCHEME_PS},
                                                    {SF_SYNC_OVERLAP, SF_SCHEME_RING},
                                                    {SF_SYNC_BULK, SF_SCHEME_RING}};
    hook_user u = {j, me};
    sf_validate_options o;
    sf_validate_options_default(&o);
    o.models = models;
    o.n_models = 3;
    o.iters = ITERS;
    o.warmup = WARMUP;
    o.rounds = ROUNDS;
    o.on_predicted = on_predicted;
    o.on_measured = on_measured;
    o.on_step = on_step;
    o.user = &u;
    sf_validate_row *rows = j->rows[me];
    static const char *const names[N_ROWS] = {"data", "model"};
    for (int i = 0; i < N_ROWS; i++) {
        rows[i].name = names[i];
        rows[i].strategy = j->s[i];
    }
    sf_profile_stats cov;
    sf_status st = sf_validate_predict(j->g, j->m, cm, rows, N_ROWS, &o, &cov, &err);
    if (st == SF_OK && (cov.hits != 0 || cov.misses != 0)) st = SF_ERR_INTERNAL; /* analytic */
    if (st == SF_OK) st = sf_validate_measure(c, j->g, rows, N_ROWS, &o, &err);
    sf_cost_free(cm);
    if (err.code) fprintf(stderr, "rank %d: %s\n", me, err.msg);
    return st;
}

static void test_predict_measure(void **state) {
    (void)state;
    sf_kernels_set_threads(1);
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 8;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("cpu[2]", &err);
    assert_non_null(g);
    assert_non_null(m);
    sf_strategy *s0 = sf_strategy_new(g), *s1 = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s0, g, m), SF_OK);
    assert_int_equal(sf_strategy_model(s1, g, m), SF_OK);
    job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->g = g;
    j->m = m;
    j->s[0] = s0;
    j->s[1] = s1;
    assert_int_equal(sf_comm_local_run(2, validate_rank, j, &err), SF_OK);

    /* the predictions are the simulator's: o.sim (overlap, ring) for the
     * table, each model of the caller's table beside it */
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    for (int i = 0; i < N_ROWS; i++) {
        const sf_validate_row *e = &j->rows[0][i];
        sf_sim_options so;
        sf_sim_options_default(&so);
        sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, j->s[i], &r, &err), SF_OK);
        assert_true(e->pred_s == r.iter_s);
        assert_true(e->alt_s[1] == r.iter_s); /* overlap/ring again */
        assert_true(e->crit >= 0 && e->crit < 2);
        double kinds[SF_SIM_TOTAL_COUNT];
        assert_int_equal(sf_sim_kind_totals(sim, e->crit, kinds, &err), SF_OK);
        for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) assert_true(e->pred[k] == kinds[k]);
        assert_true(e->pred[SF_VALIDATE_IDLE] >= 0);
        sf_sim_free(sim);
        so.sync = SF_SYNC_BULK;
        so.scheme = SF_SCHEME_PS;
        sim = sf_sim_new(g, m, cm, &so, &err);
        assert_int_equal(sf_sim_run(sim, j->s[i], &r, &err), SF_OK);
        assert_true(e->alt_s[0] == r.iter_s);
        sf_sim_free(sim);
    }
    sf_cost_free(cm);

    for (int rank = 0; rank < 2; rank++) {
        for (int i = 0; i < N_ROWS; i++) {
            const sf_validate_row *e = &j->rows[rank][i];
            /* once predicted, one measured trace: the last round's last step */
            assert_int_equal(j->predicted[rank][i], 1);
            assert_int_equal(j->measured[rank][i], 1);
            assert_true(e->meas_s > 0 && e->meas_min_s > 0 && e->meas_min_s <= e->meas_s);
            assert_true(e->meas[SF_VALIDATE_COMPUTE] > 0);
            assert_true(e->meas[SF_VALIDATE_IDLE] >= 0);
            assert_true(e->meas_crit >= 0 && e->meas_crit < 2);
            assert_true(e->error == e->pred_s / e->meas_s - 1);
        }
        /* every step, warm-up or timed, was counted once */
        int64_t total = N_ROWS * (ROUNDS * WARMUP + ITERS);
        assert_int_equal(j->steps[rank], total);
        assert_int_equal(j->last_done[rank], total);
        assert_int_equal(j->total[rank], total);
    }
    /* the measured figures are the same on every rank */
    for (int i = 0; i < N_ROWS; i++) {
        const sf_validate_row *a = &j->rows[0][i], *b = &j->rows[1][i];
        assert_true(a->meas_s == b->meas_s && a->meas_min_s == b->meas_min_s);
        assert_memory_equal(a->meas, b->meas, sizeof a->meas);
        assert_int_equal(a->meas_crit, b->meas_crit);
    }
    free(j);
    sf_strategy_free(s0);
    sf_strategy_free(s1);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* A measurement without a prediction is refused before any step. */
static sf_status unpredicted_rank(sf_comm *c, void *arg) {
    const sf_graph *g = ((void **)arg)[0];
    const sf_strategy *s = ((void **)arg)[1];
    sf_validate_options o;
    sf_validate_options_default(&o);
    sf_validate_row row;
    memset(&row, 0, sizeof row);
    row.name = "data";
    row.strategy = s;
    row.crit = 7;
    sf_error err = {0};
    sf_status st = sf_validate_measure(c, g, &row, 1, &o, &err);
    return st == SF_ERR_INVALID && strstr(err.msg, "predict first") ? SF_OK : SF_ERR_INTERNAL;
}

static void test_measure_needs_prediction(void **state) {
    (void)state;
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 4;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("cpu[2]", &err);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    void *arg[2] = {g, s};
    assert_int_equal(sf_comm_local_run(2, unpredicted_rank, arg, &err), SF_OK);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_predict_measure),
        cmocka_unit_test(test_measure_needs_prediction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
