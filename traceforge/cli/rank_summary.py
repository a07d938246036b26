"""Across ranks: each rank's figures side by side, the longest launch delays, and stragglers.

In a synchronous job every rank waits for the slowest, so one rank that computes more, or
steps slower, holds all of them back. A straggler here is a rank whose GPU busy time (the
union of its GPU ops, per device, summed) or step time (its median ``ProfilerStep#`` CPU
range) is more than 10 % from the median rank's (``analyses.stragglers``). Figures are integer ns;
those a command does not compute are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..annotator.registry import ANALYSES
from ..api.results import (
    MIN_RANKS_FOR_STRAGGLERS,
    NON_GPU,
    STRAGGLER_FIGURES,
    STRAGGLER_SHARE,
    Classified,
    Figures,
    Patterns,
)
from ..api.results import stragglers as _stragglers
from ..util.lazy_pandas import pd
from .output import Col, count, ms, pct, render, us, wrap


def launch_figures(stats: pd.DataFrame) -> Figures:
    """Launch delay p50, p90 and max over all launches (``launch_statistics``)."""
    row = stats[(stats["by"] == "all") & (stats["figure"] == "launch_delay")]
    if not len(row):
        return {}
    r = row.iloc[0]
    return {"launch_delay_p50_ns": int(r["p50"]), "launch_delay_p90_ns": int(r["p90"]),
            "launch_delay_max_ns": int(r["max"])}


def classified_figures(c: Classified) -> Figures:
    """GPU ops, busy time (non-overlapped time of every category, so the union) and span."""
    ops = c.table[c.table["category"] != NON_GPU]
    figures: Figures = {"gpu_ops": int(ops["instances"].sum())}
    if len(ops):
        figures.update(gpu_busy_ns=int(ops["nonoverlapped_ns"].sum()), gpu_span_ns=int(c.span_ns))
    return figures


def pattern_figures(p: Patterns) -> Figures:
    """The top pattern's kernels and the share of GPU time the top patterns cover."""
    if not len(p.table):
        return {}
    return {"top_pattern": str(p.table["kernels"].iloc[0]), "patterns_share": float(p.coverage)}


def _missing(show):
    return lambda v: "-" if v is None or (isinstance(v, float) and np.isnan(v)) else show(v)


COLUMNS = (
    Col("GPU ops", "gpu_ops", count),
    Col("GPU busy ms", "gpu_busy_ns", ms),
    Col("GPU span ms", "gpu_span_ns", ms),
    Col("busy %", "busy_pct", pct),
    Col("step ms", "step_ns", ms),
    Col("delay p50 us", "launch_delay_p50_ns", us),
    Col("delay p90 us", "launch_delay_p90_ns", us),
    Col("delay max us", "launch_delay_max_ns", us),
    Col("top-k share %", "patterns_share", lambda v: pct(100 * float(v))),
    Col("top pattern", "top_pattern", left=True, width=60),
)


def _columns() -> list[Col]:
    """The built-in columns, then those the annotate analyses declare (``Analysis.figures``)."""
    declared = [Col(f.header, f.key, _figure_text) for a in ANALYSES.values() for f in a.figures]
    return [*COLUMNS, *declared]


def _figure_text(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class Summary:
    """One row per rank (``rank``, ``path`` and the figures), and the stragglers found."""

    table: pd.DataFrame
    stragglers: list[dict]

    def to_dict(self) -> dict:
        rows = [{k: v for k, v in r.items() if v is not None} for r in self.table.to_dict("records")]
        return {"ranks": rows, "stragglers": self.stragglers, "straggler_share": STRAGGLER_SHARE}

    def lines(self) -> list[str]:
        t = self.table
        lines = [f"== across {len(t)} rank{'' if len(t) == 1 else 's'} =="]
        if not len(t):
            return lines + ["no rank finished"]
        cols = [Col("rank", "rank", str)] + [Col(c.header, c.key, _missing(c.show), c.left) for c in _columns()
                                             if c.key in t] + [Col("file", "path", str, left=True)]
        lines += render(t, cols)
        if "launch_delay_p90_ns" in t and t["launch_delay_p90_ns"].notna().any():
            lines += wrap(_longest_delays(t))
        lines += wrap(self._straggler_text(len(t)))
        return lines

    def _straggler_text(self, ranks: int) -> str:
        rule = f"GPU busy or step time more than {STRAGGLER_SHARE:.0%} from the median rank's"
        if ranks < MIN_RANKS_FOR_STRAGGLERS:
            return f"stragglers ({rule}): need {MIN_RANKS_FOR_STRAGGLERS} ranks or more"
        if not self.stragglers:
            return f"stragglers ({rule}): none"
        parts = [f"rank {s['rank']} {STRAGGLER_FIGURES[s['figure']]} {ms(s['value'])} ms "
                 f"({s['deviation']:+.0%} vs {ms(s['median'])} ms)" for s in self.stragglers]
        return f"stragglers ({rule}): " + "; ".join(parts)


def _longest_delays(t: pd.DataFrame) -> str:
    known = t[t["launch_delay_p90_ns"].notna()]
    worst = known.loc[known["launch_delay_p90_ns"].astype("int64").idxmax()]
    single = known.loc[known["launch_delay_max_ns"].astype("int64").idxmax()]
    median = float(np.median(known["launch_delay_p90_ns"].astype("int64")))
    return (f"longest launch delays: rank {worst['rank']} (p90 {us(worst['launch_delay_p90_ns'])} us; median rank "
            f"{us(median)} us); longest single delay: rank {single['rank']} "
            f"({us(single['launch_delay_max_ns'])} us)")


def summarize(runs: list[tuple[int, str, Figures]]) -> Summary:
    """The summary of (rank, path, figures) per finished rank."""
    rows = [{"rank": rank, "path": path, **figures} for rank, path, figures in runs]
    keys = dict.fromkeys(k for figures in (r for _, _, r in runs) for k in figures)
    table = pd.DataFrame(rows, columns=["rank", "path", *keys], dtype=object)  # ints stay exact ints
    table = table.where(table.notna(), None)
    if "gpu_busy_ns" in table and "gpu_span_ns" in table:
        table["busy_pct"] = [100 * b / s if b is not None and s else None
                             for b, s in zip(table["gpu_busy_ns"], table["gpu_span_ns"])]
    return Summary(table, _stragglers(table))
