#!/usr/bin/env python3
"""Check traceforge's launch statistics and queue lengths against live HTA on one trace.

HTA runs in its own Python (``--hta``; see ``scripts/hta_job.py``), traceforge here, both
with HTA's choices: its launch APIs and the last profiler step dropped. Both sides reduce
their tables with the same ``hta_job.summary``; prints both and exits 1 where they differ.

    python scripts/hta_crosscheck.py TRACE --hta PYTHON
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

from traceforge.analyses.launch_delay import HTA_LAUNCH_STATS_APIS, launch_table  # noqa: E402
from traceforge.analyses.launches import HTA_QUEUE_APIS, last_step_start  # noqa: E402
from traceforge.analyses.queue_length import queue_length  # noqa: E402
from traceforge.columns.scan import scan  # noqa: E402


def ours(trace: Path) -> dict:
    cols = scan(str(trace))
    cut = last_step_start(cols)
    launches = launch_table(cols, apis=HTA_LAUNCH_STATS_APIS, launched_before_ns=cut)
    in_us = launches[["launch_delay", "cpu_duration", "gpu_duration"]] / 1000
    return summary(in_us, queue_length(cols, launched_before_ns=cut, apis=HTA_QUEUE_APIS))


def hta(trace: Path, python: Path) -> dict:
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([str(python), str(SCRIPTS / "hta_job.py"), "numbers", str(trace), work],
                              check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--hta", type=Path, required=True, metavar="PYTHON", help="a Python with HTA installed")
    args = parser.parse_args()
    theirs, mine = hta(args.trace, args.hta), ours(args.trace)
    differ = [key for key in mine if mine[key] != theirs[key]]
    for key in mine:
        print(f"{key}: traceforge {mine[key]}  HTA {theirs[key]}{'  DIFFERENT' if key in differ else ''}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
