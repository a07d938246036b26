#!/usr/bin/env python3
"""Fetch the public real traces that the tests' integration tier reads.

They are test data of Holistic Trace Analysis (github.com/facebookresearch/HolisticTraceAnalysis,
MIT licence, (c) Meta Platforms), each fetched from ``tests/data/`` at a pinned commit over
raw.githubusercontent.com and checked against its sha256 (that of the copy this project's tests
were written against), into ``hta/`` under the target directory, laid out as
``../shared/traces`` is. A file already there with the right hash is not fetched again; one
that does not match is never left in place.

    python3 scripts/fetch_traces.py                  # into ../shared/traces beside the checkout
    python3 scripts/fetch_traces.py -o ~/traces      # then: TRACEFORGE_TRACES=~/traces python3 -m pytest

The H100 traces (``h100/`` in ../shared/traces) are not public: no script can fetch them, and no
test reads them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = "facebookresearch/HolisticTraceAnalysis"
RAW_URL = "https://raw.githubusercontent.com"
READ_SIZE = 1 << 16
NOT_PUBLIC = ("h100/ (the H100 captures: resnet50_train, cudagraph_infer, ddp_nccl_1rank, ncu_target_trace "
              "+ ncu_raw.csv) is not public and cannot be fetched; no test reads it")


@dataclass(frozen=True)
class Trace:
    path: str  # where it goes, under the target directory
    upstream: str  # where it is, under tests/data/ of HTA's repository
    commit: str  # a commit of that repository that holds it
    sha256: str
    size: int  # bytes, as fetched (gzip)

    def url(self, base: str = RAW_URL, ref: str | None = None) -> str:
        return f"{base.rstrip('/')}/{REPOSITORY}/{ref or self.commit}/tests/data/{self.upstream}"


def _hta(path: str, commit: str, sha256: str, size: int, upstream: str | None = None) -> Trace:
    return Trace(f"hta/{path}", upstream or path, commit, sha256, size)


# The integration tier's traces (tests/conftest.py TRACE_FILES), hashed from ../shared/traces/hta/.
TRACES: tuple[Trace, ...] = (
    _hta("negative_queue_length_values_check/rank0.json.gz", "d54e43fdbf03ea5c7569dd6534f4984db3894c53",
         "b8ce7a1a143b55dd1811d269272b09d1c693ffea85b91858f5fb246e7ad8c5f8", 1_384_658),
    _hta("df_index_resolver/df_index_resolver.json.gz", "0c2146a8d003629a67f225528969752e1f0656aa",
         "769af9ab5262468eb7baf6a7bfdb138ef15542264c72c0c313758d951b16dc15", 2_992_153),
    _hta("trace_diff/test/test.json.gz", "0c2146a8d003629a67f225528969752e1f0656aa",
         "5e69e04ed19b2dbf59e632008146c1bd6da417dc3af7ab4885c619b11e34f1bf", 1_568_914),
    _hta("nccl_parser_config/nccl_data.json.gz", "3cb077c83144b564244b9fe869d16d92582e27c3",
         "c1cf9c575fdcd7bdc6326ceab834f94b351f81ae55577a7471aa9e328fb8b58e", 749_757),
    _hta("ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "c980c48309f7d59edf89271e771db4233dd3ccfa",
         "e279d7280e73719e8dd9550e120cfe081fbe268596bd297fe5fcbf63e2b75a09", 1_152_519),
    _hta("cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz", "c6f397ba4b466f2b145c6de89dce8da81661b37c",
         "07e7e02da9cfda66f5b6fc5fd17e1f93185321504496f4c00e8d375fb162bf84", 44_132),
    _hta("critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
         "66e3c5475683bd5f2cc79884dfe9a60a085f5cb6",
         "b9febb1abc8cc729a2890fb6a4171de9867ba72c944437ee046067e7c89912dc", 24_808),
    _hta("critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
         "ee355ccb9115d4a6b81bd0ea372eb2d54f8d2bdf",
         "3e79d573357fd8f764206cc2e514e4a1be4ef43808269689056ed400972ff09c", 3_481),
    _hta("amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "4f71f3ba8b26caaac2f00f6528e7f6e728283d54",
         "39fdab670f9e80a05ccc6d0d07611b3aeba1092fa10681d8dd08cea48d0488b5", 6_785),
    _hta("triton_example/triton_example.json.gz", "d05003c871e766c858a57e25c71a7db61e61fe95",
         "f1702aba1e49885c42a7bf5ab8b63b82a0d630acd41180d87199401dd202ccfb", 2_221),
)


class FetchError(Exception):
    pass


def sha256_of(path: Path) -> str | None:
    """The file's sha256 (hex), or None if there is no such file."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256()
            while block := f.read(READ_SIZE):
                digest.update(block)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def fetch(trace: Trace, target: Path, *, base: str = RAW_URL, ref: str | None = None,
          opener: Callable = urllib.request.urlopen, timeout: float = 60) -> str:
    """Put ``trace`` at ``target / trace.path``: "present" if a file with its hash is there,
    else "fetched" once downloaded and verified. The download goes to a temporary file beside
    the destination, renamed into place only when its sha256 is right (removed otherwise), so
    an interrupted or wrong download never looks like the trace."""
    dest = target / trace.path
    if sha256_of(dest) == trace.sha256:
        return "present"
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = trace.url(base, ref)
    limit = 2 * trace.size  # a runaway stream is not the trace
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        digest, got = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            try:
                with opener(url, timeout=timeout) as response:
                    while block := response.read(READ_SIZE):
                        got += len(block)
                        if got > limit:
                            raise FetchError(f"{url}: more than {limit:,} bytes: not the trace")
                        digest.update(block)
                        out.write(block)
            except OSError as e:  # URLError, HTTPError, timeouts, resets
                raise FetchError(f"{url}: {getattr(e, 'reason', None) or e}") from e
        if digest.hexdigest() != trace.sha256:
            raise FetchError(f"{url}: sha256 {digest.hexdigest()} ({got:,} bytes), expected {trace.sha256}: "
                             "not the file the tests were written against (try another --ref?)")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return "fetched"


def default_target() -> Path:
    """Where the tests look: ``$TRACEFORGE_TRACES``, else ``../shared/traces`` beside the checkout."""
    where = os.environ.get("TRACEFORGE_TRACES")
    return Path(where).expanduser() if where else Path(__file__).resolve().parent.parent.parent / "shared" / "traces"


def main(argv: Sequence[str] | None = None, *, opener: Callable = urllib.request.urlopen) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="target directory (default: $TRACEFORGE_TRACES, else ../shared/traces beside the checkout)")
    parser.add_argument("--ref", help="fetch every file at this commit, tag or branch instead of its pinned commit "
                        "(the sha256 must still match)")
    parser.add_argument("--base-url", default=RAW_URL, help=f"a mirror laid out as {RAW_URL} (default)")
    parser.add_argument("--list", action="store_true", help="print each file's URL and sha256, fetch nothing")
    args = parser.parse_args(argv)
    if args.list:
        for t in TRACES:
            print(f"{t.sha256}  {t.path}  {t.url(args.base_url, args.ref)}")
        print(f"note: {NOT_PUBLIC}")
        return 0
    target = args.output or default_target()
    failed = 0
    for t in TRACES:
        try:
            status = fetch(t, target, base=args.base_url, ref=args.ref, opener=opener)
        except FetchError as e:
            status, failed = f"FAILED: {e}", failed + 1
        print(f"{target / t.path}: {status}", file=sys.stderr if status.startswith("FAILED") else sys.stdout)
    print(f"note: {NOT_PUBLIC}")
    if failed:
        print(f"{failed} of {len(TRACES)} traces not fetched", file=sys.stderr)
        return 1
    print(f"the integration tier's traces are in {target}" + (
        "" if target.resolve() == default_target().resolve() else f" (set TRACEFORGE_TRACES={target})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
