"""The second read without parsing (args inserted at scanned offsets) writes exactly what
the parsing writer writes, whatever the layout and wherever the read chunks break."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from traceforge.annotator.registry import ANALYSES, with_defaults
from traceforge.annotator.schedule import run_analyses
from traceforge.columns.scan import scan
from traceforge.io import placed_patch
from traceforge.io.patch import ExtraArgs, patch_editor
from traceforge.io.reader import TraceReader
from traceforge.io.writer import write_trace

from .conftest import TRACES, raw_json


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


@pytest.mark.parametrize("chunk", [97, 1 << 16])
@pytest.mark.parametrize("variant", ["as_written", "trailing_comma", "key_present", "empty_args", "escaped_key", "no_args"])
def test_placed_copy_equals_parsing_copy(variant, chunk, tmp_path, monkeypatch):
    src = tmp_path / "in.json"
    src.write_bytes(_variants(raw_json(TRACES["trace_diff"]))[variant])
    reader = TraceReader(str(src))
    cols = scan(str(src), reader=reader, places=True)
    chosen = [ANALYSES["classify"], ANALYSES["launch_delay"]]
    injections = run_analyses(cols, chosen, with_defaults(chosen, {}))
    extra = ExtraArgs(injections.arg_patches, injections.arg_columns)
    places = cols.gpu_places()
    targets = places.rows_of(extra.ordinals)
    assert targets is not None and len(extra.ordinals) > 1000

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


def test_trailing_comma_copies_byte_for_byte(tmp_path):
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    data = _variants(raw_json(TRACES["trace_diff"]))["trailing_comma"]
    src.write_bytes(data)
    write_trace(TraceReader(str(src)), str(out))
    assert out.read_bytes() == data


def test_annotate_takes_the_placed_copy(tmp_path, monkeypatch):
    module = importlib.import_module("traceforge.annotator.run")
    used = []
    real = placed_patch.copy_placed
    monkeypatch.setattr(module, "copy_placed", lambda *a: used.append(1) or real(*a))
    module.annotate(str(TRACES["trace_diff"]), str(tmp_path / "out.json.gz"), classify=True)
    assert used
