"""The second read without parsing (args inserted at scanned offsets) writes exactly what
the parsing writer writes, whatever the layout and wherever the read chunks break."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from tests.conftest import SAMPLE, raw_json
from traceforge.annotator.registry import ANALYSES, with_defaults
from traceforge.annotator.schedule import run_analyses
from traceforge.columns.scan import scan
from traceforge.io.read.reader import TraceReader
from traceforge.io.write import placed_patch
from traceforge.io.write.patch import ExtraArgs, patch_editor
from traceforge.io.write.writer import write_trace


def _variants(data: bytes) -> dict[str, bytes]:
    """The trace as written, with a trailing comma after the last event, and with an
    args object that already holds a key we add (the parsed event must decide there, as
    where the scanner cannot place the args: an escaped key, no args object)."""
    end = data.rindex(b"}", 0, data.rindex(b"]")) + 1
    first_kernel = data.index(b'"cat": "kernel"')
    args = data.index(b'"args": {', first_kernel) + len(b'"args": {')
    return {
        "as_written": data,
        "trailing_comma": data[:end] + b"," + data[end:],
        "key_present": data[:args] + b'"category": "mine", ' + data[args:],
        "empty_args": data[:args] + b" }, \"was\": {" + data[args:],
        "escaped_key": data[:args] + b'"\\u0063ategory": "mine", ' + data[args:],
        "no_args": data[:args - 5] + b"z" + data[args - 4:],  # "argz"
    }


def _rechunked(size: int):
    real = placed_patch.iter_decompressed

    def chunks(path, **kwargs):
        data = b"".join(real(path, **kwargs))
        for i in range(0, len(data), size):
            yield data[i:i + size]
    return chunks


VARIANTS = ("as_written", "trailing_comma", "key_present", "empty_args", "escaped_key", "no_args")
# Chunks of 97 bytes cut every event several times, inside keys, args and numbers, and put
# targets across 3+ chunks; 331 moves the cuts; 64 KiB is what the reader reads. The sample
# (300 KB) takes every size at little cost; the real trace (33 MB) takes 64 KiB, and 4093
# bytes once (97-byte chunks over it would take long, its cuts no different in kind).
PLACED_CASES = ([(v, SAMPLE, chunk) for v in VARIANTS for chunk in (97, 331, 1 << 16)]
                + [(v, "trace_diff", 1 << 16) for v in VARIANTS] + [("as_written", "trace_diff", 4093)])


@pytest.mark.parametrize("variant, name, chunk", PLACED_CASES)
def test_placed_copy_equals_parsing_copy(variant, name, chunk, tmp_path, monkeypatch, trace_path):
    src = tmp_path / "in.json"
    src.write_bytes(_variants(raw_json(trace_path(name)))[variant])
    reader = TraceReader(str(src))
    cols = scan(str(src), reader=reader, places=True)
    chosen = [ANALYSES["classify"], ANALYSES["launch_delay"]]
    injections = run_analyses(cols, chosen, with_defaults(chosen, {}))
    extra = ExtraArgs(injections.arg_patches, injections.args())
    places = cols.gpu_places()
    targets = places.rows_of(extra.ordinals)
    assert targets is not None and len(extra.ordinals) > (150 if name == SAMPLE else 1000)

    parsed_out, placed_out = tmp_path / "parsed.json", tmp_path / "placed.json"
    write_trace(TraceReader(str(src)), str(parsed_out), injections.blocks(), edit=patch_editor(extra))
    monkeypatch.setattr(placed_patch, "iter_decompressed", _rechunked(chunk))
    placed_patch.copy_placed(reader, str(placed_out), places, targets, extra, injections.blocks())
    assert placed_out.read_bytes() == parsed_out.read_bytes()
    if variant in ("key_present", "escaped_key"):
        assert b'"mine"' not in placed_out.read_bytes()  # replaced by the merged args


def test_rows_of_the_events_that_get_args():
    places = placed_patch.EventPlaces(ordinals=np.array([3, 8, 12, 20], np.int32), offsets=np.array([0, 50, -1, 90]),
                                      lengths=np.full(4, 10), args_at=np.full(4, 5), args_empty=np.zeros(4, bool))
    assert places.rows_of(np.array([3, 8])).tolist() == [0, 1]
    assert places.rows_of(np.array([8, 20])).tolist() == [1, 3]
    assert places.rows_of(np.array([3, 8, 12, 20])) is None  # 12's place is not known
    assert places.rows_of(np.array([8, 9])) is None and places.rows_of(np.array([21])) is None  # not GPU ops seen
    places.offsets[2] = 70
    assert places.rows_of(np.array([3, 8, 12, 20], np.int64)).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("name", [SAMPLE, "trace_diff"])
def test_trailing_comma_copies_byte_for_byte(name, tmp_path, trace_path):
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    data = _variants(raw_json(trace_path(name)))["trailing_comma"]
    src.write_bytes(data)
    write_trace(TraceReader(str(src)), str(out))
    assert out.read_bytes() == data


@pytest.mark.parametrize("name", [SAMPLE, "trace_diff"])
def test_annotate_takes_the_placed_copy(name, tmp_path, monkeypatch, trace_path):
    module = importlib.import_module("traceforge.annotator.run")
    used = []
    real = placed_patch.copy_placed
    monkeypatch.setattr(module, "copy_placed", lambda *a: used.append(1) or real(*a))
    module.annotate(str(trace_path(name)), str(tmp_path / "out.json.gz"), classify=True)
    assert used
