"""``annotate``: scan the trace, run the chosen analyses, copy the trace with what they add.

The copy is made while scanning (one read) unless an analysis adds args to existing events:
then the trace is scanned first and read again to copy it with those args patched in. Such an
analysis makes its args first and leaves its tracks to ``Injections.later``, which can run
while the trace is copied (the tracks go after the last event).

The analyses are the modules in ``annotator/plugins`` (``registry``); ``plan`` says what the
scan keeps for them and ``schedule`` runs them.

With ``repair``, the annotated copy goes to a temporary file (uncompressed, in ``TMPDIR``) and
``rewrite.repair`` copies that to the output with its fixes, by the same rules as the ``repair``
command, judged on the annotated trace (so nothing the analyses add can bring a loss back).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..analyses.filters import Filters
from ..columns.scan import load_places
from ..emit.tracks import Injections
from ..io import output_names, tempfiles
from ..io.codec import AtomicOutput, check_writable, readable_twice
from ..io.patch import ExtraArgs, patch_editor
from ..io.placed_patch import copy_placed
from ..io.reader import EventBatch, TraceReader
from ..io.writer import EventSink, write_trace
from ..rewrite.repair import RepairResult
from ..rewrite.repair import repair as repair_trace
from . import registry, schedule
from .plan import ScanPlan
from .plugin import Analysis


@dataclass
class AnnotateResult:
    out: str
    appended: int
    summary: list[str] = field(default_factory=list)
    seconds: float = 0.0
    figures: dict[str, int | float | str] = field(default_factory=dict)  # the analyses' (``Analysis.figures``)
    repaired: RepairResult | None = None  # with ``repair``: what the repair changed (also in ``summary``)


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
    check_writable(out)
    options = registry.with_defaults(chosen, options)
    if repair:
        return _repaired(path, out, chosen, options, where, started)
    if any(a.setting("patches_args", options) for a in chosen):
        appended, built = _two_passes(path, out, chosen, options, where)
    else:
        appended, built = _one_pass(path, out, chosen, options, where)
    return AnnotateResult(out, appended, built.summary, time.perf_counter() - started, built.figures)


def _repaired(path: str, out: str, chosen: list[Analysis], options: dict[str, Any], where: Filters | None,
              started: float) -> AnnotateResult:
    """Annotate into a temporary file, then repair that into ``out``."""
    fd, annotated = tempfiles.make_in_tempdir("annotated-", ".json")
    os.close(fd)
    try:
        result = annotate(path, annotated, analyses=[a.name for a in chosen], options=options, where=where)
        fixed = repair_trace(annotated, out)
    finally:
        os.unlink(annotated)
    summary = [*result.summary, *(f"repair: {line}" for line in fixed.summary())]
    return AnnotateResult(out, result.appended, summary, time.perf_counter() - started,
                          result.figures, fixed)


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
        extra_args = ExtraArgs(injections.arg_patches, injections.arg_columns)
        ordinals, spilled_places = cols.gpu.ordinal, cols.places
        del cols  # the copy needs only the injections and the places: the other columns go now
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
