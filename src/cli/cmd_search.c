/*
 * cmd_search.c - `soapflow search`: find a fast strategy for a model on a machine.
 *
 * The command runs what the two papers ran and puts them side by side: the
 * baselines (data, model, owt, expert), OptCNN's dynamic program, and FlexFlow's
 * MCMC search started from data parallelism, the owt or expert strategy, the
 * OptCNN result and a random strategy. Every candidate is judged by the same
 * simulator, so the table compares like with like; the best strategy is the
 * fastest that fits in memory, and it is written (--out) in the strategy format
 * that `simulate --strategy FILE` reads back to the same iteration time.
 */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define DEFAULT_MACHINE "p100-4x4"
#define DEFAULT_BUDGET_S 30.0

static int usage(FILE *out) {
    fprintf(out,
            "usage: soapflow search --model NAME|FILE [options]\n"
            "\n"
            "Search for a fast parallelization strategy: simulate the baselines, run\n"
            "OptCNN's dynamic program and FlexFlow's MCMC search, and report them side\n"
            "by side with the best strategy found.\n"
            "\n"
            "options:\n"
            "%s"
            "  --machine NAME|FILE    machine preset or machine JSON (default " DEFAULT_MACHINE
            ")\n"
            "  --algo mcmc|optcnn|all which searches to run (default all)\n"
            "  --budget TIME          MCMC time budget: 30s, 2m, 500ms, or seconds (default 30s)\n"
            "  --iters N              MCMC budget in proposals instead (reproducible)\n"
            "  --seed S               random seed (default 1): same seed and --iters, same result\n"
            "  --beta B               MCMC inverse temperature (default 50; see docs/search.md)\n"
            "  --no-delta             evaluate proposals with full instead of delta simulation\n"
            "  --costs FILE           measured task times from 'soapflow profile' (default:\n"
            "                         the analytic roofline model)\n"
            "  --out FILE             write the best strategy (strategy JSON)\n"
            "  --trace FILE           Chrome trace of the best strategy's iteration\n"
            "  --svg FILE             SVG timeline of the best strategy's iteration\n"
            "  --json                 print one JSON object instead of tables\n"
            "  -h, --help             show this help\n"
            "\n"
            "example:\n"
            "  soapflow search --model inception_v3 --machine p100-4x4 --budget 30s --out best.json\n"
            "  soapflow simulate --model inception_v3 --machine p100-4x4 --strategy best.json\n",
            sf_cli_model_help);
    return SF_EXIT_OK;
}

typedef struct search_opts {
    sf_cli_model_opts model;
    const char *machine, *algo, *budget, *out, *trace, *svg, *costs;
    int64_t iters, seed, beta;
    int json, no_delta, beta_set;
} search_opts;

/* "30s", "2m", "500ms", "1.5h" or a plain number of seconds. */
static int parse_duration(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || !isfinite(v)) return -1;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        *out = v;
    else if (strcmp(end, "ms") == 0)
        *out = v / 1000;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        *out = v * 60;
    else if (strcmp(end, "h") == 0)
        *out = v * 3600;
    else
        return -1;
    return 0;
}

/* One row of the comparison table. */
typedef struct row {
    const char *name;
    double iter_s, bytes, peak;
    int fits, present;
} row;

static void simulate_row(sf_sim *sim, const sf_strategy *s, const char *name, row *r) {
    sf_sim_result res;
    sf_error err = {0};
    r->name = name;
    r->present = 0;
    if (sf_sim_run(sim, s, &res, &err) != SF_OK) return;
    r->iter_s = res.iter_s;
    r->bytes = res.transfer_bytes + res.sync_bytes;
    r->peak = res.peak_mem_bytes;
    r->fits = res.fits;
    r->present = 1;
}

static int better(const row *a, const row *b) {
    if (!b->present) return a->present;
    if (!a->present) return 0;
    if (a->fits != b->fits) return a->fits;
    return a->iter_s < b->iter_s;
}

int sf_cmd_search(int argc, char **argv) {
    const char *cmd = argv[0];
    search_opts o;
    memset(&o, 0, sizeof o);
    o.machine = DEFAULT_MACHINE;
    o.algo = "all";
    o.seed = 1;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return usage(stdout);
        if (sf_cli_model_option(&a, &o.model)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &o.machine)) continue;
        if (sf_cli_str(&a, "--algo", NULL, &o.algo)) continue;
        if (sf_cli_str(&a, "--budget", NULL, &o.budget)) continue;
        if (sf_cli_int(&a, "--iters", NULL, 1, (int64_t)1 << 40, &o.iters)) continue;
        if (sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &o.seed)) continue;
        if (sf_cli_int(&a, "--beta", NULL, 0, 1000000, &o.beta)) {
            o.beta_set = 1;
            continue;
        }
        if (sf_cli_flag(&a, "--no-delta", NULL, &o.no_delta)) continue;
        if (sf_cli_str(&a, "--out", "-o", &o.out)) continue;
        if (sf_cli_str(&a, "--costs", NULL, &o.costs)) continue;
        if (sf_cli_str(&a, "--trace", NULL, &o.trace)) continue;
        if (sf_cli_str(&a, "--svg", NULL, &o.svg)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &o.json)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!o.model.model) return sf_cli_usage_error(cmd, "--model is required");
    int run_mcmc = strcmp(o.algo, "all") == 0 || strcmp(o.algo, "mcmc") == 0;
    int run_optcnn = strcmp(o.algo, "all") == 0 || strcmp(o.algo, "optcnn") == 0;
    if (!run_mcmc && !run_optcnn)
        return sf_cli_usage_error(cmd, "--algo must be mcmc, optcnn or all, not '%s'", o.algo);
    double budget_s = DEFAULT_BUDGET_S;
    if (o.budget && parse_duration(o.budget, &budget_s) != 0)
        return sf_cli_usage_error(cmd, "--budget wants a duration such as 30s, 2m or 500ms, "
                                       "not '%s'", o.budget);
    if (o.budget && o.iters)
        return sf_cli_usage_error(cmd, "give --budget or --iters, not both");

    sf_error err = {0};
    sf_machine *m = sf_machine_open(o.machine, &err);
    if (!m) return sf_cli_fail_err(&err);
    sf_graph *g = NULL;
    int rc = sf_cli_model_open(cmd, &o.model, sf_machine_num_devices(m), &g);
    if (rc != SF_EXIT_OK) {
        sf_machine_free(m);
        return rc;
    }
    sf_cost_model *cm = NULL;
    rc = sf_cli_cost_model_open(m, o.costs, &cm);
    if (rc != SF_EXIT_OK) {
        sf_graph_free(g);
        sf_machine_free(m);
        return rc;
    }
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    static const char *const base_names[] = {"data", "model", "owt", "expert"};
    enum { NB = 4 };
    sf_strategy *base[NB] = {0};
    sf_strategy *opt = sf_strategy_new(g), *best = sf_strategy_new(g), *rnd = sf_strategy_new(g);
    row rows[NB + 2];
    memset(rows, 0, sizeof rows);
    sf_optcnn_result orr;
    memset(&orr, 0, sizeof orr);
    sf_mcmc_result mr;
    memset(&mr, 0, sizeof mr);
    if (!sim || !opt || !best || !rnd) {
        rc = err.code ? sf_cli_fail_err(&err) : sf_cli_fail("out of memory");
        goto done;
    }
    for (int i = 0; i < NB; i++) {
        base[i] = sf_strategy_new(g);
        if (!base[i] || sf_strategy_baseline(base[i], base_names[i], g, m, &err) != SF_OK) {
            rc = sf_cli_fail_err(&err);
            goto done;
        }
        simulate_row(sim, base[i], base_names[i], &rows[i]);
    }
    if (run_optcnn) {
        if (sf_optcnn_search(g, m, cm, NULL, opt, &orr, &err) != SF_OK) {
            rc = sf_cli_fail_err(&err);
            goto done;
        }
        simulate_row(sim, opt, "optcnn", &rows[NB]);
    }
    /* the best so far: baselines and OptCNN */
    int best_row = 0;
    for (int i = 1; i < NB + 1; i++)
        if (better(&rows[i], &rows[best_row])) best_row = i;
    sf_strategy_copy(best, best_row < NB ? base[best_row] : opt);
    if (run_mcmc) {
        sf_rng rng;
        sf_rng_seed(&rng, (uint64_t)o.seed ^ 0x5eed5eedULL);
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            sf_config_random(sf_graph_op(g, i), m, &rng, sf_strategy_config(rnd, i));
        /* starts: data, owt (CNNs) or expert (RNNs), the OptCNN optimum, random.
         * A random strategy on a large machine can have tens of times the tasks of
         * data parallelism (parts everywhere exchanging tiles), and every proposal
         * from it costs that much to simulate: it starts a chain only while it stays
         * within 4x the task count of data parallelism. */
        const sf_strategy *starts[4];
        int ns = 0;
        starts[ns++] = base[0];
        starts[ns++] = rows[3].present && rows[3].iter_s != rows[0].iter_s ? base[3] : base[2];
        if (run_optcnn) starts[ns++] = opt;
        sf_sim_result rr, dr;
        if (sf_sim_run(sim, base[0], &dr, &err) == SF_OK && sf_sim_run(sim, rnd, &rr, &err) == SF_OK &&
            rr.tasks <= 4 * dr.tasks)
            starts[ns++] = rnd;
        sf_error_clear(&err);
        sf_mcmc_options mo;
        sf_mcmc_options_default(&mo);
        mo.seed = (uint64_t)o.seed;
        if (o.iters) {
            mo.iters = o.iters;
            mo.budget_s = 0;
        } else {
            mo.budget_s = budget_s;
        }
        if (o.beta_set) mo.beta = (double)o.beta;
        mo.use_delta = !o.no_delta;
        mo.progress = !o.json;
        sf_strategy *mbest = sf_strategy_new(g);
        if (!mbest || sf_mcmc_search(g, m, cm, starts, ns, &mo, mbest, &mr, &err) != SF_OK) {
            sf_strategy_free(mbest);
            rc = sf_cli_fail_err(&err);
            goto done;
        }
        simulate_row(sim, mbest, "mcmc", &rows[NB + 1]);
        if (better(&rows[NB + 1], &rows[best_row])) {
            best_row = NB + 1;
            sf_strategy_copy(best, mbest);
        }
        sf_strategy_free(mbest);
    }
    /* files first: a failure is one error line, not a report and then an error */
    sf_sim_result br;
    if (sf_sim_run(sim, best, &br, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    if (o.trace && sf_sim_write_trace(sim, o.trace, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    if (o.svg && sf_sim_write_svg(sim, o.svg, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    if (o.out && sf_strategy_save_json_for(best, g, m, o.out, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    double data_s = rows[0].iter_s;
    if (o.json) {
        json_t *j = json_object(), *b = json_object();
        if (!j || !b) {
            json_decref(j);
            json_decref(b);
            rc = sf_cli_print_json(NULL);
            goto done;
        }
        for (int i = 0; i < NB; i++)
            if (rows[i].present) json_object_set_new(b, base_names[i], json_real(rows[i].iter_s * 1e3));
        json_object_set_new(j, "model", json_string(sf_graph_name(g)));
        json_object_set_new(j, "machine", json_string(sf_machine_name(m)));
        json_object_set_new(j, "devices", json_integer(sf_machine_num_devices(m)));
        json_object_set_new(j, "baselines", b);
        if (run_optcnn) {
            json_object_set_new(j, "optcnn_ms", json_real(rows[NB].iter_s * 1e3));
            json_object_set_new(j, "optcnn_cost_ms", json_real(orr.cost_s * 1e3));
            json_object_set_new(j, "optcnn_exact", json_boolean(orr.exact));
            json_object_set_new(j, "optcnn_nodes_left", json_integer(orr.nodes_left));
            json_object_set_new(j, "optcnn_seconds", json_real(orr.seconds));
        }
        if (run_mcmc) {
            json_object_set_new(j, "mcmc_ms", json_real(rows[NB + 1].iter_s * 1e3));
            json_object_set_new(j, "iterations", json_integer(mr.iterations));
            json_object_set_new(j, "accepted", json_integer(mr.accepted));
            json_object_set_new(j, "seconds", json_real(mr.seconds));
            json_object_set_new(j, "sims_per_s", json_real(mr.sims_per_s));
        } else {
            json_object_set_new(j, "iterations", json_integer(0));
            json_object_set_new(j, "seconds", json_real(orr.seconds));
        }
        json_object_set_new(j, "best", json_string(rows[best_row].name));
        json_object_set_new(j, "best_ms", json_real(br.iter_s * 1e3));
        json_object_set_new(j, "speedup_vs_data", json_real(data_s / br.iter_s));
        json_object_set_new(j, "best_fits", json_boolean(br.fits));
        json_object_set_new(j, "best_peak_mem_bytes", json_real(br.peak_mem_bytes));
        if (o.out) json_object_set_new(j, "strategy_file", json_string(o.out));
        rc = sf_cli_print_json(j);
        goto done;
    }
    {
        static const char *const headers[] = {"strategy", "iteration", "speedup", "moved",
                                              "peak memory", "fits"};
        sf_cli_table *t = sf_cli_table_new(6, headers, "lrrrrl");
        for (int i = 0; i < NB + 2; i++) {
            if (!rows[i].present) continue;
            char by[32], pk[32];
            sf_cli_table_cell(t, "%s%s", rows[i].name, i == best_row ? " *" : "");
            sf_cli_table_cell(t, "%.3f ms", rows[i].iter_s * 1e3);
            sf_cli_table_cell(t, "%.2fx", data_s / rows[i].iter_s);
            sf_cli_table_cell(t, "%s", sf_cli_fmt_bytes(rows[i].bytes, by, sizeof by));
            sf_cli_table_cell(t, "%s", sf_cli_fmt_bytes(rows[i].peak, pk, sizeof pk));
            sf_cli_table_cell(t, "%s", rows[i].fits ? "yes" : "no");
        }
        printf("%s on %s (%d devices), batch %lld\n\n", sf_graph_name(g), sf_machine_name(m),
               sf_machine_num_devices(m), (long long)sf_graph_op(g, 0)->out_shapes[0].d[0]);
        rc = sf_cli_table_print(t, stdout);
        sf_cli_table_free(t);
        printf("\n");
        if (run_optcnn)
            printf("optcnn: %.3f s, additive cost %.3f ms, %d of %d nodes left after "
                   "elimination (%s%s)\n",
                   orr.seconds, orr.cost_s * 1e3, orr.nodes_left, orr.nodes_initial,
                   orr.exact ? "exact" : "not exact: ", orr.exact ? "" : orr.method);
        if (run_mcmc)
            printf("mcmc: %lld proposals (%lld accepted) in %.1f s, %.0f simulations/s\n",
                   (long long)mr.iterations, (long long)mr.accepted, mr.seconds, mr.sims_per_s);
        printf("best: %s, %.3f ms, %.2fx over data parallelism%s%s\n", rows[best_row].name,
               br.iter_s * 1e3, data_s / br.iter_s, o.out ? ", written to " : "",
               o.out ? o.out : "");
    }
done:
    if (rc == SF_EXIT_OK) sf_cli_cost_model_report(cm);
    for (int i = 0; i < NB; i++) sf_strategy_free(base[i]);
    sf_strategy_free(opt);
    sf_strategy_free(best);
    sf_strategy_free(rnd);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
