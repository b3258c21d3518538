/*
 * onnx_fold.c - nodes evaluated at import time, on constants.
 *
 * PyTorch's exports compute shapes inside the graph: Shape of a tensor, Gather
 * of one dimension, Unsqueeze, Concat into a target for Reshape; ConstantOfShape
 * for an LSTM's zero initial state; Slice and Mul to cut a packed projection.
 * With the batch bound, every shape is known at import time, so all of it folds
 * into constants here and the operators that read it (Reshape, Slice, LSTM) see
 * plain numbers. The evaluator is small and exact for what shapes need: int64
 * arithmetic on integers (overflow and division by zero are errors, not wrapped),
 * float arithmetic on floats, NumPy broadcasting, and a bound on the size of
 * anything it makes (OX_MAX_FOLD elements), since a hostile file could ask for a
 * ConstantOfShape of 2^40 elements.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        sf_status st_ = (x);                                                                       \
        if (st_ != SF_OK) return st_;                                                              \
    } while (0)

/* A constant input k, or an error. */
static sf_status cin(ox_ctx *c, const Onnx__NodeProto *n, int k, const ox_value **out) {
    int v = ox_in(c, n, k);
    if (v <= 0) return ox_fail(c, SF_ERR_PARSE, "input %d is missing", k);
    if (c->vals[v].kind != OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "input %d ('%.100s') is not a constant", k,
                       c->vals[v].name);
    TRY(ox_const_data(c, v));
    *out = &c->vals[v];
    return SF_OK;
}

static int has_in(const ox_ctx *c, const Onnx__NodeProto *n, int k) {
    int v = ox_in(c, n, k);
    return v > 0 && c->vals[v].kind != OX_ABSENT;
}

static double get_d(const ox_value *x, int64_t k) {
    return x->is_index ? (double)x->i[k] : (double)x->f[k];
}
static int64_t get_i(const ox_value *x, int64_t k) {
    return x->is_index ? x->i[k] : (int64_t)x->f[k];
}

/* A new constant's storage for numel elements (checked against OX_MAX_FOLD
 * unless big). */
static void *alloc_data_big(ox_ctx *c, int64_t numel, int is_index, int big) {
    if (numel > OX_MAX_FOLD && !big) {
        ox_fail(c, SF_ERR_RANGE, "a constant of %lld elements (at most %lld folded)",
                (long long)numel, (long long)OX_MAX_FOLD);
        return NULL;
    }
    void *p = malloc((size_t)(numel ? numel : 1) * (is_index ? sizeof(int64_t) : sizeof(float)));
    if (!p) sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
    return p;
}

static void *alloc_data(ox_ctx *c, int64_t numel, int is_index) {
    return alloc_data_big(c, numel, is_index, 0);
}

static sf_status numel_of(ox_ctx *c, int ndim, const int64_t *d, int64_t *out) {
    int64_t m = 1;
    for (int k = 0; k < ndim; k++) {
        if (d[k] < 0) return ox_fail(c, SF_ERR_SHAPE, "negative dimension %lld", (long long)d[k]);
        if (sf_mul_overflow_i64(m, d[k], &m) || m > OX_MAX_FOLD)
            return ox_fail(c, SF_ERR_RANGE, "a constant of more than %lld elements",
                           (long long)OX_MAX_FOLD);
    }
    *out = m;
    return SF_OK;
}

/* Set output k to a copy of x's data under another shape. */
static sf_status set_copy(ox_ctx *c, const Onnx__NodeProto *n, int k, const ox_value *x, int ndim,
                          const int64_t *d) {
    int o = ox_out(c, n, k);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, x->numel, x->is_index);
    if (!data) return c->err->code;
    memcpy(data, x->is_index ? (const void *)x->i : (const void *)x->f,
           (size_t)x->numel * (x->is_index ? sizeof(int64_t) : sizeof(float)));
    return ox_set_const(c, o, ndim, d, x->is_index, data);
}

/* Broadcast shape of a and b (NumPy rules). */
static sf_status bshape(ox_ctx *c, int na, const int64_t *a, int nb, const int64_t *b, int *nr,
                        int64_t *r) {
    int n = na > nb ? na : nb;
    if (n > OX_MAX_RANK) return ox_fail(c, SF_ERR_UNSUPPORTED, "rank %d", n);
    for (int k = 0; k < n; k++) {
        int64_t x = k - (n - na) >= 0 ? a[k - (n - na)] : 1;
        int64_t y = k - (n - nb) >= 0 ? b[k - (n - nb)] : 1;
        if (x != y && x != 1 && y != 1)
            return ox_fail(c, SF_ERR_SHAPE, "shapes do not broadcast (%lld and %lld on axis %d)",
                           (long long)x, (long long)y, k);
        r[k] = x == 1 ? y : x;
    }
    *nr = n;
    return SF_OK;
}

/* Flat index into x (rank xn, shape xd, right-aligned) of the output multi-index. */
static int64_t bindex(int rn, const int64_t *idx, int xn, const int64_t *xd) {
    int64_t off = 0;
    for (int k = 0; k < xn; k++) {
        int64_t i = idx[k + rn - xn];
        off = off * xd[k] + (xd[k] == 1 ? 0 : i);
    }
    return off;
}

static void next_index(int rn, const int64_t *rd, int64_t *idx) {
    for (int k = rn - 1; k >= 0; k--) {
        if (++idx[k] < rd[k]) return;
        idx[k] = 0;
    }
}

/* B_MOD: the remainder with the divisor's sign (Python's %, ONNX Mod fmod 0);
 * B_FMOD: with the dividend's (C's fmod, ONNX Mod fmod 1). */
typedef enum {
    B_ADD,
    B_SUB,
    B_MUL,
    B_DIV,
    B_POW,
    B_EQ,
    B_LT,
    B_GT,
    B_MIN,
    B_MAX,
    B_MOD,
    B_FMOD
} bop;

static sf_status int_op(ox_ctx *c, bop op, int64_t a, int64_t b, int64_t *r) {
    switch (op) {
    case B_ADD:
        if (__builtin_add_overflow(a, b, r)) return ox_fail(c, SF_ERR_RANGE, "integer overflow");
        return SF_OK;
    case B_SUB:
        if (__builtin_sub_overflow(a, b, r)) return ox_fail(c, SF_ERR_RANGE, "integer overflow");
        return SF_OK;
    case B_MUL:
        if (__builtin_mul_overflow(a, b, r)) return ox_fail(c, SF_ERR_RANGE, "integer overflow");
        return SF_OK;
    case B_DIV:
        if (b == 0) return ox_fail(c, SF_ERR_RANGE, "integer division by zero");
        if (a == INT64_MIN && b == -1) return ox_fail(c, SF_ERR_RANGE, "integer overflow");
        *r = a / b;
        return SF_OK;
    case B_POW: {
        if (b < 0) return ox_fail(c, SF_ERR_RANGE, "integer power %lld", (long long)b);
        if (a == 0 || a == 1) { /* no overflow however large b is: do not loop b times */
            *r = b == 0 ? 1 : a;
            return SF_OK;
        }
        if (a == -1) {
            *r = b % 2 ? -1 : 1;
            return SF_OK;
        }
        int64_t x = 1; /* |a| >= 2: overflows within 64 steps */
        for (int64_t k = 0; k < b; k++)
            if (__builtin_mul_overflow(x, a, &x))
                return ox_fail(c, SF_ERR_RANGE, "integer overflow");
        *r = x;
        return SF_OK;
    }
    case B_EQ: *r = a == b; return SF_OK;
    case B_LT: *r = a < b; return SF_OK;
    case B_GT: *r = a > b; return SF_OK;
    case B_MIN: *r = a < b ? a : b; return SF_OK;
    case B_MAX: *r = a > b ? a : b; return SF_OK;
    case B_MOD:
    case B_FMOD:
        if (b == 0) return ox_fail(c, SF_ERR_RANGE, "integer modulo by zero");
        *r = b == -1 ? 0 : a % b; /* INT64_MIN % -1 is undefined in C */
        if (op == B_MOD && *r != 0 && (*r < 0) != (b < 0)) *r += b;
        return SF_OK;
    }
    return SF_ERR_INTERNAL;
}

static double flt_op(bop op, double a, double b) {
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_EQ: return a == b;
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_MIN: return a < b ? a : b;
    case B_MAX: return a > b ? a : b;
    case B_MOD:
    case B_FMOD: {
        double r = fmod(a, b);
        if (op == B_MOD && r != 0 && (r < 0) != (b < 0)) r += b;
        return r;
    }
    }
    return 0;
}

/* out = a op b, broadcast; comparisons give integers (booleans). */
static sf_status binary_into(ox_ctx *c, int o, bop op, const ox_value *a, const ox_value *b) {
    int rn;
    int64_t rd[OX_MAX_RANK], numel;
    TRY(bshape(c, a->ndim, a->d, b->ndim, b->d, &rn, rd));
    TRY(numel_of(c, rn, rd, &numel));
    int ints = a->is_index && b->is_index;
    int cmp = op == B_EQ || op == B_LT || op == B_GT;
    int out_int = ints || cmp;
    void *data = alloc_data(c, numel, out_int);
    if (!data) return c->err->code;
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int64_t ia = bindex(rn, idx, a->ndim, a->d), ib = bindex(rn, idx, b->ndim, b->d);
        if (ints) {
            int64_t r = 0;
            sf_status st = int_op(c, op, a->i[ia], b->i[ib], &r);
            if (st != SF_OK) {
                free(data);
                return st;
            }
            ((int64_t *)data)[e] = r;
        } else {
            double r = flt_op(op, get_d(a, ia), get_d(b, ib));
            if (out_int)
                ((int64_t *)data)[e] = (int64_t)r;
            else
                ((float *)data)[e] = (float)r;
        }
        next_index(rn, rd, idx);
    }
    return ox_set_const(c, o, rn, rd, out_int, data);
}

static sf_status fold_binary(ox_ctx *c, const Onnx__NodeProto *n, bop op) {
    const ox_value *a, *b;
    TRY(cin(c, n, 0, &a));
    TRY(cin(c, n, 1, &b));
    int o = ox_out(c, n, 0);
    return o < 0 ? SF_OK : binary_into(c, o, op, a, b);
}

/* Min and Max take any number of inputs. */
static sf_status fold_variadic(ox_ctx *c, const Onnx__NodeProto *n, bop op) {
    if (n->n_input == 0) return ox_fail(c, SF_ERR_PARSE, "no inputs");
    const ox_value *a;
    TRY(cin(c, n, 0, &a));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    if (n->n_input == 1) return set_copy(c, n, 0, a, a->ndim, a->d);
    for (size_t k = 1; k < n->n_input; k++) {
        const ox_value *b;
        TRY(cin(c, n, (int)k, &b));
        if (k == 1) {
            TRY(binary_into(c, o, op, a, b));
        } else { /* accumulate: the output so far is an input of the next step */
            ox_value acc = c->vals[o];
            c->vals[o].f = NULL; /* acc owns the data now */
            c->vals[o].i = NULL;
            sf_status st = binary_into(c, o, op, &acc, b);
            free(acc.f);
            free(acc.i);
            TRY(st);
        }
    }
    return SF_OK;
}

static sf_status fold_unary(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    const char *t = n->op_type;
    int out_int = x->is_index && strcmp(t, "Sqrt") && strcmp(t, "Reciprocal");
    if (!strcmp(t, "Not")) out_int = 1;
    void *data = alloc_data(c, x->numel, out_int);
    if (!data) return c->err->code;
    for (int64_t e = 0; e < x->numel; e++) {
        if (out_int) {
            int64_t v = get_i(x, e), r;
            if (!strcmp(t, "Neg")) {
                if (v == INT64_MIN) {
                    free(data);
                    return ox_fail(c, SF_ERR_RANGE, "integer overflow");
                }
                r = -v;
            } else if (!strcmp(t, "Abs")) {
                if (v == INT64_MIN) {
                    free(data);
                    return ox_fail(c, SF_ERR_RANGE, "integer overflow");
                }
                r = v < 0 ? -v : v;
            } else if (!strcmp(t, "Not")) {
                r = get_d(x, e) == 0;
            } else {
                r = v; /* Floor, Ceil of integers */
            }
            ((int64_t *)data)[e] = r;
        } else {
            double v = get_d(x, e), r;
            if (!strcmp(t, "Neg"))
                r = -v;
            else if (!strcmp(t, "Abs"))
                r = fabs(v);
            else if (!strcmp(t, "Sqrt"))
                r = sqrt(v);
            else if (!strcmp(t, "Floor"))
                r = floor(v);
            else if (!strcmp(t, "Ceil"))
                r = ceil(v);
            else
                r = 1.0 / v; /* Reciprocal */
            ((float *)data)[e] = (float)r;
        }
    }
    return ox_set_const(c, o, x->ndim, x->d, out_int, data);
}

static int is_int_type(int64_t to) {
    return to == 2 || to == 3 || to == 4 || to == 5 || to == 6 || to == 7 || to == 9 || to == 12 ||
           to == 13;
}

static sf_status fold_cast(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t to;
    TRY(ox_attr_int(c, n, "to", 1, &to));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    if (to == 8) return ox_fail(c, SF_ERR_UNSUPPORTED, "a cast to strings");
    int out_int = is_int_type(to);
    void *data = alloc_data(c, x->numel, out_int);
    if (!data) return c->err->code;
    for (int64_t e = 0; e < x->numel; e++) {
        if (out_int) {
            double v = get_d(x, e);
            if (!x->is_index && !(v > -9.2e18 && v < 9.2e18)) {
                free(data);
                return ox_fail(c, SF_ERR_RANGE, "casts %g to an integer", v);
            }
            ((int64_t *)data)[e] = to == 9 ? (v != 0) : x->is_index ? x->i[e] : (int64_t)v;
        } else {
            ((float *)data)[e] = (float)get_d(x, e);
        }
    }
    return ox_set_const(c, o, x->ndim, x->d, out_int, data);
}

/* ---- shapes ---------------------------------------------------------------------- */

static sf_status fold_shape(ox_ctx *c, const Onnx__NodeProto *n) {
    int v = ox_in(c, n, 0);
    if (v <= 0) return ox_fail(c, SF_ERR_PARSE, "no input");
    const ox_value *x = &c->vals[v];
    if (x->kind == OX_NONE || x->kind == OX_UNSET || x->kind == OX_ABSENT)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "the shape of '%.100s', which has none here",
                       x->name);
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    if (!strcmp(n->op_type, "Size")) {
        int64_t *d = alloc_data(c, 1, 1), m = 1;
        if (!d) return c->err->code;
        for (int k = 0; k < x->ndim; k++) m *= x->d[k];
        d[0] = m;
        return ox_set_const(c, o, 0, NULL, 1, d);
    }
    int64_t start, end;
    TRY(ox_attr_int(c, n, "start", 0, &start));
    TRY(ox_attr_int(c, n, "end", x->ndim, &end));
    if (start < 0) start += x->ndim;
    if (end < 0) end += x->ndim;
    start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
    end = end < 0 ? 0 : end > x->ndim ? x->ndim : end;
    int64_t len = end > start ? end - start : 0;
    int64_t *d = alloc_data(c, len, 1);
    if (!d) return c->err->code;
    for (int64_t k = 0; k < len; k++) d[k] = x->d[start + k];
    return ox_set_const(c, o, 1, &len, 1, d);
}

static int norm_axis(int64_t a, int rank, int *out) {
    if (a < -rank || a >= rank) return -1;
    *out = (int)(a < 0 ? a + rank : a);
    return 0;
}

static sf_status axes_of(ox_ctx *c, const Onnx__NodeProto *n, int input, int64_t *axes, int *cnt) {
    *cnt = -1;
    if (c->opset < 13 || !has_in(c, n, input))
        return ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, cnt);
    return ox_const_ints(c, ox_in(c, n, input), "axes", axes, OX_MAX_RANK, cnt);
}

static sf_status fold_squeeze(ox_ctx *c, const Onnx__NodeProto *n, int unsq) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t axes[OX_MAX_RANK];
    int cnt;
    TRY(axes_of(c, n, 1, axes, &cnt));
    int64_t d[OX_MAX_RANK];
    int m = 0;
    if (unsq) {
        if (cnt < 1) return ox_fail(c, SF_ERR_PARSE, "no axes");
        int r = x->ndim + cnt, ins[OX_MAX_RANK] = {0};
        if (r > OX_MAX_RANK) return ox_fail(c, SF_ERR_UNSUPPORTED, "rank %d", r);
        for (int k = 0; k < cnt; k++) {
            int a;
            if (norm_axis(axes[k], r, &a) != 0 || ins[a]++)
                return ox_fail(c, SF_ERR_PARSE, "bad axes");
        }
        for (int k = 0, j = 0; k < r; k++) d[k] = ins[k] ? 1 : x->d[j++];
        m = r;
    } else {
        int drop[OX_MAX_RANK] = {0};
        for (int k = 0; k < x->ndim; k++) drop[k] = cnt < 0 && x->d[k] == 1;
        for (int k = 0; k < cnt; k++) {
            int a;
            if (norm_axis(axes[k], x->ndim, &a) != 0 || x->d[a] != 1)
                return ox_fail(c, SF_ERR_SHAPE, "squeezes an axis that is not of size 1");
            drop[a] = 1;
        }
        for (int k = 0; k < x->ndim; k++)
            if (!drop[k]) d[m++] = x->d[k];
    }
    return set_copy(c, n, 0, x, m, d);
}

static sf_status fold_reshape(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t shape[OX_MAX_RANK];
    int cnt;
    TRY(ox_const_ints(c, ox_in(c, n, 1), "the shape", shape, OX_MAX_RANK, &cnt));
    int64_t allowzero, known = 1;
    TRY(ox_attr_int(c, n, "allowzero", 0, &allowzero));
    int infer = -1;
    for (int k = 0; k < cnt; k++) {
        if (shape[k] == 0 && !allowzero) {
            if (k >= x->ndim) return ox_fail(c, SF_ERR_SHAPE, "copies a dimension the input lacks");
            shape[k] = x->d[k];
        }
        if (shape[k] == -1) {
            if (infer >= 0) return ox_fail(c, SF_ERR_SHAPE, "two -1s");
            infer = k;
            continue;
        }
        if (shape[k] < 0) return ox_fail(c, SF_ERR_SHAPE, "dimension %lld", (long long)shape[k]);
        if (sf_mul_overflow_i64(known, shape[k], &known))
            return ox_fail(c, SF_ERR_RANGE, "overflow");
    }
    if (infer >= 0) {
        if (known == 0 || x->numel % known) return ox_fail(c, SF_ERR_SHAPE, "cannot infer the -1");
        shape[infer] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel)
        return ox_fail(c, SF_ERR_SHAPE, "%lld elements into a shape of %lld", (long long)x->numel,
                       (long long)known);
    return set_copy(c, n, 0, x, cnt, shape);
}

static sf_status fold_flatten(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t axis;
    TRY(ox_attr_int(c, n, "axis", 1, &axis));
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis > x->ndim) return ox_fail(c, SF_ERR_PARSE, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int k = 0; k < x->ndim; k++) d[k < axis ? 0 : 1] *= x->d[k];
    return set_copy(c, n, 0, x, 2, d);
}

static sf_status fold_identity(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    return set_copy(c, n, 0, x, x->ndim, x->d);
}

static sf_status fold_concat(ox_ctx *c, const Onnx__NodeProto *n) {
    if (n->n_input == 0) return ox_fail(c, SF_ERR_PARSE, "no inputs");
    const ox_value *a;
    TRY(cin(c, n, 0, &a));
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 0, &axis64));
    int axis;
    if (norm_axis(axis64, a->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, a->ndim);
    int64_t d[OX_MAX_RANK], numel;
    for (int k = 0; k < a->ndim; k++) d[k] = a->d[k];
    d[axis] = 0;
    int ints = 1;
    for (size_t k = 0; k < n->n_input; k++) {
        const ox_value *x;
        TRY(cin(c, n, (int)k, &x));
        if (x->ndim != a->ndim) return ox_fail(c, SF_ERR_SHAPE, "inputs of different ranks");
        for (int j = 0; j < a->ndim; j++)
            if (j != axis && x->d[j] != a->d[j])
                return ox_fail(c, SF_ERR_SHAPE, "inputs disagree on axis %d", j);
        if (__builtin_add_overflow(d[axis], x->d[axis], &d[axis]))
            return ox_fail(c, SF_ERR_RANGE, "overflow");
        ints = ints && x->is_index;
    }
    TRY(numel_of(c, a->ndim, d, &numel));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, numel, ints);
    if (!data) return c->err->code;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= a->d[k];
    for (int k = axis + 1; k < a->ndim; k++) inner *= a->d[k];
    int64_t pos = 0;
    for (int64_t q = 0; q < outer; q++)
        for (size_t k = 0; k < n->n_input; k++) {
            const ox_value *x = &c->vals[ox_in(c, n, (int)k)];
            int64_t run = x->d[axis] * inner;
            for (int64_t e = 0; e < run; e++, pos++) {
                if (ints)
                    ((int64_t *)data)[pos] = x->i[q * run + e];
                else
                    ((float *)data)[pos] = (float)get_d(x, q * run + e);
            }
        }
    return ox_set_const(c, o, a->ndim, d, ints, data);
}

static sf_status fold_gather(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x, *ix;
    TRY(cin(c, n, 0, &x));
    TRY(cin(c, n, 1, &ix));
    int64_t axis64;
    TRY(ox_attr_int(c, n, "axis", 0, &axis64));
    int axis;
    if (x->ndim < 1 || norm_axis(axis64, x->ndim, &axis) != 0)
        return ox_fail(c, SF_ERR_PARSE, "axis %lld of rank %d", (long long)axis64, x->ndim);
    int r = x->ndim - 1 + ix->ndim;
    if (r > OX_MAX_RANK) return ox_fail(c, SF_ERR_UNSUPPORTED, "rank %d", r);
    int64_t d[OX_MAX_RANK], numel;
    int m = 0;
    for (int k = 0; k < axis; k++) d[m++] = x->d[k];
    for (int k = 0; k < ix->ndim; k++) d[m++] = ix->d[k];
    for (int k = axis + 1; k < x->ndim; k++) d[m++] = x->d[k];
    TRY(numel_of(c, r, d, &numel));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, numel, x->is_index);
    if (!data) return c->err->code;
    int64_t outer = 1, inner = 1, len = x->d[axis];
    for (int k = 0; k < axis; k++) outer *= x->d[k];
    for (int k = axis + 1; k < x->ndim; k++) inner *= x->d[k];
    int64_t pos = 0;
    for (int64_t q = 0; q < outer; q++)
        for (int64_t j = 0; j < ix->numel; j++) {
            int64_t at = get_i(ix, j);
            if (at < 0) at += len;
            if (at < 0 || at >= len) {
                free(data);
                return ox_fail(c, SF_ERR_RANGE, "index %lld out of [0, %lld)",
                               (long long)get_i(ix, j), (long long)len);
            }
            for (int64_t e = 0; e < inner; e++, pos++) {
                int64_t src = (q * len + at) * inner + e;
                if (x->is_index)
                    ((int64_t *)data)[pos] = x->i[src];
                else
                    ((float *)data)[pos] = x->f[src];
            }
        }
    return ox_set_const(c, o, r, d, x->is_index, data);
}

static sf_status fold_transpose(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t perm[OX_MAX_RANK];
    int cnt;
    TRY(ox_attr_ints(c, n, "perm", perm, OX_MAX_RANK, &cnt));
    if (cnt < 0) {
        cnt = x->ndim;
        for (int k = 0; k < cnt; k++) perm[k] = cnt - 1 - k;
    }
    if (cnt != x->ndim) return ox_fail(c, SF_ERR_SHAPE, "perm of %d for rank %d", cnt, x->ndim);
    int seen[OX_MAX_RANK] = {0};
    int64_t d[OX_MAX_RANK], stride[OX_MAX_RANK];
    for (int k = 0; k < cnt; k++) {
        if (perm[k] < 0 || perm[k] >= cnt || seen[perm[k]]++)
            return ox_fail(c, SF_ERR_PARSE, "perm is not a permutation");
        d[k] = x->d[perm[k]];
    }
    int64_t s = 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        stride[k] = s;
        s *= x->d[k];
    }
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    /* torch's training-mode exports multiply by Transpose(weight): a weight larger
     * than OX_MAX_FOLD (GPT-2's LM head, 50257 x 768) is copied, once per
     * initializer, so that the copies never exceed what the file holds */
    ox_value *xv = &c->vals[ox_in(c, n, 0)];
    int big = x->numel > OX_MAX_FOLD && xv->from_initializer && !xv->copied_big;
    void *data = alloc_data_big(c, x->numel, x->is_index, big);
    if (!data) return c->err->code;
    if (big) xv->copied_big = 1;
    if (cnt == 2 && perm[0] == 1 && !x->is_index) { /* a weight (the common case): in tiles */
        const int64_t r = x->d[0], q = x->d[1], B = 32;
        float *out = data;
        for (int64_t i0 = 0; i0 < r; i0 += B)
            for (int64_t j0 = 0; j0 < q; j0 += B)
                for (int64_t i = i0; i < r && i < i0 + B; i++)
                    for (int64_t j = j0; j < q && j < j0 + B; j++) out[j * r + i] = x->f[i * q + j];
        return ox_set_const(c, o, cnt, d, x->is_index, data);
    }
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t src = 0;
        for (int k = 0; k < cnt; k++) src += idx[k] * stride[perm[k]];
        if (x->is_index)
            ((int64_t *)data)[e] = x->i[src];
        else
            ((float *)data)[e] = x->f[src];
        next_index(cnt, d, idx);
    }
    return ox_set_const(c, o, cnt, d, x->is_index, data);
}

static sf_status fold_slice(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t starts[OX_MAX_RANK], ends[OX_MAX_RANK], axes[OX_MAX_RANK], steps[OX_MAX_RANK];
    int ns, ne, na = -1, nst = -1;
    if (c->opset < 10) {
        TRY(ox_attr_ints(c, n, "starts", starts, OX_MAX_RANK, &ns));
        TRY(ox_attr_ints(c, n, "ends", ends, OX_MAX_RANK, &ne));
        TRY(ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, &na));
    } else {
        TRY(ox_const_ints(c, ox_in(c, n, 1), "starts", starts, OX_MAX_RANK, &ns));
        TRY(ox_const_ints(c, ox_in(c, n, 2), "ends", ends, OX_MAX_RANK, &ne));
        if (has_in(c, n, 3)) TRY(ox_const_ints(c, ox_in(c, n, 3), "axes", axes, OX_MAX_RANK, &na));
        if (has_in(c, n, 4))
            TRY(ox_const_ints(c, ox_in(c, n, 4), "steps", steps, OX_MAX_RANK, &nst));
    }
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return ox_fail(c, SF_ERR_PARSE, "starts, ends, axes and steps differ in length");
    int64_t lo[OX_MAX_RANK], step[OX_MAX_RANK], d[OX_MAX_RANK];
    for (int k = 0; k < x->ndim; k++) {
        lo[k] = 0;
        step[k] = 1;
        d[k] = x->d[k];
    }
    int seen[OX_MAX_RANK] = {0};
    for (int k = 0; k < ns; k++) {
        int a;
        if (norm_axis(na >= 0 ? axes[k] : k, x->ndim, &a) != 0 || seen[a]++)
            return ox_fail(c, SF_ERR_PARSE, "slice axes out of range or repeated");
        int64_t len = x->d[a], s = nst >= 0 ? steps[k] : 1, b = starts[k], e = ends[k];
        if (s == 0) return ox_fail(c, SF_ERR_PARSE, "step 0");
        if (s < -SF_MAX_NUMEL) s = -SF_MAX_NUMEL; /* past any axis: the same slice, no overflow */
        if (s > SF_MAX_NUMEL) s = SF_MAX_NUMEL;
        if (b < 0) b = b < -len ? 0 : b + len; /* saturate huge values (INT64_MAX means "all") */
        if (e < 0) e = e < -len ? -1 : e + len;
        if (s > 0) {
            b = b > len ? len : b;
            e = e > len ? len : e < 0 ? 0 : e;
            d[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b > len - 1 ? len - 1 : b;
            e = e > len - 1 ? len - 1 : e;
            d[a] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        lo[a] = b;
        step[a] = s;
    }
    int64_t numel, stride[OX_MAX_RANK], sz = 1;
    TRY(numel_of(c, x->ndim, d, &numel));
    for (int k = x->ndim - 1; k >= 0; k--) {
        stride[k] = sz;
        sz *= x->d[k];
    }
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, numel, x->is_index);
    if (!data) return c->err->code;
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int64_t src = 0;
        for (int k = 0; k < x->ndim; k++) src += (lo[k] + idx[k] * step[k]) * stride[k];
        if (x->is_index)
            ((int64_t *)data)[e] = x->i[src];
        else
            ((float *)data)[e] = x->f[src];
        next_index(x->ndim, d, idx);
    }
    return ox_set_const(c, o, x->ndim, d, x->is_index, data);
}

static sf_status fold_constant(ox_ctx *c, const Onnx__NodeProto *n) {
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(n, "value")) && a->t) return ox_tensor_to_value(c, a->t, o);
    if ((a = ox_attr(n, "value_float"))) {
        float *f = alloc_data(c, 1, 0);
        if (!f) return c->err->code;
        f[0] = a->f;
        return ox_set_const(c, o, 0, NULL, 0, f);
    }
    if ((a = ox_attr(n, "value_int"))) {
        int64_t *i = alloc_data(c, 1, 1);
        if (!i) return c->err->code;
        i[0] = a->i;
        return ox_set_const(c, o, 0, NULL, 1, i);
    }
    if ((a = ox_attr(n, "value_floats"))) {
        int64_t len = (int64_t)a->n_floats;
        float *f = alloc_data(c, len, 0);
        if (!f) return c->err->code;
        for (int64_t k = 0; k < len; k++) f[k] = a->floats[k];
        return ox_set_const(c, o, 1, &len, 0, f);
    }
    if ((a = ox_attr(n, "value_ints"))) {
        int64_t len = (int64_t)a->n_ints;
        int64_t *i = alloc_data(c, len, 1);
        if (!i) return c->err->code;
        for (int64_t k = 0; k < len; k++) i[k] = a->ints[k];
        return ox_set_const(c, o, 1, &len, 1, i);
    }
    return ox_fail(c, SF_ERR_UNSUPPORTED,
                   "a Constant without a numeric value (sparse, string or missing)");
}

static sf_status fold_constant_of_shape(ox_ctx *c, const Onnx__NodeProto *n) {
    int64_t shape[OX_MAX_RANK];
    int cnt;
    TRY(ox_const_ints(c, ox_in(c, n, 0), "the shape", shape, OX_MAX_RANK, &cnt));
    int64_t numel;
    TRY(numel_of(c, cnt, shape, &numel));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    double val = 0;
    int is_int = 0;
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    if (a && a->t) {
        TRY(ox_tensor_to_value(c, a->t, o)); /* borrow the output to read the value */
        const ox_value *v = &c->vals[o];
        if (v->numel != 1) return ox_fail(c, SF_ERR_PARSE, "value must hold one element");
        val = get_d(v, 0);
        is_int = v->is_index;
    }
    void *data = alloc_data(c, numel, is_int);
    if (!data) return c->err->code;
    for (int64_t e = 0; e < numel; e++) {
        if (is_int)
            ((int64_t *)data)[e] = (int64_t)val;
        else
            ((float *)data)[e] = (float)val;
    }
    return ox_set_const(c, o, cnt, shape, is_int, data);
}

static sf_status fold_expand(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t shape[OX_MAX_RANK], rd[OX_MAX_RANK], numel;
    int cnt, rn;
    TRY(ox_const_ints(c, ox_in(c, n, 1), "the shape", shape, OX_MAX_RANK, &cnt));
    TRY(bshape(c, x->ndim, x->d, cnt, shape, &rn, rd));
    TRY(numel_of(c, rn, rd, &numel));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, numel, x->is_index);
    if (!data) return c->err->code;
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int64_t src = bindex(rn, idx, x->ndim, x->d);
        if (x->is_index)
            ((int64_t *)data)[e] = x->i[src];
        else
            ((float *)data)[e] = x->f[src];
        next_index(rn, rd, idx);
    }
    int from = ox_in(c, n, 0);
    TRY(ox_set_const(c, o, rn, rd, x->is_index, data));
    /* a learned tensor repeated over the batch (ViT's class_token.expand(N, -1, -1)):
     * a Concat may take it as a weight (onnx_ops.c) */
    c->vals[o].expanded_from = from;
    return SF_OK;
}

static sf_status fold_where(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *cond, *a, *b;
    TRY(cin(c, n, 0, &cond));
    TRY(cin(c, n, 1, &a));
    TRY(cin(c, n, 2, &b));
    int rn, tn;
    int64_t rd[OX_MAX_RANK], td[OX_MAX_RANK], numel;
    TRY(bshape(c, a->ndim, a->d, b->ndim, b->d, &tn, td));
    TRY(bshape(c, cond->ndim, cond->d, tn, td, &rn, rd));
    TRY(numel_of(c, rn, rd, &numel));
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    int ints = a->is_index && b->is_index;
    void *data = alloc_data(c, numel, ints);
    if (!data) return c->err->code;
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int take_a = get_d(cond, bindex(rn, idx, cond->ndim, cond->d)) != 0;
        const ox_value *s = take_a ? a : b;
        int64_t k = bindex(rn, idx, s->ndim, s->d);
        if (ints)
            ((int64_t *)data)[e] = s->i[k];
        else
            ((float *)data)[e] = (float)get_d(s, k);
        next_index(rn, rd, idx);
    }
    return ox_set_const(c, o, rn, rd, ints, data);
}

/* Mod: fmod 0 (the default) gives the remainder with the divisor's sign, as
 * torch's % and Swin's window padding (W % window) compute it; fmod 1 C's. */
static sf_status fold_mod(ox_ctx *c, const Onnx__NodeProto *n) {
    int64_t f;
    TRY(ox_attr_int(c, n, "fmod", 0, &f));
    if (f != 0 && f != 1) return ox_fail(c, SF_ERR_PARSE, "fmod %lld (0 or 1)", (long long)f);
    return fold_binary(c, n, f ? B_FMOD : B_MOD);
}

/* ScatterND (reduction none): a copy of data with the slices that indices
 * name replaced by updates' (torch's index assignment, mask[h0:h1, w0:w1] = k in
 * Swin's shifted-window mask). indices (..., k), k <= rank; updates
 * indices.shape[:-1] + data.shape[k:]. */
static sf_status fold_scatter_nd(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *x = NULL, *ix = NULL, *up = NULL;
    TRY(cin(c, n, 0, &x));
    TRY(cin(c, n, 1, &ix));
    TRY(cin(c, n, 2, &up));
    char red[16];
    TRY(ox_attr_str(c, n, "reduction", "none", red, sizeof red));
    if (strcmp(red, "none"))
        return ox_fail(c, SF_ERR_UNSUPPORTED, "ScatterND with reduction '%s' (only none)", red);
    if (!ix->is_index || ix->ndim < 1) return ox_fail(c, SF_ERR_PARSE, "indices not integers");
    int k = (int)ix->d[ix->ndim - 1];
    if (k < 1 || k > x->ndim)
        return ox_fail(c, SF_ERR_SHAPE, "indices of length %d into a tensor of rank %d", k,
                       x->ndim);
    /* updates: indices.shape[:-1] + data.shape[k:] */
    int un = ix->ndim - 1 + x->ndim - k;
    int ok = up->ndim == un && up->is_index == x->is_index;
    for (int q = 0; ok && q < ix->ndim - 1; q++) ok = up->d[q] == ix->d[q];
    for (int q = k; ok && q < x->ndim; q++) ok = up->d[ix->ndim - 1 + q - k] == x->d[q];
    if (!ok) return ox_fail(c, SF_ERR_SHAPE, "updates whose shape does not fit the indices");
    int64_t slice = 1;
    for (int q = k; q < x->ndim; q++) slice *= x->d[q];
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, x->numel, x->is_index);
    if (!data) return c->err->code;
    size_t es = x->is_index ? sizeof(int64_t) : sizeof(float);
    memcpy(data, x->is_index ? (const void *)x->i : (const void *)x->f, (size_t)x->numel * es);
    int64_t rows = ix->numel / k;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int q = 0; q < k; q++) {
            int64_t i = ix->i[r * k + q];
            if (i < 0) i += x->d[q];
            if (i < 0 || i >= x->d[q]) {
                free(data);
                return ox_fail(c, SF_ERR_RANGE, "index %lld out of range on axis %d (size %lld)",
                               (long long)ix->i[r * k + q], q, (long long)x->d[q]);
            }
            off = off * x->d[q] + i;
        }
        const void *src = x->is_index ? (const void *)(up->i + r * slice)
                                      : (const void *)(up->f + r * slice);
        memcpy((char *)data + (size_t)(off * slice) * es, src, (size_t)slice * es);
    }
    return ox_set_const(c, o, x->ndim, x->d, x->is_index, data);
}

static sf_status fold_range(ox_ctx *c, const Onnx__NodeProto *n) {
    const ox_value *s, *l, *dl;
    TRY(cin(c, n, 0, &s));
    TRY(cin(c, n, 1, &l));
    TRY(cin(c, n, 2, &dl));
    if (s->numel != 1 || l->numel != 1 || dl->numel != 1)
        return ox_fail(c, SF_ERR_SHAPE, "start, limit and delta must be scalars");
    int ints = s->is_index && l->is_index && dl->is_index;
    double start = get_d(s, 0), limit = get_d(l, 0), delta = get_d(dl, 0);
    if (delta == 0) return ox_fail(c, SF_ERR_PARSE, "delta 0");
    double cntd = ceil((limit - start) / delta);
    if (!(cntd < (double)OX_MAX_FOLD)) return ox_fail(c, SF_ERR_RANGE, "a range too long");
    int64_t len = cntd > 0 ? (int64_t)cntd : 0;
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, len, ints);
    if (!data) return c->err->code;
    for (int64_t k = 0; k < len; k++) {
        if (ints) {
            int64_t step, v;
            if (__builtin_mul_overflow(k, dl->i[0], &step) ||
                __builtin_add_overflow(s->i[0], step, &v)) {
                free(data);
                return ox_fail(c, SF_ERR_RANGE, "integer overflow");
            }
            ((int64_t *)data)[k] = v;
        } else {
            ((float *)data)[k] = (float)(start + (double)k * delta);
        }
    }
    return ox_set_const(c, o, 1, &len, ints, data);
}

static sf_status fold_reduce(ox_ctx *c, const Onnx__NodeProto *n, int prod) {
    const ox_value *x;
    TRY(cin(c, n, 0, &x));
    int64_t axes[OX_MAX_RANK], keep;
    int cnt;
    /* ReduceSum takes its axes as an input from opset 13; ReduceProd as an attribute */
    if (!prod && c->opset >= 13) {
        cnt = -1;
        if (has_in(c, n, 1)) TRY(ox_const_ints(c, ox_in(c, n, 1), "axes", axes, OX_MAX_RANK, &cnt));
    } else {
        TRY(ox_attr_ints(c, n, "axes", axes, OX_MAX_RANK, &cnt));
    }
    TRY(ox_attr_int(c, n, "keepdims", 1, &keep));
    int red[OX_MAX_RANK] = {0};
    for (int k = 0; k < x->ndim; k++) red[k] = cnt <= 0;
    for (int k = 0; k < cnt; k++) {
        int a;
        if (norm_axis(axes[k], x->ndim, &a) != 0)
            return ox_fail(c, SF_ERR_PARSE, "axis out of range");
        red[a] = 1;
    }
    int64_t d[OX_MAX_RANK], full[OX_MAX_RANK], numel = 1;
    int m = 0;
    for (int k = 0; k < x->ndim; k++) {
        full[k] = red[k] ? 1 : x->d[k];
        numel *= full[k];
        if (!red[k] || keep) d[m++] = full[k];
    }
    int o = ox_out(c, n, 0);
    if (o < 0) return SF_OK;
    void *data = alloc_data(c, numel, x->is_index);
    if (!data) return c->err->code;
    for (int64_t e = 0; e < numel; e++) {
        if (x->is_index)
            ((int64_t *)data)[e] = prod ? 1 : 0;
        else
            ((float *)data)[e] = prod ? 1.0f : 0.0f;
    }
    int64_t idx[OX_MAX_RANK] = {0};
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t dst = 0;
        for (int k = 0; k < x->ndim; k++) dst = dst * full[k] + (red[k] ? 0 : idx[k]);
        if (x->is_index) {
            int64_t *p = &((int64_t *)data)[dst];
            if (prod ? __builtin_mul_overflow(*p, x->i[e], p)
                     : __builtin_add_overflow(*p, x->i[e], p)) {
                free(data);
                return ox_fail(c, SF_ERR_RANGE, "integer overflow");
            }
        } else {
            float *p = &((float *)data)[dst];
            *p = prod ? *p * x->f[e] : *p + x->f[e];
        }
        next_index(x->ndim, x->d, idx);
    }
    return ox_set_const(c, o, m, d, x->is_index, data);
}

sf_status ox_fold_node(ox_ctx *c, const Onnx__NodeProto *n) {
    const char *t = n->op_type;
    if (!strcmp(t, "Shape") || !strcmp(t, "Size")) return fold_shape(c, n);
    /* every other node here reads constants only */
    if (!strcmp(t, "Constant")) return fold_constant(c, n);
    if (!strcmp(t, "ConstantOfShape")) return fold_constant_of_shape(c, n);
    if (!strcmp(t, "Add")) return fold_binary(c, n, B_ADD);
    if (!strcmp(t, "Sub")) return fold_binary(c, n, B_SUB);
    if (!strcmp(t, "Mul")) return fold_binary(c, n, B_MUL);
    if (!strcmp(t, "Div")) return fold_binary(c, n, B_DIV);
    if (!strcmp(t, "Pow")) return fold_binary(c, n, B_POW);
    if (!strcmp(t, "Equal")) return fold_binary(c, n, B_EQ);
    if (!strcmp(t, "Less")) return fold_binary(c, n, B_LT);
    if (!strcmp(t, "Greater")) return fold_binary(c, n, B_GT);
    if (!strcmp(t, "Min")) return fold_variadic(c, n, B_MIN);
    if (!strcmp(t, "Max")) return fold_variadic(c, n, B_MAX);
    if (!strcmp(t, "Neg") || !strcmp(t, "Abs") || !strcmp(t, "Sqrt") || !strcmp(t, "Floor") ||
        !strcmp(t, "Ceil") || !strcmp(t, "Reciprocal") || !strcmp(t, "Not"))
        return fold_unary(c, n);
    if (!strcmp(t, "Cast")) return fold_cast(c, n);
    if (!strcmp(t, "Identity")) return fold_identity(c, n);
    if (!strcmp(t, "Squeeze")) return fold_squeeze(c, n, 0);
    if (!strcmp(t, "Unsqueeze")) return fold_squeeze(c, n, 1);
    if (!strcmp(t, "Reshape")) return fold_reshape(c, n);
    if (!strcmp(t, "Flatten")) return fold_flatten(c, n);
    if (!strcmp(t, "Concat")) return fold_concat(c, n);
    if (!strcmp(t, "Gather")) return fold_gather(c, n);
    if (!strcmp(t, "Transpose")) return fold_transpose(c, n);
    if (!strcmp(t, "Slice")) return fold_slice(c, n);
    if (!strcmp(t, "Expand")) return fold_expand(c, n);
    if (!strcmp(t, "Where")) return fold_where(c, n);
    if (!strcmp(t, "Range")) return fold_range(c, n);
    if (!strcmp(t, "Mod")) return fold_mod(c, n);
    if (!strcmp(t, "ScatterND")) return fold_scatter_nd(c, n);
    if (!strcmp(t, "ReduceProd")) return fold_reduce(c, n, 1);
    if (!strcmp(t, "ReduceSum")) return fold_reduce(c, n, 0);
    return ox_fail(c, SF_ERR_UNSUPPORTED, "cannot be evaluated on constants");
}
