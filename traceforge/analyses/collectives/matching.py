"""Matching one collective across ranks.

Per process group (the ``group`` column), three rules, the first that applies:

1. ``seq``: every kernel of the group on every rank has a sequence number (torch's ``Seq`` /
   ``seq_num``): an instance is (group, seq).
2. ``order``: the ranks have the same count of each kind in the group: the i-th of a kind on
   each rank (by kernel start) is one instance. Point-to-point kinds with a known ``peer``
   are ordered per pair of ranks instead.
3. ``ends`` (``anchored=True``, or where counts differ: sampled or cut traces): each rank is set
   against the group's lowest rank. The clock offset most pairs of same-kind ends agree on
   (within ``VOTE_NS``) is found first; then each kernel is paired, one to one, with the
   reference's kernel of its kind whose end is nearest once that offset is taken off, within
   ``MATCH_NS``. Instances are the reference's kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...util.lazy_pandas import pd
from .kinds import P2P_KINDS

VOTE_NS = 100_000  # the window of end differences a clock offset is voted in
MATCH_NS = 1_000_000  # how far (after the voted offset) a kernel's end may be from its match's
VOTE_SAMPLE = 256  # kernels of a kind per rank that vote (evenly spread), bounding the pairs
MEMBER_COLUMNS = ("instance", "rank", "kind", "group", "start_ns", "end_ns", "bytes", "group_size", "ordinal",
                  "stream", "seq", "peer")


@dataclass
class Matched:
    """``members``: one row per (instance, rank) (``MEMBER_COLUMNS``); ``instances``: instance,
    group, kind, rule; ``notes``: what could not be matched, and why."""

    members: pd.DataFrame
    instances: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)  # group -> rule used


def match(tables: dict[int, pd.DataFrame], *, anchored: bool = False) -> Matched:
    """The collectives of ``tables`` (rank -> ``table.rank_table``) matched across ranks."""
    notes: list[str] = []
    parts: list[pd.DataFrame] = []
    rules: dict[str, str] = {}
    every = [t for t in tables.values() if len(t)]
    if not every:
        notes.append("no collective kernels in any trace: nothing to match" if tables else "no traces")
        return Matched(_members([]), _instances([]), notes, rules)
    allrows = pd.concat(every, ignore_index=True)
    next_id = 0
    for group, rows in allrows.groupby("group", sort=True):
        ranks = sorted(rows["rank"].unique().tolist())
        if len(ranks) < 2:
            notes.append(f"group {group!r}: only rank {ranks[0]} has its collectives: nothing to match")
            continue
        if (rows["seq"] >= 0).all():
            keyed, rule = rows.assign(key=rows["seq"].astype(str)), "seq"
        else:
            counts = rows.groupby(["kind", "rank"]).size().unstack(fill_value=0)
            even = bool((counts.nunique(axis=1) == 1).all()) and len(counts.columns) == len(ranks)
            if even and not anchored:
                keyed, rule = _by_order(rows), "order"
            else:
                keyed, rule = _by_ends(rows, ranks[0]), "ends"
        rules[str(group)] = rule
        keyed = keyed[keyed["key"] != ""]
        sizes = keyed.groupby("key")["rank"].transform("nunique")
        keyed = keyed[sizes >= 2]
        if keyed.empty:
            notes.append(f"group {group!r}: no collective matched on two ranks or more (rule {rule})")
            continue
        ids, _ = pd.factorize(keyed["key"], sort=False)
        parts.append(keyed.assign(instance=ids + next_id).drop(columns="key"))
        next_id += int(ids.max()) + 1
    members = _members(parts)
    inst = members.groupby("instance", sort=True).agg(group=("group", "first"), kind=("kind", "first")).reset_index()
    inst["rule"] = inst["group"].map(lambda g: rules.get(str(g), ""))
    if members.empty:
        notes.append("the ranks share no collective")
    return Matched(members, inst, notes, rules)


def _by_order(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.sort_values(["rank", "start_ns", "ordinal"], kind="stable")
    p2p = rows["kind"].isin(P2P_KINDS) & (rows["peer"] >= 0)
    pair = np.where(p2p, np.minimum(rows["rank"], rows["peer"]).astype(str) + "-"
                    + np.maximum(rows["rank"], rows["peer"]).astype(str), "")
    kind = np.where(p2p, "p2p", rows["kind"])
    rows = rows.assign(_k=kind, _pair=pair)
    index = rows.groupby(["rank", "_k", "_pair"]).cumcount()
    return rows.assign(key=rows["_k"] + ":" + rows["_pair"] + ":" + index.astype(str)).drop(columns=["_k", "_pair"])


def _by_ends(rows: pd.DataFrame, reference: int) -> pd.DataFrame:
    ref = rows[rows["rank"] == reference]
    keyed = [ref.assign(key=ref["ordinal"].astype(str))]
    ref_ends = {kind: (g["end_ns"].to_numpy(), g["ordinal"].tolist()) for kind, g in ref.groupby("kind")}
    for rank, mine in rows[rows["rank"] != reference].groupby("rank"):
        kinds = [(kind, theirs) for kind, theirs in mine.groupby("kind")]
        offset = _voted_offset(ref_ends, kinds)
        keys = np.full(len(mine), "", object)
        if offset is not None:
            for kind, theirs in kinds:
                if kind not in ref_ends:
                    continue
                base_ends, ordinals = ref_ends[kind]
                at = mine.index.get_indexer(theirs.index).tolist()
                for i, j in _nearest_pairs(theirs["end_ns"].to_numpy() - offset, base_ends):
                    keys[at[i]] = str(int(ordinals[j]))
        keyed.append(mine.assign(key=keys))
    return pd.concat(keyed)


def _voted_offset(ref_ends: dict, kinds: list[tuple[object, pd.DataFrame]]) -> int | None:
    """The end difference (mine - reference) most same-kind pairs agree on, within ``VOTE_NS``."""
    diffs = []
    for kind, theirs in kinds:
        if kind not in ref_ends:
            continue
        a = _spread(theirs["end_ns"].to_numpy())
        b = _spread(ref_ends[kind][0])
        diffs.append((a[:, None] - b[None, :]).ravel())
    if not diffs:
        return None
    d = np.sort(np.concatenate(diffs))
    ends = np.searchsorted(d, d + VOTE_NS, side="right")
    best = int(np.argmax(ends - np.arange(len(d))))
    return int(np.median(d[best:ends[best]]))


def _spread(values: np.ndarray) -> np.ndarray:
    if len(values) <= VOTE_SAMPLE:
        return values
    return values[np.linspace(0, len(values) - 1, VOTE_SAMPLE).astype(np.int64)]


def _nearest_pairs(mine: np.ndarray, base: np.ndarray) -> list[tuple[int, int]]:
    """One-to-one pairs (i, j), nearest first, with |mine[i] - base[j]| <= MATCH_NS."""
    order = np.argsort(base, kind="stable")
    sorted_base = base[order]
    cands = []
    for i, v in enumerate(mine.tolist()):
        at = int(np.searchsorted(sorted_base, v))
        for j in (at - 1, at):
            if 0 <= j < len(sorted_base) and abs(int(sorted_base[j]) - v) <= MATCH_NS:
                cands.append((abs(int(sorted_base[j]) - v), i, int(order[j])))
    cands.sort()
    used_i, used_j, pairs = set(), set(), []
    for _, i, j in cands:
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            pairs.append((i, j))
    return pairs


def _members(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("kind", "group") else np.int64)
                             for c in MEMBER_COLUMNS})
    return pd.concat(parts, ignore_index=True)[list(MEMBER_COLUMNS)].sort_values(
        ["instance", "rank"], kind="stable").reset_index(drop=True)


def _instances(rows: list) -> pd.DataFrame:
    return pd.DataFrame({"instance": pd.Series(dtype=np.int64), "group": pd.Series(dtype=object),
                         "kind": pd.Series(dtype=object), "rule": pd.Series(dtype=object)})
