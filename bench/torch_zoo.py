#!/usr/bin/python3
"""torch_zoo.py - soapflow's zoo models lenet5, mlp and resnet18 trained with PyTorch,
timed the way `soapflow train` times itself, for bench/train_vs_torch.sh.

    /usr/bin/python3 bench/torch_zoo.py [--model lenet5|mlp|resnet18] [--epochs 1 | --iters N]
                                        [--batch B] [--threads 2] [--json]

What is the same as `mpirun -n 2 soapflow train --model M` (src/models/zoo_*.c,
src/cli/cmd_train.c, src/runtime/runtime.c, src/io/dataset.c):
  - the models, layer by layer:
    lenet5: conv1 6@5x5 stride 1 padding 2, ReLU, 2x2 max pool stride 2; conv2
      16@5x5 no padding, ReLU, 2x2 max pool; flatten (16x5x5 = 400); fc 120, ReLU,
      fc 84, ReLU, fc 10 (61,706 parameters);
    mlp: 784-4096-4096-10 with ReLU between (20,037,642 parameters);
    resnet18: torchvision's ResNet-18 (basic blocks, batch norm, 1000 classes,
      11,689,512 parameters), written out here since Debian has no torchvision.
    Softmax cross-entropy, mean over the batch. PyTorch's default initialization.
  - SGD with soapflow's defaults: lr 0.01, momentum 0.9, weight decay 0, no
    dampening, no Nesterov (soapflow's update is PyTorch's formula).
  - the data: lenet5 and mlp read Fashion-MNIST's gzipped IDX files, normalized
    with the training split's mean 0.2860 and std 0.3530 through the same 256-entry
    table, a fresh shuffle per epoch, the last partial batch dropped (937 steps an
    epoch at batch 64); resnet18 trains on random 3x224x224 images and labels, as
    soapflow's synthetic data does.
  - the timing: each step's forward, backward and update (and reading the loss),
    not the copy of the batch into place, as soapflow times sf_runtime_step and not
    fill_batch; the reported time is the median of the steps after the first 10%.
  - test accuracy (Fashion-MNIST models) over the full batches of the test split.

Run it with Debian's interpreter (/usr/bin/python3), which python3-torch installs
into. It prints JSON with --json (keys named as in `soapflow train --json`).
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
from torch import nn

MEAN, STD = 0.2860, 0.3530  # src/io/dataset.c
DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
PARAMS = {"lenet5": 61706, "mlp": 20037642, "resnet18": 11689512}


def read_idx(path):
    """An IDX file (gzipped or plain) as a numpy array of its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(folder, base):
    for name in (base, base + ".gz"):
        p = os.path.join(folder, name)
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(f"{folder}: no {base} or {base}.gz")


def load(folder, split):
    prefix = "train" if split == "train" else "t10k"
    img = read_idx(find(folder, f"{prefix}-images-idx3-ubyte"))
    lab = read_idx(find(folder, f"{prefix}-labels-idx1-ubyte"))
    # the same table as sf_dataset_load: computed in double, stored as float
    lut = ((np.arange(256, dtype=np.float64) / 255.0 - MEAN) / STD).astype(np.float32)
    x = torch.from_numpy(lut[img].reshape(-1, 1, img.shape[1], img.shape[2]).copy())
    y = torch.from_numpy(lab.astype(np.int64))
    return x, y


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, stride=1, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5, stride=1, padding=0), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    )


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))


class Basic(nn.Module):
    """torchvision's BasicBlock: two 3x3 convolutions, projection when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (self.down(x) if self.down is not None else x))


def resnet18():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


MODELS = {"lenet5": lenet5, "mlp": mlp, "resnet18": resnet18}


def median_after_warmup(times):
    """cmd_train.c's figure: the median of the steps after the first 10%."""
    total = len(times)
    warm = total // 10 if total > 10 else (1 if total > 1 else 0)
    return statistics.median(times[warm:]), total - warm, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=None, help="passes over the data (default 1)")
    ap.add_argument("--iters", type=int, default=None, help="steps instead of epochs")
    ap.add_argument("--model", choices=sorted(MODELS), default="lenet5")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default=DEFAULT_DIR)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.epochs is not None and a.iters is not None:
        ap.error("--epochs and --iters exclude each other")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.model == "resnet18":  # synthetic: random images and labels, as soapflow's
        xtr = torch.randn(4 * a.batch, 3, 224, 224)
        ytr = torch.randint(0, 1000, (4 * a.batch,))
        xte = yte = None
    else:
        xtr, ytr = load(a.data_dir, "train")
        xte, yte = load(a.data_dir, "test")
    model = MODELS[a.model]()
    n_params = sum(p.numel() for p in model.parameters())
    if n_params != PARAMS[a.model]:
        sys.exit(f"torch_zoo.py: {n_params} parameters, soapflow's {a.model} has "
                 f"{PARAMS[a.model]}")
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    loss_fn = nn.CrossEntropyLoss()

    B = a.batch
    per_epoch = xtr.shape[0] // B
    total = a.iters if a.iters is not None else per_epoch * (a.epochs or 1)
    gen = torch.Generator().manual_seed(a.seed)
    times, losses = [], []
    xb = torch.empty(B, *xtr.shape[1:])
    yb = torch.empty(B, dtype=torch.int64)
    order = None
    model.train()
    for i in range(total):
        if i % per_epoch == 0:
            order = torch.randperm(xtr.shape[0], generator=gen)
        idx = order[(i % per_epoch) * B:(i % per_epoch + 1) * B]
        torch.index_select(xtr, 0, idx, out=xb)  # the batch, outside the timing
        torch.index_select(ytr, 0, idx, out=yb)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        lv = loss.item()
        times.append(time.perf_counter() - t0)
        losses.append(lv)

    model.eval()
    ok = seen = 0
    with torch.no_grad():
        for s in range(0, xte.shape[0] - B + 1 if xte is not None else 0, B):
            pred = model(xte[s:s + B]).argmax(1)
            ok += int((pred == yte[s:s + B]).sum())
            seen += B
    med, n_med, warm = median_after_warmup(times)
    r = {
        "model": a.model, "framework": "pytorch", "torch": torch.__version__,
        "threads": torch.get_num_threads(), "batch": B, "steps": total,
        "params": n_params, "loss_first": losses[0], "loss_last": losses[-1],
        "iter_ms": med * 1e3, "images_per_s": B / med,
        "test_accuracy": ok / seen if seen else None, "test_samples": seen,
    }
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{a.model} on PyTorch {torch.__version__}, {r['threads']} threads, batch {B}, "
              f"{total} steps")
        print(f"iteration     {med * 1e3:.3f} ms (median of {n_med} after {warm} warm-up)")
        print(f"throughput    {B / med:.0f} images/s")
        print(f"loss          {losses[0]:.4f} -> {losses[-1]:.4f}")
        if seen:
            print(f"test accuracy {100 * ok / seen:.2f}% ({seen} samples of fashion-mnist)")


if __name__ == "__main__":
    main()
