"""Issue 49's crashes: an integer of 5,000 digits (past Python's int-from-text limit), a
metadata event whose ``pid`` or ``tid`` is a list or object, and a gzip head holding many
``"traceEvents"`` strings before the array (the rank lookup of every many-file command was
quadratic there). Each gives a result or one error line, exit 1, never an internal error;
with and without pyarrow (``tests.arrow_modes``)."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from tests.conftest import run_cli
from tests.support.arrow_modes import MODES, run_in
from traceforge.io.read.rank_files import head_rank
from traceforge.io.write.jsontext import json_int

COMMANDS = (("info",), ("stats",), ("check",), ("classify",), ("launch-stats",), ("patterns",), ("critical-path",),
            ("counters",), ("repair", "-o", "{out}"), ("annotate", "--all", "-o", "{out}"), ("diff", "{path}"))
OK = {"check": {0, 1, 2}}


def _first_event_with(raw: bytes, key: bytes) -> int:
    at = raw.index(b'"' + key + b'": ')
    return at + len(key) + 4


def _huge_int(raw: bytes, key: bytes) -> bytes:
    """The first ``key`` value made a number of 5,000 digits."""
    at = _first_event_with(raw, key)
    end = at
    while raw[end:end + 1] not in (b",", b"}", b"\n"):
        end += 1
    return raw[:at] + b"9" * 5000 + raw[end:]


def _metadata_pid(raw: bytes, value: bytes, key: bytes = b"pid") -> bytes:
    """The first ``process_name``/``thread_name`` event's ``key`` made ``value``."""
    at = raw.index(b'"ph": "M"')
    k = raw.index(b'"' + key + b'": ', at)
    end = k + len(key) + 4
    while raw[end:end + 1].isdigit():
        end += 1
    return raw[:k + len(key) + 4] + value + raw[end:]


INPUTS = {
    "dur_5000_digits": lambda raw: _huge_int(raw, b"dur"),
    "ts_5000_digits": lambda raw: _huge_int(raw, b"ts"),
    "arg_5000_digits": lambda raw: raw.replace(b'"correlation": ', b'"correlation": ' + b"1" * 5000 + b", \"c\": ", 1),
    "metadata_pid_list": lambda raw: _metadata_pid(raw, b"[1234]"),
    "metadata_pid_object": lambda raw: _metadata_pid(raw, b'{"a": [1]}'),
    "metadata_tid_list": lambda raw: _metadata_pid(raw, b"[0, 1]", b"tid"),
}


def _check_outcome(command: str, r) -> None:
    err = r.stderr.decode("utf-8", "replace")
    assert "internal error" not in err and "Traceback" not in err, (command, err[-500:])
    assert r.returncode in OK.get(command, {0, 1}), (command, r.returncode, err[-500:])
    if r.returncode == 1 and command != "check":
        assert err.count("traceforge: error: ") == 1, (command, err)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_hostile_value_every_command(name, tmp_path, sample):
    path = tmp_path / "t.json"
    path.write_bytes(INPUTS[name](sample.raw))
    assert path.read_bytes() != sample.raw
    for command in COMMANDS:
        out = tmp_path / "out.json"
        args = [a.format(out=out, path=path) for a in command[1:]]
        r = run_cli(command[0], str(path), *args, "-q")
        _check_outcome(command[0], r)
        out.unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["dur_5000_digits", "metadata_pid_list"])
def test_hostile_value_with_and_without_pyarrow(name, mode, tmp_path, sample):
    path = tmp_path / "t.json"
    path.write_bytes(INPUTS[name](sample.raw))
    for command in (("stats",), ("annotate", "--all", "-o", str(tmp_path / "o.json"))):
        _check_outcome(command[0], run_in(mode, command[0], str(path), *command[1:], "-q"))


def test_huge_int_reads_as_infinite_float():
    assert json_int("12") == 12 and type(json_int("12")) is int
    assert json_int("9" * 5000) == float("inf") and json_int("-" + "9" * 5000) == float("-inf")


def _many_keys_head(raw: bytes, count: int) -> bytes:
    """The sample with a top-level key before ``traceEvents`` holding ``count`` strings "traceEvents"."""
    junk = b'"x": [' + b",".join([b'"traceEvents"'] * count) + b'], "y": {"traceEvents": 1}, '
    return b"{" + junk + raw.lstrip()[1:]


def test_head_with_many_trace_events_strings_answers_fast(tmp_path, sample):
    doc = json.loads(sample.raw)
    rank = doc["distributedInfo"]["rank"]
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    a.write_bytes(gzip.compress(_many_keys_head(sample.raw, 400_000), 1))
    b.write_bytes(gzip.compress(_many_keys_head(sample.raw.replace(b'"rank": 0', b'"rank": 1', 1), 400_000), 1))
    started = time.perf_counter()
    assert head_rank(str(a)) == rank
    assert time.perf_counter() - started < 1.0
    r = run_cli("stats", str(a), str(b), "-q")
    assert r.returncode == 0, r.stderr.decode()
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize("head, rank", [
    (b'{"distributedInfo": {"rank": 3}, "traceEvents": []}', 3),
    (b'{"a": "\\"traceEvents\\": [", "distributedInfo": {"rank": 4}, "traceEvents": []}', 4),
    (b'{"a": ["traceEvents"], "traceEvents": [], "distributedInfo": {"rank": 5}}', None),  # after the array
    (b'[{"ph": "X"}]', None),
    (b'{"distributedInfo": {"rank": 1}', None),  # cut short before traceEvents
    (b'{"distributedInfo": {"rank": ' + b"9" * 5000 + b'}, "traceEvents": []}', None),
])
def test_head_rank_walks_the_top_level_keys(head, rank, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(head)
    assert head_rank(str(path)) == rank
