"""traceforge: annotate PyTorch profiler traces with analyses you can see in Perfetto.

Python API (the CLI is a thin layer over it)::

    import traceforge
    traceforge.annotate("trace.json.gz", "out.json.gz", analyses=["queue_length", "memcpy_bw"])
    df = traceforge.queue_length("trace.json.gz")       # pandas DataFrame, ts in integer ns
    df = traceforge.memcpy_bandwidth("trace.json.gz")
    df = traceforge.launch_stats("trace.json.gz")        # one row per launched GPU op, times in ns
    st = traceforge.stats("trace.json.gz")               # TraceStats: .streams, .activity, .top_kernels, ...
    tables = traceforge.export("trace.json.gz", csv_dir="out/")  # {kind: DataFrame}, exact ns
    d = traceforge.diff("before.json.gz", "after.json.gz")       # TraceDiff: .ops, .categories
    df = traceforge.classify("trace.json.gz", rules="default")    # GPU time per (device, kernel category)
    c = traceforge.counters("trace.json.gz", ncu="ncu.csv")     # CounterTables: .kernels, .operators, .problems
    df = traceforge.patterns("trace.json.gz", op="aten::addmm")  # top GPU op sequences the operator launched
    r = traceforge.repair("trace.json.gz", "fixed.json.gz", rebase_time=True)  # RepairResult: what changed
    r = traceforge.trim("trace.json.gz", "part.json.gz", steps="3-5")  # or window="+100ms:+300ms"
    with traceforge.output_compression("small"):  # traces written inside: 24-32 % smaller, slower
        traceforge.annotate("trace.json.gz", "out.json.gz", all=True)
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from .analyses.gpu_busy import KERNEL_WAIT_NS
from .annotate import ANALYSES, AnnotateResult, annotate
from .errors import TraceforgeError, TraceFormatError, UsageError
from .info import trace_info
from .io.codec import output_compression
from .lazy_pandas import pd
from .repair import RepairResult, repair  # imported, not wrapped: the function must shadow its module
from .scan import TraceColumns, scan
from .trim import TrimResult, trim

if TYPE_CHECKING:
    from .analyses.stats import TraceStats
    from .analyses.counters import CounterTables
    from .analyses.trace_diff import TraceDiff


def queue_length(path: str, *, launched_before_ns: int | None = None) -> pd.DataFrame:
    """Queue length change points of every (device, stream): device, stream, ts (ns), queue_length."""
    from .analyses.queue_length import queue_length as compute

    return compute(scan(path, cpu_ops=False), launched_before_ns=launched_before_ns)


def memcpy_bandwidth(path: str) -> pd.DataFrame:
    """Bandwidth change points of every (device, copy kind): device, kind, ts (ns), gbps."""
    from .analyses.memcpy_bw import memcpy_bandwidth as compute

    return compute(scan(path, cpu_ops=False))


def launch_stats(path: str, *, apis: frozenset[str] | None = None, launched_before_ns: int | None = None) -> pd.DataFrame:
    """One row per GPU op with its launch call: cpu_duration, gpu_duration, launch_delay (ns;
    negative kept, flagged in negative_delay), the launching CPU op, ... (see
    ``analyses.launch_delay.launch_table``). ``apis`` narrows the launch APIs (e.g.
    ``HTA_LAUNCH_STATS_APIS``). An empty table says why in ``df.attrs["message"]``."""
    from .analyses.launch_delay import launch_table_consuming
    from .analyses.launches import STREAM_LAUNCH_APIS, calls_of
    from .analyses.stacks import scan_for_stacks

    apis = apis or STREAM_LAUNCH_APIS
    cols = scan_for_stacks(path, keep_launch=calls_of(apis))
    return launch_table_consuming(cols, apis=apis, launched_before_ns=launched_before_ns)


def stats(inputs: str | list[str], *, kernel_wait_ns: int = KERNEL_WAIT_NS) -> TraceStats:
    """Per-rank statistics of one trace or several ranks' traces: DataFrames (see ``analyses.stats``)."""
    from .analyses.stats import stats as compute

    return compute(inputs, kernel_wait_ns=kernel_wait_ns)


def export(path: str, *, csv_dir: str | None = None, parquet_dir: str | None = None) -> dict[str, pd.DataFrame]:
    """One DataFrame per activity kind (exact ns); also written as CSV / Parquet if a directory is given."""
    from .analyses.export_tables import check_parquet, read_tables, write_tables

    if parquet_dir is not None:
        check_parquet()
    chunks = list(read_tables(path))
    write_tables(chunks, csv_dir=csv_dir, parquet_dir=parquet_dir)
    frames: dict[str, list[pd.DataFrame]] = {}
    for chunk in chunks:
        frames.setdefault(chunk.kind, []).append(chunk.frame())
    return {kind: pd.concat(parts, ignore_index=True) for kind, parts in frames.items()}


def classify(path: str, rules: str = "default", *, elapsed_s: float | str | None = None) -> pd.DataFrame:
    """GPU time per (device, category) of a trace or nsys ``cuda_gpu_trace`` CSV: instances,
    duration_ns (summed), nonoverlapped_ns (each instant once, to the op that started first),
    union_ns (the category's own busy time), share of the window; a ``non-GPU`` row per device
    fills the window (GPU span, or ``elapsed_s``). ``rules``: a preset name or a JSON/TOML file."""
    from .analyses.classify import classify_file

    return classify_file(path, rules, elapsed_s=elapsed_s).table


def classify_kernels(path: str, rules: str = "default") -> pd.DataFrame:
    """Per (device, GPU op name): its category (and stage), instances, duration_ns, nonoverlapped_ns."""
    from .analyses.classify import classify_file

    return classify_file(path, rules).kernels


def counters(
    path: str,
    *,
    ncu: str | None = None,
    ncu_skip: int = 0,
    peak_dram_gbps: float | None = None,
    peak_tensor_pct: float | None = None,
) -> CounterTables:
    """Hardware counters per kernel from the trace's CUPTI range-profiler events and/or an
    ``ncu --csv --page raw`` file: ``.kernels`` (counters, operator stack, FLOPs, TFLOP/s,
    DRAM/L2 bytes, GB/s, tensor %, arithmetic intensity, efficiency), ``.operators`` (per
    top-level operator), ``.problems`` (every mismatch and unmatched row or kernel)."""
    from .analyses.counters import counter_tables
    from .analyses.counters.annotation import counter_options
    from .analyses.counters.tables import counter_columns

    options = counter_options({"ncu": ncu, "ncu_skip": ncu_skip, "peak_dram_gbps": peak_dram_gbps,
                               "peak_tensor_pct": peak_tensor_pct})
    return counter_tables(counter_columns(path, options["ncu"]), **options)


def diff(a: str, b: str, *, rules: str = "default") -> TraceDiff:
    """GPU ops of trace ``b`` against ``a``: ``.ops`` per name, ``.categories`` (classifier ``rules``); B - A, in ns."""
    from .analyses.trace_diff import diff as compute

    return compute(a, b, rules=rules)


def patterns(
    path: str,
    op: str | None = None,
    *,
    op_regex: str | None = None,
    nested: bool = False,
    min_len: int = 3,
    max_len: int | None = None,
    top_k: int = 5,
    started_before_ns: int | None = None,
) -> pd.DataFrame:
    """Top GPU op sequences: what each instance of ``op`` (exact name) or ``op_regex`` launched,
    or, with neither, repeated runs mined per stream. One row per pattern, best first: rank,
    pattern, count, length, kernels (short), gpu_ns, mean_gpu_ns, cpu_ns (operator mode),
    gpu_share, operator, kernel_names (full); ``df.attrs`` has total_gpu_ns, coverage, note.
    ``started_before_ns`` keeps instances starting before it (HTA drops the last step)."""
    from .analyses.patterns import find_patterns, scan_for_operator

    cols = scan(path, cpu_ops=False) if op is None and op_regex is None else scan_for_operator(path, op, op_regex)
    result = find_patterns(cols, op=op, op_regex=op_regex, nested=nested, min_len=min_len, max_len=max_len,
                           top_k=top_k, started_before_ns=started_before_ns)
    df = result.table
    df.attrs.update(total_gpu_ns=result.total_gpu_ns, coverage=result.coverage, note=result.note)
    return df


__all__ = [
    "ANALYSES", "AnnotateResult", "TraceColumns", "TraceFormatError", "TraceforgeError", "UsageError",
    "annotate", "classify", "classify_kernels", "counters", "diff", "export", "launch_stats", "memcpy_bandwidth", "patterns", "queue_length", "scan", "stats", "trace_info",
    "RepairResult", "TrimResult", "output_compression", "repair", "trim",
]
