/*
 * bench_pipe.c - what simulating a pipelined GPT costs as the machine grows:
 * tensor parallelism T inside a node, P pipeline stages of T * D devices each,
 * D data-parallel groups inside a stage, M micro-batches, one schedule; the
 * task count, the best of R full simulations and the process's peak memory.
 *
 *     bench_pipe MACHINE.json --tp T --pp P --dp D --micro M [--layers L]
 *                [--hidden H] [--heads A] [--seq-len S] [--vocab V] [--batch B]
 *                [--schedule gpipe|1f1b|interleaved:V] [--reps R] [--fast 1] [--timeline 1]
 *                [--every-replica 1]
 *
 * The model is the zoo's gpt (GPT-3 175B's shape by default: 96 layers,
 * hidden 12288, 96 heads, sequence 2048) in bf16 under Adam; the machine file
 * must have T * P * D devices. Each stage's operators get the configs
 * `megatron:T` gives a micro-batch on a machine of T * D devices (the first
 * stage's), moved
 * to the stage's devices: Megatron-LM's layout (the tensor-parallel group
 * innermost, then data, then pipeline). The stages cut the layers as evenly
 * as sf_pipeline_even can. One JSON object on stdout.
 *
 * Until the CLI's megatron baseline takes pp=, this program is where such a
 * strategy is built.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static double rss_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* s := Megatron's tp x dp configs inside every stage of pl, stage k on devices
 * [k T D, (k + 1) T D). The configs come from megatron:T on a machine of one
 * stage's devices (the machine's first T D); their devices are then moved. */
static sf_status pipelined_megatron(sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                    const sf_pipeline *pl, int tp, int dp, sf_error *err) {
    sf_machine_desc d = *sf_machine_get_desc(m);
    int per_stage = tp * dp;
    if (d.devices_per_node <= 0 || per_stage % d.devices_per_node != 0)
        return sf_error_set(err, SF_ERR_INVALID, "a stage of %d devices is not whole nodes",
                            per_stage);
    d.nodes = per_stage / d.devices_per_node;
    sf_machine *ms = sf_machine_build(&d, err);
    if (!ms) return err->code;
    /* Megatron's configs for a micro-batch (its operators split the samples
     * they have, not the whole batch's): copy 0 of the micro-batch graph */
    sf_graph *gu = sf_graph_micro_batch_copies(g, pl->micro_batches, 1, err);
    sf_strategy *one = gu ? sf_strategy_new(gu) : NULL;
    sf_status st = one ? sf_strategy_megatron(one, gu, ms, tp, 0, err)
                       : sf_error_set(err, SF_ERR_NOMEM, "no micro-batch graph");
    int n = sf_graph_num_ops(g);
    int *chunk = malloc((size_t)n * sizeof *chunk);
    if (st == SF_OK && !chunk) st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    if (st == SF_OK) {
        sf_pipeline_op_chunks(pl, g, chunk);
        for (int i = 0; i < n; i++) {
            sf_config *c = sf_strategy_config(s, i);
            sf_config_copy(c, sf_strategy_get(one, i));
            int off = (chunk[i] % pl->stages) * per_stage;
            for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(c->device[p] + off);
        }
        sf_strategy_set_pipeline(s, pl);
        st = sf_strategy_validate(s, g, m, err);
    }
    free(chunk);
    sf_strategy_free(one);
    sf_graph_free(gu);
    sf_machine_free(ms);
    return st;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_pipe MACHINE.json --tp T --pp P --dp D --micro M "
                        "[--layers L] [--hidden H] [--heads A] [--seq-len S] [--vocab V] "
                        "[--batch B] [--schedule S] [--reps R] [--fast 1] [--timeline 1] "
                        "[--every-replica 1]\n");
        return 2;
    }
    int tp = 8, pp = 1, dp = 1, micro = 1, reps = 3, fast = 0, timeline = 0, every = 0;
    const char *sched = "1f1b";
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.layers = 96;
    mo.hidden = 12288;
    mo.heads = 96;
    mo.seq_len = 2048;
    mo.batch = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        long x = strtol(v, NULL, 10);
        if (!strcmp(k, "--tp"))
            tp = (int)x;
        else if (!strcmp(k, "--pp"))
            pp = (int)x;
        else if (!strcmp(k, "--dp"))
            dp = (int)x;
        else if (!strcmp(k, "--micro"))
            micro = (int)x;
        else if (!strcmp(k, "--layers"))
            mo.layers = x;
        else if (!strcmp(k, "--hidden"))
            mo.hidden = x;
        else if (!strcmp(k, "--heads"))
            mo.heads = x;
        else if (!strcmp(k, "--seq-len"))
            mo.seq_len = x;
        else if (!strcmp(k, "--vocab"))
            mo.vocab = x;
        else if (!strcmp(k, "--batch"))
            mo.batch = x;
        else if (!strcmp(k, "--schedule"))
            sched = v;
        else if (!strcmp(k, "--reps"))
            reps = (int)x;
        else if (!strcmp(k, "--fast"))
            fast = (int)x;
        else if (!strcmp(k, "--timeline"))
            timeline = (int)x;
        else if (!strcmp(k, "--every-replica"))
            every = (int)x;
        else {
            fprintf(stderr, "bench_pipe: unknown option '%s'\n", k);
            return 2;
        }
    }
    if (mo.batch == 0) mo.batch = (int64_t)micro * dp;
    sf_error err = {0};
    sf_machine *m = sf_machine_open(argv[1], &err);
    sf_graph *g = m ? sf_model_build("gpt", &mo, &err) : NULL;
    sf_analytic_params ap;
    sf_analytic_params_default(&ap);
    ap.dtype = SF_DTYPE_BF16;
    ap.optimizer = SF_OPTIMIZER_ADAM;
    sf_cost_model *cm = g ? sf_cost_analytic_new(m, &ap) : NULL;
    sf_strategy *s = g ? sf_strategy_new(g) : NULL;
    sf_pipeline pl;
    sf_pipe_schedule ps;
    int v = 1;
    int rc = 1;
    if (!s) goto fail;
    if (sf_pipe_schedule_parse(sched, &ps, &v) < 0) {
        fprintf(stderr, "bench_pipe: unknown schedule '%s'\n", sched);
        goto done;
    }
    if (tp * pp * dp != sf_machine_num_devices(m)) {
        fprintf(stderr, "bench_pipe: tp %d x pp %d x dp %d is not the machine's %d devices\n", tp,
                pp, dp, sf_machine_num_devices(m));
        goto done;
    }
    if (sf_pipeline_even(&pl, g, pp, ps == SF_PIPE_INTERLEAVED ? v : 1, micro, ps, &err) != SF_OK ||
        pipelined_megatron(s, g, m, &pl, tp, dp, &err) != SF_OK)
        goto fail;
    double rss0 = rss_mb();
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.pipeline_fast = fast;
    so.keep_schedule = !fast;
    so.memory_timeline = timeline;
    so.every_replica = every;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    if (!sim) goto fail;
    sf_sim_result r = {0};
    double best = INFINITY;
    for (int k = 0; k < reps; k++) {
        double t0 = now_s();
        if (sf_sim_run(sim, s, &r, &err) != SF_OK) {
            sf_sim_free(sim);
            goto fail;
        }
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    printf("{\"machine\": \"%s\", \"devices\": %d, \"tp\": %d, \"pp\": %d, \"dp\": %d, "
           "\"micro\": %d, \"schedule\": \"%s\", \"layers\": %lld, \"ops\": %d, "
           "\"tasks\": %lld, \"fast_copies\": %d, \"replicas\": %d, \"tasks_simulated\": %lld, \"iter_ms\": %.9f, \"peak_mem_GB\": %.3f, \"fits\": %d, "
           "\"full_s\": %.3f, \"rss_before_sim_MB\": %.0f, \"rss_MB\": %.0f}\n",
           sf_machine_name(m), sf_machine_num_devices(m), tp, pp, dp, micro, sched,
           (long long)mo.layers, sf_graph_num_ops(g), (long long)r.tasks, r.fast_copies, r.replicas,
           (long long)r.rescheduled, r.iter_s * 1e3,
           r.peak_mem_bytes / 1e9, r.fits, best, rss0, rss_mb());
    sf_sim_free(sim);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_pipe: %s\n", err.msg);
done:
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
