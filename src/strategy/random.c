/*
 * random.c - random parallel configs over the whole SOAP space.
 *
 * Degrees: the splittable dimensions are visited in random order, each given a
 * degree drawn uniformly from what is left of the device budget (so one part,
 * pure data, pure model and mixed configs all come up). Placement: half the time
 * a contiguous run of devices starting anywhere (what OptCNN considers), half the
 * time distinct devices in random order (FlexFlow's full placement freedom).
 * Reduction dimensions (partial sums) and an operator's inner dimension
 * (softmax_ce's classes, sf_op_dim_opt_in) are drawn only when the caller asks
 * (sf_config_random_in): without them the draws are those of before they existed.
 */
#include "soapflow/strategy.h"

#include <string.h>

void sf_config_random(const sf_op *op, const sf_machine *m, sf_rng *rng, sf_config *c) {
    sf_config_random_in(op, m, 0, rng, c);
}

void sf_config_random_in(const sf_op *op, const sf_machine *m, int reduce, sf_rng *rng,
                         sf_config *c) {
    int n_dev = sf_machine_num_devices(m);
    int budget = n_dev < SF_MAX_PARTS ? n_dev : SF_MAX_PARTS;
    int order[SF_MAX_DIMS], n = 0;
    int degree[SF_MAX_DIMS];
    for (int i = 0; i < op->space.ndim; i++) {
        degree[i] = 1;
        /* reduction dimensions only when asked (sf_config_random_in) */
        if (op->kinds[i] != SF_DIM_NONE && sf_op_dim_opt_in(op, i) <= reduce && op->space.d[i] > 1)
            order[n++] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)sf_rng_below(rng, (uint64_t)i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int left = budget;
    for (int k = 0; k < n && left > 1; k++) {
        int d = order[k];
        int64_t cap = op->space.d[d] < left ? op->space.d[d] : left;
        degree[d] = 1 + (int)sf_rng_below(rng, (uint64_t)cap);
        left /= degree[d];
    }
    sf_config_set_degrees(c, op->space.ndim, degree);
    if (sf_rng_below(rng, 2) == 0) {
        int s = (int)sf_rng_below(rng, (uint64_t)n_dev);
        for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((s + p) % n_dev);
    } else {
        /* distinct devices by rejection: a device drawn again is drawn anew
         * (a bit per device tells, so 4096 parts cost draws, not pairs) */
        uint64_t taken[SF_MAX_DEVICES / 64] = {0};
        for (int p = 0; p < c->n_parts; p++) {
            int d;
            do d = (int)sf_rng_below(rng, (uint64_t)n_dev);
            while (taken[d / 64] >> (d % 64) & 1);
            taken[d / 64] |= (uint64_t)1 << (d % 64);
            c->device[p] = (int16_t)d;
        }
    }
}
