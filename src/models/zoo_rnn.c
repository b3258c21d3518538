/*
 * zoo_rnn.c - the unrolled recurrent models of FlexFlow's evaluation: RNN text
 * classification (rnntc), RNN language model (rnnlm) and neural machine
 * translation (nmt).
 *
 * Time is exposed as operators so that the search can place steps apart
 * (FlexFlow's "operation" dimension: layer l on one device, layer l+1 on the
 * next, pipelined over time). The embedded sequence (N, T, E) is cut by one
 * `split` operator along time into chunks of `chunk` steps (the last chunk may
 * be shorter), and each LSTM layer becomes a chain of `lstm` operators, one per
 * chunk: chunk k takes (x_k, h, c) from chunk k-1's outputs 1 and 2 (chunk 0
 * takes x only, or the encoder's final state in the NMT decoder), and layer
 * l+1 chunk k takes layer l chunk k's output 0. All chunks of a layer share
 * chunk 0's weights (sf_graph_share_weights), so a layer's parameters are
 * counted once, as in the real model. Operators are named "<layer>.c<k>" with
 * k the chunk, which covers steps [k*chunk, min((k+1)*chunk, T)).
 *
 * Heads. rnnlm and nmt concatenate the top layer's chunk outputs back to
 * (N, T, H) (concat on axis 1) and apply one linear over the vocabulary and one
 * softmax with cross-entropy. One linear over the whole sequence, rather than a
 * linear per chunk sharing weights, keeps the graph small and loses nothing:
 * the linear's sequence dimension is an attribute dimension the search can
 * still split, and the vocabulary a parameter dimension. rnntc classifies the
 * top layer's final hidden state hT into 2 classes.
 *
 * Defaults: seq_len 40 and chunk 4 (10 chunks; FlexFlow unrolled 40 steps),
 * embedding = hidden = 1024. Vocabulary 10000 for rnntc and rnnlm (the Penn
 * Treebank size), 32768 for nmt ("32K" in the FlexFlow paper; a power of two
 * splits evenly over any power-of-two number of devices). nmt's attention has
 * one head (Luong-style attention of the decoder over the encoder outputs, as
 * GNMT-era NMT used), embed_dim = hidden, with bias.
 */
#include <stdio.h>

#include "zoo_impl.h"

#define NMT_MAX_LAYERS 16

typedef struct rnn_dims {
    int64_t batch, seq, chunk, hidden, vocab;
    int n_chunks;
} rnn_dims;

static int resolve_dims(sf_zoo_builder *b, const sf_model_options *o, int64_t vocab_default,
                        rnn_dims *d) {
    d->batch = o->batch;
    d->seq = o->seq_len ? o->seq_len : SF_ZOO_SEQ_DEFAULT;
    d->chunk = o->chunk ? o->chunk : SF_ZOO_CHUNK_DEFAULT;
    d->hidden = o->hidden ? o->hidden : 1024;
    d->vocab = o->vocab ? o->vocab : vocab_default;
    if (d->chunk > d->seq) d->chunk = d->seq;
    int64_t n = (d->seq + d->chunk - 1) / d->chunk;
    if (n > SF_MAX_SPLIT) {
        sf_zoo_fail(b, SF_ERR_RANGE,
                    "seq_len %lld in chunks of %lld gives %lld chunks, at most %d allowed",
                    (long long)d->seq, (long long)d->chunk, (long long)n, SF_MAX_SPLIT);
        return -1;
    }
    d->n_chunks = (int)n;
    return 0;
}

/* A sequence (N, T, F) -> chunks xs[n_chunks] of (N, <=chunk, F), by one split
 * named `name` (none when there is one chunk). */
static void split_chunks(sf_zoo_builder *b, const char *name, const rnn_dims *d, sf_tensor_ref e,
                         sf_tensor_ref *xs) {
    if (d->n_chunks == 1) {
        xs[0] = e;
        return;
    }
    sf_op_params p;
    sf_op_params_default(SF_OP_SPLIT, &p);
    p.split.axis = 1;
    p.split.parts = d->n_chunks;
    for (int k = 0; k < d->n_chunks; k++) {
        int64_t lo = k * d->chunk, hi = lo + d->chunk;
        p.split.sizes[k] = (hi < d->seq ? hi : d->seq) - lo;
    }
    int id = sf_zoo_op(b, SF_OP_SPLIT, name, &p, &e, 1);
    for (int k = 0; k < d->n_chunks; k++) xs[k] = sf_zoo_ref(id, k);
}

/* Token ids (N, T) -> embedding (N, T, H) -> chunks xs[n_chunks] of (N, <=chunk, H).
 * Returns the embedding's operator. */
static int embed_chunks(sf_zoo_builder *b, const char *pfx, const char *ids_name, const rnn_dims *d,
                        sf_tensor_ref *xs) {
    sf_tensor_ref ids = sf_zoo_input(b, ids_name, 2, (int64_t[]){d->batch, d->seq}, 1);
    sf_tensor_ref e = sf_zoo_embedding(b, sf_zoo_name(b, "%sembed", pfx), ids, d->vocab, d->hidden);
    split_chunks(b, sf_zoo_name(b, "%ssplit", pfx), d, e, xs);
    return e.op;
}

/* One layer unrolled over the chunks. init (h0, c0) may be NULL (zero state).
 * ys receives each chunk's output; state the final (hT, cT). The chunks run in
 * time order, or (reverse) from the last chunk to the first: the backward direction of a
 * bidirectional layer. soapflow's lstm has no reversed-time flag, so each chunk of that direction
 * runs its own steps forward; the cost, the shapes and the dependencies between chunks are a
 * reversed LSTM's, the function the runtime trains is not quite (a chunk of
 * one step, --chunk 1, makes it exact). */
static void lstm_chain(sf_zoo_builder *b, const char *pfx, const rnn_dims *d,
                       const sf_tensor_ref *xs, const sf_tensor_ref *init, int reverse,
                       sf_tensor_ref *ys, sf_tensor_ref *state) {
    sf_op_params p;
    sf_op_params_default(SF_OP_LSTM, &p);
    p.lstm.hidden = d->hidden;
    sf_tensor_ref h = {-1, 0}, c = {-1, 0};
    if (init) {
        h = init[0];
        c = init[1];
    }
    int owner = -1;
    for (int j = 0; j < d->n_chunks; j++) {
        int k = reverse ? d->n_chunks - 1 - j : j;
        sf_tensor_ref in[3] = {xs[k], h, c};
        int n_in = (j == 0 && !init) ? 1 : 3;
        int id = sf_zoo_op(b, SF_OP_LSTM, sf_zoo_name(b, "%s.c%d", pfx, k), &p, in, n_in);
        if (j == 0)
            owner = id;
        else
            sf_zoo_share(b, id, owner);
        ys[k] = sf_zoo_ref(id, 0);
        h = sf_zoo_ref(id, 1);
        c = sf_zoo_ref(id, 2);
    }
    state[0] = h;
    state[1] = c;
}

static void lstm_layer(sf_zoo_builder *b, const char *pfx, const rnn_dims *d,
                       const sf_tensor_ref *xs, const sf_tensor_ref *init, sf_tensor_ref *ys,
                       sf_tensor_ref *state) {
    lstm_chain(b, pfx, d, xs, init, 0, ys, state);
}

/* `layers` stacked layers named "<pfx>lstm<l>". init[l] (may be NULL) starts
 * layer l; final[l] receives its end state. xs is overwritten with the top
 * layer's chunk outputs. */
static void lstm_stack(sf_zoo_builder *b, const char *pfx, const rnn_dims *d, int layers,
                       sf_tensor_ref *xs, sf_tensor_ref (*init)[2], sf_tensor_ref (*final)[2]) {
    for (int l = 0; l < layers; l++) {
        char name[SF_ZOO_NAME_MAX];
        snprintf(name, sizeof name, "%slstm%d", pfx, l);
        sf_tensor_ref ys[SF_MAX_SPLIT], st[2];
        lstm_layer(b, name, d, xs, init ? init[l] : NULL, ys, st);
        for (int k = 0; k < d->n_chunks; k++) xs[k] = ys[k];
        if (final) {
            final[l][0] = st[0];
            final[l][1] = st[1];
        }
    }
}

/* The chunks of a layer back into (N, T, H). */
static sf_tensor_ref join_chunks(sf_zoo_builder *b, const char *name, const rnn_dims *d,
                                 const sf_tensor_ref *ys) {
    if (d->n_chunks == 1) return ys[0];
    return sf_zoo_concat(b, name, ys, d->n_chunks, 1);
}

sf_graph *sf_zoo_rnntc(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "rnntc", err) != SF_OK) return NULL;
    rnn_dims d;
    if (resolve_dims(b, o, 10000, &d) == 0) {
        sf_tensor_ref xs[SF_MAX_SPLIT], final[4][2];
        embed_chunks(b, "", "tokens", &d, xs);
        lstm_stack(b, "", &d, 4, xs, NULL, final);
        sf_tensor_ref y = sf_zoo_linear(b, "fc", final[3][0], 2, 1);
        sf_zoo_loss(b, y);
    }
    return sf_zoo_end(b);
}

sf_graph *sf_zoo_rnnlm(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "rnnlm", err) != SF_OK) return NULL;
    rnn_dims d;
    if (resolve_dims(b, o, 10000, &d) == 0) {
        sf_tensor_ref xs[SF_MAX_SPLIT];
        embed_chunks(b, "", "tokens", &d, xs);
        lstm_stack(b, "", &d, 2, xs, NULL, NULL);
        sf_tensor_ref y = join_chunks(b, "lstm1.concat", &d, xs);
        y = sf_zoo_linear(b, "fc", y, d.vocab, 1);
        sf_zoo_loss(b, y);
    }
    return sf_zoo_end(b);
}

sf_graph *sf_zoo_nmt(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "nmt", err) != SF_OK) return NULL;
    rnn_dims d;
    if (resolve_dims(b, o, 32768, &d) == 0) {
        /* layers: LSTM layers of the encoder and of the decoder each (default 2;
         * GNMT has 4 and 4) */
        if (o->layers > NMT_MAX_LAYERS) {
            sf_zoo_fail(b, SF_ERR_RANGE, "nmt: layers %lld, at most %d", (long long)o->layers,
                        NMT_MAX_LAYERS);
            return sf_zoo_end(b);
        }
        int layers = o->layers ? (int)o->layers : 2;
        sf_tensor_ref src[SF_MAX_SPLIT], tgt[SF_MAX_SPLIT], enc_state[NMT_MAX_LAYERS][2];
        embed_chunks(b, "enc.", "src_tokens", &d, src);
        lstm_stack(b, "enc.", &d, layers, src, NULL, enc_state);
        sf_tensor_ref memory = join_chunks(b, "enc.concat", &d, src);

        embed_chunks(b, "dec.", "tgt_tokens", &d, tgt);
        lstm_stack(b, "dec.", &d, layers, tgt, enc_state, NULL);
        sf_tensor_ref query = join_chunks(b, "dec.concat", &d, tgt);

        sf_op_params p;
        sf_op_params_default(SF_OP_ATTENTION, &p);
        p.attention.embed_dim = d.hidden;
        p.attention.heads = 1;
        p.attention.causal = 0;
        p.attention.bias = 1;
        sf_tensor_ref qm[2] = {query, memory};
        sf_tensor_ref y = sf_zoo_ref(sf_zoo_op(b, SF_OP_ATTENTION, "attention", &p, qm, 2), 0);
        y = sf_zoo_linear(b, "fc", y, d.vocab, 1);
        sf_zoo_loss(b, y);
    }
    return sf_zoo_end(b);
}

/*
 * gnmt: GNMT v2 as NVIDIA's PyTorch recipe builds it (DeepLearningExamples,
 * PyTorch/Translation/GNMT, seq2seq/models/{encoder,decoder}.py), the model of
 * its published throughputs (bench/gpu_reference.py):
 *
 *   encoder  layer 0 bidirectional (a forward and a reversed LSTM over the
 *            embedded source, outputs concatenated: 2H), layer 1 2H -> H,
 *            layers 2.. H -> H with a residual add;
 *   decoder  layer 0 over the embedded target, whose outputs query one
 *            attention over the encoder's outputs; every later layer reads
 *            [its input, the attention context] (2H), layers 2.. with a
 *            residual add; the decoder starts from a zero state (GNMT v2 does
 *            not pass the encoder's state);
 *   head     linear over the vocabulary and softmax with cross-entropy;
 *   the encoder and the decoder share one embedding (the recipe's default
 *   share_embedding), 160 M parameters at vocabulary 32768.
 *
 * What differs: the attention is soapflow's (one head with projections: Luong
 * style) where GNMT's is Bahdanau's normalized additive score, a few percent of
 * the FLOPs either way; dropout (0.2 before each layer) and label smoothing are
 * left out; the reversed direction is written as above (lstm_chain). Layers: 4
 * a side by default (GNMT), at least 2; chunks as the other RNNs.
 */
sf_graph *sf_zoo_gnmt(const sf_model_options *o, sf_error *err) {
    sf_zoo_builder zb, *b = &zb;
    if (sf_zoo_begin(b, "gnmt", err) != SF_OK) return NULL;
    rnn_dims d;
    if (resolve_dims(b, o, 32768, &d) == 0) {
        int layers = o->layers ? (int)o->layers : 4;
        if (layers < 2 || layers > NMT_MAX_LAYERS) {
            sf_zoo_fail(b, SF_ERR_RANGE, "gnmt: layers %d, from 2 to %d", layers, NMT_MAX_LAYERS);
            return sf_zoo_end(b);
        }
        int n = d.n_chunks;
        sf_tensor_ref src[SF_MAX_SPLIT], fwd[SF_MAX_SPLIT], rev[SF_MAX_SPLIT], st[2];
        int enc_embed = embed_chunks(b, "enc.", "src_tokens", &d, src);
        lstm_chain(b, "enc.lstm0", &d, src, NULL, 0, fwd, st);
        lstm_chain(b, "enc.lstm0r", &d, src, NULL, 1, rev, st);
        for (int k = 0; k < n; k++)
            src[k] = sf_zoo_concat(b, sf_zoo_name(b, "enc.lstm0.cat.c%d", k),
                                   (sf_tensor_ref[]){fwd[k], rev[k]}, 2, 2);
        for (int l = 1; l < layers; l++) {
            char name[SF_ZOO_NAME_MAX];
            snprintf(name, sizeof name, "enc.lstm%d", l);
            sf_tensor_ref ys[SF_MAX_SPLIT];
            lstm_layer(b, name, &d, src, NULL, ys, st);
            for (int k = 0; k < n; k++)
                src[k] = l >= 2
                             ? sf_zoo_add(b, sf_zoo_name(b, "%s.res.c%d", name, k), ys[k], src[k])
                             : ys[k];
        }
        sf_tensor_ref memory = join_chunks(b, "enc.concat", &d, src);

        sf_tensor_ref tgt[SF_MAX_SPLIT], ctx[SF_MAX_SPLIT];
        sf_zoo_share(b, embed_chunks(b, "dec.", "tgt_tokens", &d, tgt), enc_embed);
        lstm_layer(b, "dec.lstm0", &d, tgt, NULL, tgt, st);
        sf_tensor_ref query = join_chunks(b, "dec.lstm0.concat", &d, tgt);
        sf_op_params p;
        sf_op_params_default(SF_OP_ATTENTION, &p);
        p.attention.embed_dim = d.hidden;
        p.attention.heads = 1;
        p.attention.causal = 0;
        p.attention.bias = 1;
        sf_tensor_ref qm[2] = {query, memory};
        sf_tensor_ref a = sf_zoo_ref(sf_zoo_op(b, SF_OP_ATTENTION, "attention", &p, qm, 2), 0);
        split_chunks(b, "attention.split", &d, a, ctx);
        for (int l = 1; l < layers; l++) {
            char name[SF_ZOO_NAME_MAX];
            snprintf(name, sizeof name, "dec.lstm%d", l);
            sf_tensor_ref in[SF_MAX_SPLIT], ys[SF_MAX_SPLIT];
            for (int k = 0; k < n; k++)
                in[k] = sf_zoo_concat(b, sf_zoo_name(b, "%s.in.c%d", name, k),
                                      (sf_tensor_ref[]){tgt[k], ctx[k]}, 2, 2);
            lstm_layer(b, name, &d, in, NULL, ys, st);
            for (int k = 0; k < n; k++)
                tgt[k] = l >= 2
                             ? sf_zoo_add(b, sf_zoo_name(b, "%s.res.c%d", name, k), ys[k], tgt[k])
                             : ys[k];
        }
        sf_tensor_ref y = join_chunks(b, "dec.concat", &d, tgt);
        y = sf_zoo_linear(b, "fc", y, d.vocab, 1);
        sf_zoo_loss(b, y);
    }
    return sf_zoo_end(b);
}
