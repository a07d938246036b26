"""Compare traceforge's roofline work model with TraceLens' perf model, op by op.

1. In TraceLens' own environment (docs/roofline.md says how to make it), per trace:
   /work/venv-tracelens/bin/python scripts/tracelens_perf_model.py TRACE tracelens.csv
2. Here, from the project's root: PYTHONPATH=. python scripts/roofline_vs_tracelens.py TRACE tracelens.csv

Per op name + Input Dims that both model: FLOPs and bytes per op instance from each, and their
ratio; the rows outside 1 % first. First the kernel time each models (TraceLens' rows with numbers,
less the memcpy and memset they hold: those are not kernels, and traceforge's memcpy_bw covers them).
"""

from __future__ import annotations

import json
import sys

import pandas as pd

import traceforge


def compare(trace: str, tracelens_csv: str) -> pd.DataFrame:
    ours = traceforge.roofline(trace)
    ops = ours.ops.assign(flops_each=lambda f: f["flops"] / f["count"], bytes_each=lambda f: f["bytes"] / f["count"])
    ops["dims"] = ops["shapes"].map(lambda s: json.dumps(json.loads(s), separators=(",", ":")))
    theirs = pd.read_csv(tracelens_csv)
    # rows TraceLens gave no number (its model failed) or no Input Dims are not ops it models
    theirs = theirs.dropna(subset=["GFLOPS", "Data Moved (MB)"])
    theirs = theirs[theirs["dims"].map(lambda s: isinstance(s, str))]
    copies = theirs["copy_us"].sum() / 1e3 if "copy_us" in theirs else 0.0
    kernels = theirs["Kernel Time (µs)"].sum() / 1e3 - copies  # the GPU time TraceLens models that is kernels
    theirs["dims"] = theirs["dims"].map(lambda s: _trimmed(json.loads(s)))
    theirs = theirs.groupby(["name", "dims"], as_index=False).agg(
        tl_flops=("GFLOPS", lambda g: g.iloc[0] * 1e9), tl_bytes=("Data Moved (MB)", lambda g: g.iloc[0] * 1048576),
        tl_count=("GFLOPS", "size"))
    joined = ops.merge(theirs, left_on=["op", "dims"], right_on=["name", "dims"], how="inner")
    joined["flops_ratio"] = joined["flops_each"] / joined["tl_flops"]
    joined["bytes_ratio"] = joined["bytes_each"] / joined["tl_bytes"]
    off = ((joined["flops_ratio"] - 1).abs() > 0.01) | ((joined["bytes_ratio"] - 1).abs() > 0.01)
    joined["within_1pct"] = ~off
    print(f"{trace}: traceforge models {ours.modelled_ns / 1e6:.3f} ms of {ours.kernel_ns / 1e6:.3f} ms kernel time; "
          f"TraceLens {kernels:.3f} ms (and {copies:.3f} ms of memcpy/memset); "
          f"{len(joined)} op shapes both model, {int(off.sum())} outside 1 %")
    out = joined.sort_values(["within_1pct", "time_ns"], ascending=[True, False])
    out.attrs.update(traceforge_ns=ours.modelled_ns, tracelens_ns=round(kernels * 1e6))  # the kernel time each models
    return out


def _trimmed(dims: list) -> str:
    while dims and dims[-1] == []:
        dims.pop()
    return json.dumps(dims, separators=(",", ":"))


if __name__ == "__main__":
    table = compare(sys.argv[1], sys.argv[2])
    cols = ["op", "dims", "family", "count", "flops_each", "tl_flops", "flops_ratio", "bytes_each", "tl_bytes",
            "bytes_ratio"]
    with pd.option_context("display.width", 250, "display.max_colwidth", 60, "display.max_rows", 200):
        print(table[cols].to_string(index=False))
