"""Turn raw log bytes into clean lines: decode any bytes, drop NULs and ANSI colour, keep the
last frame of `\\r`-redrawn progress bars, peel prefixes (Ray actor/pid/ip, `[rankN]:`,
logger heads) into fields, and count Ray's `[repeated Nx across cluster]`.

Pure functions; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..patterns import first_chars

# CSI sequences (colours, cursor moves), OSC sequences, and lone charset selectors.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>]")
_REPEAT = re.compile(r"\s*\[repeated (\d+)x across cluster\](?: \(Ray deduplicates logs by default\..*)?\s*$")
MAX_LINE = 64 * 1024  # characters kept of one line; the rest is cut (a 50 MB line stays bounded)


@dataclass(slots=True)
class Line:
    """One cleaned log line. `text` is what patterns match; `proc` names the process it came
    from (Ray pid/ip, torch rank, or '' when the log does not say)."""

    no: int
    text: str
    proc: str = ""
    actor: str = ""
    rank: str = ""
    repeat: int = 1
    prefix: str = ""


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\x00", "")


def clean(text: str) -> str:
    """Strip colour and keep what a terminal would show of a `\\r`-redrawn line."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE] + f" …[{len(text) - MAX_LINE} chars cut]"
    return text.rstrip()


def peel(text: str, prefixes: list[re.Pattern]) -> tuple[str, dict[str, str], str]:
    """Remove known prefixes from the left, repeatedly (Ray prefixes nest).

    Returns the body, the fields named by the prefixes' groups (inner prefixes win) and the
    peeled prefix text."""
    fields: dict[str, str] = {}
    body = text
    by_first = _dispatch(prefixes)
    for _ in range(12):
        for rx in by_first.get(body[:1], by_first[None]):
            m = rx.match(body)  # patterns anchor with ^, so match on the rest, not at an offset
            if m and m.end():
                fields.update({k: v for k, v in m.groupdict().items() if v})
                body = body[m.end():]
                break
        else:
            break
    return body, fields, text[: len(text) - len(body)]


_DISPATCH: dict[int, tuple[list, dict]] = {}


def _dispatch(prefixes: list[re.Pattern]) -> dict:
    """First character of a line -> the prefixes that can match there, in their order (None:
    a character no prefix names; those that can start anywhere)."""
    got = _DISPATCH.get(id(prefixes))
    if got is not None and got[0] is prefixes:
        return got[1]
    firsts = [first_chars(rx.pattern) if not rx.flags & re.IGNORECASE else None for rx in prefixes]
    named = set().union(*(f for f in firsts if f))
    table = {ch: [rx for rx, f in zip(prefixes, firsts) if f is None or ch in f] for ch in named}
    table[None] = [rx for rx, f in zip(prefixes, firsts) if f is None]
    _DISPATCH[id(prefixes)] = (prefixes, table)
    return table


def shown(raw: bytes) -> str:
    """A line the gate skipped as the context shows a looked-at one (`as_shown`)."""
    text = clean(decode(raw))
    if "[repeated" in text and (m := _REPEAT.search(text)):
        return f"{text[: m.start()]} [repeated {m.group(1)}x across cluster]"
    return text


def as_shown(line: "Line") -> str:
    """A line as context and tail show it: its prefix, its text and Ray's repeat count."""
    text = line.prefix + line.text
    return text if line.repeat == 1 else f"{text} [repeated {line.repeat}x across cluster]"


# Markdown's bold around a pasted error — an issue's emphasis on the line that matters
# (`[rank1]: **RuntimeError: world_size (8) is not equal to …**`, ms-swift's: tests/corpus/realworld33/3326;
# `… pid=2125841) **IndexError: index 0`, ROLL's: realworld37/3702): the line as the program printed it.
EMPHASISED = re.compile(r"\*\*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)(?:: |$)")


def make_line(no: int, raw: str, prefixes: list[re.Pattern], framing=None) -> Line:
    """A cleaned line with its framing (see framing.py: `split`) taken off, once, then its
    prefixes peeled."""
    text = clean(raw)
    frame = ""
    if framing is not None and (got := framing.split(text)):
        frame, text = got
        if not framing.literal:  # what an envelope held is the line as written: colour and all
            text = clean(text)
    repeat = 1
    if "[repeated" in text:
        m = _REPEAT.search(text)
        if m:
            repeat, text = int(m.group(1)), text[: m.start()]
    body, f, prefix = peel(text, prefixes)
    if body[:2] == "**" and EMPHASISED.match(body):
        body = body[2:].removesuffix("**")
    if body[:1] in BOXED:
        body = unbox(body)
    elif body[:2] == "  " and (got := ungroup(body)):
        margin, body = got
        prefix += margin
    prefix = frame + prefix
    rank = f.get("rank", "")
    if f.get("pid"):
        proc = f"{f.get('ip', '')}:{f['pid']}"
    elif rank:
        proc = f"rank{rank}"
    else:
        proc = f.get("actor", "")
    return Line(no, body, proc, f.get("actor", ""), rank, repeat, prefix)


# A progress bar with another writer's line after it: tqdm redraws its bar with `\r` and ends the
# line only when the bar closes, so whatever another thread or process of the same stream prints
# meanwhile lands after the bar's closing `]` (tqdm std.py format_meter: `{l_bar}{bar}| {n_fmt}/
# {total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]`). The shell's `Killed`, a watchdog's
# line, a logger's record, a trainer's metrics: each is a line of its own, read as one.
GLUED = re.compile(r"\| *[\d.]+[kMGT]?/[\d.?]+[kMGT]? \[[^\]]*\](?=\S)")
# a bar of no known total: its count and unit, then elapsed time and rate (format_meter's `{l_bar}{n_fmt}
# {unit} [{elapsed}, {rate_fmt}{postfix}]`: TRL's PPO loop over a dataloader of no length,
# `5it [11:15, 133.92s/it]` then its UserWarning, tests/corpus/realworld37/3741)
GLUED_OPEN = re.compile(r"(?:^|: )[\d.]+[kMGT]?[a-zA-Z]* \[\d[\d:]*, [^\]]*(?:/s|/it|s/\w+)\](?=\S)")


# A traceback pasted onto one line (an issue's text that lost its line breaks, a collector that
# joined a record's lines with spaces: tests/corpus/realworld5/634, realworld13/1408): Python prints
# each frame, its statement and the exception on lines of their own (traceback.py
# StackSummary.format_frame_summary: `  File "{}", line {}, in {}` then the statement indented;
# TracebackException.format_exception_only: `{type}: {message}` at column 0). Read as those lines
# when the line holds two frames, or a frame and an exception's head after it.
FLAT_FRAME = re.compile(r'File "[^"\n]+", line \d+,? in [\w<>.]+')
FLAT_EXC = re.compile(r"(?<=\s)(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?=: |$)")
FLAT_HEAD = "Traceback (most recent call last):"


def flattened(text: str) -> list[str] | None:
    """The lines of a traceback pasted onto one line (see FLAT_FRAME), else None."""
    frames = list(FLAT_FRAME.finditer(text))
    exc = FLAT_EXC.search(text, frames[-1].end()) if frames else None
    if not frames or (len(frames) == 1 and exc is None):
        return None
    head, said, _ = text[: frames[0].start()].partition(FLAT_HEAD)
    out = [head, said]
    for i, m in enumerate(frames):
        end = frames[i + 1].start() if i + 1 < len(frames) else exc.start() if exc else len(text)
        out += ["  " + m[0], "    " + text[m.end(): end].strip()]
    out.append(text[exc.start():].strip() if exc else "")
    return [t for t in out if t.strip()]


def unglued(line: Line, prefixes: list[re.Pattern]) -> list[Line]:
    """The line, or the bar and each line printed after it, with its own prefixes peeled: another
    writer's (a Ray worker's bar in the driver's terminal, then the driver's traceback or the
    shell's `Killed`), no process when it names none; a traceback pasted onto one line, its lines."""
    if 'File "' in line.text and (texts := flattened(line.text)) is not None:
        return [replace(line, text=t) for t in texts]
    if "%|" in line.text:  # a bar with a total shows its percentage
        m = GLUED.search(line.text)
    else:
        m = GLUED_OPEN.search(line.text) if "it]" in line.text or "/s]" in line.text else None
    if m is None:
        return [line]
    bar, rest = line.text[: m.end()], line.text[m.end():]
    if _REPEAT.fullmatch(rest) or not rest.strip():
        return [line]
    after = make_line(line.no, rest, prefixes)
    return [replace(line, text=bar), *unglued(after, prefixes)]


# rich's tracebacks (rich.traceback, typer's pretty exceptions): a panel titled `Traceback (most recent
# call last)`, each frame as `│ path:N in func │` (`│ in func:N │` when the file is not on that
# host), the running line of its code marked `❱` (`>` in ASCII boxes), then the exception at column 0.
RICH_HEAD = re.compile(r"^[╭┌]─+ ?Traceback \(most recent call last\) ?─+[╮┐]$")
RICH_FRAME = re.compile(r"^│ (?:(?P<path>\S+\.py):(?P<no>\d+) in (?P<func>\S+)|in (?P<func2>\S+):(?P<no2>\d+))\s*│$")
RICH_CODE = re.compile(r"^│ (?:❱|>) *\d+ (?P<code>.*?)\s*│$")  # the code's indentation drawn as `│   `


def unbox(text: str) -> str:
    """A line of a rich traceback's panel as Python prints it: the head, a frame, the running
    statement under it; any other line unchanged (the panel's other lines are the block's, see
    blocks.py)."""
    if RICH_HEAD.match(text):
        return "Traceback (most recent call last):"
    if m := RICH_FRAME.match(text):
        return (f'  File "{m["path"]}", line {m["no"]}, in {m["func"]}' if m["path"]
                else f'  File "<unknown>", line {m["no2"]}, in {m["func2"]}')
    if m := RICH_CODE.match(text):
        return "    " + m["code"].lstrip("│ ")
    return text


BOXED = ("│", "╭", "┌")

# An exception group's traceback (PEP 654: asyncio.TaskGroup, anyio — uvicorn/starlette servers —,
# the exceptiongroup backport) indents each nested traceback by two spaces per level behind a `| `
# margin (`+ ` on the group's head), with `+-+---- N ----` / `+----` rules between the sub-exceptions
# (CPython traceback.py, _ExceptionPrintContext.emit and TracebackException.format).
GROUP = re.compile(r"^(?P<margin>(?:  )+(?:\+ (?=Exception Group Traceback)|\| ?))(?P<line>.*)$"
                   r"|^(?:  )+(?:\+-|  )?\+-{4,}(?: (?:\d+|\.\.\.) -{4,})?$")
GROUP_HEAD = "Exception Group Traceback (most recent call last):"


def ungroup(text: str) -> tuple[str, str] | None:
    """(margin, line as Python prints it outside a group) of a line of an exception group's
    traceback — its head a traceback's head, a rule between sub-exceptions an empty line —;
    None for any other line."""
    m = GROUP.match(text)
    if m is None:
        return None
    if m["margin"] is None:
        return text, ""
    line = m["line"]
    return m["margin"], "Traceback (most recent call last):" if line == GROUP_HEAD else line


def canonical(text: str) -> str:
    """The shape of a line with its numbers and hex ids removed: equal across ranks and pids."""
    return _NUMS.sub("#", text).strip()


_NUMS = re.compile(r"0x[0-9a-fA-F]+|[0-9a-f]{16,}|\d+(?:\.\d+)?")
