#!/usr/bin/env python3
"""The include graph of src/ by folder, and the layering check.

    tools/include_graph.py [SRC]            prints the graph: for each folder, the
                                            folders its files include, with counts
    tools/include_graph.py --check [SRC]    exits 1 listing every #include that goes
                                            against the layering below and is not in
                                            ALLOWLIST (ctest: layering)
    add --no-allowlist to see every violation as new

SRC defaults to the src/ folder next to this script's tools/ folder. Only
quoted includes that resolve to a file under SRC count (the public headers of
include/smelt/ are the API, usable from every layer; system headers are not
looked at). Python 3, standard library only.

The layering (/work/shared/DESIGN.md, "Layers": data flows down). LAYERS lists
the layers lowest first; a file may include a file of its own folder or of any
folder of a lower layer, except for the pairs in BYPASS. Folders of one layer
are siblings and may not include each other. Anything else — an include from a
lower layer into a higher one, or across siblings — is a violation.

Judgement calls, written down:
  * compiler/graph (the Graph IR) is the lowest compiler stage, below trace: the
    tracer builds a Graph, every later stage reads one. The other stages follow
    in pipeline order; compile.cpp (the folder src/compiler itself) drives them
    all and sits on top. compiler/logs (SMELT_LOGS) is a utility every stage
    uses, so it sits below the stages.
  * fusion decides and codegen prints (DESIGN.md): codegen reads the schedule,
    fusion must not call into codegen.
  * The tracer is the compiler's front end: only passes (which re-trace a graph
    to rewrite it) and compile.cpp drive it. Later stages (lower, fusion,
    codegen, runtime) work on the graph, not on the tracer (BYPASS).
  * io, nn and optim are written over tensors and ops; they reach devices
    through the ops' dispatch, never a backend directly (BYPASS).
"""

import argparse
import fnmatch
import os
import re
import sys
from collections import defaultdict

# Lowest first; the folders of one entry are siblings.
LAYERS = [
    ["kernels"],  # scalar functors and accumulators (host + device)
    ["core"],  # tensor, storage, dtype, device, RNG
    ["backend"],  # backend.h: allocator, streams, toolchain, launch
    ["backend/cpu", "backend/cuda"],  # the backends implement it
    ["ops"],  # the op table, dispatch, eager ops
    ["autograd"],
    ["io", "nn", "optim", "text"],  # text: tokenizers (Unicode through ICU)
    ["compiler/logs"],
    ["compiler/graph"],
    ["compiler/trace"],
    ["compiler/passes"],
    ["compiler/lower"],
    ["compiler/fusion"],
    ["compiler/codegen"],
    ["compiler/runtime"],
    ["compiler"],  # compile.cpp: options, guards, caches, the pipeline
]

# (from, to, why): includes a lower layer would allow but the design does not.
# Patterns are fnmatch globs over folder names.
BYPASS = [
    ("io", "backend*", "io reaches devices through ops"),
    ("nn", "backend*", "nn reaches devices through ops"),
    ("optim", "backend*", "optim reaches devices through ops"),
    ("compiler/lower", "compiler/trace", "later stages work on the graph, not the tracer"),
    ("compiler/fusion", "compiler/trace", "later stages work on the graph, not the tracer"),
    ("compiler/codegen", "compiler/trace", "later stages work on the graph, not the tracer"),
    ("compiler/runtime", "compiler/trace", "later stages work on the graph, not the tracer"),
]

# Files whose folder is not their layer.
FILE_LAYER = {
    "compiler/logs.h": "compiler/logs",
    "compiler/logs.cpp": "compiler/logs",
}

# Violations that exist today, each one include ("file -> included path", paths
# relative to SRC). THIS LIST MUST SHRINK TO EMPTY: whoever removes a violation
# deletes its line here (a stale line is reported); nobody adds one.
# Includes against the layering that are tolerated until fixed. Empty: every
# violation the first run found has been removed; keep it that way.
ALLOWLIST = set()

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def rank_of():
    """Layer index of every folder named in LAYERS."""
    return {folder: i for i, group in enumerate(LAYERS) for folder in group}


def folder_of(rel):
    """The layer folder of a file path relative to SRC."""
    if rel in FILE_LAYER:
        return FILE_LAYER[rel]
    parts = rel.split("/")[:-1]
    ranks = rank_of()
    # the deepest prefix that names a layer (backend/cpu/x/y.h -> backend/cpu)
    for n in range(len(parts), 0, -1):
        if "/".join(parts[:n]) in ranks:
            return "/".join(parts[:n])
    return "/".join(parts) or "."


def includes(src):
    """Yields (file, line number, included path), paths relative to src, for every
    quoted include that resolves to a file under src."""
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    for cand in (os.path.join(src, inc), os.path.join(root, inc)):
                        if os.path.isfile(cand):
                            target = os.path.relpath(cand, src).replace(os.sep, "/")
                            yield rel, lineno, target
                            break


def violation(a, b):
    """Why folder a may not include folder b, or None when it may."""
    if a == b:
        return None
    ranks = rank_of()
    if a not in ranks or b not in ranks:
        unknown = a if a not in ranks else b
        return f"folder {unknown} is not in LAYERS (add it to tools/include_graph.py)"
    if ranks[b] > ranks[a]:
        return f"{a} is below {b}"
    if ranks[b] == ranks[a]:
        return f"{a} and {b} are siblings"
    for pa, pb, why in BYPASS:
        if fnmatch.fnmatch(a, pa) and fnmatch.fnmatch(b, pb):
            return why
    return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", nargs="?", default=os.path.join(here, "..", "src"))
    ap.add_argument("--check", action="store_true", help="exit 1 on a layering violation")
    ap.add_argument("--no-allowlist", action="store_true", help="treat allowlisted ones as new")
    args = ap.parse_args()
    src = os.path.normpath(args.src)
    if not os.path.isdir(src):
        print(f"include_graph.py: {src} is not a directory", file=sys.stderr)
        return 2

    edges = defaultdict(int)  # (from folder, to folder) -> include lines
    bad = []  # (file, line, target, from, to, why)
    present = set()  # folders holding a file that includes something
    for rel, lineno, target in includes(src):
        a, b = folder_of(rel), folder_of(target)
        present |= {a, b}
        if a != b:
            edges[(a, b)] += 1
        why = violation(a, b)
        if why:
            bad.append((rel, lineno, target, a, b, why))

    ranks = rank_of()
    folders = sorted(present, key=lambda f: (ranks.get(f, len(LAYERS)), f))
    bad_pairs = {(a, b) for _, _, _, a, b, _ in bad}
    print(f"include graph of {src} by folder: folder -> folders it includes (#include lines),")
    print("lowest layer first; '!' marks includes against the layering")
    for a in folders:
        outs = sorted(((b, n) for (x, b), n in edges.items() if x == a),
                      key=lambda e: (ranks.get(e[0], len(LAYERS)), e[0]))
        text = ", ".join(f"{b} ({n}){' !' if (a, b) in bad_pairs else ''}" for b, n in outs)
        print(f"  {a:<18} -> {text or '(nothing)'}")

    if not args.check:
        return 0
    allow = set() if args.no_allowlist else ALLOWLIST
    new = [v for v in bad if f"{v[0]} -> {v[2]}" not in allow]
    known = [v for v in bad if f"{v[0]} -> {v[2]}" in allow]
    stale = sorted(allow - {f"{v[0]} -> {v[2]}" for v in bad})
    if known:
        print(f"\n{len(known)} known violation(s), allowlisted until fixed (the list must shrink):")
        for rel, lineno, target, a, b, why in known:
            print(f"  src/{rel}:{lineno}: #include \"{target}\": {a} -> {b} ({why})")
    if stale:
        print("\nallowlisted includes that no longer exist (delete them from ALLOWLIST):")
        for s in stale:
            print(f"  {s}")
    if new:
        print(f"\n{len(new)} layering violation(s):")
        for rel, lineno, target, a, b, why in new:
            print(f"  src/{rel}:{lineno}: #include \"{target}\": {a} -> {b} ({why})")
        return 1
    print("\nlayering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
