/* example_validate.c - the example that opens include/soapflow/validate.h,
 * built and run as a test (see example_core.c): lenet5 on two ranks that are
 * threads, data and model parallel, predicted on cpu[2] and measured; every
 * figure is there and finite, and the summary names a row. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/validate.h"

typedef struct ex {
    const sf_graph *g;
    const sf_machine *m;
    const sf_strategy *s0, *s1;
    sf_validate_summary sum[2];
    double meas[2][2];
} ex;

static sf_status rank(sf_comm *c, void *arg) {
    ex *x = arg;
    const sf_graph *g = x->g;
    const sf_machine *m = x->m;
    const sf_strategy *s0 = x->s0, *s1 = x->s1;
    sf_error err = {0};
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL); /* one a rank: not shared by threads */
    if (!cm) return SF_ERR_NOMEM;
#include "validate_example.inc"
    int me = sf_comm_rank(c);
    if (st == SF_OK) {
        x->sum[me] = sum;
        for (int i = 0; i < 2; i++) {
            x->meas[me][i] = rows[i].meas_s;
            if (!(rows[i].pred_s > 0) || !(rows[i].meas_min_s > 0) ||
                rows[i].meas_min_s > rows[i].meas_s || !isfinite(rows[i].error) ||
                !(rows[i].meas[SF_VALIDATE_COMPUTE] > 0))
                st = sf_error_set(&err, SF_ERR_INTERNAL, "%s: a figure is off", rows[i].name);
        }
    }
    sf_cost_free(cm);
    if (err.code) fprintf(stderr, "example_validate: %s\n", err.msg);
    return st;
}

int main(void) {
    sf_kernels_set_threads(1);
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 8;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("cpu[2]", &err);
    sf_strategy *s0 = g ? sf_strategy_new(g) : NULL, *s1 = g ? sf_strategy_new(g) : NULL;
    int rc = !g || !m || !s0 || !s1 || sf_strategy_data(s0, g, m) != SF_OK ||
             sf_strategy_model(s1, g, m) != SF_OK;
    ex x;
    memset(&x, 0, sizeof x);
    x.g = g;
    x.m = m;
    x.s0 = s0;
    x.s1 = s1;
    rc = rc || sf_comm_local_run(2, rank, &x, &err) != SF_OK;
    /* the ranks end with the same figures */
    rc = rc || x.meas[0][0] != x.meas[1][0] || x.meas[0][1] != x.meas[1][1] ||
         x.sum[0].main.worst < 0 || x.sum[0].main.worst > 1 || !(x.sum[0].main.median_abs >= 0);
    if (rc) fprintf(stderr, "example_validate failed: %s\n", err.msg);
    sf_strategy_free(s0);
    sf_strategy_free(s1);
    sf_machine_free(m);
    sf_graph_free(g);
    return rc;
}
