#!/usr/bin/env python3
"""Whether two checkouts of traceforge merge the same ranks into the same text.

Runs ``python -m traceforge merge`` (and ``collectives --format json``) from each checkout
on each rank directory with a few option sets (plain, ``--jobs 2``, ``--all``, ``--window``,
``--ranks 0,1 --no-align``), and prints the SHA-256 of the merged file's text (decompressed:
with ``--jobs`` above 1 the ranks come as compressed members of their own, so the compressed
bytes differ from one process's stream) and of the tables per case; exit 1 where they differ.
For a change meant to keep ``merge``'s output as it was (issue 51's speed work):

    git worktree add /tmp/before HEAD~3   # then copy the built .so files in, as the checkout has them
    python scripts/compare_merge.py /tmp/before . ../shared/traces/hta/trace_filter /tmp/ranks
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {"plain": [], "jobs2": ["--jobs", "2"], "all": ["--all"], "window": ["--window", "+10ms:+60ms"],
         "ranks": ["--ranks", "0,1", "--no-align"]}


def digests(checkout: Path, ranks: Path, work: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, options in CASES.items():
        merged = work / f"{name}.json.gz"
        run = subprocess.run([sys.executable, "-m", "traceforge", "merge", str(ranks), "-o", str(merged), *options],
                             cwd=checkout, capture_output=True)
        if run.returncode:
            out[name] = f"exit {run.returncode}: {run.stderr.decode(errors='replace').strip().splitlines()[-1:]}"
            continue
        raw = merged.read_bytes()
        out[name] = hashlib.sha256(gzip.decompress(raw)).hexdigest()[:16]
    tables = subprocess.run([sys.executable, "-m", "traceforge", "collectives", str(ranks), "--format", "json"],
                            cwd=checkout, capture_output=True)
    out["collectives"] = hashlib.sha256(tables.stdout).hexdigest()[:16] if not tables.returncode else "failed"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="a checkout of traceforge (its root)")
    parser.add_argument("after", type=Path, help="another checkout")
    parser.add_argument("ranks", nargs="+", type=Path, help="directories of rank traces")
    args = parser.parse_args()
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in args.ranks:
            found = []
            for side, checkout in (("before", args.before), ("after", args.after)):
                work = Path(tmp) / side
                work.mkdir(exist_ok=True)
                found.append(digests(checkout.resolve(), ranks.resolve(), work))
            for case in found[0]:
                ok = found[0][case] == found[1][case]
                same &= ok
                print(f"{'same' if ok else 'DIFFERENT'}  {ranks}  {case}: {found[0][case]}"
                      + ("" if ok else f"  vs  {found[1][case]}"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
