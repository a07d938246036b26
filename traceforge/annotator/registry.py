"""The features, found rather than listed: every module in ``annotator/plugins`` that
declares ``ANALYSIS``, and every module named in ``TRACEFORGE_PLUGINS`` (comma-separated
importable module names, for features that live outside traceforge).

``FEATURES`` holds them by name, in their declared order; ``ANALYSES`` those with an annotate
flag (a ``build``); ``STATS_TABLES`` the tables they give to ``stats``, in their declared order.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..analyses.cross_trace.stats import CORE_TABLES, TOTALS_TABLES, StatsContext, trace_stats, wall_span
from ..analyses.gpu_time.busy import KERNEL_WAIT_NS
from ..errors import UsageError
from ..io.read.reader import TraceReader
from ..plan.scan_plan import ScanPlan
from . import plugins
from .plugin import SHARED_OPTIONS, Analysis, Table

if TYPE_CHECKING:
    from ..analyses.cross_trace.stats import TraceStats
    from ..analyses.structure.filters import Filters
    from ..columns.scan import TraceColumns
    from ..util.lazy_pandas import pd

PLUGINS_VARIABLE = "TRACEFORGE_PLUGINS"


def _modules() -> list[str]:
    found = [f"{plugins.__name__}.{m.name}" for m in pkgutil.iter_modules(plugins.__path__)]
    extra = os.environ.get(PLUGINS_VARIABLE, "")
    return found + [name.strip() for name in extra.split(",") if name.strip()]


def discover() -> dict[str, Analysis]:
    """Every declared analysis by name, in (order, name) order."""
    found: list[Analysis] = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError as e:  # one line, and the other analyses still run
            print(f"traceforge: warning: analysis module {name} (from {PLUGINS_VARIABLE}) cannot be imported: {e}; "
                  "left out", file=sys.stderr)
            continue
        analysis = getattr(module, "ANALYSIS", None)
        if isinstance(analysis, Analysis):
            found.append(analysis)
    by_name: dict[str, Analysis] = {}
    for analysis in sorted(found, key=lambda a: (a.order, a.name)):
        if analysis.name in by_name or analysis.name == "all":
            raise UsageError(f"two analyses are named {analysis.name}")
        by_name[analysis.name] = analysis
    return by_name


FEATURES: dict[str, Analysis] = discover()
ANALYSES: dict[str, Analysis] = {name: f for name, f in FEATURES.items() if f.build is not None}


def _stats_tables() -> dict[str, Table]:
    tables = sorted((t for f in FEATURES.values() for t in f.tables), key=lambda t: t.order)
    names = [name for t in tables for name in (t.name, *t.aliases)]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"two stats tables are named {twice[0]}")
    unmade = [t.name for t in tables if t.make is None and t.name not in (*CORE_TABLES, *TOTALS_TABLES)]
    if unmade:
        raise UsageError(f"stats table {unmade[0]} declares no make (only the core tables are made without)")
    return {t.name: t for t in tables}


STATS_TABLES: dict[str, Table] = _stats_tables()
TABLE_FEATURE: dict[str, Analysis] = {t.name: f for f in FEATURES.values() for t in f.tables}
TABLE_ALIASES: dict[str, str] = {alias: t.name for t in STATS_TABLES.values() for alias in t.aliases}


def default_tables() -> tuple[str, ...]:
    """The tables ``stats`` makes when none is named."""
    return tuple(name for name, t in STATS_TABLES.items() if t.default)


def in_text_order(names: Iterable[str]) -> list[str]:
    """``names`` (stats tables) in the order of their sections in ``stats``' text."""
    order = {name: t.order if t.text_order is None else t.text_order for name, t in STATS_TABLES.items()}
    return sorted(names, key=order.__getitem__)


def reads_memory(tables: Iterable[str] | None) -> bool:
    """Whether any of ``tables`` (default ``default_tables()``) reads the [memory] events: its
    feature declares ``memory_events`` (with its options' defaults)."""
    features = {TABLE_FEATURE[t].name: TABLE_FEATURE[t] for t in (default_tables() if tables is None else tables)
                if t in TABLE_FEATURE}
    options = with_defaults(features.values(), None)
    return any(f.setting("memory_events", options) for f in features.values())


def stats_of(cols: TraceColumns, *, tables: Collection[str] | None = None, **kwargs: Any) -> TraceStats:
    """``analyses.stats.trace_stats`` of the declared tables: ``tables`` (default ``default_tables()``), made by
    their declarations, given their features' options' defaults (``kwargs``: ``rank``, ``kernel_wait_ns``, ``hta``)."""
    wanted = default_tables() if tables is None else tuple(TABLE_ALIASES.get(t, t) for t in tables)
    features = {TABLE_FEATURE[t].name: TABLE_FEATURE[t] for t in wanted if t in TABLE_FEATURE}
    return trace_stats(cols, tables=wanted, extra={name: t.make for name, t in STATS_TABLES.items() if t.make},
                       names=tuple(STATS_TABLES), options=with_defaults(features.values(), None), **kwargs)


def has_table(feature: Analysis) -> bool:
    """Whether ``feature`` gives a table of its own (``table_of``)."""
    return feature.table is not None or any(t.make is not None for t in feature.tables)


def table_of(feature: Analysis, cols: TraceColumns, options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The table of ``feature`` of ``cols`` (``Trace.table``): its ``table``, else its first stats table that
    has a ``make``, made alone (the default ``kernel_wait_ns``, no HTA choices); ``options`` not given take
    their declared defaults."""
    options = with_defaults([feature], options)
    if feature.table is not None:
        return feature.table(cols, options)
    first = next(t for t in feature.tables if t.make is not None)
    return first.make(cols, StatsContext(cols, wall_span(cols), KERNEL_WAIT_NS, None, options))


def declared_columns(path: str, feature: str, options: Mapping[str, Any] | None = None,
                     where: Filters | None = None) -> TraceColumns:
    """What the feature ``feature`` reads of the trace at ``path``, by its own declaration (``ScanPlan.columns``)."""
    declared = [FEATURES[feature]]
    return ScanPlan.of(declared, with_defaults(declared, options)).columns(path, TraceReader(path), where)


def option_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The options of the analyses (each declared option, and ``SHARED_OPTIONS``) that ``values`` has,
    e.g. the CLI's parsed arguments."""
    names = [*SHARED_OPTIONS, *(o.name for a in ANALYSES.values() for o in a.options)]
    return {name: values[name] for name in dict.fromkeys(names) if name in values}


def chosen(names: Iterable[str], flags: Mapping[str, bool] = {}) -> list[Analysis]:
    """The analyses named, and those switched on as keywords (``all`` for every one in ``--all``)."""
    wanted = [*names, *(name for name, a in ANALYSES.items() if flags.get(name) or (flags.get("all") and a.in_all))]
    unknown = [a for a in [*wanted, *flags] if a not in ANALYSES and a != "all"]
    if unknown:
        raise UsageError(f"unknown analysis: {', '.join(unknown)} (known: {', '.join(ANALYSES)})")
    return [ANALYSES[a] for a in dict.fromkeys(wanted)]


def with_defaults(analyses: Iterable[Analysis], options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` with the declared default of every option of ``analyses`` it does not set."""
    filled = dict(options or {})
    for analysis in analyses:
        for option in analysis.options:
            if filled.get(option.name) is None:
                filled[option.name] = option.default
    return filled
