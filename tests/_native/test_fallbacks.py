"""The Python fallbacks of the C kernels (``traceforge/_native/fallback``) against the C, on
random and edge-case inputs: identical bytes, dtypes, values and exception types. Then the
seam itself, and whole commands run on both backends with byte-identical output."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from traceforge import _native
from traceforge._native.fallback import counter_text as py_counter_text
from traceforge._native.fallback import factorize as py_factorize
from traceforge._native.fallback import replay as py_replay
from traceforge._native.fallback import search as py_search
from traceforge._native.fallback import splice as py_splice
from traceforge._native.fallback import stacks as py_stacks

c_counter_text = pytest.importorskip("traceforge._native._counter_text")
c_factorize = pytest.importorskip("traceforge._native._factorize")
c_replay = pytest.importorskip("traceforge._native._replay")
c_search = pytest.importorskip("traceforge._native._search")
c_splice = pytest.importorskip("traceforge._native._splice")
c_stacks = pytest.importorskip("traceforge._native._stacks")

SAMPLE = ROOT / "samples" / "train_step.json.gz"
I64 = np.iinfo(np.int64)


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _same(c_call: Callable[[], object], py_call: Callable[[], object]) -> object:
    """Both calls' results, asserted identical (value and type), or both calls' exception types."""
    try:
        want = c_call()
    except Exception as e:  # noqa: BLE001  (any exception: the fallback must raise the same type)
        with pytest.raises(type(e)) as got:
            py_call()
        if isinstance(e, (IndexError, ValueError)) and "ndarray" not in str(e):
            assert str(got.value) == str(e)
        return e
    got = py_call()
    assert type(got) is type(want)
    assert got == want
    return want


def test_every_c_name_has_its_fallback():
    for c, py in [(c_counter_text, py_counter_text), (c_factorize, py_factorize), (c_replay, py_replay),
                  (c_search, py_search), (c_splice, py_splice), (c_stacks, py_stacks)]:
        public = {name for name in dir(c) if not name.startswith("_")}
        assert public <= set(dir(py)), public - set(dir(py))
        for name in public:
            if isinstance(getattr(c, name), int):
                assert getattr(py, name) == getattr(c, name), name


# -- counter_text ------------------------------------------------------------------------------


def _numbers(rng: np.random.Generator, n: int) -> np.ndarray:
    """int64s of every digit count, signs, round ones (trailing zeros) and the extremes."""
    digits = rng.integers(0, 19, n)
    values = rng.integers(0, 10 ** digits, dtype=np.int64, endpoint=True) * rng.choice([-1, 1], n)
    round_ = rng.random(n) < 0.3
    values[round_] = values[round_] // 1000 * 1000
    values[rng.random(n) < 0.05] = 0
    edges = _i64([0, 1, -1, 9, 10, 99, 100, 10**8 - 1, 10**8, -10**8, 10**16, 10**18, I64.max, I64.min, I64.min + 1])
    return np.concatenate([edges, values])


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, 6, 9, 17, 18])
def test_fixed_point_texts(decimals):
    rng = np.random.default_rng(decimals)
    values = _numbers(rng, 3000)
    for prefix, real in [(b"", False), (b"", True), (b', "bytes": ', False), (b"x", True)]:
        _same(lambda: c_counter_text.fixed_point_texts(values, decimals, prefix, real),
              lambda: py_counter_text.fixed_point_texts(values, decimals, prefix, real))
    _same(lambda: c_counter_text.fixed_point_texts(values, decimals),
          lambda: py_counter_text.fixed_point_texts(values, decimals))


def test_fixed_point_texts_edges_and_errors():
    a = np.arange(10, dtype=np.int64)
    cases = [
        (_i64([]), 3), (_i64([5]), 0), (a, np.int64(2)), (a.astype(np.uint64), 1), (np.array([1.5, -2.0]), 0),
        (np.zeros((2, 2), np.int64), 1), (a.tobytes(), 4), (bytearray(a.tobytes()), 4),
        (a, 19), (a, -1), (a, 1.0), (a, 2**40), (a[::2], 1), ("abc", 1), ([1, 2], 1), (a.astype(np.int32), 1),
        (a[:3].tobytes()[:20], 1),
    ]
    for values, decimals in cases:
        _same(lambda: c_counter_text.fixed_point_texts(values, decimals),
              lambda: py_counter_text.fixed_point_texts(values, decimals))
    for extra in [(None,), (b"p", "yes"), (b"p", 0), (memoryview(b"pre"), True)]:
        _same(lambda: c_counter_text.fixed_point_texts(a, 2, *extra),
              lambda: py_counter_text.fixed_point_texts(a, 2, *extra))


@pytest.mark.parametrize("seed", range(6))
def test_counter_events(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(0, 2000))
    ts = rng.integers(1_683_564_901_548_726_000, 1_683_564_991_548_726_000, n, dtype=np.int64)
    if seed % 2:
        ts = np.sort(ts)
    if seed == 3:
        ts = _numbers(rng, n)[:n]
    values = _numbers(rng, n)[:n]
    decimals = int(rng.integers(0, 19))
    head, middle, tail = b'{"ph": "C", "name": "q", "pid": 1, "ts": ', b', "args": {"v": ', b"}}"
    _same(lambda: c_counter_text.counter_events(head, middle, tail, ts, values, decimals),
          lambda: py_counter_text.counter_events(head, middle, tail, ts, values, decimals))
    _same(lambda: c_counter_text.counter_events(b"", b"", b"", ts, values, decimals),
          lambda: py_counter_text.counter_events(b"", b"", b"", ts, values, decimals))


def test_counter_events_edges_and_errors():
    ts, v = _i64([0, 1, 999, 1000, 1500, -1500, I64.max, I64.min]), _i64([1, 2, 3, 4, 5, 6, 7, 8])
    for args in [(ts, v, 0), (ts, v, 18), (ts[:0], v[:0], 3), (ts, v[:7], 1), (ts, v, 19), (ts, v, -1),
                 (ts.astype(np.int32), v.astype(np.int32), 1), (ts[::2], v[::2], 1), (ts, "x", 1), (ts, v, None)]:
        _same(lambda: c_counter_text.counter_events(b"<", b"|", b">", *args),
              lambda: py_counter_text.counter_events(b"<", b"|", b">", *args))
    _same(lambda: c_counter_text.counter_events("<", b"|", b">", ts, v, 1),
          lambda: py_counter_text.counter_events("<", b"|", b">", ts, v, 1))


def test_counter_text_of_many_points():
    rng = np.random.default_rng(7)
    n = 200_000  # several chunks
    ts = np.sort(rng.integers(0, 10**16, n, dtype=np.int64))
    values = rng.integers(-10**9, 10**9, n, dtype=np.int64)
    _same(lambda: c_counter_text.counter_events(b"{", b",", b"}", ts, values, 2),
          lambda: py_counter_text.counter_events(b"{", b",", b"}", ts, values, 2))
    _same(lambda: c_counter_text.fixed_point_texts(values, 3, b",", True),
          lambda: py_counter_text.fixed_point_texts(values, 3, b",", True))


# -- splice: join_rows -------------------------------------------------------------------------


def _join_case(rng: np.random.Generator) -> tuple[list, list, int, bytes]:
    rows = int(rng.integers(0, 40))
    n_parts = int(rng.integers(0, 5))
    blobs, columns = [], []
    for _ in range(n_parts):
        size = int(rng.integers(0, 30))
        blob = bytes(rng.integers(97, 123, size, dtype=np.uint8))
        kind = rng.integers(0, 4)
        blobs.append(blob if kind else memoryview(blob) if size % 2 else bytearray(blob))
        if rng.random() < 0.25:
            columns.append(None)
            continue
        starts = rng.integers(0, size + 1, rows)
        lengths = rng.integers(0, size - starts + 1)
        lengths[rng.random(rows) < 0.3] = 0
        columns.append((_i64(starts), _i64(lengths)))
    return blobs, columns, rows, [b"", b",", b", ", b",\n"][int(rng.integers(0, 4))]


def test_join_rows_at_random():
    rng = np.random.default_rng(11)
    for _ in range(1500):
        blobs, columns, rows, sep = _join_case(rng)
        _same(lambda: c_splice.join_rows(blobs, columns, rows, sep),
              lambda: py_splice.join_rows(blobs, columns, rows, sep))


def test_join_rows_long_rows_and_many_rows():
    rng = np.random.default_rng(12)
    big = bytes(rng.integers(0, 256, 1 << 23, dtype=np.uint8))  # pieces longer than a gather step
    rows = 3
    columns = [(_i64([0, 5, 1 << 22]), _i64([1 << 23, (1 << 22) + 3, 17])), None]
    _same(lambda: c_splice.join_rows([big, b"tail"], columns, rows, b"|"),
          lambda: py_splice.join_rows([big, b"tail"], columns, rows, b"|"))
    rows = 300_000
    text = b"".join(b"%d" % i for i in range(1000))
    starts = rng.integers(0, len(text) - 40, rows)
    columns = [(_i64(starts), _i64(rng.integers(0, 40, rows))), None,
               (_i64(starts[::-1]), _i64(rng.integers(0, 9, rows)))]
    _same(lambda: c_splice.join_rows([text, b'"k": ', text], columns, rows, b", "),
          lambda: py_splice.join_rows([text, b'"k": ', text], columns, rows, b", "))


def test_join_rows_errors():
    abc, one = b"abc", _i64([0])
    cases = [
        ([abc], [(_i64([0, 1]), _i64([4, 1]))], 2, b""),  # out of bounds, the first (row, part) named
        ([abc, abc], [(_i64([0, 1]), _i64([1, 1])), (_i64([0, 3]), _i64([3, 1]))], 2, b""),
        ([abc, abc], [(_i64([0, 1]), _i64([1, 5])), (_i64([9, 0]), _i64([0, 1]))], 2, b""),
        ([abc], [(_i64([-1]), _i64([1]))], 1, b""), ([abc], [(_i64([I64.min]), _i64([1]))], 1, b""),
        ([abc], [(_i64([2]), _i64([I64.max]))], 1, b""), ([abc], [(_i64([4]), _i64([0]))], 1, b""),
        ([abc], [(one, one)], 2, b""), ([abc], [(one, _i64([0, 1]))], 1, b""), ([abc], [], 1, b""),
        ([abc], [[one, one]], 1, b""), ([abc], [(one, one, one)], 1, b""), ([abc], [None], -1, b""),
        ([abc], [(one, one)], -1, b""), ([], [], -2, b""), ([], [], 3, b","), (5, [None], 1, b""),
        ([abc], 5, 1, b""), ([abc], [None], 1.5, b""), ([abc], [None], 2, "x"), ([abc], [None], np.int64(2), b"-"),
        ((abc, memoryview(abc)), (None, None), 2, b","), ([abc], [(one.astype(np.int32), one)], 1, b""),
    ]
    for blobs, columns, rows, sep in cases:
        _same(lambda: c_splice.join_rows(blobs, columns, rows, sep),
              lambda: py_splice.join_rows(blobs, columns, rows, sep))
    _same(lambda: c_splice.join_rows((x for x in [abc]), iter([None]), 2, b","),  # any iterables
          lambda: py_splice.join_rows((x for x in [abc]), iter([None]), 2, b","))


# -- splice: spans_containing, insert_members, uninitialized -----------------------------------


def _needles(rng: np.random.Generator, alphabet: bytes) -> list[bytes]:
    kind = rng.integers(0, 4)
    count = int(rng.integers(0, 5))
    if kind == 0:  # the new keys: one first byte
        return [b'"' + bytes(rng.choice(list(alphabet), int(rng.integers(1, 5)))) for _ in range(count)]
    if kind == 1:
        return [bytes(rng.choice(list(alphabet), int(rng.integers(1, 4)))) for _ in range(count)]
    if kind == 2:
        return [b"", b"ab"][:count]
    return [b'"a', b'"b', b'"c', b'"d', b'"e', b'"f'][:count + 2]  # more second bytes than the vector path takes


def test_spans_containing_at_random():
    rng = np.random.default_rng(21)
    for trial in range(1500):
        alphabet = b'"ab' if trial % 2 else b'"abcdef,: '
        size = int(rng.integers(0, 300))
        data = bytes(rng.choice(list(alphabet), size))
        n = int(rng.integers(0, 30))
        starts = rng.integers(0, size + 1, n)
        stops = starts + rng.integers(0, size - starts + 1)
        needles = _needles(rng, alphabet)
        if trial % 7 == 0:
            data = memoryview(data)
        _same(lambda: c_splice.spans_containing(data, _i64(starts), _i64(stops), needles),
              lambda: py_splice.spans_containing(data, _i64(starts), _i64(stops), needles))


def test_spans_containing_common_needles_and_errors():
    rng = np.random.default_rng(22)
    data = bytes(rng.choice(list(b'"ab'), 200_000))  # more occurrences than found one at a time
    starts = rng.integers(0, len(data), 5000)
    stops = starts + rng.integers(0, 50, 5000)
    stops = np.minimum(stops, len(data))
    for needles in ([b'"a'], [b'"ab"', b"b"], [b"a"]):
        _same(lambda: c_splice.spans_containing(data, _i64(starts), _i64(stops), needles),
              lambda: py_splice.spans_containing(data, _i64(starts), _i64(stops), needles))
    for starts, stops, needles in [([2], [1], [b"x"]), ([0, -1], [1, 1], [b"x"]), ([0], [4], [b"x"]),
                                   ([0, 1], [1], [b"x"]), ([0], [1], 5), ([0], [3], (b"b",))]:
        _same(lambda: c_splice.spans_containing(b"abc", _i64(starts), _i64(stops), needles),
              lambda: py_splice.spans_containing(b"abc", _i64(starts), _i64(stops), needles))
    _same(lambda: c_splice.spans_containing(b"abc", _i64([0]), _i64([3]), (b for b in [b"b"])),
          lambda: py_splice.spans_containing(b"abc", _i64([0]), _i64([3]), (b for b in [b"b"])))


def _insert_case(rng: np.random.Generator) -> tuple:
    size = int(rng.integers(1, 200))
    data = bytes(rng.choice(list(b'{"ab": 1, "k": 2}'), size))
    n = int(rng.integers(0, 12))
    cuts = np.sort(rng.integers(0, size + 1, 2 * n)).reshape(n, 2) if n else np.zeros((0, 2), np.int64)
    starts, at = cuts[:, 0].copy(), cuts[:, 1].copy()
    blob = b"".join(b'"new%d": %d' % (i, i) for i in range(n))
    lengths = np.array([len(b'"new%d": %d' % (i, i)) for i in range(n)], np.int64)
    body_starts = np.cumsum(lengths) - lengths
    lengths[rng.random(n) < 0.2] = 0
    if rng.random() < 0.2 and n:
        at[rng.integers(0, n)] = -1
    if rng.random() < 0.15 and n:  # out of order or bounds
        which = rng.integers(0, 4)
        i = int(rng.integers(0, n))
        if which == 0:
            starts[i] = -1
        elif which == 1:
            at[i] = size + 1
        elif which == 2:
            body_starts[i] = len(blob) + 1
        else:
            lengths[i] = -3
    empty = rng.random(n) < 0.3
    needles = [[], [b'"k"'], [b'"new'], [b'"ab"', b'"k"'], [b"1"], [b""]][int(rng.integers(0, 6))]
    return data, _i64(starts), _i64(at), empty, blob, _i64(body_starts), _i64(lengths), needles


def test_insert_members_at_random():
    rng = np.random.default_rng(31)
    outcomes = set()
    for _ in range(3000):
        case = _insert_case(rng)
        got = _same(lambda: c_splice.insert_members(*case), lambda: py_splice.insert_members(*case))
        outcomes.add(type(got).__name__)
    assert outcomes == {"bytes", "NoneType", "IndexError"}


def test_insert_members_errors():
    one, e = _i64([0]), np.zeros(1, bool)
    for args in [(b"ab", one, one, e, b"x", one, _i64([1, 1]), []), (b"ab", one, one, np.zeros(2, bool), b"x", one,
                                                                     _i64([1]), []),
                 (b"ab", one, one, e, b"x", one, _i64([1]), 5), (b"ab", one, one, e, "x", one, _i64([1]), [])]:
        _same(lambda: c_splice.insert_members(*args), lambda: py_splice.insert_members(*args))


def test_uninitialized():
    for n in [0, 1, 100, True, np.int64(3), 3.0, -1, 2**70, "3"]:
        got = _same(lambda: len(c_splice.uninitialized(n)), lambda: len(py_splice.uninitialized(n)))
        if isinstance(got, int):
            assert type(py_splice.uninitialized(n)) is bytearray


# -- stacks ------------------------------------------------------------------------------------


def _thread(rng: np.random.Generator, n_cpu: int, n_launch: int, wide: tuple[bool, bool]) -> tuple:
    span = int(rng.integers(1, 100))
    ts_cpu, ts_launch = (np.sort(rng.integers(0, span, k)) if rng.random() < 0.5 else rng.integers(0, span, k)
                         for k in (n_cpu, n_launch))
    dur_cpu, dur_launch = (rng.integers(-3, span, k) for k in (n_cpu, n_launch))
    op_dur = dur_cpu.astype(np.int64 if wide[0] else np.int32)
    call_dur = dur_launch.astype(np.int64 if wide[1] else np.int32)
    ops = np.flatnonzero(rng.random(n_cpu) < 0.7).astype(np.int32)
    calls = np.flatnonzero(rng.random(n_launch) < 0.7).astype(np.int32)
    if rng.random() < 0.2:
        ops = rng.permutation(ops).astype(np.int32)  # not in file order
    return ops, calls, _i64(ts_cpu), op_dur, op_dur.itemsize, _i64(ts_launch), call_dur, call_dur.itemsize


def test_nest_thread_at_random():
    rng = np.random.default_rng(41)
    for trial in range(1500):
        n_cpu, n_launch = int(rng.integers(0, 60)), int(rng.integers(0, 20))
        args = _thread(rng, n_cpu, n_launch, (bool(trial % 2), bool(trial % 3)))
        fill = rng.integers(-5, 5, n_cpu + n_launch).astype(np.int32)
        c_parent, py_parent = fill.copy(), fill.copy()
        _same(lambda: c_stacks.nest_thread(*args, c_parent), lambda: py_stacks.nest_thread(*args, py_parent))
        assert np.array_equal(c_parent, py_parent)


def test_nest_thread_extremes_and_errors():
    ts, dur = _i64([I64.max - 5, I64.max - 5, I64.min, 0]), _i64([10, I64.max, -1, 0])
    ops = np.arange(4, dtype=np.int32)
    for call_args in [
        (ops, ops[:0], ts, dur, 8, ts[:0], dur[:0], 8), (ops, ops, ts, dur, 8, ts, dur.astype(np.int32), 4),
        (ops, ops[:0], ts, dur, 4, ts[:0], dur[:0], 8), (ops, ops[:0], ts, dur, 2, ts[:0], dur[:0], 8),
        (_i64([0]).astype(np.int32) + 4, ops[:0], ts, dur, 8, ts[:0], dur[:0], 8),
        (ops, ops[:0], ts, dur[:3], 8, ts[:0], dur[:0], 8), (ops, ops[:0], ts, dur, 8, ts[:0], dur[:1], 8),
        (ops.astype(np.int64), ops[:0], ts, dur, 8, ts[:0], dur[:0], 8),
    ]:
        for parent_size in (4, 8, 3):
            c_parent = np.full(parent_size, -1, np.int32)
            py_parent = c_parent.copy()
            _same(lambda: c_stacks.nest_thread(*call_args, c_parent),
                  lambda: py_stacks.nest_thread(*call_args, py_parent))
            assert np.array_equal(c_parent, py_parent)
    _same(lambda: c_stacks.nest_thread(ops, ops[:0], ts, dur, 8, ts[:0], dur[:0], 8, bytes(16)),
          lambda: py_stacks.nest_thread(ops, ops[:0], ts, dur, 8, ts[:0], dur[:0], 8, bytes(16)))


def _stack_fields(stack: bytes) -> list[tuple[int, int]]:
    """A returned stack's (end, id) per open op; its padding bytes are not set by the C."""
    records = np.frombuffer(stack, np.dtype([("end", "=i8"), ("row", "=i4"), ("pad", "V4")]))
    return list(zip(records["end"].tolist(), records["row"].tolist()))


def test_nest_sorted_in_windows():
    rng = np.random.default_rng(51)
    for trial in range(400):
        n = int(rng.integers(0, 200))
        dur = rng.integers(-2, 40, n)
        start = rng.integers(0, 100, n)
        order = np.lexsort((-np.maximum(dur, 0), start)) if trial % 5 else rng.permutation(n)
        start, stop = _i64(start[order]), _i64(start[order] + np.maximum(dur[order], 0))
        opens = (rng.random(n) < 0.8).astype(np.uint8 if trial % 2 else bool)
        ids = rng.integers(-1, 50, n).astype(np.int32)
        c_stack = py_stack = b""
        cuts = [0, *sorted(rng.integers(0, n + 1, 3).tolist()), n]
        for a, b in zip(cuts, cuts[1:]):
            c_held, py_held = np.empty(b - a, np.int32), np.empty(b - a, np.int32)
            c_stack = c_stacks.nest_sorted(start[a:b], stop[a:b], opens[a:b], ids[a:b], c_held, c_stack)
            py_stack = py_stacks.nest_sorted(start[a:b], stop[a:b], opens[a:b], ids[a:b], py_held, py_stack)
            assert np.array_equal(c_held, py_held) and _stack_fields(c_stack) == _stack_fields(py_stack)
            assert all(py_stack[k + 12:k + 16] == bytes(4) for k in range(0, len(py_stack), 16))  # padding zeroed
            if trial % 3 == 0:  # either backend's stack carries on in the other
                c_stack, py_stack = py_stack, c_stack


def test_nest_sorted_errors():
    s, o, i = _i64([0, 1]), np.ones(2, np.uint8), np.zeros(2, np.int32)
    for args in [(s, s[:1], o, i, i.copy(), b""), (s, s, o[:1], i, i.copy(), b""), (s, s, o, i[:1], i.copy(), b""),
                 (s, s, o, i, i[:1].copy(), b""), (s, s, o, i, i.copy(), bytes(15)), (s, s, o, i, bytes(8), b""),
                 (s, s, o, i, i.copy(), "x"), (s.astype(np.int32), s, o, i, i.copy(), b"")]:
        _same(lambda: c_stacks.nest_sorted(*args), lambda: py_stacks.nest_sorted(*args))


# -- factorize ---------------------------------------------------------------------------------


def test_factorize_at_random():
    rng = np.random.default_rng(61)
    for trial in range(500):
        n = int(rng.integers(0, 3000))
        spread = [1, 5, 100, 10**9, None][trial % 5]
        values = (rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True) if spread is None
                  else rng.integers(-spread, spread + 1, n))
        values = values.astype([np.int64, np.uint64, np.float64][trial % 3])
        c_codes, c_first = np.full(n, -7, np.intp), np.full(n, -7, np.intp)
        py_codes, py_first = c_codes.copy(), c_first.copy()
        _same(lambda: c_factorize.factorize(values, c_codes, c_first),
              lambda: py_factorize.factorize(values, py_codes, py_first))
        assert np.array_equal(c_codes, py_codes) and np.array_equal(c_first, py_first)  # past the count: untouched


def test_factorize_many_values_and_errors():
    rng = np.random.default_rng(62)
    values = rng.integers(0, 50_000, 1_000_000)  # the table grows many times
    c_out, py_out = ([np.full(len(values), -7, np.int64) for _ in range(2)] for _ in range(2))
    _same(lambda: c_factorize.factorize(values, *c_out), lambda: py_factorize.factorize(values, *py_out))
    assert all(np.array_equal(c, p) for c, p in zip(c_out, py_out))
    a = _i64([1, 2, 1])
    frozen = a.copy()
    frozen.flags.writeable = False
    for args in [(a, a[:2].copy(), a.copy()), (a, a.copy(), bytes(24)), (a[::2], a[:2].copy(), a[:2].copy()),
                 ([1], a[:1].copy(), a[:1].copy()), (a.astype(np.int32), a.copy(), a.copy()),
                 (a.tobytes(), bytearray(24), bytearray(24))]:
        _same(lambda: c_factorize.factorize(*args), lambda: py_factorize.factorize(*args))


# -- search ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_search_sorted_at_random(dtype):
    rng = np.random.default_rng(71)
    info = np.iinfo(dtype)
    for trial in range(800):
        n, m = int(rng.integers(0, 200)), int(rng.integers(0, 300))
        span = (-20, 20) if trial % 2 else (info.min, info.max)
        haystack = np.sort(rng.integers(*span, n, dtype=dtype, endpoint=True))
        needles = rng.integers(*span, m, dtype=dtype, endpoint=True)
        if trial % 3 == 1:
            needles.sort()
        for right in (False, True, 0, "yes"):
            c_out, py_out = np.full(m, -1, np.intp), np.full(m, -1, np.intp)
            _same(lambda: c_search.search_sorted(haystack, needles, haystack.itemsize, right, c_out),
                  lambda: py_search.search_sorted(haystack, needles, haystack.itemsize, right, py_out))
            assert np.array_equal(c_out, py_out)


def test_search_sorted_errors():
    h = _i64([1, 2, 3])
    for args in [(h, h, 4, False, np.empty(6, np.intp)), (h, h, 8, False, np.empty(2, np.intp)), (h, h, 2, False,
                                                                                                np.empty(3, np.intp)),
                 (h, h, 0, False, np.empty(3, np.intp)), (h, h, 8, False, bytes(24)), (h[::2], h[:2], 8, True,
                                                                                       np.empty(2, np.intp)),
                 (h, h.astype(np.int32), 8, False, np.empty(3, np.intp)), (h, h, 8.0, False, np.empty(3, np.intp)),
                 (h, h, 8, False, np.empty(6, np.intp)[::2])]:
        _same(lambda: c_search.search_sorted(*args), lambda: py_search.search_sorted(*args))


def test_non_overlapping_at_random():
    rng = np.random.default_rng(81)
    for trial in range(2000):
        m = int(rng.integers(0, 60))
        starts = rng.integers(-30, 30, m)
        if trial % 4:
            starts.sort()  # the contract; unsorted ones must still match the C's greedy scan
        n = [0, 1, 3, 7, -2, int(rng.integers(0, 40))][trial % 6]
        c_out, py_out = np.full(m, 99, np.int64), np.full(m, 99, np.int64)
        _same(lambda: c_search.non_overlapping(_i64(starts), n, c_out),
              lambda: py_search.non_overlapping(_i64(starts), n, py_out))
        assert np.array_equal(c_out, py_out)


def test_non_overlapping_extremes_and_errors():
    starts = _i64([I64.min, -5, 0, 0, 10, I64.max - 3, I64.max])
    for n in [I64.max, I64.min, 5, -I64.max, 2**63, 2.0, np.int64(4)]:
        for s in (starts, starts[::-1].copy()):
            c_out, py_out = np.zeros(len(s), np.int64), np.zeros(len(s), np.int64)
            _same(lambda: c_search.non_overlapping(s, n, c_out), lambda: py_search.non_overlapping(s, n, py_out))
            assert np.array_equal(c_out, py_out)
    for args in [(starts, 1, np.zeros(3, np.int64)), (starts, 1, bytes(56)), (starts[::2], 1, np.zeros(4, np.int64))]:
        _same(lambda: c_search.non_overlapping(*args), lambda: py_search.non_overlapping(*args))


# -- replay ------------------------------------------------------------------------------------

_REPLAY_COLUMNS = ("kind", "ts", "dur", "track", "key", "fid", "v2_mode", "name", "cat", "flags", "ordinal")


def _events(rng: np.random.Generator, n: int, n_tracks: int, n_keys: int, ordinal0: int) -> dict[str, np.ndarray]:
    """Random slices, B/E pairs and flows on a few tracks: ties, zero and huge durations, v2 ids
    that collide with the v1 numbering, and ids past int64."""
    cols = {
        "kind": rng.choice([0, 0, 0, 1, 2, 3, 4, 5, 6], n),
        "ts": np.sort(rng.integers(0, 60, n)) + ordinal0,
        "dur": rng.choice([0, 1, 5, 20, 100, I64.max], n, p=[.2, .2, .3, .2, .09, .01]),
        "track": rng.integers(0, n_tracks, n),
        "key": rng.integers(0, max(n_keys, 1), n),
        "fid": rng.choice([0, 1, 2, 3, 1000, -1, I64.min], n),
        "v2_mode": rng.choice([-1, -1, -1, 0, 1, 2], n),
        "name": rng.integers(-1, 4, n),
        "cat": rng.integers(-1, 3, n),
        "flags": rng.integers(0, 8, n) << rng.integers(0, 4, n),
        "ordinal": np.arange(ordinal0, ordinal0 + n),
    }
    return {name: _i64(column) for name, column in cols.items()}


def _walk_both(walkers: tuple, cols: dict[str, np.ndarray], order: np.ndarray) -> object:
    args = [cols[name] for name in _REPLAY_COLUMNS]
    return _same(lambda: c_replay.walk(walkers[0], order, *args), lambda: py_replay.walk(walkers[1], order, *args))


@pytest.mark.parametrize("slices_only, x_only", [(False, False), (True, False), (False, True)])
def test_replay_walks_windows_at_random(slices_only, x_only):
    rng = np.random.default_rng(91 + slices_only + 2 * x_only)
    for trial in range(150):
        n_tracks, n_keys = int(rng.integers(1, 4)), int(rng.integers(0, 6))
        walkers = (c_replay.walker(n_tracks, n_keys, slices_only), py_replay.walker(n_tracks, n_keys, slices_only))
        for window in range(4):
            n = int(rng.integers(0, 80))
            cols = _events(rng, n, n_tracks, n_keys, 100 * window)
            if not n_keys:
                cols["kind"] = np.minimum(cols["kind"], 2)
            if x_only:  # X slices alone (some stacks stay X only, the fallback's shortcut), deep and tied
                cols["kind"][:] = 0
                cols["ts"] = _i64(np.sort(rng.integers(0, 12, n)) + 100 * window)
                cols["dur"] = _i64(rng.choice([0, 0, 1, 2, 5, 30], n))
            key = -cols["dur"]
            key[cols["kind"] == 2] = I64.min
            order = _i64(np.lexsort((key, cols["ts"])))
            _walk_both(walkers, cols, order)


def test_replay_deep_stacks_and_strided_columns():
    n = 1500  # nested past MAX_DEPTH, then unwound by ends out of order
    kind = np.r_[np.ones(700), np.full(800, 2)].astype(np.int64)
    block = np.zeros((n, len(_REPLAY_COLUMNS)), np.int64)  # columns as views of a row-major block
    cols = {name: block[:, k] for k, name in enumerate(_REPLAY_COLUMNS)}
    cols["kind"][:] = kind
    cols["ts"][:] = np.arange(n)
    cols["name"][:] = np.arange(n) % 7
    cols["v2_mode"][:] = np.where(np.arange(n) % 3 == 0, np.arange(n) % 4 - 1, -1)
    cols["fid"][:] = np.arange(n) % 5
    cols["ordinal"][:] = np.arange(n)
    cols["flags"][:] = 1 << (np.arange(n) % 3)
    walkers = (c_replay.walker(1, 0, False), py_replay.walker(1, 0, False))
    found = _walk_both(walkers, cols, np.arange(n, dtype=np.int64))
    assert c_replay.MAX_DEPTH_EXCEEDED in np.frombuffer(found, np.int64).reshape(-1, 5)[:, 0]


def test_replay_errors():
    cols = {name: np.zeros(3, np.int64) for name in _REPLAY_COLUMNS}
    cols["kind"] = _i64([0, 3, 0])
    cols["track"] = _i64([0, 0, 1])
    cols["key"] = _i64([0, 5, 0])
    for walker_args in [(2, 1, False), (2, 1, True), (1, 6, False), (-1, 0, False), (1, 2**31, False), (1.0, 0, True)]:
        try:
            walkers = (c_replay.walker(*walker_args), py_replay.walker(*walker_args))
        except (ValueError, TypeError) as e:
            with pytest.raises(type(e)):
                py_replay.walker(*walker_args)
            continue
        for order in [_i64([0, 1, 2]), _i64([3]), _i64([-1]), _i64([0, 2]), _i64([1]), np.zeros(3, np.int32),
                      _i64([0, 1, 2, 0])[::2]]:
            _walk_both(walkers, cols, order)
        bad = dict(cols, dur=np.zeros(3, np.int32))
        _walk_both(walkers, bad, _i64([0]))
        bad = dict(cols, dur=np.zeros(4, np.int64))
        _walk_both(walkers, bad, _i64([0]))
    _same(lambda: c_replay.walk(object(), _i64([]), *cols.values()),
          lambda: py_replay.walk(object(), _i64([]), *cols.values()))


# -- the seam ----------------------------------------------------------------------------------


def test_use_switches_a_running_process():
    saved = dict(_native.BACKENDS)
    try:
        _native.use("python", ["splice", "search"])
        assert _native.splice is py_splice and _native.search is py_search and _native.BACKEND in ("mixed", "python")
        _native.use("c")
        assert _native.splice is c_splice and _native.BACKEND == "c" and set(_native.BACKENDS.values()) == {"c"}
        with pytest.raises(ValueError):
            _native.use("fortran")
        with pytest.raises(ValueError):
            _native.use("c", ["nonesuch"])
        with _native.using("python", ["stacks"]):
            assert _native.stacks is py_stacks and _native.BACKENDS["stacks"] == "python"
        assert _native.stacks is c_stacks
    finally:
        for kernel, backend in saved.items():
            _native.use(backend, [kernel])


def test_no_native_environment_forces_the_fallbacks():
    code = "import traceforge._native as n; print(n.BACKEND, len(n.FORCED), n.splice.__name__)"
    env = {"TRACEFORGE_NO_NATIVE": "1", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, cwd=ROOT, env=env, timeout=60)
    if _native.has_fallback("scanner"):
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [b"python", b"7", b"traceforge._native.fallback.splice"]  # no warning: forced
    else:
        assert r.returncode != 0 and b"fallback/scanner.py is missing" in r.stderr
    code = "import traceforge._native as n; print(n.BACKEND, sorted(k for k, b in n.BACKENDS.items() if b == 'python'))"
    env["TRACEFORGE_NO_NATIVE"] = "splice, stacks"
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, cwd=ROOT, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == b"mixed ['splice', 'stacks']"


def test_a_missing_c_module_warns_once_and_falls_back(tmp_path):
    code = ("import sys, warnings\n"
            "sys.modules['traceforge._native._splice'] = None\n"  # as if it were not built
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import traceforge._native as n\n"
            "print(n.BACKENDS['splice'], n.BACKEND, len(w), '_splice' in str(w[0].message))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRACEFORGE_NO_NATIVE"}  # the C modules that are built
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"python", b"mixed", b"1", b"True"]


# -- whole commands on both backends -----------------------------------------------------------


def _decompressed(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


@pytest.fixture(scope="module")
def c_outputs(tmp_path_factory) -> dict[str, bytes]:
    """Each command's output with the C kernels."""
    out = tmp_path_factory.mktemp("c")
    with _native.using("c"):
        return _commands(out)


def _commands(out: Path) -> dict[str, bytes]:
    """annotate --all, check --json and repair of the sample, in this process."""
    from traceforge.cli.main import main

    results = {}
    annotated = out / "annotated.json.gz"
    assert main(["annotate", str(SAMPLE), "--all", "-o", str(annotated)]) == 0
    results["annotate"] = _decompressed(annotated)
    repaired = out / "repaired.json.gz"
    main(["repair", str(annotated), "-o", str(repaired)])
    results["repair"] = _decompressed(repaired)
    return results


def test_commands_are_byte_identical_on_both_backends(backend, c_outputs, tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _commands(tmp_path)
    for command, text in got.items():
        assert text == c_outputs[command], f"{command} differs on the {backend} backend"


@pytest.mark.parametrize("name", ["sample", "cupti", "event_sync"])
def test_check_reports_alike_on_both_backends(backend, name):
    from tests.conftest import TRACES
    from traceforge.perfetto import check_trace

    path = str(SAMPLE if name == "sample" else TRACES[name])
    with _native.using("c"):
        want = check_trace(path).to_dict()
    got = check_trace(path).to_dict()
    want.pop("seconds", None), got.pop("seconds", None)
    assert got == want


def test_a_needle_that_is_not_bytes_is_a_type_error_every_time():
    """The C kernels release their buffer views once, however they fail (a second release
    corrupted the heap: the process died on a later call)."""
    from traceforge._native import _splice

    starts, stops = np.zeros(1, np.int64), np.ones(1, np.int64)
    for _ in range(20):
        with pytest.raises(TypeError, match="bytes-like"):
            _splice.spans_containing(b"abc", starts, stops, ["x"])
    assert _splice.spans_containing(b"abc", starts, stops, [b"a"]) is not None


@pytest.mark.parametrize("name", ["nccl", "amd"])
def test_no_native_annotate_all_is_byte_identical_on_real_traces(name, tmp_path):
    """``TRACEFORGE_NO_NATIVE=1``, as a user sets it: every kernel's fallback, the scanner's too."""
    from tests.conftest import TRACES

    outputs = []
    for forced in ("", "1"):
        out = tmp_path / f"out{forced}.json"
        env = {**os.environ, "TRACEFORGE_NO_NATIVE": forced}
        done = subprocess.run([sys.executable, "-m", "traceforge", "annotate", str(TRACES[name]), "--all", "-o",
                               str(out)], env=env, capture_output=True, timeout=600)
        assert done.returncode == 0, done.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and len(outputs[0]) > 10_000
