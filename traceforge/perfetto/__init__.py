"""Predict what Perfetto's JSON importer will drop, move or mis-render in a trace.

    report = check_trace("trace.json.gz")
    report.stats        # {"flow_end_without_start": 28196, ...}: Perfetto's stat names
    report.exit_code    # 0 clean, 1 something lost, 2 refused

The trace is streamed once (``collect``); slices and flows are then replayed in
Perfetto's order (``replay``). Rules and their severities: ``rules.RULES``.
"""

from __future__ import annotations

import time

from ..errors import TraceFormatError
from ..io.read.codec import input_codec
from ..io.read.reader import TraceReader
from .collect import collect
from .replay import replay
from .report import CheckReport, Example, Findings
from .rules import RULES

DEFAULT_MAX_EXAMPLES = 3


def check_trace(path: str, *, max_examples: int = DEFAULT_MAX_EXAMPLES) -> CheckReport:
    """Check ``path`` (``-``: standard input). A file that cannot be opened raises
    TraceFormatError; one that is not valid JSON gives a report with exit code 2."""
    started = time.perf_counter()
    input_codec(path)  # raises if the file cannot be opened at all
    reader = TraceReader(path)
    findings = Findings(max_examples)
    try:
        collected = collect(reader, findings)
    except TraceFormatError as e:
        findings.add("json_syntax_error", e.event, None, None, e.what)
    else:
        replay(collected, findings)
    return CheckReport.from_findings(reader.name, reader.event_count, findings, time.perf_counter() - started)


__all__ = ["DEFAULT_MAX_EXAMPLES", "RULES", "CheckReport", "Example", "check_trace"]
