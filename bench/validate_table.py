#!/usr/bin/env python3
"""Fill the validation table of bench/RESULTS.md and docs/simulator.md.

For each rank count: `mpirun -n P soapflow calibrate` into a machine file; for
each model: `soapflow profile` at the batch validate trains with into a costs
file; then `mpirun -n P soapflow validate --json` over the strategy list with
that machine and those costs (and, with --analytic, once more with the
analytic model and the same machine). Prints the commands it ran, the load
average before and after each validate run, a summary table (median |error|,
Kendall tau, worst strategy, which task kind carries the error) and, with
--rows, every strategy's row.

usage: bench/validate_table.py SOAPFLOW [--ranks 2,4] [--models lenet5,mlp]
           [--strategies LIST] [--iters N] [--out DIR] [--analytic] [--rows]
           [--sync overlap|bulk] [--reuse] [--threshold LOAD]
"""
import argparse
import collections
import json
import os
import shlex
import subprocess
import sys
import time

STRATEGIES = "data,model,owt,random:6,search"
ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1", "OPENBLAS_NUM_THREADS": "1"}


def run(cmd, log):
    log.append(shlex.join(cmd))
    env = dict(os.environ, **ENV)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {shlex.join(cmd)}\n{r.stderr}")
    return r


def tau(x):
    return "n/a" if x is None else f"{x:.2f}"


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_quiet(threshold):
    """Wait until the 1-minute load average is below threshold (0: do not wait)."""
    while threshold and load() >= threshold:
        time.sleep(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("soapflow")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--models", default="lenet5,mlp")
    ap.add_argument("--strategies", default=STRATEGIES)
    ap.add_argument("--iters", default="20")
    ap.add_argument("--threshold", type=float, default=0,
                    help="wait before each run until the 1-minute load is below this")
    ap.add_argument("--out", default="build/validate")
    ap.add_argument("--sync")
    ap.add_argument("--analytic", action="store_true",
                    help="also validate the analytic cost model on the calibrated machine")
    ap.add_argument("--rows", action="store_true", help="print every strategy's row")
    ap.add_argument("--reuse", action="store_true",
                    help="keep machine and costs files already in --out")
    a = ap.parse_args()
    sf = a.soapflow
    os.makedirs(a.out, exist_ok=True)
    log, results = [], []
    for p in [int(x) for x in a.ranks.split(",")]:
        machine = f"{a.out}/local-{p}.json"
        if not (a.reuse and os.path.exists(machine)):
            wait_quiet(a.threshold)
            run(["mpirun", "-n", str(p), sf, "calibrate", "--out", machine], log)
        for model in a.models.split(","):
            costs = f"{a.out}/costs-{model}-{p}.json"
            if not (a.reuse and os.path.exists(costs)):
                wait_quiet(a.threshold)
                run([sf, "profile", "--model", model, "--batch", "64", "--machine", machine,
                     "--out", costs], log)
            variants = [("profiled", ["--costs", costs])]
            if a.analytic:
                variants.append(("analytic", []))
            for label, extra in variants:
                cmd = ["mpirun", "-n", str(p), sf, "validate", "--model", model, "--batch", "64",
                       "--machine", machine, *extra, "--strategies", a.strategies,
                       "--iters", a.iters, "--json",
                       "--svg", f"{a.out}/{model}-{p}-{label}.svg"]
                if a.sync:
                    cmd += ["--sync", a.sync]
                wait_quiet(a.threshold)
                before = load()
                r = run(cmd, log)
                after = load()
                j = json.loads(r.stdout)
                j["_label"], j["_load"] = label, (before, after)
                j["_warn"] = r.stderr.strip()
                results.append(j)
    print("Commands:\n")
    print("```sh")
    for c in log:
        print(c)
    print("```\n")
    print("| ranks | model | costs | strategies (not data) | median abs error | Kendall tau "
          "| fastest steps: error, tau | worst | largest gap (count) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for j in results:
        rows = j["strategies"]
        nd = sum(1 for r in rows if r["name"] != "data")
        gaps = collections.Counter(r["largest_gap"] for r in rows).most_common()
        f = j["fastest_steps"]
        print(f"| {j['ranks']} | {j['model']} | {j['_label']} | {len(rows)} ({nd}) "
              f"| {j['median_abs_error_pct']:.1f}% | {tau(j['kendall_tau'])} "
              f"| {f['median_abs_error_pct']:.1f}%, {tau(f['kendall_tau'])} "
              f"| {j['worst']['name']} ({j['worst']['error_pct']:+.1f}%) "
              f"| {', '.join(f'{k} ({n})' for k, n in gaps)} "
              f"| {j['_load'][0]:.1f}-{j['_load'][1]:.1f} |")
    models = list(results[0]["sync_models"]) if results else []
    print("\nThe simulator's sync models against the same measurements "
          "(median abs error, Kendall tau):\n")
    print("| ranks | model | costs | " + " | ".join(models) + " |")
    print("|---|---|---|" + "---|" * len(models))
    for j in results:
        sm = j["sync_models"]
        print(f"| {j['ranks']} | {j['model']} | {j['_label']} | "
              + " | ".join(f"{sm[k]['median_abs_error_pct']:.1f}%, {tau(sm[k]['kendall_tau'])}"
                           for k in models) + " |")
    if a.rows:
        kinds = ["compute", "transfer", "sync", "update", "copy", "idle"]
        print("\nPer strategy (ms; breakdown on the critical device, predicted / measured):\n")
        print("| ranks | model | costs | strategy | predicted | measured | fastest | error | "
              + " | ".join(kinds) + " |")
        print("|---|---|---|---|---|---|---|---|" + "---|" * len(kinds))
        for j in results:
            for r in j["strategies"]:
                b = r["breakdown"]
                cells = " | ".join(f"{b[k]['predicted_ms']:.2f} / {b[k]['measured_ms']:.2f}"
                                   for k in kinds)
                print(f"| {j['ranks']} | {j['model']} | {j['_label']} | {r['name']} "
                      f"| {r['predicted_ms']:.2f} | {r['measured_ms']:.2f} "
                      f"| {r['measured_min_ms']:.2f} "
                      f"| {r['error_pct']:+.1f}% | {cells} |")
    warns = [j["_warn"] for j in results if j["_warn"]]
    if warns:
        print("\nWarnings:\n")
        for w in warns:
            print(f"- {w}")


if __name__ == "__main__":
    main()
