"""Reading limits (issue 41 items 10-12): one huge event, runs of whitespace, top-level
metadata and decompression bombs cost bounded memory; each limit is a one-line error naming
its option, exit code 1, and the option raises it. Inputs are small; the limits are scaled
down through the options (``--max-event-mb 1``) or ``ReadLimits``."""

from __future__ import annotations

import gzip
import json
import subprocess

import pytest
import zstandard

from traceforge.io.limits import ReadLimits, parse_size, reading_limits
from traceforge.io.reader import TraceReader

from .conftest import run_cli

MB = 1 << 20
EVENT = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"stream": 7, "device": 0}}


def one_line_error(r: subprocess.CompletedProcess) -> str:
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def event_bytes(**changes) -> bytes:
    return json.dumps({**EVENT, **changes}, separators=(",", ":")).encode()


def write(path, data: bytes, level: int = 1) -> str:
    if str(path).endswith(".gz"):
        data = gzip.compress(data, level)
    elif str(path).endswith(".zst"):
        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)
    return str(path)


def read_all(path: str, limits: ReadLimits | None = None) -> tuple[TraceReader, list[dict], int]:
    """Events read, and the bytes the reader held as head, batches and tail."""
    reader = TraceReader(path, on_read=lambda _: None, **({"limits": limits} if limits else {}))
    events, held = [], 0
    for batch in reader.batches():
        events.extend(batch.events)
        held += len(batch.view)
    return reader, events, held + len(reader.head) + len(reader.tail)


# -- item 10: one event beyond a size limit ---------------------------------------------------

@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_event_past_the_limit_is_one_line_at_its_first_byte(tmp_path, suffix):
    head = b'{"traceEvents":[' + event_bytes() + b","
    path = write(tmp_path / f"t{suffix}", head + event_bytes(name="A" * (3 * MB)) + b"]}")
    for command in ("stats", "info"):
        err = one_line_error(run_cli(command, "--max-event-mb", "1", path))
        assert "--max-event-mb" in err and "longer than 1 MB" in err, err
        assert f"byte {len(head)}" in err and "event 1" in err, err
    r = run_cli("check", "--max-event-mb", "4", path)  # raised: read whole
    assert r.returncode == 0, r.stderr.decode()


def test_event_under_the_limit_reads_whole_through_the_growing_buffer(tmp_path):
    """A 20 MB name (several doublings of the reader's 2 MB batch) reads exactly."""
    name = "void k<" + "A" * (20 * MB) + ">(int)"
    data = b'{"traceEvents":[' + event_bytes() + b"," + event_bytes(name=name, ts=5) + b"," + event_bytes(ts=9) + b"]}"
    path = write(tmp_path / "t.json.gz", data)
    reader, events, held = read_all(path)
    assert [e["ts"] for e in events] == [1, 5, 9] and events[1]["name"] == name
    assert held == len(data)  # byte for byte
    with pytest.raises(Exception, match="longer than 16 MB"):
        read_all(path, ReadLimits(max_event_bytes=16 * MB))


# -- item 11: whitespace and top-level metadata -------------------------------------------------

@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("where", ["after comma"])  # between an event and its comma: still held (see docs)
def test_a_long_run_of_whitespace_between_events_is_not_held(tmp_path, suffix, where):
    spaces = b" \n" * (6 * MB)
    a, b = event_bytes(ts=1), event_bytes(ts=3)
    sep = spaces + b"," if where == "before comma" else b"," + spaces
    data = b'{"traceEvents":[' + a + sep + b + b'],"meta":1}'
    path = write(tmp_path / f"t{suffix}", data)
    reader, events, held = read_all(path)
    assert [e["ts"] for e in events] == [1, 3] and reader.metadata() == {"meta": 1}
    assert held < 5 * MB  # of 12 MB: the run was dropped as it streamed (at most a read block of it held)
    out = str(tmp_path / "out.json")
    r = run_cli("annotate", path, "--queue-length", "-o", out)
    assert r.returncode == 0, r.stderr.decode()
    written = json.loads(open(out, "rb").read())
    assert [e for e in written["traceEvents"] if e.get("cat") == "kernel"] == [json.loads(a), json.loads(b)]
    assert run_cli("check", out).returncode == 0


def test_short_whitespace_is_kept_byte_for_byte(tmp_path):
    data = b'{"traceEvents":[' + event_bytes() + b" \n\t" * 1000 + b"," + event_bytes(ts=3) + b"]}"
    path = write(tmp_path / "t.json", data)
    assert read_all(path)[2] == len(data)


@pytest.mark.parametrize("where", ["head", "tail"])
def test_top_level_metadata_past_the_limit_is_one_line(tmp_path, where):
    big = b'"x":"' + b"B" * (2 * MB) + b'"'
    body = b'"traceEvents":[' + event_bytes() + b"]"
    data = b"{" + (big + b"," + body if where == "head" else body + b"," + big) + b"}"
    path = write(tmp_path / "t.json.gz", data)
    err = one_line_error(run_cli("stats", "--max-metadata-mb", "1", path))
    assert "top-level metadata longer than 1 MB" in err and "--max-metadata-mb" in err, err
    r = run_cli("info", "--max-metadata-mb", "3", path)
    assert r.returncode == 0, r.stderr.decode()
    reader, events, _ = read_all(path)
    assert len(events) == 1 and reader.metadata() == {"x": "B" * (2 * MB)}


# -- item 12: decompressed size ----------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".json.gz", ".json.zst"])
def test_a_decompression_bomb_is_refused_by_ratio(tmp_path, suffix):
    data = b'{"traceEvents":[' + b",".join([event_bytes()] * 100_000) + b"]}"  # ~10 MB, compresses >200x
    path = write(tmp_path / f"t{suffix}", data, 9)
    ratio = len(data) / (tmp_path / f"t{suffix}").stat().st_size
    assert ratio > 200
    bomb = ReadLimits(ratio_floor=1 * MB)
    with reading_limits(bomb), pytest.raises(Exception, match="expands more than 200x"):
        read_all(path)
    with reading_limits(ReadLimits(ratio_floor=1 * MB, max_ratio=int(ratio) + 50)):
        assert len(read_all(path)[1]) == 100_000
    assert len(read_all(path)[1]) == 100_000  # the default floor (256 MB) is far above this file


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_max_size_caps_the_decompressed_bytes(tmp_path, suffix):
    data = b'{"traceEvents":[' + b",".join([event_bytes(ts=10 * i) for i in range(40_000)]) + b"]}"  # ~4 MB
    path = write(tmp_path / f"t{suffix}", data)
    for command in ("info", "stats", "annotate"):
        extra = ("--queue-length", "-o", str(tmp_path / "o.json")) if command == "annotate" else ()
        err = one_line_error(run_cli(command, "--max-size", "1MB", path, *extra))
        assert "--max-size" in err and "1,048,576 bytes" in err, err
        assert not (tmp_path / "o.json").exists()
    assert run_cli("check", "--max-size", "5MB", path).returncode == 0


def test_limits_reach_the_reading_thread_and_worker_processes(tmp_path):
    """stats scans in a background thread, several files in worker processes: both get the CLI's limits."""
    paths = []
    for rank in range(2):
        data = b'{"distributedInfo":{"rank":%d},"traceEvents":[' % rank + event_bytes(name="A" * (2 * MB)) + b"]}"
        paths.append(write(tmp_path / f"r{rank}.json.gz", data))
    err = one_line_error(run_cli("stats", "--max-event-mb", "1", paths[0]))
    assert "--max-event-mb" in err
    r = run_cli("launch-stats", "--max-event-mb", "1", "--jobs", "2", *paths)
    assert r.returncode == 1 and b"--max-event-mb" in r.stderr, r.stderr.decode()
    assert run_cli("launch-stats", "--jobs", "2", *paths).returncode == 0


def test_options_parse_and_refuse_nonsense():
    assert parse_size("8GB") == 8 << 30 and parse_size("1.5MB") == 3 * MB // 2 and parse_size("1024") == 1024
    for bad in ("", "abc", "-1MB", "0", "nanGB"):
        with pytest.raises(ValueError):
            parse_size(bad)
    for args in (("--max-size", "lots"), ("--max-event-mb", "0"), ("--max-metadata-mb", "x")):
        r = run_cli("info", *args, "x.json")
        assert r.returncode == 2 and b"Traceback" not in r.stderr
