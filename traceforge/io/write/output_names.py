"""The names traceforge gives the traces it writes, and how a directory listing tells them
from the traces it was given.

A written trace is ``<name>.<kind>.json[.gz|.zst]`` beside its input (``kind``: annotated,
repaired, trimmed), compressed as the input is: ``.json.zst`` in gives ``.json.zst`` out,
``.json.gz`` gives ``.json.gz``, plain ``.json`` gives plain ``.json``. A suffix that is none of
these writes plain JSON (``plain_output_note`` says so).
"""

from __future__ import annotations

from pathlib import Path

OUTPUT_KINDS = ("annotated", "repaired", "trimmed")
# longest first: the suffix taken off an input's name, and the codec suffix its outputs get
INPUT_SUFFIXES = {".json.gz": ".json.gz", ".json.zst": ".json.zst", ".json.zstd": ".json.zst", ".json": ".json",
                  ".gz": ".json.gz", ".zst": ".json.zst", ".zstd": ".json.zst"}
OUTPUT_SUFFIXES = (".json", ".json.gz", ".json.zst", ".json.zstd", ".gz", ".zst", ".zstd")


def split_suffix(name: str) -> tuple[str, str]:
    """``name`` without its trace suffix, and the suffix its outputs get (``.json`` where it has none)."""
    lower = name.lower()
    for suffix, out in INPUT_SUFFIXES.items():
        if lower.endswith(suffix):
            return name[: -len(suffix)], out
    return name, ".json"


def default_output(path: str, kind: str) -> str:
    """``<name>.<kind><suffix>`` beside ``path``, compressed as ``path`` is (``-`` for stdin)."""
    if path == "-":
        return "-"
    p = Path(path)
    stem, suffix = split_suffix(p.name)
    return str(p.with_name(f"{stem}.{kind}{suffix}"))


def is_output(path: str | Path) -> bool:
    """Whether ``path``'s name is one traceforge gives what it writes (``*.annotated.json.gz``, ...)."""
    stem, _ = split_suffix(Path(path).name)
    return any(stem.lower().endswith(f".{kind}") for kind in OUTPUT_KINDS)


def plain_output_note(out: str) -> str | None:
    """A note for an output whose suffix picks no codec (``-o x.txt``): it is written as plain JSON."""
    if out == "-" or out.lower().endswith(OUTPUT_SUFFIXES):
        return None
    return (f"{out}: written as plain (uncompressed) JSON; the output's suffix picks the compression "
            "(.json, .json.gz, .json.zst)")
