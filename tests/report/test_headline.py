"""The report leads with the answer (issue 53 item 8): a headline (step time, GPU busy, the top
reasons), a step-time table and a critical-path section before the plots; and each plot's scale
shows every series it draws."""

from __future__ import annotations

import numpy as np
import pytest

import traceforge
from tests.conftest import TRACES, run_cli
from traceforge.analyses.gpu_time.classify import NON_GPU
from traceforge.report.collect import _memory_series, delay_histogram, rank_report
from traceforge.report.headline import headline, step_table
from traceforge.util.lazy_pandas import pd

bokeh = pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")


@pytest.fixture(scope="module")
def sample_report(sample):
    return rank_report(0, str(sample.path), traceforge.load(str(sample.path)))


def test_headline_says_step_time_busy_and_reasons(sample_report):
    r = sample_report
    h = headline(r)
    median = int(np.sort(r.steps["dur"].to_numpy())[(len(r.steps) - 1) // 2])
    assert h.step.startswith(f"median step {median / 1e6:,.3f} ms over {len(r.steps)} step(s)")
    busy, span = r.figures["gpu_busy_ns"], r.figures["gpu_span_ns"]
    assert h.busy.startswith(f"GPU busy {100 * busy / span:.1f}% of its span")
    assert 2 <= len(h.reasons) <= 4
    assert any("critical path" in t for t in h.reasons) and any("launch" in t for t in h.reasons)
    shares = [float(t.split("%")[0].split()[-1]) for t in h.reasons[:-1]]  # the last: how launches read
    assert shares == sorted(shares, reverse=True)


def test_step_table_per_step(sample_report):
    t = step_table(sample_report)
    steps = sample_report.steps
    rows = t[t["step"] != "all"]
    assert rows["step"].tolist() == [str(s) for s in steps["step"]]
    assert np.allclose(rows["CPU step ms"].to_numpy(), steps["dur"].to_numpy() / 1e6)
    assert (t["idle ms"] + t["compute ms"] + t["non-compute ms"] - t["GPU span ms"]).abs().max() < 1e-6


def test_page_leads_with_the_answer(sample, tmp_path):
    out = tmp_path / "r.html"
    assert run_cli("report", str(sample.path), "-o", str(out)).returncode == 0
    page = out.read_text()
    order = [page.index(s) for s in ("median step", "Why, the largest first", "Step time", "Critical path per step",
                                     "Temporal breakdown per step")]
    assert order == sorted(order)
    assert "GPU -1" not in page and f"GPU 0 {NON_GPU}" not in page


def test_scales_show_every_series(sample_report):
    from traceforge.report import page

    temporal = page._temporal(sample_report)
    steps = temporal.x_range.factors
    assert "all" not in steps and len(steps) == len(sample_report.steps)  # the whole trace is in the table
    for fig in (temporal, page._lines(sample_report, sample_report.queue, "queued ops")):
        assert fig.right and not fig.center[-1:] == [fig.legend[0]]  # the legend beside the plot, not on it
    copies = [s.label for s in sample_report.memcpy if "memset" not in s.label.lower()]
    sets = [s.label for s in sample_report.memcpy if "memset" in s.label.lower()]
    assert copies and sets  # drawn on two plots (see test_report: "Memcpy bandwidth", "Memset bandwidth")
    categories = page._categories(sample_report)
    names = categories.y_range.factors
    assert not any(NON_GPU in n for n in names)


def test_delay_bins_start_at_the_data():
    delays = np.array([-3, 2_000, 3_000, 2_500_000, 8_000_000], np.int64)
    edges, counts = delay_histogram(delays)
    assert 1_000 <= edges[0] <= 3_000  # not 1 ns: the first bar does not span decades below every delay
    assert counts.sum() == len(delays)


def test_cpu_memory_is_not_a_gpu():
    df = pd.DataFrame({"device_type": ["cpu", "cpu", "cuda", "cuda"], "device": [-1, -1, 0, 0],
                       "ts": [1, 2, 1, 2], "allocated": [1, 2, 3, 4], "reserved": [5, 6, 7, 8]})
    labels = [s.label for s in _memory_series(df, 0, 10, 100)]
    assert labels == ["CPU allocated", "CPU reserved", "GPU 0 allocated", "GPU 0 reserved"]


def test_bar_names_stay_distinct():
    from traceforge.report import page

    names = [f"void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::{v}NhwcBatchNormBackwardParams, "
             "float, float const*, float*, cudnn::reduced_divisor, int, float>)" for v in ("A", "B", "C")]
    fig = page._hbar(names, np.array([3, 2, 1]) * 1_000_000)
    assert len(set(fig.y_range.factors)) == 3 and all(len(f) <= page.BAR_NAME + 4 for f in fig.y_range.factors)


@pytest.mark.integration
def test_resnet_headline():
    r = rank_report(0, "resnet", traceforge.load(str(TRACES["h100_resnet50"])))
    h = headline(r)
    assert h.step.startswith("median step 30.898 ms over 4 step(s)")
    assert h.busy.startswith("GPU busy 88.4% of its span")
    assert "launches wait 100% of their delay behind earlier GPU work" in h.reasons[-1]
