"""``traceforge export``: one CSV / Parquet table per activity kind (see ``analyses.export_tables``)."""

from __future__ import annotations

import argparse
import sys

from ....api.results import export_columns, tables_by_kind
from ....io.write.table_files import check_parquet, write_tables
from ...options import add_filter_arguments, filters_of, output_path
from ...output import wrap


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write one CSV or Parquet table per activity kind (kernel, gpu_memcpy, cuda_runtime, cpu_op, ...)",
        description="Write <DIR>/<kind>.csv (or .parquet) for each activity kind in the trace: exact integer-ns "
        "start, end, dur, name, correlation, device, stream, grid, block, shared memory, bytes, External id, "
        "and for GPU ops the launch API and the CPU op that issued them.",
    )
    p.add_argument("input", help="trace file (.json, .json.gz, .json.zst)")
    p.add_argument("--csv", type=output_path, metavar="DIR", help="write CSV files into DIR (created if missing)")
    p.add_argument("--parquet", type=output_path, metavar="DIR", help="write Parquet files into DIR (needs pyarrow)")
    add_filter_arguments(p)
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    if args.csv is None and args.parquet is None:
        args.parser.error("say where to write: --csv DIR and/or --parquet DIR")
    if args.parquet is not None:
        check_parquet()
    written = write_tables(tables_by_kind(export_columns(args.input, filters_of(args))), csv_dir=args.csv, parquet_dir=args.parquet)
    rows = ", ".join(dict.fromkeys(f"{path.stem} {n:,}" for path, n in written))
    print("\n".join(wrap(f"wrote {len(written)} files ({rows})")), file=sys.stderr)
    for path, _ in written:
        print(path)
    return 0
