"""Memory on traces with many distinct names (issue 55 item 5): each name cost ~500 bytes of
Python objects (a bytes and a str per scanner string, a dict entry, the analyses' object
arrays of every name). The scanner's interner keeps the bytes in chunks (past its first,
in ``io.memory.paged``'s file maps), the scan's names are scanner string ids decoded when
read (``columns.names``), and the analyses make only the names they show. A made trace of
10^6 kernels, each named apart (``scripts/hostile_inputs.py``), stays under 500 MB peak RSS
in every command that reads names, with pyarrow and without; what the names read back as is
checked against the parsed events, for both scanner backends."""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.support.arrow_modes import MODES, command_in
from traceforge import _native
from traceforge.columns.names import Names, names_at, names_in_chunks
from traceforge.columns.scan import scan

MB = 1 << 20
NAMES = 1_000_000
BOUND = 500 * MB
_spec = importlib.util.spec_from_file_location("hostile_inputs", ROOT / "scripts" / "hostile_inputs.py")
hostile_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hostile_inputs)

# Raw name texts (between the quotes; None: no name) that decode to the same str in pairs.
_RAW_NAMES = [b"A", b"\\u0041", None, b"", b"\\ud800", b"\xed\xb2\x80", b"\\udced\\udcb2\\udc80", b"B", b"A",
              b"x\\\"y", b"\xff", b"\\udcff", b"B"]


def _kernel(i: int, raw: bytes | None) -> bytes:
    name = b"" if raw is None else b'"name":"' + raw + b'",'
    return (b'{"ph":"X","cat":"kernel",' + name + b'"pid":0,"tid":7,"ts":%d,"dur":2,'
            b'"args":{"stream":7,"device":0,"correlation":%d}}' % (10 * i, i))


@pytest.fixture
def alike_names(tmp_path):
    path = tmp_path / "alike.json"
    path.write_bytes(b'{"traceEvents":[' + b",".join(_kernel(i, r) for i, r in enumerate(_RAW_NAMES)) + b"]}")
    return path


@pytest.mark.parametrize("backend", ["c", "python"])
def test_names_that_decode_alike_are_one_name(backend, alike_names):
    with _native.using(backend, ["scanner"]):
        cols = scan(str(alike_names))
    events = json.loads(alike_names.read_bytes().decode("utf-8", "surrogateescape"))["traceEvents"]
    want = [e.get("name", "") for e in events]
    assert isinstance(cols.names, Names)
    assert names_at(cols.names, cols.gpu.name).tolist() == want
    assert sorted(cols.names) == sorted(set(want)) and len(cols.names) == 7  # "A", "", "\ud800", ...
    assert list(cols.names) == [cols.names[i] for i in range(len(cols.names))] == cols.names[:]
    assert [n for chunk in names_in_chunks(cols.names, np.arange(len(cols.names)), 3) for n in chunk] \
        == list(cols.names)
    assert pickle.loads(pickle.dumps(cols.names)) == list(cols.names)


@pytest.mark.skipif(_native.c_module("scanner") is None, reason="the C scanner is not built")
def test_interned_bytes_past_the_first_chunk_come_from_the_store():
    c = _native.c_module("scanner")
    asked = []

    def store(nbytes: int) -> bytearray:
        asked.append(nbytes)
        return bytearray(nbytes)

    interner = c.Interner(store)
    texts = [b"%08d" % i + b"x" * 1000 for i in range(9000)]  # 9 MB: past the first chunk's 8 MB
    ids = [c.intern(interner, t) for t in texts]
    assert ids == list(range(9000)) and asked and all(n >= 1000 for n in asked)
    assert [c.intern(interner, t) for t in texts[::-1]] == ids[::-1]  # found again, in either chunk
    assert c.strings(interner, 0, c.count(interner)) == texts
    assert c.find(interner, texts[-1]) == 8999 and c.find(interner, b"never") == -1


@pytest.fixture(scope="module")
def many_names(tmp_path_factory):
    path = tmp_path_factory.mktemp("names") / "names.json.gz"
    hostile_inputs.distinct_kernel_names(path, NAMES)
    return path


_PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
         "sys.stderr.buffer.write(r.stderr[-400:]); "
         "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("command", ["info", "stats", "annotate --all"])
def test_peak_rss_with_a_million_distinct_names(command, mode, many_names, tmp_path):
    args = command.split() + [str(many_names), "-q"] + (["-o", str(tmp_path / "out.json.gz")]
                                                         if command.startswith("annotate") else [])
    r = subprocess.run([sys.executable, "-c", _PEAK, *command_in(mode, *args)], cwd=ROOT, capture_output=True,
                       timeout=600)
    rc, peak_kb = r.stdout.split()
    assert rc == b"0", r.stderr.decode("utf-8", "replace")
    assert int(peak_kb) * 1024 < BOUND, f"{command} ({mode}): peak {int(peak_kb) >> 10} MB"
