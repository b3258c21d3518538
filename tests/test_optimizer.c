/* The optimizers (cost.h, "the optimizer"; docs/cost-model.md and
 * docs/runtime.md): the update loop against PyTorch's formulas worked out in
 * double here; the runtime's state after real steps against the same formulas
 * (the gradient recovered from the first moment); the simulator's memory
 * against the stated bytes per weight (Adam keeps 4 more than SGD on every
 * device that updates, none more on a parameter server's replicas, in fp32 and
 * under mixed precision); OptCNN's memory check with Adam's state; the analytic
 * (and profiled) update against its byte count; and the runtime's refusal of a
 * second moment under SGD. tests/test_gpt_torch.c holds
 * the same loop to torch.optim.Adam and AdamW themselves. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "soapflow/core.h"
#include "soapflow/cost.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/search.h"
#include "soapflow/sim.h"

#define N 257 /* elements: not a multiple of any vector width */
#define STEPS 6

static void assert_near(double got, double want, double rel, double abs, const char *what, int i) {
    if (!(fabs(got - want) <= rel * fabs(want) + abs))
        fail_msg("%s [%d]: got %.9g, want %.9g", what, i, got, want);
}

static void assert_rel(double got, double want, double rel, const char *what, int i) {
    assert_near(got, want, rel, 1e-12, what, i);
}

/* PyTorch's single-tensor steps in double (torch/optim/sgd.py, adam.py with
 * amsgrad and maximize off, adamw.py). */
static void reference_step(const sf_optimizer *o, int t, double *w, const double *g, double *s0,
                           double *s1) {
    for (int q = 0; q < N; q++) {
        double gq = g[q];
        if (o->kind == SF_OPTIMIZER_SGD) {
            gq += o->weight_decay * w[q];
            s0[q] = o->momentum * s0[q] + gq; /* the buffer starts at the first gradient */
            w[q] -= o->lr * s0[q];
            continue;
        }
        if (o->kind == SF_OPTIMIZER_ADAMW)
            w[q] *= 1 - o->lr * o->weight_decay;
        else
            gq += o->weight_decay * w[q];
        s0[q] = s0[q] + (gq - s0[q]) * (1 - o->beta1); /* exp_avg.lerp_(grad, 1 - beta1) */
        s1[q] = s1[q] * o->beta2 + (1 - o->beta2) * gq * gq;
        double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t);
        double denom = sqrt(s1[q]) / sqrt(bc2) + o->eps;
        w[q] -= o->lr / bc1 * s0[q] / denom;
    }
}

/* Several steps of sf_optimizer_step from random weights and gradients (some
 * tiny, near eps) equal the double reference to float rounding. */
static void check_kind(sf_optimizer_kind kind) {
    sf_optimizer o;
    sf_optimizer_default(&o, kind);
    o.lr = kind == SF_OPTIMIZER_SGD ? 0.05 : 0.01;
    o.weight_decay = 0.1;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.eps = 1e-6;
    float w[N], g[N], s0[N] = {0}, s1[N] = {0};
    double wd[N], gd[N], s0d[N] = {0}, s1d[N] = {0};
    sf_rng rng;
    sf_rng_seed(&rng, 11 + (uint64_t)kind);
    for (int q = 0; q < N; q++) w[q] = (float)(sf_rng_uniform(&rng) * 2 - 1), wd[q] = w[q];
    for (int t = 1; t <= STEPS; t++) {
        for (int q = 0; q < N; q++) {
            double scale = q % 7 == 0 ? 1e-6 : 1.0;
            g[q] = (float)((sf_rng_uniform(&rng) * 2 - 1) * scale);
            gd[q] = g[q];
        }
        sf_optimizer_step(&o, t, w, g, s0, kind == SF_OPTIMIZER_SGD ? NULL : s1, N);
        reference_step(&o, t, wd, gd, s0d, s1d);
        for (int q = 0; q < N; q++) {
            assert_true(g[q] == 0.0f); /* zeroed for the next backward pass */
            /* float rounding: relative, and absolute (1e-6 of values of order 1) where a
             * value passes 0 */
            assert_near(w[q], wd[q], 1e-5, 1e-6, "weight", q);
            assert_near(s0[q], s0d[q], 1e-5, 1e-6, "first state", q);
            if (kind != SF_OPTIMIZER_SGD)
                assert_near(s1[q], s1d[q], 1e-5, 1e-18, "second moment", q);
        }
    }
}

static void test_step_matches_reference(void **state) {
    (void)state;
    for (int k = 0; k < SF_OPTIMIZER_COUNT; k++) check_kind((sf_optimizer_kind)k);
}

/* AdamW decays the weight itself, Adam adds the decay to the gradient: with
 * a zero gradient Adam still moves (the L2 term is its gradient), AdamW only
 * shrinks the weight by 1 - lr wd. */
static void test_decoupled_decay(void **state) {
    (void)state;
    sf_optimizer a, aw;
    sf_optimizer_default(&a, SF_OPTIMIZER_ADAM);
    sf_optimizer_default(&aw, SF_OPTIMIZER_ADAMW);
    a.weight_decay = aw.weight_decay = 0.1;
    float w1 = 0.5f, g1 = 0, m1 = 0, v1 = 0, w2 = 0.5f, g2 = 0, m2 = 0, v2 = 0;
    sf_optimizer_step(&a, 1, &w1, &g1, &m1, &v1, 1);
    sf_optimizer_step(&aw, 1, &w2, &g2, &m2, &v2, 1);
    assert_rel(w1, 0.5 - a.lr * 0.05 / (0.05 + a.eps), 1e-6, "adam", 0); /* the first step: lr */
    assert_rel(w2, 0.5 * (1 - aw.lr * 0.1), 1e-7, "adamw", 0);
    assert_true(m2 == 0 && v2 == 0);
}

static void test_names_and_sizes(void **state) {
    (void)state;
    for (int k = 0; k < SF_OPTIMIZER_COUNT; k++) {
        sf_optimizer_kind got;
        assert_int_equal(sf_optimizer_parse(sf_optimizer_name((sf_optimizer_kind)k), &got), 0);
        assert_int_equal(got, k);
    }
    sf_optimizer_kind dummy;
    assert_int_equal(sf_optimizer_parse("rmsprop", &dummy), -1);
    assert_int_equal(sf_optimizer_parse(NULL, &dummy), -1);
    assert_string_equal(sf_optimizer_name(SF_OPTIMIZER_COUNT), "unknown");
    /* state bytes a weight: SGD 4, Adam 8 */
    assert_int_equal(4 * sf_optimizer_state_slots(SF_OPTIMIZER_SGD), 4);
    assert_int_equal(4 * sf_optimizer_state_slots(SF_OPTIMIZER_ADAM), 8);
    assert_int_equal(4 * sf_optimizer_state_slots(SF_OPTIMIZER_ADAMW), 8);
    /* the update's bytes by hand: master r/w 8, each state r/w 8, the gradient
     * read and zeroed 2 x dtype, under mixed precision the copy written */
    assert_true(sf_optimizer_update_bytes(SF_OPTIMIZER_SGD, SF_DTYPE_FP32) == 24);
    assert_true(sf_optimizer_update_bytes(SF_OPTIMIZER_SGD, SF_DTYPE_BF16) == 22);
    assert_true(sf_optimizer_update_bytes(SF_OPTIMIZER_ADAM, SF_DTYPE_FP32) == 32);
    assert_true(sf_optimizer_update_bytes(SF_OPTIMIZER_ADAMW, SF_DTYPE_FP16) == 30);
    assert_true(sf_optimizer_update_flops(SF_OPTIMIZER_ADAM) >
                sf_optimizer_update_flops(SF_OPTIMIZER_SGD));
}

static sf_cost_model *analytic(const sf_machine *m, sf_dtype t, sf_optimizer_kind k) {
    sf_analytic_params p;
    sf_analytic_params_default(&p);
    p.dtype = t;
    p.optimizer = k;
    sf_cost_model *cm = sf_cost_analytic_new(m, &p);
    assert_non_null(cm);
    assert_int_equal(sf_cost_optimizer(cm), k);
    return cm;
}

/* The analytic update of a linear's whole weight on an H100: its bytes over
 * 80% of 3.35 TB/s after the 5 us launch; Adam's 32 (30) against SGD's 24 (22). */
static void test_update_price(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_preset("dgx-h100", &err);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_graph *g = sf_model_build("mlp", &mo, &err);
    assert_non_null(g);
    const sf_op *fc = NULL;
    for (int i = 0; i < sf_graph_num_ops(g) && !fc; i++)
        if (sf_graph_op(g, i)->type == SF_OP_LINEAR) fc = sf_graph_op(g, i);
    assert_non_null(fc);
    sf_tile t = sf_tile_full(&fc->space);
    double w = (double)fc->n_params, bw = 3350e9 * 0.8;
    static const struct {
        sf_dtype dt;
        sf_optimizer_kind k;
        double bytes;
    } cases[] = {{SF_DTYPE_FP32, SF_OPTIMIZER_SGD, 24},
                 {SF_DTYPE_BF16, SF_OPTIMIZER_SGD, 22},
                 {SF_DTYPE_FP32, SF_OPTIMIZER_ADAM, 32},
                 {SF_DTYPE_BF16, SF_OPTIMIZER_ADAMW, 30}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sf_cost_model *cm = analytic(m, cases[i].dt, cases[i].k);
        assert_rel(sf_cost_task_s(cm, fc, &t, 0, SF_PASS_UPDATE), 5e-6 + w * cases[i].bytes / bw,
                   1e-12, "update", (int)i);
        sf_cost_free(cm);
    }
    /* the profiled model prices updates with its fallback, optimizer and all */
    sf_cost_model *fb = analytic(m, SF_DTYPE_FP32, SF_OPTIMIZER_ADAM);
    sf_cost_model *ref = analytic(m, SF_DTYPE_FP32, SF_OPTIMIZER_ADAM);
    sf_cost_model *pm = sf_cost_profiled_new(m, sf_profile_db_new(NULL), fb);
    assert_non_null(pm);
    assert_int_equal(sf_cost_optimizer(pm), SF_OPTIMIZER_ADAM);
    assert_true(sf_cost_task_s(pm, fc, &t, 0, SF_PASS_UPDATE) ==
                sf_cost_task_s(ref, fc, &t, 0, SF_PASS_UPDATE));
    sf_cost_free(pm);
    sf_cost_free(ref);
    sf_graph_free(g);
    sf_machine_free(m);
}

/* Simulated memory of data parallelism with Adam less that with SGD, per
 * device: 4 bytes for every weight element the device updates (a second fp32
 * state), in fp32 and in bf16 (where SGD keeps master 4 + momentum 4 + copy 2 +
 * gradient 2 and Adam 4 more: ZeRO's 16 a parameter); under a parameter
 * server only the server's state grows, and every shard is on one server. */
static void sim_mem(const sf_graph *g, const sf_machine *m, const sf_strategy *s, sf_dtype t,
                    sf_optimizer_kind k, sf_sync_scheme scheme, double *mem) {
    sf_error err = {0};
    sf_cost_model *cm = analytic(m, t, k);
    sf_sim_options so;
    sf_sim_options_default(&so);
    so.scheme = scheme;
    sf_sim *sim = sf_sim_new(g, m, cm, &so, &err);
    assert_non_null(sim);
    sf_sim_result r;
    assert_int_equal(sf_sim_run(sim, s, &r, &err), SF_OK);
    for (int d = 0; d < r.n_devices; d++) mem[d] = r.device_mem_bytes[d];
    sf_sim_free(sim);
    sf_cost_free(cm);
}

static void test_sim_state_bytes(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *full = sf_machine_preset("dgx-h100", &err);
    sf_machine *m = sf_machine_subset(full, 8, &err);
    assert_non_null(m);
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 64;
    sf_graph *g = sf_model_build("mlp", &mo, &err);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_baseline(s, "data", g, m, &err), SF_OK);
    sf_taskgraph *tg = sf_taskgraph_new(g, 8, &err);
    sf_taskgraph_set_strategy(tg, s);
    for (int i = 0; i < sf_graph_num_ops(g); i++) sf_taskgraph_set_tiles(tg, i);
    int64_t held[8];
    assert_int_equal(sf_taskgraph_device_weights(tg, held), SF_OK);
    sf_taskgraph_free(tg);
    int64_t total = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) total += sf_graph_op(g, i)->n_params;
    for (int dt = 0; dt < 2; dt++) {
        sf_dtype t = dt ? SF_DTYPE_BF16 : SF_DTYPE_FP32;
        double sgd[8], adam[8], adamw[8];
        sim_mem(g, m, s, t, SF_OPTIMIZER_SGD, SF_SCHEME_RING, sgd);
        sim_mem(g, m, s, t, SF_OPTIMIZER_ADAM, SF_SCHEME_RING, adam);
        sim_mem(g, m, s, t, SF_OPTIMIZER_ADAMW, SF_SCHEME_RING, adamw);
        for (int d = 0; d < 8; d++) {
            assert_true(held[d] == total); /* data parallelism: a whole copy each */
            assert_true(adam[d] - sgd[d] == 4.0 * (double)held[d]);
            assert_true(adamw[d] == adam[d]);
        }
        sim_mem(g, m, s, t, SF_OPTIMIZER_SGD, SF_SCHEME_PS, sgd);
        sim_mem(g, m, s, t, SF_OPTIMIZER_ADAM, SF_SCHEME_PS, adam);
        double more = 0;
        for (int d = 0; d < 8; d++) {
            double dm = adam[d] - sgd[d];
            assert_true(dm >= 0 && dm <= 4.0 * (double)held[d]);
            more += dm;
        }
        assert_true(more == 4.0 * (double)total); /* each shard's state on its server once */
    }
    sf_strategy_free(s);
    sf_graph_free(g);
    sf_machine_free(m);
    sf_machine_free(full);
}

/* OptCNN's memory check counts the optimizer's state (fp32 weight bytes x 3
 * with SGD, x 4 with Adam, beside the part's saved and output activations).
 * Adam's optimum for a 256 x 256 linear over 256 rows on four P100s, given
 * memory that holds its largest part counted as SGD's (3 x) but not as Adam's
 * (4 x), is refused: the search answers another config that fits Adam's count
 * (a search that counted SGD's state would keep it, the update's price being
 * the same); SGD, under the same memory, finds an answer that fits its own. */
static sf_machine *p100s(double mem_bytes) {
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, &err), SF_OK);
    d.nodes = 1;
    d.devices_per_node = 4;
    d.kind.mem_bytes = mem_bytes;
    sf_machine *m = sf_machine_build(&d, &err);
    assert_non_null(m);
    return m;
}

/* The largest part's bytes as OptCNN counts them, with w_scale fp32 bytes a
 * weight byte (3 SGD, 4 Adam). */
static double part_bytes(const sf_op *op, const sf_config *c, double w_scale) {
    double most = 0;
    for (int q = 0; q < c->n_parts; q++) {
        sf_tile t;
        sf_op_mem mem;
        sf_config_part_tile(op, c, q, &t);
        sf_op_tile_memory(op, &t, &mem);
        double b = mem.saved_bytes + mem.output_bytes + w_scale * mem.weight_bytes;
        if (b > most) most = b;
    }
    return most;
}

static sf_strategy *optcnn(const sf_graph *g, const sf_machine *m, sf_optimizer_kind k) {
    sf_error err = {0};
    sf_cost_model *cm = analytic(m, SF_DTYPE_FP32, k);
    sf_strategy *s = sf_strategy_new(g);
    sf_optcnn_options o;
    sf_optcnn_options_default(&o);
    assert_int_equal(sf_optcnn_search(g, m, cm, &o, s, NULL, &err), SF_OK);
    sf_cost_free(cm);
    return s;
}

static void test_optcnn_memory(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("fc");
    sf_shape in = sf_shape_make(2, (int64_t[]){256, 256});
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 256;
    int fc = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    assert_true(fc > 0);
    const sf_op *op = sf_graph_op(g, fc);
    sf_machine *big = p100s(1e12);
    for (int k = SF_OPTIMIZER_ADAM; k <= SF_OPTIMIZER_ADAMW; k++) {
        sf_strategy *best = optcnn(g, big, (sf_optimizer_kind)k);
        const sf_config *c0 = sf_strategy_get(best, fc);
        double cap = part_bytes(op, c0, 3);
        assert_true(part_bytes(op, c0, 4) > cap);
        sf_machine *m = p100s(cap);
        sf_strategy *adam = optcnn(g, m, (sf_optimizer_kind)k);
        const sf_config *c = sf_strategy_get(adam, fc);
        assert_false(sf_config_equal(c, c0));
        assert_true(part_bytes(op, c, 4) <= cap);
        sf_strategy *sgd = optcnn(g, m, SF_OPTIMIZER_SGD);
        assert_true(part_bytes(op, sf_strategy_get(sgd, fc), 3) <= cap);
        sf_strategy_free(sgd);
        sf_strategy_free(adam);
        sf_strategy_free(best);
        sf_machine_free(m);
    }
    sf_machine_free(big);
    sf_graph_free(g);
}

/* The runtime's Adam(W) state after real steps of mlp training is PyTorch's:
 * the first step's moments come from one gradient g (m = (1 - b1) g, v = (1 -
 * b2) g^2), and each step's weight is the formula of the moments it kept. */
typedef struct rt_job {
    sf_optimizer_kind kind;
    const sf_graph *g;
    const sf_strategy *s;
    float **w[3], **m[3], **v[3]; /* before, after step 1, after step 2 */
    sf_status sgd_second;         /* SF_RT_SECOND_MOMENT under SGD */
    sf_error err;
} rt_job;

static sf_status rt_train(sf_comm *c, void *arg) {
    rt_job *j = arg;
    sf_runtime_options o;
    sf_runtime_options_default(&o);
    o.optimizer = j->kind;
    o.lr = 0.01;
    o.weight_decay = 0.1;
    o.beta1 = 0.8;
    o.beta2 = 0.9;
    o.eps = 1e-6;
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, &o, &j->err);
    if (!rt) return j->err.code;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w[0], &j->err);
    sf_batch_bufs *bb = sf_batch_bufs_new(j->g, &j->err);
    for (int it = 1; it <= 2 && st == SF_OK && bb; it++) {
        sf_batch_synthetic(bb, j->g, 3, it);
        st = sf_runtime_step(rt, &bb->batch, NULL, &j->err);
        if (st == SF_OK) st = sf_runtime_get_params(rt, SF_RT_WEIGHTS, j->w[it], &j->err);
        if (st == SF_OK) st = sf_runtime_get_params(rt, SF_RT_MOMENTUM, j->m[it], &j->err);
        if (st == SF_OK) st = sf_runtime_get_params(rt, SF_RT_SECOND_MOMENT, j->v[it], &j->err);
    }
    sf_batch_bufs_free(bb);
    sf_runtime_free(rt);
    /* SGD keeps no second moment: asked for one, the runtime says so */
    o.optimizer = SF_OPTIMIZER_SGD;
    sf_error e2 = {0};
    rt = sf_runtime_new(j->g, j->s, c, &o, &e2);
    if (!rt) return e2.code;
    j->sgd_second = sf_runtime_get_params(rt, SF_RT_SECOND_MOMENT, j->v[0], &e2);
    sf_runtime_free(rt);
    return st;
}

static void check_runtime(sf_optimizer_kind kind) {
    sf_error err = {0};
    sf_model_options mo;
    sf_model_options_default(&mo);
    mo.batch = 8;
    mo.n_mlp = 3;
    mo.mlp_sizes[0] = 12;
    mo.mlp_sizes[1] = 9;
    mo.mlp_sizes[2] = 10;
    sf_graph *g = sf_model_build("mlp", &mo, &err);
    assert_non_null(g);
    sf_strategy *s = sf_strategy_new(g);
    assert_int_equal(sf_strategy_single(s, g, 0), SF_OK);
    rt_job j = {.kind = kind, .g = g, .s = s};
    for (int k = 0; k < 3; k++) {
        j.w[k] = sf_params_new(g, k == 0 ? 5 : 0, k != 0, &err);
        j.m[k] = sf_params_new(g, 0, 1, &err);
        j.v[k] = sf_params_new(g, 0, 1, &err);
        assert_true(j.w[k] && j.m[k] && j.v[k]);
    }
    assert_int_equal(sf_comm_local_run(1, rt_train, &j, &err), SF_OK);
    assert_int_equal(j.sgd_second, SF_ERR_INVALID);
    const double lr = 0.01, wd = 0.1, b1 = 0.8, b2 = 0.9, eps = 1e-6;
    int checked = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        if (!j.w[0][op]) continue;
        for (int64_t q = 0; q < sf_graph_op(g, op)->n_params; q++) {
            double w0 = j.w[0][op][q];
            for (int t = 1; t <= 2; t++) {
                double m = j.m[t][op][q], v = j.v[t][op][q];
                double mp = t == 1 ? 0 : j.m[t - 1][op][q], vp = t == 1 ? 0 : j.v[t - 1][op][q];
                double wp = t == 1 ? w0 : j.w[t - 1][op][q];
                double gr = (m - b1 * mp) / (1 - b1); /* the gradient, decay included (Adam) */
                assert_rel(v, b2 * vp + (1 - b2) * gr * gr, 1e-4, "v", (int)q);
                double base = kind == SF_OPTIMIZER_ADAMW ? wp * (1 - lr * wd) : wp;
                double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
                double want = base - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps);
                if (!(fabs(j.w[t][op][q] - want) <= 1e-6 + 1e-5 * fabs(want)))
                    fail_msg("%s step %d weight %lld: %.9g, want %.9g", sf_optimizer_name(kind), t,
                             (long long)q, (double)j.w[t][op][q], want);
                checked++;
            }
        }
    }
    assert_true(checked > 100);
    for (int k = 0; k < 3; k++) {
        sf_params_free(g, j.w[k]);
        sf_params_free(g, j.m[k]);
        sf_params_free(g, j.v[k]);
    }
    sf_strategy_free(s);
    sf_graph_free(g);
}

static void test_runtime_state(void **state) {
    (void)state;
    check_runtime(SF_OPTIMIZER_ADAM);
    check_runtime(SF_OPTIMIZER_ADAMW);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_matches_reference), cmocka_unit_test(test_decoupled_decay),
        cmocka_unit_test(test_names_and_sizes),        cmocka_unit_test(test_update_price),
        cmocka_unit_test(test_sim_state_bytes),        cmocka_unit_test(test_optcnn_memory),
        cmocka_unit_test(test_runtime_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
