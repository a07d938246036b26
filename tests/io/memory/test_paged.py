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

from tests.conftest import SAMPLE, raw_json
from traceforge.annotator.run import annotate
from traceforge.cli import main as cli
from traceforge.columns.scan import scan
from traceforge.columns.table import GrowingColumns
from traceforge.io.memory import heap, paged

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or getattr(mmap, "MADV_DONTNEED", None) is None,
                                reason="resident memory read from /proc; madvise(MADV_DONTNEED) on Linux")


def _resident_file_mb() -> float:
    with open("/proc/self/status") as f:
        fields = {line.split(":")[0]: int(line.split()[1]) for line in f if line.startswith("Rss")}
    return (fields["RssFile"] + fields.get("RssShmem", 0)) / 1024


@linux_only
def test_page_out_gives_the_pages_back_and_keeps_the_data(monkeypatch):
    monkeypatch.setattr(paged, "_on_disk", lambda directory: True)  # whatever the temporary directory is
    monkeypatch.setattr(paged, "_full", [])
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


@linux_only
def test_a_growing_column_keeps_its_values_as_it_moves_into_a_file_map(monkeypatch):
    """A column crosses ``PAGED_BYTES`` while it grows (copied into a file map once), then
    widens to int64 when a value no longer fits int32: every value stays."""
    monkeypatch.setattr(paged, "PAGED_BYTES", 1 << 20)
    monkeypatch.setattr(paged, "_on_disk", lambda directory: True)
    monkeypatch.setattr(paged, "_full", [])
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
    """Every column map file-backed (``PAGED_BYTES`` 1, the temporary directory taken as a
    disk whatever it is); counts the maps made, True for each file map."""
    if not sys.platform.startswith("linux"):
        pytest.skip("columns are paged on Linux only")
    made = []
    new_map = paged.new_map

    def counted(nbytes):
        m = new_map(nbytes)
        made.append(paged.is_file_map(m))
        return m

    monkeypatch.setattr(paged, "PAGED_BYTES", 1)
    monkeypatch.setattr(paged, "_on_disk", lambda directory: True)
    monkeypatch.setattr(paged, "_full", [])
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
def test_no_room_for_the_columns_keeps_them_in_memory(trace_path, tmp_path, every_column_paged, monkeypatch,
                                                     capsys):
    """A column map's blocks are reserved as it is made or grown (a full disk would otherwise be
    a SIGBUS at the first write): where the temporary directory has no room, the columns stay
    in anonymous memory, with one note, and the output is what it would have been."""
    path = str(trace_path(SAMPLE))
    annotate(path, str(tmp_path / "heap.json"), all=True, options={"side_by_side": False})

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    every_column_paged.clear()
    capsys.readouterr()
    assert cli.main(["annotate", path, "--all", "-o", str(tmp_path / "full.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("traceforge: note: no room in ") == 1 and "set TMPDIR" in err, err
    assert every_column_paged and not any(every_column_paged)
    assert raw_json(tmp_path / "full.json") == raw_json(tmp_path / "heap.json")


@linux_only
def test_columns_are_paged_only_on_a_disk():
    """A RAM file system would keep the pages in memory (and reserving blocks there takes it at
    once): /dev/shm is tmpfs wherever it is mounted so."""
    if paged.file_system("/dev/shm") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    assert not paged._on_disk.__wrapped__("/dev/shm")
    assert paged.file_system("/dev/shm/x/y") == "tmpfs"
    assert paged._on_disk.__wrapped__("/") == (paged.file_system("/") not in ("tmpfs", "ramfs"))
