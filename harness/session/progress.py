"""Pure judgements over verdicts and the folded state: failure fingerprints, budgets, stuck.

A fingerprint names a failure independently of the run that showed it (pids, ports, paths,
numbers and addresses are masked), so the same failure on two attempts has the same one.
"""

from __future__ import annotations

import hashlib
import re

from ..chain import STAGES
from .state import State

# Order matters: paths whole (they hold numbers), then numbers — decimals and exponents whole, so
# 0.000876364 and 0.0013052 mask alike (a hex mask first took the first for an address) —, then
# hex strings, which must hold a letter once the numbers are gone.
_MASKS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"(?:/[\w.+-]+)+/?"), "<path>"),
    (re.compile(r"\b\d+(?:\.\d+)*(?:[eE][-+]?\d+)?\b"), "<n>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hex>"),
]


def normalise(text: str) -> str:
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return " ".join(text.split())


def fingerprint(verdict: dict) -> str:
    rc = verdict.get("root_cause")
    if rc:
        key = f"{rc.get('signature') or rc.get('category')}|{normalise(rc['text'])}|{verdict['failed_stage']}"
    else:
        key = f"{verdict['outcome']}|{verdict['last_stage_passed']}"
    return hashlib.sha1(key.encode()).hexdigest()[:10]


def stuck(st: State, k: int) -> bool:
    """The same failure K attempts in a row."""
    fps = st.fingerprints
    return k > 0 and len(fps) >= k and len(set(fps[-k:])) == 1


def regression(st: State) -> str | None:
    """A note for the agent when the last attempt got less far than the best before it."""
    done = [a for a in st.attempts if a.verdict]
    if len(done) < 2:
        return None
    best = max(a.reached for a in done[:-1])
    if done[-1].reached < best:
        return (f"attempt {done[-1].n} got less far (last stage passed {done[-1].reached}) than an earlier "
                f"attempt ({best}): the last change may have broken something that worked")
    return None


def mean_run_seconds(st: State) -> float:
    runs = [a.verdict["run_seconds"] for a in st.attempts if a.verdict]
    return sum(runs) / len(runs) if runs else 0.0


def relaunch_blocked(st: State, budgets, devices: int, now: float) -> str | None:
    """The budget a relaunch would overrun (projected with the mean run time so far), or None."""
    if st.used("relaunches") + 1 > budgets.relaunches and st.attempts:
        return "relaunches"
    run = mean_run_seconds(st)
    if st.started is not None and now + run - st.started > budgets.wall_clock:
        return "wall_clock"
    if budgets.accelerator_hours is not None and \
            (st.used("accel_seconds") + devices * run) / 3600 > budgets.accelerator_hours:
        return "accelerator_hours"
    return None


def model_blocked(st: State, budgets, tokens: int, money: float, now: float) -> str | None:
    """The budget the next model call (projected tokens and money) would overrun, or None."""
    if st.used("agent_steps") >= budgets.agent_steps:
        return "agent_steps"
    if st.used("tokens") + tokens > budgets.tokens:
        return "tokens"
    if st.used("money") + money > budgets.money:
        return "money"
    if st.started is not None and now - st.started > budgets.wall_clock:
        return "wall_clock"
    return None


def running_over(st: State, budgets, devices: int, now: float, run_started: float) -> str | None:
    """A budget a run still going has used up (wall clock, accelerator-hours)."""
    if st.started is not None and now - st.started > budgets.wall_clock:
        return "wall_clock"
    if budgets.accelerator_hours is not None and \
            (st.used("accel_seconds") + devices * (now - run_started)) / 3600 > budgets.accelerator_hours:
        return "accelerator_hours"
    return None


def commit_message(session: str, n: int, before: dict | None, after: dict | None) -> str:
    """The ledger commit message of attempt n: where it started from and where it got."""
    def where(v):
        if v is None:
            return "first run"
        return v["outcome"] + (f" at {STAGES[v['failed_stage'] - 1]}" if v.get("failed_stage") else "")
    head = f"harness {session} attempt {n}: {where(before)} -> {where(after) if after else 'running'}"
    body = [f"before: {before['fingerprint']} {(before.get('root') or {}).get('text', '')[:200]}" if before else "before: first run"]
    if after:
        body.append(f"after: {after['fingerprint']} {(after.get('root') or {}).get('text', '')[:200]}")
    return head + "\n\n" + "\n".join(body) + "\n"
