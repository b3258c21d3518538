#!/usr/bin/python3
"""torch_saved.py - the activation memory PyTorch's autograd keeps for the backward
pass of soapflow's zoo models, the reference of tests/test_saved_memory.c.

    /usr/bin/python3 bench/torch_saved.py [--batch 2] [--check tests/fixtures/torch_saved.txt]

For each model (lenet5, alexnet, resnet18, transformer, written out below layer by
layer as src/models/zoo_*.c builds them) it runs one training forward pass on CPU
in fp32 under torch.autograd.graph.saved_tensors_hooks and sums the bytes of the
distinct storages autograd saves, leaving out the parameters (soapflow counts
weights apart) and counting the input batch and the labels (saved by the first
layer and the loss). Views (flatten, reshape, heads) share their base's storage
and count once; a ReLU that runs in place (torchvision's inplace=True, and
resnet's `out += identity`) saves the storage it overwrote.

It prints one line a model, "model batch bytes", the format of
tests/fixtures/torch_saved.txt; --check compares with that file instead (exit 1
on a difference of more than 0.1%). Run with Debian's interpreter
(/usr/bin/python3), which python3-torch installs into.
"""
import argparse
import math
import sys

import torch
from torch import nn
import torch.nn.functional as F


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, stride=1, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(inplace=True), nn.Linear(120, 84), nn.ReLU(inplace=True),
        nn.Linear(84, 10))


def alexnet():  # torchvision's
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(),
        nn.Dropout(0.5), nn.Linear(9216, 4096), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 1000))


class Basic(nn.Module):  # torchvision's BasicBlock
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x if self.down is None else self.down(x)
        return self.relu(out)


def resnet18():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


class Attention(nn.Module):
    """soapflow's attention operator: Q, K, V and output projections around the
    per-head products (src/ops/op_attention.c), no dropout inside."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        n, t, d = x.shape
        split = lambda y: y.view(n, t, self.h, d // self.h).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.h), dim=-1)
        ctx = (p @ v).transpose(1, 2).reshape(n, t, d)
        return self.o(ctx)


class Transformer(nn.Module):  # zoo_transformer.c: BERT-base-like, post-norm, MLM head
    def __init__(self, seq=128, d=768, heads=12, vocab=30522, layers=12):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max(seq, 512), d)
        self.ln0 = nn.LayerNorm(d, eps=1e-12)
        self.attn = nn.ModuleList(Attention(d, heads) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d, eps=1e-12) for _ in range(layers))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d, eps=1e-12) for _ in range(layers))
        self.mlm = nn.Linear(d, vocab)
        self.seq = seq

    def forward(self, tokens):
        pos = torch.arange(self.seq).expand_as(tokens)
        x = F.dropout(self.ln0(self.word(tokens) + self.pos(pos)), 0.1, True)
        for a, l1, f1, f2, l2 in zip(self.attn, self.ln1, self.fc1, self.fc2, self.ln2):
            x = l1(x + F.dropout(a(x), 0.1, True))
            x = l2(x + F.dropout(f2(F.gelu(f1(x))), 0.1, True))
        return self.mlm(x)


def saved_bytes(model, x, labels):
    params = {p.storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        s = t.storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = model(x)
        F.cross_entropy(y.reshape(-1, y.shape[-1]), labels.reshape(-1))
    return sum(seen.values())


def cases(batch):
    torch.manual_seed(0)
    yield "lenet5", lenet5(), torch.randn(batch, 1, 28, 28), torch.randint(10, (batch,))
    yield "alexnet", alexnet(), torch.randn(batch, 3, 224, 224), torch.randint(1000, (batch,))
    yield "resnet18", resnet18(), torch.randn(batch, 3, 224, 224), torch.randint(1000, (batch,))
    yield ("transformer", Transformer(), torch.randint(30522, (batch, 128)),
           torch.randint(30522, (batch, 128)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--check", help="compare with this fixture file instead of printing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    got = {name: saved_bytes(m, x, y) for name, m, x, y in cases(a.batch)}
    if not a.check:
        print("# model batch bytes: what PyTorch %s's autograd saves, bench/torch_saved.py"
              % torch.__version__)
        for name, b in got.items():
            print(name, a.batch, b)
        return 0
    bad = 0
    for line in open(a.check):
        if line.startswith("#") or not line.strip():
            continue
        name, batch, want = line.split()
        if int(batch) != a.batch:
            continue
        if abs(got[name] - int(want)) > 1e-3 * int(want):
            print("%s: PyTorch saves %d bytes, the fixture says %s" % (name, got[name], want))
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
