/*
 * pipe_pass.c - the search's pipeline pass: an inter-operator pass in the
 * spirit of Alpa's (Zheng et al. 2022) and PipeDream's planner (Narayanan et
 * al. 2019), over templates rather than a dynamic program.
 *
 * It enumerates the stage count P (powers of two dividing the devices, at
 * most one stage a transformer block), the device group of a stage (T D
 * devices: whole nodes, or a divisor of a node), and inside it:
 *   transformer graphs  Megatron's 3D template (sf_strategy_megatron3d) at every
 *                       tensor degree T (a power of two dividing a node), data
 *                       degree D = devices / (T P), micro-batch size B (powers
 *                       of two, at least P micro-batches when P > 1), 1F1B,
 *                       and recomputation none, selective, full; the fastest
 *                       that fits is tried interleaved (2 chunks a stage) too;
 *   other graphs        sf_pipeline_even's FLOP-balanced stages, each stage's
 *                       operators data parallel over its devices, m = P, 2P
 *                       or 4P micro-batches, recomputation none or full.
 * Each candidate is judged by the simulator with its memory over the timeline
 * (a pipeline's micro-batches are not alive at once), the fastest that fits
 * wins (else the one of smallest peak). Three cut-offs keep the pass inside
 * its budget on GPT-3 over 1024 devices, where one pipelined simulation takes
 * seconds: a candidate whose weights with their gradients and optimizer state
 * alone (total / (T P) a device) exceed a device's memory is not simulated;
 * one whose task graph would exceed the task limit (about batch T ops / B
 * tasks, over the data-parallel groups that fold into one) is not either;
 * and for one (T, P) heavier recomputation at micro-batch size B is tried
 * only while no lighter one fits at B or above (it is never faster, and a
 * smaller micro-batch holds less). Candidates run cheapest first (their task
 * graph, or for one probed its probes') and the pass stops at its budget.
 * OptCNN's dynamic
 * program restricted to a stage's devices is not tried (docs/search.md).
 */
#include "soapflow/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rc_names[] = {"none", "selective", "full"};

typedef struct cand {
    int T, P, D, B, rc;
    int64_t m;
    double est_tasks; /* about batch T ops / B: the task graph's size */
    int fit;          /* simulated (or probed) and fits */
    double est_s;     /* the probes' estimate of its iteration (INFINITY: none) */
    double cost;      /* what judging it costs the pass: its task graph, or its probes' */
} cand;

/* The micro-batches k of a candidate's first probe (below): P, or the least
 * divisor of m above it; 0 when probing would not save work (m < 4k, or 2k
 * not dividing m). */
static int64_t probe_k(const cand *c) {
    int64_t k = c->P;
    while (k < c->m && c->m % k) k++;
    return 4 * k <= c->m && c->m % (2 * k) == 0 ? k : 0;
}

/* Probes (Megatron candidates of many micro-batches): the candidate simulated
 * with k and 2k of its m micro-batches (k the stage count P, or the least
 * divisor of m at least P), on the model cut to k (2k) micro-batches' batch.
 * 1F1B holds at most P micro-batches at once whatever m is, so the k run's
 * memory peak is the m run's; its steady micro-batches repeat at a period
 * that the 2k run measures, so the iteration at m is about T(2k) + (m - 2k)
 * (T(2k) - T(k)) / k (GPT-3 at tensor 8, pipeline 16, data 8: 8934 ms
 * estimated, 8932 simulated). The pass simulates whole only the candidates the
 * probes say fit, fastest estimate first. Returns 1 when the candidate was
 * probed (c->fit and c->est_s set), 0 when probing would not save work, -1 on
 * an error (out of memory). */
static int probe_cand(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                 const sf_sim_options *o, cand *c, const char *name) {
    int64_t k = probe_k(c);
    if (!k) return 0; /* the runs would cost most of the whole */
    double t[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        int64_t kk = (r + 1) * k;
        sf_error ignore = {0};
        sf_graph *gk = sf_graph_micro_batch_copies(g, (int)(c->m / kk), 1, &ignore);
        sf_strategy *sk = gk ? sf_strategy_new(gk) : NULL;
        sf_sim *sim = sk ? sf_sim_new(gk, m, cm, o, &ignore) : NULL;
        sf_sim_result res;
        int ok = sim && sf_strategy_baseline(sk, name, gk, m, &ignore) == SF_OK &&
                 sf_sim_run(sim, sk, &res, &ignore) == SF_OK;
        sf_sim_free(sim);
        sf_strategy_free(sk);
        sf_graph_free(gk);
        if (!ok) return ignore.code == SF_ERR_NOMEM ? -1 : 0;
        t[r] = res.iter_s;
        if (r == 0) {
            c->fit = res.fits;
            if (!res.fits) { /* it cannot fit with more micro-batches either */
                c->est_s = INFINITY;
                return 1;
            }
        }
    }
    c->est_s = t[1] + (double)(c->m - 2 * k) * (t[1] - t[0]) / (double)k;
    return 1;
}

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->est_tasks != y->est_tasks) return x->est_tasks < y->est_tasks ? -1 : 1;
    if (x->T != y->T) return y->T - x->T;
    if (x->P != y->P) return x->P - y->P;
    if (x->B != y->B) return y->B - x->B;
    return x->rc - y->rc;
}

/* Weights, gradients and optimizer state of the whole graph, bytes. */
static double state_bytes(const sf_graph *g, const sf_cost_model *cm) {
    double params = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) {
        const sf_op *op = sf_graph_op(g, i);
        if (op->weight_owner < 0) params += (double)op->n_params;
    }
    int e = sf_cost_elem_bytes(cm);
    double per = 2.0 * e + (e < 4 ? 4 : 0) + 4.0 * sf_optimizer_state_slots(sf_cost_optimizer(cm));
    return params * per;
}

static int transformer_blocks(const sf_graph *g) {
    int n = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++)
        n += sf_graph_op(g, i)->type == SF_OP_ATTENTION;
    return n;
}

/* The plan's name as the baseline reads it back. */
static void cand_name(const cand *c, int interleaved, char *buf, size_t n) {
    if (c->P > 1 || c->m > 1)
        snprintf(buf, n, "megatron:tp=%d,pp=%d,dp=%d,mb=%d,schedule=%s,recompute=%s", c->T, c->P,
                 c->D, c->B, interleaved ? "interleaved:2" : "1f1b", rc_names[c->rc]);
    else
        snprintf(buf, n, "megatron:tp=%d,recompute=%s", c->T, rc_names[c->rc]);
}

/* Each stage's operators data parallel over its n / P devices (at most a
 * micro-batch's samples), recomputing all but the adds and losses with rc. */
static sf_status staged_data(sf_strategy *s, const sf_graph *g, const sf_machine *m,
                             const sf_pipeline *pl, int rc, sf_error *err) {
    int n = sf_graph_num_ops(g), P = pl->stages, G = sf_machine_num_devices(m) / P;
    int64_t per_mb = sf_graph_batch(g) / pl->micro_batches;
    int *chunk = malloc((size_t)(n ? n : 1) * sizeof *chunk);
    if (!chunk) return sf_error_set(err, SF_ERR_NOMEM, "out of memory");
    sf_pipeline_op_chunks(pl, g, chunk);
    sf_status st = SF_OK;
    for (int i = 0; i < n && st == SF_OK; i++) {
        const sf_op *op = sf_graph_op(g, i);
        int deg[SF_MAX_DIMS];
        for (int k = 0; k < SF_MAX_DIMS; k++) deg[k] = 1;
        int sd = -1;
        for (int k = 0; k < op->space.ndim && sd < 0; k++)
            if (op->kinds[k] == SF_DIM_SAMPLE) sd = k;
        if (sd >= 0) {
            int64_t d = G < per_mb ? G : per_mb;
            deg[sd] = (int)d;
        }
        sf_config *c = sf_strategy_config(s, i);
        st = sf_config_set_degrees(c, op->space.ndim, deg);
        if (st != SF_OK) break;
        for (int q = 0; q < c->n_parts; q++) c->device[q] = (int16_t)(chunk[i] % P * G + q);
        int t = op->type;
        c->recompute = rc && t != SF_OP_INPUT && t != SF_OP_ADD && t != SF_OP_SOFTMAX_CE;
    }
    free(chunk);
    if (st != SF_OK) return sf_error_set(err, st, "pipeline pass: a stage's data parallelism");
    sf_strategy_set_pipeline(s, pl);
    return sf_strategy_validate(s, g, m, err);
}

/* r is better than the plan so far (fits first, then time; else the smaller peak). */
static int wins(const sf_sim_result *r, const sf_search_pipe_plan *p) {
    if (!p->present) return 1;
    if (r->fits != p->fits) return r->fits;
    if (r->fits) return r->iter_s < p->iter_s;
    return r->live_peak_bytes < p->peak_bytes;
}

static void keep(sf_search_pipe_plan *p, const sf_sim_result *r, const sf_strategy *s,
                 sf_strategy *out, const cand *c, const char *name) {
    p->present = 1;
    p->fits = r->fits;
    p->iter_s = r->iter_s;
    p->peak_bytes = r->live_peak_bytes;
    p->tp = c->T;
    p->pp = c->P;
    p->dp = c->D;
    p->micro_batch = c->B;
    p->recompute = c->rc;
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    if (pl) p->pipeline = *pl;
    else memset(&p->pipeline, 0, sizeof p->pipeline);
    snprintf(p->name, sizeof p->name, "%s", name);
    sf_strategy_copy(out, s);
}

/* The most tasks a candidate's task graph may have (estimated: a
 * tensor-parallel candidate has about (T + 1) times est_tasks); a simulation
 * stops a quarter above it. With the memory timeline the simulator keeps some
 * 330 bytes a task (GPT-3 at tensor 8, pipeline 16, data 8 and 192
 * micro-batches: 12.4 M tasks, 4.1 GB resident in `simulate`), so 20 M hold
 * it near 7 GB beside the search's own simulators. */
#define PIPE_PASS_MAX_TASKS 16000000

/* The data-parallel groups the simulator runs as one (docs/simulator.md,
 * "Identical replicas"): Megatron's layout puts each replica's T devices
 * together, so replicas fold by the node (all D when T fills nodes, D T / dpn
 * groups when dpn / T replicas share a node), on a machine of several nodes. */
static int folded_groups(int T, int D, int dpn, int n_dev) {
    if (n_dev <= dpn) return 1;
    int share = T >= dpn ? 1 : dpn / T;
    return D % share == 0 && D / share >= 2 ? D / share : 1;
}

sf_status sf_search_pipeline_pass(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                                  const sf_sim_options *so, double budget_s, int64_t max_tasks,
                                  sf_strategy *out, sf_search_pipe_plan *plan, sf_error *err) {
    memset(plan, 0, sizeof *plan);
    double t0 = sf_now_s();
    sf_sim_options o;
    if (so) o = *so;
    else sf_sim_options_default(&o);
    o.memory_timeline = 1; /* a pipeline's micro-batches are not all alive at once */
    /* the estimate below keeps task graphs in reach, and the limit holds the
     * simulator's memory to about 4 GiB */
    o.max_tasks = PIPE_PASS_MAX_TASKS + PIPE_PASS_MAX_TASKS / 4;
    sf_sim *sim = sf_sim_new(g, m, cm, &o, err);
    if (!sim) return err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
    sf_strategy *s = sf_strategy_new(g);
    int n_dev = sf_machine_num_devices(m), n_ops = sf_graph_num_ops(g);
    const sf_machine_desc *desc = sf_machine_get_desc(m);
    int dpn = desc && desc->devices_per_node > 0 && desc->devices_per_node <= n_dev
                  ? desc->devices_per_node
                  : n_dev;
    int64_t batch = sf_graph_batch(g);
    double mem = sf_machine_device_kind(m, 0)->mem_bytes * (1 - o.memory_headroom);
    double state = state_bytes(g, cm);
    int blocks = transformer_blocks(g);
    cand *cs = malloc(4096 * sizeof *cs);
    sf_status st = SF_OK;
    if (!s || !cs) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    int nc = 0;
    sf_error probe = {0}; /* is it Megatron's pattern? */
    int mega = sf_strategy_megatron(s, g, m, 1, 0, &probe) == SF_OK ||
               probe.code == SF_ERR_INVALID; /* a small batch is still a transformer */
    if (mega && blocks > 0) {
        for (int T = 1; T <= dpn; T *= 2) {
            if (dpn % T) continue;
            for (int P = 1; (int64_t)T * P <= n_dev && P <= blocks; P *= 2) {
                if (n_dev % (T * P)) continue;
                int D = n_dev / (T * P);
                if (batch % D) continue;
                if (state / ((double)T * P) > mem) { /* weights alone do not fit */
                    plan->skipped += 3;
                    continue;
                }
                for (int64_t B = P == 1 ? batch / D : 1; B <= batch / D; B *= 2) {
                    if (batch % (D * B)) continue;
                    int64_t mbs = batch / (D * B);
                    if (P > 1 && mbs < P) break; /* fewer micro-batches than stages */
                    double tasks = (double)batch * T * n_ops / (double)B /
                                   folded_groups(T, D, dpn, n_dev);
                    for (int rc = 0; rc < 3 && nc < 4096; rc++)
                        cs[nc++] = (cand){T, P, D, (int)B, rc, mbs, tasks, 0, INFINITY, 0};
                    if (P == 1) break;
                }
            }
        }
    } else if (!mega) {
        for (int P = 2; P <= n_dev && P <= n_ops / 2; P *= 2) {
            if (n_dev % P) continue;
            for (int k = 1; k <= 4; k *= 2) {
                int64_t mbs = (int64_t)P * k;
                if (batch % mbs) continue;
                for (int rc = 0; rc < 3 && nc < 4096; rc += 2)
                    cs[nc++] = (cand){n_dev / P, P, 1, (int)(batch / mbs), rc, mbs,
                                      (double)batch * n_ops, 0, INFINITY, 0};
            }
        }
    }
    for (int i = 0; i < nc; i++) { /* a probed Megatron candidate costs 3k of its m */
        int64_t k = mega ? probe_k(&cs[i]) : 0;
        cs[i].cost = k ? cs[i].est_tasks * (double)(3 * k) / (double)cs[i].m : cs[i].est_tasks;
    }
    qsort(cs, (size_t)nc, sizeof *cs, cand_cmp);
    /* per (T, P, B): the lightest recomputation that fits so far */
    for (int i = 0; i < nc; i++) {
        const cand *c = &cs[i];
        if (budget_s > 0 && sf_now_s() - t0 > (mega ? 0.6 : 1.0) * budget_s) { /* room for whole runs */
            plan->skipped += nc - i;
            plan->out_of_budget = 1;
            break;
        }
        if ((max_tasks > 0 && c->est_tasks > 4.0 * (double)max_tasks) ||
            c->est_tasks * (c->T + 1) > PIPE_PASS_MAX_TASKS) {
            plan->skipped++;
            continue;
        }
        /* a lighter recomputation fits at this micro-batch size or a larger one
         * (more activations a micro-batch, as many in flight) */
        int lighter_fits = 0;
        for (int j = 0; j < i; j++)
            if (cs[j].T == c->T && cs[j].P == c->P && cs[j].B >= c->B && cs[j].rc < c->rc &&
                cs[j].fit)
                lighter_fits = 1;
        if (lighter_fits) {
            plan->skipped++;
            continue;
        }
        char name[160];
        sf_error ignore = {0};
        if (mega) {
            cand_name(c, 0, name, sizeof name);
            if (sf_strategy_baseline(s, name, g, m, &ignore) != SF_OK) continue;
            int pr = probe_cand(g, m, cm, &o, &cs[i], name);
            if (pr < 0) {
                st = sf_error_set(err, SF_ERR_NOMEM, "pipeline pass: out of memory");
                goto done;
            }
            if (pr > 0) { /* simulated whole below if it is among the fastest */
                plan->probed++;
                continue;
            }
        } else {
            sf_pipeline pl;
            if (sf_pipeline_even(&pl, g, c->P, 1, (int)c->m, SF_PIPE_1F1B, &ignore) != SF_OK ||
                staged_data(s, g, m, &pl, c->rc, &ignore) != SF_OK)
                continue;
            snprintf(name, sizeof name, "pipeline:pp=%d,m=%lld,data,recompute=%s", c->P,
                     (long long)c->m, rc_names[c->rc]);
        }
        sf_sim_result r;
        plan->tried++;
        if (sf_sim_run(sim, s, &r, &ignore) != SF_OK) continue;
        cs[i].fit = r.fits;
        if (wins(&r, plan)) keep(plan, &r, s, out, c, name);
    }
    /* the probed candidates that fit, fastest estimate first, simulated whole
     * until one is estimated 2% slower than the best simulated (or the budget
     * is spent, after one at least) */
    int *order = malloc((size_t)(nc ? nc : 1) * sizeof *order), no = 0;
    if (!order) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nc; i++)
        if (cs[i].fit && cs[i].est_s < INFINITY) order[no++] = i;
    for (int a = 1; a < no; a++) /* insertion sort by estimate: few candidates */
        for (int b = a; b > 0 && cs[order[b]].est_s < cs[order[b - 1]].est_s; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int q = 0; q < no; q++) {
        const cand *c = &cs[order[q]];
        if (plan->present && plan->fits && c->est_s > 1.02 * plan->iter_s) break;
        if (plan->present && budget_s > 0 && sf_now_s() - t0 > budget_s) {
            plan->skipped += no - q;
            plan->out_of_budget = 1;
            break;
        }
        char name[160];
        sf_error ignore = {0};
        cand_name(c, 0, name, sizeof name);
        sf_sim_result r;
        if (sf_strategy_baseline(s, name, g, m, &ignore) != SF_OK) continue;
        plan->tried++;
        if (sf_sim_run(sim, s, &r, &ignore) != SF_OK) continue;
        if (wins(&r, plan)) keep(plan, &r, s, out, c, name);
    }
    free(order);
    /* the winner, interleaved over 2 chunks a stage where it can be */
    if (mega && plan->present && plan->pp > 1 && plan->pipeline.micro_batches % plan->pp == 0 &&
        blocks >= 2 * plan->pp && (budget_s <= 0 || sf_now_s() - t0 <= budget_s)) {
        cand c = {plan->tp, plan->pp, plan->dp, plan->micro_batch, plan->recompute,
                  plan->pipeline.micro_batches, 0, 0, INFINITY, 0};
        char name[160];
        cand_name(&c, 1, name, sizeof name);
        sf_error ignore = {0};
        sf_sim_result r;
        if (sf_strategy_baseline(s, name, g, m, &ignore) == SF_OK) {
            plan->tried++;
            if (sf_sim_run(sim, s, &r, &ignore) == SF_OK && wins(&r, plan))
                keep(plan, &r, s, out, &c, name);
        }
    }
done:
    plan->seconds = sf_now_s() - t0;
    free(cs);
    sf_strategy_free(s);
    sf_sim_free(sim);
    return st;
}
