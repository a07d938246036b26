"""The C pieces of the placed copy (slices joined, keys searched in spans, numbers as text)
and the text columns built on them, against plain Python on edge cases and at random."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from traceforge._native._counter_text import fixed_point_texts
from traceforge._native._splice import insert_members, spans_containing, uninitialized
from traceforge._native._splice import join_rows as c_join_rows
from traceforge.emit.tracks import FlowArrows
from traceforge.io.write.fields import splice, splice_rows
from traceforge.io.write.jsontext import ArgColumns, FixedPoint, Texts, join_rows
from traceforge.io.write.patch import ExtraArgs


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def test_c_join_rows_takes_any_buffer_and_whole_parts():
    text, lengths = c_join_rows([b"hello", memoryview(b", world"), b"!"], [(_i64([0, 1]), _i64([5, 4])), None, None],
                                2, b"|")
    assert text == b"hello|, world|!ello|, world|!" and np.frombuffer(lengths, np.int64).tolist() == [15, 14]
    assert c_join_rows([], [], 2, b",") == (b"", _i64([0, 0]).tobytes())
    assert c_join_rows([b"abc"], [(_i64([]), _i64([]))], 0, b"") == (b"", b"")


@pytest.mark.parametrize("start, length", [(0, 4), (2, 2), (-1, 1), (0, -1), (4, 0)])
def test_c_join_rows_refuses_slices_out_of_bounds(start, length):
    with pytest.raises(IndexError):
        c_join_rows([b"abc"], [(_i64([start]), _i64([length]))], 1, b"")


def test_c_join_rows_refuses_columns_of_other_lengths():
    with pytest.raises(ValueError):
        c_join_rows([b"abc"], [(_i64([0, 0]), _i64([1]))], 1, b"")
    with pytest.raises(ValueError):
        c_join_rows([b"abc", b"d"], [None], 1, b"")


def test_spans_containing_edges():
    data = b'{"a":1,"key":2}'
    at = data.index(b'"key"')
    spans = [(0, len(data)), (at, at + 5), (at, at + 4), (at + 1, len(data)), (0, 0), (len(data), len(data))]
    found = spans_containing(data, _i64([a for a, _ in spans]), _i64([b for _, b in spans]), [b'"key"'])
    assert list(found) == [1, 1, 0, 0, 0, 0]
    assert spans_containing(data, _i64([0]), _i64([len(data)]), []) == b"\0"
    assert spans_containing(data, _i64([]), _i64([]), [b'"key"']) == b""
    with pytest.raises(IndexError):
        spans_containing(data, _i64([3]), _i64([2]), [b"x"])
    with pytest.raises(IndexError):
        spans_containing(data, _i64([0]), _i64([len(data) + 1]), [b"x"])


MEMBERS = (b"", b'"a": 1', b'"b": "x", "c": [1]', b'"category": 0')


def _events(rng: random.Random, count: int, members_of=lambda rng: rng.choice(MEMBERS)
            ) -> tuple[bytes, list[int], list[int], list[bool]]:
    """Events with args objects (some empty; ``members_of(rng)``: one's members): their bytes,
    starts, args' insertion places and emptiness."""
    raw, starts, at, empty = b"[", [], [], []
    for i in range(count):
        members = members_of(rng)
        event = b'{"name": "k%d", "args": {' % i + members
        starts.append(len(raw))
        at.append(len(raw) + len(event))
        empty.append(not members)
        raw += event + b"}}" + (b", " if i < count - 1 else b"]")
    return raw, starts, at, empty


def test_insert_members_adds_each_body_after_the_last_member_unless_a_key_it_adds_is_there():
    rng = random.Random(3)
    nones = 0
    for _ in range(300):
        raw, starts, at, empty = _events(rng, rng.randint(0, 12))
        bodies = Texts.of([rng.choice([b"", b'"launch_delay_us": 1.5', b'"x": 2', b'"category":1', b'"y":"category"'])
                           for _ in starts])
        keys = [b'"launch_delay_us"', b'"category"']
        got = insert_members(raw, _i64(starts), _i64(at), np.array(empty, bool), bodies.blob, bodies.starts,
                             bodies.lengths, keys)
        edited = [i for i in range(len(starts)) if bodies.lengths[i]]
        # only a key the event's own body adds (as a member's name) sends it to the general path
        if any(k in raw[starts[i]:at[i]] and k + b":" in bodies[i].replace(b'": ', b'":') for i in edited
               for k in keys):
            assert got is None  # the general path decides
            nones += 1
            continue
        want = splice(raw, [(at[i], at[i], (b"" if empty[i] else b", ") + bodies[i]) for i in edited])
        assert got == want
        assert all(orjson.loads(got)[i]["args"] for i in edited)
    assert nones  # the general path was taken


def test_insert_members_leaves_an_event_with_no_known_place_to_the_general_path():
    raw, starts, at, empty = _events(random.Random(1), 3)
    bodies = Texts.of([b'"x": 1', b"", b'"y": 2'])
    unknown = _i64([at[0], -1, -1])  # the second has no body: its place does not matter
    assert insert_members(raw, _i64(starts), unknown, np.array(empty, bool), bodies.blob, bodies.starts,
                          bodies.lengths, []) is None
    unknown[2] = at[2]
    assert orjson.loads(insert_members(raw, _i64(starts), unknown, np.array(empty, bool), bodies.blob, bodies.starts,
                                       bodies.lengths, []))[2]["args"]["y"] == 2
    with pytest.raises(IndexError):  # places out of order
        insert_members(raw, _i64(starts[::-1]), _i64(at[::-1]), np.array(empty, bool), bodies.blob, bodies.starts,
                       bodies.lengths, [])


def test_uninitialized_blocks_are_writable_bytearrays_of_the_size_asked():
    block = uninitialized(1 << 20)
    assert type(block) is bytearray and len(block) == 1 << 20
    block[-3:] = b"end"
    assert block.endswith(b"end") and uninitialized(0) == bytearray()
    with pytest.raises(ValueError):
        uninitialized(-1)


# keys: needles that all begin with '"' (a faster path); the larger alphabet gives them more than
# four second bytes, past what the AVX2 search takes (then SSE2 searches)
@pytest.mark.parametrize("keys, alphabet", [(False, b'ab"c'), (True, b'ab"c'), (True, b'ab"cdefg')])
def test_spans_containing_agrees_with_find(keys, alphabet):
    rng = random.Random(7)
    for _ in range(2000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 80 if not keys else 200)))
        needles = [(b'"' if keys else b"") + bytes(rng.choice(alphabet) for _ in range(rng.randint(keys, 5)))
                   for _ in range(rng.randint(keys, 3 if len(alphabet) < 8 else 7))]
        starts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 4)))
        stops = [rng.randint(a, len(data)) for a in starts]
        want = [any(data.find(k, a, b) >= 0 for k in needles) for a, b in zip(starts, stops)]
        assert list(spans_containing(data, _i64(starts), _i64(stops), needles)) == want


@pytest.mark.parametrize("decimals", [0, 1, 3, 18])
def test_fixed_point_texts_are_exacttime_texts(decimals):
    values = _i64([0, 1, -1, 1500, -1500, 10**decimals, 2**63 - 1, -2**63 + 1, -2**63, 1712195495519689047])
    blob, ends = fixed_point_texts(values, decimals)
    ends = np.frombuffer(ends, np.int64).tolist()
    assert [blob[a:b] for a, b in zip([0, *ends], ends)] == decimal_texts(values, decimals)
    assert fixed_point_texts(_i64([]), decimals) == (b"", b"")
    assert fixed_point_texts(_i64([-2**63]), 3)[0] == b"-9223372036854775.808"


def test_fixed_point_texts_at_every_digit_count():
    """Each power of ten and its neighbours (the digit count changes there), and random values
    of every length, at every number of decimals."""
    powers = [10**k + d for k in range(19) for d in (-1, 0, 1)]
    rng = np.random.default_rng(11)
    spread = (rng.integers(0, 2**63 - 1, 3000, dtype=np.int64) >> rng.integers(0, 63, 3000)).tolist()
    values = _i64(powers + [-v for v in powers] + spread + [-v for v in spread])
    for decimals in range(19):
        blob, ends = fixed_point_texts(values, decimals)
        ends = np.frombuffer(ends, np.int64).tolist()
        assert [blob[a:b] for a, b in zip([0, *ends], ends)] == decimal_texts(values, decimals), decimals


def test_real_numbers_print_as_floats_do_and_stay_exact_beyond():
    """Args in µs from ns: what orjson writes for ns / 1000 as long as a float holds it
    (whole values as ``4.0``, typed as reals), and the exact decimal beyond."""
    rng = np.random.default_rng(5)
    values = np.concatenate([_i64([0, 1000, -2000, 1, -7, 4621, 10**15 - 1]), rng.integers(-10**15, 10**15, 2000)])
    texts = Texts.numbers(values, 3, b'"k":', real=True)
    assert _rows(texts) == [b'"k":' + orjson.dumps(v / 1000) for v in values.tolist()]
    assert _rows(Texts.numbers(_i64([2**62, 10**19 // 10]), 3, real=True)) == [b"4611686018427387.904", b"1000000000000000.0"]


def test_texts_rows():
    texts = Texts.of([b"ab", b"", b"cde"])
    assert [texts[i] for i in range(len(texts))] == [b"ab", b"", b"cde"]
    assert [t for t in _rows(texts.take(np.array([2, 0])))] == [b"cde", b"ab"]
    assert _rows(texts.only(np.array([True, True, False]))) == [b"ab", b"", b""]
    assert _rows(texts.spread(np.array([False, True, True, False, True]))) == [b"", b"ab", b"", b"", b"cde"]
    assert _rows(Texts.where(b"x", np.array([True, False]))) == [b"x", b""]
    assert _rows(Texts.numbers(_i64([1500, -7]), 3)) == [b"1.5", b"-0.007"]


def test_join_rows_joins_the_non_empty_texts():
    rng = random.Random(3)
    columns = [[rng.choice([b"", b"a", b"bc", b'"k":1']) for _ in range(50)] for _ in range(4)]
    for sep in (b"", b",", b", "):
        joined = join_rows([Texts.of(c) for c in columns], sep)
        assert _rows(joined) == [sep.join(t for t in row if t) for row in zip(*columns)]
        assert joined.blob == b"".join(_rows(joined))  # rows back to back
    assert _rows(join_rows([b"<", Texts.of([b"x", b""]), b"", b">"], b",")) == [b"<,x,>", b"<,>"]
    assert join_rows([Texts.of([])], b",").blob == b""
    with pytest.raises(IndexError, match="row 1 of part 0"):
        join_rows([Texts(b"abc", _i64([0, 2]), _i64([1, 2]))])


@pytest.mark.parametrize("edits", [
    [],
    [(0, 0, b"start")],
    [(10, 10, b"end")],
    [(0, 0, b"a"), (0, 2, b"b"), (5, 5, b""), (5, 10, b"c")],
    [(3, 3, b"x"), (4, 6, b"yy"), (6, 6, b"z")],
])
def test_splice_rows_is_splice(edits):
    raw = b"0123456789"
    texts = Texts.of([t for _, _, t in edits])
    starts, stops = _i64([a for a, _, _ in edits]), _i64([b for _, b, _ in edits])
    assert splice_rows(raw, starts, stops, [texts]) == splice(raw, edits)
    assert splice_rows(memoryview(raw)[:7], starts.clip(0, 7), stops.clip(0, 7), [texts]) == \
        splice(raw[:7], [(min(a, 7), min(b, 7), t) for a, b, t in edits])
    assert splice_rows(raw, starts, stops, [b"<", texts, b">"]) == splice(raw, [(a, b, b"<" + t + b">") for a, b, t in edits])


def test_splice_rows_refuses_overlapping_edits():
    with pytest.raises(IndexError):
        splice_rows(b"0123456789", _i64([2, 1]), _i64([4, 3]), [Texts.of([b"a", b"b"])])


def test_bodies_are_the_rows_serialised():
    """Columns of codes, numbers and objects, a patch, a key in two sources: each event's
    members are its args as ``rows``/``between`` give them, serialised."""
    ordinals = _i64([2, 5, 7, 9, 11])
    codes = ArgColumns(ordinals, {"category": np.array([0, 1, 0, 2, 1], np.uint8)},
                       {"category": lambda c: np.array(["gemm", None, "nccl \"x\""], dtype=object)[c]})
    numbers = ArgColumns(ordinals[[0, 2, 4]].astype(np.int32), {"delay_us": _i64([1500, -20, 0]),
                                                                 "name": np.array(["a", None, "é"], dtype=object),
                                                                 "cpu_us": _i64([2000, 7, -3000])},
                         {"delay_us": lambda ns: ns / 1000, "cpu_us": FixedPoint(3)})
    for patches in ({}, {5: {"pattern": "P1"}, 8: {"x": [1, 2]}, 11: {}}, {7: {"category": "mine"}}):
        extra = ExtraArgs(patches, [codes, numbers])
        want = extra.between(0, 20)
        assert _rows(extra.bodies(extra.ordinals)) == \
            [orjson.dumps(want[o])[1:-1] if want.get(o) else b"" for o in extra.ordinals.tolist()]
        for lo in range(len(extra.ordinals)):  # any run of the ordinals
            assert _rows(extra.bodies(extra.ordinals[lo:lo + 2])) == _rows(extra.bodies(extra.ordinals))[lo:lo + 2]


def test_extra_args_ordinals_are_the_sorted_union_of_their_sources():
    every = ArgColumns(_i64([2, 5, 9]), {"a": _i64([1, 2, 3])})
    same = ArgColumns(np.array([2, 5, 9], np.int32), {"b": _i64([4, 5, 6])})
    some = ArgColumns(_i64([5, 11]), {"c": _i64([7, 8])})
    twice = ArgColumns(_i64([5, 5]), {"d": _i64([1, 2])})
    assert ExtraArgs({}, [every, same]).ordinals.tolist() == [2, 5, 9]  # the same events: taken as they are
    assert ExtraArgs({}, [every, same]).ordinals.dtype == np.int64
    assert ExtraArgs({3: {"p": 1}}, [every, same]).ordinals.tolist() == [2, 3, 5, 9]
    assert ExtraArgs({}, [every, some]).ordinals.tolist() == [2, 5, 9, 11]
    inside = ArgColumns(np.array([5], np.int32), {"e": _i64([3])})
    assert ExtraArgs({9: {"p": 1}}, [inside, every]).ordinals.tolist() == [2, 5, 9]  # within the longest: no merge
    assert ExtraArgs({9: {"p": 1}}, [inside, every]).ordinals.dtype == np.int64
    assert ExtraArgs({}, [some, ArgColumns(_i64([2, 3]), {"f": _i64([0, 0])})]).ordinals.tolist() == [2, 3, 5, 11]
    assert ExtraArgs({}, [twice, twice]).ordinals.tolist() == [5]
    assert ExtraArgs({}, []).ordinals.tolist() == []


def test_flow_arrows_text():
    arrows = FlowArrows(cat="launch_delay", first_id=41, tracks=[(1, 7), ("p", "t")],
                        start_track=_i64([1, 0]), start_ts=_i64([1500, 2000]), end_track=_i64([0, 0]),
                        end_ts=_i64([3001, 4000]), values=_i64([5, 5]), label=lambda v: f"delay {v}")
    [(n, text)] = list(arrows.blocks())
    assert n == 4 and text == (
        b'{"ph":"s","id":41,"cat":"launch_delay","name":"delay 5","pid":"p","tid":"t","ts":1.5},\n'
        b'{"ph":"f","bp":"e","id":41,"cat":"launch_delay","name":"delay 5","pid":1,"tid":7,"ts":3.001},\n'
        b'{"ph":"s","id":42,"cat":"launch_delay","name":"delay 5","pid":1,"tid":7,"ts":2},\n'
        b'{"ph":"f","bp":"e","id":42,"cat":"launch_delay","name":"delay 5","pid":1,"tid":7,"ts":4}')


def _rows(texts: Texts) -> list[bytes]:
    return [texts[i] for i in range(len(texts))]


def decimal_texts(values: np.ndarray, decimals: int) -> list[bytes]:
    """The C formatter's reference in Python: the exact text of each ``value / 10**decimals``,
    trailing zeros dropped (``1500, 3`` -> ``b"1.5"``)."""
    ints = values.tolist()
    if decimals == 0:
        return [b"%d" % v for v in ints]
    negative = values < 0
    magnitude = np.where(negative, -(values + 1), values).astype(np.uint64) + negative  # |v|, even for int64's min
    whole, frac = np.divmod(magnitude, np.uint64(10 ** decimals))
    fmt = b".%0" + str(decimals).encode() + b"d"
    return [(b"-%d" if v < 0 else b"%d") % w + ((fmt % f).rstrip(b"0") if f else b"")
            for v, w, f in zip(ints, whole.tolist(), frac.tolist())]
