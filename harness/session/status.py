"""What a session is doing, from its journal and its lock: the status a phone shows (40 columns)."""

from __future__ import annotations

import time
from pathlib import Path

from ..chain import STAGES
from .detach import holder
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
    return {
        "session": st.session or directory.name, "running": pid is not None, "pid": pid,
        "ended": end["reason"] if end else None, "detail": end["detail"] if end else "",
        "attempt": last.n if last else 0, "elapsed_s": round(((st.last_t if end else now) or now) - (st.started or now)),
        "reached": last.reached if last else 0, "failed_stage": (v or {}).get("failed_stage"),
        "outcome": (v or {}).get("outcome", "running" if last else "starting"), "root_cause": root,
        "doing": _doing(events[-1]) if events else "starting",
        "relaunches": st.relaunches, "agent_steps": st.agent_steps, "tokens": st.tokens, "money": round(st.money, 4),
    }


def _marks(reached: int, failed: int | None) -> str:
    return "".join("✗" if i == failed else "✓" if i <= reached else "·" for i in range(1, len(STAGES) + 1))


def _fit(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def phone_lines(s: dict) -> list[str]:
    """The status in lines of at most 40 characters."""
    state = f"running (pid {s['pid']})" if s["running"] else (f"ended: {s['ended']}" if s["ended"] else "not running")
    el = s["elapsed_s"]
    where = f"failed at {STAGES[s['failed_stage'] - 1]}" if s["failed_stage"] else s["outcome"]
    lines = [f"session {s['session']}", f"{state} · attempt {s['attempt']} · {el // 3600}h{el % 3600 // 60:02d}m",
             f"{_marks(s['reached'], s['failed_stage'])} {where}"]
    if s["root_cause"]:
        lines.append(s["root_cause"])
    lines.append(s["doing"])
    lines.append(f"{s['relaunches']} relaunches · {s['tokens']} tok · ${s['money']:g}")
    return [_fit(x) for x in lines]


def sessions_table(root: Path) -> list[dict]:
    rows = []
    for d in sorted(p.parent for p in root.glob("*/journal.jsonl")) if root.is_dir() else []:
        s = status(d)
        rows.append({k: s[k] for k in ("session", "running", "ended", "attempt", "reached", "elapsed_s")})
    return rows
