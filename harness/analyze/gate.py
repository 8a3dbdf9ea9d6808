"""A fast gate over raw bytes: where the next line starts that holds a required literal of some
pattern, so that the analyzer looks closely only at lines that can match something.

With ahocorasick-rs (a Rust Aho–Corasick automaton, wheels for x86_64 and aarch64 Linux) the
gate scans a window of the log at a time in one C-level pass and keeps the hits, ~150 MB/s;
without it, or with HARNESS_PURE=1, a regex does the same: a trie of the literals (Python's
`re` tries an alternation's branches one by one; a trie keeps that to one per distinct next
byte), ~10 MB/s on a realistic log. Both find exactly the same lines. A pattern with no usable
literal makes the gate unusable (`None`), and the analyzer then looks at every line.
"""

from __future__ import annotations

import bisect
import re

from .. import patterns as _patterns
from ..memo import DiskMemo, code_hash, digest
from ..patterns import accelerated, automaton, minimal, occurring, required_sets, scan_literals, trie_regex

# one entry per playbook variant (20-30 KB each), and `harness learn` validates with many variants:
# the newest used few are kept, so the file every analyze reads stays small
_SOURCES = DiskMemo("gates", code_hash(__file__, _patterns.__file__), max_entries=24)
WINDOW = 256 * 1024  # bytes scanned at a time (the hits of one window are kept)
MAX_ALTERNATIVES = 4


class Gate:
    """`next_line(region, pos)`: the start of the first line at or after `pos` (a line start)
    that holds one of the literals and, for a pattern owning one it holds, every other literal
    set that pattern requires (`step:` as well as `_actor`, say), else len(region)."""

    def __init__(self, exact: list[str], folded: list[str], owners: list[list], reqs: list[list]):
        self.folded = bool(folded)
        enc = lambda x: x.encode("utf-8", "surrogatepass")  # noqa: E731
        keys = [enc(x) for x in exact] + [enc(x.lower()) for x in folded]
        # a set of many alternatives is costly to test and rarely rules a line out: not tested
        self.reqs = [(fold, [[enc(x) for x in st] for st in sets if len(st) <= MAX_ALTERNATIVES])
                     for fold, sets in reqs]
        # (folded?, key) -> the patterns it may let through, those needing the fewest sets first
        self.owners = {(fold, enc(key)): sorted(idx, key=lambda i: len(self.reqs[i][1]))
                       for fold, key, idx in owners}
        self._region: bytes | None = None
        self._lo = self._hi = 0
        self._hits: list[int] = []  # starts of the confirmed lines in [lo, hi)
        self.keys = (keys[:len(exact)], keys[len(exact):])
        if accelerated() and not any(b"\n" in k for k in keys):
            self.ac = [automaton(ks, raw=True) for ks in self.keys]
            self.rx = self.tries = None
        else:
            self.ac = None
            self.tries = [re.compile(trie_regex(ls).encode("utf-8", "surrogatepass")) if ls else None
                          for ls in (exact, [x.lower() for x in folded])]
            parts = [trie_regex(exact)] if exact else []
            if folded:
                parts.append("(?i:" + trie_regex(folded) + ")")
            self.rx = re.compile("|".join(parts).encode("utf-8", "surrogatepass"))

    def _confirmed(self, line: bytes, found: set[tuple[int, bytes]]) -> bool:
        low = None
        for key in found:
            for i in self.owners.get(key, ()):
                fold, sets = self.reqs[i]
                if fold and low is None:
                    low = line.lower()
                hay = low if fold else line
                if all(any(x in hay for x in st) for st in sets):
                    return True
        return False

    def next_line(self, region: bytes, pos: int) -> int:
        end = len(region)
        if self.rx is not None:
            while m := self.rx.search(region, pos):
                start = max(pos, region.rfind(b"\n", pos, m.start()) + 1)
                nl = region.find(b"\n", m.end())
                nl = end if nl < 0 else nl
                line = region[start:nl]
                found = {(0, k) for k in occurring(self.tries[0], line)} if self.tries[0] else set()
                if self.tries[1]:
                    found |= {(1, k) for k in occurring(self.tries[1], line.lower())}
                if self._confirmed(line, found):
                    return start
                pos = nl + 1
            return end
        while pos < end:
            if region is not self._region or not self._lo <= pos < self._hi:
                self._scan(region, pos)
            i = bisect.bisect_left(self._hits, pos)
            if i < len(self._hits):
                return self._hits[i]
            pos = self._hi
        return end

    def _scan(self, region: bytes, pos: int) -> None:
        """Find the confirmed lines of the window from `pos` to a line end about WINDOW bytes on."""
        end = len(region)
        hi = region.find(b"\n", min(pos + WINDOW, end - 1)) + 1 or end
        view = memoryview(region)[pos:hi]
        lines: dict[int, set] = {}
        for fold, hay in ((0, view), (1, bytes(view).lower() if self.folded else None)):
            ac = self.ac[fold]
            if ac is None:
                continue
            for k, s, _ in ac.find_matches_as_indexes(hay, overlapping=True):
                start = max(pos, region.rfind(b"\n", pos, pos + s) + 1)
                lines.setdefault(start, set()).add((fold, self.keys[fold][k]))
        hits = []
        for start in sorted(lines):
            nl = region.find(b"\n", start, hi)
            if self._confirmed(region[start:(hi if nl < 0 else nl)], lines[start]):
                hits.append(start)
        self._region, self._lo, self._hi, self._hits = region, pos, hi, hits


def build_gate(patterns: list[str]) -> Gate | None:
    src = _SOURCES.get(digest("\n".join(patterns)), lambda: _gate_source(patterns))
    return None if src is None else Gate(**src)


def _gate_source(patterns: list[str]) -> dict | None:
    """The gate's literals (minimal sets), which patterns each may let through, and every
    literal set each pattern requires (JSON, memoised on disk)."""
    exact: set[str] = set()
    folded: set[str] = set()
    scanned = []
    for p in patterns:
        lits, fold = scan_literals(p)
        if lits is None:
            return None
        (folded if fold else exact).update(lits)
        scanned.append((lits, fold))
    if not exact and not folded:
        return None
    mins = (minimal(exact), minimal(folded))
    owners: dict[tuple[int, str], list[int]] = {}
    for i, (lits, fold) in enumerate(scanned):
        for key in mins[fold]:
            if any(key in lit for lit in lits):
                owners.setdefault((int(fold), key.lower() if fold else key), []).append(i)
    return {"exact": mins[0], "folded": mins[1], "owners": [[f, k, ix] for (f, k), ix in owners.items()],
            "reqs": [[int(fold), required_sets(p)] for p, (_, fold) in zip(patterns, scanned)]}
