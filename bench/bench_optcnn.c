/*
 * bench_optcnn.c - how fast the OptCNN dynamic program is, how far elimination
 * reduces each zoo model, and what its optimum is worth against data parallelism
 * under the same additive cost model.
 *
 *     bench_optcnn [machine] [repeats]      (default p100-4x4, 5)
 *
 * For each model at the zoo's default batch and at 64 per device it prints the
 * best and median wall time and the best CPU time of `repeats` searches, the nodes and edges left
 * after elimination, how the rest was solved, and the additive cost of the OptCNN strategy and of
 * data parallelism (sf_optcnn_cost of sf_strategy_data).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "soapflow/models.h"
#include "soapflow/search.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(const char *model, int64_t batch, sf_machine *m, sf_cost_model *cm, int repeats) {
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    if (batch > 0) mo.batch = batch;
    sf_graph *g = sf_model_build(model, &mo, &err);
    if (!g) {
        fprintf(stderr, "%s: %s\n", model, err.msg);
        return 1;
    }
    sf_strategy *s = sf_strategy_new(g), *data = sf_strategy_new(g);
    double times[64], cpu[64];
    if (repeats > 64) repeats = 64;
    sf_optcnn_result r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < repeats; i++) {
        clock_t c0 = clock();
        sf_status st = sf_optcnn_search(g, m, cm, NULL, s, &r, &err);
        cpu[i] = (double)(clock() - c0) / CLOCKS_PER_SEC;
        if (st != SF_OK) {
            fprintf(stderr, "%s: %s\n", model, err.msg);
            return 1;
        }
        times[i] = r.seconds;
    }
    qsort(times, (size_t)repeats, sizeof *times, cmp_double);
    qsort(cpu, (size_t)repeats, sizeof *cpu, cmp_double);
    sf_strategy_data(data, g, m);
    double dc = sf_optcnn_cost(g, m, cm, NULL, data);
    printf("%-13s batch %5lld ops %4d  wall best %.3f median %.3f s  cpu best %.3f s  left %2d "
           "nodes %2d edges  %-20s optcnn %8.3f ms  data %8.3f ms  x%.2f\n",
           model, (long long)mo.batch, r.nodes_initial, times[0], times[repeats / 2], cpu[0],
           r.nodes_left, r.edges_left, r.method, r.cost_s * 1e3, dc * 1e3, dc / r.cost_s);
    sf_strategy_free(s);
    sf_strategy_free(data);
    sf_graph_free(g);
    return 0;
}

int main(int argc, char **argv) {
    const char *machine = argc > 1 ? argv[1] : "p100-4x4";
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    if (repeats < 1) repeats = 1;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(machine, &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
    int n_dev = sf_machine_num_devices(m);
    const char *models[] = {"inception_v3", "alexnet", "vgg16", "resnet101", "rnnlm", "nmt"};
    int rc = 0;
    printf("machine %s (%d devices), analytic cost model, %d runs each\n", machine, n_dev, repeats);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        rc |= run(models[i], 0, m, cm, repeats);
        rc |= run(models[i], 64 * (int64_t)n_dev, m, cm, repeats);
    }
    sf_cost_free(cm);
    sf_machine_free(m);
    return rc;
}
