"""A deterministic model that answers from a script, and a real OpenAI-compatible HTTP server
in front of it, so tests, the demo and replay run the real `openai` client and HTTP path.

A script is a list of rules (YAML file or Python list):

    - when: 'speculative_config'     # regex searched in the conversation's FIRST user message
      replies:                       # one per model call in that conversation, in order
        - {content: 'Looking at the server.', calls: [{tool: bash, args: {command: 'grep -n x f.py'}}]}
        - {calls: [{tool: relaunch, args: {summary: 'guard speculative_config'}}]}

The model keeps no state: the rule is the first whose `when` matches the first user message,
and the reply is the one at index (assistant messages already in the conversation). So a
session resumed from its journal, or replayed, gets the same answers. Past the last reply, or
with no rule matching, it calls `give_up`, so a session always ends and never hangs.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from ..errors import PlaybookError
from ..patterns import valid_regex
from ..yamlfile import Loader, node_line
from . import quirks
from .model import Reply, ToolCall, Usage, assistant_message, cost, estimate_tokens, parse_arguments


class ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict = {}
    raw: str | None = None  # the arguments string sent verbatim instead of `args` (to script broken JSON)


class ScriptReply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str | None = None
    calls: list[ScriptCall] = []

    @model_validator(mode="after")
    def _says_something(self):
        if self.content is None and not self.calls:
            raise ValueError("a reply needs `content` or `calls`")
        return self


class ScriptRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    when: str
    replies: list[ScriptReply] = Field(min_length=1)

    @field_validator("when")
    @classmethod
    def _regex(cls, v: str) -> str:
        return valid_regex(v)


_RULES = TypeAdapter(list[ScriptRule])


class ScriptedModel:
    """A Model answering from a script; prices are per million tokens, 0 unless given. It
    takes tools (no probe); behind a ScriptedServer with a quirk, the OpenAIModel in front of it
    is what the session probes."""

    probes = False

    def __init__(self, rules: list, name: str = "scripted", *, price_in: float = 0.0,
                 price_out: float = 0.0, source: str = "(script)"):
        self.name, self.price_in, self.price_out = name, price_in, price_out
        try:
            self.rules = _RULES.validate_python(rules)
        except ValidationError as e:
            raise _error(source, e, None) from None
        self._when = [re.compile(r.when) for r in self.rules]

    @classmethod
    def from_file(cls, path: str | Path, name: str = "scripted", **prices: float) -> ScriptedModel:
        """Load a YAML script; any problem raises PlaybookError naming the file, line and field."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = yaml.load(text, Loader=Loader)
        except (OSError, UnicodeDecodeError) as e:
            raise PlaybookError(str(path), None, "", f"cannot read the model script: {e}") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise PlaybookError(str(path), mark.line + 1 if mark else None, "",
                                f"not valid YAML: {getattr(e, 'problem', e)}") from None
        if not isinstance(data, list):
            raise PlaybookError(str(path), 1, "", "a model script is a YAML list of rules (- when: …, replies: […])")
        try:
            rules = _RULES.validate_python(data)
        except ValidationError as e:
            raise _error(str(path), e, yaml.compose(text, Loader=Loader)) from None
        return cls(rules, name, source=str(path), **prices)

    async def complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        return self.reply_for(messages)

    def projected(self, messages: list[dict]) -> tuple[int, float]:
        """Exact: the usage and cost of the reply the script will give."""
        reply = self.reply_for(messages)
        return reply.usage.total, reply.cost

    def reply_for(self, messages: list[dict]) -> Reply:
        index, content, calls = self.turn(messages)
        parsed = [ToolCall(f"call_{index}_{n}", tool, *parse_arguments(raw)) for n, (tool, raw) in enumerate(calls)]
        message = assistant_message(content, parsed, [raw for _, raw in calls])
        usage = Usage(estimate_tokens(messages), estimate_tokens([message]))
        return Reply(content, parsed, usage, cost(usage, self.price_in, self.price_out), message)

    def turn(self, messages: list[dict]) -> tuple[int, str | None, list[tuple[str, str]]]:
        """(reply index, content, [(tool, arguments string as sent)]) the script gives here."""
        index = sum(1 for m in messages if m.get("role") == "assistant")
        first_user = _first_user_text(messages)
        n = next((i for i, rx in enumerate(self._when) if rx.search(first_user)), None)
        if n is None:
            return index, *_give_up("no rule of the script matches the first user message")
        rule = self.rules[n]
        if index >= len(rule.replies):
            return index, *_give_up(f"the script has no answer: rule {n + 1} (when {rule.when!r}) has "
                                    f"{len(rule.replies)} replies and this is call {index + 1}")
        reply = rule.replies[index]
        return index, reply.content, [(c.tool, json.dumps(c.args) if c.raw is None else c.raw) for c in reply.calls]


def _give_up(reason: str) -> tuple[str, list[tuple[str, str]]]:
    return "The script has no answer here.", [("give_up", json.dumps({"reason": f"scripted model: {reason}"}))]


def _first_user_text(messages: list[dict]) -> str:
    content = next((m.get("content") for m in messages if m.get("role") == "user"), None) or ""
    if isinstance(content, list):  # content parts: [{"type": "text", "text": …}, …]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _error(source: str, e: ValidationError, node) -> PlaybookError:
    err = e.errors()[0]
    loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith(("function-", "literal["))))
    line = node_line(node, loc) if node is not None else None
    return PlaybookError(source, line, ".".join(map(str, loc)) or "(top)", err["msg"].removeprefix("Value error, "))


# -- the HTTP server --------------------------------------------------------------------

class ScriptedServer:
    """An OpenAI-compatible server on 127.0.0.1 answering from a ScriptedModel.

    `fail`: the first len(fail) chat requests get these statuses instead (a (status, seconds)
    tuple adds a Retry-After header), for retry tests. `quirk`: behave like one real endpoint
    (harness/agent/quirks.py). `requests` holds every JSON body received; the Authorization
    header is checked for presence and never kept."""

    def __init__(self, model: ScriptedModel, *, fail: list[int | tuple[int, float]] = (), quirk: str | None = None):
        if quirk is not None and quirk not in quirks.QUIRKS:
            raise ValueError(f"unknown quirk {quirk!r}: one of {', '.join(quirks.QUIRKS)}")
        self.model, self.fail, self.quirk = model, list(fail), quirk
        self.requests: list[dict] = []
        self._answered = 0  # chat requests past the auth check, to index `fail`
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def start(self) -> ScriptedServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner, self._port = self, self._httpd.server_port
        # a short poll: close() waits up to one poll interval for the serving loop to notice
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="scripted-model",
                                        daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def answer(self, method: str, path: str, authorization: str, body: bytes) -> tuple[int, dict, dict]:
        """(status, extra headers, JSON payload) for one request."""
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "/v1/models":
            return 200, {}, {"object": "list", "data": [
                {"id": self.model.name, "object": "model", "created": 0, "owned_by": "harness"}]}
        if method != "POST" or path != "/v1/chat/completions":
            return 404, {}, _error_body(f"no route {method} {path}", "invalid_request_error")
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list):
            return 400, {}, _error_body("the body must be JSON with a `messages` list", "invalid_request_error")
        with self._lock:
            self.requests.append(request)
            if not authorization.strip() or authorization.strip().lower() == "bearer":
                return 401, {}, _error_body("missing API key", "invalid_request_error", "invalid_api_key")
            n, self._answered = self._answered, self._answered + 1
        if n < len(self.fail):
            status, wait = self.fail[n] if isinstance(self.fail[n], tuple) else (self.fail[n], None)
            headers = {} if wait is None else {"Retry-After": f"{wait:g}"}
            kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
            return status, headers, _error_body(f"scripted failure {n + 1} ({status})", kind)
        if self.quirk and (refused := quirks.refusal(self.quirk, request, self.model.name)):
            return refused[0], {}, refused[1]
        return 200, {}, self._completion(n, messages)

    def _completion(self, n: int, messages: list[dict]) -> dict:
        reply = self.model.reply_for(messages)
        message = dict(reply.message)
        if reply.tool_calls:  # on the wire, the arguments exactly as scripted, even broken JSON
            message["tool_calls"] = [{"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": raw}}
                                     for tc, (_, raw) in zip(reply.tool_calls, self.model.turn(messages)[2])]
        if self.quirk:
            message = quirks.shape(self.quirk, message, [(c.name, c.arguments) for c in reply.tool_calls])
        return {"id": f"chatcmpl-scripted-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model.name,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": reply.usage.prompt_tokens,
                          "completion_tokens": reply.usage.completion_tokens,
                          "total_tokens": reply.usage.total}}


def _error_body(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects
    timeout = 60  # an idle keep-alive connection frees its thread
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def do_GET(self):
        self._serve(b"")

    def do_POST(self):
        self._serve(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _serve(self, body: bytes) -> None:
        status, headers, payload = self.server.owner.answer(
            self.command, self.path, self.headers.get("Authorization", ""), body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # quiet: tests and the demo own the terminal
        pass
