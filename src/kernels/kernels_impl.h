/*
 * kernels_impl.h - helpers shared by the kernels of operator files (internal).
 *
 * A row-major SGEMM (blas.c over OpenBLAS, or blas_ref.c), im2col/col2im over one image of
 * an input *region* (a rectangle of the input tensor with its own lo, so that
 * halos and padding of tiles are handled in one place), and the workspace
 * sizing functions of the operators that need scratch memory.
 */
#ifndef SOAPFLOW_KERNELS_IMPL_H
#define SOAPFLOW_KERNELS_IMPL_H

#include <stdint.h>

#include "soapflow/kernels.h"

/* C (M, N) = alpha * op(A) * op(B) + beta * C, row-major; op(A) is (M, K),
 * op(B) is (K, N); lda, ldb, ldc are row strides of A, B, C as stored.
 * Dimensions must fit in an int (asserted). */
void sf_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc);
/* y[0 .. n) += alpha * x[0 .. n) (n fits in an int). */
void sf_saxpy(int64_t n, float alpha, const float *x, float *y);

/* The geometry of a sliding window from an input region to an output tile,
 * both in global coordinates of their tensors. */
typedef struct sf_window2d {
    int64_t channels;           /* channels unfolded (rows of col: channels*kh*kw) */
    int64_t kh, kw;             /* kernel */
    int64_t sh, sw;             /* stride */
    int64_t ph, pw;             /* padding */
    int64_t dh, dw;             /* dilation */
    int64_t oh0, ow0, ohn, own; /* output tile: first row/column and counts */
    int64_t ih0, iw0, ihn, iwn; /* input region: first row/column and counts */
} sf_window2d;

/* Unfold one image x (channels, ihn, iwn) of a region into columns
 * [col0, col0 + ohn*own) of col (channels*kh*kw rows, row stride ld):
 * col[(c*kh + i)*kw + j][col0 + oh*own + ow] = x[c][ih - ih0][iw - iw0] with
 * ih = (oh0+oh)*sh - ph + i*dh (likewise iw), or 0 outside the region. */
void sf_im2col(const sf_window2d *g, const float *x, float *col, int64_t ld, int64_t col0);
/* The adjoint: x[c][ih - ih0][iw - iw0] += col[...] (accumulates). */
void sf_col2im(const sf_window2d *g, const float *col, int64_t ld, int64_t col0, float *x);

/* Workspace of the operators that need one (see sf_kernel_workspace_bytes). */
size_t sf_conv2d_workspace_bytes(const sf_op *op, const sf_tile *t, int backward);

/* Sums of v = x[j] - x0 and of v^2 over a row of n floats, in 8 independent lanes so
 * that the compiler vectorizes them. Normalizations sum relative to a value of the
 * row (x0) to keep the variance accurate for data far from zero. */
void sf_shifted_sums(const float *restrict x, float x0, int64_t n, float *s1, float *s2);

/* Dropout masks (op_dropout.c's header defines them): element e of an
 * operator's masked tensor (its global row-major index) is kept when the top 24
 * bits of sf_splitmix64(key + e * SF_DROP_GOLDEN) are at least p * 2^24, key =
 * sf_drop_key(seed, op id). The dropout and attention operators share them. */
#define SF_DROP_GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t sf_splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t sf_drop_key(uint64_t seed, int op_id) {
    return sf_splitmix64(seed ^ ((uint64_t)op_id * SF_DROP_GOLDEN));
}

static inline uint64_t sf_drop_threshold(double p) { return (uint64_t)(p * 16777216.0); }

/* 1 when element e is kept. */
static inline int sf_drop_keep(uint64_t key, uint64_t threshold, uint64_t e) {
    return (sf_splitmix64(key + e * SF_DROP_GOLDEN) >> 40) >= threshold;
}

#endif
