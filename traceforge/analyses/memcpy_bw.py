"""Memcpy/memset bandwidth: the summed rate of the copies active at each moment.

Per (device, kind) with kind the direction in the copy's name (HtoD, DtoH, DtoD, PtoP, HtoH,
DtoA, ...; Other if none) or Memset. A copy moves ``bytes`` over ``[ts, ts + dur)``, so its
rate is bytes/dur (bytes per ns = GB/s).
Rates are held as integers of 1e-6 GB/s, so the running sum is exact: it is 0 exactly
when nothing is active and never exceeds the active copies' sum (HTA's float cumsum and
unstable sort give residues and spikes). Zero-duration copies move nothing over time and
are left out rather than divided by zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from ..columns.scan import MEMCPY, MEMSET, TraceColumns
from ..util.lazy_pandas import pd
from .series import net_steps

RATE_SCALE = 1_000_000  # integer units of 1e-6 GB/s
_KIND_RE = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH|DtoA|AtoD|AtoH|HtoA|AtoA)\b")


def copy_kind(name: str) -> str:
    """Kineto's memcpy names say the direction (``Memcpy HtoD (Pinned -> Device)``)."""
    m = _KIND_RE.search(name)
    if m:
        return m.group(1)
    if "memset" in name.lower():
        return "Memset"
    return "Other"


def copy_rows(cols: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """Rows of GPU copies/memsets with bytes and positive duration, and their kind names."""
    gpu = cols.gpu
    rows = np.flatnonzero(((gpu.kind == MEMCPY) | (gpu.kind == MEMSET)) & (gpu.bytes >= 0) & (gpu.dur > 0))
    kinds_by_name = np.array([copy_kind(n) for n in cols.names] or [""], dtype=object)
    kinds = kinds_by_name[gpu.name[rows]]
    kinds[gpu.kind[rows] == MEMSET] = "Memset"
    return rows, kinds


def memcpy_bandwidth(cols: TraceColumns) -> pd.DataFrame:
    """One row per change point: device, kind, ts (ns), gbps (float), rate_units (int, 1e-6 GB/s)."""
    groups = list(bandwidth_steps(cols))
    sizes = [len(ts) for _, _, ts, _ in groups]
    units = np.concatenate([u for _, _, _, u in groups] or [np.zeros(0, np.int64)])
    return pd.DataFrame({
        "device": np.repeat(np.array([d for d, _, _, _ in groups], cols.gpu.device.dtype), sizes),
        "kind": np.repeat(np.array([k for _, k, _, _ in groups], dtype=object), sizes),
        "ts": np.concatenate([ts for _, _, ts, _ in groups] or [np.zeros(0, np.int64)]),
        "gbps": units / RATE_SCALE,
        "rate_units": units,
    })


def bandwidth_steps(cols: TraceColumns) -> Iterator[tuple[int, str, np.ndarray, np.ndarray]]:
    """(device, kind, ts, rate units) per (device, kind), by device then kind in order of appearance.

    One group at a time: its working set, not every copy's, is what the sort holds.
    """
    rows, kinds = copy_rows(cols)
    kind_names = list(dict.fromkeys(kinds.tolist()))  # a handful, in order of appearance (no pandas to import)
    kind_codes = np.zeros(len(kinds), np.int64)
    for code, name in enumerate(kind_names):
        kind_codes[kinds == name] = code
    del kinds
    gpu = cols.gpu
    device = gpu.device[rows]
    for d in np.unique(device).tolist():
        on_device = device == d
        for k in np.unique(kind_codes[on_device]).tolist():
            mine = rows[on_device & (kind_codes == k)]
            ts, dur = gpu.ts[mine], gpu.dur[mine]
            rate = (gpu.bytes[mine].astype(np.int64) * RATE_SCALE + dur // 2) // dur  # bytes/ns in 1e-6 GB/s, rounded
            _, at, units = net_steps([], np.concatenate([ts, ts + dur]), np.concatenate([rate, -rate]))
            del mine, ts, dur, rate  # not held while the caller has the group
            yield d, kind_names[k], at, units

