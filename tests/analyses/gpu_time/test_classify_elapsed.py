"""``classify --elapsed-s`` below a GPU's busy time is a one-line error (exit 1), never a share
over 100 %; at the busy time exactly, the shares add up to 100 % and non-GPU time is 0."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest

import traceforge
from tests.conftest import run_cli
from traceforge.analyses.gpu_time.classify import NON_GPU
from traceforge.errors import UsageError


def _busy_ns(path: str) -> tuple[int, int]:
    """(device, busy ns) of the busiest GPU."""
    table = traceforge.classify(path)
    busy = table[table["category"] != NON_GPU].groupby("device")["nonoverlapped_ns"].sum()
    return int(busy.idxmax()), int(busy.max())


def test_elapsed_below_busy_is_a_one_line_error(sample):
    path = str(sample.path)
    device, busy = _busy_ns(path)
    below = str(Decimal(busy - 1) / 1_000_000_000)
    r = run_cli("classify", path, "--elapsed-s", below)
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"elapsed time {below} s is less than GPU {device}'s busy time {Decimal(busy) / 1_000_000_000} s" in err
    with pytest.raises(UsageError, match=f"less than GPU {device}'s busy time"):
        traceforge.classify(path, elapsed_s=below)
    r = run_cli("classify", path, path, "--elapsed-s", f"100,{below}")  # one of several inputs
    assert r.returncode == 1 and f"less than GPU {device}'s busy time" in r.stderr.decode()


def test_elapsed_equal_to_busy_gives_shares_up_to_100_percent(sample):
    path = str(sample.path)
    device, busy = _busy_ns(path)
    r = run_cli("classify", path, "--format", "json", "--elapsed-s", str(Decimal(busy) / 1_000_000_000))
    assert r.returncode == 0, r.stderr
    rows = [row for row in orjson.loads(r.stdout)["files"][0]["rows"] if row["device"] == device]
    assert {row["category"]: row for row in rows}[NON_GPU]["nonoverlapped_ns"] == 0
    assert sum(row["share"] for row in rows) == pytest.approx(1.0)
    assert max(row["share"] for row in orjson.loads(r.stdout)["files"][0]["rows"]) <= 1.0
    text = run_cli("classify", path, "--elapsed-s", str(Decimal(busy) / 1_000_000_000)).stdout.decode()
    assert "(100.0%)" in text
