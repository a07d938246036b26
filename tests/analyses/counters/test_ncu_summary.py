"""`counters` on an ncu CSV alone, llm.c's per-kernel-kind summary and totals, kernel kinds, and
the hints a trace without counters gets. Checked against plain-Python sums over the CSV's text."""

from __future__ import annotations

import csv
import random
import re
import time
from collections import Counter
from decimal import Decimal

import orjson
import pytest

import traceforge
from tests.conftest import TRACES_DIR
from traceforge.analyses.counters.kinds import TOTAL
from traceforge.analyses.gpu_time.kernel_names import kernel_kind, short_kernel_name
from traceforge.cli.main import main

NCU = TRACES_DIR / "h100" / "ncu_raw.csv"
NCU_TRACE = TRACES_DIR / "h100" / "ncu_target_trace.json.gz"


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _csv_rows(path) -> tuple[list[str], list[str], list[dict]]:
    """(header, units, rows as dicts of text) of an ncu raw CSV, by the csv module."""
    table = list(csv.reader(open(path, newline="")))
    header, units = table[0], table[1]
    return header, units, [dict(zip(header, r)) for r in table[2:]]


def _llmc_kind(name: str) -> str:
    """llm.c's cleaning, written out: no return type, template arguments or parameters (and
    no ``<unnamed>::``, which llm.c's split at ``<`` would leave empty)."""
    name = name.removeprefix("void ").replace("<unnamed>::", "")
    return re.split(r"[<(]", name, maxsplit=1)[0].strip()


def _ns(text: str, unit: str) -> int:
    value = Decimal(text.replace(",", "")) * {"ns": 1, "nsecond": 1, "us": 1000, "usecond": 1000, "ms": 10 ** 6}[unit]
    assert value == value.to_integral_value()
    return int(value)


# -- the real H100 pair ------------------------------------------------------------------------


@pytest.mark.parametrize("with_trace", [False, True])
@pytest.mark.integration
def test_real_csv_every_kernel_exact_total_and_kinds(with_trace, capsys):
    if not (NCU.is_file() and NCU_TRACE.is_file()):
        pytest.skip(f"no {NCU} / {NCU_TRACE}")
    header, units, rows = _csv_rows(NCU)
    unit = units[header.index("gpu__time_duration.sum")]
    ncu_total = sum(_ns(r["gpu__time_duration.sum"], unit) for r in rows)
    args = [str(NCU_TRACE), "--ncu", str(NCU)] if with_trace else [str(NCU)]

    code, out, _ = _cli(capsys, "counters", *args)
    assert code == 0
    lines = [ln.split() for ln in out.splitlines()]
    shown = [int(w[0]) for w in lines if len(w) > 2 and w[0].isdigit() and w[1] in ("csv", "matched")]
    assert len(shown) % 175 == 0  # the table comes in blocks of 100 columns, each with every row
    assert shown[:175] == list(range(175)) == list(range(len(rows)))
    assert "per kernel kind" in out and TOTAL in out and "MInst" in out

    tables = traceforge.counters(str(args[0]), ncu=str(NCU) if with_trace else None)
    kinds = tables.kinds
    total = kinds[kinds["kind"] == TOTAL].iloc[0]
    if not with_trace:  # durations are the CSV's: the totals row's time is their exact sum
        assert int(total["time_ns"]) == ncu_total == 1_443_872
        assert tables.kernels["time_ns"].tolist() == [_ns(r["gpu__time_duration.sum"], unit) for r in rows]
    else:  # the trace's kernel durations
        assert int(total["time_ns"]) == int(tables.kernels["kernel_dur_ns"].sum())
        assert (tables.kernels["status"] == "matched").all()
    assert int(total["kernels"]) == 175 and int(kinds["kernels"].iloc[:-1].sum()) == 175
    assert int(kinds["time_ns"].iloc[:-1].sum()) == int(total["time_ns"])

    # per kind: the CSV's rows per llm.c kind, with or without the trace
    expected = Counter(_llmc_kind(r["Kernel Name"]) for r in rows)
    assert dict(zip(kinds["kind"].iloc[:-1], kinds["kernels"].iloc[:-1])) == expected
    # every vectorized_elementwise_kernel<...> instantiation in one row
    variants = {r["Kernel Name"] for r in rows if "vectorized_elementwise_kernel<" in r["Kernel Name"]}
    vec = kinds[kinds["kind"].str.contains("vectorized_elementwise_kernel")]
    assert len(variants) == 10 and len(vec) == 1
    assert int(vec["kernels"].iloc[0]) == sum("vectorized_elementwise_kernel<" in r["Kernel Name"] for r in rows) == 74


@pytest.mark.integration
def test_real_csv_totals_are_llmc_formulas(capsys):
    """The totals row against llm.c's formulas over the CSV's text (durations from the CSV)."""
    if not NCU.is_file():
        pytest.skip(f"no {NCU}")
    header, units, rows = _csv_rows(NCU)
    tables = traceforge.counters(str(NCU))
    unit = units[header.index("gpu__time_duration.sum")]
    mb = {"Mbyte": 1e6, "Kbyte": 1e3, "byte": 1.0, "Gbyte": 1e9}
    t = [_ns(r["gpu__time_duration.sum"], unit) for r in rows]
    dram = [float(r["dram__bytes_read.sum"]) * mb[units[header.index("dram__bytes_read.sum")]] +
            float(r["dram__bytes_write.sum"]) * mb[units[header.index("dram__bytes_write.sum")]] for r in rows]
    tensor = [float(r["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]) for r in rows]
    inst = [float(r["smsp__inst_executed.sum"]) for r in rows]
    peak_bw = max(d / n for d, n in zip(dram, t))  # llm.c's peak: the best kernel (the CSV names no GPU)
    peak_tensor = 100.0 if max(tensor) > 50 else 50.0
    eff = [max(d / n / peak_bw, x / peak_tensor) for d, n, x in zip(dram, t, tensor)]
    total = tables.kinds.iloc[-1]
    assert tables.peaks.dram_gbps == pytest.approx(peak_bw, rel=1e-12) and tables.peaks.tensor_pct == peak_tensor
    assert total["dram_gbps"] == pytest.approx(sum(dram) / sum(t), rel=1e-12)
    assert total["tensor_pct"] == pytest.approx(sum(x * n for x, n in zip(tensor, t)) / sum(t), rel=1e-12)
    assert total["ginst_per_s"] == pytest.approx(sum(inst) / sum(t), rel=1e-12)
    assert total["efficiency_pct"] == pytest.approx(100 * sum(e * n for e, n in zip(eff, t)) / sum(t), rel=1e-12)
    shares = tables.kinds["share_pct"].iloc[:-1]
    assert shares.sum() == pytest.approx(100.0, rel=1e-12)
    # --peak-dram-gbps is used as given
    assert traceforge.counters(str(NCU), peak_dram_gbps=3350).peaks.dram_gbps == 3350.0


@pytest.mark.integration
def test_real_csv_rules_and_csv_output(capsys):
    if not NCU.is_file():
        pytest.skip(f"no {NCU}")
    code, out, _ = _cli(capsys, "counters", str(NCU), "--rules", "default", "--format", "csv", "--table", "kinds")
    lines = list(csv.DictReader(out.splitlines()))
    assert code == 0 and lines[-1]["kind"] == TOTAL and int(lines[-1]["kernels"]) == 175
    assert sum(int(r["kernels"]) for r in lines[:-1]) == 175 and {"gemm", "elementwise"} <= {r["kind"] for r in lines}
    code, out, _ = _cli(capsys, "counters", str(NCU), "--format", "json")
    doc = orjson.loads(out)
    assert code == 0 and len(doc["kernels"]) == 175 and doc["kinds"][-1]["kind"] == TOTAL
    assert doc["operators"] == [] and doc["problems"] == []


# -- unit tier: a hand-written CSV ----------------------------------------------------------------

HEADER = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"', '"Context"', '"Stream"',
          '"Block Size"', '"Grid Size"', '"Device"', '"CC"', '"dram__bytes_read.sum"', '"gpu__time_duration.sum"',
          '"smsp__inst_executed.sum"']


def _write_csv(path, unit: str, rows: list[tuple[str, str, str, str]]) -> None:
    lines = ["==PROF== Connected to process 1", ",".join(HEADER),
             ",".join(['""'] * 11 + ['"Kbyte"', f'"{unit}"', '"inst"'])]
    for i, (name, dram, dur, inst) in enumerate(rows):
        lines.append(",".join(f'"{c}"' for c in (i, 1, "python", "host", name, 1, 7, "(128, 1, 1)", "(4, 1, 1)", 0,
                                                  "9.0", dram, dur, inst)))
    path.write_text("\n".join(lines) + "\n")


VEC = "void at::native::vectorized_elementwise_kernel<4, at::native::{f}<float>, std::array<char *, 2>>(int, T2, T3)"


def test_csv_alone_exact_durations_and_kinds(tmp_path, capsys):
    rows = [(VEC.format(f="FillFunctor"), "1,024.5", "1,234.567", "1,000"),
            (VEC.format(f="AddFunctor"), "2", "0.001", "10"),
            ("void <unnamed>::elementwise_kernel_with_index<int, at::arange_cuda_out(const c10::Scalar &)::"
             "[lambda() (instance 1)]>(T1, T2)", "0", "3", "5"),
            ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", "8", "2.5", "")]
    path = tmp_path / "p.csv"
    _write_csv(path, "usecond", rows)
    t = traceforge.counters(str(path))
    assert t.kernels["time_ns"].tolist() == [1_234_567, 1, 3000, 2500]
    assert t.kernels["status"].tolist() == ["csv only"] * 4 and t.operators.empty
    kinds = t.kinds.set_index("kind")
    assert kinds.index.tolist() == ["at::native::vectorized_elementwise_kernel", "elementwise_kernel_with_index",
                                    "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", TOTAL]
    assert kinds["kernels"].tolist() == [2, 1, 1, 4]
    assert kinds.loc[TOTAL, "time_ns"] == 1_234_567 + 1 + 3000 + 2500
    vec = kinds.loc["at::native::vectorized_elementwise_kernel"]
    assert vec["time_ns"] == 1_234_568 and vec["inst"] == 1010.0
    assert vec["dram_gbps"] == pytest.approx((1024.5e3 + 2e3) / 1_234_568, rel=1e-12)
    assert vec["ginst_per_s"] == pytest.approx(1010 / 1_234_568, rel=1e-12)
    # the nvjet row has no instruction count: it adds to time but not to the instruction sums
    assert kinds.loc[TOTAL, "inst"] == 1015.0
    assert kinds.loc[TOTAL, "ginst_per_s"] == pytest.approx(1015 / (1_234_568 + 3000 + 2500), rel=1e-12)

    _write_csv(path, "ms", [(VEC.format(f="FillFunctor"), "1", "0.000002", "1")])
    assert traceforge.counters(str(path)).kernels["time_ns"].tolist() == [2]  # ms -> ns exactly


def test_csv_alone_cli_errors(tmp_path, sample, capsys):
    path = tmp_path / "p.csv"
    _write_csv(path, "us", [(VEC.format(f="FillFunctor"), "1", "2", "3")])
    code, out, _ = _cli(capsys, "counters", str(path))
    assert code == 0 and "csv only" in out and "per kernel kind" in out and "--peak-dram-gbps" in out
    for extra in (["--ncu", str(path)], ["--steps", "1"]):
        code, _, err = _cli(capsys, "counters", str(path), *extra)
        assert code == 1 and err.count("\n") == 1 and "is an ncu CSV" in err
    _write_csv(path, "byte", [(VEC.format(f="FillFunctor"), "1", "2", "3")])
    code, _, err = _cli(capsys, "counters", str(path))
    assert code == 1 and err.count("\n") == 1 and "not a unit of time" in err


def test_trace_without_counters_says_what_to_check(sample, tmp_path, capsys):
    """A kernel trace without cuda_profiler_range events: what to check (the range profiler
    can silently give an ordinary trace) and how to record counters; a trace with no kernels:
    how to record them."""
    code, out, _ = _cli(capsys, "counters", str(sample.path))
    assert code == 0
    assert "no cuda_profiler_range events" in out and "kernel events: an ordinary kernel trace" in out
    assert "torch 2.11" in out and "profiler_measure_per_kernel=True" in out
    assert "ncu -i profile.ncu-rep --csv --page raw" in out and "--ncu profile.csv" in out
    assert max(map(len, out.splitlines()[1:])) <= 100
    plain = tmp_path / "plain.json"
    plain.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, '
                     '"dur": 2}]}')
    code, out, _ = _cli(capsys, "counters", str(plain))
    assert code == 0 and "to record counters" in out and "torch 2.11" not in out


# -- kernel names: linear time, the same hints as the old regex ---------------------------------------


def test_kernel_name_cleaning_is_linear():
    """A 100,000-character template took most of a minute in short_kernel_name (a backtracking
    regex); read quadratically, 400,000 characters take far longer than the bound, and linearly a
    small fraction of it. The bound is not a speed measurement (bench.py does those) but that gap,
    with orders of magnitude to spare."""
    name = "void k<" + "A" * 400_000 + ">(int)"
    start = time.perf_counter()
    assert short_kernel_name(name) == "k" and kernel_kind(name) == "k"
    assert time.perf_counter() - start < 20.0
    assert short_kernel_name("void k<" + "xFunctor" * 50_000 + ">(int)").startswith("k<xFunctor")


def test_hint_search_equals_the_old_regex():
    old = re.compile(r"[A-Za-z_]\w*(?:Functor|functor|Ops|_kernel_cuda|_kernel_impl)\w*")
    rng = random.Random(5)
    alphabet = ["Functor", "functor", "Ops", "_kernel_cuda", "_kernel_impl", "gpu_kernel", "a", "Z", "_", "9",
                ",", " ", "::", "9a"]
    for _ in range(2000):
        template = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        hints = [h for h in old.findall(template) if not h.startswith("gpu_kernel")]
        want = f"f<{hints[-1]}>" if hints else "f"
        if len(want) <= 60:
            assert short_kernel_name(f"void f<{template}>(int)") == want, template


def test_kernel_kind_is_llmc_cleaning():
    assert kernel_kind(VEC.format(f="FillFunctor")) == kernel_kind(VEC.format(f="AddFunctor")) == \
        "at::native::vectorized_elementwise_kernel"
    assert kernel_kind("void at::<unnamed>::vectorized_layer_norm_kernel<float, float, 0>(int, T2)") == \
        "at::vectorized_layer_norm_kernel"
    assert kernel_kind("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_") == \
        "at::native::vectorized_elementwise_kernel"
    assert kernel_kind("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD"
    assert kernel_kind("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT") == "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT"
