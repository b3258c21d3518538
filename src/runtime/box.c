/*
 * box.c - the runtime's copy of a tile region between two layouts (box.h),
 * which calibrate also times (the cost of a run, runtime.copy_run_ns).
 */
#include "box.h"

#include <string.h>

/* Copy (add) the elements of region r from a buffer laid out as tile a to one
 * laid out as tile b (both row-major over their own extents, both holding r).
 * 4-byte elements: floats, or int32 labels copied as such. */
void sf_box_move(const void *src, const sf_tile *a, void *dst, const sf_tile *b, const sf_tile *r,
                 int add) {
    int nd = r->ndim;
    if (nd == 0) {
        if (add)
            *(float *)dst += *(const float *)src;
        else
            memcpy(dst, src, 4);
        return;
    }
    int64_t sa[SF_MAX_DIMS], sb[SF_MAX_DIMS], idx[SF_MAX_DIMS];
    int64_t xa = 1, xb = 1;
    for (int d = nd - 1; d >= 0; d--) {
        sa[d] = xa;
        sb[d] = xb;
        xa *= a->hi[d] - a->lo[d];
        xb *= b->hi[d] - b->lo[d];
    }
    for (int d = 0; d < nd; d++) {
        idx[d] = r->lo[d];
        if (r->hi[d] <= r->lo[d]) return;
    }
    /* One run per row of the innermost dimension that r does not cover in
     * full in both layouts: the dimensions inside it are contiguous in both,
     * so a channel or sample split copies whole planes, not rows (a memcpy
     * call per 24-float row cost LeNet's copies about twice their bytes). */
    int last = nd - 1;
    int64_t inner = 1; /* elements of the dimensions after last: whole in r, a and b */
    while (last > 0) {
        int64_t e = r->hi[last] - r->lo[last];
        if (e != a->hi[last] - a->lo[last] || e != b->hi[last] - b->lo[last]) break;
        inner *= e;
        last--;
    }
    int64_t run = (r->hi[last] - r->lo[last]) * inner;
    for (;;) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nd; d++) {
            oa += (idx[d] - a->lo[d]) * sa[d];
            ob += (idx[d] - b->lo[d]) * sb[d];
        }
        if (add) {
            const float *s = (const float *)src + oa;
            float *t = (float *)dst + ob;
            for (int64_t q = 0; q < run; q++) t[q] += s[q];
        } else {
            memcpy((uint32_t *)dst + ob, (const uint32_t *)src + oa, (size_t)run * 4);
        }
        int d = last - 1;
        while (d >= 0 && ++idx[d] == r->hi[d]) {
            idx[d] = r->lo[d];
            d--;
        }
        if (d < 0) break;
    }
}
