"""``traceforge critical-path``: what bounds each step, the longest path through its dependency graph."""

from __future__ import annotations

import argparse
from functools import partial

from ....api.fan_out import ranked
from ....api.files import critical_path
from ....api.results import CATEGORY_COLUMNS, Filters
from ....util.lazy_pandas import pd
from ... import ranks
from ...options import add_filter_arguments, add_hta_argument, filters_of
from ...output import Col, check_one_csv_table, emit, ms, pct, render, us, wrap

TABLES = ("summary", "segments")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "critical-path", help="the critical path of each step: what bounds it (CPU, launch, GPU, sync, idle)",
        description="Build the dependency graph of each instance of an annotation (default each ProfilerStep#N: "
        "CPU operator nesting and order, kernel launches, stream order, CUDA synchronisations from Kineto's "
        "cuda_sync events, and the trace's forward-to-backward fwdbwd flows; --hta: HTA's graph alone) and find "
        "its longest path, as HTA's critical_path_analysis does. The breakdown tiles each step's span; length "
        "is the path's weight (its work: ops of one stream that overlap count once); idle: nothing ran; wait: "
        "the path waits (0 weight) while work ran elsewhere. Many traces: one per rank, the straggler (longest "
        "total span) first.",
    )
    p.add_argument("input", nargs="+", help="trace files (.json, .json.gz, .json.zst) or directories, one per rank")
    p.add_argument("--step", type=int, metavar="N", help="only ProfilerStep#N (or instance N of --annotation)")
    p.add_argument("--annotation", metavar="NAME",
                   help="CPU ranges whose name contains NAME instead of ProfilerStep#N (\"\": the whole trace)")
    p.add_argument("--table", action="append", choices=TABLES,
                   help="the tables to print (default summary); --format csv needs exactly one")
    add_hta_argument(p)  # here: HTA 0.5's graph alone, without the fwdbwd links
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="text (default), csv (one --table, ns), json (ns)")
    add_filter_arguments(p)
    ranks.add_fan_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    wanted = args.table or ["summary"]
    check_one_csv_table("critical-path", args.format, wanted, TABLES)
    job = partial(_rank_path, args.annotation, args.step, filters_of(args), "segments" in (args.table or ()),
                  args.hta is not None)
    summaries, segments = [], []
    for _, _, (summary, segment) in ranked(args.input, job, **ranks.fan_out_of(args, args.input)):
        summaries.append(summary)
        segments.append(segment)
    summary = pd.concat(summaries, ignore_index=True)
    seg = pd.concat(segments, ignore_index=True)
    total = summary.groupby("rank")["span_ns"].sum().sort_values(ascending=False, kind="stable")
    order = {r: i for i, r in enumerate(total.index.tolist())}
    summary = summary.sort_values(["rank", "start"], key=lambda c: c.map(order) if c.name == "rank" else c,
                                  kind="stable").reset_index(drop=True)
    seg = seg.sort_values("rank", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)
    tables = {"summary": summary, "segments": seg}
    emit({t: tables[t] for t in wanted}, args.format, lambda: _text(summary, seg, wanted))
    return 0


def _rank_path(annotation: str | None, step: int | None, where: Filters | None, segments: bool, hta: bool,
               path: str, rank: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One trace's critical path's summary and segments, each with a ``rank`` column (a
    ``ranked`` job: runs where the trace is read)."""
    found = critical_path(path, annotation=annotation, step=step, where=where, segments=segments, hta=hta)
    start = found.trace_start_ns or 0  # times from the trace start, as Perfetto shows them
    return (found.summary.assign(rank=rank),
            found.segments.assign(rank=rank, start_rel_ns=lambda d: d["start"] - start,
                                  end_rel_ns=lambda d: d["end"] - start))


def _text(summary: pd.DataFrame, seg: pd.DataFrame, wanted: list[str]) -> list[str]:
    lines = []
    if "summary" in wanted:
        cols = [Col("rank", "rank", repeat=True), Col("instance", "label", left=True, repeat=True),
                Col("span ms", "span_ns", ms),
                Col("length ms", "length_ns", ms)]
        shares = summary[list(CATEGORY_COLUMNS)].div(summary["span_ns"].where(summary["span_ns"] > 0, 1), axis=0)
        shown = summary.assign(**{c: 100 * shares[c] for c in CATEGORY_COLUMNS})
        cols += [Col(c[:-3] + " %", c, pct) for c in CATEGORY_COLUMNS]
        lines += ["critical path by instance (straggler rank first; shares of the span)", *render(shown, cols)]
        lines += [line for r in summary.itertuples(index=False) if r.note
                  for line in wrap(f"rank {r.rank} {r.label}: {r.note}")]
    if "segments" in wanted:
        cols = [Col("rank", "rank", repeat=True), Col("inst", "instance", repeat=True),
                Col("at us", "start_rel_ns", us, repeat=True), Col("end us", "end_rel_ns", us),
                Col("bound by", "category", left=True), Col("event", "name", left=True, width=44),
                Col("start ns", "start"), Col("end ns", "end")]
        lines += [*wrap("critical path segments (at/end: µs from the trace start, as Perfetto shows them; "
                        "start/end ns: absolute ts)"), *render(seg, cols)]
    return lines
