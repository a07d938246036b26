"""Memcpy/memset bandwidth: the summed rate of the copies active at each moment.

Per (device, kind) with kind the direction in the copy's name (HtoD, DtoH, DtoD, PtoP, HtoH,
DtoA, ...; Other if none) or Memset. A copy moves ``bytes`` over ``[ts, ts + dur)``, so its
rate is bytes/dur (bytes per ns = GB/s).
Older Kineto writes a copy's ``dur`` truncated to whole µs, while its own ``memory bandwidth
(GB/s)`` arg comes from the duration in ns: bytes over the truncated dur comes out up to ~2x
too high on short copies. So where a copy's dur is a whole number of µs (a multiple of 1000
ns), its rate is Kineto's arg (kept by the scan, ``TraceColumns.copy_rates``) where the copy has
one. Deciding per copy is safe on every trace: where the dur was truncated, the arg is the
only exact figure; where the dur truly is whole, the arg equals bytes/dur up to its printed
digits. The copy still spans [ts, ts + dur) as written (its exact end is not in the trace).
Rates are held as integers of 1e-6 GB/s, so the running sum is exact: it is 0 exactly
when nothing is active and never exceeds the active copies' sum (HTA's float cumsum and
unstable sort give residues and spikes). Zero-duration copies move nothing over time and
are left out rather than divided by zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from ...columns.scan import MEMCPY, MEMSET, RATE_SCALE, TraceColumns
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..structure.series import net_steps

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


def copies_without_bytes(cols: TraceColumns) -> int:
    """The copies and memsets that have no ``bytes`` arg (every copy of a ROCm trace): they
    have no rate, so no bandwidth."""
    gpu = cols.gpu
    return int(np.count_nonzero(((gpu.kind == MEMCPY) | (gpu.kind == MEMSET)) & (gpu.bytes < 0)))


def left_out_note(cols: TraceColumns) -> str | None:
    """Why copies have no bandwidth (said, never silent), or None where every copy has its bytes."""
    missing = copies_without_bytes(cols)
    if not missing:
        return None
    return (f"{missing:,} copies have no 'bytes' arg and no bandwidth (ROCm/HIP traces do not record "
            "the size of a copy)")


def copy_rates(cols: TraceColumns, rows: np.ndarray) -> np.ndarray:
    """The rate of each copy ``rows`` (``copy_rows``) in integer units of 1e-6 GB/s: Kineto's arg
    where the scan kept it (dur a whole µs), else bytes/dur rounded to the nearest unit."""
    gpu = cols.gpu
    dur = gpu.dur[rows].astype(np.int64)
    rate = (gpu.bytes[rows].astype(np.int64) * RATE_SCALE + dur // 2) // dur
    kept = cols.copy_rates
    if len(kept) and len(rows):
        at = np.minimum(np.searchsorted(kept.ordinal, gpu.ordinal[rows]), len(kept) - 1)
        has = kept.ordinal[at] == gpu.ordinal[rows]
        rate[has] = kept.rate[at[has]]
    return rate


def memcpy_bandwidth(cols: TraceColumns) -> pd.DataFrame:
    """One row per change point: device, kind, ts (ns), gbps (float), rate_units (int, 1e-6 GB/s).
    Copies without ``bytes`` are left out, said in ``df.attrs["message"]`` (``left_out_note``)."""
    groups = list(bandwidth_steps(cols))
    sizes = [len(ts) for _, _, ts, _ in groups]
    units = np.concatenate([u for _, _, _, u in groups] or [np.zeros(0, np.int64)])
    df = pd.DataFrame({
        "device": np.repeat(np.array([d for d, _, _, _ in groups], cols.gpu.device.dtype), sizes),
        "kind": np.repeat(np.array([k for _, k, _, _ in groups], dtype=object), sizes),
        "ts": np.concatenate([ts for _, _, ts, _ in groups] or [np.zeros(0, np.int64)]),
        "gbps": units / RATE_SCALE,
        "rate_units": units,
    })
    note = left_out_note(cols)
    if note is not None:
        df.attrs["message"] = note
    return df


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
    for d in unique(device).tolist():
        on_device = device == d
        for k in unique(kind_codes[on_device]).tolist():
            mine = rows[on_device & (kind_codes == k)]
            ts, dur = gpu.ts[mine], gpu.dur[mine]
            rate = copy_rates(cols, mine)
            _, at, units = net_steps([], np.concatenate([ts, ts + dur]), np.concatenate([rate, -rate]))
            del mine, ts, dur, rate  # not held while the caller has the group
            yield d, kind_names[k], at, units

