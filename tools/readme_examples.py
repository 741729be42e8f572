#!/usr/bin/env python3
"""The README's code examples are files in examples/, quoted whole, so that they
compile and run (ctest example_readme_*) and cannot rot.

A quoted block in README.md is a line `<!-- quoted from examples/NAME.cpp -->`
followed by a ```cpp fence holding the file's text. `--check` fails (exit 1,
with a diff) when a block differs from its file; `--update` rewrites the blocks
from the files.
"""
import argparse
import difflib
import os
import re
import sys

MARK = re.compile(r"^<!-- quoted from (examples/[\w./-]+) -->\n```cpp\n(.*?)^```\n",
                  re.MULTILINE | re.DOTALL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--update", action="store_true")
    args = ap.parse_args()
    root = os.path.dirname(os.path.abspath(args.readme))
    text = open(args.readme, encoding="utf-8").read()
    problems = []

    def quoted(m):
        path = os.path.join(root, m.group(1))
        if not os.path.exists(path):
            problems.append(f"{args.readme}: quotes {m.group(1)}, which does not exist")
            return m.group(0)
        want = open(path, encoding="utf-8").read()
        if m.group(2) != want:
            diff = difflib.unified_diff(m.group(2).splitlines(True), want.splitlines(True),
                                        f"README.md ({m.group(1)})", m.group(1))
            problems.append("".join(diff))
        return f"<!-- quoted from {m.group(1)} -->\n```cpp\n{want}```\n"

    new = MARK.sub(quoted, text)
    if not MARK.search(text):
        problems.append(f"{args.readme}: no '<!-- quoted from examples/... -->' block")
    if args.update:
        if new != text:
            open(args.readme, "w", encoding="utf-8").write(new)
        missing = [p for p in problems if not p.startswith("---")]
        for p in missing:
            print(p, file=sys.stderr)
        return 1 if missing else 0
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("README examples differ from examples/; run tools/readme_examples.py --update "
              "README.md", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
