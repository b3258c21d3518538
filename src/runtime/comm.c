/*
 * comm.c - what every communication back end shares: the public accessors and
 * the agreement on errors that lets every rank refuse bad input together,
 * with one message (the lowest failing rank's), before any work.
 */
#include <stdio.h>
#include <string.h>

#include "comm_impl.h"

int sf_comm_rank(const sf_comm *c) { return c->rank; }
int sf_comm_size(const sf_comm *c) { return c->size; }
int sf_comm_shared_cores(const sf_comm *c) { return c->shared_cores; }
const char *sf_comm_kind(const sf_comm *c) { return c->what; }

void sf_comm_free(sf_comm *c) {
    if (c) c->vt->free(c);
}

sf_status sf_comm_sum(sf_comm *c, double *v, int n) { return c->vt->sum_doubles(c, v, n); }
sf_status sf_comm_max(sf_comm *c, int *v, int n) { return c->vt->max_ints(c, v, n); }
sf_status sf_comm_bcast(sf_comm *c, void *buf, size_t bytes, int root) {
    return c->vt->bcast(c, buf, bytes, root);
}

sf_status sf_comm_agree(sf_comm *c, sf_status st, sf_error *err) {
    /* the lowest failing rank, as a max of (size - rank) over the failures */
    int v[2] = {st != SF_OK ? c->size - c->rank : 0, 0};
    sf_status cs = c->vt->max_ints(c, v, 1);
    if (cs != SF_OK) return sf_error_set(err, cs, "communication failed while checking errors");
    if (v[0] == 0) return SF_OK;
    int root = c->size - v[0];
    struct {
        int code;
        char msg[SF_ERRMSG_MAX];
    } m;
    memset(&m, 0, sizeof m);
    if (c->rank == root) {
        m.code = (int)st;
        if (err) memcpy(m.msg, err->msg, sizeof m.msg);
    }
    cs = c->vt->bcast(c, &m, sizeof m, root);
    if (cs != SF_OK) return sf_error_set(err, cs, "communication failed while sharing an error");
    m.msg[SF_ERRMSG_MAX - 1] = 0;
    if (err) {
        err->code = (sf_status)m.code;
        char pre[32]; /* agreed twice (set-up agrees at each stage): prefixed once */
        snprintf(pre, sizeof pre, "rank %d: ", root);
        if (c->size > 1 && strncmp(m.msg, pre, strlen(pre)) != 0)
            snprintf(err->msg, sizeof err->msg, "rank %d: %.*s", root, SF_ERRMSG_MAX - 16, m.msg);
        else
            memcpy(err->msg, m.msg, sizeof err->msg);
    }
    return (sf_status)m.code;
}

sf_status sf_comm_send(sf_comm *c, const void *buf, size_t bytes, int dst, int tag) {
    int id = c->vt->isend(c, buf, bytes, dst, tag);
    return id < 0 ? (sf_status)id : c->vt->wait(c, id);
}

sf_status sf_comm_recv(sf_comm *c, void *buf, size_t bytes, int src, int tag) {
    int id = c->vt->irecv(c, buf, bytes, src, tag);
    return id < 0 ? (sf_status)id : c->vt->wait(c, id);
}

sf_status sf_comm_sum_floats(sf_comm *c, float *buf, int64_t n) {
    int id = c->vt->iallreduce(c, buf, n, c->world_group);
    return id < 0 ? (sf_status)id : c->vt->wait(c, id);
}

sf_status sf_comm_barrier(sf_comm *c) {
    double x = 0;
    return c->vt->sum_doubles(c, &x, 1);
}
