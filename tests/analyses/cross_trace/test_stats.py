"""stats / export / diff on the shared real traces: exact ns, totals that add up, and the
vectorised analyses against plain loops written from their docstrings."""

from __future__ import annotations

import importlib.util
import io
import json
import os
from collections import defaultdict
from decimal import Decimal

import numpy as np
import orjson
import pandas as pd
import pytest

import traceforge
from tests.conftest import SAMPLE, TRACES, raw_json, run_cli
from traceforge.analyses.cross_trace.diff import compare
from traceforge.analyses.cross_trace.stats import TAIL_PERCENTS, tails, trace_stats, wall_span
from traceforge.analyses.launches.overlap import launch_overlaps
from traceforge.analyses.structure.activity import canonical_kind
from traceforge.annotator.registry import STATS_TABLES
from traceforge.cli.main import main
from traceforge.columns.scan import KERNEL, scan

SCANNED_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op", "user_annotation",
                "python_function", "cuda_profiler_range"}


def _merged(intervals: list[tuple[int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


@pytest.mark.parametrize("name", [SAMPLE, "df_index", "alexnet", "amd", "trace_diff"])
def test_stats_with_the_cpu_ops_and_launch_calls_on_disk_are_the_in_memory_stats(name, trace_path):
    path = str(trace_path(name))
    on_disk = trace_stats(scan(path, spill_cpu_ops=True, spill_launch=lambda name: True))
    held = trace_stats(scan(path))
    assert held.summary["cpu_ops"].item() > 0 and "cpu_op" in set(held.tails["kind"])
    assert held.launch_apis["calls"].sum() > held.launch_apis["gpu_ops"].sum() > 0  # calls no GPU op joins too
    for table, df in held.tables().items():
        pd.testing.assert_frame_equal(getattr(on_disk, table), df)


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_shares_add_up_and_busy_plus_idle_is_span(name, columns):
    cols = columns(name)
    st = trace_stats(cols)
    tables = [cols.gpu, cols.launches, cols.cpu_ops, cols.ranges]
    act = trace_stats(cols, tables=["activity_all"]).activity_all  # every kind (activity: the CUPTI kinds)
    assert act["total_ns"].sum() == sum(int(t.dur.clip(min=0).sum()) for t in tables)
    assert act["events"].sum() == sum(len(t) for t in tables)
    assert act["share_pct"].sum() == pytest.approx(100.0, abs=1e-9)
    assert act["kind"].is_unique

    start, end = wall_span(cols)
    span = end - start
    assert st.summary["span_ns"].item() == span > 0
    gpu = cols.gpu
    for r in st.streams.itertuples():
        assert r.busy_ns + r.idle_ns == span
        assert r.host_wait_ns + r.kernel_wait_ns + r.other_ns + r.before_first_ns + r.after_last_ns == r.idle_ns
        rows = (gpu.device == r.device) & (gpu.stream == r.stream) & (gpu.dur > 0)
        merged = _merged(list(zip(gpu.ts[rows].tolist(), (gpu.ts[rows] + gpu.dur[rows]).tolist())))
        assert r.busy_ns == sum(e - s for s, e in merged)
        assert r.host_wait_gaps + r.kernel_wait_gaps + r.other_gaps == max(len(merged) - 1, 0)
    for r in st.devices.itertuples():
        assert r.busy_ns + r.idle_ns == span
    assert st.streams["ops"].sum() == st.devices["ops"].sum() == len(gpu)

    tails = st.tails.set_index("kind")
    assert (tails["count"] == act.set_index("kind")["events"]).all()
    assert (tails["top1_pct"] <= tails["top5_pct"] + 1e-9).all() and (tails["top5_pct"] <= tails["top10_pct"] + 1e-9).all()
    kernels = st.top_kernels
    assert kernels["count"].sum() == int((gpu.kind == KERNEL).sum())
    assert kernels["total_ns"].is_monotonic_decreasing


def test_idle_breakdown_matches_hta_rule_by_hand(columns):
    """Each gap goes whole to host wait (the next op's launch began after the gap began),
    else kernel wait (< 30 µs), else other: checked with a plain loop on every stream."""
    cols = columns("trace_diff")
    launch_ts = dict(zip(cols.launches.correlation.tolist(), cols.launches.ts.tolist()))
    ops = defaultdict(list)
    g = cols.gpu
    for dev, stream, ts, dur, corr, ordinal in zip(g.device.tolist(), g.stream.tolist(), g.ts.tolist(), g.dur.tolist(),
                                                    g.correlation.tolist(), g.ordinal.tolist()):
        if dur > 0:
            ops[(dev, stream)].append((ts, ordinal, ts + dur, launch_ts.get(corr) if corr >= 0 else None))
    st = trace_stats(cols).streams.set_index(["device", "stream"])
    for key, items in ops.items():
        items.sort()
        sums = {"host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0}
        reach = items[0][2]
        for ts, _, end, launched in items[1:]:
            if ts > reach:
                gap = ts - reach
                if launched is not None and launched > reach:
                    sums["host_wait_ns"] += gap
                elif gap < 30_000:
                    sums["kernel_wait_ns"] += gap
                else:
                    sums["other_ns"] += gap
            reach = max(reach, end)
        assert {k: int(st.loc[key, k]) for k in sums} == sums
    assert st["host_wait_ns"].sum() > 0 and st["kernel_wait_ns"].sum() > 0 and st["other_ns"].sum() > 0


@pytest.mark.parametrize("name", [SAMPLE, "trace_diff", "alexnet", "ns_resolution"])
def test_launch_overlap_matches_its_definition(name, columns):
    """Per thread, consecutive kernel launches; a pair overlaps when the first call's kernels
    end after the next call starts (a plain loop over the docstring's definition)."""
    cols = columns(name)
    kernel_end: dict[int, int] = {}
    corr_rows = defaultdict(list)
    for row, corr in enumerate(cols.launches.correlation.tolist()):
        corr_rows[corr].append(row)
    g = cols.gpu
    for kind, corr, ts, dur in zip(g.kind.tolist(), g.correlation.tolist(), g.ts.tolist(), g.dur.tolist()):
        if kind == KERNEL and corr >= 0 and corr_rows.get(corr):
            row = corr_rows[corr][0]
            kernel_end[row] = max(kernel_end.get(row, ts + dur), ts + dur)
    by_thread = defaultdict(list)
    for row in kernel_end:
        by_thread[int(cols.launches.track[row])].append((int(cols.launches.ts[row]), int(cols.launches.ordinal[row]), row))
    pairs = hits = 0
    for calls in by_thread.values():
        calls.sort()
        for (_, _, row), (next_ts, _, _) in zip(calls, calls[1:]):
            pairs += 1
            hits += kernel_end[row] > next_ts
    got_pairs, table = launch_overlaps(cols)
    assert (got_pairs, len(table)) == (pairs, hits)
    assert pairs > 0 and (table["overlap_ns"] > 0).all()
    assert (table["kernel_end"] - table["next_launch_start"] == table["overlap_ns"]).all()


def _expected_ns(text: str | int) -> int:
    return int(Decimal(str(text)) * 1000)


@pytest.mark.parametrize("name", [SAMPLE, "ns_resolution", "nccl"])
def test_exported_csv_has_the_exact_ns_of_the_json(name, tmp_path, trace_path):
    r = run_cli("export", str(trace_path(name)), "--csv", str(tmp_path))
    assert r.returncode == 0, r.stderr
    events = json.loads(raw_json(trace_path(name)), parse_float=str)["traceEvents"]  # fractions kept as their text
    expected = defaultdict(list)
    for ordinal, e in enumerate(events):
        if e.get("ph") == "X" and canonical_kind(e.get("cat", "")) in SCANNED_CATS:
            args = e.get("args", {})
            expected[canonical_kind(e["cat"])].append({
                "ordinal": ordinal, "start": _expected_ns(e["ts"]), "dur": _expected_ns(e["dur"]), "name": e["name"],
                "correlation": args.get("correlation", -1), "external_id": args.get("External id", -1),
                "grid": args.get("grid"), "block": args.get("block"), "shared_memory": args.get("shared memory"),
                "bytes": args.get("bytes"),
            })
    assert {p.stem for p in tmp_path.glob("*.csv")} == set(expected)
    for kind, rows in expected.items():
        want = pd.DataFrame(rows)
        got = pd.read_csv(tmp_path / f"{kind}.csv", keep_default_na=False).sort_values("ordinal", ignore_index=True)
        assert got["start"].dtype == got["end"].dtype == got["dur"].dtype == "int64"
        assert got["ordinal"].tolist() == want["ordinal"].tolist()
        for column in ("start", "dur", "name") + (("correlation",) if "correlation" in got else ()) + (
                ("external_id",) if "external_id" in got else ()):
            assert got[column].tolist() == want[column].tolist(), column
        assert (got["end"] == got["start"] + got["dur"]).all()
        if kind == "kernel":
            grid_block = got[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].values.tolist()
            assert grid_block == [g + b for g, b in zip(want["grid"], want["block"])]
            assert got["shared_memory"].tolist() == want["shared_memory"].tolist()
        if kind in ("gpu_memcpy", "gpu_memset"):
            assert got["bytes"].tolist() == want["bytes"].tolist()
        if kind in ("kernel", "gpu_memcpy", "gpu_memset"):
            assert ((got["launch"] == "") == (got["cpu_op"] == "")).all()  # every launch here ran inside a CPU op
            assert (got["launch"] != "").mean() > 0.9
    if name == "ns_resolution":
        assert b'"ts": 1712195495519689.047' in raw_json(trace_path(name))
        cpu = pd.read_csv(tmp_path / "cpu_op.csv", keep_default_na=False)
        assert 1712195495519689047 in set(cpu["start"])
        # This trace's GPU ops carry the External id of the op that launched them: the stack top must agree.
        op_name = dict(zip(cpu["external_id"], cpu["name"]))
        for kind in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu = pd.read_csv(tmp_path / f"{kind}.csv", keep_default_na=False)
            assert [op_name[e] for e in gpu["external_id"]] == gpu["cpu_op"].tolist()


def test_export_csv_text_is_what_pandas_writes(tmp_path):
    from traceforge.analyses.structure.export_tables import TableChunk, _Strings

    names = _Strings(["plain", "a,b", 'say "hi"', "line\nbreak", "cr\rhere", " lead ", "", "é", "x" * 300])
    pids = _Strings([1, "stream 7", None, 2.5])
    rng = np.random.default_rng(0)
    n = 40_000  # more rows than one CSV_ROWS piece
    chunk = TableChunk("cpu_op", {"ordinal": np.arange(n, dtype=np.int32), "start": rng.integers(-2**62, 2**62, n),
                                  "name": (rng.integers(-1, len(names.values) - 1, n), names),
                                  "pid": (rng.integers(0, 4, n), pids), "parent": (np.full(n, -1), names)})
    got = b"".join(chunk.csv(header=True))
    want = tmp_path / "want.csv"
    chunk.frame().to_csv(want, index=False, errors="backslashreplace")
    assert got == want.read_bytes()
    # a name that was not UTF-8 in the trace (kept as lone surrogates) is written escaped
    odd = TableChunk("cpu_op", {"name": (np.array([0]), _Strings(["bad \udcff"]))})
    assert b"".join(odd.csv(header=False)) == b"bad \\udcff\n"
    assert odd.frame()["name"].tolist() == ["bad \\udcff"]  # as a DataFrame (and Parquet) can hold it


def test_export_api_returns_what_it_wrote(tmp_path, monkeypatch):
    from traceforge.analyses.structure import export_tables

    monkeypatch.setattr(export_tables, "CHUNK_ROWS", 1000)  # GPU tables in several chunks
    monkeypatch.setattr(export_tables, "WINDOW_ROWS", 3000)  # so the others
    tables = traceforge.export(str(TRACES["nccl"]), csv_dir=str(tmp_path))
    assert {p.stem for p in tmp_path.glob("*.csv")} == set(tables) >= {"kernel", "cpu_op", "cuda_runtime"}
    for kind, df in tables.items():
        assert (df.dtypes[df.dtypes != object].astype(str).isin(["int64", "str"])).all()
        written = pd.read_csv(tmp_path / f"{kind}.csv", keep_default_na=False)
        shown = df.astype(object).where(df.notna(), "")  # a missing value (None): an empty CSV field
        assert len(df) > 0 and shown.astype(str).values.tolist() == written.astype(str).values.tolist()


def test_a_failed_export_leaves_no_table(tmp_path):
    from traceforge.analyses.structure.export_tables import tables_by_kind
    from traceforge.io.write.table_files import write_tables
    from traceforge.plan.reads import export_columns

    def read_tables(path):
        return tables_by_kind(export_columns(path))

    def broken():
        chunks = read_tables(str(TRACES["triton"]))
        yield next(chunks)
        yield next(chunks)
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError):
        write_tables(broken(), csv_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # a new directory is renamed into place only when whole
    written = write_tables(read_tables(str(TRACES["triton"])), csv_dir=str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p, _ in written)
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "out" / "kernel.csv").stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0o600


def test_parquet_needs_pyarrow(tmp_path, capsys):
    rc = main(["export", str(TRACES["triton"]), "--parquet", str(tmp_path / "pq")])
    if importlib.util.find_spec("pyarrow") is None:
        err = capsys.readouterr().err
        assert rc == 1 and err.count("\n") == 1 and "pyarrow" in err
        assert not (tmp_path / "pq").exists()
    else:
        assert rc == 0
        assert pd.read_parquet(tmp_path / "pq" / "kernel.parquet")["dur"].tolist() == [1760]


def test_diff_with_itself_is_all_zeros(columns):
    d = compare(columns("df_index"), columns("df_index"))
    for df in (d.ops, d.categories):
        assert len(df) and (df["count_diff"] == 0).all() and (df["total_diff_ns"] == 0).all()
        assert (df["count_change"] == "=").all() and (df["a_count"] == df["b_count"]).all()
    assert d.ops["a_count"].sum() == len(columns("df_index").gpu)


def test_diff_finds_the_one_kernel_made_slower(tmp_path, columns):
    """Double one kernel name's durations in a copy of trace_diff/test: that kernel, and
    only it, changes, by exactly its old total."""
    doc = orjson.loads(raw_json(TRACES["trace_diff"]))
    kernels = trace_stats(columns("trace_diff")).top_kernels
    target = kernels.iloc[5]  # not the largest: it must rise to the top by its change alone
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("name") == target["name"]:
            assert type(e["dur"]) is int  # this trace has integer µs: doubling stays exact
            e["dur"] *= 2
    after = tmp_path / "after.json"
    after.write_bytes(orjson.dumps(doc))
    d = compare(columns("trace_diff"), scan(str(after), cpu_ops=False))
    top, rest = d.ops.iloc[0], d.ops.iloc[1:]
    assert (top["name"], top["total_diff_ns"], top["count_diff"]) == (target["name"], target["total_ns"], 0)
    assert (rest["total_diff_ns"] == 0).all() and (rest["count_diff"] == 0).all()
    changed = d.categories[d.categories["total_diff_ns"] != 0]
    assert changed[["category", "total_diff_ns"]].values.tolist() == [[top["category"], target["total_ns"]]]
    assert changed.index.tolist() == [0]


def test_cli_formats_ranks_and_errors(capsys):
    assert main(["stats", str(TRACES["alexnet"]), str(TRACES["triton"]), "--format", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert [s["rank"] for s in out["summary"]] == [0, 1]  # alexnet says rank 0; triton has none: its position
    assert {row["rank"] for row in out["top_kernels"]} == {0, 1}
    span = {s["rank"]: s["span_ns"] for s in out["summary"]}
    assert all(s["busy_ns"] + s["idle_ns"] == span[s["rank"]] for s in out["streams"])

    assert main(["stats", str(TRACES["alexnet"]), "--format", "csv", "--table", "streams"]) == 0
    streams = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert streams.drop(columns="busy_pct").to_dict("records") == [
        {k: v for k, v in s.items() if k != "busy_pct"} for s in out["streams"] if s["rank"] == 0]

    assert main(["stats", str(TRACES["amd"])]) == 0
    text = capsys.readouterr().out
    assert "hipLaunchKernel" in text and "Launch overlap: 0 of 12" in text

    assert main(["diff", str(TRACES["amd"]), str(TRACES["triton"]), "--format", "csv", "--top", "3"]) == 1
    assert "one table: name it with --table" in capsys.readouterr().err  # tests/analyses/cross_trace/test_diff.py
    assert main(["diff", str(TRACES["amd"]), str(TRACES["triton"]), "--format", "csv", "--top", "3",
                 "--table", "ops"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("kind,name,category,") and len(text.splitlines()) == 4

    assert main(["stats", str(TRACES["alexnet"]), str(TRACES["alexnet"])]) == 1
    err = capsys.readouterr().err
    assert "rank 0 again" in err and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["stats", str(TRACES["amd"]), "--kernel-wait-us", "soon"])
    assert "not a number" in capsys.readouterr().err


def test_stats_takes_the_rank_from_the_file_name_like_the_other_commands(tmp_path):
    """Without distributedInfo, ``rank3`` in the name is the rank (as annotate & co. read it)."""
    from traceforge.api.files import stats as compute

    data = raw_json(TRACES["triton"])  # its distributedInfo is absent
    assert b"distributedInfo" not in data
    path = tmp_path / "job_rank3.json"
    path.write_bytes(data)
    assert set(compute(str(path)).tables()["summary"]["rank"]) == {3}


def test_stats_makes_only_the_tables_asked_for(sample):
    full = traceforge.stats(str(sample.path))
    some = traceforge.stats(str(sample.path), tables=["devices", "streams"])
    pd.testing.assert_frame_equal(some.devices, full.devices)
    pd.testing.assert_frame_equal(some.streams, full.streams)
    assert len(full.summary) == 1 and len(some.summary) == 0
    with pytest.raises(ValueError, match="no table 'nope'"):
        traceforge.stats(str(sample.path), tables=["nope"])
    out = run_cli("stats", str(sample.path), "--table", "devices", "--table", "streams", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert list(json.loads(out.stdout)) == ["devices", "streams"]


def test_stats_csv_is_one_table_that_pandas_reads(sample):
    r = run_cli("stats", str(sample.path), "--format", "csv")
    assert r.returncode == 1 and not r.stdout
    assert r.stderr.decode().strip().splitlines() == [
        f"traceforge: error: stats --format csv writes one table: name it with --table ({', '.join(STATS_TABLES)})"]
    full = traceforge.stats(str(sample.path), tables=tuple(STATS_TABLES))
    for name in ("streams", "overlap", "temporal", "kernel_types"):
        r = run_cli("stats", str(sample.path), "--format", "csv", "--table", name)
        assert r.returncode == 0, r.stderr
        read = pd.read_csv(io.BytesIO(r.stdout))
        assert list(read.columns) == list(full.tables()[name].columns) and len(read) == len(full.tables()[name])


def test_tails_top_shares_equal_a_full_sort():
    """``tails``' top 1/5/10 % come from partitions: against the sorted durations, with ties,
    zeros and kinds of 1, 99, 100 and 12,345 events."""
    rng = np.random.default_rng(7)
    per_kind = []
    for i, n in enumerate((1, 99, 100, 12_345)):
        dur = rng.integers(0, 50_000, n).astype(np.int32)
        dur[: n // 4] = 1_000  # ties across the cut
        per_kind.append((f"k{i}", dur))
    table = tails(per_kind)
    for (kind, dur), row in zip(per_kind, table.itertuples()):
        longest = sorted(dur.tolist(), reverse=True)
        assert row.total_ns == sum(longest) and row.max_ns == longest[0] and row.min_ns == longest[-1]
        for p in TAIL_PERCENTS:
            n = max(1, len(dur) * p // 100)
            assert getattr(row, f"top{p}_n") == n
            assert getattr(row, f"top{p}_mean_ns") == sum(longest[:n]) / n, (kind, p)
