/* example_calibrate.c - the example that opens include/soapflow/calibrate.h,
 * built and run as a test (see example_core.c): two ranks that are threads
 * calibrate this host with small sizes, and the description is a valid
 * machine of two devices with the measured link and copy rate. */
#include <stdio.h>
#include <stdlib.h>

#include "soapflow/calibrate.h"
#include "soapflow/kernels.h"

typedef struct ex {
    sf_machine_desc d[2];
} ex;

static sf_status rank(sf_comm *c, void *arg) {
    ex *x = arg;
    sf_error err = {0};
#include "calibrate_example.inc"
    if (st == SF_OK) x->d[sf_comm_rank(c)] = d;
    if (err.code) fprintf(stderr, "example_calibrate: %s\n", err.msg);
    return st;
}

int main(void) {
    sf_kernels_set_threads(1);
    ex x;
    sf_error err = {0};
    int rc = sf_comm_local_run(2, rank, &x, &err) != SF_OK;
    for (int r = 0; r < 2 && !rc; r++) {
        const sf_machine_desc *d = &x.d[r];
        rc = d->nodes != 1 || d->devices_per_node != 2 || d->intra != SF_INTRA_SHM ||
             !(d->intra_bw_Bps > 0) || !(d->kind.peak_flops[SF_DTYPE_FP32] > 0) ||
             !(d->copy_bw_Bps > 0) || sf_machine_desc_validate(d, &err) != SF_OK;
    }
    /* every rank describes the same machine: rank 0's figures */
    rc = rc || x.d[0].intra_bw_Bps != x.d[1].intra_bw_Bps ||
         x.d[0].kind.peak_flops[SF_DTYPE_FP32] != x.d[1].kind.peak_flops[SF_DTYPE_FP32];
    if (rc) fprintf(stderr, "example_calibrate failed: %s\n", err.msg);
    return rc;
}
