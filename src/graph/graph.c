/*
 * graph.c - the operator graph: building it, checking it, summing it up.
 *
 * Operators are added in topological order and their output shapes are inferred
 * on the spot, so a wrong model fails at the first wrong operator, by name.
 * All graph data lives in one arena freed in one call; the op table is an array
 * of pointers (grown by doubling), so sf_op pointers stay valid for the life of
 * the graph. Names are indexed by a hash table (open addressing, linear
 * probing): every added operator checks that its name is new and every model
 * reader looks its inputs up by name, so a linear search made reading a model
 * file quadratic in its operators (50,000 took 13 s).
 *
 * graph/ and ops/ are one layer behind one public header, graph.h, with the
 * operator classes (ops/op_impl.h) as its inside. Within it the calls go one
 * way: this file looks classes up in the registry to infer an operator's
 * shapes, weights and parallel space; the registry and the operator files
 * read sf_op records but never call back here (tests/check_cycles.py). The
 * alternative, every class callback wrapped in a public look-up of graph.h,
 * would add half a dozen functions (inputs, attributes, infer, weights,
 * space) to the public header for one caller.
 */
#include "soapflow/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_impl.h"

struct sf_graph {
    sf_arena *arena;
    char *name;
    sf_op **ops;
    int n_ops, cap_ops;
    int *slots;          /* the name index: an op id, or -1 for a free slot */
    size_t n_slots;      /* a power of two above twice n_ops, or 0 before the first op */
    unsigned char *tied; /* [cap_tied] 1: the op shares weights across types (NULL: none do) */
    int cap_tied;
    int n_ties; /* operators sharing an owner's weights across types */
    /* who reads each operator's outputs, in id order: a list per producer of
     * its uses (consumer, input), so that finding an output's consumers costs
     * its uses, not the graph (a pipeline's micro-batch graph has 10^5 ops) */
    int32_t *use_head, *use_tail; /* [cap_ops] first and last use of op, -1 none */
    int32_t *use_op, *use_next;   /* [cap_uses] the consumer; the next use of the producer */
    int32_t *use_k;               /* [cap_uses] the consumer's input */
    int64_t n_uses, cap_uses;
};

sf_graph *sf_graph_new(const char *name) {
    sf_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = sf_arena_new(0);
    if (!g->arena) {
        free(g);
        return NULL;
    }
    g->name = sf_arena_strdup(g->arena, name ? name : "graph");
    if (!g->name) {
        sf_graph_free(g);
        return NULL;
    }
    return g;
}

void sf_graph_free(sf_graph *g) {
    if (!g) return;
    free(g->ops);
    free(g->slots);
    free(g->tied);
    free(g->use_head);
    free(g->use_tail);
    free(g->use_op);
    free(g->use_next);
    free(g->use_k);
    sf_arena_free(g->arena);
    free(g);
}

const char *sf_graph_name(const sf_graph *g) { return g->name; }
int sf_graph_num_ops(const sf_graph *g) { return g->n_ops; }

const sf_op *sf_graph_op(const sf_graph *g, int id) {
    if (id < 0 || id >= g->n_ops) return NULL;
    return g->ops[id];
}

/* FNV-1a, 64 bits. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name: the one holding it, or the free one where it would go. */
static size_t name_slot(const sf_graph *g, const char *name) {
    size_t mask = g->n_slots - 1, i = (size_t)name_hash(name) & mask;
    while (g->slots[i] >= 0 && strcmp(g->ops[g->slots[i]]->name, name) != 0) i = (i + 1) & mask;
    return i;
}

/* Room in the index for one more name: -1 when out of memory. */
static int reserve_name(sf_graph *g) {
    if ((size_t)g->n_ops + 1 < g->n_slots / 2) return 0;
    size_t n = g->n_slots ? 2 * g->n_slots : 128;
    int *slots = malloc(n * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < n; i++) slots[i] = -1;
    free(g->slots);
    g->slots = slots;
    g->n_slots = n;
    for (int id = 0; id < g->n_ops; id++) g->slots[name_slot(g, g->ops[id]->name)] = id;
    return 0;
}

int sf_graph_find(const sf_graph *g, const char *name) {
    if (!g->n_slots || !name) return -1;
    return g->slots[name_slot(g, name)];
}

int sf_graph_num_ties(const sf_graph *g) { return g->n_ties; }

int sf_graph_op_tied(const sf_graph *g, int id) {
    return g->tied && id >= 0 && id < g->n_ops && id < g->cap_tied ? g->tied[id] : 0;
}

/* Mark op id as tied (the array is made on the first tie, for every op so far). */
/* Room for an operator of n_inputs uses in the use lists: 0, or -1. */
static int reserve_uses(sf_graph *g, int n_inputs) {
    if (g->n_uses + n_inputs > g->cap_uses) {
        int64_t cap = 2 * (g->n_uses + n_inputs) + 64;
        int32_t *o = realloc(g->use_op, (size_t)cap * sizeof *o);
        if (o) g->use_op = o;
        int32_t *nx = realloc(g->use_next, (size_t)cap * sizeof *nx);
        if (nx) g->use_next = nx;
        int32_t *k = realloc(g->use_k, (size_t)cap * sizeof *k);
        if (k) g->use_k = k;
        if (!o || !nx || !k) return -1;
        g->cap_uses = cap;
    }
    return 0;
}

/* Op id's inputs appended to their producers' use lists (room reserved). */
static void add_uses(sf_graph *g, const sf_op *op) {
    g->use_head[op->id] = g->use_tail[op->id] = -1;
    for (int k = 0; k < op->n_inputs; k++) {
        int p = op->inputs[k].op;
        int32_t e = (int32_t)g->n_uses++;
        g->use_op[e] = op->id;
        g->use_k[e] = k;
        g->use_next[e] = -1;
        if (g->use_tail[p] < 0) g->use_head[p] = e;
        else g->use_next[g->use_tail[p]] = e;
        g->use_tail[p] = e;
    }
}

static int mark_tied(sf_graph *g, int id) {
    if (id >= g->cap_tied) {
        int cap = g->cap_ops > id ? g->cap_ops : id + 1;
        unsigned char *t = realloc(g->tied, (size_t)cap);
        if (!t) return -1;
        memset(t + g->cap_tied, 0, (size_t)(cap - g->cap_tied));
        g->tied = t;
        g->cap_tied = cap;
    }
    g->tied[id] = 1;
    return 0;
}

static void default_space(const sf_op *op, sf_shape *space, sf_dim_kind *kinds) {
    *space = op->out_shapes[0];
    for (int i = 0; i < space->ndim; i++) kinds[i] = i == 0 ? SF_DIM_SAMPLE : SF_DIM_NONE;
}

/* The first integer attribute of p (by the class's attribute table) outside
 * [-SF_MAX_EXTENT, SF_MAX_EXTENT], with its value in *value; NULL when none.
 * Checked before shape inference, so that no operator's arithmetic on its
 * attributes can overflow. */
static const sf_attr_desc *attr_out_of_range(const sf_op_class *c, const sf_op_params *p,
                                             int64_t *value) {
    for (int i = 0; i < c->n_attrs; i++) {
        const sf_attr_desc *a = &c->attrs[i];
        if (a->type != SF_ATTR_INT && a->type != SF_ATTR_INTS) continue;
        const int64_t *v = (const int64_t *)(const void *)((const char *)p + a->offset);
        int n = 1;
        if (a->type == SF_ATTR_INTS) {
            n = a->count;
            if (n == 0) {
                memcpy(&n, (const char *)p + a->count_offset, sizeof n);
                n = n < 0 ? 0 : n > a->max_count ? a->max_count : n;
            }
        }
        for (int k = 0; k < n; k++) {
            if (v[k] < -SF_MAX_EXTENT || v[k] > SF_MAX_EXTENT) {
                *value = v[k];
                return a;
            }
        }
    }
    return NULL;
}

/* 1 when every dimension of s lies in [0, SF_MAX_EXTENT] and its element
 * count is at most SF_MAX_NUMEL. */
static int shape_in_limits(const sf_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->d[i] < 0 || s->d[i] > SF_MAX_EXTENT) return 0;
        if (sf_mul_overflow_i64(n, s->d[i], &n) != 0 || n > SF_MAX_NUMEL) return 0;
    }
    return 1;
}

int64_t sf_op_fixed_count(sf_op_type t, const sf_op_params *p) {
    const sf_op_class *c = sf_op_class_get(t);
    return c && c->fixed_count && p ? c->fixed_count(p) : 0;
}

int sf_graph_add_op(sf_graph *g, sf_op_type type, const char *name, const sf_op_params *p,
                    const sf_tensor_ref *inputs, int n_inputs, sf_error *err) {
    return sf_graph_add_op_fixed(g, type, name, p, inputs, n_inputs, NULL, 0, err);
}

/* The fixed tensor of an operator of class c: n values as its attributes need,
 * finite, and what the class checks; copied into the arena. */
static sf_status take_fixed(sf_graph *g, const sf_op_class *c, const char *name,
                            const sf_op_params *p, const float *fixed, int64_t n,
                            const float **out, sf_error *err) {
    *out = NULL;
    int64_t want = c->fixed_count ? c->fixed_count(p) : 0;
    if (want < 0 || want > SF_MAX_NUMEL)
        return sf_error_set(err, SF_ERR_RANGE,
                            "operator '%s' (%s): its fixed tensor exceeds the limit of %lld "
                            "elements",
                            name, c->name, (long long)SF_MAX_NUMEL);
    if (n != want || (n > 0 && !fixed)) {
        if (want == 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s' (%s): holds no fixed tensor, %lld values given",
                                name, c->name, (long long)n);
        return sf_error_set(err, SF_ERR_INVALID,
                            "operator '%s' (%s): needs its fixed tensor of %lld values, %lld "
                            "given",
                            name, c->name, (long long)want, (long long)(fixed ? n : 0));
    }
    if (n == 0) return SF_OK;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(fixed[i]))
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s' (%s): value %lld of its fixed tensor is not a "
                                "finite number",
                                name, c->name, (long long)i);
    if (c->fixed_check) {
        sf_error local = {0};
        sf_status st = c->fixed_check(fixed, n, &local);
        if (st != SF_OK)
            return sf_error_set(err, st, "operator '%s' (%s): %s", name, c->name, local.msg);
    }
    float *copy = sf_arena_alloc(g->arena, (size_t)n * sizeof *copy);
    if (!copy) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    memcpy(copy, fixed, (size_t)n * sizeof *copy);
    *out = copy;
    return SF_OK;
}

int sf_graph_add_op_fixed(sf_graph *g, sf_op_type type, const char *name, const sf_op_params *p,
                          const sf_tensor_ref *inputs, int n_inputs, const float *fixed,
                          int64_t n_fixed, sf_error *err) {
    const sf_op_class *c = sf_op_class_get(type);
    if (!c) return sf_error_set(err, SF_ERR_NOTFOUND, "unknown operator type %d", (int)type);
    sf_op_params defaults;
    if (!p) {
        sf_op_params_default(type, &defaults);
        p = &defaults;
    }
    if (!name || !*name)
        return sf_error_set(err, SF_ERR_INVALID, "%s operator without a name", c->name);
    if (sf_graph_find(g, name) >= 0)
        return sf_error_set(err, SF_ERR_INVALID, "operator '%s': name already used", name);
    if (n_inputs < c->min_inputs || (c->max_inputs >= 0 && n_inputs > c->max_inputs)) {
        if (c->max_inputs < 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s' (%s): needs at least %d inputs, got %d", name,
                                c->name, c->min_inputs, n_inputs);
        return sf_error_set(err, SF_ERR_INVALID, "operator '%s' (%s): needs %d..%d inputs, got %d",
                            name, c->name, c->min_inputs, c->max_inputs, n_inputs);
    }
    if (reserve_name(g) != 0) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    if (g->n_ops == g->cap_ops) {
        int cap = g->cap_ops ? g->cap_ops * 2 : 64;
        sf_op **ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        g->ops = ops;
        int32_t *h = realloc(g->use_head, (size_t)cap * sizeof *h);
        if (h) g->use_head = h;
        int32_t *t = realloc(g->use_tail, (size_t)cap * sizeof *t);
        if (t) g->use_tail = t;
        if (!h || !t) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        g->cap_ops = cap;
    }
    if (reserve_uses(g, n_inputs)) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    sf_op *op = sf_arena_alloc(g->arena, sizeof *op);
    sf_tensor_ref *ins = sf_arena_calloc(g->arena, (size_t)(n_inputs ? n_inputs : 1), sizeof *ins);
    sf_shape *in_shapes =
        sf_arena_calloc(g->arena, (size_t)(n_inputs ? n_inputs : 1), sizeof *in_shapes);
    char *nm = sf_arena_strdup(g->arena, name);
    if (!op || !ins || !in_shapes || !nm) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_inputs; i++) {
        const sf_op *src = sf_graph_op(g, inputs[i].op);
        if (!src)
            return sf_error_set(err, SF_ERR_INVALID, "operator '%s': input %d refers to no operator",
                                name, i);
        if (inputs[i].out < 0 || inputs[i].out >= src->n_outputs)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s': input %d uses output %d of '%s', which has %d", name,
                                i, inputs[i].out, src->name, src->n_outputs);
        ins[i] = inputs[i];
        in_shapes[i] = src->out_shapes[inputs[i].out];
    }
    int64_t bad_value = 0;
    const sf_attr_desc *bad = attr_out_of_range(c, p, &bad_value);
    if (bad)
        return sf_error_set(err, SF_ERR_RANGE,
                            "operator '%s' (%s): attribute '%s' is %lld, beyond the limit of "
                            "%lld in magnitude",
                            name, c->name, bad->name, (long long)bad_value,
                            (long long)SF_MAX_EXTENT);
    sf_shape outs[SF_MAX_SPLIT];
    int n_out = 0;
    sf_error local = {0};
    sf_status st = c->infer(p, in_shapes, n_inputs, outs, &n_out, &local);
    if (st != SF_OK) {
        return sf_error_set(err, st, "operator '%s' (%s): %s", name, c->name,
                            local.msg[0] ? local.msg : sf_status_str(st));
    }
    for (int k = 0; k < n_out; k++) {
        if (!shape_in_limits(&outs[k])) {
            char buf[128];
            return sf_error_set(err, SF_ERR_RANGE,
                                "operator '%s' (%s): output %d of shape %s exceeds the limit of "
                                "%lld elements (or %lld in one dimension)",
                                name, c->name, k, sf_shape_str(&outs[k], buf, sizeof buf),
                                (long long)SF_MAX_NUMEL, (long long)SF_MAX_EXTENT);
        }
    }
    sf_shape *out_shapes = sf_arena_calloc(g->arena, (size_t)n_out, sizeof *out_shapes);
    if (!out_shapes) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    memcpy(out_shapes, outs, (size_t)n_out * sizeof *outs);
    const float *fx = NULL;
    st = take_fixed(g, c, name, p, fixed, n_fixed, &fx, err);
    if (st != SF_OK) return st;

    op->id = g->n_ops;
    op->name = nm;
    op->type = type;
    op->params = *p;
    op->n_inputs = n_inputs;
    op->inputs = ins;
    op->in_shapes = in_shapes;
    op->n_outputs = n_out;
    op->out_shapes = out_shapes;
    op->weight_owner = -1;
    op->n_fixed = fx ? n_fixed : 0;
    op->fixed = fx;
    op->n_params = c->param_count ? c->param_count(p, in_shapes, n_inputs) : 0;
    (c->space ? c->space : default_space)(op, &op->space, op->kinds);
    if (op->n_params < 0 || op->n_params > SF_MAX_NUMEL)
        return sf_error_set(err, SF_ERR_RANGE,
                            "operator '%s' (%s): its weights exceed the limit of %lld elements",
                            name, c->name, (long long)SF_MAX_NUMEL);
    /* A reduction dimension is an input's extent, checked with the input: the
     * space's other dimensions are the output's, which bound its tiles' pieces
     * (a tile's whole extent product is never taken). */
    sf_shape named = op->space;
    named.ndim = 0;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] != SF_DIM_REDUCE) named.d[named.ndim++] = op->space.d[i];
    if (!shape_in_limits(&named)) {
        char buf[128];
        return sf_error_set(err, SF_ERR_RANGE,
                            "operator '%s' (%s): its parallel space %s exceeds the limit of %lld "
                            "elements",
                            name, c->name, sf_shape_str(&op->space, buf, sizeof buf),
                            (long long)SF_MAX_NUMEL);
    }
    g->ops[g->n_ops++] = op;
    add_uses(g, op); /* reserve_uses made room */
    g->slots[name_slot(g, nm)] = op->id; /* a new name: reserve_name made room */
    return op->id;
}

int sf_graph_add_input(sf_graph *g, const char *name, const sf_shape *shape, int is_index,
                       sf_error *err) {
    sf_op_params p;
    sf_op_params_default(SF_OP_INPUT, &p);
    p.input.shape = *shape;
    p.input.is_index = is_index;
    return sf_graph_add_op(g, SF_OP_INPUT, name, &p, NULL, 0, err);
}

/* 1 when a and b describe the same parameter tensors, shape for shape, at the
 * same offsets: a linear without bias (W (V, D)) and an embedding (table (V,
 * D)) hold one matrix alike, which is how GPT-2 ties its LM head to the token
 * embedding. */
static int same_param_layout(const sf_op *a, const sf_op *b) {
    sf_param_desc da[SF_MAX_PARAMS], db[SF_MAX_PARAMS];
    int na = sf_op_param_descs(a, da), nb = sf_op_param_descs(b, db);
    if (na != nb || na == 0) return 0;
    for (int i = 0; i < na; i++)
        if (da[i].offset != db[i].offset || !sf_shape_equal(&da[i].shape, &db[i].shape)) return 0;
    return 1;
}

/* Operators of different types that share weights (a tie) split them along
 * different dimensions of their spaces: the embedding's parameter dimension D
 * and reduction dimension V against the LM head's parameter dimension V and
 * reduction dimension D. Both keep their dimension kinds: the task graph
 * matches their parts by the weight elements themselves (sf_op_weight_slices
 * in the owner's layout, which both share), and a strategy is valid only when
 * the two operators split the table alike, every part's slices equal to or
 * disjoint from every other's (sf_strategy_validate, src/strategy/tie.c), so
 * that each shard is the slices of one tile of either. The graph marks both
 * operators (sf_graph_op_tied) so that the strategy checks and the searches
 * look at ties only where there are some. */
sf_status sf_graph_share_weights(sf_graph *g, int op_id, int owner_id, sf_error *err) {
    if (op_id < 0 || op_id >= g->n_ops || owner_id < 0 || owner_id >= g->n_ops)
        return sf_error_set(err, SF_ERR_INVALID, "share_weights: operator out of range");
    sf_op *op = g->ops[op_id];
    const sf_op *owner = g->ops[owner_id];
    while (owner->weight_owner >= 0) owner = g->ops[owner->weight_owner];
    if (owner->id >= op->id)
        return sf_error_set(err, SF_ERR_INVALID,
                            "operator '%s': shares weights with '%s', which must come earlier",
                            op->name, owner->name);
    if (owner->n_params != op->n_params || op->n_params == 0 ||
        (owner->type != op->type && !same_param_layout(owner, op)))
        return sf_error_set(err, SF_ERR_INVALID,
                            "operator '%s': cannot share weights with '%s' (type or weight "
                            "shapes differ)",
                            op->name, owner->name);
    if (owner->type != op->type) { /* a tie: mark both */
        int counted = sf_graph_op_tied(g, op->id);
        if (mark_tied(g, op->id) != 0 || mark_tied(g, owner->id) != 0)
            return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        if (!counted) g->n_ties++;
    }
    op->weight_owner = owner->id;
    return SF_OK;
}

int sf_graph_consumers(const sf_graph *g, int op, int out, sf_tensor_ref *users, int cap) {
    int n = 0;
    if (op < 0 || op >= g->n_ops) return 0;
    for (int32_t e = g->use_head[op]; e >= 0; e = g->use_next[e]) {
        int i = g->use_op[e], k = g->use_k[e];
        if (g->ops[i]->inputs[k].out != out) continue;
        if (n < cap) users[n] = (sf_tensor_ref){i, k};
        n++;
    }
    return n;
}

unsigned sf_op_saves(const sf_op *op) {
    const sf_op_class *c = op ? sf_op_class_get(op->type) : NULL;
    if (!c) return 0;
    return c->saves ? c->saves(op) : SF_SAVES_ALL_INPUTS;
}

/* Output `out` of `op` is read by its only consumer, which runs in place over it. */
static int taken_in_place(const sf_graph *g, const sf_op *op, int out, const sf_tensor_ref *u,
                          int n_users) {
    if (n_users != 1 || u->out != 0 || op->type == SF_OP_INPUT) return 0;
    if (sf_op_saves(op) & SF_SAVES_OUTPUT) return 0;
    const sf_op *c = g->ops[u->op];
    unsigned cs = sf_op_saves(c);
    if (!(cs & SF_SAVES_IN_PLACE) || (cs & SF_SAVES_INPUT(0))) return 0;
    return sf_shape_equal(&op->out_shapes[out], &c->out_shapes[0]);
}

int sf_graph_output_kept(const sf_graph *g, int op, int out) {
    if (!g || op < 0 || op >= g->n_ops || out < 0 || out >= g->ops[op]->n_outputs) return 0;
    const sf_op *p = g->ops[op];
    sf_tensor_ref users[2];
    int n = sf_graph_consumers(g, op, out, users, 2);
    if (taken_in_place(g, p, out, users, n)) return 0;
    if (sf_op_saves(p) & SF_SAVES_OUTPUT) return 1;
    for (int32_t e = g->use_head[op]; e >= 0; e = g->use_next[e]) {
        const sf_op *u = g->ops[g->use_op[e]];
        unsigned us = sf_op_saves(u);
        int k = g->use_k[e];
        if (u->inputs[k].out == out &&
            (k < 30 ? (us & SF_SAVES_INPUT(k)) != 0
                    : (us & SF_SAVES_ALL_INPUTS) == SF_SAVES_ALL_INPUTS))
            return 1;
    }
    return 0;
}

uint64_t sf_graph_kept_mask(const sf_graph *g, int op) {
    uint64_t m = 0;
    if (!g || op < 0 || op >= g->n_ops) return 0;
    for (int k = 0; k < g->ops[op]->n_outputs && k < 64; k++)
        if (sf_graph_output_kept(g, op, k)) m |= (uint64_t)1 << k;
    return m;
}

void sf_graph_stats_compute(const sf_graph *g, sf_graph_stats *st) {
    memset(st, 0, sizeof *st);
    st->ops = g->n_ops;
    for (int i = 0; i < g->n_ops; i++) {
        const sf_op *op = g->ops[i];
        if (op->type == SF_OP_INPUT && st->batch == 0 && op->out_shapes[0].ndim > 0)
            st->batch = op->out_shapes[0].d[0];
        if (op->weight_owner < 0) {
            st->params += op->n_params;
            st->weight_bytes += (double)op->n_params * SF_ELEM_BYTES;
        }
        sf_tile full = sf_tile_full(&op->space);
        sf_op_cost c;
        sf_op_tile_cost(op, &full, &c);
        st->flops_fwd += c.flops_fwd;
        st->flops_bwd += c.flops_bwd;
        for (int k = 0; k < op->n_outputs; k++)
            st->activation_bytes += (double)sf_shape_numel(&op->out_shapes[k]) * SF_ELEM_BYTES;
        st->saved_bytes += sf_op_tile_kept_bytes(op, &full, sf_graph_kept_mask(g, i));
    }
}
