"""``trim``: cut a trace to a time window or to profiler steps, so the UI can hold it.

The window is [START, END) in exact ns. What stays:

- every ``M`` event and every top-level key (process/thread names, device properties);
- an ``X`` event whose [ts, ts + dur) overlaps the window (zero-length: START <= ts < END),
  so the ops and steps around what you look at stay, as the UI would show them;
- any other event with a numeric ts (instants, counters, ``B``/``E``, async) when
  START <= ts < END;
- flows whole: the ``s``/``t``/``f`` events of an (id, cat, name) stay when every one of
  them is inside the window, otherwise none does (no arrow loses an end);
- events without a numeric ts (Perfetto cannot place them either).

Kept events are copied byte for byte; nothing is added.
"""

from __future__ import annotations

import re
import time
from array import array
from dataclasses import dataclass

import numpy as np

from .analyses.launches import join_gpu_to_launch, stream_launch_rows
from .check.perfetto import flow_id
from .durations import parse_duration_ns
from .errors import UsageError
from .exacttime import json_time_ns, ns_to_us_text
from .io import rows as R
from .io.event_edits import EventEdits
from .io.reader import EventBatch, TraceReader
from .io.writer import write_trace
from .scan import SpilledColumns, scan

ALWAYS, SLICE, POINT, FLOW = range(4)
_STEPS = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)")


@dataclass
class TrimResult:
    out: str
    start_ns: int  # the window, exact ns as the trace's ts
    end_ns: int
    trace_start_ns: int | None
    events: int
    kept: int
    flow_events_cut: int  # flow events inside the window dropped because their flow was cut
    seconds: float = 0.0

    def summary(self) -> str:
        window = f"{ns_to_us_text(self.start_ns)} .. {ns_to_us_text(self.end_ns)} us"
        if self.trace_start_ns is not None:
            window += (f" ({ns_to_us_text(self.start_ns - self.trace_start_ns)} .. "
                       f"{ns_to_us_text(self.end_ns - self.trace_start_ns)} us after the trace start)")
        return (f"window {window}: kept {self.kept:,} of {self.events:,} events "
                f"({self.flow_events_cut:,} flow events dropped with their flow's other end)")


@dataclass
class _Events:
    """Per event, by ordinal and on disk (``rows``: kind, start and end ns, a chunk at a time);
    the flow events' ordinals, ids, (cat, name) keys and starts in memory."""

    rows: SpilledColumns
    flow_ordinal: np.ndarray
    flow_id: np.ndarray
    flow_key: np.ndarray
    flow_start: np.ndarray
    trace_start_ns: int | None
    trace_end_ns: int | None


def _collect(reader: TraceReader) -> _Events:
    """Every event's class and times; plain events straight from the scanner's rows, the
    rest (times or flow ids a row cannot hold exactly) parsed one by one."""
    collector = _Collector(reader.scanner)
    for batch in reader.batches():
        collector.batch(batch)
    return collector.events()


class _Collector:
    """``_Events`` a batch at a time (see ``_collect``)."""

    def __init__(self, scanner: R.RowScanner):
        self.scanner = scanner
        self.rows = SpilledColumns("kind:i1 start end")  # 24 bytes an event on disk, not 17 in memory
        self.f_ord, self.f_id, self.f_key, self.f_start = array("q"), array("Q"), array("i"), array("q")
        self.keys: dict[tuple, int] = {}  # a flow's (cat, name) -> its number
        self.pair_keys: dict[tuple[int, int], int] = {}  # the same by the scanner's string ids
        self.ph = R.IdTable(scanner.strings, lambda raw: (_PH_CODES.get(R.decode_string(raw), _PH_OTHER),),
                            (_PH_OTHER,))
        self.earliest: int | None = None
        self.latest: int | None = None  # the latest end of an event with a time

    def batch(self, batch: EventBatch) -> None:
        kind, start, end = (np.zeros(batch.count, dt) for dt in (np.int8, np.int64, np.int64))
        rows = batch.raw_rows
        parse = np.ones(batch.count, bool) if rows is None else self.plain(rows, batch.first, kind, start, end)
        for i in np.flatnonzero(parse).tolist():
            kind[i], start[i], end[i] = self.event(batch.event(i), batch.first + i)
        self.rows.extend(kind, start, end)
        timed = kind != ALWAYS
        if timed.any() and (self.latest is None or end[timed].max() > self.latest):
            self.latest = int(end[timed].max())

    def plain(self, rows: np.ndarray, first: int, kind: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Fill in the rows a parser is not needed for; which rows need one."""
        flags, ts, ph = rows[:, R.FLAGS], rows[:, R.TS], self.ph(rows[:, R.PH])[0]
        is_flow = ph == _PH_FLOW
        parse = (flags & R.F_ODD != 0) | (is_flow & (flags & R.F_ID_KEY != 0) & (flags & R.F_ID == 0))
        timed = (flags & R.F_TS != 0) & ~parse
        if timed.any():
            low = ts[timed & (ts >= 0) & (ph != _PH_M)]  # metadata's ts places nothing (traceforge writes 0)
            if len(low) and (self.earliest is None or low.min() < self.earliest):
                self.earliest = int(low.min())
        slice_ = timed & (ph == _PH_X) & (flags & R.F_DUR != 0)
        flow = timed & is_flow & (flags & R.F_ID != 0)
        point = timed & (ph != _PH_M) & ~slice_ & ~flow
        kind[slice_], kind[flow], kind[point] = SLICE, FLOW, POINT
        kept = slice_ | flow | point
        start[kept] = ts[kept]
        end[kept] = ts[kept] + np.where(slice_[kept], np.maximum(rows[kept, R.DUR], 0), 0)
        at = np.flatnonzero(flow)
        if len(at):
            self.f_ord.frombytes((first + at).tobytes())
            self.f_id.frombytes(rows[at, R.ID].tobytes())  # an int64 id as Perfetto's uint64
            self.f_key.frombytes(self.flow_keys(rows[at, R.CAT], rows[at, R.NAME]).tobytes())
            self.f_start.frombytes(ts[at].tobytes())
        return parse

    def flow_keys(self, cats: np.ndarray, names: np.ndarray) -> np.ndarray:
        pairs, inverse = np.unique(np.stack((cats, names), axis=1), axis=0, return_inverse=True)
        numbers = [self.pair_key(cat, name) for cat, name in pairs.tolist()]
        return np.array(numbers, np.int32)[inverse.ravel()]

    def pair_key(self, cat: int, name: int) -> int:
        key = self.pair_keys.get((cat, name))
        if key is None:
            strings = self.scanner.strings
            texts = tuple(R.decode_string(strings[i]) if i >= 0 else "" for i in (cat, name))
            key = self.pair_keys[(cat, name)] = self.keys.setdefault(texts, len(self.keys))
        return key

    def event(self, e: dict, ordinal: int) -> tuple[int, int, int]:
        """One parsed event's class, start and end."""
        ph = e.get("ph")
        ts = json_time_ns(e.get("ts"))
        if ts is None or ph == "M":
            return ALWAYS, 0, 0
        if ts >= 0 and (self.earliest is None or ts < self.earliest):
            self.earliest = ts
        dur = json_time_ns(e.get("dur")) if ph == "X" else None
        fid = flow_id(e.get("id")) if ph in ("s", "t", "f") else None
        if fid is not None:
            cat, name = e.get("cat"), e.get("name")
            self.f_ord.append(ordinal)
            self.f_id.append(fid)
            self.f_start.append(ts)
            self.f_key.append(self.keys.setdefault((cat if type(cat) is str else "", name if type(name) is str else ""),
                                                   len(self.keys)))
        return (SLICE if dur is not None else FLOW if fid is not None else POINT), ts, \
            ts + max(dur, 0) if dur is not None else ts

    def events(self) -> _Events:
        def arr(a: array, dtype=np.int64) -> np.ndarray:
            return np.frombuffer(a, dtype) if len(a) else np.zeros(0, dtype)

        return _Events(self.rows, arr(self.f_ord), arr(self.f_id, np.uint64), arr(self.f_key, np.int32),
                       arr(self.f_start), self.earliest, self.latest)


_PH_OTHER, _PH_M, _PH_X, _PH_FLOW = range(4)
_PH_CODES = {"M": _PH_M, "X": _PH_X, "s": _PH_FLOW, "t": _PH_FLOW, "f": _PH_FLOW}


def keep_mask(ev: _Events, start_ns: int, end_ns: int) -> np.ndarray:
    """Which events stay for the window [start_ns, end_ns) (see the module docstring)."""
    parts = []
    for chunk in ev.rows.chunks():
        s, e, kind = chunk.start, chunk.end, chunk.kind
        point = (kind == POINT) & (s >= start_ns) & (s < end_ns)
        slice_ = (kind == SLICE) & (s < end_ns) & ((e > start_ns) | ((e == s) & (s >= start_ns)))
        parts.append((kind == ALWAYS) | point | slice_)
    keep = np.concatenate(parts) if parts else np.zeros(0, bool)
    if len(ev.flow_ordinal):
        inside = (ev.flow_start >= start_ns) & (ev.flow_start < end_ns)
        order = np.lexsort((ev.flow_key, ev.flow_id))
        fid, key = ev.flow_id[order], ev.flow_key[order]
        new = np.empty(len(order), bool)  # where a flow (id, cat, name) begins, in ``order``
        new[0] = True
        new[1:] = (fid[1:] != fid[:-1]) | (key[1:] != key[:-1])
        del fid, key
        whole = np.minimum.reduceat(inside[order], np.flatnonzero(new))
        group = np.cumsum(new, dtype=np.int32)  # int32: Kineto has two flow events per GPU op
        group -= 1
        inside[order] = whole[group]  # now: whether the event's whole flow is inside
        keep[ev.flow_ordinal] = inside
    return keep


def parse_window(text: str, trace_start_ns: int | None, trace_end_ns: int | None = None) -> tuple[int, int]:
    """``START:END`` (µs, or with a unit: ``1.5ms``) into exact ns.

    A value with a leading ``+`` is relative to the trace start (its earliest ts that is
    not negative, metadata aside); an empty START or END means the trace's start or its end.
    """
    if text.count(":") != 1:
        raise UsageError(f"--window {text!r}: write START:END in µs, e.g. 1712195495519689:1712195495619689 "
                         "or +100ms:+300ms (from the trace start)")
    bounds = []
    whole_trace = (trace_start_ns or 0, trace_end_ns + 1 if trace_end_ns is not None else 2**63 - 1)
    for part, default in zip(text.split(":"), whole_trace):
        part = part.strip()
        if not part:
            bounds.append(default)
            continue
        relative = part.startswith("+")
        try:
            ns = parse_duration_ns(part[1:] if relative else part)
        except UsageError:
            raise UsageError(f"--window: {part!r} is not a time (µs, or with a unit like 1.5ms)") from None
        if relative:
            if trace_start_ns is None:
                raise UsageError("--window: the trace has no timestamps to be relative to")
            ns += trace_start_ns
        bounds.append(ns)
    if bounds[0] >= bounds[1]:
        raise UsageError(f"--window {text!r}: START must be before END")
    return bounds[0], bounds[1]


def parse_steps(text: str) -> tuple[int, int]:
    """``3-5`` or ``3`` -> (first, last) ProfilerStep numbers."""
    m = _STEPS.fullmatch(text)
    if m is None:
        raise UsageError(f"--steps {text!r}: write N or N-M (ProfilerStep numbers), e.g. 3-5")
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    if last < first:
        raise UsageError(f"--steps {text!r}: the last step comes before the first")
    return first, last


def steps_window(path: str, first: int, last: int) -> tuple[int, int]:
    """From the start of ProfilerStep#first to the end of ProfilerStep#last, extended to
    the end of the GPU work launched during those steps (it runs after the CPU side)."""
    cols = scan(path, cpu_ops=False)  # the steps are kept whatever CPU ops are
    number = np.array([int(m.group(1)) if (m := _STEP_NAME.fullmatch(n)) else -1 for n in cols.names], np.int64)
    ops = cols.steps
    step_of = number[ops.name] if len(ops) else np.zeros(0, np.int64)
    rows = np.flatnonzero((step_of >= first) & (step_of <= last))
    if not len(rows):
        found = np.unique(step_of[step_of >= 0])
        have = f"steps {found.min()}-{found.max()}" if len(found) else "no ProfilerStep#N ranges"
        raise UsageError(f"--steps {first}-{last}: the trace has {have}")
    start, cpu_end = int(ops.ts[rows].min()), int((ops.ts[rows] + ops.dur[rows]).max())
    launches = stream_launch_rows(cols)
    during = launches[(cols.launches.ts[launches] >= start) & (cols.launches.ts[launches] < cpu_end)]
    gpu_rows, _ = join_gpu_to_launch(cols, during)
    gpu_end = int((cols.gpu.ts[gpu_rows] + cols.gpu.dur[gpu_rows]).max()) if len(gpu_rows) else cpu_end
    return start, max(cpu_end, gpu_end)


def trim(path: str, out: str, *, window: str | None = None, steps: str | None = None) -> TrimResult:
    """Write the part of ``path`` inside ``window`` (``"START:END"``, see ``parse_window``)
    or ``steps`` (``"3-5"``) to ``out``."""
    if (window is None) == (steps is None):
        raise UsageError("give exactly one of --window START:END or --steps N-M")
    started = time.perf_counter()
    # the steps' window first: its scan's columns are gone before the events' are collected
    step_window = steps_window(path, *parse_steps(steps)) if steps is not None else None
    ev = _collect(TraceReader(path))
    start_ns, end_ns = step_window or parse_window(window, ev.trace_start_ns, ev.trace_end_ns)
    keep = keep_mask(ev, start_ns, end_ns)
    flows, trace_start_ns = ev.flow_ordinal, ev.trace_start_ns
    cut = int((~keep[flows] & (ev.flow_start >= start_ns) & (ev.flow_start < end_ns)).sum())
    del ev, flows  # the flows' columns (two events per GPU op on Kineto traces) are not needed to write
    write_trace(TraceReader(path), out, edit=EventEdits(keep=keep))
    return TrimResult(out, start_ns, end_ns, trace_start_ns, len(keep), int(keep.sum()), cut,
                      time.perf_counter() - started)
