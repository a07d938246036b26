"""The C extensions built the ways other platforms build them give the same results.

Builds traceforge/_native/*.c several times on this machine (with setup.py's build_ext, so
with the interpreter's own flags plus CFLAGS):

  default   as shipped here (x86-64: SSE2, the AVX2 search where the CPU has it)
  no-simd   -DTRACEFORGE_NO_SIMD: the scalar loops, what arm64 runs
  generic   -DTRACEFORGE_GENERIC_C: no builtins, no __int128, our own memmem (what MSVC and
            other compilers get in place of GCC/Clang builtins)
  clang     the default, compiled by clang (when there is one)

and feeds every function of every variant the same random and edge-case inputs, the key
search of _splice with AVX2 on and off. Any difference is printed; the exit status is 1
if there was one. --reference DIR adds a directory of prebuilt modules (say, built from
an older commit) to compare with.

    python scripts/check_native_variants.py [--rounds N] [--reference DIR]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.machinery
import importlib.util
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["_scanner", "_counter_text", "_splice", "_stacks", "_factorize", "_replay", "_search"]
VARIANTS = {"default": {}, "no-simd": {"CFLAGS": "-DTRACEFORGE_NO_SIMD"},
            "generic": {"CFLAGS": "-DTRACEFORGE_GENERIC_C"}, "clang": {"CC": "clang", "LDSHARED": "clang -shared"}}


def build(name: str, env_extra: dict[str, str], into: Path) -> Path | None:
    out = into / name
    env = dict(os.environ, **env_extra)
    env.pop("TRACEFORGE_BUILD_NATIVE", None)
    cmd = [sys.executable, "setup.py", "-q", "build_ext", "--force", "--build-lib", str(out),
           "--build-temp", str(into / f"{name}.tmp")]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode or not list(out.rglob("_splice*")):
        print(f"{name}: not built\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return None
    return out / "traceforge" / "_native" if (out / "traceforge").exists() else out


def load(directory: Path, tag: str) -> dict[str, object]:
    mods = {}
    for m in MODULES:
        path = next((p for suffix in importlib.machinery.EXTENSION_SUFFIXES for p in directory.glob(m + suffix)), None)
        if path is None:
            continue
        spec = importlib.util.spec_from_file_location(f"variant_{tag.replace('-', '_')}.{m}", path,
                                                      loader=importlib.machinery.ExtensionFileLoader(
                                                          f"variant_{tag.replace('-', '_')}.{m}", str(path)))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods[m] = mod
    return mods


def i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def normalized(value):
    """Results as comparable values: buffers as bytes, errors as their type and text."""
    if isinstance(value, (bytearray, memoryview, np.ndarray)):
        return bytes(value)
    if isinstance(value, tuple):
        return tuple(normalized(v) for v in value)
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def call(fn, *args):
    try:
        return normalized(fn(*args))
    except Exception as exc:  # the same error in every variant counts as the same result
        return ("error", type(exc).__name__, str(exc))


# ---- cases: each returns a list of (label, function(mods) -> result) ---------------------------


def splice_cases(rng: random.Random, rounds: int):
    cases = []
    for r in range(rounds):
        anchored = r % 3 != 0
        alphabet = rng.choice([b'ab"c', b'ab"cdefg', b'"x', bytes(range(32, 127))])
        data = bytes(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 15, 16, 31, 32, 33, 63, 64, 65,
                                                                       rng.randint(0, 400)])))
        needles = [(b'"' if anchored else b"") + bytes(rng.choice(alphabet) for _ in range(rng.randint(anchored, 5)))
                   for _ in range(rng.randint(0, 7))]
        if data and needles and rng.random() < 0.3:  # a needle right at the end
            k = rng.choice(needles)
            data = data[:max(0, len(data) - len(k))] + k
        starts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 6)))
        stops = [rng.randint(a, len(data)) for a in starts]
        if rng.random() < 0.3:
            starts, stops = starts + [0], stops + [len(data)]
        cases.append((f"spans_containing #{r}",
                      lambda m, a=(data, i64(starts), i64(stops), needles): call(m["_splice"].spans_containing, *a)))
        # insert_members on events with args
        raw, st, at, empty = b"[", [], [], []
        for i in range(rng.randint(0, 12)):
            members = rng.choice([b"", b'"a": 1', b'"b": "x", "c": [1]', b'"category": 0', b'"launch_delay_us": 2',
                                  b'"' + bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) + b'": 0'])
            event = b'{"name": "k%d", "args": {' % i + members
            st.append(len(raw))
            at.append(len(raw) + len(event))
            empty.append(not members)
            raw += event + b"}}, "
        bodies = [rng.choice([b"", b'"launch_delay_us": 1.5', b'"x": 2']) for _ in st]
        blob = b"".join(bodies)
        bs = i64(np.cumsum([0] + [len(b) for b in bodies])[:-1]) if bodies else i64([])
        bl = i64([len(b) for b in bodies])
        keys = rng.choice([[b'"launch_delay_us"', b'"category"'], [b'"x"'], [], [b'"c"', b'"b"', b'"a"', b'"z"',
                                                                                  b'"y"']])
        cases.append((f"insert_members #{r}", lambda m, a=(raw, i64(st), i64(at), np.array(empty, bool), blob, bs, bl,
                                                          keys): call(m["_splice"].insert_members, *a)))
        parts = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) for _ in range(rng.randint(0, 4))]
        rows = rng.randint(0, 5)
        columns = []
        for p in parts:
            if rng.random() < 0.3:
                columns.append(None)
            else:
                s = [rng.randint(0, len(p)) for _ in range(rows)]
                columns.append((i64(s), i64([rng.randint(0, len(p) - a) for a in s])))
        cases.append((f"join_rows #{r}", lambda m, a=(parts, columns, rows, rng.choice([b"", b",", b", "])):
                       call(m["_splice"].join_rows, *a)))
    return cases


def sample_events() -> bytes:
    text = gzip.decompress((ROOT / "samples" / "train_step.json.gz").read_bytes())
    return text


def scanner_cases(rng: random.Random, rounds: int):
    text = sample_events()
    begin = text.index(b"[", text.index(b'"traceEvents"')) + 1
    variants = [(text, begin)]
    for _ in range(rounds):
        t = bytearray(text)
        for _ in range(rng.randint(1, 4)):  # damage: a byte changed, a cut, a number stretched
            at = rng.randrange(begin, len(t))
            kind = rng.random()
            if kind < 0.4:
                t[at] = rng.choice(b'0123456789.,:{}[]"\\ eEx-\x01\xc3')
            elif kind < 0.6:
                del t[at:]
                break
            else:
                t[at:at] = rng.choice([b"123456789012345678901234", b".0001", b"\\u0041", b" ", b"1e5"])
        variants.append((bytes(t), begin))

    def run(m, data, start, limit):
        sc = m["_scanner"]
        si, ti = sc.Interner(), sc.Interner()
        out, pos = [], start
        for _ in range(10000):
            got = call(sc.scan, data, pos, limit, si, ti)
            out.append(got)
            if got[0] == "error" or got[0] != sc.OK or got[1] == 0:
                break
            pos += got[2]
        rows = out[0][5] if out and out[0][0] != "error" else b""
        cols = call(sc.columns, rows, None, bytes(range(sc.NFIELDS))) if rows else None
        return out, sc.strings(si, 0, sc.count(si)), sc.strings(ti, 0, sc.count(ti)), cols

    cases = []
    for n, (data, start) in enumerate(variants):
        for limit in (1 << 40, 4096, 700):
            cases.append((f"scan #{n} limit {limit}", lambda m, d=data, s=start, lim=limit: run(m, d, s, lim)))
    return cases


def counter_cases(rng: random.Random, rounds: int):
    cases = []
    edges = [0, 1, -1, 9, 10, 99, 100, 10**8 - 1, 10**8, 2**63 - 1, -2**63, -2**63 + 1] + \
        [s * (10**k + d) for k in range(19) for d in (-1, 0, 1) for s in (1, -1)]
    for r in range(rounds):
        values = i64(edges + [rng.randint(-2**63, 2**63 - 1) >> rng.randint(0, 63) for _ in range(200)])
        decimals = rng.randint(0, 18)
        cases.append((f"fixed_point_texts #{r}", lambda m, a=(values, decimals, rng.choice([b"", b'"k": ']),
                                                              rng.random() < 0.5):
                       call(m["_counter_text"].fixed_point_texts, *a)))
        ts = i64(sorted(rng.randint(0, 2**62) for _ in range(50)))
        cases.append((f"counter_events #{r}", lambda m, a=(b'{"ts": ', b', "v": ', b"}", ts, i64(values[:50]),
                                                           decimals): call(m["_counter_text"].counter_events, *a)))
    return cases


def replay_cases(rng: random.Random, rounds: int):
    cases = []
    big = [2**63 - 1, -2**63, 2**62, -2**62, 2**63 - 2]
    for r in range(rounds):
        n, n_tracks, n_keys = rng.randint(0, 60), rng.randint(1, 4), rng.randint(0, 5)
        extreme = r % 4 == 0
        cols = {
            "kind": [rng.choice([0, 0, 0, 1, 2, 3, 4, 5, 6]) for _ in range(n)],
            "ts": sorted(rng.choice(big) if extreme and rng.random() < 0.3 else rng.randint(0, 100) for _ in range(n)),
            "dur": [rng.choice(big) if extreme and rng.random() < 0.3 else rng.randint(-2, 30) for _ in range(n)],
            "track": [rng.randrange(n_tracks) for _ in range(n)],
            "key": [rng.randrange(n_keys) if n_keys else 0 for _ in range(n)],
            "fid": [rng.choice([0, 1, 2, 3, 2**40, 2**63 - 1]) for _ in range(n)],
            "v2_mode": [rng.choice([-1, -1, 0, 1, 2]) for _ in range(n)],
            "name": [rng.randint(-1, 3) for _ in range(n)],
            "cat": [rng.randint(-1, 2) for _ in range(n)],
            "flags": [rng.randint(0, 3) for _ in range(n)],
            "ordinal": list(range(n)),
        }
        if n_keys == 0:
            cols["kind"] = [k if k < 3 else 0 for k in cols["kind"]]
        slices_only = rng.random() < 0.3
        arrays = [i64(v) for v in cols.values()]
        order = i64(range(n))

        def run(m, arrays=arrays, order=order, n_tracks=n_tracks, n_keys=n_keys, slices_only=slices_only):
            rp = m["_replay"]
            w = rp.walker(n_tracks, n_keys, slices_only)
            half = len(order) // 2  # two windows: the state carried between calls
            return call(rp.walk, w, order[:half], *arrays), call(rp.walk, w, order[half:], *arrays)

        cases.append((f"replay #{r}", run))
    return cases


def stacks_cases(rng: random.Random, rounds: int):
    cases = []
    for r in range(rounds):
        n_cpu, n_launch = rng.randint(0, 40), rng.randint(0, 20)
        op_ts = i64(sorted(rng.randint(0, 200) for _ in range(n_cpu)))
        call_ts = i64(sorted(rng.randint(0, 200) for _ in range(n_launch)))
        wide = rng.random() < 0.5
        dt = np.int64 if wide else np.int32
        op_dur = np.asarray([rng.randint(-5, 80) for _ in range(n_cpu)], dt)
        call_dur = np.asarray([rng.randint(-5, 10) for _ in range(n_launch)], dt)
        ops = np.asarray(rng.sample(range(n_cpu), n_cpu), np.int32)
        calls = np.asarray(range(n_launch), np.int32)

        def nest(m, a=(ops, calls, op_ts, op_dur, op_dur.itemsize, call_ts, call_dur, call_dur.itemsize), size=n_cpu +
                 n_launch):
            parent = np.full(size, -7, np.int32)
            return call(m["_stacks"].nest_thread, *a, parent), parent.tobytes()

        cases.append((f"nest_thread #{r}", nest))
        k = rng.randint(0, 40)
        start = i64(sorted(rng.randint(0, 100) for _ in range(k)))
        stop = start + i64([rng.randint(0, 30) for _ in range(k)])

        def nest_sorted(m, a=(start, stop, np.asarray([rng.random() < 0.7 for _ in range(k)], np.uint8),
                              np.arange(k, dtype=np.int32)), k=k):
            holder = np.full(k, -7, np.int32)
            carried = call(m["_stacks"].nest_sorted, *a, holder, b"")
            if isinstance(carried, bytes):  # the open ops (end, row); older builds left padding unset
                carried = np.frombuffer(carried, np.int64).reshape(-1, 2)[:, 0].tobytes() + \
                    np.frombuffer(carried, np.int32).reshape(-1, 4)[:, 2].tobytes()
            return carried, holder.tobytes()

        cases.append((f"nest_sorted #{r}", nest_sorted))
    return cases


def factorize_search_cases(rng: random.Random, rounds: int):
    cases = []
    for r in range(rounds):
        n = rng.choice([0, 1, 5, 2000, 5000])
        values = np.asarray([rng.randrange(rng.choice([3, 100, 2**64])) for _ in range(n)], np.uint64)

        def fact(m, values=values):
            codes, first = np.empty(len(values), np.int64), np.empty(len(values), np.int64)
            got = call(m["_factorize"].factorize, values, codes, first)
            return got, codes.tobytes(), first[:got if isinstance(got, int) else 0].tobytes()

        cases.append((f"factorize #{r}", fact))
        for itemsize, dt in ((4, np.int32), (8, np.int64)):
            hay = np.asarray(sorted(rng.randint(-50, 50) for _ in range(rng.randint(0, 300))), dt)
            needles = np.asarray([rng.randint(-60, 60) for _ in range(rng.randint(0, 300))], dt)
            for right in (0, 1):
                def search(m, a=(hay, needles, itemsize, right), size=len(needles)):
                    out = np.empty(size, np.intp)
                    return call(m["_search"].search_sorted, *a, out), out.tobytes()

                cases.append((f"search_sorted #{r} {itemsize} {right}", search))
        starts = i64(sorted(rng.randint(0, 1000) for _ in range(rng.randint(0, 200))))

        def windows(m, starts=starts, w=rng.randint(1, 50)):
            out = np.zeros(len(starts), np.int64)
            got = call(m["_search"].non_overlapping, starts, w, out)
            return got, out.tobytes()

        cases.append((f"non_overlapping #{r}", windows))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--reference", type=Path, help="a directory of prebuilt modules to compare with too")
    parser.add_argument("--keep", type=Path, help="build into this directory (kept) instead of a temporary one")
    args = parser.parse_args()
    into = args.keep or Path(tempfile.mkdtemp(prefix="tf-variants-"))
    into.mkdir(parents=True, exist_ok=True)
    loaded = {}
    for name, env in VARIANTS.items():
        if env.get("CC") and not shutil.which(env["CC"]):
            print(f"{name}: skipped ({env['CC']} not found)")
            continue
        directory = build(name, env, into)
        if directory is not None:
            loaded[name] = load(directory, name)
            print(f"{name}: built {sorted(loaded[name])}")
    if args.reference:
        loaded["reference"] = load(args.reference, "reference")
        print(f"reference: {sorted(loaded['reference'])}")
    # the AVX2 switch: each variant that has it, also with it off
    runs = []
    for name, mods in loaded.items():
        sp = mods.get("_splice")
        if sp is not None and hasattr(sp, "set_avx2") and sp.avx2_supported():
            runs.append((f"{name}+avx2", mods, True))
            runs.append((f"{name}-avx2", mods, False))
        else:
            runs.append((name, mods, None))
    print("runs:", ", ".join(r[0] for r in runs))
    rng = random.Random(20240611)
    cases = (splice_cases(rng, args.rounds) + scanner_cases(rng, max(5, args.rounds // 10)) +
             counter_cases(rng, max(5, args.rounds // 5)) + replay_cases(rng, args.rounds) +
             stacks_cases(rng, args.rounds) + factorize_search_cases(rng, max(5, args.rounds // 5)))
    differences = 0
    for label, case in cases:
        results = {}
        for name, mods, avx2 in runs:
            module = label.split()[0]
            needed = {"spans_containing": "_splice", "insert_members": "_splice", "join_rows": "_splice",
                      "scan": "_scanner", "fixed_point_texts": "_counter_text", "counter_events": "_counter_text",
                      "replay": "_replay", "nest_thread": "_stacks", "nest_sorted": "_stacks",
                      "factorize": "_factorize", "search_sorted": "_search", "non_overlapping": "_search"}[module]
            if needed not in mods:
                continue
            if avx2 is not None:
                mods["_splice"].set_avx2(avx2)
            results[name] = case(mods)
        first_name, first = next(iter(results.items()))
        for name, got in results.items():
            if got != first:
                differences += 1
                print(f"DIFFERENT: {label}: {name} vs {first_name}\n  {str(got)[:300]}\n  {str(first)[:300]}")
    print(f"{len(cases)} cases, {len(runs)} runs each: {differences} differences")
    if not args.keep:
        shutil.rmtree(into, ignore_errors=True)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
