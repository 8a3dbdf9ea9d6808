"""Log analysis: pure lines-in, events-out machinery plus `analyze_file`, the one reader."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import BadInput
from ..playbook import Playbook, load_merged, load_playbook, shipped_names
from .analyzer import Analyzer, Event
from .digest import build_digest
from .lines import clean
from .stacks import last_said

CHUNK = 1 << 20
SAMPLE = 256 * 1024
TAIL = 1 << 20  # how much of a hung run's log is read for each process's last line

__all__ = ["Analyzer", "Event", "analyze_file", "build_digest", "detect_playbook", "check_log_path", "last_lines_of"]


def check_log_path(path: Path) -> None:
    if not path.exists():
        raise BadInput(f"{path}: no such file; give the path of a log file")
    if path.is_dir():
        raise BadInput(f"{path}: is a directory; give a log file inside it")
    if not os.access(path, os.R_OK):
        raise BadInput(f"{path}: not readable; check its permissions")


def detect_playbook(sample: bytes) -> str | None:
    """The shipped playbook for a log, from its first bytes. Only whole-stack playbooks
    declare `detect:` patterns (verl, rllm, mindspeed-rl, pangu-ascend-rl; a component such as
    vllm or ascend alone would lack the rest of the stack's knowledge). Among those that hit,
    the most specific wins (it carries its ancestors' knowledge), then the one with most hits.
    None when nothing hits: the caller uses the union of all."""
    text = "\n".join(clean(x) for x in sample.decode("utf-8", "replace").split("\n"))
    scored = []
    for name in shipped_names():
        merged = load_merged(name)
        hits = sum(bool(re.search(p.regex, text, re.M)) for p in merged.detect)
        if hits:
            scored.append((len(merged.extends), hits, name))  # extends: all its ancestors, once each
    return max(scored)[2] if scored else None


def analyze_file(path: Path, playbook: Playbook | None = None, now: float | None = None):
    """Analyse one log file. The file's mtime is the time of its last line. Returns the
    verdict (with `file` and `playbook`) and the analyzer (for the digest)."""
    check_log_path(path)
    with open(path, "rb") as fh:
        if playbook is None:
            playbook = load_playbook(detect_playbook(fh.read(SAMPLE)))
            fh.seek(0)
        an = Analyzer(playbook)
        ts = path.stat().st_mtime
        while chunk := fh.read(CHUNK):
            an.feed(chunk, ts=ts)
    an.finish()
    return {"file": str(path), "playbook": playbook.name} | an.verdict(now=now), an


def last_lines_of(path: Path, an: Analyzer, size: int = TAIL) -> list[str]:
    """The last line each process printed in the last `size` bytes of the log at `path`, read with
    its analyzer's prefixes and framing (`stacks.last_said`); none when only one process speaks
    there (the log's tail says as much) or the file is gone."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, 2)
            fh.seek(max(0, end - size))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    said = last_said(lines[1:] if end > size else lines, an.pb.prefixes, an.framing)  # a first line may be cut
    return said if len(said) > 1 else []
