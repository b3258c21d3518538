/* example_runtime.c - the example that opens include/soapflow/runtime.h, built
 * and run as a test (see example_core.c): lenet5 trained for ten steps by two
 * ranks that are threads, data parallel; the loss is finite and the gathered
 * weights moved from where they started. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"

typedef struct ex {
    const sf_graph *g;
    const sf_strategy *s;
    float **w;
    double loss;
} ex;

static sf_status rank(sf_comm *c, void *arg) {
    ex *x = arg;
    const sf_graph *g = x->g;
    const sf_strategy *s = x->s;
    sf_error err = {0};
    sf_batch_bufs *bb = sf_batch_bufs_new(g, &err);
    if (!bb) return SF_ERR_NOMEM;
    sf_batch_synthetic(bb, g, 1, 0);
    const sf_batch *batch = &bb->batch;
    float **w = x->w;
#include "runtime_example.inc"
    if (sf_comm_rank(c) == 0) x->loss = loss;
    sf_batch_bufs_free(bb);
    if (err.code) fprintf(stderr, "example_runtime: %s\n", err.msg);
    return err.code;
}

int main(void) {
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 8;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("cpu[2]", &err);
    sf_strategy *s = g ? sf_strategy_new(g) : NULL;
    int rc = !g || !m || !s || sf_strategy_data(s, g, m) != SF_OK;
    float **w0 = rc ? NULL : sf_params_new(g, 3, 0, &err);
    float **w = rc ? NULL : sf_params_new(g, 3, 0, &err);
    ex x = {g, s, w, NAN};
    rc = rc || !w || !w0 || sf_comm_local_run(2, rank, &x, &err) != SF_OK || !isfinite(x.loss);
    int moved = 0;
    for (int op = 0; !rc && op < sf_graph_num_ops(g); op++)
        if (w[op])
            moved |= memcmp(w[op], w0[op], (size_t)sf_graph_op(g, op)->n_params * sizeof(float));
    if (!rc && !moved) rc = 1;
    if (rc) fprintf(stderr, "example_runtime failed: %s\n", err.msg);
    if (g) {
        sf_params_free(g, w);
        sf_params_free(g, w0);
    }
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
    return rc;
}
