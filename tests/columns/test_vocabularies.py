"""Old (2021) and new Kineto vocabularies give the same columns and tracks.

The bundled sample's synthesiser writes the same training steps in either vocabulary:
2021's ``Kernel``/``Memcpy``/``Runtime``/``Operator`` categories, ``"stream 7"`` string tids
and integer µs, or today's ``kernel``/``gpu_memcpy``/``cuda_runtime``/``cpu_op`` with
fractional µs.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_cli
from traceforge.analyses.launches.queue_length import queue_length
from traceforge.columns.scan import KERNEL, MEMCPY, MEMSET, scan
from traceforge.perfetto import check_trace


@pytest.fixture(scope="module")
def samples(make_sample):
    return {"new": make_sample().path, "old": make_sample(old_kineto=True).path}


def test_same_columns_from_both_vocabularies(samples):
    new, old = scan(str(samples["new"])), scan(str(samples["old"]))
    assert {c for _, c in old.phase_cat_counts} >= {"Kernel", "Memcpy", "Memset", "Runtime", "Operator"}
    for cols in (new, old):
        assert len(cols.gpu) == 176 and len(cols.cpu_ops) > 300
        assert set(zip(cols.gpu.device.tolist(), cols.gpu.stream.tolist())) == {(0, 7), (0, 13), (0, 20), (1, 7)}
    assert len(old.launches) == len(new.launches)
    for kind in (KERNEL, MEMCPY, MEMSET):
        assert np.count_nonzero(old.gpu.kind == kind) == np.count_nonzero(new.gpu.kind == kind)
    assert (old.gpu.ts % 1000 == 0).all() and (new.gpu.ts % 1000 != 0).any()  # integer µs vs ns fractions


def test_queue_length_from_both_vocabularies(samples):
    new, old = queue_length(scan(str(samples["new"]))), queue_length(scan(str(samples["old"])))
    for df in (new, old):
        assert (df.queue_length >= 0).all()
        assert df[df.stream == 7].queue_length.max() >= 20  # the sample's backed-up step
    # Whole µs merge a few distinct timestamps, so point counts differ; the peaks do not.
    peaks = {name: df.groupby(["device", "stream"]).queue_length.max().to_dict() for name, df in (("new", new), ("old", old))}
    assert peaks["old"] == peaks["new"] == {(0, 7): 23, (0, 13): 1, (0, 20): 1, (1, 7): 1}


def test_old_vocabulary_annotates_and_checks_clean(samples, tmp_path):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(samples["old"]), "--all", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert b"queue length: 4 counter tracks" in r.stderr and b"launch delay: args on 176 GPU ops" in r.stderr
    # 2021 Kineto put a flow's start on an integer tid while the CPU slices sit on string
    # tids, so the input's own arrows are lost in Perfetto; ours add no loss of any kind.
    before, after = check_trace(str(samples["old"])), check_trace(str(out))
    assert before.stats.get("flow_no_enclosing_slice") == 166
    assert after.stats == before.stats
