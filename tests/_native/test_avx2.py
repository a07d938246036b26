"""The AVX2 key search of the C _splice (spans_containing, insert_members) against its SSE2 /
scalar search: the same answers on random and edge-case inputs, with the switch
(set_avx2, TRACEFORGE_NO_AVX2) that picks between them."""

from __future__ import annotations

import contextlib
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from tests._native.test_splice import MEMBERS
from tests._native.test_splice import _events as splice_events

_splice = pytest.importorskip("traceforge._native._splice", reason="the C _splice is not built")
if not hasattr(_splice, "set_avx2"):
    pytest.skip("this _splice has no AVX2 switch (not the C module)", allow_module_level=True)

HAVE_AVX2 = _splice.avx2_supported()


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@contextlib.contextmanager
def avx2(enabled: bool):
    before = _splice.set_avx2(enabled)
    try:
        yield
    finally:
        _splice.set_avx2(before)


@pytest.fixture(params=[False, True], ids=["avx2-off", "avx2-on"])
def mode(request):
    if request.param and not HAVE_AVX2:
        pytest.skip("the CPU (or this build) has no AVX2")
    with avx2(request.param):
        yield request.param


def _both(fn, *args):
    """fn(*args) with AVX2 off, and on where there is AVX2 (else the off result again)."""
    with avx2(False):
        off = fn(*args)
    if not HAVE_AVX2:
        return off, off
    with avx2(True):
        on = fn(*args)
    return off, on


# ---- the switch ------------------------------------------------------------------------------


def test_set_avx2_returns_the_previous_state_and_turns_on_only_where_it_can():
    with avx2(False):
        assert _splice.set_avx2(False) is False
        assert _splice.set_avx2(True) is False
        assert _splice.set_avx2(True) is HAVE_AVX2  # on only with AVX2
        assert _splice.set_avx2(0) is HAVE_AVX2  # any truth value
        assert _splice.set_avx2(False) is False


def test_set_avx2_takes_truth_values_and_refuses_what_has_none():
    class NoTruth:
        def __bool__(self):
            raise RuntimeError("no truth value")

    with avx2(False):
        with pytest.raises(RuntimeError):
            _splice.set_avx2(NoTruth())
        assert _splice.set_avx2("yes") is False and _splice.set_avx2([]) is HAVE_AVX2


@pytest.mark.parametrize("value, on", [("1", False), ("yes", False), ("0", True), ("", True), (None, True)])
def test_traceforge_no_avx2_turns_it_off_when_the_module_loads(value, on):
    env = {k: v for k, v in os.environ.items() if k != "TRACEFORGE_NO_AVX2"}
    if value is not None:
        env["TRACEFORGE_NO_AVX2"] = value
    # the module file loaded alone: a fresh interpreter, no package import
    code = ("import importlib.machinery as m, importlib.util as u, sys; "
            "s = u.spec_from_file_location('_splice', sys.argv[1], "
            "loader=m.ExtensionFileLoader('_splice', sys.argv[1])); "
            "mod = u.module_from_spec(s); s.loader.exec_module(mod); print(mod.set_avx2(False))")
    out = subprocess.run([sys.executable, "-c", code, _splice.__file__], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(on and HAVE_AVX2)


# ---- spans_containing -------------------------------------------------------------------------


def _find(data: bytes, starts, stops, needles) -> list[int]:
    return [int(any(data.find(k, a, b) >= 0 for k in needles)) for a, b in zip(starts, stops)]


def _spans(data, starts, stops, needles) -> list[int]:
    return list(_splice.spans_containing(data, _i64(starts), _i64(stops), needles))


EDGE_NEEDLES = [
    [b'"k'],  # one second byte, the shortest key
    [b'"key"', b'"kex"'],  # one second byte, two needles
    [b'"a"', b'"b"', b'"c"', b'"d"'],  # four second bytes: the most the AVX2 search takes
    [b'"a"', b'"b"', b'"c"', b'"d"', b'"e"'],  # five: past it (SSE2 / scalar)
    [b'"\xff\x80', b'"\x7f'],  # bytes >= 0x80 (signed compares)
    [b'"k', b'"k'],  # the same needle twice
    [b'"'],  # too short to anchor: memmem
    [b"key", b'"key'],  # first bytes differ: memmem
    [],
]


@pytest.mark.parametrize("needles", EDGE_NEEDLES, ids=range(len(EDGE_NEEDLES)))
@pytest.mark.parametrize("size", [0, 1, 2, 31, 32, 33, 34, 63, 64, 65, 66, 97, 200])
def test_spans_containing_edges(mode, needles, size):
    """A needle at every place of spans of sizes about the 16- and 32-byte steps, and spans
    cut just before its last byte; the filler is all first bytes (every place a candidate)."""
    for filler in (b'"', b"x", b'"\x80'):
        base = (filler * size)[:size]
        for needle in needles[:2] or [b'"k']:
            for at in range(0, max(1, size - len(needle) + 1)):
                data = base[:at] + needle + base[at + len(needle):] if size >= len(needle) else base
                data = data[:size]
                starts = [0, 0, at, at, min(at + 1, size), size]
                stops = [size, max(0, min(size, at + len(needle) - 1)), size, min(size, at + len(needle)), size, size]
                stops = [max(a, b) for a, b in zip(starts, stops)]
                assert _spans(data, starts, stops, needles) == _find(data, starts, stops, needles), (data, needles)


@pytest.mark.parametrize("keys, alphabet", [(True, b'ab"c'), (True, b'ab"cdefg'), (True, bytes(range(256))),
                                            (True, b'"'), (False, b'ab"c')])
def test_spans_containing_at_random(mode, keys, alphabet):
    rng = random.Random(11)
    for _ in range(1500):
        data = bytes(rng.choice(alphabet) for _ in range(rng.choice([rng.randint(0, 40), rng.randint(0, 300)])))
        needles = [(b'"' if keys else b"") + bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
                   for _ in range(rng.randint(1, 6))]
        if data and rng.random() < 0.3:  # one at the very end
            k = rng.choice(needles)
            data = (data + k)[-max(len(data), len(k)):]
        starts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 5)))
        stops = [rng.randint(a, len(data)) for a in starts]
        assert _spans(data, starts, stops, needles) == _find(data, starts, stops, needles)


def test_spans_containing_avx2_on_and_off_agree_on_long_spans():
    rng = random.Random(5)
    for _ in range(200):
        alphabet = rng.choice([b'ab"cd', b'"xyz01', bytes(range(256))])
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(500, 3000)))
        needles = [b'"' + bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
                   for _ in range(rng.randint(1, 5))]
        starts = sorted(rng.randint(0, len(data)) for _ in range(50))
        stops = [rng.randint(a, min(len(data), a + rng.choice([16, 32, 33, 64, 500]))) for a in starts]
        off, on = _both(_spans, data, starts, stops, needles)
        assert off == on == _find(data, starts, stops, needles)


# ---- insert_members ---------------------------------------------------------------------------


def _events(rng: random.Random, count: int):
    """test_splice's events, some with long args too (each long member drawn as before)."""
    return splice_events(rng, count, lambda rng: rng.choice([
        *MEMBERS, b'"launch_delay_us": 2', b'"padding": "' + b'"x' * rng.randint(0, 40) + b'"',
        b'"' + b"k" * rng.randint(0, 70) + b'": 1']))


def _insert(raw, starts, at, empty, bodies, keys):
    blob = b"".join(bodies)
    offsets = np.cumsum([0] + [len(b) for b in bodies])[:-1] if bodies else []
    return _splice.insert_members(raw, _i64(starts), _i64(at), np.array(empty, bool), blob, _i64(offsets),
                                  _i64([len(b) for b in bodies]), keys)


@pytest.mark.parametrize("keys", [[b'"launch_delay_us"', b'"category"'], [b'"x"'], [b'"c"', b'"b"', b'"a"', b'"p"'],
                                  [b'"c"', b'"b"', b'"a"', b'"p"', b'"k"'], [b'"kk'], []])
def test_insert_members_at_random(mode, keys):
    rng = random.Random(17)
    for _ in range(400):
        raw, starts, at, empty = _events(rng, rng.randint(0, 12))
        bodies = [rng.choice([b"", b'"launch_delay_us": 1.5', b'"x": 2', *(k + b": 1" for k in keys)]) for _ in starts]
        got = _insert(raw, starts, at, empty, bodies, keys)
        edited = [i for i in range(len(starts)) if bodies[i]]
        # a key met only counts where the event's own body adds it (the key, then ":")
        if any(k in raw[starts[i]:at[i]] and re.search(re.escape(k) + rb"\s*:", bodies[i]) for i in edited
               for k in keys):
            assert got is None
            continue
        want, pos = [], 0
        for i in edited:
            want += [raw[pos:at[i]], b"" if empty[i] else b", ", bodies[i]]
            pos = at[i]
        assert got == b"".join(want) + raw[pos:]


def test_insert_members_avx2_on_and_off_agree():
    rng = random.Random(23)
    for _ in range(300):
        raw, starts, at, empty = _events(rng, rng.randint(1, 20))
        bodies = [rng.choice([b"", b'"x": 2']) for _ in starts]
        keys = rng.choice([[b'"category"'], [b'"kkkk'], [b'"a"', b'"b"'], [b'"padding"', b'"launch_delay_us"']])
        off, on = _both(_insert, raw, starts, at, empty, bodies, keys)
        assert off == on
