"""Writing tables to files, a chunk at a time: ``<dir>/<kind>.csv`` and ``<kind>.parquet``,
under temporary names renamed onto their own only once every file is complete. A directory
that is not there yet is written whole under a temporary name beside it (its missing parents
too) and renamed into place at the end: a failed export (a full disk, a signal) leaves no
directory, no file and no partial table."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from ...errors import UsageError
from ...util.lazy_pandas import pd
from ..memory import tempfiles
from .output import publish


class TableChunk(Protocol):
    """Rows of one kind's table: its CSV text and its DataFrame."""

    kind: str

    def __len__(self) -> int: ...

    def csv(self, header: bool) -> Iterator[bytes]: ...

    def frame(self) -> pd.DataFrame: ...


def check_parquet() -> None:
    """Fail early, in one line, when Parquet cannot be written."""
    if importlib.util.find_spec("pyarrow") is None:
        raise UsageError("Parquet output needs pyarrow (pip install pyarrow); CSV works without it")


class _Outputs:
    """The tables' files, written under temporary names and renamed onto their own only once
    every one is complete: a failed export leaves no half-written table. A directory not yet
    there is made under a temporary name (``made``) and renamed into place last."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, Path]] = []
        self._made: list[tuple[str, Path]] = []  # (temporary directory, the top missing directory it becomes)

    def directory(self, out: Path) -> Path:
        """Where ``out``'s files are written: ``out`` itself where it is a directory already, else
        the same place inside a new temporary directory beside its top missing ancestor."""
        if out.is_dir():
            return out
        top = out
        while not top.parent.exists() and top.parent != top:
            top = top.parent
        if top.exists() or not top.parent.is_dir():  # a file on the way (or no directory to make it in)
            raise UsageError(f"cannot create {out}: {'File exists' if top.exists() else 'Not a directory'}")
        made = next((tmp for tmp, t in self._made if t == top), None)  # --csv and --parquet in one new directory
        if made is not None:
            inside = Path(made) / out.relative_to(top)
            inside.mkdir(parents=True, exist_ok=True)
            return inside
        try:
            tmp = tempfiles.make_dir(top.parent, f".{top.name}.", ".tmp")
        except OSError as e:
            raise UsageError(f"cannot create {out}: {e.strerror or e}") from None
        self._made.append((tmp, top))
        inside = Path(tmp) / out.relative_to(top)
        inside.mkdir(parents=True, exist_ok=True)
        return inside

    def temporary(self, path: Path) -> str:
        fd, tmp = tempfiles.make(path.parent, f".{path.name}.", ".tmp")
        os.close(fd)
        self._pending.append((tmp, path))
        return tmp

    def publish(self) -> None:
        for tmp, path in self._pending:
            publish(tmp, path)
        for tmp, top in self._made:
            publish(tmp, top)

    def discard(self) -> None:
        for tmp, _ in self._pending:
            Path(tmp).unlink(missing_ok=True)
        for tmp, _ in self._made:
            shutil.rmtree(tmp, ignore_errors=True)


class _CsvFile:
    def __init__(self, path: str):
        self._f = open(path, "wb")
        self.rows = 0

    def write(self, chunk: TableChunk) -> None:
        for text in chunk.csv(header=self.rows == 0):
            self._f.write(text)
        self.rows += len(chunk)

    def close(self) -> None:
        self._f.close()


class _ParquetFile:
    def __init__(self, path: str):
        self._path, self._writer, self._file, self.rows = path, None, None, 0

    def write(self, chunk: TableChunk) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        df = chunk.frame()
        schema = None if self._writer is None else self._writer.schema
        table = pa.Table.from_pandas(df, preserve_index=False, schema=schema)
        if self._writer is None:  # a file object: pyarrow takes a str path as a URI, in UTF-8
            self._file = open(self._path, "wb")
            self._writer = pq.ParquetWriter(self._file, table.schema)
        self._writer.write_table(table)
        self.rows += len(df)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._file is not None:
            self._file.close()


def write_tables(chunks: Iterable[TableChunk], *, csv_dir: str | None = None,
                 parquet_dir: str | None = None) -> list[tuple[Path, int]]:
    """Write ``<dir>/<kind>.csv`` and/or ``<dir>/<kind>.parquet``, each kind's chunks (non-empty)
    appended in turn; return the files written, each with its rows."""
    if parquet_dir is not None:
        check_parquet()
    wanted = [(Path(d), suffix) for d, suffix in ((csv_dir, ".csv"), (parquet_dir, ".parquet")) if d is not None]
    outputs = _Outputs()
    try:
        where = [outputs.directory(out) for out, _ in wanted]  # written here, renamed to ``out`` at the end
    except BaseException:
        outputs.discard()
        raise
    dirs = [(w, suffix) for w, (_, suffix) in zip(where, wanted)]
    files: list[dict[str, _CsvFile | _ParquetFile]] = [{} for _ in dirs]

    def close_all(failing: bool = False) -> None:
        """Close every file (each, even after one fails); raise the first error unless ``failing``
        (the export is being thrown away: its error is the one to report)."""
        first: Exception | None = None
        for opened in files:
            for f in opened.values():
                try:
                    f.close()
                except Exception as e:  # flushing to a full disk
                    first = first or e
        if first is not None and not failing:
            raise first
    try:
        for chunk in chunks:
            for (out, suffix), opened in zip(dirs, files):
                if chunk.kind not in opened:
                    kind_file = _CsvFile if suffix == ".csv" else _ParquetFile
                    opened[chunk.kind] = kind_file(outputs.temporary(out / f"{chunk.kind}{suffix}"))
                opened[chunk.kind].write(chunk)
        close_all()  # flushing can fail too (a full disk)
    except BaseException:
        close_all(failing=True)
        outputs.discard()
        raise
    try:
        outputs.publish()
    except OSError as e:
        outputs.discard()
        raise UsageError(f"cannot write the tables: {e.strerror or e}") from None
    return [(out / f"{kind}{suffix}", f.rows)  # the CSV files first
            for (out, suffix), opened in zip(wanted, files) for kind, f in opened.items()]
