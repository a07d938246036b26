"""Names cut to a width, the one way every table, plot and message does it.

``shorten`` cuts a name in the middle (its start and its end stay: a kernel's namespace and its
template arguments' tail). ``shorten_distinct`` cuts a column of names so that two different
names never come out the same: where the middle cut makes two alike, each is cut around the
place where it differs from the names it would be confused with, and, if even that is not
enough (a width too small to show the difference), numbered ``#1``, ``#2``, ...
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"  # one column wide


def shorten(text: str, width: int) -> str:
    """``text`` if it fits ``width`` characters, else its start, ``…`` and its end."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + text[len(text) - tail:]


def shorten_distinct(names: Sequence[str], width: int) -> list[str]:
    """Each of ``names`` cut to ``width`` (``shorten``), different names to different texts."""
    out = [shorten(n, width) for n in names]
    by_text: dict[str, set[str]] = {}
    for name, text in zip(names, out):
        by_text.setdefault(text, set()).add(name)
    moved: dict[str, str] = {}
    for group in (sorted(g) for g in by_text.values() if len(g) > 1):
        for name in group:
            moved[name] = _around_difference(name, [m for m in group if m != name], width)
    if not moved:
        return out
    out = [moved.get(n, t) for n, t in zip(names, out)]
    return _numbered(names, out, width)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _around_difference(name: str, peers: list[str], width: int) -> str:
    """``name`` cut to ``width`` keeping a little of its start and end, and the part from where
    it first differs from the most similar of ``peers``."""
    if len(name) <= width:
        return name
    at = max(_common_prefix(name, p) for p in peers)
    edge = max(1, width // 6)
    room = width - 2 * edge - 2  # two ellipses
    if room < 4:
        return shorten(name, width)
    lo = max(edge, min(at - room // 4, len(name) - edge - room))
    hi = lo + room
    if lo <= edge:  # the window reaches the start: one cut, before the end
        return name[:edge + room + 1] + ELLIPSIS + name[len(name) - edge:]
    if hi >= len(name) - edge:  # it reaches the end: one cut, after the start
        return name[:edge] + ELLIPSIS + name[len(name) - (width - edge - 1):]
    return name[:edge] + ELLIPSIS + name[lo:hi] + ELLIPSIS + name[len(name) - edge:]


def _numbered(names: Sequence[str], texts: list[str], width: int) -> list[str]:
    """``texts`` with those that still stand for several names numbered in order seen."""
    seen: dict[str, list[str]] = {}
    for name, text in zip(names, texts):
        group = seen.setdefault(text, [])
        if name not in group:
            group.append(name)
    out = []
    for name, text in zip(names, texts):
        group = seen[text]
        if len(group) == 1:
            out.append(text)
            continue
        mark = f"#{group.index(name) + 1}"
        out.append(shorten(text, max(width - len(mark), 1)) if len(text) + len(mark) > width else text)
        out[-1] += mark
    return out
