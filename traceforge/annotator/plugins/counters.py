"""``annotate --counters``: counters as args on the measured events, rate tracks per GPU.

Every matched kernel (or, in range-profiler traces without kernels, launch call) gets one
arg ``counters``: the source, the pairing status, the raw counters and the derived
metrics (finite values only). Per device, two counter tracks sum the rates of the
measured kernels running at each moment: ``Achieved TFLOP/s`` and ``DRAM GB/s``, held as
integers of 1e-6 so running sums are exact. Kernels without counters add nothing to them.
"""

from __future__ import annotations

import math

import numpy as np

from ...analyses.counters.derived import DERIVED
from ...analyses.counters.tables import (
    NO_COUNTERS,
    CounterTables,
    checked_counter_options,
    counter_tables,
    has_counters,
)
from ...analyses.launches.calls import STREAM_LAUNCH_APIS
from ...analyses.structure.series import net_steps
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack, Injections
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..plugin import Analysis, AnnotateContext, Option

ARG_KEY = "counters"
RATE_SCALE = 1_000_000  # counter values in integer units of 1e-6 (TFLOP/s or GB/s)
_TRACKS = (("flops", "Achieved", "TFLOP/s", 1e-3), ("dram_bytes", "DRAM", "GB/s", 1.0))  # per ns -> unit


COUNTER_OPTIONS = (
    Option("ncu", "Nsight Compute CSV (ncu --csv --page raw) to join to the trace's kernels by stream order, "
           "kernel name, grid and block", metavar="FILE"),
    Option("ncu_skip", "trace kernels (in launch order) before ncu's first row: the --launch-skip given to ncu",
           default=0, parse=int, metavar="N"),
    Option("peak_dram_gbps", "peak DRAM bandwidth for efficiency (default: the GPU's spec sheet, else the best "
           "kernel)", parse=float, metavar="GBPS"),
    Option("peak_tensor_pct", "peak tensor-pipe utilisation %% for efficiency (default: 100, or 50 if no kernel "
           "exceeds 50)", parse=float, metavar="PCT"),
)


def counter_options(options: dict) -> dict:
    """Checked keyword arguments for ``counter_tables`` from the run's options."""
    return checked_counter_options(**{name: options.get(name) for name in _OPTION_NAMES})


_OPTION_NAMES = tuple(option.name for option in COUNTER_OPTIONS)


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
        for d in unique(dev).tolist():
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


ANALYSIS = Analysis(
    "counters", "hardware counters (the trace's CUPTI range-profiler events, --ncu CSV) and derived "
    "metrics as a `counters` arg on the kernels (or launch calls) they measured, and achieved "
    "TFLOP/s and DRAM GB/s counter tracks per GPU",
    build_counters, order=50, options=COUNTER_OPTIONS, patches_args=True,
    # --ncu orders kernels by their launch calls, whatever the API; range-profiler events pair
    # with stream launches.
    launch_apis=lambda options: None if options.get("ncu") else STREAM_LAUNCH_APIS,
    # with counters to place, their tables read call stacks
    args_without_cpu_ops=lambda cols, options: not has_counters(cols, options.get("ncu")),
)
