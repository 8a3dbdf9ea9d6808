"""The Model protocol and OpenAIModel, which talks to any OpenAI-compatible chat endpoint
(vLLM, DeepSeek, Qwen, Ollama, OpenAI) through the official `openai` client.

The client's own retries are off: this module retries itself, so each retry is counted in
`Reply.retries`, logged, and waited through an injectable `sleep` (a virtual clock in tests
and replay). Backoff is deterministic (1, 2, 4 … 60 s, no jitter): one harness talks to one
endpoint, so there is no herd to spread, and a replay must wait exactly as the run did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import openai

from ..errors import ContextOverflow, ModelError, ToolsRefused
from ..redact import redact

log = logging.getLogger(__name__)

BACKOFF_CAP = 60.0       # seconds; the longest wait our own backoff picks
RETRY_AFTER_CAP = 600.0  # seconds; a longer Retry-After is waited only this long, then retried
RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx
# What endpoints answer when they cannot take tools at all (vLLM without a tool parser, Ollama
# for a model without tool support, servers whose template has no tools); matched lower-cased.
TOOL_REFUSALS = ("tool choice requires --enable-auto-tool-choice", "--tool-call-parser", "does not support tools",
                 "tools are not supported", "tool calling is not supported", "tool_choice is not supported",
                 "unsupported parameter: 'tools'", "unrecognized request argument supplied: tools",
                 "function calling is not supported")
MAX_ADAPT = 3  # changes of request shape within one call: an endpoint contradicting itself is refused
OVERFLOWS = ("maximum context length", "context_length_exceeded", "context length is", "prompt is too long",
             "exceeds the model's context", "too many tokens in the prompt", "input is too long")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict
    error: str | None = None  # the arguments were not a JSON object: text for the model


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Reply:
    content: str | None      # assistant text
    tool_calls: list[ToolCall]
    usage: Usage
    cost: float              # money for this call (prices per million tokens)
    message: dict            # the assistant message in OpenAI chat format, to append to the conversation
    retries: int = 0         # how many retried attempts this call needed
    adapted: tuple[str, ...] = ()  # what this call learned about the endpoint (`OpenAIModel._adapt`)


class Model(Protocol):
    name: str

    async def complete(self, messages: list[dict], tools: list[dict]) -> Reply: ...

    def projected(self, messages: list[dict]) -> tuple[int, float]: ...


# -- pure helpers, shared with ScriptedModel -------------------------------------------

def estimate_tokens(messages: list[dict]) -> int:
    """ceil(chars / 4) of the messages as compact JSON: rough, and on the high side, which is
    the safe side for a budget check."""
    return math.ceil(len(json.dumps(messages, ensure_ascii=False, separators=(",", ":"))) / 4)


def cost(usage: Usage, price_in: float, price_out: float) -> float:
    """Money for `usage` at prices per million prompt / completion tokens."""
    return usage.prompt_tokens * price_in / 1e6 + usage.completion_tokens * price_out / 1e6


def parse_arguments(raw: str | None) -> tuple[dict, str | None]:
    """A tool call's arguments string -> (arguments, error). A bad string is the model's
    mistake, so it becomes text for the model, never an exception."""
    if raw is None or not raw.strip():
        return {}, None  # some servers send "" for a call without arguments
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        shown = raw if len(raw) <= 200 else raw[:200] + "…"
        return {}, f"arguments are not valid JSON: {e.msg} at char {e.pos} in {shown!r}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, not {type(value).__name__}"
    return value, None


def assistant_message(content: str | None, calls: list[ToolCall], raw: list[str]) -> dict:
    """The assistant turn in chat format. Arguments that did not parse go back as "{}":
    some servers (vLLM's chat templates) reject a history holding invalid JSON, and the
    tool result already tells the model what was wrong."""
    if not calls:
        return {"role": "assistant", "content": content or ""}
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": c.id, "type": "function",
         "function": {"name": c.name, "arguments": "{}" if c.error else r}}
        for c, r in zip(calls, raw)]}


def backoff(retry: int) -> float:
    """Seconds before retry number `retry` (0-based) when the server gave no Retry-After."""
    return min(2.0 ** min(retry, 30), BACKOFF_CAP)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's requested delay in seconds: `retry-after-ms`, `Retry-After` in seconds or
    as an HTTP date (measured from the response's own `Date`, so a skewed clock here does not
    matter), clamped to [0, RETRY_AFTER_CAP]; None when absent or unreadable."""
    h = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            delay = float(h[name]) / scale
        except (KeyError, ValueError):
            continue
        if math.isfinite(delay):
            return min(max(delay, 0.0), RETRY_AFTER_CAP)
    when = _http_date(h.get("retry-after"))
    if when is None:
        return None
    now = _http_date(h.get("date"))
    return min(max(when - (time.time() if now is None else now), 0.0), RETRY_AFTER_CAP)


def _http_date(value: str | None) -> float | None:
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() if value else None
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


# -- the OpenAI-compatible client ------------------------------------------------------

class OpenAIModel:
    """A Model behind an OpenAI-compatible `/chat/completions` endpoint. `probes`: the session
    asks it once, with one tool, whether it takes tools (harness/agent/protocol.py)."""

    probes = True

    def __init__(self, base_url: str, model: str, api_key: str, *, temperature: float = 0.0,
                 price_in: float = 0.0, price_out: float = 0.0, max_tokens: int = 4096,
                 timeout: float = 120.0, max_retries: int = 6, sleep=asyncio.sleep):
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise ModelError(f"model.base_url {redact(base_url)!r} is not an http(s) URL: "
                             "give the endpoint's full URL, e.g. http://127.0.0.1:8000/v1")
        self.name, self.base_url = model, base_url
        self.temperature, self.max_tokens = temperature, max_tokens
        self.price_in, self.price_out = price_in, price_out
        self.timeout, self.max_retries, self._sleep = timeout, max_retries, sleep
        # The client refuses an empty key; keyless local servers (vLLM, Ollama) accept any.
        self._api_key = api_key or "EMPTY"
        self._client: openai.AsyncOpenAI | None = None  # made on first use: no I/O before
        # Learned from the endpoint's own refusals, once each (not from model-name lists):
        self.token_param = "max_tokens"  # "max_completion_tokens" where max_tokens is refused (o-series, GPT-5)
        self.reasoning = True  # reasoning_content goes back with each assistant turn (DeepSeek thinking needs it)
        self.adapted: list[str] = []  # what was learned, in order (the session journals it)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIModel({self.base_url!r}, {self.name!r})"

    def projected(self, messages: list[dict]) -> tuple[int, float]:
        prompt = estimate_tokens(messages)
        return prompt + self.max_tokens, cost(Usage(prompt, self.max_tokens), self.price_in, self.price_out)

    async def complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        retries, learned = 0, len(self.adapted)
        while True:
            response, last, delay = await self._attempt(messages, tools)
            if response is not None:
                return dataclasses.replace(self._reply(response, retries), adapted=tuple(self.adapted[learned:]))
            if last is None and len(self.adapted) - learned <= MAX_ADAPT:  # asked for another way (`_adapt`):
                continue                                                   # ask again at once, a few times at most
            if last is None:
                raise ModelError(self._scrub(f"model endpoint {self.base_url} keeps refusing the request: "
                                             f"{'; '.join(self.adapted[learned:])}"))
            if retries >= self.max_retries:
                raise ModelError(self._scrub(
                    f"model endpoint {self.base_url} still failing after {retries} retries (last: {last}): "
                    "check that it is up and serves model " + repr(self.name)))
            delay = backoff(retries) if delay is None else delay
            retries += 1
            log.info("%s", self._scrub(f"model endpoint {self.base_url}: {last}; "
                                       f"retry {retries}/{self.max_retries} in {delay:g}s"))
            await self._sleep(delay)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _attempt(self, messages, tools):
        """One request -> (response, None, None), or (None, what failed, Retry-After or None)
        when it may be retried. Errors a retry cannot fix raise ModelError at once."""
        if not self.reasoning:
            messages = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]
        kwargs = {"model": self.name, "messages": messages,
                  "temperature": self.temperature, self.token_param: self.max_tokens}
        if tools:  # some servers reject an empty tools list
            kwargs.update(tools=tools, tool_choice="auto")
        try:
            return await self._openai().chat.completions.create(**kwargs), None, None
        except openai.APIStatusError as e:
            if not _retryable(e.status_code):
                if self._adapt(_detail(e)):
                    return None, None, None
                text, low = self._scrub(self._refusal(e)), _detail(e).lower()
                kind = ToolsRefused if _refuses_tools(low) else \
                    ContextOverflow if any(o in low for o in OVERFLOWS) else ModelError
                raise kind(text) from None
            return None, f"status {e.status_code}", retry_after(e.response.headers)
        except openai.APITimeoutError:
            return None, f"no answer within {self.timeout:g}s", None
        except openai.APIConnectionError as e:
            return None, f"connection failed: {e.__cause__ or e.message}", None
        except openai.OpenAIError as e:  # e.g. a 200 whose body is not a chat completion
            raise ModelError(self._scrub(f"model endpoint {self.base_url} gave an unusable answer: "
                                         f"{_one_line(str(e))}")) from None

    def _adapt(self, detail: str) -> bool:
        """Change how requests are made when a refusal says how the endpoint wants them; True if
        something changed (each at most once, so a refusal that stays is raised)."""
        low = detail.lower()
        if self.token_param == "max_tokens" and "max_completion_tokens" in low:
            self.token_param = "max_completion_tokens"
            self.adapted.append("max_completion_tokens instead of max_tokens (the endpoint refused max_tokens)")
            return True
        if "reasoning_content" in low:
            wanted = "passed back" in low or "missing" in low
            if wanted != self.reasoning:
                self.reasoning = wanted
                self.adapted.append("reasoning_content sent back with each assistant turn" if wanted else
                                    "reasoning_content left out of the conversation (the endpoint refused it)")
                return True
        return False

    def client(self) -> openai.AsyncOpenAI:
        """The client of this endpoint (for other calls than chat, such as `harness doctor`'s list)."""
        return self._openai()

    def _openai(self) -> openai.AsyncOpenAI:
        if self._client is None:
            # A proxy from the environment (http_proxy, common on intranet hosts) would capture
            # even a loopback endpoint such as the demo's scripted server.
            local = urlsplit(self.base_url).hostname in ("127.0.0.1", "localhost", "::1")
            http = openai.DefaultAsyncHttpxClient(trust_env=False) if local else None
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key,
                                              max_retries=0, timeout=self.timeout, http_client=http)
        return self._client

    def _refusal(self, e: openai.APIStatusError) -> str:
        url, status = self.base_url, e.status_code
        if status == 401:
            return f"model endpoint {url} refused the API key (401): set the env var named in model.api_key_env"
        if status == 403:
            return f"model endpoint {url} denied access (403): check that the key may use model {self.name!r}"
        if status == 404:
            return (f"model endpoint {url} has no model {self.name!r} or no chat completions API (404): "
                    "check model.base_url and model.name")
        return f"model endpoint {url} rejected the request ({status}): {_one_line(_detail(e))}"

    def _reply(self, response, retries: int) -> Reply:
        if not response.choices:
            raise ModelError(self._scrub(f"model endpoint {self.base_url} answered with no choices"))
        msg = response.choices[0].message
        calls, raw = [], []
        for n, tc in enumerate(msg.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:
                continue  # a custom (non-function) tool call: we offer none
            args, error = parse_arguments(fn.arguments)
            calls.append(ToolCall(getattr(tc, "id", None) or f"call_{n}", fn.name, args, error))
            raw.append(fn.arguments or "{}")
        u = response.usage
        usage = Usage(getattr(u, "prompt_tokens", 0) or 0, getattr(u, "completion_tokens", 0) or 0)
        message = assistant_message(msg.content, calls, raw)
        if reasoning := (getattr(msg, "model_extra", None) or {}).get("reasoning_content"):
            message["reasoning_content"] = reasoning  # thinking models (DeepSeek, Qwen) want it back
        return Reply(content=msg.content, tool_calls=calls, usage=usage,
                     cost=cost(usage, self.price_in, self.price_out), message=message, retries=retries)

    def _scrub(self, text: str) -> str:
        """No key in any message: servers echo keys in errors, URLs may hold user:pass@."""
        if len(self._api_key) >= 4:
            text = text.replace(self._api_key, "<redacted>")
        return redact(text)


def _detail(e: openai.APIStatusError) -> str:
    """The server's own words for a refusal (the client unwraps an OpenAI `error` object; Ollama
    and others send a bare string)."""
    body = e.body
    if isinstance(body, dict):
        detail = body.get("message") or body.get("error") or body.get("detail")
        if isinstance(detail, dict):
            detail = detail.get("message")
        if detail:
            return str(detail)
    return str(body) if isinstance(body, str) and body else e.message


def _refuses_tools(detail: str) -> bool:
    low = detail.lower()
    return any(r in low for r in TOOL_REFUSALS)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
