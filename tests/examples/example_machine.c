/* example_machine.c - the example that opens include/soapflow/machine.h, built
 * and run as a test (see example_core.c): the sum it makes over the route is
 * sf_machine_transfer_time_s's. */
#include <math.h>
#include <stdio.h>

#include "soapflow/machine.h"

int main(void) {
    sf_machine *p100 = sf_machine_preset("p100-4x4", NULL);
    if (!p100) return 1;
    double want = sf_machine_transfer_time_s(p100, 0, 5, 1e6);
    sf_machine_free(p100);
    {
#include "machine_example.inc"
        (void)d;
        if (!(fabs(t - want) <= 1e-12 * want) || err.code != SF_OK) {
            fprintf(stderr, "example_machine: %g s, sf_machine_transfer_time_s %g s\n", t, want);
            return 1;
        }
    }
    return 0;
}
