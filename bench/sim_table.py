#!/usr/bin/env python3
"""Fill the simulator table of bench/RESULTS.md.

Runs `soapflow bench sim --json` for the models and machines the simulator issue
names and prints a markdown table: full simulation time and rate, mean delta
update time over random single-operator moves, the mean full simulation of the
same changed strategies (what each delta update replaces), the same moves bounded as MCMC
bounds them, and the shares of tasks a delta update scheduled again, that
really changed (new, or starting at another time), and that did not move by
the same amount as all of their inputs.

usage: bench/sim_table.py SOAPFLOW [--models a,b] [--machines x,y] [--reps N] [--moves N]
           [--sync overlap|bulk] [--sync-scheme ring|ps]
"""
import argparse
import json
import shlex
import subprocess
import sys

MODELS = ["inception_v3", "resnet101", "nmt"]
MACHINES = ["p100-4x4", "k80-16x4"]


def main():
    ap = argparse.ArgumentParser(description="Fill the simulator table of bench/RESULTS.md.")
    ap.add_argument("soapflow")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--machines", default=",".join(MACHINES))
    ap.add_argument("--reps", default="20")
    ap.add_argument("--moves", default="200")
    ap.add_argument("--sync")
    ap.add_argument("--sync-scheme")
    a = ap.parse_args()
    extra = ["--reps", a.reps, "--moves", a.moves]
    for opt, val in (("--sync", a.sync), ("--sync-scheme", a.sync_scheme)):
        if val:
            extra += [opt, val]
    print(f"Command: `bench/sim_table.py {shlex.join(sys.argv[1:])}` "
          f"(soapflow bench sim --json per row, data parallelism, one core).\n")
    print("| model | machine | tasks | full ms | full Mtasks/s | delta ms | full/delta | "
          "full changed ms | full changed/delta | bounded ms | full/bounded | tasks after a move | "
          "rescheduled | changed | uneven |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for machine in a.machines.split(","):
        for model in a.models.split(","):
            cmd = [a.soapflow, "bench", "sim", "--model", model, "--machine", machine,
                   "--json"] + extra
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"| {model} | {machine} | error: {out.stderr.strip()} |||||||||||||")
                continue
            r = json.loads(out.stdout)
            full, delta, bnd = r["full_us"] / 1e3, r["delta_us"] / 1e3, r["delta_bounded_us"] / 1e3
            moved = r["full_moved_us"] / 1e3
            print(f"| {model} | {machine} | {r['tasks']} | {full:.2f} | "
                  f"{r['tasks_per_s'] / 1e6:.2f} | {delta:.2f} | {full / delta:.2f}x | "
                  f"{moved:.2f} | {moved / delta:.2f}x | {bnd:.2f} | {full / bnd:.2f}x | {r['delta_tasks']:.0f} | "
                  f"{100 * r['delta_rescheduled_frac']:.0f}% | "
                  f"{100 * r['delta_changed_frac']:.0f}% | "
                  f"{100 * r['delta_uneven_frac']:.0f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
