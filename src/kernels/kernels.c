/*
 * kernels.c - dispatch of tile kernels.
 *
 * The kernels themselves live with their operators (op_conv2d.c holds the conv
 * kernels next to its halo arithmetic, so the two cannot drift apart); this
 * file checks a kernel call at the API boundary (regions that match the tile,
 * buffers present, workspace large enough) and then calls the slot of the
 * operator's class. Inside kernels, arguments are trusted and only asserted.
 *
 * Workspace sizes come from the operator class's workspace callback; operators
 * that need no scratch memory leave it NULL.
 *
 * The BLAS calls (sf_sgemm, sf_saxpy) live in blas.c, over OpenBLAS, or in
 * blas_ref.c, plain loops, for the planning library (soapflow_plan), which
 * links without BLAS: the same kernels, slower. The loops several kernels
 * share (im2col, col2im, shifted sums) live in loops.c: this file looks the
 * operators' classes up, so an operator file calling a helper here would make
 * a circle (tests/check_cycles.py).
 */
#include "kernels_impl.h"

#include "ops/op_impl.h"

/* ---- workspace --------------------------------------------------------- */

size_t sf_kernel_workspace_bytes(const sf_op *op, const sf_tile *t, int backward) {
    if (!op || !t || sf_tile_empty(t)) return 0;
    const sf_op_class *c = sf_op_class_get(op->type);
    return c && c->workspace ? c->workspace(op, t, backward) : 0;
}

/* ---- dispatch ---------------------------------------------------------- */

static int region_matches(const sf_tile *given, const sf_tile *want) {
    if (sf_tile_empty(given) && sf_tile_empty(want)) return 1;
    return sf_tile_equal(given, want);
}

static sf_status check_args(const sf_kernel_args *a, int backward) {
    if (!a || !a->op) return SF_ERR_INVALID;
    const sf_op *op = a->op;
    const sf_tile *t = &a->tile;
    if (t->ndim != op->space.ndim) return SF_ERR_INVALID;
    for (int i = 0; i < t->ndim; i++)
        if (t->lo[i] < 0 || t->hi[i] > op->space.d[i]) return SF_ERR_INVALID;
    if (a->n_inputs != op->n_inputs || a->n_outputs != op->n_outputs) return SF_ERR_INVALID;
    if (op->n_inputs > 0 && (!a->in || !a->in_region)) return SF_ERR_INVALID;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile want;
        sf_op_input_region(op, t, i, &want);
        if (!region_matches(&a->in_region[i], &want)) return SF_ERR_INVALID;
        if (!a->in[i] && sf_tile_numel(&want) > 0) return SF_ERR_INVALID;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        sf_op_output_tile(op, t, k, &o);
        if (sf_tile_numel(&o) == 0) continue;
        if (!backward && (!a->out || !a->out[k])) return SF_ERR_INVALID;
        if (backward && (!a->grad_out || !a->grad_out[k])) return SF_ERR_INVALID;
    }
    if (op->n_params > 0 && !a->weights) return SF_ERR_INVALID;
    size_t ws = sf_kernel_workspace_bytes(op, t, backward);
    if (ws > 0 && (!a->workspace || a->workspace_bytes < ws)) return SF_ERR_INVALID;
    return SF_OK;
}

static sf_status dispatch(const sf_kernel_args *a, int fast, int backward) {
    if (!a || !a->op) return SF_ERR_INVALID;
    const sf_op_class *c = sf_op_class_get(a->op->type);
    if (!c) return SF_ERR_UNSUPPORTED;
    sf_kernel_fn fn = backward ? (fast ? c->bwd_fast : c->bwd_ref)
                               : (fast ? c->fwd_fast : c->fwd_ref);
    if (!fn) return SF_ERR_UNSUPPORTED;
    sf_status s = check_args(a, backward);
    if (s != SF_OK) return s;
    if (sf_tile_empty(&a->tile)) return SF_OK;
    return fn(a);
}

sf_status sf_kernel_forward(const sf_kernel_args *args, int fast) {
    return dispatch(args, fast, 0);
}

sf_status sf_kernel_backward(const sf_kernel_args *args, int fast) {
    return dispatch(args, fast, 1);
}

int sf_kernel_available(sf_op_type t, int fast) {
    const sf_op_class *c = sf_op_class_get(t);
    if (!c) return 0;
    return fast ? (c->fwd_fast && c->bwd_fast) : (c->fwd_ref && c->bwd_ref);
}
