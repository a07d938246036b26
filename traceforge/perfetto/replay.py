"""Replay slices and flows the way Perfetto's importer does, to predict what it loses.

Perfetto sorts every event by ts (at equal ts: ``E`` first, then events with a dur,
longest first, then file order) and keeps a stack of open slices per thread track:

- a slice pops the slices that ended before it ([start, end) intervals; two zero-length
  slices at one ts stack), then is pushed, unless it starts inside the top slice and ends
  after it (``slice_spill_overlapping_complete_event``) or the stack is 512 deep;
- an open ``B`` above a slice that has ended is cut short (``misplaced_end_event``);
- flow events bind to the top of the stack as it is, even if that slice has ended,
  because only a new slice pops the stack.

This follows trace_processor's slice_tracker.cc and flow_tracker.cc, including the places
where they pop the top of the stack rather than the slice they looked at. The walk itself
is in C (``traceforge/_replay.c``): it is sequential, one step per event, and in Python it
was a large share of a check's time. The rows come back from disk a window of Perfetto start
times at a time (``windows.windows_by``), and the walk's state carries from one window to
the next, so memory holds one window, not the trace.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .. import _native
from ..columns.table import Table
from ..columns.windows import picked, windows_by
from ..util.exacttime import ns_to_us_text
from .collect import END, MERGED_THREAD, NO_V2, Collected
from .flow_keys import FlowKeys
from .report import Findings, shorten

REBASE_HINT = "traceforge repair --rebase-time fixes it"

_RULES = {
    _native.replay.SPILL: "slice_spill_overlapping_complete_event",
    _native.replay.MAX_DEPTH_EXCEEDED: "slice_max_depth_exceeded",
    _native.replay.MISPLACED_END: "misplaced_end_event",
    _native.replay.NO_ENCLOSING_SLICE: "flow_no_enclosing_slice",
    _native.replay.DUPLICATE_ID: "flow_duplicate_id",
    _native.replay.END_WITHOUT_START: "flow_end_without_start",
    _native.replay.STEP_WITHOUT_START: "flow_step_without_start",
    _native.replay.END_FROM_SLICE_0: "flow_end_from_slice_0",
    _native.replay.BOUND_UNDER_SPILL: "flow_bound_to_other_slice",
}
_SPILL = _RULES[_native.replay.SPILL]
DANGLING = "dangling_flow_end"
# rows per window read back, sorted and walked (a window of four times as many rows held
# that much more while gathered, for no gain in speed)
WINDOW_ROWS = 1 << 18
_CAUSES = ("merged thread ids", "float rounding", "overlap")


def replay(collected: Collected, findings: Findings, max_rows: int | None = None) -> None:
    """Add the order-dependent findings (overlaps, depth, misplaced ends, flows) and Kineto's
    dangling flow ends. ``max_rows``: rows per window (``WINDOW_ROWS`` by default)."""
    keys = FlowKeys.of(collected)
    walker = _native.replay.walker(collected.n_tracks, keys.count, False)
    # the slices alone at their exact times, to tell which spills only Perfetto's rounding makes
    exact = _native.replay.walker(collected.n_tracks, 0, True) if collected.inexact else None
    tally = _Tally(findings.max_examples)
    # at one ts, rows go in Perfetto's order (``_tie_order``) across windows: many events at one ts are not one window
    for rows in windows_by(collected.rows, lambda chunk, first: chunk.ts, max_rows or WINDOW_ROWS, "replay",
                           then=lambda chunk, first: _tie_order(chunk.kind, chunk.dur)):
        key = keys.index(rows)
        exact_spills = None
        if exact is not None:
            found = _walk(exact, rows, key, exact=True)
            exact_spills = found[found[:, 0] == _native.replay.SPILL, 1]
        tally.walked(_walk(walker, rows, key, exact=False), exact_spills)
        tally.dangling(rows.ordinal[keys.dangling(rows, key)])
        del rows, key  # not held while the next window is read
    tally.report(collected, findings)


def _walk(walker: object, rows: Table, key: np.ndarray, *, exact: bool) -> np.ndarray:
    """The records (rule, ordinal, other ordinal, other's name, flags) of one window's walk.
    ``exact``: slices only, at their exact times. Windows by Perfetto's start times serve
    the exact walk too: Perfetto's reading of a time never decreases as the time grows."""
    ts, dur = (rows.ts_exact, rows.dur_exact) if exact else (rows.ts, rows.dur)
    found = _native.replay.walk(walker, _sorted_rows(rows.kind, ts, dur, slices_only=exact), rows.kind, ts, dur,
                         rows.track, key, rows.fid, rows.v2_mode, rows.name, rows.cat, rows.flags, rows.ordinal)
    return np.frombuffer(found, np.int64).reshape(-1, _native.replay.RECORD)


def _sorted_rows(kind: np.ndarray, ts: np.ndarray, dur: np.ndarray, *, slices_only: bool) -> np.ndarray:
    """The window's rows (slices only, or all) in Perfetto's order: by ts; at equal ts, E
    first, then longer first, then file order (a window's rows are in file order)."""
    rows = np.flatnonzero(kind <= END) if slices_only else None
    if rows is not None:
        ts, dur, kind = ts[rows], dur[rows], kind[rows]
    order = np.lexsort((_tie_order(kind, dur), ts))  # stable: file order breaks ties
    return (order if rows is None else rows[order]).astype(np.int64, copy=False)


def _tie_order(kind: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Perfetto's order of events at one ts (before file order): E first, then longer first."""
    key = np.negative(dur)
    key[kind == END] = np.iinfo(np.int64).min
    return key


@dataclass
class _Rule:
    """One rule's findings so far: the first records (with their spill causes) and counts."""

    count: int = 0
    examples: list[tuple[list[int], str | None]] = field(default_factory=list)
    causes: Counter = field(default_factory=Counter)  # in the order first met


class _Tally:
    """Findings gathered window by window: per rule, a count, causes and the first examples.
    The examples' names and times are read back from disk once, at the end (``report``)."""

    def __init__(self, max_examples: int):
        self.max_examples = max_examples
        self.rules: dict[str, _Rule] = {}
        self.dangling_count = 0
        self.dangling_first = np.zeros(0, np.int64)  # the first ends in file order

    def walked(self, found: np.ndarray, exact_spills: np.ndarray | None) -> None:
        for code in dict.fromkeys(found[:, 0].tolist()):  # rules in the order first found
            records = found[found[:, 0] == code]
            rule = self.rules.setdefault(_RULES[code], _Rule())
            rule.count += len(records)
            causes = [None] * len(records)
            if code == _native.replay.SPILL:
                causes = [_CAUSES[c] for c in _spill_causes(records, exact_spills).tolist()]
                rule.causes.update(causes)
            room = max(0, self.max_examples - len(rule.examples))
            rule.examples += zip(records[:room].tolist(), causes[:room])

    def dangling(self, ordinals: np.ndarray) -> None:
        self.dangling_count += len(ordinals)
        self.dangling_first = np.sort(np.concatenate((self.dangling_first, ordinals)))[:self.max_examples]

    def report(self, collected: Collected, findings: Findings) -> None:
        wanted = {record[1] for rule in self.rules.values() for record, _ in rule.examples}
        rows = _Rows(collected, wanted | set(self.dangling_first.tolist()))
        for name, rule in self.rules.items():
            for (_, ordinal, other, other_name, _), cause in rule.examples:
                other_text = _describe(other, collected.names[other_name] if other_name >= 0 else None)
                findings.add(name, ordinal, rows.name(ordinal), rows.ts_text(ordinal),
                             _note(rows, name, ordinal, other_text, cause), cause)
            shown = Counter(cause for _, cause in rule.examples)
            for cause, count in rule.causes.items():
                findings.extra(name, count - shown[cause], cause)
            if not rule.causes:
                findings.extra(name, rule.count - len(rule.examples))
        for ordinal in self.dangling_first.tolist():
            findings.add(DANGLING, ordinal, rows.name(ordinal), rows.ts_text(ordinal), rows.flow_text(ordinal))
        findings.extra(DANGLING, self.dangling_count - len(self.dangling_first))


def _spill_causes(records: np.ndarray, exact_spills: np.ndarray | None) -> np.ndarray:
    """Index into ``_CAUSES`` per spill: an out-of-range tid merged two threads; only
    Perfetto's float rounding of fractional µs makes them overlap; or a real overlap."""
    merged = (records[:, 4] & MERGED_THREAD) != 0
    rounding = np.zeros(len(records), bool) if exact_spills is None else ~np.isin(records[:, 1], exact_spills)
    return np.where(merged, 0, np.where(rounding, 1, 2))


class _Rows:
    """The few rows that examples show, read back from disk by ordinal."""

    def __init__(self, collected: Collected, ordinals: set[int]):
        wanted = np.array(sorted(ordinals), np.int64)
        table = picked(collected.rows, lambda chunk: np.isin(chunk.ordinal, wanted))
        self._rows = {int(o): i for i, o in enumerate(table.ordinal.tolist())}
        self._table = table
        self._names, self._cats = collected.names, collected.cats

    def _get(self, ordinal: int, column: str) -> int:
        return int(self._table.cols[column][self._rows[ordinal]])

    def name(self, ordinal: int) -> str | None:
        i = self._get(ordinal, "name")
        return self._names[i] if i >= 0 else None

    def ts_text(self, ordinal: int) -> str:
        return ns_to_us_text(self._get(ordinal, "ts_exact"))

    def flow_text(self, ordinal: int) -> str:
        fid = self._get(ordinal, "fid") % 2**64
        if self._get(ordinal, "v2_mode") != NO_V2:
            return f"bind_id {fid}"
        cat = self._get(ordinal, "cat")
        return f"id {fid}, cat {self._cats[cat] if cat >= 0 else None!r}"


def _note(rows: _Rows, rule: str, ordinal: int, other: str, cause: str | None) -> str:
    """What an example says beside its name and ts (``other``: the slice it concerns)."""
    if rule == _SPILL:
        if cause == "merged thread ids":
            return f"overlaps {other}; an out-of-range tid put them on one thread"
        if cause == "float rounding":
            return (f"overlaps {other}; only Perfetto's float rounding of fractional µs makes them overlap: "
                    f"{REBASE_HINT}")
        return f"overlaps {other}"
    if rule == "slice_max_depth_exceeded":
        return f"inside {other}"
    if rule == "misplaced_end_event":
        return f"B slice(s) still open inside {other}, which ended before"
    if rule == "flow_bound_to_other_slice":
        return f"inside {other}, which Perfetto moves to an overflow track: the arrow is drawn to the slice under it"
    return rows.flow_text(ordinal)


def _describe(ordinal: int, name: str | None) -> str:
    return f"{shorten(name) if name else None!r} (#{ordinal})"
