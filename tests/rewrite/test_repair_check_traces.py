"""``repair`` (plain, ``--rebase-time``, ``annotate --all --repair``) then ``check`` on the
real traces (issue 55 item 3, integration tier): what ``check`` reports on repair's output
is only what ``rewrite.repair.NOT_REPAIRED`` says repair leaves, and nothing at all where
every loss in the input is one repair fixes (spilled slices, flow ends without a start or
bound to another slice, out-of-range pids/tids). Its warnings are a subset of the input's,
less the ones repair removes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.rewrite.test_repair_check import DROPPING_STARTS
from traceforge.rewrite.repair import NOT_REPAIRED

FIXED_WARNINGS = {"dangling_flow_end", "pid_tid_out_of_range"}  # flow ends dropped, ids renumbered
# In the input, a loss repair cannot fix, or one that leaves a flow end without its start after repair.
UNFIXABLE = (set(NOT_REPAIRED) - {"flow_end_without_start"}) | DROPPING_STARTS


def _check(path: Path) -> dict:
    r = run_cli("check", str(path), "--format", "json", "-q")
    assert r.returncode in (0, 1), r.stderr.decode()
    return json.loads(r.stdout)


@pytest.mark.integration
@pytest.mark.parametrize("command", [("repair",), ("repair", "--rebase-time"), ("annotate", "--all", "--repair")],
                         ids=["repair", "rebase_time", "annotate_repair"])
@pytest.mark.parametrize("name", list(TRACES))
def test_check_after_repair_reports_only_not_repaired(name, command, tmp_path):
    path = TRACES[name]
    before = _check(path)
    out = tmp_path / "repaired.json.gz"
    r = run_cli(command[0], str(path), *command[1:], "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr.decode()
    after = _check(out)
    left = after["stats"]
    assert set(left) <= set(NOT_REPAIRED), sorted(set(left) - set(NOT_REPAIRED))
    if not UNFIXABLE & set(before["stats"]):
        assert left == {} and after["losses"] == 0 and after["exit_code"] == 0, left
    assert set(after["warnings"]) <= set(before["warnings"]) - FIXED_WARNINGS, after["warnings"]
