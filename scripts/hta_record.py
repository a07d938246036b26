#!/usr/bin/env python3
"""Record HTA's figures on one trace, for ``tests/data/hta_figures.json``.

Runs under HTA's own Python (HTA 0.5.0: ``holistictraceanalysis`` with pandas < 3; HTA 0.6.1:
``traceinsight``), so it imports nothing from traceforge. Prints one JSON object: HTA's
version and, per analysis, the exact HTA call and the figures reduced from its result
(times in HTA's µs), or the error HTA raised. HTA writes next to its input, so the trace is
linked into a temporary directory and read from there.

    HTA_PYTHON scripts/hta_record.py TRACE

The analyses: launch_stats, queue, overlap, temporal, idle, idle_intervals, kernel_breakdown
(the counterparts of ``traceforge launch-stats --hta`` and ``stats --hta``'s tables).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from importlib import metadata

CONSTRUCT = "a = TraceAnalysis(trace_files={0: TRACE}, trace_dir=DIR)"


def _version() -> str:
    for dist in ("HolisticTraceAnalysis", "traceinsight"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def _num(value) -> float | int | None:
    value = float(value)
    if value != value:  # NaN: HTA had nothing to reduce
        return None
    return int(value) if value.is_integer() else value


def launch_stats(a) -> dict:
    df = a.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    delay = df["launch_delay"]
    return {"launches": len(df), "cpu_us": _num(df["cpu_duration"].sum()), "gpu_us": _num(df["gpu_duration"].sum()),
            "delay_us": _num(delay.sum()), "delay_median_us": _num(delay.median()),
            "delay_p90_us": _num(delay.quantile(0.9)), "delay_max_us": _num(delay.max())}


def queue(a) -> dict:
    series = a.get_queue_length_time_series(ranks=[0])[0]
    last = series.drop_duplicates(["stream", "ts"], keep="last").groupby("stream")["queue_length"]
    raw = series.groupby("stream")["queue_length"]
    return {str(int(s)): {"points": int(n), "mean": float(m), "max": int(x), "rows": int(r)}
            for s, n, m, x, r in zip(last.size().index, last.size(), last.mean(), last.max(), raw.size())}


def overlap(a) -> dict:
    df = a.get_comm_comp_overlap(visualize=False)
    return {"overlap_pct": _num(df["comp_comm_overlap_pctg"].iloc[0])} if len(df) else {}


def temporal(a) -> dict:
    row = a.get_temporal_breakdown(visualize=False).iloc[0]
    return {"idle_us": _num(row["idle_time(us)"]), "compute_us": _num(row["compute_time(us)"]),
            "non_compute_us": _num(row["non_compute_time(us)"]), "kernel_us": _num(row["kernel_time(us)"])}


def idle(a) -> dict:
    df = a.get_idle_time_breakdown(ranks=[0], visualize=False)[0]
    out: dict = {}
    for r in df.itertuples(index=False):
        out.setdefault(str(int(r.stream)), {})[r.idle_category] = _num(r.idle_time)
    return out


def idle_intervals(a) -> dict:
    df = a.get_idle_time_breakdown(ranks=[0], visualize=False, show_idle_interval_stats=True)[1]
    out: dict = {}
    for r in df.reset_index().to_dict("records"):
        out.setdefault(str(int(r["stream"])), {})[r["idle_category"]] = {
            "count": int(r["count"]), "mean": _num(r["mean"]), "min": _num(r["min"]), "max": _num(r["max"])}
    return out


def kernel_breakdown(a) -> dict:
    types, kernels = a.get_gpu_kernel_breakdown(visualize=False)
    return {"types": {r["kernel_type"]: _num(r["sum"]) for r in types.to_dict("records")},
            "kernels": sorted([r["kernel_type"], r["name"], _num(r["sum (us)"])] for r in kernels.to_dict("records"))}


ANALYSES = {
    "launch_stats": (launch_stats, "a.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]"),
    "queue": (queue, "a.get_queue_length_time_series(ranks=[0])[0], the last row at each (stream, ts)"),
    "overlap": (overlap, "a.get_comm_comp_overlap(visualize=False).comp_comm_overlap_pctg"),
    "temporal": (temporal, "a.get_temporal_breakdown(visualize=False)"),
    "idle": (idle, "a.get_idle_time_breakdown(ranks=[0], visualize=False)[0]"),
    "idle_intervals": (idle_intervals,
                       "a.get_idle_time_breakdown(ranks=[0], visualize=False, show_idle_interval_stats=True)[1]"),
    "kernel_breakdown": (kernel_breakdown, "a.get_gpu_kernel_breakdown(visualize=False)"),
}


def record(trace: str) -> dict:
    from hta.trace_analysis import TraceAnalysis  # only in HTA's own Python

    with tempfile.TemporaryDirectory() as work:
        link = os.path.join(work, os.path.basename(trace))
        os.symlink(os.path.abspath(trace), link)
        out: dict = {"hta": _version(), "construct": CONSTRUCT}
        try:
            a = TraceAnalysis(trace_files={0: link}, trace_dir=work)
        except Exception as e:  # noqa: BLE001 - what HTA raised is the record
            out["error"] = f"{type(e).__name__}: {e}"[:300]
            return out
        for name, (reduce, call) in ANALYSES.items():
            try:
                out[name] = {"call": call, "figures": reduce(a)}
            except Exception as e:  # noqa: BLE001
                out[name] = {"call": call, "error": f"{type(e).__name__}: {e}"[:300]}
    return out


if __name__ == "__main__":
    print(json.dumps(record(sys.argv[1]), allow_nan=False))
