"""The roofline of every GPU kernel: the work its launching CPU op does (``work``), the limits of the
GPU it ran on (``limits``), and what it achieved against them.

Each kernel belongs to the CPU op that launched it: the innermost op enclosing its launch call
(``stacks.build_stacks``), or, where that op has no work model, the nearest enclosing op that has
one. The work of one op instance is split among the kernels it owns in proportion to their
durations (equally where all are 0 ns), in whole FLOPs and bytes that add up to the op's: so all
of an op's kernels run at the op's achieved rate. Per kernel:

- achieved TFLOP/s = flops / dur, GB/s = bytes / dur; intensity = flops / bytes;
- roofline time = max(flops / peak, bytes / bandwidth), rounded up to a whole ns, with ``peak``
  the dense peak of the op's math unit and type (``dtypes``); the bound is the larger term
  (compute or memory: the op's intensity against the ridge point peak / bandwidth);
- % of roofline = roofline time / dur.

Memcpy and memset events are not kernels and stay out (``memcpy_bw`` covers copies). Coverage is
the share of kernel time whose kernels are modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import orjson

from ...columns.scan import KERNEL, TraceColumns
from ..structure.stacks import Stacks, build_stacks
from .dtypes import TF32_CHOICE, float32_unit
from .limits import GpuLimits, limits_for
from .work import (
    COLLECTIVE,
    FUSED_OPTIMIZERS,
    Work,
    allreduce_elements,
    fused_adam_of_elements,
    is_allreduce,
    is_modelled,
    no_model_reason,
    op_work,
)

MEMORY, COMPUTE, NO_BOUND = 0, 1, -1
BOUNDS = ("memory", "compute")
NO_CPU_OP = "no launching CPU op in the trace"


@dataclass
class OpKey:
    """One op name + shapes + dtype: what the ops table groups by."""

    name: str
    shapes: str  # the op's Input Dims, as JSON text
    dtype: str
    family: str


@dataclass
class Roofline:
    """Per modelled kernel (``rows``: rows of ``cols.gpu``): its share of its op's work, its roofline
    time (-1 where the GPU or the peak is unknown) and bound; per kernel not modelled, why."""

    rows: np.ndarray
    owner: np.ndarray  # the CPU op row whose work it has
    key: np.ndarray  # index into keys
    keys: list[OpKey]
    flops: np.ndarray
    bytes: np.ndarray
    roof_ns: np.ndarray
    bound: np.ndarray
    unmodelled_rows: np.ndarray
    unmodelled_reason: np.ndarray  # per unmodelled row: index into reasons
    reasons: list[tuple[str, str]]  # (op or kernel name, why)
    kernel_ns: int
    modelled_ns: int
    notes: list[str] = field(default_factory=list)
    gpus: dict[int, str] = field(default_factory=dict)  # device -> the GPU's limits name ("" unknown)
    limits: dict[int, GpuLimits] = field(default_factory=dict)  # device -> its limits, where known

    @property
    def coverage(self) -> float:
        return self.modelled_ns / self.kernel_ns if self.kernel_ns else 0.0


def device_names(cols: TraceColumns) -> dict[int, str]:
    """``deviceProperties``' names by device id."""
    out = {}
    for entry in cols.metadata.get("deviceProperties") or []:
        if type(entry) is dict and type(entry.get("id")) is int and type(entry.get("name")) is str:
            out[entry["id"]] = entry["name"]
    return out


def roofline(cols: TraceColumns, extra_limits: Mapping[str, GpuLimits] | None = None,
             stacks: Stacks | None = None) -> Roofline:
    """The roofline of ``cols``' kernels. The columns need the CPU ops on the launch calls' stacks
    and their shapes (``scan(op_shapes=is_modelled)``)."""
    gpu, cpu = cols.gpu, cols.cpu_ops
    kernels = np.flatnonzero(gpu.kind == KERNEL)
    dur = np.maximum(gpu.dur[kernels], 0).astype(np.int64)
    stacks = stacks if stacks is not None else build_stacks(cols)
    owner = _modelled_owner(stacks.gpu_op()[kernels], cpu.name, stacks.cpu_parent,
                            np.array([is_modelled(n) for n in cols.names] or [False]))
    shape = cpu.shape if "shape" in cpu.cols else np.full(len(cpu), -1, np.int32)
    has = owner >= 0
    pair = np.full(len(kernels), -1, np.int64)
    pair[has] = cpu.name[owner[has]].astype(np.int64) << 32 | (shape[owner[has]].astype(np.int64) + 1)
    distinct, pair_of = np.unique(pair[has], return_inverse=True)
    works: list[Work | str] = []
    labels: list[tuple[str, tuple | None]] = []
    kernel_names = gpu.name[kernels[has]]
    for j, p in enumerate(distinct.tolist()):
        name, shape_id = cols.names[p >> 32], (p & 0xFFFFFFFF) - 1
        names_of = [cols.names[i] for i in np.unique(kernel_names[pair_of == j]).tolist()]
        shapes = cols.op_shapes[shape_id] if shape_id >= 0 else None
        works.append(op_work(name, shapes, names_of))
        labels.append((name, shapes))

    work_of = np.full(len(kernels), -1, np.int64)  # index into works
    work_of[has] = pair_of
    _optimizer_steps(cols, owner, work_of, works, labels)
    ok = np.array([isinstance(w, Work) for w in works] + [False])[work_of]
    reason, reasons = _reasons(cols, kernels, stacks, owner, work_of, works, ok)
    rows, own, widx, kdur = kernels[ok], owner[ok], work_of[ok], dur[ok]
    total_flops = np.array([w.flops if isinstance(w, Work) else 0 for w in works] + [0], np.int64)[widx]
    total_bytes = np.array([w.bytes if isinstance(w, Work) else 0 for w in works] + [0], np.int64)[widx]
    flops, nbytes = split_by_duration(own, kdur, total_flops), split_by_duration(own, kdur, total_bytes)

    keys, key = _keys(works, labels, widx)
    units = _units(cols, works, widx, gpu.name[rows])
    roof_ns, bound, limits, notes = _roofs(cols, gpu.device[kernels], ok, units, flops, nbytes, extra_limits)
    if has.any() and not (shape[owner[has]] >= 0).any():  # no op that owns a kernel has shapes
        notes.insert(0, "no CPU op carries shapes (Input Dims): nothing modelled; profile with record_shapes=True")
    return Roofline(rows, own, key, keys, flops, nbytes, roof_ns, bound, kernels[~ok], reason, reasons,
                    int(dur.sum()), int(kdur.sum()), notes,
                    {d: (lim.name if lim else "") for d, lim in limits.items()}, {d: l for d, l in limits.items() if l})


def _optimizer_steps(cols: TraceColumns, owner: np.ndarray, work_of: np.ndarray, works: list,
                     labels: list[tuple[str, tuple | None]]) -> None:
    """Fused Adam(W) steps whose TensorLists' shapes are not recorded: where DDP all-reduced the
    gradients since the previous step (``record_param_comms`` all-reduces that start after the
    previous fused step ends and before this one starts), the parameters are those elements, of
    the all-reduce's element size. Each such step gets a work of its own (``works``, ``labels`` and
    ``work_of`` are extended in place)."""
    missing = [j for j, (name, _) in enumerate(labels) if name in FUSED_OPTIMIZERS and isinstance(works[j], str)]
    if not missing:
        return
    cpu = cols.cpu_ops
    shape = cpu.shape if "shape" in cpu.cols else np.full(len(cpu), -1, np.int32)
    names = np.array([n == COLLECTIVE for n in cols.names] or [False])
    comms = [(int(cpu.ts[i]), *allreduce_elements(cols.op_shapes[shape[i]])) for i in
             np.flatnonzero(names[cpu.name] & (shape >= 0)).tolist() if is_allreduce(cols.op_shapes[shape[i]])]
    if not comms:
        return
    comm_ts = np.array([c[0] for c in comms], np.int64)
    order = np.argsort(comm_ts, kind="stable")
    comm_ts = comm_ts[order]
    elems = np.concatenate([[0], np.cumsum(np.array([c[1] for c in comms], np.int64)[order])])
    size = next((c[2] for c in comms if c[2] is not None), None)
    if size is None:
        return
    steps = np.array([n in FUSED_OPTIMIZERS for n in cols.names] or [False])[cpu.name]
    step_rows = np.flatnonzero(steps)
    step_rows = step_rows[np.argsort(cpu.ts[step_rows], kind="stable")]
    prev_end = np.r_[np.iinfo(np.int64).min, (cpu.ts[step_rows] + np.maximum(cpu.dur[step_rows], 0))[:-1]]
    window = {int(r): (int(p), int(cpu.ts[r])) for r, p in zip(step_rows.tolist(), prev_end.tolist())}
    made: dict[tuple[int, int], int] = {}
    for k in np.flatnonzero(np.isin(work_of, missing)).tolist():
        lo, hi = window[int(owner[k])]
        count = int(elems[np.searchsorted(comm_ts, hi, "left")] - elems[np.searchsorted(comm_ts, lo, "right")])
        if count <= 0:
            continue
        key = (int(work_of[k]), count)
        if key not in made:
            made[key] = len(works)
            works.append(fused_adam_of_elements(count, size))
            labels.append(labels[key[0]])
        work_of[k] = made[key]


def _modelled_owner(inner: np.ndarray, names: np.ndarray, parent: np.ndarray, modelled: np.ndarray) -> np.ndarray:
    """Per kernel: the innermost op on its launch's stack that has a work model (-1 none)."""
    current = inner.astype(np.int64)
    todo = np.flatnonzero(current >= 0)
    while len(todo):
        todo = todo[~modelled[names[current[todo]]]]
        current[todo] = parent[current[todo]]
        todo = todo[current[todo] >= 0]
    return current


def split_by_duration(owner: np.ndarray, dur: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Each owner's ``total`` (the same on each of its rows) split among its rows in proportion to
    ``dur`` (equally where its durations are all 0), in whole units: each share rounded down, the
    rest to the owner's longest row (its first, on ties), so an owner's shares add up to its total."""
    out = np.zeros(len(owner), np.int64)
    if not len(owner):
        return out
    order = np.argsort(owner, kind="stable")
    o, d, t = owner[order], dur[order], total[order]
    first = np.flatnonzero(np.r_[True, o[1:] != o[:-1]])
    group = np.cumsum(np.r_[True, o[1:] != o[:-1]]) - 1
    sums = np.add.reduceat(d, first)
    counts = np.diff(np.r_[first, len(o)])
    weight = np.where(sums[group] > 0, d, 1).astype(np.float64)
    whole = np.where(sums > 0, sums, counts).astype(np.float64)[group]
    share = np.minimum(np.floor(t.astype(np.float64) * (weight / whole)), t.astype(np.float64)).astype(np.int64)
    rest = t[first] - np.add.reduceat(share, first)
    longest = _group_argmax(d, group, first)
    share[longest] += rest
    out[order] = share
    return out


def _group_argmax(values: np.ndarray, group: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per group (rows ``first[g]`` on, sorted by group): the row of its largest value, the first on ties."""
    largest = np.flatnonzero(values == np.maximum.reduceat(values, first)[group])  # ascending, so by group
    return largest[np.searchsorted(group[largest], np.arange(len(first)))]


def _keys(works: list, labels: list[tuple[str, tuple | None]], widx: np.ndarray) -> tuple[list[OpKey], np.ndarray]:
    """One key per (op name, shapes, dtype), and each modelled kernel's."""
    keys: dict[tuple, int] = {}
    key_of_work = np.full(len(works) + 1, -1, np.int64)
    for j, (work, (name, shapes)) in enumerate(zip(works, labels)):
        if isinstance(work, Work):
            k = (name, _dims_text(shapes), work.dtype, work.family)
            key_of_work[j] = keys.setdefault(k, len(keys))
    return [OpKey(*k) for k in keys], key_of_work[widx]


def _dims_text(shapes: tuple | None) -> str:
    """An op's ``Input Dims`` as compact JSON (``[[64,2048],[2048,1000]]``), the empty lists of
    non-tensor arguments left out at the end."""
    dims = list(shapes[0]) if shapes and type(shapes[0]) is list else []
    while dims and dims[-1] == []:
        dims.pop()
    return orjson.dumps(dims).decode()


def _units(cols: TraceColumns, works: list, widx: np.ndarray, kernel_name: np.ndarray) -> np.ndarray:
    """Per modelled kernel: its peak key (float32 matrix work per kernel: TF32 where the kernel says so)."""
    unit = np.array([w.unit if isinstance(w, Work) else "" for w in works] + [""], object)[widx]
    choose = np.flatnonzero(unit == TF32_CHOICE)
    if len(choose):
        by_name = {i: float32_unit(cols.names[i]) for i in np.unique(kernel_name[choose]).tolist()}
        unit[choose] = [by_name[i] for i in kernel_name[choose].tolist()]
    return unit


def _roofs(cols: TraceColumns, kernel_device: np.ndarray, modelled: np.ndarray, units: np.ndarray, flops: np.ndarray,
           nbytes: np.ndarray, extra: Mapping[str, GpuLimits] | None
           ) -> tuple[np.ndarray, np.ndarray, dict[int, GpuLimits | None], list[str]]:
    """Roofline time (ns, rounded up; -1 unknown) and bound per modelled kernel (``modelled``: a mask
    of the kernels, whose devices are ``kernel_device``); every kernel's GPU by device; notes."""
    roof = np.full(len(units), -1, np.int64)
    bound = np.full(len(units), NO_BOUND, np.int8)
    device = kernel_device[modelled]
    names = device_names(cols)
    gpus: dict[int, GpuLimits | None] = {}
    notes: list[str] = []
    for d in np.unique(kernel_device).tolist():
        on = device == d
        name = names.get(d)
        limits = limits_for(name, extra) if name is not None else None
        gpus[d] = limits
        if limits is None:
            what = f"GPU {d} ({name}): not in the GPU limits table" if name else \
                f"GPU {d}: not named (no deviceProperties)"
            notes.append(f"{what}, so no roofline (add it: --gpu-limits)")
            continue
        missing = set()
        for unit in np.unique(units[on]).tolist():
            mine = np.flatnonzero(on & (units == unit))
            peak = limits.peak(unit)
            if peak is None:
                missing.add(unit)
                continue
            compute = flops[mine].astype(np.float64) / (float(peak) * 1e3)  # TFLOP/s = 1e3 FLOP per ns
            memory = nbytes[mine].astype(np.float64) / float(limits.memory_gbps)  # GB/s = 1 byte per ns
            roof[mine] = np.ceil(np.maximum(compute, memory)).astype(np.int64)
            bound[mine] = np.where(compute >= memory, COMPUTE, MEMORY)
        if missing:
            notes.append(f"{limits.name} has no peak for {', '.join(sorted(missing))}: those kernels get no roofline")
    return roof, bound, gpus, notes


def _reasons(cols: TraceColumns, kernels: np.ndarray, stacks: Stacks, owner: np.ndarray, work_of: np.ndarray,
             works: list, ok: np.ndarray) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Per kernel not modelled, an index into the reasons: (name, why) of the op whose work is missing,
    the innermost launching op without a model, or the kernel with no launching op."""
    rows = np.flatnonzero(~ok)
    inner = stacks.gpu_op()[kernels[rows]]
    own = owner[rows]
    # a code per cause: the work's index, else the innermost op's name, else the kernel's name
    kind = np.where(own >= 0, 0, np.where(inner >= 0, 1, 2))
    what = cols.gpu.name[kernels[rows]].astype(np.int64)
    what[kind == 0] = work_of[rows][kind == 0]
    what[kind == 1] = cols.cpu_ops.name[inner[kind == 1]]
    codes, reason = np.unique(kind.astype(np.int64) << 32 | what.astype(np.int64), return_inverse=True)
    texts = []
    for code in codes.tolist():
        k, w = code >> 32, code & 0xFFFFFFFF
        if k == 0:
            first = np.flatnonzero(work_of == w)[0]
            texts.append((cols.names[cols.cpu_ops.name[owner[first]]], works[w]))
        elif k == 1:
            texts.append((cols.names[w], no_model_reason(cols.names[w])))
        else:
            texts.append((cols.names[w], NO_CPU_OP))
    return reason.astype(np.int32), texts
