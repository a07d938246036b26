"""``repair``: rewrite a trace so Perfetto shows every slice where it belongs (opt-in).

What it changes, and nothing else (ts, dur, args and every other byte stay as written):

- complete slices that Perfetto would spill (they start inside another slice of their
  thread and end after it) move to extra threads, ``<thread name> (overlap k)``, sorted
  next to theirs; flow ends bound to a moved slice move with it;
- integer pids/tids Perfetto cannot hold (negative, or above 2^32-1: it reads them as 0,
  so Kineto's negative thread ids land on their process's main thread) get distinct
  positive ids: a negative tid its unsigned 32-bit value when that is free;
- flow ends (``f``, ``t``) with no ``s`` of their (id, cat, name) before them are dropped:
  Perfetto cannot draw them (or draws a bogus arrow from the trace's first slice);
- with ``rebase_time``, every ts becomes relative to the trace start (see ``rebase``).

Overlaps are judged on the output as Perfetto will read it: new thread ids, rebased
times, Perfetto's rounding of fractional µs (``overlaps``). Slices and flow events wait
on disk and are replayed a window at a time (``windows``), so memory does not grow with
the trace.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..columns.phases import FLOW, METADATA, SLICE, earliest_ts, needs_parser, phase_table
from ..columns.table import SpilledColumns, Table
from ..columns.windows import picked, windows_by
from ..emit.lanes import partition
from ..emit.tracks import TidAllocator, metadata_events
from ..io.read import rows as R
from ..io.read.codec import readable_twice
from ..io.read.reader import EventBatch, TraceReader
from ..io.write.event_edits import EventEdits
from ..io.write.jsontext import Block, event_blocks
from ..io.write.output import check_writable
from ..io.write.writer import write_trace
from ..perfetto.importer import flow_id, out_of_range, thread_of
from ..perfetto.overlaps import SpillWalk
from ..perfetto.timestamps import perfetto_ns, time_ns
from ..util.distinct import unique
from ..util.exacttime import json_time_ns
from .rebase import Rebase, base_time_editors, shift_us_text, start_us

FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT = range(4)  # FLOW_END: bp "e"; FLOW_END_NEXT: without
_U32 = 2**32
UNCHANGED = -1
# What ``check`` can still report after ``repair``, and why repair leaves it: it changes where
# slices and flow ends are and which ids threads have, never an event's own values or bytes.
NOT_REPAIRED: dict[str, str] = {
    "json_syntax_error": "not JSON: there is no trace to repair",
    "json_tokenizer_failure": "a ts or dur that is not a number: the event's own values",
    "json_parser_failure": "an event Perfetto cannot use (no dur, bad counter args): its own values",
    "trace_sorter_negative_timestamp_dropped": "a negative ts: the event's own time",
    "slice_negative_duration": "a negative dur: the event's own time",
    "slice_max_depth_exceeded": "nesting 512 deep: moving slices would change what the trace says",
    "misplaced_end_event": "B/E pairs: only complete (X) slices are moved",
    "flow_no_enclosing_slice": "a flow event on a thread with no slice open there: nowhere to bind it",
    "flow_duplicate_id": "two starts of one (id, cat, name): which arrow was meant is unknown",
    "flow_end_without_start": "only where the start is there but Perfetto drops it for one of the reasons above",
    "flow_step_without_start": "flow steps (t) are kept as written",
    "flow_invalid_id": "a flow id that is not usable: the event's own value",
    "flow_without_direction": "bind_id without flow_in/flow_out: the event's own values",
    "counter_multiple_keys": "counter args: the event's own values",
    "counter_id_not_string": "counter ids: the event's own values",
}
_NEVER = 2**63


@dataclass
class RepairResult:
    """What ``repair`` changed; ``summary()`` says it in words."""

    out: str
    events: int = 0
    moved_slices: int = 0
    overlap_threads: int = 0  # new threads holding moved slices
    threads_with_overlaps: int = 0
    moved_for_rounding: int = 0  # moved only because Perfetto rounds fractional µs
    moved_flow_ends: int = 0
    remapped_threads: int = 0  # (pid, tid) pairs given new ids
    remapped_events: int = 0
    dropped_flow_ends: int = 0
    base_time_ns: int | None = None  # the new baseTimeNanoseconds, when rebased
    rebase_us: int = 0
    seconds: float = 0.0

    def summary(self) -> list[str]:
        lines = [
            f"moved {_n(self.moved_slices, 'overlapping slice')} of {_n(self.threads_with_overlaps, 'thread')} "
            f"to {_n(self.overlap_threads, 'overlap thread')} ({_n(self.moved_flow_ends, 'flow end')} moved with them)"
            + (f"; {self.moved_for_rounding:,} of them overlap only through Perfetto's rounding of fractional "
               "µs, which --rebase-time avoids" if self.moved_for_rounding else ""),
            f"gave {_n(self.remapped_threads, 'thread')} with out-of-range pid/tid new ids "
            f"({_n(self.remapped_events, 'event')})",
            f"dropped {_n(self.dropped_flow_ends, 'flow end')} without a start",
        ]
        if self.base_time_ns is not None:
            lines.append(f"rebased every ts by -{self.rebase_us:,} us (baseTimeNanoseconds is now {self.base_time_ns})")
        return lines


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _perfetto_times(exact: np.ndarray, fractional: np.ndarray, index: np.ndarray, odd: dict[int, str],
                    shift_us: int = 0) -> np.ndarray:
    """The ns Perfetto reads once times are shifted by ``-shift_us`` µs (on their text): exact
    ns, whether each was written with a point, each one's index (``odd``: the texts, by index,
    of those written otherwise than a plain decimal of at most three places)."""
    ns = perfetto_ns(exact - shift_us * 1000, fractional != 0)
    if odd:
        for at in np.flatnonzero(np.isin(index, np.fromiter(odd, np.int64, len(odd)))).tolist():
            read = time_ns(shift_us_text(odd[int(index[at])].encode(), shift_us).decode())
            ns[at] = read[0] if read is not None else -1
    return ns


@dataclass
class _Trace:
    """What repair needs from one pass over the trace. Slices and flow events wait on disk
    (the slices are most of a trace), in file order; times exact, with odd texts by index."""

    pairs: list[tuple] = field(default_factory=list)  # raw (pid, tid) by pair id
    slices: SpilledColumns = field(default_factory=lambda: SpilledColumns(" ".join(_SLICE_FIELDS)))
    slice_ts_odd: dict[int, str] = field(default_factory=dict)
    slice_dur_odd: dict[int, str] = field(default_factory=dict)
    flows: SpilledColumns = field(default_factory=lambda: SpilledColumns(" ".join(_FLOW_FIELDS)))  # id: uint64 bits
    flow_ts_odd: dict[int, str] = field(default_factory=dict)
    bad_ordinal: array = field(default_factory=lambda: array("q"))  # events with an out-of-range pid/tid
    bad_pair: array = field(default_factory=lambda: array("q"))
    thread_names: dict[tuple, str] = field(default_factory=dict)  # raw pair -> thread_name
    sort_indexes: dict[tuple, int] = field(default_factory=dict)
    earliest_ns: int | None = None  # earliest ts that is not negative
    events: int = 0


_FLOW_KINDS = {"s": FLOW_START, "t": FLOW_STEP, "f": FLOW_END_NEXT}  # an f with bp "e" is a FLOW_END
_SLICE_FIELDS = {"ordinal": np.int64, "pair": np.int64, "ts": np.int64, "ts_frac": bool, "dur": np.int64,
                 "dur_frac": bool}
_FLOW_FIELDS = {"ordinal": np.int64, "pair": np.int64, "ts": np.int64, "ts_frac": bool, "kind": np.int8,
                "id": np.uint64, "key": np.int64}


class _Collector:
    """``_Trace`` a batch at a time. Plain events (most) come from the scanner's rows,
    vectorised; events a row cannot hold exactly (odd times, ids, keys) are parsed. Both
    are added in file order, and (pid, tid) pairs are numbered in the order first met:
    new thread ids follow that order."""

    def __init__(self, scanner: R.RowScanner):
        self.t = _Trace()
        self.pair_ids: dict[tuple, int] = {}
        self.pair_bad: list[bool] = []
        self.flow_keys = R.StringPairs(scanner)  # a flow's (cat, name) -> its key
        self.earliest = _NEVER
        self.scanner = scanner
        self.track_pair = np.zeros(0, np.int64)  # per scanner track: its pair id, -1 unhashable, -2 not yet met
        self.ph = phase_table(scanner, lambda ph: (_FLOW_KINDS.get(ph, 0),))

    def pair_of(self, key: tuple) -> int:
        """The pair id of a raw (pid, tid); -1 if unhashable (an event Perfetto cannot place either)."""
        try:
            pair = self.pair_ids.get(key)
        except TypeError:
            return -1
        if pair is None:
            pair = self.pair_ids[key] = len(self.t.pairs)
            self.t.pairs.append(key)
            self.pair_bad.append(out_of_range(key[0]) or out_of_range(key[1]))
        return pair

    def batch(self, batch: EventBatch) -> None:
        rows = batch.raw_rows
        if rows is None:  # walked by the exact decoder: every event parsed
            self.parsed_batch(batch)
            return
        ph, flow_kind = self.ph(rows[:, R.PH])
        flags, ts = rows[:, R.FLAGS], rows[:, R.TS]
        odd = needs_parser(flags, ph)
        odd_events = {i: batch.event(i) for i in np.flatnonzero(odd).tolist()}
        pair = self.pairs(rows[:, R.TRACK], odd, odd_events)
        valid = pair >= 0
        bad = valid & np.array(self.pair_bad + [False], bool)[pair]
        self.add_bad(batch.first + np.flatnonzero(bad), pair[bad])
        for i in np.flatnonzero(valid & (ph == METADATA)).tolist():
            _note_thread(odd_events.get(i) or batch.event(i), self.t.pairs[pair[i]], self.t)
        timed = valid & ~odd & (flags & R.F_TS != 0)
        low = earliest_ts(ts, timed, ph)
        if low is not None:
            self.earliest = min(self.earliest, low)
        parsed = [self.event(e, batch.first + i, int(pair[i])) for i, e in odd_events.items() if pair[i] >= 0]
        at = np.flatnonzero(timed & (ph == SLICE) & (flags & R.F_DUR != 0))
        self.add_slices({"ordinal": batch.first + at, "pair": pair[at], "ts": ts[at],
                         "ts_frac": flags[at] & R.F_TS_FRAC != 0, "dur": rows[at, R.DUR],
                         "dur_frac": flags[at] & R.F_DUR_FRAC != 0}, [p[1:] for p in parsed if p and p[0] == SLICE])
        at = np.flatnonzero(timed & (ph == FLOW) & (flags & R.F_ID != 0))
        kind = np.where((flow_kind[at] == FLOW_END_NEXT) & (flags[at] & R.F_BP_E != 0), FLOW_END, flow_kind[at])
        self.add_flows({"ordinal": batch.first + at, "pair": pair[at], "ts": ts[at],
                        "ts_frac": flags[at] & R.F_TS_FRAC != 0, "kind": kind, "id": rows[at, R.ID].view(np.uint64),
                        "key": self.flow_keys.of_ids(rows[at, R.CAT], rows[at, R.NAME])},
                       [p[1:] for p in parsed if p and p[0] == FLOW])

    def pairs(self, tracks: np.ndarray, odd: np.ndarray, odd_events: dict[int, dict]) -> np.ndarray:
        """Each row's pair id (-1: unhashable), pairs new to the trace numbered in file order.
        A plain row's pair is its scanner track's; an odd row's comes from its parsed event
        (the scanner may not have read its pid or tid: an escaped key, say)."""
        if len(self.track_pair) < len(self.scanner.tracks):
            grown = np.full(len(self.scanner.tracks), -2, np.int64)
            grown[:len(self.track_pair)] = self.track_pair
            self.track_pair = grown
        pair = np.where(odd, -2, self.track_pair[tracks])
        unmet_rows = np.flatnonzero((pair == -2) & ~odd)
        unmet, first = np.unique(tracks[unmet_rows], return_index=True)
        firsts = [(i, None, track) for i, track in zip(unmet_rows[first].tolist(), unmet.tolist())]
        firsts += [(i, (e.get("pid"), e.get("tid")), -1) for i, e in odd_events.items()]
        for i, key, track in sorted(firsts, key=lambda first: first[0]):  # in file order
            if key is None:
                self.track_pair[track] = self.pair_of(R.decode_track(self.scanner.tracks[track]))
            else:
                pair[i] = self.pair_of(key)
        plain = ~odd
        pair[plain] = self.track_pair[tracks[plain]]
        return pair

    def parsed_batch(self, batch: EventBatch) -> None:
        parsed = []
        for i, e in enumerate(batch.events):
            pair = self.pair_of((e.get("pid"), e.get("tid")))
            if pair < 0:
                continue
            if self.pair_bad[pair]:
                self.add_bad(np.array([batch.first + i]), np.array([pair]))
            if e.get("ph") == "M":
                _note_thread(e, self.t.pairs[pair], self.t)
            parsed.append(self.event(e, batch.first + i, pair))
        self.add_slices(None, [p[1:] for p in parsed if p and p[0] == SLICE])
        self.add_flows(None, [p[1:] for p in parsed if p and p[0] == FLOW])

    def event(self, e: dict, ordinal: int, pair: int) -> tuple | None:
        """A parsed event as (code, its slice or flow fields, {time field: text Perfetto may read
        otherwise than a plain decimal}), or None."""
        get = e.get
        ph, ts_value = get("ph"), get("ts")
        ts = json_time_ns(ts_value)
        if ts is None:
            return None
        if self.earliest > ts >= 0 and ph != "M":  # metadata's ts places nothing (traceforge writes 0)
            self.earliest = ts
        ts_frac, ts_text = _written(ts_value)
        texts = {"ts": ts_text} if ts_text is not None else {}
        if ph == "X":
            dur_value = get("dur")
            dur = json_time_ns(dur_value)
            if dur is None:
                return None
            dur_frac, dur_text = _written(dur_value)
            if dur_text is not None:
                texts["dur"] = dur_text
            return SLICE, (ordinal, pair, ts, ts_frac, dur, dur_frac), texts
        if ph == "s" or ph == "f" or ph == "t":
            fid = flow_id(get("id"))
            if fid is None:
                return None
            kind = _FLOW_KINDS[ph] if ph != "f" or get("bp") != "e" else FLOW_END
            return FLOW, (ordinal, pair, ts, ts_frac, kind, fid, self.flow_keys.of(get("cat"), get("name"))), texts
        return None

    def add_bad(self, ordinals: np.ndarray, pairs: np.ndarray) -> None:
        self.t.bad_ordinal.frombytes(ordinals.astype(np.int64).tobytes())
        self.t.bad_pair.frombytes(pairs.astype(np.int64).tobytes())

    def add_slices(self, rows: dict[str, np.ndarray] | None, parsed: list[tuple]) -> None:
        cols, texts = _merged(rows, parsed, _SLICE_FIELDS)
        if cols is None:
            return
        t = self.t
        base = len(t.slices)
        t.slice_ts_odd.update((base + i, text) for i, text in texts.get("ts", {}).items())
        t.slice_dur_odd.update((base + i, text) for i, text in texts.get("dur", {}).items())
        t.slices.extend(*(cols[name] for name in _SLICE_FIELDS))

    def add_flows(self, rows: dict[str, np.ndarray] | None, parsed: list[tuple]) -> None:
        cols, texts = _merged(rows, parsed, _FLOW_FIELDS)
        if cols is None:
            return
        t = self.t
        t.flow_ts_odd.update((len(t.flows) + i, text) for i, text in texts.get("ts", {}).items())
        t.flows.extend(*(cols[name] if name != "id" else cols[name].view(np.int64) for name in _FLOW_FIELDS))

    def trace(self, events: int) -> _Trace:
        self.t.earliest_ns = self.earliest if self.earliest != _NEVER else None
        self.t.events = events
        return self.t


def _written(value: object) -> tuple[bool, str | None]:
    """Whether a time (as the reader gives it: an int, or the text of a number with a point
    or an exponent) was written with one, and its text when Perfetto may read it otherwise
    than a plain decimal of at most three places (more digits, an exponent)."""
    if type(value) is not str:
        return False, None
    if value[-4:-3] != ".":
        _, dot, frac = value.partition(".")
        if not (dot and len(frac) <= 3 and frac.isdigit()):
            return True, value
    return True, None


def _merged(rows: dict[str, np.ndarray] | None, parsed: list[tuple], fields: dict[str, type]
            ) -> tuple[dict[str, np.ndarray] | None, dict[str, dict[int, str]]]:
    """A batch's columns (``fields`` and their types) from its rows and its parsed events
    ((values, texts) as ``_Collector.event`` gives them), in file order; and the parsed
    events' texts by time field and index into the columns."""
    parts = [] if rows is None else [rows]
    if parsed:
        parts.append({name: np.array(column, dtype) for (name, dtype), column
                      in zip(fields.items(), zip(*(values for values, _ in parsed)))})
    if not parts or not sum(len(p["ordinal"]) for p in parts):
        return None, {}
    cols = {name: np.concatenate([p[name] for p in parts]).astype(dtype, copy=False) for name, dtype in fields.items()}
    texts: dict[str, dict[int, str]] = {}
    if parsed:
        order = np.argsort(cols["ordinal"], kind="stable")
        cols = {name: column[order] for name, column in cols.items()}
        at = np.empty(len(order), np.int64)
        at[order] = np.arange(len(order))
        first_parsed = len(order) - len(parsed)
        for j, (_, event_texts) in enumerate(parsed):
            for name, text in event_texts.items():
                texts.setdefault(name, {})[int(at[first_parsed + j])] = text
    return cols, texts


def _note_thread(e: dict, pair: tuple, t: _Trace) -> None:
    args = e.get("args")
    if type(args) is not dict:
        return
    if e.get("name") == "thread_name" and type(args.get("name")) is str and args["name"]:
        t.thread_names[pair] = args["name"]
    elif e.get("name") == "thread_sort_index" and type(args.get("sort_index")) is int:
        t.sort_indexes[pair] = args["sort_index"]


def _arr(a: array, dtype=np.int64) -> np.ndarray:
    return np.frombuffer(a, dtype).copy() if len(a) else np.zeros(0, dtype)


class _Threads:
    """Output (pid, tid) of every raw pair, Perfetto's thread of each, fresh ids, metadata."""

    def __init__(self, t: _Trace):
        self.out: list[tuple] = []
        bad = [out_of_range(pid) or out_of_range(tid) for pid, tid in t.pairs]
        used = {p for p, b in zip(t.pairs, bad) if not b}
        pids = TidAllocator([(None, pid) for pid, _ in used])  # fresh pids, clear of every pid in use
        new_pid = {pid: pids.new(None) for pid in dict.fromkeys(pid for pid, _ in t.pairs if out_of_range(pid))}
        used |= {(pid, pid) for pid, tid in used if tid == 0} | {(pid, pid) for pid in new_pid.values()}  # main threads
        chosen: dict[int, tuple] = {}
        for i, (pid, tid) in enumerate(t.pairs):  # a negative tid's unsigned value, if free
            if out_of_range(tid) and not out_of_range(pid) and -2**31 <= tid < 0 and (pid, tid + _U32) not in used:
                chosen[i] = (pid, tid + _U32)
                used.add(chosen[i])
        self.allocator = TidAllocator(list(used))
        self.metadata: list[bytes] = []
        self.remapped = sum(bad)
        for i, (pid, tid) in enumerate(t.pairs):
            if not bad[i]:
                self.out.append((pid, tid))
                continue
            out = chosen.get(i)
            if out is None:
                p = new_pid.get(pid, pid)
                out = (p, self.allocator.new(p) if out_of_range(tid) else tid)
            self.out.append(out)
            if out[1] != tid and (pid, tid) not in t.thread_names:
                self.metadata += metadata_events(out[0], out[1], f"thread {tid}", out[1])
        tracks: dict[tuple, int] = {}
        self.track = np.array([tracks.setdefault(thread_of(*p), len(tracks)) for p in self.out], np.int64)
        self.track_pair: dict[int, tuple] = {}  # a track's output (pid, tid), as first seen
        for i, p in enumerate(self.out):
            self.track_pair.setdefault(int(self.track[i]), p)
        self.names: dict[int, str] = {}
        self.sort_indexes: dict[int, int] = {}
        for i, p in enumerate(t.pairs):
            track = int(self.track[i])
            if p in t.thread_names:
                self.names[track] = t.thread_names[p]
            if p in t.sort_indexes:
                self.sort_indexes[track] = t.sort_indexes[p]

    def lane_title(self, track: int, k: int) -> str:
        pid, tid = self.track_pair[track]
        name = self.names.get(track, "").strip() or f"thread {tid}"
        return f"{name} (overlap {k})"

    def sort_index(self, track: int) -> int:
        tid = thread_of(*self.track_pair[track])[1]
        return self.sort_indexes.get(track, tid if type(tid) is int else 0)


class RepairReading:
    """What repair reads, a batch at a time, and the repair it decides on (``decide``).

    ``repair`` feeds it its own read of the trace; ``annotate --repair`` feeds it the
    batches of its scan, then those of the events its analyses append (numbered after the
    input's, as they follow it in the output), so both judge the output by one definition.
    """

    def __init__(self, scanner: R.RowScanner):
        self._collector = _Collector(scanner)

    def batch(self, batch: EventBatch) -> None:
        self._collector.batch(batch)

    def decide(self, events: int, out: str, *, rebase_time: bool = False) -> Repairs:
        """The repair of the ``events`` events read (see the module docstring)."""
        return _decide(self._collector.trace(events), RepairResult(out, events=events), rebase_time)


@dataclass
class Repairs:
    """Repair's decisions: the writer's edit (by event ordinal), the thread metadata to
    append after the last event, and what they change (``result``; ``seconds`` not set)."""

    edits: EventEdits
    metadata: list[bytes]
    result: RepairResult

    def blocks(self) -> Iterator[Block]:
        return event_blocks(self.metadata)


def repair(path: str, out: str, *, rebase_time: bool = False) -> RepairResult:
    """Write ``path`` repaired to ``out`` (see the module docstring); return what changed."""
    started = time.perf_counter()
    check_writable(out, (path,))
    with readable_twice(path) as source:  # stdin or a FIFO: spooled, as it is read twice
        return _repair(source, path, out, rebase_time, started)


def _repair(source: str, path: str, out: str, rebase_time: bool, started: float) -> RepairResult:
    reader = TraceReader(source, display_name=path)
    reading = RepairReading(reader.scanner)
    for batch in reader.batches():
        reading.batch(batch)
    repairs = reading.decide(reader.event_count, out, rebase_time=rebase_time)
    result = repairs.result
    head_edit = tail_edit = None
    if rebase_time:
        head_edit, tail_edit, result.base_time_ns = base_time_editors(
            reader.head, reader.tail, reader.layout, reader.metadata(), result.rebase_us, reader.name)
    write_trace(TraceReader(source, display_name=path), out, repairs.blocks(), edit=repairs.edits,
                edit_head=head_edit, edit_tail=tail_edit)
    result.seconds = time.perf_counter() - started
    return result


def _decide(t: _Trace, result: RepairResult, rebase_time: bool) -> Repairs:
    """Repair's decisions on what ``_Collector`` read (``result`` gets the counts)."""
    threads = _Threads(t)
    shift = start_us(t.earliest_ns) if rebase_time and t.earliest_ns is not None else 0
    moved = _overlap_lanes(t, threads, shift, result, rounding=not rebase_time)
    keep = _dropped_flows(t, shift)
    flows = _follow(t, threads, moved, keep)
    result.moved_flow_ends = len(flows.index)
    result.dropped_flow_ends = len(keep) - int(np.count_nonzero(keep))
    keep = keep if result.dropped_flow_ends else None

    b_ord, b_pair = _arr(t.bad_ordinal), _arr(t.bad_pair)
    result.remapped_threads, result.remapped_events = threads.remapped, len(b_ord)
    ordinals, new_pid, new_tid = _new_ids(
        t, threads, np.concatenate([b_ord, moved.ordinal, flows.ordinal]),
        np.concatenate([b_pair, moved.pair, flows.pair]),
        np.concatenate([np.full(len(b_ord), UNCHANGED, np.int64), moved.tid, flows.tid]))

    def fields(k: int) -> dict[str, bytes]:
        values = {}
        if new_pid[k] != UNCHANGED:
            values["pid"] = str(int(new_pid[k])).encode()
        if new_tid[k] != UNCHANGED:
            values["tid"] = str(int(new_tid[k])).encode()
        return values

    if rebase_time:
        result.rebase_us = shift
    edits = EventEdits(keep=keep, ordinals=ordinals, fields=fields, ts=Rebase(shift) if rebase_time else None)
    return Repairs(edits, threads.metadata, result)


@dataclass
class _Moved:
    """Events that move to an overlap thread, by index in ``_Trace.slices`` (or ``flows``),
    sorted: their ordinal, (pid, tid) pair and new tid."""

    index: np.ndarray
    ordinal: np.ndarray
    pair: np.ndarray
    tid: np.ndarray


def _overlap_lanes(t: _Trace, threads: _Threads, shift: int, result: RepairResult, rounding: bool) -> _Moved:
    """The slices Perfetto would spill, with the overlap thread each moves to.

    Each thread's spilled slices are laid out on as few new threads as possible, judged
    as Perfetto reads the output (times shifted by ``shift`` µs); their metadata is added
    to ``threads.metadata``. With ``rounding``, also count the moves that only Perfetto's
    rounding of fractional µs causes. The slices are replayed a window of start times at
    a time (``windows_by``), so memory stays bounded however many there are.
    """
    spills = _spills(t, threads, shift)
    index, track, start, end, ordinal, pair = (spills[name] for name in ("index", "track", "start", "end",
                                                                          "ordinal", "pair"))
    tid = np.full(len(index), UNCHANGED, np.int64)
    moved_tracks = unique(track).tolist()
    for thread in moved_tracks:
        rows = np.flatnonzero(track == thread)
        lanes = partition(start[rows], end[rows])
        pid = threads.track_pair[thread][0]
        tids = [threads.allocator.new(pid) for _ in range(int(lanes.max()) + 1)]
        for k, new in enumerate(tids):
            threads.metadata += metadata_events(pid, new, threads.lane_title(thread, k + 1), threads.sort_index(thread))
        tid[rows] = np.array(tids, np.int64)[lanes]
        result.overlap_threads += len(tids)
    result.moved_slices = len(index)
    result.threads_with_overlaps = len(moved_tracks)
    if result.moved_slices and rounding:
        exact = _spills(t, threads, shift, exact=True)["index"]
        result.moved_for_rounding = int(np.count_nonzero(~np.isin(index, exact)))
    return _Moved(index, ordinal, pair, tid)


def _spills(t: _Trace, threads: _Threads, shift: int, exact: bool = False) -> dict[str, np.ndarray]:
    """The slices Perfetto would spill (columns index, track, start, end, ordinal, pair, in
    Perfetto's ns; sorted by index). ``exact``: replayed at the exact times instead (the
    slices Perfetto drops, with a negative time as it reads them, left out all the same)."""
    def perfetto_ts(rows: Table, index: np.ndarray) -> np.ndarray:
        return _perfetto_times(rows.ts, rows.ts_frac, index, t.slice_ts_odd, shift)

    def perfetto_dur(rows: Table, index: np.ndarray) -> np.ndarray:
        return _perfetto_times(rows.dur, rows.dur_frac, index, t.slice_dur_odd)

    def start(chunk: Table, first: int) -> np.ndarray:
        return chunk.ts if exact else perfetto_ts(chunk, np.arange(first, first + len(chunk)))

    def longer_first(chunk: Table, first: int) -> np.ndarray:  # the walk's order at one start, before file order
        return np.negative(chunk.dur if exact else perfetto_dur(chunk, np.arange(first, first + len(chunk))))

    walk, found = SpillWalk(int(threads.track.max(initial=-1)) + 1), []
    # a start shared by more slices than a window holds is split across windows in the walk's order
    for rows in windows_by(t.slices, start, pass_name=None if exact else "replay", then=longer_first):
        ts, dur = perfetto_ts(rows, rows.index), perfetto_dur(rows, rows.index)
        valid = np.flatnonzero((ts >= 0) & (dur >= 0))  # Perfetto drops the others
        if exact:
            ts, dur = rows.ts, rows.dur
        track = threads.track[rows.pair[valid]]
        begin, end = ts[valid], ts[valid] + dur[valid]
        spill = walk(track, begin, end, rows.ordinal[valid])
        found.append({"index": rows.index[valid][spill], "track": track[spill], "start": begin[spill],
                      "end": end[spill], "ordinal": rows.ordinal[valid][spill], "pair": rows.pair[valid][spill]})
    order = np.argsort(np.concatenate([f["index"] for f in found]))
    return {name: np.concatenate([f[name] for f in found])[order] for name in found[0]}


def _new_ids(t: _Trace, threads: _Threads, ordinals: np.ndarray, pairs: np.ndarray,
             lane_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted unique ordinals, new pid, new tid) with UNCHANGED where a field stays.

    An event's pid/tid change if its raw value was out of range; a lane tid (not
    UNCHANGED in ``lane_tid``) wins over its thread's new tid.
    """
    out_pid = np.array([p if type(p) is int else UNCHANGED for p, _ in threads.out], np.int64)
    out_tid = np.array([q if type(q) is int else UNCHANGED for _, q in threads.out], np.int64)
    bad_pid = np.array([out_of_range(p) for p, _ in t.pairs], bool)
    bad_tid = np.array([out_of_range(q) for _, q in t.pairs], bool)
    new_pid = np.where(bad_pid[pairs], out_pid[pairs], UNCHANGED)
    new_tid = np.where(lane_tid != UNCHANGED, lane_tid, np.where(bad_tid[pairs], out_tid[pairs], UNCHANGED))
    order = np.lexsort((lane_tid == UNCHANGED, ordinals))  # per ordinal, a lane entry first
    ordinals, new_pid, new_tid = ordinals[order], new_pid[order], new_tid[order]
    first = np.r_[True, ordinals[1:] != ordinals[:-1]] if len(ordinals) else np.zeros(0, bool)
    return ordinals[first], new_pid[first], new_tid[first]


def _follow(t: _Trace, threads: _Threads, moved: _Moved, keep: np.ndarray) -> _Moved:
    """The flow ends that move with the slice they mark (not those dropped: ``keep`` False),
    judged in exact ns; only the threads with moved slices are read back.

    A flow end belongs to the slice it marks: for ``s``, ``t`` and ``f`` with bp "e" the
    innermost slice of its thread that starts at or before it (latest start, shortest)
    and has not ended; for ``f`` without bp, the next slice to begin on its thread.
    """
    moved_tracks = unique(threads.track[moved.pair])
    slices = picked(t.slices, lambda rows: np.isin(threads.track[rows.pair], moved_tracks))
    flows = picked(t.flows, lambda rows: np.isin(threads.track[rows.pair], moved_tracks))
    s_track, f_track = threads.track[slices.pair], threads.track[flows.pair]
    lane_tid = np.full(len(slices), UNCHANGED, np.int64)
    lane_tid[np.isin(slices.index, moved.index)] = moved.tid  # both sorted by index
    f_lane = np.full(len(flows), UNCHANGED, np.int64)
    for track in moved_tracks.tolist():
        at = np.flatnonzero(f_track == track)
        if not len(at):
            continue
        rows = np.flatnonzero(s_track == track)
        rows = rows[np.lexsort((slices.ordinal[rows], -slices.dur[rows], slices.ts[rows]))]
        starts, ts = slices.ts[rows], flows.ts[at]
        following = flows.kind[at] == FLOW_END_NEXT
        j = np.where(following, np.searchsorted(starts, ts, "left"), np.searchsorted(starts, ts, "right") - 1)
        target = rows[np.clip(j, 0, len(rows) - 1)]
        ok = (j >= 0) & (j < len(rows)) & (following | (ts <= slices.ts[target] + slices.dur[target]))
        f_lane[at[ok]] = lane_tid[target[ok]]
    f_lane[~keep[flows.ordinal]] = UNCHANGED
    go = np.flatnonzero(f_lane != UNCHANGED)
    return _Moved(flows.index[go], flows.ordinal[go], flows.pair[go], f_lane[go])


def _dropped_flows(t: _Trace, shift: int) -> np.ndarray:
    """Which events stay (one bool per event): all but the flow ends and steps ``_dangling``
    finds, looked for a window of flow ids at a time (a flow's events share an id, so each
    window holds whole flows; traces with millions of dangling ends stay small)."""
    keep = np.ones(t.events, bool)
    for rows in windows_by(t.flows, lambda chunk, first: chunk.id, pass_name="flows"):
        ts = _perfetto_times(rows.ts, rows.ts_frac, rows.index, t.flow_ts_odd, shift)
        keep[rows.ordinal[_dangling(rows.id.view(np.uint64), rows.key, rows.kind, ts, rows.ordinal)]] = False
    return keep


def _dangling(fid: np.ndarray, key: np.ndarray, kind: np.ndarray, ts: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
    """Flow ends and steps with no ``s`` of their (id, cat, name) before them in Perfetto's order."""
    n = len(fid)
    if n == 0:
        return np.zeros(0, bool)
    order = np.lexsort((ordinal, ts, key, fid))
    f, k = fid[order], key[order]
    group_start = np.r_[True, (f[1:] != f[:-1]) | (k[1:] != k[:-1])]
    is_start = kind[order] == FLOW_START
    starts_before = np.cumsum(is_start) - is_start
    first = np.maximum.accumulate(np.where(group_start, np.arange(n), 0))
    out = np.empty(n, bool)
    out[order] = ~is_start & (starts_before - starts_before[first] == 0)
    return out
