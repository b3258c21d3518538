/*
 * mcmc_impl.h - what mcmc.c takes from mcmc_pipe.c: the stages' device groups
 * of a pipelined strategy, configs moved into a stage's group, and the
 * pipeline moves (a stage boundary, the micro-batches, the schedule).
 */
#ifndef SOAPFLOW_MCMC_IMPL_H
#define SOAPFLOW_MCMC_IMPL_H

#include "soapflow/search.h"

/* The device groups of a pipelined strategy: stage s's group is the devices
 * its operators' parts are on, plus each idle device (no part of any
 * operator on it) that follows one of them: an idle device joins the stage of
 * the nearest lower-numbered device in use (the lowest idle ones the stage of
 * the lowest device in use). The groups cut the machine's devices into
 * disjoint sets, so configs kept inside their stage's group keep the stages
 * disjoint; idle devices in a stage's group let a stage that starts on one
 * device of a block spread over the block. */
typedef struct mc_groups {
    int n_ops, n_dev;
    int stages, m;
    int64_t per_mb; /* samples a micro-batch */
    int *chunk;     /* [n_ops] each operator's chunk (sf_pipeline_op_chunks) */
    int *dev_stage; /* [n_dev] each device's stage */
    int *dev_idx;   /* [n_dev] its place in the stage's group */
    int *grp_start; /* [SF_MAX_PIPE_CHUNKS + 1] stage s's devices are grp_dev[grp_start[s] ..
                     * grp_start[s + 1]), increasing */
    int *grp_dev;   /* [n_dev] */
    int *fill;      /* [SF_MAX_PIPE_CHUNKS] scratch of mc_groups_compute */
} mc_groups;

int mc_groups_init(mc_groups *gr, int n_ops, int n_dev); /* 0, or -1 out of memory */
void mc_groups_free(mc_groups *gr);
/* The groups of s (which has a pipeline). */
void mc_groups_compute(mc_groups *gr, const sf_graph *g, const sf_strategy *s);

static inline int mc_stage_of(const mc_groups *gr, int op) { return gr->chunk[op] % gr->stages; }
static inline int mc_group_size(const mc_groups *gr, int stage) {
    return gr->grp_start[stage + 1] - gr->grp_start[stage];
}

/* c's parts moved into stage's group: a device of the group stays; a device of
 * another stage's group at place i there goes to place i mod (group size) of
 * this one, so a layout over one stage's group is the same layout over
 * another's (wrapping when this group is smaller). */
void mc_home(const mc_groups *gr, int stage, sf_config *c);
/* 1 when config c of op obeys the pipeline's rules for one operator: its
 * sample split at most a micro-batch, ZeRO at most stage 1 with m > 1 (its
 * devices are mc_home's business). */
int mc_pipe_config_ok(const mc_groups *gr, const sf_op *op, const sf_config *c);
/* sf_config_random_in with the stage's group as the machine: degrees whose
 * product is at most the group's size, on a run of the group's devices
 * (cyclic, from a random place) or on distinct devices of it at random. */
void mc_random_in_group(const mc_groups *gr, int stage, const sf_op *op, int reduce, sf_rng *rng,
                        sf_config *c);
/* cur's degrees on a run of the stage's group from a random place. */
void mc_shift_in_group(const mc_groups *gr, int stage, const sf_config *cur, sf_rng *rng,
                       sf_config *c);

/* The kinds of pipeline move (sf_mcmc_result counts the first two). */
enum { MC_PIPE_BOUNDARY = 0, MC_PIPE_MICRO_BATCHES, MC_PIPE_SCHEDULE };

/* Draw a pipeline move from cur (groups gr, layer starts of t when it has any)
 * into cand: 5/8 a stage boundary moved (by 1 to 3 operators, or half the
 * time, when the graph has layers, to the next layer's start that way), 2/8
 * the micro-batch count (a neighbouring divisor of the batch, or 1 time in 4
 * any divisor, that keeps the schedule's and the samples' rules and is at most
 * 8 per stage or the current count), 1/8 the schedule (gpipe <-> 1f1b; an
 * interleaved pipeline moves a boundary instead). Operators that change stage
 * get their configs moved into their new stage's group (mc_home). scratch:
 * [n_ops]. Returns the kind, with cand a valid strategy, or -1 when the draw
 * gave none (a boundary against its neighbour, a rule broken). */
int mc_pipe_propose(const sf_graph *g, const sf_machine *m, const sf_templates *t,
                    const mc_groups *gr, const sf_strategy *cur, sf_rng *rng, int *scratch,
                    sf_strategy *cand);

#endif
