"""A fast gate over raw bytes: one regex built from a required literal of every pattern, so
that the analyzer looks closely only at lines that can match something.

Python's `re` tries every branch of an alternation at every position, so a plain union of
hundreds of patterns crawls (~15 MB/s). The gate is a trie of literals instead: one branch
per distinct first byte. A pattern with no usable literal makes the gate unusable (`None`),
and the analyzer then looks at every line: correct, only slower.
"""

from __future__ import annotations

import re

from ..patterns import required_literals


def trie_regex(words: list[bytes]) -> bytes:
    """A regex matching any of `words`, branching once per distinct next byte."""
    trie: dict = {}
    for w in words:
        node = trie
        for b in w:
            node = node.setdefault(b, {})
        node[None] = {}

    def build(node: dict) -> bytes:
        if None in node:  # a shorter word ends here: matching it is enough
            return b""
        alts = [re.escape(bytes([b])) + build(sub) for b, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return build(trie)


def build_gate(patterns: list[str]) -> re.Pattern | None:
    lits: set[bytes] = set()
    for p in patterns:
        req = required_literals(p)
        if req is None:
            return None
        lits.update(x.encode("utf-8") for x in req)
    # A literal that contains another is redundant: the shorter one fires first.
    words = sorted(lits, key=len)
    kept: list[bytes] = []
    for w in words:
        if not any(k in w for k in kept):
            kept.append(w)
    return re.compile(trie_regex(kept)) if kept else None
