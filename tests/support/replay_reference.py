"""The replay of ``check`` as it was written in Python, kept as the reference that the C walk
(``traceforge/_replay.c``) is tested against: the same rules, one event at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceforge.perfetto.collect import (
    BEGIN,
    END,
    FLOW_END,
    FLOW_END_NEXT,
    FLOW_START,
    FLOW_STEP,
    MERGED_THREAD,
    NO_V2,
    SLICE,
    Collected,
)
from traceforge.perfetto.event_rules import V2_BEGIN, V2_STEP
from traceforge.perfetto.report import Findings, shorten
from traceforge.util.exacttime import ns_to_us_text

MAX_DEPTH = 512
REBASE_HINT = "traceforge repair --rebase-time fixes it"
_CHUNK = 1 << 18  # rows turned into Python ints at a time: memory stays flat on huge traces


@dataclass
class Columns:
    """Every replay row in memory, in file order (the C walk reads them back a window at a
    time). ``flow``: a dense key per distinct v1 flow (id, cat, name), -1 on other rows;
    ``v2``: row -> (bind_id, mode)."""

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
    v2: dict[int, tuple[int, int]]

    @classmethod
    def of(cls, collected: Collected) -> Columns:
        chunks = [chunk.cols for chunk in collected.rows.chunks()]
        rows = {k: np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0, np.int64)
                for k in collected.rows.fields}
        v2_rows = np.flatnonzero(rows["v2_mode"] != NO_V2)
        v2 = {row: (fid % 2**64, mode) for row, fid, mode in
              zip(v2_rows.tolist(), rows["fid"][v2_rows].tolist(), rows["v2_mode"][v2_rows].tolist())}
        is_flow = rows["kind"] >= FLOW_START
        flow = np.full(len(is_flow), -1, np.int64)
        if is_flow.any():
            triples = np.column_stack([rows["fid"], rows["cat"], rows["name"]])[is_flow]
            flow[is_flow] = np.unique(triples, axis=0, return_inverse=True)[1].ravel()
        return cls(**{k: v for k, v in rows.items() if k not in ("fid", "v2_mode")}, flow_id=rows["fid"],
                   flow=flow, names=collected.names, cats=collected.cats, v2=v2)

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


def replay(cols: Columns, findings: Findings) -> None:
    """Add the order-dependent findings (overlaps, depth, misplaced ends, flows) and the
    dangling flow ends."""
    _dangling_flow_ends(cols, findings)
    exact_spills = None
    if not (np.array_equal(cols.ts, cols.ts_exact) and np.array_equal(cols.dur, cols.dur_exact)):
        exact = _Replay(cols, exact=True, findings=None)
        exact.run()
        exact_spills = exact.spilled
    _Replay(cols, exact=False, findings=findings, exact_spills=exact_spills).run()


def _dangling_flow_ends(cols: Columns, findings: Findings) -> None:
    """Flow ends whose key no s event has, anywhere in the trace (examples in file order)."""
    started = np.unique(cols.flow[cols.kind == FLOW_START])
    is_end = (cols.kind == FLOW_END) | (cols.kind == FLOW_END_NEXT)
    rows = np.flatnonzero(is_end & ~np.isin(cols.flow, started))
    shown = rows[:findings.max_examples].tolist()
    for row in shown:
        findings.add("dangling_flow_end", int(cols.ordinal[row]), cols.name_of(row), cols.ts_text(row),
                     cols.flow_text(row))
    findings.extra("dangling_flow_end", len(rows) - len(shown))


def _sorted_rows(cols: Columns, ts: np.ndarray, dur: np.ndarray, *, slices_only: bool) -> np.ndarray:
    """The rows in Perfetto's order: by ts; at equal ts, E first, then longer first, then file order."""
    rows = np.flatnonzero(cols.kind <= END) if slices_only else np.arange(len(cols))
    key = np.negative(dur[rows])
    key[cols.kind[rows] == END] = np.iinfo(np.int64).min
    return rows[np.lexsort((key, ts[rows]))]


def _v1_flow_ids(cols: Columns, order: np.ndarray) -> tuple[np.ndarray, int]:
    """Perfetto numbers v1 flows 0, 1, 2, ... as their keys first appear in sorted order:
    that number per row (-1: not a v1 flow event), and how many there are."""
    fids = np.full(len(cols), -1, np.int64)
    rows = order[cols.flow[order] >= 0]
    keys, first = np.unique(cols.flow[rows], return_index=True)
    rank = np.empty(len(keys), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(keys))
    fids[rows] = rank[np.searchsorted(keys, cols.flow[rows])]
    return fids, len(keys)


class _Replay:
    """One pass over the sorted events. Without ``findings`` only slices are replayed and
    ``spilled`` collects the rows that would spill (to compare exact times with Perfetto's)."""

    def __init__(self, cols: Columns, *, exact: bool, findings: Findings | None,
                 exact_spills: set[int] | None = None):
        self.cols = cols
        self.exact = exact
        self.findings = findings
        self.exact_spills = exact_spills
        self.spilled: set[int] = set()
        self.stacks: dict[int, list[list]] = {}  # track -> [[start, end or None, row], ...]
        self.started = _FlowIds(0)  # flow ids Perfetto holds a source slice for
        self.pending: dict[int, list[tuple[int, int]]] = {}  # track -> [(flow id, row)] of f without bp
        self.last_spill: dict[int, tuple[int, int, int]] = {}  # track -> (start, end, row) spilled since a push

    def run(self) -> None:
        cols = self.cols
        ts = cols.ts_exact if self.exact else cols.ts
        dur = cols.dur_exact if self.exact else cols.dur
        order = _sorted_rows(cols, ts, dur, slices_only=self.findings is None)  # the order is shared:
        fids, v1_flows = _v1_flow_ids(cols, order)  # what is compared is the walk
        self.started = _FlowIds(v1_flows)
        v2 = cols.v2
        for lo in range(0, len(order), _CHUNK):
            chunk = order[lo:lo + _CHUNK]
            columns = (chunk, cols.kind[chunk], ts[chunk], dur[chunk], cols.track[chunk], fids[chunk])
            for r, k, t, d, track, fid in zip(*(c.tolist() for c in columns), strict=True):
                if k == SLICE:
                    self.start(track, t, d, r)
                elif k == BEGIN:
                    self.start(track, t, None, r)
                elif k == END:
                    self.end(track, t, r)
                else:
                    self.flow_v1(k, track, fid, r, t)
                    continue
                if r in v2:
                    self.flow_v2(track, *v2[r], r)

    # -- slices -------------------------------------------------------------------------

    def start(self, track: int, ts: int, dur: int | None, row: int) -> None:
        """A slice begins (``dur`` None: a ``B`` whose end is not known yet)."""
        stack = self.stacks.get(track)
        if stack is None:
            stack = self.stacks[track] = []
        elif stack:
            over = self.close_stack(stack, ts, dur, row)
            if over is not None:
                self.spill(row, over)
                if dur is not None:
                    self.last_spill[track] = (ts, ts + dur, row)
                return
        if len(stack) >= MAX_DEPTH:
            self.report("slice_max_depth_exceeded", row, f"inside {self.describe(stack[-1][2])}")
            return
        stack.append([ts, None if dur is None else ts + dur, row])
        self.last_spill.pop(track, None)
        if track in self.pending:
            self.bind_pending(track)

    def end(self, track: int, ts: int, row: int) -> None:
        """An ``E``: closes the innermost open ``B`` with its name (and cat, if given)."""
        stack = self.stacks.get(track)
        if not stack:
            return
        self.close_stack(stack, ts, None, row)
        cols = self.cols
        name, cat = int(cols.name[row]), int(cols.cat[row])
        for i in range(len(stack) - 1, -1, -1):
            _, end, open_row = stack[i]
            if end is not None:
                continue
            if cat >= 0 and cols.cat[open_row] != cat:
                continue
            if name >= 0 and cols.name[open_row] >= 0 and cols.name[open_row] != name:
                continue
            stack[i][1] = ts
            if i == len(stack) - 1:
                stack.pop()
            return

    def close_stack(self, stack: list[list], ts: int, dur: int | None, row: int) -> int | None:
        """Pop slices that ended by ``ts``; the row of the slice ``[ts, ts+dur)`` partially
        overlaps, or None. (slice_tracker.cc MaybeCloseStack, pops of the top included.)"""
        open_descendant = False
        i = len(stack) - 1
        while i >= 0:
            start, end, open_row = stack[i]
            if end is None:
                open_descendant = True
            elif open_descendant:
                if ts > end:
                    self.report("misplaced_end_event", row,
                                f"B slice(s) still open inside {self.describe(open_row)}, which ended before")
                    del stack[i:]
                    open_descendant = False
            elif end < ts or (end == ts and not (end == start and dur == 0)):
                stack.pop()
            elif dur is not None and ts < end < ts + dur:
                return open_row
            i -= 1
        return None

    def spill(self, row: int, over: int) -> None:
        self.spilled.add(row)
        if self.findings is None:
            return
        cols = self.cols
        note = f"overlaps {self.describe(over)}"
        if (cols.flags[row] | cols.flags[over]) & MERGED_THREAD:
            cause = "merged thread ids"
            note += "; an out-of-range tid put them on one thread"
        elif self.exact_spills is not None and row not in self.exact_spills:
            cause = "float rounding"
            note += f"; only Perfetto's float rounding of fractional µs makes them overlap: {REBASE_HINT}"
        else:
            cause = "overlap"
        self.report("slice_spill_overlapping_complete_event", row, note, cause)

    # -- flows --------------------------------------------------------------------------

    def flow_v1(self, kind: int, track: int, fid: int, row: int, ts: int) -> None:
        if kind == FLOW_END_NEXT:
            self.pending.setdefault(track, []).append((fid, row))
        elif kind == FLOW_START:
            self.flow_begin(track, fid, row, ts)
        else:
            self.flow_end(track, fid, row, "flow_step_without_start" if kind == FLOW_STEP else "flow_end_without_start",
                          ts)

    def flow_v2(self, track: int, fid: int, mode: int, row: int) -> None:
        if mode == V2_BEGIN:
            self.flow_begin(track, fid, row)
        else:
            self.flow_end(track, fid, row, "flow_step_without_start" if mode == V2_STEP else "flow_end_without_start")

    def flow_begin(self, track: int, fid: int, row: int, ts: int | None = None) -> None:
        if not self.stacks.get(track):
            self.report("flow_no_enclosing_slice", row, self.cols.flow_text(row))
        elif fid in self.started:
            self.report("flow_duplicate_id", row, self.cols.flow_text(row))
        else:
            self.started.add(fid)
            self.bound(track, row, ts)

    def flow_end(self, track: int, fid: int, row: int, unstarted: str, ts: int | None = None) -> None:
        if not self.stacks.get(track):
            self.report("flow_no_enclosing_slice", row, self.cols.flow_text(row))
        elif fid not in self.started:
            self.report(unstarted, row, self.cols.flow_text(row))
        else:
            self.bound(track, row, ts)

    def bound(self, track: int, row: int, ts: int | None) -> None:
        """A v1 flow event (``ts``; None: a v2 one) bound to the top of its stack: inside a slice
        that spilled since that top was pushed, it is drawn to the slice under that one."""
        spill = self.last_spill.get(track)
        if ts is not None and spill is not None and spill[0] <= ts < spill[1]:
            self.report("flow_bound_to_other_slice", row, f"inside {self.describe(spill[2])}, which Perfetto "
                        "moves to an overflow track: the arrow is drawn to the slice under it")

    def bind_pending(self, track: int) -> None:
        """A slice began: ``f`` events without bp bind to it (an unstarted one: from slice 0)."""
        for fid, row in self.pending.pop(track):
            if fid not in self.started:
                self.started.add(fid)
                self.report("flow_end_from_slice_0", row, self.cols.flow_text(row))

    # -- findings -----------------------------------------------------------------------

    def report(self, rule: str, row: int, note: str = "", cause: str | None = None) -> None:
        if self.findings is not None:
            cols = self.cols
            self.findings.add(rule, int(cols.ordinal[row]), cols.name_of(row), cols.ts_text(row), note, cause)

    def describe(self, row: int) -> str:
        name = self.cols.name_of(row)
        return f"{shorten(name) if name else None!r} (#{int(self.cols.ordinal[row])})"


class _FlowIds:
    """A set of Perfetto flow ids: v1 ids are dense (one byte each), v2 bind_ids are not.

    Both share one id space, so a small v2 bind_id collides with a v1 flow, as in Perfetto.
    """

    def __init__(self, dense: int) -> None:
        self.dense = bytearray(dense)
        self.sparse: set[int] = set()

    def __contains__(self, fid: int) -> bool:
        return bool(self.dense[fid]) if fid < len(self.dense) else fid in self.sparse

    def add(self, fid: int) -> None:
        if fid < len(self.dense):
            self.dense[fid] = 1
        else:
            self.sparse.add(fid)
