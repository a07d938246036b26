"""``traceforge counters``: hardware counters per kernel, with operator stacks and derived metrics."""

from __future__ import annotations

import argparse
import math
import sys

import orjson

from ...analyses.counters import CounterTables, counter_tables
from ...analyses.kernel_names import short_kernel_name
from ...annotator.plugins.counters import COUNTER_OPTIONS, counter_options
from ...api.reads import counter_columns
from ...util.lazy_pandas import pd
from ..options import add_filter_arguments, add_options, filters_of

TABLES = ("kernels", "operators", "problems")
PROBLEMS_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "counters",
        help="hardware counters per kernel (CUPTI range profiler, ncu CSV) with operator stacks and FLOP/s, GB/s",
        description="Pair the trace's cuda_profiler_range events and/or an ncu --csv --page raw file with the "
        "kernels they measured, and print counters, derived metrics (FLOPs, achieved TFLOP/s and DRAM GB/s "
        "with the trace's kernel durations, L2 bytes, tensor utilisation, arithmetic intensity, efficiency) "
        "and a per-operator summary. Every mismatch is reported.",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst)")
    add_options(p, COUNTER_OPTIONS)
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.add_argument("--table", choices=TABLES, default="kernels", help="which table --format csv prints")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = counter_options(vars(args))
    tables = counter_tables(counter_columns(args.input, options["ncu"], filters_of(args), display_name=args.input), **options)
    if args.format == "csv":
        getattr(tables, args.table).to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(orjson.dumps(_as_json(tables), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
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
    print("\nper kernel (GFLOP from SASS counters; TFLOP/s and GB/s over the trace's kernel duration):")
    print(f"  {'#':>4} {'status':<13} {'top op':<24} {'bottom op':<28} {'kernel':<40} {'dur us':>9} {'GFLOP':>9} "
          f"{'TFLOP/s':>8} {'DRAM MB':>9} {'GB/s':>8} {'L2 MB':>9} {'tensor%':>7} {'FLOP/B':>7} {'eff%':>6}")
    for i, r in enumerate(tables.kernels.itertuples(index=False)):
        dur = r.kernel_dur_ns / 1e3 if r.kernel_dur_ns > 0 else math.nan
        print(f"  {i:>4} {r.status:<13} {_cut(r.top_op, 24):<24} {_cut(r.bottom_op, 28):<28} {_cut(short_kernel_name(r.trace_kernel or r.kernel), 40):<40} "
              f"{_num(dur, digits=1):>9} {_num(r.flops, 1e-9, 3):>9} {_num(r.achieved_tflops, 1, 3):>8} "
              f"{_num(r.dram_bytes, 1e-6, 1):>9} {_num(r.dram_gbps, 1, 1):>8} {_num(r.l2_bytes, 1e-6, 1):>9} "
              f"{_num(r.tensor_util_pct, 1, 1):>7} {_num(r.arithmetic_intensity, 1, 1):>7} "
              f"{_num(r.efficiency_pct, 1, 1):>6}")
    print("\nper top-level operator:")
    print(f"  {'operator':<32} {'kernels':>7} {'GFLOP':>10} {'DRAM MB':>10} {'L2 MB':>10} {'time ms':>9} "
          f"{'TFLOP/s':>8} {'GB/s':>8}")
    for r in tables.operators.itertuples(index=False):
        print(f"  {_cut(r.top_op, 32):<32} {r.kernels:>7,} {_num(r.flops, 1e-9, 3):>10} {_num(r.dram_bytes, 1e-6, 1):>10} "
              f"{_num(r.l2_bytes, 1e-6, 1):>10} {_num(r.kernel_time_ns / 1e6 if r.kernel_time_ns else math.nan, 1, 3):>9} "
              f"{_num(r.achieved_tflops, 1, 3):>8} {_num(r.dram_gbps, 1, 1):>8}")
    problems = tables.problems
    if len(problems):
        print(f"\nproblems: {len(problems):,}" + (f" (first {PROBLEMS_SHOWN}; --format json lists all)"
                                                 if len(problems) > PROBLEMS_SHOWN else ""))
        for r in problems.head(PROBLEMS_SHOWN).itertuples(index=False):
            print(f"  {r.source}: {r.problem} #{r.index} {_cut(short_kernel_name(r.kernel), 50)}: {r.detail}")
