"""The second read of a two-pass annotate, without parsing: args go in at known byte offsets.

The scan records where each GPU op is in the decompressed input (``EventPlaces``); when
every event to patch is one of those, the copy is a plain byte stream with insertions
(an args object's closing brace) or, for an event whose args the scanner could not
place, a replacement of the event's bytes. No JSON is read, so this runs at the speed
of (de)compression.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...util import progress
from ...util.search import searchsorted
from ..read.codec import iter_decompressed
from ..read.reader import TraceReader, parse_event
from .jsontext import Block
from .output import AtomicOutput
from .patch import BodyRuns, ExtraArgs, with_members
from .writer import EventSink


@dataclass
class EventPlaces:
    """Events by ordinal (sorted): absolute start offset, byte length, where their args
    object takes new members relative to the start (-1 where not known), and whether it is empty."""

    ordinals: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    args_at: np.ndarray
    args_empty: np.ndarray

    def rows_of(self, ordinals: np.ndarray) -> np.ndarray | None:
        """The row of each of ``ordinals`` (sorted), or None where one has no known place."""
        if len(ordinals) == len(self.ordinals) and np.array_equal(ordinals, self.ordinals):
            rows = np.arange(len(ordinals))  # args on every GPU op: no search
        elif not len(self.ordinals):
            return None if len(ordinals) else np.zeros(0, np.intp)
        else:  # one search: where each would be, then whether it is there
            rows = np.minimum(searchsorted(self.ordinals, ordinals), len(self.ordinals) - 1)
            if not bool((self.ordinals[rows] == ordinals).all()):
                return None
        return rows if bool((self.offsets[rows] >= 0).all()) else None


def copy_placed(reader: TraceReader, out: str, places: EventPlaces, targets: np.ndarray, extra_args: ExtraArgs,
                appended: Iterable[Block]) -> int:
    """Copy the trace ``reader`` has read (its head and tail are known) to ``out``, with
    ``extra_args`` merged into args (on the rows ``targets`` of ``places``: ``rows_of``)
    and ``appended`` after the last event."""
    with AtomicOutput(out, inputs=(reader.path,)) as sink:
        events = EventSink(sink)
        events.head(reader.head)
        chunks = iter_decompressed(reader.path, on_read=progress.reader_hook(reader.path))
        body = _events_region(chunks, len(reader.head), reader.events_end)
        for data in _patched(body, len(reader.head), places, targets, extra_args):
            sink.write(data)
        events.ended_events(reader.event_count > 0, reader.trailing_comma)
        return events.finish(appended, reader.tail)


def _events_region(chunks: Iterator[bytes], start: int, stop: int) -> Iterator[bytes]:
    """The bytes in ``[start, stop)`` of the stream, in chunks."""
    pos = 0
    for chunk in chunks:
        lo, hi = max(start - pos, 0), min(stop - pos, len(chunk))
        if lo < hi:
            yield chunk[lo:hi] if (lo, hi) != (0, len(chunk)) else chunk
        pos += len(chunk)
        if pos >= stop:
            return


def _patched(body: Iterator[bytes], base: int, places: EventPlaces, targets: np.ndarray,
             extra_args: ExtraArgs) -> Iterator[bytes | memoryview]:
    """``body`` (starting at absolute offset ``base``) with the targets' args added.

    A target that runs past the end of a chunk waits, with what follows it, for the next
    chunk; only the bytes that complete it are copied to join it (copying whole chunks
    cost more than the edits). The rest of a chunk goes out as a view or with its edits.
    """
    starts = places.offsets[targets]
    ends = starts + places.lengths[targets]
    bodies = BodyRuns(extra_args, places.ordinals[targets])
    edit = partial(_apply, places=places, targets=targets, bodies=bodies, keys=extra_args.key_texts)
    done = 0  # targets handled
    held = b""  # from the start of target ``done``, which ends in a later chunk
    for chunk in body:
        data = memoryview(chunk)
        if held:
            need = int(ends[done]) - base - len(held)
            if need > len(data):
                held += chunk
                continue
            yield edit(held + data[:need], base, done, done + 1)
            base, done, data = base + len(held) + need, done + 1, data[need:]
        complete = int(np.searchsorted(ends, base + len(data), side="right"))
        cut = len(data) if complete == len(targets) else min(len(data), int(starts[complete]) - base)
        yield edit(data[:cut], base, done, complete) if complete > done else data[:cut]
        held, base, done = bytes(data[cut:]), base + cut, complete
    if held:
        yield held


def _apply(data: bytes | memoryview, base: int, lo: int, hi: int, places: EventPlaces, targets: np.ndarray,
           bodies: BodyRuns, keys: list[bytes]) -> bytes:
    """``data`` with args added to the targets ``lo`` to ``hi``, all inside it."""
    at = targets[lo:hi]
    starts = places.offsets[at] - base
    ends = starts + places.lengths[at]
    inserts = np.where(places.args_at[at] >= 0, starts + places.args_at[at], -1)
    return with_members(data, bodies.texts(lo, hi), keys, starts, ends, inserts, places.args_empty[at] != 0,
                        lambda i: parse_event(bytes(data[starts[i]:ends[i]])))
