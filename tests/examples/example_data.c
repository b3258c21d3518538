/* example_data.c - the example that opens include/soapflow/data.h, built and
 * run as a test (see example_core.c): Fashion-MNIST's training split loads
 * (when the Debian package is installed; else the example reports the missing
 * dataset, which is what it shows too) and the epoch order is a permutation. */
#include <stdio.h>
#include <stdlib.h>

#include "soapflow/data.h"

int main(void) {
    uint64_t seed = 1, epoch = 0;
#include "data_example.inc"
    int rc = 0;
    if (err.code == SF_OK) {
        char *seen = calloc((size_t)ds.n, 1);
        for (int64_t i = 0; seen && i < ds.n; i++) {
            if (order[i] < 0 || order[i] >= ds.n || seen[order[i]])
                rc = 1;
            else
                seen[order[i]] = 1;
        }
        free(seen);
    } else if (err.code != SF_ERR_NOTFOUND) {
        rc = 1;
    }
    free(order);
    return rc;
}
