/*
 * calibrate.c - measure this host as a machine of ranks (soapflow/calibrate.h).
 *
 * Every figure is the best of a few trials after a warm-up run: the noise on
 * a shared host only ever adds time, so the best trial is the nearest to what
 * the hardware does. Across ranks and pairs the median is kept instead, since
 * one rank whose core was busy should not set the machine's figure, in either
 * direction. The compute and memory rates are measured on every rank at once,
 * as they will run in training (each rank then sees its share of the memory
 * bandwidth, not the whole socket's); the links one pair at a time, rank 0 with
 * each other rank while the rest wait, since the machine model gives every
 * pair its own link.
 *
 * MPI comes through the runtime's communication interface (runtime.h), so
 * this module also runs on the threads of sf_comm_local_run (the unit tests).
 */
#include "soapflow/calibrate.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "soapflow/data.h"
#include "soapflow/stats.h"

#include "runtime/box.h"
#include "runtime/comm_impl.h"

#define STREAM_BYTES ((size_t)32 << 20)
#define TRIALS 3
#define PINGPONG_BYTES_PER_TRIAL ((int64_t)8 << 20)

void sf_calibrate_options_default(sf_calibrate_options *o) {
    o->min_bytes = 8;
    o->max_bytes = (int64_t)64 << 20;
    o->gemm_n = 512;
    o->input = NULL;
    o->input_batch = 64;
}

/* ---- measurements ------------------------------------------------------- */

/* Best SGEMM rate (FLOP/s) of n x n x n. */
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

/* Best rate (samples a second) of the runtime's input pipeline: INPUT_BATCHES
 * batches of a shuffled epoch through sf_dataset_batch, as `train` fills each
 * iteration's batch. x and labels hold one batch, order the epoch. */
#define INPUT_BATCHES 8
static double input_rate(const sf_dataset *ds, int64_t batch, int64_t *order, float *x,
                         int32_t *labels) {
    double best = 1e30;
    for (int r = 0; r <= TRIALS; r++) { /* run 0 warms up */
        sf_data_shuffle(1, (uint64_t)r, order, ds->n);
        double t0 = sf_now_s();
        for (int b = 0; b < INPUT_BATCHES; b++)
            sf_dataset_batch(ds, order, b * batch, batch, x, labels);
        double dt = sf_now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return best > 0 ? (double)(INPUT_BATCHES * batch) / best : 0;
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

/* Best time (s) of the runtime's copy (sf_box_move) of region r of a tensor laid
 * out as tile a into a buffer of r's own layout, of 24 trials: a run costs a few
 * nanoseconds, and a busy host only ever adds to it. */
static double box_time(const float *src, const sf_tile *a, float *dst, const sf_tile *r) {
    double best = 1e30;
    for (int k = 0; k <= 8 * TRIALS; k++) { /* run 0 warms up; 0.1 ms each */
        double t0 = sf_now_s();
        sf_box_move(src, a, dst, r, r, 0);
        double dt = sf_now_s() - t0;
        if (k > 0 && dt < best) best = dt;
    }
    return best;
}

/* The time (s) of one run of the runtime's copies, on top of their bytes: a
 * [64, 16, 10, 10] tensor (400 KB, in the caches, as LeNet's activations are)
 * copied half on its last dimension (10240 runs of 5 floats) against half on
 * its first (one run of as many bytes). buf holds 2 x 102400 floats and more. */
#define RUN_ELEMS 102400
static double copy_run_time(float *buf) {
    sf_tile a = {.ndim = 4, .hi = {64, 16, 10, 10}}, rows = a, whole = a;
    rows.hi[3] = 5;
    whole.hi[0] = 32;
    for (int64_t i = 0; i < RUN_ELEMS; i++) buf[i] = (float)(i % 97);
    /* the destination off the source's page offset (4K aliasing slows memcpy) */
    float *dst = buf + RUN_ELEMS + 272;
    double t_rows = box_time(buf, &a, dst, &rows), t_whole = box_time(buf, &a, dst, &whole);
    buf[0] = dst[RUN_ELEMS / 2 - 1]; /* the copies are used */
    double per = (t_rows - t_whole) / (double)(sf_tile_runs(&rows, &a, &rows) - 1);
    return per > 0 ? per : 0;
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

/* Time (s) of one all-reduce (sum, nonblocking and its wait through the
 * runtime's communication interface) of `count` floats: the slowest rank of
 * each trial, the best trial. Valid on every rank; times[] has a slot per rank. */
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

/* ---- fitting ------------------------------------------------------------- */

double sf_calibrate_ring_bandwidth(int ranks, double latency_s, double bytes, double seconds) {
    if (ranks < 2) return 0;
    double steps = 2.0 * (ranks - 1);
    double t = seconds - steps * latency_s;
    double bw = t > 0 ? steps / ranks * bytes / t : 0;
    return bw >= SF_MIN_RATE && bw <= SF_MAX_RATE ? bw : 0;
}

/* The link from the medians of the pairs (rank 0). */
static void fit_link(sf_calibrate_result *r, const double *per_pair) {
    double tmp[SF_MAX_DEVICES];
    int np = r->ranks - 1;
    for (int i = 0; i < r->n_sizes && np > 0; i++) {
        for (int p = 0; p < np; p++) tmp[p] = per_pair[p * SF_CALIBRATE_MAX_SIZES + i];
        r->half_rtt_s[i] = sf_median(tmp, np);
    }
    if (np > 0) {
        r->latency_s = r->half_rtt_s[0];
        double big = r->half_rtt_s[r->n_sizes - 1] - r->latency_s;
        if (!(big > 0)) big = r->half_rtt_s[r->n_sizes - 1];
        r->bw_Bps = (double)r->sizes[r->n_sizes - 1] / big;
    }
}

/* The device's figures from the ranks that measured (rank 0). */
static void fit_device(sf_calibrate_result *r) {
    double tg[SF_MAX_DEVICES], tc[SF_MAX_DEVICES], ti[SF_MAX_DEVICES];
    int n = r->ranks;
    if (r->cores > 0 && r->cores < n) n = r->cores; /* the ranks that measured */
    memcpy(tg, r->gemm_flops, (size_t)n * sizeof *tg);
    memcpy(tc, r->copy_Bps, (size_t)n * sizeof *tc);
    memcpy(ti, r->input_sps, (size_t)n * sizeof *ti);
    r->peak_flops = sf_median(tg, n);
    r->mem_bw_Bps = sf_median(tc, n);
    memcpy(tc, r->copy_run_s, (size_t)n * sizeof *tc);
    r->copy_run_s_median = sf_median(tc, n);
    r->input_samples_per_s = sf_median(ti, n);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    r->mem_bytes = pages > 0 && page > 0 ? (double)pages * (double)page / r->ranks : 4e9;
}

/* The sizes to measure. */
static void plan_sizes(const sf_calibrate_options *o, sf_calibrate_result *r) {
    for (int64_t s = o->min_bytes; s <= o->max_bytes && r->n_sizes < SF_CALIBRATE_MAX_SIZES; s *= 2)
        r->sizes[r->n_sizes++] = s;
    if (r->sizes[r->n_sizes - 1] != o->max_bytes && r->n_sizes < SF_CALIBRATE_MAX_SIZES)
        r->sizes[r->n_sizes++] = o->max_bytes;
    static const int64_t ar_sizes[] = {(int64_t)4 << 10, (int64_t)1 << 20, (int64_t)16 << 20};
    for (int i = 0; i < 3; i++)
        if (ar_sizes[i] <= o->max_bytes) r->allreduce_bytes[r->n_allreduce++] = ar_sizes[i];
    if (r->n_allreduce == 0 || r->allreduce_bytes[r->n_allreduce - 1] < o->max_bytes)
        r->allreduce_bytes[r->n_allreduce++] = o->max_bytes;
    if (r->allreduce_bytes[0] < 4) r->allreduce_bytes[0] = 4;
}

/* ---- the calibration ------------------------------------------------------ */

sf_status sf_calibrate_run(sf_comm *cm, const sf_calibrate_options *o, sf_calibrate_result *out,
                           sf_error *err) {
    int rank = sf_comm_rank(cm), ranks = sf_comm_size(cm);
    if (ranks > SF_MAX_DEVICES)
        return sf_error_set(err, SF_ERR_INVALID, "at most %d ranks", SF_MAX_DEVICES);
    if (o->min_bytes < 1 || o->max_bytes < o->min_bytes || o->max_bytes > SF_CALIBRATE_MAX_MESSAGE)
        return sf_error_set(
            err, SF_ERR_INVALID, "message sizes %lld..%lld: want 1 <= min <= max <= %lld",
            (long long)o->min_bytes, (long long)o->max_bytes, (long long)SF_CALIBRATE_MAX_MESSAGE);
    if (o->gemm_n < 16 || o->gemm_n > 8192)
        return sf_error_set(err, SF_ERR_INVALID, "SGEMM size %d: want 16 to 8192", o->gemm_n);
    if (o->input && (o->input_batch < 1 || o->input_batch > 65536 || o->input->n < 1))
        return sf_error_set(err, SF_ERR_INVALID,
                            "input pipeline: batch %lld of %lld samples: want 1 to 65536 of at "
                            "least 1",
                            (long long)o->input_batch, (long long)o->input->n);
    sf_calibrate_result *r = out;
    memset(r, 0, sizeof *r);
    r->ranks = ranks;
    plan_sizes(o, r);

    size_t gn = (size_t)o->gemm_n * (size_t)o->gemm_n;
    size_t msg = (size_t)o->max_bytes;
    size_t ar = (size_t)r->allreduce_bytes[r->n_allreduce - 1];
    unsigned char *buf = malloc(msg);
    float *mats = malloc(3 * gn * sizeof *mats);
    unsigned char *stream = malloc(2 * STREAM_BYTES);
    float *ar_buf = malloc(ar);
    double *times = calloc((size_t)ranks, sizeof *times);
    double *per_pair =
        malloc((size_t)(ranks > 1 ? ranks - 1 : 1) * SF_CALIBRATE_MAX_SIZES * sizeof(double));
    const sf_dataset *ds = o->input;
    int64_t ib = ds ? o->input_batch : 0, im = ds ? ds->c * ds->h * ds->w : 0;
    int64_t *order = ds ? malloc((size_t)ds->n * sizeof *order) : NULL;
    float *ix = ds ? malloc((size_t)(ib * im + 1) * sizeof *ix) : NULL;
    int32_t *il = ds ? malloc((size_t)ib * sizeof *il) : NULL;
    int failed =
        !(buf && mats && stream && ar_buf && times && per_pair) || (ds && !(order && ix && il));
    sf_comm_max(cm, &failed, 1);
    sf_status st = SF_OK;
    if (failed) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory on some rank");
        goto done;
    }
    memset(buf, 0, msg);
    memset(ar_buf, 0, ar);

    /* compute and memory first, every rank at once, as they will run; with
     * more ranks than cores, one rank a core (the ranks of a core take turns,
     * as the machine's cores_per_node tells the simulator) */
    r->cores = sf_comm_shared_cores(cm);
    r->sync_after_backward = cm->can_defer;
    int measures = r->cores == 0 || rank < r->cores;
    sf_comm_barrier(cm);
    double g = measures ? gemm_rate(o->gemm_n, mats, mats + gn, mats + 2 * gn) : 0;
    sf_comm_barrier(cm);
    double c = measures ? copy_rate(stream, stream + STREAM_BYTES, STREAM_BYTES) : 0;
    sf_comm_barrier(cm);
    double cr = measures ? copy_run_time((float *)(void *)stream) : 0;
    sf_comm_barrier(cm);
    double in = measures && ds ? input_rate(ds, ib, order, ix, il) : 0;
    r->gemm_flops[rank] = g; /* gathered as sums of one slot per rank */
    r->copy_Bps[rank] = c;
    r->copy_run_s[rank] = cr;
    r->input_sps[rank] = in;
    sf_comm_sum(cm, r->gemm_flops, ranks);
    sf_comm_sum(cm, r->copy_Bps, ranks);
    sf_comm_sum(cm, r->copy_run_s, ranks);
    sf_comm_sum(cm, r->input_sps, ranks);

    /* links: rank 0 with each other rank in turn, the others idle */
    for (int peer = 1; peer < ranks; peer++) {
        for (int i = 0; i < r->n_sizes; i++)
            per_pair[(peer - 1) * SF_CALIBRATE_MAX_SIZES + i] =
                pingpong(cm, rank, peer, buf, r->sizes[i]);
        sf_comm_barrier(cm);
    }
    for (int i = 0; i < r->n_allreduce; i++)
        r->allreduce_s[i] = allreduce_time(
            cm, ar_buf, (int)(r->allreduce_bytes[i] / (int64_t)sizeof(float)), times);

    if (rank == 0) {
        fit_link(r, per_pair);
        fit_device(r);
    }
    /* rank 0's figures everywhere: only it timed the pairs */
    st = sf_comm_bcast(cm, r, sizeof *r, 0);
    if (st != SF_OK) sf_error_set(err, st, "sharing the results failed");
done:
    free(buf);
    free(mats);
    free(stream);
    free(ar_buf);
    free(times);
    free(per_pair);
    free(order);
    free(ix);
    free(il);
    return st;
}

sf_status sf_calibrate_machine_desc(const sf_calibrate_result *r, const char *name,
                                    sf_machine_desc *d, sf_error *err) {
    if (strlen(name) >= SF_NAME_MAX)
        return sf_error_set(err, SF_ERR_INVALID, "machine name longer than %d bytes",
                            SF_NAME_MAX - 1);
    sf_status st = sf_machine_preset_desc("cpu", d, err);
    if (st != SF_OK) return st;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->nodes = 1;
    d->devices_per_node = r->ranks;
    snprintf(d->kind.name, sizeof d->kind.name, "cpu-rank");
    d->kind.peak_flops[SF_DTYPE_FP32] = r->peak_flops;
    d->kind.peak_flops[SF_DTYPE_FP16] = 0;
    d->kind.peak_flops[SF_DTYPE_BF16] = 0;
    d->kind.mem_bw_Bps = r->mem_bw_Bps;
    d->kind.mem_bytes = r->mem_bytes;
    d->intra = SF_INTRA_SHM;
    if (r->ranks > 1) {
        d->intra_latency_s = r->latency_s;
        d->intra_bw_Bps = r->bw_Bps;
        for (int i = 0; i < r->n_allreduce && d->n_sync < SF_MAX_SYNC_POINTS; i++) {
            double bw = sf_calibrate_ring_bandwidth(
                r->ranks, r->latency_s, (double)r->allreduce_bytes[i], r->allreduce_s[i]);
            if (bw <= 0) continue;
            d->sync_bytes[d->n_sync] = (double)r->allreduce_bytes[i];
            d->sync_bw_Bps[d->n_sync++] = bw;
        }
    }
    d->copy_bw_Bps = r->mem_bw_Bps; /* the runtime's copies run at what a rank's memcpy reaches */
    d->copy_run_s = r->copy_run_s_median;
    d->sync_after_backward = r->sync_after_backward;
    d->cores_per_node = r->cores;
    d->kind.input_samples_per_s = r->input_samples_per_s;
    return sf_machine_desc_validate(d, err);
}
