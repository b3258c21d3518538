/* Calibration (soapflow/calibrate.h): the all-reduce curve fitted to
 * synthetic measurements of a known ring, the machine description a result
 * makes, and a real calibration on two and three ranks that are threads (the
 * sizes it plans, the same figures on every rank, refused options). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/calibrate.h"
#include "soapflow/kernels.h"

/* What the simulator's ring prices for `bytes` on P ranks over links of
 * latency lat and bandwidth bw: 2(P-1) steps, each latency + bytes / P / bw. */
static double ring_time(int P, double lat, double bw, double bytes) {
    return 2.0 * (P - 1) * (lat + bytes / P / bw);
}

static void test_ring_fit(void **state) {
    (void)state;
    /* a measurement made by the ring is fitted back to the ring's bandwidth */
    for (int P = 2; P <= 16; P *= 2) {
        for (double bytes = 4096; bytes <= 64e6; bytes *= 16) {
            double t = ring_time(P, 2e-6, 3e9, bytes);
            double bw = sf_calibrate_ring_bandwidth(P, 2e-6, bytes, t);
            assert_true(fabs(bw / 3e9 - 1) < 1e-9);
        }
    }
    /* by hand: 4 ranks, 1 us, 1 MB in 756 us: 6 steps of latency leave 750 us
     * for 6/4 MB a link, 2 GB/s */
    assert_true(fabs(sf_calibrate_ring_bandwidth(4, 1e-6, 1e6, 756e-6) - 2e9) < 1e-3);
    /* no point: one rank, no time left for the bytes, an absurd rate */
    assert_true(sf_calibrate_ring_bandwidth(1, 1e-6, 1e6, 1e-3) == 0);
    assert_true(sf_calibrate_ring_bandwidth(4, 1e-6, 1e6, 6e-6) == 0);
    assert_true(sf_calibrate_ring_bandwidth(4, 1e-6, 1e6, 5e-6) == 0);
    assert_true(sf_calibrate_ring_bandwidth(2, 0, 1e30, 1e-9) == 0);
}

/* A result as two ranks might measure it. */
static void fake_result(sf_calibrate_result *r) {
    memset(r, 0, sizeof *r);
    r->ranks = 2;
    r->n_sizes = 2;
    r->sizes[0] = 8;
    r->sizes[1] = 1 << 20;
    r->half_rtt_s[0] = 1e-6;
    r->half_rtt_s[1] = 1e-6 + (1 << 20) / 4e9;
    r->latency_s = 1e-6;
    r->bw_Bps = 4e9;
    r->n_allreduce = 3;
    r->allreduce_bytes[0] = 4096;
    r->allreduce_bytes[1] = 1 << 20;
    r->allreduce_bytes[2] = 16 << 20;
    r->allreduce_s[0] = 1e-6; /* below the ring's latency: no point */
    r->allreduce_s[1] = ring_time(2, 1e-6, 2e9, 1 << 20);
    r->allreduce_s[2] = ring_time(2, 1e-6, 1e9, 16 << 20);
    r->gemm_flops[0] = r->gemm_flops[1] = r->peak_flops = 40e9;
    r->copy_Bps[0] = r->copy_Bps[1] = r->mem_bw_Bps = 8e9;
    r->copy_run_s[0] = r->copy_run_s[1] = r->copy_run_s_median = 6e-9;
    r->mem_bytes = 8e9;
}

static void test_machine_desc(void **state) {
    (void)state;
    sf_calibrate_result *r = malloc(sizeof *r);
    assert_non_null(r);
    fake_result(r);
    sf_machine_desc d;
    sf_error err = {0};
    assert_int_equal(sf_calibrate_machine_desc(r, "here", &d, &err), SF_OK);
    assert_string_equal(d.name, "here");
    assert_string_equal(d.kind.name, "cpu-rank");
    assert_int_equal(d.nodes, 1);
    assert_int_equal(d.devices_per_node, 2);
    assert_int_equal(d.intra, SF_INTRA_SHM);
    assert_true(d.intra_latency_s == 1e-6 && d.intra_bw_Bps == 4e9);
    assert_true(d.kind.peak_flops[SF_DTYPE_FP32] == 40e9);
    assert_true(d.kind.peak_flops[SF_DTYPE_FP16] == 0 && d.kind.peak_flops[SF_DTYPE_BF16] == 0);
    assert_true(d.kind.mem_bw_Bps == 8e9 && d.copy_bw_Bps == 8e9 && d.kind.mem_bytes == 8e9);
    assert_true(d.copy_run_s == 6e-9); /* a copy's run, as measured */
    assert_int_equal(d.sync_after_backward, 0);
    r->sync_after_backward = 1; /* MPI: the sync's collectives after the backward pass */
    assert_int_equal(sf_calibrate_machine_desc(r, "here", &d, &err), SF_OK);
    assert_int_equal(d.sync_after_backward, 1);
    r->sync_after_backward = 0;
    /* the curve: the sizes with a ring bandwidth, each the link's rate there */
    assert_int_equal(d.n_sync, 2);
    assert_true(d.sync_bytes[0] == 1 << 20 && d.sync_bytes[1] == 16 << 20);
    assert_true(fabs(d.sync_bw_Bps[0] / 2e9 - 1) < 1e-9);
    assert_true(fabs(d.sync_bw_Bps[1] / 1e9 - 1) < 1e-9);
    assert_int_equal(d.cores_per_node, 0);
    /* shared cores are said; one rank keeps the preset's link and has no curve */
    r->cores = 1;
    assert_int_equal(sf_calibrate_machine_desc(r, "here", &d, &err), SF_OK);
    assert_int_equal(d.cores_per_node, 1);
    sf_machine_desc cpu;
    assert_int_equal(sf_machine_preset_desc("cpu", &cpu, &err), SF_OK);
    r->ranks = 1;
    r->cores = 0;
    assert_int_equal(sf_calibrate_machine_desc(r, "one", &d, &err), SF_OK);
    assert_int_equal(d.devices_per_node, 1);
    assert_int_equal(d.n_sync, 0);
    assert_true(d.intra_bw_Bps == cpu.intra_bw_Bps && d.intra_latency_s == cpu.intra_latency_s);
    /* a name too long for a machine, a result no machine can hold */
    char name[SF_NAME_MAX + 1];
    memset(name, 'x', SF_NAME_MAX);
    name[SF_NAME_MAX] = '\0';
    assert_int_equal(sf_calibrate_machine_desc(r, name, &d, &err), SF_ERR_INVALID);
    sf_error_clear(&err);
    r->peak_flops = 0;
    assert_int_not_equal(sf_calibrate_machine_desc(r, "zero", &d, &err), SF_OK);
    free(r);
}

typedef struct job {
    sf_calibrate_options o;
    sf_calibrate_result *r[3];
    sf_status st[3];
} job;

static sf_status calib_rank(sf_comm *c, void *arg) {
    job *j = arg;
    int me = sf_comm_rank(c);
    sf_error err = {0};
    j->st[me] = sf_calibrate_run(c, &j->o, j->r[me], &err);
    return j->st[me];
}

static void run_job(job *j, int ranks, sf_status want) {
    for (int i = 0; i < 3; i++) {
        j->r[i] = malloc(sizeof *j->r[i]);
        assert_non_null(j->r[i]);
    }
    sf_error err = {0};
    assert_int_equal(sf_comm_local_run(ranks, calib_rank, j, &err), want);
    for (int i = 0; i < ranks; i++) assert_int_equal(j->st[i], want);
}

static void free_job(job *j) {
    for (int i = 0; i < 3; i++) free(j->r[i]);
}

static void test_run(void **state) {
    (void)state;
    sf_kernels_set_threads(1);
    job j;
    memset(&j, 0, sizeof j);
    sf_calibrate_options_default(&j.o);
    assert_true(j.o.min_bytes == 8 && j.o.max_bytes == 64 << 20 && j.o.gemm_n == 512);
    j.o.min_bytes = 8;
    j.o.max_bytes = 1000; /* not a doubling of 8: measured last */
    j.o.gemm_n = 32;
    run_job(&j, 3, SF_OK);
    const sf_calibrate_result *r = j.r[0];
    assert_int_equal(r->ranks, 3);
    static const int64_t sizes[] = {8, 16, 32, 64, 128, 256, 512, 1000};
    assert_int_equal(r->n_sizes, 8);
    for (int i = 0; i < 8; i++) {
        assert_true(r->sizes[i] == sizes[i]);
        assert_true(r->half_rtt_s[i] > 0);
    }
    /* below the smallest standard all-reduce size: max_bytes alone */
    assert_int_equal(r->n_allreduce, 1);
    assert_true(r->allreduce_bytes[0] == 1000 && r->allreduce_s[0] > 0);
    assert_true(r->latency_s > 0 && r->bw_Bps > 0);
    for (int i = 0; i < 3; i++) {
        if (r->cores == 0 || i < r->cores) {
            assert_true(r->gemm_flops[i] > 0);
            assert_true(r->copy_Bps[i] > 0);
        } else {
            assert_true(r->gemm_flops[i] == 0 && r->copy_Bps[i] == 0);
        }
    }
    assert_true(r->peak_flops > 0 && r->mem_bw_Bps > 0 && r->mem_bytes > 0);
    assert_true(r->copy_run_s_median >= 0 && r->copy_run_s_median < 1e-6);
    assert_int_equal(r->sync_after_backward, 0); /* threads post their collectives at once */
    /* every rank holds rank 0's figures */
    assert_memory_equal(j.r[1], j.r[0], sizeof *j.r[0]);
    assert_memory_equal(j.r[2], j.r[0], sizeof *j.r[0]);
    sf_machine_desc d;
    sf_error err = {0};
    assert_int_equal(sf_calibrate_machine_desc(r, "local", &d, &err), SF_OK);
    assert_int_equal(d.devices_per_node, 3);
    free_job(&j);

    /* the standard sizes up to max_bytes, and max_bytes after them */
    memset(&j, 0, sizeof j);
    sf_calibrate_options_default(&j.o);
    j.o.min_bytes = 1024;
    j.o.max_bytes = 2 << 20;
    j.o.gemm_n = 16;
    run_job(&j, 2, SF_OK);
    r = j.r[0];
    assert_int_equal(r->n_sizes, 12); /* 1 KiB .. 2 MiB */
    assert_int_equal(r->n_allreduce, 3);
    assert_true(r->allreduce_bytes[0] == 4096 && r->allreduce_bytes[1] == 1 << 20 &&
                r->allreduce_bytes[2] == 2 << 20);
    free_job(&j);

    /* one rank: nothing to ping, the rates still measured */
    memset(&j, 0, sizeof j);
    sf_calibrate_options_default(&j.o);
    j.o.max_bytes = 64;
    j.o.gemm_n = 16;
    run_job(&j, 1, SF_OK);
    assert_true(j.r[0]->latency_s == 0 && j.r[0]->bw_Bps == 0 && j.r[0]->peak_flops > 0);
    free_job(&j);
}

static void test_bad_options(void **state) {
    (void)state;
    static const int64_t bad[][3] = {
        {0, 64, 32}, {64, 8, 32}, {8, ((int64_t)1 << 30) + 1, 32}, {8, 64, 15}, {8, 64, 8193}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        job j;
        memset(&j, 0, sizeof j);
        j.o.min_bytes = bad[k][0];
        j.o.max_bytes = bad[k][1];
        j.o.gemm_n = (int)bad[k][2];
        run_job(&j, 2, SF_ERR_INVALID);
        free_job(&j);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_fit),
        cmocka_unit_test(test_machine_desc),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
