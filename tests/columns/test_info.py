"""info: launch calls and CPU ops are counted and spanned from disk, not held in memory;
the summary must be what the in-memory columns give."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE
from traceforge.analyses.cross_trace.stats import wall_span
from traceforge.columns.info import summarize, trace_info
from traceforge.columns.scan import scan
from traceforge.util.exacttime import ns_to_us_text

CPU_OP_CATS = {"cpu_op", "operator", "user_annotation", "python_function"}


@pytest.mark.parametrize("name", [SAMPLE, "df_index", "negative_queue", "alexnet", "amd", "trace_diff"])
def test_info_from_spilled_rows_is_the_in_memory_summary(name, trace_path):
    path = str(trace_path(name))
    info = trace_info(path)
    cols = scan(path)
    assert info == summarize(cols, codec="gzip")
    assert info["launch_calls"] == len(cols.launches) > 0
    assert info["cpu_ops"] == len(cols.cpu_ops) == sum(
        n for (ph, cat), n in cols.phase_cat_counts.items() if ph == "X" and str(cat).lower() in CPU_OP_CATS)
    first, last = wall_span(cols)
    assert info["time_span"]["first_ts_us"] == ns_to_us_text(first)
    assert info["time_span"]["last_end_us"] == ns_to_us_text(last)
