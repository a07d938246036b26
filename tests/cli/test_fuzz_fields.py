"""Structured mutations through every command (issue 49): a small Kineto trace whose fields
are swapped for values of every wrong type (lists, objects, strings, huge and malformed
numbers, deep nesting, text that is not UTF-8), whose events are replaced by non-objects, and
whose compressed streams are cut short or concatenated. Whatever the input, a command ends
with its result or one error line (exit 1; check's verdicts 1 and 2), within seconds, never
a traceback or an internal error (exit 3), and leaves no output behind when it fails.

Bounded in time: each command fuzzes for ``TRACEFORGE_FUZZ_SECONDS`` (default 3) seconds,
``TRACEFORGE_FUZZ_SEED`` seeds it. Run under an interpreter with pyarrow too (pandas then
keeps strings in Arrow)."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import time

import pytest
import zstandard

from tests.conftest import run_cli

SECONDS = float(os.environ.get("TRACEFORGE_FUZZ_SECONDS", "3"))
SEED = int(os.environ.get("TRACEFORGE_FUZZ_SEED", "49"))
HANG_S = 30  # one run past this is a hang

# raw JSON texts put in place of a value
HOSTILE = [b"[]", b"{}", b"[1, 2]", b'{"a": [1]}', b'"x"', b'""', b"null", b"true", b"false", b"-1", b"0", b"1.5",
           b"-0.0", b"9" * 25, b"9" * 5000, b"-" + b"9" * 5000, b"1e400", b"-1e400", b"1e-400", b"9223372036854775807",
           b"-9223372036854775808", b"18446744073709551616", b'"\\ud800"', b'"\\udc00x"', b'"\xff\xfe"', b'"1e3"',
           b'"12.5"', b"[" * 2000 + b"]" * 2000, b'{"a":' * 300 + b"1" + b"}" * 300, b'"' + b"A" * 100_000 + b'"',
           b'"ProfilerStep#1"', b'"kernel"', b'"X"', b'"M"', b'"s"', b'"f"', b'"B"', b'"E"', b'"i"', b'"C"']
FIELDS = ["ph", "ts", "dur", "pid", "tid", "name", "cat", "args", "id", "bp", "s"]
ARGS = ["stream", "device", "correlation", "External id", "name", "labels", "Sequence number", "bytes", "Bytes",
        "memory bandwidth (GB/s)", "grid", "block", "Total Allocated", "Device Id", "rank"]
TOP = ["distributedInfo", "deviceProperties", "schemaVersion", "baseTimeNanoseconds", "traceName", "displayTimeUnit"]


def _base(raw: bytes) -> dict:
    trace = json.loads(raw)
    events = trace["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")][:2]
    kinds = [e for e in events if e.get("cat") in ("kernel", "ac2g", "gpu_memcpy", "cuda_runtime", "cpu_op")][:60]
    trace["traceEvents"] = [e for e in events if e.get("ph") == "M"][:20] + steps + kinds
    return trace


_MARK = "\u0001hostile{}\u0001"


def mutate(trace: dict, rng: random.Random) -> bytes:
    """One to three structured edits of a copy of ``trace``, as JSON text."""
    doc = json.loads(json.dumps(trace))
    events = doc["traceEvents"]
    raws: list[bytes] = []

    def hostile() -> str:
        raws.append(rng.choice(HOSTILE))
        return _MARK.format(len(raws) - 1)

    for _ in range(rng.randint(1, 3)):
        how = rng.random()
        e = rng.choice(events) if events else {}
        if how < 0.45 and isinstance(e, dict):
            e[rng.choice(FIELDS + list(e))] = hostile()
        elif how < 0.7 and isinstance(e, dict):
            args = e.setdefault("args", {})
            if isinstance(args, dict):
                args[rng.choice(ARGS + list(args))] = hostile()
        elif how < 0.8 and events:
            events[rng.randrange(len(events))] = hostile()
        elif how < 0.9:
            key = rng.choice(TOP)
            if key == "distributedInfo" and rng.random() < 0.5:
                doc[key] = {"rank": hostile(), "world_size": hostile()}
            else:
                doc[key] = hostile()
        elif events:  # an event twice, or the events reordered
            if rng.random() < 0.5:
                events.insert(rng.randrange(len(events)), json.loads(json.dumps(rng.choice(events))))
            else:
                rng.shuffle(events)
    text = json.dumps(doc, indent=None).encode()
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(_MARK.format(i)).encode(), raw)
    return text


def encode(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Plain, gzip or zstd; sometimes cut short, or two streams (frames) concatenated."""
    codec = rng.choice(("json", "json.gz", "json.zst"))
    if codec == "json":
        return data, codec
    cut = rng.randrange(len(data) + 1)
    comp = (lambda b: gzip.compress(b, 1)) if codec == "json.gz" else zstandard.ZstdCompressor(level=1).compress
    how = rng.random()
    if how < 0.2:
        out = comp(data[:cut]) + comp(data[cut:])  # two streams, one document
    elif how < 0.3:
        out = comp(data) + comp(data)  # two documents
    else:
        out = comp(data)
    if rng.random() < 0.15:
        out = out[:rng.randrange(len(out))]
    return out, codec


COMMANDS = {
    "info": ("info", "{in}"),
    "stats": ("stats", "{in}"),
    "stats_two": ("stats", "{in}", "{in2}"),
    "check": ("check", "{in}"),
    "annotate": ("annotate", "{in}", "--all", "-o", "{out}"),
    "annotate_repair": ("annotate", "{in}", "--all", "--repair", "-o", "{out}"),
    "repair": ("repair", "{in}", "-o", "{out}"),
    "trim": ("trim", "{in}", "--window", "+0ms:+3ms", "-o", "{out}"),
    "launch-stats": ("launch-stats", "{in}"),
    "patterns": ("patterns", "{in}"),
    "classify": ("classify", "{in}", "--kernels", "--format", "json"),
    "counters": ("counters", "{in}"),
    "export": ("export", "{in}", "--csv", "{outdir}"),
    "diff": ("diff", "{in}", "{in2}", "--format", "csv", "--table", "cpu_ops"),
    "critical-path": ("critical-path", "{in}"),
    "report": ("report", "{in}", "-o", "{out_html}"),
}
OK_CODES = {"check": {0, 1, 2}}


class Hang(BaseException):
    """A run past ``HANG_S`` (a BaseException: the CLI's handlers do not catch it)."""


def _on_alarm(signum, frame):
    raise Hang()


def _failure(name: str, r, out_dir) -> str | None:
    err = r.stderr.decode("utf-8", "replace")
    if "Traceback" in err or "internal error" in err or r.returncode not in OK_CODES.get(name, {0, 1}):
        return f"exit {r.returncode}: {err[-400:]}"
    if r.returncode == 1 and name != "check" and (
            err.count("traceforge: error: ") != 1 or not err.splitlines()[-1].startswith("traceforge: error: ")):
        return "not one error line: " + err[-400:]
    left = sorted(p.name for p in out_dir.iterdir())
    if r.returncode != 0 and left:
        return f"left behind after exit {r.returncode}: {left}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_fuzz_command(name, tmp_path, sample):
    rng = random.Random(f"{SEED}-{name}")
    base = _base(sample.raw)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    failures, runs = [], 0
    saved = signal.signal(signal.SIGALRM, _on_alarm)
    deadline = time.monotonic() + SECONDS
    try:
        while time.monotonic() < deadline or runs == 0:
            data, codec = encode(mutate(base, rng), rng)
            src, src2 = tmp_path / f"in.{codec}", tmp_path / f"in2.{codec}"
            src.write_bytes(data)
            src2.write_bytes(data.replace(b'"rank": 0', b'"rank": 1'))
            fields = {"in": src, "in2": src2, "out": out_dir / "o.json", "out_html": out_dir / "r.html",
                      "outdir": out_dir / "csv"}
            args = [a.format(**fields) for a in COMMANDS[name]]
            signal.alarm(HANG_S)
            try:
                r = run_cli(*args, "-q")
            except Hang:
                failures.append((runs, codec, f"no answer in {HANG_S} s", data[:300]))
                continue
            finally:
                signal.alarm(0)
                runs += 1
            why = _failure(name, r, out_dir)
            if why:
                failures.append((runs, codec, why, data[:300]))
            for p in sorted(out_dir.rglob("*"), reverse=True):
                p.rmdir() if p.is_dir() else p.unlink()
    finally:
        signal.signal(signal.SIGALRM, saved)
    assert not failures, f"{len(failures)} of {runs} runs of {name}: {failures[:3]}"


@pytest.mark.parametrize("seed", range(3))
def test_mutations_are_seeded_and_change_the_trace(seed, sample):
    base = _base(sample.raw)
    a, b = mutate(base, random.Random(seed)), mutate(base, random.Random(seed))
    assert a == b and a != json.dumps(base).encode()
