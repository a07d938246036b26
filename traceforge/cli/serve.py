"""Serving a trace to ui.perfetto.dev from 127.0.0.1, as Perfetto's ``open_trace_in_ui`` does.

The UI fetches ``http://127.0.0.1:9001/<file>`` when opened at
``https://ui.perfetto.dev/#!/?url=...``; its content security policy allows port 9001
only. The server answers with the CORS headers the UI needs and serves nothing but
that one file.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..io.read.codec import CODEC_ERRORS, detect_codec, new_decompressor

if TYPE_CHECKING:
    from .serve_http import TraceServer

UI = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001
UI_MEMORY_BYTES = 2 << 30  # what the browser's wasm engine can count on
MEMORY_PER_JSON_BYTE = 2  # it holds every JSON event until the end: 2-4x the JSON
_SAMPLE_BYTES = 4 << 20
_PIECE_BYTES = 1 << 10  # compressed bytes decompressed at a time (zstd's densest blocks expand 32,768x)
_MOST_DECOMPRESSED = 64 << 20


@dataclass(frozen=True)
class SizeEstimate:
    json_bytes: int  # uncompressed JSON
    exact: bool

    @property
    def too_large(self) -> bool:
        return self.json_bytes * MEMORY_PER_JSON_BYTE > UI_MEMORY_BYTES


def json_size(path: str) -> SizeEstimate:
    """The uncompressed size of a trace file: exact if plain or small, else extrapolated
    from the compression ratio of its first few MB. The sample is decompressed a little at a
    time and no further than ``_MOST_DECOMPRESSED`` (a small bomb expands without bound)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        sample = f.read(_SAMPLE_BYTES)
    codec = detect_codec(sample)
    if codec == "plain":
        return SizeEstimate(size, True)
    d = new_decompressor(codec)
    out = used = 0
    try:
        while used < len(sample) and out < _MOST_DECOMPRESSED:
            if d.eof:  # the next gzip member or zstd frame (a skippable one first, say)
                d = new_decompressor(codec)
            piece = sample[used:used + _PIECE_BYTES]
            out += len(d.decompress(piece))
            used += len(piece) - len(d.unused_data)
    except CODEC_ERRORS:
        return SizeEstimate(size, False)  # corrupt: the UI will say so; the size is no worse a guess
    if d.eof and len(sample) == size and used == size:
        return SizeEstimate(out, True)
    return SizeEstimate(int(out / max(used, 1) * size), False)


def ui_url(name: str, port: int = DEFAULT_PORT) -> str:
    return f"{UI}/#!/?url=http://127.0.0.1:{port}/{urllib.parse.quote(name)}"


def trace_server(path: str, port: int = DEFAULT_PORT, log=lambda line: None) -> TraceServer:
    """A server (not yet serving: call ``serve_forever``) for the file at ``path``."""
    from .serve_http import TraceServer  # here: http.server is ~20 ms of every command's start-up

    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    return TraceServer(os.path.abspath(path), port, log, UI)
