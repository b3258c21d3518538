/*
 * soapflow/search.h - finding fast strategies.
 *
 *     sf_mcmc_options mo;
 *     sf_mcmc_options_default(&mo);
 *     mo.iters = 2000;                 // proposals over all starts; or budget_s = 30 (seconds)
 *     sf_strategy *best = sf_strategy_new(g);
 *     sf_mcmc_result mr;
 *     sf_mcmc_search(g, m, cm, starts, n_starts, &mo, best, &mr, &err);
 *
 *     sf_optcnn_result or;
 *     sf_optcnn_search(g, m, cm, NULL, best, &or, &err);
 *
 * Three searches share the simulator's view of a strategy:
 *  - MCMC (FlexFlow section 6): Metropolis-Hastings over the whole SOAP space,
 *    with delta simulation in the loop;
 *  - OptCNN (ICML'18 section 5): an exact dynamic program over layer-wise configs
 *    under an additive cost model, by node and edge elimination;
 *  - exhaustive enumeration of tiny graphs, the test oracle for both.
 */
#ifndef SOAPFLOW_SEARCH_H
#define SOAPFLOW_SEARCH_H

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/machine.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- OptCNN: additive cost model and dynamic programming ------------------- */

/* Candidate configs of one operator under OptCNN's space: degree tuples over its
 * splittable dimensions whose product p is a power of two or divides the device
 * count (p <= devices), part i on device i: contiguous devices from 0, as in
 * OptCNN. */
typedef struct sf_optcnn_options {
    int max_configs;        /* per operator cap (0: no cap) */
    int check_memory;       /* drop configs whose parts do not fit on a device */
    int max_left;           /* enumerate exhaustively what is left when at most this many nodes */
    sf_sync_scheme scheme;  /* how gradient sync is priced: ring all-reduce (default) or
                             * parameter server, as the simulator runs them */
    int reduce;             /* SF_OPT_IN_REDUCE (1): each node's configs split reduction
                             * dimensions too (partial sums: a row-parallel linear, attention
                             * heads); SF_OPT_IN_INNER (2): also inner ones (softmax_ce's
                             * classes: sf_op_dim_opt_in); 0
                             * (default) keeps every seeded search as it was */
    int memory_bound;       /* 1 (default): when the fastest answer does not fit in device
                             * memory (sf_optcnn_memory: the simulator's all-at-once count),
                             * search for the fastest that fits by Lagrangian relaxation
                             * (docs/search.md, "OptCNN under memory"); 0: the fastest */
    double memory_headroom; /* the share of each device's memory kept free, in [0, 1)
                             * (default 0; `search` passes --memory-headroom) */
    int timeline;           /* 1: an answer fits when the simulator (sim, with its memory
                             * timeline and memory_headroom) says its peak over the iteration
                             * does, activation gradients included, and the report is that
                             * peak; 0 (default): when the memory model's count does */
    sf_sim_options sim;     /* with timeline: the simulator's sync, scheme, segments and
                             * max_tasks (an answer over it is judged by the model) */
} sf_optcnn_options;

SF_API void sf_optcnn_options_default(sf_optcnn_options *o);

typedef struct sf_optcnn_result {
    double cost_s;     /* optimum of the additive cost model */
    int nodes_initial; /* operators in the graph */
    int nodes_left;    /* nodes left after elimination */
    int edges_left;
    int exact;          /* 1 when the answer is the exact optimum */
    const char *method; /* how the rest was solved ("exhaustive", "greedy ..."): static text */
    double seconds;     /* search time */
    /* memory (sf_optcnn_memory) of the answer */
    double peak_mem_bytes; /* its most loaded device's bytes */
    double mem_cap_bytes;  /* what that device may use: its memory less the headroom */
    int fits;              /* peak_mem_bytes <= mem_cap_bytes on every device */
    int peak_device;       /* the device over its capacity by the most (else the fullest) */
    double peak_kinds[SF_SIM_MEM_KIND_COUNT]; /* what that device holds, by sf_sim_mem_kind */
    int timeline; /* 1: judged by the simulator's timeline (sf_optcnn_options.timeline) */
    /* the memory bound: 1 when the fastest answer did not fit and the answer is
     * the fastest fitting one the relaxation found (or, when none fits, the one
     * of smallest peak); fastest_* describe the fastest answer either way */
    int bounded;
    double fastest_cost_s, fastest_peak_bytes;
    double lambda; /* the multiplier of the answer (seconds per byte; 0: unbounded) */
    int solves;    /* dynamic programs solved (1 when unbounded) */
} sf_optcnn_result;

SF_API sf_status sf_optcnn_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                                  const sf_optcnn_options *o, sf_strategy *out, sf_optcnn_result *r,
                                  sf_error *err);
/* OptCNN's additive cost of a strategy: sum over operators of compute (slowest
 * part, forward + backward + update) and gradient sync, plus sum over edges of
 * transfer time. o: its sync scheme (NULL: defaults, a ring). */
SF_API double sf_optcnn_cost(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                             const sf_optcnn_options *o, const sf_strategy *s);
/* OptCNN's memory model of a strategy without ZeRO stages or recomputation
 * (sf_config.zero, .recompute): each device's bytes as the simulator counts
 * them all at once (sf_sim_result.device_mem_bytes: weights with their
 * gradients and optimizer state, activations, received copies; weights shared
 * by G operators are charged 1/G per operator, exact when they share a
 * config), as a sum of a term per operator and one per edge. Returns the
 * largest device's; NAN on bad arguments or out of memory. per_device
 * ([devices]) and kinds ([devices * SF_SIM_MEM_KIND_COUNT]) may be NULL. */
SF_API double sf_optcnn_memory(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                               const sf_optcnn_options *o, const sf_strategy *s, double *per_device,
                               double *kinds);

/* Brute force over every combination of OptCNN candidate configs: the oracle.
 * Refuses (SF_ERR_RANGE) when the space exceeds max_states. */
SF_API sf_status sf_exhaustive_search(const sf_graph *g, const sf_machine *m,
                                      const sf_cost_model *cm, int use_simulator,
                                      int64_t max_states, sf_strategy *out, double *best_cost,
                                      sf_error *err);

/* ---- layer templates (src/search/templates.c) ------------------------------- */

/* The operators of identical layers: one class per operator of a layer that
 * repeats (a transformer block's attention, its first MLP linear, ...), whose
 * members are that operator in each layer. Members have names equal but for
 * the first run of digits (the layer index: "h3.attn" is layer 3) and the same
 * type, parameters, shapes, weight count and inputs at the same offsets in
 * the graph. The MCMC search with sf_mcmc_options.templates gives one member's
 * config to every member in step with it (docs/search.md, "Layer templates"). */
typedef struct sf_templates {
    int n_ops;         /* operators of the graph */
    int n_classes;     /* classes of two or more members */
    int *cls;          /* [n_ops] each operator's class, -1 for none */
    int *layer;        /* [n_ops] a member's layer index (its name's), -1 for none */
    int *member_start; /* [n_classes + 1] class c's members are members[member_start[c] ..
                        * member_start[c + 1]), in id order */
    int *members;
    int n_layers;     /* distinct layer indices among the members */
    int *layer_start; /* [n_layers] each layer's first member operator, increasing */
} sf_templates;

/* Find g's templates into *t (free with sf_templates_free); SF_ERR_NOMEM when
 * out of memory. A graph without repeated layers has no class. */
SF_API sf_status sf_templates_find(const sf_graph *g, sf_templates *t, sf_error *err);
SF_API void sf_templates_free(sf_templates *t);

/* ---- MCMC --------------------------------------------------------------------- */

typedef struct sf_mcmc_options {
    double budget_s; /* wall-clock budget over all starts (0: none) */
    int64_t iters;   /* iteration budget over all starts (0: none) */
    uint64_t seed;
    double beta;        /* acceptance: exp(-beta * delta / cost_of_start) at the start of
                         * each chain; default 50 */
    double anneal;      /* beta grows geometrically over each chain's budget to
                         * beta * anneal at its end; default 1 (a fixed beta: with
                         * the polish, annealing lost more than it found, see
                         * docs/search.md) */
    int use_delta;      /* 1: delta simulation in the loop (default); 0: full */
    int pair_moves;     /* 1 (default): the budget the chains leave by stopping early
                         * goes to a last chain from the best strategy, half of whose
                         * proposals change an operator and a neighbour together;
                         * 0: no last chain (docs/search.md) */
    int polish;         /* 1 (default): a quarter of the budget, and what the chains
                         * leave, goes to a greedy descent from the best strategy
                         * over every single-operator and neighbour-pair move of a
                         * candidate set (docs/search.md); 0: none */
    int progress;       /* draw a progress bar on stderr when it is a terminal */
    int reduce;         /* SF_OPT_IN_REDUCE (1): propose reduction degrees too (partial
                         * sums: a row-parallel linear, attention heads); SF_OPT_IN_INNER
                         * (2): also inner ones (softmax_ce's classes: sf_op_dim_opt_in),
                         * in single moves, pair moves and the polish's
                         * candidates; 0 (default) keeps every seeded search as
                         * it was */
    int memory;         /* 1: propose memory moves too: a weight group's ZeRO stage
                         * (sf_config.zero, on its owner) and an operator's
                         * recomputation flag, a quarter of single moves; every
                         * move keeps the flags of the configs it replaces. 0
                         * (default) draws what it drew before; sf_search_run turns
                         * it on when data parallelism does not fit */
    int templates;      /* 1: layer templates (sf_templates_find): a config move of one
                         * operator of a repeated layer moves that operator in every
                         * layer in step with it, and the chain draws each template
                         * once rather than once per layer; 1 in 16 of its moves
                         * break the tie for one layer. 0 (default): every operator
                         * on its own, the draws of before (docs/search.md) */
    int pipeline_moves; /* 1 (default): from a pipelined strategy, 1 in 8 proposals
                         * change the pipeline (a stage boundary, the micro-batches,
                         * the schedule), judged by a full simulation; config moves
                         * keep every part on its stage's devices either way */
    sf_sim_options sim; /* the simulator's options (sync mode); sf_search_run judges
                         * every candidate with these too */
} sf_mcmc_options;

SF_API void sf_mcmc_options_default(sf_mcmc_options *o);

typedef struct sf_mcmc_result {
    double best_s;       /* simulated iteration time of the best strategy */
    double start_best_s; /* best over the starting strategies */
    int best_start;      /* index of the start that led to it */
    int64_t iterations;  /* proposals evaluated */
    int64_t accepted;
    int64_t pair_proposals;  /* of the proposals, those drawn as pair moves */
    int64_t pair_accepted;   /* ... and accepted */
    int64_t polish_moves;    /* of the proposals, the polish's moves */
    int64_t polish_improved; /* ... that improved the strategy (counted as accepted) */
    double seconds;
    double sims_per_s;
    /* pipelines and templates (sf_mcmc_options.pipeline_moves, .templates) */
    int64_t pipe_proposals;  /* of the proposals, pipeline moves (boundary, m, schedule) */
    int64_t pipe_accepted;   /* ... accepted */
    int64_t boundary_moves;  /* of the accepted pipeline moves, those of a stage boundary */
    int64_t mb_moves;        /* ... those of the micro-batch count */
    int64_t invalid;         /* proposals rejected unsimulated: no valid strategy (a
                              * pipeline rule or a tie a move cannot keep) */
    int templates;           /* template classes found (0 without templates) */
    int64_t template_moves;  /* proposals that moved more than one member of a template */
    int64_t template_breaks; /* proposals that broke a template's tie for one layer */
    int skipped_starts;      /* starts left out: their task graph passed the task limit or
                              * the host's memory (the others' chains ran) */
} sf_mcmc_result;

/* Search from each start in turn (each gets an equal share of the budget, three
 * quarters of it with the polish, and stops early after half of its share
 * without improvement), then, with pair moves, from the best strategy seen with
 * what is left, then polish the best strategy seen with the rest; the answer is
 * the best strategy seen, never worse than the best start. Strategies that do
 * not fit in memory are rejected. */
SF_API sf_status sf_mcmc_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                                const sf_strategy *const *starts, int n_starts,
                                const sf_mcmc_options *o, sf_strategy *best, sf_mcmc_result *r,
                                sf_error *err);

/* ---- the whole search: baselines, OptCNN and MCMC side by side ----------- */

typedef enum sf_search_row_id {
    SF_SEARCH_DATA = 0,
    SF_SEARCH_MODEL,
    SF_SEARCH_OWT,
    SF_SEARCH_EXPERT,
    SF_SEARCH_SHARDED, /* when data parallelism does not fit: the best of the baselines
                        * that save memory (ZeRO stages, FSDP, recomputation, Megatron
                        * with them), named as a baseline */
    SF_SEARCH_PIPELINE, /* the pipeline pass's plan (sf_search_pipeline_pass), named as
                         * the megatron baseline that builds it */
    SF_SEARCH_OPTCNN,
    SF_SEARCH_MCMC,
    SF_SEARCH_ROWS
} sf_search_row_id;

/* One candidate, as the simulator judges it. */
typedef struct sf_search_row {
    const char *name; /* "data", "model", "owt", "expert", a sharded baseline's name
                       * (e.g. "fsdp:recompute=full"), "optcnn", "mcmc" */
    int present;      /* 0 when not run (or its simulation failed) */
    double iter_s;
    double moved_bytes; /* transfers + all-reduce traffic */
    double peak_mem_bytes;
    int fits;
} sf_search_row;

/* ---- the pipeline pass (src/search/pipe_pass.c) ----------------------------- */

/* When sf_search_run runs the pipeline pass. */
typedef enum sf_search_pipe_mode {
    SF_SEARCH_PIPE_AUTO = 0, /* when data parallelism does not fit in memory */
    SF_SEARCH_PIPE_OFF,
    SF_SEARCH_PIPE_ON,
    SF_SEARCH_PIPE_MODE_COUNT
} sf_search_pipe_mode;

/* The plan the pass chose. */
typedef struct sf_search_pipe_plan {
    int present;         /* 0: no candidate simulated */
    int fits;            /* by the simulator's memory timeline */
    double iter_s;       /* its simulated iteration */
    double peak_bytes;   /* its timeline's peak on the fullest device */
    int tp, pp, dp;      /* tensor, pipeline and data degrees (tp: the stage's group
                          * for a non-transformer, data parallel in it) */
    int micro_batch;     /* B: samples of a micro-batch a data-parallel rank */
    int recompute;       /* 0 none, 1 selective, 2 full */
    sf_pipeline pipeline; /* stages 0 when the plan has none (pp 1, one micro-batch) */
    char name[160];      /* the baseline that builds it: "megatron:tp=8,pp=16,..." */
    int tried, skipped;  /* candidates simulated; left out (weights do not fit, task
                          * graph over the limit, heavier recomputation than one that
                          * fits, past the budget) */
    int probed;          /* candidates judged by two short runs (of P and 2P
                          * micro-batches) before any was simulated whole */
    int out_of_budget;   /* 1: the budget ran out before every candidate was tried */
    double seconds;
} sf_search_pipe_plan;

/* The pipeline pass alone: every (stages, device group, template) candidate
 * of docs/search.md ("The pipeline pass") simulated with so (its memory over
 * the timeline), within budget_s seconds (0: none) and max_tasks tasks (0:
 * none); the fastest that fits (else the smallest peak) into out and plan.
 * SF_OK with plan->present 0 when there was nothing to try. */
SF_API sf_status sf_search_pipeline_pass(const sf_graph *g, const sf_machine *m,
                                         const sf_cost_model *cm, const sf_sim_options *so,
                                         double budget_s, int64_t max_tasks, sf_strategy *out,
                                         sf_search_pipe_plan *plan, sf_error *err);

typedef struct sf_search_options {
    int run_optcnn, run_mcmc;
    int pipeline;             /* sf_search_pipe_mode (default auto) */
    double pipeline_budget_s; /* the pass's budget (0: a third of mcmc.budget_s, or none) */
    sf_mcmc_options mcmc; /* its seed also draws the random start */
} sf_search_options;

SF_API void sf_search_options_default(sf_search_options *o); /* both searches, MCMC defaults */

typedef struct sf_search_report {
    sf_search_row rows[SF_SEARCH_ROWS];
    int best;                /* row of the best strategy: fits first, then time */
    sf_optcnn_result optcnn; /* when run */
    sf_search_pipe_plan pipe; /* when the pipeline pass ran (pipe_ran) */
    int pipe_ran;
    sf_mcmc_result mcmc;     /* when run */
} sf_search_report;

/* Simulate the baselines, run OptCNN's DP and then the MCMC search started from
 * data parallelism, owt or expert (whichever differs from data), the OptCNN
 * result and a random strategy (skipped when its task graph is over 4x data
 * parallelism's: every proposal from it would cost that much to simulate).
 * When data parallelism does not fit in memory, also the baselines that save
 * memory (row SF_SEARCH_SHARDED: the best of them), whose best is an MCMC
 * start too, and MCMC proposes ZeRO stages and recomputation (memory moves).
 * Writes the best strategy into `best`. */
SF_API sf_status sf_search_run(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                               const sf_search_options *o, sf_strategy *best, sf_search_report *rep,
                               sf_error *err);

#ifdef __cplusplus
}
#endif
#endif
