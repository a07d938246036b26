"""``traceforge merge``: the ranks' traces as one, on the clock the collectives fit.

Each rank's collectives are read first (the fan-out of ``api.collectives``: a small table
per rank), matched and the clocks fitted; then the ranks are written one after another
(``rewrite.merge``: memory bounded by one rank). With ``collectives=True`` the waits are
drawn too: an arrow from the last-arriving rank's kernel to each waiting rank's, a
``Waiting for rank R`` slice on each waiting rank (a thread beside its NCCL stream), and a
per-rank counter of the time spent waiting so far.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..errors import UsageError
from ..io.write.jsontext import json_bytes
from ..rewrite.merge import ID_STRIDE, Merged, RankInput, RankWritten, Window, mapped, merge_ranks
from ..rewrite.rebase import BASE_KEY
from ..util.exacttime import ns_to_us_text
from ..util.time_window import parse_steps, parse_window
from .collectives import Collectives, collectives
from .fan_out import cores, run_jobs

WAIT_TID_BASE = ID_STRIDE - 4096  # the waiting slices' threads: the top of a rank's tid range
WAIT_COUNTER = "Time waiting for other ranks (ms)"
TRACEFORGE_KEY = "traceforgeMerge"  # the top-level key holding each rank's metadata and clock


@dataclass
class MergeResult:
    merged: Merged
    collectives: Collectives

    def summary(self) -> str:
        return self.merged.summary()


def parse_ranks(text: str) -> set[int]:
    """``0-3,7`` -> {0, 1, 2, 3, 7}."""
    out: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise UsageError(f"--ranks {text!r}: expected ranks such as 0-3,7")
        out.update(range(int(lo), int(hi if dash else lo) + 1))
    return out


def merge(inputs: str | os.PathLike | Iterable[str | os.PathLike], out: str, *, align: bool = True,
          ranks: str | None = None, window: str | None = None, steps: str | None = None,
          draw_collectives: bool = False, jobs: int | None = 1, cluster: str | None = None) -> MergeResult:
    """Write the ranks' traces (files or directories, one per rank) as one trace ``out``."""
    wanted = parse_ranks(ranks) if ranks is not None else None  # a bad list is said before any reading
    found = collectives(inputs, align=align, jobs=jobs, cluster=cluster)
    chosen = found.ranks
    if wanted is not None:
        chosen = [r for r in found.ranks if r.rank in wanted]
        if not chosen:
            raise UsageError(f"--ranks {ranks}: none of the traces is of these ranks "
                             f"({', '.join(str(r.rank) for r in found.ranks)})")
    if not chosen:
        raise UsageError("merge: no traces")
    reference = found.ranks[0]
    # Times are rebased (as repair --rebase-time): the merged file's ts start near 0, so the
    # float Perfetto reads them into holds every ns; baseTimeNanoseconds keeps the sum.
    starts = []
    for r in chosen:
        offset, drift, x0 = found.clocks.params(r.rank)
        if r.trace_start_ns is not None:
            probe = RankInput(r.rank, r.path, offset, drift, x0, r.base_ns, reference.base_ns)
            starts.append(r.trace_start_ns + probe.delta(r.trace_start_ns))
    origin = min(starts) // 1000 * 1000 if starts else 0
    out_base = reference.base_ns + origin
    inputs_ = [RankInput(r.rank, r.path, *found.clocks.params(r.rank), r.base_ns, out_base) for r in chosen]
    keep = None
    if window is not None or steps is not None:
        lo, hi = (t - origin for t in _window(found, window, steps))
        keep = Window(lo, hi)
    chosen_ranks = {r.rank for r in chosen}
    appended = (lambda written: _drawn(found, written, out_base, chosen_ranks)) if draw_collectives else None
    tail = b"\n],\n" + json_bytes({BASE_KEY: out_base})[1:-1] + b',"' + TRACEFORGE_KEY.encode() + b'":' + json_bytes(
            {"ranks": [{"rank": r.rank, "path": r.path, "clock": _clock(found, r.rank), "metadata": r.metadata}
                       for r in chosen]}) + b"}\n"
    # the ranks are written here, in parallel as they were scanned (a cluster's workers scan them)
    write_jobs = jobs if jobs is not None and cluster is None else cores()
    merged = merge_ranks(inputs_, out, tail=tail, keep=keep, appended=appended, jobs=write_jobs,
                         id_tops=[r.id_top for r in chosen], runner=run_jobs)
    return MergeResult(merged, found)


def _clock(found: Collectives, rank: int) -> dict:
    row = found.clocks.table[found.clocks.table["rank"] == rank]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.iloc[0].to_dict().items()} if len(row) else {}


def _window(found: Collectives, window: str | None, steps: str | None) -> tuple[int, int]:
    """[lo, hi) in the merged file's ns (relative to its base), from the reference rank."""
    ref = found.ranks[0]
    if steps is not None:
        first, last = parse_steps(steps)
        inside = [(ts, end) for n, ts, end in ref.step_ranges if first <= n <= last]
        if not inside:
            raise UsageError(f"--steps {steps}: rank {ref.rank} has no ProfilerStep#{first}..{last}")
        return min(ts for ts, _ in inside), max(end for _, end in inside)
    assert window is not None
    return parse_window(window, ref.trace_start_ns)


def _drawn(found: Collectives, written: list[RankWritten], out_base: int, chosen: set[int]) -> Iterator[bytes]:
    """The arrows, waiting slices and counters of ``collectives=True``."""
    by_rank = {w.rank: w for w in written}
    members = found.waits.per_rank.merge(
        found.matched_members()[["instance", "rank", "pid", "tid", "stream"]], on=["instance", "rank"])
    members = members[members["rank"].isin(chosen)]
    flow_id = 1 << 40  # past any id a rank's events have after the merge's shifts
    named: set[tuple[int, int]] = set()
    total: dict[int, int] = {}
    for instance, group in members.groupby("instance", sort=True):
        last = group[group["last"]]
        if last.empty:
            continue
        L = last.iloc[0]
        lw = by_rank[int(L["rank"])]
        lpid, ltid = mapped(lw, lw.pids, L["pid"]), mapped(lw, lw.tids, L["tid"])
        arrival = int(L["arrival_ns"]) - out_base
        for w in group.itertuples():
            if w.rank == L["rank"] or w.wait_ns <= 0:
                continue
            ww = by_rank[int(w.rank)]
            pid, tid = mapped(ww, ww.pids, w.pid), mapped(ww, ww.tids, w.tid)
            start = int(w.arrival_ns) - out_base
            wait_tid = w.rank * ID_STRIDE + WAIT_TID_BASE + int(w.stream) % 2048
            if (pid, wait_tid) not in named:
                named.add((pid, wait_tid))
                yield json_bytes({"ph": "M", "name": "thread_name", "pid": pid, "tid": wait_tid, "ts": 0,
                                  "args": {"name": f"waiting (stream {w.stream})"}})
            yield (b'{"ph":"X","cat":"traceforge","name":"Waiting for rank %d","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
                   b'"args":{"instance":%d,"wait_ns":%d}}' % (int(L["rank"]), pid, wait_tid,
                                                             ns_to_us_text(start).encode(),
                                                             ns_to_us_text(int(w.wait_ns)).encode(), instance, w.wait_ns))
            flow_id += 1
            yield (b'{"ph":"s","cat":"traceforge_wait","name":"last arrival","id":%d,"pid":%d,"tid":%d,"ts":%s}'
                   % (flow_id, lpid, ltid, ns_to_us_text(arrival).encode()))
            yield (b'{"ph":"f","bp":"e","cat":"traceforge_wait","name":"last arrival","id":%d,"pid":%d,"tid":%d,'
                   b'"ts":%s}' % (flow_id, pid, tid, ns_to_us_text(arrival).encode()))
            total[w.rank] = total.get(w.rank, 0) + int(w.wait_ns)
            yield (b'{"ph":"C","name":"%s","pid":%d,"ts":%s,"args":{"ms":%s}}'
                   % (WAIT_COUNTER.encode(), pid, ns_to_us_text(arrival).encode(),
                      ns_to_us_text(total[w.rank]).encode()))
