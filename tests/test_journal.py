"""The session journal (harness/session/journal.py) on real files: what is on disk after each
append, reopening, a torn last line, a corrupt middle line, values JSON cannot hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness.errors import JournalError
from harness.session.journal import Journal


def lines(path):
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines()]


def test_append_writes_one_line_per_event_before_returning(tmp_path):
    path = tmp_path / "s" / "journal.jsonl"
    with Journal(path) as j:
        ev = j.append("launch", attempt=1, run_id="s-1", env={"A": "1"})
        assert ev["seq"] == 1 and ev["type"] == "launch" and isinstance(ev["t"], float)
        assert list(ev)[:3] == ["seq", "t", "type"]
        assert lines(path) == [ev]  # on disk already, not buffered
        j.append("stage", attempt=1, stage=2, text="模型 loaded ✓")
        assert path.read_bytes().count(b"\n") == 2
        assert "模型 loaded ✓" in path.read_text(encoding="utf-8")  # not \\u-escaped
        assert b": " not in path.read_bytes() and b", " not in path.read_bytes()  # compact
        assert j.events() == lines(path) == Journal.read(path)
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_seq_continues_across_reopen(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        for i in range(3):
            j.append("note", text=str(i))
    with Journal(path) as j:
        assert [e["seq"] for e in j.events()] == [1, 2, 3]
        assert j.append("note", text="again")["seq"] == 4
    assert [e["seq"] for e in Journal.read(path)] == [1, 2, 3, 4]


def test_a_crash_between_appends_loses_nothing(tmp_path):
    """A child process appends and is killed hard (no cleanup, no close): every event it got
    back from append() is in the file."""
    path = tmp_path / "journal.jsonl"
    child = textwrap.dedent(f"""
        import os, sys
        from harness.session.journal import Journal
        j = Journal({str(path)!r})
        for i in range(5):
            j.append("note", i=i)
        print("appended", flush=True)
        os.kill(os.getpid(), 9)
    """)
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert p.returncode == -9 and "appended" in p.stdout, p.stderr
    assert [e["i"] for e in Journal.read(path)] == list(range(5))


@pytest.mark.parametrize("torn", [
    b'{"seq":3,"t":1.0,"type":"no',          # cut mid-line
    b'{"seq":3,"t":1.0,"type":"note"}',      # whole JSON but no newline: the append never finished
    b'{"seq":3,"t":1.0,"ty\n',               # garbage as the last line
    b'\x00\x00\x00\x00',                     # a filesystem that extended the file with zeros
    b'{"seq":3,"text":"\xe6\xa8',            # cut inside a multi-byte character
])
def test_a_torn_last_line_is_dropped_and_truncated(tmp_path, torn):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("note", i=1)
        j.append("note", i=2)
    whole = path.read_bytes()
    path.write_bytes(whole + torn)
    assert [e["i"] for e in Journal.read(path)] == [1, 2]
    assert path.read_bytes() == whole + torn  # read() is read-only
    with Journal(path) as j:
        assert path.read_bytes() == whole  # opening truncates the torn line away
        assert j.append("note", i=3)["seq"] == 3
    assert [e["i"] for e in lines(path)] == [1, 2, 3]


@pytest.mark.parametrize("bad", [b"{not json}\n", b"\n", b"[1, 2]\n", b"\xff\xfe\n"])
def test_a_corrupt_line_before_the_end_names_the_file_and_line(tmp_path, bad):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("note", i=1)
    with open(path, "ab") as f:
        f.write(bad + b'{"seq":3,"t":1.0,"type":"note"}\n')
    before = path.read_bytes()
    for opener in (Journal, Journal.read):
        with pytest.raises(JournalError) as e:
            opener(path)
        assert f"{path}:2:" in str(e.value) and "\n" not in str(e.value)
    assert path.read_bytes() == before  # nothing is thrown away


def test_non_finite_floats_become_strings(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        ev = j.append("metric", loss=float("nan"), grad=[1.5, float("inf"), float("-inf")],
                      nested={"x": (float("nan"),)})
    assert ev["loss"] == "nan" and ev["grad"] == [1.5, "inf", "-inf"] and ev["nested"] == {"x": ["nan"]}
    assert b"NaN" not in path.read_bytes() and b"Infinity" not in path.read_bytes()
    assert Journal.read(path) == [ev]


def test_bad_values_and_reserved_names_leave_the_file_untouched(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("note", i=1)
        with pytest.raises(TypeError):
            j.append("note", value=object())
        with pytest.raises(TypeError):
            j.append("note", seq=7)
        assert j.append("note", i=2)["seq"] == 2
    assert [e["i"] for e in lines(path)] == [1, 2]


def test_an_empty_or_new_journal(tmp_path):
    path = tmp_path / "journal.jsonl"
    with pytest.raises(FileNotFoundError):
        Journal.read(path)
    with Journal(path) as j:
        assert j.events() == [] and path.exists()
    assert Journal.read(path) == []
    with Journal(path) as j:
        assert j.append("session")["seq"] == 1


def test_appends_land_at_the_end_even_if_the_file_grew(tmp_path):
    """O_APPEND: an event written through another descriptor is not overwritten."""
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.append("note", i=1)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{"seq":2,"t":1.0,"type":"note","i":2}\n')
        os.close(fd)
        j.append("note", i=3)
    assert [e["i"] for e in lines(path)] == [1, 2, 3]
