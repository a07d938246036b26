"""Hardware counters on the kernels they measured: CUPTI range-profiler events and ncu CSVs.

``counter_tables(cols, ncu=...)`` pairs each measurement with its kernel (or launch call),
adds the operator stack and derived metrics, and reports every mismatch;
``annotator/plugins/counters.py`` turns that into args and tracks for ``annotate --counters``.
"""

from .tables import CounterTables, checked_counter_options, counter_tables, ncu_tables, operator_summary

__all__ = ["CounterTables", "checked_counter_options", "counter_tables", "ncu_tables", "operator_summary"]
