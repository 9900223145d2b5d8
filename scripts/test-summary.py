#!/usr/bin/env python3
"""Sums up a `cargo test` log per crate: tests passed, failed and ignored,
test runs (binaries and doctest sets), and the time the tests took to run
(the "finished in" of each run; compile time is not included).

    python3 scripts/test-summary.py LOG

A run is attributed to its crate by cargo's header line: `Running
unittests src/lib.rs (.../deps/<crate>-<hash>)`, `Doc-tests <crate>`, or
`Running tests/<file>.rs` or `tests/<group>/main.rs` (a path in its
package), looked up in the `tests/` directory of each workspace member
(`crates/tollgate-http/tests/http/main.rs` is tollgate-http's). A path
that two members have is shown as `a|b` (the header line does not say
which package it is of).
"""
import collections
import os
import re
import sys

import workspace

def main():
    crates = {name: path for name, path, _ in workspace.members()}
    owner = {}
    for crate, path in crates.items():
        tests = os.path.join(path, "tests")
        if os.path.isdir(tests):
            for f in os.listdir(tests):
                if f.endswith(".rs"):
                    path = "tests/" + f
                elif os.path.exists(os.path.join(tests, f, "main.rs")):
                    path = f"tests/{f}/main.rs"
                else:
                    continue
                owner[path] = f"{owner[path]}|{crate}" if path in owner else crate
    by_lib = {c.replace("-", "_"): c for c in crates}
    rows = collections.defaultdict(lambda: [0, 0, 0, 0, 0.0])
    # the header line of each run, and the crate it names
    headers = [
        (r"\s+Running unittests \S+ \(.*/deps/(\w+)-[0-9a-f]+\)", lambda n: by_lib.get(n, n)),
        (r"\s+Running (tests/\S+\.rs) ", lambda f: owner.get(f, "?")),
        (r"\s+Doc-tests (\w+)", lambda n: by_lib.get(n, n)),
    ]
    current = "?"
    for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
        named = [crate(m.group(1)) for pattern, crate in headers if (m := re.match(pattern, line))]
        if named:
            current = named[0]
            continue
        m = re.match(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;.*finished in ([\d.]+)s", line)
        if m:
            row = rows[current]
            for i in range(3):
                row[i] += int(m.group(i + 1))
            row[3] += 1
            row[4] += float(m.group(4))
    print(f"{'crate':28} {'passed':>7} {'failed':>7} {'ignored':>8} {'runs':>5} {'seconds':>8}")
    for crate in sorted(rows):
        p, f, g, n, t = rows[crate]
        print(f"{crate:28} {p:7} {f:7} {g:8} {n:5} {t:8.1f}")


if __name__ == "__main__":
    main()
