"""A log's framing: a head that whatever collected the log put on every line — `docker logs -t`'s
and `kubectl logs --timestamps`' RFC 3339 time, the container runtime's `… stdout F `, `srun
--label`'s task number, pdsh's and clush's `host: `, `docker compose logs`' `trainer-1  | `,
`mpirun --tag-output`'s `[1,0]<stdout>:`, a quoted paste's `> ` — or an envelope around it:
docker's json-file driver writes `{"log": "…\\n", "stream": …, "time": …}` per line, log shippers a
`message`. The process's own line is inside; a traceback under a framing is still a traceback.
No list of such tools is kept: a head is learned from the log, as the head every line shares in
shape (digits as digits, words as words), and peeled once from each line before the playbook's
prefixes (Ray's, ranks', loggers') are; an envelope is a JSON object on every line with one text
field.

Pure functions; the analyzer decides once, on the first lines of a log.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from .blocks import FRAME, IPY_FRAME, LOOSE_EXC, PYSPY_HEAD, TB_START

SAMPLE_LINES = 32  # the lines a log's framing is learned from
MIN_LINES = 2  # one line says nothing about a shape lines share
SHARE = 0.9  # of the sample's non-empty lines that must carry it (a wrapper's banner may not)
MAX_TOKENS = 40
_TOKEN = re.compile(r"\d+|[A-Za-z]+|[ \t]+|.")
_ENDS = frozenset(" \t:|]>")  # a framing ends where the line it frames begins
# a quoted paste: Markdown's (a reply in an issue thread quoting a log) and mail's `> `, nested `>> `
_QUOTE = frozenset("> ")
# a logger's level is the line's own (warnings are read from it): a framing ends before it
_LEVELS = frozenset("TRACE DEBUG INFO WARN WARNING ERROR CRITICAL FATAL".split())


def _shape(text: str) -> tuple[list[str], list[int]]:
    """The shapes of a line's first tokens, and where each ends."""
    out, ends = [], []
    for m in _TOKEN.finditer(text[:200], len(text) - len(text.lstrip(" \t"))):  # a padded label: `srun -l`'s ` 3: `
        t = m.group()
        out.append("9" if t[0].isdigit() else (t.upper() if t.upper() in _LEVELS else "a") if t[0].isalpha()
                   else " " if t[0] in " \t" else t)
        ends.append(m.end())
        if len(out) >= MAX_TOKENS:
            break
    return out, ends


class Head:
    """A head on every line (its pattern)."""
    literal = True  # the line's own bytes are in the raw log as they are (the gate can look for them)

    def __init__(self, rx: re.Pattern):
        self.rx = rx

    def split(self, text: str) -> tuple[str, str] | None:
        """(the framing, the line it frames), or None when this line does not carry it."""
        m = self.rx.match(text)
        return (text[: m.end()], text[m.end():]) if m else None


class Envelope:
    """A JSON object per line; the line is its text field `key`."""
    literal = False  # quotes, backslashes and `<>&` are escaped inside the envelope
    KEYS = ("log", "message", "msg")

    def __init__(self, key: str):
        self.key = key

    def split(self, text: str) -> tuple[str, str] | None:
        body = _field(text, self.key)
        return None if body is None else ("", body.rstrip("\n"))


# A paste a terminal hard-wrapped (copied from a multiplexer's screen, an issue's wrapped code block):
# every long line broken at the terminal's width, mid-word, into physical lines of exactly that many
# characters and a shorter rest. Learned as a width that lines of the sample beginning WRAP_LINES
# different ways (in shape: digits as digits) reach and none passes, at least MIN_WIDTH: lines of one format all that wide (a
# trainer's fixed-width timing line, a collector's cut at a width, each `(task, pid=…) …`) begin alike,
# and a table's rows (`| … |`) end on a border; the pieces of wrapped lines begin anywhere.
MIN_WIDTH = 80
WRAP_LINES = 3
BEGINNING = 12  # the characters two lines begin alike by
_BORDERS = frozenset("|+║│┃╗╝┐┘")
_DIGITS = re.compile(r"\d")


def wrap_width(texts: list[str], framing=None) -> int | None:
    """The width a terminal wrapped this log's lines at (`texts`: its first lines, as written), or None;
    the lines' beginnings are read after the `framing` a collector put on each."""
    widest = max(map(len, texts), default=0)
    at = [t for t in texts if len(t) == widest and t.rstrip()[-1:] not in _BORDERS]
    begins = {_DIGITS.sub("9", (got[1] if framing is not None and (got := framing.split(t)) else t)[:BEGINNING])
              for t in at}  # in shape: `step 1` and `step 2` begin alike
    return widest if widest >= MIN_WIDTH and len(begins) >= WRAP_LINES else None


def _field(text: str, key: str) -> str | None:
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    val = obj.get(key) if isinstance(obj, dict) else None
    return val if isinstance(val, str) and "\n" not in val.rstrip("\n") else None


def learn(texts: list[str], known, reads=None) -> Head | Envelope | None:
    """The framing of a log from its first lines (`texts`, cleaned), or None. `known(text)` says
    how many leading characters the playbook's own prefixes peel from a line: a head they peel
    (a Ray prefix on every line of one actor's log, a logger's head) is theirs, not a framing.
    `reads(text)` says whether the playbook reads the line as it begins (a metric line, a stage
    marker): a log of metric lines under a collector's head begins as one once peeled."""
    lines = [t for t in texts if t.strip()]
    if len(lines) < MIN_LINES:
        return None
    need = max(MIN_LINES, int(SHARE * len(lines) + 0.999))
    for key in Envelope.KEYS:
        if sum(_field(t, key) is not None for t in lines) >= need:
            return Envelope(key)
    reads = reads or (lambda t: False)
    rx = _head(lines, known, need, reads)
    return Head(rx) if rx is not None else _indented(lines, known, reads)


def _indented(lines: list[str], known, reads) -> Head | None:
    """A paste indented as a whole (an issue's log under a list item, a reply that indented it):
    every line of the sample starts with the same blanks at least, which hide how the lines begin
    — a Ray prefix indented is no prefix (tests/corpus/realworld41/4126, realworld42/4221). Its
    framing is that common indentation when more lines begin as a log's do without it; a
    traceback's frames, indented by Python, begin as frames either way."""
    width = min(len(t) - len(t.lstrip(" ")) for t in lines)
    if not width:
        return None
    if sum(_begins(t[width:], known, reads) for t in lines) <= sum(_begins(t, known, reads) for t in lines):
        return None
    return Head(re.compile(r"[ ]{%d}" % width))


def _head(lines: list[str], known, need: int, reads) -> re.Pattern | None:
    """The pattern of the head `need` of `lines` share, or None: the longest whole one (`_balanced`)
    that passes `_framing`, else a shorter one (a quote mark shared, then `{'loss': ` shared by every
    quoted metric line: the quote mark is the framing)."""
    tokens = [_shape(t) for t in lines]
    shapes = [sh + [" "] for sh, _ in tokens]  # a framed empty line ends where its blank would be
    found = []  # the candidate heads' lengths, shortest first
    for k in range(1, MAX_TOKENS + 1):
        heads = Counter(tuple(s[:k]) for s in shapes if len(s) >= k)
        if not heads:
            break
        head, n = heads.most_common(1)[0]
        if n < need or head[-1] in _LEVELS:  # a framing ends before a logger's level
            break
        if head[-1][0] in _ENDS and (any(t in ("9", "a") for t in head) or set(head) <= _QUOTE):
            found.append(k)
            # where the playbook's prefixes (Ray's, a rank's, a logger's) begin, the process's own
            # line does: the framing ends there, with the blank that separates them
            if sum(known(t[ends[k - 1]:].lstrip(" \t")) > 0 for t, (_, ends) in zip(lines, tokens)
                   if len(ends) >= k) * 2 >= n:
                blank = Counter(s[k] for s in shapes if len(s) > k and tuple(s[:k]) == head)
                found[-1] += blank[" "] >= need
                break
    for best in reversed(found):
        head = list(Counter(tuple(s[:best]) for s in shapes if len(s) >= best).most_common(1)[0][0])
        if _balanced(head) and (rx := _framing(head, lines, known, need, reads)) is not None:
            return rx
    return None


def _balanced(head: list[str]) -> bool:
    """Whether a head's brackets and quotes close: a collector's head is whole (`[1,0]<stdout>:`);
    one that opens what it does not close cuts into the line's own words (`{"loss": 0.1, ` shared
    by every metric line of a log)."""
    text = "".join(head)
    return all(text.count(a) == text.count(b) for a, b in ("[]", "()", "{}")) and \
        text.count('"') % 2 == 0 and text.count("'") % 2 == 0


def _framing(head: list[str], lines: list[str], known, need: int, reads) -> re.Pattern | None:
    """The head's pattern if it frames the lines: lines follow it, the playbook's prefixes do not
    already peel it, and peeled, more lines begin as a log's do."""
    rx = _regex(head, lines)
    carried = [(t, m.end()) for t in lines if (m := rx.match(t))]
    if (len(carried) < need or sum(end < len(t) for t, end in carried) * 2 < len(carried)  # lines follow it
            or sum(known(t) >= end for t, end in carried) * 2 >= len(carried)):
        return None
    # Words and blanks alone begin any line of prose: as a framing they are one word on every line
    # (a host's name), not a word each line has of its own (`waiting for the server`).
    if set(head) <= {"a", " "} and len({t[:end].strip() for t, end in carried}) > 1:
        return None
    # A framing hides how lines begin; peeled, more of them begin as a log's lines do (a traceback,
    # a frame, an exception, a prefix the playbook knows, a line it reads: a metric line). A head
    # that is the lines' own — `step:3 - ` on metric lines, `RuntimeError: ` repeated by ranks —
    # hides nothing; a quote mark on every line is never the lines' own.
    if (not set(head) <= _QUOTE and sum(_begins(t[end:], known, reads) for t, end in carried)
            <= sum(_begins(t, known, reads) for t, _ in carried)):
        return None
    return rx


# a stack dump's frame as py-spy prints it, a function and its Python file, its indentation perhaps taken
# with the head (blocks.PYSPY_FRAME is looser: any indented words ending in a parenthesis, which a padded
# head such as `srun -l`'s ` 5: ` begins too)
DUMP_FRAME = re.compile(r"^\s*[\w<>.]+ \([^()\s]+\.py(?::\d+)?\)$")


def _begins(text: str, known, reads) -> bool:
    """Whether a line begins as a log's lines do: a traceback's head, frame or exception (IPython's
    `File ~/x.py:12, in f()` too), a stack dump's thread or frame (py-spy's `Thread 0x… (idle)`,
    `    all_reduce (vllm/…/symm_mem.py:148)`), a prefix the playbook knows, a line it reads."""
    return bool(TB_START.match(text) or FRAME.match(text) or LOOSE_EXC.match(text) or IPY_FRAME.match(text)
                or PYSPY_HEAD.match(text) or DUMP_FRAME.match(text) or known(text) > 0 or reads(text))


def _regex(head: list[str], lines: list[str]) -> re.Pattern:
    """The framing's pattern: digits and words as runs, spaces inside it as runs, its last
    space as the fewest any line has there (what follows is the line's own indentation)."""
    parts = [r"[ \t]*"]
    for i, t in enumerate(head):
        if t == "9":
            parts.append(r"\d+")
        elif t == "a":
            parts.append("[A-Za-z]+")
        elif t == " ":
            parts.append(r"[ \t]+" if i < len(head) - 1 else None)
        else:
            parts.append(re.escape(t))
    if parts[-1] is None:  # the separating blank: as wide as its narrowest occurrence
        stem = re.compile("".join(parts[:-1]))
        widths = [len(t[m.end():]) - len(t[m.end():].lstrip(" \t")) for t in lines
                  if (m := stem.match(t)) and t[m.end():].strip()]  # an empty line framed says nothing
        # a line with none (`[1,0]<stdout>:Error …` among indented frames): the blank is the lines' own
        # indentation, not the head's; an empty line framed may have lost its blank
        width = min(widths, default=1)
        parts[-1] = r"(?:[ \t]{%d}|$)" % width if width else ""
    return re.compile("".join(parts))
