"""A regular expression given by the user (an option, a rules file), compiled once: any
pattern Python cannot compile, including a repeat count past its limit (OverflowError) and
nesting too deep for its parser (RecursionError), is a ``UsageError`` naming it."""

from __future__ import annotations

import re

from ..errors import UsageError

_SHOWN = 60  # characters of a pattern quoted in an error


def shown(text: str) -> str:
    """``text`` as an error quotes it: cut after its first characters."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def user_regex(text: str, where: str) -> re.Pattern:
    """``text`` compiled; else a UsageError, ``where`` (saying which pattern) then why."""
    try:
        return re.compile(text)
    except re.error as e:
        why = str(e)
    except OverflowError as e:
        why = f"{e} (Python cannot compile it)"
    except RecursionError:
        why = "nested too deep (Python cannot compile it)"
    raise UsageError(f"{where}: {why}")
