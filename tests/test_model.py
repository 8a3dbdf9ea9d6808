"""The model layer against real HTTP: OpenAIModel (the real `openai` client) talking to
ScriptedServer on 127.0.0.1, and ScriptedModel on its own.

Retries never really wait: OpenAIModel takes its `sleep`, and the tests pass one that records
the delays asked for, so the assertions are about the delays, not about the clock.
"""

from __future__ import annotations

import email.utils
import json
import math
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.agent.model import OpenAIModel, ToolCall, Usage, retry_after
from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.errors import HarnessError, ModelError, PlaybookError

KEY = "sk-test-0123456789abcdefSECRET"
TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
RULES = [
    {"when": "speculative_config", "replies": [
        {"content": "Looking at the server.",
         "calls": [{"tool": "bash", "args": {"command": "grep -n speculative minichain/server.py"}}]},
        {"calls": [{"tool": "relaunch", "args": {"summary": "guard speculative_config"}}]},
    ]},
    {"when": "Prompt length", "replies": [{"calls": [{"tool": "bash", "raw": '{"command": "ls"'}]}]},
    {"when": "(?i)reward", "replies": [{"content": "no tool this time"}]},
]


def convo(text: str) -> list[dict]:
    return [{"role": "system", "content": "You fix RL runs."}, {"role": "user", "content": text}]


def chars4(obj) -> int:
    return math.ceil(len(json.dumps(obj, ensure_ascii=False, separators=(",", ":"))) / 4)



class Sleeps(list):
    """An injectable sleep recording the delays it was asked for, and not waiting."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def call(arun, url: str, messages: list[dict], **kw):
    """complete() on a fresh OpenAIModel, closed afterwards; returns (reply, recorded sleeps)."""
    sleeps = Sleeps()
    model = OpenAIModel(url, "coder", KEY, sleep=sleeps, **kw)

    async def go():
        try:
            return await model.complete(messages, TOOLS)
        finally:
            await model.aclose()
    return arun(go()), sleeps


def fails(arun, url: str, messages: list[dict], **kw) -> tuple[ModelError, Sleeps]:
    sleeps = Sleeps()
    model = OpenAIModel(url, "coder", KEY, sleep=sleeps, **kw)

    async def go():
        try:
            await model.complete(messages, TOOLS)
        finally:
            await model.aclose()
    with pytest.raises(ModelError) as e:
        arun(go())
    assert "\n" not in str(e.value) and KEY not in str(e.value)
    return e.value, sleeps


# -- OpenAIModel over real HTTP -----------------------------------------------------------

def test_tool_call_round_trip(arun):
    messages = convo("vLLM crashed: speculative_config is not supported")
    with ScriptedServer(ScriptedModel(RULES, name="scripted")) as server:
        reply, sleeps = call(arun, server.url, messages, price_in=2.0, price_out=10.0)
        assert reply.content == "Looking at the server."
        grep = {"command": "grep -n speculative minichain/server.py"}
        assert reply.tool_calls == [ToolCall("call_0_0", "bash", grep)]
        assert (reply.retries, sleeps) == (0, [])
        sent = server.requests[0]
        assert (sent["model"], sent["messages"]) == ("coder", messages)
        assert (sent["tools"], sent["tool_choice"]) == (TOOLS, "auto")
        prompt, completion = chars4(messages), chars4([reply.message])
        assert reply.usage == Usage(prompt, completion) and reply.usage.total == prompt + completion
        assert reply.cost == pytest.approx(prompt * 2.0 / 1e6 + completion * 10.0 / 1e6)

        # the message is appendable: the next call carries it and gets the script's second reply
        messages += [reply.message, {"role": "tool", "tool_call_id": "call_0_0", "content": "42: speculative_config"}]
        second, _ = call(arun, server.url, messages)
        assert server.requests[1]["messages"][2] == reply.message
        assert second.tool_calls == [ToolCall("call_1_0", "relaunch", {"summary": "guard speculative_config"})]
        assert second.content is None


def test_a_plain_answer_has_no_tool_calls(arun):
    with ScriptedServer(ScriptedModel(RULES)) as server:
        reply, _ = call(arun, server.url, convo("the REWARD is split per character"))
    assert (reply.content, reply.tool_calls) == ("no tool this time", [])
    assert reply.message == {"role": "assistant", "content": "no tool this time"}


def test_invalid_json_arguments_come_back_as_the_call_error(arun):
    with ScriptedServer(ScriptedModel(RULES)) as server:
        reply, _ = call(arun, server.url, convo("Prompt length exceeds the limit"))
    [tc] = reply.tool_calls
    assert (tc.name, tc.arguments) == ("bash", {})
    assert tc.error.startswith("arguments are not valid JSON") and '{"command": "ls"' in tc.error
    assert reply.message["tool_calls"][0]["function"]["arguments"] == "{}"  # the history stays valid JSON


def test_429_then_200_waits_what_retry_after_says(arun):
    with ScriptedServer(ScriptedModel(RULES), fail=[(429, 7)]) as server:
        reply, sleeps = call(arun, server.url, convo("speculative_config"))
        assert len(server.requests) == 2
    assert sleeps == [7.0] and reply.retries == 1
    assert reply.tool_calls[0].name == "bash"


def test_503_twice_then_200_backs_off_exponentially(arun):
    with ScriptedServer(ScriptedModel(RULES), fail=[503, 503]) as server:
        reply, sleeps = call(arun, server.url, convo("speculative_config"))
        assert len(server.requests) == 3
    assert sleeps == [1.0, 2.0] and reply.retries == 2


def test_backoff_is_capped_at_a_minute(arun):
    with ScriptedServer(ScriptedModel(RULES), fail=[502] * 8) as server:
        reply, sleeps = call(arun, server.url, convo("speculative_config"), max_retries=8)
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0] and reply.retries == 8


def test_401_fails_at_once_and_says_what_to_do(arun):
    with ScriptedServer(ScriptedModel(RULES), fail=[401]) as server:
        err, sleeps = fails(arun, server.url, convo("speculative_config"))
        assert len(server.requests) == 1 and sleeps == []
    assert isinstance(err, HarnessError)
    assert f"model endpoint {server.url} refused the API key (401)" in str(err)
    assert "model.api_key_env" in str(err)


@pytest.mark.parametrize("status, words", [(400, "rejected the request (400): scripted failure 1"),
                                           (403, "denied access (403)"),
                                           (404, "has no model 'coder'")])
def test_other_client_errors_fail_at_once(arun, status, words):
    with ScriptedServer(ScriptedModel(RULES), fail=[status]) as server:
        err, sleeps = fails(arun, server.url, convo("speculative_config"))
        assert len(server.requests) == 1 and sleeps == []
    assert words in str(err)


def test_retries_exhausted_names_the_endpoint_and_the_last_status(arun):
    with ScriptedServer(ScriptedModel(RULES), fail=[500, 429, 503]) as server:
        err, sleeps = fails(arun, server.url, convo("speculative_config"), max_retries=2)
        assert len(server.requests) == 3
    assert sleeps == [1.0, 2.0]
    assert f"model endpoint {server.url} still failing after 2 retries (last: status 503)" in str(err)


def test_connection_refused_is_retried_then_reported(arun):
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        err, sleeps = fails(arun, url, convo("x"), max_retries=1)
    assert sleeps == [1.0] and "connection failed" in str(err) and url in str(err)


def test_a_silent_endpoint_times_out_and_is_retried(arun):
    with socket.socket() as s:  # listening, so the kernel accepts; nobody ever answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        err, sleeps = fails(arun, url, convo("x"), max_retries=1, timeout=0.3)
    assert sleeps == [1.0] and "no answer within 0.3s" in str(err)


class EchoKey(BaseHTTPRequestHandler):
    """A careless endpoint that quotes the caller's Authorization header in its error."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"error": {"message": f"Incorrect API key: {self.headers['Authorization']}",
                                     "type": "invalid_request_error"}}).encode()
        self.send_response(int(self.path.split("/")[1]))  # /<status>/v1/chat/completions
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status", [400, 422, 500])
def test_the_api_key_never_appears_in_errors_or_logs(arun, caplog, status):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EchoKey)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    caplog.set_level("DEBUG")
    try:
        err, _ = fails(arun, f"http://127.0.0.1:{httpd.server_port}/{status}/v1", convo("x"), max_retries=1)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert KEY not in str(err) and KEY not in repr(err)  # fails() checked str too; this is the point
    if status < 500:
        assert "Incorrect API key: Bearer <redacted>" in str(err)
    assert KEY not in caplog.text
    assert KEY not in repr(OpenAIModel("http://127.0.0.1:1/v1", "coder", KEY))


def test_a_proxy_in_the_environment_does_not_capture_a_loopback_endpoint(arun, monkeypatch):
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{dead.getsockname()[1]}"
        for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(name, proxy)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        with ScriptedServer(ScriptedModel(RULES)) as server:
            reply, sleeps = call(arun, server.url, convo("speculative_config"), max_retries=0)
    assert reply.tool_calls[0].name == "bash" and sleeps == []


def test_a_base_url_without_a_scheme_is_refused_at_once():
    with pytest.raises(ModelError, match="model.base_url 'localhost:8000/v1' is not an http"):
        OpenAIModel("localhost:8000/v1", "coder", KEY)


def test_projected_is_the_prompt_estimate_plus_max_tokens():
    messages = convo("speculative_config " * 50)
    model = OpenAIModel("http://127.0.0.1:1/v1", "coder", KEY, price_in=1.5, price_out=6.0, max_tokens=1000)
    tokens, money = model.projected(messages)
    assert tokens == chars4(messages) + 1000
    assert money == pytest.approx(chars4(messages) * 1.5 / 1e6 + 1000 * 6.0 / 1e6)


def test_retry_after_reads_seconds_milliseconds_and_http_dates():
    assert retry_after({"Retry-After": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5  # the finer one wins
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    later = email.utils.format_datetime(email.utils.parsedate_to_datetime(date).replace(second=45), usegmt=True)
    assert retry_after({"Retry-After": later, "Date": date}) == 45.0  # measured from the server's clock
    assert retry_after({"Retry-After": date, "Date": later}) == 0.0   # already past
    assert retry_after({"Retry-After": "86400"}) == 600.0             # capped
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after({}) is None


# -- ScriptedModel --------------------------------------------------------------------------

def test_the_first_matching_rule_answers_by_the_number_of_assistant_turns(arun):
    model = ScriptedModel([{"when": "speculative", "replies": [{"content": "A0"}, {"content": "A1"}]},
                           {"when": "spec", "replies": [{"content": "B0"}]}])
    messages = convo("speculative_config error")
    assert arun(model.complete(messages, TOOLS)).content == "A0"
    messages.append({"role": "assistant", "content": "A0"})
    messages.append({"role": "user", "content": "spec only"})  # only the FIRST user message picks the rule
    assert model.reply_for(messages).content == "A1"
    assert model.reply_for(convo("a spec")).content == "B0"


@pytest.mark.parametrize("messages, why", [
    (convo("nothing known"), "no rule of the script matches"),
    (convo("speculative_config") + [{"role": "assistant", "content": "x"}] * 2, "has 2 replies and this is call 3"),
])
def test_no_answer_is_a_clean_give_up(messages, why):
    reply = ScriptedModel(RULES).reply_for(messages)
    [tc] = reply.tool_calls
    n = sum(m["role"] == "assistant" for m in messages)
    assert (tc.id, tc.name, tc.error) == (f"call_{n}_0", "give_up", None)
    assert why in tc.arguments["reason"]


def test_scripted_usage_estimates_and_prices():
    model = ScriptedModel(RULES, price_in=3.0, price_out=15.0)
    messages = convo("speculative_config")
    reply = model.reply_for(messages)
    assert reply.usage == Usage(chars4(messages), chars4([reply.message]))
    assert reply.cost == pytest.approx(reply.usage.prompt_tokens * 3e-6 + reply.usage.completion_tokens * 15e-6)
    assert model.projected(messages) == (reply.usage.total, reply.cost)
    assert ScriptedModel(RULES).reply_for(messages).cost == 0.0


def test_a_script_file_loads(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text("- when: 'speculative_config'\n"
                    "  replies:\n"
                    "    - {content: 'Looking.', calls: [{tool: bash, args: {command: 'ls'}}]}\n")
    reply = ScriptedModel.from_file(path).reply_for(convo("speculative_config"))
    assert reply.tool_calls == [ToolCall("call_0_0", "bash", {"command": "ls"})]


@pytest.mark.parametrize("text, where, words", [
    ("- when: 'x'\n  replies:\n    - {content: 'a'}\n    - {calls: [{args: {command: ls}}]}\n",
     ":4: 0.replies.1.calls.0.tool:", "Field required"),
    ("- when: '(unclosed'\n  replies: [{content: a}]\n", ":1: 0.when:", "invalid regex"),
    ("- when: 'x'\n  replies: []\n", ":2: 0.replies:", "at least 1 item"),
    ("- when: 'x'\n  replies: [{}]\n", ":2: 0.replies.0:", "a reply needs `content` or `calls`"),
    ("- when: 'x'\n  replies: [{content: a, callz: []}]\n", ":2: 0.replies.0.callz:", "Extra inputs"),
    ("when: x\n", ":1:", "a model script is a YAML list of rules"),
    ("- when: [unclosed\n", ":2:", "not valid YAML"),
])
def test_a_bad_script_file_is_one_line_naming_the_file(tmp_path, text, where, words):
    path = tmp_path / "bad-script.yaml"
    path.write_text(text)
    with pytest.raises(PlaybookError) as e:
        ScriptedModel.from_file(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path) + where) and words in msg


def test_a_missing_script_file_says_so(tmp_path):
    with pytest.raises(HarnessError, match="nope.yaml: cannot read the model script"):
        ScriptedModel.from_file(tmp_path / "nope.yaml")


# -- ScriptedServer details -------------------------------------------------------------------

def _http(url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with opener.open(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_the_server_lists_its_model_and_wants_an_authorization_header():
    with ScriptedServer(ScriptedModel(RULES, name="scripted-demo")) as server:
        status, models = _http(server.url + "/models")
        assert status == 200 and [m["id"] for m in models["data"]] == ["scripted-demo"]
        body = json.dumps({"model": "m", "messages": convo("speculative_config")}).encode()
        status, err = _http(server.url + "/chat/completions", body, {"Content-Type": "application/json"})
        assert status == 401 and err["error"]["code"] == "invalid_api_key"
        status, ok = _http(server.url + "/chat/completions", body,
                           {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        assert status == 200 and ok["object"] == "chat.completion"
        assert ok["choices"][0]["finish_reason"] == "tool_calls"
        assert ok["usage"]["total_tokens"] == ok["usage"]["prompt_tokens"] + ok["usage"]["completion_tokens"]
        assert len(server.requests) == 2 and KEY not in json.dumps(server.requests)
        status, _ = _http(server.url + "/chat/completions", b"not json", {"Authorization": "Bearer k"})
        assert status == 400
