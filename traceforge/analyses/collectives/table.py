"""One rank's collectives: each GPU collective kernel with its CPU op's args, integer ns.

A kernel (``ncclKernel_*``, ``ncclDevKernel_*``, RCCL's) is tied to its CPU op through the
launch correlation: the launch call with the kernel's ``correlation``, then the collective
CPU ops (``record_param_comms``, ``nccl:*``) on the launch's thread that enclose the launch.
The args (``Collective name``, ``Process Group Name``/``pg_name``, ``Seq``/``seq_num``, ``In msg
nelems``, ``Out msg nelems``, ``dtype``, ``Group size``, ``Process Group Ranks``) are read from
the kernel itself where Kineto copied them there, else from ``record_param_comms``; the
annotation's ``Input Dims``/``Input type`` give the size where no nelems are written. The
group's size, where no arg says it, is the ``distributedInfo.pg_config`` entry of the group,
else ``world_size``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...util.lazy_pandas import pd
from .kinds import PARAM_COMMS, UNKNOWN, dtype_bytes, kind_of, nccl_size

COLUMNS = ("rank", "ordinal", "pid", "tid", "kind", "group", "seq", "start_ns", "end_ns", "stream", "device", "bytes",
           "in_nelems", "out_nelems", "dtype", "group_size", "group_ranks", "peer", "cpu_op", "kernel")
GROUP_KEYS = ("Process Group Name", "pg_name")
SEQ_KEYS = ("Seq", "seq", "seq_num", "Sequence number")
PEER_KEYS = ("Peer", "peer", "Dst rank", "Src rank", "dst_rank", "src_rank")
DEFAULT_GROUP = "0"  # torch's default process group's name, for collectives that name none


@dataclass(frozen=True)
class Slice:
    """A parsed collective event (kernel or CPU op): its times in ns and the args it has."""

    ordinal: int
    name: str
    ts: int
    end: int
    pid: object
    tid: object
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Launches:
    """The launch calls of the kernels: correlation -> (ts, (pid, tid))."""

    correlation: np.ndarray
    ts: np.ndarray
    track: list  # (pid, tid) of each


def rank_table(rank: int, kernels: list[Slice], cpu_ops: list[Slice], launches: Launches,
               metadata: dict, base_ns: int = 0) -> pd.DataFrame:
    """The collectives of one rank, one row per kernel, sorted by start (columns ``COLUMNS``);
    times are absolute: ``base_ns`` (the trace's ``baseTimeNanoseconds``) plus ts."""
    info = metadata.get("distributedInfo") if isinstance(metadata.get("distributedInfo"), dict) else {}
    groups = {str(g.get("pg_name")): g for g in info.get("pg_config") or () if isinstance(g, dict)}
    world = info.get("world_size") if type(info.get("world_size")) is int else 0
    by_corr = {int(c): i for i, c in enumerate(launches.correlation.tolist())}
    ops_on: dict[tuple, list[Slice]] = defaultdict(list)
    for op in cpu_ops:
        ops_on[(op.pid, op.tid)].append(op)
    rows = []
    for k in kernels:
        enclosing: list[Slice] = []
        at = by_corr.get(k.args.get("correlation")) if type(k.args.get("correlation")) is int else None
        if at is not None:
            t = int(launches.ts[at])
            enclosing = [op for op in ops_on.get(tuple(launches.track[at]), ()) if op.ts <= t <= op.end]
            enclosing.sort(key=lambda op: (op.ts, -op.end))  # outermost first
        rows.append(_row(rank, k, enclosing, groups, world))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for c in ("ordinal", "seq", "start_ns", "end_ns", "stream", "device", "bytes", "in_nelems", "out_nelems",
              "group_size", "peer", "rank"):
        df[c] = df[c].astype(np.int64)
    df["start_ns"] += base_ns
    df["end_ns"] += base_ns
    return df.sort_values(["start_ns", "ordinal"], kind="stable").reset_index(drop=True)


def _row(rank: int, k: Slice, ops: list[Slice], groups: dict, world: int) -> dict:
    params = [op for op in ops if op.name == PARAM_COMMS]
    notes = [op for op in ops if op.name != PARAM_COMMS]
    sources = [k.args] + [op.args for op in reversed(params)]  # the innermost record_param_comms first

    def arg(keys: tuple[str, ...]) -> object:
        for a in sources:
            for key in keys:
                if key in a and a[key] not in (None, ""):
                    return a[key]
        return None

    kind = (kind_of(_str(arg(("Collective name",)))) or next((kind_of(op.name) for op in reversed(notes)
                                                                if kind_of(op.name)), None)
            or kind_of(k.name) or UNKNOWN)
    group = _str(arg(GROUP_KEYS)) or DEFAULT_GROUP
    config = groups.get(group, {})
    ranks_text = arg(("Process Group Ranks",))
    ranks = _int_list(ranks_text) if ranks_text is not None else _int_list(config.get("ranks"))
    size = _int(arg(("Group size",)))
    if size <= 0:
        size = _int(config.get("pg_size")) if _int(config.get("pg_size")) > 0 else len(ranks) or world
    dtype = _str(arg(("dtype",)))
    width = dtype_bytes(dtype) or 0
    in_n, out_n = _int(arg(("In msg nelems",))), _int(arg(("Out msg nelems",)))
    in_bytes, out_bytes = max(in_n, 0) * width, max(out_n, 0) * width
    if not width or (in_n <= 0 and out_n <= 0):
        in_bytes, dtype = _annotated_bytes(notes)
        out_bytes = in_bytes * size if kind == "all_gather" else in_bytes
        if kind == "reduce_scatter" and size:
            out_bytes = in_bytes // size
    return {
        "rank": rank, "ordinal": k.ordinal, "pid": k.pid, "tid": k.tid, "kind": kind, "group": group, "seq": _int(arg(SEQ_KEYS)),
        "start_ns": k.ts, "end_ns": k.end, "stream": _int(k.args.get("stream")), "device": _int(k.args.get("device")),
        "bytes": nccl_size(kind, in_bytes, out_bytes), "in_nelems": in_n, "out_nelems": out_n, "dtype": dtype or "",
        "group_size": size, "group_ranks": ",".join(map(str, ranks)), "peer": _int(arg(PEER_KEYS)),
        "cpu_op": next((op.name for op in reversed(notes)), params[-1].name if params else ""), "kernel": k.name,
    }


def _annotated_bytes(notes: list[Slice]) -> tuple[int, str]:
    """The first tensor's bytes from an annotation's ``Input Dims`` and ``Input type`` (0 if unknown)."""
    for op in reversed(notes):
        dims, types = op.args.get("Input Dims"), op.args.get("Input type")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types:
            width = dtype_bytes(types[0])
            if width and all(type(d) is int for d in dims[0]):
                return int(np.prod(dims[0], dtype=object)) * width, str(types[0])
    return 0, ""


def _int(value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return -1


def _str(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _int_list(value: object) -> list[int]:
    if isinstance(value, list):
        return [v for v in value if type(v) is int]
    if isinstance(value, str):
        return [int(x) for x in re.findall(r"-?\d+", value)]
    return []
