"""Decompression: every member or frame is read, and a stream cut anywhere is an error."""

from __future__ import annotations

import gzip
import random

import pytest
import zstandard

from traceforge.errors import TraceFormatError
from traceforge.io.codec import ZstdFrames, iter_decompressed

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
