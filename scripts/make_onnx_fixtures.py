#!/usr/bin/python3
"""Make the ONNX files soapflow's importer is tested on, with Debian's PyTorch.

    /usr/bin/python3 scripts/make_onnx_fixtures.py            # tests/fixtures/onnx/
    /usr/bin/python3 scripts/make_onnx_fixtures.py --big DIR  # torchvision models into DIR

Needs Debian's python3-torch and python3-torchvision (and python3-onnx for
--check): `apt-get install python3-torch python3-torchvision python3-onnx`. They
are not build dependencies of soapflow: the small files this writes are
committed, so the build and the tests never need PyTorch.

Default: small models exported once with torch.onnx.export into
tests/fixtures/onnx/ (1.4 MB in all), each with <name>.json beside it:
the trainable parameter count PyTorch gives, one input batch with its labels and
the cross-entropy loss PyTorch computes on it (train mode: batch norm on the
batch's statistics, as soapflow's kernels do; no dropout), so a test can check
that the imported graph and weights compute the same loss.

  lenet5         the zoo's LeNet-5, layer for layer (opset 13)
  lenet5_op9     the same at opset 9, exported without its parameters (they are graph
                 inputs: the graph imports, the weights do not)
  resblock       a ResNet basic block with a downsampling shortcut, batch norm kept
                 (exported in training mode, as torchvision's models below)
  lstm_lm        an LSTM language model: embedding, 2-layer nn.LSTM (batch first),
                 linear over the vocabulary
  transformer    nn.TransformerEncoderLayer between an embedding and a linear head
                 (opset 17: LayerNormalization; the attention as torch exports it)
  transformer_op14
                 the same with GELU at torch's default opset, 14: layer normalization and
                 GELU spelled out in ReduceMean, Sub, Pow, Sqrt, Div, Erf ...
  gpt            a GPT-2-style decoder (the zoo's gpt): token and position embeddings
                 (two inputs, tokens and positions), 2 pre-norm blocks of
                 nn.MultiheadAttention with a causal attn_mask and a GELU MLP, a final
                 layer norm, the LM head tied to the token embedding (F.linear(x,
                 wte.weight)); opset 17, constant folding on (torch's default: the head
                 reads a transposed copy of wte)
  gpt_op14_nofold
                 the same at opset 14 without constant folding (the head reads
                 Transpose(wte); layer norm and GELU spelled out)
  nanogpt        a GPT-2-style decoder written as nanoGPT's model.py (NanoGPT below: the
                 attention in products, masked_fill of a registered causal buffer, the
                 positions an arange, the LM head tied by weight = wte.weight), exported
                 in training mode at opset 17 (dropout 0, nanoGPT's default)
  nanogpt_op13   the same at opset 13 (layer norm and GELU in steps)
  nanogpt_hf_drop
                 Hugging Face's spelling (three q, k, v Linears, torch.where of a
                 boolean buffer and finfo.min, the scores divided by sqrt(head_dim)),
                 dropout 0.1 everywhere (attention, residuals, embeddings), opset 13
  mha_train      nn.TransformerEncoderLayer with its default dropout 0.1, exported in
                 training mode (opset 17)
  bert_op13_train, bert_op17_train
                 a BERT-style encoder in Hugging Face's spelling (BertEncoder below: the
                 projections' shapes read by x.size(), position_ids a sliced buffer, token
                 types a second input, no mask), 2 blocks of width 32, dropout 0.1,
                 training mode, opsets 13 and 17
                 (these four: loss with dropout off, "dropout": true when there is some)
  einsum_op13    torch.einsum products (EinsumLM below: "bqd,bkd->bqk", "bqk,bkd->bqd",
                 "bkq,bkd->bqd"), eval mode, opset 13
  einsum_train_op17
                 the same in training mode at opset 17
  convt_op13     nn.ConvTranspose2d in a U-Net-style decoder (UpDecoder below: stride 2,
                 padding 1, output_padding 1; kernel 2 stride 2 without bias), eval, opset 13
  convt_train_op17
                 the same in training mode at opset 17
  resize_op13    nn.Upsample (nearest, scale factor 2) and F.interpolate (bilinear to a
                 size, with and without align_corners; ResizeNet below), eval, opset 13
  resize_train_op17
                 the same in training mode at opset 17
  gru_op13       a GRU language model (GruLM below: embedding, 2-layer nn.GRU batch first,
                 linear head; torch exports one GRU node a layer, linear_before_reset=1),
                 eval mode, opset 13 (OPS_JOBS)
  gru_op17_train the same in training mode at opset 17
  gelutanh_op13_train
                 GELU's tanh form (GeluTanh below: F.gelu(approximate="tanh") and Hugging
                 Face's gelu_new written out), training mode, opset 13 (OPS_JOBS)
  gelutanh_op17  the same in eval mode at opset 17
  maskfill_op13_train
                 masked_fill and torch.where with constant masks outside attention
                 (MaskedFill below: a mask compared from a float buffer, a boolean
                 buffer), training mode, opset 13 (OPS_JOBS)
  maskfill_op17  the same in eval mode at opset 17
  buffers_op17_train
                 registered buffers as Add and Mul operands (Buffers below: a sinusoidal
                 position encoding, a fixed per-feature scale) beside a learned
                 nn.Parameter, training mode, opset 17, with buffers_op17_train.buffers.json
                 (the names of named_buffers(): held fixed, not counted)
  misc_op9, misc_op13
                 activations and shapes: LeakyReLU, ReLU6 (Clip by attributes at 9, by
                 inputs at 13), Sigmoid, Tanh, a product, a concatenation, average and
                 ceil-mode max pooling, log-softmax at the end

--big DIR: issue 28's 27 architectures (BIG_TORCHVISION below: 21 torchvision models
from alexnet to vit_b_16, swin_t and maxvit_t; and six modules users write: BertEncoder at
BERT-base's sizes, NanoGPT at GPT-2's sizes (124,439,808 parameters, the zoo's gpt2; a 550
MB file), an nn.TransformerEncoder stack, RnnLM with nn.LSTM (the zoo's rnnlm) and with
nn.GRU, and a UNet), exported in training mode (batch norm keeps its parameters), with
DIR/expected.json holding PyTorch's parameter count of each (3.7 GB in all; files already
in DIR are kept, delete one to remake it; --only NAMES exports those alone);
scripts/check_onnx_models.sh checks soapflow's import against it and runs `soapflow
search` on each.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "onnx")
BATCH = 2


class LeNet5(nn.Module):
    """The zoo's lenet5 (src/models/zoo_cnn.c): 61,706 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ResBlock(nn.Module):
    """A torchvision BasicBlock with a downsample, then a classifier."""

    def __init__(self, cin=8, cout=16, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False),
                                        nn.BatchNorm2d(cout))
        self.fc = nn.Linear(cout, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y = F.relu(y + self.downsample(x))
        y = F.adaptive_avg_pool2d(y, 1)
        return self.fc(torch.flatten(y, 1))


class LstmLM(nn.Module):
    def __init__(self, vocab=100, hidden=32, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        return self.fc(y)


class GruLM(nn.Module):
    """A GRU language model: embedding, 2-layer nn.GRU (batch first; torch exports
    linear_before_reset=1), linear over the vocabulary."""

    def __init__(self, vocab=40, d=16, hidden=24, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, _ = self.gru(self.embed(tokens))
        return self.fc(y)


class GeluTanh(nn.Module):
    """GELU's tanh form both ways: F.gelu(approximate="tanh") after one linear
    layer, Hugging Face's gelu_new written out (0.5 * x * (1 + tanh(...)), with
    torch.pow) after the next, then a linear head."""

    def __init__(self, d=8, ff=16, classes=5):
        super().__init__()
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, ff)
        self.head = nn.Linear(ff, classes)

    def forward(self, x):
        y = F.gelu(self.fc1(x), approximate="tanh")
        y = self.fc2(y)
        y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3.0))))
        return self.head(y)


class TransformerLM(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, ff=64, activation="relu"):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                                activation=activation)
        self.fc = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.fc(self.layer(self.embed(tokens)))


class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        a = self.ln_1(x)
        x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln_2(x))))


class GptLM(nn.Module):
    """The zoo's gpt (src/models/zoo_gpt.c) at vocabulary 50, width 32, 4 heads, 2
    blocks, 10 positions: 27,392 parameters, the tied head counted once."""

    def __init__(self, vocab=50, d=32, heads=4, layers=2, t=10):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), 1))
        self.h = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, tokens, positions):
        x = self.wte(tokens) + self.wpe(positions)
        for b in self.h:
            x = b(x, self.mask)
        return F.linear(self.ln_f(x), self.wte.weight)


def gpt_fixture(outdir, name, m, opset, fold):
    """GptLM exported with its two inputs, and its loss on one batch."""
    tokens = torch.randint(0, 50, (BATCH, 10))
    positions = torch.arange(10).repeat(BATCH, 1)
    m.eval()
    path = os.path.join(outdir, name + ".onnx")
    torch.onnx.export(m, (tokens, positions), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.EVAL, do_constant_folding=fold,
                      input_names=["tokens", "positions"], output_names=["output"],
                      dynamic_axes={"tokens": {0: "batch"}, "positions": {0: "batch"}})
    torch.manual_seed(1)
    with torch.no_grad():
        rows = m(tokens, positions).reshape(-1, 50)
    labels = torch.randint(0, 50, (rows.shape[0],))
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump({"batch": BATCH, "inputs": {"tokens": tokens.flatten().tolist(),
                                              "positions": positions.flatten().tolist()},
                   "labels": labels.tolist(), "loss": float(F.cross_entropy(rows, labels)),
                   "params": params(m)}, f)
        f.write("\n")
    print("%-12s opset %2d  %8d params  %7d bytes" % (name, opset, params(m),
                                                      os.path.getsize(path)))


class NanoAttention(nn.Module):
    """Causal self-attention as nanoGPT (and minGPT, Hugging Face's GPT-2) write it:
    products and a softmax, the heads reshaped and transposed, a registered causal
    buffer. packed: one c_attn Linear split into q, k, v (else three Linears);
    hf: Hugging Face's spelling (a boolean buffer, torch.where(mask, att, -big),
    the scores divided by sqrt(head_dim)) instead of nanoGPT's (masked_fill of
    mask == 0 with -inf, multiplied by 1 / sqrt(head_dim))."""

    def __init__(self, d, heads, t, packed, dropout, hf):
        super().__init__()
        self.heads, self.d, self.packed, self.hf = heads, d, packed, hf
        if packed:
            self.c_attn = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        tril = torch.tril(torch.ones(t, t))
        if hf:
            self.register_buffer("bias", tril.bool().view(1, 1, t, t))
        else:
            self.register_buffer("bias", tril.view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.size()
        if self.packed:
            q, k, v = self.c_attn(x).split(self.d, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        hd = C // self.heads
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        if self.hf:
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
            big = torch.tensor(torch.finfo(att.dtype).min, dtype=att.dtype)
            att = torch.where(self.bias[:, :, :T, :T], att, big)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class NanoBlock(nn.Module):
    def __init__(self, d, heads, t, packed, dropout, hf):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = NanoAttention(d, heads, t, packed, dropout, hf)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(F.gelu(self.c_fc(self.ln_2(x)))))


class NanoGPT(nn.Module):
    """A GPT-2-style decoder written as nanoGPT's model.py: token and position
    embeddings (the positions an arange inside forward), blocks of NanoAttention
    and a GELU MLP, a final layer norm, an LM head Linear whose weight is the
    token embedding's (weight tying). At vocabulary 50, width 32, 4 heads, 2
    blocks, 10 positions: 27,392 parameters, the zoo's gpt of that size."""

    def __init__(self, vocab=50, d=32, heads=4, layers=2, t=10, packed=True, dropout=0.0,
                 hf=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([NanoBlock(d, heads, t, packed, dropout, hf)
                                for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        _, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def train_fixture(outdir, name, m, opset, vocab=50, t=10):
    """A module of token ids exported in training mode (dropout kept as Dropout
    nodes, no constant folding), and its loss on one batch with dropout off (eval
    mode: none of these has batch norm, so that is the loss of the weights)."""
    tokens = torch.randint(0, vocab, (BATCH, t))
    m.train()
    path = os.path.join(outdir, name + ".onnx")
    torch.onnx.export(m, (tokens,), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["tokens"], output_names=["output"],
                      dynamic_axes={"tokens": {0: "batch"}})
    m.eval()
    torch.manual_seed(1)
    with torch.no_grad():
        rows = m(tokens).reshape(-1, vocab)
    labels = torch.randint(0, vocab, (rows.shape[0],))
    inputs = {"tokens": tokens.flatten().tolist()}
    if isinstance(m, NanoGPT):  # soapflow's positions input, as the zoo's gpt has
        inputs["positions"] = torch.arange(t).repeat(BATCH, 1).flatten().tolist()
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump({"batch": BATCH, "inputs": inputs, "labels": labels.tolist(),
                   "loss": float(F.cross_entropy(rows, labels)), "params": params(m),
                   "dropout": any(isinstance(x, nn.Dropout) and x.p > 0 for x in m.modules())},
                  f)
        f.write("\n")
    print("%-12s opset %2d  %8d params  %7d bytes" % (name, opset, params(m),
                                                      os.path.getsize(path)))


def bert_fixture(outdir, name, opset, vocab=50, t=10, classes=5):
    """A small BertEncoder (below) exported in training mode (dropout 0.1 kept),
    with its two inputs (token ids, token types), and its loss on one batch with
    dropout off; "positions" is soapflow's input for the position_ids slice."""
    torch.manual_seed(600 + opset)  # its own seed, so that --only can remake one
    m = BertEncoder(vocab=vocab, d=32, heads=4, layers=2, ff=64, t=16, classes=classes)
    ids = torch.randint(0, vocab, (BATCH, t))
    types = torch.randint(0, 2, (BATCH, t))
    m.train()
    path = os.path.join(outdir, name + ".onnx")
    torch.onnx.export(m, (ids, types), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input_ids", "token_type_ids"], output_names=["output"],
                      dynamic_axes={"input_ids": {0: "batch"}, "token_type_ids": {0: "batch"}})
    m.eval()
    torch.manual_seed(1)
    with torch.no_grad():
        rows = m(ids, types)
    labels = torch.randint(0, classes, (rows.shape[0],))
    inputs = {"input_ids": ids.flatten().tolist(), "token_type_ids": types.flatten().tolist(),
              "positions": torch.arange(t).repeat(BATCH, 1).flatten().tolist()}
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump({"batch": BATCH, "inputs": inputs, "labels": labels.tolist(),
                   "loss": float(F.cross_entropy(rows, labels)), "params": params(m),
                   "dropout": True}, f)
        f.write("\n")
    print("%-12s opset %2d  %8d params  %7d bytes" % (name, opset, params(m),
                                                      os.path.getsize(path)))


class TrainTransformerLM(nn.Module):
    """nn.TransformerEncoderLayer with its defaults (dropout 0.1), batch first."""

    def __init__(self, vocab=50, d=32, heads=4, ff=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layer = nn.TransformerEncoderLayer(d, heads, ff, batch_first=True)
        self.fc = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.fc(self.layer(self.embed(tokens)))


class EinsumLM(nn.Module):
    """Products written with torch.einsum (exported as Einsum): B transposed,
    plain, and A transposed; each a batched matmul in soapflow."""

    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.fc = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        s = torch.einsum("bqd,bkd->bqk", self.q(x), self.k(x))
        y = torch.einsum("bqk,bkd->bqd", s, self.v(x))
        z = torch.einsum("bkq,bkd->bqd", s, y)
        return self.fc(z)


class UpDecoder(nn.Module):
    """A U-Net-style decoder: a strided conv down, nn.ConvTranspose2d up (stride 2,
    padding 1, output_padding 1; and kernel 2, stride 2 without bias)."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(4, 2, 2, stride=2, bias=False)
        self.fc = nn.Linear(2 * 16 * 16, 10)

    def forward(self, x):
        y = F.relu(self.up1(F.relu(self.down(x))))
        return self.fc(torch.flatten(self.up2(y), 1))


class ResizeNet(nn.Module):
    """nn.Upsample and F.interpolate: nearest x2 by scale factor, bilinear to a size
    (12 -> 15: a ratio that is not whole), bilinear with align_corners to a size."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 20 * 20, 10)

    def forward(self, x):
        y = self.conv2(self.up(F.relu(self.conv1(x))))
        y = F.interpolate(y, size=(15, 15), mode="bilinear", align_corners=False)
        y = F.interpolate(y, size=(20, 20), mode="bilinear", align_corners=True)
        return self.fc(torch.flatten(y, 1))


class Misc(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 8, 1)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        a = F.leaky_relu(self.conv(x), 0.1)
        b = torch.sigmoid(self.conv_b(x)) * torch.tanh(self.conv_b(x))
        y = torch.cat([a, b], 1)
        y = F.avg_pool2d(y, 2, count_include_pad=False)
        y = F.max_pool2d(y, 3, stride=2, ceil_mode=True)
        y = F.relu6(self.fc1(torch.flatten(y, 1)))
        return F.log_softmax(self.fc2(y), dim=1)


class ConstOps(nn.Module):
    """Element-wise operators with constant operands: a learned position embedding
    (1, T, D) added, literals (x * 0.5 - 1, x / 4, 2 - x), a learned per-feature
    scale (D,) multiplied from the left, a learned scalar, and a per-channel
    learned scale and shift of a convolution's output ((1, C, 1, 1) and (C, 1, 1))
    on a second path."""

    def __init__(self, t=4, d=8, classes=5):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.randn(1, t, d) * 0.1)
        self.gamma = nn.Parameter(torch.rand(d) + 0.5)
        self.temp = nn.Parameter(torch.tensor(1.5))
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.cscale = nn.Parameter(torch.rand(1, 3, 1, 1) + 0.5)
        self.cshift = nn.Parameter(torch.randn(3, 1, 1) * 0.1)
        self.fc = nn.Linear(d, classes)
        self.fc_conv = nn.Linear(3 * t * d, t * classes)
        self.t, self.classes = t, classes

    def forward(self, x):
        y = x + self.pos_embedding
        y = (y * 0.5 - 1.0) / 4
        y = 2.0 - self.gamma * y
        y = y * self.temp
        z = self.conv(x.unsqueeze(1)) * self.cscale + self.cshift  # (N, 3, T, D)
        z = self.fc_conv(torch.flatten(z, 1)).reshape(-1, self.t, self.classes)
        return self.fc(y) + z


class ClassToken(nn.Module):
    """ViT's head end: tokens embedded by a linear layer, a learned class token
    (1, 1, D) concatenated in front (Expand + Concat), learned positions added
    (Expanded over the batch first, as some ViT code writes it),
    a layer norm, and the class token's row classified."""

    def __init__(self, t=4, f=6, d=8, classes=5):
        super().__init__()
        self.embed = nn.Linear(f, d)
        self.class_token = nn.Parameter(torch.randn(1, 1, d) * 0.5)
        self.pos_embedding = nn.Parameter(torch.randn(1, t + 1, d) * 0.1)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        y = self.embed(x)
        y = torch.cat([self.class_token.expand(y.shape[0], -1, -1), y], dim=1)
        y = self.ln(y + self.pos_embedding.expand(y.shape[0], -1, -1))
        return self.head(y[:, 0])


class Permutes(nn.Module):
    """Transposed layouts: a ConvNeXt block (depthwise convolution, permute to
    NHWC, LayerNorm over the channels, a pointwise MLP as linear layers, a learned
    layer scale, permute back, residual) and ShuffleNet's channel shuffle
    (reshape to (N, g, C/g, H, W), transpose the group dimensions, reshape back),
    then a classifier."""

    def __init__(self, c=8, classes=5):
        super().__init__()
        self.dwconv = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pwconv1 = nn.Linear(c, 2 * c)
        self.pwconv2 = nn.Linear(2 * c, c)
        self.gamma = nn.Parameter(torch.rand(c) + 0.5)
        self.conv = nn.Conv2d(c, c, 1, groups=2)
        self.fc = nn.Linear(c * 4 * 4, classes)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        x = x + (self.gamma * y).permute(0, 3, 1, 2)
        n, c, h, w = x.shape
        x = x.reshape(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.fc(torch.flatten(F.relu(self.conv(x)), 1))


class Pads(nn.Module):
    """Zero padding: Inception-v3's and DenseNet's nn.AvgPool2d(3, 1, 1,
    count_include_pad=True) (exported as Pad + AveragePool, folded into the pool),
    F.pad before a convolution (folded into its padding), an asymmetric
    nn.ZeroPad2d((1, 0, 2, 0)) and a pad before a max pool (a pad operator)."""

    def __init__(self, c=3, classes=5):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=True)
        self.conv = nn.Conv2d(c, 4, 3)
        self.zpad = nn.ZeroPad2d((1, 0, 2, 0))
        self.fc = nn.Linear(4 * 6 * 5, classes)

    def forward(self, x):
        y = self.conv(F.pad(self.pool(x), (1, 1, 1, 1)))
        y = F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 2)
        y = self.zpad(y)
        return self.fc(torch.flatten(y, 1))


class Means(nn.Module):
    """ReduceMean of activations: MnasNet's head x.mean([2, 3]), a mean over the
    last axis that is not a layer normalization's (keepdim, then broadcast back
    by a product), beside an nn.LayerNorm (spelled out in ReduceMean steps before
    opset 17), and a mean over tokens x.mean(1)."""

    def __init__(self, c=4, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.ln = nn.LayerNorm(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = self.conv(x)                            # (N, C, H, W)
        y = y * torch.sigmoid(y.mean(-1, keepdim=True))
        t = self.ln(torch.flatten(y, 2).transpose(1, 2))  # (N, HW, C)
        return self.fc(t.mean(1) + y.mean([2, 3]))


class HardActs(nn.Module):
    """MobileNet-v3's activations: nn.Hardswish after a convolution, a
    squeeze-excitation gate through nn.Hardsigmoid, and x * hardsigmoid(x) written
    out; (opset 13 has no HardSwish: torch writes it as HardSigmoid and Mul)."""

    def __init__(self, c=4, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.fc1 = nn.Conv2d(c, 2, 1)
        self.fc2 = nn.Conv2d(2, c, 1)
        self.fc = nn.Linear(c * 16, classes)

    def forward(self, x):
        y = F.hardswish(self.conv(x) * 3.0)
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(y, 1)))))
        y = y * s
        y = y * F.hardsigmoid(y)
        return self.fc(torch.flatten(y, 1))


class WindowMask(nn.Module):
    """Swin's constant arithmetic on shapes: a causal mask built by index
    assignment from the length (mask[i, i + 1:] = -inf on torch.zeros(T, T):
    ScatterND on constants) and added to the scores of a products-and-softmax
    attention, and the window padding pad = (w - T % w) % w (Mod) of F.pad before
    a per-token classifier."""

    def __init__(self, d=8, heads=2, window=4, classes=5):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = [y.view(n, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v)]
        mask = torch.zeros(t, t)
        for i in range(t - 1):  # the last row masks nothing
            mask[i, i + 1:] = float("-inf")
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads) + mask
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(n, t, d)
        y = self.proj(y)
        pad = (self.window - t % self.window) % self.window
        return self.fc(F.pad(y, (0, 0, 0, pad)))


class MaskedFill(nn.Module):
    """Constant masks on activations outside attention: x.masked_fill(mask, v) with
    the mask compared from a float buffer (Equal folds to a boolean constant), and
    torch.where(mask, x, v) of a boolean buffer (1, T, 1), which fills where the
    mask is false. The gradient is zero where a mask fills."""

    def __init__(self, t=4, d=8, classes=5):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        keep = (torch.rand(t, d) > 0.3).float()
        self.register_buffer("keep", keep)
        self.register_buffer("sel", torch.tensor([True, False, True, True]).reshape(1, t, 1))
        self.fc2 = nn.Linear(d, classes)

    def forward(self, x):
        y = self.fc1(x).masked_fill(self.keep == 0, -2.0)
        y = torch.where(self.sel, torch.tanh(y), torch.tensor(0.5))
        return self.fc2(y)


class Buffers(nn.Module):
    """Registered buffers as operands: a fixed sinusoidal position encoding (1, T, D)
    added and a fixed per-feature scale (D,) multiplied, beside a learned position
    embedding (an nn.Parameter). ONNX writes buffers and parameters alike; the
    sidecar file names the buffers (SIDECAR)."""

    SIDECAR = True

    def __init__(self, t=4, d=8, classes=5):
        super().__init__()
        pos = torch.arange(t).float()[:, None]
        freq = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe = torch.zeros(t, d)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)
        self.register_buffer("pe", pe[None])
        self.register_buffer("fscale", torch.linspace(0.5, 1.5, d))
        self.learned = nn.Parameter(torch.randn(1, t, d) * 0.1)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        y = (x + self.pe) * self.fscale + self.learned
        return self.fc(torch.relu(y))


def params(m):
    return sum(p.numel() for p in m.parameters())


def export(m, x, path, opset, training=False, names=("input",), weights=True):
    m.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(m, (x,), path, opset_version=opset, training=mode,
                      do_constant_folding=not training, input_names=list(names),
                      output_names=["output"], dynamic_axes={names[0]: {0: "batch"}},
                      export_params=weights)


def expectation(m, x, classes, path):
    """PyTorch's loss on one batch, in train mode (batch statistics, no dropout).
    A model ending in log_softmax gives log-probabilities, on which cross-entropy
    is the same as on the logits (soapflow's softmax_ce takes the logits)."""
    torch.manual_seed(1)
    m.train(True)
    with torch.no_grad():
        out = m(x)
    rows = out.reshape(-1, classes)
    labels = torch.randint(0, classes, (rows.shape[0],))
    loss = F.cross_entropy(rows, labels)
    with open(path, "w") as f:
        json.dump({"batch": x.shape[0], "input_shape": list(x.shape),
                   "input": [round(float(v), 7) for v in x.flatten().tolist()],
                   "labels": labels.tolist(), "loss": float(loss), "params": params(m)},
                  f)
        f.write("\n")


# The idioms of issue 28's operators: name, module class, input shape (floats)
# or ("tokens", vocabulary, length), opset, training-mode export, classes per row.
# Each is built under its own seed, so one can be remade alone (--only).
OPS_JOBS = [
    ("constops_op13", ConstOps, (BATCH, 4, 8), 13, False, 5),
    ("constops_op17_train", ConstOps, (BATCH, 4, 8), 17, True, 5),
    ("clstoken_op13_train", ClassToken, (BATCH, 4, 6), 13, True, 5),
    ("clstoken_op17", ClassToken, (BATCH, 4, 6), 17, False, 5),
    ("permute_op13", Permutes, (BATCH, 8, 4, 4), 13, False, 5),
    ("permute_op17_train", Permutes, (BATCH, 8, 4, 4), 17, True, 5),
    ("pad_op13_train", Pads, (BATCH, 3, 6, 6), 13, True, 5),
    ("pad_op17", Pads, (BATCH, 3, 6, 6), 17, False, 5),
    ("mean_op13", Means, (BATCH, 3, 4, 5), 13, False, 5),
    ("mean_op17_train", Means, (BATCH, 3, 4, 5), 17, True, 5),
    ("hard_op13_train", HardActs, (BATCH, 3, 4, 4), 13, True, 5),
    ("hard_op17", HardActs, (BATCH, 3, 4, 4), 17, False, 5),
    ("gelutanh_op13_train", GeluTanh, (BATCH, 4, 8), 13, True, 5),
    ("gelutanh_op17", GeluTanh, (BATCH, 4, 8), 17, False, 5),
    ("gru_op13", GruLM, ("tokens", 40, 6), 13, False, 40),
    ("gru_op17_train", GruLM, ("tokens", 40, 6), 17, True, 40),
    ("winmask_op13_train", WindowMask, (BATCH, 6, 8), 13, True, 5),
    ("winmask_op17", WindowMask, (BATCH, 6, 8), 17, False, 5),
    ("maskfill_op13_train", MaskedFill, (BATCH, 4, 8), 13, True, 5),
    ("maskfill_op17", MaskedFill, (BATCH, 4, 8), 17, False, 5),
    ("buffers_op17_train", Buffers, (BATCH, 4, 8), 17, True, 5),
]


BERT_JOBS = [("bert_op13_train", 13), ("bert_op17_train", 17)]


def ops_fixtures(outdir, only):
    os.makedirs(outdir, exist_ok=True)
    for name, opset in BERT_JOBS:
        if only and name in only:
            bert_fixture(outdir, name, opset)
    for k, (name, cls, shape, opset, training, classes) in enumerate(OPS_JOBS):
        if only and name not in only:
            continue
        torch.manual_seed(100 + k)
        m = cls()
        tokens = shape[0] == "tokens"
        x = torch.randint(0, shape[1], (BATCH, shape[2])) if tokens else torch.randn(*shape)
        path = os.path.join(outdir, name + ".onnx")
        export(m, x, path, opset, training, names=("tokens",) if tokens else ("input",))
        expectation(m, x, classes, os.path.join(outdir, name + ".json"))
        if getattr(cls, "SIDECAR", False):  # what ONNX cannot say: which are buffers
            with open(os.path.join(outdir, name + ".buffers.json"), "w") as f:
                json.dump([b for b, _ in m.named_buffers()], f)
                f.write("\n")
        print("%-20s opset %2d  %8d params  %7d bytes" % (name, opset, params(m),
                                                          os.path.getsize(path)))


def job(outdir, name, m, x, opset, training, classes, weights):
    """Export m (training or eval mode) and write its loss on x, or its parameter
    count alone when exported without weights."""
    path = os.path.join(outdir, name + ".onnx")
    tokens = x.dtype == torch.long
    export(m, x, path, opset, training, names=("tokens",) if tokens else ("input",),
           weights=weights)
    if weights:
        expectation(m, x, classes, os.path.join(outdir, name + ".json"))
    else:  # the parameter count only: there are no weights to compute with
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump({"params": params(m), "weights": False}, f)
            f.write("\n")
    print("%-12s opset %2d  %8d params  %7d bytes" % (name, opset, params(m),
                                                      os.path.getsize(path)))


def small(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    lenet, misc = LeNet5(), Misc()
    img28, img16 = torch.randn(BATCH, 1, 28, 28), torch.randn(BATCH, 3, 16, 16)
    jobs = [  # name, model, input, opset, training-mode export, classes, with weights
        ("lenet5", lenet, img28, 13, False, 10, True),
        ("lenet5_op9", lenet, img28, 9, False, 10, False),
        ("resblock", ResBlock(), torch.randn(BATCH, 8, 16, 16), 13, True, 10, True),
        ("lstm_lm", LstmLM(), torch.randint(0, 100, (BATCH, 12)), 13, False, 100, True),
        ("transformer", TransformerLM(), torch.randint(0, 50, (BATCH, 10)), 17, False, 50, True),
        ("transformer_op14", TransformerLM(activation="gelu"), torch.randint(0, 50, (BATCH, 10)),
         14, False, 50, True),
        ("misc_op9", misc, img16, 9, False, 10, True),
        ("misc_op13", misc, img16, 13, False, 10, True),
    ]
    for j in jobs:
        job(outdir, *j)


    gpt = GptLM()
    gpt_fixture(outdir, "gpt", gpt, 17, True)
    gpt_fixture(outdir, "gpt_op14_nofold", gpt, 14, False)

    torch.manual_seed(2)
    train_fixture(outdir, "nanogpt", NanoGPT(), 17)
    train_fixture(outdir, "nanogpt_op13", NanoGPT(), 13)
    train_fixture(outdir, "nanogpt_hf_drop", NanoGPT(packed=False, dropout=0.1, hf=True), 13)
    train_fixture(outdir, "mha_train", TrainTransformerLM(), 17)

    for name, opset in BERT_JOBS:
        bert_fixture(outdir, name, opset)

    torch.manual_seed(3)
    einsum, tok10 = EinsumLM(), torch.randint(0, 50, (BATCH, 10))
    job(outdir, "einsum_op13", einsum, tok10, 13, False, 50, True)
    job(outdir, "einsum_train_op17", einsum, tok10, 17, True, 50, True)

    torch.manual_seed(4)
    up, img8 = UpDecoder(), torch.randn(BATCH, 3, 8, 8)
    job(outdir, "convt_op13", up, img8, 13, False, 10, True)
    job(outdir, "convt_train_op17", up, img8, 17, True, 10, True)

    torch.manual_seed(5)
    rn, img6 = ResizeNet(), torch.randn(BATCH, 3, 6, 6)
    job(outdir, "resize_op13", rn, img6, 13, False, 10, True)
    job(outdir, "resize_train_op17", rn, img6, 17, True, 10, True)


class BertEncoder(nn.Module):
    """A BERT-style encoder for sequence classification, in Hugging Face's spelling
    (BertModel + BertForSequenceClassification): word, position and token-type
    embeddings (the positions a registered arange buffer sliced to the length, the
    token types a second input), layer norm, post-norm blocks of q, k, v Linears with
    the heads viewed and permuted, scores divided by sqrt(head_dim), dropout of the
    probabilities, exact GELU, a tanh pooler over the first token and a classifier;
    dropout 0.1 everywhere. No attention mask (every token is real)."""

    def __init__(self, vocab=30522, d=768, heads=12, layers=12, ff=3072, t=512, types=2,
                 classes=2, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(t, d)
        self.token_type_embeddings = nn.Embedding(types, d)
        self.register_buffer("position_ids", torch.arange(t).expand((1, -1)))
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.layer = nn.ModuleList()
        for _ in range(layers):
            b = nn.Module()
            b.query, b.key, b.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            b.attn_out, b.attn_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
            b.intermediate, b.output = nn.Linear(d, ff), nn.Linear(ff, d)
            b.out_norm = nn.LayerNorm(d, eps=1e-12)
            self.layer.append(b)
        self.pooler = nn.Linear(d, d)
        self.classifier = nn.Linear(d, classes)

    def heads_view(self, x):
        n, t, d = x.shape
        return x.view(n, t, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, input_ids, token_type_ids):
        n, t = input_ids.shape
        pos = self.position_ids[:, :t]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = self.drop(self.emb_norm(x + self.position_embeddings(pos)))
        for b in self.layer:
            q, k, v = self.heads_view(b.query(x)), self.heads_view(b.key(x)), \
                self.heads_view(b.value(x))
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            p = self.drop(F.softmax(s, dim=-1))
            c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous().view(n, t, -1)
            x = b.attn_norm(self.drop(b.attn_out(c)) + x)
            h = b.output(F.gelu(b.intermediate(x)))
            x = b.out_norm(self.drop(h) + x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(self.drop(pooled))


class EncoderStackLM(nn.Module):
    """nn.TransformerEncoder: a stack of nn.TransformerEncoderLayer with its defaults
    (dropout 0.1, ReLU, post-norm), batch first, between an embedding with learned
    positions (an nn.Parameter added) and a linear head over the vocabulary."""

    def __init__(self, vocab=10000, d=512, heads=8, ff=2048, layers=6, t=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, t, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, ff, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.fc(self.encoder(self.embed(tokens) + self.pos))


class RnnLM(nn.Module):
    """A word-level language model of the zoo's rnnlm shape: embedding, a 2-layer
    nn.GRU or nn.LSTM (batch first) of width hidden, linear over the vocabulary."""

    def __init__(self, cell=nn.GRU, vocab=10000, hidden=1024, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = cell(hidden, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, _ = self.rnn(self.embed(tokens))
        return self.fc(y)


class UNet(nn.Module):
    """A U-Net (Ronneberger et al.) as users write it: double 3x3 conv + batch norm +
    ReLU blocks, max pooling down, nn.ConvTranspose2d(k 2, s 2) up, the skip
    concatenated, a 1x1 convolution to per-pixel class scores."""

    def __init__(self, cin=3, classes=2, base=32, depth=4):
        super().__init__()

        def block(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b),
                                 nn.ReLU(inplace=True),
                                 nn.Conv2d(b, b, 3, padding=1, bias=False), nn.BatchNorm2d(b),
                                 nn.ReLU(inplace=True))
        chans = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([block(cin, chans[0])] +
                                  [block(chans[i], chans[i + 1]) for i in range(depth)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2)
                                 for i in reversed(range(depth))])
        self.dec = nn.ModuleList([block(2 * chans[i], chans[i]) for i in reversed(range(depth))])
        self.head = nn.Conv2d(chans[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([skips.pop(), up(x)], 1))
        return self.head(x)


# --big: 21 torchvision classification models that span its families, as
# (name, constructor arguments, image size): GoogLeNet and Inception-v3 without their
# auxiliary heads (which cannot be exported in training mode), weights untrained.
BIG_TORCHVISION = [
    ("alexnet", {}, 224),
    ("vgg11", {}, 224),
    ("resnet18", {}, 224),
    ("resnet50", {}, 224),
    ("resnext50_32x4d", {}, 224),
    ("wide_resnet50_2", {}, 224),
    ("squeezenet1_0", {}, 224),
    ("densenet121", {}, 224),
    ("inception_v3", {"aux_logits": False, "init_weights": False}, 299),
    ("googlenet", {"aux_logits": False, "init_weights": False}, 224),
    ("mobilenet_v2", {}, 224),
    ("mobilenet_v3_small", {}, 224),
    ("mnasnet0_5", {}, 224),
    ("shufflenet_v2_x0_5", {}, 224),
    ("efficientnet_b0", {}, 224),
    ("efficientnet_v2_s", {}, 224),
    ("regnet_y_400mf", {}, 224),
    ("convnext_tiny", {}, 224),
    ("vit_b_16", {}, 224),
    ("swin_t", {}, 224),
    ("maxvit_t", {}, 224),
]


def big_export(outdir, expected, name, m, args, source, opset=13, names=("input",),
               fold=False, zoo=None):
    """Export m in training mode into outdir/name.onnx unless that file is there
    (delete it to remake it: each export is minutes of CPU for the big ones), and
    record PyTorch's parameter count in expected."""
    import time
    path = os.path.join(outdir, name + ".onnx")
    t0 = time.time()
    kept = os.path.exists(path)
    expected[name] = {"file": name + ".onnx", "params": params(m), "source": source}
    if not kept:
        m.train()
        try:
            torch.onnx.export(m, args, path + ".part", opset_version=opset,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=fold, input_names=list(names),
                              output_names=["output"],
                              dynamic_axes={k: {0: "batch"} for k in names})
        except Exception as e:  # noqa: BLE001 - torch raises many kinds
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            expected[name]["export_error"] = line
            print("%-20s torch cannot export it: %s" % (name, line), flush=True)
            return
        os.replace(path + ".part", path)
    if zoo:
        expected[name]["zoo"] = zoo
    print("%-20s %12d params  %8.1f MB  %s" % (name, params(m), os.path.getsize(path) / 1e6,
                                              "kept" if kept else
                                              "exported in %.1f s" % (time.time() - t0)),
          flush=True)


def big(outdir, only=None):
    """The 27 architectures of issue 28: BIG_TORCHVISION and six modules of the kinds
    users write. Files already in outdir are kept; expected.json is rewritten whole."""
    import torchvision
    os.makedirs(outdir, exist_ok=True)
    expected = {}
    for name, kw, size in BIG_TORCHVISION:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(**kw)
        # stochastic depth draws with Bernoulli, which torch 1.13 cannot export in
        # training mode: its probability set to 0 (docs/formats-onnx.md)
        for mod in m.modules():
            if type(mod).__name__ == "StochasticDepth":
                mod.p = 0.0
        big_export(outdir, expected, name, m, (torch.randn(BATCH, 3, size, size),),
                   "torchvision.models.%s(%s), %dx%d" % (
                       name, ", ".join("%s=%s" % kv for kv in kw.items()), size, size))
    users = [
        ("bert_base", lambda: BertEncoder(),
         lambda: (torch.randint(0, 30522, (BATCH, 128)), torch.zeros(BATCH, 128, dtype=torch.long)),
         "BertEncoder above at BERT-base's sizes (12 x 768, 12 heads, 3072, vocabulary 30522), "
         "128 tokens, 2 classes, dropout 0.1, opset 13", 13, ("input_ids", "token_type_ids"), None),
        ("nanogpt2", lambda: NanoGPT(vocab=50257, d=768, heads=12, layers=12, t=1024),
         lambda: (torch.randint(0, 50257, (1, 1024)),),
         "NanoGPT above at GPT-2's sizes (nanoGPT's model.py, 12 x 768, 12 heads, 1024 "
         "positions), opset 17", 17, ("tokens",), "gpt2"),
        ("transformer_enc", lambda: EncoderStackLM(),
         lambda: (torch.randint(0, 10000, (BATCH, 128)),),
         "EncoderStackLM above: nn.TransformerEncoder of 6 nn.TransformerEncoderLayer(512, 8, "
         "2048, dropout 0.1), learned positions, vocabulary 10000, 128 tokens, opset 13", 13,
         ("tokens",), None),
        ("lstm_lm", lambda: LstmLM(vocab=10000, hidden=1024, layers=2),
         lambda: (torch.randint(0, 10000, (BATCH, 40)),),
         "nn.Embedding(10000, 1024) + nn.LSTM(1024, 1024, 2) + nn.Linear(1024, 10000), "
         "40 steps", 13, ("tokens",), None),
        ("gru_lm", lambda: RnnLM(nn.GRU, vocab=10000, hidden=1024, layers=2),
         lambda: (torch.randint(0, 10000, (BATCH, 40)),),
         "nn.Embedding(10000, 1024) + nn.GRU(1024, 1024, 2) + nn.Linear(1024, 10000), "
         "40 steps", 13, ("tokens",), None),
        ("unet", lambda: UNet(), lambda: (torch.randn(BATCH, 3, 128, 128),),
         "UNet above: 4 levels of 32 to 512 channels, ConvTranspose2d up, 128x128, "
         "2 classes a pixel", 13, ("input",), None),
    ]
    for name, make, args, source, opset, names, zoo in users:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        big_export(outdir, expected, name, make(), args(), source, opset, names, zoo=zoo)
    path = os.path.join(outdir, "expected.json")
    if only and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        old.update(expected)
        expected = old
    with open(path, "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=FIXTURES, help="folder of the small fixtures")
    ap.add_argument("--big", metavar="DIR", help="export the torchvision models into DIR")
    ap.add_argument("--only", metavar="NAMES",
                    help="comma-separated fixtures of OPS_JOBS or BERT_JOBS to make (the others "
                         "are left); with --big, the big models to export")
    a = ap.parse_args()
    if a.big:
        big(a.big, a.only.split(",") if a.only else None)
    elif a.only:
        ops_fixtures(os.path.normpath(a.out), a.only.split(","))
    else:
        small(os.path.normpath(a.out))
        ops_fixtures(os.path.normpath(a.out), None)


if __name__ == "__main__":
    sys.exit(main())
