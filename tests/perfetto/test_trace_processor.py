"""Perfetto's real importer (trace_processor_shell v58.2, ../shared/bin/trace_processor or
$TRACEFORGE_TRACE_PROCESSOR) on every shared trace and on everything traceforge writes from it.

- ``check`` predicts the importer's stats exactly (every loss stat, both ways).
- Every command that writes a trace (each annotate analysis alone, ``--all``, ``--all --repair``,
  ``repair``, ``trim``, ``patterns -o``): the importer's losses (severity error/data_loss and
  every flow_* stat) are no higher than on the input, and what traceforge appended is there:
  each counter track with as many points as traceforge wrote, each slice track with all its
  slices and none spilled, each flow arrow bound at both ends (rows of the ``flow`` table).
- ``annotate --all --repair``: no loss at all, and the summary accounts for every event moved.

Cheapest design: one trace_processor run per file answers every question (one statement,
``union all``); each trace's outputs are written once per session, and trace_processor runs
in threads while the next output is written. Each analysis alone runs on the traces below
``ALONE_MAX_EVENTS`` events (the large ones get every analysis through ``--all`` and
``--all --repair``); ``TRACEFORGE_TP_FULL=1`` runs every analysis alone on every trace too
(longer). Skipped, saying why, where the binary cannot run.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT, TRACES, raw_json, run_cli
from traceforge.annotator.registry import ANALYSES
from traceforge.perfetto import check_trace
from traceforge.perfetto import trace_processor as tp
from traceforge.perfetto.rules import RULES

BINARY = os.environ.get(tp.ENV) or str(ROOT.parent / "shared" / "bin" / "trace_processor")

# One statement, so one import answers all: import stats, points per counter track (with its
# process), slices per thread track (type says spilled: thread_overlapping_slice), flows bound.
SQL = """
select 'stat' as q, name || coalesce('[' || idx || ']', '') as k, severity as s, value as v
  from stats where value > 0
union all
select 'counter', ct.name || ' @' || coalesce(p.pid, ''), '', count(*)
  from counter c join process_counter_track ct on c.track_id = ct.id left join process p using (upid)
  group by ct.id
union all
select 'slice', coalesce(p.pid, '') || '/' || coalesce(th.tid, ''), tr.type, count(*)
  from slice s join track tr on s.track_id = tr.id
  join thread th on th.utid = extract_arg(tr.dimension_arg_set_id, 'utid')
  left join process p on p.upid = th.upid group by tr.id
union all
select 'flow', '', '', count(*) from flow
"""

# Every command that writes a trace: name -> its arguments after the input (the output is added).
COMMANDS: dict[str, tuple[str, ...]] = {
    **{name: ("annotate", a.flag) for name, a in ANALYSES.items()},  # those --all leaves out too (critical path)
    "all": ("annotate", "--all"),
    "all_repair": ("annotate", "--all", "--repair"),
    "repair": ("repair",),
    "trim": ("trim", "--window", "+1ms:+100ms"),
    "patterns_o": ("patterns",),
}
ALONE = frozenset(ANALYSES)
ALONE_MAX_EVENTS = 45_000  # the suite's budget: alone on the 10 smaller traces, not the 4 of 68k-216k events
FULL = os.environ.get("TRACEFORGE_TP_FULL") == "1"


@dataclass
class Imported:
    """What trace_processor made of one file."""

    stats: dict[str, tp.Stat]
    counters: Counter  # "<track name> @<pid>" -> points
    slices: Counter  # ("<pid>/<tid>", track type) -> slices
    flows: int

    @property
    def losses(self) -> dict[str, int]:
        return tp.losses(self.stats)


def _import(path: Path) -> Imported:
    stats, counters, slices, flows = {}, Counter(), Counter(), 0
    for row in tp.query(BINARY, str(path), SQL, timeout=120):
        q, k, s, v = row["q"], row["k"], row["s"], int(row["v"])
        if q == "stat":
            stats[k] = tp.Stat(k, s, v)
        elif q == "counter":
            counters[k] += v
        elif q == "slice":
            slices[(k, s)] += v
        else:
            flows = v
    return Imported(stats, counters, slices, flows)


@pytest.fixture(scope="session")
def binary() -> str:
    try:
        done = subprocess.run([BINARY, "--version"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"trace_processor cannot run here ({BINARY}): {e}")
    if done.returncode != 0:
        pytest.skip(f"trace_processor cannot run here ({BINARY}): exit code {done.returncode}")
    return BINARY


class Outputs:
    """Each trace's outputs, written once per session, and trace_processor's import of each."""

    def __init__(self, root: Path):
        self.root = root
        self.pool = ThreadPoolExecutor(2)
        self.done: dict[str, dict[str, tuple[Path, Future, str]]] = {}

        self.inputs: dict[str, tuple[Path, Future, str]] = {}
        self.counts: dict[str, int] = {}

    def input(self, name: str) -> tuple[Path, Future, str]:
        if name not in self.inputs:
            path = TRACES[name]
            self.inputs[name] = (path, self.pool.submit(_import, path), "")
        return self.inputs[name]

    def events_in(self, name: str) -> int:
        if name not in self.counts:
            self.counts[name] = len(_events(self.input(name)[0]))
        return self.counts[name]

    def of(self, name: str) -> dict[str, tuple[Path, Future, str]]:
        if name not in self.done:
            path = self.input(name)[0]
            found = {"input": self.input(name)}
            alone = FULL or self.events_in(name) < ALONE_MAX_EVENTS
            for command, argv in COMMANDS.items():
                if command in ALONE and not alone:
                    continue
                out = self.root / f"{name}.{command}.json"
                r = run_cli(argv[0], str(path), *argv[1:], "-o", str(out))
                assert r.returncode == 0, (command, r.stderr.decode()[-2000:])
                found[command] = (out, self.pool.submit(_import, out), r.stderr.decode())
            self.done[name] = found
        return self.done[name]


@pytest.fixture(scope="session")
def outputs(binary, tmp_path_factory) -> Outputs:
    made = Outputs(tmp_path_factory.mktemp("trace_processor"))
    yield made
    made.pool.shutdown()


def _events(path: Path) -> list[dict]:
    return orjson.loads(raw_json(path))["traceEvents"]


def _thread_key(e: dict) -> str:
    return f"{e['pid']}/{e['tid']}"


# -- check equals trace_processor --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(TRACES))
def test_check_predicts_trace_processors_stats(name, outputs):
    """Every loss stat, both ways: what check predicts is what the importer counts."""
    path, imported, _ = outputs.input(name)
    measured = imported.result()
    report = check_trace(str(path))
    rows = tp.side_by_side(report.stats, measured.stats)
    assert [(n, p) for n, p, _ in rows] == [(n, v) for n, _, v in rows], rows
    assert {n for n, p, _ in rows if p} == set(measured.losses)


def test_check_prints_trace_processors_stats_beside(binary):
    path = TRACES["ns_resolution"]
    r = run_cli("check", str(path), "--trace-processor", binary)
    text = r.stdout.decode()
    assert re.search(r"slice_spill_overlapping_complete_event +774 +774\n", text), text
    assert "agreement: check predicted every loss stat exactly" in text
    doc = orjson.loads(run_cli("check", str(path), "--format", "json", "--trace-processor", binary).stdout)
    assert doc["trace_processor"]["stats"]["slice_spill_overlapping_complete_event"]["value"] == 774
    r = run_cli("check", str(path), "--trace-processor", str(ROOT / "no-such-binary"))
    assert r.returncode == 1 and b"not an executable file" in r.stderr and b"Traceback" not in r.stderr


# -- what traceforge writes ------------------------------------------------------------------

def test_every_analysis_is_covered():
    """Each analysis runs alone by its flag (one that needed an option would fail there, and must
    get it in COMMANDS), and --all runs those it includes."""
    assert {name for name in ANALYSES} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", sorted(TRACES))
def test_output_loses_nothing_more_and_keeps_what_was_added(name, command, outputs):
    found = outputs.of(name)
    if command not in found:
        pytest.skip(f"{command} alone runs on traces under {ALONE_MAX_EVENTS:,} events ({name} has "
                    f"{outputs.events_in(name):,}; its analyses run in --all): TRACEFORGE_TP_FULL=1 runs it")
    before = found["input"][1].result()
    out, imported, _ = found[command]
    after = imported.result()
    more = {k: (before.losses.get(k, 0), v) for k, v in after.losses.items() if v > before.losses.get(k, 0)}
    assert not more, f"{command} on {name}: losses (input, output) {more}"
    if command not in {n for n in COMMANDS if COMMANDS[n][0] in ("annotate", "patterns")}:
        return
    # annotate copies the trace's events, then appends its own (--repair's are those of --all)
    added = _events(found["all"][0] if command == "all_repair" else out)[outputs.events_in(name):]
    counters, slices, arrows = Counter(), Counter(), 0
    for e in added:
        ph = e["ph"]
        if ph == "C":
            for key, value in e["args"].items():
                if isinstance(value, (int, float)):
                    counters[f"{e['name']} {key} @{e['pid']}"] += 1
        elif ph == "X":
            slices[_thread_key(e)] += 1
        elif ph == "s":
            arrows += 1
        else:
            assert ph in ("M", "f"), f"{command} appended a {ph!r} event: teach this test about it"
    for track, points in counters.items():
        assert after.counters[track] == points, (command, name, track)
    for thread, count in slices.items():
        assert after.slices[(thread, "thread_execution")] == count, (command, name, thread)
        assert not after.slices[(thread, "thread_overlapping_slice")], (command, name, thread)
    if command != "all_repair":  # the repair drops nothing that binds, so this holds there too, but
        assert after.flows == before.flows + arrows, (command, name)  # its own test says more


@pytest.mark.parametrize("name", sorted(TRACES))
def test_annotate_all_repair_imports_without_loss(name, outputs):
    found = outputs.of(name)
    after = found["all_repair"][1].result()
    assert after.losses == {}, after.losses
    assert not [s for s in after.stats.values() if s.severity in tp.LOSS_SEVERITIES]
    annotated, repaired = _events(found["all"][0]), _events(found["all_repair"][0])
    summary = " ".join(found["all_repair"][2].split())  # one line per analysis, wrapped at 100 columns
    moved = _count(summary, r"moved ([\d,]+) overlapping slice")
    dropped = _count(summary, r"dropped ([\d,]+) flow end")
    remapped = _count(summary, r"new ids \(([\d,]+) event")
    flow_ends = Counter(e["ph"] for e in annotated if e.get("ph") in ("f", "t"))
    assert sum(flow_ends.values()) - sum(e.get("ph") in ("f", "t") for e in repaired) == dropped
    overlap_threads = {_thread_key(e) for e in repaired
                       if e.get("ph") == "M" and e.get("name") == "thread_name"
                       and re.search(r" \(overlap \d+\)$", e["args"]["name"])}
    assert sum(e.get("ph") == "X" and _thread_key(e) in overlap_threads for e in repaired) == moved
    out_of_range = sum(not _in_range(e.get("pid")) or not _in_range(e.get("tid")) for e in annotated
                       if "pid" in e or "tid" in e)
    assert out_of_range == remapped
    assert not [e for e in repaired if not _in_range(e.get("pid")) or not _in_range(e.get("tid"))]
    assert after.flows >= found["all"][1].result().flows  # arrows moved with their slices still bind


def _in_range(value: object) -> bool:
    return not isinstance(value, int) or 0 <= value < 2**32


def _count(summary: str, pattern: str) -> int:
    m = re.search(pattern, summary)
    assert m, (pattern, summary)
    return int(m.group(1).replace(",", ""))


def test_rules_cover_every_stat_check_predicts():
    assert {"slice_spill_overlapping_complete_event", "flow_end_without_start"} <= set(RULES)
