/*
 * cmd_validate.c - `soapflow validate`: the simulator's predicted iteration
 * time beside the measured one, strategy by strategy, on the MPI ranks of
 * this host, and where the difference comes from.
 *
 *     mpirun -n 2 soapflow validate --model lenet5 --strategies data,model,owt,random:4,search
 *
 * FlexFlow claims its simulator predicts real iteration times within 30% and
 * keeps the order of strategies; this command checks soapflow's claim the
 * same way. For each strategy of the list it simulates one iteration (the
 * given machine and costs file, as `simulate` does) and trains on synthetic
 * batches with the runtime (as `train --data synthetic` does): the median of
 * --iters steps after --warmup untimed ones. Then the error of each
 * prediction, the median |error|, the worst strategy and Kendall's tau
 * between the predicted and the measured order. Tau, not a correlation of
 * times: a planner needs the order right, the times only as far as they
 * decide it.
 *
 * Where the error comes from: on each strategy's critical device (the one the
 * simulator keeps busiest), predicted and measured seconds by task kind:
 * compute (forward and backward kernels), transfer, sync, update, copy (of
 * tile regions and shards; predicted only on a machine with a copy bandwidth,
 * as calibrate writes) and idle (the iteration less compute, update and
 * copy). Predicted transfer and sync are
 * link time (sf_sim_kind_totals: the messages the device receives, the
 * all-reduce traffic it sends); measured ones are the time the rank waited
 * for its messages and all-reduces (sf_runtime_events), which is what a CPU
 * rank without an asynchronous progress thread spends on them. A compute gap
 * says the cost model is off; an idle or sync gap with compute right says the
 * scheduling or communication rules are.
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

#include <cblas.h>

#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define DEFAULT_BATCH 64
#define DEFAULT_ITERS 20
#define DEFAULT_WARMUP 2
#define DEFAULT_ROUNDS 4
#define DEFAULT_SEARCH_ITERS 1000
#define MAX_STRATEGIES 256
#define MAX_STEPS 100000

/* Task kinds of the breakdown: the simulator's five, then idle. */
enum {
    K_COMPUTE = SF_SIM_TOTAL_COMPUTE,
    K_TRANSFER = SF_SIM_TOTAL_TRANSFER,
    K_SYNC = SF_SIM_TOTAL_SYNC,
    K_UPDATE = SF_SIM_TOTAL_UPDATE,
    K_COPY = SF_SIM_TOTAL_COPY,
    K_IDLE,
    K_COUNT
};
static const char *const kind_name[K_COUNT] = {"compute", "transfer", "sync",
                                               "update",  "copy",     "idle"};

/* The simulator's sync models, each judged against the same measurements: which
 * one the runtime behaves like (docs/simulator.md). */
#define N_SYNC_MODELS 4
static const sf_sync_mode alt_mode[N_SYNC_MODELS] = {SF_SYNC_OVERLAP, SF_SYNC_BULK, SF_SYNC_OVERLAP,
                                                     SF_SYNC_BULK};
static const sf_sync_scheme alt_scheme[N_SYNC_MODELS] = {SF_SCHEME_RING, SF_SCHEME_RING,
                                                         SF_SCHEME_PS, SF_SCHEME_PS};
_Static_assert(SF_SIM_TOTAL_COUNT == 5 && (int)K_IDLE == (int)SF_SIM_TOTAL_COUNT, "kinds line up");

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
            "LIST is comma-separated: data, model, owt, expert, single, strategy files,\n"
            "random:K (K random valid strategies, from --seed), search (the MCMC search's\n"
            "best after --search-iters proposals) or search:N (after N proposals).\n"
            "\n"
            "options:\n"
            "  -m, --model NAME|FILE  a zoo model (see 'soapflow models'), or a model JSON file\n"
            "  -b, --batch N          global batch of a zoo model (default %d)\n"
            "%s"
            "  --strategies LIST      the strategies to compare (required)\n"
            "  --machine NAME|FILE    the machine the predictions are for; P devices (default:\n"
            "                         cpu[P]; 'soapflow calibrate' measures this host's)\n"
            "  --costs FILE           task times for the predictions ('soapflow profile'); a\n"
            "                         warning says when it misses tasks the strategies need\n"
            "  --sync overlap|bulk    when all-reduces start, in the simulator and the runtime\n"
            "                         alike (default overlap)\n"
            "  --iters N              measured steps per strategy; the median is kept\n"
            "                         (default %d)\n"
            "  --rounds R             measure in R rounds over all strategies, each a share of\n"
            "                         the steps (default %d): load on a shared host spreads\n"
            "  --warmup N             untimed steps before each round's (default %d)\n"
            "  --seed S               random strategies, the search, weights, data (default 1)\n"
            "  --search-iters N       proposals of 'search' (default %d)\n"
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
            "  soapflow profile --model lenet5 --batch 64 --machine build/local.json \\\n"
            "      --out build/costs.json\n"
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
    int64_t iters, warmup, rounds, seed, search_iters;
    int json, help;
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
            sf_cli_flag(&a, "--json", NULL, &o->json))
            continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!o->model.model) return sf_cli_usage_error("validate", "--model is required");
    if (!o->strategies) return sf_cli_usage_error("validate", "--strategies is required");
    return sf_cli_model_check("validate", &o->model);
}

/* ---- the strategies ------------------------------------------------------------- */

typedef struct entry {
    char name[96];  /* as the tables show it */
    char file[100]; /* <i>-<name> with only [A-Za-z0-9._-]: trace file names */
    sf_strategy *s;
    /* predicted */
    double pred_s;
    double alt_s[N_SYNC_MODELS]; /* predicted under each sync model (alt_mode, alt_scheme) */
    int crit;                    /* the device the simulator keeps busiest */
    double pred[K_COUNT];        /* seconds on crit, by kind */
    int fits;
    /* measured (crit's rank for the kinds) */
    double meas_s;     /* median step */
    double meas_min_s; /* fastest step */
    double meas[K_COUNT];
    int meas_crit; /* the rank with the most compute + update */
    double error;  /* pred_s / meas_s - 1 */
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
    int n;
    int64_t batch;
    int64_t missed, asked; /* profiled model: task times not in the costs file, of all */
} vstate;

static int add_entry(vstate *v, const char *name, sf_strategy *s) {
    if (v->n == MAX_STRATEGIES) {
        sf_strategy_free(s);
        return sf_cli_usage_error("validate", "at most %d strategies", MAX_STRATEGIES);
    }
    entry *e = &v->e[v->n++];
    memset(e, 0, sizeof *e);
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

/* The items of --strategies, in order. */
static int build_list(vstate *v) {
    const char *list = v->o.strategies;
    sf_rng rng;
    sf_rng_seed(&rng, (uint64_t)v->o.seed ^ 0x7a11da7eULL);
    int n_random = 0;
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
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
                    sf_config_random(sf_graph_op(v->g, op), v->m, &rng, sf_strategy_config(s, op));
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
    if (!mo.batch && !sf_cli_is_path(mo.model)) mo.batch = DEFAULT_BATCH; /* as train */
    int rc = sf_cli_model_open("validate", &mo, v->ranks, &v->g);
    if (rc != SF_EXIT_OK) return rc;
    sf_graph_stats gs;
    sf_graph_stats_compute(v->g, &gs);
    v->batch = gs.batch;
    char mname[64];
    snprintf(mname, sizeof mname, "cpu[%d]", v->ranks);
    sf_error err = {0};
    v->m = sf_machine_open(o->machine ? o->machine : mname, &err);
    if (!v->m) return sf_cli_fail_err(&err);
    if (sf_machine_num_devices(v->m) != v->ranks)
        return sf_cli_fail("validate: machine %s has %d devices, but there are %d ranks: run "
                           "'mpirun -n %d' or give a machine of %d devices",
                           sf_machine_name(v->m), sf_machine_num_devices(v->m), v->ranks,
                           sf_machine_num_devices(v->m), v->ranks);
    rc = sf_cli_cost_model_open(v->m, o->costs, &v->cm);
    if (rc != SF_EXIT_OK) return rc;
    sf_sim_options_default(&v->so);
    v->so.sync = o->sync;
    v->so.keep_schedule = 1;
    v->e = calloc(MAX_STRATEGIES, sizeof *v->e);
    if (!v->e) return sf_cli_fail("validate: out of memory");
    rc = build_list(v);
    if (rc != SF_EXIT_OK) return rc;
    if (v->rank == 0 && o->svg && sf_write_file_check(o->svg, &err) != SF_OK)
        return sf_cli_fail_err(&err);
    if (v->rank == 0 && o->trace_dir) return check_trace_dir(v);
    return SF_EXIT_OK;
}

/* ---- predicted ----------------------------------------------------------------------- */

/* Simulate every strategy; rank 0 writes the predicted traces. The costs
 * file's coverage is counted over these simulations only (not the search's). */
static int predict(vstate *v) {
    sf_error err = {0};
    sf_sim *sim = sf_sim_new(v->g, v->m, v->cm, &v->so, &err);
    if (!sim) return sf_cli_fail_err(&err);
    sf_cost_profiled_reset_stats(v->cm);
    int rc = SF_EXIT_OK;
    for (int i = 0; i < v->n && rc == SF_EXIT_OK; i++) {
        entry *e = &v->e[i];
        sf_sim_result r;
        if (sf_sim_run(sim, e->s, &r, &err) != SF_OK) {
            rc = sf_cli_fail("validate: %s: %s", e->name, err.msg);
            break;
        }
        e->pred_s = r.iter_s;
        e->fits = r.fits;
        e->crit = 0;
        for (int d = 1; d < r.n_devices; d++)
            if (r.device_busy_s[d] > r.device_busy_s[e->crit]) e->crit = d;
        if (sf_sim_kind_totals(sim, e->crit, e->pred, &err) != SF_OK) {
            rc = sf_cli_fail_err(&err);
            break;
        }
        e->pred[K_IDLE] =
            fmax(0, r.iter_s - e->pred[K_COMPUTE] - e->pred[K_UPDATE] - e->pred[K_COPY]);
        if (v->rank == 0 && v->o.trace_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.predicted.json", v->o.trace_dir, e->file);
            if (sf_sim_write_trace(sim, path, &err) != SF_OK) rc = sf_cli_fail_err(&err);
        }
    }
    sf_profile_stats ps;
    if (sf_cost_profiled_stats(v->cm, &ps) == SF_OK) {
        v->missed = ps.misses;
        v->asked = ps.hits + ps.misses;
    }
    sf_sim_free(sim);
    for (int a = 0; a < N_SYNC_MODELS && rc == SF_EXIT_OK; a++) {
        sf_sim_options so = v->so;
        so.keep_schedule = 0;
        so.sync = alt_mode[a];
        so.scheme = alt_scheme[a];
        sim = sf_sim_new(v->g, v->m, v->cm, &so, &err);
        if (!sim) return sf_cli_fail_err(&err);
        for (int i = 0; i < v->n && rc == SF_EXIT_OK; i++) {
            sf_sim_result r;
            if (sf_sim_run(sim, v->e[i].s, &r, &err) != SF_OK)
                rc = sf_cli_fail("validate: %s: %s", v->e[i].name, err.msg);
            else
                v->e[i].alt_s[a] = r.iter_s;
        }
        sf_sim_free(sim);
    }
    return rc;
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

/* ---- measured ------------------------------------------------------------------------- */

/* This rank's task time of the last step, by kind. */
static void step_kinds(const sf_runtime *rt, double out[SF_SIM_TOTAL_COUNT]) {
    const sf_rt_event *ev;
    int n = sf_runtime_events(rt, &ev);
    for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) out[k] = 0;
    for (int i = 0; i < n; i++) {
        double d = ev[i].t1_s - ev[i].t0_s;
        switch ((sf_rt_event_kind)ev[i].kind) {
        case SF_RT_FWD:
        case SF_RT_BWD: out[K_COMPUTE] += d; break;
        case SF_RT_XFER:
        case SF_RT_GRAD: out[K_TRANSFER] += d; break;
        case SF_RT_SYNC: out[K_SYNC] += d; break;
        case SF_RT_UPDATE: out[K_UPDATE] += d; break;
        case SF_RT_COPY: out[K_COPY] += d; break;
        default: break;
        }
    }
}

typedef struct measure_bufs {
    sf_batch_bufs *bb;
    float **w;
    double *times;   /* [n][iters] step seconds */
    double *kinds;   /* [n][SF_SIM_TOTAL_COUNT][iters] this rank's task time by kind */
    double *scratch; /* [iters] */
    double *all;     /* [ranks * SF_SIM_TOTAL_COUNT] */
} measure_bufs;

/* One round of strategy i: a fresh runtime from the initial weights, the
 * warm-up, then its timed steps lo .. hi - 1; the trace on the last timed
 * step of the last round. Collective. */
static sf_status run_round(vstate *v, int i, int64_t lo, int64_t hi, int last, measure_bufs *mb,
                           sf_progress *prog, int64_t *done, sf_error *err) {
    entry *e = &v->e[i];
    sf_runtime_options ro;
    sf_runtime_options_default(&ro);
    ro.bulk_sync = v->o.sync == SF_SYNC_BULK;
    ro.seed = (uint64_t)v->o.seed;
    sf_runtime *rt = sf_runtime_new(v->g, e->s, v->comm, &ro, err);
    if (!rt) return err->code ? err->code : SF_ERR_NOMEM;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)mb->w, err);
    int64_t it = v->o.iters, warm = v->o.warmup;
    double *times = mb->times + (size_t)i * (size_t)it;
    double *kinds = mb->kinds + (size_t)i * SF_SIM_TOTAL_COUNT * (size_t)it;
    for (int64_t k = -warm; k < hi - lo && st == SF_OK; k++) {
        sf_batch_synthetic(mb->bb, v->g, (uint64_t)v->o.seed, lo + k + warm);
        double t0 = sf_now_s();
        st = sf_runtime_step(rt, &mb->bb->batch, NULL, err);
        double t = sf_now_s() - t0;
        if (st != SF_OK) break;
        if (k >= 0) {
            int64_t j = lo + k;
            times[j] = t;
            double kind[SF_SIM_TOTAL_COUNT];
            step_kinds(rt, kind);
            for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) kinds[q * it + j] = kind[q];
        }
        if (v->o.trace_dir && last && k == hi - lo - 1) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.measured.json", v->o.trace_dir, e->file);
            st = sf_cli_write_measured_trace(v->comm, rt, path, v->g, v->m, err);
            st = sf_comm_agree(v->comm, st, err); /* only rank 0 writes */
        }
        if (v->rank == 0) sf_progress_update(prog, (double)++*done, e->name);
    }
    sf_runtime_free(rt);
    return st;
}

/* Strategy i's medians, the same on every rank: the step time is rank 0's
 * (steps end with a world-wide sum, so every rank's is within a message
 * latency of it), the kinds every rank's, through one sum. Collective. */
static sf_status finish_entry(vstate *v, int i, measure_bufs *mb, sf_error *err) {
    entry *e = &v->e[i];
    int64_t it = v->o.iters;
    const double *times = mb->times + (size_t)i * (size_t)it;
    const double *kinds = mb->kinds + (size_t)i * SF_SIM_TOTAL_COUNT * (size_t)it;
    size_t nr = (size_t)v->ranks * SF_SIM_TOTAL_COUNT;
    memset(mb->all, 0, (nr + 2) * sizeof *mb->all);
    for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) {
        memcpy(mb->scratch, kinds + q * it, (size_t)it * sizeof *mb->scratch);
        mb->all[v->rank * SF_SIM_TOTAL_COUNT + q] = sf_cli_median(mb->scratch, it);
    }
    if (v->rank == 0) {
        memcpy(mb->scratch, times, (size_t)it * sizeof *mb->scratch);
        mb->all[nr] = sf_cli_median(mb->scratch, it);
        mb->all[nr + 1] = mb->scratch[0]; /* sorted by sf_cli_median() */
    }
    sf_status st = sf_comm_sum(v->comm, mb->all, (int)nr + 2);
    if (st != SF_OK) return sf_error_set(err, st, "gathering the measured times failed");
    e->meas_s = mb->all[nr];
    e->meas_min_s = mb->all[nr + 1];
    const double *row = mb->all + e->crit * SF_SIM_TOTAL_COUNT;
    for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) e->meas[q] = row[q];
    e->meas[K_IDLE] = fmax(0, e->meas_s - e->meas[K_COMPUTE] - e->meas[K_UPDATE] - e->meas[K_COPY]);
    e->meas_crit = 0;
    for (int r = 1; r < v->ranks; r++) {
        const double *a = mb->all + r * SF_SIM_TOTAL_COUNT;
        const double *b = mb->all + e->meas_crit * SF_SIM_TOTAL_COUNT;
        if (a[K_COMPUTE] + a[K_UPDATE] > b[K_COMPUTE] + b[K_UPDATE]) e->meas_crit = r;
    }
    e->error = e->pred_s / e->meas_s - 1;
    return SF_OK;
}

static int64_t rounds_of(const vstate *v) {
    return v->o.rounds < v->o.iters ? v->o.rounds : v->o.iters;
}

/* Train with every strategy in rounds: each round runs every strategy in
 * turn, a share of its timed steps after its own warm-up, so that a burst of
 * load on a shared host spreads over all strategies instead of landing on
 * one and reordering them. */
static sf_status measure_all(vstate *v, sf_error *err) {
    measure_bufs mb = {0};
    size_t it = (size_t)v->o.iters, n = (size_t)v->n;
    mb.bb = sf_batch_bufs_new(v->g, err);
    mb.w = sf_params_new(v->g, (uint64_t)v->o.seed, 0, err);
    mb.times = malloc(n * it * sizeof *mb.times);
    mb.kinds = malloc(n * it * SF_SIM_TOTAL_COUNT * sizeof *mb.kinds);
    mb.scratch = malloc(it * sizeof *mb.scratch);
    mb.all = malloc(((size_t)v->ranks * SF_SIM_TOTAL_COUNT + 2) * sizeof *mb.all);
    sf_status st =
        mb.bb && mb.w && mb.times && mb.kinds && mb.scratch && mb.all ? SF_OK : SF_ERR_NOMEM;
    if (st != SF_OK && !err->msg[0]) sf_error_set(err, st, "out of memory");
    st = sf_comm_agree(v->comm, st, err);
    int64_t rounds = rounds_of(v);
    sf_progress prog;
    int64_t done = 0;
    if (v->rank == 0)
        sf_progress_start(&prog, stderr, "validate",
                          (double)v->n * (double)(rounds * v->o.warmup + v->o.iters));
    for (int64_t r = 0; r < rounds && st == SF_OK; r++) {
        int64_t lo = v->o.iters * r / rounds, hi = v->o.iters * (r + 1) / rounds;
        for (int i = 0; i < v->n && st == SF_OK; i++) {
            st = run_round(v, i, lo, hi, r == rounds - 1, &mb, &prog, &done, err);
            if (st != SF_OK && !strstr(err->msg, v->e[i].name)) {
                sf_error inner = *err;
                sf_error_set(err, st, "%s: %s", v->e[i].name, inner.msg);
            }
        }
    }
    for (int i = 0; i < v->n && st == SF_OK; i++) st = finish_entry(v, i, &mb, err);
    if (v->rank == 0) sf_progress_finish(&prog);
    sf_batch_bufs_free(mb.bb);
    if (mb.w) sf_params_free(v->g, mb.w);
    free(mb.times);
    free(mb.kinds);
    free(mb.scratch);
    free(mb.all);
    return st;
}

/* ---- the summary -------------------------------------------------------------------- */

/* Kendall's tau-b between two orders of n values (ties in either count as
 * neither concordant nor discordant); NaN for fewer than two, or when one
 * side is all ties. */
static double kendall_tau(const double *x, const double *y, int n) {
    double conc = 0, disc = 0, tx = 0, ty = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            double a = x[i] - x[j], b = y[i] - y[j];
            if (a == 0 && b == 0) continue;
            if (a == 0) {
                tx++;
            } else if (b == 0) {
                ty++;
            } else if ((a > 0) == (b > 0)) {
                conc++;
            } else {
                disc++;
            }
        }
    }
    double d = sqrt((conc + disc + tx) * (conc + disc + ty));
    return d > 0 ? (conc - disc) / d : NAN;
}

typedef struct fit {
    double median_abs; /* median |error| */
    int worst;         /* entry of the largest |error| */
    double tau;
} fit;

typedef struct summary {
    fit main;               /* the predictions of the table (--sync, ring) */
    fit fastest;            /* the same against each strategy's fastest step */
    fit alt[N_SYNC_MODELS]; /* under each sync model */
} summary;

/* How predictions (alt < 0: the table's, else alt_s[alt]) fit the measurements
 * (the median steps, or the fastest ones). */
static int fit_of(const vstate *v, int alt, int fastest, fit *f) {
    double *abs_err = malloc((size_t)v->n * sizeof *abs_err);
    double *p = malloc((size_t)v->n * sizeof *p), *m = malloc((size_t)v->n * sizeof *m);
    if (!abs_err || !p || !m) {
        free(abs_err);
        free(p);
        free(m);
        return sf_cli_fail("validate: out of memory");
    }
    f->worst = 0;
    for (int i = 0; i < v->n; i++) {
        p[i] = alt < 0 ? v->e[i].pred_s : v->e[i].alt_s[alt];
        m[i] = fastest ? v->e[i].meas_min_s : v->e[i].meas_s;
        abs_err[i] = fabs(p[i] / m[i] - 1);
        if (abs_err[i] > abs_err[f->worst]) f->worst = i;
    }
    f->tau = kendall_tau(p, m, v->n);
    f->median_abs = sf_cli_median(abs_err, v->n);
    free(abs_err);
    free(p);
    free(m);
    return SF_EXIT_OK;
}

static int summarize(const vstate *v, summary *s) {
    int rc = fit_of(v, -1, 0, &s->main);
    if (rc == SF_EXIT_OK) rc = fit_of(v, -1, 1, &s->fastest);
    for (int a = 0; a < N_SYNC_MODELS && rc == SF_EXIT_OK; a++) rc = fit_of(v, a, 0, &s->alt[a]);
    return rc;
}

/* The kind whose measured time is furthest from its prediction. */
static int largest_gap(const entry *e) {
    int best = 0;
    for (int k = 1; k < K_COUNT; k++)
        if (fabs(e->meas[k] - e->pred[k]) > fabs(e->meas[best] - e->pred[best])) best = k;
    return best;
}

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int print_json(const vstate *v, const summary *s) {
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
    bad |= json_object_set_new(j, "costs", v->o.costs ? json_string(v->o.costs) : json_null());
    bad |= json_object_set_new(j, "costs_missed_tasks", json_integer(v->missed));
    bad |= json_object_set_new(j, "sync", json_string(sf_sync_mode_name(v->o.sync)));
    bad |= json_object_set_new(j, "iters", json_integer(v->o.iters));
    bad |= json_object_set_new(j, "warmup", json_integer(v->o.warmup));
    bad |= json_object_set_new(j, "rounds", json_integer(rounds_of(v)));
    bad |= json_object_set_new(j, "seed", json_integer(v->o.seed));
    for (int i = 0; i < v->n && !bad; i++) {
        const entry *e = &v->e[i];
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
        for (int a = 0; a < N_SYNC_MODELS && alt; a++) {
            char key[32];
            snprintf(key, sizeof key, "%s/%s", sf_sync_mode_name(alt_mode[a]),
                     sf_sync_scheme_name(alt_scheme[a]));
            bad |= json_object_set_new(alt, key, json_real(e->alt_s[a] * 1e3));
        }
        bad |= json_object_set_new(row, "predicted_ms_by_sync_model", alt);
        bad |= json_object_set_new(row, "measured_ms", json_real(e->meas_s * 1e3));
        bad |= json_object_set_new(row, "measured_min_ms", json_real(e->meas_min_s * 1e3));
        bad |= json_object_set_new(row, "error_pct", num_or_null(e->error * 100));
        bad |= json_object_set_new(row, "fits", json_boolean(e->fits));
        bad |= json_object_set_new(row, "critical_device", json_integer(e->crit));
        bad |= json_object_set_new(row, "measured_critical_device", json_integer(e->meas_crit));
        for (int k = 0; k < K_COUNT; k++)
            bad |= json_object_set_new(br, kind_name[k],
                                       json_pack("{s:f,s:f}", "predicted_ms", e->pred[k] * 1e3,
                                                 "measured_ms", e->meas[k] * 1e3));
        bad |= json_object_set_new(row, "breakdown", br);
        bad |= json_object_set_new(row, "largest_gap", json_string(kind_name[largest_gap(e)]));
        bad |= json_array_append_new(arr, row);
    }
    bad |= json_object_set_new(j, "strategies", arr);
    bad |= json_object_set_new(j, "median_abs_error_pct", num_or_null(s->main.median_abs * 100));
    bad |= json_object_set_new(j, "worst",
                               json_pack("{s:s,s:o}", "name", v->e[s->main.worst].name, "error_pct",
                                         num_or_null(v->e[s->main.worst].error * 100)));
    bad |= json_object_set_new(j, "kendall_tau", num_or_null(s->main.tau));
    bad |= json_object_set_new(j, "fastest_steps",
                               json_pack("{s:o,s:o}", "median_abs_error_pct",
                                         num_or_null(s->fastest.median_abs * 100), "kendall_tau",
                                         num_or_null(s->fastest.tau)));
    json_t *models = json_object();
    for (int a = 0; a < N_SYNC_MODELS && models; a++) {
        char key[32];
        snprintf(key, sizeof key, "%s/%s", sf_sync_mode_name(alt_mode[a]),
                 sf_sync_scheme_name(alt_scheme[a]));
        bad |= json_object_set_new(models, key,
                                   json_pack("{s:o,s:o}", "median_abs_error_pct",
                                             num_or_null(s->alt[a].median_abs * 100), "kendall_tau",
                                             num_or_null(s->alt[a].tau)));
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

static int print_text(const vstate *v, const summary *s) {
    printf("%s on %d rank%s (%s), machine %s, batch %lld, %s costs%s%s, sync %s\n",
           sf_graph_name(v->g), v->ranks, v->ranks > 1 ? "s" : "", sf_comm_kind(v->comm),
           sf_machine_name(v->m), (long long)v->batch, sf_cost_name(v->cm),
           v->o.costs ? " from " : "", v->o.costs ? v->o.costs : "", sf_sync_mode_name(v->o.sync));
    printf("measured: median of %lld steps in %lld rounds over the strategies, each after %lld "
           "warm-up, synthetic data\n\n",
           (long long)v->o.iters, (long long)rounds_of(v), (long long)v->o.warmup);
    static const char *const h1[] = {"#", "strategy", "predicted ms", "measured ms", "error"};
    sf_cli_table *t = sf_cli_table_new(5, h1, "rlrrr");
    for (int i = 0; i < v->n; i++) {
        const entry *e = &v->e[i];
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
           s->main.median_abs * 100, v->e[s->main.worst].name, v->e[s->main.worst].error * 100, tau,
           v->n, v->n == 1 ? "y" : "ies");
    fmt_tau(s->fastest.tau, tau, sizeof tau);
    printf("against each strategy's fastest step: median |error| %.1f%%, Kendall tau %s\n",
           s->fastest.median_abs * 100, tau);
    printf("the simulator's sync models against the same measurements:");
    for (int a = 0; a < N_SYNC_MODELS; a++) {
        fmt_tau(s->alt[a].tau, tau, sizeof tau);
        printf("%s %s/%s %.1f%% (tau %s)", a ? "," : "", sf_sync_mode_name(alt_mode[a]),
               sf_sync_scheme_name(alt_scheme[a]), s->alt[a].median_abs * 100, tau);
    }
    printf("\n");

    printf("\non each strategy's critical device, predicted / measured ms:\n");
    static const char *const h2[] = {"#",    "strategy", "device", "compute", "transfer",
                                     "sync", "update",   "copy",   "idle",    "largest gap"};
    t = sf_cli_table_new(10, h2, "rlrrrrrrrl");
    for (int i = 0; i < v->n; i++) {
        const entry *e = &v->e[i];
        sf_cli_table_cell(t, "%d", i + 1);
        sf_cli_table_cell(t, "%s", e->name);
        sf_cli_table_cell(t, "%d", e->crit);
        for (int k = 0; k < K_COUNT; k++)
            sf_cli_table_cell(t, "%.2f / %.2f", e->pred[k] * 1e3, e->meas[k] * 1e3);
        int g = largest_gap(e);
        sf_cli_table_cell(t, "%s %+.2f ms", kind_name[g], (e->meas[g] - e->pred[g]) * 1e3);
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
static int write_svg(const vstate *v, const summary *s) {
    const double W = 640, H = 640, L = 70, R = 30, T = 50, B = 60;
    double hi = 0;
    for (int i = 0; i < v->n; i++) hi = fmax(hi, fmax(v->e[i].pred_s, v->e[i].meas_s));
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
        const entry *e = &v->e[i];
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
    openblas_set_num_threads(1); /* one BLAS thread per rank */

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

    sf_status st = measure_all(&v, &err);
    if (st != SF_OK) {
        if (v.rank == 0) sf_cli_fail_err(&err);
        rc = SF_EXIT_FAIL;
    } else if (v.rank == 0) {
        summary s = {0};
        rc = summarize(&v, &s);
        if (rc == SF_EXIT_OK && v.o.svg) rc = write_svg(&v, &s);
        if (rc == SF_EXIT_OK) rc = v.o.json ? print_json(&v, &s) : print_text(&v, &s);
    }
    state_free(&v);
    sf_comm_free(v.comm);
    return rc;
}
