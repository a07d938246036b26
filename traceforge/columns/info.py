"""What is in a trace: events by phase and category, GPU devices and streams, time span."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..io.codec import input_codec
from ..util.exacttime import ns_to_us_text
from .scan import GPU_KIND_NAMES, TraceColumns, scan


def trace_info(path: str) -> dict[str, Any]:
    """A JSON-able summary of ``path`` (one streaming pass). Launch calls and CPU ops are
    only counted and spanned: they wait on disk, so memory follows the GPU ops alone."""
    cols = scan(path, spill_cpu_ops=True, spill_launch=lambda name: True)
    return summarize(cols, codec=input_codec(path) if path != "-" else "stream")


def summarize(cols: TraceColumns, codec: str = "") -> dict[str, Any]:
    span = cols.time_span()
    if span is not None:
        first, last = span
        span = {"first_ts_us": ns_to_us_text(first), "last_end_us": ns_to_us_text(last), "duration_ms": (last - first) / 1e6}
    streams = []
    gpu = cols.gpu
    for device, stream in sorted(set(zip(gpu.device.tolist(), gpu.stream.tolist()))):
        rows = (gpu.device == device) & (gpu.stream == stream)
        counts = {GPU_KIND_NAMES[k]: int(np.count_nonzero(rows & (gpu.kind == k))) for k in range(3)}
        busy = int(gpu.dur[rows].sum())
        streams.append({"device": device, "stream": stream, **counts, "busy_ms": busy / 1e6})
    by_phase_cat = [
        {"ph": ph, "cat": cat, "events": n}
        for (ph, cat), n in sorted(cols.phase_cat_counts.items(), key=lambda kv: -kv[1])
    ]
    vocab = "2021 Kineto" if any(c in ("Kernel", "Runtime", "Operator") for _, c in cols.phase_cat_counts) else "Kineto"
    return {
        "path": cols.path,
        "codec": codec,
        "events": cols.event_count,
        "vocabulary": vocab,
        "top_level_keys": list(cols.metadata) + ["traceEvents"] if cols.metadata else ["(bare array)"],
        "baseTimeNanoseconds": cols.base_time_ns,
        "rank": (cols.metadata.get("distributedInfo") or {}).get("rank") if isinstance(cols.metadata.get("distributedInfo"), dict) else None,
        "time_span": span,
        "gpu_streams": streams,
        "launch_calls": sum(map(len, cols.all_launches)),
        "cpu_ops": sum(map(len, cols.all_cpu_ops)),
        "profiler_ranges": len(cols.ranges),
        "by_phase_and_category": by_phase_cat,
        "skipped": dict(cols.skipped),
    }
