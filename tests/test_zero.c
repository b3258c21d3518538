/*
 * test_zero.c - sharded data parallelism (ZeRO stages 1-3, FSDP): the task
 * graph's lowering of each stage into steps (chunks that tile the shard, the
 * phases of stage 3's gathers), the strategy file's optional fields, the
 * baselines fsdp / zeroN and their options, the simulator's memory per stage
 * (all at once and over the timeline) and delta simulation equal to full with
 * random stages and configs.
 */
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
#include "soapflow/taskgraph.h"

static sf_graph *small_gpt(void) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 16;
    o.layers = 2;
    o.hidden = 64;
    o.heads = 4;
    o.seq_len = 16;
    o.vocab = 96;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

static sf_machine *machine(const char *name) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(name, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static int first_weighted(const sf_graph *g, const char *type_name) {
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->n_params > 0 && op->weight_owner < 0 &&
            strcmp(sf_op_type_name(op->type), type_name) == 0)
            return i;
    }
    fail_msg("no %s with weights", type_name);
    return -1;
}

/* Each stage's steps for a linear layer's shard under data parallelism on 16
 * devices: the kinds and phases in order, the updates' chunks tiling it. */
static void test_lowering(void **state) {
    (void)state;
    sf_graph *g = small_gpt();
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, 16, &err);
    assert_non_null(tg);
    sf_strategy *s = sf_strategy_new(g);
    sf_machine *m = machine("p100-4x4");
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    int fc = first_weighted(g, "linear");
    for (int stage = 0; stage < SF_ZERO_STAGE_COUNT; stage++) {
        sf_strategy_config(s, fc)->zero = (uint8_t)stage;
        sf_taskgraph_set_strategy(tg, s);
        for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
        sf_tg_sync sy;
        sf_tg_steps ss;
        assert_int_equal(sf_taskgraph_sync_steps(tg, fc, &sy, &ss), SF_OK);
        assert_int_equal(sy.n_shards, 1);
        int64_t n = sy.shards[0].numel, covered = 0, next_off = 0;
        int rs = 0, ag[SF_PHASE_COUNT] = {0}, upd = 0;
        for (int q = 0; q < ss.n_steps; q++) {
            const sf_tg_step *st = &ss.steps[q];
            if (st->kind == SF_STEP_REDUCE_SCATTER) rs++;
            if (st->kind == SF_STEP_ALL_GATHER) {
                assert_true(stage == 0 || st->payload == SF_PAYLOAD_WEIGHTS);
                ag[st->phase]++;
            }
            if (st->kind == SF_STEP_UPDATE) {
                upd++;
                covered += st->numel;
                if (stage) {
                    assert_true(st->offset == next_off); /* chunks in ring order */
                    next_off += st->numel;
                } else {
                    assert_true(st->numel == n && st->offset == 0);
                }
            }
            /* dependencies point backwards */
            for (int d = 0; d < st->n_deps; d++) assert_true(ss.deps[st->dep + d] < q);
        }
        assert_int_equal(rs, 1);
        assert_int_equal(upd, 16);
        assert_true(covered == (stage ? n : 16 * n));
        assert_int_equal(ag[SF_PHASE_SYNC], stage < SF_ZERO_WEIGHTS ? 1 : 0);
        assert_int_equal(ag[SF_PHASE_FORWARD], stage == SF_ZERO_WEIGHTS);
        assert_int_equal(ag[SF_PHASE_BACKWARD], stage == SF_ZERO_WEIGHTS);
    }
    sf_strategy_free(s);
    sf_taskgraph_free(tg);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* The fields are written only when set, read back alike, and refused when bad. */
static void test_strategy_file(void **state) {
    (void)state;
    sf_graph *g = small_gpt();
    sf_machine *m = machine("p100-4x4");
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g), *t = sf_strategy_new(g);
    assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
    char *plain = sf_strategy_to_json(s, g, &err);
    assert_non_null(plain);
    assert_null(strstr(plain, "zero"));
    assert_null(strstr(plain, "recompute"));
    int fc = first_weighted(g, "linear");
    sf_strategy_config(s, fc)->zero = 2;
    sf_strategy_config(s, fc + 1)->recompute = 1;
    char *text = sf_strategy_to_json(s, g, &err);
    assert_non_null(strstr(text, "\"zero\": 2"));
    assert_non_null(strstr(text, "\"recompute\": true"));
    assert_int_equal(sf_strategy_parse_json(t, text, "x.json", g, m, &err), SF_OK);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        assert_true(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(t, i)));
    /* a stage out of range, on an operator without weights, a bad flag */
    const char *name = sf_graph_op(g, fc)->name;
    char *bad = malloc(strlen(text) + 64);
    const char *at = strstr(text, "\"zero\": 2");
    memcpy(bad, text, (size_t)(at - text));
    strcpy(bad + (at - text), "\"zero\": 7");
    strcat(bad, at + strlen("\"zero\": 2"));
    err = (sf_error){0};
    assert_int_equal(sf_strategy_parse_json(t, bad, "x.json", g, m, &err), SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "x.json"));
    assert_non_null(strstr(err.msg, name));
    free(bad);
    sf_strategy_config(s, fc)->zero = 0;
    int relu = -1;
    for (int i = 0; i < sf_graph_num_ops(g) && relu < 0; i++)
        if (sf_graph_op(g, i)->n_params == 0 && sf_graph_op(g, i)->type != SF_OP_INPUT) relu = i;
    sf_strategy_config(s, relu)->zero = 1;
    err = (sf_error){0};
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_ERR_INVALID);
    if (!strstr(err.msg, "no weights")) fail_msg("%s", err.msg);
    free(text);
    free(plain);
    sf_strategy_free(s);
    sf_strategy_free(t);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* fsdp, zeroN and the options: every weight group's owner gets the stage,
 * recomputation flags where asked, refusals in one line. */
static void test_baselines(void **state) {
    (void)state;
    sf_graph *g = small_gpt();
    sf_machine *m = machine("p100-4x4");
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    static const struct {
        const char *name;
        int zero, rc;
    } cases[] = {{"fsdp", 3, 0},
                 {"zero1", 1, 0},
                 {"zero2:recompute=selective", 2, 1},
                 {"data:zero=3,recompute=full", 3, 2},
                 {"megatron:tp=4,zero=1", 1, 0},
                 {"megatron:4", 0, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        assert_true(sf_strategy_is_baseline_name(cases[k].name));
        assert_int_equal(sf_strategy_baseline(s, cases[k].name, g, m, &err), SF_OK);
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        int rc = 0, att_rc = 0;
        for (int i = 0; i < sf_graph_num_ops(g); i++) {
            const sf_op *op = sf_graph_op(g, i);
            const sf_config *c = sf_strategy_get(s, i);
            if (op->n_params > 0 && op->weight_owner < 0) assert_int_equal(c->zero, cases[k].zero);
            rc += c->recompute;
            att_rc += c->recompute && op->type == SF_OP_ATTENTION;
        }
        if (cases[k].rc == 0) assert_int_equal(rc, 0);
        if (cases[k].rc == 1) assert_true(rc == att_rc && rc > 0);
        if (cases[k].rc == 2) assert_true(rc > att_rc);
    }
    static const char *const bad[] = {"fsdp:zero=4", "data:recompute=most", "zero1:tp=2",
                                      "data:bogus"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err = (sf_error){0};
        assert_int_equal(sf_strategy_baseline(s, bad[k], g, m, &err), SF_ERR_INVALID);
        if (!strstr(err.msg, bad[k])) fail_msg("%s", err.msg);
        assert_null(strchr(err.msg, '\n'));
    }
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

static sf_sim_result run(sf_sim *sim, const sf_strategy *s) {
    sf_error err = {0};
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) fail_msg("%s", err.msg);
    return r;
}

/* Memory per stage with Adam under bf16 on 16 devices (the batch's): the weights' share of
 * the all-at-once sum falls with each stage (ZeRO's 2 + 2 + 12 bytes per
 * parameter: 16, then 4 + 12/N, 2 + 14/N, 16/N). */
static void test_memory(void **state) {
    (void)state;
    sf_graph *g = small_gpt();
    sf_machine *m = machine("dgx-a100");
    sf_error err = {0};
    sf_analytic_params co;
    sf_analytic_params_default(&co);
    co.dtype = SF_DTYPE_BF16;
    co.optimizer = SF_OPTIMIZER_ADAM;
    sf_cost_model *cm = sf_cost_analytic_new(m, &co);
    assert_non_null(cm);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    if (!sim) fail_msg("%s", err.msg);
    sf_strategy *s = sf_strategy_new(g);
    double w[SF_ZERO_STAGE_COUNT];
    int64_t params = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        if (sf_graph_op(g, i)->weight_owner < 0) params += sf_graph_op(g, i)->n_params;
    for (int stage = 0; stage < SF_ZERO_STAGE_COUNT; stage++) {
        char name[16];
        snprintf(name, sizeof name, "data:zero=%d", stage);
        assert_int_equal(sf_strategy_baseline(s, name, g, m, &err), SF_OK);
        sf_sim_result r = run(sim, s);
        w[stage] = r.device_live_kinds[SF_SIM_MEM_WEIGHTS];
        double expect[] = {16.0, 4 + 12.0 / 16, 2 + 14.0 / 16, 16.0 / 16};
        /* device 0 holds every shard; chunks differ from n/16 by under one element */
        double per = w[stage] / (double)params;
        assert_true(per > expect[stage] * 0.97 && per < expect[stage] * 1.03 + 0.01);
    }
    for (int stage = 1; stage < SF_ZERO_STAGE_COUNT; stage++) assert_true(w[stage] < w[stage - 1]);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* Random moves, each a random config with a random stage on a weighted
 * owner: delta simulation equals a full one in time and in the timeline's
 * peaks, bit for bit. */
static void test_delta_equals_full(void **state) {
    (void)state;
    sf_graph *g = small_gpt();
    sf_machine *m = machine("p100-4x4");
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.memory_timeline = 1;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err), *full = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    assert_non_null(full);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, "fsdp", g, m, &err), SF_OK);
    sf_sim_result r = run(sim, s);
    sf_rng rng;
    sf_rng_seed(&rng, 26);
    int n_ops = sf_graph_num_ops(g), staged = 0;
    for (int it = 0; it < 300; it++) {
        int op = 1 + (int)sf_rng_below(&rng, (uint64_t)(n_ops - 1));
        const sf_op *o = sf_graph_op(g, op);
        sf_config c;
        if (sf_rng_below(&rng, 3) == 0) {
            sf_config_copy(&c, sf_strategy_get(s, op)); /* the stage alone */
        } else {
            sf_config_random(o, m, &rng, &c);
        }
        if (o->n_params > 0 && o->weight_owner < 0 && !sf_graph_op_tied(g, op))
            c.zero = (uint8_t)sf_rng_below(&rng, SF_ZERO_STAGE_COUNT);
        if (sf_config_validate(o, m, &c, NULL) != SF_OK) continue;
        sf_status st = sf_sim_update(sim, op, &c, &r, &err);
        if (st == SF_ERR_INVALID) continue; /* a tie split two ways */
        assert_int_equal(st, SF_OK);
        sf_config_copy(sf_strategy_config(s, op), &c);
        staged += c.zero == SF_ZERO_WEIGHTS;
        sf_sim_result f = run(full, s);
        assert_true(r.iter_s == f.iter_s);
        assert_true(r.live_peak_bytes == f.live_peak_bytes);
        assert_true(r.peak_mem_bytes == f.peak_mem_bytes);
    }
    assert_true(staged > 20);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_sim_free(full);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowering),       cmocka_unit_test(test_strategy_file),
        cmocka_unit_test(test_baselines),      cmocka_unit_test(test_memory),
        cmocka_unit_test(test_delta_equals_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
