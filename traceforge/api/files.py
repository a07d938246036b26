"""The path-level functions: one read of a file for one analysis, with the scan that keeps
just what it reads (``reads``). ``traceforge.load`` reads once for many instead.

Each takes ``where``: a ``Filters`` (``--steps``, ``--window``, ``--kernel``, ``--op``); the
analysis sees only what it keeps, e.g. ``traceforge.stats(path, where=Filters(steps="2-3"))``."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..analyses.gpu_time.busy import KERNEL_WAIT_NS
from ..analyses.gpu_time.classify import Classified, classify_columns, seconds_to_ns
from ..analyses.gpu_time.rules import DEFAULT_RULES, RuleSet, load_rules
from ..analyses.patterns.by_op import DEFAULT_MIN_LEN, DEFAULT_TOP_K, find_patterns
from ..analyses.structure.filters import Filters
from ..annotator.registry import FEATURES, declared_columns, has_table, reads_memory, stats_of, table_of
from ..errors import UsageError
from ..plan import reads
from ..util.lazy_pandas import pd
from .fan_out import ranked

T = TypeVar("T")

if TYPE_CHECKING:
    from ..analyses.counters import CounterTables
    from ..analyses.critical_path.path import CriticalPath
    from ..analyses.cross_trace.diff import TraceDiff
    from ..analyses.cross_trace.stats import TraceStats
    from ..analyses.roofline.tables import RooflineTables


def queue_length(path: str, *, launched_before_ns: int | None = None, where: Filters | None = None) -> pd.DataFrame:
    """Queue length change points of every (device, stream): device, stream, ts (ns), queue_length."""
    from ..analyses.launches.queue_length import queue_length as compute

    return compute(reads.gpu_only_columns(path, where), launched_before_ns=launched_before_ns)


def memcpy_bandwidth(path: str, *, where: Filters | None = None) -> pd.DataFrame:
    """Bandwidth change points of every (device, copy kind): device, kind, ts (ns), gbps."""
    from ..analyses.memory.memcpy_bw import memcpy_bandwidth as compute

    return compute(reads.gpu_only_columns(path, where))


def launch_stats(path: str, *, apis: frozenset[str] | None = None, launched_before_ns: int | None = None,
                 where: Filters | None = None, hta: bool = False) -> pd.DataFrame:
    """One row per GPU op with its launch call: cpu_duration, gpu_duration, launch_delay (ns;
    negative kept, flagged in negative_delay), the launching CPU op, ... (see
    ``analyses.launch_delay.launch_table``). ``apis`` narrows the launch APIs (e.g.
    ``HTA_LAUNCH_STATS_APIS``). ``hta``: HTA's table instead (``hta_choices.hta_launch_table``,
    what ``launch-stats --hta`` reads; ``apis`` and ``launched_before_ns`` are then HTA's). An
    empty table says why in ``df.attrs["message"]``."""
    from ..analyses.hta.choices import hta_launch_table, keeps_hta_launch
    from ..analyses.launches.calls import calls_of
    from ..analyses.launches.delay import launch_table_consuming

    if hta:
        if apis is not None or launched_before_ns is not None:
            raise UsageError("launch_stats: hta=True makes HTA's choices of apis and launched_before_ns")
        return hta_launch_table(reads.launch_columns(path, where=where, keep_launch=keeps_hta_launch))
    cols = reads.launch_columns(path, where, keep_launch=calls_of(apis) if apis else None)
    return launch_table_consuming(cols, apis=apis or None, launched_before_ns=launched_before_ns)


def roofline(path: str, *, gpu_limits: str | None = None, where: Filters | None = None) -> RooflineTables:
    """What each GPU kernel achieves against its GPU's limits (docs/roofline.md): the ops, families,
    steps and unmodelled tables, coverage and notes. ``gpu_limits``: a JSON file of GPU limits."""
    from ..annotator.plugins.roofline import tables

    options = {"gpu_limits": gpu_limits}
    return tables(declared_columns(path, "roofline", options, where), options)


def stats(inputs: str | os.PathLike | Iterable[str | os.PathLike], *, kernel_wait_ns: int = KERNEL_WAIT_NS,
          tables: Collection[str] | None = None, where: Filters | None = None, jobs: int | None = 1,
          cluster: str | None = None, hta: bool | str = False) -> TraceStats:
    """Statistics of one trace or of several ranks' traces (files or directories): DataFrames
    (see ``analyses.stats``); ``tables`` picks which are made (default ``default_tables()``). Each trace's rank is its ``distributedInfo.rank``, else the number
    in its file name (``rank3``), else its position among the inputs. ``jobs``: traces read at
    once, in processes (None: the cores), or on the Dask scheduler at ``cluster`` (``fan_out``).
    ``hta``: HTA's choices (``analyses.hta_choices``: True for the latest HTA's, or a version), for
    HTA's numbers."""
    from ..analyses.cross_trace.stats import TraceStats

    return TraceStats.of_ranks([s for _, s in stats_each(inputs, _itself, kernel_wait_ns=kernel_wait_ns, tables=tables,
                                                         where=where, jobs=jobs, cluster=cluster, hta=hta)])


def stats_each(inputs: str | os.PathLike | Iterable[str | os.PathLike], each: Callable[[TraceStats], T], *,
               kernel_wait_ns: int = KERNEL_WAIT_NS, tables: Collection[str] | None = None,
               where: Filters | None = None, jobs: int | None = 1, cluster: str | None = None,
               hta: bool | str = False) -> list[tuple[int, T]]:
    """(rank, ``each(statistics of the trace)``) for every trace of ``inputs``, in order (the options
    as for ``stats``). ``each`` runs where the trace is read: in the job, in parallel, so only
    what it keeps (e.g. a rank's text) comes back, not every table of every rank; with
    ``jobs`` other than 1 or ``cluster``, ``each`` and its result must pickle."""
    paths = [os.fspath(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    job = partial(_rank_stats, each, kernel_wait_ns, None if tables is None else tuple(tables), where, hta)
    return [(rank, kept) for rank, _, kept in ranked(paths, job, jobs=jobs, cluster=cluster)]


def _itself(value: T) -> T:
    return value


def _rank_stats(each: Callable[[TraceStats], T], kernel_wait_ns: int, tables: Collection[str] | None,
                where: Filters | None, hta: bool | str, path: str, rank: int) -> T:
    """``each`` of one trace's statistics (a ``ranked`` job: runs where the trace is read)."""
    cols = reads.stats_columns(path, where, memory=reads_memory(tables))
    return each(stats_of(cols, rank=rank, kernel_wait_ns=kernel_wait_ns, tables=tables, hta=hta))


def compare_tails(a: str | os.PathLike, b: str | os.PathLike, *, where: Filters | None = None) -> pd.DataFrame:
    """Trace ``b``'s tail concentration per activity kind against trace ``a``'s, as ratios B / A
    (``analyses.tail_compare``); each is one trace (one rank), read for its ``tails`` alone."""
    from ..analyses.cross_trace.tail_compare import compared_tails

    def tails(path: str | os.PathLike) -> pd.DataFrame:
        table = stats(path, tables=("tails",), where=where).tails
        if table["rank"].nunique() > 1:
            raise UsageError(f"{os.fspath(path)}: several ranks; compare one trace with another")
        return table

    return compared_tails(tails(a), tails(b))


def export(path: str, *, csv_dir: str | None = None, parquet_dir: str | None = None, where: Filters | None = None
           ) -> dict[str, pd.DataFrame]:
    """One DataFrame per activity kind (exact ns); also written as CSV / Parquet if a directory is given."""
    from ..analyses.structure.export_tables import tables_by_kind
    from ..io.write.table_files import check_parquet, write_tables

    if parquet_dir is not None:
        check_parquet()
    chunks = list(tables_by_kind(reads.export_columns(path, where)))
    write_tables(chunks, csv_dir=csv_dir, parquet_dir=parquet_dir)
    frames: dict[str, list[pd.DataFrame]] = {}
    for chunk in chunks:
        frames.setdefault(chunk.kind, []).append(chunk.frame())
    return {kind: pd.concat(parts, ignore_index=True) for kind, parts in frames.items()}


def classified(path: str, rules: str | RuleSet = DEFAULT_RULES, *, elapsed_s: float | str | None = None,
               where: Filters | None = None, hta: bool = False) -> Classified:
    """``classify_columns`` of a Kineto trace or an nsys ``cuda_gpu_trace`` CSV at ``path``;
    ``hta``: of the GPU ops HTA keeps, at HTA's times (``reads.hta_columns``)."""
    elapsed_ns = None if elapsed_s is None else seconds_to_ns(elapsed_s)
    cols = reads.hta_columns(path, where) if hta else reads.gpu_columns(path, where)
    return classify_columns(cols, load_rules(rules), elapsed_ns=elapsed_ns)


def classify(path: str, rules: str | RuleSet = DEFAULT_RULES, *, elapsed_s: float | str | None = None,
             where: Filters | None = None) -> pd.DataFrame:
    """GPU time per (device, category) of a trace or nsys ``cuda_gpu_trace`` CSV: instances,
    duration_ns (summed), nonoverlapped_ns (each instant once, to the op that started first),
    union_ns (the category's own busy time), share of the window; a ``non-GPU`` row per device
    fills the window (GPU span, or ``elapsed_s``). ``rules``: a preset name or a JSON/TOML file."""
    return classified(path, rules, elapsed_s=elapsed_s, where=where).table


def classify_kernels(path: str, rules: str | RuleSet = DEFAULT_RULES, *, where: Filters | None = None) -> pd.DataFrame:
    """Per (device, GPU op name): its category (and stage), instances, duration_ns, nonoverlapped_ns."""
    return classified(path, rules, where=where).kernels


def counters(path: str, *, ncu: str | None = None, ncu_skip: int = 0, peak_dram_gbps: float | None = None,
             peak_tensor_pct: float | None = None, where: Filters | None = None) -> CounterTables:
    """Hardware counters per kernel from the trace's CUPTI range-profiler events and/or an
    ``ncu --csv --page raw`` file: ``.kernels`` (counters, operator stack, FLOPs, TFLOP/s,
    DRAM/L2 bytes, GB/s, tensor %, arithmetic intensity, efficiency), ``.operators`` (per
    top-level operator), ``.kinds`` (llm.c's per-kernel-kind summary and totals), ``.problems``
    (every mismatch and unmatched row or kernel). ``path`` may be an ncu CSV alone (no
    ``ncu``, no ``where``): its rows, timed by ncu's ``gpu__time_duration.sum``."""
    from ..analyses.counters import checked_counter_options, counter_tables, ncu_tables
    from ..io.read.ncu_csv import looks_like_ncu_csv

    options = checked_counter_options(ncu=ncu, ncu_skip=ncu_skip, peak_dram_gbps=peak_dram_gbps,
                                      peak_tensor_pct=peak_tensor_pct)
    if looks_like_ncu_csv(os.fspath(path)):
        if ncu is not None or where is not None:
            raise UsageError(f"{path} is an ncu CSV: give a trace with ncu=, or the CSV alone without where=")
        return ncu_tables(os.fspath(path), peak_dram_gbps=peak_dram_gbps, peak_tensor_pct=peak_tensor_pct)
    return counter_tables(reads.counter_columns(path, options["ncu"], where), **options)


def diff(a: str, b: str, *, rules: str | RuleSet = DEFAULT_RULES, tables: Collection[str] | None = None,
         per_step: bool | None = None, where: Filters | None = None) -> TraceDiff:
    """Trace ``b`` against ``a`` (B - A): ``.ops`` per GPU op name, ``.categories`` (classifier
    ``rules``), ``.cpu_ops`` per CPU operator; ``tables`` picks which are made (default all);
    ``per_step``: values per profiler step too (default: when the step counts differ). See
    ``analyses.trace_diff``. ``where`` filters each trace (its own steps, its own start). One
    trace's columns are held at a time: its totals are all that is left of it when the other is read."""
    from ..analyses.cross_trace.diff import compared, reads_cpu_ops, totals

    rules = load_rules(rules)
    cpu_ops = reads_cpu_ops(tables)
    before = totals(reads.diff_columns(a, cpu_ops=cpu_ops, where=where), rules, tables)
    return compared(before, totals(reads.diff_columns(b, cpu_ops=cpu_ops, where=where), rules, tables),
                    tables=tables, per_step=per_step)


def patterns(
    path: str,
    op: str | None = None,
    *,
    op_regex: str | None = None,
    nested: bool = False,
    min_len: int = DEFAULT_MIN_LEN,
    max_len: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    started_before_ns: int | None = None,
    where: Filters | None = None,
) -> pd.DataFrame:
    """Top GPU op sequences: what each instance of ``op`` (exact name) or ``op_regex`` launched,
    or, with neither, repeated runs mined per stream. One row per pattern, best first: rank,
    pattern, count, length, kernels (short), gpu_ns, mean_gpu_ns, cpu_ns (operator mode),
    gpu_share, operator, kernel_names (full); ``df.attrs`` has total_gpu_ns, coverage, note.
    ``started_before_ns`` keeps instances starting before it (HTA drops the last step)."""
    mined = op is None and op_regex is None
    cols = reads.gpu_only_columns(path, where) if mined else reads.operator_columns(path, op, op_regex, where)
    return find_patterns(cols, op=op, op_regex=op_regex, nested=nested, min_len=min_len, max_len=max_len,
                         top_k=top_k, started_before_ns=started_before_ns).table_with_totals()


def critical_path(path: str, *, annotation: str | None = None, step: int | None = None,
                  where: Filters | None = None, segments: bool = True, hta: bool = False) -> CriticalPath:
    """The critical path of each instance of ``annotation`` (default each ProfilerStep#N; ``step``:
    only the one numbered so), its breakdown and segments (``analyses.critical_path``;
    ``segments=False``: the summary alone; ``hta``: HTA 0.5's graph, without the trace's
    forward-to-backward links)."""
    from ..analyses.critical_path.path import critical_path as path_of
    from ..plan.scan_plan import filtered_scan

    return path_of(filtered_scan(path, where), annotation, step, segments=segments, hta=hta)


def table(path: str, feature: str, *, where: Filters | None = None, **options: Any) -> pd.DataFrame:
    """The table of the feature ``feature`` of the trace at ``path`` (as ``Trace.table``), of one read
    that keeps what its declaration reads (``registry.declared_columns``)."""
    declared = FEATURES.get(feature)
    if declared is None or not has_table(declared):
        having = [name for name, a in FEATURES.items() if has_table(a)]
        raise UsageError(f"no analysis named {feature!r} has a table (these do: {', '.join(having)})")
    return table_of(declared, declared_columns(path, feature, options, where), options)


def _path_function(feature: str) -> Callable[..., pd.DataFrame]:
    """``traceforge.NAME(path, where=..., **options)``: the table of the feature ``feature`` (``table``)."""
    def function(path: str, *, where: Filters | None = None, **options: Any) -> pd.DataFrame:
        return table(path, feature, where=where, **options)

    declared = FEATURES[feature]
    function.__name__ = function.__qualname__ = declared.api or feature
    function.__doc__ = f"The table of {feature} of the trace at ``path`` (``table(path, {feature!r})``): {declared.help}."
    return function


# The path-level function of each feature with a table and no function of its name written above.
DERIVED: dict[str, Callable[..., pd.DataFrame]] = {
    f.api or name: _path_function(name) for name, f in FEATURES.items() if has_table(f) and (f.api or name) not in globals()}
globals().update(DERIVED)
