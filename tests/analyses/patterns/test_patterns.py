"""traceforge patterns: operator patterns against HTA's numbers, nesting, mining, and the overlay."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import orjson
import pytest

import traceforge
from tests.conftest import TRACES, raw_json, run_cli
from traceforge.analyses.gpu_time.kernel_names import short_kernel_name
from traceforge.analyses.launches.calls import last_step_start
from traceforge.analyses.patterns.by_op import find_patterns
from traceforge.analyses.structure.stacks import build_stacks
from traceforge.cli.main import main
from traceforge.emit.tracks import FIRST_NEW_TID
from traceforge.io.read.reader import TraceReader, quote_times
from traceforge.perfetto.timestamps import perfetto_ns_of as perfetto_ns
from traceforge.util.distinct import factorized
from traceforge.util.exacttime import to_ns

MEMSET = "Memset (Device)"
EPILOGUE = ("void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*, "
            "cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, int*)")


def test_addmm_patterns_match_hta(columns):
    """HTA 0.5.0 on df_index_resolver, ``aten::addmm``, min length 3 (docs/hta.md):
    counts 172, 72, 32, 20, 12, each Memset + volta_sgemm_* + epilogue. HTA silently drops the
    last profiler step from everything, so we compare with instances that start before the
    last ``ProfilerStep#`` starts (``last_step_start``): the same five sequences, same order,
    same counts. With every step kept, each pattern has one step's more instances."""
    cols = columns("df_index")
    sgemms = ["volta_sgemm_32x128_tn", "volta_sgemm_128x32_tn", "volta_sgemm_128x32_sliced1x4_tn",
              "volta_sgemm_128x128_tn", "volta_sgemm_128x64_tn"]
    hta_like = find_patterns(cols, op="aten::addmm", started_before_ns=last_step_start(cols)).table
    assert hta_like["count"].tolist() == [172, 72, 32, 20, 12]
    assert [list(k) for k in hta_like["kernel_names"]] == [[MEMSET, s, EPILOGUE] for s in sgemms]
    assert hta_like["kernels"][0] == "Memset → volta_sgemm_32x128_tn → epilogue::globalKernel"

    every_step = find_patterns(cols, op="aten::addmm").table
    assert every_step["count"].tolist() == [215, 90, 40, 25, 15]
    assert [list(k) for k in every_step["kernel_names"]] == [[MEMSET, s, EPILOGUE] for s in sgemms]
    assert (every_step["operator"] == "aten::addmm").all()
    # Exact ns: GPU time is the sum of the members' durations (all kernels are whole µs here).
    assert every_step["gpu_ns"][0] == 39_055_000 and every_step["cpu_ns"][0] == 22_774_000

    # Mining knows nothing of operators, yet finds the same run with the same count and time.
    mined = find_patterns(cols).table
    same = mined[[list(k) == [MEMSET, sgemms[0], EPILOGUE] for k in mined["kernel_names"]]]
    assert same["count"].tolist() == [215] and same["gpu_ns"].tolist() == [39_055_000]


def test_linear_patterns_match_hta(columns):
    """HTA on trace_diff/test, ``aten::linear``: 70 and 10 (last step dropped, as above).
    Through the Python API, which returns the DataFrame."""
    before = last_step_start(columns("trace_diff"))
    df = traceforge.patterns(str(TRACES["trace_diff"]), op="aten::linear", started_before_ns=before)
    assert df["count"].tolist() == [70, 10]
    assert [k[0] for k in df["kernel_names"]] == [MEMSET, MEMSET]
    assert df["length"].tolist() == [3, 3]
    assert 0 < df.attrs["coverage"] == pytest.approx(df["gpu_share"].sum())


def test_select_launches_nothing(columns):
    """negative_queue_length rank 0, ``aten::select``: HTA's call stacks ignore where events
    end, so a 1 µs select "owns" 4,517 later events and HTA reports a 555-kernel pattern.
    ``aten::select`` is a view op: it launches no GPU work at all. Pinned independently of
    ``build_stacks``: no launch call on a select's thread lies inside any of its 1,410
    instances, so the right answer is no pattern of any length."""
    cols = columns("negative_queue")
    result = find_patterns(cols, op="aten::select", min_len=1)
    assert len(result.table) == 0 and len(result.occ_pattern) == 0
    assert result.note.startswith("1,410 outermost instances of aten::select, 0 with 1+ GPU ops")

    cpu, launches = cols.cpu_ops, cols.launches
    select = np.flatnonzero(np.array([n == "aten::select" for n in cols.names])[cpu.name])
    inside = 0
    for track in np.unique(cpu.track[select]).tolist():
        ops = select[cpu.track[select] == track]
        calls = np.sort(launches.ts[launches.track == track])
        lo = np.searchsorted(calls, cpu.ts[ops], side="left")
        hi = np.searchsorted(calls, cpu.ts[ops] + cpu.dur[ops], side="right")
        inside += int((hi - lo).sum())
    assert inside == 0
    # The cause of HTA's bogus pattern: here a zero-duration op is nobody's parent.
    stacks = build_stacks(cols)
    zero = cpu.dur == 0
    assert zero.sum() > 1000
    assert not zero[stacks.cpu_parent[stacks.cpu_parent >= 0]].any()
    assert not zero[stacks.launch_op[stacks.launch_op >= 0]].any()


def test_nested_and_regex(columns):
    """``--op-regex`` matches names with re.search; ``--nested`` adds inner instances."""
    cols = columns("trace_diff")
    exact = find_patterns(cols, op="aten::linear").table
    regex = find_patterns(cols, op_regex=r"^aten::linear$").table
    assert regex["count"].tolist() == exact["count"].tolist() == [84, 12]
    # aten::linear contains aten::addmm: outermost matches of either name are the linears.
    both = find_patterns(cols, op_regex=r"^aten::(linear|addmm)$").table
    assert both["count"].tolist() == [84, 12]
    nested = find_patterns(cols, op_regex=r"^aten::(linear|addmm)$", nested=True).table
    assert nested["count"].tolist() == [168, 24]  # each linear and the addmm inside it
    assert [set(ops.split(", ")) for ops in nested["operator"]] == [{"aten::linear", "aten::addmm"}] * 2


def test_mined_patterns_are_disjoint_runs(columns):
    """Mined occurrences are consecutive ops on one stream, share no op, and are not one
    shorter unit repeated; coverage is the sum of the top patterns' GPU shares."""
    cols = columns("df_index")
    result = find_patterns(cols, min_len=3, max_len=16, top_k=5)
    t = result.table
    assert len(t) == 5 and (t["length"] <= 16).all() and (t["count"] >= 2).all()
    assert result.coverage == pytest.approx(t["gpu_share"].sum()) and 0.1 < result.coverage < 1
    assert len(np.unique(result.members)) == len(result.members)
    gpu = cols.gpu
    order = np.lexsort((gpu.ordinal, gpu.ts, gpu.stream, gpu.device))
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    for j in range(len(result.occ_pattern)):
        rows = result.members[result.offsets[j]:result.offsets[j + 1]]
        assert (np.diff(position[rows]) == 1).all() and len(set(gpu.stream[rows].tolist())) == 1
        assert [cols.names[i] for i in gpu.name[rows]] == list(t["kernel_names"][result.occ_pattern[j]])
    for names in t["kernel_names"]:
        n = len(names)
        assert not any(n % p == 0 and names[p:] == names[:-p] for p in range(1, n // 2 + 1))


def test_mined_min_len_above_default_max_len(columns):
    """--min-len above the mining default of --max-len (32) searches that length, not an empty range."""
    result = find_patterns(columns("df_index"), min_len=40, top_k=3)
    assert result.searched == "runs of 40-40 GPU ops per stream"
    assert len(result.table) and (result.table["length"] == 40).all() and (result.table["count"] >= 2).all()


def test_short_kernel_names():
    assert short_kernel_name(EPILOGUE) == "epilogue::globalKernel"
    assert short_kernel_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD"
    assert short_kernel_name(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
    ) == "vectorized_elementwise_kernel<FillFunctor>"
    assert short_kernel_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>"
                             "(cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)") \
        == "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4"
    assert len(short_kernel_name("x" * 500)) == 60


def _split_output(inp: bytes, out: bytes) -> list[dict]:
    """Check ``out`` is ``inp`` with one run of bytes inserted; return the inserted events."""
    a = np.frombuffer(inp, np.uint8)
    b = np.frombuffer(out[:len(inp)], np.uint8)
    differ = np.flatnonzero(a != b)
    p = int(differ[0]) if len(differ) else len(inp)
    assert out.endswith(inp[p:]), "the trace's own bytes changed"
    inserted = out[p:len(out) - (len(inp) - p)]
    return orjson.loads(quote_times(b"[" + inserted.strip(b", \n\r\t") + b"]"))


def _check_tracks(new: list[dict]) -> dict[tuple, list[dict]]:
    """Our slices per (pid, tid): named new threads, no two slices partially overlapping."""
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in new if e["ph"] == "M" and e["name"] == "thread_name"}
    sorts = {(e["pid"], e["tid"]) for e in new if e["ph"] == "M" and e["name"] == "thread_sort_index"}
    slices = defaultdict(list)
    for e in new:
        if e["ph"] == "X":
            slices[(e["pid"], e["tid"])].append(e)
    assert slices and set(slices) == set(names) == sorts
    for (pid, tid), track in slices.items():
        assert tid >= FIRST_NEW_TID and names[(pid, tid)].startswith("Patterns (stream ")
        spans = sorted((perfetto_ns(to_ns(e["ts"])), perfetto_ns(to_ns(e["ts"]) + to_ns(e["dur"]))) for e in track)
        assert all(s1 >= e0 for (_, e0), (s1, _) in zip(spans, spans[1:])), "slices overlap on one lane"
    return slices


def _events(path) -> list[dict]:
    return [e for batch in TraceReader(str(path)).batches() for e in batch.events]


def test_annotate_overlay_addmm(tmp_path, columns):
    """``annotate --patterns --op aten::addmm``: one slice per occurrence from its first
    kernel's exact start to its last kernel's exact end; everything else byte-identical;
    nothing Perfetto would drop (``traceforge check``)."""
    from traceforge.perfetto import check_trace

    src, out = TRACES["df_index"], tmp_path / "out.json"
    r = run_cli("annotate", str(src), "--patterns", "--op", "aten::addmm", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert b"5 drawn, 385 slices on 1 stream track" in r.stderr
    inp, data = raw_json(src), out.read_bytes()
    new = _split_output(inp, data)
    slices = [e for track in _check_tracks(new).values() for e in track]
    assert len(slices) == 385 and len(data) - len(inp) < 0.05 * len(inp)

    result = find_patterns(columns("df_index"), op="aten::addmm")
    source = _events(src)
    expected = {}
    for j, p in enumerate(result.occ_pattern.tolist()):
        ordinals = columns("df_index").gpu.ordinal[result.members[result.offsets[j]:result.offsets[j + 1]]]
        members = [source[o] for o in ordinals.tolist()]
        expected[(f"P{p + 1}", sum(result.occ_pattern[:j] == p) + 1)] = (
            min(to_ns(m["ts"]) for m in members), max(to_ns(m["ts"]) + to_ns(m["dur"]) for m in members))
    for e in slices:
        a = e["args"]
        assert (to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"])) == expected[(a["pattern"], a["occurrence"])]
        assert a["operator"] == "aten::addmm" and e["name"].startswith(f"{a['pattern']} ×{a['count']}: Memset → ")
        assert ("kernels" in a) == (a["occurrence"] == 1)  # full names once per pattern
    assert {e["name"] for e in slices if e["args"]["pattern"] == "P1"} == {
        "P1 ×215: Memset → volta_sgemm_32x128_tn → epilogue::globalKernel"}

    report = check_trace(str(out))
    assert set(report.stats) <= {"flow_end_without_start"}, report.stats  # the input's own unpaired flows


def test_patterns_command_mined_overlay_with_tags(tmp_path):
    """``patterns -o --tag-kernels`` without --op on a trace with fractional-µs timestamps:
    each slice covers exactly the run of ops on its stream that carry its pattern tag, and
    only those events gain an arg; every other event keeps its bytes."""
    src, out = TRACES["ns_resolution"], tmp_path / "out.json"
    r = run_cli("patterns", str(src), "-o", str(out), "--tag-kernels", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["mode"] == "mined" and len(doc["patterns"]) == 5
    kernels = {p["pattern"]: p["kernels"] for p in doc["patterns"]}

    before = TraceReader(str(src))
    after = TraceReader(str(out))
    raw_in = [b.raw[s:e] for b in before.batches() for s, e in b.spans]
    out_batches = list(after.batches())
    raw_out = [b.raw[s:e] for b in out_batches for s, e in b.spans]
    parsed_out = [e for b in out_batches for e in b.events]
    tagged = {}
    for i, raw in enumerate(raw_in):
        if raw_out[i] != raw:
            event = orjson.loads(quote_times(raw))
            event["args"]["pattern"] = parsed_out[i]["args"]["pattern"]
            assert parsed_out[i] == event
            tagged[i] = event
    new = parsed_out[len(raw_in):]
    slices = _check_tracks(new)
    stream_of = {(e["pid"], e["tid"]): int(e["args"]["name"].split()[-1].rstrip(")"))
                 for e in new if e["ph"] == "M" and e["name"] == "thread_name"}
    by_stream = defaultdict(list)
    for e in tagged.values():
        by_stream[(e["pid"], e["tid"])].append((to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]), e))
    covered = 0
    for (pid, tid), track in slices.items():
        ops = sorted(by_stream[(pid, stream_of[(pid, tid)])], key=lambda x: x[0])
        for s in track:
            start, end = to_ns(s["ts"]), to_ns(s["ts"]) + to_ns(s["dur"])
            inside = [e for a, b, e in ops if a >= start and b <= end]
            assert [e["name"] for e in inside] == kernels[s["args"]["pattern"]]
            assert start == to_ns(inside[0]["ts"]) and end == max(to_ns(e["ts"]) + to_ns(e["dur"]) for e in inside)
            assert {e["args"]["pattern"] for e in inside} == {s["args"]["pattern"]}
            covered += len(inside)
    assert covered == len(tagged) == sum(p["count"] * p["length"] for p in doc["patterns"])
    growth = out.stat().st_size - len(raw_json(src)) - sum(len(orjson.dumps(e)) for e in new)
    assert growth < 0.05 * len(raw_json(src))


def test_patterns_command_text_csv_and_errors(capsys):
    trace = str(TRACES["alexnet"])
    assert main(["patterns", trace, "--op", "aten::conv2d", "--min-len", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("rank"))
    assert head.split()[:5] == ["rank", "pattern", "count", "len", "GPU"] and "of all GPU time" in lines[-1]
    assert main(["patterns", trace, "--op", "aten::conv2d", "--min-len", "1", "--format", "csv"]) == 0
    header, first = capsys.readouterr().out.splitlines()[:2]
    assert header.startswith("rank,pattern,count,length,kernels,gpu_ns") and first.startswith("1,P1,")
    for args, message in (
        (("--op", "aten::conv"), "no CPU op is named 'aten::conv' (similar: aten::conv2d, aten::convolution"),
        (("--op", "a", "--op-regex", "b"), "give either op or op_regex"),
        (("--op-regex", "("), "is not a regular expression"),
        (("--tag-kernels",), "--tag-kernels writes into the trace"),
        (("--min-len", "4", "--max-len", "3"), "max_len >= min_len"),
    ):
        assert main(["patterns", trace, *args]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("distinct", [1, 7, 300, 200_000])
def test_factorized_equals_pandas(distinct):
    """The C hash table gives pandas.factorize's codes (first appearance), through its growth
    from 1,024 slots, for keys at the edges (0, 2**64 - 1) and all-equal or all-distinct runs."""
    import pandas as pd

    rng = np.random.default_rng(distinct)
    keys = rng.integers(0, 2**63, distinct, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    keys[:2] = [0, 2**64 - 1][:distinct] if distinct >= 2 else [0]
    values = np.concatenate([keys, keys[rng.integers(0, distinct, 400_000)]])
    codes, first = factorized(values)
    expected, uniques = pd.factorize(values)
    assert codes.dtype == np.intp and len(first) == len(uniques) == distinct
    assert np.array_equal(codes, expected) and np.array_equal(values[first], uniques)
    assert np.array_equal(first, np.unique(codes, return_index=True)[1])  # where each is first met
    assert len(factorized(np.zeros(0, np.uint64))[1]) == 0


def _reference_candidates(seq, min_len: int, max_len: int, keep: int):
    """``_candidates`` by brute force: windows inside one stream grouped by their names."""
    from traceforge.analyses.patterns.mining import _is_power

    lengths, examples, bounds = [], [], []
    for n in range(min_len, max_len + 1):
        groups: dict[tuple, list[int]] = {}  # names -> [count, time, first start], in first-met order
        for s in range(seq.size - n + 1):
            if seq.seg[s] == seq.seg[s + n - 1]:
                g = groups.setdefault(tuple(seq.codes[s:s + n].tolist()), [0, 0, s])
                g[0] += 1
                g[1] += int(seq.time[s + n] - seq.time[s])
        repeated = [g for g in groups.values() if g[0] >= 2]
        if not repeated:
            break
        ranked = sorted(repeated, key=lambda g: -(g[0] * float(g[1])))
        best = [g for g in ranked if not _is_power(seq.codes[g[2]:g[2] + n])][:keep]
        lengths += [n] * len(best)
        examples += [g[2] for g in best]
        bounds += [g[0] * g[1] for g in best]
    return lengths, examples, bounds


def test_mined_candidates_leave_out_windows_across_streams(tmp_path):
    """Windows that span two streams are grouped with the rest, then taken out: a run first met
    across the boundary (a b | c) counts only inside a stream, and its example is its first
    window there; one seen twice only with the crossing window (b | c y) is no candidate."""
    from traceforge.analyses.patterns.mining import _candidates, _Sequence
    from traceforge.columns.scan import scan

    streams = {7: "x a b", 9: "c y a b c y a b c z"}
    events, ts = [], 0
    for stream, names in streams.items():
        for name in names.split():
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
                           "dur": 1 + len(events) % 3, "args": {"device": 0, "stream": stream}})
            ts += 5
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    seq = _Sequence(scan(str(path)))
    got = _candidates(seq, 2, 6, keep=10)
    assert got == _reference_candidates(seq, 2, 6, keep=10)
    threes = [e for n, e in zip(got[0], got[1]) if n == 3]
    assert 5 in threes and 1 not in threes  # "a b c": first inside stream 9 at op 5, across the streams at op 1


def test_outermost_instances_skip_those_inside_another_instance():
    """A matching op counts once, at the outermost matching op above it, whatever lies between."""
    from traceforge.analyses.patterns.by_op import _outermost

    parent = np.array([-1, 0, 1, 2, -1, 4, 5, 0], np.int32)
    is_op = np.array([True, False, True, True, False, False, True, True])
    assert _outermost(parent, is_op).tolist() == [True, False, False, False, False, False, True, False]
    assert not _outermost(parent, np.zeros(8, bool)).any()


def test_mined_occurrences_equal_a_name_by_name_search(tmp_path):
    """Where a window's names occur again, found from its rarest name: every start of the same
    names inside one stream, whichever of its names is rarest and wherever it sits."""
    from traceforge.analyses.patterns.mining import _occurrences, _Sequence
    from traceforge.columns.scan import scan

    rng = np.random.default_rng(7)
    names = rng.choice(list("aaaaaabbbbccd"), size=300).tolist()  # d rare, a common
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7 + (i >= 200), "ts": 5 * i, "dur": 2,
               "args": {"device": 0, "stream": 7 + (i >= 200)}} for i, name in enumerate(names)]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    seq = _Sequence(scan(str(path)))
    codes, seg = seq.codes.tolist(), seq.seg.tolist()
    for n in (1, 2, 3, 5):
        for first in range(0, seq.size - n + 1, 7):
            want = [s for s in range(seq.size - n + 1)
                    if codes[s:s + n] == codes[first:first + n] and seg[s] == seg[s + n - 1]]
            assert _occurrences(seq, n, first).tolist() == want
