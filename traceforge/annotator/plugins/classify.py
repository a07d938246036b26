"""``annotate --classify``: a ``category`` (and ``stage``) arg on every GPU op, and per-device
utilisation tracks saying which category dominates each moment.

Utilisation of category c on a device = the share (%) of the device's running GPU ops
that are of category c, sampled at every change: with one stream busy it is 100 % for the
running op's category, with a gemm and an NCCL kernel overlapping it is 50 % each, and 0
everywhere when the device is idle. One counter track per (device, category), e.g.
``GPU 0 gemm busy``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import partial

import numpy as np

from ...analyses.gpu_time.busy import concatenated
from ...analyses.gpu_time.classify import Labels, classify_columns, label_ops
from ...analyses.gpu_time.rules import DEFAULT_RULES, PRESETS, load_rules
from ...analyses.structure.series import running_count
from ...columns.scan import TraceColumns
from ...columns.table import Table
from ...emit.tracks import CounterTrack, Injections
from ...io.write.jsontext import ArgColumns
from ...util.distinct import unique
from ...util.search import searchsorted
from ..plugin import Analysis, AnnotateContext, Option

PERMILLE = 1000  # shares as integer tenths of a percent, written with one decimal


UTILISATION_CHUNK = 1 << 18  # sample times of a device whose shares are made at a time


def _utilisation_steps(cols: TraceColumns, labels: Labels) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(device, category id, ts, permille) per (device, category), sorted by device then id.

    One device, then one of its categories, then ``UTILISATION_CHUNK`` of the device's sample
    times at a time: the working set is the device's times and totals, and the category's
    sorted starts and ends.
    """
    gpu = cols.gpu
    for d in unique(gpu.device).tolist():
        on_device = gpu.device == d
        times, total = running_count(_starts_and_ends(gpu, on_device), int(np.count_nonzero(on_device)))
        total = total.astype(np.int32, copy=False)  # at most the device's ops
        wide = int(total.max(initial=0)) * (2 * PERMILLE + 1) >= 2**31  # int32 holds the sums below
        for c in unique(labels.category[on_device]).tolist():
            mine = labels.category == c
            mine &= on_device
            starts, ends = _sorted_edges(gpu, mine)
            del mine
            parts, last = [], None
            for lo in range(0, len(times), UTILISATION_CHUNK):
                part = slice(lo, lo + UTILISATION_CHUNK)
                permille = _running_at(starts, ends, times[part])
                if wide:
                    permille = permille.astype(np.int64)
                permille *= 2 * PERMILLE
                permille += total[part]  # the count is never above the device's, so 0 when it is idle
                denominator = 2 * total[part]
                np.maximum(denominator, 1, out=denominator)
                permille //= denominator
                del denominator
                keep = np.ones(len(permille), bool)
                keep[1:] = permille[1:] != permille[:-1]
                if last is not None:
                    keep[0] = permille[0] != last
                last = permille[-1]
                parts.append((times[part][keep], permille[keep].astype(np.int16)))  # 0..1000
                del permille, keep
            del starts, ends
            step_ts, step_permille = concatenated(parts, (times[:0], np.zeros(0, np.int16)))
            yield d, c, step_ts, step_permille


def _sorted_edges(gpu: Table, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The starts and the ends (start + duration, at least the start) of the GPU ops in ``rows``, each sorted."""
    starts = gpu.ts[rows].astype(np.int64, copy=False)
    ends = np.maximum(gpu.dur[rows], 0).astype(np.int64)
    ends += starts
    starts.sort(kind="stable")  # nearly in order (file order): timsort
    ends.sort(kind="stable")
    return starts, ends


def _running_at(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """How many of the ops ([starts, ends), each sorted) run at each of ``times`` (sorted): those
    started at or before it less those ended at or before it (int32: at most the device's ops)."""
    count = searchsorted(starts, times, side="right")
    count -= searchsorted(ends, times, side="right")
    return count.astype(np.int32)


def _starts_and_ends(gpu: Table, rows: np.ndarray) -> np.ndarray:
    """Starts then ends (start + duration, at least the start) of the GPU ops in ``rows``."""
    n = int(np.count_nonzero(rows))
    times = np.empty(2 * n, np.int64)
    times[:n] = gpu.ts[rows]
    ends = times[n:]
    ends[:] = gpu.dur[rows]
    np.maximum(ends, 0, out=ends)
    ends += times[:n]
    return times


def utilisation_tracks(cols: TraceColumns, labels: Labels) -> list[CounterTrack]:
    """One counter track per (device, category): ``GPU 0 gemm busy`` in %, in the GPU's process."""
    return [
        CounterTrack(pid=cols.gpu_pid(d), name=f"GPU {d} {labels.categories[c]} busy", key="%",
                     ts=ts, values=permille, decimals=1)
        for d, c, ts, permille in _utilisation_steps(cols, labels)
    ]


def category_injections(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """The ``category``/``stage`` args and the utilisation tracks for the rule set of ``--rules``."""
    rules = load_rules(ctx.options["rules"])
    labels = label_ops(cols, rules)
    labels = replace(labels, category=labels.category.astype(np.min_scalar_type(len(labels.categories))),
                     stage=labels.stage.astype(np.min_scalar_type(len(labels.stages))))  # a byte per op, not 8
    values = {"category": labels.category}
    decode = {"category": partial(np.take, np.asarray(labels.categories, dtype=object))}
    if labels.has_stages:
        values["stage"] = labels.stage
        stages = np.asarray([stage or None for stage in labels.stages], dtype=object)  # None: no arg
        decode["stage"] = partial(np.take, stages)
    patches = ArgColumns(cols.gpu.ordinal, values, decode)

    def counter_tracks(cols: TraceColumns) -> Injections:
        tracks = utilisation_tracks(cols, labels)
        points = sum(len(t.ts) for t in tracks)
        summary = f"classify ({rules.name}): category arg on {len(patches):,} GPU ops, " \
                  f"{len(tracks)} utilisation counter tracks, {points:,} points"
        return Injections(list(tracks), [summary])

    return Injections(arg_columns=[patches], later=counter_tracks)


ANALYSIS = Analysis(
    "classify", "kernel classification: a category (and stage) arg on every GPU op by the rules of "
    "--rules, one utilisation counter track per (GPU, category): share of running ops in percent",
    category_injections, order=40,
    options=(Option("rules", f"classification rules for --classify: a preset ({', '.join(PRESETS)}) "
                    "or a JSON/TOML rules file (default: default)", default=DEFAULT_RULES, metavar="PRESET|FILE"),),
    patches_args=True, launch_apis=frozenset(), args_without_cpu_ops=lambda cols, options: True,
    table=lambda cols, options: classify_columns(cols, load_rules(options["rules"])).table,
)
