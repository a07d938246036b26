"""The scanner's ``shape_keys`` (an op's args less its per-event members: the roofline's lookup key
for shapes already parsed): the C one and its fallback give the same keys, a key never joins two
ops whose shapes differ, and the scan's shape ids are the same on both backends."""

from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest

from tests.conftest import TRACES_DIR, raw_json
from traceforge import _native
from traceforge._native.fallback import scanner as F
from traceforge.analyses.roofline import work as W
from traceforge.columns.scan import SHAPE_ARGS, scan

C = pytest.importorskip("traceforge._native._scanner")

CASES = [
    b'{"ph": "X", "args": {"External id": 1026, "Sequence number": 1073, "Fwd thread id": 1, '
    b'"Record function id": 0, "Concrete Inputs": ["", "1"], "Input type": ["float", "Scalar"], '
    b'"Input Strides": [[1000, 1], []], "Input Dims": [[64, 1000], []], "Ev Idx": 1}}',
    b'{"ph": "X"}',  # no args: b""
    b'{"args": {}}',
    b'{ "args" : { "Python id" : 3 , "q" : -1.5e3 } }',
    b'{"args":{"x":"a\\"b}","y":[{"z":1}],"t":true}}',  # brackets and quotes inside strings
    b'{"args": 5}',  # not an object: None
    b'{"a\\u0072gs": {}}',  # an escaped key could be "args": None
    b'{"args": {}, "args": {"Input Dims": [[1]]}}',  # twice: None
    b'{"args": {"Input Dims": [[1]], "Ev Idx": 2}, "ts": 5}',
    b'{"args": {"Input Dims": [[1]]',  # cut short: None
    b'{"args": {"External id": "7", "Input Dims": "\\"External id\\": 1"}}',
]


def _keys(module, data: bytes, spans: np.ndarray, seen: dict | None = None) -> tuple[list, list]:
    """``module.shape_keys``' ids and, per span, its key where ``seen`` lacks it (else None)."""
    ids = np.zeros(len(spans), np.int32)
    missing = module.shape_keys(data, spans, {} if seen is None else seen, ids)
    keys = [None] * len(spans)
    for i, key in missing:
        keys[i] = key
    assert sorted(i for i, _ in missing) == [i for i, _ in missing] == np.flatnonzero(ids == -2).tolist()
    return ids.tolist(), keys


def _spans(events: list[bytes]) -> tuple[bytes, np.ndarray]:
    data, spans, at = [], [], 0
    for e in events:
        data.append(e)
        spans.append((at, at + len(e)))
        at += len(e) + 1
    return b",".join(data), np.array(spans, np.int64).reshape(-1, 2)


def test_c_and_fallback_agree_on_edge_cases_cut_at_every_byte():
    data, spans = _spans(CASES)
    keys = _keys(C, memoryview(data), spans)[1]
    assert keys == _keys(F, memoryview(data), spans)[1]
    assert keys[0] == (b'"Concrete Inputs":["", "1"],"Input type":["float", "Scalar"],'
                       b'"Input Strides":[[1000, 1], []],"Input Dims":[[64, 1000], []],')
    assert keys[1] == keys[2] == b"" and keys[3] == b'"q":-1.5e3,'
    assert keys[5] is keys[6] is keys[7] is keys[9] is None
    assert keys[8] == b'"Input Dims":[[1]],'
    assert keys[10] == b'"Input Dims":"\\"External id\\": 1",'
    for case in CASES:
        cuts = np.array([(0, n) for n in range(len(case) + 1)], np.int64)
        assert _keys(C, case, cuts) == _keys(F, case, cuts), case
    seen = {keys[0]: 7, b"": 3}
    for module in (C, F):
        ids, missing = _keys(module, memoryview(data), spans, seen)
        assert ids[:3] == [7, 3, 3] and ids[3] == -2 and missing[:4] == [None, None, None, keys[3]]
        for bad in (np.array([[0, 3]], np.int64), np.array([[0, len(data) + 1]], np.int64)):
            with pytest.raises(ValueError):
                _keys(module, b"{}", bad)
        with pytest.raises(ValueError):
            module.shape_keys(b"{}", np.array([[0, 2]], np.int64), {}, np.zeros(2, np.int32))


def test_random_args_agree_and_equal_keys_mean_equal_shapes():
    rng = random.Random(50)
    events = []
    for i in range(400):
        dims = [[rng.choice([1, 2, 64]) for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(1, 3))]
        args = {"External id": i, "Input Dims": dims, "Input type": [rng.choice(["float", "c10::Half"])] * len(dims),
                "Concrete Inputs": [rng.choice(["", "1", '"x"', "]}"]) for _ in dims], "Ev Idx": i}
        if rng.random() < 0.3:
            args["Sequence number"] = i
        keys = list(args)
        rng.shuffle(keys)
        text = json.dumps({"ph": "X", "name": "aten::mm", "args": {k: args[k] for k in keys}},
                          separators=rng.choice([(",", ":"), (", ", ": ")]))
        events.append(text.encode())
    data, spans = _spans(events)
    keys = _keys(C, data, spans)[1]
    assert keys == _keys(F, data, spans)[1] and None not in keys
    shapes: dict[bytes, tuple] = {}
    for key, e in zip(keys, events):
        args = orjson.loads(e)["args"]
        assert shapes.setdefault(key, tuple(orjson.dumps(args.get(k)) for k in SHAPE_ARGS)) == \
            tuple(orjson.dumps(args.get(k)) for k in SHAPE_ARGS)
    assert len(shapes) < len(events)  # repeats were found


@pytest.mark.integration
@pytest.mark.parametrize("name", ["h100/resnet50_train.json.gz", "h100/ddp_nccl_1rank.json.gz"])
def test_real_ops_equal_keys_mean_equal_shapes(name):
    path = TRACES_DIR / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    ops = [e for e in orjson.loads(raw_json(path))["traceEvents"] if e.get("cat") == "cpu_op"]
    events = [json.dumps(e).encode() for e in ops]
    data, spans = _spans(events)
    keys = _keys(C, data, spans)[1]
    assert None not in keys
    seen: dict[bytes, tuple] = {}
    for key, e in zip(keys, ops):
        shape = tuple(orjson.dumps(e.get("args", {}).get(k)) for k in SHAPE_ARGS)
        assert seen.setdefault(key, shape) == shape
    assert len(seen) < len(ops) / 2


def test_scan_shape_ids_are_the_same_on_both_backends(tmp_path):
    events = []
    for step in range(3):
        for j, dims in enumerate(([[2, 3], [3, 4]], [[2, 3], [3, 5]], [[8]])):
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm" if j < 2 else "aten::relu", "pid": 1,
                           "tid": 1, "ts": 100 * step + 10 * j, "dur": 5,
                           "args": {"External id": 3 * step + j, "Input Dims": dims,
                                    "Input type": ["float"] * len(dims), "Ev Idx": j}})
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 999, "dur": 1,
                   "args": {"Input Dims": [[1, 1], [1, 1]], "Input type": ["float", "float"], "args": 1}})
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    got = []
    for backend in ("c", "python"):
        with _native.using(backend, ["scanner"]):
            cols = scan(str(path), op_shapes=W.reads_shapes)
            got.append((cols.cpu_ops.shape.tolist(), cols.op_shapes))
    assert got[0] == got[1]
    ids, shapes = got[0]
    assert ids[:3] == ids[3:6] == ids[6:9] and len(set(ids[:3])) == 3
    assert shapes[ids[9]][0] == [[1, 1], [1, 1]]
