"""Put the lines of several logs in the order of their timestamps (the nodes of a multi-node run,
a failed run's worker files): the analyzer takes the first error in time as the root cause, and
"first" is the order it reads lines in.

    merged = merge([(b"(log:w1:raylet.out) ", data1), (b"", data2)])   # [(prefix, line), …]

A line's time is the first timestamp in its first 100 characters, in any of the shapes the stack
prints: ISO `2026-12-02 19:03:04,123` (Python logging, Ray's own logs), `[2026-12-02 19:03:04]`,
vLLM's `INFO 12-02 19:03:04`, glog's `I1202 19:03:04.123456`, CANN plog's
`2026-12-02-19:03:04.123.456`. A line without one (a traceback's body) keeps the time of the line
before it in the same log, so a block never comes apart; lines before a log's first timestamp
sort first. The year is ignored (vLLM and glog do not print it) and so are time zones: nodes
are expected to keep the same clock and zone, as Ray's own log ordering assumes. Within one
log the order is never changed. Pure functions; no I/O.
"""

from __future__ import annotations

import heapq
import re

# month-day, hour:minute:second and a fraction, with an optional year before them.
_STAMP = re.compile(rb"(?<!\d)(?:\d{4}-)?(\d{2})-(\d{2})[ T-](\d{2}):(\d{2}):(\d{2})(?:[.,:](\d{1,9}))?")
_GLOG = re.compile(rb"^\[?[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
HEAD = 100


def stamp(line: bytes) -> float | None:
    """Seconds since the start of the year (without leap days: only the order counts), or None."""
    head = line[:HEAD]
    m = _GLOG.match(head) or _STAMP.search(head)
    if not m:
        return None
    mo, d, h, mi, s, frac = m.groups()
    month, day = int(mo), int(d)
    if not (1 <= month <= 12 and 1 <= day <= 31 and int(h) < 24 and int(mi) < 60 and int(s) < 61):
        return None
    return ((month * 31 + day) * 24 + int(h)) * 3600 + int(mi) * 60 + int(s) + (float(b"0." + frac) if frac else 0.0)


def _keyed(i: int, prefix: bytes, data: bytes):
    t = float("-inf")
    for line in data.splitlines(keepends=True):
        if (own := stamp(line)) is not None:
            t = own
        yield t, i, prefix, line


def merge(sources: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """(prefix, line) of every line of every source, in timestamp order (ties: the source listed first)."""
    if len(sources) == 1:
        prefix, data = sources[0]
        return [(prefix, ln) for ln in data.splitlines(keepends=True)]
    streams = [_keyed(i, p, d) for i, (p, d) in enumerate(sources)]
    return [(p, ln) for _, _, p, ln in heapq.merge(*streams, key=lambda e: (e[0], e[1]))]
