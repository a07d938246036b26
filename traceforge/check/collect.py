"""The one streaming pass: per-event rules at once, compact columns for the replay.

Rules that depend on a single event (missing fields, negative ts/dur, counters, flow ids,
Kineto quirks) are decided while reading. Rules that depend on order (overlaps, depth,
flow binding) need every slice and flow event sorted the way Perfetto sorts them, so
those events go into numpy columns (``Columns``, 66 bytes per event) and ``replay``
decides them afterwards. Plain events (most of a Kineto trace, and of what traceforge
writes) are taken from the C scanner's rows without a JSON parser; the rest are parsed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from ..exacttime import ns_to_us_text
from ..io import rows as R
from ..io.reader import EventBatch, TraceReader
from .event_rules import (
    CONTROL_ESCAPE,
    GPU_CATS,
    Counters,
    async_event,
    complete_event,
    control_characters,
    thread_instant,
    v2_flow,
)
from .perfetto import coerce_id, flow_id, out_of_range, thread_of
from ..perfetto_time import perfetto_ns, time_ns
from .report import Findings

# Kinds of replayed events.
SLICE, BEGIN, END, FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT = range(7)
MERGED_THREAD = 1  # flag: pid/tid out of range, so Perfetto merged this event's thread

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
    collector = _Collector(reader.scanner, findings)
    for batch in reader.batches():
        collector.batch(batch)
    return collector.columns()


class _Collector:
    """Findings and replay rows, a batch at a time.

    Most events need no JSON parser: where the scanner's row shows a slice, v1 flow,
    thread instant or one-value counter written plainly (numeric times, integer flow id,
    no key beyond ph/ts/dur/pid/tid/name/cat/id/args, bp "e", s "t") that no per-event rule
    would flag, it is done from the rows, vectorised. Every other event is parsed and
    checked one at a time (``event``, with ``event_rules``), in file order, so findings
    come out as they always did.
    """

    def __init__(self, scanner: R.RowScanner, findings: Findings):
        self.findings = findings
        self.cols = {k: array(t) for k, t in _COLUMNS.items()}
        self.names, self.cats = _Interner(), _Interner()
        self.threads = _Threads()
        self.counters = Counters()
        self.v2: dict[int, tuple[int, int]] = {}
        self.scanner = scanner
        self.counter_groups: dict[tuple[int, int], tuple] = {}
        self.ph = R.IdTable(scanner.strings, lambda raw: (_ph_code(R.decode_string(raw)),), (_SKIP,))
        self.name = R.IdTable(scanner.strings, self._name_entry, (-1, 0))
        self.cat = R.IdTable(scanner.strings, self._cat_entry, (-1, 0))
        self.track = R.IdTable(scanner.tracks, self._track_entry, (0, 0, 0))

    def _track_entry(self, raw: bytes) -> tuple[int, int, int]:
        """Thread track id, MERGED_THREAD flag, and whether the tid is one an instant can use."""
        pid, tid = R.decode_track(raw)
        return *self.threads(pid, tid), coerce_id(tid) is not None

    def _name_entry(self, raw: bytes) -> tuple[int, int]:
        name = R.decode_string(raw)
        return (self.names[name] if name else -1), "__missing__" in name

    def _cat_entry(self, raw: bytes) -> tuple[int, int]:
        cat = R.decode_string(raw)
        return (self.cats[cat] if cat else -1), cat.lower() in GPU_CATS

    def batch(self, batch: EventBatch) -> None:
        if CONTROL_ESCAPE.search(batch.raw):
            control_characters(batch.first, batch.events, self.findings)
        rows = batch.raw_rows
        if rows is None:
            fast, fields, counters = np.zeros(batch.count, bool), None, np.zeros(0, np.int64)
        else:
            fast, fields, counters = self.plain(rows)
        parsed: list[tuple] = []
        v2: dict[int, tuple[int, int]] = {}
        slow = np.flatnonzero(~fast).tolist()
        # one parse of the batch costs about what parsing a quarter of its events one by one does
        event = batch.events.__getitem__ if len(slow) * 4 > batch.count else batch.event
        for i in slow:
            row = self.event(event(i), batch.first + i, v2)
            if row is not None:
                parsed.append(row)
        self.append(batch.first, fields, parsed, v2)
        if len(counters):
            self.plain_counters(rows[counters], batch.first + counters)

    def plain(self, rows: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray] | None, np.ndarray]:
        """Which rows need no parser, the replay fields of those that become replay rows,
        and which are counters with one numeric value (counted by ``plain_counters``)."""
        flags = rows[:, R.FLAGS]
        (code,) = self.ph(rows[:, R.PH])
        timed = flags & R.F_TS != 0
        fast = (flags & (R.F_ODD | R.F_EXTRA) == 0) & np.isin(code, _PLAIN_CODES) & (timed | (code == _METADATA))
        fast &= (flags & R.F_DUR_KEY == 0) | (flags & R.F_DUR != 0)
        fast &= (np.abs(rows[:, R.TS]) < _PLAIN_NS) & (np.abs(rows[:, R.DUR]) < _PLAIN_NS)
        ts = perfetto_ns(rows[:, R.TS], flags & R.F_TS_FRAC != 0)
        dur = np.where(flags & R.F_DUR, perfetto_ns(rows[:, R.DUR], flags & R.F_DUR_FRAC != 0), 0)
        track, merged, tid_ok = self.track(rows[:, R.TRACK])
        name, missing = self.name(rows[:, R.NAME])
        cat, gpu = self.cat(rows[:, R.CAT])
        fast &= ~timed | ((ts >= 0) & (merged == 0) & (missing == 0))
        is_slice = code == SLICE
        dur_exact = np.where(flags & R.F_DUR, rows[:, R.DUR], 0)
        fast &= ~is_slice | ((flags & R.F_DUR != 0) & (dur >= 0) & ~((gpu != 0) & (dur_exact <= 0)))
        is_flow = (code >= FLOW_START) & (code <= _FLOW_F)
        fast &= ~is_flow | (flags & R.F_ID != 0)
        is_instant = code == _INSTANT  # no scope or "t" (any other scope is F_EXTRA)
        fast &= ~is_instant | (tid_ok != 0)
        is_counter = code == _COUNTER
        fast &= ~is_counter | ((flags & R.F_ARGS_ONE_NUMBER != 0) & (flags & R.F_ID_KEY == 0))
        # ph not a non-empty string: the event is passed over before anything is read
        fast |= (code == _SKIP) & (flags & R.F_ODD == 0)
        counters = np.flatnonzero(fast & is_counter)
        kept = np.flatnonzero(fast & ((code <= _FLOW_F) | is_instant) & timed)
        if not len(kept):
            return fast, None, counters
        kind = code[kept]
        kind = np.where(kind == _FLOW_F, np.where(flags[kept] & R.F_BP_E, FLOW_END, FLOW_END_NEXT), kind)
        instant = kind == _INSTANT  # a zero-length slice on its thread
        fields = {"ordinal": kept, "kind": np.where(instant, SLICE, kind), "flags": np.zeros(len(kept), np.int8),
                  "ts": ts[kept], "ts_exact": rows[kept, R.TS], "dur": np.where(instant, 0, dur[kept]),
                  "dur_exact": np.where(instant, 0, dur_exact[kept]),
                  "track": track[kept], "name": name[kept], "cat": cat[kept],
                  "flow_id": np.where(is_flow[kept], rows[kept, R.ID], 0)}
        return fast, fields, counters

    def plain_counters(self, rows: np.ndarray, ordinals: np.ndarray) -> None:
        """Counters with one numeric value and no id: only their series (pid, name) is counted."""
        pairs, first, counts = np.unique(rows[:, [R.TRACK, R.NAME]], axis=0, return_index=True, return_counts=True)
        for (track, name), at, count in zip(pairs.tolist(), first.tolist(), counts.tolist()):
            group = self.counter_groups.get((track, name))
            if group is None:
                pid, _ = R.decode_track(self.scanner.tracks[track])
                text = R.decode_string(self.scanner.strings[name]) if name >= 0 else ""
                group = self.counter_groups[(track, name)] = (coerce_id(pid) or 0, text)
            self.counters.plain(group, count, int(ordinals[at]))

    def append(self, first: int, fields: dict[str, np.ndarray] | None, parsed: list[tuple],
               v2: dict[int, tuple[int, int]]) -> None:
        """Add a batch's replay rows to the columns in file order (ordinals relative to ``first``)."""
        if parsed:
            slow = dict(zip(_COLUMNS, map(np.array, zip(*parsed))))
            slow["ordinal"] -= first
            fields = slow if fields is None else {k: np.concatenate((fields[k], slow[k])) for k in _COLUMNS}
        if fields is None:
            return
        order = np.argsort(fields["ordinal"], kind="stable")
        ordinals = fields["ordinal"][order]
        base = len(self.cols["ordinal"])
        for k, column in self.cols.items():
            values = ordinals + first if k == "ordinal" else fields[k][order]
            column.frombytes(values.astype(column.typecode, copy=False).tobytes())
        if v2:
            for ordinal, entry in v2.items():
                self.v2[base + int(np.searchsorted(ordinals, ordinal - first))] = entry

    def event(self, e: dict, ordinal: int, v2: dict[int, tuple[int, int]]) -> tuple | None:
        """Check one parsed event; its replay row (in ``_COLUMNS`` order) or None."""
        findings = self.findings
        add = findings.add
        ph = e.get("ph")
        if type(ph) is not str or not ph:
            return None
        ph = ph[0]
        raw_ts = e.get("ts")
        name = e.get("name")
        ts = time_ns(raw_ts)
        if ts is None:
            if ph != "M":  # metadata may omit ts
                add("json_tokenizer_failure", ordinal, name, None, "no numeric ts")
            return None
        dur = None
        if "dur" in e:
            dur = time_ns(e["dur"])
            if dur is None:
                add("json_tokenizer_failure", ordinal, name, str(raw_ts), f"dur is {e['dur']!r}")
                return None
        if ts[0] < 0:
            add("trace_sorter_negative_timestamp_dropped", ordinal, name, str(raw_ts))
            return None
        pid, tid = e.get("pid"), e.get("tid")
        track, flags = self.threads(pid, tid)
        if flags:
            add("pid_tid_out_of_range", ordinal, name, str(raw_ts), f"pid {pid!r}, tid {tid!r}")
        if type(name) is str and "__missing__" in name:
            add("missing_name", ordinal, name, str(raw_ts))

        fid = 0
        if ph == "X":
            if not complete_event(e, ordinal, dur, findings):
                return None
            kind = SLICE
        elif ph == "B":
            kind = BEGIN
        elif ph == "E":
            kind = END
        elif ph in "sft":
            parsed = flow_id(e.get("id"))
            if parsed is None:
                add("flow_invalid_id", ordinal, name, str(raw_ts), f"id {e.get('id')!r}")
                return None
            fid = parsed
            if ph == "s":
                kind = FLOW_START
            elif ph == "t":
                kind = FLOW_STEP
            else:
                kind = FLOW_END if e.get("bp") == "e" else FLOW_END_NEXT
        elif ph in "iIR":
            if not thread_instant(e, ordinal, findings):
                return None
            kind = SLICE
            dur = (0, 0)
        elif ph == "C":
            self.counters.event(e, ordinal, findings)
            return None
        elif ph in "ben":
            async_event(e, ordinal, findings)
            return None
        else:
            return None

        if ph in "XB" and "bind_id" in e:
            v2_flow(e, ordinal, v2, findings)
        if dur is None:
            dur = (0, 0)
        cat = e.get("cat")
        return (ordinal, kind, flags, ts[0], dur[0], ts[1], dur[1], track,
                self.names[name] if type(name) is str and name else -1,
                self.cats[cat] if type(cat) is str and cat else -1,
                fid - 2**64 if fid >= 2**63 else fid)

    def columns(self) -> Columns:
        self.counters.finish(self.findings)
        # Views of the arrays' buffers, not copies: a copy held every column twice at the peak.
        arrays = {k: np.frombuffer(v, dtype=np.dtype(v.typecode)) if len(v) else np.zeros(0, v.typecode)
                  for k, v in self.cols.items()}
        self.cols = {}
        for exact, perfetto in (("ts_exact", "ts"), ("dur_exact", "dur")):
            if np.array_equal(arrays[exact], arrays[perfetto]):  # whole µs (or no rounding): one array, not two
                arrays[exact] = arrays[perfetto]
        flow = _flow_keys(arrays["flow_id"], arrays["cat"], arrays["name"], arrays["kind"] >= FLOW_START)
        columns = Columns(**arrays, flow=flow, names=list(self.names), cats=list(self.cats), v2=self.v2)
        _dangling_flow_ends(columns, self.findings)
        return columns


# ph codes beyond the replay kinds (see ``_ph_code``)
_FLOW_F, _INSTANT, _COUNTER, _METADATA, _OTHER, _SKIP, _PARSE = range(FLOW_END_NEXT + 1, FLOW_END_NEXT + 8)
_PLAIN_CODES = np.array([SLICE, BEGIN, END, FLOW_START, FLOW_STEP, _FLOW_F, _INSTANT, _COUNTER, _METADATA, _OTHER])
_PLAIN_NS = 9 * 10**18  # beyond, Perfetto's double of an integer µs differs from value * 1000
_PH_CODES = {"X": SLICE, "B": BEGIN, "E": END, "s": FLOW_START, "t": FLOW_STEP, "f": _FLOW_F, "M": _METADATA,
             "i": _INSTANT, "I": _INSTANT, "R": _INSTANT, "C": _COUNTER}


def _ph_code(ph: str) -> int:
    """What a ph means here: a replay kind (``_FLOW_F``: a flow end, bound by its bp),
    ``_INSTANT``, ``_COUNTER``, ``_METADATA`` (may omit ts), ``_OTHER`` (checked, not
    replayed), ``_SKIP`` (passed over), or ``_PARSE`` (async events: always parsed)."""
    if not ph:
        return _SKIP
    return _PH_CODES.get(ph[0], _PARSE if ph[0] in "ben" else _OTHER)


def _flow_keys(flow_id: np.ndarray, cat: np.ndarray, name: np.ndarray, is_flow: np.ndarray) -> np.ndarray:
    """A dense id per distinct v1 flow key (id, cat, name), Perfetto's identity of a flow.

    Sorted with a lexsort and numbered where the key changes: ``np.unique`` of the triples
    as records held ~125 bytes a flow event at once (the peak of a check)."""
    keys = np.full(len(flow_id), -1, np.int32)
    rows = np.flatnonzero(is_flow)
    if len(rows):
        ids, cats, names = flow_id[rows], cat[rows], name[rows]
        order = np.lexsort((names, cats, ids))
        ids, cats, names = ids[order], cats[order], names[order]
        new = np.empty(len(rows), bool)
        new[0] = True
        new[1:] = (ids[1:] != ids[:-1]) | (cats[1:] != cats[:-1]) | (names[1:] != names[:-1])
        del ids, cats, names
        keys[rows[order]] = np.cumsum(new, dtype=np.int32) - 1
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
