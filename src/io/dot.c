/*
 * dot.c - an operator graph as a Graphviz digraph, for looking at models and plans.
 *
 * One box per operator (name, type, output shapes, and an optional extra line such
 * as its parallel config), one edge per operator input labelled with the tensor's
 * shape. Callers colour operators (e.g. by device) through `colors`; this file
 * knows nothing of strategies. Nodes are named n<id> so that operator names, which
 * may hold any character, appear only inside quoted labels escaped by
 * sf_strbuf_put_dot.
 */
#include <stdlib.h>
#include <string.h>

#include "soapflow/io.h"

/* Operators with many outputs (a split into 64) list the first few shapes. */
#define DOT_MAX_SHAPES 4

char *sf_graph_to_dot(const sf_graph *g, const char *const *labels, const char *const *colors,
                      sf_error *err) {
    sf_strbuf b = {0};
    char shape[128];
    sf_strbuf_puts(&b, "digraph \"");
    sf_strbuf_put_dot(&b, sf_graph_name(g));
    sf_strbuf_puts(&b, "\" {\n  rankdir=TB;\n"
                       "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
                       "fontname=\"Helvetica\", fontsize=10];\n"
                       "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        sf_strbuf_printf(&b, "  n%d [label=\"", i);
        sf_strbuf_put_dot(&b, op->name);
        sf_strbuf_puts(&b, "\\n");
        sf_strbuf_puts(&b, sf_op_type_name(op->type));
        sf_strbuf_puts(&b, "\\n");
        for (int k = 0; k < op->n_outputs && k < DOT_MAX_SHAPES; k++) {
            if (k) sf_strbuf_puts(&b, ", ");
            sf_strbuf_puts(&b, sf_shape_str(&op->out_shapes[k], shape, sizeof shape));
        }
        if (op->n_outputs > DOT_MAX_SHAPES)
            sf_strbuf_printf(&b, " (+%d more)", op->n_outputs - DOT_MAX_SHAPES);
        if (labels && labels[i] && labels[i][0]) {
            sf_strbuf_puts(&b, "\\n");
            sf_strbuf_put_dot(&b, labels[i]);
        }
        sf_strbuf_puts(&b, "\"");
        if (colors && colors[i] && colors[i][0]) {
            sf_strbuf_puts(&b, ", fillcolor=\"");
            sf_strbuf_put_dot(&b, colors[i]);
            sf_strbuf_puts(&b, "\"");
        }
        sf_strbuf_puts(&b, "];\n");
    }
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) {
            sf_tensor_ref in = op->inputs[k];
            const sf_op *src = sf_graph_op(g, in.op);
            sf_shape_str(&src->out_shapes[in.out], shape, sizeof shape);
            if (in.out == 0)
                sf_strbuf_printf(&b, "  n%d -> n%d [label=\"%s\"];\n", in.op, i, shape);
            else
                sf_strbuf_printf(&b, "  n%d -> n%d [label=\"%d: %s\"];\n", in.op, i, in.out, shape);
        }
    }
    sf_strbuf_puts(&b, "}\n");
    char *text = sf_strbuf_take(&b);
    if (!text) sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    return text;
}

sf_status sf_graph_write_dot(const sf_graph *g, const char *path, const char *const *labels,
                             const char *const *colors, sf_error *err) {
    char *text = sf_graph_to_dot(g, labels, colors, err);
    if (!text) return SF_ERR_NOMEM;
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}
