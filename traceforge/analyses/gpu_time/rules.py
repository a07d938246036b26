"""Kernel classification rules: ordered (regex, category[, stage]); the first ``re.search`` wins.

A rule set is data: the presets ship as JSON in ``traceforge/data/rules`` and users pass
their own JSON or TOML file of the same shape::

    {"name": "mine", "fallback": "other",
     "rules": [{"match": "gemm|matmul", "category": "gemm", "stage": "layer"},
               ["nccl", "comm"]]}

``fallback`` (a category, or ``{"category": ..., "stage": ...}``) is the catch-all for
names no rule matches, so every op gets exactly one category. ``stage`` is an optional
second, coarser level (vLLM's Stage/Substage).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...errors import UsageError
from ...io.read.rule_files import PRESETS, rule_source
from ...util.regex import shown, user_regex

__all__ = ["DEFAULT_RULES", "PRESETS", "Rule", "RuleSet", "load_rules"]

DEFAULT_RULES = "default"
_RULE_KEYS = {"match", "category", "stage"}
_TOP_KEYS = {"name", "description", "fallback", "rules"}


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    category: str
    stage: str = ""


@dataclass(frozen=True)
class RuleSet:
    """An ordered rule list plus the catch-all; ``categories`` in first-rule order, catch-all last."""

    name: str
    rules: tuple[Rule, ...]
    fallback: str = "other"
    fallback_stage: str = ""

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys([r.category for r in self.rules] + [self.fallback]))

    @property
    def has_stages(self) -> bool:
        return bool(self.fallback_stage) or any(r.stage for r in self.rules)

    def label(self, name: str) -> tuple[str, str]:
        """(category, stage) of one name."""
        for rule in self.rules:
            if rule.pattern.search(name):
                return rule.category, rule.stage
        return self.fallback, self.fallback_stage

    def label_names(self, names: list[str]) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """Label each distinct name once: (category id per name, stage id per name, categories, stages)."""
        categories = self.categories
        stages = list(dict.fromkeys([r.stage for r in self.rules] + [self.fallback_stage]))
        cat_index = {c: i for i, c in enumerate(categories)}
        stage_index = {s: i for i, s in enumerate(stages)}
        cat_ids = np.empty(len(names), np.int64)
        stage_ids = np.empty(len(names), np.int64)
        for i, name in enumerate(names):
            category, stage = self.label(name)
            cat_ids[i] = cat_index[category]
            stage_ids[i] = stage_index[stage]
        return cat_ids, stage_ids, categories, stages


def load_rules(spec: str | RuleSet = DEFAULT_RULES) -> RuleSet:
    """A preset name (see ``PRESETS``), a JSON/TOML file path, or a RuleSet (returned as is)."""
    if isinstance(spec, RuleSet):
        return spec
    return _parse(*rule_source(spec))


def _parse(data: object, where: str, default_name: str) -> RuleSet:
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected an object with a 'rules' list")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_TOP_KEYS)})")
    items = data.get("rules")
    if not isinstance(items, list) or not items:
        raise UsageError(f"{where}: 'rules' must be a non-empty list")
    rules = tuple(_rule(item, f"{where}: rule {i + 1}") for i, item in enumerate(items))
    fallback = data.get("fallback", "other")
    if isinstance(fallback, dict):
        fallback, fallback_stage = _text(fallback.get("category"), f"{where}: fallback category"), \
            _text(fallback.get("stage", ""), f"{where}: fallback stage", empty=True)
    else:
        fallback, fallback_stage = _text(fallback, f"{where}: fallback"), ""
    name = _text(data.get("name", default_name), f"{where}: name")
    return RuleSet(name, rules, fallback, fallback_stage)


def _rule(item: object, where: str) -> Rule:
    if isinstance(item, list) and 2 <= len(item) <= 3:
        item = dict(zip(("match", "category", "stage"), item))
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected {{\"match\": REGEX, \"category\": NAME[, \"stage\": NAME]}} "
                         "or [REGEX, NAME[, STAGE]]")
    unknown = set(item) - _RULE_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_RULE_KEYS)})")
    regex = item.get("match")
    if not isinstance(regex, str):
        raise UsageError(f"{where}: 'match' must be a regex string")
    pattern = user_regex(regex, f"{where}: bad regex {shown(regex)!r}")
    return Rule(pattern, _text(item.get("category"), f"{where}: category"),
                _text(item.get("stage", ""), f"{where}: stage", empty=True))


def _text(value: object, where: str, empty: bool = False) -> str:
    if not isinstance(value, str) or not (value or empty):
        raise UsageError(f"{where} must be a {'string' if empty else 'non-empty string'}")
    return value
