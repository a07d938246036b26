"""Kernel classification: rule sets, exact non-overlapped time, HTA's kernel types, nsys CSV,
``annotate --classify`` and the HTML report, on the real shared traces."""

from __future__ import annotations

import csv
import gzip
import heapq
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from collections import Counter, defaultdict

import numpy as np
import orjson
import pytest

import traceforge
from tests.conftest import SAMPLE, TRACES, raw_json
from traceforge.analyses.gpu_time.classify import NON_GPU, classify_columns, label_ops
from traceforge.analyses.gpu_time.rules import PRESETS, RuleSet, load_rules
from traceforge.cli.classify_report import NON_GPU_COLOR, render_html
from traceforge.cli.main import main
from traceforge.columns.scan import MEMCPY, MEMSET
from traceforge.errors import UsageError
from traceforge.plan.reads import gpu_columns as load_gpu_columns
from traceforge.util.exacttime import to_ns

HTA_TRACES = ("negative_queue", "df_index", "trace_diff")  # the three in docs/hta.md
_cache: dict = {}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in process (exit code, stdout, stderr): no interpreter start per call."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def gpu_cols(name: str):
    if name not in _cache:
        _cache[name] = load_gpu_columns(str(TRACES[name]))
    return _cache[name]


def _union_ns(ts: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of [ts, end) by merging sorted intervals (independent of the code)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(ts.tolist(), np.maximum(end, ts).tolist())):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_every_op_one_category_and_time_adds_up_exactly(name, trace_path):
    cols = load_gpu_columns(str(trace_path(name))) if name == SAMPLE else gpu_cols(name)
    gpu = cols.gpu
    end = gpu.ts + np.maximum(gpu.dur, 0)
    for preset in PRESETS:
        rules = load_rules(preset)
        labels = label_ops(cols, rules)
        assert len(labels.category) == len(gpu)
        assert ((labels.category >= 0) & (labels.category < len(labels.categories))).all()
        result = classify_columns(cols, rules)
        table = result.table
        ops = table[table.category != NON_GPU]
        assert ops.instances.sum() == len(gpu)  # no op vanishes, none is counted twice
        assert ops.duration_ns.sum() == int((end - gpu.ts).sum())
        for device in np.unique(gpu.device).tolist():
            rows = table[table.device == device]
            on = gpu.device == device
            assert rows.nonoverlapped_ns.sum() == result.window_ns  # categories + idle = wall span, in ns
            assert rows[rows.category != NON_GPU].nonoverlapped_ns.sum() == _union_ns(gpu.ts[on], end[on])
    if len(gpu):
        assert result.window_ns == int(end.max() - gpu.ts.min())
    else:
        assert table.empty


def _sweep_owned(ts: list[int], end: list[int], order_key: list[tuple]) -> list[int]:
    """Brute force: walk the elementary intervals between all boundaries; each goes to the
    running op that started first (a heap of the running ops)."""
    owned = [0] * len(ts)
    starts = sorted(range(len(ts)), key=lambda i: order_key[i])
    bounds = sorted(set(ts) | set(end))
    running: list[tuple] = []
    k = 0
    for a, b in zip(bounds, bounds[1:]):
        while k < len(starts) and ts[starts[k]] <= a:
            heapq.heappush(running, (order_key[starts[k]], starts[k]))
            k += 1
        while running and end[running[0][1]] <= a:
            heapq.heappop(running)
        if running:
            owned[running[0][1]] += b - a
    return owned


def test_nonoverlapped_equals_brute_force_on_trace_diff():
    cols = gpu_cols("trace_diff")
    gpu = cols.gpu
    rules = load_rules("default")
    labels = label_ops(cols, rules)
    table = classify_columns(cols, rules).table
    assert len(np.unique(gpu.stream)) == 4 and (table.nonoverlapped_ns < table.union_ns).any()  # real overlap
    ts, end = gpu.ts.tolist(), (gpu.ts + np.maximum(gpu.dur, 0)).tolist()
    owned = _sweep_owned(ts, end, list(zip(ts, gpu.ordinal.tolist())))
    by_cat: dict[str, int] = defaultdict(int)
    union_by_cat = {}
    for c, category in enumerate(labels.categories):
        on = labels.category == c
        union_by_cat[category] = _union_ns(gpu.ts[on], gpu.ts[on] + np.maximum(gpu.dur[on], 0))
    for i, c in enumerate(labels.category.tolist()):
        by_cat[labels.categories[c]] += owned[i]
    got = table[table.category != NON_GPU].set_index("category")
    assert got.nonoverlapped_ns.to_dict() == dict(by_cat)
    assert got.union_ns.to_dict() == {c: union_by_cat[c] for c in got.index}


# HTA 0.5 (hta/utils/utils.py): COMMUNICATION ^nccl.*Kernel, MEMORY ^(Memcpy|Memset|dma),
# COMPUTATION unless (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync) matches, else OTHER;
# "GPU kernels" are the events whose args have a stream; the kernel-type breakdown merges
# each type's intervals and splits time into types and "X overlapping Y" combinations.
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
_HTA_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")


def _hta_type(name: str) -> str:
    if _HTA_COMM.match(name):
        return "COMMUNICATION"
    if _HTA_MEMORY.match(name):
        return "MEMORY"
    return "COMPUTATION" if not _HTA_NOT_COMPUTE.match(name) else "OTHER"


def _hta_kernels(name: str) -> list[dict]:
    data = orjson.loads(raw_json(TRACES[name]))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "stream" in (e.get("args") or {})]


def _hta_breakdown(events: list[dict]) -> tuple[dict[str, list], dict[str, int]]:
    """(intervals per HTA type, ns per HTA combination label) computed as HTA does, in ns."""
    by_type: dict[str, list] = defaultdict(list)
    for e in events:
        start = to_ns(e["ts"])
        by_type[_hta_type(e["name"])].append((start, start + to_ns(e["dur"])))
    points = []
    for bit, kind in enumerate(_HTA_TYPES):
        merged: list[list[int]] = []
        for s, e in sorted(by_type.get(kind, [])):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        points += [(s, 1 << bit) for s, _ in merged] + [(e, -(1 << bit)) for _, e in merged]
    points.sort()
    combos: dict[str, int] = Counter()
    running = 0
    for (t, delta), (t_next, _) in zip(points, points[1:] + [(points[-1][0], 0)] if points else []):
        running += delta
        if running > 0:
            combos[" overlapping ".join(k for b, k in enumerate(_HTA_TYPES) if running & (1 << b))] += t_next - t
    return by_type, combos


@pytest.mark.parametrize("name", HTA_TRACES)
def test_hta_preset_reproduces_hta_kernel_type_shares(name):
    events = _hta_kernels(name)
    by_type, combos = _hta_breakdown(events)
    assert "OTHER" not in by_type  # HTA's definition is sound on these three traces (see below)
    table = classify_columns(gpu_cols(name), load_rules("hta")).table
    ours = table[table.category != NON_GPU].set_index("category")
    assert ours.instances.to_dict() == {k: len(v) for k, v in by_type.items()}
    total = sum(combos.values())
    assert ours.nonoverlapped_ns.sum() == total  # HTA's denominator: GPU busy time
    for kind in by_type:
        alone = combos.get(kind, 0)
        merged = sum(v for label, v in combos.items() if kind in label.split(" overlapping "))
        assert ours.union_ns[kind] == merged  # HTA's merged time of the type, to the ns
        # HTA reports time where types overlap as its own "X overlapping Y" slice; we give each
        # such instant to the op that started first, so each type gets between the two.
        assert alone <= ours.nonoverlapped_ns[kind] <= merged
    if all(" overlapping " not in label for label in combos):  # df_index: no cross-type overlap
        for kind, ns in combos.items():
            assert round(100 * ours.nonoverlapped_ns[kind] / total, 1) == round(100 * ns / total, 1)
            assert ours.nonoverlapped_ns[kind] == ns


def test_where_hta_kernel_types_are_unsound():
    """HTA calls every event with ``args.stream`` a GPU kernel and drops OTHER from its breakdown."""
    alexnet = _hta_kernels("alexnet")
    other = Counter(e["name"] for e in alexnet if _hta_type(e["name"]) == "OTHER")
    assert other == {"Stream Sync": 16, "Context Sync": 5}  # cuda_sync waits with "Sync": dropped
    waits = [e for e in alexnet if e["name"] == "Stream Wait Event"]
    assert len(waits) == 20 and {_hta_type(e["name"]) for e in waits} == {"COMPUTATION"}  # a wait as compute
    amd = _hta_kernels("amd")
    other = Counter((e["cat"], e["name"]) for e in amd if _hta_type(e["name"]) == "OTHER")
    assert other == {("cuda_runtime", "hipMemcpyWithStream"): 2}  # a CPU call, "Memcpy" inside: dropped
    cpu_as_compute = {e["name"] for e in amd if e["cat"] == "cuda_runtime" and _hta_type(e["name"]) == "COMPUTATION"}
    assert cpu_as_compute == {"hipLaunchKernel", "hipExtModuleLaunchKernel"}  # CPU launch calls as GPU compute
    _, combos = _hta_breakdown(amd)
    ours = classify_columns(gpu_cols("amd"), load_rules("hta")).table.set_index("category")
    assert ours.union_ns["COMPUTATION"] == 110881 and combos["COMPUTATION"] == 6749442  # 61x inflated
    triton = _hta_kernels("triton")
    assert Counter(e["cat"] for e in triton) == {"kernel": 1, "cpu_op": 1}  # the CPU op counts as a kernel
    # ours: kernels, copies and memsets only, each in exactly one type, nothing dropped
    for name in ("alexnet", "amd", "triton"):
        gpu = gpu_cols(name).gpu
        table = classify_columns(gpu_cols(name), load_rules("hta")).table
        assert table[table.category != NON_GPU].instances.sum() == len(gpu)


def test_labels_each_distinct_name_once(monkeypatch):
    calls = Counter()
    original = RuleSet.label

    def counting(self, name):
        calls[name] += 1
        return original(self, name)

    monkeypatch.setattr(RuleSet, "label", counting)
    cols = gpu_cols("df_index")
    label_ops(cols, load_rules("default"))
    used = {cols.names[i] for i in np.unique(cols.gpu.name).tolist()}
    assert set(calls) == used and set(calls.values()) == {1} and len(cols.gpu) > 50 * len(used)


def test_rule_order_first_match_wins_and_presets():
    default = load_rules("default")
    assert default.categories == ["nccl", "memcpy", "memset", "triton", "attention", "optimizer", "conv", "norm",
                                  "softmax", "gemm", "elementwise", "reduction", "other"]
    cases = {
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": "nccl",
        "Memcpy DtoD (Device -> Device)": "memcpy", "[CUDA memcpy Host-to-Device]": "memcpy",
        "Memset (Device)": "memset", "[CUDA memset]": "memset",
        "triton_poi_fused_add_cos_sin_0": "triton",
        "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>": "attention",
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80": "attention",  # not gemm, though cutlass
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>": "optimizer",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw": "conv",  # not gemm
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>": "norm",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>": "softmax",
        "volta_sgemm_128x32_nt": "gemm", "void splitKreduce_kernel<float, float, float, float>": "gemm",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>": "elementwise",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>": "reduction",
        "void convert_fp16_kernel(float*)": "other",  # "convert" is not a convolution
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>": "other",
    }
    assert {name: default.label(name)[0] for name in cases} == cases
    llama = load_rules("vllm-llama")
    assert llama.label("fused_moe_kernel") == ("moe_gemm", "layer")
    assert llama.label("void vllm::rms_norm_kernel<c10::BFloat16>") == ("norm", "layer")
    assert llama.label("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == ("nccl_and_custom_ar", "layer")
    assert llama.label("[CUDA memcpy Device-to-Host]") == ("non-gpu-H_D_memops", "layer")
    assert llama.label("group_gemm_starts") == ("gemm", "layer")  # vLLM's order: "gemm" is tried first
    assert llama.label("something new") == ("misc", "layer")
    gpt = load_rules("vllm-gpt-oss")
    assert gpt.label("_matmul_ogs_NNT_bf16xbf16xmxfp4") == ("moe_gemm", "layer")
    assert gpt.label("void splitKreduce_kernel<float>") == ("moe", "layer")
    assert load_rules("vllm-ds").label("sm90_fp8_gemm_fp8_blockwise") == ("block_fp8_gemm", "layer")
    hta = load_rules("hta")
    assert [hta.label(n)[0] for n in ("ncclKernel_AllReduce", "Memcpy HtoD", "dmaCopy", "Stream Sync x")] == \
        ["COMMUNICATION", "MEMORY", "MEMORY", "COMPUTATION"]


def test_user_rules_json_toml_and_errors(tmp_path, capsys):
    good = tmp_path / "mine.json"
    good.write_text(json.dumps({"name": "mine", "fallback": {"category": "rest", "stage": "misc"},
                                "rules": [{"match": "(?i)sgemm", "category": "gemm", "stage": "math"},
                                          ["Memset", "set"]]}))
    rules = load_rules(str(good))
    assert rules.name == "mine" and rules.categories == ["gemm", "set", "rest"] and rules.has_stages
    assert rules.label("volta_SGEMM_128") == ("gemm", "math") and rules.label("Memset (Device)") == ("set", "")
    table = traceforge.classify(str(TRACES["event_sync"]), rules=str(good))
    assert set(table.columns) >= {"stage", "category"}
    assert table.set_index("category").stage.to_dict() == {"gemm": "math", "set": "", NON_GPU: ""}
    if sys.version_info >= (3, 11):
        toml = tmp_path / "mine.toml"
        toml.write_text('name = "t"\nfallback = "rest"\nrules = [["gemm", "gemm"], ["Memset", "set"]]\n'
                        '[[more]]\n')
        with pytest.raises(UsageError, match=r"unknown keys \['more'\]"):
            load_rules(str(toml))
        toml.write_text('name = "t"\nfallback = "rest"\n[[rules]]\nmatch = "gemm"\ncategory = "gemm"\n')
        assert load_rules(str(toml)).label("ampere_sgemm") == ("gemm", "")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"match": "gemm", "category": "gemm"}, {"match": "nccl(", "category": "c"}]}))
    with pytest.raises(UsageError, match=r"rule 2: bad regex 'nccl\(': missing \)"):
        load_rules(str(bad))
    code, _, err = cli(capsys, "classify", str(TRACES["triton"]), "--rules", str(bad))
    assert code == 1
    assert err.strip().splitlines() == [
        f"traceforge: error: rules file {bad}: rule 2: bad regex 'nccl(': missing ), unterminated subpattern "
        "at position 4"]
    for text, message in ((json.dumps({"rules": [["x"]]}), "rule 1: expected"),
                          (json.dumps({"rules": [{"match": "x", "category": ""}]}), "category must be a non-empty"),
                          (json.dumps({"rules": []}), "non-empty list"), ("{", "not valid JSON")):
        bad.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_rules(str(bad))
    with pytest.raises(UsageError, match="neither a preset"):
        load_rules("no-such-preset")


_NSYS_NEW = ["Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd",
             "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd", "DstMemKd", "Device",
             "Ctx", "GreenCtx", "Strm", "Name"]
_NSYS_OLD = [c for c in _NSYS_NEW if c != "GreenCtx"]
_NSYS_OLD[_NSYS_OLD.index("Throughput (MB/s)")] = "Throughput (MBps)"
_COPY_NAMES = {"new": {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device"},
               "old": {"HtoD": "HtoD", "DtoH": "DtoH", "DtoD": "DtoD"}}


def _write_nsys_csv(cols, path, layout: str) -> None:
    """The GPU ops of ``cols`` as ``nsys stats -r cuda_gpu_trace --format csv`` prints them."""
    gpu = cols.gpu
    header = _NSYS_NEW if layout == "new" else _NSYS_OLD
    order = np.lexsort((gpu.ordinal, gpu.ts))  # nsys sorts by start
    lines = ["NOTICE: Existing SQLite export found: report1.sqlite",
             "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2025.1/cuda_gpu_trace.py]... ", ""]
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", newline="", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        w = csv.writer(f)
        w.writerow(header)
        for i in order.tolist():
            name = cols.names[gpu.name[i]]
            if gpu.kind[i] == MEMCPY:
                direction = name.split()[1]
                name = f"[CUDA memcpy {_COPY_NAMES[layout].get(direction, direction)}]"
            elif gpu.kind[i] == MEMSET:
                name = "[CUDA memset]"
            row = dict.fromkeys(header, "")
            row.update({"Start (ns)": gpu.ts[i], "Duration (ns)": gpu.dur[i], "CorrId": gpu.correlation[i],
                        "Device": f"NVIDIA A100-SXM4-80GB ({gpu.device[i]})", "Ctx": 1, "Strm": gpu.stream[i],
                        "Name": name})
            w.writerow(row[c] for c in header)


@pytest.mark.parametrize("name,layout,suffix", [("trace_diff", "new", ".csv"), ("nccl", "old", ".out.gz")])
def test_nsys_csv_classifies_to_the_same_totals(name, layout, suffix, tmp_path, capsys):
    cols = gpu_cols(name)
    path = tmp_path / f"gputrace{suffix}"
    _write_nsys_csv(cols, path, layout)
    assert any("," in n and "<" in n for n in cols.names)  # quoted names with commas are in there
    keys = ["device", "category", "instances", "duration_ns", "nonoverlapped_ns", "union_ns"]
    for preset in ("default", "hta", "vllm-llama"):
        ours = classify_columns(cols, load_rules(preset)).table[keys]
        from_csv = traceforge.classify(str(path), rules=preset)[keys]
        assert from_csv.to_dict("records") == ours.to_dict("records")
    code, out, err = cli(capsys, "classify", str(path), "--format", "json")  # told apart by content, not name
    assert code == 0, err
    rows = orjson.loads(out)["files"][0]["rows"]
    assert sum(r["nonoverlapped_ns"] for r in rows) == classify_columns(cols, load_rules("default")).window_ns


def test_cli_formats_and_elapsed(capsys):
    path = str(TRACES["nccl"])
    code, out, err = cli(capsys, "classify", path)
    assert code == 0, err
    assert "rules: default" in out and re.search(r"^\s+nccl\s+21\s", out, re.M) and "non-GPU" in out
    small = str(TRACES["alexnet"])
    table = traceforge.classify(small)
    _, out, _ = cli(capsys, "classify", small, "--format", "csv", "--rules", "hta")
    assert out.splitlines()[0] == "file,device,category,instances,duration_ns,nonoverlapped_ns,union_ns,share"
    busy = int(table[table.category != NON_GPU].nonoverlapped_ns.sum())
    _, out, _ = cli(capsys, "classify", small, "--format", "json", "--elapsed-s", "15.5")
    data = orjson.loads(out)["files"][0]
    assert data["window_ns"] == 15_500_000_000
    rows = {r["category"]: r for r in data["rows"]}
    assert rows[NON_GPU]["nonoverlapped_ns"] == 15_500_000_000 - busy
    code, out, err = cli(capsys, "classify", small, "--format", "json", "--elapsed-s", "0.00001")
    assert code == 1 and out == "" and "less than GPU 0's busy time" in err  # tests/analyses/gpu_time/test_classify_elapsed.py
    code, _, err = cli(capsys, "classify", small, small, small, "--elapsed-s", "1,2")
    assert code == 1 and "one value or one per input (3), not 2" in err
    _, out, _ = cli(capsys, "classify", small, "--kernels", "--format", "csv")
    assert out.splitlines()[0] == "file,device,name,category,instances,duration_ns,nonoverlapped_ns,share"
    assert len(out.splitlines()) - 1 == len(traceforge.classify_kernels(small))
    code, out, err = cli(capsys, "classify", str(TRACES["cupti"]))
    assert code == 0 and "no GPU kernels" in out and "CUPTI range-profiler" in err


def _svg_of(html: str) -> ET.Element:
    return ET.fromstring(html[html.index("<svg"): html.index("</svg>") + len("</svg>")])


def test_html_report_has_the_bars(tmp_path, capsys):
    names = ["nccl", "alexnet", "amd"]
    inputs = [str(TRACES[n]) for n in names]
    expected = {str(TRACES[n]): classify_columns(gpu_cols(n), load_rules("default")) for n in names}
    report = tmp_path / "report.html"
    code, _, err = cli(capsys, "classify", *inputs, "--html", str(report))
    assert code == 0, err
    html = report.read_text("utf-8")
    assert "<script" not in html and not re.search(r'(src|href)="', html)  # self-contained, no network
    svg = _svg_of(html)
    ns = "{http://www.w3.org/2000/svg}"
    segs = [r for r in svg.iter(f"{ns}rect") if r.get("class") == "seg"]
    by_input: dict[str, list] = defaultdict(list)
    for r in segs:
        by_input[r.get("data-input")].append(r)
    assert list(by_input) == inputs  # one bar per input, in order
    xs = [float(by_input[p][0].get("x")) for p in inputs]
    assert xs == sorted(xs) and len(set(xs)) == 3  # side by side
    heights = {}
    for path in inputs:
        t = expected[path].table
        want = dict(zip(t.category, t.nonoverlapped_ns))
        got = {r.get("data-category"): int(r.get("data-ns")) for r in by_input[path]}
        assert got == {c: v for c, v in want.items() if v > 0}
        assert sum(got.values()) == expected[path].window_ns
        heights[path] = sum(float(r.get("height")) for r in by_input[path])
        ys = sorted((float(r.get("y")), float(r.get("height"))) for r in by_input[path])
        for (y0, h0), (y1, _) in zip(ys, ys[1:]):
            assert abs(y0 + h0 - y1) < 0.02  # stacked without gaps
        assert by_input[path][-1].get("data-category") == NON_GPU  # non-GPU on top
        assert by_input[path][-1].get("fill") == NON_GPU_COLOR
    spans = {p: expected[p].window_ns for p in inputs}
    tallest = max(spans, key=spans.get)
    for p in inputs:  # heights proportional to each window
        assert abs(heights[p] / heights[tallest] - spans[p] / spans[tallest]) < 1e-3
    colors = {r.get("data-category"): r.get("fill") for r in segs}
    assert len(set(colors.values())) == len(colors)  # one colour per category, the same in every bar
    assert "<table>" in html and "total" in html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _png_pixels(data: bytes) -> np.ndarray:
    """RGB pixels of a non-interlaced 8-bit RGB/RGBA PNG (what Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, interlace = (int.from_bytes(body[0:4], "big"),
                                                      int.from_bytes(body[4:8], "big"), body[8], body[9], body[12])
            assert depth == 8 and color in (2, 6) and interlace == 0
            ch = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * ch)
    out = np.zeros((height, width, ch), np.int64)
    prev = np.zeros((width, ch), np.int64)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].reshape(width, ch).astype(np.int64)
        if kind == 0:
            row = line
        elif kind == 1:
            row = np.cumsum(line, axis=0) % 256
        elif kind == 2:
            row = (line + prev) % 256
        else:  # Average (3) and Paeth (4) depend on the pixel to the left: one pixel at a time
            row = np.zeros_like(line)
            left = upleft = np.zeros(ch, np.int64)
            for x in range(width):
                up = prev[x]
                if kind == 3:
                    pred = (left + up) // 2
                else:
                    p = left + up - upleft
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
                    pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
                row[x] = left = (line[x] + pred) % 256
                upleft = up
        out[y] = prev = row
    return out[:, :, :3]


def test_html_report_renders_in_headless_chromium(tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium/Chrome on PATH: the SVG is checked by parsing in test_html_report_has_the_bars")
    results = [classify_columns(gpu_cols(n), load_rules("default")) for n in ("event_sync", "nccl")]
    page = tmp_path / "report.html"
    page.write_text(render_html(results), "utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=900,600", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = _png_pixels(shot.read_bytes())
    svg = _svg_of(page.read_text("utf-8"))
    plot_right = 24 + float(svg.get("width")) - 220  # body margin + the SVG's width less its legend column
    plot = pixels[:, : int(plot_right)]
    area: dict[str, float] = defaultdict(float)
    for r in svg.iter("{http://www.w3.org/2000/svg}rect"):
        if r.get("class") == "seg" and float(r.get("height")) >= 4:
            area[r.get("fill")] += float(r.get("width")) * float(r.get("height"))
    assert len(area) >= 4 and NON_GPU_COLOR in area
    for fill, expected in area.items():
        rgb = [int(fill[i:i + 2], 16) for i in (1, 3, 5)]
        drawn = int(np.all(plot == rgb, axis=2).sum())
        assert drawn >= 0.8 * expected, f"{fill}: {drawn} pixels drawn in the bars, {expected:.0f} expected"


def test_annotate_classify_args_and_utilisation_tracks(tmp_path, capsys):
    """Every GPU op gets its category/stage arg; per (GPU, category) utilisation tracks are
    the share of running ops, checked against the raw ops at every change point."""
    out = tmp_path / "out.json"
    code, _, err = cli(capsys, "annotate", str(TRACES["nccl"]), "-o", str(out), "--classify", "--rules", "vllm-llama")
    assert code == 0, err
    rules = load_rules("vllm-llama")
    events = orjson.loads(out.read_bytes())["traceEvents"]
    ops = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(ops) == len(gpu_cols("nccl").gpu)
    for e in ops:
        category, stage = rules.label(e["name"])
        assert (e["args"]["category"], e["args"]["stage"]) == (category, stage)
    tracks: dict[str, list] = defaultdict(list)
    for e in events:
        if e.get("ph") == "C" and e.get("cat") == "traceforge":
            assert list(e["args"]) == ["%"] and isinstance(e["args"]["%"], (int, float))
            tracks[e["name"]].append((to_ns(e["ts"]), e["args"]["%"]))
    assert set(tracks) == {f"GPU 0 {c} busy" for c in {rules.label(e["name"])[0] for e in ops}}
    starts = np.array([to_ns(e["ts"]) for e in ops])
    ends = starts + np.array([to_ns(e["dur"]) for e in ops])
    cats = np.array([rules.label(e["name"])[0] for e in ops])
    for name, points in tracks.items():
        ts = [t for t, _ in points]
        assert ts == sorted(set(ts))  # one value per ts, increasing
        category = name[len("GPU 0 "):-len(" busy")]
        for t, value in points:
            running = (starts <= t) & (ends > t)
            n, mine = int(running.sum()), int((running & (cats == category)).sum())
            assert value == ((2000 * mine + n) // (2 * n) / 10 if n else 0)  # %, one decimal, half up
        assert points[-1][1] == 0  # idle after the last op


def test_python_api_dataframes():
    table = traceforge.classify(str(TRACES["alexnet"]), rules="hta", elapsed_s="13")
    assert list(table.columns) == ["device", "category", "instances", "duration_ns", "nonoverlapped_ns",
                                   "union_ns", "share"]
    assert table.nonoverlapped_ns.sum() == 13_000_000_000 and table.share.sum() == pytest.approx(1.0)
    kernels = traceforge.classify_kernels(str(TRACES["alexnet"]))
    assert kernels.instances.sum() == len(gpu_cols("alexnet").gpu)
    assert set(kernels.category) <= set(load_rules("default").categories)
