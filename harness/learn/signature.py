"""A failure's root-cause line generalised into a signature regex: what varies from one night to
the next (numbers, paths, URLs, ids, addresses) is masked; the message's stable words stay
literal, and the regex is anchored on them — it starts at the first stable word and stops after
the first MAX_WORDS of them, so a long tail of run-specific detail does not make it brittle.

    generalise("ValueError: Weights ['decoder.final_layernorms.0.weight'] not found in checkpoint /tmp/ck-lz9")
    -> r"ValueError: Weights \\['decoder\\.final_layernorms\\.\\d[\\d.]*\\.weight'\\] not found in checkpoint [^\\s'\"]+"
"""

from __future__ import annotations

import re

MAX_WORDS = 12  # stable words kept: enough to name the failure, few enough to survive a reworded tail
MIN_WORDS = 2  # fewer stable words than this: too little to tell one failure from another

# What varies, most specific first; each becomes a regex that matches any value of its kind.
_MASKS = [
    (re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+"), r"\S+"),  # a URL (with its host and port)
    (re.compile(r"(?<![\w.])(?:~|\.{1,2})?/[^\s'\"),\]}:]+"), r"[^\s'\"]+"),  # a path
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), r"0x[0-9a-fA-F]+"),  # an address
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"), r"[0-9a-f]+"),  # a hash, an id
    (re.compile(r"\d+(?:\.\d+)*"), r"\d[\d.]*"),  # a number, a version, an IP
]
_WORD = re.compile(r"[A-Za-z_][A-Za-z_']+")
_AT = re.compile(r" \(at (?:File )?\S.*\)$")  # the analyzer's "(at <frame>)" after a bare exception


def generalise(text: str) -> str | None:
    """The signature regex for a root-cause line; None when it has too few stable words."""
    text = _AT.sub("", text.strip())
    pieces: list[tuple[bool, str]] = []  # (literal?, text or regex)
    pos = 0
    while pos < len(text):
        hits = [(m.start(), -len(m.group()), i, m) for i, (rx, _) in enumerate(_MASKS) if (m := rx.search(text, pos))]
        if not hits:
            pieces.append((True, text[pos:]))
            break
        start, _, i, m = min(hits)
        if start > pos:
            pieces.append((True, text[pos:start]))
        pieces.append((False, _MASKS[i][1]))
        pos = m.end()
    return _anchor(pieces)


def _anchor(pieces: list[tuple[bool, str]]) -> str | None:
    """From the first stable word to the end of the MAX_WORDS-th; masks at either end dropped."""
    out, words, started = [], 0, False
    for literal, part in pieces:
        if not literal:
            if started:
                out.append(part)
            continue
        for chunk in re.split(r"(\s+)", part):
            if not chunk:
                continue
            if chunk.isspace():
                if started:
                    out.append(r"\s+" if len(chunk) > 1 or chunk != " " else " ")
                continue
            n = len(_WORD.findall(chunk))
            if not started and n == 0:
                continue
            started = True
            out.append("".join(c if c == "-" else re.escape(c) for c in chunk))  # `-` is literal outside [...]
            words += n
            if words >= MAX_WORDS:
                break
        if words >= MAX_WORDS:
            break
    while out and (out[-1] in (" ", r"\s+") or not any(_WORD.search(x) for x in out[-1:]) and _is_mask(out[-1])):
        out.pop()
    if sum(len(_WORD.findall(x)) for x in out if not _is_mask(x)) < MIN_WORDS:
        return None
    return "".join(out)


def _is_mask(part: str) -> bool:
    return part in {rx for _, rx in _MASKS}
