/*
 * comm_local.c - the runtime's communication interface for ranks that are
 * threads of one process: tests run P ranks without mpirun (and under the
 * sanitizers), and a strategy can be debugged in one debugger.
 *
 * One world, one mutex, one condition variable: simple, and fast enough for
 * tests. A send copies its bytes into a message queued for the destination (a
 * buffered send; MPI may do the same for small messages), a receive takes the
 * first queued message from (src, tag) when waited for. A collective is an
 * instance keyed by (group, sequence number of the collective on that group):
 * every member copies its contribution in when it posts, and when all have,
 * each waiting member adds them up in rank order (deterministic), the last
 * one to read frees the instance. A rank that returns a failure marks the
 * world failed and wakes everybody: waits then fail instead of hanging.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

#define KIND_P2P 0
#define KIND_COLL 1

typedef struct lmsg {
    struct lmsg *next;
    int src, tag;
    size_t bytes;
    unsigned char data[];
} lmsg;

typedef enum coll_op {
    COLL_SUM_F,
    COLL_MAX_F,
    COLL_SUM_D,
    COLL_MAX_I,
    COLL_BCAST,
    COLL_REDUCE_SCATTER_F, /* the sum, of which each member keeps its chunk */
    COLL_ALL_GATHER_F      /* each member's chunk, to all */
} coll_op;

typedef struct lcoll {
    struct lcoll *next;
    int group;
    int64_t seq;
    coll_op op;
    size_t bytes;
    int n, posted, read;
    int root;             /* bcast: the root's position, -1 until it posts */
    unsigned char **part; /* [n] contributions by member position */
} lcoll;

typedef struct lgroup {
    int n;
    int *ranks;
} lgroup;

typedef struct lworld {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size;
    int failed;
    lmsg **inbox; /* [size] queued messages, oldest first */
    lcoll *colls;
    lgroup *groups;
    int n_groups, cap_groups;
} lworld;

typedef struct lreq {
    int kind, used;
    void *buf;
    size_t bytes;
    int src, tag; /* recv */
    lcoll *coll;  /* collective */
    int pos;      /* the caller's position in the group */
} lreq;

typedef struct comm_local {
    sf_comm base;
    lworld *w;
    lreq *req;
    int n_req, cap_req;
    int64_t *seq; /* [cap_seq] next collective's number per group */
    int cap_seq;
    int world_group; /* the group of every rank */
} comm_local;

static int new_req(comm_local *l) {
    for (int i = 0; i < l->n_req; i++)
        if (!l->req[i].used) return i;
    if (l->n_req == l->cap_req) {
        int cap = l->cap_req ? l->cap_req * 2 : 64;
        lreq *r = realloc(l->req, (size_t)cap * sizeof *r);
        if (!r) return SF_ERR_NOMEM;
        l->req = r;
        l->cap_req = cap;
    }
    l->req[l->n_req].used = 0;
    return l->n_req++;
}

static int l_isend(sf_comm *c, const void *buf, size_t bytes, int dst, int tag) {
    comm_local *l = (comm_local *)c;
    lworld *w = l->w;
    if (dst < 0 || dst >= w->size) return SF_ERR_INVALID;
    lmsg *m = malloc(sizeof *m + bytes);
    if (!m) return SF_ERR_NOMEM;
    m->next = NULL;
    m->src = c->rank;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes) memcpy(m->data, buf, bytes);
    pthread_mutex_lock(&w->mu);
    lmsg **p = &w->inbox[dst];
    while (*p) p = &(*p)->next;
    *p = m;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    /* buffered: the request is complete at once, but the runtime waits for it */
    int id = new_req(l);
    if (id < 0) return id;
    l->req[id] = (lreq){.kind = KIND_P2P, .used = 1, .buf = NULL};
    return id;
}

static int l_irecv(sf_comm *c, void *buf, size_t bytes, int src, int tag) {
    comm_local *l = (comm_local *)c;
    if (src < 0 || src >= l->w->size) return SF_ERR_INVALID;
    int id = new_req(l);
    if (id < 0) return id;
    l->req[id] =
        (lreq){.kind = KIND_P2P, .used = 1, .buf = buf, .bytes = bytes, .src = src, .tag = tag};
    return id;
}

/* Position of rank r in group g, -1 when not a member. */
static int group_pos(const lworld *w, int g, int r) {
    for (int i = 0; i < w->groups[g].n; i++)
        if (w->groups[g].ranks[i] == r) return i;
    return -1;
}

/* Post a collective contribution (under the lock): find or make the instance. */
static int coll_post(comm_local *l, int group, coll_op op, const void *buf, size_t bytes,
                     int root) {
    lworld *w = l->w;
    if (group < 0 || group >= w->n_groups) return SF_ERR_INVALID;
    int pos = group_pos(w, group, l->base.rank);
    if (pos < 0) return SF_ERR_INVALID;
    if (group >= l->cap_seq) {
        int cap = w->n_groups + 16;
        int64_t *s = realloc(l->seq, (size_t)cap * sizeof *s);
        if (!s) return SF_ERR_NOMEM;
        for (int i = l->cap_seq; i < cap; i++) s[i] = 0;
        l->seq = s;
        l->cap_seq = cap;
    }
    int id = new_req(l);
    if (id < 0) return id;
    int64_t seq = l->seq[group]++;
    pthread_mutex_lock(&w->mu);
    lcoll *k = w->colls;
    while (k && !(k->group == group && k->seq == seq)) k = k->next;
    if (!k) {
        k = calloc(1, sizeof *k);
        int n = w->groups[group].n;
        if (k) k->part = calloc((size_t)n, sizeof *k->part);
        if (!k || !k->part) {
            free(k);
            pthread_mutex_unlock(&w->mu);
            return SF_ERR_NOMEM;
        }
        k->group = group;
        k->seq = seq;
        k->op = op;
        k->bytes = bytes;
        k->n = n;
        k->root = -1;
        k->next = w->colls;
        w->colls = k;
    }
    int rc = 0;
    if (k->op != op || k->bytes != bytes) {
        rc = SF_ERR_INTERNAL; /* members disagree on the collective: a bug */
    } else if (op != COLL_BCAST || root == l->base.rank) {
        k->part[pos] = malloc(bytes ? bytes : 1);
        if (!k->part[pos])
            rc = SF_ERR_NOMEM;
        else if (bytes)
            memcpy(k->part[pos], buf, bytes);
        if (op == COLL_BCAST) k->root = pos;
    }
    k->posted++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (rc) return rc;
    l->req[id] = (lreq){
        .kind = KIND_COLL, .used = 1, .buf = (void *)buf, .bytes = bytes, .coll = k, .pos = pos};
    return id;
}

static int l_iallreduce(sf_comm *c, float *buf, int64_t n, int group) {
    return coll_post((comm_local *)c, group, COLL_SUM_F, buf, (size_t)n * sizeof(float), -1);
}

static int l_iallreduce_max(sf_comm *c, float *buf, int64_t n, int group) {
    return coll_post((comm_local *)c, group, COLL_MAX_F, buf, (size_t)n * sizeof(float), -1);
}

static int l_ireduce_scatter(sf_comm *c, float *buf, int64_t n, int group) {
    return coll_post((comm_local *)c, group, COLL_REDUCE_SCATTER_F, buf, (size_t)n * sizeof(float),
                     -1);
}

static int l_iallgather(sf_comm *c, float *buf, int64_t n, int group) {
    return coll_post((comm_local *)c, group, COLL_ALL_GATHER_F, buf, (size_t)n * sizeof(float), -1);
}

static int l_ibcast(sf_comm *c, float *buf, int64_t n, int group) {
    comm_local *l = (comm_local *)c;
    lworld *w = l->w;
    pthread_mutex_lock(&w->mu);
    int root = group >= 0 && group < w->n_groups ? w->groups[group].ranks[0] : -1;
    pthread_mutex_unlock(&w->mu);
    if (root < 0) return SF_ERR_INVALID;
    return coll_post(l, group, COLL_BCAST, buf, (size_t)n * sizeof(float), root);
}

static void coll_finish(lcoll *k, void *buf, int pos) {
    size_t n;
    int64_t off, len;
    switch (k->op) {
    case COLL_REDUCE_SCATTER_F: {
        sf_tg_chunk((int64_t)(k->bytes / sizeof(float)), k->n, pos, &off, &len);
        float *o = buf;
        for (int64_t i = off; i < off + len; i++) {
            float s = 0;
            for (int p = 0; p < k->n; p++) s += ((const float *)k->part[p])[i];
            o[i] = s;
        }
        break;
    }
    case COLL_ALL_GATHER_F:
        for (int p = 0; p < k->n; p++) {
            sf_tg_chunk((int64_t)(k->bytes / sizeof(float)), k->n, p, &off, &len);
            if (p != pos && len > 0)
                memcpy((float *)buf + off, (const float *)k->part[p] + off,
                       (size_t)len * sizeof(float));
        }
        break;
    case COLL_SUM_F: {
        n = k->bytes / sizeof(float);
        float *o = buf;
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int p = 0; p < k->n; p++) s += ((const float *)k->part[p])[i];
            o[i] = s;
        }
        break;
    }
    case COLL_MAX_F: {
        n = k->bytes / sizeof(float);
        float *o = buf;
        for (size_t i = 0; i < n; i++) {
            float s = ((const float *)k->part[0])[i];
            for (int p = 1; p < k->n; p++)
                if (((const float *)k->part[p])[i] > s) s = ((const float *)k->part[p])[i];
            o[i] = s;
        }
        break;
    }
    case COLL_SUM_D: {
        n = k->bytes / sizeof(double);
        double *o = buf;
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int p = 0; p < k->n; p++) s += ((const double *)k->part[p])[i];
            o[i] = s;
        }
        break;
    }
    case COLL_MAX_I: {
        n = k->bytes / sizeof(int);
        int *o = buf;
        for (size_t i = 0; i < n; i++) {
            int s = ((const int *)k->part[0])[i];
            for (int p = 1; p < k->n; p++)
                if (((const int *)k->part[p])[i] > s) s = ((const int *)k->part[p])[i];
            o[i] = s;
        }
        break;
    }
    case COLL_BCAST:
        if (k->bytes) memcpy(buf, k->part[k->root], k->bytes);
        break;
    }
}

static void coll_release(lworld *w, lcoll *k) {
    if (++k->read < k->n) return;
    lcoll **p = &w->colls;
    while (*p != k) p = &(*p)->next;
    *p = k->next;
    for (int i = 0; i < k->n; i++) free(k->part[i]);
    free(k->part);
    free(k);
}

static sf_status l_wait(sf_comm *c, int id) {
    comm_local *l = (comm_local *)c;
    lworld *w = l->w;
    if (id < 0 || id >= l->n_req || !l->req[id].used) return SF_ERR_INVALID;
    lreq *q = &l->req[id];
    sf_status st = SF_OK;
    pthread_mutex_lock(&w->mu);
    if (q->kind == KIND_P2P && q->buf) {
        for (;;) {
            lmsg **p = &w->inbox[c->rank];
            while (*p && !((*p)->src == q->src && (*p)->tag == q->tag)) p = &(*p)->next;
            if (*p) {
                lmsg *m = *p;
                *p = m->next;
                if (m->bytes != q->bytes)
                    st = SF_ERR_INTERNAL;
                else if (m->bytes)
                    memcpy(q->buf, m->data, m->bytes);
                free(m);
                break;
            }
            if (w->failed) {
                st = SF_ERR_IO;
                break;
            }
            pthread_cond_wait(&w->cv, &w->mu);
        }
    } else if (q->kind == KIND_COLL) {
        lcoll *k = q->coll;
        while (k->posted < k->n && !w->failed) pthread_cond_wait(&w->cv, &w->mu);
        if (k->posted < k->n) {
            st = SF_ERR_IO; /* instance left for the world's teardown */
        } else {
            coll_finish(k, q->buf, q->pos);
            coll_release(w, k);
        }
    }
    pthread_mutex_unlock(&w->mu);
    q->used = 0;
    return st;
}

static sf_status l_group_new(sf_comm *c, const int *ranks, int n, int *group) {
    comm_local *l = (comm_local *)c;
    lworld *w = l->w;
    sf_status st = SF_OK;
    pthread_mutex_lock(&w->mu);
    int g = -1;
    for (int i = 0; i < w->n_groups && g < 0; i++)
        if (w->groups[i].n == n && !memcmp(w->groups[i].ranks, ranks, (size_t)n * sizeof *ranks))
            g = i;
    if (g < 0) {
        if (w->n_groups == w->cap_groups) {
            int cap = w->cap_groups ? w->cap_groups * 2 : 16;
            lgroup *ng = realloc(w->groups, (size_t)cap * sizeof *ng);
            if (ng) {
                w->groups = ng;
                w->cap_groups = cap;
            }
        }
        int *r = w->n_groups < w->cap_groups ? malloc((size_t)n * sizeof *r) : NULL;
        if (!r) {
            st = SF_ERR_NOMEM;
        } else {
            memcpy(r, ranks, (size_t)n * sizeof *r);
            w->groups[w->n_groups] = (lgroup){n, r};
            g = w->n_groups++;
        }
    }
    pthread_mutex_unlock(&w->mu);
    *group = g;
    return st;
}

static sf_status world_coll(comm_local *l, coll_op op, void *buf, size_t bytes, int root) {
    int id = coll_post(l, l->world_group, op, buf, bytes, root);
    if (id < 0) return (sf_status)id;
    return l_wait(&l->base, id);
}

static sf_status l_sum_doubles(sf_comm *c, double *buf, int n) {
    return world_coll((comm_local *)c, COLL_SUM_D, buf, (size_t)n * sizeof *buf, -1);
}

static sf_status l_max_ints(sf_comm *c, int *buf, int n) {
    return world_coll((comm_local *)c, COLL_MAX_I, buf, (size_t)n * sizeof *buf, -1);
}

static sf_status l_bcast(sf_comm *c, void *buf, size_t bytes, int root) {
    return world_coll((comm_local *)c, COLL_BCAST, buf, bytes, root);
}

static void l_free(sf_comm *c) {
    comm_local *l = (comm_local *)c;
    free(l->req);
    free(l->seq);
    free(l);
}

static const sf_comm_vt local_vt = {
    .isend = l_isend,
    .irecv = l_irecv,
    .iallreduce = l_iallreduce,
    .iallreduce_max = l_iallreduce_max,
    .ireduce_scatter = l_ireduce_scatter,
    .iallgather = l_iallgather,
    .ibcast = l_ibcast,
    .wait = l_wait,
    .group_new = l_group_new,
    .sum_doubles = l_sum_doubles,
    .max_ints = l_max_ints,
    .bcast = l_bcast,
    .free = l_free,
};

typedef struct rank_arg {
    comm_local *comm;
    sf_comm_rank_fn fn;
    void *arg;
    sf_status st;
} rank_arg;

static void *rank_main(void *p) {
    rank_arg *a = p;
    a->st = a->fn(&a->comm->base, a->arg);
    if (a->st != SF_OK) {
        lworld *w = a->comm->w;
        pthread_mutex_lock(&w->mu);
        w->failed = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

sf_status sf_comm_local_run(int n, sf_comm_rank_fn fn, void *arg, sf_error *err) {
    if (n < 1 || n > 4096) return sf_error_set(err, SF_ERR_INVALID, "bad rank count %d", n);
    lworld w = {.size = n};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.inbox = calloc((size_t)n, sizeof *w.inbox);
    rank_arg *args = calloc((size_t)n, sizeof *args);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int *all = malloc((size_t)n * sizeof *all);
    sf_status st = SF_OK;
    int started = 0, world_group = -1;
    if (!w.inbox || !args || !th || !all) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) all[i] = i;
    for (int i = 0; i < n; i++) {
        comm_local *l = calloc(1, sizeof *l);
        if (!l) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        l->base.vt = &local_vt;
        l->base.rank = i;
        l->base.size = n;
        strcpy(l->base.what, "threads");
        l->w = &w;
        if (i == 0 && l_group_new(&l->base, all, n, &world_group) != SF_OK) {
            free(l);
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        l->world_group = world_group;
        l->base.world_group = world_group;
        args[i] = (rank_arg){l, fn, arg, SF_OK};
    }
    for (; started < n; started++) {
        if (pthread_create(&th[started], NULL, rank_main, &args[started])) {
            pthread_mutex_lock(&w.mu);
            w.failed = 1;
            pthread_cond_broadcast(&w.cv);
            pthread_mutex_unlock(&w.mu);
            st = sf_error_set(err, SF_ERR_NOMEM, "cannot start rank thread %d", started);
            break;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (st == SF_OK) {
        for (int i = 0; i < n; i++) {
            if (args[i].st != SF_OK) {
                st = sf_error_set(err, args[i].st, "rank %d failed (%s)", i,
                                  sf_status_str(args[i].st));
                break;
            }
        }
    }
done:
    if (args)
        for (int i = 0; i < n; i++)
            if (args[i].comm) l_free(&args[i].comm->base);
    if (w.inbox) {
        for (int i = 0; i < n; i++) {
            while (w.inbox[i]) {
                lmsg *m = w.inbox[i];
                w.inbox[i] = m->next;
                free(m);
            }
        }
    }
    while (w.colls) {
        lcoll *k = w.colls;
        w.colls = k->next;
        for (int i = 0; i < k->n; i++) free(k->part[i]);
        free(k->part);
        free(k);
    }
    for (int i = 0; i < w.n_groups; i++) free(w.groups[i].ranks);
    free(w.groups);
    free(w.inbox);
    free(args);
    free(th);
    free(all);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return st;
}
