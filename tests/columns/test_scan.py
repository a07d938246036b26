"""The C scanner's rows, through the scan, on events it must not take at face value."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tests.conftest import SAMPLE, raw_json
from traceforge.columns.scan import scan
from traceforge.errors import TraceFormatError
from traceforge.io.read import rows as R
from traceforge.io.read.reader import TraceReader

KERNEL = '{"ph": "X", "cat": "kernel", "name": %s, "pid": 0, "tid": 7, "ts": %s, "dur": %s, "args": %s}'
ARGS = '{"device": 0, "stream": 7, "correlation": %s}'


def _scan(tmp_path, events: list[str]):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}", encoding="utf-8")
    return scan(str(path))


def test_exact_times_from_their_text(tmp_path):
    cols = _scan(tmp_path, [
        KERNEL % ('"a"', "1712195495519689.047", "1.5", ARGS % 1),
        KERNEL % ('"b"', "1712195495519689.0475", "2.0005", ARGS % 2),  # below 1 ns: half-even
        KERNEL % ('"c"', '"1712195495519690.25"', "1e1", ARGS % 3),  # time as text, exponent
        KERNEL % ('"d"', "-0.5", "0", ARGS % 4),
    ])
    assert cols.gpu.ts.tolist() == [1712195495519689047, 1712195495519689048, 1712195495519690250, -500]
    assert cols.gpu.dur.tolist() == [1500, 2000, 10000, 0]


def test_strings_with_escapes_are_decoded_and_merged(tmp_path):
    cols = _scan(tmp_path, [
        KERNEL % ('"gemm \\"big\\" \\u00e9"', "1", "1", ARGS % 1),
        KERNEL % ('"gemm \\"big\\" é"', "2", "1", ARGS % 2),  # the same name, written without escapes
        KERNEL % ('"void f<\\u0041>(int), {\\"x\\"}"', "3", "1", ARGS % 3),
    ])
    names = cols.name_of(cols.gpu.name)
    assert names == ['gemm "big" é', 'gemm "big" é', 'void f<A>(int), {"x"}']
    assert cols.gpu.name[0] == cols.gpu.name[1]


def test_args_that_are_not_plain_ints(tmp_path):
    cols = _scan(tmp_path, [
        KERNEL % ('"a"', "1", "1", '{"device": 0, "stream": "7", "correlation": "0x10"}'),
        KERNEL % ('"b"', "2", "1", '{"device": 0, "stream": 7, "correlation": 1.0}'),
        KERNEL % ('"c"', "3", "1", '{"device": 0, "stream": 7, "correlation": 99999999999999999999999}'),
        KERNEL % ('"d"', "4", "1", '{"correlation": 5, "correlation": 6}'),  # the last duplicate wins
        KERNEL % ('"e"', "5", "1", '"not an object"'),
        '{"ph": "X", "cat": "kernel", "name": "f", "pid": 0, "tid": 7, "ts": 6, "dur": 1, "\\u0061rgs": {}}',
    ])
    assert cols.gpu.stream.tolist() == [7, 7, 7, 7, 7, 7]  # missing: the tid
    assert cols.gpu.correlation.tolist() == [16, -1, -1, 6, -1, -1]


def test_external_id_and_shared_memory_only_as_ints(tmp_path):
    path = tmp_path / "t.json"
    events = [
        KERNEL % ('"a"', "1", "1", '{"correlation": 1, "External id": 5, "shared memory": 1024}'),
        KERNEL % ('"b"', "2", "1", '{"correlation": 2, "External id": "5", "shared memory": 1.0}'),
        KERNEL % ('"c"', "3", "1", '{"correlation": 3, "External id": 99999999999999999999999}'),
        KERNEL % ('"d"', "4", "1", '{"External id": 6, "External id": [6], "shared memory": 0}'),  # the last wins
        KERNEL % ('"e"', '"5"', "1", '{"correlation": 5, "External id": 7, "shared memory": 8}'),  # odd: parsed
        KERNEL % ('"f"', "6", "1", '{}'),
    ]
    path.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}", encoding="utf-8")
    cols = scan(str(path), op_args=True)
    assert cols.gpu.external_id.tolist() == [5, -1, -1, -1, 7, -1]
    assert cols.gpu.shared_memory.tolist() == [1024, -1, -1, 0, 8, -1]
    assert "external_id" not in scan(str(path)).gpu.cols  # only when asked for


def test_kernel_dims_only_when_both_are_three_ints(tmp_path):
    grid = '{"correlation": 1, "grid": [4, 2, 1], "block": [128, 1, 1]}'
    cols = _scan(tmp_path, [
        KERNEL % ('"a"', "1", "1", grid),
        KERNEL % ('"b"', "2", "1", '{"correlation": 2, "grid": [4, 2], "block": [128, 1, 1]}'),
        KERNEL % ('"c"', "3", "1", '{"correlation": 3, "grid": [4, 2, 1.0], "block": [128, 1, 1]}'),
        KERNEL % ('"d"', "4", "1", grid),
    ])
    dims = cols.gpu.dims.tolist()
    assert dims[0] == dims[3] >= 0 and dims[1] == dims[2] == -1
    assert cols.kernel_dims[dims[0]] == ((4, 2, 1), (128, 1, 1))


def test_events_with_bad_times_are_counted_not_used(tmp_path):
    cols = _scan(tmp_path, [
        KERNEL % ('"a"', "null", "1", ARGS % 1),
        KERNEL % ('"b"', '"soon"', "1", ARGS % 2),
        KERNEL % ('"c"', "3", "1", ARGS % 3),
    ])
    assert len(cols.gpu) == 1
    assert cols.skipped == {"gpu event without a numeric ts/dur": 2}


@pytest.mark.parametrize("bad, where", [
    ('{"ph": "X", "name": "a\x01"}', "control character"),
    ('{"ph": "X", "name": "a\\q"}', "escape"),
    ('{"ph": "X", "ts": 01}', "JSON"),
    ('{"ph": "X", "ts": NaN}', "NaN"),
])
def test_invalid_json_is_named_by_the_exact_decoder(tmp_path, bad, where):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + KERNEL % ('"a"', "1", "1", ARGS % 1) + ", " + bad + "]}",
                    encoding="utf-8")
    with pytest.raises(TraceFormatError) as e:
        for _ in TraceReader(str(path)).batches():
            pass
    assert "event 1" in str(e.value) and where.lower() in str(e.value).lower()


def test_batches_round_trip_whatever_the_buffer_size(tmp_path):
    events = [KERNEL % (json.dumps(f"k{i}" * (i % 7)), str(i), "1", ARGS % i) for i in range(500)]
    path = tmp_path / "t.json"
    data = '{"traceEvents": [' + ", ".join(events) + "]}"
    path.write_text(data, encoding="utf-8")
    for batch_bytes in (64, 1000, 1 << 20):
        reader = TraceReader(str(path), batch_bytes=batch_bytes)
        raw = b"".join(bytes(b.raw) for b in reader.batches())
        assert reader.head + raw + reader.tail == data.encode()
        assert reader.event_count == 500


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compressed_batches_round_trip_across_chunks(tmp_path, codec, monkeypatch):
    """Events cut by the decompressed chunks' edges: a partial event either fits the headroom
    before the next chunk (``io.reader.HEADROOM``) or is longer and joined with it; every
    byte and offset comes out as it went in."""
    import gzip
    import random

    import zstandard

    from traceforge.io.read import codec as codecs
    from traceforge.io.read.reader import HEADROOM

    monkeypatch.setattr(codecs, "BLOCK", 500_000)  # ~14 chunks

    rng = random.Random(7)
    sizes = [rng.choice([10, 200, 3000]) for _ in range(4000)] + [HEADROOM + 20_000] * 30 + [3 * HEADROOM]
    rng.shuffle(sizes)
    events = [KERNEL % (json.dumps(rng.randbytes(n // 2).hex()), str(i), "1", ARGS % i) for i, n in enumerate(sizes)]
    data = ('{"traceEvents": [' + ",\n".join(events) + "]}").encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(data, 1) if codec == "gzip" else zstandard.ZstdCompressor().compress(data))
    reader = TraceReader(str(path), batch_bytes=100_000)  # one chunk is enough for most batches
    batches = list(reader.batches())
    assert len(batches) > 5 and reader.event_count == len(events)
    assert reader.head + b"".join(b.raw for b in batches) + reader.tail == data
    assert all(data[b.offset:b.offset + len(b.raw)] == b.raw for b in batches)


def test_runs_of_tiny_events_outgrow_the_first_guess_of_rows():
    """The scanner sizes its rows for an event per 200 bytes; denser runs grow them."""
    data = b",".join(b'{"ph":"i","ts":%d}' % i for i in range(20_000)) + b"]"
    result = R.RowScanner().scan(data, len(data))
    assert result.status == R.END_OF_ARRAY and len(result.rows) == 20_000
    assert result.rows[:, R.TS].tolist() == [i * 1000 for i in range(20_000)]


def _number_texts() -> list[str]:
    """Integers of every length the scanner reads in eight-byte steps, the int64 edges,
    fractions and exponents, and random ones."""
    rng = random.Random(7)
    texts = ["0", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
             "-9223372036854775809", "18446744073709551615", "18446744073709551616",
             "9223372036854774", "9223372036854775",  # the last whole µs that still fits in ns, and one past
             "1e3", "1.5E-2", "0.000", "-0.1234", "12.3456789"]
    for length in range(1, 26):
        texts += ["9" * length, "1" + "0" * (length - 1), str(rng.randrange(10 ** (length - 1), 10 ** length))]
        texts += [f"{rng.randrange(10 ** length)}.{rng.randrange(10 ** rng.randint(1, 5))}"]
    return texts + [("-" if rng.random() < 0.3 else "") + t for t in texts if not t.startswith("-")]


def _expected(text: str) -> tuple[int | None, int | None]:
    """(int value, exact ns of µs) as the scanner must read them; None where it must not."""
    plain = "e" not in text.lower()
    value = int(text) if plain and "." not in text and -2 ** 63 <= int(text) < 2 ** 63 else None
    whole, _, frac = text.lstrip("-").partition(".")
    ns = None
    if plain and len(frac) <= 3 and int(whole) <= (2 ** 63 - 1) // 1000 - 1:
        ns = (int(whole) * 1000 + int(frac.ljust(3, "0") or 0)) * (-1 if text.startswith("-") else 1)
    return value, ns


@pytest.mark.parametrize("at_end", [False, True], ids=["mid-data", "last-bytes"])
def test_numbers_of_every_length_are_read_exactly(at_end):
    """Digits go eight at a time except in the last bytes of the data: both ways agree with Python."""
    texts = _number_texts()
    for text in texts:
        event = b'{"ph":"i","ts":%s,"id":%s}' % (text.encode(), text.encode())
        data = event + (b"]" if at_end else b"," + b" " * 64 + b'{"ph":"i"}]')
        rows = R.RowScanner().scan(data, len(data)).rows
        value, ns = _expected(text)
        flags = int(rows[0, R.FLAGS])
        assert bool(flags & R.F_ID) == (value is not None), text
        assert bool(flags & R.F_TS) == (ns is not None), text
        assert bool(flags & R.F_ODD) == (value is None or ns is None), text
        if value is not None:
            assert rows[0, R.ID] == value, text
        if ns is not None:
            assert rows[0, R.TS] == ns, text


def _string_literals() -> list[bytes]:
    """JSON string literals, valid or not, with escapes, quotes and control characters at
    every place around the first 16 bytes (the scanner's inlined case looks at those only)."""
    rng = random.Random(11)
    pieces = [b"a", b"Z", b" ", b"\xc3\xa9", b'\\"', b"\\\\", b"\\n", b"\\u00e9", b"\\/", b"\x01", b"\\q", b"\\u12"]
    literals = []
    for length in range(0, 40):
        for _ in range(6):
            body = b"".join(rng.choice(pieces[:4]) for _ in range(length))
            at = rng.randrange(length + 1)
            odd = rng.choice(pieces[4:]) if rng.random() < 0.7 else b""
            literals.append(b'"' + body[:at] + odd + body[at:] + b'"')
    return literals + [b'"' + b"x" * 15, b'"' + b"x" * 40]  # unterminated


@pytest.mark.parametrize("after", [b"}]", b"}" + b" " * 32 + b"]"], ids=["at-end", "padded"])
def test_strings_agree_with_the_json_decoder(after):
    """Every literal scans to the decoder's string, or stops the scan where the decoder fails."""
    for literal in _string_literals():
        data = b'{"ph":"i","name":' + literal + after
        scanner = R.RowScanner()
        result = scanner.scan(data, len(data))
        try:
            expected = json.loads(literal.decode("utf-8", "surrogateescape"))  # bytes >= 0x80 pass through
        except ValueError:
            assert result.status in (R.STOPPED, R.INCOMPLETE) and not len(result.rows), literal
            continue
        assert result.status == R.END_OF_ARRAY, literal
        assert R.decode_string(scanner.strings[result.rows[0, R.NAME]]) == expected, literal


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue"])
def test_rows_do_not_depend_on_where_the_data_ends(name, trace_path):
    """A trace scanned from buffers cut every few KB (strings, numbers and events split at
    their ends: the scanner's 8- and 16-byte fast paths fall back there) gives the rows of one
    scan of the whole, offsets aside. The buffers are views into the whole trace, as the
    reader's are into its blocks."""
    data = raw_json(trace_path(name))
    start = data.index(b"[", data.index(b'"traceEvents"')) + 1
    start += len(data[start:]) - len(data[start:].lstrip())
    whole = R.RowScanner().scan(data, len(data), start).rows

    scanner, pieces, pos, size = R.RowScanner(), [], start, 4099
    while True:
        result = scanner.scan(memoryview(data)[pos:pos + size], size)
        assert result.status != R.STOPPED, result.message  # valid JSON cut short is only incomplete
        if result.status == R.INCOMPLETE and not len(result.rows):
            size *= 2  # an event longer than the buffer
            continue
        rows = result.rows.copy()
        rows[:, [R.START, R.END]] += pos - start
        rows[:, R.ARGS_AT] += np.where(rows[:, R.FLAGS] & R.F_ARGS, pos - start, 0)
        rows[:, [R.TS_AT, R.TS_END]] += np.where(rows[:, [R.TS_AT]] >= 0, pos - start, 0)
        pieces.append(rows)
        pos, size = pos + result.stop, 4099
        if result.status == R.END_OF_ARRAY:
            break
    assert np.array_equal(np.concatenate(pieces), whole)


def test_flags_that_tell_how_an_event_is_written():
    """``check`` takes an event from its row only when the row shows how it is written:
    a time with a point (Perfetto reads it through a double), a dur key whatever its value,
    keys beyond the scanned ones, and a flow end's bp "e"."""
    events = [
        '{"ph": "X", "ts": 5, "dur": 1.0}',
        '{"ph": "X", "ts": 5.25, "dur": null}',
        '{"ph": "f", "ts": 5, "bp": "e", "id": 1}',
        '{"ph": "f", "ts": 5, "bp": "s", "id": 1}',
        '{"ph": "X", "ts": 5, "dur": 1, "bind_id": 3, "args": {"x": 1}}',
        '{"ph": "f", "bp": "e", "bp": 1, "ts": 5}',
    ]
    data = ("[" + ", ".join(events) + "]").encode()
    result = R.RowScanner().scan(data, len(data), 1)
    flags = result.rows[:, R.FLAGS].tolist()
    has = [[name for name in ("F_TS_FRAC", "F_DUR_FRAC", "F_DUR_KEY", "F_EXTRA", "F_BP_E") if f & getattr(R, name)]
           for f in flags]
    assert has == [["F_DUR_FRAC", "F_DUR_KEY"], ["F_TS_FRAC", "F_DUR_KEY"], ["F_BP_E"], ["F_EXTRA"],
                   ["F_DUR_KEY", "F_EXTRA"], ["F_EXTRA"]]
    assert result.rows[0, R.DUR] == 1000 and not flags[1] & R.F_DUR  # null is no time


def test_columns_gather_the_fields_of_the_rows_asked_for():
    """``rows.columns`` is what ``rows[at][:, field]`` gives, field by field, in one pass; it
    refuses rows it does not have rather than read past the buffer."""
    rows = np.arange(7 * R.NFIELDS, dtype=np.int64).reshape(7, R.NFIELDS)
    at = np.array([6, 0, 3, 3], np.int64)
    fields = (R.TS, R.PH, R.FLAGS, R.BLOCK + 2)
    got = R.columns(rows, at, fields)
    assert list(got) == list(fields)
    for field in fields:
        assert got[field].tolist() == rows[at][:, field].tolist() and got[field].flags.c_contiguous
    assert R.columns(rows, None, (R.NAME,))[R.NAME].tolist() == rows[:, R.NAME].tolist()
    assert R.columns(rows, np.zeros(0, np.int64), fields)[R.TS].tolist() == []
    with pytest.raises(IndexError):
        R.columns(rows, np.array([7], np.int64), fields)
    with pytest.raises(ValueError):
        R.columns(rows, at, (R.NFIELDS,))


def test_interned_strings_of_every_length_map_back_in_first_seen_order():
    """Names from empty to longer than a slot holds (16 bytes), sharing prefixes and lengths,
    repeated in random order: each distinct one is interned once, ids count up in the order
    first met, and every row's id gives back its own name (and its own track)."""
    rng = random.Random(3)
    base = ["", "a", "ab", "aten::to", "aten::tp", "x" * 15, "x" * 16, "x" * 17, "x" * 15 + "y", "y" * 16,
            "cudaLaunchKernel", "cudaLaunchKernelX", "void kernel<float>(int)" * 3, "void kernel<float>(int)" * 3 + "!"]
    names = [rng.choice(base) for _ in range(3000)]
    pids = [rng.choice(["1", "12345", '"p"', "123456789012345678"]) for _ in names]
    events = [f'{{"ph": "X", "name": {json.dumps(n)}, "pid": {p}, "tid": 7, "ts": {i}, "dur": 1}}'
              for i, (n, p) in enumerate(zip(names, pids))]
    data = ("[" + ",\n".join(events) + "]").encode()
    scanner = R.RowScanner()
    result = scanner.scan(data, len(data), 1)
    assert result.status == R.END_OF_ARRAY and len(result.rows) == len(names)
    texts = [scanner.strings[i].decode() for i in result.rows[:, R.NAME]]
    assert texts == names
    first_seen = list(dict.fromkeys(["X", *names]))  # ph comes before name in each event
    assert [s.decode() for s in scanner.strings] == first_seen
    tracks = [scanner.tracks[i] for i in result.rows[:, R.TRACK]]
    assert tracks == [p.encode() + b"\0" + b"7" for p in pids]
