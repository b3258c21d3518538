/*
 * op_impl.h - the table of callbacks behind every operator (internal).
 *
 * One operator lives in one file (op_conv2d.c, ...) that defines one const
 * sf_op_class (or a few, when types share all code, as the activations of op_unary.c do;
 * lstm and gru share all but their cells, in op_rnn.c) holding everything about
 * it: shape inference, parameter count, its parallel space with dimension kinds,
 * the input region of an output tile, FLOPs and bytes, memory, and (filled by
 * the kernels work) reference and fast kernels.
 * The registry (registry.c) is the only other place an operator appears.
 *
 * Callbacks that may be NULL fall back to defaults in registry.c:
 *   space    -> output 0's shape, every dimension SF_DIM_NONE except 0 (sample)
 *   out_tile -> the tile itself for output 0, less its reduction dimensions (ops
 *               with several outputs must set it)
 *   out_axes -> output 0 follows the space dimension for dimension (the default
 *               out_tile); other outputs: no map (an op with out_tile should set it)
 *   memory   -> weights from sf_op_tile_weights, saved = inputs' regions, output = tile
 *   weight_slices -> one slice of all n_params elements: right for an operator
 *               without parameter or reduction dimensions (layernorm, lstm), wrong
 *               for one with (each must say which elements a tile owns)
 *   param_descs   -> one flat tensor "weight" of n_params zeros (a placeholder
 *               that keeps checkpoints complete; every operator with weights sets
 *               its own, and tests/test_ops_slices.c checks that they do)
 */
#ifndef SOAPFLOW_OP_IMPL_H
#define SOAPFLOW_OP_IMPL_H

#include "soapflow/graph.h"

struct sf_kernel_args; /* defined by the kernels module */
typedef sf_status (*sf_kernel_fn)(const struct sf_kernel_args *args);

/* Overflow-checked counts for param_count: a * b and a + b, or -1 when an
 * operand is -1 (an earlier step overflowed), negative, or the result does not
 * fit in int64. */
static inline int64_t sf_count_mul(int64_t a, int64_t b) {
    int64_t r;
    return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? -1 : r;
}
static inline int64_t sf_count_add(int64_t a, int64_t b) {
    int64_t r;
    return a < 0 || b < 0 || __builtin_add_overflow(a, b, &r) ? -1 : r;
}

typedef struct sf_op_class {
    sf_op_type type;
    const char *name;
    int min_inputs, max_inputs; /* max_inputs -1: any number */
    const sf_attr_desc *attrs;
    int n_attrs;

    void (*defaults)(sf_op_params *p);
    /* Infer output shapes into out (capacity SF_MAX_SPLIT); set *n_out. Check
     * every assumption about input ranks and sizes and say what is wrong. */
    sf_status (*infer)(const sf_op_params *p, const sf_shape *in, int n_in, sf_shape *out,
                       int *n_out, sf_error *err);
    /* Trainable parameters; -1 when the count does not fit in int64 (the
     * attributes may be anything a file held): see sf_count_mul. */
    int64_t (*param_count)(const sf_op_params *p, const sf_shape *in, int n_in);
    /* Values of the fixed tensor the operator holds (sf_op.fixed; -1: too many);
     * NULL: none. fixed_check says what is wrong with given values (a mask's
     * values other than 0 and 1); NULL: any finite value. */
    int64_t (*fixed_count)(const sf_op_params *p);
    sf_status (*fixed_check)(const float *v, int64_t n, sf_error *err);
    void (*space)(const sf_op *op, sf_shape *space, sf_dim_kind *kinds);
    void (*region)(const sf_op *op, const sf_tile *t, int input, sf_tile *r);
    void (*out_tile)(const sf_op *op, const sf_tile *t, int output, sf_tile *o);
    /* Where out_tile's pieces lie, see sf_op_output_axes (NULL: the default). */
    int (*out_axes)(const sf_op *op, int output, int *axis, int64_t *shift);
    void (*cost)(const sf_op *op, const sf_tile *t, sf_op_cost *c);
    void (*memory)(const sf_op *op, const sf_tile *t, sf_op_mem *m);
    /* What the backward pass saves (sf_op_saves: SF_SAVES_* bits); NULL: every
     * input, no output, never in place. */
    unsigned (*saves)(const sf_op *op);

    /* The weight elements a tile reads and accumulates into (sf_op_weight_slices):
     * fills out (capacity SF_MAX_WEIGHT_SLICES), returns how many. Called only
     * for non-empty tiles of operators with weights; the registry drops empty
     * slices and merges contiguous ones. NULL: the whole layout. */
    int (*weight_slices)(const sf_op *op, const sf_tile *t, sf_weight_slice *out);
    /* The parameter tensors of the full layout (sf_op_param_descs): fills out
     * (capacity SF_MAX_PARAMS), returns how many. Called only for operators with
     * weights. NULL: a placeholder (see above). */
    int (*param_descs)(const sf_op *op, sf_param_desc *out);

    /* The space dimension whose split makes the parts exchange per-row
     * statistics inside the operator (softmax_ce's classes: sf_op_inner_dim),
     * -1 for none; NULL: none. */
    int (*inner_dim)(const sf_op *op);

    /* Kernels (see soapflow/kernels.h): reference and fast, forward and backward,
     * and the scratch memory a tile needs (NULL: none). */
    sf_kernel_fn fwd_ref, fwd_fast, bwd_ref, bwd_fast;
    size_t (*workspace)(const sf_op *op, const sf_tile *t, int backward);
} sf_op_class;

const sf_op_class *sf_op_class_get(sf_op_type t);

/* Helpers shared by operator files (tiles.c: they look nothing up in the
 * registry, so that operator files never call back into it). */
/* The whole of `shape` as a region. */
void sf_region_full(const sf_shape *shape, sf_tile *r);
/* Halo mapping for a sliding window along one dimension: output rows [lo, hi)
 * need input rows [lo*stride - pad, (hi-1)*stride - pad + (k-1)*dil + 1), clamped
 * to [0, n). Returns an empty range [x, x) when nothing is needed. */
void sf_window_range(int64_t lo, int64_t hi, int64_t stride, int64_t pad, int64_t k, int64_t dil,
                     int64_t n, int64_t *in_lo, int64_t *in_hi);
/* sf_op_tile_weights of a tile whole on its reduction dimensions (SF_DIM_REDUCE):
 * the parameter count scaled by the tile's share of the parameter dimensions. */
int64_t sf_tile_weight_share(const sf_op *op, const sf_tile *t);
/* Fraction of dimension i covered by the tile. */
double sf_tile_frac(const sf_tile *t, const sf_shape *s, int i);
/* A contiguous slice [offset, offset + len) (count 1). */
static inline sf_weight_slice sf_weight_run(int64_t offset, int64_t len) {
    sf_weight_slice s = {offset, len, len, 1};
    return s;
}
/* A parameter descriptor with shape d[0..ndim). */
static inline sf_param_desc sf_param_make(const char *name, int ndim, const int64_t *d,
                                          int64_t offset, sf_param_init init, double a) {
    sf_param_desc p = {name, sf_shape_make(ndim, d), offset, init, a};
    return p;
}

/* What lstm and gru share (op_rnn.c): a recurrent layer over a whole sequence
 * in PyTorch's weight layout, of G = gates * H rows per weight. Each operator
 * file defines its cell and passes it; the callbacks that need no cell are
 * the class's own. */
typedef struct sf_rnn_geom {
    int64_t n, steps, in, hid; /* tile samples, steps T, input features I, hidden H */
    int has_state;             /* the initial states are inputs */
    int whole;                 /* the tile covers all of T and H (else unsupported) */
} sf_rnn_geom;

/* The named pieces of a kernel's workspace. */
typedef struct sf_rnn_ws {
    /* (n, T, G) each: the gates' pre-activations, x W_ih^T + h W_hh^T + both
     * biases in proj[0] alone (n_proj 1), or the input projection x W_ih^T +
     * b_ih in proj[0] and the recurrent one h W_hh^T + b_hh in proj[1]
     * (n_proj 2). The cell rewrites them forward (its activations) and
     * backward (their gradients). */
    float *proj[2];
    float *state[2];  /* (n, T+1, H) each: h, then c (lstm); slot 0 the initial state */
    float *dstate[2]; /* (n, H) each, backward: dL/d(state) carried back a step */
    float *dh_next;   /* (n, H), backward: the fast kernel's next dh */
} sf_rnn_ws;

typedef struct sf_rnn_cell {
    int gates;             /* gate blocks of H rows */
    int n_proj;            /* projection buffers, 1 or 2 (sf_rnn_ws.proj) */
    int n_states;          /* states: inputs after x (optional, all or none), outputs after y */
    int dh_direct;         /* backward leaves in dstate[0] a direct part of dh_{t-1}, to
                            * which dA W_hh is added (else dA W_hh replaces it) */
    double ew_flops;       /* elementwise operations per hidden unit per step */
    double saved_per_unit; /* floats per step and unit written forward, read backward */
    const char *inputs;    /* the valid inputs, for infer's message */
    /* Step t: the projections of step t become what backward needs and every
     * state of slot t + 1 is written. */
    void (*forward)(const sf_rnn_geom *g, const sf_rnn_ws *w, int64_t t);
    /* Its adjoint: with dstate = dL/d(states at t) from later steps, adds dy[:, t]
     * to dh, turns the projections of step t into their gradients and leaves in
     * dstate the gradients for slot t (dh: see dh_direct). */
    void (*backward)(const sf_rnn_geom *g, const sf_rnn_ws *w, const float *dy, int64_t t);
} sf_rnn_cell;

sf_status sf_rnn_infer(const sf_rnn_cell *c, int64_t hidden, const sf_shape *in, int n_in,
                       sf_shape *out, int *n_out, sf_error *err);
int64_t sf_rnn_param_count(const sf_rnn_cell *c, int64_t hidden, int64_t in_features);
void sf_rnn_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds);
void sf_rnn_region(const sf_op *op, const sf_tile *t, int input, sf_tile *r);
void sf_rnn_out_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *o);
int sf_rnn_out_axes(const sf_op *op, int output, int *axis, int64_t *shift);
void sf_rnn_cost(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, sf_op_cost *cost);
void sf_rnn_memory(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, sf_op_mem *m);
int sf_rnn_param_descs(const sf_rnn_cell *c, const sf_op *op, sf_param_desc *out);
size_t sf_rnn_workspace(const sf_rnn_cell *c, const sf_op *op, const sf_tile *t, int backward);
/* The forward (backward) kernel, the fast one when fast is non-zero. */
sf_status sf_rnn_fwd(const sf_rnn_cell *c, const struct sf_kernel_args *a, int fast);
sf_status sf_rnn_bwd(const sf_rnn_cell *c, const struct sf_kernel_args *a, int fast);

/* Every class, defined in its operator file. */
extern const sf_op_class sf_op_input_class;
extern const sf_op_class sf_op_conv2d_class;
extern const sf_op_class sf_op_pool2d_class;
extern const sf_op_class sf_op_linear_class;
extern const sf_op_class sf_op_matmul_class;
extern const sf_op_class sf_op_embedding_class;
extern const sf_op_class sf_op_lstm_class;
extern const sf_op_class sf_op_gru_class;
extern const sf_op_class sf_op_masked_fill_class;
extern const sf_op_class sf_op_add_const_class;
extern const sf_op_class sf_op_mul_const_class;
extern const sf_op_class sf_op_attention_class;
extern const sf_op_class sf_op_relu_class;
extern const sf_op_class sf_op_sigmoid_class;
extern const sf_op_class sf_op_tanh_class;
extern const sf_op_class sf_op_gelu_class;
extern const sf_op_class sf_op_add_class;
extern const sf_op_class sf_op_mul_class;
extern const sf_op_class sf_op_concat_class;
extern const sf_op_class sf_op_split_class;
extern const sf_op_class sf_op_reshape_class;
extern const sf_op_class sf_op_flatten_class;
extern const sf_op_class sf_op_softmax_ce_class;
extern const sf_op_class sf_op_batchnorm_class;
extern const sf_op_class sf_op_layernorm_class;
extern const sf_op_class sf_op_dropout_class;
extern const sf_op_class sf_op_relu6_class;
extern const sf_op_class sf_op_leaky_relu_class;
extern const sf_op_class sf_op_add_param_class;
extern const sf_op_class sf_op_mul_param_class;
extern const sf_op_class sf_op_scale_class;
extern const sf_op_class sf_op_concat_param_class;
extern const sf_op_class sf_op_transpose_class;
extern const sf_op_class sf_op_pad_class;
extern const sf_op_class sf_op_reduce_mean_class;
extern const sf_op_class sf_op_hard_sigmoid_class;
extern const sf_op_class sf_op_hard_swish_class;
extern const sf_op_class sf_op_conv_transpose2d_class;
extern const sf_op_class sf_op_resize_class;

#endif
