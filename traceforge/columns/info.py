"""What is in a trace: events by phase and category, GPU devices and streams, time span."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..io.read.codec import input_codec
from ..util.exacttime import ns_to_us_text
from ..util.union import union_ns
from .scan import GPU_KIND_NAMES, TraceColumns, scan

# What marks a trace as the PyTorch profiler's (Kineto's): its categories (2021's capitalised
# ones apart), or its top-level keys. A trace with neither is a plain Chrome trace.
KINETO_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
                         "user_annotation", "gpu_user_annotation", "python_function", "cuda_profiler_range",
                         "cuda_sync", "ac2g", "fwdbwd", "cpu_instant_event"})
KINETO_2021_CATS = frozenset({"Kernel", "Runtime", "Operator", "Memcpy", "Memset"})
KINETO_KEYS = frozenset({"schemaVersion", "deviceProperties", "distributedInfo", "traceName", "baseTimeNanoseconds"})
NO_GPU = "no GPU events (kernel, gpu_memcpy, gpu_memset)"
RECORD_GPU = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) records them"


def trace_info(path: str) -> dict[str, Any]:
    """A JSON-able summary of ``path`` (one streaming pass). Launch calls and CPU ops are
    only counted and spanned: they wait on disk, so memory follows the GPU ops alone."""
    cols = scan(path, spill_cpu_ops=True, spill_launch=lambda name: True)
    return summarize(cols, codec=input_codec(path) if path != "-" else "stream")


def vocabulary(cols: TraceColumns) -> str:
    """"2021 Kineto", "Kineto", or "Chrome trace, not Kineto" (``KINETO_CATS``, ``KINETO_KEYS``)."""
    cats = {c for _, c in cols.phase_cat_counts}
    if cats & KINETO_2021_CATS:
        return "2021 Kineto"
    if cats & KINETO_CATS or KINETO_KEYS & set(cols.metadata):
        return "Kineto"
    return "Chrome trace, not Kineto"


def lacks(cols: TraceColumns) -> str | None:
    """What the trace lacks for the GPU analyses (one line, without the path), or None: it
    has GPU ops."""
    if len(cols.gpu):
        return None
    if vocabulary(cols) == "Chrome trace, not Kineto":
        return (f"{NO_GPU}: a plain Chrome trace, not a PyTorch profiler (Kineto) trace; "
                f"{RECORD_GPU}")
    return f"{NO_GPU}: profiled without CUDA activity? {RECORD_GPU}"


def summarize(cols: TraceColumns, codec: str = "") -> dict[str, Any]:
    """``trace_info``'s summary of scanned columns."""
    span = cols.time_span()
    if span is not None:
        first, last = span
        start = first if cols.trace_start_ns is None else cols.trace_start_ns  # Perfetto's time 0
        span = {"first_ts_us": ns_to_us_text(first), "last_end_us": ns_to_us_text(last),
                "duration_ms": (last - first) / 1e6, "trace_start_us": ns_to_us_text(start),
                "first_rel_us": ns_to_us_text(first - start), "last_end_rel_us": ns_to_us_text(last - start)}
    streams = []
    gpu = cols.gpu
    for device, stream in sorted(set(zip(gpu.device.tolist(), gpu.stream.tolist()))):
        rows = (gpu.device == device) & (gpu.stream == stream)
        counts = {GPU_KIND_NAMES[k]: int(np.count_nonzero(rows & (gpu.kind == k))) for k in range(3)}
        ts, dur = gpu.ts[rows].astype(np.int64), np.maximum(gpu.dur[rows], 0).astype(np.int64)
        streams.append({"device": device, "stream": stream, **counts, "busy_ms": (union_ns(ts, ts + dur) if len(ts) else 0) / 1e6,
                        "summed_ms": int(dur.sum()) / 1e6})
    by_phase_cat = [
        {"ph": ph, "cat": cat, "events": n}
        for (ph, cat), n in sorted(cols.phase_cat_counts.items(), key=lambda kv: -kv[1])
    ]
    return {
        "path": cols.path,
        "codec": codec,
        "events": cols.event_count,
        "vocabulary": vocabulary(cols),
        "top_level_keys": ["(bare array)"] if cols.layout == "array" else [*cols.metadata, "traceEvents"],
        "lacks": lacks(cols),
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

