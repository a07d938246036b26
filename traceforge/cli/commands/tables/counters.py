"""``traceforge counters``: hardware counters per kernel, with operator stacks and derived metrics."""

from __future__ import annotations

import argparse
import math
import sys

from ....annotator.plugins.counters import COUNTER_OPTIONS, counter_options
from ....api.results import (
    INSTRUCTIONS,
    PRESETS,
    CounterTables,
    counter_columns,
    counter_tables,
    kind_summary,
    load_rules,
    ncu_tables,
    short_kernel_name,
)
from ....errors import UsageError
from ....io.read.ncu_csv import looks_like_ncu_csv
from ....util.lazy_pandas import pd
from ....util.short_names import shorten
from ...options import add_filter_arguments, add_options, filters_of
from ...output import Col, count, json_text, render, wrap

TABLES = ("kernels", "kinds", "operators", "problems")
PROBLEMS_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "counters",
        help="hardware counters per kernel (CUPTI range profiler, ncu CSV) with operator stacks and FLOP/s, GB/s",
        description="Pair the trace's cuda_profiler_range events and/or an ncu --csv --page raw file with the "
        "kernels they measured, and print counters, derived metrics (FLOPs, achieved TFLOP/s and DRAM GB/s "
        "with the trace's kernel durations, L2 bytes, tensor utilisation, arithmetic intensity, efficiency) "
        "and a per-operator summary. Every mismatch is reported. Given an ncu CSV instead of a trace, the same "
        "per-kernel table from the CSV alone, with ncu's gpu__time_duration.sum as each kernel's duration. Both "
        "end with llm.c's summary: time, share, count, DRAM GB/s, tensor % and instructions per kernel kind, and "
        "a totals row (time, average DRAM GB/s, time-weighted tensor %, GInst/s, overall efficiency).",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst), or an ncu --csv --page raw file alone")
    add_options(p, COUNTER_OPTIONS)
    p.add_argument("--rules", metavar="RULES",
                   help="kernel kinds by the classify rules: a preset (" + ", ".join(PRESETS) + ") or a JSON/TOML "
                   "rules file (default: kernel names cleaned as llm.c does, template arguments and parameters "
                   "stripped)")
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.add_argument("--table", choices=TABLES, default="kernels", help="which table --format csv prints")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = counter_options(vars(args))
    if looks_like_ncu_csv(args.input):
        if options["ncu"] is not None:
            raise UsageError(f"{args.input} is an ncu CSV: give a trace with --ncu, or the CSV alone")
        if filters_of(args) is not None:
            raise UsageError(f"{args.input} is an ncu CSV: --steps/--window/--kernel/--op filter a trace")
        tables = ncu_tables(args.input, peak_dram_gbps=options["peak_dram_gbps"],
                            peak_tensor_pct=options["peak_tensor_pct"])
    else:
        tables = counter_tables(counter_columns(args.input, options["ncu"], filters_of(args), display_name=args.input),
                                **options)
    if args.rules is not None:
        tables.kinds = kind_summary(tables.kernels, load_rules(args.rules))
    if args.format == "csv":
        getattr(tables, args.table).to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(json_text(_as_json(tables)))
        sys.stdout.write("\n")
    else:
        _print_text(args.input, tables)
    return 0


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
            for row in df.to_dict(orient="records")]


def _as_json(tables: CounterTables) -> dict:
    peaks = tables.peaks
    return {
        "summary": tables.summary,
        "peaks": None if peaks is None else {"dram_gbps": peaks.dram_gbps, "dram_source": peaks.dram_source,
                                              "tensor_pct": peaks.tensor_pct, "tensor_source": peaks.tensor_source},
        "counters": tables.counters,
        **{name: _records(getattr(tables, name)) for name in TABLES},
    }


def _num(value: float, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * scale:,.{digits}f}"


def _numbers(scale: float = 1.0, digits: int = 2):
    return lambda v: _num(v, scale, digits)


def _print_text(path: str, tables: CounterTables) -> None:
    print(f"{path}:")
    for line in tables.summary:
        _print_lines(wrap(line, "  "))
    if tables.kernels.empty:
        return
    peaks = tables.peaks
    if peaks is not None:
        _print_lines(wrap(f"peaks: DRAM {_num(peaks.dram_gbps or math.nan, digits=0)} GB/s ({peaks.dram_source}); "
                          f"tensor {_num(peaks.tensor_pct or math.nan, digits=0)} % ({peaks.tensor_source})", "  "))
    kernels = tables.kernels
    traced = (kernels["event"] >= 0).any()
    over = "the trace's kernel duration" if traced or tables.operators.size else "ncu's gpu__time_duration.sum"
    print()
    _print_lines(wrap(f"per kernel (GFLOP from SASS counters; TFLOP/s and GB/s over {over}; MInst: executed warp "
                      "instructions):"))
    shown = kernels.assign(
        i=range(len(kernels)), name=[short_kernel_name(t or k) for t, k in zip(kernels.trace_kernel, kernels.kernel)],
        dur=[t / 1e3 if t > 0 else math.nan for t in kernels.time_ns],
        minst=kernels[INSTRUCTIONS] if INSTRUCTIONS in kernels else math.nan)
    _print_lines(render(shown, [
        Col("#", "i", repeat=True), Col("status", "status", left=True, repeat=True),
        Col("kernel", "name", left=True, repeat=True, width=36), Col("top op", "top_op", left=True, width=32),
        Col("bottom op", "bottom_op", left=True, width=32), Col("dur us", "dur", _numbers(digits=1)),
        Col("GFLOP", "flops", _numbers(1e-9, 3)), Col("TFLOP/s", "achieved_tflops", _numbers(1, 3)),
        Col("DRAM MB", "dram_bytes", _numbers(1e-6, 1)), Col("GB/s", "dram_gbps", _numbers(1, 1)),
        Col("L2 MB", "l2_bytes", _numbers(1e-6, 1)), Col("tensor%", "tensor_util_pct", _numbers(1, 1)),
        Col("FLOP/B", "arithmetic_intensity", _numbers(1, 1)), Col("eff%", "efficiency_pct", _numbers(1, 1)),
        Col("MInst", "minst", _numbers(1e-6, 2))]))
    _print_kinds(tables.kinds)
    if not traced:
        _print_problems(tables.problems)
        return
    print("\nper top-level operator:")
    ops = tables.operators
    ops = ops.assign(time_ms=[t / 1e6 if t else math.nan for t in ops.kernel_time_ns])
    _print_lines(render(ops, [
        Col("operator", "top_op", left=True, repeat=True, width=32), Col("kernels", "kernels", count),
        Col("GFLOP", "flops", _numbers(1e-9, 3)), Col("DRAM MB", "dram_bytes", _numbers(1e-6, 1)),
        Col("L2 MB", "l2_bytes", _numbers(1e-6, 1)), Col("time ms", "time_ms", _numbers(1, 3)),
        Col("TFLOP/s", "achieved_tflops", _numbers(1, 3)), Col("GB/s", "dram_gbps", _numbers(1, 1))]))
    _print_problems(tables.problems)


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _print_kinds(kinds: pd.DataFrame) -> None:
    """llm.c's kernel type summary, with the totals row last (``kinds.kind_summary``)."""
    if kinds.empty:
        return
    print()
    _print_lines(wrap("per kernel kind (time-weighted tensor % and efficiency; GB/s and GInst/s over the kinds' "
                      "time; the last row: the totals):"))
    shown = kinds.assign(time_ms=kinds.time_ns / 1e6)
    _print_lines(render(shown, [
        Col("kind", "kind", left=True, repeat=True, width=40), Col("time ms", "time_ms", _numbers(1, 3)),
        Col("share%", "share_pct", _numbers(1, 2)), Col("count", "kernels", count),
        Col("DRAM GB/s", "dram_gbps", _numbers(1, 1)), Col("tensor%", "tensor_pct", _numbers(1, 1)),
        Col("MInst", "inst", _numbers(1e-6, 2)), Col("GInst/s", "ginst_per_s", _numbers(1, 1)),
        Col("eff%", "efficiency_pct", _numbers(1, 1))]))


def _print_problems(problems: pd.DataFrame) -> None:
    if len(problems):
        print(f"\nproblems: {len(problems):,}" + (f" (first {PROBLEMS_SHOWN}; --format json lists all)"
                                                 if len(problems) > PROBLEMS_SHOWN else ""))
        for r in problems.head(PROBLEMS_SHOWN).itertuples(index=False):
            _print_lines(wrap(f"{r.source}: {r.problem} #{r.index} {shorten(short_kernel_name(r.kernel), 50)}: "
                              f"{r.detail}", "  "))
