/*
 * onnx_impl.h - the ONNX importer's insides, shared by its files (internal):
 * what the frame, the node handlers and the wire check offer each other, over
 * the context of onnx_ctx.h.
 *
 *   onnx.c        the entry points: read, decode (protobuf-c), model checks, weights out
 *   onnx_ctx.c    the context the handlers share: messages, values by name,
 *                 attributes, constants, views and activations, names, weights
 *   onnx_wire.c   why a file does not decode: a walk of the protobuf wire format that
 *                 names the byte, the field and the node where it breaks
 *   onnx_graph.c  the frame: the values of a graph, their order, liveness, what is
 *                 unsupported, the node dispatch, the head and declared shapes
 *   onnx_ops.c    nodes that become soapflow operators (Conv, Gemm, LSTM, ...)
 *   onnx_fold.c   nodes evaluated on constants: the shape glue of PyTorch's exports
 *   onnx_attn.c   torch's nn.MultiheadAttention export, recognized as one attention
 *   onnx_norm.c   torch's layer normalization and GELU spelled out in steps (opsets < 17)
 *
 * The state and the services every file shares are in onnx_ctx.h.
 */
#ifndef SOAPFLOW_ONNX_IMPL_H
#define SOAPFLOW_ONNX_IMPL_H

#include <stdint.h>

#include "onnx_ctx.h"

/* ---- onnx_graph.c ---------------------------------------------------------- */

/* The graph of c->graph into c->g (and the weights into c->w), or why not. */
sf_status ox_import_graph(ox_ctx *c);

/* ---- onnx_ops.c, onnx_fold.c, onnx_attn.c -------------------------------------- */

typedef sf_status (*ox_handler)(ox_ctx *c, const Onnx__NodeProto *n);

/* What a node type can do: be folded (all inputs constant) and/or be imported
 * (an input is an activation), and the handlers that do it. */
enum {
    OX_CAN_FOLD = 1,
    OX_CAN_ACT = 2,
    /* on activations only as a step of a pattern (onnx_norm.c): the check before
     * import asks ox_pat_may_take whether the node could be one */
    OX_CAN_STEP = 4
};
typedef struct ox_op_entry {
    const char *op_type;
    int can;
    int min_in;      /* inputs ONNX requires in opsets 9 to 17 (checked before either handler) */
    ox_handler fold; /* all inputs constant (NULL: cannot) */
    ox_handler act;  /* some input an activation (NULL: cannot) */
} ox_op_entry;

/* The table (onnx_ops.c), sorted by op_type. */
const ox_op_entry *ox_op_find(const char *op_type);
int ox_op_count(void);
const ox_op_entry *ox_op_at(int i);

/* onnx_ops.c: a pending linear layer made an operator (ox_pend_fn). */
sf_status ox_linear_force(ox_ctx *c, int v);

/* onnx_fold.c: a node whose inputs are all constants (or a Shape), evaluated. */
sf_status ox_fold_node(ox_ctx *c, const Onnx__NodeProto *n);

/* onnx_attn.c: the attention stages. Each returns 1 when it took the node (err
 * set on failure: check c->err->code), 0 when the node is not part of one. */
int ox_attn_slice(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st);
int ox_attn_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st);
/* A Split of a packed projection into the Q, K, V of GPT-2-style attention. */
int ox_attn_split(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st);
/* An error for a node that reads an attention stage it cannot take. */
sf_status ox_attn_refuse(ox_ctx *c, int v);
/* ox_act's way out of an attention stage (ox_pend_fn): the operator made where
 * the output projection is read before its bias, an error otherwise. */
sf_status ox_attn_force(ox_ctx *c, int v);

/* onnx_norm.c: the steps of a layer normalization or a GELU; as ox_attn_node
 * (also the nodes that start one). */
int ox_pat_node(ox_ctx *c, const Onnx__NodeProto *n, sf_status *st);
/* Whether node n, on activations, is where a step of layer normalization or GELU
 * could be, judged by the types of the nodes around it alone (before any import:
 * constants are checked when the pattern is read). 0 means it would be refused. */
int ox_pat_may_take(const ox_ctx *c, const Onnx__NodeProto *n);
/* A step read as an activation: the layernorm it completes, or an error. */
sf_status ox_pat_force(ox_ctx *c, int v);
sf_status ox_pat_refuse(ox_ctx *c, int v);

/* ---- onnx_wire.c ------------------------------------------------------------- */

/* Why len bytes at buf are not a ModelProto: the byte offset, the field and the
 * node, as "at byte 1234, in graph node #12 'conv1/Conv' attribute 'pads': ...".
 * Returns SF_ERR_PARSE with err set, or SF_OK when the wire format is sound (the
 * decoder failed for another reason). */
sf_status ox_wire_check(const uint8_t *buf, size_t len, const char *origin, sf_error *err);

#endif
