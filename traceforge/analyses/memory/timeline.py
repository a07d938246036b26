"""Memory timeline: allocated and reserved memory per device over time, from Kineto's
``[memory]`` instants (``torch.profiler.profile(profile_memory=True)``; ``scan(memory=True)``).

Each instant is one allocator event on one device (``Device Type`` 0: the host's memory,
``Device Id`` -1; 1: a CUDA device, ``Device Id`` its index) and carries that device's totals
after the event: ``Total Allocated`` (bytes in tensors) and ``Total Reserved`` (bytes the
caching allocator holds). A device's memory is a level that holds until its next event, so
its series is the events' totals at their exact ts, in the allocator's order (ts, then file
order). Where several events share a ts, the last one's totals are the level from that ts
on: a counter track has one value per ts (the tables below still read every event).

Per device (``memory_peaks``): events, the peak of each total (the largest value of any
event) with the ts of the first event that reached it, and the final value (the last
event's). Per profiler step (``memory_step_peaks``; ``steps.Steps``: the step's CPU range
[start, end), and memory events are CPU-side, so they go by their own ts): the level entering
the step (the last event before its start; -1 where there is none), the peak of the level over
the step (the larger of the entering level and the totals of the step's events; its ts is the
step's start where the entering level is the peak), and the level at the step's end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...columns.scan import TraceColumns
from ...columns.table import Table
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..structure.steps import Steps, profiler_steps

DEVICE_TYPES = {0: "cpu", 1: "cuda"}  # Kineto's Device Type
CPU_DEVICE_TYPE = 0
NONE = -1  # no level: no event before the step
SPILL_CHUNK = 1 << 18  # events read back from disk at a time (``spilled_memory``)


def device_type_name(code: int) -> str:
    return DEVICE_TYPES.get(code, f"type {code}")


@dataclass(frozen=True)
class DeviceMemory:
    """One device's events in the allocator's order (ts, then file order)."""

    device_type: int
    device: int
    track: int  # the (pid, tid) id of its first event (where its host process is)
    ts: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray

    def levels(self, consume: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ts, allocated, reserved) with one point per distinct ts: the last event's totals.
        ``consume``: made in place in this device's arrays (no copies; it is not read after)."""
        last = np.ones(len(self.ts), bool)
        last[:-1] = self.ts[1:] != self.ts[:-1]
        if not consume:
            return self.ts[last], self.allocated[last], self.reserved[last]
        if bool(last.all()):
            return self.ts, self.allocated, self.reserved
        return _kept_in_place(self.ts, last), _kept_in_place(self.allocated, last), _kept_in_place(self.reserved, last)


def _kept_in_place(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``values[keep]``, moved to the front of ``values`` a chunk at a time (a view of it):
    no second array of them all."""
    at = 0
    for lo in range(0, len(values), SPILL_CHUNK):
        part = values[lo:lo + SPILL_CHUNK][keep[lo:lo + SPILL_CHUNK]]
        values[at:at + len(part)] = part  # at <= lo: nothing not yet read is overwritten
        at += len(part)
    return values[:at]


def device_memory(cols: TraceColumns) -> Iterator[DeviceMemory]:
    """Each device's events, by device type then device id; one device's arrays at a time (read
    back from disk one device at a time where the scan left them there: ``spilled_memory``)."""
    spilled = cols.spilled_memory
    if spilled is None:
        yield from _devices(cols.memory)
        return
    keys = [unique(_device_key(chunk)) for chunk in spilled.chunks(SPILL_CHUNK)]
    spilled.keep_open()
    for k in unique(np.concatenate(keys)).tolist() if keys else []:
        # Only the columns a device's series reads, handed over whole: nothing here holds them after.
        yield _one_device(spilled.select(lambda chunk, k=k: _device_key(chunk) == k, SPILL_CHUNK, _DEVICE_FIELDS))


def _device_key(m: Table) -> np.ndarray:
    """(device type, device) as one int64 per event, in that order."""
    return m.device_type.astype(np.int64) << 32 | (m.device.astype(np.int64) & 0xFFFFFFFF)


def _devices(m: Table) -> Iterator[DeviceMemory]:
    """``device_memory`` of the events of ``m`` (in memory)."""
    if not len(m):
        return
    key = _device_key(m)
    for k in unique(key).tolist():
        rows = np.flatnonzero(key == k)
        yield _one_device(Table({f: m.cols[f][rows] for f in _DEVICE_FIELDS}))


_DEVICE_FIELDS = ("ordinal", "ts", "track", "device_type", "device", "allocated", "reserved")


def _one_device(m: Table) -> DeviceMemory:
    """The events of ``m`` (all of one device, ``_DEVICE_FIELDS``) in the allocator's order.
    Consumes ``m``: each column goes once sorted (where the file has them in that order, as
    Kineto writes them, the columns are taken as they are: no order and no copies)."""
    ts, ordinal = m.ts, m.ordinal
    rise = ts[1:] > ts[:-1]
    rise |= (ts[1:] == ts[:-1]) & (ordinal[1:] > ordinal[:-1])
    order = None if bool(rise.all()) else np.lexsort((ordinal, ts))
    del rise, ts, ordinal
    first = 0 if order is None else int(order[0])
    device_type, device, track = int(m.device_type[first]), int(m.device[first]), int(m.track[first])

    def column(name: str) -> np.ndarray:
        values = m.cols.pop(name)
        return values if order is None else values[order]

    ts = column("ts").astype(np.int64, copy=False)
    allocated = column("allocated")
    reserved = column("reserved")
    m.cols.clear()
    return DeviceMemory(device_type, device, track, ts, allocated, reserved)


def memory_timeline(cols: TraceColumns) -> pd.DataFrame:
    """The levels: device_type ("cpu", "cuda"), device, ts (ns), allocated, reserved (bytes),
    one row per (device, distinct ts)."""
    parts = [(d, *d.levels()) for d in device_memory(cols)]
    sizes = [len(ts) for _, ts, _, _ in parts]
    empty = np.zeros(0, np.int64)
    return pd.DataFrame({
        "device_type": np.repeat(np.array([device_type_name(d.device_type) for d, *_ in parts], object), sizes),
        "device": np.repeat(np.array([d.device for d, *_ in parts], np.int64), sizes),
        "ts": np.concatenate([p[1] for p in parts] or [empty]),
        "allocated": np.concatenate([p[2] for p in parts] or [empty]),
        "reserved": np.concatenate([p[3] for p in parts] or [empty]),
    })


def _peak(ts: np.ndarray, values: np.ndarray) -> tuple[int, int]:
    at = int(np.argmax(values))  # the first event at the largest value
    return int(values[at]), int(ts[at])


def memory_peaks(cols: TraceColumns) -> pd.DataFrame:
    """Per device: device_type, device, events, first_ts, last_ts, peak_allocated,
    peak_allocated_ts, final_allocated, peak_reserved, peak_reserved_ts, final_reserved."""
    rows = []
    for d in device_memory(cols):
        peak_a, peak_a_ts = _peak(d.ts, d.allocated)
        peak_r, peak_r_ts = _peak(d.ts, d.reserved)
        rows.append({
            "device_type": device_type_name(d.device_type), "device": d.device, "events": len(d.ts),
            "first_ts": int(d.ts[0]), "last_ts": int(d.ts[-1]),
            "peak_allocated": peak_a, "peak_allocated_ts": peak_a_ts, "final_allocated": int(d.allocated[-1]),
            "peak_reserved": peak_r, "peak_reserved_ts": peak_r_ts, "final_reserved": int(d.reserved[-1]),
        })
    return pd.DataFrame(rows, columns=_PEAK_COLUMNS)


_PEAK_COLUMNS = ["device_type", "device", "events", "first_ts", "last_ts", "peak_allocated", "peak_allocated_ts",
                 "final_allocated", "peak_reserved", "peak_reserved_ts", "final_reserved"]
_STEP_COLUMNS = ["device_type", "device", "step", "step_start", "step_end", "events", "start_allocated",
                 "peak_allocated", "peak_allocated_ts", "end_allocated", "start_reserved", "peak_reserved",
                 "peak_reserved_ts", "end_reserved"]


def memory_step_peaks(cols: TraceColumns, steps: Steps | None = None) -> pd.DataFrame:
    """Per (device, profiler step): device_type, device, step, step_start, step_end, events, and
    for allocated and reserved the level entering the step, its peak over the step with its ts,
    and the level at the step's end (see the module docstring; -1: no level yet). One numpy
    reduction per step."""
    steps = profiler_steps(cols) if steps is None else steps
    rows = []
    for d in device_memory(cols):
        lo = np.searchsorted(d.ts, steps.start, side="left")
        hi = np.searchsorted(d.ts, steps.end, side="left")
        for i in range(len(steps)):
            row = {"device_type": device_type_name(d.device_type), "device": d.device, "step": int(steps.number[i]),
                   "step_start": int(steps.start[i]), "step_end": int(steps.end[i]), "events": int(hi[i] - lo[i])}
            for name, values in (("allocated", d.allocated), ("reserved", d.reserved)):
                row.update(_step_level(name, d.ts, values, int(lo[i]), int(hi[i]), int(steps.start[i])))
            rows.append(row)
    return pd.DataFrame(rows, columns=_STEP_COLUMNS)


def _step_level(name: str, ts: np.ndarray, values: np.ndarray, lo: int, hi: int, start: int) -> dict[str, int]:
    entering = int(values[lo - 1]) if lo > 0 else NONE
    peak, peak_ts = entering, start if lo > 0 else NONE
    if hi > lo:
        inside, inside_ts = _peak(ts[lo:hi], values[lo:hi])
        if inside > peak:
            peak, peak_ts = inside, inside_ts
    return {f"start_{name}": entering, f"peak_{name}": peak, f"peak_{name}_ts": peak_ts,
            f"end_{name}": int(values[hi - 1]) if hi > 0 else NONE}
