"""``trim``: cut a trace to a time window or to profiler steps, so the UI can hold it.

The window is [START, END) in exact ns, given from the trace start (Perfetto's time 0, as every
command's ``--window``). What stays:

- every ``M`` event and every top-level key (process/thread names, device properties);
- an ``X`` event whose [ts, ts + dur) overlaps the window (zero-length: START <= ts < END),
  so the ops and steps around what you look at stay, as the UI would show them;
- any other event with a numeric ts (instants, counters, ``B``/``E``, async) when
  START <= ts < END;
- flows whole: the ``s``/``t``/``f`` events of an (id, cat, name) stay when every one of
  them is inside the window, otherwise none does (no arrow loses an end);
- events without a numeric ts (Perfetto cannot place them either).

With steps (``--steps N-M``) the window is the steps' CPU ranges, and of the GPU ops exactly
theirs stay (``analyses.steps.steps_cut``: launched from those ranges), whenever they run; a
flow event past the CPU ranges stays with the GPU op of the steps it points to. A cut that
keeps no event with a time is an error, and nothing is written.

Kept events are copied byte for byte; nothing is added.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..analyses.launches.calls import STREAM_LAUNCH_APIS, calls_of
from ..analyses.structure.steps import steps_cut as columns_steps_cut
from ..columns import phases
from ..columns.scan import scan
from ..columns.table import SpilledColumns
from ..columns.windows import windows_by
from ..errors import UsageError
from ..io.read import rows as R
from ..io.read.codec import readable_twice
from ..io.read.reader import EventBatch, TraceReader
from ..io.write.event_edits import EventEdits
from ..io.write.output import check_writable
from ..io.write.writer import write_trace
from ..perfetto.importer import flow_id
from ..util.exacttime import INT64_NS, json_time_ns, ns_to_us_text
from ..util.time_window import parse_steps, parse_window, slice_in_window

ALWAYS, SLICE, POINT, FLOW = range(4)


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
    """Per event, by ordinal (``rows``: kind, start and end ns), and per flow event (its
    ordinal, id, (cat, name) key and start), on disk: read back a chunk or window at a time."""

    rows: SpilledColumns
    flows: SpilledColumns  # ordinal id key start, one per flow event (id: uint64 bits)
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
        self.flows = SpilledColumns("ordinal id key start")  # Kineto writes two flow events per GPU op
        self.parsed_flows: list[tuple[int, int, int, int]] = []  # a batch's, until it is done
        self.keys = R.StringPairs(scanner)  # a flow's (cat, name) -> its number
        self.ph = phases.phase_table(scanner)
        self.earliest: int | None = None
        self.latest: int | None = None  # the latest end of an event with a time

    def batch(self, batch: EventBatch) -> None:
        kind, start, end = (np.zeros(batch.count, dt) for dt in (np.int8, np.int64, np.int64))
        rows = batch.raw_rows
        parse = np.ones(batch.count, bool) if rows is None else self.plain(rows, batch.first, kind, start, end)
        for i in np.flatnonzero(parse).tolist():
            kind[i], start[i], end[i] = self.event(batch.event(i), batch.first + i)
        if self.parsed_flows:
            self.flows.extend(*np.array(self.parsed_flows, np.int64).T)
            self.parsed_flows = []
        self.rows.extend(kind, start, end)
        timed = kind != ALWAYS
        if timed.any() and (self.latest is None or end[timed].max() > self.latest):
            self.latest = int(end[timed].max())

    def plain(self, rows: np.ndarray, first: int, kind: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Fill in the rows a parser is not needed for; which rows need one."""
        flags, ts, ph = rows[:, R.FLAGS], rows[:, R.TS], self.ph(rows[:, R.PH])[0]
        is_flow = ph == phases.FLOW
        parse = phases.needs_parser(flags, ph)
        timed = (flags & R.F_TS != 0) & ~parse
        if timed.any():
            low = phases.earliest_ts(ts, timed, ph)
            if low is not None and (self.earliest is None or low < self.earliest):
                self.earliest = low
        slice_ = timed & (ph == phases.SLICE) & (flags & R.F_DUR != 0)
        flow = timed & is_flow & (flags & R.F_ID != 0)
        point = timed & (ph != phases.METADATA) & ~slice_ & ~flow
        kind[slice_], kind[flow], kind[point] = SLICE, FLOW, POINT
        kept = slice_ | flow | point
        start[kept] = ts[kept]
        end[kept] = ts[kept] + np.where(slice_[kept], np.maximum(rows[kept, R.DUR], 0), 0)
        at = np.flatnonzero(flow)
        if len(at):
            # an int64 id is Perfetto's uint64 id, as bits
            self.flows.extend(first + at, rows[at, R.ID], self.keys.of_ids(rows[at, R.CAT], rows[at, R.NAME]), ts[at])
        return parse

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
            key = self.keys.of(e.get("cat"), e.get("name"))
            self.parsed_flows.append((ordinal, fid - 2**64 if fid >= 2**63 else fid, key, ts))
        return (SLICE if dur is not None else FLOW if fid is not None else POINT), ts, \
            min(ts + max(dur, 0), INT64_NS[1]) if dur is not None else ts

    def events(self) -> _Events:
        return _Events(self.rows, self.flows, self.earliest, self.latest)


def keep_mask(ev: _Events, start_ns: int, end_ns: int, stepped: _StepsKeep | None = None) -> tuple[np.ndarray, int]:
    """Which events stay for the window [start_ns, end_ns) (see the module docstring), and how
    many flow events inside it go because their flow is cut. With ``stepped``, its GPU ops stay
    and the other GPU ops go, and a flow event past the window stays (as inside) when it ends
    on one of them."""
    parts = []
    for chunk in ev.rows.chunks():
        s, e, kind = chunk.start, chunk.end, chunk.kind
        point = (kind == POINT) & (s >= start_ns) & (s < end_ns)
        slice_ = (kind == SLICE) & slice_in_window(s, e, start_ns, end_ns)
        parts.append((kind == ALWAYS) | point | slice_)
    keep = np.concatenate(parts) if parts else np.zeros(0, bool)
    if stepped is not None:
        keep[stepped.gpu_ordinals] = stepped.gpu_kept
    cut = 0
    for flows in windows_by(ev.flows, lambda chunk, first: chunk.id, pass_name="flows"):  # an id's events together
        inside = (flows.start >= start_ns) & (flows.start < end_ns)
        if stepped is not None:
            inside |= ((flows.start >= end_ns) & (flows.start < stepped.end)
                       & np.isin(flows.id.astype(np.int64), stepped.launched))
        whole = _whole_flows_inside(flows.id, flows.key, inside)
        keep[flows.ordinal] = whole
        cut += int(np.count_nonzero(inside & ~whole))
    return keep, cut


def _whole_flows_inside(ids: np.ndarray, keys: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Per flow event: whether every event of its flow (same id and key) is ``inside``."""
    if not len(ids):
        return inside
    order = np.lexsort((keys, ids))
    fid, key = ids[order], keys[order]
    new = np.empty(len(order), bool)  # where a flow begins, in ``order``
    new[0] = True
    new[1:] = (fid[1:] != fid[:-1]) | (key[1:] != key[:-1])
    del fid, key
    whole = np.minimum.reduceat(inside[order], np.flatnonzero(new))
    out = np.empty(len(order), bool)
    out[order] = whole[np.cumsum(new) - 1]
    return out


@dataclass
class _StepsKeep:
    """What ``trim --steps`` keeps beyond its CPU window [start, cpu_end): the GPU ops of the
    steps (``analyses.steps.steps_cut``) by ordinal, which go in or out whatever their time, and
    the correlations of the steps' launch calls (a flow event after ``cpu_end`` stays when its
    id is one of them: the arrow to a GPU op of the steps)."""

    start: int
    cpu_end: int
    end: int
    gpu_ordinals: np.ndarray  # int64, every GPU op's
    gpu_kept: np.ndarray  # bool, per gpu_ordinals
    launched: np.ndarray  # int64, sorted


def steps_keep(path: str, first: int, last: int) -> _StepsKeep:
    """``analyses.steps.steps_cut`` of ``path``'s columns (a scan of the steps, GPU ops and the
    launch calls that put work on a stream)."""
    cols = scan(path, cpu_ops=False, keep_launch=calls_of(STREAM_LAUNCH_APIS))
    cut = columns_steps_cut(cols, first, last)
    return _StepsKeep(cut.start, cut.cpu_end, cut.end, cols.gpu.ordinal.astype(np.int64), cut.gpu, cut.launched)


def trim(path: str, out: str, *, window: str | None = None, steps: str | None = None) -> TrimResult:
    """Write the part of ``path`` inside ``window`` (``"START:END"`` from the trace start, see
    ``parse_window``) or ``steps`` (``"3-5"``: those steps and their GPU work) to ``out``. A
    window or steps that keep no event with a time is a UsageError, and nothing is written."""
    if (window is None) == (steps is None):
        raise UsageError("give exactly one of window (START:END) or steps (N-M)")
    started = time.perf_counter()
    check_writable(out, (path,))
    with readable_twice(path) as source:
        # the steps' cut first: its scan's columns are gone before the events' are collected
        stepped = steps_keep(source, *parse_steps(steps)) if steps is not None else None
        ev = _collect(TraceReader(source, display_name=path, pass_name="cut" if stepped is not None else None))
        if stepped is not None:
            start_ns, end_ns = stepped.start, stepped.end
            keep, cut = keep_mask(ev, start_ns, stepped.cpu_end, stepped)
        else:
            start_ns, end_ns = parse_window(window, ev.trace_start_ns, ev.trace_end_ns)
            keep, cut = keep_mask(ev, start_ns, end_ns)
        if not _any_timed(ev, keep):
            raise UsageError(_empty(window, steps, ev))
        write_trace(TraceReader(source, display_name=path), out, edit=EventEdits(keep=keep))
    return TrimResult(out, start_ns, end_ns, ev.trace_start_ns, len(keep), int(keep.sum()), cut,
                      time.perf_counter() - started)


def _any_timed(ev: _Events, keep: np.ndarray) -> bool:
    """Does ``keep`` keep an event with a time (metadata and top-level keys always stay)?"""
    at = 0
    for chunk in ev.rows.chunks():
        n = len(chunk.kind)
        if np.any(keep[at:at + n] & (chunk.kind != ALWAYS)):
            return True
        at += n
    return False


def _empty(window: str | None, steps: str | None, ev: _Events) -> str:
    what = f"--window {window}" if window is not None else f"--steps {steps}"
    if ev.trace_start_ns is None or ev.trace_end_ns is None:
        return f"trim {what}: the trace has no event with a time"
    return (f"trim {what}: no event of the trace is in it (times are from the trace start; its events end "
            f"{ns_to_us_text(ev.trace_end_ns - ev.trace_start_ns)} µs after it)")
