/*
 * comm_mpi_off.c - sf_comm_mpi_new in a build without MPI (SF_WITH_MPI=OFF):
 * it fails with one line that says so, which the commands that run ranks
 * (calibrate, train, validate) print as they print any other error. The
 * threads back end (comm_local.c, sf_comm_local_run) is unaffected.
 * CMakeLists.txt compiles this file only when comm_mpi.c is not built.
 */
#include <stddef.h>

#include "soapflow/runtime.h"

sf_comm *sf_comm_mpi_new(sf_error *err) {
    sf_error_set(err, SF_ERR_UNSUPPORTED,
                 "soapflow was built without MPI (SF_WITH_MPI=OFF): no MPI ranks to run on");
    return NULL;
}
