/* What limits an iteration besides compute and communication (issue 30,
 * item 4; docs/cost-model.md, "What limits scaling"): a device's per-iteration
 * host overhead, added once to the makespan, and its input pipeline's rate,
 * which overlaps the previous iteration so that an iteration takes the longer
 * of the two. Both 0 leave every result as it was; delta simulation, bounded
 * or not, gives exactly the full result with them; machine files carry them
 * and refuse bad ones in one line naming the field. */
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
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static sf_machine *machine_with(const char *preset, double host_s, double rate) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc(preset, &d, &err), SF_OK);
    d.nodes = 1;
    d.kind.host_overhead_s = host_s;
    d.kind.input_samples_per_s = rate;
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static sf_graph *model(const char *name, int64_t batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    if (strcmp(name, "mlp") == 0) {
        o.n_mlp = 4;
        o.mlp_sizes[0] = 256, o.mlp_sizes[1] = 512, o.mlp_sizes[2] = 512, o.mlp_sizes[3] = 10;
    }
    sf_error err = {0};
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

/* One simulation of a baseline. */
static sf_sim_result simulate(const sf_graph *g, const sf_machine *m, const char *baseline) {
    sf_error err = {0};
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    sf_cost_model *cm = sf_cost_analytic_new(m, &p);
    assert_non_null(cm);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, baseline, g, m, &err), SF_OK);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    sf_sim_free(sim);
    sf_strategy_free(s);
    sf_cost_free(cm);
    return r;
}

/* Host overhead: exactly added once, whatever the strategy; without either
 * figure the iteration is the makespan. */
static void test_host_overhead(void **state) {
    (void)state;
    sf_graph *g = model("mlp", 256);
    sf_machine *m0 = machine_with("dgx-1v", 0, 0), *m1 = machine_with("dgx-1v", 3e-3, 0);
    const char *baselines[] = {"data", "model", "single"};
    for (int b = 0; b < 3; b++) {
        sf_sim_result r0 = simulate(g, m0, baselines[b]), r1 = simulate(g, m1, baselines[b]);
        assert_true(r0.iter_s == r0.makespan_s);
        assert_true(r0.host_s == 0 && r0.input_s == 0);
        assert_true(r1.makespan_s == r0.makespan_s);
        assert_true(r1.host_s == 3e-3);
        assert_true(r1.iter_s == r0.iter_s + 3e-3);
        assert_true(r1.compute_s == r0.compute_s); /* no task changed */
    }
    sf_machine_free(m0);
    sf_machine_free(m1);
    sf_graph_free(g);
}

/* Input pipeline: each device's samples over the rate, hidden under a longer
 * iteration, the iteration's time where it is longer. Data parallelism on 8
 * devices loads 256 / 8 samples a device; all on one device loads 256. */
static void test_input_pipeline(void **state) {
    (void)state;
    sf_graph *g = model("mlp", 256);
    sf_machine *m0 = machine_with("dgx-1v", 0, 0);
    sf_sim_result d0 = simulate(g, m0, "data"), s0 = simulate(g, m0, "single");
    /* a rate that hides: 32 samples take a tenth of the iteration */
    double fast = 32 / (0.1 * d0.makespan_s);
    sf_machine *mf = machine_with("dgx-1v", 0, fast);
    sf_sim_result df = simulate(g, mf, "data");
    assert_true(df.iter_s == d0.iter_s);
    assert_true(fabs(df.input_s - 0.1 * d0.makespan_s) <= 1e-12 * d0.makespan_s);
    /* a slow one: the input pipeline is the iteration */
    double slow = 32 / (10 * d0.makespan_s);
    sf_machine *ms = machine_with("dgx-1v", 1e-3, slow);
    sf_sim_result ds = simulate(g, ms, "data"), ss = simulate(g, ms, "single");
    assert_true(ds.makespan_s == d0.makespan_s);
    assert_true(ds.iter_s == ds.input_s);
    assert_true(fabs(ds.iter_s - 32 / slow) <= 1e-12 * ds.iter_s);
    /* one device loads the whole batch: 8 times longer */
    assert_true(fabs(ss.input_s - 256 / slow) <= 1e-12 * ss.input_s);
    assert_true(ss.iter_s ==
                (ss.input_s > s0.makespan_s + 1e-3 ? ss.input_s : s0.makespan_s + 1e-3));
    sf_machine_free(m0);
    sf_machine_free(mf);
    sf_machine_free(ms);
    sf_graph_free(g);
}

/* Delta simulation, bounded or not, against full simulation with both
 * figures set: random moves on lenet5 over 4 devices; a bound just below the
 * true time cuts (and says a time above the bound) unless the input pipeline
 * alone passes it (then the whole result comes), one just above never cuts. */
static void test_delta_matches_full(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = model("lenet5", 64);
    sf_machine *full = machine_with("dgx-1v", 0, 0);
    sf_machine *m = sf_machine_subset(full, 4, &err);
    assert_non_null(m);
    sf_machine_free(full);
    sf_machine_desc d = *sf_machine_get_desc(m);
    sf_machine_free(m);
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    for (int variant = 0; variant < 2; variant++) {
        d.kind.host_overhead_s = 40e-6;
        d.kind.input_samples_per_s = variant ? 2e5 : 6e6; /* input-bound at times, or never */
        m = sf_machine_build(&d, &err);
        assert_non_null(m);
        sf_cost_model *cm = sf_cost_analytic_new(m, &p);
        sf_strategy *s = sf_strategy_new(g);
        assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
        sf_sim *delta = sf_sim_new(g, m, cm, NULL, &err), *ref = sf_sim_new(g, m, cm, NULL, &err);
        assert_non_null(delta);
        assert_non_null(ref);
        sf_sim_result r, rf;
        assert_int_equal(sf_sim_run(delta, s, &r, &err), SF_OK);
        sf_rng rng;
        sf_rng_seed(&rng, 11 + (uint64_t)variant);
        int cuts = 0, input_bound = 0;
        for (int move = 0; move < 300; move++) {
            int op = (int)sf_rng_below(&rng, (uint64_t)sf_graph_num_ops(g));
            sf_config c;
            sf_config_random(sf_graph_op(g, op), m, &rng, &c);
            sf_strategy *t = sf_strategy_clone(s);
            sf_config_copy(sf_strategy_config(t, op), &c);
            if (sf_strategy_validate(t, g, m, NULL) != SF_OK) {
                sf_strategy_free(t);
                continue;
            }
            assert_int_equal(sf_sim_run(ref, t, &rf, &err), SF_OK);
            input_bound += rf.iter_s == rf.input_s && rf.input_s > rf.makespan_s + rf.host_s;
            double bound = move % 3 == 0 ? rf.iter_s * 0.999 : rf.iter_s * 1.001;
            if (move % 3 == 2) bound = INFINITY;
            assert_int_equal(sf_sim_update_ops(delta, 1, &op, &c, bound, &r, &err), SF_OK);
            if (r.cut_off) {
                cuts++;
                assert_true(bound < rf.iter_s);
                assert_true(r.iter_s > bound);
                assert_int_equal(sf_sim_revert(delta, &r, &err), SF_OK);
            } else { /* an input-bound time above the bound may come whole */
                if (bound < rf.iter_s) assert_true(rf.input_s > bound);
                if (fabs(r.iter_s - rf.iter_s) > 1e-12 * rf.iter_s)
                    fail_msg("move %d: delta %.12g, full %.12g", move, r.iter_s, rf.iter_s);
                assert_true(r.host_s == rf.host_s && r.input_s == rf.input_s);
                sf_strategy_copy(s, t);
            }
            sf_strategy_free(t);
        }
        assert_true(cuts > 10);
        if (variant) assert_true(input_bound > 0);
        sf_sim_free(delta);
        sf_sim_free(ref);
        sf_strategy_free(s);
        sf_cost_free(cm);
        sf_machine_free(m);
    }
    sf_graph_free(g);
}

/* Machine files: written only when set, read back, refused when bad. */
static void test_machine_file(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine_desc d, back;
    assert_int_equal(sf_machine_preset_desc("dgx-1v", &d, &err), SF_OK);
    char *text = sf_machine_desc_to_json(&d, &err);
    assert_non_null(text);
    assert_null(strstr(text, "host_overhead_us"));
    assert_null(strstr(text, "input_samples_per_s"));
    free(text);
    d.kind.host_overhead_s = 1.5e-3;
    d.kind.input_samples_per_s = 2500;
    text = sf_machine_desc_to_json(&d, &err);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"host_overhead_us\": 1500"));
    assert_non_null(strstr(text, "\"input_samples_per_s\": 2500"));
    assert_int_equal(sf_machine_desc_parse_json(text, "m.json", &back, &err), SF_OK);
    assert_true(back.kind.host_overhead_s == 1.5e-3);
    assert_true(back.kind.input_samples_per_s == 2500);
    free(text);

    static const char *const bad[][2] = {
        {"\"input_samples_per_s\": -3, \"name\"", "device.input_samples_per_s"},
        {"\"input_samples_per_s\": \"fast\", \"name\"", "device.input_samples_per_s"},
        {"\"cost\": {\"host_overhead_us\": -1}, \"name\"", "device.cost.host_overhead_us"},
        {"\"cost\": {\"host_overhead_us\": 5e7}, \"name\"", "device.cost.host_overhead_us"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf,
                 "{\"name\": \"x\", \"nodes\": 1, \"devices_per_node\": 2, \"device\": {%s: "
                 "\"g\", \"peak_tflops\": {\"fp32\": 10}, \"mem_bw_GBps\": 900, \"mem_GB\": 16}, "
                 "\"intra\": {\"topology\": \"pairwise\", \"bandwidth_GBps\": 25, "
                 "\"latency_us\": 2}, \"inter\": {\"nics_per_node\": 1, \"bandwidth_GBps\": 12, "
                 "\"latency_us\": 2}}",
                 bad[i][0]);
        sf_error_clear(&err);
        assert_int_not_equal(sf_machine_desc_parse_json(buf, "bad.json", &back, &err), SF_OK);
        if (!strstr(err.msg, bad[i][1]) || !strstr(err.msg, "bad.json"))
            fail_msg("case %zu: %s", i, err.msg);
    }
    /* and the description itself */
    d.kind.host_overhead_s = -1;
    sf_error_clear(&err);
    assert_int_equal(sf_machine_desc_validate(&d, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "host_overhead"));
    d.kind.host_overhead_s = 0;
    d.kind.input_samples_per_s = NAN;
    sf_error_clear(&err);
    assert_int_equal(sf_machine_desc_validate(&d, &err), SF_ERR_INVALID);
    assert_non_null(strstr(err.msg, "input_samples_per_s"));
}

/* The presets without a cited or fitted figure keep none, so their times are
 * what they were. */
static void test_presets_default(void **state) {
    (void)state;
    const char *names[] = {"p100-4x4", "k80-16x4", "dgx-h100", "cpu"};
    for (int i = 0; i < 4; i++) {
        sf_error err = {0};
        sf_machine_desc d;
        assert_int_equal(sf_machine_preset_desc(names[i], &d, &err), SF_OK);
        assert_true(d.kind.host_overhead_s == 0);
        assert_true(d.kind.input_samples_per_s == 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_overhead),      cmocka_unit_test(test_input_pipeline),
        cmocka_unit_test(test_delta_matches_full), cmocka_unit_test(test_machine_file),
        cmocka_unit_test(test_presets_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
