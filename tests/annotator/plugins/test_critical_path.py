"""``annotate --critical-path``: the "Critical path" tracks tile each instance with no overlap
(as written, and as Perfetto reads the times, truncated or rounded), the arrows bind to the
edge's two events in order, every event on the path gets ``critical``/``critical_us``, and
``check`` (and trace_processor where it runs) finds no new loss."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import traceforge
from tests.analyses.critical_path.test_path import EVENTS
from tests.conftest import ROOT, TRACES, run_cli
from traceforge.perfetto import check_trace
from traceforge.perfetto.timestamps import time_ns

SAMPLE = ROOT / "samples" / "train_step.json.gz"
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
TP = ROOT.parent / "shared" / "bin" / "trace_processor"


def events_of(path) -> list[dict]:
    """The trace's events, times as exact Decimals (µs)."""
    raw = Path(path).read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return json.loads(raw, parse_float=Decimal)["traceEvents"]


def ns(us) -> int:
    return int(Decimal(us) * 1000)


def most(us) -> int:
    """The largest ns Perfetto may read for a µs time: ``time_ns``'s reading (the model ``check``
    uses: a double, truncated) or, for a fractional µs, one more (trace_processor v58.2 rounds)."""
    return read(us) + isinstance(us, Decimal)


def read(us) -> int:
    """``time_ns``'s reading: an integer exactly, a fraction through a double (its text)."""
    return time_ns(us if isinstance(us, int) else str(us))[0]


def annotate(src, tmp_path, *extra) -> list[dict]:
    out = tmp_path / "out.json.gz"
    done = run_cli("annotate", str(src), "--critical-path", *extra, "-o", str(out))
    assert done.returncode == 0, done.stderr
    before, after = check_trace(str(src)), check_trace(str(out))
    assert after.stats == before.stats and after.warnings == before.warnings  # no new loss
    return events_of(out)


def path_tracks(events: list[dict]) -> dict[tuple, list[dict]]:
    """The slices of each "Critical path" thread (lanes included), by (pid, tid), in ts order."""
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"
             and e["args"]["name"].startswith("Critical path")}
    out = defaultdict(list)
    for e in events:
        if e["ph"] == "X" and (e["pid"], e.get("tid")) in named:
            out[e["pid"], e["tid"]].append(e)
    return {k: sorted(v, key=lambda e: Decimal(e["ts"])) for k, v in out.items()}


def assert_tiles(events: list[dict], summary) -> None:
    """Per process, each instance's slices: one lane, in order, no overlap as written or as
    Perfetto reads them, from the instance's start to its end, gaps of at most 3 ns, and
    a weight that adds up to the path's length."""
    lanes = path_tracks(events)
    assert lanes
    by_pid = defaultdict(lambda: defaultdict(list))
    for (pid, _), slices in lanes.items():
        for e in slices:
            by_pid[pid][e["args"]["instance"]].append(e)
    rows = {r.number: r for r in summary.itertuples()}
    for pid, instances in by_pid.items():
        for number, slices in instances.items():
            assert len({(e["pid"], e["tid"]) for e in slices}) == 1, (pid, number)  # one lane
            row = rows[number]
            assert {e["args"]["label"] for e in slices} == {row.label}
            assert ns(slices[0]["ts"]) == row.start
            assert 0 <= row.end - ns(slices[-1]["ts"]) - ns(slices[-1]["dur"]) <= 3
            for a, b in zip(slices, slices[1:]):
                end, start = ns(a["ts"]) + ns(a["dur"]), ns(b["ts"])
                assert 0 <= start - end <= 3, (number, a, b)
                # as Perfetto reads them: the largest end before the smallest next start
                assert most(a["ts"]) + most(a["dur"]) <= read(b["ts"])
            weight = sum(ns(e["args"]["weight_us"]) for e in slices)
            assert weight <= row.length_ns  # 0-length segments (weight on them) are not drawn


def perfetto_losses(path, scratch: Path) -> dict | None:
    """trace_processor's import stats with severity error/data_loss, and flow ones (None where
    it cannot run here)."""
    if not TP.is_file() or shutil.which("bash") is None:
        return None
    query = scratch / "losses.sql"  # never beside the input (shared, read-only traces)
    query.write_text("select name, value from stats where value > 0 and "
                     "(severity in ('error', 'data_loss') or name like 'flow%');\n")
    done = subprocess.run([str(TP), "-q", str(query), str(path)], capture_output=True, timeout=300)
    if done.returncode != 0:
        return None
    lines = done.stdout.decode().split("\n")
    return dict(line.replace('"', "").split(",") for line in lines[lines.index('"name","value"') + 1:] if line)


@pytest.fixture
def synthetic(tmp_path):
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    return path


def enclosing(events: list[dict], pid, tid, ts) -> str:
    """The innermost X slice of (pid, tid) open at ts (brute force, whole µs times)."""
    open_ = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e.get("tid") == tid
             and Decimal(e["ts"]) <= ts < Decimal(e["ts"]) + Decimal(e["dur"])]
    return max(open_, key=lambda e: (Decimal(e["ts"]), -Decimal(e["dur"])))["name"]


def test_synthetic_path_drawn(synthetic, tmp_path):
    events = annotate(synthetic, tmp_path)
    tracks = path_tracks(events)
    assert len(tracks) == 1  # one track per step, in one of the processes it passes (not a copy in each)
    assert next(iter(tracks))[0] in (0, 1)
    for slices in tracks.values():
        assert [(e["name"], ns(e["ts"]) // 1000, ns(e["ts"] + e["dur"]) // 1000) for e in slices] == [
            ("idle", 0, 1), ("cpu: A", 1, 2), ("launch: cudaLaunchKernel", 2, 6), ("compute: K1", 6, 40),
            ("sync: K1", 40, 41), ("compute: K2", 41, 60), ("sync: K2", 60, 62), ("idle", 62, 63),
            ("cpu: B", 63, 70), ("idle", 70, 100)]
        assert {(e["args"]["instance"], e["args"]["label"]) for e in slices} == {(1, "ProfilerStep#1")}
    # Arrows: the launch, the stream wait (stream 7 -> 8), the device sync (K2 -> the call).
    flows = defaultdict(dict)
    for e in events:
        if e["ph"] in "sf" and e.get("cat") == "critical_path":
            flows[e["id"]][e["ph"]] = e
    bound = sorted((enclosing(events, f["s"]["pid"], f["s"]["tid"], Decimal(f["s"]["ts"])),
                    enclosing(events, f["f"]["pid"], f["f"]["tid"], Decimal(f["f"]["ts"])), f["s"]["name"])
                   for f in flows.values() if Decimal(f["s"]["ts"]) <= Decimal(f["f"]["ts"]))
    assert bound == [("K1", "K2", "critical path: sync"), ("K2", "cudaDeviceSynchronize", "critical path: sync"),
                     ("cudaLaunchKernel", "K1", "critical path: launch")]
    assert len(flows) == 3
    # Args: every event on the path, with the length attributed to it (they add up to the length).
    marked = {(e["name"], ns(e["ts"]) // 1000): ns(e["args"]["critical_us"]) // 1000 for e in events
              if e.get("args", {}).get("critical") == 1}
    assert marked == {("A", 1): 1, ("cudaLaunchKernel", 2): 4, ("K1", 6): 34, ("K2", 41): 19,
                      ("cudaDeviceSynchronize", 28): 0, ("B", 63): 7}
    assert sum(marked.values()) == 65  # the path's length (test_critical_path)


def test_nothing_to_draw_is_said_not_failed(tmp_path):
    path = tmp_path / "nostep.json"
    path.write_text(json.dumps({"traceEvents": [e for e in EVENTS if not e["name"].startswith("ProfilerStep")]}))
    out = tmp_path / "out.json"
    done = run_cli("annotate", str(path), "--critical-path", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert b"critical path: nothing added: the trace has no ProfilerStep#N range" in done.stderr + done.stdout
    assert not path_tracks(events_of(out))


def test_sample_tiles_each_step(tmp_path):
    events = annotate(SAMPLE, tmp_path)
    path = traceforge.critical_path(str(SAMPLE))
    assert_tiles(events, path.summary)
    assert len(path_tracks(events)) == 2  # the CPU process and GPU 0's: no second lane
    marked = [e for e in events if e.get("args", {}).get("critical") == 1]
    assert sum(ns(e["args"]["critical_us"]) for e in marked) == int(path.summary["length_ns"].sum())
    losses = perfetto_losses(tmp_path / "out.json.gz", tmp_path)
    if losses is not None:
        assert losses == perfetto_losses(SAMPLE, tmp_path)


@pytest.mark.parametrize("name, annotation", [("alexnet", ALEXNET), ("event_sync", ""), ("df_index", None)])
def test_real_traces_tile_and_import_without_new_loss(name, annotation, tmp_path):
    extra = () if annotation is None else ("--critical-path-annotation", annotation)
    events = annotate(TRACES[name], tmp_path, *extra)
    path = traceforge.critical_path(str(TRACES[name]), annotation=annotation)
    assert_tiles(events, path.summary)
    marked = [e for e in events if e.get("args", {}).get("critical") == 1]
    assert sum(ns(e["args"]["critical_us"]) for e in marked) == int(path.summary["length_ns"].sum())
    arrows = [e for e in events if e["ph"] == "s" and e.get("cat") == "critical_path"]
    assert len(arrows) <= int(path.segments["cross"].sum())
    losses = perfetto_losses(tmp_path / "out.json.gz", tmp_path)
    if losses is not None:
        assert losses == perfetto_losses(TRACES[name], tmp_path)
