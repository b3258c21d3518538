/*
 * zoo.c - the model zoo's registry: names, one-line summaries, options.
 *
 * One table maps a name to its builder and summary; sf_model_build checks the
 * options once here (batch >= 1, no negative sizes) so that the builders only
 * resolve their own defaults. The models live one family per file:
 * zoo_cnn.c (lenet5, alexnet, vgg16), zoo_resnet.c, zoo_inception.c,
 * zoo_rnn.c (rnntc, rnnlm, nmt, gnmt), zoo_mlp.c, zoo_transformer.c and zoo_gpt.c.
 */
#include <stdio.h>
#include <string.h>

#include "zoo_impl.h"

#define RNN_OPTS                                                                               \
    (SF_MODEL_OPT_SEQ_LEN | SF_MODEL_OPT_CHUNK | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_VOCAB)

#define GPT_OPTS                                                                                   \
    (SF_MODEL_OPT_LAYERS | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_HEADS | SF_MODEL_OPT_SEQ_LEN |       \
     SF_MODEL_OPT_VOCAB)

typedef sf_graph *(*zoo_build_fn)(const sf_model_options *o, sf_error *err);

static const struct {
    const char *name;
    zoo_build_fn build;
    const char *summary;
    unsigned opts; /* SF_MODEL_OPT_* it reads */
} zoo_models[] = {
    {"lenet5", sf_zoo_lenet5,
     "LeNet-5 on 1x28x28 (conv 6@5x5, conv 16@5x5, fc 120-84-10), 61,706 params",
     0},
    {"alexnet", sf_zoo_alexnet,
     "AlexNet as torchvision (224x224, adaptive avg 6x6, dropout), 1000 classes, 61.1M params",
     0},
    {"vgg16", sf_zoo_vgg16,
     "VGG-16 as torchvision (224x224, adaptive avg 7x7), 1000 classes, 138.4M params",
     0},
    {"resnet18", sf_zoo_resnet18,
     "ResNet-18 as torchvision (224x224, basic blocks 2-2-2-2), 1000 classes, 11.7M params",
     0},
    {"resnet50", sf_zoo_resnet50,
     "ResNet-50 v1.5 as torchvision (224x224, bottlenecks 3-4-6-3), 1000 classes, 25.6M params",
     0},
    {"resnet101", sf_zoo_resnet101,
     "ResNet-101 v1.5 as torchvision (224x224, bottlenecks 3-4-23-3), 1000 classes, 44.5M params",
     0},
    {"inception_v3", sf_zoo_inception_v3,
     "Inception-v3 as torchvision without the aux head (299x299), 1000 classes, 23.8M params",
     0},
    {"rnntc", sf_zoo_rnntc,
     "RNN text classifier: embedding, 4 LSTM layers, 2 classes; seq 40, chunk 4, hidden 1024, "
     "vocab 10000",
     RNN_OPTS},
    {"rnnlm", sf_zoo_rnnlm,
     "RNN language model: embedding, 2 LSTM layers, linear + softmax; seq 40, chunk 4, "
     "hidden 1024, vocab 10000",
     RNN_OPTS},
    {"nmt", sf_zoo_nmt,
     "NMT: 2-layer LSTM encoder and decoder, attention (1 head), linear + softmax; seq 40, "
     "chunk 4, hidden 1024, vocab 32768 (layers: each side's LSTM layers)",
     RNN_OPTS | SF_MODEL_OPT_LAYERS},
    {"gnmt", sf_zoo_gnmt,
     "GNMT v2: 4-layer LSTM encoder (bidirectional first) and decoder, attention fed to every "
     "decoder layer, residuals; seq 40, chunk 4, hidden 1024, vocab 32768",
     RNN_OPTS | SF_MODEL_OPT_LAYERS},
    {"mlp", sf_zoo_mlp, "multilayer perceptron with relu; sizes 784-4096-4096-10 (mlp_sizes)",
     SF_MODEL_OPT_MLP_SIZES},
    {"transformer", sf_zoo_transformer,
     "BERT-base-like encoder: 12 layers, hidden 768, 12 heads, ff 3072, seq 128, vocab 30522, "
     "MLM head",
     SF_MODEL_OPT_SEQ_LEN | SF_MODEL_OPT_HIDDEN | SF_MODEL_OPT_VOCAB},
    {"gpt", sf_zoo_gpt,
     "GPT decoder (pre-norm, causal, GELU MLP 4h, learned positions, LM head tied to wte); "
     "gpt2's sizes, positions = seq",
     GPT_OPTS},
    {"gpt2", sf_zoo_gpt2,
     "GPT-2 small: 12 layers, hidden 768, 12 heads, seq 1024, vocab 50257, 124,439,808 params",
     GPT_OPTS},
    {"gpt2-medium", sf_zoo_gpt2_medium,
     "GPT-2 medium: 24 layers, hidden 1024, 16 heads, seq 1024, vocab 50257, 354.8M params",
     GPT_OPTS},
    {"gpt2-large", sf_zoo_gpt2_large,
     "GPT-2 large: 36 layers, hidden 1280, 20 heads, seq 1024, vocab 50257, 774.0M params",
     GPT_OPTS},
    {"gpt2-xl", sf_zoo_gpt2_xl,
     "GPT-2 XL: 48 layers, hidden 1600, 25 heads, seq 1024, vocab 50257, 1.56B params",
     GPT_OPTS},
    {"gpt3", sf_zoo_gpt3,
     "GPT-3 175B: 96 layers, hidden 12288, 96 heads, seq 2048, vocab 50257, 174.6B params",
     GPT_OPTS},
};

#define ZOO_COUNT ((int)(sizeof zoo_models / sizeof zoo_models[0]))

void sf_model_options_default(sf_model_options *o) {
    memset(o, 0, sizeof *o);
    o->batch = 64;
}

int sf_model_count(void) { return ZOO_COUNT; }

const char *sf_model_name(int i) { return i >= 0 && i < ZOO_COUNT ? zoo_models[i].name : NULL; }

const char *sf_model_summary(int i) {
    return i >= 0 && i < ZOO_COUNT ? zoo_models[i].summary : NULL;
}

unsigned sf_model_options_taken(const char *name) {
    for (int i = 0; name && i < ZOO_COUNT; i++)
        if (strcmp(zoo_models[i].name, name) == 0) return zoo_models[i].opts;
    return 0;
}

static sf_status check_options(const sf_model_options *o, sf_error *err) {
    if (o->batch < 1)
        return sf_error_set(err, SF_ERR_INVALID, "batch must be >= 1, got %lld",
                            (long long)o->batch);
    if (o->seq_len < 0 || o->chunk < 0 || o->hidden < 0 || o->vocab < 0 || o->layers < 0 ||
        o->heads < 0)
        return sf_error_set(err, SF_ERR_INVALID,
                            "seq_len, chunk, hidden, vocab, layers and heads must be >= 0 (0: "
                            "model default)");
    if (o->n_mlp < 0 || o->n_mlp > SF_MLP_MAX_LAYERS + 1)
        return sf_error_set(err, SF_ERR_INVALID, "n_mlp must be in 0..%d, got %d",
                            SF_MLP_MAX_LAYERS + 1, o->n_mlp);
    return SF_OK;
}

sf_graph *sf_model_build(const char *name, const sf_model_options *o, sf_error *err) {
    sf_model_options defaults;
    if (!o) {
        sf_model_options_default(&defaults);
        o = &defaults;
    }
    if (!name) name = "";
    for (int i = 0; i < ZOO_COUNT; i++) {
        if (strcmp(zoo_models[i].name, name) != 0) continue;
        if (check_options(o, err) != SF_OK) {
            sf_error_prefix(err, "model '%s': ", name);
            return NULL;
        }
        return zoo_models[i].build(o, err);
    }
    char known[SF_ERRMSG_MAX / 2];
    size_t len = 0;
    known[0] = '\0';
    for (int i = 0; i < ZOO_COUNT && len < sizeof known; i++) {
        int n = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                         zoo_models[i].name);
        if (n < 0) break;
        len += (size_t)n;
    }
    sf_error_set(err, SF_ERR_NOTFOUND, "unknown model '%.64s' (known: %s)", name, known);
    return NULL;
}
