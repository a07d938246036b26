"""Memory on tiny events (issue 55 item 5): a scanned batch's rows are NFIELDS int64 per event,
so a batch sized in bytes alone holds rows many times its bytes where events are tiny. The reader
sizes each scan from the last one's events per byte (``io.reader.MAX_BATCH_EVENTS``): ``info``
and ``stats`` on 2x10^6 empty events stay under 300 MB peak RSS (a subprocess, measured by
``resource``'s children's maxrss)."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from traceforge.io.read.reader import MAX_BATCH_EVENTS, TraceReader

MB = 1 << 20
EVENTS = 2_000_000


@pytest.fixture(scope="module")
def empty_events(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "empty.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b",".join([b"{}"] * EVENTS) + b"]}", 6))
    return path


def test_batches_of_tiny_events_are_bounded_in_events(empty_events):
    reader = TraceReader(str(empty_events), on_read=lambda n: None)
    counts = [batch.count for batch in reader.batches()]
    assert sum(counts) == EVENTS and max(counts) <= 2 * MAX_BATCH_EVENTS, max(counts)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["info", "stats"])
def test_peak_rss_on_many_empty_events(command, empty_events):
    code = ("import resource, subprocess, sys; r = subprocess.run([sys.executable, '-m', 'traceforge', *sys.argv[1:]], "
            "capture_output=True); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code, command, str(empty_events), "-q"], cwd=ROOT, capture_output=True,
                       timeout=300)
    rc, peak_kb = r.stdout.split()
    assert rc == b"0", r.stderr.decode()
    assert int(peak_kb) * 1024 < 300 * MB, f"{command}: peak {int(peak_kb) >> 10} MB"
