"""What ``traceforge check`` reports: Perfetto's own stat names where one exists.

Severities decide the exit code: ``fatal`` (Perfetto refuses the trace or stops reading
it) gives 2; ``loss`` (an event dropped or moved) and ``misrender`` (imported, but drawn
wrong, without any stat to warn you) give 1; ``warning`` (Kineto quirks worth knowing,
nothing lost) leaves it at 0. The importer facts behind them: docs/perfetto-import.md.
"""

from __future__ import annotations

from dataclasses import dataclass

FATAL, LOSS, MISRENDER, WARNING = "fatal", "loss", "misrender", "warning"


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str
    explanation: str


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("json_syntax_error", FATAL,
         "not valid JSON (NaN/Infinity included): Perfetto refuses the whole trace"),
    Rule("json_tokenizer_failure", FATAL,
         "event without a numeric ts, or with a non-numeric dur: skipped, and a non-numeric dur "
         "stalls the importer so every later event is lost"),
    Rule("json_parser_failure", LOSS,
         "event Perfetto cannot use: X without dur, counter args that are not an object or not "
         "numbers, instant or async event without the pid/tid/id it needs"),
    Rule("trace_sorter_negative_timestamp_dropped", LOSS, "negative ts: dropped"),
    Rule("slice_negative_duration", LOSS, "X with a negative dur: dropped"),
    Rule("slice_spill_overlapping_complete_event", LOSS,
         "X starting inside another slice of its thread and ending after it: moved to an "
         "overflow track, so the thread's layout may lie"),
    Rule("slice_max_depth_exceeded", LOSS, "slice nested 512 deep or more: dropped"),
    Rule("misplaced_end_event", LOSS, "B slice still open when its enclosing slice ended: cut short there"),
    Rule("flow_no_enclosing_slice", LOSS, "flow event with no open slice on its thread: arrow dropped"),
    Rule("flow_duplicate_id", LOSS, "flow started twice with the same (id, cat, name): arrow dropped"),
    Rule("flow_end_without_start", LOSS, "flow end (f) whose start (s) is missing or later: arrow dropped"),
    Rule("flow_step_without_start", LOSS, "flow step (t) whose start (s) is missing or later: arrow dropped"),
    Rule("flow_invalid_id", LOSS, "flow event without a usable id: dropped"),
    Rule("flow_without_direction", LOSS, "bind_id without flow_in/flow_out: arrow dropped"),
    Rule("counter_multiple_keys", MISRENDER,
         "counter event with several numeric keys: each key becomes its own track (write one key per event)"),
    Rule("counter_id_not_string", MISRENDER,
         "counter series told apart only by a numeric id: Perfetto ignores numeric ids, so they "
         "merge into one track (use a string id or distinct names)"),
    Rule("flow_end_from_slice_0", MISRENDER,
         "f without bp:\"e\" whose s is missing: Perfetto draws a bogus arrow from the trace's first slice"),
    Rule("flow_bound_to_other_slice", MISRENDER,
         "flow event inside a slice Perfetto moved to an overflow track (a spill): the arrow binds to "
         "the slice under it on the thread, the wrong one"),
    Rule("dangling_flow_end", WARNING, "Kineto quirk: flow end (f) whose start (s) is nowhere in the trace"),
    Rule("gpu_zero_or_negative_duration", WARNING, "Kineto quirk: GPU event with dur <= 0"),
    Rule("missing_name", WARNING, "Kineto quirk: '__missing__' in the event name (CUPTI gave none)"),
    Rule("control_characters", WARNING, "control characters in names, categories or args: may render oddly"),
    Rule("pid_tid_out_of_range", WARNING,
         "integer pid/tid negative or above 2^32-1: Perfetto reads it as 0, so such a tid lands "
         "on its process's main thread"),
)}
