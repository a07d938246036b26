"""The copying writer: input bytes out unchanged, new events appended inside traceEvents."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..read.reader import EventBatch, TraceReader, ends_with_comma
from .jsontext import Block
from .output import AtomicOutput, Compressor


class EventSink:
    """Writes head, event bytes and appended events, keeping the commas between them right."""

    def __init__(self, sink: Compressor):
        self._sink = sink
        self._started = False
        self._wrote_event = False
        self._ends_with_comma = False

    def head(self, head: bytes) -> None:
        if not self._started:
            self._sink.write(head)
            self._started = True

    def events(self, data: bytes) -> None:
        """Whole events with their separators, as the input had them (or rewritten)."""
        if not data:
            return
        if self._wrote_event and not self._ends_with_comma:
            self._sink.write(b",")
        self._sink.write(data)
        self._wrote_event = True
        self._ends_with_comma = ends_with_comma(data)

    def ended_events(self, wrote: bool, ends_with_comma: bool) -> None:
        """The events were written directly to the sink: note how they ended."""
        self._started = True
        self._wrote_event, self._ends_with_comma = wrote, ends_with_comma

    def finish(self, appended: Iterable[Block], tail: bytes) -> int:
        """Append new events (in blocks), then the input's tail; return how many were appended."""
        count = 0
        for n, text in appended:
            if not n:
                continue
            first = count == 0 and (self._ends_with_comma or not self._wrote_event)
            self._sink.write(b"\n" if first else b",\n", text)  # not joined: that copies each block (MBs)
            count += n
        if count:
            self._wrote_event, self._ends_with_comma = True, False
        self._sink.write(tail)
        return count


def write_trace(
    reader: TraceReader,
    out: str,
    appended: Iterable[Block] = (),
    edit: Callable[[EventBatch], bytes] | None = None,
    edit_head: Callable[[bytes], bytes] | None = None,
    edit_tail: Callable[[bytes], bytes] | None = None,
) -> int:
    """Copy ``reader``'s trace to ``out`` (atomically); return the number of events appended.

    ``edit`` may rewrite a batch's bytes (it must return whole events with separators);
    everything else is copied byte for byte. ``appended`` events (blocks, see
    ``inject.event_blocks``) go after the last event.
    ``edit_head``/``edit_tail`` (pure functions) may rewrite the bytes before the first
    event and after the last one (the top-level keys), e.g. to change a key's value.
    """
    with AtomicOutput(out, inputs=(reader.path,)) as sink:
        events = EventSink(sink)
        for batch in reader.batches():
            events.head(edit_head(reader.head) if edit_head is not None else reader.head)
            events.events(edit(batch) if edit is not None else batch.view)
        events.head(edit_head(reader.head) if edit_head is not None else reader.head)  # no batch: empty traceEvents
        return events.finish(appended, edit_tail(reader.tail) if edit_tail is not None else reader.tail)
