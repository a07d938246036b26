"""The annotate pipeline: scan once, run the chosen analyses, copy the trace with their tracks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .analyses.memcpy_bw import memcpy_bw_tracks
from .analyses.queue_length import queue_length_tracks
from .errors import UsageError
from .inject import Injections
from .io.codec import spool_stdin
from .io.reader import TraceReader
from .io.writer import write_trace
from .scan import TraceColumns, scan


@dataclass(frozen=True)
class Analysis:
    """An annotate flag: what it adds, and whether it needs the CPU-op columns."""

    name: str
    help: str
    build: Callable[[TraceColumns], Injections]
    needs_cpu_ops: bool = False


def _counter_injections(label: str, make_tracks) -> Callable[[TraceColumns], Injections]:
    def build(cols: TraceColumns) -> Injections:
        tracks = make_tracks(cols)
        points = sum(len(t.ts) for t in tracks)
        return Injections(list(tracks), [f"{label}: {len(tracks)} counter tracks, {points:,} points"])
    return build


ANALYSES: dict[str, Analysis] = {
    a.name: a
    for a in (
        Analysis("queue_length", "CUDA stream queue length: one counter track per (GPU, stream)",
                 _counter_injections("queue length", queue_length_tracks)),
        Analysis("memcpy_bw", "memcpy/memset bandwidth in GB/s: one counter track per (GPU, copy kind)",
                 _counter_injections("memcpy bandwidth", memcpy_bw_tracks)),
    )
}


@dataclass
class AnnotateResult:
    out: str
    appended: int
    summary: list[str] = field(default_factory=list)
    seconds: float = 0.0


def default_output(path: str) -> str:
    """``<name>.annotated.json.gz`` beside the input (``-`` for stdin)."""
    if path == "-":
        return "-"
    p = Path(path)
    name = p.name
    for suffix in (".json.gz", ".json.zst", ".json.zstd", ".json", ".gz", ".zst"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return str(p.with_name(f"{name}.annotated.json.gz"))


def annotate(path: str, out: str | None = None, *, analyses: list[str] | tuple[str, ...] = ()) -> AnnotateResult:
    """Annotate ``path`` with the named analyses (see ``ANALYSES``) into ``out``."""
    unknown = [a for a in analyses if a not in ANALYSES]
    if unknown:
        raise UsageError(f"unknown analysis: {', '.join(unknown)} (known: {', '.join(ANALYSES)})")
    started = time.perf_counter()
    out = out or default_output(path)
    source, spooled = (spool_stdin(), True) if path == "-" else (path, False)
    try:
        chosen = [ANALYSES[a] for a in analyses]
        injections = Injections()
        if chosen:
            cols = scan(source, cpu_ops=any(a.needs_cpu_ops for a in chosen), display_name=path)
            for analysis in chosen:
                injections.add(analysis.build(cols))
        reader = TraceReader(source, display_name=path)
        appended = write_trace(reader, out, injections.events())
    finally:
        if spooled:
            os.unlink(source)
    return AnnotateResult(out, appended, injections.summary, time.perf_counter() - started)
