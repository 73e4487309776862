#!/usr/bin/env python3
"""The house's two structural rules (issue 32), checked in CI:

1. No source file holds more than 800 lines of code (its `#[cfg(test)] mod tests` block
   and test files under tests/ or benches/ not counted).
2. No import cycle between files: a file that names another (`use crate::a::b`,
   `crate::a::f(..)`, `super::x`) is drawn an arrow to it, and every strongly connected
   set of more than one file is a cycle.

What is over either rule today is listed below, each with why, so that the list can only
shrink: a file newly over 800 lines, a new cycle, or one that grew, fails; a file listed
that is now within the rule fails too, until its line is removed here.

    python3 scripts/check-structure.py          # exit 1 with what breaks a rule
"""

import os
import re
import sys

MAX_LINES = 800

# Files still over MAX_LINES (code lines), each with why. None today: keep it so.
OVER: dict = {}

# Cycles allowed: the runtime's data model, whose types refer to each other by design (a
# handle keeps its last writer's task node, a node its accesses' handles, the pool both,
# a device the handles' replicas, a task's context its handles and device buffers).
ALLOWED_CYCLES = [
    {
        "runtime/src/codelet.rs", "runtime/src/context.rs", "runtime/src/device/cuda.rs",
        "runtime/src/device/emulated.rs", "runtime/src/device/mod.rs", "runtime/src/handle.rs",
        "runtime/src/modes.rs", "runtime/src/pool.rs", "runtime/src/task.rs",
    },
]

SKIP_DIRS = {"target", ".git", "tests", "benches", "examples", "fuzz", "node_modules"}


def crate_roots(root):
    """Every crate source root: a directory `src` holding lib.rs or main.rs."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        if os.path.basename(dirpath) == "src" and ({"lib.rs", "main.rs"} & set(filenames)):
            yield dirpath


def code_of(text):
    """The file without its test module and its comments."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\b", text, flags=re.M)
    if m:
        text = text[: m.start()]
    lines = [l for l in text.split("\n") if not l.lstrip().startswith("//")]
    return "\n".join(lines)


def module_file(src, path):
    """The file of module `path` (a list of names) under crate root `src`, or None."""
    if not path:
        for root_file in ("lib.rs", "main.rs"):
            f = os.path.join(src, root_file)
            if os.path.exists(f):
                return f
        return None
    base = os.path.join(src, *path)
    for f in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.exists(f):
            return f
    return None


def module_path(src, f):
    rel = os.path.relpath(f, src)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def resolve(src, names):
    """The deepest file a path of module names reaches."""
    best = None
    for k in range(1, len(names) + 1):
        f = module_file(src, names[:k])
        if f:
            best = f
    return best


def arrows(src, f, code):
    here = module_path(src, f)
    out = set()
    refs = [m.group(1).split("::") for m in re.finditer(r"\bcrate::((?:\w+::)*\w+)", code)]
    for m in re.finditer(r"\b((?:super::)+)((?:\w+::)*\w+)", code):
        up = m.group(1).count("super::")
        # `super` of a mod.rs/lib.rs module is its parent; of foo.rs, foo's parent too.
        parent = here[: len(here) - up] if up <= len(here) else []
        refs.append(parent + m.group(2).split("::"))
    # `use crate::{a, b::c}` groups.
    for m in re.finditer(r"\buse crate::\{([^;]*)\};", code, flags=re.S):
        for part in re.split(r"[,{}\s]+", m.group(1)):
            if part and part != "self":
                refs.append(part.split("::"))
    for names in refs:
        t = resolve(src, names)
        if t and t != f and not t.endswith(("lib.rs", "main.rs")):
            out.add(t)
    return out


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    failures = []
    graph = {}
    seen_over = set()
    for src in crate_roots("."):
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for name in filenames:
                # A module of tests in a file of its own (`#[cfg(test)] mod tests;`).
                if not name.endswith(".rs") or name == "tests.rs":
                    continue
                f = os.path.join(dirpath, name)
                rel = os.path.relpath(f)
                text = open(f, encoding="utf-8").read()
                code = code_of(text)
                lines = len(code_of_lines(text))
                if lines > MAX_LINES:
                    seen_over.add(rel)
                    if rel not in OVER:
                        failures.append(f"{rel}: {lines} lines of code, more than {MAX_LINES}: split it into rooms of one concept")
                graph[rel] = {os.path.relpath(t) for t in arrows(src, f, code)}
    for rel in OVER:
        if rel not in seen_over:
            failures.append(f"{rel} is within {MAX_LINES} lines now: remove it from OVER in scripts/check-structure.py")
    for comp in sccs(graph):
        if len(comp) < 2:
            continue
        if any(comp <= allowed for allowed in ALLOWED_CYCLES):
            continue
        ties = sorted(f"{a} -> {b}" for a in comp for b in graph[a] if b in comp)
        failures.append("import cycle between " + ", ".join(sorted(comp)) + ":\n    " + "\n    ".join(ties))
    for allowed in ALLOWED_CYCLES:
        comps = [c for c in sccs(graph) if len(c) > 1 and c <= allowed]
        if not comps:
            failures.append("an allowed cycle is gone (" + ", ".join(sorted(allowed)[:3]) + ", ...): remove it from ALLOWED_CYCLES")
    if failures:
        print("structure: " + str(len(failures)) + " rule(s) broken", file=sys.stderr)
        for x in failures:
            print("  " + x, file=sys.stderr)
        return 1
    print(f"structure: every file within {MAX_LINES} lines of code but the {len(OVER)} listed; no import cycle but the {len(ALLOWED_CYCLES)} allowed")
    return 0


def code_of_lines(text):
    """The file's lines before its test module (comments and blank lines counted, as an
    editor shows the file)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\b", text, flags=re.M)
    if m:
        text = text[: m.start()]
    return text.rstrip("\n").split("\n")


if __name__ == "__main__":
    sys.exit(main())
