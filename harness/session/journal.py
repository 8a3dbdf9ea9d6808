"""The session journal: one JSON event per line, appended and fsync'd before `append` returns.

    j = Journal(session_dir / "journal.jsonl")
    ev = j.append("launch", attempt=1, run_id="s-1")   # {"seq": 1, "t": 1718…, "type": "launch", …}
    j.events()                                          # every event, oldest first
    Journal.read(path)                                  # the same, read-only (status, report, replay)

Everything that happens in a session is an event here, and every view of the session is a fold
over it, so the file must survive a crash at any instant. Each event is written with a single
write(2) on an O_APPEND descriptor and fsync'd; a crash can therefore only leave the LAST line
incomplete, and opening the journal drops (and truncates away) that torn line. A bad line
anywhere else cannot come from a crash: it is reported, naming the file and the line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path

from ..errors import JournalError

RESERVED = ("seq", "t", "type")


def _finite(value):
    """JSON has no NaN or Infinity: a diverged loss is journaled as the string "nan" / "inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _encode(event: dict) -> bytes:
    return (json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()


def _parse(path: Path, data: bytes) -> tuple[list[dict], int]:
    """The events in `data` and the length of its valid part (without a torn last line).
    JournalError for a bad line that is not the last."""
    events: list[dict] = []
    good = 0
    lines = data.split(b"\n")  # the piece after the last newline is b"" when the file is whole
    for no, line in enumerate(lines, 1):
        last = no == len(lines)
        if last and not line:
            break
        try:
            event = json.loads(line.decode("utf-8"))
            if not isinstance(event, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            if last or (no == len(lines) - 1 and not lines[-1]):
                break  # the last line: a write cut short by a crash
            raise JournalError(f"{path}:{no}: corrupt line ({e}); fix or delete that line "
                               f"(a crash can only tear the last line, so something else changed the file)")
        if last:
            break  # valid JSON but no newline: its append never completed, so it never happened
        events.append(event)
        good += len(line) + 1
    return events, good


class Journal:
    """An append-only, fsync'd JSON-lines file. One writer at a time (the session's controller)."""

    def __init__(self, path: Path, clock=time.time):
        self.path, self.clock = Path(path), clock  # the session's clock: a replay stamps the same times
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        # O_APPEND: every write lands at the end, whatever the offset; buffering=0: one write(2) each
        self._file = open(self.path, "a+b", buffering=0, opener=lambda p, f: os.open(p, f, 0o600))
        if created:  # the new directory entry must survive a crash too
            _fsync_dir(self.path.parent)
        self._file.seek(0)
        data = self._file.read()
        self._events, self._size = _parse(self.path, data)
        if self._size < len(data):  # drop the torn last line so the next append starts on a clean line
            os.ftruncate(self._file.fileno(), self._size)
            os.fsync(self._file.fileno())
        self._seq = max((e.get("seq", 0) for e in self._events if isinstance(e.get("seq"), int)),
                        default=len(self._events))

    def append(self, type: str, **fields) -> dict:
        """Write the event `{"seq", "t", "type", **fields}` and fsync it; returns it as written
        (non-finite floats become "nan"/"inf"/"-inf")."""
        if clash := [k for k in RESERVED if k in fields]:
            raise TypeError(f"journal fields {clash} are set by the journal itself")
        event = _finite({"seq": self._seq + 1, "t": self.clock(), "type": type, **fields})
        line = _encode(event)  # TypeError here (a value JSON cannot hold) leaves the file untouched
        fd = self._file.fileno()
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
            os.fsync(fd)
        except OSError as e:  # disk full, I/O error: take the partial line back so the file stays valid
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise JournalError(f"cannot write the journal {self.path}: {e}; "
                               f"free space or fix the disk, then resume the session") from e
        self._size += len(line)
        self._seq += 1
        self._events.append(event)
        return event

    def events(self) -> list[dict]:
        return list(self._events)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def read(path: Path) -> list[dict]:
        """The events of the journal at `path`, without changing the file (a torn last line is
        left out). FileNotFoundError when there is none. Reads any of the session's JSON-lines
        files (the recording too): JournalError names the file and line of a corrupt one."""
        return _parse(Path(path), Path(path).read_bytes())[0]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
