/*
 * plan_link.c - the planning library (soapflow_plan) on its own: linked
 * without BLAS, MPI or the runtime (CMakeLists.txt gives it nothing else), it
 * builds a model, simulates the baselines, runs both searches, and still runs
 * a fast kernel, over the reference BLAS, equal to the reference kernel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/models.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "plan_link: %s failed: %s\n", #c, err.msg);                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void) {
    sf_error err = {0};
    CHECK(strcmp(sf_kernels_blas(), "reference") == 0);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_graph *g = sf_model_build("lenet5", &mo, &err);
    sf_machine *m = sf_machine_open("p100-4x4[4]", &err);
    CHECK(g && m);
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    sf_sim *sim = sf_sim_new(g, m, cm, NULL, &err);
    sf_strategy *s = sf_strategy_new(g);
    CHECK(cm && sim && s);
    sf_sim_result r;
    CHECK(sf_strategy_data(s, g, m) == SF_OK && sf_sim_run(sim, s, &r, &err) == SF_OK);
    CHECK(r.iter_s > 0 && isfinite(r.iter_s));
    sf_optcnn_result orr;
    CHECK(sf_optcnn_search(g, m, cm, NULL, s, &orr, &err) == SF_OK);
    const sf_strategy *starts[1] = {s};
    sf_mcmc_options o;
    sf_mcmc_options_default(&o);
    o.budget_s = 0;
    o.iters = 200;
    sf_mcmc_result mr;
    sf_strategy *best = sf_strategy_new(g);
    CHECK(best && sf_mcmc_search(g, m, cm, starts, 1, &o, best, &mr, &err) == SF_OK);

    /* conv1 forward, fast (im2col + the reference SGEMM) against the reference kernel */
    const sf_op *conv = sf_graph_op(g, sf_graph_find(g, "conv1"));
    sf_tile t = sf_tile_full(&conv->space), rg, ot;
    sf_op_input_region(conv, &t, 0, &rg);
    sf_op_output_tile(conv, &t, 0, &ot);
    size_t nin = (size_t)sf_tile_numel(&rg), nout = (size_t)sf_tile_numel(&ot);
    float *x = malloc(nin * sizeof *x), *y0 = malloc(nout * sizeof *y0);
    float *y1 = malloc(nout * sizeof *y1), *w = malloc((size_t)conv->n_params * sizeof *w);
    size_t ws = sf_kernel_workspace_bytes(conv, &t, 0);
    void *buf = malloc(ws ? ws : 1);
    CHECK(x && y0 && y1 && w && buf);
    for (size_t i = 0; i < nin; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int64_t i = 0; i < conv->n_params; i++) w[i] = (float)((i * 13) % 29) / 29.0f - 0.5f;
    const float *in[1] = {x};
    float *out[1] = {y0};
    sf_kernel_args a = {.op = conv,
                        .tile = t,
                        .n_inputs = 1,
                        .in = in,
                        .in_region = &rg,
                        .n_outputs = 1,
                        .out = out,
                        .weights = w,
                        .workspace = buf,
                        .workspace_bytes = ws};
    CHECK(sf_kernel_forward(&a, 0) == SF_OK);
    out[0] = y1;
    CHECK(sf_kernel_forward(&a, 1) == SF_OK);
    double worst = 0;
    for (size_t i = 0; i < nout; i++) worst = fmax(worst, fabs((double)y0[i] - y1[i]));
    CHECK(worst < 1e-4);
    free(x);
    free(y0);
    free(y1);
    free(w);
    free(buf);
    sf_strategy_free(best);
    sf_strategy_free(s);
    sf_sim_free(sim);
    sf_cost_free(cm);
    sf_machine_free(m);
    sf_graph_free(g);
    return 0;
}
