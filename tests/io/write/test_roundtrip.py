"""Round trip: events traceforge does not change come out byte for byte, in order."""

from __future__ import annotations

import gzip
import json

import orjson
import pytest
import zstandard

from tests.conftest import SAMPLE, TRACES, raw_json, run_cli
from traceforge.annotator.plugins.roofline import KERNEL_ARGS as ROOFLINE_ARGS
from traceforge.io.read.reader import TraceReader


def _event_bytes(path) -> tuple[bytes, list[bytes], bytes]:
    """(head, [event bytes], tail) of a trace, by traceforge's own precise walker."""
    reader = TraceReader(str(path))
    events = []
    for batch in reader.batches():
        events.extend(batch.raw[a:b] for a, b in batch.spans)
    return reader.head, events, reader.tail


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_no_flags_is_byte_identical(name, tmp_path, trace_path):
    out = tmp_path / "out.json"
    r = run_cli("annotate", str(trace_path(name)), "--copy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == raw_json(trace_path(name))


# Args that annotate --all --roofline adds to the trace's own events (launch delay, classify, counters, roofline).
ADDED_ARGS = {"launch_delay_us", "launch_cpu_us", "category", "stage", "counters", "pattern", *ROOFLINE_ARGS}


def _assert_same_events_modulo_added_args(events_in: list, events_out: list) -> int:
    """Input events come out in order, equal except for args we add; returns how many got args."""
    patched = 0
    for before, after in zip(events_in, events_out):
        if before == after:
            continue
        added = set(after.get("args", {})) - set(before.get("args") or {})
        assert added and added <= ADDED_ARGS, (before, after)
        after = {**after, "args": {k: v for k, v in after["args"].items() if k not in added}}
        if "args" not in before and not after["args"]:
            del after["args"]
        assert after == before
        patched += 1
    return patched


@pytest.mark.parametrize("name", [SAMPLE, *sorted(TRACES)])
def test_all_keeps_every_event_and_key(name, trace_path, annotated_all):
    out = annotated_all(name)  # annotate --all, .json.gz
    original = raw_json(trace_path(name))
    written = gzip.decompress(out.read_bytes())
    doc_in, doc_out = orjson.loads(original), orjson.loads(written)
    assert list(doc_out) == list(doc_in)
    assert {k: v for k, v in doc_out.items() if k != "traceEvents"} == {k: v for k, v in doc_in.items() if k != "traceEvents"}
    n = len(doc_in["traceEvents"])
    patched = _assert_same_events_modulo_added_args(doc_in["traceEvents"], doc_out["traceEvents"][:n])
    assert all(e.get("cat") in ("traceforge", "launch_delay") or e.get("ph") == "M" for e in doc_out["traceEvents"][n:])
    # Events we did not touch are the input's bytes, in order.
    _, bytes_in, _ = _event_bytes(trace_path(name))
    _, bytes_out, _ = _event_bytes(out)
    unchanged = [i for i in range(n) if doc_in["traceEvents"][i] == doc_out["traceEvents"][i]]
    assert len(unchanged) == n - patched
    assert all(bytes_in[i] == bytes_out[i] for i in unchanged)


def _assert_input_then_appended(original: bytes, written: bytes, path) -> None:
    """Every input byte up to the last event, then appended events, then the input's tail."""
    head, events, tail = _event_bytes(path)
    last_event_end = len(original) - len(tail)
    assert original[:last_event_end].endswith(events[-1])
    assert written[:last_event_end] == original[:last_event_end]
    assert written.endswith(tail)


def _relayout(path, style: str) -> bytes:
    head, events, tail = _event_bytes(path)
    if style == "one_line":
        flat = [e.replace(b"\n", b"") for e in events]
        return (head.replace(b"\n", b"") + b",".join(flat) + tail.replace(b"\n", b""))
    if style == "per_line":
        flat = [e.replace(b"\n", b"") for e in events]
        return head.rstrip() + b"\n" + b",\n".join(flat) + b"\n" + tail.lstrip()
    if style == "bare_array":
        return b"[\n" + b",\n".join(events) + b"\n]\n"
    raise ValueError(style)


LAYOUT_TRACES = (SAMPLE, "nccl", "ns_resolution", "amd", "cupti")


@pytest.mark.parametrize("style", ["one_line", "per_line", "bare_array"])
@pytest.mark.parametrize("name", LAYOUT_TRACES)
def test_other_layouts(name, style, tmp_path, trace_path):
    data = _relayout(trace_path(name), style)
    json.loads(data)  # the re-laid-out input is valid JSON
    src = tmp_path / "in.json"
    src.write_bytes(data)
    plain = tmp_path / "plain.json"
    assert run_cli("annotate", str(src), "--copy", "-o", str(plain)).returncode == 0
    assert plain.read_bytes() == data
    out = tmp_path / "out.json"
    r = run_cli("annotate", str(src), "--all", "--roofline", "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = out.read_bytes()
    doc_in, doc_out = orjson.loads(data), orjson.loads(written)
    events_in = doc_in if style == "bare_array" else doc_in["traceEvents"]
    events_out = doc_out if style == "bare_array" else doc_out["traceEvents"]
    patched = _assert_same_events_modulo_added_args(events_in, events_out[: len(events_in)])
    assert len(events_out) > len(events_in) or patched  # the CUPTI trace gets counter args only


@pytest.mark.slow
@pytest.mark.parametrize("name", (SAMPLE, "nccl", "triton"))
def test_zstd_and_stdin_stdout(name, tmp_path, trace_path):
    data = raw_json(trace_path(name))
    src = tmp_path / "in.json.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(data))
    out = tmp_path / "out.json.zst"
    assert run_cli("annotate", str(src), "--copy", "-o", str(out)).returncode == 0
    assert raw_json(out) == data
    r = run_cli("annotate", "-", "--copy", "-o", "-", stdin=data)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data
    # Tracks only: one pass straight from stdin to stdout.
    r = run_cli("annotate", "-", "--queue-length", "--memcpy-bw", "-o", "-", stdin=gzip.compress(data))
    assert r.returncode == 0, r.stderr
    _assert_input_then_appended(data, r.stdout, trace_path(name))
    json.loads(r.stdout)
    # Args on existing events: stdin is spooled and read twice.
    r = run_cli("annotate", "-", "--all", "-o", "-", stdin=data)
    assert r.returncode == 0, r.stderr
    events_in = json.loads(data)["traceEvents"]
    assert _assert_same_events_modulo_added_args(events_in, json.loads(r.stdout)["traceEvents"][: len(events_in)])


def test_default_output_name_and_refusal_to_overwrite(tmp_path, sample):
    src = tmp_path / "trace.json.gz"
    src.write_bytes(sample.path.read_bytes())
    r = run_cli("annotate", str(src), "--all")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "trace.annotated.json.gz").exists()
    before = src.read_bytes()
    r = run_cli("annotate", str(src), "--all", "-o", str(src))
    assert r.returncode == 1
    assert b"refusing to overwrite the input" in r.stderr
    assert src.read_bytes() == before


@pytest.mark.parametrize("name", [SAMPLE, "nccl"])
def test_python_api_matches_cli(name, tmp_path, trace_path):
    import traceforge

    api_out, cli_out = tmp_path / "api.json", tmp_path / "cli.json"
    result = traceforge.annotate(str(trace_path(name)), str(api_out), queue_length=True, memcpy_bw=True)
    assert run_cli("annotate", str(trace_path(name)), "--queue-length", "--memcpy-bw", "-o", str(cli_out)).returncode == 0
    assert api_out.read_bytes() == cli_out.read_bytes()
    assert result.appended == sum(1 for e in json.loads(api_out.read_bytes())["traceEvents"] if e.get("cat") == "traceforge")
    with pytest.raises(traceforge.UsageError):
        traceforge.annotate(str(trace_path(name)), str(tmp_path / "x.json"), queue_lenght=True)
