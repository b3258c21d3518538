/*
 * fuzz_strategy_json.c - the strategy JSON reader (sf_strategy_parse_json,
 * io.h) on any text, against two models and machines built once: lenet5 at
 * batch 8 on p100-4x4 (16 devices, NVLink pairs), and a small nmt (LSTMs
 * that share weights across steps, embeddings, attention) on k80-16x4 (64
 * devices, PCIe trees). The text is read against each in turn (an operator
 * name of one model is unknown to the other, so most texts fail fast for
 * one). An error, or a strategy that validates, simulates (a strategy the
 * reader accepts goes straight to the simulator in `soapflow simulate
 * --strategy`), and writes, reads back and writes the same.
 */
#include "fuzz.h"
#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

/* One model on one machine, and a simulator of it. */
typedef struct context {
    sf_graph *g;
    sf_machine *m;
    sf_cost_model *cm;
    sf_sim *sim;
} context;

static context contexts[2];

static void build(context *c, const char *model, int64_t batch, int64_t small,
                  const char *machine) {
    sf_error err = {0};
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    if (small) { /* the recurrent models at a tiny size: as make_corpus.c builds them */
        o.seq_len = 4;
        o.chunk = 2;
        o.hidden = 8;
        o.vocab = 16;
    }
    c->g = sf_model_build(model, &o, &err);
    c->m = c->g ? sf_machine_preset(machine, &err) : NULL;
    c->cm = c->m ? sf_cost_analytic_new(c->m, NULL) : NULL;
    c->sim = c->cm ? sf_sim_new(c->g, c->m, c->cm, NULL, &err) : NULL;
    FUZZ_CHECK(c->sim, "set-up of %s on %s: %s", model, machine, err.msg);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    sf_log_set_level(SF_LOG_ERROR); /* the reader warns when "model" names another model */
    build(&contexts[0], "lenet5", 8, 0, "p100-4x4");
    build(&contexts[1], "nmt", 4, 1, "k80-16x4");
    return 0;
}

static void check_one(const context *c, const char *text) {
    const sf_graph *g = c->g;
    const sf_machine *m = c->m;
    sf_strategy *s = sf_strategy_new(g);
    FUZZ_CHECK(s, "out of memory");
    sf_error err = {0};
    sf_status st = sf_strategy_parse_json(s, text, "strategy.json", g, m, &err);
    if (st != SF_OK) {
        fuzz_check_error(st, &err, "strategy.json");
        sf_strategy_free(s);
        return;
    }
    FUZZ_CHECK(sf_strategy_validate(s, g, m, &err) == SF_OK, "read but invalid: %s", err.msg);
    sf_sim_result r;
    FUZZ_CHECK(sf_sim_run(c->sim, s, &r, &err) == SF_OK, "read but does not simulate: %s", err.msg);
    FUZZ_CHECK(r.iter_s > 0 && r.iter_s < 1e300, "iteration time %g s", r.iter_s);
    char *j1 = sf_strategy_to_json_for(s, g, m, &err);
    FUZZ_CHECK(j1, "a strategy that was read does not write: %s", err.msg);
    sf_strategy *s2 = sf_strategy_new(g);
    sf_error err2 = {0};
    FUZZ_CHECK(s2 && sf_strategy_parse_json(s2, j1, "written.json", g, m, &err2) == SF_OK,
               "what the writer wrote does not read back: %s\n%s", err2.msg, j1);
    for (int i = 0; i < sf_strategy_num_ops(s); i++)
        FUZZ_CHECK(sf_config_equal(sf_strategy_get(s, i), sf_strategy_get(s2, i)),
                   "operator %d reads back another config", i);
    char *j2 = sf_strategy_to_json_for(s2, g, m, &err2);
    FUZZ_CHECK(j2 && strcmp(j1, j2) == 0, "written twice, not the same text:\n%s\n%s", j1,
               j2 ? j2 : err2.msg);
    free(j2);
    free(j1);
    sf_strategy_free(s2);
    sf_strategy_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return FUZZ_REJECT;
    for (size_t i = 0; i < sizeof contexts / sizeof contexts[0]; i++) check_one(&contexts[i], text);
    free(text);
    return 0;
}
