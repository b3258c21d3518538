/*
 * model_json.c - the model file format: a graph as JSON (docs/formats.md, "Model files").
 *
 *     {"format": "soapflow-model", "version": 1, "name": "tiny", "ops": [
 *       {"name": "x", "type": "input", "shape": [64, 3, 32, 32], "is_index": false},
 *       {"name": "c1", "type": "conv2d", "inputs": ["x"], "out_channels": 16, ...}]}
 *
 * Generic over operators: an operator's attributes are the flat keys of its object,
 * read and written through the descriptor table each operator publishes
 * (sf_op_attrs), so this file knows no operator by name and a new operator needs no
 * change here. Reading starts from the type's defaults; writing writes every
 * attribute, in descriptor order, so that load(save(g)) rebuilds g exactly and
 * save(load(save(g))) is the same text byte for byte.
 *
 * Messages name the file, the line and the column, and the operator. jansson gives a
 * position for syntax errors only: it keeps no positions of values. Rather than
 * write a second JSON parser that keeps them, a small scanner (json_pos.c, shared
 * with the strategy reader) walks the raw text (already known to be valid JSON)
 * along a path such as ops[12].kernel and returns the offset where that member
 * starts; it runs only when there is an error to report, so loading costs one
 * jansson parse. Names are resolved through a jansson
 * object used as a hash table, so loading stays linear in the number of operators.
 *
 * Writing builds each operator's object with jansson and dumps it on one line
 * (keys in a fixed order, no indentation inside), inside a hand-written two-space
 * indented frame: one operator per line keeps files of thousands of operators
 * readable and diffable. Floats are written with the fewest digits (at most 17)
 * that read back to the same double.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "soapflow/io.h"

#include "json_pos.h"

#define MODEL_FORMAT "soapflow-model"
#define MODEL_VERSION 1

/* ---- reading ----------------------------------------------------------- */

typedef struct reader {
    const char *text;
    size_t len;
    const char *origin;
    json_t *ops; /* the "ops" array */
    json_t *ids; /* operator name -> id, for operators read so far */
    sf_graph *g;
    sf_error *err;
} reader;

/* Record "origin:line:col: who: message" where the member at `path` starts. */
static sf_status fail_at(reader *r, const sf_json_step *path, int n_path, const char *who,
                         sf_status st, const char *fmt, ...) SF_PRINTF(6, 7);
static sf_status fail_at(reader *r, const sf_json_step *path, int n_path, const char *who,
                         sf_status st, const char *fmt, ...) {
    char msg[SF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col; /* a member is found by its key */
    sf_json_line_col(r->text, r->len, sf_json_locate(r->text, r->len, path, n_path).key, &line,
                     &col);
    if (who) return sf_error_set(r->err, st, "%s:%d:%d: %s: %s", r->origin, line, col, who, msg);
    return sf_error_set(r->err, st, "%s:%d:%d: %s", r->origin, line, col, msg);
}

/* sf_graph messages already start with "operator 'name' (type): " or "operator
 * 'name': "; drop that so the operator is named once, after the position. */
static const char *strip_op_prefix(const char *msg, const char *name, const char *type) {
    char pre[SF_ERRMSG_MAX];
    snprintf(pre, sizeof pre, "operator '%s' (%s): ", name, type);
    size_t n = strlen(pre);
    if (strncmp(msg, pre, n) == 0) return msg + n;
    snprintf(pre, sizeof pre, "operator '%s': ", name);
    n = strlen(pre);
    if (strncmp(msg, pre, n) == 0) return msg + n;
    return msg;
}

static int name_id(const reader *r, const char *name) {
    json_t *v = json_object_get(r->ids, name);
    return v ? (int)json_integer_value(v) : -1;
}

/* "Defined later" beats "unknown" when the name exists further down. */
static long later_index(const reader *r, size_t from, const char *name) {
    for (size_t i = from; i < json_array_size(r->ops); i++) {
        const char *s = json_string_value(json_object_get(json_array_get(r->ops, i), "name"));
        if (s && strcmp(s, name) == 0) return (long)i;
    }
    return -1;
}

static int is_reserved_key(const char *k) {
    return !strcmp(k, "name") || !strcmp(k, "type") || !strcmp(k, "inputs") ||
           !strcmp(k, "share_weights") || !strcmp(k, "fixed");
}

static int all_integers(const json_t *a) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v)) return 0;
    }
    return 1;
}

/* Store JSON value v into the attribute d of p, or say what is wrong in msg. */
static sf_status read_attr(const sf_attr_desc *d, const json_t *v, sf_op_params *p, char *msg,
                           size_t cap) {
    char *base = (char *)p + d->offset;
    switch (d->type) {
    case SF_ATTR_INT:
        if (!json_is_integer(v)) break;
        *(int64_t *)(void *)base = (int64_t)json_integer_value(v);
        return SF_OK;
    case SF_ATTR_INTS: {
        size_t n = json_array_size(v);
        if (d->count > 0) {
            if (!json_is_array(v) || n != (size_t)d->count || !all_integers(v)) {
                snprintf(msg, cap, "attribute '%s' must be an array of %d integers", d->name,
                         d->count);
                return SF_ERR_PARSE;
            }
        } else if (!json_is_array(v) || n > (size_t)d->max_count || !all_integers(v)) {
            snprintf(msg, cap, "attribute '%s' must be an array of at most %d integers", d->name,
                     d->max_count);
            return SF_ERR_PARSE;
        } else {
            *(int *)(void *)((char *)p + d->count_offset) = (int)n;
        }
        int64_t *arr = (int64_t *)(void *)base;
        for (size_t i = 0; i < n; i++) arr[i] = (int64_t)json_integer_value(json_array_get(v, i));
        return SF_OK;
    }
    case SF_ATTR_BOOL:
        if (!json_is_boolean(v)) {
            snprintf(msg, cap, "attribute '%s' must be true or false", d->name);
            return SF_ERR_PARSE;
        }
        *(int *)(void *)base = json_is_true(v) ? 1 : 0;
        return SF_OK;
    case SF_ATTR_FLOAT:
        if (d->allow_inf && json_is_string(v) &&
            (!strcmp(json_string_value(v), "inf") || !strcmp(json_string_value(v), "-inf"))) {
            *(double *)(void *)base = json_string_value(v)[0] == '-' ? -INFINITY : INFINITY;
            return SF_OK;
        }
        if (!json_is_number(v)) {
            if (d->allow_inf) {
                snprintf(msg, cap, "attribute '%s' must be a number, \"inf\" or \"-inf\"",
                         d->name);
                return SF_ERR_PARSE;
            }
            snprintf(msg, cap, "attribute '%s' must be a number", d->name);
            return SF_ERR_PARSE;
        }
        *(double *)(void *)base = json_number_value(v);
        return SF_OK;
    case SF_ATTR_ENUM: {
        const char *s = json_string_value(v);
        for (int k = 0; s && k < d->n_enum; k++) {
            if (strcmp(s, d->enum_names[k]) == 0) {
                *(int *)(void *)base = k;
                return SF_OK;
            }
        }
        size_t off = (size_t)snprintf(msg, cap, "attribute '%s' must be one of", d->name);
        for (int k = 0; k < d->n_enum && off < cap; k++)
            off +=
                (size_t)snprintf(msg + off, cap - off, "%s \"%s\"", k ? "," : "", d->enum_names[k]);
        return SF_ERR_PARSE;
    }
    case SF_ATTR_SMALLINT:
        if (!json_is_integer(v)) break;
        if (json_integer_value(v) < INT_MIN || json_integer_value(v) > INT_MAX) {
            snprintf(msg, cap, "attribute '%s' is out of range: %lld", d->name,
                     (long long)json_integer_value(v));
            return SF_ERR_RANGE;
        }
        *(int *)(void *)base = (int)json_integer_value(v);
        return SF_OK;
    }
    snprintf(msg, cap, "attribute '%s' must be an integer", d->name);
    return SF_ERR_PARSE;
}

/* "name" is output 0; "name:k" is output k when "name" is an operator read so far.
 * A name that itself ends in ":digits" is found whole when the prefix is not one. */
static int parse_ref(const reader *r, const char *s, sf_tensor_ref *ref, int *range_error) {
    *range_error = 0;
    const char *colon = strrchr(s, ':');
    if (colon && colon[1]) {
        const char *q = colon + 1;
        long long k = 0;
        int digits = 1, big = 0;
        for (; *q; q++) {
            if (*q < '0' || *q > '9') {
                digits = 0;
                break;
            }
            if (k <= INT_MAX) k = k * 10 + (*q - '0');
            if (k > INT_MAX) big = 1;
        }
        if (digits) {
            size_t n = (size_t)(colon - s);
            char *prefix = malloc(n + 1);
            if (prefix) {
                memcpy(prefix, s, n);
                prefix[n] = '\0';
                int id = name_id(r, prefix);
                free(prefix);
                if (id >= 0) {
                    if (big) {
                        *range_error = 1;
                        return -1;
                    }
                    ref->op = id;
                    ref->out = (int)k;
                    return 0;
                }
            }
        }
    }
    ref->op = name_id(r, s);
    ref->out = 0;
    return ref->op >= 0 ? 0 : -1;
}

static sf_status read_op(reader *r, size_t i, json_t *obj) {
    sf_json_step at[4] = {{"ops", 0}, {NULL, i}, {NULL, 0}, {NULL, 0}};
    char who[SF_ERRMSG_MAX];
    snprintf(who, sizeof who, "operator #%zu", i);
    if (!json_is_object(obj)) return fail_at(r, at, 2, who, SF_ERR_PARSE, "must be an object");

    const char *name = json_string_value(json_object_get(obj, "name"));
    at[2].key = "name";
    if (!json_object_get(obj, "name"))
        return fail_at(r, at, 2, who, SF_ERR_PARSE, "missing \"name\"");
    if (!name || !*name)
        return fail_at(r, at, 3, who, SF_ERR_PARSE, "\"name\" must be a non-empty string");
    snprintf(who, sizeof who, "operator '%s'", name);

    at[2].key = "type";
    json_t *jt = json_object_get(obj, "type");
    if (!jt) return fail_at(r, at, 2, who, SF_ERR_PARSE, "missing \"type\"");
    if (!json_is_string(jt))
        return fail_at(r, at, 3, who, SF_ERR_PARSE, "\"type\" must be a string");
    sf_op_type type;
    if (sf_op_type_from_name(json_string_value(jt), &type) != SF_OK)
        return fail_at(r, at, 3, who, SF_ERR_NOTFOUND, "unknown operator type '%s'",
                       json_string_value(jt));
    const char *tname = sf_op_type_name(type);
    snprintf(who, sizeof who, "operator '%s' (%s)", name, tname);

    int n_attrs = 0;
    const sf_attr_desc *attrs = sf_op_attrs(type, &n_attrs);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = is_reserved_key(key);
        for (int a = 0; a < n_attrs && !known; a++) known = strcmp(key, attrs[a].name) == 0;
        if (!known) {
            at[2].key = key;
            return fail_at(r, at, 3, who, SF_ERR_PARSE, "unknown attribute '%s'", key);
        }
    }

    sf_op_params p;
    sf_op_params_default(type, &p);
    for (int a = 0; a < n_attrs; a++) {
        v = json_object_get(obj, attrs[a].name);
        if (!v) continue;
        char msg[SF_ERRMSG_MAX];
        sf_status st = read_attr(&attrs[a], v, &p, msg, sizeof msg);
        if (st != SF_OK) {
            at[2].key = attrs[a].name;
            return fail_at(r, at, 3, who, st, "%s", msg);
        }
    }
    /* A variable array sets its count, which may also be an attribute of its own
     * (a split's "parts" and "sizes"): when both are given they must agree. */
    for (int a = 0; a < n_attrs; a++) {
        const sf_attr_desc *d = &attrs[a];
        json_t *arr = json_object_get(obj, d->name);
        if (d->type != SF_ATTR_INTS || d->count > 0 || !arr) continue;
        for (int e = 0; e < n_attrs; e++) {
            json_t *cnt = json_object_get(obj, attrs[e].name);
            if (attrs[e].type != SF_ATTR_SMALLINT || attrs[e].offset != d->count_offset || !cnt)
                continue;
            if (json_integer_value(cnt) != (json_int_t)json_array_size(arr)) {
                at[2].key = d->name;
                return fail_at(r, at, 3, who, SF_ERR_INVALID,
                               "attribute '%s' has %zu elements but '%s' is %lld", d->name,
                               json_array_size(arr), attrs[e].name,
                               (long long)json_integer_value(cnt));
            }
        }
    }

    if (json_object_get(r->ids, name)) {
        int prev = name_id(r, name), line, col;
        sf_json_step pat[2] = {{"ops", 0}, {NULL, (size_t)prev}};
        sf_json_line_col(r->text, r->len, sf_json_locate(r->text, r->len, pat, 2).key, &line, &col);
        return fail_at(r, at, 2, who, SF_ERR_INVALID,
                       "name already used by operator #%d on line %d", prev, line);
    }

    json_t *jin = json_object_get(obj, "inputs");
    size_t n_in = json_array_size(jin);
    at[2].key = "inputs";
    if (jin && !json_is_array(jin))
        return fail_at(r, at, 3, who, SF_ERR_PARSE, "\"inputs\" must be an array of names");
    if (n_in > INT_MAX) return fail_at(r, at, 3, who, SF_ERR_RANGE, "too many inputs");
    sf_tensor_ref *refs = calloc(n_in ? n_in : 1, sizeof *refs);
    if (!refs) return sf_error_set(r->err, SF_ERR_NOMEM, "%s: out of memory", r->origin);
    for (size_t k = 0; k < n_in; k++) {
        const char *s = json_string_value(json_array_get(jin, k));
        at[3].index = k;
        sf_status st = SF_OK;
        int range_error;
        if (!s) {
            st = fail_at(r, at, 4, who, SF_ERR_PARSE, "input %zu must be a string", k);
        } else if (parse_ref(r, s, &refs[k], &range_error) < 0) {
            long later = range_error ? -1 : later_index(r, i, s);
            if (later == (long)i)
                st = fail_at(r, at, 4, who, SF_ERR_INVALID, "an operator cannot be its own input");
            else if (range_error)
                st = fail_at(r, at, 4, who, SF_ERR_RANGE, "input '%s': output index out of range",
                             s);
            else if (later >= 0)
                st = fail_at(r, at, 4, who, SF_ERR_INVALID,
                             "input '%s' is operator #%ld, listed later; operators must come "
                             "after their inputs",
                             s, later);
            else
                st = fail_at(r, at, 4, who, SF_ERR_NOTFOUND, "unknown input '%s'", s);
        } else if (refs[k].out >= sf_graph_op(r->g, refs[k].op)->n_outputs) {
            const sf_op *src = sf_graph_op(r->g, refs[k].op);
            st = fail_at(r, at, 4, who, SF_ERR_INVALID,
                         "input '%s' uses output %d of '%s', which has %d", s, refs[k].out,
                         src->name, src->n_outputs);
        }
        if (st != SF_OK) {
            free(refs);
            return st;
        }
    }

    /* "fixed": the fixed tensor of masked_fill, add_const, mul_const, row-major */
    json_t *jf = json_object_get(obj, "fixed");
    float *fixed = NULL;
    int64_t n_fixed = 0;
    if (jf) {
        at[2].key = "fixed";
        size_t nf = json_array_size(jf);
        int64_t want = sf_op_fixed_count(type, &p);
        sf_status st = SF_OK;
        if (!json_is_array(jf))
            st = fail_at(r, at, 3, who, SF_ERR_PARSE, "\"fixed\" must be an array of numbers");
        else if (want == 0)
            st = fail_at(r, at, 3, who, SF_ERR_INVALID, "a %s holds no fixed tensor", tname);
        else if (want < 0 || (int64_t)nf != want)
            st = fail_at(r, at, 3, who, SF_ERR_INVALID,
                         "\"fixed\" has %zu values, its shape needs %lld", nf, (long long)want);
        else if (!(fixed = malloc(nf * sizeof *fixed)))
            st = sf_error_set(r->err, SF_ERR_NOMEM, "%s: out of memory", r->origin);
        for (size_t k = 0; st == SF_OK && k < nf; k++) {
            json_t *e = json_array_get(jf, k);
            double x = json_number_value(e);
            if (!json_is_number(e) || !(fabs(x) <= FLT_MAX)) {
                at[3].index = k;
                st = fail_at(r, at, 4, who, SF_ERR_PARSE,
                             "fixed value %zu must be a finite number in float's range", k);
            } else {
                fixed[k] = (float)x;
            }
        }
        if (st != SF_OK) {
            free(fixed);
            free(refs);
            return st;
        }
        n_fixed = (int64_t)nf;
    }

    sf_error local = {0};
    int id = sf_graph_add_op_fixed(r->g, type, name, &p, refs, (int)n_in, fixed, n_fixed, &local);
    free(fixed);
    free(refs);
    if (id < 0)
        return fail_at(r, at, 2, who, local.code, "%s", strip_op_prefix(local.msg, name, tname));
    json_t *jid = json_integer(id);
    if (!jid || json_object_set_new(r->ids, name, jid) != 0)
        return sf_error_set(r->err, SF_ERR_NOMEM, "%s: out of memory", r->origin);

    json_t *js = json_object_get(obj, "share_weights");
    if (js) {
        at[2].key = "share_weights";
        const char *owner = json_string_value(js);
        if (!owner)
            return fail_at(r, at, 3, who, SF_ERR_PARSE,
                           "\"share_weights\" must be the name of an operator");
        int oid = name_id(r, owner);
        if (oid < 0 || oid == id)
            return fail_at(r, at, 3, who, oid < 0 ? SF_ERR_NOTFOUND : SF_ERR_INVALID,
                           oid < 0 ? "share_weights: unknown operator '%s'"
                                   : "share_weights: '%s' is this operator",
                           owner);
        if (sf_graph_share_weights(r->g, id, oid, &local) != SF_OK)
            return fail_at(r, at, 3, who, local.code, "%s",
                           strip_op_prefix(local.msg, name, tname));
    }
    return SF_OK;
}

static sf_status read_model(reader *r, json_t *root) {
    sf_json_step at[1] = {{NULL, 0}};
    if (!json_is_object(root))
        return fail_at(r, NULL, 0, NULL, SF_ERR_PARSE, "a model must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "format") && strcmp(key, "version") && strcmp(key, "name") &&
            strcmp(key, "ops")) {
            at[0].key = key;
            return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "unknown field '%s'", key);
        }
    }
    at[0].key = "format";
    const char *fmt = json_string_value(json_object_get(root, "format"));
    if (!fmt || strcmp(fmt, MODEL_FORMAT) != 0)
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE,
                       "not a soapflow model: \"format\" must be \"" MODEL_FORMAT "\"");
    at[0].key = "version";
    json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver))
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "\"version\" must be an integer");
    if (json_integer_value(ver) != MODEL_VERSION)
        return fail_at(r, at, 1, NULL, SF_ERR_UNSUPPORTED,
                       "version %lld is not supported (this soapflow reads version %d)",
                       (long long)json_integer_value(ver), MODEL_VERSION);
    at[0].key = "name";
    json_t *jname = json_object_get(root, "name");
    if (jname && !json_is_string(jname))
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "\"name\" must be a string");
    at[0].key = "ops";
    r->ops = json_object_get(root, "ops");
    if (!r->ops) return fail_at(r, NULL, 0, NULL, SF_ERR_PARSE, "missing \"ops\"");
    if (!json_is_array(r->ops))
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "\"ops\" must be an array of operators");
    /* nothing can be planned, simulated or profiled on no operators; refused
     * here, so that every command says the same line (search once crashed on it) */
    if (json_array_size(r->ops) == 0)
        return fail_at(r, at, 1, NULL, SF_ERR_INVALID,
                       "\"ops\" is empty: a model needs at least one operator");

    r->g = sf_graph_new(jname ? json_string_value(jname) : "model");
    r->ids = json_object();
    if (!r->g || !r->ids) return sf_error_set(r->err, SF_ERR_NOMEM, "%s: out of memory", r->origin);
    size_t i;
    json_array_foreach(r->ops, i, v) {
        sf_status st = read_op(r, i, v);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}

static sf_graph *parse_text(const char *text, size_t len, const char *origin, sf_error *err) {
    if (!origin) origin = "<model>";
    size_t k = 0;
    while (k < len && text[k] && strchr(" \t\r\n", text[k])) k++;
    if (k == len) {
        sf_error_set(err, SF_ERR_PARSE, "%s: empty file, expected a soapflow model", origin);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (jerr.line > 0)
            sf_error_set(err, SF_ERR_PARSE, "%s:%d:%d: %s", origin, jerr.line, jerr.column,
                         jerr.text);
        else
            sf_error_set(err, SF_ERR_PARSE, "%s: %s", origin, jerr.text);
        return NULL;
    }
    reader r = {text, len, origin, NULL, NULL, NULL, err};
    sf_status st = read_model(&r, root);
    json_decref(r.ids);
    json_decref(root);
    if (st != SF_OK) {
        sf_graph_free(r.g);
        return NULL;
    }
    return r.g;
}

sf_graph *sf_model_parse_json(const char *text, const char *origin, sf_error *err) {
    if (!text) {
        sf_error_set(err, SF_ERR_INVALID, "sf_model_parse_json: no text");
        return NULL;
    }
    return parse_text(text, strlen(text), origin, err);
}

sf_graph *sf_model_load_json(const char *path, sf_error *err) {
    size_t len = 0;
    char *text = sf_read_file(path, &len, err);
    if (!text) return NULL;
    sf_graph *g = parse_text(text, len, path, err);
    free(text);
    return g;
}

/* ---- writing ----------------------------------------------------------- */

/* Fewest significant digits that read back to exactly x (17 always do). */
static int real_digits(double x) {
    char buf[64];
    for (int p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return p;
    }
    return 17;
}

/* "name" for output 0, "name:k" otherwise; "name:0" when the plain name would
 * read back as an output of another operator listed before `user`. */
static json_t *ref_string(const sf_graph *g, sf_tensor_ref ref, int user) {
    const char *name = sf_graph_op(g, ref.op)->name;
    char *buf = malloc(strlen(name) + 16);
    if (!buf) return NULL;
    int explicit_out = ref.out != 0;
    const char *colon = strrchr(name, ':');
    if (!explicit_out && colon && colon[1] &&
        strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        size_t n = (size_t)(colon - name);
        memcpy(buf, name, n);
        buf[n] = '\0';
        int other = sf_graph_find(g, buf);
        explicit_out = other >= 0 && other < user;
    }
    if (explicit_out)
        sprintf(buf, "%s:%d", name, ref.out);
    else
        strcpy(buf, name);
    json_t *s = json_string(buf);
    free(buf);
    return s;
}

/* Set obj[key] = v, taking v; returns -1 (after dropping v) on failure. */
static int put(json_t *obj, const char *key, json_t *v) {
    if (!v) return -1;
    return json_object_set_new(obj, key, v);
}

static json_t *attr_value(const sf_attr_desc *d, const sf_op_params *p, sf_error *err,
                          const sf_op *op) {
    const char *base = (const char *)p + d->offset;
    switch (d->type) {
    case SF_ATTR_INT:
        return json_integer((json_int_t)(*(const int64_t *)(const void *)base));
    case SF_ATTR_INTS: {
        int n = d->count > 0 ? d->count
                             : *(const int *)(const void *)((const char *)p + d->count_offset);
        if (n < 0 || (d->count == 0 && n > d->max_count)) {
            sf_error_set(err, SF_ERR_INTERNAL, "operator '%s': attribute '%s' has %d elements",
                         op->name, d->name, n);
            return NULL;
        }
        json_t *a = json_array();
        const int64_t *arr = (const int64_t *)(const void *)base;
        for (int i = 0; a && i < n; i++) {
            if (json_array_append_new(a, json_integer((json_int_t)arr[i])) != 0) {
                json_decref(a);
                a = NULL;
            }
        }
        return a;
    }
    case SF_ATTR_BOOL:
        return json_boolean(*(const int *)(const void *)base);
    case SF_ATTR_FLOAT: {
        double f = *(const double *)(const void *)base;
        if (d->allow_inf && isinf(f)) return json_string(f < 0 ? "-inf" : "inf");
        json_t *x = json_real(f);
        if (!x)
            sf_error_set(err, SF_ERR_RANGE, "operator '%s': attribute '%s' is not a finite number",
                         op->name, d->name);
        return x;
    }
    case SF_ATTR_ENUM: {
        int k = *(const int *)(const void *)base;
        if (k < 0 || k >= d->n_enum) {
            sf_error_set(err, SF_ERR_INTERNAL, "operator '%s': attribute '%s' has no name for %d",
                         op->name, d->name, k);
            return NULL;
        }
        return json_string(d->enum_names[k]);
    }
    case SF_ATTR_SMALLINT:
        return json_integer(*(const int *)(const void *)base);
    }
    sf_error_set(err, SF_ERR_INTERNAL, "operator '%s': attribute '%s' has an unknown type",
                 op->name, d->name);
    return NULL;
}

/* One operator's object on one line, or NULL with err set. */
static char *op_line(const sf_graph *g, const sf_op *op, sf_error *err) {
    json_t *o = json_object();
    int bad = !o;
    if (!bad)
        bad = put(o, "name", json_string(op->name)) ||
              put(o, "type", json_string(sf_op_type_name(op->type)));
    if (!bad && op->n_inputs > 0) {
        json_t *in = json_array();
        bad = put(o, "inputs", in);
        for (int k = 0; !bad && k < op->n_inputs; k++)
            bad = json_array_append_new(in, ref_string(g, op->inputs[k], op->id)) != 0;
    }
    int n_attrs = 0, digits = 1;
    const sf_attr_desc *attrs = sf_op_attrs(op->type, &n_attrs);
    for (int a = 0; !bad && a < n_attrs; a++) {
        bad = put(o, attrs[a].name, attr_value(&attrs[a], &op->params, err, op));
        if (attrs[a].type == SF_ATTR_FLOAT) {
            double f = *(const double *)(const void *)((const char *)&op->params + attrs[a].offset);
            int d = isfinite(f) ? real_digits(f) : 1;
            if (d > digits) digits = d;
        }
    }
    if (!bad && op->n_fixed > 0) { /* whole values as integers (a mask's 0 and 1) */
        json_t *fa = json_array();
        bad = put(o, "fixed", fa);
        for (int64_t k = 0; !bad && k < op->n_fixed; k++) {
            float f = op->fixed[k];
            int whole = f == floorf(f) && fabsf(f) < 16777216.0f;
            bad = json_array_append_new(fa, whole ? json_integer((json_int_t)f)
                                                  : json_real((double)f)) != 0;
            if (!whole && digits < 9) digits = 9; /* 9 significant digits read back a float */
        }
    }
    if (!bad && op->weight_owner >= 0)
        bad = put(o, "share_weights", json_string(sf_graph_op(g, op->weight_owner)->name));
    char *s = bad ? NULL : json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits));
    json_decref(o);
    if (!s)
        sf_error_set(err, SF_ERR_INVALID,
                     "operator #%d: cannot be written as JSON (out of memory, or a name that is "
                     "not UTF-8)",
                     op->id);
    return s;
}

char *sf_model_to_json(const sf_graph *g, sf_error *err) {
    /* the reader refuses a model without operators: never write one */
    if (sf_graph_num_ops(g) == 0) {
        sf_error_set(err, SF_ERR_INVALID,
                     "model '%s' has no operators: a model file needs at least one",
                     sf_graph_name(g));
        return NULL;
    }
    sf_strbuf b = {0};
    json_t *jname = json_string(sf_graph_name(g));
    char *qname = jname ? json_dumps(jname, JSON_ENCODE_ANY) : NULL;
    json_decref(jname);
    if (!qname) {
        sf_error_set(err, SF_ERR_INVALID, "model name cannot be written as JSON");
        return NULL;
    }
    sf_strbuf_puts(&b, "{\n  \"format\": \"" MODEL_FORMAT "\",\n  \"version\": 1,\n  \"name\": ");
    sf_strbuf_puts(&b, qname);
    free(qname);
    int n = sf_graph_num_ops(g);
    sf_strbuf_puts(&b, ",\n  \"ops\": [\n");
    for (int i = 0; i < n; i++) {
        char *line = op_line(g, sf_graph_op(g, i), err);
        if (!line) {
            sf_strbuf_free(&b);
            return NULL;
        }
        sf_strbuf_puts(&b, "    ");
        sf_strbuf_puts(&b, line);
        sf_strbuf_puts(&b, i + 1 < n ? ",\n" : "\n  ");
        free(line);
    }
    sf_strbuf_puts(&b, "]\n}\n");
    char *text = sf_strbuf_take(&b);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return text;
}

sf_status sf_model_save_json(const sf_graph *g, const char *path, sf_error *err) {
    sf_error local = {0};
    char *text = sf_model_to_json(g, &local);
    if (!text) return sf_error_set(err, local.code, "%s: %s", path, local.msg);
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}
