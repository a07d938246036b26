"""Where gzip damage is (issue 41 item 17): the error names the compressed byte at which zlib
stops, the member it is in, and the decompressed bytes before it; not the compressed bytes read
so far (the reader reads ahead, so that was up to a read past the damage, or the file's end)."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import zlib

import pytest

from tests.conftest import run_cli


def events_text(n: int, seed: int) -> bytes:
    """Events whose names do not compress, so the gzip data spans many of the reader's reads."""
    rng = random.Random(seed)
    return b",".join(json.dumps({"ph": "X", "cat": "kernel", "name": "%032x" % rng.getrandbits(128), "pid": 0,
                                 "tid": 7, "ts": i, "dur": 1}).encode() for i in range(n))


def damaged_member(first: bytes, rest: bytes) -> tuple[bytes, int]:
    """A gzip member of ``first + rest`` with an invalid deflate block header after ``first``
    (a full flush puts a block boundary on a byte there); the damage's offset in the member."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = c.compress(first) + c.flush(zlib.Z_FULL_FLUSH)
    return head + b"\x07" + c.compress(rest) + c.flush(), len(head)  # 0x07: last block, type 3 (reserved)


def one_line(r: subprocess.CompletedProcess) -> str:
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", ["info", "stats", "check"])
def test_damage_inside_a_member_is_named_at_its_byte(tmp_path, command):
    first = b'{"traceEvents": [' + events_text(2000, 1) + b","
    data, at = damaged_member(first, events_text(40000, 2) + b"]}")
    assert len(data) > 3 * (256 << 10) and at < 256 << 10  # the damage in the first read of several
    path = tmp_path / "t.json.gz"
    path.write_bytes(data)
    r = run_cli(command, str(path))
    err = " ".join(r.stdout.decode().split()) if command == "check" else one_line(r)  # (check wraps its lines)
    assert f"compressed byte {at:,} (in the gzip member from byte 0)" in err, err
    assert f"after {len(first):,} decompressed bytes" in err and "invalid block type" in err, err
    if command != "check":
        assert f"(byte {at})" in err, err


def test_damage_in_a_later_member(tmp_path):
    text = b'{"traceEvents": [' + events_text(3000, 3) + b","
    member1 = gzip.compress(text)
    member2, at = damaged_member(events_text(1000, 4), b"," + events_text(30000, 5) + b"]}")
    path = tmp_path / "t.json.gz"
    path.write_bytes(member1 + member2)
    err = one_line(run_cli("stats", str(path)))
    assert f"(byte {len(member1) + at})" in err and f"member from byte {len(member1):,}" in err, err
    assert f"after {len(text) + len(events_text(1000, 4)):,} decompressed bytes" in err, err


def test_a_failed_check_names_the_member(tmp_path):
    """A CRC mismatch is known only at the member's end: the error says the damage is in the member."""
    data = bytearray(gzip.compress(b'{"traceEvents": [' + events_text(20000, 6) + b"]}"))
    data[-8] ^= 0xFF  # the CRC
    path = tmp_path / "t.json.gz"
    path.write_bytes(bytes(data))
    err = one_line(run_cli("info", str(path)))
    assert f"(byte {len(data) - 5})" in err and "incorrect data check" in err, err
    assert "the end of the gzip member from byte 0: the damage is somewhere in that member" in err, err
