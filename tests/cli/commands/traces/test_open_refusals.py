"""``traceforge open`` on hostile input (issue 55 item 1): a file that is not a trace is
refused as every command refuses it; the size estimate decompresses a bounded sample (a small
zstd bomb stays far under 500 MB); SIGTERM ends it with exit 143; ``--port 0`` prints the port
it got; a request with two Host headers is refused; a port past 65535 is one error line."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import zstandard

from tests.conftest import ROOT

MB = 1 << 20


def _open(path, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "traceforge", "open", str(path), "--no-browser", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_open_refuses_a_file_that_is_not_a_trace(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    r = subprocess.run([sys.executable, "-m", "traceforge", "open", str(passwd), "--no-browser"], cwd=ROOT,
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and r.stdout == b"", r
    assert r.stderr.count(b"\n") == 1 and b"not a JSON trace" in r.stderr and str(passwd).encode() in r.stderr


def test_size_estimate_of_a_zstd_bomb_is_bounded(tmp_path):
    bomb = tmp_path / "bomb.json.zst"
    with open(bomb, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
        f.write(b'{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 1}')
        block = b" " * (64 * MB)
        for _ in range(16):  # 1 GB of JSON
            f.write(block)
        f.write(b"]}")
    assert bomb.stat().st_size < 2 * MB
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child of a large pytest shows its parent's peak
    code = ("import re, sys; from traceforge.cli.serve import json_size; e = json_size(sys.argv[1]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
            "print(e.json_bytes, e.exact, hwm)")
    r = subprocess.run([sys.executable, "-c", code, str(bomb)], cwd=ROOT, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    size, exact, peak_kb = r.stdout.split()
    assert exact == b"False" and int(size) > 100 * MB  # an estimate that says "large"
    assert int(peak_kb) * 1024 < 300 * MB, peak_kb


def test_sigterm_ends_open_with_143_and_port_0_prints_the_real_port(sample):
    proc = _open(sample.path, "--port", "0")
    try:
        url = proc.stdout.readline().decode().strip()
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        assert port != 0, url
        with urllib.request.urlopen(url.split("url=", 1)[1], timeout=10) as r:
            assert r.read() == sample.path.read_bytes()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # two Host headers: ambiguous
            s.sendall(f"GET /{sample.path.name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\n"
                      "Connection: close\r\n\r\n".encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400"), answer[:200]
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_port_out_of_range_is_one_line(sample):
    for port in ("70000", "-1", "x"):
        r = subprocess.run([sys.executable, "-m", "traceforge", "open", str(sample.path), "--port", port, "--no-browser"],
                           cwd=ROOT, capture_output=True, timeout=60)
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"not a port" in r.stderr, r.stderr
