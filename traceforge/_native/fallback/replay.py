"""The replay of ``check``: slices and flows in Perfetto's order, the fallback of ``_replay.c``.

Perfetto's importer keeps a stack of open slices per thread track and binds flow events to
its top; which slices spill, which B events end early and which arrows are dropped depends
on that order alone, so the walk is sequential: a Python loop, one step per event. The
rules follow trace_processor's slice_tracker.cc and flow_tracker.cc, including where they
pop the top of the stack rather than the slice they looked at. A ``Walker`` keeps, between
windows, what Perfetto keeps: each thread's stack, the flow ends waiting for a slice, the
flow ids that have a source, and the number given to each v1 flow key when first met.
"""

from __future__ import annotations

import numpy as np

from ._buffers import as_index, contiguous

# row kinds
SLICE, _BEGIN, _END, _FLOW_START, _FLOW_STEP, _FLOW_END, _FLOW_END_NEXT = range(7)
_V2_BEGIN, _V2_STEP = 0, 1  # v2 flow modes (2: an end)
# what is found
(SPILL, MAX_DEPTH_EXCEEDED, MISPLACED_END, NO_ENCLOSING_SLICE, DUPLICATE_ID, END_WITHOUT_START,
 STEP_WITHOUT_START, END_FROM_SLICE_0, BOUND_UNDER_SPILL) = range(9)
MAX_DEPTH = 512
RECORD = 5  # int64s per finding: rule, ordinal, other ordinal, other's name, flags

_COLUMNS = ("kind", "ts", "dur", "track", "key", "fid", "v2_mode", "name", "cat", "flags", "ordinal")
_UINT64 = (1 << 64) - 1
_INT32_MAX = 2**31 - 1


# A slice on a thread's stack, what later rules and findings read of it: a list (one is made per
# slice: cheaper than an object) of these fields. _E_END is start + dur exactly, 0 while _E_OPEN
# (a B whose E has not come).
_E_START, _E_END, _E_OPEN, _E_ORDINAL, _E_NAME, _E_CAT, _E_FLAGS = range(7)
Entry = list


class Walker:
    """Perfetto's state between windows; empty when made (the C's capsule)."""

    def __init__(self, n_tracks: int, n_keys: int, slices_only: bool):
        self.n_tracks, self.n_keys, self.slices_only = n_tracks, n_keys, slices_only
        self.stacks: list[list[Entry]] = [[] for _ in range(n_tracks)]
        # per track: whether its stack holds X slices only (no B since it was last empty)
        self.x_only: list[bool] = [True] * n_tracks
        self.pending: list[list[tuple[int, int]]] = [[] for _ in range(n_tracks)]  # (flow id, ordinal)
        # per track: the last slice that spilled since a slice was pushed there (an entry), or None
        self.spilled: list[Entry | None] = [None] * n_tracks
        self.flow_of_key: dict[int, int] = {}  # v1 key -> Perfetto's flow id
        self.started: set[int] = set()  # flow ids (uint64) that have a source slice
        self.out: list[int] = []

    # -- findings

    def record(self, rule: int, ordinal: int, flags: int, other: Entry | None) -> None:
        """A finding about the event ``ordinal``; ``other``: the stack entry it concerns."""
        if other is None:
            self.out += (rule, ordinal, -1, -1, flags)
        else:
            self.out += (rule, ordinal, other[_E_ORDINAL], other[_E_NAME], flags | other[_E_FLAGS])

    # -- slices

    def close_stack(self, stack: list[Entry], ts: int, has_dur: bool, dur: int, ordinal: int, flags: int,
                    x_only: bool) -> Entry | None:
        """Pops slices that ended by ``ts``; the entry the slice [ts, ts + dur) partially
        overlaps, or None (slice_tracker.cc MaybeCloseStack). ``has_dur`` False: a B or an E.

        Every entry is looked at, top to bottom, as the C does, except on a stack of X slices
        only (``x_only``): an X is pushed only where it ends by the top's end, so the ends never
        rise going up such a stack, and below an entry that holds the slice and ends after
        ``ts`` every entry does the same: nothing below it is popped or overlapped."""
        open_descendant = False
        for i in range(len(stack) - 1, -1, -1):
            e = stack[i]
            end = e[_E_END]
            if e[_E_OPEN]:
                open_descendant = True
            elif open_descendant:
                if ts > end:
                    self.record(MISPLACED_END, ordinal, flags, e)
                    del stack[i:]
                    open_descendant = False
            elif end < ts or (end == ts and not (end == e[_E_START] and has_dur and dur == 0)):
                stack.pop()  # the top, whichever slice was looked at
            elif has_dur and ts < end < ts + dur:
                return e
            elif x_only and end > ts:
                break
        return None

    def start_slice(self, track: int, has_dur: bool, ts: int, dur: int, ordinal: int, name: int, cat: int,
                    flags: int) -> None:
        """An X (``has_dur``) or a B: pushed unless it spills or the stack is full."""
        stack = self.stacks[track]
        dur = dur if has_dur else 0
        if stack:
            top_end = stack[-1][_E_END]
            x_only = self.x_only[track]
            # the top alone decides on a stack of X slices only when it holds the slice (see close_stack)
            if not (x_only and top_end > ts and top_end >= ts + dur):
                over = self.close_stack(stack, ts, has_dur, dur, ordinal, flags, x_only)
                if over is not None:
                    self.record(SPILL, ordinal, flags, over)
                    self.spilled[track] = [ts, ts + dur, False, ordinal, name, cat, flags]
                    return
        if not stack:
            self.x_only[track] = True
        if len(stack) >= MAX_DEPTH:
            self.record(MAX_DEPTH_EXCEEDED, ordinal, flags, stack[-1])
            return
        if not has_dur:
            self.x_only[track] = False
        stack.append([ts, ts + dur if has_dur else 0, not has_dur, ordinal, name, cat, flags])
        self.spilled[track] = None
        if self.pending[track]:
            self.bind_pending(track)

    def bind_pending(self, track: int) -> None:
        """The flow ends waiting on ``track`` bind to its new slice, starting their flows."""
        for fid, ordinal in self.pending[track]:
            if fid not in self.started:
                self.started.add(fid)
                self.record(END_FROM_SLICE_0, ordinal, 0, None)
        self.pending[track] = []

    def end_slice(self, track: int, ts: int, ordinal: int, name: int, cat: int, flags: int) -> None:
        """An E: closes the innermost open B with its name (and cat, if given)."""
        stack = self.stacks[track]
        if not stack:
            return
        self.close_stack(stack, ts, False, 0, ordinal, flags, self.x_only[track])
        for i in range(len(stack) - 1, -1, -1):
            e = stack[i]
            if not e[_E_OPEN] or (cat >= 0 and e[_E_CAT] != cat):
                continue
            if name >= 0 and e[_E_NAME] >= 0 and e[_E_NAME] != name:
                continue
            e[_E_END], e[_E_OPEN] = ts, False
            if i == len(stack) - 1:
                stack.pop()
            return

    # -- flows

    def bound(self, track: int, ts: int, ordinal: int, flags: int) -> None:
        """A v1 flow event bound to the top of its stack: inside a slice that spilled after that
        top was pushed, the arrow is drawn to the slice under it."""
        spilled = self.spilled[track]
        if spilled is not None and spilled[_E_START] <= ts < spilled[_E_END]:
            self.record(BOUND_UNDER_SPILL, ordinal, flags, spilled)

    def flow_begin(self, track: int, fid: int, ordinal: int, flags: int, ts: int | None = None) -> None:
        """``ts``: a v1 flow event's (a v2 flow binds to its own slice)."""
        if not self.stacks[track]:
            self.record(NO_ENCLOSING_SLICE, ordinal, flags, None)
        elif fid in self.started:
            self.record(DUPLICATE_ID, ordinal, flags, None)
        else:
            self.started.add(fid)
            if ts is not None:
                self.bound(track, ts, ordinal, flags)

    def flow_end(self, track: int, fid: int, ordinal: int, flags: int, unstarted: int, ts: int | None = None) -> None:
        if not self.stacks[track]:
            self.record(NO_ENCLOSING_SLICE, ordinal, flags, None)
        elif fid not in self.started:
            self.record(unstarted, ordinal, flags, None)
        elif ts is not None:
            self.bound(track, ts, ordinal, flags)

    def flow_v1(self, kind: int, track: int, key: int, ts: int, ordinal: int, flags: int) -> None:
        """A v1 flow event (s, t, f; f without bp=e waits for the track's next slice)."""
        fid = self.flow_of_key.setdefault(key, len(self.flow_of_key))
        if kind == _FLOW_END_NEXT:
            self.pending[track].append((fid, ordinal))
        elif kind == _FLOW_START:
            self.flow_begin(track, fid, ordinal, flags, ts)
        else:
            self.flow_end(track, fid, ordinal, flags, STEP_WITHOUT_START if kind == _FLOW_STEP else END_WITHOUT_START,
                          ts)

    def walk(self, rows: dict[str, list[int]]) -> None:
        """The events ``rows`` (columns in Perfetto's order), one step each."""
        slices_only = self.slices_only
        for kind, ts, dur, track, key, fid, mode, name, cat, flags, ordinal in zip(*(rows[c] for c in _COLUMNS)):
            if kind >= _FLOW_START:
                if not slices_only:
                    self.flow_v1(kind, track, key, ts, ordinal, flags)
                continue
            if kind == _END:
                self.end_slice(track, ts, ordinal, name, cat, flags)
            else:
                self.start_slice(track, kind == SLICE, ts, dur, ordinal, name, cat, flags)
            if slices_only or mode < 0:
                continue
            fid &= _UINT64
            if mode == _V2_BEGIN:
                self.flow_begin(track, fid, ordinal, flags)
            else:
                self.flow_end(track, fid, ordinal, flags, STEP_WITHOUT_START if mode == _V2_STEP else END_WITHOUT_START)


def walker(n_tracks: object, n_keys: object, slices_only: object) -> Walker:
    """A walker: Perfetto's state, empty, for ``walk``."""
    n_tracks, n_keys, slices_only = as_index(n_tracks), as_index(n_keys), bool(slices_only)
    if n_tracks < 0 or n_keys < 0 or n_keys > _INT32_MAX:
        raise ValueError("walker: counts out of range")
    return Walker(n_tracks, n_keys, slices_only)


def _column(obj: object, rows: int | None) -> np.ndarray:
    """A column as the C reads it: any 1-D buffer of 8-byte items, strided too, as int64."""
    view = memoryview(obj)
    if view.ndim != 1 or view.itemsize != 8 or (rows is not None and view.shape[0] != rows):
        raise ValueError("walk: columns must be int64, one value per row")
    return np.asarray(view).view(np.int64)


def _check_rows(w: Walker, order: np.ndarray, columns: dict[str, np.ndarray], n_rows: int) -> None:
    """ValueError for the first row of ``order`` out of range, or whose track or flow key is."""
    row_ok = (order >= 0) & (order < n_rows)
    at = np.where(row_ok, order, 0)
    track = columns["track"][at] if n_rows else np.zeros(len(order), np.int64)
    track_bad = row_ok & ((track < 0) | (track >= w.n_tracks))
    key_bad = np.zeros(len(order), bool)
    if not w.slices_only and n_rows:
        key = columns["key"][at]
        key_bad = row_ok & ~track_bad & (columns["kind"][at] >= _FLOW_START) & ((key < 0) | (key >= w.n_keys))
    bad = ~row_ok | track_bad | key_bad
    if bad.any():
        j = int(np.argmax(bad))
        what = "a row" if not row_ok[j] else "a track" if track_bad[j] else "a flow key"
        raise ValueError(f"walk: {what} out of range")


def walk(walker: object, order: object, *columns: object) -> bytes:
    """``walk(walker, order, kind, ts, dur, track, key, fid, v2_mode, name, cat, flags, ordinal)``:
    int64 (rule, ordinal, other ordinal, other's name, flags) records, in the order found.
    Columns are int64, one row per event of the window; ``order``: its rows in Perfetto's order."""
    if len(columns) != len(_COLUMNS):
        raise TypeError(f"walk expected {len(_COLUMNS) + 2} arguments, got {len(columns) + 2}")
    if not isinstance(walker, Walker):
        raise ValueError("PyCapsule_GetPointer called with invalid PyCapsule object")
    order_view = contiguous(order)
    cols: dict[str, np.ndarray] = {}
    n_rows = None
    for name, obj in zip(_COLUMNS, columns):
        cols[name] = _column(obj, n_rows)
        n_rows = len(cols[name])
    if len(order_view) % 8:
        raise ValueError("walk: order must be int64")
    rows = np.frombuffer(order_view, np.int64)
    _check_rows(walker, rows, cols, n_rows or 0)
    walker.out = []
    walked = {name: column[rows] for name, column in cols.items()}
    walked["kind"] = walked["kind"].astype(np.int32)  # the C reads a kind as an int
    walker.walk({name: column.tolist() for name, column in walked.items()})
    return np.array(walker.out, np.int64).tobytes()
