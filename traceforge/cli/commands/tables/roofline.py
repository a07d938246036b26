"""``traceforge roofline``: what each GPU op achieves against its GPU's limits (docs/roofline.md)."""

from __future__ import annotations

import argparse
import sys

from ....annotator.registry import ANALYSES
from ....api.files import roofline
from ....util.lazy_pandas import pd
from ... import ranks
from ...options import add_filter_arguments, add_options, count_arg, filters_of
from ...output import Col, count, json_text, ms, render, short, wrap
from ...rank_summary import Figures

TABLES = ("ops", "families", "steps", "unmodelled")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "roofline", help="FLOPs and bytes of each GPU op from its shapes, against the GPU's limits: time lost per op",
        description="Model the work of every GPU kernel from the shapes of the CPU op that launched it (traces "
        "taken with record_shapes=True), and measure it against the GPU's peak FLOP/s and memory bandwidth: per "
        "op name + shapes + dtype, sorted by time lost (actual minus roofline time), per family, per profiler "
        "step, and what is not modelled. Coverage (the share of kernel time modelled) is always printed. The "
        "same numbers go into the trace with annotate --roofline. Times in CSV and JSON are integer ns.",
    )
    ranks.add_arguments(p, "trace file (.json, .json.gz, .json.zst)")
    add_options(p, ANALYSES["roofline"].options)
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="text (default); csv: the --table chosen; json: every table, coverage and notes")
    p.add_argument("--table", choices=TABLES, default="ops",
                   help="the table --format csv writes: ops (default), families, steps or unmodelled")
    p.add_argument("--top", type=count_arg, default=15, metavar="N", help="ops shown in the text output (default 15)")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return ranks.run_command(args, roofline_one)


def roofline_one(args: argparse.Namespace) -> Figures:
    result = roofline(args.input, gpu_limits=args.gpu_limits, where=filters_of(args))
    if args.format == "json":
        doc = {"path": args.input, "kernel_ns": result.kernel_ns, "modelled_ns": result.modelled_ns,
               "coverage_pct": round(result.coverage_pct, 3), "gpus": {str(k): v for k, v in result.gpus.items()},
               "notes": result.notes, **{name: _records(result.table(name)) for name in TABLES}}
        print(json_text(doc))
    elif args.format == "csv":
        for note in result.notes:
            print(f"traceforge: {note}", file=sys.stderr)
        sys.stdout.write(result.table(args.table).to_csv(index=False))
    else:
        print("\n".join(_text(args, result)))
    return {"roofline_coverage": round(result.coverage_pct, 1)}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts, NA as None (JSON null)."""
    return [{k: (None if v is pd.NA or (isinstance(v, float) and v != v) else v) for k, v in row.items()}
            for row in frame.astype(object).to_dict("records")]


def _num(decimals: int):
    def show(value: object) -> str:
        return "-" if value is pd.NA or value is None or value != value else f"{float(value):,.{decimals}f}"
    return show


def _dtype(name: str) -> str:
    """A dtype as short as its usual name (c10::BFloat16 -> bf16)."""
    return {"float": "f32", "double": "f64", "c10::BFloat16": "bf16", "c10::Half": "f16", "long int": "i64",
            "int": "i32"}.get(name, short(name.replace("c10::", ""), 10))


def _ms(value: object) -> str:
    return "-" if value is pd.NA or value is None else ms(value)


def _text(args: argparse.Namespace, result) -> list[str]:
    gpus = ", ".join(f"GPU {d}: {name or 'unknown'}" for d, name in sorted(result.gpus.items())) or "no kernels"
    lines = [f"{args.input}: {gpus}"]
    for note in result.notes:
        lines += wrap(note)
    unmodelled = int(result.unmodelled["kernels"].sum()) if len(result.unmodelled) else 0
    lines.append(f"coverage: {result.coverage_pct:.1f}% of kernel time modelled ({ms(result.modelled_ns)} of "
                 f"{ms(result.kernel_ns)} ms; {unmodelled:,} kernels not modelled)")
    if not result.modelled_ns and result.notes:  # nothing modelled: the notes say why
        return lines
    ops = result.ops.head(args.top).assign(label=lambda f: [f"{short(o, 34)} {short(s, 40)}" for o, s in
                                                            zip(f["op"], f["shapes"])],
                                           type=lambda f: [_dtype(d) for d in f["dtype"]])
    if len(ops):
        lines.append(f"\ntop {len(ops)} ops by time lost (of {len(result.ops):,} op name + input dims + dtype)")
        lines += render(ops, [Col("op and input dims", "label", left=True, repeat=True),
                              Col("dtype", "type", left=True), Col("count", "count", count), Col("ms", "time_ns", ms),
                              Col("lost ms", "lost_ns", _ms), Col("TFLOP/s", "tflops", _num(1)),
                              Col("GB/s", "gbps", _num(0)), Col("FLOP/B", "intensity", _num(1)),
                              Col("bound", "bound", left=True), Col("% roof", "roofline_pct", _num(1))])
    lines.append("\nper family")
    lines += render(result.families, [Col("family", "family", left=True, repeat=True),
                                      Col("kernels", "kernels", count), Col("ms", "time_ns", ms),
                                      Col("TFLOP/s", "tflops", _num(1)), Col("GB/s", "gbps", _num(0)),
                                      Col("% roof", "roofline_pct", _num(1)), Col("lost ms", "lost_ns", _ms)])
    if len(result.steps):
        lines.append("\nper profiler step (at roof: the step's time less what its modelled kernels lost)")
        lines += render(result.steps, [Col("step", "step", repeat=True), Col("step ms", "step_ns", ms),
                                       Col("kernel ms", "kernel_ns", ms), Col("modelled ms", "modelled_ns", ms),
                                       Col("roofline ms", "roofline_ns", _ms), Col("lost ms", "lost_ns", _ms),
                                       Col("at roof ms", "step_at_roof_ns", _ms)])
    if len(result.unmodelled):
        lines.append("\nnot modelled")
        lines += render(result.unmodelled.assign(label=lambda f: [short(n, 50) for n in f["name"]],
                                                 reason=lambda f: [short(w, 60) for w in f["why"]]),
                        [Col("op or kernel", "label", left=True, repeat=True), Col("kernels", "kernels", count),
                         Col("ms", "time_ns", ms), Col("%", "share_pct", _num(2)), Col("why", "reason", left=True)])
    return lines
