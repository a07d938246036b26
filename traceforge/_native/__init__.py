"""The seam between traceforge and its native kernels: C where built, Python elsewhere.

traceforge's hot loops are seven small C extensions (``_scanner.c``, ``_counter_text.c``,
``_splice.c``, ``_stacks.c``, ``_factorize.c``, ``_replay.c``, ``_search.c`` beside this file).
Each has a pure Python/numpy stand-in in ``fallback/`` that exports the same names and
returns identical results (the same bytes, dtypes and values), only slower. This module
exposes one attribute per kernel::

    scanner, counter_text, splice, stacks, factorize, replay, search

each the C extension when it imports, else its fallback; a missing C extension is warned
about once. ``TRACEFORGE_NO_NATIVE=1`` in the environment forces every fallback (a comma list
of kernels, ``TRACEFORGE_NO_NATIVE=splice,stacks``, forces theirs only).

Callers look a kernel up here at call time (``from .. import _native`` then
``_native.splice.join_rows(...)``), never bind its functions at import, so that ``use``
switches a running process (tests run the same code on both backends). Constants (the
scanner's column indexes, the replay's rule codes) are the same in both and may be read at
import. Objects a kernel makes (the scanner's interners, a replay walker) belong to it: a
caller keeps the module that made them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

KERNELS: tuple[str, ...] = ("scanner", "counter_text", "splice", "stacks", "factorize", "replay", "search")
_BACKENDS = ("c", "python")

scanner: ModuleType
counter_text: ModuleType
splice: ModuleType
stacks: ModuleType
factorize: ModuleType
replay: ModuleType
search: ModuleType

BACKENDS: dict[str, str] = {}  # kernel -> "c" or "python": which one each attribute is
BACKEND: str = "c"  # "c" or "python" when every kernel is one, else "mixed"


def _forced(setting: str) -> tuple[str, ...]:
    """The kernels ``TRACEFORGE_NO_NATIVE`` forces onto their fallbacks: none for "" or "0", the
    ones named in a comma list of kernels, else all."""
    if setting.strip() in ("", "0"):
        return ()
    named = tuple(k.strip() for k in setting.split(","))
    return named if set(named) <= set(KERNELS) else KERNELS


FORCED: tuple[str, ...] = _forced(os.environ.get("TRACEFORGE_NO_NATIVE", ""))  # kernels forced to Python

def c_module(kernel: str) -> ModuleType | None:
    """The C extension of ``kernel``, or None where it is not built."""
    try:
        return importlib.import_module(f"{__name__}._{kernel}")
    except ImportError:
        return None


def fallback_module(kernel: str) -> ModuleType:
    """The Python fallback of ``kernel``; ImportError naming it if there is none."""
    name = f"{__name__}.fallback.{kernel}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        raise ImportError(f"traceforge has no Python fallback for its C kernel _{kernel} "
                          f"(traceforge/_native/fallback/{kernel}.py is missing): build the C extensions "
                          "(`pip install -e .`) or unset TRACEFORGE_NO_NATIVE") from None


def has_fallback(kernel: str) -> bool:
    """Whether ``kernel`` has a Python fallback."""
    return importlib.util.find_spec(f"{__name__}.fallback.{kernel}") is not None


def _module(kernel: str, backend: str) -> ModuleType:
    """``kernel``'s module in ``backend``; ImportError if it has none there."""
    if backend == "python":
        return fallback_module(kernel)
    module = c_module(kernel)
    if module is None:
        raise ImportError(f"traceforge's C extension _{kernel} is not built: run `pip install -e .` in the source tree")
    return module


def _bind(modules: dict[str, tuple[ModuleType, str]]) -> None:
    """Make each kernel's attribute its module, and record which backend it is."""
    global BACKEND
    for kernel, (module, backend) in modules.items():
        globals()[kernel] = module
        BACKENDS[kernel] = backend
    kinds = set(BACKENDS.values())
    BACKEND = kinds.pop() if len(kinds) == 1 else "mixed"


def use(backend: str, kernels: Iterable[str] = KERNELS) -> None:
    """Switch ``kernels`` (all seven by default) to ``backend``: "c" or "python". Every module
    is imported before any is switched: ImportError leaves the seam as it was."""
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, not {backend!r}")
    kernels = tuple(kernels)
    unknown = set(kernels) - set(KERNELS)
    if unknown:
        raise ValueError(f"unknown kernels {sorted(unknown)}; the kernels are {KERNELS}")
    _bind({kernel: (_module(kernel, backend), backend) for kernel in kernels})


@contextmanager
def using(backend: str, kernels: Iterable[str] = KERNELS) -> Iterator[None]:
    """``use(backend, kernels)`` for the ``with`` block, then each kernel as it was."""
    saved = {kernel: (globals()[kernel], BACKENDS[kernel]) for kernel in KERNELS}
    use(backend, kernels)
    try:
        yield
    finally:
        _bind(saved)


def _default() -> None:
    """Bind each kernel's C module, or its fallback where the C is missing or forced off."""
    modules, missing = {}, []
    for kernel in KERNELS:
        if kernel in FORCED:
            modules[kernel] = (fallback_module(kernel), "python")
            continue
        module = c_module(kernel)
        if module is None:
            missing.append(kernel)
            modules[kernel] = (fallback_module(kernel), "python")
        else:
            modules[kernel] = (module, "c")
    _bind(modules)
    if missing:  # once: this runs when the package is first imported
        warnings.warn(f"traceforge runs without its C extensions ({', '.join('_' + k for k in missing)} not built): "
                      "slower. Build them with `pip install -e .` in the source tree.", RuntimeWarning, stacklevel=2)


_default()
