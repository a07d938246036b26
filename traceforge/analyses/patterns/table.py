"""The result of a pattern search (``patterns``, ``pattern_mining``): the top patterns as a
table, one row per pattern, and where each of their occurrences is."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ..gpu_time.kernel_names import kernel_labels

ARROW = " → "


@dataclass
class Patterns:
    """The top patterns (``table``, best first) and where each of their occurrences is.

    Occurrence j is pattern ``occ_pattern[j]`` (a ``table`` row); its GPU op rows, in time
    order, are ``members[offsets[j]:offsets[j + 1]]``; ``occ_op[j]`` is the CPU op row of
    the operator instance (-1 for mined patterns).
    """

    mode: str  # "operator" or "mined"
    searched: str  # what was looked for, for messages
    columns: dict[str, Any]  # the table's, by name (see ``pattern_columns``)
    total_gpu_ns: int
    occ_pattern: np.ndarray
    occ_op: np.ndarray
    offsets: np.ndarray
    members: np.ndarray
    note: str = ""  # why the table is empty, or what was counted
    short_instances: int = 0  # operator mode: instances left out for launching fewer than min_len GPU ops
    min_len: int = 0  # operator mode: the least GPU ops an instance needed

    @cached_property
    def table(self) -> pd.DataFrame:
        """One row per pattern, best first (made on first use: drawing them needs no pandas)."""
        return pd.DataFrame(self.columns)

    @property
    def coverage(self) -> float:
        """Share of all GPU time inside the occurrences of the top patterns (nested operator
        instances overlap, so with ``nested`` their time counts once per instance)."""
        return float(np.sum(self.columns["gpu_share"])) if len(self.columns["pattern"]) else 0.0

    def table_with_totals(self) -> pd.DataFrame:
        """``table`` with ``total_gpu_ns``, ``coverage`` and ``note`` in its ``attrs``."""
        df = self.table
        df.attrs.update(total_gpu_ns=self.total_gpu_ns, coverage=self.coverage, note=self.note)
        return df


def pattern_columns(
    cols: TraceColumns,
    kernels: list[np.ndarray],
    count: np.ndarray,
    gpu_ns: np.ndarray,
    total_gpu_ns: int,
    *,
    cpu_ns: np.ndarray | None = None,
    operators: list[str] | None = None,
) -> dict[str, Any]:
    """The patterns table's columns, a row per pattern, best first: ``P1``, ``P2``, ... with
    short and full kernel names."""
    full = [tuple(cols.names[i] for i in k.tolist()) for k in kernels]
    short = kernel_labels([n for names in full for n in names])
    data = {
        "rank": np.arange(1, len(kernels) + 1),
        "pattern": [f"P{i}" for i in range(1, len(kernels) + 1)],
        "count": np.asarray(count, np.int64),
        "length": np.array([len(k) for k in kernels], np.int64),
        "kernels": [ARROW.join(short[n] for n in names) for names in full],
        "gpu_ns": np.asarray(gpu_ns, np.int64),
        "mean_gpu_ns": np.asarray(gpu_ns, np.float64) / np.maximum(np.asarray(count), 1),
    }
    if cpu_ns is not None:
        data["cpu_ns"] = np.asarray(cpu_ns, np.int64)
    data["gpu_share"] = np.asarray(gpu_ns, np.float64) / total_gpu_ns if total_gpu_ns > 0 else 0.0
    if operators is not None:
        data["operator"] = operators
    data["kernel_names"] = full
    return data


def concat_runs(rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, members) of the slices ``rows[starts[j]:ends[j]]``."""
    lengths = ends - starts
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
    return offsets, rows[index]
