"""Which files make up a job's traces, and which rank each one is."""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import orjson
import zstandard

from ..errors import UsageError
from .codec import detect_codec, read_once
from .limits import read_limits
from .output_names import is_output

TRACE_SUFFIXES = (".json", ".json.gz", ".json.zst")
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)
HEAD_READ_BYTES = 1 << 16  # decompressed bytes read at a time while looking for "traceEvents"
TRACE_EVENTS_KEY = b'"traceEvents"'


def trace_paths(inputs: Iterable[str | os.PathLike]) -> list[str]:
    """Files as given; a directory stands for its trace files (one per rank), sorted, less the
    traces traceforge wrote there (``*.annotated.json.gz``, ...: ``io.output_names``), which a
    note on stderr names (give such a file by name to read it)."""
    paths = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found, skipped = _listed_traces(p)
            if not found:
                only = f" (only traceforge's outputs: {', '.join(skipped)})" if skipped else ""
                raise UsageError(f"{item}: no trace files (*.json, *.json.gz, *.json.zst) in this directory{only}")
            if skipped:
                print(f"traceforge: note: {item}: skipped {len(skipped)} trace(s) traceforge wrote "
                      f"({_listed(skipped)}); name a file to read it", file=sys.stderr)
            paths.extend(found)
        else:
            paths.append(str(item))
    return paths


def _listed_traces(directory: Path) -> tuple[list[str], list[str]]:
    """The trace files in ``directory`` (sorted), and the names of those traceforge wrote."""
    listed = sorted(str(f) for f in directory.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
    return [f for f in listed if not is_output(f)], [Path(f).name for f in listed if is_output(f)]


def trace_files(inputs: Iterable[str | os.PathLike]) -> list[str]:
    """``trace_paths`` without its notes and errors: the files a run over ``inputs`` would read
    (a directory that holds none stands for nothing)."""
    paths = []
    for item in inputs:
        p = Path(item)
        try:
            paths.extend(_listed_traces(p)[0] if p.is_dir() else [str(item)])
        except OSError:  # an unreadable directory: the run itself says so
            pass
    return paths


def _listed(names: list[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def metadata_rank(metadata: dict) -> int | None:
    """``distributedInfo.rank`` of a trace's top-level keys, if it is an int."""
    info = metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if type(rank) is int else None


def head_rank(path: str) -> int | None:
    """``distributedInfo.rank`` among the top-level keys before ``traceEvents`` (where Kineto
    writes it), or None (no such key there, an array trace, unreadable: the job on the file
    reports that). Decompresses only the head, ``HEAD_READ_BYTES`` at a time, up to the
    top-level metadata limit (``io.limits``): a few ms a file, where a reader's first batch
    decompresses megabytes. Stdin or a FIFO is not looked at: it is read once, by its job."""
    if read_once(path):
        return None
    most = read_limits().max_metadata_bytes
    head = bytearray()
    searched = 0
    try:
        with open(path, "rb") as raw, _decompressed(raw) as f:
            while len(head) <= most:
                more = f.read(HEAD_READ_BYTES)
                if not more:
                    return None
                head += more
                while (at := head.find(TRACE_EVENTS_KEY, searched)) >= 0:
                    searched = at + 1
                    keys = _top_level_keys(bytes(head[:at]))
                    if keys is not None:
                        return metadata_rank(keys)
                searched = max(searched, len(head) - len(TRACE_EVENTS_KEY))
    except (OSError, EOFError, zstandard.ZstdError):
        return None
    return None


def _decompressed(raw: io.BufferedReader) -> BinaryIO:
    codec = detect_codec(raw.peek(4)[:4])  # an open(path, "rb"): buffered
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if codec == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    return raw


def _top_level_keys(head: bytes) -> dict | None:
    """The keys of a top-level object that ``head`` opens and that continues with a
    ``"traceEvents"`` key; None where ``head`` is not that (the key is inside a value)."""
    text = head.removeprefix(b"\xef\xbb\xbf").strip()
    if not text.startswith(b"{") or not text.endswith((b"{", b",")):
        return None
    try:
        keys = orjson.loads(text + TRACE_EVENTS_KEY + b":null}")
    except orjson.JSONDecodeError:
        return None
    return keys if isinstance(keys, dict) else None


def name_rank(path: str) -> int | None:
    """The number after ``rank`` in the file name (``rank3``, ``rank-3``, ``rank_3``)."""
    m = RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def file_ranks(paths: list[str]) -> list[tuple[int, str]]:
    """Each trace's rank, and where it came from, by the one rule of every many-file command:
    ``distributedInfo.rank`` among the keys before ``traceEvents`` (``head_rank``; "distributedInfo"),
    else the number in the file name (``name_rank``; "file name"), else the next number after
    the highest rank found, in the order of ``paths`` ("order": no file takes another's rank)."""
    found = []
    for path in paths:
        rank, source = head_rank(path), "distributedInfo"
        if rank is None:
            rank, source = name_rank(path), "file name"
        found.append((rank, source))
    next_rank = max((r for r, _ in found if r is not None), default=-1) + 1
    out = []
    for rank, source in found:
        if rank is None:
            rank, source, next_rank = next_rank, "order", next_rank + 1
        out.append((rank, source))
    return out


def one_per_rank(ranked: Iterable[tuple[int, str]]) -> None:
    """(rank, path) pairs, in the order to report them: a second trace of one rank is an error,
    for every command that takes one trace per rank."""
    seen: dict[int, str] = {}
    for rank, path in ranked:
        if rank in seen:
            raise UsageError(f"{path}: rank {rank} again (already {seen[rank]}); give one trace per rank")
        seen[rank] = path
