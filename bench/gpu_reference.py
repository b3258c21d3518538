#!/usr/bin/env python3
"""gpu_reference.py - soapflow's data-parallel predictions against published GPU
training throughputs (issue 30, the fidelity report).

    python3 bench/gpu_reference.py [--soapflow build/soapflow] [--markdown]

For each published configuration below it runs `soapflow simulate --json` of the
closest zoo model on the matching preset (1 or 8 devices of one node,
data-parallel, ring all-reduce overlapping the backward pass), turns the
iteration time into samples/s (tokens/s for GNMT, as published), and prints
predicted vs measured, |error|, the median |error| (overall and per model) and
the predicted against the measured 8-GPU scaling.

Sources (all NVIDIA DeepLearningExamples, github.com/NVIDIA/DeepLearningExamples,
repository paths; the figures are the READMEs' training performance tables):

  RN50   PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training
         performance results" (pytorch-21.03 NGC container): DGX A100 (8x A100
         80GB) TF32 938 / 7248 img/s, mixed precision 2470 / 16621 (1 / 8
         GPUs); DGX-1 16GB (8x V100 16GB) FP32 367 / 2855, mixed 1200 / 8322.
         Batch per GPU from PyTorch/Classification/ConvNets/configs.yml
         (resnet50): DGX1V FP32 112, DGX1V AMP 256, DGXA100 TF32 256, DGXA100
         AMP 256. 224x224, SGD with momentum, DALI input pipeline.
  GNMT   PyTorch/Translation/GNMT/README.md, "Training throughput results"
         (pytorch-20.06 NGC container), batch 128 per GPU: DGX A100 (8x A100
         40GB) TF32 83214 / 519952 tok/s, mixed 140909 / 822024; DGX-1 (8x V100
         16GB) FP32 21860 / 154168, mixed 76438 / 447832. Tokens are source +
         target tokens, averaged over an epoch of WMT16 en-de (BPE 32k,
         sentences up to 50 tokens, bucketing).
  BERT   PyTorch/LanguageModeling/BERT/README.md, "Training performance
         results" (pytorch:21.11 NGC container), BERT-large pre-training phase 1
         (sequence length 128), sequences/s: DGX A100 (8x A100 80GB) TF32 317 /
         2505 (batch 128 per GPU, 64 accumulation steps), mixed 580 / 4591
         (batch 256, 32 steps); DGX-1 (8x V100 32GB) FP32 50 / 387, mixed 224 /
         1746 (accumulated 4096 per GPU in 128 / 64 steps: 32 / 64 per step).

Where the zoo differs from the published models (the script says so per row):

  RN50   none in the graph (ResNet-50 v1.5 as torchvision).
  GNMT   `gnmt --layers 4`: GNMT v2 as the recipe builds it (zoo_rnn.c): 4 LSTM
         layers a side, hidden 1024, the first encoder layer bidirectional,
         attention over the encoder fed to every decoder layer after the
         first, residuals from layer 2, one embedding shared by both sides
         (share_embedding), vocabulary 32000. Differs: soapflow's attention
         (one head with projections) for GNMT's normalized Bahdanau score; no
         dropout or label smoothing; the reversed direction as a chain of
         chunks (one chunk here: --chunk = --seq-len, as PyTorch's nn.LSTM is
         one cuDNN call over the sequence). Sentence length: 24 tokens a side
         are counted (measured runs average over real sentences of 1-50
         tokens; 24 is the mean the README's time to train implies: 154168
         tok/s x 118.1 min / 6 epochs over the ~3.9 M pairs left after
         filtering is ~47 tokens a pair) and 29 steps a side run: the recipe
         batches sentences of similar length (buckets 10 tokens wide over its
         50-token limit) and pads each to the batch's longest, about half a
         bucket above the mean (an estimate, not a measured figure). Predicted
         tok/s = batch x 2 x 24 / iteration time. Optimizer Adam, as the
         recipe's.
  BERT   `gpt --layers 24 --hidden 1024 --heads 16 --vocab 30522 --seq-len
         128`: the zoo's BERT-like encoder (`transformer`) is BERT-base with 12
         heads only; gpt gives BERT-large's widths (pre-norm, causal mask and
         no NSP head differ; the FLOPs and bytes per token are the same up to
         the mask). LAMB (two moments a weight) priced as soapflow's adam.
         Gradient accumulation: the published step all-reduces once
         per K micro-batches, so predicted time per micro-batch on n GPUs is
         ((K - 1) x t_1 + t_n) / K, t_1 the 1-device iteration and t_n the
         n-device one (which holds the all-reduce and the update). The V100 rows ran on 32 GB V100s; the time does not depend on
         the memory size.

Machines: V100 rows use dgx-1v; GNMT's A100 rows use dgx-a100 with the A100
40GB's 1,555 GB/s and 40 GB (A100 data sheet), written to a machine file from
`soapflow machines --json dgx-a100`; other A100 rows use dgx-a100 (80GB).
Precision: fp32 on V100, tf32 on A100, and mixed precision = fp16 (AMP).
--before gives the cost model as it was before issue 30 from the same binary:
the presets are written to machine files without their device.cost object (so
the analytic model's per-operator defaults apply and an lstm is one product),
and tf32 rows run in fp32 (there was no tf32); the rows say so.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# model, gpu, precision, gpus, batch per GPU, measured samples/s (GNMT tok/s),
# accumulation steps (BERT)
PUBLISHED = [
    ("resnet50", "V100", "fp32", 1, 112, 367, 1),
    ("resnet50", "V100", "fp32", 8, 112, 2855, 1),
    ("resnet50", "V100", "fp16", 1, 256, 1200, 1),
    ("resnet50", "V100", "fp16", 8, 256, 8322, 1),
    ("resnet50", "A100", "tf32", 1, 256, 938, 1),
    ("resnet50", "A100", "tf32", 8, 256, 7248, 1),
    ("resnet50", "A100", "fp16", 1, 256, 2470, 1),
    ("resnet50", "A100", "fp16", 8, 256, 16621, 1),
    ("gnmt", "V100", "fp32", 1, 128, 21860, 1),
    ("gnmt", "V100", "fp32", 8, 128, 154168, 1),
    ("gnmt", "V100", "fp16", 1, 128, 76438, 1),
    ("gnmt", "V100", "fp16", 8, 128, 447832, 1),
    ("gnmt", "A100", "tf32", 1, 128, 83214, 1),
    ("gnmt", "A100", "tf32", 8, 128, 519952, 1),
    ("gnmt", "A100", "fp16", 1, 128, 140909, 1),
    ("gnmt", "A100", "fp16", 8, 128, 822024, 1),
    ("bert-large", "V100", "fp32", 1, 32, 50, 128),
    ("bert-large", "V100", "fp32", 8, 32, 387, 128),
    ("bert-large", "V100", "fp16", 1, 64, 224, 64),
    ("bert-large", "V100", "fp16", 8, 64, 1746, 64),
    ("bert-large", "A100", "tf32", 1, 128, 317, 64),
    ("bert-large", "A100", "tf32", 8, 128, 2505, 64),
    ("bert-large", "A100", "fp16", 1, 256, 580, 32),
    ("bert-large", "A100", "fp16", 8, 256, 4591, 32),
]

GNMT_SEQ = 24     # tokens a side that the throughput counts (below)
GNMT_PADDED = 29  # steps a side that run: the batch's longest sentence of its bucket (below)
GNMT_MODEL = "gnmt"
# the recipes' optimizers: SGD with momentum (RN50), Adam (GNMT), LAMB (BERT: two
# moments a weight like Adam, priced as soapflow's adam)
OPTIMIZER = {"resnet50": "sgd", "gnmt": "adam", "bert-large": "adam"}

DIFFERS = {
    "resnet50": "",
    "gnmt": "gnmt (GNMT v2's wiring); 24 tokens a side counted, 29 steps run (padding)",
    "bert-large": "gpt 24x1024 (pre-norm, causal); accumulation folded in",
}


def model_args(model, batch):
    if model == "resnet50":
        return ["--model", "resnet50", "--batch", str(batch)]
    if model == "gnmt":
        return ["--model", GNMT_MODEL, "--layers", "4", "--hidden", "1024", "--vocab", "32000",
                "--seq-len", str(GNMT_PADDED), "--chunk", str(GNMT_PADDED), "--batch", str(batch)]
    if model == "bert-large":
        return ["--model", "gpt", "--layers", "24", "--hidden", "1024", "--heads", "16",
                "--vocab", "30522", "--seq-len", "128", "--batch", str(batch)]
    raise ValueError(model)


def per_sample_units(model):
    return 2 * GNMT_SEQ if model == "gnmt" else 1


class Runner:
    def __init__(self, exe, tmp, before):
        self.exe = exe
        self.tmp = tmp
        self.before = before
        self.has_tf32 = self._knows_tf32() and not before
        self.files = {name: self._file(name) for name in ("dgx-1v", "dgx-a100")}
        self.a100_40 = self._a100_40gb()

    def _run(self, args):
        r = subprocess.run([self.exe] + args, capture_output=True, text=True)
        return r

    def _knows_tf32(self):
        r = self._run(["simulate", "--model", "mlp", "--machine", "dgx-a100[1]", "--dtype",
                       "tf32", "--json"])
        return r.returncode == 0

    def _load(self, name):
        r = self._run(["machines", "--json", name])
        if r.returncode != 0:
            sys.exit("soapflow machines --json %s: %s" % (name, r.stderr.strip()))
        m = json.loads(r.stdout)[0]
        if self.before:  # the cost model as before issue 30: the model's defaults only
            m["device"].pop("cost", None)
        return m

    def _file(self, name):
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(self._load(name), f)
        return path

    def _a100_40gb(self):
        m = self._load("dgx-a100")
        m["name"] = "dgx-a100-40gb"
        m["device"]["name"] = "A100-SXM4-40GB"
        m["device"]["mem_bw_GBps"] = 1555
        m["device"]["mem_GB"] = 40
        path = os.path.join(self.tmp, "dgx-a100-40gb.json")
        with open(path, "w") as f:
            json.dump(m, f)
        return path

    def machine(self, model, gpu, n):
        if gpu == "V100":
            base = self.files["dgx-1v"]
        elif model == "gnmt":
            base = self.a100_40
        else:
            base = self.files["dgx-a100"]
        return "%s[%d]" % (base, n)

    def iter_s(self, model, gpu, prec, n, batch):
        dtype = prec
        note = ""
        if prec == "tf32" and not self.has_tf32:
            dtype, note = "fp32", "run as fp32 (no tf32 before)"
        args = ["simulate"] + model_args(model, batch * n) + [
            "--machine", self.machine(model, gpu, n), "--strategy", "data", "--dtype", dtype,
            "--optimizer", OPTIMIZER[model], "--json"]
        r = self._run(args)
        if r.returncode != 0:
            sys.exit("soapflow %s: %s" % (" ".join(args), r.stderr.strip()))
        return json.loads(r.stdout)["iter_ms"] / 1e3, note


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--soapflow", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                       "soapflow"))
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--before", action="store_true",
                    help="the cost model before issue 30: presets without their device.cost "
                    "figures (per-operator defaults, an lstm as one product) and tf32 rows in "
                    "fp32")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Runner(a.soapflow, tmp, a.before)
        rows = []
        single = {}
        for model, gpu, prec, n, batch, measured, accum in PUBLISHED:
            t_n, note = run.iter_s(model, gpu, prec, n, batch)
            if accum > 1:
                t_1 = t_n if n == 1 else run.iter_s(model, gpu, prec, 1, batch)[0]
                t_n = ((accum - 1) * t_1 + t_n) / accum
            pred = n * batch * per_sample_units(model) / t_n
            err = (pred - measured) / measured
            rows.append((model, gpu, prec, n, batch, measured, pred, err, note))
            if n == 1:
                single[(model, gpu, prec)] = (measured, pred)
    unit = {"resnet50": "img/s", "gnmt": "tok/s", "bert-large": "seq/s"}
    if a.markdown:
        print("| model | GPU | precision | GPUs | batch/GPU | measured | predicted | error |"
              " 8-GPU scaling measured | predicted | zoo differs |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    else:
        print("%-10s %-4s %-4s %4s %5s %10s %10s %7s %6s %6s  %s" %
              ("model", "gpu", "prec", "gpus", "b/gpu", "measured", "predicted", "error",
               "sc.meas", "sc.pred", "note"))
    for model, gpu, prec, n, batch, measured, pred, err, note in rows:
        sm = sp = ""
        if n > 1:
            m1, p1 = single[(model, gpu, prec)]
            sm, sp = "%.2f" % (measured / m1), "%.2f" % (pred / p1)
        what = "; ".join(x for x in (DIFFERS[model], note) if x)
        if a.markdown:
            print("| %s | %s | %s | %d | %d | %d %s | %.0f | %+.1f%% | %s | %s | %s |" %
                  (model, gpu, prec, n, batch, measured, unit[model], pred, 100 * err, sm, sp,
                   what))
        else:
            print("%-10s %-4s %-4s %4d %5d %10.0f %10.0f %+6.1f%% %6s %6s  %s" %
                  (model, gpu, prec, n, batch, measured, pred, 100 * err, sm, sp, note))
    errs = [abs(r[7]) for r in rows]
    print()
    print("median |error| %.1f%% over %d configurations (max %.1f%%)" %
          (100 * statistics.median(errs), len(errs), 100 * max(errs)))
    for model in ("resnet50", "gnmt", "bert-large"):
        e = [abs(r[7]) for r in rows if r[0] == model]
        print("  %-10s median |error| %.1f%%, max %.1f%%" %
              (model, 100 * statistics.median(e), 100 * max(e)))
    sc = [float("%.2f" % (r[6] / single[(r[0], r[1], r[2])][1])) for r in rows if r[3] > 1]
    print("predicted 8-GPU scaling: %s" % ", ".join("%.2f" % s for s in sc))


if __name__ == "__main__":
    main()
