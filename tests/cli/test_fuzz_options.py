"""Option values through every command (issue 55 item 2): each option the parser declares
(found from it, so a new option is fuzzed too) given hostile values: empty, huge, negative,
not-a-number, infinite, regexes Python cannot compile, deeply nested rules files, text that is
not UTF-8 (as the command line gives it: bytes past 0x7f as surrogates), paths that are directories. Each run ends with a result or one error line, exit 1
(check's verdicts 1 and 2 aside), within seconds, never a traceback or an internal error.

Bounded in time: ``TRACEFORGE_FUZZ_OPTION_SECONDS`` (default 2) seconds per command, seeded by
``TRACEFORGE_FUZZ_SEED``. ``open`` (it serves until stopped) has tests/cli/commands/traces/test_open_refusals.py;
``--cluster`` and ``--trace-processor`` (they reach other programs) are left out, and so is the
value ``-`` (stdin or stdout: ``run_cli`` runs it in a process in the tree's root). Paths are
only under the test's own directory (an output option given ``/`` would write there)."""

from __future__ import annotations

import argparse
import os
import random
import signal
import time

import pytest

from tests.cli.test_fuzz_fields import Hang, _on_alarm
from tests.conftest import run_cli
from traceforge.cli.main import build_parser

SECONDS = float(os.environ.get("TRACEFORGE_FUZZ_OPTION_SECONDS", "2"))
SEED = int(os.environ.get("TRACEFORGE_FUZZ_SEED", "55"))
HANG_S = 30
SKIPPED = {"--cluster", "--trace-processor", "--help", "--quiet", "--debug"}
VALUES = ["", " ", "0", "-1", "1", "2", "9" * 23, "-" + "9" * 23, "1e400", "-1e400", "nan", "inf", "1.5", "0x10",
          "a{99999999999}", "(" * 10000, "[", "\udcff", "\udcffx", "x" * 100_000, "1:2", ":",
          "+0ms:+1ms", "1-" + "9" * 23, "5-1", "10us", "1e400us", "json", "csv", "text", "bogus", "default",
          "{deep}", "{notjson}", "{dir}", "{emptyjson}"]
BASE = {  # what each command needs besides the options fuzzed
    "diff": ["{in}", "{in}"],
    "trim": ["{in}", "--steps", "10-11"],
    "export": ["{in}", "--csv", "{dir}/csv"],
}


def _named(value: str, names: dict[str, str]) -> str:
    """A value, or the path a placeholder such as ``{deep}`` stands for."""
    return names.get(value[1:-1], value) if value.startswith("{") and value.endswith("}") else value


def _options(command: str) -> list[argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if a.option_strings and a.option_strings[-1] not in SKIPPED]


COMMANDS = sorted(set(next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices)
                  - {"open"})


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_fuzz_options(command, tmp_path, sample, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a value taken as a relative output path lands here
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "notjson").write_bytes(b"\xff\xfe{")
    (tmp_path / "empty.json").write_text("{}")
    names = {"in": str(sample.path), "deep": str(tmp_path / "deep.json"), "notjson": str(tmp_path / "notjson"),
             "dir": str(work), "emptyjson": str(tmp_path / "empty.json")}
    options = _options(command)
    rng = random.Random(f"{SEED}-{command}")
    failures, runs = [], 0
    saved = signal.signal(signal.SIGALRM, _on_alarm)
    deadline = time.monotonic() + SECONDS
    try:
        while time.monotonic() < deadline or runs == 0:
            args = [a.replace("{in}", names["in"]).replace("{dir}", names["dir"]) for a in BASE.get(command, ["{in}"])]
            for action in rng.sample(options, min(len(options), rng.randint(1, 2))):
                args.append(action.option_strings[-1])
                if action.nargs != 0:
                    count = rng.randint(1, 2) if action.nargs in ("+", "*") else 1
                    args += [_named(rng.choice(VALUES), names) for _ in range(count)]
            signal.alarm(HANG_S)
            try:
                r = run_cli(command, *args, "-q")
            except Hang:
                failures.append((args[:6], f"no answer in {HANG_S} s"))
                continue
            finally:
                signal.alarm(0)
                runs += 1
            err = r.stderr.decode("utf-8", "replace")
            ok = {0, 1, 2} if command == "check" else {0, 1}
            if "Traceback" in err or "internal error" in err or r.returncode not in ok:
                failures.append(([a[:40] for a in args], f"exit {r.returncode}: {err[-300:]}"))
            elif r.returncode == 1 and command != "check" and (
                    err.count("error: ") != 1 or not err.splitlines()[-1].startswith("traceforge")):
                failures.append(([a[:40] for a in args], "not one error line: " + err[-300:]))
    finally:
        signal.signal(signal.SIGALRM, saved)
    assert not failures, f"{len(failures)} of {runs} runs of {command}: {failures[:4]}"


def test_every_command_has_options_to_fuzz():
    assert len(COMMANDS) >= 14 and all(_options(c) for c in COMMANDS)
    names = {"deep": "/d", "notjson": "/n", "dir": "/w", "emptyjson": "/e"}
    assert [_named(v, names) for v in VALUES[-4:]] == ["/d", "/n", "/w", "/e"] and _named("a{9}", names) == "a{9}"
