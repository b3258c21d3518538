/* Benchmarks of the planning library (soapflow/bench.h): they run, their
 * figures are in range, and they refuse what they cannot time. Never their
 * speed: tests check behaviour, not wall time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/bench.h"
#include "soapflow/io.h"
#include "soapflow/models.h"

static void test_bench_sim(void **state) {
    (void)state;
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("p100-4x4[4]", &err);
    assert_non_null(g);
    assert_non_null(m);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_bench_sim_result r;
    assert_int_equal(sf_bench_sim(g, m, cm, &so, s, 2, 50, 7, &r, &err), SF_OK);
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    sf_sim_result sr;
    assert_int_equal(sf_sim_run(sim, s, &sr, &err), SF_OK);
    assert_int_equal(r.tasks, sr.tasks);
    assert_true(r.full_us > 0 && r.delta_us > 0 && r.delta_revert_us >= r.delta_us);
    assert_true(r.full_moved_us > 0 && r.bounded_us > 0 && r.delta_tasks > 0);
    double frac[] = {r.cut_frac, r.resched_frac, r.changed_frac, r.uneven_frac};
    for (int i = 0; i < 4; i++) assert_true(frac[i] >= 0 && frac[i] <= 1);
    /* no moves: the full simulation alone */
    assert_int_equal(sf_bench_sim(g, m, cm, &so, s, 1, 0, 7, &r, &err), SF_OK);
    assert_true(r.full_us > 0 && r.delta_us == 0 && r.delta_tasks == 0);
    assert_int_equal(sf_bench_sim(g, m, cm, &so, s, 0, 0, 7, &r, &err), SF_ERR_INVALID);

    sf_bench_machine_sim_result ms;
    sf_error_clear(&err);
    assert_int_equal(sf_bench_machine_sim(g, m, s, 2, 10, 7, &ms, &err), SF_OK);
    assert_int_equal(ms.tasks, sr.tasks);
    assert_true(ms.sim_new_s > 0 && ms.full_s > 0 && ms.delta_s > 0);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

static void test_bench_machine(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("dgx-a100", &d, &err), SF_OK);
    sf_machine *m = NULL;
    double build_s = 0, route_s = -1;
    assert_int_equal(sf_bench_machine_build(&d, 2, &m, &build_s, &err), SF_OK);
    assert_non_null(m);
    assert_int_equal(sf_machine_num_devices(m), 64);
    assert_true(build_s > 0);
    assert_int_equal(sf_bench_machine_routes(m, 1000, 3, &route_s, &err), SF_OK);
    assert_true(route_s > 0);
    assert_int_equal(sf_bench_machine_routes(m, 0, 3, &route_s, &err), SF_OK);
    assert_true(route_s == 0);
    sf_machine_free(m);
    /* a description that does not build: no machine, its error */
    d.nodes = 0;
    assert_int_not_equal(sf_bench_machine_build(&d, 1, &m, &build_s, &err), SF_OK);
    assert_null(m);
    sf_error_clear(&err);
    assert_int_equal(sf_bench_machine_build(&d, 0, &m, &build_s, &err), SF_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_sim),
        cmocka_unit_test(test_bench_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
