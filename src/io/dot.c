/*
 * dot.c - an operator graph as a Graphviz digraph, for looking at models and plans.
 *
 * One box per operator (name, type, output shapes, and an optional extra line such
 * as its parallel config), one edge per operator input labelled with the tensor's
 * shape. Callers colour operators (e.g. by device) through `colors`; this file
 * knows nothing of strategies. Nodes are named n<id> so that operator names, which
 * may hold any character, appear only inside escaped quoted labels.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/io.h"

/* Operators with many outputs (a split into 64) list the first few shapes. */
#define DOT_MAX_SHAPES 4

typedef struct dotbuf {
    char *s;
    size_t len, cap;
    int oom; /* sticky */
} dotbuf;

static void db_add(dotbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void db_puts(dotbuf *b, const char *s) { db_add(b, s, strlen(s)); }

static void db_printf(dotbuf *b, const char *fmt, ...) SF_PRINTF(2, 3);
static void db_printf(dotbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    db_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Text inside a DOT quoted string: quotes and backslashes escaped (a backslash
 * would otherwise start a label escape such as \n), line breaks as \n. */
static void db_escaped(dotbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            char e[2] = {'\\', *s};
            db_add(b, e, 2);
        } else if (*s == '\n') {
            db_add(b, "\\n", 2);
        } else if (*s != '\r') {
            db_add(b, s, 1);
        }
    }
}

char *sf_graph_to_dot(const sf_graph *g, const char *const *labels, const char *const *colors,
                      sf_error *err) {
    dotbuf b = {0};
    char shape[128];
    db_puts(&b, "digraph \"");
    db_escaped(&b, sf_graph_name(g));
    db_puts(&b, "\" {\n  rankdir=TB;\n"
                "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
                "fontname=\"Helvetica\", fontsize=10];\n"
                "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    int n = sf_graph_num_ops(g);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        db_printf(&b, "  n%d [label=\"", i);
        db_escaped(&b, op->name);
        db_puts(&b, "\\n");
        db_puts(&b, sf_op_type_name(op->type));
        db_puts(&b, "\\n");
        for (int k = 0; k < op->n_outputs && k < DOT_MAX_SHAPES; k++) {
            if (k) db_puts(&b, ", ");
            db_puts(&b, sf_shape_str(&op->out_shapes[k], shape, sizeof shape));
        }
        if (op->n_outputs > DOT_MAX_SHAPES)
            db_printf(&b, " (+%d more)", op->n_outputs - DOT_MAX_SHAPES);
        if (labels && labels[i] && labels[i][0]) {
            db_puts(&b, "\\n");
            db_escaped(&b, labels[i]);
        }
        db_puts(&b, "\"");
        if (colors && colors[i] && colors[i][0]) {
            db_puts(&b, ", fillcolor=\"");
            db_escaped(&b, colors[i]);
            db_puts(&b, "\"");
        }
        db_puts(&b, "];\n");
    }
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) {
            sf_tensor_ref in = op->inputs[k];
            const sf_op *src = sf_graph_op(g, in.op);
            sf_shape_str(&src->out_shapes[in.out], shape, sizeof shape);
            if (in.out == 0)
                db_printf(&b, "  n%d -> n%d [label=\"%s\"];\n", in.op, i, shape);
            else
                db_printf(&b, "  n%d -> n%d [label=\"%d: %s\"];\n", in.op, i, in.out, shape);
        }
    }
    db_puts(&b, "}\n");
    if (b.oom) {
        free(b.s);
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return b.s;
}

sf_status sf_graph_write_dot(const sf_graph *g, const char *path, const char *const *labels,
                             const char *const *colors, sf_error *err) {
    char *text = sf_graph_to_dot(g, labels, colors, err);
    if (!text) return SF_ERR_NOMEM;
    sf_status st = sf_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}
