#!/usr/bin/env python3
"""Counts tollgate's public types, as a user of the docs sees them.

    python3 scripts/public-types.py [--list]

Builds the rustdoc JSON of `tollgate` and of each crate of the workspace
under `crates/` with every feature (nightly rustdoc: `rustup toolchain
install nightly`), walks the public module tree from `tollgate`'s root
(following re-exports, into the workspace crates it re-exports), and
counts each struct, enum, union, trait and type alias once, wherever it is
reachable. Types of a workspace crate that `tollgate` does not re-export
are listed apart: public for the crates built on it, not for a user.
Issue 25 and 26 state the API's size in this count (135 on 2026-12-04).
"""
import collections
import json
import os
import subprocess
import sys

import workspace

ROOT = workspace.ROOT
TARGET = os.path.join(ROOT, "target", "rustdoc-json")
KINDS = ("struct", "enum", "union", "trait", "type_alias", "trait_alias")


def build(package):
    subprocess.run(
        ["cargo", "+nightly", "rustdoc", "-p", package, "--lib", "--all-features",
         "--target-dir", TARGET, "--", "-Z", "unstable-options", "--output-format", "json"],
        cwd=ROOT, check=True)
    with open(os.path.join(TARGET, "doc", package.replace("-", "_") + ".json")) as f:
        return json.load(f)


def public_types(docs, crate):
    """{(crate, id): (kind, path)} of the types reachable from `crate`'s root."""
    found = {}

    def by_path(crate, path):
        # an item of `crate` named by its full path (from another crate's
        # `paths` table): its id in `crate`'s own JSON
        for item_id, summary in docs[crate]["paths"].items():
            if summary["crate_id"] == 0 and summary["path"] == path:
                return item_id
        return None

    def visit(crate, item_id, path, top=False, name=None):
        item_id = str(item_id)
        doc = docs[crate]
        item = doc["index"].get(str(item_id))
        if item is None:
            # another crate's item: follow it into that crate if it is ours
            summary = doc["paths"].get(str(item_id))
            if summary is None or summary["path"][0] not in docs:
                return
            other = summary["path"][0]
            target = by_path(other, summary["path"])
            if target is not None:
                visit(other, target, path, top=True, name=name)
            return
        if not top and item.get("visibility") != "public":
            return
        kind, inner = next(iter(item["inner"].items()))
        if kind == "module":
            for child in inner["items"]:
                visit(crate, child, path + [name or item["name"] or crate])
        elif kind == "use":
            if inner.get("id") is None:
                return  # a re-export of a foreign crate's item
            if inner["is_glob"]:
                target = doc["index"].get(str(inner["id"]))
                if target and "module" in target["inner"]:
                    for child in target["inner"]["module"]["items"]:
                        visit(crate, child, path)
            else:
                visit(crate, inner["id"], path, name=inner["name"])
        elif kind in KINDS and item["crate_id"] == 0 and (crate, item_id) not in found:
            found[(crate, item_id)] = (kind, "::".join(path + [name or item["name"]]))

    visit(crate, docs[crate]["root"], [], top=True)
    return found


def main():
    docs = {crate.replace("-", "_"): build(crate) for crate in workspace.published()}
    user = public_types(docs, "tollgate")
    types = sorted(user.values())
    by_kind = collections.Counter(kind for kind, _ in types)
    if "--list" in sys.argv:
        for kind, path in types:
            print(f"{kind:10} {path}")
    print("public types:", len(types), dict(sorted(by_kind.items())))
    for crate in sorted(docs):
        if crate == "tollgate":
            continue
        own = public_types(docs, crate)
        hidden = sorted(v for k, v in own.items() if k not in user)
        print(f"{crate}: {len(own)} public types, {len(own) - len(hidden)} re-exported by tollgate")
        for kind, path in hidden:
            print(f"  not re-exported: {kind:10} {path}")


if __name__ == "__main__":
    main()
