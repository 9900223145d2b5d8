#!/usr/bin/env python3
"""What each embedded pattern adds to a firmware image, measured, and the
docs checked against the measurement.

Builds `examples/firmware`'s size probe (release, opt-level "s", LTO) for
each pattern with the limiter and with a no-op in its place (feature
`noop-limiter`), on thumbv6m, thumbv7m and thumbv7em, and takes the
difference in `.text` (flash) and in RAM (`.data` + `.bss`; never less than
the probe's own limiter statics, which can fill what was alignment padding).

    scripts/firmware-sizes.py            measure and print the table
    scripts/firmware-sizes.py --target thumbv7m-none-eabi --pattern static
                                         measure one target and/or one pattern
    scripts/firmware-sizes.py --write    measure and write the table into the docs
    scripts/firmware-sizes.py --check    measure; fail if a documented figure is
                                         more than 5 % from the measurement
    scripts/firmware-sizes.py --self-test
                                         check the checker: every documented figure
                                         changed by 10 % must be caught

The table sits between `<!-- sizes: begin -->` and `<!-- sizes: end -->` in
each file of DOCS; the figures in the README's prose are in `<!-- size:KEY -->`
... `<!-- /size -->` pairs naming a cell (for example `thumbv7m/static/text`).
"""

import argparse
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRMWARE = ROOT / "examples" / "firmware"
DOCS = [ROOT / "src" / "guide.rs", ROOT / "README.md"]
TARGETS = ["thumbv6m-none-eabi", "thumbv7m-none-eabi", "thumbv7em-none-eabihf"]
SHORT = {t: t.split("-")[0] for t in TARGETS}
# pattern key -> (features of the probe, what the row says)
PATTERNS = {
    "tick": (["probe-tick"], "tick bucket: `static TickGcra` + `TickState`, `check_ticks`"),
    "split": ([], "`static Gcra` (flash) + `GcraState`, checked"),
    "static": (["probe-static"], "`static Bucket<Gcra>`, `check(now)`"),
    "acquire": (["probe-acquire"], "`static Gcra` + `GcraState`, `embassy::acquire(..).await` (against a plain `Timer`)"),
    "keyed": (["probe-keyed"], "`static HeaplessKeyedTable<u8, Gcra, 8>`, 16 keys taking turns"),
}
RELATIVE = 0.05



def elf_sizes(path):
    """(.text, .data + .bss, RAM bytes of the probe's limiter statics)."""
    d = path.read_bytes()
    shoff, = struct.unpack_from("<I", d, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x2E)
    secs = [struct.unpack_from("<IIIIIIIIII", d, shoff + i * shentsize) for i in range(shnum)]
    stroff = secs[shstrndx][4]

    def name(off, base):
        return d[base + off:d.index(b"\0", base + off)].decode()

    by_name = {name(s[0], stroff): (i, s) for i, s in enumerate(secs)}
    text = by_name.get(".text", (0, [0] * 10))[1][5]
    ram_idx = {by_name[n][0] for n in (".data", ".bss") if n in by_name}
    ram = sum(by_name[n][1][5] for n in (".data", ".bss") if n in by_name)
    own = 0
    if ".symtab" in by_name and ".strtab" in by_name:
        _, sym = by_name[".symtab"]
        strbase = by_name[".strtab"][1][4]
        for off in range(sym[4], sym[4] + sym[5], 16):
            st_name, _, st_size, _, _, st_shndx = struct.unpack_from("<IIIBBH", d, off)
            if st_shndx in ram_idx and st_size and "7limiter" in name(st_name, strbase):
                own += st_size
    return text, ram, own


def build(target, features):
    tdir = "target/sizes"
    cmd = ["cargo", "build", "--release", "--quiet", "--target", target, "--bin", "size-probe",
           "--target-dir", tdir]
    if features:
        cmd += ["--features", ",".join(features)]
    subprocess.run(cmd, cwd=FIRMWARE, check=True)
    return elf_sizes(FIRMWARE / tdir / target / "release" / "size-probe")


def measure(targets=TARGETS, patterns=tuple(PATTERNS)):
    cells = {}
    for target in targets:
        for key in patterns:
            features = PATTERNS[key][0]
            t1, r1, own = build(target, features)
            base = ["noop-limiter"] + [f for f in features if f == "probe-acquire"]
            t0, r0, _ = build(target, base)
            cells[f"{SHORT[target]}/{key}/text"] = t1 - t0
            cells[f"{SHORT[target]}/{key}/ram"] = max(r1 - r0, own)
            print(f"{target:24} {key:8} .text +{t1 - t0:5}  RAM +{max(r1 - r0, own):4}", file=sys.stderr)
    return cells


def table(cells):
    head = "| pattern | " + " | ".join(f"{SHORT[t]}: flash / RAM" for t in TARGETS) + " |"
    rows = [head, "|---|" + "---|" * len(TARGETS)]
    for key, (_, what) in PATTERNS.items():
        row = [f"+{cells[f'{SHORT[t]}/{key}/text']} / +{cells[f'{SHORT[t]}/{key}/ram']} B" for t in TARGETS]
        rows.append(f"| {what} | " + " | ".join(row) + " |")
    return rows


TABLE = re.compile(r"(<!-- sizes: begin -->)(.*?)(\n[^\n]*<!-- sizes: end -->)", re.S)
CELL = re.compile(r"<!-- size:([a-z0-9]+/[a-z]+/(?:text|ram)) -->(\d+)<!-- /size -->")
NUM = re.compile(r"\+(\d+) / \+(\d+) B")


def documented(text, prefix):
    """{cell: figure} from one file's table and inline figures."""
    found = {}
    m = TABLE.search(text)
    if m:
        for line in m.group(2).split("\n"):
            body = line[len(prefix):] if line.startswith(prefix) else line
            cols = [c.strip() for c in body.strip().strip("|").split("|")]
            key = next((k for k, (_, w) in PATTERNS.items() if cols and cols[0] == w), None)
            if key is None:
                continue
            for t, col in zip(TARGETS, cols[1:]):
                n = NUM.fullmatch(col)
                if n:
                    found[f"{SHORT[t]}/{key}/text"] = int(n.group(1))
                    found[f"{SHORT[t]}/{key}/ram"] = int(n.group(2))
    for k, v in CELL.findall(text):
        found.setdefault(k, int(v))
        if found[k] != int(v):
            found[k + " (inline)"] = int(v)
    return found


def prefix_of(path):
    return "//! " if path.suffix == ".rs" else ""


def mismatches(docs, cells):
    bad = []
    for path, text in docs.items():
        doc = documented(text, prefix_of(path))
        if not doc:
            bad.append(f"{path.relative_to(ROOT)}: no size figures found (markers missing?)")
        for k, v in doc.items():
            real = cells.get(k.split(" ")[0])
            if real is None:
                bad.append(f"{path.relative_to(ROOT)}: {k} = {v}: no such measurement")
            elif abs(v - real) > RELATIVE * real and v != real:
                bad.append(f"{path.relative_to(ROOT)}: {k} documented {v}, measured {real}")
    return bad


def write(cells):
    for path in DOCS:
        text = path.read_text()
        pre = prefix_of(path)
        if TABLE.search(text):
            body = "".join("\n" + pre + r for r in table(cells))
            text = TABLE.sub(lambda m: m.group(1) + body + m.group(3), text)
        text = CELL.sub(lambda m: f"<!-- size:{m.group(1)} -->{cells[m.group(1)]}<!-- /size -->", text)
        path.write_text(text)


def self_test(cells):
    """Every documented figure changed by 10 % (up and down) must fail the check."""
    docs = {p: p.read_text() for p in DOCS}
    assert not mismatches(docs, cells), "the docs do not match the measurement to start with"
    tried = 0
    for path, text in docs.items():
        for m in list(re.finditer(r"\+(\d+) / \+(\d+) B|<!-- size:[^ ]+ -->(\d+)<!-- /size -->", text)):
            for g in (1, 2, 3):
                if m.group(g) is None:
                    continue
                v = int(m.group(g))
                for changed in (round(v * 1.1), round(v * 0.9)):
                    if changed == v:
                        changed = v + 1  # a figure of a few bytes: any change
                    edited = text[:m.start(g)] + str(changed) + text[m.end(g):]
                    tried += 1
                    if not mismatches({**docs, path: edited}, cells):
                        sys.exit(f"self-test: {path.name}: {v} -> {changed} was not caught")
    print(f"self-test: all {tried} changes of a documented figure by 10 % are caught")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--target", choices=TARGETS, help="measure this target only")
    ap.add_argument("--pattern", choices=list(PATTERNS), help="measure this pattern only")
    a = ap.parse_args()
    if a.target or a.pattern:
        if a.write or a.check or a.self_test:
            ap.error("--write, --check and --self-test need every target and pattern")
        measure([a.target] if a.target else TARGETS, [a.pattern] if a.pattern else list(PATTERNS))
        return
    cells = measure()
    print("\n".join(table(cells)))
    if a.write:
        write(cells)
    if a.check or a.self_test:
        bad = mismatches({p: p.read_text() for p in DOCS}, cells)
        if bad:
            print("size figures in the docs drifted from the measurement "
                  "(scripts/firmware-sizes.py --write updates them):", file=sys.stderr)
            print("\n".join("  " + b for b in bad), file=sys.stderr)
            sys.exit(1)
        print("size check: every documented figure is within 5 % of the measurement")
    if a.self_test:
        self_test(cells)


if __name__ == "__main__":
    main()
