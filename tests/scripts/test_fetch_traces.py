"""scripts/fetch_traces.py, offline: URLs, layout, hashes and failures, against a file:// mirror."""

from __future__ import annotations

import hashlib
import re
import urllib.error
from pathlib import Path

import pytest

from tests.conftest import FETCHED, TRACES, load_script


@pytest.fixture(scope="module")
def ft():
    return load_script("fetch_traces")


def test_it_fetches_the_integration_tiers_traces(ft):
    assert sorted(t.path for t in ft.TRACES) == sorted(FETCHED.values())
    for t in ft.TRACES:
        assert t.path == f"hta/{t.upstream}" and t.size > 0 and re.fullmatch(r"[0-9a-f]{64}", t.sha256)
        assert re.fullmatch(rf"https://raw\.githubusercontent\.com/facebookresearch/HolisticTraceAnalysis/[0-9a-f]{{40}}"
                            rf"/tests/data/{re.escape(t.upstream)}", t.url()), t.url()
        assert t.url(ref="v0.5.0").endswith(f"/HolisticTraceAnalysis/v0.5.0/tests/data/{t.upstream}")


def test_its_hashes_are_the_traces_the_tests_read(ft):
    """Against the copies in TRACEFORGE_TRACES or ../shared/traces (integration tier)."""
    by_path = {t.path: t for t in ft.TRACES}
    for name, rel in FETCHED.items():
        path = TRACES[name]
        assert (ft.sha256_of(path), path.stat().st_size) == (by_path[rel].sha256, by_path[rel].size), name


def _mirror(ft, tmp_path, contents: dict[str, bytes], served: dict[str, bytes] | None = None):
    """A manifest of traces with ``contents`` (path under hta/: bytes), and a file:// mirror
    that serves ``served`` (default: the same bytes) in raw.githubusercontent.com's layout."""
    traces = tuple(ft.Trace(f"hta/{p}", p, "ab" * 20, hashlib.sha256(b).hexdigest(), len(b)) for p, b in contents.items())
    root = tmp_path / "mirror"
    for p, data in (served if served is not None else contents).items():
        dest = root / ft.REPOSITORY / ("ab" * 20) / "tests" / "data" / p
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return traces, root.as_uri()


CONTENTS = {"one/rank0.json.gz": b"\x1f\x8b first trace" * 100, "two/deeper/t.json.gz": b"\x1f\x8b second" * 7}


def test_fetches_into_the_layout_then_keeps_what_is_there(ft, tmp_path, monkeypatch, capsys):
    traces, base = _mirror(ft, tmp_path, CONTENTS)
    monkeypatch.setattr(ft, "TRACES", traces)
    target = tmp_path / "traces"
    assert ft.main(["-o", str(target), "--base-url", base]) == 0
    out = capsys.readouterr().out
    assert out.count(": fetched") == 2 and "h100/" in out and "not public" in out
    assert {str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()} == \
        {f"hta/{p}": b for p, b in CONTENTS.items()}

    def offline(url, timeout):
        raise AssertionError(f"fetched again: {url}")
    assert ft.main(["-o", str(target), "--base-url", base], opener=offline) == 0
    assert capsys.readouterr().out.count(": present") == 2


def test_a_file_with_the_wrong_hash_is_fetched_again(ft, tmp_path, monkeypatch):
    traces, base = _mirror(ft, tmp_path, CONTENTS)
    monkeypatch.setattr(ft, "TRACES", traces)
    target = tmp_path / "traces"
    stale = target / "hta" / "one" / "rank0.json.gz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older version")
    assert ft.fetch(traces[0], target, base=base) == "fetched"
    assert stale.read_bytes() == CONTENTS["one/rank0.json.gz"]


def test_a_download_that_does_not_match_is_never_left_in_place(ft, tmp_path, monkeypatch, capsys):
    served = {"one/rank0.json.gz": b"\x1f\x8b tampered" * 100, "two/deeper/t.json.gz": CONTENTS["two/deeper/t.json.gz"]}
    traces, base = _mirror(ft, tmp_path, CONTENTS, served)
    monkeypatch.setattr(ft, "TRACES", traces)
    target = tmp_path / "traces"
    assert ft.main(["-o", str(target), "--base-url", base]) == 1
    err = capsys.readouterr().err
    assert f"sha256 {hashlib.sha256(served['one/rank0.json.gz']).hexdigest()}" in err
    assert f"expected {traces[0].sha256}" in err and "1 of 2 traces not fetched" in err
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == ["hta/two/deeper/t.json.gz"]  # no partial or wrong file beside it


def test_network_errors_and_runaway_downloads(ft, tmp_path):
    trace = ft.Trace("hta/x/t.json.gz", "x/t.json.gz", "cd" * 20, "0" * 64, 10)

    def unreachable(url, timeout):
        raise urllib.error.URLError("Name or service not known")
    with pytest.raises(ft.FetchError, match=r"raw\.githubusercontent\.com/.*/(cd){20}/tests/data/x/t\.json\.gz: "
                                             "Name or service not known"):
        ft.fetch(trace, tmp_path, opener=unreachable)

    class Endless:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, n):
            return b"<html>" * (n // 6)
    with pytest.raises(ft.FetchError, match="more than 20 bytes: not the trace"):
        ft.fetch(trace, tmp_path, opener=lambda url, timeout: Endless())
    assert [p.name for p in (tmp_path / "hta" / "x").iterdir()] == []


def test_ref_replaces_the_pinned_commits(ft, tmp_path, monkeypatch, capsys):
    traces, _ = _mirror(ft, tmp_path, CONTENTS)
    monkeypatch.setattr(ft, "TRACES", traces)
    assert ft.main(["--list", "--ref", "main"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines[:2]] == [
        f"https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/main/tests/data/{p}" for p in CONTENTS]
    assert lines[2].startswith("note: h100/")
    assert Path(ft.__file__).name == "fetch_traces.py"
