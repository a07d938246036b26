"""Fitting each rank's clock to the reference rank's from the ends of matched collectives.

A collective's kernels end at nearly the same instant on every rank of its group (a
straggler moves the others' starts, not the ends), so for rank r and each instance it
shares with an aligned rank, y = end_r - end_ref (the aligned rank's end) is r's clock
offset at that moment. The model, in r's own clock: ``shift(t) = offset + drift * (t - x0)``
(x0: r's first matched end), and the aligned time is ``t - shift(t)``; drift is kept as an
integer in parts per billion so shifts are exact integer ns (floor division).

The fit is robust: the offset is the median of y; the drift (only with ``MIN_DRIFT_MATCHES``
matches spanning ``MIN_DRIFT_SPAN_NS``) the Theil-Sen slope (median of pairwise slopes), kept
only where it halves the residuals' spread and stays below ``MAX_DRIFT_PPB``. Matches more
than ``max(3 sigma, INLIER_FLOOR_NS)`` (sigma from the median absolute deviation, at most
``INLIER_CEILING_NS``) from the fit are dropped and the fit redone by least squares on the
rest. A rank is refused (its recorded clock kept, the reason said) with fewer than
``MIN_MATCHES`` matches, or when fewer than half of them agree. The lowest rank is the
reference; a rank that shares nothing with it is fitted against any rank already aligned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...util.lazy_pandas import pd
from .matching import Matched

MIN_MATCHES = 3
MIN_DRIFT_MATCHES = 6
MIN_DRIFT_SPAN_NS = 10_000_000
MAX_DRIFT_PPB = 1_000_000  # 1000 ppm: no quartz drifts so far; a slope beyond is noise
INLIER_FLOOR_NS = 10_000
INLIER_CEILING_NS = 500_000
PAIRS_AT_MOST = 200  # all pairwise slopes up to this many matches, else i with i + n/2
CLOCK_COLUMNS = ("rank", "status", "offset_ns", "drift_ppb", "x0_ns", "matches", "inliers", "residual_median_ns",
                 "residual_max_ns", "against")


@dataclass
class ClockFit:
    """Per rank: its fit (``table``: ``CLOCK_COLUMNS``; status ``reference``, ``fitted``,
    ``refused: why`` or ``recorded`` with --no-align); ``shift(rank, t)`` is what to take off."""

    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    _params: dict[int, tuple[int, int, int]] | None = field(default=None, init=False, repr=False, compare=False)

    def params(self, rank: int) -> tuple[int, int, int]:
        if self._params is None:
            t = self.table
            self._params = {}
            for r, o, d, x in zip(*(t[c].tolist() for c in ("rank", "offset_ns", "drift_ppb", "x0_ns"))):
                self._params.setdefault(int(r), (int(o), int(d), int(x)))  # the first row of a rank
        return self._params.get(rank, (0, 0, 0))

    def shift(self, rank: int, t: np.ndarray | int) -> np.ndarray:
        """What to take off rank ``rank``'s times ``t`` (its own clock, ns) to align them."""
        return _shift(*self.params(rank), t)

    def aligned(self, rank: int, t: np.ndarray) -> np.ndarray:
        return np.asarray(t, np.int64) - self.shift(rank, np.asarray(t, np.int64))

    @property
    def disagree(self) -> bool:
        """Whether some rank was refused because its matches disagree (try matching otherwise)."""
        return bool(self.table["status"].str.contains("disagree").any())


def fit_clocks(matched: Matched, ranks: list[int], *, align: bool = True) -> ClockFit:
    members = matched.members
    rows: dict[int, dict] = {}
    if not ranks:
        return ClockFit(_table([]))
    if not align:
        return ClockFit(_table([_row(r, "recorded") for r in ranks]), ["--no-align: the recorded clocks are kept"])
    reference = ranks[0]
    rows[reference] = _row(reference, "reference")
    notes: list[str] = []
    aligned_end: dict[int, dict[int, int]] = {}  # rank -> instance -> aligned end
    mine = {r: dict(zip(g["instance"].tolist(), g["end_ns"].tolist())) for r, g in members.groupby("rank")}
    aligned_end[reference] = mine.get(reference, {})
    pending = [r for r in ranks if r != reference]
    progress = True
    while pending and progress:
        progress = False
        for r in list(pending):
            ends = mine.get(r, {})
            pairs = []
            against = None
            for anchor in sorted(aligned_end):
                shared = [(e, aligned_end[anchor][i]) for i, e in ends.items() if i in aligned_end[anchor]]
                if len(shared) > len(pairs):
                    pairs, against = shared, anchor
            if not pairs:
                continue
            fit = _fit(np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))
            status = fit.pop("status")
            rows[r] = _row(r, status, against=against, **fit)
            pending.remove(r)
            progress = True
            if status == "fitted":  # its ends, aligned, anchor the ranks not fitted yet
                own = np.fromiter(ends.values(), np.int64, len(ends))
                shift = _shift(int(rows[r]["offset_ns"]), int(rows[r]["drift_ppb"]), int(rows[r]["x0_ns"]), own)
                aligned_end[r] = dict(zip(ends, (own - shift).tolist()))
    for r in pending:
        rows[r] = _row(r, "refused: shares no matched collective with an aligned rank")
    for r in ranks:
        status = rows[r]["status"]
        if status.startswith("refused"):
            notes.append(f"rank {r}: clock not aligned ({status.removeprefix('refused: ')}): its recorded clock is kept")
    return ClockFit(_table([rows[r] for r in ranks]), notes)


def _shift(offset: int, drift: int, x0: int, t: np.ndarray | int) -> np.ndarray:
    """offset + floor((t - x0) * drift / 1e9), exactly (int64, no overflow)."""
    q, rest = np.divmod(np.asarray(t, np.int64) - x0, 1_000_000_000)
    return offset + q * drift + rest * drift // 1_000_000_000


def _fit(own: np.ndarray, ref: np.ndarray) -> dict:
    """Offset and drift of ``own`` ends against ``ref`` ends (same instances), robustly."""
    n = len(own)
    if n < MIN_MATCHES:
        return {"status": f"refused: {n} matched collective(s), fewer than {MIN_MATCHES}", "matches": n}
    order = np.argsort(own, kind="stable")
    own, ref = own[order], ref[order]
    x0 = int(own[0])
    y = (own - ref).astype(np.float64)  # exact: int64 differences, then small
    u = (own - x0).astype(np.float64)
    off0 = float(np.median(y))
    res0 = y - off0
    slope = 0.0
    if n >= MIN_DRIFT_MATCHES and u[-1] >= MIN_DRIFT_SPAN_NS:
        s = _theil_sen(u, y)
        off1 = float(np.median(y - s * u))
        res1 = y - off1 - s * u
        if _spread(res1) < 0.5 * _spread(res0) and abs(s) * 1e9 < MAX_DRIFT_PPB:
            slope, off0, res0 = s, off1, res1
    sigma = 1.4826 * _spread(res0)
    keep = np.abs(res0) <= min(max(3 * sigma, INLIER_FLOOR_NS), INLIER_CEILING_NS)
    inliers = int(keep.sum())
    if inliers < max(MIN_MATCHES, (n + 1) // 2):
        return {"status": f"refused: the matches disagree ({inliers} of {n} within the fit's spread)",
                "matches": n, "inliers": inliers, "x0_ns": x0,
                "residual_median_ns": int(np.median(np.abs(res0))), "residual_max_ns": int(np.abs(res0).max())}
    if slope:
        slope, offset = np.polyfit(u[keep], y[keep], 1) if inliers >= 2 else (slope, off0)
    else:
        offset = float(np.median(y[keep]))
    drift_ppb = int(round(slope * 1e9))
    offset_ns = int(round(offset))
    fitted = offset_ns + (own - x0) * drift_ppb // 1_000_000_000
    res = np.abs((own - ref) - fitted)
    return {"status": "fitted", "offset_ns": offset_ns, "drift_ppb": drift_ppb, "x0_ns": x0, "matches": n,
            "inliers": inliers, "residual_median_ns": int(np.median(res[keep])), "residual_max_ns": int(res[keep].max())}


def _theil_sen(u: np.ndarray, y: np.ndarray) -> float:
    n = len(u)
    if n <= PAIRS_AT_MOST:
        i, j = np.triu_indices(n, 1)
    else:
        i = np.arange(n // 2)
        j = i + n // 2
    du = u[j] - u[i]
    ok = du > 0
    return float(np.median((y[j] - y[i])[ok] / du[ok])) if ok.any() else 0.0


def _spread(res: np.ndarray) -> float:
    return float(np.median(np.abs(res - np.median(res))))


def _row(rank: int, status: str, *, offset_ns: int = 0, drift_ppb: int = 0, x0_ns: int = 0, matches: int = 0,
         inliers: int = 0, residual_median_ns: int = 0, residual_max_ns: int = 0, against: int | None = None) -> dict:
    return {"rank": rank, "status": status, "offset_ns": offset_ns, "drift_ppb": drift_ppb, "x0_ns": x0_ns,
            "matches": matches, "inliers": inliers, "residual_median_ns": residual_median_ns,
            "residual_max_ns": residual_max_ns, "against": -1 if against is None else against}


def _table(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(CLOCK_COLUMNS))
    for c in CLOCK_COLUMNS:
        if c != "status":
            df[c] = df[c].astype(np.int64)
    return df
