"""``traceforge launch-stats``: launch call time, GPU time and launch delay, summarised."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ....api.results import (
    DEFAULT_DELAY_CUTOFF_NS,
    DEFAULT_RUNTIME_CUTOFF_NS,
    gpu_figures,
    hta_launch_table,
    keeps_hta_launch,
    launch_columns,
    launch_statistics,
    launch_table_consuming,
    outliers,
)
from ....api.results import LAUNCH_FIGURES as FIGURES
from ....util.durations import duration_arg
from ....util.exacttime import ns_to_us_text
from ....util.lazy_pandas import pd
from ... import ranks
from ...options import add_filter_arguments, add_hta_argument, count_arg, filters_of
from ...output import Col, count, json_text, ms, render, short, wrap
from ...rank_summary import Figures, launch_figures

STAT_COLUMNS = ("count", "mean", "min", "p50", "p90", "p99", "max")
OUTLIER_TITLES = {
    "short_gpu": "GPU op shorter than its launch call (launch call <= runtime cutoff)",
    "slow_launch": "launch calls above the runtime cutoff",
    "long_delay": "launch delays above the delay cutoff",
}
WORST_COLUMNS = ("launch_delay", "cpu_duration", "gpu_duration", "gpu_ts", "device", "stream", "api", "cpu_op", "name")
NS_COLUMNS = ("launch_delay", "cpu_duration", "gpu_duration", "gpu_ts")  # named <column>_ns in CSV and JSON
TABLES = ("statistics", "outliers")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch-stats", help="launch delay, launch call and GPU op durations: statistics and outliers",
        description="Join every GPU op to its launch call (correlation) and summarise launch call time, GPU "
        "time and launch delay (GPU start - launch call end, HTA's definition, negative values kept) per "
        "stream and per launch API, with HTA's outlier lists and the worst of each. Durations accept "
        "ns, us, ms, s (a bare number is us). The per-launch table is traceforge.launch_stats(path).",
    )
    ranks.add_arguments(p, "trace file (.json, .json.gz, .json.zst)")
    p.add_argument("--runtime-cutoff", type=duration_arg, default=DEFAULT_RUNTIME_CUTOFF_NS, metavar="DURATION",
                   help="launch calls slower than this are outliers (default 50us)")
    p.add_argument("--delay-cutoff", type=duration_arg, default=DEFAULT_DELAY_CUTOFF_NS, metavar="DURATION",
                   help="launch delays above this are outliers (default 100us)")
    p.add_argument("--top", type=count_arg, default=10, metavar="N", help="worst N of each outlier list (default 10)")
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="text (default); csv: the --table chosen; json: everything. Times in ns in both, the unit "
                   "in each column's name; gpu_ts_rel_ns is the GPU op's start from the trace start (as Perfetto "
                   "shows time)")
    p.add_argument("--table", choices=TABLES, default="statistics",
                   help="the table --format csv writes: statistics (default) or outliers (the worst --top of each "
                   "outlier list, its name in the list column)")
    add_hta_argument(p)
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return ranks.run_command(args, launch_stats_one)


def launch_stats_one(args: argparse.Namespace) -> Figures:
    # The table's launches only, and only the CPU ops that can enclose one.
    cols = launch_columns(args.input, where=filters_of(args), keep_launch=keeps_hta_launch if args.hta else None)
    figures = gpu_figures(cols)
    start = cols.trace_start_ns or 0
    table = hta_launch_table(cols) if args.hta else launch_table_consuming(cols)
    del cols  # the table holds what is left to report
    stats = launch_statistics(table)
    lists = outliers(table, args.runtime_cutoff, args.delay_cutoff)
    message = table.attrs.get("message")
    if args.format == "json":
        print(json_text(_report(table, stats, lists, args, start)))
    elif args.format == "csv":
        if message:
            print(f"traceforge: {message}", file=sys.stderr)
        if args.table == "outliers":
            frames = [_worst(table, rows[:args.top], start).assign(list=key) for key, rows in lists.items()]
            out = pd.concat(frames, ignore_index=True)
            out[["list", *(c for c in out.columns if c != "list")]].to_csv(sys.stdout, index=False)
        else:
            _ns_columns(stats).to_csv(sys.stdout, index=False)
    elif message:
        print(message)
    else:
        _print_text(table, stats, lists, args, start)
    return {**figures, **launch_figures(stats)}


def _us(ns: object) -> str:
    return ns_to_us_text(int(ns))


def _ns_columns(stats: pd.DataFrame) -> pd.DataFrame:
    """The statistics with the unit in each time column's name (``count`` stays a count)."""
    return stats.rename(columns={c: f"{c}_ns" for c in STAT_COLUMNS if c != "count"})


def _worst(table: pd.DataFrame, rows: np.ndarray, start_ns: int) -> pd.DataFrame:
    """Outlier rows: times in ns (``<column>_ns``), and the GPU op's start from the trace start."""
    out = table.iloc[rows][list(WORST_COLUMNS)].rename(columns={c: f"{c}_ns" for c in NS_COLUMNS})
    out.insert(out.columns.get_loc("gpu_ts_ns") + 1, "gpu_ts_rel_ns", out["gpu_ts_ns"] - start_ns)
    return out.reset_index(drop=True)


def _report(table: pd.DataFrame, stats: pd.DataFrame, lists: dict[str, np.ndarray], args, start_ns: int) -> dict:
    return {
        "path": args.input,
        "hta": args.hta,  # the HTA version whose choices were made, or None
        "launches": len(table),
        "negative_delays": int(table["negative_delay"].sum()),
        "totals_ns": {figure: int(table[figure].sum()) for figure in FIGURES},  # HTA's sums, exact
        "message": table.attrs.get("message"),
        "runtime_cutoff_ns": args.runtime_cutoff,
        "delay_cutoff_ns": args.delay_cutoff,
        "trace_start_ns": start_ns,
        "statistics": _ns_columns(stats).to_dict(orient="records"),
        "outliers": {
            key: {"count": len(rows), "worst": _worst(table, rows[:args.top], start_ns).to_dict(orient="records")}
            for key, rows in lists.items()
        },
    }


def _print_text(table: pd.DataFrame, stats: pd.DataFrame, lists: dict[str, np.ndarray], args, start_ns: int) -> None:
    negative = table["launch_delay"].to_numpy()[table["negative_delay"].to_numpy()]
    print(f"{args.input}: {len(table):,} GPU ops with a launch call")
    if args.hta:
        print(f"HTA's choices: its launch APIs, the last step left out, whole µs; {len(negative):,} negative "
              "delays clipped to 0")
    elif len(negative):
        print(f"{len(negative):,} launch delays are negative (the GPU op starts before its launch call ends:\n"
              f"  CPU and GPU clocks overlap), down to {ns_to_us_text(int(negative.min()))} us; kept, not clipped")
    if len(table):
        delay, wait = int(table["launch_delay"].clip(lower=0).sum()), int(table["queue_wait"].sum())
        print("\n".join(wrap(
            f"launch delay = queue_wait (behind earlier GPU ops still running on the stream: the CPU ran ahead, "
            f"not a slow launch) + launch_overhead (the rest): here {100 * wait / max(delay, 1):.1f}% of the "
            "delay is queueing")))
    cols = [Col("figure", "figure", left=True), Col("count", "count", count),
            *(Col(c, c, _us) for c in STAT_COLUMNS[1:])]
    for by, title in (("all", "all launches"), ("stream", "per stream"), ("api", "per launch API")):
        rows = stats[stats["by"] == by]
        print(f"\n{title} (us)")
        lines = render(rows, cols, indent="    ")
        print(lines[0])
        for key, group in zip(rows["key"].tolist()[::len(FIGURES)], range(0, len(rows), len(FIGURES))):
            print(f"  {key}")
            print("\n".join(lines[1 + group: 1 + group + len(FIGURES)]))
    cutoffs = f"runtime cutoff {ns_to_us_text(args.runtime_cutoff)} us, delay cutoff {ns_to_us_text(args.delay_cutoff)} us"
    print(f"\noutliers ({cutoffs})")
    for key, rows in lists.items():
        print(f"\n{OUTLIER_TITLES[key]}: {len(rows):,}")
        if len(rows) and args.top > 0:
            print(f"  {'delay us':>12} {'launch us':>10} {'GPU us':>10} {'at ms':>11} {'GPU ts us':>22}  stream")
            print("    api / CPU op / GPU op")
            for r in table.iloc[rows[:args.top]].itertuples(index=False):
                print(f"  {ns_to_us_text(r.launch_delay):>12} {ns_to_us_text(r.cpu_duration):>10} "
                      f"{ns_to_us_text(r.gpu_duration):>10} {ms(r.gpu_ts - start_ns):>11} {ns_to_us_text(r.gpu_ts):>22}"
                      f"  {r.device}:{r.stream}")
                where = f"{r.api} / {r.cpu_op or '-'} / "
                print(f"    {where}{short(r.name, max(40, 96 - len(where)))}")
    print("\nat ms: the GPU op's start from the trace start, as Perfetto shows time; GPU ts us: the trace's ts")

