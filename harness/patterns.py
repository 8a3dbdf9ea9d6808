"""Required literals of regexes, and `Matchers`: many patterns tested against one line, each
regex run only when one of its required literals is in the line (a C-speed substring test).
"""

from __future__ import annotations

import os
import re
import re._constants as C  # noqa: N812  (CPython's regex parser: stable across 3.10-3.13)
import re._parser as P  # noqa: N812

from .memo import DiskMemo, code_hash

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


def _item_required(op, av) -> list[str] | None:
    """The literals one of which every match of one parsed item holds, if it says."""
    if op is C.SUBPATTERN and av[1] == 0 and av[2] == 0:
        return _required(av[-1])
    if op is C.BRANCH:
        alts = [_required(alt) for alt in av[1]]
        return None if any(x is None for x in alts) else sorted({lit for x in alts for lit in x})
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
        return _required(av[2])
    if op is C.ASSERT:  # a positive look-ahead/behind must match too
        return _required(av[1])
    return None


def _required(items) -> list[str] | None:
    """A set of literals one of which occurs in every match of the parsed sequence."""
    best = None
    for run in _runs(items):
        best = _better(best, [run])
    for op, av in items:
        best = _better(best, _item_required(op, av))
    if best is not None and min(map(len, best)) < MIN_LIT:
        return None
    return best


def required_sets(pattern: str) -> list[list[str]]:
    """Every literal set the top level of `pattern` requires one of (lower-cased when it ignores
    case): text lacking all of one set cannot match. The gate scans for one set; the others
    confirm a line it finds."""
    try:
        parsed = P.parse(pattern)
    except re.error:
        return []
    items = list(parsed)
    sets = [[run] for run in _runs(items)] + [x for op, av in items if (x := _item_required(op, av))]
    fold = bool(parsed.state.flags & re.IGNORECASE)
    return [sorted({x.lower() for x in st}) if fold else st for st in sets if min(map(len, st)) >= MIN_LIT]


def ignores_case(pattern: str) -> bool:
    try:
        return bool(P.parse(pattern).state.flags & re.IGNORECASE)
    except re.error:
        return False


def first_chars(pattern: str) -> frozenset[str] | None:
    """The characters a match of `pattern` can start with, or None when any can (or it cannot
    tell: classes such as `\\d`, optional heads, flags)."""
    try:
        parsed = P.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    return _first(list(parsed))


def _first(items) -> frozenset[str] | None:
    for op, av in items:
        if op is C.AT:  # ^ and \A take no character
            continue
        if op is C.LITERAL:
            return frozenset(chr(av))
        if op is C.IN:
            if any(o is not C.LITERAL for o, _ in av):
                return None
            return frozenset(chr(v) for _, v in av)
        if op is C.SUBPATTERN and av[1] == 0 and av[2] == 0:
            return _first(av[-1])
        if op is C.BRANCH:
            alts = [_first(alt) for alt in av[1]]
            return None if any(a is None for a in alts) else frozenset().union(*alts)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            return _first(av[2])
        return None
    return None


def required_literals(pattern: str) -> list[str] | None:
    """Literals of which at least one occurs in every match of `pattern` (lower-cased when
    the pattern ignores case), or None when it has none long enough."""
    try:
        parsed = P.parse(pattern)
    except re.error:
        return None
    lits = _required(list(parsed))
    if lits and parsed.state.flags & re.IGNORECASE:
        lits = sorted({x.lower() for x in lits})
    return lits


def trie_regex(words: list[str]) -> str:
    """A regex matching any of `words`, branching once per distinct next character (Python's
    `re` tries an alternation's branches one by one; a trie keeps that to one per character)."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[None] = {}

    def build(node: dict) -> str:
        if None in node:  # a word ends here: matching it is enough
            return ""
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return build(trie)


def minimal(lits: set[str]) -> list[str]:
    """Drop literals that contain another: wherever the longer occurs, the shorter does."""
    kept: list[str] = []
    for w in sorted(lits, key=len):
        if not any(k in w for k in kept):
            kept.append(w)
    return kept


# Printable characters from the most to the least frequent in RL training logs (measured
# once on the corpus and a generated log). The gate starts each literal at a rare character:
# Python's `re` skips positions whose byte cannot start any branch, so rare first bytes make
# the scan fast (the gate's and each line's).
_BY_FREQUENCY = (" etrsoinp0a:cm23d6u.g1[/lh,4k7598_v(P)yW=f]-DGbL%'|ATxRI^FwNqUS<EMHOVK\"BC`z#>}{~*+j?Q$\\"
                 "Y@!&ZJX;")
_RANK = {ch: i for i, ch in enumerate(_BY_FREQUENCY)}
SUB_MIN = 6


def rare_start(lit: str, fold: bool) -> str:
    """A suffix of `lit` (itself required wherever `lit` is) that starts at a rare character."""
    if len(lit) <= SUB_MIN:
        return lit

    def rank(ch: str) -> int:
        r = _RANK.get(ch, len(_RANK))
        return min(r, _RANK.get(ch.lower(), r), _RANK.get(ch.upper(), r)) if fold else r

    start = min(range(len(lit) - SUB_MIN + 1), key=lambda i: (-rank(lit[i]), i))
    return lit[start:]


def accelerated() -> bool:
    """Whether the literal scans use ahocorasick-rs (installed, and HARNESS_PURE not set)."""
    if os.environ.get("HARNESS_PURE"):
        return False
    try:
        import ahocorasick_rs  # noqa: F401
    except ImportError:
        return False
    return True


def automaton(literals: list, *, raw: bool = False):
    """An Aho–Corasick automaton of `literals` (str, or bytes with `raw`), or None where the
    scans are not `accelerated()` or there are no literals."""
    if not literals or not accelerated():
        return None
    import ahocorasick_rs

    return (ahocorasick_rs.BytesAhoCorasick if raw else ahocorasick_rs.AhoCorasick)(literals)


def occurring(rx: re.Pattern, text: str) -> set[str]:
    """Every literal of a trie regex that occurs in `text`, overlapping ones included: in a
    minimal set no literal is a prefix of another, so one literal at most starts at a position.
    (A plain search skips impossible positions at C speed; a look-ahead would defeat that.)"""
    found, pos = set(), 0
    while m := rx.search(text, pos):
        found.add(m.group())
        pos = m.start() + 1
    return found


def scan_literals(pattern: str) -> tuple[list[str] | None, bool]:
    """The literals to scan for (each started at its rarest character) and whether they are
    case-folded; None when the pattern has none. What the gate and the Matchers both look for.
    Memoised on disk (parsing ~800 patterns is most of a short `harness analyze`)."""
    lits, fold = _LITERALS.get(pattern, lambda: _scan_literals(pattern))
    return lits, fold


def _scan_literals(pattern: str) -> tuple[list[str] | None, bool]:
    fold = ignores_case(pattern)
    lits = required_literals(pattern)
    return (None if lits is None else sorted({rare_start(x, fold) for x in lits})), fold


_LITERALS = DiskMemo("literals", code_hash(__file__))


class Matchers:
    """Named groups of patterns (signatures, markers, noise, …) matched against one line.

    One C-level pass of a trie regex finds which required literals the line holds (per
    `scan`); then, per group, only the patterns owning one of them run their regex, in the
    order given. Patterns without a usable literal always run."""

    def __init__(self, groups: dict[str, list[tuple[object, str]]]):
        self.items: dict[str, list[tuple[object, str]]] = {}
        self.compiled: dict[str, list[re.Pattern | None]] = {}  # compiled at first use: most never run
        self.always: dict[str, list[int]] = {}
        reqs: dict[str, list] = {}
        lits: tuple[set[str], set[str]] = (set(), set())
        for g, items in groups.items():
            self.items[g] = list(items)
            self.compiled[g] = [None] * len(items)
            reqs[g] = [scan_literals(rx) for _, rx in items]
            self.always[g] = [i for i, (r, _) in enumerate(reqs[g]) if not r]
            for r, ci in reqs[g]:
                lits[ci].update(r or ())
        self.lits = (minimal(lits[0]), minimal(lits[1]))
        self.rx = [re.compile(trie_regex(ls)) if ls else None for ls in self.lits]
        # the same literals found by one Aho–Corasick pass where ahocorasick-rs is there
        self.ac = [automaton(ls) for ls in self.lits]
        # (group, folded?, minimal literal) -> indices of the patterns it may let through
        self.owners: dict[tuple[str, int, str], list[int]] = {}
        for g, rs in reqs.items():
            for i, (r, ci) in enumerate(rs):
                for lit in r or ():
                    for key in self.lits[ci]:
                        if key in lit:
                            self.owners.setdefault((g, ci, key), []).append(i)

    def scan(self, text: str) -> tuple[set[str], set[str]]:
        """The minimal literals present in `text` (exact, case-folded)."""
        ac = self.ac
        if ac[0] is not None or ac[1] is not None:
            return (set(ac[0].find_matches_as_strings(text, overlapping=True)) if ac[0] else set(),
                    set(ac[1].find_matches_as_strings(text.lower(), overlapping=True)) if ac[1] else set())
        return (occurring(self.rx[0], text) if self.rx[0] else set(),
                occurring(self.rx[1], text.lower()) if self.rx[1] else set())

    def _candidates(self, group: str, text: str, found):
        idx = set(self.always[group])
        for ci in (0, 1):
            for lit in found[ci]:
                idx.update(self.owners.get((group, ci, lit), ()))
        items, compiled = self.items[group], self.compiled[group]
        for i in sorted(idx):
            rx = compiled[i]
            if rx is None:
                rx = compiled[i] = re.compile(items[i][1])
            if rx.search(text):
                yield items[i][0]

    def matches(self, group: str, text: str, found=None) -> list:
        return list(self._candidates(group, text, self.scan(text) if found is None else found))

    def first(self, group: str, text: str, found=None):
        return next(self._candidates(group, text, self.scan(text) if found is None else found), None)


def valid_regex(v: str) -> str:
    """`v` if it compiles; a ValueError saying why not (pydantic turns it into a field error).
    Memoised on disk: a playbook's ~300 patterns need not be compiled to be checked each call."""
    error = _VALID.get(v, lambda: _regex_error(v))
    if error is not None:
        raise ValueError(f"invalid regex {v!r}: {error}")
    return v


def _regex_error(v: str) -> str | None:
    try:
        re.compile(v)
    except re.error as e:
        return str(e)
    return None


_VALID = DiskMemo("regex-errors", code_hash(__file__))
