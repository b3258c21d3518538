/*
 * validate.c - predicted against measured iteration times (soapflow/validate.h).
 *
 * The prediction is the simulator's, unchanged: the module only picks what to
 * compare. The measurement is the runtime's, on synthetic batches, so that it
 * measures the plan and not a data loader. Every rank takes the same steps in
 * the same order (the runtimes' collectives must match) and ends with the
 * same figures, gathered by one sum a strategy: the step time is rank 0's
 * (steps end with a world-wide sum, so every rank's is within a message
 * latency of it), the kinds every rank's, so that the measured breakdown can
 * be read on the rank the simulator calls critical.
 *
 * The alternative sync models are a table the caller may replace, since
 * which of the simulator's models the runtime behaves like is an open
 * question each new scheme reopens.
 */
#include "soapflow/validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/stats.h"

_Static_assert(SF_SIM_TOTAL_COUNT == 5 && (int)SF_VALIDATE_IDLE == (int)SF_SIM_TOTAL_COUNT,
               "the kinds line up with the simulator's");

static const char *const kind_name[SF_VALIDATE_KIND_COUNT] = {"compute", "transfer", "sync",
                                                              "update",  "copy",     "idle"};
_Static_assert(sizeof kind_name / sizeof kind_name[0] == SF_VALIDATE_KIND_COUNT, "a name a kind");

/* The simulator's sync models, each judged against the same measurements:
 * which one the runtime behaves like (docs/simulator.md). */
static const sf_validate_sync_model default_models[] = {
    {SF_SYNC_OVERLAP, SF_SCHEME_RING},
    {SF_SYNC_BULK, SF_SCHEME_RING},
    {SF_SYNC_OVERLAP, SF_SCHEME_PS},
    {SF_SYNC_BULK, SF_SCHEME_PS},
    {SF_SYNC_OVERLAP, SF_SCHEME_HIERARCHICAL},
    {SF_SYNC_BULK, SF_SCHEME_HIERARCHICAL},
};
#define N_DEFAULT_MODELS ((int)(sizeof default_models / sizeof default_models[0]))
_Static_assert(N_DEFAULT_MODELS <= SF_VALIDATE_MAX_SYNC_MODELS, "room for the defaults");

const char *sf_validate_kind_name(int kind) {
    return kind >= 0 && kind < SF_VALIDATE_KIND_COUNT ? kind_name[kind] : NULL;
}

int sf_validate_default_sync_models(const sf_validate_sync_model **out) {
    *out = default_models;
    return N_DEFAULT_MODELS;
}

void sf_validate_options_default(sf_validate_options *o) {
    memset(o, 0, sizeof *o);
    sf_sim_options_default(&o->sim);
    o->n_models = sf_validate_default_sync_models(&o->models);
    o->iters = 20;
    o->warmup = 2;
    o->rounds = 4;
    o->seed = 1;
}

int64_t sf_validate_rounds(const sf_validate_options *o) {
    return o->rounds < o->iters ? o->rounds : o->iters;
}

static sf_status check_options(const sf_validate_options *o, int n, sf_error *err) {
    if (n < 1) return sf_error_set(err, SF_ERR_INVALID, "no strategies to validate");
    if (o->n_models < 0 || o->n_models > SF_VALIDATE_MAX_SYNC_MODELS ||
        (o->n_models > 0 && !o->models))
        return sf_error_set(err, SF_ERR_INVALID, "%d sync models: want 0 to %d", o->n_models,
                            SF_VALIDATE_MAX_SYNC_MODELS);
    if (o->iters < 1 || o->warmup < 0 || o->rounds < 1)
        return sf_error_set(err, SF_ERR_INVALID,
                            "%lld steps, %lld warm-up, %lld rounds: want >= 1, >= 0, >= 1",
                            (long long)o->iters, (long long)o->warmup, (long long)o->rounds);
    return SF_OK;
}

/* ---- predicted ----------------------------------------------------------------------- */

/* "NAME: message" for a failure of row `name`. The measurement's messages
 * may come from deep in the runtime and name the strategy already. */
static sf_status name_row(sf_error *err, sf_status st, const char *name, int unless_named) {
    if (err && !(unless_named && strstr(err->msg, name))) sf_error_prefix(err, "%s: ", name);
    return st;
}

sf_status sf_validate_predict(const sf_graph *g, const sf_machine *m, sf_cost_model *cm,
                              sf_validate_row *rows, int n, const sf_validate_options *o,
                              sf_profile_stats *coverage, sf_error *err) {
    sf_status st = check_options(o, n, err);
    if (st != SF_OK) return st;
    sf_sim_options so = o->sim;
    so.keep_schedule = 1; /* the breakdown and the traces read the schedule */
    sf_sim *sim = sf_sim_new(g, m, cm, &so, err);
    if (!sim) return err && err->code ? err->code : SF_ERR_NOMEM;
    if (coverage) memset(coverage, 0, sizeof *coverage);
    sf_cost_profiled_reset_stats(cm); /* coverage of these simulations only */
    for (int i = 0; i < n && st == SF_OK; i++) {
        sf_validate_row *e = &rows[i];
        sf_sim_result r;
        st = sf_sim_run(sim, e->strategy, &r, err);
        if (st != SF_OK) {
            name_row(err, st, e->name, 0);
            break;
        }
        e->pred_s = r.iter_s;
        e->fits = r.fits;
        e->crit = 0;
        for (int d = 1; d < r.n_devices; d++)
            if (r.device_busy_s[d] > r.device_busy_s[e->crit]) e->crit = d;
        st = sf_sim_kind_totals(sim, e->crit, e->pred, err);
        if (st != SF_OK) break;
        e->pred[SF_VALIDATE_IDLE] =
            fmax(0, r.iter_s - e->pred[SF_VALIDATE_COMPUTE] - e->pred[SF_VALIDATE_UPDATE] -
                        e->pred[SF_VALIDATE_COPY]);
        if (o->on_predicted) st = o->on_predicted(o->user, i, sim, err);
    }
    sf_profile_stats ps;
    if (coverage && sf_cost_profiled_stats(cm, &ps) == SF_OK) *coverage = ps;
    sf_sim_free(sim);
    for (int a = 0; a < o->n_models && st == SF_OK; a++) {
        so = o->sim;
        so.keep_schedule = 0;
        so.sync = o->models[a].mode;
        so.scheme = o->models[a].scheme;
        sim = sf_sim_new(g, m, cm, &so, err);
        if (!sim) return err && err->code ? err->code : SF_ERR_NOMEM;
        for (int i = 0; i < n && st == SF_OK; i++) {
            sf_sim_result r;
            st = sf_sim_run(sim, rows[i].strategy, &r, err);
            if (st != SF_OK)
                name_row(err, st, rows[i].name, 0);
            else
                rows[i].alt_s[a] = r.iter_s;
        }
        sf_sim_free(sim);
    }
    return st;
}

/* ---- measured ------------------------------------------------------------------------- */

/* This rank's task time of the last step, by kind. */
static void step_kinds(const sf_runtime *rt, double out[SF_SIM_TOTAL_COUNT]) {
    const sf_rt_event *ev;
    int n = sf_runtime_events(rt, &ev);
    for (int k = 0; k < SF_SIM_TOTAL_COUNT; k++) out[k] = 0;
    for (int i = 0; i < n; i++) {
        double d = ev[i].t1_s - ev[i].t0_s;
        switch ((sf_rt_event_kind)ev[i].kind) {
        case SF_RT_FWD:
        case SF_RT_BWD: out[SF_VALIDATE_COMPUTE] += d; break;
        case SF_RT_XFER:
        case SF_RT_GRAD: out[SF_VALIDATE_TRANSFER] += d; break;
        case SF_RT_SYNC: out[SF_VALIDATE_SYNC] += d; break;
        case SF_RT_UPDATE: out[SF_VALIDATE_UPDATE] += d; break;
        case SF_RT_COPY: out[SF_VALIDATE_COPY] += d; break;
        default: break;
        }
    }
}

typedef struct measure {
    sf_comm *comm;
    int rank, ranks;
    const sf_graph *g;
    const sf_validate_options *o;
    sf_batch_bufs *bb;
    float **w;
    double *times;   /* [n][iters] step seconds */
    double *kinds;   /* [n][SF_SIM_TOTAL_COUNT][iters] this rank's task time by kind */
    double *scratch; /* [iters] */
    double *all;     /* [ranks * SF_SIM_TOTAL_COUNT + 2] */
    int64_t done, total;
} measure;

/* One round of row i: a fresh runtime from the initial weights, the warm-up,
 * then its timed steps lo .. hi - 1; the hook on the last timed step of the
 * last round. Collective. */
static sf_status run_round(measure *ms, const sf_validate_row *e, int i, int64_t lo, int64_t hi,
                           int last, sf_error *err) {
    const sf_validate_options *o = ms->o;
    sf_runtime_options ro;
    sf_runtime_options_default(&ro);
    ro.sync = o->sim.sync;
    ro.scheme = o->sim.scheme;
    ro.machine = o->machine;
    ro.seed = o->seed;
    sf_optimizer opt;
    sf_optimizer_default(&opt, o->optimizer);
    ro.optimizer = opt.kind;
    ro.lr = opt.lr;
    ro.weight_decay = opt.weight_decay;
    sf_runtime *rt = sf_runtime_new(ms->g, e->strategy, ms->comm, &ro, err);
    if (!rt) return err && err->code ? err->code : SF_ERR_NOMEM;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)ms->w, err);
    int64_t it = o->iters, warm = o->warmup;
    double *times = ms->times + (size_t)i * (size_t)it;
    double *kinds = ms->kinds + (size_t)i * SF_SIM_TOTAL_COUNT * (size_t)it;
    for (int64_t k = -warm; k < hi - lo && st == SF_OK; k++) {
        sf_batch_synthetic(ms->bb, ms->g, o->seed, lo + k + warm);
        double t0 = sf_now_s();
        st = sf_runtime_step(rt, &ms->bb->batch, NULL, err);
        double t = sf_now_s() - t0;
        if (st != SF_OK) break;
        if (k >= 0) {
            int64_t j = lo + k;
            times[j] = t;
            double kind[SF_SIM_TOTAL_COUNT];
            step_kinds(rt, kind);
            for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) kinds[q * it + j] = kind[q];
        }
        if (o->on_measured && last && k == hi - lo - 1) {
            st = o->on_measured(o->user, i, ms->comm, rt, err);
            st = sf_comm_agree(ms->comm, st, err);
        }
        ms->done++;
        if (o->on_step) o->on_step(o->user, ms->done, ms->total, e->name);
    }
    sf_runtime_free(rt);
    return st;
}

/* Row i's medians, the same on every rank. Collective. */
static sf_status finish_row(measure *ms, sf_validate_row *e, int i, sf_error *err) {
    int64_t it = ms->o->iters;
    const double *times = ms->times + (size_t)i * (size_t)it;
    const double *kinds = ms->kinds + (size_t)i * SF_SIM_TOTAL_COUNT * (size_t)it;
    size_t nr = (size_t)ms->ranks * SF_SIM_TOTAL_COUNT;
    memset(ms->all, 0, (nr + 2) * sizeof *ms->all);
    for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) {
        memcpy(ms->scratch, kinds + q * it, (size_t)it * sizeof *ms->scratch);
        ms->all[ms->rank * SF_SIM_TOTAL_COUNT + q] = sf_median(ms->scratch, it);
    }
    if (ms->rank == 0) {
        memcpy(ms->scratch, times, (size_t)it * sizeof *ms->scratch);
        ms->all[nr] = sf_median(ms->scratch, it);
        ms->all[nr + 1] = ms->scratch[0]; /* sorted by sf_median() */
    }
    sf_status st = sf_comm_sum(ms->comm, ms->all, (int)nr + 2);
    if (st != SF_OK) return sf_error_set(err, st, "gathering the measured times failed");
    e->meas_s = ms->all[nr];
    e->meas_min_s = ms->all[nr + 1];
    const double *row = ms->all + e->crit * SF_SIM_TOTAL_COUNT;
    for (int q = 0; q < SF_SIM_TOTAL_COUNT; q++) e->meas[q] = row[q];
    e->meas[SF_VALIDATE_IDLE] =
        fmax(0, e->meas_s - e->meas[SF_VALIDATE_COMPUTE] - e->meas[SF_VALIDATE_UPDATE] -
                    e->meas[SF_VALIDATE_COPY]);
    e->meas_crit = 0;
    for (int r = 1; r < ms->ranks; r++) {
        const double *a = ms->all + r * SF_SIM_TOTAL_COUNT;
        const double *b = ms->all + e->meas_crit * SF_SIM_TOTAL_COUNT;
        if (a[SF_VALIDATE_COMPUTE] + a[SF_VALIDATE_UPDATE] >
            b[SF_VALIDATE_COMPUTE] + b[SF_VALIDATE_UPDATE])
            e->meas_crit = r;
    }
    e->error = e->pred_s / e->meas_s - 1;
    return SF_OK;
}

sf_status sf_validate_measure(sf_comm *c, const sf_graph *g, sf_validate_row *rows, int n,
                              const sf_validate_options *o, sf_error *err) {
    sf_status st = check_options(o, n, err);
    if (st != SF_OK) return st;
    measure ms = {0};
    ms.comm = c;
    ms.rank = sf_comm_rank(c);
    ms.ranks = sf_comm_size(c);
    ms.g = g;
    ms.o = o;
    for (int i = 0; i < n; i++)
        if (rows[i].crit < 0 || rows[i].crit >= ms.ranks)
            return sf_error_set(err, SF_ERR_INVALID,
                                "%s: critical device %d of %d ranks (predict first)", rows[i].name,
                                rows[i].crit, ms.ranks);
    size_t it = (size_t)o->iters, nn = (size_t)n;
    ms.bb = sf_batch_bufs_new(g, err);
    ms.w = sf_params_new(g, o->seed, 0, err);
    ms.times = malloc(nn * it * sizeof *ms.times);
    ms.kinds = malloc(nn * it * SF_SIM_TOTAL_COUNT * sizeof *ms.kinds);
    ms.scratch = malloc(it * sizeof *ms.scratch);
    ms.all = malloc(((size_t)ms.ranks * SF_SIM_TOTAL_COUNT + 2) * sizeof *ms.all);
    st = ms.bb && ms.w && ms.times && ms.kinds && ms.scratch && ms.all ? SF_OK : SF_ERR_NOMEM;
    if (st != SF_OK && err && !err->msg[0]) sf_error_set(err, st, "out of memory");
    st = sf_comm_agree(c, st, err);
    int64_t rounds = sf_validate_rounds(o);
    ms.total = (int64_t)n * (rounds * o->warmup + o->iters);
    for (int64_t r = 0; r < rounds && st == SF_OK; r++) {
        int64_t lo = o->iters * r / rounds, hi = o->iters * (r + 1) / rounds;
        for (int i = 0; i < n && st == SF_OK; i++) {
            st = run_round(&ms, &rows[i], i, lo, hi, r == rounds - 1, err);
            if (st != SF_OK) name_row(err, st, rows[i].name, 1);
        }
    }
    for (int i = 0; i < n && st == SF_OK; i++) st = finish_row(&ms, &rows[i], i, err);
    sf_batch_bufs_free(ms.bb);
    if (ms.w) sf_params_free(g, ms.w);
    free(ms.times);
    free(ms.kinds);
    free(ms.scratch);
    free(ms.all);
    return st;
}

/* ---- the summary -------------------------------------------------------------------- */

sf_status sf_validate_fit_of(const double *p, const double *m, int n, sf_validate_fit *f,
                             sf_error *err) {
    if (n < 1) return sf_error_set(err, SF_ERR_INVALID, "no strategies to fit");
    double *abs_err = malloc((size_t)n * sizeof *abs_err);
    if (!abs_err) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    f->worst = 0;
    for (int i = 0; i < n; i++) {
        abs_err[i] = fabs(p[i] / m[i] - 1);
        if (abs_err[i] > abs_err[f->worst]) f->worst = i;
    }
    f->tau = sf_kendall_tau(p, m, n);
    f->median_abs = sf_median(abs_err, n);
    free(abs_err);
    return SF_OK;
}

sf_status sf_validate_summarize(const sf_validate_row *rows, int n, const sf_validate_options *o,
                                sf_validate_summary *s, sf_error *err) {
    sf_status st = check_options(o, n, err);
    if (st != SF_OK) return st;
    memset(s, 0, sizeof *s);
    double *p = malloc((size_t)n * sizeof *p), *m = malloc((size_t)n * sizeof *m);
    double *fast = malloc((size_t)n * sizeof *fast);
    st = p && m && fast ? SF_OK : sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && st == SF_OK; i++) {
        p[i] = rows[i].pred_s;
        m[i] = rows[i].meas_s;
        fast[i] = rows[i].meas_min_s;
    }
    if (st == SF_OK) st = sf_validate_fit_of(p, m, n, &s->main, err);
    if (st == SF_OK) st = sf_validate_fit_of(p, fast, n, &s->fastest, err);
    for (int a = 0; a < o->n_models && st == SF_OK; a++) {
        for (int i = 0; i < n; i++) p[i] = rows[i].alt_s[a];
        st = sf_validate_fit_of(p, m, n, &s->models[a], err);
    }
    free(p);
    free(m);
    free(fast);
    return st;
}

sf_validate_kind sf_validate_largest_gap(const sf_validate_row *e) {
    int best = 0;
    for (int k = 1; k < SF_VALIDATE_KIND_COUNT; k++)
        if (fabs(e->meas[k] - e->pred[k]) > fabs(e->meas[best] - e->pred[best])) best = k;
    return (sf_validate_kind)best;
}
