"""Where sessions live: `$HARNESS_HOME/sessions/<id>/` (default ~/.local/state/harness), one
directory each: the frozen spec, journal.jsonl, the attempts' logs and digests, reports."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from ..errors import BadInput

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def home() -> Path:
    return Path(os.environ.get("HARNESS_HOME") or "~/.local/state/harness").expanduser()


def sessions_dir() -> Path:
    return home() / "sessions"


def new_session(frozen_spec: str, now: float | None = None) -> Path:
    """A new session directory holding the spec as it was when the session started."""
    sid = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + "-" + secrets.token_hex(2)
    sessions_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    d = sessions_dir() / sid
    d.mkdir(mode=0o700)  # raw logs and recordings may hold secrets: the user's alone
    with os.fdopen(os.open(d / "spec.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as fh:
        fh.write(frozen_spec)
    (d / "journal.jsonl").touch(mode=0o600)  # the session is findable from now on, before its controller runs
    return d


def find_session(name: str | None, eligible=None) -> Path:
    """The named session, else the most recently active one (its journal written last) that
    `eligible(directory)` accepts."""
    root = sessions_dir()
    if name:
        if not _ID.match(name) or not (root / name / "journal.jsonl").is_file():
            raise BadInput(f"no session {name!r} in {root}; `harness sessions` lists them")
        return root / name
    found = next((d for d in latest_first(root) if eligible is None or eligible(d)), None)
    if found is None:
        raise BadInput(f"no sessions in {root} yet; start one with `harness run harness.yaml`")
    return found


def latest_first(root: Path) -> list[Path]:
    """Session directories, the most recently active first."""
    def key(d: Path):
        try:
            return (d / "journal.jsonl").stat().st_mtime, d.name
        except FileNotFoundError:
            return 0.0, d.name
    dirs = [p.parent for p in root.glob("*/journal.jsonl")] if root.is_dir() else []
    return sorted(dirs, key=key, reverse=True)


def session_or_directory(arg: str) -> Path:
    """A directory given by path (a session's or a fixture's: the caller checks what is in it),
    else a session id."""
    path = Path(arg).expanduser()
    if path.is_dir():
        return path
    if "/" in arg or path.exists():
        raise BadInput(f"{arg} is not a directory: give a session's or a fixture's directory, or a session id "
                       "(`harness sessions` lists them)")
    return find_session(arg)
