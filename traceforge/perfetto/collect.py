"""The one streaming pass: per-event rules at once, the replay's rows to disk.

Rules that depend on a single event (missing fields, negative ts/dur, counters, flow ids,
Kineto quirks) are decided while reading. Rules that depend on order (overlaps, depth,
flow binding) need every slice and flow event sorted the way Perfetto sorts them, so
those events are written to a temporary file (``Collected.rows``, 96 bytes per event)
and ``replay`` reads them back a window of times at a time. Plain events (most of a
Kineto trace, and of what traceforge writes) are taken from the C scanner's rows without
a JSON parser; the rest are parsed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..columns.table import SpilledColumns
from ..io.read import rows as R
from ..io.read.reader import EventBatch, TraceReader
from ..util.distinct import unique
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
from .importer import coerce_id, flow_id, out_of_range, thread_of
from .report import Findings
from .timestamps import perfetto_ns, time_ns

# Kinds of replayed events.
SLICE, BEGIN, END, FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT = range(7)
MERGED_THREAD = 1  # flag: pid/tid out of range, so Perfetto merged this event's thread
NO_V2 = -1  # v2_mode of a row without a bind_id

# The replay's row, in file order: times in ns (Perfetto's and exact; ``dur`` 0 for events
# without one, which Perfetto sorts like zero-length slices); ``name``/``cat`` index
# ``Collected.names``/``cats`` (-1: none); ``fid`` the flow id of a flow event, or the
# bind_id of a slice whose ``v2_mode`` (``event_rules.V2_*``) is not ``NO_V2``, as int64 bits.
FIELDS = "ordinal kind flags ts dur ts_exact dur_exact track name cat fid v2_mode"


@dataclass
class Collected:
    """What the replay needs: the rows on disk, the strings their ids index, how many thread
    tracks there are, whether any time differs from Perfetto's reading of it, and, of the v1
    flow events, the distinct ``flow_pair`` values and the least and greatest ``fid``."""

    rows: SpilledColumns
    names: list[str]
    cats: list[str]
    n_tracks: int
    inexact: bool
    flow_pairs: np.ndarray
    flow_id_range: tuple[int, int] | None


def flow_pair(cat: np.ndarray, name: np.ndarray) -> np.ndarray:
    """A flow event's (cat, name), both string ids (-1: none), as one int64."""
    return (cat << 32) | (name & 0xFFFFFFFF)


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


def collect(reader: TraceReader, findings: Findings) -> Collected:
    """Read every event once; record per-event findings; return the replay's rows."""
    collector = _Collector(reader.scanner, findings)
    for batch in reader.batches():
        collector.batch(batch)
    return collector.finish()


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
        self.rows = SpilledColumns(FIELDS)
        self.inexact = False
        self.flow_pairs: set[int] = set()
        self.flow_id_range: tuple[int, int] | None = None
        self.names, self.cats = _Interner(), _Interner()
        self.threads = _Threads()
        self.counters = Counters()
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
        slow = np.flatnonzero(~fast).tolist()
        # one parse of the batch costs about what parsing a quarter of its events one by one does
        event = batch.events.__getitem__ if len(slow) * 4 > batch.count else batch.event
        for i in slow:
            row = self.event(event(i), batch.first + i)
            if row is not None:
                parsed.append(row)
        self.append(batch.first, fields, parsed)
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
                  "fid": np.where(is_flow[kept], rows[kept, R.ID], 0), "v2_mode": np.full(len(kept), NO_V2)}
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

    def append(self, first: int, fields: dict[str, np.ndarray] | None, parsed: list[tuple]) -> None:
        """Write a batch's replay rows in file order (ordinals relative to ``first``)."""
        if parsed:
            slow = dict(zip(self.rows.fields, map(np.array, zip(*parsed))))
            slow["ordinal"] -= first
            fields = slow if fields is None else {k: np.concatenate((fields[k], slow[k])) for k in self.rows.fields}
        if fields is None:
            return
        order = np.argsort(fields["ordinal"], kind="stable")
        fields["ordinal"] = fields["ordinal"] + first
        self.rows.extend(*(fields[k][order] for k in self.rows.fields))
        self.inexact = self.inexact or not (np.array_equal(fields["ts"], fields["ts_exact"])
                                            and np.array_equal(fields["dur"], fields["dur_exact"]))
        flow = fields["kind"] >= FLOW_START
        if flow.any():
            self.flow_pairs.update(unique(flow_pair(fields["cat"][flow], fields["name"][flow])).tolist())
            fid = fields["fid"][flow]
            low, high = int(fid.min()), int(fid.max())
            if self.flow_id_range is not None:
                low, high = min(low, self.flow_id_range[0]), max(high, self.flow_id_range[1])
            self.flow_id_range = (low, high)

    def event(self, e: dict, ordinal: int) -> tuple | None:
        """Check one parsed event; its replay row (in ``FIELDS`` order) or None."""
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

        v2_mode = NO_V2
        if ph in "XB" and "bind_id" in e:
            v2 = v2_flow(e, ordinal, findings)
            if v2 is not None:
                fid, v2_mode = v2
        if dur is None:
            dur = (0, 0)
        cat = e.get("cat")
        return (ordinal, kind, flags, ts[0], dur[0], ts[1], dur[1], track,
                self.names[name] if type(name) is str and name else -1,
                self.cats[cat] if type(cat) is str and cat else -1,
                fid - 2**64 if fid >= 2**63 else fid, v2_mode)

    def finish(self) -> Collected:
        self.counters.finish(self.findings)
        return Collected(self.rows, list(self.names), list(self.cats), len(self.threads.tracks), self.inexact,
                         np.array(sorted(self.flow_pairs), np.int64), self.flow_id_range)


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
