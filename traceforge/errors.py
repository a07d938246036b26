"""Exception classes; the CLI turns each into one line and exit code 1."""

from __future__ import annotations


class TraceforgeError(Exception):
    """Base of every error traceforge reports to the user."""


class TraceFormatError(TraceforgeError):
    """The input is not a readable trace: says where (file, byte offset, event) and what."""

    def __init__(self, path: str, what: str, *, offset: int | None = None, event: int | None = None):
        self.path, self.what, self.offset, self.event = path, what, offset, event
        where = []
        if event is not None:
            where.append(f"event {event}")
        if offset is not None:
            where.append(f"byte {offset}")
        loc = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{path}{loc}: {what}")

    def __reduce__(self):  # keyword-only arguments: pickle (for worker processes) needs help
        return _rebuild_format_error, (self.path, self.what, self.offset, self.event)


def _rebuild_format_error(path: str, what: str, offset: int | None, event: int | None) -> TraceFormatError:
    return TraceFormatError(path, what, offset=offset, event=event)


class TraceNotFoundError(TraceforgeError, FileNotFoundError):
    """An input file that does not exist."""

    def __init__(self, path: str, what: str):
        self.path, self.what = path, what
        super().__init__(f"{path}: {what}")

    def __reduce__(self):
        return TraceNotFoundError, (self.path, self.what)


class UsageError(TraceforgeError, ValueError):
    """The command line or API call asks for something that cannot be done (a ``ValueError``)."""
