"""All ranks on one timeline, the API: each rank's collectives read in a fan-out job (a small
table per rank), then matched, the clocks fitted and the waits computed here, from those
tables alone (no trace is read twice). See docs/collectives.md."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..analyses.collectives.clock import ClockFit, fit_clocks
from ..analyses.collectives.kinds import is_collective_cpu_op, is_collective_kernel
from ..analyses.collectives.matching import Matched, match
from ..analyses.collectives.table import COLUMNS, Launches, Slice, rank_table
from ..analyses.collectives.waits import Waits, waits
from ..columns.scan import STEP_PREFIX, scan
from ..io.read import rows as R
from ..io.read.reader import EventBatch, TraceReader
from ..rewrite.rebase import BASE_KEY
from ..util.exacttime import json_time_ns
from ..util.lazy_pandas import pd
from .fan_out import ranked


@dataclass
class RankCollectives:
    """What one rank's job sends back: its collectives and the figures the summary needs."""

    rank: int
    path: str
    table: pd.DataFrame
    step_ns: int  # the ProfilerStep# ranges' total (0: none)
    steps: int
    span_ns: int  # the trace's span (first ts to last end of its GPU ops and launches)
    events: int
    base_ns: int = 0  # baseTimeNanoseconds (0 where absent): the table's times include it
    metadata: dict = field(default_factory=dict)  # the top-level keys but traceEvents
    step_ranges: list = field(default_factory=list)  # (step number, ts ns, end ns) of ProfilerStep#N
    trace_start_ns: int | None = None
    id_top: int = -1  # the largest flow id, correlation or External id the scanner read (-1: none; see rewrite.merge)


@dataclass
class Collectives:
    """The result over all ranks: per-rank tables, matches, clock fits and waits."""

    ranks: list[RankCollectives]
    clocks: ClockFit
    waits: Waits
    notes: list[str] = field(default_factory=list)
    matched: Matched | None = None

    def matched_members(self) -> pd.DataFrame:
        """The matched kernels (``matching.MEMBER_COLUMNS``) with their pid and tid."""
        assert self.matched is not None
        kernels = self.kernels()
        return self.matched.members.merge(kernels[["rank", "ordinal", "pid", "tid"]], on=["rank", "ordinal"])

    @property
    def instances(self) -> pd.DataFrame:
        return self.waits.instances

    @property
    def summary(self) -> pd.DataFrame:
        return self.waits.summary

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"instances": self.waits.instances, "summary": self.waits.summary, "clocks": self.clocks.table,
                "waits": self.waits.per_rank, "last": self.waits.last, "kernels": self.kernels()}

    def kernels(self) -> pd.DataFrame:
        """Every rank's collective kernels (``table.COLUMNS``), in rank order."""
        frames = [r.table for r in self.ranks if len(r.table)]
        if frames:
            return pd.concat(frames, ignore_index=True)
        return self.ranks[0].table.iloc[:0] if self.ranks else pd.DataFrame(columns=list(COLUMNS))


class _Collector:
    """An ``on_batch`` hook: parses only the collective kernels and CPU ops of each batch."""

    def __init__(self, reader: TraceReader):
        self.scanner = reader.scanner
        self.wanted = np.zeros(0, np.int8)  # per scanner string id: 1 kernel name, 2 CPU op name, 0 neither
        self.kernels: list[Slice] = []
        self.cpu_ops: list[Slice] = []
        self.id_top = -1

    def __call__(self, batch: EventBatch) -> None:
        rows = batch.rows
        for flag, column in ((R.F_ID, R.ID), (R.F_CORRELATION, R.CORRELATION), (R.F_EXTERNAL_ID, R.EXTERNAL_ID)):
            values = rows[(rows[:, R.FLAGS] & flag) != 0, column]
            if len(values):
                self.id_top = max(self.id_top, int(values.max()))
        new = self.scanner.strings[len(self.wanted):]
        if new:
            names = [R.decode_string(raw) for raw in new]
            self.wanted = np.append(self.wanted, np.array(
                [1 if is_collective_kernel(n) else 2 if is_collective_cpu_op(n) else 0 for n in names], np.int8))
        ids = batch.rows[:, R.NAME]
        flags = batch.rows[:, R.FLAGS]
        hit = np.zeros(len(ids), bool)
        known = ids >= 0
        hit[known] = self.wanted[ids[known]] > 0
        hit |= (flags & R.F_ODD) != 0  # an odd row's name may be one: parse it to see
        for i in np.flatnonzero(hit).tolist():
            e = batch.event(i)
            name = e.get("name")
            if e.get("ph") != "X" or not isinstance(name, str):
                continue
            kernel = is_collective_kernel(name)
            if not kernel and not is_collective_cpu_op(name):
                continue
            ts, dur = json_time_ns(e.get("ts")), json_time_ns(e.get("dur"))
            if ts is None or dur is None:
                continue
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            (self.kernels if kernel else self.cpu_ops).append(
                Slice(batch.first + i, name, ts, ts + dur, e.get("pid"), e.get("tid"), args))


def rank_collectives(path: str, rank: int = 0) -> RankCollectives:
    """One rank's collectives (a ``ranked`` job: it runs where the trace is read)."""
    reader = TraceReader(path)
    hook = _Collector(reader)
    cols = scan(path, reader=reader, cpu_ops=False, on_batch=hook)
    wanted = {k.args.get("correlation") for k in hook.kernels}
    la = cols.launches
    keep = np.flatnonzero(np.isin(la.correlation, np.array([c for c in wanted if type(c) is int], np.int64)))
    launches = Launches(la.correlation[keep], la.ts[keep], [cols.tracks[t] for t in la.track[keep].tolist()])
    base = cols.metadata.get(BASE_KEY, 0)
    base = base if type(base) is int else 0
    table = rank_table(rank, hook.kernels, hook.cpu_ops, launches, cols.metadata, base)
    steps = cols.steps
    span = cols.time_span()
    ranges = []
    for name, ts, dur in zip(cols.name_of(steps.name), steps.ts.tolist(), steps.dur.tolist()):
        number = name.removeprefix(STEP_PREFIX)
        if number.isdigit():
            ranges.append((int(number), ts, ts + dur))
    return RankCollectives(rank, path, table, int(steps.dur.sum()) if len(steps) else 0, len(steps),
                           (span[1] - span[0]) if span else 0, cols.event_count, base, cols.metadata, ranges,
                           cols.trace_start_ns, hook.id_top)


def collectives(inputs: str | os.PathLike | Iterable[str | os.PathLike], *, align: bool = True,
                jobs: int | None = 1, cluster: str | None = None) -> Collectives:
    """The collectives of the ranks' traces (files or directories, one trace per rank) matched
    across ranks, the clocks fitted from their ends (``align=False``: the recorded clocks) and
    each instance's waits. ``jobs``/``cluster``: as ``traceforge.stats``."""
    items = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else [os.fspath(i) for i in inputs]
    ranks = sorted((result for _, _, result in ranked(items, rank_collectives, jobs=jobs, cluster=cluster)),
                   key=lambda r: r.rank)
    return gather(ranks, align=align)


def gather(ranks: list[RankCollectives], *, align: bool = True) -> Collectives:
    """Match, fit and measure from the per-rank tables (the parent's part of ``collectives``)."""
    notes: list[str] = []
    tables = {r.rank: r.table for r in ranks}
    order = [r.rank for r in ranks]
    matched = match(tables)
    clocks = fit_clocks(matched, order, align=True)
    if "order" in matched.rules.values():
        # The same counts need not be the same collectives (a sampled or cut trace, one missing
        # and one extra): pairing by ends is tried too, and kept where more matches agree.
        by_ends = match(tables, anchored=True)
        refit = fit_clocks(by_ends, order, align=True)
        if _agreeing(refit) > _agreeing(clocks):
            matched, clocks = by_ends, refit
            notes.append("the ranks' collectives did not agree in order: matched by their ends instead")
    notes += matched.notes
    if not align:
        clocks = fit_clocks(matched, order, align=False)
    notes += clocks.notes
    found = waits(matched, clocks, {r.rank: (r.step_ns, r.steps, r.span_ns) for r in ranks})
    notes += found.notes
    return Collectives(ranks, clocks, found, notes, matched)


def _agreeing(clocks: ClockFit) -> int:
    """The matches that agree with the fits (the fitted ranks' inliers)."""
    t = clocks.table
    return int(t["inliers"][t["status"] == "fitted"].sum())
