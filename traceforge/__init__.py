"""traceforge: annotate PyTorch profiler traces with analyses you can see in Perfetto.

Python API (the CLI is a thin layer over it)::

    import traceforge
    trace = traceforge.load("trace.json.gz")      # one read: compact columns, bounded memory
    trace.queue_length()                           # pandas DataFrames, times in integer ns
    trace.memcpy_bandwidth(); trace.launch_stats(); trace.stats(); trace.classify(rules="hta")
    trace.patterns(op="aten::addmm"); trace.counters(ncu="ncu.csv"); trace.table("queue_length")
    trace.annotate("out.json.gz", queue_length=True, memcpy_bw=True)   # or all=True
    ranks = traceforge.load("traces/")            # one Trace per rank; tables get a rank column

    traceforge.queue_length("trace.json.gz")      # the same analyses, one read of a file each
    traceforge.annotate("trace.json.gz", "out.json.gz", analyses=["queue_length", "memcpy_bw"])
    traceforge.repair("trace.json.gz", "fixed.json.gz", rebase_time=True)
    traceforge.trim("trace.json.gz", "part.json.gz", steps="3-5")
    traceforge.stats("trace.json.gz", where=traceforge.Filters(steps="2-3", kernel="gemm"))  # any analysis, filtered
    with traceforge.output_compression("small"):  # traces written inside: smaller, slower
        traceforge.annotate("trace.json.gz", "out.json.gz", all=True)

Errors: ``FileNotFoundError`` (``TraceNotFoundError``) for a missing input, ``ValueError``
(``UsageError``) for a parameter that cannot be used, ``TraceFormatError`` for a file that is
not a readable trace; all derive from ``TraceforgeError``.
"""

from __future__ import annotations

from ._version import __version__
from .analyses.filters import Filters
from .annotator.registry import ANALYSES
from .annotator.run import AnnotateResult, annotate
from .api.collectives import Collectives, collectives
from .api.files import (
    classify,
    classify_kernels,
    compare_tails,
    counters,
    critical_path,
    diff,
    export,
    launch_stats,
    memcpy_bandwidth,
    patterns,
    queue_length,
    roofline,
    stats,
)
from .api.merge import MergeResult, merge
from .api.trace import Trace, Traces, load
from .columns.info import trace_info
from .columns.scan import TraceColumns, scan
from .errors import TraceforgeError, TraceFormatError, TraceNotFoundError, UsageError
from .io.codec import output_compression
from .io.limits import ReadLimits, reading_limits
from .rewrite.repair import RepairResult, repair
from .rewrite.trim import TrimResult, trim

__all__ = [
    "ANALYSES", "AnnotateResult", "Filters", "ReadLimits", "RepairResult", "Trace", "TraceColumns", "TraceFormatError", "TraceNotFoundError",
    "TraceforgeError", "Traces", "TrimResult", "UsageError", "__version__", "annotate", "classify",
    "classify_kernels", "compare_tails", "counters", "critical_path", "diff", "export", "launch_stats", "load",
    "memcpy_bandwidth", "output_compression", "patterns", "queue_length", "reading_limits", "repair", "roofline", "scan", "stats", "trace_info", "trim",
    "Collectives", "MergeResult", "collectives", "merge",
]
