"""``annotate --repair``: the analyses and ``repair``'s rules in two reads of the input (no
annotated copy written first and parsed again), and its output ``repair`` of ``annotate``'s,
event for event, byte for byte.

The unit tier's input is the sample made to need every repair: overlapping kernels on a
stream (launch-delay arrows end on them, and they get args: the batches both edit are
scanned again), the launching thread's tid negative (the arrows start there), a flow end
without a start.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import orjson
import pytest

import traceforge
from tests.conftest import TRACES, raw_json, run_cli
from traceforge.io.read.reader import TraceReader
from traceforge.io.write.event_edits import EventEdits, edits_after, event_spans, rescanned
from traceforge.perfetto import check_trace
from traceforge.rewrite.repair import repair

OPTIONS = {"delay_cutoff": "0us"}  # an arrow to every kernel, so arrows end on the moved ones
CHOICES = [("queue_length",), ("launch_delay",), ("queue_length", "launch_delay", "classify"), ("all",)]


def _raw_events(path: Path | str) -> list[bytes]:
    """Each event's bytes, in file order."""
    out: list[bytes] = []
    for batch in TraceReader(str(path), on_read=lambda _: None).batches():
        raw = batch.raw
        out += [raw[a:b] for a, b in batch.spans.tolist()]
    return out


def _us(value: Decimal) -> float:
    return float(value.quantize(Decimal("0.001")))


@pytest.fixture(scope="module")
def broken(make_sample, tmp_path_factory) -> Path:
    """The sample with what repair fixes: every 5th kernel of stream 7 overlapped by the next
    one (start half way, end after it), the launching thread's tid negative, a dangling ``f``."""
    doc = orjson.loads(raw_json(make_sample().path))
    events = doc["traceEvents"]
    launches = [e for e in events if e.get("cat") == "cuda_runtime"]
    pid, tid = max({(e["pid"], e["tid"]) for e in launches}, key=lambda p: sum((e["pid"], e["tid"]) == p
                                                                               for e in launches))
    for e in events:
        if (e.get("pid"), e.get("tid")) == (pid, tid):
            e["tid"] = -tid
    kernels = [e for e in events if e.get("cat") == "kernel" and e["tid"] == 7]
    for k, after in list(zip(kernels, kernels[1:]))[::5]:
        start, dur = Decimal(str(k["ts"])), Decimal(str(k["dur"]))
        after["ts"] = _us(start + dur / 2)
        after["dur"] = _us(max(Decimal(str(after["dur"])), dur))
        for e in events:  # its flow end stays at its start
            if e.get("ph") == "f" and e.get("cat") == "ac2g" and e.get("id") == after["args"]["correlation"]:
                e["ts"] = after["ts"]
    events.append({"ph": "f", "id": 987654, "pid": 0, "tid": 7, "ts": kernels[3]["ts"], "cat": "ac2g",
                   "name": "ac2g", "bp": "e"})
    path = tmp_path_factory.mktemp("broken") / "broken.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def _both(src: Path, out_dir: Path, choice: tuple[str, ...]) -> tuple[Path, Path, traceforge.AnnotateResult]:
    """(repair of annotate's output, annotate --repair's output, its result)."""
    annotated, two, one = out_dir / "annotated.json", out_dir / "two.json", out_dir / "one.json"
    traceforge.annotate(str(src), str(annotated), analyses=list(choice) if choice != ("all",) else [],
                        options=OPTIONS, all=choice == ("all",))
    repair(str(annotated), str(two))
    result = traceforge.annotate(str(src), str(one), analyses=list(choice) if choice != ("all",) else [],
                                 options=OPTIONS, all=choice == ("all",), repair=True)
    return two, one, result


@pytest.mark.parametrize("choice", CHOICES, ids="+".join)
def test_annotate_repair_is_repair_of_annotate(broken, tmp_path, choice):
    two, one, result = _both(broken, tmp_path, choice)
    assert _raw_events(one) == _raw_events(two)
    fixed = result.repaired
    assert fixed is not None and fixed.moved_slices and fixed.remapped_events and fixed.dropped_flow_ends >= 1
    assert check_trace(str(one)).stats == {}  # traceforge's model of the importer: nothing lost
    assert [line for line in result.summary if line.startswith("repair: ")] == \
        [f"repair: {line}" for line in fixed.summary()]


def test_arrows_move_with_their_kernels_and_leave_their_negative_thread(broken, tmp_path):
    """What repair alone does to the input, and what the arrows annotate adds need besides."""
    alone = repair(str(broken), str(tmp_path / "alone.json"))
    _, one, result = _both(broken, tmp_path, ("launch_delay",))
    fixed = result.repaired
    assert fixed.moved_slices == alone.moved_slices
    assert fixed.dropped_flow_ends == alone.dropped_flow_ends >= 1
    # no arrow ends on a kernel Perfetto would spill (annotate draws none there: tests/perfetto/test_flow_binding.py)
    assert fixed.moved_flow_ends == alone.moved_flow_ends
    assert fixed.remapped_events > alone.remapped_events  # the arrows' starts on the launching thread
    events = orjson.loads(raw_json(one))["traceEvents"]
    assert not [e for e in events if isinstance(e.get("tid"), int) and e["tid"] < 0]


def test_unchanged_events_keep_their_bytes(broken, tmp_path):
    """Every input event repair neither drops nor moves nor renumbers is copied byte for byte;
    the others differ in pid/tid alone, or are flow ends dropped (as many as the summary says)."""
    out = tmp_path / "one.json"
    result = traceforge.annotate(str(broken), str(out), analyses=["queue_length"], repair=True)
    before, after = _raw_events(broken), _raw_events(out)
    j, same, dropped, changed = 0, 0, 0, 0

    def thread_free(e: dict) -> dict:
        return {k: v for k, v in e.items() if k not in ("pid", "tid")}

    for raw in before:
        if raw == after[j]:
            same, j = same + 1, j + 1
            continue
        e, written = orjson.loads(raw), orjson.loads(after[j])
        if thread_free(e) == thread_free(written):
            changed, j = changed + 1, j + 1
        else:
            assert e["ph"] in ("f", "t"), e
            dropped += 1
    fixed = result.repaired
    assert dropped == fixed.dropped_flow_ends
    assert changed == fixed.moved_slices + fixed.moved_flow_ends + fixed.remapped_events  # none both here
    assert same == len(before) - dropped - changed


@pytest.mark.slow
def test_cli_annotate_repair_reads_stdin(broken, tmp_path):
    out, two = tmp_path / "stdin.json", tmp_path / "two.json"
    r = run_cli("annotate", "-", "--queue-length", "--repair", "-o", str(out), stdin=broken.read_bytes())
    assert r.returncode == 0, r.stderr
    assert b"repair: moved" in r.stderr
    traceforge.annotate(str(broken), str(tmp_path / "a.json"), analyses=["queue_length"])
    repair(str(tmp_path / "a.json"), str(two))
    assert _raw_events(out) == _raw_events(two)


def test_edits_after_another_edit_find_events_where_it_left_them(broken):
    """A first edit that grows every event (as args do), then drops and field edits: the
    batch is scanned again, and the result is the edits applied to the grown events."""
    reader = TraceReader(str(broken), batch_bytes=4096)
    n = 0
    for batch in TraceReader(str(broken)).batches():
        n += batch.count
    keep = np.ones(n, bool)
    keep[3::7] = False
    ordinals = np.arange(1, n, 11)
    edits = EventEdits(keep=keep, ordinals=ordinals, fields=lambda k: {"tid": b"42"})

    def grow(batch):
        raw = batch.raw
        return b"".join(raw[a:b].replace(b'"ph"', b'"x":[1,"}{"], "ph"', 1) + raw[b:c] for (a, b), c in
                        zip(batch.spans.tolist(), [*batch.spans[1:, 0].tolist(), len(raw)]))

    edit = edits_after(grow, edits, reader.scanner)
    got = b"".join(bytes(edit(batch)) + b"," for batch in reader.batches())
    events = orjson.loads(b"[" + got.rstrip(b",") + b"]")
    original = orjson.loads(raw_json(broken))["traceEvents"]
    expected = [{"x": [1, "}{"], **{k: (42 if k == "tid" and i in set(ordinals.tolist()) else v)
                                     for k, v in e.items()}} for i, e in enumerate(original) if keep[i]]
    assert len(events) == len(expected)
    assert [orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in events] == \
        [orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in expected]


def test_rescanned_without_the_scanner_finds_events_by_their_brackets(broken):
    batch = next(TraceReader(str(broken), batch_bytes=2048).batches())
    data = batch.raw

    class Blind:  # a scanner that reads nothing: the fallback
        def scan(self, *args):
            return type("R", (), {"rows": np.zeros((0, 1), np.int64)})()

    again = rescanned(batch, data, Blind())
    assert again.spans.tolist() == batch.spans.tolist() == event_spans(data).tolist()
    assert again.events == batch.events
    assert event_spans(b'{"a":"}{[","b":[{}]} ,\n {"c":"\\"}"}').tolist() == [[0, 20], [24, 35]]


@pytest.mark.parametrize("name", ["h100_resnet50", "nccl", "cupti"])
def test_annotate_all_repair_is_repair_of_annotate_all_on_real_traces(name, tmp_path):
    src = TRACES[name]
    annotated, two, one = tmp_path / "a.json", tmp_path / "two.json", tmp_path / "one.json"
    assert run_cli("annotate", str(src), "--all", "-o", str(annotated)).returncode == 0
    assert run_cli("repair", str(annotated), "-o", str(two)).returncode == 0
    r = run_cli("annotate", str(src), "--all", "--repair", "-o", str(one))
    assert r.returncode == 0, r.stderr
    assert _raw_events(one) == _raw_events(two)
