"""The one streaming pass: per-event rules at once, compact columns for the replay.

Rules that depend on a single event (missing fields, negative ts/dur, counters, flow ids,
Kineto quirks) are decided while reading. Rules that depend on order (overlaps, depth,
flow binding) need every slice and flow event sorted the way Perfetto sorts them, so
those events go into numpy columns (``Columns``, 58 bytes per event) and ``replay``
decides them afterwards.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..exacttime import ns_to_us_text
from ..io.reader import TraceReader
from .perfetto import (
    coerce_id,
    counter_number,
    flow_id,
    out_of_range,
    thread_of,
)
from ..perfetto_time import time_ns
from .report import Findings

# Kinds of replayed events.
SLICE, BEGIN, END, FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT = range(7)
# v2 flow modes (``bind_id`` on a slice).
V2_BEGIN, V2_STEP, V2_END = range(3)
MERGED_THREAD = 1  # flag: pid/tid out of range, so Perfetto merged this event's thread

_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
_CONTROL_ESCAPE = re.compile(rb"\\u00[01][0-9a-fA-F]|\\[bfnrt]")
_CONTROL = re.compile(r"[\x00-\x1f]")
_COLUMNS = {"ordinal": "q", "kind": "b", "flags": "b", "ts": "q", "dur": "q", "ts_exact": "q",
            "dur_exact": "q", "track": "i", "name": "i", "cat": "i", "flow_id": "q"}


@dataclass
class Columns:
    """Slice and flow events in file order; times in ns (Perfetto's and exact).

    ``dur`` is 0 for events without one (Perfetto sorts those like zero-length slices);
    ``name``/``cat`` index ``names``/``cats`` (-1: none). Flow events have their id in
    ``flow_id`` (uint64 bits) and a dense ``flow`` key per distinct v1 (id, cat, name),
    -1 for slices; ``v2`` maps a slice row to its (bind_id, mode).
    """

    ordinal: np.ndarray
    kind: np.ndarray
    flags: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    ts_exact: np.ndarray
    dur_exact: np.ndarray
    track: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    flow_id: np.ndarray
    flow: np.ndarray
    names: list[str]
    cats: list[str]
    v2: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ordinal)

    def name_of(self, row: int) -> str | None:
        i = int(self.name[row])
        return self.names[i] if i >= 0 else None

    def ts_text(self, row: int) -> str:
        return ns_to_us_text(int(self.ts_exact[row]))

    def flow_text(self, row: int) -> str:
        if row in self.v2:
            return f"bind_id {self.v2[row][0]}"
        cat = int(self.cat[row])
        return f"id {int(self.flow_id[row]) % 2**64}, cat {self.cats[cat] if cat >= 0 else None!r}"


class _Interner(dict):
    """Values to dense ids in first-seen order: ``interner[value]``."""

    def __missing__(self, value) -> int:
        i = self[value] = len(self)
        return i


class _Threads:
    """(pid, tid) as written -> (thread track id, flags), cached per pair as written."""

    def __init__(self) -> None:
        self.tracks = _Interner()
        self.seen: dict[tuple, tuple[int, int]] = {}

    def __call__(self, pid: object, tid: object) -> tuple[int, int]:
        try:
            return self.seen[(pid, tid)]
        except KeyError:
            entry = self.seen[(pid, tid)] = self.lookup(pid, tid)
            return entry
        except TypeError:  # an unhashable pid/tid (a list or object)
            return self.lookup(pid, tid)

    def lookup(self, pid: object, tid: object) -> tuple[int, int]:
        merged = out_of_range(pid) or out_of_range(tid)
        return self.tracks[thread_of(pid, tid)], MERGED_THREAD if merged else 0


def collect(reader: TraceReader, findings: Findings) -> Columns:
    """Read every event once; record per-event findings; return the replay columns."""
    cols = {k: array(t) for k, t in _COLUMNS.items()}
    names, cats = _Interner(), _Interner()
    threads = _Threads()
    counters = _Counters()
    v2: dict[int, tuple[int, int]] = {}
    add = findings.add

    for batch in reader.batches():
        if _CONTROL_ESCAPE.search(batch.raw):
            _control_characters(batch.first, batch.events, findings)
        ordinal = batch.first - 1
        for e in batch.events:
            ordinal += 1
            ph = e.get("ph")
            if type(ph) is not str or not ph:
                continue
            ph = ph[0]
            raw_ts = e.get("ts")
            name = e.get("name")
            ts = time_ns(raw_ts)
            if ts is None:
                if ph != "M":  # metadata may omit ts
                    add("json_tokenizer_failure", ordinal, name, None, "no numeric ts")
                continue
            dur = None
            if "dur" in e:
                dur = time_ns(e["dur"])
                if dur is None:
                    add("json_tokenizer_failure", ordinal, name, str(raw_ts), f"dur is {e['dur']!r}")
                    continue
            if ts[0] < 0:
                add("trace_sorter_negative_timestamp_dropped", ordinal, name, str(raw_ts))
                continue
            pid, tid = e.get("pid"), e.get("tid")
            track, flags = threads(pid, tid)
            if flags:
                add("pid_tid_out_of_range", ordinal, name, str(raw_ts), f"pid {pid!r}, tid {tid!r}")
            if type(name) is str and "__missing__" in name:
                add("missing_name", ordinal, name, str(raw_ts))

            fid = 0
            if ph == "X":
                if not _complete_event(e, ordinal, dur, findings):
                    continue
                kind = SLICE
            elif ph == "B":
                kind = BEGIN
            elif ph == "E":
                kind = END
            elif ph in "sft":
                parsed = flow_id(e.get("id"))
                if parsed is None:
                    add("flow_invalid_id", ordinal, name, str(raw_ts), f"id {e.get('id')!r}")
                    continue
                fid = parsed
                if ph == "s":
                    kind = FLOW_START
                elif ph == "t":
                    kind = FLOW_STEP
                else:
                    kind = FLOW_END if e.get("bp") == "e" else FLOW_END_NEXT
            elif ph in "iIR":
                if not _thread_instant(e, ordinal, findings):
                    continue
                kind = SLICE
                dur = (0, 0)
            elif ph == "C":
                counters.event(e, ordinal, findings)
                continue
            elif ph in "ben":
                _async_event(e, ordinal, findings)
                continue
            else:
                continue

            row = len(cols["ordinal"])
            if ph in "XB" and "bind_id" in e:
                _v2_flow(e, row, ordinal, v2, findings)
            if dur is None:
                dur = (0, 0)
            cols["ordinal"].append(ordinal)
            cols["kind"].append(kind)
            cols["flags"].append(flags)
            cols["ts"].append(ts[0])
            cols["ts_exact"].append(ts[1])
            cols["dur"].append(dur[0])
            cols["dur_exact"].append(dur[1])
            cols["track"].append(track)
            cols["name"].append(names[name] if type(name) is str and name else -1)
            cat = e.get("cat")
            cols["cat"].append(cats[cat] if type(cat) is str and cat else -1)
            cols["flow_id"].append(fid - 2**64 if fid >= 2**63 else fid)

    counters.finish(findings)
    arrays = {k: np.frombuffer(v, dtype=np.dtype(v.typecode)).copy() if len(v) else np.zeros(0, v.typecode)
              for k, v in cols.items()}
    flow = _flow_keys(arrays["flow_id"], arrays["cat"], arrays["name"], arrays["kind"] >= FLOW_START)
    columns = Columns(**arrays, flow=flow, names=list(names), cats=list(cats), v2=v2)
    _dangling_flow_ends(columns, findings)
    return columns


def _flow_keys(flow_id: np.ndarray, cat: np.ndarray, name: np.ndarray, is_flow: np.ndarray) -> np.ndarray:
    """A dense id per distinct v1 flow key (id, cat, name), Perfetto's identity of a flow."""
    keys = np.full(len(flow_id), -1, np.int32)
    rows = np.flatnonzero(is_flow)
    if len(rows):
        triples = np.empty(len(rows), dtype=[("id", "i8"), ("cat", "i4"), ("name", "i4")])
        triples["id"], triples["cat"], triples["name"] = flow_id[rows], cat[rows], name[rows]
        keys[rows] = np.unique(triples, return_inverse=True)[1].ravel()
    return keys


def _dangling_flow_ends(cols: Columns, findings: Findings) -> None:
    """Kineto writes ``f`` events whose ``s`` it never wrote (a warning; Perfetto's own
    accounting of them, which depends on order, comes from the replay)."""
    started = np.unique(cols.flow[cols.kind == FLOW_START])
    is_end = (cols.kind == FLOW_END) | (cols.kind == FLOW_END_NEXT)
    rows = np.flatnonzero(is_end & ~np.isin(cols.flow, started))
    shown = rows[:findings.max_examples].tolist()
    for row in shown:
        findings.add("dangling_flow_end", int(cols.ordinal[row]), cols.name_of(row), cols.ts_text(row),
                     cols.flow_text(row))
    findings.extra("dangling_flow_end", len(rows) - len(shown))


def _complete_event(e: dict, ordinal: int, dur: tuple[int, int] | None, findings: Findings) -> bool:
    """Check an ``X`` (``dur``: its times, None if absent); True when it becomes a slice."""
    name, ts, cat = e.get("name"), str(e.get("ts")), e.get("cat")
    if type(cat) is str and cat.lower() in _GPU_CATS and (dur is None or dur[1] <= 0):
        findings.add("gpu_zero_or_negative_duration", ordinal, name, ts, f"dur {e['dur']}" if dur else "no dur")
    if dur is None:
        findings.add("json_parser_failure", ordinal, name, ts, "X without dur")
        return False
    if dur[0] < 0:
        findings.add("slice_negative_duration", ordinal, name, ts, f"dur {e['dur']}")
        return False
    return True


def _thread_instant(e: dict, ordinal: int, findings: Findings) -> bool:
    """Check an instant; True when it becomes a zero-length slice on its thread."""
    scope = e.get("s")
    if scope == "g":
        return False
    if scope == "p":
        if coerce_id(e.get("pid")) is None:
            findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "process instant without pid")
        return False
    if scope is None or scope == "t":
        if coerce_id(e.get("tid")) is None:
            findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "thread instant without tid")
            return False
        return True
    findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), f"instant scope {scope!r}")
    return False


def _async_event(e: dict, ordinal: int, findings: Findings) -> None:
    """Async events need a pid and an ``id`` or ``id2.local``/``id2.global``."""
    id2 = e.get("id2")
    has_id = _is_id(e.get("id")) or (type(id2) is dict and (_is_id(id2.get("local")) or _is_id(id2.get("global"))))
    if coerce_id(e.get("pid")) is None or not has_id:
        findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "async event without pid or id")


def _is_id(value: object) -> bool:
    return type(value) in (int, float) or (type(value) is str and value != "")


def _v2_flow(e: dict, row: int, ordinal: int, v2: dict, findings: Findings) -> None:
    fid = flow_id(e["bind_id"])
    if fid is None:
        findings.add("flow_invalid_id", ordinal, e.get("name"), str(e.get("ts")), f"bind_id {e['bind_id']!r}")
        return
    flow_in, flow_out = bool(e.get("flow_in")), bool(e.get("flow_out"))
    if not (flow_in or flow_out):
        findings.add("flow_without_direction", ordinal, e.get("name"), str(e.get("ts")))
        return
    v2[row] = (fid, V2_STEP if flow_in and flow_out else V2_BEGIN if flow_out else V2_END)


class _Counters:
    """Counter rules: args must be numbers; one key per event; ids must be strings."""

    def __init__(self) -> None:
        self.ids: dict[tuple, Counter] = defaultdict(Counter)  # (pid, name) -> numeric id or None -> events
        self.first: dict[tuple, list] = defaultdict(list)  # (pid, name) -> first events with a numeric id

    def event(self, e: dict, ordinal: int, findings: Findings) -> None:
        name, ts, args = e.get("name"), str(e.get("ts")), e.get("args")
        if type(args) is not dict:
            findings.add("json_parser_failure", ordinal, name, ts, "counter args not an object")
            return
        numeric = 0
        for key, value in args.items():
            if counter_number(value):
                numeric += 1
            else:
                findings.add("json_parser_failure", ordinal, name, ts, f"counter value {key!r}: {value!r}")
        if numeric > 1:
            findings.add("counter_multiple_keys", ordinal, name, ts, f"{numeric} keys")
        cid = e.get("id")
        if type(cid) is str and cid:
            return
        group = (coerce_id(e.get("pid")) or 0, name if type(name) is str else "")
        numeric_id = cid if type(cid) in (int, float) else None
        self.ids[group][numeric_id] += 1
        if numeric_id is not None and len(self.first[group]) < findings.max_examples:
            self.first[group].append((ordinal, name, ts, f"id {cid!r}"))

    def finish(self, findings: Findings) -> None:
        """Series of one (process, name) that only a numeric id tells apart get merged."""
        for group, ids in self.ids.items():
            if len(ids) < 2:
                continue
            merged = sum(n for cid, n in ids.items() if cid is not None)
            for example in self.first[group]:
                findings.add("counter_id_not_string", *example)
            findings.extra("counter_id_not_string", merged - len(self.first[group]))


def _control_characters(first: int, events: list, findings: Findings) -> None:
    """Find the events of a batch whose strings hold control characters (rare: slow path)."""
    for i, e in enumerate(events):
        if _has_control(e):
            findings.add("control_characters", first + i, e.get("name"), str(e.get("ts")))


def _has_control(value) -> bool:
    if type(value) is str:
        return _CONTROL.search(value) is not None
    if type(value) is dict:
        return any(_has_control(k) or _has_control(v) for k, v in value.items())
    if type(value) is list:
        return any(_has_control(v) for v in value)
    return False
