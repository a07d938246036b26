"""Decompression: every member or frame is read, and a stream cut anywhere is an error."""

from __future__ import annotations

import gzip
import io
import platform
import random

import pytest
import zstandard

from tests.conftest import TRACES, raw_json, run_cli
from traceforge.errors import TraceFormatError, UsageError
from traceforge.io.read.codec import ZstdFrames, iter_decompressed
from traceforge.io.write.output import COMPRESSIONS, Compressor, output_compression

_rng = random.Random(5)
DATA = b"".join(b'{"ph":"X","name":"%s","ts":%d,"dur":%d},' % (_rng.randbytes(_rng.randint(4, 60)).hex().encode(), i,
                _rng.randint(1, 9999)) for i in range(12_000))  # ~0.9 MB, many zstd blocks


def _frames() -> tuple[bytes, list[int]]:
    """Three zstd frames (content size known or not, with and without a checksum, one
    all-RLE) and where each ends."""
    parts, ends = [], []
    plain = zstandard.ZstdCompressor(write_checksum=True).compress(DATA[:300_000])
    streamed = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    for frame in (plain, streamed.compress(DATA[300_000:]) + streamed.flush(),
                  zstandard.ZstdCompressor().compress(b"\0" * 500_000)):
        parts.append(frame)
        ends.append(sum(map(len, parts)))
    return b"".join(parts), ends


def test_zstd_frames_complete_only_at_frame_ends():
    """Fed in random pieces, the follower says "complete" exactly at the end of each frame."""
    data, ends = _frames()
    rng = random.Random(3)
    for cut in [*range(0, len(data), 613), *ends, *(e - 1 for e in ends), *(e + 4 for e in ends[:-1])]:
        frames, at = ZstdFrames(), 0
        while at < cut:
            step = min(rng.randint(1, 40_000), cut - at)
            frames.follow(data[at:at + step])
            at += step
        assert frames.complete == (cut == 0 or cut in ends), cut


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_all_members_read_and_any_cut_is_an_error(tmp_path, codec):
    if codec == "gzip":
        data = gzip.compress(DATA[:300_000]) + gzip.compress(DATA[300_000:])
    else:
        data, _ = _frames()
    path = tmp_path / "t"
    path.write_bytes(data)
    expected = DATA if codec == "gzip" else DATA + b"\0" * 500_000
    assert b"".join(iter_decompressed(str(path))) == expected
    for cut in (len(data) // 3, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(TraceFormatError, match=f"truncated {codec} stream"):
            b"".join(iter_decompressed(str(path)))


@pytest.mark.parametrize("suffix", [".json.gz", ".json.zst"])
def test_small_compression_writes_the_same_trace_smaller(tmp_path, suffix):
    """``--compression small`` (gzip 6 through zlib, zstd 9) changes the file's size, not its bytes."""
    src = TRACES["negative_queue"]
    out = {c: tmp_path / f"{c}{suffix}" for c in COMPRESSIONS}
    for compression, path in out.items():
        r = run_cli("annotate", str(src), "--queue-length", "--compression", compression, "-o", str(path))
        assert r.returncode == 0, r.stderr
    assert raw_json(out["small"]) == raw_json(out["fast"])
    assert out["small"].stat().st_size < 0.85 * out["fast"].stat().st_size


def _gzip_size(data: bytes) -> int:
    buf = io.BytesIO()
    c = Compressor(buf, "gzip")  # its level is the one in force now
    c.write(data)
    c.close()
    assert gzip.decompress(buf.getvalue()) == data
    return len(buf.getvalue())


def test_output_compression_applies_inside_only_and_names_unknown_ones():
    data = b'{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2},\n' * 20_000
    fast = _gzip_size(data)
    with output_compression("small"):
        small = _gzip_size(data)
    assert small < fast and _gzip_size(data) == fast  # the default again outside
    with pytest.raises(UsageError, match="unknown compression 'tiny'"):
        with output_compression("tiny"):
            pass


@pytest.mark.parametrize("suffix", [".json.gz", ".json.zst", ".json"])
def test_reading_frees_unused_heap_pages_every_trim_every_bytes(tmp_path, monkeypatch, suffix):
    """Reading gives the heap's free pages back once TRIM_EVERY bytes have been read since
    the last time, whatever the codec (io.heap): what keeps resident memory flat on big traces."""
    from traceforge.io.memory import heap

    trims: list[int] = []
    monkeypatch.setattr(heap, "_malloc_trim", lambda: trims.append)
    data = DATA * 10  # ~12.7 MB: four blocks
    path = tmp_path / f"t{suffix}"
    packed = {".json.gz": gzip.compress, ".json.zst": zstandard.ZstdCompressor().compress}
    path.write_bytes(packed.get(suffix, bytes)(data))
    for every, expected in ((1, 4), (9 << 20, 1), (len(data) + 1, 0)):
        monkeypatch.setattr(heap, "TRIM_EVERY", every)
        trims.clear()
        assert sum(map(len, iter_decompressed(str(path)))) == len(data)
        assert trims == [0] * expected


def test_the_heap_trim_is_found_on_glibc():
    from traceforge.io.memory import heap

    if platform.libc_ver()[0] == "glibc":
        assert heap._malloc_trim() is not None
