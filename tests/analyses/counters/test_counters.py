"""Hardware counters: CUPTI range pairing vs HTA, ncu CSV joins, derived metrics, args and tracks."""

from __future__ import annotations

import csv
import io
import random
from collections import Counter

import numpy as np
import orjson
import pytest

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.counters import counter_tables
from traceforge.analyses.counters.names import kernel_function, kernel_key
from traceforge.annotator.plugins.counters import RATE_SCALE
from traceforge.annotator.run import annotate
from traceforge.cli.main import main
from traceforge.columns.scan import scan
from traceforge.io.read.ncu_csv import unit_factor
from traceforge.io.read.reader import TraceReader, quote_times
from traceforge.perfetto import check_trace
from traceforge.util.exacttime import to_ns

HTA_TOP_OPS = {"conv2d": 38, "relu_": 14, "linear": 12, "max_pool2d": 6, "dropout": 4, "adaptive_avg_pool2d": 2,
               "rand": 1}


def _events(path) -> list[dict]:
    return orjson.loads(raw_json(path))["traceEvents"]


def _event_bytes(path) -> list[bytes]:
    reader = TraceReader(str(path))
    return [batch.raw[a:b] for batch in reader.batches() for a, b in batch.spans]


def _launch_order(events: list[dict]) -> list[int]:
    """Kernel event indices in launch order, from the raw JSON (independent of traceforge)."""
    issued = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [i for i, e in enumerate(events) if e.get("cat") == "kernel"]
    return sorted(kernels, key=lambda i: (issued.get(events[i]["args"]["correlation"], events[i]["ts"]), events[i]["ts"]))


# -- CUPTI range profiler ------------------------------------------------------------------


def test_cupti_ranges_pair_like_hta_with_stacks(columns):
    """All 77 ranges pair with a launch and get its operator stack; the top-level operator
    counts equal HTA's. HTA pairs the i-th range with the i-th cudaLaunchKernel by ts: so do
    we here, and that pairing is right on this trace: each range's kernel fits the innermost
    operator that launched it (checked below for every kernel family)."""
    t = counter_tables(columns("cupti"))
    k = t.kernels
    assert len(k) == 77 and (k["event_kind"] == "launch").all()
    assert (k["op_stack"] != "").all() and (k["top_op"] != "").all() and (k["bottom_op"] != "").all()
    assert Counter(k["top_op"]) == {f"aten::{op}": n for op, n in HTA_TOP_OPS.items()}

    events = _events(TRACES["cupti"])
    ranges = sorted((i for i, e in enumerate(events) if e.get("cat") == "cuda_profiler_range"),
                    key=lambda i: events[i]["ts"])
    launches = sorted((i for i, e in enumerate(events) if e.get("name") == "cudaLaunchKernel"),
                      key=lambda i: events[i]["ts"])
    assert k["source_index"].tolist() == list(range(77))
    assert k["event"].tolist() == launches  # HTA's pairing, range i <-> launch i

    families = {"max_pool_forward_nchw": "aten::max_pool2d_with_indices", "adaptive_average_pool":
                "aten::_adaptive_avg_pool2d", "fused_dropout_kernel_vec": "aten::native_dropout",
                "ampere_sgemm_32x32_sliced1x4_tn": "aten::addmm", "globalKernel": "aten::addmm",
                "elementwise_kernel": "aten::add_", "distribution_elementwise_grid_stride_kernel": "aten::uniform_"}
    for name, bottom in zip(k["kernel"], k["bottom_op"]):
        key = kernel_key(name)
        if key == "vectorized_elementwise_kernel":  # relu_ -> clamp_min_ here
            assert bottom == "aten::clamp_min_", name
        elif key in families:
            assert bottom == families[key], name
        elif key != "__missing__":  # fft2d / gcgemm / xmma / nchwToNhwc / implicit_convolve_sgemm: cuDNN
            assert bottom == "aten::cudnn_convolution", name
    assert [events[i]["name"] for i in ranges] == k["kernel"].tolist()


def test_cupti_unnamed_range_and_unverified_pairs_are_reported(columns):
    """Where we differ from HTA: HTA pairs silently. Range 1 is named ``__missing__`` (CUPTI
    gave no kernel name): it is the warm-up's first convolution (its launch is under
    aten::cudnn_convolution; the measured iteration's first conv, range 39, is
    implicit_convolve_sgemm), and is reported as paired by order only. The trace has no
    kernel events, so no pair can be checked by name: each is marked ``unverified``."""
    t = counter_tables(columns("cupti"))
    k = t.kernels
    assert Counter(k["status"]) == {"unverified": 76, "unnamed range": 1}
    assert k.loc[1, "kernel"] == "__missing__" and k.loc[1, "bottom_op"] == "aten::cudnn_convolution"
    assert "warmup" in k.loc[1, "op_stack"] and kernel_key(k.loc[39, "kernel"]) == "implicit_convolve_sgemm"
    assert t.problems[["problem", "kernel"]].values.tolist() == [["unnamed range", "__missing__"]]
    assert any("76 unverified, 1 unnamed range" in line for line in t.summary)


def test_cupti_range_times_are_not_kernel_times(columns):
    """Kineto spreads the ranges evenly over the profiling session (equal length, back to
    back from its start), so each range starts before the launch it measured: 23 ms to 3 s."""
    cols = columns("cupti")
    k = counter_tables(cols).kernels
    order = np.argsort(cols.ranges.ts)
    ts, dur = cols.ranges.ts[order], cols.ranges.dur[order]
    assert (dur == dur[0]).all() and (ts[1:] == ts[:-1] + dur[:-1]).all()
    gap = k["launch_ts_ns"].to_numpy() - ts
    assert gap.min() == 23_061_000 and gap.max() == 3_045_588_000
    assert (k["kernel_dur_ns"] == -1).all() and k["achieved_tflops"].isna().all()


def test_cupti_flops_weights_fma_twice(columns):
    k = counter_tables(columns("cupti")).kernels
    assert k.loc[1, "flops"] == 2 * 9_119_334_400 + 24_780_800
    assert k.loc[0, "flops"] == 2 * 38_731_776 + 2 * 4_866_048  # ffma + hfma
    weights = {f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": 2 if op == "fma" else 1
               for p in "hfd" for op in ("add", "mul", "fma")}
    total = sum(w * e["args"][c] for e in _events(TRACES["cupti"]) if e.get("cat") == "cuda_profiler_range"
                for c, w in weights.items())
    assert int(k["flops"].sum()) == total == 80_231_038_456


def _write(tmp_path, name: str, doc: dict):
    path = tmp_path / name
    path.write_bytes(orjson.dumps(doc))
    return path


def test_count_mismatch_keeps_the_rank(tmp_path):
    """Where we differ from HTA: with one range fewer than launches HTA drops the whole rank;
    we pair the 76 in order and report the launch left without a range."""
    doc = orjson.loads(raw_json(TRACES["cupti"]))
    last = max((i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cuda_profiler_range"),
               key=lambda i: doc["traceEvents"][i]["ts"])
    del doc["traceEvents"][last]
    t = counter_tables(scan(str(_write(tmp_path, "short.json", doc))))
    assert len(t.kernels) == 76 and (t.kernels["event"] >= 0).all()
    missing = t.problems[t.problems["problem"] == "launch without range"]
    last_launch = max((i for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "cudaLaunchKernel"),
                      key=lambda i: doc["traceEvents"][i]["ts"])
    assert missing["index"].tolist() == [last_launch]


def test_ranges_checked_by_name_when_kernels_exist(tmp_path):
    """A trace with kernel events and ranges: pairs are verified by name, swaps are caught,
    counters land on the kernels, and rates use the kernels' own durations."""
    doc = orjson.loads(raw_json(TRACES["alexnet"]))
    events = doc["traceEvents"]
    order = _launch_order(events)
    names = [events[i]["name"] for i in order[:-1]]  # the last kernel has no range
    names[3], names[4] = names[4], names[3]
    for n, name in enumerate(names):
        events.append({"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 0,
                       "ts": 1000 + 10 * n, "dur": 10, "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000 * (n + 1)}})
    t = counter_tables(scan(str(_write(tmp_path, "ranges.json", doc))))
    k = t.kernels
    assert k["event"].tolist() == order[:-1] and (k["event_kind"] == "kernel").all()
    assert Counter(k["status"]) == {"verified": 76, "name mismatch": 2}
    assert k.loc[k["status"] == "name mismatch", "source_index"].tolist() == [3, 4]
    assert Counter(t.problems["problem"]) == {"name mismatch": 2, "launch without range": 1}
    assert t.problems.loc[t.problems["problem"] == "launch without range", "index"].tolist() == [order[-1]]
    dur_ns = np.array([events[i]["dur"] * 1000 for i in order[:-1]], dtype=float)
    assert np.allclose(k["achieved_tflops"], 2000.0 * np.arange(1, 79) / dur_ns / 1e3)


# -- ncu CSV -------------------------------------------------------------------------------

METRICS = {  # name: (unit, value for kernel number n as the CSV writes it, value in base units)
    "gpu__time_duration.sum": ("usecond", lambda n: f"{1.5 * (n + 1):.1f}", lambda n: 1500.0 * (n + 1)),
    "dram__bytes_read.sum": ("Mbyte", lambda n: f"{1.5 * (n + 1)}", lambda n: 1.5e6 * (n + 1)),
    "dram__bytes_write.sum": ("byte", lambda n: f"{1000 * (n + 1):,}", lambda n: 1000.0 * (n + 1)),
    "lts__t_sectors_srcunit_tex_op_read.sum": ("sector", lambda n: f"{100 * (n + 1):,}", lambda n: 100.0 * (n + 1)),
    "lts__t_sectors_srcunit_tex_op_write.sum": ("sector", lambda n: "7", lambda n: 7.0),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": (
        "%", lambda n: f"{n % 60 + 0.5}", lambda n: n % 60 + 0.5),
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", lambda n: f"{10 ** 6 * (n + 1):,}",
                                                            lambda n: 1e6 * (n + 1)),
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": ("inst", lambda n: str(n), lambda n: float(n)),
    "launch__registers_per_thread": ("register/thread", lambda n: "32", lambda n: 32.0),
    "launch__func_cache_config": ("", lambda n: "CachePreferNone", None),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", lambda n: "1.25", lambda n: 1.25),
}
MANGLED_VEC = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BUnaryFunctorIfffNS0_10MulFunctorIfEEEEEEviT0_T1_"


def _ncu_name(name: str, n: int) -> str:
    """ncu spells names three ways: demangled (like Kineto), bare function, mangled."""
    if n % 3 == 1:
        bare = name.removeprefix("void ").replace("(anonymous namespace)::", "")
        return bare.split("<")[0].split("(")[0].rsplit("::", 1)[-1]
    if n % 3 == 2 and "vectorized_elementwise_kernel<" in name:
        return MANGLED_VEC
    return name


def _ncu_csv(events: list[dict], kernels: list[tuple[int, int]], extra_rows: list[list[str]] = (),
             seed: int = 7) -> str:
    """An ``ncu --csv --page raw`` capture of ``kernels`` ((event index, launch number n)):
    tool lines, units row, separators, metric columns in shuffled order. Metric values are
    derived from n, so a join to the wrong kernel shows."""
    metrics = list(METRICS)
    random.Random(seed).shuffle(metrics)
    ident = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC"]
    buf = io.StringIO()
    buf.write("==PROF== Connected to process 2869224 (/usr/bin/python3)\n")
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(ident + metrics)
    w.writerow([""] * len(ident) + [METRICS[m][0] for m in metrics])
    for row_id, (i, n) in enumerate(kernels):
        e = events[i]
        a = e["args"]
        w.writerow([str(row_id), "2869224", "python3", "host", _ncu_name(e["name"], n), "1", str(a["stream"]),
                    "({}, {}, {})".format(*a["block"]), "({}, {}, {})".format(*a["grid"]), str(a["device"]), "8.0"]
                   + [METRICS[m][1](n) for m in metrics])
        if row_id % 10 == 0:
            buf.write(f'==PROF== Profiling "{kernel_key(e["name"])}" - {row_id}: 0%....50%....100% - 9 passes\n')
    for row in extra_rows:
        w.writerow(row + [METRICS[m][1](0) for m in metrics])
    buf.write("==PROF== Disconnected from process 2869224\n")
    return buf.getvalue()


DROPPED = (2, 7, 30, 48)  # launch numbers left out of the CSV (ncu failed on them, say)


@pytest.fixture(scope="module")
def alexnet_ncu(tmp_path_factory):
    events = _events(TRACES["alexnet"])
    order = _launch_order(events)
    kept = [n for n in range(len(order)) if n not in DROPPED]
    path = tmp_path_factory.mktemp("ncu") / "alexnet.ncu.csv"
    text = _ncu_csv(events, [(order[n], n) for n in kept])
    path.write_text(text)
    return events, order, kept, str(path)


def test_ncu_csv_joins_back_to_exactly_the_right_kernels(columns, alexnet_ncu):
    events, order, kept, path = alexnet_ncu
    t = counter_tables(columns("alexnet"), ncu=path)
    k = t.kernels
    assert len(k) == len(kept) and (k["status"] == "matched").all()
    assert k["source_index"].tolist() == list(range(len(kept)))
    assert k["event"].tolist() == [order[n] for n in kept]
    assert (k["event_kind"] == "kernel").all() and (k["top_op"] != "").all()
    missing = t.problems[t.problems["problem"] == "kernel without ncu row"]
    assert missing["index"].tolist() == [order[n] for n in DROPPED]
    assert len(t.problems) == len(DROPPED)
    assert any("inside the CSV's span 4 missing from it and 0 of kernels it never profiled" in line
               for line in t.summary)
    assert any(line.startswith("trace kernels missing from the CSV: ") and "cudnn_ampere_scudnn" in line
               for line in t.summary)

    # Counters (units converted, separators dropped) and derived metrics of the right kernel.
    n = np.array(kept, dtype=float)
    dur_ns = np.array([events[order[m]]["dur"] * 1000 for m in kept], dtype=float)
    for metric, (_, _, base) in METRICS.items():
        if base is not None:
            assert np.allclose(k[metric], [base(m) for m in kept]), metric
    assert "launch__func_cache_config" not in k
    dram = 1.5e6 * (n + 1) + 1000 * (n + 1)
    assert np.allclose(k["dram_bytes"], dram) and np.allclose(k["dram_gbps"], dram / dur_ns)
    assert np.allclose(k["l2_bytes"], 32 * (100 * (n + 1) + 7))
    flops = 2e6 * (n + 1) + n
    assert np.allclose(k["flops"], flops) and np.allclose(k["achieved_tflops"], flops / dur_ns / 1e3)
    assert np.allclose(k["arithmetic_intensity"], flops / dram)
    assert t.peaks.dram_gbps == 1555.0 and t.peaks.tensor_pct == 100.0  # A100-PG509-200; max tensor 59.5 > 50
    assert np.allclose(k["efficiency_pct"], 100 * np.maximum(dram / dur_ns / 1555.0, (n % 60 + 0.5) / 100.0))
    ops = t.operators.set_index("top_op")
    assert ops["kernels"].sum() == len(kept) and np.isclose(ops["flops"].sum(), flops.sum())


def test_ncu_skip_and_unmatched_rows(columns, tmp_path):
    """ncu --launch-skip 40 profiled the second iteration: without --ncu-skip its rows
    would join the first iteration's identical kernels; rows that match nothing are named."""
    events = _events(TRACES["alexnet"])
    order = _launch_order(events)
    bad = [["900", "2869224", "python3", "host", "bogus_kernel", "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0", "8.0"],
           ["901", "2869224", "python3", "host", events[order[3]]["name"], "1", "7", "(1, 1, 1)", "(7, 7, 7)", "0", "8.0"],
           ["902", "2869224", "python3", "host", events[order[3]]["name"], "1", "99", "(1, 1, 1)", "(7, 7, 7)", "0", "8.0"]]
    path = tmp_path / "skip.csv"
    path.write_text(_ncu_csv(events, [(order[n], n) for n in range(40, len(order))], extra_rows=bad))
    cols = columns("alexnet")
    t = counter_tables(cols, ncu=str(path), ncu_skip=40)
    k = t.kernels
    assert k.loc[k["status"] == "matched", "event"].tolist() == order[40:]
    unmatched = t.problems[t.problems["problem"] == "ncu row without kernel"]
    assert unmatched["index"].tolist() == [900, 901, 902]
    assert "no kernel of that name on device 0 stream 7" in unmatched["detail"].iat[0]
    assert "with grid (7, 7, 7) block (1, 1, 1)" in unmatched["detail"].iat[1]
    assert "no kernels on device 0 stream 99" in unmatched["detail"].iat[2]
    assert "kernel without ncu row" not in set(t.problems["problem"])
    assert any("(40 skipped by --ncu-skip 40)" in line for line in t.summary)
    early = counter_tables(cols, ncu=str(path)).kernels
    assert early["event"].iat[0] == order[1]  # the first iteration's computeOffsetsKernel


def test_ncu_kernel_filter(columns, tmp_path):
    """ncu -k sgemm: every launch of the chosen kernels joins; the others were never
    profiled, which is said once in the summary, not reported as missing."""
    events = _events(TRACES["alexnet"])
    order = _launch_order(events)
    picked = [n for n, i in enumerate(order) if "sgemm" in events[i]["name"]]
    path = tmp_path / "k.csv"
    path.write_text(_ncu_csv(events, [(order[n], n) for n in picked]))
    t = counter_tables(columns("alexnet"), ncu=str(path))
    assert t.kernels["event"].tolist() == [order[n] for n in picked] and t.problems.empty
    inside = picked[-1] - picked[0] + 1 - len(picked)
    assert any(f"0 missing from it and {inside} of kernels it never profiled" in line for line in t.summary)


# -- annotate ------------------------------------------------------------------------------


def _compare(original: list[bytes], written: list[bytes], patched: set[int]) -> list[dict]:
    """Every event not in ``patched`` is byte-identical; patched ones parse equal plus ``counters``."""
    assert len(written) >= len(original)
    out = []
    for i, (a, b) in enumerate(zip(original, written)):
        if i not in patched:
            assert a == b, i
            continue
        ea, eb = orjson.loads(a), orjson.loads(b)
        counters = eb["args"].pop("counters")
        assert ea == eb, i
        out.append(counters)
    return out


def test_annotate_ncu_args_and_rate_tracks(columns, alexnet_ncu, tmp_path):
    events, order, kept, path = alexnet_ncu
    out = tmp_path / "out.json"
    result = annotate(str(TRACES["alexnet"]), str(out), analyses=["counters"], options={"ncu": path})
    assert "args on 75 kernel events, 2 counter tracks" in result.summary[0]
    original, written = _event_bytes(TRACES["alexnet"]), _event_bytes(out)
    args = _compare(original, written, {order[n] for n in kept})
    assert len(args) == len(kept)
    for n, i in zip(kept, [order[n] for n in kept]):
        c = orjson.loads(written[i])["args"]["counters"]
        assert c["source"] == "ncu" and c["match"] == "matched" and "kernel" not in c
        assert c["dram__bytes_write.sum"] == 1000 * (n + 1) and c["l2_bytes"] == 32 * (100 * (n + 1) + 7)
        assert c["flops"] == 2_000_000 * (n + 1) + n

    appended = [orjson.loads(quote_times(b)) for b in written[len(original):]]  # exact ts text
    tracks = {}
    for e in appended:
        assert e["ph"] == "C" and e["cat"] == "traceforge" and len(e["args"]) == 1
        tracks.setdefault((e["pid"], e["name"], *e["args"]), []).append(e)
    assert set(tracks) == {(0, "Achieved", "TFLOP/s"), (0, "DRAM", "GB/s")}
    # Each point is the exact sum of the per-kernel rates (integers of 1e-6) active at that instant.
    k = counter_tables(columns("alexnet"), ncu=path).kernels
    ts, dur = k["kernel_ts_ns"].to_numpy(), k["kernel_dur_ns"].to_numpy()
    rate = np.rint(k["dram_bytes"].to_numpy() * RATE_SCALE / dur).astype(np.int64)
    for e in tracks[(0, "DRAM", "GB/s")]:
        t = to_ns(e["ts"])
        active = (ts <= t) & (t < ts + dur)
        assert round(float(e["args"]["GB/s"]) * RATE_SCALE) == rate[active].sum()
    assert float(tracks[(0, "DRAM", "GB/s")][-1]["args"]["GB/s"]) == 0
    before, after = check_trace(str(TRACES["alexnet"])), check_trace(str(out))  # nothing new for Perfetto to drop
    assert after.stats == before.stats and after.warnings == before.warnings


def test_annotate_cupti_args_on_launch_calls(tmp_path):
    out = tmp_path / "out.json.gz"
    result = annotate(str(TRACES["cupti"]), str(out), analyses=["counters"])
    assert result.appended == 0 and "args on 77 launch events, 0 counter tracks" in result.summary[0]
    events = _events(TRACES["cupti"])
    launches = {i for i, e in enumerate(events) if e.get("name") == "cudaLaunchKernel"}
    args = _compare(_event_bytes(TRACES["cupti"]), _event_bytes(out), launches)
    assert Counter(a["match"] for a in args) == {"unverified": 76, "unnamed range": 1}
    assert all(a["source"] == "cupti_range" and a["kernel"] and "achieved_tflops" not in a for a in args)
    assert sum(a["flops"] for a in args) == 80_231_038_456


def test_no_counters_is_a_noop(tmp_path):
    out = tmp_path / "out.json"
    result = annotate(str(TRACES["triton"]), str(out), analyses=["counters"])
    assert result.summary == ["counters: nothing to add (the trace has no cuda_profiler_range events and no "
                              "--ncu file was given)"]
    assert out.read_bytes() == raw_json(TRACES["triton"])


# -- CLI and pieces ------------------------------------------------------------------------


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in-process (a subprocess costs seconds of interpreter start on a busy machine)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_formats_and_errors(alexnet_ncu, tmp_path, capsys):
    code, out, _ = _cli(capsys, "counters", str(TRACES["cupti"]), "--format", "json")
    doc = orjson.loads(out)
    assert code == 0 and len(doc["kernels"]) == 77 and len(doc["problems"]) == 1
    assert doc["operators"][0]["top_op"] == "aten::conv2d" and doc["kernels"][0]["achieved_tflops"] is None
    code, out, _ = _cli(capsys, "counters", str(TRACES["alexnet"]), "--ncu", alexnet_ncu[3], "--format", "csv",
                        "--table", "problems")
    assert code == 0 and out.count("kernel without ncu row") == len(DROPPED)
    code, out, _ = _cli(capsys, "counters", str(TRACES["alexnet"]), "--ncu", alexnet_ncu[3])
    assert code == 0 and "per top-level operator:" in out and "aten::conv2d" in out and "problems: 4" in out
    bad = tmp_path / "bad.csv"
    bad.write_text('"a","b"\n"1","2"\n')
    code, _, err = _cli(capsys, "counters", str(TRACES["alexnet"]), "--ncu", str(bad))
    assert code == 1 and err.count("\n") == 1 and "no header row" in err
    code, _, err = _cli(capsys, "annotate", str(TRACES["alexnet"]), "--counters", "--ncu", str(tmp_path / "no.csv"))
    assert code == 1 and "no such file" in err
    r = run_cli("annotate", str(TRACES["cupti"]), "--counters", "-o", str(tmp_path / "out.json"))
    assert r.returncode == 0 and b"counters: args on 77 launch events" in r.stderr


def test_kernel_names_and_units():
    demangled = "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)"
    assert kernel_function(demangled) == "at::native::max_pool_forward_nchw"
    assert kernel_key("_ZN2at6native12_GLOBAL__N_121max_pool_forward_nchwIffEEviPKT_") == "max_pool_forward_nchw"
    assert kernel_key(MANGLED_VEC) == "vectorized_elementwise_kernel"
    assert kernel_key("ampere_sgemm_32x32_sliced1x4_tn") == "ampere_sgemm_32x32_sliced1x4_tn"
    assert unit_factor("Mbyte") == (1e6, "byte") and unit_factor("usecond") == (1e3, "nsecond")
    assert unit_factor("Gbyte/second") == (1e9, "byte/second") and unit_factor("%") == (1.0, "%")
    assert unit_factor("KiB") == (1024.0, "byte") and unit_factor("MB") == (1e6, "byte")
    assert unit_factor("cycle/nsecond") == (1e9, "cycle/second") and unit_factor("register/thread") == (1.0, "register/thread")
