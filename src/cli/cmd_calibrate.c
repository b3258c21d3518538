/*
 * cmd_calibrate.c - `soapflow calibrate`: measure this host as a machine of
 * MPI ranks (one rank a device, as the runtime runs them) and write a machine
 * file that the planning commands read.
 *
 *     mpirun -np 4 soapflow calibrate --out local.json
 *
 * The measurements and the machine they describe are the library's
 * (soapflow/calibrate.h, src/calibrate/calibrate.c): this file parses the
 * options, checks that rank 0 can write the file before anything is measured,
 * prints the summary and writes the machine file. MPI comes through the
 * runtime's communication interface (runtime.h; its MPI back end, comm_mpi.c,
 * is the one file that includes <mpi.h>), and only the commands that run ranks
 * start it, so every other command runs without mpirun.
 * With one rank there is no pair to measure: the link keeps the "cpu"
 * preset's figures, and the summary says so. Only rank 0 prints and writes;
 * the file is written atomically.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "soapflow/calibrate.h"
#include "soapflow/data.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/runtime.h"

#define DEFAULT_OUT "machine.json"
#define DEFAULT_NAME "local"
#define DEFAULT_MIN ((int64_t)8)
#define DEFAULT_MAX ((int64_t)64 << 20)
#define MAX_MESSAGE SF_CALIBRATE_MAX_MESSAGE
#define DEFAULT_GEMM 512

static int usage(FILE *out) {
    fprintf(out,
            "usage: mpirun -np P soapflow calibrate [options]\n"
            "\n"
            "Measure this host as a machine of P MPI ranks, one rank a device: ping-pong\n"
            "latency and bandwidth between ranks, MPI_Allreduce times, each rank's\n"
            "single-thread SGEMM rate and memory copy bandwidth. Rank 0 prints a summary and\n"
            "writes a machine file: 1 node, P devices of kind \"cpu-rank\" (fp32 peak = the\n"
            "SGEMM rate, memory = RAM / P), joined by shared memory with the measured link,\n"
            "and what the runtime adds (docs/formats-machine.md, \"runtime\"): the rate of its\n"
            "copies, the all-reduce's rate at each size measured and, with more ranks than\n"
            "cores, the cores they share (rates are then measured one rank a core).\n"
            "\n"
            "options:\n"
            "  -o, --out FILE       machine file to write (default: %s)\n"
            "  --name NAME          machine name in the file (default: %s)\n"
            "  --sizes MIN:MAX      ping-pong message sizes in bytes, doubling from MIN to\n"
            "                       MAX; K, M, G suffixes are powers of 1024 (default: 8:64M)\n"
            "  --gemm-size N        SGEMM of N x N matrices (default: %d)\n"
            "  --data NAME|none     time the input pipeline on this dataset (fashion-mnist,\n"
            "                       mnist): batches of a shuffled epoch as train feeds them,\n"
            "                       the samples a second each rank prepares (the device's\n"
            "                       input_samples_per_s); none, or a dataset not installed\n"
            "                       (said), leaves it out (default: fashion-mnist)\n"
            "  --data-dir DIR       the dataset's folder (default: as train finds it)\n"
            "  --input-batch N      samples a batch for it (default: 64)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Run it with OPENBLAS_NUM_THREADS=1 (it sets one BLAS thread itself, too). With\n"
            "one rank (no mpirun) there is no link to measure and the \"cpu\" preset's link\n"
            "figures are kept. As root, OpenMPI needs OMPI_ALLOW_RUN_AS_ROOT=1 and\n"
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; more ranks than cores need\n"
            "OMPI_MCA_rmaps_base_oversubscribe=1.\n"
            "\n"
            "example:\n"
            "  OPENBLAS_NUM_THREADS=1 mpirun -np 4 soapflow calibrate --out local.json\n"
            "  soapflow simulate --model lenet5 --machine local.json --strategy data\n",
            DEFAULT_OUT, DEFAULT_NAME, DEFAULT_GEMM);
    return SF_EXIT_OK;
}

typedef struct calib_opts {
    const char *out, *name, *sizes;
    int64_t gemm, min_size, max_size;
    const char *data, *data_dir;
    int64_t input_batch;
} calib_opts;

/* "64M" -> 67108864; K, M, G are binary. -1 when malformed or out of range. */
static int64_t parse_size(const char *s) {
    char num[32];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof num) return -1;
    memcpy(num, s, n + 1);
    int64_t mul = 1;
    char last = num[n - 1];
    if (last == 'K' || last == 'k') mul = (int64_t)1 << 10;
    if (last == 'M' || last == 'm') mul = (int64_t)1 << 20;
    if (last == 'G' || last == 'g') mul = (int64_t)1 << 30;
    if (mul > 1) num[n - 1] = '\0';
    int64_t v;
    if (sf_cli_parse_int(num, 1, MAX_MESSAGE, &v) != 0 || v > MAX_MESSAGE / mul) return -1;
    return v * mul;
}

static int parse(int argc, char **argv, calib_opts *o) {
    sf_cli_args a;
    sf_cli_args_init(&a, argc, argv);
    while (sf_cli_next(&a)) {
        if (sf_cli_help(&a)) return -1;
        if (sf_cli_str(&a, "--out", "-o", &o->out)) continue;
        if (sf_cli_str(&a, "--name", NULL, &o->name)) continue;
        if (sf_cli_str(&a, "--sizes", NULL, &o->sizes)) continue;
        if (sf_cli_int(&a, "--gemm-size", NULL, 16, 8192, &o->gemm)) continue;
        if (sf_cli_str(&a, "--data", NULL, &o->data)) continue;
        if (sf_cli_str(&a, "--data-dir", NULL, &o->data_dir)) continue;
        if (sf_cli_int(&a, "--input-batch", NULL, 1, 65536, &o->input_batch)) continue;
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
    if (strcmp(o->data, "none") != 0 && strcmp(o->data, "fashion-mnist") != 0 &&
        strcmp(o->data, "mnist") != 0)
        return sf_cli_usage_error(a.cmd, "--data wants fashion-mnist, mnist or none, got '%.64s'",
                                  o->data);
    if (strlen(o->name) >= SF_NAME_MAX)
        return sf_cli_usage_error(a.cmd, "--name is longer than %d bytes", SF_NAME_MAX - 1);
    if (o->sizes) {
        const char *colon = strchr(o->sizes, ':');
        char lo[32];
        size_t n = colon ? (size_t)(colon - o->sizes) : 0;
        if (!colon || n >= sizeof lo)
            return sf_cli_usage_error(a.cmd, "--sizes wants MIN:MAX, got '%.64s'", o->sizes);
        memcpy(lo, o->sizes, n);
        lo[n] = '\0';
        o->min_size = parse_size(lo);
        o->max_size = parse_size(colon + 1);
        if (o->min_size < 1 || o->max_size < o->min_size)
            return sf_cli_usage_error(a.cmd,
                                      "--sizes wants MIN:MAX with 1 <= MIN <= MAX <= 1G, got "
                                      "'%.64s'",
                                      o->sizes);
    }
    return SF_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

static int print_summary(const sf_calibrate_result *r, const sf_machine_desc *d,
                         const calib_opts *o, const char *data_note) {
    const char *out = o->out;
    char b1[48], b2[48];
    printf("calibrated %d rank%s on this host\n\n", r->ranks, r->ranks == 1 ? "" : "s");
    static const char *const h1[] = {"rank", "SGEMM GFLOP/s", "copy GB/s"};
    sf_cli_table *t = sf_cli_table_new(3, h1, "rrr");
    for (int i = 0; i < r->ranks; i++) {
        sf_cli_table_cell(t, "%d", i);
        if (r->gemm_flops[i] > 0) { /* with more ranks than cores, one rank a core measures */
            sf_cli_table_cell(t, "%.1f", r->gemm_flops[i] * 1e-9);
            sf_cli_table_cell(t, "%.2f", r->copy_Bps[i] * 1e-9);
        } else {
            sf_cli_table_cell(t, "-");
            sf_cli_table_cell(t, "-");
        }
    }
    int rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;

    if (r->ranks > 1) {
        static const char *const h2[] = {"message", "half round trip us", "GB/s"};
        t = sf_cli_table_new(3, h2, "rrr");
        for (int i = 0; i < r->n_sizes; i++) {
            sf_cli_table_cell(t, "%s", sf_fmt_bytes((double)r->sizes[i], b1, sizeof b1));
            sf_cli_table_cell(t, "%.2f", r->half_rtt_s[i] * 1e6);
            sf_cli_table_cell(t, "%.3f", (double)r->sizes[i] / r->half_rtt_s[i] * 1e-9);
        }
        fputc('\n', stdout);
        rc = sf_cli_table_print(t, stdout);
        sf_cli_table_free(t);
        if (rc != SF_EXIT_OK) return rc;
    }
    static const char *const h3[] = {"allreduce", "ms", "algorithm GB/s"};
    t = sf_cli_table_new(3, h3, "rrr");
    for (int i = 0; i < r->n_allreduce; i++) {
        sf_cli_table_cell(t, "%s", sf_fmt_bytes((double)r->allreduce_bytes[i], b1, sizeof b1));
        sf_cli_table_cell(t, "%.3f", r->allreduce_s[i] * 1e3);
        sf_cli_table_cell(t, "%.3f", (double)r->allreduce_bytes[i] / r->allreduce_s[i] * 1e-9);
    }
    fputc('\n', stdout);
    rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;

    t = sf_cli_table_new(2, NULL, "ll");
    sf_cli_table_cell(t, "device");
    sf_cli_table_cell(t, "%s: %.1f GFLOP/s fp32 (median SGEMM), %.2f GB/s, %s", d->kind.name,
                      d->kind.peak_flops[SF_DTYPE_FP32] * 1e-9, d->kind.mem_bw_Bps * 1e-9,
                      sf_fmt_bytes(d->kind.mem_bytes, b2, sizeof b2));
    sf_cli_table_cell(t, "link");
    if (r->ranks > 1)
        sf_cli_table_cell(t, "shared memory: %.2f us latency, %.2f GB/s (median over %d pair%s)",
                          d->intra_latency_s * 1e6, d->intra_bw_Bps * 1e-9, r->ranks - 1,
                          r->ranks > 2 ? "s" : "");
    else
        sf_cli_table_cell(t,
                          "one rank, nothing to measure: kept the cpu preset's %.2f us, "
                          "%.2f GB/s",
                          d->intra_latency_s * 1e6, d->intra_bw_Bps * 1e-9);
    sf_cli_table_cell(t, "runtime");
    double lo = 0, hi = 0;
    for (int i = 0; i < d->n_sync; i++) {
        lo = i == 0 || d->sync_bw_Bps[i] < lo ? d->sync_bw_Bps[i] : lo;
        hi = d->sync_bw_Bps[i] > hi ? d->sync_bw_Bps[i] : hi;
    }
    if (d->n_sync > 0)
        sf_cli_table_cell(t,
                          "copies at %.2f GB/s and %.1f ns a run; all-reduce steps at %.2f-%.2f "
                          "GB/s a link over %s-%s (fitted to MPI_Allreduce at each size)",
                          d->copy_bw_Bps * 1e-9, d->copy_run_s * 1e9, lo * 1e-9, hi * 1e-9,
                          sf_fmt_bytes(d->sync_bytes[0], b1, sizeof b1),
                          sf_fmt_bytes(d->sync_bytes[d->n_sync - 1], b2, sizeof b2));
    else
        sf_cli_table_cell(t,
                          "copies at %.2f GB/s and %.1f ns a run; all-reduce steps at the link's "
                          "bandwidth",
                          d->copy_bw_Bps * 1e-9, d->copy_run_s * 1e9);
    sf_cli_table_cell(t, "input");
    if (d->kind.input_samples_per_s > 0)
        sf_cli_table_cell(t, "%.0f samples/s a rank (median; batches of %lld from %s)",
                          d->kind.input_samples_per_s, (long long)o->input_batch, o->data);
    else
        sf_cli_table_cell(t, "not measured%s%s", data_note[0] ? ": " : "", data_note);
    if (r->cores > 0) {
        sf_cli_table_cell(t, "cores");
        sf_cli_table_cell(t,
                          "%d ranks on %d cores: ranks of one core take turns (pinned, waits "
                          "yield); rates measured one rank a core",
                          r->ranks, r->cores);
    }
    sf_cli_table_cell(t, "written");
    sf_cli_table_cell(t, "%s (machine '%s', %d device%s)", out, d->name, d->devices_per_node,
                      d->devices_per_node == 1 ? "" : "s");
    fputc('\n', stdout);
    rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    return rc;
}

/* Every rank measures; rank 0 writes the file and prints the summary. */
static int calibrate(const calib_opts *o, sf_comm *cm) {
    sf_calibrate_options co;
    sf_calibrate_options_default(&co);
    co.min_bytes = o->min_size;
    co.max_bytes = o->max_size;
    co.gemm_n = (int)o->gemm;
    co.input_batch = o->input_batch;
    /* the input pipeline's data on every rank; one not installed is said, not fatal
     * (the machine then has no input rate) */
    sf_dataset ds;
    memset(&ds, 0, sizeof ds);
    char data_note[SF_ERRMSG_MAX] = "";
    int have = 0;
    if (strcmp(o->data, "none") == 0) {
        snprintf(data_note, sizeof data_note, "--data none");
    } else {
        sf_error derr = {0};
        have = sf_dataset_load(o->data, "train", o->data_dir, &ds, &derr) == SF_OK;
        if (!have) snprintf(data_note, sizeof data_note, "%s", derr.msg);
    }
    int missing = !have; /* every rank times it, or none does */
    sf_comm_max(cm, &missing, 1);
    if (!missing)
        co.input = &ds;
    else if (have)
        snprintf(data_note, sizeof data_note, "%s is not there on every rank", o->data);
    sf_calibrate_result *r = malloc(sizeof *r); /* per-rank arrays: not on the stack */
    int failed = r == NULL;                     /* every rank stops together, or none does */
    sf_comm_max(cm, &failed, 1);
    sf_error err = {0};
    sf_status st = failed ? sf_error_set(&err, SF_ERR_NOMEM, "out of memory on some rank")
                          : sf_calibrate_run(cm, &co, r, &err);
    int rc = SF_EXIT_OK;
    if (st != SF_OK) {
        rc = sf_comm_rank(cm) == 0 ? sf_cli_fail("calibrate: %s", err.msg) : SF_EXIT_FAIL;
    } else if (sf_comm_rank(cm) == 0) {
        sf_machine_desc d;
        if (sf_calibrate_machine_desc(r, o->name, &d, &err) != SF_OK ||
            sf_machine_desc_save_json(&d, o->out, &err) != SF_OK)
            rc = sf_cli_fail_err(&err);
        else
            rc = print_summary(r, &d, o, data_note);
    }
    free(r);
    sf_dataset_free(&ds);
    return rc;
}

int sf_cmd_calibrate(int argc, char **argv) {
    calib_opts o = {DEFAULT_OUT,     DEFAULT_NAME, NULL, DEFAULT_GEMM, DEFAULT_MIN, DEFAULT_MAX,
                    "fashion-mnist", NULL,         64};
    int rc = parse(argc, argv, &o);
    if (rc < 0) return sf_cli_launcher_rank() == 0 ? usage(stdout) : SF_EXIT_OK;
    if (rc != SF_EXIT_OK) return rc;

    sf_error err = {0};
    sf_comm *cm = sf_comm_mpi_new(&err);
    if (!cm) return sf_cli_fail("calibrate: %s", err.msg);
    int rank = sf_comm_rank(cm), ranks = sf_comm_size(cm);
    if (ranks > SF_MAX_DEVICES) {
        if (rank == 0) sf_cli_fail("calibrate: at most %d ranks", SF_MAX_DEVICES);
        sf_comm_free(cm);
        return SF_EXIT_FAIL;
    }
    /* a file rank 0 cannot write is said before the measurements, by every
     * rank stopping together (a rank that returned alone would hang the rest) */
    int out_ok = 1;
    if (rank == 0 && sf_write_file_check(o.out, &err) != SF_OK) {
        sf_cli_fail_err(&err);
        out_ok = 0;
    }
    sf_comm_bcast(cm, &out_ok, sizeof out_ok, 0);
    if (!out_ok) {
        sf_comm_free(cm);
        return SF_EXIT_FAIL;
    }
    /* each rank is one single-threaded device, as in the runtime */
    sf_kernels_set_threads(1);
    if (rank != 0) sf_log_set_level(SF_LOG_ERROR);
    rc = calibrate(&o, cm);
    sf_comm_free(cm);
    return rc;
}
