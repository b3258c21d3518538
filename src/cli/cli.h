/*
 * cli.h - what the soapflow subcommands share: the command table, an argv
 * walker, error reporting, a text table and a few number formats.
 *
 * A subcommand is one file (cmd_NAME.c) with one function
 *
 *     int sf_cmd_NAME(int argc, char **argv);   // argv[0] is the subcommand name
 *
 * declared below and one line in the table of main.c. It returns an exit
 * status: SF_EXIT_OK, SF_EXIT_FAIL (bad input, a file that would not load) or
 * SF_EXIT_USAGE (bad command line). Its options are read with the walker:
 *
 *     sf_cli_args a;
 *     sf_cli_args_init(&a, argc, argv);
 *     while (sf_cli_next(&a)) {
 *         if (sf_cli_help(&a)) return usage(stdout);
 *         else if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
 *         else if (sf_cli_str(&a, "--model", "-m", &model)) continue;
 *         else if (sf_cli_int(&a, "--batch", "-b", 1, 1 << 30, &batch)) continue;
 *         else sf_cli_unknown(&a);
 *     }
 *     if (a.status) return a.status;
 *
 * Errors in the walker are sticky, as SQLite's are: the first one is printed
 * ("soapflow: graph: option '--batch' needs a value ..."), recorded in
 * a.status, and ends the loop. Options take "--opt value" and "--opt=value";
 * "--" ends the options. The global options -v/--verbose and -q/--quiet are
 * accepted anywhere on the line, so the walker handles them itself.
 */
#ifndef SOAPFLOW_CLI_H
#define SOAPFLOW_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "soapflow/core.h"
#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

enum { SF_EXIT_OK = 0, SF_EXIT_FAIL = 1, SF_EXIT_USAGE = 2 };

/* The most output files one command writes (sf_cli_outputs). */
#define SF_CLI_MAX_OUTPUTS 4

/* ---- the command table ------------------------------------------------ */

typedef int (*sf_cli_fn)(int argc, char **argv);

typedef struct sf_cli_command {
    const char *name;
    const char *help; /* one line for `soapflow --help` */
    sf_cli_fn run;
} sf_cli_command;

int sf_cmd_models(int argc, char **argv);    /* cmd_models.c */
int sf_cmd_machines(int argc, char **argv);  /* cmd_machines.c */
int sf_cmd_graph(int argc, char **argv);     /* cmd_graph.c */
int sf_cmd_simulate(int argc, char **argv);  /* cmd_simulate.c */
int sf_cmd_search(int argc, char **argv);    /* cmd_search.c */
int sf_cmd_bench(int argc, char **argv);     /* cmd_bench.c: sub-commands sim, kernels */
int sf_cmd_profile(int argc, char **argv);   /* cmd_profile.c */
int sf_cmd_calibrate(int argc, char **argv); /* cmd_calibrate.c: MPI, under mpirun */
int sf_cmd_train(int argc, char **argv);     /* cmd_train.c: MPI, under mpirun */

int sf_cmd_validate(int argc, char **argv); /* cmd_validate.c: MPI, under mpirun */

/* The rank the launcher gave this process, read before MPI_Init from
 * OpenMPI's, PMIx's or PMI's environment; 0 without a launcher. Only rank 0
 * prints help and errors. */
int sf_cli_launcher_rank(void);

/* ---- errors ------------------------------------------------------------ */

/* "soapflow: <message>" on stderr, on one line; returns SF_EXIT_FAIL. */
int sf_cli_fail(const char *fmt, ...) SF_PRINTF(1, 2);
/* The same for a library error (its message, or the status phrase). */
int sf_cli_fail_err(const sf_error *err);
/* "soapflow: <cmd>: <message> (try 'soapflow <cmd> --help')"; returns SF_EXIT_USAGE. */
int sf_cli_usage_error(const char *cmd, const char *fmt, ...) SF_PRINTF(2, 3);

/* ---- the argv walker --------------------------------------------------- */

typedef struct sf_cli_args {
    int argc;
    char **argv;
    int next;          /* index of the next argument to read */
    const char *cmd;   /* argv[0]: the subcommand, for messages */
    const char *arg;   /* the current argument as written */
    const char *value; /* text after '=' in "--opt=value", or NULL */
    size_t name_len;   /* length of the option name in arg (up to '=') */
    int positional;    /* 1 when arg is not an option (or follows "--") */
    int after_dashes;  /* "--" seen */
    int status;        /* 0, or the exit status of the first error */
} sf_cli_args;

void sf_cli_args_init(sf_cli_args *a, int argc, char **argv);
/* Step to the next argument; 0 at the end or after an error. */
int sf_cli_next(sf_cli_args *a);
/* Each matcher returns 1 when the current argument is its option (the option
 * is then consumed, even when its value was bad: a.status says so), else 0.
 * short_name may be NULL. */
int sf_cli_help(sf_cli_args *a); /* -h, --help */
int sf_cli_flag(sf_cli_args *a, const char *long_name, const char *short_name, int *out);
int sf_cli_str(sf_cli_args *a, const char *long_name, const char *short_name, const char **out);
/* A decimal integer in [lo, hi]; "1e3", "12x" and overflow are rejected. */
int sf_cli_int(sf_cli_args *a, const char *long_name, const char *short_name, int64_t lo,
               int64_t hi, int64_t *out);
/* Memory over the simulated schedule (sf_sim_options.memory_timeline) with the
 * CLI's default headroom, 10 percent; --memory-headroom P and its help line. */
extern const char sf_cli_memory_help[];
void sf_cli_memory_default(sf_sim_options *o);
int sf_cli_memory_option(sf_cli_args *a, sf_sim_options *o);
/* A number in [lo, hi] (strtod's forms); anything after it is rejected. */
int sf_cli_double(sf_cli_args *a, const char *name, double lo, double hi, double *out);
/* The current argument is positional: store it and return 1. */
int sf_cli_positional(sf_cli_args *a, const char **out);
/* Report the current argument as unknown or unexpected (usage error). */
void sf_cli_unknown(sf_cli_args *a);

/* Parse a decimal integer in [lo, hi]; 0 on success, -1 otherwise. */
int sf_cli_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* ---- output ------------------------------------------------------------ */

/* A text table: columns sized to their widest cell, left or right aligned.
 * Cells are added left to right, top to bottom; rows wrap after ncols.
 * Out of memory is sticky and reported by sf_cli_table_print. */
typedef struct sf_cli_table sf_cli_table;

/* headers: ncols names, or NULL for no header line; align: one 'l' or 'r'
 * per column (NULL: all left). */
sf_cli_table *sf_cli_table_new(int ncols, const char *const *headers, const char *align);
void sf_cli_table_cell(sf_cli_table *t, const char *fmt, ...) SF_PRINTF(2, 3);
/* Print with two spaces between columns; SF_EXIT_FAIL (reported) when a cell
 * could not be stored. */
int sf_cli_table_print(sf_cli_table *t, FILE *out);
void sf_cli_table_free(sf_cli_table *t);

/* Print a JSON value on stdout (indented, 17 significant digits) and take it
 * over (decref). NULL means out of memory: reported, SF_EXIT_FAIL. */
int sf_cli_print_json(json_t *v);
/* The same for an object built member by member with `bad |= json_object_set_new(...)`:
 * when bad (a member could not be added), v is dropped and out of memory reported. */
int sf_cli_print_json_built(json_t *v, int bad);
/* Every double a command puts into its JSON goes through these (never
 * json_real or json_pack's "f", which return NULL for NaN and infinities, so
 * that the member silently disappears, or the whole object with it).
 * A number: a JSON integer while a double holds it exactly (byte counts and
 * FLOPs are doubles in the library but whole numbers), else a real, and null
 * when v is not finite. NULL only when out of memory. */
json_t *sf_cli_json_number(double v);
/* A real (measured times, rates: a JSON real even when whole), null when not finite. */
json_t *sf_cli_json_real(double v);
/* The rule of README.md ("Conventions every command follows"): obj[key] =
 * sf_cli_json_number(v), and when v is not finite the reason beside it,
 * obj["null_reasons"][key] = "NaN", "+Inf" or "-Inf". Returns 0, or -1 when out of memory (for `bad
 * |=`). */
int sf_cli_json_set_number(json_t *obj, const char *key, double v);
/* The same with sf_cli_json_real. */
int sf_cli_json_set_real(json_t *obj, const char *key, double v);
/* obj["null_reasons"][key] = reason: why obj[key] (or an element of the array
 * obj[key]) is null. Returns 0 or -1 as above. */
int sf_cli_json_null_reason(json_t *obj, const char *key, const char *reason);
/* "NaN", "+Inf" or "-Inf" for a value that is not finite; NULL for one that is. */
const char *sf_cli_non_finite_name(double v);

/* 25557032 -> "25,557,032". Returns buf. */
char *sf_cli_fmt_count(int64_t v, char *buf, size_t n);
/* bytes in binary units: sf_fmt_bytes (soapflow/core.h) */

/* ---- output files -------------------------------------------------------- */

/* The files one command writes (--out, --trace, --svg, --dot, ...), written
 * all or none: their paths are checked before any work, their texts are made
 * in memory once the work is done, and sf_write_files_atomic writes them as
 * one group, so that a failure on any replaces none of the files already
 * there. Start from `sf_cli_outputs o = {0};`. */
typedef struct sf_cli_outputs {
    int n;
    const char *path[SF_CLI_MAX_OUTPUTS];
    char *text[SF_CLI_MAX_OUTPUTS]; /* malloc'd, owned */
} sf_cli_outputs;

/* Whether each of the n paths (NULL ones skipped) could be written now, as
 * sf_write_file_check says; the first failure is reported. An exit status. */
int sf_cli_outputs_check(const char *const *paths, int n);
/* Queue text (taken over) for path. NULL text means its making failed: err is
 * reported with path in front, and the status is SF_EXIT_FAIL. */
int sf_cli_outputs_add(sf_cli_outputs *o, const char *path, char *text, const sf_error *err);
/* Write everything queued as one group, then free it. An exit status. */
int sf_cli_outputs_write(sf_cli_outputs *o);
/* Drop what is queued without writing (after a failure). */
void sf_cli_outputs_free(sf_cli_outputs *o);

/* ---- shared lookups ---------------------------------------------------- */

/* A model argument names a file (rather than a zoo model) when it holds a '/'
 * or ends with ".json" or ".onnx". */
int sf_cli_is_path(const char *name);
/* The description of a machine preset or machine JSON file, found as
 * sf_machine_open finds machines (without building the machine). */
sf_status sf_cli_machine_desc(const char *name_or_path, sf_machine_desc *out, sf_error *err);
/* The machine of a command that runs one MPI rank a device (train, validate):
 * name (a preset, NAME[N] or a file) when given, else the cpu preset's first
 * `ranks` devices, cpu[P]. NULL when it cannot be made, reported (more ranks
 * than the cpu preset has: the message says what to pass instead). */
sf_machine *sf_cli_rank_machine(const char *cmd, const char *name, int ranks);

/* ---- a model, a machine and a strategy (cmd_simulate.c) ------------------ */

/* A zoo model's default global batch: this many samples per device of the machine
 * it is planned for (the per-device batch the papers used). */
#define SF_CLI_SAMPLES_PER_DEVICE 64

/* The model options of the commands that plan (simulate, bench sim, ...):
 * -m/--model, -b/--batch, --seq-len, --chunk, --hidden, --vocab, --layers, --heads,
 * --mlp-sizes. */
typedef struct sf_cli_model_opts {
    const char *model;                            /* zoo name, model JSON or ONNX file */
    const char *mlp_sizes;                        /* "784,4096,10" */
    int64_t batch, seq_len, chunk, hidden, vocab; /* 0: default */
    int64_t layers, heads;                        /* 0: default */
    const char *onnx_buffers; /* --onnx-buffers FILE: an ONNX file's registered buffers */
} sf_cli_model_opts;

/* Match the current argument against the model options (as the sf_cli_* matchers). */
int sf_cli_model_option(sf_cli_args *a, sf_cli_model_opts *o);
/* The option lines for a usage text: all of them, or those after -m and -b (for a
 * command that describes its model and batch in its own words). */
extern const char sf_cli_model_help[];
extern const char sf_cli_model_size_help[];
/* The usage errors of sf_cli_model_open without building anything: --model
 * missing, model options with a model file, a malformed --mlp-sizes. For a
 * command that checks its whole command line before it reads other files. */
int sf_cli_model_check(const char *cmd, const sf_cli_model_opts *o);
/* Build the model: a zoo model gets 64 samples per device of a machine with
 * n_devices devices unless --batch says otherwise; a file keeps its batch (and
 * refuses the model options). Returns an exit status; *out on success. */
int sf_cli_model_open(const char *cmd, const sf_cli_model_opts *o, int n_devices, sf_graph **out);
/* The same, and for an ONNX file its weights (sf_onnx_load's, NULL when the file
 * lacks some, or for other models) in *weights when weights is non-NULL. An ONNX
 * file takes --batch for its dynamic batch dimension (default as a zoo model's)
 * and refuses a --batch its fixed batch contradicts. */
int sf_cli_model_open_weights(const char *cmd, const sf_cli_model_opts *o, int n_devices,
                              sf_graph **out, float ***weights);
/* A baseline name (data, model, owt, expert, single) or a strategy JSON file:
 * a name holding '/' or ending in .json, or an existing file that is not a
 * baseline name. Returns an exit status; *out on success. */
int sf_cli_strategy_open(const char *name_or_path, const sf_graph *g, const sf_machine *m,
                         sf_strategy **out);

/* ---- cost models (cli.c) ------------------------------------------------ */

/* The cost model of the planning commands: the analytic roofline, or, with a
 * costs file (--costs FILE, written by `soapflow profile`), the profiled model
 * over it with the analytic one as its fallback. Warns when the file was
 * measured on another device kind than the machine's. Returns an exit status;
 * *out on success. dtype and optimizer: what the plan trains in and with. */
int sf_cli_cost_model_open(const sf_machine *m, const char *costs_path, sf_dtype dtype,
                           sf_optimizer_kind optimizer, sf_cost_model **out);
/* --dtype fp32|fp16|bf16, the precision a plan trains in (docs/cost-model.md,
 * "Precision"): into *out; returns 1 when the option was consumed (a bad value
 * sets a->status). */
int sf_cli_dtype_option(sf_cli_args *a, sf_dtype *out);
extern const char sf_cli_dtype_help[];
/* --optimizer sgd|adam|adamw, the optimizer a plan trains with (cost.h, "the
 * optimizer"): into *out; returns 1 when the option was consumed (a bad value
 * sets a->status). */
int sf_cli_optimizer_option(sf_cli_args *a, sf_optimizer_kind *out);
extern const char sf_cli_optimizer_help[];
/* The simulator's options of simulate, search and bench sim: --sync
 * overlap|bulk, --sync-scheme ring|ps|hierarchical and --segments N. Returns 1 when an option was
 * consumed (a bad value sets a->status). */
int sf_cli_sim_option(sf_cli_args *a, sf_sim_options *o);
extern const char sf_cli_sim_help[];

/* After the model has answered: one warning line naming the operator types a
 * profiled model took from the analytic fallback ("not measured: lstm (12
 * tasks), ..."); nothing for an analytic model or when all were measured. */
void sf_cli_cost_model_report(const sf_cost_model *cm);

/* One warning line when strategy s (named `what`) leaves devices of m idle, no
 * part of any operator on them: "strategy 'data' leaves 192 of 256 devices
 * idle (64-255)"; nothing when it uses every device. Returns the idle count. */
int sf_cli_idle_report(const sf_strategy *s, const sf_machine *m, const char *what);

#endif
