#!/usr/bin/env python3
"""Fails when the top-level modules of a crate import each other in a circle.

A module is a file or folder directly under a crate's `src/`; `crate::m`
paths outside `#[cfg(test)]` code are its imports. Modules inside one
file's own submodules are one module. Prints each circle with its edges.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = [os.path.join("crates", c, "src") for c in sorted(os.listdir(os.path.join(ROOT, "crates")))] + ["src-tauri/src"]


def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)
            top = rel[:-3].split(os.sep)[0]
            if top in ("lib", "main", "bin"):
                continue
            text = open(os.path.join(root, f), encoding="utf-8").read()
            cut = text.find("#[cfg(test)]")
            if cut >= 0:
                text = text[:cut]
            mods[top] = mods.get(top, "") + re.sub(r"//[^\n]*", "", text)
    return mods


def graph(src):
    mods = modules(src)
    g = {m: set() for m in mods}
    for m, text in mods.items():
        names = re.findall(r"crate::(\w+)", text)
        for block in re.findall(r"use crate::\{([^;]*)\};", text, re.S):
            names += re.findall(r"(?:^|[,{\s])(\w+)", block)
        g[m] |= {n for n in names if n in mods and n != m}
    return g


def circles(g):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    bad = 0
    for src in SOURCES:
        path = os.path.join(ROOT, src)
        if not os.path.isdir(path):
            continue
        g = graph(path)
        for comp in circles(g):
            bad += 1
            edges = "; ".join(f"{a} -> {', '.join(sorted(x for x in g[a] if x in comp))}" for a in comp)
            print(f"{src}: modules import each other in a circle: {edges}", file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"no import circle between the modules of {len(SOURCES)} crates")


if __name__ == "__main__":
    main()
