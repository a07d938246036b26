"""The merge's batch edit at speed (issue 51's 1.5x of ``annotate --copy``): the key search
``_native.splice.key_values`` (C and fallback) against the regex it stands for, the merged
bytes the same on either backend and with ``io.heap.hold_freed``, the ranks written in
parallel as members giving the same text as one after another, and the clock fit's params."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import tempfile
import zlib

import numpy as np
import pytest

from tests.support import make_ranks
from traceforge import _native
from traceforge.analyses.collectives.clock import ClockFit, _table
from traceforge.api.fan_out import run_jobs
from traceforge.io.memory.heap import hold_freed
from traceforge.io.read.codec import iter_decompressed
from traceforge.rewrite.merge import _KEY_NAMES, RankInput, Window, _last_event_end, merge_ranks

# what key_values stands for: the regex the batch edit split on before it
SPLIT = re.compile(rb'"(pid|tid|id|correlation|External id|external id|args)"\s*:\s*'
                   rb'(-?\d+|"(?:[^"\\]|\\.)*"|\{)')
EDGES = [
    b'{"pid": 12,"tid":"a\\"b", "name":"pid","args":{"correlation":-5, "id":99999999999999999999}}',
    b'"pid"\x0b:\x0c-9223372036854775808 "id":-9223372036854775809 "tid":"x\\\ny" "tid":"q" "args": 5 "args" : {',
    b'"pid":- "pid":"unterminated', b'"id"', b"", b'"', b'"pid":', b'"pid":1', b'"id":12.5e3 "External id" :7',
    b'"id":9223372036854775807 "id":9223372036854775808 "id":18446744073709551616',
    b'"name":"pid":3', b'"x\\"pid": 4', b'"pid\\"": 4',
]


def regex_reference(data: bytes) -> tuple[list[int], list[int], list[int], list[int], int]:
    codes, starts, stops, ints, overflow = [], [], [], [], 0
    for m in SPLIT.finditer(data):
        value, number = m.group(2), 0
        if value[:1] not in (b'"', b"{"):
            number = int(value)
            if not -(1 << 63) <= number < (1 << 63):
                number, overflow = 0, overflow + 1
        codes.append(_KEY_NAMES.index(m.group(1)))
        starts.append(m.start(2))
        stops.append(m.end(2))
        ints.append(number)
    return codes, starts, stops, ints, overflow


def decoded(found: tuple) -> tuple[list[int], list[int], list[int], list[int], int]:
    return (np.frombuffer(found[0], np.int8).tolist(), *(np.frombuffer(f, np.int64).tolist() for f in found[1:4]),
            found[4])


def samples() -> list[bytes]:
    r = random.Random(51)
    alphabet = b'"pidtargsEx{}:\\ \n\x0b-0123,.'
    return EDGES + [bytes(r.choice(alphabet) for _ in range(r.randint(0, 80))) for _ in range(4000)]


def backends() -> list[str]:
    return ["python"] + (["c"] if _native.c_module("splice") is not None else [])


@pytest.mark.parametrize("backend", backends())
def test_key_values_are_the_regex_matches(backend):
    module = _native.fallback_module("splice") if backend == "python" else _native.c_module("splice")
    for data in samples():
        assert decoded(module.key_values(data, _KEY_NAMES)) == regex_reference(data), data
    got = decoded(module.key_values(EDGES[0], _KEY_NAMES))
    assert got[0] == [0, 1, 6, 3, 2] and got[3][0] == 12 and got[3][3] == -5 and got[4] == 1
    assert decoded(module.key_values(EDGES[9], _KEY_NAMES))[3] == [(1 << 63) - 1, 0, 0]


def test_key_values_take_any_buffer_and_any_keys():
    data = b'{"ts": 1, "a": "ts", "ts":"2"}'
    for backend in backends():
        module = _native.fallback_module("splice") if backend == "python" else _native.c_module("splice")
        for buffer in (data, bytearray(data), memoryview(data)):
            codes, starts, stops, ints, overflow = decoded(module.key_values(buffer, (b"x", b"ts")))
            assert (codes, starts, stops, ints, overflow) == ([1, 1], [7, 26], [8, 29], [1, 0], 0)
        assert decoded(module.key_values(data, ())) == ([], [], [], [], 0)


def test_last_event_end_strips_as_rstrip_did():
    for text in (b"", b" ", b"a", b"a,", b"a ,\n ", b"a,,", b"a\n,\n", b",", b"a , , "):
        old = text.rstrip(b" \t\r\n")
        if old.endswith(b","):
            old = old[:-1].rstrip(b" \t\r\n")
        assert text[:_last_event_end(text)] == old, text


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory, make_sample):
    out = tmp_path_factory.mktemp("ranks") / "r3"
    make_ranks.make(make_sample(steps=4).path, out, 3, 7, delays=2)
    return out


def merged_bytes(inputs: list[RankInput], out) -> bytes:
    merge_ranks(inputs, str(out))
    return gzip.decompress(out.read_bytes())


def test_merged_bytes_the_same_on_both_backends_and_with_freed_memory_held(tmp_path, ranks_dir):
    inputs = [RankInput(r, str(ranks_dir / f"rank{r}.json.gz"), 1234 * r, 20_000 - r, 5, 10**9, 10**9 - 7)
              for r in range(3)]
    with _native.using("python", ["splice"]):
        fallback = merged_bytes(inputs, tmp_path / "python.json.gz")
    native = merged_bytes(inputs, tmp_path / "c.json.gz")
    assert native == fallback
    assert isinstance(hold_freed(), bool)
    assert merged_bytes(inputs, tmp_path / "held.json.gz") == native
    events = json.loads(native)["traceEvents"]
    assert len({e["pid"] // (1 << 22) for e in events if isinstance(e.get("pid"), int)}) == 3


def test_clock_params_are_the_tables_first_row_per_rank():
    rows = [{"rank": 2, "status": "fitted", "offset_ns": 5, "drift_ppb": -3, "x0_ns": 9},
            {"rank": 0, "status": "reference"}, {"rank": 2, "status": "fitted", "offset_ns": 7}]
    fit = ClockFit(_table([{**dict.fromkeys(("offset_ns", "drift_ppb", "x0_ns", "matches", "inliers",
                                              "residual_median_ns", "residual_max_ns", "against"), 0), **r}
                           for r in rows]))
    assert fit.params(2) == (5, -3, 9) and fit.params(0) == (0, 0, 0) and fit.params(1) == (0, 0, 0)
    t = np.array([9, 10**9 + 9, -(10**9)], np.int64)
    assert fit.shift(2, t).tolist() == [5, 5 - 3, 5 + ((-(10**9) - 9) * -3) // 10**9]


def gzip_members(data: bytes) -> int:
    count = 0
    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        assert d.eof
        data, count = d.unused_data, count + 1
    return count


def text_of(path) -> bytes:
    return b"".join(bytes(chunk) for chunk in iter_decompressed(str(path)))


def left_behind() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("merge-rank-")}


@pytest.fixture(scope="module")
def odd_rank(tmp_path_factory):
    odd = [
        {"ph": "X", "name": "a", "ts": 10.5, "dur": 1, "args": {"id": 7, "correlation": 3}, "pid": 5, "tid": 6},
        {"ph": "X", "name": "b", "pid": "Spans", "tid": "x", "ts": "12.25", "dur": 2},
        {"ph": "s", "name": "f", "cat": "ac2g", "id": 90000000, "pid": 5, "tid": 6, "ts": 11},
        {"ph": "X", "name": "c", "pid": -1, "tid": 4, "ts": 14.001, "dur": 1,
         "args": {"external id": 12, "nested": {"correlation": 123456789}}},
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "p"}},
    ]
    path = tmp_path_factory.mktemp("odd") / "odd.json"
    path.write_text(json.dumps({"traceEvents": odd}))
    return path


@pytest.mark.parametrize("suffix", [".json.gz", ".json.zst", ".json"])
def test_ranks_written_in_parallel_give_the_same_text(tmp_path, ranks_dir, odd_rank, suffix):
    """Members from the workers: the same text as one rank after another, whatever the ids the
    scan guessed (none, too few, too many: written again from the right start), with a rank
    the window empties, the appended events, and no member file left behind."""
    inputs = [RankInput(0, str(ranks_dir / "rank0.json.gz"), 1234, 20_000, 5),
              RankInput(1, str(odd_rank), -777, -3_000, 9, 5_000_000, 1_000),
              RankInput(2, str(ranks_dir / "rank1.json.gz"), 9, 0, 0),
              RankInput(3, str(ranks_dir / "rank2.json.gz"), 0, 0, 0)]
    extra = [b'{"ph":"i","name":"after","pid":1,"tid":1,"ts":1}', b'{"ph":"i","name":"after2","pid":1,"tid":1,"ts":2}']

    def appended(written):
        assert [w.rank for w in written] == [r.rank for r in inputs] and written[0].pids  # the pid maps came back
        return iter(extra)

    before = left_behind()
    serial = merge_ranks(inputs, str(tmp_path / f"serial{suffix}"), appended=appended)
    want = text_of(tmp_path / f"serial{suffix}")
    for guess in (None, [-1, -1, -1, -1], [10**12, 0, 5, 10**9]):
        out = tmp_path / f"members{suffix}"
        merged = merge_ranks(inputs, str(out), appended=appended, jobs=2, id_tops=guess, runner=run_jobs)
        assert text_of(out) == want, guess
        assert [(w.events_in, w.events_out, w.added, w.pids, w.tids) for w in merged.ranks] == [
            (w.events_in, w.events_out, w.added, w.pids, w.tids) for w in serial.ranks]
        assert merged.appended == serial.appended == 2
    if suffix == ".json.gz":
        assert gzip_members(out.read_bytes()) >= 1 + 4 + 3 + 1  # head, ranks, separators, appended, tail
    json.loads(want)
    far = tmp_path / "far.json"  # only slices, all past the window: a rank that writes nothing
    far.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 10**13, "dur": 1}]}))
    inputs = around = [inputs[0], RankInput(1, str(far)), inputs[2]]
    inside = Window(0, 9 * 10**15)
    merge_ranks(around, str(tmp_path / f"window{suffix}"), keep=inside, appended=appended)
    merge_ranks(around, str(tmp_path / f"window2{suffix}"), keep=inside, appended=appended, jobs=2, id_tops=[0, 0, 0],
                runner=run_jobs)
    assert text_of(tmp_path / f"window2{suffix}") == text_of(tmp_path / f"window{suffix}")
    names = {e.get("name") for e in json.loads(text_of(tmp_path / f"window{suffix}"))["traceEvents"]}
    assert "x" not in names and "after" in names
    assert left_behind() <= before


def test_a_bad_rank_in_parallel_leaves_no_output_and_no_member(tmp_path, ranks_dir):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents":[{"ph":"X","ts":1,"dur":1,"pid":1,"tid":1},{"ph":')
    inputs = [RankInput(0, str(ranks_dir / "rank0.json.gz")), RankInput(1, str(bad)),
              RankInput(2, str(ranks_dir / "rank1.json.gz"))]
    before = left_behind()
    with pytest.raises(Exception, match="bad.json"):
        merge_ranks(inputs, str(tmp_path / "out.json.gz"), jobs=2, id_tops=[0, 0, 0], runner=run_jobs)
    assert not (tmp_path / "out.json.gz").exists()
    assert left_behind() <= before
