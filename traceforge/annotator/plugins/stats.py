"""The statistics of ``traceforge stats`` that belong to no other feature: the core tables
(made together by ``analyses.stats.trace_stats``), the comm/compute overlap, the temporal and
kernel-type breakdowns and the GPU user annotations. It adds no track (no annotate flag)."""

from __future__ import annotations

from ...analyses.cross_trace.stats import TAIL_PERCENTS
from ...analyses.gpu_time.annotations import gpu_annotation_times
from ...analyses.gpu_time.breakdown import kernel_breakdown, kernel_types
from ...analyses.gpu_time.comm_overlap import comm_overlap
from ...analyses.gpu_time.temporal import temporal_breakdown
from ...analyses.hta.choices import HTA_DURATION_RATIO
from ..plugin import Analysis, Column, Table

ACTIVITY = (Column("kind", "kind", left=True), Column("events", "events", "count"),
            Column("total ms", "total_ns", "ms"), Column("share %", "share_pct", "pct"))

ANALYSIS = Analysis(
    "stats", "summary statistics per rank", None,
    tables=(
        Table("summary", "", order=10, default=True, without_gpu=True),  # its text is the rank's head lines
        Table("devices", "GPU busy per device (union of op intervals)", (
            Column("device", "device"), Column("streams", "streams"), Column("ops", "ops", "count"),
            Column("busy ms", "busy_ns", "ms"), Column("idle ms", "idle_ns", "ms"), Column("busy %", "busy_pct", "pct"),
        ), order=20, default=True),
        Table("streams", "GPU busy and idle per stream (idle = host wait + kernel wait + other + before first + after "
              "last op)", (
            Column("device", "device", repeat=True), Column("stream", "stream", repeat=True),
            Column("ops", "ops", "count"), Column("busy ms", "busy_ns", "ms"), Column("idle ms", "idle_ns", "ms"),
            Column("busy %", "busy_pct", "pct"), Column("host wait ms", "host_wait_ns", "ms"),
            Column("kernel wait ms", "kernel_wait_ns", "ms"), Column("other ms", "other_ns", "ms"),
            Column("before ms", "before_first_ns", "ms"), Column("after ms", "after_last_ns", "ms"),
        ), order=30, default=True),
        Table("activity", "Time per CUPTI activity kind (kernel, memcpy, memset, runtime, driver; summed durations; "
              "every kind: --table activity_all)", ACTIVITY, order=40, default=True, without_gpu=True),
        Table("tails", "Tail concentration: share of a kind's time in its longest 1 / 5 / 10 % events, and their mean", (
            Column("kind", "kind", left=True), Column("count", "count", "count"), Column("max us", "max_ns", "us"),
            Column("min us", "min_ns", "us"), Column("mean us", "mean_ns", "us"),
            *[c for p in TAIL_PERCENTS for c in (Column(f"top{p}% share", f"top{p}_pct", "pct"),
                                                  Column(f"top{p}% mean us", f"top{p}_mean_ns", "us"))],
        ), order=50, default=True, without_gpu=True),
        Table("top_kernels", "Top kernels by total time", (
            Column("total ms", "total_ns", "ms"), Column("share %", "pct", "pct"), Column("count", "count", "count"),
            Column("mean us", "mean_ns", "us"), Column("min us", "min_ns", "us"), Column("max us", "max_ns", "us"),
            Column("std us", "std_ns", "us"), Column("name", "name", left=True),
        ), order=60, default=True),
        Table("launch_apis", "Launch APIs", (
            Column("calls", "calls", "count"), Column("total ms", "total_ns", "ms"), Column("max us", "max_ns", "us"),
            Column("GPU ops", "gpu_ops", "count"), Column("kernels", "kernels", "count"),
            Column("kind", "kind", left=True), Column("api", "api", left=True),
        ), order=70, default=True, without_gpu=True),
        Table("launch_kernels", "GPU ops per launch API", (
            Column("api", "api", left=True), Column("count", "count", "count"), Column("GPU ms", "total_ns", "ms"),
            Column("kind", "kind", left=True), Column("name", "kernel", left=True),
        ), order=80, default=True),
        Table("launch_overlaps", "Launches issued while the previous launch's kernels still ran (largest overlaps)", (
            Column("overlap us", "overlap_ns", "us"), Column("correlation", "correlation"),
            Column("next", "next_correlation"), Column("api", "api", left=True), Column("kernel", "kernel", left=True),
        ), order=90, default=True),
        Table("activity_all", "Time per activity kind, every kind (summed durations; nested events count at every "
              "level)", ACTIVITY, order=100, text_order=45, without_gpu=True),
        Table("overlap", "Communication/computation overlap (NCCL time under compute kernels; exposed = NCCL time "
              "with no compute kernel on the device; step all = whole trace)", (
            Column("step", "step", "step"), Column("NCCL kernels", "comm_kernels", "count"),
            Column("comm ms", "comm_ns", "ms"), Column("overlapped ms", "overlapped_ns", "ms"),
            Column("exposed ms", "exposed_ns", "ms"), Column("overlap %", "overlap_pct", "pct"),
        ), lambda cols, ctx: comm_overlap(cols, gpu_step=ctx.gpu_step), order=110, default=True),
        Table("temporal", "Temporal breakdown (share of the GPU span from first op start to last op end; step all = "
              "whole trace)", (
            Column("step", "step", "step"), Column("GPU ops", "gpu_ops", "count"), Column("span ms", "span_ns", "ms"),
            Column("idle ms", "idle_ns", "ms"), Column("compute ms", "compute_ns", "ms"),
            Column("non-compute ms", "non_compute_ns", "ms"), Column("idle %", "idle_pct", "pct"),
            Column("compute %", "compute_pct", "pct"), Column("non-compute %", "non_compute_pct", "pct"),
        ), lambda cols, ctx: temporal_breakdown(cols, gpu_step=ctx.gpu_step), order=120, default=True),
        Table("kernel_types", "Kernel types (HTA's): busy time per set of types running at once, per device", (
            Column("device", "device"), Column("time ms", "time_ns", "ms"), Column("share %", "share_pct", "pct"),
            Column("kernel type", "kernel_type", left=True),
        ), lambda cols, ctx: kernel_types(cols), order=130, text_order=65),
        Table("kernel_breakdown", "Top kernels per kernel type (the rest in Others)", (
            Column("device", "device", repeat=True), Column("type", "kernel_type", left=True, repeat=True),
            Column("total ms", "total_ns", "ms"), Column("share %", "share_pct", "pct"),
            Column("count", "count", "count"), Column("mean us", "mean_ns", "us"), Column("min us", "min_ns", "us"),
            Column("max us", "max_ns", "us"), Column("std us", "std_ns", "us"), Column("names", "names", "count"),
            Column("name", "name", left=True),
        ), lambda cols, ctx: kernel_breakdown(cols, duration_ratio=HTA_DURATION_RATIO if ctx.hta else None),
            order=140, text_order=66),
        Table("gpu_annotations", "GPU user annotations (gpu_user_annotation) per device: share of the device's "
              "annotated time and of its GPU span", (
            Column("device", "device", repeat=True), Column("name", "name", left=True, repeat=True, width=40),
            Column("count", "count", "count"), Column("total ms", "total_ns", "ms"), Column("mean us", "mean_ns", "us"),
            Column("min us", "min_ns", "us"), Column("max us", "max_ns", "us"),
            Column("annotated %", "pct_of_annotated", "pct"), Column("span %", "pct_of_span", "pct"),
        ), lambda cols, ctx: gpu_annotation_times(cols), order=200),
    ),
)
