"""``traceforge collectives``: the ranks' collectives matched, their clocks aligned, who waited."""

from __future__ import annotations

import argparse

from ....api.collectives import collectives
from ... import ranks
from ...output import Col, check_one_csv_table, emit, ms, note, pct, render, us

TABLES = ("summary", "instances", "clocks", "waits", "last", "kernels")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collectives", help="collectives across ranks: matched, clocks aligned from their ends, who waited for whom",
        description="Read each rank's NCCL/RCCL collective kernels with their CPU ops' args, match the same "
        "collective across ranks (by group and sequence number, else by order of each kind, else by their ends), "
        "fit each rank's clock offset and drift from the matched kernels' ends, and measure each rank's wait for "
        "the last to arrive, the transfer time and NCCL's algbw/busbw. See docs/collectives.md.",
    )
    p.add_argument("input", nargs="+", help="trace files (.json, .json.gz, .json.zst) or directories, one per rank")
    p.add_argument("--no-align", action="store_true", help="keep the recorded clocks (fit nothing)")
    p.add_argument("--table", action="append", choices=TABLES,
                   help="the tables to print (default summary and clocks); --format csv needs exactly one")
    p.add_argument("--format", choices=("text", "csv", "json"), default="text",
                   help="text (default), csv (one --table, ns), json (ns)")
    ranks.add_fan_out_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    wanted = args.table or ["summary", "clocks"]
    check_one_csv_table("collectives", args.format, args.table or [], TABLES)
    found = collectives(args.input, align=not args.no_align, **ranks.fan_out_of(args, args.input))
    tables = found.tables()
    for text in found.notes:
        note(text)
    emit({t: tables[t] for t in wanted}, args.format, lambda: _text(found, tables, wanted))
    return 0


def _gbps(value: object) -> str:
    return "-" if value != value else f"{float(value):.2f}"  # NaN: no time to divide by


def _text(found, tables, wanted: list[str]) -> list[str]:
    lines = [f"{len(found.ranks)} rank(s), {len(tables['kernels'])} collective kernels, "
             f"{len(tables['instances'])} matched instances"]
    if "summary" in wanted:
        lines += ["", "per kind and group:"]
        lines += render(tables["summary"], [
            Col("group", "group", left=True, repeat=True), Col("kind", "kind", left=True, repeat=True),
            Col("count", "count"), Col("MB", "bytes", lambda b: f"{b / 1e6:.1f}"), Col("time ms", "time_ns", ms),
            Col("wait ms", "wait_ns", ms), Col("wait %", "wait_share_pct", pct), Col("busbw GB/s", "busbw_gbps", _gbps),
            Col("last", "last", left=True)])
        lines += [""] + [f"  {s}" for s in found.waits.stragglers]
    if "clocks" in wanted:
        lines += ["", "clocks (offset and drift taken off each rank's times):"]
        lines += render(tables["clocks"], [
            Col("rank", "rank", repeat=True), Col("status", "status", left=True), Col("offset µs", "offset_ns", us),
            Col("drift ppm", "drift_ppb", lambda d: f"{d / 1000:.3f}"), Col("matches", "matches"),
            Col("inliers", "inliers"), Col("resid. med µs", "residual_median_ns", us),
            Col("resid. max µs", "residual_max_ns", us)])
    if "instances" in wanted:
        lines += ["", "instances:"]
        lines += render(tables["instances"], [
            Col("#", "instance", repeat=True), Col("group", "group", left=True), Col("kind", "kind", left=True),
            Col("rule", "rule", left=True), Col("ranks", "ranks"), Col("MB", "bytes", lambda b: f"{b / 1e6:.1f}"),
            Col("last", "last_rank"), Col("skew µs", "skew_ns", us), Col("transfer µs", "transfer_ns", us),
            Col("algbw", "algbw_gbps", _gbps), Col("busbw", "busbw_gbps", _gbps)])
    if "waits" in wanted:
        lines += ["", "waits per rank and instance:"]
        lines += render(tables["waits"], [Col("#", "instance", repeat=True), Col("rank", "rank", repeat=True),
                                          Col("wait µs", "wait_ns", us), Col("last", "last")])
    if "last" in wanted:
        lines += ["", "how often each rank was last:"]
        lines += render(tables["last"], [Col("group", "group", left=True), Col("kind", "kind", left=True),
                                         Col("rank", "rank"), Col("times", "times_last"), Col("%", "share_pct", pct)])
    if "kernels" in wanted:
        lines += ["", "kernels:"]
        kernels = tables["kernels"].assign(dur_ns=lambda d: d["end_ns"] - d["start_ns"])
        lines += render(kernels, [Col("rank", "rank", repeat=True), Col("kind", "kind", left=True),
                                            Col("group", "group", left=True), Col("seq", "seq"),
                                            Col("MB", "bytes", lambda b: f"{b / 1e6:.1f}"),
                                            Col("dur µs", "dur_ns", us), Col("cpu op", "cpu_op", left=True)])
    return lines
