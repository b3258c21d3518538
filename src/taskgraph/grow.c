/*
 * grow.c - the growth of the task graph's scratch arrays, in a file of its own
 * so that taskgraph.c, reduce.c and comm.c, which all keep scratch, call it
 * without calling each other in a circle (tests/check_cycles.py).
 */
#include <stdlib.h>

#include "taskgraph_impl.h"

int tg_grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}
