/*
 * op_lstm.c - one LSTM layer over a whole sequence, batch first (PyTorch gate order).
 *
 * Inputs x (N, T, I) and optionally both initial states h0 (N, H) and c0 (N, H)
 * (zero when absent, so 1 or 3 inputs). Outputs y (N, T, H), the final hidden
 * state hT (N, H) and the final cell state cT (N, H). Weights: W_ih (4H, I),
 * W_hh (4H, H) and PyTorch's two bias vectors b_ih, b_hh (4H each), so a layer
 * has 4H(I + H) + 8H parameters, exactly what torch.nn.LSTM counts.
 *
 * Parallel space: y (N, T, H). N is the sample dimension. T cannot be split
 * inside one operator: step t needs h(t-1), so the steps are sequential; FlexFlow
 * gets parallelism across time by unrolling the RNN into one operator per chunk
 * of steps (models do that), not by splitting T here. H is a parameter dimension:
 * a part owns the rows of W_ih and W_hh (and biases) of its hidden units' four
 * gates, so it computes its units' gates and cell state alone, but the recurrent
 * product W_hh h(t-1) needs the *whole* previous h. The implied all-gather of h
 * every step is part of this operator's internal cost, not a graph transfer;
 * the regions say what the tile needs from its inputs: all of x's features, all
 * of h0, and only its own units of c0.
 *
 * FLOPs per step, for a tile with n samples and h hidden units: the gate gemm
 * 2 * n * 4h * (I + H), plus LSTM_EW_FLOPS elementwise operations per hidden unit
 * (two bias adds per gate folded in with three sigmoids, two tanh, and the cell
 * and hidden updates: about ten). Backward: twice the gemm (input and weight
 * gradients) plus the same elementwise count.
 */
#include <stddef.h>
#include <string.h>

#include "op_impl.h"

#define LSTM_EW_FLOPS 10.0 /* elementwise operations per hidden unit per step */

static const sf_attr_desc lstm_attrs[] = {
    {.name = "hidden", .type = SF_ATTR_INT, .offset = offsetof(sf_op_params, lstm.hidden)},
};

static void lstm_defaults(sf_op_params *p) { p->lstm.hidden = 0; }

static sf_status lstm_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                            int *n_out, sf_error *err) {
    int64_t h = p->lstm.hidden;
    if (h < 1)
        return sf_error_set(err, SF_ERR_INVALID, "hidden must be >= 1, got %lld", (long long)h);
    if (n_in != 1 && n_in != 3)
        return sf_error_set(err, SF_ERR_INVALID,
                            "takes x alone or x, h0 and c0 (1 or 3 inputs), got %d", n_in);
    if (in[0].ndim != 3)
        return sf_error_set(err, SF_ERR_SHAPE, "input x must be 3-D (N, T, I), got %d-D",
                            in[0].ndim);
    int64_t n = in[0].d[0];
    for (int i = 1; i < n_in; i++) {
        const char *nm = i == 1 ? "h0" : "c0";
        if (in[i].ndim != 2 || in[i].d[0] != n || in[i].d[1] != h)
            return sf_error_set(err, SF_ERR_SHAPE,
                                "%s must be (N, H) = (%lld, %lld), got %d-D %lldx%lld", nm,
                                (long long)n, (long long)h, in[i].ndim,
                                (long long)(in[i].ndim > 0 ? in[i].d[0] : 0),
                                (long long)(in[i].ndim > 1 ? in[i].d[1] : 0));
    }
    out[0] = sf_shape_make(3, (int64_t[]){n, in[0].d[1], h});
    out[1] = sf_shape_make(2, (int64_t[]){n, h});
    out[2] = out[1];
    *n_out = 3;
    return SF_OK;
}

static int64_t lstm_params(const sf_op_params *p, const sf_shape *in, int n_in) {
    (void)n_in;
    int64_t h = p->lstm.hidden, i = in[0].d[2];
    return 4 * h * (i + h) + 8 * h;
}

static void lstm_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    kinds[0] = SF_DIM_SAMPLE;
    kinds[1] = SF_DIM_NONE;
    kinds[2] = SF_DIM_PARAMETER;
}

static void lstm_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    const sf_shape *in = &op->in_shapes[input];
    *r = sf_tile_full(in);
    r->lo[0] = t->lo[0];
    r->hi[0] = t->hi[0];
    if (input == 2) { /* c0: only the tile's own hidden units */
        r->lo[1] = t->lo[2];
        r->hi[1] = t->hi[2];
    }
}

static void lstm_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o) {
    if (output == 0) {
        *o = *t;
        return;
    }
    memset(o, 0, sizeof *o);
    if (output < 0 || output >= op->n_outputs) return;
    o->ndim = 2; /* hT, cT: (N, H) */
    o->lo[0] = t->lo[0];
    o->hi[0] = t->hi[0];
    o->lo[1] = t->lo[2];
    o->hi[1] = t->hi[2];
}

static void lstm_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    if (sf_tile_empty(t)) return;
    double n = (double)(t->hi[0] - t->lo[0]), steps = (double)(t->hi[1] - t->lo[1]);
    double h = (double)(t->hi[2] - t->lo[2]);
    double fan_in = (double)(op->in_shapes[0].d[2] + op->params.lstm.hidden); /* I + H */
    double gemm = 2 * n * 4 * h * fan_in * steps;
    double ew = LSTM_EW_FLOPS * n * h * steps;
    cost->flops_fwd = gemm + ew;
    cost->flops_bwd = 2 * gemm + ew;
    double in_b = 0, out_b = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        lstm_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        lstm_out_tile(op, t, k, &o);
        out_b += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
    double w_b = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    /* the gates (4 per unit) and cell state of every step are written forward
     * and read back in the backward pass */
    double saved_b = 5 * n * h * steps * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + w_b + out_b + saved_b;
    cost->bytes_bwd = 2 * in_b + 2 * w_b + out_b + saved_b;
}

static void lstm_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    m->weight_bytes = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        lstm_region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    /* four gates and the cell state per step and unit, kept for backward */
    m->saved_bytes += 5.0 * (double)sf_tile_numel(t) * SF_ELEM_BYTES;
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        lstm_out_tile(op, t, k, &o);
        m->output_bytes += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
}

const sf_op_class sf_op_lstm_class = {
    .type = SF_OP_LSTM,
    .name = "lstm",
    .min_inputs = 1,
    .max_inputs = 3,
    .attrs = lstm_attrs,
    .n_attrs = (int)(sizeof lstm_attrs / sizeof lstm_attrs[0]),
    .defaults = lstm_defaults,
    .infer = lstm_infer,
    .param_count = lstm_params,
    .space = lstm_space,
    .region = lstm_region,
    .out_tile = lstm_out_tile,
    .cost = lstm_cost,
    .memory = lstm_memory,
};
