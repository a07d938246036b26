"""A zstd trace that starts with a skippable frame (issue 55 item 4; valid: ``zstd -d`` reads
it, and some tools put metadata there) is read as zstd by every command, the rank lookup and
``open``'s size estimate."""

from __future__ import annotations

import struct

import pytest
import zstandard

from tests.conftest import run_cli
from traceforge.cli.serve import json_size
from traceforge.io.read.codec import detect_codec
from traceforge.io.read.rank_files import head_rank


def _skippable(magic_low: int, payload: bytes) -> bytes:
    return struct.pack("<II", 0x184D2A50 | magic_low, len(payload)) + payload


@pytest.mark.parametrize("magic_low", [0, 0xF])
def test_skippable_frame_first(magic_low, tmp_path, sample):
    path = tmp_path / "t.json.zst"
    body = zstandard.ZstdCompressor().compress(sample.raw)
    path.write_bytes(_skippable(magic_low, b"made by a tool") + body + _skippable(1, b""))  # one at the end too
    assert detect_codec(path.read_bytes()[:4]) == "zstd"
    plain = tmp_path / "t.json"
    plain.write_bytes(sample.raw)
    r = run_cli("info", str(path))
    assert r.returncode == 0 and b"(Kineto; zstd)" in r.stdout, r.stderr.decode()
    assert run_cli("stats", str(path)).stdout.replace(str(path).encode(), b"X") == \
        run_cli("stats", str(plain)).stdout.replace(str(plain).encode(), b"X")
    assert run_cli("check", str(path)).returncode in (0, 1)
    assert head_rank(str(path)) == head_rank(str(plain))
    assert json_size(str(path)).json_bytes == len(sample.raw)


def test_not_a_skippable_magic_stays_plain():
    assert detect_codec(struct.pack("<I", 0x184D2A60)) == "plain"
    assert detect_codec(b"{") == "plain" and detect_codec(b"") == "plain"
