"""A fast gate over raw bytes: one regex built from a required literal of every pattern, so
that the analyzer looks closely only at lines that can match something.

Python's `re` tries every branch of an alternation at every position, so a plain union of
hundreds of patterns crawls (~15 MB/s). The gate is a trie of literals instead: one branch
per distinct first byte. A pattern with no usable literal makes the gate unusable (`None`),
and the analyzer then looks at every line: correct, only slower.
"""

from __future__ import annotations

import re

from ..patterns import minimal, scan_literals, trie_regex


def build_gate(patterns: list[str]) -> re.Pattern | None:
    exact: set[str] = set()
    folded: set[str] = set()
    for p in patterns:
        lits, fold = scan_literals(p)
        if lits is None:
            return None
        (folded if fold else exact).update(lits)
    parts = [trie_regex(minimal(exact)).encode()] if exact else []
    if folded:
        parts.append(b"(?i:" + trie_regex(minimal(folded)).encode() + b")")
    return re.compile(b"|".join(parts)) if parts else None
