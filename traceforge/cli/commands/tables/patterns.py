"""``traceforge patterns``: frequent GPU op sequences as a table, and optionally drawn on the trace."""

from __future__ import annotations

import argparse
import csv
import io
import sys

from ....annotator.plugins.patterns import HTA_MINED_NOTE, PATTERN_OPTIONS, is_operator_mode, patterns_from_options
from ....annotator.run import annotate
from ....api.results import ARROW, DEFAULT_MIN_LEN, Patterns, filtered_scan, gpu_figures, operator_columns
from ....columns.info import NO_GPU, RECORD_GPU
from ....errors import UsageError
from ....io.write.output import output_compression
from ... import ranks
from ...options import (
    FILTER_OPTIONS,
    add_filter_arguments,
    add_hta_argument,
    add_options,
    filters_of,
    output_path,
)
from ...output import Col, count, json_text, note, render, wrap
from ...rank_summary import Figures, pattern_figures
from .. import add_compression_argument, note_plain_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "patterns",
        help="frequent GPU op sequences: what an operator launches each time, or repeated runs per stream",
        description="With --op, the GPU ops each instance of the operator launched (through any op nested in "
        "it) form its sequence; identical sequences are one pattern, ranked by count. Without --op, "
        "repeated runs of consecutive GPU ops on a stream are mined, ranked by count x GPU time covered. "
        "With -o, each occurrence of the top patterns is also drawn as a slice beside its stream.",
        epilog="Example: traceforge patterns trace.json.gz --op aten::addmm -o patterns.json.gz",
    )
    ranks.add_arguments(p, "trace file (.json, .json.gz, .json.zst) or - for stdin")
    add_options(p, PATTERN_OPTIONS)
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="table format on stdout (stderr with -o -); csv and json carry the full kernel names")
    p.add_argument("-o", "--output", type=output_path, help="also write the trace with the patterns drawn on it "
                   "(suffix picks the compression: .json, .json.gz, .json.zst; - for stdout). With several inputs "
                   "(or a directory): a directory (made if missing) that gets <name>.annotated.json.gz for each (compressed as "
                   "the input is)")
    add_compression_argument(p)
    add_hta_argument(p)
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.output is None and args.tag_kernels:
        raise UsageError("--tag-kernels writes into the trace: give -o OUT")
    return ranks.run_command(args, patterns_one)


def patterns_one(args: argparse.Namespace) -> Figures:
    options = {k: getattr(args, k) for k in ("op", "op_regex", "nested", "min_len", "max_len", "top_k", "tag_kernels",
                                             "hta")}
    figures: Figures = {}
    if args.hta and not is_operator_mode(options):
        note(HTA_MINED_NOTE)
    if args.output is None:
        if args.op is not None or args.op_regex is not None:
            cols = operator_columns(args.input, args.op, args.op_regex, filters_of(args))
        else:
            cols = filtered_scan(args.input, filters_of(args), cpu_ops=False, keep_launch=lambda name: False)
        figures.update(gpu_figures(cols))
        result = patterns_from_options(cols, options)
    else:
        found: list[Patterns] = []
        note_plain_output(args.output)
        with output_compression(args.compression):
            written = annotate(args.input, args.output, analyses=["patterns"], where=filters_of(args),
                               options={**options, "on_patterns": found.append,
                                        "on_columns": lambda cols: figures.update(gpu_figures(cols))})
        result = found[0]
        print(written.text(), file=sys.stderr)
    if not len(result.table):
        note(f"{args.input}: {no_pattern_hint(result, args)}")
    elif len(result.table) < args.top_k and result.short_instances:
        note(f"{len(result.table)} of the {args.top_k} patterns asked for: {result.short_instances:,} instances "
              f"launched fewer than {result.min_len} GPU ops and were left out (--min-len, default "
              f"{DEFAULT_MIN_LEN}); --min-len 1 counts them")
    table = {"text": format_text, "csv": format_csv, "json": format_json}[args.format](result, args.input)
    (sys.stderr if args.output == "-" else sys.stdout).write(table)
    return {**figures, **pattern_figures(result)}


def no_pattern_hint(result: Patterns, args: argparse.Namespace) -> str:
    """Why no pattern was found and what to try (one line): the options that would let more in."""
    if result.total_gpu_ns == 0:
        return f"no pattern: {NO_GPU}; {RECORD_GPU}"
    tries = []
    if result.short_instances:
        tries.append(f"--min-len 1 (now {args.min_len}, default {DEFAULT_MIN_LEN}: {result.short_instances:,} "
                     f"instances launched fewer GPU ops)")
    elif args.min_len > 2:
        tries.append(f"a smaller --min-len (now {args.min_len}, default {DEFAULT_MIN_LEN})")
    if args.max_len is not None:
        tries.append(f"a larger --max-len (now {args.max_len})")
    if result.mode == "operator":
        if not args.nested:
            tries.append("--nested (count instances inside another instance too)")
        tries.append("another --op or --op-regex")
    else:
        tries.append("--op NAME (the GPU ops each instance of an operator launched)")
    filters = [f"--{name}" for name in FILTER_OPTIONS
               if getattr(args, f"where_{name}", None) is not None]
    if filters:
        tries.append(f"fewer filters ({', '.join(filters)})")
    return f"no pattern found ({result.note}); try {'; or '.join(tries)}"


def format_text(result: Patterns, path: str) -> str:
    t = result.table
    lines = wrap(f"{path}: {result.note}")
    if not len(t):
        return "\n".join(lines + ["no pattern found"]) + "\n"
    cols = [Col("rank", "rank"), Col("pattern", "pattern", left=True), Col("count", "count", count),
            Col("len", "length"), Col("GPU total", "gpu_ns", _ms), Col("GPU mean", "mean_gpu_ns", _us)]
    cols += [Col("CPU total", "cpu_ns", _ms)] if "cpu_ns" in t else []
    cols += [Col("GPU share", "gpu_share", lambda v: f"{float(v):.1%}")]
    lines += render(t, cols, indent="")
    lines.append("kernels of each pattern, in order:")
    for r in t.itertuples():
        lines += wrap(f"{r.pattern}: {r.kernels}", indent="  ")
    lines.append(f"top {len(t)} patterns: {result.coverage:.1%} of all GPU time ({_ms(result.total_gpu_ns)})")
    return "\n".join(lines) + "\n"


def _us(ns: float) -> str:
    return f"{float(ns) / 1e3:,.1f} us"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _records(result: Patterns) -> list[dict]:
    rows = []
    for r in result.table.to_dict("records"):
        r["short_kernels"] = r.pop("kernels").split(ARROW)
        r["kernels"] = list(r.pop("kernel_names"))
        rows.append(r)
    return rows


def format_json(result: Patterns, path: str) -> str:
    doc = {"trace": path, "mode": result.mode, "searched": result.searched, "note": result.note,
           "total_gpu_ns": result.total_gpu_ns, "coverage": result.coverage, "patterns": _records(result)}
    return json_text(doc) + "\n"


def format_csv(result: Patterns, path: str) -> str:
    """One row per pattern; ``kernels`` holds the full names joined by ``|`` (as HTA writes them)."""
    rows = _records(result)
    for r in rows:
        r["kernels"] = "|".join(r["kernels"])
        r["short_kernels"] = ARROW.join(r["short_kernels"])
    out = io.StringIO()
    columns = [c for c in result.table.columns if c != "kernel_names"] + ["short_kernels"]
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
