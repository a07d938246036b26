"""Reading kernel classification rules: a shipped preset or a user's JSON or TOML file, as the
data that ``analyses.gpu_time.rules`` checks and turns into a rule set."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...errors import UsageError

RULES_DIR = Path(__file__).resolve().parents[2] / "data" / "rules"
PRESETS = ("default", "hta", "vllm-llama", "vllm-ds", "vllm-gpt-oss")


def rule_source(spec: str) -> tuple[object, str, str]:
    """(data, where, default name) of a preset name (see ``PRESETS``) or a JSON/TOML file path."""
    if spec in PRESETS:
        return json.loads((RULES_DIR / f"{spec}.json").read_text("utf-8")), f"preset {spec}", spec
    path = Path(spec)
    if not path.is_file():
        raise UsageError(f"rules {spec}: neither a preset ({', '.join(PRESETS)}) nor a readable file")
    return _read_file(path), f"rules file {path}", path.stem


def _read_file(path: Path) -> object:
    text = path.read_bytes()
    if path.suffix.lower() == ".toml":
        if sys.version_info < (3, 11):
            raise UsageError(f"rules file {path}: TOML needs Python 3.11+ (tomllib); write it as JSON")
        import tomllib

        try:
            return tomllib.loads(text.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"rules file {path}: not valid TOML: {e}") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(f"rules file {path}: not valid JSON: {e}") from None
    except RecursionError:
        raise UsageError(f"rules file {path}: nested too deep to read") from None
