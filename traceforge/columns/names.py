"""The distinct names of a trace's events, kept as the scanner keeps them: bytes in its interner.

A name is the str of an event's "name" (or args "kernel"), "" where it is missing or not a
string; the scan numbers the distinct ones in the order it first uses them (``NameIds``).
A trace may have millions (a kernel per template instance): each name is held as the id of
the scanner string it was first read from (4 bytes), and made a str only when read
(``Names``), so a command builds the strs of the names its output shows, not of all.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from ..io.read import rows as R
from ..util.distinct import unique

_READ_AT_ONCE = 1 << 16  # names decoded per call while iterating


class Names(Sequence[str]):
    """Names by name id, read from a scanner's strings (see the module's docstring).

    A list's reading: ``len``, ``names[i]``, iteration, ``==`` with a list; ``at(distinct)``
    decodes many at once (``names_at`` for any ids). Pickles as a plain list."""

    def __init__(self, strings: R.InternedStrings, raw: array) -> None:
        self._strings = strings
        self._raw = raw  # name id -> scanner string id (-1: "")

    def __len__(self) -> int:
        return len(self._raw)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return self._decoded(self._raw[i])
        raw = self._raw[i]
        return R.decode_string(self._strings[raw]) if raw >= 0 else ""

    def __iter__(self) -> Iterator[str]:
        for first in range(0, len(self._raw), _READ_AT_ONCE):
            yield from self._decoded(self._raw[first:first + _READ_AT_ONCE])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Names, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return list, (list(self),)

    def __repr__(self) -> str:
        return f"Names({len(self)} names)"

    def at(self, distinct: np.ndarray) -> list[str]:
        """The names of ``distinct`` (distinct name ids; -1: ""), decoded together."""
        raw = np.frombuffer(self._raw, np.int32)
        return self._decoded(np.where(distinct >= 0, raw[np.maximum(distinct, 0)] if len(raw) else -1, -1))

    def _decoded(self, raw: Sequence[int]) -> list[str]:
        """The strs of scanner string ids (-1: ""); ids near one another read in one call."""
        ids = np.frombuffer(raw, np.int32) if isinstance(raw, array) else np.asarray(raw, np.int32)
        real = ids[ids >= 0]
        if not len(real):
            return [""] * len(ids)
        lo, hi = int(real.min()), int(real.max())
        if hi - lo < 4 * len(ids):  # a scan's are rising: one read
            texts = self._strings[lo:hi + 1]
            return [R.decode_string(texts[r - lo]) if r >= 0 else "" for r in ids.tolist()]
        return [R.decode_string(self._strings[r]) if r >= 0 else "" for r in ids.tolist()]


def names_at(names: Sequence[str], ids: np.ndarray) -> np.ndarray:
    """The names of ``ids`` (name ids into ``names``, a ``Names`` or a list; -1: ""), as an
    object array; only the names used are made (each once)."""
    ids = np.asarray(ids)
    out = np.empty(len(ids), object)
    if not len(ids):
        return out
    distinct, inverse = np.unique(ids, return_inverse=True)
    if isinstance(names, Names):
        texts = names.at(distinct)
    else:
        texts = [names[i] if i >= 0 else "" for i in distinct.tolist()]
    held = np.empty(len(texts), object)
    held[:] = texts
    out[:] = held[inverse.ravel()]
    return out


def names_in_chunks(names: Sequence[str], ids: np.ndarray, size: int = _READ_AT_ONCE) -> Iterator[list[str]]:
    """The names of ``ids`` (as ``names_at``), ``size`` at a time: for a caller that keeps
    something per name (a label, a match), not the names."""
    for first in range(0, len(ids), size):
        yield names_at(names, ids[first:first + size]).tolist()


class NameIds:
    """Scanner string ids to name ids, numbered in the order first asked for (``of``).

    Two raw texts name the same str only where one has an escape (``"\\u0041"`` and ``"A"``)
    or is missing (""): a raw text without a backslash is its own name (the decoding is one to
    one), found by its scanner id. The others are looked up by their str, and matched with
    a plain text the scanner met (``InternedStrings.find``)."""

    def __init__(self, strings: R.InternedStrings) -> None:
        self._strings = strings
        self._by_string = np.zeros(0, np.int32)  # scanner string id -> name id (-1: none yet)
        self._escaped = np.zeros(0, bool)  # scanner string id -> its raw text has a backslash
        self._learnt = 0  # scanner strings learnt; the two arrays above grow geometrically past it
        self._raw = array("i")  # name id -> scanner string id (-1: "")
        self._by_text: dict[str, int] = {}  # names first met escaped or missing -> their ids

    def learn(self, new: list[bytes]) -> None:
        """The scanner strings met since the last call (their raw texts, in id order)."""
        end = self._learnt + len(new)
        if end > len(self._by_string):  # grown by doubling: one copy per doubling, not per batch
            size = max(end, 2 * len(self._by_string))
            by_string = np.full(size, -1, np.int32)
            by_string[:self._learnt] = self._by_string[:self._learnt]
            escaped = np.zeros(size, bool)
            escaped[:self._learnt] = self._escaped[:self._learnt]
            self._by_string, self._escaped = by_string, escaped
        self._escaped[self._learnt:end] = [b"\\" in raw for raw in new]
        self._learnt = end

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The name ids of scanner string ids (-1 or -2: missing or not a string, named "")."""
        if (ids < 0).any():
            missing = self._new(-1)
            out = np.full(len(ids), missing, np.int32)
            known = ids >= 0
            out[known] = self.of(ids[known])
            return out
        out = self._by_string[ids]
        if (out < 0).any():
            new = unique(ids[out < 0])
            if not self._by_text and not self._escaped[new].any():  # each its own new name
                first = len(self._raw)
                self._raw.frombytes(new.astype(np.int32).tobytes())
                self._by_string[new] = np.arange(first, first + len(new), dtype=np.int32)
            else:
                for i in new.tolist():
                    self._by_string[i] = self._new(i)
            out = self._by_string[ids]
        return out

    def _new(self, raw: int) -> int:
        """The name id of scanner string ``raw`` (-1: ""), numbered now if it is a new name."""
        if raw >= 0 and self._by_string[raw] >= 0:
            return int(self._by_string[raw])
        plain = raw >= 0 and not self._escaped[raw]
        if plain and not self._by_text:
            return self._number(raw)
        text = R.decode_string(self._strings[raw]) if raw >= 0 else ""
        got = self._by_text.get(text)
        if got is not None:
            return got
        if not plain:
            same = _plain_text(text)
            met = -1 if same is None else self._strings.find(same)
            if met >= 0 and met < len(self._by_string) and self._by_string[met] >= 0:
                return int(self._by_string[met])
        got = self._number(raw)
        if not plain:
            self._by_text[text] = got
        return got

    def _number(self, raw: int) -> int:
        self._raw.append(raw)
        return len(self._raw) - 1

    def names(self) -> Names:
        return Names(self._strings, self._raw)


def _plain_text(text: str) -> bytes | None:
    """The raw text without a backslash that decodes to ``text``, if there is one."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate outside U+DC80..U+DCFF: only an escape writes it
        return None
    return None if b"\\" in raw or b'"' in raw or any(c < 0x20 for c in raw) else raw
