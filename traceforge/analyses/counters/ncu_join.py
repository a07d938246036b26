"""Rows of an ncu CSV joined to the trace kernels they profiled.

ncu is a separate run of the program, so correlation ids mean nothing. ncu's rows are a
subsequence of the program's kernels in launch order (``-k`` filters, ``--launch-skip`` /
``--launch-count`` windows and launches it failed on drop rows, never reorder them), so
each row joins the earliest not-yet-joined kernel on its (device, stream), after the
previous join there, with the same name and the same grid and block. The name is matched
exactly when ncu spells it as the trace does (its default, demangled like Kineto), else
by ``names.kernel_key`` (bare or mangled names). ``skip`` leaves out the trace's first N
kernels in launch order: pass ncu's ``--launch-skip``. This is exact for whole runs,
windows and name filters; where ncu left out some launches of a kernel that repeats
identically (name, grid, block) on a stream, that kernel's later rows land on its earlier
launches: nothing in the CSV tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...io.read.ncu_csv import NcuCsv
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ..structure.stacks import Stacks
from .measurements import ID_COLUMNS, Measurements, examples, kernel_launch_order, problems_frame
from .names import kernel_key

SOURCE = "ncu"
MATCHED, UNMATCHED = "matched", "unmatched"


def _group(fields: list[np.ndarray]) -> dict[tuple, np.ndarray]:
    """Positions (ascending) of each distinct combination of ``fields``."""
    n = len(fields[0])
    if not n:
        return {}
    order = np.lexsort((np.arange(n), *reversed(fields)))
    table = np.stack([f[order] for f in fields], axis=1)
    starts = np.flatnonzero(np.r_[True, (table[1:] != table[:-1]).any(axis=1)])
    bounds = np.r_[starts, n].tolist()
    return {tuple(int(v) for v in table[a]): order[a:b] for a, b in zip(bounds[:-1], bounds[1:])}


@dataclass
class _KernelIndex:
    """Trace kernels in launch order (after ``skip``), grouped by (device, stream, name, dims
    id) with the exact name id (``exact``) and with the name key id (``coarse``)."""

    rows: np.ndarray  # gpu rows, launch order
    exact: dict[tuple, np.ndarray]
    coarse: dict[tuple, np.ndarray]
    name_ids: dict[str, int]  # kernel name -> name id
    key_ids: dict[str, int]  # name key -> key id
    streams: set[tuple[int, int]]
    named: dict[tuple, set]  # (device, stream, key id) -> dims ids seen
    skipped: int

    def candidates(self, name: str, device: int, stream: int, dims: int) -> tuple[np.ndarray | None, int]:
        """Positions that may be this row's kernel, and its key id (-1 unknown). A name
        spelled exactly as in the trace (ncu's default) is matched exactly, else by key."""
        key = self.key_ids.get(kernel_key(name), -1)
        name_id = self.name_ids.get(name)
        if name_id is not None:
            return self.exact.get((device, stream, name_id, dims)), key
        return self.coarse.get((device, stream, key, dims)), key


def _index(cols: TraceColumns, stacks: Stacks, skip: int) -> _KernelIndex:
    ordered = kernel_launch_order(cols, stacks)
    rows = ordered[skip:]
    gpu = cols.gpu
    name = gpu.name[rows]
    uniq = unique(gpu.name[ordered]).tolist()
    key_ids: dict[str, int] = {}
    key_of = np.zeros(max(uniq, default=-1) + 1, np.int64)
    for i in uniq:
        key_of[i] = key_ids.setdefault(kernel_key(cols.names[i]), len(key_ids))
    key = key_of[name]
    device, stream, dims = gpu.device[rows], gpu.stream[rows], gpu.dims[rows]
    coarse = _group([device, stream, key, dims])
    named: dict[tuple, set] = {}
    for d, s, k, m in coarse:
        named.setdefault((d, s, k), set()).add(m)
    return _KernelIndex(rows, _group([device, stream, name, dims]), coarse, {cols.names[i]: i for i in uniq},
                        key_ids, {(d, s) for d, s, _ in named}, named, min(skip, len(ordered)))


def _dims_text(cols: TraceColumns, dims_id: int) -> str:
    if dims_id < 0:
        return "no grid/block"
    grid, block = cols.kernel_dims[dims_id]
    return f"grid {grid} block {block}"


def join_ncu(cols: TraceColumns, stacks: Stacks, ncu: NcuCsv, skip: int = 0) -> Measurements:
    """Join each ncu row to the trace kernel it profiled (see the module docstring)."""
    if skip < 0:
        raise UsageError(f"ncu_skip must be >= 0, not {skip}")
    index = _index(cols, stacks, skip)
    dims_ids = {dims: i for i, dims in enumerate(cols.kernel_dims)}
    rows = ncu.rows
    cursor: dict[tuple[int, int], int] = {}
    position = np.full(len(rows), -1, np.int64)
    problems: list[tuple] = []
    for i, (nid, name, device, stream, grid, block) in enumerate(zip(
            rows["ncu_id"].tolist(), rows["kernel"].tolist(), rows["device"].tolist(), rows["stream"].tolist(),
            rows["grid"].tolist(), rows["block"].tolist())):
        if not dims_ids:
            dims = -1  # the trace records no grid/block: order and name only
        else:
            dims = dims_ids.get((grid, block), -2) if grid is not None and block is not None else -2
        found, key = index.candidates(name, device, stream, dims)
        j = int(np.searchsorted(found, cursor.get((device, stream), 0))) if found is not None else 0
        if found is not None and j < len(found):
            position[i] = found[j]
            cursor[(device, stream)] = int(found[j]) + 1
            continue
        if (device, stream) not in index.streams:
            why = f"the trace has no kernels on device {device} stream {stream}"
        elif (device, stream, key) not in index.named:
            why = f"no kernel of that name on device {device} stream {stream}"
        elif found is None:
            seen = "; ".join(_dims_text(cols, m) for m in sorted(index.named[(device, stream, key)])[:3])
            why = f"no kernel of that name with grid {grid} block {block} (the trace has {seen})"
        else:
            why = "every kernel of that name, grid and block on its stream is before the previous join"
        problems.append((SOURCE, "ncu row without kernel", nid, name, why))

    matched = position >= 0
    gpu_row = np.full(len(rows), -1, np.int64)
    gpu_row[matched] = index.rows[position[matched]]
    launch_row = np.full(len(rows), -1, np.int64)
    launch_row[matched] = stacks.gpu_launch[gpu_row[matched]]
    out = pd.DataFrame({
        "source": SOURCE, "source_index": rows["ncu_id"].to_numpy(), "kernel": rows["kernel"].to_numpy(),
        "status": np.where(matched, MATCHED, UNMATCHED), "device": rows["device"].to_numpy(),
        "stream": rows["stream"].to_numpy(), "gpu_row": gpu_row, "launch_row": launch_row,
    }, columns=list(ID_COLUMNS))
    out["ncu_grid"] = [str(g) if g else "" for g in rows["grid"]]
    out["ncu_block"] = [str(b) if b else "" for b in rows["block"]]
    out = pd.concat([out, rows[ncu.metrics]], axis=1)
    joined = position[matched]
    missing, unprofiled = _unjoined(cols, ncu, index, joined)
    summary = _summary(cols, ncu, index, joined, (missing, unprofiled), skip)
    if not dims_ids:
        summary.append("the trace's kernels have no grid/block args: ncu rows joined on order and name only")
    if problems:
        summary.insert(1, f"ncu rows without a trace kernel: {len(problems):,}, e.g. " +
                       examples([f"ID {p[2]} {p[3]} ({p[4]})" for p in problems], limit=2, width=160))
    gpu = cols.gpu
    for p, r in zip(missing.tolist(), index.rows[missing].tolist()):
        problems.append((SOURCE, "kernel without ncu row", int(gpu.ordinal[r]), cols.names[int(gpu.name[r])],
                         f"device {int(gpu.device[r])} stream {int(gpu.stream[r])}, launch {p + index.skipped} in "
                         "trace order: ncu profiled other launches of this kernel but not this one"))
    return Measurements(out, list(ncu.metrics), problems_frame(problems), summary)


def _unjoined(cols: TraceColumns, ncu: NcuCsv, index: _KernelIndex, joined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the trace kernels inside ncu's span (first to last joined launch) that no
    row joined, split in two: kernels ncu profiled other launches of (missing from the CSV)
    and kernels it never profiled (left out by a ``-k`` filter, say)."""
    if not len(joined):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    inside = np.zeros(len(index.rows), bool)
    inside[joined.min():joined.max() + 1] = True
    inside[joined] = False
    positions = np.flatnonzero(inside)
    profiled = {index.key_ids.get(kernel_key(name), -1) for name in set(ncu.rows["kernel"].tolist())}
    name_ids = cols.gpu.name[index.rows[positions]]
    uniq, inverse = np.unique(name_ids, return_inverse=True)
    seen = np.array([index.key_ids[kernel_key(cols.names[i])] in profiled for i in uniq.tolist()], dtype=bool)
    in_csv = seen[inverse] if len(positions) else np.zeros(0, bool)
    return positions[in_csv], positions[~in_csv]


def _summary(cols: TraceColumns, ncu: NcuCsv, index: _KernelIndex, joined: np.ndarray,
             unjoined: tuple[np.ndarray, np.ndarray], skip: int) -> list[str]:
    total, gpu = len(index.rows), cols.gpu
    lines = [f"ncu: {len(joined):,} of {len(ncu.rows):,} rows of {ncu.path} joined to trace kernels"]
    if not len(joined):
        lines.append(f"trace kernels: {total + index.skipped:,}, none joined")
        return lines
    missing, unprofiled = unjoined
    first, last = int(joined.min()), int(joined.max())
    lines.append(f"trace kernels: {total + index.skipped:,} ({index.skipped:,} skipped by --ncu-skip {skip}); "
                 f"{len(joined):,} joined; inside the CSV's span {len(missing):,} missing from it and "
                 f"{len(unprofiled):,} of kernels it never profiled; {first:,} before its first row, "
                 f"{total - last - 1:,} after its last row")
    for what, positions in (("missing from the CSV", missing), ("never profiled by ncu", unprofiled)):
        if len(positions):
            names = [cols.names[int(gpu.name[r])] for r in index.rows[positions].tolist()]
            lines.append(f"trace kernels {what}: " + examples(names, limit=5))
    pids = ncu.rows["pid"].nunique() if "pid" in ncu.rows else 1
    if pids > 1:
        lines.append(f"ncu CSV covers {pids} processes: rows of all of them were joined to this one trace")
    return lines
