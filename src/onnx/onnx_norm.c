/*
 * onnx_norm.c - layer normalization and GELU as torch.onnx.export writes them
 * before ONNX had operators for them, recognized as soapflow's layernorm and
 * gelu.
 *
 * LayerNormalization is an ONNX operator from opset 17 only, and Gelu from 20,
 * so an export at torch's default opset (14) spells them out. Torch 1.13 writes
 *
 *   nn.LayerNorm     m = ReduceMean(x, -1); d = x - m; v = ReduceMean(d ^ 2, -1);
 *                    y = d / Sqrt(v + eps)  [* weight + bias]
 *   GELU (exact)     y = x * (Erf(x / sqrt 2) + 1) * 0.5
 *   GELU (tanh)      F.gelu(x, approximate="tanh"):
 *                    y = 0.5 * (x * (1 + Tanh(k * (x + 0.044715 * (x * (x * x))))))
 *                    Hugging Face's gelu_new, written out in torch:
 *                    y = (x * 0.5) * (Tanh((x + Pow(x, 3) * 0.044715) * k) + 1)
 *                    with k = sqrt(2 / pi), the products' operands in either order
 *
 * The tanh form branches more than one chain of steps can follow (x is read
 * four times), so it is matched on the graph first (gt_match_final, from the
 * last Mul back to x: every inner value read once, by the next step) and then
 * followed node by node like the others: its first step on x starts it (a
 * second step on x joins the same record, found by x and the final value, held
 * in the record's w), every step must be one of the match's nodes, and the last
 * one checks the constants (which are folded by then) and makes a gelu with
 * approximate "tanh".
 *
 * Each step is a PEND PAT value that knows its stage, as in onnx_attn.c: the
 * pattern starts at the ReduceMean (or the division by sqrt 2), moves on only
 * when the next node is the next step on the same x, and makes the operator at
 * its last step (the Add of the bias, the Mul by 0.5). A layer normalization
 * read before its scale (no elementwise_affine) becomes a layernorm without
 * affine parameters; read after the scale and before the bias, one whose bias is
 * zero. Anything else that reads a step is refused, naming the node the pattern
 * started at. The constants are checked (sqrt 2 and 0.5 to 1e-4, the exponent
 * 2, a positive epsilon, weights of the normalized width).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

#define M_PI_VALUE 3.14159265358979323846

enum {
    LN_MEAN = 1, /* ReduceMean(x) */
    LN_CENT,     /* x - mean */
    LN_SQ,       /* (x - mean) ^ 2 */
    LN_VAR,      /* ReduceMean of it */
    LN_VAREPS,   /* + eps */
    LN_STD,      /* Sqrt */
    LN_NORM,     /* (x - mean) / std: a layernorm without affine parameters */
    LN_SCALED,   /* * weight */
    GELU_DIV,    /* x / sqrt 2 */
    GELU_ERF,    /* Erf */
    GELU_ERF1,   /* + 1 */
    GELU_MUL,    /* x * (...) */
    GELU_TANH,   /* a step of GELU's tanh form (gt_match) */
};

static const Onnx__NodeProto *maker(const ox_ctx *c, int v);
static int is_type(const Onnx__NodeProto *n, const char *t);

#define TAKE(expr)                                                                                 \
    do {                                                                                           \
        *st = (expr);                                                                              \
        return 1;                                                                                  \
    } while (0)

static int is_pat(const ox_ctx *c, int v) {
    return v > 0 && c->vals[v].kind == OX_PEND && c->vals[v].pend == OX_PEND_PAT;
}

static void set_stage(ox_ctx *c, int o, int rec, int stage, const ox_value *like, int64_t last) {
    if (o < 0) return;
    ox_value *x = &c->vals[o];
    x->kind = OX_PEND;
    x->pend = OX_PEND_PAT;
    x->rec = rec;
    x->ndim = like->ndim;
    for (int k = 0; k < like->ndim; k++) x->d[k] = like->d[k];
    if (last && x->ndim) x->d[x->ndim - 1] = last;
    c->pat_stage[o] = stage;
}

/* A constant scalar in v, or NaN. */
static double scalar(ox_ctx *c, int v) {
    if (v <= 0 || c->vals[v].kind != OX_CONST || ox_const_data(c, v) != SF_OK) return NAN;
    const ox_value *x = &c->vals[v];
    if (x->numel != 1) return NAN;
    return x->is_index ? (double)x->i[0] : (double)x->f[0];
}

static int near(double a, double b) { return fabs(a - b) <= 1e-4 * fabs(b); }

/* A ReduceMean over the last axis, keeping it. */
static int mean_of_last(ox_ctx *c, const Onnx__NodeProto *n, int rank) {
    int64_t axes[OX_MAX_RANK], keep;
    int cnt;
    if (ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, &cnt) != SF_OK) return -1;
    if (ox_attr_int(c, n, "keepdims", 1, &keep) != SF_OK) return -1;
    return cnt == 1 && (axes[0] == -1 || axes[0] == rank - 1) && keep ? 1 : 0;
}

static sf_status new_rec(ox_ctx *c, int x, int *rec) {
    if (c->n_pat == c->cap_pat) {
        int cap = c->cap_pat ? c->cap_pat * 2 : 8;
        ox_pat *np = realloc(c->pat, (size_t)cap * sizeof *np);
        if (!np) return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
        c->pat = np;
        c->cap_pat = cap;
    }
    *rec = c->n_pat++;
    ox_pat *p = &c->pat[*rec];
    memset(p, 0, sizeof *p);
    p->x = x;
    p->node = c->cur_node;
    p->w = -1;
    return SF_OK;
}

sf_status ox_pat_refuse(ox_ctx *c, int v) {
    const ox_pat *p = &c->pat[c->vals[v].rec];
    int stage = c->pat_stage[v];
    char where[240];
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "reads '%.100s', a step of the %s that starts at %s; soapflow takes torch's "
                   "export of it as one operator, and the graph departs from it here",
                   c->vals[v].name, stage >= GELU_DIV ? "GELU" : "layer normalization",
                   ox_node_str(c, p->node, where, sizeof where));
}

/* The layernorm of pattern rec, from value v (NORM, SCALED) or its bias b. */
static sf_status emit_ln(ox_ctx *c, int v, int rec, int bias) {
    ox_pat *p = &c->pat[rec];
    int x = p->x;
    const ox_value *X = &c->vals[x];
    const sf_shape *xs = &sf_graph_op(c->g, X->ref.op)->out_shapes[X->ref.out];
    sf_tensor_ref in = X->ref;
    int natural = 0;
    if (X->map[X->ndim - 1] != xs->ndim - 1) {
        sf_status st = ox_natural(c, x, &in);
        if (st != SF_OK) return st;
        natural = 1;
    }
    X = &c->vals[x];
    int64_t d = X->d[X->ndim - 1];
    int affine = c->pat_stage[v] == LN_SCALED || bias > 0;
    sf_op_params prm;
    sf_op_params_default(SF_OP_LAYERNORM, &prm);
    prm.norm.eps = p->eps;
    prm.norm.affine = affine;
    int id = ox_add_op(c, SF_OP_LAYERNORM, &prm, &in, 1, affine ? c->vals[p->w].name : NULL);
    if (id < 0) return (sf_status)id;
    sf_status st = SF_OK;
    if (affine) {
        int ok;
        const float *w = ox_weight(c, p->w, "scale", &ok);
        if (!ok) return c->err->code;
        st = ox_put_param(c, id, "weight", w, d);
        if (st == SF_OK && bias > 0) {
            const float *b = ox_weight(c, bias, "bias", &ok);
            if (!ok) return c->err->code;
            st = ox_put_param(c, id, "bias", b, d);
        } else if (st == SF_OK) {
            st = ox_fill_param(c, id, "bias", 0.0f); /* no bias in the file */
        }
    }
    if (st != SF_OK) return st;
    X = &c->vals[x];
    int8_t map[OX_MAX_RANK];
    for (int k = 0; k < X->ndim; k++) map[k] = natural ? (int8_t)k : X->map[k];
    int64_t dims[OX_MAX_RANK];
    for (int k = 0; k < X->ndim; k++) dims[k] = X->d[k];
    ox_set_act(c, v, (sf_tensor_ref){id, 0}, X->ndim, dims, map, 0);
    return SF_OK;
}

sf_status ox_pat_force(ox_ctx *c, int v) {
    int stage = c->pat_stage[v];
    if (stage == LN_NORM || stage == LN_SCALED) return emit_ln(c, v, c->vals[v].rec, -1);
    return ox_pat_refuse(c, v);
}

static int centred_on(const ox_ctx *c, int x, int m);

/* x is an activation (made one: an INPUT, a pending linear layer). */
static int act_value(ox_ctx *c, int x, sf_status *st) {
    if (x <= 0) return 0;
    ox_kind k = c->vals[x].kind;
    if (k == OX_INPUT || (k == OX_PEND && c->vals[x].pend == OX_PEND_LINEAR)) {
        *st = ox_act(c, x);
        return *st == SF_OK;
    }
    return k == OX_ACT && !c->vals[x].is_index;
}

/* ---- GELU's tanh form: matched on the graph ------------------------------------ */

#define GT_MAX_NODES 12
#define GT_MAX_CONSTS 6

/* The nodes and constants of one tanh-form GELU of x. */
typedef struct gt_match {
    int x;
    int n_nodes, nodes[GT_MAX_NODES];
    int n_consts, consts[GT_MAX_CONSTS];
    double want[GT_MAX_CONSTS];
} gt_match;

/* A constant operand, folded or not yet (an initializer, a Constant node's output). */
static int gt_static(const ox_ctx *c, int v) {
    return v > 0 && (c->vals[v].kind == OX_CONST || is_type(maker(c, v), "Constant"));
}

static int gt_const(const ox_ctx *c, gt_match *m, int v, double want) {
    if (!gt_static(c, v) || m->n_consts == GT_MAX_CONSTS) return 0;
    m->consts[m->n_consts] = v;
    m->want[m->n_consts++] = want;
    return 1;
}

/* v made by a node of type t with n_in inputs and read once: that node, recorded. */
static const Onnx__NodeProto *gt_step(const ox_ctx *c, gt_match *m, int v, const char *t,
                                      size_t n_in) {
    const Onnx__NodeProto *n = maker(c, v);
    if (!is_type(n, t) || n->n_input != n_in || c->vals[v].uses != 1 || m->n_nodes == GT_MAX_NODES)
        return NULL;
    m->nodes[m->n_nodes++] = c->vals[v].producer;
    return n;
}

/* Mul node n of the constant want and something else, into *u. */
static int gt_scaled(const ox_ctx *c, gt_match *m, const Onnx__NodeProto *n, double want, int *u) {
    for (int s = 0; n && s < 2; s++)
        if (gt_const(c, m, ox_in(c, n, s), want)) {
            *u = ox_in(c, n, 1 - s);
            return 1;
        }
    return 0;
}

/* v = x^3: Pow(x, 3), x * (x * x) or (x * x) * x. */
static int gt_cube(const ox_ctx *c, gt_match *m, int v, int x) {
    const Onnx__NodeProto *p = maker(c, v);
    if (is_type(p, "Pow"))
        return gt_step(c, m, v, "Pow", 2) && ox_in(c, p, 0) == x &&
               gt_const(c, m, ox_in(c, p, 1), 3);
    if (!gt_step(c, m, v, "Mul", 2)) return 0;
    for (int s = 0; s < 2; s++) {
        int sq = ox_in(c, p, 1 - s);
        const Onnx__NodeProto *q = maker(c, sq);
        if (ox_in(c, p, s) == x && is_type(q, "Mul") && q->n_input == 2 && ox_in(c, q, 0) == x &&
            ox_in(c, q, 1) == x && gt_step(c, m, sq, "Mul", 2))
            return 1;
    }
    return 0;
}

/* v = 1 + Tanh(k * (x + 0.044715 * x^3)), x into *x. */
static int gt_onep(const ox_ctx *c, gt_match *m, int v, int *x) {
    const Onnx__NodeProto *a = gt_step(c, m, v, "Add", 2);
    if (!a) return 0;
    int nn = m->n_nodes, nc = m->n_consts;
    for (int s = 0; s < 2; s++) {
        m->n_nodes = nn, m->n_consts = nc;
        int inner, sum;
        const Onnx__NodeProto *t = gt_const(c, m, ox_in(c, a, s), 1.0)
                                       ? gt_step(c, m, ox_in(c, a, 1 - s), "Tanh", 1)
                                       : NULL;
        if (!t ||
            !gt_scaled(c, m, gt_step(c, m, ox_in(c, t, 0), "Mul", 2), sqrt(2 / M_PI_VALUE), &inner))
            continue;
        const Onnx__NodeProto *add = gt_step(c, m, inner, "Add", 2);
        int n2 = m->n_nodes, c2 = m->n_consts;
        for (int o = 0; add && o < 2; o++) {
            m->n_nodes = n2, m->n_consts = c2;
            int xx = ox_in(c, add, o);
            if (gt_scaled(c, m, gt_step(c, m, ox_in(c, add, 1 - o), "Mul", 2), 0.044715, &sum) &&
                gt_cube(c, m, sum, xx)) {
                *x = xx;
                return 1;
            }
        }
    }
    return 0;
}

/* Node f (a Mul) is the last step of a tanh-form GELU: its match into m. */
static int gt_match_final(const ox_ctx *c, int f, gt_match *m) {
    if (f < 0 || f >= (int)c->graph->n_node) return 0;
    const Onnx__NodeProto *F = c->graph->node[f];
    if (!is_type(F, "Mul") || F->n_input != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int p = ox_in(c, F, s), q = ox_in(c, F, 1 - s), x = -1, u = -1;
        /* (x * 0.5) * (1 + tanh(...)) */
        memset(m, 0, sizeof *m);
        m->nodes[m->n_nodes++] = f;
        if (gt_onep(c, m, p, &x) && gt_scaled(c, m, gt_step(c, m, q, "Mul", 2), 0.5, &u) &&
            u == x && !gt_static(c, x)) {
            m->x = x;
            return 1;
        }
        /* 0.5 * (x * (1 + tanh(...))) */
        memset(m, 0, sizeof *m);
        m->nodes[m->n_nodes++] = f;
        const Onnx__NodeProto *h = gt_const(c, m, q, 0.5) ? gt_step(c, m, p, "Mul", 2) : NULL;
        int nn = m->n_nodes, nc = m->n_consts;
        for (int o = 0; h && o < 2; o++) {
            m->n_nodes = nn, m->n_consts = nc;
            if (gt_onep(c, m, ox_in(c, h, 1 - o), &x) && ox_in(c, h, o) == x && !gt_static(c, x)) {
                m->x = x;
                return 1;
            }
        }
    }
    return 0;
}

static int gt_has(const gt_match *m, int node) {
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == node) return 1;
    return 0;
}

/* A tanh-form GELU that node (an index) is a step of, into m. */
static int gt_find(const ox_ctx *c, int node, gt_match *m) {
    for (int f = 0; f < (int)c->graph->n_node; f++)
        if (is_type(c->graph->node[f], "Mul") && gt_match_final(c, f, m) && gt_has(m, node))
            return 1;
    return 0;
}

/* A first step on x (x * x, Pow(x, 3), x * 0.5): starts the record, or joins it. */
static int gt_start(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int dyn = -1; /* x * x, Pow(x, k), x * k: one value that is not a constant */
    for (int k = 0; k < (int)n->n_input; k++) {
        int v = ox_in(c, n, k);
        if (gt_static(c, v)) continue;
        if (dyn >= 0 && v != dyn) return 0;
        dyn = v;
    }
    gt_match m;
    if (dyn < 0 || !gt_find(c, c->cur_node, &m) || m.x != dyn) return 0;
    int x = m.x, o = ox_out(c, n, 0), last = ox_out(c, c->graph->node[m.nodes[0]], 0), rec = -1;
    if (!act_value(c, x, st)) return *st != SF_OK;
    for (int r = 0; r < c->n_pat && rec < 0; r++)
        if (c->pat[r].x == x && c->pat[r].w == last) rec = r;
    if (rec < 0) {
        if ((*st = new_rec(c, x, &rec)) != SF_OK) return 1;
        c->pat[rec].w = last; /* the value the operator will be */
    }
    set_stage(c, o, rec, GELU_TANH, &c->vals[x], 0);
    TAKE(SF_OK);
}

/* A step reading value v of record rec: one of the match's, the last making the gelu. */
static sf_status gt_next(ox_ctx *c, const Onnx__NodeProto *n, int v, int rec) {
    ox_pat *p = &c->pat[rec];
    gt_match m;
    int o = ox_out(c, n, 0);
    if (!gt_match_final(c, c->vals[p->w].producer, &m) || m.x != p->x || !gt_has(&m, c->cur_node))
        return ox_pat_refuse(c, v);
    const ox_value *X = &c->vals[p->x];
    if (o != p->w) {
        set_stage(c, o, rec, GELU_TANH, X, 0);
        return SF_OK;
    }
    for (int i = 0; i < m.n_consts; i++) {
        double s = scalar(c, m.consts[i]);
        if (isnan(s) || !near(s, m.want[i])) {
            char where[240];
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "the tanh form of GELU that starts at %s has %g where torch's has %g",
                           ox_node_str(c, p->node, where, sizeof where), s, m.want[i]);
        }
    }
    sf_op_params prm;
    sf_op_params_default(SF_OP_GELU, &prm);
    prm.gelu.approximate = SF_GELU_TANH;
    sf_tensor_ref in = X->ref;
    int id = ox_add_op(c, SF_OP_GELU, &prm, &in, 1, NULL);
    if (id < 0) return (sf_status)id;
    X = &c->vals[p->x];
    ox_set_act(c, o, (sf_tensor_ref){id, 0}, X->ndim, X->d, X->map, 0);
    return SF_OK;
}

/* A start: ReduceMean(x, -1) or x / sqrt 2 (x * 1/sqrt 2). */
static int start(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    const char *t = n->op_type;
    int x = ox_in(c, n, 0), o = ox_out(c, n, 0), rec;
    *st = SF_OK;
    if ((!strcmp(t, "Mul") || !strcmp(t, "Pow")) && gt_start(c, n, st)) return 1;
    if (!strcmp(t, "ReduceMean")) {
        if (!act_value(c, x, st)) return *st != SF_OK;
        int last = mean_of_last(c, n, c->vals[x].ndim);
        if (last < 0) TAKE(c->err->code);
        /* a mean that no Sub(x, mean) centres x on is a mean (reduce_mean) */
        if (!last || c->opset >= 18 || !centred_on(c, x, o)) return 0;
        if ((*st = new_rec(c, x, &rec)) != SF_OK) return 1;
        set_stage(c, o, rec, LN_MEAN, &c->vals[x], 1);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Div") || !strcmp(t, "Mul")) {
        int k = ox_in(c, n, 1);
        double s = scalar(c, k);
        if (!strcmp(t, "Mul") && !isnan(s)) s = 1.0 / s;
        if (isnan(s) || !near(s, sqrt(2.0))) return 0;
        if (!act_value(c, x, st)) return *st != SF_OK;
        if ((*st = new_rec(c, x, &rec)) != SF_OK) return 1;
        set_stage(c, o, rec, GELU_DIV, &c->vals[x], 0);
        TAKE(SF_OK);
    }
    return 0;
}

int ox_pat_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st) {
    int v = -1;
    for (size_t k = 0; k < n->n_input && v < 0; k++)
        if (is_pat(c, ox_in(c, n, (int)k))) v = ox_in(c, n, (int)k);
    if (v < 0) return start(c, n, st);
    int rec = c->vals[v].rec, stage = c->pat_stage[v];
    const char *t = n->op_type;
    int a = ox_in(c, n, 0), b = ox_in(c, n, 1), o = ox_out(c, n, 0);
    int other = a == v ? b : a;
    int same_rec = is_pat(c, other) && c->vals[other].rec == rec;
    const ox_value *X = &c->vals[c->pat[rec].x];
    int64_t d = X->ndim ? X->d[X->ndim - 1] : 0;
    ox_pat *p = &c->pat[rec];

    if (!strcmp(t, "Sub") && stage == LN_MEAN && b == v && a == p->x) {
        set_stage(c, o, rec, LN_CENT, X, 0);
        TAKE(SF_OK);
    }
    if (stage == LN_CENT && ((!strcmp(t, "Pow") && a == v && scalar(c, b) == 2.0) ||
                             (!strcmp(t, "Mul") && a == v && b == v))) {
        set_stage(c, o, rec, LN_SQ, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "ReduceMean") && stage == LN_SQ) {
        int last = mean_of_last(c, n, X->ndim);
        if (last < 0) TAKE(c->err->code);
        if (last) {
            set_stage(c, o, rec, LN_VAR, X, 1);
            TAKE(SF_OK);
        }
    }
    if (!strcmp(t, "Add") && stage == LN_VAR) {
        double eps = scalar(c, other);
        if (eps > 0 && eps < 1) {
            p->eps = eps;
            set_stage(c, o, rec, LN_VAREPS, X, 1);
            TAKE(SF_OK);
        }
    }
    if (!strcmp(t, "Sqrt") && stage == LN_VAREPS) {
        set_stage(c, o, rec, LN_STD, X, 1);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Div") && stage == LN_CENT && a == v && same_rec && c->pat_stage[b] == LN_STD) {
        set_stage(c, o, rec, LN_NORM, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Mul") && stage == LN_NORM && c->vals[other].kind == OX_CONST &&
        c->vals[other].numel == d && !c->vals[other].is_index && c->vals[v].uses == 1) {
        p->w = other;
        set_stage(c, o, rec, LN_SCALED, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Add") && stage == LN_SCALED && c->vals[other].kind == OX_CONST &&
        c->vals[other].numel == d && !c->vals[other].is_index && c->vals[v].uses == 1) {
        if (o < 0) TAKE(SF_OK);
        set_stage(c, o, rec, LN_SCALED, X, 0); /* the output holds the operator below */
        TAKE(emit_ln(c, o, rec, other));
    }
    if (!strcmp(t, "Erf") && stage == GELU_DIV) {
        set_stage(c, o, rec, GELU_ERF, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Add") && stage == GELU_ERF && scalar(c, other) == 1.0) {
        set_stage(c, o, rec, GELU_ERF1, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Mul") && stage == GELU_ERF1 && other == p->x) {
        set_stage(c, o, rec, GELU_MUL, X, 0);
        TAKE(SF_OK);
    }
    if (!strcmp(t, "Mul") && stage == GELU_MUL && near(scalar(c, other), 0.5)) {
        sf_op_params prm;
        sf_op_params_default(SF_OP_GELU, &prm);
        sf_tensor_ref in = X->ref;
        int id = ox_add_op(c, SF_OP_GELU, &prm, &in, 1, NULL);
        if (id < 0) TAKE((sf_status)id);
        X = &c->vals[c->pat[rec].x];
        ox_set_act(c, o, (sf_tensor_ref){id, 0}, X->ndim, X->d, X->map, 0);
        TAKE(SF_OK);
    }
    if (stage == GELU_TANH) TAKE(gt_next(c, n, v, rec));
    if (stage == LN_NORM || stage == LN_SCALED) return 0; /* a layernorm, read as one */
    TAKE(ox_pat_refuse(c, v));
}

/* ---- before the import: could a node be a step? ---------------------------------- */

/* The node that makes value v, or NULL (a graph input, an initializer). */
static const Onnx__NodeProto *maker(const ox_ctx *c, int v) {
    if (v <= 0 || c->vals[v].producer < 0) return NULL;
    return c->graph->node[c->vals[v].producer];
}

static int is_type(const Onnx__NodeProto *n, const char *t) {
    return n && n->op_type && !strcmp(n->op_type, t);
}

/* Whether some node is Sub(x, m): a layer normalization's centring on mean m. */
static int centred_on(const ox_ctx *c, int x, int m) {
    for (size_t i = 0; i < c->graph->n_node; i++) {
        const Onnx__NodeProto *s = c->graph->node[i];
        if (is_type(s, "Sub") && s->n_input == 2 && ox_in(c, s, 0) == x && ox_in(c, s, 1) == m)
            return 1;
    }
    return 0;
}

int ox_pat_may_take(const ox_ctx *c, const Onnx__NodeProto *n) {
    const char *t = n->op_type;
    int a = ox_in(c, n, 0), b = n->n_input > 1 ? ox_in(c, n, 1) : -1;
    const Onnx__NodeProto *pa = maker(c, a), *pb = maker(c, b);
    if (!strcmp(t, "Erf")) /* GELU: Erf(x / sqrt 2), the division or Mul by 1 / sqrt 2 */
        return is_type(pa, "Div") || is_type(pa, "Mul");
    if (!strcmp(t, "Sub")) /* x - ReduceMean(x) */
        return is_type(pb, "ReduceMean") && pb->n_input > 0 && ox_in(c, pb, 0) == a;
    if (!strcmp(t, "Pow")) { /* (x - mean) ^ 2, or x^3 in GELU's tanh form */
        gt_match m;
        int self = -1;
        for (size_t i = 0; i < c->graph->n_node && self < 0; i++)
            if (c->graph->node[i] == n) self = (int)i;
        return is_type(pa, "Sub") || gt_find(c, self, &m);
    }
    if (!strcmp(t, "Sqrt")) { /* Sqrt(ReduceMean(...) + eps) */
        if (!is_type(pa, "Add")) return 0;
        for (size_t k = 0; k < pa->n_input; k++)
            if (is_type(maker(c, ox_in(c, pa, (int)k)), "ReduceMean")) return 1;
        return 0;
    }
    if (!strcmp(t, "Where")) { /* an attention's causal mask on its scores (onnx_attn.c) */
        for (int k = 1; k <= 2 && k < (int)n->n_input; k++) {
            const Onnx__NodeProto *p = maker(c, ox_in(c, n, k));
            if (is_type(p, "MatMul") || is_type(p, "Mul") || is_type(p, "Div")) return 1;
        }
        return 0;
    }
    if (!strcmp(t, "ReduceMean")) /* the variance's mean, or the mean x is centred on */
        return is_type(pa, "Pow") || is_type(pa, "Mul") || centred_on(c, a, ox_out(c, n, 0));
    return 1;
}
