"""All ranks on one timeline (issue 51): the per-rank collective table, matching, the clock
fit and the waits, on ranks made by scripts/make_ranks.py with known clocks and delays."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, TRACES, run_cli
from tests.support import make_ranks
from traceforge.analyses.collectives.kinds import bus_factor, kind_of, nccl_size
from traceforge.api.collectives import collectives
from traceforge.api.merge import merge
from traceforge.rewrite.merge import ID_STRIDE

US = 1000
OFFSET_TOL_NS = 5 * US
DRIFT_TOL_PPB = 1000
WAIT_TOL_NS = 5 * US


def made(tmp: Path, base: Path, ranks: int, seed: int, **kw) -> tuple[Path, dict]:
    out = tmp / f"r{ranks}_s{seed}"
    truth = make_ranks.make(base, out, ranks, seed, **kw)
    return out, truth


@pytest.fixture(scope="module")
def base(make_sample) -> Path:
    return make_sample(steps=5).path


@pytest.fixture(scope="module")
def short_base(make_sample) -> Path:
    return make_sample(steps=3).path


def true_shift(truth: dict, rank: int, t_r: int) -> float:
    """What the fit should take off rank ``rank``'s ts ``t_r`` (ns) to reach rank 0's clock."""
    c, c0 = truth["ranks"][str(rank)], truth["ranks"]["0"]
    t = float(t_r)
    for _ in range(4):  # invert t_r = t + O + D (t - T0)
        t = t_r - c["offset_ns"] - c["drift_ppb"] * (t - c["T0_ns"]) / 1e9
    t_ref = t + c0["offset_ns"] + c0["drift_ppb"] * (t - c0["T0_ns"]) / 1e9
    return t_r - t_ref


def check_recovered(found, truth: dict, ranks: int) -> None:
    clocks = found.clocks.table.set_index("rank")
    assert (clocks["status"].iloc[1:] == "fitted").all(), clocks
    base_ns = found.ranks[0].base_ns
    members = found.matched.members
    for r in range(1, ranks):
        ends = members[members["rank"] == r]["end_ns"].to_numpy()
        assert len(ends) >= 3
        fitted = found.clocks.shift(r, ends)
        expected = np.array([true_shift(truth, r, int(e) - base_ns) for e in ends])
        assert np.abs(fitted - expected).max() <= OFFSET_TOL_NS, (r, np.abs(fitted - expected).max())
        c, c0 = truth["ranks"][str(r)], truth["ranks"]["0"]
        assert abs(int(clocks.loc[r, "drift_ppb"]) - (c["drift_ppb"] - c0["drift_ppb"])) <= DRIFT_TOL_PPB
    waits = found.waits.per_rank
    instances = found.instances.set_index("instance")
    assert truth["delays"]
    for d in truth["delays"]:
        inst = members[(members["rank"] == d["rank"]) & (members["ordinal"] == d["ordinal"])]["instance"]
        assert len(inst) == 1
        i = int(inst.iloc[0])
        assert instances.loc[i, "last_rank"] == d["rank"]
        others = waits[(waits["instance"] == i) & (waits["rank"] != d["rank"])]
        assert len(others) == ranks - 1
        assert np.abs(others["wait_ns"].to_numpy() - d["delay_ns"]).max() <= WAIT_TOL_NS


@pytest.mark.parametrize("ranks", [2, 8])
def test_offsets_drift_and_delays_recovered(tmp_path, base, ranks):
    where, truth = made(tmp_path, base, ranks, seed=ranks, copies=4, gap_ms=300, delays=3)
    found = collectives([str(where)])
    assert set(found.matched.rules.values()) == {"order"}
    check_recovered(found, truth, ranks)
    assert any(f"rank {truth['delays'][0]['rank']}" in s or "last in" in s for s in found.waits.stragglers)


@pytest.mark.slow
def test_64_ranks(tmp_path, short_base):
    where, truth = made(tmp_path, short_base, 64, seed=64, copies=2, gap_ms=40, delays=2)
    found = collectives([str(where)])
    check_recovered(found, truth, 64)


def test_offsets_without_drift_fit_on_a_short_trace(tmp_path, short_base):
    """Three collectives in a few ms: no drift is fitted, the offsets still within 5 µs."""
    where, truth = made(tmp_path, short_base, 4, seed=3, max_drift_ppm=0, delays=1)
    found = collectives([str(where)])
    assert (found.clocks.table["drift_ppb"] == 0).all()
    check_recovered(found, truth, 4)


def test_order_that_disagrees_falls_back_to_ends(tmp_path, base):
    """Rank 1 loses its first collective and gains one at the end (a sampled trace): counts agree,
    order does not; matching by ends pairs the right ones."""
    where, truth = made(tmp_path, base, 2, seed=5, copies=4, gap_ms=300, delays=0)
    path = where / "rank1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    kernels = [i for i, e in enumerate(doc["traceEvents"]) if e.get("name", "").startswith("ncclKernel")]
    doc["traceEvents"][kernels[0]]["name"] = "not a collective"
    other = dict(doc["traceEvents"][kernels[-1]])
    other["ts"] = other["ts"] + 50_000  # 50 ms after the last one: ranks 0 has none there
    doc["traceEvents"].append(other)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    found = collectives([str(where)])
    assert found.matched.rules == {"0": "ends"}
    assert found.clocks.table.loc[1, "status"] == "fitted"
    assert len(found.instances) == len(kernels) - 1


def test_seq_numbers_match_first(tmp_path, base):
    where, truth = made(tmp_path, base, 2, seed=6, delays=0)
    for r in (0, 1):
        path = where / f"rank{r}.json.gz"
        doc = json.loads(gzip.decompress(path.read_bytes()))
        n = 0
        for e in doc["traceEvents"]:
            if e.get("name") == "record_param_comms":
                e["args"]["Seq"] = n + (1 if r == 1 and n == 0 else 0)  # rank 1's first is seq 1: unmatched
                n += 1
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    found = collectives([str(where)])
    assert found.matched.rules == {"0": "seq"}
    assert len(found.instances) == 4  # seq 1..4 on rank 0; rank 1 has 1, 1, 2, 3, 4


def write_trace(path: Path, events: list[dict], rank: int) -> None:
    doc = {"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}
    path.write_text(json.dumps(doc))


def nccl_events(group: str, start_us: int, n: int) -> list[dict]:
    out = []
    for i in range(n):
        ts = start_us + 1000 * i
        out += [
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts, "dur": 50,
             "args": {"Collective name": "allreduce", "Process Group Name": group, "In msg nelems": 1024,
                      "dtype": "Float", "Group size": 2}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 10,
             "dur": 5, "args": {"correlation": 100 + i}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "pid": 0, "tid": 20,
             "ts": ts + 20, "dur": 200, "args": {"correlation": 100 + i, "stream": 20, "device": 0}},
        ]
    return out


def test_table_ties_kernels_to_cpu_op_args(tmp_path):
    write_trace(tmp_path / "rank0.json", nccl_events("7", 1_000_000, 2), 0)
    found = collectives([str(tmp_path / "rank0.json")])
    k = found.kernels()
    assert k["kind"].tolist() == ["all_reduce", "all_reduce"]
    assert k["group"].tolist() == ["7", "7"]
    assert k["bytes"].tolist() == [4096, 4096]
    assert k["start_ns"].tolist() == [1_000_020_000, 1_001_020_000]
    assert k["cpu_op"].tolist() == ["record_param_comms"] * 2


@pytest.mark.parametrize("case", ["no collectives", "single rank", "no shared collective"])
def test_nothing_to_align_is_a_note_and_exit_0(tmp_path, case):
    if case == "no collectives":
        for r in (0, 1):
            write_trace(tmp_path / f"rank{r}.json", [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                                                      "tid": 1, "ts": 10, "dur": 5}], r)
        note = "no collective kernels"
    elif case == "single rank":
        write_trace(tmp_path / "rank0.json", nccl_events("0", 1_000_000, 3), 0)
        note = "only rank 0"
    else:
        write_trace(tmp_path / "rank0.json", nccl_events("a", 1_000_000, 3), 0)
        write_trace(tmp_path / "rank1.json", nccl_events("b", 5_000_000, 3), 1)
        note = "share no"
    done = run_cli("collectives", str(tmp_path), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert note in done.stderr.decode()
    found = collectives([str(tmp_path)])
    assert (found.clocks.table["offset_ns"] == 0).all()
    merged = tmp_path / "merged.json"
    done = run_cli("merge", str(tmp_path), "-o", str(merged), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    events = json.loads(merged.read_text())["traceEvents"]
    ts_in = sorted(e["ts"] for p in tmp_path.glob("rank*.json") for e in json.loads(p.read_text())["traceEvents"])
    ts_out = sorted(e["ts"] for e in events if e.get("ph") != "M")
    assert np.allclose(np.diff(ts_out), np.diff(ts_in))  # the recorded clocks: only a common rebase


def test_too_few_or_disagreeing_matches_are_refused():
    from traceforge.analyses.collectives.clock import _fit

    assert _fit(np.array([10, 20]), np.array([0, 10]))["status"].startswith("refused: 2 matched")
    own = np.array([0, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000]) + 10**15
    ref = own - np.array([0, 5_000_000, -7_000_000, 900_000, 13_000_000, -2_000_000])
    assert "disagree" in _fit(own, ref)["status"]
    good = _fit(own, own - 12_345)
    assert good["status"] == "fitted" and good["offset_ns"] == 12_345 and good["drift_ppb"] == 0


def test_kinds_and_nccl_formulas():
    assert kind_of("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "all_gather"
    assert kind_of("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bf16") == "reduce_scatter"
    assert kind_of("nccl:_all_gather_base") == "all_gather"
    assert kind_of("allreduce_coalesced") == "all_reduce"
    assert kind_of("nccl:all_to_all") == "all_to_all"
    assert kind_of("ncclDevKernel_SendRecv(x)") == "send_recv"
    assert kind_of("aten::mm") is None
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert bus_factor("broadcast", 4) == 1.0
    assert nccl_size("all_gather", 100, 800) == 800 and nccl_size("all_reduce", 100, 100) == 100


def test_merge_keeps_every_event_and_aligns_the_ends(tmp_path, base):
    where, truth = made(tmp_path, base, 2, seed=11, copies=4, gap_ms=300, delays=2)
    out = tmp_path / "merged.json.gz"
    result = merge([str(where)], str(out), draw_collectives=True, jobs=2)  # ranks written as members
    doc = json.loads(gzip.decompress(out.read_bytes()))
    events = doc["traceEvents"]
    drawn = [e for e in events if str(e.get("cat", "")).startswith("traceforge")
             or e.get("name") == "Time waiting for other ranks (ms)"
             or (e.get("name") == "thread_name" and str(e["args"]["name"]).startswith("waiting"))]
    assert len(drawn) == result.merged.appended
    for r, written in zip((0, 1), result.merged.ranks):
        n_in = len(json.loads(gzip.decompress((where / f"rank{r}.json.gz").read_bytes()))["traceEvents"])
        mine = [e for e in events if e["pid"] // ID_STRIDE == r and e not in drawn]
        assert written.events_in == written.events_out == n_in
        assert len(mine) == n_in + written.added
    ends = {}
    for e in events:
        if e.get("name", "").startswith("ncclKernel"):
            ends.setdefault(e["pid"] // ID_STRIDE, []).append(round(float(e["ts"]) * 1000) + round(float(e["dur"]) * 1000))
    assert np.abs(np.array(sorted(ends[0])) - np.array(sorted(ends[1]))).max() <= OFFSET_TOL_NS
    waiting = [e for e in events if e.get("name", "").startswith("Waiting for rank")]
    assert len(waiting) == len(truth["delays"])
    assert {e["name"] for e in waiting} == {f"Waiting for rank {d['rank']}" for d in truth["delays"]}
    names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
    assert all(n.startswith(("rank 0:", "rank 1:")) for n in names)
    assert len(doc["traceforgeMerge"]["ranks"]) == 2
    check = run_cli("check", str(out))
    assert check.returncode == 0, check.stdout.decode()[-2000:]


def test_merge_ranks_and_steps_keep_it_small(tmp_path, base):
    where, _ = made(tmp_path, base, 4, seed=12, delays=1)
    out = tmp_path / "two.json"
    assert run_cli("merge", str(where), "-o", str(out), "--ranks", "1-2", "--steps", "11", "--jobs", "1"
                   ).returncode == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert {e["pid"] // ID_STRIDE for e in events if type(e.get("pid")) is int} == {1, 2}
    all_events = json.loads(gzip.decompress((where / "rank1.json.gz").read_bytes()))["traceEvents"]
    assert len([e for e in events if e["pid"] // ID_STRIDE == 1]) < len(all_events)


def test_collectives_cli_formats(tmp_path, base):
    where, _ = made(tmp_path, base, 2, seed=13, delays=1)
    done = run_cli("collectives", str(where), "--format", "csv", "--table", "clocks", "--jobs", "1")
    assert done.returncode == 0 and done.stdout.decode().startswith("rank,status,offset_ns")
    done = run_cli("collectives", str(where), "--format", "json", "--jobs", "1")
    doc = json.loads(done.stdout)
    assert set(doc) == {"summary", "clocks"} and doc["summary"][0]["kind"] == "all_reduce"
    assert run_cli("collectives", str(where), "--format", "csv").returncode == 1  # one --table for csv
    done = run_cli("collectives", str(where), "--no-align", "--table", "clocks", "--jobs", "1")
    assert "recorded" in done.stdout.decode()


# -- the real pair (integration) ------------------------------------------------------------------

def test_real_pair_matched_fitted_and_merged(tmp_path):
    pair = TRACES["nccl"].parent.parent / "trace_filter"
    if not pair.is_dir():
        pytest.skip(f"no {pair}")
    found = collectives([str(pair)])
    assert found.clocks.table.loc[1, "status"] == "fitted"
    assert abs(int(found.clocks.table.loc[1, "offset_ns"])) < 100 * US  # one host: near 0
    assert len(found.instances) >= 4
    assert set(found.instances["kind"]) >= {"all_reduce", "all_gather"}
    text = run_cli("collectives", str(pair), "--table", "instances", "--table", "clocks", "--jobs", "1")
    assert text.returncode == 0 and "fitted" in text.stdout.decode()
    out = tmp_path / "pair.json.gz"
    assert run_cli("merge", str(pair), "-o", str(out), "--collectives", "--jobs", "2").returncode == 0  # members
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    for r in (0, 1):
        inputs = json.loads(gzip.decompress((pair / f"sampled_rank-{r}.json.gz").read_bytes()))["traceEvents"]
        copied = [e for e in events if e["pid"] // ID_STRIDE == r and not str(e.get("cat", "")).startswith("traceforge")
                  and e.get("name") not in ("Time waiting for other ranks (ms)",)
                  and not (e.get("name") == "thread_name" and str(e["args"]["name"]).startswith("waiting"))
                  and not (e.get("ph") == "M" and str(e["args"].get("name", "")).startswith(f"rank {r}: pid"))]
        by_name = lambda evs: sorted(str(e.get("name")) for e in evs if e.get("ph") != "M")  # noqa: E731
        assert by_name(copied) == by_name(inputs)
        assert len([e for e in copied if e.get("ph") == "M"]) >= len([e for e in inputs if e.get("ph") == "M"])
    assert run_cli("check", str(out)).returncode == 0
    from traceforge.perfetto import trace_processor as tp

    binary = tp.find(str(ROOT.parent / "shared" / "bin" / "trace_processor"))
    try:
        stats = tp.query(binary, str(out), tp.STATS_SQL, timeout=120)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"trace_processor cannot run here: {e}")
    losses = [s for s in stats if s["severity"] in tp.LOSS_SEVERITIES or s["name"].startswith("flow_")]
    inputs_losses = set()
    for r in (0, 1):
        for s in tp.query(binary, str(pair / f"sampled_rank-{r}.json.gz"), tp.STATS_SQL, timeout=120):
            inputs_losses.add(s["name"])
    assert {s["name"] for s in losses} <= inputs_losses, losses


def test_merge_batch_edits_equal_event_by_event(tmp_path, base):
    """The batch path (regex places, scanner ts) and the one-event path write the same events,
    on odd layouts too: keys after args, string pids, nested ids, quoted and fractional ts."""
    from traceforge.rewrite.merge import RankInput, merge_ranks

    odd = [
        {"ph": "X", "name": "a", "ts": 10.5, "dur": 1, "args": {"id": 7, "correlation": 3}, "pid": 5, "tid": 6},
        {"ph": "X", "name": "b", "pid": "Spans", "tid": "x", "ts": "12.25", "dur": 2},
        {"ph": "s", "name": "f", "cat": "ac2g", "id": 9, "pid": 5, "tid": 6, "ts": 11},
        {"ph": "f", "name": "f", "cat": "ac2g", "id": 9, "pid": 5, "tid": 6, "ts": 13, "bp": "e"},
        {"ph": "X", "name": "c", "pid": -1, "tid": 4294967296, "ts": 14.001, "dur": 1,
         "args": {"External id": 12, "nested": {"pid": 1, "correlation": 2}}},
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "p"}},
        {"ph": "i", "name": "d", "pid": 5, "tid": 6, "ts": 15, "s": "t", "id": "0x1"},
    ]
    (tmp_path / "odd.json").write_text(json.dumps({"traceEvents": odd}))
    where, _ = made(tmp_path, base, 2, seed=21, delays=1)
    inputs = [RankInput(0, str(where / "rank0.json.gz"), 1234, 20_000, 5),
              RankInput(1, str(tmp_path / "odd.json"), -777, -3_000, 9, 5_000_000, 1_000),
              RankInput(2, str(where / "rank1.json.gz"), 9, 0, 0)]
    fast = merge_ranks(inputs, str(tmp_path / "fast.json"))
    slow = merge_ranks(inputs, str(tmp_path / "slow.json"), keep=lambda ts, dur, ph: True)
    a = json.loads((tmp_path / "fast.json").read_text())["traceEvents"]
    b = json.loads((tmp_path / "slow.json").read_text())["traceEvents"]
    assert a == b
    assert [w.events_out for w in fast.ranks] == [w.events_out for w in slow.ranks]
    odd_out = [e for e in a if e.get("name") in ("a", "b", "c")]
    assert odd_out[0]["args"]["id"] == 7 and odd_out[0]["args"]["correlation"] > 3  # an "id" in args stays
    assert odd_out[2]["args"]["nested"]["pid"] == 1  # nested keys other than the ids stay
    assert isinstance(odd_out[1]["ts"], str)  # a ts written as a string stays one


def test_parallel_jobs_give_the_same_tables(tmp_path, base):
    where, _ = made(tmp_path, base, 4, seed=31, delays=2)
    one, two = collectives([str(where)], jobs=1), collectives([str(where)], jobs=2)
    for name, table in one.tables().items():
        assert table.equals(two.tables()[name]), name


def shifted(events: list[dict], by_us: int, first_corr: int) -> list[dict]:
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        e["ts"] += by_us
        if "correlation" in e.get("args", {}):
            e["args"]["correlation"] += first_corr
        out.append(e)
    return out


def test_a_rank_sharing_nothing_with_the_reference_is_fitted_through_another(tmp_path):
    """Rank 0 and 1 share group a, ranks 1 and 2 group b: rank 2's clock comes through rank 1's."""
    a, b = nccl_events("a", 1_000_000, 4), nccl_events("b", 2_000_000, 4)
    write_trace(tmp_path / "rank0.json", a, 0)
    write_trace(tmp_path / "rank1.json", shifted(a, 700, 0) + shifted(b, 700, 1000), 1)
    write_trace(tmp_path / "rank2.json", shifted(b, -3_000_000, 1000), 2)
    found = collectives([str(tmp_path)])
    clocks = found.clocks.table.set_index("rank")
    assert clocks.loc[1, "offset_ns"] == 700_000 and clocks.loc[2, "offset_ns"] == -3_000_000_000
    assert clocks.loc[2, "against"] == 1
    assert found.matched.rules == {"a": "order", "b": "order"}
