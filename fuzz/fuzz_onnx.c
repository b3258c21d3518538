/*
 * fuzz_onnx.c - the ONNX reader (sf_onnx_parse, io.h) on any bytes: an error
 * naming the input in one line, or a graph whose operators, shapes and
 * statistics are in the graph's limits, which writes as model JSON and reads
 * back to the same text and statistics (as `soapflow graph --model x.onnx
 * --save` does), and whose weights, when the file holds them all, have one
 * buffer of exactly n_params readable floats per operator that owns weights.
 *
 * ONNX is binary: the raw bytes go to the reader, NUL bytes and all (not
 * fuzz_text, which skips such inputs as sf_read_file would; sf_onnx_load reads
 * with sf_read_file_bytes). Each input is read three times: at batch 1 with
 * the weights, at batch 1 without them (the same answer by another route: the
 * same status and the same graph, since asking for the weights changes only
 * whether the initializers are copied), and at batch 3 without them (a
 * dynamic batch bound otherwise; a file that fixes its batch ignores it).
 */
#include <math.h>

#include "fuzz.h"
#include "soapflow/graph.h"
#include "soapflow/io.h"

#define ORIGIN "model.onnx"

/* What the graph and weight pointers hold before a read: the reader must set
 * both, also when it fails. */
static char unset;

static int shape_ok(const sf_shape *s) {
    if (s->ndim < 0 || s->ndim > SF_MAX_DIMS) return 0;
    for (int d = 0; d < s->ndim; d++)
        if (s->d[d] < 0 || s->d[d] > SF_MAX_EXTENT) return 0;
    return sf_shape_numel(s) <= SF_MAX_NUMEL;
}

static int finite_nonneg(double x) { return isfinite(x) && x >= 0; }

/* Every operator within the graph's limits, the parameter tensors tiling each
 * layout, and the statistics finite and in agreement with the operators. */
static void check_graph(const sf_graph *g) {
    int n = sf_graph_num_ops(g);
    FUZZ_CHECK(n >= 0, "%d operators", n);
    int64_t params = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        FUZZ_CHECK(op && op->id == i && op->name && op->name[0], "operator %d", i);
        FUZZ_CHECK(sf_graph_find(g, op->name) == i, "operator '%s' does not find itself", op->name);
        for (int k = 0; k < op->n_inputs; k++)
            FUZZ_CHECK(op->inputs[k].op >= 0 && op->inputs[k].op < i,
                       "operator '%s': input %d from operator %d", op->name, k, op->inputs[k].op);
        FUZZ_CHECK(op->n_outputs >= 1, "operator '%s': %d outputs", op->name, op->n_outputs);
        for (int k = 0; k < op->n_outputs; k++)
            FUZZ_CHECK(shape_ok(&op->out_shapes[k]), "operator '%s': output %d", op->name, k);
        FUZZ_CHECK(shape_ok(&op->space), "operator '%s': parallel space", op->name);
        FUZZ_CHECK(op->n_params >= 0 && op->n_params <= SF_MAX_NUMEL, "operator '%s': %lld params",
                   op->name, (long long)op->n_params);
        if (op->weight_owner >= 0) {
            const sf_op *o = sf_graph_op(g, op->weight_owner);
            /* an unrolled step shares its layer's weights; a tied head (a linear on
             * an embedding's table, GPT-2's) an operator of another type's, of the
             * same layout */
            FUZZ_CHECK(op->weight_owner < i && o->n_params == op->n_params &&
                           (o->type == op->type ||
                            (op->type == SF_OP_LINEAR && o->type == SF_OP_EMBEDDING)),
                       "operator '%s' shares the weights of operator %d", op->name,
                       op->weight_owner);
        } else {
            params += op->n_params;
        }
        sf_param_desc d[SF_MAX_PARAMS];
        int np = sf_op_param_descs(op, d);
        FUZZ_CHECK(np >= 0 && np <= SF_MAX_PARAMS, "operator '%s': %d parameter tensors", op->name,
                   np);
        int64_t at = 0;
        for (int k = 0; k < np; k++) {
            FUZZ_CHECK(d[k].offset == at && shape_ok(&d[k].shape),
                       "operator '%s': parameter '%s' at %lld, %lld expected", op->name, d[k].name,
                       (long long)d[k].offset, (long long)at);
            at += sf_shape_numel(&d[k].shape);
        }
        FUZZ_CHECK(at == op->n_params, "operator '%s': parameter tensors of %lld elements, %lld",
                   op->name, (long long)at, (long long)op->n_params);
    }
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    FUZZ_CHECK(st.ops == n && st.params == params && st.batch >= 0, "stats: %d ops, %lld params",
               st.ops, (long long)st.params);
    FUZZ_CHECK(finite_nonneg(st.flops_fwd) && finite_nonneg(st.flops_bwd) &&
                   finite_nonneg(st.activation_bytes) && finite_nonneg(st.weight_bytes),
               "stats: flops %g + %g, activations %g bytes, weights %g bytes", st.flops_fwd,
               st.flops_bwd, st.activation_bytes, st.weight_bytes);
}

/* The weights as io.h promises them: one entry per operator, a buffer of
 * n_params floats for each that owns weights, NULL for the others. */
static void check_weights(const sf_graph *g, float *const *w) {
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        int owns = op->weight_owner < 0 && op->n_params > 0;
        FUZZ_CHECK(owns == (w[i] != NULL), "operator '%s' (%lld params, owner %d): weights %s",
                   op->name, (long long)op->n_params, op->weight_owner, w[i] ? "given" : "none");
        uint32_t sum = 0;
        for (int64_t k = 0; owns && k < op->n_params; k++) { /* every float readable */
            uint32_t bits;
            memcpy(&bits, w[i] + k, sizeof bits);
            sum += bits;
        }
        (void)sum;
    }
}

/* The graph as model JSON (malloc'd), which reads back and writes the same. */
static char *check_json(const sf_graph *g) {
    sf_error err = {0};
    char *j1 = sf_model_to_json(g, &err);
    FUZZ_CHECK(j1, "an imported graph does not write as model JSON: %s", err.msg);
    sf_error err2 = {0};
    sf_graph *g2 = sf_model_parse_json(j1, "written.json", &err2);
    FUZZ_CHECK(g2, "the model JSON written does not read back: %s", err2.msg);
    char *j2 = sf_model_to_json(g2, &err2);
    FUZZ_CHECK(j2 && strcmp(j1, j2) == 0, "written twice, not the same text");
    sf_graph_stats a, b;
    sf_graph_stats_compute(g, &a);
    sf_graph_stats_compute(g2, &b);
    FUZZ_CHECK(a.ops == b.ops && a.params == b.params && a.batch == b.batch &&
                   a.flops_fwd == b.flops_fwd && a.flops_bwd == b.flops_bwd &&
                   a.activation_bytes == b.activation_bytes,
               "the model JSON reads back with other statistics");
    free(j2);
    sf_graph_free(g2);
    return j1;
}

/* One read: an error or a checked graph; the graph's JSON (malloc'd) or NULL. */
static char *read_once(const uint8_t *data, size_t size, int64_t batch, int want_weights,
                       sf_status *status) {
    sf_graph *g = (sf_graph *)&unset;
    float **w = (float **)&unset;
    sf_error err = {0};
    sf_status st = sf_onnx_parse(data, size, ORIGIN, batch, &g, want_weights ? &w : NULL, &err);
    *status = st;
    if (st != SF_OK) {
        fuzz_check_error(st, &err, ORIGIN);
        FUZZ_CHECK(!g && (!want_weights || !w), "a failed read leaves a graph or weights");
        return NULL;
    }
    FUZZ_CHECK(g, "read, but no graph");
    check_graph(g);
    if (want_weights && w) check_weights(g, w);
    char *json = check_json(g);
    if (want_weights) sf_onnx_weights_free(g, w);
    sf_graph_free(g);
    return json;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sf_status st1, st2, st3;
    char *j1 = read_once(data, size, 1, 1, &st1);
    char *j2 = read_once(data, size, 1, 0, &st2);
    FUZZ_CHECK(st1 == st2, "status %d with the weights, %d without", (int)st1, (int)st2);
    FUZZ_CHECK((!j1 && !j2) || (j1 && j2 && strcmp(j1, j2) == 0),
               "read with and without the weights, not the same graph");
    free(j2);
    free(j1);
    free(read_once(data, size, 3, 0, &st3));
    return 0;
}
