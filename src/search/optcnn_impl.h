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

/* One candidate config: degrees only, since a candidate puts part p on device
 * p. A full sf_config holds room for SF_MAX_PARTS devices (8 KB), and an
 * operator has hundreds of candidates on a large machine; oc_cfg_get makes the
 * config where one is needed. */
typedef struct oc_cfg {
    int ndim, n_parts;
    int degree[SF_MAX_DIMS];
} oc_cfg;

static inline void oc_cfg_get(const oc_cfg *k, sf_config *c) {
    c->ndim = k->ndim;
    c->n_parts = k->n_parts;
    for (int d = 0; d < SF_MAX_DIMS; d++) c->degree[d] = k->degree[d];
    for (int p = 0; p < k->n_parts; p++) c->device[p] = (int16_t)p;
    c->zero = c->recompute = 0; /* OptCNN's candidates carry no flags */
    c->flag_pad[0] = c->flag_pad[1] = 0;
}

/* OptCNN's candidate configs of one operator (see optcnn.c for the space). */
typedef struct oc_cands {
    int n;        /* number of configs (>= 1) */
    oc_cfg *cfg;  /* [n] */
    int data_idx; /* the data-parallel-like config: most parts on the sample dimension */
} oc_cands;

/* One (level, resource) sum of optcnn_cost.c's table. */
typedef struct oc_acc {
    int64_t key;
    double sum;
    int used;
} oc_acc;

/* What the cost functions (optcnn_cost.c) reuse: a task graph over a scratch
 * strategy whose configs they set, per-device accumulators, the uses of a step
 * and the (level, resource) table; nothing is allocated per call once grown. */
typedef struct oc_scratch {
    const sf_graph *g;
    const sf_machine *m;
    const sf_cost_model *cm;
    int n_dev;
    int *sharers;        /* [n_ops]: operators using each operator's weights (the group
                          * of an unrolled RNN layer's steps; 1 when unshared or none) */
    double *fwd, *bwd;   /* [n_dev] */
    double *busy;        /* [n_dev] */
    int *touched;        /* [n_dev] */
    unsigned char *mark; /* [n_dev] */
    sf_strategy *s;      /* the configs being priced */
    sf_taskgraph *tg;    /* over s, with the machine and the scheme */
    sf_tg_routes *routes; /* among the devices OptCNN's candidates use */
    sf_tg_use *uses;
    int uses_cap;
    int *level; /* [cap_level] each step's level */
    int cap_level;
    oc_acc *acc; /* [cap_acc], a power of two */
    int *acc_used;
    int n_acc, cap_acc;
    int nomem; /* sticky: oc_set_config found no room for a config's tiles */
    /* the memory model (oc_node_mem, oc_edge_cost_mem_set): bytes per device of
     * what is being priced, and the constants of the simulator's count */
    double *dmem;          /* [n_dev] */
    int *dtouched;         /* [n_dev] */
    unsigned char *dmark;  /* [n_dev] */
    unsigned char *upd;    /* [n_dev] devices that update a shard */
    int n_dt;
    double act_scale;      /* the dtype's element bytes over fp32's */
    uint64_t *kept;        /* [n_ops] sf_graph_kept_mask: the outputs the backward keeps */
    double w_state;        /* 2 + the optimizer's state slots */
    double w_elem;         /* the dtype's element bytes (mixed precision) */
    int w_mixed;           /* mixed precision: fp32 masters, 16-bit copies */
} oc_scratch;

sf_status oc_scratch_init(oc_scratch *s, const sf_graph *g, const sf_machine *m,
                          const sf_cost_model *cm, sf_sync_scheme scheme);
void oc_scratch_free(oc_scratch *s);

/* Put config c (and its part tiles: tiles, or computed when NULL) of op into
 * the scratch strategy. */
void oc_set_config(oc_scratch *s, int op, const sf_config *c, const sf_tile *tiles);

/* Candidates of every operator, allocated in `arena` ([n_ops]). */
sf_status oc_candidates(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_optcnn_options *o, sf_arena *arena, oc_cands *out, sf_error *err);

/* Node cost of operator op under config c (optcnn_cost.c gives the model);
 * NAN when out of memory. */
double oc_node_cost(oc_scratch *s, int op, const sf_config *c);

/* Edge cost of input k of consumer v with the producer under cu and v under cv. */
double oc_edge_cost(oc_scratch *s, int v, int k, const sf_config *cu, const sf_config *cv);
/* The same for the configs and tiles already in the scratch strategy. */
double oc_edge_cost_set(oc_scratch *s, int v, int k);

/* The memory model: what the simulator counts on each device all at once
 * (sf_sim_result.device_mem_bytes) for a strategy without ZeRO stages or
 * recomputation, split into a term per operator and a term per edge.
 *
 * oc_node_mem: op under config c (set into the scratch strategy): its parts'
 * activations (outputs, and what they save beyond their inputs, in the dtype)
 * on their devices, and its weights on every device of each shard (fp32
 * weight and gradient, plus the optimizer's state where the device updates
 * it; under mixed precision the fp32 master and state and the 16-bit copy
 * and gradient), 1/G of them for a group of G sharers. Returns the largest
 * device's bytes; with `kinds` ([n_dev * SF_SIM_MEM_KIND_COUNT]) also adds
 * each device's bytes by kind there. NAN when out of memory. */
double oc_node_mem(oc_scratch *s, int op, const sf_config *c, double *kinds);
/* oc_edge_cost_set and the edge's memory: the copies received from other
 * devices (each pair across devices, in the dtype, on the consumer's device;
 * a partial sum's messages in fp32 on the receiver): the largest device's
 * bytes into *mem, and with `kinds` each device's added there. */
double oc_edge_cost_mem_set(oc_scratch *s, int v, int k, double *mem, double *kinds);

#endif
