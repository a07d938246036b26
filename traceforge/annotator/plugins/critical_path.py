"""What ``annotate --critical-path`` writes: the critical path of each step, seen in Perfetto.

The path is ``analyses.critical_path`` of each instance of ``--critical-path-annotation``
(default each ``ProfilerStep#N``). In the process that holds most events of an instance's path,
a "Critical path" track holds that instance's segments as slices (once: not copied into each
process the path passes), tiling [start, end] of the
instance with no overlap, each named by what bounds it (``cpu: aten::mm``, ``launch:
cudaLaunchKernel``, ``compute: sgemm``, ``sync: ...``, ``idle``; args: the instance, the ns it
puts on the path's length). Instances whose tails overlap go on a second lane. Each edge of
the path between two tracks (a launch, a stream waiting for an event, a synchronisation) is a
flow arrow (category ``critical_path``) from its first event to its second. Every event on the
path (attributed a segment, or an end of one of its edges) gets args ``critical: 1`` (HTA's
key) and ``critical_us``: the path's length attributed to it (0 where the path only passes).
Not part of ``--all`` (see ``ANALYSIS``): ask for it with ``--critical-path``.
"""

from __future__ import annotations

import numpy as np
import orjson

from ...analyses.critical_path.graph import CALL, CATEGORIES, GPU, OP, instances
from ...analyses.critical_path.path import CriticalPath, critical_path, event_column
from ...columns.scan import TraceColumns
from ...emit.flow_anchors import flow_anchors
from ...emit.tracks import FlowArrows, Injections, SliceTrack
from ...io.write.jsontext import ArgColumns, FixedPoint, Texts, join_rows
from ...perfetto.timestamps import perfetto_ns
from ...util.distinct import unique
from ..plugin import Analysis, AnnotateContext, Figure, Option

TITLE = "Critical path"
SORT_INDEX = 0  # above the process's threads and streams
FLOW_CATEGORY = "critical_path"


def _every_name(names: list[str]) -> np.ndarray:
    """The graph reads every CPU operator: all of them are kept after the scan."""
    return np.ones(len(names), bool)


def _in_memory(cols: TraceColumns) -> TraceColumns:
    """``cols`` with every CPU op in memory (read back if they wait on disk)."""
    return cols if cols.spilled_cpu_ops is None else cols.with_cpu_ops(lambda chunk: np.ones(len(chunk), bool))


def path_of(cols: TraceColumns, annotation: str | None, hta: bool = False) -> tuple[TraceColumns, CriticalPath | None]:
    """The columns the path's rows refer to (``_in_memory``) and the path (``hta``: of HTA's
    graph), or None where the trace has no instance of the annotation."""
    cols = _in_memory(cols)
    if not len(instances(cols, annotation)):
        return cols, None
    return cols, critical_path(cols, annotation, hta=hta)


def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
    """Args on the path's events first; the tracks and arrows (made here too) come ``later``."""
    annotation = ctx.options["critical_path_annotation"]
    cols, path = path_of(cols, annotation, ctx.options["critical_path_hta"])
    if path is None:
        what = "ProfilerStep#N range" if annotation is None else f"instance of {annotation!r}"
        return Injections(summary=[f"critical path: nothing added: the trace has no {what}"])
    seg = path.segments
    args = path_args(cols, seg)
    tracks, skipped = path_tracks(cols, path, ctx)
    flows, unplaced = path_flows(cols, seg)
    summary = (f"critical path: {len(path.summary):,} instances, {sum(len(t.ts) for t in tracks):,} slices on "
               f"{len(tracks)} process tracks, {len(flows):,} arrows, args on {len(args):,} events")
    if unplaced:
        summary += f" ({unplaced:,} cross edges without an arrow: no ts inside both slices as Perfetto reads them)"
    if skipped:
        summary += f" ({skipped:,} instances with no event on the path: not drawn)"
    length = int(path.summary["length_ns"].sum())
    figures = {"critical_path_ms": length / 1e6}

    def later(_: TraceColumns) -> Injections:
        return Injections([*tracks, flows], [summary], figures=figures)

    return Injections(arg_columns=[args], later=later)


def abutting_durations(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The dur (ns) to write for each slice [start, end) so that, as Perfetto reads the times,
    it ends no later than the next segment (starting at ``end``) begins: the longest up to
    the exact length.

    Perfetto reads a fractional µs through a double, and the ns it gets is ``perfetto_ns``
    (truncated: the model ``check`` uses) or one more (trace_processor v58.2 rounds); a
    whole µs is exact. Abutting slices written with their exact lengths can then overlap by a
    ns (a spilled slice), so a dur may be up to 3 ns short: a gap of a few ns. Where no
    dur fits (a segment of a ns or two), the exact length: the lanes then separate them."""
    def most(ns: np.ndarray) -> np.ndarray:  # the largest reading of these times
        return perfetto_ns(ns) + (ns % 1000 != 0)

    limit = perfetto_ns(end) - most(start)  # the largest reading the dur may have
    out = end - start
    wrong = most(out) > limit
    for shift in range(4):
        at = np.flatnonzero(wrong)
        if not len(at):
            break
        cand = np.maximum(limit[at] - shift, 0)
        fits = most(cand) <= limit[at]
        out[at[fits]] = np.minimum(cand[fits], out[at[fits]])
        wrong[at[fits]] = False
    return out


def _ends(seg) -> list[tuple[np.ndarray, np.ndarray]]:
    """(table, row) of the attributed event, the edge's first and its second event of each segment."""
    return [(seg[t].to_numpy(), seg[r].to_numpy()) for t, r in
            (("event", "event_row"), ("from_table", "from_row"), ("to_table", "to_row"))]


def path_args(cols: TraceColumns, seg) -> ArgColumns:
    """``critical: 1`` and ``critical_us`` (the weight attributed to it, exact) on every event on the path."""
    parts = _ends(seg)
    ordinal = np.concatenate([event_column(cols, t, r, "ordinal") for t, r in parts])
    weight = np.concatenate([seg["weight"].to_numpy().astype(np.int64), np.zeros(2 * len(seg), np.int64)])
    on = ordinal >= 0
    events, at = np.unique(ordinal[on], return_inverse=True)
    total = np.zeros(len(events), np.int64)
    np.add.at(total, at, weight[on])
    return ArgColumns(events, {"critical": np.ones(len(events), np.int8), "critical_us": total},
                      {"critical_us": FixedPoint(3)})


def path_tracks(cols: TraceColumns, path: CriticalPath, ctx: AnnotateContext) -> tuple[list[SliceTrack], int]:
    """A "Critical path" slice track in each process holding an event of a path: every
    segment (of positive length) of each instance whose path is in that process; and how many
    instances touch no process."""
    seg = path.segments
    pids: dict[object, int] = {}
    pid_of_track = np.array([pids.setdefault(pid, len(pids)) for pid, _ in cols.tracks] or [0], np.int64)
    instance, pid = [], []
    for t, r in _ends(seg):
        track = event_column(cols, t, r, "track")
        on = np.flatnonzero(track >= 0)
        instance.append(seg["instance"].to_numpy()[on])
        pid.append(pid_of_track[track[on]])
    pairs = _home_process(np.concatenate(instance), np.concatenate(pid))
    drawn = seg["end"].to_numpy() > seg["start"].to_numpy()
    seg_instance = seg["instance"].to_numpy()
    labels, label = _slice_names(cols, seg)
    category, code = np.unique(seg["category"].to_numpy().astype(str), return_inverse=True)
    args = join_rows([b'{"instance":', Texts.numbers(path.summary["number"].to_numpy()[seg_instance]),
                      b',"label":', Texts.of([orjson.dumps(x) for x in path.summary["label"].tolist()]).take(seg_instance),
                      b',"bound_by":', Texts.of([orjson.dumps(c) for c in category.tolist()]).take(code),
                      b',"weight_us":', Texts.numbers(seg["weight"].to_numpy(), 3), b"}"])
    tracks = []
    for p, k in pids.items():
        if not (pairs[1] == k).any():
            continue  # no path passes through this process
        mine = np.isin(seg_instance, pairs[0][pairs[1] == k]) & drawn
        rows = np.flatnonzero(mine)
        start, end = seg["start"].to_numpy()[rows], seg["end"].to_numpy()[rows]
        tracks.append(SliceTrack(pid=p, title=TITLE, sort_index=SORT_INDEX, ts=start, dur=abutting_durations(start, end),
                                 labels=labels, label=label[rows], args=args.take(rows),
                                 allocator=ctx.allocator))
    skipped = len(path.summary) - len(unique(pairs[0]))
    return tracks, skipped


def _home_process(instance: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """(instance, process) pairs, one per instance: the process holding most of the events at
    its path's segment ends (the first such process on a tie). One track per instance, not a
    copy of it in every process it passes: the arrows join the processes."""
    if not len(instance):
        return np.zeros((2, 0), np.int64)
    pairs, counts = np.unique(np.stack([instance, pid]), axis=1, return_counts=True)
    order = np.lexsort((pairs[1], -counts, pairs[0]))  # per instance, most events first
    first = np.r_[True, pairs[0][order][1:] != pairs[0][order][:-1]]
    return pairs[:, order[first]]


def _slice_names(cols: TraceColumns, seg) -> tuple[list[str], np.ndarray]:
    """Each segment's slice name, ``category: event`` (the category alone where it has no
    event), as the distinct names and which one each segment has."""
    name = event_column(cols, seg["event"].to_numpy(), seg["event_row"].to_numpy(), "name")
    cats, cat = np.unique(seg["category"].to_numpy().astype(str), return_inverse=True)
    width = len(cols.names) + 1
    keys, which = np.unique(cat * width + np.maximum(name + 1, 0), return_inverse=True)
    labels = [str(cats[k // width]) if k % width == 0 else f"{cats[k // width]}: {cols.names[k % width - 1]}"
              for k in keys.tolist()]
    return labels, which


def flow_label(category: int) -> str:
    """An arrow's name: ``critical path: launch`` (picklable: arrows wait on disk)."""
    return f"critical path: {CATEGORIES[category]}"


def path_flows(cols: TraceColumns, seg) -> tuple[FlowArrows, int]:
    """An arrow along each edge of the path between two tracks, from its first event to its
    second, the end after the start; and how many could not be placed (no ts binds to both
    slices in that order, as Perfetto reads them)."""
    cross = np.flatnonzero(seg["cross"].to_numpy())
    (t0, r0), (t1, r1) = _ends(seg)[1:]
    start_ts = _anchors(cols, t0[cross], r0[cross])
    end_ts = _anchors(cols, t1[cross], r1[cross], after=np.where(start_ts >= 0, perfetto_ns(start_ts), 0))
    ok = (start_ts >= 0) & (end_ts >= 0)
    codes = np.array([CATEGORIES.index(c) for c in seg["category"].to_numpy()[cross].tolist()], np.int64)
    flows = FlowArrows(cat=FLOW_CATEGORY, first_id=cols.max_flow_id + 1, tracks=cols.tracks,
                       start_track=event_column(cols, t0[cross], r0[cross], "track")[ok], start_ts=start_ts[ok],
                       end_track=event_column(cols, t1[cross], r1[cross], "track")[ok], end_ts=end_ts[ok],
                       values=codes[ok], label=flow_label)
    return flows, len(cross) - int(ok.sum())


def _anchors(cols: TraceColumns, table: np.ndarray, row: np.ndarray, after: np.ndarray | None = None) -> np.ndarray:
    """``flow_anchors`` of events given as (table OP/CALL/GPU, row), -1 where none."""
    queries, where = [], []
    for code, tab in ((OP, cols.cpu_ops), (CALL, cols.launches), (GPU, cols.gpu)):
        at = np.flatnonzero(table == code)
        queries.append((tab, row[at]))
        where.append(at)
    out = np.full(len(table), -1, np.int64)
    found = flow_anchors(cols, queries, None if after is None else np.concatenate([after[at] for at in where]))
    for at, anchor in zip(where, found):
        out[at] = anchor
    return out


def _table(cols: TraceColumns, options) -> object:
    """The segments of every instance's path (``CriticalPath.segments``)."""
    return critical_path(_in_memory(cols), options["critical_path_annotation"], hta=options["critical_path_hta"]).segments


ANALYSIS = Analysis(
    "critical_path", "critical path of each step: a 'Critical path' track (in the process holding most of it) with a slice per "
    "segment named by what bounds it, arrows along its launch/wait/sync edges, args critical/critical_us "
    "on every event on it (not in --all: it reads every CPU op)",
    build, order=100,
    # Not in --all: it reads every CPU op and launch call and builds tables (pandas), which
    # doubles --all's time and memory on df_index (1.6 s -> 3.4 s, 105 -> 200 MB; the sample
    # 42 -> 83 MB), and patches args on CPU-side events (the copy's slower path).
    in_all=False,
    options=(Option("critical_path_annotation", "--critical-path: instances of CPU ranges whose name contains "
                    "NAME instead of each ProfilerStep#N (\"\": the whole trace)", metavar="NAME"),
             Option("critical_path_hta", "--critical-path: HTA's graph alone (no forward-to-backward or "
                    "thread hand-off edges), as critical-path --hta", default=False, flag=True)),
    patches_args=True, launch_apis=None, stack_marks=lambda options: _every_name,
    figures=(Figure("critical_path_ms", "critical path ms"),),
    table=_table,
)
