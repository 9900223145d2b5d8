#!/usr/bin/env python3
"""The workspace's structure rules, checked the way CI checks them, in
every member of the workspace (the `tollgate` crate at the root, each
crate under `crates/`, and the test crates):

1. no source file over 600 lines (split by concept, not into "utils");
2. no import circle between source files of a crate: a file that uses
   another (`use crate::a::b`, `super::x`, a `crate::` path in code) while
   that one, directly or through others, uses it back. A module's own file
   and the files of its submodules are one family (a parent re-exports its
   children, a child names its parent's items): edges inside a family are
   not counted;
3. a crate's code names only its own features (`cfg(feature = "...")`): a
   lower crate never knows which upper layer is turned on;
4. no crate uses another crate's `#[doc(hidden)]` public items: layers
   meet only through documented APIs. (Import circles between crates are
   impossible: Cargo refuses them.)

Today's exceptions are written in scripts/structure-baseline.txt: a file
listed there may not grow past the length written beside it, and a circle
listed there may not gain members. Anything new over a rule fails, and so
does a baseline entry that no longer applies (delete it: the rule then
holds for that file or circle for good).

    python3 scripts/check-structure.py            # check
    python3 scripts/check-structure.py --report   # print the figures
"""

import os
import re
import sys

import workspace

ROOT = workspace.ROOT
BASELINE = os.path.join(ROOT, "scripts", "structure-baseline.txt")
MAX_LINES = 600


def crates():
    """(name, src directory, features) of every member of the workspace."""
    out = []
    for crate, d, manifest in workspace.members():
        features = re.search(r"^\[features\]\n(.*?)(?:^\[|\Z)", manifest, re.M | re.S)
        names = set(re.findall(r"^([\w-]+)\s*=", features.group(1), re.M)) if features else set()
        # optional dependencies are features too
        names |= set(re.findall(r"^([\w-]+)\s*=\s*\{[^}]*optional\s*=\s*true", manifest, re.M))
        out.append((crate, os.path.join(d, "src"), names))
    return out


def module_of(path, src):
    """src/a/b.rs -> ('a', 'b'); src/a/mod.rs -> ('a',); src/lib.rs -> ()."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def source_files(src):
    out = []
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                out.append(os.path.join(d, f))
    return sorted(out)


def code_of(text):
    """The text without comments (line and block), string literals and
    inline unit-test modules (`#[cfg(test)] mod tests { .. }`: what a test
    uses is not what the module depends on)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\((?:all\()?test\b[^\]]*\]\s*mod\s+\w+\s*\{", text):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[pos : m.start()])
        pos = i
    out.append(text[pos:])
    return "".join(out)


def absolute(path, here):
    """A `use` path made absolute: `crate::a`, `super::a`, `self::a`, or a
    child module `a` of `here` (an external crate's path resolves to no
    source file later)."""
    segs = path.split("::")
    if segs[0] == "crate":
        return tuple(segs[1:])
    mod = list(here)
    if segs[0] == "self":
        segs = segs[1:]
    while segs and segs[0] == "super":
        mod = mod[:-1]
        segs = segs[1:]
    return tuple(mod) + tuple(segs)


def use_items(spec):
    """The paths a `use` names, with their aliases: `a::{b, c::D as E}` ->
    [("a::b", ""), ("a::c::D", "E")] (one level of braces; a nested group
    counts as its module)."""
    spec = " ".join(spec.split())
    group = re.match(r"^(.*?)::\{(.*)\}$", spec)
    if group:
        parts = [group.group(1) + "::" + part for part in group.group(2).split(",")]
    else:
        parts = [spec]
    items = []
    for part in parts:
        path, _, alias = part.partition(" as ")
        path = re.sub(r"::\{.*|[{} ]", "", path).removesuffix("::self")
        if path:
            items.append((path, alias.strip()))
    return items


def paths_used(code, here):
    """Module paths a file names: the items of its `use` declarations and
    every `crate::a::b::C` or `super::x` path in its code."""
    found = [path for m in re.finditer(r"\buse\s+([^;]+);", code) for path, _ in use_items(m.group(1))]
    found += [m.group(0) for m in re.finditer(r"\b(crate|super(?:::super)*)(::\w+)+", code)]
    local = ("crate", "super", "self")
    return [absolute(p, here) for p in found if p.split("::")[0] in local]


def reexports_of(code, here):
    """What a module re-exports (`pub use a::b::C;`, `pub use a::{b, c::D as E};`):
    name -> the absolute path it stands for."""
    out = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
        for path, alias in use_items(m.group(1)):
            target = absolute(path, here)
            if target:
                out[alias or target[-1]] = target
    return out


def resolve(path, modules, reexports, depth=0):
    """The source file that defines what `path` names: the longest prefix
    that is a module, followed through that module's re-exports."""
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            mod = path[:n]
            if depth < 8 and n < len(path):
                target = reexports.get(mod, {}).get(path[n])
                if target is not None and target[:-1] != mod:
                    found = resolve(target + path[n + 1 :], modules, reexports, depth + 1)
                    if found is not None:
                        return found
            return mod
    return None


def family(a, b):
    return a[: len(b)] == b or b[: len(a)] == a


def circles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def name(mod):
    return "::".join(mod) or "crate"


def without_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


HIDDEN = re.compile(
    r"#\[doc\(hidden\)\]\s*(?:#\[[^\]]*\]\s*)*pub\s+(?:const\s+|async\s+|unsafe\s+)*"
    r"(?:fn|struct|enum|trait|mod|const|static|type|macro_rules!)\s+(\w+)"
)


def main():
    report = "--report" in sys.argv
    lengths, named, errors = {}, [], []
    hidden, texts = {}, {}
    for crate, src, features in crates():
        files = source_files(src)
        modules = {module_of(f, src): f for f in files}
        graph, codes, reexports = {}, {}, {}
        texts[crate] = []
        hidden[crate] = set()
        for f in files:
            text = open(f, encoding="utf-8").read()
            rel = os.path.relpath(f, ROOT)
            lengths[rel] = text.count("\n")
            codes[f] = code_of(text)
            reexports[module_of(f, src)] = reexports_of(codes[f], module_of(f, src))
            bare = without_comments(text)
            texts[crate].append((rel, bare))
            hidden[crate] |= set(HIDDEN.findall(bare))
            for m in re.finditer(r'\bfeature\s*=\s*"([\w-]+)"', bare):
                if m.group(1) not in features:
                    line = bare.count("\n", 0, m.start()) + 1
                    errors.append(
                        f"{rel}:{line}: feature \"{m.group(1)}\" is not a feature of {crate}: "
                        "a crate may not know which upper layer is on (give the layer a public seam)"
                    )
        for f in files:
            here = module_of(f, src)
            edges = set()
            for p in paths_used(codes[f], here):
                target = resolve(p, modules, reexports)
                if target is None or family(target, here):
                    continue
                edges.add(target)
            graph[here] = edges
        named += [[f"{crate}::{name(m)}" for m in c] for c in circles(graph)]

    # a crate's hidden items, named by another crate's code
    for owner, items in hidden.items():
        lib = owner.replace("-", "_")
        for crate, files in texts.items():
            if crate == owner:
                continue
            for rel, bare in files:
                uses_owner = re.search(rf"\b{lib}\b", bare) or crate == "tollgate"
                for item in sorted(items):
                    m = re.search(rf"(?:::|\.)\s*{item}\b", bare)
                    if uses_owner and m:
                        line = bare.count("\n", 0, m.start()) + 1
                        errors.append(
                            f"{rel}:{line}: uses `{item}`, a #[doc(hidden)] item of {owner}: "
                            "layers meet only through documented APIs"
                        )

    allowed_len, allowed_circles = {}, []
    if os.path.exists(BASELINE):
        for line in open(BASELINE, encoding="utf-8"):
            line = line.split("#")[0].strip()
            if not line:
                continue
            kind, rest = line.split(None, 1)
            if kind == "long":
                path, n = rest.rsplit(None, 1)
                allowed_len[path] = int(n)
            elif kind == "circle":
                allowed_circles.append(sorted(rest.split()))

    long_files = {p: n for p, n in lengths.items() if n > MAX_LINES}
    for p, n in sorted(long_files.items()):
        if p not in allowed_len:
            errors.append(f"{p}: {n} lines, over {MAX_LINES}: split it by concept")
        elif n > allowed_len[p]:
            errors.append(f"{p}: {n} lines, grew past its baseline of {allowed_len[p]}")
    for p, n in sorted(allowed_len.items()):
        if p not in long_files:
            errors.append(
                f"{p}: in the baseline but now {lengths.get(p, 0)} lines: "
                "delete its line from scripts/structure-baseline.txt"
            )
    for c in named:
        if not any(set(c) <= set(a) for a in allowed_circles):
            errors.append("import circle: " + ", ".join(c) + " use one another in a circle")
    for a in allowed_circles:
        if not any(set(a) == set(c) for c in named):
            errors.append(
                "circle " + " ".join(a) + " in the baseline no longer exists as written: "
                "update scripts/structure-baseline.txt"
            )

    if report or errors:
        print(f"files over {MAX_LINES} lines: {len(long_files)}")
        for p, n in sorted(long_files.items(), key=lambda x: -x[1]):
            print(f"  {n:5}  {p}")
        print(f"import circles: {len(named)}")
        for c in named:
            print("  " + " <-> ".join(c))
    if errors:
        for e in errors:
            print("check-structure: " + e, file=sys.stderr)
        sys.exit(1)
    print(
        f"check-structure: files over {MAX_LINES} lines: {len(long_files)}, "
        f"import circles: {len(named)}, none beyond the baseline; every crate names only its "
        "own features and no other crate's hidden items"
    )


if __name__ == "__main__":
    main()
