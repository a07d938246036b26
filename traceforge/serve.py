"""Serving a trace to ui.perfetto.dev from 127.0.0.1, as Perfetto's ``open_trace_in_ui`` does.

The UI fetches ``http://127.0.0.1:9001/<file>`` when opened at
``https://ui.perfetto.dev/#!/?url=...``; its content security policy allows port 9001
only. The server answers with the CORS headers the UI needs and serves nothing but
that one file.
"""

from __future__ import annotations

import http.server
import os
import shutil
import urllib.parse
from dataclasses import dataclass


from .errors import UsageError
from .io.codec import CODEC_ERRORS, detect_codec, new_decompressor

UI = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001
UI_MEMORY_BYTES = 2 << 30  # what the browser's wasm engine can count on
MEMORY_PER_JSON_BYTE = 2  # it holds every JSON event until the end: 2-4x the JSON
_SAMPLE_BYTES = 4 << 20


@dataclass(frozen=True)
class SizeEstimate:
    json_bytes: int  # uncompressed JSON
    exact: bool

    @property
    def too_large(self) -> bool:
        return self.json_bytes * MEMORY_PER_JSON_BYTE > UI_MEMORY_BYTES


def json_size(path: str) -> SizeEstimate:
    """The uncompressed size of a trace file: exact if plain or small, else extrapolated
    from the compression ratio of its first few MB."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        sample = f.read(_SAMPLE_BYTES)
    codec = detect_codec(sample)
    if codec == "plain":
        return SizeEstimate(size, True)
    d = new_decompressor(codec)
    try:
        out = len(d.decompress(sample))
    except CODEC_ERRORS:
        return SizeEstimate(size, False)  # corrupt: the UI will say so; the size is no worse a guess
    used = len(sample) - len(d.unused_data)
    if len(sample) == size and used == size:
        return SizeEstimate(out, True)
    return SizeEstimate(int(out / max(used, 1) * size), False)


def ui_url(name: str, port: int = DEFAULT_PORT) -> str:
    return f"{UI}/#!/?url=http://127.0.0.1:{port}/{urllib.parse.quote(name)}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _TraceServer

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", UI)
        self.send_header("Access-Control-Allow-Private-Network", "true")  # Chrome's private network access
        self.send_header("Cache-Control", "no-cache")

    def do_OPTIONS(self) -> None:  # CORS preflight
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.end_headers()

    def do_GET(self) -> None:
        if urllib.parse.urlsplit(self.path).path != self.server.url_path:
            self.send_error(404, "only the trace is served here")
            return
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(os.path.getsize(self.server.file)))
        self.end_headers()
        with open(self.server.file, "rb") as f:
            try:
                shutil.copyfileobj(f, self.wfile, 1 << 20)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the UI went away mid-transfer

    def log_message(self, format: str, *args) -> None:  # one line per request, on stderr
        self.server.log(f"{self.address_string()} {format % args}")


class _TraceServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, file: str, port: int, log):
        self.file = file
        self.url_path = "/" + urllib.parse.quote(os.path.basename(file))
        self.log = log
        try:
            super().__init__(("127.0.0.1", port), _Handler)
        except OSError as e:
            raise UsageError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e} "
                             "(another server there? Perfetto's own trace_processor uses 9001 too)") from None


def trace_server(path: str, port: int = DEFAULT_PORT, log=lambda line: None) -> _TraceServer:
    """A server (not yet serving: call ``serve_forever``) for the file at ``path``."""
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    return _TraceServer(os.path.abspath(path), port, log)
