/*
 * price.c - the one function that turns a step of the task graph into time
 * (sf_tg_price_step in soapflow/taskgraph.h). The simulator makes a task of
 * every use it returns; OptCNN's additive model sums the same uses; so both
 * see the same routes, link times, all-reduce curve, copies and updates.
 *
 * A point-to-point message is store-and-forward over its route, cut into
 * `segments` pieces of whole bytes when the route has several links (the
 * first bytes % segments one byte longer), each piece a chain over the links.
 * A ring collective of R positions is priced the way FlexFlow's simulator and
 * NCCL's cost model price a ring: every position i sends to position i + 1
 * over its route, holding each link of it for the collective's steps of
 * latency plus the mean bytes a position sends; the bytes counted are exact
 * per position (chunks of whole elements). A reduce-scatter and an all-gather
 * take R - 1 steps each and send (R - 1) / R of the buffer; an all-reduce both.
 * The bandwidth is the machine's calibrated all-reduce curve at the buffer's
 * size when it has one (MPI_Allreduce on shared memory reduces on the ranks'
 * cores, far below the ping-pong rate), else the link's. A step counts
 * elements; its bytes are elements at the cost model's dtype (fp32: 4).
 */
#include <stdlib.h>

#include "soapflow/taskgraph.h"

/* A route with the figures of its links. */
typedef struct tg_route {
    int n_links;
    int links[SF_MAX_ROUTE];
    double latency_s[SF_MAX_ROUTE], bandwidth_Bps[SF_MAX_ROUTE];
    uint8_t inter_node[SF_MAX_ROUTE];
    double sum_latency_s, sum_inv_Bps; /* over the links: a whole message's chain */
} tg_route;

struct sf_tg_routes {
    int n;
    tg_route *r; /* [n * n], a -> b at a * n + b */
};

static void route_fill(const sf_machine *m, int a, int b, tg_route *out) {
    sf_route r;
    sf_machine_route(m, a, b, &r);
    out->n_links = r.n_links;
    out->sum_latency_s = out->sum_inv_Bps = 0;
    for (int i = 0; i < r.n_links; i++) {
        sf_link lb;
        const sf_link *l = sf_machine_link(m, r.links[i], &lb);
        out->links[i] = r.links[i];
        out->latency_s[i] = l->latency_s;
        out->bandwidth_Bps[i] = l->bandwidth_Bps;
        out->inter_node[i] = (uint8_t)l->inter_node;
        out->sum_latency_s += l->latency_s;
        out->sum_inv_Bps += 1.0 / l->bandwidth_Bps;
    }
}

sf_tg_routes *sf_tg_routes_new(const sf_machine *m, int n) {
    int nd = sf_machine_num_devices(m);
    if (n > nd) n = nd;
    if (n < 1) n = 1;
    sf_tg_routes *rs = malloc(sizeof *rs);
    if (!rs) return NULL;
    rs->n = n;
    rs->r = malloc((size_t)n * (size_t)n * sizeof *rs->r);
    if (!rs->r) {
        free(rs);
        return NULL;
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) route_fill(m, a, b, &rs->r[(size_t)a * (size_t)n + (size_t)b]);
    return rs;
}

void sf_tg_routes_free(sf_tg_routes *rs) {
    if (!rs) return;
    free(rs->r);
    free(rs);
}

/* The route a -> b: from the pricer's table when it has one for them, else
 * worked out into *buf. */
static const tg_route *route_of(const sf_tg_pricer *p, int a, int b, tg_route *buf) {
    const sf_tg_routes *rs = p->routes;
    if (rs && a < rs->n && b < rs->n) return &rs->r[(size_t)a * (size_t)rs->n + (size_t)b];
    route_fill(p->m, a, b, buf);
    return buf;
}

/* Bytes of one element a step moves: every payload (activations, gradients,
 * a parameter server's returned weights, which are the compute copy) is in
 * the cost model's dtype (docs/simulator.md, "Precision"); fp32 without one. */
static inline int64_t elem_bytes(const sf_tg_pricer *p) { return sf_cost_elem_bytes(p->cm); }

int sf_tg_step_max_uses(const sf_tg_step *st, int segments) {
    switch ((sf_tg_step_kind)st->kind) {
    case SF_STEP_P2P: return (segments > 1 ? segments : 1) * SF_MAX_ROUTE;
    case SF_STEP_REDUCE_SCATTER:
    case SF_STEP_ALL_GATHER:
    case SF_STEP_ALL_REDUCE:
    case SF_STEP_BROADCAST: return st->n_group * SF_MAX_ROUTE;
    case SF_STEP_COPY:
    case SF_STEP_UPDATE:
    case SF_STEP_KIND_COUNT: break;
    }
    return 1;
}

static int64_t chunk_len(int64_t n, int R, int i) {
    int64_t off, len;
    sf_tg_chunk(n, R, i % R, &off, &len);
    return len;
}

/* Bytes position i of a ring of R sends in a step of this kind over a buffer of
 * n elements: a reduce-scatter every chunk but chunk i + 1 (the one it ends up
 * owning arrives last, i + 1 owning its own), an all-gather every chunk but i +
 * 2, a broadcast's chain the whole buffer (but the last position, nothing). */
static int64_t position_bytes(sf_tg_step_kind k, int64_t n, int R, int i, int64_t eb) {
    int64_t e = 0;
    if (k == SF_STEP_REDUCE_SCATTER || k == SF_STEP_ALL_REDUCE) e += n - chunk_len(n, R, i + 1);
    if (k == SF_STEP_ALL_GATHER || k == SF_STEP_ALL_REDUCE) e += n - chunk_len(n, R, i + 2);
    if (k == SF_STEP_BROADCAST) e = i < R - 1 ? n : 0;
    return e * eb;
}

/* One hop of a message: the one formula for a link's time. */
static inline double hop_s(const tg_route *r, int i, double bytes) {
    return r->latency_s[i] + bytes / r->bandwidth_Bps[i];
}

static int price_p2p(const sf_tg_pricer *p, const sf_tg_step *st, sf_tg_use *out) {
    tg_route buf;
    const tg_route *r = route_of(p, st->dev, st->peer, &buf);
    int64_t bytes = st->numel * elem_bytes(p);
    int nseg = r->n_links > 1 && p->segments > 1 ? p->segments : 1, n = 0;
    for (int s = 0; s < nseg; s++) {
        int64_t piece = bytes / nseg + (s < bytes % nseg);
        for (int i = 0; i < r->n_links; i++)
            out[n++] = (sf_tg_use){.link = r->links[i],
                                   .dev = -1,
                                   .chain = s,
                                   .hop = i,
                                   .dur_s = hop_s(r, i, (double)piece),
                                   .bytes = piece,
                                   .inter_node = r->inter_node[i]};
    }
    return n;
}

static int price_ring(const sf_tg_pricer *p, const sf_tg_step *st, const int16_t *devs,
                      sf_tg_use *out) {
    sf_tg_step_kind k = (sf_tg_step_kind)st->kind;
    int R = st->n_group, n = 0;
    if (R < 2) return 0;
    const int16_t *g = devs + st->group;
    int64_t eb = elem_bytes(p);
    double shard = (double)(st->numel * eb);
    double steps = k == SF_STEP_ALL_REDUCE ? 2.0 * (R - 1) : k == SF_STEP_BROADCAST ? 1.0 : R - 1.0;
    double send = k == SF_STEP_BROADCAST ? shard : steps / R * shard;
    double sbw = sf_machine_sync_bw(sf_machine_get_desc(p->m), shard);
    int last = k == SF_STEP_BROADCAST ? R - 1 : R; /* a chain has no edge back */
    for (int i = 0; i < last; i++) {
        tg_route buf;
        const tg_route *r = route_of(p, g[i], g[(i + 1) % R], &buf);
        int64_t bytes = position_bytes(k, st->numel, R, i, eb);
        for (int h = 0; h < r->n_links; h++) {
            double bw = sbw > 0 ? sbw : r->bandwidth_Bps[h];
            out[n++] = (sf_tg_use){.link = r->links[h],
                                   .dev = -1,
                                   .chain = i,
                                   .hop = h,
                                   .dur_s = steps * r->latency_s[h] + send / bw,
                                   .bytes = bytes,
                                   .inter_node = r->inter_node[h]};
        }
    }
    return n;
}

/* The time of a COPY (0 on a machine that prices none) or an UPDATE. */
static double device_s(const sf_tg_pricer *p, const sf_tg_step *st) {
    if (st->kind == SF_STEP_UPDATE)
        return sf_cost_task_s(p->cm, p->op, p->tile, st->dev, SF_PASS_UPDATE);
    const sf_machine_desc *d = sf_machine_get_desc(p->m);
    if (!(d->copy_bw_Bps > 0)) return 0;
    /* the bytes, and each run's memcpy call (sf_tile_runs: a split on the last
     * dimension copies rows of a few elements) */
    int64_t runs = st->runs > 1 ? st->runs : 1;
    return st->moved * (double)(st->numel * elem_bytes(p)) / d->copy_bw_Bps +
           (double)runs * d->copy_run_s;
}

int sf_tg_price_step(const sf_tg_pricer *p, const sf_tg_step *st, const int16_t *devs,
                     sf_tg_use *out) {
    switch ((sf_tg_step_kind)st->kind) {
    case SF_STEP_P2P: return price_p2p(p, st, out);
    case SF_STEP_REDUCE_SCATTER:
    case SF_STEP_ALL_GATHER:
    case SF_STEP_ALL_REDUCE:
    case SF_STEP_BROADCAST: return price_ring(p, st, devs, out);
    case SF_STEP_COPY:
        if (!(sf_machine_get_desc(p->m)->copy_bw_Bps > 0)) return 0;
        out[0] = (sf_tg_use){.link = -1,
                             .dev = st->dev,
                             .dur_s = device_s(p, st),
                             .bytes = st->numel * elem_bytes(p)};
        return 1;
    case SF_STEP_UPDATE:
        out[0] = (sf_tg_use){.link = -1, .dev = st->dev, .dur_s = device_s(p, st)};
        return 1;
    case SF_STEP_KIND_COUNT: break;
    }
    return 0;
}

double sf_tg_step_chain_s(const sf_tg_pricer *p, const sf_tg_step *st) {
    if (st->kind != SF_STEP_P2P) return device_s(p, st);
    tg_route buf;
    const tg_route *r = route_of(p, st->dev, st->peer, &buf);
    /* the hops' times added up, as latencies plus bytes over each bandwidth
     * (equal to the sum of hop_s up to rounding) */
    return r->sum_latency_s + (double)(st->numel * elem_bytes(p)) * r->sum_inv_Bps;
}
