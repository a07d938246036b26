"""Nesting one thread's CPU ops and launch calls: the fallback of ``_stacks.c``.

The items are sorted by numpy; the walk over them is sequential by nature (an item pops the
open ops that do not hold it, which decides what later items find), so it is a Python loop
over lists.

A stack of open ops travels between ``nest_sorted`` calls as the C lays it out: 16 bytes an
op, its end (int64), its id (int32) and 4 bytes of padding (zeroed here).
"""

from __future__ import annotations

import numpy as np

from ._buffers import as_index, contiguous, items, writable, writable_buffer

_OPEN = np.dtype([("end", "=i8"), ("row", "=i4"), ("pad", "V4")])  # the C's ``Open``
_INT32_MAX = 2**31 - 1


def _walk(start: list[int], stop: list[int], opens: list, ids: list[int], ends: list[int],
          rows: list[int]) -> list[int]:
    """Each item's holder: the id of the innermost open op holding ``[start, stop)`` (-1 none).

    Before an item, the open ops that do not hold it (it does not start inside, or ends after
    them) are popped off the stack (``ends``, ``rows``; changed in place); an op of positive
    duration is pushed after it is placed."""
    holders = []
    for s, e, o, r in zip(start, stop, opens, ids):
        while ends and not (s < ends[-1] and e <= ends[-1]):
            ends.pop()
            rows.pop()
        holders.append(rows[-1] if rows else -1)
        if o and e > s:
            ends.append(e)
            rows.append(r)
    return holders


def _durations(view: memoryview, itemsize: int) -> np.ndarray:
    """A duration column (int32 or int64), as int64."""
    return items(view, np.int64 if itemsize == 8 else np.int32).astype(np.int64)


def nest_thread(ops: object, calls: object, op_ts: object, op_dur: object, op_dur_itemsize: object,
                call_ts: object, call_dur: object, call_dur_itemsize: object, parent: object) -> None:
    """Set ``parent[item]`` to the row of the innermost op holding it, for one thread's ops
    (int32 rows of op_ts/op_dur) and launch calls (int32 rows of call_ts/call_dur). Items are
    sorted by start, longer first (durations clamped at 0), ops before calls, file order; an
    item's rows in ``parent`` are its op row, or ``len(op_ts)`` + its call row. Items held by
    no op leave ``parent`` as it is."""
    op_size, call_size = as_index(op_dur_itemsize), as_index(call_dur_itemsize)
    if op_size not in (4, 8) or call_size not in (4, 8):
        raise ValueError("durations must be int32 or int64")
    sizes = (4, 4, 8, op_size, 8, call_size, 4)
    views = []
    for k, (obj, size) in enumerate(zip((ops, calls, op_ts, op_dur, call_ts, call_dur, parent), sizes)):
        view = writable_buffer(obj) if k == 6 else contiguous(obj)
        if len(view) % size:
            raise ValueError("an array of the wrong item size")
        views.append(view)
    ops_v, calls_v, op_ts_v, op_dur_v, call_ts_v, call_dur_v, parent_v = views
    n_cpu, n_launch = len(op_ts_v) // 8, len(call_ts_v) // 8
    if (len(op_dur_v) // op_size != n_cpu or len(call_dur_v) // call_size != n_launch
            or len(parent_v) // 4 != n_cpu + n_launch or n_cpu + n_launch > _INT32_MAX):
        raise ValueError("ts and durations must match, parent hold a row (int32) per op and call")
    op_rows, call_rows = items(ops_v, np.int32), items(calls_v, np.int32)
    if ((op_rows < 0) | (op_rows >= n_cpu)).any() or ((call_rows < 0) | (call_rows >= n_launch)).any():
        raise IndexError("an op or call row is out of range")
    ts = np.concatenate((items(op_ts_v, np.int64)[op_rows], items(call_ts_v, np.int64)[call_rows]))
    dur = np.concatenate((_durations(op_dur_v, op_size)[op_rows], _durations(call_dur_v, call_size)[call_rows]))
    dur = np.maximum(dur, 0)
    order = np.lexsort((np.negative(dur), ts))  # stable: ops before calls, file order
    rows = np.concatenate((op_rows.astype(np.int64), call_rows.astype(np.int64) + n_cpu))[order]
    opens = order < len(op_rows)
    start = ts[order]
    holders = np.array(_walk(start.tolist(), (start + dur[order]).tolist(), opens.tolist(), rows.tolist(), [], []),
                       np.int64)
    held = holders >= 0
    items(parent_v, np.int32)[rows[held]] = holders[held]


def nest_sorted(start: object, stop: object, opens: object, ids: object, holder: object, stack: object) -> bytes:
    """Walk one thread's next items, already in nesting order (``[start, stop)`` int64; ``opens``
    a byte, non-zero for an op; ``ids`` int32) from the open ops ``stack`` left by the items
    before them (b'' for none): set ``holder[i]`` (int32) to the id of the innermost op holding
    item i (-1 none), and return the open ops after the last item, for the next call."""
    start_v, stop_v, opens_v, ids_v = (contiguous(x) for x in (start, stop, opens, ids))
    holder_v = writable(holder, 5)
    carried_v = contiguous(stack)
    n = len(start_v) // 8
    if (len(stop_v) != n * 8 or len(opens_v) != n or len(ids_v) != n * 4 or len(holder_v) != n * 4
            or len(carried_v) % _OPEN.itemsize):
        raise ValueError("start/stop: int64, opens: a byte, ids/holder: int32 per item; stack: as returned")
    carried = np.frombuffer(carried_v, _OPEN)
    ends, rows = carried["end"].tolist(), carried["row"].tolist()
    held = _walk(items(start_v, np.int64).tolist(), items(stop_v, np.int64).tolist(),
                 np.frombuffer(opens_v, np.uint8).tolist(), items(ids_v, np.int32).tolist(), ends, rows)
    items(holder_v, np.int32)[:] = held
    out = np.zeros(len(ends), _OPEN)
    out["end"], out["row"] = ends, rows
    return out.tobytes()
