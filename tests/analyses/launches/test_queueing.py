"""Launch delay split into queueing (behind earlier GPU ops on the stream) and launch overhead."""

import json

import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.launches.delay import launch_table
from traceforge.columns.scan import scan


def _trace(path):
    events = []
    # op 1 launched at 0 (returns at 5), runs 10..1010; op 2 launched at 20 (returns at 25), starts at 1012
    # (2 us after op 1 ends: 987 us queued, 2 us overhead); op 3 launched at 2000, runs from 2004 (idle stream)
    for corr, launch, start, dur in ((1, 0, 10, 1000), (2, 20, 1012, 50), (3, 2000, 2009, 10)):
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch, "dur": 5,
             "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": start, "dur": dur,
             "args": {"correlation": corr, "device": 0, "stream": 7}},
        ]
    path.write_text(json.dumps({"traceEvents": events}))


def test_queue_wait_and_overhead(tmp_path):
    path = tmp_path / "t.json"
    _trace(path)
    table = launch_table(scan(str(path)))
    rows = table.sort_values("correlation")
    assert rows["launch_delay"].tolist() == [5_000, 987_000, 4_000]
    assert rows["queue_wait"].tolist() == [0, 985_000, 0]
    assert rows["launch_overhead"].tolist() == [5_000, 2_000, 4_000]
    r = run_cli("launch-stats", str(path))
    text = " ".join(r.stdout.decode().split())
    assert r.returncode == 0 and "queue_wait" in text and "launch_overhead" in text
    assert f"here {100 * 985 / 996:.1f}% of the delay is queueing" in text


@pytest.mark.integration
def test_resnet_delay_is_queueing():
    r = run_cli("launch-stats", str(TRACES["h100_resnet50"]), "--format", "json")
    assert r.returncode == 0
    text = run_cli("launch-stats", str(TRACES["h100_resnet50"])).stdout.decode()
    assert "99.9% of the delay is queueing" in " ".join(text.split())
