/*
 * op_matmul.c - batched matrix product of two activations: (..., M, K) x (..., K, N).
 *
 * Both operands are tensors flowing through the graph (attention scores, bilinear
 * layers), not weights, so the operator has no parameters. transpose_a reads A as
 * (..., K, M) and transpose_b reads B as (..., N, K), as torch.matmul(a.mT, b.mT)
 * would. Leading (batch) dimensions must match exactly: broadcasting is left to an
 * explicit reshape so that every tile maps to one rectangle of each operand.
 *
 * Parallel space: the output (..., M, N), then K, the contracted dimension (a
 * reduction, SF_DIM_REDUCE: no output dimension names it). Dimension 0 is the
 * sample (for a plain 2-D product that is M, the rows, which is the batch when A
 * holds activations); every other output dimension is an attribute: no weights
 * are split, a tile needs the rows of A in its M range and the columns of B in
 * its N range, each with the tile's range of K [k0, k1): all of K unless the
 * tile splits it, when its output piece is a partial sum that the task graph
 * reduces (src/taskgraph/reduce.c).
 *
 * FLOPs: 2*M*N*K per batch element forward (a multiply-add is two); backward
 * computes dA = dC B^T and dB = A^T dC, twice the forward.
 *
 * Kernels (buffers in soapflow/kernels.h): a tile is a block of batch elements
 * (the leading dimensions of the tile, flattened: nb of them) times rows
 * [m0, m0 + mt) times columns [n0, n0 + nt) times K = k1 - k0 contracted
 * elements. Its region of A is, per batch
 * element, an (mt, K) matrix, or (K, mt) with transpose_a; of B a (K, nt) one,
 * or (nt, K) with transpose_b; the output tile is (nb, mt, nt). Both regions are
 * contiguous per batch element, so the fast kernel is one SGEMM per batch element
 * forward and two backward, the transposes handed to BLAS; the reference kernel
 * is the triple loop over elements read through the transpose flags. No
 * workspace.
 */
#include <stddef.h>

#include "kernels/kernels_impl.h"
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

/* K, the contracted dimension's size. */
static int64_t matmul_k(const sf_op *op) {
    const sf_shape *a = &op->in_shapes[0];
    return op->params.matmul.transpose_a ? a->d[a->ndim - 2] : a->d[a->ndim - 1];
}

/* The output's dimensions, then K (the reduction). */
static void matmul_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    int n = space->ndim;
    for (int i = 0; i < n; i++) kinds[i] = SF_DIM_ATTRIBUTE;
    kinds[0] = SF_DIM_SAMPLE;
    if (n == SF_MAX_DIMS) return; /* no room: the reduction stays whole */
    space->d[n] = matmul_k(op);
    kinds[n] = SF_DIM_REDUCE;
    space->ndim = n + 1;
}

/* The tile's range of K: its range on the reduction dimension, or all of K for
 * a tile of the output's rank. */
static void matmul_krange(const sf_op *op, const sf_tile *t, int64_t *k0, int64_t *k1) {
    int n = op->out_shapes[0].ndim;
    *k0 = t->ndim > n ? t->lo[n] : 0;
    *k1 = t->ndim > n ? t->hi[n] : matmul_k(op);
}

static void matmul_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r) {
    const sf_shape *in = &op->in_shapes[input];
    int rank = in->ndim;
    *r = *t; /* leading dimensions: the tile's own */
    r->ndim = rank;
    for (int d = rank; d < SF_MAX_DIMS; d++) r->lo[d] = r->hi[d] = 0;
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
    matmul_krange(op, t, &r->lo[kd], &r->hi[kd]);
}

static void matmul_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    int64_t k0, k1;
    matmul_krange(op, t, &k0, &k1);
    sf_tile o = *t;
    o.ndim = op->out_shapes[0].ndim; /* the output piece */
    double outs = (double)sf_tile_numel(&o);
    double macs = outs * (double)(k1 > k0 ? k1 - k0 : 0);
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

/* ---- kernels ----------------------------------------------------------- */

/* The matrix view of a tile: nb batch elements of an (mt, K) x (K, nt) product,
 * with the row strides of A and B as stored in their regions. */
typedef struct matmul_geom {
    int64_t nb, mt, nt, k;
    int ta, tb;
    int64_t lda, ldb; /* row strides of one A block ((mt, K) or (K, mt)) and B block */
} matmul_geom;

static void matmul_geom_init(const sf_op *op, const sf_tile *t, matmul_geom *g) {
    int rank = op->out_shapes[0].ndim;
    int64_t k0, k1;
    matmul_krange(op, t, &k0, &k1);
    g->nb = 1;
    for (int i = 0; i < rank - 2; i++) g->nb *= t->hi[i] - t->lo[i];
    g->mt = t->hi[rank - 2] - t->lo[rank - 2];
    g->nt = t->hi[rank - 1] - t->lo[rank - 1];
    g->ta = op->params.matmul.transpose_a != 0;
    g->tb = op->params.matmul.transpose_b != 0;
    g->k = k1 - k0;
    g->lda = g->ta ? g->mt : g->k;
    g->ldb = g->tb ? g->k : g->nt;
}

/* Offsets of op(A)[i][k] and op(B)[k][j] inside one batch element's blocks. */
static int64_t mm_a_at(const matmul_geom *g, int64_t i, int64_t k) {
    return g->ta ? k * g->mt + i : i * g->k + k;
}

static int64_t mm_b_at(const matmul_geom *g, int64_t k, int64_t j) {
    return g->tb ? j * g->k + k : k * g->nt + j;
}

/* C (nb, mt, nt) = op(A) op(B), element by element. */
static sf_status matmul_fwd_ref(const sf_kernel_args *a) {
    matmul_geom g;
    matmul_geom_init(a->op, &a->tile, &g);
    const int64_t sa = g.mt * g.k, sb = g.k * g.nt, sc = g.mt * g.nt;
    for (int64_t b = 0; b < g.nb; b++) {
        const float *A = a->in[0] + b * sa, *B = a->in[1] + b * sb;
        float *C = a->out[0] + b * sc;
        for (int64_t i = 0; i < g.mt; i++)
            for (int64_t j = 0; j < g.nt; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < g.k; k++)
                    acc += A[mm_a_at(&g, i, k)] * B[mm_b_at(&g, k, j)];
                C[i * g.nt + j] = acc;
            }
    }
    return SF_OK;
}

/* d op(A)[i][k] += dC[i][j] op(B)[k][j]; d op(B)[k][j] += op(A)[i][k] dC[i][j],
 * written into the stored (possibly transposed) layouts. */
static sf_status matmul_bwd_ref(const sf_kernel_args *a) {
    matmul_geom g;
    matmul_geom_init(a->op, &a->tile, &g);
    float *dA = a->grad_in ? a->grad_in[0] : NULL, *dB = a->grad_in ? a->grad_in[1] : NULL;
    const int64_t sa = g.mt * g.k, sb = g.k * g.nt, sc = g.mt * g.nt;
    for (int64_t b = 0; b < g.nb; b++) {
        const float *A = a->in[0] + b * sa, *B = a->in[1] + b * sb;
        const float *dC = a->grad_out[0] + b * sc;
        for (int64_t i = 0; i < g.mt; i++)
            for (int64_t j = 0; j < g.nt; j++) {
                float d = dC[i * g.nt + j];
                for (int64_t k = 0; k < g.k; k++) {
                    if (dA) dA[b * sa + mm_a_at(&g, i, k)] += d * B[mm_b_at(&g, k, j)];
                    if (dB) dB[b * sb + mm_b_at(&g, k, j)] += A[mm_a_at(&g, i, k)] * d;
                }
            }
    }
    return SF_OK;
}

static sf_status matmul_fwd_fast(const sf_kernel_args *a) {
    matmul_geom g;
    matmul_geom_init(a->op, &a->tile, &g);
    const int64_t sa = g.mt * g.k, sb = g.k * g.nt, sc = g.mt * g.nt;
    for (int64_t b = 0; b < g.nb; b++)
        sf_sgemm(g.ta, g.tb, g.mt, g.nt, g.k, 1.0f, a->in[0] + b * sa, g.lda, a->in[1] + b * sb,
                 g.ldb, 0.0f, a->out[0] + b * sc, g.nt);
    return SF_OK;
}

/* Per batch element, in stored layouts (dC is (mt, nt)):
 *   A (mt, K):  dA += dC op(B)^T          A^T stored (K, mt):  dA += op(B) dC^T
 *   B (K, nt):  dB += op(A)^T dC          B^T stored (nt, K):  dB += dC^T op(A)
 * and op(X)^T of a stored-transposed X is X itself, so BLAS gets the flags. */
static sf_status matmul_bwd_fast(const sf_kernel_args *a) {
    matmul_geom g;
    matmul_geom_init(a->op, &a->tile, &g);
    float *dA = a->grad_in ? a->grad_in[0] : NULL, *dB = a->grad_in ? a->grad_in[1] : NULL;
    const int64_t sa = g.mt * g.k, sb = g.k * g.nt, sc = g.mt * g.nt;
    for (int64_t b = 0; b < g.nb; b++) {
        const float *A = a->in[0] + b * sa, *B = a->in[1] + b * sb;
        const float *dC = a->grad_out[0] + b * sc;
        if (dA) {
            if (!g.ta)
                sf_sgemm(0, !g.tb, g.mt, g.k, g.nt, 1.0f, dC, g.nt, B, g.ldb, 1.0f, dA + b * sa,
                         g.k);
            else
                sf_sgemm(g.tb, 1, g.k, g.mt, g.nt, 1.0f, B, g.ldb, dC, g.nt, 1.0f, dA + b * sa,
                         g.mt);
        }
        if (dB) {
            if (!g.tb)
                sf_sgemm(!g.ta, 0, g.k, g.nt, g.mt, 1.0f, A, g.lda, dC, g.nt, 1.0f, dB + b * sb,
                         g.nt);
            else
                sf_sgemm(1, g.ta, g.nt, g.k, g.mt, 1.0f, dC, g.nt, A, g.lda, 1.0f, dB + b * sb,
                         g.k);
        }
    }
    return SF_OK;
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
    .fwd_ref = matmul_fwd_ref,
    .fwd_fast = matmul_fwd_fast,
    .bwd_ref = matmul_bwd_ref,
    .bwd_fast = matmul_bwd_fast,
};
