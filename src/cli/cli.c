/*
 * cli.c - the helpers every subcommand uses: error lines, the argv walker,
 * the text table, JSON printing and number formats (see cli.h).
 *
 * The walker is hand-written rather than getopt_long because getopt keeps
 * global state, permutes argv, prints its own messages in its own words and
 * knows nothing of range-checked integers; ours reports every mistake as one
 * "soapflow: <cmd>: ..." line with a pointer to --help, and the matchers read
 * like the option list they implement.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/io.h"

/* ---- errors ------------------------------------------------------------ */

/* Messages reach the user as exactly one line: a library message that holds
 * a newline (it should not) is folded rather than split, and control
 * characters quoted from an input file are shown as \xNN (sf_fputs_line). */
static void put_line(const char *prefix, const char *msg, const char *suffix) {
    fputs("soapflow: ", stderr);
    fputs(prefix, stderr);
    sf_fputs_line(msg, stderr);
    fputs(suffix, stderr);
    fputc('\n', stderr);
}

int sf_cli_fail(const char *fmt, ...) {
    char buf[2 * SF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put_line("", buf, "");
    return SF_EXIT_FAIL;
}

int sf_cli_fail_err(const sf_error *err) {
    if (!err || !err->msg[0])
        return sf_cli_fail("%s", sf_status_str(err ? err->code : SF_ERR_INTERNAL));
    return sf_cli_fail("%s", err->msg);
}

int sf_cli_usage_error(const char *cmd, const char *fmt, ...) {
    char buf[SF_ERRMSG_MAX], prefix[96], hint[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (cmd) {
        snprintf(prefix, sizeof prefix, "%s: ", cmd);
        snprintf(hint, sizeof hint, " (try 'soapflow %s --help')", cmd);
    } else {
        prefix[0] = '\0';
        snprintf(hint, sizeof hint, " (try 'soapflow --help')");
    }
    put_line(prefix, buf, hint);
    return SF_EXIT_USAGE;
}

/* ---- output files ------------------------------------------------------ */

int sf_cli_outputs_check(const char *const *paths, int n) {
    for (int i = 0; i < n; i++) {
        sf_error err = {0};
        if (paths[i] && sf_write_file_check(paths[i], &err) != SF_OK) return sf_cli_fail_err(&err);
    }
    return SF_EXIT_OK;
}

int sf_cli_outputs_add(sf_cli_outputs *o, const char *path, char *text, const sf_error *err) {
    if (!text) {
        const char *msg = err && err->msg[0] ? err->msg : sf_status_str(err ? err->code : 0);
        return sf_cli_fail("%s: %s", path, msg);
    }
    if (o->n == SF_CLI_MAX_OUTPUTS) {
        free(text);
        return sf_cli_fail("%s: more than %d output files", path, SF_CLI_MAX_OUTPUTS);
    }
    o->path[o->n] = path;
    o->text[o->n++] = text;
    return SF_EXIT_OK;
}

int sf_cli_outputs_write(sf_cli_outputs *o) {
    _Static_assert(SF_CLI_MAX_OUTPUTS <= SF_WRITE_FILES_MAX, "one group of writes");
    sf_write_item items[SF_CLI_MAX_OUTPUTS];
    for (int i = 0; i < o->n; i++)
        items[i] = (sf_write_item){o->path[i], o->text[i], strlen(o->text[i])};
    sf_error err = {0};
    sf_status st = o->n ? sf_write_files_atomic(items, o->n, &err) : SF_OK;
    sf_cli_outputs_free(o);
    return st == SF_OK ? SF_EXIT_OK : sf_cli_fail_err(&err);
}

void sf_cli_outputs_free(sf_cli_outputs *o) {
    for (int i = 0; i < o->n; i++) free(o->text[i]);
    o->n = 0;
}

/* ---- the argv walker --------------------------------------------------- */

void sf_cli_args_init(sf_cli_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->argc = argc;
    a->argv = argv;
    a->next = 1;
    a->cmd = argc > 0 ? argv[0] : "soapflow";
}

/* -v once: info; twice (or -vv): debug; -q: errors only. Process-wide, as
 * the log level is. */
static int global_option(const char *arg) {
    if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
        sf_log_set_level(sf_log_get_level() < SF_LOG_INFO ? SF_LOG_INFO : SF_LOG_DEBUG);
        return 1;
    }
    if (strcmp(arg, "-vv") == 0) {
        sf_log_set_level(SF_LOG_DEBUG);
        return 1;
    }
    if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
        sf_log_set_level(SF_LOG_ERROR);
        return 1;
    }
    return 0;
}

int sf_cli_next(sf_cli_args *a) {
    for (;;) {
        if (a->status || a->next >= a->argc) return 0;
        const char *arg = a->argv[a->next++];
        a->arg = arg;
        a->value = NULL;
        a->name_len = strlen(arg);
        a->positional = a->after_dashes || arg[0] != '-' || arg[1] == '\0';
        if (a->positional) return 1;
        if (strcmp(arg, "--") == 0) {
            a->after_dashes = 1;
            continue;
        }
        if (global_option(arg)) continue;
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (eq) {
            a->value = eq + 1;
            a->name_len = (size_t)(eq - arg);
        }
        return 1;
    }
}

static int matches(const sf_cli_args *a, const char *long_name, const char *short_name) {
    if (a->positional || a->status) return 0;
    if (long_name && strlen(long_name) == a->name_len &&
        strncmp(a->arg, long_name, a->name_len) == 0)
        return 1;
    return short_name && !a->value && strcmp(a->arg, short_name) == 0;
}

/* The option name as the user wrote it, without "=value". */
static const char *opt_name(const sf_cli_args *a, char *buf, size_t n) {
    size_t len = a->name_len < n - 1 ? a->name_len : n - 1;
    memcpy(buf, a->arg, len);
    buf[len] = '\0';
    return buf;
}

int sf_cli_help(sf_cli_args *a) {
    int dummy;
    return sf_cli_flag(a, "--help", "-h", &dummy) && !a->status;
}

int sf_cli_flag(sf_cli_args *a, const char *long_name, const char *short_name, int *out) {
    if (!matches(a, long_name, short_name)) return 0;
    if (a->value) {
        char name[64];
        a->status = sf_cli_usage_error(a->cmd, "option '%s' takes no value",
                                       opt_name(a, name, sizeof name));
        return 1;
    }
    *out = 1;
    return 1;
}

/* The value of the current option: after '=' or the next argument. A next
 * argument that looks like a long option is refused, so that a forgotten
 * value ("--dot --json") does not become a file named "--json"; such a
 * value can still be given as "--dot=--json". */
static const char *take_value(sf_cli_args *a) {
    char name[64];
    if (a->value) return a->value;
    if (a->next < a->argc && strncmp(a->argv[a->next], "--", 2) != 0) return a->argv[a->next++];
    a->status =
        sf_cli_usage_error(a->cmd, "option '%s' needs a value", opt_name(a, name, sizeof name));
    return NULL;
}

int sf_cli_str(sf_cli_args *a, const char *long_name, const char *short_name, const char **out) {
    if (!matches(a, long_name, short_name)) return 0;
    const char *v = take_value(a);
    if (!v) return 1;
    if (!v[0]) {
        char name[64];
        a->status = sf_cli_usage_error(a->cmd, "option '%s' needs a non-empty value",
                                       opt_name(a, name, sizeof name));
        return 1;
    }
    *out = v;
    return 1;
}

int sf_cli_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') return -1;
    if ((int64_t)v < lo || (int64_t)v > hi) return -1;
    *out = (int64_t)v;
    return 0;
}

int sf_cli_int(sf_cli_args *a, const char *long_name, const char *short_name, int64_t lo,
               int64_t hi, int64_t *out) {
    if (!matches(a, long_name, short_name)) return 0;
    const char *v = take_value(a);
    if (!v) return 1;
    if (sf_cli_parse_int(v, lo, hi, out) != 0) {
        char name[64];
        a->status =
            sf_cli_usage_error(a->cmd, "option '%s' wants an integer in %lld..%lld, got '%.64s'",
                               opt_name(a, name, sizeof name), (long long)lo, (long long)hi, v);
    }
    return 1;
}

int sf_cli_positional(sf_cli_args *a, const char **out) {
    if (!a->positional || a->status) return 0;
    *out = a->arg;
    return 1;
}

void sf_cli_unknown(sf_cli_args *a) {
    if (a->status) return;
    if (a->positional) {
        a->status = sf_cli_usage_error(a->cmd, "unexpected argument '%.64s'", a->arg);
    } else {
        char name[64];
        a->status =
            sf_cli_usage_error(a->cmd, "unknown option '%s'", opt_name(a, name, sizeof name));
    }
}

/* ---- the text table ---------------------------------------------------- */

struct sf_cli_table {
    int ncols;
    const char *const *headers;
    char align[16];     /* 'l' or 'r' per column */
    sf_arena *arena;    /* the cell texts */
    const char **cells; /* row-major */
    size_t n_cells, cap;
    int nomem;
};

#define TABLE_MAX_COLS 16

sf_cli_table *sf_cli_table_new(int ncols, const char *const *headers, const char *align) {
    if (ncols < 1 || ncols > TABLE_MAX_COLS) return NULL;
    sf_cli_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->arena = sf_arena_new(0);
    if (!t->arena) {
        free(t);
        return NULL;
    }
    t->ncols = ncols;
    t->headers = headers;
    for (int c = 0; c < ncols; c++) t->align[c] = align && align[c] == 'r' ? 'r' : 'l';
    return t;
}

void sf_cli_table_cell(sf_cli_table *t, const char *fmt, ...) {
    if (!t || t->nomem) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (t->n_cells == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        const char **cells = realloc(t->cells, cap * sizeof *cells);
        if (!cells) {
            t->nomem = 1;
            return;
        }
        t->cells = cells;
        t->cap = cap;
    }
    char *s = sf_arena_strdup(t->arena, buf);
    if (!s) {
        t->nomem = 1;
        return;
    }
    t->cells[t->n_cells++] = s;
}

static void put_cell(FILE *out, const char *s, size_t width, char align, int last) {
    size_t len = strlen(s);
    size_t pad = width > len ? width - len : 0;
    if (align == 'r')
        for (size_t i = 0; i < pad; i++) fputc(' ', out);
    fputs(s, out);
    if (align == 'l' && !last)
        for (size_t i = 0; i < pad; i++) fputc(' ', out);
}

static void put_row(FILE *out, const sf_cli_table *t, const char *const *row, int n,
                    const size_t *width) {
    for (int c = 0; c < n; c++) {
        if (c) fputs("  ", out);
        put_cell(out, row[c], width[c], t->align[c], c == n - 1);
    }
    fputc('\n', out);
}

int sf_cli_table_print(sf_cli_table *t, FILE *out) {
    if (!t || t->nomem) return sf_cli_fail("out of memory");
    size_t width[TABLE_MAX_COLS] = {0};
    for (int c = 0; c < t->ncols && t->headers; c++) width[c] = strlen(t->headers[c]);
    for (size_t i = 0; i < t->n_cells; i++) {
        size_t len = strlen(t->cells[i]);
        size_t c = i % (size_t)t->ncols;
        if (len > width[c]) width[c] = len;
    }
    if (t->headers) put_row(out, t, t->headers, t->ncols, width);
    for (size_t i = 0; i < t->n_cells; i += (size_t)t->ncols) {
        size_t left = t->n_cells - i;
        int n = left < (size_t)t->ncols ? (int)left : t->ncols;
        put_row(out, t, t->cells + i, n, width);
    }
    return SF_EXIT_OK;
}

void sf_cli_table_free(sf_cli_table *t) {
    if (!t) return;
    sf_arena_free(t->arena);
    free(t->cells);
    free(t);
}

/* ---- JSON and numbers -------------------------------------------------- */

int sf_cli_print_json(json_t *v) {
    if (!v) return sf_cli_fail("out of memory");
    char *text = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(v);
    if (!text) return sf_cli_fail("out of memory");
    fputs(text, stdout);
    fputc('\n', stdout);
    free(text);
    return SF_EXIT_OK;
}

int sf_cli_print_json_built(json_t *v, int bad) {
    if (bad) {
        json_decref(v);
        v = NULL;
    }
    return sf_cli_print_json(v);
}

/* 2^53: above it a double no longer holds every integer. */
json_t *sf_cli_json_number(double v) {
    if (!isfinite(v)) return json_null(); /* json_real would refuse it: NULL */
    if (v >= 0 && v < 9007199254740992.0 && v == (double)(json_int_t)v)
        return json_integer((json_int_t)v);
    return json_real(v);
}

json_t *sf_cli_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

const char *sf_cli_non_finite_name(double v) {
    if (isnan(v)) return "NaN";
    if (isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return NULL;
}

int sf_cli_json_null_reason(json_t *obj, const char *key, const char *reason) {
    json_t *r = json_object_get(obj, "null_reasons");
    if (!r) {
        r = json_object();
        if (json_object_set_new(obj, "null_reasons", r) != 0) return -1;
    }
    return json_object_set_new(r, key, json_string(reason)) != 0 ? -1 : 0;
}

static int set_with_reason(json_t *obj, const char *key, double v, json_t *value) {
    if (json_object_set_new(obj, key, value) != 0) return -1;
    const char *why = sf_cli_non_finite_name(v);
    return why ? sf_cli_json_null_reason(obj, key, why) : 0;
}

int sf_cli_json_set_number(json_t *obj, const char *key, double v) {
    return set_with_reason(obj, key, v, sf_cli_json_number(v));
}

int sf_cli_json_set_real(json_t *obj, const char *key, double v) {
    return set_with_reason(obj, key, v, sf_cli_json_real(v));
}

char *sf_cli_fmt_count(int64_t v, char *buf, size_t n) {
    char digits[32];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)mag);
    char tmp[48];
    size_t k = 0;
    if (v < 0) tmp[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0) tmp[k++] = ',';
        tmp[k++] = digits[i];
    }
    tmp[k] = '\0';
    snprintf(buf, n, "%s", tmp);
    return buf;
}

/* ---- shared lookups ---------------------------------------------------- */

int sf_cli_is_path(const char *name) {
    size_t n = strlen(name);
    return strchr(name, '/') != NULL || (n >= 5 && strcmp(name + n - 5, ".json") == 0) ||
           (n >= 5 && strcmp(name + n - 5, ".onnx") == 0);
}

/* The same rule as sf_machine_open, without building the machine: a path is
 * a file; a bare name is a preset, or else a file of that name in the working
 * directory; when neither exists, the preset's message (which lists them). */
sf_status sf_cli_machine_desc(const char *name_or_path, sf_machine_desc *out, sf_error *err) {
    /* one lookup for every command: presets, files and NAME[N] subsets */
    sf_machine *m = sf_machine_open(name_or_path, err);
    if (!m) return err && err->code != SF_OK ? err->code : SF_ERR_INVALID;
    *out = *sf_machine_get_desc(m);
    sf_machine_free(m);
    return SF_OK;
}

sf_machine *sf_cli_rank_machine(const char *cmd, const char *name, int ranks) {
    sf_error err = {0};
    if (name) {
        sf_machine *m = sf_machine_open(name, &err);
        if (!m) sf_cli_fail_err(&err);
        return m;
    }
    sf_machine_desc cpu;
    if (sf_machine_preset_desc("cpu", &cpu, &err) != SF_OK) {
        sf_cli_fail_err(&err);
        return NULL;
    }
    int have = cpu.nodes * cpu.devices_per_node;
    if (ranks > have) {
        /* the cpu preset's subset would fail with "a subset needs 1 to 4
         * devices", which names no way out: name them (a preset that has such
         * a subset plans for its devices, not this host's cores) */
        char fit[192] = "";
        for (int i = 0; i < sf_machine_preset_count(); i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s[%d]", sf_machine_preset_name(i), ranks);
            sf_error e2 = {0};
            sf_machine *m = sf_machine_open(sub, &e2);
            if (!m) continue;
            sf_machine_free(m);
            snprintf(fit, sizeof fit, ", or a preset that has %d devices, such as --machine '%s'",
                     ranks, sub);
            break;
        }
        sf_cli_fail("%s: %d ranks, but the default machine, the cpu preset, has %d devices: pass "
                    "--machine FILE of %d devices ('mpirun -n %d soapflow calibrate --out FILE' "
                    "measures this host as one)%s, or run at most %d ranks",
                    cmd, ranks, have, ranks, ranks, fit, have);
        return NULL;
    }
    char sub[64];
    snprintf(sub, sizeof sub, "cpu[%d]", ranks);
    sf_machine *m = sf_machine_open(sub, &err);
    if (!m) sf_cli_fail_err(&err);
    return m;
}

/* ---- simulator options ---------------------------------------------------- */

const char sf_cli_sim_help[] =
    "  --sync overlap|bulk    when gradient syncs start: as soon as a weight's backward\n"
    "                         is done (overlap, default), or after each device's whole\n"
    "                         backward pass (bulk, the default of FlexFlow's Legion-\n"
    "                         runtime simulator)\n"
    "  --sync-scheme S        ring: a ring all-reduce among a weight's replicas\n"
    "                         (default); ps: a parameter server on its first part's\n"
    "                         device (with bulk: FlexFlow's 2020-21 Legion-runtime\n"
    "                         simulator, not its 2018 prototype); hierarchical: a\n"
    "                         reduce-scatter in each node, an all-reduce across the\n"
    "                         nodes, an all-gather in each node (docs/simulator.md)\n"
    "  --segments N           cut transfers over several links into N pieces that\n"
    "                         pipeline over the hops (default 1: store-and-forward)\n"
    "  --pipeline-fast        a 1F1B pipeline of many micro-batches may take the fast\n"
    "                         path: one shorter run whose steady micro-batches repeat\n"
    "                         at a period, carried to m (the same result to rounding;\n"
    "                         every micro-batch where it does not repeat yet;\n"
    "                         docs/simulator.md, \"Pipelines\")\n"
    "  --every-replica        simulate every data-parallel replica of a pipeline (by\n"
    "                         default identical replicas on their own nodes are\n"
    "                         simulated once, with the same result; docs/simulator.md,\n"
    "                         \"Identical replicas\")\n";

int sf_cli_sim_option(sf_cli_args *a, sf_sim_options *o) {
    const char *v = NULL;
    if (sf_cli_str(a, "--sync", NULL, &v)) {
        if (v && sf_sync_mode_parse(v, &o->sync) != 0)
            a->status = sf_cli_usage_error(a->cmd, "--sync must be overlap or bulk, not '%s'", v);
        return 1;
    }
    int64_t n = o->segments;
    if (sf_cli_int(a, "--segments", NULL, 1, SF_SIM_MAX_SEGMENTS, &n)) {
        o->segments = (int)n;
        return 1;
    }
    if (sf_cli_str(a, "--sync-scheme", NULL, &v)) {
        if (v && sf_sync_scheme_parse(v, &o->scheme) != 0)
            a->status = sf_cli_usage_error(
                a->cmd, "--sync-scheme must be ring, ps or hierarchical, not '%s'", v);
        return 1;
    }
    if (sf_cli_flag(a, "--every-replica", NULL, &o->every_replica)) return 1;
    return sf_cli_flag(a, "--pipeline-fast", NULL, &o->pipeline_fast);
}

int sf_cli_double(sf_cli_args *a, const char *name, double lo, double hi, double *out) {
    const char *v;
    if (!sf_cli_str(a, name, NULL, &v)) return 0;
    if (!v) return 1;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        a->status = sf_cli_usage_error(a->cmd, "%s wants a number in [%g, %g], got '%.64s'", name,
                                       lo, hi, v);
        return 1;
    }
    *out = x;
    return 1;
}

const char sf_cli_memory_help[] =
    "  --memory-headroom P    percent of each device's memory kept free (allocator\n"
    "                         slack, the framework's own): a strategy fits when\n"
    "                         every device's peak over the iteration stays below\n"
    "                         the rest (default 10)\n";

void sf_cli_memory_default(sf_sim_options *o) {
    o->memory_timeline = 1;
    o->memory_headroom = 0.10;
}

int sf_cli_memory_option(sf_cli_args *a, sf_sim_options *o) {
    double pct = o->memory_headroom * 100.0;
    if (!sf_cli_double(a, "--memory-headroom", 0, 99, &pct)) return 0;
    o->memory_headroom = pct / 100.0;
    return 1;
}

/* ---- cost models --------------------------------------------------------- */

const char sf_cli_dtype_help[] =
    "  --dtype fp32|bf16|fp16|tf32 the precision the plan trains in (default fp32):\n"
    "                         tasks compute at the device's peak for it; activations,\n"
    "                         their transfers, gradients and their syncs take its bytes;\n"
    "                         bf16/fp16 weights keep fp32 masters beside a compute copy\n"
    "                         (mixed precision); tf32 is fp32 storage with products on\n"
    "                         tensor cores. A device without that peak is refused\n";

int sf_cli_dtype_option(sf_cli_args *a, sf_dtype *out) {
    const char *v = NULL;
    if (!sf_cli_str(a, "--dtype", NULL, &v)) return 0;
    if (v && sf_dtype_parse(v, out) != 0)
        a->status =
            sf_cli_usage_error(a->cmd, "--dtype must be fp32, bf16, fp16 or tf32, not '%s'", v);
    return 1;
}

const char sf_cli_optimizer_help[] =
    "  --optimizer O          sgd (default), adam or adamw: the optimizer the plan\n"
    "                         trains with, its state a weight keeps (sgd's momentum 4\n"
    "                         bytes, adam's two moments 8) and its update's loop\n";

int sf_cli_optimizer_option(sf_cli_args *a, sf_optimizer_kind *out) {
    const char *v = NULL;
    if (!sf_cli_str(a, "--optimizer", NULL, &v)) return 0;
    if (v && sf_optimizer_parse(v, out) != 0)
        a->status =
            sf_cli_usage_error(a->cmd, "--optimizer must be sgd, adam or adamw, not '%.64s'", v);
    return 1;
}

int sf_cli_cost_model_open(const sf_machine *m, const char *costs_path, sf_dtype dtype,
                           sf_optimizer_kind optimizer, sf_cost_model **out) {
    *out = NULL;
    sf_error err = {0};
    if (sf_machine_check_dtype(m, dtype, &err) != SF_OK) return sf_cli_fail_err(&err);
    if (costs_path && dtype != SF_DTYPE_FP32)
        return sf_cli_fail("%s: a costs file holds fp32 times (soapflow's kernels run in fp32), "
                           "so it cannot price a %s plan: drop --costs or --dtype",
                           costs_path, sf_dtype_name(dtype));
    sf_analytic_params ap;
    sf_analytic_params_default(&ap);
    ap.dtype = dtype;
    ap.optimizer = optimizer;
    sf_cost_model *analytic = sf_cost_analytic_new(m, &ap);
    if (!analytic) return sf_cli_fail("out of memory");
    if (!costs_path) {
        *out = analytic;
        return SF_EXIT_OK;
    }
    sf_profile_db *db = sf_profile_db_load_json(costs_path, &err);
    if (!db) {
        sf_cost_free(analytic);
        return sf_cli_fail_err(&err);
    }
    const char *kind = sf_machine_device_kind(m, 0)->name;
    if (strcmp(sf_profile_db_device_kind(db), kind) != 0)
        SF_LOG_WARN_F("%s: measured on device kind '%s', but machine '%s' has '%s': every task "
                      "falls back to the analytic model",
                      costs_path, sf_profile_db_device_kind(db), sf_machine_name(m), kind);
    *out = sf_cost_profiled_new(m, db, analytic); /* takes both, even when it fails */
    return *out ? SF_EXIT_OK : sf_cli_fail("out of memory");
}

void sf_cli_cost_model_report(const sf_cost_model *cm) {
    char buf[512];
    sf_profile_stats st;
    if (sf_cost_profiled_stats(cm, &st) != SF_OK || st.misses == 0) return;
    sf_cost_profiled_misses(cm, buf, sizeof buf);
    SF_LOG_WARN_F("not measured, analytic estimate used: %s (run 'soapflow profile' with this "
                  "model and machine)",
                  buf);
}

int sf_cli_idle_report(const sf_strategy *s, const sf_machine *m, const char *what) {
    int n_dev = sf_machine_num_devices(m);
    int *idle = malloc((size_t)(n_dev > 0 ? n_dev : 1) * sizeof *idle);
    if (!idle) return 0;
    int n = sf_strategy_idle_devices(s, n_dev, idle);
    if (n > 0) {
        /* the idle devices as ranges, "64-255" or "3,5,8-11", cut after a few */
        char list[160], item[32];
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; i < n;) {
            int j = i;
            while (j + 1 < n && idle[j + 1] == idle[j] + 1) j++;
            if (j > i)
                snprintf(item, sizeof item, "%s%d-%d", i ? "," : "", idle[i], idle[j]);
            else
                snprintf(item, sizeof item, "%s%d", i ? "," : "", idle[i]);
            if (len + strlen(item) + 5 > sizeof list) {
                snprintf(list + len, sizeof list - len, ",...");
                break;
            }
            snprintf(list + len, sizeof list - len, "%s", item);
            len += strlen(item);
            i = j + 1;
        }
        SF_LOG_WARN_F("strategy '%s' leaves %d of %d devices idle (%s): no part of any operator "
                      "runs there",
                      what, n, n_dev, list);
    }
    free(idle);
    return n;
}

int sf_cli_launcher_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}
