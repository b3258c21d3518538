/*
 * op_attention.c - multi-head attention with its four projections, batch first.
 *
 * Inputs: query (N, Tq, D) and optionally memory (N, Tk, D); with one input it is
 * self-attention (keys and values come from the query, Tk = Tq). Output (N, Tq, D).
 * Weights as torch.nn.MultiheadAttention holds them: Q, K, V and output
 * projections, each D x D, and a bias of D for each when `bias` is set, so
 * 4*D*D + 4*D parameters. `causal` masks keys after the query position.
 *
 * Parallel space: the output (N, Tq, D). N is the sample dimension; Tq an
 * attribute (a block of query rows needs every key and value, so the K and V
 * projections are recomputed by each Tq part, which the cost below counts); D is
 * a parameter dimension standing for the heads: a part holding a share f of D
 * holds f of the Q, K, V projection rows (f of the heads) and f of the output
 * projection's rows, and computes f of the heads and f of the output columns.
 * Strictly, each output column needs the context of *every* head, so a head split
 * implies a gather of head outputs before the output projection (Megatron-style
 * would instead reduce partial outputs). That exchange is folded into this
 * approximation: it is neither a region of an input nor a separate transfer.
 * D tiles are not forced onto head boundaries; shares are fractional.
 *
 * Regions: the query rows of the tile (all D: every projection reads all input
 * features); the memory: all Tk rows. For self-attention the one input is both,
 * so a tile needs all T rows of it, or rows [0, hi) with a causal mask, since
 * query row i only attends to keys 0..i.
 *
 * FLOPs forward (full tensor; a tile scales each term by its shares):
 *   Q projection 2*N*Tq*D*D, K and V projections 2*2*N*Tk*D*D (not scaled by the
 *   Tq share: recomputed per part), scores 2*N*Tq*Tk*D, context 2*N*Tq*Tk*D,
 *   output projection 2*N*Tq*D*D, softmax ~5 per score (N*heads*Tq*Tk), and one
 *   add per projected element for the biases. With a causal mask in self-attention
 *   a tile of rows [lo, hi) projects and scores only keys [0, hi) (Tk = hi for it);
 *   inside that block the mask is applied to a full score matrix, as kernels do.
 *   Backward: twice the forward.
 */
#include <stddef.h>

#include "op_impl.h"

#define ATTN_SOFTMAX_FLOPS 5.0 /* max, subtract, exp, sum, divide per score */

static const sf_attr_desc attention_attrs[] = {
    {.name = "embed_dim", .type = SF_ATTR_INT,
     .offset = offsetof(sf_op_params, attention.embed_dim)},
    {.name = "heads", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, attention.heads)},
    {.name = "causal", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, attention.causal)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, attention.bias)},
};

static void attention_defaults(sf_op_params *p) {
    p->attention.heads = 1;
    p->attention.causal = 0;
    p->attention.bias = 1;
}

static sf_status attention_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                 sf_shape *out, int *n_out, sf_error *err) {
    const sf_attention_params *a = &p->attention;
    if (a->embed_dim < 1)
        return sf_error_set(err, SF_ERR_INVALID, "embed_dim must be >= 1, got %lld",
                            (long long)a->embed_dim);
    if (a->heads < 1)
        return sf_error_set(err, SF_ERR_INVALID, "heads must be >= 1, got %lld",
                            (long long)a->heads);
    if (a->embed_dim % a->heads)
        return sf_error_set(err, SF_ERR_INVALID, "heads (%lld) must divide embed_dim (%lld)",
                            (long long)a->heads, (long long)a->embed_dim);
    if (in[0].ndim != 3)
        return sf_error_set(err, SF_ERR_SHAPE, "query must be 3-D (N, Tq, D), got %d-D",
                            in[0].ndim);
    if (in[0].d[2] != a->embed_dim)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "query's last dimension (%lld) must equal embed_dim (%lld)",
                            (long long)in[0].d[2], (long long)a->embed_dim);
    if (n_in == 2) {
        if (in[1].ndim != 3)
            return sf_error_set(err, SF_ERR_SHAPE, "memory must be 3-D (N, Tk, D), got %d-D",
                                in[1].ndim);
        if (in[1].d[0] != in[0].d[0])
            return sf_error_set(err, SF_ERR_SHAPE,
                                "memory batch (%lld) differs from query batch (%lld)",
                                (long long)in[1].d[0], (long long)in[0].d[0]);
        if (in[1].d[2] != a->embed_dim)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "memory's last dimension (%lld) must equal embed_dim (%lld)",
                                (long long)in[1].d[2], (long long)a->embed_dim);
    }
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static int64_t attention_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)in;
    (void)n_in;
    int64_t d = p->attention.embed_dim;
    return 4 * d * d + (p->attention.bias ? 4 * d : 0);
}

static void attention_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_ATTRIBUTE;
    kinds[2] = SF_DIM_PARAMETER;
}

static void attention_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    *r = sf_tile_full(&op->in_shapes[input]);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    if (input == 0 && op->n_inputs == 2) { /* cross attention: the query rows of the tile */
        r->lo[1] = t->lo[1];
        r->hi[1] = t->hi[1];
    } else if (input == 0 && op->params.attention.causal) { /* keys 0..row for each row */
        r->hi[1] = t->hi[1] > t->lo[1] ? t->hi[1] : 0;
    }
}

/* Elements of the intermediate tensors a tile computes: Q, K, V, scores, context. */
typedef struct attn_sizes {
    double q, kv, scores, ctx;
} attn_sizes;

static attn_sizes attention_sizes(const sf_op *op, const sf_tile *t, double *tk_out) {
    const sf_attention_params *a = &op->params.attention;
    double n = (double)(t->hi[0] - t->lo[0]), tq = (double)(t->hi[1] - t->lo[1]);
    double d = (double)(t->hi[2] - t->lo[2]);
    double tk = (double)op->in_shapes[op->n_inputs - 1].d[1];
    if (op->n_inputs == 1 && a->causal) tk = (double)t->hi[1]; /* keys 0..hi-1 only */
    double heads = (double)a->heads * d / (double)a->embed_dim; /* the tile's share */
    attn_sizes s = {n * tq * d, 2 * n * tk * d, n * heads * tq * tk, n * tq * d};
    *tk_out = tk;
    return s;
}

static void attention_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    const sf_attention_params *a = &op->params.attention;
    double full_d = (double)a->embed_dim, tk;
    attn_sizes s = attention_sizes(op, t, &tk);
    double proj = 2 * s.q * full_d + 2 * s.kv * full_d; /* Q, K, V: each output reads all D */
    double attn = 2 * s.ctx * tk + 2 * s.ctx * tk;      /* scores (per Tk) and context */
    double outp = 2 * s.ctx * full_d;                   /* output columns d, inputs all D */
    double soft = ATTN_SOFTMAX_FLOPS * s.scores;
    double bias = a->bias ? s.q + s.kv + s.ctx : 0;
    cost->flops_fwd = proj + attn + outp + soft + bias;
    cost->flops_bwd = 2 * cost->flops_fwd;
    double in_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        attention_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    double mid_b = (s.q + s.kv + s.scores + s.ctx) * SF_ELEM_BYTES; /* written, read back */
    cost->bytes_fwd = in_b + w_b + out_b + 2 * mid_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + 2 * mid_b;
}

static void attention_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    m->output_bytes = (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    if (sf_tile_empty(t)) return;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        attention_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double tk;
    attn_sizes s = attention_sizes(op, t, &tk);
    /* Q, K, V, the softmax probabilities and the context are kept for backward */
    m->saved_bytes += (s.q + s.kv + s.scores + s.ctx) * SF_ELEM_BYTES;
}

const sf_op_class sf_op_attention_class = {
    .type = SF_OP_ATTENTION,
    .name = "attention",
    .min_inputs = 1,
    .max_inputs = 2,
    .attrs = attention_attrs,
    .n_attrs = (int)(sizeof attention_attrs / sizeof attention_attrs[0]),
    .defaults = attention_defaults,
    .infer = attention_infer,
    .param_count = attention_params,
    .space = attention_space,
    .region = attention_region,
    .cost = attention_cost,
    .memory = attention_memory,
};
