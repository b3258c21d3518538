/*
 * loops.c - the loops several operator kernels share: a sliding window's
 * unfold (im2col) and its adjoint (col2im), and a row's shifted sums.
 *
 * They live apart from kernels.c, the dispatch, because the dispatch looks the
 * operators' classes up and the operator files call these: in one file the two
 * would depend on each other in a circle (tests/check_cycles.py).
 *
 * im2col/col2im work on a *region* of the input: the rectangle with its own
 * (ih0, iw0) that a tile needs. Positions outside the region are padding (the
 * region is the needed window clamped to the tensor), and read as zero.
 */
#include <string.h>

#include "kernels_impl.h"

/* ---- im2col / col2im --------------------------------------------------- */

/* Output columns [lo, hi) of [0, count) whose input position base + o*stride
 * falls inside [0, extent). */
static void valid_range(int64_t base, int64_t stride, int64_t extent, int64_t count, int64_t *lo,
                        int64_t *hi) {
    int64_t a = base >= 0 ? 0 : (-base + stride - 1) / stride;
    int64_t b = extent - base <= 0 ? 0 : (extent - base + stride - 1) / stride;
    if (a > count) a = count;
    if (b > count) b = count;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* Rows at least this long are copied with memcpy; shorter ones (LeNet's rows
 * are 10 floats, and there are K of them per output row) with an inline loop,
 * since the call costs more than the copy. */
#define IM2COL_MEMCPY_MIN 64

static void copy_short(float *restrict dst, const float *restrict src, int64_t n) {
    for (int64_t q = 0; q < n; q++) dst[q] = src[q];
}

static void add_short(float *restrict dst, const float *restrict src, int64_t n) {
    for (int64_t q = 0; q < n; q++) dst[q] += src[q];
}

void sf_im2col(const sf_window2d *g, const float *x, float *col, int64_t ld, int64_t col0) {
    const int64_t plane = g->ihn * g->iwn, own = g->own, sw = g->sw;
    for (int64_t c = 0; c < g->channels; c++) {
        const float *xc = x + c * plane;
        for (int64_t i = 0; i < g->kh; i++) {
            /* input row of output row oh: hbase + oh * sh; rows [hlo, hhi) exist */
            int64_t hbase = g->oh0 * g->sh - g->ph + i * g->dh - g->ih0;
            int64_t hlo, hhi;
            valid_range(hbase, g->sh, g->ihn, g->ohn, &hlo, &hhi);
            for (int64_t j = 0; j < g->kw; j++) {
                float *row = col + ((c * g->kh + i) * g->kw + j) * ld + col0;
                int64_t wbase = g->ow0 * sw - g->pw + j * g->dw - g->iw0;
                int64_t wlo, whi;
                valid_range(wbase, sw, g->iwn, own, &wlo, &whi);
                /* output rows are contiguous in col: zero the padded ones at once */
                if (hlo > 0) memset(row, 0, (size_t)(hlo * own) * sizeof *row);
                if (hhi < g->ohn)
                    memset(row + hhi * own, 0, (size_t)((g->ohn - hhi) * own) * sizeof *row);
                int64_t nvalid = whi - wlo;
                for (int64_t oh = hlo; oh < hhi; oh++) {
                    float *dst = row + oh * own;
                    /* src[ow * sw] lies under output column ow, inside for [wlo, whi) */
                    const float *src = xc + (hbase + oh * g->sh) * g->iwn;
                    for (int64_t ow = 0; ow < wlo; ow++) dst[ow] = 0.0f;
                    if (sw == 1 && nvalid >= IM2COL_MEMCPY_MIN) {
                        memcpy(dst + wlo, src + (wbase + wlo), (size_t)nvalid * sizeof *dst);
                    } else if (sw == 1) {
                        copy_short(dst + wlo, src + (wbase + wlo), nvalid);
                    } else {
                        for (int64_t ow = wlo; ow < whi; ow++) dst[ow] = src[wbase + ow * sw];
                    }
                    for (int64_t ow = whi; ow < own; ow++) dst[ow] = 0.0f;
                }
            }
        }
    }
}

/* Rows at least this long are added with the BLAS's vector axpy; shorter ones
 * with a plain loop, cheaper than the call. */
#define COL2IM_AXPY_MIN 32

void sf_col2im(const sf_window2d *g, const float *col, int64_t ld, int64_t col0, float *x) {
    const int64_t plane = g->ihn * g->iwn, own = g->own, sw = g->sw;
    for (int64_t c = 0; c < g->channels; c++) {
        float *xc = x + c * plane;
        for (int64_t i = 0; i < g->kh; i++) {
            int64_t hbase = g->oh0 * g->sh - g->ph + i * g->dh - g->ih0;
            int64_t hlo, hhi;
            valid_range(hbase, g->sh, g->ihn, g->ohn, &hlo, &hhi);
            for (int64_t j = 0; j < g->kw; j++) {
                const float *row = col + ((c * g->kh + i) * g->kw + j) * ld + col0;
                int64_t wbase = g->ow0 * sw - g->pw + j * g->dw - g->iw0;
                int64_t wlo, whi;
                valid_range(wbase, sw, g->iwn, own, &wlo, &whi);
                for (int64_t oh = hlo; oh < hhi; oh++) {
                    const float *src = row + oh * own;
                    float *dst = xc + (hbase + oh * g->sh) * g->iwn;
                    int64_t nvalid = whi - wlo;
                    if (sw == 1 && nvalid >= COL2IM_AXPY_MIN) {
                        sf_saxpy(nvalid, 1.0f, src + wlo, dst + (wbase + wlo));
                    } else if (sw == 1) {
                        add_short(dst + (wbase + wlo), src + wlo, nvalid);
                    } else {
                        for (int64_t ow = wlo; ow < whi; ow++) dst[wbase + ow * sw] += src[ow];
                    }
                }
            }
        }
    }
}

/* ---- shared loops ------------------------------------------------------ */

#define SUM_LANES 8

void sf_shifted_sums(const float *restrict x, float x0, int64_t n, float *s1, float *s2) {
    float a1[SUM_LANES] = {0}, a2[SUM_LANES] = {0};
    int64_t j = 0;
    for (; j + SUM_LANES <= n; j += SUM_LANES)
        for (int l = 0; l < SUM_LANES; l++) {
            float v = x[j + l] - x0;
            a1[l] += v;
            a2[l] += v * v;
        }
    float t1 = 0.0f, t2 = 0.0f;
    for (; j < n; j++) {
        float v = x[j] - x0;
        t1 += v;
        t2 += v * v;
    }
    for (int l = 0; l < SUM_LANES; l++) {
        t1 += a1[l];
        t2 += a2[l];
    }
    *s1 = t1;
    *s2 = t2;
}
