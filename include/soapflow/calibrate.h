/*
 * soapflow/calibrate.h - measure this host as a machine of ranks (one rank a
 * device, as the runtime runs them) and describe it as a machine.
 *
 * On every rank of a communicator (sf_comm_mpi_new under mpirun, or the
 * threads of sf_comm_local_run), in the same order:
 *
 *     sf_calibrate_options o;
 *     sf_calibrate_options_default(&o);
 *     o.max_bytes = 4096;                         // ping-pong 8 B .. 4 KiB
 *     o.gemm_n = 64;
 *     sf_calibrate_result *r = malloc(sizeof *r); // per-rank arrays: keep it off the stack
 *     sf_machine_desc d;
 *     sf_status st = r ? sf_calibrate_run(c, &o, r, &err) : SF_ERR_NOMEM;
 *     if (st == SF_OK) st = sf_calibrate_machine_desc(r, "local", &d, &err);
 *     free(r);                                    // d: a machine file's worth (io.h writes it)
 *
 * What is measured, and how each figure enters the machine description:
 *  - point-to-point ping-pong between rank 0 and every other rank, over
 *    message sizes min_bytes..max_bytes doubling: the link latency is the half
 *    round trip of the smallest message, the bandwidth the largest message's
 *    size over its half round trip less that latency (the machine model
 *    charges a transfer latency + bytes / bandwidth, so this fits both ends of
 *    it). The median over rank pairs becomes the shared-memory (SHM) link of a
 *    one-node machine;
 *  - the all-reduce (sf_comm_sum_floats) of a few sizes, each fitted to the
 *    simulator's ring as the per-link bandwidth of its steps at that size
 *    (sf_calibrate_ring_bandwidth; the machine's runtime.allreduce curve);
 *  - SGEMM on every rank at once: the median rate is the device's fp32 peak,
 *    so the analytic model's efficiencies apply to what BLAS reaches on this
 *    core, not to a data-sheet figure this host never sees. Run with one BLAS
 *    thread (sf_kernels_set_threads(1)), as the runtime's ranks run;
 *  - a STREAM-like copy on every rank at once (2 x bytes moved / time): the
 *    device memory bandwidth each rank gets while all of them run, and the
 *    rate of the runtime's copies of tile regions (runtime.copy_GBps);
 *  - physical memory divided by the rank count: each rank's memory;
 *  - with a dataset (options.input), the runtime's input pipeline on every
 *    rank at once: batches of a shuffled epoch through sf_dataset_batch, the
 *    samples a second each rank prepares (the device's input_samples_per_s).
 * With more ranks than cores (sf_comm_shared_cores), the rates are measured
 * one rank a core and the machine says the cores are shared
 * (runtime.cores_per_node). With one rank there is no pair to measure: the
 * link keeps the "cpu" preset's figures.
 *
 * Nothing is printed or written: the result is a plain struct the caller
 * prints, and sf_calibrate_machine_desc the description it saves.
 */
#ifndef SOAPFLOW_CALIBRATE_H
#define SOAPFLOW_CALIBRATE_H

#include <stdint.h>

#include "soapflow/core.h"
#include "soapflow/machine.h"
#include "soapflow/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_CALIBRATE_MAX_SIZES 40                   /* ping-pong sizes measured */
#define SF_CALIBRATE_MAX_ALLREDUCE 4                /* all-reduce sizes measured */
#define SF_CALIBRATE_MAX_MESSAGE ((int64_t)1 << 30) /* largest max_bytes */

typedef struct sf_calibrate_options {
    int64_t min_bytes, max_bytes;   /* ping-pong sizes, doubling from min to max (max
                                       included): 1 <= min <= max <= SF_CALIBRATE_MAX_MESSAGE
                                       (default 8 B .. 64 MiB) */
    int gemm_n;                     /* SGEMM of n x n matrices, 16 .. 8192 (default 512) */
    const struct sf_dataset *input; /* the training data whose input pipeline is timed
                                     * (sf_dataset_batch, as `train` feeds batches);
                                     * NULL: not measured (default) */
    int64_t input_batch;            /* samples a batch, 1 .. 65536 (default 64) */
} sf_calibrate_options;

SF_API void sf_calibrate_options_default(sf_calibrate_options *o);

/* What one calibration measured: the same on every rank once
 * sf_calibrate_run returns SF_OK (rank 0's figures, broadcast). */
typedef struct sf_calibrate_result {
    int ranks;
    int cores; /* the host's cores when the ranks outnumber them (sf_comm_shared_cores), else 0 */
    int sync_after_backward; /* 1: the back end runs the runtime's sync collectives blocking
                              * after the backward pass (comm_impl.h, can_defer: MPI, a core
                              * a rank) */
    /* links: ping-pong between rank 0 and each other rank (none with one rank) */
    int n_sizes;
    int64_t sizes[SF_CALIBRATE_MAX_SIZES];     /* message bytes, increasing */
    double half_rtt_s[SF_CALIBRATE_MAX_SIZES]; /* median over the pairs of each pair's best */
    double latency_s, bw_Bps;                  /* the link fitted to them (0 with one rank) */
    /* the all-reduce: slowest rank of each trial, best trial */
    int n_allreduce;
    int64_t allreduce_bytes[SF_CALIBRATE_MAX_ALLREDUCE]; /* increasing */
    double allreduce_s[SF_CALIBRATE_MAX_ALLREDUCE];
    /* each rank's rates; 0 for a rank that did not measure (it shares a core) */
    double gemm_flops[SF_MAX_DEVICES]; /* FLOP/s of one n x n x n SGEMM, best of 3 */
    double copy_Bps[SF_MAX_DEVICES];   /* bytes read + written per second, best of 5 */
    double copy_run_s[SF_MAX_DEVICES]; /* one run of the runtime's region copies beyond its
                                        * bytes (short runs against one run), best of 24 */
    double input_sps[SF_MAX_DEVICES];  /* samples a second of the input pipeline, best of 3
                                        * (0: not measured) */
    /* the device they describe */
    double peak_flops;          /* median of gemm_flops over the ranks that measured */
    double mem_bw_Bps;          /* median of copy_Bps over the same */
    double copy_run_s_median;   /* median of copy_run_s over the same */
    double mem_bytes;           /* physical memory / ranks */
    double input_samples_per_s; /* median of input_sps over the same; 0: not measured */
} sf_calibrate_result;

/* Measure. Collective: every rank of c calls it with the same options, at
 * most SF_MAX_DEVICES ranks. Bad options are SF_ERR_INVALID on every rank
 * before anything runs; out of memory on any rank is SF_ERR_NOMEM on all of
 * them ("out of memory on some rank"). */
SF_API sf_status sf_calibrate_run(sf_comm *c, const sf_calibrate_options *o,
                                  sf_calibrate_result *out, sf_error *err);

/* The per-link bandwidth that makes the simulator's ring all-reduce of
 * `bytes` on `ranks` ranks take `seconds`: the ring prices 2(P-1) steps of
 * latency and sends 2(P-1)/P of the buffer over each link, so
 * bw = 2(P-1)/P bytes / (seconds - 2(P-1) latency_s). 0 (no point) with fewer
 * than two ranks, when the fit leaves no time for the bytes, or when the
 * bandwidth falls outside [SF_MIN_RATE, SF_MAX_RATE]. */
SF_API double sf_calibrate_ring_bandwidth(int ranks, double latency_s, double bytes,
                                          double seconds);

/* The machine description of a result: the "cpu" preset with 1 node of
 * r->ranks devices of kind "cpu-rank" (fp32 peak = peak_flops, no fp16 or
 * bf16, memory bandwidth and size as measured), joined by shared memory with
 * the measured link (with one rank, the preset's), the runtime's copies at
 * mem_bw_Bps, the all-reduce curve of every size with a ring bandwidth, the
 * shared cores, and the input pipeline's rate when it was measured. Validated
 * (sf_machine_desc_validate). */
SF_API sf_status sf_calibrate_machine_desc(const sf_calibrate_result *r, const char *name,
                                           sf_machine_desc *out, sf_error *err);

#ifdef __cplusplus
}
#endif

#endif
