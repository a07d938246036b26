"""``traceforge report``: one self-contained HTML page of plots per rank (``traceforge.report``)."""

from __future__ import annotations

import argparse
import os
import sys

from ....report import write_report
from ....report.downsample import DEFAULT_BUCKETS
from ... import ranks
from ...options import output_path

DEFAULT_OUT = "report.html"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="an HTML page of plots per rank: temporal breakdown, kernel categories, top kernels, queue length, "
        "memcpy bandwidth, launch delays, kernel sequences, communication overlap, memory; ranks compared",
        description="One self-contained HTML page (no network access when opened; needs the 'report' extra: "
        "pip install 'traceforge[report]'). Each plot says where to find the same thing in Perfetto.",
    )
    p.add_argument("inputs", nargs="+", metavar="IN", help="trace file(s), one per rank, or a directory of them")
    p.add_argument("-o", "--output", type=output_path, default=DEFAULT_OUT, metavar="OUT.html", help=f"(default {DEFAULT_OUT})")
    p.add_argument("--points", type=int, default=DEFAULT_BUCKETS, metavar="N",
                   help=f"time series cut to N buckets, each keeping its min and max (default {DEFAULT_BUCKETS})")
    ranks.add_fan_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    reports = write_report(args.inputs, args.output, buckets=max(1, args.points), **ranks.fan_out_of(args, args.inputs))
    size = os.path.getsize(args.output)
    print(f"report: {len(reports)} rank(s), {size / 1e6:.1f} MB written to {args.output}", file=sys.stderr)
    return 0
