"""``traceforge repair``: rewrite a trace so Perfetto loses and misplaces nothing (opt-in)."""

from __future__ import annotations

import argparse
import sys

from ....io.write.output import output_compression
from ....io.write.output_names import default_output
from ....rewrite.repair import repair
from ...options import output_path
from .. import add_compression_argument, note_plain_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repair",
        help="move overlapping slices to extra threads, fix out-of-range thread ids, drop dangling flow ends",
        description="Copy a trace with the fixes Perfetto needs to show every slice where it belongs: "
        "complete slices that partially overlap another on their thread move to new threads named "
        "'<thread> (overlap k)' next to it (ts, dur and args untouched; their flow ends move with them); "
        "negative or >32-bit pids/tids get distinct positive ids (Perfetto would merge them onto the main "
        "thread); flow ends without a start are dropped. Nothing else is dropped. Check the result with "
        "'traceforge check'.",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst); read twice")
    p.add_argument("-o", "--output", type=output_path, help="output file; its suffix picks the compression (.json, .json.gz, "
                   ".json.zst). Default: <name>.repaired.json.gz beside the input (.json.zst for a .json.zst input, "
                   ".json for .json)")
    p.add_argument("--rebase-time", action="store_true",
                   help="write every ts relative to the trace start (exact, on the number's text) and add the "
                   "start to the top-level baseTimeNanoseconds, so Perfetto's rounding of epoch-size fractional "
                   "µs stops inventing overlaps (absolute time = baseTimeNanoseconds + ts*1000 is unchanged)")
    add_compression_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.output = args.output or default_output(args.input, "repaired")
    note_plain_output(args.output)
    with output_compression(args.compression):
        result = repair(args.input, args.output, rebase_time=args.rebase_time)
    print(f"{result.out}: {result.events:,} events ({result.seconds:.1f} s)", file=sys.stderr)
    for line in result.summary():
        print(f"  {line}", file=sys.stderr)
    return 0
