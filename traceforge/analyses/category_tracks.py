"""``annotate --classify``: a ``category`` (and ``stage``) arg on every GPU op, and per-device
utilisation tracks saying which category dominates each moment.

Utilisation of category c on a device = the share (%) of the device's running GPU ops
that are of category c, sampled at every change: with one stream busy it is 100 % for the
running op's category, with a gemm and an NCCL kernel overlapping it is 50 % each, and 0
everywhere when the device is idle. One counter track per (device, category), e.g.
``GPU 0 gemm busy``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..inject import ArgColumns, CounterTrack, Injections
from ..scan import TraceColumns
from .classify import Labels, label_ops
from .rules import PRESETS, load_rules
from .series import net_steps

if TYPE_CHECKING:
    from ..annotate import AnnotateContext

PERMILLE = 1000  # shares as integer tenths of a percent, written with one decimal


def utilisation(cols: TraceColumns, labels: Labels) -> pd.DataFrame:
    """Change points per (device, category): device, category, ts (ns), permille (int, 0..1000)."""
    gpu = cols.gpu
    end = gpu.ts + np.maximum(gpu.dur, 0)
    ts = np.concatenate([gpu.ts, end])
    delta = np.concatenate([np.ones(len(gpu), np.int64), -np.ones(len(gpu), np.int64)])
    device = np.concatenate([gpu.device] * 2)
    category = np.concatenate([labels.category] * 2)
    (dev_pts,), dev_ts, running = net_steps([device], ts, delta)
    (cat_dev, cat_cat), cat_ts, cat_running = net_steps([device, category], ts, delta)
    # net_steps sorts by its keys: each device's, and each (device, category)'s, points are one slice
    dev_bounds = {int(dev_pts[a]): (a, b) for a, b in _runs(dev_pts)}
    frames = []
    for a, b in _runs(cat_dev, cat_cat):
        d, c = int(cat_dev[a]), int(cat_cat[a])
        lo, hi = dev_bounds[d]
        times, total = dev_ts[lo:hi], running[lo:hi]
        # every change of the category is also a change point of its device
        idx = np.searchsorted(cat_ts[a:b], times, side="right") - 1
        count = np.where(idx >= 0, cat_running[a:b][np.maximum(idx, 0)], 0)
        permille = np.where(total > 0, (2 * PERMILLE * count + total) // np.maximum(2 * total, 1), 0)
        keep = np.ones(len(times), bool)
        keep[1:] = permille[1:] != permille[:-1]
        frames.append(pd.DataFrame({"device": d, "category": labels.categories[c],
                                    "ts": times[keep], "permille": permille[keep]}))
    if not frames:
        return pd.DataFrame({"device": np.zeros(0, np.int64), "category": np.zeros(0, object),
                             "ts": np.zeros(0, np.int64), "permille": np.zeros(0, np.int64)})
    return pd.concat(frames, ignore_index=True)


def _runs(*keys: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal keys."""
    n = len(keys[0])
    change = np.zeros(n, bool)
    if n:
        change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    stops = np.append(starts[1:], n)
    return list(zip(starts.tolist(), stops.tolist()))


def utilisation_tracks(cols: TraceColumns, labels: Labels) -> list[CounterTrack]:
    """One counter track per (device, category): ``GPU 0 gemm busy`` in %, in the GPU's process."""
    df = utilisation(cols, labels)
    return [
        CounterTrack(pid=cols.gpu_pid(int(device)), name=f"GPU {device} {category} busy", key="%",
                     ts=g["ts"].to_numpy(np.int64), values=g["permille"].to_numpy(np.int64), decimals=1)
        for (device, category), g in df.groupby(["device", "category"], sort=False)
    ]


def category_injections(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """The ``category``/``stage`` args and the utilisation tracks for the rule set of ``--rules``."""
    rules = load_rules(ctx.options.get("rules") or "default")
    labels = label_ops(cols, rules)
    values = {"category": np.asarray(labels.categories, dtype=object)[labels.category]}
    if labels.has_stages:
        stages = np.asarray([stage or None for stage in labels.stages], dtype=object)  # None: no arg
        values["stage"] = stages[labels.stage]
    patches = ArgColumns(cols.gpu.ordinal, values)
    tracks = utilisation_tracks(cols, labels)
    points = sum(len(t.ts) for t in tracks)
    summary = f"classify ({rules.name}): category arg on {len(patches):,} GPU ops, " \
              f"{len(tracks)} utilisation counter tracks, {points:,} points"
    return Injections(list(tracks), [summary], arg_columns=[patches])


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--rules", default="default", metavar="PRESET|FILE",
                       help=f"classification rules for --classify: a preset ({', '.join(PRESETS)}) "
                            "or a JSON/TOML rules file (default: default)")
