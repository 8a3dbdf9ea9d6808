"""The digest: what a model reads about a run. Bounded (tokens estimated as characters / 4),
redacted, and built for training logs: chain status, the root cause with its traceback once,
the lines just before it, hints, other distinct errors, warnings that matter, and the tail.
"""

from __future__ import annotations

from ..chain import STAGES
from ..redact import redact
from .stacks import collectives_said, flight_said
from .verdict import basis_note

CHARS_PER_TOKEN = 4
MAX_LINE = 400
MAX_ROOT_LINE = 4000  # the root-cause line is kept longer: a metric line's bad value may sit far right, an
# assertion's message may print a container's repr whole (Megatron's `… is not empty, it is: {…}`: 2.4k characters)


def _clip(line: str, limit: int = MAX_LINE) -> str:
    return line if len(line) <= limit else line[: limit - 20] + f" …[+{len(line) - limit + 20} chars]"


def _fit(lines: list[str], budget: int, keep_head: int = 6, limit: int = MAX_LINE) -> list[str]:
    """Lines that fit in `budget` characters: whole when they all fit (a step's metrics line is
    long, its telling value often last), else each clipped to `limit`, and a cut keeps the head
    and the tail with a note."""
    if sum(len(x) + 1 for x in lines) <= budget:
        return lines
    lines = [_clip(x, limit) for x in lines]
    if sum(len(x) + 1 for x in lines) <= budget:
        return lines
    head, tail, used = [], [], 60
    for x in lines[:keep_head]:
        if used + len(x) + 1 > budget // 2:
            break
        head.append(x)
        used += len(x) + 1
    for x in reversed(lines[len(head):]):
        if used + len(x) + 1 > budget:
            break
        tail.insert(0, x)
        used += len(x) + 1
    cut = len(lines) - len(head) - len(tail)
    return head + ([f"… [{cut} lines cut] …"] if cut else []) + tail


def build_digest(verdict: dict, an, max_tokens: int = 4000, last: list[str] | None = None) -> str:
    budget = max_tokens * CHARS_PER_TOKEN
    fail = verdict["failed_stage"]
    marks = " ".join(f"{s['name']}:{s['status']}" for s in verdict["stages"])
    sections: list[tuple[str, list[str], float]] = [
        ("chain", [f"outcome={verdict['outcome']} last_stage_passed={verdict['last_stage_passed']} "
                   f"failed_stage={fail}{' (' + STAGES[fail - 1] + ')' if fail else ''}"
                   # how the stage was found, when not where the error was raised (the usual case)
                   + (f" stage_basis={basis}{basis_note(verdict, brief=True)}"
                      if fail and (basis := verdict.get("stage_basis")) not in (None, "placed") else ""),
                   marks], 0.05)]
    rc = verdict["root_cause"]
    root = _root_finding(an, rc)
    if rc:
        seen = f" (seen {rc['count']}x)" if rc["count"] > 1 else ""
        sections.append(("root cause", [f"line {rc['line_no']}: {rc['text']}",
                                        f"category={rc['category']} class={rc['class']}{seen}"]
                         + ([f"metric: {rc['detail']}"] if rc.get("detail") else [])
                         + ([f"hint: {rc['hint']}"] if rc["hint"] else []), 0.15))
        if root is not None and len(root.lines) > 1:
            sections.append(("error block (once)", root.lines, 0.35))
        if root is not None and root.context:
            sections.append(("lines before the error", _no_noise(an, root.context), 0.1))
    if said := collectives_said(an.watchdogs, an.waited_ranks):
        sections.append(("collectives the ranks wait in", said, 0.05))
    if called := flight_said(an.flights, rc["line_no"] if rc else 0):
        sections.append(("where the collective was called (torch's flight recorder; innermost last)", called, 0.05))
    if last:  # a hang's: the last line each process printed (analyze.last_lines_of)
        sections.append(("the last line each process printed (silent longest first)", last, 0.15))
    others = [f for f in verdict["findings"] if not rc or f["line_no"] != rc["line_no"]]
    if others:
        sections.append(("other errors", [f"line {f['line_no']} [{f['category']}/{f['role']}] x{f['count']}: "
                                          f"{f['text']}" + (f"  hint: {f['hint']}" if f["hint"] else "")
                                          for f in others], 0.1))
    if verdict["warnings"]:
        sections.append(("warnings", [f"line {w['line_no']} x{w['count']}: {w['text']}" for w in verdict["warnings"]],
                         0.08))
    m = verdict["metrics"]
    if m["steps"]:
        sections.append(("metrics", [f"steps={m['steps']} last: " + ", ".join(f"{k}={v}" for k, v in m["last"].items())],
                         0.04))
    tail = _no_noise(an, an.last_lines)
    if root is not None and len(root.lines) > 1:  # the error block once: not again as another rank printed it
        once = {_shape(an, x) for x in root.lines}
        tail = [x for x in tail if _shape(an, x) not in once]
    sections.append(("tail", tail, 1.0))
    out: list[str] = []
    left = budget
    for i, (title, lines, share) in enumerate(sections):
        rest = len(sections) - i - 1
        least = len(lines[0]) + 100 if title == "root cause" else 300  # the root line whole, up to its limit
        cap = left if rest == 0 else min(left - 200 * rest, max(int(budget * share), least))
        body = _fit(redact("\n".join(lines)).split("\n"), max(cap - len(title) - 8, 80),  # keys span lines
                    limit=MAX_ROOT_LINE if title == "root cause" else MAX_LINE)
        text = "\n".join([f"## {title}"] + body)
        out.append(text)
        left -= len(text) + 1
    return "\n".join(out)[:budget]


def _no_noise(an, lines: list[str]) -> list[str]:
    """`lines` without the playbook's noise, but for the last of them: what a run said just before
    it failed or stopped is kept, however routine (verl's `Waiting for register center actor … Elapsed
    time: 990 seconds out of 1000 seconds` before the wait ran out: tests/corpus/realworld53/5306)."""
    from .lines import make_line

    return [x for i, x in enumerate(lines) if i == len(lines) - 1
            or an.pb.match.first("noise", make_line(0, x, an.pb.prefixes, an.framing).text) is None]


def _shape(an, line: str) -> str:
    """A line without its process's prefix, numbers or Ray's repeat note (make_line takes it off):
    equal across ranks."""
    from .lines import canonical, make_line

    return canonical(make_line(0, line, an.pb.prefixes, an.framing).text)


def _root_finding(an, rc):
    if not rc:
        return None
    return next((f for f in an.findings.values() if f.line_no == rc["line_no"]), None)
