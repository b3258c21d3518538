/* Checkpoints in the safetensors format (io/safetensors.c): the writer gives the
 * reference implementation's bytes, what is written reads back bit for bit, every
 * truncation and every kind of damaged header is a one-line error naming the file
 * and the tensor or byte, and a failed write leaves no file and replaces none.
 * Where Python's safetensors is installed, both readers are run on the same files
 * and must accept and refuse the same ones (skipped elsewhere). */
#define _XOPEN_SOURCE 700 /* fork, setrlimit */

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/safetensors.h"

#define TMP_DIR_PATTERN "/tmp/sf_io_st_XXXXXX"
#include "lib/tmpdir.h"

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmp_dir, name);
}

static void assert_has(const char *msg, const char *piece) {
    if (!strstr(msg, piece)) {
        print_error("message \"%s\" lacks \"%s\"\n", msg, piece);
        fail();
    }
}

static void write_bytes(const char *path, const void *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Files in tmp_dir whose name holds ".tmp.": stranded temporaries. */
static int count_temps(void) {
    DIR *d = opendir(tmp_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* A file by hand: header text as given (no padding), then data_bytes bytes of
 * floats 0, 1, 2, ... (a partial last float when not a multiple of 4). */
static unsigned char *craft(const char *header, size_t data_bytes, size_t *len) {
    size_t n = strlen(header);
    unsigned char *b = calloc(8 + n + data_bytes + 4, 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    for (size_t i = 0; i * 4 < data_bytes; i++) {
        float v = (float)i;
        memcpy(b + 8 + n + 4 * i, &v, 4);
    }
    *len = 8 + n + data_bytes;
    return b;
}

/* ---- the reference writer's bytes -------------------------------------- */

/* The byte strings the reference implementation's own tests expect for these
 * tensors: an empty file, one with metadata only, and one tensor whose header
 * needs 7 bytes of padding. */
static void test_reference_bytes(void **state) {
    (void)state;
    char *out;
    size_t len;
    sf_error err = {0};
    assert_int_equal(sf_safetensors_encode(NULL, 0, NULL, NULL, 0, &out, &len, &err), SF_OK);
    assert_int_equal(len, 16);
    assert_memory_equal(out, "\x08\0\0\0\0\0\0\0{}      ", 16);
    free(out);

    const char *k[] = {"framework"}, *v[] = {"pt"};
    assert_int_equal(sf_safetensors_encode(NULL, 0, k, v, 1, &out, &len, &err), SF_OK);
    const char want_meta[] = "\x28\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
    assert_int_equal(len, sizeof want_meta - 1);
    assert_memory_equal(out, want_meta, len);
    free(out);

    const float data[6] = {0, 1, 2, 3, 4, 5};
    sf_st_tensor t = {.name = "attn0", .ndim = 4, .shape = {1, 1, 2, 3}, .data = data};
    assert_int_equal(sf_safetensors_encode(&t, 1, NULL, NULL, 0, &out, &len, &err), SF_OK);
    const char hdr[] = "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}"
                       "       ";
    assert_int_equal(len, 8 + 72 + 24);
    assert_memory_equal(out, "\x48\0\0\0\0\0\0\0", 8);
    assert_memory_equal(out + 8, hdr, 72);
    const unsigned char le[8] = {0, 0, 0, 0, 0, 0, 0x80, 0x3f}; /* 0.0f, 1.0f little-endian */
    assert_memory_equal(out + 80, le, 8);
    free(out);
}

/* ---- round trip -------------------------------------------------------- */

static void test_round_trip(void **state) {
    (void)state;
    float conv[2 * 3 * 2 * 2], bias[3], scalar = 0.25f;
    for (int i = 0; i < 24; i++) conv[i] = (float)i * 0.1f - 1.0f;
    /* awkward values survive bit for bit */
    conv[0] = -0.0f;
    conv[1] = INFINITY;
    conv[2] = NAN;
    conv[3] = 1e-45f; /* the smallest denormal */
    bias[0] = 3.0f;
    bias[1] = -2.0f;
    bias[2] = 1.5f;
    /* given out of name order; a zero-size tensor; a name with UTF-8 in it */
    sf_st_tensor ts[5] = {
        {.name = "conv1.weight", .ndim = 4, .shape = {2, 3, 2, 2}, .data = conv},
        {.name = "conv1.bias", .ndim = 1, .shape = {3}, .data = bias},
        {.name = "step.scale", .ndim = 0, .data = &scalar},
        {.name = "empty", .ndim = 2, .shape = {0, 7}, .data = NULL},
        {.name = "caf\xc3\xa9", .ndim = 1, .shape = {2}, .data = bias},
    };
    const char *keys[] = {"format", "step"}, *values[] = {"soapflow", "1200"};
    char path[256];
    tmp_path(path, sizeof path, "round.safetensors");
    sf_error err = {0};
    assert_int_equal(sf_safetensors_write(path, ts, 5, keys, values, 2, &err), SF_OK);
    assert_int_equal(count_temps(), 0);

    sf_st_file *f = sf_safetensors_read(path, &err);
    assert_non_null(f);
    assert_int_equal(sf_safetensors_count(f), 5);
    /* file order is name order (bytewise), as the reference writer sorts */
    const char *order[5] = {"caf\xc3\xa9", "conv1.bias", "conv1.weight", "empty", "step.scale"};
    for (size_t i = 0; i < 5; i++) assert_string_equal(sf_safetensors_at(f, i)->name, order[i]);
    assert_null(sf_safetensors_at(f, 5));
    for (int i = 0; i < 5; i++) {
        const sf_st_tensor *r = sf_safetensors_find(f, ts[i].name);
        assert_non_null(r);
        assert_int_equal(r->ndim, ts[i].ndim);
        int64_t numel = 1;
        for (int k = 0; k < r->ndim; k++) {
            assert_int_equal(r->shape[k], ts[i].shape[k]);
            numel *= r->shape[k];
        }
        assert_int_equal(r->numel, numel);
        if (numel) {
            assert_true((uintptr_t)r->data % sizeof(float) == 0);
            assert_memory_equal(r->data, ts[i].data, (size_t)numel * sizeof(float));
        } else {
            assert_null(r->data);
        }
    }
    assert_null(sf_safetensors_find(f, "conv1"));
    assert_null(sf_safetensors_find(f, "zzz"));
    assert_int_equal(sf_safetensors_meta_count(f), 2);
    assert_string_equal(sf_safetensors_meta(f, "step"), "1200");
    assert_string_equal(sf_safetensors_meta(f, "format"), "soapflow");
    assert_string_equal(sf_safetensors_meta_key(f, 0), "format");
    assert_string_equal(sf_safetensors_meta_value(f, 1), "1200");
    assert_null(sf_safetensors_meta(f, "epoch"));
    sf_safetensors_free(f);

    /* the same bytes through memory; rewriting gives the same file */
    size_t len, len2;
    unsigned char *disk = read_bytes(path, &len);
    char *mem;
    assert_int_equal(sf_safetensors_encode(ts, 5, keys, values, 2, &mem, &len2, &err), SF_OK);
    assert_int_equal(len, len2);
    assert_memory_equal(disk, mem, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | disk[i];
    assert_int_equal(hlen % 8, 0);
    f = sf_safetensors_parse(mem, len2, "mem", &err);
    assert_non_null(f);
    assert_int_equal(sf_safetensors_count(f), 5);
    sf_safetensors_free(f);
    free(mem);
    free(disk);
}

/* Files from other writers: a header length that is not a multiple of 8 (data
 * unaligned in the file), tensors listed out of offset order, members the format
 * does not define, null metadata. All read as the reference reads them. */
static const char foreign_header[] =
    "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
    "\"a\":{\"shape\":[1,2],\"data_offsets\":[0,8],\"dtype\":\"F32\",\"note\":1},"
    "\"__metadata__\":null}";

static void test_foreign_files(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = craft(foreign_header, 16, &len);
    assert_true((len - 16) % 4 != 0); /* the data section starts unaligned */
    sf_error err = {0};
    sf_st_file *f = sf_safetensors_parse(b, len, "foreign", &err);
    if (!f) print_error("%s\n", err.msg);
    assert_non_null(f);
    assert_int_equal(sf_safetensors_count(f), 2);
    assert_string_equal(sf_safetensors_at(f, 0)->name, "a"); /* by offset */
    const sf_st_tensor *a = sf_safetensors_find(f, "a"), *bt = sf_safetensors_find(f, "b");
    assert_true((uintptr_t)a->data % 4 == 0);
    assert_true(a->data[0] == 0.0f && a->data[1] == 1.0f);
    assert_true(bt->data[0] == 2.0f && bt->data[1] == 3.0f);
    assert_int_equal(sf_safetensors_meta_count(f), 0);
    sf_safetensors_free(f);
    free(b);
    /* the example from the reference implementation's documentation: I32 */
    b = craft("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, &len);
    assert_null(sf_safetensors_parse(b, len, "doc.safetensors", &err));
    assert_int_equal(err.code, SF_ERR_UNSUPPORTED);
    assert_has(err.msg, "doc.safetensors: tensor 'test': dtype I32 is not supported");
    free(b);
    /* a tensor named "": the format allows it and so does the reader (a fuzzer
     * met one); only the writer refuses it (test_writer_refuses), since every
     * tensor soapflow writes is a parameter, which has a name */
    b = craft("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &len);
    sf_error_clear(&err);
    f = sf_safetensors_parse(b, len, "empty-name", &err);
    assert_non_null(f);
    assert_string_equal(sf_safetensors_at(f, 0)->name, "");
    assert_ptr_equal(sf_safetensors_find(f, ""), sf_safetensors_at(f, 0));
    sf_safetensors_free(f);
    free(b);
}

/* ---- truncation -------------------------------------------------------- */

/* Every prefix of a small file is refused, from memory and from disk, with a
 * message that names the file and says what is missing: the length field, the
 * header, or the data. */
static void test_truncated_every_offset(void **state) {
    (void)state;
    float w[6] = {1, 2, 3, 4, 5, 6}, bias[2] = {7, 8};
    sf_st_tensor ts[2] = {{.name = "fc1.weight", .ndim = 2, .shape = {2, 3}, .data = w},
                          {.name = "fc1.bias", .ndim = 1, .shape = {2}, .data = bias}};
    const char *k[] = {"step"}, *v[] = {"3"};
    char *full;
    size_t len;
    sf_error err = {0};
    assert_int_equal(sf_safetensors_encode(ts, 2, k, v, 1, &full, &len, &err), SF_OK);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)full[i];
    assert_int_equal(len, 8 + hlen + 32);
    char path[256];
    tmp_path(path, sizeof path, "cut.safetensors");
    for (size_t cut = 0; cut < len; cut++) {
        for (int disk = 0; disk < 2; disk++) {
            sf_error e = {0};
            sf_st_file *f;
            if (disk) {
                write_bytes(path, full, cut);
                f = sf_safetensors_read(path, &e);
            } else {
                f = sf_safetensors_parse(full, cut, path, &e);
            }
            assert_null(f);
            assert_int_equal(e.code, SF_ERR_PARSE);
            assert_null(strchr(e.msg, '\n'));
            assert_true(strncmp(e.msg, path, strlen(path)) == 0);
            if (cut < 8)
                assert_has(e.msg, ": byte 0: truncated: expected the 8-byte header length");
            else if (cut < 8 + hlen)
                assert_has(e.msg, ": byte 0: truncated: header length");
            else
                assert_has(e.msg, "run past the end of the data");
        }
    }
    free(full);
    unlink(path);
}

/* ---- damaged headers --------------------------------------------------- */

typedef struct bad_case {
    const char *file;   /* also the name the cross-check gives it */
    const char *header; /* JSON text */
    size_t data;        /* bytes of data after it */
    sf_status code;
    const char *expect; /* in the message, after "FILE: " */
    int reference; /* what the reference reader does: 1 refuses too, 0 accepts, -1 not compared */
} bad_case;

#define T(name, dtype, shape, b, e)                                                                \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static const bad_case bad_cases[] = {
    {"bad-json", "{\"a\":{\"dtype\":\"F32\",", 0, SF_ERR_PARSE, "header is not valid JSON", 1},
    {"bad-trailing-garbage", "{} x", 0, SF_ERR_PARSE, "header is not valid JSON", 1},
    {"bad-not-object", "[1,2]", 0, SF_ERR_PARSE, "byte 8: the header is not a JSON object", 1},
    {"bad-utf8", "{\"\xff\":1}", 0, SF_ERR_PARSE, "header is not valid JSON", 1},
    {"bad-overlap", "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12,
     SF_ERR_PARSE, "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a', [0, 8]", 1},
    {"bad-hole", "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 12, 20) "}", 20,
     SF_ERR_PARSE, "data bytes 8 to 12 belong to no tensor (a hole before tensor 'b')", 1},
    {"bad-not-from-zero", "{" T("a", "F32", "[2]", 4, 12) "}", 12, SF_ERR_PARSE,
     "data bytes 0 to 4 belong to no tensor", 1},
    {"bad-past-end", "{" T("fc1.weight", "F32", "[2,2]", 0, 16) "}", 12, SF_ERR_PARSE,
     "tensor 'fc1.weight': data_offsets [0, 16] run past the end of the data, which holds 12", 1},
    {"bad-trailing-data", "{" T("a", "F32", "[2]", 0, 8) "}", 12, SF_ERR_PARSE,
     "4 bytes after the end of the last tensor's data", 1},
    {"bad-shape-mismatch", "{" T("fc1.weight", "F32", "[3]", 0, 8) "}", 8, SF_ERR_PARSE,
     "tensor 'fc1.weight': shape [3] of F32 needs 12 bytes, data_offsets [0, 8] hold 8", 1},
    {"bad-end-before-begin", "{" T("a", "F32", "[0]", 8, 0) "}", 8, SF_ERR_PARSE,
     "tensor 'a': data_offsets [8, 0] end before they begin", 1},
    {"bad-unknown-dtype", "{" T("a", "F33", "[2]", 0, 8) "}", 8, SF_ERR_PARSE,
     "tensor 'a': unknown dtype 'F33'", 1},
    {"bad-negative-shape", "{" T("a", "F32", "[-2]", 0, 8) "}", 8, SF_ERR_PARSE,
     "tensor 'a': shape[0] is not a non-negative integer", 1},
    {"bad-float-shape", "{" T("a", "F32", "[2.0]", 0, 8) "}", 8, SF_ERR_PARSE,
     "tensor 'a': shape[0] is not a non-negative integer", 1},
    {"bad-shape-overflow", "{" T("a", "F32", "[4611686018427387904,4]", 0, 8) "}", 8, SF_ERR_RANGE,
     "tensor 'a': shape [4611686018427387904, 4] overflows", 1},
    {"bad-no-offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, SF_ERR_PARSE,
     "tensor 'a': data_offsets is missing", 1},
    {"bad-three-offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 8,
     SF_ERR_PARSE, "tensor 'a': data_offsets is not an array of two offsets", 1},
    {"bad-no-dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SF_ERR_PARSE,
     "tensor 'a': dtype is missing", 1},
    {"bad-entry-not-object", "{\"a\":[0,8]}", 8, SF_ERR_PARSE,
     "tensor 'a': expected an object with dtype, shape and data_offsets", 1},
    {"bad-meta-not-string", "{\"__metadata__\":{\"step\":3}}", 0, SF_ERR_PARSE,
     "__metadata__: the value of 'step' is not a string", 1},
    {"bad-meta-array", "{\"__metadata__\":[]}", 0, SF_ERR_PARSE,
     "__metadata__ is not an object of strings", 1},
    /* refused here, by name, though the reference reads them */
    {"bad-f16", "{" T("fc1.weight", "F16", "[4]", 0, 8) "}", 8, SF_ERR_UNSUPPORTED,
     "tensor 'fc1.weight': dtype F16 is not supported: soapflow reads F32 tensors only", 0},
    {"bad-nine-dims", "{" T("a", "F32", "[1,1,1,1,1,1,1,1,2]", 0, 8) "}", 8, SF_ERR_UNSUPPORTED,
     "tensor 'a': 9 dimensions: soapflow reads at most 8", 0},
    /* the reference keeps one of the two silently (which one is its JSON
     * library's business), so no verdict is compared */
    {"bad-duplicate", "{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[2]", 0, 8) "}", 8,
     SF_ERR_PARSE, "header is not valid JSON: duplicate object key", -1},
};

static void test_bad_headers(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t len;
        unsigned char *b = craft(c->header, c->data, &len);
        char path[256], want[400];
        snprintf(path, sizeof path, "%s/%s.safetensors", tmp_dir, c->file);
        write_bytes(path, b, len);
        sf_error err = {0};
        sf_st_file *f = sf_safetensors_read(path, &err);
        if (f || err.code != c->code || !strstr(err.msg, c->expect))
            print_error("case %s: %s\n", c->file, f ? "accepted" : err.msg);
        assert_null(f);
        assert_int_equal(err.code, c->code);
        snprintf(want, sizeof want, "%s: ", path);
        assert_true(strncmp(err.msg, want, strlen(want)) == 0);
        assert_has(err.msg, c->expect);
        assert_null(strchr(err.msg, '\n'));
        free(b);
    }
    /* a header length that no file could hold, and one just past this file */
    unsigned char big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    sf_error err = {0};
    assert_null(sf_safetensors_parse(big, sizeof big, "big", &err));
    assert_has(err.msg,
               "big: byte 0: header length 18446744073709551615 is over the 100000000-byte limit");
    unsigned char past[10] = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    sf_error_clear(&err);
    assert_null(sf_safetensors_parse(past, sizeof past, "past", &err));
    assert_has(err.msg, "past: byte 0: truncated: header length 3, but the file ends at byte 10");
    /* not a file */
    sf_error_clear(&err);
    assert_null(sf_safetensors_read(tmp_dir, &err));
    assert_has(err.msg, "not a regular file");
    sf_error_clear(&err);
    char missing[256];
    tmp_path(missing, sizeof missing, "missing.safetensors");
    assert_null(sf_safetensors_read(missing, &err));
    assert_int_equal(err.code, SF_ERR_NOTFOUND);
    assert_has(err.msg, "missing.safetensors: cannot open");
    /* clean up the cases' files: the cross-check writes its own */
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s.safetensors", tmp_dir, bad_cases[i].file);
        unlink(path);
    }
}

/* ---- writing: bad input, failures -------------------------------------- */

static void test_writer_refuses(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    struct {
        sf_st_tensor t[2];
        size_t n;
        const char *expect;
    } cases[] = {
        {{{.name = "a", .ndim = 1, .shape = {4}, .data = x}, {.name = "a", .ndim = 0, .data = x}},
         2,
         "tensor 'a' appears twice"},
        {{{.name = "", .ndim = 1, .shape = {4}, .data = x}}, 1, "tensor 0 has no name"},
        {{{.name = "__metadata__", .ndim = 0, .data = x}}, 1, "'__metadata__' is reserved"},
        {{{.name = "a", .ndim = 2, .shape = {2, -2}, .data = x}},
         1,
         "tensor 'a': extent -2 of dimension 1 is negative"},
        {{{.name = "a", .ndim = 9, .data = x}}, 1, "tensor 'a': 9 dimensions: expected 0 to 8"},
        {{{.name = "a", .ndim = 1, .shape = {4}, .data = NULL}}, 1, "tensor 'a': no data"},
        {{{.name = "a", .ndim = 3, .shape = {1LL << 40, 1LL << 40, 1LL << 40}, .data = x}},
         1,
         "tensor 'a': shape overflows"},
        {{{.name = "bad\xff", .ndim = 1, .shape = {4}, .data = x}},
         1,
         "tensor name 'bad\xff' is not UTF-8 text"},
    };
    char path[256];
    tmp_path(path, sizeof path, "refused.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sf_error err = {0};
        assert_int_not_equal(
            sf_safetensors_write(path, cases[i].t, cases[i].n, NULL, NULL, 0, &err), SF_OK);
        assert_has(err.msg, path);
        assert_has(err.msg, cases[i].expect);
        assert_int_equal(access(path, F_OK), -1);
    }
    const char *k[] = {"a", "a"}, *v[] = {"1", "2"};
    sf_st_tensor ok = {.name = "w", .ndim = 1, .shape = {4}, .data = x};
    sf_error err = {0};
    assert_int_equal(sf_safetensors_write(path, &ok, 1, k, v, 2, &err), SF_ERR_INVALID);
    assert_has(err.msg, "metadata key 'a' appears twice");
    const char *bk[] = {"k"}, *bv[] = {"\xc3"};
    sf_error_clear(&err);
    assert_int_equal(sf_safetensors_write(path, &ok, 1, bk, bv, 1, &err), SF_ERR_INVALID);
    assert_has(err.msg, "metadata 'k': key or value is not UTF-8 text");
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_temps(), 0);
}

/* A write that fails, for bad input, for a missing folder, or halfway through
 * for want of space (a file size limit in a child process), leaves the file that
 * was there as it was, and no temporary beside it. */
static void test_failed_write_keeps_old_file(void **state) {
    (void)state;
    float small[2] = {1, 2};
    sf_st_tensor old = {.name = "old", .ndim = 1, .shape = {2}, .data = small};
    char path[256];
    tmp_path(path, sizeof path, "keep.safetensors");
    sf_error err = {0};
    assert_int_equal(sf_safetensors_write(path, &old, 1, NULL, NULL, 0, &err), SF_OK);
    size_t len0;
    unsigned char *before = read_bytes(path, &len0);

    sf_st_tensor dup[2] = {old, old};
    assert_int_equal(sf_safetensors_write(path, dup, 2, NULL, NULL, 0, &err), SF_ERR_INVALID);

    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", tmp_dir);
    sf_error_clear(&err);
    assert_int_equal(sf_safetensors_write(nodir, &old, 1, NULL, NULL, 0, &err), SF_ERR_IO);
    assert_has(err.msg, nodir);

    /* 1 MiB of weights against a 64 KiB file size limit */
    size_t n = 256 * 1024;
    float *big = calloc(n, sizeof *big);
    assert_non_null(big);
    sf_st_tensor bt = {.name = "big", .ndim = 1, .shape = {(int64_t)n}, .data = big};
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN); /* write(2) then fails with EFBIG */
        struct rlimit rl = {64 * 1024, 64 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(4);
        sf_error e = {0};
        sf_status st = sf_safetensors_write(path, &bt, 1, NULL, NULL, 0, &e);
        _exit(st == SF_ERR_IO && strstr(e.msg, "cannot write") ? 0 : 5);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(big);

    size_t len1;
    unsigned char *after = read_bytes(path, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    assert_int_equal(count_temps(), 0);
    free(before);
    free(after);
    sf_st_file *f = sf_safetensors_read(path, &err);
    assert_non_null(f);
    assert_non_null(sf_safetensors_find(f, "old"));
    sf_safetensors_free(f);
}

/* ---- against the reference implementation ------------------------------ */

static double sum_of(const sf_st_tensor *t) {
    double s = 0;
    for (int64_t i = 0; i < t->numel; i++) s += t->data[i];
    return s;
}

static void test_reference_reader(void **state) {
    (void)state;
    const char *src = getenv("SF_SOURCE_DIR");
    if (!src || system("python3 -c 'import numpy, safetensors.numpy' >/dev/null 2>&1") != 0) {
        print_message("python3 with numpy and safetensors not available: skipped\n");
        skip();
    }
    char dir[256];
    tmp_path(dir, sizeof dir, "xcheck");
    assert_int_equal(mkdir(dir, 0700), 0);
    /* our files: the one the reference writes too, and every header case */
    float w[6] = {0, 1, 2, 3, 4, 5}, b[3] = {0.5f, 1.5f, 2.5f}, s = -1.0f;
    sf_st_tensor ts[3] = {{.name = "w", .ndim = 2, .shape = {2, 3}, .data = w},
                          {.name = "b", .ndim = 1, .shape = {3}, .data = b},
                          {.name = "s", .ndim = 0, .data = &s}};
    const char *k[] = {"step"}, *v[] = {"7"};
    char path[512];
    snprintf(path, sizeof path, "%s/ours.safetensors", dir);
    sf_error err = {0};
    assert_int_equal(sf_safetensors_write(path, ts, 3, k, v, 1, &err), SF_OK);
    size_t n_cases = sizeof bad_cases / sizeof bad_cases[0], len0;
    for (size_t i = 0; i < n_cases; i++) {
        size_t len;
        unsigned char *bytes = craft(bad_cases[i].header, bad_cases[i].data, &len);
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, bad_cases[i].file);
        write_bytes(path, bytes, len);
        free(bytes);
    }
    unsigned char *fb = craft(foreign_header, 16, &len0);
    snprintf(path, sizeof path, "%s/good-foreign.safetensors", dir);
    write_bytes(path, fb, len0);
    free(fb);
    char cmd[1024], out[512];
    snprintf(out, sizeof out, "%s/verdicts.txt", dir);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/st_crosscheck.py' '%s' > '%s'", src, dir, out);
    assert_int_equal(system(cmd), 0);
    size_t len;
    char *text = (char *)read_bytes(out, &len);
    text[len] = '\0';
    /* our file, as the reference reads it */
    assert_has(text, "ok ours.safetensors\n");
    assert_has(text, "tensor ours.safetensors w 2x3 15\n");
    assert_has(text, "tensor ours.safetensors b 3 4.5\n");
    assert_has(text, "tensor ours.safetensors s scalar -1\n");
    assert_has(text, "meta ours.safetensors step 7\n");
    /* the same verdict on every damaged header, except the refusals of our own */
    for (size_t i = 0; i < n_cases; i++) {
        if (bad_cases[i].reference < 0) continue;
        char line[128];
        snprintf(line, sizeof line, "%s %s.safetensors\n",
                 bad_cases[i].reference ? "refused" : "ok", bad_cases[i].file);
        assert_has(text, line);
    }
    /* and a file of another writer's habits that both read */
    assert_has(text, "ok good-foreign.safetensors\n");
    assert_has(text, "tensor good-foreign.safetensors b 2 5\n");
    free(text);
    /* the reference's file, as we read it, and as we would have written it */
    snprintf(path, sizeof path, "%s/py-written.safetensors", dir);
    sf_st_file *f = sf_safetensors_read(path, &err);
    if (!f) print_error("%s\n", err.msg);
    assert_non_null(f);
    assert_int_equal(sf_safetensors_count(f), 3);
    assert_true(sum_of(sf_safetensors_find(f, "w")) == 15.0);
    assert_true(sum_of(sf_safetensors_find(f, "b")) == 4.5);
    assert_int_equal(sf_safetensors_find(f, "s")->ndim, 0);
    assert_string_equal(sf_safetensors_meta(f, "step"), "7");
    sf_safetensors_free(f);
    unsigned char *theirs = read_bytes(path, &len);
    char *ours;
    size_t olen;
    assert_int_equal(sf_safetensors_encode(ts, 3, k, v, 1, &ours, &olen, &err), SF_OK);
    assert_int_equal(olen, len);
    assert_memory_equal(ours, theirs, len);
    free(ours);
    free(theirs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_bytes),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_foreign_files),
        cmocka_unit_test(test_truncated_every_offset),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_writer_refuses),
        cmocka_unit_test(test_failed_write_keeps_old_file),
        cmocka_unit_test(test_reference_reader),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
