"""``analyses.kernel_breakdown`` (HTA's ``get_gpu_kernel_breakdown``): against a brute force
over hand-written and sample events, and against HTA 0.5.0's numbers on three shared traces."""

from __future__ import annotations

import csv
import io
import random
import statistics
from collections import Counter, defaultdict
from decimal import Decimal

import numpy as np
import orjson
import pytest

from tests.conftest import TRACES, run_cli
from traceforge.analyses.gpu_time.breakdown import OTHERS, folded, kernel_breakdown, kernel_types
from traceforge.analyses.gpu_time.classify import classify_columns
from traceforge.analyses.gpu_time.rules import load_rules
from traceforge.analyses.launches.calls import last_step_start, launch_of_gpu
from traceforge.analyses.structure.steps import hta_ops
from traceforge.columns.scan import scan

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def _hta_type(name: str) -> str:
    if name.startswith("nccl") and "Kernel" in name:
        return "COMMUNICATION"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "MEMORY"
    return "COMPUTATION"


def _random_trace(path, seed: int, n: int = 120) -> list[dict]:
    """GPU ops of the three HTA types on two devices and three streams, with µs times of up to 3
    decimals, touching and nested intervals, zero durations."""
    rnd = random.Random(seed)
    names = ["ncclKernel_AllReduce", "Memcpy DtoD (Device -> Device)", "Memset (Device)", "volta_sgemm_128x64_nn",
             "elementwise_kernel"] + [f"k{i}" for i in range(14)]
    events, ends = [], []
    for i in range(n):
        name = rnd.choice(names)
        ts = Decimal(rnd.randrange(0, 400_000)) / 1000
        if ends and rnd.random() < 0.2:
            ts = rnd.choice(ends)  # touches an earlier op's end
        dur = Decimal(rnd.choice([0, rnd.randrange(1, 30_000)])) / 1000
        ends.append(ts + dur)
        cat = "gpu_memcpy" if name.startswith("Memcpy") else "gpu_memset" if name.startswith("Memset") else "kernel"
        device = rnd.randrange(2)
        events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": 7 + rnd.randrange(3),
                       "ts": float(ts), "dur": float(dur),
                       "args": {"device": device, "stream": 7, "correlation": i + 1}})
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return events


def _brute_types(events: list[dict]) -> dict[tuple[int, str], int]:
    """(device, set name) -> ns: every ns instant, the set of types with an op covering it."""
    covered: dict[int, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    for e in events:
        start = _ns(e["ts"])
        for t in range(start, start + _ns(e["dur"])):
            covered[e["args"]["device"]][t].add(_hta_type(e["name"]))
    order = ("COMPUTATION", "COMMUNICATION", "MEMORY")
    out: Counter = Counter()
    for device, instants in covered.items():
        for types in instants.values():
            out[device, " overlapping ".join(t for t in order if t in types)] += 1
    return dict(out)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_kernel_types_equal_a_brute_force_over_every_ns(tmp_path, seed):
    events = _random_trace(tmp_path / "t.json", seed)
    table = kernel_types(scan(str(tmp_path / "t.json")))
    assert {(r.device, r.kernel_type): r.time_ns for r in table.itertuples()} == _brute_types(events)
    for device, part in table.groupby("device"):
        assert part["share_pct"].sum() == pytest.approx(100.0)
        assert part["time_ns"].is_monotonic_decreasing


@pytest.mark.slow
def test_types_can_be_left_out(tmp_path):
    events = _random_trace(tmp_path / "t.json", 7)
    table = kernel_types(scan(str(tmp_path / "t.json")), types=["COMPUTATION", "COMMUNICATION"])
    kept = [e for e in events if _hta_type(e["name"]) != "MEMORY"]
    assert {(r.device, r.kernel_type): r.time_ns for r in table.itertuples()} == _brute_types(kept)
    with pytest.raises(ValueError, match="no type 'gemm'"):
        kernel_types(scan(str(tmp_path / "t.json")), types=["gemm"])


def _brute_breakdown(events: list[dict], top: int) -> dict:
    """(device, type, name or Others) -> (count, total, min, max, names), names ranked by total then name."""
    durations: dict = defaultdict(list)
    for e in events:
        durations[e["args"]["device"], _hta_type(e["name"]), e["name"]].append(max(_ns(e["dur"]), 0))
    by_type: dict = defaultdict(list)
    for (device, kind, name), durs in durations.items():
        by_type[device, kind].append((-sum(durs), name, durs))
    out = {}
    for (device, kind), names in by_type.items():
        names.sort()
        others: list[int] = []
        for i, (_, name, durs) in enumerate(names):
            if i < top:
                out[device, kind, name] = (len(durs), sum(durs), min(durs), max(durs), 1)
            else:
                others += durs
        if others:
            out[device, kind, OTHERS] = (len(others), sum(others), min(others), max(others), len(names) - top)
    return out


@pytest.mark.parametrize("top", [0, 3, 10])
def test_kernel_breakdown_equals_a_brute_force(tmp_path, top):
    events = _random_trace(tmp_path / "t.json", 11, n=300)
    table = kernel_breakdown(scan(str(tmp_path / "t.json")), top=top)
    got = {(r.device, r.kernel_type, r.name): (r.count, r.total_ns, r.min_ns, r.max_ns, r.names)
           for r in table.itertuples()}
    assert got == _brute_breakdown(events, top)
    others = table[table["name"] == OTHERS].iloc[0]
    same = (table["device"] == others["device"]) & (table["kernel_type"] == others["kernel_type"])
    kept = set(table.loc[same, "name"])
    folded_durs = [max(_ns(e["dur"]), 0) for e in events if e["args"]["device"] == others["device"]
                   and _hta_type(e["name"]) == others["kernel_type"] and e["name"] not in kept]
    assert others["std_ns"] == pytest.approx(statistics.stdev(folded_durs))
    for _, part in table.groupby(["device", "kernel_type"]):
        assert part["share_pct"].sum() == pytest.approx(100.0)


def test_htas_duration_ratio_cut_is_by_rank_among_names():
    totals = np.array([100, 90, 80, 70, 60, 50, 40, 30, 20, 10, 5])  # 11 names
    assert folded(totals, 10).tolist() == [False] * 10 + [True]
    assert folded(totals, 10, 0.8).tolist() == [False] * 9 + [True] * 2  # running sums above their p80
    assert not folded(totals[:10], 10, 0.8).any()  # no more names than top: HTA cuts nothing
    assert folded(np.arange(20, 0, -1), 10, 0.8).tolist() == [False] * 10 + [True] * 10


def test_hta_ops_are_those_launched_before_the_last_step(sample):
    events = orjson.loads(sample.raw)["traceEvents"]
    last = max(_ns(e["ts"]) for e in events if e.get("name", "").startswith("ProfilerStep#"))
    launch_ts = {e["args"]["correlation"]: _ns(e["ts"]) for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    expected = [launch_ts.get(e["args"].get("correlation"), last) < last for e in events if e.get("cat") in GPU_CATS]
    cols = scan(str(sample.path))
    assert last_step_start(cols) == last
    assert hta_ops(cols).tolist() == expected
    assert 0 < sum(expected) < len(expected)


def test_stats_tables_and_csv(sample):
    r = run_cli("stats", str(sample.path), "--table", "kernel_types", "--table", "kernel_breakdown")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "Kernel types" in text and "Top kernels per kernel type" in text
    r = run_cli("stats", str(sample.path), "--table", "kernel_breakdown", "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout.decode())))
    cols = scan(str(sample.path), cpu_ops=False)
    assert sum(int(row["total_ns"]) for row in rows) == int(np.maximum(cols.gpu.dur, 0).sum())
    assert list(rows[0]) == ["rank", "device", "kernel_type", "name", "count", "total_ns", "mean_ns", "min_ns",
                             "max_ns", "std_ns", "share_pct", "names"]


# -- HTA 0.5.0's numbers ------------------------------------------------------------------------
# Recorded with HTA 0.5.0 (pandas 2.3), in µs (these traces have whole-µs times, so x1000 is exact):
#   kt, kb = TraceAnalysis(trace_dir=DIR).get_gpu_kernel_breakdown(visualize=False)   # include_memory_kernels=True
#   kt2, _ = TraceAnalysis(trace_dir=DIR).get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=False)
# kt: kernel_type -> sum; kb: (kernel_type, name[:60], sum (us)), HTA's "others" as Others.
# HTA's zero-length "COMPUTATION overlapping MEMORY" row (0 us) on df_index is not listed: traceforge has no 0 ns rows.
HTA = {
    "negative_queue": {
        "types": {"COMPUTATION": 138794, "COMMUNICATION": 134025, "MEMORY": 32246,
                  "COMPUTATION overlapping MEMORY": 3171, "COMPUTATION overlapping COMMUNICATION": 1871,
                  "COMMUNICATION overlapping MEMORY": 594},
        "types_no_memory": {"COMPUTATION": 141965, "COMMUNICATION": 134619,
                            "COMPUTATION overlapping COMMUNICATION": 1871},
        "kernels": [
            ("COMMUNICATION", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, uns", 138211),
            ("COMPUTATION", "others", 25362), ("COMPUTATION", "triton__0d1d2d3d4d5d6d7d8d9d10d11d12d13d14", 2463),
            ("COMPUTATION", "void at::native::elementwise_kernel<128, 2, at::native::gpu_", 1634),
            ("COMPUTATION", "void at::native::unrolled_elementwise_kernel<at::native::CUD", 2623),
            ("COMPUTATION", "void at::native::vectorized_elementwise_kernel<4, at::native", 5868),
            ("COMPUTATION", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_3", 20080),
            ("COMPUTATION", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_3", 25281),
            ("COMPUTATION", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_3", 2124),
            ("COMPUTATION", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16", 30969),
            ("COMPUTATION", "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, dec", 1828),
            ("COMPUTATION", "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFu", 25628),
            ("MEMORY", "Memcpy DtoD (Device -> Device)", 18814), ("MEMORY", "Memcpy DtoH (Device -> Pageable)", 66),
            ("MEMORY", "Memcpy HtoD (Pageable -> Device)", 65), ("MEMORY", "Memcpy HtoD (Pinned -> Device)", 16792),
            ("MEMORY", "Memset (Device)", 360)],
        # (kernel_type, name[:60]) -> HTA's max, min, mean (us), stddev, for the types it does not fold
        "stats": {
            ("COMMUNICATION", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, uns"):
                (25951, 25, 2303.516666666667, 6273.0033692724855),
            ("MEMORY", "Memcpy DtoD (Device -> Device)"): (465, 3, 20.62938596491228, 59.13771841430245),
            ("MEMORY", "Memcpy HtoD (Pinned -> Device)"): (3979, 4, 599.7142857142857, 1343.1390225372925),
            ("MEMORY", "Memset (Device)"): (4, 1, 1.8, 0.9242680113386591)},
        "others_mean": 342.72972972972974,  # HTA: the mean of the folded names' sums (25362 / 74), not of ops
    },
    "df_index": {
        "types": {"COMPUTATION": 496485, "COMMUNICATION": 238274, "MEMORY": 18298},
        "types_no_memory": {"COMPUTATION": 496485, "COMMUNICATION": 238274},
        "kernels": [
            ("COMMUNICATION", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 238274),
            ("COMPUTATION", "others", 129133),
            ("COMPUTATION", "void at::native::vectorized_elementwise_kernel<4, at::native", 23705),
            ("COMPUTATION", "void at::native::vectorized_elementwise_kernel<4, at::native", 67774),
            ("COMPUTATION", "volta_sgemm_128x128_tn", 22604), ("COMPUTATION", "volta_sgemm_128x32_nn", 25246),
            ("COMPUTATION", "volta_sgemm_128x32_nt", 59097), ("COMPUTATION", "volta_sgemm_128x32_tn", 27587),
            ("COMPUTATION", "volta_sgemm_128x64_nn", 44294), ("COMPUTATION", "volta_sgemm_128x64_nt", 23554),
            ("COMPUTATION", "volta_sgemm_32x128_nn", 36758), ("COMPUTATION", "volta_sgemm_32x128_tn", 36733),
            ("MEMORY", "Memcpy DtoD (Device -> Device)", 17589), ("MEMORY", "Memset (Device)", 709)],
        "stats": {
            ("COMMUNICATION", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"):
                (4979, 4, 147.44678217821783, 419.85209796190577),
            ("MEMORY", "Memcpy DtoD (Device -> Device)"): (257, 2, 10.777573529411764, 21.640395544164516),
            ("MEMORY", "Memset (Device)"): (6, 1, 1.0071022727272727, 0.18844459036110228)},
        "others_mean": 3398.2368421052633,
    },
    "trace_diff": {
        "types": {"COMPUTATION": 267839, "COMPUTATION overlapping COMMUNICATION": 129148, "MEMORY": 92887,
                  "COMMUNICATION": 53846, "COMPUTATION overlapping MEMORY": 30501,
                  "COMMUNICATION overlapping MEMORY": 5512,
                  "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": 1728},
        "types_no_memory": {"COMPUTATION": 298340, "COMPUTATION overlapping COMMUNICATION": 130876,
                            "COMMUNICATION": 59358},
        "kernels": [
            ("COMMUNICATION", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 66859),
            ("COMMUNICATION", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 123375),
            ("COMPUTATION", "others", 226508),
            ("COMPUTATION", "void at::native::(anonymous namespace)::CatArrayBatchedCopy<", 17337),
            ("COMPUTATION", "void at::native::vectorized_elementwise_kernel<4, at::native", 18090),
            ("COMPUTATION", "void split_embedding_backward_codegen_rowwise_adagrad_unweig", 42814),
            ("COMPUTATION", "void split_embedding_backward_codegen_rowwise_adagrad_unweig", 15483),
            ("COMPUTATION", "void split_embedding_codegen_forward_unweighted_kernel<float", 22518),
            ("COMPUTATION", "volta_sgemm_128x128_tn", 15009), ("COMPUTATION", "volta_sgemm_128x32_nn", 19588),
            ("COMPUTATION", "volta_sgemm_128x32_nt", 22733), ("COMPUTATION", "volta_sgemm_128x64_nn", 16080),
            ("COMPUTATION", "volta_sgemm_32x128_tn", 14865), ("MEMORY", "Memcpy DtoD (Device -> Device)", 77503),
            ("MEMORY", "Memcpy DtoH (Device -> Pageable)", 106), ("MEMORY", "Memcpy HtoD (Pinned -> Device)", 56134),
            ("MEMORY", "Memset (Device)", 1805)],
        "stats": {
            ("COMMUNICATION", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"):
                (12495, 79, 4457.266666666666, 5779.625846351088),
            ("COMMUNICATION", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"):
                (9800, 19, 3525.0, 4119.426502060979),
            ("MEMORY", "Memcpy HtoD (Pinned -> Device)"): (10221, 3, 449.072, 1759.3667169678397)},
        "others_mean": 1903.4285714285713,
    },
}


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(HTA))
def test_equal_to_hta_with_htas_choices(name):
    """HTA's choices: its ops (last step and ops without a launch call dropped), its 0.8 cut."""
    hta = HTA[name]
    cols = scan(str(TRACES[name]), cpu_ops=False)
    ops = hta_ops(cols)
    types = kernel_types(cols, ops=ops)
    assert dict(zip(types["kernel_type"], types["time_ns"])) == {k: v * 1000 for k, v in hta["types"].items()}
    no_memory = kernel_types(cols, ops=ops, types=["COMPUTATION", "COMMUNICATION"])
    assert dict(zip(no_memory["kernel_type"], no_memory["time_ns"])) == {
        k: v * 1000 for k, v in hta["types_no_memory"].items()}
    table = kernel_breakdown(cols, ops=ops, duration_ratio=0.8)
    got = sorted((r.kernel_type, "others" if r.name == OTHERS else r.name[:60], r.total_ns) for r in table.itertuples())
    assert got == sorted((t, n, s * 1000) for t, n, s in hta["kernels"])
    rows = {(r.kernel_type, r.name[:60]): r for r in table.itertuples()}
    for key, (most, least, mean, std) in hta["stats"].items():
        r = rows[key]
        assert (r.max_ns, r.min_ns) == (most * 1000, least * 1000)
        assert r.mean_ns == pytest.approx(mean * 1000) and r.std_ns == pytest.approx(std * 1000)
    others = rows["COMPUTATION", OTHERS]
    assert others.total_ns / others.names == pytest.approx(hta["others_mean"] * 1000)


@pytest.mark.integration
def test_classify_computation_211_ms_is_htas_143_8_with_htas_choices():
    """``classify --rules hta`` merges every COMPUTATION op: 211.0 ms on negative_queue. HTA's
    143.8 ms (138,794 alone + 3,171 with MEMORY + 1,871 with COMMUNICATION) keeps only the ops
    launched before the last step."""
    cols = scan(str(TRACES["negative_queue"]), cpu_ops=False)
    table = classify_columns(cols, load_rules("hta")).table
    assert int(table.loc[table["category"] == "COMPUTATION", "union_ns"].iloc[0]) == 210_998_000
    every = kernel_types(cols)
    assert every.loc[every["kernel_type"].str.contains("COMPUTATION"), "time_ns"].sum() == 210_998_000
    ops = hta_ops(cols)
    hta = kernel_types(cols, ops=ops)
    assert hta.loc[hta["kernel_type"].str.contains("COMPUTATION"), "time_ns"].sum() == 143_836_000
    # each choice alone: the 872 ops without a launch call dropped, or the last step's launches
    launch = launch_of_gpu(cols)
    launched = launch >= 0
    before = np.zeros(len(ops), bool)
    before[launched] = cols.launches.ts[launch[launched]] < last_step_start(cols)
    assert (~launched).sum() == 872 and np.array_equal(ops, before)
    for mask, ns in ((launched, 179_676_000), (before | ~launched, 175_158_000)):
        part = kernel_types(cols, ops=mask)
        assert part.loc[part["kernel_type"].str.contains("COMPUTATION"), "time_ns"].sum() == ns
