/*
 * mpi_runtime.c - the runtime's cases (runtime_cases.h) under mpirun: every
 * rank of the launch trains each case on the MPI back end, rank 0 trains it
 * as one rank on its own (threads back end) and compares. One launch runs
 * every case (partial sums too: the linears model runs every kind of their
 * reductions), so that the suite pays mpirun's start-up once per rank count
 * (CMakeLists.txt launches it with 2 and with 4 ranks). Exits 0 when every
 * case matched on every rank.
 */
#include "runtime_cases.h"

#define N_RANDOM 2

int main(void) {
    sf_error err = {0};
    sf_comm *c = sf_comm_mpi_new(&err);
    if (!c) {
        fprintf(stderr, "mpi_runtime: %s\n", err.msg);
        return 1;
    }
    int rank = sf_comm_rank(c), n = sf_comm_size(c);
    int failed = 0, cases = 0;
    for (int model = 0; model < RC_MODELS; model++) {
        sf_graph *g = rc_model(model);
        if (!g) return 1;
        rc_job one;
        memset(&one, 0, sizeof one);
        if (rank == 0 && rc_train_one(&one, g, 0) != SF_OK) failed++;
        sf_strategy *s = sf_strategy_new(g);
        char what[160];
        int bulk, ok, reduces[SF_REDUCE_KIND_COUNT] = {0};
        for (int k = 0; (ok = rc_strategy(g, n, k, N_RANDOM, s, what, sizeof what, &bulk)) != 0;
             k++) {
            cases++;
            if (ok < 0 || (rank == 0 && rc_check_coverage(g, s, n))) {
                failed++;
                continue;
            }
            rc_job j;
            if (rc_job_init(&j, g, s, bulk)) return 1;
            rc_job_scheme(&j, k, n);
            size_t len = strlen(what);
            snprintf(what + len, sizeof what - len, ", %s", rc_scheme_name(&j));
            sf_status st = rc_rank_main(c, &j);
            if (st != SF_OK) {
                fprintf(stderr, "%s: rank %d: %s\n", what, rank, j.err[rank].msg);
                failed++;
            } else if (rank == 0 && rc_compare(&j, &one, what)) {
                failed++;
            }
            rc_job_free(&j);
            rc_count_reduces(g, s, n, reduces);
        }
        /* the linears model runs every kind of partial sums' reduction */
        for (int q = 0; q < SF_REDUCE_KIND_COUNT && model == 6; q++)
            if (!reduces[q]) {
                if (rank == 0) fprintf(stderr, "linears: no reduction of kind %d\n", q);
                failed++;
            }
        if (rank == 0) rc_job_free(&one);
        sf_strategy_free(s);
        sf_graph_free(g);
    }
    /* Adam and AdamW (ring and parameter server), ZeRO stages 1-3, recomputation,
     * pipelines */
    static const rc_family *const families[] = {&rc_adam_family, &rc_zero_family,
                                                &rc_recompute_family, &rc_pipe_family};
    for (int fi = 0; fi < 4; fi++) {
        const rc_family *f = families[fi];
        sf_graph *g = NULL;
        rc_job one;
        memset(&one, 0, sizeof one);
        int model = -1;
        for (int i = 0; i < f->n; i++) {
            if (i % f->per == 0) { /* a new model or optimizer: its one-rank run, on rank 0 */
                if (g && rank == 0) rc_job_free(&one);
                if (f->model(i) != model) {
                    sf_graph_free(g);
                    g = rc_model(model = f->model(i));
                    if (!g) return 1;
                }
                if (rank == 0 && rc_train_one_with(&one, g, 0, f->opt(i)) != SF_OK) failed++;
            }
            sf_strategy *s = sf_strategy_new(g);
            char what[160];
            rc_job j;
            cases++;
            if (f->make(g, n, i, N_RANDOM, s, what, sizeof what, &j) != 1) {
                failed++;
                sf_strategy_free(s);
                continue;
            }
            sf_status st = rc_rank_main(c, &j);
            if (st != SF_OK) {
                fprintf(stderr, "%s: rank %d: %s\n", what, rank, j.err[rank].msg);
                failed++;
            } else if (rank == 0 && rc_compare(&j, &one, what)) {
                failed++;
            }
            rc_job_free(&j);
            sf_strategy_free(s);
        }
        if (rank == 0) rc_job_free(&one);
        sf_graph_free(g);
    }
    int v[1] = {failed};
    sf_comm_max(c, v, 1);
    if (rank == 0) printf("mpi_runtime: %d cases on %d ranks, %d failed\n", cases, n, v[0]);
    sf_comm_free(c);
    return v[0] ? 1 : 0;
}
