/* example_sim.c - the example that opens include/soapflow/sim.h, built and run
 * as a test (see example_core.c), on lenet5 over four P100s under data
 * parallelism: what the delta update gives is what a full run of the changed
 * strategy gives, exactly, as the comment in the example says. */
#include <stdio.h>

#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"

/* The example on op; *delta_s: the iteration time after its update. */
static int example(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                   const sf_strategy *strategy, int op, sf_config *changed, double *delta_s) {
    sf_error err = {0};
#include "sim_example.inc"
    *changed = c;
    *delta_s = r.iter_s;
    if (err.code != SF_OK) fprintf(stderr, "example_sim: %s\n", err.msg);
    return err.code != SF_OK;
}

int main(void) {
    sf_error err = {0};
    sf_machine *m = sf_machine_open("p100-4x4[4]", &err);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 256;
    sf_graph *g = m ? sf_model_build("lenet5", &mo, &err) : NULL;
    sf_cost_model *cm = g ? sf_cost_analytic_new(m, NULL) : NULL;
    sf_strategy *s = g ? sf_strategy_new(g) : NULL;
    int rc = !cm || !s || sf_strategy_data(s, g, m) != SF_OK;
    for (int op = 1; !rc && op < sf_graph_num_ops(g); op++) {
        sf_config c;
        double delta_s = 0;
        rc = example(g, m, cm, s, op, &c, &delta_s);
        /* the changed strategy, simulated from scratch */
        sf_strategy *t = rc ? NULL : sf_strategy_clone(s);
        sf_sim *full = t ? sf_sim_new(g, m, cm, NULL, &err) : NULL;
        sf_sim_result fr;
        if (t) *sf_strategy_config(t, op) = c;
        rc = !full || sf_sim_run(full, t, &fr, &err) != SF_OK;
        if (!rc && fr.iter_s != delta_s) {
            fprintf(stderr, "example_sim: op %d: delta %.17g s, full %.17g s\n", op, delta_s,
                    fr.iter_s);
            rc = 1;
        }
        sf_sim_free(full);
        sf_strategy_free(t);
    }
    if (rc && err.code != SF_OK) fprintf(stderr, "example_sim: %s\n", err.msg);
    sf_strategy_free(s);
    sf_cost_free(cm);
    sf_graph_free(g);
    sf_machine_free(m);
    return rc;
}
