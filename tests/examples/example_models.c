/* example_models.c - the example that opens include/soapflow/models.h, built
 * and run as a test (see example_core.c): resnet50 at the batch asked for. */
#include <stdio.h>

#include "soapflow/models.h"

int main(void) {
    sf_error err = {0};
    {
#include "models_example.inc"
        sf_graph_stats st;
        if (g) sf_graph_stats_compute(g, &st);
        int rc = !g || st.batch != 256;
        if (rc) fprintf(stderr, "example_models: %s\n", g ? "batch is not 256" : err.msg);
        sf_graph_free(g);
        return rc;
    }
}
