"""``stats`` over several ranks: the ranks in rank order (not the order of the files), and the
cross-rank summary the other many-rank commands give."""

import json
import re

from tests.conftest import run_cli

RANK = b'"rank": 0,'


def _ranks(make_sample, tmp_path) -> list[str]:
    """Files given in the order ranks 2, 0, 1 (rank 1 made with twice the steps: a straggler)."""
    paths = []
    for name, rank, steps in (("a.json", 2, 5), ("b.json", 0, 5), ("c.json", 1, 10)):
        raw = make_sample(steps=steps).raw
        assert raw.count(RANK) == 1
        path = tmp_path / name
        path.write_bytes(raw.replace(RANK, b'"rank": %d,' % rank))
        paths.append(str(path))
    return paths


def test_ranks_in_rank_order_and_a_summary(make_sample, tmp_path):
    paths = _ranks(make_sample, tmp_path)
    r = run_cli("stats", *paths)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    heads = re.findall(r"^rank (\d+): (\S+)$", text, re.M)
    assert [int(rank) for rank, _ in heads] == [0, 1, 2]
    assert [p for _, p in heads] == [paths[1], paths[2], paths[0]]
    summary = text[text.index("== across 3 ranks =="):].splitlines()
    assert summary[1].split()[:4] == ["rank", "GPU", "ops", "GPU"]
    assert [int(line.split()[0]) for line in summary[2:5]] == [0, 1, 2]
    assert re.search(r"stragglers \(.*\): rank 1 GPU busy", " ".join(text.split()))


def test_tables_in_rank_order_in_json(make_sample, tmp_path):
    paths = _ranks(make_sample, tmp_path)
    r = run_cli("stats", *paths, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for name, rows in doc.items():
        ranks = [row["rank"] for row in rows]
        assert ranks == sorted(ranks), name
    assert b"== across 3 ranks ==" in r.stderr  # the summary beside, on stderr
