"""``annotate --roofline``: what each GPU kernel achieves against its GPU's limits
(``analyses.roofline``). Args on each modelled kernel: ``flops``, ``bytes``, ``intensity``
(FLOP/byte), ``tflops`` and ``gbps`` (achieved), and where the GPU's limits are known ``bound``
(compute or memory), ``roofline_ns`` and ``roofline_pct``; per GPU, counter tracks of the achieved
TFLOP/s, GB/s and % of roofline of the kernels running at each moment (summed where they overlap).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from ...analyses.roofline.limits import GpuLimits, parse_limits
from ...analyses.roofline.model import BOUNDS, Roofline, roofline
from ...analyses.roofline.tables import RooflineTables, roofline_tables
from ...analyses.roofline.work import COLLECTIVE, reads_shapes
from ...analyses.structure.series import net_steps
from ...analyses.structure.stacks import stack_ops
from ...columns.scan import TraceColumns
from ...emit.tracks import CounterTrack, Injections
from ...io.read.gpu_limits import read_gpu_limits_file
from ...io.write.jsontext import ArgColumns, FixedPoint
from ..plugin import Analysis, AnnotateContext, Figure, Option

KERNEL_ARGS = ("flops", "bytes", "intensity", "tflops", "gbps", "bound", "roofline_ns", "roofline_pct")  # on kernels
COUNTER = "Roofline"  # the tracks: "Roofline TFLOP/s", "Roofline GB/s", "Roofline %" in each GPU's process
COUNTERS = (("TFLOP/s", "tflops", 3), ("GB/s", "gbps", 3), ("%", "roofline_pct", 1))


def user_limits(value: str | Mapping[str, GpuLimits] | None) -> Mapping[str, GpuLimits] | None:
    """``--gpu-limits``: a file name (read and checked here), limits already made, or None."""
    if value is None or isinstance(value, Mapping):
        return value
    return parse_limits(read_gpu_limits_file(value), value)


def kernel_rates(cols: TraceColumns, r: Roofline) -> dict[str, np.ndarray]:
    """Per modelled kernel with a duration and bytes: its gpu row and achieved rates, as ints
    scaled for their decimals (TFLOP/s and GB/s x 1000, % of roofline x 10; -1 where no roofline)."""
    dur = np.maximum(cols.gpu.dur[r.rows], 0).astype(np.int64)
    keep = np.flatnonzero((dur > 0) & (r.bytes > 0))
    d = dur[keep]
    roof = r.roof_ns[keep]
    return {
        "at": keep, "row": r.rows[keep],
        "tflops": r.flops[keep] // d,  # FLOP per ns = GFLOP/s: TFLOP/s with 3 decimals
        "gbps": (r.bytes[keep].astype(np.float64) * 1000 // d).astype(np.int64),
        "roofline_pct": np.where(roof >= 0, (roof.astype(np.float64) * 1000 // d).astype(np.int64), -1),
    }


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    r = roofline(cols, user_limits(ctx.options["gpu_limits"]))
    covered = f"{100 * r.coverage:.1f}% of kernel time modelled ({len(r.unmodelled_rows):,} kernels not)"
    notes = "".join(f"; {note}" for note in r.notes)
    figures = {"roofline_coverage": round(100 * r.coverage, 1)}
    if not len(r.rows):
        return Injections(summary=[f"roofline: nothing added, {covered}{notes}"], figures=figures)
    rates = kernel_rates(cols, r)
    has_bytes = r.bytes > 0
    ordinal = cols.gpu.ordinal
    intensity = (r.flops[has_bytes].astype(np.float64) * 1000 // r.bytes[has_bytes]).astype(np.int64)
    columns = [
        ArgColumns(ordinal[r.rows[has_bytes]], {"flops": r.flops[has_bytes], "bytes": r.bytes[has_bytes],
                                                "intensity": intensity}, {"intensity": FixedPoint(3)}),
        ArgColumns(ordinal[rates["row"]], {"tflops": rates["tflops"], "gbps": rates["gbps"]},
                   {"tflops": FixedPoint(3), "gbps": FixedPoint(3)}),
    ]
    known = np.flatnonzero(r.roof_ns >= 0)
    if len(known):
        columns.append(ArgColumns(ordinal[r.rows[known]], {
            "bound": r.bound[known], "roofline_ns": r.roof_ns[known],
        }, {"bound": partial(np.take, np.asarray(BOUNDS, dtype=object))}))
        pct = rates["roofline_pct"] >= 0
        columns.append(ArgColumns(ordinal[rates["row"][pct]], {"roofline_pct": rates["roofline_pct"][pct]},
                                  {"roofline_pct": FixedPoint(1)}))

    def tracks(cols: TraceColumns) -> Injections:
        made = counter_tracks(cols, rates)
        points = sum(len(t.ts) for t in made)
        return Injections(list(made), [f"roofline: args on {len(columns[0]):,} kernels, {covered}, {len(made)} "
                                        f"counter tracks, {points:,} points{notes}"], figures=figures)

    return Injections(arg_columns=columns, later=tracks)


def counter_tracks(cols: TraceColumns, rates: dict[str, np.ndarray]) -> list[CounterTrack]:
    """Per GPU and figure: the sum over the kernels running at each moment (a step up at each
    kernel's start, down at its end)."""
    gpu, rows = cols.gpu, rates["row"]
    start = gpu.ts[rows].astype(np.int64)
    end = start + np.maximum(gpu.dur[rows], 0)
    device = gpu.device[rows].astype(np.int64)
    out = []
    for title, key, decimals in COUNTERS:
        value = rates[key]
        mine = value >= 0
        if not mine.any():
            continue
        v = value[mine]
        keys, ts, total = net_steps([np.concatenate([device[mine]] * 2)], np.concatenate([start[mine], end[mine]]),
                                    np.concatenate([v, -v]))
        for d in np.unique(keys[0]).tolist():
            on = keys[0] == d
            out.append(CounterTrack(pid=cols.gpu_pid(d), name=COUNTER, key=title, ts=ts[on], values=total[on],
                                    decimals=decimals))
    return out


def collectives(names: list[str]) -> np.ndarray:
    """``stack_marks``: beyond the launch calls' stacks, DDP's collectives (their sizes give a fused
    optimizer step's parameters where its shapes are missing: ``model``)."""
    return np.array([n == COLLECTIVE for n in names], bool)


def tables(cols: TraceColumns, options: Mapping[str, Any]) -> RooflineTables:
    """The roofline tables (``analyses.roofline.tables``) of columns with shapes; CPU ops on disk
    (a loaded ``Trace``'s) are read back first."""
    if cols.spilled_cpu_ops is not None:
        cols = stack_ops(cols, collectives(cols.names))
    return roofline_tables(cols, roofline(cols, user_limits(options.get("gpu_limits"))))


ANALYSIS = Analysis(
    "roofline", "roofline: FLOPs and bytes of each kernel from its launching op's shapes (record_shapes=True); "
    "args flops/bytes/intensity/tflops/gbps/bound/roofline_pct on each modelled kernel, and per GPU counter "
    "tracks of achieved TFLOP/s, GB/s and percent of roofline (docs/roofline.md)",
    build, order=55,
    options=(Option("gpu_limits", "a JSON file of GPU limits that overrides or adds to the built-in table "
                    "(docs/roofline.md)", metavar="FILE"),),
    patches_args=True, launch_apis=frozenset(), stack_marks=lambda options: collectives,
    op_shapes=reads_shapes, figures=(Figure("roofline_coverage", "roofline coverage %"),),
    table=lambda cols, options: tables(cols, options).ops, result=tables,
    # Not in --all yet: it keeps the CPU ops' call stacks and shapes for every kernel's args, which
    # costs --all more time and memory than the speed rule allows (docs/benchmarks.md, Roofline).
    in_all=False,
)
