/*
 * templates.c - layer templates: the operators of identical layers (a
 * transformer's blocks), found so that the MCMC search can give one layer's
 * config to all of them (docs/search.md, "Layer templates").
 *
 * Two operators are one template's members when they are the same operator of
 * two layers: their names are equal once the first run of digits (the layer
 * index: "h3.mlp.fc1" is "h#.mlp.fc1" of layer 3) is set aside, and they have
 * the same type, parameters, output shapes, parallel space, weight count and
 * inputs at the same offsets in the graph (input k read from the operator
 * `id - offset` back, the same output of it). The names say which operators
 * play the same part (a model builder's loop names them so, as ONNX exports
 * name "/h.3/attn/..."); the structure makes sure they are interchangeable.
 * Why not structure alone: a hash of each operator with its inputs' relative
 * positions also matches the two layer norms of one block or the two
 * residual adds, which are not the same operator of two layers; why not names
 * alone: a name says nothing about shapes (a model whose widths change from
 * block to block keeps the names).
 *
 * Done by sorting a 64-bit hash of each operator's key, then comparing the
 * keys of equal hashes exactly: O(n log n) for a graph of n operators, once
 * per search.
 */
#include "soapflow/search.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The layer index of a name (its first run of digits, at most 9 of them) and
 * where that run starts and ends; -1 when the name holds no digit. */
static long layer_index(const char *name, size_t *at, size_t *end) {
    size_t i = 0;
    while (name[i] && !isdigit((unsigned char)name[i])) i++;
    if (!name[i]) return -1;
    long v = 0;
    size_t j = i;
    while (isdigit((unsigned char)name[j])) {
        if (j - i < 9) v = v * 10 + (name[j] - '0');
        j++;
    }
    if (j - i > 9) return -1;
    *at = i;
    *end = j;
    return v;
}

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = mix(h, b[i]);
    return h;
}

static int shape_equal(const sf_shape *a, const sf_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

static uint64_t shape_hash(uint64_t h, const sf_shape *s) {
    h = mix(h, (uint64_t)s->ndim);
    for (int i = 0; i < s->ndim; i++) h = mix(h, (uint64_t)s->d[i]);
    return h;
}

/* The key's hash: the name without its layer index, and the structure. */
static uint64_t key_hash(const sf_op *op, size_t at, size_t end) {
    uint64_t h = 0x51ab7e3c1d2f4a97ULL;
    h = mix_bytes(h, op->name, at);
    h = mix(h, '#');
    h = mix_bytes(h, op->name + end, strlen(op->name + end));
    h = mix(h, (uint64_t)op->type);
    h = mix_bytes(h, &op->params, sizeof op->params);
    h = mix(h, (uint64_t)op->n_params);
    h = mix(h, (uint64_t)op->n_outputs);
    for (int k = 0; k < op->n_outputs; k++) h = shape_hash(h, &op->out_shapes[k]);
    h = shape_hash(h, &op->space);
    h = mix(h, (uint64_t)op->n_inputs);
    for (int k = 0; k < op->n_inputs; k++) {
        h = mix(h, (uint64_t)(op->id - op->inputs[k].op));
        h = mix(h, (uint64_t)op->inputs[k].out);
    }
    return h;
}

/* The keys of a and b equal exactly (name patterns and structure). */
static int key_equal(const sf_op *a, size_t aat, size_t aend, const sf_op *b, size_t bat,
                     size_t bend) {
    if (aat != bat || strncmp(a->name, b->name, aat) != 0 ||
        strcmp(a->name + aend, b->name + bend) != 0)
        return 0;
    if (a->type != b->type || memcmp(&a->params, &b->params, sizeof a->params) != 0 ||
        a->n_params != b->n_params || a->n_outputs != b->n_outputs || a->n_inputs != b->n_inputs ||
        !shape_equal(&a->space, &b->space))
        return 0;
    for (int i = 0; i < a->space.ndim; i++)
        if (a->kinds[i] != b->kinds[i]) return 0;
    for (int k = 0; k < a->n_outputs; k++)
        if (!shape_equal(&a->out_shapes[k], &b->out_shapes[k])) return 0;
    for (int k = 0; k < a->n_inputs; k++)
        if (a->id - a->inputs[k].op != b->id - b->inputs[k].op ||
            a->inputs[k].out != b->inputs[k].out)
            return 0;
    return 1;
}

typedef struct tp_key {
    uint64_t h;
    int id;
} tp_key;

static int key_cmp(const void *pa, const void *pb) {
    const tp_key *a = pa, *b = pb;
    if (a->h != b->h) return a->h < b->h ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int int_cmp(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

void sf_templates_free(sf_templates *t) {
    if (!t) return;
    free(t->cls);
    free(t->layer);
    free(t->member_start);
    free(t->members);
    free(t->layer_start);
    memset(t, 0, sizeof *t);
}

sf_status sf_templates_find(const sf_graph *g, sf_templates *t, sf_error *err) {
    memset(t, 0, sizeof *t);
    if (!g) return sf_error_set(err, SF_ERR_INVALID, "templates: no graph");
    int n = sf_graph_num_ops(g);
    size_t nn = (size_t)(n > 0 ? n : 1);
    tp_key *keys = malloc(nn * sizeof *keys);
    size_t *at = malloc(nn * sizeof *at), *end = malloc(nn * sizeof *end);
    t->cls = malloc(nn * sizeof *t->cls);
    t->layer = malloc(nn * sizeof *t->layer);
    t->members = malloc(nn * sizeof *t->members);
    t->member_start = malloc((nn + 1) * sizeof *t->member_start);
    t->layer_start = malloc(nn * sizeof *t->layer_start);
    int *rep = malloc(nn * sizeof *rep); /* a class's first member, by class */
    int *size = calloc(nn, sizeof *size);
    if (!keys || !at || !end || !t->cls || !t->layer || !t->members || !t->member_start ||
        !t->layer_start || !rep || !size) {
        free(keys);
        free(at);
        free(end);
        free(rep);
        free(size);
        sf_templates_free(t);
        return sf_error_set(err, SF_ERR_NOMEM, "templates: out of memory");
    }
    t->n_ops = n;
    int nk = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        t->cls[i] = -1;
        long li = op->type == SF_OP_INPUT ? -1 : layer_index(op->name, &at[i], &end[i]);
        t->layer[i] = (int)li;
        if (li >= 0) keys[nk++] = (tp_key){key_hash(op, at[i], end[i]), i};
    }
    qsort(keys, (size_t)nk, sizeof *keys, key_cmp);
    /* classes by exact keys inside each run of equal hashes; a run with
     * several classes (a collision) compares each member with the run's
     * classes so far */
    int n_cls = 0;
    for (int a = 0; a < nk;) {
        int b = a;
        while (b < nk && keys[b].h == keys[a].h) b++;
        int first_cls = n_cls;
        for (int k = a; k < b; k++) {
            int i = keys[k].id, c = -1;
            const sf_op *op = sf_graph_op(g, i);
            for (int q = first_cls; q < n_cls && c < 0; q++) {
                int r = rep[q];
                if (t->layer[r] != t->layer[i] &&
                    key_equal(sf_graph_op(g, r), at[r], end[r], op, at[i], end[i]))
                    c = q;
            }
            if (c < 0) {
                c = n_cls++;
                rep[c] = i;
            }
            t->cls[i] = c;
            size[c]++;
        }
        a = b;
    }
    /* drop the classes of one member; number the rest by their first member */
    int *renum = rep; /* reused: class -> new class, in order of first members */
    for (int c = 0; c < n_cls; c++) renum[c] = -1;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int c = t->cls[i];
        if (c < 0) continue;
        if (size[c] < 2) {
            t->cls[i] = -1;
            continue;
        }
        if (renum[c] < 0) renum[c] = kept++;
        t->cls[i] = renum[c];
    }
    t->n_classes = kept;
    for (int c = 0; c <= kept; c++) t->member_start[c] = 0;
    for (int i = 0; i < n; i++)
        if (t->cls[i] >= 0) t->member_start[t->cls[i] + 1]++;
    for (int c = 0; c < kept; c++) t->member_start[c + 1] += t->member_start[c];
    memset(size, 0, nn * sizeof *size);
    for (int i = 0; i < n; i++) {
        int c = t->cls[i];
        if (c >= 0) t->members[t->member_start[c] + size[c]++] = i;
        if (c < 0) t->layer[i] = -1;
    }
    /* layer starts: each layer index's first member operator (sorted by layer,
     * then id: the first of each run) */
    nk = 0;
    for (int i = 0; i < n; i++)
        if (t->cls[i] >= 0) keys[nk++] = (tp_key){(uint64_t)t->layer[i], i};
    qsort(keys, (size_t)nk, sizeof *keys, key_cmp);
    int nl = 0;
    for (int k = 0; k < nk; k++)
        if (k == 0 || keys[k].h != keys[k - 1].h) t->layer_start[nl++] = keys[k].id;
    qsort(t->layer_start, (size_t)nl, sizeof *t->layer_start, int_cmp);
    t->n_layers = nl;
    free(keys);
    free(at);
    free(end);
    free(rep);
    free(size);
    return SF_OK;
}
