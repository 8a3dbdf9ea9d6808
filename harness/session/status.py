"""What a session is doing, from its journal and its lock: the status a phone shows (40 columns)."""

from __future__ import annotations

import time
from pathlib import Path

from ..chain import STAGES
from .detach import LOG, holder
from .journal import Journal
from .state import fold

WIDTH = 40


def _doing(ev: dict) -> str:
    k = ev["type"]
    if k == "launch":
        return f"watching attempt {ev['attempt']}"
    if k == "stage":
        return f"attempt {ev['attempt']}: {ev['name']} reached"
    if k == "verdict":
        return "deciding what to change"
    if k == "model":
        return "agent: thinking"
    if k == "tool":
        return f"agent: {ev['name']} {ev.get('arguments', '')}"
    if k == "fix":
        return f"fix: {ev['description']}"
    if k == "end":
        return f"ended: {ev['reason']}"
    return k


def status(directory: Path, now: float | None = None) -> dict:
    events = Journal.read(directory / "journal.jsonl")
    st = fold(events)
    now = time.time() if now is None else now
    pid = holder(directory)
    last = st.attempts[-1] if st.attempts else None
    v = last.verdict if last else None
    root = ((v or {}).get("root") or {}).get("text", "")
    end = st.ended
    launched = any(e["type"] == "launch" for e in events)
    error = ""  # why a controller that is gone stopped
    if pid is None and end is None:
        error = st.start_error or _last_error(directory / LOG) or "the controller died without writing an end " \
            "(killed?); `harness continue` resumes the session"
    elif end and end["reason"] in ("error", "unreachable"):
        error = end["detail"]
    elif pid is None and st.start_error:
        error = st.start_error
    return {
        "session": st.session or directory.name, "running": pid is not None, "pid": pid,
        "ended": end["reason"] if end else None, "detail": end["detail"] if end else "",
        "failed_to_start": not launched and pid is None,
        "unreachable_since": st.unreachable["since"] if st.unreachable and pid is not None else None,
        "error": error,
        "attempt": last.n if last else 0, "elapsed_s": round(((st.last_t if end else now) or now) - (st.started or now)),
        "reached": last.reached if last else 0, "failed_stage": (v or {}).get("failed_stage"),
        "outcome": (v or {}).get("outcome", "running" if last else "starting"), "root_cause": root,
        "doing": _doing(events[-1]) if events else "starting",
        "relaunches": st.relaunches, "agent_steps": st.agent_steps, "tokens": st.tokens, "money": round(st.money, 4),
    }


def _last_error(log: Path) -> str:
    """The last `error: …` line a background controller printed."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((ln[7:].strip() for ln in reversed(lines) if ln.startswith("error: ")), "")


def is_default_target(directory: Path) -> bool:
    """Whether a session may be chosen when no id is given: not one that never launched anything
    and has no controller (it failed to start)."""
    events = Journal.read(directory / "journal.jsonl")
    return any(e["type"] == "launch" for e in events) or holder(directory) is not None


def _marks(reached: int, failed: int | None) -> str:
    return "".join("✗" if i == failed else "✓" if i <= reached else "·" for i in range(1, len(STAGES) + 1))


def _fit(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def phone_lines(s: dict, now: float | None = None) -> list[str]:
    """The status in lines of at most 40 characters."""
    if s["failed_to_start"]:
        state = "failed to start"
    elif s["running"]:
        state = f"running (pid {s['pid']})"
    else:
        state = f"ended: {s['ended']}" if s["ended"] else "controller gone"
    el = s["elapsed_s"]
    where = f"failed at {STAGES[s['failed_stage'] - 1]}" if s["failed_stage"] else s["outcome"]
    lines = [f"session {s['session']}", f"{state} · attempt {s['attempt']} · {el // 3600}h{el % 3600 // 60:02d}m",
             f"{_marks(s['reached'], s['failed_stage'])} {where}"]
    if s["unreachable_since"]:
        gone = int(((time.time() if now is None else now) - s["unreachable_since"]) // 60)
        lines.append(f"unreachable since {time.strftime('%H:%M', time.localtime(s['unreachable_since']))} ({gone}m)")
    if s["error"]:
        lines.append(f"error: {s['error']}")
    if s["root_cause"]:
        lines.append(s["root_cause"])
    lines.append(s["doing"])
    lines.append(f"{s['relaunches']} relaunches · {s['tokens']} tok · ${s['money']:g}")
    return [_fit(x) for x in lines]


def sessions_table(root: Path, last: int | None = None) -> list[dict]:
    """The sessions, newest first (ids begin with their start time); the `last` newest only."""
    dirs = sorted((p.parent for p in root.glob("*/journal.jsonl")), reverse=True) if root.is_dir() else []
    rows = []
    for d in dirs[:last]:
        s = status(d)
        rows.append({k: s[k] for k in ("running", "ended", "attempt", "reached", "elapsed_s")} | {"session": d.name})
    return rows


# the budgets' names in a few letters: a `sessions` line fits a 40-column phone screen
_SHORT_BUDGET = {"relaunches": "runs", "wall_clock": "time", "agent_steps": "steps"}


def session_line(r: dict) -> str:
    """One session in at most 40 characters: id, stages passed, attempts, state."""
    ended = r["ended"] or ""
    if ended.startswith("budget:"):
        ended = "over " + _SHORT_BUDGET.get(ended[7:], ended[7:])
    state = "running" if r["running"] else (ended or "not running")
    return _fit(f"{r['session']} {r['reached']}/{len(STAGES)} #{r['attempt']:<2} {state}")
