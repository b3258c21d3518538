/*
 * megatron.c - Megatron-LM's tensor parallelism as a baseline strategy:
 * `megatron[:T]` and `megatron-sp[:T]` (Shoeybi et al., 2019; sequence
 * parallelism: Korthikanti et al., 2022).
 *
 * The machine's devices form D = devices / T groups of T consecutive devices
 * (T defaults to a node's devices, so a group is one node and the groups are
 * data parallel across nodes). Inside a group, by operator:
 *
 *   attention        split on its heads, T ways: each device computes its
 *                    heads' Q, K, V and its slice of the output projection,
 *                    a partial sum of the block's output;
 *   linear, column   split on its output features T ways (W's rows), reading
 *                    its whole input: a linear whose input is not a
 *                    row-parallel layer's intermediate (an MLP's first layer,
 *                    the LM head);
 *   linear, row      split on its input features T ways (W's columns): a
 *                    linear that reads a column-parallel linear's output
 *                    through elementwise operators only (the MLP's second
 *                    layer); its output is a partial sum;
 *   between them     the elementwise operators on the column layer's output
 *                    (GELU, dropout) split on the features like it;
 *   embedding        the token embedding (the largest vocabulary, and every
 *                    embedding tied to a linear) split on its vocabulary rows:
 *                    each device looks up the tokens of its rows, a partial
 *                    sum; other embeddings (positions) are elementwise. An
 *                    embedding tied to an LM head (GPT-2's wte) and that head
 *                    split the one table together: the embedding on its
 *                    vocabulary rows, the head (column-parallel) on its output
 *                    features, which are the same rows, T ways with the same
 *                    ranges on the same devices, so each device holds one
 *                    shard of the table that both use (src/strategy/tie.c);
 *                    where either cannot be split T ways on the vocabulary,
 *                    both are split like the rest (which keeps the table
 *                    whole);
 *   softmax_ce       after a column-parallel linear, split on the classes
 *                    where the operator allows it (the vocabulary-parallel
 *                    cross-entropy: the logits are never gathered);
 *   the rest         (layer norms, residual adds, dropout on the residual
 *                    stream): megatron-sp splits them on the sequence, T ways
 *                    (sequence parallelism: the task graph reduce-scatters the
 *                    partial sums into them and all-gathers them before the
 *                    next column layer). Plain megatron runs them on every
 *                    device of the group in Megatron-LM, after an all-reduce;
 *                    soapflow has no replicated operators, so it splits them on
 *                    the group's samples instead (on the sequence when the
 *                    batch has fewer samples than devices): each device does
 *                    1/T of that work, and the all-reduce becomes a
 *                    reduce-scatter and an all-gather on the sample dimension,
 *                    the same bytes.
 *
 * Every operator is also split on its samples D ways, group d taking samples
 * d/D: part d * T + t (t the index inside the group) on device d * T + t. The
 * task graph then lowers each reduction into the steps the consumer needs
 * (src/taskgraph/reduce.c).
 */
#include "soapflow/strategy.h"

#include <stdlib.h>
#include <string.h>

typedef enum role {
    R_REST = 0, /* layer norms, adds, ...: split over the group (samples or sequence) */
    R_COLUMN,   /* linear on its output features */
    R_ROW,      /* linear on its input features (a partial sum) */
    R_FEATURE,  /* elementwise on a column layer's output, split on its last dimension */
    R_HEADS,    /* attention on its heads */
    R_VOCAB,    /* embedding on its vocabulary rows */
    R_CLASSES,  /* softmax_ce on its classes */
} role;

static int first_dim(const sf_op *op, sf_dim_kind k) {
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == k) return i;
    return -1;
}

/* The last output-feature (parameter) dimension of a linear: its out features. */
static int last_dim(const sf_op *op, sf_dim_kind k) {
    for (int i = op->space.ndim - 1; i >= 0; i--)
        if (op->kinds[i] == k) return i;
    return -1;
}

/* One input, elementwise on it: what lies between an MLP's two linears. */
static int passes_features(const sf_op *op) {
    switch (op->type) {
    case SF_OP_RELU:
    case SF_OP_GELU:
    case SF_OP_TANH:
    case SF_OP_SIGMOID:
    case SF_OP_DROPOUT: return op->n_inputs == 1;
    default: return 0;
    }
}

/* The operators' roles, in id (topological) order; T: the group's devices. */
static void assign_roles(const sf_graph *g, int T, role *r) {
    int n = sf_graph_num_ops(g);
    int64_t vocab = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type == SF_OP_EMBEDDING && op->params.embedding.num_embeddings > vocab)
            vocab = op->params.embedding.num_embeddings;
    }
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        r[i] = R_REST;
        int src = op->n_inputs ? op->inputs[0].op : -1;
        role in = src >= 0 ? r[src] : R_REST;
        switch (op->type) {
        case SF_OP_ATTENTION: r[i] = R_HEADS; break;
        case SF_OP_LINEAR: r[i] = in == R_COLUMN || in == R_FEATURE ? R_ROW : R_COLUMN; break;
        case SF_OP_EMBEDDING:
            if (op->params.embedding.num_embeddings == vocab) r[i] = R_VOCAB;
            break;
        case SF_OP_SOFTMAX_CE:
            if (in == R_COLUMN) r[i] = R_CLASSES;
            break;
        default:
            if (passes_features(op) && (in == R_COLUMN || in == R_FEATURE)) r[i] = R_FEATURE;
            break;
        }
    }
    /* an embedding whose table a linear shares (a tied LM head) is split on the
     * vocabulary with it, the head on its output features (the same rows of the
     * table): both T ways, or neither (the table then stays whole) */
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int ow = op->weight_owner;
        if (op->type != SF_OP_LINEAR || ow < 0 || sf_graph_op(g, ow)->type != SF_OP_EMBEDDING)
            continue;
        const sf_op *e = sf_graph_op(g, ow);
        int ve = first_dim(e, SF_DIM_REDUCE), vh = last_dim(op, SF_DIM_PARAMETER);
        int both = ve >= 0 && vh >= 0 && e->space.d[ve] >= T && op->space.d[vh] >= T;
        r[ow] = both ? R_VOCAB : R_REST;
        r[i] = both ? R_COLUMN : R_REST;
    }
}

/* The config of op: samples D ways (the sample dimension s, the first) and
 * dimension `dim` T ways (dim < 0: none; dim == s: the samples D * T ways).
 * Parts are numbered with the samples outermost, so part p is piece p % per
 * of sample group p / per (per = parts / D), on that group's device, counted
 * from device `base` (a pipeline stage's first device). */
static sf_status place(sf_config *c, const sf_op *op, int s, int D, int dim, int T, int base) {
    int deg[SF_MAX_DIMS];
    for (int i = 0; i < SF_MAX_DIMS; i++) deg[i] = 1;
    deg[s] = D;
    if (dim >= 0) deg[dim] *= T;
    sf_status st = sf_config_set_degrees(c, op->space.ndim, deg);
    if (st != SF_OK) return st;
    int per = c->n_parts / D;
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(base + p / per * T + p % per);
    return SF_OK;
}

/* The layout of every operator: T-way tensor groups, D-way data parallel,
 * operator i's devices counted from base[i] (NULL: 0), its samples cut into mbs
 * micro-batches (what a part splits is a micro-batch's samples). */
static sf_status layout(sf_strategy *s, const sf_graph *g, const sf_machine *m, int T, int D,
                        int mbs, const int *base, int sp, const char *bn, sf_error *err) {
    int n = sf_graph_num_ops(g);
    int attn = -1, lin = -1;
    for (int i = 0; i < n; i++) {
        sf_op_type t = sf_graph_op(g, i)->type;
        if (t == SF_OP_ATTENTION && attn < 0) attn = i;
        if (t == SF_OP_LINEAR && lin < 0) lin = i;
    }
    if (attn < 0 || lin < 0)
        return sf_error_set(err, SF_ERR_UNSUPPORTED,
                            "%s: graph '%s' has no transformer layer (Megatron splits attention "
                            "on its heads and linear layers on their features)",
                            bn, sf_graph_name(g));
    (void)m;
    role *r = malloc((size_t)n * sizeof *r);
    if (!r) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    assign_roles(g, T, r);
    sf_status st = SF_OK;
    for (int i = 0; i < n && st == SF_OK; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int sd = first_dim(op, SF_DIM_SAMPLE);
        int64_t samples = sd < 0 ? 0 : op->space.d[sd] / mbs;
        if (sd < 0 || samples < D) {
            st = sf_error_set(err, SF_ERR_INVALID,
                              "%s: operator '%s' has %lld samples%s, fewer than the %d "
                              "data-parallel groups of %d devices",
                              bn, op->name, (long long)samples, mbs > 1 ? " a micro-batch" : "",
                              D, T);
            break;
        }
        int dim = -1;
        const char *what = NULL;
        switch (r[i]) {
        case R_HEADS: dim = first_dim(op, SF_DIM_REDUCE), what = "its heads"; break;
        case R_ROW: dim = first_dim(op, SF_DIM_REDUCE), what = "its input features"; break;
        case R_VOCAB: dim = first_dim(op, SF_DIM_REDUCE), what = "its vocabulary"; break;
        case R_COLUMN: dim = last_dim(op, SF_DIM_PARAMETER), what = "its output features"; break;
        case R_CLASSES:
            /* where the operator cannot split its classes, or its linear is not
             * split on them, the logits are gathered */
            dim = op->space.ndim - 1;
            if (op->kinds[dim] == SF_DIM_NONE || r[op->inputs[0].op] != R_COLUMN) r[i] = R_REST;
            break;
        case R_FEATURE:
            dim = op->space.ndim - 1;
            if (r[op->inputs[0].op] != R_COLUMN && r[op->inputs[0].op] != R_FEATURE) r[i] = R_REST;
            break;
        case R_REST: break;
        }
        if (r[i] == R_REST) {
            /* sequence parallelism, or the group's samples (the sequence when
             * there are fewer samples than the group's devices) */
            int seq = first_dim(op, SF_DIM_ATTRIBUTE);
            int by_samples = !sp && samples >= (int64_t)D * T;
            dim = by_samples ? sd : seq;
            if (dim >= 0 && dim != sd && op->space.d[dim] < T) dim = -1;
        }
        if (what && (dim < 0 || op->kinds[dim] == SF_DIM_NONE || op->space.d[dim] < T)) {
            st = sf_error_set(err, SF_ERR_UNSUPPORTED,
                              "%s: operator '%s' cannot be split %d ways on %s", bn, op->name, T,
                              what);
            break;
        }
        if (place(sf_strategy_config(s, i), op, sd, D, dim, T, base ? base[i] : 0) != SF_OK)
            st = sf_error_set(err, SF_ERR_RANGE, "%s: operator '%s' would have more than %d parts",
                              bn, op->name, SF_MAX_PARTS);
    }
    free(r);
    return st;
}

/* A node's devices (the whole machine when it has no nodes). */
static int node_devices(const sf_machine *m) {
    int n_dev = sf_machine_num_devices(m);
    const sf_machine_desc *desc = sf_machine_get_desc(m);
    return desc && desc->devices_per_node > 0 && desc->devices_per_node <= n_dev
               ? desc->devices_per_node
               : n_dev;
}

sf_status sf_strategy_megatron(sf_strategy *s, const sf_graph *g, const sf_machine *m, int tp,
                               int sp, sf_error *err) {
    const char *bn = sp ? "megatron-sp" : "megatron";
    if (!s || !g || !m || sf_strategy_num_ops(s) != sf_graph_num_ops(g))
        return sf_error_set(err, SF_ERR_INVALID, "%s: no strategy, graph or machine", bn);
    int n_dev = sf_machine_num_devices(m), dpn = node_devices(m);
    int T = tp > 0 ? tp : dpn;
    if (T > dpn || dpn % T != 0 || n_dev % T != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%s: a tensor-parallel degree of %d does not divide the nodes of "
                            "machine '%s' (%d devices a node, %d in all)",
                            bn, T, sf_machine_name(m), dpn, n_dev);
    sf_strategy_set_pipeline(s, NULL);
    sf_status st = layout(s, g, m, T, n_dev / T, 1, NULL, sp, bn, err);
    if (st == SF_OK) st = sf_strategy_validate(s, g, m, err);
    return st;
}

/* ---- Megatron's 3D parallelism: tensor x data x pipeline ------------------------ */

void sf_megatron3d_options_default(sf_megatron3d_options *o) {
    memset(o, 0, sizeof *o);
    o->pp = 1;
    o->schedule = SF_PIPE_1F1B;
    o->chunks = 1;
}

sf_status sf_strategy_megatron3d(sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                 const sf_megatron3d_options *o, sf_error *err) {
    const char *bn = o && o->sp ? "megatron-sp" : "megatron";
    if (!s || !g || !m || !o || sf_strategy_num_ops(s) != sf_graph_num_ops(g))
        return sf_error_set(err, SF_ERR_INVALID, "%s: no strategy, graph, machine or options", bn);
    int n_dev = sf_machine_num_devices(m), dpn = node_devices(m);
    int T = o->tp > 0 ? o->tp : dpn, P = o->pp > 0 ? o->pp : 1;
    int v = o->schedule == SF_PIPE_INTERLEAVED ? (o->chunks > 1 ? o->chunks : 2) : 1;
    if (T > dpn || dpn % T != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%s: a tensor-parallel degree of %d does not divide a node of "
                            "machine '%s' (%d devices)",
                            bn, T, sf_machine_name(m), dpn);
    if (o->schedule < 0 || o->schedule >= SF_PIPE_SCHEDULE_COUNT)
        return sf_error_set(err, SF_ERR_INVALID, "%s: schedule %d is not gpipe, 1f1b or "
                                                 "interleaved:V", bn, o->schedule);
    if ((int64_t)T * P > n_dev || n_dev % (T * P) != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%s: tp %d x pp %d = %d devices do not divide the %d devices of "
                            "machine '%s'",
                            bn, T, P, T * P, n_dev, sf_machine_name(m));
    int D = o->dp > 0 ? o->dp : n_dev / (T * P);
    if ((int64_t)T * P * D > n_dev || n_dev % (T * P * D) != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%s: tp %d x pp %d x dp %d = %lld devices do not divide the %d "
                            "devices of machine '%s'",
                            bn, T, P, D, (long long)T * P * D, n_dev, sf_machine_name(m));
    int64_t batch = sf_graph_batch(g);
    /* B: samples a micro-batch a data-parallel rank; by default one (Megatron's
     * GPT-3 setting) in a pipeline, the whole share (no accumulation) without */
    int64_t B = o->micro_batch > 0 ? o->micro_batch : P > 1 ? 1 : batch / D;
    if (B < 1 || batch % (D * B) != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%s: the batch of %lld is not a whole number of micro-batches of "
                            "dp %d x mb %lld samples",
                            bn, (long long)batch, D, (long long)B);
    int64_t mb = batch / (D * B);
    if (mb > INT32_MAX)
        return sf_error_set(err, SF_ERR_RANGE, "%s: %lld micro-batches", bn, (long long)mb);
    sf_pipeline *pl = NULL;
    int n = sf_graph_num_ops(g);
    int *base = calloc((size_t)(n ? n : 1), sizeof *base);
    if (!base) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    sf_status st = SF_OK;
    if (P > 1 || mb > 1 || v > 1) {
        pl = malloc(sizeof *pl);
        if (!pl) {
            free(base);
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        }
        st = sf_pipeline_blocks(pl, g, P, v, (int)mb, (sf_pipe_schedule)o->schedule, err);
        if (st == SF_OK) {
            sf_pipeline_op_chunks(pl, g, base);
            for (int i = 0; i < n; i++) base[i] = base[i] % P * T * D;
        }
    }
    if (st == SF_OK) {
        sf_strategy_set_pipeline(s, pl);
        st = layout(s, g, m, T, D, (int)mb, base, o->sp, bn, err);
    }
    if (st == SF_OK) st = sf_strategy_validate(s, g, m, err);
    free(base);
    free(pl);
    return st;
}
