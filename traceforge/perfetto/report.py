"""The result of a check: counts by rule, a few examples each, and the exit code."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..util import short_names
from .rules import FATAL, RULES, WARNING


@dataclass(frozen=True)
class Example:
    """One offending event: its 0-based position in ``traceEvents``, name, ts (µs text)."""

    ordinal: int | None
    name: str | None
    ts: str | None
    note: str = ""

    def text(self, width: int = 60) -> str:
        """One line; names longer than ``width`` are cut (kernel names run to kilobytes)."""
        where = f"#{self.ordinal}" if self.ordinal is not None else "?"
        what = f" {shorten(self.name, width)!r}" if self.name is not None else ""
        when = f" ts {self.ts}" if self.ts is not None else ""
        note = f" ({self.note})" if self.note else ""
        return f"{where}{what}{when}{note}"


def shorten(text: str, width: int = 60) -> str:
    return short_names.shorten(text, width)


class Findings:
    """Counts and the first ``max_examples`` examples of each rule, as they are found."""

    def __init__(self, max_examples: int):
        self.max_examples = max_examples
        self.counts: Counter = Counter()
        self.examples: dict[str, list[Example]] = defaultdict(list)
        self.breakdown: dict[str, Counter] = defaultdict(Counter)

    def add(self, rule: str, ordinal: int | None, name: object, ts: str | None,
            note: str = "", cause: str | None = None) -> None:
        self.counts[rule] += 1
        if cause is not None:
            self.breakdown[rule][cause] += 1
        examples = self.examples[rule]
        if len(examples) < self.max_examples:
            examples.append(Example(ordinal, name if isinstance(name, str) else None, ts, note))

    def extra(self, rule: str, count: int, cause: str | None = None) -> None:
        """Count ``count`` more occurrences whose examples are already kept."""
        self.counts[rule] += count
        if cause is not None:
            self.breakdown[rule][cause] += count


@dataclass
class CheckReport:
    """What Perfetto's JSON importer would do with a trace (see ``rules.RULES``).

    ``stats``: Perfetto stats and mis-renders that would occur, by name (non-zero only);
    ``warnings``: Kineto quirks that lose nothing; ``breakdown``: counts by cause for
    rules that have several (spilled slices: merged thread ids, float rounding).
    """

    path: str
    events: int = 0
    stats: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Example]] = field(default_factory=dict)
    breakdown: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def from_findings(cls, path: str, events: int, findings: Findings, seconds: float) -> CheckReport:
        counts = {k: v for k, v in findings.counts.items() if v}
        order = list(RULES)
        names = sorted(counts, key=order.index)
        return cls(
            path=path,
            events=events,
            stats={k: counts[k] for k in names if RULES[k].severity != WARNING},
            warnings={k: counts[k] for k in names if RULES[k].severity == WARNING},
            examples={k: list(findings.examples[k]) for k in names},
            breakdown={k: dict(v) for k, v in findings.breakdown.items() if k in counts},
            seconds=seconds,
        )

    @property
    def losses(self) -> int:
        """Events Perfetto would drop, move or mis-render (fatal ones included)."""
        return sum(self.stats.values())

    @property
    def fatal(self) -> bool:
        return any(RULES[k].severity == FATAL for k in self.stats)

    @property
    def exit_code(self) -> int:
        """2: Perfetto refuses or stops reading the trace; 1: something is lost; 0: clean."""
        if self.fatal:
            return 2
        return 1 if self.losses else 0

    def to_dict(self) -> dict[str, Any]:
        problems = []
        for name, count in {**self.stats, **self.warnings}.items():
            rule = RULES[name]
            problems.append({
                "name": name, "severity": rule.severity, "count": count, "explanation": rule.explanation,
                "breakdown": self.breakdown.get(name, {}),
                "examples": [{"ordinal": e.ordinal, "name": e.name, "ts_us": e.ts, "note": e.note}
                             for e in self.examples.get(name, [])],
            })
        return {
            "path": self.path, "events": self.events, "exit_code": self.exit_code, "losses": self.losses,
            "stats": self.stats, "warnings": self.warnings, "problems": problems,
            "seconds": round(self.seconds, 3),
        }
