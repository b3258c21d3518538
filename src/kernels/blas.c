/*
 * blas.c - the BLAS calls of the kernels, over OpenBLAS (CBLAS). The soapflow
 * library takes this file; the planning library (soapflow_plan) takes
 * blas_ref.c instead, so that planning links without BLAS.
 */
#include <assert.h>
#include <limits.h>

#include <cblas.h>

#include "kernels_impl.h"

const char *sf_kernels_blas(void) { return "OpenBLAS"; }

void sf_kernels_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

void sf_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc) {
    assert(m >= 0 && n >= 0 && k >= 0);
    assert(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX);
    assert(lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX);
    if (m == 0 || n == 0) return;
    if (k == 0) {
        /* BLAS would scale C by beta; do the same without reading A and B. */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                (int)ldb, beta, c, (int)ldc);
}

void sf_saxpy(int64_t n, float alpha, const float *x, float *y) {
    assert(n >= 0 && n <= INT_MAX);
    cblas_saxpy((int)n, alpha, x, 1, y, 1);
}
