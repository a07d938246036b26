"""Writing tables to files, a chunk at a time: ``<dir>/<kind>.csv`` and ``<kind>.parquet``,
under temporary names renamed onto their own only once every file is complete."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from ..errors import UsageError
from ..util.lazy_pandas import pd
from . import tempfiles
from .codec import publish


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
    every one is complete: a failed export leaves no half-written table."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, Path]] = []

    def temporary(self, path: Path) -> str:
        fd, tmp = tempfiles.make(path.parent, f".{path.name}.", ".tmp")
        os.close(fd)
        self._pending.append((tmp, path))
        return tmp

    def publish(self) -> None:
        for tmp, path in self._pending:
            publish(tmp, path)

    def discard(self) -> None:
        for tmp, _ in self._pending:
            Path(tmp).unlink(missing_ok=True)


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
    dirs = [(Path(d), suffix) for d, suffix in ((csv_dir, ".csv"), (parquet_dir, ".parquet")) if d is not None]
    for out, _ in dirs:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create {out}: {e.strerror}") from None
    files: list[dict[str, _CsvFile | _ParquetFile]] = [{} for _ in dirs]
    outputs = _Outputs()

    def close_all() -> None:
        for opened in files:
            for f in opened.values():
                f.close()
    try:
        for chunk in chunks:
            for (out, suffix), opened in zip(dirs, files):
                if chunk.kind not in opened:
                    kind_file = _CsvFile if suffix == ".csv" else _ParquetFile
                    opened[chunk.kind] = kind_file(outputs.temporary(out / f"{chunk.kind}{suffix}"))
                opened[chunk.kind].write(chunk)
        close_all()  # flushing can fail too (a full disk)
    except BaseException:
        close_all()
        outputs.discard()
        raise
    outputs.publish()
    return [(out / f"{kind}{suffix}", f.rows)  # the CSV files first
            for (out, suffix), opened in zip(dirs, files) for kind, f in opened.items()]
