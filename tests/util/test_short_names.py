"""One way to cut names (``util.short_names``): in the middle, and never two different names to
the same text, in tables (``cli.output.render``), patterns, counters and the report's bars."""

import pandas as pd
import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.gpu_time.kernel_names import kernel_labels
from traceforge.cli.output import Col, render
from traceforge.util.short_names import ELLIPSIS, shorten, shorten_distinct

CUDNN = ("void cudnn::bn_bw_1C11_singleread_specialized<float, 512, true, 1, 2, 0>(cudnn::{variant}"
         "NhwcBatchNormBackwardParams, float, float const*, float*, cudnn::reduced_divisor, int, float>)")


def test_shorten_keeps_start_and_end():
    text = "a" * 50 + "MIDDLE" + "z" * 50
    out = shorten(text, 40)
    assert len(out) == 40 and out.startswith("a" * 20) and out.endswith("z" * 19) and ELLIPSIS in out
    assert shorten("short", 40) == "short"


def test_names_that_differ_in_the_middle_stay_different():
    names = [f"autograd::engine::evaluate_function: {op}Backward0 (the rest of a long name, the same in all)"
             for op in ("Convolution", "NativeBatchNorm", "Threshold", "Add", "AddmmB", "AddmmC")]
    names += [names[0]]  # the same name twice: printed alike
    plain = [shorten(n, 30) for n in names]
    assert len(set(plain)) == 1  # what a middle cut alone does
    out = shorten_distinct(names, 30)
    assert all(len(o) <= 30 for o in out)
    assert len(set(out[:6])) == 6 and out[6] == out[0]
    assert any("Threshold" in o for o in out)


def test_hopeless_widths_are_numbered():
    names = ["x" * 40 + "1", "x" * 40 + "2" + "y" * 40, "x" * 40 + "3" + "y" * 40]
    out = shorten_distinct(names, 5)
    assert len(set(out)) == 3 and all(len(o) <= 5 for o in out)


def test_render_cuts_a_column_distinctly():
    names = [CUDNN.format(variant=v) for v in ("Alpha", "Beta", "Gamma")]
    df = pd.DataFrame({"n": [1, 2, 3], "name": names})
    lines = render(df, [Col("n", "n"), Col("name", "name", left=True)], width=60)
    assert max(map(len, lines)) <= 60
    shown = [line[len("  1  "):] for line in lines[1:]]
    assert len(set(shown)) == 3


def test_pattern_kernel_names_differ_where_the_names_do():
    names = [CUDNN.format(variant=v) for v in ("Alpha", "Beta", "Gamma")]
    short = kernel_labels(names)
    assert len(set(short.values())) == 3
    assert not any(s.endswith(f"{ELLIPSIS}#1") for s in short.values())


@pytest.mark.integration
def test_counters_ncu_rows_are_distinct():
    trace = TRACES["h100_ncu_target"]
    r = run_cli("counters", str(trace), "--ncu", str(trace.parent / "ncu_raw.csv"))
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    rows = [line for line in text.splitlines() if line.startswith("  ") and "autograd" in line]
    assert rows, text[:2000]
    assert len(set(rows)) == len(rows)


@pytest.mark.integration
def test_patterns_table_names_are_distinct():
    r = run_cli("patterns", str(TRACES["h100_resnet50"]), "--top-k", "10")
    assert r.returncode == 0, r.stderr
    kernels = [line for line in r.stdout.decode().splitlines() if line.startswith("  P")]
    joined = [k.split(": ", 1)[1] for k in kernels]
    assert len(kernels) == 10 and len(set(joined)) == len(joined)
