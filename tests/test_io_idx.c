/* The IDX reader (io/idx.c) on files this test writes, plain and gzipped: what
 * was written reads back, and every way a file can be cut short or damaged is a
 * one-line error that names the file and the byte offset, never a crash or a
 * huge allocation. Every file is read twice, by sf_idx_read and by
 * sf_idx_parse on its bytes (read_idx): the two byte sources must agree. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>
#include <zlib.h>

#include "soapflow/data.h"

#define TMP_DIR_PATTERN "/tmp/sf_io_idx_XXXXXX"
#include "lib/tmpdir.h"

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmp_dir, name);
}

/* An IDX file's bytes in memory: header for dims, then `bytes` data bytes that
 * are pseudo-random (incompressible, so a gzipped copy is about as long and a
 * cut lands inside the deflate data) or a ramp. Caller frees. */
static unsigned char *make_idx(int ndim, const uint32_t *dims, int random, size_t *len) {
    size_t data = 1;
    for (int i = 0; i < ndim; i++) data *= dims[i];
    size_t hdr = 4 + 4 * (size_t)ndim;
    unsigned char *b = malloc(hdr + data + 1);
    assert_non_null(b);
    b[0] = 0;
    b[1] = 0;
    b[2] = 0x08;
    b[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        b[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
        b[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
        b[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
        b[7 + 4 * i] = (unsigned char)dims[i];
    }
    sf_rng r;
    sf_rng_seed(&r, 7);
    for (size_t i = 0; i < data; i++)
        b[hdr + i] = random ? (unsigned char)sf_rng_next(&r) : (unsigned char)(i * 7 + 3);
    *len = hdr + data;
    return b;
}

static void write_plain(const char *path, const unsigned char *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const unsigned char *b, size_t len) {
    gzFile g = gzopen(path, "wb1");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, b, (unsigned)len), (int)len);
    assert_int_equal(gzclose(g), Z_OK);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *b = malloc(1 << 20);
    assert_non_null(b);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

/* A whole file in memory (caller frees), or NULL when it cannot be opened. */
static unsigned char *slurp_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    assert_int_equal(fstat(fileno(f), &st), 0);
    *len = (size_t)st.st_size;
    unsigned char *b = malloc(*len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* sf_idx_read, and sf_idx_parse on the same bytes named by the same path: the
 * same status, the same message, the same contents. */
static sf_status read_idx(const char *path, const char *what, sf_idx *out, sf_error *err) {
    sf_status st = sf_idx_read(path, what, out, err);
    size_t len = 0;
    unsigned char *b = slurp_all(path, &len);
    if (!b) return st; /* no file: only sf_idx_read has something to say */
    sf_error e2 = {0};
    sf_idx y;
    sf_status st2 = sf_idx_parse(b, len, path, what, &y, &e2);
    if (st2 != st || strcmp(e2.msg, st == SF_OK ? "" : err->msg) != 0)
        print_error("sf_idx_read: %d \"%s\"\nsf_idx_parse: %d \"%s\"\n", st,
                    st == SF_OK ? "" : err->msg, st2, e2.msg);
    assert_int_equal(st2, st);
    assert_string_equal(e2.msg, st == SF_OK ? "" : err->msg);
    assert_int_equal(y.ndim, out->ndim);
    assert_memory_equal(y.dims, out->dims, sizeof y.dims);
    assert_int_equal(y.bytes, out->bytes);
    assert_int_equal(y.gzipped, out->gzipped);
    if (st == SF_OK && y.bytes) assert_memory_equal(y.data, out->data, y.bytes);
    if (st != SF_OK) assert_null(y.data);
    sf_idx_free(&y);
    free(b);
    return st;
}

/* The message holds every one of the given pieces. */
static void assert_msg_has(const sf_error *err, int n, ...) {
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *piece = va_arg(ap, const char *);
        if (!strstr(err->msg, piece)) {
            print_error("message \"%s\" lacks \"%s\"\n", err->msg, piece);
            va_end(ap);
            fail();
        }
    }
    va_end(ap);
    assert_null(strchr(err->msg, '\n'));
}

static void test_round_trip_plain_and_gz(void **state) {
    (void)state;
    uint32_t dims[3] = {5, 3, 4};
    size_t len;
    unsigned char *b = make_idx(3, dims, 0, &len);
    char plain[256], gz[256], gz_noext[256], plain_gzext[256];
    tmp_path(plain, sizeof plain, "rt-images-idx3-ubyte");
    tmp_path(gz, sizeof gz, "rt-images-idx3-ubyte.gz");
    /* gzip is known by its magic, not by the name */
    tmp_path(gz_noext, sizeof gz_noext, "rt-gz-without-extension");
    tmp_path(plain_gzext, sizeof plain_gzext, "rt-plain-named.gz");
    write_plain(plain, b, len);
    write_gz(gz, b, len);
    write_gz(gz_noext, b, len);
    write_plain(plain_gzext, b, len);
    const char *paths[4] = {plain, gz, gz_noext, plain_gzext};
    const int gzipped[4] = {0, 1, 1, 0};
    for (int k = 0; k < 4; k++) {
        sf_error err = {0};
        sf_idx x;
        assert_int_equal(read_idx(paths[k], "image", &x, &err), SF_OK);
        assert_int_equal(x.ndim, 3);
        assert_int_equal(x.dims[0], 5);
        assert_int_equal(x.dims[1], 3);
        assert_int_equal(x.dims[2], 4);
        assert_int_equal(x.bytes, 60);
        assert_int_equal(x.gzipped, gzipped[k]);
        assert_memory_equal(x.data, b + 16, 60);
        sf_idx_free(&x);
        assert_null(x.data);
    }
    free(b);
}

/* A file bigger than the reader's first 1 MiB buffer, gzipped: the growing buffer
 * and the chunked reads give back every byte. */
static void test_round_trip_large_gz(void **state) {
    (void)state;
    uint32_t dims[3] = {3000, 28, 28};
    size_t len;
    unsigned char *b = make_idx(3, dims, 1, &len);
    char path[256];
    tmp_path(path, sizeof path, "large.gz");
    write_gz(path, b, len);
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(read_idx(path, NULL, &x, &err), SF_OK);
    assert_int_equal(x.bytes, 3000 * 28 * 28);
    assert_memory_equal(x.data, b + 16, x.bytes);
    sf_idx_free(&x);
    free(b);
    unlink(path);
}

static void test_labels_one_dimension(void **state) {
    (void)state;
    uint32_t dims[1] = {7};
    size_t len;
    unsigned char *b = make_idx(1, dims, 0, &len);
    char path[256];
    tmp_path(path, sizeof path, "labels-idx1-ubyte");
    write_plain(path, b, len);
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(read_idx(path, "label", &x, &err), SF_OK);
    assert_int_equal(x.ndim, 1);
    assert_int_equal(x.dims[0], 7);
    assert_memory_equal(x.data, b + 8, 7);
    sf_idx_free(&x);
    free(b);
}

/* Cut a plain file at every length short of whole: each is an error that names
 * the section being read (byte 0 magic, byte 4 sizes, byte 16 data) and the
 * length the file has. */
static void test_truncated_plain_every_offset(void **state) {
    (void)state;
    uint32_t dims[3] = {2, 3, 5};
    size_t len;
    unsigned char *b = make_idx(3, dims, 1, &len);
    assert_int_equal(len, 46);
    char path[256];
    tmp_path(path, sizeof path, "cut-images-idx3-ubyte");
    for (size_t cut = 0; cut < len; cut++) {
        write_plain(path, b, cut);
        sf_error err = {0};
        sf_idx x;
        assert_int_equal(read_idx(path, "image", &x, &err), SF_ERR_PARSE);
        assert_null(x.data);
        char section[32], ends[48];
        snprintf(section, sizeof section, ": byte %d: truncated: ",
                 cut < 4    ? 0
                 : cut < 16 ? 4
                            : 16);
        snprintf(ends, sizeof ends, "file ends at %zu", cut);
        assert_msg_has(&err, 3, path, section, ends);
        if (cut >= 16) assert_msg_has(&err, 1, "expected 30 image bytes");
    }
    free(b);
    unlink(path);
}

/* The same for a gzipped file cut at every compressed length: each is a
 * truncation error, and once the gzip magic is there the offset says it counts
 * decompressed bytes and the message says that the stream breaks off. The last
 * cuts fall in the gzip trailer, after all the data: they are caught because the
 * reader reads on to the end of the stream. */
static void test_truncated_gz_every_offset(void **state) {
    (void)state;
    uint32_t dims[3] = {4, 8, 8};
    size_t len;
    unsigned char *b = make_idx(3, dims, 1, &len);
    char full[256], path[256];
    tmp_path(full, sizeof full, "full.gz");
    tmp_path(path, sizeof path, "cut-images-idx3-ubyte.gz");
    write_gz(full, b, len);
    size_t glen;
    unsigned char *g = slurp(full, &glen);
    assert_true(glen > len); /* random data: deflate stored blocks plus framing */
    int trailer_cuts = 0;
    for (size_t cut = 0; cut < glen; cut++) {
        write_plain(path, g, cut);
        sf_error err = {0};
        sf_idx x;
        sf_status st = read_idx(path, "image", &x, &err);
        assert_int_equal(st, SF_ERR_PARSE);
        assert_null(x.data);
        assert_msg_has(&err, 3, path, ": byte ", "truncated");
        if (cut < 2) continue; /* no gzip magic yet: a plain file */
        assert_msg_has(&err, 1, " of the decompressed data: truncated");
        if (cut >= glen - 8) {
            /* every data byte was there: only the end of the stream is missing */
            assert_msg_has(&err, 1,
                           ": byte 272 of the decompressed data: truncated gzip stream: "
                           "it breaks off after the 256 image bytes");
            trailer_cuts++;
        } else {
            assert_msg_has(&err, 1, "the gzip stream breaks off and its decompressed data ends at");
        }
    }
    assert_int_equal(trailer_cuts, 8);
    free(g);
    free(b);
    unlink(full);
    unlink(path);
}

/* Damage inside a gzip file: the CRC and the length in its trailer, and a byte
 * of the deflate data, are each caught by zlib and reported as corrupt. */
static void test_corrupt_gz(void **state) {
    (void)state;
    uint32_t dims[2] = {40, 40};
    size_t len;
    unsigned char *b = make_idx(2, dims, 0, &len); /* a ramp: compresses, real deflate codes */
    char full[256], path[256];
    tmp_path(full, sizeof full, "ok.gz");
    tmp_path(path, sizeof path, "bad.gz");
    write_gz(full, b, len);
    size_t glen;
    unsigned char *g = slurp(full, &glen);
    struct {
        size_t at;
        const char *expect;
    } cases[] = {
        /* the trailer is checked after all 1612 bytes came out, and the
         * message says so (gzread, used before, dropped them: "byte 0"), and
         * names the file once */
        {glen - 8, ": byte 1612 of the decompressed data: corrupt gzip data: incorrect data check"},
        {glen - 1,
         ": byte 1612 of the decompressed data: corrupt gzip data: incorrect length check"},
        {3, ": byte 0 of the decompressed data: corrupt gzip data: unknown header flags set"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unsigned char save = g[cases[k].at];
        g[cases[k].at] ^= 0xe0;
        write_plain(path, g, glen);
        g[cases[k].at] = save;
        sf_error err = {0};
        sf_idx x;
        assert_int_equal(read_idx(path, "image", &x, &err), SF_ERR_PARSE);
        assert_msg_has(&err, 2, path, cases[k].expect);
        assert_null(strstr(strstr(err.msg, path) + strlen(path), path));
    }
    /* any byte of the compressed data flipped: an error, or (a flip deflate
     * cannot see) the CRC check; never success with wrong bytes, never a crash */
    for (size_t at = 10; at < glen - 8; at++) {
        g[at] ^= 0x5a;
        write_plain(path, g, glen);
        g[at] ^= 0x5a;
        sf_error err = {0};
        sf_idx x;
        sf_status st = read_idx(path, "image", &x, &err);
        if (st == SF_OK) { /* the header changed but stayed consistent: never the data */
            assert_false(x.bytes == len - 12 && memcmp(x.data, b + 12, x.bytes) != 0);
            sf_idx_free(&x);
        } else {
            assert_msg_has(&err, 2, path, ": byte ");
        }
    }
    free(g);
    free(b);
}

static void expect_header_error(const unsigned char *bytes, size_t n, sf_status code,
                                const char *piece) {
    char path[256];
    tmp_path(path, sizeof path, "hdr-idx");
    write_plain(path, bytes, n);
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(read_idx(path, "image", &x, &err), code);
    assert_null(x.data);
    assert_msg_has(&err, 2, path, piece);
}

static void test_bad_headers(void **state) {
    (void)state;
    /* not IDX at all: a PNG's first bytes, a text file */
    expect_header_error((const unsigned char *)"\x89PNG\r\n\x1a\n", 8, SF_ERR_PARSE,
                        ": byte 0: not an IDX file: magic number 89 50 4e 47");
    expect_header_error((const unsigned char *)"hello world\n", 12, SF_ERR_PARSE,
                        ": byte 0: not an IDX file");
    /* IDX of floats (0x0d) */
    expect_header_error((const unsigned char *)"\0\0\x0d\x01\0\0\0\x01\0\0\0\0", 12,
                        SF_ERR_UNSUPPORTED, ": byte 2: IDX element type 0x0d is not supported");
    /* no dimensions, too many */
    expect_header_error((const unsigned char *)"\0\0\x08\x00", 4, SF_ERR_UNSUPPORTED,
                        ": byte 3: 0 dimensions: expected 1 to 8");
    expect_header_error((const unsigned char *)"\0\0\x08\x09", 4, SF_ERR_UNSUPPORTED,
                        ": byte 3: 9 dimensions");
    /* sizes whose product does not fit in 64 bits */
    unsigned char big[4 + 12] = {0, 0, 8, 3};
    memset(big + 4, 0xff, 12);
    expect_header_error(
        big, sizeof big, SF_ERR_RANGE,
        ": byte 4: sizes 4294967295 x 4294967295 x 4294967295: image bytes overflow");
    /* sizes that fit but declare 4 TiB the file does not have: a truncation
     * error, after allocating no more than what arrived */
    unsigned char huge[4 + 12 + 10] = {0, 0, 8, 3, 0, 0, 0x40, 0, 0, 0, 0x40, 0, 0, 0, 0x40, 0};
    expect_header_error(
        huge, sizeof huge, SF_ERR_PARSE,
        ": byte 16: truncated: expected 4398046511104 image bytes, file ends at 26");
}

static void test_trailing_bytes(void **state) {
    (void)state;
    uint32_t dims[1] = {4};
    size_t len;
    unsigned char *b = make_idx(1, dims, 0, &len);
    unsigned char more[32];
    memcpy(more, b, len);
    memcpy(more + len, "xyz", 3);
    char path[256];
    tmp_path(path, sizeof path, "trailing");
    write_plain(path, more, len + 3);
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(read_idx(path, "label", &x, &err), SF_ERR_PARSE);
    assert_msg_has(&err, 2, path, ": byte 12: 3 bytes after the 4 label bytes the header declares");
    tmp_path(path, sizeof path, "trailing.gz");
    write_gz(path, more, len + 3);
    sf_error_clear(&err);
    assert_int_equal(read_idx(path, "label", &x, &err), SF_ERR_PARSE);
    assert_msg_has(&err, 2, path, ": byte 12 of the decompressed data: 3 bytes after");
    free(b);
}

/* gzread's rules, kept: gzip members glued together are one stream (what
 * `cat a.gz b.gz` makes), and bytes after the last member that do not start
 * another are ignored; a second member cut short is a stream cut short. */
static void test_gz_members(void **state) {
    (void)state;
    uint32_t dims[2] = {6, 5};
    size_t len;
    unsigned char *b = make_idx(2, dims, 1, &len);
    char one[256], two[256], path[256];
    tmp_path(one, sizeof one, "head.gz");
    tmp_path(two, sizeof two, "tail.gz");
    tmp_path(path, sizeof path, "glued.gz");
    write_gz(one, b, 20);
    write_gz(two, b + 20, len - 20);
    size_t l1, l2;
    unsigned char *g1 = slurp_all(one, &l1), *g2 = slurp_all(two, &l2);
    unsigned char *g = malloc(l1 + l2 + 4);
    assert_non_null(g);
    memcpy(g, g1, l1);
    memcpy(g + l1, g2, l2);
    sf_error err = {0};
    sf_idx x;
    write_plain(path, g, l1 + l2);
    assert_int_equal(read_idx(path, "image", &x, &err), SF_OK);
    assert_int_equal(x.bytes, 30);
    assert_memory_equal(x.data, b + 12, 30);
    sf_idx_free(&x);
    memcpy(g + l1 + l2, "junk", 4);
    write_plain(path, g, l1 + l2 + 4);
    assert_int_equal(read_idx(path, "image", &x, &err), SF_OK);
    assert_int_equal(x.bytes, 30);
    sf_idx_free(&x);
    write_plain(path, g, l1 + l2 - 9); /* the second member loses its trailer and a byte */
    assert_int_equal(read_idx(path, "image", &x, &err), SF_ERR_PARSE);
    assert_msg_has(&err, 2, path, ": truncated gzip stream");
    free(g);
    free(g1);
    free(g2);
    free(b);
}

/* A path that opens but cannot be read (a directory) is an I/O error. */
static void test_unreadable(void **state) {
    (void)state;
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(sf_idx_read(tmp_dir, "image", &x, &err), SF_ERR_IO);
    assert_null(x.data);
    assert_msg_has(&err, 2, tmp_dir, ": byte 0: cannot read: ");
}

static void test_missing_and_empty(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "does-not-exist");
    sf_error err = {0};
    sf_idx x;
    assert_int_equal(read_idx(path, "image", &x, &err), SF_ERR_NOTFOUND);
    assert_msg_has(&err, 2, path, "cannot open");
    /* a zero-sized dataset is a valid file */
    uint32_t dims[3] = {0, 28, 28};
    size_t len;
    unsigned char *b = make_idx(3, dims, 0, &len);
    tmp_path(path, sizeof path, "empty-idx3");
    write_gz(path, b, len);
    sf_error_clear(&err);
    assert_int_equal(read_idx(path, "image", &x, &err), SF_OK);
    assert_int_equal(x.bytes, 0);
    assert_int_equal(x.dims[1], 28);
    sf_idx_free(&x);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_plain_and_gz),
        cmocka_unit_test(test_round_trip_large_gz),
        cmocka_unit_test(test_labels_one_dimension),
        cmocka_unit_test(test_truncated_plain_every_offset),
        cmocka_unit_test(test_truncated_gz_every_offset),
        cmocka_unit_test(test_corrupt_gz),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_gz_members),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_missing_and_empty),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
