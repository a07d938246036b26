"""Issue 39, items 1-9: what a new user trips over, each reproduced as the issue wrote it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import zstandard

from tests.conftest import raw_json, run_cli

# -- 1. annotate with no analysis flag, or with only an analysis option, is not a silent copy ------


def test_annotate_without_an_analysis_refuses_with_the_flags(sample, tmp_path):
    out = tmp_path / "out.json.gz"
    r = run_cli("annotate", str(sample.path), "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1 and not out.exists(), err
    assert "no analysis chosen" in err and "--queue-length" in err and "--all" in err and "--copy" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_annotate_with_only_an_option_names_its_flag(sample, tmp_path):
    for option, value, owner in (("--op", "aten::addmm", "--patterns"), ("--rules", "hta", "--classify"),
                                  ("--ncu", "x.csv", "--counters")):
        out = tmp_path / "out.json.gz"
        r = run_cli("annotate", str(sample.path), option, value, "-o", str(out))
        err = r.stderr.decode()
        assert r.returncode == 1 and not out.exists(), err
        assert f"{option} is an option of {owner}" in err


def test_annotate_copy_is_the_explicit_plain_copy(sample, tmp_path):
    out = tmp_path / "out.json"
    r = run_cli("annotate", str(sample.path), "--copy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == sample.raw


# -- 2. traceforge's outputs are never read back as ranks; a directory's go to one directory -------


def _rank_dir(sample, directory: Path) -> Path:
    """Two ranks of the sample (``distributedInfo.rank`` 0 and 1), gzipped, in ``directory``."""
    directory.mkdir()
    old = b'"distributedInfo": {"backend": "nccl", "rank": 0,'
    for rank in (0, 1):
        raw = sample.raw.replace(old, old.replace(b"0,", f"{rank},".encode()))
        (directory / f"rank{rank}.json.gz").write_bytes(gzip.compress(raw, 1))
    return directory


def test_annotated_outputs_are_not_read_back_as_ranks(sample, tmp_path):
    traces = _rank_dir(sample, tmp_path / "job")
    r = run_cli("annotate", str(traces), "--queue-length")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (traces / "annotated").iterdir()) == [
        "rank0.annotated.json.gz", "rank1.annotated.json.gz"]
    assert f"writing the annotated traces to {traces / 'annotated'}/" in r.stderr.decode()
    # the old place: outputs beside the inputs, in the directory itself
    for rank in (0, 1):
        assert run_cli("annotate", str(traces / f"rank{rank}.json.gz"), "--queue-length").returncode == 0
    assert (traces / "rank1.annotated.json.gz").is_file()
    for command in (["stats", "--format", "json"], ["launch-stats", "--format", "json"]):
        r = run_cli(*command, str(traces))
        err = r.stderr.decode()
        assert r.returncode == 0, err
        assert "skipped 2 trace(s) traceforge wrote (rank0.annotated.json.gz, rank1.annotated.json.gz)" in err
        assert "again" not in err
    r = run_cli("launch-stats", "--format", "json", str(traces))
    assert [rank["rank"] for rank in json.loads(r.stdout)["ranks"]] == [0, 1]
    r = run_cli("classify", str(traces))
    assert r.returncode == 0 and b".annotated.json" not in r.stdout, r.stderr
    # named explicitly, an output is read as a trace
    r = run_cli("info", str(traces / "rank0.annotated.json.gz"))
    assert r.returncode == 0, r.stderr


# -- 7. the output's codec follows the input's; -o is optional everywhere; -o x.txt says what it is --


def test_zst_in_gives_zst_out_and_repair_trim_need_no_o(sample, tmp_path):
    src = tmp_path / "trace.json.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(sample.raw))
    for command, kind in ((["annotate", "--queue-length"], "annotated"), (["repair"], "repaired"),
                          (["trim", "--steps", "11-12"], "trimmed")):
        r = run_cli(command[0], str(src), *command[1:])
        assert r.returncode == 0, r.stderr
        out = tmp_path / f"trace.{kind}.json.zst"
        assert out.read_bytes()[:4] == b"\x28\xb5\x2f\xfd", kind  # zstd's magic
        assert json.loads(raw_json(out))["traceEvents"]
    plain = tmp_path / "plain.json"
    plain.write_bytes(sample.raw)
    assert run_cli("repair", str(plain)).returncode == 0
    assert (tmp_path / "plain.repaired.json").read_bytes()[:1] == b"{"


def test_an_output_suffix_without_a_codec_says_it_is_plain_json(sample, tmp_path):
    for command in (["annotate", "--queue-length"], ["repair"], ["trim", "--steps", "11-12"], ["patterns"]):
        out = tmp_path / f"{command[0]}.txt"
        r = run_cli(command[0], str(sample.path), *command[1:], "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert f"{out}: written as plain (uncompressed) JSON" in r.stderr.decode()
        json.loads(out.read_bytes())
    r = run_cli("repair", str(sample.path), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0 and b"plain (uncompressed)" not in r.stderr
