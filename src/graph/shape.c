/*
 * shape.c - shapes, tiles and even splits.
 *
 * Tiles are half-open rectangles; all region arithmetic in soapflow (halos,
 * intersections for transfers) goes through these few functions so that an
 * off-by-one shows up everywhere at once and is caught by the tests.
 */
#include "soapflow/graph.h"

#include <stdio.h>
#include <string.h>

sf_shape sf_shape_make(int ndim, const int64_t *d) {
    sf_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = ndim < 0 ? 0 : ndim > SF_MAX_DIMS ? SF_MAX_DIMS : ndim;
    for (int i = 0; i < s.ndim; i++) s.d[i] = d[i];
    return s;
}

int64_t sf_shape_numel(const sf_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

int sf_shape_equal(const sf_shape *a, const sf_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

char *sf_shape_str(const sf_shape *s, char *buf, size_t n) {
    size_t off = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    for (int i = 0; i < s->ndim && off < n; i++) {
        int w = snprintf(buf + off, n - off, "%s%lld", i ? "x" : "", (long long)s->d[i]);
        if (w < 0) break;
        off += (size_t)w;
    }
    if (s->ndim == 0) snprintf(buf, n, "scalar");
    return buf;
}

sf_tile sf_tile_full(const sf_shape *s) {
    sf_tile t;
    memset(&t, 0, sizeof t);
    t.ndim = s->ndim;
    for (int i = 0; i < s->ndim; i++) t.hi[i] = s->d[i];
    return t;
}

int sf_tile_empty(const sf_tile *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->hi[i] <= t->lo[i]) return 1;
    return 0;
}

int64_t sf_tile_numel(const sf_tile *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->hi[i] <= t->lo[i]) return 0;
        n *= t->hi[i] - t->lo[i];
    }
    return n;
}

int sf_tile_intersect(const sf_tile *a, const sf_tile *b, sf_tile *out) {
    sf_tile r;
    memset(&r, 0, sizeof r);
    r.ndim = a->ndim < b->ndim ? a->ndim : b->ndim;
    int nonempty = 1;
    for (int i = 0; i < r.ndim; i++) {
        r.lo[i] = a->lo[i] > b->lo[i] ? a->lo[i] : b->lo[i];
        r.hi[i] = a->hi[i] < b->hi[i] ? a->hi[i] : b->hi[i];
        if (r.hi[i] <= r.lo[i]) nonempty = 0;
    }
    if (out) *out = r;
    return nonempty;
}

int sf_tile_equal(const sf_tile *a, const sf_tile *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]) return 0;
    return 1;
}

sf_shape sf_tile_extent(const sf_tile *t) {
    sf_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) s.d[i] = t->hi[i] > t->lo[i] ? t->hi[i] - t->lo[i] : 0;
    return s;
}

char *sf_tile_str(const sf_tile *t, char *buf, size_t n) {
    size_t off = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    for (int i = 0; i < t->ndim && off < n; i++) {
        int w = snprintf(buf + off, n - off, "%s%lld:%lld", i ? "," : "[", (long long)t->lo[i],
                         (long long)t->hi[i]);
        if (w < 0) break;
        off += (size_t)w;
    }
    if (off < n) snprintf(buf + off, n - off, "%s", t->ndim ? "]" : "[]");
    return buf;
}

void sf_split_range(int64_t n, int degree, int part, int64_t *lo, int64_t *hi) {
    if (degree < 1) degree = 1;
    if (n >= 0 && n < ((int64_t)1 << 31)) { /* the common case: no 128-bit division */
        *lo = n * part / degree;
        *hi = n * (part + 1) / degree;
        return;
    }
    *lo = (int64_t)((__int128)n * part / degree);
    *hi = (int64_t)((__int128)n * (part + 1) / degree);
}

const char *sf_dim_kind_name(sf_dim_kind k) {
    static const char *const names[] = {"none", "sample", "attribute", "parameter"};
    _Static_assert(sizeof names / sizeof names[0] == SF_DIM_KIND_COUNT, "one name per kind");
    return (unsigned)k < SF_DIM_KIND_COUNT ? names[k] : "?";
}
