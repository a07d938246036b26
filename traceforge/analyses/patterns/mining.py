"""Mined patterns: the runs of consecutive GPU ops on a stream that repeat and cover the most time.

Each stream's GPU ops in start order form a sequence of names. Every window of n ops
(``min_len <= n <= max_len``) gets a polynomial hash, the window of n - 1 ops' plus one
term (mod 2**64, numpy's wrapping uint64), so one length costs a few vector passes and
grouping is a hash table (``_factorize``, C): time and memory stay linear in the number
of GPU ops per length.

Patterns are picked greedily by count x the GPU time their occurrences cover, which
favours frequent runs over long ones seen once per step. An occurrence counts only if it
overlaps no earlier counted one (left to right) and uses no op a better pattern already
took, so the top patterns are disjoint (a repeated block of 20 ops is reported once, not
also as its sub-runs) and their coverage adds up. A run that is a shorter unit repeated
(``A A A``, ``A B A B``) is not a pattern: its unit is, or it would be reported chopped
into arbitrary pieces. A score can only drop as ops are taken, so candidates are
re-scored lazily, best bound first, which keeps the greedy exact with few evaluations.
Occurrences are compared name by name: a hash collision cannot merge different sequences.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

import numpy as np

from ... import _native
from ...columns.scan import TraceColumns
from ...io.write.jsontext import compact_ints
from ...util.distinct import factorized, unique
from ...util.search import in_sorted
from .table import Patterns, concat_runs, pattern_columns

DEFAULT_MAX_LEN = 32
_BASE = 0x9E3779B97F4A7C15  # odd, so invertible mod 2**64
_MASK = (1 << 64) - 1
_CHUNK = 1 << 16  # ops per in-place hash update
_FEW_PLACES = 4096  # candidate places whose remaining names are compared in one step (places x names)


class _Sequence:
    """All streams' GPU ops, stream by stream in time order, with their names' codes and times."""

    def __init__(self, cols: TraceColumns):
        gpu = cols.gpu
        self.order = compact_ints(np.lexsort((gpu.ordinal, gpu.ts, gpu.stream, gpu.device)))
        self.size = len(self.order)
        self.seg = _segments(gpu.device[self.order], gpu.stream[self.order])
        self.stream_firsts = np.flatnonzero(self.seg[1:] != self.seg[:-1]) + 1  # where each stream but the first starts
        self.codes = factorized(gpu.name[self.order].astype(np.int64))[0].astype(np.int32)
        self.time = np.r_[0, np.cumsum(np.maximum(gpu.dur[self.order], 0))].astype(np.int64)
        self.symbol = _symbols(int(self.codes.max(initial=0)) + 1)  # per name: gathered a chunk at a time
        self._by_code: tuple[np.ndarray, np.ndarray] | None = None

    def positions(self, code: int) -> np.ndarray:
        """Where the name ``code`` is in the sequence, ascending. Candidates are checked hundreds
        of times, mostly for a few frequent names: an index (built on first use) is read, not
        the whole sequence compared each time."""
        order, bounds = self._index()
        return order[bounds[code]:bounds[code + 1]]

    def frequency(self, codes: np.ndarray) -> np.ndarray:
        """How many times each of ``codes`` is in the sequence."""
        bounds = self._index()[1]
        return bounds[codes + 1] - bounds[codes]

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        if self._by_code is None:
            order = compact_ints(np.argsort(self.codes, kind="stable"))
            self._by_code = order, np.r_[0, np.cumsum(np.bincount(self.codes))]
        return self._by_code

    def in_one_stream(self, n: int, starts: np.ndarray) -> np.ndarray:
        """Which windows of ``n`` ops at ``starts`` stay inside one stream."""
        return self.seg[starts] == self.seg[starts + n - 1]

    def crossing_starts(self, n: int) -> np.ndarray:
        """Starts of the windows of ``n`` ops that span two streams (sorted): those that start
        fewer than ``n`` ops before a stream's first op, a few per stream."""
        starts = (self.stream_firsts[:, None] - np.arange(1, n)).ravel()
        return unique(starts[(starts >= 0) & (starts <= self.size - n)])

    def window_time(self, n: int, starts: np.ndarray | None = None) -> np.ndarray:
        """GPU time of the windows of ``n`` ops at ``starts`` (None: every window, by slices)."""
        if starts is None:
            return self.time[n:] - self.time[:-n]
        return self.time[starts + n] - self.time[starts]

    def window_hashes(self, max_len: int) -> Iterator[tuple[int, np.ndarray]]:
        """(n, hash of the window of n ops at each start) for n = 1..max_len: the sum of
        symbol * BASE**offset, one term added per length, in place, a chunk at a time."""
        hashes = np.zeros(self.size, np.uint64)
        power = 1
        for n in range(1, min(max_len, self.size) + 1):  # no window is longer than the sequence
            m = self.size - n + 1
            hashes = hashes[:m]
            for lo in range(0, m, _CHUNK):
                hi = min(lo + _CHUNK, m)
                hashes[lo:hi] += self.symbol[self.codes[n - 1 + lo:n - 1 + hi]] * np.uint64(power)
            power = power * _BASE & _MASK
            yield n, hashes


def _symbols(count: int) -> np.ndarray:
    """A well-mixed odd 64-bit number per name code (splitmix64's finaliser): numpy's random
    module costs a 20 ms import, and any mixing will do, as windows are compared name by name."""
    z = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(_BASE)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z | np.uint64(1)


def _segments(device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """1, 2, ... per (device, stream) run of the sorted ops (int32: a fraction of the columns)."""
    if not len(device):
        return device
    change = np.empty(len(device), bool)
    change[0] = True
    np.not_equal(device[1:], device[:-1], out=change[1:])
    change[1:] |= stream[1:] != stream[:-1]
    return np.cumsum(change, dtype=np.int32)


def mine_patterns(cols: TraceColumns, *, min_len: int, max_len: int | None, top_k: int) -> Patterns:
    """The ``top_k`` disjoint repeated runs of ``min_len..max_len`` GPU ops, by count x GPU time covered."""
    max_len = max_len or max(DEFAULT_MAX_LEN, min_len)  # a --min-len above the default is not an empty range
    seq = _Sequence(cols)
    total = int(seq.time[-1])
    searched = f"runs of {min_len}-{max_len} GPU ops per stream"
    lengths, examples, bounds = _candidates(seq, min_len, max_len, keep=32 + 16 * top_k)
    picked = _pick(seq, lengths, examples, bounds, top_k)

    kernels = [cols.gpu.name[seq.order[chosen[0]:chosen[0] + n]] for n, chosen in picked]
    counts = np.array([len(chosen) for _, chosen in picked], np.int64)
    covered = np.array([seq.window_time(n, chosen).sum() for n, chosen in picked], np.int64)
    occ_pattern = np.repeat(np.arange(len(picked)), counts)
    starts = np.concatenate([chosen for _, chosen in picked]) if picked else np.zeros(0, np.int64)
    ends = starts + np.repeat(np.array([n for n, _ in picked], np.int64), counts)
    first_ts = cols.gpu.ts[seq.order[starts]]
    occ = np.lexsort((first_ts, occ_pattern))
    offsets, members = concat_runs(seq.order, starts[occ], ends[occ])
    members = members.astype(np.int64)  # rows of cols.gpu, as the operator patterns give them
    columns = pattern_columns(cols, kernels, counts, covered, total)
    n_streams = int(seq.seg[-1]) if seq.size else 0
    note = f"{seq.size:,} GPU ops on {n_streams} stream{'s' * (n_streams != 1)}, {len(lengths):,} candidate runs"
    return Patterns("mined", searched, columns, total, occ_pattern[occ], np.full(len(occ), -1, np.int64),
                    offsets, members, note)


def _candidates(seq: _Sequence, min_len: int, max_len: int, keep: int) -> tuple[list[int], list[int], list[int]]:
    """For each length, the ``keep`` repeated windows with the best count x GPU time, overlaps
    counted: an upper bound of the pattern's score (kept as Python ints: it can pass 2**63);
    each as its length and its first window's start. A length with no repeated window ends
    the search: a longer one repeats only if its prefix does.
    """
    lengths: list[int] = []
    examples: list[int] = []
    bounds: list[int] = []
    for n, hashes in seq.window_hashes(max_len):
        if n < min_len:
            continue
        # Every window is grouped (no copy of the hashes), then the few that span two streams
        # are taken out of their groups' counts and times.
        codes, example = factorized(hashes)  # the table grows with the distinct windows, not sized for all
        count = np.bincount(codes, minlength=len(example))
        time = np.zeros(len(example), np.int64)
        np.add.at(time, codes, seq.window_time(n))
        crossing = seq.crossing_starts(n)
        if len(crossing):
            np.subtract.at(count, codes[crossing], 1)
            np.subtract.at(time, codes[crossing], seq.window_time(n, crossing))
        repeated = np.flatnonzero(count >= 2)
        if not len(repeated):
            break
        if len(crossing):
            _first_inside(example, repeated, codes, crossing)
            # Ranked ties go by first window inside one stream, as when only those were grouped.
            repeated = repeated[np.argsort(example[repeated], kind="stable")]
        rough = count[repeated] * time[repeated].astype(np.float64)
        ranked = repeated[np.argsort(-rough, kind="stable")].tolist()
        best = np.array(list(itertools.islice(
            (g for g in ranked if not _is_power(seq.codes[example[g]:example[g] + n])), keep)), np.int64)
        lengths.extend([n] * len(best))
        examples.extend(example[best].tolist())
        bounds.extend(c * t for c, t in zip(count[best].tolist(), time[best].tolist()))
    return lengths, examples, bounds


def _pick(seq: _Sequence, lengths: list[int], examples: list[int], bounds: list[int],
          top_k: int) -> list[tuple[int, np.ndarray]]:
    """Greedy by count x covered time with lazy re-scoring; (length, chosen starts) per pick."""
    covered = np.zeros(seq.size, bool)  # ops already in a picked pattern's occurrences
    taken = np.zeros(seq.size + 1, np.int32)  # its prefix count: a window is free iff it adds 0
    positions: dict[int, np.ndarray] = {}
    scored_at: dict[int, int] = {}
    chosen_of: dict[int, np.ndarray] = {}
    heap = [(-b, -n, i) for i, (n, b) in enumerate(zip(lengths, bounds))]
    heapq.heapify(heap)
    picked: list[tuple[int, np.ndarray]] = []
    while heap and len(picked) < top_k:
        _, neg_n, i = heapq.heappop(heap)
        n = -neg_n
        if scored_at.get(i) == len(picked):  # its score is current and the best: take it
            chosen = chosen_of.pop(i)
            picked.append((n, chosen))
            mark = np.zeros(seq.size + 1, np.int32)
            np.add.at(mark, chosen, 1)
            np.add.at(mark, chosen + n, -1)
            covered |= np.cumsum(mark, dtype=np.int32)[:-1] > 0
            del mark
            np.cumsum(covered, dtype=np.int32, out=taken[1:])
            continue
        if i not in positions:
            positions[i] = _occurrences(seq, n, examples[i])
        pos = positions[i]
        pos = pos[taken[pos + n] == taken[pos]]
        chosen = _non_overlapping(pos, n)
        score = len(chosen) * int(seq.window_time(n, chosen).sum())
        scored_at[i] = len(picked)
        if len(chosen) >= 2 and score > 0:
            chosen_of[i] = chosen
            heapq.heappush(heap, (-score, neg_n, i))
    return picked


def _first_inside(example: np.ndarray, groups: np.ndarray, codes: np.ndarray, crossing: np.ndarray) -> None:
    """Where a group of ``groups`` was first met at a window spanning two streams, its first
    window inside one stream instead (in place; rare: a run of names repeated across streams)."""
    for g in groups[in_sorted(crossing, example[groups])].tolist():
        at = np.flatnonzero(codes == g)
        example[g] = at[~in_sorted(crossing, at)][0]


def _is_power(window: np.ndarray) -> bool:
    """Is ``window`` a shorter unit repeated (``A A A``, ``A B A B``)?"""
    n = len(window)
    return any(n % p == 0 and bool((window[p:] == window[:-p]).all()) for p in range(1, n // 2 + 1))


def _occurrences(seq: _Sequence, n: int, first: int) -> np.ndarray:
    """Starts of the windows of ``n`` ops inside one stream whose names equal those at ``first``
    (compared name by name, narrowing as it goes: no hash, so no collision). It starts from
    where the window's rarest name is and compares the rarer names first: a window of common
    kernels around one rare one is found from a few hundred places, not from every common one."""
    names = seq.codes[first:first + n]
    rarest_first = np.argsort(seq.frequency(names), kind="stable")
    j = int(rarest_first[0])
    pos = seq.positions(int(names[j])) - j
    pos = pos[np.searchsorted(pos, 0):np.searchsorted(pos, seq.size - n + 1)]
    for i, j in enumerate(rarest_first[1:].tolist(), 1):
        if len(pos) <= _FEW_PLACES:  # the rest of the names at once: a numpy step per name costs more
            rest = rarest_first[i:]
            pos = pos[(seq.codes[pos[:, None] + rest] == names[rest]).all(axis=1)]
            break
        pos = pos[seq.codes[pos + j] == names[j]]
    return pos[seq.in_one_stream(n, pos)]


def _non_overlapping(pos: np.ndarray, n: int) -> np.ndarray:
    """Left-to-right greedy: keep a window if it starts after the last kept one ends."""
    kept = np.empty(len(pos), np.int64)
    count = _native.search.non_overlapping(np.ascontiguousarray(pos, np.int64), n, kept)
    return kept[:count].astype(pos.dtype, copy=False)
