"""Convert Python `re` patterns to GNU grep ERE, for comparing against `grep -E -f`.

`(?:` and `(?P<name>` become `(`, `\\d` becomes `[0-9]`, classes become POSIX bracket
expressions, lazy quantifiers lose their `?`, a leading inline flag group such as `(?i)` is
dropped (and reported). Lookaround, backreferences and other `(?...)` groups raise
Unconvertible: the caller drops and counts them. `\\w \\W \\s \\S \\b \\B` are kept: GNU grep
reads them the same way (ASCII in the C locale).
"""
import re


class Unconvertible(ValueError):
    pass


SIMPLE = {"d": "[0-9]", "D": "[^0-9]", "A": "^", "Z": "$", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
IN_CLASS = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "t": "\t", "r": "\r", "n": ""}
INTERVAL = re.compile(r"\{(\d*)(,\d*)?\}")


def _escape(p: str, i: int) -> tuple[str, int]:
    """The literal character of the escape at p[i] == '\\', and the index after it."""
    e = p[i + 1:i + 2]
    if e == "x":
        return chr(int(p[i + 2:i + 4], 16)), i + 4
    if not e or e.isalnum():
        raise Unconvertible(f"escape \\{e}")
    return e, i + 2


def _bracket(p: str, i: int) -> tuple[str, int]:
    """Convert the Python class at p[i] == '[' into a POSIX bracket expression."""
    if p.startswith("[^\\n]", i):  # grep lines hold no newline: "anything but a newline" is "."
        return ".", i + 5
    i += 1
    neg = p[i:i + 1] == "^"
    i += neg
    items, first = [], True
    while i < len(p) and (p[i] != "]" or first):
        first = False
        if p[i] == "\\" and p[i + 1:i + 2] in IN_CLASS:
            items.append(IN_CLASS[p[i + 1]])
            i += 2
            continue
        c, i = _escape(p, i) if p[i] == "\\" else (p[i], i + 1)
        if p[i:i + 1] == "-" and p[i + 1:i + 2] not in ("]", ""):
            hi, i = _escape(p, i + 1) if p[i + 1] == "\\" else (p[i + 1], i + 2)
            items.append(f"{c}-{hi}")
            continue
        items.append(c)
    # POSIX: ']' only first, '-' only last, '^' not first, '[' last so '[:' '[.' '[=' never form.
    special = [c for c in "]^[-" if c in items]
    body = "".join(c for c in items if c not in special)
    tail = "".join(c for c in "^[-" if c in special)
    return "[" + "^" * neg + "]" * ("]" in special) + body + tail + "]", i + 1


def py_to_ere(p: str) -> tuple[str, str]:
    """Return (ERE, dropped inline flags). Raises Unconvertible for lookaround, backrefs..."""
    m = re.match(r"\(\?([aiLmsux]+)\)", p)
    flags, p = (m.group(1), p[m.end():]) if m else ("", p)
    out, i, quant = [], 0, False
    while i < len(p):
        c, was_quant, quant = p[i], quant, False
        if c == "\\" and p[i + 1:i + 2].isdigit():
            raise Unconvertible("backreference")
        if c == "\\" and p[i + 1:i + 2] in SIMPLE:
            out.append(SIMPLE[p[i + 1]]); i += 2
        elif c == "\\" and p[i + 1:i + 2] in tuple("wWsSbB"):  # GNU grep extensions
            out.append(p[i:i + 2]); i += 2
        elif c == "\\":
            lit, i = _escape(p, i)
            out.append("\\" + lit if lit in ".[]()*+?{}|^$\\" else lit)
        elif c == "[":
            text, i = _bracket(p, i); out.append(text)
        elif p.startswith("(?:", i):
            out.append("("); i += 3
        elif p.startswith("(?P<", i):
            out.append("("); i = p.index(">", i) + 1
        elif p.startswith("(?", i):
            raise Unconvertible("lookaround or (?...) group")
        elif c in "?+" and was_quant:  # lazy/possessive suffix: same lines match
            i += 1
        elif c == "{" and INTERVAL.match(p, i) and INTERVAL.match(p, i).group() != "{}" and out:
            iv = INTERVAL.match(p, i).group(); out.append(iv); i += len(iv); quant = True
        elif c in "{}":
            out.append("\\" + c); i += 1
        else:
            out.append(c); i += 1; quant = c in "*+?"
    return "".join(out), flags
