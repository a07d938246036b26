"""Kernel names compared across tools: Kineto demangles, ncu prints demangled, bare or mangled.

The comparison key is the kernel function's own identifier, without namespaces, return
type, template arguments or parameters:

- ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` (Kineto, ncu's
  default ``--print-kernel-base demangled``),
- ``vectorized_elementwise_kernel`` (ncu ``function``),
- ``_ZN2at6native29vectorized_elementwise_kernelILi4E...`` (ncu ``mangled``: the last
  source name before the template arguments of an Itanium ``_Z`` name)

all give ``vectorized_elementwise_kernel``; ``ampere_sgemm_32x32_sliced1x4_tn`` and
Triton names are their own key. The key alone is coarse (many kernels are called
``elementwise_kernel``), so joins also check grid, block and launch order. No demangler
is needed: only the leading source names of a mangled name are read.
"""

from __future__ import annotations

import re
from functools import lru_cache

_ANONYMOUS = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|\{anonymous\})(?:::)?")
_DIGITS = re.compile(r"\d+")
UNNAMED = frozenset({"", "__missing__"})  # Kineto's range names when CUPTI gave none


@lru_cache(maxsize=1 << 16)
def kernel_function(name: str) -> str:
    """The kernel's qualified function name: ``at::native::vectorized_elementwise_kernel``."""
    name = name.strip()
    if name.startswith("_Z"):
        return _mangled_function(name) or name
    name = _ANONYMOUS.sub("", name)
    head: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break  # the parameter list
            head.append(ch)
    words = "".join(head).split()
    return words[-1] if words else name


def kernel_key(name: str) -> str:
    """The kernel function's own identifier (see the module docstring)."""
    return kernel_function(name).rsplit("::", 1)[-1]


def _mangled_function(name: str) -> str | None:
    """Source names of ``_Z[L][N[rVK]*]<len><id>...`` joined by ``::``; None if it does not parse."""
    i = 2
    if name.startswith("L", i):
        i += 1
    nested = name.startswith("N", i)
    if nested:
        i += 1
        while i < len(name) and name[i] in "rVK":
            i += 1
    parts = []
    while i < len(name):
        if name.startswith("St", i):  # std::
            parts.append("std")
            i += 2
            continue
        m = _DIGITS.match(name, i)
        if m is None:
            break
        end = m.end() + int(m.group())
        if end > len(name):
            return None
        part, i = name[m.end():end], end
        if not part.startswith("_GLOBAL__N"):  # the anonymous namespace
            parts.append(part)
        if not nested:
            break
    return "::".join(parts) if parts else None


def same_kernel(a: str, b: str) -> bool:
    """True when two spellings name the same kernel function (exact, or equal keys)."""
    return a == b or kernel_key(a) == kernel_key(b)
