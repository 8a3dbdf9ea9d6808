"""How the agent's actions travel between the model and the harness, chosen per endpoint.

`tools`: native tool calling (the `tools` request field), plus tool calls that a server with
the wrong parser leaves as text in the reply — `<tool_call>{…}</tool_call>` (Hermes, Qwen) or
`[TOOL_CALLS] [{…}]` (Mistral) — read back when they are well-formed.
`text`: any chat model. Each reply holds exactly one fenced ```bash block, run as the `bash`
tool; a block whose only line is `relaunch SUMMARY` or `give_up REASON` ends the turn. Files are
edited with shell commands (a heredoc, `python3 - <<'EOF'`, `sed`), which pass the same policy.

`auto` probes the endpoint once with one tool (`probe`; harness/session/turn.py journals the
choice, `harness doctor` shows it). Everything else here is pure: parsing and the probe's request.
"""

from __future__ import annotations

import json
import re

from ..errors import ToolsRefused
from .model import ToolCall

TOOLS, TEXT = "tools", "text"

TEXT_RULES = """
How to act: every reply of yours holds exactly ONE fenced block, ```bash … ```, with the shell \
commands to run in the workdir (you get their output back); explain before the block if you \
like. Edit files with shell commands: a here-document (cat > f <<'EOF' … EOF), `python3 - <<'EOF'` \
with a small script that replaces the exact old text, or `sed -i`. When the fix is made, reply \
with a block whose only line is `relaunch <one-line summary of what you changed>`; if it cannot \
be fixed from here, a block whose only line is `give_up <the reason>`."""

FORMAT = ("Your reply must hold exactly one ```bash block ({found}). Run one command block, or end with "
          "a block whose only line is `relaunch <summary>` or `give_up <reason>`.")

_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)(?:\n)?```", re.S)
_END = re.compile(r"\A(relaunch|give_up)(?:[ \t]+(.*))?\Z", re.S)


def text_action(content: str | None) -> tuple[ToolCall | None, str | None]:
    """The action of a text-protocol reply, or the format message to send back."""
    blocks = [b for b in _BLOCK.findall(content or "")]
    if len(blocks) != 1:
        return None, FORMAT.format(found=f"found {len(blocks)}" if blocks else "found none")
    body = blocks[0].strip()
    if not body:
        return None, FORMAT.format(found="it was empty")
    end = _END.match(body) if "\n" not in body else None  # relaunch / give_up: alone in its block
    if end:
        word, rest = end[1], (end[2] or "").strip()
        return ToolCall("text_0", word, {"summary": rest} if word == "relaunch" else {"reason": rest}), None
    return ToolCall("text_0", "bash", {"command": body}), None


_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(\[.*\])", re.S)


def text_tool_calls(content: str | None) -> list[ToolCall]:
    """Tool calls a server left as text in the reply's content, when every one is well-formed
    JSON with a name and object arguments; [] otherwise (then the reply has no calls)."""
    content = content or ""
    items: list = []
    for raw in _TAGGED.findall(content):
        try:
            items.append(json.loads(raw))
        except json.JSONDecodeError:
            return []
    if not items and (m := _MISTRAL.search(content)):
        try:
            items = json.loads(m[1])
        except json.JSONDecodeError:
            return []
    calls = []
    for n, item in enumerate(items if isinstance(items, list) else []):
        args = item.get("arguments", item.get("parameters")) if isinstance(item, dict) else None
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return []
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(args, dict)):
            return []
        calls.append(ToolCall(f"text_call_{n}", item["name"], args))
    return calls


# -- the probe ---------------------------------------------------------------------------

PING = {"type": "function", "function": {
    "name": "ping", "description": "Answers pong. Call it when asked to.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}
PROBE = [{"role": "user", "content": 'Call the tool `ping` with {"n": 1}. Reply with nothing else.'}]

async def probe(model) -> tuple[str, str, object]:
    """(mode, why, the probe's reply or None) from one request offering one tool: an error that
    says the endpoint takes no tools, or no tool call back, means text; a native call, or one
    left as text in the content, means tools. Other errors (a refused key, a dead endpoint) raise."""
    try:
        reply = await model.complete(PROBE, [PING])
    except ToolsRefused as e:
        return TEXT, f"the endpoint refuses tools ({e})", None
    if reply.tool_calls:
        return TOOLS, "the probe's tool call came back as a tool call", reply
    if text_tool_calls(reply.content):
        return TOOLS, "tool calls come back as text in the reply (<tool_call> …); they are read from there", reply
    return TEXT, "the probe got no tool call back", reply


def as_result(call: ToolCall, output: str) -> dict:
    """The message that carries a tool's output back: a tool message for a native call, a user
    turn for an action read from text (it has no tool_call_id to answer)."""
    if not call.id.startswith("text_"):
        return {"role": "tool", "tool_call_id": call.id, "content": output}
    what = call.arguments.get("command") if call.name == "bash" else call.name
    head = f"Output of your `{what.splitlines()[0][:80]}`:" if what else "Output:"
    return {"role": "user", "content": f"{head}\n{output}"}
