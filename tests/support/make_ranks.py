#!/usr/bin/env python3
"""Make N rank traces from one real (or sample) trace, with known clocks and stragglers.

Every rank is a copy of the base trace's events with its clock moved: a rank's time is
``t + offset + drift * (t - T0)`` (T0: the base's first ts; ``offset`` up to
``--max-offset-s`` either way, ``drift`` up to ``--max-drift-ppm``; integer ns, floor). Then
``--delays`` chosen collective kernels are made late on one chosen rank: that rank's kernel
starts ``delay`` later and the others' kernels last ``delay`` longer (all still end together,
as NCCL's do). ``--copies K`` first tiles the base K times, ``--gap-ms`` apart (ids moved per
copy), for traces long enough to fit a drift. Everything comes from ``--seed``: the same
arguments write the same files. ``truth.txt`` (JSON; not .json, so a directory of the ranks reads as traces only) beside the ranks says what was done:
per rank its offset_ns, drift_ppb and T0_ns; per delay the kernel's event ordinal, rank and
delay_ns.

    python scripts/make_ranks.py ../shared/traces/hta/nccl_parser_config/nccl_data.json.gz -o /tmp/r8 --ranks 8
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
from decimal import Decimal
from pathlib import Path

NS = 1000
KERNEL = re.compile(r"^(?:nccl|rccl)\w*?(?:Kernel|Dev)", re.IGNORECASE)
ID_ARGS = ("correlation", "External id", "external id")


def load(path: Path) -> dict:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    return doc


def to_ns(value: object) -> int:
    return int(Decimal(str(value)) * NS)


def us_text(ns: int) -> str:
    q, r = divmod(ns, NS)
    return str(q) if r == 0 else f"{q}.{r:03d}".rstrip("0")


def tiled(events: list[dict], copies: int, gap_ns: int) -> list[dict]:
    """The events, then ``copies - 1`` more copies of the timed ones, each ``span + gap`` later."""
    if copies <= 1:
        return events
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    lo = min(to_ns(e["ts"]) for e in timed)
    hi = max(to_ns(e["ts"]) + (to_ns(e["dur"]) if "dur" in e else 0) for e in timed)
    period = hi - lo + gap_ns
    top = max([int(e["id"]) for e in timed if type(e.get("id")) is int] +
              [int(e["args"][k]) for e in timed if isinstance(e.get("args"), dict) for k in ID_ARGS
               if type(e["args"].get(k)) is int] + [0]) + 1
    out = list(events)
    for k in range(1, copies):
        for e in timed:
            c = dict(e)
            c["ts"] = Decimal(to_ns(e["ts"]) + k * period) / NS
            if type(e.get("id")) is int:
                c["id"] = e["id"] + k * top
            if isinstance(e.get("args"), dict):
                c["args"] = {a: (v + k * top if a in ID_ARGS and type(v) is int else v) for a, v in e["args"].items()}
            out.append(c)
    return out


def event_text(e: dict, ts_ns: int | None, dur_ns: int | None) -> str:
    body = {k: v for k, v in e.items()}
    if ts_ns is not None:
        body["ts"] = "\0TS"
    if dur_ns is not None:
        body["dur"] = "\0DUR"
    text = json.dumps(body, default=lambda d: float(d) if isinstance(d, Decimal) else str(d), separators=(", ", ": "))
    if ts_ns is not None:
        text = text.replace('"\\u0000TS"', us_text(ts_ns))
    if dur_ns is not None:
        text = text.replace('"\\u0000DUR"', us_text(dur_ns))
    return text


def make(base: Path, out: Path, ranks: int, seed: int = 0, *, delays: int = 3, max_offset_s: float = 2.0,
         max_drift_ppm: float = 50.0, copies: int = 1, gap_ms: float = 0.0, min_delay_us: int = 50,
         max_delay_us: int = 300) -> dict:
    doc = load(base)
    events = tiled(doc["traceEvents"], copies, int(gap_ms * 1e6))
    rng = random.Random(seed)
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    t0 = min(to_ns(e["ts"]) for e in timed)
    clocks = {r: {"offset_ns": rng.randint(-int(max_offset_s * 1e9), int(max_offset_s * 1e9)),
                  "drift_ppb": rng.randint(-int(max_drift_ppm * 1000), int(max_drift_ppm * 1000)), "T0_ns": t0}
              for r in range(ranks)}
    kernels = [i for i, e in enumerate(events) if e.get("ph") == "X" and KERNEL.match(str(e.get("name", "")))]
    chosen = sorted(rng.sample(kernels, min(delays, len(kernels)))) if ranks > 1 else []
    late = {i: (rng.randrange(ranks), rng.randint(min_delay_us, max_delay_us) * NS) for i in chosen}
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        c = clocks[r]
        info = dict(doc.get("distributedInfo") or {}) | {"rank": r, "world_size": ranks}
        head = {k: v for k, v in doc.items() if k != "traceEvents"} | {"distributedInfo": info}
        texts = []
        for i, e in enumerate(events):
            ts = to_ns(e["ts"]) if "ts" in e and e.get("ph") != "M" else None
            dur = to_ns(e["dur"]) if "dur" in e and ts is not None else None
            if i in late and ts is not None:
                rank, delay = late[i]
                if rank == r:
                    ts += delay
                elif dur is not None:
                    dur += delay
            if ts is not None:
                ts += c["offset_ns"] + (ts - t0) * c["drift_ppb"] // 1_000_000_000
                if ts < 0:
                    raise SystemExit(f"make_ranks: rank {r}'s offset makes a ts negative: lower --max-offset-s")
            texts.append(event_text(e, ts, dur))
        keys = json.dumps(head, default=lambda d: float(d) if isinstance(d, Decimal) else str(d))[1:-1]
        text = "{" + keys + (", " if keys else "") + '"traceEvents": [\n' + ",\n".join(texts) + "\n]}\n"
        with gzip.open(out / f"rank{r}.json.gz", "wb", compresslevel=1) as f:
            f.write(text.encode())
    truth = {"ranks": {str(r): clocks[r] for r in range(ranks)},
             "delays": [{"ordinal": i, "rank": late[i][0], "delay_ns": late[i][1]} for i in chosen]}
    (out / "truth.txt").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", type=Path, help="a trace with collective kernels (.json or .json.gz)")
    p.add_argument("-o", "--out", type=Path, required=True, help="directory for rank<R>.json.gz and truth.txt")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--delays", type=int, default=3, help="collectives made late on one rank (default 3)")
    p.add_argument("--max-offset-s", type=float, default=2.0)
    p.add_argument("--max-drift-ppm", type=float, default=50.0)
    p.add_argument("--copies", type=int, default=1, help="tile the base this many times first")
    p.add_argument("--gap-ms", type=float, default=0.0, help="between the copies")
    a = p.parse_args(argv)
    truth = make(a.base, a.out, a.ranks, a.seed, delays=a.delays, max_offset_s=a.max_offset_s,
                 max_drift_ppm=a.max_drift_ppm, copies=a.copies, gap_ms=a.gap_ms)
    print(f"{a.out}: {a.ranks} ranks, {len(truth['delays'])} delayed collectives", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
