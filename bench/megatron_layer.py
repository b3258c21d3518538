#!/usr/bin/env python3
"""megatron_layer.py - one GPT layer under data parallelism and the Megatron
baselines on one node, against a hand calculation (issue 25's check).

    bench/megatron_layer.py [SOAPFLOW] [--machine 'dgx-h100[8]'] [--dtype bf16]
                            [--hidden 12288] [--heads 96] [--seq-len 2048] [--batch 8]

A layer is measured as what one more layer adds: `gpt --layers 2` less `gpt
--layers 1` (vocabulary 8), simulated under each strategy, so that the token
embedding, the tied LM head and the loss, with the collectives Megatron-LM's
vocabulary-parallel embedding and head run on the activations, cancel out and
what is left is one transformer layer, as Megatron-LM's arithmetic counts it.
For each of data, megatron and megatron-sp it prints both models' iterations, the
layer's time (the difference), the weights the layer adds on the device that
holds the most (simulate --json: per_device weight_elems) and their share of data
parallelism's. The hand calculation is Megatron-LM's own arithmetic (Narayanan
et al. 2021, section 3): the layer's compute on one device (the difference of
simulate's compute time under `single`) divided by T, plus four all-reduces of
the layer's activations (B x S x h elements of the dtype, two forward and two
backward), each a ring over T devices: 2 (T - 1) / T x bytes / link bandwidth +
2 (T - 1) x latency.
"""
import argparse
import json
import subprocess
import sys

BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def simulate(sf, args, strategy, layers):
    cmd = [sf, "simulate", "--model", "gpt", "--layers", str(layers), "--hidden", str(args.hidden),
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

    def layer(strategy):
        """(iteration at 1 layer, at 2, the layer's time, its weights on the fullest device,
        its compute)"""
        r = []
        for layers in (1, 2):
            cmd, j = simulate(a.soapflow, a, strategy, layers)
            cmds.append(" ".join(cmd))
            r.append(j)
        w = [max(d["weight_elems"] for d in j["per_device"]) for j in r]
        return (r[0]["iter_ms"], r[1]["iter_ms"], r[1]["iter_ms"] - r[0]["iter_ms"], w[1] - w[0],
                r[1]["compute_ms"] - r[0]["compute_ms"], r[1]["transfer_bytes"] - r[0]["transfer_bytes"])

    for s in ("data", "megatron", "megatron-sp"):
        rows.append((s,) + layer(s))
    single = layer("single")
    act = a.batch * a.seq_len * a.hidden * BYTES[a.dtype]
    ar = 2 * (T - 1) / T * act / bw + 2 * (T - 1) * lat
    hand = single[4] / T + 4 * ar * 1e3
    print("Commands:\n\n```sh")
    for c in cmds:
        print(c)
    print("```\n")
    print(f"One layer: hidden {a.hidden}, {a.heads} heads, sequence {a.seq_len}, batch {a.batch}, "
          f"{a.dtype}, {a.machine} (T = {T}, {desc['intra']['bandwidth_GBps']:.0f} GB/s links)\n")
    print("| strategy | 1 layer ms | 2 layers ms | the layer ms | the layer's weights on the fullest "
          "device | share of data's | the layer's transfers GB |")
    print("|---|---|---|---|---|---|---|")
    w0 = rows[0][4]
    for s, i1, i2, it, w, _, tb in rows:
        print(f"| {s} | {i1:.2f} | {i2:.2f} | {it:.2f} | {w:,} | {w / w0:.3f} | {tb / 1e9:.2f} |")
    print(f"\nHand calculation: the layer's compute on one GPU {single[4]:.2f} ms / {T} = "
          f"{single[4] / T:.2f} ms, plus 4 all-reduces of {act / 2**20:.0f} MiB "
          f"({ar * 1e3:.3f} ms each, {4 * 2 * (T - 1) / T * act * T / 1e9:.2f} GB over the links "
          f"in all): **{hand:.2f} ms**.")
    for s, _, _, it, _, _, _ in rows[1:]:
        print(f"{s}: {it:.2f} ms, {100 * (it / hand - 1):+.1f}% from the hand calculation.")


if __name__ == "__main__":
    main()
