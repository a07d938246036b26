"""Patterns drawn on the trace: one slice per occurrence, beside the stream it ran on.

Each occurrence of a top pattern becomes a slice from its first GPU op's start to the
latest end among its ops, on thread ``Patterns (stream N)`` in that GPU's process (the
stream of its first op). Occurrences that overlap in time (nested operator instances,
ops on several streams) go to extra lanes, so Perfetto drops nothing. The full kernel
names are written once per pattern, on its first occurrence; the trace's own events are
untouched unless ``tag_kernels`` adds ``"pattern": "P1"`` to the args of member ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ...analyses.launches.calls import last_step_start
from ...analyses.patterns.by_op import DEFAULT_MIN_LEN, DEFAULT_TOP_K, find_patterns, operator_marks
from ...analyses.patterns.table import ARROW, Patterns
from ...columns.scan import TraceColumns
from ...emit.tracks import Injections, SliceTrack, TidAllocator
from ...io.write.jsontext import Texts, join_rows, json_bytes
from ..plugin import Analysis, AnnotateContext, Option, count

MAX_LABEL_OPS = 6  # longer patterns are named by their first and last ops


PATTERN_OPTIONS = (
    Option("op", "operator whose launched GPU ops form the patterns (exact name, e.g. aten::addmm); without "
           "--op/--op-regex, repeated runs of GPU ops are mined", metavar="NAME"),
    Option("op_regex", "operators whose name matches this regular expression (re.search: anchor with ^...$ for "
           "whole names)", metavar="RE"),
    Option("nested", "also count operator instances nested inside another instance (default: outermost only)",
           default=False, flag=True),
    Option("min_len", f"fewest GPU ops in a pattern (default {DEFAULT_MIN_LEN})", default=DEFAULT_MIN_LEN, parse=count,
           metavar="N"),
    Option("max_len", "most GPU ops in a pattern (default: no limit with --op, 32 or --min-len when mining)",
           parse=count, metavar="N"),
    Option("top_k", f"patterns reported and drawn (default {DEFAULT_TOP_K})", default=DEFAULT_TOP_K, parse=count,
           metavar="K"),
    Option("tag_kernels", 'add "pattern": "P1" to the args of the GPU ops inside drawn patterns', default=False,
           flag=True),
)


def patterns_from_options(cols: TraceColumns, options: dict) -> Patterns:
    """``find_patterns`` with the CLI's options (``--op`` -> ``op``, ...); ``hta`` (``patterns
    --hta``): HTA's choice, the instances that start before HTA's last-step cut. HTA counts kernel
    sequences only under an operator, so mined sequences (no ``op``) have no HTA choice to take."""
    cut = last_step_start(cols) if options.get("hta") and is_operator_mode(options) else None
    return find_patterns(cols, op=options["op"], op_regex=options["op_regex"], nested=bool(options["nested"]),
                         min_len=options["min_len"], max_len=options["max_len"], top_k=options["top_k"],
                         started_before_ns=cut)


def is_operator_mode(options: dict) -> bool:
    """Whether the options ask for operator patterns (``--op``/``--op-regex``), not mined runs."""
    return options.get("op") is not None or options.get("op_regex") is not None


HTA_MINED_NOTE = ("--hta: HTA counts kernel sequences only under an operator (--op); "
                  "the mined sequences have no HTA counterpart and are traceforge's")


def build_patterns(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """The annotate step. ``ctx.options["on_patterns"]``, if set, receives the result (the
    ``patterns`` command prints its table from the same run that writes the overlay)."""
    result = patterns_from_options(cols, ctx.options)
    report: Callable[[Patterns], None] | None = ctx.options.get("on_patterns")
    if report is not None:
        report(result)
    injections = pattern_overlay(cols, result, ctx.allocator, tag_kernels=bool(ctx.options.get("tag_kernels")))
    if ctx.options.get("hta") and not is_operator_mode(ctx.options) and report is None:
        injections.summary[-1] += f" ({HTA_MINED_NOTE})"
    return injections


def pattern_overlay(cols: TraceColumns, result: Patterns, allocator: TidAllocator, *,
                    tag_kernels: bool = False) -> Injections:
    """One ``SliceTrack`` per (device, stream) holding the occurrences of the top patterns."""
    gpu, columns = cols.gpu, result.columns
    if not len(result.occ_pattern):
        return Injections([], [f"patterns: none drawn ({result.note})"])
    first_op = result.members[result.offsets[:-1]]
    start = np.minimum.reduceat(gpu.ts[result.members], result.offsets[:-1])
    end = np.maximum.reduceat(gpu.ts[result.members] + np.maximum(gpu.dur[result.members], 0), result.offsets[:-1])
    ids, counts, kernels = list(columns["pattern"]), columns["count"].tolist(), list(columns["kernel_names"])
    labels = [f"{p} ×{c}: {_label(k)}" for p, c, k in zip(ids, counts, columns["kernels"])]
    args = _occurrence_args(cols, result, ids, counts, kernels)

    device, stream = gpu.device[first_op], gpu.stream[first_op]
    tracks = []
    for d, s in sorted(set(zip(device.tolist(), stream.tolist()))):
        rows = np.flatnonzero((device == d) & (stream == s))
        tracks.append(SliceTrack(
            pid=cols.gpu_pid(d), title=f"Patterns (stream {s})", sort_index=s,
            ts=start[rows], dur=(end - start)[rows], labels=labels, label=result.occ_pattern[rows],
            args=args.take(rows), allocator=allocator,
        ))
    patches: dict[int, dict] = {}
    if tag_kernels:  # an op inside nested instances of two patterns gets "P1,P3"
        owner = np.repeat(result.occ_pattern, np.diff(result.offsets))
        tags: dict[int, list[str]] = {}
        for ordinal, p in zip(gpu.ordinal[result.members].tolist(), owner.tolist()):
            mine = tags.setdefault(ordinal, [])
            if ids[p] not in mine:
                mine.append(ids[p])
        patches = {ordinal: {"pattern": ",".join(mine)} for ordinal, mine in tags.items()}
    what = f"of {result.searched}" if result.mode == "operator" else "mined"
    summary = (f"patterns {what}: {len(ids)} drawn, {len(start):,} slices on {len(tracks)} stream "
               f"track{'s' * (len(tracks) != 1)}{f', {len(patches):,} GPU ops tagged' if tag_kernels else ''}")
    return Injections(tracks, [summary], patches)


def _label(short_kernels: str) -> str:
    ops = short_kernels.split(ARROW)
    if len(ops) <= MAX_LABEL_OPS:
        return short_kernels
    return ARROW.join(ops[:3] + [f"… {len(ops) - 5} more …"] + ops[-2:])


def _occurrence_args(cols: TraceColumns, result: Patterns, ids: list, counts: list[int],
                     kernels: list) -> Texts:
    """Each occurrence's args object as JSON text: its pattern, the pattern's count, its
    number, the operator it ran under (if any), and on the first one the full kernel names."""
    pattern, op = result.occ_pattern, result.occ_op
    number = _occurrence_numbers(pattern)
    heads = Texts.of([b'{"pattern":' + json_bytes(i) + b',"count":' + str(c).encode() + b',"occurrence":'
                      for i, c in zip(ids, counts)])
    under = op >= 0
    op_names, which = np.unique(cols.cpu_ops.name[op[under]], return_inverse=True)
    operators = Texts.of([b',"operator":' + json_bytes(cols.names[n]) for n in op_names.tolist()])
    full = Texts.of([b',"kernels":' + json_bytes(list(k)) for k in kernels])
    return join_rows([heads.take(pattern), Texts.numbers(number), operators.take(which).spread(under),
                      full.take(pattern).only(number == 1), b"}"])


def _occurrence_numbers(pattern: np.ndarray) -> np.ndarray:
    """1, 2, ... within each pattern (occurrences come grouped by pattern, in time order)."""
    index = np.arange(len(pattern))
    group_start = np.r_[True, pattern[1:] != pattern[:-1]]
    return index - np.maximum.accumulate(np.where(group_start, index, 0)) + 1


def _op_patterns(options: Mapping[str, Any]) -> bool:
    return options.get("op") is not None or options.get("op_regex") is not None


ANALYSIS = Analysis(
    "patterns", "frequent GPU op sequences (--op NAME, or mined per stream without it): one slice per "
    "occurrence of the --top-k patterns on a 'Patterns (stream N)' track",
    build_patterns, order=60, options=PATTERN_OPTIONS,
    stack_marks=lambda options: operator_marks(options.get("op"), options.get("op_regex"))
    if _op_patterns(options) else None,
    patches_args=lambda options: bool(options.get("tag_kernels")),
    launch_apis=frozenset(),  # its call stacks read the launch calls GPU ops join
    table=lambda cols, options: patterns_from_options(cols, options).table,
)
