/*
 * kernel_check.h - what the kernel tests share: buffers, random data, the
 * normalized error they compare with, NaN-filled workspaces, and copying a tile's
 * region in and out of a whole tensor (so tiles can be stitched together).
 *
 * Header-only with static inline functions, since each test is one program.
 */
#ifndef SOAPFLOW_TESTS_KERNEL_CHECK_H
#define SOAPFLOW_TESTS_KERNEL_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "soapflow/core.h"
#include "soapflow/graph.h"

static inline float *falloc(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

static inline double *dalloc(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

/* Uniform in [-1, 1). */
static inline void fill_random(sf_rng *rng, float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2.0 * sf_rng_uniform(rng) - 1.0);
}

/* max|a - b| / max(max|b|, floor); infinite where one of a pair is NaN and the
 * other is not (a NaN difference would fail every "d > num" and pass as 0). */
static inline double err_floor(const float *a, const float *b, int64_t n, double floor) {
    double num = 0, den = floor;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) && isnan(b[i])) continue;
            return INFINITY;
        }
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / den;
}

/* The same against a double-precision reference. */
static inline double err_floor_d(const float *a, const double *b, int64_t n, double floor) {
    double num = 0, den = floor;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) && isnan(b[i])) continue;
            return INFINITY;
        }
        double d = fabs((double)a[i] - b[i]);
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

/* A workspace of `bytes` filled with NaN: a kernel that reads scratch memory it
 * did not write first turns its results into NaN, which the checks catch. Guard
 * values follow the last declared byte; ws_free checks that they survived, so a
 * kernel that writes past the workspace it declares fails the test in any build
 * (one overran a conv tile's padding row where a float of slack hid it). */
#define WS_GUARDS 16
#define WS_GUARD_VALUE 1234.5f

static inline float *ws_alloc(size_t bytes) {
    int64_t n = (int64_t)((bytes + sizeof(float) - 1) / sizeof(float));
    float *p = falloc(n + WS_GUARDS);
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    /* the bytes of a partial last float count as the workspace's */
    for (int64_t i = n; i < n + WS_GUARDS; i++) p[i] = WS_GUARD_VALUE;
    return p;
}

static inline void ws_free(float *p, size_t bytes) {
    if (!p) return;
    int64_t n = (int64_t)((bytes + sizeof(float) - 1) / sizeof(float));
    for (int64_t i = n; i < n + WS_GUARDS; i++)
        if (p[i] != WS_GUARD_VALUE)
            fail_msg("workspace of %zu bytes: written past its end (float %lld after it)", bytes,
                     (long long)(i - n));
    free(p);
}

/* mode 0: buf = full[region]; 1: full[region] = buf; 2: full[region] += buf.
 * The region is a rectangle of a tensor of shape s; buf holds it row-major. */
static inline void region_copy(float *full, const sf_shape *s, const sf_tile *r, float *buf,
                               int mode) {
    int64_t n = sf_tile_numel(r);
    int64_t idx[SF_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int i = 0; i < s->ndim; i++) off = off * s->d[i] + r->lo[i] + idx[i];
        if (mode == 0)
            buf[e] = full[off];
        else if (mode == 1)
            full[off] = buf[e];
        else
            full[off] += buf[e];
        for (int i = s->ndim - 1; i >= 0; i--) {
            if (++idx[i] < r->hi[i] - r->lo[i]) break;
            idx[i] = 0;
        }
    }
}

#endif
