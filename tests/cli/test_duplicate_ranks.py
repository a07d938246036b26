"""Every command that takes one trace per rank refuses two traces of one rank, with a one-line
error and exit code 1 (``io.rank_files.one_per_rank``, as ``stats`` always did). ``classify``
compares files in the order given (two runs' rank-0 traces side by side) and takes them."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

# each command that takes several traces (ranks.add_arguments, or stats' inputs)
COMMANDS = [["stats"], ["launch-stats"], ["patterns"], ["annotate", "--queue-length"]]


def _with_rank(sample, path, rank: int) -> str:
    """The sample with ``distributedInfo.rank`` set to ``rank``."""
    old = b'"distributedInfo": {"backend": "nccl", "rank": 0,'
    assert sample.raw.count(old) == 1
    path.write_bytes(sample.raw.replace(old, old.replace(b"0,", str(rank).encode() + b",")))
    return str(path)


@pytest.fixture
def same_rank(sample, tmp_path):
    """The sample twice, both rank 3 (distributedInfo), under names that say other ranks."""
    return [_with_rank(sample, tmp_path / "rank1.json", 3), _with_rank(sample, tmp_path / "rank2.json", 3)]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_two_traces_of_one_rank_are_refused(command, same_rank, tmp_path):
    extra = ["-o", str(tmp_path / "out")] if command[0] == "annotate" else []
    r = run_cli(*command, *same_rank, *extra)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{same_rank[1]}: rank 3 again (already {same_rank[0]}); give one trace per rank" in err
    assert r.stdout == b""
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_two_copies_by_file_name_are_refused(sample, tmp_path):
    paths = [tmp_path / "a_rank3.json", tmp_path / "b_rank-3.json"]
    for p in paths:
        p.write_bytes(sample.raw.replace(b'"distributedInfo"', b'"distributedInfo_"'))
    r = run_cli("launch-stats", *map(str, paths))
    assert r.returncode == 1 and f"{paths[1]}: rank 3 again (already {paths[0]})" in r.stderr.decode()


def test_distinct_ranks_still_run(sample, tmp_path):
    paths = [_with_rank(sample, tmp_path / "a.json", 0), _with_rank(sample, tmp_path / "b.json", 1)]
    r = run_cli("launch-stats", *paths)
    assert r.returncode == 0, r.stderr
    assert "== rank 1:" in r.stdout.decode()


def test_classify_compares_files_of_one_rank(same_rank):
    r = run_cli("classify", *same_rank, "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert {row.split(",")[0] for row in r.stdout.decode().splitlines()[1:]} == set(same_rank)
