/* The whole search (sf_search_run): every row judged by the simulator, the best
 * row really the best that fits, and the strategy it returns simulating to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "soapflow/models.h"
#include "soapflow/search.h"

static void check_model(const char *model, int64_t batch, const char *machine, int algo_mask) {
    sf_error err = {0};
    sf_machine *whole = sf_machine_preset(machine, &err);
    sf_machine *m = sf_machine_subset(whole, 4, &err);
    assert_non_null(m);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = batch;
    mo.seq_len = 8;
    sf_graph *g = sf_model_build(model, &mo, &err);
    assert_non_null(g);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_search_options so;
    sf_search_options_default(&so);
    so.run_optcnn = algo_mask & 1;
    so.run_mcmc = (algo_mask >> 1) & 1;
    so.mcmc.iters = 300;
    so.mcmc.budget_s = 0;
    so.mcmc.seed = 5;
    sf_strategy *best = sf_strategy_new(g);
    sf_search_report rep;
    assert_int_equal(sf_search_run(g, m, cm, &so, best, &rep, &err), SF_OK);
    for (int i = SF_SEARCH_DATA; i <= SF_SEARCH_EXPERT; i++) assert_true(rep.rows[i].present);
    assert_int_equal(rep.rows[SF_SEARCH_OPTCNN].present, so.run_optcnn);
    assert_int_equal(rep.rows[SF_SEARCH_MCMC].present, so.run_mcmc);
    const sf_search_row *b = &rep.rows[rep.best];
    assert_true(b->present);
    for (int i = 0; i < SF_SEARCH_ROWS; i++) {
        const sf_search_row *r = &rep.rows[i];
        if (!r->present) continue;
        if (r->fits && b->fits) assert_true(b->iter_s <= r->iter_s);
        if (r->fits) assert_true(b->fits);
    }
    /* the strategy returned is the best row's */
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim_result res;
    assert_int_equal(sf_sim_run(sim, best, &res, &err), SF_OK);
    assert_true(res.iter_s == b->iter_s);
    sf_sim_free(sim);
    sf_strategy_free(best);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(whole);
}

static void test_search_rows(void **state) {
    (void)state;
    check_model("lenet5", 64, "p100-4x4", 3);
    check_model("alexnet", 32, "k80-16x4", 1);
    check_model("rnnlm", 32, "p100-4x4", 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_search_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
