/* example_strategy.c - the example that opens include/soapflow/strategy.h, built
 * and run as a test (see example_core.c): data parallelism of lenet5 on
 * p100-4x4 is valid, and operator 1 is split over all sixteen devices. */
#include <stdio.h>

#include "soapflow/models.h"
#include "soapflow/strategy.h"

static int example(const sf_graph *g, const sf_machine *m, int op_id) {
    sf_error err = {0};
#include "strategy_example.inc"
    int rc = err.code != SF_OK || !c || c->n_parts != sf_machine_num_devices(m);
    if (rc) fprintf(stderr, "example_strategy: %s\n", err.msg[0] ? err.msg : "not 16 parts");
    sf_strategy_free(s);
    return rc;
}

int main(void) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 1024;
    sf_graph *g = m ? sf_model_build("lenet5", &mo, &err) : NULL;
    int rc = g ? example(g, m, 1) : 1;
    if (!g) fprintf(stderr, "example_strategy: %s\n", err.msg);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
