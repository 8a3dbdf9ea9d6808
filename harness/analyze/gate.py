"""A fast gate over raw bytes: one regex built from a required literal of every pattern, so
that the analyzer looks closely only at lines that can match something.

Python's `re` tries every branch of an alternation at every position, so a plain union of
hundreds of patterns crawls (~15 MB/s). The gate is a trie of literals instead: one branch
per distinct first byte. A pattern with no usable literal makes the gate unusable (`None`),
and the analyzer then looks at every line: correct, only slower.
"""

from __future__ import annotations

import re

from .. import patterns as _patterns
from ..memo import DiskMemo, code_hash, digest
from ..patterns import minimal, scan_literals, trie_regex

_SOURCES = DiskMemo("gates", code_hash(__file__, _patterns.__file__))


def build_gate(patterns: list[str]) -> re.Pattern | None:
    src = _SOURCES.get(digest("\n".join(patterns)), lambda: _gate_source(patterns))
    return None if src is None else re.compile(src.encode("utf-8", "surrogatepass"))


def _gate_source(patterns: list[str]) -> str | None:
    exact: set[str] = set()
    folded: set[str] = set()
    for p in patterns:
        lits, fold = scan_literals(p)
        if lits is None:
            return None
        (folded if fold else exact).update(lits)
    parts = [trie_regex(minimal(exact))] if exact else []
    if folded:
        parts.append("(?i:" + trie_regex(minimal(folded)) + ")")
    return "|".join(parts) if parts else None
