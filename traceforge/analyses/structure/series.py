"""Step series: +/- changes at timestamps into one running value per distinct timestamp."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...util.distinct import unique


def net_steps(keys: list[np.ndarray], ts: np.ndarray, delta: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Group by ``keys``; within a group, net all ``delta`` at equal ``ts`` (int64, exact).

    Returns (keys per point, ts per point, running total per point), one point per
    distinct (keys, ts), sorted by keys then ts.
    """
    if len(ts) == 0:
        return [k[:0] for k in keys], ts[:0], delta[:0]
    order = np.lexsort((ts, *reversed(keys)))
    keys = [k[order] for k in keys]
    ts = ts[order]
    delta = delta[order]
    del order
    new_group = np.zeros(len(ts), bool)
    new_group[0] = True
    for k in keys:
        new_group[1:] |= k[1:] != k[:-1]
    new_point = new_group.copy()
    new_point[1:] |= ts[1:] != ts[:-1]
    starts = np.flatnonzero(new_point)
    net = np.add.reduceat(delta, starts)
    total = np.cumsum(net)
    group_start = new_group[starts]
    group_of_point = np.cumsum(group_start) - 1
    first = np.flatnonzero(group_start)
    carried = np.concatenate([[0], total[first[1:] - 1]]).astype(total.dtype)
    return [k[starts] for k in keys], ts[starts], total - carried[group_of_point]


def running_count(times: np.ndarray, ups: int) -> tuple[np.ndarray, np.ndarray]:
    """One group's +1 at each of ``times[:ups]`` and -1 at each of ``times[ups:]``, netted per
    distinct ts: (ts, running total), sorted by ts. Same points as ``net_steps``; the
    totals are int32 below 2**31 changes (tracks keep them: half the bytes).

    ``times`` (int64) is used as the sort buffer and overwritten: with the sign packed in
    its lowest bit, one in-place sort replaces an argsort and the reordered copies.
    """
    if not len(times):
        return times[:0], np.zeros(0, np.int64)
    lo, hi = int(times.min()), int(times.max())
    if hi - lo >= 2**62:  # no room for the sign bit (absurd spans only)
        delta = np.repeat(np.array([1, -1], np.int32), [ups, len(times) - ups])
        _, ts, total = net_steps([], times, delta)
        return ts, total
    times -= lo
    times <<= 1
    times[:ups] |= 1
    times.sort(kind="stable")  # two runs, each nearly in order (calls and ops in file order): timsort merges them
    # Then RUN_CHUNK sorted times at a time: the running total carried, the last point of each distinct ts
    # moved to the front of ``times`` (the ts returned are a view of it: no second array of them).
    dtype = np.int32 if len(times) < 2**31 else np.int64
    values, at, carry = [], 0, 0
    for start in range(0, len(times), RUN_CHUNK):
        part = times[start:start + RUN_CHUNK]
        step = np.empty(len(part), np.int8)
        np.bitwise_and(part, 1, out=step, casting="unsafe")
        step <<= 1
        step -= 1
        total = np.cumsum(step, dtype=dtype)
        del step
        total += carry
        carry = int(total[-1])
        key = part >> 1
        last = np.empty(len(part), bool)
        np.not_equal(key[1:], key[:-1], out=last[:-1])
        following = start + len(part)
        last[-1] = following == len(times) or int(times[following]) >> 1 != int(key[-1])
        values.append(total[last])
        del total
        kept = key[last]
        kept += lo
        times[at:at + len(kept)] = kept  # at <= start: no time not yet read is overwritten
        at += len(kept)
        del part, key, last, kept
    return times[:at], np.concatenate(values)


RUN_CHUNK = 1 << 18  # sorted times ``running_count`` nets at a time


def stream_groups(device: np.ndarray, stream: np.ndarray, where: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """(device, stream, mask) for each distinct pair among the rows in ``where``, sorted.

    Masks, not a sort by group: one group's working set at a time, a byte per row.
    """
    for d in unique(device[where]).tolist():
        on_device = device == d
        on_device &= where
        for s in unique(stream[on_device]).tolist():
            mask = stream == s
            mask &= on_device
            yield d, s, mask
