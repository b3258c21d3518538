/*
 * mcmc_pipe.c - the MCMC search inside a pipeline (docs/search.md, "Pipelines
 * in the search"): the stages' device groups, configs kept inside them, and
 * the moves of the pipeline itself.
 *
 * A pipelined strategy is valid only when its stages share no device, every
 * operator's sample split fits a micro-batch and no ZeRO stage above 1 runs
 * over micro-batches (sf_pipeline_validate). A proposal drawn over the whole
 * machine breaks the first rule almost always, so every config move of the
 * chain is made inside the operator's stage: drawn on the stage's group
 * (mc_random_in_group), moved along it (mc_shift_in_group), or, when it comes
 * from elsewhere (a neighbour's config across a stage boundary, a candidate of
 * the polish, a template member on another stage), mapped into it by the
 * places of its devices in their groups (mc_home). The other two rules are
 * checked per operator (mc_pipe_config_ok), so that no proposal the chain
 * simulates is invalid.
 *
 * The pipeline moves build the whole proposed strategy (cand) and the caller
 * judges it by a full simulation: a change of the boundaries, m or the
 * schedule changes every micro-batch copy's barriers, and m the micro-batch
 * graph itself, which no delta update covers.
 */
#include "mcmc_impl.h"

#include <stdlib.h>
#include <string.h>

int mc_groups_init(mc_groups *gr, int n_ops, int n_dev) {
    memset(gr, 0, sizeof *gr);
    gr->n_ops = n_ops;
    gr->n_dev = n_dev;
    gr->chunk = malloc((size_t)(n_ops > 0 ? n_ops : 1) * sizeof *gr->chunk);
    gr->dev_stage = malloc((size_t)n_dev * sizeof *gr->dev_stage);
    gr->dev_idx = malloc((size_t)n_dev * sizeof *gr->dev_idx);
    gr->grp_start = malloc((SF_MAX_PIPE_CHUNKS + 1) * sizeof *gr->grp_start);
    gr->grp_dev = malloc((size_t)n_dev * sizeof *gr->grp_dev);
    gr->fill = malloc(SF_MAX_PIPE_CHUNKS * sizeof *gr->fill);
    if (!gr->chunk || !gr->dev_stage || !gr->dev_idx || !gr->grp_start || !gr->grp_dev ||
        !gr->fill) {
        mc_groups_free(gr);
        return -1;
    }
    return 0;
}

void mc_groups_free(mc_groups *gr) {
    free(gr->chunk);
    free(gr->dev_stage);
    free(gr->dev_idx);
    free(gr->grp_start);
    free(gr->grp_dev);
    free(gr->fill);
    memset(gr, 0, sizeof *gr);
}

void mc_groups_compute(mc_groups *gr, const sf_graph *g, const sf_strategy *s) {
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    int n = gr->n_ops, nd = gr->n_dev;
    gr->stages = pl->stages;
    gr->m = pl->micro_batches;
    gr->per_mb = sf_graph_batch(g) / pl->micro_batches;
    sf_pipeline_op_chunks(pl, g, gr->chunk);
    for (int d = 0; d < nd; d++) gr->dev_stage[d] = -1;
    for (int i = 0; i < n; i++) {
        const sf_config *c = sf_strategy_get(s, i);
        int st = gr->chunk[i] % gr->stages;
        for (int q = 0; q < c->n_parts; q++) gr->dev_stage[c->device[q]] = st;
    }
    /* idle devices: the stage of the nearest device in use below, else above */
    int last = -1;
    for (int d = 0; d < nd; d++) {
        if (gr->dev_stage[d] >= 0)
            last = gr->dev_stage[d];
        else if (last >= 0)
            gr->dev_stage[d] = -2 - last; /* marked: taken from below */
    }
    int first = -1;
    for (int d = 0; d < nd && first < 0; d++)
        if (gr->dev_stage[d] >= 0) first = gr->dev_stage[d];
    for (int d = 0; d < nd; d++) {
        if (gr->dev_stage[d] <= -2)
            gr->dev_stage[d] = -2 - gr->dev_stage[d];
        else if (gr->dev_stage[d] == -1)
            gr->dev_stage[d] = first >= 0 ? first : 0;
    }
    for (int k = 0; k <= gr->stages; k++) gr->grp_start[k] = 0;
    for (int d = 0; d < nd; d++) gr->grp_start[gr->dev_stage[d] + 1]++;
    for (int k = 0; k < gr->stages; k++) gr->grp_start[k + 1] += gr->grp_start[k];
    for (int k = 0; k < gr->stages; k++) gr->fill[k] = 0;
    for (int d = 0; d < nd; d++) { /* in increasing order: each group sorted */
        int st = gr->dev_stage[d];
        gr->dev_idx[d] = gr->fill[st]++;
        gr->grp_dev[gr->grp_start[st] + gr->dev_idx[d]] = d;
    }
}

void mc_home(const mc_groups *gr, int stage, sf_config *c) {
    int base = gr->grp_start[stage], size = mc_group_size(gr, stage);
    for (int q = 0; q < c->n_parts; q++) {
        int d = c->device[q];
        if (gr->dev_stage[d] == stage) continue;
        c->device[q] = (int16_t)gr->grp_dev[base + gr->dev_idx[d] % size];
    }
}

int mc_pipe_config_ok(const mc_groups *gr, const sf_op *op, const sf_config *c) {
    if (op->space.ndim > 0 && op->kinds[0] == SF_DIM_SAMPLE && c->ndim > 0 &&
        c->degree[0] > gr->per_mb)
        return 0;
    if (c->zero > SF_ZERO_OPTIMIZER && gr->m > 1) return 0;
    return 1;
}

void mc_random_in_group(const mc_groups *gr, int stage, const sf_op *op, int reduce, sf_rng *rng,
                        sf_config *c) {
    int size = mc_group_size(gr, stage), base = gr->grp_start[stage];
    int order[SF_MAX_DIMS], n = 0, degree[SF_MAX_DIMS];
    for (int i = 0; i < op->space.ndim; i++) {
        degree[i] = 1;
        if (op->kinds[i] != SF_DIM_NONE && sf_op_dim_opt_in(op, i) <= reduce && op->space.d[i] > 1)
            order[n++] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)sf_rng_below(rng, (uint64_t)i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int left = size < SF_MAX_PARTS ? size : SF_MAX_PARTS;
    for (int k = 0; k < n && left > 1; k++) {
        int d = order[k];
        int64_t cap = op->space.d[d] < left ? op->space.d[d] : left;
        /* the samples at most a micro-batch's */
        if (op->kinds[d] == SF_DIM_SAMPLE && d == 0 && cap > gr->per_mb) cap = gr->per_mb;
        degree[d] = 1 + (int)sf_rng_below(rng, (uint64_t)cap);
        left /= degree[d];
    }
    sf_config_set_degrees(c, op->space.ndim, degree); /* at most size parts: cannot fail */
    if (sf_rng_below(rng, 2) == 0) {
        int s = (int)sf_rng_below(rng, (uint64_t)size);
        for (int p = 0; p < c->n_parts; p++)
            c->device[p] = (int16_t)gr->grp_dev[base + (s + p) % size];
    } else {
        /* distinct places by a partial shuffle of the group's (at most SF_MAX_DEVICES) */
        int16_t place[SF_MAX_DEVICES];
        for (int j = 0; j < size; j++) place[j] = (int16_t)j;
        for (int p = 0; p < c->n_parts; p++) {
            int j = p + (int)sf_rng_below(rng, (uint64_t)(size - p));
            int16_t t = place[p];
            place[p] = place[j];
            place[j] = t;
            c->device[p] = (int16_t)gr->grp_dev[base + place[p]];
        }
    }
}

void mc_shift_in_group(const mc_groups *gr, int stage, const sf_config *cur, sf_rng *rng,
                       sf_config *c) {
    int size = mc_group_size(gr, stage), base = gr->grp_start[stage];
    sf_config_copy(c, cur);
    int s = (int)sf_rng_below(rng, (uint64_t)size);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)gr->grp_dev[base + (s + p) % size];
}

/* The id of the k-th operator that is not an input after (dir > 0) or before
 * (dir < 0) `from`; -1 past the graph. */
static int step_real(const sf_graph *g, int from, int dir, int k) {
    int n = sf_graph_num_ops(g), i = from;
    while (k > 0) {
        i += dir;
        if (i < 0 || i >= n) return -1;
        if (sf_graph_op(g, i)->type != SF_OP_INPUT) k--;
    }
    return i;
}

/* The next layer start after (dir > 0) or before (dir < 0) `from`; -1 none. */
static int step_layer(const sf_templates *t, int from, int dir) {
    if (dir > 0) {
        for (int k = 0; k < t->n_layers; k++)
            if (t->layer_start[k] > from) return t->layer_start[k];
    } else {
        for (int k = t->n_layers - 1; k >= 0; k--)
            if (t->layer_start[k] < from) return t->layer_start[k];
    }
    return -1;
}

/* The valid micro-batch counts for pl in s, in increasing order, into out
 * (room for 64); how many. */
static int mb_choices(const sf_graph *g, const sf_strategy *s, const sf_pipeline *pl,
                      int64_t most_samples, int *out) {
    int64_t batch = sf_graph_batch(g);
    int cap = 8 * pl->stages > pl->micro_batches ? 8 * pl->stages : pl->micro_batches;
    int n = 0;
    (void)s;
    for (int64_t d = 1; d <= batch && d <= cap && n < 64; d++) {
        if (batch % d != 0 || batch / d < most_samples) continue;
        if (pl->schedule == SF_PIPE_INTERLEAVED && d % pl->stages != 0) continue;
        out[n++] = (int)d;
    }
    return n;
}

int mc_pipe_propose(const sf_graph *g, const sf_machine *m, const sf_templates *t,
                    const mc_groups *gr, const sf_strategy *cur, sf_rng *rng, int *scratch,
                    sf_strategy *cand) {
    const sf_pipeline *pl = sf_strategy_pipeline(cur);
    sf_pipeline np = *pl;
    int nc = pl->stages * pl->chunks, n = sf_graph_num_ops(g);
    uint64_t draw = sf_rng_below(rng, 8);
    int kind = draw < 5 ? MC_PIPE_BOUNDARY : draw < 7 ? MC_PIPE_MICRO_BATCHES : MC_PIPE_SCHEDULE;
    if (kind == MC_PIPE_SCHEDULE && pl->schedule == SF_PIPE_INTERLEAVED) kind = MC_PIPE_BOUNDARY;
    if (kind == MC_PIPE_BOUNDARY && nc < 2) kind = MC_PIPE_MICRO_BATCHES;
    if (kind == MC_PIPE_BOUNDARY) {
        int c = 1 + (int)sf_rng_below(rng, (uint64_t)(nc - 1));
        int dir = sf_rng_below(rng, 2) ? 1 : -1;
        int to = -1;
        if (t && t->n_layers > 1 && sf_rng_below(rng, 2))
            to = step_layer(t, pl->first[c], dir);
        else
            to = step_real(g, pl->first[c], dir, 1 + (int)sf_rng_below(rng, 3));
        int lo = pl->first[c - 1], hi = c + 1 < nc ? pl->first[c + 1] : n;
        if (to <= lo || to >= hi) return -1;
        np.first[c] = to;
    } else if (kind == MC_PIPE_MICRO_BATCHES) {
        int64_t most = 1;
        for (int i = 0; i < n; i++) {
            const sf_op *op = sf_graph_op(g, i);
            const sf_config *c = sf_strategy_get(cur, i);
            if (op->space.ndim > 0 && op->kinds[0] == SF_DIM_SAMPLE && c->ndim > 0 &&
                c->degree[0] > most)
                most = c->degree[0];
        }
        int ch[64];
        int k = mb_choices(g, cur, pl, most, ch), at = -1;
        for (int j = 0; j < k; j++)
            if (ch[j] == pl->micro_batches) at = j;
        if (k < 2 || at < 0) return -1;
        int j;
        if (sf_rng_below(rng, 4) == 0) {
            j = (int)sf_rng_below(rng, (uint64_t)(k - 1));
            if (j >= at) j++;
        } else {
            j = at + (sf_rng_below(rng, 2) ? 1 : -1);
            if (j < 0) j = 1;
            if (j >= k) j = k - 2;
        }
        np.micro_batches = ch[j];
    } else {
        np.schedule = pl->schedule == SF_PIPE_GPIPE ? SF_PIPE_1F1B : SF_PIPE_GPIPE;
    }
    sf_strategy_copy(cand, cur);
    sf_strategy_set_pipeline(cand, &np);
    if (kind == MC_PIPE_BOUNDARY) {
        /* the operators that change stage move into their new stage's group */
        sf_pipeline_op_chunks(&np, g, scratch);
        for (int i = 0; i < n; i++) {
            int st = scratch[i] % np.stages;
            if (st != mc_stage_of(gr, i)) mc_home(gr, st, sf_strategy_config(cand, i));
        }
    }
    if (sf_strategy_validate(cand, g, m, NULL) != SF_OK) return -1;
    return kind;
}
