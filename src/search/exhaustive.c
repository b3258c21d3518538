/*
 * exhaustive.c - brute force over every combination of OptCNN candidate
 * configs: the oracle that the dynamic program (optcnn.c) and the MCMC search
 * are tested against on small graphs.
 *
 * The space is the Cartesian product of each operator's candidates under the
 * default OptCNN options (optcnn_impl.h), walked as an odometer whose last
 * operator turns fastest. Each strategy is priced either by the additive model
 * or by the simulator:
 *  - additive (use_simulator == 0): the reference per-operator and per-edge
 *    functions of optcnn_impl.h, not the dynamic program's fast tables, so the
 *    oracle shares no shortcut with what it checks. Only the operators whose
 *    config turned, and the edges touching them, are re-priced; the total is then
 *    summed in sf_optcnn_cost's order, so the best cost equals
 *    sf_optcnn_cost(best) bit for bit.
 *  - simulated (use_simulator != 0): the simulator's iteration time, with one
 *    delta update (sf_sim_update) per operator whose config turned. A strategy
 *    that fits in memory always beats one that does not.
 * The first strategy of least cost in odometer order wins, so the answer is
 * deterministic.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optcnn_impl.h"

static sf_status walk_additive(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                               const oc_cands *cand, int *digit, sf_strategy *cur,
                               sf_strategy *best, double *best_cost, sf_error *err) {
    int n = sf_graph_num_ops(g);
    size_t n_ops = (size_t)(n > 0 ? n : 0), n_edges = 0;
    for (int i = 0; i < n; i++) n_edges += (size_t)sf_graph_op(g, i)->n_inputs;
    double *node = calloc(n_ops + 1, sizeof *node);
    double *edge = calloc(n_edges + 1, sizeof *edge);
    int *eoff = calloc(n_ops + 1, sizeof *eoff);
    oc_scratch sc;
    if (!node || !edge || !eoff || oc_scratch_init(&sc, g, m, cm, SF_SCHEME_RING) != SF_OK) {
        free(node);
        free(edge);
        free(eoff);
        return sf_error_set(err, SF_ERR_NOMEM, "out of memory in exhaustive search");
    }
    for (int i = 0; i < n; i++) eoff[i + 1] = eoff[i] + sf_graph_op(g, i)->n_inputs;
    int changed_from = 0; /* operators >= this turned since the last pricing */
    *best_cost = INFINITY;
    for (;;) {
        for (int vi = 0; vi < n; vi++) {
            const sf_op *v = sf_graph_op(g, vi);
            const sf_config *cv = sf_strategy_get(cur, vi);
            if (vi >= changed_from) node[vi] = oc_node_cost(&sc, vi, cv);
            for (int k = 0; k < v->n_inputs; k++) {
                int ui = v->inputs[k].op;
                if (vi < changed_from && ui < changed_from) continue;
                edge[eoff[vi] + k] = oc_edge_cost(&sc, vi, k, sf_strategy_get(cur, ui), cv);
            }
        }
        double total = 0;
        for (int vi = 0; vi < n; vi++) {
            total += node[vi];
            for (int k = eoff[vi]; k < eoff[vi + 1]; k++) total += edge[k];
        }
        if (total < *best_cost) {
            *best_cost = total;
            sf_strategy_copy(best, cur);
        }
        int i = n - 1;
        while (i >= 0 && ++digit[i] == cand[i].n) {
            digit[i] = 0;
            oc_cfg_get(&cand[i].cfg[0], sf_strategy_config(cur, i));
            i--;
        }
        if (i < 0) break;
        oc_cfg_get(&cand[i].cfg[digit[i]], sf_strategy_config(cur, i));
        changed_from = i;
    }
    int nomem = sc.nomem;
    oc_scratch_free(&sc);
    free(node);
    free(edge);
    free(eoff);
    return nomem ? sf_error_set(err, SF_ERR_NOMEM, "out of memory in exhaustive search") : SF_OK;
}

static sf_status walk_simulated(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                                const oc_cands *cand, int *digit, sf_strategy *cur,
                                sf_strategy *best, double *best_cost, sf_error *err) {
    int n = sf_graph_num_ops(g);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, err);
    if (!sim) return err && err->code ? err->code : SF_ERR_NOMEM;
    sf_sim_result res;
    sf_config next; /* the candidate an operator turns to */
    sf_status st = sf_sim_run(sim, cur, &res, err);
    int best_fits = -1;
    *best_cost = INFINITY;
    while (st == SF_OK) {
        if (res.fits > best_fits || (res.fits == best_fits && res.iter_s < *best_cost)) {
            best_fits = res.fits;
            *best_cost = res.iter_s;
            sf_strategy_copy(best, cur);
        }
        int i = n - 1;
        while (i >= 0 && ++digit[i] == cand[i].n) {
            digit[i] = 0;
            i--;
        }
        if (i < 0) break;
        /* operators i.. turned: i to its next config, the later ones back to their first */
        for (int j = i; j < n && st == SF_OK; j++) {
            sf_config *c = sf_strategy_config(cur, j);
            oc_cfg_get(&cand[j].cfg[digit[j]], &next);
            if (sf_config_equal(&next, c)) continue;
            sf_config_copy(c, &next);
            st = sf_sim_update(sim, j, c, &res, err);
        }
    }
    sf_sim_free(sim);
    return st;
}

sf_status sf_exhaustive_search(const sf_graph *g, const sf_machine *m, const sf_cost_model *cm,
                               int use_simulator, int64_t max_states, sf_strategy *out,
                               double *best_cost, sf_error *err) {
    if (!g || !m || !cm || !out || !best_cost)
        return sf_error_set(err, SF_ERR_INVALID,
                            "exhaustive search: graph, machine, cost model, output strategy and "
                            "cost are required");
    int n = sf_graph_num_ops(g);
    if (sf_strategy_num_ops(out) != n)
        return sf_error_set(err, SF_ERR_INVALID,
                            "exhaustive search: the strategy has %d operators, the graph %d",
                            sf_strategy_num_ops(out), n);
    sf_optcnn_options o;
    sf_optcnn_options_default(&o);
    sf_arena *arena = sf_arena_new(0);
    if (!arena) return sf_error_set(err, SF_ERR_NOMEM, "out of memory in exhaustive search");
    oc_cands *cand = sf_arena_calloc(arena, (size_t)(n ? n : 1), sizeof *cand);
    int *digit = sf_arena_calloc(arena, (size_t)(n ? n : 1), sizeof *digit);
    sf_strategy *cur = sf_strategy_new(g);
    sf_status st = SF_OK;
    if (!cand || !digit || !cur) {
        st = sf_error_set(err, SF_ERR_NOMEM, "out of memory in exhaustive search");
        goto done;
    }
    st = oc_candidates(g, m, cm, &o, arena, cand, err);
    if (st != SF_OK) goto done;
    int64_t states = 1;
    for (int i = 0; i < n; i++) {
        if (sf_mul_overflow_i64(states, cand[i].n, &states) || states > max_states) {
            st = sf_error_set(err, SF_ERR_RANGE,
                              "exhaustive search: more than %lld strategies (operator '%s' has "
                              "%d configs)",
                              (long long)max_states, sf_graph_op(g, i)->name, cand[i].n);
            goto done;
        }
    }
    for (int i = 0; i < n; i++) oc_cfg_get(&cand[i].cfg[0], sf_strategy_config(cur, i));
    if (use_simulator)
        st = walk_simulated(g, m, cm, cand, digit, cur, out, best_cost, err);
    else
        st = walk_additive(g, m, cm, cand, digit, cur, out, best_cost, err);
done:
    sf_strategy_free(cur);
    sf_arena_free(arena);
    return st;
}
