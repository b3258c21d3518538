/*
 * profiler.c - fills a profile database by running the real fast kernels on
 * every distinct task the search space of a model on a machine can produce.
 *
 * Two passes. The first enumerates: for each operator, every tuple of degrees
 * over its splittable dimensions whose product fits the device budget (the
 * configs sf_config_random can propose; placement does not change a task's
 * time), and every part of each config. Parts of an uneven split differ by one
 * element in some dimensions and border parts read clipped halos, so a config
 * yields a handful of distinct keys, not one; a set of keys seen (itself a
 * profile database, used for its hash table) keeps each key once, with the
 * first tile that produced it. Knowing the count first gives the progress bar
 * its total and lets the report say what was reused and skipped before any
 * measuring starts.
 *
 * The second pass measures each new key: it carves the tile's buffers (input
 * regions, outputs, the full weights, their gradients and the kernel
 * workspace) out of one allocation that only grows, so memory stays bounded by
 * the largest tile and there is one malloc per new maximum rather than per
 * key. Buffers hold uniform random numbers in [-1, 1); token-id inputs get
 * valid ids. As in the runtime, no gradient flows into a graph input: an
 * operator reading one runs its backward without that input gradient (the key
 * does not say so: it is the operator's, and a graph's first layer is the one
 * operator of its shape). Each key runs `warmup` forward+backward passes untimed, then
 * `reps` forward and `reps` backward passes timed one by one, and the medians
 * are stored: the median, not the best, because the simulator adds times of
 * many tasks and should see typical ones (bench_kernels.c reports best-of-N,
 * which answers another question: how fast can the kernel go).
 *
 * A kernel error on one key does not end the run: the key is skipped, the
 * first message kept for the report, and the model falls back to the analytic
 * estimate for it. After each new entry the caller's on_entry runs: the
 * library writes no file itself, and the command decides when a save is worth
 * its cost (every few seconds) and when to stop (a signal).
 */
#include "soapflow/cost.h"

#include <stdlib.h>
#include <string.h>

#include "soapflow/kernels.h"
#include "soapflow/strategy.h"

#define ALIGN_BYTES 64

void sf_profile_options_default(sf_profile_options *o) {
    memset(o, 0, sizeof *o);
    o->reps = 10;
    o->warmup = 2;
    o->seed = 42;
}

/* What to do with one distinct key. */
enum { PLAN_MEASURE, PLAN_REUSE, PLAN_NO_KERNEL };

typedef struct todo {
    int op;
    int what;
    sf_tile tile;
} todo;

typedef struct enum_state {
    const sf_graph *g;
    const sf_profile_db *db;
    sf_profile_db *seen; /* keys met so far; entry i is todos[i] */
    todo *todos;
    int n_todos, cap_todos;
    int budget;
    char key[SF_PROFILE_KEY_MAX];
    sf_error *err;
} enum_state;

static sf_status add_key(enum_state *s, const sf_op *op, const sf_tile *t) {
    if (!sf_profile_key(op, t, s->key, sizeof s->key))
        return sf_error_set(s->err, SF_ERR_RANGE, "operator '%s': profile key too long", op->name);
    if (sf_profile_db_lookup(s->seen, s->key)) return SF_OK;
    sf_status st = sf_profile_db_insert(s->seen, s->key, op->type, 0, 0, 1, s->err);
    if (st != SF_OK) return st;
    if (s->n_todos == s->cap_todos) {
        int cap = s->cap_todos ? s->cap_todos * 2 : 256;
        todo *p = realloc(s->todos, (size_t)cap * sizeof *p);
        if (!p) return sf_error_set(s->err, SF_ERR_NOMEM, "out of memory");
        s->todos = p;
        s->cap_todos = cap;
    }
    todo *td = &s->todos[s->n_todos++];
    td->op = op->id;
    td->tile = *t;
    if (sf_profile_db_lookup(s->db, s->key))
        td->what = PLAN_REUSE;
    else
        td->what = sf_kernel_available(op->type, 1) ? PLAN_MEASURE : PLAN_NO_KERNEL;
    return SF_OK;
}

/* Every degree tuple over dims[k..] with the product so far `prod`. */
static sf_status enum_degrees(enum_state *s, const sf_op *op, const int *dims, int n_dims, int k,
                              int *degree, int prod) {
    if (k == n_dims) {
        sf_config c;
        memset(&c, 0, sizeof c);
        if (sf_config_set_degrees(&c, op->space.ndim, degree) != SF_OK) return SF_OK;
        for (int p = 0; p < c.n_parts; p++) {
            sf_tile t;
            sf_config_part_tile(op, &c, p, &t);
            sf_status st = add_key(s, op, &t);
            if (st != SF_OK) return st;
        }
        return SF_OK;
    }
    int d = dims[k];
    int64_t cap = s->budget / prod;
    if (op->space.d[d] < cap) cap = op->space.d[d];
    for (int64_t deg = 1; deg <= cap; deg++) {
        degree[d] = (int)deg;
        sf_status st = enum_degrees(s, op, dims, n_dims, k + 1, degree, prod * (int)deg);
        if (st != SF_OK) return st;
    }
    degree[d] = 1;
    return SF_OK;
}

static sf_status enumerate(enum_state *s) {
    for (int i = 0; i < sf_graph_num_ops(s->g); i++) {
        const sf_op *op = sf_graph_op(s->g, i);
        if (op->type == SF_OP_INPUT) continue;
        int dims[SF_MAX_DIMS], n = 0, degree[SF_MAX_DIMS];
        for (int d = 0; d < op->space.ndim; d++) {
            degree[d] = 1;
            if (op->kinds[d] != SF_DIM_NONE && op->space.d[d] > 1) dims[n++] = d;
        }
        sf_status st = enum_degrees(s, op, dims, n, 0, degree, 1);
        if (st != SF_OK) return st;
    }
    return SF_OK;
}

/* ---- measuring one key ---------------------------------------------------- */

typedef struct workbuf {
    unsigned char *mem;
    size_t cap;
} workbuf;

static size_t round_up(size_t v) { return (v + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

/* bytes for n floats, rounded up; SIZE_MAX on overflow */
static size_t float_bytes(int64_t n) {
    size_t b;
    if (n < 0 || sf_mul_overflow_size((size_t)n, sizeof(float), &b) != 0 || b > SIZE_MAX / 2)
        return SIZE_MAX;
    return round_up(b);
}

static size_t add_bytes(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* a buffer and its gradient */
static size_t twice(size_t a) { return add_bytes(a, a); }

static void fill_uniform(float *x, int64_t n, sf_rng *rng) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2.0 * sf_rng_uniform(rng) - 1.0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Pointer tables for one key: inputs, regions, outputs and their gradients. */
typedef struct tables {
    const float **in;
    sf_tile *region;
    float **grad_in;
    float **out;
    const float **grad_out;
} tables;

static void tables_free(tables *t) {
    free((void *)t->in);
    free(t->region);
    free(t->grad_in);
    free(t->out);
    free((void *)t->grad_out);
}

static int tables_alloc(tables *t, int n_in, int n_out) {
    size_t ni = (size_t)(n_in > 0 ? n_in : 1), no = (size_t)(n_out > 0 ? n_out : 1);
    t->in = calloc(ni, sizeof *t->in);
    t->region = calloc(ni, sizeof *t->region);
    t->grad_in = calloc(ni, sizeof *t->grad_in);
    t->out = calloc(no, sizeof *t->out);
    t->grad_out = calloc(no, sizeof *t->grad_out);
    return t->in && t->region && t->grad_in && t->out && t->grad_out ? 0 : -1;
}

typedef enum measure_result { M_OK, M_TOO_LARGE, M_FAILED, M_NOMEM } measure_result;

static measure_result measure(const sf_graph *g, const sf_op *op, const sf_tile *t,
                              const sf_profile_options *o, double max_bytes, workbuf *wb,
                              double *times, sf_rng *rng, double *fwd_s, double *bwd_s,
                              sf_status *kst) {
    tables tb;
    memset(&tb, 0, sizeof tb);
    if (tables_alloc(&tb, op->n_inputs, op->n_outputs) != 0) {
        tables_free(&tb);
        return M_NOMEM;
    }
    /* sizes first, then one carve */
    size_t total = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        sf_op_input_region(op, t, i, &tb.region[i]);
        total = add_bytes(total, twice(float_bytes(sf_tile_numel(&tb.region[i]))));
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile ot;
        sf_op_output_tile(op, t, k, &ot);
        total = add_bytes(total, twice(float_bytes(sf_tile_numel(&ot))));
    }
    int64_t n_w = op->n_params > 0 ? op->n_params : 0;
    total = add_bytes(total, twice(float_bytes(n_w)));
    size_t ws_f = sf_kernel_workspace_bytes(op, t, 0), ws_b = sf_kernel_workspace_bytes(op, t, 1);
    size_t ws = round_up(ws_f > ws_b ? ws_f : ws_b);
    total = add_bytes(total, ws);
    /* softmax_ce reads a class per row of its tile (kernels.h): labels are data,
     * not a graph input, so the profiler makes them up, as it does the rest */
    int64_t rows = 0, classes = 1;
    if (op->type == SF_OP_SOFTMAX_CE && t->ndim > 0) {
        sf_shape e = sf_tile_extent(t);
        classes = op->space.d[t->ndim - 1];
        rows = e.d[t->ndim - 1] > 0 ? sf_tile_numel(t) / e.d[t->ndim - 1] : 0;
        total = add_bytes(total, round_up((size_t)rows * sizeof(int32_t)));
    }
    if (total == SIZE_MAX || (double)total > max_bytes) {
        tables_free(&tb);
        return M_TOO_LARGE;
    }
    if (total > wb->cap) {
        free(wb->mem);
        wb->cap = 0;
        wb->mem = malloc(total);
        if (!wb->mem) {
            tables_free(&tb);
            return M_NOMEM;
        }
        wb->cap = total;
    }
    unsigned char *p = wb->mem;
    for (int i = 0; i < op->n_inputs; i++) {
        int64_t n = sf_tile_numel(&tb.region[i]);
        float *x = (float *)(void *)p;
        p += float_bytes(n);
        tb.grad_in[i] = (float *)(void *)p;
        p += float_bytes(n);
        const sf_op *src = sf_graph_op(g, op->inputs[i].op);
        if (src->type == SF_OP_INPUT && src->params.input.is_index) {
            /* ids must index the table; no gradient flows into them */
            uint64_t bound = 1;
            if (op->type == SF_OP_EMBEDDING && op->params.embedding.num_embeddings > 0)
                bound = (uint64_t)op->params.embedding.num_embeddings;
            for (int64_t e = 0; e < n; e++) x[e] = (float)sf_rng_below(rng, bound);
            tb.grad_in[i] = NULL;
        } else {
            fill_uniform(x, n, rng);
            memset(tb.grad_in[i], 0, (size_t)n * sizeof(float));
        }
        /* nor into a graph input of floats: the runtime computes no gradient of the
         * data (runtime.c, setup_parts), and a first layer's backward is then
         * cheaper (LeNet-5's conv1: 124 us against 332-341 us with dx) */
        if (src->type == SF_OP_INPUT) tb.grad_in[i] = NULL;
        tb.in[i] = x;
    }
    for (int k = 0; k < op->n_outputs; k++) {
        sf_tile ot;
        sf_op_output_tile(op, t, k, &ot);
        int64_t n = sf_tile_numel(&ot);
        tb.out[k] = (float *)(void *)p;
        p += float_bytes(n);
        float *gy = (float *)(void *)p;
        p += float_bytes(n);
        fill_uniform(gy, n, rng);
        tb.grad_out[k] = gy;
    }
    float *w = NULL, *gw = NULL;
    if (n_w > 0) {
        w = (float *)(void *)p;
        p += float_bytes(n_w);
        gw = (float *)(void *)p;
        p += float_bytes(n_w);
        fill_uniform(w, n_w, rng);
        memset(gw, 0, (size_t)n_w * sizeof(float));
    }
    void *workspace = ws ? p : NULL;
    p += ws;
    int32_t *labels = NULL;
    if (rows > 0) {
        labels = (int32_t *)(void *)p;
        for (int64_t i = 0; i < rows; i++)
            labels[i] = (int32_t)sf_rng_below(rng, (uint64_t)(classes > 0 ? classes : 1));
    }
    double loss = 0;

    sf_kernel_args a = {
        .op = op,
        .tile = *t,
        .n_inputs = op->n_inputs,
        .in = tb.in,
        .in_region = tb.region,
        .n_outputs = op->n_outputs,
        .out = tb.out,
        .weights = w,
        .grad_out = tb.grad_out,
        .grad_in = tb.grad_in,
        .grad_weights = gw,
        .workspace = workspace,
        .workspace_bytes = ws,
        .seed = o->seed,
        .labels = labels,
        .loss = labels ? &loss : NULL,
    };
    measure_result res = M_OK;
    sf_status st = SF_OK;
    for (int r = 0; r < o->warmup && st == SF_OK; r++) {
        st = sf_kernel_forward(&a, 1);
        if (st == SF_OK) st = sf_kernel_backward(&a, 1);
    }
    for (int r = 0; r < o->reps && st == SF_OK; r++) {
        double t0 = sf_now_s();
        st = sf_kernel_forward(&a, 1);
        times[r] = sf_now_s() - t0;
    }
    if (st == SF_OK) *fwd_s = median(times, o->reps);
    for (int r = 0; r < o->reps && st == SF_OK; r++) {
        double t0 = sf_now_s();
        st = sf_kernel_backward(&a, 1);
        times[r] = sf_now_s() - t0;
    }
    if (st == SF_OK) *bwd_s = median(times, o->reps);
    if (st != SF_OK) {
        *kst = st;
        res = M_FAILED;
    }
    tables_free(&tb);
    return res;
}

/* ---- the run ----------------------------------------------------------------- */

sf_status sf_profile_model(const sf_graph *g, const sf_machine *m, sf_profile_db *db,
                           const sf_profile_options *opt, sf_profile_report *r, sf_error *err) {
    sf_profile_options def;
    if (!opt) {
        sf_profile_options_default(&def);
        opt = &def;
    }
    sf_profile_report dummy;
    if (!r) r = &dummy;
    memset(r, 0, sizeof *r);
    if (!g || !m || !db) return sf_error_set(err, SF_ERR_INVALID, "profile: missing argument");
    if (opt->reps < 1 || opt->warmup < 0 || opt->max_devices < 0 || !(opt->max_bytes >= 0))
        return sf_error_set(err, SF_ERR_INVALID,
                            "profile: reps must be >= 1, warmup and max_devices >= 0");
    double start = sf_now_s();
    const sf_device_kind *kind = sf_machine_device_kind(m, 0);
    const char *have = sf_profile_db_device_kind(db);
    if (have[0] && strcmp(have, kind->name) != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "the costs were measured on device kind '%s', the machine '%s' has "
                            "'%s'",
                            have, sf_machine_name(m), kind->name);
    sf_status st = sf_profile_db_set_device_kind(db, kind->name, err);
    if (st != SF_OK) return st;

    enum_state s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.db = db;
    s.err = err;
    int n_dev = sf_machine_num_devices(m);
    s.budget = opt->max_devices > 0 && opt->max_devices < n_dev ? opt->max_devices : n_dev;
    if (s.budget > SF_MAX_PARTS) s.budget = SF_MAX_PARTS;
    s.seen = sf_profile_db_new(kind->name);
    if (!s.seen) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    st = enumerate(&s);

    int to_measure = 0;
    for (int i = 0; st == SF_OK && i < s.n_todos; i++) {
        const todo *td = &s.todos[i];
        if (td->what == PLAN_REUSE) r->reused++;
        if (td->what == PLAN_MEASURE) to_measure++;
        if (td->what == PLAN_NO_KERNEL) {
            r->skipped++;
            r->skipped_by_type[sf_graph_op(g, td->op)->type]++;
        }
    }
    r->keys = s.n_todos;

    double *times = malloc((size_t)opt->reps * sizeof *times);
    if (st == SF_OK && !times) st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    if (st == SF_OK && to_measure > 0) {
        /* one device of a CPU machine is one single-threaded rank */
        sf_kernels_set_threads(1);
        double max_bytes = opt->max_bytes > 0 ? opt->max_bytes : kind->mem_bytes;
        workbuf wb = {NULL, 0};
        sf_rng rng;
        sf_rng_seed(&rng, opt->seed);
        sf_progress pg;
        sf_progress_start(&pg, opt->progress, "profile", to_measure);
        int done = 0;
        for (int i = 0; st == SF_OK && i < s.n_todos; i++) {
            const todo *td = &s.todos[i];
            if (td->what != PLAN_MEASURE) continue;
            const sf_op *op = sf_graph_op(g, td->op);
            sf_progress_update(&pg, done, op->name);
            double fwd = 0, bwd = 0;
            sf_status kst = SF_OK;
            measure_result mr =
                measure(g, op, &td->tile, opt, max_bytes, &wb, times, &rng, &fwd, &bwd, &kst);
            const sf_profile_entry *key = sf_profile_db_entry(s.seen, i);
            if (mr == M_OK) {
                st = sf_profile_db_insert(db, key->key, op->type, fwd, bwd, opt->reps, err);
                if (st == SF_OK) r->measured++;
                if (st == SF_OK && opt->on_entry)
                    st = opt->on_entry(db, r->measured, opt->on_entry_arg, err);
            } else if (mr == M_NOMEM) {
                st = sf_error_set(err, SF_ERR_NOMEM, "out of memory measuring operator '%s'",
                                  op->name);
            } else {
                r->skipped++;
                if (mr == M_TOO_LARGE) {
                    r->too_large++;
                } else if (kst == SF_ERR_UNSUPPORTED) {
                    /* a kernel for the operator, not for this tile (an LSTM split
                     * on its hidden units): as if there were no kernel */
                    r->skipped_by_type[op->type]++;
                } else {
                    r->failed++;
                    if (!r->first_failure[0]) {
                        char tile[160];
                        snprintf(r->first_failure, sizeof r->first_failure,
                                 "operator '%.60s' (%s) tile %s: %s", op->name,
                                 sf_op_type_name(op->type),
                                 sf_tile_str(&td->tile, tile, sizeof tile), sf_status_str(kst));
                    }
                }
            }
            done++;
        }
        sf_progress_finish(&pg);
        free(wb.mem);
    }
    free(times);
    free(s.todos);
    sf_profile_db_free(s.seen);
    r->seconds = sf_now_s() - start;
    return st;
}
