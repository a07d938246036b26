"""``traceforge trim``: cut a trace to a time window or to profiler steps."""

from __future__ import annotations

import argparse
import sys

from ....io.write.output import output_compression
from ....io.write.output_names import default_output
from ....rewrite.trim import trim
from ...options import output_path
from ...output import wrap
from .. import add_compression_argument, note_plain_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trim",
        help="cut a trace to a time window or to ProfilerStep#N ranges (to fit the Perfetto UI)",
        description="Copy the part of a trace inside a window [START, END): metadata and top-level keys, "
        "X slices that overlap the window, other events whose ts is inside it, and flows whose ends are all "
        "inside it. Kept events are copied byte for byte.",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst); read twice")
    p.add_argument("-o", "--output", type=output_path, help="output file; its suffix picks the compression (.json, .json.gz, "
                   ".json.zst). Default: <name>.trimmed.json.gz beside the input (.json.zst for a .json.zst input, "
                   ".json for .json)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--window", metavar="START:END",
                      help="[START, END) from the trace start, as Perfetto shows time and as every command's "
                      "--window: µs or with a unit (100ms:300ms; a leading + is allowed); an empty side is the "
                      "trace's start or end. A window with no event in it is an error")
    what.add_argument("--steps", metavar="N[-M]",
                      help="ProfilerStep#N to ProfilerStep#M and exactly the GPU work those steps launched (not "
                      "the earlier steps' work still running, nor the next step's)")
    add_compression_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.output = args.output or default_output(args.input, "trimmed")
    note_plain_output(args.output)
    with output_compression(args.compression):
        result = trim(args.input, args.output, window=args.window, steps=args.steps)
    print("\n".join(wrap(f"{result.out}: {result.summary()} ({result.seconds:.1f} s)")), file=sys.stderr)
    return 0
