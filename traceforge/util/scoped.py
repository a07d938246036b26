"""A context variable set for the length of a ``with`` block (settings the CLI chooses once and
the readers and writers below consult: reading limits, output compression)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def scoped(var: ContextVar[T], value: T) -> Iterator[None]:
    """``var`` is ``value`` inside the block, and what it was before after it."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
