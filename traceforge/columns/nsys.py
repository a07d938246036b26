"""``nsys stats -r cuda_gpu_trace --format csv`` output as ``TraceColumns`` (GPU ops only).

So nsys users get the same classification as PyTorch-profiler users. Old and new headers
(``Throughput (MBps)``/``(MB/s)``, with or without ``GreenCtx``) are both read by column
name; preamble lines before the header (NOTICE, "Processing [...]") are skipped; names
are quoted CSV fields that may hold commas. Rows are kernels, ``[CUDA memcpy ...]`` copies
and ``[CUDA memset]``; times are integer ns already.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from itertools import islice

import numpy as np

from ..errors import TraceFormatError
from ..io.read.codec import detect_codec, iter_decompressed, read_once
from ..util.lazy_pandas import pd
from .scan import KERNEL, MEMCPY, MEMSET, TraceColumns
from .table import Table

_SNIFF_BYTES = 1 << 16
_MAX_PREAMBLE_LINES = 200
_WANTED = {"startns": "start", "durationns": "duration", "corrid": "correlation", "device": "device",
           "strm": "stream", "stream": "stream", "name": "name"}
_DEVICE_ID = re.compile(r"\((\d+)\)\s*$")


def _key(column: str) -> str:
    return re.sub(r"[^a-z]", "", column.lower())


def _head_text(path: str) -> str:
    chunks = iter_decompressed(path)
    head = b""
    try:
        for chunk in chunks:
            head += chunk
            if len(head) >= _SNIFF_BYTES:
                break
    finally:
        chunks.close()
    return head[:_SNIFF_BYTES].decode("utf-8", "replace")


def _header_line(lines: list[str]) -> int | None:
    """Index of the CSV header among the first lines, or None."""
    for i, line in enumerate(islice(lines, _MAX_PREAMBLE_LINES)):
        try:
            keys = {_key(c) for c in next(csv.reader([line]))}
        except (csv.Error, StopIteration):
            continue
        if {"startns", "durationns", "name"} <= keys:
            return i
    return None


def is_nsys_gpu_trace(path: str) -> bool:
    """True when ``path`` holds an nsys ``cuda_gpu_trace`` CSV (judged by content, not name).
    Stdin or a FIFO is read once, as a trace: never sniffed (its head would be gone)."""
    if read_once(path):
        return False
    text = _head_text(path).lstrip("\ufeff \t\r\n")
    if text[:1] in ("{", "["):
        return False
    return _header_line(text.splitlines()) is not None


def read_nsys_gpu_trace(path: str) -> TraceColumns:
    """The GPU ops of an nsys ``cuda_gpu_trace`` CSV; device ids from ``Device`` (``NVIDIA H100 (0)``)."""
    lines = _head_text(path).lstrip("\ufeff").splitlines()
    skip = _header_line(lines)
    if skip is None:
        raise TraceFormatError(path, "no nsys cuda_gpu_trace header (Start (ns), Duration (ns), ..., Name) "
                                     f"in the first {_MAX_PREAMBLE_LINES} lines")
    header = next(csv.reader([lines[skip]]))
    columns = {c: _WANTED[_key(c)] for c in header if _key(c) in _WANTED}
    with open(path, "rb") as f:
        codec = detect_codec(f.read(4))
    try:
        df = pd.read_csv(path, skiprows=skip, usecols=list(columns), dtype={c: str for c in columns},
                         keep_default_na=False, compression={"gzip": "gzip", "zstd": "zstd"}.get(codec))
    except (ValueError, pd.errors.ParserError) as e:
        raise TraceFormatError(path, f"unreadable nsys CSV: {e}") from None
    df = df.rename(columns=columns)
    n = len(df)
    start = _int_column(df, "start", path)
    duration = _int_column(df, "duration", path)
    name_codes, names = pd.factorize(df["name"].to_numpy(dtype=object))
    names = [str(x) for x in names]
    kind_by_name = np.array([_kind(x) for x in names] or [KERNEL], np.int64)
    device = _device_ids(df["device"]) if "device" in df else np.zeros(n, np.int64)
    stream = _int_column(df, "stream", path, default=-1)
    track_codes, tracks = pd.factorize(pd.MultiIndex.from_arrays([device, stream])) if n else ([], [])
    gpu = {
        "ordinal": np.arange(n, dtype=np.int64),
        "kind": kind_by_name[name_codes] if n else np.zeros(0, np.int64),
        "ts": start,
        "dur": duration,
        "device": device,
        "stream": stream,
        "track": np.asarray(track_codes, np.int64),
        "correlation": _int_column(df, "correlation", path, default=-1),
        "name": np.asarray(name_codes, np.int64),
        "bytes": np.full(n, -1, np.int64),
    }
    return TraceColumns(
        path=path, gpu=Table(gpu),
        launches=_empty("ordinal", "ts", "dur", "track", "correlation", "name"),
        cpu_ops=_empty("ordinal", "ts", "dur", "track", "name", "cat"),
        ranges=_empty("ordinal", "ts", "dur", "track", "name"), range_args=[],
        names=names, tracks=[(int(d), int(s)) for d, s in tracks], cats=[], metadata={},
        phase_cat_counts=Counter({("X", "nsys_gpu_trace"): n}), event_count=n,
    )


def _empty(*keys: str) -> Table:
    return Table({k: np.zeros(0, np.int64) for k in keys})


def _int_column(df: pd.DataFrame, column: str, path: str, default: int | None = None) -> np.ndarray:
    """Integers of ``column``; blank cells (or a missing column) are ``default`` if one is given."""
    if column not in df and default is not None:
        return np.full(len(df), default, np.int64)
    text = df[column].str.strip()
    if default is not None:
        text = text.mask(text == "", str(default))
    try:
        return text.astype(np.int64).to_numpy()
    except (ValueError, OverflowError):
        bad = next(v for v in text if not re.fullmatch(r"-?\d+", v))
        raise TraceFormatError(path, f"column {column}: not an integer: {bad!r}") from None


def _device_ids(column: pd.Series) -> np.ndarray:
    """``NVIDIA H100 (0)`` -> 0, a bare number as is; others numbered after the highest id."""
    codes, values = pd.factorize(column.to_numpy(dtype=object))
    found = [_DEVICE_ID.search(v) or re.fullmatch(r"\s*(\d+)\s*", v) for v in values]
    next_id = max((int(m.group(1)) for m in found if m), default=-1) + 1
    ids = []
    for m in found:
        if m:
            ids.append(int(m.group(1)))
        else:
            ids.append(next_id)
            next_id += 1
    return np.asarray(ids or [0], np.int64)[codes]


def _kind(name: str) -> int:
    lower = name.lower()
    if lower.startswith("[cuda memcpy"):
        return MEMCPY
    if lower.startswith("[cuda memset"):
        return MEMSET
    return KERNEL

