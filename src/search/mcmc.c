/*
 * mcmc.c - FlexFlow's Markov-chain Monte Carlo search over the SOAP space
 * (Jia, Zaharia, Aiken, SysML'19, section 6).
 *
 * Each start strategy (data parallelism, expert strategies, the OptCNN optimum,
 * random ones: whatever the caller passes) seeds one Metropolis-Hastings chain,
 * run in turn. A chain is simulated in full once; then every iteration picks an
 * operator uniformly at random, draws a config for it (half the time uniformly
 * from the whole SOAP space, as FlexFlow does; otherwise a neighbour's config or
 * the same degrees placed elsewhere: see propose) and evaluates the changed
 * strategy by delta simulation, which rebuilds only that operator's tasks. While
 * the current strategy fits, the uniform number of the Metropolis test is drawn
 * before simulating, which turns the test into a bound on the proposal's time:
 * the simulation stops as soon as the bound is passed (sf_sim_update_ops with a
 * bound), so a bad proposal costs a fraction of a simulation. A proposal is
 *
 *   - rejected outright when it does not fit in device memory (while the current
 *     strategy fits): memory is a hard constraint;
 *   - accepted when the current strategy does not fit and the proposal does;
 *   - otherwise accepted with probability min(1, exp(-beta * (new - cur) / ref)),
 *     ref = the chain's start cost, and undone with sf_sim_revert when rejected
 *     (beta: o->beta, or with o->anneal > 1 o->beta * anneal^(share of the
 *     chain's budget used)).
 *
 * Why divide by ref: FlexFlow's exp(-beta * delta) needs a beta per model, since
 * iteration times range from microseconds (LeNet) to seconds (NMT). Measuring
 * the change relative to the start makes beta scale-free. The default beta = 50
 * accepts a proposal 1% worse than the start with probability exp(-0.5) ~ 0.61,
 * 5% worse with exp(-2.5) ~ 0.08 and 10% worse with exp(-5) ~ 0.007: the chain
 * drifts across plateaus and small bumps but not down into clearly bad regions.
 *
 * A start that does not fit in memory is still searched from. Until the chain
 * first fits, a non-fitting proposal goes through the same Metropolis test on
 * time plus overflow (bytes over capacity summed over devices), each relative to
 * the start's: cutting the overflow by 1% of the start's is worth 1% of its
 * time. The chain so walks towards feasibility, where no single move may fix
 * memory, without buying it at any price in time (in a trial where Inception-v3's
 * data-parallel start overflowed, accepting every move that did not grow the
 * overflow first fit at 7 s against the start's 0.41 s).
 * Strategies are ranked "fits first, then iteration time" (non-fitting ones
 * among themselves by overflow), so a fitting answer is always returned when any
 * start fits, and the answer is never worse than the best start.
 *
 * Budget: over all starts, in seconds and/or iterations (with the polish, three
 * quarters of it: see below). Start i of n gets an
 * equal share of what is left (so an early-stopped start leaves its remainder to
 * the later ones) and stops early once it has not improved its own best for half
 * of its share, as the paper does.
 *
 * Pair moves (o->pair_moves, the default): what the chains leave of the budget
 * by stopping early goes to one more chain, from the best strategy seen, in
 * which half the proposals change an operator and a neighbour together, in one
 * delta update that one revert undoes (sf_sim_update_ops). Single moves stop
 * short of optima that two connected operators must reach together (propose
 * says why); the last chain goes after them. It comes after the others, not
 * mixed into them, so that the search up to it is the one without pair moves,
 * draw for draw, and with an iteration budget the answer can only get better
 * than without them (the last chain also stops after half of what it got
 * without improvement). Mixed in from the start, pair moves cost the single
 * moves a share of every chain's budget, and on the RNNs of the search tables
 * that lost more than they found (bench/RESULTS.md).
 *
 * The polish (o->polish, the default): the chains get three quarters of the
 * budget, and the rest, with whatever they leave, goes to a greedy descent from
 * the best strategy seen. The chains at beta 50 accept most proposals (71% for
 * AlexNet on four P100s under bulk sync, 3000 proposals): a change to one
 * operator moves the
 * iteration by well under 1%, which the Metropolis test accepts with
 * probability above 0.6, so the chains drift across the plateau around their
 * best and stop short of small improvements near it (0.01-0.24% on six cases
 * of issue 29 where data or owt parallelism with only the classifier and the
 * loss changed beat the search, even with twice the budget). The polish tries,
 * operator by operator, most weights first (a weight's sync and update grow
 * with it, and weightless operators mostly follow a neighbour, which the
 * lined-up and pair moves cover): the configs lined up with each neighbour,
 * every candidate config (each degree tuple over its splittable dimensions
 * with a power-of-two product or one dividing the device count, on every run
 * of contiguous devices), then each candidate with each neighbour lined up with
 * it (a pair move); a move that makes the strategy strictly better is kept at
 * once. Passes repeat until one improves nothing or the budget ends. Each move
 * is one bounded delta update (bound: the current time), so a worse one costs
 * a fraction of a simulation. The polish draws no random numbers. Why not a
 * colder chain instead: an annealed beta (o->anneal: beta grows geometrically
 * to beta * anneal over each chain) was tried, 50 to 5000, and with the polish
 * after it lost more than it found (docs/search.md), so it is off by default.
 *
 * Pipelines and templates (mcmc_pipe.c, templates.c; docs/search.md): from a
 * pipelined strategy every config move is drawn inside, or moved into, its
 * operator's stage's device group, and 1 in 8 proposals move the pipeline
 * itself (a boundary, m, the schedule), judged by a full simulation on a
 * spare simulator that becomes the chain's when the move is accepted. With
 * o->templates a config move of an operator of a repeated layer moves the
 * same operator of every layer in step with it (prepare_move), and 1 in 16
 * such moves break the tie for one layer. Neither draws anything for a
 * strategy without a pipeline or with templates off: those searches are as
 * before, draw for draw.
 *
 * Determinism: one sf_rng seeded from o->seed, consumed in a fixed order (the
 * operator, the proposal, then the uniform of the Metropolis test). Delta
 * simulation is exact, so full and delta modes (o->use_delta) follow the same
 * trajectory and, with an iteration budget, the same seed gives the same
 * strategy bit for bit. A wall-clock budget makes the number of iterations
 * depend on the machine's speed.
 *
 * Memory: strategies (best, the last chain's start, and the working copy of
 * full mode), a per-device capacity table and the polish's candidate buffer
 * and operator order are allocated once per search; the
 * loop itself keeps a move (two configs) on the stack and never allocates (the
 * simulator reuses its own buffers).
 */
#include "soapflow/search.h"

#include "mcmc_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The share of the budget the chains leave to the polish (top of the file). */
#define POLISH_SHARE 0.25
/* With templates, 1 in TEMPLATE_BREAK config moves of a template member move
 * it alone (docs/search.md, "Layer templates"). */
#define TEMPLATE_BREAK 16
/* From a pipelined strategy, 1 in PIPE_MOVES proposals change the pipeline. */
#define PIPE_MOVES 8

void sf_mcmc_options_default(sf_mcmc_options *o) {
    memset(o, 0, sizeof *o);
    o->budget_s = 30;
    o->iters = 0;
    o->seed = 1;
    o->beta = 50;
    o->anneal = 1;
    o->use_delta = 1;
    o->pair_moves = 1;
    o->polish = 1;
    o->progress = 0;
    o->templates = 0;
    o->pipeline_moves = 1;
    sf_sim_options_default(&o->sim);
}

/* What the search needs to know about one simulated strategy. */
typedef struct mc_point {
    double cost_s;       /* simulated iteration time */
    double excess_bytes; /* device memory over capacity, summed over devices; 0 when it fits */
    int fits;
} mc_point;

/* Strict order "a is better than b": fitting first, then time (or, when neither
 * fits, less overflow). */
static int point_better(const mc_point *a, const mc_point *b) {
    if (a->fits != b->fits) return a->fits;
    if (a->fits) return a->cost_s < b->cost_s;
    return a->excess_bytes < b->excess_bytes;
}

/* Everything one search holds; allocated once. */
typedef struct mc_search {
    const sf_graph *g;
    const sf_machine *m;
    const sf_mcmc_options *o;
    const sf_cost_model *cm;
    sf_sim *sim;
    sf_sim *sim_alt;     /* delta mode, pipelines: a pipeline move's full simulation, swapped
                          * with sim when it is accepted (so a rejected one costs no undo) */
    sf_strategy *cand;   /* a pipeline move's strategy */
    mc_groups gr;        /* the current strategy's stage groups (a pipelined one) */
    sf_templates tp;     /* layer templates; their classes used with o->templates */
    int use_tp;          /* o->templates and the graph has a template */
    int *units, n_units; /* with templates: what the chain draws from, each template once
                          * (-1 - class) and every other movable operator */
    int *xop;            /* [xcap] the expanded move: operators, */
    sf_config *xcfg;     /* their new configs */
    sf_config *xsaved;   /* full mode: the configs they replace */
    int xn, xcap;
    int *mark, stamp; /* [n_ops] operators in the expanded move: mark == stamp */
    int *scratch;     /* [n_ops] */
    int64_t pipe_proposals, pipe_accepted, boundary_moves, mb_moves, invalid;
    int64_t template_moves, template_breaks;
    sf_strategy *work;   /* full mode: the current strategy, edited in place */
    sf_strategy *best;   /* best seen over all chains */
    sf_strategy *polish; /* pair moves: the last chain's start, a copy of best */
    double *cap_bytes;   /* [n_dev] device memory capacities */
    int *movable;        /* [n_movable] operators a proposal can change */
    int n_movable;
    int *nbr_start, *nbr; /* producers and consumers of each operator (CSR) */
    int n_dev;
    sf_rng rng;
    mc_point best_pt;
    int have_best;
    int best_start;
    int64_t iterations, accepted, sims;
    int sims_at_start_fail; /* the last chain's start did not simulate */
    int64_t pair_proposals, pair_accepted;
    int64_t polish_moves, polish_improved;
    int *cand_deg;   /* polish: [max_cands][SF_MAX_DIMS] degree tuples of one operator */
    int *cand_start; /* [max_cands + 1] each tuple's first candidate (cand_at) */
    int *order;      /* polish: [n_movable] the movable operators, most weights first */
    int max_cands;   /* polish: most degree tuples of one operator */
    double t0_s;
    sf_progress bar;
} mc_search;

static mc_point point_of(const mc_search *s, const sf_sim_result *r) {
    mc_point p = {r->iter_s, 0, r->fits};
    if (!r->fits) {
        for (int d = 0; d < s->n_dev; d++) {
            double over = r->device_mem_bytes[d] - s->cap_bytes[d];
            if (over > 0) p.excess_bytes += over;
        }
    }
    return p;
}

/* An operator is worth proposing for when it has a dimension that can be split
 * or there is more than one device to move it to (inputs can move too). */
static int op_movable(const sf_op *op, int n_dev) {
    if (n_dev > 1) return 1;
    for (int i = 0; i < op->space.ndim; i++)
        if (op->kinds[i] != SF_DIM_NONE && op->space.d[i] > 1) return 1;
    return 0;
}

/* Metropolis-Hastings acceptance of proposal p over current cur (see the top
 * of the file). Draws from the rng only for a worse proposal. */
static int accept(mc_search *s, const mc_point *cur, const mc_point *p, const mc_point *ref,
                  double beta) {
    double worse;
    if (p->fits) {
        if (!cur->fits) return 1;
        worse = (p->cost_s - cur->cost_s) / ref->cost_s;
    } else {
        if (cur->fits) return 0;
        worse = (p->cost_s - cur->cost_s) / ref->cost_s +
                (p->excess_bytes - cur->excess_bytes) / ref->excess_bytes;
    }
    if (worse <= 0) return 1;
    return sf_rng_uniform(&s->rng) < exp(-beta * worse);
}

static void draw_progress(mc_search *s, double now_s) {
    const sf_mcmc_options *o = s->o;
    double frac = 0, elapsed = now_s - s->t0_s;
    if (o->iters > 0) frac = (double)s->iterations / (double)o->iters;
    if (o->budget_s > 0 && elapsed / o->budget_s > frac) frac = elapsed / o->budget_s;
    char extra[96];
    snprintf(extra, sizeof extra, "best %.3f ms  %.0f it/s", s->best_pt.cost_s * 1e3,
             elapsed > 0 ? (double)s->iterations / elapsed : 0.0);
    sf_progress_update(&s->bar, frac, extra);
}

/* Record the simulator's current strategy as the best when it beats it. */
static void offer_best(mc_search *s, const mc_point *p, const sf_strategy *strat, int start) {
    if (s->have_best && !point_better(p, &s->best_pt)) return;
    sf_strategy_copy(s->best, strat);
    s->best_pt = *p;
    s->best_start = start;
    s->have_best = 1;
}

/* A proposal: the operators it changes and their new configs. */
typedef struct mc_move {
    int n;    /* operators changed: 0 (the current strategy again), 1 or 2 */
    int pair; /* drawn as a pair move */
    int op[2];
    sf_config cfg[2];
} mc_move;

/* Tied operators (an embedding and its LM head: src/strategy/tie.c) must split
 * their table alike. A move of one that no longer ties with the other becomes a
 * move of both, the other lined up with it by the weight elements
 * (sf_config_tie_follow), when that config is one the search may propose; a
 * move that still does not tie (a pair move, or a partner that cannot follow)
 * is an invalid proposal and is rejected without simulating. Returns 1 when mv
 * (perhaps grown to two operators) may be simulated. Graphs without ties pass
 * at once and draw nothing: their searches are as before. */
static int tie_fix(const mc_search *s, const sf_strategy *cur, mc_move *mv) {
    if (sf_graph_num_ties(s->g) == 0) return 1;
    if (sf_strategy_check_ties(cur, s->g, mv->n, mv->op, mv->cfg, NULL) == SF_OK) return 1;
    if (mv->n != 1) return 0;
    int partner = sf_strategy_tie_partner(s->g, mv->op[0]);
    if (partner < 0 ||
        !sf_config_tie_follow(sf_graph_op(s->g, mv->op[0]), &mv->cfg[0], sf_graph_op(s->g, partner),
                              s->m, s->o->reduce, &mv->cfg[1]))
        return 0;
    mv->op[1] = partner;
    mv->n = 2;
    mv->cfg[1].zero = sf_strategy_get(cur, partner)->zero; /* the partner keeps its flags */
    mv->cfg[1].recompute = sf_strategy_get(cur, partner)->recompute;
    return sf_strategy_check_ties(cur, s->g, mv->n, mv->op, mv->cfg, NULL) == SF_OK;
}

/* The config of `op` that lines it up with a neighbour's config c: c itself
 * when valid for op; otherwise, dimension by dimension, c's degree where op can
 * take it (the dimension exists, can be split and is that large) and 1
 * elsewhere, each part on the device of c's part with the same coordinates (0
 * in the dimensions dropped). Either way the parts of the two operators that
 * cover the same indices share a device where the shapes allow. */
/* The highest opt-in level (sf_op_dim_opt_in) among the dimensions c splits. */
static int splits_reduce(const sf_op *op, const sf_config *c) {
    int level = 0;
    for (int i = 0; i < c->ndim && i < op->space.ndim; i++)
        if (c->degree[i] > 1 && sf_op_dim_opt_in(op, i) > level) level = sf_op_dim_opt_in(op, i);
    return level;
}

/* Reduction and inner dimensions (sf_op_dim_opt_in) are proposed only with
 * sf_mcmc_options.reduce: without it, a neighbour's degree on a dimension that
 * is one for op is not taken. */
static void line_up(const sf_op *op, const sf_machine *m, const sf_config *c, int reduce,
                    sf_config *out) {
    if (c->ndim == op->space.ndim && splits_reduce(op, c) <= reduce &&
        sf_config_validate(op, m, c, NULL) == SF_OK) {
        sf_config_copy(out, c);
        return;
    }
    int nd = op->space.ndim, degree[SF_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int d = i < c->ndim ? c->degree[i] : 1;
        degree[i] = d > 1 && op->kinds[i] != SF_DIM_NONE && sf_op_dim_opt_in(op, i) <= reduce &&
                            d <= op->space.d[i]
                        ? d
                        : 1;
    }
    memset(out, 0, sizeof *out);
    sf_config_set_degrees(out, nd, degree); /* at most c's parts: cannot fail */
    for (int p = 0; p < out->n_parts; p++) {
        /* p's coordinates, last dimension fastest (sf_config_part_tile), into
         * the index of c's part at the same coordinates */
        int coord[SF_MAX_DIMS] = {0}, rest = p, idx = 0;
        for (int i = nd - 1; i >= 0; i--) {
            coord[i] = rest % degree[i];
            rest /= degree[i];
        }
        for (int i = 0; i < c->ndim; i++) idx = idx * c->degree[i] + (i < nd ? coord[i] : 0);
        out->device[p] = c->device[idx];
    }
}

/* The same degrees as cur on a contiguous run of devices from a random first
 * one; in a pipeline (gr), a run of the operator's stage's group. */
static void shift_devices(mc_search *s, const mc_groups *gr, int opi, const sf_config *cur,
                          sf_config *c) {
    if (gr) {
        mc_shift_in_group(gr, mc_stage_of(gr, opi), cur, &s->rng, c);
        return;
    }
    sf_config_copy(c, cur);
    int first = (int)sf_rng_below(&s->rng, (uint64_t)s->n_dev);
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((first + p) % s->n_dev);
}

/* Draw a proposal for operator `opi` given its current config `cur`. A single
 * move changes opi alone:
 *   1/2  a random config from the whole SOAP space (FlexFlow's proposal);
 *   1/4  the config of a random neighbour (producer or consumer) when it is valid
 *        for this operator: lining an operator up with its neighbour removes the
 *        transfers between them, a move a uniform draw almost never makes on a
 *        large machine;
 *   1/4  the same degrees on other devices (a contiguous run from a random first
 *        device): placement alone, the O of SOAP.
 * In the last chain (`pairs` set: see sf_mcmc_search), half the proposals are
 * pair moves instead: opi and a random neighbour (a producer or a consumer, so
 * also an operator and its loss) change together, opi to a random config or its
 * degrees moved (half and half), the neighbour to the config lined up with it
 * (line_up). A move of one operator that its neighbour has to follow passes
 * through a strategy where the two disagree and their tiles cross between
 * devices; on small models that intermediate can be tens of percent slower,
 * which the Metropolis test almost never accepts, so single moves alone stop
 * short of such optima. The coin for a pair move is drawn only when `pairs` is
 * set, so the other chains draw exactly what they drew without pair moves.
 * Every move gives valid configs, so the chain still explores the whole space;
 * the mix only makes useful moves likelier. Tied operators (an embedding and
 * its LM head) must also split their table alike: tie_fix lines the other up
 * with a move of one, or rejects the move (below). */
static void propose_config(mc_search *s, const mc_groups *gr, const sf_strategy *cur_strat, int opi,
                           int pairs, mc_move *mv);

/* A random config for opi: over the whole machine, or in a pipeline (gr) over
 * its stage's group. */
static void random_config(mc_search *s, const mc_groups *gr, int opi, sf_config *c) {
    const sf_op *op = sf_graph_op(s->g, opi);
    if (gr)
        mc_random_in_group(gr, mc_stage_of(gr, opi), op, s->o->reduce, &s->rng, c);
    else
        sf_config_random_in(op, s->m, s->o->reduce, &s->rng, c);
}

/* A memory move (sf_mcmc_options.memory): opi's config as it is with its
 * weight group's ZeRO stage redrawn (an owner with weights) or its
 * recomputation flag flipped, half and half where both apply. */
static void memory_move(mc_search *s, const sf_op *op, const sf_config *cur, sf_config *c) {
    sf_config_copy(c, cur);
    int can_zero = op->n_params > 0 && op->weight_owner < 0;
    int can_rc = op->type != SF_OP_INPUT;
    if (can_zero && (!can_rc || sf_rng_below(&s->rng, 2))) {
        c->zero = (uint8_t)((c->zero + 1 + sf_rng_below(&s->rng, SF_ZERO_STAGE_COUNT - 1)) %
                            SF_ZERO_STAGE_COUNT);
    } else if (can_rc) {
        c->recompute = !c->recompute;
    }
}

/* The flags (ZeRO stage, recomputation) of the configs mv replaces, onto its
 * new configs: a move of degrees or devices keeps them. */
static void keep_flags(const sf_strategy *cur, mc_move *mv) {
    for (int k = 0; k < mv->n; k++) {
        const sf_config *was = sf_strategy_get(cur, mv->op[k]);
        mv->cfg[k].zero = was->zero;
        mv->cfg[k].recompute = was->recompute;
    }
}

/* Every proposal keeps the flags of the configs it replaces; a memory move
 * changes them alone. In a pipeline (gr: the stage groups of cur_strat), the
 * random and shifted configs are drawn inside opi's stage; what comes from a
 * neighbour is moved into it after (prepare_move). */
static void propose(mc_search *s, const mc_groups *gr, const sf_strategy *cur_strat, int opi,
                    int pairs, mc_move *mv) {
    const sf_op *op = sf_graph_op(s->g, opi);
    const sf_config *cur = sf_strategy_get(cur_strat, opi);
    if (s->o->memory && sf_rng_below(&s->rng, 4) == 0) {
        mv->n = 1;
        mv->pair = 0;
        mv->op[0] = opi;
        memory_move(s, op, cur, &mv->cfg[0]);
        return;
    }
    propose_config(s, gr, cur_strat, opi, pairs, mv);
    keep_flags(cur_strat, mv);
}

static void propose_config(mc_search *s, const mc_groups *gr, const sf_strategy *cur_strat, int opi,
                           int pairs, mc_move *mv) {
    const sf_op *op = sf_graph_op(s->g, opi);
    const sf_config *cur = sf_strategy_get(cur_strat, opi);
    int n_nb = s->nbr_start[opi + 1] - s->nbr_start[opi];
    mv->n = 1;
    mv->pair = 0;
    mv->op[0] = opi;
    sf_config *c = &mv->cfg[0];
    if (pairs && n_nb > 0 && sf_rng_below(&s->rng, 2)) {
        int nb = s->nbr[s->nbr_start[opi] + (int)sf_rng_below(&s->rng, (uint64_t)n_nb)];
        if (sf_rng_below(&s->rng, 2))
            random_config(s, gr, opi, c);
        else
            shift_devices(s, gr, opi, cur, c);
        mv->n = 2;
        mv->pair = 1;
        mv->op[1] = nb;
        line_up(sf_graph_op(s->g, nb), s->m, c, s->o->reduce, &mv->cfg[1]);
        return;
    }
    uint64_t kind = sf_rng_below(&s->rng, 4);
    if (kind == 2 && n_nb > 0) {
        int nb = s->nbr[s->nbr_start[opi] + (int)sf_rng_below(&s->rng, (uint64_t)n_nb)];
        const sf_config *nc = sf_strategy_get(cur_strat, nb);
        if (nc->ndim == op->space.ndim && sf_config_validate(op, s->m, nc, NULL) == SF_OK) {
            sf_config_copy(c, nc);
            return;
        }
    } else if (kind == 3) {
        shift_devices(s, gr, opi, cur, c);
        return;
    }
    random_config(s, gr, opi, c);
}

/* ---- pipelines and templates: a move grown to what it changes ---------------- */

/* 1 when b's config is a's moved into stage `stage` (mc_home; gr NULL: a's
 * itself): the two are in step, as template members are until a move breaks
 * the tie. */
static int in_step(const mc_groups *gr, int stage, const sf_config *a, const sf_config *b) {
    if (a->ndim != b->ndim || a->n_parts != b->n_parts || a->zero != b->zero ||
        a->recompute != b->recompute)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->degree[i] != b->degree[i]) return 0;
    for (int q = 0; q < a->n_parts; q++) {
        int d = a->device[q];
        if (gr && gr->dev_stage[d] != stage)
            d = gr->grp_dev[gr->grp_start[stage] + gr->dev_idx[d] % mc_group_size(gr, stage)];
        if (d != b->device[q]) return 0;
    }
    return 1;
}

/* Add op with config c (moved into its stage with gr) to the expanded move,
 * unless it is there already. */
static void x_add(mc_search *s, const mc_groups *gr, int op, const sf_config *c) {
    if (s->mark[op] == s->stamp) return;
    s->mark[op] = s->stamp;
    sf_config *x = &s->xcfg[s->xn];
    sf_config_copy(x, c);
    if (gr) mc_home(gr, mc_stage_of(gr, op), x);
    s->xop[s->xn++] = op;
}

/* The move mv (after tie_fix) as the operators it changes, into s->xop,
 * s->xcfg, s->xn: in a pipeline (gr) each config moved into its operator's
 * stage; with templates (unless brk: the move breaks the tie) each operator's
 * template members in step with it get its config too (each moved into its
 * own stage); the operators whose config stays dropped. Returns 1 when the
 * result is a valid change, 0 when it changes nothing, -1 when it breaks a
 * pipeline rule or a tie (an invalid proposal, rejected unsimulated). */
static int prepare_move(mc_search *s, const mc_groups *gr, const sf_strategy *cur,
                        const mc_move *mv, int brk) {
    s->xn = 0;
    if (++s->stamp == 0) { /* wrapped: clear the marks */
        memset(s->mark, 0, (size_t)sf_graph_num_ops(s->g) * sizeof *s->mark);
        s->stamp = 1;
    }
    for (int j = 0; j < mv->n; j++) x_add(s, gr, mv->op[j], &mv->cfg[j]);
    int seeds = s->xn, grown = 0;
    for (int j = 0; s->use_tp && !brk && j < seeds; j++) {
        int op = s->xop[j], c = s->tp.cls[op];
        if (c < 0) continue;
        const sf_config *was = sf_strategy_get(cur, op);
        for (int k = s->tp.member_start[c]; k < s->tp.member_start[c + 1]; k++) {
            int b = s->tp.members[k];
            if (s->mark[b] == s->stamp) continue;
            if (!in_step(gr, gr ? mc_stage_of(gr, b) : 0, was, sf_strategy_get(cur, b))) continue;
            x_add(s, gr, b, &s->xcfg[j]);
            grown = 1;
        }
    }
    int n = 0;
    for (int j = 0; j < s->xn; j++) {
        if (sf_config_equal(&s->xcfg[j], sf_strategy_get(cur, s->xop[j]))) continue;
        if (gr && !mc_pipe_config_ok(gr, sf_graph_op(s->g, s->xop[j]), &s->xcfg[j])) return -1;
        if (n != j) {
            s->xop[n] = s->xop[j];
            sf_config_copy(&s->xcfg[n], &s->xcfg[j]);
        }
        n++;
    }
    s->xn = n;
    if (n == 0) return 0;
    if (grown && sf_graph_num_ties(s->g) > 0 &&
        sf_strategy_check_ties(cur, s->g, n, s->xop, s->xcfg, NULL) != SF_OK)
        return -1;
    if (grown && n > mv->n) s->template_moves++;
    return 1;
}

/* The inverse temperature at proposal `it` of a chain: o->beta times
 * o->anneal to the power of the share of the chain's budget used so far (in
 * proposals, or in seconds when that is further along), so it grows
 * geometrically from o->beta at the start to o->beta * o->anneal at the end. */
static double chain_beta(const sf_mcmc_options *o, int has_it, int64_t it, int64_t share_it,
                         double chain_t0, double share_s) {
    if (!(o->anneal > 1)) return o->beta;
    double frac = 0;
    if (has_it && share_it > 0) frac = (double)it / (double)share_it;
    if (o->budget_s > 0 && share_s > 0) {
        double f = (sf_now_s() - chain_t0) / share_s;
        if (f > frac) frac = f;
    }
    if (frac > 1) frac = 1;
    return o->beta * pow(o->anneal, frac);
}

/* A strategy simulated in full by sim: past the simulator's task limit it is
 * cut off, as a delta update is. */
static sf_status full_sim(mc_search *s, sf_sim *sim, const sf_strategy *strat, sf_sim_result *r,
                          sf_error *err) {
    sf_error e = {0};
    sf_status st = sf_sim_run(sim, strat, r, &e);
    if (st == SF_ERR_RANGE && s->o->sim.max_tasks > 0) { /* the limit's error */
        memset(r, 0, sizeof *r);
        r->iter_s = INFINITY;
        r->cut_off = 1;
        return SF_OK;
    }
    if (st != SF_OK && err) *err = e;
    return st;
}

/* A proposal simulated in full (--no-delta). */
static sf_status full_run(mc_search *s, sf_sim_result *r, sf_error *err) {
    return full_sim(s, s->sim, s->work, r, err);
}

/* Simulate the prepared move (s->xn operators to s->xcfg): a delta update
 * bounded by bound, or in full mode the configs set in the working copy
 * (the old ones kept in s->xsaved) and a full run. */
static sf_status try_move(mc_search *s, double bound, sf_sim_result *r, sf_error *err) {
    if (s->o->use_delta) return sf_sim_update_many(s->sim, s->xn, s->xop, s->xcfg, bound, r, err);
    for (int j = 0; j < s->xn; j++) {
        sf_config *wc = sf_strategy_config(s->work, s->xop[j]);
        sf_config_copy(&s->xsaved[j], wc);
        sf_config_copy(wc, &s->xcfg[j]);
    }
    return full_run(s, r, err);
}

/* The Metropolis test of a simulated proposal r from cur (see the top of the
 * file; bound: the time bound drawn before simulating while cur fits). 1 with
 * *p set when accepted. */
static int decide(mc_search *s, const mc_point *cur, const mc_point *ref, double beta, double bound,
                  const sf_sim_result *r, mc_point *p) {
    *p = (mc_point){r->iter_s, 0, 0};
    if (cur->fits) {
        int ok = !r->cut_off && r->fits && r->iter_s <= bound;
        if (ok) *p = point_of(s, r);
        return ok;
    }
    if (r->cut_off) return 0; /* past the simulator's task limit */
    *p = point_of(s, r);
    return accept(s, cur, p, ref, beta);
}

/* The operator a chain's proposal changes: uniform over the movable ones, or
 * with templates over the units, a template's member uniform among its
 * members. */
static int pick_op(mc_search *s) {
    if (!s->use_tp) return s->movable[sf_rng_below(&s->rng, (uint64_t)s->n_movable)];
    int u = s->units[sf_rng_below(&s->rng, (uint64_t)s->n_units)];
    if (u >= 0) return u;
    int c = -1 - u, k0 = s->tp.member_start[c], k1 = s->tp.member_start[c + 1];
    return s->tp.members[k0 + (int)sf_rng_below(&s->rng, (uint64_t)(k1 - k0))];
}

/* A pipeline move from cur_strat (groups gr) simulated in full: in delta mode
 * on the spare simulator, which becomes the chain's when the move is accepted,
 * so a rejected one leaves the chain's simulator as it was; in full mode on the
 * chain's, the working copy replaced when accepted. *ok: accepted, with *p. */
static sf_status pipe_step(mc_search *s, const mc_groups *gr, const sf_strategy *cur_strat,
                           const mc_point *cur, const mc_point *ref, double beta, int *ok,
                           mc_point *p, sf_error *err) {
    *ok = 0;
    s->pipe_proposals++;
    int kind = mc_pipe_propose(s->g, s->m, &s->tp, gr, cur_strat, &s->rng, s->scratch, s->cand);
    if (kind < 0) {
        s->invalid++;
        return SF_OK;
    }
    double bound = INFINITY;
    if (cur->fits) {
        double u = sf_rng_uniform(&s->rng);
        if (beta > 0 && u > 0) bound = cur->cost_s - ref->cost_s * log(u) / beta;
    }
    if (s->o->use_delta && !s->sim_alt) {
        s->sim_alt = sf_sim_new(s->g, s->m, s->cm, &s->o->sim, err);
        if (!s->sim_alt) return err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
    }
    sf_sim *ps = s->o->use_delta ? s->sim_alt : s->sim;
    sf_sim_result r;
    sf_status st = full_sim(s, ps, s->cand, &r, err);
    if (st != SF_OK) return st;
    s->sims++;
    *ok = decide(s, cur, ref, beta, bound, &r, p);
    if (!*ok) return SF_OK;
    s->pipe_accepted++;
    s->boundary_moves += kind == MC_PIPE_BOUNDARY;
    s->mb_moves += kind == MC_PIPE_MICRO_BATCHES;
    if (s->o->use_delta) {
        s->sim_alt = s->sim;
        s->sim = ps;
    } else {
        sf_strategy_copy(s->work, s->cand);
    }
    return SF_OK;
}

/* One chain from `start` with a budget of share_it iterations (has_it) and
 * share_s seconds (budget_s > 0); what it finds is credited to start i. pairs:
 * half of its proposals are pair moves. */
static sf_status run_chain(mc_search *s, const sf_strategy *start, int i, int pairs, int has_it,
                           int64_t share_it, double share_s, mc_point *start_pt, sf_error *err) {
    const sf_mcmc_options *o = s->o;
    sf_sim_result r;
    sf_status st = sf_sim_run(s->sim, start, &r, err);
    s->sims_at_start_fail = st != SF_OK;
    if (st != SF_OK) {
        sf_error_prefix(err, "mcmc: start %d: ", i);
        return st;
    }
    s->sims++;
    mc_point cur = point_of(s, &r);
    *start_pt = cur;
    offer_best(s, &cur, start, i);
    if (!o->use_delta) sf_strategy_copy(s->work, start);
    mc_point ref = cur; /* the scales of "worse" */
    if (!(ref.cost_s > 0)) ref.cost_s = 1.0;
    if (!(ref.excess_bytes > 0)) ref.excess_bytes = 1.0;

    mc_point local = cur; /* this chain's best, for the early stop */
    int64_t it = 0, last_improve_it = 0;
    int64_t stall_it = (share_it + 1) / 2;
    double chain_t0 = sf_now_s(), last_improve_s = chain_t0;
    double deadline_s = chain_t0 + share_s;

    while (s->n_movable > 0) {
        if (has_it && (it >= share_it || it - last_improve_it >= stall_it)) break;
        if (o->budget_s > 0) {
            double now = sf_now_s();
            if (now >= deadline_s || now - last_improve_s >= share_s / 2) break;
        }
        if (o->progress && (s->iterations & 63) == 0) draw_progress(s, sf_now_s());
        const sf_strategy *cur_strat = o->use_delta ? sf_sim_strategy(s->sim) : s->work;
        const mc_groups *gr = NULL;
        if (sf_strategy_pipeline(cur_strat)) { /* recomputed: cheap beside a simulation */
            mc_groups_compute(&s->gr, s->g, cur_strat);
            gr = &s->gr;
        }
        int ok;
        mc_point p;
        if (gr && o->pipeline_moves && sf_rng_below(&s->rng, PIPE_MOVES) == 0) {
            it++;
            s->iterations++;
            double beta = chain_beta(o, has_it, it - 1, share_it, chain_t0, share_s);
            st = pipe_step(s, gr, cur_strat, &cur, &ref, beta, &ok, &p, err);
            if (st != SF_OK) return st;
        } else {
            int opi = pick_op(s);
            int brk =
                s->use_tp && s->tp.cls[opi] >= 0 && sf_rng_below(&s->rng, TEMPLATE_BREAK) == 0;
            mc_move mv;
            propose(s, gr, cur_strat, opi, pairs, &mv);
            it++;
            s->iterations++;
            s->pair_proposals += mv.pair;
            /* keep only the operators whose config changes */
            int n = 0;
            for (int j = 0; j < mv.n; j++) {
                if (sf_config_equal(&mv.cfg[j], sf_strategy_get(cur_strat, mv.op[j]))) continue;
                mv.op[n] = mv.op[j];
                sf_config_copy(&mv.cfg[n++], &mv.cfg[j]);
            }
            mv.n = n;
            int pm = mv.n == 0                     ? 0
                     : !tie_fix(s, cur_strat, &mv) ? -1
                                                   : prepare_move(s, gr, cur_strat, &mv, brk);
            if (pm == 0) {
                /* the same strategy: a self-transition, accepted without simulating */
                s->accepted++;
                s->pair_accepted += mv.pair;
                continue;
            }
            if (pm < 0) { /* tied weights split two ways, a pipeline rule broken: invalid */
                s->invalid++;
                continue;
            }
            s->template_breaks += brk;
            /* While the current strategy fits, the Metropolis test is decided by a
             * uniform u drawn now: the proposal is accepted iff it fits and its time
             * is at most cur + ref * (-ln u) / beta. Knowing that bound before
             * simulating lets delta simulation stop as soon as it is exceeded. */
            double beta = chain_beta(o, has_it, it - 1, share_it, chain_t0, share_s);
            double bound = INFINITY;
            if (cur.fits) {
                double u = sf_rng_uniform(&s->rng);
                if (beta > 0 && u > 0) bound = cur.cost_s - ref.cost_s * log(u) / beta;
            }
            st = try_move(s, bound, &r, err);
            if (st != SF_OK) return st;
            s->sims++;
            ok = decide(s, &cur, &ref, beta, bound, &r, &p);
            if (ok) {
                s->pair_accepted += mv.pair;
            } else if (o->use_delta) {
                st = sf_sim_revert(s->sim, NULL, err);
                if (st != SF_OK) return st;
            } else {
                for (int j = s->xn - 1; j >= 0; j--)
                    sf_config_copy(sf_strategy_config(s->work, s->xop[j]), &s->xsaved[j]);
            }
        }
        if (ok) {
            cur = p;
            s->accepted++;
            if (point_better(&p, &local)) {
                local = p;
                last_improve_it = it;
                if (o->budget_s > 0) last_improve_s = sf_now_s();
                offer_best(s, &p, o->use_delta ? sf_sim_strategy(s->sim) : s->work, i);
            }
        }
    }
    return SF_OK;
}

/* ---- the greedy polish ------------------------------------------------------ */

/* Degree tuples over op's splittable dimensions from dimension i on, whose
 * product with `prod` is at most n_dev and SF_MAX_PARTS; for each complete
 * tuple whose product p is a power of two or divides n_dev, one candidate
 * config per run of p contiguous devices (first device 0, 1, ..., n_dev - p).
 * The candidates are not stored (on 4096 devices there are millions, 8 KB
 * each as configs): the first `cap` tuples go to deg_out ([cap][SF_MAX_DIMS])
 * with start[t] the index of tuple t's first candidate, and cand_at makes
 * candidate j. Returns the number of tuples; *total counts candidates. */
static int cands_from(const sf_op *op, int n_dev, int reduce, int i, int prod, int *deg,
                      int *deg_out, int *start, int cap, int n, int *total) {
    int nd = op->space.ndim;
    if (i == nd) {
        if ((prod & (prod - 1)) != 0 && n_dev % prod != 0) return n;
        if (n < cap) {
            memcpy(&deg_out[(size_t)n * SF_MAX_DIMS], deg, SF_MAX_DIMS * sizeof *deg);
            start[n] = *total;
            start[n + 1] = *total + n_dev - prod + 1;
        }
        *total += n_dev - prod + 1;
        return n + 1;
    }
    int top = 1;
    if (op->kinds[i] != SF_DIM_NONE && sf_op_dim_opt_in(op, i) <= reduce)
        top = op->space.d[i] < n_dev ? (int)op->space.d[i] : n_dev;
    for (int d = 1; d <= top && prod * d <= n_dev && prod * d <= SF_MAX_PARTS; d++) {
        deg[i] = d;
        n = cands_from(op, n_dev, reduce, i + 1, prod * d, deg, deg_out, start, cap, n, total);
    }
    deg[i] = 1;
    return n;
}

/* The polish's candidate tuples of op (see cands_from); deg_out and start
 * may be NULL with cap 0 to count them. */
static int polish_cands(const sf_op *op, int n_dev, int reduce, int *deg_out, int *start, int cap,
                        int *total) {
    int deg[SF_MAX_DIMS];
    for (int i = 0; i < SF_MAX_DIMS; i++) deg[i] = 1;
    *total = 0;
    return cands_from(op, n_dev, reduce, 0, 1, deg, deg_out, start, cap, 0, total);
}

/* Candidate j (0 <= j < start[nt]) of the nt tuples polish_cands wrote. */
static void cand_at(const mc_search *s, int nd, int nt, int j, sf_config *c) {
    int lo = 0, hi = nt - 1; /* the last tuple t with start[t] <= j */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->cand_start[mid] <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    int first = j - s->cand_start[lo];
    sf_config_set_degrees(c, nd, &s->cand_deg[(size_t)lo * SF_MAX_DIMS]); /* cannot fail */
    for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)(first + p);
}

/* Budget left for the polish: 1 while there is. */
static int polish_budget_left(const mc_search *s, double deadline_s) {
    const sf_mcmc_options *o = s->o;
    if (o->iters > 0 && s->iterations >= o->iters) return 0;
    if (o->budget_s > 0 && sf_now_s() >= deadline_s) return 0;
    return 1;
}

/* The polish's current strategy: the simulator's, or in full mode the working copy. */
static const sf_strategy *polish_current(const mc_search *s) {
    return s->o->use_delta ? sf_sim_strategy(s->sim) : s->work;
}

/* The stage groups of the polish's current strategy, NULL without a pipeline. */
static const mc_groups *polish_groups(mc_search *s) {
    const sf_strategy *cs = polish_current(s);
    if (!sf_strategy_pipeline(cs)) return NULL;
    mc_groups_compute(&s->gr, s->g, cs);
    return &s->gr;
}

/* Try one move from the current strategy (point *cur): keep it
 * when it is strictly better, else undo it. *improved is set when kept. */
static sf_status polish_try(mc_search *s, mc_move *mv, mc_point *cur, int *improved,
                            sf_error *err) {
    const sf_strategy *cs = polish_current(s);
    int n = 0;
    for (int j = 0; j < mv->n; j++) {
        if (sf_config_equal(&mv->cfg[j], sf_strategy_get(cs, mv->op[j]))) continue;
        mv->op[n] = mv->op[j];
        sf_config_copy(&mv->cfg[n++], &mv->cfg[j]);
    }
    /* a pair move whose partner keeps its config is a single move, tried already */
    if (n == 0 || n < mv->n) return SF_OK;
    mv->n = n;
    if (!tie_fix(s, cs, mv)) return SF_OK; /* tied weights split two ways: invalid */
    const mc_groups *gr = polish_groups(s);
    if (prepare_move(s, gr, cs, mv, 0) <= 0) return SF_OK; /* nothing left, or invalid */
    sf_sim_result r;
    double bound = cur->fits ? cur->cost_s : INFINITY;
    sf_status st;
    st = try_move(s, bound, &r, err);
    if (st != SF_OK) return st;
    s->sims++;
    s->iterations++;
    s->polish_moves++;
    if (s->o->progress && (s->iterations & 63) == 0) draw_progress(s, sf_now_s());
    if (!r.cut_off) {
        mc_point p = point_of(s, &r);
        if (point_better(&p, cur)) {
            *cur = p;
            *improved = 1;
            s->accepted++;
            s->polish_improved++;
            offer_best(s, &p, polish_current(s), s->best_start);
            return SF_OK;
        }
    }
    if (s->o->use_delta) return sf_sim_revert(s->sim, NULL, err);
    for (int j = s->xn - 1; j >= 0; j--)
        sf_config_copy(sf_strategy_config(s->work, s->xop[j]), &s->xsaved[j]);
    return SF_OK;
}

/* Candidate j of the polish for opi: in a pipeline, a candidate on the first
 * places of its stage's group (devices 0 .. k-1 taken as places 0 .. k-1);
 * 0 when it does not fit the group (more parts than the group's devices, or
 * a run past its end), which the polish skips. */
static int polish_cand(mc_search *s, int opi, int nd, int nt, int j, sf_config *c) {
    cand_at(s, nd, nt, j, c);
    if (!sf_strategy_pipeline(polish_current(s))) return 1;
    const mc_groups *gr = polish_groups(s);
    int st = mc_stage_of(gr, opi), k = mc_group_size(gr, st);
    if (c->device[0] + c->n_parts > k) return 0;
    for (int p = 0; p < c->n_parts; p++)
        c->device[p] = (int16_t)gr->grp_dev[gr->grp_start[st] + c->device[p]];
    return 1;
}

/* With templates, a member in step with its template's first member is
 * polished with it (its moves move them all): the polish skips it. */
static int polish_skip(mc_search *s, int opi) {
    if (!s->use_tp || s->tp.cls[opi] < 0) return 0;
    int lead = s->tp.members[s->tp.member_start[s->tp.cls[opi]]];
    if (lead == opi) return 0;
    const sf_strategy *cs = polish_current(s);
    const mc_groups *gr = polish_groups(s);
    return in_step(gr, gr ? mc_stage_of(gr, opi) : 0, sf_strategy_get(cs, lead),
                   sf_strategy_get(cs, opi));
}

/* Greedy descent from the best strategy seen (o->polish; see the top of the
 * file), in passes over the movable operators, most weights first: for each,
 * its single moves (the configs lined up with each neighbour, then its
 * candidate configs), then its pair moves (each candidate with each neighbour
 * lined up with it). A move that improves the strategy is kept at once; the
 * passes go on until one improves nothing, or the budget ends. Draws no random
 * numbers. */
static sf_status polish(mc_search *s, double deadline_s, sf_error *err) {
    sf_sim_result r;
    sf_status st = sf_sim_run(s->sim, s->best, &r, err);
    if (st != SF_OK) return st;
    s->sims++;
    if (!s->o->use_delta) sf_strategy_copy(s->work, s->best);
    mc_point cur = point_of(s, &r);
    int improved = 1;
    while (improved && polish_budget_left(s, deadline_s)) {
        improved = 0;
        for (int k = 0; k < s->n_movable && polish_budget_left(s, deadline_s); k++) {
            int opi = s->order[k];
            const sf_op *op = sf_graph_op(s->g, opi);
            if (polish_skip(s, opi)) continue;
            int nc;
            int nt = polish_cands(op, s->n_dev, s->o->reduce, s->cand_deg, s->cand_start,
                                  s->max_cands, &nc);
            int nb0 = s->nbr_start[opi], nb1 = s->nbr_start[opi + 1];
            mc_move mv;
            mv.pair = 0;
            /* single moves: its neighbours' configs lined up with it, then its candidates */
            for (int j = nb0 - nb1; j < nc && polish_budget_left(s, deadline_s); j++) {
                mv.n = 1;
                mv.op[0] = opi;
                if (j < 0)
                    line_up(op, s->m, sf_strategy_get(polish_current(s), s->nbr[nb1 + j]),
                            s->o->reduce, &mv.cfg[0]);
                else if (!polish_cand(s, opi, op->space.ndim, nt, j, &mv.cfg[0]))
                    continue;
                keep_flags(polish_current(s), &mv);
                st = polish_try(s, &mv, &cur, &improved, err);
                if (st != SF_OK) return st;
            }
            /* memory moves: each ZeRO stage of its weight group, its recomputation flipped */
            for (int j = 0;
                 s->o->memory && j <= SF_ZERO_STAGE_COUNT && polish_budget_left(s, deadline_s);
                 j++) {
                const sf_config *c = sf_strategy_get(polish_current(s), opi);
                mv.n = 1;
                mv.op[0] = opi;
                sf_config_copy(&mv.cfg[0], c);
                if (j < SF_ZERO_STAGE_COUNT) {
                    if (op->n_params <= 0 || op->weight_owner >= 0) continue;
                    mv.cfg[0].zero = (uint8_t)j;
                } else {
                    mv.cfg[0].recompute = !c->recompute;
                }
                st = polish_try(s, &mv, &cur, &improved, err);
                if (st != SF_OK) return st;
            }
            /* pair moves: each candidate with each neighbour lined up with it */
            mv.pair = 1;
            for (int e = nb0; e < nb1; e++) {
                int nb = s->nbr[e];
                for (int j = 0; j < nc && polish_budget_left(s, deadline_s); j++) {
                    mv.n = 2;
                    mv.op[0] = opi;
                    mv.op[1] = nb;
                    if (!polish_cand(s, opi, op->space.ndim, nt, j, &mv.cfg[0])) continue;
                    line_up(sf_graph_op(s->g, nb), s->m, &mv.cfg[0], s->o->reduce, &mv.cfg[1]);
                    keep_flags(polish_current(s), &mv);
                    st = polish_try(s, &mv, &cur, &improved, err);
                    if (st != SF_OK) return st;
                }
            }
        }
    }
    return SF_OK;
}

static void search_free(mc_search *s) {
    free(s->nbr_start);
    free(s->nbr);
    sf_sim_free(s->sim);
    sf_strategy_free(s->work);
    sf_strategy_free(s->best);
    sf_strategy_free(s->polish);
    free(s->cap_bytes);
    free(s->movable);
    free(s->cand_deg);
    free(s->cand_start);
    free(s->order);
    sf_sim_free(s->sim_alt);
    sf_strategy_free(s->cand);
    mc_groups_free(&s->gr);
    sf_templates_free(&s->tp);
    free(s->units);
    free(s->xop);
    free(s->xcfg);
    free(s->xsaved);
    free(s->mark);
    free(s->scratch);
}

sf_status sf_mcmc_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                         const sf_strategy *const *starts, int n_starts, const sf_mcmc_options *o,
                         sf_strategy *best, sf_mcmc_result *r, sf_error *err) {
    sf_mcmc_options defaults;
    if (!o) {
        sf_mcmc_options_default(&defaults);
        o = &defaults;
    }
    if (!g || !m || !cm || !best)
        return sf_error_set(err, SF_ERR_INVALID,
                            "mcmc: graph, machine, cost model and output "
                            "strategy are required");
    if (!starts || n_starts < 1)
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: needs at least one start strategy");
    for (int i = 0; i < n_starts; i++)
        if (!starts[i] || sf_strategy_num_ops(starts[i]) != sf_graph_num_ops(g))
            return sf_error_set(err, SF_ERR_INVALID,
                                "mcmc: start %d is missing or is not for graph '%s'", i,
                                sf_graph_name(g));
    if (sf_strategy_num_ops(best) != sf_graph_num_ops(g))
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: output strategy is not for graph '%s'",
                            sf_graph_name(g));
    if (!(o->budget_s > 0) && o->iters <= 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "mcmc: needs a budget (seconds or iterations above 0)");
    if (!(o->beta >= 0) || !isfinite(o->beta) || !(o->budget_s >= 0) || !isfinite(o->budget_s))
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: beta and budget must be finite and >= 0");
    if (!(o->anneal >= 0) || !isfinite(o->anneal))
        return sf_error_set(err, SF_ERR_INVALID, "mcmc: anneal must be finite and >= 0");

    mc_search s;
    memset(&s, 0, sizeof s);
    sf_status st0;
    s.g = g;
    s.m = m;
    s.o = o;
    s.cm = cm;
    s.n_dev = sf_machine_num_devices(m);
    int n_ops = sf_graph_num_ops(g);
    s.sim = sf_sim_new(g, m, cm, &o->sim, err);
    s.best = sf_strategy_new(g);
    s.work = o->use_delta ? NULL : sf_strategy_new(g);
    s.polish = o->pair_moves ? sf_strategy_new(g) : NULL;
    s.cap_bytes = malloc((size_t)s.n_dev * sizeof *s.cap_bytes);
    s.movable = malloc((size_t)(n_ops > 0 ? n_ops : 1) * sizeof *s.movable);
    if (!s.sim) {
        search_free(&s);
        return err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
    }
    if (!s.best || (!o->use_delta && !s.work) || (o->pair_moves && !s.polish) || !s.cap_bytes ||
        !s.movable) {
        search_free(&s);
        return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
    }
    for (int d = 0; d < s.n_dev; d++) s.cap_bytes[d] = sf_machine_device_kind(m, d)->mem_bytes;
    for (int i = 0; i < n_ops; i++)
        if (op_movable(sf_graph_op(g, i), s.n_dev)) s.movable[s.n_movable++] = i;
    /* pipelines and templates: the stage groups, the layers, the expanded move */
    {
        st0 = sf_templates_find(g, &s.tp, err);
        if (st0 != SF_OK) {
            search_free(&s);
            return st0;
        }
        s.use_tp = o->templates && s.tp.n_classes > 0;
        int most = 1; /* the largest template */
        for (int c = 0; s.use_tp && c < s.tp.n_classes; c++) {
            int k = s.tp.member_start[c + 1] - s.tp.member_start[c];
            if (k > most) most = k;
        }
        s.xcap = 2 * most + 2;
        size_t nn = (size_t)(n_ops > 0 ? n_ops : 1);
        s.xop = malloc((size_t)s.xcap * sizeof *s.xop);
        s.xcfg = malloc((size_t)s.xcap * sizeof *s.xcfg);
        s.xsaved = malloc((size_t)s.xcap * sizeof *s.xsaved);
        s.mark = calloc(nn, sizeof *s.mark);
        s.scratch = malloc(nn * sizeof *s.scratch);
        s.cand = sf_strategy_new(g);
        s.units = s.use_tp ? malloc(nn * sizeof *s.units) : NULL;
        if (mc_groups_init(&s.gr, n_ops, s.n_dev) || !s.xop || !s.xcfg || !s.xsaved || !s.mark ||
            !s.scratch || !s.cand || (s.use_tp && !s.units)) {
            search_free(&s);
            return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
        }
        /* the units: each template once (at its first movable member), every
         * other movable operator */
        for (int k = 0; s.use_tp && k < s.n_movable; k++) {
            int v = s.movable[k], c = s.tp.cls[v];
            if (c < 0)
                s.units[s.n_units++] = v;
            else if (s.tp.members[s.tp.member_start[c]] == v)
                s.units[s.n_units++] = -1 - c;
        }
    }
    if (o->polish) {
        for (int k = 0; k < s.n_movable; k++) {
            int total, n = polish_cands(sf_graph_op(g, s.movable[k]), s.n_dev, o->reduce, NULL,
                                        NULL, 0, &total);
            if (n > s.max_cands) s.max_cands = n;
        }
        size_t nt = (size_t)(s.max_cands > 0 ? s.max_cands : 1);
        s.cand_deg = malloc(nt * SF_MAX_DIMS * sizeof *s.cand_deg);
        s.cand_start = malloc((nt + 1) * sizeof *s.cand_start);
        s.order = malloc((size_t)(s.n_movable > 0 ? s.n_movable : 1) * sizeof *s.order);
        if (!s.cand_deg || !s.cand_start || !s.order) {
            search_free(&s);
            return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
        }
        /* most weights first, then graph order (insertion sort: stable) */
        for (int k = 0; k < s.n_movable; k++) {
            int v = s.movable[k], j = k;
            int64_t w = sf_graph_op(g, v)->n_params;
            for (; j > 0 && sf_graph_op(g, s.order[j - 1])->n_params < w; j--)
                s.order[j] = s.order[j - 1];
            s.order[j] = v;
        }
    }
    /* neighbours: every input edge counted at both ends */
    int n_edges = 0;
    for (int i = 0; i < n_ops; i++) n_edges += sf_graph_op(g, i)->n_inputs;
    s.nbr_start = calloc((size_t)n_ops + 1, sizeof *s.nbr_start);
    s.nbr = malloc((size_t)(2 * n_edges + 1) * sizeof *s.nbr);
    if (!s.nbr_start || !s.nbr) {
        search_free(&s);
        return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
    }
    for (int i = 0; i < n_ops; i++) {
        const sf_op *op = sf_graph_op(g, i);
        for (int k = 0; k < op->n_inputs; k++) {
            s.nbr_start[i + 1]++;
            s.nbr_start[op->inputs[k].op + 1]++;
        }
    }
    for (int i = 0; i < n_ops; i++) s.nbr_start[i + 1] += s.nbr_start[i];
    {
        int *fill = calloc((size_t)n_ops + 1, sizeof *fill);
        if (!fill) {
            search_free(&s);
            return sf_error_set(err, SF_ERR_NOMEM, "mcmc: out of memory");
        }
        for (int i = 0; i < n_ops; i++) {
            const sf_op *op = sf_graph_op(g, i);
            for (int k = 0; k < op->n_inputs; k++) {
                int p = op->inputs[k].op;
                s.nbr[s.nbr_start[i] + fill[i]++] = p;
                s.nbr[s.nbr_start[p] + fill[p]++] = i;
            }
        }
        free(fill);
    }
    sf_rng_seed(&s.rng, o->seed);
    s.t0_s = sf_now_s();
    if (o->progress) sf_progress_start(&s.bar, stderr, "mcmc", 1.0);

    mc_point start_best = {0, 0, 0};
    int have_start_best = 0, skipped = 0;
    sf_status st = SF_OK;
    /* With the polish, the chains get 1 - POLISH_SHARE of the budget
     * and the polish the rest, with what the chains leave. */
    int64_t chain_iters = o->iters;
    double chain_budget_s = o->budget_s;
    if (o->polish) {
        chain_iters = o->iters - (int64_t)((double)o->iters * POLISH_SHARE);
        chain_budget_s = o->budget_s * (1 - POLISH_SHARE);
    }
    for (int i = 0; i < n_starts && st == SF_OK; i++) {
        int left = n_starts - i;
        int64_t share_it = 0;
        if (o->iters > 0) share_it = (chain_iters - s.iterations) / left;
        double share_s = 0;
        if (o->budget_s > 0) {
            share_s = (chain_budget_s - (sf_now_s() - s.t0_s)) / left;
            if (share_s < 0) share_s = 0;
        }
        mc_point sp;
        sf_error serr = {0};
        st = run_chain(&s, starts[i], i, 0, o->iters > 0, share_it, share_s, &sp, &serr);
        if ((st == SF_ERR_RANGE || st == SF_ERR_NOMEM) && s.sims_at_start_fail) {
            /* a start too large to simulate here is left out, not the search */
            skipped++;
            if (i + 1 < n_starts || have_start_best) {
                st = SF_OK;
                continue;
            }
        }
        if (st != SF_OK && err) *err = serr;
        if (st == SF_OK && (!have_start_best || point_better(&sp, &start_best))) {
            start_best = sp;
            have_start_best = 1;
        }
    }
    /* What the chains left of the budget by stopping early goes to one more
     * chain, from the best strategy seen, with pair moves (see the top of the
     * file); it is credited to the start that strategy came from. */
    if (st == SF_OK && o->pair_moves) {
        int64_t left_it = o->iters > 0 ? chain_iters - s.iterations : 0;
        double left_s = o->budget_s > 0 ? chain_budget_s - (sf_now_s() - s.t0_s) : 0;
        if ((o->iters <= 0 || left_it > 0) && (!(o->budget_s > 0) || left_s > 0)) {
            sf_strategy_copy(s.polish, s.best);
            mc_point sp;
            st = run_chain(&s, s.polish, s.best_start, 1, o->iters > 0, left_it, left_s, &sp, err);
        }
    }
    /* Then the greedy polish of the best strategy, with the rest of the budget. */
    if (st == SF_OK && o->polish) st = polish(&s, s.t0_s + o->budget_s, err);
    if (o->progress) sf_progress_finish(&s.bar);
    if (st == SF_OK) {
        sf_strategy_copy(best, s.best);
        if (r) {
            memset(r, 0, sizeof *r);
            r->best_s = s.best_pt.cost_s;
            r->start_best_s = start_best.cost_s;
            r->best_start = s.best_start;
            r->iterations = s.iterations;
            r->accepted = s.accepted;
            r->pair_proposals = s.pair_proposals;
            r->pair_accepted = s.pair_accepted;
            r->polish_moves = s.polish_moves;
            r->polish_improved = s.polish_improved;
            r->pipe_proposals = s.pipe_proposals;
            r->pipe_accepted = s.pipe_accepted;
            r->boundary_moves = s.boundary_moves;
            r->mb_moves = s.mb_moves;
            r->invalid = s.invalid;
            r->skipped_starts = skipped;
            r->templates = s.use_tp ? s.tp.n_classes : 0;
            r->template_moves = s.template_moves;
            r->template_breaks = s.template_breaks;
            r->seconds = sf_now_s() - s.t0_s;
            /* simulations that priced a strategy (starts and proposals); a revert
             * after a rejection is part of a proposal's cost, not a simulation */
            r->sims_per_s = r->seconds > 0 ? (double)s.sims / r->seconds : 0.0;
        }
    }
    search_free(&s);
    return st;
}
