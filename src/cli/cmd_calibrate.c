/*
 * cmd_calibrate.c - `soapflow calibrate`: measure this host as a machine of
 * MPI ranks (one rank a device, as the runtime runs them) and write a machine
 * file that the planning commands read.
 *
 *     mpirun -np 4 soapflow calibrate --out local.json
 *
 * What is measured, and how each figure enters the machine description:
 *  - point-to-point ping-pong between rank 0 and every other rank, over
 *    message sizes MIN..MAX doubling: the link latency is the half round trip
 *    of the smallest message, the bandwidth the largest message's size over
 *    its half round trip less that latency (the machine model charges a
 *    transfer latency + bytes / bandwidth, so this fits both ends of it). The
 *    median over rank pairs becomes the shared-memory (SHM) link of a
 *    one-node machine;
 *  - MPI_Allreduce of a few sizes: printed, and each fitted to the
 *    simulator's ring as the per-link bandwidth of its steps at that size
 *    (the machine's runtime.allreduce curve, ring_bandwidth);
 *  - SGEMM on one thread (OpenBLAS set to one thread) on every rank at once:
 *    the median rate is the device's fp32 peak, so the analytic model's
 *    efficiencies apply to what BLAS reaches on this core, not to a data-sheet
 *    figure this host never sees;
 *  - a STREAM-like copy on every rank at once (2 x bytes moved / time): the
 *    device memory bandwidth each rank gets while all of them run, and the
 *    rate of the runtime's copies of tile regions (runtime.copy_GBps);
 *  - physical memory (sysconf) divided by the rank count: each rank's memory.
 *
 * MPI comes through the runtime's communication interface (runtime.h; its
 * MPI back end, comm_mpi.c, is the one file that includes <mpi.h>), and only
 * the commands that run ranks start it, so every other command runs without
 * mpirun.
 * With one rank there is no pair to measure: the link keeps the "cpu"
 * preset's figures, and the summary says so. Only rank 0 prints and writes;
 * the file is written atomically.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/runtime.h"

#define DEFAULT_OUT "machine.json"
#define DEFAULT_NAME "local"
#define DEFAULT_MIN ((int64_t)8)
#define DEFAULT_MAX ((int64_t)64 << 20)
#define MAX_MESSAGE ((int64_t)1 << 30)
#define DEFAULT_GEMM 512
#define STREAM_BYTES ((size_t)32 << 20)
#define TRIALS 3
#define PINGPONG_BYTES_PER_TRIAL ((int64_t)8 << 20)
#define MAX_SIZES 40

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
        sf_cli_unknown(&a);
    }
    if (a.status) return a.status;
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

/* ---- measurements ------------------------------------------------------- */

/* Best SGEMM rate (FLOP/s) of n x n x n on one thread. */
static double gemm_rate(int n, float *a, float *b, float *c) {
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    }
    double best = 1e30;
    for (int r = 0; r <= TRIALS; r++) { /* run 0 warms up */
        double t0 = sf_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double dt = sf_now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * (double)n * (double)n * (double)n / best;
}

/* Best copy bandwidth (bytes moved, read + written, per second). */
static double copy_rate(unsigned char *src, unsigned char *dst, size_t bytes) {
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    double best = 1e30;
    for (int r = 0; r <= TRIALS + 2; r++) {
        double t0 = sf_now_s();
        memcpy(dst, src, bytes);
        double dt = sf_now_s() - t0;
        src[r % bytes] = dst[(r * 7) % bytes]; /* the copy is used: it cannot be elided */
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * (double)bytes / best;
}

/* Half round trip (s) of `bytes` between rank 0 and `peer`, best of TRIALS
 * averages; valid on rank 0. Ranks other than 0 and peer do nothing. */
static double pingpong(sf_comm *cm, int rank, int peer, unsigned char *buf, int64_t bytes) {
    int64_t iters = PINGPONG_BYTES_PER_TRIAL / bytes;
    if (iters < 2) iters = 2;
    if (iters > 200) iters = 200;
    double best = 1e30;
    size_t n = (size_t)bytes;
    for (int trial = 0; trial <= TRIALS; trial++) { /* trial 0 warms up */
        if (rank == 0) {
            double t0 = sf_now_s();
            for (int64_t i = 0; i < iters; i++) {
                sf_comm_send(cm, buf, n, peer, 0);
                sf_comm_recv(cm, buf, n, peer, 0);
            }
            double dt = (sf_now_s() - t0) / (2.0 * (double)iters);
            if (trial > 0 && dt < best) best = dt;
        } else if (rank == peer) {
            for (int64_t i = 0; i < iters; i++) {
                sf_comm_recv(cm, buf, n, 0, 0);
                sf_comm_send(cm, buf, n, 0, 0);
            }
        }
    }
    return best;
}

/* Time (s) of one all-reduce (sum, MPI_Iallreduce and its wait through the runtime's
 * communication interface) of `count` floats: the slowest rank of each trial,
 * the best trial. Valid on every rank; times[] has a slot per rank. */
static double allreduce_time(sf_comm *cm, float *buf, int count, double *times) {
    double best = 1e30;
    int rank = sf_comm_rank(cm), ranks = sf_comm_size(cm);
    for (int trial = 0; trial <= TRIALS; trial++) {
        sf_comm_barrier(cm);
        double t0 = sf_now_s();
        sf_comm_sum_floats(cm, buf, count);
        memset(times, 0, (size_t)ranks * sizeof *times);
        times[rank] = sf_now_s() - t0;
        sf_comm_sum(cm, times, ranks);
        double slowest = 0;
        for (int r = 0; r < ranks; r++) slowest = times[r] > slowest ? times[r] : slowest;
        if (trial > 0 && slowest < best) best = slowest;
    }
    return best;
}

/* ---- the command -------------------------------------------------------- */

typedef struct results {
    int ranks;
    int n_sizes;
    int64_t sizes[MAX_SIZES];
    double half_rtt[MAX_SIZES]; /* median over pairs, s */
    double latency_s, bw_Bps;
    int n_ar;
    int64_t ar_bytes[4];
    double ar_s[4];
    double *gemm; /* [ranks] FLOP/s */
    double *copy; /* [ranks] B/s */
    double peak_flops, mem_bw, mem_bytes;
    int cores; /* the host's cores when the ranks outnumber them, else 0 */
} results;

/* The per-link bandwidth that makes the simulator's ring all-reduce of the
 * i-th size measured take what MPI_Allreduce took: the ring prices 2(P-1)
 * steps of latency and sends 2(P-1)/P of the buffer over each link, so bw =
 * 2(P-1)/P N / (T - 2(P-1) latency). On shared memory the reduction is the
 * ranks' own work and runs far below the ping-pong bandwidth, slower still
 * once the buffers outgrow the caches. 0 (no point) when the fit has no time
 * left for the bytes. */
static double ring_bandwidth(const results *r, int i) {
    if (r->ranks < 2) return 0;
    double steps = 2.0 * (r->ranks - 1);
    double t = r->ar_s[i] - steps * r->latency_s;
    double bw = t > 0 ? steps / r->ranks * (double)r->ar_bytes[i] / t : 0;
    return bw >= SF_MIN_RATE && bw <= SF_MAX_RATE ? bw : 0;
}

static int print_summary(const results *r, const sf_machine_desc *d, const char *out) {
    char b1[48], b2[48];
    printf("calibrated %d rank%s on this host\n\n", r->ranks, r->ranks == 1 ? "" : "s");
    static const char *const h1[] = {"rank", "SGEMM GFLOP/s", "copy GB/s"};
    sf_cli_table *t = sf_cli_table_new(3, h1, "rrr");
    for (int i = 0; i < r->ranks; i++) {
        sf_cli_table_cell(t, "%d", i);
        if (r->gemm[i] > 0) { /* with more ranks than cores, one rank a core measures */
            sf_cli_table_cell(t, "%.1f", r->gemm[i] * 1e-9);
            sf_cli_table_cell(t, "%.2f", r->copy[i] * 1e-9);
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
            sf_cli_table_cell(t, "%s", sf_cli_fmt_bytes((double)r->sizes[i], b1, sizeof b1));
            sf_cli_table_cell(t, "%.2f", r->half_rtt[i] * 1e6);
            sf_cli_table_cell(t, "%.3f", (double)r->sizes[i] / r->half_rtt[i] * 1e-9);
        }
        fputc('\n', stdout);
        rc = sf_cli_table_print(t, stdout);
        sf_cli_table_free(t);
        if (rc != SF_EXIT_OK) return rc;
    }
    static const char *const h3[] = {"allreduce", "ms", "algorithm GB/s"};
    t = sf_cli_table_new(3, h3, "rrr");
    for (int i = 0; i < r->n_ar; i++) {
        sf_cli_table_cell(t, "%s", sf_cli_fmt_bytes((double)r->ar_bytes[i], b1, sizeof b1));
        sf_cli_table_cell(t, "%.3f", r->ar_s[i] * 1e3);
        sf_cli_table_cell(t, "%.3f", (double)r->ar_bytes[i] / r->ar_s[i] * 1e-9);
    }
    fputc('\n', stdout);
    rc = sf_cli_table_print(t, stdout);
    sf_cli_table_free(t);
    if (rc != SF_EXIT_OK) return rc;

    t = sf_cli_table_new(2, NULL, "ll");
    sf_cli_table_cell(t, "device");
    sf_cli_table_cell(t, "%s: %.1f GFLOP/s fp32 (median SGEMM), %.2f GB/s, %s", d->kind.name,
                      d->kind.peak_flops[SF_DTYPE_FP32] * 1e-9, d->kind.mem_bw_Bps * 1e-9,
                      sf_cli_fmt_bytes(d->kind.mem_bytes, b2, sizeof b2));
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
                          "copies at %.2f GB/s; all-reduce steps at %.2f-%.2f GB/s a link over "
                          "%s-%s (fitted to MPI_Allreduce at each size)",
                          d->copy_bw_Bps * 1e-9, lo * 1e-9, hi * 1e-9,
                          sf_cli_fmt_bytes(d->sync_bytes[0], b1, sizeof b1),
                          sf_cli_fmt_bytes(d->sync_bytes[d->n_sync - 1], b2, sizeof b2));
    else
        sf_cli_table_cell(t, "copies at %.2f GB/s; all-reduce steps at the link's bandwidth",
                          d->copy_bw_Bps * 1e-9);
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

/* The machine description from the results (rank 0). */
static int make_desc(const results *r, const calib_opts *o, sf_machine_desc *d) {
    sf_error err = {0};
    if (sf_machine_preset_desc("cpu", d, &err) != SF_OK) return sf_cli_fail_err(&err);
    snprintf(d->name, sizeof d->name, "%s", o->name);
    d->nodes = 1;
    d->devices_per_node = r->ranks;
    snprintf(d->kind.name, sizeof d->kind.name, "cpu-rank");
    d->kind.peak_flops[SF_DTYPE_FP32] = r->peak_flops;
    d->kind.peak_flops[SF_DTYPE_FP16] = 0;
    d->kind.peak_flops[SF_DTYPE_BF16] = 0;
    d->kind.mem_bw_Bps = r->mem_bw;
    d->kind.mem_bytes = r->mem_bytes;
    d->intra = SF_INTRA_SHM;
    if (r->ranks > 1) {
        d->intra_latency_s = r->latency_s;
        d->intra_bw_Bps = r->bw_Bps;
        for (int i = 0; i < r->n_ar && d->n_sync < SF_MAX_SYNC_POINTS; i++) {
            double bw = ring_bandwidth(r, i);
            if (bw <= 0) continue;
            d->sync_bytes[d->n_sync] = (double)r->ar_bytes[i];
            d->sync_bw_Bps[d->n_sync++] = bw;
        }
    }
    d->copy_bw_Bps = r->mem_bw; /* the runtime's copies run at what a rank's memcpy reaches */
    d->cores_per_node = r->cores;
    if (sf_machine_desc_validate(d, &err) != SF_OK) return sf_cli_fail_err(&err);
    return SF_EXIT_OK;
}

/* Every rank runs this, in the same order: the collectives must match. */
static int calibrate(const calib_opts *o, sf_comm *cm) {
    int rank = sf_comm_rank(cm), ranks = sf_comm_size(cm);
    results r;
    memset(&r, 0, sizeof r);
    r.ranks = ranks;
    for (int64_t s = o->min_size; s <= o->max_size && r.n_sizes < MAX_SIZES; s *= 2)
        r.sizes[r.n_sizes++] = s;
    if (r.sizes[r.n_sizes - 1] != o->max_size && r.n_sizes < MAX_SIZES)
        r.sizes[r.n_sizes++] = o->max_size;
    static const int64_t ar_sizes[] = {(int64_t)4 << 10, (int64_t)1 << 20, (int64_t)16 << 20};
    for (int i = 0; i < 3; i++)
        if (ar_sizes[i] <= o->max_size) r.ar_bytes[r.n_ar++] = ar_sizes[i];
    if (r.n_ar == 0 || r.ar_bytes[r.n_ar - 1] < o->max_size) r.ar_bytes[r.n_ar++] = o->max_size;
    if (r.ar_bytes[0] < 4) r.ar_bytes[0] = 4;

    size_t gn = (size_t)o->gemm * (size_t)o->gemm;
    size_t msg = (size_t)o->max_size;
    size_t ar = (size_t)r.ar_bytes[r.n_ar - 1];
    unsigned char *buf = malloc(msg);
    float *mats = malloc(3 * gn * sizeof *mats);
    unsigned char *stream = malloc(2 * STREAM_BYTES);
    float *ar_buf = malloc(ar);
    double *times = calloc((size_t)ranks, sizeof *times);
    double *per_pair = malloc((size_t)(ranks > 1 ? ranks - 1 : 1) * MAX_SIZES * sizeof(double));
    r.gemm = calloc((size_t)ranks, sizeof *r.gemm);
    r.copy = calloc((size_t)ranks, sizeof *r.copy);
    int failed = !(buf && mats && stream && ar_buf && times && per_pair && r.gemm && r.copy);
    sf_comm_max(cm, &failed, 1);
    int all_ok = !failed;
    int rc = SF_EXIT_OK;
    if (!all_ok) {
        if (rank == 0)
            rc = sf_cli_fail("calibrate: out of memory on some rank");
        else
            rc = SF_EXIT_FAIL;
        goto done;
    }
    memset(buf, 0, msg);
    memset(ar_buf, 0, ar);

    /* compute and memory first, every rank at once, as they will run; with
     * more ranks than cores, one rank a core (the ranks of a core take turns,
     * as the machine's cores_per_node tells the simulator) */
    r.cores = sf_comm_shared_cores(cm);
    int measures = r.cores == 0 || rank < r.cores;
    sf_comm_barrier(cm);
    double g = measures ? gemm_rate((int)o->gemm, mats, mats + gn, mats + 2 * gn) : 0;
    sf_comm_barrier(cm);
    double c = measures ? copy_rate(stream, stream + STREAM_BYTES, STREAM_BYTES) : 0;
    r.gemm[rank] = g; /* gathered as sums of one slot per rank */
    r.copy[rank] = c;
    sf_comm_sum(cm, r.gemm, ranks);
    sf_comm_sum(cm, r.copy, ranks);

    /* links: rank 0 with each other rank in turn, the others idle */
    for (int peer = 1; peer < ranks; peer++) {
        for (int i = 0; i < r.n_sizes; i++)
            per_pair[(peer - 1) * MAX_SIZES + i] = pingpong(cm, rank, peer, buf, r.sizes[i]);
        sf_comm_barrier(cm);
    }
    for (int i = 0; i < r.n_ar; i++)
        r.ar_s[i] =
            allreduce_time(cm, ar_buf, (int)(r.ar_bytes[i] / (int64_t)sizeof(float)), times);

    if (rank == 0) {
        double tmp[SF_MAX_DEVICES];
        int np = ranks - 1 < SF_MAX_DEVICES ? ranks - 1 : SF_MAX_DEVICES;
        for (int i = 0; i < r.n_sizes && np > 0; i++) {
            for (int p = 0; p < np; p++) tmp[p] = per_pair[p * MAX_SIZES + i];
            r.half_rtt[i] = sf_cli_median(tmp, np);
        }
        if (np > 0) {
            r.latency_s = r.half_rtt[0];
            double big = r.half_rtt[r.n_sizes - 1] - r.latency_s;
            if (!(big > 0)) big = r.half_rtt[r.n_sizes - 1];
            r.bw_Bps = (double)r.sizes[r.n_sizes - 1] / big;
        }
        double tg[SF_MAX_DEVICES], tc[SF_MAX_DEVICES];
        int n = ranks < SF_MAX_DEVICES ? ranks : SF_MAX_DEVICES;
        if (r.cores > 0 && r.cores < n) n = r.cores; /* the ranks that measured */
        memcpy(tg, r.gemm, (size_t)n * sizeof *tg);
        memcpy(tc, r.copy, (size_t)n * sizeof *tc);
        r.peak_flops = sf_cli_median(tg, n);
        r.mem_bw = sf_cli_median(tc, n);
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        r.mem_bytes = pages > 0 && page > 0 ? (double)pages * (double)page / ranks : 4e9;

        sf_machine_desc d;
        sf_error err = {0};
        rc = make_desc(&r, o, &d);
        if (rc == SF_EXIT_OK && sf_machine_desc_save_json(&d, o->out, &err) != SF_OK)
            rc = sf_cli_fail_err(&err);
        if (rc == SF_EXIT_OK) rc = print_summary(&r, &d, o->out);
    }
done:
    free(buf);
    free(mats);
    free(stream);
    free(ar_buf);
    free(times);
    free(per_pair);
    free(r.gemm);
    free(r.copy);
    return rc;
}

int sf_cmd_calibrate(int argc, char **argv) {
    calib_opts o = {DEFAULT_OUT, DEFAULT_NAME, NULL, DEFAULT_GEMM, DEFAULT_MIN, DEFAULT_MAX};
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
