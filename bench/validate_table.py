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

With --seeds S1,S2,... each validate runs once per seed (--seed: other random
strategies, weights and data), and a table gives median |error| and tau per
seed with their median and spread. With --repeat N the whole sequence
(calibrate, profile, validate) runs N times from scratch, each into its own
folder, and a stability table compares the repeats: how far each profiled task
time and each calibrated rate moves between repeats (median and largest
relative difference to the first repeat) and how far median |error| moves (in
points).

usage: bench/validate_table.py SOAPFLOW [--ranks 2,4] [--models lenet5,mlp]
           [--strategies LIST] [--iters N] [--out DIR] [--analytic] [--rows]
           [--sync overlap|bulk] [--reuse] [--threshold LOAD]
           [--seeds 1,2,3] [--repeat N]
"""
import argparse
import collections
import json
import os
import shlex
import statistics
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
    ap.add_argument("--seeds", default="1", help="validate once per seed (comma-separated)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run calibrate, profile and validate this many times from scratch")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    seeds = [int(x) for x in a.seeds.split(",")]
    log, results = [], []
    for rep in range(a.repeat):
        out = a.out if a.repeat == 1 else f"{a.out}/repeat-{rep + 1}"
        os.makedirs(out, exist_ok=True)
        sequence(a, out, rep, seeds, log, results)
    report(a, log, results)


def sequence(a, out, rep, seeds, log, results):
    """calibrate, profile and validate once, into folder out"""
    sf = a.soapflow
    for p in [int(x) for x in a.ranks.split(",")]:
        machine = f"{out}/local-{p}.json"
        if not (a.reuse and os.path.exists(machine)):
            wait_quiet(a.threshold)
            run(["mpirun", "-n", str(p), sf, "calibrate", "--out", machine], log)
        for model in a.models.split(","):
            costs = f"{out}/costs-{model}-{p}.json"
            if not (a.reuse and os.path.exists(costs)):
                wait_quiet(a.threshold)
                run([sf, "profile", "--model", model, "--batch", "64", "--machine", machine,
                     "--out", costs], log)
            variants = [("profiled", ["--costs", costs])]
            if a.analytic:
                variants.append(("analytic", []))
            for label, extra in variants:
                for seed in seeds:
                    cmd = ["mpirun", "-n", str(p), sf, "validate", "--model", model, "--batch",
                           "64", "--machine", machine, *extra, "--strategies", a.strategies,
                           "--iters", a.iters, "--seed", str(seed), "--json",
                           "--svg", f"{out}/{model}-{p}-{label}-{seed}.svg"]
                    if a.sync:
                        cmd += ["--sync", a.sync]
                    wait_quiet(a.threshold)
                    before = load()
                    r = run(cmd, log)
                    after = load()
                    j = json.loads(r.stdout)
                    j["_label"], j["_load"] = label, (before, after)
                    j["_warn"] = r.stderr.strip()
                    j["_seed"], j["_rep"] = seed, rep
                    j["_machine"], j["_costs"] = machine, costs
                    results.append(j)


def rel_diffs(a, b):
    """|b / a - 1| over the keys both maps have, a's value above zero"""
    return [abs(b[k] / a[k] - 1) for k in a if k in b and a[k] > 0]


def costs_times(path):
    with open(path) as f:
        j = json.load(f)
    t = {}
    for e in j["entries"]:
        t[e["key"] + "|fwd"] = e["fwd_s"]
        t[e["key"] + "|bwd"] = e["bwd_s"]
    return t


def machine_rates(path):
    """every number of the calibrated machine file, by its path in the JSON"""
    with open(path) as f:
        j = json.load(f)
    flat = {}

    def walk(v, at):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{at}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{at}[{i}]")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            flat[at] = float(v)
    walk(j, "")
    return flat


def spread(vals):
    return f"{statistics.median(vals) * 100:.1f}% / {max(vals) * 100:.1f}%" if vals else "n/a"


def stability(results):
    """seeds and repeats: median |error| and tau per run, and the repeats' drift"""
    groups = collections.OrderedDict()
    for j in results:
        groups.setdefault((j["ranks"], j["model"], j["_label"]), []).append(j)
    print("\nPer seed and repeat (median abs error, Kendall tau of the strategies):\n")
    print("| ranks | model | costs | runs | median abs error: each run | median | range (points) "
          "| tau: each run | median tau |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (p, model, label), js in groups.items():
        errs = [j["median_abs_error_pct"] for j in js]
        taus = [j["kendall_tau"] for j in js if j["kendall_tau"] is not None]
        runs = ", ".join(f"r{j['_rep'] + 1}s{j['_seed']}" for j in js)
        print(f"| {p} | {model} | {label} | {runs} | {', '.join(f'{e:.1f}%' for e in errs)} "
              f"| {statistics.median(errs):.1f}% | {max(errs) - min(errs):.1f} "
              f"| {', '.join(f'{t:.2f}' for t in taus)} "
              f"| {statistics.median(taus) if taus else float('nan'):.2f} |")
    reps = sorted({j["_rep"] for j in results})
    if len(reps) < 2:
        return
    print("\nRepeats against the first (median / largest relative difference):\n")
    print("| ranks | model | repeat | profiled task times | calibrated machine numbers "
          "| median abs error, same seeds (points) |")
    print("|---|---|---|---|---|---|")
    first = {}
    for j in results:
        first.setdefault((j["ranks"], j["model"], j["_label"], j["_seed"]), j)
    done = set()
    for j in results:
        key = (j["ranks"], j["model"], j["_rep"])
        if j["_rep"] == 0 or j["_label"] != "profiled" or key in done:
            continue
        done.add(key)
        f = first[(j["ranks"], j["model"], j["_label"], j["_seed"])]
        dc = rel_diffs(costs_times(f["_costs"]), costs_times(j["_costs"]))
        dm = rel_diffs(machine_rates(f["_machine"]), machine_rates(j["_machine"]))
        de = [abs(x["median_abs_error_pct"] -
                  first[(x["ranks"], x["model"], x["_label"], x["_seed"])]["median_abs_error_pct"])
              for x in results if (x["ranks"], x["model"], x["_rep"]) == key
              and x["_label"] == "profiled"]
        print(f"| {j['ranks']} | {j['model']} | {j['_rep'] + 1} | {spread(dc)} | {spread(dm)} "
              f"| {max(de):.1f} |")


def report(a, log, results):
    print("Commands:\n")
    print("```sh")
    for c in log:
        print(c)
    print("```\n")
    print("| ranks | model | costs | run | strategies (not data) | median abs error | Kendall tau "
          "| fastest steps: error, tau | worst | largest gap (count) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for j in results:
        rows = j["strategies"]
        nd = sum(1 for r in rows if r["name"] != "data")
        gaps = collections.Counter(r["largest_gap"] for r in rows).most_common()
        f = j["fastest_steps"]
        print(f"| {j['ranks']} | {j['model']} | {j['_label']} | r{j['_rep'] + 1}s{j['_seed']} "
              f"| {len(rows)} ({nd}) "
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
    if len({j["_seed"] for j in results}) > 1 or a.repeat > 1:
        stability(results)
    warns = [j["_warn"] for j in results if j["_warn"]]
    if warns:
        print("\nWarnings:\n")
        for w in warns:
            print(f"- {w}")


if __name__ == "__main__":
    main()
