/*
 * comm_mpi.c - the runtime's communication interface over MPI, one rank per
 * process. The only file of soapflow that includes <mpi.h> besides the
 * calibrate command.
 *
 * Errors come back as values (MPI_ERRORS_RETURN on every communicator), with
 * MPI's own text in the message. A rank that dies is noticed by mpirun, which
 * ends the job: the other ranks are killed, mpirun exits non-zero and names
 * the rank (OpenMPI's "exited on signal" report).
 *
 * More ranks on a host than it has cores (4 ranks on this 2-core machine):
 * each rank is pinned to one core (its rank on the host modulo the cores it
 * may run on), and a wait polls MPI_Test and yields the core between polls, so
 * that a rank waiting for a message lets the rank sharing its core compute
 * instead of spinning out the scheduler's slice (MPI_Wait busy-polls, and the
 * sender of the message it waits for may be the rank it keeps off the core).
 * That is the machine the simulator models with cores_per_node: the devices
 * of one core take turns. (Sleeping 20 us between polls instead, with the
 * timer slack at 1 us, made lenet5's 4-rank steps slower: 44.6% against 20.9%
 * median error; SCHED_RR, under which a yield hands the core over for good,
 * let mlp's kernels run at their profiled speed but gave the same totals,
 * 23.3% against 23.1%, and needs privileges: bench/RESULTS.md.)
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "comm_impl.h"

typedef struct comm_mpi {
    sf_comm base;
    MPI_Request *req;
    int n_req, cap_req;
    int *free_req; /* stack of ids to reuse */
    int n_free;
    /* what a request's wait finishes ([cap_req]): a reduce-scatter's chunk,
     * received into tmp, goes to dst; an all-gather's counts go */
    struct m_after {
        float *tmp, *dst;
        int64_t n;
        int *counts; /* [2 * group size]: counts, then displacements */
        /* a deferred collective (base.defer), run blocking by the wait: its
         * kind (SF_STEP_ALL_REDUCE, ...; 0: none), buffer and group */
        int deferred, group;
        float *buf;
        int max; /* a deferred all-reduce takes the maximum, not the sum */
    } * after;
    MPI_Comm *groups;
    int n_groups, cap_groups;
    int inited; /* 1: this object called MPI_Init and finalizes */
} comm_mpi;

static int mpi_fail(int rc) {
    (void)rc;
    return SF_ERR_IO;
}

static int new_req(comm_mpi *m) {
    if (m->n_free > 0) return m->free_req[--m->n_free];
    if (m->n_req == m->cap_req) {
        int cap = m->cap_req ? m->cap_req * 2 : 64;
        MPI_Request *r = realloc(m->req, (size_t)cap * sizeof *r);
        if (!r) return SF_ERR_NOMEM;
        m->req = r;
        int *f = realloc(m->free_req, (size_t)cap * sizeof *f);
        if (!f) return SF_ERR_NOMEM;
        m->free_req = f;
        struct m_after *a = realloc(m->after, (size_t)cap * sizeof *a);
        if (!a) return SF_ERR_NOMEM;
        m->after = a;
        m->cap_req = cap;
    }
    m->req[m->n_req] = MPI_REQUEST_NULL;
    memset(&m->after[m->n_req], 0, sizeof m->after[m->n_req]);
    return m->n_req++;
}

/* Messages are counted in bytes as MPI_BYTE; one above INT_MAX bytes goes as
 * 4-byte words (every runtime message is floats). */
static void count_type(size_t bytes, int *count, MPI_Datatype *t) {
    if (bytes <= (size_t)0x7fffffff) {
        *count = (int)bytes;
        *t = MPI_BYTE;
    } else {
        *count = (int)(bytes / 4);
        *t = MPI_FLOAT;
    }
}

static int m_isend(sf_comm *c, const void *buf, size_t bytes, int dst, int tag) {
    comm_mpi *m = (comm_mpi *)c;
    int id = new_req(m);
    if (id < 0) return id;
    int n;
    MPI_Datatype t;
    count_type(bytes, &n, &t);
    int rc = MPI_Isend(buf, n, t, dst, tag, MPI_COMM_WORLD, &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

static int m_irecv(sf_comm *c, void *buf, size_t bytes, int src, int tag) {
    comm_mpi *m = (comm_mpi *)c;
    int id = new_req(m);
    if (id < 0) return id;
    int n;
    MPI_Datatype t;
    count_type(bytes, &n, &t);
    int rc = MPI_Irecv(buf, n, t, src, tag, MPI_COMM_WORLD, &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

/* Under base.defer (and can_defer), request id records the collective for its
 * wait to run; 1 when it did. */
static int defers(comm_mpi *m, int id, int kind, float *buf, int64_t n, int group) {
    if (!m->base.defer || !m->base.can_defer) return 0;
    m->req[id] = MPI_REQUEST_NULL;
    m->after[id].deferred = kind;
    m->after[id].buf = buf;
    m->after[id].n = n;
    m->after[id].group = group;
    return 1;
}

/* An in-place all-reduce of n floats on group, summed or (max) their maximum. */
static int allreduce_op(comm_mpi *m, float *buf, int64_t n, int group, int max) {
    if (n > 0x7fffffff || group < 0 || group >= m->n_groups) return SF_ERR_INVALID;
    int id = new_req(m);
    if (id < 0) return id;
    if (defers(m, id, SF_STEP_ALL_REDUCE, buf, n, group)) {
        m->after[id].max = max;
        return id;
    }
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, max ? MPI_MAX : MPI_SUM,
                            m->groups[group], &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

static int m_iallreduce(sf_comm *c, float *buf, int64_t n, int group) {
    return allreduce_op((comm_mpi *)c, buf, n, group, 0);
}

static int m_iallreduce_max(sf_comm *c, float *buf, int64_t n, int group) {
    return allreduce_op((comm_mpi *)c, buf, n, group, 1);
}

/* The counts and displacements of n floats over a group's members. */
static int *chunk_counts(comm_mpi *m, int64_t n, int group, int *size) {
    if (MPI_Comm_size(m->groups[group], size) != MPI_SUCCESS) return NULL;
    int *c = malloc(2 * (size_t)*size * sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < *size; i++) {
        int64_t off, len;
        sf_tg_chunk(n, *size, i, &off, &len);
        c[i] = (int)len;
        c[*size + i] = (int)off;
    }
    return c;
}

static int m_ireduce_scatter(sf_comm *c, float *buf, int64_t n, int group) {
    comm_mpi *m = (comm_mpi *)c;
    if (n > 0x7fffffff || group < 0 || group >= m->n_groups) return SF_ERR_INVALID;
    int id = new_req(m), size, me;
    if (id < 0) return id;
    if (defers(m, id, SF_STEP_REDUCE_SCATTER, buf, n, group)) return id;
    int *counts = chunk_counts(m, n, group, &size);
    if (!counts || MPI_Comm_rank(m->groups[group], &me) != MPI_SUCCESS) {
        free(counts);
        return SF_ERR_NOMEM;
    }
    /* into a buffer of its own, then in place at wait (MPI puts an in-place
     * reduce-scatter's chunk at the start of the buffer, not at its place) */
    float *tmp = malloc((size_t)(counts[me] ? counts[me] : 1) * sizeof *tmp);
    if (!tmp) {
        free(counts);
        return SF_ERR_NOMEM;
    }
    m->after[id] =
        (struct m_after){tmp, buf + counts[size + me], counts[me], counts, 0, 0, NULL, 0};
    int rc =
        MPI_Ireduce_scatter(buf, tmp, counts, MPI_FLOAT, MPI_SUM, m->groups[group], &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

static int m_iallgather(sf_comm *c, float *buf, int64_t n, int group) {
    comm_mpi *m = (comm_mpi *)c;
    if (n > 0x7fffffff || group < 0 || group >= m->n_groups) return SF_ERR_INVALID;
    int id = new_req(m), size;
    if (id < 0) return id;
    if (defers(m, id, SF_STEP_ALL_GATHER, buf, n, group)) return id;
    int *counts = chunk_counts(m, n, group, &size);
    if (!counts) return SF_ERR_NOMEM;
    m->after[id] = (struct m_after){NULL, NULL, 0, counts, 0, 0, NULL, 0};
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, counts + size,
                             MPI_FLOAT, m->groups[group], &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

static int m_ibcast(sf_comm *c, float *buf, int64_t n, int group) {
    comm_mpi *m = (comm_mpi *)c;
    if (n > 0x7fffffff || group < 0 || group >= m->n_groups) return SF_ERR_INVALID;
    int id = new_req(m);
    if (id < 0) return id;
    int rc = MPI_Ibcast(buf, (int)n, MPI_FLOAT, 0, m->groups[group], &m->req[id]);
    return rc == MPI_SUCCESS ? id : mpi_fail(rc);
}

/* A deferred collective, now, blocking (MPI's tuned algorithms). */
static int run_deferred(comm_mpi *m, struct m_after *a) {
    MPI_Comm g = m->groups[a->group];
    if (a->deferred == SF_STEP_ALL_REDUCE)
        return MPI_Allreduce(MPI_IN_PLACE, a->buf, (int)a->n, MPI_FLOAT, a->max ? MPI_MAX : MPI_SUM,
                             g);
    int size, me;
    int *counts = chunk_counts(m, a->n, a->group, &size);
    if (!counts || MPI_Comm_rank(g, &me) != MPI_SUCCESS) {
        free(counts);
        return MPI_ERR_NO_MEM;
    }
    int rc;
    if (a->deferred == SF_STEP_ALL_GATHER) {
        rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a->buf, counts, counts + size,
                            MPI_FLOAT, g);
    } else { /* reduce-scatter: the rank's chunk in place, as the nonblocking one leaves it */
        float *tmp = malloc((size_t)(counts[me] ? counts[me] : 1) * sizeof *tmp);
        rc = tmp ? MPI_Reduce_scatter(a->buf, tmp, counts, MPI_FLOAT, MPI_SUM, g) : MPI_ERR_NO_MEM;
        if (rc == MPI_SUCCESS)
            memcpy(a->buf + counts[size + me], tmp, (size_t)counts[me] * sizeof *tmp);
        free(tmp);
    }
    free(counts);
    return rc;
}

static sf_status m_wait(sf_comm *c, int id) {
    comm_mpi *m = (comm_mpi *)c;
    if (id < 0 || id >= m->n_req) return SF_ERR_INVALID;
    int rc = MPI_SUCCESS, done = 0;
    if (m->after[id].deferred) {
        rc = run_deferred(m, &m->after[id]);
        done = 1;
    } else if (!m->base.shared_cores) {
        rc = MPI_Wait(&m->req[id], MPI_STATUS_IGNORE);
    }
    while (m->base.shared_cores && rc == MPI_SUCCESS && !done) { /* never deferred */
        rc = MPI_Test(&m->req[id], &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done) sched_yield();
    }
    struct m_after *a = &m->after[id];
    if (a->tmp && rc == MPI_SUCCESS) memcpy(a->dst, a->tmp, (size_t)a->n * sizeof *a->tmp);
    free(a->tmp);
    free(a->counts);
    memset(a, 0, sizeof *a);
    m->free_req[m->n_free++] = id;
    return rc == MPI_SUCCESS ? SF_OK : SF_ERR_IO;
}

static sf_status m_group_new(sf_comm *c, const int *ranks, int n, int *group) {
    comm_mpi *m = (comm_mpi *)c;
    if (m->n_groups == m->cap_groups) {
        int cap = m->cap_groups ? m->cap_groups * 2 : 16;
        MPI_Comm *g = realloc(m->groups, (size_t)cap * sizeof *g);
        if (!g) return SF_ERR_NOMEM;
        m->groups = g;
        m->cap_groups = cap;
    }
    MPI_Group world, sub;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, n, ranks, &sub);
    MPI_Comm nc;
    int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, 0, &nc);
    MPI_Group_free(&sub);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS) return SF_ERR_IO;
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    m->groups[m->n_groups] = nc;
    *group = m->n_groups++;
    return SF_OK;
}

static sf_status m_sum_doubles(sf_comm *c, double *buf, int n) {
    (void)c;
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? SF_OK
               : SF_ERR_IO;
}

static sf_status m_max_ints(sf_comm *c, int *buf, int n) {
    (void)c;
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS
               ? SF_OK
               : SF_ERR_IO;
}

static sf_status m_bcast(sf_comm *c, void *buf, size_t bytes, int root) {
    (void)c;
    int n;
    MPI_Datatype t;
    count_type(bytes, &n, &t);
    return MPI_Bcast(buf, n, t, root, MPI_COMM_WORLD) == MPI_SUCCESS ? SF_OK : SF_ERR_IO;
}

static void m_free(sf_comm *c) {
    comm_mpi *m = (comm_mpi *)c;
    for (int i = 0; i < m->n_groups; i++) MPI_Comm_free(&m->groups[i]);
    free(m->groups);
    free(m->req);
    free(m->free_req);
    free(m->after);
    if (m->inited) MPI_Finalize();
    free(m);
}

static const sf_comm_vt mpi_vt = {
    .isend = m_isend,
    .irecv = m_irecv,
    .iallreduce = m_iallreduce,
    .iallreduce_max = m_iallreduce_max,
    .ireduce_scatter = m_ireduce_scatter,
    .iallgather = m_iallgather,
    .ibcast = m_ibcast,
    .wait = m_wait,
    .group_new = m_group_new,
    .sum_doubles = m_sum_doubles,
    .max_ints = m_max_ints,
    .bcast = m_bcast,
    .free = m_free,
};

/* Pin this rank to one core and make waits yield when the ranks on this host
 * outnumber the cores they may run on. */
static void share_cores(comm_mpi *m) {
    /* with a core a rank, a blocking collective inside the wait is the fast one */
    m->base.can_defer = 1;
    MPI_Comm host;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) !=
        MPI_SUCCESS)
        return;
    int local = 0, on_host = 1;
    MPI_Comm_rank(host, &local);
    MPI_Comm_size(host, &on_host);
    MPI_Comm_free(&host);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1 || on_host <= online) return;
    m->base.shared_cores = (int)online;
    m->base.can_defer = 0; /* ranks that share cores poll and yield instead (m_wait) */
    /* mpirun binds no oversubscribed rank; one it bound stays where it is */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) return;
    int want = local % CPU_COUNT(&set), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        if (seen++ != want) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        (void)sched_setaffinity(0, sizeof one, &one); /* unpinned, it still runs */
        break;
    }
}

sf_comm *sf_comm_mpi_new(sf_error *err) {
    comm_mpi *m = calloc(1, sizeof *m);
    if (!m) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            free(m);
            sf_error_set(err, SF_ERR_IO, "MPI_Init failed");
            return NULL;
        }
        m->inited = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    m->base.vt = &mpi_vt;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->base.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->base.size);
    strcpy(m->base.what, "MPI");
    /* group 0: every rank, on a communicator of its own */
    m->groups = malloc(16 * sizeof *m->groups);
    if (!m->groups || MPI_Comm_dup(MPI_COMM_WORLD, &m->groups[0]) != MPI_SUCCESS) {
        free(m->groups);
        if (m->inited) MPI_Finalize();
        free(m);
        sf_error_set(err, SF_ERR_IO, "MPI: cannot make the world's communicator");
        return NULL;
    }
    MPI_Comm_set_errhandler(m->groups[0], MPI_ERRORS_RETURN);
    m->n_groups = 1;
    m->cap_groups = 16;
    m->base.world_group = 0;
    share_cores(m);
    return &m->base;
}
