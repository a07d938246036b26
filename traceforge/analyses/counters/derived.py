"""Derived metrics from raw hardware counters, with the formulas written down.

Durations are the *trace's* kernel durations (``dur_ns``): ncu replays each kernel alone
and the CUPTI range profiler replays it once per counter pass, so their times are not the
real run's. Where a kernel has no trace duration (range-profiler traces have no kernel
events) rates are left empty (NaN in tables, absent from args).

- ``flops`` = sum over the SASS thread-instruction counters
  ``smsp__sass_thread_inst_executed_op_{h,f,d}{add,mul,fma}_pred_on.sum`` with weight 2
  for fma and 1 for add/mul (CUDA-core FLOPs; tensor-core work is not in these counters).
- ``achieved_tflops`` = flops / dur_ns / 1e3.
- ``dram_bytes`` = ``dram__bytes_read.sum`` + ``dram__bytes_write.sum`` (or ``dram__bytes.sum``).
- ``dram_gbps`` = dram_bytes / dur_ns (bytes per ns = GB/s).
- ``l2_bytes`` = ``lts__t_bytes.sum``, else 32 x sectors (``lts__t_sectors.sum``, else the
  read + write sectors from the texture unit, ``lts__t_sectors_srcunit_tex_op_{read,write}.sum``,
  else ``lts__t_sectors_op_{read,write}.sum``): an L2 sector is 32 bytes.
- ``tensor_util_pct`` = the first tensor-pipe utilisation counter present
  (``sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active``, ...).
- ``arithmetic_intensity`` = flops / dram_bytes (FLOP per DRAM byte).
- ``efficiency_pct`` = 100 x max(dram_gbps / peak DRAM GB/s, tensor_util_pct / peak tensor %),
  llm.c's figure: a kernel should be bound by either DRAM bandwidth or the tensor cores.
  Peaks: ``--peak-dram-gbps`` / ``--peak-tensor-pct``, else the GPU's spec-sheet DRAM
  bandwidth looked up by its ``deviceProperties`` name, else (like llm.c) the highest
  bandwidth any measured kernel reached; tensor peak 100 % if some kernel exceeds 50 %,
  else 50 % (consumer GPUs reach half of peak on this counter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...util.lazy_pandas import pd

SECTOR_BYTES = 32
FLOP_COUNTERS: dict[str, int] = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": 2 if op == "fma" else 1
    for p in "hfd" for op in ("add", "mul", "fma")
}
DRAM_BYTES = (("dram__bytes_read.sum", "dram__bytes_write.sum"), ("dram__bytes.sum",))
L2_BYTES = (("lts__t_bytes.sum",),)
L2_SECTORS = (
    ("lts__t_sectors.sum",),
    ("lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"),
    ("lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum"),
)
TENSOR_PCT = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
)
DERIVED = ("flops", "achieved_tflops", "dram_bytes", "dram_gbps", "l2_bytes", "tensor_util_pct",
           "arithmetic_intensity", "efficiency_pct")

# Spec-sheet DRAM bandwidth (GB/s) by deviceProperties name, most specific pattern first.
PEAK_DRAM_GBPS: tuple[tuple[str, float], ...] = (
    ("H200", 4800.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),  # 40 GB parts, including Meta's A100-PG509-200
    ("V100", 900.0),
)


@dataclass(frozen=True)
class Peaks:
    """What ``efficiency_pct`` is measured against, and where each number came from."""

    dram_gbps: float | None
    dram_source: str
    tensor_pct: float | None
    tensor_source: str


def device_peak_dram(metadata: dict) -> dict[int, tuple[float, str]]:
    """Spec-sheet DRAM GB/s per device id from ``deviceProperties`` names we know."""
    peaks = {}
    for props in metadata.get("deviceProperties") or []:
        if not isinstance(props, dict) or type(props.get("id")) is not int:
            continue
        name = str(props.get("name", ""))
        for pattern, gbps in PEAK_DRAM_GBPS:
            if pattern in name:
                peaks[props["id"]] = (gbps, name)
                break
    return peaks


def _sum_first(df: pd.DataFrame, choices: tuple[tuple[str, ...], ...]) -> pd.Series:
    """Row-wise sum of the first group of counters that the table has (NaN where none)."""
    for group in choices:
        present = [c for c in group if c in df]
        if present:
            return df[present].sum(axis=1, min_count=1).astype(float)
    return pd.Series(np.nan, index=df.index)


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    den = den.where(den > 0)
    return num / den


def add_derived(df: pd.DataFrame, dur_ns: pd.Series) -> None:
    """Add the ``DERIVED`` columns except ``efficiency_pct`` (see ``add_efficiency``)."""
    flop_cols = [c for c in FLOP_COUNTERS if c in df]
    if flop_cols:
        weights = np.array([FLOP_COUNTERS[c] for c in flop_cols], dtype=float)
        flops = pd.Series(np.nan_to_num(df[flop_cols].to_numpy(float)) @ weights, index=df.index)
        flops[df[flop_cols].isna().all(axis=1)] = np.nan
    else:
        flops = pd.Series(np.nan, index=df.index)
    dur = dur_ns.astype(float)
    df["flops"] = flops
    df["achieved_tflops"] = _ratio(flops, dur) / 1e3
    df["dram_bytes"] = _sum_first(df, DRAM_BYTES)
    df["dram_gbps"] = _ratio(df["dram_bytes"], dur)
    l2 = _sum_first(df, L2_BYTES)
    df["l2_bytes"] = l2.where(l2.notna(), _sum_first(df, L2_SECTORS) * SECTOR_BYTES)
    tensor = next((c for c in TENSOR_PCT if c in df), None)
    df["tensor_util_pct"] = df[tensor].astype(float) if tensor else np.nan
    df["arithmetic_intensity"] = _ratio(flops, df["dram_bytes"])


def choose_peaks(df: pd.DataFrame, metadata: dict, *, dram_gbps: float | None = None,
                 tensor_pct: float | None = None) -> Peaks:
    """Peaks for ``efficiency_pct`` (options first, then the device, then the data)."""
    if dram_gbps is not None:
        dram, dram_src = float(dram_gbps), "--peak-dram-gbps"
    else:
        known = device_peak_dram(metadata)
        devices = set(df["device"].tolist()) if "device" in df else set()
        found = {known[d] for d in devices if d in known}
        observed = df["dram_gbps"].max() if "dram_gbps" in df else np.nan
        if len(found) == 1:
            (dram, name), = found
            dram_src = f"spec sheet of {name}"
        elif np.isfinite(observed) and observed > 0:
            dram, dram_src = float(observed), "highest measured kernel (GPU not in the spec table)"
        else:
            dram, dram_src = None, "unknown"
    if tensor_pct is not None:
        tensor, tensor_src = float(tensor_pct), "--peak-tensor-pct"
    else:
        top = df["tensor_util_pct"].max() if "tensor_util_pct" in df else np.nan
        if np.isfinite(top):
            tensor = 100.0 if top > 50.0 else 50.0
            tensor_src = "llm.c rule: 100 % if any kernel exceeds 50 %, else 50 %"
        else:
            tensor, tensor_src = None, "no tensor counter"
    return Peaks(dram, dram_src, tensor, tensor_src)


def add_efficiency(df: pd.DataFrame, peaks: Peaks) -> None:
    """``efficiency_pct`` = 100 x max(DRAM share, tensor share) over the shares we can compute."""
    shares = []
    if peaks.dram_gbps:
        shares.append(df["dram_gbps"] / peaks.dram_gbps)
    if peaks.tensor_pct:
        shares.append(df["tensor_util_pct"] / peaks.tensor_pct)
    if shares:
        df["efficiency_pct"] = pd.concat(shares, axis=1).max(axis=1, skipna=True) * 100.0
    else:
        df["efficiency_pct"] = np.nan
