/*
 * tiles.c - the tile arithmetic the operator files share: a whole region, a
 * sliding window's input rows, the fraction of a dimension a tile covers, and
 * the weights a tile holds when it is whole on its reduction dimensions.
 *
 * Why not in registry.c: the registry points at every operator's class, so an
 * operator file that called a helper there and the registry would depend on
 * each other in a circle (tests/check_cycles.py). Nothing here looks at the
 * class table, so the calls go one way: registry.c -> op_*.c -> tiles.c.
 */
#include "op_impl.h"

void sf_region_full(const sf_shape *shape, sf_tile *r) { *r = sf_tile_full(shape); }

void sf_window_range(int64_t lo, int64_t hi, int64_t stride, int64_t pad, int64_t k, int64_t dil,
                     int64_t n, int64_t *in_lo, int64_t *in_hi) {
    if (hi <= lo) {
        *in_lo = *in_hi = 0;
        return;
    }
    int64_t a = lo * stride - pad;
    int64_t b = (hi - 1) * stride - pad + (k - 1) * dil + 1;
    if (a < 0) a = 0;
    if (b > n) b = n;
    if (b < a) b = a;
    *in_lo = a;
    *in_hi = b;
}

double sf_tile_frac(const sf_tile *t, const sf_shape *s, int i) {
    if (i >= t->ndim || i >= s->ndim || s->d[i] == 0) return 1.0;
    return (double)(t->hi[i] - t->lo[i]) / (double)s->d[i];
}

int64_t sf_tile_weight_share(const sf_op *op, const sf_tile *t) {
    if (op->n_params == 0) return 0;
    double frac = 1.0;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] == SF_DIM_PARAMETER) frac *= sf_tile_frac(t, &op->space, i);
    return (int64_t)((double)op->n_params * frac + 0.5);
}
