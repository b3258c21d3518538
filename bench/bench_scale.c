/*
 * bench_scale.c - what planning costs as the machine grows: data parallelism
 * of one model on a preset's node type scaled to N devices, simulated in full
 * and by delta updates, with the task count and the process's peak memory.
 *
 *     bench_scale MODEL DEVICES [--machine PRESET] [--per-device B] [--reps R]
 *                 [--moves K] [--random-moves K] [--seed S]
 *
 * MODEL is a zoo name or a model JSON file (so the table can be run again
 * with another model: `gpt` once the zoo has it); the machine is PRESET
 * (default dgx-h100) with DEVICES / devices_per_node nodes; the batch is B
 * (default 64) per device. One JSON object on stdout:
 *   tasks, idle_devices        the data-parallel task graph; devices no part runs on
 *   full_ms                    best of R full simulations
 *   rss_full_MB                peak resident memory after them (graph, strategy,
 *                              one simulator): what a search holds at the least
 *   shift_delta_ms             mean of K delta updates, each a random operator's
 *                              data-parallel config put on a contiguous run of
 *                              devices from a random first one (the MCMC's shift
 *                              proposal), undone by a revert
 *   shift_full_ms              mean full simulation of the same changed strategies
 *   random_delta_ms,           the same for K' moves drawn from the whole SOAP
 *   random_full_ms,            space (sf_config_random, as `soapflow bench sim`),
 *   random_tasks               and the mean task count after such a move
 *   rss_MB                     peak resident memory of the whole run
 * Every delta result is checked against the full simulation of the same
 * strategy (iteration time, tasks, bytes): a difference is an error (status 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static double rss_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

static int same(const sf_sim_result *a, const sf_sim_result *b) {
    return a->iter_s == b->iter_s && a->tasks == b->tasks && a->sync_bytes == b->sync_bytes &&
           a->transfer_bytes == b->transfer_bytes && a->peak_mem_bytes == b->peak_mem_bytes;
}

/* The shift move of `op`: its config in s, on a contiguous run from a random device. */
static void shift_move(const sf_strategy *s, int op, int n_dev, sf_rng *rng, sf_config *c) {
    sf_config_copy(c, sf_strategy_get(s, op));
    int first = (int)sf_rng_below(rng, (uint64_t)n_dev);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((first + p) % n_dev);
}

/* K moves of one kind from data parallelism: mean delta and full times (ms)
 * and mean tasks after a move; -1 when a delta result differs from full. */
static int moves(sf_sim *sim, sf_sim *sim2, const sf_graph *g, const sf_machine *m, sf_strategy *s,
                 int kind, int64_t k, uint64_t seed, double *delta_ms, double *full_ms,
                 double *tasks, sf_error *err) {
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    static sf_config c, old;
    double d = 0, f = 0, t = 0;
    int n_dev = sf_machine_num_devices(m), n_ops = sf_graph_num_ops(g);
    sf_sim_result r, r2;
    for (int64_t i = 0; i < k; i++) {
        int op = (int)sf_rng_below(&rng, (uint64_t)n_ops);
        if (kind == 0)
            shift_move(s, op, n_dev, &rng, &c);
        else
            sf_config_random(sf_graph_op(g, op), m, &rng, &c);
        double t0 = sf_now_s();
        if (sf_sim_update(sim, op, &c, &r, err) != SF_OK) return -1;
        double t1 = sf_now_s();
        sf_sim_result kept = r;
        sf_config_copy(&old, sf_strategy_get(s, op));
        sf_config_copy(sf_strategy_config(s, op), &c);
        double t2 = sf_now_s();
        if (sf_sim_run(sim2, s, &r2, err) != SF_OK) return -1;
        double t3 = sf_now_s();
        sf_config_copy(sf_strategy_config(s, op), &old);
        if (!same(&kept, &r2)) {
            sf_error_set(err, SF_ERR_INTERNAL, "move %lld on '%s': delta %.9g s, full %.9g s",
                         (long long)i, sf_graph_op(g, op)->name, kept.iter_s, r2.iter_s);
            return -1;
        }
        if (sf_sim_revert(sim, NULL, err) != SF_OK) return -1;
        d += t1 - t0;
        f += t3 - t2;
        t += (double)kept.tasks;
    }
    *delta_ms = k ? 1e3 * d / (double)k : 0;
    *full_ms = k ? 1e3 * f / (double)k : 0;
    *tasks = k ? t / (double)k : 0;
    return 0;
}

static long arg_long(const char *s, const char *what) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0) {
        fprintf(stderr, "bench_scale: %s must be a non-negative integer, not '%s'\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_scale MODEL DEVICES [--machine PRESET] [--per-device B] "
                        "[--reps R] [--moves K] [--random-moves K] [--seed S]\n");
        return 2;
    }
    const char *model = argv[1], *preset = "dgx-h100";
    long devices = arg_long(argv[2], "DEVICES"), per_dev = 64, reps = 5, k = 50, kr = 0, seed = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--machine"))
            preset = argv[i + 1];
        else if (!strcmp(argv[i], "--per-device"))
            per_dev = arg_long(argv[i + 1], "--per-device");
        else if (!strcmp(argv[i], "--reps"))
            reps = arg_long(argv[i + 1], "--reps");
        else if (!strcmp(argv[i], "--moves"))
            k = arg_long(argv[i + 1], "--moves");
        else if (!strcmp(argv[i], "--random-moves"))
            kr = arg_long(argv[i + 1], "--random-moves");
        else if (!strcmp(argv[i], "--seed"))
            seed = arg_long(argv[i + 1], "--seed");
        else {
            fprintf(stderr, "bench_scale: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    sf_error err = {0};
    sf_machine_desc d;
    if (sf_machine_preset_desc(preset, &d, &err) != SF_OK) goto fail;
    if (devices < d.devices_per_node) {
        d.nodes = 1;
        d.devices_per_node = (int)devices;
    } else {
        d.nodes = (int)(devices / d.devices_per_node);
    }
    snprintf(d.name, sizeof d.name, "%s-%ld", preset, devices);
    sf_machine *m = sf_machine_build(&d, &err);
    if (!m) goto fail;
    int n_dev = sf_machine_num_devices(m);
    sf_graph *g;
    size_t ml = strlen(model);
    if (ml > 5 && !strcmp(model + ml - 5, ".json")) {
        g = sf_model_load_json(model, &err);
    } else {
        sf_model_options mo;
        sf_model_options_default(&mo);
        mo.batch = per_dev * n_dev;
        g = sf_model_build(model, &mo, &err);
    }
    if (!g) goto fail;
    sf_strategy *s = sf_strategy_new(g);
    if (!s || sf_strategy_data(s, g, m) != SF_OK) {
        sf_error_set(&err, SF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    if (!cm) {
        sf_error_set(&err, SF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    if (!sim) goto fail;
    sf_sim_result r;
    if (sf_sim_run(sim, s, &r, &err) != SF_OK) goto fail;
    double best = 1e300;
    for (long i = 0; i < reps; i++) {
        double t0 = sf_now_s();
        if (sf_sim_run(sim, s, &r, &err) != SF_OK) goto fail;
        double dt = sf_now_s() - t0;
        if (dt < best) best = dt;
    }
    double rss_full = rss_mb();
    int64_t tasks = r.tasks;
    double iter_ms = r.iter_s * 1e3;
    sf_sim *sim2 = sf_sim_new(g, m, cm, NULL, &err);
    if (!sim2) goto fail;
    double sd = 0, sfull = 0, st = 0, rd = 0, rfull = 0, rt = 0;
    if (moves(sim, sim2, g, m, s, 0, k, (uint64_t)seed, &sd, &sfull, &st, &err) ||
        moves(sim, sim2, g, m, s, 1, kr, (uint64_t)seed, &rd, &rfull, &rt, &err))
        goto fail;
    printf("{\"model\": \"%s\", \"graph\": \"%s\", \"ops\": %d, \"machine\": \"%s\", "
           "\"devices\": %d, \"batch_per_device\": %ld, \"tasks\": %lld, \"idle_devices\": %d, "
           "\"iter_ms\": %.3f, \"full_ms\": %.3f, \"rss_full_MB\": %.1f, \"moves\": %ld, "
           "\"shift_delta_ms\": %.3f, \"shift_full_ms\": %.3f, \"shift_tasks\": %.0f, "
           "\"random_moves\": %ld, \"random_delta_ms\": %.3f, \"random_full_ms\": %.3f, "
           "\"random_tasks\": %.0f, \"rss_MB\": %.1f}\n",
           model, sf_graph_name(g), sf_graph_num_ops(g), sf_machine_name(m), n_dev, per_dev,
           (long long)tasks, sf_strategy_idle_devices(s, n_dev, NULL), iter_ms, best * 1e3,
           rss_full, k, sd, sfull, st, kr, rd, rfull, rt, rss_mb());
    sf_sim_free(sim2);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    return 0;
fail:
    fprintf(stderr, "bench_scale: %s\n", err.msg);
    return 1;
}
