/*
 * idx.c - the IDX file format of MNIST and Fashion-MNIST, plain or gzipped
 * (docs/formats-data.md).
 *
 *     00 00 08 03 | n (u32 BE) | rows (u32 BE) | cols (u32 BE) | n*rows*cols bytes
 *
 * One reading loop serves files (sf_idx_read) and bytes in memory
 * (sf_idx_parse: data from elsewhere, a fuzzer's input): the input comes in
 * chunks, read from the file or all at once from memory, and passes through
 * as it is, or through zlib's inflate when its first two bytes are the gzip
 * magic (1f 8b): gzip is recognized by content, never by name, and messages
 * then say that an offset counts decompressed bytes. The rules are gzread's
 * (which an earlier version used): members glued together decompress as one
 * stream, anything but another member after a member is ignored, and input
 * that ends inside a stream is a stream cut short. Driving inflate here rather
 * than through gzread gives memory the very code files get, and exact offsets:
 * gzread drops what it decompressed in a call that then meets corrupt data,
 * which made a bad CRC at the end of a file "byte 0".
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "soapflow/data.h"

/* Input read per fread from a file (bytes). */
#define CHUNK ((size_t)1 << 17)

/* What is being read, and how many (decompressed) bytes were delivered. */
typedef struct src {
    FILE *fp;                  /* a file, or NULL: all the input is at next already */
    unsigned char *buf;        /* a file's read buffer, CHUNK bytes */
    const unsigned char *next; /* input not yet consumed, avail bytes of it */
    size_t avail;
    int eof;          /* nothing to read after the avail bytes */
    const char *path; /* the file, or the origin of the bytes: for messages */
    int gzipped;
    z_stream z;   /* the inflater, when gzipped */
    int z_live;   /* z was initialized (inflateEnd owed) */
    int z_done;   /* the last member ended; what follows is ignored */
    int z_err;    /* a zlib error met after bytes that were delivered first */
    uint64_t off; /* bytes delivered so far: the offset of the next one */
    int cut;      /* the gzip stream broke off (zlib: "unexpected end of file") */
} src;

/* "byte K" or "byte K of the decompressed data". */
static void place(const src *s, uint64_t at, char *buf, size_t cap) {
    snprintf(buf, cap, "byte %llu%s", (unsigned long long)at,
             s->gzipped ? " of the decompressed data" : "");
}

/* Make at least `need` (1 or 2) input bytes available where the input has
 * them: a file's unread bytes move to the front of its buffer and more are
 * read behind them. */
static sf_status fill(src *s, size_t need, sf_error *err) {
    while (s->avail < need && !s->eof) {
        if (!s->fp) {
            s->eof = 1;
            break;
        }
        if (s->avail) memmove(s->buf, s->next, s->avail);
        s->next = s->buf;
        size_t k = fread(s->buf + s->avail, 1, CHUNK - s->avail, s->fp);
        s->avail += k;
        if (k == 0) {
            if (ferror(s->fp)) {
                char at[64];
                place(s, s->off, at, sizeof at);
                return sf_error_set(err, SF_ERR_IO, "%s: %s: cannot read: %s", s->path, at,
                                    strerror(errno));
            }
            s->eof = 1;
        }
    }
    return SF_OK;
}

/* Plain input: up to n bytes into p. */
static sf_status get_plain(src *s, unsigned char *p, size_t n, size_t *got, sf_error *err) {
    while (*got < n) {
        if (!s->avail && s->fp && !s->eof && n - *got >= CHUNK) {
            /* a large read straight into place, not through the buffer */
            size_t k = fread(p + *got, 1, n - *got, s->fp);
            *got += k;
            s->off += k;
            if (k == 0) {
                sf_status st = fill(s, 1, err); /* says why: an error or the end */
                if (st != SF_OK || s->eof) return st;
            }
            continue;
        }
        sf_status st = fill(s, 1, err);
        if (st != SF_OK) return st;
        if (!s->avail) return SF_OK; /* end of input */
        size_t k = s->avail < n - *got ? s->avail : n - *got;
        memcpy(p + *got, s->next, k);
        s->next += k;
        s->avail -= k;
        *got += k;
        s->off += k;
    }
    return SF_OK;
}

/* The zlib error as a message naming the offset of the first byte that could
 * not be delivered. */
static sf_status zlib_error(src *s, int r, sf_error *err) {
    if (r == Z_MEM_ERROR) return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", s->path);
    char at[64];
    place(s, s->off, at, sizeof at);
    return sf_error_set(err, SF_ERR_PARSE, "%s: %s: corrupt gzip data: %s", s->path, at,
                        s->z.msg ? s->z.msg : "unknown zlib error");
}

/* Gzipped input: up to n decompressed bytes into p. Bytes decompressed before
 * corrupt data are delivered first; the error comes with the next call, at
 * their end. */
static sf_status get_gz(src *s, unsigned char *p, size_t n, size_t *got, sf_error *err) {
    if (s->z_err != Z_OK) return zlib_error(s, s->z_err, err);
    while (*got < n && !s->z_done && !s->cut) {
        sf_status st = fill(s, 1, err);
        if (st != SF_OK) return st;
        if (!s->avail) { /* the input ends inside the stream */
            s->cut = 1;
            break;
        }
        size_t room = n - *got;
        s->z.next_in = (unsigned char *)s->next; /* zlib's next_in is not const */
        s->z.avail_in = s->avail > UINT_MAX ? UINT_MAX : (uInt)s->avail;
        s->z.next_out = p + *got;
        s->z.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt in0 = s->z.avail_in, out0 = s->z.avail_out;
        int r = inflate(&s->z, Z_NO_FLUSH);
        size_t made = out0 - s->z.avail_out;
        s->next += in0 - s->z.avail_in;
        s->avail -= in0 - s->z.avail_in;
        *got += made;
        s->off += made;
        if (r == Z_OK || r == Z_BUF_ERROR) continue; /* Z_BUF_ERROR: it wants more input */
        if (r == Z_STREAM_END) {
            /* another member follows only where its magic does */
            st = fill(s, 2, err);
            if (st != SF_OK) return st;
            if (s->avail >= 2 && s->next[0] == 0x1f && s->next[1] == 0x8b)
                (void)inflateReset(&s->z);
            else
                s->z_done = 1;
            continue;
        }
        if (r == Z_NEED_DICT && !s->z.msg) s->z.msg = "a preset dictionary is needed";
        s->z_err = r == Z_MEM_ERROR ? Z_MEM_ERROR : Z_DATA_ERROR;
        return *got ? SF_OK : zlib_error(s, s->z_err, err);
    }
    return SF_OK;
}

/* Read up to n bytes; *got says how many came. A short read is SF_OK, at a
 * clean end of input or where a gzip stream breaks off (s->cut): the caller
 * knows what it expected and says so. Corrupt compressed data or a read error
 * is an error naming the offset. */
static sf_status get(src *s, void *buf, size_t n, size_t *got, sf_error *err) {
    *got = 0;
    return s->gzipped ? get_gz(s, buf, n, got, err) : get_plain(s, buf, n, got, err);
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

/* Read a whole IDX from s, whose input is set (s->next, or s->fp and s->buf). */
static sf_status read_idx(src *s, const char *what, sf_idx *out, sf_error *err) {
    sf_status st = fill(s, 2, err); /* the gzip magic, if any */
    if (st != SF_OK) return st;
    s->gzipped = s->avail >= 2 && s->next[0] == 0x1f && s->next[1] == 0x8b;
    if (s->gzipped) {
        if (inflateInit2(&s->z, 15 + 16) != Z_OK) /* gzip framing only, as gzread's */
            return sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", s->path);
        s->z_live = 1;
    }
    st = read_header(s, out, what, err);
    if (st == SF_OK) st = read_data(s, out, what, err);
    if (s->z_live) (void)inflateEnd(&s->z);
    if (st != SF_OK) {
        sf_idx_free(out);
        return st;
    }
    out->gzipped = s->gzipped;
    return SF_OK;
}

sf_status sf_idx_read(const char *path, const char *what, sf_idx *out, sf_error *err) {
    memset(out, 0, sizeof *out);
    if (!path) return sf_error_set(err, SF_ERR_INVALID, "IDX file: no path");
    if (!what) what = "data";
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        int e = errno;
        return sf_error_set(err, e == ENOENT ? SF_ERR_NOTFOUND : SF_ERR_IO, "%s: cannot open: %s",
                            path, strerror(e));
    }
    src s = {.fp = fp, .path = path, .buf = malloc(CHUNK)};
    sf_status st = s.buf ? read_idx(&s, what, out, err)
                         : sf_error_set(err, SF_ERR_NOMEM, "%s: out of memory", path);
    free(s.buf);
    fclose(fp);
    return st;
}

sf_status sf_idx_parse(const void *bytes, size_t len, const char *origin, const char *what,
                       sf_idx *out, sf_error *err) {
    memset(out, 0, sizeof *out);
    if (!origin) origin = "IDX data";
    if (!bytes && len) return sf_error_set(err, SF_ERR_INVALID, "%s: no bytes", origin);
    if (!what) what = "data";
    src s = {.next = bytes, .avail = len, .eof = 1, .path = origin};
    return read_idx(&s, what, out, err);
}

void sf_idx_free(sf_idx *x) {
    if (!x) return;
    free(x->data);
    memset(x, 0, sizeof *x);
}
