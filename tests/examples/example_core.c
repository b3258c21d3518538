/* example_core.c - the example that opens include/soapflow/core.h, built and run
 * as a test (CMakeLists.txt; extract.sh takes it out of the header into
 * core_example.inc), so that the tutorial cannot drift from the API. */
#include <stdint.h>

#include "soapflow/core.h"

static sf_status example(void) {
#include "core_example.inc"
    (void)v;
    return u >= 0 && u < 1 ? SF_OK : SF_ERR_INTERNAL;
}

int main(void) { return example() == SF_OK ? 0 : 1; }
