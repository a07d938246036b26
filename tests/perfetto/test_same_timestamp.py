"""Many events at one timestamp (issue 41 item 12): ``check`` replays events a window of times at
a time; one window of all the events of one time would hold them whole, several times their
bytes. Such a time is split across windows in Perfetto's order at equal times (E first, then
longer first, then file order), so windows stay bounded and the findings do not change."""

from __future__ import annotations

import importlib
import json
import random

import numpy as np
import pytest

from traceforge.columns import windows
from traceforge.columns.table import SpilledColumns
from traceforge.perfetto import check_trace

replay_module = importlib.import_module("traceforge.perfetto.replay")  # (the package exports the function of that name)


def test_windows_split_a_repeated_key_in_order():
    table = SpilledColumns("k t v")
    rng = np.random.default_rng(41)
    n = 50_000
    k = np.where(rng.random(n) < 0.9, 7, rng.integers(0, 20, n))  # 90 % at one key
    t = rng.integers(-3, 3, n)
    table.extend(k, t, np.arange(n))
    got = list(windows.windows_by(table, lambda c, f: c.k, 1000, then=lambda c, f: c.t))
    assert max(len(w) for w in got) <= 2000  # (one window of 45,000 rows before)
    joined = np.concatenate([w.v[np.lexsort((w.t, w.k))] for w in got])
    assert joined.tolist() == np.lexsort((t, k)).tolist()  # windows sorted stably, joined: the table in order
    assert max(len(w) for w in windows.windows_by(table, lambda c, f: c.k, 1000)) >= 45_000  # no then: one window


def _events(rng: random.Random, n: int) -> list[dict]:
    """Slices, B/E pairs and flows, most at one ts, on a few threads."""
    events = []
    for i in range(n):
        ts = 1000 if rng.random() < 0.8 else rng.choice([999, 1001, 1000.5, 1002])
        tid = rng.choice([1, 2, 3])
        how = rng.random()
        if how < 0.6:
            events.append({"ph": "X", "name": f"x{i % 7}", "pid": 1, "tid": tid, "ts": ts, "dur": rng.choice([0, 1, 2, 5])})
        elif how < 0.8:
            events.append({"ph": rng.choice("BE"), "name": "b", "pid": 1, "tid": tid, "ts": ts})
        else:
            events.append({"ph": rng.choice("sf"), "name": "f", "cat": "c", "id": rng.randrange(50), "pid": 1,
                           "tid": tid, "ts": ts, **({"bp": "e"} if rng.random() < 0.5 else {})})
    return events


def _record_window_sizes(monkeypatch, module) -> list[int]:
    """The sizes of the windows ``module`` reads through ``windows_by`` from now on."""
    sizes, split = [], windows.windows_by

    def recorded(*args, **kwargs):
        for w in split(*args, **kwargs):
            sizes.append(len(w))
            yield w

    monkeypatch.setattr(module, "windows_by", recorded)
    return sizes


@pytest.mark.parametrize("seed", range(3))
def test_check_findings_do_not_depend_on_the_window_size(tmp_path, monkeypatch, seed):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _events(random.Random(seed), 6000)}))
    whole = check_trace(str(path))
    sizes = _record_window_sizes(monkeypatch, replay_module)
    monkeypatch.setattr(replay_module, "WINDOW_ROWS", 500)
    small = check_trace(str(path))
    assert max(sizes) <= 2000 and len(sizes) > 5  # (of 6,000 rows, 4,800 at one ts: one window of them before)
    assert whole.stats and (small.stats, small.breakdown, small.examples) == (whole.stats, whole.breakdown,
                                                                              whole.examples)


@pytest.mark.parametrize("seed", range(3))
def test_repair_does_not_depend_on_the_window_size(tmp_path, monkeypatch, seed):
    """repair replays slices a window of start times at a time as check does: a start shared by
    more slices than a window holds is split across windows, with the same output bytes."""
    from traceforge.rewrite import repair as repair_module

    rng = random.Random(seed)
    events = [e for e in _events(rng, 6000) if e["ph"] == "X"]
    events += [{"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": 1000, "dur": rng.choice([1, 3, 7])} for _ in range(50)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    whole = repair_module.repair(str(path), str(tmp_path / "whole.json"))
    sizes = _record_window_sizes(monkeypatch, repair_module)
    monkeypatch.setattr(windows, "MAX_ROWS", 300)
    small = repair_module.repair(str(path), str(tmp_path / "small.json"))
    assert whole.moved_slices > 100 and small.moved_slices == whole.moved_slices
    assert max(sizes) <= 1200 and len(sizes) > 5  # (of ~3,600 slices, ~2,900 at one ts: one window before)
    assert (tmp_path / "small.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
