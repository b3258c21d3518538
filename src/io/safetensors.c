/*
 * safetensors.c - checkpoints in the safetensors format (docs/formats-checkpoint.md).
 *
 *     | N (u64 LE) | N bytes of JSON header, space-padded | data section |
 *
 * Why this format: PyTorch and most other tools read it, it holds nothing that
 * runs code, and it is simple enough to validate completely before use.
 *
 * Reading follows the reference reader's rules (Python's safetensors is its Rust
 * crate), so that a file either both accept or both refuse: the header length at
 * most 100 MB and inside the file; the header valid UTF-8 JSON, an object whose
 * members are tensors, each {dtype, shape, data_offsets} (other members of a
 * tensor are ignored, as there), plus an optional "__metadata__" object of
 * strings; each tensor's extent end - begin equal to its element count times its
 * dtype's size; and the tensors, ordered by offset, tiling the data section
 * exactly from 0 to its end. soapflow refuses, by tensor name, what it cannot
 * hold (dtypes other than F32, more than SF_ST_MAX_DIMS dimensions) and a JSON
 * object with a duplicate key, which the reference would resolve silently.
 * Messages are "FILE: tensor 'NAME': ..." or "FILE: byte K: ..." with K an
 * offset in the file.
 *
 * The data section is read into a buffer of its own (malloc'd, so aligned for
 * floats whatever the header length) and the tensors point into it; names and
 * metadata point into the parsed header, kept alive with the file object. The
 * whole file is read up front: checkpoints here are of models that fit in memory
 * anyway, and one read is simpler and safer than a map that a truncation of the
 * file under the reader would turn into SIGBUS.
 *
 * Writing builds the file in memory and hands it to sf_write_file_atomic (a
 * temporary beside the target, renamed over it when complete), which costs one
 * copy of the weights and reuses the project's one tested atomic writer. The
 * bytes are the reference writer's for the same F32 tensors: tensors sorted by
 * name, "__metadata__" first, compact JSON, the header padded with spaces to a
 * multiple of 8 bytes so that the data section starts aligned.
 *
 * Little-endian hosts only (see safetensors.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "soapflow/io.h"
#include "soapflow/safetensors.h"

/* A name and where it came from, to sort by name (qsort has no context argument). */
typedef struct named {
    const char *name;
    size_t idx;
} named;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

struct sf_st_file {
    json_t *root;          /* the parsed header: owns names and metadata strings */
    size_t n;              /* tensors */
    sf_st_tensor *tensors; /* (n) in file order */
    named *by_name;        /* (n) the tensors' names sorted, idx into tensors */
    size_t n_meta;
    const char **meta_keys; /* (n_meta) */
    const char **meta_values;
    float *data;       /* the data section, malloc'd */
    size_t data_bytes; /* its size */
};

static int little_endian(void) {
    const uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static sf_status big_endian_host(const char *origin, sf_error *err) {
    return sf_error_set(err, SF_ERR_UNSUPPORTED,
                        "%s: safetensors files are little-endian and this host is not", origin);
}

/* The dtypes of the format, with their sizes in bits, to tell an unsupported
 * dtype from a misspelt one. */
static const struct {
    const char *name;
    int bits;
} dtypes[] = {
    {"BOOL", 8}, {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16}, {"F16", 16},    {"BF16", 16},   {"I32", 32},    {"U32", 32},
    {"F32", 32}, {"C64", 64},    {"F64", 64},    {"I64", 64},    {"U64", 64},
};

static int known_dtype(const char *s) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, s) == 0) return 1;
    return 0;
}

/* "[2, 3, 4]" into buf. */
static void shape_text(const sf_st_tensor *t, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static uint64_t get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- reading ----------------------------------------------------------- */

void sf_safetensors_free(sf_st_file *f) {
    if (!f) return;
    json_decref(f->root);
    free(f->tensors);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->data);
    free(f);
}

/* Checks on the first 8 bytes against the file size; the header length in *hlen. */
static sf_status check_length(const char *origin, const unsigned char *first, uint64_t size,
                              uint64_t *hlen, sf_error *err) {
    if (size < 8)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: byte 0: truncated: expected the 8-byte header length, the file "
                            "has %llu bytes",
                            origin, (unsigned long long)size);
    uint64_t n = get_le64(first);
    if (n > SF_ST_HEADER_MAX)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: byte 0: header length %llu is over the %d-byte limit (not a "
                            "safetensors file?)",
                            origin, (unsigned long long)n, SF_ST_HEADER_MAX);
    if (n > size - 8)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: byte 0: truncated: header length %llu, but the file ends at "
                            "byte %llu",
                            origin, (unsigned long long)n, (unsigned long long)size);
    *hlen = n;
    return SF_OK;
}

/* One tensor's entry: dtype, shape and data_offsets, checked on their own and
 * against the size of the data section. */
static sf_status read_entry(const char *origin, const char *name, json_t *v, uint64_t data_bytes,
                            sf_st_tensor *t, uint64_t off[2], sf_error *err) {
    if (!json_is_object(v))
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: tensor '%s': expected an object with dtype, shape and "
                            "data_offsets",
                            origin, name);
    json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return sf_error_set(err, SF_ERR_PARSE, "%s: tensor '%s': dtype %s", origin, name,
                            dt ? "is not a string" : "is missing");
    const char *d = json_string_value(dt);
    if (strcmp(d, "F32") != 0) {
        if (known_dtype(d))
            return sf_error_set(err, SF_ERR_UNSUPPORTED,
                                "%s: tensor '%s': dtype %s is not supported: soapflow reads F32 "
                                "tensors only",
                                origin, name, d);
        return sf_error_set(err, SF_ERR_PARSE, "%s: tensor '%s': unknown dtype '%s'", origin, name,
                            d);
    }
    json_t *sh = json_object_get(v, "shape");
    if (!json_is_array(sh))
        return sf_error_set(err, SF_ERR_PARSE, "%s: tensor '%s': shape %s", origin, name,
                            sh ? "is not an array" : "is missing");
    size_t nd = json_array_size(sh);
    if (nd > SF_ST_MAX_DIMS)
        return sf_error_set(err, SF_ERR_UNSUPPORTED,
                            "%s: tensor '%s': %zu dimensions: soapflow reads at most %d", origin,
                            name, nd, SF_ST_MAX_DIMS);
    t->name = name;
    t->ndim = (int)nd;
    int64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *e = json_array_get(sh, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return sf_error_set(err, SF_ERR_PARSE,
                                "%s: tensor '%s': shape[%zu] is not a non-negative integer", origin,
                                name, i);
        t->shape[i] = (int64_t)json_integer_value(e);
        if (sf_mul_overflow_i64(numel, t->shape[i], &numel) != 0) overflow = 1;
    }
    int64_t bytes;
    char st[160];
    shape_text(t, st, sizeof st);
    if (overflow || sf_mul_overflow_i64(numel, 4, &bytes) != 0)
        return sf_error_set(err, SF_ERR_RANGE, "%s: tensor '%s': shape %s overflows", origin, name,
                            st);
    t->numel = numel;
    json_t *of = json_object_get(v, "data_offsets");
    if (!json_is_array(of) || json_array_size(of) != 2)
        return sf_error_set(err, SF_ERR_PARSE, "%s: tensor '%s': data_offsets %s", origin, name,
                            of ? "is not an array of two offsets" : "is missing");
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(of, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return sf_error_set(err, SF_ERR_PARSE,
                                "%s: tensor '%s': data_offsets[%zu] is not a non-negative integer",
                                origin, name, i);
        off[i] = (uint64_t)json_integer_value(e);
    }
    if (off[1] < off[0])
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                            origin, name, (unsigned long long)off[0], (unsigned long long)off[1]);
    if (off[1] - off[0] != (uint64_t)bytes)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: tensor '%s': shape %s of F32 needs %lld bytes, data_offsets "
                            "[%llu, %llu] hold %llu",
                            origin, name, st, (long long)bytes, (unsigned long long)off[0],
                            (unsigned long long)off[1], (unsigned long long)(off[1] - off[0]));
    if (off[1] > data_bytes)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the "
                            "data, which holds %llu bytes (truncated file?)",
                            origin, name, (unsigned long long)off[0], (unsigned long long)off[1],
                            (unsigned long long)data_bytes);
    return SF_OK;
}

typedef struct span {
    uint64_t lo, hi;
    size_t idx; /* into the entries as read */
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
    return 0;
}

/* Parse and validate the header (hlen bytes at hdr) of a file whose data
 * section has data_bytes bytes; the file object without its data. */
static sf_st_file *parse_header(const char *origin, const unsigned char *hdr, size_t hlen,
                                uint64_t data_bytes, sf_error *err) {
    span *spans = NULL;           /* (n) the tensors' data offsets */
    sf_st_tensor *entries = NULL; /* (n) the tensors in header order */
    sf_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", origin);
        return NULL;
    }
    json_error_t je;
    f->root = json_loadb((const char *)hdr, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!f->root) {
        sf_error_set(err, SF_ERR_PARSE, "%s: byte %lld: header is not valid JSON: %s", origin,
                     (long long)(8 + (je.position > 0 ? je.position : 0)), je.text);
        goto fail;
    }
    if (!json_is_object(f->root)) {
        sf_error_set(err, SF_ERR_PARSE, "%s: byte 8: the header is not a JSON object", origin);
        goto fail;
    }
    size_t members = json_object_size(f->root);
    json_t *meta = json_object_get(f->root, "__metadata__");
    size_t n = members - (meta ? 1 : 0);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    spans = calloc(n ? n : 1, sizeof *spans);
    entries = calloc(n ? n : 1, sizeof *entries);
    if (!f->tensors || !f->by_name || !spans || !entries) {
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", origin);
        goto fail;
    }
    if (meta && !json_is_null(meta)) { /* null: no metadata, as the reference reads it */
        if (!json_is_object(meta)) {
            sf_error_set(err, SF_ERR_PARSE, "%s: __metadata__ is not an object of strings", origin);
            goto fail;
        }
        size_t m = json_object_size(meta);
        f->meta_keys = calloc(m ? m : 1, sizeof *f->meta_keys);
        f->meta_values = calloc(m ? m : 1, sizeof *f->meta_values);
        if (!f->meta_keys || !f->meta_values) {
            sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", origin);
            goto fail;
        }
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v) {
            if (!json_is_string(v)) {
                sf_error_set(err, SF_ERR_PARSE,
                             "%s: __metadata__: the value of '%s' is not a string", origin, k);
                goto fail;
            }
            f->meta_keys[f->n_meta] = k;
            f->meta_values[f->n_meta++] = json_string_value(v);
        }
    }
    size_t i = 0;
    const char *name;
    json_t *v;
    json_object_foreach(f->root, name, v) {
        if (strcmp(name, "__metadata__") == 0) continue;
        uint64_t off[2];
        if (read_entry(origin, name, v, data_bytes, &entries[i], off, err) != SF_OK) goto fail;
        spans[i] = (span){off[0], off[1], i};
        i++;
    }
    /* the tensors by offset must tile [0, data_bytes) exactly */
    qsort(spans, n, sizeof *spans, cmp_span);
    uint64_t at = 0;
    uint64_t data0 = 8 + (uint64_t)hlen; /* file offset of the data section */
    for (i = 0; i < n; i++) {
        const sf_st_tensor *t = &entries[spans[i].idx];
        if (spans[i].lo > at) {
            sf_error_set(err, SF_ERR_PARSE,
                         "%s: byte %llu: data bytes %llu to %llu belong to no tensor (a hole "
                         "before tensor '%s')",
                         origin, (unsigned long long)(data0 + at), (unsigned long long)at,
                         (unsigned long long)spans[i].lo, t->name);
            goto fail;
        }
        if (spans[i].lo < at) {
            const span *p = &spans[i - 1];
            sf_error_set(err, SF_ERR_PARSE,
                         "%s: tensor '%s': data_offsets [%llu, %llu] overlap those of tensor "
                         "'%s', [%llu, %llu]",
                         origin, t->name, (unsigned long long)spans[i].lo,
                         (unsigned long long)spans[i].hi, entries[p->idx].name,
                         (unsigned long long)p->lo, (unsigned long long)p->hi);
            goto fail;
        }
        at = spans[i].hi;
        f->tensors[i] = *t;
    }
    if (at != data_bytes) {
        sf_error_set(err, SF_ERR_PARSE,
                     "%s: byte %llu: %llu bytes after the end of the last tensor's data", origin,
                     (unsigned long long)(data0 + at), (unsigned long long)(data_bytes - at));
        goto fail;
    }
    f->n = n;
    for (i = 0; i < n; i++) f->by_name[i] = (named){f->tensors[i].name, i};
    qsort(f->by_name, n, sizeof *f->by_name, cmp_named);
    free(spans);
    free(entries);
    f->data_bytes = (size_t)data_bytes;
    return f;

fail:
    free(spans);
    free(entries);
    sf_safetensors_free(f);
    return NULL;
}

/* Point each tensor at its bytes in f->data: in file order they tile it from 0. */
static void attach_data(sf_st_file *f) {
    size_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        f->tensors[i].data = f->tensors[i].numel ? f->data + at / 4 : NULL;
        at += 4 * (size_t)f->tensors[i].numel;
    }
}

static float *alloc_data(const char *origin, size_t bytes, sf_error *err) {
    float *p = malloc(bytes ? bytes : 4);
    if (!p)
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory for %zu bytes of tensors", origin,
                     bytes);
    return p;
}

sf_st_file *sf_safetensors_parse(const void *bytes, size_t len, const char *origin, sf_error *err) {
    if (!origin) origin = "safetensors";
    if (!little_endian()) {
        big_endian_host(origin, err);
        return NULL;
    }
    const unsigned char *b = bytes;
    uint64_t hlen;
    if (check_length(origin, b, len, &hlen, err) != SF_OK) return NULL;
    sf_st_file *f = parse_header(origin, b + 8, (size_t)hlen, len - 8 - hlen, err);
    if (!f) return NULL;
    f->data = alloc_data(origin, f->data_bytes, err);
    if (!f->data) {
        sf_safetensors_free(f);
        return NULL;
    }
    if (f->data_bytes) memcpy(f->data, b + 8 + hlen, f->data_bytes);
    attach_data(f);
    return f;
}

sf_st_file *sf_safetensors_read(const char *path, sf_error *err) {
    if (!path) {
        sf_error_set(err, SF_ERR_INVALID, "safetensors: no path");
        return NULL;
    }
    if (!little_endian()) {
        big_endian_host(path, err);
        return NULL;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        int e = errno;
        sf_error_set(err, e == ENOENT ? SF_ERR_NOTFOUND : SF_ERR_IO, "%s: cannot open: %s", path,
                     strerror(e));
        return NULL;
    }
    sf_st_file *f = NULL;
    unsigned char *hdr = NULL;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        sf_error_set(err, SF_ERR_IO, "%s: not a regular file", path);
        goto done;
    }
    uint64_t size = (uint64_t)st.st_size, hlen;
    unsigned char first[8] = {0};
    size_t got = fread(first, 1, 8, fp);
    if (check_length(path, first, got < 8 ? got : size, &hlen, err) != SF_OK) goto done;
    hdr = malloc(hlen ? hlen : 1);
    if (!hdr) {
        sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(hdr, 1, hlen, fp) != hlen) {
        sf_error_set(err, SF_ERR_IO, "%s: cannot read the header (did the file change?)", path);
        goto done;
    }
    f = parse_header(path, hdr, (size_t)hlen, size - 8 - hlen, err);
    if (!f) goto done;
    f->data = alloc_data(path, f->data_bytes, err);
    if (!f->data || fread(f->data, 1, f->data_bytes, fp) != f->data_bytes) {
        if (f->data)
            sf_error_set(err, SF_ERR_IO, "%s: cannot read the tensor data (did the file change?)",
                         path);
        sf_safetensors_free(f);
        f = NULL;
        goto done;
    }
    attach_data(f);
done:
    free(hdr);
    fclose(fp);
    return f;
}

size_t sf_safetensors_count(const sf_st_file *f) { return f ? f->n : 0; }

const sf_st_tensor *sf_safetensors_at(const sf_st_file *f, size_t i) {
    return f && i < f->n ? &f->tensors[i] : NULL;
}

const sf_st_tensor *sf_safetensors_find(const sf_st_file *f, const char *name) {
    if (!f || !name) return NULL;
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid].name, name);
        if (c == 0) return &f->tensors[f->by_name[mid].idx];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t sf_safetensors_meta_count(const sf_st_file *f) { return f ? f->n_meta : 0; }

const char *sf_safetensors_meta_key(const sf_st_file *f, size_t i) {
    return f && i < f->n_meta ? f->meta_keys[i] : NULL;
}

const char *sf_safetensors_meta_value(const sf_st_file *f, size_t i) {
    return f && i < f->n_meta ? f->meta_values[i] : NULL;
}

const char *sf_safetensors_meta(const sf_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

/* ---- writing ----------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Check the tensors; their order by name in order[], total data bytes. */
static sf_status check_tensors(const sf_st_tensor *ts, size_t n, named *order, uint64_t *total,
                               sf_error *err) {
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        const sf_st_tensor *t = &ts[i];
        if (!t->name || !*t->name)
            return sf_error_set(err, SF_ERR_INVALID, "tensor %zu has no name", i);
        if (strcmp(t->name, "__metadata__") == 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "'__metadata__' is reserved, not a tensor name");
        if (t->ndim < 0 || t->ndim > SF_ST_MAX_DIMS)
            return sf_error_set(err, SF_ERR_INVALID, "tensor '%s': %d dimensions: expected 0 to %d",
                                t->name, t->ndim, SF_ST_MAX_DIMS);
        int64_t numel = 1, bytes;
        for (int k = 0; k < t->ndim; k++) {
            if (t->shape[k] < 0)
                return sf_error_set(err, SF_ERR_INVALID,
                                    "tensor '%s': extent %lld of dimension %d is "
                                    "negative",
                                    t->name, (long long)t->shape[k], k);
            if (sf_mul_overflow_i64(numel, t->shape[k], &numel) != 0)
                return sf_error_set(err, SF_ERR_RANGE, "tensor '%s': shape overflows", t->name);
        }
        if (sf_mul_overflow_i64(numel, 4, &bytes) != 0 || (uint64_t)bytes > UINT64_MAX - *total ||
            *total + (uint64_t)bytes > SIZE_MAX / 2)
            return sf_error_set(err, SF_ERR_RANGE, "tensor '%s': too large", t->name);
        if (numel > 0 && !t->data)
            return sf_error_set(err, SF_ERR_INVALID, "tensor '%s': no data", t->name);
        *total += (uint64_t)bytes;
        order[i] = (named){t->name, i};
    }
    qsort(order, n, sizeof *order, cmp_named);
    for (size_t i = 1; i < n; i++)
        if (strcmp(order[i - 1].name, order[i].name) == 0)
            return sf_error_set(err, SF_ERR_INVALID, "tensor '%s' appears twice", order[i].name);
    return SF_OK;
}

static int64_t numel_of(const sf_st_tensor *t) {
    int64_t n = 1;
    for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
    return n;
}

/* The header's JSON text (malloc'd by jansson), or NULL with err set. */
static char *header_json(const sf_st_tensor *ts, size_t n, const named *order,
                         const char *const *keys, const char *const *values, size_t n_meta,
                         sf_error *err) {
    json_t *root = json_object();
    if (!root) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    char *text = NULL;
    if (n_meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m) != 0) {
            sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n_meta; i++) {
            json_t *s = json_string(values[i]);
            if (!s || json_object_set_new(m, keys[i], s) != 0) {
                sf_error_set(err, SF_ERR_INVALID, "metadata '%s': key or value is not UTF-8 text",
                             keys[i]);
                goto done;
            }
        }
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const sf_st_tensor *t = &ts[order[i].idx];
        json_t *shape = json_array(), *offs = json_array(), *e = json_object();
        int bad = !shape || !offs || !e;
        for (int k = 0; k < t->ndim && !bad; k++)
            bad = json_array_append_new(shape, json_integer(t->shape[k])) != 0;
        uint64_t end = at + 4 * (uint64_t)numel_of(t);
        bad = bad || json_array_append_new(offs, json_integer((json_int_t)at)) != 0 ||
              json_array_append_new(offs, json_integer((json_int_t)end)) != 0 ||
              json_object_set_new(e, "dtype", json_string("F32")) != 0 ||
              json_object_set(e, "shape", shape) != 0 ||
              json_object_set(e, "data_offsets", offs) != 0;
        json_decref(shape);
        json_decref(offs);
        if (bad) {
            json_decref(e);
            sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (json_object_set_new(root, t->name, e) != 0) {
            sf_error_set(err, SF_ERR_INVALID, "tensor name '%s' is not UTF-8 text", t->name);
            goto done;
        }
        at = end;
    }
    text = json_dumps(root, JSON_COMPACT);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
done:
    json_decref(root);
    return text;
}

sf_status sf_safetensors_encode(const sf_st_tensor *tensors, size_t n, const char *const *meta_keys,
                                const char *const *meta_values, size_t n_meta, char **out,
                                size_t *len, sf_error *err) {
    if (!out || !len) return sf_error_set(err, SF_ERR_INVALID, "safetensors: no output");
    *out = NULL;
    *len = 0;
    if (!little_endian()) return big_endian_host("safetensors", err);
    if (n && !tensors) return sf_error_set(err, SF_ERR_INVALID, "safetensors: no tensors");
    if (n_meta && (!meta_keys || !meta_values))
        return sf_error_set(err, SF_ERR_INVALID, "safetensors: no metadata keys or values");
    for (size_t i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_values[i])
            return sf_error_set(err, SF_ERR_INVALID, "metadata entry %zu is NULL", i);
    const char **sorted_keys = malloc((n_meta ? n_meta : 1) * sizeof *sorted_keys);
    named *order = malloc((n ? n : 1) * sizeof *order);
    sf_status st = SF_OK;
    char *text = NULL;
    if (!sorted_keys || !order) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (n_meta) memcpy(sorted_keys, meta_keys, n_meta * sizeof *sorted_keys);
    qsort(sorted_keys, n_meta, sizeof *sorted_keys, cmp_str_ptr);
    for (size_t i = 1; i < n_meta; i++)
        if (strcmp(sorted_keys[i - 1], sorted_keys[i]) == 0) {
            st = sf_error_set(err, SF_ERR_INVALID, "metadata key '%s' appears twice",
                              sorted_keys[i]);
            goto done;
        }
    uint64_t data_bytes;
    st = check_tensors(tensors, n, order, &data_bytes, err);
    if (st != SF_OK) goto done;
    text = header_json(tensors, n, order, meta_keys, meta_values, n_meta, err);
    if (!text) {
        st = err ? err->code : SF_ERR_NOMEM;
        if (st == SF_OK) st = SF_ERR_NOMEM;
        goto done;
    }
    size_t tl = strlen(text), hlen = (tl + 7) / 8 * 8;
    size_t total = 8 + hlen + (size_t)data_bytes;
    unsigned char *buf = malloc(total);
    if (!buf) {
        st = sf_error_set(err, SF_ERR_NOMEM, "safetensors: out of memory for %zu bytes", total);
        goto done;
    }
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, text, tl);
    memset(buf + 8 + tl, ' ', hlen - tl);
    size_t at = 8 + hlen;
    for (size_t i = 0; i < n; i++) {
        const sf_st_tensor *t = &tensors[order[i].idx];
        size_t bytes = 4 * (size_t)numel_of(t);
        if (bytes) memcpy(buf + at, t->data, bytes);
        at += bytes;
    }
    *out = (char *)buf;
    *len = total;
done:
    free(text);
    free(order);
    free(sorted_keys);
    return st;
}

sf_status sf_safetensors_write(const char *path, const sf_st_tensor *tensors, size_t n,
                               const char *const *meta_keys, const char *const *meta_values,
                               size_t n_meta, sf_error *err) {
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "safetensors: no path");
    char *buf;
    size_t len;
    sf_status st =
        sf_safetensors_encode(tensors, n, meta_keys, meta_values, n_meta, &buf, &len, err);
    if (st != SF_OK) {
        sf_error_prefix(err, "%s: ", path);
        return st;
    }
    st = sf_write_file_atomic(path, buf, len, err);
    free(buf);
    return st;
}
