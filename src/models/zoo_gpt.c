/*
 * zoo_gpt.c - GPT: decoder-only transformers as GPT-2 and GPT-3 (gpt, gpt2,
 * gpt2-medium, gpt2-large, gpt2-xl, gpt3).
 *
 * Token ids and position ids are two index inputs (N, T); the token embedding
 * wte (V, h) and the learned position embedding wpe (P, h) are added, then L
 * pre-norm blocks each do
 *     x = x + attention(ln_1(x))            causal, heads H, with biases
 *     x = x + fc2(gelu(fc1(ln_2(x))))       fc1 h -> 4h, fc2 4h -> h
 * and a final ln_f feeds the LM head, a linear h -> V without bias whose
 * weight is wte itself (GPT-2's tied head: sf_graph_share_weights between the
 * linear and the embedding, whose layouts are one (V, h) matrix), then softmax
 * with cross-entropy at every position (the next-token loss; the labels come
 * with each batch). Each block has 12h^2 + 13h parameters (attention 4h^2 +
 * 4h, two layer norms 4h, MLP 8h^2 + 5h), so the model has
 *     12 L h^2 + 13 L h + (V + P) h + 2h,
 * the tied head counted once: gpt2 124,439,808, gpt2-medium 354,823,168,
 * gpt2-large 774,030,080, gpt2-xl 1,557,611,200 (the released checkpoints'
 * counts), gpt3 174,604,259,328 (96 layers, h 12288, the paper's 175B).
 *
 * Layer norm eps 1e-5 as GPT-2. Differences from GPT-2, chosen for what this
 * graph is for (planning, and training that a second implementation can check
 * step for step): no dropout (GPT-2 drops 0.1 of the embeddings, the attention
 * probabilities and each residual branch; nanoGPT pretrains with 0, and the
 * attention operator has no dropout of its probabilities), GELU is the exact
 * erf form (GPT-2's "gelu_new" is the tanh approximation), and the weights
 * start from PyTorch's module defaults (wte N(0, 1)) rather than GPT-2's
 * N(0, 0.02).
 *
 * Sizes: the named models fix layers, hidden, heads, the position table P
 * (GPT-2's n_positions 1024, GPT-3's 2048) and the vocabulary (50257, GPT-2's
 * BPE), and default the sequence to P; "gpt" takes gpt2's sizes and a position
 * table of the sequence's length. Any of --layers, --hidden, --heads,
 * --seq-len and --vocab overrides them; a sequence longer than P grows the
 * table to it.
 */
#include "zoo_impl.h"

#define GPT_LN_EPS 1e-5
#define GPT_VOCAB 50257

typedef struct gpt_size {
    const char *name;
    int64_t layers, hidden, heads, positions; /* positions 0: the sequence's length */
} gpt_size;

static const gpt_size gpt_sizes[] = {
    {"gpt", 12, 768, 12, 0},
    {"gpt2", 12, 768, 12, 1024},
    {"gpt2-medium", 24, 1024, 16, 1024},
    {"gpt2-large", 36, 1280, 20, 1024},
    {"gpt2-xl", 48, 1600, 25, 1024},
    {"gpt3", 96, 12288, 96, 2048},
};

static sf_graph *gpt_build(const gpt_size *z, const sf_model_options *o, sf_error *err) {
    int64_t layers = o->layers ? o->layers : z->layers;
    int64_t hidden = o->hidden ? o->hidden : z->hidden;
    int64_t heads = o->heads ? o->heads : z->heads;
    int64_t vocab = o->vocab ? o->vocab : GPT_VOCAB;
    int64_t seq = o->seq_len ? o->seq_len : z->positions ? z->positions : 1024;
    int64_t positions = seq > z->positions ? seq : z->positions;

    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, z->name, err) != SF_OK) return NULL;
    if (layers > 100000)
        sf_zoo_fail(b, SF_ERR_RANGE, "layers (%lld) must be at most 100000", (long long)layers);
    if (heads < 1 || hidden % heads)
        sf_zoo_fail(b, SF_ERR_INVALID, "hidden (%lld) must be a multiple of heads (%lld)",
                    (long long)hidden, (long long)heads);

    const int64_t ids_dims[2] = {o->batch, seq};
    sf_tensor_ref tok = sf_zoo_input(b, "tokens", 2, ids_dims, 1);
    sf_tensor_ref pos = sf_zoo_input(b, "positions", 2, ids_dims, 1);
    sf_tensor_ref te = sf_zoo_embedding(b, "wte", tok, vocab, hidden);
    int wte = te.op;
    pos = sf_zoo_embedding(b, "wpe", pos, positions, hidden);
    sf_tensor_ref x = sf_zoo_add(b, "embeddings.add", te, pos);

    sf_op_params attn;
    sf_op_params_default(SF_OP_ATTENTION, &attn);
    attn.attention.embed_dim = hidden;
    attn.attention.heads = heads;
    attn.attention.causal = 1;
    attn.attention.bias = 1;
    for (int64_t l = 0; l < layers && !b->failed; l++) {
        int h = (int)l;
        sf_tensor_ref a = sf_zoo_layernorm(b, sf_zoo_name(b, "h%d.ln_1", h), x, GPT_LN_EPS);
        a = sf_zoo_ref(sf_zoo_op(b, SF_OP_ATTENTION, sf_zoo_name(b, "h%d.attn", h), &attn, &a, 1),
                       0);
        x = sf_zoo_add(b, sf_zoo_name(b, "h%d.attn.add", h), x, a);
        sf_tensor_ref f = sf_zoo_layernorm(b, sf_zoo_name(b, "h%d.ln_2", h), x, GPT_LN_EPS);
        f = sf_zoo_linear(b, sf_zoo_name(b, "h%d.mlp.fc1", h), f, 4 * hidden, 1);
        f = sf_zoo_act(b, SF_OP_GELU, sf_zoo_name(b, "h%d.mlp.gelu", h), f);
        f = sf_zoo_linear(b, sf_zoo_name(b, "h%d.mlp.fc2", h), f, hidden, 1);
        x = sf_zoo_add(b, sf_zoo_name(b, "h%d.mlp.add", h), x, f);
    }
    x = sf_zoo_layernorm(b, "ln_f", x, GPT_LN_EPS);
    x = sf_zoo_linear(b, "lm_head", x, vocab, 0);
    sf_zoo_share(b, x.op, wte);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}

sf_graph *sf_zoo_gpt(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[0], o, err);
}
sf_graph *sf_zoo_gpt2(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[1], o, err);
}
sf_graph *sf_zoo_gpt2_medium(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[2], o, err);
}
sf_graph *sf_zoo_gpt2_large(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[3], o, err);
}
sf_graph *sf_zoo_gpt2_xl(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[4], o, err);
}
sf_graph *sf_zoo_gpt3(const sf_model_options *o, sf_error *err) {
    return gpt_build(&gpt_sizes[5], o, err);
}
