"""One table per activity kind, for pandas, spreadsheets and Parquet: the per-kind CSVs users
otherwise convert traces into by hand, with exact integer-ns ``start``, ``end``, ``dur``.

``end`` is ``start + dur`` as written in the trace (not clipped). Absent values are -1
(ids, sizes) or the empty string (names). GPU ops carry the launch API and the innermost CPU
op that issued them (``cpu_op``, the top of the operator stack, see ``stacks``); launch calls
the op they ran in; CPU ops their parent op.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..lazy_pandas import pd
from ..op_args import OpArgsCollector, lookup
from ..scan import KERNEL, MEMCPY, MEMSET, Table, TraceColumns, scan
from .activity import activities
from .stacks import build_stacks

_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def read_tables(path: str) -> Iterator[tuple[str, pd.DataFrame]]:
    """The export tables of the trace at ``path`` (one pass over it), a kind at a time."""
    collector = OpArgsCollector()
    cols = scan(path, on_batch=collector)
    return tables_by_kind(cols, collector.table())


def export_tables(cols: TraceColumns, op_args: Table) -> dict[str, pd.DataFrame]:
    """Tables by activity kind (``kernel``, ``gpu_memcpy``, ``cuda_runtime``, ``cpu_op``, ...).

    ``op_args`` comes from ``op_args.OpArgsCollector`` run over the same trace.
    """
    return dict(tables_by_kind(cols, op_args))


def tables_by_kind(cols: TraceColumns, op_args: Table) -> Iterator[tuple[str, pd.DataFrame]]:
    """``export_tables`` one kind at a time: a writer holds one table, not all of them."""
    stacks = build_stacks(cols)
    names = np.asarray(cols.names + [""], dtype=object)  # index -1: no name
    gpu_op = stacks.gpu_op()
    gpu_launch_name = np.full(len(cols.gpu), -1, np.int64)
    has_launch = stacks.gpu_launch >= 0
    gpu_launch_name[has_launch] = cols.launches.name[stacks.gpu_launch[has_launch]]
    # scan's interned (grid, block) per kernel, as six columns; the extra last row (-1) is "none"
    dims = np.array([[*g, *b] for g, b in cols.kernel_dims] + [[-1] * 6], np.int64).reshape(-1, 6)
    for act in activities(cols):
        t, rows = act.of(cols), act.rows
        ts, dur = t.ts[rows], t.dur[rows]
        df = pd.DataFrame({"ordinal": t.ordinal[rows], "start": ts, "end": ts + dur, "dur": dur, "name": names[t.name[rows]]})
        extra = lookup(op_args, t.ordinal[rows])
        if act.table == "gpu":
            kind = int(t.kind[rows[0]])
            df["device"], df["stream"], df["correlation"] = t.device[rows], t.stream[rows], t.correlation[rows]
            df["external_id"] = extra["external_id"]
            if kind == KERNEL:
                for i, k in enumerate(_DIMS):
                    df[k] = dims[t.dims[rows], i]
                df["shared_memory"] = extra["shared_memory"]
            if kind in (MEMCPY, MEMSET):
                df["bytes"] = t.bytes[rows]
            df["launch"] = names[gpu_launch_name[rows]]
            df["cpu_op"] = _op_names(cols, names, gpu_op[rows])
        else:
            pid_tid = [cols.tracks[i] for i in t.track[rows].tolist()]
            df["pid"] = pd.Series([p for p, _ in pid_tid], dtype=_track_dtype(pid_tid, 0))
            df["tid"] = pd.Series([q for _, q in pid_tid], dtype=_track_dtype(pid_tid, 1))
            if act.table == "launches":
                df["correlation"] = t.correlation[rows]
                df["external_id"] = extra["external_id"]
                df["cpu_op"] = _op_names(cols, names, stacks.launch_op[rows])
            elif act.table == "cpu_ops":
                df["external_id"] = extra["external_id"]
                df["parent"] = _op_names(cols, names, stacks.cpu_parent[rows])
        yield act.kind, df


def _op_names(cols: TraceColumns, names: np.ndarray, op_rows: np.ndarray) -> np.ndarray:
    """Names of CPU op rows; "" for -1."""
    ids = np.full(len(op_rows), -1, np.int64)
    ids[op_rows >= 0] = cols.cpu_ops.name[op_rows[op_rows >= 0]]
    return names[ids]


def _track_dtype(pid_tid: list[tuple], i: int) -> str:
    """int64 when every pid (or tid) is an int, as in Kineto; object for 2021's ``"stream 7"``."""
    return "int64" if all(type(pt[i]) is int for pt in pid_tid) else "object"


def check_parquet() -> None:
    """Fail early, in one line, when Parquet cannot be written."""
    if importlib.util.find_spec("pyarrow") is None:
        raise UsageError("--parquet needs pyarrow (pip install pyarrow); --csv works without it")


def write_tables(tables: Iterable[tuple[str, pd.DataFrame]], *, csv_dir: str | None = None,
                 parquet_dir: str | None = None) -> list[tuple[Path, int]]:
    """Write ``<dir>/<kind>.csv`` and/or ``<dir>/<kind>.parquet`` for each (kind, table), in
    turn; return the files written, each with its rows."""
    if parquet_dir is not None:
        check_parquet()
    dirs = [(Path(d), suffix) for d, suffix in ((csv_dir, ".csv"), (parquet_dir, ".parquet")) if d is not None]
    for out, _ in dirs:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create {out}: {e.strerror}") from None
    written: list[list[tuple[Path, int]]] = [[] for _ in dirs]
    for kind, df in tables:
        for (out, suffix), files in zip(dirs, written):
            path = out / f"{kind}{suffix}"
            if suffix == ".csv":
                df.to_csv(path, index=False, errors="backslashreplace")
            else:
                df.to_parquet(path, index=False)
            files.append((path, len(df)))
    return [file for files in written for file in files]  # the CSV files first, as listed before
