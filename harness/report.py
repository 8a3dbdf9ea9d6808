"""The session report, built from the journal alone (so it can be made during or after a
session, and from a replay) plus, when the host can be reached, the ledger's cumulative diff.

    print(markdown(events, diff))   # for terminals and issues; harness.report_html.html: for a phone

`diff` is the ledger's diff (first attempt -> latest): None when it was not fetched, with
`diff_error` saying why when fetching failed. Event types this module does not know (a later
`continue`, say) are shown in the timeline by their type and text, never an error.
"""

from __future__ import annotations

import re
import textwrap
import time
from dataclasses import dataclass, field

from .analyze.verdict import basis_note
from .chain import STAGES
from .redact import redact
from .remote.hostinfo import devices_line, versions_line
from .session.state import fold

NARROW = 60  # columns below which the Markdown drops its tables
MAX_DIFF_LINES = 2000  # a report must still open on a phone; `harness diff` has the rest
_EDITED = re.compile(r"edited (.+?): \d+ line")  # the edit tool's answer when it changed a file


@dataclass
class Row:
    """One attempt: what it saw | what was changed after it, before the next | its result."""
    n: int
    saw: str
    root: str
    changed: list[str]
    result: str
    marks: str  # one of ✓ ✗ · per stage


@dataclass
class Bar:
    """One attempt on the time axis (seconds from the session's start): how long it waited for
    the run, for the model and for the harness itself, and how far it got."""
    n: int
    start: float
    run: float
    model: float
    harness: float
    reached: int
    outcome: str


@dataclass
class Report:
    """Every text in it is one redacted line, except `diff` (redacted, capped at MAX_DIFF_LINES)."""
    session: str
    status: str  # passed | not_passed | running
    lead: str  # the headline's verdict: chain passed | chain not passed (<reason>) | running
    headline: str  # the lead and where it stopped
    facts: list[tuple[str, str]]
    rows: list[Row]
    timeline: list[tuple[str, str, str]]  # (+H:MM:SS, kind, text)
    files: list[str]
    interventions: list[str]
    diff: str | None
    diff_note: str
    bars: list[Bar] = field(default_factory=list)
    hangs: list[tuple[int, str]] = field(default_factory=list)  # (attempt, where its processes waited)


def build(events: list[dict], diff: str | None = None, *, diff_error: str | None = None) -> Report:
    st = fold(events)  # a `continue` after an `end` makes the session run again: st.ended is None
    ended = st.ended
    rows = [_row(a, events, ended) for a in st.attempts]
    status = "passed" if ended and ended["reason"] == "passed" else ("not_passed" if ended else "running")
    files, source = (changed_files(diff), "diff") if diff is not None else (_journal_files(events), "journal")
    files = [_line(f, 300) for f in files]
    people = [_line(x) for e in events for x in _interventions(e)]
    t0 = next((e["t"] for e in events if e["type"] == "session"), events[0]["t"] if events else 0.0)
    facts = [(k, _line(v, 600)) for k, v in _facts(st, t0, ended, files, source, diff, people)]
    lead, rest = (_line(x, 300) for x in _headline(st, ended, status))
    hangs = [(e.get("attempt") or 0, redact(str(e.get("text", ""))).rstrip()) for e in events if e["type"] == "evidence"]
    return Report(_line(st.session), status, lead, lead + ("" if rest[:1] == ":" else " ") + rest, facts, rows,
                  _timeline(events, t0), files, people, *_diff_part(diff, diff_error, _line(st.session)),
                  bars=_bars(st, events, t0), hangs=hangs)


def _bars(st, events: list[dict], t0: float) -> list[Bar]:
    """An attempt spans from its launch to the next launch (the last: to its last event or the
    session's end after it); its run time is the verdict's, its model time the sum of its calls',
    the rest is the harness's."""
    starts = {e["attempt"]: e["t"] for e in events if e["type"] == "launch"}
    last = st.attempts[-1].n if st.attempts else None
    end = max((e["t"] for e in events if e.get("attempt") == last or
               (e["type"] == "end" and e["t"] >= starts.get(last, e["t"]))), default=t0)
    model: dict[int, float] = {}
    for e in events:
        if e["type"] == "model":
            model[e.get("attempt")] = model.get(e.get("attempt"), 0.0) + float(e.get("seconds") or 0)
    bars = []
    for a in st.attempts:
        if a.n not in starts:
            continue
        span = max(0.0, starts.get(a.n + 1, end) - starts[a.n])
        run = min(span, float((a.verdict or {}).get("run_seconds") or 0))
        m = min(span - run, model.get(a.n, 0.0))
        bars.append(Bar(a.n, starts[a.n] - t0, run, m, span - run - m, a.reached,
                        (a.verdict or {}).get("outcome", "running")))
    return bars


def markdown(events: list[dict], diff: str | None = None, *, diff_error: str | None = None,
             width: int | None = None) -> str:
    """Tables for a wide screen or a file; below NARROW columns (a phone over SSH) the same report
    as lines wrapped to `width`, with no table (the diff stays as git wrote it)."""
    r = build(events, diff, diff_error=diff_error)
    if width is not None and width < NARROW:
        return _narrow(r, max(width, 20))
    out = [f"# harness session {_md(r.session)}", "", f"**{_md(r.lead)}**{_md(r.headline[len(r.lead):])}", ""]
    out += [f"- {k}: {_md(v)}" for k, v in r.facts] + ["", "## The chain", ""]
    out += ["| attempt | " + " | ".join(STAGES) + " |", "|---" * (len(STAGES) + 1) + "|"]
    out += [f"| {x.n} | " + " | ".join(x.marks) + " |" for x in r.rows]
    out += ["", "✓ passed, ✗ failed, · not reached", "", "## Attempts", "",
            "| attempt | what it saw | what was changed before the next | result |", "|---|---|---|---|"]
    for x in r.rows:
        saw = _md(x.saw) + (f": {_code(x.root)}" if x.root else "")
        out.append(f"| {x.n} | {saw} | {_md('; '.join(x.changed) or '—')} | {_md(x.result)} |")
    out += ["", "## Timeline", ""] + [f"- `{t}` **{k}** {_md(text)}" for t, k, text in r.timeline]
    out += ["", "## The cumulative diff", ""]
    if r.diff:
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", r.diff)), default=0))
        out += [fence + "diff", r.diff.rstrip("\n"), fence]
    out += [_md(r.diff_note)] if r.diff_note else []
    return "\n".join(out) + "\n"


def _narrow(r: Report, width: int) -> str:
    def wrap(text: str, indent: str = "") -> list[str]:
        return textwrap.wrap(text, width, subsequent_indent=indent or "  ", break_on_hyphens=False) or [""]

    legend = " ".join(f"{i}={s}" for i, s in enumerate(STAGES, 1))
    out = wrap(f"# harness session {r.session}") + [""] + wrap(f"**{r.lead}**{r.headline[len(r.lead):]}") + [""]
    for k, v in r.facts:
        out += wrap(f"- {k}: {v}")
    out += ["", "## The chain", ""]
    for x in r.rows:
        out += wrap(f"{x.n:>2} {x.marks} {x.result}", "   ")
    out += [""] + wrap(f"✓ passed ✗ failed · not reached; {legend}") + ["", "## Attempts"]
    for x in r.rows:
        out += ["", f"### attempt {x.n}"] + wrap(f"saw: {x.saw}" + (f": {x.root}" if x.root else ""))
        out += wrap(f"then: {'; '.join(x.changed) or '—'}") + wrap(f"result: {x.result}")
    out += ["", "## Timeline", ""]
    for t, k, text in r.timeline:
        out += wrap(f"{t} {k}: {text}", "  ")
    out += ["", "## The cumulative diff", ""]
    if r.diff:
        out += ["```diff", r.diff.rstrip("\n"), "```"]
    out += wrap(r.diff_note) if r.diff_note else []
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- the facts
def _interventions(e: dict) -> list[str]:
    """What a person had to do about this event: `harness continue` (after a controller crash,
    the crash too), or a stop somebody asked for (Ctrl-C, `harness stop`); a `stopped` end with no
    detail or one starting with "error" is the controller failing (as harness.notify reads it)."""
    detail = str(e.get("detail") or "")
    if e["type"] == "continue":
        return ["the controller died without an end (crash)", "continue"] if e.get("crashed") else [_event_line(e)[1]]
    if e["type"] == "end" and e.get("reason") == "stopped" and detail and not detail.lower().startswith("error"):
        return [_event_line(e)[1]]
    return []


def _headline(st, ended: dict | None, status: str) -> tuple[str, str]:
    """(the verdict, the rest): Markdown sets the verdict in bold."""
    best = max((a.reached for a in st.attempts), default=0)
    last = st.attempts[-1] if st.attempts else None
    if status == "passed":
        return "chain passed", f" on attempt {len(st.attempts)}"
    if status == "running":
        now = f"attempt {last.n} under way" if last and not last.verdict else f"{len(st.attempts)} attempt(s) done"
        return "running", f": {now}, furthest {best}/{len(STAGES)} stages so far"
    lead = f"chain not passed ({ended['reason']})"
    if last is None:
        return lead, ": no attempt was launched"
    rest = f": attempt {last.n} stopped with {_result(last, ended)}, {last.reached}/{len(STAGES)} stages passed"
    return lead, rest + (f"; furthest {best}/{len(STAGES)}" if best > last.reached else "")


def _facts(st, t0, ended, files, source, diff, people) -> list[tuple[str, str]]:
    ends = f"{ended['reason']}{' — ' + ended['detail'] if ended.get('detail') else ''}" if ended else "still running"
    lines = (diff or "").splitlines()
    size = f" (+{sum(ln[:1] == '+' and ln[:3] != '+++' for ln in lines)} " \
           f"−{sum(ln[:1] == '-' and ln[:3] != '---' for ln in lines)} lines)" if lines else ""
    shown = ", ".join(files[:20]) + (f", … {len(files) - 20} more" if len(files) > 20 else "")
    changed = f"{len(files)}{size}" + ("" if source == "diff" else " (from the journal: the diff was not read)") \
        + (f": {shown}" if files else "")
    return [("ended", ends), ("host", f"{st.host}:{st.workdir}"),
            ("started", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))),
            ("duration", duration((st.last_t or t0) - t0)),
            ("attempts", f"{len(st.attempts)} ({st.relaunches} relaunch{'es' if st.relaunches != 1 else ''})"),
            ("files changed", changed),
            ("model", f"{st.model_calls} calls, {st.tokens} tokens, money {st.money:.4f}; "
                      f"{st.agent_steps} agent tool calls"),
            ("waiting", f"for the run {duration(st.run_seconds)}, for the model {duration(st.model_seconds)}"),
            ("human interventions", f"{len(people)}" + (": " + "; ".join(people) if people else ""))] \
        + _hint(st, ended) + ([("devices", devices_line(st.machine)), ("versions", versions_line(st.machine) or "not read")]
           if st.machine else [])


def _hint(st, ended: dict | None) -> list[tuple[str, str]]:
    """What the playbook says about the failure a session ended on (the hint a learned entry carries
    from the night it was fixed), with where that hint comes from."""
    last = st.attempts[-1] if st.attempts else None
    root = ((last.verdict or {}).get("root") or {}) if last and ended and ended["reason"] != "passed" else {}
    if not root.get("hint"):
        return []
    return [("hint", (f"(playbook {root['origin']}) " if root.get("origin") else "") + root["hint"])]


def _row(a, events: list[dict], ended: dict | None) -> Row:
    v = a.verdict or {}
    top = a.reached  # below the failed stage: a wrong_result at actor_update passed 6 of 7, not 7
    saw = f"passed {top}/{len(STAGES)}" + (f" ({STAGES[top - 1]})" if top else "")
    root = _line((v.get("root") or {}).get("text") or "", 300)
    marks = "".join("✗" if s == v.get("failed_stage") else ("✓" if s <= top else "·")
                    for s in range(1, len(STAGES) + 1))
    return Row(a.n, saw, root, _changes(a.n, events), _line(_result(a, ended)), marks)


def _result(a, ended: dict | None) -> str:
    if not (v := a.verdict):
        return "stopped before a verdict" if ended else "running"
    return _where(v) + (f" ({v['reason']})" if str(v.get("reason", "")).startswith("budget:") else "")


def _where(v: dict) -> str:
    if not v.get("failed_stage"):
        return v["outcome"]
    return f"{v['outcome']} at {STAGES[v['failed_stage'] - 1]}{basis_note(v, brief=True)}"


def _changes(n: int, events: list[dict]) -> list[str]:
    """What happened to the workdir or the run's env after attempt n ended, before n+1 started."""
    out: list[str] = []
    for e in (e for e in events if e.get("attempt") == n):
        if e["type"] == "fix":  # "… already …": in place before a crash, so it counts (as in the fold)
            done = e.get("applied") or " already " in f" {e.get('description')} "
            out.append(("" if done else "not applied: ") + e.get("description", e.get("signature", "")) + _by(e))
        elif e["type"] == "cleanup":
            out.append("cleanup and retry" + (": " + "; ".join(e["commands"]) if e.get("commands") else "")
                       + (f" ({e['detail']})" if e.get("detail") else ""))
        elif e["type"] == "tool" and not e.get("refused"):
            out += [f"edited {f}" for f in _edited(e)]
            if e.get("end") in ("relaunch", "give_up"):
                out.append(f"agent {'relaunched' if e['end'] == 'relaunch' else 'gave up'}: {e.get('summary', '')}")
    return [_line(c, 200) for c in dict.fromkeys(out)]


def _timeline(events: list[dict], t0: float) -> list[tuple[str, str, str]]:
    rows = []
    for e in events:
        kind, text = _event_line(e)
        if text is not None:
            offset = max(0, int(e.get("t", t0) - t0))
            rows.append((f"+{offset // 3600}:{offset // 60 % 60:02d}:{offset % 60:02d}", _line(kind, 40),
                         _line(text, 240)))
    return rows


def _by(fix: dict) -> str:
    """Whose fix it was, when a learned playbook's: ` — fixed by the learned playbook X (from session Y)`
    (for one applied)."""
    origin = fix.get("origin") or ""
    if ", learned from session " not in origin:
        return ""
    name, _, rest = origin.partition(" (")
    session = rest.split(", learned from session ", 1)[1].split(" ", 1)[0]
    if fix.get("applied"):
        return f" — fixed by the learned playbook {name} (from session {session})"
    return f" (a fix of the learned playbook {name}, from session {session})"


def _event_line(e: dict) -> tuple[str, str | None]:
    """(kind, one line) for the timeline; text None leaves the event out (stages, model calls…)."""
    kind, n = e["type"], e.get("attempt")
    if kind == "launch":
        return kind, f"attempt {n} launched (run {e.get('run_id', '?')})"
    if kind == "verdict":
        root = (e.get("root") or {}).get("text")
        passed = min(e["last_stage_passed"], e["failed_stage"] - 1) if e.get("failed_stage") else e["last_stage_passed"]
        return kind, f"attempt {n}: {_where(e)}, passed {passed}/{len(STAGES)}" \
            + (f" — {root}" if root else "")
    if kind == "fix":
        return kind, ("declared fix: " if e.get("applied") else "declared fix not applied: ") + e.get("description", "") \
            + _by(e)
    if kind == "cleanup":
        return kind, f"cleanup ({'ok' if e.get('ok') else 'failed'}): " + "; ".join(e.get("commands", [])) \
            + (f" — {e['detail']}" if e.get("detail") else "")
    if kind == "tool" and e.get("end") in ("relaunch", "give_up") and not e.get("refused"):
        return e["end"], f"agent: {e.get('summary', '')}"
    if kind == "end":
        return kind, f"session ended: {e.get('reason')}" + (f" — {e['detail']}" if e.get("detail") else "")
    if kind == "note":
        return kind, e.get("text", "")
    if kind == "protocol":
        return kind, f"the agent acts by {'tool calls' if e.get('mode') == 'tools' else 'text'}: {e.get('reason', '')}"
    if kind == "continue" and e.get("crashed"):
        return kind, "the controller had died without an end (killed?); resumed from the journal"
    if kind == "continue":
        return kind, f"resumed by a person after {e.get('prior') or 'the end'}" + \
            (", with a fresh budget" if e.get("fresh_budget") else "")
    if kind == "unreachable":
        return kind, f"lost the host: {e.get('error', '')}; waiting for it"
    if kind == "reachable":
        return kind, f"the host is back after {duration(e.get('after', 0))}"
    if kind == "start_failed":
        return kind, f"a controller could not start: {e.get('error', '')}"

    if kind in ("session", "stage", "stopped", "model", "tool", "evidence"):
        return kind, None
    return kind, _text(e)  # a type this report does not know: its own words


def _text(e: dict) -> str:
    """The words of an event of any type, known or not."""
    return next((str(e[k]) for k in ("text", "detail", "reason", "summary", "message") if e.get(k)), "")


# ---------------------------------------------------------------------- the diff
def changed_files(diff: str) -> list[str]:
    """The paths a git diff changes, in order (the new path; the old one when deleted)."""
    files: list[str] = []
    for block in re.split(r"^diff --git ", diff, flags=re.M)[1:]:
        head = block.split("\n@@", 1)[0]  # lines after the first hunk are content, not names
        paths = re.findall(r'^(?:--- "?a/|\+\+\+ "?b/)(.+?)"?$', head, re.M) or \
            re.findall(r' "?b/(.+?)"?$', head.split("\n", 1)[0])  # binary or mode-only: the header
        files += paths[-1:]
    return list(dict.fromkeys(files))


def _journal_files(events: list[dict]) -> list[str]:
    """Files declared fixes and the agent's edits changed: what the journal knows without the host."""
    return list(dict.fromkeys(f for e in events for f in (e.get("files", []) if e["type"] == "fix" and e.get("applied")
                                                         else _edited(e))))


def _edited(e: dict) -> list[str]:
    m = e["type"] == "tool" and not e.get("refused") and _EDITED.match(e.get("output") or "")
    return [m.group(1)] if m else []


def _diff_part(diff: str | None, error: str | None, session: str) -> tuple[str | None, str]:
    if diff is None:
        why = f"unavailable: {_line(error)}" if error else "not included"
        return None, f"The cumulative diff is {why}; `harness diff {session}` shows it when the host can be reached."
    lines = redact(diff).splitlines()
    if not lines:
        return None, "No change: the workdir is as the session found it."
    more = len(lines) - MAX_DIFF_LINES
    return "\n".join(lines[:MAX_DIFF_LINES]) + "\n", \
        f"… {more} more lines: `harness diff {session}` shows the whole diff." if more > 0 else ""


# ---------------------------------------------------------------------- text
def duration(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s // 60 % 60:02d}m"


def _line(text, n: int = 200) -> str:
    """One redacted line of at most n characters: every journal text goes through here."""
    text = " ".join(redact(str(text)).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _md(text: str) -> str:
    """Plain text safe in a Markdown table cell: no cell breaks, and `<redacted>` not taken for HTML."""
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("|", "\\|"))


def _code(text: str) -> str:
    ticks = "`" * (1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text.replace('|', chr(92) + '|')}{pad}{ticks}"
