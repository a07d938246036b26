"""``annotate``: scan the trace, run the chosen analyses, copy the trace with what they add.

The copy is made while scanning (one read) unless an analysis adds args to existing events:
then the trace is scanned first and read again to copy it with those args patched in. Such an
analysis makes its args first and leaves its tracks to ``Injections.later``, which can run
while the trace is copied (the tracks go after the last event).

The analyses are the modules in ``annotator/plugins`` (``registry``); ``plan`` says what the
scan keeps for them and ``schedule`` runs them.

With ``repair``, the output is also repaired by ``rewrite.repair``'s rules, judged on the
output (the input's events and those appended), in two reads of the input: the scan, which
the repair reads too, and the copy, which applies the repair's edits beside the analyses' args
(see ``_repaired``).
"""

from __future__ import annotations

import itertools
import os
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ..analyses.structure.filters import Filters
from ..columns.scan import load_places
from ..emit.tracks import Injections
from ..io.memory import tempfiles
from ..io.read.codec import readable_twice
from ..io.read.reader import WS, EventBatch, TraceReader
from ..io.read.rows import RowScanner
from ..io.write import output_names
from ..io.write.event_edits import EventEdits, edits_after
from ..io.write.jsontext import Block
from ..io.write.output import AtomicOutput, check_writable
from ..io.write.patch import ExtraArgs, patch_editor
from ..io.write.placed_patch import copy_placed
from ..io.write.writer import EventSink, write_trace
from ..plan.scan_plan import ScanPlan
from ..rewrite.repair import RepairReading, RepairResult
from . import registry, schedule
from .plugin import Analysis


@dataclass
class AnnotateResult:
    out: str
    appended: int
    summary: list[str] = field(default_factory=list)
    seconds: float = 0.0
    figures: dict[str, int | float | str] = field(default_factory=dict)  # the analyses' (``Analysis.figures``)
    repaired: RepairResult | None = None  # with ``repair``: what the repair changed (also in ``summary``)

    def text(self, width: int = 100) -> str:
        """For people: the output, events appended and time on one line, then one line per
        analysis (wrapped to ``width`` columns)."""
        lines = [f"{self.out}: {self.appended:,} events appended in {self.seconds:.1f} s"]
        for item in self.summary or ["nothing added (no analysis chosen)"]:
            lines += textwrap.wrap(item, width, initial_indent="  ", subsequent_indent="      ",
                                   break_long_words=False, break_on_hyphens=False)
        return "\n".join(lines)


def default_output(path: str) -> str:
    """``<name>.annotated.json[.gz|.zst]`` beside the input, compressed as the input is
    (``io.output_names``; ``-`` for stdin)."""
    return output_names.default_output(path, "annotated")


def annotate(
    path: str,
    out: str | None = None,
    *,
    analyses: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    where: Filters | None = None,
    repair: bool = False,
    **flags: bool,
) -> AnnotateResult:
    """Annotate ``path`` with the named analyses (``registry.ANALYSES``) into ``out``.

    Analyses can also be switched on as keywords, like the CLI flags:
    ``annotate("t.json.gz", queue_length=True, memcpy_bw=True)`` or ``all=True``.
    ``options`` are the analyses' (CLI ``--x-y`` -> ``x_y``), plus ``side_by_side=False`` to run
    the analyses one at a time (when other work keeps the cores busy; see ``schedule.side_by_side``).
    ``where``: the analyses see only what these filters keep (``analyses.filters``); every event
    of the trace is still copied. ``repair``: the output is also repaired (see the module docstring).
    """
    chosen = registry.chosen(analyses, flags)
    started = time.perf_counter()
    out = out or default_output(path)
    check_writable(out, (path,))
    options = registry.with_defaults(chosen, options)
    repaired = None
    if repair:
        appended, built, repaired = _repaired(path, out, chosen, options, where)
    elif any(a.setting("patches_args", options) for a in chosen):
        appended, built = _two_passes(path, out, chosen, options, where)
    else:
        appended, built = _one_pass(path, out, chosen, options, where)
    summary = built.summary + [f"repair: {line}" for line in repaired.summary()] if repaired else built.summary
    return AnnotateResult(out, appended, summary, time.perf_counter() - started, built.figures, repaired)


def _repaired(path: str, out: str, chosen: list[Analysis], options: dict[str, Any], where: Filters | None
              ) -> tuple[int, Injections, RepairResult]:
    """Annotate and repair in two reads of the input: the scan (repair reads its batches as
    they go by), then the copy, with the analyses' args and the repair's edits.

    The repair judges the output, so it also reads the events the analyses append: they
    wait in a temporary file (their size, not the trace's), numbered after the input's
    events, and are copied from it repaired too. So the output is ``repair`` of what
    ``annotate`` writes, event for event."""
    with readable_twice(path) as source:  # stdin or a FIFO: spooled, as it is read twice
        fd, appended_path = tempfiles.make_in_tempdir("appended-", ".json")
        try:
            reader = TraceReader(source, display_name=path)
            reading = RepairReading(reader.scanner)
            cols = ScanPlan.of(chosen, options).scan(source, reader, where, on_batch=reading.batch)
            injections = schedule.run_analyses(cols, chosen, options)
            del cols
            with os.fdopen(fd, "wb") as file:
                appended = _write_events(file, injections.blocks())
            injections.sources = []  # their events are in the file now
            events = reader.event_count
            for batch in _numbered_from(_appended_reader(appended_path, reader.scanner).batches(), events):
                reading.batch(batch)
            repairs = reading.decide(events + appended, out)
            reader = TraceReader(source, display_name=path)
            edit: Callable[[EventBatch], bytes | memoryview] = repairs.edits
            if injections.patches_args():  # args first; the batches both edit are scanned again
                edit = edits_after(patch_editor(ExtraArgs(injections.arg_patches, injections.args())),
                                   repairs.edits, reader.scanner)
            blocks = _edited_blocks(_appended_reader(appended_path), events, repairs.edits)
            write_trace(reader, out, itertools.chain(blocks, repairs.blocks()), edit=edit)
            return appended, injections, repairs.result
        finally:
            os.unlink(appended_path)


def _write_events(file: BinaryIO, blocks: Iterable[Block]) -> int:
    """``{"traceEvents":[`` the blocks' events ``]}`` to ``file``; how many events."""
    count = 0
    file.write(b'{"traceEvents":[\n')
    for n, text in blocks:
        if n:
            file.write(b",\n" if count else b"")
            file.write(text)
            count += n
    file.write(b"\n]}")
    return count


def _appended_reader(path: str, scanner: RowScanner | None = None) -> TraceReader:
    """A reader of the appended events' file (no progress bar; ``scanner``: the input's, so
    that the repair's ids of strings and threads hold across both)."""
    return TraceReader(path, on_read=lambda _: None, **({"scanner": scanner} if scanner is not None else {}))


def _numbered_from(batches: Iterable[EventBatch], first: int) -> Iterator[EventBatch]:
    """The batches with their events numbered from ``first`` (they follow ``first`` events)."""
    for batch in batches:
        batch.first += first
        yield batch


def _edited_blocks(reader: TraceReader, first: int, edits: EventEdits) -> Iterator[Block]:
    """The events of ``reader`` (numbered from ``first``) edited, as blocks to append."""
    for batch in _numbered_from(reader.batches(), first):
        text = bytes(edits(batch)).strip(WS)
        text = text[:-1].rstrip(WS) if text.endswith(b",") else text
        if text:
            kept = batch.count if edits.keep is None else int(np.count_nonzero(edits.keep[batch.first:batch.first + batch.count]))
            yield kept, text


def _one_pass(path: str, out: str, chosen: list[Analysis], options: dict[str, Any], where: Filters | None
              ) -> tuple[int, Injections]:
    """Copy events out while scanning them; the new tracks go after the last event."""
    with AtomicOutput(out, inputs=(path,)) as sink:
        events = EventSink(sink)
        reader = TraceReader(path)

        def copy(batch: EventBatch) -> None:
            events.head(reader.head)
            events.events(batch.view)

        cols = ScanPlan.of(chosen, options).scan(path, reader, where, on_batch=copy)
        events.head(reader.head)
        injections = schedule.run_analyses(cols, chosen, options)
        return events.finish(injections.blocks(), reader.tail), injections


def _two_passes(path: str, out: str, chosen: list[Analysis], options: dict[str, Any], where: Filters | None
                ) -> tuple[int, Injections]:
    """Scan, analyse, then copy the trace again patching the args analyses asked for (their
    tracks made meanwhile where memory allows: ``schedule.BesideCopy``)."""
    with readable_twice(path) as source:
        reader = TraceReader(source, display_name=path)
        cols = ScanPlan.of(chosen, options).scan(source, reader, where, places=True)
        beside = schedule.BesideCopy(cols, chosen, options) if schedule.beside_copy(cols, options) else None
        injections = beside.args if beside is not None else schedule.run_analyses(cols, chosen, options)
        ordinals, spilled_places = cols.gpu.ordinal, cols.places
        del cols  # the copy needs only the injections and the places: the other columns go now
        extra_args = ExtraArgs(injections.arg_patches, injections.args())  # back from disk, now the columns are gone
        places = load_places(ordinals, spilled_places)
        appended = beside.blocks() if beside is not None else injections.blocks()
        targets = places.rows_of(extra_args.ordinals) if injections.patches_args() else None
        if beside is not None:
            beside.start()
        if targets is not None:
            count = copy_placed(reader, out, places, targets, extra_args, appended)
        else:
            edit = patch_editor(extra_args) if injections.patches_args() else None
            count = write_trace(TraceReader(source, display_name=path), out, appended, edit=edit)
        return count, beside.finished() if beside is not None else injections
