"""Writing several ranks' traces as one: every event of every rank, one rank at a time.

Each rank's ``pid`` and ``tid`` values move into a range of their own (``rank * ID_STRIDE +
value`` for ints in [0, ID_STRIDE); other values get the top of the rank's range), flow ``id``
and args ``correlation`` / ``External id`` move past the ranks before (so no two ranks share
one), and every ``ts`` moves by the rank's clock shift and base-time difference, exactly:
integer ns arithmetic on the number's text. ``process_name`` gets a ``rank R:`` prefix and
``process_sort_index`` puts ranks in order (a rank's processes without either get one).
Durations are kept as recorded. Only one rank's events are held at a time (a batch).

With ``jobs`` the ranks are written in parallel, each by a worker into a compressed member of
its own (gzip members and zstd frames may follow one another in one file), and the parent
copies the members' compressed bytes between its head and tail. A rank's ids start past the
ids of the ranks before it: the workers start from the ids the scan saw (``id_tops``), and a
rank written from a start its predecessors' real ids do not give is written again. The text
inside is the same, byte for byte, as one rank after another gives.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .. import _native
from ..errors import UsageError
from ..io.memory import tempfiles
from ..io.memory.heap import trim_heap
from ..io.memory.tempfiles import remove_quietly
from ..io.read.codec import READ_SIZE
from ..io.read.reader import TraceReader, parse_event
from ..io.write.fields import scalar_spans, splice, splice_rows
from ..io.write.jsontext import Texts, json_bytes
from ..io.write.output import AtomicOutput, Compressor, compression_in_force, output_codec, output_compression
from ..util.exacttime import ns_to_us_text, to_ns

ID_STRIDE = 1 << 22  # a rank's pids and tids: [rank * ID_STRIDE, (rank + 1) * ID_STRIDE)
MAX_RANKS = (1 << 32) // ID_STRIDE  # Perfetto keeps pids and tids below 2^32
SORT_STRIDE = 1 << 32  # process_sort_index: rank * SORT_STRIDE + the rank's own value
_ARG_IDS = re.compile(rb'("(?:correlation|External id|external id)"\s*:\s*)(-?\d+)')
_WS = b" \t\r\n"
# A key the merge rewrites and its scalar value (a string's escapes included), anywhere in a batch.
# The keys the batch edit finds (``_native.splice.key_values``: each with its scalar value, a
# string's escapes included, or an object's brace) and their codes: 0 pid 1 tid 2 id 3 arg 4 args
_KEY_NAMES = (b"pid", b"tid", b"id", b"correlation", b"External id", b"external id", b"args")
_KEY_CODES = np.array([0, 1, 2, 3, 3, 3, 4], np.int8)


@dataclass(frozen=True)
class RankInput:
    """One rank to write: its trace, and how its clock maps onto the merged one."""

    rank: int
    path: str
    offset_ns: int = 0  # the clock fit (``analyses.collectives.clock``), on absolute ns: taken off
    drift_ppb: int = 0
    x0_ns: int = 0
    base_ns: int = 0  # this rank's baseTimeNanoseconds (its ts are relative to it)
    out_base_ns: int = 0  # the merged file's

    def delta(self, t_ns: int) -> int:
        """What to add to this rank's ts ``t_ns`` (ns) to place it in the merged file."""
        absolute = t_ns + self.base_ns
        shift = self.offset_ns + (absolute - self.x0_ns) * self.drift_ppb // 1_000_000_000
        return self.base_ns - self.out_base_ns - shift


@dataclass
class RankWritten:
    rank: int
    events_in: int = 0
    events_out: int = 0
    added: int = 0
    pids: dict = field(default_factory=dict)  # original pid -> merged pid
    tids: dict = field(default_factory=dict)


@dataclass
class Merged:
    out: str
    ranks: list[RankWritten]
    appended: int = 0

    def summary(self) -> str:
        n = sum(r.events_out for r in self.ranks)
        return f"{len(self.ranks)} ranks, {n:,} events copied, {self.appended + sum(r.added for r in self.ranks):,} added"


Keep = Callable[[int, int | None, bytes], bool]  # (ts ns aligned, dur ns or None, ph) -> keep the event?


@dataclass(frozen=True)
class Window:
    """A ``Keep``: the events in [lo, hi) ns of the merged clock (a slice: any overlap)."""

    lo: int
    hi: int

    def __call__(self, ts: int, dur: int | None, ph: bytes) -> bool:
        return ts < self.hi and (ts + (dur or 0) > self.lo if dur else ts >= self.lo)


# Runs ``job`` over ``items`` (their input ``paths`` beside) in up to ``jobs`` workers, yielding
# the results in item order: the API passes its fan-out (``api.fan_out.run_jobs``).
Runner = Callable[..., Iterable]


def _in_turn(job: Callable, items: Sequence, paths: Sequence[str], *, jobs: int) -> Iterable:
    """The runner without workers: each item in turn, here."""
    return map(job, items)


def merge_ranks(ranks: list[RankInput], out: str, *, head: bytes = b'{"traceEvents":[\n', tail: bytes = b"\n]}\n",
                keep: Keep | None = None, appended: Callable[[list[RankWritten]], Iterable[bytes]] | None = None,
                jobs: int = 1, id_tops: Sequence[int] | None = None, runner: Runner | None = None) -> Merged:
    """Write ``ranks`` into ``out`` (atomically); ``appended(written)`` gives more events after
    the ranks' (e.g. the arrows between ranks), ``tail`` closes the document. ``jobs`` > 1:
    that many ranks written at once (``keep`` must then pickle); ``id_tops``: each rank's
    largest id as the scan saw it (-1: none), where the workers' ids start (see the module);
    ``runner(job, items, paths, jobs=)`` runs the ranks' jobs (the API's fan-out; default: one
    after another here)."""
    if any(not 0 <= r.rank < MAX_RANKS for r in ranks):
        raise UsageError(f"merge: ranks must be in 0..{MAX_RANKS - 1} (pids and tids stay below 2^32)")
    if jobs > 1 and len(ranks) > 1:
        return _merge_members(ranks, out, head, tail, keep, appended, jobs, id_tops, runner or _in_turn)
    written: list[RankWritten] = []
    extra = 0
    with AtomicOutput(out, tuple(r.path for r in ranks)) as sink:
        sink.write(head)
        first = [True]
        id_base = 0
        for r in ranks:
            done, top = _one_rank(r, sink, first, id_base, keep)
            written.append(done)
            id_base = top + 1
        if appended is not None:
            for text in appended(written):
                _put(sink, first, text)
                extra += 1
        sink.write(tail)
    return Merged(out, written, extra)


@dataclass
class _Member:
    """A rank written by a worker: its file, what was written, from which id on, and its ids'
    top past that start (-1: none; the same whatever the start)."""

    path: str
    written: RankWritten
    id_base: int
    id_top: int
    empty: bool


def _merge_members(ranks: list[RankInput], out: str, head: bytes, tail: bytes, keep: Keep | None,
                   appended: Callable[[list[RankWritten]], Iterable[bytes]] | None, jobs: int,
                   id_tops: Sequence[int] | None, runner: Runner) -> Merged:
    # the members come compressed: the output writes their bytes as they are (the input refused now)
    output = AtomicOutput(out, tuple(r.path for r in ranks), codec="plain")
    codec = "plain" if out == "-" else output_codec(out)
    paths: list[str] = []
    try:
        for _ in ranks:
            fd, path = tempfiles.make_in_tempdir("merge-rank-", ".part")
            os.close(fd)
            paths.append(path)
        members = _written_members(ranks, paths, keep, codec, jobs, id_tops, runner)
        extra = 0
        with output as sink:
            _whole_member(sink, codec, head)
            first = True
            for m in members:
                if m.empty:
                    continue
                if not first:
                    _whole_member(sink, codec, b",\n")
                first = False
                with open(m.path, "rb") as f:
                    while chunk := f.read(READ_SIZE):
                        sink.write(chunk)
                remove_quietly(m.path)
            if appended is not None:
                more = Compressor(_Into(sink), codec)
                try:
                    at_first = [first]
                    for text in appended([m.written for m in members]):
                        _put(more, at_first, text)
                        extra += 1
                except BaseException:
                    more.abort()
                    raise
                more.close()
            _whole_member(sink, codec, tail)
    finally:
        for path in paths:
            remove_quietly(path)
    return Merged(out, [m.written for m in members], extra)


def _written_members(ranks: list[RankInput], paths: list[str], keep: Keep | None, codec: str, jobs: int,
                     id_tops: Sequence[int] | None, runner: Runner) -> list[_Member]:
    """Every rank written by the workers from the ids its predecessors take: first from
    ``id_tops``, then again for the ranks whose start the real tops move (at most once more
    where a top does not depend on the start, as the edits make it)."""
    guess = list(id_tops) if id_tops is not None else [-1] * len(ranks)
    members: list[_Member | None] = [None] * len(ranks)
    job = partial(_write_member, codec, compression_in_force(), keep)
    while True:
        bases, base = [], 0
        for i in range(len(ranks)):
            bases.append(base)
            m = members[i]
            base += (m.id_top if m is not None else max(guess[i], -1)) + 1
        todo = [i for i, m in enumerate(members) if m is None or m.id_base != bases[i]]
        if not todo:
            return [m for m in members if m is not None]
        for i, m in zip(todo, runner(job, [(ranks[i], paths[i], bases[i]) for i in todo],
                                       [ranks[i].path for i in todo], jobs=jobs)):
            members[i] = m


def _write_member(codec: str, compression: str, keep: Keep | None, item: tuple[RankInput, str, int]) -> _Member:
    """One rank's events (a worker's job) into ``path``, compressed as a member of its own."""
    r, path, id_base = item
    first = [True]
    with open(path, "wb", buffering=READ_SIZE) as f, output_compression(compression):
        sink = Compressor(f, codec)
        try:
            done, top = _one_rank(r, sink, first, id_base, keep)
        except BaseException:
            sink.abort()
            raise
        sink.close()
    trim_heap()  # a worker writes rank after rank: the holes one leaves do not add up
    return _Member(path, done, id_base, top - id_base, first[0])


class _Into:
    """A file for a Compressor that writes into another (plain) one: a member made in place."""

    def __init__(self, sink: Compressor):
        self._sink = sink

    def write(self, data: bytes) -> None:
        self._sink.write(bytes(data))

    def flush(self) -> None:
        pass


def _whole_member(sink: Compressor, codec: str, text: bytes) -> None:
    """``text`` compressed on its own into ``sink``, which writes bytes as they are."""
    member = Compressor(_Into(sink), codec)
    member.write(text)
    member.close()


def _put(sink: Compressor, first: list[bool], text: bytes | memoryview) -> None:
    # one piece with its separator: the compressed bytes depend on how the text is cut
    sink.write(text if first[0] else b",\n" + text)
    first[0] = False


def _last_event_end(data: bytes) -> int:
    """Where a batch's text ends without its trailing whitespace and comma (and the whitespace
    before that comma)."""
    end = len(data)
    for strip_comma in (True, False):
        while end and data[end - 1] in _WS:
            end -= 1
        if not (strip_comma and end and data[end - 1] == 44):  # ","
            break
        end -= 1
    return end


def _one_rank(r: RankInput, sink: Compressor, first: list[bool], id_base: int, keep: Keep | None
              ) -> tuple[RankWritten, int]:
    done = RankWritten(r.rank)
    named: set[object] = set()
    sorted_: set[object] = set()
    top = id_base - 1
    reader = TraceReader(r.path)
    fast = _FastEdits(reader.scanner, r, done, named, sorted_) if keep is None else None
    for batch in reader.batches():
        done.events_in += batch.count
        if fast is not None and batch.raw_rows is not None:
            data, local_top = fast.batch(batch, id_base)
            top = max(top, local_top)
            end = _last_event_end(data)
            if end:
                _put(sink, first, data if end == len(data) else memoryview(data)[:end])
            done.events_out += batch.count
            continue
        raw = batch.raw
        for a, b in batch.spans.tolist():
            ev = _edit(raw[a:b], r, done, id_base, keep, named, sorted_)
            if ev is None:
                continue
            new, local_top = ev
            top = max(top, local_top)
            _put(sink, first, new)
            done.events_out += 1
    lowest = r.rank * ID_STRIDE
    for pid, new in sorted(done.pids.items(), key=lambda kv: kv[1]):
        if pid not in named:
            _put(sink, first, _meta("process_name", new, {"name": f"rank {r.rank}: pid {pid}"}))
            done.added += 1
        if pid not in sorted_:
            _put(sink, first, _meta("process_sort_index", new, {"sort_index": r.rank * SORT_STRIDE + (new - lowest)}))
            done.added += 1
    return done, top


def _meta(name: str, pid: int, args: dict) -> bytes:
    return json_bytes({"ph": "M", "name": name, "pid": pid, "tid": 0, "ts": 0, "args": args})


def mapped(done: RankWritten, table: dict, value: object) -> int:
    """The merged id of a pid or tid ``value`` of rank ``done.rank``."""
    got = table.get(value)
    if got is None:
        base = done.rank * ID_STRIDE
        if type(value) is int and 0 <= value < ID_STRIDE - 4096:
            got = base + value
        else:  # strings, negatives, ints beyond the range: the top of the rank's range
            got = base + ID_STRIDE - 1 - sum(1 for v in table if not (type(v) is int and 0 <= v < ID_STRIDE - 4096))
        table[value] = got
    return got


def _value(text: bytes) -> object:
    try:
        return parse_event(b'{"v":' + text + b"}")["v"]
    except Exception:  # noqa: BLE001 - an odd value: keep it as its text
        return text.decode("utf-8", "surrogateescape")


def _edit(text: bytes, r: RankInput, done: RankWritten, id_base: int, keep: Keep | None, named: set,
          sorted_: set) -> tuple[bytes, int] | None:
    spans = scalar_spans(text)
    ph = text[spans[b"ph"][0] + 1:spans[b"ph"][1] - 1] if b"ph" in spans else b""
    if ph == b"M":
        return _edit_meta(text, r, done, named, sorted_), id_base - 1
    edits = []
    top = id_base - 1
    ts_ns = None
    if b"ts" in spans:
        a, b = spans[b"ts"]
        old = text[a:b]
        quoted = old[:1] == b'"'
        try:
            ts_ns = to_ns((old[1:-1] if quoted else old).decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            ts_ns = None
        if ts_ns is not None:
            ts_ns += r.delta(ts_ns)
            new = ns_to_us_text(ts_ns).encode()
            edits.append((a, b, b'"' + new + b'"' if quoted else new))
    if keep is not None and ts_ns is not None:
        dur = None
        if b"dur" in spans:
            try:
                dur = to_ns(text[spans[b"dur"][0]:spans[b"dur"][1]].strip(b'"').decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                dur = None
        if not keep(ts_ns, dur, ph):
            return None
    for key, table in ((b"pid", done.pids), (b"tid", done.tids)):
        if key in spans:
            a, b = spans[key]
            edits.append((a, b, b"%d" % mapped(done, table, _value(text[a:b]))))
    if b"id" in spans:
        a, b = spans[b"id"]
        old = text[a:b]
        if old.lstrip(b"-").isdigit():
            v = int(old) + id_base
            top = max(top, v)
            edits.append((a, b, b"%d" % v))
    edited = splice(text, sorted(edits))

    def shifted(m: re.Match) -> bytes:
        nonlocal top
        v = int(m.group(2)) + id_base
        top = max(top, v)
        return m.group(1) + b"%d" % v

    return _ARG_IDS.sub(shifted, edited), top


def _edit_meta(text: bytes, r: RankInput, done: RankWritten, named: set, sorted_: set) -> bytes:
    e = parse_event(text)
    pid = e.get("pid")
    if "pid" in e:
        e["pid"] = mapped(done, done.pids, pid)
    if "tid" in e:
        e["tid"] = mapped(done, done.tids, e["tid"])
    if "ts" in e:
        try:
            ns = to_ns(e["ts"])
            e["ts"] = max(ns + r.delta(ns), 0) // 1000
        except ValueError:
            pass
    args = e.get("args")
    name = e.get("name")
    if isinstance(args, dict) and name == "process_name" and isinstance(args.get("name"), str):
        args["name"] = f"rank {r.rank}: {args['name']}"
        named.add(pid)
    elif isinstance(args, dict) and name == "process_sort_index" and type(args.get("sort_index")) is int:
        args["sort_index"] = r.rank * SORT_STRIDE + min(max(args["sort_index"], 0), SORT_STRIDE - 1)
        sorted_.add(pid)
    return json_bytes(e)


class _FastEdits:
    """A batch's edits at once: the new ts texts from the scanner's values and places, the other
    fields found by one regex pass over the batch. An event this cannot place exactly (odd rows,
    metadata, a top-level key after its args, a ts the scanner did not place) is edited alone."""

    def __init__(self, scanner, r: RankInput, done: RankWritten, named: set, sorted_: set):
        self.scanner, self.r, self.done, self.named, self.sorted_ = scanner, r, done, named, sorted_
        self._is_meta: list[bool] = []
        self._track_has: list[tuple[bool, bool]] = []

    def _learn(self) -> None:
        from ..io.read import rows as R

        strings, tracks = self.scanner.strings, self.scanner.tracks
        self._is_meta += [raw == b"M" for raw in strings[len(self._is_meta):]]
        for raw in tracks[len(self._track_has):]:
            pid, _, tid = raw.partition(b"\0")
            self._track_has.append((bool(pid), bool(tid)))
        self._R = R

    def batch(self, batch, id_base: int) -> tuple[bytes, int]:
        self._learn()
        R = self._R
        raw = batch.raw
        rows = batch.raw_rows
        n = batch.count
        flags = rows[:, R.FLAGS]
        spans = batch.spans
        ph = rows[:, R.PH]
        meta = np.zeros(n, bool)
        known = ph >= 0
        meta[known] = np.asarray(self._is_meta, bool)[ph[known]]
        slow = meta | ((flags & R.F_ODD) != 0)
        has_ts = ((flags & R.F_TS) != 0) & ~slow
        slow |= has_ts & (rows[:, R.TS_AT] < 0)
        has_ts &= ~slow
        # Every rewritten key in the batch: its code, where its value starts and stops, the value
        # where it is a number, and (below) the event it is in.
        found = _native.splice.key_values(raw, _KEY_NAMES)
        code = _KEY_CODES[np.frombuffer(found[0], np.int8)]  # 0 pid 1 tid 2 id 3 arg 4 args
        pos = np.frombuffer(found[1], np.int64)  # where each value starts
        stop = np.frombuffer(found[2], np.int64)
        parsed, overflow = np.frombuffer(found[3], np.int64), found[4]
        first_byte = np.frombuffer(raw, np.uint8)[pos] if len(pos) else np.zeros(0, np.uint8)
        brace = first_byte == ord("{")
        owner = np.searchsorted(spans[:, 0], pos, side="right") - 1
        slow[owner[brace & (code != 4)]] = True  # a pid, tid or id that is an object: edited alone
        code[~brace & (code == 4)] = 5  # "args" that is not an object: nothing to do
        # the args object: from its key (the event's first "args") to where the scanner says it ends
        # (ARGS_AT: where it would take new members)
        big = np.iinfo(np.int64).max
        opened = (code == 4) & brace
        args_from = np.full(n, big, np.int64)
        if opened.any():
            np.minimum.at(args_from, owner[opened], pos[opened])
        has_args = (flags & R.F_ARGS) != 0
        slow |= has_args & (args_from == big)
        args_to = np.where(has_args, rows[:, R.ARGS_AT], -1)
        in_args = (pos > args_from[owner]) & (pos < args_to[owner])
        top_key = (code <= 2) & ~in_args
        # the top-level pid, tid and id each event has, found before its args: else edited alone
        track = rows[:, R.TRACK]
        has = np.asarray(self._track_has, bool).reshape(-1, 2)
        want_pid = np.where(track >= 0, has[np.maximum(track, 0), 0], False)
        want_tid = np.where(track >= 0, has[np.maximum(track, 0), 1], False)
        for c, want in ((0, want_pid), (1, want_tid), (2, (flags & R.F_ID) != 0)):
            count = np.bincount(owner[top_key & (code == c)], minlength=n)
            slow |= count != want
        text_list: list[bytes] = []
        slow_idx = np.flatnonzero(slow)
        top = id_base - 1
        for i in slow_idx.tolist():
            a, b = spans[i]
            new, local_top = _edit(raw[a:b], self.r, self.done, id_base, None, self.named, self.sorted_)
            top = max(top, local_top)
            text_list.append(new)
        use = ~slow[owner] & (top_key | (in_args & (code == 3)))
        number = first_byte != ord('"')
        use &= number | (code <= 1)  # a string flow or correlation id stays as it is
        at = np.flatnonzero(use)
        ints = parsed
        if overflow:  # a number beyond int64 among them: as int64 cannot hold it (OverflowError)
            ints = np.zeros(len(code), np.int64)
            numeric = at[number[at]]
            ints[numeric] = np.array([int(raw[pos[j]:stop[j]]) for j in numeric.tolist()], np.int64)
        new_values = np.zeros(len(code), np.int64)
        ids = at[code[at] >= 2]
        new_values[ids] = ints[ids] + id_base
        if len(ids):
            top = max(top, int(new_values[ids].max()))
        lo, hi = self.r.rank * ID_STRIDE, ID_STRIDE - 4096
        plain = at[(code[at] <= 1) & number[at] & (ints[at] >= 0) & (ints[at] < hi)]
        new_values[plain] = lo + ints[plain]
        for j in at[(code[at] <= 1) & ~np.isin(at, plain)].tolist():  # strings, negatives, huge: one by one
            table = self.done.pids if code[j] == 0 else self.done.tids
            new_values[j] = mapped(self.done, table, _value(raw[pos[j]:stop[j]]))
        for c, table in ((0, self.done.pids), (1, self.done.tids)):  # note the pids and tids seen
            for v in np.unique(ints[plain[code[plain] == c]]).tolist():
                table.setdefault(v, lo + v)
        ts_rows = np.flatnonzero(has_ts & ~slow)  # an event edited alone has its new ts already
        t = rows[ts_rows, R.TS]
        r = self.r
        q, rest = np.divmod(t + (r.base_ns - r.x0_ns), 1_000_000_000)  # floor(dt * drift / 1e9), no overflow
        shift = r.offset_ns + q * r.drift_ppb + rest * r.drift_ppb // 1_000_000_000
        parts = [Texts.numbers(t + (r.base_ns - r.out_base_ns) - shift, 3), Texts.numbers(new_values[at]),
                 Texts.of(text_list)]
        blob = b"".join(p.blob for p in parts)
        offsets = np.cumsum([0] + [len(p.blob) for p in parts[:-1]])
        texts = Texts(blob, np.concatenate([p.starts + o for p, o in zip(parts, offsets)]),
                      np.concatenate([p.lengths for p in parts]))
        starts = np.concatenate((rows[ts_rows, R.TS_AT], pos[at], spans[slow_idx, 0]))
        stops = np.concatenate((rows[ts_rows, R.TS_END], stop[at], spans[slow_idx, 1]))
        order = np.argsort(starts, kind="stable")
        return splice_rows(raw, starts[order], stops[order], [texts.take(order)]), top

