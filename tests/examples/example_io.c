/* example_io.c - the example that opens include/soapflow/io.h, built and run as
 * a test (see example_core.c), in a scratch directory holding a net.json: the
 * copy it writes must load back with the same operators. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soapflow/io.h"

static int example(void) {
#include "io_example.inc"
    return err.code == SF_OK ? 0 : 1;
}

int main(void) {
    char dir[] = "/tmp/sf_example_io_XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) return 1;
    sf_error err = {0};
    sf_graph *net = sf_graph_new("net");
    sf_shape s = sf_shape_make(2, (int64_t[]){8, 16});
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 4;
    int x = sf_graph_add_input(net, "x", &s, 0, &err);
    int rc =
        x < 0 ||
        sf_graph_add_op(net, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err) < 0 ||
        sf_model_save_json(net, "net.json", &err) != SF_OK;
    if (!rc) rc = example();
    sf_graph *copy = rc ? NULL : sf_model_load_json("copy.json", &err);
    if (!rc && (!copy || sf_graph_num_ops(copy) != sf_graph_num_ops(net))) rc = 1;
    if (rc) fprintf(stderr, "example_io: %s\n", err.msg);
    sf_graph_free(copy);
    sf_graph_free(net);
    unlink("net.json");
    unlink("copy.json");
    if (chdir("/") == 0) rmdir(dir);
    return rc;
}
