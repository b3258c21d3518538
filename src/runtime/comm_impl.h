/*
 * comm_impl.h - the small communication interface the runtime talks to, and
 * its two back ends: MPI ranks (comm_mpi.c, the only file that includes
 * <mpi.h>) and threads of one process (comm_local.c, for tests and for
 * debugging a strategy without mpirun). The runtime needs little: nonblocking
 * point-to-point messages of raw bytes, a nonblocking in-place sum of floats
 * among a fixed group of ranks (and its two halves, a reduce-scatter and an
 * all-gather; and a maximum, for the rows of a softmax_ce split on its
 * classes), a broadcast from a group's first member, groups made once, and a few blocking
 * world-wide reductions for losses, errors and timings.
 *
 * Requests are small integers valid until waited for; a back end keeps them
 * in an array that grows to the most in flight and is then reused, so a
 * training iteration allocates nothing here. Collectives on a group must be
 * posted in the same order by all its members (as MPI requires); the runtime
 * posts them in one global order (runtime.c).
 */
#ifndef SOAPFLOW_COMM_IMPL_H
#define SOAPFLOW_COMM_IMPL_H

#include "soapflow/runtime.h"
#include "soapflow/taskgraph.h"

typedef struct sf_comm_vt {
    /* Post a send of `bytes` bytes from buf to rank dst with tag; the buffer
     * must stay unchanged until the request is waited for. Returns a request
     * id >= 0 or a negative sf_status. */
    int (*isend)(sf_comm *c, const void *buf, size_t bytes, int dst, int tag);
    int (*irecv)(sf_comm *c, void *buf, size_t bytes, int src, int tag);
    /* In-place sum of n floats among group g's members. */
    int (*iallreduce)(sf_comm *c, float *buf, int64_t n, int group);
    /* In-place element-wise maximum of n floats among group g's members (the
     * rows' maxima of a softmax_ce split on its classes). */
    int (*iallreduce_max)(sf_comm *c, float *buf, int64_t n, int group);
    /* The two halves of it. buf holds n floats, cut into the group's size of
     * chunks as the task graph cuts them (chunk i: n / size elements, the first
     * n % size one more; sf_tg_chunk): after a reduce-scatter the member at
     * position i holds chunk i of the sum in place (the rest of buf is left
     * undefined); an all-gather starts from each member's chunk in place and
     * leaves every chunk everywhere. */
    int (*ireduce_scatter)(sf_comm *c, float *buf, int64_t n, int group);
    int (*iallgather)(sf_comm *c, float *buf, int64_t n, int group);
    /* The n floats of the group's first member (position 0), into buf on the
     * others (a partial sum's gradient, from the part that took the sum). */
    int (*ibcast)(sf_comm *c, float *buf, int64_t n, int group);
    sf_status (*wait)(sf_comm *c, int req);
    /* Make a group of the given ranks (including the caller; position i is
     * ranks[i]);
     * collective over the members only. *group is >= 0. */
    sf_status (*group_new)(sf_comm *c, const int *ranks, int n, int *group);
    /* Blocking, over every rank: element-wise sum of doubles, max of ints, a
     * broadcast of bytes from root. */
    sf_status (*sum_doubles)(sf_comm *c, double *buf, int n);
    sf_status (*max_ints)(sf_comm *c, int *buf, int n);
    sf_status (*bcast)(sf_comm *c, void *buf, size_t bytes, int root);
    void (*free)(sf_comm *c);
} sf_comm_vt;

struct sf_comm {
    const sf_comm_vt *vt;
    int rank, size;
    int world_group;  /* the group of every rank, made with the comm */
    int shared_cores; /* sf_comm_shared_cores */
    /* 1: a collective posted while `defer` is set may run, blocking, inside its
     * wait instead (MPI: its nonblocking collectives progress only inside MPI
     * calls, so a posted one does not overlap the kernels anyway, and libnbc's
     * all-reduce took 2.5x the blocking one's time: 105-130 ms against 40 ms
     * for 64 MB on 2 ranks). The runtime sets defer around its sync steps. */
    int can_defer;
    int defer;
    char what[64]; /* "MPI" or "threads" */
};

#endif
