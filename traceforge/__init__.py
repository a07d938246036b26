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

import os as _os
import signal as _signal
import sys as _sys


def _stopped_while_starting(signum: int, frame: object) -> None:
    """The command line stopped while its modules load: one line, no traceback, nothing to clean up."""
    what = "interrupted" if signum == _signal.SIGINT else f"terminated by {_signal.Signals(signum).name}"
    _os.write(2, f"traceforge: {what}\n".encode())
    _os._exit(128 + signum)


# ``python -m traceforge`` (argv[0] is "-m" while the package loads) or the ``traceforge`` script:
# a signal before the command line's own handlers are in place (``cli.main.signals_unwind``, which
# replaces these) ends it in one line.
_CLI_STARTING = _os.path.basename(_sys.argv[0]) in ("-m", "traceforge") if _sys.argv else False
if _CLI_STARTING:
    for _name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(_signal, _name):
            _signal.signal(getattr(_signal, _name), _stopped_while_starting)

from ._version import __version__
from .analyses.structure.filters import Filters
from .annotator.registry import ANALYSES
from .annotator.run import AnnotateResult, annotate
from .api.collectives import Collectives, collectives
from .api.files import DERIVED as _DERIVED
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
    table,
)
from .api.merge import MergeResult, merge
from .api.trace import Trace, Traces, load
from .columns.info import trace_info
from .columns.scan import TraceColumns, scan
from .errors import TraceforgeError, TraceFormatError, TraceNotFoundError, UsageError
from .io.read.limits import ReadLimits, reading_limits
from .io.write.output import output_compression
from .rewrite.repair import RepairResult, repair
from .rewrite.trim import TrimResult, trim

__all__ = [
    "ANALYSES", "AnnotateResult", "Filters", "ReadLimits", "RepairResult", "Trace", "TraceColumns", "TraceFormatError", "TraceNotFoundError",
    "TraceforgeError", "Traces", "TrimResult", "UsageError", "__version__", "annotate", "classify",
    "classify_kernels", "compare_tails", "counters", "critical_path", "diff", "export", "launch_stats", "load",
    "memcpy_bandwidth", "output_compression", "patterns", "queue_length", "reading_limits", "repair", "roofline", "scan", "stats", "trace_info", "trim",
    "Collectives", "MergeResult", "collectives", "merge", "table",
]
# The path-level function of each feature with a table that has none written in ``api.files``.
globals().update(_DERIVED)
__all__ += sorted(_DERIVED)
