"""What a feature declares about itself: the contract between one feature module
(``annotator/plugins/*.py``) and the rest of traceforge.

A module declares one ``Analysis`` (a feature) named ``ANALYSIS``. From it alone come the
feature's annotate flag and options (``annotate --help``), its place in ``--all``, its keyword in
the Python API (``traceforge.annotate(..., name=True)``, ``Trace.annotate``), its table on a
loaded trace (``Trace.table(name)``) and its ``Trace`` method and path-level function (named for
it, where no hand-written one has its name), its ``stats`` tables (``Table``: ``stats --table``, their
text, CSV and JSON, ``TraceStats.NAME``), its figures in the per-rank summary, and what the scan
keeps of the trace for it (``plan.scan_plan.ScanPlan``). A feature without ``build`` adds no track:
it gives tables only (``plugins/stats.py``). docs/architecture.md walks through adding one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..analyses.structure.stacks import NameMask
from ..emit.tracks import CounterTrack, Injections, TidAllocator

if TYPE_CHECKING:
    from ..analyses.cross_trace.stats import StatsContext
    from ..columns.scan import TraceColumns
    from ..util.lazy_pandas import pd

@dataclass(frozen=True)
class Option:
    """A parameter of an analysis: ``name`` in Python (``--name-with-dashes`` on the CLI).

    ``parse`` turns the CLI's text into the value (``int``, a duration parser, ...); a
    ``flag`` is a switch with no value. ``default`` is the one definition of the default.
    """

    name: str
    help: str
    default: Any = None
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    flag: bool = False

    @property
    def cli(self) -> str:
        return "--" + self.name.replace("_", "-")


# What every analysis may read beside its own options: HTA's choices (the CLI's --hta, ``analyses.hta_choices``).
SHARED_OPTIONS = ("hta",)

MOST_COUNT = 10**9


def count(text: str) -> int:
    """A ``parse`` for a number of things (patterns, ops): a whole number from 1 to ``MOST_COUNT``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MOST_COUNT:
        raise ValueError(f"not a whole number from 1 to {MOST_COUNT:,}: {text!r}")
    return value


@dataclass
class AnnotateContext:
    """What the analyses of one run share: their options (every declared option of the
    chosen analyses, defaults filled in) and fresh thread ids for new tracks."""

    options: dict[str, Any]
    allocator: TidAllocator


Setting = Callable[[Mapping[str, Any]], Any]  # a setting that depends on the run's options


@dataclass(frozen=True)
class Figure:
    """A figure an analysis reports per trace (``Injections.figures[key]``): a column of the
    per-rank summary of a many-file run, headed ``header``."""

    key: str
    header: str


@dataclass(frozen=True)
class Column:
    """A column of a table's text: its ``header``, the DataFrame column ``key`` it shows, and the
    ``unit`` its values are shown in (one of ``cli.tables.UNITS``: "count", "ms", "us", "pct", ...;
    "" as they are). ``left``: aligned left (text); ``repeat``: a key column, repeated in each block
    of a table too wide for the terminal; ``width``: a text column's most characters;
    ``if_positive``: shown only where some row's value is above 0."""

    header: str
    key: str
    unit: str = ""
    left: bool = False
    repeat: bool = False
    width: int | None = None
    if_positive: bool = False


@dataclass(frozen=True)
class Table:
    """A table a feature gives to ``stats`` (``stats --table NAME``, ``traceforge.stats(tables=...)``,
    ``TraceStats.NAME``): one per rank, with a ``rank`` column first. In text, ``title`` over
    ``columns`` (none: no section of its own); CSV and JSON hold every column as it is.

    ``make(columns, context)`` makes it (``analyses.stats.StatsContext``: the options, the wall span,
    the steps); None for a core table, made with the others by ``analyses.stats.trace_stats``. It reads
    the columns ``stats`` scans (the launch calls GPU ops join in memory), and the [memory] events where
    its feature declares ``memory_events``."""

    name: str
    title: str
    columns: tuple[Column, ...] = ()
    make: Callable[[TraceColumns, StatsContext], pd.DataFrame] | None = None
    order: int = 1000  # place among stats' tables: in TraceStats, in JSON, in --table's list
    text_order: int | None = None  # place in the text, where not ``order``
    default: bool = False  # made when no table is named
    without_gpu: bool = False  # shown in the text of a rank without GPU ops too
    aliases: tuple[str, ...] = ()  # other names ``stats --table`` takes for it (its feature's, say)


@dataclass(frozen=True)
class Analysis:
    """A feature: its annotate flag (``build``), options, what it reads of the trace, its tables.

    ``build(columns, context) -> Injections`` is pure: it reads the columns and returns what
    to add (tracks, slices, arrows, args); it never opens a file; None for a feature that adds
    no track (no annotate flag). The settings that say what the scan must keep (``launch_apis``,
    ``stack_marks``, ``patches_args``) are values or functions of the options; the scan keeps only
    what the chosen analyses read.
    """

    name: str
    help: str
    build: Callable[[TraceColumns, AnnotateContext], Injections] | None
    options: tuple[Option, ...] = ()
    order: int = 100  # place in --help, in --all and in the output (built-ins 10..60, then by name)
    # --all runs it (False for one that needs an option of its own, or costs much more than the others: its
    # module says why)
    in_all: bool = True
    # Adds args to existing events: the trace is read twice.
    patches_args: bool | Setting = False
    # The launch APIs it reads (None: all launch calls; an empty set: none).
    launch_apis: frozenset[str] | None | Setting = None
    # Reads the launch calls GPU ops join, whatever their API (beside those of ``launch_apis``): the
    # others wait on disk through the scan and only these come back.
    joined_launches: bool | Setting = False
    # Draws arrows from stream launch calls: it needs the CPU-side slices near them, not all CPU ops.
    arrows_from_launches: bool = False
    # Reads Kineto's [memory] instants (``TraceColumns.memory``): the scan parses them only then.
    memory_events: bool | Setting = False
    # Reads call stacks (``stacks.build_stacks``): of the CPU ops, those on the stacks of the launch
    # calls it reads and of the ops this function of the names marks (None: reads no stack).
    stack_marks: NameMask | None | Setting = None
    # Reads the shapes (``columns.scan.SHAPE_ARGS``: Input Dims, Input type, Concrete Inputs) of the CPU ops
    # whose names this picks, as ``cpu_ops.shape``: the scan parses those events (None: reads no shape).
    op_shapes: Callable[[str], bool] | None = None
    # Makes its args (if any) from GPU ops and the launch calls of its APIs alone, for these
    # columns and options: then the CPU ops it may read later are picked while the trace is copied.
    args_without_cpu_ops: Callable[[TraceColumns, Mapping[str, Any]], bool] = lambda cols, options: False
    # Its result as a table, for ``Trace.table(name)`` (None: it has no table of its own).
    table: Callable[[TraceColumns, Mapping[str, Any]], pd.DataFrame] | None = None
    # Its full result (an object of several tables), for ``Trace.table_result(name)`` and its command.
    result: Callable[[TraceColumns, Mapping[str, Any]], Any] | None = None
    # The figures it reports in ``Injections.figures``: columns of the per-rank summary.
    figures: tuple[Figure, ...] = ()
    # Its tables in ``stats``; the first is also its ``Trace.table(name)`` where it declares no ``table``.
    tables: tuple[Table, ...] = ()
    # The name of its ``Trace`` method and path-level function (None: its own name); one written by
    # hand in ``api/`` under that name is used, else they are made from ``Trace.table(name)``.
    api: str | None = None

    def setting(self, name: str, options: Mapping[str, Any]) -> Any:
        value = getattr(self, name)
        return value(options) if callable(value) else value

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def counter_tracks_build(label: str, make_tracks: Callable[[TraceColumns], list[CounterTrack]]
                         ) -> Callable[[TraceColumns, AnnotateContext], Injections]:
    """``build`` for an analysis that only draws counter tracks: the tracks and a summary line."""
    def build(cols: TraceColumns, ctx: AnnotateContext) -> Injections:
        tracks = make_tracks(cols)
        points = sum(len(t.ts) for t in tracks)
        return Injections(list(tracks), [f"{label}: {len(tracks)} counter tracks, {points:,} points"])
    return build
