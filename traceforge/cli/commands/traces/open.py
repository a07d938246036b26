"""``traceforge open``: show a trace in ui.perfetto.dev, served from this machine."""

from __future__ import annotations

import argparse
import os
import sys

from ....errors import UsageError
from ....io.read.codec import read_once
from ....io.read.reader import check_start
from ...options import port_number
from ...serve import DEFAULT_PORT, MEMORY_PER_JSON_BYTE, UI, json_size, trace_server, ui_url


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "open",
        help="serve a trace on 127.0.0.1 and open it in ui.perfetto.dev",
        description="Serve FILE on 127.0.0.1 with the headers ui.perfetto.dev needs, print the URL that "
        "makes the UI load it and open a browser there (when one is available). Serves until interrupted "
        "(Ctrl-C). The trace never leaves this machine: the UI runs in your browser.",
    )
    p.add_argument("file", help="trace file (.json, .json.gz, .json.zst)")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one). ui.perfetto.dev fetches from "
                   f"127.0.0.1:{DEFAULT_PORT} only (its content security policy): another port is for a UI you host "
                   "yourself")
    p.add_argument("--no-browser", action="store_true", help="only print the URL")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if read_once(args.file):  # the browser fetches the file (again on a reload): a pipe's bytes are gone once read
        raise UsageError(f"{args.file}: open serves a file the browser can fetch again, not standard input or a FIFO "
                         "(write it to a file first)")
    check_start(args.file)  # what the UI would refuse at the first bytes: said here, not in the browser
    server = trace_server(args.file, args.port, log=lambda line: print(line, file=sys.stderr, flush=True))
    port = server.server_address[1]  # the one chosen where --port is 0
    size = json_size(args.file)
    if size.too_large:
        gb = size.json_bytes / 1e9
        print(f"warning: {args.file} is {'' if size.exact else 'about '}{gb:.1f} GB of JSON; the UI holds "
              f"{MEMORY_PER_JSON_BYTE}-4x that in browser memory and has about 2-4 GB, so it will likely fail "
              f"to load. Instead run `trace_processor server http {args.file}` (older versions: "
              f"`trace_processor --httpd {args.file}`) and open {UI}, which "
              f"connects to it, or cut the trace first: `traceforge trim {args.file} -o part.json.gz --steps N-M`.",
              file=sys.stderr, flush=True)
    if port != DEFAULT_PORT:
        print(f"note: {UI} fetches traces from 127.0.0.1:{DEFAULT_PORT} only; on port {port} the link "
              "below works with a Perfetto UI you host yourself", file=sys.stderr, flush=True)
    url = ui_url(os.path.basename(args.file), port)
    print(url, flush=True)
    if not args.no_browser and not _open_browser(url):
        print("no graphical browser found here: open the URL above in yours", file=sys.stderr, flush=True)
    print(f"serving {args.file} on http://127.0.0.1:{port}/ until interrupted (Ctrl-C)", file=sys.stderr, flush=True)
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt as e:
            if getattr(e, "signum", None) is not None:  # SIGTERM, SIGHUP: the command's exit says so
                raise
            print("stopped", file=sys.stderr)
    return 0


def _open_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser; False if there is none (a text-mode browser
    would take over the terminal and cannot run the UI anyway)."""
    import webbrowser  # here: its imports are a few ms of every command's start-up

    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    if type(browser) is webbrowser.GenericBrowser:  # lynx, w3m, ...: runs in the foreground
        return False
    return browser.open_new_tab(url)
