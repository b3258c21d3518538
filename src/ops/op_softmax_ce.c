/*
 * op_softmax_ce.c - softmax over the last dimension fused with the cross-entropy loss.
 *
 * Input: logits (..., C). Output: the probabilities, same shape. The labels are
 * not a graph input: they come from the data set with each batch, like the
 * targets of a PyTorch loss, and the scalar loss is reduced in the backward pass,
 * whose gradient is simply probabilities minus the one-hot labels. Fusing the two
 * is what every framework does for numerical stability and speed.
 *
 * Parallel space: the output. Dimension 0 is the sample, middle dimensions
 * (sequence) attributes, and the class dimension cannot be split: a row's
 * normalization needs all of it. The region of the input is the tile itself.
 *
 * FLOPs: about 5 per element forward (max, subtract, exp, sum, divide) and 2
 * backward (subtract the label, scale by 1/batch).
 */
#include <stddef.h>

#include "op_impl.h"

#define SOFTMAX_CE_FWD_FLOPS 5.0
#define SOFTMAX_CE_BWD_FLOPS 2.0

static sf_status softmax_ce_infer(const sf_op_params *p, const sf_shape *in, int n_in,
                                  sf_shape *out, int *n_out, sf_error *err) {
    (void)p;
    (void)n_in;
    if (in[0].ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "logits must have at least 2 dimensions (N, ..., C), got %d",
                            in[0].ndim);
    out[0] = in[0];
    *n_out = 1;
    return SF_OK;
}

static void softmax_ce_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    kinds[n - 1] = SF_DIM_NONE;
}

static void softmax_ce_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    (void)op;
    (void)input;
    *r = *t;
}

static void softmax_ce_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    (void)op;
    double n = (double)sf_tile_numel(t);
    cost->flops_fwd = SOFTMAX_CE_FWD_FLOPS * n;
    cost->flops_bwd = SOFTMAX_CE_BWD_FLOPS * n;
    /* forward reads logits, writes probabilities; backward reads them (and the
     * labels, one per row, ignored here) and writes the logits' gradient */
    cost->bytes_fwd = 2 * n * SF_ELEM_BYTES;
    cost->bytes_bwd = 2 * n * SF_ELEM_BYTES;
}

const sf_op_class sf_op_softmax_ce_class = {
    .type = SF_OP_SOFTMAX_CE,
    .name = "softmax_ce",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs = NULL,
    .n_attrs = 0,
    .defaults = NULL,
    .infer = softmax_ce_infer,
    .param_count = NULL,
    .space = softmax_ce_space,
    .region = softmax_ce_region,
    .cost = softmax_ce_cost,
};
