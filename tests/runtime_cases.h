/*
 * runtime_cases.h - what the runtime tests train and how they compare, shared
 * by test_runtime.c (ranks as threads) and mpi_runtime.c (ranks under mpirun).
 *
 * A case is a model and a strategy; it passes when P ranks give the losses and
 * final weights of one rank within a relative 1e-4 after RC_ITERS steps of SGD
 * with momentum and weight decay on synthetic batches (different each step).
 * The models: lenet5, an MLP, a small residual CNN, a small LSTM language model,
 * a small transformer, a small GPT (causal attention, LM head tied to the token
 * embedding: two operators accumulate into one weight group), a chain of
 * linears, two attention layers with dropout of their probabilities and an
 * upsampling decoder (conv_transpose2d, resize). The strategies: data, model, one
 * weird trick, random strategies over the whole SOAP space, random ones that
 * also split reduction dimensions (partial sums: a linear's input features,
 * attention's heads; softmax_ce's classes, the
 * vocabulary-parallel cross-entropy), every linear split on its input
 * features with its parts on ranks of their own (all-reduce or reduce-scatter
 * of the partial sums) or sharing ranks (a reduce to the first part's rank), a
 * column-parallel linear after a row-parallel one (an all-reduce), Megatron's
 * tensor parallelism as the SOAP space has it (with and without sequence
 * parallelism; and the megatron baselines themselves on the transformers,
 * which split the GPT's tied table on the vocabulary), every softmax_ce split
 * on its classes, its groups across ranks or sharing them, the GPT's tied
 * table split on the vocabulary or the width with the rest data parallel, one
 * found by MCMC, and (lenet5) a strategy that alternates
 * attribute splits with halos, parameter splits and sample splits between
 * consecutive operators, so every edge re-partitions. The Adam cases
 * (rc_adam_case) train with Adam and AdamW instead, ring and parameter server;
 * the ZeRO cases (rc_zero_case) shard them at stages 1-3; the recomputation
 * cases (rc_recompute_case) recompute every operator's forward before its
 * backward.
 */
#ifndef SOAPFLOW_TESTS_RUNTIME_CASES_H
#define SOAPFLOW_TESTS_RUNTIME_CASES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/cost.h"
#include "soapflow/io.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/search.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

#define RC_ITERS 10
#define RC_MAX_RANKS 8
#define RC_TOL 1e-4

typedef struct rc_job {
    const sf_graph *g;
    const sf_strategy *s;
    int bulk;
    sf_sync_scheme scheme;
    sf_machine *m; /* the ranks' nodes for the hierarchical scheme (NULL: one node) */
    sf_optimizer_kind optimizer;
    float **w0;
    double losses[RC_ITERS];
    float **w_out;
    sf_error err[RC_MAX_RANKS];
} rc_job;

/* One rank's training: the same on every rank, whatever the back end. */
static sf_status rc_rank_main(sf_comm *c, void *arg) {
    rc_job *j = arg;
    int r = sf_comm_rank(c);
    sf_error *e = &j->err[r < RC_MAX_RANKS ? r : RC_MAX_RANKS - 1];
    sf_runtime_options o;
    sf_runtime_options_default(&o);
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 1e-3;
    if (j->optimizer != SF_OPTIMIZER_SGD) { /* PyTorch's lr; L2 or decoupled decay */
        o.optimizer = j->optimizer;
        o.lr = 1e-3;
        o.weight_decay = 1e-2;
    }
    o.sync = j->bulk ? SF_SYNC_BULK : SF_SYNC_OVERLAP;
    o.scheme = j->scheme;
    o.machine = j->m;
    sf_runtime *rt = sf_runtime_new(j->g, j->s, c, &o, e);
    if (!rt) return e->code ? e->code : SF_ERR_INTERNAL;
    sf_status st = sf_runtime_set_params(rt, SF_RT_WEIGHTS, (const float *const *)j->w0, e);
    sf_batch_bufs *bb = sf_batch_bufs_new(j->g, e);
    if (!bb) st = SF_ERR_NOMEM;
    for (int it = 0; it < RC_ITERS && st == SF_OK; it++) {
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

static int rc_job_init(rc_job *j, const sf_graph *g, const sf_strategy *s, int bulk) {
    sf_error err = {0};
    memset(j, 0, sizeof *j);
    j->g = g;
    j->s = s;
    j->bulk = bulk;
    j->w0 = sf_params_new(g, 42, 0, &err);
    j->w_out = sf_params_new(g, 0, 1, &err);
    return j->w0 && j->w_out ? 0 : -1;
}

static void rc_job_free(rc_job *j) {
    sf_params_free(j->g, j->w0);
    sf_params_free(j->g, j->w_out);
    sf_machine_free(j->m);
}

/* Case k's sync scheme, in turn ring, parameter server, hierarchical; for the
 * hierarchical one on an even number of ranks from 4, two nodes of n / 2
 * ranks, so that it has both levels. */
static void rc_job_scheme(rc_job *j, int k, int n) {
    j->scheme = (sf_sync_scheme)(k % SF_SCHEME_COUNT);
    if (j->scheme != SF_SCHEME_HIERARCHICAL || n < 4 || n % 2) return;
    sf_machine_desc d;
    sf_error err = {0};
    if (sf_machine_preset_desc("cpu", &d, &err) != SF_OK) return;
    d.nodes = 2;
    d.devices_per_node = n / 2;
    j->m = sf_machine_build(&d, &err);
}

static const char *rc_scheme_name(const rc_job *j) {
    return j->m ? "hierarchical over 2 nodes" : sf_sync_scheme_name(j->scheme);
}

/* Train as one rank with optimizer opt, on threads of this process. */
static sf_status rc_train_one_with(rc_job *j, const sf_graph *g, int bulk, sf_optimizer_kind opt) {
    sf_strategy *one = sf_strategy_new(g);
    sf_strategy_single(one, g, 0);
    sf_error err = {0};
    sf_status st = SF_ERR_NOMEM;
    if (!rc_job_init(j, g, one, bulk)) {
        j->optimizer = opt;
        st = sf_comm_local_run(1, rc_rank_main, j, &err);
    }
    j->s = NULL;
    sf_strategy_free(one);
    return st;
}

/* Train as one rank with SGD. */
static sf_status rc_train_one(rc_job *j, const sf_graph *g, int bulk) {
    return rc_train_one_with(j, g, bulk, SF_OPTIMIZER_SGD);
}

/* Largest relative difference of the losses, and of the weights (per group,
 * ||a - b|| / ||b||); *worst_op names the group. Returns 0 when within
 * tolerance, finite, and training moved the loss. */
static int rc_compare(const rc_job *a, const rc_job *b, const char *what) {
    double worst_loss = 0, worst_w = 0;
    const char *worst_op = "";
    for (int i = 0; i < RC_ITERS; i++) {
        double d = fabs(a->losses[i] - b->losses[i]) / fmax(fabs(b->losses[i]), 1e-12);
        if (!(d <= worst_loss)) worst_loss = d; /* NaN sticks */
    }
    for (int op = 0; op < sf_graph_num_ops(a->g); op++) {
        if (!a->w_out[op]) continue;
        double num = 0, den = 0;
        for (int64_t q = 0; q < sf_graph_op(a->g, op)->n_params; q++) {
            double d = (double)a->w_out[op][q] - (double)b->w_out[op][q];
            num += d * d;
            den += (double)b->w_out[op][q] * b->w_out[op][q];
        }
        double rel = sqrt(num) / fmax(sqrt(den), 1e-12);
        if (!(rel <= worst_w)) {
            worst_w = rel;
            worst_op = sf_graph_op(a->g, op)->name;
        }
    }
    int moved = fabs(b->losses[RC_ITERS - 1] - b->losses[0]) > 1e-6;
    int ok = worst_loss <= RC_TOL && worst_w <= RC_TOL && moved;
    if (!ok)
        fprintf(stderr, "%s: loss differs by %.3g, weights by %.3g (%s); final loss %g vs %g%s\n",
                what, worst_loss, worst_w, worst_op, a->losses[RC_ITERS - 1],
                b->losses[RC_ITERS - 1], moved ? "" : "; training did not move the loss");
    return ok ? 0 : -1;
}

/* Every consumer part's input region is covered exactly once by its pairs,
 * each pair inside the region. Returns 0 when so. */
static int rc_check_coverage(const sf_graph *g, const sf_strategy *s, int n_dev) {
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, n_dev, &err);
    if (!tg) return -1;
    sf_taskgraph_set_strategy(tg, s);
    for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
    int bad = 0;
    for (int x = 0; x < sf_graph_num_ops(g) && !bad; x++) {
        const sf_op *o = sf_graph_op(g, x);
        const sf_config *c = sf_strategy_get(s, x);
        for (int k = 0; k < o->n_inputs && !bad; k++) {
            const sf_tg_pair *pr;
            int np = sf_taskgraph_edge(tg, x, k, &pr);
            if (np < 0) bad = 1;
            for (int j = 0; j < c->n_parts && !bad; j++) {
                sf_tile rj;
                sf_op_input_region(o, &sf_taskgraph_tiles(tg, x)[j], k, &rj);
                int64_t want = sf_tile_numel(&rj), got = 0;
                for (int i = 0; i < np && !bad; i++) {
                    if (pr[i].cons_part != j) continue;
                    got += pr[i].numel;
                    sf_tile in;
                    if (!sf_tile_intersect(&pr[i].region, &rj, &in) ||
                        sf_tile_numel(&in) != pr[i].numel)
                        bad = 1;
                    for (int i2 = 0; i2 < i && !bad; i2++)
                        if (pr[i2].cons_part == j &&
                            sf_tile_intersect(&pr[i].region, &pr[i2].region, NULL))
                            bad = 1;
                }
                if (got != want) bad = 1;
                if (bad)
                    fprintf(stderr, "%s input %d part %d: pairs cover %lld of %lld elements%s\n",
                            o->name, k, j, (long long)got, (long long)want,
                            got == want ? " (overlapping or outside)" : "");
            }
        }
    }
    sf_taskgraph_free(tg);
    return bad ? -1 : 0;
}

/* Count the reductions of partial sums that the task graph of s makes, by
 * kind (sf_tg_reduce_kind), those of pieces a consumer reads. */
static void rc_count_reduces(const sf_graph *g, const sf_strategy *s, int n_dev,
                             int counts[SF_REDUCE_KIND_COUNT]) {
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, n_dev, &err);
    if (!tg) return;
    sf_taskgraph_set_strategy(tg, s);
    for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
    for (int x = 0; x < sf_graph_num_ops(g); x++) {
        const sf_op *o = sf_graph_op(g, x);
        for (int k = 0; k < o->n_inputs; k++) {
            const sf_tg_pair *pr;
            if (sf_taskgraph_edge(tg, x, k, &pr) < 0) continue;
            sf_tg_reduces rd;
            int n = sf_taskgraph_edge_reduce(tg, &rd);
            for (int i = 0; i < n; i++)
                if (rd.groups[i].n_fwd > 0 || rd.groups[i].kind == SF_REDUCE_ONE)
                    counts[rd.groups[i].kind]++;
        }
    }
    sf_taskgraph_free(tg);
}

static sf_machine *rc_machine(int n) {
    char name[32];
    snprintf(name, sizeof name, "cpu[%d]", n);
    sf_error err = {0};
    sf_machine *m = sf_machine_open(name, &err);
    if (!m) fprintf(stderr, "%s\n", err.msg);
    return m;
}

/* ---- the models ------------------------------------------------------------------ */

/* input -> conv -> relu -> conv -> add(skip) -> relu -> global pool -> flatten -> fc -> loss */
/* The head every small model ends with: fc (10 classes) on `from`, then the
 * loss; g, or NULL (g freed) with the first error of its building in err. */
static sf_graph *rc_head(sf_graph *g, int from, sf_error *err) {
    sf_op_params q;
    sf_op_params_default(SF_OP_LINEAR, &q);
    q.linear.out_features = 10;
    int fc = sf_graph_add_op(g, SF_OP_LINEAR, "fc", &q, (sf_tensor_ref[]){{from, 0}}, 1, err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &q);
    int l = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "loss", &q, (sf_tensor_ref[]){{fc, 0}}, 1, err);
    if (l < 0) {
        fprintf(stderr, "%s: %s\n", sf_graph_name(g), err->msg);
        sf_graph_free(g);
        return NULL;
    }
    return g;
}

static sf_graph *rc_resnet_tiny(void) {
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
    return rc_head(g, f, &err);
}

/* input -> fc1 -> fc2 -> relu -> add(fc2) -> fc3 -> loss: linears that feed
 * linears (a column-parallel layer after a row-parallel one all-reduces the
 * partial sums), and an output read by two operators (reduced for each). */
static sf_graph *rc_linears(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("linears");
    sf_shape in = {2, {8, 12}};
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p, q;
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 16;
    int f1 = sf_graph_add_op(g, SF_OP_LINEAR, "fc1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    p.linear.out_features = 20;
    int f2 = sf_graph_add_op(g, SF_OP_LINEAR, "fc2", &p, (sf_tensor_ref[]){{f1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &q);
    int r = sf_graph_add_op(g, SF_OP_RELU, "relu", &q, (sf_tensor_ref[]){{f2, 0}}, 1, &err);
    sf_op_params_default(SF_OP_ADD, &q);
    int a = sf_graph_add_op(g, SF_OP_ADD, "add", &q, (sf_tensor_ref[]){{r, 0}, {f2, 0}}, 2, &err);
    p.linear.out_features = 10;
    int f3 = sf_graph_add_op(g, SF_OP_LINEAR, "fc3", &p, (sf_tensor_ref[]){{a, 0}}, 1, &err);
    sf_op_params_default(SF_OP_SOFTMAX_CE, &q);
    int l = sf_graph_add_op(g, SF_OP_SOFTMAX_CE, "loss", &q, (sf_tensor_ref[]){{f3, 0}}, 1, &err);
    if (l < 0) {
        fprintf(stderr, "linears: %s\n", err.msg);
        sf_graph_free(g);
        return NULL;
    }
    return g;
}

/* input -> attention (causal, 4 heads, dropout) -> attention (2 heads, dropout)
 * -> fc -> loss: attention dropout, whose mask must not depend on how the
 * operator is split (heads, samples, rows). drop: the dropout of both. */
static sf_graph *rc_attn_drop(double drop) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("attn_drop");
    sf_shape in = {3, {4, 6, 16}};
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_ATTENTION, &p);
    p.attention.embed_dim = 16;
    p.attention.heads = 4;
    p.attention.causal = 1;
    p.attention.dropout = drop;
    int a1 = sf_graph_add_op(g, SF_OP_ATTENTION, "attn1", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    p.attention.heads = 2;
    p.attention.causal = 0;
    p.attention.dropout = drop > 0 ? 2 * drop : 0;
    int a2 = sf_graph_add_op(g, SF_OP_ATTENTION, "attn2", &p, (sf_tensor_ref[]){{a1, 0}}, 1, &err);
    return rc_head(g, a2, &err);
}

/* input -> conv (stride 2) -> relu -> conv_transpose2d (stride 2, output_padding
 * 1) -> relu -> resize (bilinear 8 -> 12) -> flatten -> fc -> loss: a U-Net
 * decoder's upsampling, whose output rows need halos of input rows and whose
 * output channels split its weight's columns. */
static sf_graph *rc_upsample(void) {
    sf_error err = {0};
    sf_graph *g = sf_graph_new("upsample");
    sf_shape in = {4, {4, 3, 8, 8}};
    int x = sf_graph_add_input(g, "x", &in, 0, &err);
    sf_op_params p, q;
    sf_op_params_default(SF_OP_CONV2D, &p);
    p.conv2d.out_channels = 6;
    p.conv2d.kernel[0] = p.conv2d.kernel[1] = 3;
    p.conv2d.stride[0] = p.conv2d.stride[1] = 2;
    p.conv2d.padding[0] = p.conv2d.padding[1] = 1;
    int c1 = sf_graph_add_op(g, SF_OP_CONV2D, "down", &p, (sf_tensor_ref[]){{x, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RELU, &q);
    int r1 = sf_graph_add_op(g, SF_OP_RELU, "relu1", &q, (sf_tensor_ref[]){{c1, 0}}, 1, &err);
    sf_op_params_default(SF_OP_CONV_TRANSPOSE2D, &p);
    p.conv_transpose2d.out_channels = 4;
    p.conv_transpose2d.kernel[0] = p.conv_transpose2d.kernel[1] = 3;
    p.conv_transpose2d.stride[0] = p.conv_transpose2d.stride[1] = 2;
    p.conv_transpose2d.padding[0] = p.conv_transpose2d.padding[1] = 1;
    p.conv_transpose2d.output_padding[0] = p.conv_transpose2d.output_padding[1] = 1;
    int u =
        sf_graph_add_op(g, SF_OP_CONV_TRANSPOSE2D, "up", &p, (sf_tensor_ref[]){{r1, 0}}, 1, &err);
    int r2 = sf_graph_add_op(g, SF_OP_RELU, "relu2", &q, (sf_tensor_ref[]){{u, 0}}, 1, &err);
    sf_op_params_default(SF_OP_RESIZE, &q);
    q.resize.mode = SF_RESIZE_BILINEAR;
    q.resize.size[0] = q.resize.size[1] = 12;
    int rz = sf_graph_add_op(g, SF_OP_RESIZE, "resize", &q, (sf_tensor_ref[]){{r2, 0}}, 1, &err);
    sf_op_params_default(SF_OP_FLATTEN, &q);
    q.flatten.start_dim = 1;
    int f = sf_graph_add_op(g, SF_OP_FLATTEN, "flat", &q, (sf_tensor_ref[]){{rz, 0}}, 1, &err);
    return rc_head(g, f, &err);
}

#define RC_MODELS 9

/* Model i of the cases: small sizes, so that a case trains in milliseconds. */
static sf_graph *rc_model(int i) {
    sf_model_options o;
    sf_model_options_default(&o);
    const char *name = NULL;
    switch (i) {
    case 0:
        name = "lenet5";
        o.batch = 8;
        break;
    case 1:
        name = "mlp";
        o.batch = 8;
        o.n_mlp = 4;
        o.mlp_sizes[0] = 32;
        o.mlp_sizes[1] = 24;
        o.mlp_sizes[2] = 16;
        o.mlp_sizes[3] = 10;
        break;
    case 2: return rc_resnet_tiny();
    case 3:
        name = "rnnlm";
        o.batch = 4;
        o.seq_len = 4;
        o.chunk = 2;
        o.hidden = 8;
        o.vocab = 16;
        break;
    case 4:
        name = "transformer";
        o.batch = 2;
        o.seq_len = 4;
        o.hidden = 24;
        o.vocab = 16;
        break;
    case 6: return rc_linears();
    case 9: /* the pipeline cases' GPT: four micro-batches of one sequence */
        name = "gpt";
        o.batch = 4;
        o.layers = 2;
        o.hidden = 32;
        o.heads = 4;
        o.seq_len = 8;
        o.vocab = 32;
        break;
    case 7: return rc_attn_drop(0.25);
    case 8: return rc_upsample();
    default:
        name = "gpt";
        o.batch = 2;
        o.layers = 2;
        o.hidden = 64;
        o.heads = 4;
        o.seq_len = 16;
        o.vocab = 32;
        break;
    }
    sf_error err = {0};
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fprintf(stderr, "%s: %s\n", name, err.msg);
    return g;
}

/* ---- the strategies ---------------------------------------------------------------- */

/* Alternate attribute splits (conv rows: halos), channel splits and sample
 * splits between consecutive operators, devices rotated by the operator, so
 * that every edge re-partitions. */
static void rc_halo_strategy(const sf_graph *g, sf_strategy *s, int n) {
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        /* the output's last: not a linear's reduction nor softmax_ce's classes
         * (sf_op_dim_opt_in: the cases below split those) */
        int last = x->space.ndim - 1;
        while (last > 0 && sf_op_dim_opt_in(x, last)) last--;
        int d = op % 3 == 0 ? 0 : x->space.ndim == 4 ? 2 : last;
        if (x->kinds[d] == SF_DIM_NONE || sf_op_dim_opt_in(x, d) || x->space.d[d] < n) d = 0;
        deg[d] = x->space.d[d] >= n ? n : 1;
        sf_config_set_degrees(c, x->space.ndim, deg);
        for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((p + op) % n);
    }
}

/* The reduction dimension of op, or -1. */
static int rc_reduce_dim(const sf_op *x) {
    for (int d = 0; d < x->space.ndim; d++)
        if (x->kinds[d] == SF_DIM_REDUCE && x->space.d[d] > 1) return d;
    return -1;
}

/* Partial sums by hand: every operator with a reduction dimension split n ways
 * along it, the others split on the sample dimension (whole when the batch is
 * smaller than n), devices rotated by the operator. shared: the partial sums'
 * parts share ranks in pairs (part p on rank p / 2), so their pieces are
 * reduced to the first part's rank (a message and a local sum) and its
 * gradient broadcast back; else each part has a rank of its own, and the
 * consumer's split picks an all-reduce or a reduce-scatter. Returns how many
 * operators hold partial sums. */
static int rc_partial_strategy(const sf_graph *g, sf_strategy *s, int n, int shared) {
    int split = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        int rd = rc_reduce_dim(x);
        if (rd >= 0 && x->space.d[rd] >= n)
            deg[rd] = n;
        else if (x->kinds[0] == SF_DIM_SAMPLE && x->space.d[0] >= n)
            deg[0] = n;
        split += rd >= 0 && deg[rd] > 1;
        sf_config_set_degrees(c, x->space.ndim, deg);
        for (int p = 0; p < c->n_parts; p++)
            c->device[p] = (int16_t)(rd >= 0 && deg[rd] > 1 && shared ? p / 2 : (p + op) % n);
    }
    return split;
}

/* Row-parallel linears followed by column-parallel ones: a linear whose input
 * comes from a linear split on its input features is split on its output
 * features, every other linear on its input features, both n ways on ranks 0
 * .. n-1 (the column-parallel parts each need the whole piece: an all-reduce);
 * the rest as rc_partial_strategy. Returns how many linears follow a
 * row-parallel one. */
static int rc_row_col_strategy(const sf_graph *g, sf_strategy *s, int n) {
    rc_partial_strategy(g, s, n, 0);
    int col = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        const sf_op *x = sf_graph_op(g, op);
        int rd = rc_reduce_dim(x);
        if (rd < 0 || x->type != SF_OP_LINEAR || x->space.d[rd] < n) continue;
        const sf_op *src = sf_graph_op(g, x->inputs[0].op);
        const sf_config *cs = sf_strategy_get(s, x->inputs[0].op);
        int srd = rc_reduce_dim(src);
        int after_row = src->type == SF_OP_LINEAR && srd >= 0 && cs->degree[srd] > 1;
        int d = after_row ? rd - 1 : rd;
        if (x->space.d[d] < n) continue;
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        deg[d] = n;
        sf_config *c = sf_strategy_config(s, op);
        sf_config_set_degrees(c, x->space.ndim, deg);
        for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)p;
        col += after_row;
    }
    return col;
}

/* The one consumer of op's output, or -1. */
static int rc_only_consumer(const sf_graph *g, int op) {
    sf_tensor_ref u[2];
    return sf_graph_consumers(g, op, 0, u, 2) == 1 ? u[0].op : -1;
}

/* Megatron's tensor parallelism as the SOAP space has it, n ways on ranks 0 ..
 * n-1: each linear -> activation -> linear chain (a transformer's MLP) split
 * column-parallel (the first linear and the activation on their features) then
 * row-parallel (the second on its input features: partial sums), a linear
 * that feeds the loss on its output features (the vocabulary), an embedding
 * on its vocabulary (partial sums: a part's rows of the table); every other
 * operator whole on rank 0 (its reductions go to one rank: messages, then a
 * broadcast of the gradient), or with sp split on its sequence dimension
 * (Megatron's sequence parallelism: reduce-scatters, all-gathers backward);
 * a softmax_ce after a linear split on its output features on its classes
 * (the vocabulary-parallel cross-entropy: the row statistics' all-reduces).
 * Returns how many operators it split along a reduction dimension. */
static int rc_megatron_strategy(const sf_graph *g, sf_strategy *s, int n, int sp) {
    int n_ops = sf_graph_num_ops(g), rows = 0;
    int *dim = malloc((size_t)n_ops * sizeof *dim); /* the dimension split n ways, -1 */
    if (!dim) return 0;
    for (int op = 0; op < n_ops; op++) {
        const sf_op *x = sf_graph_op(g, op);
        dim[op] = sp && x->space.ndim >= 3 && x->kinds[1] == SF_DIM_ATTRIBUTE &&
                          x->space.d[1] >= n && x->type != SF_OP_INPUT
                      ? 1
                      : -1;
    }
    for (int op = 0; op < n_ops; op++) {
        const sf_op *x = sf_graph_op(g, op);
        int rd = rc_reduce_dim(x);
        if (x->type == SF_OP_EMBEDDING && rd >= 0 && x->space.d[rd] >= n) {
            dim[op] = rd; /* vocabulary-parallel */
            rows++;
        }
        if (x->type != SF_OP_LINEAR || rd < 0) continue;
        int u = rc_only_consumer(g, op), y = u >= 0 ? rc_only_consumer(g, u) : -1;
        const sf_op *uo = u >= 0 ? sf_graph_op(g, u) : NULL;
        const sf_op *yo = y >= 0 ? sf_graph_op(g, y) : NULL;
        if (uo && (uo->type == SF_OP_GELU || uo->type == SF_OP_RELU) && yo &&
            yo->type == SF_OP_LINEAR && rc_reduce_dim(yo) >= 0 && x->space.d[rd - 1] >= n &&
            yo->space.d[rc_reduce_dim(yo)] >= n) {
            dim[op] = rd - 1;
            dim[u] = uo->space.ndim - 1;
            dim[y] = rc_reduce_dim(yo);
            rows++;
            op = y;
        } else if (uo && uo->type == SF_OP_SOFTMAX_CE && x->space.d[rd - 1] >= n) {
            dim[op] = rd - 1;
            dim[u] = sf_op_inner_dim(uo);
        }
    }
    for (int op = 0; op < n_ops; op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        if (dim[op] >= 0) deg[dim[op]] = n;
        sf_config_set_degrees(c, x->space.ndim, deg);
        for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)p;
    }
    free(dim);
    return rows;
}

/* The groups of softmax_ce parts split on their classes whose statistics the
 * task graph of s all-reduces across devices (sf_taskgraph_op_inner). */
static int rc_count_inner(const sf_graph *g, const sf_strategy *s, int n_dev) {
    sf_error err = {0};
    sf_taskgraph *tg = sf_taskgraph_new(g, n_dev, &err);
    if (!tg) return 0;
    sf_taskgraph_set_strategy(tg, s);
    int count = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        sf_taskgraph_set_tiles(tg, op);
        sf_tg_inner in;
        int k = sf_taskgraph_op_inner(tg, op, &in);
        count += k > 0 ? k : 0;
    }
    sf_taskgraph_free(tg);
    return count;
}

/* Vocabulary-parallel cross-entropy by hand: every softmax_ce split on its
 * classes n ways, on ranks 0 .. n-1, the other operators on their samples n
 * ways (whole when the batch is smaller; devices rotated by the operator).
 * shared: the classes split n ways and the samples 2 ways, the
 * first half's groups across every rank, the second's in pairs of parts on
 * one rank (ranks 1, 1, 2, 2, ...; on 2 ranks one rank holds the whole group,
 * which combines its statistics alone). Returns how many operators it split
 * on their classes. */
static int rc_classes_strategy(const sf_graph *g, sf_strategy *s, int n, int shared) {
    int split = 0;
    for (int op = 0; op < sf_graph_num_ops(g); op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        int id = sf_op_inner_dim(x);
        int samples = x->kinds[0] == SF_DIM_SAMPLE;
        if (id >= 0 && x->space.d[id] >= n) {
            deg[id] = n;
            if (shared && samples && x->space.d[0] >= 2) deg[0] = 2;
        } else if (samples && x->space.d[0] >= n) {
            deg[0] = n;
        }
        sf_config_set_degrees(c, x->space.ndim, deg);
        if (id >= 0 && deg[id] > 1) {
            split++;
            int per = c->n_parts / deg[0]; /* parts of one sample group */
            for (int p = 0; p < c->n_parts; p++) {
                int sg = p / per, ci = p % deg[id];
                c->device[p] = (int16_t)(sg == 0 ? ci : (ci / 2 + 1) % n);
            }
        } else {
            for (int p = 0; p < c->n_parts; p++) c->device[p] = (int16_t)((p + op) % n);
        }
    }
    return split;
}

/* The tied table of a GPT (wte and the LM head that shares it) split n ways,
 * the rest data parallel: variant 0 on the vocabulary (wte's reduction, the
 * head's output features), the head's parts on the ranks in reverse order, so
 * that every shard of the table has two ranks (wte's part on one, the head's on
 * another) and its gradient, accumulated by both operators, is all-reduced
 * between them; variant 1 on the width (wte's columns, the head's input
 * features: a partial sum), and on 4 ranks the vocabulary 2 ways by the width
 * 2 ways, both on the same ranks, so that a rank holds its shard through both
 * operators once. 0 when g has no tie. */
static int rc_tied_strategy(const sf_graph *g, const sf_machine *m, sf_strategy *s, int n,
                            int variant) {
    int wte = sf_graph_find(g, "wte"), head = sf_graph_find(g, "lm_head");
    if (wte < 0 || head < 0 || !sf_graph_op_tied(g, head)) return 0;
    if (sf_strategy_data(s, g, m) != SF_OK) return 0;
    const sf_op *ow = sf_graph_op(g, wte), *oh = sf_graph_op(g, head);
    /* wte (N, T, D | V), the head (N, T, V | D) */
    int dw[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1}, dh[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
    if (variant == 0) {
        dw[3] = dh[2] = n;
    } else if (n == 4) {
        dw[3] = dh[2] = 2;
        dw[2] = dh[3] = 2;
    } else {
        dw[2] = dh[3] = n;
    }
    sf_config *cw = sf_strategy_config(s, wte), *ch = sf_strategy_config(s, head);
    if (sf_config_set_degrees(cw, ow->space.ndim, dw) != SF_OK ||
        sf_config_set_degrees(ch, oh->space.ndim, dh) != SF_OK)
        return 0;
    for (int p = 0; p < n; p++) {
        cw->device[p] = (int16_t)p;
        ch->device[p] = (int16_t)(variant == 0 ? n - 1 - p : p);
    }
    /* 2 x 2: the head's part (v, d) on the rank of wte's part (d, v) */
    if (variant == 1 && n == 4 && !sf_config_tie_follow(ow, cw, oh, m, SF_OPT_IN_INNER, ch))
        return 0;
    return 1;
}

/* Strategy k for graph g on n ranks, named into what; 0 when there is no
 * strategy k. 0-2 baselines, 3 MCMC, 4 the halo strategy (lenet5 only),
 * then n_random random ones, n_random random ones that also split reduction
 * dimensions (partial sums), the two partial-sum strategies of
 * rc_partial_strategy, rc_row_col_strategy, the two of rc_megatron_strategy,
 * the megatron baselines (megatron, megatron-sp, and megatron-sp:2 on 4
 * ranks) where the graph has their pattern, the two of rc_classes_strategy,
 * then the two of rc_tied_strategy (a GPT's tied table).
 * *bulk: run this case with bulk sync. */
static int rc_strategy(const sf_graph *g, int n, int k, int n_random, sf_strategy *s, char *what,
                       size_t cap, int *bulk) {
    sf_machine *m = rc_machine(n);
    if (!m) return 0;
    sf_error err = {0};
    int ok = 1;
    *bulk = k & 1;
    static const char *const base[] = {"data", "model", "owt"};
    if (k < 3) {
        ok = sf_strategy_baseline(s, base[k], g, m, &err) == SF_OK ? 1 : -1;
        snprintf(what, cap, "%s %s on %d ranks", sf_graph_name(g), base[k], n);
    } else if (k == 3) {
        sf_cost_model *cm = sf_cost_analytic_new(m, NULL);
        sf_strategy *start = sf_strategy_new(g);
        sf_strategy_data(start, g, m);
        const sf_strategy *starts[1] = {start};
        sf_mcmc_options mo;
        sf_mcmc_options_default(&mo);
        mo.iters = 300;
        mo.budget_s = 0; /* an iteration budget: the same strategy on every rank */
        mo.seed = 5;
        mo.progress = 0;
        sf_mcmc_result mr;
        ok = cm && sf_mcmc_search(g, m, cm, starts, 1, &mo, s, &mr, &err) == SF_OK ? 1 : -1;
        sf_strategy_free(start);
        sf_cost_free(cm);
        snprintf(what, cap, "%s searched on %d ranks", sf_graph_name(g), n);
    } else if (k == 4) {
        if (strcmp(sf_graph_name(g), "lenet5")) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        rc_halo_strategy(g, s, n);
        snprintf(what, cap, "%s halos and re-partitioning on %d ranks", sf_graph_name(g), n);
    } else if (k < 5 + n_random) {
        sf_rng rng;
        sf_rng_seed(&rng, 1234 + (uint64_t)k * 7 + (uint64_t)n);
        for (int op = 0; op < sf_graph_num_ops(g); op++)
            sf_config_random(sf_graph_op(g, op), m, &rng, sf_strategy_config(s, op));
        sf_strategy_align_ties(s, g, m); /* the tied head follows wte's table */
        snprintf(what, cap, "%s random #%d on %d ranks", sf_graph_name(g), k - 5, n);
    } else if (k < 5 + 2 * n_random) {
        sf_rng rng;
        sf_rng_seed(&rng, 4321 + (uint64_t)k * 7 + (uint64_t)n);
        for (int op = 0; op < sf_graph_num_ops(g); op++)
            sf_config_random_in(sf_graph_op(g, op), m, SF_OPT_IN_INNER, &rng,
                                sf_strategy_config(s, op));
        sf_strategy_align_ties(s, g, m);
        snprintf(what, cap, "%s random with partial sums #%d on %d ranks", sf_graph_name(g),
                 k - 5 - n_random, n);
    } else if (k < 7 + 2 * n_random) {
        int shared = k == 6 + 2 * n_random;
        if (!rc_partial_strategy(g, s, n, shared)) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        sf_strategy_align_ties(s, g, m); /* a tied head follows its table */
        snprintf(what, cap, "%s partial sums%s on %d ranks", sf_graph_name(g),
                 shared ? " sharing ranks" : "", n);
    } else if (k == 7 + 2 * n_random) {
        if (!rc_row_col_strategy(g, s, n)) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        sf_strategy_align_ties(s, g, m);
        snprintf(what, cap, "%s row- then column-parallel on %d ranks", sf_graph_name(g), n);
    } else if (k < 10 + 2 * n_random) {
        int sp = k == 9 + 2 * n_random;
        if (!rc_megatron_strategy(g, s, n, sp)) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        snprintf(what, cap, "%s megatron%s-like on %d ranks", sf_graph_name(g), sp ? "-sp" : "", n);
    } else if (k < 13 + 2 * n_random) {
        /* the baselines (sf_strategy_megatron), where the graph has their pattern;
         * on 4 ranks also two groups of 2, data parallel across them */
        static const char *const mega[] = {"megatron", "megatron-sp", "megatron-sp:2"};
        const char *name = mega[k - 10 - 2 * n_random];
        if ((n < 4 && k == 12 + 2 * n_random) ||
            sf_strategy_baseline(s, name, g, m, &err) != SF_OK) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        snprintf(what, cap, "%s %s%s on %d ranks", sf_graph_name(g), name,
                 rc_count_inner(g, s, n) ? " (classes split)" : "", n);
    } else if (k < 15 + 2 * n_random) {
        int shared = k == 14 + 2 * n_random;
        if (!rc_classes_strategy(g, s, n, shared)) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        snprintf(what, cap, "%s classes split%s on %d ranks", sf_graph_name(g),
                 shared ? " sharing ranks" : "", n);
    } else if (k < 17 + 2 * n_random) {
        int variant = k - 15 - 2 * n_random;
        if (!rc_tied_strategy(g, m, s, n, variant)) {
            sf_machine_free(m);
            return rc_strategy(g, n, k + 1, n_random, s, what, cap, bulk);
        }
        snprintf(what, cap, "%s tied table split on the %s on %d ranks", sf_graph_name(g),
                 variant == 0 ? "vocabulary (head on other ranks)"
                 : n == 4     ? "vocabulary and the width"
                              : "width",
                 n);
    } else {
        ok = 0;
    }
    if (ok < 0) fprintf(stderr, "%s: %s\n", what, err.msg);
    if (ok > 0 && sf_strategy_validate(s, g, m, &err) != SF_OK) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        ok = -1;
    }
    sf_machine_free(m);
    return ok;
}

/* ---- the Adam cases ------------------------------------------------------------- */

/* Adam and AdamW on P ranks against one rank: the models (mlp, lenet5, the
 * small residual CNN), each under data parallelism and a random strategy,
 * each with ring all-reduces and a parameter server (which keeps the moments
 * on the server alone). RC_ADAM_CASES of them; case i: model i / 8, Adam or
 * AdamW by (i / 4) % 2, data or random by (i / 2) % 2, ring or ps by i % 2.
 * Not the attention models: the key bias of attention has a gradient of 0 in
 * exact arithmetic (softmax ignores what q . b_k adds to a whole row of
 * scores), so its computed gradient is rounding noise, which Adam scales to
 * steps of about lr whatever its size; P ranks sum the gradient in another
 * order than one, so the key bias (in_proj_bias[H:2H]) parts by up to 7e-4 in
 * 10 steps (measured: the small GPT, data parallel on 2 ranks, lr 1e-3), while
 * every other weight tensor of the GPT agrees within 1e-5. Any Adam does this
 * with any change of summation order; SGD, whose step scales with the
 * gradient, does not. */
#define RC_ADAM_MODELS 3
#define RC_ADAM_CASES (RC_ADAM_MODELS * 2 * 2 * 2)

/* the Adam cases are run by test_runtime and mpi_runtime, not by every includer */
#define RC_UNUSED_OK __attribute__((unused))

static int rc_adam_model(int i) {
    static const int models[RC_ADAM_MODELS] = {1, 0, 2};
    return models[i / (RC_ADAM_CASES / RC_ADAM_MODELS)];
}
static sf_optimizer_kind rc_adam_optimizer(int i) {
    return (i / 4) % 2 ? SF_OPTIMIZER_ADAMW : SF_OPTIMIZER_ADAM;
}
/* The strategy of case i into s (data, or the first random one of
 * rc_strategy), named into what, and its job's scheme: rc_strategy's answer. */
static int rc_adam_case(const sf_graph *g, int n, int i, int n_random,
                                     sf_strategy *s, char *what, size_t cap, rc_job *j) {
    int bulk;
    int ok = rc_strategy(g, n, (i / 2) % 2 ? 5 : 0, n_random, s, what, cap, &bulk);
    if (ok <= 0) return ok;
    if (rc_job_init(j, g, s, 0)) return -1;
    j->optimizer = rc_adam_optimizer(i);
    j->scheme = i % 2 ? SF_SCHEME_PS : SF_SCHEME_RING;
    size_t len = strlen(what);
    snprintf(what + len, cap - len, ", %s, %s", sf_optimizer_name(j->optimizer),
             sf_sync_scheme_name(j->scheme));
    return 1;
}

/* A family of cases that train with other settings than rc_strategy's own
 * (the Adam and ZeRO cases): n cases, case i on model model(i) with
 * optimizer opt(i), whose one-rank reference changes every `per` cases, made
 * by make(). */
typedef struct rc_family {
    int n, per;
    int (*model)(int i);
    sf_optimizer_kind (*opt)(int i);
    int (*make)(const sf_graph *g, int n, int i, int n_random, sf_strategy *s, char *what,
                size_t cap, rc_job *j);
} rc_family;

/* ---- the ZeRO cases ------------------------------------------------------------- */

/* Sharded data parallelism on P ranks against one rank: every weight group
 * at ZeRO stage 1, 2 or 3 (each rank updates its chunk of each replicated
 * shard; stage 3 gathers the weights before each pass), under data
 * parallelism and a random strategy, with SGD and Adam. RC_ZERO_CASES; case
 * i: model rc_adam_model's i / 12, stage 1 + i % 3, data or random by
 * (i / 3) % 2, SGD or Adam by (i / 6) % 2. */
#define RC_ZERO_CASES (RC_ADAM_MODELS * 12)

static int rc_zero_model(int i) {
    static const int models[RC_ADAM_MODELS] = {1, 0, 2};
    return models[i / (RC_ZERO_CASES / RC_ADAM_MODELS)];
}
static sf_optimizer_kind rc_zero_optimizer(int i) {
    return (i / 6) % 2 ? SF_OPTIMIZER_ADAM : SF_OPTIMIZER_SGD;
}
static int rc_zero_case(const sf_graph *g, int n, int i, int n_random,
                                     sf_strategy *s, char *what, size_t cap, rc_job *j) {
    int bulk, stage = 1 + i % 3;
    int ok = rc_strategy(g, n, (i / 3) % 2 ? 5 : 0, n_random, s, what, cap, &bulk);
    if (ok <= 0) return ok;
    for (int op = 0; op < sf_graph_num_ops(g); op++)
        if (sf_graph_op(g, op)->weight_owner < 0 && sf_graph_op(g, op)->n_params > 0)
            sf_strategy_config(s, op)->zero = (uint8_t)stage;
    if (rc_job_init(j, g, s, 0)) return -1;
    j->optimizer = rc_zero_optimizer(i);
    size_t len = strlen(what);
    snprintf(what + len, cap - len, ", zero %d, %s", stage, sf_optimizer_name(j->optimizer));
    return 1;
}

/* ---- the recomputation cases ------------------------------------------------- */

/* Recomputation (sf_config.recompute on every operator with a backward, the
 * baselines' recompute=full) on P ranks against one rank without it:
 * lenet5, the MLP, the residual CNN and the small GPT, under data parallelism
 * and a random strategy, SGD. RC_RECOMPUTE_CASES; case i: model i / 2, data or
 * random by i % 2. */
#define RC_RECOMPUTE_CASES 8

static int rc_recompute_model(int i) {
    static const int models[4] = {0, 1, 2, 5};
    return models[i / 2];
}
static sf_optimizer_kind rc_recompute_optimizer(int i) {
    (void)i;
    return SF_OPTIMIZER_SGD;
}
static int rc_recompute_case(const sf_graph *g, int n, int i, int n_random, sf_strategy *s,
                             char *what, size_t cap, rc_job *j) {
    int bulk;
    int ok = rc_strategy(g, n, i % 2 ? 5 : 0, n_random, s, what, cap, &bulk);
    if (ok <= 0) return ok;
    for (int op = 0; op < sf_graph_num_ops(g); op++)
        if (sf_graph_op(g, op)->type != SF_OP_INPUT) sf_strategy_config(s, op)->recompute = 1;
    if (rc_job_init(j, g, s, 0)) return -1;
    size_t len = strlen(what);
    snprintf(what + len, cap - len, ", recompute");
    return 1;
}

/* ---- the pipeline cases --------------------------------------------------------- */

/* Pipelines (sf_pipeline) on P ranks against one rank on the whole batch:
 * lenet5, the MLP and a small GPT (its LM head tied to the embedding across
 * the first and the last stage), each under GPipe, 1F1B and interleaved:2,
 * with every stage on one rank (P stages), or P / 2 stages of two ranks each
 * (on 2 ranks one stage: gradient accumulation) splitting every operator's
 * samples (data parallelism inside a stage) or as Megatron's tensor
 * parallelism (column- then row-parallel linears: partial sums, a vocabulary-
 * parallel embedding and cross-entropy). The stages cut the operators evenly
 * (sf_pipeline_even); four micro-batches unless the layout needs fewer, and
 * fewer stages where interleaving needs more chunks than the model has
 * operators. RC_PIPE_CASES; case i: model i / 9, schedule (i / 3) % 3, layout
 * i % 3 (one rank a stage, data, tensor). */
#define RC_PIPE_CASES 27

static int rc_pipe_model(int i) {
    static const int models[3] = {0, 1, 9};
    return models[i / 9];
}
static sf_optimizer_kind rc_pipe_optimizer(int i) {
    (void)i;
    return SF_OPTIMIZER_SGD;
}
static int rc_pipe_case(const sf_graph *g, int n, int i, int n_random, sf_strategy *s, char *what,
                        size_t cap, rc_job *j) {
    (void)n_random;
    sf_pipe_schedule sch = (sf_pipe_schedule)((i / 3) % 3);
    int layout = i % 3, v = sch == SF_PIPE_INTERLEAVED ? 2 : 1;
    int n_ops = sf_graph_num_ops(g), body = 0;
    for (int op = 0; op < n_ops; op++) body += sf_graph_op(g, op)->type != SF_OP_INPUT;
    int p = layout == 0 ? n : n / 2 > 0 ? n / 2 : 1;
    while (p > 1 && p * v > body) p /= 2;
    int group = n / p;
    int64_t batch = sf_graph_batch(g);
    int m = 4;
    while (m > 1 && (batch % m || (layout == 1 && (batch / m) % group) ||
                     (sch == SF_PIPE_INTERLEAVED && m % p)))
        m /= 2;
    if (sch == SF_PIPE_INTERLEAVED && m % p) return -1;
    sf_pipeline pl;
    sf_error err = {0};
    if (sf_pipeline_even(&pl, g, p, v, m, sch, &err) != SF_OK) {
        fprintf(stderr, "pipeline case %d: %s\n", i, err.msg);
        return -1;
    }
    int *chunk = malloc((size_t)n_ops * sizeof *chunk);
    sf_strategy *tp = sf_strategy_new(g);
    if (!chunk || !tp) {
        free(chunk);
        sf_strategy_free(tp);
        return -1;
    }
    sf_pipeline_op_chunks(&pl, g, chunk);
    if (layout == 2 && group > 1) rc_megatron_strategy(g, tp, group, 0);
    for (int op = 0; op < n_ops; op++) {
        const sf_op *x = sf_graph_op(g, op);
        sf_config *c = sf_strategy_config(s, op);
        int base = (chunk[op] % p) * group;
        if (layout == 2 && group > 1) {
            sf_config_copy(c, sf_strategy_get(tp, op));
            for (int q = 0; q < c->n_parts; q++) c->device[q] = (int16_t)(base + c->device[q]);
            continue;
        }
        int deg[SF_MAX_DIMS] = {1, 1, 1, 1, 1, 1};
        if (layout == 1 && x->kinds[0] == SF_DIM_SAMPLE) deg[0] = group;
        sf_config_set_degrees(c, x->space.ndim, deg);
        for (int q = 0; q < c->n_parts; q++) c->device[q] = (int16_t)(base + q);
    }
    free(chunk);
    sf_strategy_free(tp);
    sf_strategy_set_pipeline(s, &pl);
    sf_machine *mach = rc_machine(n);
    sf_status st = mach ? sf_strategy_validate(s, g, mach, &err) : SF_ERR_NOMEM;
    sf_machine_free(mach);
    char sched[32];
    static const char *const names[3] = {"lenet5", "mlp", "gpt"};
    snprintf(what, cap, "%s, %d stages x %d ranks (%s), %s, %d micro-batches", names[i / 9 % 3], p,
             group,
             layout == 1 ? "data parallel"
             : layout == 2 ? "tensor parallel"
             : group > 1   ? "one rank a stage, the others idle"
                           : "one rank a stage",
             sf_pipe_schedule_str(&pl, sched, sizeof sched), m);
    if (st != SF_OK) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        return -1;
    }
    if (rc_job_init(j, g, s, 0)) return -1;
    return 1;
}

static RC_UNUSED_OK const rc_family rc_pipe_family = {RC_PIPE_CASES, 9, rc_pipe_model,
                                                      rc_pipe_optimizer, rc_pipe_case};

static RC_UNUSED_OK const rc_family rc_adam_family = {RC_ADAM_CASES, 4, rc_adam_model,
                                                      rc_adam_optimizer, rc_adam_case};
static RC_UNUSED_OK const rc_family rc_zero_family = {RC_ZERO_CASES, 6, rc_zero_model,
                                                      rc_zero_optimizer, rc_zero_case};
static RC_UNUSED_OK const rc_family rc_recompute_family = {
    RC_RECOMPUTE_CASES, 2, rc_recompute_model, rc_recompute_optimizer, rc_recompute_case};

#endif
