"""The annotate analyses, found rather than listed: every module in ``annotator/plugins``
that declares ``ANALYSIS``, and every module named in ``TRACEFORGE_PLUGINS`` (comma-separated
importable module names, for analyses that live outside traceforge).

``ANALYSES`` holds them by name, in their declared order.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import UsageError
from . import plugins
from .plugin import Analysis

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


ANALYSES: dict[str, Analysis] = discover()


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
