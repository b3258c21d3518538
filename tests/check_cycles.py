#!/usr/bin/env python3
"""check_cycles.py SOURCE_DIR BUILD_DIR - no import circles among src/**/*.c.

Builds the file-level dependency graph of the library's and the CLI's sources
and fails when any set of files depends on each other in a loop. A file A.c
depends on B.c when
  - A's object references a symbol B's object defines (`nm`: an undefined
    symbol of A.o that is a global of B.o): A calls B or reads its data; or
  - A includes a header H that declares a function or extern variable B.c
    defines, and A.c defines nothing H declares.
The second rule is what "which headers count" comes to: a header belongs to
the files that define what it declares (include/soapflow/graph.h belongs to
graph.c, shape.c and the registry; sim_impl.h to the files of src/sim/), and
a file that implements part of a header is one of its owners, not its client:
sharing the header does not make the owners depend on each other, only their
calls do (those the first rule sees). Without that exception every module of
more than one file would be a circle of its own through its header, which
says nothing; with it, a client that includes another module's header depends
on that module even when it only uses its types or inline functions, which
`nm` cannot see. Only the headers A names count, not those they pull in: the
operator files include kernels_impl.h, which includes kernels.h for the type
of a kernel's arguments; counting that as a dependency of every operator on
the kernel dispatch (which looks the operators up) would make a type alone a
circle, and whatever A calls of a header it reaches that way, its object shows.

Folders are reported too, as a note that does not fail: files of different
folders may depend on each other both ways (graph/, ops/ and kernels/ do, as
one layer) so long as no files do.

The objects are the ones the build made (BUILD_DIR/CMakeFiles/*.dir/src/...);
a source with no object in this configuration (not built) is checked by its
includes only, and said so. Each circle is printed as its files (a strongly
connected component, Tarjan) and one loop through them with, for every step,
one symbol (or the header) that makes it.

Exit status: 0 no circle, 1 circles (all printed), 2 usage or tool errors.
Options: --quiet prints only the circles; --edges FILE prints what FILE
depends on and what depends on it (for finding the edge to cut); --nm PROG
the nm to run (CMake passes its CMAKE_NM).
Run it by hand: python3 tests/check_cycles.py . build
--self-test compiles a small tree with circles of both kinds and checks that
they, and only they, are found (a checker that cannot fail proves nothing).
"""

import os
import re
import subprocess
import sys
from collections import defaultdict


def rel(path, root):
    return os.path.relpath(path, root).replace(os.sep, "/")


def sources(root):
    out = []
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith(".c"):
                out.append(rel(os.path.join(d, f), root))
    return sorted(out)


def objects(build, root, srcs):
    """src/x/y.c -> its object in the build tree: the newest, when an old
    configuration left another in a target that no longer builds it."""
    want = set(srcs)
    found = {}
    cm = os.path.join(build, "CMakeFiles")
    for d, _, files in os.walk(cm):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            p = os.path.join(d, f)
            r = rel(p, cm)
            # TARGET.dir/src/x/y.c.o
            parts = r.split("/", 1)
            if len(parts) != 2 or not parts[0].endswith(".dir"):
                continue
            s = parts[1][: -len(".o")]
            if s in want and (s not in found or os.path.getmtime(p) > os.path.getmtime(found[s])):
                found[s] = p
    return found


NM = "nm"


def nm_symbols(objs):
    """{object: (defined globals, undefined)}, from one run of nm over all."""
    r = subprocess.run([NM, "-P", "-A"] + sorted(objs), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (NM, r.stderr.strip()))
    out = {o: (set(), set()) for o in objs}
    for line in r.stdout.splitlines():
        obj, _, rest = line.partition(": ")
        f = rest.split()
        if obj not in out or len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            out[obj][1].add(name)
        elif kind in "TDBRCGSVW" or kind == "i":
            out[obj][0].add(name)
    return out


INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def includes_of(path, root):
    """Project headers path includes directly (resolved), in order."""
    try:
        text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    out = []
    here = os.path.dirname(path)
    for name in INCLUDE_RE.findall(text):
        for base in (here, "src", "include"):
            cand = os.path.normpath(os.path.join(base, name)).replace(os.sep, "/")
            if os.path.isfile(os.path.join(root, cand)):
                out.append(cand)
                break
        # not found: generated (onnx.pb-c.h) or outside the project
    return out


def strip_c(text):
    """Comments, strings and preprocessor lines out; top-level brace blocks
    (bodies of inline functions, struct and enum definitions) become '{}'."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\])*'", "''", text)
    lines, cont = [], False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            continue
        lines.append(line)
    text = "\n".join(lines)
    out, depth = [], 0
    for ch in text:
        if ch == "{":
            if depth == 0:
                out.append("{}")
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out)
    return re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)


def declared_names(path, root):
    """Functions and extern variables a header declares (prototypes at top
    level; typedefs and static functions are not declarations of anything a
    .c defines, and are left out by the caller's intersection with nm)."""
    text = strip_c(open(os.path.join(root, path), encoding="utf-8", errors="replace").read())
    names = set()
    for stmt in re.split(r";|\{\}", text):
        s = stmt.strip()
        if not s or s.startswith("typedef"):
            continue
        m = re.search(r"([A-Za-z_]\w*)\s*\(", s)
        if m and not s.startswith("static"):
            names.add(m.group(1))
            continue
        if s.startswith("extern"):
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*$", s)
            if m:
                names.add(m.group(1))
    return names


def tarjan(nodes, succ):
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def loop_through(comp, succ):
    """One simple loop from comp[0] back to itself inside comp (BFS)."""
    inside = set(comp)
    start = comp[0]
    prev = {}
    queue = [start]
    seen = {start}
    while queue:
        v = queue.pop(0)
        for w in sorted(succ[v]):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                path.reverse()
                return path + [start]
            if w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return [start, start]


def self_test(cc):
    """Two circles (a.c <-> b.c by calls, c.c <-> d.c by headers alone) and
    one-way dependencies beside them: exactly the two must be reported."""
    import tempfile
    files = {
        "src/a/a.c": "int b_fn(void);\nint a_fn(void) { return b_fn(); }\n",
        "src/b/b.c": "int a_fn(void);\nint b_fn(void) { return 1; }\n"
                     "int b_back(void) { return a_fn(); }\n",
        "src/c/c.h": "int c_fn(void);\n",
        "src/c/c.c": '#include "../d/d.h"\nint c_fn(void) { return 2; }\n',
        "src/d/d.h": "/* d_fn(void) in a comment is no declaration */\nint d_fn(void);\n",
        "src/d/d.c": '#include "../c/c.h"\nint d_fn(void) { return 3; }\n',
        "src/e/e.h": "int e_fn(void);\nint e_other(void);\n",
        "src/e/e.c": '#include "e.h"\n#include "../c/c.h"\nint a_fn(void);\n'
                     "int e_fn(void) { return a_fn() + c_fn(); }\n",
        "src/e/e2.c": '#include "e.h"\nint e_other(void) { return e_fn(); }\n',
    }
    with tempfile.TemporaryDirectory() as root:
        build = os.path.join(root, "build")
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        for path in files:
            full = os.path.join(root, path)
            if path.endswith(".c"):
                obj = os.path.join(build, "CMakeFiles", "t.dir", path + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                r = subprocess.run([cc, "-c", full, "-o", obj], capture_output=True, text=True)
                if r.returncode != 0:
                    print("check_cycles --self-test: %s: %s" % (cc, r.stderr), file=sys.stderr)
                    return 2
        import io
        import contextlib
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["check_cycles", "--quiet", root, build])
        got = sorted(l.split(": ", 1)[1] for l in out.getvalue().splitlines()
                     if l.startswith("circle of"))
    want = ["src/a/a.c src/b/b.c", "src/c/c.c src/d/d.c"]
    if rc != 1 or got != want:
        print("check_cycles --self-test: expected exit 1 and circles %s, got %d and %s"
              % (want, rc, got), file=sys.stderr)
        return 1
    print("check_cycles --self-test: both circles found, nothing else")
    return 0


def main(argv):
    global NM
    args, quiet, edges_of = [], False, None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--quiet":
            quiet = True
        elif a == "--self-test":
            return self_test(argv[i + 1] if i + 1 < len(argv) else "cc")
        elif a in ("--edges", "--nm") and i + 1 < len(argv):
            i += 1
            if a == "--edges":
                edges_of = argv[i]
            else:
                NM = argv[i]
        elif a.startswith("--"):
            args = []
            break
        else:
            args.append(a)
        i += 1
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, build = os.path.abspath(args[0]), os.path.abspath(args[1])
    srcs = sources(root)
    objs = objects(build, root, srcs)
    if not objs:
        print("check_cycles: no objects for src/ under %s: build first" % build, file=sys.stderr)
        return 2

    defined, undefined = {}, {}
    try:
        syms = nm_symbols(objs.values())
        for s, o in objs.items():
            defined[s], undefined[s] = syms[o]
    except (OSError, RuntimeError) as e:
        print("check_cycles: %s" % e, file=sys.stderr)
        return 2
    definers = defaultdict(set)  # symbol -> files defining it
    for s, syms in defined.items():
        for x in syms:
            definers[x].add(s)

    # edges: (A, B) -> the first reason found, as text
    why = {}
    succ = defaultdict(set)

    def add(a, b, reason):
        if a == b:
            return
        if b not in succ[a]:
            succ[a].add(b)
            why[(a, b)] = reason

    for a in srcs:
        for x in sorted(undefined.get(a, ())):
            for b in sorted(definers.get(x, ())):
                add(a, b, "calls %s" % x)

    # headers: direct includes, their closure, what each declares and who owns it
    direct = {}

    def inc(path):
        if path not in direct:
            direct[path] = includes_of(path, root)
        return direct[path]

    owners_cache = {}

    def owners(h):
        """file -> one symbol of h it defines."""
        if h not in owners_cache:
            own = {}
            for x in sorted(declared_names(h, root)):
                for b in sorted(definers.get(x, ())):
                    own.setdefault(b, x)
            owners_cache[h] = own
        return owners_cache[h]

    for a in srcs:
        for h in inc(a):
            own = owners(h)
            if a in own:
                continue  # a implements part of h: one of its owners, not a client
            for b, x in sorted(own.items()):
                add(a, b, "includes %s (%s)" % (h, x))

    missing = [s for s in srcs if s not in objs]
    if missing and not quiet:
        print("check_cycles: no object (not built in this configuration), includes only: %s"
              % ", ".join(missing))

    if edges_of:
        print("%s depends on:" % edges_of)
        for b in sorted(succ[edges_of]):
            print("  %s  (%s)" % (b, why[(edges_of, b)]))
        print("depends on %s:" % edges_of)
        for a in srcs:
            if edges_of in succ[a]:
                print("  %s  (%s)" % (a, why[(a, edges_of)]))

    if not quiet:
        fsucc = defaultdict(set)
        for a in srcs:
            for b in succ[a]:
                fa, fb = os.path.dirname(a), os.path.dirname(b)
                if fa != fb:
                    fsucc[fa].add(fb)
        folders = sorted({os.path.dirname(a) for a in srcs})
        for c in tarjan(folders, fsucc):
            if len(c) > 1:
                print("note: folders that depend on each other (not a failure): %s" % " ".join(c))

    comps = [c for c in tarjan(srcs, succ) if len(c) > 1]
    comps.sort(key=lambda c: c[0])
    for c in comps:
        print("circle of %d files: %s" % (len(c), " ".join(c)))
        loop = loop_through(c, succ)
        for a, b in zip(loop, loop[1:]):
            print("  %s -> %s: %s" % (a, b, why[(a, b)]))
        if not quiet:
            inside = set(c)
            n = sum(1 for a in c for b in succ[a] if b in inside)
            print("  (%d dependencies inside; --edges FILE lists one file's)" % n)
    if comps:
        print("check_cycles: %d circle(s) among %d sources" % (len(comps), len(srcs)))
        return 1
    if not quiet:
        print("check_cycles: no circle among %d sources (%d with objects)" % (len(srcs), len(objs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
