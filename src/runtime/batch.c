/*
 * batch.c - whole-batch buffers for a graph's inputs and labels, and the
 * synthetic data that every zoo model can train on. Token ids are bounded by
 * the rows of the embedding that reads them, classes by the last dimension of
 * the softmax_ce that takes the labels.
 */
#include <stdlib.h>

#include "soapflow/runtime.h"

void sf_batch_bufs_free(sf_batch_bufs *b) {
    if (!b) return;
    for (int i = 0; i < b->n_ops; i++) {
        if (b->inputs) free(b->inputs[i]);
        if (b->labels) free(b->labels[i]);
    }
    free(b->inputs);
    free(b->labels);
    free(b->numel);
    free(b->bound);
    free(b);
}

sf_batch_bufs *sf_batch_bufs_new(const sf_graph *g, sf_error *err) {
    int n = sf_graph_num_ops(g);
    sf_batch_bufs *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    size_t n1 = (size_t)(n ? n : 1);
    b->n_ops = n;
    b->inputs = calloc(n1, sizeof *b->inputs);
    b->labels = calloc(n1, sizeof *b->labels);
    b->numel = calloc(n1, sizeof *b->numel);
    b->bound = calloc(n1, sizeof *b->bound);
    if (!b->inputs || !b->labels || !b->numel || !b->bound) goto oom;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type == SF_OP_INPUT) {
            b->numel[i] = sf_shape_numel(&op->out_shapes[0]);
            b->inputs[i] = calloc((size_t)(b->numel[i] ? b->numel[i] : 1), sizeof(float));
            if (!b->inputs[i]) goto oom;
            if (op->params.input.is_index) {
                sf_tensor_ref users[8];
                int nu = sf_graph_consumers(g, i, 0, users, 8);
                b->bound[i] = 1;
                for (int u = 0; u < nu && u < 8; u++) {
                    const sf_op *c = sf_graph_op(g, users[u].op);
                    if (c->type == SF_OP_EMBEDDING)
                        b->bound[i] = c->params.embedding.num_embeddings;
                }
            }
        } else if (op->type == SF_OP_SOFTMAX_CE) {
            const sf_shape *s = &op->out_shapes[0];
            b->numel[i] = sf_shape_numel(s) / (s->d[s->ndim - 1] ? s->d[s->ndim - 1] : 1);
            b->bound[i] = s->d[s->ndim - 1];
            b->labels[i] = calloc((size_t)(b->numel[i] ? b->numel[i] : 1), sizeof(int32_t));
            if (!b->labels[i]) goto oom;
        }
    }
    b->batch.inputs = (const float *const *)b->inputs;
    b->batch.labels = (const int32_t *const *)b->labels;
    return b;
oom:
    sf_batch_bufs_free(b);
    sf_error_set(err, SF_ERR_NOMEM, "out of memory for the batch");
    return NULL;
}

void sf_batch_synthetic(sf_batch_bufs *b, const sf_graph *g, uint64_t seed, int64_t step) {
    sf_rng r;
    sf_rng_seed(&r, seed * 0x9e3779b97f4a7c15ULL + (uint64_t)step);
    for (int i = 0; i < b->n_ops; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (b->inputs[i]) {
            for (int64_t q = 0; q < b->numel[i]; q++)
                b->inputs[i][q] = op->params.input.is_index
                                      ? (float)sf_rng_below(&r, (uint64_t)b->bound[i])
                                      : (float)sf_rng_uniform(&r);
        }
        if (b->labels[i])
            for (int64_t q = 0; q < b->numel[i]; q++)
                b->labels[i][q] = (int32_t)sf_rng_below(&r, (uint64_t)b->bound[i]);
    }
}
