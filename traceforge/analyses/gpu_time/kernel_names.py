"""Short kernel names for labels: C++ signatures are hundreds of characters long.

``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(...)``
becomes ``vectorized_elementwise_kernel<FillFunctor>``: the function's own name, plus the
functor or op it was instantiated for when its name alone says little. Memcpy/memset names
lose their parenthesised detail. Full names stay in the data; these are for reading.

``kernel_kind`` is the coarser name llm.c's ``profile_gpu.py`` groups ncu rows by: the
qualified function name without return type, template arguments or parameter list, so
every ``vectorized_elementwise_kernel<...>`` instantiation is one kind.

Both read a name in time linear in its length (a name can be a 100,000-character template).
"""

from __future__ import annotations

import re

from ...util.short_names import shorten, shorten_distinct
from ..counters.names import kernel_function

MAX_SHORT = 60

# Template arguments that tell elementwise/reduce/multi-tensor kernels apart: identifiers that
# contain one of these after their first character. Identifiers are found by one regex without
# backtracking, then the words looked for in each (the one regex ``[A-Za-z_]\w*Functor\w*``
# found the same identifiers, but backtracked quadratically on a long one).
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_HINT_WORDS = ("Functor", "functor", "Ops", "_kernel_cuda", "_kernel_impl")
_GENERIC = {"kernel", "globalkernel", "kernel2"}


def short_kernel_name(name: str) -> str:
    """A readable label of at most ``MAX_SHORT`` characters for a GPU op name."""
    if name.startswith(("Memcpy", "Memset")):
        return name.split(" (", 1)[0]
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    head, template = _split_template(text)
    parts = [p for p in head.split("::") if p]
    base = parts[-1] if parts else head
    if base.lower() in _GENERIC:
        first_arg = template.split(",", 1)[0].split("<", 1)[0].strip()
        if base == "Kernel" and first_arg:  # cutlass::Kernel<cutlass_80_tensorop_...>
            base = first_arg.split("::")[-1]
        else:  # epilogue::impl::globalKernel
            scope = [p for p in parts[:-1] if p not in ("impl", "detail")]
            base = f"{scope[0]}::{base}" if scope else base
    else:
        hints = [h for h in _IDENTIFIER.findall(template)
                 if any(w in h[1:] for w in _HINT_WORDS) and not h.startswith("gpu_kernel")]
        if hints:
            base = f"{base}<{hints[-1]}>"
    return shorten(base, MAX_SHORT)


def kernel_labels(names: list[str], width: int = MAX_SHORT) -> dict[str, str]:
    """A label of at most ``width`` characters per GPU op name (``short_kernel_name``); names whose
    labels come out alike are cut instead around where they differ (``shorten_distinct`` of the
    full names), so different names never read the same."""
    variants: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        variants.setdefault(shorten(short_kernel_name(name), width), []).append(name)
    out = {}
    for label, group in variants.items():
        shown = [label] if len(group) == 1 else shorten_distinct([n.removeprefix("void ") for n in group], width)
        out.update(zip(group, shown))
    return out


def _split_template(text: str) -> tuple[str, str]:
    """(qualified name, its template argument text) of a C++ function signature."""
    for i, ch in enumerate(text):
        if ch == "(":
            return text[:i], ""
        if ch == "<":
            depth = 0
            for j in range(i, len(text)):
                if text[j] == "<":
                    depth += 1
                elif text[j] == ">":
                    depth -= 1
                    if depth == 0:
                        return text[:i], text[i + 1:j]
            return text[:i], text[i + 1:]
    return text, ""


def kernel_kind(name: str) -> str:
    """llm.c's kernel kind: ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)``
    -> ``at::native::vectorized_elementwise_kernel`` (``counters.names.kernel_function``:
    anonymous namespaces dropped, mangled ``_Z`` names read too); memcpy/memset names lose
    their parenthesised detail."""
    if name.startswith(("Memcpy", "Memset")):
        return name.split(" (", 1)[0]
    return kernel_function(name) or name
