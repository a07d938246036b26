"""pandas, imported where it is first used rather than when traceforge is.

Importing pandas is a large share of a run on a small trace (docs/benchmarks.md), and what writes
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

