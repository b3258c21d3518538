/*
 * op_matmul.c - batched matrix product of two activations: (..., M, K) x (..., K, N).
 *
 * Both operands are tensors flowing through the graph (attention scores, bilinear
 * layers), not weights, so the operator has no parameters. transpose_a reads A as
 * (..., K, M) and transpose_b reads B as (..., N, K), as torch.matmul(a.mT, b.mT)
 * would. Leading (batch) dimensions must match exactly: broadcasting is left to an
 * explicit reshape so that every tile maps to one rectangle of each operand.
 *
 * Parallel space: the output (..., M, N). Dimension 0 is the sample (for a plain
 * 2-D product that is M, the rows, which is the batch when A holds activations);
 * every other dimension is an attribute: no weights are split, a tile needs the
 * rows of A in its M range and the columns of B in its N range, each with all K.
 *
 * FLOPs: 2*M*N*K per batch element forward (a multiply-add is two); backward
 * computes dA = dC B^T and dB = A^T dC, twice the forward.
 */
#include <stddef.h>

#include "op_impl.h"

static const sf_attr_desc matmul_attrs[] = {
    {.name = "transpose_a", .type = SF_ATTR_BOOL,
     .offset = offsetof(sf_op_params, matmul.transpose_a)},
    {.name = "transpose_b", .type = SF_ATTR_BOOL,
     .offset = offsetof(sf_op_params, matmul.transpose_b)},
};

static void matmul_defaults(sf_op_params *p) {
    p->matmul.transpose_a = 0;
    p->matmul.transpose_b = 0;
}

/* M, K of A and K, N of B, read through the transpose flags. */
static void matmul_dims(const sf_op_params *p, const sf_shape *a, const sf_shape *b, int64_t *m,
                        int64_t *ka, int64_t *kb, int64_t *n) {
    int r = a->ndim;
    *m = p->matmul.transpose_a ? a->d[r - 1] : a->d[r - 2];
    *ka = p->matmul.transpose_a ? a->d[r - 2] : a->d[r - 1];
    *kb = p->matmul.transpose_b ? b->d[r - 1] : b->d[r - 2];
    *n = p->matmul.transpose_b ? b->d[r - 2] : b->d[r - 1];
}

static sf_status matmul_infer(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                              int *n_out, sf_error *err) {
    (void)n_in;
    const sf_shape *a = &in[0], *b = &in[1];
    if (a->ndim < 2)
        return sf_error_set(err, SF_ERR_SHAPE, "input A must have at least 2 dimensions, got %d",
                            a->ndim);
    if (b->ndim != a->ndim)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "inputs must have the same rank (A is %d-D, B is %d-D)", a->ndim,
                            b->ndim);
    for (int i = 0; i < a->ndim - 2; i++) {
        if (a->d[i] != b->d[i])
            return sf_error_set(err, SF_ERR_SHAPE,
                                "leading dimension %d differs: A has %lld, B has %lld", i,
                                (long long)a->d[i], (long long)b->d[i]);
    }
    int64_t m, ka, kb, n;
    matmul_dims(p, a, b, &m, &ka, &kb, &n);
    if (ka != kb)
        return sf_error_set(err, SF_ERR_SHAPE,
                            "inner dimensions differ: A has K = %lld, B has K = %lld%s",
                            (long long)ka, (long long)kb,
                            p->matmul.transpose_a || p->matmul.transpose_b ? " (after transposes)"
                                                                           : "");
    out[0] = *a;
    out[0].d[a->ndim - 2] = m;
    out[0].d[a->ndim - 1] = n;
    *n_out = 1;
    return SF_OK;
}

static void matmul_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
}

static void matmul_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    const sf_shape *in = &op->in_shapes[input];
    int rank = in->ndim;
    *r = *t; /* leading dimensions: the tile's own */
    /* The tile's range in the free dimension of this operand: M for A, N for B. */
    int64_t lo = input == 0 ? t->lo[rank - 2] : t->lo[rank - 1];
    int64_t hi = input == 0 ? t->hi[rank - 2] : t->hi[rank - 1];
    int transposed = input == 0 ? op->params.matmul.transpose_a : op->params.matmul.transpose_b;
    /* Untransposed A is (M, K): free dimension first; untransposed B is (K, N):
     * free dimension last. A transpose swaps them. */
    int free_first = (input == 0) != (transposed != 0);
    int fd = free_first ? rank - 2 : rank - 1;
    int kd = free_first ? rank - 1 : rank - 2;
    r->lo[fd] = lo;
    r->hi[fd] = hi;
    r->lo[kd] = 0;
    r->hi[kd] = in->d[kd];
}

static void matmul_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    const sf_shape *a = &op->in_shapes[0];
    int64_t k = op->params.matmul.transpose_a ? a->d[a->ndim - 2] : a->d[a->ndim - 1];
    double outs = (double)sf_tile_numel(t);
    double macs = outs * (double)k;
    cost->flops_fwd = 2 * macs;
    cost->flops_bwd = 4 * macs;
    double in_b = 0;
    for (int i = 0; i < 2; i++) {
        sf_tile r;
        matmul_region(op, t, i, &r);
        in_b += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    double out_b = outs * SF_ELEM_BYTES;
    cost->bytes_fwd = in_b + out_b;
    /* backward reads both operands and the output gradient, writes both gradients */
    cost->bytes_bwd = 2 * in_b + out_b;
}

const sf_op_class sf_op_matmul_class = {
    .type = SF_OP_MATMUL,
    .name = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .attrs = matmul_attrs,
    .n_attrs = (int)(sizeof matmul_attrs / sizeof matmul_attrs[0]),
    .defaults = matmul_defaults,
    .infer = matmul_infer,
    .param_count = NULL,
    .space = matmul_space,
    .region = matmul_region,
    .cost = matmul_cost,
};
