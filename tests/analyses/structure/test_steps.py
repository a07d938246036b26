"""``analyses.steps``: the profiler steps and each GPU op's step, against a brute force over
the sample's parsed events."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import orjson

from traceforge.analyses.structure.steps import NO_STEP, gpu_steps, profiler_steps
from traceforge.columns.scan import scan


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def test_each_gpu_op_belongs_to_the_step_around_its_launch(sample):
    events = orjson.loads(sample.raw)["traceEvents"]
    steps = [(int(e["name"].split("#")[1]), _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
             for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    launch_ts = {e["args"]["correlation"]: _ns(e["ts"]) for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def step_at(ts: int) -> int:
        inside = [(start, n) for n, start, end in steps if start <= ts < end]
        return max(inside)[1] if inside else NO_STEP

    expected = [step_at(launch_ts.get(e["args"].get("correlation"), _ns(e["ts"]))) for e in gpu]
    cols = scan(str(sample.path), cpu_ops=False)
    found = profiler_steps(cols)
    assert found.number.tolist() == sorted(n for n, _, _ in steps)
    assert found.start.tolist() == sorted(s for _, s, _ in steps)
    assert gpu_steps(cols, found).tolist() == expected
    assert len(set(expected)) == len(steps) and NO_STEP not in expected  # every step has work, every op a step


def test_a_trace_without_steps_gives_no_step(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"device": 0, "stream": 7, "correlation": 1}}]}))
    cols = scan(str(path))
    assert len(profiler_steps(cols)) == 0
    assert np.array_equal(gpu_steps(cols), [NO_STEP])
