/* example_stats.c - the example that opens include/soapflow/stats.h, built and run
 * as a test (CMakeLists.txt; extract.sh takes it out of the header into
 * stats_example.inc), so that the tutorial cannot drift from the API. */
#include <math.h>

#include "soapflow/stats.h"

static int example(void) {
#include "stats_example.inc"
    return med == 2.5 && t[0] == 1.0 && fabs(p90 - 7.9) < 1e-12 && fabs(tau - 1.0 / 3) < 1e-12;
}

int main(void) { return example() ? 0 : 1; }
