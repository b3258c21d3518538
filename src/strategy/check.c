/*
 * check.c - the check of a whole strategy: every operator's config against
 * its operator and the machine (strategy.c), then every tie (tie.c: tied
 * operators split their shared weights alike). A file of its own so that the
 * calls between the configs' file and the ties' go one way (tie.c uses
 * strategy.c's configs; tests/check_cycles.py).
 */
#include "soapflow/strategy.h"

sf_status sf_strategy_validate(const sf_strategy *s, const sf_graph *g, const sf_machine *m,
                               sf_error *err) {
    int n = sf_graph_num_ops(g);
    if (sf_strategy_num_ops(s) != n)
        return sf_error_set(err, SF_ERR_INVALID, "strategy has %d operators, graph '%s' has %d",
                            sf_strategy_num_ops(s), sf_graph_name(g), n);
    for (int i = 0; i < n; i++) {
        const sf_op *op = sf_graph_op(g, i);
        const sf_config *c = sf_strategy_get(s, i);
        sf_status st = sf_config_validate(op, m, c, err);
        if (st != SF_OK) return st;
        /* a weight group's stage is its owner's: the others leave it out or repeat it */
        if (op->weight_owner >= 0 && c->zero &&
            c->zero != sf_strategy_get(s, op->weight_owner)->zero)
            return sf_error_set(err, SF_ERR_INVALID,
                                "operator '%s': zero stage %d, but the owner of its weights '%s' "
                                "has %d (a weight group has one stage: its owner's)",
                                op->name, c->zero, sf_graph_op(g, op->weight_owner)->name,
                                sf_strategy_get(s, op->weight_owner)->zero);
    }
    const sf_pipeline *pl = sf_strategy_pipeline(s);
    if (pl) {
        sf_status st = sf_pipeline_validate(pl, s, g, m, err);
        if (st != SF_OK) return st;
    }
    return sf_strategy_check_ties(s, g, 0, NULL, NULL, err);
}
