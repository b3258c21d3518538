/*
 * onnx_graph.c - an ONNX graph into a soapflow graph: the frame around the nodes.
 *
 * In order:
 *   1. values: every graph input, initializer and node output gets an ox_value,
 *      found by name through a hash table; an input naming nothing, an output
 *      produced twice or a graph output nobody makes is an error naming the node;
 *   2. order: the nodes sorted topologically (a heap on the node index, so a file
 *      already in order keeps its order, and with it the operator ids a zoo model
 *      built the same way has); a cycle is an error naming a node on it;
 *   3. liveness: nodes none of whose outputs lead to a graph output are skipped;
 *   4. what is unsupported: a value is dynamic when it depends on a graph input
 *      through anything but Shape; each live node needs a handler for dynamic
 *      inputs (it becomes operators) or for constant ones (it is folded). Every
 *      node type without the handler it needs is listed in one error, with its
 *      count and its first node, before anything is built;
 *   5. the nodes, in order, through their handlers (onnx_ops.c, onnx_fold.c,
 *      onnx_attn.c);
 *   6. the head: the first graph output ends in softmax with cross-entropy, as
 *      every zoo model does (a final Softmax or LogSoftmax becomes it; otherwise
 *      one named "loss" is added when the classes are the last dimension);
 *      declared shapes (graph outputs, value_info) are checked against the ones
 *      computed.
 *
 * The values, their views, messages and the operators added are the context's
 * (onnx_ctx.c); this file owns the order of things and what no node handler does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

/* ---- set-up: values, order, liveness --------------------------------------------- */

static int elem_is_index(int32_t et) {
    return et == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ||
           et == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
}

static sf_status graph_input(ox_ctx *c, const Onnx__ValueInfoProto *vi, int v) {
    ox_value *x = &c->vals[v];
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "graph input '%.100s' is not a tensor", x->name);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    int32_t et = tt->has_elem_type ? tt->elem_type : 0;
    if (et == ONNX__TENSOR_PROTO__DATA_TYPE__STRING ||
        et == ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64 ||
        et == ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "graph input '%.100s' holds element type %d", x->name,
                       et);
    if (!tt->shape)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "graph input '%.100s' has no shape; soapflow plans fixed shapes (export "
                       "with a sample input)",
                       x->name);
    if (tt->shape->n_dim > OX_MAX_RANK)
        return ox_fail(c, SF_ERR_UNSUPPORTED, "graph input '%.100s' has rank %zu (at most %d)",
                       x->name, tt->shape->n_dim, OX_MAX_RANK);
    x->kind = OX_INPUT;
    x->ndim = (int)tt->shape->n_dim;
    x->is_index = elem_is_index(et) || et == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    x->batch_dim = -1;
    const char *param = NULL;
    for (int k = 0; k < x->ndim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dm->dim_value > 0) {
            if (dm->dim_value > SF_MAX_EXTENT)
                return ox_fail(c, SF_ERR_RANGE, "graph input '%.100s': dimension %d is %lld",
                               x->name, k, (long long)dm->dim_value);
            x->d[k] = dm->dim_value;
            continue;
        }
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            return ox_fail(c, SF_ERR_PARSE, "graph input '%.100s': dimension %d is %lld", x->name,
                           k, (long long)dm->dim_value);
        /* symbolic (dim_param) or unknown: the batch */
        const char *pn =
            dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param
                ? dm->dim_param
                : "?";
        if (x->batch_dim >= 0)
            return ox_fail(c, SF_ERR_UNSUPPORTED,
                           "graph input '%.100s' has dynamic dimensions %d ('%.40s') and %d "
                           "('%.40s'); soapflow binds one, the batch (export with fixed sizes "
                           "for the others)",
                           x->name, x->batch_dim, param, k, pn);
        if (c->batch < 1)
            return ox_fail(c, SF_ERR_INVALID,
                           "graph input '%.100s' has a dynamic batch dimension ('%.40s'); give "
                           "the batch (--batch)",
                           x->name, pn);
        x->batch_dim = k;
        param = pn;
        x->d[k] = c->batch;
    }
    return ox_shape_numel(c, x->ndim, x->d, &x->numel);
}

/* Whether node n reads its inputs' shapes only (Shape, Size): such a reader
 * does not count as a use, so that a pattern that takes a value read by one
 * node still takes it when torch's export also reads its shape (Hugging Face's
 * x.size()[:-1] + (heads, head_dim) on a projection's output). */
static int reads_shape_only(const Onnx__NodeProto *n) {
    return n->op_type && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
}

/* Values for everything with a name; uses counted (shape readers aside). */
static sf_status make_values(ox_ctx *c) {
    const Onnx__GraphProto *gr = c->graph;
    /* value 0: the absent optional input "" */
    if (ox_new_value(c, "", -1) < 0) return SF_ERR_NOMEM;
    c->vals[0].kind = OX_ABSENT;
    for (size_t i = 0; i < gr->n_initializer; i++) {
        const Onnx__TensorProto *t = gr->initializer[i];
        if (!t->name || !t->name[0])
            return ox_fail(c, SF_ERR_PARSE, "initializer #%zu has no name", i);
        if (ox_find_value(c, t->name) >= 0)
            return ox_fail(c, SF_ERR_PARSE, "initializer '%.100s' is defined twice", t->name);
        int v = ox_new_value(c, t->name, -1);
        if (v < 0) return SF_ERR_NOMEM;
        /* without weights wanted, large float tensors are read only for their
         * shapes: their data is converted if something folds them */
        int64_t numel = 1;
        for (size_t k = 0; k < t->n_dims && numel <= 4096; k++)
            numel = t->dims[k] > 0 ? numel * (t->dims[k] < 4097 ? t->dims[k] : 4097) : 0;
        int lazy = !c->want_weights && t->has_data_type &&
                   t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && numel > 4096;
        sf_status st = ox_tensor_to_value_lazy(c, t, v, !lazy);
        if (st != SF_OK) return st;
        c->vals[v].from_initializer = 1;
    }
    for (size_t i = 0; i < gr->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gr->input[i];
        if (!vi->name || !vi->name[0])
            return ox_fail(c, SF_ERR_PARSE, "graph input #%zu has no name", i);
        int v = ox_find_value(c, vi->name);
        if (v >= 0 && c->vals[v].from_initializer) continue; /* an initializer listed as input */
        if (v >= 0)
            return ox_fail(c, SF_ERR_PARSE, "graph input '%.100s' is listed twice", vi->name);
        if ((v = ox_new_value(c, vi->name, -1)) < 0) return SF_ERR_NOMEM;
        sf_status st = graph_input(c, vi, v);
        if (st != SF_OK) return st;
    }
    for (int i = 0; i < c->n_nodes; i++) {
        const Onnx__NodeProto *n = gr->node[i];
        c->cur_node = i;
        if (!n->op_type || !n->op_type[0]) return ox_fail(c, SF_ERR_PARSE, "a node without a type");
        for (size_t k = 0; k < n->n_output; k++) {
            const char *s = n->output[k];
            if (!s || !s[0]) continue;
            int v = ox_find_value(c, s);
            if (v >= 0) {
                const ox_value *o = &c->vals[v];
                if (o->producer >= 0) {
                    char other[240];
                    return ox_fail(c, SF_ERR_PARSE, "output '%.100s' is also produced by %s", s,
                                   ox_node_str(c, o->producer, other, sizeof other));
                }
                return ox_fail(c, SF_ERR_PARSE,
                               "output '%.100s' has the name of a graph input or initializer", s);
            }
            if ((v = ox_new_value(c, s, i)) < 0) return SF_ERR_NOMEM;
        }
    }
    for (int i = 0; i < c->n_nodes; i++) {
        const Onnx__NodeProto *n = gr->node[i];
        c->cur_node = i;
        for (size_t k = 0; k < n->n_input; k++) {
            int v = ox_in(c, n, (int)k);
            if (v < 0)
                return ox_fail(c, SF_ERR_PARSE,
                               "input '%.100s' is not a graph input, an initializer nor the "
                               "output of any node",
                               n->input[k]);
            if (v > 0 && !reads_shape_only(n)) c->vals[v].uses++;
        }
    }
    c->cur_node = -1;
    for (size_t i = 0; i < gr->n_output; i++) {
        const char *s = gr->output[i]->name;
        int v = s && s[0] ? ox_find_value(c, s) : -1;
        if (v <= 0)
            return ox_fail(c, SF_ERR_PARSE, "graph output '%.100s' is not produced by any node",
                           s ? s : "");
        c->vals[v].uses++;
    }
    if (gr->n_output == 0) return ox_fail(c, SF_ERR_PARSE, "the graph has no outputs");
    return SF_OK;
}

/* A binary min-heap of node indices. */
static void heap_push(int *h, int *n, int x) {
    int i = (*n)++;
    h[i] = x;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n) {
    int top = h[0];
    h[0] = h[--(*n)];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m]) m = l;
        if (r < *n && h[r] < h[m]) m = r;
        if (m == i) break;
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* Topological order (smallest index first among the ready), or the cycle's error. */
static sf_status sort_nodes(ox_ctx *c) {
    int n = c->n_nodes;
    const Onnx__GraphProto *gr = c->graph;
    int *indeg = calloc((size_t)(n ? n : 1), sizeof *indeg);
    int *start = calloc((size_t)n + 1, sizeof *start);
    int *heap = malloc((size_t)(n ? n : 1) * sizeof *heap);
    int *adj = NULL;
    sf_status st = SF_OK;
    if (!indeg || !start || !heap) {
        st = ox_oom(c);
        goto done;
    }
    /* edges producer -> consumer, one per input slot, in CSR form */
    size_t n_edges = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < gr->node[i]->n_input; k++) {
            int v = ox_in(c, gr->node[i], (int)k);
            if (v > 0 && c->vals[v].producer >= 0) {
                start[c->vals[v].producer + 1]++;
                indeg[i]++;
                n_edges++;
            }
        }
    for (int i = 0; i < n; i++) start[i + 1] += start[i];
    adj = malloc((n_edges ? n_edges : 1) * sizeof *adj);
    int *fill = malloc((size_t)(n ? n : 1) * sizeof *fill);
    if (!adj || !fill) {
        free(fill);
        st = ox_oom(c);
        goto done;
    }
    for (int i = 0; i < n; i++) fill[i] = start[i];
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < gr->node[i]->n_input; k++) {
            int v = ox_in(c, gr->node[i], (int)k);
            if (v > 0 && c->vals[v].producer >= 0) adj[fill[c->vals[v].producer]++] = i;
        }
    free(fill);
    int hn = 0, done_n = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) heap_push(heap, &hn, i);
    while (hn > 0) {
        int u = heap_pop(heap, &hn);
        c->order[done_n++] = u;
        for (int e = start[u]; e < start[u + 1]; e++)
            if (--indeg[adj[e]] == 0) heap_push(heap, &hn, adj[e]);
    }
    if (done_n < n) {
        /* a node on a cycle: walk back from any node left through inputs that
         * are left too until a node repeats */
        int u = -1;
        for (int i = 0; i < n && u < 0; i++)
            if (indeg[i] > 0) u = i;
        uint8_t *seen = calloc((size_t)n, 1);
        for (int steps = 0; seen && u >= 0 && !seen[u] && steps <= n; steps++) {
            seen[u] = 1;
            int next = -1;
            for (size_t k = 0; k < gr->node[u]->n_input && next < 0; k++) {
                int v = ox_in(c, gr->node[u], (int)k);
                if (v > 0 && c->vals[v].producer >= 0 && indeg[c->vals[v].producer] > 0)
                    next = c->vals[v].producer;
            }
            if (next < 0) break;
            u = next;
        }
        free(seen);
        st = ox_fail_node(c, u, SF_ERR_PARSE,
                          "the graph has a cycle through this node (%d of %d nodes cannot be "
                          "ordered)",
                          n - done_n, n);
    }
done:
    free(indeg);
    free(start);
    free(heap);
    free(adj);
    return st;
}

static void mark_live(ox_ctx *c) {
    uint8_t *need = calloc((size_t)c->n_vals, 1);
    if (!need) { /* everything live: the import only does more work */
        memset(c->live, 1, (size_t)c->n_nodes);
        return;
    }
    const Onnx__GraphProto *gr = c->graph;
    for (size_t i = 0; i < gr->n_output; i++) need[ox_find_value(c, gr->output[i]->name)] = 1;
    for (int j = c->n_nodes - 1; j >= 0; j--) {
        int i = c->order[j];
        const Onnx__NodeProto *n = gr->node[i];
        int live = 0;
        for (size_t k = 0; k < n->n_output && !live; k++) {
            int v = ox_out(c, n, (int)k);
            live = v > 0 && need[v];
        }
        c->live[i] = (uint8_t)live;
        if (!live) continue;
        for (size_t k = 0; k < n->n_input; k++) {
            int v = ox_in(c, n, (int)k);
            if (v > 0) need[v] = 1;
        }
    }
    free(need);
}

/* ---- what is supported ------------------------------------------------------------ */

static int default_domain(const char *d) { return !d || !d[0] || strcmp(d, "ai.onnx") == 0; }

typedef struct unsup {
    char key[96];
    int count, first;
} unsup;

/* Every live node has the handler its inputs need; one error lists those without. */
static sf_status check_supported(ox_ctx *c) {
    const Onnx__GraphProto *gr = c->graph;
    uint8_t *dyn = calloc((size_t)c->n_vals, 1);
    unsup *list = calloc((size_t)(c->n_nodes ? c->n_nodes : 1), sizeof *list);
    if (!dyn || !list) {
        free(dyn);
        free(list);
        return ox_oom(c);
    }
    for (int v = 0; v < c->n_vals; v++) dyn[v] = c->vals[v].kind == OX_INPUT;
    int n_list = 0, total = 0;
    for (int j = 0; j < c->n_nodes; j++) {
        int i = c->order[j];
        const Onnx__NodeProto *n = gr->node[i];
        if (!c->live[i]) continue;
        int any_dyn = 0;
        for (size_t k = 0; k < n->n_input; k++) {
            int v = ox_in(c, n, (int)k);
            if (v > 0 && dyn[v]) any_dyn = 1;
        }
        const ox_op_entry *e = default_domain(n->domain) ? ox_op_find(n->op_type) : NULL;
        int shape_like = e && (strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0);
        for (size_t k = 0; k < n->n_output; k++) {
            int v = ox_out(c, n, (int)k);
            if (v > 0) dyn[v] = (uint8_t)(any_dyn && !shape_like);
        }
        int ok = e && (shape_like ? 1 : any_dyn ? (e->can & OX_CAN_ACT) : (e->can & OX_CAN_FOLD));
        int step = ok && any_dyn && (e->can & OX_CAN_STEP) && !ox_pat_may_take(c, n);
        /* a Where with a constant condition and one constant value is a masked_fill */
        if (step && !strcmp(n->op_type, "Where") && n->n_input == 3) {
            int cv = ox_in(c, n, 0), av = ox_in(c, n, 1), bv = ox_in(c, n, 2);
            int cd = cv > 0 && dyn[cv], ad = av > 0 && dyn[av], bd = bv > 0 && dyn[bv];
            if (!cd && ad != bd) step = 0;
        }
        if (ok && !step) continue;
        char key[96];
        if (step && !strcmp(n->op_type, "Where"))
            snprintf(key, sizeof key,
                     "Where of activations outside an attention's causal mask and masked_fill");
        else if (step)
            snprintf(key, sizeof key, "%.40s of activations outside layer norm and GELU",
                     n->op_type);
        else if (!default_domain(n->domain))
            snprintf(key, sizeof key, "%.40s.%.50s", n->domain, n->op_type);
        else if (e && !any_dyn)
            snprintf(key, sizeof key, "%.60s on constants", n->op_type);
        else if (e)
            snprintf(key, sizeof key, "%.60s on activations", n->op_type);
        else
            snprintf(key, sizeof key, "%.80s", n->op_type);
        int f = 0;
        while (f < n_list && strcmp(list[f].key, key) != 0) f++;
        if (f == n_list) {
            snprintf(list[f].key, sizeof list[f].key, "%s", key);
            list[f].first = i;
            n_list++;
        }
        list[f].count++;
        total++;
    }
    sf_status st = SF_OK;
    if (n_list) {
        char msg[SF_ERRMSG_MAX];
        size_t off =
            (size_t)snprintf(msg, sizeof msg, "%d unsupported operator%s (%d type%s): ", total,
                             total > 1 ? "s" : "", n_list, n_list > 1 ? "s" : "");
        int shown = 0;
        for (int f = 0; f < n_list; f++) {
            const Onnx__NodeProto *n = gr->node[list[f].first];
            char item[220];
            if (n->name && n->name[0])
                snprintf(item, sizeof item, "%s%s x%d (first: node #%d '%.60s')", f ? ", " : "",
                         list[f].key, list[f].count, list[f].first, n->name);
            else
                snprintf(item, sizeof item, "%s%s x%d (first: node #%d)", f ? ", " : "",
                         list[f].key, list[f].count, list[f].first);
            if (off + strlen(item) + 24 >= sizeof msg) break;
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s", item);
            shown++;
        }
        if (shown < n_list)
            snprintf(msg + off, sizeof msg - off, ", and %d more type%s", n_list - shown,
                     n_list - shown > 1 ? "s" : "");
        ox_one_line(msg);
        st = sf_error_set(c->err, SF_ERR_UNSUPPORTED, "%s: %s", c->origin, msg);
    }
    free(dyn);
    free(list);
    return st;
}

/* ---- the head, and declared shapes ------------------------------------------------- */

static sf_status add_loss(ox_ctx *c) {
    const Onnx__GraphProto *gr = c->graph;
    int v = ox_find_value(c, gr->output[0]->name);
    ox_value *x = &c->vals[v];
    c->cur_node = x->producer;
    if (c->loss_op >= 0) return SF_OK;
    if (x->kind == OX_CONST || x->kind == OX_WEIGHT)
        return ox_fail(c, SF_ERR_UNSUPPORTED,
                       "graph output '%.100s' does not depend on any graph input: nothing to plan",
                       x->name);
    sf_status st = ox_act(c, v);
    if (st != SF_OK) return st;
    x = &c->vals[v];
    const sf_shape *s = ox_shape_of(c, x->ref);
    /* softmax_ce normalizes the last dimension: it must be the classes */
    if (x->ndim < 2 || s->ndim < 2 || x->map[x->ndim - 1] != s->ndim - 1 || x->is_index)
        return SF_OK;
    sf_op_params p;
    sf_op_params_default(SF_OP_SOFTMAX_CE, &p);
    char name[64];
    ox_unique_name(c, "loss", name, sizeof name);
    int id = ox_add_named(c, SF_OP_SOFTMAX_CE, name, &p, &x->ref, 1);
    return id < 0 ? (sf_status)id : SF_OK;
}

/* A declared shape (of a graph output or value_info) against the computed one. */
static sf_status check_declared(ox_ctx *c, const Onnx__ValueInfoProto *vi) {
    int v = vi->name ? ox_find_value(c, vi->name) : -1;
    if (v <= 0) return SF_OK;
    const ox_value *x = &c->vals[v];
    if (x->kind != OX_ACT && x->kind != OX_PEND && x->kind != OX_CONST) return SF_OK;
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->shape)
        return SF_OK;
    const Onnx__TensorShapeProto *sh = t->tensor_type->shape;
    int bad = (int)sh->n_dim != x->ndim;
    for (int k = 0; !bad && k < x->ndim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dm->dim_value > 0 && dm->dim_value != x->d[k])
            bad = 1;
    }
    if (!bad) return SF_OK;
    char a[128] = "", b[128];
    size_t off = 0;
    for (size_t k = 0; k < sh->n_dim && off < sizeof a; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            off += (size_t)snprintf(a + off, sizeof a - off, "%s%lld", k ? "x" : "",
                                    (long long)dm->dim_value);
        else
            off += (size_t)snprintf(a + off, sizeof a - off, "%s?", k ? "x" : "");
    }
    if (!sh->n_dim) snprintf(a, sizeof a, "scalar");
    return ox_fail_node(c, x->producer, SF_ERR_SHAPE,
                        "'%.100s' is declared %s but the model computes %s", x->name, a,
                        ox_dims_str(x->ndim, x->d, b, sizeof b));
}

/* ---- the whole ------------------------------------------------------------------------ */

static sf_status import_node(ox_ctx *c, int i) {
    const Onnx__NodeProto *n = c->graph->node[i];
    c->cur_node = i;
    const ox_op_entry *e = ox_op_find(n->op_type);
    /* the inputs ONNX requires, before any handler (or pattern) reads one */
    if (e && n->n_input < (size_t)e->min_in)
        return ox_fail(c, SF_ERR_PARSE, "%zu input%s, %s takes at least %d", n->n_input,
                       n->n_input == 1 ? "" : "s", e->op_type, e->min_in);
    for (int k = 0; e && k < e->min_in; k++)
        if (!n->input[k] || !n->input[k][0])
            return ox_fail(c, SF_ERR_PARSE, "input %d is required, and its name is empty", k);
    int any_act = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        int v = ox_in(c, n, (int)k);
        ox_kind kd = v > 0 ? c->vals[v].kind : OX_ABSENT;
        if (kd == OX_UNSET)
            return ox_fail(c, SF_ERR_INTERNAL, "input '%.100s' was not computed", n->input[k]);
        if (kd == OX_ACT || kd == OX_PEND || kd == OX_INPUT || kd == OX_WEIGHT || kd == OX_NONE)
            any_act = 1;
    }
    /* Shape and Size read only shapes, known for everything */
    if (!any_act || strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0) {
        if (!e || !e->fold)
            return ox_fail(c, SF_ERR_UNSUPPORTED, "cannot be evaluated on constants");
        return e->fold(c, n);
    }
    if (!e || !e->act) return ox_fail(c, SF_ERR_UNSUPPORTED, "cannot take activations");
    return e->act(c, n);
}

/* How each kind of pending value becomes an activation (ox_act): the patterns'
 * own functions, handed to the context here so that it needs none of them. */
static const ox_pend_fn pend_force[] = {
    [OX_PEND_LINEAR] = ox_linear_force,
    [OX_PEND_ATTN] = ox_attn_force,
    [OX_PEND_PAT] = ox_pat_force,
};
_Static_assert(sizeof pend_force / sizeof pend_force[0] == OX_PEND_COUNT,
               "a way out of every kind of pending value");

sf_status ox_import_graph(ox_ctx *c) {
    c->pend_force = pend_force;
    c->n_nodes = (int)c->graph->n_node;
    if (c->graph->n_node > (size_t)(1 << 24))
        return ox_fail(c, SF_ERR_RANGE, "the graph has %zu nodes", c->graph->n_node);
    c->order = malloc((size_t)(c->n_nodes ? c->n_nodes : 1) * sizeof *c->order);
    c->live = calloc((size_t)(c->n_nodes ? c->n_nodes : 1), 1);
    if (!c->order || !c->live) return ox_oom(c);
    c->cur_node = -1;
    c->loss_op = -1;
    sf_status st = make_values(c);
    if (st == SF_OK) st = sort_nodes(c);
    if (st != SF_OK) return st;
    c->attn_val = calloc((size_t)c->n_vals, sizeof *c->attn_val);
    c->pat_stage = calloc((size_t)c->n_vals, sizeof *c->pat_stage);
    if (!c->attn_val || !c->pat_stage) return ox_oom(c);
    mark_live(c);
    if ((st = check_supported(c)) != SF_OK) return st;
    /* named after the file: exporters name the graph after themselves
     * ("torch_jit", "main_graph") */
    char stem[128], gname[128];
    const char *base = strrchr(c->origin, '/');
    base = base ? base + 1 : c->origin;
    size_t bl = strlen(base);
    if (bl > 5 && strcmp(base + bl - 5, ".onnx") == 0) bl -= 5;
    if (bl >= sizeof stem) bl = sizeof stem - 1;
    memcpy(stem, base, bl);
    stem[bl] = '\0';
    ox_utf8_copy(gname, sizeof gname, stem); /* a file name is any bytes; JSON is UTF-8 */
    if (!gname[0]) snprintf(gname, sizeof gname, "model");
    c->g = sf_graph_new(gname);
    if (!c->g) return ox_oom(c);
    for (int j = 0; j < c->n_nodes && st == SF_OK; j++)
        if (c->live[c->order[j]]) st = import_node(c, c->order[j]);
    if (st != SF_OK) return st;
    /* graph outputs: whatever is pending is made operators */
    for (size_t k = 0; k < c->graph->n_output && st == SF_OK; k++) {
        int v = ox_find_value(c, c->graph->output[k]->name);
        c->cur_node = c->vals[v].producer;
        if (c->vals[v].kind == OX_PEND) st = ox_act(c, v);
    }
    if (st == SF_OK) st = add_loss(c);
    c->cur_node = -1;
    for (size_t k = 0; k < c->graph->n_output && st == SF_OK; k++)
        st = check_declared(c, c->graph->output[k]);
    for (size_t k = 0; k < c->graph->n_value_info && st == SF_OK; k++)
        st = check_declared(c, c->graph->value_info[k]);
    if (st != SF_OK) return st;
    int n_in = 0;
    for (int i = 0; i < sf_graph_num_ops(c->g); i++)
        n_in += sf_graph_op(c->g, i)->type == SF_OP_INPUT;
    if (n_in == 0)
        return sf_error_set(c->err, SF_ERR_UNSUPPORTED,
                            "%s: no graph output depends on a graph input: nothing to plan",
                            c->origin);
    /* every parameter of every operator was given a value (or marked missing) */
    sf_graph_stats gs;
    sf_graph_stats_compute(c->g, &gs);
    int64_t owned = 0;
    for (int i = 0; i < sf_graph_num_ops(c->g); i++) {
        const sf_op *op = sf_graph_op(c->g, i);
        if (op->weight_owner < 0) owned += op->n_params;
    }
    if (owned != c->filled)
        return sf_error_set(c->err, SF_ERR_INTERNAL,
                            "%s: %lld parameters were set of %lld (a bug in the ONNX importer)",
                            c->origin, (long long)c->filled, (long long)owned);
    return SF_OK;
}
