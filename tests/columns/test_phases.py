"""The row collectors' one phase vocabulary (``columns.phases``)."""

from __future__ import annotations

import numpy as np

from traceforge.columns import phases
from traceforge.io.read import rows as R


def test_phase_codes():
    assert [phases.phase_code(ph) for ph in ("X", "M", "s", "t", "f", "B", "E", "i", "C", None)] == [
        phases.SLICE, phases.METADATA, phases.FLOW, phases.FLOW, phases.FLOW] + [phases.OTHER] * 5


def test_the_table_follows_the_scanners_strings():
    scanner = R.RowScanner()
    text = b'{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1},{"ph":"f","id":"x","ts":3,"pid":1,"tid":1},' \
           b'{"ph":"M","ts":0,"pid":1,"tid":1,"name":"thread_name","args":{"name":"a"}}]'
    rows = scanner.scan(text, len(text)).rows
    table = phases.phase_table(scanner, lambda ph: (ph == "f",))
    code, is_f = table(rows[:, R.PH])
    assert code.tolist() == [phases.SLICE, phases.FLOW, phases.METADATA] and is_f.tolist() == [0, 1, 0]
    # the flow's string id is not an integer: a parser reads it
    assert phases.needs_parser(rows[:, R.FLAGS], code).tolist() == [False, True, False]
    assert phases.earliest_ts(rows[:, R.TS], np.ones(3, bool), code) == 1000
