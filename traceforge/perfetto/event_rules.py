"""The rules of one parsed event: what ``check`` decides from an event alone (the ones
the scanner's row cannot show: scopes, counter values and ids, async ids, bind_ids)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from .importer import coerce_id, counter_number, flow_id
from .report import Findings

# v2 flow modes (``bind_id`` on a slice).
V2_BEGIN, V2_STEP, V2_END = range(3)
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
CONTROL_ESCAPE = re.compile(rb"\\u00[01][0-9a-fA-F]|\\[bfnrt]")
_CONTROL = re.compile(r"[\x00-\x1f]")


def complete_event(e: dict, ordinal: int, dur: tuple[int, int] | None, findings: Findings) -> bool:
    """Check an ``X`` (``dur``: its times, None if absent); True when it becomes a slice."""
    name, ts, cat = e.get("name"), str(e.get("ts")), e.get("cat")
    if type(cat) is str and cat.lower() in GPU_CATS and (dur is None or dur[1] <= 0):
        findings.add("gpu_zero_or_negative_duration", ordinal, name, ts, f"dur {e['dur']}" if dur else "no dur")
    if dur is None:
        findings.add("json_parser_failure", ordinal, name, ts, "X without dur")
        return False
    if dur[0] < 0:
        findings.add("slice_negative_duration", ordinal, name, ts, f"dur {e['dur']}")
        return False
    return True


def thread_instant(e: dict, ordinal: int, findings: Findings) -> bool:
    """Check an instant; True when it becomes a zero-length slice on its thread."""
    scope = e.get("s")
    if scope == "g":
        return False
    if scope == "p":
        if coerce_id(e.get("pid")) is None:
            findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "process instant without pid")
        return False
    if scope is None or scope == "t":
        if coerce_id(e.get("tid")) is None:
            findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "thread instant without tid")
            return False
        return True
    findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), f"instant scope {scope!r}")
    return False


def async_event(e: dict, ordinal: int, findings: Findings) -> None:
    """Async events need a pid and an ``id`` or ``id2.local``/``id2.global``."""
    id2 = e.get("id2")
    has_id = _is_id(e.get("id")) or (type(id2) is dict and (_is_id(id2.get("local")) or _is_id(id2.get("global"))))
    if coerce_id(e.get("pid")) is None or not has_id:
        findings.add("json_parser_failure", ordinal, e.get("name"), str(e.get("ts")), "async event without pid or id")


def _is_id(value: object) -> bool:
    return type(value) in (int, float) or (type(value) is str and value != "")


def v2_flow(e: dict, ordinal: int, findings: Findings) -> tuple[int, int] | None:
    """A v2 flow (``bind_id`` on a slice): (id, mode), or None where Perfetto ignores it."""
    fid = flow_id(e["bind_id"])
    if fid is None:
        findings.add("flow_invalid_id", ordinal, e.get("name"), str(e.get("ts")), f"bind_id {e['bind_id']!r}")
        return None
    flow_in, flow_out = bool(e.get("flow_in")), bool(e.get("flow_out"))
    if not (flow_in or flow_out):
        findings.add("flow_without_direction", ordinal, e.get("name"), str(e.get("ts")))
        return None
    return fid, V2_STEP if flow_in and flow_out else V2_BEGIN if flow_out else V2_END


class Counters:
    """Counter rules: args must be numbers; one key per event; ids must be strings."""

    def __init__(self) -> None:
        self.ids: dict[tuple, Counter] = defaultdict(Counter)  # (pid, name) -> numeric id or None -> events
        self.first: dict[tuple, list] = defaultdict(list)  # (pid, name) -> first events with a numeric id
        self.first_seen: dict[tuple, int] = {}  # (pid, name) -> its first event (series are reported in that order)

    def event(self, e: dict, ordinal: int, findings: Findings) -> None:
        name, ts, args = e.get("name"), str(e.get("ts")), e.get("args")
        if type(args) is not dict:
            findings.add("json_parser_failure", ordinal, name, ts, "counter args not an object")
            return
        numeric = 0
        for key, value in args.items():
            if counter_number(value):
                numeric += 1
            else:
                findings.add("json_parser_failure", ordinal, name, ts, f"counter value {key!r}: {value!r}")
        if numeric > 1:
            findings.add("counter_multiple_keys", ordinal, name, ts, f"{numeric} keys")
        cid = e.get("id")
        if type(cid) is str and cid:
            return
        group = (coerce_id(e.get("pid")) or 0, name if type(name) is str else "")
        numeric_id = cid if type(cid) in (int, float) else None
        self.first_seen.setdefault(group, ordinal)
        self.ids[group][numeric_id] += 1
        if numeric_id is not None and len(self.first[group]) < findings.max_examples:
            self.first[group].append((ordinal, name, ts, f"id {cid!r}"))

    def plain(self, group: tuple, count: int, first: int) -> None:
        """``count`` counters of ``group`` with no id, the first at ordinal ``first``."""
        self.first_seen[group] = min(self.first_seen.get(group, first), first)
        self.ids[group][None] += count

    def finish(self, findings: Findings) -> None:
        """Series of one (process, name) that only a numeric id tells apart get merged."""
        for group in sorted(self.ids, key=self.first_seen.__getitem__):
            ids = self.ids[group]
            if len(ids) < 2:
                continue
            merged = sum(n for cid, n in ids.items() if cid is not None)
            for example in self.first[group]:
                findings.add("counter_id_not_string", *example)
            findings.extra("counter_id_not_string", merged - len(self.first[group]))


def control_characters(first: int, events: list, findings: Findings) -> None:
    """Find the events of a batch whose strings hold control characters (rare: slow path)."""
    for i, e in enumerate(events):
        if _has_control(e):
            findings.add("control_characters", first + i, e.get("name"), str(e.get("ts")))


def _has_control(value) -> bool:
    if type(value) is str:
        return _CONTROL.search(value) is not None
    if type(value) is dict:
        return any(_has_control(k) or _has_control(v) for k, v in value.items())
    if type(value) is list:
        return any(_has_control(v) for v in value)
    return False
