/*
 * zoo_transformer.c - a BERT-base-like encoder trained with a masked-LM head.
 *
 * Token ids and position ids are two index inputs (N, T); their embeddings are
 * added, normalized and dropped out, then 12 post-norm layers each do
 *     x = LN(x + dropout(attention(x)))
 *     x = LN(x + dropout(fc2(gelu(fc1(x)))))
 * with 12 heads, width 768, feed-forward 3072, and a linear over the vocabulary
 * (30522, BERT's WordPiece) feeds softmax with cross-entropy at every position.
 *
 * Differences from BERT, chosen to keep the graph to what matters for placing
 * it: no token-type embedding (2 x 768 weights, one more gather), and the MLM
 * head is a single untied linear (BERT adds a dense + gelu + layernorm transform
 * and ties the decoder to the token embedding). The attention operator holds
 * its Q, K, V and output projections. Dropout p 0.1 and layernorm eps 1e-12 as
 * BERT. The position table has 512 rows (BERT's maximum), or seq_len when that
 * is longer. Options: seq_len (default 128), hidden (default 768; a multiple of
 * the 12 heads; feed-forward 4 x hidden), vocab (default 30522).
 */
#include "zoo_impl.h"

#define TF_LAYERS 12
#define TF_HEADS 12
#define TF_DROPOUT 0.1
#define TF_LN_EPS 1e-12

sf_graph *sf_zoo_transformer(const sf_model_options *o, sf_error *err) {
    int64_t seq = o->seq_len ? o->seq_len : 128;
    int64_t hidden = o->hidden ? o->hidden : 768;
    int64_t vocab = o->vocab ? o->vocab : 30522;
    int64_t ff = 4 * hidden;
    int64_t positions = seq > 512 ? seq : 512;

    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "transformer", err) != SF_OK) return NULL;
    if (hidden % TF_HEADS)
        sf_zoo_fail(b, SF_ERR_INVALID, "hidden (%lld) must be a multiple of %d heads",
                    (long long)hidden, TF_HEADS);

    const int64_t ids_dims[2] = {o->batch, seq};
    sf_tensor_ref tok = sf_zoo_input(b, "tokens", 2, ids_dims, 1);
    sf_tensor_ref pos = sf_zoo_input(b, "positions", 2, ids_dims, 1);
    tok = sf_zoo_embedding(b, "embeddings.word", tok, vocab, hidden);
    pos = sf_zoo_embedding(b, "embeddings.position", pos, positions, hidden);
    sf_tensor_ref x = sf_zoo_add(b, "embeddings.add", tok, pos);
    x = sf_zoo_layernorm(b, "embeddings.ln", x, TF_LN_EPS);
    x = sf_zoo_dropout(b, "embeddings.dropout", x, TF_DROPOUT);

    sf_op_params attn;
    sf_op_params_default(SF_OP_ATTENTION, &attn);
    attn.attention.embed_dim = hidden;
    attn.attention.heads = TF_HEADS;
    attn.attention.causal = 0;
    attn.attention.bias = 1;
    for (int l = 0; l < TF_LAYERS; l++) {
        sf_tensor_ref a = sf_zoo_ref(
            sf_zoo_op(b, SF_OP_ATTENTION, sf_zoo_name(b, "layer%d.attention", l), &attn, &x, 1),
            0);
        a = sf_zoo_dropout(b, sf_zoo_name(b, "layer%d.attention.dropout", l), a, TF_DROPOUT);
        x = sf_zoo_add(b, sf_zoo_name(b, "layer%d.attention.add", l), x, a);
        x = sf_zoo_layernorm(b, sf_zoo_name(b, "layer%d.attention.ln", l), x, TF_LN_EPS);

        sf_tensor_ref f = sf_zoo_linear(b, sf_zoo_name(b, "layer%d.ffn.fc1", l), x, ff, 1);
        f = sf_zoo_act(b, SF_OP_GELU, sf_zoo_name(b, "layer%d.ffn.gelu", l), f);
        f = sf_zoo_linear(b, sf_zoo_name(b, "layer%d.ffn.fc2", l), f, hidden, 1);
        f = sf_zoo_dropout(b, sf_zoo_name(b, "layer%d.ffn.dropout", l), f, TF_DROPOUT);
        x = sf_zoo_add(b, sf_zoo_name(b, "layer%d.ffn.add", l), x, f);
        x = sf_zoo_layernorm(b, sf_zoo_name(b, "layer%d.ffn.ln", l), x, TF_LN_EPS);
    }
    x = sf_zoo_linear(b, "mlm.fc", x, vocab, 1);
    sf_zoo_loss(b, x);
    return sf_zoo_end(b);
}
