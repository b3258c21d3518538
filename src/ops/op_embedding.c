/*
 * op_embedding.c - a lookup table: token ids (N, T) -> vectors (N, T, D).
 *
 * The input holds token ids (any rank >= 1, 4-byte elements like everything
 * else); the output appends the embedding dimension D. The table is V x D.
 *
 * Parallel space: the output. Dimension 0 is the sample, the other id dimensions
 * (sequence) are attributes, and D is a parameter dimension: splitting it splits
 * the table by columns, so each part stores V x D/p and gathers its slice of every
 * row. Splitting the vocabulary instead would need a masked gather and a sum of
 * partial outputs, which a tile of the output cannot express; D is the split that
 * maps to a rectangle of the output.
 *
 * FLOPs: the forward pass is a gather: no arithmetic, only bytes (the ids, the
 * gathered rows, the output). The backward pass scatter-adds the output gradient
 * into the table gradient: D adds per token.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc embedding_attrs[] = {
    {.name = "num_embeddings", .type = SF_ATTR_INT,
     .offset = offsetof(sf_op_params, embedding.num_embeddings)},
    {.name = "embedding_dim", .type = SF_ATTR_INT,
     .offset = offsetof(sf_op_params, embedding.embedding_dim)},
};

static void embedding_defaults(sf_op_params *p) {
    p->embedding.num_embeddings = 0;
    p->embedding.embedding_dim = 0;
}

static sf_status embedding_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    (void)n_in;
    const sf_embedding_params *e = &p->embedding;
    if (in[0].ndim < 1 || in[0].ndim >= SF_MAX_DIMS)
        return sf_error_set(err, SF_ERR_SHAPE, "ids must have 1 to %d dimensions, got %d",
                            SF_MAX_DIMS - 1, in[0].ndim);
    if (e->num_embeddings < 1)
        return sf_error_set(err, SF_ERR_INVALID, "num_embeddings must be >= 1, got %lld",
                            (long long)e->num_embeddings);
    if (e->embedding_dim < 1)
        return sf_error_set(err, SF_ERR_INVALID, "embedding_dim must be >= 1, got %lld",
                            (long long)e->embedding_dim);
    out[0] = in[0];
    out[0].d[out[0].ndim++] = e->embedding_dim;
    *n_out = 1;
    return SF_OK;
}

static int64_t embedding_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)in;
    (void)n_in;
    return p->embedding.num_embeddings * p->embedding.embedding_dim;
}

static void embedding_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_PARAMETER;
}

static void embedding_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    *r = *t;
    r->ndim = op->in_shapes[0].ndim; /* the ids of the tile's tokens, every D slice needs them */
    r->lo[r->ndim] = r->hi[r->ndim] = 0;
}

static void embedding_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    sf_tile r;
    embedding_region(op, t, 0, &r);
    double ids_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    double outs = (double)sf_tile_numel(t); /* tokens x D slice */
    cost->flops_fwd = 0;
    cost->flops_bwd = outs;
    /* forward: read ids, read the gathered rows, write the output */
    cost->bytes_fwd = ids_b + 2 * outs * SF_ELEM_BYTES;
    /* backward: read ids and the output gradient, read-modify-write gradient rows */
    cost->bytes_bwd = ids_b + 3 * outs * SF_ELEM_BYTES;
}

const sf_op_class sf_op_embedding_class = {
    .type = SF_OP_EMBEDDING,
    .name = "embedding",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = embedding_attrs,
    .n_attrs = (int)(sizeof embedding_attrs / sizeof embedding_attrs[0]),
    .defaults = embedding_defaults,
    .infer = embedding_infer,
    .param_count = embedding_params,
    .space = embedding_space,
    .region = embedding_region,
    .cost = embedding_cost,
};
