"""Counters summed per kernel kind, and over all kernels: llm.c's ``profile_gpu.py`` summary.

A kernel's kind is its name (as the counters' source wrote it) cleaned as llm.c cleans it (``kernel_names.kernel_kind``: return
type, template arguments and parameter list stripped), or its category under classify rules.
Per kind, and in a last row ``TOTAL`` over every kernel:

- ``kernels``: measured kernels (rows of the per-kernel table) of the kind;
- ``time_ns``: the summed durations (``time_ns`` of the per-kernel table: the trace's kernel
  durations with a trace, ncu's ``gpu__time_duration.sum`` without one), exact integers;
  ``share_pct`` = 100 x time / the total time;
- ``dram_gbps`` = the DRAM bytes of the timed kernels / their time (llm.c's average DRAM
  bandwidth); ``tensor_pct`` and ``efficiency_pct``: time-weighted means (sum of value x time
  / the time of the kernels that have the value), llm.c's tensor-core % and overall efficiency;
- ``inst``: executed warp instructions (``smsp__inst_executed.sum``) and ``ginst_per_s`` =
  the timed kernels' instructions / their time (instructions per ns = GInst/s).

Kernels without a duration count in ``kernels`` and the byte and instruction sums but in no
rate. Kinds are ordered by time, longest first (ties by name), as llm.c prints them.
"""

from __future__ import annotations

import numpy as np

from ...util.lazy_pandas import pd
from ..gpu_time.kernel_names import kernel_kind
from ..gpu_time.rules import RuleSet
from .names import UNNAMED

INSTRUCTIONS = "smsp__inst_executed.sum"
TOTAL = "(total)"
KIND_COLUMNS = ("kind", "kernels", "time_ns", "share_pct", "dram_bytes", "dram_gbps", "tensor_pct", "inst",
                "ginst_per_s", "efficiency_pct")


def kernel_kinds(kernels: pd.DataFrame, rules: RuleSet | None = None) -> list[str]:
    """Each row's kind: its name as the source wrote it (so a CSV's kinds are the same with
    or without a trace; the trace's name where the source has none) cleaned as llm.c does,
    or its category under ``rules``."""
    names = [t if k in UNNAMED and t else k for t, k in zip(kernels["trace_kernel"].tolist(),
                                                            kernels["kernel"].tolist())]
    label = (lambda n: rules.label(n)[0]) if rules is not None else kernel_kind
    memo: dict[str, str] = {}
    return [memo[n] if n in memo else memo.setdefault(n, label(n)) for n in names]


def _column(kernels: pd.DataFrame, name: str) -> np.ndarray:
    return kernels[name].to_numpy(float) if name in kernels else np.full(len(kernels), np.nan)


def kind_summary(kernels: pd.DataFrame, rules: RuleSet | None = None) -> pd.DataFrame:
    """``KIND_COLUMNS`` per kind, then the ``TOTAL`` row (see the module docstring)."""
    if kernels.empty:
        return pd.DataFrame({c: [] for c in KIND_COLUMNS})
    kind = np.array(kernel_kinds(kernels, rules), dtype=object)
    time = kernels["time_ns"].to_numpy(np.int64)
    timed = time > 0
    t = np.where(timed, time, 0)
    dram, inst = _column(kernels, "dram_bytes"), _column(kernels, INSTRUCTIONS)
    tensor, eff = _column(kernels, "tensor_util_pct"), _column(kernels, "efficiency_pct")
    groups, inverse = np.unique(kind, return_inverse=True)
    rows = [_row(str(g), inverse == i, t, timed, dram, inst, tensor, eff) for i, g in enumerate(groups.tolist())]
    rows.sort(key=lambda r: (-r["time_ns"], r["kind"]))
    rows.append(_row(TOTAL, np.ones(len(kind), bool), t, timed, dram, inst, tensor, eff))
    out = pd.DataFrame(rows, columns=list(KIND_COLUMNS))
    total = rows[-1]["time_ns"]
    out["share_pct"] = 100.0 * out["time_ns"] / total if total else np.nan
    return out.astype({"kernels": np.int64, "time_ns": np.int64})


def _sum(values: np.ndarray) -> float:
    present = values[np.isfinite(values)]
    return float(present.sum()) if len(present) else np.nan


def _weighted(values: np.ndarray, time: np.ndarray) -> float:
    """sum(value x time) / sum(time) over the timed rows that have the value."""
    has = np.isfinite(values) & (time > 0)
    weight = int(time[has].sum())
    return float((values[has] * time[has]).sum()) / weight if weight else np.nan


def _row(kind: str, sel: np.ndarray, t: np.ndarray, timed: np.ndarray, dram: np.ndarray, inst: np.ndarray,
         tensor: np.ndarray, eff: np.ndarray) -> dict:
    time = int(t[sel].sum())
    on_time = sel & timed
    timed_dram, timed_inst = _sum(dram[on_time]), _sum(inst[on_time])
    return {
        "kind": kind, "kernels": int(sel.sum()), "time_ns": time, "share_pct": np.nan,
        "dram_bytes": _sum(dram[sel]), "dram_gbps": timed_dram / time if time else np.nan,
        "tensor_pct": _weighted(tensor[sel], t[sel]), "inst": _sum(inst[sel]),
        "ginst_per_s": timed_inst / time if time else np.nan, "efficiency_pct": _weighted(eff[sel], t[sel]),
    }
