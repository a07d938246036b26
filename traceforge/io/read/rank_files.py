"""Which files make up a job's traces, and which rank each one is."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import zstandard

from ...errors import UsageError
from ..write.jsontext import json_int
from ..write.output_names import is_output
from .codec import detect_codec, read_once
from .limits import read_limits

TRACE_SUFFIXES = (".json", ".json.gz", ".json.zst")
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)
HEAD_READ_BYTES = 1 << 16  # decompressed bytes read at a time while looking for "traceEvents"


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
    reports that). Decompresses only the head, ``HEAD_READ_BYTES`` first, then doubling while
    the keys before ``traceEvents`` run past it, up to the top-level metadata limit
    (``io.limits``): a few ms a file, where a reader's first batch decompresses megabytes. Each
    try walks the keys once: time linear in the head, whatever its values hold. Stdin or a FIFO is not
    looked at: it is read once, by its job."""
    if read_once(path):
        return None
    most = read_limits().max_metadata_bytes
    head = b""
    try:
        with open(path, "rb") as raw, _decompressed(raw) as f:
            while True:
                more = f.read(max(HEAD_READ_BYTES, len(head)))
                head += more
                keys = _keys_before_events(head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape"))
                if keys is not None:
                    return metadata_rank(keys) if keys is not _NOT_A_TRACE else None
                if not more or len(head) > most:
                    return None
    except (OSError, EOFError, zstandard.ZstdError):
        return None


def _decompressed(raw: io.BufferedReader) -> BinaryIO:
    codec = detect_codec(raw.peek(4)[:4])  # an open(path, "rb"): buffered
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if codec == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    return raw


_NOT_A_TRACE: dict = {}
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_int=json_int)


def _keys_before_events(text: str) -> dict | None:
    """The top-level keys before ``"traceEvents"`` where ``text`` reaches that key; None where
    it ends first (read more); ``_NOT_A_TRACE`` where it is not an object with that key."""
    pos = _WS.match(text).end()
    if text[pos:pos + 1] != "{":
        return _NOT_A_TRACE if pos < len(text) else None
    keys: dict = {}
    pos += 1
    try:
        while True:
            key, pos = _DECODER.raw_decode(text, _WS.match(text, pos).end())
            pos = _WS.match(text, pos).end()
            if type(key) is not str or text[pos:pos + 1] != ":":
                return _NOT_A_TRACE if pos < len(text) else None
            if key == "traceEvents":
                return keys
            keys[key], pos = _DECODER.raw_decode(text, _WS.match(text, pos + 1).end())
            pos = _WS.match(text, pos).end()
            if text[pos:pos + 1] != ",":
                return _NOT_A_TRACE if pos < len(text) else None
            pos += 1
    except (json.JSONDecodeError, RecursionError):  # the head ends inside a value, or is not JSON
        return None


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
