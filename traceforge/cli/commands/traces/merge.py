"""``traceforge merge``: every rank's trace on one timeline, clocks aligned from the collectives."""

from __future__ import annotations

import argparse
import sys

from ....api.merge import merge
from ....io.memory.heap import hold_freed
from ....io.write.output import output_compression
from ... import ranks
from ...output import note
from .. import add_compression_argument, note_plain_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge", help="all ranks' traces as one, clocks aligned from the collectives (see docs/collectives.md)",
        description="Write every event of every rank into one trace: pids, tids, flow and correlation ids made "
        "unique per rank, processes labelled 'rank R:' and sorted by rank, times shifted by each rank's clock fit "
        "(traceforge collectives), the ranks' top-level keys kept under traceforgeMerge. One rank at a time.",
    )
    p.add_argument("input", nargs="+", help="trace files (.json, .json.gz, .json.zst) or directories, one per rank")
    p.add_argument("-o", "--output", required=True, help="the merged trace; its suffix picks the compression")
    p.add_argument("--no-align", action="store_true", help="keep the recorded clocks")
    p.add_argument("--ranks", metavar="LIST", help="only these ranks, e.g. 0-3,7 (the clocks are fitted on all)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--window", metavar="START:END",
                      help="only events in this window of the reference (lowest) rank's clock: µs as in its ts, "
                      "or +100ms:+300ms from its start; flows crossing the edge may lose an end")
    what.add_argument("--steps", metavar="N[-M]", help="only the reference rank's ProfilerStep#N..M")
    p.add_argument("--collectives", action="store_true",
                   help="draw the waits: arrows from the last-arriving rank's kernel to each waiting rank's, "
                   "'Waiting for rank R' slices and a per-rank counter of time spent waiting")
    p.add_argument("--all", action="store_true", help="everything merge can draw (today: --collectives)")
    add_compression_argument(p)
    ranks.add_fan_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    note_plain_output(args.output)
    hold_freed()  # every batch's edit makes and drops the same large buffers (see io.heap)
    with output_compression(args.compression):
        result = merge(args.input, args.output, align=not args.no_align, ranks=args.ranks, window=args.window,
                       steps=args.steps, draw_collectives=args.collectives or args.all,
                       **ranks.fan_out_of(args, args.input))
    for text in result.collectives.notes:
        note(text)
    print(f"{args.output}: {result.summary()}", file=sys.stderr)
    return 0
