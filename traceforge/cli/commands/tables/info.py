"""``traceforge info``: what a trace holds."""

from __future__ import annotations

import argparse

from ....columns.info import trace_info
from ...output import json_text, wrap


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="summarise a trace: events by phase/category, GPUs, streams, time span",
                       description="Stream a trace once and summarise it.")
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    info = trace_info(args.input)
    if args.format == "json":
        print(json_text(info))
        return 0
    print(f"{info['path']}: {info['events']:,} events ({info['vocabulary']}; {info['codec']})")
    print("\n".join(wrap(f"top-level keys: {', '.join(info['top_level_keys'])}")))
    if info["baseTimeNanoseconds"] is not None:
        print(f"baseTimeNanoseconds: {info['baseTimeNanoseconds']}")
    if info["rank"] is not None:
        print(f"rank: {info['rank']}")
    span = info["time_span"]
    if span:
        print(f"time span: {span['duration_ms']:,.3f} ms, {span['first_rel_us']} .. {span['last_end_rel_us']} us "
              "from the trace start")
        print(f"  (absolute ts {span['first_ts_us']} .. {span['last_end_us']} us; trace start {span['trace_start_us']} us)")
    print(f"launch calls: {info['launch_calls']:,}   CPU ops: {info['cpu_ops']:,}   "
          f"profiler ranges: {info['profiler_ranges']:,}")
    if info["lacks"]:
        print("\n".join(wrap(f"lacks: {info['lacks']}")))
    if info["gpu_streams"]:
        print("\n".join(wrap("GPU streams (busy: the time an op runs, each instant once, as stats has it; summed: "
                             "the ops' durations added up):")))
        print(f"  {'device':>6} {'stream':>7} {'kernels':>9} {'memcpy':>8} {'memset':>8} {'busy ms':>10} {'summed ms':>10}")
        for s in info["gpu_streams"]:
            print(f"  {s['device']:>6} {s['stream']:>7} {s['kernel']:>9,} {s['memcpy']:>8,} {s['memset']:>8,} "
                  f"{s['busy_ms']:>10.3f} {s['summed_ms']:>10.3f}")
    print("events by phase and category:")
    for row in info["by_phase_and_category"]:
        print(f"  {str(row['ph']):>3} {str(row['cat']):<24} {row['events']:>10,}")
    for what, n in info["skipped"].items():
        print(f"skipped: {n:,} {what}")
    return 0
