"""Compact integer columns: in memory (``Table``, grown in anonymous maps) or waiting on disk
(``SpilledColumns``), read back a chunk at a time.

A column is declared ``name:kind`` (see ``_specs``): int64 by default, int32 for ids, int32
until a value does not fit for values that nearly always do, a byte for flags. Nothing here
reads a trace: ``scan`` fills these, analyses read them.
"""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..io.memory import paged
from ..io.memory.heap import give_back
from ..io.write.jsontext import fits_int32

_DTYPES = {"i4": np.int32, "n4": np.int32, "i2": np.int16, "i1": np.int8}


def _specs(fields: str) -> list[tuple[str, np.dtype, bool]]:
    """``fields`` ("name:kind ...") as (name, dtype, narrow): ``:i4`` for ids that fit 32 bits,
    ``:n4`` for values that nearly always do (int32 until one does not), ``:i1`` for flags."""
    return [(name, np.dtype(_DTYPES.get(kind, np.int64)), kind == "n4")
            for name, _, kind in (f.partition(":") for f in fields.split())]


class _MappedColumn:
    """A growing array in its own memory map, doubled when full: remapped in place where the
    system can (``mremap``: no copy, and the filled pages are not faulted in again), else
    copied once.

    Not a heap buffer grown by reallocation: that leaves freed blocks between the batches'
    temporaries which the heap never gives back (measured: +60 MB of peak RSS at 2 GB).
    A map is returned to the system the moment it is replaced, and untouched capacity
    costs no memory. A big map is a temporary file's (``io.paged``): its pages leave resident
    memory whenever ``paged.page_out`` runs, and fault back in when read. A ``narrow``
    column holds int32 until a value does not fit, then becomes int64 (ordinals, durations
    and correlation ids nearly always fit: half the bytes).
    """

    def __init__(self, dtype: np.dtype, narrow: bool = False):
        self.dtype = dtype
        self.narrow = narrow
        self.size = 0
        self._map: mmap.mmap | None = None
        self._capacity = 0

    def extend(self, values: np.ndarray) -> None:
        if not len(values):
            return
        if self.narrow and not fits_int32(values):
            self.narrow = False
            self._grow(self._capacity, np.dtype(np.int64))
        need = self.size + len(values)
        if need > self._capacity:
            self._grow(max(need, 2 * self._capacity, 1 << 16), self.dtype)
        np.frombuffer(self._map, self.dtype, count=need)[self.size:] = values
        self.size = need

    def _grow(self, capacity: int, dtype: np.dtype) -> None:
        nbytes = max(capacity, 1) * dtype.itemsize
        if (dtype == self.dtype and self._map is not None
                and paged.is_file_map(self._map) == paged.is_paged(nbytes) and paged.resize(self._map, nbytes)):
            self._capacity = capacity
            return
        grown = paged.new_map(nbytes)  # a new kind of map, a wider dtype, or no resize in place: copied
        if self.size:
            np.frombuffer(grown, dtype, count=self.size)[:] = np.frombuffer(self._map, self.dtype, count=self.size)
        if self._map is not None:
            self._map.close()
        self._map, self._capacity, self.dtype = grown, capacity, dtype

    def array(self) -> np.ndarray:
        return np.frombuffer(self._map, self.dtype, count=self.size) if self.size else np.zeros(0, self.dtype)


class GrowingColumns:
    """Growing columns, one mapped buffer per field, filled a batch at a time."""

    def __init__(self, fields: str):
        """``fields``: see ``_specs``."""
        specs = _specs(fields)
        self.fields = [name for name, _, _ in specs]
        self._columns = [_MappedColumn(dtype, narrow) for _, dtype, narrow in specs]

    def extend(self, *values: np.ndarray) -> None:
        for column, v in zip(self._columns, values, strict=True):
            column.extend(v)

    def table(self) -> Table:
        return Table({f: c.array() for f, c in zip(self.fields, self._columns)})


class SpilledColumns:
    """Columns appended to a temporary file (int64 rows), read back a chunk at a time.

    For rows a caller reads only later (where GPU ops are, for the second read) or keeps only
    a few of, known once the whole trace is scanned (CPU ops near launch calls): they wait
    on disk, not in memory, while the analyses run.
    """

    def __init__(self, fields: str):
        """``fields``: see ``_specs``."""
        self._spec = fields
        self.fields = [name for name, _, _ in _specs(fields)]
        self._file = tempfile.TemporaryFile()
        self.size = 0
        self._last_use = True  # ``select`` closes the file (see ``keep_open``)

    def __len__(self) -> int:
        return self.size

    def keep_open(self) -> None:
        """Let ``select`` read the rows again and again (a loaded trace's analyses each read
        them): the file stays until this object goes."""
        self._last_use = False

    def extend(self, *values: np.ndarray) -> None:
        rows = np.empty((len(values[0]), len(self.fields)), np.int64)
        for j, v in enumerate(values):
            rows[:, j] = v
        self._file.write(rows.data)
        self.size += len(rows)

    def chunks(self, chunk: int = 1 << 18) -> Iterator[Table]:
        """The rows, ``chunk`` at a time, as int64 tables (for a look before ``select``)."""
        for rows in self.blocks(chunk):
            yield self.as_table(rows)

    def blocks(self, chunk: int = 1 << 18, reuse: bool = False) -> Iterator[np.ndarray]:
        """The rows, ``chunk`` at a time, as they are stored: int64 matrices, a row per row.
        With ``reuse``, every block is read into the same memory, not fresh pages each time,
        for a caller that copies what it keeps before it asks for the next."""
        buffer = np.empty((min(chunk, self.size), len(self.fields)), np.int64) if reuse else None
        for lo in range(0, self.size, chunk):
            count = min(chunk, self.size - lo)
            yield self.rows(lo, count, None if buffer is None else buffer[:count])

    def rows(self, first: int, count: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``first`` .. ``first + count - 1`` as an int64 matrix (read into ``out`` if given)."""
        self._file.seek(first * len(self.fields) * 8)
        if out is None:
            return np.fromfile(self._file, np.int64, count * len(self.fields)).reshape(count, len(self.fields))
        read = self._file.readinto(out)
        if read != out.nbytes:
            raise OSError(f"temporary file of {self.size} rows cut short: {read} of {out.nbytes} bytes at row {first}")
        return out

    def as_table(self, rows: np.ndarray) -> Table:
        """A block of rows as a table (views of its columns)."""
        return Table.of_rows(rows, self.fields)

    def select(self, keep: Callable[[Table], np.ndarray | slice], chunk: int = 1 << 18,
               fields: tuple[str, ...] | None = None) -> Table:
        """The rows ``keep`` (a mask per chunk, given as a table) picks, as an in-memory table
        of the declared widths (int64 where a narrow column's values do not fit); of ``fields``
        only, where given. Last use, unless ``keep_open`` was called."""
        spec = " ".join(f for f in self._spec.split() if fields is None or f.partition(":")[0] in fields)
        kept = GrowingColumns(spec)  # grown in place: no list of parts joined at the end
        for rows in self.blocks(chunk, reuse=True):
            table = self.as_table(rows)
            picked = keep(table)
            kept.extend(*(table.cols[f][picked] for f in kept.fields))
        if self._last_use:
            self._file.close()
        give_back()  # the chunks read leave holes in the heap that the analyses after do not fit
        return kept.table()

    def filtered(self, keep: Callable[[Table], np.ndarray], chunk: int = 1 << 18) -> SpilledColumns:
        """The rows ``keep`` (a mask per chunk, in order) picks, on disk again: a new file, written a
        chunk at a time. This one is left as it was (not a last use)."""
        out = SpilledColumns(self._spec)
        for rows in self.blocks(chunk, reuse=True):
            picked = rows[keep(self.as_table(rows))]
            out._file.write(picked.data)
            out.size += len(picked)
        return out

    def load(self) -> Table:
        return self.select(lambda chunk: slice(None))


@dataclass
class Table:
    """Named equal-length integer columns (int64 times; int32 or narrower where values fit,
    see ``GrowingColumns``)."""

    cols: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def of_rows(cls, rows: np.ndarray, fields: list[str]) -> Table:
        """A matrix, a row per row, as a table of ``fields`` (views of its columns)."""
        return cls({name: rows[:, j] for j, name in enumerate(fields)})

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def chunks(self) -> Iterator[Table]:
        """The table as one chunk (read like ``SpilledColumns``)."""
        yield self

    def take(self, rows: np.ndarray) -> Table:
        """The table of ``rows`` only (copies: the whole table can then be freed)."""
        return Table({k: v[rows] for k, v in self.cols.items()})

    def taken(self, rows: np.ndarray) -> Table:
        """``take(rows)`` (row numbers or a mask), made a column at a time while this table is
        emptied (consumes it): the two copies are never held whole at once. Big columns land in
        file maps (``io.paged``), as the scan's do."""
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        out = {}
        for k in list(self.cols):
            column = self.cols.pop(k)
            out[k] = np.take(column, rows, out=paged.empty(len(rows), column.dtype), mode="clip")  # "raise" buffers
            del column
        return Table(out)

    def clear(self) -> None:
        """Empty this table in place (its columns keep their names and dtypes), so that its
        memory goes wherever else it is held too."""
        self.cols = {k: np.zeros(0, v.dtype) for k, v in self.cols.items()}


def time_span(tables: Iterable[Table | SpilledColumns]) -> tuple[int, int] | None:
    """(first start, last end) in ns over the rows of ``tables``, a negative dur counting as 0;
    spilled ones are read back a chunk at a time. None when there are no rows."""
    first, last = None, None
    for table in tables:
        for chunk in table.chunks():
            if len(chunk):
                lo, hi = int(chunk.ts.min()), int((chunk.ts + np.maximum(chunk.dur, 0)).max())
                first, last = (lo, hi) if first is None else (min(first, lo), max(last, hi))
    return None if first is None else (first, last)


def in_file_order(t: Table) -> bool:
    """Whether the rows of ``t`` are in file order (ordinals rising), as a scan leaves them."""
    return len(t) < 2 or bool(np.all(t.ordinal[1:] > t.ordinal[:-1]))


def merged_by_ordinal(a: Table, b: Table) -> Table:
    """The rows of two tables of the same fields, in ordinal order. Empties both as it goes
    (a column at a time): the copies are not all held at once. Where each table is in ordinal
    order already (a scan's, a file's), the rows of ``b`` are placed by a search (an int64
    per row of ``b`` and a byte per row, not an order of both and a joined copy of each column).
    Big columns land in file maps (``io.paged``), as the scan's do."""
    if not (in_file_order(a) and in_file_order(b)):
        order = np.argsort(np.concatenate([a.ordinal, b.ordinal]), kind="stable")
        out = {}
        for f in list(a.cols):
            joined = np.concatenate([a.cols.pop(f), b.cols.pop(f)])
            out[f] = np.take(joined, order, out=paged.empty(len(order), joined.dtype), mode="clip")
            del joined
        return Table(out)
    at_b = np.searchsorted(a.ordinal, b.ordinal, side="right")  # equal ordinals: a's row first, as the stable sort
    at_b += np.arange(len(b), dtype=at_b.dtype)
    from_a = np.ones(len(a) + len(b), bool)
    from_a[at_b] = False
    out = {}
    for f in list(a.cols):
        a_col, b_col = a.cols.pop(f), b.cols.pop(f)
        column = paged.empty(len(from_a), np.result_type(a_col, b_col))
        column[at_b] = b_col
        column[from_a] = a_col
        out[f] = column
        del a_col, b_col
    return Table(out)
