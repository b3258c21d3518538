/*
 * zoo_impl.h - what the model zoo's files share (internal).
 *
 * A model is written as straight-line code against a small builder whose error
 * is sticky, like SQLite's out-of-memory flag: once an operator fails, every
 * later helper returns at once and hands back an invalid tensor ({-1, 0}), and
 * sf_zoo_end() frees the graph and reports the first failure. Model files then
 * read like the torchvision code they mirror, with no error check per layer.
 *
 * Operator names are built with sf_zoo_name(), which formats into one of a
 * small ring of buffers, so a name can be passed straight to a helper (the
 * graph copies it). Callers that need a name to live across several calls
 * (a block prefix such as "layer2.1") keep it in their own array.
 */
#ifndef SOAPFLOW_ZOO_IMPL_H
#define SOAPFLOW_ZOO_IMPL_H

#include "soapflow/graph.h"
#include "soapflow/models.h"

#define SF_ZOO_NAME_MAX 96
#define SF_ZOO_NAME_RING 8

typedef struct sf_zoo_builder {
    sf_graph *g;
    sf_error *err; /* caller's, may be NULL */
    int failed;    /* sticky: set by the first failing operator */
    int name_slot;
    char names[SF_ZOO_NAME_RING][SF_ZOO_NAME_MAX];
} sf_zoo_builder;

/* Default sequence and chunk for the unrolled RNNs (FlexFlow unrolled 40 steps). */
#define SF_ZOO_SEQ_DEFAULT 40
#define SF_ZOO_CHUNK_DEFAULT 4

/* Start a graph called `name`; returns SF_OK or SF_ERR_NOMEM (with err set). */
sf_status sf_zoo_begin(sf_zoo_builder *b, const char *name, sf_error *err);
/* The finished graph, or NULL (graph freed) when anything failed. */
sf_graph *sf_zoo_end(sf_zoo_builder *b);
/* Fail the build with a message (for checks of options inside a model). */
void sf_zoo_fail(sf_zoo_builder *b, sf_status code, const char *fmt, ...) SF_PRINTF(3, 4);

/* Format an operator name into the builder's ring of buffers. */
const char *sf_zoo_name(sf_zoo_builder *b, const char *fmt, ...) SF_PRINTF(2, 3);

/* Any operator: its id, or -1 once the build has failed. */
int sf_zoo_op(sf_zoo_builder *b, sf_op_type type, const char *name, const sf_op_params *p,
              const sf_tensor_ref *inputs, int n_inputs);
/* Output `out` of operator `op` ({-1, 0} when op is -1). */
sf_tensor_ref sf_zoo_ref(int op, int out);
/* Shape of a tensor; an empty shape for an invalid reference. */
sf_shape sf_zoo_shape(const sf_zoo_builder *b, sf_tensor_ref t);
/* Make `op` use the weights of `owner`. */
void sf_zoo_share(sf_zoo_builder *b, int op, int owner);

/* Inputs: dims[0] is the batch. is_index: token or class ids. */
sf_tensor_ref sf_zoo_input(sf_zoo_builder *b, const char *name, int ndim, const int64_t *dims,
                           int is_index);

/* Layers (one output each). Padding and stride are (h, w) where both are given. */
sf_tensor_ref sf_zoo_conv(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t cout,
                          int64_t kh, int64_t kw, int64_t stride, int64_t ph, int64_t pw,
                          int bias);
sf_tensor_ref sf_zoo_batchnorm(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double eps);
sf_tensor_ref sf_zoo_maxpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t k,
                             int64_t stride, int64_t pad);
/* Average pool with count_include_pad on, as torch.nn.functional.avg_pool2d. */
sf_tensor_ref sf_zoo_avgpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t k,
                             int64_t stride, int64_t pad);
sf_tensor_ref sf_zoo_adaptive_avgpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x,
                                      int64_t oh, int64_t ow);
sf_tensor_ref sf_zoo_linear(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t out,
                            int bias);
/* An elementwise activation: SF_OP_RELU, SF_OP_SIGMOID, SF_OP_TANH or SF_OP_GELU. */
sf_tensor_ref sf_zoo_act(sf_zoo_builder *b, sf_op_type type, const char *name, sf_tensor_ref x);
sf_tensor_ref sf_zoo_dropout(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double p);
sf_tensor_ref sf_zoo_flatten(sf_zoo_builder *b, const char *name, sf_tensor_ref x);
sf_tensor_ref sf_zoo_add(sf_zoo_builder *b, const char *name, sf_tensor_ref x, sf_tensor_ref y);
sf_tensor_ref sf_zoo_concat(sf_zoo_builder *b, const char *name, const sf_tensor_ref *xs, int n,
                            int axis);
sf_tensor_ref sf_zoo_layernorm(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double eps);
sf_tensor_ref sf_zoo_embedding(sf_zoo_builder *b, const char *name, sf_tensor_ref ids,
                               int64_t num, int64_t dim);
/* Softmax with cross-entropy over the last dimension of `logits`, named "loss".
 * The labels are not a graph input: they come with each batch. */
sf_tensor_ref sf_zoo_loss(sf_zoo_builder *b, sf_tensor_ref logits);

/* The models, one builder each; `o` has been checked (batch >= 1, no negative
 * sizes) by sf_model_build. */
sf_graph *sf_zoo_lenet5(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_alexnet(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_vgg16(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_resnet18(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_resnet50(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_resnet101(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_inception_v3(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_rnntc(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_rnnlm(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_nmt(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gnmt(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_mlp(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_transformer(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt2(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt2_medium(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt2_large(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt2_xl(const sf_model_options *o, sf_error *err);
sf_graph *sf_zoo_gpt3(const sf_model_options *o, sf_error *err);

#endif
