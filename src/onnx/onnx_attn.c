/*
 * onnx_attn.c - torch's nn.MultiheadAttention, as torch.onnx.export writes it,
 * recognized as one soapflow attention operator.
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
 *   Softmax(-1)                 PROBS (a Dropout after it is dropped: the operator has none)
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
 * differs, with its name).
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

#define TAKE(expr)                                                                                 \
    do {                                                                                           \
        *st = (expr);                                                                              \
        return 1;                                                                                  \
    } while (0)

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
    if (v < 0) return 0;
    int rec = c->vals[v].rec;
    ox_attn *a = &c->attn[rec];
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
        for (size_t k = 1; k < n->n_output; k++) /* a dropout's mask */
            if (ox_out(c, n, (int)k) > 0) c->vals[ox_out(c, n, (int)k)].kind = OX_NONE;
        set_stage(c, o, rec, AT_PROBS, 0, NULL, 3, c->vals[v].d);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Gemm") && av.stage == AT_CTX_M && ox_in(c, n, 0) == v) TAKE(emit(c, n, rec));
    TAKE(ox_attn_refuse(c, v));
}
