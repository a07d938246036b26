"""The pure-Python event scanner (``traceforge/_native/fallback/scanner.py``) against the C one.

Whatever the input, the fallback's ``scan`` must give what ``_scanner.scan`` gives: the same
status, count, stop, error place and message, the same int64 rows (byte for byte), and the
same strings and tracks interned, in the same order. Checked on every real trace, on runs fed
in chunks as the reader feeds them, on hand-made edge cases cut at every byte, and on random
documents. The fallback has three layers (orjson, a regex per member, a byte-at-a-time port
of the C parser); the ``layers`` fixture switches the first two off in turn, so each is held
to the C parser on its own. At the end, the C scanner's own tests (``tests/columns/test_scan.py``) run
again here, on the fallback through the seam.
"""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest

from tests.columns import test_scan as c_scanner_tests
from tests.conftest import MISSING, ROOT, TRACES_DIR, raw_json
from traceforge import _native
from traceforge._native.fallback import scanner as F

C = pytest.importorskip("traceforge._native._scanner")

SAMPLE = ROOT / "samples" / "train_step.json.gz"


@pytest.fixture(autouse=True)
def python_scanner():
    """The seam's scanner is the fallback in every test here (the C scanner's tests imported at
    the end read it through ``rows.RowScanner``); the comparisons call both modules directly."""
    with _native.using("python", ["scanner"]):
        yield


@pytest.fixture(params=["all", "members", "exact"])
def layers(request, monkeypatch):
    """The fallback as it is; without its orjson layer; with its exact parser alone."""
    if request.param != "all":
        monkeypatch.setattr(F, "_loaded_event", lambda *args: None)
    if request.param == "exact":
        monkeypatch.setattr(F, "_fast_event", lambda *args: None)
    return request.param


def _all(module, interner) -> list[bytes]:
    """Every string an interner holds, by id."""
    return module.strings(interner, 0, module.count(interner))


def _scan(module, data, start: int = 0, limit: int | None = None):
    limit = len(data) - start if limit is None else limit
    interners = module.Interner(), module.Interner()
    result = module.scan(data, start, limit, *interners)
    return result, _all(module, interners[0]), _all(module, interners[1])


def _explain(data, want, got) -> str:
    (w, ws, wt), (g, gs, gt) = want, got
    lines = [f"C:        {w[:5]}", f"fallback: {g[:5]}"]
    a = np.frombuffer(w[5], np.int64).reshape(-1, C.NFIELDS)
    b = np.frombuffer(g[5], np.int64).reshape(-1, F.NFIELDS)
    if a.shape == b.shape:
        for i, f in np.argwhere(a != b)[:3].tolist():
            lines.append(f"row {i} field {f}: C {a[i, f]}, fallback {b[i, f]}: {bytes(data[a[i, 0]:a[i, 1]])[:200]!r}")
    if ws != gs:
        lines.append(f"strings: C {ws[-5:]}, fallback {gs[-5:]}")
    if wt != gt:
        lines.append(f"tracks: C {wt[-5:]}, fallback {gt[-5:]}")
    return "\n".join(lines)


def assert_same(data, start: int = 0, limit: int | None = None):
    """Both scans of ``data[start:]``; asserts they agree in everything. Returns the C's."""
    want = _scan(C, data, start, limit)
    got = _scan(F, data, start, limit)
    assert type(got[0][5]) is bytearray
    assert got == want, _explain(data[start:], want, got)
    return want


def _events_start(data: bytes) -> int:
    """Where the first event is: after the array's '[' (of traceEvents in an object) and blanks."""
    head = data.lstrip()
    at = data.index(b"[") if head[:1] == b"[" else data.index(b"[", data.index(b'"traceEvents"'))
    return len(data) - len(data[at + 1:].lstrip(b" \t\r\n"))


# -- (a) real traces ------------------------------------------------------------------------------


def _trace_params() -> list:
    found = sorted(TRACES_DIR.rglob("*.json.gz")) if TRACES_DIR.is_dir() else []
    params = [pytest.param(SAMPLE, id="samples/train_step")]
    params += [pytest.param(p, id=str(p.relative_to(TRACES_DIR)), marks=pytest.mark.integration) for p in found]
    if not found:
        params.append(pytest.param(None, id="real-traces", marks=[pytest.mark.integration,
                                                                   pytest.mark.skip(reason=MISSING)]))
    return params


@pytest.mark.parametrize("path", _trace_params())
def test_every_trace_scans_the_same(path):
    data = raw_json(path)
    start = _events_start(data)
    result, strings, tracks = assert_same(data, start)
    assert result[0] == C.END_OF_ARRAY and result[1] > 0
    rows = np.frombuffer(result[5], np.int64).reshape(-1, C.NFIELDS)
    at = np.arange(0, len(rows), 7, dtype=np.int64)[::-1].copy()
    for fields in (bytes(range(C.NFIELDS)), bytes([C.TS, C.NAME, C.FLAGS, C.TS])):
        assert F.columns(rows, at, fields) == C.columns(rows, at, fields)
        assert F.columns(rows, None, fields) == C.columns(rows, None, fields)


def test_the_sample_scans_the_same_in_every_layer(layers):
    data = raw_json(SAMPLE)
    assert_same(data, _events_start(data))


# -- (b) chunks, as the reader feeds them -----------------------------------------------------------


def _feed(module, text: bytes, chunk: int, batch: int) -> tuple[list, list, list]:
    """Scan ``text`` (a run of events) as ``io.reader`` does: chunks appended behind the bytes
    not yet taken (in a new buffer, with other bytes in front: the scan starts at ``start``),
    ``limit`` all that is in hand but at least ``batch``, more data where an event is cut
    short, ``stop`` consumed. Every call's result, and the interned strings and tracks."""
    interners = module.Interner(), module.Interner()
    pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)][::-1]
    data, start, calls = bytearray(), 0, []

    def fill() -> bool:
        nonlocal data, start
        if not pieces:
            return False
        data = bytearray(b"#" * 7) + data[start:] + pieces.pop()
        start = 7
        return True

    fill()
    while True:
        while len(data) - start < batch and fill():
            pass
        result = module.scan(data, start, max(batch, len(data) - start), *interners)
        calls.append(result)
        status, count, stop = result[:3]
        if status == C.INCOMPLETE and not count:
            if fill():
                continue
            break
        if not count or status == C.END_OF_ARRAY:
            break
        start += stop
    return calls, _all(module, interners[0]), _all(module, interners[1])


@pytest.mark.parametrize("chunk", [1000, 4099, 65536])
@pytest.mark.parametrize("batch", [64, 10_000, 1 << 20])
def test_runs_fed_in_chunks_scan_the_same(chunk, batch):
    data = raw_json(SAMPLE)
    text = data[_events_start(data):]
    want = _feed(C, text, chunk, batch)
    assert want[0][-1][0] == C.END_OF_ARRAY and sum(call[1] for call in want[0]) == 1135
    assert _feed(F, text, chunk, batch) == want


@pytest.mark.integration
@pytest.mark.skipif(not (TRACES_DIR / "hta/nccl_parser_config/nccl_data.json.gz").is_file(), reason=MISSING)
def test_a_real_trace_fed_in_chunks_scans_the_same():
    data = raw_json(TRACES_DIR / "hta/nccl_parser_config/nccl_data.json.gz")
    text = data[_events_start(data):]
    assert _feed(F, text, 300_000, 1 << 20) == _feed(C, text, 300_000, 1 << 20)


@pytest.mark.parametrize("batch_bytes", [64, 1000, 1 << 20])
def test_the_reader_gives_the_same_batches_on_both_backends(tmp_path, monkeypatch, batch_bytes):
    """TraceReader over a gzipped trace cut into small decompressed chunks (events split at
    their edges, held in the headroom or joined): the same batches, bytes, rows and ids."""
    from traceforge.io.read import codec as codecs
    from traceforge.io.read.reader import TraceReader

    monkeypatch.setattr(codecs, "BLOCK", 50_000)
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(raw_json(SAMPLE), 1))

    def read(backend: str):
        with _native.using(backend, ["scanner"]):
            reader = TraceReader(str(path), batch_bytes=batch_bytes)
            batches = [(b.first, b.offset, b.raw, None if b.raw_rows is None else b.raw_rows.tobytes())
                       for b in reader.batches()]
        return batches, reader.head, reader.tail, reader.event_count, list(reader.scanner.strings), list(reader.scanner.tracks)

    want = read("c")
    assert want[3] == 1135 and (len(want[0]) > 1 or batch_bytes > len(raw_json(SAMPLE)))
    assert read("python") == want


# -- (c) edge cases ---------------------------------------------------------------------------------

KERNEL = (b'{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1712195495519689.047, '
          b'"dur": 2.5, "args": {"device": 0, "stream": 7, "correlation": 12, "External id": 5, '
          b'"grid": [4, 2, 1], "block": [128, 1, 1], "shared memory": 1024, "kernel": "k"}}')
CASES = {
    "kineto kernel": KERNEL,
    "escaped strings": rb'{"ph": "X", "name": "gemm \"big\" \u00e9 \\ \/ \b\f\n\r\t", "cat": "a\u0041"}',
    "unicode": '{"ph": "X", "name": "żółw 🐢 日本", "cat": "café", "pid": "ñ", "tid": "\u2028"}'.encode(),
    "surrogates": rb'{"name": "\ud83d\ude00", "cat": "\ud800", "ph": "\uDC00x"}',
    "invalid utf-8 passes": b'{"ph": "X", "name": "\xff\xfe\xc3", "cat": "\xed\xa0\x80", "pid": "\x80"}',
    "fractional ts": b'{"ph": "X", "ts": 1.5, "dur": 0.001}, {"ph": "X", "ts": 2.0005, "dur": 12.3456789}',
    "exponent ts": b'{"ph": "X", "ts": 1e3, "dur": 1.5E-2}, {"ph": "X", "ts": 1.5e+2, "dur": 0E0}',
    "ts as text and null": b'{"ph": "X", "ts": "1712195495519690.25", "dur": null}, {"ts": true, "dur": [1]}',
    "huge ints": (b'{"ph": "i", "ts": 9223372036854775807, "id": 9223372036854775808, "dur": -9223372036854775809,'
                  b' "pid": 18446744073709551616, "tid": 99999999999999999999999,'
                  b' "args": {"correlation": 18446744073709551615, "bytes": -9223372036854775808}}'),
    "ns edges": (b'{"ts": 9223372036854774, "dur": 9223372036854775}, {"ts": -9223372036854774.999, "dur": 0.000},'
                 b' {"ts": 9223372036854774.9999, "dur": -0}'),
    "negative dur": b'{"ph": "X", "ts": 5, "dur": -3}, {"ph": "X", "ts": -0.5, "dur": -0.25}',
    "minus zero": b'{"pid": -0, "tid": 0, "id": -0, "ts": -0, "dur": -0.0}, {"pid": 0, "tid": -0}',
    "missing fields": b'{}, {"ph": "X"}, {"name": "n"}, {"pid": 1}, {"tid": 2}, {"args": {}}, { }',
    "nested args": (b'{"ph": "X", "args": {"Input Dims": [[1, 2], [], [[3]]], "x": {"y": {"z": [1, {"w": 2}]}},'
                    b' "Concrete Inputs": ["", "1"], "correlation": 4}}'),
    "args not last": b'{"ph": "X", "args": {"device": 1}, "ts": 5, "name": "late", "pid": 2}',
    "args not an object": b'{"ph": "X", "args": [1, 2]}, {"args": "x"}, {"args": null}, {"args": 5}',
    "duplicate keys": (b'{"ph": "X", "ph": "i", "ts": 1, "ts": 2, "dur": 1, "dur": null, "name": "a", "name": 5,'
                       b' "args": {"correlation": 5, "correlation": 6}, "args": {"device": 1}, "pid": 1, "pid": 2}'),
    "duplicate args keys": b'{"args": {"grid": [1, 2, 3], "block": [1, 1, 1], "grid": [1, 2], "kernel": "a", "kernel": 1}}',
    "escaped keys": b'{"p\\u0068": "X", "\\u0061rgs": {}, "ts": 1, "args": {"c\\u006frrelation": 5, "device": 2}}',
    "whitespace variants": (b'{ "ph" : "X" ,\n\t"ts"\r\n:\t5 , "args" :{ "device" : 0 , "stream":7 } ,"pid":1}'
                            b' ,\r\n\t {"ph":"X","ts":6,"args":{"device":0}}'),
    "no whitespace": b'{"ph":"X","cat":"c","name":"n","pid":1,"tid":2,"ts":3,"dur":4,"args":{"correlation":5}}',
    "args ints not ints": (b'{"args": {"device": "0", "stream": 7.0, "correlation": true, "bytes": [1],'
                           b' "External id": "5", "shared memory": 1e3}}'),
    "dims": (b'{"args": {"grid": [4, 2, 1], "block": [128, 1, 1]}}, {"args": {"grid": [4, 2], "block": [1, 1, 1]}},'
             b' {"args": {"grid": [1, 2, 3.0], "block": [1, 1, 1]}}, {"args": {"grid": {"x": 1}, "block": "b"}},'
             b' {"args": {"grid": [-1, 0, 9223372036854775807], "block": [1, [2], 3]}}, {"args": {"grid": []}}'),
    "kernel values": b'{"args": {"kernel": 5}}, {"args": {"kernel": "k\\"x"}}, {"args": {"kernel": null}}',
    "scope and binding point": (b'{"ph": "i", "s": "t"}, {"ph": "i", "s": "g"}, {"ph": "f", "bp": "e"},'
                                b' {"ph": "f", "bp": "\\u0065"}, {"ph": "f", "bp": ["e"]}, {"s": 1, "bp": "e", "bp": 1}'),
    "ids": b'{"ph": "s", "id": 5}, {"ph": "f", "id": "0x5"}, {"ph": "f", "id": 1.5}, {"id": null}, {"id": [1]}',
    "track values": (b'{"pid": "p", "tid": "t"}, {"pid": 1.5, "tid": true}, {"pid": null, "tid": [1, 2]},'
                     b' {"pid": {"a": 1}}, {"tid": 3}, {"pid": 1e2, "tid": -1}'),
    "strings that look like structure": (b'{"name": "x}, {y", "cat": ": colon", "ph": "]", "args": {"a": "}, "},'
                                         b' "pid": "\\"ts\\": 1"}, {"name": "\\"}, "}'),
    "long strings": b'{"name": "' + b"x" * 2000 + b'", "cat": "' + b"y\\n" * 300 + b'", "ph": "X"}',
    "extra keys": b'{"ph": "X", "bind_id": 3, "flow_in": true, "": 1, "caf\xc3\xa9": 2}',
    "trailing comma": b'{"ph": "X"}, ]',
    "garbage after the array": b'{"ph": "X"}] garbage',
    "garbage between events": b'{"ph": "X"} x {"ph": "i"}]',
    "event not an object": b'{"ph": "X"}, [1], {"ph": "i"}]',
    "string event": b'"x", {"ph": "i"}]',
    "empty array": b"]",
    "control character": b'{"ph": "X", "name": "a\x01b"}]',
    "invalid escapes": b'{"ph": "X", "name": "a\\qb"}]',
    "invalid unicode escape": b'{"ph": "X", "name": "a\\u12g4"}]',
    "invalid numbers": b'{"ts": 01}]',
    "number with a dot": b'{"ts": 1.}]',
    "number with a bare exponent": b'{"ts": 1e}]',
    "number with a plus": b'{"ts": +1}]',
    "leading dot": b'{"ts": .5}]',
    "minus alone": b'{"ts": -}]',
    "nan and infinity": b'{"ts": NaN}, {"ts": Infinity}]',
    "bad literals": b'{"a": tru}, {"a": nul}, {"a": truex}]',
    "missing colon": b'{"ph" "X"}]',
    "missing value": b'{"ph": }]',
    "unquoted key": b'{ph: "X"}]',
    "trailing comma in object": b'{"ph": "X",}]',
    "trailing comma in array": b'{"a": [1,]}]',
    "unclosed array": b'{"a": [1 2]}]',
    "single quotes": b"{'ph': 'X'}]",
}


def _prefixes(data: bytes):
    yield from (data[:cut] for cut in range(len(data) + 1))


@pytest.mark.parametrize("name", list(CASES))
def test_edge_cases_scan_the_same(name, layers):
    """Each case as it is, closed with ']' (and with ',' and more), with limits that stop it
    after the first event, and cut at every byte (what the reader hands over mid-file)."""
    case = CASES[name]
    for data in (case, case + b"]", case + b",\n" + KERNEL + b"\n]", b"  \n" + case + b"]"):
        for limit in (None, 0, 1, 40):
            assert_same(data, 0, limit)
    cuts = _prefixes(case + b"]") if len(case) < 600 else (case[:cut] for cut in range(0, len(case), 97))
    for data in cuts:
        assert_same(data)


@pytest.mark.parametrize("depth", [509, 510, 511, 512, 600])
def test_nesting_as_deep_as_the_c_parser_allows(depth, layers):
    """The event is depth 1 and args 2: arrays or objects below them count on up to 512."""
    arrays = b'{"ph": "X", "args": {"a": ' + b"[" * depth + b"]" * depth + b"}}]"
    objects = b'{"ph": "X", "x": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}]"
    dims = b'{"args": {"grid": [' + b"[" * depth + b"]" * depth + b", 1, 1]}}]"
    for data, limit in ((arrays, 510), (objects, 511), (dims, 510)):  # dims: the grid array is not counted
        result = assert_same(data)[0]
        assert (result[0] == C.STOPPED) == (depth > limit)
        for cut in (len(data) // 2, len(data) - 3):
            assert_same(data[:cut])


@pytest.mark.parametrize("layout", ["array", "object"])
def test_the_events_of_a_bare_array_and_of_trace_events(layout):
    """The reader scans from the first event, wherever the array starts."""
    events = b",\n".join(CASES[k] for k in ("kineto kernel", "escaped strings", "missing fields", "dims"))
    if layout == "array":
        data = b"\xef\xbb\xbf [\n  " + events + b"\n]\n"
    else:
        data = b'{"schemaVersion": 1, "traceEvents": [\n  ' + events + b'\n], "traceName": "x"}'
    start = data.index(b"[") + 4
    assert data[start:start + 1] == b"{"
    result = assert_same(data, start)[0]
    assert result[0] == C.END_OF_ARRAY and result[1] == 15
    for limit in range(0, len(data) - start, 50):
        assert_same(data, start, limit)
    assert_same(bytearray(data), start)
    assert_same(memoryview(data)[start:], 0)


# -- random documents --------------------------------------------------------------------------------

_BLANKS = [b"", b"", b"", b" ", b"\n    ", b"\t", b"\r\n"]
_KEYS = [b"ph", b"cat", b"name", b"pid", b"tid", b"ts", b"dur", b"id", b"args", b"s", b"bp", b"bind_id",
         b"p\\u0068", b"\\u0061rgs", b"caf\xc3\xa9"]
_ARG_KEYS = [b"correlation", b"device", b"stream", b"bytes", b"External id", b"shared memory", b"kernel",
             b"grid", b"block", b"Ev Idx", b"ts", b"pid", b"name", b"c\\u006frrelation"]
_NUMBERS = [b"0", b"-0", b"1", b"-1", b"7", b"1712195495519689", b"1712195495519689.047", b"1.5", b"-0.5",
            b"2.0005", b"1e3", b"1E-2", b"9223372036854775807", b"-9223372036854775808", b"9223372036854775808",
            b"18446744073709551616", b"9223372036854774", b"9223372036854775", b"0.000", b"1.0", b"-0.0"]
_STRINGS = [b"X", b"i", b"t", b"e", b"kernel", b"aten::mm", b"", b"caf\xc3\xa9", b"\xff", b'a\\"b', b"\\u00e9",
            b"x}, {y", b": colon", b"a" * 40]


def _value(r: random.Random, depth: int, key: bytes = b"") -> bytes:
    k = r.random()
    if key in (b"grid", b"block") and k < 0.6:
        items = [r.choice(_NUMBERS[:7] + [b"1.0", b'"1"']) for _ in range(r.choice([3, 3, 2, 4]))]
        return b"[" + b", ".join(items) + b"]"
    if k < 0.35 or depth > 3:
        return r.choice(_NUMBERS)
    if k < 0.7:
        return b'"' + r.choice(_STRINGS) + b'"'
    if k < 0.8:
        return r.choice([b"true", b"false", b"null"])
    if k < 0.9:
        return b"[" + b", ".join(_value(r, depth + 1) for _ in range(r.randint(0, 3))) + b"]"
    return _object(r, depth + 1, _KEYS, r.randint(0, 3))


def _object(r: random.Random, depth: int, keys: list[bytes], n: int) -> bytes:
    members = []
    for key in (r.choice(keys) for _ in range(n)):
        value = _object(r, depth + 1, _ARG_KEYS, r.randint(0, 5)) if key == b"args" and r.random() < 0.8 \
            else _value(r, depth, key)
        members.append(r.choice(_BLANKS) + b'"' + key + b'"' + r.choice([b"", b"", b" "]) + b":"
                       + r.choice(_BLANKS) + value + r.choice(_BLANKS))
    return b"{" + b",".join(members) + b"}"


def _document(r: random.Random) -> bytes:
    events = [_object(r, 1, [b"ph", b"cat", b"name", b"pid", b"tid", b"ts", b"dur", b"args"] + _KEYS,
                      r.randint(0, 9)) for _ in range(r.randint(1, 5))]
    data = b",\n".join(events) + r.choice([b"]", b" ]", b",]", b"", b"] x", b"}"])
    k = r.random()
    if k < 0.1:
        data = data[:r.randrange(len(data) + 1)]
    elif k < 0.2:
        at = r.randrange(len(data) + 1)
        data = data[:at] + bytes([r.choice(b'{}[]",:0-.e\\ \x01\xfft')]) + data[at:]
    return data


def test_random_documents_scan_the_same(layers):
    for seed in range(400):
        r = random.Random(seed)
        data = _document(r)
        assert_same(data, 0, r.choice([None, 0, r.randrange(len(data) + 1)]))


# -- the rest of the interface -------------------------------------------------------------------------


def test_constants_and_names_are_the_c_modules():
    public = {name for name in dir(C) if not name.startswith("_")}
    assert public <= set(dir(F)), public - set(dir(F))
    for name in public:
        if isinstance(getattr(C, name), int):
            assert getattr(F, name) == getattr(C, name), name


def _same_outcome(call):
    """call(module) on both modules: the same result, or the same exception type and message."""
    outcomes = []
    for module in (C, F):
        try:
            outcomes.append(("ok", call(module)))
        except Exception as e:  # noqa: BLE001  (whatever the C raises, the fallback must raise too)
            outcomes.append((type(e), str(e)))
    assert outcomes[1] == outcomes[0]


def test_interning_and_bad_arguments_behave_as_in_c():
    rows = np.arange(7 * C.NFIELDS, dtype=np.int64).reshape(7, C.NFIELDS)
    interners = {C: C.Interner(), F: F.Interner()}
    for text in (b"a", b"b", b"a", b"", type("Sub", (bytes,), {})(b"b"), bytearray(b"a"), memoryview(b"a"), "a", 1):
        _same_outcome(lambda m: (m.intern(interners[m], text), type(m.intern(interners[m], b"z"))))
    _same_outcome(lambda m: m.intern(None, b"a"))
    _same_outcome(lambda m: m.Interner(()))
    _same_outcome(lambda m: m.Interner(None, None))
    _same_outcome(lambda m: (m.count(interners[m]), _all(m, interners[m]), m.strings(interners[m], -5, 2),
                             m.strings(interners[m], 2, 1), m.strings(interners[m], 1, 99)))
    for text in (b"a", b"z", b"never", b"", bytearray(b"a"), "a"):
        _same_outcome(lambda m: (m.find(interners[m], text), m.count(interners[m])))
    _same_outcome(lambda m: m.count(None))
    _same_outcome(lambda m: m.strings(interners[m], 0.0, 1))
    calls = [
        lambda m: m.columns(rows, np.array([6, 0, 3, 3], np.int64), bytes([C.TS, C.PH, C.BLOCK + 2])),
        lambda m: m.columns(rows.tobytes(), None, b""),
        lambda m: m.columns(rows[:, ::2], None, b"\x01"),
        lambda m: m.columns(rows.tobytes()[:-8], None, b"\x01"),
        lambda m: m.columns(rows, None, bytes([C.NFIELDS])),
        lambda m: m.columns(rows, np.array([7], np.int64), b"\x01"),
        lambda m: m.columns(rows, np.array([-1], np.int64), b"\x01"),
        lambda m: m.columns(rows, b"abc", b"\x01"),
        lambda m: m.columns(rows, [1], b"\x01"),
        lambda m: m.columns(rows, None, "a"),
        lambda m: m.scan("{}]", 0, 1, m.Interner(), m.Interner()),
        lambda m: m.scan(b"{}]", -1, 1, m.Interner(), m.Interner()),
        lambda m: m.scan(b"{}]", 4, 1, m.Interner(), m.Interner()),
        lambda m: m.scan(b"{}]", 3, 1, m.Interner(), m.Interner()),
        lambda m: m.scan(b"{}]", 0.0, 1, m.Interner(), m.Interner()),
        lambda m: m.scan(b"{}]", 0, 1, None, m.Interner()),
        lambda m: m.scan(np.frombuffer(b"  {}]", np.uint8)[1:], 1, 9, m.Interner(), m.Interner()),
        lambda m: m.scan(np.frombuffer(b"{}]{}]", np.uint8)[::2], 0, 9, m.Interner(), m.Interner()),
    ]
    for call in calls:
        _same_outcome(call)


def test_rows_of_parsed_events_are_the_same():
    """``RowScanner.rows_of`` scans events re-serialised by the writer."""
    from traceforge.io.read.rows import RowScanner

    events = [json.loads(e) for e in (KERNEL, CASES["nested args"], b'{"ph": "i", "ts": 1.25, "s": "t"}')]
    with _native.using("c", ["scanner"]):
        want = RowScanner()
        want_rows = want.rows_of(events)
    got = RowScanner()
    assert got._kernel is F
    assert np.array_equal(got.rows_of(events), want_rows)
    assert (list(got.strings), list(got.tracks)) == (list(want.strings), list(want.tracks))
    assert got.intern_string("new") == want.intern_string("new") and got.intern_track(1, None, True, False) \
        == want.intern_track(1, None, True, False)


# -- the C scanner's own tests, on the fallback ------------------------------------------------------
# Each test_* of tests/columns/test_scan.py is collected here too, and runs with the seam's scanner
# switched to the fallback (the autouse fixture above).

globals().update({name: test for name, test in vars(c_scanner_tests).items() if name.startswith("test_")})
