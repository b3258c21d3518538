/*
 * zoo_builder.c - the small builder the zoo's models are written against.
 *
 * Each helper fills an operator's parameters from its defaults, sets the few
 * fields a model cares about and adds the operator. The error is sticky (see
 * zoo_impl.h): after the first failure every helper is a no-op returning an
 * invalid tensor, so model code stays a plain list of layers. The alternative,
 * a check after every layer, would triple the length of the Inception file and
 * hide its structure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "zoo_impl.h"

static const sf_tensor_ref bad_ref = {-1, 0};

sf_status sf_zoo_begin(sf_zoo_builder *b, const char *name, sf_error *err) {
    memset(b, 0, sizeof *b);
    b->err = err;
    b->g = sf_graph_new(name);
    if (!b->g) {
        b->failed = 1;
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    }
    return SF_OK;
}

sf_graph *sf_zoo_end(sf_zoo_builder *b) {
    if (!b->failed) return b->g;
    if (b->err && b->g) sf_error_prefix(b->err, "model '%s': ", sf_graph_name(b->g));
    sf_graph_free(b->g);
    b->g = NULL;
    return NULL;
}

void sf_zoo_fail(sf_zoo_builder *b, sf_status code, const char *fmt, ...) {
    if (b->failed) return;
    b->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    if (b->err) sf_error_vset(b->err, code, fmt, ap);
    va_end(ap);
}

const char *sf_zoo_name(sf_zoo_builder *b, const char *fmt, ...) {
    char *buf = b->names[b->name_slot];
    b->name_slot = (b->name_slot + 1) % SF_ZOO_NAME_RING;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, SF_ZOO_NAME_MAX, fmt, ap);
    va_end(ap);
    return buf;
}

int sf_zoo_op(sf_zoo_builder *b, sf_op_type type, const char *name, const sf_op_params *p,
              const sf_tensor_ref *inputs, int n_inputs) {
    if (b->failed) return -1;
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i].op < 0) {
            sf_zoo_fail(b, SF_ERR_INTERNAL, "operator '%s': input %d is invalid", name, i);
            return -1;
        }
    }
    int id = sf_graph_add_op(b->g, type, name, p, inputs, n_inputs, b->err);
    if (id < 0) {
        b->failed = 1;
        return -1;
    }
    return id;
}

sf_tensor_ref sf_zoo_ref(int op, int out) {
    if (op < 0) return bad_ref;
    return (sf_tensor_ref){op, out};
}

sf_shape sf_zoo_shape(const sf_zoo_builder *b, sf_tensor_ref t) {
    sf_shape empty = {0};
    if (b->failed || t.op < 0) return empty;
    const sf_op *op = sf_graph_op(b->g, t.op);
    if (!op || t.out < 0 || t.out >= op->n_outputs) return empty;
    return op->out_shapes[t.out];
}

void sf_zoo_share(sf_zoo_builder *b, int op, int owner) {
    if (b->failed) return;
    if (sf_graph_share_weights(b->g, op, owner, b->err) != SF_OK) b->failed = 1;
}

/* One operator with one output, output 0 returned. */
static sf_tensor_ref add1(sf_zoo_builder *b, sf_op_type type, const char *name,
                          const sf_op_params *p, const sf_tensor_ref *inputs, int n_inputs) {
    return sf_zoo_ref(sf_zoo_op(b, type, name, p, inputs, n_inputs), 0);
}

sf_tensor_ref sf_zoo_input(sf_zoo_builder *b, const char *name, int ndim, const int64_t *dims,
                           int is_index) {
    sf_op_params p;
    sf_op_params_default(SF_OP_INPUT, &p);
    p.input.shape = sf_shape_make(ndim, dims);
    p.input.is_index = is_index;
    return add1(b, SF_OP_INPUT, name, &p, NULL, 0);
}

sf_tensor_ref sf_zoo_conv(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t cout,
                          int64_t kh, int64_t kw, int64_t stride, int64_t ph, int64_t pw,
                          int bias) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = cout;
    p.conv2d.kernel[0] = kh;
    p.conv2d.kernel[1] = kw;
    p.conv2d.stride[0] = p.conv2d.stride[1] = stride;
    p.conv2d.padding[0] = ph;
    p.conv2d.padding[1] = pw;
    p.conv2d.bias = bias;
    return add1(b, SF_OP_CONV2D, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_batchnorm(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double eps) {
    sf_op_params p;
    sf_op_params_default(SF_OP_BATCHNORM, &p);
    p.norm.eps = eps;
    p.norm.affine = 1;
    return add1(b, SF_OP_BATCHNORM, name, &p, &x, 1);
}

static sf_tensor_ref pool(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int mode,
                          int64_t k, int64_t stride, int64_t pad) {
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.mode = mode;
    p.pool2d.kernel[0] = p.pool2d.kernel[1] = k;
    p.pool2d.stride[0] = p.pool2d.stride[1] = stride;
    p.pool2d.padding[0] = p.pool2d.padding[1] = pad;
    p.pool2d.ceil_mode = 0;
    p.pool2d.count_include_pad = 1;
    return add1(b, SF_OP_POOL2D, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_maxpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t k,
                             int64_t stride, int64_t pad) {
    return pool(b, name, x, SF_POOL_MAX, k, stride, pad);
}

sf_tensor_ref sf_zoo_avgpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t k,
                             int64_t stride, int64_t pad) {
    return pool(b, name, x, SF_POOL_AVG, k, stride, pad);
}

sf_tensor_ref sf_zoo_adaptive_avgpool(sf_zoo_builder *b, const char *name, sf_tensor_ref x,
                                      int64_t oh, int64_t ow) {
    sf_op_params p;
    sf_op_params_default(SF_OP_POOL2D, &p);
    p.pool2d.mode = SF_POOL_ADAPTIVE_AVG;
    p.pool2d.output_size[0] = oh;
    p.pool2d.output_size[1] = ow;
    return add1(b, SF_OP_POOL2D, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_linear(sf_zoo_builder *b, const char *name, sf_tensor_ref x, int64_t out,
                            int bias) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = out;
    p.linear.bias = bias;
    return add1(b, SF_OP_LINEAR, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_act(sf_zoo_builder *b, sf_op_type type, const char *name, sf_tensor_ref x) {
    sf_op_params p;
    sf_op_params_default(type, &p);
    return add1(b, type, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_dropout(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double prob) {
    sf_op_params p;
    sf_op_params_default(SF_OP_DROPOUT, &p);
    p.dropout.p = prob;
    return add1(b, SF_OP_DROPOUT, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_flatten(sf_zoo_builder *b, const char *name, sf_tensor_ref x) {
    sf_op_params p;
    sf_op_params_default(SF_OP_FLATTEN, &p);
    p.flatten.start_dim = 1; /* torch.flatten(x, 1) */
    return add1(b, SF_OP_FLATTEN, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_add(sf_zoo_builder *b, const char *name, sf_tensor_ref x, sf_tensor_ref y) {
    sf_op_params p;
    sf_op_params_default(SF_OP_ADD, &p);
    sf_tensor_ref in[2] = {x, y};
    return add1(b, SF_OP_ADD, name, &p, in, 2);
}

sf_tensor_ref sf_zoo_concat(sf_zoo_builder *b, const char *name, const sf_tensor_ref *xs, int n,
                            int axis) {
    sf_op_params p;
    sf_op_params_default(SF_OP_CONCAT, &p);
    p.concat.axis = axis;
    return add1(b, SF_OP_CONCAT, name, &p, xs, n);
}

sf_tensor_ref sf_zoo_layernorm(sf_zoo_builder *b, const char *name, sf_tensor_ref x, double eps) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LAYERNORM, &p);
    p.norm.eps = eps;
    p.norm.affine = 1;
    return add1(b, SF_OP_LAYERNORM, name, &p, &x, 1);
}

sf_tensor_ref sf_zoo_embedding(sf_zoo_builder *b, const char *name, sf_tensor_ref ids,
                               int64_t num, int64_t dim) {
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = num;
    p.embedding.embedding_dim = dim;
    return add1(b, SF_OP_EMBEDDING, name, &p, &ids, 1);
}

sf_tensor_ref sf_zoo_loss(sf_zoo_builder *b, sf_tensor_ref logits) {
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    return add1(b, SF_OP_SOFTMAX_CE, "loss", &p, &logits, 1);
}
