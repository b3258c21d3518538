/*
 * baselines.c - the hand-made strategies the papers compare against, and the
 * starting points of the search.
 *
 * Every baseline writes a config for every operator of the graph; each is a
 * pure function of the graph and the machine (no randomness). Degrees are
 * capped by the dimension's size and by SF_MAX_PARTS, so a baseline is valid on
 * any graph and machine (sf_strategy_validate passes). Exactly:
 *
 *   data    every operator split on its sample dimension into
 *           min(devices, size, SF_MAX_PARTS) parts, part i on device i; an
 *           operator without a sample dimension runs whole on device 0.
 *   model   OptCNN's "model parallelism": an operator with weights
 *           (n_params > 0) is split on its parameter dimension, the largest
 *           one when it has several (ties: the first), into
 *           min(devices, size, SF_MAX_PARTS) parts, part i on device i.
 *           Operators without weights, and those whose weights have no
 *           parameter dimension to split (layernorm, lstm, attention), are
 *           data parallel: model parallelism says nothing about them, and data
 *           parallelism is what OptCNN's baseline did between the layers it
 *           split. Tied operators (an embedding and the LM head that shares its
 *           table, sf_graph_op_tied) are data parallel too: their parameter
 *           dimensions are different axes of the one table (the embedding's
 *           columns, the head's rows), so splitting both on them would split
 *           the table two ways that do not tie (src/strategy/tie.c).
 *   owt     Krizhevsky's "one weird trick": linear layers as in `model`
 *           (parameter dimension over all devices; a tied one, data parallel
 *           as there); every other operator
 *           (convolutions, pools, norms, activations, and the elementwise
 *           operators and softmax_ce after a linear layer) data parallel.
 *   expert  GNMT-style for recurrent graphs, see expert_local below; for a
 *           graph without LSTM operators, `data`.
 *   single  everything whole on one device.
 */
#include "soapflow/strategy.h"

#include <stdlib.h>
#include <string.h>

/* A config with dimension `dim` split `degree` ways (all others whole), part i
 * on device first + i * stride. dim < 0 or degree 1: one part on `first`. */
static void split_one(sf_config *c, const sf_op *op, int dim, int degree, int first, int stride) {
    memset(c, 0, sizeof *c);
    c->ndim = op->space.ndim;
    for (int i = 0; i < SF_MAX_DIMS; i++) c->degree[i] = 1;
    if (dim < 0 || degree < 1) degree = 1;
    if (dim >= 0) c->degree[dim] = degree;
    c->n_parts = degree;
    for (int p = 0; p < degree; p++) c->device[p] = (int16_t)(first + p * stride);
}

/* min(want, size of dim, SF_MAX_PARTS), at least 1. */
static int cap_degree(const sf_op *op, int dim, int want) {
    int64_t d = want;
    if (dim >= 0 && op->space.d[dim] < d) d = op->space.d[dim];
    if (d > SF_MAX_PARTS) d = SF_MAX_PARTS;
    return d < 1 ? 1 : (int)d;
}

static int sample_dim(const sf_op *op) {
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == SF_DIM_SAMPLE) return i;
    return -1;
}

/* The largest parameter dimension (the first of equals), or -1. */
static int param_dim(const sf_op *op) {
    int best = -1;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == SF_DIM_PARAMETER && (best < 0 || op->space.d[i] > op->space.d[best]))
            best = i;
    return best;
}

static void data_config(sf_config *c, const sf_op *op, int n_dev) {
    int dim = sample_dim(op);
    split_one(c, op, dim, cap_degree(op, dim, n_dev), 0, 1);
}

static void model_config(sf_config *c, const sf_op *op, int n_dev) {
    int dim = param_dim(op);
    if (dim < 0) {
        data_config(c, op, n_dev);
        return;
    }
    split_one(c, op, dim, cap_degree(op, dim, n_dev), 0, 1);
}

static int mismatch(const sf_strategy *s, const sf_graph *g) {
    return sf_strategy_num_ops(s) != sf_graph_num_ops(g);
}

sf_status sf_strategy_data(sf_strategy *s, const sf_graph *g, const sf_machine *m) {
    if (mismatch(s, g) || !m) return SF_ERR_INVALID;
    int n_dev = sf_machine_num_devices(m);
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        data_config(sf_strategy_config(s, i), sf_graph_op(g, i), n_dev);
    return SF_OK;
}

sf_status sf_strategy_model(sf_strategy *s, const sf_graph *g, const sf_machine *m) {
    if (mismatch(s, g) || !m) return SF_ERR_INVALID;
    int n_dev = sf_machine_num_devices(m);
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->n_params > 0 && !sf_graph_op_tied(g, i))
            model_config(sf_strategy_config(s, i), op, n_dev);
        else
            data_config(sf_strategy_config(s, i), op, n_dev);
    }
    return SF_OK;
}

sf_status sf_strategy_owt(sf_strategy *s, const sf_graph *g, const sf_machine *m) {
    if (mismatch(s, g) || !m) return SF_ERR_INVALID;
    int n_dev = sf_machine_num_devices(m);
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type == SF_OP_LINEAR && !sf_graph_op_tied(g, i))
            model_config(sf_strategy_config(s, i), op, n_dev);
        else
            data_config(sf_strategy_config(s, i), op, n_dev);
    }
    return SF_OK;
}

/*
 * The expert strategy's device within a node for every operator (local[i]).
 *
 * Layer depth of an LSTM operator: follow input 0 (the x input) backwards
 * through non-LSTM operators; if an LSTM operator is reached, the depth is its
 * depth + 1, otherwise 0. In the zoo's unrolled RNNs every chunk of layer l
 * takes x from chunk k of layer l-1, so all chunks of a layer get the same
 * depth, the encoder's and the decoder's layer l alike (GNMT put encoder and
 * decoder layer l on the same GPU). Chunks sharing weights then take the depth
 * of their weight owner, so that one layer is never spread over two devices
 * even in a graph wired differently. Layer depth j runs on local device
 * j % devices_per_node.
 *
 * Other operators: one that consumes (any input, first such input wins) an
 * operator already placed by this rule follows it (the concat of a layer's
 * chunks, attention over the top layer, the vocabulary linear and the softmax
 * after it sit with the top layer). The rest, which lie before any LSTM
 * (inputs, embeddings, the time split), go with their first consumer in graph
 * order (the embedding with layer 0), and an operator with no consumer at all
 * goes to local device 0.
 */
static void expert_local(const sf_graph *g, int dpn, int *depth, int *placed, int *first_use,
                         int *local) {
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++) first_use[i] = -1;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) {
            int p = op->inputs[k].op;
            if (p >= 0 && p < n && first_use[p] < 0) first_use[p] = i;
        }
        placed[i] = 0;
        local[i] = 0;
        depth[i] = 0;
        if (op->type == SF_OP_LSTM) {
            int j = op->n_inputs > 0 ? op->inputs[0].op : -1;
            while (j >= 0 && sf_graph_op(g, j)->type != SF_OP_LSTM) {
                const sf_op *q = sf_graph_op(g, j);
                j = q->n_inputs > 0 ? q->inputs[0].op : -1;
            }
            depth[i] = j >= 0 ? depth[j] + 1 : 0;
            if (op->weight_owner >= 0 && op->weight_owner < i) depth[i] = depth[op->weight_owner];
            local[i] = depth[i] % dpn;
            placed[i] = 1;
            continue;
        }
        for (int k = 0; k < op->n_inputs; k++) {
            int p = op->inputs[k].op;
            if (p >= 0 && p < i && placed[p]) {
                local[i] = local[p];
                placed[i] = 1;
                break;
            }
        }
    }
    /* Backwards, so that a chain input -> embedding -> split resolves from the
     * split's LSTM consumer down to the input. */
    for (int i = n - 1; i >= 0; i--)
        if (!placed[i]) local[i] = first_use[i] > i ? local[first_use[i]] : 0;
}

sf_status sf_strategy_expert(sf_strategy *s, const sf_graph *g, const sf_machine *m) {
    if (mismatch(s, g) || !m) return SF_ERR_INVALID;
    int n = sf_graph_num_ops(g);
    int rnn = 0;
    for (int i = 0; i < n && !rnn; i++) rnn = sf_graph_op(g, i)->type == SF_OP_LSTM;
    if (!rnn) return sf_strategy_data(s, g, m);

    /* Nodes and devices per node from the description, made consistent with
     * the device count (a subset machine may hold a partial node). */
    int n_dev = sf_machine_num_devices(m);
    const sf_machine_desc *desc = sf_machine_get_desc(m);
    int dpn = desc ? desc->devices_per_node : n_dev;
    if (dpn < 1 || dpn > n_dev) dpn = n_dev;
    int nodes = n_dev / dpn;
    if (desc && desc->nodes >= 1 && desc->nodes < nodes) nodes = desc->nodes;
    if (nodes < 1) nodes = 1;

    int *buf = malloc((size_t)n * 4 * sizeof *buf);
    if (!buf) return SF_ERR_NOMEM;
    int *depth = buf, *placed = buf + n, *first_use = buf + 2 * n, *local = buf + 3 * n;
    expert_local(g, dpn, depth, placed, first_use, local);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int dim = sample_dim(op);
        split_one(sf_strategy_config(s, i), op, dim, cap_degree(op, dim, nodes), local[i], dpn);
    }
    free(buf);
    return SF_OK;
}

sf_status sf_strategy_single(sf_strategy *s, const sf_graph *g, int device) {
    if (mismatch(s, g) || device < 0 || device > INT16_MAX) return SF_ERR_INVALID;
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        split_one(sf_strategy_config(s, i), sf_graph_op(g, i), -1, 1, device, 0);
    return SF_OK;
}

/* Every baseline's name: fsdp and zeroN are data parallelism with a ZeRO
 * stage on every weight group. */
static const char *const bl_names[] = {"data",  "model", "owt",   "expert", "single", "megatron",
                                       "megatron-sp", "fsdp", "zero1", "zero2", "zero3"};
enum { BL_DATA, BL_MODEL, BL_OWT, BL_EXPERT, BL_SINGLE, BL_MEGATRON, BL_MEGATRON_SP, BL_FSDP,
       BL_ZERO1, BL_ZERO2, BL_ZERO3, BL_COUNT };
_Static_assert(sizeof bl_names / sizeof bl_names[0] == BL_COUNT, "a name per baseline");

/* The baseline `name` starts with (name[len] is '\0' or ':'), or -1. */
static int bl_which(const char *name, size_t *len) {
    int best = -1;
    for (int i = 0; i < BL_COUNT && name; i++) {
        size_t n = strlen(bl_names[i]);
        if (strncmp(name, bl_names[i], n) == 0 && (name[n] == '\0' || name[n] == ':') &&
            (best < 0 || n > *len)) {
            best = i;
            *len = n;
        }
    }
    return best;
}

int sf_strategy_is_baseline_name(const char *name) {
    size_t len = 0;
    return bl_which(name, &len) >= 0;
}

/* What follows a baseline's ':' (docs/strategies.md). */
typedef struct bl_opts {
    long tp;       /* megatron: the tensor-parallel degree (0: a node) */
    int sp;        /* megatron: sequence parallelism */
    int zero;      /* the ZeRO stage of every weight group */
    int recompute; /* 0 none, 1 selective (attention), 2 full (all but residual adds) */
    int three_d;   /* megatron: pp, dp, mb or schedule given (sf_strategy_megatron3d) */
    sf_megatron3d_options m3; /* megatron: pp, dp, mb, schedule */
} bl_opts;

/* A positive integer option of megatron; -1 when val is not one. */
static long bl_count(const char *val) {
    char *end;
    long x = strtol(val, &end, 10);
    return end == val || *end || x < 1 || x > (1L << 30) ? -1 : x;
}

static sf_status bl_parse(const char *name, int which, const char *opts, bl_opts *o,
                          sf_error *err) {
    int meg = which == BL_MEGATRON || which == BL_MEGATRON_SP;
    char buf[256];
    if (strlen(opts) >= sizeof buf)
        return sf_error_set(err, SF_ERR_INVALID, "baseline '%.64s...': options too long", name);
    strcpy(buf, opts);
    int first = 1;
    for (char *tok = buf, *next; tok; tok = next, first = 0) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(tok, '=');
        if (eq) *eq = '\0';
        const char *key = tok, *val = eq ? eq + 1 : NULL;
        char *end;
        if (meg && first && !eq && *tok >= '0' && *tok <= '9') { /* megatron:T */
            val = tok;
            key = "tp";
        }
        if (meg && strcmp(key, "tp") == 0 && val) {
            o->tp = strtol(val, &end, 10);
            if (end == val || *end || o->tp < 1 || o->tp > SF_MAX_DEVICES)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "baseline '%s': the tensor-parallel degree must be an "
                                    "integer from 1 to %d",
                                    name, SF_MAX_DEVICES);
        } else if (meg && strcmp(key, "sp") == 0 && !val) {
            o->sp = 1;
        } else if (meg && val &&
                   (strcmp(key, "pp") == 0 || strcmp(key, "dp") == 0 || strcmp(key, "mb") == 0)) {
            long x = bl_count(val);
            if (x < 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "baseline '%s': %s must be a whole number above 0, not '%s'",
                                    name, key, val);
            int *at = key[0] == 'p' ? &o->m3.pp : key[0] == 'd' ? &o->m3.dp : &o->m3.micro_batch;
            *at = (int)x;
            o->three_d = 1;
        } else if (meg && strcmp(key, "schedule") == 0 && val) {
            sf_pipe_schedule sch;
            if (sf_pipe_schedule_parse(val, &sch, &o->m3.chunks) != 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "baseline '%s': schedule must be gpipe, 1f1b or "
                                    "interleaved[:V] (V from 2 to %d), not '%s'",
                                    name, SF_MAX_PIPE_CHUNKS, val);
            o->m3.schedule = (int)sch;
            o->three_d = 1;
        } else if (strcmp(key, "zero") == 0 && val) {
            long z = strtol(val, &end, 10);
            if (end == val || *end || z < 0 || z >= SF_ZERO_STAGE_COUNT)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "baseline '%s': zero must be a stage from 0 to %d", name,
                                    SF_ZERO_STAGE_COUNT - 1);
            o->zero = (int)z;
        } else if (strcmp(key, "recompute") == 0 && val) {
            static const char *const rc[] = {"none", "selective", "full"};
            o->recompute = -1;
            for (int i = 0; i < 3; i++)
                if (strcmp(val, rc[i]) == 0) o->recompute = i;
            if (o->recompute < 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "baseline '%s': recompute must be none, selective or full",
                                    name);
        } else {
            return sf_error_set(err, SF_ERR_INVALID,
                                "baseline '%s': unknown option '%s'%s (known: %szero=0-3, "
                                "recompute=none|selective|full)",
                                name, key, val ? "=..." : "",
                                meg ? "tp=T, pp=P, dp=D, mb=B, schedule=S, sp, " : "");
        }
    }
    return SF_OK;
}

/* The options every baseline takes: a ZeRO stage on every weight group (its
 * owner's config), recomputation of the attention operators (selective:
 * Korthikanti et al. 2022) or of every operator but the inputs, the residual
 * adds and the loss (full: each block keeps the activations its adds join).
 * Recomputing operators whose outputs feed one recomputing consumer form a
 * chain that is made again whole before its backward (docs/simulator.md), so
 * full also keeps one operator's outputs in every ceil(sqrt(n)) of a chain
 * (n operators in the graph: Chen et al. 2016's checkpoints), which a network
 * without residual adds (VGG) needs to save anything at its peak. */
/* The reads of op's outputs (an operator reading one twice counts twice). */
static int consumers(const sf_graph *g, int op) {
    int n = 0;
    for (int k = 0; k < sf_graph_op(g, op)->n_outputs; k++)
        n += sf_graph_consumers(g, op, k, NULL, 0);
    return n;
}

static void bl_apply(sf_strategy *s, const sf_graph *g, const bl_opts *o) {
    int n = sf_graph_num_ops(g), every = 1;
    while (every * every < n) every++;
    int *run = o->recompute == 2 ? calloc((size_t)n, sizeof *run) : NULL; /* chain lengths */
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        sf_config *c = sf_strategy_config(s, i);
        if (op->weight_owner < 0 && op->n_params > 0) c->zero = (uint8_t)o->zero;
        int t = op->type;
        if (o->recompute == 1) {
            c->recompute = t == SF_OP_ATTENTION;
        } else if (o->recompute == 2) {
            c->recompute = t != SF_OP_INPUT && t != SF_OP_ADD && t != SF_OP_SOFTMAX_CE;
            if (!run || !c->recompute) continue;
            /* the chain reaching i: through an input whose producer recomputes
             * and feeds i alone */
            int len = 1;
            for (int k = 0; k < op->n_inputs; k++) {
                int p = op->inputs[k].op;
                if (sf_strategy_get(s, p)->recompute && consumers(g, p) == 1 && run[p] + 1 > len)
                    len = run[p] + 1;
            }
            if (len >= every) { /* a checkpoint: kept, the chain starts again */
                c->recompute = 0;
                len = 0;
            }
            run[i] = len;
        }
    }
    free(run);
}

sf_status sf_strategy_baseline(sf_strategy *s, const char *name, const sf_graph *g,
                               const sf_machine *m, sf_error *err) {
    size_t len = 0;
    int which = bl_which(name, &len);
    if (which < 0)
        return sf_error_set(err, SF_ERR_NOTFOUND,
                            "unknown baseline strategy '%s' (known: data, model, owt, expert, "
                            "single, megatron[:T], megatron-sp[:T], fsdp, zero1, zero2, zero3; "
                            "each may add :zero=N,recompute=R; megatron also "
                            "tp=T,pp=P,dp=D,mb=B,schedule=S)",
                            name ? name : "(null)");
    if (mismatch(s, g))
        return sf_error_set(err, SF_ERR_INVALID, "strategy has %d operators, graph '%s' has %d",
                            sf_strategy_num_ops(s), sf_graph_name(g), sf_graph_num_ops(g));
    bl_opts o = {.sp = which == BL_MEGATRON_SP};
    sf_megatron3d_options_default(&o.m3);
    if (which >= BL_FSDP) o.zero = which == BL_FSDP ? SF_ZERO_WEIGHTS : which - BL_FSDP;
    if (name[len] == ':') {
        sf_status ps = bl_parse(name, which, name + len + 1, &o, err);
        if (ps != SF_OK) return ps;
    }
    sf_status st = SF_OK;
    sf_strategy_set_pipeline(s, NULL); /* none but megatron's with pp */
    switch (which) {
    case BL_MODEL: st = sf_strategy_model(s, g, m); break;
    case BL_OWT: st = sf_strategy_owt(s, g, m); break;
    case BL_EXPERT: st = sf_strategy_expert(s, g, m); break;
    case BL_SINGLE: st = sf_strategy_single(s, g, 0); break;
    case BL_MEGATRON:
    case BL_MEGATRON_SP:
        if (!m) return sf_error_set(err, SF_ERR_INVALID, "baseline '%s': no machine", name);
        if (o.three_d) {
            o.m3.tp = (int)o.tp;
            o.m3.sp = o.sp;
            st = sf_strategy_megatron3d(s, g, m, &o.m3, err);
        } else {
            st = sf_strategy_megatron(s, g, m, (int)o.tp, o.sp, err);
        }
        if (st != SF_OK) return st;
        break;
    default: st = sf_strategy_data(s, g, m); break;
    }
    if (st != SF_OK)
        return sf_error_set(err, st, "baseline '%s': %s", name, sf_status_str(st));
    bl_apply(s, g, &o);
    /* a pipeline takes ZeRO 1 at most: said now, naming the baseline */
    if (sf_strategy_pipeline(s) && (st = sf_strategy_validate(s, g, m, err)) != SF_OK) {
        sf_error_prefix(err, "baseline '%.100s': ", name);
        return st;
    }
    return SF_OK;
}
