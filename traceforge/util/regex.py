"""A regular expression given by the user (an option, a rules file), compiled once: any
pattern Python cannot compile, including a repeat count past its limit (OverflowError) and
nesting too deep for its parser (RecursionError), is a ``UsageError`` naming it."""

from __future__ import annotations

import re

from ..errors import UsageError


def user_regex(text: str, where: str) -> re.Pattern:
    """``text`` compiled; ``where`` (an option or a rule) starts the error's line."""
    try:
        return re.compile(text)
    except re.error as e:
        why = f"not a regular expression: {e}"
    except OverflowError as e:
        why = f"not a regular expression Python can compile: {e}"
    except RecursionError:
        why = "not a regular expression Python can compile: nested too deep"
    shown = text if len(text) <= 60 else text[:60] + "..."
    raise UsageError(f"{where} {shown!r}: {why}")
