/*
 * pipeline.c - pipelines: chunks of operators on stages, micro-batches, and
 * the schedules that order each stage's passes (docs/formats-strategy.md,
 * "Pipelines").
 *
 * The schedules, for stage s of p with m micro-batches:
 *   gpipe        F0 .. F(m-1), then B0 .. B(m-1);
 *   1f1b         w = min(p - s - 1, m) forwards, then m - w pairs (F(w + i), B(i)),
 *                then the last w backwards (PipeDream-Flush; Narayanan et al. 2021);
 *   interleaved  the same over v chunks a stage, on units of (micro-batch,
 *                chunk): forward unit k is micro-batch (k / pv) p + k % p of local
 *                chunk (k / p) % v, backward unit k the same micro-batch of local
 *                chunk v - 1 - (k / p) % v, with w = min(2 (p - s - 1) + (v - 1) p,
 *                m v) warm-up forwards (Megatron-LM's interleaved 1F1B, which
 *                needs m to be a multiple of p).
 * Local chunk l of stage s is the model's chunk l p + s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/strategy.h"

static const char *const schedule_names[SF_PIPE_SCHEDULE_COUNT] = {"gpipe", "1f1b",
                                                                   "interleaved"};

const char *sf_pipe_schedule_name(sf_pipe_schedule s) {
    return (unsigned)s < SF_PIPE_SCHEDULE_COUNT ? schedule_names[s] : NULL;
}

int sf_pipe_schedule_parse(const char *text, sf_pipe_schedule *out, int *chunks) {
    if (!text) return -1;
    if (strcmp(text, "gpipe") == 0 || strcmp(text, "1f1b") == 0) {
        *out = text[0] == 'g' ? SF_PIPE_GPIPE : SF_PIPE_1F1B;
        *chunks = 1;
        return 0;
    }
    const char *il = "interleaved";
    size_t n = strlen(il);
    if (strncmp(text, il, n) != 0) return -1;
    int v = 2;
    if (text[n] == ':') {
        char *end;
        long x = strtol(text + n + 1, &end, 10);
        if (end == text + n + 1 || *end || x < 2 || x > SF_MAX_PIPE_CHUNKS) return -1;
        v = (int)x;
    } else if (text[n]) {
        return -1;
    }
    *out = SF_PIPE_INTERLEAVED;
    *chunks = v;
    return 0;
}

char *sf_pipe_schedule_str(const sf_pipeline *pl, char *buf, size_t n) {
    const char *name = sf_pipe_schedule_name((sf_pipe_schedule)pl->schedule);
    if (!name) name = "?";
    if (pl->schedule == SF_PIPE_INTERLEAVED)
        snprintf(buf, n, "%s:%d", name, pl->chunks);
    else
        snprintf(buf, n, "%s", name);
    return buf;
}

char *sf_pipeline_describe(const sf_pipeline *pl, const sf_graph *g, char *buf, size_t n) {
    if (n == 0) return buf;
    char sch[32];
    int64_t batch = sf_graph_batch(g);
    int nc = pl->stages * pl->chunks;
    size_t k = (size_t)snprintf(buf, n, "%d stage%s, %d micro-batch%s of %lld, %s", pl->stages,
                                pl->stages == 1 ? "" : "s", pl->micro_batches,
                                pl->micro_batches == 1 ? "" : "es",
                                (long long)(pl->micro_batches > 0 ? batch / pl->micro_batches : 0),
                                sf_pipe_schedule_str(pl, sch, sizeof sch));
    for (int c = 1; c < nc && k < n; c++) {
        const sf_op *op = sf_graph_op(g, pl->first[c]);
        const char *name = op ? op->name : "?";
        size_t need = strlen(name) + 16;
        if (k + need + 4 >= n) {
            snprintf(buf + k, n - k, " ...");
            break;
        }
        k += (size_t)snprintf(buf + k, n - k, "%s%s", c == 1 ? ", chunks from " : " | ", name);
    }
    return buf;
}

void sf_pipeline_op_chunks(const sf_pipeline *pl, const sf_graph *g, int *chunk) {
    int n = sf_graph_num_ops(g), nc = pl->stages * pl->chunks, c = 0;
    for (int i = 0; i < n; i++) {
        while (c + 1 < nc && i >= pl->first[c + 1]) c++;
        chunk[i] = c;
    }
    /* an input goes where it is first read */
    for (int i = 0; i < n; i++) {
        if (sf_graph_op(g, i)->type == SF_OP_INPUT) chunk[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) {
            int p = op->inputs[k].op;
            if (chunk[p] < 0) chunk[p] = chunk[i];
        }
    }
    for (int i = 0; i < n; i++)
        if (chunk[i] < 0) chunk[i] = 0;
}

/* Unit k of a direction of the interleaved schedule: its micro-batch and the
 * model chunk, on stage s. */
static void il_unit(const sf_pipeline *pl, int s, int k, int backward, sf_pipe_slot *o) {
    int p = pl->stages, v = pl->chunks;
    int local = (k / p) % v;
    if (backward) local = v - 1 - local;
    o->mb = (k / (p * v)) * p + k % p;
    o->chunk = local * p + s;
    o->backward = backward;
}

int sf_pipeline_slots(const sf_pipeline *pl, int s, sf_pipe_slot *out) {
    int p = pl->stages, m = pl->micro_batches, v = pl->chunks;
    int units = m * v, n = 0;
    if (pl->schedule == SF_PIPE_GPIPE) {
        for (int j = 0; j < m; j++) out[n++] = (sf_pipe_slot){j, s, 0};
        for (int j = 0; j < m; j++) out[n++] = (sf_pipe_slot){j, s, 1};
        return n;
    }
    int warm;
    if (pl->schedule == SF_PIPE_1F1B) {
        warm = p - s - 1;
    } else {
        warm = 2 * (p - s - 1) + (v - 1) * p;
    }
    if (warm > units) warm = units;
    int f = 0, b = 0;
    for (; f < warm; f++) il_unit(pl, s, f, 0, &out[n++]);
    while (f < units) {
        il_unit(pl, s, f++, 0, &out[n++]);
        il_unit(pl, s, b++, 1, &out[n++]);
    }
    while (b < units) il_unit(pl, s, b++, 1, &out[n++]);
    return n;
}

int sf_pipeline_in_flight(const sf_pipeline *pl, int s) {
    int n = 2 * pl->micro_batches * pl->chunks;
    sf_pipe_slot *sl = malloc((size_t)(n ? n : 1) * sizeof *sl);
    if (!sl) return pl->micro_batches;
    sf_pipeline_slots(pl, s, sl);
    int live = 0, most = 0;
    for (int i = 0; i < n; i++) {
        live += sl[i].backward ? -1 : 1;
        if (live > most) most = live;
    }
    free(sl);
    return (most + pl->chunks - 1) / pl->chunks;
}

sf_status sf_pipeline_validate(const sf_pipeline *pl, const sf_strategy *s, const sf_graph *g,
                               const sf_machine *m, sf_error *err) {
    int n = sf_graph_num_ops(g);
    int p = pl->stages, v = pl->chunks, mb = pl->micro_batches;
    if (p < 1 || v < 1 || (int64_t)p * v > SF_MAX_PIPE_CHUNKS)
        return sf_error_set(err, SF_ERR_RANGE,
                            "pipeline: %d stages of %d chunks (1 to %d chunks in all)", p, v,
                            SF_MAX_PIPE_CHUNKS);
    if (!sf_pipe_schedule_name((sf_pipe_schedule)pl->schedule))
        return sf_error_set(err, SF_ERR_INVALID, "pipeline: schedule %d is not one of gpipe, "
                                                 "1f1b, interleaved:V", pl->schedule);
    if (pl->schedule == SF_PIPE_INTERLEAVED && v < 2)
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: the interleaved schedule needs 2 or more chunks a stage");
    if (pl->schedule != SF_PIPE_INTERLEAVED && v != 1)
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: %d chunks a stage need the interleaved schedule", v);
    int64_t batch = sf_graph_batch(g);
    if (mb < 1 || batch % mb != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: %d micro-batches do not divide the batch of %lld", mb,
                            (long long)batch);
    if (pl->schedule == SF_PIPE_INTERLEAVED && mb % p != 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: the interleaved schedule needs the micro-batches (%d) to be "
                            "a multiple of the stages (%d)",
                            mb, p);
    int nc = p * v;
    if (pl->first[0] != 0)
        return sf_error_set(err, SF_ERR_INVALID, "pipeline: the first chunk must start at "
                                                 "operator 0");
    for (int c = 1; c < nc; c++)
        if (pl->first[c] <= pl->first[c - 1] || pl->first[c] >= n)
            return sf_error_set(err, SF_ERR_INVALID,
                                "pipeline: chunk %d starts at operator %d, not after chunk %d's "
                                "start (%d) and before the end (%d operators)",
                                c, pl->first[c], c - 1, pl->first[c - 1], n);
    int *chunk = malloc((size_t)(n ? n : 1) * sizeof *chunk);
    int16_t *stage_of = malloc(SF_MAX_DEVICES * sizeof *stage_of);
    int *op_of = malloc(SF_MAX_DEVICES * sizeof *op_of);
    int *real = calloc((size_t)nc, sizeof *real);
    sf_status st = SF_OK;
    if (!chunk || !stage_of || !op_of || !real) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto out;
    }
    sf_pipeline_op_chunks(pl, g, chunk);
    for (int d = 0; d < SF_MAX_DEVICES; d++) stage_of[d] = -1;
    int64_t per_mb = batch / mb;
    for (int i = 0; i < n && st == SF_OK; i++) {
        const sf_op *op = sf_graph_op(g, i);
        const sf_config *c = sf_strategy_get(s, i);
        int stg = chunk[i] % p;
        if (op->type != SF_OP_INPUT) real[chunk[i]] = 1;
        if (op->space.ndim > 0 && op->kinds[0] == SF_DIM_SAMPLE && c->ndim > 0 &&
            c->degree[0] > per_mb)
            st = sf_error_set(err, SF_ERR_INVALID,
                              "pipeline: operator '%s' splits its samples %d ways, but a "
                              "micro-batch has %lld",
                              op->name, c->degree[0], (long long)per_mb);
        else if (c->zero > SF_ZERO_OPTIMIZER && mb > 1)
            st = sf_error_set(err, SF_ERR_UNSUPPORTED,
                              "pipeline: operator '%s' has ZeRO stage %d; inside a pipeline of "
                              "micro-batches only stage 1 (sharded gradients or weights would "
                              "be reduced or gathered once per micro-batch)",
                              op->name, c->zero);
        for (int q = 0; q < c->n_parts && st == SF_OK; q++) {
            int d = c->device[q];
            if (d < 0 || d >= SF_MAX_DEVICES) continue; /* sf_config_validate says so */
            if (stage_of[d] < 0) {
                stage_of[d] = (int16_t)stg;
                op_of[d] = i;
            } else if (stage_of[d] != stg) {
                st = sf_error_set(err, SF_ERR_INVALID,
                                  "pipeline: device %d is in stage %d (operator '%s') and in "
                                  "stage %d (operator '%s'); stages share no device",
                                  d, stage_of[d], sf_graph_op(g, op_of[d])->name, stg, op->name);
            }
        }
    }
    for (int c = 0; c < nc && st == SF_OK; c++)
        if (!real[c])
            st = sf_error_set(err, SF_ERR_INVALID, "pipeline: chunk %d holds no operator but inputs",
                              c);
    (void)m;
out:
    free(chunk);
    free(stage_of);
    free(op_of);
    free(real);
    return st;
}

static sf_status chunks_out_of_range(int p, int v, sf_error *err) {
    return sf_error_set(err, SF_ERR_RANGE, "pipeline: %d stages of %d chunks (at most %d)", p, v,
                        SF_MAX_PIPE_CHUNKS);
}

sf_status sf_pipeline_even(sf_pipeline *pl, const sf_graph *g, int p, int v, int m,
                           sf_pipe_schedule schedule, sf_error *err) {
    int n = sf_graph_num_ops(g), nc = p * v;
    if (p < 1 || v < 1 || nc > SF_MAX_PIPE_CHUNKS) return chunks_out_of_range(p, v, err);
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    if (!w) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    double total = 0;
    int real = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        w[i] = 0;
        if (op->type == SF_OP_INPUT) continue;
        real++;
        sf_tile t = sf_tile_full(&op->space);
        sf_op_cost c;
        sf_op_tile_cost(op, &t, &c);
        /* FLOPs, with a floor so that cheap operators still count a little */
        w[i] = c.flops_fwd + c.flops_bwd + 1e3;
        total += w[i];
    }
    if (real < nc) {
        free(w);
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: model '%s' has %d operators, fewer than %d chunks",
                            sf_graph_name(g), real, nc);
    }
    memset(pl, 0, sizeof *pl);
    pl->stages = p;
    pl->chunks = v;
    pl->micro_batches = m;
    pl->schedule = (int)schedule;
    pl->first[0] = 0;
    /* chunk c starts at the first operator whose middle lies past c / nc of the
     * work (the cut nearest that share), and never
     * before each earlier chunk holds a real operator and each later one can */
    double acc = 0;
    int c = 1, since = 0, left = real;
    for (int i = 0; i < n && c < nc; i++) {
        int is_real = sf_graph_op(g, i)->type != SF_OP_INPUT;
        if (is_real && since > 0 && (acc + w[i] / 2 >= total * c / nc || left <= nc - c)) {
            pl->first[c++] = i;
            since = 0;
        }
        acc += w[i];
        if (is_real) {
            since++;
            left--;
        }
    }
    free(w);
    return SF_OK;
}

sf_strategy *sf_strategy_unroll(const sf_strategy *s, const sf_graph *g, const sf_graph *gu) {
    sf_strategy *su = sf_strategy_new(gu);
    if (!su) return NULL;
    int n = sf_graph_num_ops(g), nu = sf_graph_num_ops(gu);
    for (int u = 0; u < nu; u++) sf_config_copy(sf_strategy_config(su, u), sf_strategy_get(s, u % n));
    return su;
}

/* The first operator of each transformer block: for every attention operator,
 * the operator that starts its branch off the residual stream (walking back
 * from it through its first input while that is a layer norm, a dropout or a
 * reshape: GPT's ln_1). Writes at most cap; returns how many there are. */
static int block_starts(const sf_graph *g, int *start, int cap) {
    int n = sf_graph_num_ops(g), nb = 0;
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->type != SF_OP_ATTENTION) continue;
        int j = i;
        for (;;) {
            const sf_op *q = sf_graph_op(g, j);
            if (q->n_inputs < 1) break;
            int p = q->inputs[0].op;
            sf_op_type t = sf_graph_op(g, p)->type;
            if (t != SF_OP_LAYERNORM && t != SF_OP_DROPOUT && t != SF_OP_RESHAPE) break;
            j = p;
        }
        if (nb > 0 && nb <= cap && j <= start[nb - 1]) continue; /* not a new block */
        if (nb < cap) start[nb] = j;
        nb++;
    }
    return nb;
}

sf_status sf_pipeline_blocks(sf_pipeline *pl, const sf_graph *g, int p, int v, int m,
                             sf_pipe_schedule schedule, sf_error *err) {
    int n = sf_graph_num_ops(g), nc = p * v;
    if (p < 1 || v < 1 || nc > SF_MAX_PIPE_CHUNKS) return chunks_out_of_range(p, v, err);
    int *start = malloc((size_t)(n ? n : 1) * sizeof *start);
    if (!start) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    int nb = block_starts(g, start, n);
    if (nb == 0) {
        free(start);
        return sf_pipeline_even(pl, g, p, v, m, schedule, err);
    }
    if (nb < nc) {
        free(start);
        return sf_error_set(err, SF_ERR_INVALID,
                            "pipeline: model '%s' has %d transformer blocks, fewer than the %d "
                            "chunks of %d stages",
                            sf_graph_name(g), nb, nc, p);
    }
    memset(pl, 0, sizeof *pl);
    pl->stages = p;
    pl->chunks = v;
    pl->micro_batches = m;
    pl->schedule = (int)schedule;
    pl->first[0] = 0;
    /* chunk c from block floor(c nb / nc): the first chunks (with the
     * embedding) get the fewer blocks when they do not divide */
    for (int c = 1; c < nc; c++) pl->first[c] = start[(int64_t)c * nb / nc];
    free(start);
    return SF_OK;
}
