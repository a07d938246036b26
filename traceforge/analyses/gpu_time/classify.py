"""Kernel classification: a category per GPU op, and the GPU time split by category.

Each distinct name is labelled once by the rule set, then ops are labelled by indexing.
Per device, every instant of GPU activity is counted once (``intervals``), so per
category we report the plain summed duration, the non-overlapped time (vLLM's "elapsed")
and the category's own busy time (the union of its ops, as HTA merges a kernel type).
The window is the file's GPU span (first GPU op start to last GPU op end), or the real
elapsed time the user passes, which must be at least each device's busy time (a
``UsageError`` otherwise: no share passes 100 %); per device, non-overlapped times + non-GPU
time = window, exactly in ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import numpy as np

from ...columns.names import names_at, names_in_chunks
from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from .intervals import grouped_first_start_owned
from .rules import RuleSet

NON_GPU = "non-GPU"


@dataclass
class Labels:
    """Category and stage id of every row of ``cols.gpu``."""

    category: np.ndarray
    stage: np.ndarray
    categories: list[str]
    stages: list[str]
    has_stages: bool


def label_ops(cols: TraceColumns, rules: RuleSet) -> Labels:
    """Label each distinct GPU op name once, then every op by indexing (no per-op Python)."""
    used = unique(cols.gpu.name)
    labelled = [rules.label_names(chunk) for chunk in names_in_chunks(cols.names, used)]
    categories, stages = labelled[0][2:] if labelled else rules.label_names([])[2:]
    cat_ids = np.concatenate([c for c, _, _, _ in labelled] or [np.zeros(0, np.int64)])
    stage_ids = np.concatenate([s for _, s, _, _ in labelled] or [np.zeros(0, np.int64)])
    category_of_name = np.zeros(len(cols.names) or 1, np.int32)  # 4 bytes per op, not 8
    stage_of_name = np.zeros(len(cols.names) or 1, np.int32)
    category_of_name[used] = cat_ids
    stage_of_name[used] = stage_ids
    return Labels(category_of_name[cols.gpu.name], stage_of_name[cols.gpu.name], categories, stages, rules.has_stages)


def seconds_to_ns(value: float | str | Decimal) -> int:
    """A user's elapsed seconds as integer ns, via the decimal text (no float rounding)."""
    try:
        ns = Decimal(str(value)) * 1_000_000_000
    except InvalidOperation:
        raise UsageError(f"not a number of seconds: {value!r}") from None
    if not ns.is_finite() or ns <= 0 or ns >= 2**63:  # past int64 ns: no trace spans that
        raise UsageError(f"elapsed time must be a positive number of seconds, not {value!r}")
    return int(ns.to_integral_value())


@dataclass
class Classified:
    """The split of one file: ``table`` per (device, category), ``kernels`` per (device, name)."""

    path: str
    rules: RuleSet
    table: pd.DataFrame
    kernels: pd.DataFrame
    span_ns: int  # first GPU op start to last GPU op end
    window_ns: int  # span_ns, or the elapsed time the user gave
    elapsed_given: bool = False
    warnings: list[str] = field(default_factory=list)


def classify_columns(cols: TraceColumns, rules: RuleSet, *, elapsed_ns: int | None = None) -> Classified:
    """Split the GPU time of ``cols`` by the categories of ``rules``."""
    gpu = cols.gpu
    labels = label_ops(cols, rules)
    start = gpu.ts
    duration = np.maximum(gpu.dur, 0).astype(np.int64)
    end = start + duration
    owned = grouped_first_start_owned(gpu.device, start, end, gpu.ordinal)
    ncat = len(labels.categories)
    union = grouped_first_start_owned(gpu.device * ncat + labels.category, start, end, gpu.ordinal)
    span = int(end.max() - start.min()) if len(gpu) else 0
    del end
    window = span if elapsed_ns is None else elapsed_ns
    per_cat = _group_sums({"device": gpu.device, "category": labels.category, "stage": labels.stage},
                          {"duration_ns": duration, "nonoverlapped_ns": owned, "union_ns": union})
    del union
    per_cat["category"] = np.asarray(labels.categories, dtype=object)[per_cat["category"].to_numpy()]
    per_cat["stage"] = np.asarray(labels.stages, dtype=object)[per_cat["stage"].to_numpy()]

    warnings: list[str] = []
    if not len(gpu) and len(cols.ranges):
        warnings.append(f"{cols.path}: only cuda_profiler_range events (CUPTI range-profiler mode, replayed "
                        "timings): nothing to classify")
    idle_rows = []
    for device, busy in per_cat.groupby("device")["nonoverlapped_ns"].sum().items():
        idle = window - int(busy)
        if idle < 0:  # shares of the window would pass 100 %
            raise UsageError(f"{cols.path}: elapsed time {_seconds(window)} s is less than GPU {device}'s busy time "
                             f"{_seconds(int(busy))} s: give at least that")
        idle_rows.append({"device": device, "category": NON_GPU, "stage": "", "instances": 0, "duration_ns": 0,
                          "nonoverlapped_ns": idle, "union_ns": idle})
    table = pd.concat([per_cat, pd.DataFrame(idle_rows, columns=per_cat.columns)], ignore_index=True)
    table = _finish(table, window, labels.has_stages, by="category")

    per_name = _group_sums({"device": gpu.device, "name": gpu.name, "category": labels.category, "stage": labels.stage},
                           {"duration_ns": duration, "nonoverlapped_ns": owned})
    per_name["name"] = names_at(cols.names or [""], per_name["name"].to_numpy())
    per_name["category"] = np.asarray(labels.categories, dtype=object)[per_name["category"].to_numpy()]
    per_name["stage"] = np.asarray(labels.stages, dtype=object)[per_name["stage"].to_numpy()]
    kernels = _finish(per_name, window, labels.has_stages, by="name")
    return Classified(cols.path, rules, table, kernels, span, window, elapsed_ns is not None, warnings)


def _seconds(ns: int) -> str:
    """Exact seconds, without trailing zeros (``Decimal``: no float rounding)."""
    text = f"{Decimal(ns) / 1_000_000_000:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _group_sums(keys: dict[str, np.ndarray], values: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per distinct key tuple, sorted: the keys, ``instances``, and each value's exact int64 sum.

    What ``DataFrame.groupby(keys).sum()`` gives, without a frame of every op (its copies
    were most of classify's memory on big traces).
    """
    n = len(next(iter(keys.values())))
    order = np.lexsort(tuple(reversed(list(keys.values()))))
    sorted_keys = {name: k[order] for name, k in keys.items()}
    new = np.zeros(n, bool)
    new[:1] = True
    for k in sorted_keys.values():
        new[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    out = {name: k[starts] for name, k in sorted_keys.items()}
    out["instances"] = np.diff(np.append(starts, n))
    for name, v in values.items():
        out[name] = np.add.reduceat(v[order], starts, dtype=np.int64) if n else np.zeros(0, np.int64)
    return pd.DataFrame(out)


def _finish(df: pd.DataFrame, window: int, has_stages: bool, by: str) -> pd.DataFrame:
    """Integer columns as int64, ``share`` of the window, rows by device then time (non-GPU last)."""
    for column in ("device", "instances", "duration_ns", "nonoverlapped_ns", "union_ns"):
        if column in df:
            df[column] = df[column].astype(np.int64)
    df["share"] = df["nonoverlapped_ns"] / window if window > 0 else 0.0
    last = (df["category"] == NON_GPU).to_numpy() if by == "category" else np.zeros(len(df), bool)
    df = df.assign(_last=last).sort_values(["device", "_last", "nonoverlapped_ns", by],
                                           ascending=[True, True, False, True], kind="stable")
    df = df.drop(columns="_last").reset_index(drop=True)
    if not has_stages:
        df = df.drop(columns="stage")
    return df
