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

from tests.conftest import run_cli
from traceforge.io.read.limits import ReadLimits, parse_size, reading_limits
from traceforge.io.read.reader import TraceReader

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

SEPARATORS = {  # where a long run of blanks goes between two events (or before the first)
    "after comma": b",{ws}", "before comma": b"{ws},", "both sides": b"{ws},{ws}", "before first": b"{ws}",
    "before ]": b"{ws}", "trailing comma": b"{ws},{ws}",
}


def spaced(where: str, spaces: bytes, a: bytes, b: bytes) -> bytes:
    sep = SEPARATORS[where].replace(b"{ws}", spaces)
    if where == "before first":
        return b'{"traceEvents":[' + sep + a + b"," + b + b'],"meta":1}'
    if where in ("before ]", "trailing comma"):
        return b'{"traceEvents":[' + a + b"," + b + sep + b'],"meta":1}'
    return b'{"traceEvents":[' + a + sep + b + b'],"meta":1}'


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("where", list(SEPARATORS))
def test_a_long_run_of_whitespace_between_events_is_not_held(tmp_path, suffix, where, backend):
    spaces = b" \n" * (6 * MB)
    a, b = event_bytes(ts=1), event_bytes(ts=3)
    data = spaced(where, spaces, a, b)
    path = write(tmp_path / f"t{suffix}", data)
    reader, events, held = read_all(path)
    assert [e["ts"] for e in events] == [1, 3] and reader.metadata() == {"meta": 1}
    assert held < 5 * MB  # of 12 MB or more: each run was dropped as it streamed (at most a read block of it held)
    assert reader.events_end == data.index(b'],"meta"')  # absolute: the tail starts at "]" (its run dropped)
    out = str(tmp_path / "out.json")
    r = run_cli("annotate", path, "--queue-length", "-o", out)
    assert r.returncode == 0, r.stderr.decode()
    written = read_all(out)[1]  # (a trailing comma stays: Perfetto takes it, json.loads does not)
    assert [e for e in written if e.get("cat") == "kernel"] == [json.loads(a), json.loads(b)]
    assert run_cli("check", out).returncode == 0


@pytest.mark.parametrize("where", ["before comma", "after comma"])
def test_long_whitespace_after_an_event_the_scanner_leaves_to_the_parser(tmp_path, where, backend):
    """An event nested deeper than the scanner reads is walked by the exact decoder: its runs are dropped too."""
    deep = event_bytes(ts=1)[:-1] + b',"deep":' + b"[" * 600 + b"]" * 600 + b"}"
    data = spaced(where, b" " * (12 * MB), deep, event_bytes(ts=3))
    reader, events, held = read_all(write(tmp_path / "t.json.gz", data))
    assert [e["ts"] for e in events] == [1, 3] and held < 6 * MB


def test_an_event_offset_past_a_dropped_run_is_absolute(tmp_path):
    """Offsets (errors, args patched into events) count the dropped bytes."""
    data = spaced("before comma", b" " * (3 * MB), event_bytes(ts=1), b'{"ts": 3, "ph": X}')
    err = one_line_error(run_cli("stats", write(tmp_path / "t.json", data)))
    assert f"byte {data.index(b'X}')}" in err, err


def test_a_trailing_comma_at_a_read_block_boundary(tmp_path):
    """The comma ending one read block and "]" starting the next: the array ends (was "event is not an object")."""
    from traceforge.io.read.codec import BLOCK
    head, first = b'{"traceEvents":[', event_bytes(name="")
    data = head + event_bytes(name="A" * (BLOCK - len(head) - len(first) - 1)) + b",]}"
    assert data[BLOCK - 1:BLOCK + 1] == b",]"
    _, events, held = read_all(write(tmp_path / "t.json", data))
    assert len(events) == 1 and held == len(data)


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
        assert r.returncode == 1 and b"Traceback" not in r.stderr and r.stderr.count(b"\n") == 1
