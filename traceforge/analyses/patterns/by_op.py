"""Frequent GPU op sequences: what each instance of an operator launches, as patterns.

For each instance of the operator (outermost by default: an instance inside another
instance of a matching op is part of that one; ``nested`` counts inner ones too), the
GPU ops it launched, directly or through ops nested in it, in GPU start order, form its
sequence; identical sequences are one pattern. This is HTA's definition with its errors
fixed: the name matches exactly (HTA matches substrings, so ``aten::add`` takes
``aten::addmm``), and nesting is real containment with kernels joined to the op that
issued their launch (``stacks.build_stacks``), so a zero-duration op owns nothing.
Without an operator, ``pattern_mining`` finds repeated runs of kernels per stream.
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...io.memory.heap import give_back
from ...util.regex import shown, user_regex
from ..structure.stacks import NameMask, Stacks, build_stacks
from .table import Patterns, concat_runs, pattern_columns

DEFAULT_MIN_LEN = 3  # fewest GPU ops in a pattern
DEFAULT_TOP_K = 5  # patterns reported and drawn


def find_patterns(
    cols: TraceColumns,
    *,
    op: str | None = None,
    op_regex: str | None = None,
    nested: bool = False,
    min_len: int = DEFAULT_MIN_LEN,
    max_len: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    started_before_ns: int | None = None,
) -> Patterns:
    """Operator patterns when ``op`` or ``op_regex`` is given, else mined kernel n-grams."""
    if op is not None and op_regex is not None:
        raise UsageError("give either op or op_regex, not both")
    if min_len < 1 or top_k < 1 or (max_len is not None and max_len < min_len):
        raise UsageError(f"need min_len >= 1, top_k >= 1 and max_len >= min_len "
                         f"(got {min_len}, {top_k}, {max_len})")
    if op is None and op_regex is None:
        from .mining import mine_patterns

        if nested or started_before_ns is not None:
            raise UsageError("nested applies to operator patterns: give op or op_regex")
        return mine_patterns(cols, min_len=min_len, max_len=max_len, top_k=top_k)
    stacks = build_stacks(cols)
    give_back()  # the columns the nesting read leave resident memory (``io.paged``) before the patterns are made
    return operator_patterns(cols, stacks, op=op, op_regex=op_regex, nested=nested, min_len=min_len,
                             max_len=max_len, top_k=top_k, started_before_ns=started_before_ns)


def operator_marks(op: str | None, op_regex: str | None) -> NameMask:
    """Per name id, of a trace's names: the CPU ops operator patterns look at (the operator's,
    and those its hint lists when none matches), whose call stacks they read."""
    return lambda names: _is_operator(names, op, op_regex) | _similar(names, op, op_regex)


def matching_names(cols: TraceColumns, op: str | None, op_regex: str | None) -> np.ndarray:
    """Per name id: is it the operator (exact name, or ``re.search`` of the regex)?"""
    is_match = _is_operator(cols.names, op, op_regex)
    used = np.zeros(len(cols.names), bool)
    used[cols.cpu_ops.name] = True
    if not (is_match & used).any():
        if not len(cols.cpu_ops) and not cols.dropped_cpu_ops:
            raise UsageError(f"{cols.path}: the trace has no CPU ops, so no operator patterns")
        wanted = op if op is not None else op_regex
        near = sorted({cols.names[i] for i in np.flatnonzero(used & _similar(cols.names, op, op_regex))})
        hint = f" (similar: {', '.join(near[:5])})" if near else ""
        raise UsageError(f"{cols.path}: no CPU op {'matches' if op_regex else 'is named'} {wanted!r}{hint}")
    return is_match


def _is_operator(names: list[str], op: str | None, op_regex: str | None) -> np.ndarray:
    if op_regex is not None:
        rx = user_regex(op_regex, f"op_regex {shown(op_regex)!r} is not a regular expression")
        return np.array([rx.search(n) is not None for n in names], dtype=bool)
    return np.array([n == op for n in names], dtype=bool)


def _similar(names: list[str], op: str | None, op_regex: str | None) -> np.ndarray:
    """Per name id: does it hold what was asked for, ignoring case (the hint when none matches)?"""
    wanted = (op if op is not None else op_regex or "").lower()
    return np.array([wanted in n.lower() for n in names], dtype=bool)


def operator_patterns(
    cols: TraceColumns,
    stacks: Stacks,
    *,
    op: str | None = None,
    op_regex: str | None = None,
    nested: bool = False,
    min_len: int = DEFAULT_MIN_LEN,
    max_len: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    started_before_ns: int | None = None,
) -> Patterns:
    """Patterns of the GPU ops launched under each instance of the operator.

    Instances with fewer than ``min_len`` (or more than ``max_len``) GPU ops are left out.
    Ranked by count, then total GPU time. ``started_before_ns`` keeps only instances that
    start before it (HTA drops the last profiler step: ``launches.last_step_start``).
    """
    cpu, gpu = cols.cpu_ops, cols.gpu
    is_op = matching_names(cols, op, op_regex)[cpu.name]
    instance = is_op.copy() if nested else _outermost(stacks.cpu_parent, is_op)
    if started_before_ns is not None:
        instance &= cpu.ts < started_before_ns
    searched = op if op is not None else f"/{op_regex}/"
    n_instances = int(instance.sum())
    inst, rows = _launched_under(stacks, instance)
    order = np.lexsort((gpu.ordinal[rows], gpu.ts[rows], inst))
    inst, rows = inst[order], rows[order]
    bounds = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1], True]) if len(inst) else np.zeros(1, np.int64)
    starts, ends = bounds[:-1], bounds[1:]  # one run of rows per instance
    length = ends - starts
    keep = (length >= min_len) & (length <= (max_len if max_len is not None else len(inst)))
    dur = np.maximum(gpu.dur, 0)
    inst_gpu = (np.add.reduceat(dur[rows], starts, dtype=np.int64) if len(starts) else np.zeros(0, np.int64))[keep]
    starts, ends = starts[keep], ends[keep]
    short = int(np.count_nonzero(length < min_len)) + (n_instances - len(length))  # none launched counts too
    note = (f"{n_instances:,} {'' if nested else 'outermost '}instances of {searched}, "
            f"{int(keep.sum()):,} with {min_len}{'-' + str(max_len) if max_len else '+'} GPU ops")

    # Identical name sequences are one pattern (a loop over instances, not over kernels).
    name_seq = gpu.name[rows]
    ids: dict[bytes, int] = {}
    pattern_of = np.array([ids.setdefault(name_seq[a:b].tobytes(), len(ids)) for a, b in
                           zip(starts.tolist(), ends.tolist())], dtype=np.int64)
    n_patterns = len(ids)
    inst_row = inst[starts]
    count = np.bincount(pattern_of, minlength=n_patterns)
    gpu_ns = _sum_by(pattern_of, inst_gpu, n_patterns)
    cpu_ns = _sum_by(pattern_of, np.maximum(cpu.dur[inst_row], 0), n_patterns)
    first = np.full(n_patterns, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, pattern_of, gpu.ts[rows[starts]])
    top = np.lexsort((first, -gpu_ns, -count))[:top_k]

    rank_of = np.full(n_patterns, -1, np.int64)
    rank_of[top] = np.arange(len(top))
    occ = np.flatnonzero(rank_of[pattern_of] >= 0)
    occ = occ[np.lexsort((gpu.ts[rows[starts[occ]]], rank_of[pattern_of[occ]]))]
    offsets, members = concat_runs(rows, starts[occ], ends[occ])
    _, example = np.unique(pattern_of, return_index=True)  # an instance of each pattern
    kernels = [name_seq[starts[example[p]]:ends[example[p]]] for p in top.tolist()]
    operators = [_operator_label(cols, cpu.name[inst_row[pattern_of == p]]) for p in top.tolist()]
    columns = pattern_columns(cols, kernels, count[top], gpu_ns[top], int(dur.sum()), cpu_ns=cpu_ns[top],
                              operators=operators)
    return Patterns("operator", searched, columns, int(dur.sum()), rank_of[pattern_of[occ]],
                    inst_row[occ], offsets, members, note + f" -> {n_patterns:,} patterns", short_instances=short,
                    min_len=min_len)


def _outermost(parent: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Per CPU op: is it a matching op that no matching op encloses? Walks up from the
    matching ops only, one vector step per nesting level (from every op, the walk held
    ~30 bytes an op: the largest step of ``patterns --op``)."""
    outermost = is_op.copy()
    rows = np.flatnonzero(is_op)
    up = parent[rows]
    while len(rows):
        has = up >= 0
        rows, up = rows[has], up[has]
        inside = is_op[up]
        outermost[rows[inside]] = False
        rows, up = rows[~inside], parent[up[~inside]]
    return outermost


def _launched_under(stacks: Stacks, instance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (instance CPU op row, GPU op row) for every GPU op launched inside an instance."""
    gpu_rows = np.flatnonzero(stacks.gpu_op() >= 0)
    current = stacks.gpu_op()[gpu_rows]
    found_inst, found_rows = [], []
    while len(gpu_rows):
        hit = instance[current]
        found_inst.append(current[hit])
        found_rows.append(gpu_rows[hit])
        current = stacks.cpu_parent[current]
        up = current >= 0
        gpu_rows, current = gpu_rows[up], current[up]
    if not found_inst:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(found_inst), np.concatenate(found_rows)


def _sum_by(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per group id."""
    out = np.zeros(n, np.int64)
    np.add.at(out, group, values)
    return out


def _operator_label(cols: TraceColumns, name_ids: np.ndarray) -> str:
    """The operator names of a pattern's instances, most frequent first."""
    ids, counts = np.unique(name_ids, return_counts=True)
    return ", ".join(cols.names[i] for i in ids[np.argsort(-counts, kind="stable")].tolist())
