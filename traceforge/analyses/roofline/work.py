"""The work one CPU operator does, from the shapes the profiler recorded for it (``record_shapes=True``):
FLOPs and bytes, per op family. docs/roofline.md states every rule; in short:

- matrix multiply (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``addbmm``, ``matmul``, ``linear``, ``addmv``,
  ``mv``, ``_scaled_mm``, ...): FLOPs 2·M·N·K·batch; bytes: the inputs read once and the output written once;
- convolution forward: 2 · N · (output spatial size) · (weight elements), i.e. 2·N·Cout·Hout·Wout·(Cin/groups)·kh·kw
  (transposed: the input's spatial size); backward: that again for each of the input and weight gradients
  its output mask asks for;
- attention (SDPA's flash, efficient and cuDNN kernels): forward 2·B·H·P·(D + Dv) with P the (query, key)
  pairs attended (Sq·Sk, or the causal triangle); backward 2·B·H·P·(3·D + 2·Dv) (the scores recomputed,
  then the four gradient products);
- memory-bound ops (elementwise, copies, reductions, softmax, norms, embedding, pooling, optimizer steps):
  bytes of every tensor read once and every output written once (the compulsory traffic); elementwise
  arithmetic counts one FLOP per output element, data movement none;
- Triton kernels Inductor generates for pointwise, reduction, scan and foreach work (``triton_poi_``,
  ``triton_red_``, ``triton_per_``, ``triton_spl_``, ``triton_for_``), from the CPU op Inductor records
  around each launch (named after the kernel; its args are the kernel's arguments): memory-bound, every
  tensor argument moved once, FLOPs not counted (family ``TRITON``).

An op the model does not know, or whose shapes are missing, gets a reason instead of work.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .dtypes import DTYPE_BYTES, FP32, is_dtype, matrix_unit

MATMUL, CONV, ATTENTION = "matmul", "convolution", "attention"
ELEMENTWISE, REDUCTION, NORM, SOFTMAX, COPY = "elementwise", "reduction", "norm", "softmax", "copy"
EMBEDDING, INDEXING, POOLING, OPTIMIZER, LOSS = "embedding", "indexing", "pooling", "optimizer", "loss"
TRITON = "triton (memory-bound from shapes)"  # the family says how it is modelled: the tables show it as is
FAMILIES = (MATMUL, CONV, ATTENTION, ELEMENTWISE, REDUCTION, NORM, SOFTMAX, COPY, EMBEDDING, INDEXING, POOLING,
            OPTIMIZER, LOSS, TRITON)


@dataclass(frozen=True)
class Work:
    """What one CPU op does: ``flops``, ``bytes`` moved, its family, the dtype of its first tensor,
    and the peak it runs against (a ``dtypes`` peak key, or ``dtypes.TF32_CHOICE``)."""

    family: str
    flops: int
    bytes: int
    dtype: str
    unit: str


class _Args:
    """One op's ``Input Dims``, ``Input type`` and ``Concrete Inputs``, read defensively."""

    def __init__(self, shapes: tuple):
        dims, types, concrete = shapes[:3]
        self.dims = dims if type(dims) is list else []
        self.types = types if type(types) is list else []
        self.concrete = concrete if type(concrete) is list else []

    def __len__(self) -> int:
        return len(self.types)

    def is_tensor(self, i: int) -> bool:
        return i < len(self.types) and is_dtype(self.types[i]) and i < len(self.dims) and _is_shape(self.dims[i])

    def shape(self, i: int) -> list[int]:
        if not self.is_tensor(i):
            raise _Missing(f"argument {i} is not a tensor with recorded dims")
        return self.dims[i]

    def dtype(self, i: int) -> str:
        self.shape(i)
        return self.types[i]

    def nbytes(self, i: int) -> int:
        return numel(self.shape(i)) * DTYPE_BYTES[self.types[i]]

    def tensors(self, upto: int | None = None) -> list[int]:
        """The argument positions (below ``upto``) that hold a tensor; one typed as a tensor whose dims
        are not a shape is an error (its work cannot be known)."""
        out = []
        for i in range(min(len(self.types), upto if upto is not None else len(self.types))):
            if self.is_tensor(i):
                out.append(i)
            elif is_dtype(self.types[i]) and i < len(self.dims):
                raise _Missing(f"argument {i}'s dims {self.dims[i]!r} are not a shape")
        return out

    def text(self, i: int) -> str:
        return self.concrete[i] if i < len(self.concrete) and type(self.concrete[i]) is str else ""

    def ints(self, i: int, default: list[int] | None = None) -> list[int]:
        text = self.text(i).strip()
        try:
            if text.startswith("["):
                return [int(x) for x in text[1:-1].split(",") if x.strip()]
            return [int(text)]
        except ValueError:
            if default is None:
                raise _Missing(f"argument {i} ({text!r}) is not a list of ints") from None
            return default

    def flag(self, i: int, default: bool = False) -> bool:
        text = self.text(i).strip()
        return {"True": True, "False": False, "1": True, "0": False}.get(text, default)

    def flags(self, i: int) -> list[bool] | None:
        text = self.text(i).strip()
        if not text.startswith("["):
            return None
        return [x.strip() == "True" for x in text[1:-1].split(",")]

    def tensor_list(self, i: int) -> list[list[int]] | None:
        """The shapes of a TensorList argument, where the profiler recorded them (older PyTorch records none)."""
        if i >= len(self.dims) or self.types[i] != "TensorList" or type(self.dims[i]) is not list:
            return None
        shapes = self.dims[i]
        return shapes if shapes and all(_is_shape(s) for s in shapes) else None


class _Missing(Exception):
    """The shapes an op's rule needs are not in the trace."""


def _is_shape(value: object) -> bool:
    return type(value) is list and all(type(x) is int and x >= 0 for x in value)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def broadcast(shapes: list[list[int]]) -> list[int]:
    """numpy's broadcast of ``shapes`` (a 1 stretches; a 0 wins)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for j, n in enumerate(s, rank - len(s)):
            out[j] = n if out[j] == 1 else (0 if n == 0 else out[j])
    return out


def op_work(name: str, shapes: tuple | None, kernel_names: Sequence[str] = ()) -> Work | str:
    """The work of the CPU op ``name`` with these shapes (``columns.scan.SHAPE_ARGS`` values), or why
    there is none. ``kernel_names``: the kernels it launched (element sizes of TensorLists, which the
    profiler does not type, are read from them)."""
    rule = rule_of(name)
    if rule is None:
        return no_model_reason(name)
    if shapes is None or shapes[0] is None:
        return "no shapes recorded (profile with record_shapes=True)"
    try:
        work = rule(_Args(shapes), _base(name), kernel_names)
    except _Missing as e:
        return f"shapes incomplete: {e}"
    except (ArithmeticError, IndexError, KeyError, TypeError, ValueError) as e:  # shapes no real op has
        return f"shapes not understood ({type(e).__name__}: {e})"
    if not (0 <= work.flops < WORK_LIMIT and 0 <= work.bytes < WORK_LIMIT):
        return "shapes not understood (work beyond 2^62)"
    return work


WORK_LIMIT = 1 << 62  # FLOPs and bytes of one op are int64 columns: more is no real op
COMMUNICATION = "communication: outside the roofline model (bound by the network, not the GPU)"
_COMMUNICATION_PREFIXES = ("nccl:", "c10d::", "rccl:", "gloo:")


TRITON_TEMPLATE = ("a Triton template kernel (Inductor's matrix multiply, convolution or attention): compute-bound "
                   "work its args do not name")
COMPILED_REGION = ("a torch.compile region: its Input Dims are the compiled graph's inputs, not one kernel's "
                   "(a Triton kernel is modelled from the op Inductor records around its launch, named after it)")


def no_model_reason(name: str) -> str:
    """Why an op the model has no rule for is not modelled."""
    if name.startswith(_COMMUNICATION_PREFIXES) or name == COLLECTIVE:
        return COMMUNICATION
    if name.startswith(_TRITON_TEMPLATE_PREFIX):
        return TRITON_TEMPLATE
    if is_compiled_region(name):
        return COMPILED_REGION
    return "no work model for this op"


# Inductor names a kernel it generates "triton_" + the first 3 letters of its category + "_" + the ops it
# fuses + a number (torch/_inductor/codegen/triton.py, define_kernel); the categories are its decorators
# (pointwise, reduction, persistent_reduction, split_scan, foreach: memory-bound work; template: GEMM,
# convolution and attention templates, not).
_TRITON_MEMORY_BOUND = re.compile(r"triton_(poi|red|per|spl|for)_")
_TRITON_TEMPLATE_PREFIX = "triton_tem_"
# The CPU ops of a torch.compile region (Dynamo's frame, AOTAutograd's forward and backward nodes,
# Inductor's call of the compiled graph): they enclose many kernels, and their shapes are the graph's.
_COMPILED_REGION_PREFIXES = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction",
                             "autograd::engine::evaluate_function: CompiledFunction")


def is_triton_memory_bound(name: str) -> bool:
    """An op Inductor records around a launch of one of its memory-bound Triton kernels (by its name)."""
    return _TRITON_MEMORY_BOUND.match(name) is not None


def is_compiled_region(name: str) -> bool:
    return name.startswith(_COMPILED_REGION_PREFIXES)


def _base(name: str) -> str:
    return name[6:] if name.startswith("aten::") else name


def rule_of(name: str) -> Callable | None:
    """The rule for an op name (``aten::`` ops and Inductor's memory-bound Triton kernels), or None when
    the model has none."""
    if not name.startswith("aten::"):
        return _triton if is_triton_memory_bound(name) else None
    base = _base(name)
    rule = _RULES.get(base)
    if rule is None and base.startswith("_foreach_"):
        rule = _foreach
    if rule is None and base in _ELEMENTWISE_ARITY:
        rule = _elementwise
    if rule is None and base.endswith("_") and base[:-1] in _ELEMENTWISE_ARITY:
        rule = _elementwise
    return rule


def is_modelled(name: str) -> bool:
    return rule_of(name) is not None


def reads_shapes(name: str) -> bool:
    """The CPU ops whose shapes the roofline reads: those it models, and DDP's collectives."""
    return name == COLLECTIVE or is_modelled(name)


# --- matrix multiply -------------------------------------------------------------------------------

def _gemm(a: _Args, m: int, n: int, k: int, batch: int, reads: list[int], dtype: str, out_dtype: str | None = None
          ) -> Work:
    out = batch * m * n * DTYPE_BYTES[out_dtype or dtype]
    return Work(MATMUL, 2 * m * n * k * batch, sum(a.nbytes(i) for i in reads) + out, dtype, _unit(dtype))


def _unit(dtype: str) -> str:
    unit = matrix_unit(dtype)
    if unit is None:
        raise _Missing(f"no matrix unit for dtype {dtype}")
    return unit


def _mm(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    first = {"mm": 0, "addmm": 1, "_addmm_activation": 1, "_scaled_mm": 0}[base]
    x, y = a.shape(first), a.shape(first + 1)
    if len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        raise _Missing(f"{x} x {y} is not a matrix product")
    reads = a.tensors()
    out_dtype = None
    if base == "_scaled_mm":
        out_dtype = _SCALAR_TYPES.get(a.text(6).strip()) or "c10::BFloat16"
    return _gemm(a, x[0], y[1], x[1], 1, reads, a.dtype(first), out_dtype)


# c10::ScalarType codes a Concrete Input may hold for a dtype argument
_SCALAR_TYPES = {"5": "c10::Half", "6": "float", "7": "double", "15": "c10::BFloat16", "23": "c10::Float8_e4m3fn",
                 "24": "c10::Float8_e5m2"}


def _bmm(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    first = 0 if base == "bmm" else 1
    x, y = a.shape(first), a.shape(first + 1)
    if len(x) != 3 or len(y) != 3 or x[0] != y[0] or x[2] != y[1]:
        raise _Missing(f"{x} x {y} is not a batched matrix product")
    work = _gemm(a, x[1], y[2], x[2], x[0], a.tensors(), a.dtype(first))
    if base == "addbmm":  # the batch is summed into one M x N output
        out = x[1] * y[2] * DTYPE_BYTES[a.dtype(first)]
        return Work(MATMUL, work.flops, work.bytes - x[0] * out + out, work.dtype, work.unit)
    return work


def _matmul(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    x, y = a.shape(0), a.shape(1)
    if not x or not y:
        raise _Missing("a 0-d operand")
    xm = [1, *x] if len(x) == 1 else x
    ym = [*y, 1] if len(y) == 1 else y
    if xm[-1] != ym[-2]:
        raise _Missing(f"{x} x {y} is not a matrix product")
    batch = numel(broadcast([xm[:-2], ym[:-2]]))
    return _gemm(a, xm[-2], ym[-1], xm[-1], batch, a.tensors(2), a.dtype(0))


def _linear(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    x, w = a.shape(0), a.shape(1)
    if not x or len(w) != 2 or x[-1] != w[1]:
        raise _Missing(f"input {x} and weight {w} do not match")
    return _gemm(a, numel(x[:-1]), w[0], w[1], 1, a.tensors(3), a.dtype(0))


def _mv(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    first = 0 if base == "mv" else 1
    mat, vec = a.shape(first), a.shape(first + 1)
    if len(mat) != 2 or len(vec) != 1 or mat[1] != vec[0]:
        raise _Missing(f"{mat} x {vec} is not a matrix-vector product")
    return _gemm(a, mat[0], 1, mat[1], 1, a.tensors(), a.dtype(first))


# --- convolution -----------------------------------------------------------------------------------

# Per op: positions of (input, weight, stride, padding, dilation, transposed flag or None).
_CONV_ARGS = {
    "convolution": (0, 1, 3, 4, 5, 6), "_convolution": (0, 1, 3, 4, 5, 6),
    "convolution_overrideable": (0, 1, 3, 4, 5, 6),
    "cudnn_convolution": (0, 1, 3, 2, 4, None), "cudnn_convolution_transpose": (0, 1, 4, 2, 5, True),
    "miopen_convolution": (0, 1, 4, 3, 5, None), "miopen_depthwise_convolution": (0, 1, 4, 3, 5, None),
    "cudnn_convolution_relu": (0, 1, 3, 4, 5, None), "cudnn_convolution_add_relu": (0, 1, 5, 6, 7, None),
    "conv2d": (0, 1, 3, 4, 5, False), "conv1d": (0, 1, 3, 4, 5, False), "conv3d": (0, 1, 3, 4, 5, False),
}


def _spread(values: list[int], n: int) -> list[int]:
    return values * n if len(values) == 1 else values


def _conv(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    i_in, i_w, i_stride, i_pad, i_dil, transposed = _CONV_ARGS[base]
    x, w = a.shape(i_in), a.shape(i_w)
    if len(x) < 3 or len(w) != len(x):
        raise _Missing(f"input {x} and weight {w} are not a convolution's")
    spatial = len(x) - 2
    transposed = a.flag(transposed) if type(transposed) is int else bool(transposed)
    stride = _spread(a.ints(i_stride), spatial)
    pad = _spread(a.ints(i_pad), spatial)
    dil = _spread(a.ints(i_dil), spatial)
    if transposed:
        out_spatial = x[2:]  # each input element is scattered through the weight
        out_sp = [(n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in zip(x[2:], stride, pad, dil, w[2:])]
        out_channels = w[1]  # times groups, which the weight's shape does not give: bytes assume 1
    else:
        out_sp = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, s, p, d, k in zip(x[2:], stride, pad, dil, w[2:])]
        out_spatial = out_sp
        out_channels = w[0]
    if min(out_sp, default=1) <= 0:
        raise _Missing(f"output size {out_sp} from input {x}, weight {w}")
    flops = 2 * x[0] * numel(out_spatial) * numel(w)
    dtype = a.dtype(i_in)
    size = DTYPE_BYTES[dtype]
    out = x[0] * out_channels * numel(out_sp) * size
    reads = sum(a.nbytes(i) for i in a.tensors())
    return Work(CONV, flops, reads + out, dtype, _unit(dtype))


def _conv_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    g, x, w = a.shape(0), a.shape(1), a.shape(2)
    if len(x) < 3 or len(w) != len(x) or len(g) != len(x):
        raise _Missing(f"grad {g}, input {x}, weight {w} are not a convolution's")
    mask = a.flags(10) or [True, True, False]
    transposed = a.flag(7)
    one = 2 * x[0] * numel((x if transposed else g)[2:]) * numel(w)  # the forward's FLOPs
    dtype = a.dtype(0)
    gb, xb, wb = a.nbytes(0), a.nbytes(1), a.nbytes(2)
    flops = nbytes = 0
    if mask[0]:
        flops, nbytes = flops + one, nbytes + gb + wb + xb  # reads grad and weight, writes grad_input
    if len(mask) > 1 and mask[1]:
        flops, nbytes = flops + one, nbytes + gb + xb + wb  # reads grad and input, writes grad_weight
    if len(mask) > 2 and mask[2]:
        channels = g[1]
        nbytes += gb + channels * DTYPE_BYTES[dtype]  # bias gradient: a reduction of grad
    return Work(CONV, flops, nbytes, dtype, _unit(dtype))


# --- attention -------------------------------------------------------------------------------------

# Per op: (first of query, key, value; layout "bhsd" or "bshd"; causal argument; its kind; backward).
# Causal kinds: "flag" (is_causal), "mask" (custom_mask_type: 1 top-left, 2 bottom-right).
_ATTENTION_ARGS = {
    "_scaled_dot_product_flash_attention": (0, "bhsd", 4, "flag", False),
    "_scaled_dot_product_flash_attention_backward": (1, "bhsd", 11, "flag", True),
    "_scaled_dot_product_efficient_attention": (0, "bhsd", 6, "flag", False),
    "_scaled_dot_product_efficient_attention_backward": (1, "bhsd", 11, "flag", True),
    "_scaled_dot_product_cudnn_attention": (0, "bhsd", 6, "flag", False),
    "_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", 14, "flag", True),
    "_cudnn_attention_forward": (0, "bhsd", 10, "flag", False),
    "_cudnn_attention_backward": (1, "bhsd", 14, "flag", True),
    "_flash_attention_forward": (0, "bshd", 8, "flag", False),
    "_flash_attention_backward": (1, "bshd", 11, "flag", True),
    "_efficient_attention_forward": (0, "bshd", 9, "mask", False),
    "_efficient_attention_backward": (1, "bshd", 14, "mask", True),
    "_scaled_dot_product_flash_attention_for_cpu": (0, "bhsd", 4, "flag", False),
}


def attended_pairs(sq: int, sk: int, causal: str | None) -> int:
    """(query, key) pairs scored: all, or the causal triangle aligned top-left (query i sees keys
    0..i) or bottom-right (query i sees keys 0..sk-sq+i)."""
    if causal is None:
        return sq * sk
    shift = 0 if causal == "top-left" else sk - sq
    # sum over i < sq of clamp(i + 1 + shift, 0, sk)
    lo = max(0, -shift)  # first query that sees a key
    full = min(sq, max(sk - shift, 0))  # queries below this see fewer than sk keys
    partial = sum_range(lo + 1 + shift, full + shift) if full > lo else 0
    return partial + max(sq - max(full, lo), 0) * sk


def sum_range(first: int, last: int) -> int:
    """first + (first + 1) + ... + last."""
    return (first + last) * (last - first + 1) // 2 if last >= first else 0


def _attention(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    first, layout, i_causal, kind, backward = _ATTENTION_ARGS[base]
    q, k, v = a.shape(first), a.shape(first + 1), a.shape(first + 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise _Missing(f"query {q}, key {k}, value {v} are not 4-d")
    if layout == "bhsd":
        b, h, sq, d = q
        sk, dv = k[2], v[3]
    else:
        b, sq, h, d = q
        sk, dv = k[1], v[3]
    if kind == "flag":
        causal = "top-left" if a.flag(i_causal) else None
    else:
        mask = a.ints(i_causal, [0])[0]
        causal = {1: "top-left", 2: "bottom-right"}.get(mask)
    pairs = attended_pairs(sq, sk, causal)
    dtype = a.dtype(first)
    if backward:
        flops = 2 * b * h * pairs * (3 * d + 2 * dv)
        nbytes = sum(a.nbytes(i) for i in a.tensors()) + a.nbytes(first) + a.nbytes(first + 1) + a.nbytes(first + 2)
    else:
        flops = 2 * b * h * pairs * (d + dv)
        out = b * h * sq * dv * DTYPE_BYTES[dtype]
        nbytes = a.nbytes(first) + a.nbytes(first + 1) + a.nbytes(first + 2) + out
    return Work(ATTENTION, flops, nbytes, dtype, _unit(dtype))


# --- memory-bound ops ------------------------------------------------------------------------------

# Elementwise ops by the number of their leading arguments (a further tensor is an ``out=``, written
# not read); in-place spellings (``add_``) share the entry. One FLOP per output element unless in _MOVES.
_ELEMENTWISE_ARITY = {
    **dict.fromkeys(("add", "sub", "rsub", "addcmul", "addcdiv", "lerp"), 3),
    **dict.fromkeys(("mul", "div", "pow", "remainder", "fmod", "maximum", "minimum", "atan2", "hypot",
                     "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "bitwise_and",
                     "bitwise_or", "bitwise_xor", "clamp_min", "clamp_max", "copysign", "xlogy",
                     "sigmoid_backward", "tanh_backward", "silu_backward", "mish_backward", "masked_fill",
                     "hardswish_backward", "softplus", "leaky_relu", "elu", "threshold", "gelu",
                     "where", "mse_loss"), 2),
    **dict.fromkeys(("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "abs", "neg",
                     "reciprocal", "sigmoid", "tanh", "relu", "silu", "mish", "hardswish", "hardsigmoid",
                     "sin", "cos", "erf", "erfc", "sign", "floor", "ceil", "round", "trunc", "square",
                     "logical_not", "bitwise_not", "isnan", "isinf", "nan_to_num", "frac", "sgn", "relu6"), 1),
    **dict.fromkeys(("gelu_backward", "threshold_backward", "leaky_relu_backward", "elu_backward", "clamp",
                     "softplus_backward", "hardtanh", "hardtanh_backward", "_masked_scale", "native_dropout"), 3),
    **dict.fromkeys(("native_dropout_backward",), 3),
}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "isnan", "isinf"}
_MOVES = {"copy_", "fill_", "zero_", "masked_fill", "masked_fill_", "where"}


def _elementwise(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    inplace = base.endswith("_")
    arity = _ELEMENTWISE_ARITY[base[:-1] if inplace else base]
    inputs = a.tensors(arity)
    if not inputs:
        raise _Missing("no tensor argument")
    dtype = a.dtype(inputs[0])
    reads = sum(a.nbytes(i) for i in inputs)
    if inplace:
        out_elems, out_bytes = numel(a.shape(0)), a.nbytes(0)
    else:
        out_elems = numel(broadcast([a.shape(i) for i in inputs]))
        out_type = "bool" if base in _COMPARISONS else dtype
        out_bytes = out_elems * DTYPE_BYTES[out_type]
    flops = 0 if base in _MOVES else out_elems
    return Work(ELEMENTWISE, flops, reads + out_bytes, dtype, FP32)


def _copy(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """copy_(self, src): reads src, writes self."""
    dst, src = a.shape(0), a.shape(1)
    if numel(broadcast([dst, src])) != numel(dst):
        raise _Missing(f"src {src} does not broadcast to {dst}")
    return Work(COPY, 0, a.nbytes(1) + a.nbytes(0), a.dtype(1), FP32)


def _fill(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """fill_/zero_ and friends: write self."""
    return Work(COPY, 0, a.nbytes(0), a.dtype(0), FP32)


def _cat(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    shapes = a.tensor_list(0)
    if shapes is None:
        raise _Missing("the TensorList's shapes are not recorded")
    size = _list_element_size(kernels)
    elems = sum(numel(s) for s in shapes)
    return Work(COPY, 0, 2 * elems * size, f"{size}-byte elements", FP32)


_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
_KERNEL_TYPES = (("bfloat16", 2), ("BFloat16", 2), ("__half", 2), ("Half", 2), ("double", 8), ("float", 4))


def _list_element_size(kernels: Sequence[str]) -> int:
    """The element size of an op's TensorList, which ``Input type`` leaves untyped: from the kernel's
    template arguments (``OpaqueType<2u>``, ``BFloat16``, ``float``, ...)."""
    for kernel in kernels:
        m = _OPAQUE.search(kernel)
        if m:
            return int(m.group(1))
        for word, size in _KERNEL_TYPES:
            if word in kernel:
                return size
    raise _Missing("the TensorList's element type is not recorded, nor named by its kernel")


def _reduction(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """sum/mean/amax/...(self, dim, keepdim, ...): reads self, writes the reduced shape."""
    x = a.shape(0)
    dims = a.ints(1, []) if len(a) > 1 else []
    keep = [True] * len(x)
    for d in dims or range(len(x)):
        if -len(x) <= d < len(x):
            keep[d] = False
    out = numel([n for n, k in zip(x, keep) if k])
    dtype = a.dtype(0)
    return Work(REDUCTION, numel(x), a.nbytes(0) + out * DTYPE_BYTES[dtype], dtype, FP32)


def _all_tensors(family: str, flops_per_elem: int = 0, out_like: int | None = 0, extra_out: int = 0):
    """A rule: reads every tensor argument, writes one output shaped like argument ``out_like``
    (None: no output beyond the args), plus ``extra_out`` of argument 0's dtype per leading row."""
    def rule(a: _Args, base: str, kernels: Sequence[str]) -> Work:
        inputs = a.tensors()
        if not inputs:
            raise _Missing("no tensor argument")
        dtype = a.dtype(inputs[0])
        nbytes = sum(a.nbytes(i) for i in inputs)
        elems = numel(a.shape(inputs[0]))
        if out_like is not None:
            nbytes += a.nbytes(out_like)
        return Work(family, flops_per_elem * elems, nbytes, dtype, FP32)
    return rule


def _layer_norm(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """native_layer_norm(input, normalized_shape, weight, bias, eps): reads input, weight, bias;
    writes the output and a float mean and rstd per row."""
    x = a.shape(0)
    norm = a.ints(1, [x[-1]] if x else [])
    rows = numel(x) // max(numel(norm), 1)
    reads = sum(a.nbytes(i) for i in a.tensors())
    return Work(NORM, 5 * numel(x), reads + a.nbytes(0) + 2 * rows * 4, a.dtype(0), FP32)


def _layer_norm_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask): reads its tensors, writes grad_input, grad_weight, grad_bias as masked."""
    mask = a.flags(7) or [True, True, True]
    reads = sum(a.nbytes(i) for i in a.tensors())
    writes = (a.nbytes(1) if mask[0] else 0) + sum(a.nbytes(i) for i, m in zip((5, 6), mask[1:]) if m and a.is_tensor(i))
    return Work(NORM, 8 * numel(a.shape(0)), reads + writes, a.dtype(0), FP32)


def _batch_norm(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """cudnn/native/miopen_batch_norm(input, weight, bias, running_mean, running_var, training, ...):
    reads its tensors, writes the output, two saved statistics and (training) the running ones."""
    x = a.shape(0)
    channels = x[1] if len(x) > 1 else 1
    reads = sum(a.nbytes(i) for i in a.tensors())
    stats = 4 * channels * 4  # save_mean, save_invstd, running_mean, running_var: floats per channel
    return Work(NORM, 5 * numel(x), reads + a.nbytes(0) + stats, a.dtype(0), FP32)


def _batch_norm_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """cudnn_batch_norm_backward(input, grad_output, weight, ...) and native_batch_norm_backward(grad_out,
    input, weight, ...): reads its tensors, writes grad_input, grad_weight and grad_bias."""
    x = a.shape(0)
    channels = x[1] if len(x) > 1 else 1
    reads = sum(a.nbytes(i) for i in a.tensors())
    return Work(NORM, 8 * numel(x), reads + a.nbytes(0) + 2 * channels * DTYPE_BYTES[a.dtype(0)], a.dtype(0), FP32)


def _softmax(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """_softmax/_log_softmax(self, dim, half_to_float): reads self, writes its shape."""
    return Work(SOFTMAX, 5 * numel(a.shape(0)), 2 * a.nbytes(0), a.dtype(0), FP32)


def _softmax_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """_softmax_backward_data(grad_output, output, dim, input_dtype): reads two, writes one."""
    return Work(SOFTMAX, 4 * numel(a.shape(0)), a.nbytes(0) + a.nbytes(1) + a.nbytes(0), a.dtype(0), FP32)


def _embedding(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """embedding(weight, indices, ...): reads the indices and the rows they pick, writes those rows."""
    w, idx = a.shape(0), a.shape(1)
    row = numel(w[1:]) * DTYPE_BYTES[a.dtype(0)]
    return Work(EMBEDDING, 0, a.nbytes(1) + 2 * numel(idx) * row, a.dtype(0), FP32)


def _embedding_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """embedding_dense_backward(grad_output, indices, num_weights, ...): reads grad and indices,
    writes the num_weights x D gradient."""
    g = a.shape(0)
    num_weights = a.ints(2)[0]
    d = g[-1] if g else 0
    size = DTYPE_BYTES[a.dtype(0)]
    return Work(EMBEDDING, numel(g), a.nbytes(0) + a.nbytes(1) + num_weights * d * size, a.dtype(0), FP32)


def _gather(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """gather(self, dim, index, ...) / index_select(self, dim, index): reads the index and the
    elements it picks, writes them."""
    index = a.shape(2)
    size = DTYPE_BYTES[a.dtype(0)]
    picked = numel(index) if base == "gather" else numel(index) * numel(a.shape(0)) // max(
        a.shape(0)[a.ints(1, [0])[0]] if a.shape(0) else 1, 1)
    return Work(INDEXING, 0, a.nbytes(2) + 2 * picked * size, a.dtype(0), FP32)


def _max_pool(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode): reads self,
    writes the output and its int64 indices."""
    x = a.shape(0)
    spatial = len(x) - 2
    k = _spread(a.ints(1), spatial)
    s = _spread(a.ints(2, k), spatial) or k
    p = _spread(a.ints(3, [0]), spatial)
    d = _spread(a.ints(4, [1]), spatial)
    ceil = a.flag(5)
    out_sp = []
    for n, kk, ss, pp, dd in zip(x[2:], k, s, p, d):
        span = n + 2 * pp - dd * (kk - 1) - 1
        o = (-(-span // ss) if ceil else span // ss) + 1
        if ceil and (o - 1) * ss >= n + pp:
            o -= 1
        out_sp.append(o)
    out = numel(x[:2]) * numel(out_sp)
    return Work(POOLING, out * numel(k), a.nbytes(0) + out * (DTYPE_BYTES[a.dtype(0)] + 8), a.dtype(0), FP32)


def _max_pool_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """max_pool2d_with_indices_backward(grad_output, self, ..., indices): reads grad and indices,
    writes grad_input (self's shape)."""
    return Work(POOLING, 0, a.nbytes(0) + a.nbytes(7) + a.nbytes(1), a.dtype(0), FP32)


def _avg_pool(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """adaptive/avg pooling forward and backward: reads the first tensor, writes the other shape (or
    the output a reduction gives): approximated as reading and writing the larger side once."""
    inputs = a.tensors()
    return Work(POOLING, numel(a.shape(inputs[0])), sum(a.nbytes(i) for i in inputs) + a.nbytes(inputs[-1]),
                a.dtype(inputs[0]), FP32)


def _fused_adam(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, ...): reads
    params, grads and both moments; writes params and both moments."""
    lists = [a.tensor_list(i) for i in range(4)]
    if any(s is None for s in lists):
        raise _Missing("the TensorLists' shapes are not recorded (PyTorch records them from 2.6 on)")
    return fused_adam_of_elements(sum(numel(s) for s in lists[0]), _list_element_size(kernels))


FUSED_OPTIMIZERS = frozenset(("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_adam", "aten::_fused_adamw"))
COLLECTIVE = "record_param_comms"  # DDP's gradient all-reduces carry their element count
_COMM_DTYPES = {"Float": "float", "BFloat16": "c10::BFloat16", "Half": "c10::Half", "Double": "double"}


def is_allreduce(shapes: tuple | None) -> bool:
    return bool(shapes) and len(shapes) > 5 and shapes[5] == "allreduce" and type(shapes[3]) is int


def allreduce_elements(shapes: tuple) -> tuple[int, int | None]:
    """A ``record_param_comms`` all-reduce's (elements, element size or None)."""
    dtype = _COMM_DTYPES.get(shapes[4]) if type(shapes[4]) is str else None
    return shapes[3], DTYPE_BYTES[dtype] if dtype else None


def fused_adam_of_elements(elems: int, size: int) -> Work:
    """A fused Adam(W) step over ``elems`` parameters of ``size`` bytes, when the TensorLists' shapes
    are not recorded but the step's gradient all-reduces give the count (see ``model``)."""
    return Work(OPTIMIZER, 12 * elems, 7 * elems * size, f"{size}-byte elements", FP32)


def _foreach(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """_foreach_op_(list, list or scalar, ...): reads every TensorList, writes the first (in place) or
    a new one like it."""
    lists = [a.tensor_list(i) for i in range(len(a)) if a.types[i] == "TensorList"]
    if not lists or any(s is None for s in lists):
        raise _Missing("the TensorLists' shapes are not recorded")
    size = _list_element_size(kernels)
    elems = [sum(numel(s) for s in shapes) for shapes in lists]
    return Work(OPTIMIZER, elems[0], (sum(elems) + elems[0]) * size, f"{size}-byte elements", FP32)


def _triton(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """An Inductor Triton kernel's launch (its args: the kernel's pointers as tensors, then its sizes
    ``xnumel``, ``rnumel`` as scalars): each tensor argument is read or written once (one the kernel
    both reads and writes, Inductor's ``in_out_ptr``, is counted once: the profiler does not say
    which it is); FLOPs are not counted, so the kernel is bound by memory."""
    tensors = a.tensors()
    if not tensors:
        raise _Missing("no tensor argument")
    return Work(TRITON, 0, sum(a.nbytes(i) for i in tensors), a.dtype(tensors[0]), FP32)


def _nll_loss(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """nll_loss(2d)_forward(self, target, weight, reduction, ignore_index): reads the target and the
    one value per row it picks (and the weight), writes the loss and total weight."""
    target = a.shape(1)
    size = DTYPE_BYTES[a.dtype(0)]
    weight = a.nbytes(2) if a.is_tensor(2) else 0
    return Work(LOSS, numel(target), a.nbytes(1) + numel(target) * size + weight + 2 * size, a.dtype(0), FP32)


def _nll_loss_backward(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    """nll_loss(2d)_backward(grad_output, self, target, ...): reads the target, writes one value of
    grad_input per row (the zeros around them are a fill of their own, modelled as that op)."""
    target = a.shape(2)
    return Work(LOSS, numel(target), a.nbytes(2) + numel(target) * DTYPE_BYTES[a.dtype(1)], a.dtype(1), FP32)


def _loss(a: _Args, base: str, kernels: Sequence[str]) -> Work:
    return _all_tensors(LOSS, 1, None)(a, base, kernels)


_RULES: dict[str, Callable[[_Args, str, Sequence[str]], Work]] = {
    **dict.fromkeys(("mm", "addmm", "_addmm_activation", "_scaled_mm"), _mm),
    **dict.fromkeys(("bmm", "baddbmm", "addbmm"), _bmm),
    "matmul": _matmul, "linear": _linear, "mv": _mv, "addmv": _mv,
    **dict.fromkeys(_CONV_ARGS, _conv),
    "convolution_backward": _conv_backward,
    **dict.fromkeys(_ATTENTION_ARGS, _attention),
    "copy_": _copy,
    **dict.fromkeys(("fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"), _fill),
    "cat": _cat, "stack": _cat,
    **dict.fromkeys(("sum", "mean", "amax", "amin", "prod", "nansum", "norm", "linalg_vector_norm", "var",
                     "std", "any", "all", "argmax", "argmin", "logsumexp"), _reduction),
    "native_layer_norm": _layer_norm, "native_layer_norm_backward": _layer_norm_backward,
    **dict.fromkeys(("cudnn_batch_norm", "native_batch_norm", "miopen_batch_norm", "_native_batch_norm_legit",
                     "_native_batch_norm_legit_no_training"), _batch_norm),
    **dict.fromkeys(("cudnn_batch_norm_backward", "native_batch_norm_backward", "miopen_batch_norm_backward"),
                    _batch_norm_backward),
    **dict.fromkeys(("_softmax", "_log_softmax"), _softmax),
    **dict.fromkeys(("_softmax_backward_data", "_log_softmax_backward_data"), _softmax_backward),
    "embedding": _embedding, "embedding_dense_backward": _embedding_backward,
    "gather": _gather, "index_select": _gather,
    "max_pool2d_with_indices": _max_pool, "max_pool3d_with_indices": _max_pool,
    "max_pool2d_with_indices_backward": _max_pool_backward,
    **dict.fromkeys(("avg_pool2d", "avg_pool2d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"),
                    _avg_pool),
    **dict.fromkeys(("_fused_adam_", "_fused_adamw_", "_fused_adam", "_fused_adamw"), _fused_adam),
    **dict.fromkeys(("nll_loss_forward", "nll_loss2d_forward"), _nll_loss),
    **dict.fromkeys(("nll_loss_backward", "nll_loss2d_backward"), _nll_loss_backward),
    **dict.fromkeys(("binary_cross_entropy", "binary_cross_entropy_with_logits"), _loss),
}
