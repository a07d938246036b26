"""The README's own virtual environment is ignored by git, and the README says how long the tests
take and how to run the fast tier."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_readme_venv_is_ignored():
    venv = re.search(r"python3 -m venv (\S+)", (ROOT / "README.md").read_text(encoding="utf-8")).group(1)
    done = subprocess.run(["git", "check-ignore", "-q", f"{venv}/bin/python"], cwd=ROOT)
    assert done.returncode == 0, f"{venv}/ (the README's venv) is not in .gitignore"


def test_readme_says_test_time_and_fast_tier():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"about\s+\d+\s+minutes\s+on\s+2\s+cores", readme)
    assert 'python3 -m pytest -q -m "not integration"' in readme
