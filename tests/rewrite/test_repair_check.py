"""``repair`` then ``check`` (issue 55 item 3): on fuzzed and hand-made traces, what ``check``
reports on repair's output is only what ``rewrite.repair.NOT_REPAIRED`` says repair leaves
(an event's own values: negative dur, tokens Perfetto rejects, duplicate flow ids, ...), never
what repair promises to fix (spilled slices, out-of-range pids/tids, flow ends without start);
a flow end left without its start is one whose start Perfetto drops for a listed reason."""

from __future__ import annotations

import json
import os
import random

import pytest

from tests.cli.test_fuzz_fields import _base, mutate
from tests.conftest import run_cli
from traceforge.perfetto.rules import RULES, WARNING
from traceforge.rewrite.repair import NOT_REPAIRED

INPUTS = int(os.environ.get("TRACEFORGE_FUZZ_REPAIR_INPUTS", "40"))
FIXED = {"slice_spill_overlapping_complete_event", "flow_end_from_slice_0"}
DROPPING_STARTS = {"flow_no_enclosing_slice", "flow_duplicate_id", "json_tokenizer_failure", "json_parser_failure",
                   "flow_invalid_id"}


def _left_after_repair(path, tmp_path, *flags) -> dict[str, int] | None:
    out = tmp_path / "repaired.json"
    r = run_cli(*(flags or ("repair",)), str(path), "-o", str(out), "-q")
    if r.returncode != 0:
        assert r.returncode == 1 and b"internal error" not in r.stderr, r.stderr.decode()
        return None
    doc = json.loads(run_cli("check", str(out), "--format", "json", "-q").stdout)
    out.unlink()
    return doc["stats"]


def _assert_only_documented(left: dict[str, int]) -> None:
    assert set(left) <= set(NOT_REPAIRED), sorted(set(left) - set(NOT_REPAIRED))
    if "flow_end_without_start" in left:
        assert any(left.get(s, 0) for s in DROPPING_STARTS), left


def test_not_repaired_names_check_rules():
    assert set(NOT_REPAIRED) <= set(RULES) and not FIXED & set(NOT_REPAIRED)
    assert all(RULES[s].severity != WARNING for s in NOT_REPAIRED)


def test_flows_repair_cannot_fix_are_the_documented_ones(tmp_path):
    events = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
              {"ph": "s", "id": 7, "cat": "c", "name": "f", "tid": 1, "ts": 11},  # no pid: bound to no slice
              {"ph": "f", "id": 7, "cat": "c", "name": "f", "pid": 1, "tid": 1, "ts": 12, "bp": "e"},
              {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 20, "dur": -3},
              {"ph": "s", "id": 9, "cat": "c", "name": "g", "pid": 1, "tid": 1, "ts": 11},
              {"ph": "s", "id": 9, "cat": "c", "name": "g", "pid": 1, "tid": 1, "ts": 12},
              {"ph": "f", "id": 9, "cat": "c", "name": "g", "pid": 1, "tid": 1, "ts": 13, "bp": "e"},
              {"ph": "f", "id": 3, "cat": "c", "name": "h", "pid": 1, "tid": 1, "ts": 13, "bp": "e"},  # no start
              {"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 11, "dur": 9}]  # spills out of "a"
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": events}))
    before = json.loads(run_cli("check", str(path), "--format", "json").stdout)["stats"]
    assert {"slice_spill_overlapping_complete_event", "flow_end_without_start"} <= set(before)
    for flags in (("repair",), ("annotate", "--all", "--repair")):
        left = _left_after_repair(path, tmp_path, *flags)
        _assert_only_documented(left)
        assert left["slice_negative_duration"] == 1 and left["flow_duplicate_id"] == 1
        assert "slice_spill_overlapping_complete_event" not in left


@pytest.mark.slow
@pytest.mark.parametrize("flags", [("repair",), ("annotate", "--all", "--repair")])
def test_fuzzed_traces_after_repair_report_only_documented_stats(flags, tmp_path, sample):
    rng = random.Random(f"repair-{flags[0]}")
    base = _base(sample.raw)
    path = tmp_path / "in.json"
    checked = 0
    for _ in range(INPUTS):
        path.write_bytes(mutate(base, rng))
        left = _left_after_repair(path, tmp_path, *flags)
        if left is not None:
            _assert_only_documented(left)
            checked += 1
    assert checked > INPUTS // 2
