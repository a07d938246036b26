"""The annotate pipeline: scan, run the chosen analyses, copy the trace with their tracks.

The copy is made while scanning (one read) unless an analysis adds args to existing events:
then the trace is scanned first and read again to copy it with those args patched in. Such an
analysis makes its args first and leaves its tracks to ``Injections.later``, which can run
while the trace is copied (the tracks go after the last event).

Each analysis registers here as an ``Analysis``: its flag, its options, and a pure
``build(cols, ctx) -> Injections``. The CLI and the Python API are built from ``ANALYSES``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .analyses import category_tracks, launch_delay_marks
from .analyses.counters.annotation import add_counter_options, build_counters
from .analyses.counters.tables import has_counters
from .analyses.launches import STREAM_LAUNCH_APIS, calls_of, stream_launch_rows
from .analyses.memcpy_bw import memcpy_bw_tracks
from .analyses.pattern_overlay import add_pattern_options, build_patterns
from .analyses.patterns import operator_marks
from .analyses.queue_length import queue_length_tracks
from .analyses.stacks import NameMask, scan_for_stacks, stack_keeper
from .columns import Table, merged_by_ordinal
from .errors import UsageError
from .flow_anchors import LaunchWindows
from .inject import Block, Injections, TidAllocator
from .io.codec import AtomicOutput, check_writable, spool_stdin
from .io.patch import ExtraArgs, patch_editor
from .io.placed_patch import copy_placed
from .io.reader import EventBatch, TraceReader
from .io.writer import EventSink, write_trace
from .scan import TraceColumns, load_places, scan


@dataclass
class AnnotateContext:
    """What analyses share in one run: options (CLI ``--x-y`` -> ``x_y``) and fresh tids."""

    options: dict[str, Any]
    allocator: TidAllocator


Option = Callable[[dict[str, Any]], Any]  # a setting that depends on the run's options


@dataclass(frozen=True)
class Analysis:
    """An annotate flag: what it adds, its extra options, and what it reads of the trace.

    The settings that say what it reads (``launch_apis``, ``stack_marks``, ``patches_args``)
    are values or functions of the options; the scan keeps only what the chosen analyses read.
    """

    name: str
    help: str
    build: Callable[[TraceColumns, AnnotateContext], Injections]
    add_options: Callable[[argparse.ArgumentParser], None] | None = None
    in_all: bool = True  # --all runs it (False for an analysis that cannot run without an option of its own)
    # Adds args to existing events: the trace is read twice.
    patches_args: bool | Option = False
    # The launch APIs it reads (None: all launch calls).
    launch_apis: frozenset[str] | None | Option = None
    # Draws arrows from stream launch calls: it needs the CPU-side slices near them, not all CPU ops.
    arrows_from_launches: bool = False
    # Reads call stacks (``stacks.build_stacks``): of the CPU ops, those on the stacks of the launch
    # calls it reads and of the ops this function of the names marks (None: reads no stack).
    stack_marks: NameMask | None | Option = None
    # Makes its args (if any) from GPU ops and the launch calls of its APIs alone, for these
    # columns and options: then the CPU ops it may read later are picked while the trace is copied.
    args_without_cpu_ops: Callable[[TraceColumns, dict[str, Any]], bool] = lambda cols, options: False

    def setting(self, name: str, options: dict[str, Any]) -> Any:
        value = getattr(self, name)
        return value(options) if callable(value) else value


def _op_patterns(options: dict[str, Any]) -> bool:
    return options.get("op") is not None or options.get("op_regex") is not None


def _counter_injections(label: str, make_tracks) -> Callable[[TraceColumns, AnnotateContext], Injections]:
    def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
        tracks = make_tracks(cols)
        points = sum(len(t.ts) for t in tracks)
        return Injections(list(tracks), [f"{label}: {len(tracks)} counter tracks, {points:,} points"])
    return build


ANALYSES: dict[str, Analysis] = {
    a.name: a
    for a in (
        Analysis("queue_length", "CUDA stream queue length: one counter track per (GPU, stream)",
                 _counter_injections("queue length", queue_length_tracks), launch_apis=STREAM_LAUNCH_APIS),
        Analysis("memcpy_bw", "memcpy/memset bandwidth in GB/s: one counter track per (GPU, copy kind)",
                 _counter_injections("memcpy bandwidth", memcpy_bw_tracks), launch_apis=frozenset()),
        Analysis("launch_delay", "launch delay: args launch_delay_us/launch_cpu_us on each GPU op, an arrow "
                 "from the launch call for each delay above --delay-cutoff, one counter track per stream",
                 launch_delay_marks.launch_delay_marks, add_options=launch_delay_marks.add_options,
                 patches_args=True, launch_apis=STREAM_LAUNCH_APIS, arrows_from_launches=True,
                 args_without_cpu_ops=lambda cols, options: True),
        Analysis("classify", "kernel classification: a category (and stage) arg on every GPU op by the rules of "
                 "--rules, one utilisation counter track per (GPU, category): share of running ops in percent",
                 category_tracks.category_injections, add_options=category_tracks.add_options,
                 patches_args=True, launch_apis=frozenset(), args_without_cpu_ops=lambda cols, options: True),
        # A no-op with a summary line when the trace has no counters and no --ncu is given.
        Analysis("counters", "hardware counters (the trace's CUPTI range-profiler events, --ncu CSV) and derived "
                 "metrics as a `counters` arg on the kernels (or launch calls) they measured, and achieved "
                 "TFLOP/s and DRAM GB/s counter tracks per GPU",
                 build_counters, add_options=add_counter_options, patches_args=True,
                 # --ncu orders kernels by their launch calls, whatever the API; range-profiler
                 # events pair with stream launches.
                 launch_apis=lambda options: None if options.get("ncu") else STREAM_LAUNCH_APIS,
                 # with counters to place, their tables read call stacks
                 args_without_cpu_ops=lambda cols, options: not has_counters(cols, options.get("ncu"))),
        Analysis("patterns", "frequent GPU op sequences (--op NAME, or mined per stream without it): one slice per "
                 "occurrence of the --top-k patterns on a 'Patterns (stream N)' track",
                 build_patterns, add_options=add_pattern_options,
                 stack_marks=lambda options: operator_marks(options.get("op"), options.get("op_regex"))
                 if _op_patterns(options) else None,
                 patches_args=lambda options: bool(options.get("tag_kernels")),
                 launch_apis=frozenset()),  # its call stacks read the launch calls GPU ops join
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


def annotate(
    path: str,
    out: str | None = None,
    *,
    analyses: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    **flags: bool,
) -> AnnotateResult:
    """Annotate ``path`` with the named analyses (see ``ANALYSES``) into ``out``.

    Analyses can also be switched on as keywords, like the CLI flags:
    ``annotate("t.json.gz", queue_length=True, memcpy_bw=True)`` or ``all=True``.
    ``options`` are the analyses' (CLI ``--x-y`` -> ``x_y``), plus ``side_by_side=False`` to run
    the analyses one at a time (when other work keeps the cores busy; see ``_side_by_side``).
    """
    wanted = [*analyses, *(name for name, a in ANALYSES.items()
                           if flags.get(name) or (flags.get("all") and a.in_all))]
    unknown = [a for a in [*wanted, *flags] if a not in ANALYSES and a != "all"]
    if unknown:
        raise UsageError(f"unknown analysis: {', '.join(unknown)} (known: {', '.join(ANALYSES)})")
    started = time.perf_counter()
    out = out or default_output(path)
    check_writable(out)
    chosen = [ANALYSES[a] for a in dict.fromkeys(wanted)]
    options = dict(options or {})
    if any(a.setting("patches_args", options) for a in chosen):
        appended, summary = _two_passes(path, out, chosen, options)
    else:
        appended, summary = _one_pass(path, out, chosen, options)
    return AnnotateResult(out, appended, summary, time.perf_counter() - started)


def _run_analyses(cols: TraceColumns, chosen: list[Analysis], options: dict[str, Any]) -> Injections:
    """Run the analyses on the columns ``_Reads.scan`` gave; their injections go in ``chosen``'s order.

    Consumes ``cols``: those that read launch calls or CPU ops run first, and these columns
    are emptied once no analysis still to run reads them, so the rest run without their memory.
    Where memory allows (``_side_by_side``), the analyses that read only GPU ops run in a
    second thread meanwhile, from the start (most of their time is GIL-free numpy and C).
    """
    reads = _Reads.of(chosen, options)
    ctx = AnnotateContext(options, TidAllocator(cols.tracks))
    cpu_side = [a for a in chosen if _Reads.of([a], options).cpu_side]
    gpu_side = [a for a in chosen if a not in cpu_side]
    built = _Built()

    def build(analysis: Analysis, cols: TraceColumns) -> None:
        rest = built.add(analysis.name, analysis.build(cols, ctx))
        if rest is not None:
            built.add(analysis.name, rest(cols))

    paired = bool(cpu_side and gpu_side) and _side_by_side(cols, options)
    with ThreadPoolExecutor(1, thread_name_prefix="traceforge-analyses") as beside:  # waits for it on the way out
        # The GPU ops the second thread reads are left untouched below.
        done = beside.submit(lambda scanned=cols: [build(a, scanned) for a in gpu_side]) if paired else None
        cols = _picked(cols, reads, options)
        order = cpu_side if paired else cpu_side + gpu_side
        for i, analysis in enumerate(order):
            build(analysis, cols)
            later = _Reads.of(order[i + 1:], options)
            if later.launch_apis == frozenset() and not later.stack_marks:
                cols.launches = cols.launches.take(np.zeros(0, np.int64))
            if not (later.near_launches or later.stack_marks):
                cols.cpu_ops = cols.cpu_ops.take(np.zeros(0, np.int64))
        if done is not None:
            done.result()
    return built.injections(chosen)


def _picked(cols: TraceColumns, reads: _Reads, options: dict[str, Any]) -> TraceColumns:
    """The columns the analyses read: of the CPU ops waiting on disk, those an arrow can meet
    or a stack passes through; shown to the caller's ``on_columns`` (figures across ranks)."""
    if cols.spilled_cpu_ops is not None:
        cols = reads.some_ops_only(cols)
    on_columns: Callable[[TraceColumns], None] | None = options.get("on_columns")
    if on_columns is not None:  # no second scan for what the rank summary reads
        on_columns(cols)
    return cols


class _Built:
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

    def injections(self, chosen: list[Analysis]) -> Injections:
        """Everything built so far, in ``chosen``'s order."""
        injections = Injections()
        with self._lock:
            for analysis in chosen:
                if analysis.name in self._by_name:
                    injections.add(self._by_name[analysis.name])
        return injections


class _BesideCopy:
    """The analyses split around the copy: the args first, then, in a thread while the trace
    is copied with them, the tracks (the analyses that add no args, and the rest of those
    that do). The tracks go after the last event, so the copy waits for them only there.
    Where no args need CPU ops, the CPU ops the tracks read are picked in that thread too."""

    def __init__(self, cols: TraceColumns, chosen: list[Analysis], options: dict[str, Any]):
        ctx = AnnotateContext(options, TidAllocator(cols.tracks))
        reads = _Reads.of(chosen, options)
        patching = [a for a in chosen if a.setting("patches_args", options)]
        picked = not all(a.args_without_cpu_ops(cols, options) for a in patching)
        if picked:
            cols = _picked(cols, reads, options)
        self._chosen, self._built = chosen, _Built()
        rests: list[tuple[str, Callable[[TraceColumns], Injections]]] = []
        for analysis in chosen:
            if analysis in patching:
                rest = self._built.add(analysis.name, analysis.build(cols, ctx))
                if rest is not None:
                    rests.append((analysis.name, rest))
            else:
                rests.append((analysis.name, lambda cols, build=analysis.build: build(cols, ctx)))
        self.args = self._built.injections(chosen)
        columns = (lambda: cols) if picked else (lambda: _picked(cols, reads, options))
        self._tracks = partial(self._run, rests, columns)
        self._done: Future | None = None

    def start(self) -> None:
        """Start making the tracks in a thread, as the copy starts: not before, where the serial
        steps between the reads would wait for the GIL behind the thread's (~0.04 s at 2 GB)."""
        if self._done is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix="traceforge-analyses")
            self._done = pool.submit(self._tracks)
            pool.shutdown(wait=False)  # its one task runs on

    def _run(self, rests: list[tuple[str, Callable[[TraceColumns], Injections]]],
             columns: Callable[[], TraceColumns]) -> None:
        cols = columns()
        for name, rest in rests:
            self._built.add(name, rest(cols))

    def finished(self) -> Injections:
        """Every analysis's injections, once the thread is done (its errors raised here)."""
        self.start()
        assert self._done is not None
        self._done.result()
        return self._built.injections(self._chosen)

    def blocks(self) -> Iterator[Block]:
        yield from self.finished().blocks()


# The GPU-side analyses run beside the CPU-side ones only while the estimated peak stays
# under this: both working sets are held at once (measured beyond the RSS after the scan: 140-180
# bytes a GPU op, against 90-125 one at a time; on the 5 GB df_index tiling that is 548 MB).
SIDE_BY_SIDE_BUDGET = 400 << 20
SIDE_BY_SIDE_BYTES_PER_OP = 180


def _side_by_side(cols: TraceColumns, options: dict[str, Any]) -> bool:
    """Whether to run the GPU-side analyses in a second thread (``_two_threads_fit``)."""
    return _two_threads_fit(cols, options, SIDE_BY_SIDE_BYTES_PER_OP)


# The tracks are made beside the copy only while this estimate stays under the same budget: the
# columns are held through the copy, beside one analysis's working set and the copy's buffers
# (measured beyond the RSS after the scan: 265 and 320 bytes a GPU op on the 2 GB df_index and
# negative_queue tilings, 209 and 184 MB; the 5 GB ones run the analyses before the copy).
BESIDE_COPY_BYTES_PER_OP = 320


def _beside_copy(cols: TraceColumns, options: dict[str, Any]) -> bool:
    """Whether to make the tracks while the trace is copied (``_BesideCopy``, ``_two_threads_fit``)."""
    return _two_threads_fit(cols, options, BESIDE_COPY_BYTES_PER_OP)


def _two_threads_fit(cols: TraceColumns, options: dict[str, Any], bytes_per_op: int) -> bool:
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


@dataclass(frozen=True)
class _Reads:
    """What the chosen analyses read of the trace: the scan's settings and the columns' trim."""

    launch_apis: frozenset[str] | None  # None: every launch call
    near_launches: bool  # the CPU ops and launch calls near stream launch calls (arrows)
    stack_marks: tuple[NameMask, ...]  # the CPU ops call stacks pass through

    @property
    def cpu_side(self) -> bool:
        """Reads launch calls or CPU ops."""
        return self.launch_apis != frozenset() or self.near_launches or bool(self.stack_marks)

    @classmethod
    def of(cls, chosen: list[Analysis], options: dict[str, Any]) -> _Reads:
        apis = [a.setting("launch_apis", options) for a in chosen]
        marks = (a.setting("stack_marks", options) for a in chosen)
        return cls(None if None in apis else frozenset().union(*apis),
                   any(a.arrows_from_launches for a in chosen), tuple(m for m in marks if m is not None))

    def scan(self, path: str, reader: TraceReader, **kwargs: Any) -> TraceColumns:
        if self.stack_marks and not self.near_launches and self.launch_apis is not None:
            # Call stacks alone: the launch calls GPU ops join, and those of the APIs analyses read.
            return scan_for_stacks(path, marked=self._marked, joined_launches=True, also_calls=self._calls_read,
                                   reader=reader, **kwargs)
        some_ops = self.near_launches or bool(self.stack_marks)
        if self.launch_apis is None or self.stack_marks:  # every launch call
            keep = spill = None
        elif self.near_launches:  # arrows: calls of other APIs count only near a stream launch (seen later)
            read = calls_of(self.launch_apis | STREAM_LAUNCH_APIS)
            keep, spill = None, lambda name: not read(name)
        else:
            keep, spill = calls_of(self.launch_apis), None
        return scan(path, cpu_ops=some_ops, reader=reader, keep_launch=keep, spill_cpu_ops=some_ops,
                    spill_launch=spill, **kwargs)

    def _marked(self, names: list[str]) -> np.ndarray:
        return np.logical_or.reduce([m(names) for m in self.stack_marks])

    def _calls_read(self, names: list[str]) -> np.ndarray:
        """Per name id: is it a launch call of an API analyses read?"""
        read = calls_of(self.launch_apis)
        return np.array([read(n) for n in names] or [False], bool)

    def some_ops_only(self, cols: TraceColumns) -> TraceColumns:
        """Keep only the CPU ops (waiting on disk) that an arrow can meet or a call stack
        passes through, and the launch calls arrows can start at or analyses read. Consumes ``cols``."""
        keeps: list[Callable[[Table], np.ndarray]] = []
        launches = np.zeros(len(cols.launches), bool)
        if self.near_launches:
            windows = LaunchWindows(cols, stream_launch_rows(cols))
            keeps.append(windows.near)
            launches |= windows.near(cols.launches)
        if self.stack_marks:
            keeps.append(stack_keeper(cols, self._marked(cols.names)))
            launches[:] = True  # every call can pop an op off a stack
        if self.launch_apis is None:
            launches[:] = True
        else:
            launches |= self._calls_read(cols.names)[cols.launches.name]
        cols.launches = cols.launches.take(np.flatnonzero(launches))  # in place: the full table goes now
        cols = cols.with_cpu_ops(lambda chunk: np.logical_or.reduce([keep(chunk) for keep in keeps]))
        if cols.spilled_launches is None:
            return cols
        # Calls of other APIs (waiting on disk): those near a stream launch come back.
        return replace(cols, launches=merged_by_ordinal(cols.launches, cols.spilled_launches.select(windows.near)),
                       spilled_launches=None)


def _one_pass(path: str, out: str, chosen: list[Analysis], options: dict[str, Any]) -> tuple[int, list[str]]:
    """Copy events out while scanning them; the new tracks go after the last event."""
    with AtomicOutput(out, inputs=(path,)) as sink:
        events = EventSink(sink)
        reader = TraceReader(path)

        def copy(batch: EventBatch) -> None:
            events.head(reader.head)
            events.events(batch.view)

        cols = _Reads.of(chosen, options).scan(path, reader, on_batch=copy)
        events.head(reader.head)
        injections = _run_analyses(cols, chosen, options)
        return events.finish(injections.blocks(), reader.tail), injections.summary


def _two_passes(path: str, out: str, chosen: list[Analysis], options: dict[str, Any]) -> tuple[int, list[str]]:
    """Scan, analyse, then copy the trace again patching the args analyses asked for (their
    tracks made meanwhile where memory allows: ``_BesideCopy``)."""
    source, spooled = (spool_stdin(), True) if path == "-" else (path, False)
    try:
        reader = TraceReader(source, display_name=path)
        cols = _Reads.of(chosen, options).scan(source, reader, places=True)
        beside = _BesideCopy(cols, chosen, options) if _beside_copy(cols, options) else None
        injections = beside.args if beside is not None else _run_analyses(cols, chosen, options)
        extra_args = ExtraArgs(injections.arg_patches, injections.arg_columns)
        ordinals, spilled_places = cols.gpu.ordinal, cols.places
        del cols  # the copy needs only the injections and the places: the other columns go now
        places = load_places(ordinals, spilled_places)
        appended = beside.blocks() if beside is not None else injections.blocks()
        targets = places.rows_of(extra_args.ordinals) if injections.patches_args() else None
        if beside is not None:
            beside.start()
        if targets is not None:
            count = copy_placed(reader, out, places, targets, extra_args, appended)
        else:
            edit = patch_editor(extra_args) if injections.patches_args() else None
            count = write_trace(TraceReader(source, display_name=path), out, appended, edit=edit)
        return count, (beside.finished() if beside is not None else injections).summary
    finally:
        if spooled:
            os.unlink(source)
