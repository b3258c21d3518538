#!/usr/bin/env python3
"""megatron_layer.py - one GPT layer under data parallelism and the Megatron
baselines on one node, against a hand calculation (issue 25's check).

    bench/megatron_layer.py [SOAPFLOW] [--machine 'dgx-h100[8]'] [--dtype bf16]
                            [--hidden 12288] [--heads 96] [--seq-len 2048] [--batch 8]

The model is `gpt --layers 1` with a vocabulary of 8, so that the token
embedding and the LM head (tied) are a negligible share of its weights and
compute: what is left is one transformer layer. The Megatron baselines split the
tied table on the vocabulary as Megatron-LM does (the embedding's output is a
partial sum, the head column-parallel), which adds the collectives of those two
on the layer's activations to the simulated iteration; the hand calculation
below counts the layer's four all-reduces only. For each of
data, megatron and megatron-sp it prints the simulated iteration, the largest
weight count a device holds (simulate --json: per_device weight_elems) and its
share of data parallelism's. The hand calculation is Megatron-LM's own
arithmetic (Narayanan et al. 2021, section 3): the compute of the layer on one
device (simulate's compute time under `single`, the whole layer's tasks on one
GPU) divided by T, plus four all-reduces of the layer's activations (B x S x h
elements of the dtype, two forward and two backward), each a ring over T
devices: 2 (T - 1) / T x bytes / link bandwidth + 2 (T - 1) x latency.
"""
import argparse
import json
import subprocess
import sys

BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def simulate(sf, args, strategy):
    cmd = [sf, "simulate", "--model", "gpt", "--layers", "1", "--hidden", str(args.hidden),
           "--heads", str(args.heads), "--seq-len", str(args.seq_len), "--vocab", "8",
           "--batch", str(args.batch), "--machine", args.machine, "--dtype", args.dtype,
           "--strategy", strategy, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return cmd, json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("soapflow", nargs="?", default="build/soapflow")
    ap.add_argument("--machine", default="dgx-h100[8]")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--hidden", type=int, default=12288)
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    mj = json.loads(subprocess.run([a.soapflow, "machines", "--json"], capture_output=True,
                                   text=True, check=True).stdout)
    base = a.machine.split("[")[0]
    desc = next(m for m in (mj if isinstance(mj, list) else mj["machines"]) if m["name"] == base)
    T = int(a.machine.split("[")[1].rstrip("]")) if "[" in a.machine else desc["devices_per_node"]
    bw = desc["intra"]["bandwidth_GBps"] * 1e9
    lat = desc["intra"]["latency_us"] * 1e-6

    rows, cmds = [], []
    for s in ("data", "megatron", "megatron-sp"):
        cmd, j = simulate(a.soapflow, a, s)
        cmds.append(" ".join(cmd))
        rows.append((s, j["iter_ms"], max(d["weight_elems"] for d in j["per_device"]),
                     j["compute_ms"], j["sync_ms"]))
    cmd, single = simulate(a.soapflow, a, "single")
    cmds.append(" ".join(cmd))
    act = a.batch * a.seq_len * a.hidden * BYTES[a.dtype]
    ar = 2 * (T - 1) / T * act / bw + 2 * (T - 1) * lat
    hand = single["compute_ms"] / T + 4 * ar * 1e3
    print("Commands:\n\n```sh")
    for c in cmds:
        print(c)
    print("```\n")
    print(f"One layer: hidden {a.hidden}, {a.heads} heads, sequence {a.seq_len}, batch {a.batch}, "
          f"{a.dtype}, {a.machine} (T = {T}, {desc['intra']['bandwidth_GBps']:.0f} GB/s links)\n")
    print("| strategy | simulated iteration ms | largest weight count on a device | share of data's |")
    print("|---|---|---|---|")
    w0 = rows[0][2]
    for s, it, w, _, _ in rows:
        print(f"| {s} | {it:.2f} | {w:,} | {w / w0:.3f} |")
    print(f"\nHand calculation: the layer's compute on one GPU {single['compute_ms']:.2f} ms / {T} = "
          f"{single['compute_ms'] / T:.2f} ms, plus 4 all-reduces of {act / 2**20:.0f} MiB "
          f"({ar * 1e3:.3f} ms each): **{hand:.2f} ms**.")
    for s, it, _, _, _ in rows[1:]:
        print(f"{s}: {it:.2f} ms, {100 * (it / hand - 1):+.1f}% from the hand calculation.")


if __name__ == "__main__":
    main()
