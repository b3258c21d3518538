/*
 * fuzz_idx.c - the IDX reader (sf_idx_parse, data.h; the code sf_idx_read
 * runs on a file) on any bytes, plain or gzipped: an error, or dimensions
 * whose product is the byte count and that many readable bytes. A plain input
 * that reads is then gzipped here and must read the same the other way.
 */
#include <zlib.h>

#include "fuzz.h"
#include "soapflow/data.h"

/* src gzipped into a malloc'd buffer (*len bytes). */
static unsigned char *gzip(const uint8_t *src, size_t n, size_t *len) {
    z_stream z = {0};
    FUZZ_CHECK(deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "zlib");
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    unsigned char *out = malloc(cap);
    FUZZ_CHECK(out, "out of memory");
    z.next_in = (unsigned char *)src;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
    *len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void check_idx(const sf_idx *x) {
    FUZZ_CHECK(x->ndim >= 1 && x->ndim <= SF_IDX_MAX_DIMS, "ndim %d", x->ndim);
    size_t total = 1;
    for (int i = 0; i < x->ndim; i++) {
        FUZZ_CHECK(x->dims[i] >= 0 && x->dims[i] <= UINT32_MAX, "dims[%d] = %lld", i,
                   (long long)x->dims[i]);
        total *= (size_t)x->dims[i];
    }
    FUZZ_CHECK(total == x->bytes, "%zu bytes for dimensions of %zu", x->bytes, total);
    FUZZ_CHECK((x->data != NULL) == (x->bytes > 0), "data %p for %zu bytes", (void *)x->data,
               x->bytes);
    unsigned sum = 0;
    for (size_t i = 0; i < x->bytes; i++) sum += x->data[i]; /* every byte readable */
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sf_error err = {0};
    sf_idx x;
    sf_status st = sf_idx_parse(data, size, "data.idx", "image", &x, &err);
    if (st != SF_OK) {
        fuzz_check_error(st, &err, "data.idx");
        FUZZ_CHECK(!x.data && x.bytes == 0, "an error leaves data behind");
        return 0;
    }
    check_idx(&x);
    FUZZ_CHECK(x.gzipped == (size >= 2 && data[0] == 0x1f && data[1] == 0x8b), "gzipped %d",
               x.gzipped);
    if (!x.gzipped) {
        size_t glen;
        unsigned char *g = gzip(data, size, &glen);
        sf_idx y;
        sf_error err2 = {0};
        FUZZ_CHECK(sf_idx_parse(g, glen, "data.idx.gz", "image", &y, &err2) == SF_OK,
                   "gzipped, it no longer reads: %s", err2.msg);
        FUZZ_CHECK(y.gzipped && y.ndim == x.ndim && y.bytes == x.bytes &&
                       memcmp(y.dims, x.dims, sizeof x.dims) == 0 &&
                       (!x.bytes || memcmp(y.data, x.data, x.bytes) == 0),
                   "gzipped, it reads otherwise");
        sf_idx_free(&y);
        free(g);
    }
    sf_idx_free(&x);
    return 0;
}
