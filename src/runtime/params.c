/*
 * params.c - full-layout parameter buffers of a graph and their initial
 * values, PyTorch's defaults per module (sf_op_params gives each tensor's
 * place and rule). Values are drawn tensor by tensor in layout order from one
 * generator, so they depend on the graph and the seed only.
 */
#include <math.h>
#include <stdlib.h>

#include "soapflow/runtime.h"

static double normal(sf_rng *r) {
    /* Box-Muller; 1 - u keeps the logarithm finite */
    double u = 1.0 - sf_rng_uniform(r), v = sf_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void sf_params_free(const sf_graph *g, float **bufs) {
    if (!bufs) return;
    for (int i = 0; i < sf_graph_num_ops(g); i++) free(bufs[i]);
    free(bufs);
}

float **sf_params_new(const sf_graph *g, uint64_t seed, int zero, sf_error *err) {
    int n = sf_graph_num_ops(g);
    float **b = calloc((size_t)(n ? n : 1), sizeof *b);
    if (!b) goto oom;
    sf_rng rng;
    sf_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->weight_owner >= 0 || op->n_params <= 0) continue;
        b[i] = calloc((size_t)op->n_params, sizeof *b[i]);
        if (!b[i]) goto oom;
        if (zero) continue;
        sf_param_desc d[SF_MAX_PARAMS];
        int np = sf_op_param_descs(op, d);
        for (int k = 0; k < np; k++) {
            int64_t m = sf_shape_numel(&d[k].shape);
            float *w = b[i] + d[k].offset;
            for (int64_t q = 0; q < m; q++) {
                switch (d[k].init) {
                case SF_INIT_UNIFORM:
                    w[q] = (float)(d[k].a * (2.0 * sf_rng_uniform(&rng) - 1.0));
                    break;
                case SF_INIT_NORMAL: w[q] = (float)(d[k].a * normal(&rng)); break;
                default: w[q] = (float)d[k].a; break;
                }
            }
        }
    }
    return b;
oom:
    sf_params_free(g, b);
    sf_error_set(err, SF_ERR_NOMEM, "out of memory for the parameters");
    return NULL;
}

/* ---- buffers: batch norm's running statistics ------------------------------- */

int64_t sf_buffers_numel(const sf_op *op) {
    return op->type == SF_OP_BATCHNORM ? 2 * op->in_shapes[0].d[1] : 0;
}

int sf_buffer_descs(const sf_op *op, sf_param_desc *out) {
    if (op->type != SF_OP_BATCHNORM) return 0;
    int64_t c = op->in_shapes[0].d[1];
    out[0] = (sf_param_desc){.name = "running_mean",
                             .shape = sf_shape_make(1, &c),
                             .offset = 0,
                             .init = SF_INIT_CONST,
                             .a = 0.0};
    out[1] = (sf_param_desc){.name = "running_var",
                             .shape = sf_shape_make(1, &c),
                             .offset = c,
                             .init = SF_INIT_CONST,
                             .a = 1.0};
    return 2;
}

float **sf_buffers_new(const sf_graph *g, sf_error *err) {
    int n = sf_graph_num_ops(g);
    float **b = calloc((size_t)(n ? n : 1), sizeof *b);
    if (!b) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int64_t m = sf_buffers_numel(op);
        if (!m) continue;
        b[i] = malloc((size_t)m * sizeof *b[i]);
        if (!b[i]) {
            sf_params_free(g, b);
            sf_error_set(err, SF_ERR_NOMEM, "out of memory");
            return NULL;
        }
        sf_param_desc d[SF_MAX_PARAMS];
        int nd = sf_buffer_descs(op, d);
        for (int k = 0; k < nd; k++)
            for (int64_t j = 0; j < sf_shape_numel(&d[k].shape); j++)
                b[i][d[k].offset + j] = (float)d[k].a;
    }
    return b;
}
