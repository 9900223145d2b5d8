#!/usr/bin/env python3
"""Counts tollgate's public types, as a user of the docs sees them.

    python3 scripts/public-types.py [--list]

Builds the rustdoc JSON of the library with every feature (nightly
rustdoc: `rustup toolchain install nightly`), walks the public module tree
from the crate root (following re-exports), and counts each struct, enum,
union, trait and type alias of tollgate once, wherever it is reachable.
Issue 25 and 26 state the API's size in this count (135 on 2026-12-04).
"""
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "target", "rustdoc-json")
KINDS = ("struct", "enum", "union", "trait", "type_alias", "trait_alias")


def build():
    subprocess.run(
        ["cargo", "+nightly", "rustdoc", "--lib", "--all-features", "--target-dir", TARGET,
         "--", "-Z", "unstable-options", "--output-format", "json"],
        cwd=ROOT, check=True)
    with open(os.path.join(TARGET, "doc", "tollgate.json")) as f:
        return json.load(f)


def public_types(doc):
    index = doc["index"]
    found = {}

    def visit(item_id, path, top=False):
        item = index.get(str(item_id))
        if item is None or (not top and item.get("visibility") != "public"):
            return
        kind, inner = next(iter(item["inner"].items()))
        if kind == "module":
            for child in inner["items"]:
                visit(child, path + [item["name"] or "tollgate"])
        elif kind == "use":
            if inner.get("id") is None:
                return  # a re-export of another crate's item
            if inner["is_glob"]:
                target = index.get(str(inner["id"]))
                if target and "module" in target["inner"]:
                    for child in target["inner"]["module"]["items"]:
                        visit(child, path)
            else:
                visit(inner["id"], path)
        elif kind in KINDS and item["crate_id"] == 0 and item_id not in found:
            found[item_id] = (kind, "::".join(path + [item["name"]]))

    visit(doc["root"], [], top=True)
    return found.values()


def main():
    types = sorted(public_types(build()))
    by_kind = collections.Counter(kind for kind, _ in types)
    if "--list" in sys.argv:
        for kind, path in types:
            print(f"{kind:10} {path}")
    print("public types:", len(types), dict(sorted(by_kind.items())))


if __name__ == "__main__":
    main()
