"""``analyses.hta_choices`` and HTA's last-step rule (``launches.last_step_start``), on
hand-written traces: the cut at the latest ProfilerStep event (its GPU-side copy included),
whole-µs rounding, HTA's launch APIs per version, and ``--hta`` on the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.hta.choices import hta_version, hta_view, queue_apis
from traceforge.analyses.launches.calls import HTA_QUEUE_APIS, last_step_start
from traceforge.columns.scan import scan
from traceforge.errors import UsageError


def _trace(path: Path, *, gpu_step_at: float | None, steps=((1, 0, 10), (2, 10, 10))) -> str:
    """Steps 1 [0, 10) and 2 [10, 20) µs on the CPU; ``gpu_step_at``: where the GPU-side copy of
    ProfilerStep#2 starts (torch 2.x writes one on the step's stream). Launches (ts µs, API):
    corr 1 at 2 (cudaLaunchKernel), 2 at 12 (cudaLaunchKernel), 3 at 12.5 (cuLaunchKernelEx),
    4 at 16 (cudaLaunchKernel); their kernels start 5 µs later, 2.4 µs long; corr 5 a 0.3 µs
    kernel at 30.2 without a launch call."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 100, "tid": 1, "ts": ts,
               "dur": dur} for n, ts, dur in steps]
    if gpu_step_at is not None:
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#2", "pid": 0, "tid": 7,
                       "ts": gpu_step_at, "dur": 3})
    for corr, ts, api in ((1, 2, "cudaLaunchKernel"), (2, 12, "cudaLaunchKernel"), (3, 12.5, "cuLaunchKernelEx"),
                          (4, 16, "cudaLaunchKernel")):
        events.append({"ph": "X", "cat": "cuda_runtime" if api.startswith("cuda") else "cuda_driver", "name": api,
                       "pid": 100, "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": ts + 5, "dur": 2.4,
                       "args": {"device": 0, "stream": 7, "correlation": corr}})
    events.append({"ph": "X", "cat": "kernel", "name": "k5", "pid": 0, "tid": 7, "ts": 30.2, "dur": 0.3,
                   "args": {"device": 0, "stream": 7, "correlation": 5}})
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return str(path)


def _names(cols) -> list[str]:
    return [cols.names[i] for i in cols.gpu.name.tolist()]


def test_the_cut_is_the_latest_profiler_step_event_gpu_side_copy_included(tmp_path):
    cpu_only = scan(_trace(tmp_path / "a.json", gpu_step_at=None))
    assert last_step_start(cpu_only) == 10_000
    later = scan(_trace(tmp_path / "b.json", gpu_step_at=14))  # the GPU-side copy starts 4 µs later
    assert last_step_start(later) == 14_000
    assert _names(hta_view(later)) == ["k1", "k2", "k3"]  # launched before 14 µs; k4 and k5 (no launch) dropped
    earlier = scan(_trace(tmp_path / "c.json", gpu_step_at=3))  # an earlier copy does not move the cut
    assert last_step_start(earlier) == 10_000
    assert _names(hta_view(earlier)) == ["k1"]


def test_one_step_cuts_nothing(tmp_path):
    cols = scan(_trace(tmp_path / "t.json", gpu_step_at=None, steps=((1, 0, 20),)))
    assert last_step_start(cols) is None
    assert _names(hta_view(cols)) == ["k1", "k2", "k3", "k4", "k5"]


def test_the_view_rounds_starts_up_and_ends_down(tmp_path):
    view = hta_view(scan(_trace(tmp_path / "t.json", gpu_step_at=None, steps=((1, 0, 40),))))
    gpu = view.gpu
    # k1 [7, 9.4) -> [7, 9); k3 [17.5, 19.9) -> [18, 19); k5 [30.2, 30.5) -> [31, 30): HTA's -1 µs
    assert gpu.ts.tolist() == [7000, 17000, 18000, 21000, 31000]
    assert gpu.dur.tolist() == [2000, 2000, 1000, 2000, -1000]
    assert view.launches.ts.tolist() == [2000, 12000, 13000, 16000]
    assert view.launches.dur.tolist() == [1000, 1000, 0, 1000]


def test_versions():
    assert hta_version(True) == "0.6.1" and hta_version(None) is None and hta_version("0.5.0") == "0.5.0"
    with pytest.raises(UsageError, match="0.4"):
        hta_version("0.4")
    assert queue_apis("0.5.0") == HTA_QUEUE_APIS and queue_apis("0.6.1") - HTA_QUEUE_APIS == {"cuLaunchKernelEx"}


def _cli(*args: str) -> dict:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cli_switch(tmp_path):
    path = _trace(tmp_path / "t.json", gpu_step_at=14)
    plain = _cli("launch-stats", path, "--format", "json")
    hta = _cli("launch-stats", path, "--format", "json", "--hta")
    assert (plain["hta"], plain["launches"], hta["hta"], hta["launches"]) == (None, 4, "0.6.1", 2)  # k1, k2
    assert hta["totals_ns"] == {"cpu_duration": 2000, "gpu_duration": 4000, "launch_delay": 8000,  # 4 µs each
                                "launch_overhead": 8000, "queue_wait": 0}
    queue = {v: _cli("stats", path, "--format", "json", "--table", "queue", "--hta-version", v)["queue"]
             for v in ("0.5.0", "0.6.1")}
    assert [q["points"] for q in queue["0.5.0"]] == [4]  # k1 and k2's launches and starts: no cuLaunchKernelEx
    assert [q["points"] for q in queue["0.6.1"]] == [6]
    temporal = _cli("stats", path, "--format", "json", "--table", "temporal", "--hta")["temporal"][0]
    # [7, 19): k1 [7, 9), k2 [17, 19) over k3 [18, 19)
    assert (temporal["gpu_ops"], temporal["span_ns"], temporal["compute_ns"]) == (3, 12_000, 4_000)
    done = run_cli("stats", path, path, "--compare", "--hta")
    assert done.returncode == 1 and b"--hta" in done.stderr


@pytest.mark.integration
def test_resnet50s_cut_is_its_gpu_side_step_4_25_ms_later():
    """torch 2.11's trace: the GPU-side copy of ProfilerStep#5 starts 4,252.923 µs after the CPU
    range; HTA cuts there (``get_cuda_kernel_launch_stats`` counts 1,826 launches, as
    ``launch-stats --hta`` does: tests/analyses/hta/test_switch.py), 62 more than the CPU range's cut."""
    cols = scan(str(TRACES["h100_resnet50"]))
    cpu = int(cols.steps.ts.max())
    assert last_step_start(cols) - cpu == 4_252_923
    launches = cols.launches
    runtime = np.isin(np.asarray(cols.names, dtype=object)[launches.name],
                      ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"])
    launched = np.isin(launches.correlation, cols.gpu.correlation) & runtime
    between = launched & (launches.ts >= cpu) & (launches.ts < last_step_start(cols))
    assert int(between.sum()) == 62


def test_hta_is_a_flag_and_the_version_its_own_option(tmp_path):
    path = _trace(tmp_path / "t.json", gpu_step_at=None)
    temporal = {}
    for args in (("--hta",), ("--hta-version", "0.5.0"), ("--hta-version", "0.5.0", "--hta"), ()):
        temporal[args] = _cli("stats", *args, path, "--table", "temporal", "--format", "json")  # the path stays a path
    assert temporal[("--hta",)] != temporal[()]
    assert temporal[("--hta-version", "0.5.0", "--hta")] == temporal[("--hta-version", "0.5.0")]
    assert run_cli("stats", "--hta-version", "9", path).returncode != 0


def test_read_once_api_makes_the_same_choices(tmp_path):
    import traceforge

    path = _trace(tmp_path / "t.json", gpu_step_at=14)
    once = traceforge.load(path).stats(tables=["temporal", "queue"], hta="0.5.0")
    by_path = traceforge.stats(path, tables=["temporal", "queue"], hta="0.5.0")
    assert once.temporal.equals(by_path.temporal) and once.queue.equals(by_path.queue)
    assert once.temporal["gpu_ops"].tolist() == [3, 1, 2]  # all; step 1: k1; step 2: k2, k3 (k4 after the cut)
    assert once.queue["points"].tolist() == [4]
