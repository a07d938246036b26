"""The element types PyTorch's profiler writes in ``Input type`` (``record_shapes=True``): their
sizes in bytes, and the math unit a matrix op of that type runs on."""

from __future__ import annotations

# Bytes per element, by the name ``Input type`` gives (c10's names, as the profiler writes them).
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1,
    "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "unsigned int": 4, "unsigned long": 8, "unsigned short": 2,
}

# The peak keys of a GPU's limits (``limits.GpuLimits.peaks``): dense FLOP/s of one math unit and type.
FP64, FP64_TENSOR, FP32, TF32_TENSOR = "fp64", "fp64_tensor", "fp32", "tf32_tensor"
FP16_TENSOR, BF16_TENSOR, FP8_TENSOR, INT8_TENSOR = "fp16_tensor", "bf16_tensor", "fp8_tensor", "int8_tensor"
PEAK_KEYS = (FP64, FP64_TENSOR, FP32, TF32_TENSOR, FP16_TENSOR, BF16_TENSOR, FP8_TENSOR, INT8_TENSOR)

_TENSOR_UNIT = {
    "double": FP64_TENSOR, "c10::Half": FP16_TENSOR, "c10::BFloat16": BF16_TENSOR,
    "c10::Float8_e4m3fn": FP8_TENSOR, "c10::Float8_e5m2": FP8_TENSOR, "c10::Float8_e4m3fnuz": FP8_TENSOR,
    "c10::Float8_e5m2fnuz": FP8_TENSOR, "signed char": INT8_TENSOR, "unsigned char": INT8_TENSOR,
}
TF32_CHOICE = "float"  # float32 matrix math: TF32 tensor cores where the kernel says so, else FP32 (see ``matrix_unit``)


def is_dtype(name: object) -> bool:
    return type(name) is str and name in DTYPE_BYTES


def matrix_unit(dtype: str) -> str | None:
    """The peak a matrix op (GEMM, convolution, attention) of ``dtype`` runs at: the tensor unit of
    its type; ``float`` is ``TF32_CHOICE`` (decided per kernel); None for a type with no such unit."""
    if dtype == "float":
        return TF32_CHOICE
    return _TENSOR_UNIT.get(dtype)


def float32_unit(kernel_name: str) -> str:
    """A float32 matrix kernel's unit: TF32 tensor cores when its name says ``tf32`` (cuDNN's and
    cuBLAS's kernels name their math), else the FP32 (non-tensor) peak."""
    return TF32_TENSOR if "tf32" in kernel_name.lower() else FP32
