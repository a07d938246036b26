"""``--hta [VERSION]``: the CLI's one switch for HTA's choices, against HTA's own figures.

HTA 0.5.0 and 0.6.1 were run on every shared trace by ``scripts/hta_record.py``; what they gave
is in ``tests/data/hta_figures.json``, each figure beside the HTA call that made it (HTA is not
needed here). ``launch-stats --hta`` and ``stats --hta VERSION`` must give the same figures,
reduced the same way, except where ``DIFFERENT`` says otherwise: there each differing figure is
written as (traceforge, HTA), with the reason, and docs/hta.md states it.
"""

from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from functools import cache

import pytest

from tests.conftest import TESTS, TRACES, run_cli

RECORDED = json.loads((TESTS / "data" / "hta_figures.json").read_text())["versions"]
VERSIONS = sorted(RECORDED)
NAMES = sorted(RECORDED[VERSIONS[0]])
STATS_TABLES = ("overlap", "temporal", "kernel_types", "kernel_breakdown", "queue", "streams")


def _json(argv: list[str]) -> dict:
    done = run_cli(*argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@cache
def _stats(name: str, version: str) -> dict:
    tables = [a for t in STATS_TABLES for a in ("--table", t)]
    return _json(["stats", str(TRACES[name]), "--format", "json", "-q", *tables, "--hta-version", version])


@cache
def _launch_stats(name: str) -> dict:
    return _json(["launch-stats", str(TRACES[name]), "--format", "json", "-q", "--hta"])


def _us(ns: int) -> int:
    assert ns % 1000 == 0, ns  # HTA's choices round every time to whole µs
    return ns // 1000


def launch_figures(doc: dict) -> dict:
    """What ``hta_record.launch_stats`` keeps, but the interpolated median and p90."""
    totals = doc["totals_ns"]
    delay = next((r for r in doc["statistics"] if r["by"] == "all" and r["figure"] == "launch_delay"), None)
    return {"launches": doc["launches"], "cpu_us": _us(totals["cpu_duration"]), "gpu_us": _us(totals["gpu_duration"]),
            "delay_us": _us(totals["launch_delay"]), "delay_max_us": None if delay is None else _us(delay["max_ns"])}


def queue_figures(doc: dict) -> dict:
    """Per stream: the distinct change times, the mean and the max of the queue length there."""
    return {f"{r['stream']} {k}": round(r[k], 9) for r in doc["queue"] for k in ("points", "mean", "max")}


def overlap_figures(doc: dict) -> dict:
    row = next(r for r in doc["overlap"] if r["step"] == -1)
    return {"overlap_pct": round(row["overlap_pct"], 2) if row["comm_ns"] else None}  # HTA: NaN without NCCL


def temporal_figures(doc: dict) -> dict:
    row = next(r for r in doc["temporal"] if r["step"] == -1)
    return {"idle_us": _us(row["idle_ns"]), "compute_us": _us(row["compute_ns"]),
            "non_compute_us": _us(row["non_compute_ns"]), "kernel_us": _us(row["span_ns"])}


def idle_figures(doc: dict) -> dict:
    """Per stream, HTA's idle categories that have time (HTA lists a category with 0 µs too)."""
    return {f"{r['stream']} {c}": _us(r[f"{c}_ns"]) for r in doc["streams"]
            for c in ("host_wait", "kernel_wait", "other") if r[f"{c}_ns"]}


def breakdown_figures(doc: dict) -> dict:
    """Kernel types (time per set of types), and how many rows of each type have each sum
    (a top kernel's or Others'; names aside: HTA shortens them)."""
    return _breakdown({r["kernel_type"]: _us(r["time_ns"]) for r in doc["kernel_types"]},
                      [(r["kernel_type"], _us(r["total_ns"])) for r in doc["kernel_breakdown"]])


def _breakdown(types: dict, rows: list[tuple[str, int]]) -> dict:
    out = {f"type {t}": v for t, v in types.items() if v}
    for t, v in rows:
        out[f"rows {t} {v}"] = out.get(f"rows {t} {v}", 0) + 1
    return out


def hta_figures(version: str, name: str, analysis: str) -> dict | None:
    """HTA's recorded figures, reduced as ours are (None where HTA raised)."""
    figures = RECORDED[version][name][analysis].get("figures")
    if figures is None:
        return None
    if analysis == "launch_stats":
        figures = {k: v for k, v in figures.items() if k not in ("delay_median_us", "delay_p90_us")}
    elif analysis == "queue":
        figures = {f"{s} {k}": round(q[k], 9) for s, q in figures.items() for k in ("points", "mean", "max")}
    elif analysis == "overlap":
        figures = {"overlap_pct": figures.get("overlap_pct")}
    elif analysis == "idle":
        figures = {f"{s} {c}": t for s, cats in figures.items() for c, t in cats.items() if t}
    elif analysis == "kernel_breakdown":
        figures = _breakdown(figures["types"], [(t, v) for t, _, v in figures["kernels"]])
    return figures


OURS = {"launch_stats": launch_figures, "queue": queue_figures, "overlap": overlap_figures,
        "temporal": temporal_figures, "idle": idle_figures, "kernel_breakdown": breakdown_figures}


def differences(ours: dict, theirs: dict | None) -> dict:
    """The figures that differ, as {key: (ours, theirs)} (the whole figures where HTA raised)."""
    if theirs is None:
        return {"hta raised": True}
    keys = sorted(set(ours) | set(theirs))
    return {k: (ours.get(k), theirs.get(k)) for k in keys if ours.get(k) != theirs.get(k)}


# (analysis, trace) -> {version or "both": {figure: (traceforge, HTA)}}, each with why; docs/hta.md
# ("Side by side: --hta") gives the same numbers.
DIFFERENT: dict[tuple[str, str], dict] = {
    # HTA reads ts as a float64: at ns_resolution_trace's 1.7e15 µs its spacing is 0.25 µs, so its
    # whole-µs rounding starts from times up to 0.125 µs off (launch 1712195495505543.140 + 41.768 µs:
    # 41 µs in HTA, 40 µs here). traceforge rounds the exact times (HTA's float times also give 7
    # more distinct queue change times: 9,621 against 9,614).
    ('idle', 'ns_resolution'): {
        'both': {
            '7 host_wait': (2220, 1709), '7 kernel_wait': (8469, 8404), '7 other': (618, None),
        },
    },
    ('kernel_breakdown', 'ns_resolution'): {
        'both': {
            'rows COMPUTATION 13027': (1, None), 'rows COMPUTATION 13044': (None, 1),
            'rows COMPUTATION 16722': (1, None), 'rows COMPUTATION 16738': (None, 1),
            'rows COMPUTATION 17073': (1, None), 'rows COMPUTATION 17086': (None, 1),
            'rows COMPUTATION 18047': (1, None), 'rows COMPUTATION 18073': (None, 1),
            'rows COMPUTATION 18129': (1, None), 'rows COMPUTATION 18140': (None, 1),
            'rows COMPUTATION 18217': (1, None), 'rows COMPUTATION 18273': (None, 1),
            'rows COMPUTATION 18895': (1, None), 'rows COMPUTATION 18901': (None, 1),
            'rows COMPUTATION 190894': (1, None), 'rows COMPUTATION 191567': (None, 1),
            'rows COMPUTATION 19243': (1, None), 'rows COMPUTATION 19271': (None, 1),
            'rows COMPUTATION 20094': (1, None), 'rows COMPUTATION 20101': (None, 1),
            'rows COMPUTATION 20923': (1, None), 'rows COMPUTATION 20956': (None, 1),
            'rows MEMORY 1703': (1, None), 'rows MEMORY 1985': (None, 1), 'rows MEMORY 360': (1, None),
            'rows MEMORY 386': (None, 1), 'type COMPUTATION': (371264, 372150), 'type MEMORY': (2063, 2371),
        },
    },
    ('launch_stats', 'ns_resolution'): {
        'both': {
            'cpu_us': (190862, 192088), 'delay_max_us': (90939, 90938), 'delay_us': (322054028, 322052817),
            'gpu_us': (373327, 374521),
        },
    },
    ('queue', 'ns_resolution'): {'both': {'7 mean': (812.883711254, 813.124935038), '7 points': (9614, 9621)}},
    ('temporal', 'ns_resolution'): {
        'both': {
            'compute_us': (371264, 372150), 'idle_us': (11307, 10113), 'non_compute_us': (2063, 2371),
        },
    },
    # HTA keeps the negative durations its rounding makes (an op shorter than 1 µs inside one µs: start
    # rounded up past the end rounded down) and sums them: -1 µs each, in its busy time (so idle is
    # larger and non-compute smaller: 28 such ops on ddp, 77 on resnet50, 1 on cudagraph) and in its
    # per-name sums (ddp's Memset row -25 µs where its ops take 3 µs). On ncu_target the negative
    # non-compute time fails HTA's own assertion (AssertionError). traceforge counts them as 0.
    ('kernel_breakdown', 'h100_cudagraph'): {'both': {'rows MEMORY -1': (None, 1), 'rows MEMORY 0': (1, None)}},
    ('kernel_breakdown', 'h100_ddp'): {'both': {'rows MEMORY -25': (None, 1), 'rows MEMORY 3': (1, None)}},
    ('kernel_breakdown', 'h100_ncu_target'): {'both': {'rows MEMORY -4': (None, 1), 'rows MEMORY 0': (1, None)}},
    ('kernel_breakdown', 'h100_resnet50'): {'both': {'rows MEMORY 18': (None, 1), 'rows MEMORY 95': (1, None)}},
    ('temporal', 'h100_cudagraph'): {'both': {'idle_us': (46295, 46296), 'non_compute_us': (23, 22)}},
    ('temporal', 'h100_ddp'): {'both': {'idle_us': (44865, 44893), 'non_compute_us': (402, 374)}},
    ('temporal', 'h100_ncu_target'): {'both': {'hta raised': True}},
    ('temporal', 'h100_resnet50'): {'both': {'idle_us': (10437, 10514), 'non_compute_us': (2894, 2817)}},
    # HTA's idle breakdown takes each op's gap to the previous op's end, unmerged: an op overlapping
    # the one before gives a negative gap, and its category is that op's; traceforge's gaps are between
    # merged busy intervals (docs/hta.md, "Idle time").
    ('idle', 'h100_cudagraph'): {
        'both': {
            '7 host_wait': (45806, 45807), '7 kernel_wait': (1209, 1239), '7 other': (979, 949),
        },
    },
    ('idle', 'h100_ddp'): {'both': {'7 host_wait': (44089, 43443), '7 kernel_wait': (776, 1450)}},
    ('idle', 'h100_ncu_target'): {'both': {'7 host_wait': (14144, 14140), '7 kernel_wait': (43, 51)}},
    ('idle', 'h100_resnet50'): {'both': {'7 host_wait': (5304, 5296), '7 kernel_wait': (5133, 4679)}},
    ('idle', 'nccl'): {'both': {'7 host_wait': (357292, 357247), '7 kernel_wait': (2110, 2155)}},
    ('idle', 'negative_queue'): {'both': {'27 kernel_wait': (1002, 1000)}},
    ('idle', 'trace_diff'): {'both': {'7 kernel_wait': (42486, 42372)}},
    # HTA's GPU ops are every event with a stream: the cuda_sync events (Stream Sync, Context Sync,
    # Stream Wait Event) too, which stretch alexnet's span by 75.8 ms; 0.5.0 types Stream Wait Event
    # as COMPUTATION, 0.6.1 not. On triton the cpu_op of the Triton kernel's name has a stream arg
    # (95.8 µs): HTA counts it as a GPU op, whose interval covers the kernel's 1.76 µs, so HTA's span
    # and compute are 94 µs and the name's sum 95 µs (94 + 1).
    ('kernel_breakdown', 'alexnet'): {
        '0.5.0': {
            'rows COMPUTATION 419': (1, None), 'rows COMPUTATION 429': (None, 1),
            'type COMPUTATION': (10630, 10637),
        },
    },
    ('kernel_breakdown', 'event_sync'): {'0.5.0': {'rows COMPUTATION 2': (None, 1), 'type COMPUTATION': (369, 371)}},
    ('kernel_breakdown', 'triton'): {
        'both': {
            'rows COMPUTATION 1': (1, None), 'rows COMPUTATION 95': (None, 1), 'type COMPUTATION': (1, 94),
        },
    },
    ('temporal', 'alexnet'): {
        '0.5.0': {
            'compute_us': (10630, 10637), 'idle_us': (12854103, 12929684), 'kernel_us': (12920244, 12996011),
            'non_compute_us': (55511, 55690),
        },
        '0.6.1': {
            'idle_us': (12854103, 12929684), 'kernel_us': (12920244, 12996011), 'non_compute_us': (55511, 55697),
        },
    },
    ('temporal', 'event_sync'): {
        '0.5.0': {
            'compute_us': (369, 371), 'idle_us': (19134, 19132),
        },
        '0.6.1': {
            'idle_us': (19134, 19132), 'non_compute_us': (3, 5),
        },
    },
    ('temporal', 'triton'): {'both': {'compute_us': (1, 94), 'kernel_us': (1, 94)}},
    # A CUPTI range-profiler trace has no GPU op: HTA raises (KeyError, IndexError, ValueError);
    # traceforge gives empty tables.
    ('idle', 'cupti'): {'both': {'hta raised': True}},
    ('queue', 'cupti'): {'both': {'hta raised': True}},
    ('temporal', 'cupti'): {'both': {'hta raised': True}},
}


def _known(analysis: str, name: str, version: str) -> dict:
    known = DIFFERENT.get((analysis, name), {})
    return {k: tuple(v) if isinstance(v, list) else v for k, v in known.get(version, known.get("both", {})).items()}


@pytest.mark.integration
@pytest.mark.parametrize("analysis", sorted(OURS))
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NAMES)
def test_hta_switch_gives_htas_figures(name, version, analysis):
    doc = _launch_stats(name) if analysis == "launch_stats" else _stats(name, version)
    got = differences(OURS[analysis](doc), hta_figures(version, name, analysis))
    assert got == _known(analysis, name, version)


# HTA 0.5.0 and 0.6.1 alike: a.get_frequent_cuda_kernel_sequences(OP, DIR, min_pattern_len=3, rank=0,
# compress_other_kernels=False)["count"], with `a` as in hta_figures.json's "construct".
HTA_SEQUENCES = {("df_index", "aten::addmm"): [172, 72, 32, 20, 12], ("trace_diff", "aten::linear"): [70, 10]}


@pytest.mark.integration
@pytest.mark.parametrize("name, op", sorted(HTA_SEQUENCES))
def test_patterns_hta_counts_htas_sequences(name, op):
    doc = _json(["patterns", str(TRACES[name]), "--op", op, "--min-len", "3", "--format", "json", "--hta"])
    assert [p["count"] for p in doc["patterns"]] == HTA_SEQUENCES[name, op]
    every_step = _json(["patterns", str(TRACES[name]), "--op", op, "--min-len", "3", "--format", "json"])
    assert sum(p["count"] for p in every_step["patterns"]) > sum(HTA_SEQUENCES[name, op])


def test_hta_switch_leaves_mined_patterns_as_they_are(sample, tmp_path):
    """HTA counts kernel sequences only under an operator: without --op, --hta has no choice to
    make for the mined runs (it said so in an error before, and `annotate --all --hta` exited 1)."""
    args = ["patterns", str(sample.path), "--format", "json"]
    plain, hta = run_cli(*args), run_cli(*args, "--hta")
    assert hta.returncode == 0 and json.loads(hta.stdout) == json.loads(plain.stdout)
    assert "HTA counts kernel sequences only under an operator" in " ".join(hta.stderr.decode().split())
    out = tmp_path / "all_hta.json.gz"
    done = run_cli("annotate", str(sample.path), "--all", "--hta", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "no HTA counterpart" in " ".join(done.stderr.decode().split())
    assert run_cli("check", str(out)).returncode == 0


@pytest.mark.integration
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", [n for n in NAMES if ("temporal", n) not in DIFFERENT])
def test_classify_hta_is_htas_temporal_breakdown(name, version):
    """``classify --rules hta --hta``: COMPUTATION's busy time is HTA's compute time, non-GPU its
    idle time (HTA's temporal breakdown, recorded)."""
    rows = _json(["classify", str(TRACES[name]), "--rules", "hta", "--format", "json", "--hta"])["files"][0]["rows"]
    got = {r["category"]: r["union_ns"] for r in rows}
    hta = RECORDED[version][name]["temporal"]["figures"]
    assert (got.get("COMPUTATION", 0), got["non-GPU"]) == (hta["compute_us"] * 1000, hta["idle_us"] * 1000)


@pytest.mark.integration
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["negative_queue", "h100_ddp"])
def test_annotate_queue_length_hta_draws_htas_queue(tmp_path, name, version):
    """``annotate --queue-length --hta VERSION``: HTA's launch APIs and cut, the points at the
    events' exact ts. Taken at HTA's whole µs (each ts rounded up, the last point of each µs),
    they are HTA's distinct change times with HTA's values (``generate_trace_with_counters``'
    queue; h100_ddp's differ between the versions: 0.6.1 counts cuLaunchKernelEx)."""
    out = tmp_path / "a.json.gz"
    done = run_cli("annotate", str(TRACES[name]), "--queue-length", "--hta-version", version, "-o", str(out), "-q")
    assert done.returncode == 0, done.stderr
    at_us: dict[str, dict[int, int]] = {}
    for e in json.loads(gzip.decompress(out.read_bytes()), parse_float=Decimal)["traceEvents"]:
        if e.get("ph") == "C" and e.get("name") == "Queue length":
            (key, value), = e["args"].items()
            at_us.setdefault(key.removeprefix("stream "), {})[math.ceil(Decimal(e["ts"]))] = int(value)
    got = {f"{s} {k}": round(f(list(v.values())), 9) for s, v in at_us.items()
           for k, f in (("points", len), ("mean", lambda v: sum(v) / len(v)), ("max", max))}
    assert got == hta_figures(version, name, "queue")


def interval_figures(rows: list[dict]) -> dict:
    """Per "stream category": count, mean (µs, to HTA's 0.01), min and max (µs)."""
    return {f"{r['stream']} {r['category']}": (r["count"], round(r["mean_ns"] / 1000, 2), _us(r["min_ns"]),
                                                _us(r["max_ns"])) for r in rows}


# The (stream, category) rows whose gaps HTA takes unmerged (overlapping or touching ops give it
# gaps of 0 µs or less, e.g. trace_diff stream 7's kernel waits down to -13 µs; its categories move
# with them), or through a float64 (ns_resolution). Every other row is HTA's exactly, in both versions.
INTERVALS_DIFFER = {
    "df_index": {"7 kernel_wait"}, "negative_queue": {"7 kernel_wait", "27 kernel_wait"},
    "trace_diff": {"7 kernel_wait"}, "nccl": {"7 host_wait", "7 kernel_wait"},
    "ns_resolution": {"7 host_wait", "7 kernel_wait", "7 other"},
    "h100_cudagraph": {"7 host_wait", "7 kernel_wait", "7 other"}, "h100_ddp": {"7 host_wait", "7 kernel_wait"},
    "h100_ncu_target": {"7 host_wait", "7 kernel_wait"}, "h100_resnet50": {"7 host_wait", "7 kernel_wait"},
}


@pytest.mark.integration
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", [n for n in NAMES if n != "cupti"])  # HTA raises on cupti (no GPU op)
def test_idle_intervals_hta_are_htas_where_gaps_do_not_overlap(name, version):
    doc = _json(["stats", str(TRACES[name]), "--format", "json", "-q", "--table", "idle_intervals", "--hta-version", version])
    ours = interval_figures(doc["idle_intervals"])
    recorded = RECORDED[version][name]["idle_intervals"]["figures"]
    theirs = {f"{s} {c}": (x["count"], round(x["mean"], 2), x["min"], x["max"])
              for s, cats in recorded.items() for c, x in cats.items() if x["count"]}
    differ = {k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)}
    assert differ == INTERVALS_DIFFER.get(name, set())


@pytest.mark.integration
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", [n for n in NAMES if ("launch_stats", n) not in DIFFERENT])
def test_launch_stats_hta_median_and_p90_are_htas(name, version):
    """``traceforge.launch_stats(path, hta=True)`` (what ``launch-stats --hta`` reads): pandas'
    interpolated median and p90 of its delays are HTA's (recorded: ``delay_median_us``, ``delay_p90_us``)."""
    import traceforge

    delay = traceforge.launch_stats(str(TRACES[name]), hta=True)["launch_delay"] / 1000
    hta = RECORDED[version][name]["launch_stats"]["figures"]
    if not len(delay):
        assert hta["launches"] == 0 and hta["delay_median_us"] is None
        return
    assert delay.median() == pytest.approx(hta["delay_median_us"], abs=1e-9)
    assert delay.quantile(0.9) == pytest.approx(hta["delay_p90_us"], abs=1e-6)


@pytest.mark.integration
def test_gpu_annotations_hta_are_htas():
    """``stats --hta --table gpu_annotations``: count, sum, max and min per name equal HTA 0.5.0's
    ``get_gpu_user_annotation_breakdown`` exactly (``test_gpu_annotations.HTA_NCCL``, with its call)."""
    from tests.analyses.gpu_time.test_annotations import HTA_NCCL

    rows = _json(["stats", str(TRACES["nccl"]), "--format", "json", "-q", "--table", "gpu_annotations",
                  "--hta"])["gpu_annotations"]
    got = {r["name"]: (_us(r["total_ns"]), _us(r["max_ns"]), _us(r["min_ns"]), r["count"]) for r in rows}
    assert got == HTA_NCCL


# HTA 0.5.0 and 0.6.1 alike: a.get_memory_bw_summary(ranks=[0])[("memory_bw_gbps", "max")] (GB/s) per
# copy kind, with `a` as in hta_figures.json's "construct" (docs/hta.md, "Memcpy bandwidth").
HTA_PEAK_GBPS = {
    "negative_queue": {"HtoD": 21.165501, "DtoD": 865.161716, "DtoH": 0.333333, "Memset": 2.909091},
    "df_index": {"DtoD": 384.820751, "Memset": 1.773585},
    "trace_diff": {"HtoD": 10.422392, "DtoH": 4.293860, "Memset": 356.463550,
                   "DtoD": 671.525771},  # a spike of HTA's unstable sort: the largest copy is 392.8
    "ns_resolution": {"DtoD": 405.7052297939778, "Memset": 904.638036809816},
}


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(HTA_PEAK_GBPS))
def test_memcpy_peaks_hta_are_htas(name):
    """``stats --hta --table memcpy``: each kind's peak is HTA's (to our 1e-6 GB/s unit), but
    trace_diff's DtoD, where HTA sums tied copies in an arbitrary order (392.797965 here)."""
    rows = _json(["stats", str(TRACES[name]), "--format", "json", "-q", "--table", "memcpy", "--hta"])["memcpy"]
    got = {r["kind"]: r["peak_gbps"] for r in rows}
    expected = dict(HTA_PEAK_GBPS[name], **({"DtoD": 392.797965} if name == "trace_diff" else {}))
    assert got == pytest.approx(expected, abs=1e-6)
