"""Compare two traces (A before, B after a change), like HTA's ``TraceDiff``.

Tables, B - A, one row per key present in either trace:

- ``ops``: per GPU op (kind, name, category): kernels, copies, memsets; the category comes
  from the kernel classifier's rules (``classify``; default preset: nccl, memcpy, gemm, ...).
- ``categories``: per category.
- ``cpu_ops``: per CPU operator (kind: ``cpu_op``, ``user_annotation``, ``python_function``;
  name). The ``ProfilerStep#N`` ranges are left out: they are the steps, not work.

Columns: a_count, b_count, count_diff, a_total_ns, b_total_ns, total_diff_ns (exact integer
ns; a negative ``dur`` counts as 0), a_mean_ns, b_mean_ns (total / count), total_change_pct
(100 (B - A) / A; empty where A is 0) and count_change, HTA's ``+`` / ``-`` / ``=``. Rows go
by the absolute change in time, then in count, then key.

Per-step normalisation: traces of different lengths do different amounts of work. With
``per_step`` on, each trace's counts and times are also divided by its number of profiler
steps (``steps.profiler_steps``): columns a_count_per_step, b_count_per_step, a_ns_per_step,
b_ns_per_step, ns_per_step_diff; the order, ``count_change`` and ``total_change_pct`` then
follow the per-step values (compared exactly: B · steps_A against A · steps_B). ``per_step``
None (the default) turns it on when both traces have steps and their numbers differ; True
needs steps in both; False keeps whole-trace values.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from ...columns.names import names_at
from ...columns.scan import STEP_PREFIX, TraceColumns
from ...errors import UsageError
from ...util.distinct import factorized
from ...util.lazy_pandas import pd
from ..gpu_time.classify import label_ops
from ..gpu_time.rules import DEFAULT_RULES, RuleSet, load_rules
from ..structure.activity import GPU_ACTIVITY, cat_kinds
from ..structure.steps import profiler_steps

TABLES = ("ops", "categories", "cpu_ops")
_KEYS = {"ops": ["kind", "name", "category"], "categories": ["category"], "cpu_ops": ["kind", "name"]}


@dataclass
class Totals:
    """What is left of one trace for a diff: per-name totals and the number of profiler steps."""

    gpu_ops: pd.DataFrame | None  # kind, name, category, count, total_ns (None: not asked for)
    cpu_ops: pd.DataFrame | None  # kind, name, count, total_ns
    steps: int


@dataclass
class TraceDiff:
    """The tables asked for (the others empty), the step counts, and whether values are per step."""

    ops: pd.DataFrame
    categories: pd.DataFrame
    cpu_ops: pd.DataFrame
    a_steps: int = 0
    b_steps: int = 0
    per_step: bool = False

    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in TABLES}


def wanted_tables(tables: Collection[str] | None) -> tuple[str, ...]:
    """``tables`` checked (default: all of ``TABLES``), in ``TABLES`` order."""
    if tables is None:
        return TABLES
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        raise UsageError(f"diff: no table {unknown[0]!r} (there are {', '.join(TABLES)})")
    return tuple(t for t in TABLES if t in tables)


def reads_cpu_ops(tables: Collection[str] | None) -> bool:
    return "cpu_ops" in wanted_tables(tables)


def totals(cols: TraceColumns, rules: RuleSet, tables: Collection[str] | None = None) -> Totals:
    """One trace's ``Totals`` for the ``tables`` wanted: CPU ops (on disk, maybe) are read a
    chunk at a time, keeping only per-name totals."""
    wanted = wanted_tables(tables)
    gpu = gpu_op_totals(cols, rules) if {"ops", "categories"} & set(wanted) else None
    cpu = cpu_op_totals(cols) if "cpu_ops" in wanted else None
    return Totals(gpu, cpu, len(profiler_steps(cols)))


def gpu_op_totals(cols: TraceColumns, rules: RuleSet) -> pd.DataFrame:
    """kind, name, category, count, total_ns per GPU op name."""
    gpu = cols.gpu
    labels = label_ops(cols, rules)
    df = pd.DataFrame({"kind": gpu.kind, "name": gpu.name, "category": labels.category, "dur": np.maximum(gpu.dur, 0)})
    out = df.groupby(["kind", "name", "category"], sort=False)["dur"].agg(count="size", total_ns="sum").reset_index()
    out["kind"] = out["kind"].map(GPU_ACTIVITY)
    if len(out):
        out["name"] = names_at(cols.names, out["name"].to_numpy())
        out["category"] = np.asarray(labels.categories, dtype=object)[out["category"].to_numpy()]
    return out


def cpu_op_totals(cols: TraceColumns) -> pd.DataFrame:
    """kind, name, count, total_ns per CPU op name (``ProfilerStep#N`` left out), from the CPU
    ops in memory and on disk, a chunk at a time."""
    is_step = np.array([n.startswith(STEP_PREFIX) for n in cols.names] or [False])
    keys, counts, sums = [], [], []
    for table in cols.all_cpu_ops:
        for chunk in table.chunks():
            keep = ~is_step[chunk.name]
            key = chunk.cat[keep].astype(np.int64) << 32 | chunk.name[keep].astype(np.int64)
            group, first = factorized(key)
            keys.append(key[first])
            counts.append(np.bincount(group, minlength=len(first)))
            sums.append(np.zeros(len(first), np.int64))
            np.add.at(sums[-1], group, np.maximum(chunk.dur[keep], 0).astype(np.int64))
    if not keys:
        return pd.DataFrame({"kind": pd.Series(dtype=object), "name": pd.Series(dtype=object),
                             "count": np.zeros(0, np.int64), "total_ns": np.zeros(0, np.int64)})
    key = np.concatenate(keys)
    df = pd.DataFrame({"kind": cat_kinds(cols)[key >> 32], "name": names_at(cols.names, key & 0xFFFFFFFF),
                       "count": np.concatenate(counts), "total_ns": np.concatenate(sums)})
    return df.groupby(["kind", "name"], sort=False)[["count", "total_ns"]].sum().reset_index()


def compare(a: TraceColumns, b: TraceColumns, rules: str | RuleSet = DEFAULT_RULES, *,
            tables: Collection[str] | None = None, per_step: bool | None = None) -> TraceDiff:
    """The diff of two scanned traces (B - A); ``rules``: a classifier preset, file or RuleSet."""
    rules = load_rules(rules)
    return compared(totals(a, rules, tables), totals(b, rules, tables), tables=tables, per_step=per_step)


def compared(a: Totals, b: Totals, *, tables: Collection[str] | None = None, per_step: bool | None = None
             ) -> TraceDiff:
    """The diff of two traces' ``Totals`` (see the module docstring for ``per_step``)."""
    wanted = wanted_tables(tables)
    if per_step is None:
        per_step = a.steps > 0 and b.steps > 0 and a.steps != b.steps
    elif per_step and not (a.steps and b.steps):
        raise UsageError(f"diff: per-step values need profiler steps in both traces (A has {a.steps}, B {b.steps})")
    steps = (a.steps, b.steps) if per_step else (1, 1)
    out = {}
    for name in TABLES:
        source = "cpu_ops" if name == "cpu_ops" else "gpu_ops"
        ta, tb = getattr(a, source), getattr(b, source)
        out[name] = _diff(ta, tb, _KEYS[name], steps, per_step) if name in wanted else pd.DataFrame()
    return TraceDiff(**out, a_steps=a.steps, b_steps=b.steps, per_step=per_step)


def _diff(a: pd.DataFrame, b: pd.DataFrame, keys: list[str], steps: tuple[int, int], per_step: bool
          ) -> pd.DataFrame:
    a = a.groupby(keys, sort=False)[["count", "total_ns"]].sum()
    b = b.groupby(keys, sort=False)[["count", "total_ns"]].sum()
    union = a.index.union(b.index)
    a, b = a.reindex(union, fill_value=0), b.reindex(union, fill_value=0)  # stays int64: exact
    out = pd.DataFrame({
        "a_count": a["count"], "b_count": b["count"], "count_diff": b["count"] - a["count"],
        "a_total_ns": a["total_ns"], "b_total_ns": b["total_ns"], "total_diff_ns": b["total_ns"] - a["total_ns"],
    }).reset_index()
    for side in ("a", "b"):
        count = out[f"{side}_count"].to_numpy()
        out[f"{side}_mean_ns"] = np.where(count > 0, out[f"{side}_total_ns"] / np.maximum(count, 1), np.nan)
    sa, sb = steps
    # B / sb - A / sa, scaled by sa * sb to stay exact: Python ints (no int64 overflow)
    time_key = out["b_total_ns"].astype(object) * sa - out["a_total_ns"].astype(object) * sb
    count_key = out["b_count"].astype(object) * sa - out["a_count"].astype(object) * sb
    base = out["a_total_ns"].astype(object) * sb
    out["total_change_pct"] = [100 * float(t) / float(d) if d else np.nan for t, d in zip(time_key, base)]
    if per_step:
        out["a_count_per_step"], out["b_count_per_step"] = out["a_count"] / sa, out["b_count"] / sb
        out["a_ns_per_step"], out["b_ns_per_step"] = out["a_total_ns"] / sa, out["b_total_ns"] / sb
        out["ns_per_step_diff"] = out["b_ns_per_step"] - out["a_ns_per_step"]
    sign = np.array([(c > 0) - (c < 0) for c in count_key], np.int64)
    out["count_change"] = np.select([sign > 0, sign < 0], ["+", "-"], "=")
    out["_abs_total"] = [abs(t) for t in time_key]
    out["_abs_count"] = [abs(c) for c in count_key]
    out = out.sort_values(["_abs_total", "_abs_count", *keys], ascending=[False, False] + [True] * len(keys),
                          kind="stable")
    return out.drop(columns=["_abs_total", "_abs_count"]).reset_index(drop=True)
