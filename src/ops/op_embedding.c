/*
 * op_embedding.c - a lookup table: token ids (N, T) -> vectors (N, T, D).
 *
 * The input holds token ids (any rank >= 1, 4-byte elements like everything
 * else); the output appends the embedding dimension D. The table is V x D.
 *
 * Parallel space: the output, then the vocabulary V. Dimension 0 is the sample,
 * the other id dimensions (sequence) are attributes, and D is a parameter
 * dimension: splitting it splits the table by columns, so each part stores
 * V x D/p and gathers its slice of every row. V is a reduction dimension
 * (SF_DIM_REDUCE, no output dimension names it): a part with rows [v0, v1) of
 * the table looks up the tokens whose ids fall in them and writes zeros for the
 * others, so the parts' outputs are partial sums of one piece that the task
 * graph reduces (src/taskgraph/reduce.c; Megatron's vocabulary-parallel
 * embedding). Ids of rank 5 leave no room for it (SF_MAX_DIMS): V stays whole.
 *
 * A tile owns columns [d0, d1) of rows [v0, v1) of the table
 * (sf_op_weight_slices: v1 - v0 rows of d1 - d0 elements, D apart): it reads and
 * accumulates into no other element, on every split, with both kernels. Its
 * backward pass touches only the rows of the ids it saw, but those depend on the
 * data; the slice is what the part owns and synchronizes. The parameter tensor
 * is torch.nn.Embedding's weight (V, D), N(0, 1).
 *
 * FLOPs: the forward pass is a gather: no arithmetic, only bytes (the ids, the
 * gathered rows, the output). The backward pass scatter-adds the output gradient
 * into the table gradient: D adds per token.
 *
 * Kernels (buffers in soapflow/kernels.h; weights: the table (V, D)): like every
 * tensor here, the ids are 4-byte floats; each holds an integer id exactly
 * (floats are exact up to 2^24, so vocabularies up to 16,777,216). The tile is
 * R tokens (the id region, flattened) x columns [d0, d1) of D x rows [v0, v1):
 *   forward   y[r][j] = W[id_r][d0 + j] when v0 <= id_r < v1, else 0
 *   backward  dW[id_r][d0 + j] += dy[r][j] when v0 <= id_r < v1 (a scatter-add:
 *             repeated ids add up)
 * Ids are not differentiable: grad_in is never written. An id that is not an
 * integer in [0, V) gives SF_ERR_INVALID before anything is written (PyTorch
 * raises an index error too). The reference loops element by element; the fast
 * kernels check every id once, then copy (memcpy) or add (a contiguous,
 * vectorizable loop) one row slice per token.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
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
    return sf_count_mul(p->embedding.num_embeddings, p->embedding.embedding_dim);
}

/* The output's dimensions, then the vocabulary (the reduction). */
static void embedding_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_PARAMETER;
    if (n == SF_MAX_DIMS) return; /* no room: the reduction stays whole */
    space->d[n] = op->params.embedding.num_embeddings;
    kinds[n] = SF_DIM_REDUCE;
    space->ndim = n + 1;
}

/* The tile's rows of the table: its range on the reduction dimension, or all
 * of them for a tile of the output's rank. */
static void embedding_vrange(const sf_op *op, const sf_tile *t, int64_t *v0, int64_t *v1) {
    int n = op->out_shapes[0].ndim;
    *v0 = t->ndim > n ? t->lo[n] : 0;
    *v1 = t->ndim > n ? t->hi[n] : op->params.embedding.num_embeddings;
}

static void embedding_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)input;
    *r = *t;
    r->ndim = op->in_shapes[0].ndim; /* the ids of the tile's tokens, every D slice needs them */
    for (int d = r->ndim; d < SF_MAX_DIMS; d++) r->lo[d] = r->hi[d] = 0;
}

static void embedding_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    sf_tile r;
    embedding_region(op, t, 0, &r);
    double ids_b = (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    sf_tile o = *t;
    o.ndim = op->out_shapes[0].ndim; /* the output piece */
    double outs = (double)sf_tile_numel(&o); /* tokens x D slice */
    cost->flops_fwd = 0;
    cost->flops_bwd = outs;
    /* forward: read ids, read the gathered rows, write the output */
    cost->bytes_fwd = ids_b + 2 * outs * SF_ELEM_BYTES;
    /* backward: read ids and the output gradient, read-modify-write gradient rows */
    cost->bytes_bwd = ids_b + 3 * outs * SF_ELEM_BYTES;
}

/* Columns [d0, d1) of rows [v0, v1) of the table: v1 - v0 rows of d1 - d0, D
 * apart. A backward pass adds only into the rows of the ids it saw, but which
 * those are depends on the data; the slice is what the part owns and
 * synchronizes. */
static int embedding_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    const sf_embedding_params *e = &op->params.embedding;
    int last = op->out_shapes[0].ndim - 1;
    int64_t v0, v1;
    embedding_vrange(op, t, &v0, &v1);
    out[0] = (sf_weight_slice){.offset = v0 * e->embedding_dim + t->lo[last],
                               .len = t->hi[last] - t->lo[last],
                               .stride = e->embedding_dim,
                               .count = v1 - v0};
    return 1;
}

/* torch.nn.Embedding: weight (V, D), N(0, 1). */
static int embedding_param_descs(const sf_op *op, sf_param_desc *out) {
    const sf_embedding_params *e = &op->params.embedding;
    out[0] = sf_param_make("weight", 2, (int64_t[]){e->num_embeddings, e->embedding_dim}, 0,
                           SF_INIT_NORMAL, 1.0);
    return 1;
}

/* ---- kernels ----------------------------------------------------------- */

/* The id of token value v, or -1 when it is not an integer in [0, V). */
static int64_t emb_id(float v, int64_t vocab) {
    if (!(v >= 0.0f && v < (float)vocab)) return -1;
    int64_t id = (int64_t)v;
    return (float)id == v && id < vocab ? id : -1;
}

/* Tokens R, table width D, tile columns [d0, d0 + dt); SF_ERR_INVALID when an
 * id is bad. */
static sf_status emb_geom(const sf_kernel_args *a, int64_t *rows, int64_t *d, int64_t *d0,
                          int64_t *dt) {
    const sf_tile *t = &a->tile;
    int last = a->op->out_shapes[0].ndim - 1;
    *d = a->op->params.embedding.embedding_dim;
    *d0 = t->lo[last];
    *dt = t->hi[last] - t->lo[last];
    *rows = sf_tile_numel(&a->in_region[0]);
    for (int64_t r = 0; r < *rows; r++)
        if (emb_id(a->in[0][r], a->op->params.embedding.num_embeddings) < 0) return SF_ERR_INVALID;
    return SF_OK;
}

static sf_status embedding_fwd_ref(const sf_kernel_args *a) {
    int64_t rows, d, d0, dt, v0, v1;
    if (emb_geom(a, &rows, &d, &d0, &dt) != SF_OK) return SF_ERR_INVALID;
    embedding_vrange(a->op, &a->tile, &v0, &v1);
    int64_t vocab = a->op->params.embedding.num_embeddings;
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = emb_id(a->in[0][r], vocab);
        for (int64_t j = 0; j < dt; j++)
            a->out[0][r * dt + j] = id >= v0 && id < v1 ? a->weights[id * d + d0 + j] : 0.0f;
    }
    return SF_OK;
}

static sf_status embedding_bwd_ref(const sf_kernel_args *a) {
    int64_t rows, d, d0, dt, v0, v1;
    if (emb_geom(a, &rows, &d, &d0, &dt) != SF_OK) return SF_ERR_INVALID;
    if (!a->grad_weights) return SF_OK;
    embedding_vrange(a->op, &a->tile, &v0, &v1);
    int64_t vocab = a->op->params.embedding.num_embeddings;
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = emb_id(a->in[0][r], vocab);
        if (id < v0 || id >= v1) continue;
        for (int64_t j = 0; j < dt; j++)
            a->grad_weights[id * d + d0 + j] += a->grad_out[0][r * dt + j];
    }
    return SF_OK;
}

static sf_status embedding_fwd_fast(const sf_kernel_args *a) {
    int64_t rows, d, d0, dt, v0, v1;
    if (emb_geom(a, &rows, &d, &d0, &dt) != SF_OK) return SF_ERR_INVALID;
    embedding_vrange(a->op, &a->tile, &v0, &v1);
    const float *ids = a->in[0];
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = (int64_t)ids[r]; /* checked by emb_geom */
        if (id >= v0 && id < v1)
            memcpy(a->out[0] + r * dt, a->weights + id * d + d0, (size_t)dt * sizeof(float));
        else
            memset(a->out[0] + r * dt, 0, (size_t)dt * sizeof(float));
    }
    return SF_OK;
}

static sf_status embedding_bwd_fast(const sf_kernel_args *a) {
    int64_t rows, d, d0, dt, v0, v1;
    if (emb_geom(a, &rows, &d, &d0, &dt) != SF_OK) return SF_ERR_INVALID;
    if (!a->grad_weights) return SF_OK;
    embedding_vrange(a->op, &a->tile, &v0, &v1);
    const float *ids = a->in[0];
    for (int64_t r = 0; r < rows; r++) {
        if ((int64_t)ids[r] < v0 || (int64_t)ids[r] >= v1) continue;
        const float *restrict src = a->grad_out[0] + r * dt;
        float *restrict dst = a->grad_weights + (int64_t)ids[r] * d + d0;
        for (int64_t j = 0; j < dt; j++) dst[j] += src[j];
    }
    return SF_OK;
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
    .weight_slices = embedding_weight_slices,
    .param_descs = embedding_param_descs,
    .fwd_ref = embedding_fwd_ref,
    .fwd_fast = embedding_fwd_fast,
    .bwd_ref = embedding_bwd_ref,
    .bwd_fast = embedding_bwd_fast,
};
