/*
 * Runtime tests: training with P ranks (threads of this process, through the
 * local communication back end) gives the losses and weights of one rank, for
 * every kind of strategy the planner offers (data, model, one weird trick,
 * random strategies over the whole SOAP space, attribute splits with halos,
 * re-partitioning between consecutive operators), on lenet5, an MLP, a small
 * residual CNN, a small LSTM language model and a small transformer; and the
 * task graph's pairs cover every consumer's input region exactly once.
 * The same checks run over MPI in tests/mpi_train.sh.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

#define ITERS 10
#define MAX_RANKS 4

typedef struct job {
    const sf_graph *g;
    const sf_strategy *s;
    int iters, bulk;
    float **w0;
    double losses[ITERS];
    float **w_out;
    sf_error err[MAX_RANKS];
} job;

static sf_status rank_main(sf_comm *c, void *arg) {
    job *j = arg;
    int r = sf_comm_rank(c);
    sf_error *e = &j->err[r];
    sf_runtime_options o;
    sf_runtime_options_default(&o);
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 1e-3;
    o.bulk_sync = j->bulk;
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, &o, e);
    if (!rt) return e->code ? e->code : SF_ERR_INTERNAL;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w0, e);
    sf_batch_bufs *bb = sf_batch_bufs_new(j->g, e);
    if (!bb) st = SF_ERR_NOMEM;
    for (int it = 0; it < j->iters && st == SF_OK; it++) {
        sf_batch_synthetic(bb, j->g, 7, it);
        double loss = 0;
        st = sf_runtime_step(rt, &bb->batch, &loss, e);
        if (r == 0) j->losses[it] = loss;
    }
    if (st == SF_OK) st = sf_runtime_get_params(rt, SF_RT_WEIGHTS, r == 0 ? j->w_out : NULL, e);
    sf_batch_bufs_free(bb);
    sf_runtime_free(rt);
    return st;
}

/* Train g with s on n ranks; losses and final weights into j. */
static void train(job *j, const sf_graph *g, const sf_strategy *s, int n, int bulk) {
    sf_error err = {0};
    memset(j->err, 0, sizeof j->err);
    j->g = g;
    j->s = s;
    j->iters = ITERS;
    j->bulk = bulk;
    j->w0 = sf_params_new(g, 42, 0, &err);
    j->w_out = sf_params_new(g, 0, 1, &err);
    assert_non_null(j->w0);
    assert_non_null(j->w_out);
    sf_status st = sf_comm_local_run(n, rank_main, j, &err);
    if (st != SF_OK) {
        for (int r = 0; r < n; r++)
            if (j->err[r].code) fprintf(stderr, "rank %d: %s\n", r, j->err[r].msg);
        fprintf(stderr, "%s\n", err.msg);
    }
    assert_int_equal(st, SF_OK);
}

static void job_free(job *j) {
    sf_params_free(j->g, j->w0);
    sf_params_free(j->g, j->w_out);
}

/* ||a - b|| / ||b|| over every weight group, and the largest relative
 * difference of the losses. */
static void compare(const job *a, const job *b, const char *what) {
    double worst_loss = 0;
    for (int i = 0; i < ITERS; i++) {
        double d = fabs(a->losses[i] - b->losses[i]) / fmax(fabs(b->losses[i]), 1e-12);
        if (d > worst_loss) worst_loss = d;
    }
    double worst_w = 0;
    const char *worst_op = "";
    for (int op = 0; op < sf_graph_num_ops(a->g); op++) {
        if (!a->w_out[op]) continue;
        double num = 0, den = 0;
        for (int64_t q = 0; q < sf_graph_op(a->g, op)->n_params; q++) {
            double d = (double)a->w_out[op][q] - (double)b->w_out[op][q];
            num += d * d;
            den += (double)b->w_out[op][q] * b->w_out[op][q];
        }
        double rel = sqrt(num) / fmax(sqrt(den), 1e-12);
        if (rel > worst_w) {
            worst_w = rel;
            worst_op = sf_graph_op(a->g, op)->name;
        }
    }
    if (worst_loss > 1e-4 || worst_w > 1e-4 || !isfinite(a->losses[ITERS - 1]))
        fprintf(stderr, "%s: loss differs by %.3g, weights by %.3g (%s); loss %g vs %g\n", what,
                worst_loss, worst_w, worst_op, a->losses[ITERS - 1], b->losses[ITERS - 1]);
    assert_true(isfinite(a->losses[ITERS - 1]));
    assert_true(worst_loss <= 1e-4);
    assert_true(worst_w <= 1e-4);
    /* training did something: the loss moved */
    assert_true(fabs(b->losses[ITERS - 1] - b->losses[0]) > 1e-6);
}

/* Every consumer part's input region is covered exactly once by its pairs. */
static void check_coverage(const sf_graph *g, const sf_strategy *s, int n_dev) {
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, n_dev, &err);
    assert_non_null(tg);
    sf_taskgraph_set_strategy(tg, s);
    for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
    for (int x = 0; x < sf_graph_num_ops(g); x++) {
        const sf_op *o = sf_graph_op(g, x);
        const sf_config *c = sf_strategy_get(s, x);
        for (int k = 0; k < o->n_inputs; k++) {
            const sf_tg_pair *pr;
            int np = sf_taskgraph_edge(tg, x, k, &pr);
            assert_true(np >= 0);
            for (int j = 0; j < c->n_parts; j++) {
                sf_tile rj;
                sf_op_input_region(o, &sf_taskgraph_tiles(tg, x)[j], k, &rj);
                int64_t want = sf_tile_numel(&rj), got = 0;
                for (int i = 0; i < np; i++) {
                    if (pr[i].cons_part != j) continue;
                    got += pr[i].numel;
                    sf_tile in;
                    assert_true(sf_tile_intersect(&pr[i].region, &rj, &in));
                    assert_int_equal(sf_tile_numel(&in), pr[i].numel); /* inside the region */
                    for (int i2 = 0; i2 < i; i2++) /* and disjoint from the others */
                        if (pr[i2].cons_part == j)
                            assert_false(sf_tile_intersect(&pr[i].region, &pr[i2].region, NULL));
                }
                if (got != want)
                    fprintf(stderr, "%s input %d part %d: pairs cover %lld of %lld\n", o->name, k,
                            j, (long long)got, (long long)want);
                assert_int_equal(got, want);
            }
        }
    }
    sf_taskgraph_free(tg);
}

static sf_machine *machine_of(int n) {
    char name[32];
    snprintf(name, sizeof name, "cpu[%d]", n);
    sf_error err = {0};
    sf_machine *m = sf_machine_open(name, &err);
    assert_non_null(m);
    return m;
}

/* Train with strategy s on n ranks and compare with one rank. */
static void same_as_one_rank(const sf_graph *g, const sf_strategy *s, int n, const char *what,
                             int bulk) {
    sf_machine *m = machine_of(n);
    sf_error err = {0};
    if (sf_strategy_validate(s, g, m, &err) != SF_OK) fprintf(stderr, "%s: %s\n", what, err.msg);
    assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
    check_coverage(g, s, n);
    sf_strategy *one = sf_strategy_new(g);
    sf_strategy_single(one, g, 0);
    job a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    train(&b, g, one, 1, 0);
    train(&a, g, s, n, bulk);
    compare(&a, &b, what);
    job_free(&a);
    job_free(&b);
    sf_strategy_free(one);
    sf_machine_free(m);
}

/* The baselines and a few random strategies of the whole space. */
static void strategies(const sf_graph *g, int n, int n_random) {
    sf_machine *m = machine_of(n);
    sf_error err = {0};
    sf_strategy *s = sf_strategy_new(g);
    static const char *const base[] = {"data", "model", "owt"};
    for (int b = 0; b < 3; b++) {
        assert_int_equal(sf_strategy_baseline(s, base[b], g, m, &err), SF_OK);
        char what[96];
        snprintf(what, sizeof what, "%s %s on %d ranks", sf_graph_name(g), base[b], n);
        same_as_one_rank(g, s, n, what, b == 2);
    }
    sf_rng rng;
    sf_rng_seed(&rng, 1234);
    for (int r = 0; r < n_random; r++) {
        for (int op = 0; op < sf_graph_num_ops(g); op++)
            sf_config_random(sf_graph_op(g, op), m, &rng, sf_strategy_config(s, op));
        char what[96];
        snprintf(what, sizeof what, "%s random #%d on %d ranks", sf_graph_name(g), r, n);
        same_as_one_rank(g, s, n, what, r & 1);
    }
    sf_strategy_free(s);
    sf_machine_free(m);
}

static sf_graph *zoo(const char *name, sf_model_options *o) {
    sf_error err = {0};
    sf_graph *g = sf_model_build(name, o, &err);
    if (!g) fprintf(stderr, "%s\n", err.msg);
    assert_non_null(g);
    return g;
}

static void test_lenet5(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 8;
    sf_graph *g = zoo("lenet5", &o);
    strategies(g, 2, 4);
    strategies(g, 4, 4);
    sf_graph_free(g);
}

/* Attribute splits with halos (conv rows), parameter splits (channels) and
 * re-partitioning between every pair of consecutive operators. */
static void test_lenet5_halos_and_repartitioning(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 4;
    sf_graph *g = zoo("lenet5", &o);
    sf_strategy *s = sf_strategy_new(g);
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        /* alternate: rows (attribute) for 4-d tensors, channels (parameter or
         * attribute) otherwise, and the sample dimension every third op */
        int d = op % 3 == 0 ? 0 : x->space.ndim == 4 ? 2 : x->space.ndim - 1;
        if (x->kinds[d] == SF_DIM_NONE || x->space.d[d] < 2) d = 0;
        deg[d] = 2;
        assert_int_equal(sf_config_set_degrees(c, x->space.ndim, deg), SF_OK);
        for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((p + op) % 2);
    }
    same_as_one_rank(g, s, 2, "lenet5 halos", 0);
    sf_strategy_free(s);
    sf_graph_free(g);
}

static void test_mlp(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 8;
    o.n_mlp = 4;
    o.mlp_sizes[0] = 32;
    o.mlp_sizes[1] = 24;
    o.mlp_sizes[2] = 16;
    o.mlp_sizes[3] = 10;
    sf_graph *g = zoo("mlp", &o);
    strategies(g, 2, 3);
    strategies(g, 4, 3);
    sf_graph_free(g);
}

/* input -> conv -> relu -> conv -> add(skip) -> relu -> global pool -> flatten -> fc -> loss */
static sf_graph *resnet_tiny(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("resnet_tiny");
    sf_shape in = {4, {4, 3, 8, 8}};
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 4;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c1 = sf_graph_add_op(g, SF_OP_CONV2D, "conv1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params q;
    sf_op_params_default(SF_OP_RELU, &q);
    int r1 = sf_graph_add_op(g, SF_OP_RELU, "relu1", &q, (sf_tensor_ref[]){{c1, 0}}, 1, &err);
    int c2 = sf_graph_add_op(g, SF_OP_CONV2D, "conv2", &p, (sf_tensor_ref[]){{r1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_ADD, &q);
    int a = sf_graph_add_op(g, SF_OP_ADD, "add", &q, (sf_tensor_ref[]){{c2, 0}, {r1, 0}}, 2, &err);
    sf_op_params_default(SF_OP_RELU, &q);
    int r2 = sf_graph_add_op(g, SF_OP_RELU, "relu2", &q, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    sf_op_params_default(SF_OP_POOL2D, &q);
    q.pool2d.mode = SF_POOL_ADAPTIVE_AVG;
    q.pool2d.output_size[0] = q.pool2d.output_size[1] = 1;
    int pl = sf_graph_add_op(g, SF_OP_POOL2D, "pool", &q, (sf_tensor_ref[]){{r2, 0}}, 1, &err);
    sf_op_params_default(SF_OP_FLATTEN, &q);
    q.flatten.start_dim = 1;
    int f = sf_graph_add_op(g, SF_OP_FLATTEN, "flat", &q, (sf_tensor_ref[]){{pl, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &q);
    q.linear.out_features = 10;
    int fc = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &q, (sf_tensor_ref[]){{f, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &q);
    int l = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "loss", &q, (sf_tensor_ref[]){{fc, 0}}, 1, &err);
    if (l < 0) fprintf(stderr, "%s\n", err.msg);
    assert_true(l >= 0);
    return g;
}

static void test_resnet_tiny(void **state) {
    (void)state;
    sf_graph *g = resnet_tiny();
    strategies(g, 2, 4);
    strategies(g, 4, 3);
    sf_graph_free(g);
}

static void test_rnnlm_small(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 4;
    o.seq_len = 4;
    o.chunk = 2;
    o.hidden = 8;
    o.vocab = 16;
    sf_graph *g = zoo("rnnlm", &o);
    strategies(g, 2, 3);
    strategies(g, 4, 2);
    sf_graph_free(g);
}

static void test_transformer_small(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 2;
    o.seq_len = 4;
    o.hidden = 24;
    o.vocab = 16;
    sf_graph *g = zoo("transformer", &o);
    strategies(g, 2, 2);
    strategies(g, 4, 1);
    sf_graph_free(g);
}

/* A part on a device past the rank count is refused on every rank, before
 * any work, with one message. */
typedef struct bad_job {
    const sf_graph *g;
    const sf_strategy *s;
    sf_error err[MAX_RANKS];
} bad_job;

static sf_status bad_rank(sf_comm *c, void *arg) {
    bad_job *j = arg;
    sf_error *e = &j->err[sf_comm_rank(c)];
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, NULL, e);
    if (rt) {
        sf_runtime_free(rt);
        return SF_OK;
    }
    return e->code;
}

static void test_bad_strategy_refused_everywhere(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 4;
    sf_graph *g = zoo("lenet5", &o);
    sf_machine *m = machine_of(4);
    sf_strategy *s = sf_strategy_new(g);
    sf_strategy_data(s, g, m);
    bad_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.s = s;
    sf_error err = {0};
    assert_int_not_equal(sf_comm_local_run(2, bad_rank, &j, &err), SF_OK);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(j.err[r].code, SF_ERR_INVALID);
        assert_non_null(strstr(j.err[r].msg, "there are 2 ranks"));
        assert_string_equal(j.err[r].msg, j.err[0].msg);
    }
    sf_strategy_free(s);
    sf_machine_free(m);
    sf_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_strategy_refused_everywhere),
        cmocka_unit_test(test_lenet5),
        cmocka_unit_test(test_lenet5_halos_and_repartitioning),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_resnet_tiny),
        cmocka_unit_test(test_rnnlm_small),
        cmocka_unit_test(test_transformer_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
