"""What commands and notebooks use of the analyses beside ``Trace`` and the path functions: the
result types, the vocabularies and defaults of their options, and the table functions over the
columns the scans of ``plan.reads`` load, and the declared stats tables (``annotator.registry``). The
command line takes these from here, never from ``analyses``."""

from __future__ import annotations

from ..analyses.counters import CounterTables, counter_tables, ncu_tables
from ..analyses.counters.kinds import INSTRUCTIONS, kind_summary
from ..analyses.critical_path.path import CATEGORY_COLUMNS
from ..analyses.cross_trace.diff import TABLES as DIFF_TABLES
from ..analyses.cross_trace.stats import TAIL_PERCENTS, TraceStats
from ..analyses.cross_trace.stragglers import (
    MIN_RANKS_FOR_STRAGGLERS,
    STRAGGLER_FIGURES,
    STRAGGLER_SHARE,
    Figures,
    gpu_figures,
    stragglers,
)
from ..analyses.gpu_time.busy import KERNEL_WAIT_NS
from ..analyses.gpu_time.classify import NON_GPU, Classified
from ..analyses.gpu_time.comm_overlap import WHOLE_TRACE
from ..analyses.gpu_time.kernel_names import kernel_labels, short_kernel_name
from ..analyses.gpu_time.rules import DEFAULT_RULES, PRESETS, RuleSet, load_rules
from ..analyses.hta.choices import HTA_VERSIONS, LATEST_HTA, hta_launch_table, keeps_hta_launch
from ..analyses.launches.delay import (
    DEFAULT_DELAY_CUTOFF_NS,
    DEFAULT_RUNTIME_CUTOFF_NS,
    launch_statistics,
    launch_table_consuming,
    outliers,
)
from ..analyses.launches.delay import FIGURES as LAUNCH_FIGURES
from ..analyses.launches.queue_summary import CUDA_LAUNCH_QUEUE_LIMIT, QUARTILES
from ..analyses.patterns.by_op import DEFAULT_MIN_LEN
from ..analyses.patterns.table import ARROW, Patterns
from ..analyses.structure.export_tables import tables_by_kind
from ..analyses.structure.filters import Filters
from ..annotator.registry import STATS_TABLES, TABLE_ALIASES, default_tables, in_text_order
from ..plan.reads import counter_columns, export_columns, launch_columns, operator_columns
from ..plan.scan_plan import filtered_scan

__all__ = [
    "ARROW",
    "CATEGORY_COLUMNS",
    "CUDA_LAUNCH_QUEUE_LIMIT",
    "Classified",
    "CounterTables",
    "DEFAULT_DELAY_CUTOFF_NS",
    "DEFAULT_MIN_LEN",
    "DEFAULT_RULES",
    "DEFAULT_RUNTIME_CUTOFF_NS",
    "DIFF_TABLES",
    "Figures",
    "gpu_figures",
    "Filters",
    "HTA_VERSIONS",
    "INSTRUCTIONS",
    "KERNEL_WAIT_NS",
    "LATEST_HTA",
    "LAUNCH_FIGURES",
    "MIN_RANKS_FOR_STRAGGLERS",
    "NON_GPU",
    "PRESETS",
    "Patterns",
    "QUARTILES",
    "RuleSet",
    "STATS_TABLES",
    "TABLE_ALIASES",
    "STRAGGLER_FIGURES",
    "STRAGGLER_SHARE",
    "TAIL_PERCENTS",
    "TraceStats",
    "WHOLE_TRACE",
    "counter_columns",
    "counter_tables",
    "default_tables",
    "export_columns",
    "filtered_scan",
    "in_text_order",
    "launch_columns",
    "operator_columns",
    "hta_launch_table",
    "keeps_hta_launch",
    "kernel_labels",
    "kind_summary",
    "launch_statistics",
    "launch_table_consuming",
    "load_rules",
    "ncu_tables",
    "outliers",
    "short_kernel_name",
    "stragglers",
    "tables_by_kind",
]
