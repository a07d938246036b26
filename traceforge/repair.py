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
times, Perfetto's rounding of fractional µs (``overlaps``).
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .check.perfetto import flow_id, out_of_range, thread_of
from .exacttime import json_time_ns
from .inject import TidAllocator, event_blocks, metadata_events
from .io.event_edits import EventEdits
from .io.reader import TraceReader
from .io.writer import write_trace
from .lanes import partition
from .overlaps import spilled
from .perfetto_time import perfetto_ns, time_ns
from .rebase import base_time_editors, shift_us_text, start_us

FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT = range(4)  # FLOW_END: bp "e"; FLOW_END_NEXT: without
_U32 = 2**32
UNCHANGED = -1
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


@dataclass
class _Times:
    """Times of some events: exact ns, written with a fraction, odd texts (row -> text)."""

    exact: array = field(default_factory=lambda: array("q"))
    fractional: array = field(default_factory=lambda: array("b"))
    odd: dict[int, str] = field(default_factory=dict)  # more than 3 decimals, exponents

    def add(self, ns: int, value: object) -> None:
        """Add a time: its exact ns and the value the reader gave (int, or the text)."""
        if type(value) is str and value[-4:-3] != ".":
            _, dot, frac = value.partition(".")
            if not (dot and len(frac) <= 3 and frac.isdigit()):
                self.odd[len(self.exact)] = value
        self.exact.append(ns)
        self.fractional.append(type(value) is str)

    def perfetto(self, shift_us: int = 0) -> np.ndarray:
        """The ns Perfetto reads once every time is shifted by ``-shift_us`` µs (on its text)."""
        exact = np.frombuffer(self.exact, np.int64) - shift_us * 1000 if len(self.exact) else np.zeros(0, np.int64)
        ns = perfetto_ns(exact, np.frombuffer(self.fractional, np.int8).astype(bool))
        for row, text in self.odd.items():
            read = time_ns(shift_us_text(text.encode(), shift_us).decode())
            ns[row] = read[0] if read is not None else -1
        return ns

    def array(self) -> np.ndarray:
        return np.frombuffer(self.exact, np.int64).copy() if len(self.exact) else np.zeros(0, np.int64)


@dataclass
class _Trace:
    """What repair needs from one pass over the trace."""

    pairs: list[tuple] = field(default_factory=list)  # raw (pid, tid) by pair id
    slice_ordinal: array = field(default_factory=lambda: array("q"))
    slice_pair: array = field(default_factory=lambda: array("q"))
    slice_ts: _Times = field(default_factory=_Times)
    slice_dur: _Times = field(default_factory=_Times)
    flow_ordinal: array = field(default_factory=lambda: array("q"))
    flow_kind: array = field(default_factory=lambda: array("b"))
    flow_id: array = field(default_factory=lambda: array("Q"))
    flow_key: array = field(default_factory=lambda: array("q"))  # (cat, name) id
    flow_pair: array = field(default_factory=lambda: array("q"))
    flow_ts: _Times = field(default_factory=_Times)
    bad_ordinal: array = field(default_factory=lambda: array("q"))  # events with an out-of-range pid/tid
    bad_pair: array = field(default_factory=lambda: array("q"))
    thread_names: dict[tuple, str] = field(default_factory=dict)  # raw pair -> thread_name
    sort_indexes: dict[tuple, int] = field(default_factory=dict)
    earliest_ns: int | None = None  # earliest ts that is not negative
    events: int = 0


def _collect(reader: TraceReader) -> _Trace:
    t = _Trace()
    pair_ids: dict[tuple, int] = {}
    pair_bad: list[bool] = []
    names: dict[tuple, int] = {}
    earliest = _NEVER
    add_slice_ts, add_slice_dur, add_flow_ts = t.slice_ts.add, t.slice_dur.add, t.flow_ts.add
    slice_ordinal, slice_pair = t.slice_ordinal.append, t.slice_pair.append
    for batch in reader.batches():
        ordinal = batch.first - 1
        for e in batch.events:
            ordinal += 1
            get = e.get
            key = (get("pid"), get("tid"))
            try:
                pair = pair_ids.get(key)
            except TypeError:  # an unhashable pid/tid: Perfetto cannot place it either
                continue
            if pair is None:
                pair = pair_ids[key] = len(t.pairs)
                t.pairs.append(key)
                pair_bad.append(out_of_range(key[0]) or out_of_range(key[1]))
            if pair_bad[pair]:
                t.bad_ordinal.append(ordinal)
                t.bad_pair.append(pair)
            ph = get("ph")
            if ph == "M":
                _note_thread(e, key, t)
            ts_value = get("ts")
            ts = json_time_ns(ts_value)
            if ts is None:
                continue
            if earliest > ts >= 0 and ph != "M":  # metadata's ts places nothing (traceforge writes 0)
                earliest = ts
            if ph == "X":
                dur_value = get("dur")
                dur = json_time_ns(dur_value)
                if dur is not None:
                    add_slice_ts(ts, ts_value)
                    add_slice_dur(dur, dur_value)
                    slice_ordinal(ordinal)
                    slice_pair(pair)
            elif ph == "s" or ph == "f" or ph == "t":
                fid = flow_id(get("id"))
                if fid is not None:
                    add_flow_ts(ts, ts_value)
                    t.flow_ordinal.append(ordinal)
                    t.flow_kind.append(FLOW_START if ph == "s" else FLOW_STEP if ph == "t" else
                                       FLOW_END if get("bp") == "e" else FLOW_END_NEXT)
                    t.flow_id.append(fid)
                    cat, name = get("cat"), get("name")
                    cn = (cat if type(cat) is str else "", name if type(name) is str else "")
                    t.flow_key.append(names.setdefault(cn, len(names)))
                    t.flow_pair.append(pair)
    t.earliest_ns = earliest if earliest != _NEVER else None
    t.events = reader.event_count
    return t


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


def repair(path: str, out: str, *, rebase_time: bool = False) -> RepairResult:
    """Write ``path`` repaired to ``out`` (see the module docstring); return what changed."""
    started = time.perf_counter()
    reader = TraceReader(path)
    t = _collect(reader)
    result = RepairResult(out, events=t.events)
    threads = _Threads(t)
    shift = start_us(t.earliest_ns) if rebase_time and t.earliest_ns is not None else 0
    s_ord, s_pair, f_ord, f_pair = _arr(t.slice_ordinal), _arr(t.slice_pair), _arr(t.flow_ordinal), _arr(t.flow_pair)
    s_track, f_track = threads.track[s_pair], threads.track[f_pair]

    lane_tid = _overlap_lanes(t, threads, s_track, s_ord, shift, result, rounding=not rebase_time)
    f_kind = _arr(t.flow_kind, np.int8)
    dangling = _dangling(_arr(t.flow_id, np.uint64), _arr(t.flow_key), f_kind, t.flow_ts.perfetto(shift), f_ord)
    f_lane = _follow(np.unique(s_track[lane_tid != UNCHANGED]), s_track, t.slice_ts.array(), t.slice_dur.array(),
                     s_ord, lane_tid, f_track, t.flow_ts.array(), f_kind)
    f_lane[dangling] = UNCHANGED
    result.moved_flow_ends = int((f_lane != UNCHANGED).sum())
    result.dropped_flow_ends = int(dangling.sum())
    keep = None
    if dangling.any():
        keep = np.ones(t.events, bool)
        keep[f_ord[dangling]] = False

    b_ord, b_pair = _arr(t.bad_ordinal), _arr(t.bad_pair)
    result.remapped_threads, result.remapped_events = threads.remapped, len(b_ord)
    moved_s, moved_f = np.flatnonzero(lane_tid != UNCHANGED), np.flatnonzero(f_lane != UNCHANGED)
    ordinals, new_pid, new_tid = _new_ids(
        t, threads, np.concatenate([b_ord, s_ord[moved_s], f_ord[moved_f]]),
        np.concatenate([b_pair, s_pair[moved_s], f_pair[moved_f]]),
        np.concatenate([np.full(len(b_ord), UNCHANGED, np.int64), lane_tid[moved_s], f_lane[moved_f]]))

    def fields(k: int) -> dict[str, bytes]:
        values = {}
        if new_pid[k] != UNCHANGED:
            values["pid"] = str(int(new_pid[k])).encode()
        if new_tid[k] != UNCHANGED:
            values["tid"] = str(int(new_tid[k])).encode()
        return values

    edits = EventEdits(keep=keep, ordinals=ordinals, fields=fields,
                       ts=partial(_rebased_ts, delta_us=shift) if rebase_time else None)
    head_edit = tail_edit = None
    if rebase_time:
        head_edit, tail_edit, result.base_time_ns = base_time_editors(
            reader.head, reader.tail, reader.layout, reader.metadata(), shift, reader.name)
        result.rebase_us = shift
    write_trace(TraceReader(path), out, event_blocks(threads.metadata), edit=edits, edit_head=head_edit, edit_tail=tail_edit)
    result.seconds = time.perf_counter() - started
    return result


def _rebased_ts(text: bytes, delta_us: int) -> bytes:
    """A ts moved back by ``delta_us``; one that was not negative stays so: only metadata
    can start before the trace (thread names written at ts 0), and a negative ts is dropped."""
    shifted = shift_us_text(text, delta_us)
    return b"0" if shifted[:1] == b"-" and text.lstrip()[:1] != b"-" else shifted


def _overlap_lanes(t: _Trace, threads: _Threads, s_track: np.ndarray, s_ord: np.ndarray, shift: int,
                   result: RepairResult, rounding: bool) -> np.ndarray:
    """The overlap-thread tid of each slice Perfetto would spill (UNCHANGED for the rest).

    Each thread's spilled slices are laid out on as few new threads as possible, judged
    as Perfetto reads the output (times shifted by ``shift`` µs); their metadata is added
    to ``threads.metadata``. With ``rounding``, also count the moves that only Perfetto's
    rounding of fractional µs causes.
    """
    start, dur = t.slice_ts.perfetto(shift), t.slice_dur.perfetto()
    valid = np.flatnonzero((start >= 0) & (dur >= 0))  # Perfetto drops the others
    spill = np.zeros(len(s_ord), bool)
    spill[valid] = spilled(s_track[valid], start[valid], start[valid] + dur[valid], s_ord[valid])
    lane_tid = np.full(len(s_ord), UNCHANGED, np.int64)
    moved_tracks = np.unique(s_track[spill]).tolist()
    for track in moved_tracks:
        rows = np.flatnonzero(spill & (s_track == track))
        lanes = partition(start[rows], start[rows] + dur[rows])
        pid = threads.track_pair[track][0]
        tids = [threads.allocator.new(pid) for _ in range(int(lanes.max()) + 1)]
        for k, tid in enumerate(tids):
            threads.metadata += metadata_events(pid, tid, threads.lane_title(track, k + 1), threads.sort_index(track))
        lane_tid[rows] = np.array(tids, np.int64)[lanes]
        result.overlap_threads += len(tids)
    result.moved_slices = int(spill.sum())
    result.threads_with_overlaps = len(moved_tracks)
    if result.moved_slices and rounding:
        exact_start, exact_dur = t.slice_ts.array()[valid], t.slice_dur.array()[valid]
        exact_spill = spilled(s_track[valid], exact_start, exact_start + exact_dur, s_ord[valid])
        result.moved_for_rounding = int((spill[valid] & ~exact_spill).sum())
    return lane_tid


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


def _follow(moved_tracks: np.ndarray, s_track: np.ndarray, s_ts: np.ndarray, s_dur: np.ndarray, s_ord: np.ndarray,
            lane_tid: np.ndarray, f_track: np.ndarray, f_ts: np.ndarray, f_kind: np.ndarray) -> np.ndarray:
    """The lane tid each flow end moves to (UNCHANGED: it stays), in exact ns.

    A flow end belongs to the slice it marks: for ``s``, ``t`` and ``f`` with bp "e" the
    innermost slice of its thread that starts at or before it (latest start, shortest)
    and has not ended; for ``f`` without bp, the next slice to begin on its thread.
    """
    f_lane = np.full(len(f_track), UNCHANGED, np.int64)
    for track in moved_tracks.tolist():
        flows = np.flatnonzero(f_track == track)
        if not len(flows):
            continue
        rows = np.flatnonzero(s_track == track)
        rows = rows[np.lexsort((s_ord[rows], -s_dur[rows], s_ts[rows]))]
        starts, t = s_ts[rows], f_ts[flows]
        following = f_kind[flows] == FLOW_END_NEXT
        j = np.where(following, np.searchsorted(starts, t, "left"), np.searchsorted(starts, t, "right") - 1)
        target = rows[np.clip(j, 0, len(rows) - 1)]
        ok = (j >= 0) & (j < len(rows)) & (following | (t <= s_ts[target] + s_dur[target]))
        f_lane[flows[ok]] = lane_tid[target[ok]]
    return f_lane


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
