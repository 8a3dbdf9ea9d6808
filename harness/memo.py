"""A disk memo for pure, costly derivations of the playbooks' regexes (the literals each pattern
requires, the gates built from them), so that a short command does not redo them every call.

Keyed by content: an entry's key is the input itself (or its hash), and the file's name carries
a hash of the code that derives the values, so a changed algorithm never reads an old answer.
One JSON file per memo under `$HARNESS_CACHE` (default `$XDG_CACHE_HOME/harness`, else
~/.cache/harness); loaded at the first lookup, written back (atomically) at exit when it grew.
A missing, unreadable or corrupt file is an empty memo; a cache directory that cannot be
written only costs the next call the time it saves.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

MAX_ENTRIES = 20000  # the newest kept: patterns of old playbook versions age out


def cache_dir() -> Path:
    base = os.environ.get("HARNESS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "harness")
    return Path(base)


def code_hash(*files: str) -> str:
    """A short hash of source files: the version of what a memo stores."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:12]


class DiskMemo:
    def __init__(self, name: str, version: str, max_entries: int = MAX_ENTRIES):
        """`max_entries`: the most recently used kept (a memo of large values, such as one gate per
        playbook variant, keeps few: every command reads the whole file)."""
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"  # `re`'s parser differs between versions
        self.name = f"{name}-{py}-{version}.json"
        self.max_entries = max_entries
        self._data: dict | None = None
        self._added = 0

    def _load(self) -> dict:
        if self._data is None:
            try:
                data = json.loads((cache_dir() / self.name).read_text(encoding="utf-8"))
                self._data = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self._data = {}
            atexit.register(self.save)
        return self._data

    def get(self, key: str, compute):
        """The stored value for `key`, else `compute()` (a JSON-able value), stored."""
        data = self._load()
        if key in data:
            data[key] = data.pop(key)  # the most recently used last: it outlives the others at the next save
            return data[key]
        value = data[key] = compute()
        self._added += 1
        return value

    def save(self) -> None:
        if not self._added or self._data is None:
            return
        items = list(self._data.items())[-self.max_entries:]
        d = cache_dir()
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{self.name}.")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(items), fh, separators=(",", ":"))
            os.replace(tmp, d / self.name)
            self._added = 0
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
