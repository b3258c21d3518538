/*
 * tie.c - configs of tied operators: two operators of different types that
 * share one weight tensor (sf_graph_share_weights; GPT-2's token embedding wte
 * and its LM head) must split it alike.
 *
 * The two name the table's axes by different dimensions of their spaces: the
 * embedding (N, T, D | V) has D as its parameter dimension and the vocabulary V
 * as its reduction dimension, the head (N, T, V | D) the other way round. A
 * shard is the weight elements of one tile, and the task graph matches the
 * parts of the two by those elements (sf_op_weight_slices, in the owner's
 * layout, which both share: src/taskgraph/taskgraph.c), so each part's slices
 * must be equal to or disjoint from every part's of the other: a part of one
 * that overlapped a part of the other in part would need a shard finer than
 * either tile, which neither the task graph nor the runtime has. The parts of
 * one operator split its whole layout into disjoint pieces, so "equal or
 * disjoint" is "the same pieces": the two split the table alike.
 *
 * The check does not compare every pair of parts. It first finds which
 * dimension of b splits the weights as each dimension of a does (the dimension
 * map: same extent, and a two-way split of either gives the same first piece),
 * then asks that the degrees agree through the map and that every piece of b
 * is the piece of a at the mapped coordinates, slice for slice: O(pieces), no
 * allocation, exact when it accepts (the pieces are then the same). It refuses
 * a pair whose pieces match under no dimension map, which no operator pair of
 * the zoo, ONNX import or the model files builds.
 *
 * sf_config_tie_follow builds b's config from a's through the same map, every
 * dimension (samples and sequence too) and every device lined up: how the
 * searches and random strategies keep a tie valid when they move one of the
 * two, and how Megatron places wte and the head.
 */
#include "soapflow/strategy.h"

static int weight_dim(const sf_op *op, int d) {
    return op->kinds[d] == SF_DIM_PARAMETER || op->kinds[d] == SF_DIM_REDUCE;
}

/* The slices of the first part of op split `deg` ways on dimension d alone. */
static int first_piece(const sf_op *op, int d, int deg, sf_weight_slice *sl) {
    sf_config c;
    int degree[SF_MAX_DIMS];
    for (int i = 0; i < SF_MAX_DIMS; i++) degree[i] = i == d ? deg : 1;
    if (sf_config_set_degrees(&c, op->space.ndim, degree) != SF_OK) return 0;
    sf_tile t;
    sf_config_part_tile(op, &c, 0, &t);
    return sf_op_weight_slices(op, &t, sl);
}

static int slices_equal(const sf_weight_slice *a, int na, const sf_weight_slice *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i].offset != b[i].offset || a[i].len != b[i].len || a[i].stride != b[i].stride ||
            a[i].count != b[i].count)
            return 0;
    return 1;
}

/* map[i]: the dimension of b that dimension i of a corresponds to, -1 when
 * none. A weight dimension (parameter or reduce) maps to the weight dimension
 * of b with its extent whose two-way split gives the same first piece; a
 * sample or attribute dimension to b's dimension of the same index, kind and
 * extent (the batch and the sequence of the embedding and the head). */
static void dim_map(const sf_op *a, const sf_op *b, int *map) {
    int used[SF_MAX_DIMS] = {0};
    for (int i = 0; i < a->space.ndim; i++) {
        map[i] = -1;
        if (a->kinds[i] == SF_DIM_NONE) continue;
        if (!weight_dim(a, i)) {
            if (i < b->space.ndim && b->kinds[i] == a->kinds[i] && b->space.d[i] == a->space.d[i] &&
                !used[i]) {
                map[i] = i;
                used[i] = 1;
            }
            continue;
        }
        if (a->space.d[i] < 2) continue;
        sf_weight_slice sa[SF_MAX_WEIGHT_SLICES], sb[SF_MAX_WEIGHT_SLICES];
        int na = first_piece(a, i, 2, sa);
        for (int j = 0; j < b->space.ndim && map[i] < 0; j++) {
            if (used[j] || !weight_dim(b, j) || b->space.d[j] != a->space.d[i]) continue;
            int nb = first_piece(b, j, 2, sb);
            if (slices_equal(sa, na, sb, nb)) {
                map[i] = j;
                used[j] = 1;
            }
        }
    }
}

static int degree_of(const sf_config *c, int d) {
    return d < c->ndim && c->degree[d] > 0 ? c->degree[d] : 1;
}

/* The coordinates of part p of c over op's space (last dimension fastest). */
static void coords_of(const sf_op *op, const sf_config *c, int p, int *coord) {
    for (int i = op->space.ndim - 1; i >= 0; i--) {
        int deg = degree_of(c, i);
        coord[i] = p % deg;
        p /= deg;
    }
}

static int part_at(const sf_op *op, const sf_config *c, const int *coord) {
    int p = 0;
    for (int i = 0; i < op->space.ndim; i++) p = p * degree_of(c, i) + coord[i];
    return p;
}

/* 1 when a under ca and b under cb split the weights into the same pieces. */
static int aligned(const sf_op *a, const sf_config *ca, const sf_op *b, const sf_config *cb) {
    int map[SF_MAX_DIMS], inv[SF_MAX_DIMS];
    dim_map(a, b, map);
    for (int j = 0; j < SF_MAX_DIMS; j++) inv[j] = -1;
    for (int i = 0; i < a->space.ndim; i++) {
        if (!weight_dim(a, i)) continue;
        int da = degree_of(ca, i);
        if (map[i] < 0) {
            if (da > 1) return 0;
            continue;
        }
        if (degree_of(cb, map[i]) != da) return 0;
        inv[map[i]] = i;
    }
    for (int j = 0; j < b->space.ndim; j++)
        if (weight_dim(b, j) && inv[j] < 0 && degree_of(cb, j) > 1) return 0;
    /* every piece of b (its parts at coordinate 0 off the weight dimensions)
     * against a's piece at the mapped coordinates */
    for (int q = 0; q < cb->n_parts; q++) {
        int cq[SF_MAX_DIMS], cp[SF_MAX_DIMS] = {0}, skip = 0;
        coords_of(b, cb, q, cq);
        for (int j = 0; j < b->space.ndim; j++) {
            if (!weight_dim(b, j)) {
                skip |= cq[j] != 0;
            } else if (inv[j] >= 0) {
                cp[inv[j]] = cq[j];
            }
        }
        if (skip) continue;
        sf_tile ta, tb;
        sf_config_part_tile(a, ca, part_at(a, ca, cp), &ta);
        sf_config_part_tile(b, cb, q, &tb);
        sf_weight_slice sa[SF_MAX_WEIGHT_SLICES], sb[SF_MAX_WEIGHT_SLICES];
        int na = sf_op_weight_slices(a, &ta, sa), nb = sf_op_weight_slices(b, &tb, sb);
        if (!slices_equal(sa, na, sb, nb)) return 0;
    }
    return 1;
}

sf_status sf_config_check_tie(const sf_op *a, const sf_config *ca, const sf_op *b,
                              const sf_config *cb, sf_error *err) {
    if (aligned(a, ca, b, cb)) return SF_OK;
    if (err) {
        char xa[96], xb[96];
        sf_config_str(a, ca, xa, sizeof xa);
        sf_config_str(b, cb, xb, sizeof xb);
        sf_error_set(err, SF_ERR_INVALID,
                     "tied operators '%s' (%s) and '%s' (%s) split their shared weights "
                     "differently: a part of one overlaps a part of the other in part (tied "
                     "operators must split the weights alike)",
                     a->name, xa, b->name, xb);
    }
    return SF_ERR_INVALID;
}

/* The config of op in s, or the one of cfgs that replaces it. */
static const sf_config *cfg_of(const sf_strategy *s, int op, int n, const int *ops,
                               const sf_config *cfgs) {
    for (int j = 0; j < n; j++)
        if (ops[j] == op) return &cfgs[j];
    return sf_strategy_get(s, op);
}

static sf_status check_pair(const sf_strategy *s, const sf_graph *g, int owner, int member, int n,
                            const int *ops, const sf_config *cfgs, sf_error *err) {
    return sf_config_check_tie(sf_graph_op(g, owner), cfg_of(s, owner, n, ops, cfgs),
                               sf_graph_op(g, member), cfg_of(s, member, n, ops, cfgs), err);
}

/* A member tied to its owner: it shares the owner's weights across types. */
static int cross_member(const sf_graph *g, const sf_op *op) {
    return op->weight_owner >= 0 && sf_graph_op(g, op->weight_owner)->type != op->type;
}

sf_status sf_strategy_check_ties(const sf_strategy *s, const sf_graph *g, int n, const int *ops,
                                 const sf_config *cfgs, sf_error *err) {
    if (sf_graph_num_ties(g) == 0) return SF_OK;
    int n_ops = sf_graph_num_ops(g);
    if (n == 0) {
        for (int i = 0; i < n_ops; i++) {
            const sf_op *op = sf_graph_op(g, i);
            if (!cross_member(g, op)) continue;
            sf_status st = check_pair(s, g, op->weight_owner, i, 0, NULL, NULL, err);
            if (st != SF_OK) return st;
        }
        return SF_OK;
    }
    for (int j = 0; j < n; j++) {
        if (!sf_graph_op_tied(g, ops[j])) continue;
        const sf_op *op = sf_graph_op(g, ops[j]);
        if (op->weight_owner >= 0) {
            sf_status st = check_pair(s, g, op->weight_owner, ops[j], n, ops, cfgs, err);
            if (st != SF_OK) return st;
            continue;
        }
        for (int i = ops[j] + 1; i < n_ops; i++) {
            const sf_op *u = sf_graph_op(g, i);
            if (u->weight_owner != ops[j] || !cross_member(g, u)) continue;
            sf_status st = check_pair(s, g, ops[j], i, n, ops, cfgs, err);
            if (st != SF_OK) return st;
        }
    }
    return SF_OK;
}

int sf_strategy_tie_partner(const sf_graph *g, int op) {
    if (!sf_graph_op_tied(g, op)) return -1;
    const sf_op *o = sf_graph_op(g, op);
    if (cross_member(g, o)) return o->weight_owner;
    for (int i = op + 1; i < sf_graph_num_ops(g); i++) {
        const sf_op *u = sf_graph_op(g, i);
        if (u->weight_owner == op && cross_member(g, u)) return i;
    }
    return -1;
}

int sf_config_tie_follow(const sf_op *a, const sf_config *ca, const sf_op *b, const sf_machine *m,
                         int reduce, sf_config *cb) {
    int map[SF_MAX_DIMS], degree[SF_MAX_DIMS];
    dim_map(a, b, map);
    for (int j = 0; j < SF_MAX_DIMS; j++) degree[j] = 1;
    for (int i = 0; i < a->space.ndim; i++) {
        int d = degree_of(ca, i);
        if (d == 1) continue;
        int j = map[i];
        if (j < 0 || b->kinds[j] == SF_DIM_NONE || sf_op_dim_opt_in(b, j) > reduce ||
            (int64_t)d > b->space.d[j])
            return 0;
        degree[j] = d;
    }
    sf_config c;
    if (sf_config_set_degrees(&c, b->space.ndim, degree) != SF_OK) return 0;
    /* part q of b takes the device of a's part at the same coordinates */
    for (int q = 0; q < c.n_parts; q++) {
        int cq[SF_MAX_DIMS], cp[SF_MAX_DIMS] = {0};
        coords_of(b, &c, q, cq);
        for (int i = 0; i < a->space.ndim; i++)
            if (map[i] >= 0) cp[i] = cq[map[i]];
        c.device[q] = ca->device[part_at(a, ca, cp)];
    }
    if (sf_config_validate(b, m, &c, NULL) != SF_OK || !aligned(a, ca, b, &c)) return 0;
    sf_config_copy(cb, &c);
    return 1;
}

int sf_strategy_align_ties(sf_strategy *s, const sf_graph *g, const sf_machine *m) {
    if (sf_graph_num_ties(g) == 0) return 0;
    int left = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (!cross_member(g, op)) continue;
        int ow = op->weight_owner;
        const sf_config *co = sf_strategy_get(s, ow);
        if (sf_config_check_tie(sf_graph_op(g, ow), co, op, sf_strategy_get(s, i), NULL) == SF_OK)
            continue;
        sf_config c;
        if (sf_config_tie_follow(sf_graph_op(g, ow), co, op, m, SF_OPT_IN_INNER, &c))
            sf_config_copy(sf_strategy_config(s, i), &c);
        else
            left++;
    }
    return left;
}
