/* example_taskgraph.c - the example that opens include/soapflow/taskgraph.h,
 * built and run as a test (see example_core.c): lenet5 under data parallelism
 * on two devices; every pair of a data-parallel edge stays on its device, and
 * the weights of every layer form one shard held by both devices. */
#include <stdio.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/taskgraph.h"

static int example(const sf_graph *g, const sf_strategy *s, int n_devices, int op, int k, int owner,
                   int *n_pairs, int *local, int *shards, int *devs) {
    sf_error err = {0};
    int n_ops = sf_graph_num_ops(g);
#include "taskgraph_example.inc"
    *n_pairs = n;
    *local = messages == 0;
    *shards = sync.n_shards;
    *devs = replicas;
    return err.code != SF_OK || !tg;
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
    int conv = g ? sf_graph_find(g, "conv1") : -1;
    int n = 0, local = 0, shards = 0, devs = 0;
    rc = rc || conv < 0 || example(g, s, 2, conv, 0, conv, &n, &local, &shards, &devs);
    /* data parallel: one pair per part (the input's part on the same device), one
     * shard of conv1's weights on both devices */
    if (!rc && (n != 2 || !local || shards != 1 || devs != 2)) {
        fprintf(stderr, "example_taskgraph: %d pairs, %d shards on %d devices\n", n, shards, devs);
        rc = 1;
    }
    if (rc && err.code) fprintf(stderr, "example_taskgraph: %s\n", err.msg);
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
    return rc;
}
