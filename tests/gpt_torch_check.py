"""A small soapflow GPT trained again by PyTorch, step for step.

Run by tests/test_gpt_torch.c where /usr/bin/python3 has torch; skipped elsewhere.

    python3 gpt_torch_check.py DUMP

DUMP is a text file the C test writes: a line "model L H HEADS S V N T lr momentum wd",
optionally a line "optimizer NAME beta1 beta2 eps" (sgd, adam or adamw; without it sgd),
then "param OP NAME NUMEL v..." for each parameter tensor (soapflow's names, PyTorch's
layouts), then per step "tokens", "positions" and "labels" lines (N*T integers each).
The model is GPT-2's block as soapflow builds it (pre-norm, causal multi-head attention
with biases, GELU MLP of 4h, learned positions, LM head tied to wte, no dropout, exact
GELU, layer norm eps 1e-5); it trains with torch.optim.SGD (momentum, weight decay), or
torch.optim.Adam or AdamW (betas, eps, weight decay: Adam's L2, AdamW's decoupled), on
the mean cross-entropy of every position, and prints "loss STEP VALUE" for each step
(the loss before that step's update), computed in float32.
"""
import math
import sys

import torch
import torch.nn.functional as F


def main(path):
    params, steps = {}, []
    optimizer, betas, eps = "sgd", (0.9, 0.999), 1e-8
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "model":
                L, H, heads, S, V, N, T = (int(x) for x in w[1:8])
                lr, mom, wd = (float(x) for x in w[8:11])
            elif w[0] == "optimizer":
                optimizer = w[1]
                betas, eps = (float(w[2]), float(w[3])), float(w[4])
            elif w[0] == "param":
                params["%s.%s" % (w[1], w[2])] = torch.tensor([float(x) for x in w[4:]],
                                                              dtype=torch.float32)
            elif w[0] == "tokens":
                steps.append({"tokens": [int(x) for x in w[1:]]})
            else:
                steps[-1][w[0]] = [int(x) for x in w[1:]]

    def p(name, *shape):
        t = params[name].reshape(*shape).clone().requires_grad_(True)
        params[name] = t
        return t

    wte = p("wte.weight", V, H)
    wpe = p("wpe.weight", -1, H)
    blocks = []
    for l in range(L):
        b = {}
        for ln in ("ln_1", "ln_2"):
            b[ln] = (p("h%d.%s.weight" % (l, ln), H), p("h%d.%s.bias" % (l, ln), H))
        b["in_w"] = p("h%d.attn.in_proj_weight" % l, 3 * H, H)
        b["out_w"] = p("h%d.attn.out_proj.weight" % l, H, H)
        b["in_b"] = p("h%d.attn.in_proj_bias" % l, 3 * H)
        b["out_b"] = p("h%d.attn.out_proj.bias" % l, H)
        b["fc1"] = (p("h%d.mlp.fc1.weight" % l, 4 * H, H), p("h%d.mlp.fc1.bias" % l, 4 * H))
        b["fc2"] = (p("h%d.mlp.fc2.weight" % l, H, 4 * H), p("h%d.mlp.fc2.bias" % l, H))
        blocks.append(b)
    ln_f = (p("ln_f.weight", H), p("ln_f.bias", H))
    assert not any(k.startswith("lm_head") for k in params), "the head must be tied"

    dh = H // heads
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    def forward(tok, pos, lab):
        x = wte[tok] + wpe[pos]
        for b in blocks:
            a = F.layer_norm(x, (H,), *b["ln_1"], eps=1e-5)
            qkv = a @ b["in_w"].t() + b["in_b"]
            q, k, v = (t.reshape(N, T, heads, dh).transpose(1, 2) for t in qkv.split(H, -1))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            s = s.masked_fill(mask, float("-inf"))
            o = (s.softmax(-1) @ v).transpose(1, 2).reshape(N, T, H)
            x = x + o @ b["out_w"].t() + b["out_b"]
            m = F.layer_norm(x, (H,), *b["ln_2"], eps=1e-5)
            m = F.gelu(m @ b["fc1"][0].t() + b["fc1"][1])
            x = x + m @ b["fc2"][0].t() + b["fc2"][1]
        x = F.layer_norm(x, (H,), *ln_f, eps=1e-5)
        logits = x @ wte.t()
        return F.cross_entropy(logits.reshape(N * T, V), lab.reshape(N * T))

    ps = list(params.values())
    if optimizer == "sgd":
        opt = torch.optim.SGD(ps, lr=lr, momentum=mom, weight_decay=wd)
    elif optimizer == "adam":
        opt = torch.optim.Adam(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=False)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=False)
    else:
        sys.exit("unknown optimizer " + optimizer)
    for i, st in enumerate(steps):
        tok = torch.tensor(st["tokens"]).reshape(N, T)
        pos = torch.tensor(st["positions"]).reshape(N, T)
        lab = torch.tensor(st["labels"]).reshape(N, T)
        opt.zero_grad()
        loss = forward(tok, pos, lab)
        loss.backward()
        opt.step()
        print("loss %d %.9g" % (i, loss.item()))


if __name__ == "__main__":
    main(sys.argv[1])
