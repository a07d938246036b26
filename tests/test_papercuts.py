"""Issue 39, items 1-9: what a new user trips over, each reproduced as the issue wrote it."""

from __future__ import annotations

from tests.conftest import run_cli

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
