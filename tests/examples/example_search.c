/* example_search.c - the example that opens include/soapflow/search.h, built and
 * run as a test (see example_core.c), on lenet5 over four P100s from data
 * parallelism: MCMC is never worse than its start, and OptCNN answers. */
#include <stdio.h>

#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

static int example(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                   const sf_strategy *const *starts, int n_starts) {
    sf_error err = {0};
#include "search_example.inc"
    int rc =
        err.code != SF_OK || !(mr.best_s > 0 && mr.best_s <= mr.start_best_s) || !(or.cost_s > 0);
    if (rc) fprintf(stderr, "example_search: %s\n", err.msg);
    sf_strategy_free(best);
    return rc;
}

int main(void) {
    sf_error err = {0};
    sf_machine *m = sf_machine_open("p100-4x4[4]", &err);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 256;
    sf_graph *g = m ? sf_model_build("lenet5", &mo, &err) : NULL;
    sf_cost_model *cm = g ? sf_cost_analytic_new(m, NULL) : NULL;
    sf_strategy *data = g ? sf_strategy_new(g) : NULL;
    int rc = !cm || !data || sf_strategy_data(data, g, m) != SF_OK;
    if (rc)
        fprintf(stderr, "example_search: %s\n", err.msg);
    else
        rc = example(g, m, cm, (const sf_strategy *const[]){data}, 1);
    sf_strategy_free(data);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
