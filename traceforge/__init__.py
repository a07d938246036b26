"""traceforge: annotate PyTorch profiler traces with analyses you can see in Perfetto.

Python API (the CLI is a thin layer over it)::

    import traceforge
    traceforge.annotate("trace.json.gz", "out.json.gz", analyses=["queue_length", "memcpy_bw"])
    df = traceforge.queue_length("trace.json.gz")       # pandas DataFrame, ts in integer ns
    df = traceforge.memcpy_bandwidth("trace.json.gz")
"""

from __future__ import annotations

__version__ = "0.1.0"

import pandas as pd

from .annotate import ANALYSES, AnnotateResult, annotate
from .errors import TraceforgeError, TraceFormatError, UsageError
from .info import trace_info
from .scan import TraceColumns, scan


def queue_length(path: str, *, launched_before_ns: int | None = None) -> pd.DataFrame:
    """Queue length change points of every (device, stream): device, stream, ts (ns), queue_length."""
    from .analyses.queue_length import queue_length as compute

    return compute(scan(path, cpu_ops=False), launched_before_ns=launched_before_ns)


def memcpy_bandwidth(path: str) -> pd.DataFrame:
    """Bandwidth change points of every (device, copy kind): device, kind, ts (ns), gbps."""
    from .analyses.memcpy_bw import memcpy_bandwidth as compute

    return compute(scan(path, cpu_ops=False))


__all__ = [
    "ANALYSES", "AnnotateResult", "TraceColumns", "TraceFormatError", "TraceforgeError", "UsageError",
    "annotate", "memcpy_bandwidth", "queue_length", "scan", "trace_info",
]
