/*
 * test_devices.c - every device of a large machine usable (issue 25, item 2):
 * an operator split into as many parts as the machine has devices, baselines
 * that use every device, the idle-device count, configs of more than 64 parts
 * through the strategy JSON, the simulator (full against delta) and the
 * searches' proposals, and the copy that moves only the parts in use.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

/* dgx-h100 with `nodes` nodes of 8: 256 devices for 32. */
static sf_machine *h100(int nodes) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("dgx-h100", &d, &err), SF_OK);
    d.nodes = nodes;
    snprintf(d.name, sizeof d.name, "dgx-h100-%d", nodes * d.devices_per_node);
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) fprintf(stderr, "h100: %s\n", err.msg);
    assert_non_null(m);
    return m;
}

static sf_graph *zoo(const char *name, int64_t batch) {
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fprintf(stderr, "zoo: %s\n", err.msg);
    assert_non_null(g);
    return g;
}

static int sample_dim(const sf_op *op) {
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == SF_DIM_SAMPLE) return i;
    return -1;
}

/* Data parallelism on 256 devices: every operator with a sample dimension in
 * 256 parts, part i on device i, no device idle; with a batch of 64 the
 * operators have 64 parts and 192 devices are idle, listed in order. */
static void test_data_uses_every_device(void **state) {
    (void)state;
    sf_machine *m = h100(32);
    assert_int_equal(sf_machine_num_devices(m), 256);
    sf_error err = {0};
    const char *models[] = {"transformer", "mlp", "alexnet"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        sf_graph *g = zoo(models[k], 256);
        sf_strategy *s = sf_strategy_new(g);
        assert_int_equal(sf_strategy_baseline(s, "data", g, m, &err), SF_OK);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        int split = 0;
        for (int i = 0; i < sf_graph_num_ops(g); i++) {
            const sf_op *op = sf_graph_op(g, i);
            const sf_config *c = sf_strategy_get(s, i);
            if (sample_dim(op) < 0 || op->space.d[sample_dim(op)] < 256) continue;
            assert_int_equal(c->n_parts, 256);
            for (int p = 0; p < c->n_parts; p++) assert_int_equal(c->device[p], p);
            split++;
        }
        assert_true(split > 0);
        assert_int_equal(sf_strategy_idle_devices(s, 256, NULL), 0);
        sf_strategy_free(s);
        sf_graph_free(g);
    }

    sf_graph *g = zoo("mlp", 64);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int idle[256];
    assert_int_equal(sf_strategy_idle_devices(s, 256, idle), 192);
    for (int i = 0; i < 192; i++) assert_int_equal(idle[i], 64 + i);
    assert_int_equal(sf_strategy_single(s, g, 5), SF_OK);
    assert_int_equal(sf_strategy_idle_devices(s, 256, idle), 255);
    assert_int_equal(idle[4], 4);
    assert_int_equal(idle[5], 6);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* The other baselines on 256 devices: model and owt split the linear layers'
 * parameter dimension as far as it goes (the transformer's are wider than
 * 256), so they use every device too. */
static void test_baselines_256(void **state) {
    (void)state;
    sf_machine *m = h100(32);
    sf_graph *g = zoo("transformer", 256);
    sf_error err = {0};
    const char *names[] = {"model", "owt", "expert"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        sf_strategy *s = sf_strategy_new(g);
        assert_int_equal(sf_strategy_baseline(s, names[k], g, m, &err), SF_OK);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        int most = 0;
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            if (sf_strategy_get(s, i)->n_parts > most) most = sf_strategy_get(s, i)->n_parts;
        assert_int_equal(most, 256);
        assert_int_equal(sf_strategy_idle_devices(s, 256, NULL), 0);
        sf_strategy_free(s);
    }
    sf_graph_free(g);
    sf_machine_free(m);
}

/* sf_config_copy moves the parts in use and no more; the limits are
 * SF_MAX_DEVICES parts. */
static void test_config_copy_and_limits(void **state) {
    (void)state;
    static sf_config a, b; /* 8 KB each: off the stack of the test runner */
    memset(&a, 0, sizeof a);
    assert_int_equal(sf_config_set_degrees(&a, 2, (int[]){64, 64}), SF_OK);
    assert_int_equal(a.n_parts, SF_MAX_DEVICES);
    assert_int_equal(sf_config_set_degrees(&a, 2, (int[]){65, 64}), SF_ERR_RANGE);
    assert_int_equal(sf_config_set_degrees(&a, 2, (int[]){100, 3}), SF_OK);
    for (int p = 0; p < SF_MAX_PARTS; p++) a.device[p] = (int16_t)(p % 4000);
    memset(&b, 0xff, sizeof b);
    sf_config_copy(&b, &a);
    assert_true(sf_config_equal(&a, &b));
    assert_int_equal(b.device[299], 299);
    assert_int_equal(b.device[300], -1); /* beyond n_parts: not copied */
    sf_config_copy(&b, &b);
    assert_true(sf_config_equal(&a, &b));
}

static void assert_same_result(const sf_sim_result *a, const sf_sim_result *b) {
    assert_true(a->iter_s == b->iter_s);
    assert_true(a->compute_s == b->compute_s);
    assert_true(a->sync_s == b->sync_s);
    assert_true(a->transfer_s == b->transfer_s);
    assert_int_equal(a->sync_bytes, b->sync_bytes);
    assert_int_equal(a->transfer_bytes, b->transfer_bytes);
    assert_int_equal(a->tasks, b->tasks);
    assert_true(a->peak_mem_bytes == b->peak_mem_bytes);
    assert_int_equal(a->n_devices, b->n_devices);
}

/* A config of 256 parts (and one of 200 on scattered devices) through the
 * strategy JSON and back, then simulated: full against delta, exactly, and
 * the data-parallel run keeps every device busy. */
static void test_many_parts_json_and_sim(void **state) {
    (void)state;
    sf_machine *m = h100(32);
    sf_graph *g = zoo("mlp", 512);
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int fc = -1;
    for (int i = 0; i < sf_graph_num_ops(g) && fc < 0; i++)
        if (sf_graph_op(g, i)->type == SF_OP_LINEAR) fc = i;
    assert_true(fc >= 0);
    const sf_op *op = sf_graph_op(g, fc);
    assert_int_equal(sf_strategy_get(s, fc)->n_parts, 256);
    /* the first linear layer: 2 x 100 parts, devices 255, 254, ... */
    static sf_config c;
    memset(&c, 0, sizeof c);
    int deg[SF_MAX_DIMS];
    for (int i = 0; i < op->space.ndim; i++) deg[i] = 1;
    deg[0] = 2;
    for (int i = 1; i < op->space.ndim; i++)
        if (op->kinds[i] == SF_DIM_PARAMETER) deg[i] = 100;
    assert_int_equal(sf_config_set_degrees(&c, op->space.ndim, deg), SF_OK);
    assert_int_equal(c.n_parts, 200);
    for (int p = 0; p < c.n_parts; p++) c.device[p] = (int16_t)(255 - p);
    assert_int_equal(sf_config_validate(op, m, &c, &err), SF_OK);

    sf_strategy *t = sf_strategy_clone(s);
    sf_config_copy(sf_strategy_config(t, fc), &c);
    char *text = sf_strategy_to_json_for(t, g, m, &err);
    assert_non_null(text);
    sf_strategy *u = sf_strategy_new(g);
    if (sf_strategy_parse_json(u, text, "many.json", g, m, &err) != SF_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(err.code, SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(t, i), sf_strategy_get(u, i)));
    free(text);

    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim *full = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim *delta = sf_sim_new(g, m, cm, NULL, &err);
    assert_non_null(full);
    assert_non_null(delta);
    sf_sim_result rf, rd;
    assert_int_equal(sf_sim_run(delta, s, &rd, &err), SF_OK);
    for (int d = 0; d < 256; d++) assert_true(rd.device_busy_s[d] > 0);
    assert_int_equal(sf_sim_update(delta, fc, &c, &rd, &err), SF_OK);
    assert_int_equal(sf_sim_run(full, u, &rf, &err), SF_OK);
    assert_same_result(&rf, &rd);
    /* and back to data parallelism by a revert, then by an update */
    assert_int_equal(sf_sim_revert(delta, &rd, &err), SF_OK);
    assert_int_equal(sf_sim_run(full, s, &rf, &err), SF_OK);
    assert_same_result(&rf, &rd);
    assert_int_equal(sf_sim_update(delta, fc, &c, &rd, &err), SF_OK);
    assert_int_equal(sf_sim_update(delta, fc, sf_strategy_get(s, fc), &rd, &err), SF_OK);
    assert_same_result(&rf, &rd);

    sf_sim_free(full);
    sf_sim_free(delta);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_strategy_free(t);
    sf_strategy_free(u);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Random configs on 256 devices reach more than 64 parts, stay valid, and
 * each simulated by delta equals a full simulation. */
static void test_random_many_parts(void **state) {
    (void)state;
    sf_machine *m = h100(32);
    sf_graph *g = zoo("mlp", 512);
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim *full = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim *delta = sf_sim_new(g, m, cm, NULL, &err);
    sf_sim_result rf, rd;
    assert_int_equal(sf_sim_run(delta, s, &rd, &err), SF_OK);
    sf_rng rng;
    sf_rng_seed(&rng, 25);
    int big = 0;
    static sf_config c;
    for (int it = 0; it < 60; it++) {
        int op = (int)sf_rng_below(&rng, (uint64_t)sf_graph_num_ops(g));
        sf_config_random(sf_graph_op(g, op), m, &rng, &c);
        assert_int_equal(sf_config_validate(sf_graph_op(g, op), m, &c, &err), SF_OK);
        big += c.n_parts > 64;
        assert_int_equal(sf_sim_update(delta, op, &c, &rd, &err), SF_OK);
        sf_config_copy(sf_strategy_config(s, op), &c);
        assert_int_equal(sf_sim_run(full, s, &rf, &err), SF_OK);
        assert_same_result(&rf, &rd);
    }
    assert_true(big > 0);
    sf_sim_free(full);
    sf_sim_free(delta);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_uses_every_device),
        cmocka_unit_test(test_baselines_256),
        cmocka_unit_test(test_config_copy_and_limits),
        cmocka_unit_test(test_many_parts_json_and_sim),
        cmocka_unit_test(test_random_many_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
