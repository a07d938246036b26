"""The limits of each GPU the roofline measures against: dense peak FLOP/s per math unit and type,
and memory bandwidth, keyed by the name in the trace's ``deviceProperties``. Each number is the
vendor's datasheet figure (docs/roofline.md lists the sources); tensor figures are without
sparsity. A user's table (``--gpu-limits FILE``, read by ``io.gpu_limits``) overrides or adds GPUs.
A GPU the table does not know gets no roofline: never a guessed peak.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ...errors import UsageError
from .dtypes import PEAK_KEYS


@dataclass(frozen=True)
class GpuLimits:
    """One GPU model: ``peaks`` in TFLOP/s (TOP/s for int8) per ``dtypes`` peak key, ``memory_gbps``
    in GB/s (both exact fractions of the datasheet's decimals)."""

    name: str
    memory_gbps: Fraction
    peaks: Mapping[str, Fraction]

    def peak(self, unit: str) -> Fraction | None:
        return self.peaks.get(unit)


def _gpu(name: str, memory_gbps: str, **peaks: str) -> GpuLimits:
    return GpuLimits(name, Fraction(memory_gbps), {k: Fraction(v) for k, v in peaks.items()})


def _hopper(name: str, memory_gbps: str) -> GpuLimits:
    """H100 SXM and H200 SXM: the same peaks in their datasheets (tensor figures there with sparsity: 989,
    1,979, 3,958, halved here)."""
    return _gpu(name, memory_gbps, fp64="34", fp64_tensor="67", fp32="67", tf32_tensor="494.5",
                bf16_tensor="989.5", fp16_tensor="989.5", fp8_tensor="1979", int8_tensor="1979")


def _a100(name: str, memory_gbps: str) -> GpuLimits:
    return _gpu(name, memory_gbps, fp64="9.7", fp64_tensor="19.5", fp32="19.5", tf32_tensor="156",
                bf16_tensor="312", fp16_tensor="312", int8_tensor="624")


# (pattern on the deviceProperties name, limits); the first match wins. A variant the datasheets do not
# give (V100 SXM3 or FHHL, H100 NVL, H200 NVL, GH200, GB200, A10G, ...) matches none: no guessed peak.
BUILT_IN: tuple[tuple[str, GpuLimits], ...] = (
    (r"V100S", _gpu("V100S PCIe", "1134", fp64="8.2", fp32="16.4", fp16_tensor="130")),
    (r"V100[- ]PCI", _gpu("V100 PCIe", "900", fp64="7", fp32="14", fp16_tensor="112")),
    (r"V100[- ]SXM2", _gpu("V100 SXM2", "900", fp64="7.8", fp32="15.7", fp16_tensor="125")),
    (r"A100.*(80GB|PG509-210).*PCI|A100.*PCI.*80GB", _a100("A100 80GB PCIe", "1935")),
    (r"A100.*(80GB|PG509-210)", _a100("A100 80GB SXM", "2039")),
    (r"A100.*40GB", _a100("A100 40GB", "1555")),
    (r"\bA10\b", _gpu("A10", "600", fp32="31.2", tf32_tensor="62.5", bf16_tensor="125", fp16_tensor="125",
                     int8_tensor="250")),
    (r"\bL40S\b", _gpu("L40S", "864", fp32="91.6", tf32_tensor="183", bf16_tensor="362.05",
                      fp16_tensor="362.05", fp8_tensor="733", int8_tensor="733")),
    (r"\bL4\b", _gpu("L4", "300", fp32="30.3", tf32_tensor="60", bf16_tensor="121", fp16_tensor="121",
                    fp8_tensor="242.5", int8_tensor="242.5")),
    (r"H100.*PCI", _gpu("H100 PCIe", "2000", fp64="26", fp64_tensor="51", fp32="51", tf32_tensor="378",
                        bf16_tensor="756.5", fp16_tensor="756.5", fp8_tensor="1513", int8_tensor="1513")),
    (r"H100 80GB HBM3|H100 SXM", _hopper("H100 SXM", "3350")),
    (r"(?<!G)H200(?! NVL)", _hopper("H200 SXM", "4800")),
    (r"(?<!G)B200", _gpu("B200", "8000", fp64="37", fp64_tensor="37", fp32="75", tf32_tensor="1125",
                   bf16_tensor="2250", fp16_tensor="2250", fp8_tensor="4500", int8_tensor="4500")),
    # An MI250X is two GCDs, each its own device (the one a trace names): the datasheet's figures, for the
    # module, halved.
    (r"MI250X", _gpu("MI250X (one GCD)", "1638.4", fp64="23.95", fp64_tensor="47.85", fp32="23.95",
                     bf16_tensor="191.5", fp16_tensor="191.5", int8_tensor="191.5")),
    (r"MI300X", _gpu("MI300X", "5300", fp64="81.7", fp64_tensor="163.4", fp32="163.4", tf32_tensor="653.7",
                     bf16_tensor="1307.4", fp16_tensor="1307.4", fp8_tensor="2614.9", int8_tensor="2614.9")),
)



def limits_for(device_name: str, extra: Mapping[str, GpuLimits] | None = None) -> GpuLimits | None:
    """The limits of the GPU ``device_name`` (as ``deviceProperties`` names it): a user table's
    entry of that exact name first, then the built-in table's first matching pattern."""
    if extra and device_name in extra:
        return extra[device_name]
    for pattern, limits in BUILT_IN:
        if re.search(pattern, device_name):
            return limits
    return None


def parse_limits(table: Mapping[str, object], source: str) -> dict[str, GpuLimits]:
    """A user's table: ``{"<deviceProperties name>": {"memory_gbps": 3350, "tflops": {"bf16_tensor":
    989.5, ...}}}`` (numbers or decimal strings). One line naming the entry where it is wrong."""
    out = {}
    for name, entry in table.items():
        where = f"{source}: GPU {name!r}"
        if type(entry) is not dict:
            raise UsageError(f"{where}: expected an object with memory_gbps and tflops")
        unknown = set(entry) - {"memory_gbps", "tflops"}
        if unknown:
            raise UsageError(f"{where}: unknown keys {', '.join(sorted(unknown))} (known: memory_gbps, tflops)")
        peaks = entry.get("tflops", {})
        if type(peaks) is not dict:
            raise UsageError(f"{where}: tflops must be an object of {', '.join(PEAK_KEYS)}")
        bad = set(peaks) - set(PEAK_KEYS)
        if bad:
            raise UsageError(f"{where}: unknown peak {', '.join(sorted(bad))} (known: {', '.join(PEAK_KEYS)})")
        out[name] = GpuLimits(name, _positive(entry.get("memory_gbps"), f"{where}: memory_gbps"),
                              {k: _positive(v, f"{where}: tflops.{k}") for k, v in peaks.items()})
    return out


def _positive(value: object, where: str) -> Fraction:
    if type(value) in (int, float, str):
        try:
            number = Fraction(str(value))
        except (ValueError, ZeroDivisionError):
            number = None
        if number is not None and number > 0:
            return number
    raise UsageError(f"{where}: expected a positive number, got {value!r}")
