/* Model zoo: every model builds at several batches; CNN parameter counts equal
 * torchvision's exactly (numbers from scripts/check_param_counts.py); shapes at
 * known points; RNN unrolling (chunking, state wiring, weights shared and
 * counted once); the GPTs' parameter counts equal the published ones, their LM
 * head is tied to the token embedding and counted once, and their attention
 * is causal; options and errors; AlexNet's forward FLOPs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/kernels.h"
#include "soapflow/machine.h"
#include "soapflow/models.h"
#include "soapflow/runtime.h"
#include "soapflow/strategy.h"
#include "soapflow/taskgraph.h"

static sf_graph *build(const char *name, int64_t batch) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = batch;
    sf_error err = {0};
    sf_graph *g = sf_model_build(name, &o, &err);
    if (!g) fail_msg("%s at batch %lld: %s", name, (long long)batch, err.msg);
    return g;
}

static const sf_op *op_named(const sf_graph *g, const char *name) {
    int id = sf_graph_find(g, name);
    if (id < 0) fail_msg("%s: no operator '%s'", sf_graph_name(g), name);
    return sf_graph_op(g, id);
}

static void assert_shape(const sf_shape *s, const char *want) {
    char buf[128];
    assert_string_equal(sf_shape_str(s, buf, sizeof buf), want);
}

static int64_t params_of(const sf_graph *g) {
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    return st.params;
}

static int64_t lstm_params(int64_t in, int64_t h) { return 4 * h * (in + h) + 8 * h; }

static void test_registry(void **state) {
    (void)state;
    int n = sf_model_count();
    assert_int_equal(n, 19);
    for (int i = 0; i < n; i++) {
        assert_non_null(sf_model_name(i));
        assert_non_null(sf_model_summary(i));
        assert_true(strlen(sf_model_summary(i)) > 20);
        assert_null(strchr(sf_model_summary(i), '\n'));
        for (int j = 0; j < i; j++) assert_string_not_equal(sf_model_name(i), sf_model_name(j));
    }
    assert_null(sf_model_name(-1));
    assert_null(sf_model_name(n));
    assert_null(sf_model_summary(n));
    sf_model_options o;
    sf_model_options_default(&o);
    assert_int_equal(o.batch, 64);
    assert_int_equal(o.seq_len, 0);
}

/* Every model at batches 1, 3 and 64: the batch reaches every operator's
 * dimension 0, the parameters do not depend on it, the FLOPs are linear in it,
 * and the graph ends in the loss. */
static void test_all_build(void **state) {
    (void)state;
    static const int64_t batches[] = {1, 3, 64};
    for (int i = 0; i < sf_model_count(); i++) {
        const char *name = sf_model_name(i);
        sf_graph_stats st1 = {0};
        for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
            int64_t batch = batches[k];
            sf_graph *g = build(name, batch);
            assert_string_equal(sf_graph_name(g), name);
            sf_graph_stats st;
            sf_graph_stats_compute(g, &st);
            assert_int_equal(st.batch, batch);
            assert_true(st.params > 0);
            assert_true(st.flops_fwd > 0 && st.flops_bwd > 0);
            for (int id = 0; id < sf_graph_num_ops(g); id++) {
                const sf_op *op = sf_graph_op(g, id);
                for (int out = 0; out < op->n_outputs; out++)
                    if (op->out_shapes[out].d[0] != batch)
                        fail_msg("%s: '%s' output %d has batch %lld", name, op->name, out,
                                 (long long)op->out_shapes[out].d[0]);
            }
            const sf_op *last = sf_graph_op(g, sf_graph_num_ops(g) - 1);
            assert_int_equal(last->type, SF_OP_SOFTMAX_CE);
            assert_string_equal(last->name, "loss");
            if (k == 0) {
                st1 = st;
            } else {
                assert_true(st.params == st1.params);
                double want = st1.flops_fwd * (double)batch;
                assert_true(st.flops_fwd > want * (1 - 1e-9) && st.flops_fwd < want * (1 + 1e-9));
            }
            sf_graph_free(g);
        }
    }
}

static void test_cnn_params(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int64_t params;
    } want[] = {
        {"lenet5", 61706},          {"alexnet", 61100840},    {"vgg16", 138357544},
        {"resnet18", 11689512},     {"resnet50", 25557032},   {"resnet101", 44549160},
        {"inception_v3", 23834568},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sf_graph *g = build(want[i].name, 2);
        if (params_of(g) != want[i].params)
            fail_msg("%s: %lld params, torchvision has %lld", want[i].name,
                     (long long)params_of(g), (long long)want[i].params);
        sf_graph_free(g);
    }
}

static void test_cnn_shapes(void **state) {
    (void)state;
    sf_graph *g = build("resnet50", 64);
    assert_shape(&op_named(g, "maxpool")->out_shapes[0], "64x64x56x56");
    assert_shape(&op_named(g, "layer1.0.downsample.1")->out_shapes[0], "64x256x56x56");
    assert_shape(&op_named(g, "layer4.2.relu")->out_shapes[0], "64x2048x7x7");
    assert_shape(&op_named(g, "avgpool")->out_shapes[0], "64x2048x1x1");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "64x1000");
    assert_int_equal(sf_graph_find(g, "layer1.1.downsample.0"), -1);
    sf_graph_free(g);

    g = build("resnet18", 64);
    assert_int_equal(sf_graph_find(g, "layer1.0.downsample.0"), -1); /* 64 -> 64, stride 1 */
    assert_shape(&op_named(g, "layer2.0.downsample.0")->out_shapes[0], "64x128x28x28");
    assert_shape(&op_named(g, "avgpool")->out_shapes[0], "64x512x1x1");
    sf_graph_free(g);

    g = build("resnet101", 1);
    assert_shape(&op_named(g, "layer3.22.conv3")->out_shapes[0], "1x1024x14x14");
    sf_graph_free(g);

    g = build("inception_v3", 64);
    assert_shape(&op_named(g, "maxpool2")->out_shapes[0], "64x192x35x35");
    assert_shape(&op_named(g, "Mixed_5b.concat")->out_shapes[0], "64x256x35x35");
    assert_shape(&op_named(g, "Mixed_6a.concat")->out_shapes[0], "64x768x17x17");
    assert_shape(&op_named(g, "Mixed_7a.concat")->out_shapes[0], "64x1280x8x8");
    assert_shape(&op_named(g, "Mixed_7c.concat")->out_shapes[0], "64x2048x8x8");
    assert_shape(&op_named(g, "avgpool")->out_shapes[0], "64x2048x1x1");
    const sf_op *bn = op_named(g, "Mixed_6b.branch7x7_2.bn");
    assert_true(bn->params.norm.eps == 1e-3);
    const sf_op *conv = op_named(g, "Mixed_6b.branch7x7_2.conv");
    assert_int_equal(conv->params.conv2d.bias, 0);
    assert_int_equal(conv->params.conv2d.kernel[0], 1);
    assert_int_equal(conv->params.conv2d.kernel[1], 7);
    sf_graph_free(g);

    g = build("alexnet", 64);
    assert_shape(&op_named(g, "features.12")->out_shapes[0], "64x256x6x6");
    assert_shape(&op_named(g, "avgpool")->out_shapes[0], "64x256x6x6");
    assert_shape(&op_named(g, "flatten")->out_shapes[0], "64x9216");
    assert_int_equal(op_named(g, "classifier.3")->type, SF_OP_DROPOUT);
    sf_graph_free(g);

    g = build("vgg16", 64);
    assert_shape(&op_named(g, "features.30")->out_shapes[0], "64x512x7x7");
    assert_shape(&op_named(g, "flatten")->out_shapes[0], "64x25088");
    sf_graph_free(g);

    g = build("lenet5", 64);
    assert_shape(&op_named(g, "flatten")->out_shapes[0], "64x400");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "64x10");
    sf_graph_free(g);
}

/* AlexNet at 224: ~0.714 GMACs per image, 1.43 GFLOP at 2 FLOPs per MAC. */
static void test_alexnet_flops(void **state) {
    (void)state;
    sf_graph *g = build("alexnet", 64);
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    double per_image = st.flops_fwd / 64.0;
    assert_true(per_image > 1.43e9 * 0.95 && per_image < 1.43e9 * 1.05);
    assert_true(st.flops_bwd > 1.5 * st.flops_fwd);
    sf_graph_free(g);
}

static void test_rnnlm(void **state) {
    (void)state;
    sf_graph *g = build("rnnlm", 64);
    const int64_t h = 1024, v = 10000;
    int64_t want = v * h + 2 * lstm_params(h, h) + h * v + v;
    assert_true(params_of(g) == want);
    assert_true(params_of(g) == 37283600);

    /* 40 steps in 10 chunks of 4, in each of 2 layers */
    int lstms = 0;
    for (int id = 0; id < sf_graph_num_ops(g); id++)
        if (sf_graph_op(g, id)->type == SF_OP_LSTM) lstms++;
    assert_int_equal(lstms, 20);
    const sf_op *split = op_named(g, "split");
    assert_int_equal(split->n_outputs, 10);
    const sf_op *c0 = op_named(g, "lstm0.c0"), *c1 = op_named(g, "lstm0.c1");
    const sf_op *c9 = op_named(g, "lstm1.c9");
    assert_int_equal(c0->n_inputs, 1);
    assert_int_equal(c0->weight_owner, -1);
    assert_int_equal(c1->weight_owner, c0->id);
    assert_int_equal(c9->weight_owner, op_named(g, "lstm1.c0")->id);
    assert_int_equal(c1->n_inputs, 3);
    assert_int_equal(c1->inputs[0].op, split->id);
    assert_int_equal(c1->inputs[0].out, 1);
    assert_int_equal(c1->inputs[1].op, c0->id);
    assert_int_equal(c1->inputs[1].out, 1);
    assert_int_equal(c1->inputs[2].op, c0->id);
    assert_int_equal(c1->inputs[2].out, 2);
    const sf_op *l1c4 = op_named(g, "lstm1.c4");
    assert_int_equal(l1c4->inputs[0].op, op_named(g, "lstm0.c4")->id);
    assert_int_equal(l1c4->inputs[0].out, 0);
    assert_shape(&c9->out_shapes[0], "64x4x1024");
    assert_shape(&op_named(g, "lstm1.concat")->out_shapes[0], "64x40x1024");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "64x40x10000");
    sf_graph_free(g);

    /* 42 steps in chunks of 4: 11 chunks, the last of 2 steps */
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 3;
    o.seq_len = 42;
    o.hidden = 256;
    o.vocab = 500;
    sf_error err = {0};
    g = sf_model_build("rnnlm", &o, &err);
    assert_non_null(g);
    assert_shape(&op_named(g, "lstm0.c10")->out_shapes[0], "3x2x256");
    assert_int_equal(sf_graph_find(g, "lstm0.c11"), -1);
    assert_true(params_of(g) == 500 * 256 + 2 * lstm_params(256, 256) + 256 * 500 + 500);
    sf_graph_free(g);

    /* one chunk: no split, no concat */
    o.seq_len = 3;
    o.chunk = 8;
    g = sf_model_build("rnnlm", &o, &err);
    assert_non_null(g);
    assert_int_equal(sf_graph_find(g, "split"), -1);
    assert_shape(&op_named(g, "lstm1.c0")->out_shapes[0], "3x3x256");
    sf_graph_free(g);
}

static void test_rnntc(void **state) {
    (void)state;
    sf_graph *g = build("rnntc", 8);
    const int64_t h = 1024, v = 10000;
    assert_true(params_of(g) == v * h + 4 * lstm_params(h, h) + 2 * h + 2);
    const sf_op *fc = op_named(g, "fc");
    assert_int_equal(fc->inputs[0].op, op_named(g, "lstm3.c9")->id);
    assert_int_equal(fc->inputs[0].out, 1); /* hT */
    assert_shape(&op_named(g, "loss")->out_shapes[0], "8x2");
    assert_int_equal(op_named(g, "lstm3.c5")->weight_owner, op_named(g, "lstm3.c0")->id);
    sf_graph_free(g);
}

static void test_nmt(void **state) {
    (void)state;
    sf_graph *g = build("nmt", 16);
    const int64_t h = 1024, v = 32768;
    int64_t want = 2 * v * h + 4 * lstm_params(h, h) + 4 * h * h + 4 * h + h * v + v;
    assert_true(params_of(g) == want);
    /* the decoder starts from the encoder's final state, layer by layer */
    for (int l = 0; l < 2; l++) {
        char dec[32], enc[32];
        snprintf(dec, sizeof dec, "dec.lstm%d.c0", l);
        snprintf(enc, sizeof enc, "enc.lstm%d.c9", l);
        const sf_op *d0 = op_named(g, dec);
        assert_int_equal(d0->n_inputs, 3);
        assert_int_equal(d0->inputs[1].op, op_named(g, enc)->id);
        assert_int_equal(d0->inputs[1].out, 1);
        assert_int_equal(d0->inputs[2].op, op_named(g, enc)->id);
        assert_int_equal(d0->inputs[2].out, 2);
        /* encoder and decoder layers have their own weights */
        assert_int_equal(d0->weight_owner, -1);
    }
    const sf_op *attn = op_named(g, "attention");
    assert_int_equal(attn->n_inputs, 2);
    assert_int_equal(attn->inputs[0].op, op_named(g, "dec.concat")->id);
    assert_int_equal(attn->inputs[1].op, op_named(g, "enc.concat")->id);
    assert_shape(&attn->out_shapes[0], "16x40x1024");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "16x40x32768");
    sf_graph_free(g);
}

/* gnmt: GNMT v2's wiring (zoo_rnn.c): a bidirectional first encoder layer, the
 * reversed direction chained from the last chunk to the first; layer 1 reads
 * both directions (2H); the decoder's layers after the first read the
 * attention's context beside their input; residuals from layer 2; one
 * embedding for both sides. */
static void test_gnmt(void **state) {
    (void)state;
    sf_graph *g = build("gnmt", 16);
    const int64_t h = 1024, v = 32768;
    int64_t enc = 2 * lstm_params(h, h) + lstm_params(2 * h, h) + 2 * lstm_params(h, h);
    int64_t dec = lstm_params(h, h) + 3 * lstm_params(2 * h, h);
    int64_t want = v * h + enc + dec + 4 * h * h + 4 * h + h * v + v;
    assert_true(params_of(g) == want);
    /* the reversed direction: chunk 9 first (no state), chunk k takes chunk k+1's */
    const sf_op *r9 = op_named(g, "enc.lstm0r.c9"), *r3 = op_named(g, "enc.lstm0r.c3");
    assert_int_equal(r9->n_inputs, 1);
    assert_int_equal(r3->inputs[1].op, op_named(g, "enc.lstm0r.c4")->id);
    assert_int_equal(op_named(g, "enc.lstm0r.c0")->weight_owner, r9->id);
    assert_shape(&op_named(g, "enc.lstm0.cat.c3")->out_shapes[0], "16x4x2048");
    assert_int_equal(op_named(g, "enc.lstm1.c0")->in_shapes[0].d[2], 2 * h);
    assert_non_null(op_named(g, "enc.lstm2.res.c0"));
    assert_true(sf_graph_find(g, "enc.lstm1.res.c0") < 0); /* layer 1 changes width */
    /* the decoder: zero start, attention over layer 0, context into layers 1.. */
    assert_int_equal(op_named(g, "dec.lstm0.c0")->n_inputs, 1);
    const sf_op *attn = op_named(g, "attention");
    assert_int_equal(attn->inputs[0].op, op_named(g, "dec.lstm0.concat")->id);
    assert_int_equal(attn->inputs[1].op, op_named(g, "enc.concat")->id);
    for (int l = 1; l < 4; l++) {
        char name[32];
        snprintf(name, sizeof name, "dec.lstm%d.in.c5", l);
        const sf_op *in = op_named(g, name);
        assert_int_equal(in->inputs[1].op, op_named(g, "attention.split")->id);
        assert_int_equal(in->inputs[1].out, 5);
        assert_shape(&in->out_shapes[0], "16x4x2048");
    }
    assert_int_equal(op_named(g, "dec.embed")->weight_owner, op_named(g, "enc.embed")->id);
    assert_shape(&op_named(g, "loss")->out_shapes[0], "16x40x32768");
    sf_graph_free(g);
}

static void test_mlp(void **state) {
    (void)state;
    sf_graph *g = build("mlp", 64);
    assert_true(params_of(g) == 784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10);
    assert_int_equal(sf_graph_find(g, "relu3"), -1);
    sf_graph_free(g);

    sf_model_options o;
    sf_model_options_default(&o);
    o.n_mlp = 3;
    o.mlp_sizes[0] = 10;
    o.mlp_sizes[1] = 20;
    o.mlp_sizes[2] = 3;
    sf_error err = {0};
    g = sf_model_build("mlp", &o, &err);
    assert_non_null(g);
    assert_true(params_of(g) == 10 * 20 + 20 + 20 * 3 + 3);
    assert_int_equal(sf_graph_num_ops(g), 5); /* input, fc1, relu1, fc2, loss */
    sf_graph_free(g);

    o.n_mlp = 1;
    assert_null(sf_model_build("mlp", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    sf_error_clear(&err);
    o.n_mlp = 3;
    o.mlp_sizes[1] = 0;
    assert_null(sf_model_build("mlp", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
}

static void test_transformer(void **state) {
    (void)state;
    sf_graph *g = build("transformer", 4);
    const int64_t h = 768, v = 30522, ff = 3072;
    int64_t layer = 4 * h * h + 4 * h + 2 * h + h * ff + ff + ff * h + h + 2 * h;
    int64_t want = v * h + 512 * h + 2 * h + 12 * layer + h * v + v;
    assert_true(params_of(g) == want);
    const sf_op *attn = op_named(g, "layer11.attention");
    assert_int_equal(attn->n_inputs, 1);
    assert_int_equal(attn->params.attention.heads, 12);
    assert_shape(&op_named(g, "layer11.ffn.fc1")->out_shapes[0], "4x128x3072");
    assert_shape(&op_named(g, "layer11.ffn.ln")->out_shapes[0], "4x128x768");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "4x128x30522");
    sf_graph_free(g);

    sf_model_options o;
    sf_model_options_default(&o);
    o.hidden = 100; /* not a multiple of 12 heads */
    sf_error err = {0};
    assert_null(sf_model_build("transformer", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
}

/* The named GPT sizes count the parameters of the released GPT-2 checkpoints
 * (Hugging Face's gpt2 ... gpt2-xl, tied head counted once) and GPT-3's
 * 12 L h^2 + 13 L h + (V + S) h + 2h. */
static void test_gpt_params(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int64_t params, layers, hidden, heads, positions;
    } want[] = {
        {"gpt2", 124439808, 12, 768, 12, 1024},
        {"gpt2-medium", 354823168, 24, 1024, 16, 1024},
        {"gpt2-large", 774030080, 36, 1280, 20, 1024},
        {"gpt2-xl", 1557611200, 48, 1600, 25, 1024},
        {"gpt3", 174604259328, 96, 12288, 96, 2048},
        {"gpt", 124439808, 12, 768, 12, 1024},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sf_graph *g = build(want[i].name, 2);
        int64_t L = want[i].layers, h = want[i].hidden, S = want[i].positions, V = 50257;
        assert_true(params_of(g) == want[i].params);
        assert_true(12 * L * h * h + 13 * L * h + (V + S) * h + 2 * h == want[i].params);
        char name[32];
        snprintf(name, sizeof name, "h%lld.attn", (long long)(L - 1));
        const sf_op *attn = op_named(g, name);
        assert_int_equal(attn->params.attention.heads, want[i].heads);
        assert_int_equal(attn->params.attention.causal, 1);
        char want_shape[64];
        snprintf(want_shape, sizeof want_shape, "2x%lldx%lld", (long long)S, (long long)h);
        assert_shape(&op_named(g, "wpe")->out_shapes[0], want_shape);
        sf_graph_free(g);
    }
}

/* Shapes through a gpt2 block and the head; the LM head shares wte's (V, h)
 * matrix: it is a linear without bias owned by the embedding, counted once in
 * the totals, and neither splits the shared matrix (parameter dimensions off). */
static void test_gpt_shapes_and_tie(void **state) {
    (void)state;
    sf_graph *g = build("gpt2", 4);
    assert_shape(&op_named(g, "tokens")->out_shapes[0], "4x1024");
    assert_shape(&op_named(g, "wte")->out_shapes[0], "4x1024x768");
    assert_shape(&op_named(g, "h0.ln_1")->out_shapes[0], "4x1024x768");
    assert_shape(&op_named(g, "h0.attn")->out_shapes[0], "4x1024x768");
    assert_shape(&op_named(g, "h11.mlp.fc1")->out_shapes[0], "4x1024x3072");
    assert_shape(&op_named(g, "h11.mlp.fc2")->out_shapes[0], "4x1024x768");
    assert_shape(&op_named(g, "ln_f")->out_shapes[0], "4x1024x768");
    assert_shape(&op_named(g, "lm_head")->out_shapes[0], "4x1024x50257");
    assert_shape(&op_named(g, "loss")->out_shapes[0], "4x1024x50257");
    const sf_op *wte = op_named(g, "wte"), *head = op_named(g, "lm_head");
    assert_int_equal(head->type, SF_OP_LINEAR);
    assert_int_equal(head->params.linear.bias, 0);
    assert_int_equal(head->weight_owner, wte->id);
    assert_int_equal(wte->weight_owner, -1);
    assert_true(head->n_params == wte->n_params && wte->n_params == 50257 * 768);
    /* counted once: the sum of every operator's own weights less the head's */
    int64_t all = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) all += sf_graph_op(g, i)->n_params;
    assert_true(params_of(g) == all - head->n_params);
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    assert_true(st.weight_bytes == 4.0 * (double)st.params);
    /* tied, both keep their kinds: the head (N, T, V | D) splits the table's
     * rows on its parameter dimension, wte (N, T, D | V) on its reduction */
    static const sf_dim_kind kinds[4] = {SF_DIM_SAMPLE, SF_DIM_ATTRIBUTE, SF_DIM_PARAMETER,
                                         SF_DIM_REDUCE};
    assert_int_equal(head->space.ndim, 4);
    assert_int_equal(wte->space.ndim, 4);
    for (int d = 0; d < 4; d++) {
        assert_int_equal(head->kinds[d], kinds[d]);
        assert_int_equal(wte->kinds[d], kinds[d]);
    }
    assert_true(head->space.d[2] == 50257 && wte->space.d[3] == 50257);
    assert_true(sf_graph_op_tied(g, head->id) && sf_graph_op_tied(g, wte->id));
    assert_int_equal(sf_graph_num_ties(g), 1);
    assert_false(sf_graph_op_tied(g, sf_graph_find(g, "wpe")));
    /* an untied linear keeps its parameter dimension */
    assert_int_equal(op_named(g, "h0.mlp.fc1")->kinds[2], SF_DIM_PARAMETER);
    sf_graph_free(g);

    /* options: sizes, and a position table as long as the sequence for "gpt" */
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 3, o.layers = 2, o.hidden = 64, o.heads = 4, o.seq_len = 16, o.vocab = 32;
    sf_error err = {0};
    g = sf_model_build("gpt", &o, &err);
    assert_non_null(g);
    assert_true(params_of(g) == 12 * 2 * 64 * 64 + 13 * 2 * 64 + (32 + 16) * 64 + 2 * 64);
    assert_shape(&op_named(g, "wpe")->out_shapes[0], "3x16x64");
    assert_int_equal(op_named(g, "wpe")->params.embedding.num_embeddings, 16);
    assert_int_equal(op_named(g, "h1.attn")->params.attention.heads, 4);
    assert_int_equal(sf_graph_find(g, "h2.attn"), -1);
    sf_graph_free(g);
    /* gpt2 keeps its 1024 positions for a shorter sequence, grows for a longer one */
    o.seq_len = 2048;
    g = sf_model_build("gpt2", &o, &err);
    assert_int_equal(op_named(g, "wpe")->params.embedding.num_embeddings, 2048);
    sf_graph_free(g);
    o.seq_len = 8;
    g = sf_model_build("gpt2", &o, &err);
    assert_int_equal(op_named(g, "wpe")->params.embedding.num_embeddings, 1024);
    sf_graph_free(g);
    o.heads = 5; /* 64 is not a multiple of 5 */
    assert_null(sf_model_build("gpt", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    o.heads = 4, o.layers = -1;
    assert_null(sf_model_build("gpt", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
}

/* Sharing across types takes one layout only: a linear without bias over V
 * outputs of D inputs and a (V, D) embedding; not with a bias, not another V,
 * not a later owner. */
static void test_share_across_types(void **state) {
    (void)state;
    sf_error err = {0};
    sf_graph *g = sf_graph_new("tie");
    sf_shape s = sf_shape_make(2, (int64_t[]){2, 5});
    int tok = sf_graph_add_input(g, "tokens", &s, 1, &err);
    sf_op_params p;
    sf_op_params_default(SF_OP_EMBEDDING, &p);
    p.embedding.num_embeddings = 7;
    p.embedding.embedding_dim = 3;
    int emb = sf_graph_add_op(g, SF_OP_EMBEDDING, "emb", &p, (sf_tensor_ref[]){{tok, 0}}, 1, &err);
    sf_op_params_default(SF_OP_LINEAR, &p);
    p.linear.out_features = 7;
    p.linear.bias = 1;
    int with_bias =
        sf_graph_add_op(g, SF_OP_LINEAR, "with_bias", &p, (sf_tensor_ref[]){{emb, 0}}, 1, &err);
    p.linear.bias = 0;
    p.linear.out_features = 6;
    int other_v =
        sf_graph_add_op(g, SF_OP_LINEAR, "other_v", &p, (sf_tensor_ref[]){{emb, 0}}, 1, &err);
    p.linear.out_features = 7;
    int head = sf_graph_add_op(g, SF_OP_LINEAR, "head", &p, (sf_tensor_ref[]){{emb, 0}}, 1, &err);
    assert_true(head > 0);
    assert_int_equal(sf_graph_share_weights(g, with_bias, emb, &err), SF_ERR_INVALID);
    assert_int_equal(sf_graph_share_weights(g, other_v, emb, &err), SF_ERR_INVALID);
    assert_int_equal(sf_graph_share_weights(g, emb, head, &err), SF_ERR_INVALID);
    assert_int_equal(sf_graph_num_ties(g), 0); /* refusals change nothing */
    assert_false(sf_graph_op_tied(g, emb));
    assert_int_equal(sf_graph_share_weights(g, head, emb, &err), SF_OK);
    assert_int_equal(sf_graph_op(g, head)->weight_owner, emb);
    /* tied, both keep their kinds */
    assert_int_equal(sf_graph_op(g, emb)->kinds[2], SF_DIM_PARAMETER);
    assert_int_equal(sf_graph_op(g, head)->kinds[2], SF_DIM_PARAMETER);
    assert_int_equal(sf_graph_op(g, emb)->kinds[3], SF_DIM_REDUCE);
    assert_int_equal(sf_graph_op(g, head)->kinds[3], SF_DIM_REDUCE);
    assert_true(sf_graph_op_tied(g, emb) && sf_graph_op_tied(g, head));
    assert_false(sf_graph_op_tied(g, other_v));
    assert_int_equal(sf_graph_num_ties(g), 1);
    assert_int_equal(sf_graph_share_weights(g, head, emb, &err), SF_OK); /* again: one tie */
    assert_int_equal(sf_graph_num_ties(g), 1);
    int64_t all = 0;
    for (int i = 0; i < sf_graph_num_ops(g); i++) all += sf_graph_op(g, i)->n_params;
    assert_true(params_of(g) == all - 21);
    sf_graph_free(g);
}

/* The task graph syncs the tied matrix once: wte's weight group holds wte and
 * lm_head, and under data parallelism its parts form one shard of the whole
 * (V, h) table whose devices are those of both; under random strategies with
 * the head lined up with wte (sf_strategy_align_ties: the table split alike,
 * on the vocabulary or the width or both) every shard is one piece of the
 * table, held by parts of both operators on the devices of both, the pieces
 * adding up to the table; and the weight elements per device count each piece
 * once. */
static void test_gpt_tie_synced_once(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 8, o.layers = 1, o.hidden = 16, o.heads = 2, o.seq_len = 4, o.vocab = 24;
    sf_error err = {0};
    sf_graph *g = sf_model_build("gpt", &o, &err);
    assert_non_null(g);
    sf_machine *m = sf_machine_open("cpu[4]", &err);
    assert_non_null(m);
    int wte = sf_graph_find(g, "wte"), head = sf_graph_find(g, "lm_head");
    sf_taskgraph *tg = sf_taskgraph_new(g, 4, &err);
    sf_strategy *s = sf_strategy_new(g);
    sf_rng rng;
    sf_rng_seed(&rng, 5);
    int tied_split = 0;
    for (int round = 0; round < 20; round++) {
        if (round == 0) {
            assert_int_equal(sf_strategy_data(s, g, m), SF_OK);
        } else {
            for (int op = 0; op < sf_graph_num_ops(g); op++)
                sf_config_random_in(sf_graph_op(g, op), m, SF_OPT_IN_REDUCE, &rng,
                                    sf_strategy_config(s, op));
            assert_int_equal(sf_strategy_align_ties(s, g, m), 0);
        }
        assert_int_equal(sf_strategy_validate(s, g, m, &err), SF_OK);
        sf_taskgraph_set_strategy(tg, s);
        for (int op = 0; op < sf_graph_num_ops(g); op++) sf_taskgraph_set_tiles(tg, op);
        assert_int_equal(sf_taskgraph_owner(tg, head), wte);
        const int *members;
        assert_int_equal(sf_taskgraph_members(tg, wte, &members), 2);
        assert_int_equal(members[1], head);
        sf_tg_sync sy;
        assert_int_equal(sf_taskgraph_sync(tg, wte, &sy), SF_OK);
        const sf_config *cw = sf_strategy_get(s, wte);
        /* wte's pieces: its degrees on the width (2) and the vocabulary (3) */
        int pieces = (cw->ndim > 2 ? cw->degree[2] : 1) * (cw->ndim > 3 ? cw->degree[3] : 1);
        if (round == 0) assert_int_equal(pieces, 1);
        assert_int_equal(sy.n_shards, pieces);
        if (pieces > 1) tied_split++;
        int64_t total = 0, per_dev[4] = {0}, want_dev[4] = {0};
        for (int k = 0; k < sy.n_shards; k++) {
            const sf_tg_shard *sh = &sy.shards[k];
            total += sh->numel;
            sf_weight_slice rep[SF_MAX_WEIGHT_SLICES];
            int nrep = sf_op_weight_slices(sf_graph_op(g, sh->rep_op),
                                           &sf_taskgraph_tiles(tg, sh->rep_op)[sh->rep_part], rep);
            int from[2] = {0};
            for (int r = 0; r < sh->n_devs; r++) {
                int d = sy.devs[sh->dev_start + r];
                per_dev[d] += sh->numel;
                for (int e = sy.ent_start[sh->dev_start + r];
                     e < sy.ent_start[sh->dev_start + r + 1]; e++) {
                    const sf_tg_entry *x = &sy.ents[e];
                    sf_weight_slice sl[SF_MAX_WEIGHT_SLICES];
                    int n = sf_op_weight_slices(sf_graph_op(g, x->op),
                                                &sf_taskgraph_tiles(tg, x->op)[x->part], sl);
                    assert_int_equal(n, nrep); /* the same elements as the shard's first */
                    for (int q = 0; q < n; q++)
                        assert_true(sl[q].offset == rep[q].offset && sl[q].len == rep[q].len &&
                                    sl[q].count == rep[q].count);
                    assert_int_equal(sf_strategy_get(s, x->op)->device[x->part], d);
                    from[x->op == head]++;
                }
            }
            assert_true(from[0] > 0 && from[1] > 0); /* both operators use every piece */
        }
        assert_true(total == 24 * 16);
        /* per device: the pieces of its parts of either operator, each once */
        for (int k = 0; k < 2; k++) {
            const sf_config *c = sf_strategy_get(s, members[k]);
            sf_tile *t = sf_taskgraph_tiles(tg, members[k]);
            for (int p = 0; p < c->n_parts; p++) {
                int seen = 0; /* an earlier part of either on this device with these slices */
                sf_weight_slice a[SF_MAX_WEIGHT_SLICES];
                int na = sf_op_weight_slices(sf_graph_op(g, members[k]), &t[p], a);
                for (int k2 = 0; k2 <= k && !seen; k2++) {
                    const sf_config *c2 = sf_strategy_get(s, members[k2]);
                    sf_tile *t2 = sf_taskgraph_tiles(tg, members[k2]);
                    for (int p2 = 0; p2 < (k2 < k ? c2->n_parts : p) && !seen; p2++) {
                        if (c2->device[p2] != c->device[p]) continue;
                        sf_weight_slice b[SF_MAX_WEIGHT_SLICES];
                        int nb = sf_op_weight_slices(sf_graph_op(g, members[k2]), &t2[p2], b);
                        seen = na == nb &&
                               (na == 0 || (a[0].offset == b[0].offset && a[0].len == b[0].len &&
                                            a[0].count == b[0].count));
                    }
                }
                if (!seen)
                    want_dev[c->device[p]] += sf_op_tile_weights(sf_graph_op(g, members[k]), &t[p]);
            }
        }
        for (int d = 0; d < 4; d++) assert_true(per_dev[d] == want_dev[d]);
        int64_t dw[4];
        assert_int_equal(sf_taskgraph_device_weights(tg, dw), SF_OK);
        int64_t rest = 0; /* the other groups' elements on device 0 */
        for (int ow = 0; ow < sf_graph_num_ops(g); ow++) {
            if (ow == wte || sf_taskgraph_owner(tg, ow) != ow) continue;
            sf_tg_sync so;
            assert_int_equal(sf_taskgraph_sync(tg, ow, &so), SF_OK);
            for (int k = 0; k < so.n_shards; k++)
                for (int r = 0; r < so.shards[k].n_devs; r++)
                    if (so.devs[so.shards[k].dev_start + r] == 0) rest += so.shards[k].numel;
        }
        assert_true(dw[0] == rest + per_dev[0]);
    }
    assert_true(tied_split >= 5); /* the table was split in many rounds */
    sf_strategy_free(s);
    sf_taskgraph_free(tg);
    sf_machine_free(m);
    sf_graph_free(g);
}

/* The output at position t of a GPT's attention depends on positions <= t
 * only: perturbing positions k.. leaves positions < k exactly as they were
 * and changes every later one; the transformer's (bidirectional) attention
 * changes them all, which shows the check can fail. */
static int attention_changes_before(const char *model, int64_t k, int *after_changed) {
    sf_model_options o;
    sf_model_options_default(&o);
    o.batch = 2, o.layers = 1, o.hidden = 24, o.heads = 4, o.seq_len = 8, o.vocab = 16;
    if (!strcmp(model, "transformer")) o.layers = 0;
    sf_error err = {0};
    sf_graph *g = sf_model_build(model, &o, &err);
    if (!g) fail_msg("%s: %s", model, err.msg);
    const sf_op *op = NULL;
    for (int i = 0; i < sf_graph_num_ops(g) && !op; i++)
        if (sf_graph_op(g, i)->type == SF_OP_ATTENTION) op = sf_graph_op(g, i);
    float **w = sf_params_new(g, 3, 0, &err);
    assert_non_null(w);
    const int64_t N = 2, T = 8, D = 24, n = N * T * D;
    float x[2 * 8 * 24], y0[2 * 8 * 24], y1[2 * 8 * 24];
    sf_rng rng;
    sf_rng_seed(&rng, 11);
    for (int64_t q = 0; q < n; q++) x[q] = (float)sf_rng_uniform(&rng) - 0.5f;
    sf_tile t = sf_tile_full(&op->space), region;
    sf_op_input_region(op, &t, 0, &region);
    size_t ws = sf_kernel_workspace_bytes(op, &t, 0);
    void *work = ws ? malloc(ws) : NULL;
    float *outs[2] = {y0, y1};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) /* perturb positions k.. of both samples */
            for (int64_t s = 0; s < N; s++)
                for (int64_t q = (s * T + k) * D; q < (s + 1) * T * D; q++) x[q] += 0.25f;
        const float *in[1] = {x};
        float *out[1] = {outs[pass]};
        sf_kernel_args a = {.op = op,
                            .tile = t,
                            .n_inputs = 1,
                            .in = in,
                            .in_region = &region,
                            .n_outputs = 1,
                            .out = out,
                            .weights = w[op->id],
                            .workspace = work,
                            .workspace_bytes = ws};
        assert_int_equal(sf_kernel_forward(&a, 1), SF_OK);
    }
    int before = 0, after = 1;
    for (int64_t s = 0; s < N; s++)
        for (int64_t p = 0; p < T; p++) {
            int changed = memcmp(&y0[(s * T + p) * D], &y1[(s * T + p) * D], D * sizeof(float));
            if (p < k)
                before |= changed != 0;
            else
                after &= changed != 0;
        }
    *after_changed = after;
    free(work);
    sf_params_free(g, w);
    sf_graph_free(g);
    return before;
}

static void test_gpt_causal(void **state) {
    (void)state;
    for (int64_t k = 1; k < 8; k += 3) {
        int after = 0;
        assert_int_equal(attention_changes_before("gpt", k, &after), 0);
        assert_true(after);
        assert_int_equal(attention_changes_before("transformer", k, &after), 1);
        assert_true(after);
    }
}

/* The options each zoo model reads: every builder's own use of sf_model_options. */
static void test_options_taken(void **state) {
    (void)state;
    const unsigned rnn =
        SF_MODEL_OPT_SEQ_LEN | SF_MODEL_OPT_CHUNK | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_VOCAB;
    assert_int_equal(sf_model_options_taken("resnet50"), 0);
    assert_int_equal(sf_model_options_taken("lenet5"), 0);
    assert_int_equal(sf_model_options_taken("rnnlm"), rnn);
    assert_int_equal(sf_model_options_taken("nmt"), rnn | SF_MODEL_OPT_LAYERS);
    assert_int_equal(sf_model_options_taken("mlp"), SF_MODEL_OPT_MLP_SIZES);
    assert_int_equal(sf_model_options_taken("transformer"),
                     SF_MODEL_OPT_SEQ_LEN | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_VOCAB);
    const unsigned gpt = SF_MODEL_OPT_LAYERS | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_HEADS |
                         SF_MODEL_OPT_SEQ_LEN | SF_MODEL_OPT_VOCAB;
    assert_int_equal(sf_model_options_taken("gpt"), gpt);
    assert_int_equal(sf_model_options_taken("gpt3"), gpt);
    assert_int_equal(sf_model_options_taken("nosuch"), 0);
    assert_int_equal(sf_model_options_taken(NULL), 0);
    /* a model that does not take an option builds the same graph with it */
    sf_model_options o;
    sf_model_options_default(&o);
    sf_error err = {0};
    sf_graph *a = sf_model_build("lenet5", &o, &err);
    o.seq_len = 7, o.hidden = 9, o.vocab = 11, o.chunk = 2;
    sf_graph *b = sf_model_build("lenet5", &o, &err);
    assert_non_null(a);
    assert_non_null(b);
    sf_graph_stats sa, sb;
    sf_graph_stats_compute(a, &sa);
    sf_graph_stats_compute(b, &sb);
    assert_int_equal(sf_graph_num_ops(a), sf_graph_num_ops(b));
    assert_int_equal(sa.params, sb.params);
    sf_graph_free(a);
    sf_graph_free(b);
}

static void test_errors(void **state) {
    (void)state;
    sf_model_options o;
    sf_model_options_default(&o);
    sf_error err = {0};

    o.batch = 0;
    for (int i = 0; i < sf_model_count(); i++) {
        sf_error_clear(&err);
        assert_null(sf_model_build(sf_model_name(i), &o, &err));
        assert_int_equal(err.code, SF_ERR_INVALID);
        assert_non_null(strstr(err.msg, "batch"));
    }
    o.batch = -5;
    sf_error_clear(&err);
    assert_null(sf_model_build("resnet50", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);

    o.batch = 8;
    o.seq_len = -1;
    sf_error_clear(&err);
    assert_null(sf_model_build("rnnlm", &o, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);

    o.seq_len = 1000; /* 1000 chunks of 1: more outputs than one split may have */
    o.chunk = 1;
    sf_error_clear(&err);
    assert_null(sf_model_build("nmt", &o, &err));
    assert_int_equal(err.code, SF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "nmt"));

    sf_error_clear(&err);
    assert_null(sf_model_build("resnet51", &o, &err));
    assert_int_equal(err.code, SF_ERR_NOTFOUND);
    assert_non_null(strstr(err.msg, "resnet51"));
    for (int i = 0; i < sf_model_count(); i++) assert_non_null(strstr(err.msg, sf_model_name(i)));
    sf_error_clear(&err);
    assert_null(sf_model_build(NULL, &o, &err));
    assert_int_equal(err.code, SF_ERR_NOTFOUND);
    assert_null(sf_model_build("nope", &o, NULL)); /* err may be NULL */

    /* NULL options: the defaults (batch 64) */
    sf_graph *g = sf_model_build("lenet5", NULL, &err);
    assert_non_null(g);
    sf_graph_stats st;
    sf_graph_stats_compute(g, &st);
    assert_int_equal(st.batch, 64);
    sf_graph_free(g);
}

/* sf_op_output_axes, on every output of every zoo operator: the piece
 * sf_op_output_tile gives for a random tile lies, along each output dimension
 * e, within the tile's range along axis[e] less shift[e]. The simulator prunes
 * the producer parts it tests with this map, so a wrong axis or shift (say a
 * split slice's start) would lose transfers; this catches it here. */
static void test_output_axes_hold(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 7);
    int checked = 0;
    for (int mi = 0; mi < sf_model_count(); mi++) {
        sf_graph *g = build(sf_model_name(mi), 16);
        for (int id = 0; id < sf_graph_num_ops(g); id++) {
            const sf_op *op = sf_graph_op(g, id);
            for (int out = 0; out < op->n_outputs; out++) {
                int axis[SF_MAX_DIMS];
                int64_t shift[SF_MAX_DIMS];
                if (!sf_op_output_axes(op, out, axis, shift)) continue;
                for (int rep = 0; rep < 50; rep++) {
                    sf_tile t = sf_tile_full(&op->space);
                    for (int d = 0; d < t.ndim; d++) {
                        int64_t n = op->space.d[d];
                        int64_t a = (int64_t)sf_rng_below(&rng, (uint64_t)n);
                        int64_t b = a + 1 + (int64_t)sf_rng_below(&rng, (uint64_t)(n - a));
                        t.lo[d] = a;
                        t.hi[d] = b;
                    }
                    sf_tile piece;
                    sf_op_output_tile(op, &t, out, &piece);
                    if (sf_tile_empty(&piece)) continue;
                    assert_int_equal(piece.ndim, op->out_shapes[out].ndim);
                    for (int e = 0; e < piece.ndim; e++) {
                        assert_in_range(axis[e], 0, op->space.ndim - 1);
                        if (piece.lo[e] < t.lo[axis[e]] - shift[e] ||
                            piece.hi[e] > t.hi[axis[e]] - shift[e])
                            fail_msg("%s %s output %d dim %d: piece [%lld, %lld) outside "
                                     "[%lld, %lld)",
                                     sf_model_name(mi), op->name, out, e, (long long)piece.lo[e],
                                     (long long)piece.hi[e],
                                     (long long)(t.lo[axis[e]] - shift[e]),
                                     (long long)(t.hi[axis[e]] - shift[e]));
                    }
                    checked++;
                }
            }
        }
        sf_graph_free(g);
    }
    assert_true(checked > 1000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_all_build),
        cmocka_unit_test(test_cnn_params),
        cmocka_unit_test(test_cnn_shapes),
        cmocka_unit_test(test_alexnet_flops),
        cmocka_unit_test(test_rnnlm),
        cmocka_unit_test(test_rnntc),
        cmocka_unit_test(test_nmt),
        cmocka_unit_test(test_gnmt),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_transformer),
        cmocka_unit_test(test_gpt_params),
        cmocka_unit_test(test_gpt_shapes_and_tie),
        cmocka_unit_test(test_gpt_causal),
        cmocka_unit_test(test_share_across_types),
        cmocka_unit_test(test_gpt_tie_synced_once),
        cmocka_unit_test(test_options_taken),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_output_axes_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
