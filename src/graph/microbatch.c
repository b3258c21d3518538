/*
 * microbatch.c - the micro-batch graph of a pipelined strategy: m copies of a
 * graph at batch / m whose weights are copy 0's.
 *
 * A pipeline runs each micro-batch through the whole model and sums the
 * weights' gradients before one sync and update. Written as a graph, that is
 * the model unrolled over its micro-batches the way an RNN is unrolled over its
 * steps: every copy's operators share copy 0's weights, so the task graph's
 * weight groups already give one shard per weight, synced once after every
 * copy's backward pass (gradient accumulation), and memory counts the weights
 * once. The simulator and the runtime take this graph with the strategy's
 * configs repeated on every copy (sf_strategy_unroll) and the pipeline's
 * schedule as the order of the copies' passes.
 *
 * Every operator is rebuilt from its parameters on inputs of batch / m; an
 * operator whose parameters spell the batch out (a reshape to (B, ...)) gets it
 * divided, and every output must then have batch / m in dimension 0 with its
 * other sizes unchanged, else the graph cannot be cut into micro-batches and the
 * error names the operator.
 */
#include <stdio.h>
#include <string.h>

#include "soapflow/graph.h"

int64_t sf_graph_batch(const sf_graph *g) {
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type == SF_OP_INPUT && op->out_shapes[0].ndim > 0) return op->out_shapes[0].d[0];
    }
    return 0;
}

/* op's parameters for a copy at batch b of a graph at batch B. */
static sf_op_params copy_params(const sf_op *op, int64_t B, int64_t b) {
    sf_op_params p = op->params;
    if (op->type == SF_OP_INPUT) {
        p.input.shape.d[0] = b;
    } else if (op->type == SF_OP_RESHAPE && p.reshape.ndim > 0 && p.reshape.shape[0] == B) {
        p.reshape.shape[0] = b;
    }
    return p;
}

sf_graph *sf_graph_micro_batches(const sf_graph *g, int m, sf_error *err) {
    return sf_graph_micro_batch_copies(g, m, m, err);
}

sf_graph *sf_graph_micro_batch_copies(const sf_graph *g, int m, int copies, sf_error *err) {
    int64_t B = sf_graph_batch(g);
    int n = sf_graph_num_ops(g);
    if (copies < 1) {
        sf_error_set(err, SF_ERR_INVALID, "model '%s': %d copies of a micro-batch",
                     sf_graph_name(g), copies);
        return NULL;
    }
    if (m < 1 || B < 1 || B % m != 0) {
        sf_error_set(err, SF_ERR_INVALID,
                     "model '%s': %d micro-batches do not divide its batch of %lld", sf_graph_name(g),
                     m, (long long)B);
        return NULL;
    }
    if ((int64_t)n * copies > (int64_t)1 << 24) {
        sf_error_set(err, SF_ERR_RANGE,
                     "model '%s': %d operators in %d micro-batches make more than 2^24 operators",
                     sf_graph_name(g), n, copies);
        return NULL;
    }
    int64_t b = B / m;
    sf_graph *gu = sf_graph_new(sf_graph_name(g));
    if (!gu) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    sf_tensor_ref ins[64];
    for (int j = 0; j < copies; j++) {
        for (int i = 0; i < n; i++) {
            const sf_op *op = sf_graph_op(g, i);
            char name[512];
            if (j == 0)
                snprintf(name, sizeof name, "%s", op->name);
            else
                snprintf(name, sizeof name, "%s@mb%d", op->name, j);
            if (op->n_inputs > (int)(sizeof ins / sizeof ins[0])) {
                sf_error_set(err, SF_ERR_UNSUPPORTED, "operator '%s': too many inputs (%d)",
                             op->name, op->n_inputs);
                goto fail;
            }
            for (int k = 0; k < op->n_inputs; k++) {
                ins[k].op = j * n + op->inputs[k].op;
                ins[k].out = op->inputs[k].out;
            }
            sf_op_params p = copy_params(op, B, b);
            sf_error local = {0};
            int id = sf_graph_add_op_fixed(gu, op->type, name, &p, ins, op->n_inputs, op->fixed,
                                           op->n_fixed, &local);
            if (id < 0) {
                sf_error_set(err, (sf_status)id,
                             "model '%s' cannot be cut into micro-batches of %lld: %s",
                             sf_graph_name(g), (long long)b, local.msg);
                goto fail;
            }
            const sf_op *cp = sf_graph_op(gu, id);
            int same = cp->n_outputs == op->n_outputs;
            for (int k = 0; same && k < op->n_outputs; k++) {
                sf_shape want = op->out_shapes[k];
                if (want.ndim > 0) want.d[0] = b;
                same = sf_shape_equal(&want, &cp->out_shapes[k]);
            }
            if (!same) {
                sf_error_set(err, SF_ERR_INVALID,
                             "model '%s' cannot be cut into micro-batches: operator '%s' does "
                             "not keep the batch in dimension 0 of its outputs",
                             sf_graph_name(g), op->name);
                goto fail;
            }
            int owner = op->weight_owner >= 0 ? op->weight_owner : (j > 0 && op->n_params > 0 ? i : -1);
            if (owner >= 0 && !(j == 0 && owner == i)) {
                sf_status st = sf_graph_share_weights(gu, id, owner, err);
                if (st != SF_OK) goto fail;
            }
        }
    }
    return gu;
fail:
    sf_graph_free(gu);
    return NULL;
}
