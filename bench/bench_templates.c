/*
 * bench_templates.c - the MCMC search of a GPT with layer templates against
 * without: the best time found and the search's wall time at each iteration
 * budget, and the wall time each needs to come within 1% of the best either
 * found (docs/search.md, "Layer templates").
 *
 *     bench_templates [layers] [machine] [stages] [seeds]
 *                     (default 12, p100-4x4, 0 = no pipeline, 3)
 *
 * The GPT is the zoo's "gpt" with `layers` blocks at 8 samples a device (so that data parallelism
 * fits) (with stages > 1: an even 1F1B pipeline of that many stages, m = 4 stages, every operator
 * unsplit on the first device of its stage's block). The search starts from data parallelism (or
 * that pipeline), with the defaults (pair moves, the polish) and an iteration budget, so every
 * figure but the seconds is deterministic. Each row is the mean over the seeds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/models.h"
#include "soapflow/search.h"

#define N_BUDGETS 6
static const int64_t budgets[N_BUDGETS] = {100, 200, 400, 800, 1600, 3200};

static sf_strategy *pipelined(const sf_graph *g, const sf_machine *m, int p, sf_error *err) {
    sf_pipeline pl;
    if (sf_pipeline_even(&pl, g, p, 1, 4 * p, SF_PIPE_1F1B, err) != SF_OK) return NULL;
    int n = sf_graph_num_ops(g), group = sf_machine_num_devices(m) / p;
    int *chunk = malloc((size_t)n * sizeof *chunk);
    sf_strategy *s = sf_strategy_new(g);
    if (!chunk || !s) return NULL;
    sf_pipeline_op_chunks(&pl, g, chunk);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int ones[SF_MAX_DIMS];
        for (int k = 0; k < op->space.ndim; k++) ones[k] = 1;
        sf_config *c = sf_strategy_config(s, i);
        sf_config_set_degrees(c, op->space.ndim, ones);
        c->device[0] = (int16_t)((chunk[i] % p) * group);
    }
    free(chunk);
    sf_strategy_set_pipeline(s, &pl);
    if (sf_strategy_validate(s, g, m, err) != SF_OK) return NULL;
    return s;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 12;
    const char *mname = argc > 2 ? argv[2] : "p100-4x4";
    int stages = argc > 3 ? atoi(argv[3]) : 0;
    int seeds = argc > 4 ? atoi(argv[4]) : 3;
    if (layers < 1 || seeds < 1 || seeds > 16 || stages < 0) {
        fprintf(stderr, "usage: bench_templates [layers] [machine] [stages] [seeds]\n");
        return 2;
    }
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(mname, &err);
    if (!m) {
        fprintf(stderr, "bench_templates: %s\n", err.msg);
        return 1;
    }
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 8 * sf_machine_num_devices(m);
    mo.layers = layers;
    sf_graph *g = sf_model_build("gpt", &mo, &err);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_strategy *start = NULL;
    if (g && stages > 1) {
        start = pipelined(g, m, stages, &err);
    } else if (g) {
        start = sf_strategy_new(g);
        if (start && sf_strategy_data(start, g, m) != SF_OK) start = NULL;
    }
    if (!g || !cm || !start) {
        fprintf(stderr, "bench_templates: %s\n", err.msg[0] ? err.msg : "out of memory");
        return 1;
    }
    sf_strategy *best = sf_strategy_new(g);
    double best_s[2][N_BUDGETS][16], secs[2][N_BUDGETS][16], floor_s = INFINITY, start_s = 0;
    for (int tp = 0; tp < 2; tp++)
        for (int b = 0; b < N_BUDGETS; b++)
            for (int k = 0; k < seeds; k++) {
                sf_mcmc_options o;
                sf_mcmc_options_default(&o);
                o.budget_s = 0;
                o.iters = budgets[b];
                o.seed = 1 + (uint64_t)k;
                o.templates = tp;
                sf_mcmc_result r;
                const sf_strategy *st[1] = {start};
                if (sf_mcmc_search(g, m, cm, st, 1, &o, best, &r, &err) != SF_OK) {
                    fprintf(stderr, "bench_templates: %s\n", err.msg);
                    return 1;
                }
                best_s[tp][b][k] = r.best_s;
                secs[tp][b][k] = r.seconds;
                start_s = r.start_best_s;
                if (r.best_s < floor_s) floor_s = r.best_s;
            }
    printf("gpt, %d layers, %d ops, %s, %s, start %.3f ms, %d seeds\n", layers, sf_graph_num_ops(g),
           mname, stages > 1 ? "1f1b pipeline" : "data parallel", start_s * 1e3, seeds);
    printf("| templates | iterations | best ms (mean) | reached 1%% | search s (mean) |\n");
    printf("|---|---|---|---|---|\n");
    double target = floor_s * 1.01;
    for (int tp = 0; tp < 2; tp++)
        for (int b = 0; b < N_BUDGETS; b++) {
            double bs = 0, sc = 0;
            int hit = 0;
            for (int k = 0; k < seeds; k++) {
                bs += best_s[tp][b][k] / seeds;
                sc += secs[tp][b][k] / seeds;
                hit += best_s[tp][b][k] <= target;
            }
            printf("| %s | %lld | %.4f | %d/%d | %.3f |\n", tp ? "on" : "off",
                   (long long)budgets[b], bs * 1e3, hit, seeds, sc);
        }
    printf("best of all %.4f ms; 1%% target %.4f ms\n", floor_s * 1e3, target * 1e3);
    sf_strategy_free(best);
    sf_strategy_free(start);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return 0;
}
