"""The roofline (``analyses.roofline``, ``annotate --roofline``, ``traceforge roofline``): the work
model per op family, the GPU limits, the split of an op's work among its kernels, the args and
counters written into the trace, and, on the real H100 traces, FLOPs of every matrix multiply
against a brute force over the raw JSON and coverage."""

from __future__ import annotations

import gzip
import io
import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.roofline import work as W
from traceforge.analyses.roofline.limits import limits_for, parse_limits
from traceforge.analyses.roofline.model import roofline, split_by_duration
from traceforge.annotator import registry
from traceforge.errors import TraceforgeError, UsageError
from traceforge.util.lazy_pandas import pd

F32, BF16 = "float", "c10::BFloat16"


def work(name: str, dims: list, types: list, concrete: list | None = None, kernels: tuple = ()) -> W.Work | str:
    return W.op_work(name, (dims, types, concrete or [""] * len(types), None, None, None), kernels)


# --- the work model ------------------------------------------------------------------------------

def test_matrix_multiplies_are_2mnk_and_bytes_in_plus_out():
    w = work("aten::mm", [[64, 1000], [1000, 2048]], [F32, F32])
    assert (w.family, w.flops, w.bytes) == ("matmul", 2 * 64 * 2048 * 1000, 4 * (64 * 1000 + 1000 * 2048 + 64 * 2048))
    w = work("aten::addmm", [[3072], [4096, 768], [768, 3072], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert w.flops == 2 * 4096 * 3072 * 768 and w.unit == "bf16_tensor"
    assert w.bytes == 2 * (3072 + 4096 * 768 + 768 * 3072 + 4096 * 3072)
    assert work("aten::bmm", [[8, 32, 16], [8, 16, 64]], [F32, F32]).flops == 2 * 8 * 32 * 64 * 16
    assert work("aten::baddbmm", [[8, 32, 64], [8, 32, 16], [8, 16, 64]], [F32] * 3).flops == 2 * 8 * 32 * 64 * 16
    assert work("aten::linear", [[4, 5, 6], [7, 6], [7]], [F32] * 3).flops == 2 * 20 * 7 * 6
    assert work("aten::matmul", [[3, 1, 5, 6], [2, 6, 7]], [F32] * 2).flops == 2 * 6 * 5 * 7 * 6  # broadcast batch
    assert work("aten::addmv", [[5], [5, 6], [6]], [F32] * 3).flops == 2 * 5 * 6
    assert "not a matrix product" in work("aten::mm", [[2, 3], [4, 5]], [F32, F32])


def test_convolution_forward_and_backward():
    # resnet's first conv: 64x3x224x224 by 64x3x7x7, stride 2, padding 3 -> 112x112
    w = work("aten::cudnn_convolution", [[64, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7,
             [F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
             ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "True", "False", "True"])
    assert w.flops == 2 * 64 * 112 * 112 * 64 * 3 * 7 * 7
    assert w.bytes == 4 * (64 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 64 * 64 * 112 * 112)
    dims = [[64, 512, 7, 7], [64, 512, 7, 7], [512, 512, 3, 3]] + [[]] * 8
    types = [F32] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    concrete = ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    one = 2 * 64 * 7 * 7 * 512 * 512 * 9
    assert work("aten::convolution_backward", dims, types, concrete + ["[True, True, False]"]).flops == 2 * one
    assert work("aten::convolution_backward", dims, types, concrete + ["[False, True, False]"]).flops == one


def test_attention_pairs_and_flops():
    for sq, sk in ((5, 5), (3, 7), (7, 3), (1, 1)):
        for causal, sees in (("top-left", lambda i, j: j <= i), ("bottom-right", lambda i, j: j <= i + sk - sq),
                             (None, lambda i, j: True)):
            brute = sum(1 for i in range(sq) for j in range(sk) if sees(i, j))
            assert W.attended_pairs(sq, sk, causal) == brute, (sq, sk, causal)
    q = [8, 12, 512, 64]
    fwd = work("aten::_cudnn_attention_forward", [q, q, q] + [[]] * 10, [BF16] * 3 + [""] * 3 + ["Scalar"] * 6 + [""],
               ["", "", "", "", "", "", "512", "512", "True", "0.", "True", "False", ""])
    pairs = 512 * 513 // 2
    assert fwd.flops == 2 * 8 * 12 * pairs * (64 + 64) and fwd.family == "attention"
    bwd = work("aten::_cudnn_attention_backward", [q] * 5 + [[8, 12, 512, 1]] + [[]] * 10,
               [BF16] * 5 + [F32] + ["long int"] * 2 + [""] * 3 + ["Scalar"] * 4 + [""],
               [""] * 11 + ["512", "512", "0.", "False", ""])
    assert bwd.flops == 2 * 8 * 12 * 512 * 512 * (3 * 64 + 2 * 64)


def test_memory_bound_ops_count_tensors_read_and_written():
    # out= variant: the trailing tensor is written, not read; the 0-d scalar is a tensor of one element
    w = work("aten::mul", [[8192, 768], [], [8192, 768]], [F32, "double", F32])
    assert (w.family, w.bytes, w.flops) == ("elementwise", 4 * 8192 * 768 + 8 + 4 * 8192 * 768, 8192 * 768)
    w = work("aten::add_", [[64, 256], [64, 256], []], [F32, F32, "Scalar"], ["", "", "1"])
    assert w.bytes == 3 * 4 * 64 * 256  # reads both, writes self
    assert work("aten::copy_", [[10, 10], [10, 10], []], [BF16, F32, "Scalar"]).bytes == 2 * 100 + 4 * 100
    assert work("aten::sum", [[4096, 768], [], [], []], [BF16, "ScalarList", "Scalar", ""],
                ["", "[0]", "False", ""]).bytes == 2 * (4096 * 768 + 768)
    ln = work("aten::native_layer_norm", [[8, 512, 768], [], [768], [768], []], [F32, "ScalarList", F32, F32, "Scalar"],
              ["", "[768]", "", "", "1e-05"])
    assert ln.bytes == 4 * (2 * 8 * 512 * 768 + 2 * 768) + 2 * 4 * 8 * 512
    cat = work("aten::cat", [[[8, 512, 768], [8, 512, 768]], []], ["TensorList", "Scalar"], ["", "2"],
               kernels=("CatArrayBatchedCopy<OpaqueType<2u>, unsigned int, 3, 128, 1>",))
    assert cat.bytes == 2 * 2 * 2 * 8 * 512 * 768


def test_not_modelled_says_why():
    assert work("aten::arange", [[], []], ["Scalar", "Scalar"]) == "no work model for this op"
    assert W.op_work("aten::mm", None) == "no shapes recorded (profile with record_shapes=True)"
    assert "TensorLists' shapes are not recorded" in work("aten::_fused_adamw_", [[]] * 6, ["TensorList"] * 6)
    assert not W.is_modelled("ProfilerStep#3") and W.is_modelled("aten::gelu_backward") and W.is_modelled("aten::exp_")


def test_shapes_no_real_op_has_are_not_modelled_and_say_so():
    conv = ["", "", "[0, 0]", "[0, 0]", "[1, 1]", "1", "True", "False", "True"]  # stride 0
    w = work("aten::cudnn_convolution", [[1, 3, 8, 8], [4, 3, 3, 3]] + [[]] * 7, [F32, F32] + ["ScalarList"] * 3
             + ["Scalar"] * 4, conv)
    assert w.startswith("shapes not understood (ZeroDivisionError")
    assert work("aten::mm", [[2**40, 2**40], [2**40, 2**40]], [F32, F32]) == "shapes not understood (work beyond 2^62)"
    assert work("aten::mm", [[2, "x"], [2, 3]], [F32, F32]).startswith("shapes incomplete")
    assert work("aten::mm", "garbage", {"a": 1}).startswith("shapes incomplete")
    assert work("aten::add", [[-1, 2], [2]], [F32, F32]).startswith("shapes incomplete")


def test_split_by_duration_adds_up_and_follows_durations():
    owner = np.array([7, 7, 7, 3, 3, 9])
    dur = np.array([1, 2, 1, 0, 0, 5], np.int64)
    total = np.array([10, 10, 10, 5, 5, 4], np.int64)
    share = split_by_duration(owner, dur, total)
    assert share.tolist() == [2, 6, 2, 3, 2, 4]  # the longest takes the rest; all-zero durations split evenly
    big = np.full(3, 10**15 + 7, np.int64)
    assert split_by_duration(np.zeros(3, np.int64), np.array([1, 1, 1], np.int64), big).sum() == 10**15 + 7


def test_gpu_limits_by_name_and_user_file():
    assert limits_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert limits_for("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert limits_for("NVIDIA A100-SXM4-80GB").memory_gbps == 2039
    assert limits_for("NVIDIA A100-SXM4-40GB").name == "A100 40GB"
    assert limits_for("Tesla V100-SXM2-16GB").name == "V100 SXM2"
    assert limits_for("NVIDIA A10").name == "A10" and limits_for("NVIDIA L4").name == "L4"
    assert limits_for("AMD Instinct MI300X").peak("bf16_tensor") == Fraction("1307.4")
    for unknown in ("NVIDIA A100-PG509-200", "AMD Radeon Graphics", "NVIDIA H100 NVL", "NVIDIA A10G"):
        assert limits_for(unknown) is None, unknown
    mine = parse_limits({"AMD Radeon Graphics": {"memory_gbps": "1000.5", "tflops": {"fp32": 20}}}, "f.json")
    assert limits_for("AMD Radeon Graphics", mine).memory_gbps == Fraction("1000.5")
    with pytest.raises(UsageError, match="tflops.fp33|unknown peak fp33"):
        parse_limits({"x": {"memory_gbps": 1, "tflops": {"fp33": 1}}}, "f.json")
    with pytest.raises(UsageError, match="memory_gbps: expected a positive number"):
        parse_limits({"x": {"memory_gbps": -1}}, "f.json")


# The datasheet figures of docs/roofline.md's table, dense (a "with sparsity" figure halved), as
# (fp64, fp64 tensor, fp32, tf32 tensor, bf16 tensor, fp16 tensor, fp8 tensor, int8 tensor, GB/s).
DATASHEETS = {
    "Tesla V100-SXM2-32GB": ("7.8", None, "15.7", None, None, "125", None, None, "900"),
    "Tesla V100-PCIE-16GB": ("7", None, "14", None, None, "112", None, None, "900"),
    "Tesla V100S-PCIE-32GB": ("8.2", None, "16.4", None, None, "130", None, None, "1134"),
    "NVIDIA A100-SXM4-40GB": ("9.7", "19.5", "19.5", "156", "312", "312", None, "624", "1555"),
    "NVIDIA A100-PCIE-40GB": ("9.7", "19.5", "19.5", "156", "312", "312", None, "624", "1555"),
    "NVIDIA A100-SXM4-80GB": ("9.7", "19.5", "19.5", "156", "312", "312", None, "624", "2039"),
    "NVIDIA A100 80GB PCIe": ("9.7", "19.5", "19.5", "156", "312", "312", None, "624", "1935"),
    "NVIDIA A10": (None, None, "31.2", "62.5", "125", "125", None, "250", "600"),
    "NVIDIA L4": (None, None, "30.3", "60", "121", "121", "242.5", "242.5", "300"),
    "NVIDIA L40S": (None, None, "91.6", "183", "362.05", "362.05", "733", "733", "864"),
    "NVIDIA H100 80GB HBM3": ("34", "67", "67", "494.5", "989.5", "989.5", "1979", "1979", "3350"),
    "NVIDIA H100 PCIe": ("26", "51", "51", "378", "756.5", "756.5", "1513", "1513", "2000"),
    "NVIDIA H200": ("34", "67", "67", "494.5", "989.5", "989.5", "1979", "1979", "4800"),
    "NVIDIA B200": ("37", "37", "75", "1125", "2250", "2250", "4500", "4500", "8000"),
    "AMD Instinct MI250X": ("23.95", "47.85", "23.95", None, "191.5", "191.5", None, "191.5", "1638.4"),
    "AMD Instinct MI300X": ("81.7", "163.4", "163.4", "653.7", "1307.4", "1307.4", "2614.9", "2614.9", "5300"),
}
UNITS = ("fp64", "fp64_tensor", "fp32", "tf32_tensor", "bf16_tensor", "fp16_tensor", "fp8_tensor", "int8_tensor")


@pytest.mark.parametrize("name", DATASHEETS)
def test_gpu_limits_are_the_datasheets_dense_figures(name):
    limits = limits_for(name)
    *peaks, gbps = DATASHEETS[name]
    assert limits is not None and limits.memory_gbps == Fraction(gbps)
    assert {u: limits.peak(u) for u in UNITS} == {u: (Fraction(p) if p else None) for u, p in zip(UNITS, peaks)}


def test_variants_the_datasheets_do_not_give_get_no_limits():
    for name in ("Tesla V100-SXM3-32GB", "Tesla V100-FHHL-16GB", "NVIDIA H100 NVL", "NVIDIA H200 NVL",
                 "NVIDIA GH200 480GB", "NVIDIA GB200", "NVIDIA A10G", "NVIDIA L40", "NVIDIA A100-PG509-200"):
        assert limits_for(name) is None, name


# --- a trace made here ---------------------------------------------------------------------------

M, N, K = 256, 512, 128


def _trace(tmp_path: Path, *, gpu: str | None = "NVIDIA H100 80GB HBM3", shapes: bool = True) -> Path:
    """One aten::mm launching two kernels (3 µs and 1 µs) and one aten::add_ launching one."""
    events, corr = [], 100

    def op(name, ts, dur, dims, types, kernels):
        nonlocal corr
        args = {"External id": corr}
        if shapes:
            args.update({"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(types)})
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": args})
        for i, (kname, kdur) in enumerate(kernels):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": ts + 1 + i, "dur": 0.5, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": ts + 10 + 5 * i,
                           "dur": kdur, "args": {"correlation": corr, "device": 0, "stream": 7}})

    op("aten::mm", 1000, 5, [[M, K], [K, N]], [BF16, BF16], [("nvjet_gemm", 3), ("splitK_reduce", 1)])
    op("aten::add_", 1100, 5, [[M, N], [M, N], []], [F32, F32, "Scalar"], [("vectorized_add", 2)])
    doc = {"schemaVersion": 1, "traceEvents": events}
    if gpu is not None:
        doc["deviceProperties"] = [{"id": 0, "name": gpu}]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def test_tables_on_a_made_trace(tmp_path):
    path = _trace(tmp_path)
    result = run_cli("roofline", str(path), "--format", "csv")
    assert result.returncode == 0, result.stderr
    ops = pd.read_csv(io.BytesIO(result.stdout))
    mm = ops[ops["op"] == "aten::mm"].iloc[0]
    assert (mm["kernels"], mm["time_ns"], mm["flops"]) == (2, 4000, 2 * M * N * K)
    flops, nbytes = 2 * M * N * K, 2 * (M * K + K * N + M * N)
    # the 3 µs kernel has 3/4 of the work, the 1 µs one 1/4: each at its roof, rounded up to a ns
    roof = sum(int(np.ceil(max(f * flops / 989.5e3, f * nbytes / 3350))) for f in (0.75, 0.25))
    assert mm["bound"] == "memory" and mm["roofline_ns"] == roof and mm["bytes"] == nbytes
    assert mm["lost_ns"] == mm["time_ns"] - mm["roofline_ns"]
    text = run_cli("roofline", str(path))
    assert b"coverage: 100.0% of kernel time modelled" in text.stdout
    doc = json.loads(run_cli("roofline", str(path), "--format", "json").stdout)
    assert doc["coverage_pct"] == 100.0 and doc["gpus"] == {"0": "H100 SXM"}
    assert {f["family"] for f in doc["families"]} == {"matmul", "elementwise", "(not modelled)"}


def test_annotate_writes_args_split_by_duration(tmp_path):
    path = _trace(tmp_path)
    out = tmp_path / "out.json"
    done = run_cli("annotate", str(path), "--roofline", "-o", str(out))
    assert done.returncode == 0, done.stderr
    events = orjson.loads(out.read_bytes())["traceEvents"]
    kernels = {e["name"]: e["args"] for e in events if e.get("cat") == "kernel"}
    gemm, reduce_ = kernels["nvjet_gemm"], kernels["splitK_reduce"]
    assert gemm["flops"] + reduce_["flops"] == 2 * M * N * K
    assert gemm["flops"] == 3 * reduce_["flops"]  # 3 µs and 1 µs
    assert gemm["tflops"] == pytest.approx(gemm["flops"] / 3000 / 1e3, abs=1e-3)
    assert gemm["bound"] == "memory" and 0 < gemm["roofline_pct"] <= 100
    assert gemm["roofline_pct"] == pytest.approx(100 * gemm["roofline_ns"] / 3000, abs=0.1)
    counters = [e for e in events if e.get("ph") == "C" and e["name"].startswith("Roofline")]
    assert {key for e in counters for key in e["args"]} == {"TFLOP/s", "GB/s", "%"}
    pct = [e["args"]["%"] for e in counters if "%" in e["args"]]
    assert set(pct) == {0, *(k["roofline_pct"] for k in kernels.values())}  # the kernels do not overlap
    assert run_cli("check", str(out)).returncode == 0


def test_unknown_gpu_and_no_shapes_say_so_in_one_line(tmp_path):
    unknown = _trace(tmp_path, gpu="NVIDIA A100-PG509-200")
    done = run_cli("roofline", str(unknown))
    assert done.returncode == 0
    note = [line for line in done.stdout.decode().splitlines() if "not in the GPU limits table" in line]
    assert len(note) == 1 and "--gpu-limits" in note[0]
    doc = json.loads(run_cli("roofline", str(unknown), "--format", "json").stdout)
    assert len(doc["notes"]) == 1
    assert all(o["roofline_pct"] is None and o["bound"] == "" for o in doc["ops"])
    limits = tmp_path / "limits.json"
    limits.write_text(json.dumps({"NVIDIA A100-PG509-200": {"memory_gbps": 1555, "tflops": {"bf16_tensor": 312,
                                                                                             "fp32": 19.5}}}))
    doc = json.loads(run_cli("roofline", str(unknown), "--gpu-limits", str(limits), "--format", "json").stdout)
    assert all(o["roofline_pct"] is not None for o in doc["ops"]) and doc["notes"] == []
    limits.write_text("{")
    bad = run_cli("roofline", str(unknown), "--gpu-limits", str(limits))
    assert bad.returncode == 1 and bad.stderr.count(b"\n") == 1 and b"limits.json" in bad.stderr

    bare = _trace(tmp_path / "..", shapes=False)
    done = run_cli("roofline", str(bare))
    assert done.returncode == 0 and b"record_shapes=True" in done.stdout
    assert b"coverage: 0.0%" in done.stdout


# What each case lacks: (the _trace arguments, a word of its note, its note's how-to).
MISSING = {
    "no shapes": ({"shapes": False}, "no CPU op carries shapes", "record_shapes=True"),
    "unknown GPU": ({"gpu": "NVIDIA A100-PG509-200"}, "not in the GPU limits table", "--gpu-limits"),
    "no deviceProperties": ({"gpu": None}, "no deviceProperties", "torch.profiler traces have them"),
}


def _missing_trace(tmp_path: Path, case: str) -> tuple[Path, str, str]:
    kwargs, what, how = MISSING[case]
    return _trace(tmp_path, **kwargs), what, how


@pytest.mark.parametrize("case", MISSING)
def test_every_entry_point_says_what_is_missing_once_and_invents_nothing(tmp_path, case):
    import traceforge

    path, what, how = _missing_trace(tmp_path, case)
    done = run_cli("roofline", str(path))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.decode().splitlines() if what in line]
    assert len(lines) == 1 and how in lines[0]
    for result in (traceforge.roofline(path), traceforge.load(path).roofline()):
        assert len(result.notes) == 1 and what in result.notes[0] and how in result.notes[0]
        if case == "no shapes":
            assert result.modelled_ns == 0 and len(result.ops) == 0
        else:  # the work is known, the roofline is not
            assert result.ops["flops"].sum() == 2 * M * N * K + M * N
            assert result.ops["roofline_ns"].isna().all() and (result.ops["bound"] == "").all()
            assert result.steps.empty or result.steps["roofline_ns"].isna().all()
    out = tmp_path / "out.json"
    done = run_cli("annotate", str(path), "--roofline", "-o", str(out))
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stderr.decode().split())  # one summary line, wrapped
    assert summary.count(what) == 1 and how in summary
    kernels = [e["args"] for e in orjson.loads(out.read_bytes())["traceEvents"] if e.get("cat") == "kernel"]
    assert not any({"bound", "roofline_ns", "roofline_pct"} & set(k) for k in kernels)
    assert all(("flops" in k) == (case != "no shapes") for k in kernels)


@pytest.mark.slow
@pytest.mark.parametrize("case", MISSING)
def test_the_report_section_says_what_is_missing(tmp_path, case):
    pytest.importorskip("bokeh")
    import traceforge
    from traceforge.report import rank_report, render

    path, what, how = _missing_trace(tmp_path, case)
    page = render([rank_report(0, str(path), traceforge.load(path))])
    assert what in page and how in page
    assert "no op with both FLOPs and bytes" in page and "no roofline (no shapes or an unknown GPU)" in page
    assert ("Roofline on H100 SXM" in page) == (case == "no shapes")  # no chart drawn; the GPU named where known


# --- the real traces -----------------------------------------------------------------------------

MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::addmv",
           "aten::_scaled_mm"}


def _brute_force_matmuls(path: Path) -> dict[int, int]:
    """Per matrix multiply CPU op (by its place in traceEvents) that launched a kernel: 2·M·N·K·batch
    from its Input Dims, found by walking the raw JSON: the kernel's launch by correlation, then the
    innermost CPU op on the launch's thread that contains the launch."""
    events = json.loads(raw_json(path))["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in e.get("args", {})}
    ops = [(i, e) for i, e in enumerate(events) if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    found: dict[int, int] = {}
    for e in events:
        if e.get("cat") != "kernel" or e.get("args", {}).get("correlation") not in launches:
            continue
        call = launches[e["args"]["correlation"]]
        inside = [(o["dur"], i, o) for i, o in ops if o["tid"] == call["tid"] and o["pid"] == call["pid"]
                  and o["ts"] <= call["ts"] and o["ts"] + o["dur"] >= call["ts"] + call["dur"]]
        if not inside:
            continue
        _, i, op = min(inside, key=lambda t: (t[0], -t[1]))
        if op["name"] not in MATMULS:
            continue
        dims = op["args"]["Input Dims"]
        a, b = (dims[1], dims[2]) if op["name"] in ("aten::addmm", "aten::baddbmm") else (dims[0], dims[1])
        if op["name"] == "aten::linear":
            m, k, n, batch = int(np.prod(a[:-1])), a[-1], b[0], 1
        else:
            m, k, n, batch = a[-2], a[-1], b[-1], int(np.prod(a[:-2]))
        found[i] = 2 * m * n * k * batch
    return found


@pytest.mark.integration
@pytest.mark.parametrize("name", ["h100_resnet50", "h100_ddp", "h100_ncu_target"])
def test_every_matrix_multiply_is_2mnk(name):
    path = TRACES[name]
    expected = _brute_force_matmuls(path)
    cols = registry.declared_columns(str(path), "roofline")
    r = roofline(cols)
    got: dict[int, int] = defaultdict(int)
    ordinal = cols.cpu_ops.ordinal[r.owner]
    for o, f, k in zip(ordinal.tolist(), r.flops.tolist(), r.key.tolist()):
        if r.keys[k].family == "matmul":
            got[o] += f
    assert len(expected) > 5 and dict(got) == expected


@pytest.mark.integration
@pytest.mark.parametrize("name", ["h100_resnet50", "h100_ddp"])
def test_coverage_at_least_90_percent_and_the_rest_named(name):
    done = run_cli("roofline", str(TRACES[name]), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["coverage_pct"] >= 90
    rest = doc["unmodelled"]
    assert sum(u["time_ns"] for u in rest) == doc["kernel_ns"] - doc["modelled_ns"]
    assert all(u["name"] and u["why"] for u in rest)


@pytest.mark.integration
def test_trace_without_shapes_one_line_exit_0():
    done = run_cli("roofline", str(TRACES["alexnet"]))
    assert done.returncode == 0
    lines = [line for line in done.stdout.decode().splitlines() if "record_shapes=True" in line]
    assert len(lines) == 1 and "no CPU op carries shapes" in lines[0]


@pytest.mark.integration
def test_annotated_trace_imports_in_trace_processor_with_args(tmp_path):
    from tests.perfetto.test_trace_processor import BINARY
    from traceforge.perfetto import trace_processor as tp

    src = TRACES["h100_ddp"]
    out = tmp_path / "roof.json.gz"
    assert run_cli("annotate", str(src), "--roofline", "-o", str(out)).returncode == 0
    before, after = (json.loads(run_cli("check", str(p), "--format", "json").stdout) for p in (src, out))
    assert after["stats"] == before["stats"] and after["losses"] == before["losses"]  # no new loss
    try:
        rows = tp.query(BINARY, str(out), "select key, count(*) as n from args where key like 'args.%' and key in "
                        "('args.flops','args.bytes','args.tflops','args.gbps','args.intensity','args.bound',"
                        "'args.roofline_pct') group by key union all select 'counter:' || t.name, count(*) from "
                        "counter c join counter_track t on c.track_id = t.id where t.name like 'Roofline%' "
                        "group by t.name", timeout=120)
    except TraceforgeError as e:
        pytest.skip(f"trace_processor cannot run here: {e}")
    got = {r["key"]: int(r["n"]) for r in rows}
    kernels = sum(1 for e in json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
                  if e.get("cat") == "kernel" and "flops" in e.get("args", {}))
    for key in ("flops", "bytes", "intensity", "tflops", "gbps", "bound", "roofline_pct"):
        assert got.get(f"args.{key}", 0) >= kernels * 0.99, key
    assert {k for k in got if k.startswith("counter:")} >= {"counter:Roofline TFLOP/s", "counter:Roofline %"}


@pytest.mark.slow
def test_report_has_a_roofline_chart_and_the_ops_that_lost_most(tmp_path):
    pytest.importorskip("bokeh")
    import traceforge
    from traceforge.report import rank_report, render

    path = _trace(tmp_path)
    report = rank_report(0, str(path), traceforge.load(path))
    assert report.roofline is not None and report.roofline.ops["op"].tolist()[0] in ("aten::mm", "aten::add_")
    page = render([report])
    assert "Roofline on H100 SXM" in page and "Top ops by time lost to the roofline" in page
    unknown = rank_report(0, str(path), traceforge.load(_trace(tmp_path / "..", gpu="NVIDIA A100-PG509-200")))
    assert "limits are unknown (--gpu-limits)" in render([unknown])


def test_scan_keeps_each_distinct_shape_once(tmp_path):
    from traceforge.columns.scan import scan

    def op(ts, ext, dims, concrete):
        return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 1,
                "args": {"External id": ext, "Ev Idx": ext, "Concrete Inputs": concrete, "Input type": [F32, F32],
                         "Input Dims": dims}}
    events = [op(1, 7, [[2, 3], [3, 4]], ["", ""]), op(5, 8, [[2, 3], [3, 4]], ["", ""]),
              op(9, 9, [[2, 3], [3, 5]], ["", ""]), op(13, 10, [[2, 3], [3, 4]], ['"ts": 1', ""]),
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 17, "dur": 1}]
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    cols = scan(str(path), op_shapes=W.reads_shapes)
    ids = cols.cpu_ops.shape.tolist()
    assert ids[0] == ids[1] and len({ids[0], ids[2], ids[3]}) == 3 and ids[4] == -1
    assert [cols.op_shapes[i][0] for i in ids[:4]] == [[[2, 3], [3, 4]]] * 2 + [[[2, 3], [3, 5]], [[2, 3], [3, 4]]]
    assert cols.op_shapes[ids[3]][2] == ['"ts": 1', ""]
    assert "shape" not in scan(str(path)).cpu_ops.cols  # only when asked for


def test_kernels_without_any_cpu_op(tmp_path):
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}
    path = tmp_path / "k.json"
    path.write_bytes(orjson.dumps({"traceEvents": [kernel, {**kernel, "ts": 20}]}))
    done = run_cli("roofline", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["coverage_pct"] == 0 and doc["unmodelled"][0]["why"] == "no launching CPU op in the trace"
    assert run_cli("annotate", str(path), "--roofline", "-o", str(tmp_path / "o.json")).returncode == 0
