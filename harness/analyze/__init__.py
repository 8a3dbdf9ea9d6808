"""Log analysis: pure lines-in, events-out machinery plus `analyze_file`, the one reader."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import BadInput
from ..playbook import Playbook, load_merged, load_playbook, shipped_names
from .analyzer import Analyzer, Event
from .digest import build_digest

CHUNK = 1 << 20
SAMPLE = 256 * 1024

__all__ = ["Analyzer", "Event", "analyze_file", "build_digest", "detect_playbook", "check_log_path"]


def check_log_path(path: Path) -> None:
    if not path.exists():
        raise BadInput(f"{path}: no such file; give the path of a log file")
    if path.is_dir():
        raise BadInput(f"{path}: is a directory; give a log file inside it")
    if not os.access(path, os.R_OK):
        raise BadInput(f"{path}: not readable; check its permissions")


def detect_playbook(sample: bytes) -> str | None:
    """The shipped playbook whose own `detect` patterns hit the sample most, or None (= union)."""
    text = sample.decode("utf-8", "replace")
    best, best_score = None, 0
    for name in shipped_names():
        pb = load_merged(name)
        score = sum(len(re.findall(p.regex, text, re.M)) > 0 for p in pb.detect)
        # A more specific playbook (more ancestors) wins a tie: it carries its parents' knowledge.
        if score and (score, len(pb.extends)) > (best_score, best_len if best else -1):
            best, best_score, best_len = name, score, len(pb.extends)
    return best


def analyze_file(path: Path, playbook: Playbook | None = None, now: float | None = None):
    """Analyse one log file. The file's mtime is the time of its last line. Returns
    (verdict, analyzer, playbook name)."""
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
    return an.verdict(now=now), an, playbook.name
