"""The members of the Cargo workspace, read from the root Cargo.toml: one
reader for the scripts that walk every crate (check-structure.py,
test-summary.py, public-types.py)."""

import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def members():
    """(name, directory, manifest text) of every member, in the order the
    root manifest lists them."""
    root = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read()
    listed = re.search(r"members\s*=\s*\[(.*?)\]", root, re.S).group(1)
    out = []
    for d in re.findall(r'"([^"]+)"', listed):
        path = os.path.normpath(os.path.join(ROOT, d))
        manifest = open(os.path.join(path, "Cargo.toml"), encoding="utf-8").read()
        name = re.search(r'^name = "([^"]+)"', manifest, re.M).group(1)
        out.append((name, path, manifest))
    return out


def published():
    """The names of the members that are published (no `publish = false`)."""
    return [n for n, _, m in members() if not re.search(r"^publish\s*=\s*false", m, re.M)]
