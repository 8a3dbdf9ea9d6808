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
import os
import re

from .. import patterns as _patterns
from ..memo import DiskMemo, code_hash, digest
from ..patterns import minimal, scan_literals, trie_regex

try:
    import ahocorasick_rs
except ImportError:  # the pure-Python path: same lines, slower
    ahocorasick_rs = None

_SOURCES = DiskMemo("gates", code_hash(__file__, _patterns.__file__))
WINDOW = 256 * 1024  # bytes scanned at a time (the hits of one window are kept)


def accelerated() -> bool:
    """Whether the Aho–Corasick scanner is used (installed, and HARNESS_PURE is not set)."""
    return ahocorasick_rs is not None and not os.environ.get("HARNESS_PURE")


class Gate:
    """`next_line(region, pos)`: the start of the first line at or after `pos` (a line start)
    that holds one of the literals, else len(region)."""

    def __init__(self, exact: list[str], folded: list[str]):
        self.folded = bool(folded)
        self._region: bytes | None = None
        self._lo = self._hi = 0
        self._hits: list[int] = []  # starts of the lines with a hit in [lo, hi)
        if accelerated() and not any("\n" in x for x in exact + folded):
            self.ac = [ahocorasick_rs.BytesAhoCorasick([x.encode("utf-8", "surrogatepass") for x in lits])
                       if lits else None for lits in (exact, [x.lower() for x in folded])]
            self.rx = None
        else:
            parts = [trie_regex(exact)] if exact else []
            if folded:
                parts.append("(?i:" + trie_regex(folded) + ")")
            self.ac, self.rx = None, re.compile("|".join(parts).encode("utf-8", "surrogatepass"))

    def next_line(self, region: bytes, pos: int) -> int:
        end = len(region)
        if self.rx is not None:
            m = self.rx.search(region, pos)
            return max(pos, region.rfind(b"\n", pos, m.start()) + 1) if m else end
        while pos < end:
            if region is not self._region or not self._lo <= pos < self._hi:
                self._scan(region, pos)
            i = bisect.bisect_left(self._hits, pos)
            if i < len(self._hits):
                return self._hits[i]
            pos = self._hi
        return end

    def _scan(self, region: bytes, pos: int) -> None:
        """Find the hits of the window from `pos` to a line end about WINDOW bytes on."""
        end = len(region)
        hi = region.find(b"\n", min(pos + WINDOW, end - 1)) + 1 or end
        view = memoryview(region)[pos:hi]
        starts = set()
        for ac, hay in ((self.ac[0], view), (self.ac[1], bytes(view).lower() if self.folded else None)):
            if ac is not None:
                for _, s, _ in ac.find_matches_as_indexes(hay):
                    starts.add(max(pos, region.rfind(b"\n", pos, pos + s) + 1))
        self._region, self._lo, self._hi, self._hits = region, pos, hi, sorted(starts)


def build_gate(patterns: list[str]) -> Gate | None:
    lits = _SOURCES.get(digest("\n".join(patterns)), lambda: _gate_literals(patterns))
    return None if lits is None else Gate(*lits)


def _gate_literals(patterns: list[str]) -> tuple[list[str], list[str]] | None:
    exact: set[str] = set()
    folded: set[str] = set()
    for p in patterns:
        lits, fold = scan_literals(p)
        if lits is None:
            return None
        (folded if fold else exact).update(lits)
    if not exact and not folded:
        return None
    return minimal(exact), minimal(folded)
