/*
 * shape.c - shapes, tiles and even splits.
 *
 * Tiles are half-open rectangles; all region arithmetic in soapflow (halos,
 * intersections for transfers) goes through these few functions so that an
 * off-by-one shows up everywhere at once and is caught by the tests. The
 * smallest ones (sf_tile_full, _empty, _numel, _intersect, sf_split_range) are
 * static inline in graph.h, because the simulator calls them per task.
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

int sf_tile_equal(const sf_tile *a, const sf_tile *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]) return 0;
    return 1;
}

int64_t sf_tile_runs(const sf_tile *r, const sf_tile *a, const sf_tile *b) {
    int64_t n = sf_tile_numel(r);
    if (r->ndim == 0 || n == 0) return r->ndim == 0;
    /* the rule of the runtime's box_move (runtime.c): its run is this */
    int last = r->ndim - 1;
    int64_t run = 1;
    while (last > 0) {
        int64_t e = r->hi[last] - r->lo[last];
        if (e != a->hi[last] - a->lo[last] || e != b->hi[last] - b->lo[last]) break;
        run *= e;
        last--;
    }
    run *= r->hi[last] - r->lo[last];
    return n / run;
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

const char *sf_dim_kind_name(sf_dim_kind k) {
    static const char *const names[] = {"none", "sample", "attribute", "parameter", "reduce"};
    _Static_assert(sizeof names / sizeof names[0] == SF_DIM_KIND_COUNT, "one name per kind");
    return (unsigned)k < SF_DIM_KIND_COUNT ? names[k] : "?";
}
