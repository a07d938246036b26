"""Craft issue 41's hostile inputs and measure each command on them: peak RSS and seconds.

    python3 scripts/hostile_inputs.py [--dir /tmp/traceforge-hostile] [--only NAME ...]

Each input is written once (kept for reruns: making them takes minutes and some disk), then
every command runs on it under /usr/bin/time, with the default limits unless the input's entry
says otherwise. Prints one table row per (input, command): exit code, seconds (wall, CPU),
peak RSS, and the error line if there is one. Not a test: the acceptance bound (under 500 MB
and 30 s each) is for a quiet machine."""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
KERNEL = (b'{"ph":"X","cat":"kernel","name":"void gemm_kernel<float>(int)","pid":0,"tid":7,"ts":%d,"dur":%d,'
          b'"args":{"stream":7,"device":0,"correlation":%d}}')
HEAD, TAIL = b'{"traceEvents":[\n', b'\n]}\n'


def _gzip_stream(path: Path, parts, level: int = 9) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level) as f:
        for part in parts:
            f.write(part)


def _repeat(chunk: bytes, total: int):
    block = chunk * max(1, (4 * MB) // len(chunk))
    done = 0
    while done < total:
        piece = block[:total - done]
        done += len(piece)
        yield piece


def name_1gb(path: Path) -> None:
    """One event whose name is 1 GB of 'A' (a small .gz)."""
    _gzip_stream(path, [HEAD, b'{"ph":"X","cat":"kernel","name":"', *_repeat(b"A", 1 << 30),
                        b'","pid":0,"tid":7,"ts":1,"dur":1}', TAIL])


def spaces_2gb(path: Path) -> None:
    """2 GB of spaces between an event and its comma (a small .gz)."""
    _gzip_stream(path, [HEAD, KERNEL % (1, 1, 1), *_repeat(b" ", 2 << 30), b",", KERNEL % (2, 1, 2), TAIL])


def zst_bomb(path: Path) -> None:
    """8 GB of identical kernels in a small .zst."""
    event = KERNEL % (1000, 5, 1) + b",\n"
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
        f.write(HEAD)
        for piece in _repeat(event, 8 << 30):
            f.write(piece)
        f.write(KERNEL % (1000, 5, 1) + TAIL)


def same_ts_1gb(path: Path) -> None:
    """1 GB of kernels sharing one ts (durations 1..997 us, one thread)."""
    def parts():
        yield HEAD
        size, n, batch = 0, 0, []
        while size < 1 << 30:
            batch.append(KERNEL % (1000, n % 997 + 1, n))
            size += len(batch[-1]) + 2
            n += 1
            if len(batch) == 100_000:
                yield b",\n".join(batch) + b",\n"
                batch = []
        yield b",\n".join(batch + [KERNEL % (1000, 1, n)]) + TAIL
    _gzip_stream(path, parts(), level=1)


def deep_nesting(path: Path) -> None:
    """An event whose args nest 1,000,000 arrays deep."""
    deep = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":1,"args":{"a":' + b"[" * 10**6 \
        + b"]" * 10**6 + b"}}"
    _gzip_stream(path, [HEAD, KERNEL % (1, 1, 1), b",", deep, TAIL])


def long_kernel_name(path: Path) -> None:
    """The sample with one kernel named void k<100,000 x A>(int)."""
    data = gzip.decompress((ROOT / "samples" / "train_step.json.gz").read_bytes())
    name = b"void k<" + b"A" * 100_000 + b">(int)"
    at = data.index(b'"cat": "kernel", "name": "') + len(b'"cat": "kernel", "name": "')
    end = data.index(b'"', at)
    path.write_bytes(gzip.compress(data[:at] + name + data[end:], 6))


DISTINCT_KERNEL = (b'{"ph":"X","cat":"kernel","name":"void kernel_%d<float, 128>(float*, int)","pid":0,"tid":7,'
                   b'"ts":%d,"dur":3,"args":{"stream":7,"device":0,"correlation":%d}}')


def distinct_kernel_names(path: Path, count: int, level: int = 1) -> None:
    """``count`` kernels one after another on one stream, each with a name of its own."""
    def parts():
        yield HEAD
        for first in range(0, count, 100_000):
            block = [DISTINCT_KERNEL % (i, 1000 + 5 * i, i) for i in range(first, min(first + 100_000, count))]
            yield b",\n".join(block) + (b",\n" if first + 100_000 < count else TAIL)
    _gzip_stream(path, parts(), level=level)


def names_1m(path: Path) -> None:
    distinct_kernel_names(path, 1_000_000)


def names_3m(path: Path) -> None:
    distinct_kernel_names(path, 3_000_000)


NAME_COMMANDS = ["info", "stats", "classify", "patterns", "launch-stats", "report", "export", "annotate --all"]
INPUTS = {  # name: (file, craft, commands)
    "1 GB name in a .gz": ("name_1gb.json.gz", name_1gb, ["check", "stats", "annotate"]),
    "2 GB of spaces before a comma": ("spaces_2gb.json.gz", spaces_2gb, ["check", "stats", "annotate"]),
    "2 GB of spaces, --max-ratio 100000": ("spaces_2gb.json.gz", spaces_2gb,
                                           ["check --max-ratio 100000", "stats --max-ratio 100000"]),
    ".zst bomb (8 GB of kernels)": ("bomb.json.zst", zst_bomb, ["check", "stats", "annotate"]),
    "1 GB of events at one ts": ("same_ts_1gb.json.gz", same_ts_1gb, ["check", "stats", "annotate", "repair"]),
    "1,000,000-deep nesting": ("deep.json.gz", deep_nesting, ["check", "stats", "annotate"]),
    "100,000-char kernel name": ("long_name.json.gz", long_kernel_name, ["patterns", "stats", "annotate"]),
    "10^6 distinct kernel names": ("names_1m.json.gz", names_1m, NAME_COMMANDS),
    "3x10^6 distinct kernel names": ("names_3m.json.gz", names_3m, NAME_COMMANDS),
}
ANNOTATE = ["--queue-length", "--launch-delay"]


def measure(command: str, path: Path, out: Path) -> tuple[int, str, str]:
    args = command.split()
    if args[0] == "annotate":
        args += [*ANNOTATE, "-o", str(out)]
    elif args[0] == "repair":
        args += ["-o", str(out)]
    r = subprocess.run(["/usr/bin/time", "-f", "TIME %e s %U+%S cpu %M KB", sys.executable, "-m", "traceforge",
                        args[0], str(path), *args[1:], "-q"], capture_output=True, cwd=ROOT)
    err = r.stderr.decode("utf-8", "replace").splitlines()
    timing = next((line[5:] for line in reversed(err) if line.startswith("TIME ")), "?")
    message = next((line for line in err if line.startswith("traceforge:")), "")
    if out.exists():
        out.unlink()
    return r.returncode, timing, message


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/traceforge-hostile")
    ap.add_argument("--only", nargs="*", help="names (or parts of names) of the inputs to run")
    a = ap.parse_args()
    where = Path(a.dir)
    where.mkdir(parents=True, exist_ok=True)
    print(f"{'input':36} {'command':28} {'exit':>4}  time / peak RSS   error")
    for name, (file, craft, commands) in INPUTS.items():
        if a.only and not any(o in name for o in a.only):
            continue
        path = where / file
        if not path.exists():
            craft(path)
        for command in commands:
            code, timing, message = measure(command, path, where / "out.json.gz")
            print(f"{name:36} {command:28} {code:>4}  {timing}  {message[:150]}", flush=True)
    os.sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
