/*
 * cmd_profile.c - `soapflow profile`: measure, with the real CPU kernels on
 * this machine, every distinct task the search space of a model on a machine
 * can produce, and write them to a costs file that `simulate --costs` (and the
 * searches) read through the profiled cost model.
 *
 * The costs file is a cache as well as a result: when it exists it is read
 * first, and only keys it lacks are measured, so profiling a second model, a
 * larger machine of the same kind or the same model again costs only what is
 * new. The file is written as the run goes, atomically: after a new entry
 * once --save-every seconds (5) have passed since the last write, and at the
 * end. So a profile of a large model killed after a minute keeps all but its
 * last few seconds, and a rerun resumes where it stopped. SIGINT, SIGTERM and
 * SIGHUP do better: the run stops after the task it is measuring, writes the
 * file with every entry so far, and exits 1 saying so (a second signal ends
 * it at once, as main.c's handler does, removing a half-written temporary).
 * Either way the file is only ever replaced whole. Operators without a fast
 * kernel yet are skipped and named, since the profiled model will fall back to
 * the analytic model for them.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"

#define DEFAULT_MACHINE "cpu"
#define DEFAULT_SAVE_EVERY_S 5

static int usage(FILE *out) {
    fprintf(out,
            "usage: soapflow profile --model NAME|FILE [options]\n"
            "\n"
            "Measure the forward and backward time of every distinct task (operator, tile\n"
            "shape) that strategies of a model on a machine can produce, with the fast CPU\n"
            "kernels on one thread of this host, and write them to a costs file for\n"
            "'soapflow simulate --costs FILE'. Entries already in the file are reused.\n"
            "\n"
            "options:\n"
            "%s"
            "  --machine NAME|FILE    machine preset or machine JSON file whose device kind\n"
            "                         this host stands for (default: %s; see 'calibrate')\n"
            "                         NAME[N]: its first N devices, N at most one node's\n"
            "                         devices or whole nodes (p100-4x4[8]: two nodes)\n"
            "  -o, --out FILE         costs file to extend and write\n"
            "                         (default: costs-MODEL-MACHINE.json)\n"
            "  --reps N               timed runs per task; the median is kept (default: 10)\n"
            "  --warmup N             untimed runs before them (default: 2)\n"
            "  --max-devices N        profile configs of at most N parts (default: the\n"
            "                         machine's device count)\n"
            "  --save-every S         write the costs file after a new entry once S seconds\n"
            "                         have passed since the last write (default: %d; 0:\n"
            "                         after every entry), so an interrupted run keeps what\n"
            "                         it measured and a rerun resumes\n"
            "  --dtype fp32           the precision measured: the kernels run in fp32 only,\n"
            "                         so a costs file holds fp32 times and other dtypes are\n"
            "                         refused (docs/formats-costs.md)\n"
            "  --json                 print one JSON object: keys, measured, reused, skipped,\n"
            "                         too_large, failed, entries, seconds, out, skipped_ops\n"
            "  -h, --help             show this help\n"
            "\n"
            "The batch must be the one you will simulate, validate or train with: task\n"
            "shapes come from it. Without --batch every command takes 64 per device of its\n"
            "machine (train and validate: 64 a rank), so the same machine gives the same\n"
            "batch in all of them.\n"
            "\n"
            "example:\n"
            "  soapflow profile --model lenet5 --machine cpu --reps 5\n"
            "  soapflow simulate --model lenet5 --machine cpu --costs costs-lenet5-cpu.json\n",
            sf_cli_model_help, DEFAULT_MACHINE, DEFAULT_SAVE_EVERY_S);
    return SF_EXIT_OK;
}

typedef struct profile_opts {
    sf_cli_model_opts model;
    const char *machine, *out;
    int64_t reps, warmup, max_devices, save_every_s;
    int json;
    sf_dtype dtype;
} profile_opts;

static int parse(int argc, char **argv, profile_opts *o, const char **cmd) {
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    *cmd = a.cmd;
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return -1;
        if (sf_cli_model_option(&a, &o->model)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &o->machine)) continue;
        if (sf_cli_str(&a, "--out", "-o", &o->out)) continue;
        if (sf_cli_int(&a, "--reps", NULL, 1, 100000, &o->reps)) continue;
        if (sf_cli_int(&a, "--warmup", NULL, 0, 100000, &o->warmup)) continue;
        if (sf_cli_int(&a, "--max-devices", NULL, 1, SF_MAX_DEVICES, &o->max_devices)) continue;
        if (sf_cli_int(&a, "--save-every", NULL, 0, 86400, &o->save_every_s)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &o->json)) continue;
        if (sf_cli_dtype_option(&a, &o->dtype)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!o->model.model) return sf_cli_usage_error(a.cmd, "--model is required");
    /* the costs file holds what the kernels measure, and they are fp32 */
    if (o->dtype != SF_DTYPE_FP32)
        return sf_cli_usage_error(a.cmd,
                                  "--dtype %s: the kernels measured here run in fp32 only, so a "
                                  "costs file holds fp32 times; plan %s with the analytic model "
                                  "(simulate or search --dtype %s without --costs)",
                                  sf_dtype_name(o->dtype), sf_dtype_name(o->dtype),
                                  sf_dtype_name(o->dtype));
    return SF_EXIT_OK;
}

/* "costs-NAME-MACHINE.json" with anything but [A-Za-z0-9._-] made '_'. */
static void default_out(const char *model, const char *machine, char *buf, size_t n) {
    snprintf(buf, n, "costs-%s-%s.json", model, machine);
    for (char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') *p = '_';
}

static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return 1;
    }
    return errno != ENOENT; /* unreadable: let the loader report it */
}

/* "lstm (12), attention (4)": keys skipped for want of a kernel, by type. */
static void skipped_list(const sf_profile_report *r, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < SF_OP_COUNT && len < n; t++) {
        if (!r->skipped_by_type[t]) continue;
        int k = snprintf(buf + len, n - len, "%s%s (%d)", len ? ", " : "",
                         sf_op_type_name((sf_op_type)t), r->skipped_by_type[t]);
        if (k > 0) len += (size_t)k;
    }
}

static int print_json(const sf_profile_report *r, int entries, const char *out) {
    json_t *j = json_object(), *ops = json_object();
    if (!j || !ops) {
        json_decref(j);
        json_decref(ops);
        return sf_cli_print_json(NULL);
    }
    int bad = 0;
    for (int t = 0; t < SF_OP_COUNT; t++)
        if (r->skipped_by_type[t])
            bad |= json_object_set_new(ops, sf_op_type_name((sf_op_type)t),
                                       json_integer(r->skipped_by_type[t]));
    bad |= json_object_set_new(j, "keys", json_integer(r->keys));
    bad |= json_object_set_new(j, "measured", json_integer(r->measured));
    bad |= json_object_set_new(j, "reused", json_integer(r->reused));
    bad |= json_object_set_new(j, "skipped", json_integer(r->skipped));
    bad |= json_object_set_new(j, "too_large", json_integer(r->too_large));
    bad |= json_object_set_new(j, "failed", json_integer(r->failed));
    bad |= json_object_set_new(j, "entries", json_integer(entries));
    bad |= sf_cli_json_set_real(j, "seconds", r->seconds);
    bad |= json_object_set_new(j, "out", json_string(out));
    bad |= json_object_set_new(j, "skipped_ops", ops);
    return sf_cli_print_json_built(j, bad);
}

static int print_text(const sf_profile_report *r, int entries, const char *out, const char *model,
                      const char *machine) {
    char b1[32], b2[32];
    sf_cli_table *t = sf_cli_table_new(2, NULL, "ll");
    sf_cli_table_cell(t, "model");
    sf_cli_table_cell(t, "%s on %s", model, machine);
    sf_cli_table_cell(t, "tasks");
    sf_cli_table_cell(t, "%s distinct", sf_cli_fmt_count(r->keys, b1, sizeof b1));
    sf_cli_table_cell(t, "measured");
    sf_cli_table_cell(t, "%s", sf_cli_fmt_count(r->measured, b1, sizeof b1));
    sf_cli_table_cell(t, "reused");
    sf_cli_table_cell(t, "%s (already in the file)", sf_cli_fmt_count(r->reused, b1, sizeof b1));
    sf_cli_table_cell(t, "skipped");
    sf_cli_table_cell(t, "%s (no kernel %d, too large %s, failed %d)",
                      sf_cli_fmt_count(r->skipped, b1, sizeof b1),
                      r->skipped - r->too_large - r->failed,
                      sf_cli_fmt_count(r->too_large, b2, sizeof b2), r->failed);
    sf_cli_table_cell(t, "time");
    sf_cli_table_cell(t, "%.2f s", r->seconds);
    sf_cli_table_cell(t, "written");
    sf_cli_table_cell(t, "%s (%s entries)", out, sf_cli_fmt_count(entries, b1, sizeof b1));
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    return rc;
}

/* ---- saving as it goes ------------------------------------------------------ */

/* The signal that asked the run to stop (0: none), and the handlers it replaced. */
static volatile sig_atomic_t stop_signal;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP_SIGNALS ((int)(sizeof stop_signals / sizeof stop_signals[0]))
static struct sigaction saved_actions[N_STOP_SIGNALS];

/* The first signal asks the run to stop after its current task; the handler
 * that was there before (main.c's: remove a temporary, then die) takes any
 * second one, so a save that hangs can still be interrupted. */
static void on_stop(int sig) {
    stop_signal = sig;
    for (int i = 0; i < N_STOP_SIGNALS; i++)
        if (stop_signals[i] == sig) sigaction(sig, &saved_actions[i], NULL);
}

static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_STOP_SIGNALS; i++) {
        sigaction(stop_signals[i], NULL, &saved_actions[i]);
        /* a signal the shell ignores (nohup, a background job) stays ignored */
        if (saved_actions[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &sa, NULL);
    }
}

static void restore_stop_signals(void) {
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &saved_actions[i], NULL);
}

typedef struct saver {
    const char *out;
    double every_s, last_s; /* interval, time of the last write */
    int interrupted;        /* stopped by a signal: the run's end still saves */
} saver;

/* sf_profile_options.on_entry: write the file when it is due; stop on a signal. */
static sf_status save_as_we_go(sf_profile_db *db, int measured, void *arg, sf_error *err) {
    (void)measured;
    saver *sv = arg;
    if (stop_signal) {
        sv->interrupted = 1;
        return sf_error_set(err, SF_ERR_IO, "interrupted"); /* the caller words it */
    }
    double now = sf_now_s();
    if (now - sv->last_s < sv->every_s) return SF_OK;
    sf_status st = sf_profile_db_save_json(db, sv->out, err);
    sv->last_s = sf_now_s(); /* the interval counts from the end of a write */
    return st;
}

int sf_cmd_profile(int argc, char **argv) {
    profile_opts o;
    memset(&o, 0, sizeof o);
    o.warmup = -1; /* not given */
    o.save_every_s = DEFAULT_SAVE_EVERY_S;
    const char *cmd;
    int rc = parse(argc, argv, &o, &cmd);
    if (rc < 0) return usage(stdout);
    if (rc != SF_EXIT_OK) return rc;
    if (!o.machine) o.machine = DEFAULT_MACHINE;

    sf_error err = {0};
    sf_graph *g = NULL;
    sf_profile_db *db = NULL;
    sf_machine *m = sf_machine_open(o.machine, &err);
    if (!m) return sf_cli_fail_err(&err);
    rc = sf_cli_model_open(cmd, &o.model, sf_machine_num_devices(m), &g);
    if (rc != SF_EXIT_OK) goto done;

    char out_buf[512];
    const char *out = o.out;
    if (!out) {
        default_out(sf_graph_name(g), sf_machine_name(m), out_buf, sizeof out_buf);
        out = out_buf;
    }
    db = file_exists(out) ? sf_profile_db_load_json(out, &err) : sf_profile_db_new(NULL);
    if (!db) {
        rc = err.code ? sf_cli_fail_err(&err) : sf_cli_fail("out of memory");
        goto done;
    }
    /* measuring takes minutes: a file that cannot be written is said first */
    if (sf_write_file_check(out, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }

    /* the kernels are this host's CPU kernels, whatever the machine says */
    const char *kind = sf_machine_device_kind(m, 0)->name;
    if (strncmp(kind, "cpu", 3) != 0)
        SF_LOG_WARN_F("machine '%s' has '%s' devices, but the times are of this host's CPU "
                      "kernels (use the cpu preset or a 'soapflow calibrate' file)",
                      sf_machine_name(m), kind);
    sf_profile_options po;
    sf_profile_options_default(&po);
    if (o.reps) po.reps = (int)o.reps;
    if (o.warmup >= 0) po.warmup = (int)o.warmup;
    po.max_devices = (int)o.max_devices;
    po.progress = stderr;
    saver sv = {out, (double)o.save_every_s, sf_now_s(), 0};
    po.on_entry = save_as_we_go;
    po.on_entry_arg = &sv;
    sf_profile_report r;
    stop_signal = 0;
    catch_stop_signals();
    sf_status st = sf_profile_model(g, m, db, &po, &r, &err);
    int sig = stop_signal;
    /* whatever ended the run, the entries measured so far are kept: written
     * now, unless the error was the write itself */
    sf_error serr = {0};
    sf_status ss = sv.interrupted || st == SF_OK || err.code != SF_ERR_IO
                       ? sf_profile_db_save_json(db, out, &serr)
                       : st;
    restore_stop_signals();
    if (sv.interrupted) {
        const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
        rc = ss == SF_OK ? sf_cli_fail("profile: interrupted by %s after %d new entries; %s "
                                       "holds %d, run again to resume",
                                       name, r.measured, out, sf_profile_db_count(db))
                         : sf_cli_fail_err(&serr);
        goto done;
    }
    if (st != SF_OK || ss != SF_OK) {
        rc = sf_cli_fail_err(st != SF_OK ? &err : &serr);
        goto done;
    }
    char list[512];
    skipped_list(&r, list, sizeof list);
    if (list[0])
        SF_LOG_WARN_F("no fast kernel for these operators or tiles, not measured (the analytic "
                      "model stands in): %s",
                      list);
    if (r.too_large)
        SF_LOG_WARN_F("%d tasks need more memory than a device has and were not measured",
                      r.too_large);
    if (r.failed) SF_LOG_WARN_F("%d tasks failed, first: %s", r.failed, r.first_failure);
    SF_LOG_INFO_F("profiled %s on %s: %d measured, %d reused, %.2f s", sf_graph_name(g),
                  sf_machine_name(m), r.measured, r.reused, r.seconds);
    rc = o.json
             ? print_json(&r, sf_profile_db_count(db), out)
             : print_text(&r, sf_profile_db_count(db), out, sf_graph_name(g), sf_machine_name(m));
done:
    sf_profile_db_free(db);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
