"""``traceforge report``'s page in a real headless browser (Playwright + Chromium): it makes no network request, logs no console error, and renders
every plot non-empty; a screenshot is written beside the page. How fast a page opens is
measured by ``scripts/open_page.py``, not asserted here. Skipped, saying why, where
Playwright or a Chromium cannot be had (``python3 -m playwright install chromium``, or a
system ``chromium``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TRACES, load_script, run_cli
from tests.report.test_report import four_ranks

pytest.importorskip("bokeh", reason="the report extra (bokeh) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")

OPEN_PAGE = load_script("open_page")


def open_page(page_path: Path, screenshot: Path) -> dict:
    try:
        return OPEN_PAGE.open_page(page_path, screenshot)
    except OPEN_PAGE.NoBrowser as e:
        pytest.skip(str(e))


def _check(page_path: Path) -> dict:
    found = open_page(page_path, page_path.with_suffix(".png"))
    assert found["remote"] == [] and found["errors"] == [], found
    assert found["figures"] > 0 and found["empty_sources"] == 0, found
    assert found["drawn"] >= found["figures"], found
    assert page_path.with_suffix(".png").stat().st_size > 10_000
    return found


@pytest.mark.slow
def test_sample_page_in_a_browser(sample, tmp_path):
    out = tmp_path / "report.html"
    assert run_cli("report", str(sample.path), "-o", str(out)).returncode == 0
    _check(out)


@pytest.mark.slow
def test_four_ranks_in_a_browser(sample, tmp_path):
    out = tmp_path / "report.html"
    assert run_cli("report", str(four_ranks(sample.path, tmp_path / "ranks")), "-o", str(out)).returncode == 0
    _check(out)


@pytest.mark.parametrize("name", ["nccl", "df_index"])
def test_real_trace_pages_in_a_browser(name, tmp_path):
    out = tmp_path / "report.html"
    assert run_cli("report", str(TRACES[name]), "-o", str(out)).returncode == 0
    _check(out)
