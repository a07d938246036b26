"""Properties of the streaming reader (issue 41), drawn by hypothesis:

- any list of events, written with random whitespace, key order and number forms, in either
  layout, reads back as those events (fractional or exponent ``ts``/``dur`` as their text),
  with head + batches + tail the input byte for byte, at any batch size;
- any byte mutation of such a trace either reads what a strict JSON parser reads from it, or,
  exactly where that parser refuses it (or it is not a trace), raises TraceFormatError: never
  another exception.

The oracle is the stdlib's strict decoder (no NaN/Infinity; text not UTF-8 read with
``surrogateescape`` as traceforge reads it), independent of the reader's own parsers."""

from __future__ import annotations

import json
import os
import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from traceforge.errors import TraceFormatError
from traceforge.io.read.reader import TraceReader

# examples per property and backend: the suite's few; TRACEFORGE_PROPERTY_EXAMPLES=5000 for a longer hunt
EXAMPLES = int(os.environ.get("TRACEFORGE_PROPERTY_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,  # no .hypothesis/ left in the tree
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
TIMES = ("ts", "dur")

# -- the oracle --------------------------------------------------------------------------------


class _FloatText(float):
    text: str


def _float(text: str) -> float:
    value = _FloatText(text)
    value.text = text
    return value


def _pairs(pairs: list) -> dict:
    """An object as the reader gives it: fractional ts/dur as their text, other floats as floats."""
    return {k: (v.text if k in TIMES else float(v)) if isinstance(v, _FloatText) else v for k, v in pairs}


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


ORACLE = json.JSONDecoder(parse_float=_float, object_pairs_hook=_pairs, parse_constant=_no_constant)


def expected_events(data: bytes) -> list | None:
    """The events a strict JSON parser reads from ``data``; None where it refuses it or it is not a trace."""
    try:
        value = ORACLE.decode(data.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        value = value.get("traceEvents")
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        return None
    return value


# -- the reader --------------------------------------------------------------------------------

def read(path: str, batch_bytes: int) -> tuple[list, bytes]:
    """The events read, and head + batches + tail."""
    reader = TraceReader(path, batch_bytes=batch_bytes, on_read=lambda _: None)
    events, parts = [], []
    for batch in reader.batches():
        events.extend(batch.event(i) for i in range(batch.count))
        assert batch.events == events[len(events) - batch.count:]  # a batch parsed whole gives the same
        parts.append(bytes(batch.view))
    reader.metadata()
    return events, reader.head + b"".join(parts) + reader.tail


# -- generated traces --------------------------------------------------------------------------

blanks = st.text(alphabet=" \t\r\n", max_size=3)
names = st.text(alphabet=string.ascii_letters + "<>:_ é\"\\/\u2028\U0001f600", max_size=12)
ints = st.integers(-2**63, 2**63 - 1)
time_texts = st.one_of(
    st.integers(0, 2**53).map(str),
    st.builds(lambda i, f: f"{i}.{f}", st.integers(0, 10**16), st.text(alphabet=string.digits, min_size=1, max_size=4)),
    st.builds(lambda i, e: f"{i}e{e}", st.integers(1, 99), st.integers(0, 6)),
    st.builds(lambda i, f, e: f"{i}.{f}E-{e}", st.integers(1, 9), st.integers(0, 999), st.integers(1, 3)),
)
scalars = st.one_of(ints, st.floats(allow_nan=False, allow_infinity=False), names, st.booleans(), st.none())
args = st.dictionaries(st.sampled_from(["stream", "device", "correlation", "External id", "grid", "x", "name"]),
                       st.one_of(scalars, st.lists(ints, max_size=3)), max_size=4)
events = st.lists(st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "B", "E", "i", "s", "f", "M", "C"]), "ts": time_texts},
    optional={"dur": time_texts, "name": names, "cat": st.sampled_from(["kernel", "cpu_op", "ac2g", "x"]),
              "pid": st.one_of(ints, names), "tid": st.one_of(ints, names), "id": ints, "args": args}),
    max_size=12)


@st.composite
def traces(draw, trailing_comma: bool = True) -> tuple[bytes, list]:
    """A trace's text and its events (times as their text where fractional); ``trailing_comma``:
    maybe one after the last event (the reader and Perfetto take it; the stdlib oracle does not)."""
    evs = draw(events)

    def number(text: str):
        return int(text) if text.lstrip("-").isdigit() else text

    def value(v) -> str:
        return json.dumps(v, ensure_ascii=draw(st.booleans())) if not isinstance(v, dict) else obj(v)

    def obj(d: dict, times: bool = False) -> str:
        keys = draw(st.permutations(list(d)))
        items = [draw(blanks) + json.dumps(k) + draw(blanks) + ":" + draw(blanks)
                 + (d[k] if times and k in TIMES else value(d[k])) + draw(blanks) for k in keys]
        return "{" + ",".join(items) + draw(blanks) + "}"

    texts = [obj(e, times=True) for e in evs]
    body = ",".join(draw(blanks) + t + draw(blanks) for t in texts)
    if evs and trailing_comma and draw(st.booleans()):
        body += "," + draw(blanks)  # a trailing comma: Perfetto takes it
    if draw(st.booleans()):
        text = draw(blanks) + '{"schemaVersion": 1,' + draw(blanks) + '"traceEvents":' + draw(blanks) + "[" + body + "]" \
            + draw(blanks) + ',"meta": {"a": [1, 2.5]}}' + draw(blanks)
    else:
        text = draw(blanks) + "[" + body + "]" + draw(blanks)
    expected = [{k: number(v) if k in TIMES else v for k, v in e.items()} for e in evs]
    return text.encode(), expected


@SETTINGS
@given(trace=traces(), batch_bytes=st.integers(1, 400))
def test_generated_events_read_back(tmp_path, trace, batch_bytes, backend):
    data, expected = trace
    path = tmp_path / "t.json"
    path.write_bytes(data)
    events, again = read(str(path), batch_bytes)
    assert events == expected
    assert again == data


@pytest.mark.slow
@SETTINGS
@given(trace=traces(trailing_comma=False), batch_bytes=st.integers(1, 400), edits=st.lists(
    st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, 10**6), st.integers(0, 255)),
    min_size=1, max_size=3))
@example(trace=(b"[]", []), batch_bytes=1, edits=[("delete", 0, 0), ("delete", 0, 0), ("set", 0, 0)])  # all gone
def test_mutated_bytes_read_as_json_says_or_refused(tmp_path, trace, batch_bytes, edits, backend):
    data = bytearray(trace[0])
    for how, at, byte in edits:
        at %= max(1, len(data) + (how == "insert"))  # (all bytes may be deleted: an empty file)
        if how == "set" and data:
            data[at % len(data)] = byte
        elif how == "insert":
            data[at:at] = bytes([byte])
        elif data:
            del data[at % len(data)]
    data = bytes(data)
    path = tmp_path / "t.json"
    path.write_bytes(data)
    expected = expected_events(data)
    try:
        events, _ = read(str(path), batch_bytes)
    except TraceFormatError as e:
        assert expected is None or data.startswith(b"\xef\xbb\xbf"), f"refused valid JSON: {e}"
        return
    assert expected is not None, "read what a strict JSON parser refuses"
    assert events == expected


@pytest.mark.parametrize("data", [b'[{"ts": 1.50, "dur": 2e3, "x": 1e400}]', b'{"traceEvents": [], "traceEvents": 1}'])
def test_oracle_examples(data, tmp_path):
    """The oracle itself: times as text, a number beyond double as infinity; a second traceEvents
    key (the last one wins for the stdlib) is not what the reader reads (the first): not generated."""
    assert expected_events(data) in ([{"ts": "1.50", "dur": "2e3", "x": float("inf")}], None)
