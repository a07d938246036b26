"""A trace read once, every analysis a method: ``trace = traceforge.load("rank0.json.gz")``.

The one scan keeps compact columns: GPU ops and launch calls in memory, CPU ops waiting on
disk (most of a trace), read back only by the analyses that walk call stacks, and only the
ops those stacks pass through. Each method returns what the path-level function of the same
name returns for the file (``traceforge.queue_length(path)`` and
``traceforge.load(path).queue_length()`` are equal); times are integer ns. Each method takes
``where`` (a ``Filters``) as the path-level function does: the analysis sees only what it keeps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analyses.counters.tables import has_counters
from ..analyses.cross_trace.stats import rank_of
from ..analyses.gpu_time.busy import KERNEL_WAIT_NS
from ..analyses.gpu_time.classify import Classified, classify_columns, seconds_to_ns
from ..analyses.gpu_time.rules import DEFAULT_RULES, RuleSet, load_rules
from ..analyses.launches.calls import is_call_of
from ..analyses.launches.delay import launch_ops, launch_table
from ..analyses.patterns.by_op import DEFAULT_MIN_LEN, DEFAULT_TOP_K, find_patterns, operator_marks
from ..analyses.structure.filters import Filters
from ..analyses.structure.stacks import stack_ops
from ..annotator.plugin import Analysis
from ..annotator.registry import ANALYSES, FEATURES, declared_columns, has_table, stats_of, table_of, with_defaults
from ..annotator.run import AnnotateResult, annotate
from ..columns.info import summarize
from ..columns.scan import TraceColumns, scan
from ..errors import UsageError
from ..io.read.codec import input_codec, read_once
from ..io.read.rank_files import name_rank
from ..util.lazy_pandas import pd
from .fan_out import ranked

if TYPE_CHECKING:
    from ..analyses.counters import CounterTables
    from ..analyses.cross_trace.diff import TraceDiff
    from ..analyses.cross_trace.stats import TraceStats
    from ..analyses.roofline.tables import RooflineTables


class Trace:
    """One trace's columns, read once (``load``), and the analyses on them."""

    def __init__(self, path: str, columns: TraceColumns):
        self.path = path
        self._cols = columns

    @classmethod
    def read(cls, path: str | os.PathLike) -> Trace:
        """Scan ``path`` once (``-``: standard input, which is then read in full)."""
        path = os.fspath(path)
        cols = scan(path, cpu_ops=True, spill_cpu_ops=True, memory=True)
        if cols.spilled_cpu_ops is not None:
            cols.spilled_cpu_ops.keep_open()  # every stack analysis reads it again
        return cls(path, cols)

    def __repr__(self) -> str:
        return f"Trace({self.path!r}: {len(self._cols.gpu):,} GPU ops, {len(self._cols.launches):,} launch calls)"

    @property
    def metadata(self) -> dict:
        """The trace's top-level keys other than ``traceEvents``."""
        return self._cols.metadata

    @property
    def columns(self) -> TraceColumns:
        """The columns, for analyses of your own (``analyses.*`` take them); do not change them."""
        return self._view()

    def _view(self, where: Filters | None = None) -> TraceColumns:
        """A copy of the columns' record (their arrays shared) for an analysis to rebind freely;
        of what ``where`` keeps, if given."""
        return where.apply(replace(self._cols)) if where else replace(self._cols)

    def _stacks(self, marked: np.ndarray | None = None, launch_apis: frozenset[str] | None = None,
                where: Filters | None = None) -> TraceColumns:
        """The columns with the CPU ops on call stacks read back (of launch calls of ``launch_apis``
        only, when given, as a scan keeping only those would have them)."""
        cols = self._view(where)
        if launch_apis is not None:
            keep = is_call_of(cols.names, launch_apis)[cols.launches.name]
            cols.launches = cols.launches.take(np.flatnonzero(keep))
        return stack_ops(cols, marked)

    def info(self) -> dict[str, Any]:
        """What is in the trace: events by phase and category, devices, streams, time span."""
        return summarize(self._view(), input_codec(self.path) if self.path != "-" else "")

    def queue_length(self, *, launched_before_ns: int | None = None, where: Filters | None = None) -> pd.DataFrame:
        """Queue length change points per (device, stream): device, stream, ts (ns), queue_length."""
        from ..analyses.launches.queue_length import queue_length

        return queue_length(self._view(where), launched_before_ns=launched_before_ns)

    def memcpy_bandwidth(self, *, where: Filters | None = None) -> pd.DataFrame:
        """Bandwidth change points per (device, copy kind): device, kind, ts (ns), gbps."""
        from ..analyses.memory.memcpy_bw import memcpy_bandwidth

        return memcpy_bandwidth(self._view(where))

    def launch_stats(self, *, apis: frozenset[str] | None = None, launched_before_ns: int | None = None,
                     where: Filters | None = None) -> pd.DataFrame:
        """One row per GPU op with its launch call (see ``traceforge.launch_stats``)."""
        apis = apis or None  # by correlation, whatever the calls are named
        cols = self._stacks(launch_apis=apis, where=where)
        return launch_table(cols, apis=apis, launched_before_ns=launched_before_ns, op_names=launch_ops(cols))

    def critical_path(self, *, annotation: str | None = None, step: int | None = None,
                      where: Filters | None = None, segments: bool = True, hta: bool = False) -> Any:
        """The critical path of each instance of ``annotation`` (see ``traceforge.critical_path``)."""
        from ..analyses.critical_path.path import critical_path

        return critical_path(self._view(where), annotation, step, segments=segments, hta=hta)

    def stats(self, *, kernel_wait_ns: int = KERNEL_WAIT_NS, rank: int | None = None,
              tables: Collection[str] | None = None, where: Filters | None = None,
              hta: bool | str = False) -> TraceStats:
        """Streams, activity, top kernels, idle time, ... (see ``analyses.stats``); ``tables``
        picks which are made; ``hta``: HTA's choices (``traceforge.stats``)."""
        cols = self._view(where)
        rank = rank if rank is not None else rank_of(cols)
        return stats_of(cols, rank=rank if rank is not None else name_rank(self.path) or 0,
                        kernel_wait_ns=kernel_wait_ns, tables=tables, hta=hta)

    def classified(self, rules: str | RuleSet = DEFAULT_RULES, *, elapsed_s: float | str | None = None,
                   where: Filters | None = None) -> Classified:
        """GPU time per category and per kernel (``.table``, ``.kernels``) by ``rules``."""
        elapsed_ns = None if elapsed_s is None else seconds_to_ns(elapsed_s)
        return classify_columns(self._view(where), load_rules(rules), elapsed_ns=elapsed_ns)

    def classify(self, rules: str | RuleSet = DEFAULT_RULES, *, elapsed_s: float | str | None = None,
                 where: Filters | None = None) -> pd.DataFrame:
        """GPU time per (device, category) (see ``traceforge.classify``)."""
        return self.classified(rules, elapsed_s=elapsed_s, where=where).table

    def classify_kernels(self, rules: str | RuleSet = DEFAULT_RULES, *, where: Filters | None = None) -> pd.DataFrame:
        """Per (device, GPU op name): its category, instances, duration_ns, nonoverlapped_ns."""
        return self.classified(rules, where=where).kernels

    def patterns(self, op: str | None = None, *, op_regex: str | None = None, nested: bool = False,
                 min_len: int = DEFAULT_MIN_LEN, max_len: int | None = None, top_k: int = DEFAULT_TOP_K,
                 started_before_ns: int | None = None, where: Filters | None = None) -> pd.DataFrame:
        """Top GPU op sequences (see ``traceforge.patterns``)."""
        if op is None and op_regex is None:
            cols = self._view(where)
        else:
            cols = self._stacks(operator_marks(op, op_regex)(self._cols.names), where=where)
        return find_patterns(cols, op=op, op_regex=op_regex, nested=nested, min_len=min_len, max_len=max_len,
                             top_k=top_k, started_before_ns=started_before_ns).table_with_totals()

    def counters(self, *, ncu: str | None = None, ncu_skip: int = 0, peak_dram_gbps: float | None = None,
                 peak_tensor_pct: float | None = None, where: Filters | None = None) -> CounterTables:
        """Hardware counters per kernel (see ``traceforge.counters``)."""
        from ..analyses.counters import checked_counter_options, counter_tables

        options = checked_counter_options(ncu=ncu, ncu_skip=ncu_skip, peak_dram_gbps=peak_dram_gbps,
                                          peak_tensor_pct=peak_tensor_pct)
        cols = self._stacks(where=where) if has_counters(self._cols, options["ncu"]) else self._view(where)
        return counter_tables(cols, **options)

    def diff(self, other: Trace, *, rules: str | RuleSet = DEFAULT_RULES, tables: Collection[str] | None = None,
             per_step: bool | None = None, where: Filters | None = None) -> TraceDiff:
        """``other`` against this trace, other minus this (see ``traceforge.diff``)."""
        from ..analyses.cross_trace.diff import compare

        return compare(self._view(where), other._view(where), rules, tables=tables, per_step=per_step)

    def roofline(self, *, gpu_limits: str | None = None, where: Filters | None = None) -> RooflineTables:
        """What each GPU kernel achieves against its GPU's limits (see ``traceforge.roofline``); reads
        the file again for the CPU ops' shapes, which ``load`` does not parse."""
        return self.table_result("roofline", where=where, gpu_limits=gpu_limits)

    def table_result(self, analysis: str, *, where: Filters | None = None, **options: Any) -> Any:
        """The full result of an annotate analysis that declares one (``Analysis.result``)."""
        declared = ANALYSES.get(analysis)
        if declared is None or declared.result is None:
            having = [name for name, a in ANALYSES.items() if a.result is not None]
            raise UsageError(f"no analysis named {analysis!r} has a result (these do: {', '.join(having)})")
        return declared.result(self._columns_of(declared, options, where), with_defaults([declared], options))

    def _columns_of(self, declared: Analysis, options: dict[str, Any], where: Filters | None) -> TraceColumns:
        """The columns ``declared`` reads: the loaded ones, or, for an analysis that reads CPU op shapes
        (which ``load`` leaves out: parsing them costs as much as the rest of the scan), the file read
        again by the analysis's own scan plan."""
        if declared.op_shapes is None:
            return self._view(where)
        if read_once(self.path):
            raise UsageError(f"{declared.name} reads the trace again for the CPU ops' shapes: give a file, not "
                             "stdin or a FIFO")
        return declared_columns(self.path, declared.name, options, where)

    def table(self, analysis: str, *, where: Filters | None = None, **options: Any) -> pd.DataFrame:
        """The table of a feature that has one (``--queue-length``: ``"queue_length"``; ``registry.table_of``),
        with its options (those not given take their declared defaults)."""
        declared = FEATURES.get(analysis)
        if declared is None or not has_table(declared):
            having = [name for name, a in FEATURES.items() if has_table(a)]
            raise UsageError(f"no analysis named {analysis!r} has a table (these do: {', '.join(having)})")
        return table_of(declared, self._columns_of(declared, options, where), options)

    def annotate(self, out: str | None = None, *, analyses: Iterable[str] = (), options: dict[str, Any] | None = None,
                 where: Filters | None = None, **flags: bool) -> AnnotateResult:
        """Write the trace with the chosen analyses' tracks to ``out`` (see ``traceforge.annotate``).
        The copy needs the trace's bytes, so the file is read again."""
        return annotate(self.path, out, analyses=tuple(analyses), options=options, where=where, **flags)


def _feature_method(feature: str) -> Callable[..., pd.DataFrame]:
    """``Trace.NAME(where=..., **options)``: the table of the feature ``feature`` (``Trace.table``)."""
    def method(self: Trace, *, where: Filters | None = None, **options: Any) -> pd.DataFrame:
        return self.table(feature, where=where, **options)

    declared = FEATURES[feature]
    method.__name__ = method.__qualname__ = declared.api or feature
    method.__doc__ = f"The table of {feature} (``Trace.table({feature!r})``): {declared.help}."
    return method


# Each feature with a table and no method of its name written above has one made from its declaration.
for _name, _feature in FEATURES.items():
    if has_table(_feature) and not hasattr(Trace, _feature.api or _name):
        setattr(Trace, _feature.api or _name, _feature_method(_name))


def _read(path: str, rank: int) -> Trace:
    """``Trace.read`` as a ``fan_out.ranked`` job (the rank is the caller's)."""
    return Trace.read(path)


class Traces:
    """Several ranks' traces, each read once: ``traces[rank]`` is a ``Trace``; the methods
    that make one table per trace concatenate them with a ``rank`` column first."""

    def __init__(self, by_rank: dict[int, Trace]):
        self.by_rank = dict(sorted(by_rank.items()))

    @classmethod
    def read(cls, inputs: Iterable[str | os.PathLike]) -> Traces:
        return cls({rank: trace for rank, _, trace in ranked([os.fspath(p) for p in inputs], _read)})

    def __getitem__(self, rank: int) -> Trace:
        return self.by_rank[rank]

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.by_rank.values())

    def __len__(self) -> int:
        return len(self.by_rank)

    def _each(self, method: str, **kwargs: Any) -> pd.DataFrame:
        frames = []
        for rank, trace in self.by_rank.items():
            df = getattr(trace, method)(**kwargs)
            frames.append(df.assign(rank=rank)[["rank", *df.columns]])
        return pd.concat(frames, ignore_index=True)

    def queue_length(self, **kwargs: Any) -> pd.DataFrame:
        return self._each("queue_length", **kwargs)

    def memcpy_bandwidth(self, **kwargs: Any) -> pd.DataFrame:
        return self._each("memcpy_bandwidth", **kwargs)

    def launch_stats(self, **kwargs: Any) -> pd.DataFrame:
        return self._each("launch_stats", **kwargs)

    def classify(self, rules: str | RuleSet = DEFAULT_RULES, **kwargs: Any) -> pd.DataFrame:
        return self._each("classify", rules=rules, **kwargs)

    def patterns(self, op: str | None = None, **kwargs: Any) -> pd.DataFrame:
        return self._each("patterns", op=op, **kwargs)

    def stats(self, *, kernel_wait_ns: int = KERNEL_WAIT_NS, tables: Collection[str] | None = None,
              where: Filters | None = None, hta: bool | str = False) -> TraceStats:
        """Every rank's statistics in one ``TraceStats`` (each table with its ``rank`` column)."""
        from ..analyses.cross_trace.stats import TraceStats

        return TraceStats.of_ranks([trace.stats(kernel_wait_ns=kernel_wait_ns, rank=rank, tables=tables, where=where,
                                                hta=hta) for rank, trace in self.by_rank.items()])


def load(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> Trace | Traces:
    """Read a trace once (a path), or several ranks' traces (a list of paths, or a directory)."""
    if isinstance(inputs, (str, os.PathLike)) and not os.path.isdir(inputs):
        return Trace.read(inputs)
    return Traces.read([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)
