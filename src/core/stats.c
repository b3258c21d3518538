/*
 * stats.c - median, percentiles and Kendall's tau (soapflow/stats.h).
 *
 * The median and percentiles sort in place with qsort: the callers hold a
 * scratch copy of a few dozen timings, and a sorted copy is what several of
 * them want next (the minimum is then v[0]). Kendall's tau is the O(n^2) pair
 * count, which for the hundreds of strategies a validation compares is well
 * under a millisecond and needs no merge sort to be right about ties.
 */
#include "soapflow/stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sf_median(double *v, int64_t n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double sf_percentile(double *v, int64_t n, double p) {
    if (n <= 0 || !(p >= 0 && p <= 100)) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = p / 100 * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    if (lo >= n - 1) return v[n - 1];
    double frac = pos - (double)lo;
    return frac == 0 ? v[lo] : v[lo] + frac * (v[lo + 1] - v[lo]);
}

double sf_kendall_tau(const double *x, const double *y, int64_t n) {
    double conc = 0, disc = 0, tx = 0, ty = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = i + 1; j < n; j++) {
            double a = x[i] - x[j], b = y[i] - y[j];
            if (a == 0 && b == 0) continue;
            if (a == 0) {
                tx++;
            } else if (b == 0) {
                ty++;
            } else if ((a > 0) == (b > 0)) {
                conc++;
            } else {
                disc++;
            }
        }
    }
    double d = sqrt((conc + disc + tx) * (conc + disc + ty));
    return d > 0 ? (conc - disc) / d : NAN;
}
