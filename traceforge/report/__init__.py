"""``traceforge report``: one self-contained HTML page of plots per rank (``report.page``),
from the Python API (``report.collect``), one rank loaded at a time."""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import partial

from ..api.fan_out import ranked
from ..api.trace import Trace
from ..io.read.codec import readable_twice
from ..io.read.rank_files import trace_paths
from ..io.write.output import check_writable, write_file
from .collect import RankReport, rank_report
from .downsample import DEFAULT_BUCKETS
from .page import render, require_bokeh

__all__ = ["RankReport", "rank_report", "render", "write_report"]


def write_report(inputs: Iterable[str | os.PathLike], out: str, *, buckets: int = DEFAULT_BUCKETS, jobs: int | None = 1,
                 cluster: str | None = None) -> list[RankReport]:
    """Write the report of ``inputs`` (one trace per rank, or directories of them) to ``out``;
    return each rank's data. Each trace is loaded, summarized and let go before the next;
    ``jobs`` at once in processes (None: the cores), or on the Dask scheduler at ``cluster``
    (``api.fan_out``): only each rank's summary comes back."""
    require_bokeh()  # the missing extra is an error before any trace is read
    paths = trace_paths([os.fspath(p) for p in inputs])
    check_writable(out, paths)  # not the input, and writable: before any trace is read
    job = partial(_rank_report, buckets)
    reports = [report for _, _, report in ranked(paths, job, jobs=jobs, cluster=cluster)]
    reports.sort(key=lambda r: r.rank)
    write_file(out, render(reports).encode("utf-8", "backslashreplace"), paths)
    return reports


def _rank_report(buckets: int, path: str, rank: int) -> RankReport:
    """One trace's report data (a ``ranked`` job: runs where the trace is read). The roofline reads
    the trace again: stdin or a FIFO is spooled to a file first."""
    with readable_twice(path) as readable:
        return rank_report(rank, path, Trace.read(readable), buckets=buckets)
