/*
 * cmd_bench.c - `soapflow bench <what>`: benchmarks as programs that print
 * figures (best of N, means), never timed tests.
 *
 * `bench` is a dispatcher over a table of sub-benchmarks, as main.c is over
 * commands: each is one function taking (argc, argv) with argv[0] naming it
 * ("bench sim"), so its messages and --help read as a command's do. Adding one
 * (bench search, ...) is one function and one table line.
 *
 *   bench sim      the simulator: a full simulation (best of --reps) and delta
 *                  simulations after random single-operator moves, each
 *                  applied with sf_sim_update and undone with sf_sim_revert, as
 *                  the MCMC search does for a rejected proposal. The mean of
 *                  the update alone and of update + revert are both reported:
 *                  the first is what an accepted move costs, the second a
 *                  rejected one. After the moves the simulator must give the
 *                  starting result again, bit for bit; it is checked.
 *   bench machine  planning on a large machine: building it (sf_machine_build),
 *                  looking up routes and their links, creating a simulator,
 *                  a full simulation and delta updates of a small model on it,
 *                  and the process's peak memory. A machine file or preset can
 *                  be reshaped (--nodes, --devices-per-node, --topology), so a
 *                  4096-device pairwise node needs no file.
 *   bench kernels  the fast CPU kernels against single-thread SGEMM
 *                  (sf_bench_kernels).
 *
 * The timing and its checks are the library's (soapflow/bench.h for the
 * simulator and the machine, kernels.h for the kernels): this file parses the
 * options, opens the model, machine and strategy, and prints the figures.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "soapflow/bench.h"
#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/sim.h"

#define DEFAULT_MACHINE "p100-4x4"
#define DEFAULT_STRATEGY "data"

/* ---- bench sim ------------------------------------------------------------------ */

static int sim_usage(FILE *out) {
    fprintf(out,
            "usage: soapflow bench sim --model NAME|FILE [options]\n"
            "\n"
            "Time the execution simulator on a model and machine: a full simulation\n"
            "(best of --reps) and delta simulations after --moves random single-operator\n"
            "changes (a random operator gets a random config from its whole SOAP space),\n"
            "each applied with sf_sim_update and undone with sf_sim_revert.\n"
            "\n"
            "options:\n"
            "%s"
            "  --machine NAME|FILE    machine preset or machine JSON file (default: %s)\n"
            "                         NAME[N]: its first N devices, N at most one node's\n"
            "                         devices or whole nodes (p100-4x4[8]: two nodes)\n"
            "  -s, --strategy S       starting strategy: a baseline or a strategy JSON file\n"
            "                         (default: %s)\n"
            "  --reps N               full simulations timed, the best is reported (default 5)\n"
            "  --moves N              random moves for the delta figures (default 1000)\n"
            "  --seed S               seed of the random moves (default 1)\n"
            "  --memory-timeline      also follow memory over each schedule (as simulate\n"
            "                         does): what the timeline's sweep adds to each figure\n"
            "%s"
            "%s"
            "  --json                 print one JSON object: model, machine, strategy, sync,\n"
            "                         sync_scheme, segments, dtype, batch, tasks, reps,\n"
            "                         moves, seed, full_us, tasks_per_s, delta_us (mean\n"
            "                         update), delta_revert_us (mean update + revert),\n"
            "                         delta_tasks\n"
            "                         (mean tasks of the changed strategies), speedup\n"
            "                         (full_us / delta_us), delta_bounded_us (mean update +\n"
            "                         revert bounded at 1.02 x the start, as MCMC bounds\n"
            "                         moves), bounded_cut_frac (share of those stopped early),\n"
            "                         delta_rescheduled_frac (share of tasks a delta update\n"
            "                         scheduled again), delta_changed_frac (share that are new\n"
            "                         or start at another time: what any exact delta must redo),\n"
            "                         delta_uneven_frac (share that are new or whose inputs\n"
            "                         moved by different amounts: what even a delta that\n"
            "                         shifted runs of the old schedule would have to redo),\n"
            "                         full_moved_us (mean full simulation of each changed\n"
            "                         strategy, from scratch), speedup_moved (full_moved_us /\n"
            "                         delta_us: delta against simulating the same strategy in\n"
            "                         full)\n"
            "  -h, --help             show this help\n"
            "\n"
            "Times are wall-clock microseconds on this machine, one thread. A random move\n"
            "can make the task graph much larger than the starting strategy's (a layer split\n"
            "64 ways over scattered devices), so compare delta_us with full_us knowing\n"
            "delta_tasks.\n"
            "\n"
            "example:\n"
            "  soapflow bench sim --model inception_v3 --machine p100-4x4\n"
            "  soapflow bench sim --model nmt --machine k80-16x4 --moves 200 --json\n",
            sf_cli_model_help, DEFAULT_MACHINE, DEFAULT_STRATEGY, sf_cli_sim_help,
            sf_cli_dtype_help);
    return SF_EXIT_OK;
}

static int bench_sim(int argc, char **argv) {
    sf_cli_model_opts mo;
    memset(&mo, 0, sizeof mo);
    const char *machine = DEFAULT_MACHINE, *strategy = DEFAULT_STRATEGY;
    int64_t reps = 5, moves = 1000, seed = 1;
    int json = 0;
    sf_sim_options so;
    sf_sim_options_default(&so);
    sf_dtype dtype = SF_DTYPE_FP32;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return sim_usage(stdout);
        if (sf_cli_sim_option(&a, &so)) continue;
        if (sf_cli_dtype_option(&a, &dtype)) continue;
        if (sf_cli_model_option(&a, &mo)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &machine)) continue;
        if (sf_cli_str(&a, "--strategy", "-s", &strategy)) continue;
        if (sf_cli_int(&a, "--reps", NULL, 1, 1000000, &reps)) continue;
        if (sf_cli_int(&a, "--moves", NULL, 0, 100000000, &moves)) continue;
        if (sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &seed)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
        if (sf_cli_flag(&a, "--memory-timeline", NULL, &so.memory_timeline)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!mo.model) return sf_cli_usage_error(a.cmd, "--model is required");

    sf_error err = {0};
    sf_graph *g = NULL;
    sf_strategy *s = NULL;
    sf_cost_model *cm = NULL;
    sf_machine *m = sf_machine_open(machine, &err);
    if (!m) return sf_cli_fail_err(&err);
    int rc = sf_cli_model_open(a.cmd, &mo, sf_machine_num_devices(m), &g);
    if (rc == SF_EXIT_OK) rc = sf_cli_strategy_open(strategy, g, m, &s);
    if (rc != SF_EXIT_OK) goto done;
    rc = sf_cli_cost_model_open(m, NULL, dtype, SF_OPTIMIZER_SGD, &cm);
    if (rc != SF_EXIT_OK) goto done;
    sf_bench_sim_result br;
    if (sf_bench_sim(g, m, cm, &so, s, reps, moves, (uint64_t)seed, &br, &err) != SF_OK) {
        rc = sf_cli_fail_err(&err);
        goto done;
    }
    double tasks_per_s = br.full_us > 0 ? (double)br.tasks / (br.full_us * 1e-6) : 0;
    double speedup = br.delta_us > 0 ? br.full_us / br.delta_us : 0;
    double speedup_moved = br.delta_us > 0 ? br.full_moved_us / br.delta_us : 0;
    sf_graph_stats gs;
    sf_graph_stats_compute(g, &gs);
    if (json) {
        json_t *j = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, "
            "s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s}",
            "model", sf_graph_name(g), "machine", sf_machine_name(m), "strategy", strategy, "sync",
            sf_sync_mode_name(so.sync), "sync_scheme", sf_sync_scheme_name(so.scheme), "segments",
            so.segments, "batch", (json_int_t)gs.batch, "tasks", (json_int_t)br.tasks, "reps",
            (json_int_t)reps, "moves", (json_int_t)moves, "seed", (json_int_t)seed, "full_us",
            sf_cli_json_real(br.full_us), "tasks_per_s", sf_cli_json_real(tasks_per_s), "delta_us",
            sf_cli_json_real(br.delta_us), "delta_revert_us", sf_cli_json_real(br.delta_revert_us),
            "delta_tasks", sf_cli_json_real(br.delta_tasks), "speedup", sf_cli_json_real(speedup),
            "delta_bounded_us", sf_cli_json_real(br.bounded_us), "bounded_cut_frac",
            sf_cli_json_real(br.cut_frac), "delta_rescheduled_frac",
            sf_cli_json_real(br.resched_frac), "delta_changed_frac",
            sf_cli_json_real(br.changed_frac), "delta_uneven_frac",
            sf_cli_json_real(br.uneven_frac), "full_moved_us", sf_cli_json_real(br.full_moved_us),
            "speedup_moved", sf_cli_json_real(speedup_moved), "dtype", sf_dtype_name(dtype));
        rc = sf_cli_print_json(j);
    } else {
        char b1[32];
        printf("%s on %s, strategy %s: %s tasks\n", sf_graph_name(g), sf_machine_name(m), strategy,
               sf_cli_fmt_count(br.tasks, b1, sizeof b1));
        printf("full simulation      %12.1f us  (best of %lld; %.3g tasks/s)\n", br.full_us,
               (long long)reps, tasks_per_s);
        if (moves > 0) {
            printf("delta update         %12.1f us  (mean of %lld random moves; full / delta "
                   "%.2f)\n",
                   br.delta_us, (long long)moves, speedup);
            printf("delta update+revert  %12.1f us\n", br.delta_revert_us);
            printf("full, changed        %12.1f us  (mean full simulation of the same changed "
                   "strategies; full / delta %.2f)\n",
                   br.full_moved_us, speedup_moved);
            printf("tasks after a move   %12.0f     (mean; %.0f%% of them scheduled again, "
                   "%.0f%% new or moved in time,\n"
                   "                                  %.0f%% new or with inputs that moved "
                   "unevenly)\n",
                   br.delta_tasks, br.resched_frac * 100, br.changed_frac * 100,
                   br.uneven_frac * 100);
            printf("bounded update+revert %11.1f us  (bound 1.02 x the start, as MCMC bounds "
                   "moves; %.0f%% stopped early; full / bounded %.2f)\n",
                   br.bounded_us, br.cut_frac * 100,
                   br.bounded_us > 0 ? br.full_us / br.bounded_us : 0);
        }
    }
done:
    sf_cost_free(cm);
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}

/* ---- bench machine -------------------------------------------------------------- */

static int machine_usage(FILE *out) {
    fprintf(out,
            "usage: soapflow bench machine [options]\n"
            "\n"
            "Time planning on a large machine: building it, route lookups, creating a\n"
            "simulator, a full simulation and delta updates of a small model, and the\n"
            "process's peak memory. The machine can be reshaped, so that a 4096-device\n"
            "pairwise node needs no file.\n"
            "\n"
            "options:\n"
            "  --machine NAME|FILE    machine preset or machine JSON file (default: %s)\n"
            "  --nodes N              reshape: number of nodes\n"
            "  --devices-per-node D   reshape: devices per node\n"
            "  --topology T           reshape: pairwise, switch, pcie_tree or shm\n"
            "  -m, --model NAME|FILE  the model simulated (default: mlp with --mlp-sizes\n"
            "                         784,10: input, linear, softmax)\n"
            "  -b, --batch N          global batch (default: 64 per device)\n"
            "  --seq-len N, --chunk N, --hidden N, --vocab N, --mlp-sizes A,B,...\n"
            "                         the zoo model's sizes, as for simulate\n"
            "  -s, --strategy S       a baseline or a strategy JSON file (default: %s)\n"
            "  --reps N               machine builds, simulators and full simulations timed,\n"
            "                         the best of each is reported (default 3)\n"
            "  --moves N              random moves for the delta figure (default 100)\n"
            "  --pairs N              random device pairs for the route figure (default 1000000)\n"
            "  --seed S               seed of the pairs and moves (default 1)\n"
            "  --json                 print one JSON object: machine, devices, nodes, links,\n"
            "                         topology, model, strategy, tasks, reps, moves, pairs,\n"
            "                         build_ms, route_ns (route and its links' figures, mean\n"
            "                         per pair), sim_new_ms, full_ms, delta_us (mean update +\n"
            "                         revert), peak_rss_MiB (the whole process, all of the above)\n"
            "  -h, --help             show this help\n"
            "\n"
            "example:\n"
            "  soapflow bench machine --topology pairwise --nodes 1 --devices-per-node 4096\n"
            "  soapflow bench machine --machine dgx-h100 --nodes 500 --json\n",
            DEFAULT_MACHINE, DEFAULT_STRATEGY);
    return SF_EXIT_OK;
}

static int bench_machine(int argc, char **argv) {
    sf_cli_model_opts mo;
    memset(&mo, 0, sizeof mo);
    const char *machine = DEFAULT_MACHINE, *strategy = DEFAULT_STRATEGY, *topology = NULL;
    int64_t nodes = 0, dpn = 0, reps = 3, moves = 100, pairs = 1000000, seed = 1;
    int json = 0;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return machine_usage(stdout);
        if (sf_cli_model_option(&a, &mo)) continue;
        if (sf_cli_str(&a, "--machine", NULL, &machine)) continue;
        if (sf_cli_int(&a, "--nodes", NULL, 1, SF_MAX_DEVICES, &nodes)) continue;
        if (sf_cli_int(&a, "--devices-per-node", NULL, 1, SF_MAX_DEVICES, &dpn)) continue;
        if (sf_cli_str(&a, "--topology", NULL, &topology)) continue;
        if (sf_cli_str(&a, "--strategy", "-s", &strategy)) continue;
        if (sf_cli_int(&a, "--reps", NULL, 1, 1000000, &reps)) continue;
        if (sf_cli_int(&a, "--moves", NULL, 0, 100000000, &moves)) continue;
        if (sf_cli_int(&a, "--pairs", NULL, 0, INT64_MAX / 2, &pairs)) continue;
        if (sf_cli_int(&a, "--seed", NULL, 0, INT64_MAX, &seed)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!mo.model) {
        mo.model = "mlp";
        if (!mo.mlp_sizes) mo.mlp_sizes = "784,10";
    }

    sf_error err = {0};
    sf_machine_desc d;
    if (sf_cli_machine_desc(machine, &d, &err) != SF_OK) return sf_cli_fail_err(&err);
    if (nodes) d.nodes = (int)nodes;
    if (dpn) d.devices_per_node = (int)dpn;
    if (topology) {
        int t = 0;
        while (t < SF_INTRA_COUNT && strcmp(sf_intra_topology_name((sf_intra_topology)t), topology))
            t++;
        if (t == SF_INTRA_COUNT)
            return sf_cli_usage_error(a.cmd,
                                      "unknown topology '%.64s' (pairwise, switch, "
                                      "pcie_tree, shm)",
                                      topology);
        d.intra = (sf_intra_topology)t;
    }
    if (nodes || dpn || topology) {
        char name[SF_NAME_MAX];
        snprintf(name, sizeof name, "%.32s-%dx%d-%s", d.name, d.nodes, d.devices_per_node,
                 sf_intra_topology_name(d.intra));
        memcpy(d.name, name, sizeof d.name);
    }

    double build_s, route_s;
    sf_machine *m = NULL;
    if (sf_bench_machine_build(&d, reps, &m, &build_s, &err) != SF_OK) return sf_cli_fail_err(&err);
    int n_dev = sf_machine_num_devices(m);
    if (sf_bench_machine_routes(m, pairs, (uint64_t)seed, &route_s, &err) != SF_OK) {
        sf_machine_free(m);
        return sf_cli_fail("bench machine: %s", err.msg);
    }

    sf_graph *g = NULL;
    sf_strategy *s = NULL;
    int rc = sf_cli_model_open(a.cmd, &mo, n_dev, &g);
    if (rc == SF_EXIT_OK) rc = sf_cli_strategy_open(strategy, g, m, &s);
    sf_bench_machine_sim_result br = {0};
    if (rc == SF_EXIT_OK &&
        sf_bench_machine_sim(g, m, s, reps, moves, (uint64_t)seed, &br, &err) != SF_OK)
        rc = sf_cli_fail_err(&err);
    struct rusage ru;
    double rss_MiB = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0;
    if (rc == SF_EXIT_OK && json) {
        json_t *j = json_pack(
            "{s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, "
            "s:o}",
            "machine", sf_machine_name(m), "devices", n_dev, "nodes", sf_machine_num_nodes(m),
            "links", sf_machine_num_links(m), "topology", sf_intra_topology_name(d.intra), "model",
            sf_graph_name(g), "strategy", strategy, "tasks", (json_int_t)br.tasks, "reps",
            (json_int_t)reps, "moves", (json_int_t)moves, "pairs", (json_int_t)pairs, "build_ms",
            sf_cli_json_real(build_s * 1e3), "route_ns", sf_cli_json_real(route_s * 1e9),
            "sim_new_ms", sf_cli_json_real(br.sim_new_s * 1e3), "full_ms",
            sf_cli_json_real(br.full_s * 1e3), "delta_us", sf_cli_json_real(br.delta_s * 1e6),
            "peak_rss_MiB", sf_cli_json_real(rss_MiB));
        rc = sf_cli_print_json(j);
    } else if (rc == SF_EXIT_OK) {
        char b1[32], b2[32];
        printf("%s: %d devices in %d nodes (%s), %s links\n", sf_machine_name(m), n_dev,
               sf_machine_num_nodes(m), sf_intra_topology_name(d.intra),
               sf_cli_fmt_count(sf_machine_num_links(m), b1, sizeof b1));
        printf("build machine     %12.3f ms  (best of %lld)\n", build_s * 1e3, (long long)reps);
        printf("route + links     %12.1f ns  (mean of %lld random pairs)\n", route_s * 1e9,
               (long long)pairs);
        printf("new simulator     %12.3f ms  (best of %lld; %s, strategy %s, %s tasks)\n",
               br.sim_new_s * 1e3, (long long)reps, sf_graph_name(g), strategy,
               sf_cli_fmt_count(br.tasks, b2, sizeof b2));
        printf("full simulation   %12.3f ms  (best of %lld, each a simulator's first run)\n",
               br.full_s * 1e3, (long long)reps);
        if (moves > 0)
            printf("delta update+revert %10.1f us  (mean of %lld random moves)\n", br.delta_s * 1e6,
                   (long long)moves);
        printf("peak memory       %12.1f MiB (the whole process)\n", rss_MiB);
    }
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}

/* ---- bench kernels ------------------------------------------------------------ */

static int kernels_usage(FILE *out) {
    fputs("usage: soapflow bench kernels [--json] [--reps N]\n"
          "\n"
          "Time single-thread SGEMM (1024^3) and the fast conv2d, linear, LSTM and\n"
          "attention kernels (forward + backward) at representative layer shapes, and\n"
          "print each kernel's GFLOP/s and its ratio to SGEMM. Every figure is the best\n"
          "of --reps runs after a warm-up.\n"
          "\n"
          "options:\n"
          "  --reps N    runs per figure, the best is reported (default 3)\n"
          "  --json      print one JSON object: sgemm_gflops and a \"kernels\" array of\n"
          "              {name, gflops, ratio}\n"
          "  -h, --help  show this help\n"
          "\n"
          "Threads: the benchmark measures one core, as the runtime gives one core to each\n"
          "rank. It sets OpenBLAS to one thread itself (openblas_set_num_threads), which\n"
          "overrides OPENBLAS_NUM_THREADS for the measurement; OPENBLAS_NUM_THREADS=1 in\n"
          "the environment also keeps OpenBLAS from starting a pool of idle threads when\n"
          "the program loads. Run it on an otherwise idle machine.\n"
          "\n"
          "example:\n"
          "  OPENBLAS_NUM_THREADS=1 soapflow bench kernels --reps 5\n",
          out);
    return SF_EXIT_OK;
}

static int bench_kernels(int argc, char **argv) {
    int64_t reps = 3;
    int json = 0;
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return kernels_usage(stdout);
        if (sf_cli_int(&a, "--reps", NULL, 1, 1000000, &reps)) continue;
        if (sf_cli_flag(&a, "--json", NULL, &json)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    sf_error err = {0};
    if (sf_bench_kernels(stdout, json, (int)reps, &err) != SF_OK) return sf_cli_fail_err(&err);
    return SF_EXIT_OK;
}

/* ---- the dispatcher ------------------------------------------------------------- */

/* One line per benchmark; name is what follows `bench`. */
static const sf_cli_command benches[] = {
    {"sim", "full and delta simulation time of a model on a machine", bench_sim},
    {"machine", "planning on a large machine: build, routes, simulator, peak memory",
     bench_machine},
    {"kernels", "fast CPU kernels against single-thread SGEMM", bench_kernels},
};

#define N_BENCHES ((int)(sizeof benches / sizeof benches[0]))

static int usage(FILE *out) {
    fputs("usage: soapflow bench <what> [options]\n"
          "\n"
          "Benchmarks: programs that print figures (best of N, means) for bench/RESULTS.md.\n"
          "\n"
          "what:\n",
          out);
    for (int i = 0; i < N_BENCHES; i++)
        fprintf(out, "  %-9s  %s\n", benches[i].name, benches[i].help);
    fputs("\n"
          "Run 'soapflow bench <what> --help' for its options.\n"
          "\n"
          "example:\n"
          "  soapflow bench sim --model resnet101 --machine k80-16x4 --json\n"
          "  soapflow bench machine --topology pairwise --nodes 2 --devices-per-node 2000\n"
          "  soapflow bench kernels\n",
          out);
    return SF_EXIT_OK;
}

int sf_cmd_bench(int argc, char **argv) {
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    const char *what = NULL;
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return usage(stdout);
        if (sf_cli_positional(&a, &what)) break;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (!what) return sf_cli_usage_error(a.cmd, "which benchmark? (sim, machine, kernels)");
    const sf_cli_command *b = NULL;
    for (int i = 0; i < N_BENCHES; i++)
        if (strcmp(benches[i].name, what) == 0) b = &benches[i];
    if (!b) return sf_cli_usage_error(a.cmd, "unknown benchmark '%.64s'", what);

    /* The benchmark gets the rest of the line with argv[0] = "bench NAME", so
     * that its messages and help pointers name it in full. */
    int first = a.next - 1, sub_argc = argc - first;
    char name[64];
    snprintf(name, sizeof name, "bench %s", b->name);
    char **sub = malloc((size_t)(sub_argc + 1) * sizeof *sub);
    if (!sub) return sf_cli_fail("out of memory");
    sub[0] = name;
    for (int i = 1; i < sub_argc; i++) sub[i] = argv[first + i];
    sub[sub_argc] = NULL;
    int rc = b->run(sub_argc, sub);
    free(sub);
    return rc;
}
