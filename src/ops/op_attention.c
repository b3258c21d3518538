/*
 * op_attention.c - multi-head attention with its four projections, batch first.
 *
 * Inputs: query (N, Tq, D) and optionally memory (N, Tk, D); with one input it is
 * self-attention (keys and values come from the query, Tk = Tq). Output (N, Tq, D).
 * Weights as torch.nn.MultiheadAttention holds them: Q, K, V and output
 * projections, each D x D, and a bias of D for each when `bias` is set, so
 * 4*D*D + 4*D parameters. `causal` masks keys after the query position.
 * `dropout` (default 0, none) zeroes each attention probability with that
 * probability in training and scales the rest by 1 / (1 - dropout), as
 * torch.nn.MultiheadAttention's dropout and GPT-2's attn_pdrop do: the context
 * is dropout(P) V. The mask is the dropout operator's (op_dropout.c, a hash of
 * the kernel's seed, the operator id and the element's global index), drawn
 * over the whole (N, heads, Tq, Tk) probabilities, so that any tiling (heads,
 * samples, rows) draws the same one: P ranks train as one. Backward draws it
 * again; in inference mode it is off.
 *
 * Parallel space: the output (N, Tq, D), then the heads H (N, Tq, D, H). N is
 * the sample dimension; Tq an attribute (a block of query rows needs every key
 * and value, so the K and V projections are recomputed by each Tq part, which
 * the cost below counts); D cannot be split (SF_DIM_NONE): each output column
 * reads the context of every head, so a D part would recompute the whole
 * attention and read all of W_q, W_k, W_v. The heads are a reduction
 * (SF_DIM_REDUCE), Megatron's tensor-parallel attention: a part with heads
 * [h0, h1) projects only its heads' Q, K, V (rows [c0, c1) of W_q, W_k, W_v and
 * of their biases, c = h * D / heads), attends, and multiplies its heads'
 * context by columns [c0, c1) of W_o, so its output is a partial sum over heads
 * of the whole (N, Tq, D) piece, which the task graph reduces
 * (src/taskgraph/reduce.c); b_o belongs to the part with h0 = 0, so the sum adds
 * it once. The heads dimension counts heads, so a part always holds whole heads
 * (an uneven degree gives parts of different head counts).
 *
 * A tile reads and accumulates into exactly its heads' weights
 * (sf_op_weight_slices: one strided slice of the three row blocks of W_q, W_k,
 * W_v, one of W_o's columns, one of the three bias blocks, and b_o on the first
 * head part; all heads merge into the whole layout). The parameter tensors are
 * torch.nn.MultiheadAttention's,
 * in this layout's order: in_proj_weight (3D, D) by xavier_uniform, out_proj.weight
 * (D, D) as a Linear's, and, with bias, in_proj_bias (3D) and out_proj.bias (D),
 * both zero.
 *
 * Regions: the query rows of the tile (all D: every projection reads all input
 * features); the memory: all Tk rows. For self-attention the one input is both,
 * so a tile needs all T rows of it, or rows [0, hi) with a causal mask, since
 * query row i only attends to keys 0..i.
 *
 * FLOPs forward (full tensor; a tile scales each term by its shares, the heads'
 * share hc / D included):
 *   Q projection 2*N*Tq*hc*D, K and V projections 2*2*N*Tk*hc*D (not scaled by
 *   the Tq share: recomputed per part), scores 2*N*Tq*Tk*hc, context
 *   2*N*Tq*Tk*hc, output projection 2*N*Tq*D*hc, softmax ~5 per score
 *   (N*nh*Tq*Tk), and one add per projected element for the biases (b_o's on the
 *   first head part). With a causal mask in self-attention
 *   a tile of rows [lo, hi) projects and scores only keys [0, hi) (Tk = hi for it);
 *   inside that block the mask is applied to a full score matrix, as kernels do.
 *   Backward: twice the forward. With every head these are the figures of the
 *   operator before head splits, so unsplit plans price as before. Dropout
 *   adds 2 per score forward and 1 backward (the dropout operator's figures),
 *   4 bytes a score of mask written and read back, and the mask kept for
 *   backward in the memory; without it nothing changes.
 *
 * Kernels (buffers in soapflow/kernels.h). Weights, torch.nn.MultiheadAttention's
 * layout: in_proj_weight (3D, D) = [W_q; W_k; W_v], then out_proj.weight W_o
 * (D, D), then (with bias) in_proj_bias (3D) = [b_q; b_k; b_v], then
 * out_proj.bias b_o (D). Head h uses columns [h*dh, (h+1)*dh) of Q, K, V, dh =
 * D/heads; scores are Q_h K_h^T / sqrt(dh); causal masks key j > query i (global
 * positions, for cross-attention too, as torch's triu mask does).
 *
 * A tile is samples [n0, n1) x query rows [q0, q1) x output columns [d0, d1) x
 * heads [h0, h1). N and Tq splits are exact: the tile's query rows attend to
 * every key its region holds (self-attention: region rows [0, T), or [0, q1)
 * when causal, where the query rows sit at offset q0; cross: the query region is
 * the tile's rows, the memory all Tk). A head part computes its heads only and
 * writes y = ctx_h W_o[d0:d1, c0:c1]^T (+ b_o[d0:d1] when h0 = 0), its partial
 * sum; backward, dctx_h = dy W_o[d0:d1, c0:c1] flows into its heads' rows of
 * W_q, W_k, W_v, their biases and (summed over the head parts by whoever
 * reduces the input gradients) the inputs. The kernels also take a tile with a
 * part of D, which the space never offers: it computes the context of all its
 * heads, then only its output columns, and accumulates into rows [d0, d1) of
 * W_o and b_o and all its heads' rows of W_q, W_k, W_v (its weight slices
 * name all of W_o's rows, a superset).
 *
 * Both kernels work one sample at a time in the workspace (floats), hc =
 * (h1 - h0) * D / heads the tile's head columns:
 *   Q (tq, hc), K (tk, hc), V (tk, hc), P (h1 - h0, tq, tk) the probabilities,
 *   ctx (tq, hc); backward adds dctx (tq, hc), dP (tq, tk) (one head at a time),
 *   dQ (tq, hc), dK (tk, hc), dV (tk, hc); with dropout, the dropped
 *   probabilities (h1 - h0, tq, tk) after P, and backward one row of factors (tk).
 * Backward recomputes the forward of the sample first. The fast kernel does every
 * product with SGEMM; the reference one with loops. The softmax (and its
 * adjoint) is shared: it holds no product.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "op_impl.h"

#define ATTN_SOFTMAX_FLOPS 5.0     /* max, subtract, exp, sum, divide per score */
#define ATTN_DROPOUT_FLOPS_FWD 2.0 /* compare a draw with p, multiply: per score */
#define ATTN_DROPOUT_FLOPS_BWD 1.0 /* multiply by the mask: per score */

static const sf_attr_desc attention_attrs[] = {
    {.name = "embed_dim",
     .type = SF_ATTR_INT,
     .offset = offsetof(sf_op_params, attention.embed_dim)},
    {.name = "heads", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, attention.heads)},
    {.name = "causal", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, attention.causal)},
    {.name = "bias", .type = SF_ATTR_BOOL, .offset = offsetof(sf_op_params, attention.bias)},
    {.name = "dropout", .type = SF_ATTR_FLOAT, .offset = offsetof(sf_op_params, attention.dropout)},
};

static void attention_defaults(sf_op_params *p) {
    p->attention.heads = 1;
    p->attention.causal = 0;
    p->attention.bias = 1;
    p->attention.dropout = 0.0;
}

static sf_status attention_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                                 int *n_out, sf_error *err) {
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
    if (!(a->dropout >= 0 && a->dropout < 1))
        return sf_error_set(err, SF_ERR_INVALID, "dropout must be in [0, 1), got %g", a->dropout);
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
    int64_t d = p->attention.embed_dim, d4 = sf_count_mul(4, d);
    return sf_count_add(sf_count_mul(d4, d), p->attention.bias ? d4 : 0);
}

/* The output (N, Tq, D), then the heads (a reduction: no output dimension
 * names them, the output projection sums over them). */
static void attention_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_ATTRIBUTE;
    kinds[2] = SF_DIM_NONE; /* a D part needs every head's context: see the header */
    space->d[3] = op->params.attention.heads;
    kinds[3] = SF_DIM_REDUCE;
    space->ndim = 4;
}

/* The tile's heads [h0, h1): its range on the reduction dimension, or all of
 * them for a tile of the output's rank (one that names no reduction). */
static void attention_hrange(const sf_op *op, const sf_tile *t, int64_t *h0, int64_t *h1) {
    *h0 = t->ndim > 3 ? t->lo[3] : 0;
    *h1 = t->ndim > 3 ? t->hi[3] : op->params.attention.heads;
}

/* The output piece of a tile: its first three dimensions. */
static double attention_out_numel(const sf_tile *t) {
    sf_tile o = *t;
    o.ndim = 3;
    return (double)sf_tile_numel(&o);
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

/* Elements of the intermediate tensors a tile computes: Q, K, V (its heads'
 * columns), scores (its heads), context (its heads' columns), and its output
 * piece. */
typedef struct attn_sizes {
    double q, kv, scores, ctx, out, hc;
} attn_sizes;

static attn_sizes attention_sizes(const sf_op *op, const sf_tile *t, double *tk_out) {
    const sf_attention_params *a = &op->params.attention;
    double n = (double)(t->hi[0] - t->lo[0]), tq = (double)(t->hi[1] - t->lo[1]);
    double dt = (double)(t->hi[2] - t->lo[2]);
    double tk = (double)op->in_shapes[op->n_inputs - 1].d[1];
    if (op->n_inputs == 1 && a->causal) tk = (double)t->hi[1]; /* keys 0..hi-1 only */
    int64_t h0, h1;
    attention_hrange(op, t, &h0, &h1);
    double nh = h1 > h0 ? (double)(h1 - h0) : 0;
    double hc = nh * (double)(a->embed_dim / a->heads); /* the tile's head columns */
    attn_sizes s = {n * tq * hc, 2 * n * tk * hc, n * nh * tq * tk, n * tq * hc, n * tq * dt, hc};
    *tk_out = tk;
    return s;
}

/* Weight elements of a tile: the rows of W_q, W_k, W_v and the columns of W_o
 * of its heads, their biases, and b_o on the part with the first head. */
static int64_t attention_tile_weights(const sf_op *op, const sf_tile *t) {
    const sf_attention_params *a = &op->params.attention;
    int64_t h0, h1;
    attention_hrange(op, t, &h0, &h1);
    if (h1 <= h0) return 0;
    int64_t d = a->embed_dim, hc = (h1 - h0) * (d / a->heads);
    return 4 * d * hc + (a->bias ? 3 * hc + (h0 == 0 ? d : 0) : 0);
}

static void attention_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    const sf_attention_params *a = &op->params.attention;
    double full_d = (double)a->embed_dim, tk;
    attn_sizes s = attention_sizes(op, t, &tk);
    int64_t h0, h1;
    attention_hrange(op, t, &h0, &h1);
    double proj = 2 * s.q * full_d + 2 * s.kv * full_d; /* Q, K, V: each output reads all D */
    double attn = 2 * s.ctx * tk + 2 * s.ctx * tk;      /* scores (per Tk) and context */
    double outp = 2 * s.out * s.hc;                     /* output columns, the heads' inputs */
    double soft = ATTN_SOFTMAX_FLOPS * s.scores;
    double bias = a->bias ? s.q + s.kv + (h0 == 0 ? s.out : 0) : 0;
    cost->flops_fwd = proj + attn + outp + soft + bias;
    cost->flops_bwd = 2 * cost->flops_fwd;
    if (a->dropout > 0) { /* the mask on the probabilities, as the dropout operator's */
        cost->flops_fwd += ATTN_DROPOUT_FLOPS_FWD * s.scores;
        cost->flops_bwd += ATTN_DROPOUT_FLOPS_BWD * s.scores;
    }
    double in_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        attention_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double w_b = (double)attention_tile_weights(op, t) * SF_ELEM_BYTES;
    double out_b = s.out * SF_ELEM_BYTES;
    double mid_b = (s.q + s.kv + s.scores + s.ctx) * SF_ELEM_BYTES; /* written, read back */
    double mask_b = a->dropout > 0 ? s.scores * SF_ELEM_BYTES : 0;  /* written, read back */
    cost->bytes_fwd = in_b + w_b + out_b + 2 * mid_b + mask_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + 2 * mid_b + mask_b;
}

/* A tile's heads [h0, h1) in the full layout (below): rows [c0, c1) of W_q, W_k
 * and W_v (c = h * D / heads; one strided slice of three runs), columns [c0, c1)
 * of W_o's D rows, the same entries of b_q, b_k, b_v, and b_o on the first head
 * part. With every head these merge into the whole layout. */
static int attention_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    const sf_attention_params *a = &op->params.attention;
    int64_t h0, h1;
    attention_hrange(op, t, &h0, &h1);
    int64_t d = a->embed_dim, dd = d * d, hd = d / a->heads;
    int64_t c0 = h0 * hd, hc = (h1 - h0) * hd;
    out[0] = (sf_weight_slice){c0 * d, hc * d, dd, 3};
    out[1] = (sf_weight_slice){3 * dd + c0, hc, d, d};
    if (!a->bias) return 2;
    out[2] = (sf_weight_slice){4 * dd + c0, hc, d, 3};
    if (h0 != 0) return 3;
    out[3] = sf_weight_run(4 * dd + 3 * d, d);
    return 4;
}

/* torch.nn.MultiheadAttention(D, heads, bias): in_proj_weight (3D, D) by
 * xavier_uniform (bound sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 4D)), out_proj
 * as a Linear(D, D) (U(+-1/sqrt(D))), both biases zero; in this file's layout
 * order (both weights, then both biases), not PyTorch's registration order. */
static int attention_param_descs(const sf_op *op, sf_param_desc *out) {
    int64_t d = op->params.attention.embed_dim;
    out[0] = sf_param_make("in_proj_weight", 2, (int64_t[]){3 * d, d}, 0, SF_INIT_UNIFORM,
                           sqrt(6.0 / (double)(4 * d)));
    out[1] = sf_param_make("out_proj.weight", 2, (int64_t[]){d, d}, 3 * d * d, SF_INIT_UNIFORM,
                           1.0 / sqrt((double)d));
    if (!op->params.attention.bias) return 2;
    out[2] = sf_param_make("in_proj_bias", 1, (int64_t[]){3 * d}, 4 * d * d, SF_INIT_CONST, 0.0);
    out[3] =
        sf_param_make("out_proj.bias", 1, (int64_t[]){d}, 4 * d * d + 3 * d, SF_INIT_CONST, 0.0);
    return 4;
}

static void attention_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)attention_tile_weights(op, t) * SF_ELEM_BYTES;
    m->output_bytes = attention_out_numel(t) * SF_ELEM_BYTES;
    if (sf_tile_empty(t)) return;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        attention_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double tk;
    attn_sizes s = attention_sizes(op, t, &tk);
    /* Q, K, V, the softmax probabilities and the context are kept for backward,
     * and with dropout its mask of the probabilities (4 bytes a score, as the
     * dropout operator's cost counts it) */
    m->saved_bytes += (s.q + s.kv + s.scores + s.ctx) * SF_ELEM_BYTES;
    if (op->params.attention.dropout > 0) m->saved_bytes += s.scores * SF_ELEM_BYTES;
}

/* ---- kernels ----------------------------------------------------------- */

typedef struct attn_geom {
    int64_t n, tq, tk, dt;          /* tile samples, query rows, keys, output columns */
    int64_t q0, d0;                 /* first query row (global) and output column */
    int64_t q_off;                  /* the tile's first query row inside the query region */
    int64_t rq, rk;                 /* rows of one sample in the query and key regions */
    int64_t d, hd;                  /* D, D / heads */
    int64_t h0, nh;                 /* the tile's first head and its number of heads */
    int64_t c0, hc;                 /* its heads' first column of Q, K, V and their width nh * hd */
    int self, causal, bias, bias_o; /* bias_o: this part adds b_o (its heads start at 0) */
    int drop_ws;                    /* the workspace holds the dropped probabilities */
    int drop;                       /* dropout applies in this call (ratio > 0, training) */
    uint64_t drop_key, drop_thr;    /* the mask (kernels_impl.h) */
    float drop_scale;               /* 1 / (1 - ratio) */
    int64_t n0, heads, tq_all, tk_all; /* global sample, heads, query rows, keys: mask indices */
} attn_geom;

static void attn_geom_init(const sf_op *op, const sf_tile *t, attn_geom *g) {
    const sf_attention_params *p = &op->params.attention;
    sf_tile rq, rk;
    attention_region(op, t, 0, &rq);
    attention_region(op, t, op->n_inputs - 1, &rk);
    g->self = op->n_inputs == 1;
    g->causal = p->causal != 0;
    g->bias = p->bias != 0;
    g->n = t->hi[0] - t->lo[0];
    g->q0 = t->lo[1];
    g->tq = t->hi[1] - t->lo[1];
    g->d0 = t->lo[2];
    g->dt = t->hi[2] - t->lo[2];
    g->rq = rq.hi[1] - rq.lo[1];
    g->rk = rk.hi[1] - rk.lo[1];
    g->tk = g->rk;
    g->q_off = g->q0 - rq.lo[1];
    g->d = p->embed_dim;
    g->hd = g->d / p->heads;
    int64_t h1;
    attention_hrange(op, t, &g->h0, &h1);
    g->nh = h1 > g->h0 ? h1 - g->h0 : 0;
    g->c0 = g->h0 * g->hd;
    g->hc = g->nh * g->hd;
    g->bias_o = g->bias && g->h0 == 0;
    g->drop_ws = p->dropout > 0;
    g->drop = 0;
    g->drop_key = 0;
    g->drop_thr = sf_drop_threshold(p->dropout);
    g->drop_scale = (float)(1.0 / (1.0 - p->dropout));
    g->n0 = t->lo[0];
    g->heads = p->heads;
    g->tq_all = op->out_shapes[0].d[1];
    g->tk_all = op->in_shapes[op->n_inputs - 1].d[1];
}

/* The geometry of a kernel call: with the dropout of its arguments (none in
 * inference mode). */
static void attn_geom_call(const sf_kernel_args *a, attn_geom *g) {
    attn_geom_init(a->op, &a->tile, g);
    g->drop = g->drop_ws && !a->eval;
    g->drop_key = sf_drop_key(a->seed, a->op->id);
}

typedef struct attn_ws {
    float *q, *k, *v, *p, *ctx;      /* forward */
    float *pd;                       /* the dropped probabilities (NULL without dropout) */
    float *dctx, *dp, *dq, *dk, *dv; /* backward */
    float *f;                        /* backward with dropout: one row of factors (tk) */
} attn_ws;

static int64_t attn_ws_floats(const attn_geom *g, int backward) {
    int64_t f = 2 * g->tq * g->hc + 2 * g->tk * g->hc + g->nh * g->tq * g->tk;
    if (g->drop_ws) f += g->nh * g->tq * g->tk;
    if (backward) f += 2 * g->tq * g->hc + g->tq * g->tk + 2 * g->tk * g->hc;
    if (backward && g->drop_ws) f += g->tk;
    return f;
}

static size_t attention_workspace(const sf_op *op, const sf_tile *t, int backward) {
    attn_geom g;
    attn_geom_init(op, t, &g);
    return (size_t)attn_ws_floats(&g, backward) * sizeof(float);
}

static attn_ws attn_ws_carve(const attn_geom *g, void *workspace, int backward) {
    float *p = workspace;
    attn_ws w = {0};
    w.q = p;
    p += g->tq * g->hc;
    w.k = p;
    p += g->tk * g->hc;
    w.v = p;
    p += g->tk * g->hc;
    w.p = p;
    p += g->nh * g->tq * g->tk;
    w.ctx = p;
    p += g->tq * g->hc;
    if (g->drop_ws) {
        w.pd = p;
        p += g->nh * g->tq * g->tk;
    }
    if (backward) {
        w.dctx = p;
        p += g->tq * g->hc;
        w.dp = p;
        p += g->tq * g->tk;
        w.dq = p;
        p += g->tq * g->hc;
        w.dk = p;
        p += g->tk * g->hc;
        w.dv = p;
        p += g->tk * g->hc;
        if (g->drop_ws) w.f = p;
    }
    return w;
}

/* The tile's weight blocks (see the layout above): W_q, W_k, W_v and their
 * biases start at the rows of its heads, W_o at its first output row and its
 * heads' first column (row stride D); b_o at its first output column, NULL
 * unless this part adds it; biases NULL without bias. */
typedef struct attn_weights {
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} attn_weights;

static attn_weights attn_weights_of(const attn_geom *g, const float *w) {
    const int64_t dd = g->d * g->d, r = g->c0 * g->d;
    attn_weights x = {w + r, w + dd + r, w + 2 * dd + r, w + 3 * dd + g->d0 * g->d + g->c0,
                      NULL,  NULL,       NULL,           NULL};
    if (g->bias) {
        x.bq = w + 4 * dd + g->c0;
        x.bk = x.bq + g->d;
        x.bv = x.bk + g->d;
    }
    if (g->bias_o) x.bo = w + 4 * dd + 3 * g->d + g->d0;
    return x;
}

/* The same offsets into the weight gradients (NULL when dw is NULL). */
typedef struct attn_grads {
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} attn_grads;

static attn_grads attn_grads_of(const attn_geom *g, float *dw) {
    attn_grads x = {0};
    if (!dw) return x;
    const int64_t dd = g->d * g->d, r = g->c0 * g->d;
    x.wq = dw + r;
    x.wk = dw + dd + r;
    x.wv = dw + 2 * dd + r;
    x.wo = dw + 3 * dd + g->d0 * g->d + g->c0;
    if (g->bias) {
        x.bq = dw + 4 * dd + g->c0;
        x.bk = x.bq + g->d;
        x.bv = x.bk + g->d;
    }
    if (g->bias_o) x.bo = dw + 4 * dd + 3 * g->d + g->d0;
    return x;
}

/* The query rows and key rows of sample n of the tile, inside the input buffers. */
static const float *attn_xq(const sf_kernel_args *a, const attn_geom *g, int64_t n) {
    return a->in[0] + (n * g->rq + g->q_off) * g->d;
}

static const float *attn_xkv(const sf_kernel_args *a, const attn_geom *g, int64_t n) {
    return a->in[g->self ? 0 : 1] + n * g->rk * g->d;
}

/* Is key j masked for the tile's query row i? */
static int attn_masked(const attn_geom *g, int64_t i, int64_t j) {
    return g->causal && j > g->q0 + i;
}

/* Scores in w->p (nh, tq, tk), already scaled, become probabilities: masked
 * entries 0, the rest a softmax over the row. */
static void attn_softmax(const attn_geom *g, const attn_ws *w) {
    for (int64_t h = 0; h < g->nh; h++)
        for (int64_t i = 0; i < g->tq; i++) {
            float *row = w->p + (h * g->tq + i) * g->tk;
            float mx = -INFINITY;
            for (int64_t j = 0; j < g->tk; j++)
                if (!attn_masked(g, i, j) && row[j] > mx) mx = row[j];
            float sum = 0.0f;
            for (int64_t j = 0; j < g->tk; j++) {
                row[j] = attn_masked(g, i, j) ? 0.0f : expf(row[j] - mx);
                sum += row[j];
            }
            /* 0 only for a row masked whole; a NaN sum stays NaN, as in PyTorch */
            float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
            for (int64_t j = 0; j < g->tk; j++) row[j] *= inv;
        }
}

/* dP (tq, tk) of the tile's head h becomes dS, the gradient of the scaled
 * scores: dS = P * (dP - rowsum(P * dP)), times the scale. */
static void attn_softmax_backward(const attn_geom *g, const attn_ws *w, int64_t h, float scale) {
    for (int64_t i = 0; i < g->tq; i++) {
        const float *p = w->p + (h * g->tq + i) * g->tk;
        float *dp = w->dp + i * g->tk;
        float dot = 0.0f;
        for (int64_t j = 0; j < g->tk; j++) dot += p[j] * dp[j];
        for (int64_t j = 0; j < g->tk; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
    }
}

/* The dropout factor (0 or 1 / (1 - ratio)) of row i of the tile's head h, key
 * j, into f[0 .. tk): the mask is drawn over the whole operator's probabilities
 * (N, heads, Tq, Tk) at their global index, so any tiling draws the same one. */
static void attn_drop_row(const attn_geom *g, int64_t n, int64_t h, int64_t i, float *f) {
    uint64_t e0 =
        (uint64_t)((((g->n0 + n) * g->heads + g->h0 + h) * g->tq_all + g->q0 + i) * g->tk_all);
    for (int64_t j = 0; j < g->tk; j++)
        f[j] = sf_drop_keep(g->drop_key, g->drop_thr, e0 + (uint64_t)j) ? g->drop_scale : 0.0f;
}

/* The dropped probabilities of sample n: pd = p * factor (a NaN stays NaN, as
 * PyTorch's p * mask). */
static void attn_dropout(const attn_geom *g, const attn_ws *w, int64_t n) {
    for (int64_t h = 0; h < g->nh; h++)
        for (int64_t i = 0; i < g->tq; i++) {
            const float *p = w->p + (h * g->tq + i) * g->tk;
            float *pd = w->pd + (h * g->tq + i) * g->tk;
            attn_drop_row(g, n, h, i, pd);
            for (int64_t j = 0; j < g->tk; j++) pd[j] *= p[j];
        }
}

/* The adjoint for head h: dP (tq, tk), the gradient of the dropped
 * probabilities, times the factors, becomes that of the probabilities. The
 * factors are drawn again into f (tk floats). */
static void attn_dropout_backward(const attn_geom *g, const attn_ws *w, int64_t n, int64_t h,
                                  float *f) {
    for (int64_t i = 0; i < g->tq; i++) {
        float *dp = w->dp + i * g->tk;
        attn_drop_row(g, n, h, i, f);
        for (int64_t j = 0; j < g->tk; j++) dp[j] *= f[j];
    }
}

/* y (rows, cols) = x (rows, kin) W[0:cols, 0:kin]^T + b[0:cols] (b may be NULL;
 * W's rows ldw apart), by loops. */
static void proj_ref(const float *x, int64_t rows, int64_t kin, const float *w, int64_t ldw,
                     const float *b, int64_t cols, float *y, int64_t ldy) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < cols; o++) {
            float acc = b ? b[o] : 0.0f;
            for (int64_t k = 0; k < kin; k++) acc += x[r * kin + k] * w[o * ldw + k];
            y[r * ldy + o] = acc;
        }
}

/* The same by SGEMM. */
static void proj_fast(const float *x, int64_t rows, int64_t kin, const float *w, int64_t ldw,
                      const float *b, int64_t cols, float *y, int64_t ldy) {
    float beta = 0.0f;
    if (b) {
        for (int64_t r = 0; r < rows; r++) memcpy(y + r * ldy, b, (size_t)cols * sizeof *y);
        beta = 1.0f;
    }
    sf_sgemm(0, 1, rows, cols, kin, 1.0f, x, kin, w, ldw, beta, y, ldy);
}

typedef void (*attn_proj_fn)(const float *, int64_t, int64_t, const float *, int64_t, const float *,
                             int64_t, float *, int64_t);

/* Forward of sample n into the workspace (Q, K, V, P, ctx of the tile's heads,
 * row stride hc), by loops or SGEMM. */
static void attn_sample_forward(const sf_kernel_args *a, const attn_geom *g, const attn_ws *w,
                                int64_t n, int fast) {
    attn_weights W = attn_weights_of(g, a->weights);
    const float *xq = attn_xq(a, g, n), *xkv = attn_xkv(a, g, n);
    const int64_t D = g->d, hd = g->hd, tq = g->tq, tk = g->tk, hc = g->hc;
    const float scale = 1.0f / sqrtf((float)hd);
    attn_proj_fn proj = fast ? proj_fast : proj_ref;
    proj(xq, tq, D, W.wq, D, W.bq, hc, w->q, hc);
    proj(xkv, tk, D, W.wk, D, W.bk, hc, w->k, hc);
    proj(xkv, tk, D, W.wv, D, W.bv, hc, w->v, hc);
    for (int64_t h = 0; h < g->nh; h++) {
        float *s = w->p + h * tq * tk;
        if (fast) {
            sf_sgemm(0, 1, tq, tk, hd, scale, w->q + h * hd, hc, w->k + h * hd, hc, 0.0f, s, tk);
        } else {
            for (int64_t i = 0; i < tq; i++)
                for (int64_t j = 0; j < tk; j++) {
                    float acc = 0.0f;
                    for (int64_t e = 0; e < hd; e++)
                        acc += w->q[i * hc + h * hd + e] * w->k[j * hc + h * hd + e];
                    s[i * tk + j] = acc * scale;
                }
        }
    }
    attn_softmax(g, w);
    if (g->drop) attn_dropout(g, w, n);
    const float *probs = g->drop ? w->pd : w->p; /* what multiplies V */
    for (int64_t h = 0; h < g->nh; h++) {
        const float *p = probs + h * tq * tk;
        if (fast) {
            sf_sgemm(0, 0, tq, hd, tk, 1.0f, p, tk, w->v + h * hd, hc, 0.0f, w->ctx + h * hd, hc);
        } else {
            for (int64_t i = 0; i < tq; i++)
                for (int64_t e = 0; e < hd; e++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < tk; j++)
                        acc += p[i * tk + j] * w->v[j * hc + h * hd + e];
                    w->ctx[i * hc + h * hd + e] = acc;
                }
        }
    }
}

static sf_status attn_forward(const sf_kernel_args *a, int fast) {
    attn_geom g;
    attn_geom_call(a, &g);
    attn_ws w = attn_ws_carve(&g, a->workspace, 0);
    attn_weights W = attn_weights_of(&g, a->weights);
    attn_proj_fn proj = fast ? proj_fast : proj_ref;
    for (int64_t n = 0; n < g.n; n++) {
        attn_sample_forward(a, &g, &w, n, fast);
        /* y (tq, dt) = ctx (tq, hc) W_o[d0:d1, c0:c1]^T (+ b_o[d0:d1] on the first
         * head part): the heads' share of the output, a partial sum */
        float *y = a->out[0] + n * g.tq * g.dt;
        proj(w.ctx, g.tq, g.hc, W.wo, g.d, W.bo, g.dt, y, g.dt);
    }
    return SF_OK;
}

static sf_status attention_fwd_ref(const sf_kernel_args *a) { return attn_forward(a, 0); }
static sf_status attention_fwd_fast(const sf_kernel_args *a) { return attn_forward(a, 1); }

/* The adjoint of proj: dx (rows, kin) += dy W (dx may be NULL), dW += dy^T x and
 * db += column sums of dy (dW, db may be NULL); dy is (rows, cols), row stride
 * ldy; W's and dW's rows are ldw apart. */
static void proj_back_ref(const float *x, int64_t rows, int64_t kin, const float *w, int64_t ldw,
                          const float *dy, int64_t cols, int64_t ldy, float *dx, float *dw,
                          float *db) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < cols; o++) {
            float d = dy[r * ldy + o];
            if (db) db[o] += d;
            for (int64_t k = 0; k < kin; k++) {
                if (dx) dx[r * kin + k] += d * w[o * ldw + k];
                if (dw) dw[o * ldw + k] += d * x[r * kin + k];
            }
        }
}

static void proj_back_fast(const float *x, int64_t rows, int64_t kin, const float *w, int64_t ldw,
                           const float *dy, int64_t cols, int64_t ldy, float *dx, float *dw,
                           float *db) {
    if (dx) sf_sgemm(0, 0, rows, kin, cols, 1.0f, dy, ldy, w, ldw, 1.0f, dx, kin);
    if (dw) sf_sgemm(1, 0, cols, kin, rows, 1.0f, dy, ldy, x, kin, 1.0f, dw, ldw);
    if (db)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t o = 0; o < cols; o++) db[o] += dy[r * ldy + o];
}

static sf_status attn_backward(const sf_kernel_args *a, int fast) {
    attn_geom g;
    attn_geom_call(a, &g);
    attn_ws w = attn_ws_carve(&g, a->workspace, 1);
    attn_weights W = attn_weights_of(&g, a->weights);
    attn_grads G = attn_grads_of(&g, a->grad_weights);
    const int64_t D = g.d, hd = g.hd, tq = g.tq, tk = g.tk, hc = g.hc;
    const float scale = 1.0f / sqrtf((float)hd);
    void (*back)(const float *, int64_t, int64_t, const float *, int64_t, const float *, int64_t,
                 int64_t, float *, float *, float *) = fast ? proj_back_fast : proj_back_ref;
    float *dxq_all = a->grad_in ? a->grad_in[0] : NULL;
    float *dxkv_all = a->grad_in ? a->grad_in[g.self ? 0 : 1] : NULL;
    for (int64_t n = 0; n < g.n; n++) {
        attn_sample_forward(a, &g, &w, n, fast);
        const float *dy = a->grad_out[0] + n * tq * g.dt;
        /* output projection: dctx = dy W_o[d0:d1, c0:c1], dW_o[d0:d1, c0:c1] += dy^T ctx */
        memset(w.dctx, 0, (size_t)(tq * hc) * sizeof(float));
        back(w.ctx, tq, hc, W.wo, D, dy, g.dt, g.dt, w.dctx, G.wo, G.bo);
        for (int64_t h = 0; h < g.nh; h++) {
            const float *p = (g.drop ? w.pd : w.p) + h * tq * tk; /* what multiplied V */
            const float *dctx = w.dctx + h * hd;
            const float *qh = w.q + h * hd, *kh = w.k + h * hd, *vh = w.v + h * hd;
            float *dqh = w.dq + h * hd, *dkh = w.dk + h * hd, *dvh = w.dv + h * hd;
            if (fast) {
                sf_sgemm(1, 0, tk, hd, tq, 1.0f, p, tk, dctx, hc, 0.0f, dvh, hc);   /* P^T dctx */
                sf_sgemm(0, 1, tq, tk, hd, 1.0f, dctx, hc, vh, hc, 0.0f, w.dp, tk); /* dctx V^T */
                if (g.drop) attn_dropout_backward(&g, &w, n, h, w.f);
                attn_softmax_backward(&g, &w, h, scale);
                sf_sgemm(0, 0, tq, hd, tk, 1.0f, w.dp, tk, kh, hc, 0.0f, dqh, hc); /* dS K */
                sf_sgemm(1, 0, tk, hd, tq, 1.0f, w.dp, tk, qh, hc, 0.0f, dkh, hc); /* dS^T Q */
                continue;
            }
            for (int64_t j = 0; j < tk; j++)
                for (int64_t e = 0; e < hd; e++) {
                    float acc = 0.0f;
                    for (int64_t i = 0; i < tq; i++) acc += p[i * tk + j] * dctx[i * hc + e];
                    dvh[j * hc + e] = acc;
                }
            for (int64_t i = 0; i < tq; i++)
                for (int64_t j = 0; j < tk; j++) {
                    float acc = 0.0f;
                    for (int64_t e = 0; e < hd; e++) acc += dctx[i * hc + e] * vh[j * hc + e];
                    w.dp[i * tk + j] = acc;
                }
            if (g.drop) attn_dropout_backward(&g, &w, n, h, w.f);
            attn_softmax_backward(&g, &w, h, scale);
            for (int64_t i = 0; i < tq; i++)
                for (int64_t e = 0; e < hd; e++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < tk; j++) acc += w.dp[i * tk + j] * kh[j * hc + e];
                    dqh[i * hc + e] = acc;
                }
            for (int64_t j = 0; j < tk; j++)
                for (int64_t e = 0; e < hd; e++) {
                    float acc = 0.0f;
                    for (int64_t i = 0; i < tq; i++) acc += w.dp[i * tk + j] * qh[i * hc + e];
                    dkh[j * hc + e] = acc;
                }
        }
        /* the three input projections of the tile's heads; for self-attention xq
         * and xkv are rows of the same region, and so are their gradients */
        float *dxq = dxq_all ? dxq_all + (n * g.rq + g.q_off) * D : NULL;
        float *dxkv = dxkv_all ? dxkv_all + n * g.rk * D : NULL;
        back(attn_xq(a, &g, n), tq, D, W.wq, D, w.dq, hc, hc, dxq, G.wq, G.bq);
        back(attn_xkv(a, &g, n), tk, D, W.wk, D, w.dk, hc, hc, dxkv, G.wk, G.bk);
        back(attn_xkv(a, &g, n), tk, D, W.wv, D, w.dv, hc, hc, dxkv, G.wv, G.bv);
    }
    return SF_OK;
}

static sf_status attention_bwd_ref(const sf_kernel_args *a) { return attn_backward(a, 0); }
static sf_status attention_bwd_fast(const sf_kernel_args *a) { return attn_backward(a, 1); }

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
    .weight_slices = attention_weight_slices,
    .param_descs = attention_param_descs,
    .fwd_ref = attention_fwd_ref,
    .fwd_fast = attention_fwd_fast,
    .bwd_ref = attention_bwd_ref,
    .bwd_fast = attention_bwd_fast,
    .workspace = attention_workspace,
};
