"""``patterns --op`` finding fewer patterns than ``--top-k`` asked for says how many instances
``--min-len`` left out and how to count them."""

import pytest

from tests.conftest import TRACES, run_cli


def test_fewer_patterns_than_asked_says_why(sample):
    r = run_cli("patterns", str(sample.path), "--op-regex", "aten::(conv2d|linear)", "--min-len", "2", "--top-k", "5")
    assert r.returncode == 0, r.stderr
    err = " ".join(r.stderr.decode().split())
    assert "1 of the 5 patterns asked for: 10 instances launched fewer than 2 GPU ops" in err
    assert "--min-len 1 counts them" in err
    more = run_cli("patterns", str(sample.path), "--op-regex", "aten::(conv2d|linear)", "--min-len", "1", "--top-k", "5")
    assert more.returncode == 0 and b"asked for" not in more.stderr
    assert more.stdout.count(b"\n  P") >= 2  # the linear instances are patterns now


def test_no_pattern_offers_min_len_1(sample):
    r = run_cli("patterns", str(sample.path), "--op", "aten::linear")
    err = " ".join(r.stderr.decode().split())
    assert r.returncode == 0 and "try --min-len 1 (now 3, default 3: 10 instances launched fewer GPU ops)" in err


@pytest.mark.integration
def test_resnet_conv2d_top_5():
    r = run_cli("patterns", str(TRACES["h100_resnet50"]), "--op", "aten::conv2d", "--top-k", "5")
    err = " ".join(r.stderr.decode().split())
    assert "1 of the 5 patterns asked for: 208 instances launched fewer than 3 GPU ops" in err
    r = run_cli("patterns", str(TRACES["h100_resnet50"]), "--op", "aten::conv2d", "--top-k", "5", "--min-len", "1")
    assert r.stdout.count(b"\n  P") == 5
