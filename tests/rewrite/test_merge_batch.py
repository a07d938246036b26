"""The merge's batch edit at speed (issue 51's 1.5x of ``annotate --copy``): the key search
``_native.splice.key_values`` (C and fallback) against the regex it stands for, the merged
bytes the same on either backend and with ``io.heap.hold_freed``, and the clock fit's params."""

from __future__ import annotations

import gzip
import json
import random
import re

import numpy as np
import pytest

from tests.support import make_ranks
from traceforge import _native
from traceforge.analyses.collectives.clock import ClockFit, _table
from traceforge.io.memory.heap import hold_freed
from traceforge.rewrite.merge import _KEY_NAMES, RankInput, _last_event_end, merge_ranks

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
