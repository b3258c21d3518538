/*
 * soapflow/stats.h - the few statistics the measuring commands report: the
 * median and percentiles of timings, and Kendall's tau between two orders.
 *
 *     double t[] = {3.0, 1.0, 2.0, 10.0};
 *     double med = sf_median(t, 4);              // 2.5; t is sorted now
 *     double p90 = sf_percentile(t, 4, 90);      // 7.9, between 3 and 10
 *     double pred[] = {1, 2, 3}, meas[] = {1.5, 2.5, 2.0};
 *     double tau = sf_kendall_tau(pred, meas, 3); // 1/3: two pairs agree, one not
 *
 * Timings are noisy and skewed (a step that lost its core to another process
 * is many times the rest), so the measuring code keeps medians, not means.
 * The planner needs the order of strategies right, the times only as far as
 * they decide it, so predictions are judged by tau, not by a correlation of
 * times. Part of the core layer: libc and libm only.
 */
#ifndef SOAPFLOW_STATS_H
#define SOAPFLOW_STATS_H

#include <stdint.h>

#include "soapflow/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The median of v[0 .. n): the middle value, or the mean of the two middle
 * ones. Sorts v in place (ascending, so v[0] is then the minimum); NaN when
 * n <= 0. */
SF_API double sf_median(double *v, int64_t n);

/* The p-th percentile (0 <= p <= 100) of v[0 .. n), interpolated linearly
 * between the closest ranks (numpy's default): p 0 is the minimum, 50 the
 * median, 100 the maximum. Sorts v in place; NaN when n <= 0 or p is outside
 * [0, 100]. */
SF_API double sf_percentile(double *v, int64_t n, double p);

/* Kendall's tau-b between the orders of x[0 .. n) and y[0 .. n): (concordant
 * - discordant pairs) / sqrt((pairs not tied in x) (pairs not tied in y)); a
 * pair tied in either counts as neither. From -1 (reversed) to 1 (the same
 * order); NaN for fewer than two values, or when one side is all ties. */
SF_API double sf_kendall_tau(const double *x, const double *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
