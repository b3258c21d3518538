/* Statistics (soapflow/stats.h): the median, percentiles and Kendall's tau-b
 * on inputs worked out by hand (and, for tau with ties, against scipy's
 * kendalltau, which computes tau-b). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/stats.h"

static void test_median(void **state) {
    (void)state;
    double odd[] = {5, 1, 4, 2, 3};
    assert_true(sf_median(odd, 5) == 3);
    for (int i = 0; i < 5; i++) assert_true(odd[i] == i + 1); /* sorted in place */
    double even[] = {10, -1, 3, 7};
    assert_true(sf_median(even, 4) == 5); /* (3 + 7) / 2 */
    assert_true(even[0] == -1);           /* the minimum comes first */
    double one[] = {2.5};
    assert_true(sf_median(one, 1) == 2.5);
    double ties[] = {2, 2, 1, 2};
    assert_true(sf_median(ties, 4) == 2);
    assert_true(isnan(sf_median(one, 0)));
    assert_true(isnan(sf_median(NULL, -1)));
}

static void test_percentile(void **state) {
    (void)state;
    double v[] = {3, 1, 2, 10};
    assert_true(sf_percentile(v, 4, 0) == 1);
    assert_true(sf_percentile(v, 4, 100) == 10);
    assert_true(sf_percentile(v, 4, 50) == 2.5); /* the median */
    /* rank 0.9 * 3 = 2.7: 3 + 0.7 * (10 - 3) */
    assert_true(fabs(sf_percentile(v, 4, 90) - 7.9) < 1e-12);
    assert_true(fabs(sf_percentile(v, 4, 25) - 1.75) < 1e-12); /* rank 0.75 */
    double one[] = {4};
    assert_true(sf_percentile(one, 1, 37) == 4);
    assert_true(isnan(sf_percentile(v, 4, -1)));
    assert_true(isnan(sf_percentile(v, 4, 100.5)));
    assert_true(isnan(sf_percentile(v, 4, NAN)));
    assert_true(isnan(sf_percentile(v, 0, 50)));
    /* the median and the 50th percentile agree on any size */
    for (int n = 1; n <= 9; n++) {
        double a[9], b[9];
        for (int i = 0; i < n; i++) a[i] = b[i] = (double)((i * 7) % 5) + 0.25 * i;
        assert_true(sf_median(a, n) == sf_percentile(b, n, 50));
    }
}

static void test_kendall_tau(void **state) {
    (void)state;
    double x[] = {1, 2, 3, 4, 5};
    double same[] = {10, 20, 30, 40, 50}, rev[] = {5, 4, 3, 2, 1};
    assert_true(sf_kendall_tau(x, same, 5) == 1);
    assert_true(sf_kendall_tau(x, rev, 5) == -1);
    /* pairs of {3,1,2,5,4}: (0,1) (0,2) (3,4) discordant, the other 7 concordant */
    double y[] = {3, 1, 2, 5, 4};
    assert_true(fabs(sf_kendall_tau(x, y, 5) - 0.4) < 1e-15);
    assert_true(fabs(sf_kendall_tau(y, x, 5) - 0.4) < 1e-15); /* symmetric */
    /* a tie in x: 5 concordant, 1 pair tied in x only: 5 / sqrt(5 * 6);
     * scipy.stats.kendalltau gives 0.9128709291752769 */
    double tx[] = {1, 2, 2, 3}, ty[] = {1, 3, 2, 4};
    assert_true(fabs(sf_kendall_tau(tx, ty, 4) - 5 / sqrt(30)) < 1e-15);
    assert_true(fabs(sf_kendall_tau(tx, ty, 4) - 0.9128709291752769) < 1e-15);
    /* a pair tied on both sides counts in neither factor */
    double bx[] = {1, 1, 2}, by[] = {5, 5, 6};
    assert_true(sf_kendall_tau(bx, by, 3) == 1);
    /* undefined: fewer than two values, or one side all ties */
    double flat[] = {7, 7, 7};
    assert_true(isnan(sf_kendall_tau(x, y, 1)));
    assert_true(isnan(sf_kendall_tau(x, y, 0)));
    assert_true(isnan(sf_kendall_tau(flat, x, 3)));
    assert_true(isnan(sf_kendall_tau(x, flat, 3)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_kendall_tau),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
