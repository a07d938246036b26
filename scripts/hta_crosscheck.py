#!/usr/bin/env python3
"""Check traceforge's launch statistics and queue lengths against live HTA on one trace.

HTA runs in its own Python (``--hta``; see ``scripts/hta_job.py``), traceforge here with HTA's
choices, as ``launch-stats --hta`` and ``stats --hta VERSION`` make them (``hta_choices``:
HTA's view of the trace, its launch APIs). Both sides reduce their tables with the same
``hta_job.summary``; prints both and exits 1 where they differ.

    python scripts/hta_crosscheck.py TRACE --hta PYTHON [--version 0.5.0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hta_job import summary

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS.parent))  # this checkout's traceforge

from traceforge.analyses.hta.choices import HTA_VERSIONS, LATEST_HTA, hta_launch_table, hta_view, queue_apis  # noqa: E402
from traceforge.analyses.launches.queue_length import queue_length  # noqa: E402
from traceforge.columns.scan import scan  # noqa: E402


def ours(trace: Path, version: str) -> dict:
    cols = scan(str(trace))
    queue = queue_length(hta_view(cols), apis=queue_apis(version))
    launches = hta_launch_table(cols)  # consumes cols
    in_us = launches[["launch_delay", "cpu_duration", "gpu_duration"]] / 1000
    return summary(in_us, queue)


def hta(trace: Path, python: Path) -> dict:
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([str(python), str(SCRIPTS / "hta_job.py"), "numbers", str(trace), work],
                              check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--hta", type=Path, required=True, metavar="PYTHON", help="a Python with HTA installed")
    parser.add_argument("--version", choices=HTA_VERSIONS, default=LATEST_HTA,
                        help=f"the HTA version in that Python, whose choices to make (default {LATEST_HTA})")
    args = parser.parse_args()
    theirs, mine = hta(args.trace, args.hta), ours(args.trace, args.version)
    differ = [key for key in mine if mine[key] != theirs[key]]
    for key in mine:
        print(f"{key}: traceforge {mine[key]}  HTA {theirs[key]}{'  DIFFERENT' if key in differ else ''}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
