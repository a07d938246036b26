"""Reading a user's GPU limits file (``--gpu-limits FILE``): a JSON object of GPUs, checked and
turned into limits by ``analyses.roofline.limits.parse_limits``."""

from __future__ import annotations

import json

from ...errors import UsageError


def read_gpu_limits_file(path: str) -> dict:
    """The JSON object in ``path``; one line (the file, and where the JSON breaks) if it is not one."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"{path}: cannot read the GPU limits file: {e.strerror or e}") from None
    try:
        table = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not a JSON GPU limits file: {e}") from None
    except RecursionError:
        raise UsageError(f"{path}: GPU limits file nested too deep to read") from None
    if type(table) is not dict:
        raise UsageError(f"{path}: a GPU limits file is a JSON object of GPUs by deviceProperties name")
    return table
