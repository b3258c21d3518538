#!/usr/bin/env python3
"""mark_api.py [--check] [SOURCE_DIR] - every function that include/soapflow/*.h
declares carries SF_API (include/soapflow/export.h), the mark that a shared
soapflow library exports it (the libraries are built with -fvisibility=hidden).

Without --check, prefixes each declaration that lacks it with "SF_API " (one
token on the declaration's first line, nothing else moves; run `make format`
after for the continuation lines). With --check, lists them and exits 1.
Needs clang: it reads the declarations from clang's syntax tree (JSON), not
with patterns, so a declaration over several lines or behind a macro counts.
scripts/check_install.sh checks the same from the other side: a shared
planning library exports exactly the public functions it defines.
"""
import collections
import json
import os
import subprocess
import sys

args = [a for a in sys.argv[1:] if a != "--check"]
check = "--check" in sys.argv[1:]
root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
inc = os.path.join(root, "include", "soapflow")
headers = sorted(f for f in os.listdir(inc) if f.endswith(".h") and f != "export.h")
# version.h is made by the build from version.h.in; its declarations are marked by hand
source = "".join(f'#include "soapflow/{h}"\n' for h in headers)
run = subprocess.run([os.environ.get("CLANG", "clang"), "-x", "c", "-std=c11", "-fsyntax-only",
                      "-Xclang", "-ast-dump=json", "-I" + os.path.join(root, "include"), "-"],
                     input=source.encode(), capture_output=True)
if run.returncode != 0:
    sys.exit("mark_api.py: clang cannot read the headers:\n" + run.stderr.decode(errors="replace"))
ast = json.loads(run.stdout)

# clang's JSON leaves a location's file out when it is the one printed last, so
# the file of a declaration is the last one named before its range begins.
current = [None]


def walk(x):
    if isinstance(x, dict):
        if "offset" in x and "file" in x:
            current[0] = x["file"]
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)


found = collections.defaultdict(set)  # header -> {(line, col, name)}
for d in ast["inner"]:
    walk(d.get("loc", {}))
    begin = d.get("range", {}).get("begin", {})
    walk(begin)
    path = current[0]
    walk(d.get("range", {}).get("end", {}))
    walk(d.get("inner", []))
    if d["kind"] == "FunctionDecl":
        if d.get("storageClass") == "static" or d.get("isImplicit"):
            continue  # static inline helpers are compiled into the caller
    elif d["kind"] == "VarDecl":
        if d.get("storageClass") != "extern":
            continue
    else:
        continue
    if not path or os.path.dirname(os.path.abspath(path)) != inc:
        continue
    begin = begin.get("expansionLoc", begin)
    text = open(path, "rb").read()
    off = begin["offset"]
    line = text.count(b"\n", 0, off) + 1
    col = off - (text.rfind(b"\n", 0, off) + 1) + 1
    found[os.path.basename(path)].add((line, col, d["name"]))

missing = []
for h, decls in sorted(found.items()):
    path = os.path.join(inc, h)
    lines = open(path).read().split("\n")
    changed = False
    for line, col, name in sorted(decls, reverse=True):
        s = lines[line - 1]
        if s[col - 1:].startswith("SF_API ") or " SF_API " in s[:col]:
            continue
        missing.append(f"include/soapflow/{h}:{line}: {name}")
        if not check:
            if col != 1:
                sys.exit(f"include/soapflow/{h}:{line}: {name} does not start its line; "
                         "mark it by hand")
            lines[line - 1] = "SF_API " + s
            changed = True
    if changed:
        open(path, "w").write("\n".join(lines))

for m in missing:
    print(("without SF_API: " if check else "marked SF_API: ") + m)
sys.exit(1 if check and missing else 0)
