/*
 * cmd_validate.c - `soapflow validate`: the simulator's predicted iteration
 * time beside the measured one, strategy by strategy, on the MPI ranks of
 * this host, and where the difference comes from.
 *
 *     mpirun -n 2 soapflow validate --model lenet5 --strategies data,model,owt,random:4,search
 *
 * What is predicted and measured, and the statistics of the fit, are the
 * library's (soapflow/validate.h, src/validate/validate.c): this file parses
 * the options, builds the list of strategies (random ones, the search's),
 * checks the output files, writes the traces and the plot and prints the
 * tables or the JSON.
 *
 * Every rank parses the same command line and derives the same list (random
 * strategies from one seeded generator, the search with an iteration budget
 * rather than a time budget), so that all of them run the same runtimes in
 * the same order. Checks that can fail run on every rank before any work and
 * the ranks agree on the outcome (sf_comm_agree); only rank 0 prints and
 * writes files, and the others' standard error goes to /dev/null, as in
 * `train`.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"
#include "soapflow/validate.h"

#define DEFAULT_BATCH 64
#define DEFAULT_ITERS 20
#define DEFAULT_WARMUP 2
#define DEFAULT_ROUNDS 4
#define DEFAULT_SEARCH_ITERS 1000
#define MAX_STRATEGIES 256
#define MAX_STEPS 100000

static int usage(FILE *out) {
    fprintf(out,
            "usage: mpirun -n P soapflow validate --model NAME|FILE --strategies LIST [options]\n"
            "\n"
            "For every strategy of LIST, the simulator's predicted iteration time beside the\n"
            "one measured by training on P MPI ranks (synthetic data, the real kernels,\n"
            "messages and all-reduces): the error of each prediction, the median |error|, the\n"
            "worst strategy and Kendall's tau between predicted and measured order, and, on\n"
            "each strategy's critical device, predicted and measured time by task kind.\n"
            "\n"
            "LIST is comma-separated: data, model, owt, expert, single, megatron[:T],\n"
            "megatron-sp[:T], fsdp, zero1-3 (each with :OPTIONS, see simulate --help),\n"
            "strategy files,\n"
            "random:K (K random valid strategies, from --seed), search (the MCMC search's\n"
            "best after --search-iters proposals) or search:N (after N proposals).\n"
            "\n"
            "options:\n"
            "  -m, --model NAME|FILE  a zoo model (see 'soapflow models'), or a model JSON file\n"
            "  -b, --batch N          global batch of a zoo model (default %d a rank: every\n"
            "                         command's default, 64 per device of the machine, so\n"
            "                         that profile and validate without --batch agree)\n"
            "%s"
            "  --strategies LIST      the strategies to compare (required)\n"
            "  --machine NAME|FILE    the machine the predictions are for; P devices (default:\n"
            "                         cpu[P]; 'soapflow calibrate' measures this host's)\n"
            "  --costs FILE           task times for the predictions ('soapflow profile'); a\n"
            "                         warning says when it misses tasks the strategies need\n"
            "  --sync overlap|bulk    when all-reduces start, in the simulator and the runtime\n"
            "                         alike (default overlap)\n"
            "  --sync-scheme S        ring (default), ps or hierarchical: how a weight's\n"
            "                         replicas combine gradients, in the simulator and the\n"
            "                         runtime (the same steps of the task graph)\n"
            "  --iters N              measured steps per strategy; the median is kept\n"
            "                         (default %d)\n"
            "  --rounds R             measure in R rounds over all strategies, each a share of\n"
            "                         the steps (default %d): load on a shared host spreads\n"
            "  --warmup N             untimed steps before each round's (default %d)\n"
            "  --seed S               random strategies, the search, weights, data (default 1)\n"
            "  --optimizer O          sgd (default), adam or adamw: what the runtime updates\n"
            "                         with (its default settings) and the predictions price\n"
            "  --search-iters N       proposals of 'search' (default %d)\n"
            "  --reduce-splits        random:K and search also split reduction dimensions\n"
            "                         (partial sums: row-parallel linears) and softmax_ce's\n"
            "                         classes (vocabulary-parallel cross-entropy)\n"
            "  --trace-dir DIR        write DIR/<i>-<name>.predicted.json and .measured.json,\n"
            "                         Chrome traces of each strategy side by side (Perfetto)\n"
            "  --svg FILE             scatter plot of predicted vs measured, with y = x\n"
            "  --json                 print one JSON object instead of the tables\n"
            "  -h, --help             this help\n"
            "\n"
            "error = predicted / measured - 1. Predicted transfer and sync are link time;\n"
            "measured ones are the time a rank waited for its messages and all-reduces; idle\n"
            "is the iteration less compute, update and copy. See docs/simulator.md.\n"
            "\n"
            "example:\n"
            "  mpirun -n 2 soapflow calibrate --out build/local.json\n"
            "  soapflow profile --model lenet5 --machine build/local.json --out build/costs.json\n"
            "  mpirun -n 2 soapflow validate --model lenet5 --machine build/local.json \\\n"
            "      --costs build/costs.json --strategies data,model,owt,random:8,search\n",
            DEFAULT_BATCH, sf_cli_model_size_help, DEFAULT_ITERS, DEFAULT_ROUNDS, DEFAULT_WARMUP,
            DEFAULT_SEARCH_ITERS);
    return SF_EXIT_OK;
}

typedef struct validate_opts {
    sf_cli_model_opts model;
    const char *machine, *costs, *strategies, *trace_dir, *svg;
    sf_sync_mode sync;
    sf_sync_scheme scheme;
    int64_t iters, warmup, rounds, seed, search_iters;
    int json, help, reduce;
    sf_optimizer_kind optimizer;
} validate_opts;

static int parse(int argc, char **argv, validate_opts *o) {
    memset(o, 0, sizeof *o);
    o->iters = DEFAULT_ITERS;
    o->warmup = DEFAULT_WARMUP;
    o->rounds = DEFAULT_ROUNDS;
    o->seed = 1;
    o->search_iters = DEFAULT_SEARCH_ITERS;
    o->sync = SF_SYNC_OVERLAP;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) {
            o->help = 1;
            return SF_EXIT_OK;
        }
        const char *sync = NULL;
        if (sf_cli_str(&a, "--sync", NULL, &sync)) {
            if (sync && sf_sync_mode_parse(sync, &o->sync) != 0)
                a.status =
                    sf_cli_usage_error(a.cmd, "--sync is overlap or bulk, got '%.64s'", sync);
            continue;
        }
        if (sf_cli_str(&a, "--sync-scheme", NULL, &sync)) {
            if (sync && sf_sync_scheme_parse(sync, &o->scheme) != 0)
                a.status = sf_cli_usage_error(
                    a.cmd, "--sync-scheme is ring, ps or hierarchical, got '%.64s'", sync);
            continue;
        }
        if (sf_cli_model_option(&a, &o->model) || sf_cli_str(&a, "--machine", NULL, &o->machine) ||
            sf_cli_str(&a, "--costs", NULL, &o->costs) ||
            sf_cli_str(&a, "--strategies", NULL, &o->strategies) ||
            sf_cli_str(&a, "--trace-dir", NULL, &o->trace_dir) ||
            sf_cli_str(&a, "--svg", NULL, &o->svg) ||
            sf_cli_int(&a, "--iters", NULL, 1, MAX_STEPS, &o->iters) ||
            sf_cli_int(&a, "--warmup", NULL, 0, MAX_STEPS, &o->warmup) ||
            sf_cli_int(&a, "--rounds", NULL, 1, MAX_STEPS, &o->rounds) ||
            sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &o->seed) ||
            sf_cli_int(&a, "--search-iters", NULL, 1, 100000000, &o->search_iters) ||
            sf_cli_flag(&a, "--json", NULL, &o->json) ||
            sf_cli_flag(&a, "--reduce-splits", NULL, &o->reduce) ||
            sf_cli_optimizer_option(&a, &o->optimizer))
            continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    /* everything the planner prices, as search --reduce-splits: the runtime
     * trains both levels (sf_op_dim_opt_in) */
    o->reduce = o->reduce ? SF_OPT_IN_INNER : 0;
    if (!o->model.model) return sf_cli_usage_error("validate", "--model is required");
    if (!o->strategies) return sf_cli_usage_error("validate", "--strategies is required");
    return sf_cli_model_check("validate", &o->model);
}

/* ---- the strategies ------------------------------------------------------------- */

/* What the tables show of a strategy beyond its row (soapflow/validate.h). */
typedef struct entry {
    char name[96];  /* as the tables show it */
    char file[100]; /* <i>-<name> with only [A-Za-z0-9._-]: trace file names */
    sf_strategy *s;
} entry;

typedef struct vstate {
    validate_opts o;
    sf_comm *comm;
    int rank, ranks;
    sf_graph *g;
    sf_machine *m;
    sf_cost_model *cm;
    sf_sim_options so;
    entry *e;
    sf_validate_row *rows; /* [MAX_STRATEGIES], beside e */
    int n;
    sf_validate_options vo;
    sf_progress prog;
    int prog_started;
    int64_t batch;
    int64_t missed, asked; /* profiled model: task times not in the costs file, of all */
} vstate;

static int add_entry(vstate *v, const char *name, sf_strategy *s) {
    if (v->n == MAX_STRATEGIES) {
        sf_strategy_free(s);
        return sf_cli_usage_error("validate", "at most %d strategies", MAX_STRATEGIES);
    }
    entry *e = &v->e[v->n];
    memset(e, 0, sizeof *e);
    memset(&v->rows[v->n], 0, sizeof v->rows[v->n]);
    v->rows[v->n].name = e->name;
    v->rows[v->n].strategy = s;
    v->n++;
    snprintf(e->name, sizeof e->name, "%s", name);
    char safe[80];
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < sizeof safe; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        safe[k++] = ok ? c : '_';
    }
    safe[k] = '\0';
    snprintf(e->file, sizeof e->file, "%d-%s", v->n, safe);
    e->s = s;
    return SF_EXIT_OK;
}

/* A strategy file's name in the tables: its base name less ".json". */
static void file_label(const char *path, char *buf, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len >= n) len = n - 1;
    memcpy(buf, base, len);
    buf[len] = '\0';
    if (len > 5 && strcmp(buf + len - 5, ".json") == 0) buf[len - 5] = '\0';
}

/* The MCMC search from data parallelism with an iteration budget: the same
 * strategy on every rank. */
static int add_search(vstate *v, int64_t iters, const char *label) {
    sf_error err = {0};
    sf_strategy *start = sf_strategy_new(v->g), *best = sf_strategy_new(v->g);
    if (!start || !best || sf_strategy_data(start, v->g, v->m) != SF_OK) {
        sf_strategy_free(start);
        sf_strategy_free(best);
        return sf_cli_fail("validate: out of memory");
    }
    sf_mcmc_options mo;
    sf_mcmc_options_default(&mo);
    mo.budget_s = 0;
    mo.iters = iters;
    mo.seed = (uint64_t)v->o.seed;
    mo.progress = 0;
    mo.sim = v->so;
    mo.reduce = v->o.reduce;
    const sf_strategy *starts[1] = {start};
    sf_mcmc_result mr;
    sf_status st = sf_mcmc_search(v->g, v->m, v->cm, starts, 1, &mo, best, &mr, &err);
    sf_strategy_free(start);
    if (st != SF_OK) {
        sf_strategy_free(best);
        return sf_cli_fail_err(&err);
    }
    return add_entry(v, label, best);
}

/* Whether the item at p (up to a comma) is a baseline option: KEY=VALUE of
 * letters, or sp. */
static int is_option(const char *p) {
    size_t n = strcspn(p, ",");
    if (n == 2 && strncmp(p, "sp", 2) == 0) return 1;
    const char *eq = memchr(p, '=', n);
    if (!eq || eq == p) return 0;
    for (const char *q = p; q < eq; q++)
        if (!((*q >= 'a' && *q <= 'z') || *q == '_')) return 0;
    return memchr(p, '/', n) == NULL;
}

/* The items of --strategies, in order. */
static int build_list(vstate *v) {
    const char *list = v->o.strategies;
    sf_rng rng;
    sf_rng_seed(&rng, (uint64_t)v->o.seed ^ 0x7a11da7eULL);
    int n_random = 0;
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        /* a baseline's options (megatron:tp=4,zero=1) are commas of its own */
        while (comma && memchr(p, ':', (size_t)(comma - p)) && strncmp(p, "random:", 7) != 0 &&
               is_option(comma + 1))
            comma = strchr(comma + 1, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[512];
        if (len == 0 || len >= sizeof item)
            return sf_cli_usage_error("validate", "--strategies: %s item in '%.64s'",
                                      len ? "an overlong" : "an empty", list);
        memcpy(item, p, len);
        item[len] = '\0';
        int64_t k = 0;
        int rc;
        if (strncmp(item, "random:", 7) == 0) {
            if (sf_cli_parse_int(item + 7, 1, MAX_STRATEGIES, &k) != 0)
                return sf_cli_usage_error("validate",
                                          "--strategies: random:K wants K in 1..%d, "
                                          "got '%.64s'",
                                          MAX_STRATEGIES, item);
            for (int64_t i = 0; i < k; i++) {
                sf_strategy *s = sf_strategy_new(v->g);
                if (!s) return sf_cli_fail("validate: out of memory");
                for (int op = 0; op < sf_graph_num_ops(v->g); op++)
                    sf_config_random_in(sf_graph_op(v->g, op), v->m, v->o.reduce, &rng,
                                        sf_strategy_config(s, op));
                sf_strategy_align_ties(s, v->g, v->m); /* a tied head follows its table */
                sf_error err = {0};
                if (sf_strategy_validate(s, v->g, v->m, &err) != SF_OK) {
                    sf_strategy_free(s);
                    return sf_cli_fail_err(&err);
                }
                char name[32];
                snprintf(name, sizeof name, "random%d", ++n_random);
                if ((rc = add_entry(v, name, s)) != SF_EXIT_OK) return rc;
            }
        } else if (strcmp(item, "search") == 0 || strncmp(item, "search:", 7) == 0) {
            k = v->o.search_iters;
            if (item[6] == ':' && sf_cli_parse_int(item + 7, 1, 100000000, &k) != 0)
                return sf_cli_usage_error("validate",
                                          "--strategies: search:N wants N >= 1, got "
                                          "'%.64s'",
                                          item);
            if ((rc = add_search(v, k, item)) != SF_EXIT_OK) return rc;
        } else {
            sf_strategy *s = NULL;
            if ((rc = sf_cli_strategy_open(item, v->g, v->m, &s)) != SF_EXIT_OK) return rc;
            char name[96];
            file_label(item, name, sizeof name);
            if ((rc = add_entry(v, name, s)) != SF_EXIT_OK) return rc;
        }
        if (!comma) break;
        p = comma + 1;
    }
    return SF_EXIT_OK;
}

/* ---- set-up ------------------------------------------------------------------------ */

/* Whether the trace folder can take the files: made when missing (rank 0). */
static int check_trace_dir(const vstate *v) {
    const char *dir = v->o.trace_dir;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0777) != 0)
            return sf_cli_fail("validate: --trace-dir %s: %s", dir, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        return sf_cli_fail("validate: --trace-dir %s: not a folder", dir);
    }
    sf_error err = {0};
    for (int i = 0; i < v->n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.predicted.json", dir, v->e[i].file);
        if (sf_write_file_check(path, &err) != SF_OK) return sf_cli_fail_err(&err);
        snprintf(path, sizeof path, "%s/%s.measured.json", dir, v->e[i].file);
        if (sf_write_file_check(path, &err) != SF_OK) return sf_cli_fail_err(&err);
    }
    return SF_EXIT_OK;
}

static int setup(vstate *v) {
    const validate_opts *o = &v->o;
    sf_cli_model_opts mo = o->model;
    /* default batch: 64 a rank, as profile and simulate give on this machine */
    int rc = sf_cli_model_open("validate", &mo, v->ranks, &v->g);
    if (rc != SF_EXIT_OK) return rc;
    sf_graph_stats gs;
    sf_graph_stats_compute(v->g, &gs);
    v->batch = gs.batch;
    v->m = sf_cli_rank_machine("validate", o->machine, v->ranks);
    if (!v->m) return SF_EXIT_FAIL;
    sf_error err = {0};
    if (sf_machine_num_devices(v->m) != v->ranks)
        return sf_cli_fail("validate: machine %s has %d devices, but there are %d ranks: run "
                           "'mpirun -n %d' or give a machine of %d devices",
                           sf_machine_name(v->m), sf_machine_num_devices(v->m), v->ranks,
                           sf_machine_num_devices(v->m), v->ranks);
    rc = sf_cli_cost_model_open(v->m, o->costs, SF_DTYPE_FP32, o->optimizer, &v->cm);
    if (rc != SF_EXIT_OK) return rc;
    sf_sim_options_default(&v->so);
    v->so.sync = o->sync;
    v->so.scheme = o->scheme;
    v->so.keep_schedule = 1;
    v->e = calloc(MAX_STRATEGIES, sizeof *v->e);
    v->rows = calloc(MAX_STRATEGIES, sizeof *v->rows);
    if (!v->e || !v->rows) return sf_cli_fail("validate: out of memory");
    rc = build_list(v);
    if (rc != SF_EXIT_OK) return rc;
    if (v->rank == 0 && o->svg && sf_write_file_check(o->svg, &err) != SF_OK)
        return sf_cli_fail_err(&err);
    if (v->rank == 0 && o->trace_dir) return check_trace_dir(v);
    return SF_EXIT_OK;
}

/* ---- predicted ----------------------------------------------------------------------- */

/* Rank 0 writes each strategy's predicted trace. */
static sf_status write_predicted(void *user, int i, const sf_sim *sim, sf_error *err) {
    const vstate *v = user;
    if (v->rank != 0 || !v->o.trace_dir) return SF_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.predicted.json", v->o.trace_dir, v->e[i].file);
    return sf_sim_write_trace(sim, path, err);
}

/* Every rank gathers the last step's events; rank 0 writes the measured trace. */
static sf_status write_measured(void *user, int i, sf_comm *c, const sf_runtime *rt,
                                sf_error *err) {
    const vstate *v = user;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.measured.json", v->o.trace_dir, v->e[i].file);
    return sf_runtime_write_measured_trace(c, rt, path, v->g, v->m, err);
}

static void step_done(void *user, int64_t done, int64_t total, const char *name) {
    vstate *v = user;
    if (v->rank != 0) return;
    if (!v->prog_started) {
        sf_progress_start(&v->prog, stderr, "validate", (double)total);
        v->prog_started = 1;
    }
    sf_progress_update(&v->prog, (double)done, name);
}

/* Simulate every strategy (the table's sync, then each sync model); rank 0
 * writes the predicted traces. The costs file's coverage is counted over the
 * table's simulations only (not the search's). */
static int predict(vstate *v) {
    sf_validate_options *vo = &v->vo;
    sf_validate_options_default(vo);
    vo->sim = v->so;
    vo->iters = v->o.iters;
    vo->warmup = v->o.warmup;
    vo->rounds = v->o.rounds;
    vo->seed = (uint64_t)v->o.seed;
    vo->optimizer = v->o.optimizer;
    vo->machine = v->m;
    vo->on_predicted = v->o.trace_dir ? write_predicted : NULL;
    vo->on_measured = v->o.trace_dir ? write_measured : NULL;
    vo->on_step = step_done;
    vo->user = v;
    sf_error err = {0};
    sf_profile_stats cov;
    if (sf_validate_predict(v->g, v->m, v->cm, v->rows, v->n, vo, &cov, &err) != SF_OK)
        return sf_cli_fail("validate: %s", err.msg);
    v->missed = cov.misses;
    v->asked = cov.hits + cov.misses;
    return SF_EXIT_OK;
}

/* One line when the costs file lacks task times the predictions needed. */
static void warn_costs(const vstate *v) {
    if (v->rank != 0 || !v->o.costs || v->missed == 0) return;
    char buf[256];
    sf_cost_profiled_misses(v->cm, buf, sizeof buf);
    SF_LOG_WARN_F("%s does not cover %lld of the %lld task times these strategies need "
                  "(analytic estimates for %s); run 'soapflow profile --model %s --batch %lld "
                  "--machine %s --out %s'",
                  v->o.costs, (long long)v->missed, (long long)v->asked, buf, v->o.model.model,
                  (long long)v->batch, sf_machine_name(v->m), v->o.costs);
}

/* One line when the ranks outnumber the host's cores but the machine does not
 * say its devices share them (runtime.cores_per_node, which calibrate writes):
 * the simulator then gives every device a core of its own, and ranks that
 * share one wait for each other's turn (docs/simulator.md, "How close the
 * simulator is"). */
static void warn_cores(const vstate *v) {
    int cores = sf_comm_shared_cores(v->comm);
    if (v->rank != 0 || cores == 0) return;
    int said = sf_machine_get_desc(v->m)->cores_per_node;
    if (said > 0 && said < sf_machine_get_desc(v->m)->devices_per_node) return;
    SF_LOG_WARN_F("%d ranks on %d cores, but machine '%s' gives every device a core of its own "
                  "(no runtime.cores_per_node): expect measured times well above the "
                  "predictions; a machine file from 'mpirun -n %d soapflow calibrate' says so",
                  v->ranks, cores, sf_machine_name(v->m), v->ranks);
}

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int print_json(const vstate *v, const sf_validate_summary *s) {
    json_t *j = json_object(), *arr = json_array();
    if (!j || !arr) {
        json_decref(j);
        json_decref(arr);
        return sf_cli_print_json(NULL);
    }
    int bad = 0;
    bad |= json_object_set_new(j, "model", json_string(sf_graph_name(v->g)));
    bad |= json_object_set_new(j, "machine", json_string(sf_machine_name(v->m)));
    bad |= json_object_set_new(j, "ranks", json_integer(v->ranks));
    bad |= json_object_set_new(j, "batch", json_integer(v->batch));
    bad |= json_object_set_new(j, "cost_model", json_string(sf_cost_name(v->cm)));
    bad |= json_object_set_new(j, "optimizer", json_string(sf_optimizer_name(v->o.optimizer)));
    bad |= json_object_set_new(j, "costs", v->o.costs ? json_string(v->o.costs) : json_null());
    bad |= json_object_set_new(j, "costs_missed_tasks", json_integer(v->missed));
    bad |= json_object_set_new(j, "sync", json_string(sf_sync_mode_name(v->o.sync)));
    bad |= json_object_set_new(j, "sync_scheme", json_string(sf_sync_scheme_name(v->o.scheme)));
    bad |= json_object_set_new(j, "iters", json_integer(v->o.iters));
    bad |= json_object_set_new(j, "warmup", json_integer(v->o.warmup));
    bad |= json_object_set_new(j, "rounds", json_integer(sf_validate_rounds(&v->vo)));
    bad |= json_object_set_new(j, "seed", json_integer(v->o.seed));
    for (int i = 0; i < v->n && !bad; i++) {
        const sf_validate_row *e = &v->rows[i];
        json_t *row = json_object(), *br = json_object();
        if (!row || !br) {
            json_decref(row);
            json_decref(br);
            bad = 1;
            break;
        }
        bad |= json_object_set_new(row, "index", json_integer(i + 1));
        bad |= json_object_set_new(row, "name", json_string(e->name));
        bad |= json_object_set_new(row, "predicted_ms", json_real(e->pred_s * 1e3));
        json_t *alt = json_object();
        for (int a = 0; a < v->vo.n_models && alt; a++) {
            char key[32];
            snprintf(key, sizeof key, "%s/%s", sf_sync_mode_name(v->vo.models[a].mode),
                     sf_sync_scheme_name(v->vo.models[a].scheme));
            bad |= json_object_set_new(alt, key, json_real(e->alt_s[a] * 1e3));
        }
        bad |= json_object_set_new(row, "predicted_ms_by_sync_model", alt);
        bad |= json_object_set_new(row, "measured_ms", json_real(e->meas_s * 1e3));
        bad |= json_object_set_new(row, "measured_min_ms", json_real(e->meas_min_s * 1e3));
        bad |= json_object_set_new(row, "error_pct", num_or_null(e->error * 100));
        bad |= json_object_set_new(row, "fits", json_boolean(e->fits));
        bad |= json_object_set_new(row, "critical_device", json_integer(e->crit));
        bad |= json_object_set_new(row, "measured_critical_device", json_integer(e->meas_crit));
        for (int k = 0; k < SF_VALIDATE_KIND_COUNT; k++)
            bad |= json_object_set_new(br, sf_validate_kind_name(k),
                                       json_pack("{s:f,s:f}", "predicted_ms", e->pred[k] * 1e3,
                                                 "measured_ms", e->meas[k] * 1e3));
        bad |= json_object_set_new(row, "breakdown", br);
        bad |= json_object_set_new(row, "largest_gap",
                                   json_string(sf_validate_kind_name(sf_validate_largest_gap(e))));
        bad |= json_array_append_new(arr, row);
    }
    bad |= json_object_set_new(j, "strategies", arr);
    bad |= json_object_set_new(j, "median_abs_error_pct", num_or_null(s->main.median_abs * 100));
    bad |=
        json_object_set_new(j, "worst",
                            json_pack("{s:s,s:o}", "name", v->rows[s->main.worst].name, "error_pct",
                                      num_or_null(v->rows[s->main.worst].error * 100)));
    bad |= json_object_set_new(j, "kendall_tau", num_or_null(s->main.tau));
    bad |= json_object_set_new(j, "fastest_steps",
                               json_pack("{s:o,s:o}", "median_abs_error_pct",
                                         num_or_null(s->fastest.median_abs * 100), "kendall_tau",
                                         num_or_null(s->fastest.tau)));
    json_t *models = json_object();
    for (int a = 0; a < v->vo.n_models && models; a++) {
        char key[32];
        snprintf(key, sizeof key, "%s/%s", sf_sync_mode_name(v->vo.models[a].mode),
                 sf_sync_scheme_name(v->vo.models[a].scheme));
        bad |= json_object_set_new(models, key,
                                   json_pack("{s:o,s:o}", "median_abs_error_pct",
                                             num_or_null(s->models[a].median_abs * 100),
                                             "kendall_tau", num_or_null(s->models[a].tau)));
    }
    bad |= json_object_set_new(j, "sync_models", models);
    return sf_cli_print_json_built(j, bad);
}

static void fmt_tau(double tau, char *buf, size_t n) {
    if (isfinite(tau))
        snprintf(buf, n, "%.2f", tau);
    else
        snprintf(buf, n, "undefined");
}

static int print_text(const vstate *v, const sf_validate_summary *s) {
    printf("%s on %d rank%s (%s), machine %s, batch %lld, %s costs%s%s, sync %s, optimizer %s\n",
           sf_graph_name(v->g), v->ranks, v->ranks > 1 ? "s" : "", sf_comm_kind(v->comm),
           sf_machine_name(v->m), (long long)v->batch, sf_cost_name(v->cm),
           v->o.costs ? " from " : "", v->o.costs ? v->o.costs : "", sf_sync_mode_name(v->o.sync),
           sf_optimizer_name(v->o.optimizer));
    printf("measured: median of %lld steps in %lld rounds over the strategies, each after %lld "
           "warm-up, synthetic data\n\n",
           (long long)v->o.iters, (long long)sf_validate_rounds(&v->vo), (long long)v->o.warmup);
    static const char *const h1[] = {"#", "strategy", "predicted ms", "measured ms", "error"};
    sf_cli_table *t = sf_cli_table_new(5, h1, "rlrrr");
    for (int i = 0; i < v->n; i++) {
        const sf_validate_row *e = &v->rows[i];
        sf_cli_table_cell(t, "%d", i + 1);
        sf_cli_table_cell(t, "%s%s", e->name, e->fits ? "" : " (does not fit)");
        sf_cli_table_cell(t, "%.3f", e->pred_s * 1e3);
        sf_cli_table_cell(t, "%.3f", e->meas_s * 1e3);
        sf_cli_table_cell(t, "%+.1f%%", e->error * 100);
    }
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;
    char tau[32];
    fmt_tau(s->main.tau, tau, sizeof tau);
    printf("\nmedian |error| %.1f%%, worst %s (%+.1f%%), Kendall tau %s over %d strateg%s\n",
           s->main.median_abs * 100, v->rows[s->main.worst].name,
           v->rows[s->main.worst].error * 100, tau, v->n, v->n == 1 ? "y" : "ies");
    fmt_tau(s->fastest.tau, tau, sizeof tau);
    printf("against each strategy's fastest step: median |error| %.1f%%, Kendall tau %s\n",
           s->fastest.median_abs * 100, tau);
    printf("the simulator's sync models against the same measurements:");
    for (int a = 0; a < v->vo.n_models; a++) {
        fmt_tau(s->models[a].tau, tau, sizeof tau);
        printf("%s %s/%s %.1f%% (tau %s)", a ? "," : "", sf_sync_mode_name(v->vo.models[a].mode),
               sf_sync_scheme_name(v->vo.models[a].scheme), s->models[a].median_abs * 100, tau);
    }
    printf("\n");

    printf("\non each strategy's critical device, predicted / measured ms:\n");
    static const char *const h2[] = {"#",    "strategy", "device", "compute", "transfer",
                                     "sync", "update",   "copy",   "idle",    "largest gap"};
    t = sf_cli_table_new(10, h2, "rlrrrrrrrl");
    for (int i = 0; i < v->n; i++) {
        const sf_validate_row *e = &v->rows[i];
        sf_cli_table_cell(t, "%d", i + 1);
        sf_cli_table_cell(t, "%s", e->name);
        sf_cli_table_cell(t, "%d", e->crit);
        for (int k = 0; k < SF_VALIDATE_KIND_COUNT; k++)
            sf_cli_table_cell(t, "%.2f / %.2f", e->pred[k] * 1e3, e->meas[k] * 1e3);
        int g = sf_validate_largest_gap(e);
        sf_cli_table_cell(t, "%s %+.2f ms", sf_validate_kind_name(g),
                          (e->meas[g] - e->pred[g]) * 1e3);
    }
    rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;
    if (v->o.trace_dir)
        printf("\ntraces        %s/<i>-<name>.{predicted,measured}.json\n", v->o.trace_dir);
    if (v->o.svg) printf("%splot          %s\n", v->o.trace_dir ? "" : "\n", v->o.svg);
    return SF_EXIT_OK;
}

/* ---- the plot ------------------------------------------------------------------------ */

/* Predicted (x) against measured (y) on the same linear axes from 0, the
 * y = x line and the band of errors within 30% (FlexFlow's claim); each point
 * numbered as in the table, its name and figures in a tooltip. */
static int write_svg(const vstate *v, const sf_validate_summary *s) {
    const double W = 640, H = 640, L = 70, R = 30, T = 50, B = 60;
    double hi = 0;
    for (int i = 0; i < v->n; i++) hi = fmax(hi, fmax(v->rows[i].pred_s, v->rows[i].meas_s));
    hi = hi > 0 ? hi * 1e3 * 1.08 : 1;
    /* a round tick step: 1, 2 or 5 times a power of ten, about 5 ticks */
    double step = pow(10, floor(log10(hi / 5)));
    if (hi / step > 25)
        step *= 5;
    else if (hi / step > 10)
        step *= 2;
    hi = ceil(hi / step) * step;
    double pw = W - L - R, ph = H - T - B;
#define X(ms) (L + (ms) / hi * pw)
#define Y(ms) (T + ph - (ms) / hi * ph)
    sf_strbuf b = {0};
    sf_strbuf_printf(&b,
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                     "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                     W, H, W, H);
    sf_strbuf_printf(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"14\">", L);
    sf_strbuf_put_xml(&b, sf_graph_name(v->g));
    sf_strbuf_printf(&b, " on %d ranks, ", v->ranks);
    sf_strbuf_put_xml(&b, sf_machine_name(v->m));
    sf_strbuf_printf(&b, ": median |error| %.1f%%, Kendall tau ", s->main.median_abs * 100);
    char tau[32];
    fmt_tau(s->main.tau, tau, sizeof tau);
    sf_strbuf_printf(&b, "%s</text>\n", tau);
    /* the band |predicted / measured - 1| <= 30%, and the line */
    sf_strbuf_printf(&b,
                     "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"#e8f0fb\"/>\n"
                     "<text x=\"%.0f\" y=\"40\" fill=\"#6b8fc7\" font-size=\"11\">shaded: "
                     "|error| &lt;= 30%%</text>\n",
                     X(0), Y(0), X(hi), Y(hi / 1.3), X(hi * 0.7), Y(hi), L);
    sf_strbuf_printf(&b,
                     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                     "stroke-dasharray=\"4 3\"/>\n",
                     X(0), Y(0), X(hi), Y(hi));
    sf_strbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#888\">y = x</text>\n", X(hi) - 40,
                     Y(hi) + 16);
    /* axes and ticks */
    sf_strbuf_printf(&b, "<path d=\"M%.1f,%.1f V%.1f H%.1f\" fill=\"none\" stroke=\"black\"/>\n",
                     X(0), Y(hi), Y(0), X(hi));
    for (double t = 0; t <= hi + step / 2; t += step) {
        sf_strbuf_printf(&b,
                         "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                         X(t), Y(0), X(t), Y(0) + 5, X(t), Y(0) + 18, t);
        sf_strbuf_printf(&b,
                         "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                         X(0) - 5, Y(t), X(0), Y(t), X(0) - 8, Y(t) + 4, t);
    }
    sf_strbuf_printf(&b,
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">predicted iteration, ms"
                     "</text>\n<text transform=\"translate(18 %.1f) rotate(-90)\" "
                     "text-anchor=\"middle\">measured iteration, ms</text>\n",
                     L + pw / 2, H - 18, T + ph / 2);
    for (int i = 0; i < v->n; i++) {
        const sf_validate_row *e = &v->rows[i];
        double x = X(e->pred_s * 1e3), y = Y(e->meas_s * 1e3);
        sf_strbuf_printf(&b, "<g><title>%d ", i + 1);
        sf_strbuf_put_xml(&b, e->name);
        sf_strbuf_printf(&b,
                         ": predicted %.3f ms, measured %.3f ms (%+.1f%%)</title>"
                         "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#1f77b4\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%d</text></g>\n",
                         e->pred_s * 1e3, e->meas_s * 1e3, e->error * 100, x, y, x + 5, y - 5,
                         i + 1);
    }
    sf_strbuf_puts(&b, "</svg>\n");
#undef X
#undef Y
    char *text = sf_strbuf_take(&b);
    if (!text) return sf_cli_fail("validate: out of memory building the plot");
    sf_error err = {0};
    sf_status st = sf_write_file_atomic(v->o.svg, text, strlen(text), &err);
    free(text);
    return st == SF_OK ? SF_EXIT_OK : sf_cli_fail_err(&err);
}

/* ---- the command ------------------------------------------------------------------- */

static void state_free(vstate *v) {
    for (int i = 0; v->e && i < v->n; i++) sf_strategy_free(v->e[i].s);
    free(v->e);
    free(v->rows);
    sf_cost_free(v->cm);
    sf_machine_free(v->m);
    sf_graph_free(v->g);
}

int sf_cmd_validate(int argc, char **argv) {
    vstate v;
    memset(&v, 0, sizeof v);
    /* ranks > 0 keep quiet from the start: a usage error is printed once */
    int quiet = sf_cli_launcher_rank() > 0;
    if (quiet && !freopen("/dev/null", "w", stderr)) return SF_EXIT_FAIL;
    int rc = parse(argc, argv, &v.o);
    if (v.o.help) return quiet ? SF_EXIT_OK : usage(stdout);
    if (rc != SF_EXIT_OK) return rc;
    sf_error err = {0};
    v.comm = sf_comm_mpi_new(&err);
    if (!v.comm) return sf_cli_fail_err(&err);
    v.rank = sf_comm_rank(v.comm);
    v.ranks = sf_comm_size(v.comm);
    sf_kernels_set_threads(1); /* one BLAS thread per rank */

    rc = setup(&v);
    if (rc == SF_EXIT_OK) rc = predict(&v);
    /* every rank agrees that set-up worked before the runtimes' collectives */
    sf_error agree = {0};
    if (rc != SF_EXIT_OK) sf_error_set(&agree, SF_ERR_INVALID, "set-up failed on this rank");
    if (sf_comm_agree(v.comm, rc != SF_EXIT_OK ? SF_ERR_INVALID : SF_OK, &agree) != SF_OK) {
        if (rc == SF_EXIT_OK && !quiet) sf_cli_fail_err(&agree);
        state_free(&v);
        sf_comm_free(v.comm);
        return rc != SF_EXIT_OK ? rc : SF_EXIT_FAIL;
    }
    warn_costs(&v);
    warn_cores(&v);

    sf_status st = sf_validate_measure(v.comm, v.g, v.rows, v.n, &v.vo, &err);
    if (v.prog_started) sf_progress_finish(&v.prog);
    if (st != SF_OK) {
        if (v.rank == 0) sf_cli_fail_err(&err);
        rc = SF_EXIT_FAIL;
    } else if (v.rank == 0) {
        sf_validate_summary s;
        if (sf_validate_summarize(v.rows, v.n, &v.vo, &s, &err) != SF_OK)
            rc = sf_cli_fail("validate: %s", err.msg);
        if (rc == SF_EXIT_OK && v.o.svg) rc = write_svg(&v, &s);
        if (rc == SF_EXIT_OK) rc = v.o.json ? print_json(&v, &s) : print_text(&v, &s);
    }
    state_free(&v);
    sf_comm_free(v.comm);
    return rc;
}
