/*
 * ops_check.h - what the operator tests share: building inputs, making tiles, and
 * checks of shapes, tiles and dimension kinds that say what differs when they fail.
 *
 * Header-only with static inline functions, since each test is one program.
 */
#ifndef SOAPFLOW_TESTS_OPS_CHECK_H
#define SOAPFLOW_TESTS_OPS_CHECK_H

#include <string.h>

#include "soapflow/graph.h"

static inline int add_input(sf_graph *g, const char *name, int nd, const int64_t *d) {
    sf_error err = {0};
    sf_shape s = sf_shape_make(nd, d);
    int id = sf_graph_add_input(g, name, &s, 0, &err);
    if (id < 0) fail_msg("input %s: %s", name, err.msg);
    return id;
}

static inline sf_tile mk_tile(int nd, const int64_t *lo, const int64_t *hi) {
    sf_tile t;
    memset(&t, 0, sizeof t);
    t.ndim = nd;
    for (int i = 0; i < nd; i++) {
        t.lo[i] = lo[i];
        t.hi[i] = hi[i];
    }
    return t;
}

static inline void check_tile(const sf_tile *t, int nd, const int64_t *lo, const int64_t *hi) {
    sf_tile want = mk_tile(nd, lo, hi);
    char a[160], b[160];
    if (!sf_tile_equal(t, &want))
        fail_msg("tile %s, expected %s", sf_tile_str(t, a, sizeof a),
                 sf_tile_str(&want, b, sizeof b));
}

static inline void check_shape(const sf_shape *s, int nd, const int64_t *d) {
    sf_shape want = sf_shape_make(nd, d);
    char a[96], b[96];
    if (!sf_shape_equal(s, &want))
        fail_msg("shape %s, expected %s", sf_shape_str(s, a, sizeof a),
                 sf_shape_str(&want, b, sizeof b));
}

static inline void check_kinds(const sf_op *op, int nd, const sf_dim_kind *k) {
    assert_int_equal(op->space.ndim, nd);
    for (int i = 0; i < nd; i++) {
        if (op->kinds[i] != k[i])
            fail_msg("%s: dimension %d is %s, expected %s", op->name, i,
                     sf_dim_kind_name(op->kinds[i]), sf_dim_kind_name(k[i]));
    }
}

#endif
