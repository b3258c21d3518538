/*
 * plan_lenet5.c - a program outside soapflow that plans with it: LeNet-5 from
 * the model zoo on the "cpu" preset's two devices, through the installed
 * headers and the planning library alone (docs/embedding.md builds it with
 * pkg-config and with find_package; scripts/check_install.sh runs both).
 *
 * It simulates one training iteration under data parallelism, then lets a
 * short MCMC search (a fixed number of proposals and a fixed seed, so the
 * output is the same on every run) look for a faster strategy, and prints
 * both iteration times. Errors come back as values with a one-line message;
 * the program decides to print it and exit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"
#include "soapflow/version.h"

static int fail(const char *what, const sf_error *err) {
    fprintf(stderr, "plan_lenet5: %s: %s\n", what, err->msg[0] ? err->msg : "failed");
    return 1;
}

int main(void) {
    sf_error err = {0};
    int rc = 1;
    /* the headers and the library agree, or this program was built against
     * one soapflow and runs with another */
    if (strcmp(sf_version(), SOAPFLOW_VERSION_STRING) != 0) {
        fprintf(stderr, "plan_lenet5: headers %s, library %s\n", SOAPFLOW_VERSION_STRING,
                sf_version());
        return 1;
    }

    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    if (!g) return fail("lenet5", &err);
    sf_machine *m = sf_machine_open("cpu[2]", &err); /* a preset, or a machine JSON file */
    sf_cost_model *cm = m ? sf_cost_analytic_new(m, NULL) : NULL;
    sf_sim *sim = cm ? sf_sim_new(g, m, cm, NULL, &err) : NULL;
    sf_strategy *data = sf_strategy_new(g), *best = sf_strategy_new(g);
    if (!m || !cm || !sim || !data || !best) {
        fail("cpu[2]", &err);
        goto out;
    }

    sf_sim_result r;
    if (sf_strategy_data(data, g, m) != SF_OK || sf_sim_run(sim, data, &r, &err) != SF_OK) {
        fail("data parallelism", &err);
        goto out;
    }
    double data_s = r.iter_s;

    sf_mcmc_options o;
    sf_mcmc_options_default(&o);
    o.budget_s = 0; /* a fixed number of proposals instead of a time budget */
    o.iters = 500;
    o.seed = 1;
    const sf_strategy *starts[1] = {data};
    sf_mcmc_result mr;
    if (sf_mcmc_search(g, m, cm, starts, 1, &o, best, &mr, &err) != SF_OK) {
        fail("search", &err);
        goto out;
    }

    printf("soapflow %s: lenet5 (batch %d) on cpu[2]\n", sf_version(), (int)mo.batch);
    printf("  data parallel  %.3f ms per iteration\n", data_s * 1e3);
    printf("  MCMC (%lld proposals)  %.3f ms per iteration (%.2fx)\n", (long long)mr.iterations,
           mr.best_s * 1e3, data_s / mr.best_s);
    rc = mr.best_s > 0 && mr.best_s <= data_s ? 0 : 1; /* the search keeps its start's time */
out:
    sf_strategy_free(best);
    sf_strategy_free(data);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
    return rc;
}
