/*
 * search.c - the whole search, as `soapflow search` runs it: every baseline,
 * OptCNN's dynamic program and FlexFlow's MCMC, judged by the same simulator.
 *
 * The searches themselves live in optcnn.c and mcmc.c; this file only decides
 * what they start from and which answer wins, so that every front end (the CLI,
 * benchmarks, a future service) compares strategies the same way: a strategy
 * that fits in memory beats one that does not, then the faster one wins.
 */
#include "soapflow/search.h"

#include <stdio.h>
#include <string.h>

static const char *const row_names[SF_SEARCH_ROWS] = {
    "data", "model", "owt", "expert", "sharded", "pipeline", "optcnn", "mcmc"};

void sf_search_options_default(sf_search_options *o) {
    memset(o, 0, sizeof *o);
    o->run_optcnn = 1;
    o->run_mcmc = 1;
    sf_mcmc_options_default(&o->mcmc);
}

static void judge(sf_sim *sim, const sf_strategy *s, sf_search_row *row, sf_sim_result *res) {
    sf_error err = {0};
    row->present = 0;
    if (sf_sim_run(sim, s, res, &err) != SF_OK) return;
    row->iter_s = res->iter_s;
    row->moved_bytes = (double)(res->transfer_bytes + res->sync_bytes);
    row->peak_mem_bytes = res->peak_mem_bytes;
    row->fits = res->fits;
    row->present = 1;
}

#define SF_SEARCH_BIG_MACHINE 256 /* devices */

static int better(const sf_search_row *a, const sf_search_row *b) {
    if (!b->present) return a->present;
    if (!a->present) return 0;
    if (a->fits != b->fits) return a->fits;
    return a->iter_s < b->iter_s;
}

/* The baselines that save memory, tried when data parallelism does not fit
 * (the Megatron ones where the graph has its pattern). */
static const char *const sharded_names[] = {"zero1",
                                            "fsdp",
                                            "zero1:recompute=full",
                                            "fsdp:recompute=selective",
                                            "fsdp:recompute=full",
                                            "megatron:zero=1",
                                            "megatron-sp:zero=1,recompute=selective",
                                            "megatron-sp:zero=3,recompute=full"};
enum { N_SHARDED = (int)(sizeof sharded_names / sizeof sharded_names[0]) };

/* The fastest fitting (else the smallest-peak) of sharded_names into out,
 * judged into row (absent when none can be built). */
static void best_sharded(sf_sim *sim, const sf_graph *g, const sf_machine *m, sf_strategy *out,
                         sf_strategy *tmp, sf_search_row *row) {
    row->present = 0;
    for (int i = 0; i < N_SHARDED; i++) {
        sf_error ignore = {0};
        if (sf_strategy_baseline(tmp, sharded_names[i], g, m, &ignore) != SF_OK) continue;
        sf_search_row r = {.name = sharded_names[i]};
        sf_sim_result res;
        judge(sim, tmp, &r, &res);
        if (!r.present) continue;
        int win = !row->present || (r.fits && !row->fits) ||
                  (r.fits && row->fits && r.iter_s < row->iter_s) ||
                  (!r.fits && !row->fits && r.peak_mem_bytes < row->peak_mem_bytes);
        if (win) {
            *row = r;
            sf_strategy_copy(out, tmp);
        }
    }
}

sf_status sf_search_run(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                        const sf_search_options *o, sf_strategy *best, sf_search_report *rep,
                        sf_error *err) {
    sf_search_options defaults;
    if (!o) {
        sf_search_options_default(&defaults);
        o = &defaults;
    }
    memset(rep, 0, sizeof *rep);
    for (int i = 0; i < SF_SEARCH_ROWS; i++) rep->rows[i].name = row_names[i];
    sf_status st = SF_OK;
    sf_sim *sim = sf_sim_new(g, m, cm, &o->mcmc.sim, err);
    sf_strategy *base[4] = {0}, *shard = NULL, *piped = NULL;
    int64_t piped_tasks = 0; /* the pipeline pass's plan's tasks */
    sf_strategy *opt = sf_strategy_new(g), *rnd = sf_strategy_new(g), *mbest = sf_strategy_new(g);
    if (!sim) return err && err->code != SF_OK ? err->code : SF_ERR_NOMEM;
    if (!opt || !rnd || !mbest) {
        st = sf_error_set(err, SF_ERR_NOMEM, "search: out of memory");
        goto done;
    }
    sf_sim_result res, data_res = {0};
    int64_t max_tasks = 0;
    for (int i = 0; i < 4; i++) {
        base[i] = sf_strategy_new(g);
        if (!base[i]) {
            st = sf_error_set(err, SF_ERR_NOMEM, "search: out of memory");
            goto done;
        }
        st = sf_strategy_baseline(base[i], row_names[i], g, m, err);
        if (st != SF_OK) goto done;
        judge(sim, base[i], &rep->rows[i], i == 0 ? &data_res : &res);
        /* the other candidates within 4x data parallelism's task graph (or 2M
         * tasks): OptCNN's model parallelism of GPT-3 on 1024 devices would
         * take more memory than a host has (a row left out instead) */
        if (i == 0 && rep->rows[0].present) {
            max_tasks = 4 * data_res.tasks > 2000000 ? 4 * data_res.tasks : 2000000;
            sf_sim_set_max_tasks(sim, max_tasks);
        }
    }
    /* data parallelism does not fit: the baselines that save memory */
    if (!rep->rows[SF_SEARCH_DATA].fits) {
        shard = sf_strategy_new(g);
        if (!shard) {
            st = sf_error_set(err, SF_ERR_NOMEM, "search: out of memory");
            goto done;
        }
        best_sharded(sim, g, m, shard, mbest, &rep->rows[SF_SEARCH_SHARDED]);
    }
    /* the pipeline pass: forced, or when data parallelism does not fit */
    if (o->pipeline == SF_SEARCH_PIPE_ON ||
        (o->pipeline == SF_SEARCH_PIPE_AUTO && !rep->rows[SF_SEARCH_DATA].fits)) {
        piped = sf_strategy_new(g);
        if (!piped) {
            st = sf_error_set(err, SF_ERR_NOMEM, "search: out of memory");
            goto done;
        }
        double pb = o->pipeline_budget_s > 0 ? o->pipeline_budget_s : o->mcmc.budget_s / 3;
        st = sf_search_pipeline_pass(g, m, cm, &o->mcmc.sim, pb, max_tasks, piped, &rep->pipe,
                                     err);
        if (st != SF_OK) goto done;
        rep->pipe_ran = 1;
        sf_search_row *pr = &rep->rows[SF_SEARCH_PIPELINE];
        pr->present = rep->pipe.present;
        pr->name = rep->pipe.name;
        pr->iter_s = rep->pipe.iter_s;
        pr->peak_mem_bytes = rep->pipe.peak_bytes;
        pr->fits = rep->pipe.fits;
        pr->moved_bytes = 0;
        if (pr->present && sf_sim_run(sim, piped, &res, NULL) == SF_OK) {
            pr->moved_bytes = (double)(res.transfer_bytes + res.sync_bytes);
            piped_tasks = res.tasks;
        }
    }
    if (o->run_optcnn) {
        sf_optcnn_options oo;
        sf_optcnn_options_default(&oo);
        oo.scheme = o->mcmc.sim.scheme; /* price sync as the simulator runs it */
        oo.reduce = o->mcmc.reduce;     /* and propose what MCMC proposes */
        /* past a few hundred devices an operator has hundreds of configs and
         * pricing every pair of neighbours' configs takes minutes: the ones
         * of lowest node cost (and data parallelism's) */
        /* and without the memory bound, whose solves each price the answer's
         * edges over every device again (GPT-3 on 1024 devices: minutes) */
        if (sf_machine_num_devices(m) > SF_SEARCH_BIG_MACHINE) {
            oo.max_configs = 8;
            oo.memory_bound = 0;
        }
        /* its memory bound judged as the best is at the end: the simulator's
         * timeline within the memory --memory-headroom leaves, on task graphs
         * within the limit above */
        oo.memory_headroom = o->mcmc.sim.memory_headroom;
        oo.timeline = 1;
        oo.sim = o->mcmc.sim;
        oo.sim.max_tasks = max_tasks;
        st = sf_optcnn_search(g, m, cm, &oo, opt, &rep->optcnn, err);
        if (st != SF_OK) goto done;
        judge(sim, opt, &rep->rows[SF_SEARCH_OPTCNN], &res);
    }
    rep->best = SF_SEARCH_DATA;
    for (int i = 1; i <= SF_SEARCH_OPTCNN; i++)
        if (better(&rep->rows[i], &rep->rows[rep->best])) rep->best = i;
    sf_strategy_copy(best, rep->best == SF_SEARCH_OPTCNN     ? opt
                           : rep->best == SF_SEARCH_SHARDED  ? shard
                           : rep->best == SF_SEARCH_PIPELINE ? piped
                                                             : base[rep->best]);
    if (o->run_mcmc) {
        const sf_search_row *data = &rep->rows[SF_SEARCH_DATA];
        const sf_search_row *expert = &rep->rows[SF_SEARCH_EXPERT];
        const sf_strategy *starts[7];
        sf_mcmc_options mo = o->mcmc;
        int ns = 0;
        /* the candidates that simulated (within the task limit) */
        starts[ns++] = base[SF_SEARCH_DATA];
        if (expert->present && expert->iter_s != data->iter_s)
            starts[ns++] = base[SF_SEARCH_EXPERT];
        else if (rep->rows[SF_SEARCH_OWT].present)
            starts[ns++] = base[SF_SEARCH_OWT];
        if (o->run_optcnn && rep->rows[SF_SEARCH_OPTCNN].present) starts[ns++] = opt;
        sf_rng rng;
        sf_rng_seed(&rng, o->mcmc.seed ^ 0x5eed5eedULL);
        for (int i = 0; i < sf_graph_num_ops(g); i++)
            sf_config_random_in(sf_graph_op(g, i), m, o->mcmc.reduce, &rng,
                                sf_strategy_config(rnd, i));
        sf_strategy_align_ties(rnd, g, m); /* tied weights split alike (draws nothing) */
        sf_error ignore = {0};
        if (data->present && sf_sim_run(sim, rnd, &res, &ignore) == SF_OK &&
            res.tasks <= 4 * data_res.tasks)
            starts[ns++] = rnd;
        /* with reduction splits, Megatron's layout where the graph has one */
        sf_strategy *mega = o->mcmc.reduce ? sf_strategy_new(g) : NULL;
        if (mega && sf_strategy_megatron(mega, g, m, 0, 0, &ignore) == SF_OK &&
            sf_sim_run(sim, mega, &res, &ignore) == SF_OK)
            starts[ns++] = mega;
        mo.sim.max_tasks = max_tasks; /* proposals past it are rejected */
        if (rep->rows[SF_SEARCH_SHARDED].present) { /* and the moves that save memory */
            starts[ns++] = shard;
            mo.memory = 1;
        }
        /* the pipeline pass's plan, refined like the others (a pipelined one
         * by MCMC's pipeline-aware proposals: configs inside each stage's
         * devices, boundary and micro-batch moves) */
        if (rep->rows[SF_SEARCH_PIPELINE].present) {
            starts[ns++] = piped;
            if (!data->fits) mo.memory = 1;
            /* the micro-batch graph's tasks may pass the limit the others keep */
            if (mo.sim.max_tasks > 0 && 2 * piped_tasks > mo.sim.max_tasks)
                mo.sim.max_tasks = 2 * piped_tasks;
        }
        st = sf_mcmc_search(g, m, cm, starts, ns, &mo, mbest, &rep->mcmc, err);
        sf_strategy_free(mega);
        if (st != SF_OK) goto done;
        judge(sim, mbest, &rep->rows[SF_SEARCH_MCMC], &res);
        if (better(&rep->rows[SF_SEARCH_MCMC], &rep->rows[rep->best])) {
            rep->best = SF_SEARCH_MCMC;
            sf_strategy_copy(best, mbest);
        }
    }
done:
    sf_strategy_free(shard);
    sf_strategy_free(piped);
    for (int i = 0; i < 4; i++) sf_strategy_free(base[i]);
    sf_strategy_free(opt);
    sf_strategy_free(rnd);
    sf_strategy_free(mbest);
    sf_sim_free(sim);
    return st;
}
