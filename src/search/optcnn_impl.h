/*
 * optcnn_impl.h - what optcnn.c (the dynamic program) and exhaustive.c (its
 * brute-force oracle) share: OptCNN's candidate configs of an operator and the
 * additive cost of one operator and of one edge under any config.
 *
 * The per-operator and per-edge functions here are the reference definition of
 * the additive model (sf_optcnn_cost is their sum). The dynamic program builds
 * its cost tables with a faster path that must, and is tested to, give the same
 * numbers; exhaustive.c uses these functions directly so that the oracle does
 * not share the fast path with what it checks.
 */
#ifndef SOAPFLOW_OPTCNN_IMPL_H
#define SOAPFLOW_OPTCNN_IMPL_H

#include "soapflow/search.h"

/* OptCNN's candidate configs of one operator (see optcnn.c for the space). */
typedef struct oc_cands {
    int n;          /* number of configs (>= 1) */
    sf_config *cfg; /* [n] */
    int data_idx;   /* the data-parallel-like config: most parts on the sample dimension */
} oc_cands;

/* Per-device accumulators reused by the cost functions (no allocation per call). */
typedef struct oc_scratch {
    int n_dev;
    sf_sync_scheme scheme; /* how oc_node_cost prices gradient sync */
    int *sharers;        /* [n_ops]: operators using each operator's weights (the group
                          * of an unrolled RNN layer's steps; 1 when unshared or none) */
    double *fwd, *bwd;   /* [n_dev] */
    double *upd;         /* [n_dev] */
    double *busy;        /* [n_dev] */
    int *touched;        /* [n_dev] */
    unsigned char *mark; /* [n_dev] */
} oc_scratch;

sf_status oc_scratch_init(oc_scratch *s, const sf_graph *g, int n_dev, sf_sync_scheme scheme);
void oc_scratch_free(oc_scratch *s);

/* Latency sum (s) and inverse-bandwidth sum (s/byte) of the route a -> b: a
 * transfer of B bytes takes lat + B * inv_bw, store-and-forward. */
void oc_route_cost(const sf_machine *m, int a, int b, double *lat_s, double *inv_bw);

/* Candidates of every operator, allocated in `arena` ([n_ops]). */
sf_status oc_candidates(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_optcnn_options *o, sf_arena *arena, oc_cands *out, sf_error *err);

/* Node cost of op under config c: slowest device's forward + backward time,
 * plus gradient sync (slowest ring edge, or the server's messages in and out),
 * plus the slowest device's update; the last two divided by the number of
 * operators using op's weights (s->sharers). */
double oc_node_cost(const sf_machine *m, const sf_cost_model *cm, const sf_op *op,
                    const sf_config *c, oc_scratch *s);

/* Edge cost of input k of consumer v (config cv) fed by output `out` of
 * producer u (config cu): slowest receiver of activations forward plus slowest
 * receiver of gradients backward (none when u is an input). */
double oc_edge_cost(const sf_machine *m, const sf_op *u, int out, const sf_config *cu,
                    const sf_op *v, int k, const sf_config *cv, oc_scratch *s);

#endif
