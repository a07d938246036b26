"""``traceforge counters``: hardware counters per kernel, with operator stacks and derived metrics."""

from __future__ import annotations

import argparse
import math
import sys

from ...analyses.counters import CounterTables, counter_tables, ncu_tables
from ...analyses.counters.kinds import INSTRUCTIONS, TOTAL, kind_summary
from ...analyses.counters.ncu_csv import looks_like_ncu_csv
from ...analyses.kernel_names import short_kernel_name
from ...analyses.rules import PRESETS, load_rules
from ...annotator.plugins.counters import COUNTER_OPTIONS, counter_options
from ...api.reads import counter_columns
from ...errors import UsageError
from ...util.lazy_pandas import pd
from ..options import add_filter_arguments, add_options, filters_of
from ..output import json_text

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


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_text(path: str, tables: CounterTables) -> None:
    print(f"{path}:")
    for line in tables.summary:
        print(f"  {line}")
    if tables.kernels.empty:
        return
    peaks = tables.peaks
    if peaks is not None:
        print(f"  peaks: DRAM {_num(peaks.dram_gbps or math.nan, digits=0)} GB/s ({peaks.dram_source}); "
              f"tensor {_num(peaks.tensor_pct or math.nan, digits=0)} % ({peaks.tensor_source})")
    kernels = tables.kernels
    traced = (kernels["event"] >= 0).any()
    over = "the trace's kernel duration" if traced or tables.operators.size else "ncu's gpu__time_duration.sum"
    print(f"\nper kernel (GFLOP from SASS counters; TFLOP/s and GB/s over {over}; MInst: executed warp instructions):")
    print(f"  {'#':>4} {'status':<13} {'top op':<24} {'bottom op':<28} {'kernel':<40} {'dur us':>9} {'GFLOP':>9} "
          f"{'TFLOP/s':>8} {'DRAM MB':>9} {'GB/s':>8} {'L2 MB':>9} {'tensor%':>7} {'FLOP/B':>7} {'eff%':>6} {'MInst':>8}")
    inst = kernels[INSTRUCTIONS].tolist() if INSTRUCTIONS in kernels else [math.nan] * len(kernels)
    for i, (r, n) in enumerate(zip(kernels.itertuples(index=False), inst)):
        dur = r.time_ns / 1e3 if r.time_ns > 0 else math.nan
        print(f"  {i:>4} {r.status:<13} {_cut(r.top_op, 24):<24} {_cut(r.bottom_op, 28):<28} {_cut(short_kernel_name(r.trace_kernel or r.kernel), 40):<40} "
              f"{_num(dur, digits=1):>9} {_num(r.flops, 1e-9, 3):>9} {_num(r.achieved_tflops, 1, 3):>8} "
              f"{_num(r.dram_bytes, 1e-6, 1):>9} {_num(r.dram_gbps, 1, 1):>8} {_num(r.l2_bytes, 1e-6, 1):>9} "
              f"{_num(r.tensor_util_pct, 1, 1):>7} {_num(r.arithmetic_intensity, 1, 1):>7} "
              f"{_num(r.efficiency_pct, 1, 1):>6} {_num(n, 1e-6, 2):>8}")
    _print_kinds(tables.kinds)
    if not traced:
        _print_problems(tables.problems)
        return
    print("\nper top-level operator:")
    print(f"  {'operator':<32} {'kernels':>7} {'GFLOP':>10} {'DRAM MB':>10} {'L2 MB':>10} {'time ms':>9} "
          f"{'TFLOP/s':>8} {'GB/s':>8}")
    for r in tables.operators.itertuples(index=False):
        print(f"  {_cut(r.top_op, 32):<32} {r.kernels:>7,} {_num(r.flops, 1e-9, 3):>10} {_num(r.dram_bytes, 1e-6, 1):>10} "
              f"{_num(r.l2_bytes, 1e-6, 1):>10} {_num(r.kernel_time_ns / 1e6 if r.kernel_time_ns else math.nan, 1, 3):>9} "
              f"{_num(r.achieved_tflops, 1, 3):>8} {_num(r.dram_gbps, 1, 1):>8}")
    _print_problems(tables.problems)


def _print_kinds(kinds: pd.DataFrame) -> None:
    """llm.c's kernel type summary, with the totals row last (``kinds.kind_summary``)."""
    if kinds.empty:
        return
    print("\nper kernel kind (time-weighted tensor % and efficiency; GB/s and GInst/s over the kinds' time):")
    print(f"  {'kind':<48} {'time ms':>9} {'share%':>7} {'count':>6} {'DRAM GB/s':>9} {'tensor%':>7} "
          f"{'MInst':>9} {'GInst/s':>8} {'eff%':>6}")
    for r in kinds.itertuples(index=False):
        if r.kind == TOTAL:
            print("  " + "." * 109)
        print(f"  {_cut(r.kind, 48):<48} {_num(r.time_ns / 1e6, 1, 3):>9} {_num(r.share_pct, 1, 2):>7} "
              f"{r.kernels:>6,} {_num(r.dram_gbps, 1, 1):>9} {_num(r.tensor_pct, 1, 1):>7} {_num(r.inst, 1e-6, 2):>9} "
              f"{_num(r.ginst_per_s, 1, 1):>8} {_num(r.efficiency_pct, 1, 1):>6}")


def _print_problems(problems: pd.DataFrame) -> None:
    if len(problems):
        print(f"\nproblems: {len(problems):,}" + (f" (first {PROBLEMS_SHOWN}; --format json lists all)"
                                                 if len(problems) > PROBLEMS_SHOWN else ""))
        for r in problems.head(PROBLEMS_SHOWN).itertuples(index=False):
            print(f"  {r.source}: {r.problem} #{r.index} {_cut(short_kernel_name(r.kernel), 50)}: {r.detail}")
