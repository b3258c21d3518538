#!/usr/bin/env python3
"""megatron_grid.py - simulate Megatron's 3D grid (tensor T x pipeline P x
micro-batch B x recomputation) for one model and machine, print a markdown
table and the fastest plan that fits in memory.

    bench/megatron_grid.py [--soapflow build/soapflow] [--tp 1,2,4,8]
        [--pp 1,2,4,8,16] [--mb 1,2,4] [--recompute none,selective,full]
        [--schedule 1f1b] [--timeout 120] -- MODEL/MACHINE OPTIONS...

Every point is `soapflow simulate --strategy megatron:tp=T,pp=P,mb=B,
schedule=S,recompute=R --json` with dp = devices / (T P) and batch / (dp B)
micro-batches; points the baseline refuses (T P not dividing the devices, the
batch not a whole number of micro-batches, more stages than blocks) are left
out, and a point that runs past --timeout seconds is listed as such. With
P = 1, B is the whole share of a data-parallel rank (no accumulation) and
only one row is simulated per (T, recompute).
"""
import argparse
import json
import subprocess
import sys
import time


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--soapflow", default="build/soapflow")
    ap.add_argument("--tp", type=ints, default=[1, 2, 4, 8])
    ap.add_argument("--pp", type=ints, default=[1, 2, 4, 8, 16])
    ap.add_argument("--mb", type=ints, default=[1, 2, 4])
    ap.add_argument("--recompute", default="none,selective,full")
    ap.add_argument("--schedule", default="1f1b")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest and a.rest[0] == "--" else a.rest
    gib = 2.0**30
    rows, best = [], None
    print("| tp | pp | dp | mb | micro-batches | recompute | iteration | peak (timeline) | fits | sim wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    sys.stdout.flush()
    for T in a.tp:
        for P in a.pp:
            for B in (a.mb if P > 1 else [0]):
                for R in a.recompute.split(","):
                    name = "megatron:tp=%d,pp=%d" % (T, P)
                    if P > 1:
                        name += ",mb=%d,schedule=%s" % (B, a.schedule)
                    name += ",recompute=%s" % R
                    cmd = [a.soapflow, "simulate", "--strategy", name, "--json"] + rest
                    t0 = time.time()
                    try:
                        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                    except subprocess.TimeoutExpired:
                        print("| %d | %d | | %s | | %s | over %.0f s | | | |" % (
                            T, P, B or "-", R, a.timeout))
                        sys.stdout.flush()
                        continue
                    wall = time.time() - t0
                    if p.returncode != 0:
                        continue  # refused: not a point of this machine's grid
                    d = json.loads(p.stdout)
                    D = d["devices"] // (T * P)
                    m = d["batch"] // (D * B) if P > 1 else 1
                    row = (d["iter_ms"], name, d["fits"])
                    print("| %d | %d | %d | %s | %d | %s | %.1f ms | %.1f GiB | %s | %.0f s |" % (
                        T, P, D, B if P > 1 else "all", m, R, d["iter_ms"],
                        d["peak_live_bytes"] / gib, "yes" if d["fits"] else "no", wall))
                    sys.stdout.flush()
                    rows.append(row)
                    if d["fits"] and (best is None or row[0] < best[0]):
                        best = row
    print()
    if best:
        print("best that fits: %s, %.1f ms" % (best[1], best[0]))
    else:
        print("best that fits: none of the %d points simulated fits" % len(rows))


if __name__ == "__main__":
    main()
