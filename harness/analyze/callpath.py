"""The stage of a failure read from its call path: the names of the frames of a traceback and of
the Ray methods it passed through, innermost first, against the playbook's `stage_words`.

Each frame gives two names — its function, then its module (`reward_manager.py in __call__` is
a reward) —, a Ray method two too — the method, then its class. Frames of modules that only
relay a call (the playbook's `plumbing`: Ray's `get`, asyncio, contextlib…) are skipped. Set-up
words (`weak`, engine_start's) count only when nothing on the path names a stage's work: a
tensor built inside `compute_log_prob` is training_data, not engine_start.
"""

from __future__ import annotations

from ..playbook import Playbook, name_words
from .blocks import FRAME


def _names(pb: Playbook, entry: str) -> list[str]:
    m = FRAME.match(entry)
    if m:
        path, func = m[1], m[3]
        if pb.plumbing is not None and pb.plumbing.search(path):
            return []
        module = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return [func, module]
    cls, _, method = entry.rstrip("()").rpartition(".")
    return [method, cls] if cls else [entry]


def _stage(pb: Playbook, words: tuple[str, ...], weak: bool) -> int | None:
    for phrase, stage, is_weak in pb.stage_words:
        if is_weak == weak and _contains(words, phrase):
            return stage
    return None


def _contains(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(words[i:i + n] == phrase for i in range(len(words) - n + 1))


def call_path_stage(pb: Playbook, entries: list[str]) -> int | None:
    """The stage the innermost named step of the call path does (entries outermost first:
    frame lines or `Class.method()`), or None."""
    if not pb.stage_words:
        return None
    names = [name_words(n) for entry in reversed(entries) for n in _names(pb, entry)]
    for weak in (False, True):
        for words in names:
            if (stage := _stage(pb, words, weak)) is not None:
                return stage
    return None
