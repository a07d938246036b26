"""HTA's GPU kernel breakdown (``get_gpu_kernel_breakdown``): GPU time per kernel type, the time
types run at once, and each type's top kernels with an "Others" row.

A kernel type is a category of a rule set (default the ``hta`` preset: COMMUNICATION
``^nccl.*Kernel``, MEMORY ``^Memcpy|^Memset|^dma``, else COMPUTATION); every GPU op (kernel,
copy, memset) has one. Per device, in exact ns (a negative ``dur`` counts as 0):

- ``kernel_types``: each type's ops are merged into busy intervals (touching intervals join).
  Every instant at which at least one type is busy goes to the set of types busy then: one
  row per set, named by its types joined by " overlapping " (``COMPUTATION overlapping
  COMMUNICATION``), in ``TYPE_ORDER`` (HTA's order), then the rule set's other categories in
  rule order. A type's own row is thus the time it ran alone. The rows add up to the device's
  busy time over the included types; ``share_pct`` is of that sum. Sets that never occur, or
  only for 0 ns, have no row.
- ``kernel_breakdown``: per type, per GPU op name: count, total, mean, min, max and sample
  std of the durations, and ``share_pct`` of the type's summed durations. Names are ranked by
  total time (then name); all but the first ``top`` are folded into one ``Others`` row whose
  figures are over the folded ops themselves (``names``: how many names it folds; 1 for a
  kernel's own row). ``duration_ratio`` adds HTA's second cut, see ``folded``.

Which ops take part: all of them by default (every step, ops without a launch call); pass
``ops`` (a mask of ``cols.gpu`` rows) to choose, e.g. ``steps.hta_ops(cols)`` for HTA's choice.
``types`` keeps only some types (HTA's ``include_memory_kernels=False`` leaves MEMORY out).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ...columns.names import names_at
from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from .busy import merge_intervals
from .classify import label_ops
from .rules import RuleSet, load_rules

HTA_RULES = "hta"
TYPE_ORDER = ("COMPUTATION", "COMMUNICATION", "MEMORY")  # HTA's bit order, which names its overlap rows
OVERLAPPING = " overlapping "
TOP = 10  # HTA's num_kernels
OTHERS = "Others"
TYPE_COLUMNS = ["device", "kernel_type", "time_ns", "share_pct"]
KERNEL_COLUMNS = ["device", "kernel_type", "name", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns",
                  "share_pct", "names"]
_MAX_TYPES = 62  # a set of types is a bit mask in an int64


def type_order(rules: RuleSet) -> list[str]:
    """The types in the order overlap rows name them: ``TYPE_ORDER``, then the rest in rule order."""
    categories = rules.categories
    return [t for t in TYPE_ORDER if t in categories] + [c for c in categories if c not in TYPE_ORDER]


class _Typed:
    """The ops taking part, each with its type's place in ``type_order``."""

    def __init__(self, cols: TraceColumns, rules: str | RuleSet, ops: np.ndarray | None,
                 types: Collection[str] | None):
        rules = load_rules(rules)
        self.order = type_order(rules)
        if types is not None:
            unknown = [t for t in types if t not in self.order]
            if unknown:
                raise UsageError(f"kernel types: no type {unknown[0]!r} in rules {rules.name} "
                                 f"(there are {', '.join(self.order)})")
            self.order = [t for t in self.order if t in set(types)]
        if len(self.order) > _MAX_TYPES:
            raise UsageError(f"kernel types: at most {_MAX_TYPES} types, rules {rules.name} have {len(self.order)}")
        labels = label_ops(cols, rules)
        place_of_category = np.full(len(labels.categories), -1, np.int64)
        for i, category in enumerate(labels.categories):
            if category in self.order:
                place_of_category[i] = self.order.index(category)
        place = place_of_category[labels.category]
        keep = place >= 0 if ops is None else (place >= 0) & ops
        self.rows = np.flatnonzero(keep)
        self.place = place[self.rows]
        gpu = cols.gpu
        self.device = gpu.device[self.rows].astype(np.int64)
        self.ts = gpu.ts[self.rows].astype(np.int64)
        self.dur = np.maximum(gpu.dur[self.rows], 0).astype(np.int64)
        self.name = gpu.name[self.rows]


def kernel_types(cols: TraceColumns, rules: str | RuleSet = HTA_RULES, *, ops: np.ndarray | None = None,
                 types: Collection[str] | None = None) -> pd.DataFrame:
    """device, kernel_type, time_ns, share_pct: each set of types busy at once, per device,
    longest first (see the module docstring)."""
    typed = _Typed(cols, rules, ops, types)
    parts = []
    for device in unique(typed.device).tolist():
        at = np.flatnonzero(typed.device == device)
        masks, time = _set_times(typed.place[at], typed.ts[at], typed.ts[at] + typed.dur[at], len(typed.order))
        total = int(time.sum())
        keep = time > 0
        part = pd.DataFrame({
            "device": np.full(int(keep.sum()), device, np.int64),
            "kernel_type": [_set_name(int(m), typed.order) for m in masks[keep].tolist()],
            "time_ns": time[keep],
            "share_pct": 100.0 * time[keep] / total if total else 0.0,
        })
        parts.append(part.sort_values(["time_ns", "kernel_type"], ascending=[False, True], kind="stable"))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "kernel_type" else np.int64) for c in TYPE_COLUMNS})
    return pd.concat(parts, ignore_index=True)[TYPE_COLUMNS]


def _set_times(place: np.ndarray, ts: np.ndarray, end: np.ndarray, n_types: int) -> tuple[np.ndarray, np.ndarray]:
    """(bit mask of a set of types, ns during which exactly that set was busy), for each set met."""
    times, deltas = [], []
    for t in range(n_types):
        rows = np.flatnonzero(place == t)
        if not len(rows):
            continue
        rows = rows[np.argsort(ts[rows], kind="stable")]
        starts, ends, _ = merge_intervals(ts[rows], end[rows])
        times += [starts, ends]
        deltas += [np.full(len(starts), 1 << t, np.int64), np.full(len(ends), -(1 << t), np.int64)]
    if not times:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    when, delta = np.concatenate(times), np.concatenate(deltas)
    order = np.argsort(when, kind="stable")
    when, delta = when[order], delta[order]
    first = np.flatnonzero(np.concatenate([[True], when[1:] != when[:-1]]))
    running = np.cumsum(np.add.reduceat(delta, first))  # the set busy from each distinct time to the next
    length = np.diff(when[first])
    masks, group = np.unique(running[:-1], return_inverse=True)
    time = np.zeros(len(masks), np.int64)
    np.add.at(time, group, length)
    busy = masks != 0
    return masks[busy], time[busy]


def _set_name(mask: int, order: list[str]) -> str:
    return OVERLAPPING.join(t for i, t in enumerate(order) if mask >> i & 1)


def kernel_breakdown(cols: TraceColumns, rules: str | RuleSet = HTA_RULES, *, top: int = TOP,
                     duration_ratio: float | None = None, ops: np.ndarray | None = None,
                     types: Collection[str] | None = None) -> pd.DataFrame:
    """device, kernel_type, name, count, total_ns, mean_ns, min_ns, max_ns, std_ns, share_pct,
    names: per device and type (in ``type_order``), the ``top`` kernels by total time and an
    ``Others`` row (see the module docstring and ``folded``)."""
    if top < 0:
        raise UsageError(f"kernel breakdown: top must be 0 or more, not {top}")
    if duration_ratio is not None and not 0 <= duration_ratio <= 1:
        raise UsageError(f"kernel breakdown: duration_ratio must be between 0 and 1, not {duration_ratio}")
    typed = _Typed(cols, rules, ops, types)
    frame = pd.DataFrame({"device": typed.device, "place": typed.place, "name": typed.name, "dur": typed.dur})
    per_name = _stats(frame, ["device", "place", "name"])
    per_name = per_name.sort_values(["device", "place", "total_ns", "name"], ascending=[True, True, False, True],
                                    kind="stable").reset_index(drop=True)
    fold = np.zeros(len(per_name), bool)
    for _, group in per_name.groupby(["device", "place"], sort=False).indices.items():
        fold[group] = folded(per_name["total_ns"].to_numpy()[group], top, duration_ratio)
    folded_names = per_name.loc[fold, ["device", "place", "name"]].assign(_fold=True)
    frame = frame.merge(folded_names, on=["device", "place", "name"], how="left")
    frame["name"] = frame["name"].where(frame["_fold"].isna(), -1).astype(np.int64)  # -1: Others
    out = _stats(frame.drop(columns="_fold"), ["device", "place", "name"])
    out["names"] = np.int64(1)
    if fold.any():
        counts = per_name[fold].groupby(["device", "place"]).size()
        others = out["name"].to_numpy() == -1
        keys = pd.MultiIndex.from_arrays([out.loc[others, "device"], out.loc[others, "place"]])
        out.loc[others, "names"] = counts.reindex(keys).to_numpy()
    out["_others"] = out["name"] == -1
    out = out.sort_values(["device", "place", "_others", "total_ns", "name"],
                          ascending=[True, True, True, False, True], kind="stable").reset_index(drop=True)
    type_total = out.groupby(["device", "place"])["total_ns"].transform("sum").to_numpy()
    out["share_pct"] = np.where(type_total > 0, 100.0 * out["total_ns"].to_numpy() / np.maximum(type_total, 1), 0.0)
    out["name"] = np.where(out["_others"], OTHERS, names_at(cols.names or [""], np.maximum(out["name"].to_numpy(), 0)))
    out["kernel_type"] = np.asarray(typed.order or [""], dtype=object)[out["place"].to_numpy()]
    return out[KERNEL_COLUMNS]


def folded(totals: np.ndarray, top: int, duration_ratio: float | None = None) -> np.ndarray:
    """Which names (``totals`` ranked largest first) go to ``Others``: those past the first
    ``top``. With ``duration_ratio`` (HTA's cut, only where there are more than ``top`` names)
    also those whose running total is above the ``duration_ratio`` quantile of the running
    totals (linear interpolation, as HTA computes it): a cut by rank among the names, not by
    time share (with HTA's 0.8 and top 10 it changes anything only for 11 or 12 names)."""
    fold = np.arange(len(totals)) >= top
    if duration_ratio is not None and len(totals) > top:
        running = np.cumsum(totals)
        fold |= running > np.quantile(running, duration_ratio)
    return fold


def _stats(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """keys, count, total_ns, mean_ns, min_ns, max_ns, std_ns (sample; 0 for one op) of ``dur``."""
    g = frame.groupby(keys, sort=False)["dur"]
    out = pd.DataFrame({"count": g.size(), "total_ns": g.sum(), "min_ns": g.min(), "max_ns": g.max(),
                        "std_ns": g.std().fillna(0.0)}).reset_index()
    for column in ("count", "total_ns", "min_ns", "max_ns"):
        out[column] = out[column].astype(np.int64)
    out.insert(out.columns.get_loc("min_ns"), "mean_ns", out["total_ns"] / out["count"])
    return out
