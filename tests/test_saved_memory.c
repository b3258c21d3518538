/* Memory as frameworks keep it (issue 30, item 3; docs/cost-model.md, "Memory
 * as frameworks keep it"): what each operator's backward saves and what runs in
 * place (sf_op_saves, sf_graph_output_kept), checked on small graphs by rule,
 * and the whole graph's saved activations (sf_graph_stats.saved_bytes, which
 * the simulator charges: its all-at-once memory on one device is that plus the
 * weights) against what PyTorch's autograd saves for the same zoo models, read
 * from tests/fixtures/torch_saved.txt (made by bench/torch_saved.py), within
 * 10%. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/cost.h"
#include "soapflow/graph.h"
#include "soapflow/models.h"
#include "soapflow/sim.h"
#include "soapflow/strategy.h"

static int add(sf_graph *g, sf_op_type type, const char *name, const sf_tensor_ref *in, int n,
               void (*set)(sf_op_params *)) {
    sf_op_params p;
    sf_op_params_default(type, &p);
    if (set) set(&p);
    sf_error err = {0};
    int id = sf_graph_add_op(g, type, name, &p, in, n, &err);
    if (id < 0) fail_msg("%s: %s", name, err.msg);
    return id;
}

static void conv_params(sf_op_params *p) {
    p->conv2d.out_channels = 4;
    p->conv2d.kernel[0] = p->conv2d.kernel[1] = 3;
    p->conv2d.padding[0] = p->conv2d.padding[1] = 1;
}

/* x -> conv a -> bn -> relu r1 -> relu r2 -> conv b -> add(b, r2... ) etc.:
 *   conv a's output is read by bn, which saves it: kept;
 *   bn's output is read by r1 alone, which runs in place: not kept (r1's is);
 *   r1 saves its output, so r2 may not run in place over it: r1 kept, r2 kept;
 *   r2's output feeds conv b (saves it) and the add: kept;
 *   conv b's output is read by the add alone, which runs in place: not kept;
 *   the add's output is read by the loss, which saves its own output only:
 *   not kept; the loss's output is. The input is kept (conv a saves it). */
static void test_rules(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("rules");
    sf_shape xs = sf_shape_make(4, (int64_t[]){2, 4, 8, 8});
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    int a = add(g, SF_OP_CONV2D, "a", (sf_tensor_ref[]){{x, 0}}, 1, conv_params);
    int bn = add(g, SF_OP_BATCHNORM, "bn", (sf_tensor_ref[]){{a, 0}}, 1, NULL);
    int r1 = add(g, SF_OP_RELU, "r1", (sf_tensor_ref[]){{bn, 0}}, 1, NULL);
    int r2 = add(g, SF_OP_RELU, "r2", (sf_tensor_ref[]){{r1, 0}}, 1, NULL);
    int b = add(g, SF_OP_CONV2D, "b", (sf_tensor_ref[]){{r2, 0}}, 1, conv_params);
    int s = add(g, SF_OP_ADD, "add", (sf_tensor_ref[]){{b, 0}, {r2, 0}}, 2, NULL);
    int f = add(g, SF_OP_FLATTEN, "flat", (sf_tensor_ref[]){{s, 0}}, 1, NULL);
    int loss = add(g, SF_OP_SOFTMAX_CE, "loss", (sf_tensor_ref[]){{f, 0}}, 1, NULL);
    const struct {
        int op, kept;
    } want[] = {{x, 1}, {a, 1}, {bn, 0}, {r1, 1}, {r2, 1}, {b, 0}, {s, 0}, {f, 0}, {loss, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (sf_graph_output_kept(g, want[i].op, 0) != want[i].kept)
            fail_msg("'%s': kept %d, want %d", sf_graph_op(g, want[i].op)->name,
                     sf_graph_output_kept(g, want[i].op, 0), want[i].kept);
    assert_int_equal(sf_op_saves(sf_graph_op(g, a)), SF_SAVES_INPUT(0));
    assert_true(sf_op_saves(sf_graph_op(g, r1)) & SF_SAVES_IN_PLACE);
    assert_int_equal(sf_op_saves(sf_graph_op(g, loss)), SF_SAVES_OUTPUT);
    assert_int_equal(sf_graph_output_kept(g, loss, 1), 0); /* no such output */
    assert_int_equal(sf_graph_output_kept(g, 99, 0), 0);
    /* the graph's saved bytes: the kept outputs (x, a, r1, r2, loss: 2x4x8x8 each
     * but the loss's 2 x 256) and nothing saved beyond inputs here */
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    assert_true(st.saved_bytes == (4.0 * 512 + 512) * 4);
    sf_graph_free(g);
}

/* A max pool keeps its indices (int64: 8 bytes an output), a dropout its mask
 * (a byte an element), neither their outputs; a mul both inputs. */
static void test_extras(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("extras");
    sf_shape xs = sf_shape_make(4, (int64_t[]){2, 4, 8, 8});
    int x = sf_graph_add_input(g, "x", &xs, 0, &err);
    int d = add(g, SF_OP_DROPOUT, "drop", (sf_tensor_ref[]){{x, 0}}, 1, NULL);
    int p = add(g, SF_OP_POOL2D, "pool", (sf_tensor_ref[]){{d, 0}}, 1, NULL);
    const sf_op *po = sf_graph_op(g, p), *dop = sf_graph_op(g, d);
    sf_tile tp = sf_tile_full(&po->space), td = sf_tile_full(&dop->space);
    double pool_out = (double)sf_shape_numel(&po->out_shapes[0]);
    assert_true(sf_op_saved_extra_bytes(po, &tp) == 8 * pool_out);
    assert_true(sf_op_saved_extra_bytes(dop, &td) == 512);
    assert_int_equal(sf_graph_output_kept(g, x, 0), 0); /* dropout keeps only its mask */
    assert_int_equal(sf_graph_output_kept(g, d, 0), 1); /* the pool saves its input */
    int m = add(g, SF_OP_MUL, "mul", (sf_tensor_ref[]){{p, 0}, {p, 0}}, 2, NULL);
    (void)m;
    assert_int_equal(sf_graph_output_kept(g, p, 0), 1);
    sf_graph_free(g);
}

/* The zoo's CNNs and transformer against PyTorch's saved tensors, and the
 * simulator's memory on one device: the same saved bytes plus the weights. */
static void test_against_pytorch(void **state) {
    (void)state;
    const char *dir = getenv("SF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/torch_saved.txt", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot open (set SF_SOURCE_DIR to the source tree)", path);
    char line[256];
    int n = 0;
    sf_error err = {0};
    sf_machine *mach = sf_machine_preset("dgx-1v", &err);
    assert_non_null(mach);
    sf_analytic_params ap;
    sf_analytic_params_default(&ap);
    sf_cost_model *cm = sf_cost_analytic_new(mach, &ap);
    assert_non_null(cm);
    while (fgets(line, sizeof line, f)) {
        char name[64];
        long long batch;
        double torch_bytes;
        if (line[0] == '#' || sscanf(line, "%63s %lld %lf", name, &batch, &torch_bytes) != 3)
            continue;
        sf_model_options o;
        sf_model_options_default(&o);
        o.batch = batch;
        sf_graph *g = sf_model_build(name, &o, &err);
        if (!g) fail_msg("%s: %s", name, err.msg);
        sf_graph_stats st;
        sf_graph_stats_compute(g, &st);
        double rel = st.saved_bytes / torch_bytes - 1;
        printf("%-12s batch %lld: soapflow %.0f, PyTorch %.0f bytes saved (%+.1f%%)\n", name, batch,
               st.saved_bytes, torch_bytes, 100 * rel);
        if (fabs(rel) > 0.10)
            fail_msg("%s batch %lld: %+.1f%% off PyTorch", name, batch, 100 * rel);
        /* the simulator charges the same: one device, all alive at once, less
         * the weights (weight, gradient and momentum, 12 bytes a parameter) */
        sf_strategy *s = sf_strategy_new(g);
        assert_int_equal(sf_strategy_single(s, g, 0), SF_OK);
        sf_sim *sim = sf_sim_new(g, mach, cm, NULL, &err);
        assert_non_null(sim);
        sf_sim_result r;
        assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
        double act = r.device_mem_bytes[0] - 12.0 * (double)st.params;
        if (fabs(act - st.saved_bytes) > 1e-9 * st.saved_bytes)
            fail_msg("%s: simulator %.0f, graph %.0f", name, act, st.saved_bytes);
        sf_sim_free(sim);
        sf_strategy_free(s);
        sf_graph_free(g);
        n++;
    }
    fclose(f);
    assert_true(n >= 4);
    sf_cost_free(cm);
    sf_machine_free(mach);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_extras),
        cmocka_unit_test(test_against_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
