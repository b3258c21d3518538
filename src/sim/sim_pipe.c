/*
 * sim_pipe.c - simulating a pipelined strategy (docs/simulator.md,
 * "Pipelines").
 *
 * A pipeline's iteration is the model's micro-batch graph (m copies of the
 * graph at batch / m sharing copy 0's weights: sf_graph_micro_batches) with
 * every copy under its operator's config, plus the order each stage runs its
 * passes in. The outer simulator (the one the caller made, on the original
 * graph) keeps an inner simulator on the micro-batch graph for the current m
 * and hands it every run and update: the inner one builds the copies' blocks
 * as it builds any graph's - tasks, transfers between stages as the explicit
 * steps of the copies' edges, one sync per weight shard after every copy's
 * backward (gradient accumulation, since the copies are one weight group) -
 * and adds one barrier per slot of each stage's schedule (sim_build.c,
 * pipe_slot_edges). A delta update of one operator changes its m copies in one
 * update of the inner simulator, which is as exact as any update. Changing m
 * makes a new inner simulator; changing the stages or the schedule is a full
 * run.
 *
 * This file makes what the inner simulator runs on (the micro-batch graph, the
 * unrolled strategy, the slots' barriers, the copies an update changes); sim.c
 * makes, runs, updates and frees the inner simulator itself.
 */
#include <string.h>

#include "sim_impl.h"

void sim_pipe_release(struct sim_pipe *p) {
    if (!p) return;
    sf_graph_free(p->gu);
    free(p->bar);
    free(p->only);
    free(p->ops);
    free(p->cfgs);
    free(p);
}

struct sim_pipe *sim_pipe_make(const sf_graph *g, int m, int D, int copies, sf_error *err) {
    struct sim_pipe *p = calloc(1, sizeof *p);
    if (!p) {
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->m = m;
    p->copies = copies;
    p->gu = sf_graph_micro_batch_copies(g, m * D, copies, err);
    if (!p->gu) {
        sim_pipe_release(p);
        return NULL;
    }
    int nu = sf_graph_num_ops(p->gu);
    p->bar = malloc((size_t)4 * nu * sizeof *p->bar);
    p->only = calloc((size_t)nu, 1);
    if (!p->bar || !p->only) {
        sim_pipe_release(p);
        sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return p;
}

/* The barriers of pipeline pl on the copies of g's n operators: each copy's
 * slots in its stage's schedule. */
static sf_status pipe_barriers(struct sim_pipe *pp, const sf_graph *g, const sf_pipeline *pl,
                               sf_error *err) {
    int n = sf_graph_num_ops(g), p = pl->stages, m = pl->micro_batches, nc = p * pl->chunks;
    int per = 2 * m * pl->chunks; /* slots a stage */
    int *chunk = malloc((size_t)(n ? n : 1) * sizeof *chunk);
    /* slot_of[(chunk * m + mb) * 2 + backward]: the slot's place in its stage */
    int *slot_of = malloc((size_t)nc * m * 2 * sizeof *slot_of);
    sf_pipe_slot *sl = malloc((size_t)per * sizeof *sl);
    if (!chunk || !slot_of || !sl) {
        free(chunk);
        free(slot_of);
        free(sl);
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    }
    sf_pipeline_op_chunks(pl, g, chunk);
    for (int s = 0; s < p; s++) {
        int k = sf_pipeline_slots(pl, s, sl);
        for (int i = 0; i < k; i++) {
            int c = sl[i].chunk;
            slot_of[(c * m + sl[i].mb) * 2 + sl[i].backward] = s * per + i;
        }
    }
    /* the sums hold the micro-batches in flight at once on the stage that
     * holds most: a copy past them is the timeline's alone */
    int most = 0;
    for (int s = 0; s < p; s++) {
        int f = sf_pipeline_in_flight(pl, s);
        if (f > most) most = f;
    }
    for (int j = 0; j < m; j++) {
        for (int i = 0; i < n; i++) {
            int u = j * n + i, c = chunk[i];
            for (int bw = 0; bw < 2; bw++) {
                int at = slot_of[(c * m + j) * 2 + bw];
                pp->bar[4 * u + 2 * bw] = at;
                pp->bar[4 * u + 2 * bw + 1] = at % per ? at - 1 : -1;
            }
            pp->only[u] = j >= most ? SIM_PIPE_LATE : j == 0 ? SIM_PIPE_FIRST : SIM_PIPE_MIDDLE;
        }
    }
    pp->n_bar = p * per;
    pp->per = per;
    free(chunk);
    free(slot_of);
    free(sl);
    return SF_OK;
}

sf_status sim_pipe_prepare(struct sim_pipe *p, const sf_graph *g, const sf_strategy *s,
                           sf_error *err) {
    sf_pipeline pl = *sf_strategy_pipeline(s);
    pl.micro_batches = p->copies; /* the fast path's runs schedule fewer than m */
    sf_status st = pipe_barriers(p, g, &pl, err);
    if (st != SF_OK) return st;
    int n = sf_graph_num_ops(g), nu = sf_graph_num_ops(p->gu);
    for (int u = 0; u < nu; u++)
        sf_config_copy(sf_strategy_config(p->inner->s, u), sf_strategy_get(s, u % n));
    return SF_OK;
}

sf_status sim_pipe_copies(struct sim_pipe *p, const sf_graph *g, int n, const int *ops,
                          const sf_config *cfgs, sf_error *err) {
    int m = p->copies, total = n * m, n_ops = sf_graph_num_ops(g);
    if (total > p->cap) {
        int *o = realloc(p->ops, (size_t)total * sizeof *o);
        if (o) p->ops = o;
        sf_config *c = realloc(p->cfgs, (size_t)total * sizeof *c);
        if (c) p->cfgs = c;
        if (!o || !c) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        p->cap = total;
    }
    for (int mb = 0; mb < m; mb++)
        for (int j = 0; j < n; j++) {
            p->ops[mb * n + j] = mb * n_ops + ops[j];
            sf_config_copy(&p->cfgs[mb * n + j], &cfgs[j]);
        }
    return SF_OK;
}

/* ---- the fast path's results (sim.c runs the schedules) ------------------- */

int sim_fast_result_alloc(sim_fast_result *f, int n_dev) {
    size_t n = (size_t)(n_dev > 0 ? n_dev : 1);
    memset(f, 0, sizeof *f);
    f->busy = malloc(n * sizeof *f->busy);
    f->mem = malloc(n * sizeof *f->mem);
    f->live = malloc(n * sizeof *f->live);
    f->live_t = malloc(n * sizeof *f->live_t);
    f->kinds = malloc(n * SF_SIM_MEM_KIND_COUNT * sizeof *f->kinds);
    f->totals = malloc(n * SF_SIM_TOTAL_COUNT * sizeof *f->totals);
    if (f->busy && f->mem && f->live && f->live_t && f->kinds && f->totals) return 0;
    sim_fast_result_free(f);
    return -1;
}

void sim_fast_result_free(sim_fast_result *f) {
    free(f->busy);
    free(f->mem);
    free(f->live);
    free(f->live_t);
    free(f->kinds);
    free(f->totals);
    memset(f, 0, sizeof *f);
}
