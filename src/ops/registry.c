/*
 * registry.c - the one table that maps operator types to their classes, and
 * the defaults used where an operator leaves a callback NULL.
 *
 * Adding an operator: write src/ops/op_<name>.c with its sf_op_class, add the
 * enum value in graph.h, its extern in op_impl.h and one line here. The
 * _Static_assert below keeps the table and the enum in step.
 *
 * The calls go one way: graph.c (adding an operator: shape inference, weights,
 * parallel space) and the planners look classes up here, the table points at
 * the operator files, and those call only tile arithmetic (tiles.c), shapes
 * (graph/shape.c) and kernels, never back here; tests/check_cycles.py holds
 * the project to that. graph/ and ops/ are one layer with one public header,
 * graph.h (which declares the look-ups below); op_impl.h is its inside.
 */
#include "op_impl.h"

#include <string.h>

static const sf_op_class *const op_classes[] = {
    [SF_OP_INPUT] = &sf_op_input_class,
    [SF_OP_CONV2D] = &sf_op_conv2d_class,
    [SF_OP_POOL2D] = &sf_op_pool2d_class,
    [SF_OP_LINEAR] = &sf_op_linear_class,
    [SF_OP_MATMUL] = &sf_op_matmul_class,
    [SF_OP_EMBEDDING] = &sf_op_embedding_class,
    [SF_OP_LSTM] = &sf_op_lstm_class,
    [SF_OP_ATTENTION] = &sf_op_attention_class,
    [SF_OP_RELU] = &sf_op_relu_class,
    [SF_OP_SIGMOID] = &sf_op_sigmoid_class,
    [SF_OP_TANH] = &sf_op_tanh_class,
    [SF_OP_GELU] = &sf_op_gelu_class,
    [SF_OP_ADD] = &sf_op_add_class,
    [SF_OP_MUL] = &sf_op_mul_class,
    [SF_OP_CONCAT] = &sf_op_concat_class,
    [SF_OP_SPLIT] = &sf_op_split_class,
    [SF_OP_RESHAPE] = &sf_op_reshape_class,
    [SF_OP_FLATTEN] = &sf_op_flatten_class,
    [SF_OP_SOFTMAX_CE] = &sf_op_softmax_ce_class,
    [SF_OP_BATCHNORM] = &sf_op_batchnorm_class,
    [SF_OP_LAYERNORM] = &sf_op_layernorm_class,
    [SF_OP_DROPOUT] = &sf_op_dropout_class,
    [SF_OP_RELU6] = &sf_op_relu6_class,
    [SF_OP_LEAKY_RELU] = &sf_op_leaky_relu_class,
    [SF_OP_ADD_PARAM] = &sf_op_add_param_class,
    [SF_OP_MUL_PARAM] = &sf_op_mul_param_class,
    [SF_OP_SCALE] = &sf_op_scale_class,
    [SF_OP_CONCAT_PARAM] = &sf_op_concat_param_class,
    [SF_OP_TRANSPOSE] = &sf_op_transpose_class,
    [SF_OP_PAD] = &sf_op_pad_class,
    [SF_OP_REDUCE_MEAN] = &sf_op_reduce_mean_class,
    [SF_OP_HARD_SIGMOID] = &sf_op_hard_sigmoid_class,
    [SF_OP_HARD_SWISH] = &sf_op_hard_swish_class,
    [SF_OP_CONV_TRANSPOSE2D] = &sf_op_conv_transpose2d_class,
    [SF_OP_RESIZE] = &sf_op_resize_class,
    [SF_OP_GRU] = &sf_op_gru_class,
    [SF_OP_MASKED_FILL] = &sf_op_masked_fill_class,
    [SF_OP_ADD_CONST] = &sf_op_add_const_class,
    [SF_OP_MUL_CONST] = &sf_op_mul_const_class,
};
_Static_assert(sizeof op_classes / sizeof op_classes[0] == SF_OP_COUNT,
               "every operator type has a class");

const sf_op_class *sf_op_class_get(sf_op_type t) {
    if ((unsigned)t >= SF_OP_COUNT) return NULL;
    return op_classes[t];
}

const char *sf_op_type_name(sf_op_type t) {
    const sf_op_class *c = sf_op_class_get(t);
    return c ? c->name : "?";
}

sf_status sf_op_type_from_name(const char *name, sf_op_type *out) {
    for (int i = 0; i < SF_OP_COUNT; i++) {
        if (strcmp(op_classes[i]->name, name) == 0) {
            *out = (sf_op_type)i;
            return SF_OK;
        }
    }
    return SF_ERR_NOTFOUND;
}

void sf_op_params_default(sf_op_type t, sf_op_params *p) {
    memset(p, 0, sizeof *p);
    const sf_op_class *c = sf_op_class_get(t);
    if (c && c->defaults) c->defaults(p);
}

const sf_attr_desc *sf_op_attrs(sf_op_type t, int *n) {
    const sf_op_class *c = sf_op_class_get(t);
    *n = c ? c->n_attrs : 0;
    return c ? c->attrs : NULL;
}

/* ---- dispatch with defaults -------------------------------------------- */

void sf_op_input_region(const sf_op *op, const sf_tile *t, int input, sf_tile *region) {
    const sf_op_class *c = sf_op_class_get(op->type);
    if (input < 0 || input >= op->n_inputs) {
        memset(region, 0, sizeof *region);
        region->ndim = 1; /* an empty 1-D tile: numel 0 */
        return;
    }
    c->region(op, t, input, region);
}

int sf_op_output_axes(const sf_op *op, int output, int *axis, int64_t *shift) {
    const sf_op_class *c = sf_op_class_get(op->type);
    if (output < 0 || output >= op->n_outputs) return 0;
    if (c->out_axes) return c->out_axes(op, output, axis, shift);
    if (c->out_tile || output != 0) return 0;
    /* the default out_tile: output 0's piece is the tile itself */
    int nd = op->out_shapes[0].ndim;
    if (nd > op->space.ndim) return 0;
    for (int e = 0; e < nd; e++) {
        axis[e] = e;
        shift[e] = 0;
    }
    return 1;
}

void sf_op_output_tile(const sf_op *op, const sf_tile *t, int output, sf_tile *out) {
    const sf_op_class *c = sf_op_class_get(op->type);
    if (c->out_tile) {
        c->out_tile(op, t, output, out);
        return;
    }
    if (output == 0) {
        *out = *t; /* less the reduction dimensions that follow the output's */
        out->ndim = op->out_shapes[0].ndim < t->ndim ? op->out_shapes[0].ndim : t->ndim;
        for (int d = out->ndim; d < SF_MAX_DIMS; d++) out->lo[d] = out->hi[d] = 0;
    } else {
        memset(out, 0, sizeof *out);
        out->ndim = output > 0 && output < op->n_outputs ? op->out_shapes[output].ndim : 1;
    }
}

void sf_op_tile_cost(const sf_op *op, const sf_tile *t, sf_op_cost *cost) {
    memset(cost, 0, sizeof *cost);
    sf_op_class_get(op->type)->cost(op, t, cost);
}

void sf_op_tile_memory(const sf_op *op, const sf_tile *t, sf_op_mem *m) {
    memset(m, 0, sizeof *m);
    const sf_op_class *c = sf_op_class_get(op->type);
    if (c->memory) {
        c->memory(op, t, m);
        return;
    }
    m->weight_bytes = (double)sf_op_tile_weights(op, t) * SF_ELEM_BYTES;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_tile r;
        c->region(op, t, i, &r);
        m->saved_bytes += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile o;
        sf_op_output_tile(op, t, k, &o);
        m->output_bytes += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
    }
}

double sf_op_saved_extra_bytes(const sf_op *op, const sf_tile *t) {
    sf_op_mem m;
    sf_op_tile_memory(op, t, &m);
    double in = 0;
    for (int k = 0; k < op->n_inputs; k++) {
        sf_tile r;
        sf_op_input_region(op, t, k, &r);
        in += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    return m.saved_bytes > in ? m.saved_bytes - in : 0;
}

double sf_op_tile_kept_bytes(const sf_op *op, const sf_tile *t, uint64_t kept) {
    sf_op_mem m;
    sf_op_tile_memory(op, t, &m);
    double in = 0, out = 0;
    for (int k = 0; k < op->n_inputs; k++) {
        sf_tile r;
        sf_op_input_region(op, t, k, &r);
        in += (double)sf_tile_numel(&r) * SF_ELEM_BYTES;
    }
    uint64_t all = op->n_outputs >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << op->n_outputs) - 1;
    if ((kept & all) == all) {
        out = m.output_bytes; /* the operator's own count (a view's may differ) */
    } else {
        for (int k = 0; k < op->n_outputs && k < 64; k++) {
            if (!(kept >> k & 1)) continue;
            sf_tile o;
            sf_op_output_tile(op, t, k, &o);
            out += (double)sf_tile_numel(&o) * SF_ELEM_BYTES;
        }
    }
    return out + (m.saved_bytes > in ? m.saved_bytes - in : 0);
}

/* ---- weights: slices and parameter tensors ----------------------------- */

/* A tile cut along a reduction dimension holds a slice of the weights that no
 * share of the parameter dimensions describes (a linear's bias lives on the
 * part with the first input features): its slices are counted. */
int64_t sf_op_tile_weights(const sf_op *op, const sf_tile *t) {
    if (op->n_params == 0) return 0;
    int cut = 0;
    for (int i = 0; i < op->space.ndim && i < t->ndim; i++)
        cut |= op->kinds[i] == SF_DIM_REDUCE && (t->lo[i] > 0 || t->hi[i] < op->space.d[i]);
    if (!cut || !sf_op_class_get(op->type)->weight_slices) return sf_tile_weight_share(op, t);
    sf_weight_slice s[SF_MAX_WEIGHT_SLICES];
    int n = sf_op_weight_slices(op, t, s);
    int64_t w = 0;
    for (int i = 0; i < n; i++) w += s[i].len * s[i].count;
    return w;
}

int sf_op_inner_dim(const sf_op *op) {
    const sf_op_class *c = sf_op_class_get(op->type);
    return c && c->inner_dim ? c->inner_dim(op) : -1;
}

int sf_op_dim_opt_in(const sf_op *op, int d) {
    if (d < 0 || d >= op->space.ndim) return 0;
    if (d == sf_op_inner_dim(op)) return SF_OPT_IN_INNER;
    return op->kinds[d] == SF_DIM_REDUCE ? SF_OPT_IN_REDUCE : 0;
}

int sf_weight_slices_one_run(const sf_weight_slice *s, int n) {
    /* neighbours are merged, so one run is one slice of contiguous rows */
    return n == 1 && (s[0].count == 1 || s[0].stride == s[0].len);
}

int sf_op_weight_slices(const sf_op *op, const sf_tile *t, sf_weight_slice *out) {
    if (op->n_params <= 0 || sf_tile_empty(t)) return 0;
    const sf_op_class *c = sf_op_class_get(op->type);
    sf_weight_slice s[SF_MAX_WEIGHT_SLICES];
    s[0] = sf_weight_run(0, op->n_params);
    int n = c->weight_slices ? c->weight_slices(op, t, s) : 1;
    int m = 0;
    for (int i = 0; i < n; i++) {
        sf_weight_slice x = s[i];
        if (x.len <= 0 || x.count <= 0) continue;
        if (x.count > 1 && x.stride == x.len) { /* rows that touch: one run */
            x.len *= x.count;
            x.count = 1;
        }
        if (x.count == 1) x.stride = x.len;
        sf_weight_slice *p = m > 0 ? &out[m - 1] : NULL;
        if (p && p->count == 1 && x.count == 1 && p->offset + p->len == x.offset) {
            p->len += x.len;
            p->stride = p->len;
            continue;
        }
        out[m++] = x;
    }
    return m;
}

int sf_op_param_descs(const sf_op *op, sf_param_desc *out) {
    if (op->n_params <= 0) return 0;
    const sf_op_class *c = sf_op_class_get(op->type);
    if (c->param_descs) return c->param_descs(op, out);
    out[0] = sf_param_make("weight", 1, (int64_t[]){op->n_params}, 0, SF_INIT_CONST, 0.0);
    return 1;
}

const char *sf_param_init_name(sf_param_init init) {
    static const char *const names[] = {"uniform", "normal", "const"};
    _Static_assert(sizeof names / sizeof names[0] == SF_INIT_COUNT, "a name per init");
    return (unsigned)init < SF_INIT_COUNT ? names[init] : "?";
}
