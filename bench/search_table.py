#!/usr/bin/env python3
"""Fill the search table of bench/RESULTS.md.

Runs `soapflow search --json` for FlexFlow's benchmarks (and vgg16) on the
papers' clusters and on 4- and 8-device parts of them, and prints a markdown
table: simulated iteration time of data parallelism, of the best other
baseline, of OptCNN and of the best strategy found, the speedups, OptCNN's time
and reduced graph size, the MCMC search time and simulations per second.

usage: bench/search_table.py SOAPFLOW [--budget 30s | --iters N] [--seed S] [--models a,b]
           [--machines x,y] [--parts 4,8] [--batch N] [--sync overlap|bulk]
           [--sync-scheme ring|ps]

With --iters the MCMC budget is N proposals instead of seconds, so every row is
the same on any machine (bit for bit with the same build); "search s" then
varies with the machine's speed.
"""
import argparse
import shlex
import json
import subprocess
import sys

MODELS = ["alexnet", "vgg16", "inception_v3", "resnet101", "rnntc", "rnnlm", "nmt"]
MACHINES = ["p100-4x4", "k80-16x4"]


def main():
    ap = argparse.ArgumentParser(description="Fill the search table of bench/RESULTS.md.")
    ap.add_argument("soapflow")
    ap.add_argument("--budget", default="30s")
    ap.add_argument("--iters", type=int,
                    help="MCMC budget in proposals instead of --budget (reproducible)")
    ap.add_argument("--seed", type=int, default=1, help="soapflow search --seed (default 1)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--machines", default=",".join(MACHINES))
    ap.add_argument("--parts", default="4,8", help="device counts of parts ('' for none)")
    ap.add_argument("--batch", help="global batch (default: 64 per device)")
    ap.add_argument("--sync", help="overlap or bulk (soapflow's default: overlap)")
    ap.add_argument("--sync-scheme", help="ring or ps (soapflow's default: ring)")
    a = ap.parse_args()
    sf = a.soapflow
    models, machines = a.models.split(","), a.machines.split(",")
    parts = [int(n) for n in a.parts.split(",") if n]
    extra = ["--iters", str(a.iters)] if a.iters else ["--budget", a.budget]
    for opt, val in (("--batch", a.batch), ("--sync", a.sync), ("--sync-scheme", a.sync_scheme)):
        if val:
            extra += [opt, val]
    print(f"Command: `bench/search_table.py {shlex.join(sys.argv[1:])}` "
          f"(soapflow search --json per row, analytic cost model, seed {a.seed}).\n")
    print("| model | machine | devices | data ms | best other baseline | OptCNN ms "
          "(nodes left, s) | best ms | vs data | vs best baseline | search s | sims/s | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for machine in machines:
        targets = [(machine, machine, None)]
        for n in parts:
            targets.append((f"{machine}[{n}]", f"{machine}[{n}]", n))
        for label, mpath, n in targets:
            for model in models:
                cmd = [sf, "search", "--model", model, "--machine", mpath,
                       "--json", "--seed", str(a.seed)] + extra
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"| {model} | {label} | | error: {out.stderr.strip()} |||||||||")
                    continue
                r = json.loads(out.stdout)
                b = r["baselines"]
                data = b["data"]
                others = {k: v for k, v in b.items() if k != "data"}
                bo_name = min(others, key=others.get)
                bo = others[bo_name]
                best = r["best_ms"]
                note = ""
                if best >= data * 0.999:
                    note = "data parallelism is already the best found"
                elif best > data / 1.05:
                    note = "little to gain: data parallelism is near the best found"
                print(f"| {model} | {label} | {r['devices']} | {data:.2f} | "
                      f"{bo_name} {bo:.2f} | {r.get('optcnn_ms', 0):.2f} "
                      f"({r.get('optcnn_nodes_left', '-')}, {r.get('optcnn_seconds', 0):.2f}) | "
                      f"{best:.2f} ({r['best']}) | {data / best:.2f}x | {bo / best:.2f}x | "
                      f"{r['seconds']:.1f} | {r.get('sims_per_s', 0):.0f} | {note} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
