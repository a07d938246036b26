"""The copying writer: input bytes out unchanged, new events appended inside traceEvents."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .codec import AtomicOutput
from .reader import WS, EventBatch, TraceReader


def write_trace(
    reader: TraceReader,
    out: str,
    appended: Iterable[bytes] = (),
    edit: Callable[[EventBatch], bytes] | None = None,
) -> int:
    """Copy ``reader``'s trace to ``out`` (atomically); return the number of events appended.

    ``edit`` may rewrite a batch's bytes (it must return whole events with separators);
    everything else is copied byte for byte. ``appended`` events go after the last event.
    """
    with AtomicOutput(out, inputs=(reader.path,)) as sink:
        batches = reader.batches()
        first = next(batches, None)  # reading starts here: reader.head is known after it
        sink.write(reader.head)
        wrote_event = False
        ends_with_comma = False
        for batch in _chain(first, batches):
            data = edit(batch) if edit is not None else batch.raw
            if not data:
                continue
            if wrote_event and not ends_with_comma:
                sink.write(b",")
            sink.write(data)
            wrote_event = True
            ends_with_comma = data.rstrip(WS).endswith(b",")
        count = 0
        for event in appended:
            sink.write(b"\n" if (ends_with_comma or not wrote_event) and count == 0 else b",\n")
            sink.write(event)
            wrote_event, ends_with_comma = True, False
            count += 1
        sink.write(reader.tail)
    return count


def _chain(first: EventBatch | None, rest: Iterable[EventBatch]) -> Iterable[EventBatch]:
    if first is not None:
        yield first
        yield from rest
