#!/usr/bin/env python3
"""Synthesise a small, deterministic PyTorch profiler (Kineto) trace of a few training steps.

The trace is written in Kineto's own multi-line layout. By default it uses the current
vocabulary (``cpu_op``, ``cuda_runtime``, ``kernel``, ``ac2g`` flows, nanosecond-resolution
``ts`` such as ``4458676522690.655`` plus ``baseTimeNanoseconds``); ``--old-kineto`` writes
the 2021 one instead (``Operator``, ``Runtime``, ``Kernel``, ``"stream 7"`` tids, integer µs,
``async`` flows). A fixed seed and no wall clock make the output byte-for-byte reproducible.

    python scripts/make_sample.py -o samples/train_step.json.gz

Tests import it (``make``) to generate their unit-tier traces and read the ground truth
(every event's exact ns) from the ``Recorder``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

CPU_PID = 1234
MAIN_TID = 1234
AUTOGRAD_TID = 1240
THREAD_NAMES = {MAIN_TID: "pt_main_thread", AUTOGRAD_TID: "pt_autograd_0"}
COMPUTE, COPY, NCCL = 7, 13, 20  # CUDA stream ids
NUM_GPUS = 2
NUM_SMS = 108
START_NS = 4_458_676_388_068_751  # profiler start on Kineto's clock
BASE_TIME_NS = 1_711_964_646_000_000_000
FIRST_STEP = 10
BATCH = 32

# CUPTI callback ids, as they appear in real traces.
CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaGraphLaunch": 311,
    "cudaStreamSynchronize": 131,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
    "cuLaunchKernel": 307,
}
DRIVER_APIS = {"cuLaunchKernel"}  # Triton launches through the driver API (cat cuda_driver)

# Mean CPU-side costs, in ns.
GAP_NS = 1_500  # between consecutive calls on a thread
OP_ENTRY_NS = 4_000  # from an op's start to its first child
OP_EXIT_NS = 1_500  # from its last child to its end
LAUNCH_NS = 6_000  # one launch API call
# A GPU takes ~1-2 µs between back-to-back ops on a stream (this also keeps Perfetto's
# double rounding of fractional-µs timestamps from making neighbours overlap).
BACK_TO_BACK_GAP_NS = 1_500


@dataclass
class Span:
    """A complete (``"ph": "X"``) event; times in integer nanoseconds."""

    cat: str
    name: str
    pid: int
    tid: int
    ts: int
    dur: int = 0
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Flow:
    """One end (``"s"`` or ``"f"``) of a flow arrow."""

    ph: str
    cat: str
    id: int
    pid: int
    tid: int
    ts: int


@dataclass(frozen=True)
class GpuWork:
    """A GPU op that a launch call enqueues; ``mean_ns`` 0 means a zero-duration op."""

    cat: str
    name: str
    mean_ns: int
    args: dict[str, Any]
    device: int = 0
    stream: int = COMPUTE
    after: int = 0  # earliest start in ns, from a cross-stream dependency


def kernel(
    name: str,
    us: float,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    regs: int,
    smem: int,
    extra: dict[str, Any] | None = None,
) -> GpuWork:
    """A kernel with Kineto's launch-configuration args derived from grid and block."""
    blocks_per_sm = grid[0] * grid[1] * grid[2] / NUM_SMS
    warps_per_sm = blocks_per_sm * block[0] * block[1] * block[2] / 32
    args = {
        "registers per thread": regs,
        "shared memory": smem,
        "blocks per SM": round(blocks_per_sm, 6),
        "warps per SM": round(warps_per_sm, 6),
        "grid": list(grid),
        "block": list(block),
        "est. achieved occupancy %": min(100, round(warps_per_sm / 64 * 100)),
    }
    return GpuWork("kernel", name, round(us * 1000), args | (extra or {}))


def memcpy(kind: str, nbytes: int, gbps: float, stream: int = COPY) -> GpuWork:
    """A copy such as ``HtoD (Pinned -> Device)`` moving ``nbytes`` at about ``gbps`` GB/s."""
    return GpuWork("gpu_memcpy", f"Memcpy {kind}", round(nbytes / gbps), {"bytes": nbytes}, stream=stream)


def memset(nbytes: int, gbps: float | None) -> GpuWork:
    """A device memset; ``gbps`` None makes it zero-duration."""
    mean_ns = round(nbytes / gbps) if gbps else 0
    return GpuWork("gpu_memset", "Memset (Device)", mean_ns, {"bytes": nbytes})


def _elementwise(functor: str, arity: int) -> str:
    array = f"at::detail::Array<char*, {arity}>"
    return f"void at::native::vectorized_elementwise_kernel<4, {functor}, {array} >(int, {functor}, {array})"


def _multi_tensor(lists: int, functor: str, op: str) -> str:
    meta = f"at::native::(anonymous namespace)::TensorListMetadata<{lists}>"
    functor = f"at::native::(anonymous namespace)::{functor}"
    params = f"{meta}, {functor}, {op}, float"
    return f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{params}>({params})"


_CLAMP = (
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, "
    "c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}"
    "::operator()() const::{lambda(float)#1}"
)
_THRESHOLD = (
    "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, "
    "float)::{lambda(float, float)#1}"
)
_MUL = "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >"
_SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::{}>(float*, float const*, int)"
)
_XMMA = "sm80_xmma_{}_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize{}_warpsize2x2x1_g1_tensor16x8x8_kernel"
_FLASH_TRAITS = (
    "pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, "
    "pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >"
)
_ALLREDUCE_ARGS = {
    "Collective name": "allreduce",
    "In msg nelems": 6637568,
    "Out msg nelems": 6637568,
    "Group size": 2,
    "dtype": "Float",
    "In split size": "[]",
    "Out split size": "[]",
    "Process Group Name": "0",
    "Process Group Description": "default_pg",
    "Process Group Ranks": "[0, 1]",
}

CONV_FPROP = kernel(_XMMA.format("fprop", "128x128x16_stage4"), 60, (32, 2, 1), (128, 1, 1), 168, 81920)
CONV_DGRAD = kernel(_XMMA.format("dgrad", "64x64x32_stage5"), 70, (64, 2, 1), (128, 1, 1), 128, 61440)
CONV_WGRAD = kernel(_XMMA.format("wgrad", "128x128x32_stage4"), 80, (16, 4, 1), (256, 1, 1), 232, 98304)
ADD = kernel(_elementwise("at::native::CUDAFunctor_add<float>", 3), 9, (1024, 1, 1), (128, 1, 1), 24, 0)
MUL = kernel(_elementwise(_MUL, 3), 8, (1024, 1, 1), (128, 1, 1), 26, 0)
BURST_ADD = replace(ADD, mean_ns=34_000)  # long enough for launches to outrun the GPU
BURST_MUL = replace(MUL, mean_ns=34_000)
RELU = kernel(_elementwise(_CLAMP, 2), 8, (1024, 1, 1), (128, 1, 1), 20, 0)
RELU_BWD = kernel(_elementwise(_THRESHOLD, 3), 9, (1024, 1, 1), (128, 1, 1), 22, 0)
LAYER_NORM = kernel(
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    12, (4096, 1, 1), (256, 1, 1), 38, 0,
)
SGEMM = kernel("ampere_sgemm_128x64_tn", 45, (8, 32, 1), (128, 1, 1), 122, 32768)
SGEMM_SMALL = kernel("ampere_sgemm_64x32_sliced1x4_nn", 14, (16, 8, 1), (128, 1, 1), 90, 16384)
SGEMM_DGRAD = kernel("ampere_sgemm_64x64_nn", 40, (16, 32, 1), (64, 1, 1), 126, 16384)
SGEMM_WGRAD = kernel("ampere_sgemm_128x32_nt", 42, (8, 32, 1), (256, 1, 1), 124, 24576)
FLASH = kernel(
    f"void pytorch_flash::flash_fwd_kernel<{_FLASH_TRAITS}, false, true, false, false, true, true, "
    "false, false>(pytorch_flash::Flash_fwd_params)",
    50, (1, 32, 16), (128, 1, 1), 255, 49152,
)
SOFTMAX = kernel(_SOFTMAX.format("SoftMaxForwardEpilogue"), 10, (4096, 1, 1), (128, 1, 1), 32, 0)
LOG_SOFTMAX = kernel(_SOFTMAX.format("LogSoftMaxForwardEpilogue"), 7, (32, 1, 1), (1024, 1, 1), 32, 0)
NLL_LOSS = kernel(
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
    "(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
    5, (1, 1, 1), (32, 1, 1), 30, 2048,
)
TRITON_ADD = kernel("triton_poi_fused_add_0", 4, (256, 1, 1), (128, 1, 1), 16, 0)
ALLREDUCE = replace(
    kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 180, (8, 1, 1), (544, 1, 1), 96, 87568,
           _ALLREDUCE_ARGS),
    stream=NCCL,
)
FOREACH_MUL = kernel(_multi_tensor(1, "BinaryOpScalarFunctor<float, 1, 1, 0>", "std::multiplies<float>"),
                     18, (320, 1, 1), (512, 1, 1), 32, 0)
FOREACH_ADD = kernel(_multi_tensor(2, "BinaryOpListAlphaFunctor<float, 2, 2, 0>", "std::plus<float>"),
                     20, (320, 1, 1), (512, 1, 1), 38, 0)
FOREACH_ADDCDIV = kernel(_multi_tensor(3, "PointwiseOpScalarFunctor<float, 3, 3, 0>", "std::divides<float>"),
                         24, (320, 1, 1), (512, 1, 1), 40, 0)
BATCH_HTOD = memcpy("HtoD (Pinned -> Device)", BATCH * 3 * 128 * 128 * 4, 22.0)
LABELS_HTOD = memcpy("HtoD (Pinned -> Device)", BATCH * 8, 1.5)
LOSS_DTOH = memcpy("DtoH (Device -> Pageable)", 4, 0.003)
RESIDUAL_DTOD = memcpy("DtoD (Device -> Device)", BATCH * 128 * 1024 * 4, 610.0, stream=COMPUTE)
GRAD_MEMSET = memset(BATCH * 1000 * 4, 180.0)
WORKSPACE_MEMSET = memset(512, None)

X_DIMS = [BATCH, 128, 1024]
CONV_IN = [BATCH, 3, 128, 128]
CONV_OUT = [BATCH, 64, 128, 128]
QKV_DIMS = [BATCH, 16, 128, 64]


class Recorder:
    """Records the CPU threads, launch calls and GPU ops of a synthetic run."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.cpu_side: list[Span | Flow] = []  # cpu_op / user_annotation and fwdbwd flows
        self.gpu_side: list[Span | Flow] = []  # launch calls, their GPU ops and ac2g flows
        self.clock = {MAIN_TID: START_NS, AUTOGRAD_TID: START_NS}
        self.stack: dict[int, list[Span]] = {MAIN_TID: [], AUTOGRAD_TID: []}
        self.stream_free: dict[tuple[int, int], int] = {}
        self.cpu_ops = 0
        self.next_correlation = 5_000
        self.next_flow = 1
        self.next_sequence = 900

    def jitter(self, mean_ns: int, spread: float = 0.15) -> int:
        """``mean_ns`` scaled by a random factor within ``1 ± spread``."""
        return round(mean_ns * self.rng.uniform(1 - spread, 1 + spread))

    def wait(self, tid: int, mean_ns: int) -> None:
        """Advance a thread's clock by about ``mean_ns``."""
        self.clock[tid] += self.jitter(mean_ns)

    def handoff(self, src: int, dst: int, mean_ns: int) -> None:
        """Make thread ``dst`` go on about ``mean_ns`` after thread ``src``'s present time."""
        self.clock[dst] = max(self.clock[dst], self.clock[src]) + self.jitter(mean_ns)

    def idle_at(self, stream: int, device: int = 0) -> int:
        """When the GPU work enqueued so far on a stream ends."""
        return self.stream_free.get((device, stream), 0)

    def sequence(self) -> int:
        """A new autograd sequence number."""
        self.next_sequence += 1
        return self.next_sequence

    @contextmanager
    def op(
        self,
        tid: int,
        name: str,
        cat: str = "cpu_op",
        dims: list[list[int]] | None = None,
        types: list[str] | None = None,
        seq: int | None = None,
        entry_ns: int = OP_ENTRY_NS,
    ) -> Iterator[Span]:
        """Record a CPU op spanning whatever the ``with`` body records on the same thread."""
        self.wait(tid, GAP_NS)
        self.cpu_ops += 1
        args: dict[str, Any] = {"External id": self.cpu_ops, "Ev Idx": self.cpu_ops - 1}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types or ["float"] * len(dims)
        if seq is not None:
            args["Sequence number"] = seq
            args["Fwd thread id"] = 0 if tid == MAIN_TID else 1
        span = Span(cat, name, CPU_PID, tid, self.clock[tid], args=args)
        self.cpu_side.append(span)
        self.stack[tid].append(span)
        self.wait(tid, entry_ns)
        yield span
        self.wait(tid, OP_EXIT_NS)
        span.dur = self.clock[tid] - span.ts
        self.stack[tid].pop()

    def fwdbwd_start(self, span: Span) -> int:
        """Start a forward-to-backward flow at a forward op; returns its id."""
        flow_id = self.next_flow
        self.next_flow += 1
        self.cpu_side.append(Flow("s", "fwdbwd", flow_id, span.pid, span.tid, span.ts))
        return flow_id

    def fwdbwd_end(self, span: Span, flow_id: int) -> None:
        """End a forward-to-backward flow at a backward op."""
        self.cpu_side.append(Flow("f", "fwdbwd", flow_id, span.pid, span.tid, span.ts))

    def call(
        self,
        tid: int,
        api: str,
        work: Sequence[GpuWork] = (),
        mean_ns: int = LAUNCH_NS,
        block_until: int = 0,
    ) -> None:
        """Record a CUDA runtime/driver call and the GPU ops it enqueues (sharing its correlation).

        Each GPU op starts after the call ends plus a launch delay, once its stream is free and
        its ``after`` dependency is met. ``block_until`` makes a synchronising call last until then.
        """
        self.wait(tid, GAP_NS)
        ts = self.clock[tid]
        dur = self.jitter(mean_ns)
        if block_until:
            dur = max(dur, block_until - ts + self.jitter(3_000))
        self.clock[tid] = ts + dur
        self.next_correlation += 1
        correlation = self.next_correlation
        external_id = self.stack[tid][-1].args["External id"] if self.stack[tid] else 0
        cat = "cuda_driver" if api in DRIVER_APIS else "cuda_runtime"
        ready = ts + dur + self.launch_delay()
        for w in work:
            start = max(ready, self.idle_at(w.stream, w.device), w.after)
            gpu_dur = self.jitter(w.mean_ns, 0.1)
            self.stream_free[(w.device, w.stream)] = start + gpu_dur + BACK_TO_BACK_GAP_NS
            args: dict[str, Any] = {"External id": external_id}
            if w.cat == "kernel":
                args["queued"] = 0
            args |= {"device": w.device, "context": 1, "stream": w.stream, "correlation": correlation}
            args |= w.args
            if w.cat != "kernel":
                args["memory bandwidth (GB/s)"] = w.args["bytes"] / gpu_dur if gpu_dur else "N/A"
            self.gpu_side.append(Span(w.cat, w.name, w.device, w.stream, start, gpu_dur, args))
            self.gpu_side.append(Flow("f", "ac2g", correlation, w.device, w.stream, start))
        call_args = {"External id": external_id, "cbid": CBID[api], "correlation": correlation}
        self.gpu_side.append(Span(cat, api, CPU_PID, tid, ts, dur, call_args))
        if work:
            self.gpu_side.append(Flow("s", "ac2g", correlation, CPU_PID, tid, ts))

    def launch(self, tid: int, work: GpuWork) -> None:
        """``cudaLaunchKernel`` of one kernel."""
        self.call(tid, "cudaLaunchKernel", [work])

    def launch_delay(self) -> int:
        """Time from a launch call's end to the earliest start of its GPU op: usually a few µs."""
        if self.rng.random() < 0.05:
            return self.rng.randint(30_000, 120_000)
        return self.rng.randint(2_000, 9_000)


def record_step(rec: Recorder, step: int, burst: bool) -> None:
    """One training step: prefetch, forward, backward (on the autograd thread), optimizer, loss.item()."""
    m = MAIN_TID
    with rec.op(m, f"ProfilerStep#{step}", cat="user_annotation"):
        with rec.op(m, "## forward ##", cat="user_annotation"):
            prefetch_next_batch(rec)
            conv_flow, linear_flow = forward(rec, burst)
        with rec.op(m, "## backward ##", cat="user_annotation"):
            rec.handoff(m, AUTOGRAD_TID, 20_000)
            backward(rec, conv_flow, linear_flow)
            rec.handoff(AUTOGRAD_TID, m, 8_000)
        optimizer_step(rec)
        log_loss(rec)
    rec.wait(m, 60_000)  # data loading between steps


def prefetch_next_batch(rec: Recorder) -> None:
    """Copy the next batch to the GPU on the copy stream, overlapping this step's compute."""
    m = MAIN_TID
    for dims, types, work in (([CONV_IN], ["float"], BATCH_HTOD), ([[BATCH]], ["long"], LABELS_HTOD)):
        with rec.op(m, "aten::to", dims=dims + [[], [], [], []], types=types + ["ScalarType", "", "", ""]):
            with rec.op(m, "aten::_to_copy", dims=dims, types=types):
                with rec.op(m, "aten::empty_strided", dims=[[len(dims[0])], [len(dims[0])]], types=["", ""]):
                    pass
                with rec.op(m, "aten::copy_", dims=dims + dims + [[]], types=types + types + ["Scalar"]):
                    rec.call(m, "cudaMemcpyAsync", [work])
    rec.call(m, "cudaEventRecord", mean_ns=2_000)


def forward(rec: Recorder, burst: bool) -> tuple[int, int]:
    """The forward pass on the main thread; returns the fwdbwd flow ids of conv and linear."""
    m = MAIN_TID
    seq = rec.sequence()
    with rec.op(m, "aten::conv2d", dims=[CONV_IN, [64, 3, 3, 3], [64], [], [], [], []], seq=seq) as conv:
        conv_flow = rec.fwdbwd_start(conv)
        with rec.op(m, "aten::convolution"):
            with rec.op(m, "aten::_convolution"):
                with rec.op(m, "aten::cudnn_convolution", dims=[CONV_IN, [64, 3, 3, 3]]):
                    rec.launch(m, CONV_FPROP)
                with rec.op(m, "aten::add_", dims=[CONV_OUT, [1, 64, 1, 1], []]):
                    rec.launch(m, ADD)
    with rec.op(m, "aten::relu", dims=[CONV_OUT], seq=rec.sequence()):
        with rec.op(m, "aten::clamp_min", dims=[CONV_OUT, []]):
            rec.launch(m, RELU)
    if burst:
        # Many cheap launches of long kernels: the compute stream's queue builds up.
        for i in range(26):
            with rec.op(m, "aten::add_" if i % 2 else "aten::mul_", dims=[CONV_OUT, CONV_OUT], entry_ns=1_500):
                rec.launch(m, BURST_ADD if i % 2 else BURST_MUL)
    with rec.op(m, "aten::layer_norm", dims=[X_DIMS, [1024], [1024], [1024], [], []], seq=rec.sequence()):
        with rec.op(m, "aten::native_layer_norm", dims=[X_DIMS, [1024], [1024], [1024], []]):
            rec.launch(m, LAYER_NORM)
    seq = rec.sequence()
    with rec.op(m, "aten::linear", dims=[X_DIMS, [1024, 1024], [1024]], seq=seq) as linear:
        linear_flow = rec.fwdbwd_start(linear)
        with rec.op(m, "aten::t", dims=[[1024, 1024]]):
            with rec.op(m, "aten::transpose", dims=[[1024, 1024], [], []]):
                with rec.op(m, "aten::as_strided", dims=[[1024, 1024], [], [], []]):
                    pass
        with rec.op(m, "aten::addmm", dims=[[1024], [BATCH * 128, 1024], [1024, 1024], [], []]):
            rec.launch(m, SGEMM)
    with rec.op(m, "aten::scaled_dot_product_attention", dims=[QKV_DIMS] * 3, seq=rec.sequence()):
        with rec.op(m, "aten::_scaled_dot_product_flash_attention", dims=[QKV_DIMS] * 3):
            with rec.op(m, "aten::_flash_attention_forward", dims=[QKV_DIMS] * 3):
                with rec.op(m, "aten::empty", dims=[[], [], [], [], [], []], types=[""] * 6):
                    pass
                rec.call(m, "cudaLaunchKernelExC", [FLASH])
    with rec.op(m, "aten::softmax", dims=[X_DIMS, [], []], seq=rec.sequence()):
        with rec.op(m, "aten::_softmax", dims=[X_DIMS, [], []]):
            rec.launch(m, SOFTMAX)
    with rec.op(m, "aten::clone", dims=[X_DIMS, []]):
        with rec.op(m, "aten::copy_", dims=[X_DIMS, X_DIMS, []]):
            rec.call(m, "cudaMemcpyAsync", [RESIDUAL_DTOD])
    with rec.op(m, "TorchDynamo Cache Lookup"):
        pass
    with rec.op(m, "CompiledFunction", seq=rec.sequence()):
        rec.call(m, "cuLaunchKernel", [TRITON_ADD], mean_ns=9_000)
    with rec.op(m, "CUDAGraph.replay", cat="user_annotation"):
        rec.call(m, "cudaGraphLaunch", [ADD, SGEMM_SMALL, LAYER_NORM], mean_ns=12_000)
    head_on_second_gpu(rec)
    with rec.op(m, "aten::cross_entropy_loss", dims=[[BATCH, 1000], [BATCH], [], [], [], []], seq=rec.sequence()):
        with rec.op(m, "aten::log_softmax", dims=[[BATCH, 1000], [], []]):
            with rec.op(m, "aten::_log_softmax", dims=[[BATCH, 1000], [], []]):
                rec.launch(m, LOG_SOFTMAX)
        with rec.op(m, "aten::nll_loss_nd", dims=[[BATCH, 1000], [BATCH], [], [], []]):
            with rec.op(m, "aten::nll_loss", dims=[[BATCH, 1000], [BATCH], [], [], []]):
                with rec.op(m, "aten::nll_loss_forward", dims=[[BATCH, 1000], [BATCH], [], [], []]):
                    rec.launch(m, NLL_LOSS)
    return conv_flow, linear_flow


def head_on_second_gpu(rec: Recorder) -> None:
    """A small model-parallel head: a linear layer and relu launched on device 1."""
    m = MAIN_TID
    with rec.op(m, "aten::linear", dims=[[BATCH, 1024], [1000, 1024], [1000]], seq=rec.sequence()):
        with rec.op(m, "aten::addmm", dims=[[1000], [BATCH, 1024], [1024, 1000], [], []]):
            rec.launch(m, replace(SGEMM_SMALL, device=1))
    with rec.op(m, "aten::relu", dims=[[BATCH, 1000]], seq=rec.sequence()):
        with rec.op(m, "aten::clamp_min", dims=[[BATCH, 1000], []]):
            rec.launch(m, replace(RELU, device=1))


def backward(rec: Recorder, conv_flow: int, linear_flow: int) -> None:
    """Autograd on its own thread: loss, linear and conv gradients, then the gradient all-reduce."""
    a = AUTOGRAD_TID
    with rec.op(a, "autograd::engine::evaluate_function: NllLossBackward0", seq=rec.sequence()):
        with rec.op(a, "NllLossBackward0"):
            with rec.op(a, "aten::nll_loss_backward", dims=[[], [BATCH, 1000], [BATCH], [], [], [], []]):
                with rec.op(a, "aten::zero_", dims=[[BATCH, 1000]]):
                    rec.call(a, "cudaMemsetAsync", [GRAD_MEMSET])
    seq = rec.sequence()
    with rec.op(a, "autograd::engine::evaluate_function: AddmmBackward0", seq=seq):
        with rec.op(a, "AddmmBackward0", seq=seq) as node:
            rec.fwdbwd_end(node, linear_flow)
            with rec.op(a, "aten::mm", dims=[[BATCH * 128, 1024], [1024, 1024]]):
                rec.launch(a, SGEMM_DGRAD)
            with rec.op(a, "aten::mm", dims=[[1024, BATCH * 128], [BATCH * 128, 1024]]):
                rec.launch(a, SGEMM_WGRAD)
    with rec.op(a, "autograd::engine::evaluate_function: ReluBackward0", seq=rec.sequence()):
        with rec.op(a, "ReluBackward0"):
            with rec.op(a, "aten::threshold_backward", dims=[CONV_OUT, CONV_OUT, []]):
                rec.launch(a, RELU_BWD)
    seq = rec.sequence()
    with rec.op(a, "autograd::engine::evaluate_function: ConvolutionBackward0", seq=seq):
        with rec.op(a, "ConvolutionBackward0", seq=seq) as node:
            rec.fwdbwd_end(node, conv_flow)
            with rec.op(a, "aten::convolution_backward", dims=[CONV_OUT, CONV_IN, [64, 3, 3, 3], [], [], [], []]):
                rec.call(a, "cudaMemsetAsync", [WORKSPACE_MEMSET])
                rec.launch(a, CONV_DGRAD)
                rec.launch(a, CONV_WGRAD)
    all_reduce(rec)


def all_reduce(rec: Recorder) -> None:
    """DDP's gradient all-reduce: an NCCL kernel on its own stream, after the compute stream."""
    a = AUTOGRAD_TID
    with rec.op(a, "c10d::allreduce_", dims=[[], [], [], [], []], types=["TensorList", "", "", "", "Int"]):
        with rec.op(a, "record_param_comms") as comms:
            comms.args |= {k: _ALLREDUCE_ARGS[k] for k in ("Collective name", "In msg nelems", "Group size")}
            with rec.op(a, "nccl:all_reduce", cat="user_annotation"):
                pass
            rec.call(a, "cudaEventRecord", mean_ns=2_000)
            rec.call(a, "cudaStreamWaitEvent", mean_ns=1_500)
            rec.call(a, "cudaLaunchKernelExC", [replace(ALLREDUCE, after=rec.idle_at(COMPUTE))], mean_ns=11_000)
            rec.call(a, "cudaEventRecord", mean_ns=2_000)


def optimizer_step(rec: Recorder) -> None:
    """AdamW's foreach kernels, on the compute stream once the all-reduce is done."""
    m = MAIN_TID
    with rec.op(m, "Optimizer.zero_grad#AdamW.zero_grad", cat="user_annotation"):
        pass
    with rec.op(m, "Optimizer.step#AdamW.step", cat="user_annotation"):
        rec.call(m, "cudaStreamWaitEvent", mean_ns=1_500)
        after_nccl = rec.idle_at(NCCL)
        for name, work in (
            ("aten::_foreach_mul_", replace(FOREACH_MUL, after=after_nccl)),
            ("aten::_foreach_add_", FOREACH_ADD),
            ("aten::_foreach_addcdiv_", FOREACH_ADDCDIV),
        ):
            with rec.op(m, name, dims=[[], []], types=["TensorList", "Scalar"]):
                rec.launch(m, work)


def log_loss(rec: Recorder) -> None:
    """``loss.item()``: a tiny DtoH copy after the compute stream drains, then a blocking sync."""
    m = MAIN_TID
    with rec.op(m, "aten::item", dims=[[]]):
        with rec.op(m, "aten::_local_scalar_dense", dims=[[]]):
            rec.call(m, "cudaMemcpyAsync", [replace(LOSS_DTOH, after=rec.idle_at(COMPUTE))])
            rec.call(m, "cudaStreamSynchronize", mean_ns=3_000, block_until=rec.idle_at(COPY))


def simulate(steps: int, seed: int) -> Recorder:
    """Record ``steps`` training steps; the middle one builds a queue on the compute stream."""
    rec = Recorder(seed)
    rec.wait(MAIN_TID, 200_000)
    for i in range(steps):
        record_step(rec, FIRST_STEP + i, burst=i == steps // 2)
    return rec


class Writer:
    """Renders recorded events as Kineto writes them, in the new or the 2021 vocabulary."""

    OLD_CATS = {
        "cpu_op": "Operator",
        "user_annotation": "Operator",
        "cuda_runtime": "Runtime",
        "cuda_driver": "Runtime",
        "kernel": "Kernel",
        "gpu_memcpy": "Memcpy",
        "gpu_memset": "Memset",
    }

    def __init__(self, old: bool) -> None:
        self.old = old

    def time(self, ns: int) -> str:
        """A µs value as exact text: ``123.456`` (new) or truncated integer µs (old)."""
        if self.old:
            return str(ns // 1000)
        return f"{ns // 1000}.{ns % 1000:03d}"

    def duration(self, ts: int, dur: int) -> str:
        """A duration as text; old Kineto truncated both ends to whole µs."""
        if self.old:
            return str((ts + dur) // 1000 - ts // 1000)
        return self.time(dur)

    def tid(self, pid: int, tid: int) -> str:
        """The tid as JSON: GPU tids were ``"stream N"`` and CPU tids strings in old Kineto."""
        if not self.old:
            return str(tid)
        return json.dumps(f"stream {tid}" if pid < NUM_GPUS else str(tid))

    def args(self, span: Span) -> dict[str, Any]:
        """The event's args, renamed to the old vocabulary where needed."""
        if not self.old:
            return span.args
        if span.cat in ("cpu_op", "user_annotation"):
            rest = {k: v for k, v in span.args.items() if k not in ("External id", "Ev Idx", "Fwd thread id")}
            return {
                "Device": CPU_PID,
                "External id": span.args["External id"],
                "Trace name": "PyTorch Profiler",
                "Trace iteration": 0,
            } | rest
        renamed: dict[str, Any] = {}
        for key, value in span.args.items():
            if key != "External id":
                renamed[key] = value
            if key == "correlation":
                renamed["external id"] = span.args["External id"]
        return renamed

    def span(self, span: Span) -> str:
        """A complete event in Kineto's multi-line layout."""
        args = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in self.args(span).items())
        name, pid, tid = json.dumps(span.name), span.pid, self.tid(span.pid, span.tid)
        if self.old:
            head = f'"ph": "X", "cat": "{self.OLD_CATS[span.cat]}", \n    "name": {name}, "pid": {pid}, "tid": {tid},'
        else:
            head = f'"ph": "X", "cat": "{span.cat}", "name": {name}, "pid": {pid}, "tid": {tid},'
        return (
            f"  {{\n    {head}\n"
            f'    "ts": {self.time(span.ts)}, "dur": {self.duration(span.ts, span.dur)},\n'
            f'    "args": {{\n      {args}\n    }}\n  }}'
        )

    def flow(self, flow: Flow) -> str:
        """A flow end; old Kineto named launch flows ``async``/``launch`` and left the CPU tid bare."""
        if self.old:
            cat, name = "async", "launch"
            tid = self.tid(flow.pid, flow.tid) if flow.ph == "f" else str(flow.tid)
        else:
            cat = name = flow.cat
            tid = str(flow.tid)
        bp = ', "bp": "e"' if flow.ph == "f" else ""
        return (
            f'  {{\n    "ph": "{flow.ph}", "id": {flow.id}, "pid": {flow.pid}, "tid": {tid}, '
            f'"ts": {self.time(flow.ts)},\n    "cat": "{cat}", "name": "{name}"{bp}\n  }}'
        )

    def event(self, event: Span | Flow) -> str | None:
        """Render one recorded event; None for what old Kineto did not write (fwdbwd flows)."""
        if isinstance(event, Span):
            return self.span(event)
        if self.old and event.cat == "fwdbwd":
            return None
        return self.flow(event)

    def metadata(self, name: str, ts: int, pid: int | str, tid: int | str, key: str, value: Any) -> str:
        """A ``"ph": "M"`` event."""
        return (
            f'  {{\n    "name": "{name}", "ph": "M", "ts": {self.time(ts)}, "pid": {json.dumps(pid)}, '
            f'"tid": {json.dumps(tid)},\n    "args": {{\n      "{key}": {json.dumps(value)}\n    }}\n  }}'
        )

    def process_and_thread_metadata(self, rec: Recorder) -> list[str]:
        """Names, labels and sort indices of the CPU process, GPU devices, streams and threads."""
        ts = START_NS
        out = []
        processes: list[tuple[int, str, int]] = [(CPU_PID, "CPU", CPU_PID)]
        processes += [(d, f"GPU {d}", 16_777_216 + d) for d in range(NUM_GPUS)]
        for pid, label, sort_index in processes:
            out.append(self.metadata("process_name", ts, pid, 0, "name", "python3.10"))
            out.append(self.metadata("process_labels", ts, pid, 0, "labels", label))
            if not self.old:
                out.append(self.metadata("process_sort_index", ts, pid, 0, "sort_index", sort_index))
        if not self.old:
            for device, stream in sorted(rec.stream_free):
                out.append(self.metadata("thread_name", ts, device, stream, "name", f"stream {stream} "))
                out.append(self.metadata("thread_sort_index", ts, device, stream, "sort_index", stream))
        for tid, thread in THREAD_NAMES.items():
            label = f"thread {tid} ({thread})"
            out.append(self.metadata("thread_name", ts, CPU_PID, str(tid) if self.old else tid, "name", label))
            if not self.old:
                out.append(self.metadata("thread_sort_index", ts, CPU_PID, tid, "sort_index", tid))
        return out

    def trace_span(self, end_ns: int) -> list[str]:
        """The profiler's ``Trace`` span and the iteration/window instants that close the list."""
        span_pid = "Traces" if self.old else "Spans"
        out = [
            f'  {{\n    "ph": "X", "cat": "Trace", "ts": {self.time(START_NS)}, '
            f'"dur": {self.duration(START_NS, end_ns - START_NS)},\n'
            f'    "pid": "{span_pid}", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
            f'    "args": {{\n      "Op count": 0\n    }}\n  }}'
        ]
        if not self.old:
            out.append(self.metadata("process_sort_index", START_NS, "Spans", 0, "sort_index", 536_870_912))
        out.append(
            f'  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
            f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {self.time(START_NS)}\n  }}'
        )
        out.append(
            f'  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
            f'    "pid": "", "tid": "", "ts": {self.time(end_ns)}\n  }}'
        )
        return out

    def document(self, rec: Recorder) -> str:
        """The whole trace file."""
        events = [text for e in rec.cpu_side + rec.gpu_side if (text := self.event(e)) is not None]
        end_ns = max(e.ts + e.dur for e in rec.cpu_side + rec.gpu_side if isinstance(e, Span)) + 50_000
        events += self.process_and_thread_metadata(rec)
        events += self.trace_span(end_ns)
        devices = ",\n".join(DEVICE_PROPERTIES.format(id=d) for d in range(NUM_GPUS))
        distributed = '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},\n'
        properties = f'  "deviceProperties": [\n{devices}\n  ],\n'
        body = '  "traceEvents": [\n' + ",\n".join(events)
        if self.old:
            return '{\n  "schemaVersion": 1,\n' + distributed + properties + body + "\n]}\n"
        return (
            '{\n  "schemaVersion": 1,\n' + properties + distributed + body + "\n  ],\n"
            '  "traceName": "train_step.pt.trace.json",\n  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {BASE_TIME_NS}\n}}\n'
        )


DEVICE_PROPERTIES = """\
    {{
      "id": {id}, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 84990623744,
      "computeMajor": 8, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936,
      "numSms": 108, "sharedMemPerBlockOptin": 166912
    }}"""


def make(steps: int = 5, seed: int = 0, old_kineto: bool = False) -> tuple[bytes, Recorder]:
    """The trace's JSON text, and the recorder that holds every event's exact ns (for tests)."""
    if steps < 1:
        raise ValueError("steps must be at least 1")
    rec = simulate(steps, seed)
    return Writer(old_kineto).document(rec).encode(), rec


def write(path: Path, text: bytes) -> None:
    """Write the trace, gzipped (reproducibly: no mtime) if ``path`` ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0) if path.suffix == ".gz" else text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="output path; gzipped if it ends in .gz")
    parser.add_argument("--steps", type=int, default=5, help="profiler steps to record (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--old-kineto", action="store_true", help="write the 2021 Kineto vocabulary")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    text, _ = make(args.steps, args.seed, args.old_kineto)
    write(args.output, text)
    print(f"wrote {args.output}: {len(text):,} bytes uncompressed, {args.output.stat().st_size:,} on disk")


if __name__ == "__main__":
    main()
