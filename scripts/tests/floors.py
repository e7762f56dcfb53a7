"""The module graph of a Rust crate, read from its source as text, and the circles in it.

A module is one file (`foo.rs`, or `foo/mod.rs` for a folder). An arrow runs from a module to
every module whose items it names: `crate::a::b` paths, `super::`/`self::` paths, and a parent's
bare `child::` paths to the modules it declares. Declaring `mod child;` is not an arrow, nor is a
folder's `pub use child::Name` (its face): a path through a re-export resolves to the module
that defines the name, so the arrow runs there. Test
code is left out (files named `tests.rs`/`*_tests.rs` or under `tests/`, and everything after a
`#[cfg(test)]` module at the bottom of a file): tests may reach anywhere.

Usage: python3 scripts/tests/floors.py CRATE_SRC...  (prints each circle, exit 1 if any)
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
# `use a::{b, c::d}` groups are flattened by expanding braces textually below.
USE = re.compile(r"\buse\s+([^;]+);", re.S)
# A folder's face: `pub use child::...;` re-exporting its own children.
PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+((?!crate::|super::)[^;]+);", re.S)
PUB_USE_LINE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+(?!crate::|super::)[^;]+;", re.S)
MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", re.M)
CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING = re.compile(r'r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"')


def is_test_file(rel):
    parts = rel.split(os.sep)
    name = parts[-1]
    return "tests" in parts[:-1] or name == "tests.rs" or name.endswith("_tests.rs")


def module_of(rel):
    """`a/b.rs` -> ('a', 'b'); `a/mod.rs` -> ('a',); `lib.rs` -> ()."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main") and (parts[-1] == "mod" or len(parts) == 1):
        parts = parts[:-1]
    return tuple(parts)


def expand_use(body):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    body = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", body))
    i = body.find("{")
    if i < 0:
        return [body]
    depth, j = 0, i
    for j in range(i, len(body)):
        if body[j] == "{":
            depth += 1
        elif body[j] == "}":
            depth -= 1
            if depth == 0:
                break
    prefix, inner, rest = body[:i], body[i + 1:j], body[j + 1:]
    items, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:k])
            start = k + 1
    items.append(inner[start:])
    out = []
    for item in items:
        if item:
            out += [prefix + e + rest for e in expand_use(item)]
    return out


def code_of(text):
    text = COMMENT.sub("", STRING.sub('""', text))
    m = CFG_TEST_MOD.search(text)
    return text[: m.start()] if m else text


def graph(src):
    mods = {}
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "bin"]
        for f in files:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, f), src)
                if not is_test_file(rel) and rel not in ("build.rs",):
                    mods[module_of(rel)] = os.path.join(src, rel)
    edges = {m: set() for m in mods}
    codes, faces = {}, {}
    for m, file in mods.items():
        with open(file) as fh:
            codes[m] = code_of(fh.read())
        faces[m] = {}
        for body in PUB_USE.findall(codes[m]):
            for p in expand_use(body):
                segs = p.split("::")
                if segs[0] in ("self", "crate", "super") and segs[0] != "self":
                    continue
                segs = segs[1:] if segs[0] == "self" else segs
                if len(segs) >= 2 and segs[-1] != "*":
                    faces[m][segs[-1]] = tuple(m) + tuple(segs[:-1])

    def resolve(base, segs, depth=0):
        path = list(base) + list(segs)
        while path:
            t = tuple(path)
            if t in mods:
                rest = (list(base) + list(segs))[len(t):]
                if rest and rest[0] in faces[t] and depth < 8:
                    return resolve(faces[t][rest[0]], rest[1:], depth + 1) or t
                return t
            path.pop()
        return None

    for m, file in mods.items():
        code = codes[m]
        children = set(MOD.findall(code))
        face = PUB_USE_LINE.sub("", code)
        paths = [p for body in USE.findall(face) for p in expand_use(body)]
        paths += [a + b for a, b in PATH.findall(code)]
        # A parent's bare `child::...` names (in `use child::X` or in expressions).
        paths += ["self::" + c + tail for c, tail in
                  re.findall(r"(?<![:\w])(" + "|".join(map(re.escape, children)) + r")((?:::\w+)+)", face)
                  ] if children else []
        for p in paths:
            segs = p.split("::")
            head, segs = segs[0], segs[1:]
            if head == "crate":
                base = ()
            elif head == "self":
                base = m
            elif head == "super":
                base = m[:-1]
                while segs and segs[0] == "super":
                    base, segs = base[:-1], segs[1:]
            else:
                continue
            target = resolve(base, segs)
            if target is not None and target != m and target != ():
                edges[m].add(target)
    return mods, edges


def circles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def describe(src, mods, edges, comp):
    names = {m: os.path.relpath(mods[m]) for m in comp}
    lines = [f"{len(comp)} modules in a circle:"]
    for m in comp:
        for t in sorted(edges[m] & set(comp)):
            lines.append(f"  {names[m]} -> {names[t]}")
    return "\n".join(lines)


def main(argv):
    bad = 0
    for src in argv:
        mods, edges = graph(src)
        for comp in circles(edges):
            print(f"{src}: " + describe(src, mods, edges, comp))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
