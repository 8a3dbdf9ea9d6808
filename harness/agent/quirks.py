"""How real OpenAI-compatible endpoints differ, played by the ScriptedServer (`quirk=`), so the
agent's protocols are tested over real HTTP against each behaviour, with the demo's script:

    vllm-no-parser     vLLM started without --enable-auto-tool-choice: any request with `tools`
                       is refused (400); without tools it answers in text
    vllm-wrong-parser  tools accepted, but calls come back as <tool_call>{…}</tool_call> text in
                       `content` with `tool_calls` empty
    ollama-no-tools    Ollama for a model without tool support: 400 "<model> does not support tools"
    deepseek-thinking  replies carry `reasoning_content`; a tool-call turn sent back without it is
                       refused (400 "Missing `reasoning_content` field …")
    reasoning-refused  replies carry `reasoning_content`, and a request that sends it back is refused
    no-max-tokens      OpenAI o-series / GPT-5: `max_tokens` refused, `max_completion_tokens` wanted
    small-context      a model with a small context: a longer conversation gets vLLM's 400
                       "This model's maximum context length is …"

The refusal texts are the servers' own (vLLM's serving_chat check, Ollama's api error, DeepSeek's
thinking-mode guide, OpenAI's unsupported_parameter). A scripted reply becomes text the way a model
using the text protocol writes it: one ```bash block (edits as `python3 - <<'EOF'` scripts).
"""

from __future__ import annotations

import json

QUIRKS = ("vllm-no-parser", "vllm-wrong-parser", "ollama-no-tools", "deepseek-thinking", "reasoning-refused",
          "no-max-tokens", "small-context")
CONTEXT = 6000  # tokens (chars / 4) the `small-context` endpoint takes
TEXT_ONLY = ("vllm-no-parser", "ollama-no-tools")
THOUGHT = "Let me look at the verdict first."


def _openai_error(message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def refusal(quirk: str, request: dict, model_name: str) -> tuple[int, dict] | None:
    """(status, body) when this endpoint refuses the request as it is; None to answer it."""
    if quirk == "vllm-no-parser" and request.get("tools"):
        return 400, {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                     "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'}
    if quirk == "ollama-no-tools" and request.get("tools"):
        return 400, {"error": {"message": f"registry.ollama.ai/library/{model_name}:latest does not support tools",
                               "type": "api_error", "param": None, "code": None}}
    if quirk == "no-max-tokens" and "max_tokens" in request:
        return 400, _openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                  "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
    messages = request.get("messages") or []
    if quirk == "small-context" and (n := len(json.dumps(messages)) // 4) > CONTEXT:
        return 400, {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                     "message": f"This model's maximum context length is {CONTEXT} tokens. However, you requested "
                                f"{n} tokens in the messages, Please reduce the length of the messages."}
    if quirk == "deepseek-thinking":
        for i, m in enumerate(messages):
            if m.get("role") == "assistant" and m.get("tool_calls") and not m.get("reasoning_content"):
                return 400, _openai_error(f"Missing `reasoning_content` field in the assistant message at message "
                                          f"index {i}. For more information, please refer to "
                                          "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls")
    if quirk == "reasoning-refused" and any("reasoning_content" in m for m in messages):
        return 400, _openai_error("messages: Extra inputs are not permitted (reasoning_content)")
    return None


def shape(quirk: str, message: dict, calls: list[tuple[str, dict]]) -> dict:
    """The assistant message as this endpoint sends it, from the scripted one and its calls."""
    if quirk in TEXT_ONLY:
        return {"role": "assistant", "content": as_text(message.get("content"), calls)}
    if quirk == "vllm-wrong-parser" and calls:
        tagged = "".join(f"<tool_call>\n{json.dumps({'name': t, 'arguments': a})}\n</tool_call>" for t, a in calls)
        return {"role": "assistant", "content": ((message.get("content") or "") + "\n" + tagged).strip()}
    if quirk in ("deepseek-thinking", "reasoning-refused"):
        return {**message, "reasoning_content": THOUGHT}
    return message


def as_text(content: str | None, calls: list[tuple[str, dict]]) -> str:
    """A reply in the text protocol: the prose, then one ```bash block doing what the calls did
    (no calls: the prose alone)."""
    if not calls:
        return (content or "").strip()
    ends = [(t, a) for t, a in calls if t in ("relaunch", "give_up")]
    if ends and len(calls) > 1:
        raise ValueError("a scripted reply cannot both act and end the turn in the text protocol")
    if ends:
        tool, args = ends[0]
        body = f"{tool} {args.get('summary') if tool == 'relaunch' else args.get('reason', '')}".strip()
    else:
        body = "\n".join(_command(t, a) for t, a in calls)
    prose = (content or "").strip()
    return f"{prose}\n\n```bash\n{body}\n```" if prose else f"```bash\n{body}\n```"


def _command(tool: str, args: dict) -> str:
    if tool == "bash":
        return args.get("command", "")
    if tool == "edit":  # the exact replacement, as a model writes it in a shell
        return ("python3 - <<'EOF'\nfrom pathlib import Path\n"
                f"p = Path({args.get('path')!r}); t = p.read_text()\n"
                f"old, new = {args.get('old')!r}, {args.get('new')!r}\n"
                "assert t.count(old) == 1, 'the old text is not in the file exactly once'\n"
                "p.write_text(t.replace(old, new))\nEOF")
    raise ValueError(f"no text form for a {tool!r} call")
