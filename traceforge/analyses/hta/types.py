"""HTA's four kernel types of a GPU op (``op_types``), and HTA's rounding of times.

Types (HTA's ``get_kernel_type``, first match wins):

- ``COMMUNICATION``: the name starts with ``nccl`` and has ``Kernel`` later;
- ``MEMORY``: the name starts with ``Memcpy``, ``Memset`` or ``dma``; here also every op
  the trace marks as a copy or memset (nsys's ``[CUDA memcpy HtoD]`` spelling included);
- ``COMPUTATION``: any other name, unless it contains ``Sync`` or ``Memcpy``, or starts with
  ``Memset`` (HTA's ``is_compute_kernel``);
- ``OTHER``: those last names, which HTA counts neither as computation nor as communication.

The overlap and temporal breakdown read these types, as HTA's own analyses do. The ``hta``
classifier preset (``classify --rules hta``, the kernel breakdown) folds ``OTHER`` into
``COMPUTATION`` instead, so that every GPU op has one category (docs/hta.md). ``hta_times``
gives GPU ops' intervals rounded the way HTA rounds fractional-µs timestamps (the ops HTA
keeps are ``steps.hta_ops``).
"""

from __future__ import annotations

import re

import numpy as np

from ...columns.names import names_in_chunks
from ...columns.scan import KERNEL, TraceColumns
from ...util.distinct import unique

COMMUNICATION, MEMORY, COMPUTATION, OTHER = 0, 1, 2, 3
KERNEL_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")
_COMM = re.compile(r"nccl.*Kernel")
_MEMORY = re.compile(r"Memcpy|Memset|dma")
_NOT_COMPUTE = re.compile(r"nccl.*Kernel|.*Memcpy|Memset|.*Sync")


def type_of_name(name: str) -> int:
    """The kernel type of one GPU op name (module docstring)."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    return OTHER if _NOT_COMPUTE.match(name) else COMPUTATION


def op_types(cols: TraceColumns) -> np.ndarray:
    """The kernel type of each row of ``cols.gpu`` (int8): each distinct name typed once."""
    gpu = cols.gpu
    used = unique(gpu.name)
    of_name = np.zeros(len(cols.names) or 1, np.int8)
    of_name[used] = [type_of_name(n) for chunk in names_in_chunks(cols.names, used) for n in chunk]
    out = of_name[gpu.name]
    out[gpu.kind != KERNEL] = MEMORY
    return out


def up_to_us(ns: np.ndarray | int) -> np.ndarray | int:
    """``ns`` rounded up to a whole µs, as HTA rounds a start (``round_down_time_stamps``)."""
    return -(-ns // 1000) * 1000


def down_to_us(ns: np.ndarray | int) -> np.ndarray | int:
    """``ns`` rounded down to a whole µs, as HTA rounds an end."""
    return ns // 1000 * 1000


def hta_times(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's rounding of fractional-µs times, in ns: the start up to a whole µs, the end down
    to one (HTA 0.5 ``round_down_time_stamps``); an op shorter than that becomes empty."""
    start = up_to_us(ts)
    return start, np.maximum(down_to_us(end), start)
