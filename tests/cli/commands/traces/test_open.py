"""``traceforge open``: the trace is served on 127.0.0.1 the way ui.perfetto.dev fetches it."""

from __future__ import annotations

import gzip
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import zstandard

from tests.conftest import ROOT, TRACES, raw_json
from traceforge.cli import serve
from traceforge.cli.serve import SizeEstimate, json_size


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_open_serves_the_file_to_the_ui(sample):
    path = sample.path
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "traceforge", "open", str(path), "--port", str(port), "--no-browser"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = proc.stdout.readline().decode().strip()  # printed before serving starts
        assert url == f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/{path.name}"
        trace_url = url.split("url=", 1)[1]
        with urllib.request.urlopen(trace_url, timeout=10) as r:
            assert r.status == 200
            assert r.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
            assert r.headers["Cache-Control"] == "no-cache"
            assert r.read() == path.read_bytes()
        preflight = urllib.request.Request(trace_url, method="OPTIONS", headers={"Origin": "https://ui.perfetto.dev"})
        with urllib.request.urlopen(preflight, timeout=10) as r:
            assert r.status == 204 and r.headers["Access-Control-Allow-Private-Network"] == "true"
        with pytest.raises(urllib.error.HTTPError) as err:  # nothing else on this machine is served
            urllib.request.urlopen(f"http://127.0.0.1:{port}/etc/passwd", timeout=10)
        assert err.value.code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_open_refuses_a_missing_file(tmp_path):
    r = subprocess.run([sys.executable, "-m", "traceforge", "open", str(tmp_path / "nope.json"), "--no-browser"],
                       cwd=ROOT, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"nope.json: cannot read: No such file" in r.stderr  # as every command says it


def test_json_size(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "_SAMPLE_BYTES", 256 << 10)  # less than the files below: extrapolated
    raw = raw_json(TRACES["negative_queue"])
    plain, gz, zst = tmp_path / "t.json", tmp_path / "t.json.gz", tmp_path / "t.json.zst"
    plain.write_bytes(raw)
    gz.write_bytes(gzip.compress(raw, 1))
    zst.write_bytes(zstandard.ZstdCompressor().compress(raw))
    assert json_size(str(plain)) == SizeEstimate(len(raw), True)
    assert json_size(str(TRACES["triton"])) == SizeEstimate(len(raw_json(TRACES["triton"])), True)
    for path in (gz, zst):
        estimate = json_size(str(path))
        assert not estimate.exact and 0.7 * len(raw) < estimate.json_bytes < 1.5 * len(raw)
    assert SizeEstimate(1_500_000_000, False).too_large and not SizeEstimate(len(raw), True).too_large


def test_json_size_of_samples(tmp_path, monkeypatch, make_sample):
    """The same on synthetic traces: exact when plain or read whole, else extrapolated from
    the bytes read (the sample puts its CPU events first, which compress worse than the
    rest: a rougher guess than on a real trace's mix)."""
    monkeypatch.setattr(serve, "_SAMPLE_BYTES", 16 << 10)  # less than the compressed files below
    raw = make_sample(steps=10).raw
    plain, gz, zst = tmp_path / "t.json", tmp_path / "t.json.gz", tmp_path / "t.json.zst"
    plain.write_bytes(raw)
    gz.write_bytes(gzip.compress(raw, 1))
    zst.write_bytes(zstandard.ZstdCompressor().compress(raw))
    assert json_size(str(plain)) == SizeEstimate(len(raw), True)
    small = make_sample(steps=1)
    assert small.path.stat().st_size < 16 << 10 and json_size(str(small.path)) == SizeEstimate(len(small.raw), True)
    for path in (gz, zst):
        assert path.stat().st_size > 16 << 10
        estimate = json_size(str(path))
        assert not estimate.exact and 0.5 * len(raw) < estimate.json_bytes < 2 * len(raw)
