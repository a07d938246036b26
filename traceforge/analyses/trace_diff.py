"""Compare the GPU work of two traces (before/after a change), like HTA's ``TraceDiff``.

Per GPU op name (kernels, copies, memsets) and per category (the kernel classifier's
rules, ``classify``; default preset: nccl, memcpy, gemm, attention, ...): counts and total
time in A and in B, and B - A, sorted by the absolute change in total time, then in count. Times are exact integer ns (HTA: µs); a
negative ``dur`` counts as 0. ``count_change`` is HTA's ``+`` / ``-`` / ``=``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..columns.scan import TraceColumns
from ..util.lazy_pandas import pd
from .activity import GPU_ACTIVITY
from .classify import label_ops
from .rules import DEFAULT_RULES, RuleSet, load_rules


@dataclass
class TraceDiff:
    """``ops``: one row per (kind, name, category); ``categories``: one row per category."""

    ops: pd.DataFrame
    categories: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"ops": self.ops, "categories": self.categories}


def gpu_op_totals(cols: TraceColumns, rules: RuleSet) -> pd.DataFrame:
    """kind, name, category, count, total_ns per GPU op name."""
    gpu = cols.gpu
    labels = label_ops(cols, rules)
    df = pd.DataFrame({"kind": gpu.kind, "name": gpu.name, "category": labels.category, "dur": np.maximum(gpu.dur, 0)})
    out = df.groupby(["kind", "name", "category"], sort=False)["dur"].agg(count="size", total_ns="sum").reset_index()
    out["kind"] = out["kind"].map(GPU_ACTIVITY)
    if len(out):
        out["name"] = np.asarray(cols.names, dtype=object)[out["name"].to_numpy()]
        out["category"] = np.asarray(labels.categories, dtype=object)[out["category"].to_numpy()]
    return out


def compare(a: TraceColumns, b: TraceColumns, rules: str | RuleSet = DEFAULT_RULES) -> TraceDiff:
    """The diff of two scanned traces (B - A); ``rules``: a classifier preset, file or RuleSet."""
    rules = load_rules(rules)
    return compared(gpu_op_totals(a, rules), gpu_op_totals(b, rules))


def compared(ta: pd.DataFrame, tb: pd.DataFrame) -> TraceDiff:
    return TraceDiff(_diff(ta, tb, ["kind", "name", "category"]), _diff(ta, tb, ["category"]))


def _diff(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    a = a.groupby(keys, sort=False)[["count", "total_ns"]].sum()
    b = b.groupby(keys, sort=False)[["count", "total_ns"]].sum()
    union = a.index.union(b.index)
    a, b = a.reindex(union, fill_value=0), b.reindex(union, fill_value=0)  # stays int64: exact
    out = pd.DataFrame({
        "a_count": a["count"], "b_count": b["count"], "count_diff": b["count"] - a["count"],
        "a_total_ns": a["total_ns"], "b_total_ns": b["total_ns"], "total_diff_ns": b["total_ns"] - a["total_ns"],
    }).reset_index()
    out["count_change"] = np.select([out["count_diff"] > 0, out["count_diff"] < 0], ["+", "-"], "=")
    out["_abs_total"], out["_abs_count"] = out["total_diff_ns"].abs(), out["count_diff"].abs()
    out = out.sort_values(["_abs_total", "_abs_count", *keys], ascending=[False, False] + [True] * len(keys), kind="stable")
    return out.drop(columns=["_abs_total", "_abs_count"]).reset_index(drop=True)
