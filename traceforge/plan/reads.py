"""The scans of the commands and path-level functions that read more, or less, than a feature's
declaration says (``ScanPlan`` of ``annotator.registry.declared_columns`` reads just that): stats'
totals, export's every event, an nsys CSV, HTA's view, call stacks, ...

The analyses take columns; these are the scans the path-level functions and the CLI make
for them (one read each). ``Trace`` (``api.trace``) reads once for all of them instead. Each takes ``where``: the
columns of what these filters keep (``analyses.filters``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..analyses.counters.tables import has_counters
from ..analyses.hta.choices import hta_view
from ..analyses.patterns.by_op import operator_marks
from ..analyses.structure.filters import Filters
from ..analyses.structure.stacks import NameMask, stack_ops
from ..columns.nsys import is_nsys_gpu_trace, read_nsys_gpu_trace
from ..columns.scan import TraceColumns
from ..errors import UsageError
from .scan_plan import filtered_scan


def gpu_columns(path: str, where: Filters | None = None) -> TraceColumns:
    """The GPU ops of a Kineto trace (JSON, .gz, .zst) or an nsys ``cuda_gpu_trace`` CSV, told
    apart by content: no launch call or CPU op (classify and diff read none)."""
    if is_nsys_gpu_trace(path):
        return where.apply(read_nsys_gpu_trace(path)) if where else read_nsys_gpu_trace(path)
    return filtered_scan(path, where, cpu_ops=False, keep_launch=lambda name: False)


def hta_columns(path: str, where: Filters | None = None) -> TraceColumns:
    """The GPU ops of a Kineto trace as HTA's ``TraceAnalysis`` holds them (``hta_choices.hta_view``:
    whole µs, the last step cut); the launch calls are read for the cut."""
    if path != "-" and is_nsys_gpu_trace(path):
        raise UsageError(f"{path}: --hta: HTA reads Kineto traces, not nsys CSVs")
    return hta_view(filtered_scan(path, where, cpu_ops=False))


def stack_columns(path: str, *, marked: NameMask | None = None, joined_launches: bool = False,
                  also_calls: NameMask | None = None, where: Filters | None = None, **kwargs) -> TraceColumns:
    """``scan(path, **kwargs)`` keeping only the CPU ops (and, with ``joined_launches``, the
    launch calls) that call stacks pass through (``stacks.stack_ops``); they wait on disk during
    the scan."""
    cols = filtered_scan(path, where, cpu_ops=True, spill_cpu_ops=True,
                         spill_launch=(lambda name: True) if joined_launches else None, **kwargs)
    return stack_ops(cols, None if marked is None else marked(cols.names),
                     also_calls=None if also_calls is None else also_calls(cols.names))


def operator_columns(path: str, op: str | None, op_regex: str | None, where: Filters | None = None) -> TraceColumns:
    """What ``find_patterns`` reads for ``op`` / ``op_regex``: the operators' call stacks."""
    return stack_columns(path, marked=operator_marks(op, op_regex), joined_launches=True, where=where)


def counter_columns(path: str, ncu: str | None = None, where: Filters | None = None, **scan_options) -> TraceColumns:
    """What ``counter_tables`` reads. The CPU ops wait on disk during the scan; only if there
    are counters to place do those that can be on a launch call's stack come back."""
    cols = filtered_scan(path, where, cpu_ops=True, spill_cpu_ops=True, **scan_options)
    return stack_ops(cols) if has_counters(cols, ncu) else cols


def stats_columns(path: str, where: Filters | None = None, *, memory: bool = False) -> TraceColumns:
    """What ``trace_stats`` reads, of what ``where`` keeps: the CPU ops' durations and the launch
    calls' totals, which wait on disk; the [memory] events with ``memory`` (for the tables that
    read them: ``annotator.registry.reads_memory``)."""
    return filtered_scan(path, where, spill_cpu_ops=True, spill_launch=lambda name: True, memory=memory)


def export_columns(path: str, where: Filters | None = None) -> TraceColumns:
    """What ``tables_by_kind`` reads: everything, the CPU ops and launch calls on disk."""
    return filtered_scan(path, where, spill_cpu_ops=True, spill_launch=lambda name: True, op_args=True)


def launch_columns(path: str, where: Filters | None = None, *,
                   keep_launch: Callable[[str], bool] | None = None) -> TraceColumns:
    """What ``launch_table`` reads: the launch calls (those a GPU op joins, whatever their name, or
    those whose name ``keep_launch`` keeps: ``launches.calls_of`` HTA's sets, say) and their stacks."""
    if keep_launch is not None:
        return stack_columns(path, keep_launch=keep_launch, where=where)
    return stack_columns(path, joined_launches=True, where=where)


def gpu_only_columns(path: str, where: Filters | None = None) -> TraceColumns:
    """The GPU ops of a trace, no CPU op (queue length, memcpy bandwidth, mined patterns)."""
    return filtered_scan(path, where, cpu_ops=False)


def diff_columns(path: str, *, cpu_ops: bool, where: Filters | None = None) -> TraceColumns:
    """What ``trace_diff.totals`` reads: the GPU ops (or an nsys CSV's), and with ``cpu_ops`` the
    CPU ops, which wait on disk and are summed a chunk at a time; no launch call."""
    if not cpu_ops:
        return gpu_columns(path, where)
    if is_nsys_gpu_trace(path):
        return read_nsys_gpu_trace(path)
    return filtered_scan(path, where, cpu_ops=True, spill_cpu_ops=True, keep_launch=lambda name: False)
