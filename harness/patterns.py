"""Required literals of regexes, and `Matcher`: many patterns tested against one line, each
regex run only when one of its required literals is in the line (a C-speed substring test).
"""

from __future__ import annotations

import re
import re._constants as C  # noqa: N812  (CPython's regex parser: stable across 3.10-3.13)
import re._parser as P  # noqa: N812

MIN_LIT = 3


def _runs(items) -> list[str]:
    """Runs of consecutive literal characters in a parsed sequence."""
    runs, cur = [], []
    for op, av in items:
        if op is C.LITERAL:
            cur.append(chr(av))
        else:
            runs.append("".join(cur))
            cur = []
    runs.append("".join(cur))
    return [r for r in runs if r]


def _better(a: list[str] | None, b: list[str] | None) -> list[str] | None:
    """The more selective literal set: longer shortest literal, then fewer literals."""
    if a is None or b is None:
        return a or b
    return a if (min(map(len, a)), -len(a)) >= (min(map(len, b)), -len(b)) else b


def _required(items) -> list[str] | None:
    """A set of literals one of which occurs in every match of the parsed sequence."""
    best = None
    for run in _runs(items):
        best = _better(best, [run])
    for op, av in items:
        cand = None
        if op is C.SUBPATTERN and av[1] == 0 and av[2] == 0:
            cand = _required(av[-1])
        elif op is C.BRANCH:
            alts = [_required(alt) for alt in av[1]]
            cand = None if any(x is None for x in alts) else sorted({lit for x in alts for lit in x})
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            cand = _required(av[2])
        best = _better(best, cand)
    if best is not None and min(map(len, best)) < MIN_LIT:
        return None
    return best


def required_literals(pattern: str) -> list[str] | None:
    """Literals of which at least one occurs in every match of `pattern`, or None when the
    pattern has none long enough (or ignores case)."""
    try:
        parsed = P.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    return _required(list(parsed))


class Matcher:
    """Which of many patterns match a line: a substring test of each pattern's required
    literals (C speed) before its regex runs. Keeps the playbook's order."""

    def __init__(self, items: list[tuple[object, str]]):
        self.items = [(obj, re.compile(rx), tuple(required_literals(rx) or ())) for obj, rx in items]

    def matches(self, text: str) -> list:
        return [obj for obj, rx, lits in self.items
                if (not lits or any(lit in text for lit in lits)) and rx.search(text)]

    def first(self, text: str):
        for obj, rx, lits in self.items:
            if (not lits or any(lit in text for lit in lits)) and rx.search(text):
                return obj
        return None
