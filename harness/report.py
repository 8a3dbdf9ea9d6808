"""The session report, built from the journal alone (so it can be made during or after a
session, and from a replay): the headline, then one row per attempt — what it saw, what was
changed before it, how it ended."""

from __future__ import annotations

import time

from .chain import STAGES
from .session.state import fold


def _cell(text: str, n: int = 140) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown(events: list[dict]) -> str:
    st = fold(events)
    end = st.ended or {}
    took = (st.last_t or 0) - (st.started or 0)
    best = max((a.reached for a in st.attempts), default=0)
    head = "chain passed" if st.passed else f"chain not passed ({end.get('reason', 'running')}); furthest: " \
           f"{best}/{len(STAGES)} stages"
    lines = [f"# harness session {st.session}", "",
             f"**{head}** — {len(st.attempts)} attempt(s) in {took / 60:.1f} min on {st.host}:{st.workdir}", "",
             f"- ended: {end.get('reason', 'still running')}{' — ' + end['detail'] if end.get('detail') else ''}",
             f"- started: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(st.started or 0))}",
             f"- model: {st.model_calls} calls, {st.tokens} tokens, {st.money:.4f} money; "
             f"agent tool calls: {st.agent_steps}",
             f"- run time: {st.run_seconds:.0f} s; model time: {st.model_seconds:.0f} s", "",
             "| attempt | changed before it | reached | result | root cause |", "|---|---|---|---|---|"]
    for a in st.attempts:
        v = a.verdict or {}
        result = v.get("outcome", "running")
        if v.get("failed_stage"):
            result += f" at {STAGES[v['failed_stage'] - 1]}"
        root = (v.get("root") or {}).get("text", "")
        lines.append(f"| {a.n} | {_cell('; '.join(a.changes) or 'first run')} | {a.reached}/{len(STAGES)} | "
                     f"{result} | {_cell(root)} |")
    return "\n".join(lines) + "\n"
