"""``--hta [VERSION]``: the CLI's one switch for HTA's choices, against HTA's own figures.

HTA 0.5.0 and 0.6.1 were run on every shared trace by ``scripts/hta_record.py``; what they gave
is in ``tests/data/hta_figures.json``, each figure beside the HTA call that made it (HTA is not
needed here). ``launch-stats --hta`` and ``stats --hta VERSION`` must give the same figures,
reduced the same way, except where ``DIFFERENT`` says otherwise: there each differing figure is
written as (traceforge, HTA), with the reason, and docs/hta.md states it.
"""

from __future__ import annotations

import contextlib
import io
import json
from functools import cache
from pathlib import Path

import pytest

from traceforge.cli.main import main

from .conftest import TRACES

RECORDED = json.loads((Path(__file__).parent / "data" / "hta_figures.json").read_text())["versions"]
VERSIONS = sorted(RECORDED)
NAMES = sorted(RECORDED[VERSIONS[0]])
STATS_TABLES = ("overlap", "temporal", "kernel_types", "kernel_breakdown", "queue", "streams")


def _json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


@cache
def _stats(name: str, version: str) -> dict:
    tables = [a for t in STATS_TABLES for a in ("--table", t)]
    return _json(["stats", str(TRACES[name]), "--format", "json", "-q", *tables, "--hta", version])


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
DIFFERENT: dict[tuple[str, str], dict] = {}


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
