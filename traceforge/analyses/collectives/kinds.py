"""Collective kinds, element sizes and NCCL's bandwidth formulas.

A collective's kind comes from the first of: the CPU op's ``Collective name`` arg
(``record_param_comms``), the ``nccl:*`` annotation's name, the GPU kernel's name
(``ncclKernel_AllReduce_*``, ``ncclDevKernel_AllGather_*``, RCCL's the same). Each is
normalised to one vocabulary (``all_reduce``, ``all_gather``, ``reduce_scatter``,
``all_to_all``, ``broadcast``, ``reduce``, ``send``, ``recv``, ``send_recv``, ``barrier``,
``gather``, ``scatter``), so ``_allgather_base``, ``all_gather_into_tensor_coalesced`` and
``AllGather`` are one kind.

Bandwidths follow nccl-tests (``doc/PERFORMANCE.md``): algbw = S / t, with S the
collective's size as nccl-tests counts it (all_reduce, broadcast, reduce, all_to_all: the
input; all_gather: the output, n times the input; reduce_scatter: the input, n times the
output), and busbw = algbw x factor(kind, n): 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and all_to_all, 1 for the others.
"""

from __future__ import annotations

import re

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"
BROADCAST, REDUCE, SEND, RECV, SEND_RECV, BARRIER = "broadcast", "reduce", "send", "recv", "send_recv", "barrier"
GATHER, SCATTER, UNKNOWN = "gather", "scatter", "unknown"
P2P_KINDS = frozenset({SEND, RECV, SEND_RECV})

# Normalised (lower case, letters and digits only) names, searched in this order: the first found wins.
_WORDS = (
    ("allreduce", ALL_REDUCE), ("reducescatter", REDUCE_SCATTER), ("allgather", ALL_GATHER),
    ("alltoall", ALL_TO_ALL), ("all2all", ALL_TO_ALL), ("broadcast", BROADCAST), ("bcast", BROADCAST),
    ("barrier", BARRIER), ("sendrecv", SEND_RECV), ("send", SEND), ("recv", RECV), ("gather", GATHER),
    ("scatter", SCATTER), ("reduce", REDUCE),
)
KERNEL_NAME = re.compile(r"^(?:nccl|rccl)\w*?(?:Kernel|Dev)", re.IGNORECASE)  # ncclKernel_*, ncclDevKernel_*
CPU_PREFIXES = ("nccl:", "rccl:")  # torch's annotation of a collective's launch (nccl:all_reduce)
PARAM_COMMS = "record_param_comms"  # torch's CPU op that carries the collective's args

# Bytes per element of torch's dtype names as record_param_comms writes them ("Float"), and of the
# annotation's "Input type" ("float", "c10::BFloat16", "unsigned char").
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "c10::half": 2, "c10::bfloat16": 2, "long": 8, "int64": 8, "long int": 8, "int": 4, "int32": 4,
    "short": 2, "int16": 2, "char": 1, "signed char": 1, "unsigned char": 1, "byte": 1, "int8": 1, "uint8": 1,
    "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
    "complexfloat": 8, "complexdouble": 16, "c10::complex<float>": 8, "c10::complex<double>": 16,
}


def kind_of(name: str | None) -> str | None:
    """The kind a collective's name says (None: it names none)."""
    if not name:
        return None
    text = name.split("(", 1)[0]
    for prefix in CPU_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    if KERNEL_NAME.match(text):  # ncclDevKernel_AllGather_RING_LL: the part after the prefix
        text = text.split("_", 1)[1] if "_" in text else ""
        text = text.split("_", 1)[0] if text.split("_", 1)[0].lower() != "generic" else ""
    flat = re.sub(r"[^a-z0-9]", "", text.lower())
    for word, kind in _WORDS:
        if word in flat:
            return kind
    return None


def is_collective_kernel(name: str) -> bool:
    return bool(KERNEL_NAME.match(name))


def is_collective_cpu_op(name: str) -> bool:
    return name == PARAM_COMMS or name.startswith(CPU_PREFIXES)


def dtype_bytes(dtype: object) -> int | None:
    """Bytes per element of a dtype name, or None if it is not one known here."""
    if not isinstance(dtype, str):
        return None
    return _DTYPE_BYTES.get(dtype.strip().lower().removeprefix("torch."))


def nccl_size(kind: str, in_bytes: int, out_bytes: int) -> int:
    """The collective's size S as nccl-tests counts it (the larger buffer for all_gather and
    reduce_scatter, the input otherwise; what is known where the other is not)."""
    if kind in (ALL_GATHER, REDUCE_SCATTER):
        return max(in_bytes, out_bytes)
    return in_bytes if in_bytes > 0 else out_bytes


def bus_factor(kind: str, n: int) -> float:
    """busbw / algbw for a collective of ``n`` ranks (nccl-tests' factors)."""
    if n <= 1:
        return 1.0 if kind not in (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL) else 0.0
    if kind == ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):
        return (n - 1) / n
    return 1.0
