/*
 * profiled.c - the profile database (measured task times by key), its JSON
 * file, and the profiled cost model that answers from it.
 *
 * FlexFlow measures each distinct (operator, tile shape) once on the real
 * device and caches it; the simulator then looks times up instead of running
 * kernels. The key here is what decides a kernel's run time: the operator type,
 * its parameters (written through the attribute descriptors every operator
 * publishes, so this file knows no operator by name), the extents of the tile,
 * and the extents of the input regions it reads. Extents, not positions and
 * not the global batch: a data-parallel part of 32 samples costs the same
 * whether the batch is 64 or 1024. Regions are in the key because a tile at a
 * border of a split image reads a clipped halo, and because a linear layer's
 * input width lives in its input shape rather than in its parameters.
 * Rejected: keying by a hash of the operator alone (opaque files, collisions)
 * and by the operator's name (two identical layers would be measured twice and
 * a renamed model would lose its cache).
 *
 * One database holds one device kind, the file says which; a machine of
 * another kind gets the fallback's times for every task, and the command line
 * warns. Updates are always the fallback's: the optimizer step is a streaming
 * loop over the weight shard, which the analytic model's bandwidth term
 * already times, and the profiler has no update kernel to run.
 *
 * Lookup: entries live in a growing array; an open-addressing table of
 * indices (FNV-1a, linear probing, at most half full) finds them by key. Keys
 * are built by hand (no snprintf except for the rare float attribute), so that
 * task_s stays cheap: the simulator asks once per task of every strategy the
 * search visits. The model counts misses per operator type so that a command
 * can say which results rest on the analytic model.
 */
#include "soapflow/cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "soapflow/io.h"

#define COSTS_FORMAT "soapflow-costs"
#define COSTS_VERSION 1

/* ---- keys ------------------------------------------------------------- */

typedef struct keybuf {
    char *s;
    size_t n, len;
    int overflow;
} keybuf;

static void kb_put(keybuf *b, const char *s, size_t len) {
    if (b->overflow || b->len + len + 1 > b->n) {
        b->overflow = 1;
        return;
    }
    memcpy(b->s + b->len, s, len);
    b->len += len;
    b->s[b->len] = '\0';
}

static void kb_str(keybuf *b, const char *s) { kb_put(b, s, strlen(s)); }

static void kb_i64(keybuf *b, int64_t v) {
    char tmp[24];
    int i = (int)sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u > 0);
    if (v < 0) tmp[--i] = '-';
    kb_put(b, tmp + i, sizeof tmp - (size_t)i);
}

/* The fewest significant digits (at most 17) that read back as v. */
static void fmt_double(double v, char *buf, size_t n) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void kb_extent(keybuf *b, const sf_tile *t) {
    for (int i = 0; i < t->ndim; i++) {
        if (i) kb_put(b, "x", 1);
        int64_t e = t->hi[i] - t->lo[i];
        kb_i64(b, e > 0 ? e : 0);
    }
}

static const void *field(const sf_op_params *p, size_t offset) { return (const char *)p + offset; }

static void kb_attr(keybuf *b, const sf_attr_desc *d, const sf_op_params *p) {
    const void *f = field(p, d->offset);
    switch (d->type) {
    case SF_ATTR_INT: kb_i64(b, *(const int64_t *)f); break;
    case SF_ATTR_INTS: {
        int count = d->count;
        if (count == 0) {
            count = *(const int *)field(p, d->count_offset);
            if (count < 0) count = 0;
            if (count > d->max_count) count = d->max_count;
        }
        const int64_t *v = f;
        for (int i = 0; i < count; i++) {
            if (i) kb_put(b, "x", 1);
            kb_i64(b, v[i]);
        }
        break;
    }
    case SF_ATTR_BOOL:
    case SF_ATTR_SMALLINT: kb_i64(b, *(const int *)f); break;
    case SF_ATTR_ENUM: {
        int v = *(const int *)f;
        if (v >= 0 && v < d->n_enum && d->enum_names)
            kb_str(b, d->enum_names[v]);
        else
            kb_i64(b, v);
        break;
    }
    case SF_ATTR_FLOAT: {
        char tmp[40];
        fmt_double(*(const double *)f, tmp, sizeof tmp);
        kb_str(b, tmp);
        break;
    }
    }
}

char *sf_profile_key(const sf_op *op, const sf_tile *t, char *buf, size_t n) {
    if (!op || !t || !buf || n == 0) return NULL;
    keybuf b = {buf, n, 0, 0};
    buf[0] = '\0';
    kb_str(&b, sf_op_type_name(op->type));
    kb_put(&b, "|", 1);
    int n_attrs = 0;
    const sf_attr_desc *attrs = sf_op_attrs(op->type, &n_attrs);
    for (int a = 0; a < n_attrs; a++) {
        if (a) kb_put(&b, ",", 1);
        kb_str(&b, attrs[a].name);
        kb_put(&b, "=", 1);
        kb_attr(&b, &attrs[a], &op->params);
    }
    kb_str(&b, "|tile=");
    /* a reduction dimension the tile holds whole is left out, so that keys of
     * unsplit reductions read as before partial sums existed */
    sf_tile kt = *t;
    while (kt.ndim > 0 && kt.ndim <= op->space.ndim && op->kinds[kt.ndim - 1] == SF_DIM_REDUCE &&
           kt.lo[kt.ndim - 1] == 0 && kt.hi[kt.ndim - 1] == op->space.d[kt.ndim - 1])
        kt.ndim--;
    kb_extent(&b, &kt);
    kb_str(&b, "|in=");
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        sf_op_input_region(op, t, i, &r);
        if (i) kb_put(&b, ",", 1);
        kb_extent(&b, &r);
    }
    return b.overflow ? NULL : buf;
}

/* ---- the database ------------------------------------------------------ */

struct sf_profile_db {
    char device_kind[SF_NAME_MAX];
    sf_profile_entry *entries;
    int count, cap;
    int32_t *slots; /* index into entries, -1 empty; n_slots a power of two */
    size_t n_slots;
};

static uint64_t hash_key(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

sf_profile_db *sf_profile_db_new(const char *device_kind) {
    if (device_kind && strlen(device_kind) >= SF_NAME_MAX) return NULL;
    sf_profile_db *db = calloc(1, sizeof *db);
    if (!db) return NULL;
    if (device_kind) memcpy(db->device_kind, device_kind, strlen(device_kind) + 1);
    db->n_slots = 64;
    db->slots = malloc(db->n_slots * sizeof *db->slots);
    if (!db->slots) {
        free(db);
        return NULL;
    }
    for (size_t i = 0; i < db->n_slots; i++) db->slots[i] = -1;
    return db;
}

void sf_profile_db_free(sf_profile_db *db) {
    if (!db) return;
    for (int i = 0; i < db->count; i++) free((char *)db->entries[i].key);
    free(db->entries);
    free(db->slots);
    free(db);
}

const char *sf_profile_db_device_kind(const sf_profile_db *db) { return db->device_kind; }

sf_status sf_profile_db_set_device_kind(sf_profile_db *db, const char *name, sf_error *err) {
    if (!db || !name) return sf_error_set(err, SF_ERR_INVALID, "no device kind");
    size_t len = strlen(name);
    if (len >= SF_NAME_MAX)
        return sf_error_set(err, SF_ERR_RANGE, "device kind name longer than %d bytes",
                            SF_NAME_MAX - 1);
    memcpy(db->device_kind, name, len + 1);
    return SF_OK;
}

int sf_profile_db_count(const sf_profile_db *db) { return db ? db->count : 0; }

const sf_profile_entry *sf_profile_db_entry(const sf_profile_db *db, int i) {
    if (!db || i < 0 || i >= db->count) return NULL;
    return &db->entries[i];
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find_slot(const sf_profile_db *db, const char *key) {
    size_t mask = db->n_slots - 1;
    size_t i = (size_t)hash_key(key) & mask;
    while (db->slots[i] >= 0 && strcmp(db->entries[db->slots[i]].key, key) != 0) i = (i + 1) & mask;
    return i;
}

const sf_profile_entry *sf_profile_db_lookup(const sf_profile_db *db, const char *key) {
    if (!db || !key) return NULL;
    int32_t e = db->slots[find_slot(db, key)];
    return e >= 0 ? &db->entries[e] : NULL;
}

static int grow_slots(sf_profile_db *db) {
    size_t n = db->n_slots * 2;
    int32_t *slots = malloc(n * sizeof *slots);
    if (!slots) return -1;
    free(db->slots);
    db->slots = slots;
    db->n_slots = n;
    for (size_t i = 0; i < n; i++) slots[i] = -1;
    for (int e = 0; e < db->count; e++) db->slots[find_slot(db, db->entries[e].key)] = e;
    return 0;
}

static int time_ok(double s) { return isfinite(s) && s >= 0 && s <= SF_PROFILE_TIME_MAX_S; }

sf_status sf_profile_db_insert(sf_profile_db *db, const char *key, sf_op_type op, double fwd_s,
                               double bwd_s, int reps, sf_error *err) {
    if (!db || !key || !key[0])
        return sf_error_set(err, SF_ERR_INVALID, "profile entry without a key");
    if (strlen(key) >= SF_PROFILE_KEY_MAX)
        return sf_error_set(err, SF_ERR_RANGE, "profile key longer than %d bytes",
                            SF_PROFILE_KEY_MAX - 1);
    if ((unsigned)op >= SF_OP_COUNT)
        return sf_error_set(err, SF_ERR_INVALID, "profile entry of an unknown operator type");
    if (!time_ok(fwd_s) || !time_ok(bwd_s) || reps < 1)
        return sf_error_set(err, SF_ERR_RANGE,
                            "profile entry '%.200s': times must be from 0 to %g s, reps >= 1",
                            key, SF_PROFILE_TIME_MAX_S);
    /* -0 passes the range check; stored as it is, it would be written "-0",
     * which JSON readers take for the integer 0: store 0, which writes "0"
     * and reads back as itself */
    if (fwd_s == 0) fwd_s = 0;
    if (bwd_s == 0) bwd_s = 0;
    size_t slot = find_slot(db, key);
    if (db->slots[slot] >= 0) {
        sf_profile_entry *e = &db->entries[db->slots[slot]];
        e->op = op;
        e->fwd_s = fwd_s;
        e->bwd_s = bwd_s;
        e->reps = reps;
        return SF_OK;
    }
    if (db->count == INT32_MAX) return sf_error_set(err, SF_ERR_RANGE, "too many entries");
    if ((size_t)(db->count + 1) * 2 > db->n_slots) {
        if (grow_slots(db) != 0) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        slot = find_slot(db, key);
    }
    if (db->count == db->cap) {
        int cap = db->cap ? (db->cap < INT32_MAX / 2 ? db->cap * 2 : INT32_MAX) : 64;
        sf_profile_entry *e = realloc(db->entries, (size_t)cap * sizeof *e);
        if (!e) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        db->entries = e;
        db->cap = cap;
    }
    size_t len = strlen(key);
    char *copy = malloc(len + 1);
    if (!copy) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    memcpy(copy, key, len + 1);
    db->entries[db->count] = (sf_profile_entry){copy, op, fwd_s, bwd_s, reps};
    db->slots[slot] = db->count++;
    return SF_OK;
}

/* ---- JSON -------------------------------------------------------------- */

/* A JSON string literal, escaped by jansson. */
static void put_json_string(sf_strbuf *b, const char *s) {
    json_t *v = json_string(s);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!text) {
        b->oom = 1;
        return;
    }
    sf_strbuf_puts(b, text);
    free(text);
}

static void put_double(sf_strbuf *b, double v) {
    char tmp[40];
    fmt_double(v, tmp, sizeof tmp);
    /* "1e-05" is valid JSON; "5" reads back as an integer, which the reader accepts */
    sf_strbuf_puts(b, tmp);
}

static int cmp_entry_key(const void *a, const void *b) {
    const sf_profile_entry *x = *(const sf_profile_entry *const *)a;
    const sf_profile_entry *y = *(const sf_profile_entry *const *)b;
    return strcmp(x->key, y->key);
}

char *sf_profile_db_to_json(const sf_profile_db *db, sf_error *err) {
    if (!db) {
        sf_error_set(err, SF_ERR_INVALID, "no profile database");
        return NULL;
    }
    const sf_profile_entry **order =
        malloc((size_t)(db->count > 0 ? db->count : 1) * sizeof *order);
    if (!order) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < db->count; i++) order[i] = &db->entries[i];
    qsort(order, (size_t)db->count, sizeof *order, cmp_entry_key);

    sf_strbuf b = {0};
    sf_strbuf_puts(&b, "{\n  \"format\": \"" COSTS_FORMAT "\",\n"
                       "  \"version\": 1,\n  \"device_kind\": ");
    put_json_string(&b, db->device_kind);
    sf_strbuf_puts(&b, ",\n  \"entries\": [");
    for (int i = 0; i < db->count; i++) {
        const sf_profile_entry *e = order[i];
        sf_strbuf_puts(&b, i ? ",\n    {\"key\": " : "\n    {\"key\": ");
        put_json_string(&b, e->key);
        sf_strbuf_puts(&b, ", \"op\": ");
        put_json_string(&b, sf_op_type_name(e->op));
        sf_strbuf_puts(&b, ", \"fwd_s\": ");
        put_double(&b, e->fwd_s);
        sf_strbuf_puts(&b, ", \"bwd_s\": ");
        put_double(&b, e->bwd_s);
        sf_strbuf_printf(&b, ", \"reps\": %d}", e->reps);
    }
    sf_strbuf_puts(&b, db->count ? "\n  ]\n}\n" : "]\n}\n");
    free(order);
    char *text = sf_strbuf_take(&b);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return text;
}

sf_status sf_profile_db_save_json(const sf_profile_db *db, const char *path, sf_error *err) {
    char *text = sf_profile_db_to_json(db, err);
    if (!text) return err ? err->code : SF_ERR_NOMEM;
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

/* Only the keys in allowed[] may appear in obj; every one of them must. */
static sf_status check_keys(json_t *obj, const char *const *allowed, int n, const char *origin,
                            const char *where, sf_error *err) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (int i = 0; i < n && !known; i++) known = strcmp(key, allowed[i]) == 0;
        if (!known)
            return sf_error_set(err, SF_ERR_PARSE, "%s: %sunknown key '%.100s'", origin, where,
                                key);
    }
    for (int i = 0; i < n; i++)
        if (!json_object_get(obj, allowed[i]))
            return sf_error_set(err, SF_ERR_PARSE, "%s: %smissing key '%s'", origin, where,
                                allowed[i]);
    return SF_OK;
}

static sf_status parse_entry(sf_profile_db *db, json_t *e, size_t idx, const char *origin,
                             sf_error *err) {
    static const char *const keys[] = {"key", "op", "fwd_s", "bwd_s", "reps"};
    char where[48];
    snprintf(where, sizeof where, "entries[%zu]: ", idx);
    if (!json_is_object(e))
        return sf_error_set(err, SF_ERR_PARSE, "%s: %smust be an object", origin, where);
    sf_status st = check_keys(e, keys, 5, origin, where, err);
    if (st != SF_OK) return st;
    json_t *key = json_object_get(e, "key"), *op = json_object_get(e, "op");
    json_t *fwd = json_object_get(e, "fwd_s"), *bwd = json_object_get(e, "bwd_s");
    json_t *reps = json_object_get(e, "reps");
    if (!json_is_string(key) || json_string_length(key) == 0 ||
        json_string_length(key) >= SF_PROFILE_KEY_MAX)
        return sf_error_set(err, SF_ERR_PARSE, "%s: %sfield 'key': must be a non-empty string",
                            origin, where);
    sf_op_type type;
    if (!json_is_string(op) || sf_op_type_from_name(json_string_value(op), &type) != SF_OK)
        return sf_error_set(err, SF_ERR_PARSE, "%s: %sfield 'op': not an operator type", origin,
                            where);
    /* The key starts with its operator's name: a mismatch is a hand edit gone wrong. */
    const char *k = json_string_value(key), *name = sf_op_type_name(type);
    size_t nl = strlen(name);
    if (strncmp(k, name, nl) != 0 || k[nl] != '|')
        return sf_error_set(err, SF_ERR_PARSE, "%s: %sfield 'key' does not start with '%s|'",
                            origin, where, name);
    if (!json_is_number(fwd) || !time_ok(json_number_value(fwd)))
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %sfield 'fwd_s': must be a number from 0 to %g", origin, where,
                            SF_PROFILE_TIME_MAX_S);
    if (!json_is_number(bwd) || !time_ok(json_number_value(bwd)))
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %sfield 'bwd_s': must be a number from 0 to %g", origin, where,
                            SF_PROFILE_TIME_MAX_S);
    if (!json_is_integer(reps) || json_integer_value(reps) < 1 ||
        json_integer_value(reps) > INT32_MAX)
        return sf_error_set(err, SF_ERR_PARSE, "%s: %sfield 'reps': must be a positive integer",
                            origin, where);
    if (sf_profile_db_lookup(db, k))
        return sf_error_set(err, SF_ERR_PARSE, "%s: %sduplicate key '%.200s'", origin, where, k);
    return sf_profile_db_insert(db, k, type, json_number_value(fwd), json_number_value(bwd),
                                (int)json_integer_value(reps), err);
}

sf_profile_db *sf_profile_db_parse_json(const char *text, const char *origin, sf_error *err) {
    if (!origin) origin = "<costs>";
    if (!text) {
        sf_error_set(err, SF_ERR_INVALID, "%s: no text", origin);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        sf_error_set(err, SF_ERR_PARSE, "%s:%d:%d: %s", origin, je.line, je.column, je.text);
        return NULL;
    }
    static const char *const keys[] = {"format", "version", "device_kind", "entries"};
    sf_profile_db *db = NULL;
    if (!json_is_object(root)) {
        sf_error_set(err, SF_ERR_PARSE, "%s: the top level must be an object", origin);
        goto fail;
    }
    json_t *format = json_object_get(root, "format");
    if (!json_is_string(format) || strcmp(json_string_value(format), COSTS_FORMAT) != 0) {
        sf_error_set(err, SF_ERR_PARSE, "%s: not a costs file (\"format\" must be \"%s\")", origin,
                     COSTS_FORMAT);
        goto fail;
    }
    if (check_keys(root, keys, 4, origin, "", err) != SF_OK) goto fail;
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version) || json_integer_value(version) != COSTS_VERSION) {
        sf_error_set(err, SF_ERR_UNSUPPORTED, "%s: field 'version': only version %d is known",
                     origin, COSTS_VERSION);
        goto fail;
    }
    json_t *kind = json_object_get(root, "device_kind");
    if (!json_is_string(kind) || json_string_length(kind) >= SF_NAME_MAX) {
        sf_error_set(err, SF_ERR_PARSE,
                     "%s: field 'device_kind': must be a string of at most %d "
                     "bytes",
                     origin, SF_NAME_MAX - 1);
        goto fail;
    }
    json_t *entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) {
        sf_error_set(err, SF_ERR_PARSE, "%s: field 'entries': must be an array", origin);
        goto fail;
    }
    db = sf_profile_db_new(json_string_value(kind));
    if (!db) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (parse_entry(db, e, i, origin, err) != SF_OK) goto fail;
    }
    json_decref(root);
    return db;
fail:
    sf_profile_db_free(db);
    json_decref(root);
    return NULL;
}

sf_profile_db *sf_profile_db_load_json(const char *path, sf_error *err) {
    char *text = sf_read_file(path, NULL, err);
    if (!text) return NULL;
    sf_profile_db *db = sf_profile_db_parse_json(text, path, err);
    free(text);
    return db;
}

/* ---- the cost model ---------------------------------------------------- */

typedef struct profiled {
    sf_profile_db *db;
    sf_cost_model *fallback;
    sf_profile_stats stats;
} profiled;

/* The key the profiler writes for the one-step operator of an LSTM or GRU
 * tile: the same operator over one step of its input (x is (n, S, I); an
 * initial state is (n, H)), the tile's batch and hidden extents, one step.
 * An S-step operator's own tiles read all S steps of x, so a one-step tile
 * of it is a key no profile holds. */
#define ONE_STEP_MAX_INPUTS 4
static int one_step_key(const sf_op *op, const sf_tile *t, char *key, size_t n) {
    if (op->n_inputs < 1 || op->n_inputs > ONE_STEP_MAX_INPUTS || op->in_shapes[0].ndim != 3 ||
        op->space.ndim < 2)
        return 0;
    sf_shape ins[ONE_STEP_MAX_INPUTS];
    for (int i = 0; i < op->n_inputs; i++) ins[i] = op->in_shapes[i];
    ins[0].d[1] = 1;
    sf_op one = *op;
    one.in_shapes = ins;
    one.space.d[1] = 1;
    sf_tile ot = *t;
    ot.lo[1] = 0;
    ot.hi[1] = 1;
    return sf_profile_key(&one, &ot, key, n) != NULL;
}

static double profiled_task_s(void *self, const sf_op *op, const sf_tile *t,
                              const sf_device_kind *kind, sf_pass pass) {
    profiled *p = self;
    if (pass == SF_PASS_UPDATE || op->type == SF_OP_INPUT || sf_tile_empty(t))
        return p->fallback->vt->task_s(p->fallback->self, op, t, kind, pass);
    char key[SF_PROFILE_KEY_MAX];
    const sf_profile_entry *e = NULL;
    if (strcmp(kind->name, p->db->device_kind) == 0 && sf_profile_key(op, t, key, sizeof key))
        e = sf_profile_db_lookup(p->db, key);
    if (e) {
        p->stats.hits++;
        return pass == SF_PASS_BWD ? e->bwd_s : e->fwd_s;
    }
    /* An LSTM or GRU tile on a device that prices recurrences step by step
     * (rnn_per_step; docs/cost-model.md, "Recurrent operators step by step"):
     * its steps run one after another, so the measured tile of a one-step
     * operator of the same batch, hidden and input extents times the steps. */
    if ((op->type == SF_OP_LSTM || op->type == SF_OP_GRU) && kind->rnn_per_step && t->ndim >= 2 &&
        strcmp(kind->name, p->db->device_kind) == 0) {
        int64_t steps = t->hi[1] - t->lo[1];
        if (steps > 1 && one_step_key(op, t, key, sizeof key)) e = sf_profile_db_lookup(p->db, key);
        if (e) {
            p->stats.hits++;
            return (double)steps * (pass == SF_PASS_BWD ? e->bwd_s : e->fwd_s);
        }
    }
    p->stats.misses++;
    if ((unsigned)op->type < SF_OP_COUNT) p->stats.misses_by_type[op->type]++;
    return p->fallback->vt->task_s(p->fallback->self, op, t, kind, pass);
}

static void profiled_free(void *self) {
    profiled *p = self;
    sf_profile_db_free(p->db);
    sf_cost_free(p->fallback);
    free(p);
}

static const sf_cost_model_vtable profiled_vt = {
    .name = "profiled",
    .task_s = profiled_task_s,
    .free = profiled_free,
};

sf_cost_model *sf_cost_profiled_new(const sf_machine *m, sf_profile_db *db,
                                    sf_cost_model *fallback) {
    sf_cost_model *cm = NULL;
    profiled *p = NULL;
    if (!m || !db || !fallback || !fallback->vt || !fallback->vt->task_s) goto fail;
    if (fallback->dtype != SF_DTYPE_FP32) goto fail; /* the measurements are fp32 */
    cm = calloc(1, sizeof *cm);
    p = calloc(1, sizeof *p);
    if (!cm || !p) goto fail;
    p->db = db;
    p->fallback = fallback;
    cm->vt = &profiled_vt;
    cm->self = p;
    cm->machine = m;
    cm->optimizer = fallback->optimizer; /* updates are the fallback's */
    return cm;
fail:
    free(cm);
    free(p);
    sf_profile_db_free(db);
    sf_cost_free(fallback);
    return NULL;
}

static profiled *as_profiled(const sf_cost_model *cm) {
    return cm && cm->vt == &profiled_vt ? cm->self : NULL;
}

const sf_profile_db *sf_cost_profiled_db(const sf_cost_model *cm) {
    profiled *p = as_profiled(cm);
    return p ? p->db : NULL;
}

sf_status sf_cost_profiled_stats(const sf_cost_model *cm, sf_profile_stats *out) {
    profiled *p = as_profiled(cm);
    if (!p || !out) return SF_ERR_INVALID;
    *out = p->stats;
    return SF_OK;
}

void sf_cost_profiled_reset_stats(sf_cost_model *cm) {
    profiled *p = as_profiled(cm);
    if (p) memset(&p->stats, 0, sizeof p->stats);
}

int sf_cost_profiled_misses(const sf_cost_model *cm, char *buf, size_t n) {
    if (buf && n) buf[0] = '\0';
    profiled *p = as_profiled(cm);
    if (!p) return 0;
    int types = 0;
    size_t len = 0;
    for (int t = 0; t < SF_OP_COUNT; t++) {
        int64_t c = p->stats.misses_by_type[t];
        if (c == 0) continue;
        if (buf && len < n) {
            int k = snprintf(buf + len, n - len, "%s%s (%lld task%s)", types ? ", " : "",
                             sf_op_type_name((sf_op_type)t), (long long)c, c == 1 ? "" : "s");
            if (k > 0) len += (size_t)k;
        }
        types++;
    }
    return types;
}
