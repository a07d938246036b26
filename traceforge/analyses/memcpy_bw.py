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

import numpy as np
import pandas as pd

from ..inject import CounterTrack
from ..scan import MEMCPY, MEMSET, TraceColumns
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
    rows, kinds = copy_rows(cols)
    gpu = cols.gpu
    dur = gpu.dur[rows]
    rate = (gpu.bytes[rows] * RATE_SCALE + dur // 2) // dur  # bytes/ns in 1e-6 GB/s, rounded
    kind_codes, kind_names = pd.factorize(kinds) if len(kinds) else (np.zeros(0, np.int64), [])
    device = np.concatenate([gpu.device[rows]] * 2)
    kind = np.concatenate([kind_codes] * 2).astype(np.int64)
    ts = np.concatenate([gpu.ts[rows], gpu.ts[rows] + dur])
    delta = np.concatenate([rate, -rate])
    (device, kind), ts, units = net_steps([device, kind], ts, delta)
    return pd.DataFrame({
        "device": device,
        "kind": np.asarray(list(kind_names) or [""], dtype=object)[kind],
        "ts": ts,
        "gbps": units / RATE_SCALE,
        "rate_units": units,
    })


def memcpy_bw_tracks(cols: TraceColumns) -> list[CounterTrack]:
    """One counter track per (device, kind): ``Memcpy HtoD GB/s``, ``Memset GB/s``."""
    df = memcpy_bandwidth(cols)
    tracks = []
    for (device, kind), g in df.groupby(["device", "kind"], sort=True):
        name = "Memset" if kind == "Memset" else f"Memcpy {kind}"
        tracks.append(CounterTrack(
            pid=cols.gpu_pid(int(device)), name=name, key="GB/s",
            ts=g["ts"].to_numpy(), values=g["rate_units"].to_numpy(), decimals=6,
        ))
    return tracks
