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


def test_ci_runs_the_readme_command_and_can_install_chromium():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "python3 -m pip install -q -e '.[test]' && python3 -m pytest -q"
    assert command in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == command  # exactly the README's command, last
    assert any("apt-get install" in line and "chromium" in line for line in ci)
