"""CLI options made from the analyses' declarations (``annotator.plugin.Option``): one
definition of each option's name, default, parser and help."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ..analyses.filters import Filters
from ..annotator.plugin import Option


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, options: Iterable[Option]) -> None:
    """An argument per option, once per name (analyses may share one)."""
    seen: set[str] = set()
    for option in options:
        if option.name in seen:
            continue
        seen.add(option.name)
        if option.flag:
            parser.add_argument(option.cli, dest=option.name, action="store_true", help=option.help)
        else:
            parser.add_argument(option.cli, dest=option.name, type=option.parse, default=option.default,
                                metavar=option.metavar, help=option.help)


FILTER_OPTIONS = ("steps", "window", "kernel", "op")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The "filters" group (``analyses.filters``): ``--steps``, ``--window``, ``--kernel``,
    ``--op``; one the command already has (``patterns --op``) keeps its own meaning."""
    group = parser.add_argument_group(
        "filters", "analyse only part of the trace, as read (no temporary file); filters given together all apply")
    helps = {
        "steps": ("N[-M]", "from the start of ProfilerStep#N to the end of ProfilerStep#M, extended to the end of the "
                  "GPU work those steps launched (what trim --steps cuts)"),
        "window": ("A:B", "[A, B) from the trace start, as Perfetto shows time: µs or with a unit (100ms:250ms); an "
                   "empty side is the trace's start or end. Slices overlapping it stay whole. trim --window takes "
                   "absolute µs: this is trim --window +A:+B"),
        "kernel": ("REGEX", "only GPU ops whose name matches (re.search), and the launch calls of those"),
        "op": ("REGEX", "only CPU operators whose name matches, what starts inside them on their thread, and the "
               "GPU ops launched from there"),
    }
    for name, (metavar, text) in helps.items():
        if f"--{name}" not in parser._option_string_actions:
            group.add_argument(f"--{name}", dest=f"where_{name}", metavar=metavar, help=text)


def filters_of(args: argparse.Namespace) -> Filters | None:
    """The filters given on the command line (``add_filter_arguments``), None for none."""
    where = Filters(**{name: getattr(args, f"where_{name}", None) for name in FILTER_OPTIONS})
    return where or None
