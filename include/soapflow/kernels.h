/*
 * soapflow/kernels.h - real CPU kernels that execute one tile of an operator.
 *
 * Quick tour (forward of one tile of a conv2d, fast kernel):
 *
 *     sf_tile t = sf_tile_full(&op->space);     // a tile of op->space (here all of it)
 *     sf_tile r;  sf_op_input_region(op, &t, 0, &r);
 *     sf_tile o;  sf_op_output_tile(op, &t, 0, &o);
 *     const float *in[1] = {x_region};          // sf_tile_numel(&r) floats, row-major
 *     float *out[1] = {y_tile};                 // sf_tile_numel(&o) floats, row-major
 *     size_t ws = sf_kernel_workspace_bytes(op, &t, 0);
 *     void *buf = ws ? malloc(ws) : NULL;
 *     sf_kernel_args a = {.op = op, .tile = t, .n_inputs = 1, .in = in, .in_region = &r,
 *                         .n_outputs = 1, .out = out, .weights = w,
 *                         .workspace = buf, .workspace_bytes = ws};
 *     sf_status s = sf_kernel_forward(&a, 1);   // 1: fast, 0: reference
 *     free(buf);
 *
 * Every buffer holds exactly one rectangle of a tensor, row-major, with the
 * rectangle's own extents as its shape: input i holds in_region[i] (the region
 * sf_op_input_region gives for the tile, halo included), output k holds
 * sf_op_output_tile(op, tile, k). Positions are global: a kernel maps output
 * element (n, c, h, w) of the tile to the input elements it needs by their
 * global coordinates minus the region's lo. Elements outside the input tensor
 * (padding) are zero and are never read.
 *
 * Weights are the operator's whole parameter tensor, always in full layout; a
 * tile split on a parameter dimension reads (and, backward, accumulates into)
 * only the rows it owns: exactly the elements sf_op_weight_slices gives
 * (soapflow/graph.h), whose sf_op_param_descs name the tensors below. Layouts (fp32, row-major,
 * bias right after weights): conv2d  W (C_out, C_in/groups, kh, kw), then bias (C_out) when bias is
 * on linear  W (out_features, in_features),   then bias (out_features) when on batchnorm  scale
 * (C), then shift (C), when affine (else no weights) layernorm  scale (D), then shift (D), when
 * affine (else no weights) embedding  table (num_embeddings, embedding_dim) lstm       W_ih (4H,
 * I), W_hh (4H, H), b_ih (4H), b_hh (4H): PyTorch's, gate order i, f, g, o; kernels take tiles
 * split on N only (a part of H or T is SF_ERR_UNSUPPORTED, and the space splits neither, see
 * op_lstm.c) gru  W_ih (3H, I), W_hh (3H, H), b_ih (3H), b_hh (3H): PyTorch's, gate order r, z, n,
 * tiles as lstm's (op_gru.c) attention  in_proj (3D, D) = [W_q; W_k; W_v], W_o (D, D), then, when bias is on,
 * in_proj_bias (3D) and out_proj bias (D) (PyTorch's); a tile split on D (which the space does not
 * offer) accumulates into all of W_q, W_k, W_v and their biases, not only its rows (see
 * op_attention.c) matmul     no weights conv_transpose2d  W (C_in, C_out, kh, kw), then bias
 * (C_out) when on (PyTorch's ConvTranspose2d); a tile of output channels [o0, o1) reads and
 * accumulates into W[:, o0:o1] and b[o0:o1]
 *
 * Semantics: forward OVERWRITES the output tiles. Backward ACCUMULATES into
 * grad_in (input-region layout) and grad_weights (full layout): the caller
 * zeroes them once per iteration, so that tiles sharing a weight shard or an
 * input halo can add their parts. Any grad_in[i], or grad_weights, may be NULL
 * when that gradient is not wanted.
 *
 * Kernels never allocate: scratch memory comes from the caller's workspace,
 * sized by sf_kernel_workspace_bytes. Each operator has a reference kernel
 * (plain loops, the definition of the operation) and a fast one (im2col and
 * BLAS); tests hold every fast kernel to its reference.
 */
#ifndef SOAPFLOW_KERNELS_H
#define SOAPFLOW_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "soapflow/core.h"
#include "soapflow/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything one kernel call needs, for one tile of op->space. */
typedef struct sf_kernel_args {
    const sf_op *op;
    sf_tile tile; /* rectangle of op->space to compute */

    int n_inputs;             /* op->n_inputs */
    const float *const *in;   /* [n_inputs] each numel(in_region[i]) floats */
    const sf_tile *in_region; /* [n_inputs] == sf_op_input_region(op, &tile, i) */

    int n_outputs;     /* op->n_outputs */
    float *const *out; /* [n_outputs] forward: written; backward: the
                        * forward result, read by ops that need it */

    const float *weights; /* full parameter tensor (layouts above), or NULL
                           * for operators without parameters */

    /* backward only */
    const float *const *grad_out; /* [n_outputs] same layout as out */
    float *const *grad_in;        /* [n_inputs] same layout as in; NULL array or
                                   * NULL entries: not wanted. Accumulated. */
    float *grad_weights;          /* full layout, accumulated; NULL: not wanted */

    void *workspace;        /* scratch owned by the caller */
    size_t workspace_bytes; /* >= sf_kernel_workspace_bytes(op, &tile, backward) */

    /* Per-call data of a few operators (ignored by the others; zero is fine). */
    uint64_t seed;         /* dropout: the mask is a hash of (seed, op->id, global
                            * element index), so any tiling draws the same mask and
                            * backward recomputes it; pass the same seed to the
                            * forward and backward of one iteration */
    const int32_t *labels; /* softmax_ce: class of each row of the tile (rows are
                            * the leading dimensions, row-major), in [0, C); needed
                            * by backward, and by forward when loss is set */
    double *loss;          /* softmax_ce forward: NULL, or accumulates the tile's
                            * share of the mean cross-entropy (sum over its rows
                            * of -log p[label] / rows of the whole tensor) */
    /* Inference mode and batch norm's running statistics, as PyTorch's
     * module.eval() and BatchNorm's buffers (zero: training, no statistics). */
    int eval;             /* 1: inference: dropout is the identity, and batch norm
                           * normalizes with `running` instead of the batch */
    const float *running; /* batchnorm: the running mean (C) then the running
                           * variance (C) of the whole operator; needed in eval
                           * mode, and in training it is the shift of bn_sums */
    double *bn_sums;      /* batchnorm training forward: NULL, or accumulates, for
                           * each channel c of the tile, at [3c, 3c + 3) of a
                           * (3 C) array, the elements of c in the tile, and the
                           * sums of x - running_mean[c] and of its square, so a
                           * caller adds tiles (and ranks) into the whole batch's
                           * statistics (sf_batchnorm_update_running) */
    /* softmax_ce on a tile that holds only some of the classes (a split of its
     * inner dimension, sf_op_inner_dim: Megatron's vocabulary-parallel
     * cross-entropy). stats: 3 R floats for the R rows of the tile: at [0, R)
     * each row's maximum, at [R, 2 R) its sum of exp(x - maximum), at [2 R, 3 R)
     * its target's logit, all over every class of the row, whichever tile holds
     * it. phase says what a forward call does with them (SF_CE_PHASE_*):
     *   SF_CE_PHASE_MAX   stats[r] = max(stats[r], the tile's largest logit of
     *                     row r) (the caller starts from -INFINITY; nothing else
     *                     is read or written)
     *   SF_CE_PHASE_SUMS  with stats[r] the row's maximum over all its classes,
     *                     stats[R + r] += the sum of exp(x - stats[r]) over the
     *                     tile's classes, stats[2 R + r] += x[label] when the
     *                     tile holds the label's class (the caller starts from 0)
     *   SF_CE_PHASE_FULL  (0) the forward: with stats non-NULL, the probabilities
     *                     exp(x - max) / sum from the row's statistics, and the
     *                     loss of the rows whose label the tile holds (each row
     *                     counted once over the tiles); backward likewise takes
     *                     (p - onehot) / N_total on the tile's classes
     * Between the phases the caller combines the tiles' statistics of a row:
     * the maximum of their maxima, the sum of their sums (runtime.c: the task
     * graph's two all-reduces, sf_taskgraph_op_inner). stats NULL: the tile must
     * hold every class, and the kernels take the row statistics themselves. */
    float *stats;
    int phase;
    /* softmax_ce: the rows its mean is over, N_total above; 0: the rows of the
     * whole tensor. A pipeline's micro-batch copies (runtime.c) pass the rows
     * of the whole batch, so that the copies' losses and gradients add up to
     * the batch's mean, as one pass over it gives. */
    int64_t mean_rows;
} sf_kernel_args;

/* The phases of sf_kernel_args.phase. */
enum { SF_CE_PHASE_FULL = 0, SF_CE_PHASE_MAX = 1, SF_CE_PHASE_SUMS = 2 };

/* Scratch bytes the kernels of `op` need for tile `t` (forward when backward is
 * 0), for the reference and the fast kernel alike. 0 when none. */
SF_API size_t sf_kernel_workspace_bytes(const sf_op *op, const sf_tile *t, int backward);

/* Run the forward (backward) kernel of args->op on args->tile: the fast kernel
 * when fast is non-zero, else the reference one. Checks the arguments (regions
 * match the tile, workspace large enough, buffers present): SF_ERR_INVALID when
 * they do not; SF_ERR_UNSUPPORTED when the operator has no such kernel. */
SF_API sf_status sf_kernel_forward(const sf_kernel_args *args, int fast);
SF_API sf_status sf_kernel_backward(const sf_kernel_args *args, int fast);

/* Batch norm's running statistics after one training batch, as
 * nn.BatchNorm*d(momentum=0.1) updates them: running = (1 - 0.1) running +
 * 0.1 batch, the mean, and the variance unbiased (n / (n - 1), n the elements
 * of a channel in the whole batch). sums (3 C) as bn_sums above, added over
 * every tile of the batch; running (2 C) in place. A channel without elements
 * is left alone, and one of a single element keeps its variance (PyTorch
 * refuses such a batch). */
SF_API void sf_batchnorm_update_running(int64_t channels, const double *sums, float *running);

/* The BLAS behind the fast kernels: "OpenBLAS" (the soapflow library), or
 * "reference" (the planning library, soapflow_plan, which links without BLAS
 * and runs the same kernels over plain loops). */
SF_API const char *sf_kernels_blas(void);
/* Threads BLAS may use from now on (1: one a rank, as the runtime and the
 * profiler run it); nothing for the reference BLAS, which has one. */
SF_API void sf_kernels_set_threads(int n);

/* 1 when the operator type has the kernel (fast or reference, forward and
 * backward alike), else 0. */
SF_API int sf_kernel_available(sf_op_type t, int fast);

/* Benchmark: single-thread SGEMM at 1024^3 and forward+backward GFLOP/s of the
 * fast conv2d and linear kernels at representative layer shapes, best of
 * `reps` (>= 1). Writes a table, or JSON when json is non-zero:
 *   {"sgemm_gflops": X, "kernels": [{"name": "...", "gflops": X, "ratio": X}]}
 * Sets OpenBLAS to one thread for the rest of the process. */
SF_API sf_status sf_bench_kernels(FILE *out, int json, int reps, sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
