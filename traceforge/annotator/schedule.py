"""Running the chosen analyses on the scanned columns, in one thread or two, within a
memory budget; their injections wait in a temporary file until the copy writes them.

``run_analyses`` runs them before the copy (the CPU-side ones first, freeing the columns
no later analysis reads; the GPU-side ones in a second thread where memory allows);
``BesideCopy`` makes the args first and the tracks while the trace is copied.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from ..columns.scan import TraceColumns
from ..emit.tracks import Injections, TidAllocator
from ..io.memory.heap import give_back
from ..io.write.jsontext import Block
from ..plan.scan_plan import ScanPlan
from .plugin import Analysis, AnnotateContext


def run_analyses(cols: TraceColumns, chosen: list[Analysis], options: dict[str, Any]) -> Injections:
    """Run the analyses on the columns ``ScanPlan.scan`` gave; their injections go in ``chosen``'s order.

    Consumes ``cols``: those that read launch calls or CPU ops run first, and these columns
    are emptied once no analysis still to run reads them, so the rest run without their memory.
    Between analyses the big columns leave resident memory (``io.paged``): each analysis
    holds the columns it reads, not all of them.
    Where memory allows (``side_by_side``), the analyses that read only GPU ops run in a
    second thread meanwhile, from the start (most of their time is GIL-free numpy and C).
    """
    reads = ScanPlan.of(chosen, options)
    ctx = AnnotateContext(options, TidAllocator(cols.tracks))
    cpu_side = [a for a in chosen if ScanPlan.of([a], options).cpu_side]
    gpu_side = [a for a in chosen if a not in cpu_side]
    built = Built()

    def build(analysis: Analysis, cols: TraceColumns) -> None:
        # memory is tight unless paired: after each piece the heap's holes and the columns it read leave RSS
        built.add_pieces(analysis.name, analysis.build(cols, ctx), cols, None if paired else give_back)

    paired = bool(cpu_side and gpu_side) and side_by_side(cols, options)
    with ThreadPoolExecutor(1, thread_name_prefix="traceforge-analyses") as beside:  # waits for it on the way out
        # The GPU ops the second thread reads are left untouched below.
        done = beside.submit(lambda scanned=cols: [build(a, scanned) for a in gpu_side]) if paired else None
        cols = picked(cols, reads, options)
        if not paired:
            give_back()
        order = cpu_side if paired else cpu_side + gpu_side
        for i, analysis in enumerate(order):
            build(analysis, cols)
            later = ScanPlan.of(order[i + 1:], options)
            # Emptied in place: the caller's columns (and those ``picked`` was made from) hold the same tables.
            if not later.reads_launches and not later.stack_marks:
                cols.launches.clear()
            if not (later.near_launches or later.stack_marks):
                cols.cpu_ops.clear()
        if done is not None:
            done.result()
    return built.injections(chosen)


def picked(cols: TraceColumns, reads: ScanPlan, options: dict[str, Any]) -> TraceColumns:
    """The columns the analyses read: of the CPU ops and launch calls waiting on disk, those an
    arrow can meet, a stack passes through or a GPU op joins; shown to the caller's ``on_columns`` (figures across ranks)."""
    if cols.spilled_cpu_ops is not None or cols.spilled_launches is not None:
        cols = reads.some_ops_only(cols)
    on_columns: Callable[[TraceColumns], None] | None = options.get("on_columns")
    if on_columns is not None:  # no second scan for what the rank summary reads
        on_columns(cols)
    return cols


class Built:
    """Each analysis's injections, by name; their tracks wait in a temporary file until
    written (deleted with the injections)."""

    def __init__(self) -> None:
        self._spool = tempfile.TemporaryFile()
        self._lock = threading.Lock()
        self._by_name: dict[str, Injections] = {}

    def add(self, name: str, injections: Injections) -> Callable[[TraceColumns], Injections] | None:
        """Keep (after what ``name`` made before) ``injections``; returns its ``later``."""
        rest, injections.later = injections.later, None
        with self._lock:
            injections.spill(self._spool)
            if name in self._by_name:
                self._by_name[name].add(injections)
            else:
                self._by_name[name] = injections
        return rest

    def add_pieces(self, name: str, made: Injections, cols: TraceColumns,
                   between: Callable[[], None] | None = None) -> None:
        """Keep ``made`` and every rest it leaves, each made from ``cols`` once the piece before
        waits on disk (a rest may leave a rest of its own); ``between`` runs after each piece."""
        while True:
            rest = self.add(name, made)
            if between is not None:
                between()
            if rest is None:
                return
            made = rest(cols)

    def injections(self, chosen: list[Analysis]) -> Injections:
        """Everything built so far, in ``chosen``'s order."""
        injections = Injections()
        with self._lock:
            for analysis in chosen:
                if analysis.name in self._by_name:
                    injections.add(self._by_name[analysis.name])
        return injections


class BesideCopy:
    """The analyses split around the copy: the args first, then, in a thread while the trace
    is copied with them, the tracks (the analyses that add no args, and the rest of those
    that do). The tracks go after the last event, so the copy waits for them only there.
    Where no args need CPU ops, the CPU ops the tracks read are picked in that thread too."""

    def __init__(self, cols: TraceColumns, chosen: list[Analysis], options: dict[str, Any]):
        ctx = AnnotateContext(options, TidAllocator(cols.tracks))
        reads = ScanPlan.of(chosen, options)
        patching = [a for a in chosen if a.setting("patches_args", options)]
        early = not all(a.args_without_cpu_ops(cols, options) for a in patching)
        if early:
            cols = picked(cols, reads, options)
        else:  # the args of GPU ops launched by calls of other names: those calls come back now
            cols = reads.joined_back(cols)
        self._chosen, self._built = chosen, Built()
        rests: list[tuple[str, Callable[[TraceColumns], Injections]]] = []
        for analysis in chosen:
            if analysis in patching:
                rest = self._built.add(analysis.name, analysis.build(cols, ctx))
                if rest is not None:
                    rests.append((analysis.name, rest))
            else:
                rests.append((analysis.name, lambda cols, build=analysis.build: build(cols, ctx)))
        self.args = self._built.injections(chosen)
        columns = (lambda: cols) if early else (lambda: picked(cols, reads, options))
        self._tracks = partial(self._run, rests, columns)
        self._done: Future | None = None

    def start(self) -> None:
        """Start making the tracks in a thread, as the copy starts: not before, where the serial
        steps between the reads would wait for the GIL behind the thread's."""
        if self._done is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix="traceforge-analyses")
            self._done = pool.submit(self._tracks)
            pool.shutdown(wait=False)  # its one task runs on

    def _run(self, rests: list[tuple[str, Callable[[TraceColumns], Injections]]],
             columns: Callable[[], TraceColumns]) -> None:
        cols = columns()
        for name, rest in rests:
            self._built.add_pieces(name, rest(cols), cols)

    def finished(self) -> Injections:
        """Every analysis's injections, once the thread is done (its errors raised here)."""
        self.start()
        assert self._done is not None
        self._done.result()
        return self._built.injections(self._chosen)

    def blocks(self) -> Iterator[Block]:
        yield from self.finished().blocks()


# The GPU-side analyses run beside the CPU-side ones only while the estimated peak stays
# under this: both working sets are held at once (beyond the RSS after the scan,
# SIDE_BY_SIDE_BYTES_PER_OP a GPU op: the most measured, docs/benchmarks.md "Memory").
SIDE_BY_SIDE_BUDGET = 400 << 20
SIDE_BY_SIDE_BYTES_PER_OP = 180


def side_by_side(cols: TraceColumns, options: dict[str, Any]) -> bool:
    """Whether to run the GPU-side analyses in a second thread (``two_threads_fit``)."""
    return two_threads_fit(cols, options, SIDE_BY_SIDE_BYTES_PER_OP)


# The tracks are made beside the copy only while this estimate stays under the same budget: the
# columns are held through the copy, beside one analysis's working set and the copy's buffers
# (beyond the RSS after the scan, BESIDE_COPY_BYTES_PER_OP a GPU op at most; the biggest
# traces run the analyses before the copy).
BESIDE_COPY_BYTES_PER_OP = 320


def beside_copy(cols: TraceColumns, options: dict[str, Any]) -> bool:
    """Whether to make the tracks while the trace is copied (``BesideCopy``, ``two_threads_fit``)."""
    return two_threads_fit(cols, options, BESIDE_COPY_BYTES_PER_OP)


def two_threads_fit(cols: TraceColumns, options: dict[str, Any], bytes_per_op: int) -> bool:
    """Whether a second thread of analyses may run: the caller allows it (not when other
    ranks' runs keep the cores busy) and memory does, at ``bytes_per_op`` a GPU op more."""
    if not options.get("side_by_side", True):
        return False
    return current_rss() + bytes_per_op * len(cols.gpu) < SIDE_BY_SIDE_BUDGET


def current_rss() -> int:
    """This process's resident memory in bytes (its peak so far where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
