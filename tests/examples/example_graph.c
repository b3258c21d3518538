/* example_graph.c - the example that opens include/soapflow/graph.h, built and
 * run as a test (see example_core.c): both operators are added. */
#include <stdio.h>

#include "soapflow/graph.h"

int main(void) {
#include "graph_example.inc"
    (void)op;
    if (x < 0 || c < 0 || err.code != SF_OK) {
        fprintf(stderr, "example_graph: %s\n", err.msg);
        return 1;
    }
    return 0;
}
