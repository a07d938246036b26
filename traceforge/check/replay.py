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
was half of the time of a check.
"""

from __future__ import annotations

import numpy as np

from .. import _replay
from .collect import END, MERGED_THREAD, Columns
from .report import Findings, shorten

REBASE_HINT = "traceforge repair --rebase-time fixes it"

_RULES = {
    _replay.SPILL: "slice_spill_overlapping_complete_event",
    _replay.MAX_DEPTH_EXCEEDED: "slice_max_depth_exceeded",
    _replay.MISPLACED_END: "misplaced_end_event",
    _replay.NO_ENCLOSING_SLICE: "flow_no_enclosing_slice",
    _replay.DUPLICATE_ID: "flow_duplicate_id",
    _replay.END_WITHOUT_START: "flow_end_without_start",
    _replay.STEP_WITHOUT_START: "flow_step_without_start",
    _replay.END_FROM_SLICE_0: "flow_end_from_slice_0",
}


def replay(cols: Columns, findings: Findings) -> None:
    """Add the order-dependent findings (overlaps, depth, misplaced ends, flows)."""
    exact_spills = None
    if not (np.array_equal(cols.ts, cols.ts_exact) and np.array_equal(cols.dur, cols.dur_exact)):
        found = _walk(cols, exact=True)
        exact_spills = np.unique(found[found[:, 0] == _replay.SPILL, 1])
    found = _walk(cols, exact=False)
    for code in dict.fromkeys(found[:, 0].tolist()):  # rules in the order first found
        _report(cols, found[found[:, 0] == code, 1:], _RULES[code], findings, exact_spills)


def _walk(cols: Columns, *, exact: bool) -> np.ndarray:
    """(rule, row, other row) of what the walk finds, in order. ``exact``: the slices alone,
    at their exact times (to tell which spills only Perfetto's rounding makes)."""
    ts = cols.ts_exact if exact else cols.ts
    dur = cols.dur_exact if exact else cols.dur
    order = _sorted_rows(cols, ts, dur, slices_only=exact)
    fids, n_flows = _v1_flow_ids(cols, order)
    v2_rows = np.array(sorted(cols.v2), np.int64)
    v2 = [cols.v2[row] for row in v2_rows.tolist()]
    v2_fids = np.array([fid for fid, _ in v2], np.uint64).view(np.int64)
    v2_modes = np.array([mode for _, mode in v2], np.int8)
    n_tracks = int(cols.track.max()) + 1 if len(cols) else 0
    found = _replay.replay(order, cols.kind, ts, dur, cols.track, fids, cols.name, cols.cat, v2_rows, v2_fids,
                           v2_modes, n_tracks, n_flows, exact)
    return np.frombuffer(found, np.int64).reshape(-1, 3)


def _sorted_rows(cols: Columns, ts: np.ndarray, dur: np.ndarray, *, slices_only: bool) -> np.ndarray:
    """The rows in Perfetto's order (slices only, or every row). All rows are sorted in place
    of a gathered copy: at the peak, the sort's temporaries are it."""
    if slices_only:
        rows = np.flatnonzero(cols.kind <= END)
        ts, dur, kind = ts[rows], dur[rows], cols.kind[rows]
    else:
        rows, kind = None, cols.kind
    key = np.negative(dur)
    key[kind == END] = np.iinfo(np.int64).min
    order = np.lexsort((key, ts))  # stable: file order breaks ties
    return (order if rows is None else rows[order]).astype(np.int64, copy=False)


def _v1_flow_ids(cols: Columns, order: np.ndarray) -> tuple[np.ndarray, int]:
    """Perfetto numbers v1 flows 0, 1, 2, ... as their keys first appear in sorted order:
    that number per row (-1: not a v1 flow event), and how many there are."""
    fids = np.full(len(cols), -1, np.int32)
    rows = order[cols.flow[order] >= 0]
    keys, first = np.unique(cols.flow[rows], return_index=True)
    rank = np.empty(len(keys), np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(keys), dtype=np.int32)
    fids[rows] = rank[np.searchsorted(keys, cols.flow[rows])]
    return fids, len(keys)


def _report(cols: Columns, found: np.ndarray, rule: str, findings: Findings, exact_spills: np.ndarray | None) -> None:
    """One rule's findings: the first ones as examples, the rest counted (by cause)."""
    rows, others = found[:, 0], found[:, 1]
    causes = _spill_causes(cols, rows, others, exact_spills) if rule == _RULES[_replay.SPILL] else None
    shown = min(len(rows), findings.max_examples)
    for i in range(shown):
        row, other = int(rows[i]), int(others[i])
        cause = None if causes is None else _CAUSES[causes[i]]
        findings.add(rule, int(cols.ordinal[row]), cols.name_of(row), cols.ts_text(row),
                     _note(cols, rule, row, other, cause), cause)
    if causes is None:
        findings.extra(rule, len(rows) - shown)
        return
    rest, first = np.unique(causes[shown:], return_index=True)
    counts = np.bincount(causes[shown:], minlength=len(_CAUSES))
    for cause in rest[np.argsort(first)].tolist():  # as first met, like the examples' causes
        findings.extra(rule, int(counts[cause]), _CAUSES[cause])


_CAUSES = ("merged thread ids", "float rounding", "overlap")


def _spill_causes(cols: Columns, rows: np.ndarray, over: np.ndarray, exact_spills: np.ndarray | None) -> np.ndarray:
    """Index into ``_CAUSES`` per spilled row: an out-of-range tid merged two threads; only
    Perfetto's float rounding of fractional µs makes them overlap; or a real overlap."""
    merged = ((cols.flags[rows] | cols.flags[over]) & MERGED_THREAD) != 0
    rounding = np.zeros(len(rows), bool) if exact_spills is None else ~np.isin(rows, exact_spills)
    return np.where(merged, 0, np.where(rounding, 1, 2))


def _note(cols: Columns, rule: str, row: int, other: int, cause: str | None) -> str:
    if rule == "slice_spill_overlapping_complete_event":
        note = f"overlaps {_describe(cols, other)}"
        if cause == "merged thread ids":
            return note + "; an out-of-range tid put them on one thread"
        if cause == "float rounding":
            return note + f"; only Perfetto's float rounding of fractional µs makes them overlap: {REBASE_HINT}"
        return note
    if rule == "slice_max_depth_exceeded":
        return f"inside {_describe(cols, other)}"
    if rule == "misplaced_end_event":
        return f"B slice(s) still open inside {_describe(cols, other)}, which ended before"
    return cols.flow_text(row)


def _describe(cols: Columns, row: int) -> str:
    name = cols.name_of(row)
    return f"{shorten(name) if name else None!r} (#{int(cols.ordinal[row])})"
