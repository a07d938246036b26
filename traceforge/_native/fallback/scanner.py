"""Pure-Python twin of the C event scanner ``traceforge._native._scanner``.

Same interface, same results: the module constants (row fields, flag bits, statuses),
``Interner(store)``, ``intern``, ``count``, ``strings``, ``find``, ``columns`` and ``scan``, which gives the same int64 rows,
interned strings and tracks (in first-seen order), statuses, stop offsets, error positions
and messages as the C scan, for whole and for cut-short buffers alike. ``_scanner.c`` is the
specification; read it for what each field and flag means.

Each event goes to the first of three layers that takes it:

1. ``_loaded_event`` (most events of real traces): orjson parses the event (from its '{' to
   a '}' followed by ',' or ']'), and the row is made from the dict, with the places the row
   holds (ts, args' end) and the texts of ts/dur/pid/tid taken from the bytes by regex. It
   takes only events where the dict says all: no backslash (so every string's raw text is
   its UTF-8), no repeated key and no object but the event and its args (counted from the
   text), valid UTF-8 (orjson's check), nesting within the C parser's limit.
2. ``_fast_event``: one compiled regex match per object member (key, value and the
   separator after it), depth-bounded patterns for nested values, and at each member what
   the C parser does there. It gives up (None) at the first match that fails.
3. ``_Exact``: a line-by-line port of the C parser, a byte at a time. It decides the rest:
   invalid JSON (the error's place and message), input that ends inside an event, nesting
   beyond the patterns, and it is the reference the other two are tested against.

A layer that gives up has interned only strings the C parser interns before that point, in
the C parser's order (the text's), so the next layer reading the event again from its start
gets the same ids. orjson accepts no JSON the C parser refuses, bar nesting deeper than 512
(checked), so an event it parses is valid and ends where the C parser says.

Numbers are taken from their text, never through a float: ts/dur in exact ns, ints as ints.
Bytes >= 0x80 are passed through as they are (as the C scanner does; no UTF-8 check).

Speed: an order of magnitude below the C scanner's (``docs/benchmarks.md``, "Pure-Python event
path").
"""

from __future__ import annotations

import operator
import re
from array import array

import numpy as np
import orjson

# ---- constants (as in _scanner.c) ----

(START, END, PH, CAT, NAME, TRACK, TS, DUR, FLAGS, ID, ARGS_AT, CORRELATION, DEVICE, STREAM, BYTES, KERNEL,
 GRID) = range(17)
BLOCK = GRID + 3
EXTERNAL_ID = BLOCK + 3
SHARED_MEMORY = EXTERNAL_ID + 1
ALLOCATED, RESERVED, DEVICE_TYPE = SHARED_MEMORY + 1, SHARED_MEMORY + 2, SHARED_MEMORY + 3  # a [memory] instant's
TS_AT = DEVICE_TYPE + 1
TS_END = TS_AT + 1
NFIELDS = TS_END + 1

F_TS, F_DUR, F_ODD, F_ID, F_ARGS, F_CORRELATION, F_DEVICE = 1, 2, 4, 8, 16, 32, 64
F_STREAM, F_BYTES, F_DIMS, F_ARGS_EMPTY = 128, 256, 512, 1024
F_TS_FRAC, F_DUR_FRAC, F_DUR_KEY, F_EXTRA, F_BP_E = 2048, 4096, 8192, 16384, 32768
F_ARGS_ONE_NUMBER, F_ID_KEY, F_SCOPE_T = 1 << 16, 1 << 17, 1 << 18
_F_GRID_SEEN, _F_BLOCK_SEEN = 1 << 20, 1 << 21
F_EXTERNAL_ID, F_SHARED_MEMORY = 1 << 22, 1 << 23
F_ALLOCATED, F_RESERVED, F_DEVICE_TYPE = 1 << 24, 1 << 25, 1 << 26

OK, END_OF_ARRAY, INCOMPLETE, STOPPED = 0, 1, 2, 3

_MAX_DEPTH = 512
MAX_DEPTH = _MAX_DEPTH  # deepest nesting of objects and arrays in an event the scan takes
_ARGS_FLAGS = (F_ARGS | F_ARGS_EMPTY | F_CORRELATION | F_DEVICE | F_STREAM | F_BYTES | _F_GRID_SEEN | _F_BLOCK_SEEN
               | F_ARGS_ONE_NUMBER | F_EXTERNAL_ID | F_SHARED_MEMORY | F_ALLOCATED | F_RESERVED | F_DEVICE_TYPE)
_INT64_MAX = (1 << 63) - 1
_NS_WHOLE_MAX = _INT64_MAX // 1000 - 1  # the largest whole µs whose ns the C scanner takes
_INT32_MAX = (1 << 31) - 1
_SCALE = (1000, 100, 10, 1)  # ns per unit of a fraction with 0-3 digits

_FLUSH = NFIELDS * 4096  # rows are gathered in a list, and moved into an int64 array 4096 at a time
_ROW = [0] * NFIELDS
_ROW[PH] = _ROW[CAT] = _ROW[NAME] = _ROW[KERNEL] = _ROW[TS_AT] = -1

# ---- interner ----


class Interner:
    """Byte strings -> dense ids (a new string's id: how many there were). ``store``, a callable
    giving buffers for the C interner's text, is checked as there and not used: this twin keeps
    its strings in a list."""

    __slots__ = ("values", "_ids", "_by_str", "_by_pair")

    def __init__(self, *args: object) -> None:
        if len(args) > 1:
            raise TypeError(f"Interner() takes at most 1 argument ({len(args)} given)")
        store = args[0] if args else None
        if store is not None and not callable(store):
            raise TypeError("Interner(store): store must be callable or None")
        self.values: list[bytes] = []
        self._ids: dict[bytes, int] = {}
        self._by_str: dict[str, int] = {}  # the ids of str values (their UTF-8), for the orjson layer
        self._by_pair: dict[tuple, int] = {}  # track ids by (pid, tid) values, likewise


def _add(interner: Interner, text: bytes) -> int:
    values = interner.values
    new = len(values)
    if new >= _INT32_MAX or len(text) > _INT32_MAX:
        raise OverflowError("too many or too long strings to intern")
    values.append(text)
    interner._ids[text] = new
    return new


def _text_arg(text: object) -> bytes:
    """``text`` as C's "y#" takes it: read-only bytes only."""
    if not isinstance(text, bytes):
        if isinstance(text, (bytearray, memoryview)):
            raise TypeError(f"argument 2 must be read-only bytes-like object, not {type(text).__name__}")
        raise TypeError(f"a bytes-like object is required, not '{type(text).__name__}'")
    return text if type(text) is bytes else bytes(text)


def intern(interner: Interner, text: bytes) -> int:
    """The id of a byte string in an Interner (added if new)."""
    text = _text_arg(text)
    got = _interner(interner)._ids.get(text)
    return got if got is not None else _add(interner, text)


def count(interner: Interner) -> int:
    """How many strings an Interner holds."""
    return len(_interner(interner).values)


def strings(interner: Interner, first: int, stop: int) -> list[bytes]:
    """The strings of ids ``first`` .. ``stop - 1`` (clipped), as bytes."""
    if type(first) is not int or type(stop) is not int:
        raise TypeError("'float' object cannot be interpreted as an integer")
    return _interner(interner).values[max(first, 0):max(stop, 0)]


def find(interner: Interner, text: bytes) -> int:
    """The id of a byte string in an Interner, or -1 where it holds none (none is added)."""
    text = _text_arg(text)
    return _interner(interner)._ids.get(text, -1)


def _interner(obj: object) -> Interner:
    if not isinstance(obj, Interner):
        raise ValueError("PyCapsule_GetPointer called with invalid PyCapsule object")
    return obj


# ---- columns ----


def _bytes_view(obj: object) -> memoryview:
    """``obj``'s bytes as "y*" and PyBUF_SIMPLE take them: any C-contiguous bytes-like object."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not '{type(obj).__name__}'") from None
    if not view.c_contiguous:
        if isinstance(obj, np.ndarray):
            raise ValueError("ndarray is not C-contiguous")
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def columns(rows, at, fields) -> bytes:
    """columns(rows, at, fields) -> those fields of rows ``at``, a column after another (int64)."""
    rows_view = _bytes_view(rows)
    fields = bytes(_bytes_view(fields))
    if len(rows_view) % (NFIELDS * 8):
        raise ValueError("rows: not a whole number of rows")
    for f in fields:
        if f >= NFIELDS:
            raise ValueError(f"no field {f}")
    table = np.frombuffer(rows_view, np.int64).reshape(-1, NFIELDS)
    if at is not None:
        at_view = _bytes_view(at)
        if len(at_view) % 8:
            raise ValueError("at: int64 row numbers")
        picked = np.frombuffer(at_view, np.int64)
        if len(picked) and (picked.min() < 0 or picked.max() >= len(table)):
            raise IndexError(f"no row {next(i for i in picked.tolist() if i < 0 or i >= len(table))}")
        table = table[picked]
    return np.ascontiguousarray(table[:, list(fields)].T).tobytes()


# ---- the exact parser: a port of _scanner.c, a byte at a time ----


class _Stop(Exception):
    """The parse stopped (status, err_pos and msg are on the parser)."""


_WS_RUN = re.compile(rb"[ \t\r\n]*")
_STRING_STOP = re.compile(rb'["\\\x00-\x1f]')
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = frozenset(b'"\\/bfnrt')
_DIGITS = frozenset(b"0123456789")
_NUMBER_START = frozenset(b"-0123456789")


class _Exact:
    """The C parser, state and all: ``pos``, ``status``/``err_pos``/``msg`` of the first failure,
    the nesting ``depth``. A failure records itself and raises _Stop."""

    __slots__ = ("b", "n", "pos", "status", "err_pos", "msg", "depth", "strings")

    def __init__(self, b: bytes, n: int, strings: Interner):
        self.b, self.n, self.strings = b, n, strings
        self.pos = 0
        self.status = 0
        self.err_pos = -1
        self.msg: str | None = None
        self.depth = 0

    def fail(self, msg: str):
        if not self.status:
            self.status, self.err_pos, self.msg = STOPPED, self.pos, msg
        raise _Stop

    def incomplete(self):
        if not self.status:
            self.status, self.err_pos, self.msg = INCOMPLETE, self.pos, "input ends inside an event"
        raise _Stop

    def skip_ws(self) -> None:
        self.pos = _WS_RUN.match(self.b, self.pos).end()

    def parse_string(self) -> tuple[int, int, bool]:
        """The string at pos (which holds '"'): (start, end, escaped) of its content."""
        b, n = self.b, self.n
        i = start = self.pos + 1
        esc = False
        while True:
            m = _STRING_STOP.search(b, i)
            if m is None:
                self.pos = n
                self.incomplete()
            i = m.start()
            c = b[i]
            if c == 34:  # '"'
                break
            if c < 0x20:
                self.pos = i
                self.fail("invalid control character in a string")
            esc = True  # a backslash
            if i + 1 >= n:
                self.pos = n
                self.incomplete()
            e = b[i + 1]
            if e == 117:  # 'u'
                for h in range(2, 6):
                    if i + h >= n:
                        self.pos = n
                        self.incomplete()
                    if b[i + h] not in _HEX:
                        self.pos = i
                        self.fail("invalid \\u escape")
                i += 6
            elif e in _SIMPLE_ESCAPES:
                i += 2
            else:
                self.pos = i
                self.fail("invalid escape in a string")
        self.pos = i + 1
        return start, i, esc

    def parse_number(self) -> tuple[bool, int, bool, int]:
        """(is_int, int value, ns_ok, exact ns of the value as µs), as _scanner.c's Number."""
        b, n = self.b, self.n
        i = self.pos
        neg = overflow = False
        frac_digits = 0
        has_exp = False
        whole = frac = 0
        if i < n and b[i] == 45:  # '-'
            neg = True
            i += 1
        if i >= n:
            self.pos = i
            self.incomplete()
        if b[i] == 48:  # '0'
            i += 1
        elif 49 <= b[i] <= 57:
            j = i
            while j < n and b[j] in _DIGITS:
                j += 1
            if j - i > 19:
                overflow = True
            else:
                whole = int(b[i:j])
            i = j
        else:
            self.pos = i
            self.fail("invalid number")
        if i < n and b[i] == 46:  # '.'
            i += 1
            if i >= n:
                self.pos = i
                self.incomplete()
            if b[i] not in _DIGITS:
                self.pos = i
                self.fail("invalid number")
            while i < n and b[i] in _DIGITS:
                if frac_digits < 3:
                    frac = frac * 10 + b[i] - 48
                frac_digits += 1
                i += 1
        if i < n and b[i] in b"eE":
            has_exp = True
            i += 1
            if i < n and b[i] in b"+-":
                i += 1
            if i >= n:
                self.pos = i
                self.incomplete()
            if b[i] not in _DIGITS:
                self.pos = i
                self.fail("invalid number")
            while i < n and b[i] in _DIGITS:
                i += 1
        if i >= n:  # a number cannot end an event
            self.pos = i
            self.incomplete()
        self.pos = i
        is_int = not overflow and not frac_digits and not has_exp and whole <= _INT64_MAX + neg
        ival = (-whole if neg else whole) if is_int else 0
        ns_ok = not overflow and not has_exp and frac_digits <= 3 and whole <= _NS_WHOLE_MAX
        ns = 0
        if ns_ok:
            ns = whole * 1000 + frac * _SCALE[frac_digits]
            if neg:
                ns = -ns
        return is_int, ival, ns_ok, ns

    def expect_literal(self, word: bytes) -> None:
        have = self.n - self.pos
        length = len(word)
        k = have if have < length else length
        if self.b[self.pos:self.pos + k] != word[:k]:
            self.fail("invalid JSON value")
        if have < length:
            self.pos = self.n
            self.incomplete()
        self.pos += length

    def _key(self) -> None:
        """An object's member up to its value: key, ':', blanks (the head of parse_object's loop)."""
        if self.pos >= self.n:
            self.incomplete()
        if self.b[self.pos] != 34:
            self.fail("expected a key (a string)")
        self.parse_string()
        self.skip_ws()
        if self.pos >= self.n:
            self.incomplete()
        if self.b[self.pos] != 58:  # ':'
            self.fail("expected ':' after a key")
        self.pos += 1
        self.skip_ws()
        if self.pos >= self.n:
            self.incomplete()

    def skip_value(self) -> None:
        """skip_value, with its recursion (through parse_object and arrays) on a stack."""
        b, n = self.b, self.n
        stack: list[bool] = []  # True: in an object, False: in an array
        while True:
            pos = self.pos
            if pos >= n:
                self.incomplete()
            c = b[pos]
            if c == 34:
                self.parse_string()
            elif c == 123 or c == 91:  # '{' or '['
                self.depth += 1
                if self.depth > _MAX_DEPTH:
                    self.fail("nesting too deep")
                self.pos = pos + 1
                self.skip_ws()
                if self.pos >= n:
                    self.incomplete()
                if b[self.pos] == c + 2:  # '}' or ']': empty
                    self.pos += 1
                    self.depth -= 1
                else:
                    stack.append(c == 123)
                    if c == 123:
                        self._key()
                    continue
            elif c == 116:
                self.expect_literal(b"true")
            elif c == 102:
                self.expect_literal(b"false")
            elif c == 110:
                self.expect_literal(b"null")
            else:
                self.parse_number()
            # the value is done: close what it ends
            while stack:
                self.skip_ws()
                if self.pos >= n:
                    self.incomplete()
                c = b[self.pos]
                if stack[-1]:
                    if c == 44:  # ','
                        self.pos += 1
                        self.skip_ws()
                        self._key()
                        break
                    if c == 125:
                        self.pos += 1
                        self.depth -= 1
                        stack.pop()
                        continue
                    self.fail("expected ',' or '}' in an object")
                else:
                    if c == 44:
                        self.pos += 1
                        self.skip_ws()
                        break
                    if c == 93:
                        self.pos += 1
                        self.depth -= 1
                        stack.pop()
                        continue
                    self.fail("expected ',' or ']' in an array")
            else:
                return

    def parse_object(self, on_member) -> int:
        """parse_object with a member callback ``on_member(key_start, key_end, escaped)``; the
        end of the last member's value, -1 for an empty object."""
        b, n = self.b, self.n
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail("nesting too deep")
        self.pos += 1  # '{'
        self.skip_ws()
        if self.pos >= n:
            self.incomplete()
        members_end = -1
        if b[self.pos] == 125:
            self.pos += 1
            self.depth -= 1
            return members_end
        while True:
            if self.pos >= n:
                self.incomplete()
            if b[self.pos] != 34:
                self.fail("expected a key (a string)")
            ks, ke, kesc = self.parse_string()
            self.skip_ws()
            if self.pos >= n:
                self.incomplete()
            if b[self.pos] != 58:
                self.fail("expected ':' after a key")
            self.pos += 1
            self.skip_ws()
            if self.pos >= n:
                self.incomplete()
            on_member(ks, ke, kesc)
            members_end = self.pos
            self.skip_ws()
            if self.pos >= n:
                self.incomplete()
            c = b[self.pos]
            if c == 44:
                self.pos += 1
                self.skip_ws()
                continue
            if c == 125:
                self.pos += 1
                self.depth -= 1
                return members_end
            self.fail("expected ',' or '}' in an object")

    # -- one event --

    def parse_interned(self) -> int:
        """A string value's id in ``strings``; -2 for a value that is not a string."""
        if self.b[self.pos] != 34:
            self.skip_value()
            return -2
        s, e, _ = self.parse_string()
        text = self.b[s:e]
        got = self.strings._ids.get(text)
        return got if got is not None else _add(self.strings, text)

    def parse_int_field(self, row: list, field: int, flag: int, otherwise: int) -> None:
        if self.b[self.pos] in _NUMBER_START:
            is_int, ival, _, _ = self.parse_number()
            if is_int:
                row[field] = ival
                row[FLAGS] |= flag
                return
        else:
            self.skip_value()
        row[FLAGS] = (row[FLAGS] & ~flag) | otherwise

    def parse_time(self, row: list, field: int, flag: int, frac_flag: int) -> None:
        c = self.b[self.pos]
        row[FLAGS] &= ~(flag | frac_flag)
        if c in _NUMBER_START:
            is_int, _, ns_ok, ns = self.parse_number()
            if ns_ok:
                row[field] = ns
                row[FLAGS] |= flag | (0 if is_int else frac_flag)
            else:
                row[FLAGS] |= F_ODD
            return
        if c == 34:
            row[FLAGS] |= F_ODD  # a time as text: to_ns decides
        self.skip_value()

    def parse_dims(self) -> tuple[list, bool]:
        """grid/block: (values, whether they are three ints)."""
        b, n = self.b, self.n
        out = [0, 0, 0]
        if b[self.pos] != 91:
            self.skip_value()
            return out, False
        count = 0
        ints = True
        self.pos += 1
        self.skip_ws()
        if self.pos >= n:
            self.incomplete()
        if b[self.pos] == 93:
            self.pos += 1
            return out, False
        while True:
            if b[self.pos] in _NUMBER_START:
                is_int, ival, _, _ = self.parse_number()
                if is_int and count < 3:
                    out[count] = ival
                elif not is_int:
                    ints = False
            else:
                ints = False
                self.skip_value()
            count += 1
            self.skip_ws()
            if self.pos >= n:
                self.incomplete()
            c = b[self.pos]
            if c == 44:
                self.pos += 1
                self.skip_ws()
                if self.pos >= n:
                    self.incomplete()
                continue
            if c == 93:
                self.pos += 1
                break
            self.fail("expected ',' or ']' in an array")
        return out, ints and count == 3

    def parse_event(self, tracks: Interner) -> list:
        """The row of the event at pos (which holds '{'); pos moves past it."""
        b = self.b
        row = _ROW.copy()
        row[START] = self.pos
        track = [-1, -1, -1, -1]  # pid start, end, tid start, end
        args = [0, 0]  # members, numbers in the args object being read

        def on_args_member(ks: int, ke: int, kesc: bool) -> None:
            first = b[self.pos]
            args[0] += 1
            args[1] += first in _NUMBER_START
            if kesc:
                row[FLAGS] |= F_ODD
                return self.skip_value()
            key = b[ks:ke]
            spec = _INT_ARGS.get(key)
            if spec is not None:
                return self.parse_int_field(row, *spec)
            if key == b"kernel":
                got = self.parse_interned()
                row[KERNEL] = -1 if got < 0 else got
                return
            if key == b"grid" or key == b"block":
                field, mark = (GRID, _F_GRID_SEEN) if key == b"grid" else (BLOCK, _F_BLOCK_SEEN)
                dims, valid = self.parse_dims()
                if valid:
                    row[field:field + 3] = dims
                    row[FLAGS] |= mark
                else:
                    row[FLAGS] &= ~mark
                return
            self.skip_value()

        def on_event_member(ks: int, ke: int, kesc: bool) -> None:
            if kesc:
                row[FLAGS] |= F_ODD
                return self.skip_value()
            key = b[ks:ke]
            if key == b"s" or key == b"bp":  # an instant's scope "t", a flow end's binding point "e"
                mark, kineto = (F_SCOPE_T, b'"t"') if key == b"s" else (F_BP_E, b'"e"')
                row[FLAGS] &= ~mark
                s = self.pos
                self.skip_value()
                row[FLAGS] |= mark if b[s:self.pos] == kineto else F_EXTRA
            elif key == b"ph" or key == b"cat" or key == b"name":
                row[PH if key == b"ph" else CAT if key == b"cat" else NAME] = self.parse_interned()
            elif key == b"ts":
                row[TS_AT] = self.pos if row[TS_AT] == -1 else -2
                self.parse_time(row, TS, F_TS, F_TS_FRAC)
                row[TS_END] = self.pos
            elif key == b"id":
                row[FLAGS] = (row[FLAGS] & ~F_ID) | F_ID_KEY
                if b[self.pos] in _NUMBER_START:
                    is_int, ival, _, _ = self.parse_number()
                    if is_int:
                        row[ID] = ival
                        row[FLAGS] |= F_ID
                    else:
                        row[FLAGS] |= F_ODD
                else:
                    self.skip_value()
            elif key == b"dur":
                row[FLAGS] |= F_DUR_KEY
                self.parse_time(row, DUR, F_DUR, F_DUR_FRAC)
            elif key == b"pid" or key == b"tid":
                s = self.pos
                self.skip_value()
                at = 0 if key == b"pid" else 2
                track[at], track[at + 1] = s, self.pos
            elif key == b"args":
                row[FLAGS] &= ~_ARGS_FLAGS
                row[CORRELATION] = row[DEVICE] = row[STREAM] = row[BYTES] = 0
                row[EXTERNAL_ID] = row[SHARED_MEMORY] = 0
                row[ALLOCATED] = row[RESERVED] = row[DEVICE_TYPE] = 0
                row[KERNEL] = -1
                if b[self.pos] != 123:
                    return self.skip_value()
                args[0] = args[1] = 0
                members_end = self.parse_object(on_args_member)
                if args[0] == 1 and args[1] == 1:
                    row[FLAGS] |= F_ARGS_ONE_NUMBER
                row[ARGS_AT] = members_end if members_end >= 0 else self.pos - 1
                row[FLAGS] |= F_ARGS | (F_ARGS_EMPTY if members_end < 0 else 0)
            else:
                row[FLAGS] |= F_EXTRA
                self.skip_value()

        self.parse_object(on_event_member)
        row[END] = self.pos
        _finish(row, b, track[0], track[1], track[2], track[3], tracks)
        return row


_INT_ARGS = {
    b"correlation": (CORRELATION, F_CORRELATION, F_ODD),
    b"device": (DEVICE, F_DEVICE, F_ODD),
    b"stream": (STREAM, F_STREAM, F_ODD),
    b"bytes": (BYTES, F_BYTES, F_ODD),
    b"External id": (EXTERNAL_ID, F_EXTERNAL_ID, 0),
    b"shared memory": (SHARED_MEMORY, F_SHARED_MEMORY, 0),
    b"Total Allocated": (ALLOCATED, F_ALLOCATED, 0),
    b"Total Reserved": (RESERVED, F_RESERVED, 0),
    b"Device Type": (DEVICE_TYPE, F_DEVICE_TYPE, 0),
    b"Device Id": (DEVICE, F_DEVICE, 0),
    b"Bytes": (BYTES, F_BYTES, 0),
}


def _finish(row: list, b: bytes, ps: int, pe: int, ts: int, te: int, tracks: Interner) -> None:
    """The end of parse_event: F_DIMS from the grid/block marks, and the track id (the raw
    JSON text of pid, a NUL, that of tid; "" where missing)."""
    flags = row[FLAGS]
    if flags & _F_GRID_SEEN and flags & _F_BLOCK_SEEN:
        flags |= F_DIMS
    row[FLAGS] = flags & ~(_F_GRID_SEEN | _F_BLOCK_SEEN)
    key = (b[ps:pe] if ps >= 0 else b"") + b"\0" + (b[ts:te] if ts >= 0 else b"")
    got = tracks._ids.get(key)
    row[TRACK] = got if got is not None else _add(tracks, key)


# ---- the fast layer: a regex match per member ----

_WS = rb"[ \t\r\n]*"
_STR_BODY = rb'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*'
_NUM = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_SCALAR = rb'(?:"' + _STR_BODY + rb'"|' + _NUM + rb"|true|false|null)"

# A member whose value is a scalar, with the blanks and the ',' after it (if there is one):
# 1 key, 2 value, 3 string content, 4 minus sign, 5 integer digits, 6 fraction digits,
# 7 exponent, 8 ','.
_MEMBER = re.compile(
    rb'"(' + _STR_BODY + rb')"' + _WS + rb":" + _WS
    + rb'("(' + _STR_BODY + rb')"|(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?([eE][+-]?[0-9]+)?|true|false|null)'
    + _WS + rb"(?:(,)" + _WS + rb")?"
)
_KEY = re.compile(rb'"(' + _STR_BODY + rb')"' + _WS + rb":" + _WS)
_SEP = re.compile(_WS + rb"(?:(,)" + _WS + rb"|\})")
_SEPARATOR = re.compile(_WS + rb"," + _WS)


def _nested(depth: int) -> bytes:
    """A JSON value whose arrays and objects nest at most ``depth`` deep."""
    value = _SCALAR
    for _ in range(depth):
        member = rb'"' + _STR_BODY + rb'"' + _WS + rb":" + _WS + value + _WS
        value = (rb"(?:" + _SCALAR + rb"|\[" + _WS + rb"(?:\]|" + value + _WS + rb"(?:," + _WS + value + _WS
                 + rb")*\])|\{" + _WS + rb"(?:\}|" + member + rb"(?:," + _WS + member + rb")*\}))")
    return value


_NESTED_DEPTH = 3
_nested_pattern: re.Pattern | None = None  # compiled on first use (a tenth of a second)


def _nested_match(b: bytes, pos: int):
    global _nested_pattern
    if _nested_pattern is None:
        _nested_pattern = re.compile(_nested(_NESTED_DEPTH))
    return _nested_pattern.match(b, pos)

_DIMS3 = re.compile(
    rb"\[" + _WS + rb"(-?(?:0|[1-9][0-9]*))" + _WS + rb"," + _WS + rb"(-?(?:0|[1-9][0-9]*))" + _WS + rb","
    + _WS + rb"(-?(?:0|[1-9][0-9]*))" + _WS + rb"\]"
)

# Event keys the scan reads, by code.
_K_PH, _K_CAT, _K_NAME, _K_PID, _K_TID, _K_TS, _K_DUR, _K_ID, _K_ARGS, _K_S, _K_BP = range(11)
_EVENT_KEYS = {b"ph": _K_PH, b"cat": _K_CAT, b"name": _K_NAME, b"pid": _K_PID, b"tid": _K_TID, b"ts": _K_TS,
               b"dur": _K_DUR, b"id": _K_ID, b"args": _K_ARGS, b"s": _K_S, b"bp": _K_BP}
_A_KERNEL, _A_GRID, _A_BLOCK = -1, -2, -3
_ARGS_KEYS: dict[bytes, object] = {**_INT_ARGS, b"kernel": _A_KERNEL, b"grid": _A_GRID, b"block": _A_BLOCK}


def _number(neg: bytes, digits: bytes, frac: bytes | None, exp: bytes | None) -> tuple[bool, int, bool, int]:
    """(is_int, int value, ns_ok, ns) of a number matched in parts, as _Exact.parse_number."""
    if len(digits) > 19 or exp is not None:  # beyond every int64 field, or an exponent
        return False, 0, False, 0
    whole = int(digits)
    if frac is None:
        value = -whole if neg else whole
        return whole <= _INT64_MAX + (1 if neg else 0), value, whole <= _NS_WHOLE_MAX, value * 1000
    if len(frac) <= 3 and whole <= _NS_WHOLE_MAX:
        ns = whole * 1000 + int(frac) * _SCALE[len(frac)]
        return False, 0, True, -ns if neg else ns
    return False, 0, False, 0


def _skip_nested(b: bytes, n: int, pos: int, depth: int, strings: Interner) -> int | None:
    """End of the array/object at pos (the parser at ``depth``), or None: not taken."""
    m = _nested_match(b, pos)
    if m is not None and m.end() < n:
        return m.end()
    p = _Exact(b, n, strings)  # deeper than the pattern, or not valid: the exact walk decides
    p.pos, p.depth = pos, depth
    try:
        p.skip_value()
    except _Stop:
        return None
    return p.pos


def _fast_args(b: bytes, n: int, pos: int, row: list, strings: Interner) -> int | None:
    """The args object at pos (a '{'): its fields into row; the position after it, or None."""
    p = _WS_RUN.match(b, pos + 1).end()
    if p >= n:
        return None
    members = numbers = 0
    members_end = -1
    flags = row[FLAGS]
    if b[p] == 125:
        p += 1
    else:
        member = _MEMBER.match
        while True:
            m = member(b, p)
            if m is not None:
                key, _, text, neg, digits, frac, exp, comma = m.groups()
                members += 1
                members_end = m.end(2)
                if digits is not None:
                    numbers += 1
                spec = _ARGS_KEYS.get(key)
                if spec is None:
                    if b"\\" in key:
                        flags |= F_ODD
                elif type(spec) is tuple:
                    field, flag, otherwise = spec
                    if digits is not None:
                        is_int, value, _, _ = _number(neg, digits, frac, exp)
                        if is_int:
                            row[field] = value
                            flags |= flag
                        else:
                            flags = (flags & ~flag) | otherwise
                    else:
                        flags = (flags & ~flag) | otherwise
                elif spec == _A_KERNEL:
                    if text is not None:
                        got = strings._ids.get(text)
                        row[KERNEL] = got if got is not None else _add(strings, text)
                    else:
                        row[KERNEL] = -1
                else:  # grid or block, not an array
                    flags &= ~(_F_GRID_SEEN if spec == _A_GRID else _F_BLOCK_SEEN)
                p = m.end()
                if comma is None:
                    if p < n and b[p] == 125:
                        p += 1
                        break
                    return None
                continue
            m = _KEY.match(b, p)  # a member whose value is an array or object (or not valid)
            if m is None:
                return None
            key = m.group(1)
            v = m.end()
            if v >= n or (b[v] != 123 and b[v] != 91):
                return None
            members += 1
            spec = _ARGS_KEYS.get(key)
            if spec == _A_GRID or spec == _A_BLOCK:
                field, mark = (GRID, _F_GRID_SEEN) if spec == _A_GRID else (BLOCK, _F_BLOCK_SEEN)
                d = _DIMS3.match(b, v) if b[v] == 91 else None
                dims = None
                if d is not None and d.end() < n:
                    dims = [int(x) for x in d.groups()]
                    p = d.end()
                    if not all(-_INT64_MAX - 1 <= x <= _INT64_MAX for x in dims):
                        dims = None
                else:
                    exact = _Exact(b, n, strings)
                    exact.pos, exact.depth = v, 2
                    try:
                        dims, valid = exact.parse_dims()
                    except _Stop:
                        return None
                    p = exact.pos
                    if not valid:
                        dims = None
                if dims is not None:
                    row[field:field + 3] = dims
                    flags |= mark
                else:
                    flags &= ~mark
            else:
                p = _skip_nested(b, n, v, 2, strings)
                if p is None:
                    return None
                if spec is None:
                    if b"\\" in key:
                        flags |= F_ODD
                elif type(spec) is tuple:
                    field, flag, otherwise = spec
                    flags = (flags & ~flag) | otherwise
                else:  # kernel
                    row[KERNEL] = -1
            members_end = p
            s = _SEP.match(b, p)
            if s is None or s.end() >= n and s.group(1) is not None:
                return None
            p = s.end()
            if s.group(1) is None:
                break
    if members == 1 and numbers == 1:
        flags |= F_ARGS_ONE_NUMBER
    row[ARGS_AT] = members_end if members_end >= 0 else p - 1
    row[FLAGS] = flags | F_ARGS | (F_ARGS_EMPTY if members_end < 0 else 0)
    return p


def _fast_event(b: bytes, n: int, pos: int, strings: Interner, tracks: Interner) -> list | None:
    """The row of the event at pos (a '{'), its END the position after it; None where the
    exact parser must decide (invalid or cut-short JSON, deep nesting)."""
    row = _ROW.copy()
    row[START] = pos
    flags = 0
    ps = pe = ts = te = -1
    p = _WS_RUN.match(b, pos + 1).end()
    if p >= n:
        return None
    if b[p] == 125:
        row[END] = p + 1
        _finish(row, b, ps, pe, ts, te, tracks)
        return row
    member = _MEMBER.match
    ids = strings._ids
    keys = _EVENT_KEYS
    while True:
        m = member(b, p)
        if m is not None:
            key, _, text, neg, digits, frac, exp, comma = m.groups()
            code = keys.get(key)
            if code is None:
                flags |= F_ODD if b"\\" in key else F_EXTRA
            elif code <= _K_NAME:
                if text is None:
                    got = -2
                else:
                    got = ids.get(text)
                    if got is None:
                        got = _add(strings, text)
                row[PH + code] = got  # PH, CAT, NAME are consecutive, as _K_PH, _K_CAT, _K_NAME
            elif code == _K_TS or code == _K_DUR:
                if code == _K_TS:
                    field, flag, frac_flag = TS, F_TS, F_TS_FRAC
                    start, end = m.span(2)
                    row[TS_AT] = start if row[TS_AT] == -1 else -2
                    row[TS_END] = end
                else:
                    field, flag, frac_flag = DUR, F_DUR, F_DUR_FRAC
                    flags |= F_DUR_KEY
                flags &= ~(flag | frac_flag)
                if digits is not None:
                    is_int, _, ns_ok, ns = _number(neg, digits, frac, exp)
                    if ns_ok:
                        row[field] = ns
                        flags |= flag if is_int else flag | frac_flag
                    else:
                        flags |= F_ODD
                elif text is not None:
                    flags |= F_ODD
            elif code == _K_PID:
                ps, pe = m.span(2)
            elif code == _K_TID:
                ts, te = m.span(2)
            elif code == _K_ARGS:
                flags &= ~_ARGS_FLAGS
                row[CORRELATION] = row[DEVICE] = row[STREAM] = row[BYTES] = 0
                row[EXTERNAL_ID] = row[SHARED_MEMORY] = row[KERNEL] = 0
                row[KERNEL] = -1
            elif code == _K_ID:
                flags = (flags & ~F_ID) | F_ID_KEY
                if digits is not None:
                    is_int, value, _, _ = _number(neg, digits, frac, exp)
                    if is_int:
                        row[ID] = value
                        flags |= F_ID
                    else:
                        flags |= F_ODD
            else:  # s or bp
                mark = F_SCOPE_T if code == _K_S else F_BP_E
                flags &= ~mark
                flags |= mark if text == (b"t" if code == _K_S else b"e") else F_EXTRA
            p = m.end()
            if comma is None:
                if p < n and b[p] == 125:
                    p += 1
                    break
                return None
            continue
        m = _KEY.match(b, p)  # a member whose value is an array or object (or not valid)
        if m is None:
            return None
        key = m.group(1)
        v = m.end()
        if v >= n or (b[v] != 123 and b[v] != 91):
            return None
        code = keys.get(key)
        if code == _K_ARGS:
            flags &= ~_ARGS_FLAGS
            row[CORRELATION] = row[DEVICE] = row[STREAM] = row[BYTES] = 0
            row[EXTERNAL_ID] = row[SHARED_MEMORY] = 0
            row[ALLOCATED] = row[RESERVED] = row[DEVICE_TYPE] = 0
            row[KERNEL] = -1
            if b[v] == 123:
                row[FLAGS] = flags
                p = _fast_args(b, n, v, row, strings)
                flags = row[FLAGS]
            else:
                p = _skip_nested(b, n, v, 1, strings)
            if p is None:
                return None
        else:
            p = _skip_nested(b, n, v, 1, strings)
            if p is None:
                return None
            if code is None:
                flags |= F_ODD if b"\\" in key else F_EXTRA
            elif code <= _K_NAME:  # not a string
                row[PH + code] = -2
            elif code == _K_PID:
                ps, pe = v, p
            elif code == _K_TID:
                ts, te = v, p
            elif code == _K_TS:
                row[TS_AT] = v if row[TS_AT] == -1 else -2
                row[TS_END] = p
                flags &= ~(F_TS | F_TS_FRAC)
            elif code == _K_DUR:
                flags = (flags | F_DUR_KEY) & ~(F_DUR | F_DUR_FRAC)
            elif code == _K_ID:
                flags = (flags & ~F_ID) | F_ID_KEY
            elif code == _K_S:
                flags = (flags & ~F_SCOPE_T) | F_EXTRA
            elif code == _K_BP:
                flags = (flags & ~F_BP_E) | F_EXTRA
        s = _SEP.match(b, p)
        if s is None or s.end() >= n and s.group(1) is not None:
            return None
        p = s.end()
        if s.group(1) is None:
            break
    row[FLAGS] = flags
    row[END] = p
    _finish(row, b, ps, pe, ts, te, tracks)
    return row


# ---- the first layer: orjson reads the event; the bytes give places and number texts ----

_CANDIDATE_END = re.compile(rb"\}(?=[ \t\r\n]*[,\]])")
_WS_COLON = re.compile(rb'"[ \t\r\n]+:')
_SCALAR_GROUPS = (rb'("(' + _STR_BODY + rb')"|(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?([eE][+-]?[0-9]+)?'
                  rb"|true|false|null)")
_TS_MEMBER, _DUR_MEMBER, _PID_MEMBER, _TID_MEMBER = (
    re.compile(rb'"' + key + rb'"' + _WS + rb":" + _WS + _SCALAR_GROUPS) for key in (b"ts", b"dur", b"pid", b"tid"))
_ARGS_VALUE = re.compile(rb'"args"' + _WS + rb":" + _WS)
_KEY_CODES = {k.decode(): v for k, v in _EVENT_KEYS.items()}
_ARGS_BY_NAME = {k.decode(): v for k, v in _ARGS_KEYS.items()}
_WS_BYTES = b" \t\r\n"
_MISSING = object()
_loads = orjson.loads
_DecodeError = orjson.JSONDecodeError


def _str_id(interner: Interner, value: str) -> int:
    """The id of a str's UTF-8 (the raw text of a JSON string without escapes)."""
    got = interner._by_str.get(value)
    if got is None:
        text = value.encode()
        got = interner._ids.get(text)
        if got is None:
            got = _add(interner, text)
        interner._by_str[value] = got
    return got


def _raw(value, member: re.Pattern, span: bytes) -> bytes | None:
    """The raw JSON text of a top-level member's value (None: not a scalar)."""
    kind = type(value)
    if kind is str:
        return b'"' + value.encode() + b'"'
    if kind is int and (value or b"-0" not in span):
        return b"%d" % value
    m = member.search(span)
    return None if m is None else m.group(1)


def _time(m, flags: int, row: list, field: int, flag: int, frac_flag: int) -> int:
    """parse_time on a _TS_MEMBER/_DUR_MEMBER match; the new flags."""
    text, neg, digits, frac, exp = m.group(2, 3, 4, 5, 6)
    if digits is not None:
        is_int, _, ns_ok, ns = _number(neg, digits, frac, exp)
        if ns_ok:
            row[field] = ns
            return flags | (flag if is_int else flag | frac_flag)
        return flags | F_ODD
    return flags | F_ODD if text is not None else flags


def _loaded_event(b: bytes, pos: int, strings: Interner, tracks: Interner) -> list | None:
    """The row of the event at pos (a '{'), from orjson's dict of it and the places of a few
    values in its text; None where the event is not plain enough for that: escapes,
    repeated keys, objects below args, invalid UTF-8, no ',' or ']' after it."""
    m = _CANDIDATE_END.search(b, pos)
    for _ in range(4):  # a '}' in a string or a nested object: the next one
        if m is None:
            return None
        end = m.end()
        span = b[pos:end]
        try:
            d = _loads(span)
            break
        except _DecodeError:
            m = _CANDIDATE_END.search(b, end)
    else:
        return None
    return _dict_row(b, pos, end, span, d, strings, tracks)


def _dict_row(b: bytes, pos: int, end: int, span: bytes, d: dict, strings: Interner, tracks: Interner) -> list | None:
    """The row of the valid event b[pos:end] (``span``) from its dict ``d``; None where it is
    not plain enough for that."""
    # orjson takes no more than the C parser (bar nesting deeper than it allows): the event is
    # valid, and ends at ``end``. Without a backslash a '"' always starts or ends a string, and
    # '":' only follows a key (or starts a string that begins with ':'): as many as the keys of
    # the event and of its args is no key repeated, and no other object.
    if b"\\" in span or (end - pos > 1000 and span.count(b"{") + span.count(b"[") > _MAX_DEPTH - 2):
        return None
    a = d.get("args", _MISSING)
    args = type(a) is dict
    if span.count(b'":') != (len(d) + len(a) if args else len(d)) or _WS_COLON.search(span) is not None:
        return None
    row = _ROW.copy()
    row[START] = pos
    row[END] = end
    flags = 0
    pid = tid = _MISSING
    by_str = strings._by_str
    for k, v in d.items():  # in the text's order (no key is repeated): strings are interned in it
        code = _KEY_CODES.get(k)
        if code is None:
            flags |= F_EXTRA
        elif code <= _K_NAME:
            if type(v) is str:
                got = by_str.get(v)
                row[PH + code] = got if got is not None else _str_id(strings, v)
            else:
                row[PH + code] = -2
        elif code == _K_TS:
            if args and "ts" in a:
                return None
            t = _TS_MEMBER.search(span)
            if t is None:  # an array
                return None
            at, after = t.span(1)
            row[TS_AT] = pos + at
            row[TS_END] = pos + after
            _, text, neg, digits, frac, exp = t.groups()
            if digits is not None:
                if exp is None and (frac is None or len(frac) <= 3) and (
                        len(digits) < 16 or len(digits) == 16 and digits <= b"9223372036854774"):
                    if frac is None:
                        ns = int(digits) * 1000
                        flags |= F_TS
                    else:
                        ns = int(digits) * 1000 + int(frac) * _SCALE[len(frac)]
                        flags |= F_TS | F_TS_FRAC
                    row[TS] = -ns if neg else ns
                else:
                    flags = _time(t, flags, row, TS, F_TS, F_TS_FRAC)
            elif text is not None:
                flags |= F_ODD
        elif code == _K_DUR:
            flags |= F_DUR_KEY
            kind = type(v)
            if kind is int:
                if -_NS_WHOLE_MAX <= v <= _NS_WHOLE_MAX:
                    row[DUR] = v * 1000
                    flags |= F_DUR
                else:
                    flags |= F_ODD
            elif kind is float:
                if args and "dur" in a:
                    return None
                flags = _time(_DUR_MEMBER.search(span), flags, row, DUR, F_DUR, F_DUR_FRAC)
            elif kind is str:
                flags |= F_ODD
        elif code == _K_PID:
            pid = v
        elif code == _K_TID:
            tid = v
        elif code == _K_ARGS:
            if args and a:
                dims = 0
                for name, value in a.items():
                    spec = _ARGS_BY_NAME.get(name)
                    if spec is None:
                        continue
                    if type(spec) is tuple:
                        field, flag, otherwise = spec
                        if type(value) is int and -_INT64_MAX - 1 <= value <= _INT64_MAX:
                            row[field] = value
                            flags |= flag
                        else:
                            flags |= otherwise
                    elif spec == _A_KERNEL:
                        row[KERNEL] = _str_id(strings, value) if type(value) is str else -1
                    elif (type(value) is list and len(value) == 3
                          and all(type(x) is int and -_INT64_MAX - 1 <= x <= _INT64_MAX for x in value)):
                        field = GRID if spec == _A_GRID else BLOCK
                        row[field:field + 3] = value
                        dims += 1
                if dims == 2:
                    flags |= F_DIMS
                if len(a) == 1:
                    kind = type(next(iter(a.values())))
                    if kind is int or kind is float:
                        flags |= F_ARGS_ONE_NUMBER
        elif code == _K_ID:
            flags |= F_ID_KEY
            kind = type(v)
            if kind is int:
                if -_INT64_MAX - 1 <= v <= _INT64_MAX:
                    row[ID] = v
                    flags |= F_ID
                else:
                    flags |= F_ODD
            elif kind is float:
                flags |= F_ODD
        elif code == _K_S:
            flags |= F_SCOPE_T if v == "t" else F_EXTRA
        else:  # bp
            flags |= F_BP_E if v == "e" else F_EXTRA
    # The track: the raw texts of pid and tid, known from their values where they are strings
    # (no escapes) or ints (but 0, which may be written -0).
    pk, tk = type(pid), type(tid)
    cached = ((pk is int or pk is str or pid is _MISSING) and (tk is int or tk is str or tid is _MISSING)
              and not ((pid == 0 or tid == 0) and b"-0" in span))
    track = tracks._by_pair.get((pid, tid)) if cached else None
    if track is None:
        if args and ("pid" in a or "tid" in a):
            return None
        pid_raw = b"" if pid is _MISSING else _raw(pid, _PID_MEMBER, span)
        tid_raw = b"" if tid is _MISSING else _raw(tid, _TID_MEMBER, span)
        if pid_raw is None or tid_raw is None:
            return None
        key = pid_raw + b"\0" + tid_raw
        track = tracks._ids.get(key)
        if track is None:
            track = _add(tracks, key)
        if cached:
            tracks._by_pair[(pid, tid)] = track
    row[TRACK] = track
    if args:  # where args ends: after its last member's value, or its '}' when empty
        if next(reversed(d)) == "args":  # the last member: its '}' is the last before the event's
            q = b.rfind(b"}", pos, end - 1) - pos
        else:
            t = _ARGS_VALUE.search(span)
            t = _nested_match(span, t.end())
            if t is None:
                return None
            q = t.end() - 1
        if a:
            row[ARGS_AT] = pos + len(span[:q].rstrip(_WS_BYTES))
            flags |= F_ARGS
        else:
            row[ARGS_AT] = pos + q
            flags |= F_ARGS | F_ARGS_EMPTY
    row[FLAGS] = flags
    return row


# ---- scan ----


def scan(data, start, limit, strings_interner, tracks_interner):
    """Scan a run of events: (status, count, stop, err_pos, message, rows).

    As ``_scanner.scan``: events start at data[start]; offsets (in rows and returned) count
    from there. Stops after the separator that reaches ``limit`` (OK, stop = start of the
    next event), at the array's ']' (END_OF_ARRAY, stop = end of the last event, or the ']'
    itself after a trailing comma), when data ends inside an event (INCOMPLETE, stop = that
    event's start) or at what it does not take (STOPPED, stop = start of that event,
    err_pos/message say why). rows: a bytearray of count * NFIELDS int64."""
    view = _bytes_view(data)
    start = operator.index(start)
    limit = operator.index(limit)
    strings, tracks = _interner(strings_interner), _interner(tracks_interner)
    if start < 0 or start > len(view):
        raise ValueError("start outside the data")
    b = data if start == 0 and type(data) is bytes else view[start:].tobytes()
    view.release()
    n = len(b)
    out = array("q")
    flat: list[int] = []  # the rows not yet in ``out``, one after another
    count = stop = 0
    err_pos = -1
    msg = None
    ws = _WS_RUN.match
    separator = _SEPARATOR.match
    pos = ws(b, 0).end()
    while True:
        if pos >= n:
            status = INCOMPLETE
            break
        c = b[pos]
        if c == 93 and count:  # a trailing comma
            status, err_pos = END_OF_ARRAY, pos
            break
        if c != 123:
            status, err_pos, msg = STOPPED, pos, "expected an event (an object)"
            break
        row = _loaded_event(b, pos, strings, tracks)
        if row is None:
            row = _fast_event(b, n, pos, strings, tracks)
        if row is None:
            exact = _Exact(b, n, strings)
            exact.pos = pos
            try:
                row = exact.parse_event(tracks)
            except _Stop:
                status, err_pos, msg = exact.status, exact.err_pos, exact.msg
                break
        end = row[END]
        m = separator(b, end)
        if m is not None:  # ',' and the blanks around it
            pos = m.end()
            flat += row
            count += 1
            stop = pos
            if pos >= limit:
                status = OK
                break
            if len(flat) >= _FLUSH:
                out.fromlist(flat)
                flat.clear()
            continue
        pos = ws(b, end).end()
        if pos >= n:  # the separator is still to come
            status = INCOMPLETE
            break
        if b[pos] == 93:
            flat += row
            count += 1
            stop = end
            status, err_pos = END_OF_ARRAY, pos
            break
        status, err_pos, msg = STOPPED, pos, "expected ',' or ']' after an event"
        break
    out.fromlist(flat)
    return status, count, stop, err_pos, msg, bytearray(out)


# --- shape_keys: per CPU op, its args less the members that differ between repeats (_scanner.c) ---

_PER_EVENT_KEYS = frozenset((b"External id", b"Ev Idx", b"Record function id", b"Sequence number", b"Fwd thread id",
                             b"Python id", b"Python parent id"))
_WS = b" \t\n\r"
_VALUE_END = b",}] \t\n\r"


class _NotRead(Exception):
    """An event ``shape_keys`` leaves to the caller's parser."""


def _sk_ws(b: bytes, i: int, n: int) -> int:
    while i < n and b[i] in _WS:
        i += 1
    return i


def _sk_string(b: bytes, i: int, n: int) -> tuple[int, bool]:
    escaped, i = False, i + 1
    while i < n:
        c = b[i]
        if c == 0x5C:  # backslash
            escaped, i = True, i + 2
            continue
        if c == 0x22:
            return i + 1, escaped
        i += 1
    raise _NotRead


def _sk_value(b: bytes, i: int, n: int) -> int:
    if i >= n:
        raise _NotRead
    c = b[i]
    if c == 0x22:
        return _sk_string(b, i, n)[0]
    if c in b"{[":
        depth = 0
        while i < n:
            c = b[i]
            if c == 0x22:
                i = _sk_string(b, i, n)[0]
                continue
            if c in b"{[":
                depth += 1
            elif c in b"}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise _NotRead
    start = i
    while i < n and b[i] not in _VALUE_END:
        i += 1
    if i == start:
        raise _NotRead
    return i


def _sk_members(b: bytes, i: int, n: int, out: list | None) -> int:
    """The members of the object at ``b[i]``: with ``out`` None, where the one "args" value starts
    (-1 for none); else the members but the per-event ones appended to ``out``."""
    if i >= n or b[i] != 0x7B:
        raise _NotRead
    args_at = -1
    i = _sk_ws(b, i + 1, n)
    if i < n and b[i] == 0x7D:
        return args_at
    while True:
        if i >= n or b[i] != 0x22:
            raise _NotRead
        key = i
        key_end, escaped = _sk_string(b, i, n)
        if escaped:
            raise _NotRead
        i = _sk_ws(b, key_end, n)
        if i >= n or b[i] != 0x3A:
            raise _NotRead
        value = _sk_ws(b, i + 1, n)
        value_end = _sk_value(b, value, n)
        if out is None:
            if b[key:key_end] == b'"args"':
                if args_at >= 0 or b[value] != 0x7B:
                    raise _NotRead
                args_at = value
        elif b[key + 1:key_end - 1] not in _PER_EVENT_KEYS:
            out.append(b[key:key_end] + b":" + b[value:value_end] + b",")
        i = _sk_ws(b, value_end, n)
        if i < n and b[i] == 0x7D:
            return args_at
        if i >= n or b[i] != 0x2C:
            raise _NotRead
        i = _sk_ws(b, i + 1, n)


def shape_keys(data, spans, seen: dict, out) -> list:
    """Per event span (int64 pairs): its args less the per-event members looked up in ``seen``:
    ``out[i]`` (int32) its id, else -2 and ``(i, key)`` listed (key None: the caller parses it),
    as ``_scanner.c``'s."""
    b = bytes(_bytes_view(data))
    pairs = memoryview(spans).cast("B").cast("q").tolist()
    if len(pairs) % 2:
        raise ValueError("spans: pairs of int64")
    ids = memoryview(out).cast("B").cast("i")
    if len(ids) != len(pairs) // 2:
        raise ValueError("out: an int32 per span")
    missing: list = []
    for e, (lo, hi) in enumerate(zip(pairs[::2], pairs[1::2])):
        if lo < 0 or hi < lo or hi > len(b):
            raise ValueError("span outside the data")
        key = _shape_key(b, lo, hi)
        if key is not None and key in seen:
            ids[e] = seen[key]
        else:
            ids[e] = -2
            missing.append((e, key))
    return missing


def _shape_key(b: bytes, lo: int, hi: int) -> bytes | None:
    try:
        args_at = _sk_members(b, _sk_ws(b, lo, hi), hi, None)
        if args_at < 0:
            return b""
        members: list = []
        _sk_members(b, args_at, hi, members)
        return b"".join(members)
    except _NotRead:
        return None
