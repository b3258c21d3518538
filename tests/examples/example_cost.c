/* example_cost.c - the example that opens include/soapflow/cost.h, built and run
 * as a test (see example_core.c): the forward time of a whole conv2d of lenet5
 * on a P100, which must be a positive, finite number of seconds. */
#include <math.h>
#include <stdio.h>

#include "soapflow/cost.h"
#include "soapflow/models.h"

static int example(const sf_machine *m, const sf_op *op, int device) {
    sf_tile tile = sf_tile_full(&op->space);
#include "cost_example.inc"
    if (!(t > 0 && isfinite(t))) {
        fprintf(stderr, "example_cost: %s takes %g s\n", op->name, t);
        return 1;
    }
    return 0;
}

int main(void) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("p100-4x4", &err);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_graph *g = m ? sf_model_build("lenet5", &mo, &err) : NULL;
    int rc = 1;
    if (g) {
        for (int i = 0; i < sf_graph_num_ops(g) && rc; i++)
            if (sf_graph_op(g, i)->type == SF_OP_CONV2D) rc = example(m, sf_graph_op(g, i), 0);
    } else {
        fprintf(stderr, "example_cost: %s\n", err.msg);
    }
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
