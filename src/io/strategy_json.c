/*
 * strategy_json.c - the strategy file format (docs/formats-strategy.md):
 *
 *     {"format": "soapflow-strategy", "version": 1, "model": "alexnet",
 *      "machine": "p100-4x4", "ops": {
 *        "conv1": {"degrees": [4, 1, 1, 1], "devices": [0, 1, 2, 3]}, ...}}
 *
 * An operator's object may add "zero": 1-3 (its weight group's ZeRO stage) and
 * "recompute": true; both are written only when set, so files without them
 * read and write the same bytes.
 *
 * Operators are named, not numbered, so a file survives a rebuild of the graph
 * that reorders nothing but is still readable by a person, and a file made for
 * another model fails on the first unknown name instead of silently applying
 * configs to the wrong operators.
 *
 * Reading. jansson parses the text (duplicate keys rejected) and gives line and
 * column for syntax errors; it keeps no positions of values, so for a semantic
 * error a small scanner (json_pos.c, shared with the model reader) walks the raw
 * text (valid JSON by then) along a path such as ops."conv3".degrees[1] to the
 * offset where that value starts. It runs only when there is an error to
 * report. Configs are read into a scratch array and copied into the strategy
 * only when the whole file is good, so a bad file leaves the strategy as it was.
 * Names resolve through a jansson object used as a hash table, so reading is
 * linear in the number of operators.
 *
 * Writing. A hand-written frame with one operator per line, in graph order, so
 * that files of thousands of operators stay readable and diff well, and the
 * same strategy always gives the same bytes. Written atomically.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "soapflow/io.h"

#include "json_pos.h"

#define STRATEGY_FORMAT "soapflow-strategy"
#define STRATEGY_VERSION 1
#define MISSING_LISTED 5 /* names listed when operators are missing */

/* ---- reading ------------------------------------------------------------- */

typedef struct reader {
    const char *text;
    size_t len;
    const char *origin;
    sf_error *err;
} reader;

/* "origin:line:col: [operator 'name': ]message" at the value `path` names. */
/* 1 when op's parallel space ends with a reduction dimension after its output's
 * (a linear's input features, an attention's heads, ...), which files may leave
 * out; its kind may have become NONE (operators tied across types keep their
 * weights whole: graph.c), and old files still leave it out. */
static int reduce_tail(const sf_op *op) {
    return op->n_outputs > 0 && op->space.ndim == op->out_shapes[0].ndim + 1;
}

static sf_status fail_at(const reader *r, const sf_json_step *path, int n_path, const char *op,
                         sf_status st, const char *fmt, ...) SF_PRINTF(6, 7);
static sf_status fail_at(const reader *r, const sf_json_step *path, int n_path, const char *op,
                         sf_status st, const char *fmt, ...) {
    char msg[SF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The whole path found: its last member's key (where a reader looks for the
     * operator). Cut short: the value of the deepest member found. */
    sf_json_pos pos = sf_json_locate(r->text, r->len, path, n_path);
    int line, col;
    sf_json_line_col(r->text, r->len, pos.depth == n_path ? pos.key : pos.value, &line, &col);
    if (op)
        return sf_error_set(r->err, st, "%s:%d:%d: operator '%s': %s", r->origin, line, col, op,
                            msg);
    return sf_error_set(r->err, st, "%s:%d:%d: %s", r->origin, line, col, msg);
}

/* An integer array; 0 when v is not an array of integers (*bad: the index of
 * the first non-integer, or -1 when v is no array at all). */
static int int_array(const json_t *v, long *bad) {
    *bad = -1;
    if (!json_is_array(v)) return 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        if (!json_is_integer(json_array_get(v, i))) {
            *bad = (long)i;
            return 0;
        }
    }
    return 1;
}

/* Read ops."name" into c, checking everything sf_config_validate checks but
 * pointing at the offending number. */
static sf_status read_config(const reader *r, const sf_op *op, const sf_machine *m,
                             const json_t *obj, sf_config *c) {
    const char *name = op->name;
    sf_json_step at[4] = {{"ops", 0}, {name, 0}, {NULL, 0}, {NULL, 0}};
    if (!json_is_object(obj))
        return fail_at(r, at, 2, name, SF_ERR_PARSE,
                       "expected an object {\"degrees\": [...], \"devices\": [...]}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strcmp(key, "degrees") != 0 && strcmp(key, "devices") != 0 &&
            strcmp(key, "zero") != 0 && strcmp(key, "recompute") != 0) {
            at[2].key = key;
            return fail_at(r, at, 3, name, SF_ERR_PARSE,
                           "unknown field '%s' (expected \"degrees\", \"devices\" and optional "
                           "\"zero\", \"recompute\")",
                           key);
        }
    }
    int zero = 0, recompute = 0;
    const json_t *zv = json_object_get(obj, "zero"), *rv = json_object_get(obj, "recompute");
    if (zv) {
        at[2].key = "zero";
        if (!json_is_integer(zv))
            return fail_at(r, at, 3, name, SF_ERR_PARSE, "\"zero\" must be an integer 0-3");
        json_int_t z = json_integer_value(zv);
        if (z < 0 || z >= SF_ZERO_STAGE_COUNT)
            return fail_at(r, at, 3, name, SF_ERR_RANGE, "zero stage %lld (0-3)", (long long)z);
        zero = (int)z;
    }
    if (rv) {
        at[2].key = "recompute";
        if (!json_is_boolean(rv))
            return fail_at(r, at, 3, name, SF_ERR_PARSE, "\"recompute\" must be true or false");
        recompute = json_is_true(rv);
    }
    const json_t *deg = json_object_get(obj, "degrees");
    const json_t *dev = json_object_get(obj, "devices");
    if (!deg) return fail_at(r, at, 2, name, SF_ERR_PARSE, "missing \"degrees\"");
    if (!dev) return fail_at(r, at, 2, name, SF_ERR_PARSE, "missing \"devices\"");
    long bad;
    at[2].key = "degrees";
    if (!int_array(deg, &bad)) {
        if (bad < 0)
            return fail_at(r, at, 3, name, SF_ERR_PARSE,
                           "\"degrees\" must be an array of integers");
        at[3].index = (size_t)bad;
        return fail_at(r, at, 4, name, SF_ERR_PARSE, "degree %ld is not an integer", bad);
    }
    int nd = op->space.ndim;
    char shape[128];
    /* a trailing reduction dimension may be left out: degree 1 (the files
     * written before partial sums, and every config that does not use one) */
    int given = (int)json_array_size(deg);
    if (!(given == nd || (given == nd - 1 && reduce_tail(op))))
        return fail_at(r, at, 3, name, SF_ERR_INVALID,
                       "\"degrees\" has %d entries, its parallel space %s has %d dimensions",
                       (int)json_array_size(deg), sf_shape_str(&op->space, shape, sizeof shape),
                       nd);
    memset(c, 0, sizeof *c);
    c->ndim = nd;
    for (int i = 0; i < SF_MAX_DIMS; i++) c->degree[i] = 1;
    int64_t parts = 1;
    for (int i = 0; i < given; i++) {
        json_int_t d = json_integer_value(json_array_get(deg, (size_t)i));
        const char *kind = sf_dim_kind_name(op->kinds[i]);
        at[3].index = (size_t)i;
        if (d < 1)
            return fail_at(r, at, 4, name, SF_ERR_RANGE,
                           "degree %lld on dimension %d (%s) is below 1", (long long)d, i, kind);
        if (d > 1 && op->kinds[i] == SF_DIM_NONE)
            return fail_at(r, at, 4, name, SF_ERR_INVALID,
                           "degree %lld on dimension %d (none), which cannot be split",
                           (long long)d, i);
        if (d > op->space.d[i])
            return fail_at(r, at, 4, name, SF_ERR_RANGE,
                           "degree %lld on dimension %d (%s) exceeds its size %lld", (long long)d,
                           i, kind, (long long)op->space.d[i]);
        parts *= d; /* d <= size and the product is checked each step: no overflow */
        if (parts > SF_MAX_PARTS)
            return fail_at(r, at, 4, name, SF_ERR_RANGE,
                           "degrees give more than %d parts (the maximum)", SF_MAX_PARTS);
        c->degree[i] = (int)d;
    }
    c->n_parts = (int)parts;
    c->zero = (uint8_t)zero;
    c->recompute = (uint8_t)recompute;
    at[2].key = "devices";
    if (!int_array(dev, &bad)) {
        if (bad < 0)
            return fail_at(r, at, 3, name, SF_ERR_PARSE,
                           "\"devices\" must be an array of integers");
        at[3].index = (size_t)bad;
        return fail_at(r, at, 4, name, SF_ERR_PARSE, "device %ld is not an integer", bad);
    }
    if ((int64_t)json_array_size(dev) != parts)
        return fail_at(r, at, 3, name, SF_ERR_INVALID,
                       "\"devices\" has %d entries, but the degrees make %lld parts",
                       (int)json_array_size(dev), (long long)parts);
    int n_dev = m ? sf_machine_num_devices(m) : INT16_MAX + 1;
    for (int p = 0; p < c->n_parts; p++) {
        json_int_t d = json_integer_value(json_array_get(dev, (size_t)p));
        at[3].index = (size_t)p;
        if (d < 0 || d >= n_dev) {
            if (m)
                return fail_at(r, at, 4, name, SF_ERR_RANGE,
                               "part %d on device %lld, but machine '%s' has %d devices (0-%d)", p,
                               (long long)d, sf_machine_name(m), n_dev, n_dev - 1);
            return fail_at(r, at, 4, name, SF_ERR_RANGE, "part %d on device %lld, out of range", p,
                           (long long)d);
        }
        c->device[p] = (int16_t)d;
    }
    /* The same rules, by the one function that defines them: a guard against
     * this reader and sf_config_validate drifting apart. */
    sf_error local = {0};
    if (sf_config_validate(op, m, c, &local) != SF_OK)
        return fail_at(r, at, 2, NULL, local.code, "%s", local.msg);
    return SF_OK;
}

/* "pipeline": {"stages": P, "micro_batches": M, "schedule": "1f1b", "boundaries":
 * ["<first operator of chunk 1>", ...]} into *pl (P v - 1 names, in id order). */
static sf_status read_pipeline(const reader *r, const json_t *v, const sf_graph *g,
                               sf_pipeline *pl) {
    sf_json_step at[3] = {{"pipeline", 0}, {NULL, 0}, {NULL, 0}};
    if (!json_is_object(v))
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE,
                       "expected \"pipeline\": {\"stages\": P, \"micro_batches\": M, "
                       "\"schedule\": \"1f1b\", \"boundaries\": [...]}");
    const char *key;
    const json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "stages") && strcmp(key, "micro_batches") && strcmp(key, "schedule") &&
            strcmp(key, "boundaries")) {
            at[1].key = key;
            return fail_at(r, at, 2, NULL, SF_ERR_PARSE,
                           "unknown field '%s' (expected \"stages\", \"micro_batches\", "
                           "\"schedule\", \"boundaries\")",
                           key);
        }
    }
    memset(pl, 0, sizeof *pl);
    const char *ints[2] = {"stages", "micro_batches"};
    int val[2];
    for (int i = 0; i < 2; i++) {
        const json_t *iv = json_object_get(v, ints[i]);
        at[1].key = ints[i];
        if (!iv) return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "missing \"%s\"", ints[i]);
        if (!json_is_integer(iv) || json_integer_value(iv) < 1 ||
            json_integer_value(iv) > (i ? 1 << 20 : SF_MAX_PIPE_CHUNKS))
            return fail_at(r, at, 2, NULL, SF_ERR_RANGE, "\"%s\" must be an integer from 1 to %d",
                           ints[i], i ? 1 << 20 : SF_MAX_PIPE_CHUNKS);
        val[i] = (int)json_integer_value(iv);
    }
    pl->stages = val[0];
    pl->micro_batches = val[1];
    const json_t *sv = json_object_get(v, "schedule");
    at[1].key = "schedule";
    sf_pipe_schedule sch = SF_PIPE_1F1B;
    int chunks = 1;
    if (sv && (!json_is_string(sv) ||
               sf_pipe_schedule_parse(json_string_value(sv), &sch, &chunks) != 0))
        return fail_at(r, at, 2, NULL, SF_ERR_PARSE,
                       "\"schedule\" must be \"gpipe\", \"1f1b\" or \"interleaved:V\" (V >= 2)");
    pl->schedule = (int)sch;
    pl->chunks = chunks;
    int nc = pl->stages * chunks;
    if (nc > SF_MAX_PIPE_CHUNKS)
        return fail_at(r, at, 2, NULL, SF_ERR_RANGE, "%d stages of %d chunks exceed %d chunks",
                       pl->stages, chunks, SF_MAX_PIPE_CHUNKS);
    const json_t *bv = json_object_get(v, "boundaries");
    at[1].key = "boundaries";
    if (nc > 1 && !bv)
        return fail_at(r, at, 1, NULL, SF_ERR_PARSE,
                       "missing \"boundaries\": the first operator of each chunk after the first");
    if (bv && (!json_is_array(bv) || (int)json_array_size(bv) != nc - 1))
        return fail_at(r, at, 2, NULL, SF_ERR_INVALID,
                       "\"boundaries\" must list %d operator names (the first of chunks 1 to %d)",
                       nc - 1, nc - 1);
    for (int c = 1; c < nc; c++) {
        const json_t *nv = json_array_get(bv, (size_t)(c - 1));
        at[2].index = c - 1;
        int id = json_is_string(nv) ? sf_graph_find(g, json_string_value(nv)) : -1;
        if (id < 0)
            return fail_at(r, at, 3, NULL, SF_ERR_NOTFOUND,
                           "boundary %d is not an operator of model '%s'", c - 1,
                           sf_graph_name(g));
        if (id <= pl->first[c - 1])
            return fail_at(r, at, 3, NULL, SF_ERR_INVALID,
                           "boundary '%s' does not come after the previous chunk's first "
                           "operator (boundaries in the model's order)",
                           json_string_value(nv));
        pl->first[c] = id;
    }
    return SF_OK;
}

static sf_status read_strategy(const reader *r, json_t *root, const sf_graph *g,
                               const sf_machine *m, sf_config *cfg, char *seen) {
    sf_json_step at[2] = {{NULL, 0}, {NULL, 0}};
    if (!json_is_object(root))
        return fail_at(r, at, 0, NULL, SF_ERR_PARSE, "expected a JSON object at the top level");
    const json_t *fmt = json_object_get(root, "format");
    at[0].key = "format";
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), STRATEGY_FORMAT) != 0)
        return fail_at(r, at, fmt ? 1 : 0, NULL, SF_ERR_PARSE,
                       "not a soapflow strategy: expected \"format\": \"%s\"", STRATEGY_FORMAT);
    const json_t *ver = json_object_get(root, "version");
    at[0].key = "version";
    if (!json_is_integer(ver))
        return fail_at(r, at, ver ? 1 : 0, NULL, SF_ERR_PARSE,
                       "expected \"version\": %d (an integer)", STRATEGY_VERSION);
    if (json_integer_value(ver) != STRATEGY_VERSION)
        return fail_at(r, at, 1, NULL, SF_ERR_UNSUPPORTED,
                       "strategy format version %lld is not supported (this soapflow reads %d)",
                       (long long)json_integer_value(ver), STRATEGY_VERSION);
    const char *fields[2] = {"model", "machine"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, fields[i]);
        at[0].key = fields[i];
        if (v && !json_is_string(v))
            return fail_at(r, at, 1, NULL, SF_ERR_PARSE, "\"%s\" must be a string", fields[i]);
    }
    /* Model and machine names are informative: the operators are checked by
     * name and the devices by range, which is what makes a strategy apply. */
    const json_t *mv = json_object_get(root, "model");
    if (mv && strcmp(json_string_value(mv), sf_graph_name(g)) != 0)
        SF_LOG_WARN_F("%s: strategy made for model '%s', applied to '%s'", r->origin,
                      json_string_value(mv), sf_graph_name(g));
    const json_t *hv = json_object_get(root, "machine");
    if (hv && m && strcmp(json_string_value(hv), sf_machine_name(m)) != 0)
        SF_LOG_WARN_F("%s: strategy made for machine '%s', applied to '%s'", r->origin,
                      json_string_value(hv), sf_machine_name(m));

    json_t *ops = json_object_get(root, "ops");
    at[0].key = "ops";
    if (!json_is_object(ops))
        return fail_at(r, at, ops ? 1 : 0, NULL, SF_ERR_PARSE,
                       "expected \"ops\": {\"<operator>\": {\"degrees\": [...], \"devices\": "
                       "[...]}, ...}");
    int n = sf_graph_num_ops(g);
    json_t *ids = json_object();
    if (!ids) return sf_error_set(r->err, SF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (json_object_set_new(ids, sf_graph_op(g, i)->name, json_integer(i)) != 0) {
            json_decref(ids);
            return sf_error_set(r->err, SF_ERR_NOMEM, "out of memory");
        }
    }
    sf_status st = SF_OK;
    const char *key;
    json_t *v;
    json_object_foreach(ops, key, v) {
        const json_t *idv = json_object_get(ids, key);
        if (!idv) {
            sf_json_step p[2] = {{"ops", 0}, {key, 0}};
            st = fail_at(r, p, 2, NULL, SF_ERR_NOTFOUND,
                         "unknown operator '%s' (model '%s' has "
                         "no operator of that name)",
                         key, sf_graph_name(g));
            break;
        }
        int id = (int)json_integer_value(idv);
        st = read_config(r, sf_graph_op(g, id), m, v, &cfg[id]);
        if (st != SF_OK) break;
        seen[id] = 1;
    }
    json_decref(ids);
    if (st != SF_OK) return st;

    int missing = 0;
    for (int i = 0; i < n; i++) missing += !seen[i];
    if (missing == 0) return SF_OK;
    char list[SF_ERRMSG_MAX] = "";
    size_t len = 0;
    int listed = 0;
    for (int i = 0; i < n && listed < MISSING_LISTED; i++) {
        if (seen[i]) continue;
        int k = snprintf(list + len, sizeof list - len, "%s'%s'", listed ? ", " : "",
                         sf_graph_op(g, i)->name);
        if (k < 0 || (size_t)k >= sizeof list - len) break;
        len += (size_t)k;
        listed++;
    }
    at[0].key = "ops";
    if (missing > listed)
        return fail_at(r, at, 1, NULL, SF_ERR_INVALID,
                       "no config for %d operator%s of model '%s': %s and %d more", missing,
                       missing == 1 ? "" : "s", sf_graph_name(g), list, missing - listed);
    return fail_at(r, at, 1, NULL, SF_ERR_INVALID, "no config for %d operator%s of model '%s': %s",
                   missing, missing == 1 ? "" : "s", sf_graph_name(g), list);
}

sf_status sf_strategy_parse_json(sf_strategy *s, const char *text, const char *origin,
                                 const sf_graph *g, const sf_machine *m, sf_error *err) {
    if (!origin) origin = "<strategy>";
    int n = sf_graph_num_ops(g);
    if (sf_strategy_num_ops(s) != n)
        return sf_error_set(err, SF_ERR_INVALID, "%s: strategy has %d operators, model '%s' has %d",
                            origin, sf_strategy_num_ops(s), sf_graph_name(g), n);
    size_t len = strlen(text);
    size_t k = 0;
    while (k < len && strchr(" \t\r\n", text[k])) k++;
    if (k == len)
        return sf_error_set(err, SF_ERR_PARSE, "%s: empty file, expected a soapflow strategy",
                            origin);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (jerr.line > 0)
            return sf_error_set(err, SF_ERR_PARSE, "%s:%d:%d: %s", origin, jerr.line, jerr.column,
                                jerr.text);
        return sf_error_set(err, SF_ERR_PARSE, "%s: %s", origin, jerr.text);
    }
    sf_config *cfg = calloc((size_t)(n ? n : 1), sizeof *cfg);
    char *seen = calloc((size_t)(n ? n : 1), 1);
    sf_status st;
    if (!cfg || !seen) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    } else {
        reader r = {text, len, origin, err};
        st = read_strategy(&r, root, g, m, cfg, seen);
    }
    for (int i = 0; i < n && st == SF_OK; i++) { /* a weight group has its owner's stage */
        const sf_op *op = sf_graph_op(g, i);
        int w = op->weight_owner;
        if (w >= 0 && cfg[i].zero && cfg[i].zero != cfg[w].zero) {
            reader r = {text, len, origin, err};
            sf_json_step at[3] = {{"ops", 0}, {op->name, 0}, {"zero", 0}};
            st = fail_at(&r, at, 3, op->name, SF_ERR_INVALID,
                         "zero stage %d, but the owner of its weights '%s' has %d (a weight "
                         "group has one stage: its owner's)",
                         cfg[i].zero, sf_graph_op(g, w)->name, cfg[w].zero);
        }
    }
    if (st == SF_OK && sf_graph_num_ties(g) > 0) {
        /* tied operators (an embedding and its LM head) split their table alike */
        sf_strategy *t = sf_strategy_clone(s);
        sf_error local = {0};
        if (!t) {
            st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        } else {
            for (int i = 0; i < n; i++) *sf_strategy_config(t, i) = cfg[i];
            if (sf_strategy_check_ties(t, g, 0, NULL, NULL, &local) != SF_OK)
                st = sf_error_set(err, local.code, "%s: %s", origin, local.msg);
        }
        sf_strategy_free(t);
    }
    sf_pipeline *pl = NULL;
    const json_t *pv = json_object_get(root, "pipeline");
    if (st == SF_OK && pv) {
        reader r = {text, len, origin, err};
        pl = malloc(sizeof *pl);
        st = pl ? read_pipeline(&r, pv, g, pl) : sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        if (st == SF_OK) { /* the stages against the configs: whole-strategy rules */
            sf_strategy *t = sf_strategy_new(g);
            sf_error local = {0};
            if (!t) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            } else {
                for (int i = 0; i < n; i++) *sf_strategy_config(t, i) = cfg[i];
                if (sf_pipeline_validate(pl, t, g, m, &local) != SF_OK) {
                    sf_json_step at[1] = {{"pipeline", 0}};
                    st = fail_at(&r, at, 1, NULL, local.code, "%s", local.msg);
                }
            }
            sf_strategy_free(t);
        }
    }
    if (st == SF_OK) {
        for (int i = 0; i < n; i++) *sf_strategy_config(s, i) = cfg[i];
        sf_strategy_set_pipeline(s, pl);
    }
    free(pl);
    free(seen);
    free(cfg);
    json_decref(root);
    return st;
}

sf_status sf_strategy_load_json(sf_strategy *s, const char *path, const sf_graph *g,
                                const sf_machine *m, sf_error *err) {
    char *text = sf_read_file(path, NULL, err); /* refuses a NUL byte */
    if (!text) return err ? err->code : SF_ERR_IO;
    sf_status st = sf_strategy_parse_json(s, text, path, g, m, err);
    free(text);
    return st;
}

/* ---- writing ------------------------------------------------------------- */

/* A JSON string literal: quotes, backslashes and control characters escaped;
 * other bytes (UTF-8) as they are. */
static void put_json_string(sf_strbuf *b, const char *s) {
    sf_strbuf_add(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sf_strbuf_add(b, e, 2);
        } else if (ch < 0x20) {
            sf_strbuf_printf(b, "\\u%04x", ch);
        } else {
            sf_strbuf_add(b, p, 1);
        }
    }
    sf_strbuf_add(b, "\"", 1);
}

char *sf_strategy_to_json_for(const sf_strategy *s, const sf_graph *g, const sf_machine *m,
                              sf_error *err) {
    /* Refuse to write what could not be read back. */
    if (sf_strategy_validate(s, g, NULL, err) != SF_OK) return NULL;
    sf_strbuf b = {0};
    sf_strbuf_printf(&b,
                     "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"model\": ", STRATEGY_FORMAT,
                     STRATEGY_VERSION);
    put_json_string(&b, sf_graph_name(g));
    if (m) {
        sf_strbuf_puts(&b, ",\n  \"machine\": ");
        put_json_string(&b, sf_machine_name(m));
    }
    sf_strbuf_puts(&b, ",\n  \"ops\": {");
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        sf_strbuf_puts(&b, i ? ",\n    " : "\n    ");
        put_json_string(&b, sf_graph_op(g, i)->name);
        sf_strbuf_puts(&b, ": {\"degrees\": [");
        const sf_op *op = sf_graph_op(g, i);
        int nd = c->ndim; /* a trailing reduction degree of 1 is left out (the reader's rule) */
        if (nd > 1 && nd == op->space.ndim && reduce_tail(op) && c->degree[nd - 1] == 1) nd--;
        for (int d = 0; d < nd; d++) sf_strbuf_printf(&b, "%s%d", d ? ", " : "", c->degree[d]);
        sf_strbuf_puts(&b, "], \"devices\": [");
        for (int p = 0; p < c->n_parts; p++)
            sf_strbuf_printf(&b, "%s%d", p ? ", " : "", c->device[p]);
        sf_strbuf_puts(&b, "]");
        if (c->zero) sf_strbuf_printf(&b, ", \"zero\": %d", c->zero);
        if (c->recompute) sf_strbuf_puts(&b, ", \"recompute\": true");
        sf_strbuf_puts(&b, "}");
    }
    sf_strbuf_puts(&b, n ? "\n  }" : "}");
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    if (pl) {
        char sch[32];
        sf_strbuf_printf(&b,
                         ",\n  \"pipeline\": {\"stages\": %d, \"micro_batches\": %d, "
                         "\"schedule\": \"%s\", \"boundaries\": [",
                         pl->stages, pl->micro_batches, sf_pipe_schedule_str(pl, sch, sizeof sch));
        for (int c = 1; c < pl->stages * pl->chunks; c++) {
            sf_strbuf_puts(&b, c > 1 ? ", " : "");
            put_json_string(&b, sf_graph_op(g, pl->first[c])->name);
        }
        sf_strbuf_puts(&b, "]}");
    }
    sf_strbuf_puts(&b, "\n}\n");
    char *text = sf_strbuf_take(&b);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return text;
}

char *sf_strategy_to_json(const sf_strategy *s, const sf_graph *g, sf_error *err) {
    return sf_strategy_to_json_for(s, g, NULL, err);
}

sf_status sf_strategy_save_json_for(const sf_strategy *s, const sf_graph *g, const sf_machine *m,
                                    const char *path, sf_error *err) {
    char *text = sf_strategy_to_json_for(s, g, m, err);
    if (!text) return err ? err->code : SF_ERR_NOMEM;
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

sf_status sf_strategy_save_json(const sf_strategy *s, const sf_graph *g, const char *path,
                                sf_error *err) {
    return sf_strategy_save_json_for(s, g, NULL, path, err);
}
