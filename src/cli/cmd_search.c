/*
 * cmd_search.c - `soapflow search`: find a fast strategy for a model on a machine.
 *
 * The command runs what the two papers ran and puts them side by side
 * (sf_search_run in the search module: the baselines, OptCNN's dynamic program and
 * FlexFlow's MCMC, every candidate judged by the same simulator); this file reads
 * the command line, prints the table or the JSON, and writes the best strategy
 * (--out) in the strategy format that `simulate --strategy FILE` reads back to
 * the same iteration time.
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
    fprintf(
        out,
        "usage: soapflow search --model NAME|FILE [options]\n"
        "\n"
        "Search for a fast parallelization strategy: simulate the baselines, run\n"
        "OptCNN's dynamic program and FlexFlow's MCMC search, and report them side\n"
        "by side with the best strategy found.\n"
        "\n"
        "options:\n"
        "%s"
        "  --machine NAME|FILE    machine preset or machine JSON (default " DEFAULT_MACHINE ")\n"
        "                         NAME[N]: its first N devices, N at most one node's\n"
        "                         devices or whole nodes (p100-4x4[8]: two nodes)\n"
        "  --algo mcmc|optcnn|all which searches to run (default all)\n"
        "  --budget TIME          MCMC time budget: 30s, 2m, 500ms, or seconds (default 30s)\n"
        "  --iters N              MCMC budget in proposals instead (reproducible)\n"
        "  --seed S               random seed (default 1): same seed and --iters, same result\n"
        "  --beta B               MCMC inverse temperature, a real number (default 50;\n"
        "                         see docs/search.md)\n"
        "  --anneal F             beta grows to beta * F over each chain (default 1:\n"
        "                         a fixed beta)\n"
        "  --pipeline auto|off|on the pipeline pass (default auto: when data parallelism\n"
        "                         does not fit in memory): Megatron's 3D template (stages\n"
        "                         at transformer blocks, tensor x data in each, every\n"
        "                         micro-batch size and recomputation; data parallel stages\n"
        "                         for other models), judged with memory over the timeline,\n"
        "                         the best an MCMC start; a third of the budget\n"
        "  --pipeline-budget TIME the pass's own budget (default: a third of --budget,\n"
        "                         none with --iters)\n"
        "  --no-delta             evaluate proposals with full instead of delta simulation\n"
        "  --templates            MCMC moves identical layers together (layer templates:\n"
        "                         one operator of every layer in step; docs/search.md)\n"
        "  --reduce-splits        also propose reduction degrees (partial sums: row-parallel\n"
        "                         linears, attention heads) and softmax_ce's classes\n"
        "                         (vocabulary-parallel loss) in both searches; the runtime\n"
        "                         trains them all\n"
        "  --costs FILE           measured task times from 'soapflow profile' (default:\n"
        "                         the analytic roofline model)\n"
        "%s"
        "%s"
        "%s"
        "  --out FILE             write the best strategy (strategy JSON)\n"
        "  --trace FILE           Chrome trace of the best strategy's iteration\n"
        "  --svg FILE             SVG timeline of the best strategy's iteration\n"
        "%s"
        "  --json                 print one JSON object instead of tables\n"
        "  -h, --help             show this help\n"
        "\n"
        "The searches rank strategies by time, those that fit in memory first (every\n"
        "activation counted as alive at once); the best one is then simulated with its\n"
        "memory over the iteration, which decides best_fits, and when it does not fit a\n"
        "line says by how much it misses and what its peak holds. OptCNN bounds its\n"
        "own answer by the same peak (the lines after its own say so when its fastest\n"
        "answer does not fit, or when nothing in its space does).\n"
        "\n"
        "example:\n"
        "  soapflow search --model inception_v3 --machine p100-4x4 --budget 30s --out best.json\n"
        "  soapflow simulate --model inception_v3 --machine p100-4x4 --strategy best.json\n",
        sf_cli_model_help, sf_cli_sim_help, sf_cli_dtype_help, sf_cli_optimizer_help,
        sf_cli_memory_help);
    return SF_EXIT_OK;
}

typedef struct search_opts {
    sf_cli_model_opts model;
    const char *machine, *algo, *budget, *out, *trace, *svg, *costs, *beta, *anneal, *pipeline;
    const char *pipe_budget;
    int64_t iters, seed;
    int json, no_delta, reduce, templates;
    sf_sim_options sim, mem; /* mem: the memory options alone (--memory-headroom) */
    sf_dtype dtype;
    sf_optimizer_kind optimizer;
} search_opts;

/* "30s", "2m", "500ms", "1.5h" or a plain number of seconds; above 0 and
 * finite once scaled ("1e308h" overflowed to an infinite budget, which the
 * search then refused with status 1 and a message that did not name --budget). */
static int parse_duration(const char *s, double *out) {
    char *end;
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return -1; /* no sign, space, "inf" */
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
    return *out > 0 && isfinite(*out) ? 0 : -1;
}

/* A real number in [0, 1e9], as FlexFlow's --search-alpha: "50", "0.5", "2e3";
 * no sign, "inf", "nan" or hex (strtod would take them). */
static int parse_beta(const char *s, double *out) {
    char *end;
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return -1;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return -1;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0 && v <= 1e9)) return -1;
    *out = v;
    return 0;
}

/* One line for a best strategy that does not fit: the device that misses by
 * the most, by how much, and what its peak holds, largest first. */
static void report_miss(const sf_sim_result *r, const sf_machine *m, const sf_sim_options *so) {
    int worst = 0;
    double over = -INFINITY;
    for (int d = 0; d < r->n_devices; d++) {
        double usable = sf_machine_device_kind(m, d)->mem_bytes * (1.0 - so->memory_headroom);
        if (r->device_live_bytes[d] - usable > over) {
            over = r->device_live_bytes[d] - usable;
            worst = d;
        }
    }
    const double *k = &r->device_live_kinds[worst * SF_SIM_MEM_KIND_COUNT];
    int order[SF_SIM_MEM_KIND_COUNT];
    for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++) {
        int j = i;
        for (; j > 0 && k[order[j - 1]] < k[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    char b1[32], b2[32], b3[32];
    printf("does not fit: device %d needs %s at its peak, %s over the %s it may use (%g%% kept "
           "free); the peak holds",
           worst, sf_fmt_bytes(r->device_live_bytes[worst], b1, sizeof b1),
           sf_fmt_bytes(over, b2, sizeof b2),
           sf_fmt_bytes(r->device_live_bytes[worst] - over, b3, sizeof b3),
           100.0 * so->memory_headroom);
    for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++)
        printf("%s %s %s", i ? "," : "", sf_sim_mem_kind_name(order[i]),
               sf_fmt_bytes(k[order[i]], b1, sizeof b1));
    printf("\n");
}

/* The kinds of a peak, largest first, as ", weights 1.2 GiB, activations ...". */
static void print_kinds(const double *k) {
    int order[SF_SIM_MEM_KIND_COUNT];
    for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++) {
        int j = i;
        for (; j > 0 && k[order[j - 1]] < k[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    char b[32];
    for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++)
        printf("%s %s %s", i ? "," : "", sf_sim_mem_kind_name(order[i]),
               sf_fmt_bytes(k[order[i]], b, sizeof b));
}

static int largest_kind(const double *k) {
    int best = 0;
    for (int i = 1; i < SF_SIM_MEM_KIND_COUNT; i++)
        if (k[i] > k[best]) best = i;
    return best;
}

/* OptCNN's memory, when it matters: its fastest answer did not fit (the bound
 * searched), or its answer does not fit (by how much, and what the peak holds). */
static void optcnn_memory_lines(const sf_optcnn_result *r) {
    char b1[32], b2[32], b3[32];
    if (r->bounded)
        printf("optcnn: its fastest answer (additive %.3f ms) needs %s, over the %s a device may "
               "use; bounded by memory in %d solves: additive %.3f ms, peak %s\n",
               r->fastest_cost_s * 1e3, sf_fmt_bytes(r->fastest_peak_bytes, b1, sizeof b1),
               sf_fmt_bytes(r->mem_cap_bytes, b2, sizeof b2), r->solves, r->cost_s * 1e3,
               sf_fmt_bytes(r->peak_mem_bytes, b3, sizeof b3));
    if (r->fits) return;
    printf("optcnn: does not fit: device %d needs %s, %s over the %s it may use; the peak holds",
           r->peak_device, sf_fmt_bytes(r->peak_mem_bytes, b1, sizeof b1),
           sf_fmt_bytes(r->peak_mem_bytes - r->mem_cap_bytes, b2, sizeof b2),
           sf_fmt_bytes(r->mem_cap_bytes, b3, sizeof b3));
    print_kinds(r->peak_kinds);
    printf("\n");
}

static void optcnn_json(json_t *j, const sf_optcnn_result *r) {
    json_object_set_new(j, "optcnn_fits", json_boolean(r->fits));
    sf_cli_json_set_real(j, "optcnn_peak_mem_bytes", r->peak_mem_bytes);
    sf_cli_json_set_real(j, "optcnn_mem_cap_bytes", r->mem_cap_bytes);
    json_object_set_new(j, "optcnn_bounded", json_boolean(r->bounded));
    sf_cli_json_set_real(j, "optcnn_fastest_cost_ms", r->fastest_cost_s * 1e3);
    sf_cli_json_set_real(j, "optcnn_fastest_peak_mem_bytes", r->fastest_peak_bytes);
    json_object_set_new(j, "optcnn_solves", json_integer(r->solves));
    if (r->fits) return;
    sf_cli_json_set_real(j, "optcnn_over_bytes", r->peak_mem_bytes - r->mem_cap_bytes);
    json_object_set_new(j, "optcnn_peak_device", json_integer(r->peak_device));
    json_object_set_new(j, "optcnn_peak_dominant",
                        json_string(sf_sim_mem_kind_name(largest_kind(r->peak_kinds))));
    json_t *k = json_object();
    for (int i = 0; i < SF_SIM_MEM_KIND_COUNT; i++)
        sf_cli_json_set_real(k, sf_sim_mem_kind_name(i), r->peak_kinds[i]);
    json_object_set_new(j, "optcnn_peak_kinds", k);
}

/* The boundaries of pl as "0 (wte), 41 (h4.ln_1), ..." into buf. */
static void pipe_boundaries(const sf_pipeline *pl, const sf_graph *g, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int c = 0; c < pl->stages * pl->chunks && at + 1 < n; c++) {
        int w = snprintf(buf + at, n - at, "%s%d (%s)", c ? ", " : "", pl->first[c],
                         sf_graph_op(g, pl->first[c])->name);
        if (w < 0) break;
        at += (size_t)w;
    }
    if (at >= n && n > 4) strcpy(buf + n - 4, "...");
}

static const char *const pipe_rc[] = {"none", "selective", "full"};

/* What the pipeline pass chose: stages, micro-batches, schedule, boundaries,
 * tensor and data degrees. */
static void pipe_lines(const sf_search_pipe_plan *p, const sf_graph *g) {
    if (!p->present) {
        printf("pipeline: no candidate (%d left out) in %.1f s\n", p->skipped, p->seconds);
        return;
    }
    char sch[32] = "none", bounds[1024] = "0";
    if (p->pipeline.stages > 0) {
        sf_pipe_schedule_str(&p->pipeline, sch, sizeof sch);
        pipe_boundaries(&p->pipeline, g, bounds, sizeof bounds);
    }
    int ns = p->pipeline.stages > 0 ? p->pipeline.stages : 1;
    int nm = p->pipeline.stages > 0 ? p->pipeline.micro_batches : 1;
    printf("pipeline: %s, %.3f ms, %s; %d stage%s, %d micro-batch%s of %d sample%s a "
           "data-parallel rank, schedule %s, tensor %d x data %d a stage, recompute %s; %d "
           "candidates probed (short runs), %d simulated, %d left out%s, %.1f s\n",
           p->name, p->iter_s * 1e3, p->fits ? "fits" : "does not fit", ns, ns == 1 ? "" : "s",
           nm, nm == 1 ? "" : "es", p->micro_batch, p->micro_batch == 1 ? "" : "s", sch, p->tp,
           p->dp, pipe_rc[p->recompute], p->probed, p->tried, p->skipped,
           p->out_of_budget ? " (budget spent)" : "", p->seconds);
    if (p->pipeline.stages > 0) printf("pipeline: chunks start at operators %s\n", bounds);
}

static void pipe_json(json_t *j, const sf_search_pipe_plan *p, const sf_pipeline *best,
                      const sf_graph *g) {
    json_t *o = json_object();
    json_object_set_new(o, "present", json_boolean(p->present));
    if (p->present) {
        json_object_set_new(o, "strategy", json_string(p->name));
        sf_cli_json_set_real(o, "ms", p->iter_s * 1e3);
        json_object_set_new(o, "fits", json_boolean(p->fits));
        sf_cli_json_set_real(o, "peak_live_bytes", p->peak_bytes);
        json_object_set_new(o, "tp", json_integer(p->tp));
        json_object_set_new(o, "pp", json_integer(p->pp));
        json_object_set_new(o, "dp", json_integer(p->dp));
        json_object_set_new(o, "micro_batch", json_integer(p->micro_batch));
        json_object_set_new(o, "recompute", json_string(pipe_rc[p->recompute]));
    }
    json_object_set_new(o, "tried", json_integer(p->tried));
    json_object_set_new(o, "probed", json_integer(p->probed));
    json_object_set_new(o, "skipped", json_integer(p->skipped));
    json_object_set_new(o, "out_of_budget", json_boolean(p->out_of_budget));
    sf_cli_json_set_real(o, "seconds", p->seconds);
    json_object_set_new(j, "pipeline_pass", o);
    /* the best strategy's own pipeline, whoever found it */
    if (best) {
        json_t *b = json_object(), *f = json_array();
        char sch[32];
        json_object_set_new(b, "stages", json_integer(best->stages));
        json_object_set_new(b, "chunks", json_integer(best->chunks));
        json_object_set_new(b, "micro_batches", json_integer(best->micro_batches));
        json_object_set_new(b, "schedule", json_string(sf_pipe_schedule_str(best, sch, sizeof sch)));
        for (int c = 0; c < best->stages * best->chunks; c++)
            json_array_append_new(f, json_string(sf_graph_op(g, best->first[c])->name));
        json_object_set_new(b, "first", f);
        json_object_set_new(j, "best_pipeline", b);
    } else {
        json_object_set_new(j, "best_pipeline", json_null());
    }
}

int sf_cmd_search(int argc, char **argv) {
    const char *cmd = argv[0];
    search_opts o;
    memset(&o, 0, sizeof o);
    sf_sim_options_default(&o.sim);
    sf_cli_memory_default(&o.mem);
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
        if (sf_cli_str(&a, "--pipeline", NULL, &o.pipeline)) continue;
        if (sf_cli_str(&a, "--budget", NULL, &o.budget)) continue;
        if (sf_cli_str(&a, "--pipeline-budget", NULL, &o.pipe_budget)) continue;
        if (sf_cli_int(&a, "--iters", NULL, 1, (int64_t)1 << 40, &o.iters)) continue;
        if (sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &o.seed)) continue;
        if (sf_cli_str(&a, "--beta", NULL, &o.beta)) continue;
        if (sf_cli_str(&a, "--anneal", NULL, &o.anneal)) continue;
        if (sf_cli_flag(&a, "--no-delta", NULL, &o.no_delta)) continue;
        if (sf_cli_flag(&a, "--templates", NULL, &o.templates)) continue;
        if (sf_cli_flag(&a, "--reduce-splits", NULL, &o.reduce)) continue;
        if (sf_cli_sim_option(&a, &o.sim)) continue;
        if (sf_cli_memory_option(&a, &o.mem)) continue;
        if (sf_cli_dtype_option(&a, &o.dtype)) continue;
        if (sf_cli_optimizer_option(&a, &o.optimizer)) continue;
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
    double pipe_budget_s = 0;
    const char *durations[2] = {"--budget", "--pipeline-budget"}, *given[2] = {o.budget, o.pipe_budget};
    double *into[2] = {&budget_s, &pipe_budget_s};
    for (int k = 0; k < 2; k++)
        if (given[k] && parse_duration(given[k], into[k]) != 0)
            return sf_cli_usage_error(cmd,
                                      "%s wants a duration above 0 such as 30s, 2m or 500ms, "
                                      "not '%.64s'",
                                      durations[k], given[k]);
    double beta = 0;
    if (o.beta && parse_beta(o.beta, &beta) != 0)
        return sf_cli_usage_error(cmd,
                                  "--beta wants a number from 0 to 1e9 such as 50, 0.5 "
                                  "or 2e3, not '%.64s'",
                                  o.beta);
    double anneal = 0;
    if (o.anneal && parse_beta(o.anneal, &anneal) != 0)
        return sf_cli_usage_error(cmd,
                                  "--anneal wants a number from 0 to 1e9 such as 100 or 1, "
                                  "not '%.64s'",
                                  o.anneal);
    if (o.budget && o.iters) return sf_cli_usage_error(cmd, "give --budget or --iters, not both");
    int pipe_mode = SF_SEARCH_PIPE_AUTO;
    if (o.pipeline) {
        static const char *const modes[] = {"auto", "off", "on"};
        pipe_mode = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(o.pipeline, modes[i]) == 0) pipe_mode = i;
        if (pipe_mode < 0)
            return sf_cli_usage_error(cmd, "--pipeline must be auto, off or on, not '%.64s'",
                                      o.pipeline);
    }

    sf_error err = {0};
    /* the search takes its budget before it writes: a file that cannot be
     * written is said now, not after 30 s of work */
    const char *outs[] = {o.out, o.trace, o.svg};
    int rc = sf_cli_model_check(cmd, &o.model);
    if (rc == SF_EXIT_OK) rc = sf_cli_outputs_check(outs, 3);
    if (rc != SF_EXIT_OK) return rc;
    sf_machine *m = sf_machine_open(o.machine, &err);
    if (!m) return sf_cli_fail_err(&err);
    sf_graph *g = NULL;
    rc = sf_cli_model_open(cmd, &o.model, sf_machine_num_devices(m), &g);
    if (rc != SF_EXIT_OK) {
        sf_machine_free(m);
        return rc;
    }
    sf_cost_model *cm = NULL;
    rc = sf_cli_cost_model_open(m, o.costs, o.dtype, o.optimizer, &cm);
    if (rc != SF_EXIT_OK) {
        sf_graph_free(g);
        sf_machine_free(m);
        return rc;
    }
    sf_search_options so;
    sf_search_options_default(&so);
    so.run_optcnn = run_optcnn;
    so.run_mcmc = run_mcmc;
    so.pipeline = pipe_mode;
    so.pipeline_budget_s = pipe_budget_s;
    so.mcmc.seed = (uint64_t)o.seed;
    so.mcmc.iters = o.iters;
    so.mcmc.budget_s = o.iters ? 0 : budget_s;
    if (o.beta) so.mcmc.beta = beta;
    if (o.anneal) so.mcmc.anneal = anneal;
    so.mcmc.use_delta = !o.no_delta;
    so.mcmc.templates = o.templates;
    so.mcmc.reduce = o.reduce ? SF_OPT_IN_INNER : 0; /* everything the planner prices */
    so.mcmc.sim = o.sim;
    /* OptCNN bounds its memory by what --memory-headroom leaves (without the
     * timeline the simulator reads no headroom: the search's ranking stays) */
    so.mcmc.sim.memory_headroom = o.mem.memory_headroom;
    so.mcmc.progress = !o.json;
    sf_search_report rep;
    sf_strategy *best = sf_strategy_new(g);
    sf_sim *sim = NULL;
    sf_cli_outputs files = {0};
    if (!best) {
        rc = sf_cli_fail("out of memory");
        goto done;
    }
    if (sf_search_run(g, m, cm, &so, best, &rep, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    /* files first: a failure is one error line, not a report and then an error */
    sf_sim_result br;
    sf_sim_options bo = so.mcmc.sim; /* the best with its memory over the iteration */
    bo.memory_timeline = o.mem.memory_timeline;
    bo.memory_headroom = o.mem.memory_headroom;
    if (o.trace || o.svg) bo.every_replica = 1; /* pictures of every device */
    sim = sf_sim_new(g, m, cm, &bo, &err);
    if (!sim || sf_sim_run(sim, best, &br, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    /* all or none: a failure on one replaces none of the files there */
    if (o.trace) rc = sf_cli_outputs_add(&files, o.trace, sf_sim_trace_to_json(sim, &err), &err);
    if (rc == SF_EXIT_OK && o.svg)
        rc = sf_cli_outputs_add(&files, o.svg, sf_sim_to_svg(sim, &err), &err);
    if (rc == SF_EXIT_OK && o.out)
        rc = sf_cli_outputs_add(&files, o.out, sf_strategy_to_json_for(best, g, m, &err), &err);
    if (rc == SF_EXIT_OK) rc = sf_cli_outputs_write(&files);
    if (rc != SF_EXIT_OK) goto done;
    const sf_search_row *rows = rep.rows;
    double data_s = rows[SF_SEARCH_DATA].iter_s;
    int idle = sf_cli_idle_report(best, m, rows[rep.best].name);
    if (o.json) {
        json_t *j = json_object(), *b = json_object();
        if (!j || !b) {
            json_decref(j);
            json_decref(b);
            rc = sf_cli_print_json(NULL);
            goto done;
        }
        for (int i = SF_SEARCH_DATA; i <= SF_SEARCH_EXPERT; i++)
            if (rows[i].present) sf_cli_json_set_real(b, rows[i].name, rows[i].iter_s * 1e3);
        json_object_set_new(j, "model", json_string(sf_graph_name(g)));
        json_object_set_new(j, "machine", json_string(sf_machine_name(m)));
        json_object_set_new(j, "devices", json_integer(sf_machine_num_devices(m)));
        json_object_set_new(j, "sync", json_string(sf_sync_mode_name(o.sim.sync)));
        json_object_set_new(j, "sync_scheme", json_string(sf_sync_scheme_name(o.sim.scheme)));
        json_object_set_new(j, "segments", json_integer(o.sim.segments));
        json_object_set_new(j, "dtype", json_string(sf_dtype_name(o.dtype)));
        json_object_set_new(j, "optimizer", json_string(sf_optimizer_name(o.optimizer)));
        json_object_set_new(j, "baselines", b);
        json_object_set_new(j, "data_fits", json_boolean(rows[SF_SEARCH_DATA].fits));
        sf_cli_json_set_real(j, "data_peak_mem_bytes", rows[SF_SEARCH_DATA].peak_mem_bytes);
        if (rows[SF_SEARCH_SHARDED].present) { /* data parallelism did not fit */
            json_t *sh = json_object();
            json_object_set_new(sh, "strategy", json_string(rows[SF_SEARCH_SHARDED].name));
            sf_cli_json_set_real(sh, "ms", rows[SF_SEARCH_SHARDED].iter_s * 1e3);
            json_object_set_new(sh, "fits", json_boolean(rows[SF_SEARCH_SHARDED].fits));
            sf_cli_json_set_real(sh, "peak_mem_bytes", rows[SF_SEARCH_SHARDED].peak_mem_bytes);
            json_object_set_new(j, "sharded", sh);
        }
        if (run_optcnn) {
            sf_cli_json_set_real(j, "optcnn_ms", rows[SF_SEARCH_OPTCNN].iter_s * 1e3);
            sf_cli_json_set_real(j, "optcnn_cost_ms", rep.optcnn.cost_s * 1e3);
            json_object_set_new(j, "optcnn_exact", json_boolean(rep.optcnn.exact));
            json_object_set_new(j, "optcnn_nodes_left", json_integer(rep.optcnn.nodes_left));
            sf_cli_json_set_real(j, "optcnn_seconds", rep.optcnn.seconds);
            optcnn_json(j, &rep.optcnn);
        }
        if (run_mcmc) {
            sf_cli_json_set_real(j, "mcmc_ms", rows[SF_SEARCH_MCMC].iter_s * 1e3);
            json_object_set_new(j, "iterations", json_integer(rep.mcmc.iterations));
            json_object_set_new(j, "accepted", json_integer(rep.mcmc.accepted));
            json_object_set_new(j, "polish_moves", json_integer(rep.mcmc.polish_moves));
            json_object_set_new(j, "polish_improved", json_integer(rep.mcmc.polish_improved));
            json_object_set_new(j, "templates", json_integer(rep.mcmc.templates));
            json_object_set_new(j, "template_moves", json_integer(rep.mcmc.template_moves));
            json_object_set_new(j, "pipe_proposals", json_integer(rep.mcmc.pipe_proposals));
            json_object_set_new(j, "pipe_accepted", json_integer(rep.mcmc.pipe_accepted));
            sf_cli_json_set_real(j, "seconds", rep.mcmc.seconds);
            sf_cli_json_set_real(j, "sims_per_s", rep.mcmc.sims_per_s);
        } else {
            json_object_set_new(j, "iterations", json_integer(0));
            sf_cli_json_set_real(j, "seconds", rep.optcnn.seconds);
        }
        if (rep.pipe_ran) pipe_json(j, &rep.pipe, sf_strategy_pipeline(best), g);
        json_object_set_new(j, "best", json_string(rows[rep.best].name));
        sf_cli_json_set_real(j, "best_ms", br.iter_s * 1e3);
        sf_cli_json_set_real(j, "speedup_vs_data", data_s / br.iter_s);
        json_object_set_new(j, "best_fits", json_boolean(br.fits));
        sf_cli_json_set_real(j, "best_peak_mem_bytes", br.peak_mem_bytes);
        sf_cli_json_set_real(j, "best_peak_live_bytes", br.live_peak_bytes);
        sf_cli_json_set_real(j, "memory_headroom", bo.memory_headroom);
        json_object_set_new(j, "best_idle_devices", json_integer(idle));
        if (o.out) json_object_set_new(j, "strategy_file", json_string(o.out));
        rc = sf_cli_print_json(j);
        goto done;
    }
    {
        static const char *const headers[] = {"strategy", "iteration",   "speedup",
                                              "moved",    "peak memory", "fits"};
        sf_cli_table *t = sf_cli_table_new(6, headers, "lrrrrl");
        for (int i = 0; i < SF_SEARCH_ROWS; i++) {
            if (!rows[i].present) continue;
            char by[32], pk[32];
            sf_cli_table_cell(t, "%s%s", rows[i].name, i == rep.best ? " *" : "");
            sf_cli_table_cell(t, "%.3f ms", rows[i].iter_s * 1e3);
            sf_cli_table_cell(t, "%.2fx", data_s / rows[i].iter_s);
            sf_cli_table_cell(t, "%s", sf_fmt_bytes(rows[i].moved_bytes, by, sizeof by));
            sf_cli_table_cell(t, "%s", sf_fmt_bytes(rows[i].peak_mem_bytes, pk, sizeof pk));
            sf_cli_table_cell(t, "%s", rows[i].fits ? "yes" : "no");
        }
        /* the batch as simulate reports it (dimension 0 of the first input),
         * not read from operator 0, which a graph need not have */
        sf_graph_stats gs;
        sf_graph_stats_compute(g, &gs);
        printf("%s on %s (%d devices), batch %lld, sync %s/%s\n\n", sf_graph_name(g),
               sf_machine_name(m), sf_machine_num_devices(m), (long long)gs.batch,
               sf_sync_scheme_name(o.sim.scheme), sf_sync_mode_name(o.sim.sync));
        rc = sf_cli_table_print(t, stdout);
        sf_cli_table_free(t);
        printf("\n");
        if (run_optcnn)
            printf("optcnn: %.3f s, additive cost %.3f ms, %d of %d nodes left after "
                   "elimination (%s%s)\n",
                   rep.optcnn.seconds, rep.optcnn.cost_s * 1e3, rep.optcnn.nodes_left,
                   rep.optcnn.nodes_initial, rep.optcnn.exact ? "exact" : "not exact: ",
                   rep.optcnn.exact ? "" : rep.optcnn.method);
        if (run_optcnn) optcnn_memory_lines(&rep.optcnn);
        if (run_mcmc)
            printf("mcmc: %lld proposals (%lld accepted), %lld of them the polish's (%lld "
                   "improving), in %.1f s, %.0f simulations/s\n",
                   (long long)rep.mcmc.iterations, (long long)rep.mcmc.accepted,
                   (long long)rep.mcmc.polish_moves, (long long)rep.mcmc.polish_improved,
                   rep.mcmc.seconds, rep.mcmc.sims_per_s);
        if (run_mcmc && rep.mcmc.skipped_starts > 0)
            printf("mcmc: %d start%s left out: too large a task graph to simulate here\n",
                   rep.mcmc.skipped_starts, rep.mcmc.skipped_starts == 1 ? "" : "s");
        if (rep.pipe_ran) pipe_lines(&rep.pipe, g);
        printf("best: %s, %.3f ms, %.2fx over data parallelism%s%s\n", rows[rep.best].name,
               br.iter_s * 1e3, data_s / br.iter_s, o.out ? ", written to " : "",
               o.out ? o.out : "");
        if (!br.fits) report_miss(&br, m, &bo);
    }
done:
    if (rc == SF_EXIT_OK) sf_cli_cost_model_report(cm);
    sf_cli_outputs_free(&files);
    sf_strategy_free(best);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
