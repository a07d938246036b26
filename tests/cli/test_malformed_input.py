"""Hostile and unlucky inputs (issue 41): every malformed input is one line naming the file and
the place, exit code 1, no traceback, nothing left behind; a bug is one line saying "internal
error", exit code 3, with a traceback only under ``--debug``."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, load_script, run_cli


def one_line_error(r: subprocess.CompletedProcess, code: int = 1) -> str:
    """The error line of a failed run, checking it is one line, the exit code, and no traceback."""
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


# -- the rule at the CLI edge ---------------------------------------------------------------

def test_internal_error_is_one_line_exit_3(monkeypatch, sample):
    from traceforge.cli.commands.tables import info

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(info, "run", broken)
    err = one_line_error(run_cli("info", str(sample.path)), code=3)
    assert err.startswith("traceforge: internal error: KeyError: 'a bug'") and "report" in err and "--debug" in err


def test_internal_error_traceback_with_debug(monkeypatch, sample):
    from traceforge.cli.commands.tables import info

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(info, "run", broken)
    for argv in (("--debug", "info", str(sample.path)), ("info", "--debug", str(sample.path))):
        r = run_cli(*argv)
        err = r.stderr.decode()
        assert r.returncode == 3, err
        assert "Traceback" in err and "in broken" in err, err
        assert err.splitlines()[-1].startswith("traceforge: internal error: ZeroDivisionError: a bug"), err


def test_os_error_is_one_line_exit_1(monkeypatch, sample):
    from traceforge.cli.commands.tables import info

    def unlucky(args):
        raise PermissionError(13, "Permission denied", "/some/file")

    monkeypatch.setattr(info, "run", unlucky)
    err = one_line_error(run_cli("info", str(sample.path)))
    assert err == "traceforge: error: /some/file: Permission denied\n", err


# -- item 1: nesting ------------------------------------------------------------------------

EVENT = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}'


def write_events(tmp_path, *events: bytes, name: str = "t.json") -> str:
    path = tmp_path / name
    path.write_bytes(b'{"traceEvents": [\n' + b",\n".join(events) + b"\n]}")
    return str(path)


@pytest.mark.parametrize("depth", [513, 700, 1000])
def test_nesting_past_the_scanner_is_read(depth, tmp_path, backend):
    """The scanner stops at 512 levels; the exact decoder reads deeper events (the scan needs
    nothing nested that deep), so every command works."""
    deep = b'{"ph": "i", "pid": 0, "tid": 1, "ts": 1, "s": "t", "args": {"x": ' + b"[" * depth + b"]" * depth + b"}}"
    path = write_events(tmp_path, EVENT, deep, EVENT.replace(b'"ts": 10', b'"ts": 20'))
    for command in (("info",), ("stats",), ("check",)):
        r = run_cli(command[0], path, *command[1:])
        assert r.returncode == 0, (command, r.stderr.decode())
    out = tmp_path / "out.json"
    for command in (("annotate", "--all"), ("repair",)):
        r = run_cli(command[0], path, *command[1:], "-o", str(out))
        assert r.returncode == 0, (command, r.stderr.decode())
        assert deep in out.read_bytes()


@pytest.mark.parametrize("depth", [1100, 3000, 100_000])
def test_nesting_too_deep_to_parse_is_refused_at_the_event(depth, tmp_path, backend):
    deep = b'{"ph": "i", "ts": 1, "args": {"x": ' + b"[" * depth + b"]" * depth + b"}}"
    path = write_events(tmp_path, EVENT, deep)
    at = open(path, "rb").read().index(deep)
    for command in (("info",), ("stats",), ("repair", "-o", str(tmp_path / "r.json"))):
        err = one_line_error(run_cli(command[0], path, *command[1:]))
        assert f"{path} (event 1, byte {at}): an event nested too deep to parse" in err, err
    r = run_cli("check", path)  # check's verdict: Perfetto would not read it (exit 2)
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"nested too deep" in r.stdout, r
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_deep_top_level_value_is_one_line(where, tmp_path, backend):
    deep = b'"x": ' + b"[" * 3000 + b"]" * 3000
    events = b'"traceEvents": [' + EVENT + b"]"
    path = tmp_path / "t.json"
    path.write_bytes(b"{" + (deep + b", " + events if where == "before" else events + b", " + deep) + b"}")
    err = one_line_error(run_cli("info", str(path)))
    assert f"{path}" in err and "a top-level value nested too deep to parse" in err, err


# -- item 2: text that is not UTF-8, lone surrogates -----------------------------------------

def _odd_text(raw: bytes, how: str) -> bytes:
    """The sample with every name (or every tid, as a string) made to start with bad text."""
    bad = {"utf8": b"\xff\xfe", "surrogate": b"\\ud800", "low_surrogate": b"\\udc00"}
    if how.endswith("_tid"):
        return re.sub(rb'"tid": (\d+)', lambda m: b'"tid": "' + bad[how[:-4]] + m.group(1) + b'"', raw)
    return raw.replace(b'"name": "', b'"name": "' + bad[how])


@pytest.mark.parametrize("how", ["utf8", "surrogate", "utf8_tid", "low_surrogate_tid"])
def test_text_not_utf8_is_read_and_written_back(how, tmp_path, sample):
    path = tmp_path / "t.json"
    path.write_bytes(_odd_text(sample.raw, how))
    for command in (("info",), ("stats",), ("classify",), ("launch-stats",), ("patterns",), ("diff", str(path))):
        r = run_cli(command[0], str(path), *command[1:])
        assert r.returncode == 0 and not r.stderr.strip(b"\n").count(b"\n"), (command, r.stderr.decode())
    out = tmp_path / "out.json"
    for flags in (("--launch-delay",), ("--all",)):
        r = run_cli("annotate", str(path), *flags, "-o", str(out))
        assert r.returncode == 0, r.stderr.decode()
        r = run_cli("check", str(out))
        assert r.returncode == 0, r.stdout.decode()
        marks = (b'"\xff\xfe', b'"\\ud800', b'"\\udc00')  # the odd text comes out as it went in
        assert sum(out.read_bytes().count(m) for m in marks) >= sum(path.read_bytes().count(m) for m in marks) > 0


@pytest.mark.parametrize("how", ["utf8", "surrogate"])
def test_text_not_utf8_both_backends(how, tmp_path, sample, backend):
    path = tmp_path / "t.json"
    path.write_bytes(_odd_text(sample.raw, how))
    r = run_cli("stats", str(path))
    assert r.returncode == 0, r.stderr.decode()


# -- item 3: a pid or tid that is a list or an object ------------------------------------------

@pytest.mark.parametrize("value", [b"[1, 2]", b'{"a": 1}'])
@pytest.mark.parametrize("field", ["pid", "tid"])
def test_pid_tid_list_or_object_reads_as_absent(field, value, tmp_path, sample):
    raw = sample.raw
    # every kernel's and every CPU op's pid (or tid) becomes the odd value
    raw = re.sub(rb'("cat": "(?:kernel|cpu_op)"[^}]*?"' + field.encode() + rb'": )(-?\d+)', lambda m: m.group(1) + value,
                 raw)
    assert raw.count(b'"' + field.encode() + b'": ' + value) > 100
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    for command in (("info",), ("stats",), ("patterns", "--op", "aten::addmm"), ("critical-path",)):
        r = run_cli(command[0], str(path), *command[1:])
        assert r.returncode == 0, (command, r.stderr.decode())
    out = tmp_path / "out.json"
    for command in (("annotate", "--all"), ("repair",)):
        r = run_cli(command[0], str(path), *command[1:], "-o", str(out))
        assert r.returncode == 0, (command, r.stderr.decode())


# -- item 4: a number beyond a double in a field that is not a time ----------------------------

@pytest.mark.parametrize("number", [b"1e400", b"-1e400"])
def test_number_beyond_double_outside_times(number, tmp_path, sample):
    raw = sample.raw.replace(b'"ph": "f", "id": ', b'"ph": "f", "x": ' + number + b', "id": ', 3)
    raw = raw.replace(b'"args": {', b'"args": {"big": ' + number + b", ", 5)
    raw = raw.replace(b'"ph": "s", "id": 5001', b'"ph": "s", "id": ' + number)  # a flow id
    assert raw.count(number) == 9
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    for command in (("info",), ("stats",), ("launch-stats",)):
        r = run_cli(command[0], str(path), *command[1:])
        assert r.returncode == 0, (command, r.stderr.decode())
    r = run_cli("check", str(path))  # Perfetto drops the flow whose id is no number it can read
    assert r.returncode == 1 and not r.stderr and b"verdict: 2 events would be dropped" in r.stdout, r
    out = tmp_path / "out.json"
    for command in (("annotate", "--all"), ("repair",)):
        r = run_cli(command[0], str(path), *command[1:], "-o", str(out))
        assert r.returncode == 0, (command, r.stderr.decode())
        assert out.read_bytes().count(number) == 9  # copied as written


# -- item 5: times at and beyond int64 ns ------------------------------------------------------

def _first_kernel_with(raw: bytes, **fields: bytes) -> bytes:
    """The sample with the first kernel's ``ts``/``dur`` written as given."""
    at = raw.index(b'"cat": "kernel"')
    for key, text in fields.items():
        j = raw.index(b'"' + key.encode() + b'": ', at)
        k = raw.index(b",", j)
        raw = raw[:j] + b'"' + key.encode() + b'": ' + text + raw[k:]
    return raw


@pytest.mark.parametrize("fields", [
    {"ts": b"9300000000000000"}, {"dur": b"9.3e15"}, {"ts": b"-9300000000000000.5"},
    {"ts": b"9223372036854775.000"}, {"dur": b"9223372036854775.807"},
    {"ts": b"9223372036854775.000", "dur": b"9223372036854775.807"}, {"ts": b"1e30", "dur": b"-1e30"},
], ids=lambda f: "+".join(f"{k}={v.decode()}" for k, v in f.items()))
def test_times_beyond_int64_ns(fields, tmp_path, sample):
    path = tmp_path / "t.json"
    path.write_bytes(_first_kernel_with(sample.raw, **fields))
    for command in (("info",), ("stats",), ("launch-stats",)):
        r = run_cli(command[0], str(path), *command[1:])
        assert r.returncode == 0, (command, r.stderr.decode())
    r = run_cli("check", str(path))
    assert r.returncode in (0, 1, 2) and not r.stderr, r.stderr.decode()  # a verdict, not an error
    out = tmp_path / "out.json"
    for command in (("annotate", "--all"), ("repair",), ("trim", "--window", "+0s:+1s"), ("trim", "--steps", "11")):
        r = run_cli(command[0], str(path), *command[1:], "-o", str(out))
        assert r.returncode == 0, (command, r.stderr.decode())


# -- item 6: no CPU operators ----------------------------------------------------------------

def _without_cpu_ops(raw: bytes) -> bytes:
    events = json.loads(raw)
    events["traceEvents"] = [e for e in events["traceEvents"] if e.get("cat") != "cpu_op"]
    return json.dumps(events).encode()


@pytest.mark.parametrize("trace", ["no_cpu_ops", "empty_array", "empty_events"])
def test_no_cpu_operators(trace, tmp_path, sample):
    raw = {"empty_array": b"[]", "empty_events": b'{"traceEvents": []}'}.get(trace) or _without_cpu_ops(sample.raw)
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    for command in (("patterns", "--op", "aten::addmm"), ("patterns", "--op-regex", "aten"), ("critical-path",),
                    ("patterns",), ("stats",), ("info",)):
        r = run_cli(command[0], str(path), *command[1:])
        err = r.stderr.decode()
        assert "Traceback" not in err and "internal error" not in err, (command, err)
        assert r.returncode == 0 or err.count("\n") == 1, (command, err)


# -- item 7: a range-profiler event whose args have "stream" or "source" -----------------------

def test_profiler_range_with_stream_and_source_args(tmp_path, sample):
    first_kernel = next(e for e in json.loads(sample.raw)["traceEvents"] if e.get("cat") == "kernel")
    extra = {"ph": "X", "cat": "cuda_profiler_range", "name": first_kernel["name"], "pid": 0, "tid": 0,
             "ts": first_kernel["ts"], "dur": 100,
             "args": {"stream": 7, "source": 3, "event": 1, "dram__bytes_read.sum": 4096}}
    raw = sample.raw.replace(b'"traceEvents": [', b'"traceEvents": [' + json.dumps(extra).encode() + b",", 1)
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    r = run_cli("annotate", str(path), "--all", "-o", str(tmp_path / "out.json"))
    assert r.returncode == 0, r.stderr.decode()
    r = run_cli("counters", str(path), "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["counters"] == ["dram__bytes_read.sum"], doc["counters"]  # the args named as its columns are none
    assert [(k["source"], k["event"], k["dram__bytes_read.sum"]) for k in doc["kernels"]] == [
        ("cupti_range", first_kernel_ordinal(sample.raw), 4096)]


def first_kernel_ordinal(raw: bytes) -> int:
    """The ordinal of the first kernel once a range event is put first (so one more)."""
    return 1 + next(i for i, e in enumerate(json.loads(raw)["traceEvents"]) if e.get("cat") == "kernel")


# -- items 8, 14, 15: outputs -------------------------------------------------------------------

WRITERS = (("annotate", "--all"), ("repair",), ("trim", "--window", "+0s:+1s"))


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_output_naming_a_directory(command, tmp_path, sample):
    target = tmp_path / "out"
    target.mkdir()
    r = run_cli(command[0], str(sample.path), *command[1:], "-o", str(target))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1] == f"traceforge: error: {target}: cannot write: a directory (name a file to write " \
                                   "the trace to)", err
    assert list(target.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_output_onto_a_fifo_is_written_in_place(tmp_path, sample):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = run_cli("annotate", str(sample.path), "--queue-length", "-o", str(fifo))
    reader.join(30)  # (a device such as /dev/null is written in place the same way: not tested, as a failure
    #  would replace it)
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO, not a regular file renamed onto it
    plain = tmp_path / "plain.json"
    assert run_cli("annotate", str(sample.path), "--queue-length", "-o", str(plain)).returncode == 0
    assert got == [plain.read_bytes()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "plain.json"]


@pytest.mark.slow
@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_file_size_limit_is_one_line(command, tmp_path, sample):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "o.json"  # plain: the sample's 270 KB do not fit in 64 KB

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    r = subprocess.run([sys.executable, "-m", "traceforge", command[0], str(sample.path), *command[1:], "-o", str(out)],
                       capture_output=True, cwd=ROOT, timeout=120, preexec_fn=limit)
    err = one_line_error(r)
    assert err == f"traceforge: error: {out}: cannot write: File too large\n", err
    assert list(out_dir.iterdir()) == []


def test_output_directory_removed_before_the_rename(monkeypatch, tmp_path, sample):
    from traceforge.io.write import output

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    real = output.publish

    def removed_first(tmp, out):
        shutil.rmtree(out_dir)
        real(tmp, out)

    monkeypatch.setattr(output, "publish", removed_first)
    err = one_line_error(run_cli("annotate", str(sample.path), "--all", "-o", str(out_dir / "o.json")))
    assert f"{out_dir / 'o.json'}: cannot write: No such file or directory" in err, err


@pytest.fixture(scope="module")
def tiled(tmp_path_factory, sample):
    """The sample tiled to ~40 MB: long enough a run to signal it midway."""
    path = tmp_path_factory.mktemp("tiled") / "big.json.gz"
    load_script("tile_trace").main([str(sample.path), "--size", "40MB", "-o", str(path)])
    return path


def _stopped_while_writing(tiled: Path, out: Path) -> subprocess.Popen | None:
    """A run of ``annotate --all`` into ``out``, stopped (SIGSTOP) while its temporary output
    exists; None where it published first (this process was not scheduled in time)."""
    proc = subprocess.Popen([sys.executable, "-m", "traceforge", "-q", "annotate", str(tiled), "--all", "-o", str(out)],
                            cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(out.parent.glob(f".{out.name}.*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGSTOP)  # held still: on a loaded machine it could otherwise finish first
    if proc.poll() is None and list(out.parent.glob(f".{out.name}.*.tmp")):
        return proc
    proc.send_signal(signal.SIGCONT)
    proc.communicate(timeout=60)
    out.unlink(missing_ok=True)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_mid_run_leaves_no_temporary_file(signum, tiled, tmp_path):
    out = tmp_path / "o.json.gz"
    for _ in range(5):  # the copy lasts a fraction of a second: on a loaded machine the stop can come after it
        proc = _stopped_while_writing(tiled, out)
        if proc is not None:
            break
    assert proc is not None, "every run published its output before it was stopped"
    proc.send_signal(signum)  # delivered as it resumes, its temporary file still unpublished
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum or (signum == signal.SIGINT and proc.returncode == 130), err
    assert "Traceback" not in err.decode() and err.decode().count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_temporary_files_a_kill_left_are_removed_at_the_next_run(tmp_path, sample):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout.strip()
    stale = tmp_path / f".o.json.traceforge-{dead.decode()}-abc123.tmp"
    live = tmp_path / f".o.json.traceforge-{os.getpid()}-abc123.tmp"  # another run still writing
    other = tmp_path / ".o.json.abc123.tmp"  # not a name traceforge gives
    for p in (stale, live, other):
        p.write_bytes(b"partial")
    r = run_cli("annotate", str(sample.path), "--queue-length", "-o", str(tmp_path / "o.json"))
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, "o.json"])


# -- item 13: strict JSON numbers in ts/dur ------------------------------------------------------

@pytest.mark.parametrize("number", ["012.5", "00.5", "1.", "1.e5", "01e5", "-01.5", "1.5e", "0.5.", "1e5."])
@pytest.mark.parametrize("field", ["ts", "dur"])
def test_invalid_numbers_in_times_are_refused_at_their_byte(field, number, tmp_path, backend):
    bad = EVENT.replace(f'"{field}": '.encode(), f'"{field}": {number}, "x": '.encode())
    path = write_events(tmp_path, EVENT, bad)
    start = open(path, "rb").read().index(f'"{field}": {number}'.encode()) + len(field) + 4
    out = tmp_path / "out.json"
    for command in (("info",), ("annotate", "--all", "-o", str(out)), ("repair", "-o", str(out))):
        err = one_line_error(run_cli(command[0], path, *command[1:]))
        m = re.search(r"\(event 1, byte (\d+)\): invalid JSON", err)
        assert m is not None and start < int(m.group(1)) <= start + len(number), (start, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("number", ["12.5", "0.5", "-0.5", "1e3", "1.5E+2", "0e0", "-0"])
def test_valid_numbers_in_times_are_read(number, tmp_path, backend):
    path = write_events(tmp_path, EVENT, EVENT.replace(b'"ts": 10', f'"ts": {number}'.encode()))
    r = run_cli("info", path)
    assert r.returncode == 0, r.stderr.decode()


# -- item 16: stdin and FIFOs are read once --------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("command", [("repair",), ("trim", "--window", "+0s:+1s"), ("annotate", "--all")],
                         ids=lambda c: c[0])
def test_stdin_read_once_and_spool_removed(command, tmp_path, sample):
    out = tmp_path / "out.json"
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    r = subprocess.run([sys.executable, "-m", "traceforge", command[0], "-", *command[1:], "-o", str(out)],
                       input=sample.raw, capture_output=True, cwd=ROOT, timeout=120, env=env)
    assert r.returncode == 0, r.stderr.decode()
    direct = tmp_path / "direct.json"
    assert run_cli(command[0], str(sample.path), *command[1:], "-o", str(direct)).returncode == 0
    assert out.read_bytes() == direct.read_bytes()
    assert list((tmp_path / "tmp").iterdir()) == []  # the spool is gone


def test_fifo_input_to_repair(tmp_path, sample):
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(sample.raw), daemon=True)
    writer.start()
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "traceforge", "repair", str(fifo), "-o", str(out)],
                       capture_output=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    direct = tmp_path / "direct.json"
    assert run_cli("repair", str(sample.path), "-o", str(direct)).returncode == 0
    assert out.read_bytes() == direct.read_bytes()


# -- item 18: open answers only requests to this machine, with the file it opened at start ----------

def _serving(path):
    """A started server for ``path`` on a free port, and a function that requests it: (status, body)."""
    import http.client

    from traceforge.cli.serve import trace_server

    server = trace_server(str(path), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def get(host: str | None, method: str = "GET"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest(method, "/" + os.path.basename(path), skip_host=True)
        if host is not None:
            conn.putheader("Host", host.replace("PORT", str(port)))
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, body
    return server, get


def test_open_refuses_other_hosts(tmp_path, sample):
    server, get = _serving(sample.path)
    try:
        for host in ("127.0.0.1", "127.0.0.1:PORT", "localhost", "LOCALHOST:PORT"):
            assert get(host) == (200, sample.path.read_bytes()), host
        for host in ("evil.example", "evil.example:PORT", "127.0.0.1.evil.example", "localhost.evil:PORT",
                     "127.0.0.1:PORT@evil", "", None):
            for method in ("GET", "HEAD", "OPTIONS"):
                assert get(host, method)[0] == 403, (host, method)
    finally:
        server.shutdown()
        server.server_close()


def test_open_serves_the_file_resolved_at_start(tmp_path, sample):
    other = tmp_path / "other.json"
    other.write_bytes(b'{"traceEvents": []}')
    link = tmp_path / "trace.json"
    link.symlink_to(sample.path)
    server, get = _serving(link)
    try:
        link.unlink()
        link.symlink_to(other)  # retargeted while served
        assert get("127.0.0.1:PORT") == (200, sample.path.read_bytes())
        link.unlink()  # and gone
        assert get("127.0.0.1:PORT") == (200, sample.path.read_bytes())
    finally:
        server.shutdown()
        server.server_close()


# -- item 2 (JSON output): text that is not UTF-8 is written escaped ---------------------------------

@pytest.mark.parametrize("how", ["utf8", "surrogate"])
@pytest.mark.parametrize("command", [("stats",), ("patterns",), ("diff", "SELF"), ("check",), ("classify",)],
                         ids=lambda c: c[0])
def test_json_output_of_text_not_utf8(command, how, tmp_path, sample):
    path = tmp_path / "t.json"
    path.write_bytes(_odd_text(sample.raw, how))
    r = run_cli(command[0], str(path), *[str(path) if a == "SELF" else a for a in command[1:]], "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)  # valid JSON (the stdlib reads lone surrogates as Python does)
    odd = {"utf8": "\udcff\udcfe", "surrogate": "\ud800"}[how]
    if command[0] in ("stats", "patterns", "diff"):
        assert odd in json.dumps(doc, ensure_ascii=False), "the odd name is in the output, as escapes"
        assert (b"\\udcff\\udcfe" if how == "utf8" else b"\\ud800") in r.stdout


def test_json_text_escapes_only_odd_text():
    from traceforge.cli.output import json_text

    doc = {"a\ud800": ["x\udcffy", "\u00e9", 1, 2.5, None], "b": {"c": "\ud800"}}
    text = json_text(doc)
    assert json.loads(text) == doc
    assert "\\ud800" in text and "\\udcff" in text and "\u00e9" in text
    with pytest.raises(TypeError):  # anything else orjson refuses is still a bug
        json_text({"a": object()})


# -- item 17: an event whose args is not an object keeps one args key ------------------------------

def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return dict(pairs)


@pytest.mark.parametrize("value", [5, None, [1, {"a": "}"}], "x}", True], ids=repr)
def test_args_not_an_object_are_replaced_not_duplicated(value, tmp_path, sample):
    doc = json.loads(sample.raw)
    odd = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    for e in odd:
        e["args"] = value
    path, out = tmp_path / "t.json", tmp_path / "out.json"
    path.write_text(json.dumps(doc))
    r = run_cli("annotate", str(path), "--classify", "-o", str(out))
    assert r.returncode == 0, r.stderr.decode()
    events = json.loads(out.read_bytes(), object_pairs_hook=_no_duplicate_keys)["traceEvents"]
    got = {(e.get("name"), e.get("ts")): e["args"] for e in events if "args" in e}
    replaced = [got[(e["name"], e["ts"])] for e in odd]
    assert all(isinstance(a, dict) and a for a in replaced)  # the added args, in place of the odd value
    assert run_cli("check", str(out)).returncode == 0


# -- item 17: bytes after the last gzip member that are not a member -------------------------------

@pytest.mark.parametrize("garbage", [b"x", b"xy", b"\x1f", b"not gzip at all, some text"], ids=repr)
@pytest.mark.parametrize("command", ["info", "stats", "check"])
def test_trailing_garbage_after_gzip_is_named(command, garbage, tmp_path, sample):
    gz = sample.path.read_bytes()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gz + garbage)
    r = run_cli(command, str(path))
    if command == "check":  # a finding of check's (exit 2), the reader's words in it
        text = " ".join(r.stdout.decode().split())
        assert r.returncode == 2 and "trailing garbage: `head -c" in text and f"{len(garbage)} bytes after" in text, text
        return
    assert r.returncode == 1
    line = r.stderr.decode().strip()
    assert "\n" not in line and "trailing garbage" in line and f"(byte {len(gz)})" in line, line


def test_truncated_gzip_is_still_truncated(tmp_path, sample):
    gz = sample.path.read_bytes()
    path = tmp_path / "t.json.gz"
    for data in (gz[:-100], gz + b"\x1f\x8b\x08"):  # cut inside a member; a member that ends at once
        path.write_bytes(data)
        r = run_cli("info", str(path))
        assert r.returncode == 1 and b"truncated gzip stream" in r.stderr, r.stderr.decode()


# -- item 16: check and info read a FIFO once ------------------------------------------------------

@pytest.mark.parametrize("command", ["info", "check"])
def test_fifo_input_to_check_and_info(command, tmp_path, sample):
    fifo = tmp_path / "in.json.gz"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_bytes(sample.path.read_bytes()), daemon=True).start()
    try:
        r = subprocess.run([sys.executable, "-m", "traceforge", command, str(fifo), "--format", "json"],
                           capture_output=True, cwd=ROOT, timeout=30)
    finally:  # a hung writer (or reader) is let go
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
    assert r.returncode == 0, r.stderr.decode()
    direct = run_cli(command, str(sample.path), "--format", "json")
    got, want = json.loads(r.stdout), json.loads(direct.stdout)
    for doc in (got, want):
        doc.pop("path", None), doc.pop("codec", None)
    if command == "check":
        for doc in (got, want):
            doc.pop("seconds")
    assert got == want


def test_check_trace_processor_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)  # never opened: refused before any read
    r = run_cli("check", str(fifo), "--trace-processor")
    assert r.returncode == 1 and b"not standard input or a FIFO" in r.stderr, r.stderr.decode()
