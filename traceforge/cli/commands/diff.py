"""``traceforge diff``: GPU ops of two traces compared (see ``analyses.trace_diff``)."""

from __future__ import annotations

import argparse

from ...analyses.rules import DEFAULT_RULES, PRESETS
from ...api.files import diff
from ..options import add_filter_arguments, filters_of
from ..output import FORMATS, Col, count, emit, ms, render, short

TEXT_TOP = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="compare the GPU ops of two traces: counts and total time per kernel name and per category",
        description="Compare trace A (before) with trace B (after): per GPU op name and per category, counts and "
        "total time in each and B - A, largest absolute change in time first (like HTA's trace diff); "
        "categories come from the kernel classifier's rules (see classify). "
        "Times are exact ns.",
    )
    p.add_argument("a", metavar="A", help="the trace before (control)")
    p.add_argument("b", metavar="B", help="the trace after (test)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--rules", default=DEFAULT_RULES, metavar="RULES",
                   help=f"kernel categories: a preset ({', '.join(PRESETS)}) or a JSON/TOML rules file (default: default)")
    p.add_argument("--top", type=int, metavar="N",
                   help=f"rows of the per-name table (default {TEXT_TOP} in text, all in csv/json; 0: all)")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = diff(args.a, args.b, rules=args.rules, where=filters_of(args))
    tables = result.tables()
    top = args.top if args.top is not None else (TEXT_TOP if args.format == "text" else 0)
    if top > 0:
        tables["ops"] = tables["ops"].head(top)
    common = [
        Col("A count", "a_count", count), Col("B count", "b_count", count), Col("count diff", "count_diff", _signed),
        Col("A ms", "a_total_ns", ms), Col("B ms", "b_total_ns", ms), Col("diff ms", "total_diff_ns", _signed_ms),
    ]
    emit(tables, args.format, lambda: [
        f"A: {args.a}", f"B: {args.b}",
        "", "Per category", *render(tables["categories"], [Col("category", "category", left=True), *common]),
        "", f"Per GPU op name, largest change in total time first ({len(tables['ops']):,} of {len(result.ops):,})",
        *render(tables["ops"], [*common, Col("category", "category", left=True), Col("name", "name", short, left=True)]),
    ])
    return 0


def _signed(value: object) -> str:
    return f"{int(value):+,}"


def _signed_ms(ns: object) -> str:
    return f"{int(ns) / 1e6:+,.3f}"
