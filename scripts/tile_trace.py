#!/usr/bin/env python3
"""Tile a Kineto trace in time to make a large benchmark trace.

Copy k of the trace's events is shifted by k * period µs, where the period is the events'
time span rounded up to whole µs plus a gap, and its ``args.correlation``,
``args.External id`` (``external id`` in 2021 traces) and flow ``id`` values are offset by
k * (largest such id + 1), so ids never collide. Metadata (``"ph": "M"``) events are
written once; the top-level keys around ``traceEvents`` are kept as they are. Numbers are
rewritten on their text, so fractional-µs timestamps such as ``1712195495519689.047`` stay
exact. The input (.json, .json.gz or .json.zst) is read into memory once; the output is
streamed, compressed by its suffix: gzip level 1 (.gz), zstd level 3 (.zst), else none.

``--cpu-only-copies K`` then adds K copies of the CPU ops alone (a host-side phase with no
GPU work, such as CPU preprocessing): a trace of the same GPU ops, launch calls and CPU ops
around them, and a larger host side, to tell what a tool's memory grows with.

    python scripts/tile_trace.py IN.json.gz -o OUT.json.gz --size 2GB
"""

from __future__ import annotations

import argparse
import gzip
import math
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Protocol

import zstandard

# A JSON string (escapes included) or a structural character; everything else is skipped.
TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:]')
NUMBER = re.compile(rb"\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)")
STRING = re.compile(rb'\s*"([^"\\]*)"')
EVENT_ID_KEYS = {b"id"}  # flow ids
CPU_OP_CATS = {b"cpu_op", b"operator", b"user_annotation", b"python_function"}  # either Kineto, lower-cased
ARGS_ID_KEYS = {b"correlation", b"External id", b"external id"}
SIZE_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}


class Writer(Protocol):
    def write(self, data: bytes, /) -> int: ...


@dataclass
class Slot:
    """A number inside an event's text that changes from copy to copy."""

    start: int
    end: int
    text: bytes  # as written in the input
    is_ts: bool
    value: int  # the number scaled to an integer: value * 10**-digits
    digits: int  # digits after the decimal point (0 for integers)


@dataclass
class Event:
    """Where one element of ``traceEvents`` lies in the document, and its rewritable numbers."""

    start: int
    end: int = 0
    ph: bytes = b""
    cat: bytes = b""
    dur: Decimal | None = None
    slots: list[Slot] = field(default_factory=list)

    @property
    def ts(self) -> Decimal | None:
        """The event's ``ts`` in µs, exactly."""
        for slot in self.slots:
            if slot.is_ts:
                return Decimal(slot.value).scaleb(-slot.digits)
        return None


@dataclass
class Template:
    """An event's text cut at its slots: ``pieces[0] slot[0] pieces[1] ... slot[n-1] pieces[n]``."""

    pieces: list[bytes]
    slots: list[Slot]

    @classmethod
    def of(cls, doc: bytes, event: Event) -> Template:
        bounds = [event.start] + [b for s in event.slots for b in (s.start, s.end)] + [event.end]
        return cls([doc[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True)], event.slots)

    def original(self) -> list[bytes]:
        """The event's text as in the input."""
        out = [self.pieces[0]]
        for slot, piece in zip(self.slots, self.pieces[1:], strict=True):
            out += (slot.text, piece)
        return out

    def render(self, ts_shift: int, id_shift: int) -> list[bytes]:
        """The event's text with ``ts`` moved by ``ts_shift`` µs and ids by ``id_shift``."""
        out = [self.pieces[0]]
        for slot, piece in zip(self.slots, self.pieces[1:], strict=True):
            shift = ts_shift * 10**slot.digits if slot.is_ts else id_shift
            out.append(number_text(slot.value + shift, slot.digits))
            out.append(piece)
        return out


def number_text(value: int, digits: int) -> bytes:
    """Render ``value * 10**-digits`` as plain decimal text with exactly ``digits`` decimals."""
    if digits == 0:
        return b"%d" % value
    text = b"%0*d" % (digits + 1, abs(value))
    return (b"-" if value < 0 else b"") + text[:-digits] + b"." + text[-digits:]


def parse_number(text: bytes) -> tuple[int, int]:
    """A JSON number's exact value as ``(scaled integer, digits after the point)``."""
    value = Decimal(text.decode())
    digits = max(0, -int(value.as_tuple().exponent))
    return int(value.scaleb(digits)), digits


def scan(doc: bytes) -> list[Event]:
    """Locate every element of ``traceEvents`` (or of a bare top-level array) and its slots.

    One pass over the document's strings and structural characters, so strings holding
    braces, and nested ``ts``/``id`` keys in args, are never mistaken for event fields.
    """
    stack: list[bytes | None] = []  # for each open container, the key it is the value of
    events_depth = 0  # depth of the events array once found
    events: list[Event] = []
    current: Event | None = None
    key: bytes | None = None
    last_string = (0, 0)
    for m in TOKEN.finditer(doc):
        char = doc[m.start()]
        if char == 0x22:  # '"'
            last_string = m.span()
        elif char == 0x3A:  # ':'
            key = doc[last_string[0] + 1 : last_string[1] - 1]
            if current is not None:
                read_field(doc, m.end(), key, len(stack) - events_depth, stack[-1], current)
        elif char in b"{[":
            stack.append(key)
            key = None
            depth = len(stack)
            if not events_depth and char == 0x5B and (depth == 1 or (depth == 2 and stack[-1] == b"traceEvents")):
                events_depth = depth
            elif events_depth and depth == events_depth + 1 and char == 0x7B:
                current = Event(m.start())
        else:
            if current is not None and len(stack) == events_depth + 1:
                current.end = m.end()
                events.append(current)
                current = None
            stack.pop()
    if not events_depth:
        raise ValueError("no traceEvents array found")
    return events


def read_field(doc: bytes, pos: int, key: bytes, depth: int, parent: bytes | None, event: Event) -> None:
    """Note the value after ``key:`` at ``pos`` if the event needs it (depth 1: event, 2: args)."""
    if depth == 1 and key in (b"ph", b"cat"):
        if m := STRING.match(doc, pos):
            setattr(event, key.decode(), m.group(1))
    elif depth == 1 and key == b"dur":
        if m := NUMBER.match(doc, pos):
            event.dur = Decimal(m.group(1).decode())
    elif depth == 1 and key in EVENT_ID_KEYS | {b"ts"} or depth == 2 and parent == b"args" and key in ARGS_ID_KEYS:
        m = NUMBER.match(doc, pos)
        if m is None:
            return
        value, digits = parse_number(m.group(1))
        is_ts = key == b"ts"
        if is_ts or digits == 0:  # ids that are not plain integers are left alone
            event.slots.append(Slot(m.start(1), m.end(1), m.group(1), is_ts, value, digits))


def read_trace(path: Path) -> bytes:
    """The whole decompressed document."""
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as gz:
            return gz.read()
    if path.suffix == ".zst":
        with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as zst:
            return zst.read()
    return path.read_bytes()


@contextmanager
def open_output(path: Path) -> Iterator[Writer]:
    """A binary writer compressing by suffix: gzip level 1, zstd level 3, or plain."""
    if path.suffix == ".gz":
        with gzip.open(path, "wb", compresslevel=1) as gz:
            yield gz
    elif path.suffix == ".zst":
        with path.open("wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as zst:
            yield zst
    else:
        with path.open("wb") as plain:
            yield plain


def parse_size(text: str) -> int:
    """A byte count such as ``2GB``, ``500MiB`` or ``123456``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2GB, 500MiB)")
    return int(float(m.group(1)) * SIZE_UNITS[m.group(2).upper()])


def tile(src: Path, dst: Path, size: int | None, copies: int | None, gap_us: int, cpu_only_copies: int = 0) -> None:
    """Write ``dst`` as ``copies`` time-shifted copies of ``src``'s events (or enough for ``size``),
    then ``cpu_only_copies`` of its CPU ops alone."""
    doc = read_trace(src)
    events = scan(doc)
    if not events:
        raise ValueError(f"{src}: traceEvents is empty")
    header, trailer = doc[: events[0].start], doc[events[-1].end :]
    separator = doc[events[0].end : events[1].start] if len(events) > 1 else b",\n"
    metadata = [e for e in events if e.ph == b"M"]
    timed = [e for e in events if e.ph != b"M"]

    starts = [ts for e in timed if (ts := e.ts) is not None]
    ends = [ts + max(e.dur or 0, 0) for e in timed if (ts := e.ts) is not None]
    period_us = math.ceil(max(ends) - min(starts)) + gap_us if starts else 0
    id_step = max((s.value for e in events for s in e.slots if not s.is_ts), default=-1) + 1

    per_copy = sum(e.end - e.start + len(separator) for e in timed)
    if copies is None:
        if size is None:
            raise ValueError("give either copies or size")
        fixed = len(header) + len(trailer) + sum(e.end - e.start + len(separator) for e in metadata)
        copies = max(1, round((size - fixed) / per_copy)) if per_copy else 1
    templates = [Template.of(doc, e) for e in events]
    is_metadata = [e.ph == b"M" for e in events]
    is_cpu_op = [e.ph == b"X" and e.cat.lower() in CPU_OP_CATS for e in events]
    del doc, events

    written = 0
    with open_output(dst) as out:
        for k in range(copies + cpu_only_copies):  # one copy at a time: memory stays bounded by the input's size
            parts = [header] if k == 0 else []
            for template, meta, cpu_op in zip(templates, is_metadata, is_cpu_op, strict=True):
                if (meta and k) or (k >= copies and not cpu_op):
                    continue
                parts.append(separator)
                parts.extend(template.render(k * period_us, k * id_step) if k else template.original())
            if k == 0:
                del parts[1]  # no separator before the first event
            chunk = b"".join(parts)
            out.write(chunk)
            written += len(chunk)
        out.write(trailer)
        written += len(trailer)
    print(
        f"wrote {dst}: {copies} copies, {cpu_only_copies} of the CPU ops alone (period {period_us} µs, "
        f"id step {id_step}), {written:,} bytes uncompressed, {dst.stat().st_size:,} bytes on disk"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path, help="trace to tile (.json, .json.gz or .json.zst)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="output; codec chosen by suffix")
    amount = parser.add_mutually_exclusive_group(required=True)
    amount.add_argument("--size", type=parse_size, help="approximate uncompressed output size, e.g. 2GB")
    amount.add_argument("--copies", type=int, help="number of copies of the events")
    parser.add_argument("--gap-us", type=int, default=1000, help="idle gap between copies in µs (default 1000)")
    parser.add_argument("--cpu-only-copies", type=int, default=0, metavar="K",
                        help="then K copies of the CPU ops alone (cat cpu_op, user_annotation, python_function)")
    args = parser.parse_args(argv)
    if args.copies is not None and args.copies < 1:
        parser.error("--copies must be at least 1")
    if args.cpu_only_copies < 0:
        parser.error("--cpu-only-copies must be at least 0")
    try:
        tile(args.input, args.output, args.size, args.copies, args.gap_us, args.cpu_only_copies)
    except ValueError as e:
        sys.exit(f"tile_trace: {e}")


if __name__ == "__main__":
    main()
