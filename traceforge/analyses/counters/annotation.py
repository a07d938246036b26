"""``annotate --counters``: counters as args on the measured events, rate tracks per GPU.

Every matched kernel (or, in range-profiler traces without kernels, launch call) gets one
arg ``counters``: the source, the pairing status, the raw counters and the derived
metrics (finite values only). Per device, two counter tracks sum the rates of the
measured kernels running at each moment: ``Achieved TFLOP/s`` and ``DRAM GB/s``, held as
integers of 1e-6 so running sums are exact. Kernels without counters add nothing to them.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...errors import UsageError
from ...inject import CounterTrack, Injections
from ...lazy_pandas import pd
from ...scan import TraceColumns
from ..series import net_steps
from .derived import DERIVED
from .tables import NO_COUNTERS, CounterTables, counter_tables, has_counters

if TYPE_CHECKING:
    from ...annotate import AnnotateContext

ARG_KEY = "counters"
RATE_SCALE = 1_000_000  # counter values in integer units of 1e-6 (TFLOP/s or GB/s)
_TRACKS = (("flops", "Achieved", "TFLOP/s", 1e-3), ("dram_bytes", "DRAM", "GB/s", 1.0))  # per ns -> unit


def add_counter_options(group: argparse._ActionsContainer) -> None:
    """Options shared by ``annotate --counters`` and ``traceforge counters``."""
    group.add_argument("--ncu", metavar="FILE", help="Nsight Compute CSV (ncu --csv --page raw) to join to the "
                       "trace's kernels by stream order, kernel name, grid and block")
    group.add_argument("--ncu-skip", metavar="N", type=int, default=0,
                       help="trace kernels (in launch order) before ncu's first row: the --launch-skip given to ncu")
    group.add_argument("--peak-dram-gbps", metavar="GBPS", type=float,
                       help="peak DRAM bandwidth for efficiency (default: the GPU's spec sheet, else the best kernel)")
    group.add_argument("--peak-tensor-pct", metavar="PCT", type=float,
                       help="peak tensor-pipe utilisation %% for efficiency (default: 100, or 50 if no kernel exceeds 50)")


def counter_options(options: dict) -> dict:
    """Checked keyword arguments for ``counter_tables`` from CLI-style options."""
    ncu = options.get("ncu")
    if ncu is not None and not Path(ncu).is_file():
        raise UsageError(f"--ncu {ncu}: no such file")
    skip = options.get("ncu_skip") or 0
    if skip < 0:
        raise UsageError(f"--ncu-skip must be >= 0, not {skip}")
    for name in ("peak_dram_gbps", "peak_tensor_pct"):
        value = options.get(name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number, not {value}")
    return {"ncu": ncu, "ncu_skip": skip, "peak_dram_gbps": options.get("peak_dram_gbps"),
            "peak_tensor_pct": options.get("peak_tensor_pct")}


def _json_value(value: object) -> object | None:
    """A finite number as int when integral, else float; None for NaN/inf/empty."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            return None
        return int(v) if v.is_integer() and abs(v) < 2 ** 63 else v
    return value if isinstance(value, str) and value else None


def counter_args(tables: CounterTables) -> dict[int, dict]:
    """``{event ordinal: {"counters": {...}}}`` for every measurement tied to an event."""
    k = tables.kernels
    if k.empty:
        return {}
    fields = ["source", "status", "kernel", *tables.counters, *DERIVED]
    fields = [f for f in fields if f in k]
    patches: dict[int, dict] = {}
    tied = k[k["event"] >= 0]
    for event, kind, *values in zip(tied["event"].tolist(), tied["event_kind"].tolist(), *(tied[f].tolist() for f in fields)):
        body = patches.setdefault(int(event), {ARG_KEY: {}})[ARG_KEY]
        for name, value in zip(fields, values):
            value = _json_value(value)
            if value is None or (name == "kernel" and kind != "launch"):  # a kernel event has its own name
                continue
            body["match" if name == "status" else name] = value
    return patches


def rate_tracks(cols: TraceColumns, tables: CounterTables) -> list[CounterTrack]:
    """Per device: summed achieved TFLOP/s and DRAM GB/s of the measured kernels over time."""
    k = tables.kernels
    if k.empty:
        return []
    k = k[(k["gpu_row"] >= 0) & (k["kernel_dur_ns"] > 0)].drop_duplicates("gpu_row", keep="last")
    tracks = []
    for column, name, key, per_ns in _TRACKS:
        rows = k[k[column].notna()]
        if rows.empty:
            continue
        dur = rows["kernel_dur_ns"].to_numpy()
        rate = np.rint(rows[column].to_numpy(float) * (per_ns * RATE_SCALE) / dur).astype(np.int64)
        ts = rows["kernel_ts_ns"].to_numpy()
        device = rows["device"].to_numpy()
        (dev,), at, value = net_steps([np.concatenate([device, device])], np.concatenate([ts, ts + dur]),
                                      np.concatenate([rate, -rate]))
        for d in np.unique(dev).tolist():
            sel = dev == d
            tracks.append(CounterTrack(pid=cols.gpu_pid(int(d)), name=name, key=key, ts=at[sel],
                                       values=value[sel], decimals=6))
    return tracks


def build_counters(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """The ``counters`` analysis (see the module docstring); a no-op without counters."""
    options = counter_options(ctx.options)
    if not has_counters(cols, options["ncu"]):  # no tables to make (nor pandas to import)
        return Injections(summary=[f"counters: nothing to add ({NO_COUNTERS})"])
    tables = counter_tables(cols, **options)
    if tables.kernels.empty:
        return Injections(summary=[f"counters: nothing to add ({'; '.join(tables.summary)})"])
    patches = counter_args(tables)
    tracks = rate_tracks(cols, tables)
    points = sum(len(t.ts) for t in tracks)
    n = len(tables.problems)
    problems = f", {n:,} problem{'s' if n != 1 else ''} (`traceforge counters` lists them)" if n else ""
    kinds = pd.Series(tables.kernels.loc[tables.kernels["event"] >= 0, "event_kind"]).value_counts()
    on = " and ".join(f"{n:,} {kind} events" for kind, n in kinds.items()) or "no events"
    return Injections(list(tracks), [f"counters: args on {on}, {len(tracks)} counter tracks, {points:,} points{problems}"],
                      patches)
