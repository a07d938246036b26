"""Shared fixtures: the real traces in ../shared/traces, read in place."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces" / "hta"
assert SHARED.is_dir(), f"the shared traces are missing: {SHARED}"

TRACES = {
    "negative_queue": SHARED / "negative_queue_length_values_check" / "rank0.json.gz",
    "df_index": SHARED / "df_index_resolver" / "df_index_resolver.json.gz",
    "trace_diff": SHARED / "trace_diff" / "test" / "test.json.gz",
    "nccl": SHARED / "nccl_parser_config" / "nccl_data.json.gz",
    "ns_resolution": next((SHARED / "ns_resolution_trace").glob("*.json.gz")),
    "cupti": next((SHARED / "cupti_profiler").glob("*.json.gz")),
    "alexnet": next((SHARED / "critical_path" / "alexnet").glob("*.json.gz")),
    "event_sync": SHARED / "critical_path" / "cuda_event_sync_multi_stream" / "event_sync_trace.json.gz",
    "amd": next((SHARED / "amd_trace").glob("*.json.gz")),
    "triton": SHARED / "triton_example" / "triton_example.json.gz",
}
SMALL = ("cupti", "alexnet", "event_sync", "amd", "triton")


def raw_json(path: Path | str) -> bytes:
    """The decompressed bytes of a trace file."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceforge", *args], input=stdin, capture_output=True, cwd=ROOT, timeout=600
    )


@pytest.fixture(scope="session")
def columns():
    """Scan each shared trace once per test session."""
    from traceforge.scan import scan

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = scan(str(TRACES[name]))
        return cache[name]

    return get
