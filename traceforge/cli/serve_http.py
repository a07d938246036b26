"""The HTTP side of ``serve``: one file, with the CORS headers ui.perfetto.dev needs (imported
only when a trace is served)."""

from __future__ import annotations

import http.server
import os
import shutil
import urllib.parse

from ..errors import UsageError


class _Handler(http.server.BaseHTTPRequestHandler):
    server: TraceServer

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", self.server.origin)
        self.send_header("Access-Control-Allow-Private-Network", "true")  # Chrome's private network access
        self.send_header("Cache-Control", "no-cache")

    def do_OPTIONS(self) -> None:  # CORS preflight
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.end_headers()

    def _headers(self) -> bool:
        """The trace's status and headers (what HEAD answers); False where the path is not the trace."""
        if urllib.parse.urlsplit(self.path).path != self.server.url_path:
            self.send_error(404, "only the trace is served here")
            return False
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(os.path.getsize(self.server.file)))
        self.end_headers()
        return True

    def do_HEAD(self) -> None:
        self._headers()

    def do_GET(self) -> None:
        if not self._headers():
            return
        with open(self.server.file, "rb") as f:
            try:
                shutil.copyfileobj(f, self.wfile, 1 << 20)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the UI went away mid-transfer

    def log_message(self, format: str, *args) -> None:  # one line per request, on stderr
        self.server.log(f"{self.address_string()} {format % args}")


class TraceServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, file: str, port: int, log, origin: str):
        self.file = file
        self.origin = origin  # the only site whose pages may fetch the file
        self.url_path = "/" + urllib.parse.quote(os.path.basename(file))
        self.log = log
        try:
            super().__init__(("127.0.0.1", port), _Handler)
        except OSError as e:
            raise UsageError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e} "
                             "(another server there? Perfetto's own trace_processor uses 9001 too)") from None
