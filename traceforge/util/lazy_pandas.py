"""pandas, imported where it is first used rather than when traceforge is.

Importing pandas takes ~0.35 s of CPU, a third of a run on a 50 MB trace, and what writes
traces (``annotate``, ``check``, ``repair``, ``trim``) never needs it. Modules
write ``from .lazy_pandas import pd`` and use ``pd.DataFrame`` as usual; the first attribute
looked up imports pandas (the import system makes that safe from any thread).

That first import also sets pandas' string storage to ``python``: names that were not UTF-8 in
a trace are held as lone surrogates (``surrogateescape``), which Arrow, pandas 3's default
storage where pyarrow is installed, cannot hold; Python strings hold them, and the tables are
the same with and without pyarrow.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any


def _pandas() -> Any:
    module = importlib.import_module("pandas")
    if module.get_option("mode.string_storage") != "python":
        module.set_option("mode.string_storage", "python")
    return module


class _LazyPandas:
    def __getattr__(self, name: str) -> Any:
        return getattr(_pandas(), name)


if TYPE_CHECKING:  # type checkers see pandas itself
    import pandas as pd
else:
    pd = _LazyPandas()


@contextmanager
def python_strings() -> Iterator[None]:
    """String columns made meanwhile hold Python str objects (shared: 8 bytes a row), also where
    pyarrow is installed, which pandas 3 would otherwise use to copy each row's text: for the
    tables of a row per launch or launch pair, ~450 MB more per 2 M rows of kernel names."""
    with pd.option_context("mode.string_storage", "python"):
        yield
