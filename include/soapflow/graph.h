/*
 * soapflow/graph.h - operator graphs, shapes, tiles and what every operator knows.
 *
 * Quick tour:
 *
 *     sf_error err = {0};
 *     sf_graph *g = sf_graph_new("tiny");
 *     sf_shape s = sf_shape_make(4, (int64_t[]){64, 3, 32, 32});
 *     int x = sf_graph_add_input(g, "x", &s, 0, &err);   // 0: floats, not token ids
 *     sf_op_params p;
 *     sf_op_params_default(SF_OP_CONV2D, &p);
 *     p.conv2d.out_channels = 16; p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
 *     p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
 *     int c = sf_graph_add_op(g, SF_OP_CONV2D, "conv1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
 *     const sf_op *op = sf_graph_op(g, c);      // shapes, params, parallel space
 *     sf_graph_free(g);
 *
 * A graph is built in topological order: an operator's inputs must exist when it
 * is added, and shapes are inferred right then, so a wrong model fails at the
 * operator that is wrong, with its name in the message.
 *
 * Parallelization works on an operator's *parallel space*: the dimensions of its
 * (first) output tensor, each tagged sample, attribute or parameter (or none when
 * it cannot be split, such as the time axis inside one LSTM chunk), and, for an
 * operator whose output sums over an input dimension (a linear's input
 * features), that dimension after them, tagged reduce: its parts hold partial
 * sums of one output piece. A *tile* is a rectangle of that space. For any tile, an operator tells
 * which region of every input the tile needs (halos for convolutions, whole rows for a linear layer
 * split on output channels), what the tile costs in FLOPs and bytes, and how much memory it holds.
 * That is all the simulator and the search need to know about operators.
 *
 * The element type is fp32 everywhere (token ids and labels too: 4 bytes each):
 * operators count bytes in SF_ELEM_BYTES elements, and a plan in bf16 or fp16
 * rescales them to its element size (soapflow/cost.h, sf_cost_model.dtype).
 */
#ifndef SOAPFLOW_GRAPH_H
#define SOAPFLOW_GRAPH_H

#include "soapflow/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_MAX_DIMS 6   /* largest tensor rank */
#define SF_MAX_SPLIT 64 /* most outputs of one split operator */
#define SF_ELEM_BYTES 4 /* fp32 */
/* Size limits that sf_graph_add_op enforces, so that shape, cost and memory
 * arithmetic in int64 never overflows: every integer attribute (a channel
 * count, a kernel size, a padding, a target shape) lies in
 * [-SF_MAX_EXTENT, SF_MAX_EXTENT], so that the few products and sums shape
 * inference takes of two of them fit; every tensor, parallel space and weight
 * set has at most SF_MAX_NUMEL elements (4 TiB of fp32, far above any
 * device), so that the product of a tile's extents fits with room to spare. */
#define SF_MAX_EXTENT ((int64_t)1 << 31)
#define SF_MAX_NUMEL ((int64_t)1 << 40)

/* ---- shapes and tiles -------------------------------------------------- */

typedef struct sf_shape {
    int ndim;
    int64_t d[SF_MAX_DIMS];
} sf_shape;

/* A rectangle [lo, hi) in each dimension. Empty when any hi <= lo. */
typedef struct sf_tile {
    int ndim;
    int64_t lo[SF_MAX_DIMS];
    int64_t hi[SF_MAX_DIMS];
} sf_tile;

SF_API sf_shape sf_shape_make(int ndim, const int64_t *d);
SF_API int64_t sf_shape_numel(const sf_shape *s);
SF_API int sf_shape_equal(const sf_shape *a, const sf_shape *b);
/* "64x3x224x224" into buf; returns buf. */
SF_API char *sf_shape_str(const sf_shape *s, char *buf, size_t n);

/* The small tile helpers below are static inline: the simulator calls them a
 * few dozen times per task (regions, intersections, sizes), and as out-of-line
 * calls returning a 104-byte tile by value they were a fifth of a full
 * simulation's time. Dimensions at or above ndim are kept zero, as everywhere. */

/* The whole of shape s. */
static inline sf_tile sf_tile_full(const sf_shape *s) {
    sf_tile t;
    t.ndim = s->ndim;
    for (int i = 0; i < SF_MAX_DIMS; i++) {
        t.lo[i] = 0;
        t.hi[i] = i < s->ndim ? s->d[i] : 0;
    }
    return t;
}

/* 1 when any dimension is empty (hi <= lo). */
static inline int sf_tile_empty(const sf_tile *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->hi[i] <= t->lo[i]) return 1;
    return 0;
}

/* Elements of the tile; 0 when empty. */
static inline int64_t sf_tile_numel(const sf_tile *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->hi[i] <= t->lo[i]) return 0;
        n *= t->hi[i] - t->lo[i];
    }
    return n;
}

/* Intersection (rank: the smaller of the two) into out (may be NULL); returns
 * 1 when non-empty. */
static inline int sf_tile_intersect(const sf_tile *a, const sf_tile *b, sf_tile *out) {
    sf_tile r;
    r.ndim = a->ndim < b->ndim ? a->ndim : b->ndim;
    int nonempty = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) {
        if (i < r.ndim) {
            r.lo[i] = a->lo[i] > b->lo[i] ? a->lo[i] : b->lo[i];
            r.hi[i] = a->hi[i] < b->hi[i] ? a->hi[i] : b->hi[i];
            if (r.hi[i] <= r.lo[i]) nonempty = 0;
        } else {
            r.lo[i] = r.hi[i] = 0;
        }
    }
    if (out) *out = r;
    return nonempty;
}

SF_API int sf_tile_equal(const sf_tile *a, const sf_tile *b);
SF_API sf_shape sf_tile_extent(const sf_tile *t); /* hi - lo per dimension */
SF_API char *sf_tile_str(const sf_tile *t, char *buf, size_t n);
/* The contiguous runs a copy of region r makes from a buffer laid out as tile a
 * into one laid out as tile b (each row-major over its own extents, both
 * holding r): the dimensions after the innermost one that r does not cover in
 * full in both layouts are contiguous in both, so each run is one row of that
 * dimension with everything inside it. The runtime copies a region one run at a
 * time (one memcpy each), so a split on the last dimension makes many short
 * runs; the simulator prices each run (docs/simulator.md, the copy task).
 * 0 when r is empty. */
SF_API int64_t sf_tile_runs(const sf_tile *r, const sf_tile *a, const sf_tile *b);

/* Part `part` of `degree` equal-as-possible parts of [0, n): parts differ by at
 * most one element (floor(part*n/degree) .. floor((part+1)*n/degree)). */
static inline void sf_split_range(int64_t n, int degree, int part, int64_t *lo, int64_t *hi) {
    if (degree < 1) degree = 1;
    if (n >= 0 && n < ((int64_t)1 << 31)) { /* the common case: no 128-bit division */
        *lo = n * part / degree;
        *hi = n * (part + 1) / degree;
        return;
    }
    *lo = (int64_t)((__int128)n * part / degree);
    *hi = (int64_t)((__int128)n * (part + 1) / degree);
}

/* ---- dimension kinds (the S, A and P of SOAP) -------------------------- */

typedef enum sf_dim_kind {
    SF_DIM_NONE = 0,      /* cannot be split (degree must be 1) */
    SF_DIM_SAMPLE = 1,    /* the batch */
    SF_DIM_ATTRIBUTE = 2, /* splitting keeps weights whole: height, width, sequence */
    SF_DIM_PARAMETER = 3, /* splitting splits the weights: channels, features, embedding columns */
    SF_DIM_REDUCE = 4,    /* a dimension the output is a sum over (a linear's input features):
                           * no output dimension names it, so its parts produce partial sums
                           * of one output piece, each with its slice of the weights, which
                           * the task graph reduces (docs/architecture.md, "Partial sums") */
    SF_DIM_KIND_COUNT
} sf_dim_kind;

SF_API const char *sf_dim_kind_name(sf_dim_kind k); /* "sample", "attribute", ... */

/* ---- operator types ---------------------------------------------------- */

typedef enum sf_op_type {
    SF_OP_INPUT = 0,
    SF_OP_CONV2D,
    SF_OP_POOL2D,
    SF_OP_LINEAR,
    SF_OP_MATMUL,
    SF_OP_EMBEDDING,
    SF_OP_LSTM,
    SF_OP_ATTENTION,
    SF_OP_RELU,
    SF_OP_SIGMOID,
    SF_OP_TANH,
    SF_OP_GELU,
    SF_OP_ADD,
    SF_OP_MUL,
    SF_OP_CONCAT,
    SF_OP_SPLIT,
    SF_OP_RESHAPE,
    SF_OP_FLATTEN,
    SF_OP_SOFTMAX_CE,
    SF_OP_BATCHNORM,
    SF_OP_LAYERNORM,
    SF_OP_DROPOUT,
    SF_OP_RELU6,        /* min(max(x, 0), 6): torch.nn.ReLU6, ONNX Clip(0, 6) */
    SF_OP_LEAKY_RELU,   /* x, or alpha * x below 0 */
    SF_OP_ADD_PARAM,    /* x + w, w a learned tensor broadcast over x (position embeddings) */
    SF_OP_MUL_PARAM,    /* x * w, w a learned tensor broadcast over x (layer scale) */
    SF_OP_SCALE,        /* x * mul + add, two constants (ONNX Add/Mul/Sub/Div by a scalar) */
    SF_OP_CONCAT_PARAM, /* a learned tensor, the same for every sample, concatenated with x
                         * (ViT's class token) */
    SF_OP_TRANSPOSE,    /* a permutation of the dimensions, the batch kept first */
    SF_OP_PAD,          /* zeros added before and after dimensions (not the batch) */
    SF_OP_REDUCE_MEAN,  /* the mean over some dimensions (not the batch) */
    SF_OP_HARD_SIGMOID, /* min(max(alpha * x + beta, 0), 1) */
    SF_OP_HARD_SWISH,   /* x * hard_sigmoid(x) at torch's alpha 1/6, beta 1/2 */
    SF_OP_CONV_TRANSPOSE2D, /* torch.nn.ConvTranspose2d, ONNX ConvTranspose (groups 1) */
    SF_OP_RESIZE,           /* nearest or bilinear resizing of NCHW: nn.Upsample, ONNX Resize */
    SF_OP_GRU,              /* one torch.nn.GRU layer over a sequence, batch first */
    SF_OP_MASKED_FILL,      /* value where a fixed mask holds, else x (masked_fill, Where) */
    SF_OP_ADD_CONST,        /* x + c, c a fixed tensor broadcast over x (a registered buffer) */
    SF_OP_MUL_CONST,        /* x * c, c a fixed tensor broadcast over x */
    SF_OP_COUNT
} sf_op_type;

typedef enum sf_pool_mode {
    SF_POOL_MAX = 0,
    SF_POOL_AVG = 1,
    SF_POOL_ADAPTIVE_AVG = 2 /* output_size fixed; (1,1) is global average */
} sf_pool_mode;

/* Parameters of each operator type: plain values, one struct per type. */
typedef struct sf_input_params {
    sf_shape shape; /* full shape including the batch in dimension 0 */
    int is_index;   /* 1: token ids / class ids (still 4-byte elements) */
} sf_input_params;

typedef struct sf_conv2d_params {
    int64_t out_channels;
    int64_t kernel[2], stride[2], padding[2], dilation[2]; /* (h, w) */
    int64_t groups;
    int bias;
} sf_conv2d_params;

typedef struct sf_conv_transpose2d_params {
    int64_t out_channels;
    int64_t kernel[2], stride[2], padding[2], output_padding[2]; /* (h, w) */
    int bias;
} sf_conv_transpose2d_params;

typedef enum sf_resize_mode { SF_RESIZE_NEAREST = 0, SF_RESIZE_BILINEAR = 1 } sf_resize_mode;

typedef struct sf_resize_params {
    int mode;          /* sf_resize_mode */
    int64_t size[2];   /* output (H, W) */
    int align_corners; /* bilinear: corner pixels aligned (torch's align_corners=True) */
} sf_resize_params;

typedef struct sf_pool2d_params {
    int mode; /* sf_pool_mode */
    int64_t kernel[2], stride[2], padding[2];
    int64_t output_size[2]; /* adaptive only */
    int ceil_mode;
    int count_include_pad; /* average only */
} sf_pool2d_params;

typedef struct sf_linear_params {
    int64_t out_features; /* applies to the last dimension */
    int bias;
} sf_linear_params;

typedef struct sf_matmul_params {
    int transpose_a, transpose_b; /* batched: (..., M, K) x (..., K, N) */
} sf_matmul_params;

typedef struct sf_embedding_params {
    int64_t num_embeddings;
    int64_t embedding_dim;
} sf_embedding_params;

typedef struct sf_lstm_params {
    int64_t hidden;
    /* inputs: x (N, T, I) [, h0 (N, H), c0 (N, H)]
     * outputs: y (N, T, H), hT (N, H), cT (N, H) */
} sf_lstm_params;

typedef struct sf_gru_params {
    int64_t hidden;
    /* inputs: x (N, T, I) [, h0 (N, H)]; outputs: y (N, T, H), hT (N, H) */
} sf_gru_params;

typedef struct sf_attention_params {
    int64_t embed_dim; /* model width D; inputs and output are (N, T, D) */
    int64_t heads;
    int causal;
    int bias;
    double dropout; /* probability of zeroing an attention probability in training (0: none) */
    /* inputs: query (N, Tq, D) [, memory (N, Tk, D)]: self-attention with one input */
} sf_attention_params;

typedef struct sf_concat_params {
    int axis;
} sf_concat_params;

typedef struct sf_split_params {
    int axis;
    int parts;                   /* number of outputs */
    int64_t sizes[SF_MAX_SPLIT]; /* all zero: split as evenly as sf_split_range */
} sf_split_params;

typedef struct sf_reshape_params {
    int ndim;
    int64_t shape[SF_MAX_DIMS]; /* 0: copy that input dimension; -1: infer (one at most) */
} sf_reshape_params;

typedef struct sf_flatten_params {
    int start_dim; /* dimensions start_dim.. are merged into one; torch.flatten(x, 1) is 1 */
} sf_flatten_params;

typedef struct sf_norm_params {
    double eps;
    int affine; /* learnable scale and shift */
} sf_norm_params;

typedef struct sf_dropout_params {
    double p;
} sf_dropout_params;

typedef struct sf_leaky_relu_params {
    double alpha; /* slope below 0 (torch's negative_slope, ONNX's alpha) */
} sf_leaky_relu_params;

typedef struct sf_param_tensor_params {
    /* add_param, mul_param: the learned tensor's shape, PyTorch's, aligned with the
     * input's last dimensions (NumPy broadcasting); each size is the input's or 1,
     * and the batch dimension's is 1 */
    int ndim;
    int64_t shape[SF_MAX_DIMS];
} sf_param_tensor_params;

typedef struct sf_concat_param_params {
    int axis;                   /* the axis concatenated along (not 0, the batch) */
    int last;                   /* 0: the learned tensor first (ViT), 1: after x */
    int ndim;                   /* the learned tensor's shape, PyTorch's: the input's rank, */
    int64_t shape[SF_MAX_DIMS]; /* 1 along the batch, the input's sizes but on the axis */
} sf_concat_param_params;

typedef struct sf_transpose_params {
    int ndim;                  /* the input's rank */
    int64_t perm[SF_MAX_DIMS]; /* output dimension k is input dimension perm[k]; perm[0] 0 */
} sf_transpose_params;

typedef struct sf_pad_params {
    int n_pads;                    /* 2 x the input's rank */
    int64_t pads[2 * SF_MAX_DIMS]; /* ONNX's order: the zeros before each dimension, then
                                    * those after each; 0 for the batch */
} sf_pad_params;

typedef struct sf_reduce_params {
    int n_axes;
    int64_t axes[SF_MAX_DIMS]; /* the input dimensions averaged over, increasing, not 0 */
    int keepdims;              /* 1: they stay as size 1 (ONNX's default); 0: they go */
} sf_reduce_params;

typedef struct sf_hard_sigmoid_params {
    double alpha, beta; /* torch's nn.Hardsigmoid: 1/6 and 1/2; ONNX's default 0.2, 0.5 */
} sf_hard_sigmoid_params;

typedef enum sf_gelu_approx {
    SF_GELU_NONE = 0, /* x * Phi(x) with erf: torch's nn.GELU() */
    SF_GELU_TANH = 1  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): approximate="tanh",
                       * Hugging Face's gelu_new */
} sf_gelu_approx;

typedef struct sf_gelu_params {
    int approximate; /* sf_gelu_approx */
} sf_gelu_params;

typedef struct sf_scale_params {
    double mul, add; /* y = x * mul + add */
} sf_scale_params;

typedef struct sf_masked_fill_params {
    /* the mask's shape, aligned with the input's last dimensions as add_param's
     * weight is (each size the input's or 1, 1 along the batch); the mask itself
     * is the operator's fixed tensor (sf_op.fixed: 1 where value replaces x, 0
     * where x passes) */
    int ndim;
    int64_t shape[SF_MAX_DIMS];
    double value; /* may be -inf or inf */
} sf_masked_fill_params;

typedef union sf_op_params {
    sf_input_params input;
    sf_conv2d_params conv2d;
    sf_pool2d_params pool2d;
    sf_linear_params linear;
    sf_matmul_params matmul;
    sf_embedding_params embedding;
    sf_lstm_params lstm;
    sf_gru_params gru;
    sf_attention_params attention;
    sf_concat_params concat;
    sf_split_params split;
    sf_reshape_params reshape;
    sf_flatten_params flatten;
    sf_norm_params norm; /* batchnorm, layernorm */
    sf_dropout_params dropout;
    sf_leaky_relu_params leaky_relu;
    sf_param_tensor_params param; /* add_param, mul_param, add_const, mul_const */
    sf_scale_params scale;
    sf_concat_param_params concat_param;
    sf_transpose_params transpose;
    sf_pad_params pad;
    sf_reduce_params reduce;
    sf_hard_sigmoid_params hard_sigmoid;
    sf_gelu_params gelu;
    sf_conv_transpose2d_params conv_transpose2d;
    sf_resize_params resize;
    sf_masked_fill_params masked_fill;
} sf_op_params;

SF_API const char *sf_op_type_name(sf_op_type t); /* "conv2d"; "?" when out of range */
/* Look up by name; SF_ERR_NOTFOUND when unknown. */
SF_API sf_status sf_op_type_from_name(const char *name, sf_op_type *out);
/* Fill the defaults of a type (stride 1, bias on, eps 1e-5, ...). */
SF_API void sf_op_params_default(sf_op_type t, sf_op_params *p);

/* ---- attributes, for file formats ------------------------------------- */

/* Each operator describes its attributes with a table, so that readers and
 * writers of model files work for every operator without knowing any. */
typedef enum sf_attr_type {
    SF_ATTR_INT = 0, /* int64_t */
    SF_ATTR_INTS,    /* int64_t[count]; count 0 means variable (see count_offset) */
    SF_ATTR_BOOL,    /* int */
    SF_ATTR_FLOAT,   /* double */
    SF_ATTR_ENUM,    /* int, written as one of enum_names */
    SF_ATTR_SMALLINT /* int (axis, counts) */
} sf_attr_type;

typedef struct sf_attr_desc {
    const char *name;
    sf_attr_type type;
    size_t offset;       /* into sf_op_params */
    int count;           /* SF_ATTR_INTS: fixed number of elements (0: variable) */
    size_t count_offset; /* SF_ATTR_INTS with count 0: offset of an int holding it */
    int max_count;       /* SF_ATTR_INTS with count 0: capacity */
    const char *const *enum_names;
    int n_enum;
    int allow_inf; /* SF_ATTR_FLOAT: inf and -inf are values (written "inf", "-inf") */
} sf_attr_desc;

SF_API const sf_attr_desc *sf_op_attrs(sf_op_type t, int *n);

/* ---- the graph --------------------------------------------------------- */

/* Output `out` of operator `op`. */
typedef struct sf_tensor_ref {
    int op;
    int out;
} sf_tensor_ref;

/* One operator of a graph: read-only to users, owned by the graph. */
typedef struct sf_op {
    int id;
    const char *name;
    sf_op_type type;
    sf_op_params params;
    int n_inputs;
    const sf_tensor_ref *inputs;
    const sf_shape *in_shapes; /* [n_inputs] */
    int n_outputs;
    const sf_shape *out_shapes; /* [n_outputs] */
    int weight_owner;           /* -1, or the operator whose weights this one shares */
    int64_t n_params;           /* trainable parameters it needs (even when shared) */
    sf_shape space;             /* parallel space: normally out_shapes[0] */
    sf_dim_kind kinds[SF_MAX_DIMS];
    /* A fixed tensor the operator holds (masked_fill's mask, add_const's and
     * mul_const's operand: a registered buffer): part of the model like an
     * attribute, never trained, synced, checkpointed or counted in n_params.
     * n_fixed is what the type needs for its attributes (sf_op_fixed_count); NULL
     * and 0 for the other types. */
    int64_t n_fixed;
    const float *fixed;
} sf_op;

typedef struct sf_graph sf_graph;

SF_API sf_graph *sf_graph_new(const char *name);
SF_API void sf_graph_free(sf_graph *g);
SF_API const char *sf_graph_name(const sf_graph *g);
SF_API int sf_graph_num_ops(const sf_graph *g);
SF_API const sf_op *sf_graph_op(const sf_graph *g, int id);
/* Operator by name, or -1. */
SF_API int sf_graph_find(const sf_graph *g, const char *name);

/* Add an operator. Returns its id (>= 0) or a negative sf_status with err set.
 * Names must be unique; inputs must already exist; attributes and sizes must
 * be within SF_MAX_EXTENT and SF_MAX_NUMEL (SF_ERR_RANGE). */
SF_API int sf_graph_add_op(sf_graph *g, sf_op_type type, const char *name, const sf_op_params *p,
                           const sf_tensor_ref *inputs, int n_inputs, sf_error *err);
SF_API int sf_graph_add_input(sf_graph *g, const char *name, const sf_shape *shape, int is_index,
                              sf_error *err);
/* sf_graph_add_op for a type that holds a fixed tensor (masked_fill, add_const,
 * mul_const): its n_fixed values, copied (sf_op_fixed_count says how many the
 * attributes need; a mask holds 0 and 1; every value finite). sf_graph_add_op is
 * this with none, which such a type refuses. */
SF_API int sf_graph_add_op_fixed(sf_graph *g, sf_op_type type, const char *name,
                                 const sf_op_params *p, const sf_tensor_ref *inputs, int n_inputs,
                                 const float *fixed, int64_t n_fixed, sf_error *err);
/* Values of the fixed tensor an operator of type t with parameters p needs (0:
 * the type holds none; -1: more than SF_MAX_NUMEL). */
SF_API int64_t sf_op_fixed_count(sf_op_type t, const sf_op_params *p);
/* Make `op` use the weights of `owner` (an earlier operator of the same type
 * with the same weight shapes): unrolled RNN steps share their layer's weights.
 * Operators of different types may share weights when their parameter layouts
 * are the same tensors (a linear without bias and an embedding, GPT-2's tied LM
 * head): a tie. Tied operators keep their parallel spaces; a strategy must split
 * their weights alike (sf_strategy_validate). */
SF_API sf_status sf_graph_share_weights(sf_graph *g, int op, int owner, sf_error *err);
/* Operators that share an owner's weights across types (ties), and whether op
 * is one of them or such an owner (1) or not (0). */
SF_API int sf_graph_num_ties(const sf_graph *g);
SF_API int sf_graph_op_tied(const sf_graph *g, int op);

/* Consumers of output `out` of `op`: fills up to `cap` (op, input index) pairs
 * into `users` and returns how many there are in all. */
SF_API int sf_graph_consumers(const sf_graph *g, int op, int out, sf_tensor_ref *users, int cap);

/* Totals over the graph at its batch. */
typedef struct sf_graph_stats {
    int ops;
    int64_t params;   /* trainable, shared weights counted once */
    double flops_fwd; /* one forward pass */
    double flops_bwd;
    double activation_bytes; /* all operator outputs */
    double saved_bytes;      /* what the backward pass keeps, as frameworks keep it: the
                              * outputs sf_graph_output_kept says, and what operators save
                              * beyond their inputs (masks, indices, gates, scores) */
    double weight_bytes;
    int64_t batch; /* dimension 0 of the first input */
} sf_graph_stats;

SF_API void sf_graph_stats_compute(const sf_graph *g, sf_graph_stats *st);

/* What an operator's backward pass saves, as PyTorch's autograd keeps it
 * (docs/cost-model.md, "Memory as frameworks keep it"): SF_SAVES_INPUT(i) for
 * each input it keeps, SF_SAVES_OUTPUT when it keeps its outputs, and
 * SF_SAVES_IN_PLACE when it may run in place over input 0 (ReLU after a
 * convolution or batch norm, a residual `+=`). Each operator file says its own;
 * one that says nothing saves every input. What an operator keeps beyond its
 * inputs and outputs (a max pool's indices, a dropout mask, LSTM gates,
 * attention scores) is in sf_op_tile_memory's saved_bytes. */
#define SF_SAVES_INPUT(i) (1u << (i)) /* input i, i < 30 */
#define SF_SAVES_ALL_INPUTS ((1u << 30) - 1u)
#define SF_SAVES_OUTPUT (1u << 30)
#define SF_SAVES_IN_PLACE (1u << 31)
SF_API unsigned sf_op_saves(const sf_op *op);
/* 1 when output `out` of operator `op` stays alive for the backward pass: its
 * own backward saves it, or a consumer's does, and no consumer took its storage
 * by running in place (a consumer runs in place when it is the output's only
 * reader, may (SF_SAVES_IN_PLACE), does not save that input, and the producer
 * does not save the output itself); 0 for a transient that frameworks free
 * once its readers ran. */
SF_API int sf_graph_output_kept(const sf_graph *g, int op, int out);
/* What tile t of op saves beyond its inputs and outputs: sf_op_tile_memory's
 * saved_bytes less the bytes of the input regions it reads, at least 0. */
SF_API double sf_op_saved_extra_bytes(const sf_op *op, const sf_tile *t);
/* sf_graph_output_kept of every output of op as a mask (bit k: output k). */
SF_API uint64_t sf_graph_kept_mask(const sf_graph *g, int op);
/* The activation bytes tile t of op holds for the backward pass (fp32
 * elements): its outputs in the mask `kept` (sf_graph_kept_mask) and what it
 * saves beyond its inputs. What the simulator and OptCNN charge a part. */
SF_API double sf_op_tile_kept_bytes(const sf_op *op, const sf_tile *t, uint64_t kept);

/* The batch of g (dimension 0 of its first input), 0 without inputs. */
SF_API int64_t sf_graph_batch(const sf_graph *g);
/* The micro-batch graph (src/graph/microbatch.c):
 * m copies of g at batch / m, copy j's operator i at id j * n + i named
 * "<name>@mb<j>" (copy 0 keeps the names), the copies' weights those of copy 0
 * (gradient accumulation is the weight groups' sync), ties kept. SF_ERR_INVALID
 * naming the operator when m does not divide the batch or an operator's shape
 * does not follow the batch (a reshape with the batch spelled out is
 * rewritten). What the simulator and the runtime run a pipelined strategy on. */
SF_API sf_graph *sf_graph_micro_batches(const sf_graph *g, int m, sf_error *err);
/* The first `copies` (>= 1, may exceed m) copies of that graph, each at batch / m:
 * the simulator's fast path for many micro-batches runs a few (docs/simulator.md,
 * "Pipelines"). sf_graph_micro_batches(g, m) is copies = m. */
SF_API sf_graph *sf_graph_micro_batch_copies(const sf_graph *g, int m, int copies, sf_error *err);
/* ---- what each operator knows about a tile of its parallel space ------- */

typedef struct sf_op_cost {
    double flops_fwd, flops_bwd; /* floating-point operations */
    double bytes_fwd, bytes_bwd; /* device memory traffic: read + written */
} sf_op_cost;

typedef struct sf_op_mem {
    double weight_bytes; /* weights the tile needs */
    double saved_bytes;  /* activations kept for the backward pass */
    double output_bytes; /* outputs the tile produces */
} sf_op_mem;

/* Region of input `input` that tile `t` needs (clamped to the input's shape). */
SF_API void sf_op_input_region(const sf_op *op, const sf_tile *t, int input, sf_tile *region);
/* How the pieces of output `output` follow the parallel space, which lets
 * callers find the parts that produce a given region by index arithmetic
 * instead of testing every part. Returns 1 and fills, for each dimension e of
 * the output, axis[e] (a dimension of op->space) and shift[e] such that the
 * piece sf_op_output_tile gives for any tile t lies, along e, within
 * [t.lo[axis[e]] - shift[e], t.hi[axis[e]] - shift[e]); returns 0 when the
 * output has no such map (then every part must be tested). Space dimensions
 * that no output dimension names are unconstrained. */
SF_API int sf_op_output_axes(const sf_op *op, int output, int *axis, int64_t *shift);
/* Part of output `output` that tile `t` produces (may be empty). */
SF_API void sf_op_output_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *out);
SF_API void sf_op_tile_cost(const sf_op *op, const sf_tile *t, sf_op_cost *c);
SF_API void sf_op_tile_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m);
/* Weight elements a tile uses: the parameter count scaled by its share of the
 * parameter dimensions (tiles that differ only in sample or attribute dimensions
 * hold replicas of the same shard); a tile cut along a reduction dimension
 * counts its weight slices (a linear's bias lives on its first part alone). */
SF_API int64_t sf_op_tile_weights(const sf_op *op, const sf_tile *t);
/* The space dimension whose split needs communication inside the operator: its
 * parts exchange per-row statistics between the phases of their forward pass
 * (softmax_ce's classes, Megatron's vocabulary-parallel cross-entropy:
 * sf_taskgraph_op_inner); -1 for an operator without one. */
SF_API int sf_op_inner_dim(const sf_op *op);
/* The level at which the searches and random proposals split dimension d when
 * asked (their `reduce` option: a dimension of level L is split when reduce >=
 * L): 0 for an ordinary dimension, SF_OPT_IN_REDUCE for a reduction dimension
 * (partial sums), SF_OPT_IN_INNER for the operator's inner dimension (its
 * parts all-reduce row statistics); the runtime trains both. */
enum { SF_OPT_IN_REDUCE = 1, SF_OPT_IN_INNER = 2 };
SF_API int sf_op_dim_opt_in(const sf_op *op, int d);

/* ---- the weights of an operator: slices and parameter tensors ---------- */

/* Positions below are in the operator's full parameter layout (soapflow/kernels.h
 * gives each operator's), the one buffer of n_params floats its kernels read.
 * An operator that shares another's weights (weight_owner >= 0) has the same
 * layout, and answers for it as the owner would. */

#define SF_MAX_WEIGHT_SLICES 4
/* A strided run of elements in an operator's full parameter layout (soapflow/kernels.h):
 * `count` rows of `len` contiguous elements, the first at `offset`, each `stride` after the
 * previous. */
typedef struct sf_weight_slice {
    int64_t offset, len, stride, count;
} sf_weight_slice;

/* The weight elements that tile t reads forward and accumulates into backward: fills out[]
 * (capacity SF_MAX_WEIGHT_SLICES) and returns how many; 0 for an operator without weights.
 * Their elements add up to sf_op_tile_weights(op, t); tiles that differ on a parameter
 * dimension get disjoint slices; the slices of a tile whole on its parameter dimensions cover
 * the whole parameter layout. The slices are disjoint, in increasing order, none empty,
 * contiguous neighbours merged (a slice with count 1 has stride len); an empty tile reads
 * nothing and gets none. Reduction dimensions split the weights as parameter dimensions do. The
 * runtime all-reduces and updates exactly these elements among the replicas of a shard. */
SF_API int sf_op_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out);
/* 1 when the n slices sf_op_weight_slices gave are one run of the layout (the runtime then
 * syncs a shard's gradient where it lies, without packing it: no COPY steps). */
SF_API int sf_weight_slices_one_run(const sf_weight_slice *s, int n);

#define SF_MAX_PARAMS 4
/* How a parameter tensor starts training (PyTorch's default for its module). */
typedef enum sf_param_init {
    SF_INIT_UNIFORM = 0, /* U(-a, a) */
    SF_INIT_NORMAL,      /* N(0, a^2) */
    SF_INIT_CONST,       /* every element a */
    SF_INIT_COUNT
} sf_param_init;

/* One parameter tensor of an operator: a contiguous piece of its layout. */
typedef struct sf_param_desc {
    const char *name;   /* PyTorch's name: "weight", "bias", "weight_ih_l0", "in_proj_weight",
                           "out_proj.weight" ... */
    sf_shape shape;     /* PyTorch's shape */
    int64_t offset;     /* first element in the full parameter layout */
    sf_param_init init; /* PyTorch's default initialization of the module */
    double a;           /* UNIFORM: bound (U(-a, a)); NORMAL: std; CONST: value */
} sf_param_desc;

/* The parameter tensors of op's full layout, in layout order, contiguous, adding up to the
 * layout's size (op->n_params); fills out[] (capacity SF_MAX_PARAMS) and returns how many (0:
 * none). Checkpoints name them "<op>.<name>" (safetensors); an operator sharing weights
 * describes its owner's tensors, stored once under the owner's name. */
SF_API int sf_op_param_descs(const sf_op *op, sf_param_desc *out);
/* "uniform", "normal", "const"; "?" when out of range. */
SF_API const char *sf_param_init_name(sf_param_init init);

#ifdef __cplusplus
}
#endif
#endif
