#!/usr/bin/env python3
"""Fill the scaling table of bench/RESULTS.md: data parallelism of one model on
a preset's nodes scaled to N devices (build/bench_scale, one process per row so
that each row's peak memory is its own).

usage: bench/scale_table.py BENCH_SCALE [--model NAME|FILE] [--devices 64,256,1024,4096]
           [--machine PRESET] [--reps R] [--moves K] [--random-moves K1,K2,...]
           [--per-device B]

--random-moves gives the moves from the whole SOAP space per row (default
20,20,5,0: one such move on 4096 devices can pair every part of an operator
with every part of its neighbour, 16.8 M transfers; see RESULTS.md).
"""
import argparse
import json
import shlex
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description="Fill the scaling table of bench/RESULTS.md.")
    ap.add_argument("bench_scale")
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--devices", default="64,256,1024,4096")
    ap.add_argument("--machine", default="dgx-h100")
    ap.add_argument("--reps", default="5")
    ap.add_argument("--moves", default="20")
    ap.add_argument("--random-moves", default="20,20,5,0")
    ap.add_argument("--per-device", help="samples a device (bench_scale's default when unset)")
    a = ap.parse_args()
    devices = a.devices.split(",")
    rnd = a.random_moves.split(",")
    rnd += [rnd[-1]] * (len(devices) - len(rnd))
    print(f"Command: `bench/scale_table.py {shlex.join(sys.argv[1:])}`\n")
    print("| model | devices | tasks | idle | full ms | Mtasks/s | peak MB (one sim) | "
          "shift delta ms | shift full ms | random delta ms | random full ms | "
          "tasks after a random move | peak MB (run) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, k in zip(devices, rnd):
        cmd = [a.bench_scale, a.model, n, "--machine", a.machine, "--reps", a.reps,
               "--moves", a.moves, "--random-moves", k]
        if a.per_device:
            cmd += ["--per-device", a.per_device]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"| {a.model} | {n} | error: {out.stderr.strip()} ||||||||||")
            continue
        r = json.loads(out.stdout)
        rd = f"{r['random_delta_ms']:.1f}" if r["random_moves"] else "-"
        rf = f"{r['random_full_ms']:.1f}" if r["random_moves"] else "-"
        rt = f"{r['random_tasks']:.0f}" if r["random_moves"] else "-"
        print(f"| {r['graph']} | {r['devices']} | {r['tasks']} | {r['idle_devices']} | "
              f"{r['full_ms']:.1f} | {r['tasks'] / r['full_ms'] / 1e3:.2f} | "
              f"{r['rss_full_MB']:.0f} | {r['shift_delta_ms']:.1f} | {r['shift_full_ms']:.1f} | "
              f"{rd} | {rf} | {rt} | {r['rss_MB']:.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
