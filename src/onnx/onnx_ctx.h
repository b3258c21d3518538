/*
 * onnx_ctx.h - the ONNX import context (internal): the state the node handlers
 * share, and the services they share over it (onnx_ctx.c).
 *
 * The importer is a tree with the context at its root: onnx_ctx.c includes
 * this header only and calls no handler; the handlers (onnx_ops.c, onnx_fold.c,
 * onnx_attn.c, onnx_norm.c) and the frame (onnx_graph.c) call the context, and
 * onnx_impl.h declares what they offer each other (tests/check_cycles.py
 * holds the import to that).
 *
 * Every ONNX value (a node output, a graph input, an initializer) is one ox_value:
 * its ONNX shape, always known (the batch is bound before anything is read), and
 * one of
 *   CONST   data known at import time: initializers, Constant nodes and whatever
 *           they fold into (float or int64 elements)
 *   WEIGHT  a graph input that is used as a weight: its shape, no data (a file
 *           exported without its parameters)
 *   INPUT   a graph input not yet used; it becomes an input operator when a node
 *           reads it as an activation, a WEIGHT when one reads it as a weight
 *   ACT     a tensor of the soapflow graph seen through a view (below)
 *   PEND    a pattern in progress: a MatMul whose bias Add may follow, or a stage of
 *           an attention; made into operators when its pattern completes, or when
 *           something else reads it (a linear layer), or refused (attention stages)
 *   NONE    an output soapflow does not model (a BatchNormalization's running
 *           mean, a Dropout's mask): an error if anything reads it
 *
 * Views. ONNX exports move tensors around with Transpose, Squeeze and Unsqueeze
 * (an LSTM reads (T, N, I), PyTorch's batch-first modules give (N, T, I)), and
 * soapflow has no operator for that: every soapflow tensor keeps the batch in
 * dimension 0. So an ACT value is a soapflow tensor in another order: map[k] is
 * the soapflow dimension that ONNX dimension k is, or -1 for a dimension of size 1
 * that the soapflow tensor does not have; soapflow dimensions no map entry names
 * have size 1. Transpose and (un)squeeze change the view and add no operator; an
 * operator that needs its input in order gets it when the view is the identity,
 * or when only size-1 dimensions differ (through a reshape operator), and an
 * error otherwise ("a transpose soapflow has no operator for").
 */
#ifndef SOAPFLOW_ONNX_CTX_H
#define SOAPFLOW_ONNX_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "soapflow/io.h"

#define OX_MAX_RANK 8                  /* largest ONNX tensor rank the importer takes */
#define OX_MAX_FOLD ((int64_t)1 << 24) /* most elements of a constant made by folding */
#define OX_OPSET_MIN 9
#define OX_OPSET_MAX 17

typedef enum ox_kind {
    OX_UNSET = 0, /* not produced yet (or by a node not imported) */
    OX_ABSENT,    /* the empty name of a left-out optional input */
    OX_CONST,
    OX_WEIGHT,
    OX_INPUT,
    OX_ACT,
    OX_PEND,
    OX_NONE
} ox_kind;

typedef enum ox_pend_kind {
    OX_PEND_LINEAR = 0, /* MatMul by a constant (K, N): a linear layer, bias to come */
    OX_PEND_ATTN,       /* a stage of an attention (onnx_attn.c) */
    OX_PEND_PAT,        /* a step of a layer normalization or a GELU (onnx_norm.c) */
    OX_PEND_COUNT
} ox_pend_kind;

typedef struct ox_value {
    const char *name; /* the ONNX name (owned by the decoded model) */
    ox_kind kind;
    int ndim;
    int64_t d[OX_MAX_RANK]; /* the ONNX shape */
    int producer;           /* node index, or -1 (graph input, initializer) */
    int uses;               /* node inputs and graph outputs that read it (Shape, Size aside) */
    int is_index;           /* integer elements: token ids (ACT, INPUT) or int64 (CONST) */
    /* CONST */
    int64_t numel;
    float *f;   /* numel floats, or NULL when is_index */
    int64_t *i; /* numel int64, when is_index */
    int from_initializer;
    int copied_big; /* a Transpose has copied this initializer past OX_MAX_FOLD (once only) */
    /* a large float initializer whose data is not needed (no weights asked for):
     * converted on first use by ox_const_data, if ever */
    const Onnx__TensorProto *lazy;
    /* ACT */
    sf_tensor_ref ref;
    int8_t map[OX_MAX_RANK];
    /* PEND */
    ox_pend_kind pend;
    int rec; /* index into the linear or attention records */
    /* INPUT: the dimension that is the batch (-1 for dimension 0 of a static shape) */
    int batch_dim;
    /* CONST made by an Expand: the value expanded (0: none), so that a Concat can
     * take a learned tensor repeated over the batch as a weight */
    int expanded_from;
    /* ACT seen through a zero Pad folded into its one reader, a Conv or an
     * AveragePool (onnx_ops.c): the symmetric (h, w) padding that reader adds */
    int64_t pad_fold[2];
} ox_value;

/* A MatMul by a constant waiting for its bias (OX_PEND_LINEAR). */
typedef struct ox_linear {
    int x;    /* the value multiplied (ACT, or INPUT) */
    int w;    /* the constant (K, N) */
    int b;    /* the bias constant (N), or -1 */
    int node; /* the MatMul node, for names and messages */
    int attn; /* the attention record this projection starts, or -1 */
    int64_t k, n;
} ox_linear;

/* One recognized attention in progress (onnx_attn.c), in one of two forms:
 * torch's nn.MultiheadAttention export ((T, N*heads, head_dim), packed
 * projections), or the batch-first (N, heads, T, head_dim) products of GPT-2-style
 * code (packed projections split, or three separate ones). */
typedef struct ox_attn {
    int form;               /* OX_ATTN_MHA or OX_ATTN_BF */
    int proj;               /* the ox_linear of the packed Q, K, V projection, or -1 */
    int node;               /* the node where it was recognized (the first Slice) */
    int64_t t, n, d, heads; /* sequence, batch, model width; heads (0 until known) */
    double scale;           /* MHA: what Q was divided by (must come to sqrt(D / heads)) */
    int causal;
    double dropout; /* the ratio of a Dropout on the probabilities (0: none, or not training) */
    int emitted;    /* the soapflow operator made (at the output projection) */
    sf_tensor_ref out;
    /* OX_ATTN_BF */
    int x;        /* the value projected (N, T, D) */
    int role[3];  /* for q, k, v: the part of the packed projection, or the separate
                     ox_linear (-1 until the products say which is which) */
    int n_sep;    /* separate projections seen (at most 3) */
    int wo, bo;   /* the output projection's constant (D, D) and bias (-1 until seen) */
    int out_node; /* the output projection's MatMul */
} ox_attn;

enum { OX_ATTN_MHA = 0, OX_ATTN_BF = 1 };

/* A layer normalization or GELU spelled out in steps (onnx_norm.c). */
typedef struct ox_pat {
    int x;    /* the value normalized (or activated) */
    int node; /* the node where it starts */
    int w;    /* the scale constant, or -1 */
    double eps;
} ox_pat;

/* What a PEND ATTN value holds (onnx_attn.c): a stage, the part (0 q, 1 k, 2 v
 * of torch's packed projection; in the batch-first form the piece of a split
 * packed projection, or -1 with lin the separate projection) for the per-part
 * stages, and the order it is in: of (T, N*heads, head_dim), or of the axes
 * (N, T, heads, head_dim) in the batch-first form. */
typedef struct ox_attn_val {
    int stage;
    int part;
    int lin;
    int perm[4];
    double scale; /* batch-first form: the product of the constant factors applied to it */
} ox_attn_val;

typedef struct ox_ctx ox_ctx;
/* How a value pending on a pattern becomes an activation, or the error saying
 * why it cannot (an attention stage read by something else). */
typedef sf_status (*ox_pend_fn)(ox_ctx *c, int v);

struct ox_ctx {
    const char *origin; /* the file name, for messages */
    const char *dir;    /* the model file's folder (external data), NULL from memory */
    sf_error *err;
    const Onnx__ModelProto *model;
    const Onnx__GraphProto *graph;
    int64_t opset;
    int64_t batch;

    ox_value *vals;
    int n_vals, cap_vals;
    /* name -> value index: open addressing, power-of-two size */
    int *hash;
    size_t hash_cap;

    int n_nodes;
    int *order;    /* node indices in topological order */
    uint8_t *live; /* [n_nodes] 1: an output is read (or is a graph output) */

    ox_linear *lin;
    int n_lin, cap_lin;
    ox_attn *attn;
    int n_attn, cap_attn;
    ox_attn_val *attn_val; /* [n_vals]: what each PEND ATTN value holds */
    ox_pat *pat;
    int n_pat, cap_pat;
    int *pat_stage; /* [n_vals]: the step each PEND PAT value is */

    sf_graph *g;
    int want_weights; /* the caller asked for the weights */
    float **w;        /* [cap_w] full-layout weights by operator id (want_weights) */
    int cap_w;
    int (*emb)[2]; /* [n_emb] (embedding operator, value of its table), for ties */
    int n_emb, cap_emb;
    int weights_missing; /* some parameter has no data in the file */
    int64_t filled;      /* parameter elements set (or marked missing): a check */
    int loss_op;         /* the softmax_ce a final Softmax became, or -1 */
    int cur_node;        /* the node being imported, for messages (-1: none) */
    /* initializers to hold as constants although named as a module's state (the
     * registered buffers: sf_onnx_options.buffers), sorted for bsearch */
    const char **buffers;
    int n_buffers;
    /* [OX_PEND_COUNT]: ox_act's way out of each kind of pending value, set by the
     * frame (onnx_graph.c), which knows the patterns; the context does not */
    const ox_pend_fn *pend_force;
};

/* ---- the context (onnx_ctx.c) ------------------------------------------------ */

/* Frees the values and the pattern records c holds (not c, its model, its
 * graph or its weights, which onnx.c hands out or frees). */
void ox_ctx_free(ox_ctx *c);

/* "node #12 'name' (Conv)" of node i, into buf. */
const char *ox_node_str(const ox_ctx *c, int node, char *buf, size_t cap);
/* An error about the node being imported: "<file>: node #12 'x' (Conv): <message>". */
sf_status ox_fail(ox_ctx *c, sf_status st, const char *fmt, ...) SF_PRINTF(3, 4);
/* The same with the node said. */
sf_status ox_fail_node(ox_ctx *c, int node, sf_status st, const char *fmt, ...) SF_PRINTF(4, 5);
/* "<file>: out of memory". */
sf_status ox_oom(ox_ctx *c);
/* Control characters of a name from the file made '?', so a message stays one line. */
/* onnx_extdata.c: the need bytes of tensor t (named nm) kept in an external file
 * beside the model, checked (location inside dir, the model's folder, NULL when
 * parsed from memory; offset, length, file size) and, with out non-NULL, read
 * into a malloc'd *out. On failure, a one-line reason in msg (cap bytes). */
sf_status ox_external_data(const char *dir, const Onnx__TensorProto *t, const char *nm, size_t need,
                           uint8_t **out, char *msg, size_t cap);
void ox_one_line(char *s);
/* "2x3x224x224" of an ONNX shape (or "scalar"), into buf. */
const char *ox_dims_str(int ndim, const int64_t *d, char *buf, size_t cap);

/* The value named name, or -1. */
int ox_find_value(const ox_ctx *c, const char *name);
/* A new value named name (not yet present), made by node producer (-1: none);
 * its index or SF_ERR_NOMEM. */
int ox_new_value(ox_ctx *c, const char *name, int producer);

/* Value index of input k of node n (-1 when k is past its inputs). */
int ox_in(const ox_ctx *c, const Onnx__NodeProto *n, int k);
/* Value index of output k of node n (-1 when past its outputs or unnamed). */
int ox_out(const ox_ctx *c, const Onnx__NodeProto *n, int k);
/* Attributes of a node. */
const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);
sf_status ox_attr_int(ox_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t dflt,
                      int64_t *out);
sf_status ox_attr_float(ox_ctx *c, const Onnx__NodeProto *n, const char *name, double dflt,
                        double *out);
/* An INTS attribute: *count of them into out (capacity cap); absent: *count = -1. */
sf_status ox_attr_ints(ox_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t *out, int cap,
                       int *count);
/* A STRING attribute (NUL-terminated copy into buf), or dflt when absent. */
sf_status ox_attr_str(ox_ctx *c, const Onnx__NodeProto *n, const char *name, const char *dflt,
                      char *buf, size_t cap);

/* The soapflow tensor of ACT value v in ONNX order: v's view when it is the
 * identity, or a reshape added when only size-1 dimensions differ. An INPUT is
 * made an input operator first, a PEND linear layer made an operator. */
sf_status ox_natural(ox_ctx *c, int v, sf_tensor_ref *out);
/* The value as an ACT with any view (an INPUT made an operator, a PEND linear made
 * one); an error for constants and for attention stages. */
sf_status ox_act(ox_ctx *c, int v);
/* Make value v an ACT: soapflow tensor ref in view map (ndim entries) with ONNX
 * shape d. */
void ox_set_act(ox_ctx *c, int v, sf_tensor_ref ref, int ndim, const int64_t *d, const int8_t *map,
                int is_index);
/* The element count of an ONNX shape into *numel; an error for a negative
 * dimension or more than SF_MAX_NUMEL elements. */
sf_status ox_shape_numel(ox_ctx *c, int ndim, const int64_t *d, int64_t *numel);
/* Set v to CONST: floats (is_index 0) or int64 (1), taking ownership of data. */
sf_status ox_set_const(ox_ctx *c, int v, int ndim, const int64_t *d, int is_index, void *data);
/* A constant input as int64s: ok when CONST (floats are truncated); counts. */
sf_status ox_const_ints(ox_ctx *c, int v, const char *what, int64_t *out, int cap, int *count);
/* A constant scalar (any single element) as double. */
sf_status ox_const_scalar(ox_ctx *c, int v, const char *what, double *out);
/* The ratio a Dropout node applies: its ratio (attribute before opset 12, else
 * the constant input 1, default 0.5) in training mode (input 2, constant,
 * default false), 0 when not training; a ratio outside [0, 1) is an error. */
sf_status ox_dropout_ratio(ox_ctx *c, const Onnx__NodeProto *n, double *ratio);

/* The soapflow shape of a tensor of the graph being built. */
const sf_shape *ox_shape_of(const ox_ctx *c, sf_tensor_ref r);
/* The valid UTF-8 of src into dst (cap bytes), other bytes as '?', cut between
 * characters. */
void ox_utf8_copy(char *dst, size_t cap, const char *src);
/* A unique operator name from base into buf (cap bytes, well over 16). */
void ox_unique_name(const ox_ctx *c, const char *base, char *buf, size_t cap);
/* Add an operator named name (already unique); its id or a negative status. */
int ox_add_named(ox_ctx *c, sf_op_type type, const char *name, const sf_op_params *p,
                 const sf_tensor_ref *in, int n_in);
/* ox_add_named of a type that holds a fixed tensor (sf_graph_add_op_fixed). */
int ox_add_fixed(ox_ctx *c, sf_op_type type, const char *name, const sf_op_params *p,
                 const sf_tensor_ref *in, int n_in, const float *fixed, int64_t n_fixed);
/* 1 when the initializer name is one of the buffers the caller listed. */
int ox_is_buffer(const ox_ctx *c, const char *name);
/* Add an operator for the node being imported, named from the node (and from the
 * weight initializer named wname, when it ends in ".weight"); returns its id or a
 * negative status with the node in the message. */
int ox_add_op(ox_ctx *c, sf_op_type type, const sf_op_params *p, const sf_tensor_ref *in, int n_in,
              const char *wname);
/* ox_add_op of a type that holds a fixed tensor (named from the node). */
int ox_add_op_fixed(ox_ctx *c, sf_op_type type, const sf_op_params *p, const sf_tensor_ref *in,
                    int n_in, const float *fixed, int64_t n_fixed);
/* Copy a constant into parameter `pname` of operator `op` (its full layout): the
 * descriptor's shape must hold exactly numel elements. src NULL: the value has no
 * data (a WEIGHT), the weights are marked missing. */
sf_status ox_put_param(ox_ctx *c, int op, const char *pname, const float *src, int64_t numel);
/* Fill parameter `pname` of `op` with a constant value (a bias the file leaves out). */
sf_status ox_fill_param(ox_ctx *c, int op, const char *pname, float value);

/* A TensorProto (an initializer, a Constant's value) into value v as a CONST;
 * with convert 0 its shape, type and length are checked and the data left for
 * ox_const_data (v->lazy). */
sf_status ox_tensor_to_value(ox_ctx *c, const Onnx__TensorProto *t, int v);
sf_status ox_tensor_to_value_lazy(ox_ctx *c, const Onnx__TensorProto *t, int v, int convert);
/* The data of CONST value v, converted now if it was left lazy. */
sf_status ox_const_data(ox_ctx *c, int v);

/* Value v as a weight: CONST (floats) or WEIGHT (an INPUT becomes one). Returns
 * its data or NULL (WEIGHT: none), with err set only on failure (*ok 0). */
const float *ox_weight(ox_ctx *c, int v, const char *what, int *ok);

#endif
