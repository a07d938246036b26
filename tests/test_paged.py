"""Big columns in temporary files' maps (``io.paged``): their pages leave resident memory on
``page_out`` and come back, unchanged, when read; a scan and an annotate whose every column
is paged out between analyses give what the anonymous columns give."""

from __future__ import annotations

import errno
import mmap
import os
import sys

import numpy as np
import pytest

from traceforge.annotator.run import annotate
from traceforge.cli import main as cli
from traceforge.columns.scan import scan
from traceforge.columns.table import GrowingColumns
from traceforge.io import heap, paged

from .conftest import SAMPLE, raw_json

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or getattr(mmap, "MADV_DONTNEED", None) is None,
                                reason="resident memory read from /proc; madvise(MADV_DONTNEED) on Linux")


def _resident_file_mb() -> float:
    with open("/proc/self/status") as f:
        fields = {line.split(":")[0]: int(line.split()[1]) for line in f if line.startswith("Rss")}
    return (fields["RssFile"] + fields.get("RssShmem", 0)) / 1024


@linux_only
def test_page_out_gives_the_pages_back_and_keeps_the_data():
    values = paged.empty(4 << 20, np.int64)  # 32 MB
    assert paged.in_file_map(values)
    values[:] = np.arange(len(values))
    before = _resident_file_mb()
    paged.page_out()
    after = _resident_file_mb()
    assert before - after >= 28, (before, after)
    assert int(values[::4096].sum()) == sum(range(0, 4 << 20, 4096))  # read back from the page cache
    values[-1] = -5  # and written again
    paged.page_out()
    assert int(values[-1]) == -5 and int(values[-2]) == (4 << 20) - 2


def test_small_arrays_stay_on_the_heap():
    small = paged.empty(1000, np.int32)
    assert not paged.in_file_map(small) and small.dtype == np.int32 and len(small) == 1000
    assert not paged.is_file_map(paged.new_map(paged.PAGED_BYTES - 1))


def test_a_growing_column_keeps_its_values_as_it_moves_into_a_file_map(monkeypatch):
    """A column crosses ``PAGED_BYTES`` while it grows (copied into a file map once), then
    widens to int64 when a value no longer fits int32: every value stays."""
    monkeypatch.setattr(paged, "PAGED_BYTES", 1 << 20)
    columns = GrowingColumns("ordinal:n4 ts")
    want_ordinal, want_ts = [], []
    for lo in range(0, 600_000, 10_000):
        ordinal = np.arange(lo, lo + 10_000, dtype=np.int64)
        if lo == 500_000:
            ordinal[7] = 1 << 40  # no longer fits int32
        ts = ordinal * 1_000 + 3
        columns.extend(ordinal, ts)
        paged.page_out()  # as the scan does every few hundred MB read
        want_ordinal.append(ordinal)
        want_ts.append(ts)
    table = columns.table()
    assert paged.in_file_map(table.ordinal) and table.ordinal.dtype == np.int64
    assert np.array_equal(table.ordinal, np.concatenate(want_ordinal))
    assert np.array_equal(table.ts, np.concatenate(want_ts))


def _tables(cols):
    return {name: {k: (v.dtype, v.tolist()) for k, v in getattr(cols, name).cols.items()}
            for name in ("gpu", "launches", "cpu_ops", "ranges", "steps", "syncs", "gpu_annotations")}


@pytest.fixture
def every_column_paged(monkeypatch):
    """Every column map file-backed (``PAGED_BYTES`` 1); counts the maps made."""
    made = []
    new_map = paged.new_map

    def counted(nbytes):
        m = new_map(nbytes)
        made.append(paged.is_file_map(m))
        return m

    monkeypatch.setattr(paged, "PAGED_BYTES", 1)
    monkeypatch.setattr(paged, "new_map", counted)
    monkeypatch.setattr(heap, "TRIM_EVERY", 1 << 12)  # paged out every 4 KB read, not 512 MB
    return made


@pytest.mark.parametrize("name", [SAMPLE, "nccl"])
def test_scan_gives_the_same_columns_from_file_maps(name, trace_path, every_column_paged, monkeypatch):
    path = str(trace_path(name))
    paged_tables = _tables(scan(path, cpu_ops=True))
    assert any(every_column_paged)
    monkeypatch.setattr(paged, "PAGED_BYTES", 1 << 62)
    assert _tables(scan(path, cpu_ops=True)) == paged_tables


@pytest.mark.parametrize("name", [SAMPLE, "negative_queue"])
def test_annotate_all_writes_the_same_bytes_with_its_columns_paged_out(name, trace_path, tmp_path, every_column_paged,
                                                                        monkeypatch):
    """Every column in a file map, paged out as the trace is read and after each analysis (and
    each piece of one), against every column on the heap: the same output."""
    path = str(trace_path(name))
    annotate(path, str(tmp_path / "paged.json"), all=True, options={"side_by_side": False})
    assert sum(every_column_paged) > 10
    monkeypatch.setattr(paged, "PAGED_BYTES", 1 << 62)
    annotate(path, str(tmp_path / "heap.json"), all=True, options={"side_by_side": False})
    assert raw_json(tmp_path / "paged.json") == raw_json(tmp_path / "heap.json")


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="blocks reserved with posix_fallocate")
def test_a_full_disk_for_the_columns_is_one_line_and_no_output(trace_path, tmp_path, every_column_paged,
                                                              monkeypatch, capsys):
    """A column map's blocks are reserved when it is made or grown, so a full temporary disk is
    an OSError said in one line (exit 1, no output left), not a SIGBUS at the first write."""
    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    out = tmp_path / "out.json"
    assert cli.main(["annotate", str(trace_path(SAMPLE)), "--all", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no space left on device" in err and "TMPDIR" in err
    assert not out.exists() and not list(tmp_path.iterdir())
