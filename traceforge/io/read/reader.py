"""Streaming reader: a trace's events in batches, each with its exact raw bytes.

Every byte of the input lands in exactly one of ``head`` (up to the first event),
a batch's ``raw`` (events and the separators after them) or ``tail`` (after the last
event), so concatenating them gives the input back byte for byte.

Fast path: the C scanner (``rows.RowScanner``) validates a multi-MB run of events and
gives each a row (byte span and the fields the scan keys on) without building Python
objects; events are parsed into dicts only when a caller asks for them. Where the
scanner stops (invalid JSON, an event that is not an object, a trailing comma) the run
is walked one event at a time, ending with the stdlib decoder, which either reads the
event or names the byte where the JSON breaks.

Exact time: fractional ``ts``/``dur`` values are handed over as their text (str), never
as float; integers stay int.
"""

from __future__ import annotations

import gc
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import orjson

from ... import _native
from ...errors import TraceFormatError
from ...util import progress
from ..write.jsontext import json_int
from . import rows as R
from .codec import BLOCK, iter_decompressed, read_once
from .limits import WS_RUN_KEPT, ReadLimits, read_limits

BATCH_BYTES = 2 << 20
MAX_BATCH_EVENTS = 1 << 16  # events a scanned batch holds at about most (their rows: NFIELDS int64 each)
FIRST_SCAN_BYTES = 256 << 10  # the first scan's bytes, before the events' density is known
HEADROOM = 64 << 10  # room before each decompressed chunk for the partial event left from the last
WS = b" \t\r\n"
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark: refused at the start by every command, as Perfetto refuses it
BOM_REFUSED = ("starts with a UTF-8 byte order mark (EF BB BF), which Perfetto refuses (\"Unknown trace type\"): "
               "remove those 3 bytes (tail -c +4 FILE > NEW)")

_CANDIDATE_END = re.compile(rb"\}(?=[ \t\r\n]*[,\]])")
# A number with a fraction or an exponent, as RFC 8259 writes it (no leading zero, digits on
# both sides of the point): what is not, such as 012.5, 1. or 1.e5, is left to fail as JSON.
_FRACTIONAL_TIME = re.compile(
    rb'("(?:ts|dur)"[ \t\r\n]*:[ \t\r\n]*)(-?(?:0|[1-9]\d*)(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+))(?![\d.eE+-])'
)
_NOT_WS = re.compile(rb"[^ \t\r\n]")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DECODER = json.JSONDecoder(parse_int=json_int)


def check_start(path: str) -> None:
    """Refuse now what every command refuses at a trace's start (not a JSON trace, a byte order
    mark, input that does not decompress, the top-level keys before ``traceEvents`` and the
    first batch of events, with the reading limits in force), for a command that does not read
    the trace itself (``open``). Stdin and FIFOs are left alone: they are read once, by whoever
    reads them."""
    if read_once(path):
        return
    batches = TraceReader(path, on_read=lambda n: None).batches()
    try:
        next(batches, None)
    finally:
        batches.close()


def quote_times(text: bytes) -> bytes:
    """Turn fractional ``"ts"``/``"dur"`` numbers into strings so a parser keeps their text."""
    return _FRACTIONAL_TIME.sub(rb'\1"\2"', text)


def ends_with_comma(data: bytes) -> bool:
    """Whether ``data``'s last non-blank byte is a comma (without copying ``data``)."""
    i = len(data)
    while i and data[i - 1] in WS:
        i -= 1
    return data[i - 1:i] == b","


def parse_event(raw: bytes) -> dict:
    """One event's dict from its (valid) bytes, fractional times as text."""
    return loads(quote_times(raw))


def loads(text: bytes | bytearray | memoryview) -> object:
    """The value of valid JSON ``text``: orjson's, else (invalid UTF-8 or a lone surrogate such
    as ``"\\ud800"`` in a string, which orjson refuses) the stdlib's, with the bytes that are
    not UTF-8 as lone surrogates (``surrogateescape``, as everywhere traceforge reads text)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _STRICT_DECODER.decode(bytes(text).decode("utf-8", "surrogateescape"))


class EventBatch:
    """Consecutive events, ordinals ``first .. first+count-1``, with their bytes ``raw``.

    ``rows`` (the scanner's) and ``spans`` are there from the start for scanned runs;
    ``events`` (dicts) is parsed on first use. A batch walked by the exact decoder has
    ``events`` and ``spans``, and computes ``rows`` on demand. The bytes are
    ``data[lo:hi]`` of the reader's buffer: ``view`` shares them, ``raw`` copies them once.
    """

    def __init__(self, first: int, data: bytes | bytearray, lo: int, hi: int, offset: int, *, rows: np.ndarray | None = None,
                 events: list | None = None, spans: np.ndarray | None = None,
                 scanner: R.RowScanner | None = None):
        self.first = first
        self._data, self._lo, self._hi = data, lo, hi
        self._raw: bytes | None = data if type(data) is bytes and (lo, hi) == (0, len(data)) else None
        self.offset = offset  # decompressed byte offset of raw[0]
        self._rows = rows
        self._raw_rows = rows is not None
        self._events = events
        self._spans = spans
        self._scanner = scanner
        self.count = len(rows) if rows is not None else len(events or ())

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = bytes(memoryview(self._data)[self._lo:self._hi])
        return self._raw

    @property
    def view(self) -> memoryview | bytes:
        """The batch's bytes without a copy (for writing them out as they are)."""
        return self._raw if self._raw is not None else memoryview(self._data)[self._lo:self._hi]

    @property
    def events(self) -> list:
        if self._events is None:
            self._events = loads(b"[" + quote_times(self.raw.rstrip(WS).rstrip(b",")) + b"]")
        return self._events

    def event(self, i: int) -> dict:
        """The ``i``-th event of the batch as a dict (without parsing the others)."""
        if self._events is not None:
            return self._events[i]
        a, b = self.spans[i]
        return parse_event(self._data[self._lo + a:self._lo + b])

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            self._rows = self._scanner.rows_of(self._events)
        return self._rows

    @property
    def raw_rows(self) -> np.ndarray | None:
        """The scanner's rows when their offsets refer to ``raw`` (not re-serialised events)."""
        return self._rows if self._rows is not None and self._raw_rows else None

    @property
    def spans(self) -> np.ndarray:
        """(count, 2): each event's [start, end) in ``raw``."""
        if self._spans is None:
            self._spans = self._rows[:, R.START:R.END + 1]
        return self._spans


@dataclass
class _Buffer:
    chunks: Iterator[bytes]  # each with ``headroom`` spare bytes in front (``iter_decompressed``)
    headroom: int = 0
    data: bytes | bytearray = b""
    base: int = 0  # absolute offset of data[0]
    eof: bool = False
    start: int = 0  # data[:start] is consumed (dropped at the next fill: one copy, not two)

    @property
    def available(self) -> int:
        return len(self.data) - self.start

    def fill(self) -> bool:
        """Append the next chunk; False at end of input. Held bytes keep their positions."""
        if self.eof:
            return False
        for chunk in self.chunks:
            if len(chunk) > self.headroom:
                self._join([chunk])
                return True
        self.eof = True
        return False

    def fill_to(self, n: int) -> None:
        """Append chunks until ``n`` bytes are available (or the input ends). One chunk goes
        behind the held bytes in its headroom when they fit (``start`` moves; no copy of the
        chunk); else all are joined in one copy, not one per chunk."""
        chunks = []
        have = self.available
        while have < n and not self.eof:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.eof = True
            elif len(chunk) > self.headroom:
                chunks.append(chunk)
                have += len(chunk) - self.headroom
        if len(chunks) == 1 and self.available <= self.headroom:
            block, at = chunks[0], self.headroom - self.available
            block[at:self.headroom] = memoryview(self.data)[self.start:]
            self.data, self.base, self.start = block, self.base + self.start - at, at
        elif chunks:
            self._join(chunks)

    def _join(self, chunks: list[bytes]) -> None:
        """The unconsumed bytes and ``chunks``, in one copy."""
        self.data = b"".join([memoryview(self.data)[self.start:], *(memoryview(c)[self.headroom:] for c in chunks)])
        self.base += self.start
        self.start = 0

    def grow_to(self, n: int) -> None:
        """Like ``fill_to``, for one long event: the unconsumed bytes and the chunks go into
        one buffer made up front (with a block of slack: pages never written cost nothing),
        so the peak is the old bytes and the new buffer, not also the chunks' join or a
        growing buffer's copies."""
        old = memoryview(self.data)[self.start:]
        data = _native.splice.uninitialized(max(n, len(old)) + BLOCK)
        data[:len(old)] = old
        have = len(old)
        del old
        self.data, self.base, self.start = b"", self.base + self.start, 0
        while have < n and not self.eof:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.eof = True
            elif len(chunk) > self.headroom:
                size = len(chunk) - self.headroom
                data[have:have + size] = memoryview(chunk)[self.headroom:]
                have += size
            del chunk
        del data[have:]
        self.data = data

    def consume(self, n: int) -> None:
        self.start += n

    def ws_run(self, skip: int, bound: int) -> int:
        """Length of the whitespace from ``skip`` bytes after ``start``, reading on until it
        ends, passes ``bound`` or the input ends (so at most ``bound`` + a chunk of it is held)."""
        while True:
            at = self.start + skip
            m = _NOT_WS.search(self.data, at)
            end = m.start() if m is not None else len(self.data)
            if m is not None or end - at > bound or not self.fill():
                return end - at

    def drop_ws(self) -> None:
        """Consume the whitespace at ``start`` as it streams in: never more than a chunk of it
        is held, however long the run (offsets stay absolute through ``base``)."""
        while True:
            m = _NOT_WS.search(self.data, self.start)
            if m is not None:
                self.start = m.start()
                return
            self.start = len(self.data)
            if not self.fill():
                return

    def compact(self) -> None:
        """Make data[0] the first unconsumed byte (what the byte-level walkers expect)."""
        if self.start:
            self.drop(0)

    def drop(self, pos: int) -> None:
        """Drop ``pos`` bytes after the consumed ones."""
        pos += self.start
        self.data = bytes(memoryview(self.data)[pos:])
        self.base += pos
        self.start = 0


@dataclass
class TraceReader:
    """Reads one trace. Iterate ``batches()`` once; then ``head``, ``tail`` and ``metadata``."""

    path: str
    display_name: str | None = None
    batch_bytes: int = BATCH_BYTES
    head: bytes = b""
    tail: bytes = b""
    layout: str = ""  # "object" or "array"
    event_count: int = 0
    events_end: int = 0  # decompressed offset where the tail starts
    trailing_comma: bool = False  # the last event is followed by a comma (before "]")
    on_read: Callable[[int], None] | None = None  # compressed bytes read so far; default: the progress bar
    pass_name: str | None = None  # the progress bar's name for this read (default: scan, then write)
    scanner: R.RowScanner = field(default_factory=R.RowScanner, repr=False)
    limits: ReadLimits = field(default_factory=read_limits)  # those in force where the reader is made (not a thread's)
    _scan_bytes: int = field(default=FIRST_SCAN_BYTES, init=False, repr=False)  # the next scan's most bytes (from the last)

    @property
    def name(self) -> str:
        return self.display_name or self.path

    def _error(self, what: str, offset: int | None = None, event: int | None = None) -> TraceFormatError:
        return TraceFormatError(self.name, what, offset=offset, event=event)

    # -- top level ----------------------------------------------------------------------

    def batches(self) -> Iterator[EventBatch]:
        """Yield event batches (each knows its events' byte spans)."""
        on_read = self.on_read if self.on_read is not None else progress.reader_hook(self.path, self.pass_name)
        buf = _Buffer(iter_decompressed(self.path, on_read=on_read, headroom=HEADROOM, limits=self.limits), HEADROOM)
        pos = self._read_head(buf)
        buf.drop(pos)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # millions of small dicts: the cyclic collector would dominate
        try:
            yield from self._read_events(buf)
        finally:
            if gc_was_enabled:
                gc.enable()
        self._read_tail(buf)

    def metadata(self) -> dict:
        """Top-level keys other than ``traceEvents``, in file order (after ``batches()``)."""
        if self.layout != "object":
            return {}
        text = self.head + self.tail
        try:
            meta = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:
                meta = json.loads(text.decode("utf-8", "surrogateescape"), parse_int=json_int)
            except json.JSONDecodeError as e:
                raise self._error(f"invalid JSON around the top-level keys: {e.msg}") from None
            except RecursionError:
                raise self._error("a top-level value nested too deep to parse") from None
        meta.pop("traceEvents", None)
        return meta

    def _read_head(self, buf: _Buffer) -> int:
        pos = self._skip_head_ws(buf, 0)
        if buf.data.startswith(BOM):
            raise self._error(BOM_REFUSED, offset=0)
        if pos >= len(buf.data):
            raise self._error("empty file, not a JSON trace", offset=0)
        first = buf.data[pos:pos + 1]
        if first == b"[":
            self.layout = "array"
        elif first == b"{":
            self.layout = "object"
            pos = self._find_trace_events(buf, pos + 1)
        else:
            raise self._error(
                f"not a JSON trace: expected '{{' or '[' but found {first!r}", offset=buf.base + pos
            )
        pos += 1
        run = buf.ws_run(pos, WS_RUN_KEPT)  # nothing is consumed yet: ``pos`` counts from data[0]
        if run > WS_RUN_KEPT:  # a long run before the first event: dropped as it streams, not held
            self.head = bytes(memoryview(buf.data)[:pos])
            buf.consume(pos)
            buf.drop_ws()
            return 0
        pos += run
        self.head = buf.data[:pos]
        return pos

    def _find_trace_events(self, buf: _Buffer, pos: int) -> int:
        """Walk the top-level keys up to ``"traceEvents": [``; return the ``[`` position."""
        while True:
            pos = self._skip_head_ws(buf, pos)
            m = self._match_string(buf, pos)
            if m is None:
                if pos < len(buf.data) and buf.data[pos:pos + 1] == b"}":
                    raise self._error("no traceEvents key in the top-level object", offset=buf.base + pos)
                raise self._error("invalid JSON in the top-level object: expected a key", offset=buf.base + pos)
            key = m.group()[1:-1]
            pos = self._skip_head_ws(buf, m.end())
            if buf.data[pos:pos + 1] != b":":
                raise self._error("invalid JSON in the top-level object: expected ':'", offset=buf.base + pos)
            pos = self._skip_head_ws(buf, pos + 1)
            if key == b"traceEvents":
                if buf.data[pos:pos + 1] != b"[":
                    raise self._error("traceEvents is not a list", offset=buf.base + pos)
                return pos
            pos = self._skip_value(buf, pos)
            pos = self._skip_head_ws(buf, pos)
            sep = buf.data[pos:pos + 1]
            if sep == b"}":
                raise self._error("no traceEvents key in the top-level object", offset=buf.base + pos)
            if sep != b",":
                raise self._error("invalid JSON in the top-level object: expected ',' or '}'", offset=buf.base + pos)
            pos += 1

    def _read_tail(self, buf: _Buffer) -> None:
        buf.compact()
        self.events_end = buf.base
        while buf.fill():
            self._check_metadata_size(len(buf.data), buf.base)
        self.tail = buf.data
        self._check_metadata_size(len(self.tail), buf.base)
        rest = self.tail.lstrip(WS)
        if self.layout == "array" and rest.rstrip(WS) != b"]":
            raise self._error("unexpected data after the event array", offset=buf.base + len(self.tail) - len(rest) + 1)
        if self.layout == "object":
            self.metadata()  # validates the keys after traceEvents

    def _check_metadata_size(self, size: int, offset: int) -> None:
        """Top-level metadata (what is not ``traceEvents``) is held whole: refused past its limit."""
        limit = self.limits.max_metadata_bytes
        if size > limit:
            raise self._error(f"top-level metadata longer than {limit >> 20} MB (--max-metadata-mb {limit >> 20}); "
                              "raise --max-metadata-mb to read it", offset=offset)

    # -- byte helpers -----------------------------------------------------------------

    def _skip_ws(self, buf: _Buffer, pos: int, until: int | None = None) -> int:
        """The first byte from ``pos`` on that is not blank (``pos`` counts from data[0], nothing
        consumed), reading on as needed; once past ``until`` it reads no further (the position
        returned is then past ``until``, maybe still in the run)."""
        return pos + buf.ws_run(pos - buf.start, sys.maxsize if until is None else until - pos)

    def _skip_head_ws(self, buf: _Buffer, pos: int) -> int:
        """``_skip_ws`` before ``traceEvents``' first event: what is held there is top-level metadata,
        refused past its limit (never held whole)."""
        pos = self._skip_ws(buf, pos, until=self.limits.max_metadata_bytes)
        self._check_metadata_size(pos, buf.base)
        return pos

    def _match_string(self, buf: _Buffer, pos: int):
        while True:
            if buf.data[pos:pos + 1] != b'"':
                if pos >= len(buf.data) and buf.fill():
                    continue
                return None
            m = _STRING.match(buf.data, pos)
            if m is not None or not buf.fill():
                return m

    def _skip_value(self, buf: _Buffer, pos: int) -> int:
        """End of the JSON value at ``pos`` (a top-level metadata value, small)."""
        while True:
            text = buf.data[pos:].decode("utf-8", "surrogateescape")
            try:
                _, end = _DECODER.raw_decode(text)
            except RecursionError:
                raise self._error("a top-level value nested too deep to parse",
                                  offset=buf.base + pos) from None
            except json.JSONDecodeError as e:
                if len(buf.data) - pos <= self.limits.max_metadata_bytes and buf.fill():
                    continue
                self._check_metadata_size(len(buf.data) - pos, buf.base + pos)
                raise self._error(f"invalid JSON in the top-level object: {e.msg}",
                                  offset=buf.base + pos + _byte_len(text[:e.pos])) from None
            self._check_metadata_size(_byte_len(text[:end]), buf.base + pos)
            return pos + _byte_len(text[:end])

    # -- events -----------------------------------------------------------------------

    def _read_events(self, buf: _Buffer) -> Iterator[EventBatch]:
        ordinal = 0
        if buf.data[:1] == b"]":
            return
        while True:
            buf.fill_to(self.batch_bytes)
            batch, ended = self._scanned_batch(buf, ordinal)
            if batch is None:
                if self.trailing_comma and self._at_array_end(buf):
                    return  # a comma, a read's end, then "]": the comma ended the last batch
                buf.compact()
                batch, ended = self._precise_batch(buf, ordinal)
            if batch.count:
                ordinal += batch.count
                self.event_count = ordinal
                self.trailing_comma = ends_with_comma(batch.view)
                yield batch
            if ended:
                return

    def _scanned_batch(self, buf: _Buffer, ordinal: int) -> tuple[EventBatch | None, bool]:
        """The events the C scanner takes from the buffer; None where it takes none."""
        while True:
            # All that is in hand: what is left for the next fill is at most one partial event.
            result = self.scanner.scan(buf.data, min(max(self.batch_bytes, buf.available), self._scan_bytes), buf.start)
            if result.status == R.INCOMPLETE and not len(result.rows):
                if result.message is None:  # an event, then only blanks: its separator is still to come
                    ws = _trailing_ws(buf.data, buf.start)
                    if WS_RUN_KEPT < ws < buf.available:
                        return self._event_before_ws(buf, ordinal, ws)
                if self._grow(buf):
                    continue  # an event (or a run of whitespace) longer than the buffer
            break
        if not len(result.rows):
            return None, False
        # Rows are NFIELDS int64 per event: tiny events ({}) would make a batch's rows many times
        # its bytes. The next scan takes about the bytes that held MAX_BATCH_EVENTS events here.
        self._scan_bytes = max(FIRST_SCAN_BYTES, result.stop * MAX_BATCH_EVENTS // len(result.rows))
        lo = buf.start
        if result.stop > self.limits.max_event_bytes:  # only where the limit is below a batch's size
            self._check_event_sizes(result.rows[:, R.START:R.END + 1], buf.base + lo, ordinal)
        batch = EventBatch(ordinal, buf.data, lo, lo + result.stop, buf.base + lo, rows=result.rows, scanner=self.scanner)
        buf.consume(result.stop)
        return batch, result.status == R.END_OF_ARRAY

    def _event_before_ws(self, buf: _Buffer, ordinal: int, ws: int) -> tuple[EventBatch, bool]:
        """The event in hand is followed by ``ws`` blanks (more than ``WS_RUN_KEPT``) and then,
        still to come, its separator: the batch is that event and its separator, the run is
        dropped as it streams. Offsets stay absolute; the batch's bytes lack the run."""
        offset = buf.base + buf.start
        event = bytes(memoryview(buf.data)[buf.start:len(buf.data) - ws])
        buf.consume(buf.available)
        sep, ended = self._separator_after_ws(buf, ordinal)
        text = event + (sep or b"]")  # the scanner takes an event followed by its separator or "]"
        result = self.scanner.scan(text, len(text), 0)
        return EventBatch(ordinal, text, 0, len(event) + len(sep), offset, rows=result.rows, scanner=self.scanner), ended

    def _separator_after_ws(self, buf: _Buffer, ordinal: int) -> tuple[bytes, bool]:
        """After event ``ordinal`` and a run of blanks too long to hold: drop the run as it streams,
        then take its separator (a comma and the blanks after it, those dropped too when longer
        than ``WS_RUN_KEPT``), or nothing before the array's "]". True when the array ends there."""
        buf.drop_ws()
        sep = buf.data[buf.start:buf.start + 1]
        if sep == b"]":
            return b"", True
        if sep != b",":
            if not sep:
                raise self._error("unexpected end of input inside traceEvents (truncated file?)",
                                  offset=buf.base + buf.start, event=ordinal + 1)
            raise self._error(f"expected ',' or ']' after an event, found {sep!r}", offset=buf.base + buf.start,
                              event=ordinal)
        run = buf.ws_run(1, WS_RUN_KEPT)
        if run > WS_RUN_KEPT:
            buf.consume(1)
            buf.drop_ws()
            taken = b","
        else:
            taken = bytes(memoryview(buf.data)[buf.start:buf.start + 1 + run])
            buf.consume(1 + run)
        return taken, self._at_array_end(buf)

    @staticmethod
    def _at_array_end(buf: _Buffer) -> bool:
        """Whether the first byte in hand that is not blank is the array's "]"."""
        m = _NOT_WS.search(buf.data, buf.start)
        return m is not None and buf.data[m.start()] == 0x5D

    def _grow(self, buf: _Buffer) -> bool:
        """More input behind an incomplete event; False at the end of the input. A leading run
        of whitespace longer than ``WS_RUN_KEPT`` is dropped, not held; an event is refused at
        its first byte once ``max_event_bytes`` of it are in hand. The buffer (about) doubles, so an
        event of n bytes is scanned and copied O(n) times in all, not O(n^2 / block)."""
        m = _NOT_WS.search(buf.data, buf.start)
        run = (m.start() if m else len(buf.data)) - buf.start
        if run > WS_RUN_KEPT:
            buf.consume(run)
        limit = self.limits.max_event_bytes
        if buf.available > limit:
            raise self._error(f"an event longer than {limit >> 20} MB (--max-event-mb {limit >> 20}); raise "
                              "--max-event-mb to read it", offset=buf.base + buf.start, event=self.event_count)
        if buf.eof:
            return False
        if buf.available > self.batch_bytes:
            target = limit + 1  # halvings of it, so the last step lands on it (a small last step would cost 2x)
            while target // 2 > buf.available:
                target //= 2
            buf.grow_to(target)
        else:
            buf.fill_to(buf.available + 1)
        return True

    def _check_event_sizes(self, spans: np.ndarray, base: int, ordinal: int) -> None:
        """Refuse the first event longer than ``max_event_bytes`` among ``spans`` (relative to ``base``)."""
        limit = self.limits.max_event_bytes
        over = np.flatnonzero(spans[:, 1] - spans[:, 0] > limit)
        if len(over):
            i = int(over[0])
            raise self._error(f"an event longer than {limit >> 20} MB (--max-event-mb {limit >> 20}); raise "
                              "--max-event-mb to read it", offset=base + int(spans[i, 0]), event=ordinal + i)

    def _precise_batch(self, buf: _Buffer, ordinal: int) -> tuple[EventBatch, bool]:
        """Walk events one by one up to about ``batch_bytes``; True when the array ended."""
        events: list = []
        spans: list[tuple[int, int]] = []
        pos = self._skip_ws(buf, 0)
        while True:
            event, end = self._one_event(buf, pos, ordinal + len(events))
            events.append(event)
            spans.append((pos, end))
            pos = self._skip_ws(buf, end, until=end + WS_RUN_KEPT)
            if pos - end > WS_RUN_KEPT:  # a long run before the separator: dropped as it streams
                raw = bytes(memoryview(buf.data)[:end])
                offset = buf.base
                buf.consume(end)
                sep, ended = self._separator_after_ws(buf, ordinal + len(events) - 1)
                spans = np.array(spans, np.int64).reshape(-1, 2)
                self._check_event_sizes(spans, offset, ordinal)
                buf.compact()
                return EventBatch(ordinal, raw + sep, 0, len(raw) + len(sep), offset, events=events, spans=spans,
                                  scanner=self.scanner), ended
            sep = buf.data[pos:pos + 1]
            if sep == b",":
                at = pos + 1
                pos = self._skip_ws(buf, at, until=at + WS_RUN_KEPT)
                if pos - at > WS_RUN_KEPT:  # a long run after the comma: the next round drops it
                    return self._take(buf, ordinal, events, spans, pos), False
                if buf.data[pos:pos + 1] == b"]":  # a trailing comma (Perfetto accepts it): kept in raw
                    return self._take(buf, ordinal, events, spans, pos), True
            elif sep == b"]":
                return self._take(buf, ordinal, events, spans, end), True
            elif not sep:
                raise self._error("unexpected end of input inside traceEvents (truncated file?)",
                                  offset=buf.base + pos, event=ordinal + len(events))
            else:
                raise self._error(f"expected ',' or ']' after an event, found {sep!r}",
                                  offset=buf.base + pos, event=ordinal + len(events) - 1)
            if pos >= self.batch_bytes:
                return self._take(buf, ordinal, events, spans, pos), False

    def _take(self, buf: _Buffer, ordinal: int, events: list, spans: list, end: int) -> EventBatch:
        raw = buf.data[:end]
        spans = np.array(spans, np.int64).reshape(-1, 2)
        self._check_event_sizes(spans, buf.base, ordinal)
        batch = EventBatch(ordinal, raw, 0, len(raw), buf.base, events=events, spans=spans, scanner=self.scanner)
        buf.drop(end)
        return batch

    def _one_event(self, buf: _Buffer, pos: int, ordinal: int) -> tuple[dict, int]:
        """Parse the event starting at ``pos``; return it and the offset just after it."""
        if buf.data[pos:pos + 1] != b"{":
            while pos >= len(buf.data) and buf.fill():
                pass
            if buf.data[pos:pos + 1] != b"{":
                what = "not an object" if buf.data[pos:pos + 1] else "missing (truncated file?)"
                raise self._error(f"event is {what}", offset=buf.base + pos, event=ordinal)
        tries = 0
        for m in _CANDIDATE_END.finditer(buf.data, pos):
            end = m.end()
            try:
                event = orjson.loads(quote_times(buf.data[pos:end]))
            except orjson.JSONDecodeError:
                tries += 1
                if tries == 4:
                    break
                continue
            if type(event) is dict:
                return event, end
            break
        return self._decode_event(buf, pos, ordinal)

    def _decode_event(self, buf: _Buffer, pos: int, ordinal: int) -> tuple[dict, int]:
        """Slow but exact: the stdlib decoder finds the event's end or the error's place."""
        window = 1 << 16
        while True:
            chunk = buf.data[pos:pos + window]
            text = chunk.decode("utf-8", "surrogateescape")
            try:
                _, end_chars = _STRICT_DECODER.raw_decode(text)
            except RecursionError:
                raise self._error("an event nested too deep to parse (objects and arrays in each other)",
                                  offset=buf.base + pos, event=ordinal) from None
            except (json.JSONDecodeError, ValueError) as e:
                err_pos = getattr(e, "pos", 0)
                msg = getattr(e, "msg", str(e))
                cut_short = _ends_in_partial_value(text, err_pos, msg)
                if cut_short and window < self.limits.max_event_bytes and (len(chunk) == window or buf.fill()):
                    window *= 4
                    continue
                where = buf.base + pos + _byte_len(text[:err_pos])
                if cut_short:
                    raise self._error(f"unexpected end of input inside an event (truncated file?): {msg}",
                                      offset=where, event=ordinal) from None
                raise self._error(f"invalid JSON: {msg}", offset=where, event=ordinal) from None
            end = pos + _byte_len(text[:end_chars])
            event = _STRICT_DECODER.decode(quote_times(buf.data[pos:end]).decode("utf-8", "surrogateescape"))
            if type(event) is not dict:
                raise self._error("event is not an object", offset=buf.base + pos, event=ordinal)
            return event, end


_PARTIAL_VALUE = re.compile(r"[-+0-9.eEtrufalsn]*")


def _ends_in_partial_value(text: str, err_pos: int, msg: str) -> bool:
    """Whether a decode error is the input running out rather than bad JSON."""
    rest = text[err_pos:].strip()
    return not rest or "Unterminated string" in msg or bool(_PARTIAL_VALUE.fullmatch(rest))


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON (Perfetto refuses the whole trace)")


_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=json_int)


def _trailing_ws(data: bytes | bytearray, lo: int) -> int:
    """Length of the run of blanks that ends ``data`` (not reaching before ``lo``), read from the end."""
    end = i = len(data)
    step = 1 << 16
    with memoryview(data) as view:
        while i > lo:
            a = max(lo, i - step)
            kept = len(bytes(view[a:i]).rstrip(WS))
            if kept:
                return end - a - kept
            i, step = a, min(step * 2, 4 << 20)
    return end - lo


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))
