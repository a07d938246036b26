"""What the chosen features read of the trace: the scan's settings, and which CPU ops and
launch calls the columns keep after it (``ScanPlan``), from what each declares
(``annotator.plugin.Analysis``: ``launch_apis``, ``stack_marks``, ...; ``Reads`` here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ..analyses.launches.calls import (
    STREAM_LAUNCH_APIS,
    calls_of,
    is_call_of,
    joinable_rows,
    launch_of_gpu,
    stream_launch_mask,
)
from ..analyses.structure.filters import Filters
from ..analyses.structure.stacks import NameMask, joined_calls, stack_keeper, stack_ops
from ..columns.scan import TraceColumns, scan
from ..columns.table import Table, merged_by_ordinal
from ..emit.flow_anchors import LaunchWindows
from ..io.read.reader import TraceReader
from ..util.search import in_sorted


class Reads(Protocol):
    """What a feature declares it reads of the scan (``annotator.plugin.Analysis`` has these): each
    a value, or a function of the options (``setting``)."""

    arrows_from_launches: bool
    op_shapes: Callable[[str], bool] | None

    def setting(self, name: str, options: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class ScanPlan:
    """What the chosen analyses read of the trace: the scan's settings and the columns' trim."""

    launch_apis: frozenset[str] | None  # None: every launch call
    near_launches: bool  # the CPU ops and launch calls near stream launch calls (arrows)
    stack_marks: tuple[NameMask, ...]  # the CPU ops call stacks pass through
    memory_events: bool = False  # Kineto's [memory] instants (parsed one by one: only when read)
    joined_launches: bool = False  # the launch calls GPU ops join, whatever their API
    op_shapes: tuple[Callable[[str], bool], ...] = ()  # the CPU ops whose shapes are kept, by name

    @property
    def cpu_side(self) -> bool:
        """Reads launch calls or CPU ops."""
        return self.reads_launches or self.near_launches or bool(self.stack_marks)

    @property
    def reads_launches(self) -> bool:
        """Reads some launch calls (those of its APIs, or those GPU ops join)."""
        return self.launch_apis != frozenset() or self.joined_launches

    @classmethod
    def of(cls, chosen: list[Reads], options: dict[str, Any]) -> ScanPlan:
        apis = [a.setting("launch_apis", options) for a in chosen]
        marks = (a.setting("stack_marks", options) for a in chosen)
        return cls(None if None in apis else frozenset().union(*apis),
                   any(a.arrows_from_launches for a in chosen), tuple(m for m in marks if m is not None),
                   any(a.setting("memory_events", options) for a in chosen),
                   any(a.setting("joined_launches", options) for a in chosen),
                   tuple(a.op_shapes for a in chosen if a.op_shapes is not None))

    def scan(self, path: str, reader: TraceReader, where: Filters | None = None, **kwargs: Any) -> TraceColumns:
        """The columns the analyses read, of what ``where`` keeps."""
        kwargs["memory"] = kwargs["spill_memory"] = self.memory_events  # read a device at a time, by the last analysis
        if self.op_shapes:
            kwargs["op_shapes"] = self.shapes_of
        if self.stack_marks and not self.near_launches and self.launch_apis is not None:
            # Call stacks alone: the launch calls GPU ops join, and those of the APIs analyses read.
            cols = filtered_scan(path, where, cpu_ops=True, spill_cpu_ops=True, spill_launch=lambda name: True,
                                 reader=reader, **kwargs)
            return stack_ops(cols, self._marked(cols.names), also_calls=self._calls_read(cols.names))
        some_ops = self.near_launches or bool(self.stack_marks)
        if self.launch_apis is None or self.stack_marks:  # every launch call
            keep = spill = None
        elif self.near_launches or self.joined_launches:
            # Calls of other APIs wait on disk: those near a stream launch (arrows) or that a GPU op joins
            # come back (both known once every call and GPU op is scanned).
            read = calls_of(self.launch_apis | (STREAM_LAUNCH_APIS if self.near_launches else frozenset()))
            keep, spill = None, lambda name: not read(name)
        else:
            keep, spill = calls_of(self.launch_apis), None
        return filtered_scan(path, where, cpu_ops=some_ops, reader=reader, keep_launch=keep, spill_cpu_ops=some_ops,
                             spill_launch=spill, **kwargs)

    def columns(self, path: str, reader: TraceReader, where: Filters | None = None) -> TraceColumns:
        """The columns the analyses read as they read them: the scan, then of the CPU ops and launch
        calls waiting on disk only those they read (``some_ops_only``), as an annotate run has them."""
        cols = self.scan(path, reader, where)
        if cols.spilled_cpu_ops is not None or cols.spilled_launches is not None:
            cols = self.some_ops_only(cols)
        return cols

    def shapes_of(self, name: str) -> bool:
        """Does an analysis read the shapes of the CPU ops named ``name``?"""
        return any(picks(name) for picks in self.op_shapes)

    def _marked(self, names: list[str]) -> np.ndarray:
        return np.logical_or.reduce([m(names) for m in self.stack_marks])

    def _calls_read(self, names: list[str]) -> np.ndarray:
        """Per name id: is it a launch call of an API analyses read?"""
        return is_call_of(names, self.launch_apis)

    def some_ops_only(self, cols: TraceColumns) -> TraceColumns:
        """Keep only the CPU ops (waiting on disk) that an arrow can meet or a call stack
        passes through, and the launch calls arrows can start at, GPU ops join (where read)
        or analyses read. Consumes ``cols``."""
        keeps: list[Callable[[Table], np.ndarray]] = []
        back: list[Callable[[Table], np.ndarray]] = []  # which launch calls on disk come back
        joined = None
        if self.joined_launches and cols.spilled_launches is not None:
            cols = self.joined_back(cols)  # first: arrows start at them, so their windows count
            joined = joined_calls(cols)
        launches = np.zeros(len(cols.launches), bool) if joined is None else joined(cols.launches)
        if self.near_launches:
            windows = LaunchWindows(cols, stream_launch_mask(cols))
            keeps.append(windows.near)
            launches |= windows.near(cols.launches)  # each stream launch inside its own window
            # a joined call is in memory now, the others near a window come back
            back.append(windows.near if joined is None else lambda chunk: windows.near(chunk) & ~joined(chunk))
        if self.stack_marks:
            keeps.append(stack_keeper(cols, self._marked(cols.names)))
            launches[:] = True  # every call can pop an op off a stack
        if self.launch_apis is None:
            launches[:] = True
        else:
            launches |= self._calls_read(cols.names)[cols.launches.name]
        cols.launches = cols.launches.taken(np.flatnonzero(launches))  # in place: the full table goes now
        if cols.spilled_cpu_ops is not None:
            cols = cols.with_cpu_ops(lambda chunk: np.logical_or.reduce([keep(chunk) for keep in keeps]))
        if cols.spilled_launches is None:
            return cols
        if not back:
            return replace(cols, spilled_launches=None)
        # Calls of other APIs (waiting on disk) near a stream launch come back.
        called = cols.spilled_launches.select(lambda chunk: np.logical_or.reduce([b(chunk) for b in back]))
        return replace(cols, launches=merged_by_ordinal(cols.launches, called), spilled_launches=None)

    def joined_back(self, cols: TraceColumns) -> TraceColumns:
        """``cols`` with the launch calls waiting on disk that a GPU op joins in memory too (launches
        of APIs by other names: a launch is the call a GPU op joins), where the analyses read
        them; the calls on disk stay there for ``some_ops_only``. Only GPU ops that join no call
        in memory are looked for, so a trace whose launches all have known names costs one join."""
        spilled = cols.spilled_launches
        if not self.joined_launches or spilled is None or not len(spilled):
            return cols
        unjoined = launch_of_gpu(cols, joinable_rows(cols)) < 0
        wanted = np.sort(cols.gpu.correlation[unjoined])
        wanted = wanted[wanted >= 0]
        if not len(wanted):
            return cols
        have = cols.launches.ordinal  # in file order
        spilled.keep_open()  # read again by ``some_ops_only``
        back = spilled.select(lambda chunk: in_sorted(wanted, chunk.correlation) & (chunk.correlation >= 0)
                              & ~in_sorted(have, chunk.ordinal))
        return replace(cols, launches=merged_by_ordinal(cols.launches, back)) if len(back) else cols


def filtered_scan(path: str, where: Filters | None, **scan_options: Any) -> TraceColumns:
    """``scan(path, **scan_options)`` of what ``where`` keeps (``Filters.apply``): the scan also
    keeps what the filters read, and the columns come back as ``scan_options`` asked for them."""
    if not where:
        return scan(path, **scan_options)
    wide, narrowed = where.widened(scan_options)
    return narrowed(where.apply(scan(path, **wide)))
