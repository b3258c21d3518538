/*
 * idx.c - the IDX file format of MNIST and Fashion-MNIST, plain or gzipped
 * (docs/formats-data.md).
 *
 *     00 00 08 03 | n (u32 BE) | rows (u32 BE) | cols (u32 BE) | n*rows*cols bytes
 *
 * Both kinds of file are read through zlib's gzread, which decompresses a file
 * that starts with the gzip magic (1f 8b) and passes any other file through as
 * it is ("transparent" mode): one reading loop, and gzip recognized by content,
 * never by name. gzdirect() says afterwards which it was, so that messages can
 * say that an offset counts decompressed bytes.
 *
 * The data buffer grows as bytes arrive, up to the size the header declares,
 * rather than being allocated from the header at once: a corrupt header that
 * declares terabytes is then an error about a truncated file (or about sizes
 * that overflow), not an allocation of terabytes. Bytes after the declared data
 * are an error too (a file of two datasets glued together, or a wrong header),
 * and reading on to the end is also what makes zlib check the gzip trailer's
 * CRC and length, so a corrupt or cut-off trailer is caught.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "soapflow/data.h"

/* A file being read: the zlib handle and how many (decompressed) bytes were read. */
typedef struct src {
    gzFile gz;
    const char *path;
    int gzipped;
    uint64_t off; /* bytes delivered so far: the offset of the next one */
    int cut;      /* the gzip stream broke off (zlib: "unexpected end of file") */
} src;

/* "byte K" or "byte K of the decompressed data". */
static void place(const src *s, uint64_t at, char *buf, size_t cap) {
    snprintf(buf, cap, "byte %llu%s", (unsigned long long)at,
             s->gzipped ? " of the decompressed data" : "");
}

/* Read up to n bytes; *got says how many came. A short read is SF_OK, at a
 * clean end of file or where a gzip stream breaks off (s->cut): the caller knows
 * what it expected and says so. Corrupt compressed data or a read error is an
 * error naming the offset. */
static sf_status get(src *s, void *buf, size_t n, size_t *got, sf_error *err) {
    unsigned char *p = buf;
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (size_t)1 << 30) want = (size_t)1 << 30;
        int k = gzread(s->gz, p + *got, (unsigned)want);
        if (k > 0) {
            *got += (size_t)k;
            s->off += (uint64_t)k;
            continue;
        }
        int errnum = Z_OK;
        const char *zmsg = gzerror(s->gz, &errnum);
        char at[64];
        place(s, s->off, at, sizeof at);
        if (k == 0 && errnum == Z_OK) return SF_OK; /* end of file */
        if (errnum == Z_BUF_ERROR) {                /* zlib's "unexpected end of file" */
            s->cut = 1;
            return SF_OK;
        }
        if (errnum == Z_ERRNO)
            return sf_error_set(err, SF_ERR_IO, "%s: %s: cannot read: %s", s->path, at,
                                strerror(errno));
        if (errnum == Z_MEM_ERROR)
            return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", s->path);
        return sf_error_set(err, SF_ERR_PARSE, "%s: %s: corrupt gzip data: %s", s->path, at,
                            zmsg ? zmsg : "unknown zlib error");
    }
    return SF_OK;
}

/* What "... at K" ends a truncation message: the file, the decompressed data
 * of a complete gzip stream, or a gzip stream cut short. */
static const char *ends(const src *s) {
    return s->cut       ? "the gzip stream breaks off and its decompressed data ends"
           : s->gzipped ? "decompressed data ends"
                        : "file ends";
}

static sf_status read_header(src *s, sf_idx *out, const char *what, sf_error *err) {
    unsigned char magic[4];
    size_t got;
    sf_status st = get(s, magic, 4, &got, err);
    if (st != SF_OK) return st;
    char at[64];
    place(s, 0, at, sizeof at);
    if (got < 4)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %s: truncated: expected a 4-byte IDX magic number, %s at %zu",
                            s->path, at, ends(s), got);
    if (magic[0] != 0 || magic[1] != 0)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %s: not an IDX file: magic number %02x %02x %02x %02x, expected "
                            "00 00 08 followed by the dimension count",
                            s->path, at, magic[0], magic[1], magic[2], magic[3]);
    place(s, 2, at, sizeof at);
    if (magic[2] != 0x08)
        return sf_error_set(err, SF_ERR_UNSUPPORTED,
                            "%s: %s: IDX element type 0x%02x is not supported (only 0x08, "
                            "unsigned bytes)",
                            s->path, at, magic[2]);
    place(s, 3, at, sizeof at);
    if (magic[3] < 1 || magic[3] > SF_IDX_MAX_DIMS)
        return sf_error_set(err, SF_ERR_UNSUPPORTED, "%s: %s: %u dimensions: expected 1 to %d",
                            s->path, at, magic[3], SF_IDX_MAX_DIMS);
    out->ndim = magic[3];

    unsigned char d[4 * SF_IDX_MAX_DIMS];
    size_t want = 4 * (size_t)out->ndim;
    st = get(s, d, want, &got, err);
    if (st != SF_OK) return st;
    place(s, 4, at, sizeof at);
    if (got < want)
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %s: truncated: expected %zu bytes of dimension sizes, %s at %llu",
                            s->path, at, want, ends(s), (unsigned long long)s->off);
    size_t total = 1;
    int overflow = 0;
    for (int i = 0; i < out->ndim; i++) {
        const unsigned char *q = d + 4 * i;
        uint32_t v = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        out->dims[i] = (int64_t)v;
        if (sf_mul_overflow_size(total, (size_t)v, &total) != 0) overflow = 1;
    }
    /* total is left wrong on overflow (and a product with a zero would hide it) */
    if (overflow) {
        char dims[16 * SF_IDX_MAX_DIMS] = "";
        for (int i = 0; i < out->ndim; i++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", i ? " x " : "",
                     (long long)out->dims[i]);
        return sf_error_set(err, SF_ERR_RANGE, "%s: %s: sizes %s: %s bytes overflow", s->path, at,
                            dims, what);
    }
    out->bytes = total;
    return SF_OK;
}

static sf_status read_data(src *s, sf_idx *out, const char *what, sf_error *err) {
    uint64_t start = s->off;
    size_t cap = 0, have = 0;
    while (have < out->bytes) {
        if (have == cap) {
            size_t grow = cap ? (cap > out->bytes / 2 ? out->bytes : cap * 2) : (size_t)1 << 20;
            if (grow > out->bytes) grow = out->bytes;
            uint8_t *nb = realloc(out->data, grow);
            if (!nb) return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", s->path);
            out->data = nb;
            cap = grow;
        }
        size_t got;
        sf_status st = get(s, out->data + have, cap - have, &got, err);
        if (st != SF_OK) return st;
        have += got;
        if (have < cap) { /* clean end of file before the data is complete */
            char at[64];
            place(s, start, at, sizeof at);
            return sf_error_set(err, SF_ERR_PARSE,
                                "%s: %s: truncated: expected %zu %s bytes, %s at %llu", s->path, at,
                                out->bytes, what, ends(s), (unsigned long long)s->off);
        }
    }
    /* Read on to the end: nothing may follow, and for gzip this checks the trailer. */
    uint64_t end = s->off;
    unsigned char scratch[4096];
    size_t extra = 0, got;
    do {
        sf_status st = get(s, scratch, sizeof scratch, &got, err);
        if (st != SF_OK) return st;
        extra += got;
    } while (got == sizeof scratch);
    if (s->cut && !extra) {
        char at[64];
        place(s, end, at, sizeof at);
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %s: truncated gzip stream: it breaks off after the %zu %s "
                            "bytes, before its end",
                            s->path, at, out->bytes, what);
    }
    if (extra) {
        char at[64];
        place(s, end, at, sizeof at);
        return sf_error_set(err, SF_ERR_PARSE,
                            "%s: %s: %zu bytes after the %zu %s bytes the header declares", s->path,
                            at, extra, out->bytes, what);
    }
    return SF_OK;
}

sf_status sf_idx_read(const char *path, const char *what, sf_idx *out, sf_error *err) {
    memset(out, 0, sizeof *out);
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "IDX file: no path");
    if (!what) what = "data";
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        int e = errno;
        if (e == 0) return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
        return sf_error_set(err, e == ENOENT ? SF_ERR_NOTFOUND : SF_ERR_IO, "%s: cannot open: %s",
                            path, strerror(e));
    }
    (void)gzbuffer(gz, 1u << 17);
    src s = {.gz = gz, .path = path};
    /* gzdirect looks at the first bytes: 0 for a gzip stream, 1 for a plain file */
    s.gzipped = gzdirect(gz) == 0;
    sf_status st = read_header(&s, out, what, err);
    if (st == SF_OK) st = read_data(&s, out, what, err);
    int gzipped = s.gzipped;
    gzclose_r(gz);
    if (st != SF_OK) {
        sf_idx_free(out);
        return st;
    }
    out->gzipped = gzipped;
    return SF_OK;
}

void sf_idx_free(sf_idx *x) {
    if (!x) return;
    free(x->data);
    memset(x, 0, sizeof *x);
}
