/*
 * onnx_attn.c - attention as torch.onnx.export writes it, recognized as one
 * soapflow attention operator: torch's nn.MultiheadAttention (here), and the
 * products of GPT-2-style code (nanoGPT, minGPT, Hugging Face's GPT-2; the
 * batch-first form, below).
 *
 * ONNX has no attention operator before opset 23; PyTorch exports
 * nn.MultiheadAttention (and with it nn.TransformerEncoderLayer) as some twenty
 * nodes that work on a (T, N*heads, head_dim) layout: soapflow can neither run
 * those as separate operators (they move the batch out of dimension 0) nor
 * would it want to (its attention operator is what the planner splits). So the
 * importer follows the export of torch 1.13 (Debian's) step by step, with each
 * intermediate a PEND ATTN value that knows its stage, and makes the operator at
 * the output projection:
 *
 *   x (T, N, D)                 a view of soapflow's (N, T, D) (batch_first or not)
 *   MatMul(x, W_in^T) + b_in    a pending linear layer (onnx_ops.c) of width 3D
 *   Slice [pD, (p+1)D) of -1    PART p (q, k, v)
 *   Reshape (T, N*H, D/H)       HEADS p (this sets H)
 *   Transpose                   HEADS p in another order (q, v: N*H first; k: (N*H, hd, T))
 *   Div / Mul by a constant     the scaling of q (1 / sqrt(hd) in all, checked at the scores)
 *   MatMul(q, k)                SCORES (N*H, T, T)
 *   Mul by 1 (baddbmm's alpha)   SCORES (torch adds an attn_mask with baddbmm)
 *   Add of a causal mask        SCORES, causal (a constant: -inf above the diagonal, 0 else)
 *   Softmax(-1)                 PROBS (a Dropout after it, as a training-mode export keeps
 *                               it, gives the operator its dropout ratio)
 *   MatMul(PROBS, v)            CTX (N*H, T, hd)
 *   Transpose, Reshape (T*N, D) CTX_M
 *   Gemm(W_out, b_out)          OUT_M: the attention operator is made here
 *   Reshape (T, N, D)           an ordinary activation: the operator's (N, T, D) output in view
 *
 * Shape nodes may read any stage (only shapes are needed). Any other use of a
 * stage is refused with a message saying where the attention started. A Slice
 * of a linear layer that does not fit (another width, another axis) is not
 * taken and stays an ordinary split. Not recognized: cross-attention and
 * separate Q/K/V projections (kdim != embed_dim), key-padding masks, masks that
 * are not causal, and other exporters' layouts (they fail at the node that
 * differs, with its name); the batch-first form takes separate projections.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

enum {
    AT_PART = 1,
    AT_HEADS,
    AT_SCORES,
    AT_PROBS,
    AT_CTX,
    AT_CTX_M,
    AT_OUT_M,
};

static const char *stage_name(int s) {
    switch (s) {
    case AT_PART: return "a slice of the Q, K, V projection";
    case AT_HEADS: return "the per-head queries, keys or values";
    case AT_SCORES: return "the attention scores";
    case AT_PROBS: return "the attention probabilities";
    case AT_CTX: return "the per-head context";
    case AT_CTX_M: return "the merged context";
    case AT_OUT_M: return "the output projection";
    default: return "an attention stage";
    }
}

/* A Dropout of the probabilities of attention rec: its ratio becomes the
 * operator's dropout (two in a row keep an element with the product of their
 * keep probabilities and scale it by the inverse, one dropout of the
 * complement). */
static sf_status probs_dropout(ox_ctx *c, const Onnx__NodeProto *n, int rec) {
    double r;
    sf_status st = ox_dropout_ratio(c, n, &r);
    if (st != SF_OK) return st;
    ox_attn *a = &c->attn[rec];
    a->dropout = 1.0 - (1.0 - a->dropout) * (1.0 - r);
    return SF_OK;
}

#define TAKE(expr)                                                                                 \
    do {                                                                                           \
        *st = (expr);                                                                              \
        return 1;                                                                                  \
    } while (0)

static int bf_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st, int v);
static int bf_sep_heads(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st);

static int is_attn(const ox_ctx *c, int v) {
    return v > 0 && c->vals[v].kind == OX_PEND && c->vals[v].pend == OX_PEND_ATTN;
}

/* Make output o a stage of attention rec with ONNX shape d. */
static void set_stage(ox_ctx *c, int o, int rec, int stage, int part, const int *perm, int ndim,
                      const int64_t *d) {
    if (o < 0) return;
    ox_value *x = &c->vals[o];
    x->kind = OX_PEND;
    x->pend = OX_PEND_ATTN;
    x->rec = rec;
    x->ndim = ndim;
    for (int k = 0; k < ndim; k++) x->d[k] = d[k];
    ox_attn_val *a = &c->attn_val[o];
    a->stage = stage;
    a->part = part;
    for (int k = 0; k < 3; k++) a->perm[k] = perm ? perm[k] : k;
}

sf_status ox_attn_refuse(ox_ctx *c, int v) {
    const ox_attn *a = &c->attn[c->vals[v].rec];
    char where[240];
    if (a->form == OX_ATTN_BF)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "reads '%.100s', %s of the attention recognized at %s; soapflow takes "
                       "GPT-2-style attention (q @ k^T scaled by 1/sqrt(head_dim), no mask or a "
                       "causal one, softmax, @ v, heads merged, an output projection) as one "
                       "operator, and the graph departs from it here",
                       c->vals[v].name, stage_name(c->attn_val[v].stage),
                       ox_node_str(c, a->node, where, sizeof where));
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "reads '%.100s', %s of the multi-head attention recognized at %s; soapflow "
                   "takes torch's nn.MultiheadAttention export (self-attention, packed "
                   "projections, no mask or a causal one) as one operator, and the graph departs "
                   "from it here",
                   c->vals[v].name, stage_name(c->attn_val[v].stage),
                   ox_node_str(c, a->node, where, sizeof where));
}

/* The slice [lo, hi) of the last axis of a pending linear layer, as a part. */
int ox_attn_slice(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int lv = ox_in(c, n, 0);
    if (lv <= 0 || c->opset < 10) return 0;
    ox_value *L = &c->vals[lv];
    if (L->kind != OX_PEND || L->pend != OX_PEND_LINEAR) return 0;
    ox_linear *lin = &c->lin[L->rec];
    if (lin->n != 3 * lin->k || L->ndim != 3) return 0;
    /* x must be (T, N, D), a view of soapflow's (N, T, D) */
    ox_value *X = &c->vals[lin->x];
    if (X->kind == OX_INPUT || X->kind == OX_PEND) {
        if ((*st = ox_act(c, lin->x)) != SF_OK) return 1;
        X = &c->vals[lin->x];
    }
    if (X->kind != OX_ACT || X->ndim != 3 || X->map[0] != 1 || X->map[1] != 0 || X->map[2] != 2)
        return 0;
    int64_t v[4][OX_MAX_RANK];
    int cnt[4] = {-1, -1, -1, -1};
    for (int k = 1; k <= 4; k++) {
        int iv = ox_in(c, n, k);
        if (iv <= 0) continue;
        const ox_value *x = &c->vals[iv];
        if (x->kind != OX_CONST || x->numel != 1 || !x->is_index) return 0;
        v[k - 1][0] = x->i[0];
        cnt[k - 1] = 1;
    }
    if (cnt[0] != 1 || cnt[1] != 1) return 0;
    if (cnt[2] == 1 && v[2][0] != -1 && v[2][0] != 2) return 0;
    if (cnt[3] == 1 && v[3][0] != 1) return 0;
    int64_t d = lin->k, lo = v[0][0], hi = v[1][0];
    if (lo % d || hi != lo + d || lo < 0 || hi > 3 * d) return 0;
    if (lin->attn < 0) {
        if (c->n_attn == c->cap_attn) {
            int cap = c->cap_attn ? c->cap_attn * 2 : 8;
            ox_attn *na = realloc(c->attn, (size_t)cap * sizeof *na);
            if (!na) TAKE(sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin));
            c->attn = na;
            c->cap_attn = cap;
        }
        lin = &c->lin[L->rec];
        lin->attn = c->n_attn++;
        ox_attn *a = &c->attn[lin->attn];
        memset(a, 0, sizeof *a);
        a->proj = L->rec;
        a->node = c->cur_node;
        a->t = X->d[0];
        a->n = X->d[1];
        a->d = d;
        a->scale = 1.0;
        a->emitted = -1;
    }
    int64_t shape[3] = {X->d[0], X->d[1], d};
    set_stage(c, ox_out(c, n, 0), lin->attn, AT_PART, (int)(lo / d), NULL, 3, shape);
    TAKE(SF_OK);
}

/* Compose a stage's order with a Transpose's perm. */
static int compose(const int *p, const int64_t *q, int *out) {
    for (int k = 0; k < 3; k++) {
        if (q[k] < 0 || q[k] > 2) return -1;
        out[k] = p[q[k]];
    }
    return (out[0] + out[1] + out[2] == 3 && out[0] != out[1] && out[1] != out[2] &&
            out[0] != out[2])
               ? 0
               : -1;
}

static int perm_is(const int *p, int a, int b, int cc) {
    return p[0] == a && p[1] == b && p[2] == cc;
}

/* A causal mask: (T, T) (with leading 1s) of 0 on and below the diagonal and a
 * large negative number above it. */
static int causal_mask(const ox_value *m, int64_t t) {
    if (m->kind != OX_CONST || m->is_index || m->numel != t * t) return 0;
    for (int k = 0; k + 2 < m->ndim; k++)
        if (m->d[k] != 1) return 0;
    if (m->ndim < 2 || m->d[m->ndim - 1] != t || m->d[m->ndim - 2] != t) return 0;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < t; j++) {
            float v = m->f[i * t + j];
            if (j <= i ? v != 0.0f : !(v <= -1e4f)) return 0;
        }
    return 1;
}

static sf_status emit(ox_ctx *c, const Onnx__NodeProto *n, int rec) {
    ox_attn *a = &c->attn[rec];
    int64_t ta, tb;
    double alpha, beta;
    sf_status st;
    if ((st = ox_attr_int(c, n, "transA", 0, &ta)) != SF_OK) return st;
    if ((st = ox_attr_int(c, n, "transB", 0, &tb)) != SF_OK) return st;
    if ((st = ox_attr_float(c, n, "alpha", 1.0, &alpha)) != SF_OK) return st;
    if ((st = ox_attr_float(c, n, "beta", 1.0, &beta)) != SF_OK) return st;
    if (ta || alpha != 1.0 || beta != 1.0)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an output projection with transA, alpha or beta");
    int wv = ox_in(c, n, 1), ok;
    const float *Wo = ox_weight(c, wv, "output projection", &ok);
    if (!ok) return c->err->code;
    const ox_value *W = &c->vals[wv];
    int64_t d = a->d;
    if (W->ndim != 2 || W->d[0] != d || W->d[1] != d)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "an output projection that is not %lldx%lld",
                       (long long)d, (long long)d);
    const float *bo = NULL;
    int has_bo = ox_in(c, n, 2) > 0;
    if (has_bo) {
        bo = ox_weight(c, ox_in(c, n, 2), "output bias", &ok);
        if (!ok) return c->err->code;
        if (c->vals[ox_in(c, n, 2)].numel != d)
            return ox_fail(c, SF_ERR_SHAPE, "the output bias has %lld values, %lld expected",
                           (long long)c->vals[ox_in(c, n, 2)].numel, (long long)d);
    }
    ox_linear *lin = &c->lin[a->proj];
    int has_bi = lin->b >= 0;
    sf_tensor_ref in = c->vals[lin->x].ref;
    const sf_shape *xs = &sf_graph_op(c->g, in.op)->out_shapes[in.out];
    if (xs->ndim != 3) return ox_fail(c, SF_ERR_INTERNAL, "attention input of rank %d", xs->ndim);
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = d;
    p.attention.heads = a->heads;
    p.attention.causal = a->causal;
    p.attention.dropout = a->dropout;
    p.attention.bias = has_bi || has_bo;
    int id = ox_add_op(c, SF_OP_ATTENTION, &p, &in, 1, W->name);
    if (id < 0) return (sf_status)id;
    const float *Wi = c->vals[lin->w].kind == OX_CONST ? c->vals[lin->w].f : NULL;
    float *tmp = NULL;
    if (c->want_weights && Wi && Wo) {
        tmp = malloc((size_t)(3 * d * d) * sizeof *tmp);
        if (!tmp) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
        /* in_proj_weight (3D, D) is the MatMul's (D, 3D) transposed */
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < 3 * d; j++) tmp[j * d + i] = Wi[i * 3 * d + j];
    }
    st = ox_put_param(c, id, "in_proj_weight", Wi ? tmp : NULL, 3 * d * d);
    if (st == SF_OK && tmp && !tb) /* out_proj.weight is torch's (out, in): B as Gemm gives it
                                      with transB, transposed without */
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < d; j++) tmp[j * d + i] = Wo[i * d + j];
    if (st == SF_OK)
        st = ox_put_param(c, id, "out_proj.weight", Wo ? (tb ? Wo : tmp) : NULL, d * d);
    free(tmp);
    if (st == SF_OK && p.attention.bias) {
        if (has_bi)
            st = ox_put_param(c, id, "in_proj_bias", c->vals[lin->b].f, 3 * d);
        else
            st = ox_fill_param(c, id, "in_proj_bias", 0.0f);
        if (st == SF_OK)
            st = has_bo ? ox_put_param(c, id, "out_proj.bias", bo, d)
                        : ox_fill_param(c, id, "out_proj.bias", 0.0f);
    }
    if (st != SF_OK) return st;
    a = &c->attn[rec];
    a->emitted = id;
    a->out = (sf_tensor_ref){id, 0};
    int64_t shape[2] = {a->t * a->n, d};
    set_stage(c, ox_out(c, n, 0), rec, AT_OUT_M, 0, NULL, 2, shape);
    return SF_OK;
}

int ox_attn_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int v = -1;
    for (size_t k = 0; k < n->n_input && v < 0; k++)
        if (is_attn(c, ox_in(c, n, (int)k))) v = ox_in(c, n, (int)k);
    if (v < 0) return n->op_type && !strcmp(n->op_type, "Reshape") ? bf_sep_heads(c, n, st) : 0;
    int rec = c->vals[v].rec;
    ox_attn *a = &c->attn[rec];
    if (a->form == OX_ATTN_BF) return bf_node(c, n, st, v);
    const ox_attn_val av = c->attn_val[v];
    const char *t = n->op_type;
    int o = ox_out(c, n, 0);
    int64_t hd = a->heads ? a->d / a->heads : 0;

    if (!strcmp(t, "Reshape") && ox_in(c, n, 0) == v) {
        int64_t s[OX_MAX_RANK];
        int cnt;
        sf_status r = ox_const_ints(c, ox_in(c, n, 1), "the shape", s, OX_MAX_RANK, &cnt);
        if (r != SF_OK) TAKE(r);
        for (int k = 0; k < cnt; k++) /* 0 copies (no allowzero in torch's export) */
            if (s[k] == 0 && k < c->vals[v].ndim) s[k] = c->vals[v].d[k];
        if (av.stage == AT_PART && cnt == 3 && s[0] == a->t && s[1] > 0 && s[2] > 0 &&
            s[1] % a->n == 0 && s[1] / a->n <= a->d && s[2] <= a->d &&
            (s[1] / a->n) * s[2] == a->d) {
            int64_t heads = s[1] / a->n;
            if (a->heads && a->heads != heads) TAKE(ox_attn_refuse(c, v));
            a->heads = heads;
            set_stage(c, o, rec, AT_HEADS, av.part, NULL, 3, s);
            TAKE(SF_OK);
        }
        if (av.stage == AT_CTX && perm_is(av.perm, 0, 1, 2) && cnt == 2 &&
            (s[0] == a->t * a->n || s[0] == -1) && (s[1] == a->d || s[1] == -1)) {
            int64_t shape[2] = {a->t * a->n, a->d};
            set_stage(c, o, rec, AT_CTX_M, 0, NULL, 2, shape);
            TAKE(SF_OK);
        }
        if (av.stage == AT_OUT_M && cnt == 3 && s[0] == a->t && s[1] == a->n && s[2] == a->d) {
            int64_t shape[3] = {a->t, a->n, a->d};
            int8_t map[3] = {1, 0, 2};
            ox_set_act(c, o, a->out, 3, shape, map, 0);
            TAKE(SF_OK);
        }
        TAKE(ox_attn_refuse(c, v));
    }
    if (!strcmp(t, "Transpose") && (av.stage == AT_HEADS || av.stage == AT_CTX)) {
        int64_t q[OX_MAX_RANK];
        int cnt, p[3];
        sf_status r = ox_attr_ints(c, n, "perm", q, OX_MAX_RANK, &cnt);
        if (r != SF_OK) TAKE(r);
        if (cnt != 3 || compose(av.perm, q, p) != 0) TAKE(ox_attn_refuse(c, v));
        int64_t shape[3];
        for (int k = 0; k < 3; k++) shape[k] = c->vals[v].d[q[k]];
        set_stage(c, o, rec, av.stage, av.part, p, 3, shape);
        TAKE(SF_OK);
    }
    if ((!strcmp(t, "Div") || !strcmp(t, "Mul")) && (av.stage == AT_PART || av.stage == AT_HEADS) &&
        av.part == 0 && ox_in(c, n, 0) == v) {
        const ox_value *k = &c->vals[ox_in(c, n, 1)];
        if (k->kind != OX_CONST || k->numel != 1) TAKE(ox_attn_refuse(c, v));
        double x = k->is_index ? (double)k->i[0] : (double)k->f[0];
        if (!(x != 0) || !isfinite(x)) TAKE(ox_attn_refuse(c, v));
        a->scale *= !strcmp(t, "Div") ? x : 1.0 / x;
        set_stage(c, o, rec, av.stage, av.part, av.perm, c->vals[v].ndim, c->vals[v].d);
        TAKE(SF_OK);
    }
    /* torch.baddbmm(mask, q, k^T), how torch 1.13 adds an attn_mask to the
     * scores, exports as Mul(scores, alpha) + Mul(mask, beta) with alpha =
     * beta = 1: a product of the scores by a constant 1 changes nothing. */
    if ((!strcmp(t, "Mul") || !strcmp(t, "Div")) && av.stage == AT_SCORES && n->n_input == 2 &&
        (!strcmp(t, "Mul") || ox_in(c, n, 0) == v)) {
        int other = ox_in(c, n, 0) == v ? ox_in(c, n, 1) : ox_in(c, n, 0);
        const ox_value *k = other > 0 ? &c->vals[other] : NULL;
        if (!k || k->kind != OX_CONST || k->numel != 1 ||
            (k->is_index ? (double)k->i[0] : (double)k->f[0]) != 1.0)
            TAKE(ox_attn_refuse(c, v));
        set_stage(c, o, rec, AT_SCORES, 0, NULL, 3, c->vals[v].d);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "MatMul")) {
        int x = ox_in(c, n, 0), y = ox_in(c, n, 1);
        if (!is_attn(c, x) || !is_attn(c, y) || c->vals[x].rec != rec || c->vals[y].rec != rec)
            TAKE(ox_attn_refuse(c, v));
        ox_attn_val ax = c->attn_val[x], ay = c->attn_val[y];
        if (ax.stage == AT_HEADS && ax.part == 0 && perm_is(ax.perm, 1, 0, 2) &&
            ay.stage == AT_HEADS && ay.part == 1 && perm_is(ay.perm, 1, 2, 0)) {
            if (!a->heads || fabs(a->scale - sqrt((double)hd)) > 1e-3 * sqrt((double)hd))
                TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                             "attention scores scaled by 1/%g, not 1/sqrt(%lld): not torch's "
                             "scaled dot-product attention",
                             a->scale, (long long)hd));
            int64_t shape[3] = {a->n * a->heads, a->t, a->t};
            set_stage(c, o, rec, AT_SCORES, 0, NULL, 3, shape);
            TAKE(SF_OK);
        }
        if (ax.stage == AT_PROBS && ay.stage == AT_HEADS && ay.part == 2 &&
            perm_is(ay.perm, 1, 0, 2)) {
            int p[3] = {1, 0, 2};
            int64_t shape[3] = {a->n * a->heads, a->t, hd};
            set_stage(c, o, rec, AT_CTX, 0, p, 3, shape);
            TAKE(SF_OK);
        }
        TAKE(ox_attn_refuse(c, v));
    }
    if (!strcmp(t, "Add") && av.stage == AT_SCORES) {
        int other = ox_in(c, n, 0) == v ? ox_in(c, n, 1) : ox_in(c, n, 0);
        if (ox_const_data(c, other) != SF_OK) TAKE(c->err->code);
        a = &c->attn[rec];
        if (a->causal || !causal_mask(&c->vals[other], a->t)) TAKE(ox_attn_refuse(c, v));
        a->causal = 1;
        set_stage(c, o, rec, AT_SCORES, 0, NULL, 3, c->vals[v].d);
        TAKE(SF_OK);
    }
    if ((!strcmp(t, "Softmax") && av.stage == AT_SCORES) ||
        (!strcmp(t, "Dropout") && av.stage == AT_PROBS)) {
        if (!strcmp(t, "Softmax")) {
            int64_t axis;
            sf_status r = ox_attr_int(c, n, "axis", c->opset < 13 ? 1 : -1, &axis);
            if (r != SF_OK) TAKE(r);
            if (axis != -1 && axis != 2) TAKE(ox_attn_refuse(c, v));
        }
        if (!strcmp(t, "Dropout")) {
            sf_status r = probs_dropout(c, n, rec);
            if (r != SF_OK) TAKE(r);
        }
        for (size_t k = 1; k < n->n_output; k++) /* a dropout's mask */
            if (ox_out(c, n, (int)k) > 0) c->vals[ox_out(c, n, (int)k)].kind = OX_NONE;
        set_stage(c, o, rec, AT_PROBS, 0, NULL, 3, c->vals[v].d);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Gemm") && av.stage == AT_CTX_M && ox_in(c, n, 0) == v) TAKE(emit(c, n, rec));
    TAKE(ox_attn_refuse(c, v));
}

/* ---- the batch-first form: GPT-2-style code ------------------------------------------ */

/* Attention written out with products, as nanoGPT, minGPT and Hugging Face's
 * GPT-2 do, exports (torch 1.13, opsets 13 to 17) as
 *
 *   x (N, T, D)                      the input, in soapflow's order
 *   MatMul(x, W) (+ b)               a packed projection of width 3D, then
 *   Split of the last axis in 3       PART p (N, T, D); or three projections of width D
 *   Reshape (N, T, H, D/H)           HEADS (this sets H); the separate projections
 *                                    start here
 *   Transpose                        HEADS in another order: q, v (N, H, T, hd), k
 *                                    (N, H, hd, T) (two transposes or one)
 *   MatMul(q, k)                     SCORES (N, H, T, T): which piece is q, k (and,
 *                                    at the second product, v) is learned here
 *   Mul / Div by constants           on q, k or the scores: their product must be
 *                                    1 / sqrt(hd) at the softmax
 *   Where(mask, -inf, scores)        masked_fill of a causal mask (the condition a
 *                                    constant true above the diagonal; or
 *                                    Where(mask, scores, -inf) with the lower
 *                                    triangle true), or an Add of an additive one
 *   Softmax(-1)                      PROBS (a Dropout after it gives the
 *                                    operator its dropout ratio)
 *   MatMul(PROBS, v)                 CTX (N, H, T, hd)
 *   Transpose (N, T, H, hd), Reshape (N, T, D)   CTX_M
 *   MatMul(CTX_M, W_o)               OUT_W: the output projection
 *   Add of a bias (D)                the attention operator is made here (or where
 *                                    something else reads OUT_W, without that bias)
 *
 * A value's perm names, for each ONNX dimension, which of (N, T, H, hd) it is
 * (the scores: (N, H, Tq, Tk), kept in order). The pattern starts only where
 * it can be nothing else: a Split all of whose pieces are reshaped, a Reshape to
 * (N, T, H, hd) all of whose readers transpose the heads forward. */

enum { BF_N = 0, BF_T, BF_H, BF_E };

static int bf_perm_is(const int *p, int a, int b, int cc, int d) {
    return p[0] == a && p[1] == b && p[2] == cc && p[3] == d;
}

static void set_stage4(ox_ctx *c, int o, int rec, int stage, int part, int lin, const int *perm,
                       int ndim, const int64_t *d) {
    if (o < 0) return;
    set_stage(c, o, rec, stage, part, NULL, ndim, d);
    ox_attn_val *a = &c->attn_val[o];
    a->lin = lin;
    for (int k = 0; k < 4; k++) a->perm[k] = perm ? perm[k] : k;
    a->scale = 1.0;
}

/* The factor value o carries (set after set_stage4). */
static void set_scale(ox_ctx *c, int o, double f) {
    if (o >= 0) c->attn_val[o].scale = f;
}

/* Whether every live node that reads value v is of type t (and, with perms, a
 * Transpose with one of the two 4-D perms given), Shape and Size aside (they
 * read shapes only); one must. */
static int readers_are(const ox_ctx *c, int v, const char *t, const int64_t (*perms)[4]) {
    int seen = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const Onnx__NodeProto *nd = c->graph->node[i];
        int reads = 0;
        for (size_t k = 0; k < nd->n_input; k++) reads |= ox_in(c, nd, (int)k) == v;
        if (!reads || !c->live[i]) continue;
        if (nd->op_type && (!strcmp(nd->op_type, "Shape") || !strcmp(nd->op_type, "Size")))
            continue;
        if (!nd->op_type || strcmp(nd->op_type, t)) return 0;
        if (perms) {
            const Onnx__AttributeProto *pa = ox_attr(nd, "perm");
            if (!pa || pa->n_ints != 4) return 0;
            int any = 0;
            for (int q = 0; q < 2 && !any; q++)
                any = pa->ints[0] == perms[q][0] && pa->ints[1] == perms[q][1] &&
                      pa->ints[2] == perms[q][2] && pa->ints[3] == perms[q][3];
            if (!any) return 0;
        }
        seen = 1;
    }
    return seen;
}

/* The input of a pending linear layer as (N, T, D) in soapflow's order, or 0. */
static int bf_input_ok(ox_ctx *c, int lv, sf_status *st) {
    ox_linear *lin = &c->lin[c->vals[lv].rec];
    ox_value *X = &c->vals[lin->x];
    if (X->kind == OX_INPUT || X->kind == OX_PEND) {
        if ((*st = ox_act(c, lin->x)) != SF_OK) return -1;
        X = &c->vals[lin->x];
    }
    if (X->kind != OX_ACT || X->ndim != 3 || X->is_index) return 0;
    for (int k = 0; k < 3; k++)
        if (X->map[k] != k) return 0;
    const sf_shape *s = ox_shape_of(c, X->ref);
    return s->ndim == 3;
}

static int bf_new(ox_ctx *c, int x, int node, sf_status *st) {
    if (c->n_attn == c->cap_attn) {
        int cap = c->cap_attn ? c->cap_attn * 2 : 8;
        ox_attn *na = realloc(c->attn, (size_t)cap * sizeof *na);
        if (!na) {
            *st = ox_oom(c);
            return -1;
        }
        c->attn = na;
        c->cap_attn = cap;
    }
    int r = c->n_attn++;
    ox_attn *a = &c->attn[r];
    memset(a, 0, sizeof *a);
    const ox_value *X = &c->vals[x];
    a->form = OX_ATTN_BF;
    a->proj = -1;
    a->node = node;
    a->n = X->d[0];
    a->t = X->d[1];
    a->d = X->d[2];
    a->scale = 1.0;
    a->emitted = -1;
    a->x = x;
    for (int k = 0; k < 3; k++) a->role[k] = -1;
    a->wo = a->bo = -1;
    return r;
}

/* A Split of a packed projection (N, T, 3D) into its three (N, T, D) pieces. */
int ox_attn_split(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int lv = ox_in(c, n, 0);
    if (lv <= 0 || n->n_output != 3) return 0;
    ox_value *L = &c->vals[lv];
    if (L->kind != OX_PEND || L->pend != OX_PEND_LINEAR || L->ndim != 3 || L->uses != 1) return 0;
    ox_linear *lin = &c->lin[L->rec];
    if (lin->n != 3 * lin->k || lin->attn >= 0) return 0;
    int64_t axis, sizes[4];
    int cnt = -1;
    if (ox_attr_int(c, n, "axis", 0, &axis) != SF_OK) return 0;
    if (axis != 2 && axis != -1) return 0;
    if (c->opset < 13) {
        if (ox_attr_ints(c, n, "split", sizes, 4, &cnt) != SF_OK) return 0;
    } else if (n->n_input > 1 && ox_in(c, n, 1) > 0 && c->vals[ox_in(c, n, 1)].kind != OX_ABSENT) {
        const ox_value *sv = &c->vals[ox_in(c, n, 1)];
        if (sv->kind != OX_CONST || !sv->is_index || sv->numel != 3) return 0;
        for (int k = 0; k < 3; k++) sizes[k] = sv->i[k];
        cnt = 3;
    }
    for (int k = 0; k < cnt; k++)
        if (sizes[k] != lin->k) return 0;
    if (cnt >= 0 && cnt != 3) return 0;
    for (int k = 0; k < 3; k++)
        if (ox_out(c, n, k) <= 0 || !readers_are(c, ox_out(c, n, k), "Reshape", NULL)) return 0;
    int ok = bf_input_ok(c, lv, st);
    if (ok < 0) return 1;
    if (!ok) return 0;
    lin = &c->lin[c->vals[lv].rec];
    int r = bf_new(c, lin->x, c->cur_node, st);
    if (r < 0) return 1;
    lin->attn = r;
    c->attn[r].proj = c->vals[lv].rec;
    const ox_value *X = &c->vals[lin->x];
    int64_t shape[3] = {X->d[0], X->d[1], lin->k};
    for (int k = 0; k < 3; k++) set_stage4(c, ox_out(c, n, k), r, AT_PART, k, -1, NULL, 3, shape);
    TAKE(SF_OK);
}

/* The shape of a Reshape node into s (0s copied from value v), or why not. */
static sf_status reshape_to(ox_ctx *c, const Onnx__NodeProto *n, int v, int64_t *s, int *cnt) {
    sf_status r = ox_const_ints(c, ox_in(c, n, 1), "the shape", s, OX_MAX_RANK, cnt);
    if (r != SF_OK) return r;
    for (int k = 0; k < *cnt; k++)
        if (s[k] == 0 && k < c->vals[v].ndim) s[k] = c->vals[v].d[k];
    /* one -1: what the element count leaves */
    int64_t known = 1, numel = 1;
    int neg = -1;
    for (int k = 0; k < c->vals[v].ndim; k++) numel *= c->vals[v].d[k];
    for (int k = 0; k < *cnt; k++) {
        if (s[k] == -1 && neg < 0)
            neg = k;
        else if (s[k] > 0)
            known *= s[k];
        else
            return SF_OK; /* left for the checks to refuse */
    }
    if (neg >= 0 && known > 0 && numel % known == 0) s[neg] = numel / known;
    return SF_OK;
}

/* (N, T, D) split into heads (N, T, H, D / H), H > 1 ... or 1. */
static int heads_shape(const ox_attn *a, const int64_t *s, int cnt) {
    return cnt == 4 && s[0] == a->n && s[1] == a->t && s[2] > 0 && s[3] > 0 &&
           s[2] * s[3] == a->d && (!a->heads || a->heads == s[2]);
}

static const int64_t fwd_perms[2][4] = {{0, 2, 1, 3}, {0, 2, 3, 1}};

/* A Reshape of a separate projection (N, T, D) into heads: the start of an
 * attention, or a piece of one that started on the same input. */
static int bf_sep_heads(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int lv = ox_in(c, n, 0);
    if (lv <= 0) return 0;
    ox_value *L = &c->vals[lv];
    if (L->kind != OX_PEND || L->pend != OX_PEND_LINEAR || L->ndim != 3) return 0;
    ox_linear *lin = &c->lin[L->rec];
    if (lin->n != lin->k || lin->attn >= 0) return 0;
    int o = ox_out(c, n, 0), sv = ox_in(c, n, 1);
    if (o <= 0 || L->uses != 1 || !readers_are(c, o, "Transpose", fwd_perms)) return 0;
    if (sv <= 0 || c->vals[sv].kind != OX_CONST || !c->vals[sv].is_index) return 0;
    int ok = bf_input_ok(c, lv, st);
    if (ok < 0) return 1;
    if (!ok) return 0;
    lin = &c->lin[c->vals[lv].rec];
    int64_t s[OX_MAX_RANK];
    int cnt;
    if ((*st = reshape_to(c, n, lv, s, &cnt)) != SF_OK) return 1;
    int r = -1;
    for (int i = c->n_attn - 1; i >= 0 && r < 0; i--) {
        const ox_attn *a = &c->attn[i];
        if (a->form == OX_ATTN_BF && a->proj < 0 && a->x == lin->x && a->emitted < 0 &&
            a->n_sep < 3)
            r = i;
    }
    if (r < 0) {
        int64_t ns[3];
        memcpy(ns, c->vals[lin->x].d, sizeof ns);
        ox_attn probe = {.n = ns[0], .t = ns[1], .d = ns[2]};
        if (!heads_shape(&probe, s, cnt) || s[2] < 1) return 0;
        if ((r = bf_new(c, lin->x, c->cur_node, st)) < 0) return 1;
    }
    ox_attn *a = &c->attn[r];
    if (!heads_shape(a, s, cnt)) {
        if (a->n_sep == 0) return 0;
        TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                     "a projection of the attention recognized at node #%d split into heads "
                     "otherwise than its others (%lld heads)",
                     a->node, (long long)a->heads));
    }
    a->heads = s[2];
    a->n_sep++;
    lin->attn = r;
    set_stage4(c, o, r, AT_HEADS, -1, c->vals[lv].rec, NULL, 4, s);
    TAKE(SF_OK);
}

/* The source of a per-head value (a piece of the packed projection, or a
 * separate one), as a role record holds it. */
static int bf_source(const ox_attn_val *v) { return v->lin >= 0 ? 3 + v->lin : v->part; }

/* Give role r (0 q, 1 k, 2 v) to value vv's source; 0 when that contradicts
 * what is known. */
static int bf_assign(ox_attn *a, int r, const ox_attn_val *vv) {
    int src = bf_source(vv);
    for (int k = 0; k < 3; k++)
        if (k != r && a->role[k] == src) return 0;
    if (a->role[r] >= 0 && a->role[r] != src) return 0;
    a->role[r] = src;
    return 1;
}

/* A constant true exactly where key j > query i (above = 1) or j <= i (0),
 * of shape (T, T) with leading 1s. */
static int causal_cond(const ox_value *m, int64_t t, int above) {
    if (m->kind != OX_CONST || m->numel != t * t) return 0;
    if (m->ndim < 2 || m->d[m->ndim - 1] != t || m->d[m->ndim - 2] != t) return 0;
    for (int k = 0; k + 2 < m->ndim; k++)
        if (m->d[k] != 1) return 0;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < t; j++) {
            int on = m->is_index ? m->i[i * t + j] != 0 : m->f[i * t + j] != 0.0f;
            if (on != (above ? j > i : j <= i)) return 0;
        }
    return 1;
}

/* A constant of large negative numbers (a masked score): -inf, or below -1e4. */
static int mask_fill(const ox_value *m) {
    if (m->kind != OX_CONST || m->is_index || m->numel < 1) return 0;
    for (int64_t k = 0; k < m->numel; k++)
        if (!(m->f[k] <= -1e4f)) return 0;
    return 1;
}

/* The attention operator of record rec, made at the output projection: with
 * its bias value bv (-1: none). Value o becomes its (N, T, D) output. */
static sf_status bf_emit(ox_ctx *c, int rec, int bv, int o) {
    ox_attn *a = &c->attn[rec];
    int64_t d = a->d;
    sf_status st;
    for (int r = 0; r < 3; r++)
        if (a->role[r] < 0)
            return ox_fail_node(c, a->out_node, SF_ERR_INTERNAL, "attention without its %s",
                                r == 0   ? "queries"
                                : r == 1 ? "keys"
                                         : "values");
    int saved = c->cur_node;
    /* the projections: the packed one's pieces, or three (D, D) */
    int wv[3], bvv[3];
    int64_t col[3], stride[3];
    for (int r = 0; r < 3; r++) {
        if (a->role[r] < 3) {
            const ox_linear *lin = &c->lin[a->proj];
            wv[r] = lin->w;
            bvv[r] = lin->b;
            col[r] = a->role[r] * d;
            stride[r] = 3 * d;
        } else {
            const ox_linear *lin = &c->lin[a->role[r] - 3];
            if (lin->x != a->x)
                return ox_fail_node(c, lin->node, SF_ERR_UNSUPPORTED,
                                    "a projection of another input than the rest of the "
                                    "attention recognized at node #%d (cross-attention)",
                                    a->node);
            wv[r] = lin->w;
            bvv[r] = lin->b;
            col[r] = 0;
            stride[r] = d;
        }
    }
    int has_bias = bv >= 0 || bvv[0] >= 0 || bvv[1] >= 0 || bvv[2] >= 0;
    const float *B[3] = {NULL, NULL, NULL}, *Bo = NULL;
    sf_tensor_ref in;
    c->cur_node = a->node;
    if ((st = ox_natural(c, a->x, &in)) != SF_OK) return st;
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = d;
    p.attention.heads = a->heads;
    p.attention.causal = a->causal;
    p.attention.dropout = a->dropout;
    p.attention.bias = has_bias;
    int id = ox_add_op(c, SF_OP_ATTENTION, &p, &in, 1, NULL);
    c->cur_node = saved;
    if (id < 0) return (sf_status)id;
    int ok;
    const float *W[3], *Wo;
    for (int r = 0; r < 3; r++) {
        W[r] = ox_weight(c, wv[r], "projection", &ok);
        if (!ok) return c->err->code;
    }
    Wo = ox_weight(c, a->wo, "output projection", &ok);
    if (!ok) return c->err->code;
    int have = W[0] && W[1] && W[2];
    for (int r = 0; r < 3; r++)
        if (bvv[r] >= 0) {
            B[r] = ox_weight(c, bvv[r], "projection bias", &ok);
            if (!ok) return c->err->code;
            have = have && B[r];
        }
    if (bv >= 0) {
        Bo = ox_weight(c, bv, "output bias", &ok);
        if (!ok) return c->err->code;
        have = have && Bo;
    }
    float *tmp = NULL;
    if (c->want_weights && have && Wo) {
        tmp = malloc((size_t)(3 * d * d + 3 * d) * sizeof *tmp);
        if (!tmp) return ox_oom(c);
        /* row r*D + j of in_proj_weight is column col + j of role r's (D, stride) MatMul */
        for (int r = 0; r < 3; r++)
            for (int64_t j = 0; j < d; j++)
                for (int64_t i = 0; i < d; i++)
                    tmp[(r * d + j) * d + i] = W[r][i * stride[r] + col[r] + j];
    }
    st = ox_put_param(c, id, "in_proj_weight", tmp, 3 * d * d);
    if (st == SF_OK && tmp)
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < d; j++) tmp[j * d + i] = Wo[i * d + j];
    if (st == SF_OK) st = ox_put_param(c, id, "out_proj.weight", tmp, d * d);
    if (st == SF_OK && has_bias) {
        int all = 1;
        for (int r = 0; r < 3; r++) all = all && bvv[r] >= 0;
        if (tmp) {
            for (int r = 0; r < 3; r++)
                for (int64_t j = 0; j < d; j++) tmp[r * d + j] = B[r] ? B[r][col[r] + j] : 0.0f;
            st = ox_put_param(c, id, "in_proj_bias", tmp, 3 * d);
        } else if (all) {
            st = ox_put_param(c, id, "in_proj_bias", NULL, 3 * d);
        } else {
            st = ox_fill_param(c, id, "in_proj_bias", 0.0f);
        }
        if (st == SF_OK)
            st = bv >= 0 ? ox_put_param(c, id, "out_proj.bias", Bo, d)
                         : ox_fill_param(c, id, "out_proj.bias", 0.0f);
    }
    free(tmp);
    if (st != SF_OK) return st;
    a = &c->attn[rec];
    a->emitted = id;
    a->out = (sf_tensor_ref){id, 0};
    int64_t shape[3] = {a->n, a->t, d};
    int8_t map[3] = {0, 1, 2};
    ox_set_act(c, o, a->out, 3, shape, map, 0);
    return SF_OK;
}

static int bf_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st, int v) {
    int rec = c->vals[v].rec;
    ox_attn *a = &c->attn[rec];
    const ox_attn_val av = c->attn_val[v];
    const char *t = n->op_type;
    int o = ox_out(c, n, 0);
    int64_t hd = a->heads ? a->d / a->heads : 0;

    if (av.stage == AT_OUT_M) { /* the output projection's bias, or it is done */
        int other = ox_in(c, n, 0) == v ? ox_in(c, n, 1) : ox_in(c, n, 0);
        const ox_value *B = other > 0 ? &c->vals[other] : NULL;
        int vec = !strcmp(t, "Add") && n->n_input == 2 && B && B->kind == OX_CONST &&
                  !B->is_index && B->numel == a->d && c->vals[v].uses == 1;
        for (int k = 0; vec && k + 1 < B->ndim; k++) vec = B->d[k] == 1;
        if (vec) TAKE(bf_emit(c, rec, other, o));
        return 0; /* any other reader makes the operator without that bias (ox_attn_force) */
    }
    if (!strcmp(t, "Reshape") && ox_in(c, n, 0) == v) {
        int64_t s[OX_MAX_RANK];
        int cnt;
        sf_status r = reshape_to(c, n, v, s, &cnt);
        if (r != SF_OK) TAKE(r);
        if (av.stage == AT_PART && heads_shape(a, s, cnt)) {
            a->heads = s[2];
            set_stage4(c, o, rec, AT_HEADS, av.part, -1, NULL, 4, s);
            set_scale(c, o, av.scale);
            TAKE(SF_OK);
        }
        if (av.stage == AT_CTX && bf_perm_is(av.perm, BF_N, BF_T, BF_H, BF_E) && cnt == 3 &&
            s[0] == a->n && s[1] == a->t && s[2] == a->d) {
            set_stage4(c, o, rec, AT_CTX_M, 0, -1, NULL, 3, s);
            TAKE(SF_OK);
        }
        TAKE(ox_attn_refuse(c, v));
    }
    if (!strcmp(t, "Transpose") && (av.stage == AT_HEADS || av.stage == AT_CTX)) {
        int64_t q[OX_MAX_RANK];
        int cnt, p[4];
        sf_status r = ox_attr_ints(c, n, "perm", q, OX_MAX_RANK, &cnt);
        if (r != SF_OK) TAKE(r);
        if (cnt != 4) TAKE(ox_attn_refuse(c, v));
        int seen = 0;
        for (int k = 0; k < 4; k++) {
            if (q[k] < 0 || q[k] > 3 || (seen & (1 << q[k]))) TAKE(ox_attn_refuse(c, v));
            seen |= 1 << q[k];
            p[k] = av.perm[q[k]];
        }
        if (p[0] != BF_N) TAKE(ox_attn_refuse(c, v)); /* the batch stays first */
        int64_t shape[4];
        for (int k = 0; k < 4; k++) shape[k] = c->vals[v].d[q[k]];
        set_stage4(c, o, rec, av.stage, av.part, av.lin, p, 4, shape);
        set_scale(c, o, av.scale);
        TAKE(SF_OK);
    }
    /* the scaling: constant factors on q, k or the scores */
    if ((!strcmp(t, "Div") || !strcmp(t, "Mul")) &&
        (av.stage == AT_HEADS || av.stage == AT_SCORES) && n->n_input == 2 &&
        (!strcmp(t, "Mul") || ox_in(c, n, 0) == v)) {
        int other = ox_in(c, n, 0) == v ? ox_in(c, n, 1) : ox_in(c, n, 0);
        const ox_value *k = other > 0 ? &c->vals[other] : NULL;
        if (!k || k->kind != OX_CONST || k->numel != 1) TAKE(ox_attn_refuse(c, v));
        double x = k->is_index ? (double)k->i[0] : (double)k->f[0];
        if (!(x > 0) || !isfinite(x))
            TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                         "attention scores scaled by %g: soapflow's attention scales them by "
                         "1/sqrt(head_dim)",
                         x));
        set_stage4(c, o, rec, av.stage, av.part, av.lin, av.perm, c->vals[v].ndim, c->vals[v].d);
        set_scale(c, o, av.scale * (!strcmp(t, "Div") ? 1.0 / x : x));
        TAKE(SF_OK);
    }
    if (!strcmp(t, "MatMul")) {
        int x = ox_in(c, n, 0), y = ox_in(c, n, 1);
        if (av.stage == AT_CTX_M && x == v) { /* the output projection */
            const ox_value *W = &c->vals[y];
            if ((W->kind != OX_CONST && W->kind != OX_WEIGHT) || W->is_index || W->ndim != 2 ||
                W->d[0] != a->d || W->d[1] != a->d)
                TAKE(
                    ox_fail(c, SF_ERR_UNSUPPORTED,
                            "the attention recognized at node #%d ends in a product with '%.100s', "
                            "not a constant %lldx%lld output projection",
                            a->node, W->name, (long long)a->d, (long long)a->d));
            a->wo = y;
            a->out_node = c->cur_node;
            int64_t shape[3] = {a->n, a->t, a->d};
            set_stage4(c, o, rec, AT_OUT_M, 0, -1, NULL, 3, shape);
            TAKE(SF_OK);
        }
        if (!is_attn(c, x) || !is_attn(c, y) || c->vals[x].rec != rec || c->vals[y].rec != rec)
            TAKE(ox_attn_refuse(c, v));
        ox_attn_val ax = c->attn_val[x], ay = c->attn_val[y];
        if (ax.stage == AT_HEADS && bf_perm_is(ax.perm, BF_N, BF_H, BF_T, BF_E) &&
            ay.stage == AT_HEADS && bf_perm_is(ay.perm, BF_N, BF_H, BF_E, BF_T)) {
            if (!bf_assign(a, 0, &ax) || !bf_assign(a, 1, &ay)) TAKE(ox_attn_refuse(c, v));
            int64_t shape[4] = {a->n, a->heads, a->t, a->t};
            set_stage4(c, o, rec, AT_SCORES, 0, -1, NULL, 4, shape);
            set_scale(c, o, ax.scale * ay.scale);
            TAKE(SF_OK);
        }
        if (ax.stage == AT_PROBS && ay.stage == AT_HEADS &&
            bf_perm_is(ay.perm, BF_N, BF_H, BF_T, BF_E)) {
            if (!bf_assign(a, 2, &ay)) TAKE(ox_attn_refuse(c, y));
            if (ay.scale != 1.0)
                TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                             "the values of the attention recognized at node #%d are scaled by "
                             "%g: soapflow's attention does not scale them",
                             a->node, ay.scale));
            int p[4] = {BF_N, BF_H, BF_T, BF_E};
            int64_t shape[4] = {a->n, a->heads, a->t, hd};
            set_stage4(c, o, rec, AT_CTX, 0, -1, p, 4, shape);
            TAKE(SF_OK);
        }
        TAKE(ox_attn_refuse(c, v));
    }
    if (!strcmp(t, "Where") && av.stage == AT_SCORES && n->n_input == 3) {
        int cv = ox_in(c, n, 0), xv = ox_in(c, n, 1), yv = ox_in(c, n, 2);
        int fill = xv == v ? yv : xv;
        if (cv == v || (xv == v) == (yv == v)) TAKE(ox_attn_refuse(c, v));
        if (ox_const_data(c, cv) != SF_OK || ox_const_data(c, fill) != SF_OK) TAKE(c->err->code);
        a = &c->attn[rec];
        /* masked_fill(mask, -inf): the fill where the condition holds */
        if (a->causal || !mask_fill(&c->vals[fill]) || !causal_cond(&c->vals[cv], a->t, xv == fill))
            TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                         "a mask on the scores of the attention recognized at node #%d that is "
                         "not causal (soapflow's attention takes none, or the causal one: -inf "
                         "exactly where key > query)",
                         a->node));
        a->causal = 1;
        set_stage4(c, o, rec, AT_SCORES, 0, -1, NULL, 4, c->vals[v].d);
        set_scale(c, o, av.scale);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Add") && av.stage == AT_SCORES) {
        int other = ox_in(c, n, 0) == v ? ox_in(c, n, 1) : ox_in(c, n, 0);
        if (ox_const_data(c, other) != SF_OK) TAKE(c->err->code);
        a = &c->attn[rec];
        if (a->causal || !causal_mask(&c->vals[other], a->t)) TAKE(ox_attn_refuse(c, v));
        a->causal = 1;
        set_stage4(c, o, rec, AT_SCORES, 0, -1, NULL, 4, c->vals[v].d);
        set_scale(c, o, av.scale);
        TAKE(SF_OK);
    }
    if ((!strcmp(t, "Softmax") && av.stage == AT_SCORES) ||
        (!strcmp(t, "Dropout") && av.stage == AT_PROBS)) {
        if (!strcmp(t, "Softmax")) {
            int64_t axis;
            sf_status r = ox_attr_int(c, n, "axis", c->opset < 13 ? 1 : -1, &axis);
            if (r != SF_OK) TAKE(r);
            if (axis != -1 && axis != 3) TAKE(ox_attn_refuse(c, v));
            double want = 1.0 / sqrt((double)hd);
            if (fabs(av.scale - want) > 1e-3 * want)
                TAKE(ox_fail(c, SF_ERR_UNSUPPORTED,
                             "attention scores scaled by %g, not 1/sqrt(%lld): soapflow's "
                             "attention is scaled dot-product attention",
                             av.scale, (long long)hd));
        }
        if (!strcmp(t, "Dropout")) {
            sf_status r = probs_dropout(c, n, rec);
            if (r != SF_OK) TAKE(r);
        }
        for (size_t k = 1; k < n->n_output; k++) /* a dropout's mask */
            if (ox_out(c, n, (int)k) > 0) c->vals[ox_out(c, n, (int)k)].kind = OX_NONE;
        set_stage4(c, o, rec, AT_PROBS, 0, -1, NULL, 4, c->vals[v].d);
        TAKE(SF_OK);
    }
    TAKE(ox_attn_refuse(c, v));
}

/* ox_act's way out of an attention stage: the output projection without a bias
 * becomes the operator; any other stage is refused. */
sf_status ox_attn_force(ox_ctx *c, int v) {
    const ox_attn *a = &c->attn[c->vals[v].rec];
    if (a->form == OX_ATTN_BF && c->attn_val[v].stage == AT_OUT_M)
        return bf_emit(c, c->vals[v].rec, -1, v);
    return ox_attn_refuse(c, v);
}
