"""``traceforge check``: what Perfetto's JSON importer would drop, move or mis-render."""

from __future__ import annotations

import argparse

from ....errors import UsageError
from ....io.read.codec import read_once
from ....perfetto import DEFAULT_MAX_EXAMPLES, CheckReport, check_trace
from ....perfetto import trace_processor as tp
from ....perfetto.replay import DANGLING
from ....perfetto.rules import RULES
from ...options import count_arg
from ...output import json_text, wrap

END_WITHOUT_START = "flow_end_without_start"  # Perfetto's stat; DANGLING is a kind of it


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="predict what Perfetto (ui.perfetto.dev) would drop, move or mis-render in a trace",
        description="Stream a trace once and predict, rule by rule, what Perfetto's JSON importer "
        "would lose, named by Perfetto's own stats. Exit code: 0 nothing lost, 1 something "
        "dropped, moved or mis-rendered, 2 Perfetto would refuse the trace or stop reading it.",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst) or - for stdin")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--max-examples", type=count_arg, default=DEFAULT_MAX_EXAMPLES, metavar="N",
                   help=f"examples kept per problem (default {DEFAULT_MAX_EXAMPLES})")
    p.add_argument("--trace-processor", nargs="?", const="", default=None, metavar="PATH",
                   help="also import the trace with Perfetto's own trace_processor_shell and print its stats "
                   f"beside the prediction (PATH, else ${tp.ENV}, else trace_processor_shell or trace_processor "
                   "on PATH, else the perfetto Python package's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    binary = _trace_processor(args) if args.trace_processor is not None else None
    report = check_trace(args.input, max_examples=args.max_examples)
    measured = tp.import_stats(binary, args.input) if binary is not None else None
    if args.format == "json":
        doc = report.to_dict()
        if measured is not None:
            doc["trace_processor"] = {"path": binary, "stats": {n: {"severity": s.severity, "value": s.value}
                                                                 for n, s in measured.items()}}
        print(json_text(doc))
    else:
        print(render_text(report))
        if measured is not None:
            print(render_side_by_side(binary, report, measured))
    return report.exit_code


def _trace_processor(args: argparse.Namespace) -> str:
    if read_once(args.input):  # trace_processor reads the file again
        raise UsageError("--trace-processor needs a trace file, not standard input or a FIFO")
    binary = tp.find(args.trace_processor or None)
    if binary is None:
        raise UsageError("--trace-processor: no trace_processor found: give its path, put trace_processor_shell "
                         f"on PATH, set ${tp.ENV}, or pip install perfetto")
    return binary


def render_side_by_side(binary: str, report: CheckReport, measured: dict[str, tp.Stat]) -> str:
    """check's prediction and trace_processor's stat, one line per stat either names."""
    rows = tp.side_by_side(report.stats, measured)
    width = max([len(n) for n, _, _ in rows] + [20])
    lines = [f"trace_processor ({binary}):", f"  {'stat':<{width}} {'check':>12} {'trace_processor':>16}"]
    differ = 0
    for name, predicted, value in rows:
        shown = "-" if predicted is None else f"{predicted:,}"
        differ += predicted != value
        lines.append(f"  {name:<{width}} {shown:>12} {value:>16,}{'' if predicted == value else '  <- differs'}")
    if not rows:
        lines.append("  (no loss in either)")
    lines.append("agreement: check predicted every loss stat exactly" if not differ
                 else f"agreement: {differ} stat(s) differ")
    return "\n".join(lines)


def render_text(report: CheckReport) -> str:
    """Per problem: severity, name and count on one line, then (indented, wrapped to ``WIDTH``)
    its explanation, its counts by cause, and one line per example."""
    lines = [f"{report.path}: {report.events:,} events, checked in {report.seconds:.1f} s"]
    indent = " " * 12
    problems = {**report.stats, **report.warnings}
    # dangling flow ends are flow ends without a start (the loss) whose start is nowhere: said under the loss
    folded = DANGLING in problems and END_WITHOUT_START in report.stats
    for name, count in problems.items():
        if folded and name == DANGLING:
            continue
        rule = RULES[name]
        lines.append(f"  {rule.severity.upper():<9} {name} {count:,}:")
        lines += wrap(rule.explanation, indent)
        causes = report.breakdown.get(name)
        if causes:
            lines += wrap("by cause: " + ", ".join(f"{n:,} {cause}" for cause, n in causes.items()), indent)
        for i, example in enumerate(report.examples.get(name, ())):
            lines += wrap(("e.g. " if i == 0 else "     ") + example.text(), indent)
        if folded and name == END_WITHOUT_START:
            lines += wrap(f"of these, {problems[DANGLING]:,} are {DANGLING} ({RULES[DANGLING].explanation}); the same "
                          "events, not more", indent)
    if report.exit_code == 2:
        lines.append("verdict: Perfetto would refuse this trace or stop reading it (exit 2)")
    elif report.losses:
        lines.append(f"verdict: {report.losses:,} events would be dropped, moved or mis-rendered by Perfetto (exit 1)")
    else:
        lines.append("verdict: Perfetto imports this trace without loss (exit 0)")
    return "\n".join(lines)
