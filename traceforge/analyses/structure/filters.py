"""Filters: the part of a trace an analysis looks at, applied to its columns after the scan
(no temporary trace, no second read). ``Filters(steps="2-3")`` is what ``--steps 2-3`` means
on every analysis command and on ``annotate``.

Each filter keeps some rows of the columns' tables (GPU ops, launch calls, CPU ops, profiler
ranges, steps), computed from the columns as scanned, so the filters given together keep
the rows every one of them keeps (their order does not matter):

- ``steps`` ``"N-M"`` (or ``"N"``): ProfilerStep#N .. #M (``steps.steps_cut``, what ``trim
  --steps`` cuts): the GPU ops of those steps (launched from their CPU ranges), and of the
  other tables the rows in the window from the start of ProfilerStep#N to the end of #M;
- ``window`` ``"A:B"``: [A, B) relative to the trace start (its earliest ts >= 0, metadata
  aside: Perfetto's time 0 and ``trim``'s), µs or with a unit (``1.5ms``); an empty side is the
  trace's start or end. ``trim --window A:B`` cuts the same window.

  A window keeps, as ``trim`` does, every slice overlapping [start, end), whole, not clipped
  (a zero-length one when start <= ts < end), and every row of another table with a ``ts``
  and no ``dur`` when start <= ts < end;
- ``kernel`` REGEX: the GPU ops (kernels, copies, sets) whose name matches (``re.search``);
  the launch calls of the GPU ops it drops go with them (a call none of whose GPU ops is
  kept); launch calls that launch nothing, CPU ops and ranges stay;
- ``op`` REGEX: the CPU ops whose name matches, and the work inside them: the CPU ops and
  launch calls that start inside one ([ts, ts + dur)) on the same thread, and the GPU ops
  whose launch call (same correlation) is such a call. Other CPU ops, launch calls and GPU
  ops go; ranges and steps stay.

What the columns hold of the whole trace (event counts by phase and category, names,
metadata) is not filtered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ...columns.scan import TraceColumns
from ...columns.table import GrowingColumns, SpilledColumns, Table
from ...errors import UsageError
from ...util.distinct import unique
from ...util.exacttime import ns_to_us_text
from ...util.regex import shown, user_regex
from ...util.time_window import parse_steps, parse_window, slice_in_window
from ..launches.calls import STREAM_LAUNCH_APIS, calls_of
from .steps import steps_cut, steps_window

Keep = Callable[[Table], np.ndarray]  # a table's (or a chunk's) rows -> which stay
_OPTIONS = ("steps", "window", "kernel", "op")


@dataclass(frozen=True)
class Filters:
    """Which part of a trace to analyse (see the module docstring); ``None``: no such filter.
    Values are checked when made: a bad one is a ``UsageError`` naming the option."""

    steps: str | None = None
    window: str | None = None
    kernel: str | None = None
    op: str | None = None

    def __post_init__(self) -> None:
        with _named("steps", self.steps):
            if self.steps is not None:
                parse_steps(self.steps)
        with _named("window", self.window):
            if self.window is not None:
                parse_window(self.window, 0)
        for option in ("kernel", "op"):
            _regex(option, getattr(self, option))

    def __bool__(self) -> bool:
        return any(getattr(self, o) is not None for o in _OPTIONS)

    def describe(self) -> str:
        """``--steps 2-3 --kernel gemm``: as given on the command line."""
        return " ".join(f"--{o} {getattr(self, o)}" for o in _OPTIONS if getattr(self, o) is not None)

    def window_ns(self, cols: TraceColumns) -> tuple[int, int] | None:
        """[start, end) in the trace's ns that ``steps`` and ``window`` leave (both: where they
        meet), or None with neither."""
        lo, hi = None, None
        if self.steps is not None:
            with _named("steps", self.steps):
                lo, hi = steps_window(cols, *parse_steps(self.steps))
        if self.window is not None:
            with _named("window", self.window):
                start, end = parse_window(self.window, trace_start(cols))
            lo, hi = (start, end) if lo is None else (max(lo, start), min(hi, end))
            if lo >= hi:
                raise UsageError(f"--window {self.window} and --steps {self.steps}: they do not meet")
        return None if lo is None else (lo, hi)

    def widened(self, scan_options: dict[str, Any]) -> tuple[dict[str, Any], Callable[[TraceColumns], TraceColumns]]:
        """``scan``'s options with what these filters read that a scan with ``scan_options``
        would not keep (launch calls, CPU ops: on disk), and what takes it out of the filtered
        columns again, so an analysis sees the columns it asked for."""
        wide = dict(scan_options)
        extra_launches = None
        need = None if self.op is not None else calls_of(STREAM_LAUNCH_APIS) if self.steps is not None else False
        keep = scan_options.get("keep_launch")
        if need is not False and keep is not None:
            spill = scan_options.get("spill_launch")
            wide["keep_launch"] = lambda name: keep(name) or need is None or need(name)
            wide["spill_launch"] = lambda name: (spill is not None and spill(name)) if keep(name) else True
            extra_launches = (keep, spill)
        extra_cpu_ops = self.op is not None and not scan_options.get("cpu_ops", True)
        if extra_cpu_ops:
            wide["cpu_ops"] = wide["spill_cpu_ops"] = True

        def narrowed(cols: TraceColumns) -> TraceColumns:
            if extra_launches is not None and cols.spilled_launches is not None:
                keep, spill = extra_launches
                wanted = np.array([keep(n) for n in cols.names] or [False], bool)
                cols = replace(cols, spilled_launches=None if spill is None else
                               cols.spilled_launches.filtered(lambda chunk: wanted[chunk.name]))
            if extra_cpu_ops:
                cols = replace(cols, spilled_cpu_ops=None, cpu_ops=cols.cpu_ops.take(np.zeros(0, np.int64)))
            return cols

        return wide, narrowed

    def apply(self, cols: TraceColumns) -> TraceColumns:
        """The columns of what these filters keep (new tables; ``cols`` is left as it was, and
        its CPU ops or launch calls on disk are read, not consumed)."""
        if not self:
            return cols
        window = self.window_ns(cols) if self.window is not None else None  # (steps and window: do they meet)
        by_table: dict[str, list[Keep]] = {}
        if self.steps is not None:
            with _named("steps", self.steps):
                cut = steps_cut(cols, *parse_steps(self.steps))
            for name, table in _tables(cols).items():
                by_table.setdefault(name, []).append(
                    (lambda gpu, mine=cut.gpu: mine) if name == "gpu" else _in_window(table, cut.start, cut.cpu_end))
        if window is not None:
            for name, table in _tables(cols).items():
                by_table.setdefault(name, []).append(_in_window(table, *window))
        if self.kernel is not None:
            for name, keep in _kernel_keeps(cols, _regex("kernel", self.kernel)).items():
                by_table.setdefault(name, []).append(keep)
        if self.op is not None:
            for name, keep in _OpScope(cols, _regex("op", self.op)).keeps().items():
                by_table.setdefault(name, []).append(keep)
        changed: dict[str, Any] = {}
        gpu_mask = None
        for name, keeps in by_table.items():
            table = getattr(cols, name)

            def keep(chunk: Table, keeps: list[Keep] = keeps) -> np.ndarray:
                return np.logical_and.reduce([k(chunk) for k in keeps])

            if isinstance(table, SpilledColumns):
                changed[name] = table.filtered(keep)
                continue
            mask = keep(table)
            changed[name] = table.take(np.flatnonzero(mask))
            if name == "gpu":
                gpu_mask = mask
            elif name == "ranges":
                changed["range_args"] = [a for a, k in zip(cols.range_args, mask.tolist()) if k]
        if gpu_mask is not None and cols.places is not None:
            changed["places"] = _aligned(cols.places, gpu_mask)
        if self.window is not None and not any(len(t) for t in changed.values() if not isinstance(t, list)):
            span = cols.time_span()
            start = trace_start(cols)
            lasts = f" (the trace's events end {ns_to_us_text(span[1] - start)} µs after its start)" \
                if span is not None and start is not None else ""
            raise UsageError(f"--window {self.window}: no event of the trace is in it{lasts}")
        return replace(cols, **changed)


def trace_start(cols: TraceColumns) -> int | None:
    """The trace start in ns (the earliest ts >= 0 of any event but metadata) where the scan
    recorded it, else the first start of the columns' events (an nsys CSV)."""
    if cols.trace_start_ns is not None:
        return cols.trace_start_ns
    span = cols.time_span()
    return None if span is None else span[0]


class _named:
    """A ``UsageError`` inside names the option (``--steps 9: ...``)."""

    def __init__(self, option: str, value: object):
        self.option, self.value = option, value

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, error: BaseException | None, tb: object) -> None:
        if not isinstance(error, UsageError) or str(error).startswith("--"):
            return
        text = str(error)
        if text.startswith(f"{self.option} ") or text.startswith(f"{self.option}:"):  # the parser's own naming
            raise UsageError(f"--{text}") from None
        raise UsageError(f"--{self.option} {self.value}: {text}") from None


def _regex(option: str, text: str | None) -> re.Pattern | None:
    if text is None:
        return None
    return user_regex(text, f"--{option} {shown(text)}: not a regular expression")


def _tables(cols: TraceColumns) -> dict[str, Table | SpilledColumns]:
    """The columns' tables of events with a time, by field name (``places``: rows of the GPU
    ops, filtered with them)."""
    return {f.name: t for f in fields(cols) if isinstance(t := getattr(cols, f.name), (Table, SpilledColumns))
            and "ts" in (t.fields if isinstance(t, SpilledColumns) else t.cols)}


def _in_window(table: Table | SpilledColumns, lo: int, hi: int) -> Keep:
    has_dur = "dur" in (table.fields if isinstance(table, SpilledColumns) else table.cols)

    def keep(chunk: Table) -> np.ndarray:
        ts = chunk.ts.astype(np.int64)
        if not has_dur:
            return (ts >= lo) & (ts < hi)
        return slice_in_window(ts, ts + np.maximum(chunk.dur, 0), lo, hi)

    return keep


def _names_matching(cols: TraceColumns, regex: re.Pattern) -> np.ndarray:
    """Per name id: does ``regex`` find a match in it (one entry at least)?"""
    return np.array([regex.search(n) is not None for n in cols.names] or [False], bool)


def _kernel_keeps(cols: TraceColumns, regex: re.Pattern) -> dict[str, Keep]:
    matches = _names_matching(cols, regex)
    gpu = cols.gpu
    kept = matches[gpu.name] if len(gpu) else np.zeros(0, bool)
    joined = gpu.correlation >= 0
    dropped_calls = np.setdiff1d(gpu.correlation[~kept & joined], gpu.correlation[kept & joined])

    def launch(chunk: Table) -> np.ndarray:
        return ~np.isin(chunk.correlation, dropped_calls)

    out: dict[str, Keep] = {"gpu": lambda table: matches[table.name]}
    for name in ("launches", "spilled_launches"):
        if getattr(cols, name) is not None:
            out[name] = launch
    return out


class _OpScope:
    """The CPU ops an ``op`` regex names, as the union of their intervals on each thread."""

    _MERGE_AT = 1 << 20  # intervals gathered before they are merged

    def __init__(self, cols: TraceColumns, regex: re.Pattern):
        self.cols = cols
        self.matches = _names_matching(cols, regex)
        gathered = GrowingColumns("track:i4 start end")
        self.union = Table({"track": np.zeros(0, np.int32), "start": np.zeros(0, np.int64),
                            "end": np.zeros(0, np.int64)})
        pending = 0
        for part in cols.all_cpu_ops:
            for chunk in part.chunks():
                rows = np.flatnonzero(self.matches[chunk.name]) if len(chunk) else np.zeros(0, np.int64)
                ts = chunk.ts[rows].astype(np.int64)
                gathered.extend(chunk.track[rows], ts, ts + np.maximum(chunk.dur[rows], 0))
                pending += len(rows)
                if pending >= self._MERGE_AT:
                    self._merge(gathered.table())
                    gathered, pending = GrowingColumns("track:i4 start end"), 0
        self._merge(gathered.table())
        inside = [chunk.correlation[self.inside(chunk) & (chunk.correlation >= 0)]
                  for part in cols.all_launches for chunk in part.chunks()]
        self.calls = unique(np.concatenate(inside)) if inside else np.zeros(0, np.int64)

    def _merge(self, new: Table) -> None:
        """``union`` with ``new``'s intervals added: per thread, sorted, disjoint."""
        track = np.concatenate([self.union.track, new.track])
        start = np.concatenate([self.union.start, new.start])
        end = np.concatenate([self.union.end, new.end])
        parts = []
        for t in unique(track).tolist():
            rows = np.flatnonzero(track == t)
            rows = rows[np.argsort(start[rows], kind="stable")]
            s, e = start[rows], np.maximum.accumulate(end[rows])
            first = np.ones(len(s), bool)
            first[1:] = s[1:] >= e[:-1]  # a gap (or a touch) before it: a new interval
            begins = np.flatnonzero(first)
            ends = np.append(begins[1:], len(s)) - 1
            parts.append((np.full(len(begins), t, np.int32), s[begins], e[ends]))
        if parts:
            self.union = Table({k: np.concatenate([p[i] for p in parts]) for i, k in enumerate(("track", "start", "end"))})

    def inside(self, chunk: Table) -> np.ndarray:
        """Per row (track, ts): does it start inside a named op on its thread?"""
        out = np.zeros(len(chunk), bool)
        u = self.union
        if not len(u) or not len(chunk):
            return out
        for t in np.intersect1d(unique(chunk.track), u.track).tolist():
            rows = np.flatnonzero(chunk.track == t)
            mine = u.track == t
            starts, ends = u.start[mine], u.end[mine]
            ts = chunk.ts[rows].astype(np.int64)
            at = np.searchsorted(starts, ts, side="right") - 1
            out[rows] = (at >= 0) & (ts < ends[np.maximum(at, 0)])
        return out

    def keeps(self) -> dict[str, Keep]:
        calls = self.calls
        out: dict[str, Keep] = {"gpu": lambda table: np.isin(table.correlation, calls) & (table.correlation >= 0)}
        for name in ("launches", "spilled_launches"):
            if getattr(self.cols, name) is not None:
                out[name] = self.inside
        for name in ("cpu_ops", "spilled_cpu_ops"):
            if getattr(self.cols, name) is not None:
                out[name] = lambda chunk: self.matches[chunk.name] | self.inside(chunk)
        return out


def _aligned(places: SpilledColumns, mask: np.ndarray) -> SpilledColumns:
    """``places`` (a row per GPU op) filtered with the GPU ops' ``mask``."""
    done = 0

    def keep(chunk: Table) -> np.ndarray:
        nonlocal done
        done += len(chunk)
        return mask[done - len(chunk):done]

    return places.filtered(keep)
