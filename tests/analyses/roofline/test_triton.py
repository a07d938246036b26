"""The roofline of Triton / ``torch.compile`` kernels: Inductor's memory-bound kernels modelled from
the CPU op Inductor records around each launch (family ``work.TRITON``, marked in the tables, the
coverage line and the kernels' args), its template kernels and kernels launched straight from a
compiled region not modelled, each with its reason."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import orjson
import pandas as pd
import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.roofline import work as W
from traceforge.cli.output import WIDTH

F32, BF16 = "float", "c10::BFloat16"
H100_GBPS = 3350


def work(name: str, dims: list, types: list, concrete: list | None = None) -> W.Work | str:
    return W.op_work(name, (dims, types, concrete or [""] * len(types), None, None, None))


def test_inductor_memory_bound_kernels_move_each_tensor_argument_once():
    # triton_poi_fused_add_cos_sin_0(in_ptr0, in_ptr1, out_ptr0, xnumel), as hta/triton_example records it
    w = work("triton_poi_fused_add_cos_sin_0", [[10, 10], [10, 10], [10, 10], []], [F32, F32, F32, "Scalar"],
             ["", "", "", "100"])
    assert (w.family, w.flops, w.bytes, w.dtype) == (W.TRITON, 0, 3 * 100 * 4, F32)
    red = work("triton_red_fused_sum_1", [[512, 4096], [512], [], []], [BF16, F32, "Scalar", "Scalar"],
               ["", "", "512", "4096"])
    assert (red.family, red.bytes, red.dtype) == (W.TRITON, 512 * 4096 * 2 + 512 * 4, BF16)
    for kind in ("per", "spl", "for"):
        assert work(f"triton_{kind}_fused_x_2", [[8]], [F32]).bytes == 32, kind
    assert W.is_modelled("triton_poi_fused_add_0") and W.reads_shapes("triton_red_fused_sum_1")
    assert work("triton_poi_fused_add_0", [[], []], ["Scalar", "Scalar"], ["1", "2"]) == \
        "shapes incomplete: no tensor argument"
    assert W.op_work("triton_poi_fused_add_0", None) == "no shapes recorded (profile with record_shapes=True)"


def test_templates_compiled_regions_and_other_names_are_not_modelled_and_say_why():
    assert not W.is_modelled("triton_tem_fused_mm_0")
    assert W.op_work("triton_tem_fused_mm_0", None) == W.TRITON_TEMPLATE
    for region in ("Torch-Compiled Region: 0/0", "CompiledFunction", "CompiledFunctionBackward",
                   "## Call CompiledFxGraph fz3 ##", "autograd::engine::evaluate_function: CompiledFunctionBackward"):
        assert W.no_model_reason(region) == W.COMPILED_REGION, region
    for other in ("triton_kernel", "my_triton_poi_fused_0", "triton_", "triton kernel"):
        assert W.no_model_reason(other) == "no work model for this op" and not W.is_modelled(other), other


# --- a torch.compile trace made here ---------------------------------------------------------------

POI_DIMS, POI_TYPES = [[4096, 1024], [1024], [4096, 1024], []], [BF16, BF16, BF16, "Scalar"]
POI_BYTES = 2 * (2 * 4096 * 1024 + 1024)
MM = (512, 1024, 256)


def compiled_trace(tmp_path: Path, gpu: str | None = "NVIDIA H100 80GB HBM3", shapes: bool = True) -> Path:
    """One step of a compiled forward, laid out as PyTorch 2.x writes it: Dynamo's region encloses
    AOTAutograd's ``CompiledFunction`` (with the graph's Input Dims), which encloses Inductor's
    ``## Call CompiledFxGraph`` and in it: a pointwise Triton kernel in the op Inductor records around
    its launch (named after it, args the kernel's), an ``aten::mm`` (an extern kernel), a template
    Triton kernel in its record, and a Triton kernel launched with no record of its own."""
    events: list[dict] = []
    corr = 40

    def op(name, ts, dur, dims=None, types=None, concrete=None, extra=None):
        args = {"External id": len(events)}
        if shapes and dims is not None:
            args.update({"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete or [""] * len(types)})
        args.update(extra or {})
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": args})
        return args["External id"]

    def launch(owner, api, ts, kernel, start, dur):
        nonlocal corr
        corr += 1
        cat = "cuda_driver" if api == "cuLaunchKernel" else "cuda_runtime"
        ids = {"External id": owner, "correlation": corr}  # as Kineto links a launch to its op
        events.append({"ph": "X", "cat": cat, "name": api, "pid": 1, "tid": 1, "ts": ts, "dur": 2, "args": ids})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": start, "dur": dur,
                       "args": {**ids, "device": 0, "stream": 7}})
        events.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": ts, "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": start, "cat": "ac2g", "name": "ac2g",
                       "bp": "e"})

    triton = {"kernel_backend": "triton", "kernel_hash": "c7abc", "stream": 0, "num_warps": 4}
    events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000,
                   "dur": 400, "args": {}})
    op("Torch-Compiled Region: 0/0", 1010, 300)
    op("CompiledFunction", 1020, 280, [[4096, 1024], [1024], [1024, 256]], [BF16] * 3)
    graph = op("## Call CompiledFxGraph fz3 ##", 1030, 260)
    poi = op("triton_poi_fused_add_0", 1040, 20, POI_DIMS, POI_TYPES, ["", "", "", "4194304"], triton)
    launch(poi, "cuLaunchKernel", 1045, "triton_poi_fused_add_0", 1100, 10)
    mm = op("aten::mm", 1070, 20, [[MM[0], MM[2]], [MM[2], MM[1]]], [BF16, BF16])
    launch(mm, "cudaLaunchKernel", 1075, "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", 1115, 4)
    tem = op("triton_tem_fused_mm_1", 1100, 20, [[512, 256], [256, 1024], [512, 1024], []], POI_TYPES, None, triton)
    launch(tem, "cuLaunchKernel", 1105, "triton_tem_fused_mm_1", 1125, 6)
    launch(graph, "cuLaunchKernel", 1130, "triton_per_fused_sum_2", 1135, 5)  # no record of its own
    doc = {"schemaVersion": 1, "traceEvents": events}
    if gpu is not None:
        doc["deviceProperties"] = [{"id": 0, "name": gpu}]
    path = tmp_path / "compiled.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def test_a_compiled_trace_models_the_pointwise_triton_kernel_and_says_how_much(tmp_path):
    path = compiled_trace(tmp_path)
    doc = json.loads(run_cli("roofline", str(path), "--format", "json").stdout)
    kernel_ns = (10 + 4 + 6 + 5) * 1000
    assert (doc["kernel_ns"], doc["modelled_ns"], doc["triton_ns"]) == (kernel_ns, 14_000, 10_000)
    assert doc["triton_pct"] == round(100 * 10 / 25, 3)
    triton = [o for o in doc["ops"] if o["family"] == W.TRITON]
    assert [(o["op"], o["flops"], o["bytes"], o["bound"]) for o in triton] == \
        [("triton_poi_fused_add_0", 0, POI_BYTES, "memory")]
    assert triton[0]["roofline_ns"] == math.ceil(POI_BYTES / H100_GBPS)
    mm = next(o for o in doc["ops"] if o["op"] == "aten::mm")
    assert mm["flops"] == 2 * MM[0] * MM[1] * MM[2]  # the extern kernel inside the region keeps its own op
    why = {u["name"]: u["why"] for u in doc["unmodelled"]}
    assert why == {"triton_tem_fused_mm_1": W.TRITON_TEMPLATE, "## Call CompiledFxGraph fz3 ##": W.COMPILED_REGION}
    lines = run_cli("roofline", str(path)).stdout.decode().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("coverage:"))
    coverage = " ".join(line.strip() for line in lines[at:at + 2])  # wrapped to 100 columns
    assert coverage == ("coverage: 56.0% of kernel time modelled (0.014 of 0.025 ms; 2 kernels not modelled); "
                        "40.0% of kernel time as Triton kernels, memory-bound from their shapes")
    assert f"{path}: GPU 0: H100 SXM" in lines  # the input's path, as long as it is: not wrapped
    assert max(len(line) for line in lines if not line.startswith(str(path))) <= WIDTH
    families = pd.read_csv(io.BytesIO(run_cli("roofline", str(path), "--format", "csv", "--table", "families")
                                      .stdout))
    assert families.set_index("family").loc[W.TRITON, "time_ns"] == 10_000


def test_annotate_marks_the_triton_kernel_and_says_so_in_its_summary(tmp_path):
    path = compiled_trace(tmp_path)
    out = tmp_path / "out.json"
    done = run_cli("annotate", str(path), "--roofline", "-o", str(out))
    assert done.returncode == 0, done.stderr
    summary = " ".join((done.stderr + done.stdout).decode().split())  # the summary is wrapped
    assert "40.0% of kernel time as Triton kernels, memory-bound from their shapes" in summary
    kernels = {e["name"]: e.get("args", {}) for e in orjson.loads(out.read_bytes())["traceEvents"]
               if e.get("cat") == "kernel"}
    poi = kernels["triton_poi_fused_add_0"]
    assert (poi["roofline_model"], poi["bytes"], poi["bound"]) == (W.TRITON, POI_BYTES, "memory")
    assert poi["roofline_ns"] == math.ceil(POI_BYTES / H100_GBPS)
    assert "roofline_model" not in kernels["nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN"]
    assert "flops" not in kernels["triton_tem_fused_mm_1"] and "flops" not in kernels["triton_per_fused_sum_2"]
    assert run_cli("check", str(out)).returncode == 0


def test_a_compiled_trace_without_shapes_models_nothing_and_says_so(tmp_path):
    done = run_cli("roofline", str(compiled_trace(tmp_path, shapes=False)))
    assert done.returncode == 0
    lines = done.stdout.decode().splitlines()
    assert [line for line in lines if "record_shapes=True" in line] == \
        ["no CPU op carries shapes (Input Dims): nothing modelled; profile with record_shapes=True"]
    assert any(line.startswith("coverage: 0.0%") and "Triton" not in line for line in lines)


@pytest.mark.integration
def test_the_hta_triton_example_is_modelled_from_its_launch_shapes(tmp_path):
    path = TRACES["triton"]
    doc = json.loads(run_cli("roofline", str(path), "--format", "json").stdout)
    assert doc["coverage_pct"] == 100 and doc["triton_ns"] == doc["kernel_ns"] == 1760
    (op,) = doc["ops"]
    assert (op["op"], op["family"], op["flops"], op["bytes"]) == ("triton_poi_fused_add_cos_sin_0", W.TRITON, 0,
                                                                  3 * 10 * 10 * 4)
    assert op["roofline_ns"] is None and len(doc["notes"]) == 1  # an A100-PG509-200: not in the table
    limits = tmp_path / "limits.json"
    limits.write_text(json.dumps({"NVIDIA A100-PG509-200": {"memory_gbps": 1555, "tflops": {"fp32": 19.5}}}))
    doc = json.loads(run_cli("roofline", str(path), "--gpu-limits", str(limits), "--format", "json").stdout)
    assert (doc["ops"][0]["bound"], doc["ops"][0]["roofline_ns"]) == ("memory", 1)  # 1,200 B at 1,555 GB/s


def test_the_report_and_the_api_say_how_much_is_modelled_from_triton_shapes(tmp_path):
    import traceforge

    path = compiled_trace(tmp_path)
    tables = traceforge.load(path).roofline()
    assert (tables.triton_ns, tables.triton_pct) == (10_000, 40.0)
    assert tables.families.set_index("family").loc[W.TRITON, "bytes"] == POI_BYTES
    pytest.importorskip("bokeh")
    from traceforge.report import rank_report, render

    page = render([rank_report(0, str(path), traceforge.load(path))])
    assert "40.0% of kernel time as Triton kernels, memory-bound from their shapes" in page
