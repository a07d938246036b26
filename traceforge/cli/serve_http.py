"""The HTTP side of ``serve``: one file, with the CORS headers ui.perfetto.dev needs (imported
only when a trace is served).

Only requests addressed to this machine by name are answered: a Host header other than
``127.0.0.1`` or ``localhost`` (with or without a port) gets 403, more than one gets 400, so a page whose own host name
is made to resolve to 127.0.0.1 (DNS rebinding) cannot read the trace. The file is opened once
when the server is made and that open file is what every request gets: renaming it, moving it
away or retargeting a symlink to it afterwards changes nothing that is served."""

from __future__ import annotations

import http.server
import os
import re
import urllib.parse

from ..errors import UsageError

_LOCAL_HOST = re.compile(r"(127\.0\.0\.1|localhost)(:[0-9]{1,5})?", re.IGNORECASE)
_CHUNK = 1 << 20


def local_host(host: str | None) -> bool:
    """Whether a Host header names this machine as the link does: 127.0.0.1 or localhost,
    with or without a port."""
    return host is not None and _LOCAL_HOST.fullmatch(host.strip()) is not None


class _Handler(http.server.BaseHTTPRequestHandler):
    server: TraceServer

    def _local(self) -> bool:
        """False (after answering 403) where the request's Host is not this machine."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1:  # which one a proxy or the client meant is ambiguous: refused
            self.send_error(400, "more than one Host header")
            return False
        if hosts and local_host(hosts[0]):
            return True
        self.send_error(403, "only requests to 127.0.0.1 or localhost are answered")
        return False

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", self.server.origin)
        self.send_header("Access-Control-Allow-Private-Network", "true")  # Chrome's private network access
        self.send_header("Cache-Control", "no-cache")

    def do_OPTIONS(self) -> None:  # CORS preflight
        if not self._local():
            return
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.end_headers()

    def _headers(self) -> bool:
        """The trace's status and headers (what HEAD answers); False where the path is not the trace."""
        if not self._local():
            return False
        if urllib.parse.urlsplit(self.path).path != self.server.url_path:
            self.send_error(404, "only the trace is served here")
            return False
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(self.server.size))
        self.end_headers()
        return True

    def do_HEAD(self) -> None:
        self._headers()

    def do_GET(self) -> None:
        if not self._headers():
            return
        offset = 0
        try:
            while offset < self.server.size:  # pread: requests on their own threads share the one descriptor
                chunk = os.pread(self.server.fd, min(_CHUNK, self.server.size - offset), offset)
                if not chunk:
                    break  # truncated while served: Content-Length promised more, the client sees it short
                self.wfile.write(chunk)
                offset += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the UI went away mid-transfer

    def log_message(self, format: str, *args) -> None:  # one line per request, on stderr
        self.server.log(f"{self.address_string()} {format % args}")


class TraceServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, file: str, port: int, log, origin: str):
        self.file = file
        try:
            self.fd = os.open(file, os.O_RDONLY)  # resolved once: what is served from now on
        except OSError as e:
            raise UsageError(f"{file}: cannot open: {e.strerror or e}") from None
        self.size = os.fstat(self.fd).st_size
        self.origin = origin  # the only site whose pages may fetch the file
        self.url_path = "/" + urllib.parse.quote(os.path.basename(file))
        self.log = log
        try:
            super().__init__(("127.0.0.1", port), _Handler)
        except OSError as e:
            os.close(self.fd)
            raise UsageError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e} "
                             "(another server there? Perfetto's own trace_processor uses 9001 too)") from None

    def server_close(self) -> None:
        super().server_close()
        os.close(self.fd)
