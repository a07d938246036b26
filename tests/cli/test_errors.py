"""Bad input: one line naming the file and place, exit 1, no traceback, no output file."""

from __future__ import annotations

import gzip

import pytest
import zstandard

from tests.conftest import raw_json, run_cli


def _cases(good: bytes) -> dict[str, tuple[bytes, str]]:
    """Bad inputs, most made from a good trace (``good``: its JSON text) by cutting or corrupting it."""
    cut = good[: len(good) // 2]
    return {
        "truncated_gzip": (gzip.compress(good)[:-200], "truncated gzip"),
        "truncated_zstd": (zstandard.ZstdCompressor().compress(good)[:-50], "truncated zstd"),
        "corrupt_gzip": (gzip.compress(good)[:20] + b"\x00" * 50 + gzip.compress(good)[70:], "corrupt gzip"),
        "cut_json": (cut, "truncated file"),
        "not_json": (b"hello, this is not a trace\n", "not a JSON trace"),
        "empty": (b"", "empty file"),
        "events_not_list": (b'{"schemaVersion": 1, "traceEvents": {"a": 1}}', "traceEvents is not a list"),
        "no_trace_events": (b'{"schemaVersion": 1, "other": []}', "no traceEvents"),
        "event_not_object": (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}, 42]}', "event is not an object"),
        "bad_syntax_in_event": (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}, {"ph": "X" "ts": 2}]}', "invalid JSON"),
        "nan": (b'{"traceEvents": [{"ph": "C", "name": "c", "ts": 1, "args": {"v": NaN}}]}', "NaN is not valid JSON"),
        "garbage_after_array": (b'[{"ph": "i", "ts": 1}] trailing', "unexpected data after the event array"),
        "bad_key_after_events": (b'{"traceEvents": [], "x": tru}', "invalid JSON"),
    }


@pytest.mark.parametrize("case", sorted(_cases(b"")))
def test_bad_input_one_line_exit_1_no_output(case, tmp_path, sample):
    data, expected = _cases(sample.raw)[case]
    src = tmp_path / "bad.json.gz"
    src.write_bytes(data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "out.json.gz"
    r = run_cli("annotate", str(src), "--all", "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(src) in err and expected in err, err
    assert list(out_dir.iterdir()) == []  # no output, not even the temporary file
    assert src.read_bytes() == data  # the input is never modified


def test_error_names_event_and_byte_offset(tmp_path):
    src = tmp_path / "bad.json"
    src.write_bytes(b'{"traceEvents": [\n{"ph": "X", "ts": 1, "dur": 1},\n{"ph": "X", "ts": 2, "dur": }\n]}')
    r = run_cli("info", str(src))
    assert r.returncode == 1
    assert "event 1" in r.stderr.decode() and "byte 78" in r.stderr.decode(), r.stderr


def test_unreadable_and_missing_files(tmp_path):
    r = run_cli("annotate", str(tmp_path / "missing.json"), "--all")
    assert r.returncode == 1 and b"cannot read" in r.stderr and b"Traceback" not in r.stderr
    r = run_cli("annotate", str(tmp_path), "--all")  # a directory is a set of rank traces
    assert r.returncode == 1 and b"no trace files" in r.stderr and b"Traceback" not in r.stderr


@pytest.mark.parametrize("command", [("annotate", "--all"), ("repair",), ("trim", "--window", "+0s:+1s")])
def test_unwritable_output_fails_before_the_input_is_read(command, tmp_path):
    src = tmp_path / "bad.json"
    src.write_bytes(b'{"traceEvents": [{"ph": "X" "ts": 2}]}')  # read first, this would be the error
    out = tmp_path / "missing" / "out.json.gz"
    r = run_cli(command[0], str(src), *command[1:], "-o", str(out))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{out}: cannot write: No such file or directory" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_missing_input_leaves_an_existing_output_alone(tmp_path):
    out = tmp_path / "out.json"
    out.write_bytes(b"keep me")
    r = run_cli("annotate", str(tmp_path / "missing.json"), "--queue-length", "-o", str(out))
    assert r.returncode == 1 and b"cannot read" in r.stderr and b"Traceback" not in r.stderr
    assert out.read_bytes() == b"keep me"


def test_output_gets_ordinary_file_permissions(tmp_path, sample):
    out = tmp_path / "out.json.gz"
    assert run_cli("annotate", str(sample.path), "--copy", "-o", str(out)).returncode == 0
    assert raw_json(out) == sample.raw
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_full_temporary_disk_is_one_line(tmp_path, monkeypatch, capsys):
    """check writes its rows to a temporary file: a full disk is said in one line, exit 1."""
    import errno

    from traceforge.cli import main as cli
    from traceforge.columns.table import SpilledColumns

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(SpilledColumns, "extend", full)
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    assert cli.main(["check", "-q", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no space left on device" in err and "TMPDIR" in err
