/*
 * fuzz_safetensors.c - the checkpoint reader (sf_safetensors_parse,
 * safetensors.h) on any bytes: an error, or tensors whose shapes, names and
 * bytes are consistent and that encode to a file which reads back to the same
 * tensors and metadata, and encodes to the same bytes again. A tensor named
 * "" is the exception: the format and the reader allow it, the writer refuses
 * it (a parameter has a name; safetensors.h), so such a file is not encoded.
 */
#include "fuzz.h"
#include "soapflow/safetensors.h"

/* The encoding of everything f holds (malloc'd, *len bytes). */
static char *encode(const sf_st_file *f, size_t *len) {
    size_t n = sf_safetensors_count(f), nm = sf_safetensors_meta_count(f);
    sf_st_tensor *t = calloc(n ? n : 1, sizeof *t);
    const char **keys = calloc(nm ? nm : 1, sizeof *keys);
    const char **values = calloc(nm ? nm : 1, sizeof *values);
    FUZZ_CHECK(t && keys && values, "out of memory");
    for (size_t i = 0; i < n; i++) t[i] = *sf_safetensors_at(f, i);
    for (size_t i = 0; i < nm; i++) {
        keys[i] = sf_safetensors_meta_key(f, i);
        values[i] = sf_safetensors_meta_value(f, i);
    }
    char *out = NULL;
    sf_error err = {0};
    FUZZ_CHECK(sf_safetensors_encode(t, n, keys, values, nm, &out, len, &err) == SF_OK,
               "what was read does not encode: %s", err.msg);
    free(values);
    free(keys);
    free(t);
    return out;
}

static void check_file(const sf_st_file *f) {
    for (size_t i = 0; i < sf_safetensors_count(f); i++) {
        const sf_st_tensor *t = sf_safetensors_at(f, i);
        FUZZ_CHECK(t && t->name && t->ndim >= 0 && t->ndim <= SF_ST_MAX_DIMS, "tensor %zu", i);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_CHECK(t->shape[d] >= 0, "tensor '%s': extent %lld", t->name,
                       (long long)t->shape[d]);
            numel *= t->shape[d];
        }
        FUZZ_CHECK(numel == t->numel, "tensor '%s': numel %lld of a shape of %lld", t->name,
                   (long long)t->numel, (long long)numel);
        FUZZ_CHECK(numel == 0 || t->data, "tensor '%s': no data", t->name);
        uint32_t sum = 0;
        for (int64_t k = 0; k < numel; k++) { /* every float readable */
            uint32_t w;
            memcpy(&w, t->data + k, 4);
            sum += w;
        }
        (void)sum;
        FUZZ_CHECK(sf_safetensors_find(f, t->name) == t, "tensor '%s' does not find itself",
                   t->name);
    }
    for (size_t i = 0; i < sf_safetensors_meta_count(f); i++) {
        const char *k = sf_safetensors_meta_key(f, i);
        FUZZ_CHECK(k && sf_safetensors_meta_value(f, i), "metadata %zu", i);
        FUZZ_CHECK(sf_safetensors_meta(f, k) == sf_safetensors_meta_value(f, i),
                   "metadata '%s' does not find itself", k);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sf_error err = {0};
    sf_st_file *f = sf_safetensors_parse(data, size, "ckpt.safetensors", &err);
    if (!f) {
        fuzz_check_error(err.code, &err, "ckpt.safetensors");
        return 0;
    }
    check_file(f);
    for (size_t i = 0; i < sf_safetensors_count(f); i++) {
        if (!sf_safetensors_at(f, i)->name[0]) {
            sf_safetensors_free(f);
            return 0;
        }
    }
    size_t l1, l2;
    char *b1 = encode(f, &l1);
    sf_error err2 = {0};
    sf_st_file *f2 = sf_safetensors_parse(b1, l1, "encoded.safetensors", &err2);
    FUZZ_CHECK(f2, "what the encoder wrote does not read back: %s", err2.msg);
    FUZZ_CHECK(sf_safetensors_count(f2) == sf_safetensors_count(f) &&
                   sf_safetensors_meta_count(f2) == sf_safetensors_meta_count(f),
               "read back: other counts");
    for (size_t i = 0; i < sf_safetensors_count(f); i++) {
        const sf_st_tensor *a = sf_safetensors_at(f, i);
        const sf_st_tensor *b = sf_safetensors_find(f2, a->name);
        FUZZ_CHECK(b && b->ndim == a->ndim && b->numel == a->numel &&
                       memcmp(b->shape, a->shape, sizeof a->shape[0] * (size_t)a->ndim) == 0 &&
                       (a->numel == 0 || memcmp(a->data, b->data, 4 * (size_t)a->numel) == 0),
                   "tensor '%s' reads back otherwise", a->name);
    }
    for (size_t i = 0; i < sf_safetensors_meta_count(f); i++) {
        const char *v = sf_safetensors_meta(f2, sf_safetensors_meta_key(f, i));
        FUZZ_CHECK(v && strcmp(v, sf_safetensors_meta_value(f, i)) == 0,
                   "metadata '%s' reads back otherwise", sf_safetensors_meta_key(f, i));
    }
    char *b2 = encode(f2, &l2);
    FUZZ_CHECK(l1 == l2 && memcmp(b1, b2, l1) == 0, "encoded twice, not the same bytes");
    free(b2);
    free(b1);
    sf_safetensors_free(f2);
    sf_safetensors_free(f);
    return 0;
}
