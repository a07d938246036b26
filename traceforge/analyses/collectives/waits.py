"""Who waited for whom: per collective instance, each rank's arrival (its kernel's start, on
the aligned clock), the last arrival and its rank, each rank's wait (the last arrival minus
its own), the transfer time (the last rank's kernel end minus the last arrival), the size
and NCCL's algbw/busbw (``kinds.bus_factor``). Per kind and group: count, bytes, time,
waits, the share of the ranks' step time (their ProfilerStep# ranges; the trace span
where there are none) spent waiting, busbw, and how often each rank was last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...util.lazy_pandas import pd
from .clock import ClockFit
from .kinds import bus_factor
from .matching import Matched

INSTANCE_COLUMNS = ("instance", "group", "kind", "rule", "ranks", "bytes", "first_arrival_ns", "last_arrival_ns",
                    "last_rank", "skew_ns", "transfer_ns", "algbw_gbps", "busbw_gbps")
WAIT_COLUMNS = ("instance", "rank", "arrival_ns", "end_ns", "wait_ns", "last")
SUMMARY_COLUMNS = ("group", "kind", "count", "bytes", "time_ns", "wait_ns", "wait_share_pct", "busbw_gbps",
                   "last_rank", "last_share_pct", "last")
LAST_COLUMNS = ("group", "kind", "rank", "times_last", "share_pct")
TIE_NS = 2_000  # arrivals this close are a tie (the clock fit is not finer): no rank was last


@dataclass
class Waits:
    instances: pd.DataFrame
    per_rank: pd.DataFrame
    summary: pd.DataFrame
    last: pd.DataFrame
    stragglers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def waits(matched: Matched, clocks: ClockFit, steps: dict[int, tuple[int, int, int]]) -> Waits:
    """``steps``: rank -> (step time ns, step count, trace span ns)."""
    m = matched.members
    if m.empty:
        return Waits(_empty(INSTANCE_COLUMNS), _empty(WAIT_COLUMNS), _empty(SUMMARY_COLUMNS), _empty(LAST_COLUMNS))
    start = np.empty(len(m), np.int64)
    end = np.empty(len(m), np.int64)
    for rank, at in m.groupby("rank").indices.items():
        start[at] = clocks.aligned(int(rank), m["start_ns"].to_numpy()[at])
        end[at] = clocks.aligned(int(rank), m["end_ns"].to_numpy()[at])
    m = m.assign(arrival_ns=start, aligned_end=end)
    g = m.groupby("instance", sort=True)
    last_arrival = g["arrival_ns"].transform("max").to_numpy()
    m["wait_ns"] = last_arrival - m["arrival_ns"].to_numpy()
    # the last to arrive: the latest start, the lowest rank among equals
    lasts = m.sort_values(["instance", "arrival_ns", "rank"], ascending=[True, False, True]).groupby(
        "instance", sort=True).head(1).set_index("instance")
    tied = (g["arrival_ns"].max() - g["arrival_ns"].min()) <= TIE_NS
    last_rank = lasts["rank"].where(~tied.reindex(lasts.index), -1)
    m["last"] = m["rank"].to_numpy() == last_rank.reindex(m["instance"]).to_numpy()
    inst = matched.instances.set_index("instance")
    n = np.maximum(g["group_size"].max(), g["rank"].nunique())
    transfer = (lasts["aligned_end"] - lasts["arrival_ns"]).clip(lower=0)
    size = g["bytes"].max()
    kinds = inst["kind"].reindex(size.index)
    algbw = (size / transfer.where(transfer > 0)).astype(float)  # bytes per ns = GB/s
    factor = np.array([bus_factor(k, int(x)) for k, x in zip(kinds.tolist(), n.tolist())])
    instances = pd.DataFrame({
        "instance": size.index.to_numpy(), "group": inst["group"].reindex(size.index).to_numpy(),
        "kind": kinds.to_numpy(), "rule": inst["rule"].reindex(size.index).to_numpy(),
        "ranks": g["rank"].nunique().to_numpy(), "bytes": size.to_numpy(),
        "first_arrival_ns": g["arrival_ns"].min().to_numpy(), "last_arrival_ns": g["arrival_ns"].max().to_numpy(),
        "last_rank": last_rank.reindex(size.index).to_numpy(),
        "transfer_ns": transfer.reindex(size.index).to_numpy(),
        "algbw_gbps": algbw.reindex(size.index).to_numpy(), "busbw_gbps": (algbw.reindex(size.index) * factor).to_numpy(),
    })
    instances["skew_ns"] = instances["last_arrival_ns"] - instances["first_arrival_ns"]
    instances = instances[list(INSTANCE_COLUMNS)]
    per_rank = m[["instance", "rank", "arrival_ns", "aligned_end", "wait_ns", "last"]].rename(
        columns={"aligned_end": "end_ns"}).reset_index(drop=True)
    summary, last = _summary(instances, per_rank, factor, steps)
    return Waits(instances, per_rank, summary, last, _stragglers(summary, per_rank, instances, steps))


def _summary(instances: pd.DataFrame, per_rank: pd.DataFrame, factor: np.ndarray,
             steps: dict[int, tuple[int, int, int]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    inst = instances.assign(_bus_bytes=instances["bytes"] * factor)
    joined = per_rank.merge(instances[["instance", "group", "kind"]], on="instance")
    rows, lasts = [], []
    for (group, kind), one in inst.groupby(["group", "kind"], sort=True):
        waits_here = joined[(joined["group"] == group) & (joined["kind"] == kind)]
        ranks = sorted(waits_here["rank"].unique().tolist())
        base = sum(steps.get(r, (0, 0, 0))[0] or steps.get(r, (0, 0, 0))[2] for r in ranks)
        time_ns = int(one["transfer_ns"].sum())
        wait_ns = int(waits_here["wait_ns"].sum())
        counts = one["last_rank"][one["last_rank"] >= 0].value_counts()
        for rank, times in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lasts.append({"group": group, "kind": kind, "rank": int(rank), "times_last": int(times),
                          "share_pct": 100.0 * times / len(one)})
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) or [(-1, 0)]
        rows.append({
            "group": group, "kind": kind, "count": len(one), "bytes": int(one["bytes"].sum()), "time_ns": time_ns,
            "wait_ns": wait_ns, "wait_share_pct": 100.0 * wait_ns / base if base else float("nan"),
            "busbw_gbps": float(one["_bus_bytes"].sum() / time_ns) if time_ns else float("nan"),
            "last_rank": int(top[0][0]), "last_share_pct": 100.0 * top[0][1] / len(one),
            "last": ", ".join(f"r{int(r)} {100.0 * c / len(one):.0f}%" for r, c in top[:4] if r >= 0) or "ties",
        })
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS)), pd.DataFrame(lasts, columns=list(LAST_COLUMNS))


def _stragglers(summary: pd.DataFrame, per_rank: pd.DataFrame, instances: pd.DataFrame,
                steps: dict[int, tuple[int, int, int]]) -> list[str]:
    """One sentence per kind and group where one rank was last in most instances."""
    out = []
    joined = per_rank.merge(instances[["instance", "group", "kind", "last_rank"]], on="instance")
    for row in summary.itertuples():
        if row.count < 1 or row.wait_ns <= 0 or row.last_rank < 0:
            continue
        here = joined[(joined["group"] == row.group) & (joined["kind"] == row.kind)]
        others = here[(here["last_rank"] == row.last_rank) & (here["rank"] != row.last_rank)]
        n_steps = max((steps.get(int(row.last_rank), (0, 0, 0))[1]), 0)
        n_others = max(others["rank"].nunique(), 1)
        per = others["wait_ns"].sum() / n_others / (n_steps or 1)
        unit = "per step" if n_steps else "in all"
        out.append(f"rank {row.last_rank} last in {row.last_share_pct:.0f} % of {row.kind} (group {row.group}); "
                   f"the others wait {per / 1e6:.3f} ms {unit}")
    return out


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in columns})
