"""CLI options made from the analyses' declarations (``annotator.plugin.Option``): one
definition of each option's name, default, parser and help."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

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
