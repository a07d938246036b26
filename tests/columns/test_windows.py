"""windows.windows_by: a spilled table read back in windows of consecutive key values."""

from __future__ import annotations

import numpy as np
import pytest

import traceforge.columns.windows as windows
from traceforge.columns.table import SpilledColumns


def _spilled(keys: np.ndarray) -> SpilledColumns:
    table = SpilledColumns("key value")
    for lo in range(0, len(keys), 700):
        table.extend(keys[lo:lo + 700], -np.arange(lo, min(lo + 700, len(keys))))
    return table


def _windows(table: SpilledColumns, max_rows: int) -> list[np.ndarray]:
    """Each window's row indices, checked for what every caller relies on."""
    out = [w.index.copy() for w in windows.windows_by(table, lambda chunk, first: chunk.key, max_rows)]
    assert all(np.array_equal(w, np.sort(w)) for w in out)  # a window keeps the table's order
    return out


@pytest.mark.parametrize("order", ["nearly sorted", "shuffled", "few keys"])
def test_windows_hold_consecutive_keys_whichever_way_they_are_gathered(order, monkeypatch):
    rng = np.random.default_rng(len(order))
    n = 20_000
    keys = {"nearly sorted": np.arange(n) // 3 + rng.integers(0, 50, n),
            "shuffled": rng.permutation(n) // 2,
            "few keys": rng.integers(0, 7, n)}[order]
    monkeypatch.setattr(windows, "BLOCK", 1000)
    for rereads in (0, 10**6):  # every window from its own file; every window from the blocks read again
        monkeypatch.setattr(windows, "REREADS", rereads)
        parts = [w for w in _windows(_spilled(keys), 1500) if len(w)]  # a window may be empty
        assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))  # every row once
        for before, after in zip(parts, parts[1:]):
            assert keys[before].max() < keys[after].min()  # in key order; equal keys share a window
        if order != "few keys":
            assert len(parts) > 5 and max(map(len, parts)) < 3 * 1500


def test_the_blocks_are_read_again_only_where_the_keys_are_nearly_in_order(monkeypatch):
    monkeypatch.setattr(windows, "BLOCK", 1000)
    ways = []
    monkeypatch.setattr(windows, "_reread", lambda *a: ways.append("reread") or iter(()))
    monkeypatch.setattr(windows, "_distributed", lambda *a: ways.append("files") or iter(()))
    n = 20_000
    for keys in (np.arange(n), np.random.default_rng(1).permutation(n)):
        list(windows.windows_by(_spilled(keys), lambda chunk, first: chunk.key, 1500))
    assert ways == ["reread", "files"]


def test_windows_draw_their_progress(monkeypatch):
    """A long replay after the read shows on the bar, as bytes of rows dealt with."""
    import io

    from traceforge.util import progress

    stream = io.StringIO()
    monkeypatch.setattr(progress, "_is_terminal", lambda s: True)
    keys = np.arange(5000)
    with progress.shown(stream=stream):
        for _ in windows.windows_by(_spilled(keys), lambda chunk, first: chunk.key, 1000, "replay"):
            pass
    assert "replay  100% [" in stream.getvalue() and "0.2/0.2 MB" in stream.getvalue()  # sampled, then windowed


@pytest.mark.parametrize("rereads, passes", [(10**6, 2), (0, 3)])  # blocks read again; rows written to files
def test_every_pass_over_the_rows_moves_the_bar_forward(rereads, passes, monkeypatch):
    from traceforge.util import progress

    drawn = []
    monkeypatch.setattr(progress, "active", lambda: lambda name, done, total: drawn.append(done / total))
    monkeypatch.setattr(windows, "BLOCK", 1000)
    monkeypatch.setattr(windows, "REREADS", rereads)
    n = 20_000
    keys = np.random.default_rng(2).permutation(n)
    windows_seen = sum(1 for _ in windows.windows_by(_spilled(keys), lambda chunk, first: chunk.key, 1500, "replay"))
    assert drawn == sorted(drawn) and drawn[-1] == 1
    # sampling the keys, and writing the rows to files, move it a block at a time; reading, a window
    assert len(drawn) == (passes - 1) * n // 1000 + windows_seen
    assert drawn[n // 1000 - 1] == pytest.approx(1 / 3)  # the keys sampled: a third, until a pass is known to go
