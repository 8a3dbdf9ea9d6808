"""A fast gate over raw bytes: one regex built from a required literal of every pattern, so
that the analyzer looks closely only at lines that can match something.

Python's `re` tries every branch of an alternation at every position, so a plain union of
hundreds of patterns crawls (~15 MB/s). The gate is a trie of literals instead: one branch
per distinct first byte. A pattern with no usable literal makes the gate unusable (`None`),
and the analyzer then looks at every line: correct, only slower.
"""

from __future__ import annotations

import re

from ..patterns import ignores_case, minimal, required_literals, trie_regex


# Printable characters from the most to the least frequent in RL training logs (measured
# once on the corpus and a generated log). The gate starts each literal at a rare character:
# Python's `re` skips positions whose byte cannot start any branch, so rare first bytes make
# the scan fast.
_BY_FREQUENCY = (" etrsoinp0a:cm23d6u.g1[/lh,4k7598_v(P)yW=f]-DGbL%'|ATxRI^FwNqUS<EMHOVK\"BC`z#>}{~*+j?Q$\\"
                 "Y@!&ZJX;")
_RANK = {ch: i for i, ch in enumerate(_BY_FREQUENCY)}
SUB_MIN = 6


def _rare_start(lit: str, fold: bool) -> str:
    """A suffix of `lit` (itself required wherever `lit` is) that starts at a rare character."""
    if len(lit) <= SUB_MIN:
        return lit

    def rank(ch: str) -> int:
        r = _RANK.get(ch, len(_RANK))
        return min(r, _RANK.get(ch.lower(), r), _RANK.get(ch.upper(), r)) if fold else r

    start = min(range(len(lit) - SUB_MIN + 1), key=lambda i: (-rank(lit[i]), i))
    return lit[start:]


def build_gate(patterns: list[str]) -> re.Pattern | None:
    exact: set[str] = set()
    folded: set[str] = set()
    for p in patterns:
        req = required_literals(p)
        if req is None:
            return None
        fold = ignores_case(p)
        (folded if fold else exact).update(_rare_start(x, fold) for x in req)
    parts = [trie_regex(minimal(exact)).encode()] if exact else []
    if folded:
        parts.append(b"(?i:" + trie_regex(minimal(folded)).encode() + b")")
    return re.compile(b"|".join(parts)) if parts else None
