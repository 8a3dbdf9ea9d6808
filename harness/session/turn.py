"""One agent turn: a fresh conversation per attempt, opened with the goal, the verdict and its
digest, the playbook's hint for the matched signature and a compact history of the earlier
attempts; it ends when the model calls relaunch or give_up (or runs out of steps).

Context stays bounded: nothing of an earlier conversation is carried over but the history
lines; every tool output has been trimmed and redacted by the tools before it gets here.
"""

from __future__ import annotations

import json

from ..agent.protocol import TEXT, TEXT_RULES, TOOLS, as_result, probe, text_action, text_tool_calls
from ..agent.tools import TOOL_SPECS, ToolResult, Tools
from ..analyze.verdict import ASSUMED
from ..chain import STAGES
from ..errors import ContextOverflow, ToolsRefused
from ..redact import redact
from .progress import regression
from .state import State

_INTRO = """You are the on-call engineer of an RL post-training run (rollout engine, agent workers, \
reward, trainer) that must get through its whole chain: {chain}.
The harness launched it, followed its logs and stopped it; you fix what broke. Work in the \
workdir {workdir} on host {host} with """
_RULES = """Make the smallest change that fixes the root cause; do not \
disable checks to make errors disappear. The harness waits for the run and tells you the result."""
SYSTEM = _INTRO + """the tools: `bash` (read, search, run short checks; never \
start the training run yourself and never wait for it), `edit` (exact text replacement in one \
file), then `relaunch` with a one-line summary of what you changed, or `give_up` with the reason \
if it cannot be fixed from here. """ + _RULES
SYSTEM_TEXT = _INTRO + """shell commands (read, search, run short checks; never start the training \
run yourself and never wait for it). """ + _RULES + TEXT_RULES


class GaveUp(Exception):
    """The model called give_up: the session ends as gave_up."""


class NoChange(Exception):
    """The model asked twice in one turn to relaunch with the workdir unchanged: stuck."""


UNCHANGED = ("not relaunched: nothing in the workdir differs from what attempt {n} ran with (did your edits "
             "apply?), so the run would fail the same way. Make the change, or call give_up.")


def opening(st: State, verdict: dict, digest: str, attempt: int) -> str:
    rc = verdict.get("root") or {}
    where = f"failed at {STAGES[verdict['failed_stage'] - 1]}" if verdict.get("failed_stage") else "did not pass"
    how = "; stage assumed: nothing in the log places it" if verdict.get("stage_basis") == ASSUMED else ""
    # the first line names this attempt's root cause (the history below names earlier ones)
    first = f"Attempt {attempt} {where} ({verdict['outcome']}{how}). Root cause: {rc.get('text') or 'not identified'}"
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


async def protocol(ses, attempt: int) -> str:
    """How the agent acts with this session's model: `model.actions`, or for `auto` one probe
    with one tool — a refusal of tools, or no tool call back, means text; a native call, or one
    left as text in the content (read from there), means tools. Decided once per session
    (journaled: a resumed session keeps it)."""
    if ses.state.protocol:
        return ses.state.protocol
    actions = ses.spec.model.actions if ses.spec.model is not None else "auto"
    if actions != "auto" or not getattr(ses.model, "probes", False):
        mode, why = (actions, "model.actions") if actions != "auto" else (TOOLS, f"{ses.model.name} takes tools")
    else:
        t0 = ses.clock()
        mode, why, reply = await probe(ses.model)
        if reply is not None:
            _count(ses, attempt, 0, reply, t0)
    ses.emit("protocol", attempt=attempt, mode=mode, reason=redact(why)[:300])
    return mode


def _count(ses, attempt: int, step: int, reply, t0: float) -> None:
    ses.emit("model", attempt=attempt, step=step, prompt_tokens=reply.usage.prompt_tokens,
             completion_tokens=reply.usage.completion_tokens, cost=reply.cost,
             seconds=ses.clock() - t0, retries=reply.retries, content=redact(reply.content or "")[:2000])
    for what in reply.adapted:
        ses.note(f"the model endpoint wants {what}")


async def agent_turn(ses, attempt: int, verdict: dict, digest: str) -> str:
    """Run the conversation; returns the relaunch summary. Raises GaveUp, or BudgetOver
    (from `ses.check_model`) before a call that would not fit."""
    st, spec = ses.state, ses.spec
    mode = await protocol(ses, attempt)
    system = (SYSTEM_TEXT if mode == TEXT else SYSTEM).format(chain=" -> ".join(STAGES), workdir=spec.workdir,
                                                              host=spec.host)
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": opening(st, verdict, digest, attempt)}]
    tools = Tools(ses.transport, ses.policy, timeout=ses.tool_timeout, once=ses.ops)
    warned = False  # told once already that a relaunch would change nothing
    results: list[int] = []  # where tool outputs sit in `messages`
    keep = KEEP_OUTPUTS
    same, last = 0, None  # the same action with the same result, in a row
    for step in range(1, spec.budgets.agent_steps_per_attempt + 1):
        sent = masked(messages, results, keep)
        ses.check_model(sent)
        t0 = ses.clock()
        ses.activity(f"asking {ses.model.name} (step {step})")
        try:
            reply = await ses.model.complete(sent, [] if mode == TEXT else TOOL_SPECS)
        except ContextOverflow:
            if keep == 0:
                raise
            keep = 0  # every older output to one line, then ask again (once)
            ses.note("the conversation outgrew the model's context: every earlier tool output is now one line")
            continue
        except ToolsRefused as e:  # it took tools at the probe, and no longer does
            mode = TEXT
            ses.emit("protocol", attempt=attempt, mode=mode, reason=redact(f"the endpoint refuses tools ({e})")[:300])
            messages[0]["content"] = SYSTEM_TEXT.format(chain=" -> ".join(STAGES), workdir=spec.workdir, host=spec.host)
            continue
        _count(ses, attempt, step, reply, t0)
        calls, problem = _actions(mode, reply)
        messages.append(reply.message if reply.tool_calls else _plain(reply))
        if not calls:
            messages.append({"role": "user", "content": problem})
            continue
        for call in calls:
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
            this = (call.name, json.dumps(args, sort_keys=True), res.output)
            same, last = (same + 1 if this == last else 1), this
            if same >= REPEATS:
                raise NoChange(f"the agent made the same {call.name} call {REPEATS} times in a row with the same "
                               f"result ({_short(args, 80)})")
            results.append(len(messages))
            messages.append(as_result(call, res.output))
            if res.end == "relaunch":
                return res.summary or "relaunch"
            if res.end == "give_up":
                raise GaveUp(res.summary or "the agent gave up")
    if not await ses.ledger.changed_since(attempt):
        raise NoChange(f"the agent used its {spec.budgets.agent_steps_per_attempt} steps on attempt {attempt} "
                       "without changing anything")
    ses.note(f"the agent used its {spec.budgets.agent_steps_per_attempt} steps for this attempt; relaunching")
    return "agent step limit for the attempt reached"


KEEP_OUTPUTS = 6  # tool outputs an agent sees in full: the latest ones; older ones are one line each
REPEATS = 3  # the same call with the same result this many times in a row: the agent is going round in circles


def masked(messages: list[dict], results: list[int], keep: int) -> list[dict]:
    """The conversation as sent: tool outputs before the last `keep` cut to one line (what it
    began with, how many lines were hidden), so a 40-step attempt stays within a model's context."""
    old = set(results[:-keep] if keep else results)
    return [_one_line(m) if i in old else m for i, m in enumerate(messages)]


def _one_line(m: dict) -> dict:
    text = m["content"]
    head, _, rest = text.partition("\n")
    if m["role"] == "user":  # a text-protocol result: its first line names the command
        first = rest.partition("\n")[0]
        head, rest = f"{head} {first}", rest.partition("\n")[2]
    return {**m, "content": f"{head[:200]} [{rest.count(chr(10)) + bool(rest)} more lines hidden to save context]"}


def _actions(mode: str, reply) -> tuple[list, str]:
    """The tool calls of a reply, or what to tell the model when it has none."""
    if mode == TOOLS:
        calls = reply.tool_calls or text_tool_calls(reply.content)
        return calls, "" if calls else "Use a tool: bash, edit, relaunch or give_up."
    if reply.tool_calls:  # a model that calls tools anyway, unasked: take them
        return reply.tool_calls, ""
    call, problem = text_action(reply.content)
    return ([call] if call else []), problem or ""


def _plain(reply) -> dict:
    """The assistant turn as plain text (its tool calls, if any, were read from the text)."""
    msg = {"role": "assistant", "content": reply.content or ""}
    if "reasoning_content" in reply.message:
        msg["reasoning_content"] = reply.message["reasoning_content"]
    return msg


def _short(args: dict, n: int = 120) -> str:
    text = redact(json.dumps(args, ensure_ascii=False))
    return text if len(text) <= n else text[: n - 1] + "…"
