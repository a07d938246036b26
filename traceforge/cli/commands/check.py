"""``traceforge check``: what Perfetto's JSON importer would drop, move or mis-render."""

from __future__ import annotations

import argparse

import orjson

from ...perfetto import DEFAULT_MAX_EXAMPLES, CheckReport, check_trace
from ...perfetto.rules import RULES


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
    p.add_argument("--max-examples", type=_count, default=DEFAULT_MAX_EXAMPLES, metavar="N",
                   help=f"examples kept per problem (default {DEFAULT_MAX_EXAMPLES})")
    p.set_defaults(func=run)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def run(args: argparse.Namespace) -> int:
    report = check_trace(args.input, max_examples=args.max_examples)
    if args.format == "json":
        print(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_text(report))
    return report.exit_code


def render_text(report: CheckReport) -> str:
    """One line per problem: severity, name, count, explanation, breakdown, examples."""
    lines = [f"{report.path}: {report.events:,} events, checked in {report.seconds:.1f} s"]
    for name, count in {**report.stats, **report.warnings}.items():
        rule = RULES[name]
        line = f"  {rule.severity.upper():<9} {name} {count:,}: {rule.explanation}"
        causes = report.breakdown.get(name)
        if causes:
            line += " [" + ", ".join(f"{n:,} {cause}" for cause, n in causes.items()) + "]"
        examples = report.examples.get(name)
        if examples:
            line += "; e.g. " + "; ".join(e.text() for e in examples)
        lines.append(line)
    if report.exit_code == 2:
        lines.append("verdict: Perfetto would refuse this trace or stop reading it (exit 2)")
    elif report.losses:
        lines.append(f"verdict: {report.losses:,} events would be dropped, moved or mis-rendered by Perfetto (exit 1)")
    else:
        lines.append("verdict: Perfetto imports this trace without loss (exit 0)")
    return "\n".join(lines)
