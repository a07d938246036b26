"""``traceforge diff``: two traces compared, per GPU op, category and CPU operator (see
``analyses.trace_diff``)."""

from __future__ import annotations

import argparse
import math

from ....api.files import diff
from ....api.results import DEFAULT_RULES, PRESETS
from ....api.results import DIFF_TABLES as TABLES
from ...options import add_filter_arguments, filters_of
from ...output import FORMATS, Col, check_one_csv_table, count, emit, ms, render

TEXT_TOP = 20
_TITLES = {"categories": "Per category", "ops": "Per GPU op name", "cpu_ops": "Per CPU operator"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two traces: counts and total time per GPU op name, per category and per CPU operator",
        description="Compare trace A (before) with trace B (after): per GPU op name, per category and per CPU "
        "operator, counts and total time in each, B - A and the % change, largest absolute change in time first "
        "(like HTA's trace diff); categories come from the kernel classifier's rules (see classify). Where the "
        "traces have different numbers of profiler steps, values are also given per step, and the order and "
        "changes follow them. Times are exact ns.",
    )
    p.add_argument("a", metavar="A", help="the trace before (control)")
    p.add_argument("b", metavar="B", help="the trace after (test)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text, csv (one table: name it with --table) or json")
    p.add_argument("--table", choices=TABLES, action="append", metavar="TABLE",
                   help=f"make and print only this table (again for more): {', '.join(TABLES)} (default: all)")
    p.add_argument("--rules", default=DEFAULT_RULES, metavar="RULES",
                   help=f"kernel categories: a preset ({', '.join(PRESETS)}) or a JSON/TOML rules file (default: default)")
    p.add_argument("--per-step", action=argparse.BooleanOptionalAction, default=None,
                   help="values per profiler step (default: when the traces' step counts differ)")
    p.add_argument("--top", type=int, metavar="N",
                   help=f"rows of the per-name tables (default {TEXT_TOP} in text, all in csv/json; 0: all)")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    wanted = tuple(dict.fromkeys(args.table or TABLES))
    check_one_csv_table("diff", args.format, wanted, TABLES)
    result = diff(args.a, args.b, rules=args.rules, tables=wanted, per_step=args.per_step, where=filters_of(args))
    made = result.tables()
    top = args.top if args.top is not None else (TEXT_TOP if args.format == "text" else 0)
    tables = {name: made[name].head(top) if top > 0 and name != "categories" else made[name]
              for name in TABLES if name in wanted}
    if result.per_step:
        values = [
            Col("A count/step", "a_count_per_step", _number), Col("B count/step", "b_count_per_step", _number),
            Col("A ms/step", "a_ns_per_step", ms), Col("B ms/step", "b_ns_per_step", ms),
            Col("diff ms/step", "ns_per_step_diff", _signed_ms),
        ]
    else:
        values = [
            Col("A count", "a_count", count), Col("B count", "b_count", count),
            Col("count diff", "count_diff", _signed), Col("A ms", "a_total_ns", ms), Col("B ms", "b_total_ns", ms),
            Col("diff ms", "total_diff_ns", _signed_ms),
        ]
    values += [Col("change %", "total_change_pct", _pct), Col("count", "count_change")]
    keys = {
        "categories": [Col("category", "category", left=True)],
        "ops": [Col("category", "category", left=True), Col("name", "name", left=True)],
        "cpu_ops": [Col("kind", "kind", left=True), Col("name", "name", left=True)],
    }

    def text() -> list[str]:
        lines = [f"A: {args.a} ({result.a_steps:,} profiler steps)", f"B: {args.b} ({result.b_steps:,} profiler steps)"]
        if result.per_step:
            lines.append("values per profiler step (the traces' step counts differ; --no-per-step for totals)")
        for name in sorted(tables, key=list(_TITLES).index):  # categories first
            df = tables[name]
            shown = "" if name == "categories" else f", largest change in time first ({len(df):,} of {len(made[name]):,})"
            lines += ["", _TITLES[name] + shown]
            cols = keys[name][:1] + values + keys[name][1:] if name == "categories" else values + keys[name]
            lines += render(df, cols)
        return lines

    emit(tables, args.format, text)
    return 0


def _signed(value: object) -> str:
    return f"{int(value):+,}"


def _signed_ms(ns: object) -> str:
    return f"{float(ns) / 1e6:+,.3f}"


def _number(value: object) -> str:
    return f"{float(value):,.2f}"


def _pct(value: object) -> str:
    return "n/a" if value is None or math.isnan(float(value)) else f"{float(value):+,.1f}"
