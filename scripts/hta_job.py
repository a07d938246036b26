#!/usr/bin/env python3
"""Run one Holistic Trace Analysis feature on one trace: HTA's side of ``scripts/bench.py --hta``.

Runs under HTA's own Python (HTA 0.5.0 needs pandas < 3, which traceforge's
environment does not have), so it imports nothing from traceforge. HTA writes its traces next
to the input, so the trace is linked into OUT_DIR and HTA reads it from there.

    HTA_PYTHON scripts/hta_job.py FEATURE TRACE OUT_DIR [OPERATOR]

FEATURE: load, counters (queue length and memcpy bandwidth tracks), sequences (frequent kernel
sequences of OPERATOR, with their overlay trace), breakdown (GPU time per kernel type),
launch-stats, or numbers (prints ``summary`` of HTA's launch statistics and queue lengths as
JSON, for ``scripts/hta_crosscheck.py``).
"""

from __future__ import annotations

import json
import os
import sys


def summary(launches, queue) -> dict:
    """What both tools must agree on, from a launch table (launch_delay, cpu_duration,
    gpu_duration in µs) and queue-length points (stream, ts, queue_length): counts,
    delay quantiles (clipped at 0, as HTA does), duration sums, and per stream the
    distinct change times and the mean and peak of the last point at each."""
    delay = launches["launch_delay"].clip(lower=0)
    last = queue.drop_duplicates(["stream", "ts"], keep="last").groupby("stream")["queue_length"]
    return {
        "launches": len(launches), "delay median us": float(delay.median()), "delay p90 us": float(delay.quantile(0.9)),
        "cpu us": float(launches["cpu_duration"].sum()), "gpu us": float(launches["gpu_duration"].sum()),
        "queue": {str(int(stream)): [int(n), round(float(mean), 3), int(peak)]
                  for stream, n, mean, peak in zip(last.size().index, last.size(), last.mean(), last.max())},
    }


def run(feature: str, trace: str, out_dir: str, operator: str | None = None) -> None:
    from hta.trace_analysis import TraceAnalysis  # only in HTA's own Python

    link = os.path.join(out_dir, os.path.basename(trace))
    os.symlink(os.path.abspath(trace), link)
    analyzer = TraceAnalysis(trace_files={0: link}, trace_dir=out_dir)
    if feature == "counters":
        analyzer.generate_trace_with_counters(ranks=[0])
    elif feature == "sequences":
        # Its default renaming of other kernels labels the one "PyTorch Profiler" span and
        # fails on a tiled trace, which has one per copy; without it, the time on an untiled trace
        # is the same (docs/benchmarks.md, "Against HTA").
        analyzer.get_frequent_cuda_kernel_sequences(operator, out_dir, rank=0, compress_other_kernels=False)
    elif feature == "breakdown":
        analyzer.get_gpu_kernel_breakdown(visualize=False)
    elif feature == "launch-stats":
        analyzer.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)
    elif feature == "numbers":
        launches = analyzer.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
        print(json.dumps(summary(launches, analyzer.get_queue_length_time_series(ranks=[0])[0])))
    elif feature != "load":
        raise SystemExit(f"unknown feature {feature!r}")


if __name__ == "__main__":
    run(*sys.argv[1:])
