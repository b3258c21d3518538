/*
 * blas_ref.c - the BLAS calls of the kernels as plain loops, for the planning
 * library (soapflow_plan): a planner that never trains links without BLAS and
 * still runs every kernel (profile, tests), only slower. The loops are the
 * definition of the operations, accumulated in double per output element.
 */
#include <assert.h>

#include "kernels_impl.h"

const char *sf_kernels_blas(void) { return "reference"; }

void sf_kernels_set_threads(int n) { (void)n; }

void sf_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc) {
    assert(m >= 0 && n >= 0 && k >= 0);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t q = 0; q < k; q++) {
                float x = trans_a ? a[q * lda + i] : a[i * lda + q];
                float y = trans_b ? b[j * ldb + q] : b[q * ldb + j];
                acc += (double)x * y;
            }
            float old = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
            c[i * ldc + j] = old + alpha * (float)acc;
        }
    }
}

void sf_saxpy(int64_t n, float alpha, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}
