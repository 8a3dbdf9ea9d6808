"""One agent turn: a fresh conversation per attempt, opened with the goal, the verdict and its
digest, the playbook's hint for the matched signature and a compact history of the earlier
attempts; it ends when the model calls relaunch or give_up (or runs out of steps).

Context stays bounded: nothing of an earlier conversation is carried over but the history
lines; every tool output has been trimmed and redacted by the tools before it gets here.
"""

from __future__ import annotations

import json

from ..agent.tools import TOOL_SPECS, ToolResult, Tools
from ..chain import STAGES
from ..redact import redact
from .progress import regression
from .state import State

SYSTEM = """You are the on-call engineer of an RL post-training run (rollout engine, agent workers, \
reward, trainer) that must get through its whole chain: {chain}.
The harness launched it, followed its logs and stopped it; you fix what broke. Work in the \
workdir {workdir} on host {host} with the tools: `bash` (read, search, run short checks; never \
start the training run yourself and never wait for it), `edit` (exact text replacement in one \
file), then `relaunch` with a one-line summary of what you changed, or `give_up` with the reason \
if it cannot be fixed from here. Make the smallest change that fixes the root cause; do not \
disable checks to make errors disappear. The harness waits for the run and tells you the result."""


class GaveUp(Exception):
    """The model called give_up: the session ends as gave_up."""


class NoChange(Exception):
    """The model asked twice in one turn to relaunch with the workdir unchanged: stuck."""


UNCHANGED = ("not relaunched: nothing in the workdir differs from what attempt {n} ran with (did your edits "
             "apply?), so the run would fail the same way. Make the change, or call give_up.")


def opening(st: State, verdict: dict, digest: str, attempt: int) -> str:
    rc = verdict.get("root") or {}
    where = f"failed at {STAGES[verdict['failed_stage'] - 1]}" if verdict.get("failed_stage") else "did not pass"
    # the first line names this attempt's root cause (the history below names earlier ones)
    first = f"Attempt {attempt} {where} ({verdict['outcome']}). Root cause: {rc.get('text') or 'not identified'}"
    parts = [first.replace("\n", " "), "", digest.strip()]
    if rc.get("hint"):
        parts += ["", f"Playbook hint for this failure: {rc['hint']}"]
    history = [_history_line(a) for a in st.attempts if a.verdict and a.n < attempt]
    if history:
        parts += ["", "Earlier attempts (what changed before it -> how far it got):", *history]
    if note := regression(st):
        parts += ["", f"Note: {note}."]
    parts += ["", "Find the root cause in the code or config, fix it, then call relaunch."]
    return redact("\n".join(parts))


def _history_line(a) -> str:
    v = a.verdict
    where = f"failed at {STAGES[v['failed_stage'] - 1]}" if v.get("failed_stage") else v["outcome"]
    root = (v.get("root") or {}).get("text", "")
    change = "; ".join(a.changes) or "(first run)"
    return f"- attempt {a.n}: {change} -> {where}, last stage passed {a.reached}" \
           f"{', ' + root[:160] if root else ''} [{v['fingerprint']}]"


async def agent_turn(ses, attempt: int, verdict: dict, digest: str) -> str:
    """Run the conversation; returns the relaunch summary. Raises GaveUp, or BudgetOver
    (from `ses.check_model`) before a call that would not fit."""
    st, spec = ses.state, ses.spec
    system = SYSTEM.format(chain=" -> ".join(STAGES), workdir=spec.workdir, host=spec.host)
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": opening(st, verdict, digest, attempt)}]
    tools = Tools(ses.transport, ses.policy, timeout=ses.tool_timeout, once=ses.ops)
    warned = False  # told once already that a relaunch would change nothing
    for step in range(1, spec.budgets.agent_steps_per_attempt + 1):
        ses.check_model(messages)
        t0 = ses.clock()
        ses.activity(f"asking {ses.model.name} (step {step})")
        reply = await ses.model.complete(messages, TOOL_SPECS)
        ses.emit("model", attempt=attempt, step=step, prompt_tokens=reply.usage.prompt_tokens,
                 completion_tokens=reply.usage.completion_tokens, cost=reply.cost,
                 seconds=ses.clock() - t0, retries=reply.retries, content=redact(reply.content or "")[:2000])
        messages.append(reply.message)
        if not reply.tool_calls:
            messages.append({"role": "user", "content": "Use a tool: bash, edit, relaunch or give_up."})
            continue
        for call in reply.tool_calls:
            args = call.arguments if call.error is None else {"_error": call.error}
            ses.check_step()
            ses.activity(f"{call.name} {_short(args)}")
            res = await tools.call_tool(call)  # invalid JSON arguments come back to the model as text
            if res.end == "relaunch" and not await ses.ledger.changed_since(attempt):
                if warned:
                    raise NoChange(f"the agent asked twice to relaunch attempt {attempt} without changing anything")
                warned, res = True, ToolResult(UNCHANGED.format(n=attempt))
            ses.emit("tool", attempt=attempt, step=step, name=call.name, arguments=_short(args, 400),
                     refused=res.refused, end=res.end, summary=res.summary, output=res.output[:2000])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": res.output})
            if res.end == "relaunch":
                return res.summary or "relaunch"
            if res.end == "give_up":
                raise GaveUp(res.summary or "the agent gave up")
    if not await ses.ledger.changed_since(attempt):
        raise NoChange(f"the agent used its {spec.budgets.agent_steps_per_attempt} steps on attempt {attempt} "
                       "without changing anything")
    ses.note(f"the agent used its {spec.budgets.agent_steps_per_attempt} steps for this attempt; relaunching")
    return "agent step limit for the attempt reached"


def _short(args: dict, n: int = 120) -> str:
    text = redact(json.dumps(args, ensure_ascii=False))
    return text if len(text) <= n else text[: n - 1] + "…"
