/*
 * strategy.c - parallel configs (degrees per dimension, a device per part) and
 * strategies (one config per operator): tiles of parts, checks, short text.
 *
 * A config is a plain value (no pointers) so that the search can copy, compare
 * and store it freely; a strategy is one flat array of configs indexed by
 * operator id, so cloning and copying never allocate per operator and the
 * search loop never allocates. A config holds room for a part on every device
 * of the largest machine (SF_MAX_PARTS = SF_MAX_DEVICES, 8 KB of placement),
 * of which n_parts entries are used: copies go through sf_config_copy, which
 * moves those alone, so a strategy copy costs its parts, not 8 KB an operator.
 * (A compact placement, a rule such as "part i on device first + i" with an
 * explicit list only when needed, would make configs small but would end the
 * c->device[p] array access everywhere a part's device is read; the inline
 * array keeps that, and costs memory only where configs are stored by the
 * thousand, which OptCNN's candidate tables avoid by storing degrees only.) The strategy does not
 * keep the graph: every function that needs shapes takes the graph (or the operator) as an
 * argument, which keeps a strategy valid across graph rebuilds with the same operators.
 *
 * Part numbering is row-major over the grid of degrees, the last dimension
 * varying fastest, exactly as a C array of shape degree[0] x ... x degree[n-1]:
 * part p has, in dimension i, index (p / prod(degree[i+1..])) % degree[i], and
 * covers sf_split_range(size_i, degree_i, index_i). Degrees that do not divide a
 * dimension are allowed; parts then differ by at most one element.
 */
#include "soapflow/strategy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sf_strategy {
    int n_ops;
    int n_cfg;          /* configs held: n_ops, or a period (sf_strategy_new_periodic) */
    sf_config *configs; /* [n_cfg]: op's is configs[op % n_cfg] */
    int has_pipe;       /* 1: pipe holds its pipeline */
    sf_pipeline pipe;
};

/* ---- configs --------------------------------------------------------------- */

void sf_config_part_tile(const sf_op *op, const sf_config *c, int part, sf_tile *t) {
    int nd = op->space.ndim;
    t->ndim = nd;
    int rest = part;
    for (int i = nd - 1; i >= 0; i--) {
        int deg = i < c->ndim && c->degree[i] > 0 ? c->degree[i] : 1;
        int idx = rest % deg;
        rest /= deg;
        sf_split_range(op->space.d[i], deg, idx, &t->lo[i], &t->hi[i]);
    }
    for (int i = nd; i < SF_MAX_DIMS; i++) t->lo[i] = t->hi[i] = 0;
}

sf_status sf_config_set_degrees(sf_config *c, int ndim, const int *degree) {
    if (ndim < 0 || ndim > SF_MAX_DIMS) return SF_ERR_INVALID;
    int64_t parts = 1;
    for (int i = 0; i < ndim; i++) {
        if (degree[i] < 1) return SF_ERR_INVALID;
        parts *= degree[i];
        if (parts > SF_MAX_PARTS) return SF_ERR_RANGE;
    }
    c->ndim = ndim;
    for (int i = 0; i < SF_MAX_DIMS; i++) c->degree[i] = i < ndim ? degree[i] : 1;
    c->n_parts = (int)parts;
    c->zero = c->recompute = 0;
    c->flag_pad[0] = c->flag_pad[1] = 0;
    return SF_OK;
}

int sf_config_equal(const sf_config *a, const sf_config *b) {
    if (a->ndim != b->ndim || a->n_parts != b->n_parts || a->zero != b->zero ||
        a->recompute != b->recompute)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->degree[i] != b->degree[i]) return 0;
    int n = a->n_parts < 0 ? 0 : a->n_parts > SF_MAX_PARTS ? SF_MAX_PARTS : a->n_parts;
    for (int p = 0; p < n; p++)
        if (a->device[p] != b->device[p]) return 0;
    return 1;
}

void sf_config_copy(sf_config *dst, const sf_config *src) {
    if (dst == src) return;
    int n = src->n_parts < 0 ? 0 : src->n_parts > SF_MAX_PARTS ? SF_MAX_PARTS : src->n_parts;
    dst->ndim = src->ndim;
    dst->n_parts = src->n_parts;
    dst->zero = src->zero;
    dst->recompute = src->recompute;
    memcpy(dst->degree, src->degree, sizeof dst->degree);
    memcpy(dst->device, src->device, (size_t)n * sizeof dst->device[0]);
}

sf_status sf_config_validate(const sf_op *op, const sf_machine *m, const sf_config *c,
                             sf_error *err) {
    const char *name = op->name;
    int nd = op->space.ndim;
    /* a config may leave a trailing reduction dimension out: degree 1 there */
    if (c->ndim == nd - 1 && nd > 1 && op->kinds[nd - 1] == SF_DIM_REDUCE) nd--;
    if (c->ndim != nd)
        return sf_error_set(err, SF_ERR_INVALID,
                            "operator '%s': config has %d dimensions, its parallel space has %d",
                            name, c->ndim, nd);
    int64_t parts = 1;
    for (int i = 0; i < nd; i++) {
        int deg = c->degree[i];
        const char *kind = sf_dim_kind_name(op->kinds[i]);
        if (deg < 1)
            return sf_error_set(err, SF_ERR_RANGE,
                                "operator '%s': degree %d on dimension %d (%s) is below 1", name,
                                deg, i, kind);
        if (deg > 1 && op->kinds[i] == SF_DIM_NONE)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s': degree %d on dimension %d (none), which cannot "
                                "be split",
                                name, deg, i);
        if ((int64_t)deg > op->space.d[i])
            return sf_error_set(err, SF_ERR_RANGE,
                                "operator '%s': degree %d on dimension %d (%s) exceeds its size "
                                "%lld",
                                name, deg, i, kind, (long long)op->space.d[i]);
        parts *= deg;
        if (parts > SF_MAX_PARTS)
            return sf_error_set(err, SF_ERR_RANGE,
                                "operator '%s': degrees give more than %d parts (the maximum)",
                                name, SF_MAX_PARTS);
    }
    if (c->n_parts != (int)parts)
        return sf_error_set(err, SF_ERR_INVALID,
                            "operator '%s': n_parts %d is not the product of the degrees (%lld)",
                            name, c->n_parts, (long long)parts);
    int n_dev = m ? sf_machine_num_devices(m) : 0;
    for (int p = 0; p < c->n_parts; p++) {
        int d = c->device[p];
        if (d < 0 || (m && d >= n_dev)) {
            if (m)
                return sf_error_set(err, SF_ERR_RANGE,
                                    "operator '%s': part %d on device %d, but the machine has %d "
                                    "devices (0-%d)",
                                    name, p, d, n_dev, n_dev - 1);
            return sf_error_set(err, SF_ERR_RANGE, "operator '%s': part %d on device %d", name, p,
                                d);
        }
    }
    if (c->zero >= SF_ZERO_STAGE_COUNT)
        return sf_error_set(err, SF_ERR_RANGE, "operator '%s': zero stage %d (0-%d)", name, c->zero,
                            SF_ZERO_STAGE_COUNT - 1);
    if (c->zero) {
        sf_tile full = sf_tile_full(&op->space);
        if (sf_op_tile_weights(op, &full) == 0)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s': zero stage %d, but it has no weights to shard",
                                name, c->zero);
    }
    if (c->recompute > 1)
        return sf_error_set(err, SF_ERR_RANGE, "operator '%s': recompute flag %d (0 or 1)", name,
                            c->recompute);
    return SF_OK;
}

/* Append formatted text at *len of buf (capacity n), never overflowing; *len
 * keeps counting past the end so that the caller could tell truncation. */
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...) SF_PRINTF(4, 5);
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = *len < n ? n - *len : 0;
    int k = vsnprintf(room ? buf + *len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k;
}

/*
 * Text: one token per split dimension, then the devices.
 *   - a token is the kind letter (s sample, a attribute, p parameter, r reduce,
 *     x none)
 *     and the degree: "s4", "p2";
 *   - when the space has several dimensions of that kind (the h and w
 *     attributes of a convolution), the letter carries the dimension index and
 *     '=' precedes the degree: "a2=2" is dimension 2 split in two;
 *   - an unsplit config reads "1";
 *   - devices follow '@', consecutive runs written as ranges: "@0-3,8,10-11".
 * Example: a convolution split 4 ways on the batch and 2 on height over eight
 * devices is "s4 a2=2 @0-7".
 */
char *sf_config_str(const sf_op *op, const sf_config *c, char *buf, size_t n) {
    static const char letters[SF_DIM_KIND_COUNT] = {'x', 's', 'a', 'p', 'r'};
    size_t len = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    int any = 0;
    for (int i = 0; i < c->ndim && i < SF_MAX_DIMS; i++) {
        if (c->degree[i] == 1) continue;
        sf_dim_kind k = i < op->space.ndim ? op->kinds[i] : SF_DIM_NONE;
        if ((unsigned)k >= SF_DIM_KIND_COUNT) k = SF_DIM_NONE;
        int same = 0;
        for (int j = 0; j < op->space.ndim; j++) same += op->kinds[j] == k;
        if (same > 1)
            put(buf, n, &len, "%s%c%d=%d", any ? " " : "", letters[k], i, c->degree[i]);
        else
            put(buf, n, &len, "%s%c%d", any ? " " : "", letters[k], c->degree[i]);
        any = 1;
    }
    if (!any) put(buf, n, &len, "1");
    put(buf, n, &len, " @");
    int np = c->n_parts < 0 ? 0 : c->n_parts > SF_MAX_PARTS ? SF_MAX_PARTS : c->n_parts;
    for (int p = 0; p < np;) {
        int q = p;
        while (q + 1 < np && c->device[q + 1] == c->device[q] + 1) q++;
        if (q > p)
            put(buf, n, &len, "%s%d-%d", p ? "," : "", c->device[p], c->device[q]);
        else
            put(buf, n, &len, "%s%d", p ? "," : "", c->device[p]);
        p = q + 1;
    }
    if (c->zero) put(buf, n, &len, " zero%d", c->zero);
    if (c->recompute) put(buf, n, &len, " rc");
    return buf;
}

/* ---- strategies ------------------------------------------------------------ */

static void config_single(sf_config *c, int ndim, int device) {
    c->ndim = ndim;
    c->n_parts = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) c->degree[i] = 1;
    c->device[0] = (int16_t)device;
}

sf_strategy *sf_strategy_new_periodic(const sf_graph *g, int period) {
    int n = sf_graph_num_ops(g);
    if (period < 1 || period > n) period = n;
    sf_strategy *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_ops = n;
    s->n_cfg = period;
    s->configs = calloc((size_t)(period ? period : 1), sizeof *s->configs);
    if (!s->configs) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < period; i++)
        config_single(&s->configs[i], sf_graph_op(g, i)->space.ndim, 0);
    return s;
}

sf_strategy *sf_strategy_new(const sf_graph *g) {
    return sf_strategy_new_periodic(g, sf_graph_num_ops(g));
}

sf_strategy *sf_strategy_clone(const sf_strategy *src) {
    sf_strategy *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_ops = src->n_ops;
    s->n_cfg = src->n_cfg;
    s->configs = calloc((size_t)(src->n_cfg ? src->n_cfg : 1), sizeof *s->configs);
    if (!s->configs) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < src->n_cfg; i++) sf_config_copy(&s->configs[i], &src->configs[i]);
    sf_strategy_set_pipeline(s, sf_strategy_pipeline(src));
    return s;
}

void sf_strategy_copy(sf_strategy *dst, const sf_strategy *src) {
    int n = dst->n_ops < src->n_ops ? dst->n_ops : src->n_ops;
    if (dst->n_cfg < n) n = dst->n_cfg; /* every config dst holds, once */
    for (int i = 0; i < n; i++) sf_config_copy(&dst->configs[i], sf_strategy_get(src, i));
    if (dst != src) sf_strategy_set_pipeline(dst, sf_strategy_pipeline(src));
}

const sf_pipeline *sf_strategy_pipeline(const sf_strategy *s) {
    return s->has_pipe ? &s->pipe : NULL;
}

/* Only the chunks in use are copied: a strategy copy in the searches' loops
 * costs them, not the whole boundary array. */
void sf_strategy_set_pipeline(sf_strategy *s, const sf_pipeline *pl) {
    if (!pl) {
        s->has_pipe = 0;
        return;
    }
    if (pl == &s->pipe) return;
    int n = pl->stages * pl->chunks;
    if (n < 0) n = 0;
    if (n > SF_MAX_PIPE_CHUNKS) n = SF_MAX_PIPE_CHUNKS;
    s->pipe.stages = pl->stages;
    s->pipe.chunks = pl->chunks;
    s->pipe.micro_batches = pl->micro_batches;
    s->pipe.schedule = pl->schedule;
    memcpy(s->pipe.first, pl->first, (size_t)n * sizeof pl->first[0]);
    s->has_pipe = 1;
}

void sf_strategy_free(sf_strategy *s) {
    if (!s) return;
    free(s->configs);
    free(s);
}

int sf_strategy_num_ops(const sf_strategy *s) { return s->n_ops; }

sf_config *sf_strategy_config(sf_strategy *s, int op) {
    if (op < 0 || op >= s->n_ops) return NULL;
    return &s->configs[op % s->n_cfg];
}

const sf_config *sf_strategy_get(const sf_strategy *s, int op) {
    if (op < 0 || op >= s->n_ops) return NULL;
    return &s->configs[op % s->n_cfg];
}

int sf_strategy_idle_devices(const sf_strategy *s, int n_devices, int *idle) {
    if (n_devices <= 0) return 0;
    unsigned char used[SF_MAX_DEVICES] = {0};
    int n = n_devices < SF_MAX_DEVICES ? n_devices : SF_MAX_DEVICES, busy = 0;
    for (int i = 0; i < s->n_cfg && busy < n; i++) {
        const sf_config *c = &s->configs[i];
        for (int p = 0; p < c->n_parts && p < SF_MAX_PARTS; p++) {
            int d = c->device[p];
            if (d >= 0 && d < n && !used[d]) {
                used[d] = 1;
                busy++;
            }
        }
    }
    int k = 0;
    for (int d = 0; d < n; d++)
        if (!used[d]) {
            if (idle) idle[k] = d;
            k++;
        }
    return k + (n_devices - n);
}
