"""``traceforge stats``: per-rank summary statistics (see ``analyses.stats``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ....api.files import compare_tails, stats, stats_each
from ....api.results import (
    KERNEL_WAIT_NS,
    STATS_TABLES,
    TABLE_ALIASES,
    TAIL_PERCENTS,
    TraceStats,
    default_tables,
    in_text_order,
)
from ....columns.info import NO_GPU, RECORD_GPU
from ....errors import UsageError
from ....util.exacttime import ns_to_us_text, to_ns
from ....util.lazy_pandas import pd
from ... import ranks
from ...options import add_filter_arguments, add_hta_argument, filters_of
from ...output import FORMATS, Col, check_one_csv_table, count, emit, ms, render, wrap
from ...rank_summary import Figures, summarize
from ...tables import section

TABLES = tuple(STATS_TABLES)
TEXT_TOP = 10
HTA_CHOICES = ("GPU ops launched before HTA's last-step cut only, times in whole µs, HTA's queue launch APIs, "
               "the kernel breakdown's duration_ratio 0.8 (docs/hta.md)")


def _us(text: str) -> int:
    try:
        ns = to_ns(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of µs: {text!r}") from None
    if ns < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return ns


def _table_name(name: str) -> str:
    """A table's name, for one of its other names (``Table.aliases``)."""
    return TABLE_ALIASES.get(name, name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats",
        help="summary statistics per rank: GPU busy/idle, time per activity kind, tails, top kernels, launch APIs",
        description="Per rank (distributedInfo.rank): wall span; GPU busy and idle time per device and per "
        "stream with HTA's idle breakdown (host wait, kernel wait, other); time share per activity kind; "
        "tail concentration per kind (top 1/5/10 % of events); top kernels; launch APIs and the GPU ops "
        "they launched; launches issued while the previous kernel still ran. Times are exact ns.",
    )
    p.add_argument("inputs", nargs="+", metavar="IN", help="trace file(s), one per rank, or a directory of them")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--table", type=_table_name, choices=TABLES, action="append", metavar="TABLE",
                   help=f"make and print only this table (again for more): {', '.join(TABLES)} "
                   f"(default: {', '.join(default_tables())})")
    p.add_argument("--top", type=int, metavar="N",
                   help="rows of top_kernels, of launch_kernels per API and of launch_overlaps (largest first) "
                   f"(default {TEXT_TOP} in text, all in csv/json; 0: all)")
    p.add_argument("--kernel-wait-us", type=_us, default=KERNEL_WAIT_NS, metavar="US",
                   help="idle gaps shorter than this between ops already queued are kernel wait "
                   f"(default {ns_to_us_text(KERNEL_WAIT_NS)}, HTA's consecutive_kernel_delay)")
    p.add_argument("--compare", action="store_true",
                   help="compare two traces IN A and IN B: per activity kind, tail concentration (top 1/5/10 %% "
                   "share and mean) and count, total and mean, as ratios B/A (one table, tail_compare)")
    add_hta_argument(p)
    add_filter_arguments(p)
    ranks.add_fan_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    wanted = tuple(dict.fromkeys(args.table or default_tables()))
    check_one_csv_table("stats", args.format, wanted, TABLES)
    options = {"kernel_wait_ns": args.kernel_wait_us, "tables": wanted, "where": filters_of(args), "hta": args.hta,
               **ranks.fan_out_of(args, args.inputs)}
    top = args.top if args.top is not None else (TEXT_TOP if args.format == "text" else 0)
    if args.format == "text":  # each rank's text is made where the rank is read, in parallel
        texts = [_RankText(rank, *text) for rank, text in
                 stats_each(args.inputs, partial(_rank_text_of, wanted, top), **options)]
        for text in texts:
            _note_without_gpu(text.notes)
        head = [*wrap(f"HTA {args.hta}'s choices (--hta): {HTA_CHOICES}"), ""] if args.hta else []
        emit({}, args.format, lambda: head + [line for text in _in_text_order(texts) for line in text.lines])
        known = sorted((t for t in texts if t.path), key=_by_rank)  # those whose summary table was made
        if len(known) > 1:
            ranks.print_summary(summarize([(t.rank, t.path, t.figures) for t in known]), args.format)
        return 0
    result = stats(args.inputs, **options)
    tables = {name: _in_rank_order(df) for name, df in _limited(result, wanted, top).items()}
    _note_without_gpu(_notes(tables.get("summary")))
    emit(tables, args.format, lambda: _text(tables))
    figures = _rank_figures(tables)
    if len(figures) > 1:
        ranks.print_summary(summarize([(rank, *figures[rank]) for rank in sorted(figures)]), args.format)
    return 0


def _by_rank(text: "_RankText") -> int:
    return text.rank


def _in_rank_order(df: pd.DataFrame) -> pd.DataFrame:
    """A table of several ranks with the ranks in order (each rank's rows as they were)."""
    if "rank" not in df or df["rank"].is_monotonic_increasing:
        return df
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


def _rank_figures(tables: dict[str, pd.DataFrame]) -> dict[int, tuple[str, Figures]]:
    """Per rank of ``tables``: its trace and the figures of the cross-rank summary that the
    tables give (GPU ops; GPU busy, the union per device summed, and span, from ``devices``)."""
    summary = tables.get("summary")
    if summary is None:
        return {}
    out: dict[int, tuple[str, Figures]] = {}
    devices = tables.get("devices")
    for r in summary.itertuples(index=False):
        figures: Figures = {"gpu_ops": int(r.gpu_ops)}
        mine = devices[devices["rank"] == r.rank] if devices is not None else None
        if mine is not None and len(mine):
            figures["gpu_busy_ns"] = int(mine["busy_ns"].sum())
            figures["gpu_span_ns"] = int((mine["busy_ns"] + mine["idle_ns"]).max())
        out[int(r.rank)] = (str(r.trace), figures)
    return out


@dataclass(frozen=True)
class _RankText:
    """What the text of ``stats`` keeps of one rank: its lines, its notes, and the tables in
    which it has rows (they decide where its text goes among the ranks')."""

    rank: int
    lines: list[str]
    notes: list[str]
    having: frozenset[str]
    path: str
    figures: Figures


def _rank_text_of(wanted: tuple[str, ...], top: int, result: TraceStats
                  ) -> tuple[list[str], list[str], frozenset[str], str, Figures]:
    """One rank's lines, notes, tables with rows, trace and summary figures (a ``stats_each``
    job's result: small, and made in parallel)."""
    tables = _limited(result, wanted, top)
    (path, figures), = _rank_figures(tables).values() or [("", {})]
    return (_text(tables), _notes(tables.get("summary")), frozenset(name for name, df in tables.items() if len(df)),
            path, figures)


def _in_text_order(texts: list[_RankText]) -> list[_RankText]:
    """The ranks' texts in rank order (those with a row in some table)."""
    return sorted((t for t in texts if t.having), key=_by_rank)


def _limited(result: TraceStats, wanted: tuple[str, ...], top: int) -> dict[str, pd.DataFrame]:
    """The ``wanted`` tables of ``result``, in ``TraceStats`` order, cut to ``top`` rows (``_limit``)."""
    return _limit({name: df for name, df in result.tables().items() if name in wanted}, top)


def _notes(summary: pd.DataFrame | None) -> list[str]:
    """One line per rank without GPU ops, saying so (its text leaves out the GPU tables)."""
    if summary is None:
        return []
    return [f"traceforge: note: rank {r.rank} ({r.trace}): {NO_GPU}: nothing to measure on the GPU; {RECORD_GPU}"
            for r in summary[summary["gpu_ops"] == 0].itertuples(index=False)]


def _note_without_gpu(notes: list[str]) -> None:
    for note in notes:
        print(note, file=sys.stderr)


def _compare(args: argparse.Namespace) -> int:
    """``stats --compare A B``: the ``tail_compare`` table (``analyses.tail_compare``)."""
    if len(args.inputs) != 2 or args.table or args.hta:
        raise UsageError("stats --compare takes two traces, A and B, and no --table or --hta")
    a, b = args.inputs
    table = compare_tails(a, b, where=filters_of(args))

    def ratio(value: object) -> str:
        return "-" if pd.isna(value) else f"{float(value):,.3f}"

    def text() -> list[str]:
        lines = [f"A: {a}", f"B: {b}", "",
                 "Tails compared per activity kind (ratio B/A; top p %: the longest p % of the kind's events)"]
        cols = [Col("kind", "kind", left=True), Col("A count", "a_count", _maybe(count)),
                Col("B count", "b_count", _maybe(count)), Col("total", "total_ns_ratio", ratio),
                Col("mean", "mean_ns_ratio", ratio)]
        for p in TAIL_PERCENTS:
            cols += [Col(f"top{p}% share", f"top{p}_pct_ratio", ratio), Col(f"top{p}% mean", f"top{p}_mean_ns_ratio", ratio)]
        return lines + render(table, cols)

    emit({"tail_compare": table}, args.format, text)
    return 0


def _maybe(show: Callable[[object], str]) -> Callable[[object], str]:
    return lambda value: "-" if pd.isna(value) else show(int(value))


def _limit(tables: dict[str, pd.DataFrame], top: int) -> dict[str, pd.DataFrame]:
    if top <= 0:
        return tables
    out = dict(tables)
    if "top_kernels" in tables:
        out["top_kernels"] = tables["top_kernels"].groupby("rank", sort=False).head(top)
    if "launch_kernels" in tables:
        out["launch_kernels"] = tables["launch_kernels"].groupby(["rank", "api"], sort=False).head(top)
    if "launch_overlaps" in tables:
        out["launch_overlaps"] = _largest(tables["launch_overlaps"], "overlap_ns", top)
    return out


def _largest(df: pd.DataFrame, column: str, top: int) -> pd.DataFrame:
    """Per rank, the ``top`` rows largest in ``column`` (ties in table order), ranks in order.
    Only those rows are copied: the table can hold a row per launch of a big trace."""
    rank = df["rank"].to_numpy()
    order = np.lexsort((-df[column].to_numpy(), rank))  # stable
    ranked = rank[order]
    first = np.searchsorted(ranked, ranked, side="left")  # where each row's rank begins
    return df.take(order[np.arange(len(order)) - first < top])


def _text(tables: dict[str, pd.DataFrame]) -> list[str]:
    lines: list[str] = []
    ranks = pd.unique(pd.concat([df["rank"] for df in tables.values()]))
    for rank in ranks:
        of_rank = {name: df[df["rank"] == rank] for name, df in tables.items()}
        lines += _rank_text(int(rank), of_rank)
    return lines


def _wall_span(summary: pd.Series) -> list[str]:
    """The wall span in ms, from the trace start (as Perfetto shows it) and in absolute µs."""
    if summary["gpu_ops"] + summary["launches"] + summary["cpu_ops"] == 0:
        return ["  wall span: none (no GPU op, launch call or CPU op)"]
    return [f"  wall span {ms(summary['span_ns'])} ms: {_from_start(summary, 'span_start')} .. "
            f"{_from_start(summary, 'span_end')} ms from the trace start",
            f"    (absolute ts {ns_to_us_text(summary['span_start'])} .. {ns_to_us_text(summary['span_end'])} us)"]


def _from_start(summary: pd.Series, column: str) -> str:
    """``summary[column]`` (a ts in ns) as ms from the trace start (Perfetto's time 0)."""
    return ms(summary[column] - summary["trace_start"])


def _rank_text(rank: int, t: dict[str, pd.DataFrame]) -> list[str]:
    lines = [f"rank {rank}"]
    s = t.get("summary")
    without_gpu = s is not None and len(s) and s.iloc[0]["gpu_ops"] == 0
    if without_gpu:
        t = {name: df for name, df in t.items() if STATS_TABLES[name].without_gpu}
    if s is not None and len(s):
        r = s.iloc[0]
        lines = [
            f"rank {rank}: {r['trace']}",
            *_wall_span(r),
            *wrap(f"{r['gpu_ops']:,} GPU ops ({r['kernels']:,} kernels), {r['launches']:,} launch calls, "
                  f"{r['cpu_ops']:,} CPU ops", "  "),
        ]
    for name in in_text_order(t):
        lines += section(STATS_TABLES[name], t[name])
    if s is not None and len(s) and not without_gpu:
        r = s.iloc[0]
        lines += ["", *wrap(f"Launch overlap: {r['overlapping_launch_pairs']:,} of {r['launch_pairs']:,} consecutive "
                            f"kernel launches on a thread ({r['overlapping_launch_pct']:.1f} %) started while the "
                            "previous launch's kernels still ran (all of them: --table launch_overlaps --top 0)")]
    lines.append("")
    return lines
