/*
 * main.c - the soapflow program: global options and the subcommand table.
 *
 * `soapflow [global options] <command> [options]`. Each command lives in its
 * own file (cmd_*.c) and appears here as one table line, so adding one
 * (simulate, search, bench, ...) touches that file, cli.h and this table.
 * The program decides what the library never does: it installs the stderr log
 * sink, prints errors as one "soapflow: ..." line, and turns them into exit
 * statuses (1 for bad input, 2 for a bad command line).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "soapflow/io.h"
#include "soapflow/version.h"

static const sf_cli_command commands[] = {
    {"models", "list the built-in models", sf_cmd_models},
    {"machines", "list the built-in machine presets", sf_cmd_machines},
    {"graph", "build a model and show its operators, parameters, FLOPs and memory", sf_cmd_graph},
    {"simulate", "simulate one training iteration under a strategy (time, traffic, memory)",
     sf_cmd_simulate},
    {"search", "find a fast strategy: baselines, OptCNN and MCMC side by side", sf_cmd_search},
    {"bench", "benchmarks: the simulator (bench sim), the CPU kernels (bench kernels)",
     sf_cmd_bench},
    {"profile", "measure task times with the CPU kernels into a costs file (simulate --costs)",
     sf_cmd_profile},
    {"calibrate", "under mpirun: measure this host's ranks, links and BLAS into a machine file",
     sf_cmd_calibrate},
    {"train", "under mpirun: train a model with a strategy, measured beside the prediction",
     sf_cmd_train},
    {"validate", "under mpirun: predicted vs measured iteration time, strategy by strategy",
     sf_cmd_validate},
};

#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *out) {
    fputs("usage: soapflow [-v|-q] <command> [options]\n"
          "\n"
          "Plan how to parallelize the training of a deep neural network over a cluster.\n"
          "\n"
          "commands:\n",
          out);
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s  %s\n", commands[i].name, commands[i].help);
    fputs("  help        show the help of a command (soapflow help graph)\n"
          "\n"
          "global options (accepted anywhere):\n"
          "  -h, --help     show this help\n"
          "  --version      show the version\n"
          "  -v, --verbose  log progress (twice: debug detail)\n"
          "  -q, --quiet    log errors only\n"
          "\n"
          "Run 'soapflow <command> --help' for the options of a command.\n",
          out);
}

static const sf_cli_command *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* `soapflow help [command]`: the same text as --help. */
static int run_help(int argc, char **argv) {
    if (argc < 2) {
        usage(stdout);
        return SF_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        /* 'soapflow help --help', which our own error hint below points to */
        usage(stdout);
        return SF_EXIT_OK;
    }
    if (argc > 2) return sf_cli_usage_error("help", "expects one command name");
    const sf_cli_command *c = find_command(argv[1]);
    if (!c) return sf_cli_usage_error(NULL, "unknown command '%.64s'", argv[1]);
    char *help_argv[] = {argv[1], (char *)"--help", NULL};
    return c->run(2, help_argv);
}

/* Output that could not be written (a full disk, a closed pipe) is a failure:
 * a script that reads our stdout must not take a truncated table for a whole one. */
static int finish(int status) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (status == SF_EXIT_OK) status = sf_cli_fail("cannot write to standard output");
    }
    return status;
}

/* An interrupt or a termination request ends the program as it would have
 * (SA_RESETHAND: the default action once this returns), but first removes the
 * temporary file of an output being written: outputs only ever appear whole. */
static void on_stop_signal(int sig) {
    sf_write_file_abort();
    raise(sig);
}

static void install_signal_handlers(void) {
    static const int stop[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++) {
        struct sigaction old;
        /* a signal the shell ignores (nohup, a background job) stays ignored */
        if (sigaction(stop[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(stop[i], &sa, NULL);
    }
    /* past a file size limit (ulimit -f), a write fails with EFBIG and is
     * reported, instead of the default SIGXFSZ killing us mid-file */
    signal(SIGXFSZ, SIG_IGN);
}

int main(int argc, char **argv) {
    install_signal_handlers();
    sf_log_set_sink(sf_log_stderr_sink, NULL);
    sf_log_set_level(SF_LOG_WARN);

    /* Global options before the command; -v and -q are also accepted after it
     * (the argv walker handles them there). */
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    a.cmd = NULL;
    const char *name = NULL;
    while (sf_cli_next(&a)) {
        int version = 0;
        if (sf_cli_help(&a)) {
            usage(stdout);
            return finish(SF_EXIT_OK);
        }
        if (sf_cli_flag(&a, "--version", NULL, &version)) {
            if (a.status) break;
            printf("soapflow %s\n", sf_version());
            return finish(SF_EXIT_OK);
        }
        if (sf_cli_positional(&a, &name)) break;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!name) {
        usage(stderr);
        return SF_EXIT_USAGE;
    }

    int first = a.next - 1; /* the command becomes argv[0] of its function */
    if (strcmp(name, "help") == 0) return finish(run_help(argc - first, argv + first));
    const sf_cli_command *c = find_command(name);
    if (!c) return sf_cli_usage_error(NULL, "unknown command '%.64s'", name);
    return finish(c->run(argc - first, argv + first));
}
