/*
 * onnx_ctx.c - the import context the ONNX node handlers share (onnx_ctx.h):
 * messages, values by name, attributes, constants, views and activations, the
 * operators added to the soapflow graph (names, weights), and freeing it all.
 *
 * Everything here serves the handlers (onnx_ops.c, onnx_fold.c, onnx_attn.c,
 * onnx_norm.c) and the frame around them (onnx_graph.c), and calls none of them:
 * a value pending on a pattern (a linear layer waiting for its bias, an
 * attention or layer-normalization stage) becomes an activation through the
 * function the frame installed for its kind (c->pend_force), so the context
 * needs no pattern's code. That keeps the import a tree, context at the root
 * (tests/check_cycles.py), where the handlers and the frame used to call each
 * other in a circle through onnx_graph.c.
 *
 * Names. An operator is named after the PyTorch module that made it: the weight
 * initializer's name without ".weight" ("layer1.0.conv1") when there is one,
 * else the module path torch writes into node names ("/layer1/layer1.0/relu/Relu"
 * gives "layer1.0.relu", "/lstm/LSTM_1" gives "lstm_1"), else the node name, else
 * "<type>_<node index>"; "_2", "_3" ... make a name unique; bytes that are not
 * UTF-8 become '?' (ox_unique_name). Checkpoint tensors are "<operator>.<parameter>",
 * so a torchvision model's come out under their state-dict names
 * ("layer1.0.conv1.weight").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ctx.h"

/* ---- messages ------------------------------------------------------------------ */

const char *ox_node_str(const ox_ctx *c, int node, char *buf, size_t cap) {
    const Onnx__NodeProto *n = c->graph->node[node];
    const char *type = n->op_type ? n->op_type : "?";
    if (n->name && n->name[0])
        snprintf(buf, cap, "node #%d '%.120s' (%.60s)", node, n->name, type);
    else
        snprintf(buf, cap, "node #%d (%.60s)", node, type);
    return buf;
}

static sf_status vfail(ox_ctx *c, int node, sf_status st, const char *fmt, va_list ap) {
    char msg[SF_ERRMSG_MAX], who[240];
    vsnprintf(msg, sizeof msg, fmt, ap);
    ox_one_line(msg);
    if (node >= 0) {
        ox_node_str(c, node, who, sizeof who);
        ox_one_line(who);
        return sf_error_set(c->err, st, "%s: %s: %s", c->origin, who, msg);
    }
    return sf_error_set(c->err, st, "%s: %s", c->origin, msg);
}

sf_status ox_fail(ox_ctx *c, sf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_status r = vfail(c, c->cur_node, st, fmt, ap);
    va_end(ap);
    return r;
}

sf_status ox_fail_node(ox_ctx *c, int node, sf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_status r = vfail(c, node, st, fmt, ap);
    va_end(ap);
    return r;
}

sf_status ox_oom(ox_ctx *c) {
    return sf_error_set(c->err, SF_ERR_NOMEM, "%s: out of memory", c->origin);
}

/* "2x3x224x224" of an ONNX shape. */
const char *ox_dims_str(int ndim, const int64_t *d, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    if (ndim == 0) snprintf(buf, cap, "scalar");
    for (int i = 0; i < ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? "x" : "", (long long)d[i]);
    return buf;
}

/* ---- values by name ------------------------------------------------------------ */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int ox_find_value(const ox_ctx *c, const char *name) {
    if (!c->hash_cap) return -1;
    for (size_t k = hash_str(name) & (c->hash_cap - 1);; k = (k + 1) & (c->hash_cap - 1)) {
        int v = c->hash[k];
        if (v < 0) return -1;
        if (strcmp(c->vals[v].name, name) == 0) return v;
    }
}

static sf_status hash_insert(ox_ctx *c, int v) {
    if ((size_t)(c->n_vals + 1) * 2 > c->hash_cap) {
        size_t cap = c->hash_cap ? c->hash_cap * 2 : 64;
        int *h = malloc(cap * sizeof *h);
        if (!h) return ox_oom(c);
        for (size_t k = 0; k < cap; k++) h[k] = -1;
        free(c->hash);
        c->hash = h;
        c->hash_cap = cap;
        for (int i = 0; i < c->n_vals; i++) /* every value but v, which is new */
            if (i != v) {
                size_t k = hash_str(c->vals[i].name) & (cap - 1);
                while (h[k] >= 0) k = (k + 1) & (cap - 1);
                h[k] = i;
            }
    }
    size_t k = hash_str(c->vals[v].name) & (c->hash_cap - 1);
    while (c->hash[k] >= 0) k = (k + 1) & (c->hash_cap - 1);
    c->hash[k] = v;
    return SF_OK;
}

/* A new value named name (not yet present). */
int ox_new_value(ox_ctx *c, const char *name, int producer) {
    if (c->n_vals == c->cap_vals) {
        int cap = c->cap_vals ? c->cap_vals * 2 : 256;
        ox_value *nv = realloc(c->vals, (size_t)cap * sizeof *nv);
        if (!nv) return ox_oom(c);
        c->vals = nv;
        c->cap_vals = cap;
    }
    int v = c->n_vals++;
    memset(&c->vals[v], 0, sizeof c->vals[v]);
    c->vals[v].name = name;
    c->vals[v].producer = producer;
    c->vals[v].rec = -1;
    c->vals[v].batch_dim = -1;
    if (hash_insert(c, v) != SF_OK) return SF_ERR_NOMEM;
    return v;
}

int ox_in(const ox_ctx *c, const Onnx__NodeProto *n, int k) {
    if (k < 0 || (size_t)k >= n->n_input) return -1;
    const char *s = n->input[k];
    if (!s || !s[0]) return 0; /* value 0 is the absent one */
    return ox_find_value(c, s);
}

int ox_out(const ox_ctx *c, const Onnx__NodeProto *n, int k) {
    if (k < 0 || (size_t)k >= n->n_output) return -1;
    const char *s = n->output[k];
    if (!s || !s[0]) return -1;
    return ox_find_value(c, s);
}

/* ---- attributes ---------------------------------------------------------------- */

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

/* The attribute's type: as declared, or from what it holds (IR version 1 files
 * may leave the type out). */
static int attr_type(const Onnx__AttributeProto *a) {
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return a->type;
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

sf_status ox_attr_int(ox_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t dflt,
                      int64_t *out) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    *out = dflt;
    if (!a) return SF_OK;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return ox_fail(c, SF_ERR_PARSE, "attribute '%s' must be an integer", name);
    *out = a->i;
    return SF_OK;
}

sf_status ox_attr_float(ox_ctx *c, const Onnx__NodeProto *n, const char *name, double dflt,
                        double *out) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    *out = dflt;
    if (!a) return SF_OK;
    int t = attr_type(a);
    if (t ==
        ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) { /* lenient: an integer where a float goes */
        *out = (double)a->i;
        return SF_OK;
    }
    if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        return ox_fail(c, SF_ERR_PARSE, "attribute '%s' must be a float", name);
    *out = a->f;
    if (!isfinite(*out) && strcmp(name, "max") && strcmp(name, "min"))
        return ox_fail(c, SF_ERR_PARSE, "attribute '%s' is not a finite number", name);
    return SF_OK;
}

sf_status ox_attr_ints(ox_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t *out, int cap,
                       int *count) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    *count = -1;
    if (!a) return SF_OK;
    int t = attr_type(a);
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) { /* an empty list */
        *count = 0;
        return SF_OK;
    }
    if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return ox_fail(c, SF_ERR_PARSE, "attribute '%s' must be a list of integers", name);
    if (a->n_ints > (size_t)cap)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "attribute '%s' has %zu values, at most %d taken",
                       name, a->n_ints, cap);
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    *count = (int)a->n_ints;
    return SF_OK;
}

sf_status ox_attr_str(ox_ctx *c, const Onnx__NodeProto *n, const char *name, const char *dflt,
                      char *buf, size_t cap) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    snprintf(buf, cap, "%s", dflt);
    if (!a) return SF_OK;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        return ox_fail(c, SF_ERR_PARSE, "attribute '%s' must be a string", name);
    size_t len = a->s.len < cap - 1 ? a->s.len : cap - 1;
    for (size_t i = 0; i < len; i++) buf[i] = a->s.data[i] ? (char)a->s.data[i] : '?';
    buf[len] = '\0';
    return SF_OK;
}

/* ---- constants -------------------------------------------------------------------- */

sf_status ox_shape_numel(ox_ctx *c, int ndim, const int64_t *d, int64_t *numel) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (d[i] < 0) return ox_fail(c, SF_ERR_PARSE, "negative dimension %lld", (long long)d[i]);
        if (sf_mul_overflow_i64(n, d[i], &n) || n > SF_MAX_NUMEL)
            return ox_fail(c, SF_ERR_RANGE, "a tensor of more than 2^40 elements");
    }
    *numel = n;
    return SF_OK;
}

sf_status ox_set_const(ox_ctx *c, int v, int ndim, const int64_t *d, int is_index, void *data) {
    ox_value *x = &c->vals[v];
    if (ndim > OX_MAX_RANK) {
        free(data);
        return ox_fail(c, SF_ERR_UNSUPPORTED, "a constant of rank %d (at most %d)", ndim,
                       OX_MAX_RANK);
    }
    int64_t numel = 0;
    if (ox_shape_numel(c, ndim, d, &numel) != SF_OK) {
        free(data);
        return c->err->code;
    }
    free(x->f);
    free(x->i);
    x->f = NULL;
    x->i = NULL;
    x->lazy = NULL;
    x->kind = OX_CONST;
    x->ndim = ndim;
    for (int k = 0; k < ndim; k++) x->d[k] = d[k];
    x->numel = numel;
    x->is_index = is_index;
    if (is_index)
        x->i = data;
    else
        x->f = data;
    return SF_OK;
}

sf_status ox_const_ints(ox_ctx *c, int v, const char *what, int64_t *out, int cap, int *count) {
    if (ox_const_data(c, v) != SF_OK) return c->err->code;
    const ox_value *x = v >= 0 ? &c->vals[v] : NULL;
    if (!x || x->kind != OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "%s must be a constant (it is computed from an input)", what);
    if (x->numel > cap)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s has %lld values, at most %d taken", what,
                       (long long)x->numel, cap);
    for (int64_t k = 0; k < x->numel; k++) {
        if (x->is_index) {
            out[k] = x->i[k];
        } else {
            float f = x->f[k];
            if (!(f > -9.2e18f && f < 9.2e18f))
                return ox_fail(c, SF_ERR_RANGE, "%s holds %g, not an integer", what, (double)f);
            out[k] = (int64_t)f;
        }
    }
    *count = (int)x->numel;
    return SF_OK;
}

sf_status ox_const_scalar(ox_ctx *c, int v, const char *what, double *out) {
    if (ox_const_data(c, v) != SF_OK) return c->err->code;
    const ox_value *x = v >= 0 ? &c->vals[v] : NULL;
    if (!x || x->kind != OX_CONST)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "%s must be a constant", what);
    if (x->numel != 1)
        return ox_fail(c, SF_ERR_SHAPE, "%s must be a single value, it has %lld", what,
                       (long long)x->numel);
    *out = x->is_index ? (double)x->i[0] : (double)x->f[0];
    return SF_OK;
}

sf_status ox_dropout_ratio(ox_ctx *c, const Onnx__NodeProto *n, double *ratio) {
    double r = 0.5;
    int training = 1;
    if (c->opset < 12) {
        if (ox_attr_float(c, n, "ratio", 0.5, &r) != SF_OK) return c->err->code;
    } else {
        int v = ox_in(c, n, 1), t = ox_in(c, n, 2);
        if (v > 0 && c->vals[v].kind != OX_ABSENT &&
            ox_const_scalar(c, v, "the ratio", &r) != SF_OK)
            return c->err->code;
        double m = 0;
        if (t > 0 && c->vals[t].kind != OX_ABSENT &&
            ox_const_scalar(c, t, "training_mode", &m) != SF_OK)
            return c->err->code;
        training = m != 0;
    }
    *ratio = training ? r : 0.0;
    if (!(*ratio >= 0 && *ratio < 1))
        return ox_fail(c, SF_ERR_INVALID, "dropout ratio %g is not in [0, 1)", *ratio);
    return SF_OK;
}

/* Half and bfloat16 to float. */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint64_t load_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

sf_status ox_tensor_to_value(ox_ctx *c, const Onnx__TensorProto *t, int v) {
    return ox_tensor_to_value_lazy(c, t, v, 1);
}

sf_status ox_const_data(ox_ctx *c, int v) {
    if (v <= 0 || !c->vals[v].lazy) return SF_OK;
    const Onnx__TensorProto *t = c->vals[v].lazy;
    c->vals[v].lazy = NULL;
    return ox_tensor_to_value_lazy(c, t, v, 1);
}

sf_status ox_tensor_to_value_lazy(ox_ctx *c, const Onnx__TensorProto *t, int v, int convert) {
    const char *nm = t->name && t->name[0] ? t->name : c->vals[v].name;
    if (t->n_dims > OX_MAX_RANK)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "tensor '%.100s' has rank %zu (at most %d)", nm,
                       t->n_dims, OX_MAX_RANK);
    int64_t d[OX_MAX_RANK], numel = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        d[k] = t->dims[k];
        if (d[k] < 0)
            return ox_fail(c, SF_ERR_PARSE, "tensor '%.100s' has a negative dimension %lld", nm,
                           (long long)d[k]);
        if (sf_mul_overflow_i64(numel, d[k], &numel) || numel > SF_MAX_NUMEL)
            return ox_fail(c, SF_ERR_RANGE, "tensor '%.100s' has more than 2^40 elements", nm);
    }
    int external =
        t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (t->segment)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "tensor '%.100s' is stored in segments", nm);
    int dt = t->has_data_type ? t->data_type : 0;
    int is_int, elsize;
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: is_int = 0, elsize = 4; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: is_int = 0, elsize = 8; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: is_int = 0, elsize = 2; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: is_int = 1, elsize = 8; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: is_int = 1, elsize = 4; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: is_int = 1, elsize = 2; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: is_int = 1, elsize = 1; break;
    default:
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "tensor '%.100s' has element type %d, which soapflow "
                       "does not read (numbers only)",
                       nm, dt);
    }
    size_t bytes;
    if (sf_mul_overflow_size((size_t)numel, is_int ? sizeof(int64_t) : sizeof(float), &bytes))
        return ox_fail(c, SF_ERR_RANGE, "tensor '%.100s' is too large", nm);
    void *data = convert ? malloc(bytes ? bytes : 1) : NULL;
    if (convert && !data) return ox_oom(c);
    float *f = is_int ? NULL : data;
    int64_t *ii = is_int ? data : NULL;
    size_t have; /* elements in the field that holds the data */
    const char *field;
    /* the little-endian bytes, from raw_data or an external file */
    int has_raw = t->has_raw_data || external;
    const uint8_t *raw = t->raw_data.data;
    size_t raw_len = t->raw_data.len;
    uint8_t *ext = NULL;
    if (external) {
        size_t need;
        if (sf_mul_overflow_size((size_t)numel, (size_t)elsize, &need)) {
            free(data);
            return ox_fail(c, SF_ERR_RANGE, "tensor '%.100s' is too large", nm);
        }
        char why[SF_ERRMSG_MAX];
        sf_status es =
            ox_external_data(c->dir, t, nm, need, convert ? &ext : NULL, why, sizeof why);
        if (es != SF_OK) {
            free(data);
            return ox_fail(c, es, "%s", why);
        }
        raw = ext;
        raw_len = need;
    }
    if (has_raw) {
        field = external ? "external data" : "raw_data";
        have = raw_len / (size_t)elsize;
        if (raw_len % (size_t)elsize) have = (size_t)-1; /* a partial element */
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        field = "float_data", have = t->n_float_data;
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
        field = "double_data", have = t->n_double_data;
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        field = "int64_data", have = t->n_int64_data;
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 ||
               dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32) {
        field = "uint64_data", have = t->n_uint64_data;
    } else {
        field = "int32_data", have = t->n_int32_data;
    }
    if (have != (size_t)numel) {
        free(data);
        free(ext);
        if (have == (size_t)-1)
            return ox_fail(c, SF_ERR_PARSE,
                           "tensor '%.100s': raw_data of %zu bytes is not a whole number of "
                           "%d-byte elements",
                           nm, raw_len, elsize);
        return ox_fail(
            c, SF_ERR_PARSE, "tensor '%.100s' of shape %s needs %lld elements, its %s holds %zu",
            nm, ox_dims_str((int)t->n_dims, d, (char[96]){0}, 96), (long long)numel, field, have);
    }
    if (!convert) {
        free(data);
        sf_status st = ox_set_const(c, v, (int)t->n_dims, d, is_int, NULL);
        c->vals[v].lazy = t;
        return st;
    }
    for (int64_t k = 0; k < numel; k++) {
        double x = 0;
        int64_t xi = 0;
        if (has_raw) {
            uint64_t u = load_le(raw + k * elsize, elsize);
            switch (dt) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
                uint32_t b = (uint32_t)u;
                float y;
                memcpy(&y, &b, sizeof y);
                x = y;
                break;
            }
            case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: memcpy(&x, &u, sizeof x); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: x = half_to_float((uint16_t)u); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: x = bf16_to_float((uint16_t)u); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: xi = (int64_t)u; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: xi = (int32_t)(uint32_t)u; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: xi = (int16_t)(uint16_t)u; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: xi = (int8_t)(uint8_t)u; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
                xi = (int64_t)u;
                break; /* wraps past 2^63 */
            default: xi = (int64_t)u; break;
            }
        } else {
            switch (dt) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: x = t->float_data[k]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: x = t->double_data[k]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
                x = half_to_float((uint16_t)t->int32_data[k]);
                break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
                x = bf16_to_float((uint16_t)t->int32_data[k]);
                break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: xi = t->int64_data[k]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: xi = (int64_t)t->uint64_data[k]; break;
            default: xi = t->int32_data[k]; break;
            }
        }
        if (is_int)
            ii[k] = xi;
        else
            f[k] = (float)x;
    }
    free(ext);
    return ox_set_const(c, v, (int)t->n_dims, d, is_int, data);
}

/* ---- views and activations ------------------------------------------------------ */

void ox_set_act(ox_ctx *c, int v, sf_tensor_ref ref, int ndim, const int64_t *d, const int8_t *map,
                int is_index) {
    if (v < 0) return; /* an output nobody named */
    ox_value *x = &c->vals[v];
    free(x->f);
    free(x->i);
    x->f = NULL;
    x->i = NULL;
    x->lazy = NULL;
    x->kind = OX_ACT;
    x->ref = ref;
    x->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        x->d[k] = d[k];
        x->map[k] = map[k];
    }
    x->is_index = is_index;
}

const sf_shape *ox_shape_of(const ox_ctx *c, sf_tensor_ref r) {
    return &sf_graph_op(c->g, r.op)->out_shapes[r.out];
}

/* Length of the UTF-8 character s starts (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF; what jansson accepts), or 0 when s[0]
 * starts none. s is NUL-terminated: a NUL fails the continuation test before
 * anything past it is read. */
static size_t utf8_char(const unsigned char *s) {
    unsigned char b = s[0];
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (b >= 0xe0 && b <= 0xef) {
        unsigned char lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        unsigned char lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* 1 when s holds the first bytes of a character and then ends: what is left of
 * a character that a cut of the string split. */
static int utf8_cut_short(const unsigned char *s) {
    if (s[0] < 0xc2 || s[0] > 0xf4) return 0;
    size_t need = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2, i = 1;
    while (i < need && (s[i] & 0xc0) == 0x80) i++;
    return i < need && s[i] == '\0';
}

/* src into dst (cap bytes, NUL included) as valid UTF-8: a byte that starts no
 * character becomes '?', except the rest of a character split by a cut at the
 * end of src (the names below are cut to their buffers), which is left out; the
 * copy ends before a character that would not fit whole. */
void ox_utf8_copy(char *dst, size_t cap, const char *src) {
    const unsigned char *s = (const unsigned char *)src;
    size_t n = 0;
    while (*s) {
        size_t k = utf8_char(s);
        if (!k && utf8_cut_short(s)) break;
        if (n + (k ? k : 1) >= cap) break;
        if (k) {
            memcpy(dst + n, s, k);
            n += k;
            s += k;
        } else {
            dst[n++] = '?';
            s++;
        }
    }
    dst[n] = '\0';
}

/* Names from the file go into messages: control characters and bytes that are
 * not UTF-8 become '?' (the rest of a character cut by a "%.60s" is left out),
 * so a message stays one line of valid text whatever the file holds. In place:
 * the text only shrinks, so writes never pass the reads. */
void ox_one_line(char *str) {
    const unsigned char *s = (const unsigned char *)str;
    char *d = str;
    while (*s) {
        size_t k = utf8_char(s);
        if (!k && utf8_cut_short(s)) break;
        if (k == 1 && (*s < 0x20 || *s == 0x7f)) k = 0;
        if (k) {
            memmove(d, s, k);
            d += k;
            s += k;
        } else {
            *d++ = '?';
            s++;
        }
    }
    *d = '\0';
}

/* A unique operator name from base into buf (cap bytes, well over 16). Names go
 * into model JSON and checkpoint headers, which are UTF-8 text, and ONNX strings
 * should be UTF-8 but protobuf-c does not check that they are: the name keeps
 * what is valid UTF-8 of base, other bytes become '?'. base is cut (between
 * characters) to leave room for the "_k" that makes the name unique: cut after
 * it, two long names alike in their first cap bytes would never become unique. */
void ox_unique_name(const ox_ctx *c, const char *base, char *buf, size_t cap) {
    ox_utf8_copy(buf, cap - 16, base[0] ? base : "op");
    size_t n = strlen(buf);
    for (int k = 2; sf_graph_find(c->g, buf) >= 0; k++) snprintf(buf + n, cap - n, "_%d", k);
}

static sf_status grow_weights(ox_ctx *c, int id) {
    if (!c->want_weights) return SF_OK;
    if (id < c->cap_w) return SF_OK;
    int cap = c->cap_w ? c->cap_w : 64;
    while (cap <= id) cap *= 2;
    float **nw = realloc(c->w, (size_t)cap * sizeof *nw);
    if (!nw) return ox_oom(c);
    for (int k = c->cap_w; k < cap; k++) nw[k] = NULL;
    c->w = nw;
    c->cap_w = cap;
    return SF_OK;
}

/* Add an operator named name (already unique). Its weights buffer is made when
 * the first parameter with data is put into it (weights_buffer): a file without
 * its weights declares sizes it never backs with data, so nothing is allocated
 * for them. */
int ox_add_named(ox_ctx *c, sf_op_type type, const char *name, const sf_op_params *p,
                 const sf_tensor_ref *in, int n_in) {
    return ox_add_fixed(c, type, name, p, in, n_in, NULL, 0);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ox_is_buffer(const ox_ctx *c, const char *name) {
    return name && c->n_buffers > 0 &&
           bsearch(&name, c->buffers, (size_t)c->n_buffers, sizeof *c->buffers, cmp_name) != NULL;
}

int ox_add_fixed(ox_ctx *c, sf_op_type type, const char *name, const sf_op_params *p,
                 const sf_tensor_ref *in, int n_in, const float *fixed, int64_t n_fixed) {
    sf_error local = {0};
    int id = sf_graph_add_op_fixed(c->g, type, name, p, in, n_in, fixed, n_fixed, &local);
    if (id < 0) return ox_fail(c, local.code, "%s", local.msg);
    if (grow_weights(c, id) != SF_OK) return SF_ERR_NOMEM;
    return id;
}

/* The module path torch writes into a node name: "/layer1/layer1.0/relu_1/Relu" is
 * "layer1.0.relu_1"; a final "Type_k" adds "_k". Torch writes each scope as the
 * module's name within its parent's scope, which repeats the parent's own name
 * for children of a Sequential ("/features/features.1/conv/conv.0/Conv" is the
 * module features.1.conv.0): a component that starts with the previous one and
 * a dot replaces it. Empty when the name has no '/'. */
static void module_path(const char *name, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!name || name[0] != '/') return;
    char path[256] = "";
    size_t last = 0; /* where the last component starts in path */
    const char *p = name + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash) break; /* p is the final component: the op type */
        size_t n = (size_t)(slash - p);
        char comp[160];
        if (n >= sizeof comp) n = sizeof comp - 1;
        memcpy(comp, p, n);
        comp[n] = '\0';
        size_t pl = strlen(path), ll = pl - last;
        if (n && pl && n > ll && strncmp(comp, path + last, ll) == 0 && comp[ll] == '.') {
            snprintf(path + last, sizeof path - last, "%s", comp);
        } else if (n) {
            last = pl ? pl + 1 : 0;
            snprintf(path + pl, sizeof path - pl, "%s%s", pl ? "." : "", comp);
        }
        p = slash + 1;
    }
    const char *us = strrchr(p, '_');
    int k = 0;
    if (us && us[1] && strspn(us + 1, "0123456789") == strlen(us + 1)) k = atoi(us + 1);
    if (!path[0]) {
        /* a top-level call ("/Flatten", "/Add_1"): the type, lower case */
        size_t n = strlen(p) < cap - 1 ? strlen(p) : cap - 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
        buf[n] = '\0';
        return;
    }
    if (k > 0)
        snprintf(buf, cap, "%s_%d", path, k);
    else
        snprintf(buf, cap, "%s", path);
}

static void op_base_name(const ox_ctx *c, int node, const char *wname, char *buf, size_t cap) {
    /* longest first: an attention is named after its module, not its out_proj */
    static const char *const suffixes[] = {".out_proj.weight", ".in_proj_weight", ".weight"};
    if (wname && strncmp(wname, "onnx::", 6) != 0) {
        size_t n = strlen(wname);
        for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0]; s++) {
            size_t k = strlen(suffixes[s]);
            if (n > k && strcmp(wname + n - k, suffixes[s]) == 0) {
                size_t m = n - k < cap - 1 ? n - k : cap - 1;
                memcpy(buf, wname, m);
                buf[m] = '\0';
                return;
            }
        }
    }
    const Onnx__NodeProto *n = node >= 0 ? c->graph->node[node] : NULL;
    if (n) {
        module_path(n->name, buf, cap);
        if (buf[0]) return;
        if (n->name && n->name[0]) {
            snprintf(buf, cap, "%s", n->name);
            return;
        }
        snprintf(buf, cap, "%s_%d", n->op_type ? n->op_type : "op", node);
        for (char *q = buf; *q; q++)
            if (*q >= 'A' && *q <= 'Z') *q = (char)(*q + 32);
        return;
    }
    snprintf(buf, cap, "op");
}

int ox_add_op(ox_ctx *c, sf_op_type type, const sf_op_params *p, const sf_tensor_ref *in, int n_in,
              const char *wname) {
    char base[256], name[300];
    op_base_name(c, c->cur_node, wname, base, sizeof base);
    ox_unique_name(c, base, name, sizeof name);
    return ox_add_named(c, type, name, p, in, n_in);
}

int ox_add_op_fixed(ox_ctx *c, sf_op_type type, const sf_op_params *p, const sf_tensor_ref *in,
                    int n_in, const float *fixed, int64_t n_fixed) {
    char base[256], name[300];
    op_base_name(c, c->cur_node, NULL, base, sizeof base);
    ox_unique_name(c, base, name, sizeof name);
    return ox_add_fixed(c, type, name, p, in, n_in, fixed, n_fixed);
}

/* The graph input operator of INPUT value v: the batch dimension first. */
static sf_status make_input(ox_ctx *c, int v) {
    ox_value *x = &c->vals[v];
    if (x->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "graph input '%.100s' has rank %d (at most %d)",
                       x->name, x->ndim, SF_MAX_DIMS);
    if (x->ndim < 1)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "graph input '%.100s' is a scalar; soapflow inputs have a batch dimension",
                       x->name);
    int bd = x->batch_dim >= 0 ? x->batch_dim : 0;
    int64_t sd[SF_MAX_DIMS];
    int8_t map[OX_MAX_RANK];
    sd[0] = x->d[bd];
    map[bd] = 0;
    for (int k = 0, j = 1; k < x->ndim; k++)
        if (k != bd) {
            sd[j] = x->d[k];
            map[k] = (int8_t)j++;
        }
    sf_op_params p;
    sf_op_params_default(SF_OP_INPUT, &p);
    p.input.shape = sf_shape_make(x->ndim, sd);
    p.input.is_index = x->is_index;
    char name[300];
    ox_unique_name(c, x->name, name, sizeof name);
    int saved = c->cur_node;
    int id = ox_add_named(c, SF_OP_INPUT, name, &p, NULL, 0);
    c->cur_node = saved;
    if (id < 0) return (sf_status)id;
    int64_t d[OX_MAX_RANK];
    memcpy(d, x->d, sizeof d);
    ox_set_act(c, v, (sf_tensor_ref){id, 0}, x->ndim, d, map, x->is_index);
    return SF_OK;
}

sf_status ox_act(ox_ctx *c, int v) {
    if (v < 0) return ox_fail(c, SF_ERR_INVALID, "an input is missing");
    ox_value *x = &c->vals[v];
    switch (x->kind) {
    case OX_ACT: return SF_OK;
    case OX_INPUT: return make_input(c, v);
    case OX_PEND:
        /* the pattern that made it says how it becomes an activation (or why not) */
        if (!c->pend_force || (unsigned)x->pend >= OX_PEND_COUNT)
            return ox_fail(c, SF_ERR_INTERNAL, "input '%.100s' is pending on no pattern", x->name);
        return c->pend_force[x->pend](c, v);
    case OX_CONST:
    case OX_WEIGHT:
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "input '%.100s' is a constant here; soapflow operators take constants "
                       "only as their weights",
                       x->name);
    case OX_NONE:
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "reads '%.100s', an output soapflow does not model (running statistics, "
                       "masks, indices)",
                       x->name);
    default: return ox_fail(c, SF_ERR_INVALID, "input '%.100s' has no value", x->name);
    }
}

sf_status ox_natural(ox_ctx *c, int v, sf_tensor_ref *out) {
    sf_status st = ox_act(c, v);
    if (st != SF_OK) return st;
    ox_value *x = &c->vals[v];
    const sf_shape *s = ox_shape_of(c, x->ref);
    int identity = x->ndim == s->ndim;
    for (int k = 0; identity && k < x->ndim; k++) identity = x->map[k] == k;
    if (identity) {
        *out = x->ref;
        return SF_OK;
    }
    /* only size-1 dimensions differ: the same elements in the same order */
    int monotonic = x->ndim >= 1 && x->map[0] == 0, last = -1;
    for (int k = 0; monotonic && k < x->ndim; k++) {
        if (x->map[k] < 0) continue;
        if (x->map[k] <= last) monotonic = 0;
        last = x->map[k];
    }
    if (!monotonic && x->ndim >= 1 && x->map[0] == 0) {
        /* the batch first, other dimensions in another order: a transpose operator
         * puts the tensor's dimensions in the view's order (those the view does
         * not name, of size 1, last), then the view differs only in size-1
         * dimensions */
        sf_op_params p;
        sf_op_params_default(SF_OP_TRANSPOSE, &p);
        int named[SF_MAX_DIMS] = {0}, m = 0, pos[SF_MAX_DIMS];
        for (int k = 0; k < x->ndim; k++)
            if (x->map[k] >= 0) {
                pos[x->map[k]] = m;
                p.transpose.perm[m++] = x->map[k];
                named[x->map[k]] = 1;
            }
        for (int j = 0; j < s->ndim; j++)
            if (!named[j]) p.transpose.perm[m++] = j;
        p.transpose.ndim = s->ndim;
        char base[300], name[320];
        snprintf(base, sizeof base, "%s.transpose", sf_graph_op(c->g, x->ref.op)->name);
        ox_unique_name(c, base, name, sizeof name);
        int id = ox_add_named(c, SF_OP_TRANSPOSE, name, &p, &x->ref, 1);
        if (id < 0) return (sf_status)id;
        x = &c->vals[v];
        x->ref = (sf_tensor_ref){id, 0};
        for (int k = 0; k < x->ndim; k++)
            if (x->map[k] >= 0) x->map[k] = (int8_t)pos[x->map[k]];
        s = ox_shape_of(c, x->ref);
        identity = x->ndim == s->ndim;
        for (int k = 0; identity && k < x->ndim; k++) identity = x->map[k] == k;
        if (identity) {
            *out = x->ref;
            return SF_OK;
        }
        monotonic = 1;
    }
    if (!monotonic) {
        char a[96], b[96];
        int64_t sd[OX_MAX_RANK];
        for (int k = 0; k < s->ndim; k++) sd[k] = s->d[k];
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "input '%.100s' (%s) is a view of a tensor of soapflow's graph (%s, "
                       "batch first) that moves the batch dimension: soapflow keeps the batch "
                       "first",
                       x->name, ox_dims_str(x->ndim, x->d, a, sizeof a),
                       ox_dims_str(s->ndim, sd, b, sizeof b));
    }
    if (x->ndim > SF_MAX_DIMS)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "input '%.100s' has rank %d (at most %d)", x->name,
                       x->ndim, SF_MAX_DIMS);
    sf_op_params p;
    sf_op_params_default(SF_OP_RESHAPE, &p);
    p.reshape.ndim = x->ndim;
    p.reshape.shape[0] = 0; /* the batch, copied */
    for (int k = 1; k < x->ndim; k++) p.reshape.shape[k] = x->d[k];
    char base[300], name[320];
    snprintf(base, sizeof base, "%s.view", sf_graph_op(c->g, x->ref.op)->name);
    ox_unique_name(c, base, name, sizeof name);
    int id = ox_add_named(c, SF_OP_RESHAPE, name, &p, &x->ref, 1);
    if (id < 0) return (sf_status)id;
    x = &c->vals[v];
    x->ref = (sf_tensor_ref){id, 0};
    for (int k = 0; k < x->ndim; k++) x->map[k] = (int8_t)k;
    *out = x->ref;
    return SF_OK;
}

/* ---- weights ----------------------------------------------------------------------- */

const float *ox_weight(ox_ctx *c, int v, const char *what, int *ok) {
    *ok = 0;
    if (v <= 0) {
        ox_fail(c, SF_ERR_INVALID, "the %s is missing", what);
        return NULL;
    }
    ox_value *x = &c->vals[v];
    if (x->kind == OX_INPUT) x->kind = OX_WEIGHT; /* exported without its parameters */
    if (x->kind == OX_WEIGHT) {
        *ok = 1;
        return NULL;
    }
    if (x->kind != OX_CONST) {
        ox_fail(c, SF_ERR_UNSUPPORTED,
                "the %s '%.100s' is computed by the model; soapflow takes weights that are "
                "initializers (constants)",
                what, x->name);
        return NULL;
    }
    if (x->is_index) {
        ox_fail(c, SF_ERR_UNSUPPORTED, "the %s '%.100s' holds integers, not floats", what, x->name);
        return NULL;
    }
    *ok = 1;
    return x->f;
}

static const sf_param_desc *find_param(const ox_ctx *c, int op, const char *pname,
                                       sf_param_desc *d) {
    int np = sf_op_param_descs(sf_graph_op(c->g, op), d);
    for (int k = 0; k < np; k++)
        if (strcmp(d[k].name, pname) == 0) return &d[k];
    return NULL;
}

/* The full-layout buffer of op (calloc'd on first use), or NULL with err set. */
static float *weights_buffer(ox_ctx *c, int op) {
    if (c->w[op]) return c->w[op];
    int64_t n = sf_graph_op(c->g, op)->n_params;
    c->w[op] = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!c->w[op]) ox_oom(c);
    return c->w[op];
}

sf_status ox_put_param(ox_ctx *c, int op, const char *pname, const float *src, int64_t numel) {
    sf_param_desc d[SF_MAX_PARAMS];
    const sf_param_desc *pd = find_param(c, op, pname, d);
    if (!pd)
        return ox_fail(c, SF_ERR_INTERNAL, "operator '%s' has no parameter '%s'",
                       sf_graph_op(c->g, op)->name, pname);
    if (sf_shape_numel(&pd->shape) != numel)
        return ox_fail(c, SF_ERR_SHAPE, "the %s has %lld elements, %lld expected", pname,
                       (long long)numel, (long long)sf_shape_numel(&pd->shape));
    c->filled += numel;
    if (!src) {
        c->weights_missing = 1;
        return SF_OK;
    }
    if (!c->want_weights || c->weights_missing) return SF_OK; /* nothing will be returned */
    float *w = weights_buffer(c, op);
    if (!w) return SF_ERR_NOMEM;
    memcpy(w + pd->offset, src, (size_t)numel * sizeof *src);
    return SF_OK;
}

sf_status ox_fill_param(ox_ctx *c, int op, const char *pname, float value) {
    sf_param_desc d[SF_MAX_PARAMS];
    const sf_param_desc *pd = find_param(c, op, pname, d);
    if (!pd)
        return ox_fail(c, SF_ERR_INTERNAL, "operator '%s' has no parameter '%s'",
                       sf_graph_op(c->g, op)->name, pname);
    int64_t numel = sf_shape_numel(&pd->shape);
    c->filled += numel;
    if (!c->want_weights || c->weights_missing) return SF_OK;
    float *w = weights_buffer(c, op);
    if (!w) return SF_ERR_NOMEM;
    for (int64_t k = 0; k < numel; k++) w[pd->offset + k] = value;
    return SF_OK;
}

void ox_ctx_free(ox_ctx *c) {
    for (int v = 0; v < c->n_vals; v++) {
        free(c->vals[v].f);
        free(c->vals[v].i);
    }
    free(c->vals);
    free(c->hash);
    free(c->order);
    free(c->live);
    free(c->lin);
    free(c->attn);
    free(c->attn_val);
    free(c->emb);
    free(c->pat);
    free(c->pat_stage);
}
