"""``traceforge launch-stats``: launch call time, GPU time and launch delay, summarised."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import orjson

from ...analyses.launch_delay import (
    DEFAULT_DELAY_CUTOFF_NS,
    DEFAULT_RUNTIME_CUTOFF_NS,
    launch_statistics,
    launch_table_consuming,
    outliers,
)
from ...analyses.launches import STREAM_LAUNCH_APIS, calls_of
from ...api.reads import launch_columns
from ...errors import UsageError
from ...util.durations import duration_arg
from ...util.exacttime import ns_to_us_text
from ...util.lazy_pandas import pd
from .. import ranks
from ..options import add_filter_arguments, filters_of
from ..rank_summary import Figures, gpu_figures, launch_figures

STAT_COLUMNS = ("count", "mean", "min", "p50", "p90", "p99", "max")
OUTLIER_TITLES = {
    "short_gpu": "GPU op shorter than its launch call (launch call <= runtime cutoff)",
    "slow_launch": "launch calls above the runtime cutoff",
    "long_delay": "launch delays above the delay cutoff",
}
WORST_COLUMNS = ("launch_delay", "cpu_duration", "gpu_duration", "gpu_ts", "device", "stream", "api", "cpu_op", "name")


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
    p.add_argument("--top", type=int, default=10, metavar="N", help="worst N of each outlier list (default 10)")
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="text (default); csv: the statistics table, times in us; json: everything, times in ns")
    add_filter_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise UsageError(f"--top must be 0 or more, not {args.top}")
    return ranks.run_command(args, launch_stats_one)


def launch_stats_one(args: argparse.Namespace) -> Figures:
    # The table's launches only, and only the CPU ops that can enclose one.
    cols = launch_columns(args.input, calls_of(STREAM_LAUNCH_APIS), filters_of(args))
    figures = gpu_figures(cols)
    table = launch_table_consuming(cols)
    del cols  # the table holds what is left to report
    stats = launch_statistics(table)
    lists = outliers(table, args.runtime_cutoff, args.delay_cutoff)
    message = table.attrs.get("message")
    if args.format == "json":
        print(orjson.dumps(_report(table, stats, lists, args), option=orjson.OPT_INDENT_2).decode())
    elif args.format == "csv":
        if message:
            print(f"traceforge: {message}", file=sys.stderr)
        _us_columns(stats).to_csv(sys.stdout, index=False)
    elif message:
        print(message)
    else:
        _print_text(table, stats, lists, args)
    return {**figures, **launch_figures(stats)}


def _us_columns(stats: pd.DataFrame) -> pd.DataFrame:
    """The statistics with times as exact µs text (``count`` stays a count)."""
    out = stats.rename(columns={c: f"{c}_us" for c in STAT_COLUMNS if c != "count"})
    for c in STAT_COLUMNS[1:]:
        out[f"{c}_us"] = [ns_to_us_text(v) for v in stats[c].tolist()]
    return out


def _report(table: pd.DataFrame, stats: pd.DataFrame, lists: dict[str, np.ndarray], args) -> dict:
    return {
        "path": args.input,
        "launches": len(table),
        "negative_delays": int(table["negative_delay"].sum()),
        "message": table.attrs.get("message"),
        "runtime_cutoff_ns": args.runtime_cutoff,
        "delay_cutoff_ns": args.delay_cutoff,
        "statistics_ns": stats.to_dict(orient="records"),
        "outliers": {
            key: {"count": len(rows), "worst": table.iloc[rows[:args.top]][list(WORST_COLUMNS)].to_dict(orient="records")}
            for key, rows in lists.items()
        },
    }


def _print_text(table: pd.DataFrame, stats: pd.DataFrame, lists: dict[str, np.ndarray], args) -> None:
    negative = table["launch_delay"].to_numpy()[table["negative_delay"].to_numpy()]
    print(f"{args.input}: {len(table):,} GPU ops with a launch call")
    if len(negative):
        print(f"{len(negative):,} launch delays are negative (the GPU op starts before its launch call ends: "
              f"CPU and GPU clocks overlap), down to {ns_to_us_text(int(negative.min()))} us; kept, not clipped")
    for by, title in (("all", "all launches"), ("stream", "per stream"), ("api", "per launch API")):
        rows = stats[stats["by"] == by]
        width = max(len("group"), *(len(k) for k in rows["key"]))
        print(f"\n{title} (us)")
        print(f"  {'group':<{width}} {'figure':<13}" + "".join(f"{c:>12}" for c in STAT_COLUMNS))
        for r in rows.itertuples(index=False):
            cells = [f"{r.count:>12,}"] + [f"{ns_to_us_text(getattr(r, c)):>12}" for c in STAT_COLUMNS[1:]]
            print(f"  {r.key:<{width}} {r.figure:<13}" + "".join(cells))
    cutoffs = f"runtime cutoff {ns_to_us_text(args.runtime_cutoff)} us, delay cutoff {ns_to_us_text(args.delay_cutoff)} us"
    print(f"\noutliers ({cutoffs})")
    for key, rows in lists.items():
        print(f"\n{OUTLIER_TITLES[key]}: {len(rows):,}")
        if len(rows) and args.top > 0:
            print(f"  {'delay us':>12} {'launch us':>10} {'GPU us':>10} {'GPU ts us':>22}  stream  api / CPU op / GPU op")
            for r in table.iloc[rows[:args.top]].itertuples(index=False):
                print(f"  {ns_to_us_text(r.launch_delay):>12} {ns_to_us_text(r.cpu_duration):>10} "
                      f"{ns_to_us_text(r.gpu_duration):>10} {ns_to_us_text(r.gpu_ts):>22}  {r.device}:{r.stream:<4} "
                      f"{r.api} / {r.cpu_op or '-'} / {_short(r.name)}")


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."

