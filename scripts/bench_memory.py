"""Peak RSS, time and output of ``annotate --all`` for one or more traceforge trees, interleaved.

    python3 scripts/bench_memory.py TRACE [--tree DIR ...] [--repeat N] [-- ANNOTATE_ARGS...]

Each round runs every tree once on TRACE (tree A, tree B, tree A, ...), each in its own child
process (``python3 -m traceforge annotate TRACE --all -o OUT``, the tree's directory first on
``PYTHONPATH``), and prints wall s, CPU s (user+sys) and peak RSS MB from ``wait4`` and the
sha256 of the decompressed output (outputs are equal when the hashes are). ``--tree`` defaults
to this checkout. The machine's load average is printed first: compare only runs made together.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench import decompressed_chunks  # noqa: E402  (a script beside this one)


def run(tree: Path, trace: str, extra: list[str], out: Path) -> tuple[float, float, float, int]:
    """One run in ``tree`` (its working directory: ``-m`` puts it first on the path, before
    ``PYTHONPATH``; ``bench.run_child`` spawns where this process runs)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, "-m", "traceforge", "annotate", trace, "--all", "-o", str(out), *extra]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def digest(path: Path) -> str:
    """The sha256 of the decompressed output (first 16 hex digits)."""
    h = hashlib.sha256()
    for block in decompressed_chunks(path):
        h.update(block)
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--tree", action="append", type=Path, help="a traceforge checkout (repeatable; default: this one)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the outputs (printed)")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    trees = args.tree or [ROOT]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {os.cpu_count()} cores", flush=True)
    suffix = ".json.gz" if args.trace.endswith(".gz") else ".json"
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for r in range(args.repeat):
            for i, tree in enumerate(trees):
                out = Path(tmp) / f"out{i}-{r}{suffix}"
                seconds, cpu, rss, code = run(tree, args.trace, extra, out)
                sha = digest(out) if code == 0 else f"exit {code}"
                print(f"round {r + 1} {tree}: {seconds:.1f} s, {cpu:.1f} CPU s, {rss:,.0f} MB peak RSS, {sha}",
                      flush=True)
                if not args.keep:
                    out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
