"""The agent's two action protocols and the endpoints people have: the text protocol and the
tool calls left as text parsed (pure), then whole sessions over real HTTP through a server that
behaves like each real endpoint (harness/agent/quirks.py) in the mode `actions: auto` picks —
the demo's script fixing two minichain faults with edits, to a green chain."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from harness.agent.protocol import FORMAT, text_action, text_tool_calls
from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.demo import SCRIPT, prepare, spec_dict
from harness.session.journal import Journal
from harness.session.runner import run_spec
from harness.spec import RunSpec
from test_minichain import PROXY_VARS, processes_of
from names import unique

FAULTS = ["04-speculative-config-without-mtp", "06-reward-split-per-character"]  # two code fixes, with edits


# -- the text protocol, pure -------------------------------------------------------------

def test_one_block_is_one_bash_call():
    call, problem = text_action("Looking at the server.\n\n```bash\ngrep -n spec minichain/server.py\n```\n")
    assert problem is None and (call.name, call.arguments) == ("bash", {"command": "grep -n spec minichain/server.py"})
    call, _ = text_action("```sh\ncd minichain\nsed -n 1,5p server.py\n```")
    assert call.arguments == {"command": "cd minichain\nsed -n 1,5p server.py"}


def test_relaunch_and_give_up_end_the_turn_only_alone_in_their_block():
    call, _ = text_action("Fixed.\n```bash\nrelaunch guard speculative_config on mtp.enable\n```")
    assert (call.name, call.arguments) == ("relaunch", {"summary": "guard speculative_config on mtp.enable"})
    call, _ = text_action("```bash\ngive_up the NPU driver is missing\n```")
    assert (call.name, call.arguments) == ("give_up", {"reason": "the NPU driver is missing"})
    call, _ = text_action("```bash\nsed -i s/a/b/ f.py\nrelaunch done\n```")  # a command named relaunch: a command
    assert call.name == "bash"


@pytest.mark.parametrize("reply,found", [
    ("I think the config is wrong.", "found none"),
    ("```bash\nls\n```\nthen\n```bash\npwd\n```", "found 2"),
    ("```bash\n\n```", "it was empty"),
    (None, "found none"),
])
def test_a_reply_without_exactly_one_block_gets_the_format_message(reply, found):
    call, problem = text_action(reply)
    assert call is None and problem == FORMAT.format(found=found)


def test_tool_calls_left_as_text_are_read_when_well_formed():
    hermes = 'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    assert [(c.name, c.arguments) for c in text_tool_calls(hermes)] == [("bash", {"command": "ls"})]
    two = ('<tool_call>{"name": "edit", "arguments": {"path": "a", "old": "x", "new": "y"}}</tool_call>'
           '<tool_call>{"name": "relaunch", "arguments": "{\\"summary\\": \\"s\\"}"}</tool_call>')
    assert [c.name for c in text_tool_calls(two)] == ["edit", "relaunch"]
    mistral = '[TOOL_CALLS] [{"name": "give_up", "arguments": {"reason": "r"}}]'
    assert [(c.name, c.arguments) for c in text_tool_calls(mistral)] == [("give_up", {"reason": "r"})]
    for broken in ('<tool_call>{"name": "bash", "arguments": {"command": </tool_call>',
                   '<tool_call>{"arguments": {}}</tool_call>', "[TOOL_CALLS] not json", "plain text"):
        assert text_tool_calls(broken) == []


# -- whole sessions through each endpoint's behaviour ----------------------------------------

def session(tmp_path, quirk, *, actions="auto", script=None):
    """Run the two-fault minichain session against a ScriptedServer with `quirk`; returns
    (journal, the requests the server received)."""
    work = prepare(tmp_path, FAULTS)
    os.environ["HARNESS_TEST_KEY"] = "test-key"
    model = ScriptedModel.from_file(SCRIPT) if script is None else ScriptedModel(script)
    with ScriptedServer(model, quirk=quirk) as server:
        d = spec_dict(work, server.url, "scripted", "HARNESS_TEST_KEY")
        d["launch"] |= {"settle": 2, "unset": sorted(PROXY_VARS)}
        d["model"]["actions"] = actions
        d["budgets"] |= {"agent_steps_per_attempt": 4}
        asyncio.run(run_spec(RunSpec.model_validate(d), tmp_path / (sid := unique("session"))))
        requests = list(server.requests)
    assert processes_of(work) == []
    return Journal.read(tmp_path / sid / "journal.jsonl"), requests


def events(journal, kind):
    return [e for e in journal if e["type"] == kind]


@pytest.mark.parametrize("quirk,mode,why", [
    (None, "tools", "came back as a tool call"),
    ("vllm-no-parser", "text", "requires --enable-auto-tool-choice"),
    ("ollama-no-tools", "text", "does not support tools"),
    ("vllm-wrong-parser", "tools", "come back as text"),
    ("deepseek-thinking", "tools", "came back as a tool call"),
], ids=lambda v: str(v)[:24])
def test_auto_picks_a_protocol_and_the_session_passes(tmp_path, quirk, mode, why):
    journal, requests = session(tmp_path, quirk)
    (proto,) = events(journal, "protocol")
    assert proto["mode"] == mode and why in proto["reason"], proto
    assert journal[-1]["reason"] == "passed", journal[-1]
    assert [e["summary"] for e in events(journal, "tool") if e["end"] == "relaunch"] == \
        ["build speculative_config only when MTP is enabled", "reward: parse the checker verdict as JSON"]
    agent = requests[1:]  # after the probe
    if mode == "text":  # no tools offered again, and the edits were made by shell commands
        assert agent and not any("tools" in r for r in agent)
        assert any("python3 - <<'EOF'" in e["arguments"] for e in events(journal, "tool") if e["name"] == "bash")
    if quirk == "deepseek-thinking":  # every tool-call turn went back with its reasoning
        turns = [m for r in agent for m in r["messages"] if m.get("role") == "assistant" and m.get("tool_calls")]
        assert turns and all(m.get("reasoning_content") for m in turns)


@pytest.mark.parametrize("quirk,learned,check", [
    ("no-max-tokens", "max_completion_tokens instead of max_tokens",
     lambda r: "max_completion_tokens" in r and "max_tokens" not in r),
    ("reasoning-refused", "reasoning_content left out",
     lambda r: not any("reasoning_content" in m for m in r["messages"])),
])
def test_a_refused_parameter_is_learned_once_and_the_session_passes(tmp_path, quirk, learned, check):
    journal, requests = session(tmp_path, quirk)
    notes = [e["text"] for e in events(journal, "note") if "model endpoint wants" in e["text"]]
    assert len(notes) == 1 and learned in notes[0], notes
    assert journal[-1]["reason"] == "passed", journal[-1]
    refused = [i for i, r in enumerate(requests) if not check(r)]
    assert refused and all(check(r) for r in requests[refused[-1] + 1:])  # after the refusal, never again


def test_an_endpoint_that_refuses_tools_mid_session_moves_it_to_text(tmp_path):
    """`actions: tools` set by hand against a server without a tool parser: its first refusal
    switches the session to text (journaled) and the night goes on to a green chain."""
    journal, requests = session(tmp_path, "vllm-no-parser", actions="tools")
    protos = events(journal, "protocol")
    assert [p["mode"] for p in protos] == ["tools", "text"] and "refuses tools" in protos[1]["reason"], protos
    assert journal[-1]["reason"] == "passed", journal[-1]
    assert "tools" in requests[0] and not any("tools" in r for r in requests[1:])


def test_text_mode_can_be_set_and_a_model_that_never_writes_a_block_is_bounded(tmp_path):
    """`actions: text` without a probe; a model that only talks gets the format message after
    each reply, its steps run out, and the session ends stuck, saying so."""
    talker = [{"when": ".", "replies": [{"content": "I believe the speculative config is wrong."}] * 6}]
    journal, requests = session(tmp_path, "vllm-no-parser", actions="text", script=talker)
    (proto,) = events(journal, "protocol")
    assert proto["mode"] == "text" and proto["reason"] == "model.actions"
    assert len(events(journal, "model")) == 4 and not events(journal, "tool")  # agent_steps_per_attempt
    format_msgs = [m["content"] for m in requests[-1]["messages"] if m["role"] == "user"][1:]
    assert format_msgs == [FORMAT.format(found="found none")] * 3
    assert journal[-1]["reason"] == "stuck", journal[-1]


# -- harness doctor checks the model ---------------------------------------------------------

def doctor(tmp_path, base_url, name="scripted", key_env="HARNESS_TEST_KEY", env=None):
    import subprocess
    from pathlib import Path
    (tmp_path / "w").mkdir(exist_ok=True)
    (tmp_path / "w" / "run.sh").write_text("echo run\n")
    spec = tmp_path / "harness.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {tmp_path / 'w'}\nlaunch:\n  command: bash run.sh\n"
                    f"model:\n  base_url: {base_url}\n  name: {name}\n  api_key_env: {key_env}\n")
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-m", "harness.cli", "doctor", str(spec)], capture_output=True, text=True,
                          cwd=root, timeout=120, env={**os.environ, "HARNESS_TEST_KEY": "k", **(env or {})})


def model_lines(r):
    return [ln for ln in r.stdout.splitlines() if "model" in ln.split(":")[0]]


@pytest.mark.parametrize("quirk,mode", [(None, "tools"), ("vllm-no-parser", "text"), ("vllm-wrong-parser", "tools")])
def test_doctor_says_which_protocol_auto_picks(tmp_path, quirk, mode):
    with ScriptedServer(ScriptedModel.from_file(SCRIPT), quirk=quirk) as server:
        r = doctor(tmp_path, server.url)
    lines = model_lines(r)
    assert r.returncode == 0 and [ln.split(":")[0] for ln in lines] == ["✓ model key", "✓ model endpoint",
                                                                       "✓ model protocol"], r.stdout + r.stderr
    assert "serves 'scripted'" in lines[1] and f"✓ model protocol: {mode} (" in lines[2] and "round trip" in lines[2]


def test_doctor_reports_a_bad_model_endpoint_in_one_line(tmp_path):
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    r = doctor(tmp_path, dead)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert model_lines(r)[-1].startswith(f"✗ model endpoint: cannot reach {dead}")
    with ScriptedServer(ScriptedModel.from_file(SCRIPT)) as server:
        r = doctor(tmp_path, server.url, name="qwen3-32b")
        assert r.returncode == 1 and "✗ model endpoint:" in r.stdout and "does not serve 'qwen3-32b'" in r.stdout \
            and "(it serves: scripted)" in r.stdout
        r = doctor(tmp_path, server.url, key_env="HARNESS_UNSET_KEY")
        assert r.returncode == 1 and "✗ model key: environment variable HARNESS_UNSET_KEY" in r.stdout


# -- a long attempt stays within its context ------------------------------------------------

def long_script(outputs: int, lines: int) -> list:
    """The demo's rule for fault 04, after `outputs` different commands that each print `lines` lines."""
    import yaml
    rules = yaml.safe_load(open(SCRIPT))
    rule = next(r for r in rules if "speculative" in r["when"])
    looks = [{"calls": [{"tool": "bash", "args": {"command": f"seq {n} {n + lines - 1}"}}]} for n in range(outputs)]
    return [{"when": rule["when"], "replies": looks + rule["replies"]}]


def one_fault_session(tmp_path, quirk, script):
    work = prepare(tmp_path, FAULTS[:1])
    os.environ["HARNESS_TEST_KEY"] = "test-key"
    with ScriptedServer(ScriptedModel(script), quirk=quirk) as server:
        d = spec_dict(work, server.url, "scripted", "HARNESS_TEST_KEY")
        d["launch"] |= {"settle": 2, "unset": sorted(PROXY_VARS)}
        asyncio.run(run_spec(RunSpec.model_validate(d), tmp_path / (sid := unique("session"))))
        requests = list(server.requests)
    return Journal.read(tmp_path / sid / "journal.jsonl"), requests


def test_older_tool_outputs_are_one_line_in_a_long_attempt(tmp_path):
    journal, requests = one_fault_session(tmp_path, None, long_script(9, 40))
    assert journal[-1]["reason"] == "passed", journal[-1]
    last = [r for r in requests if len(r["messages"]) > 2][-1]  # the relaunch request of the attempt
    outputs = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    hidden = [o for o in outputs if "more lines hidden to save context" in o]
    assert len(outputs) >= 10 and len(outputs) - len(hidden) == 6  # the latest six in full
    assert all(o.startswith("exit status 0") and "\n" not in o for o in hidden)


def test_a_context_overflow_hides_every_older_output_and_the_night_goes_on(tmp_path):
    journal, requests = one_fault_session(tmp_path, "small-context", long_script(7, 2000))
    notes = [e["text"] for e in events(journal, "note")]
    assert any("outgrew the model's context" in n for n in notes), notes
    assert journal[-1]["reason"] == "passed", journal[-1]


# -- a bad model cannot hurt the night ---------------------------------------------------------

@pytest.mark.parametrize("replies,detail", [
    ([{"calls": [{"tool": "edit", "args": {"path": "minichain/server.py", "old": "no such text", "new": "x"}}]}] * 8,
     "the same edit call 3 times in a row"),
    ([{"calls": [{"tool": "bash", "args": {"command": "cat /nonexistent/train.py"}}]}] * 8,
     "the same bash call 3 times in a row"),
    ([{"calls": [{"tool": "bash", "args": {"command": "ls"}, "raw": "{not json"}]}] * 8,
     "the same bash call 3 times in a row"),
], ids=["failing-edit", "hallucinated-path", "invalid-arguments"])
def test_a_model_going_round_in_circles_ends_stuck_saying_so(tmp_path, replies, detail):
    journal, _ = one_fault_session(tmp_path, None, [{"when": ".", "replies": replies}])
    assert journal[-1]["reason"] == "stuck" and detail in journal[-1]["detail"], journal[-1]
    assert len(events(journal, "tool")) == 3


def test_a_model_that_never_relaunches_is_bounded_by_its_steps(tmp_path):
    """Different commands, never a change, never relaunch: the attempt's steps run out and the
    session ends stuck (nothing changed), not in a loop."""
    replies = [{"calls": [{"tool": "bash", "args": {"command": f"echo look {n}"}}]} for n in range(60)]
    journal, _ = one_fault_session(tmp_path, None, [{"when": ".", "replies": replies}])
    assert journal[-1]["reason"] == "stuck" and "steps" in journal[-1]["detail"], journal[-1]


@pytest.mark.parametrize("content", ["", "lorem ipsum \x00\x01 {{{{ ]]]"], ids=["empty", "garbage"])
def test_empty_or_garbage_replies_are_bounded(tmp_path, content):
    """A model that answers nothing usable, the probe included (so `auto` picks text): each reply
    gets the format message, the steps run out, the session ends stuck saying so."""
    journal, requests = one_fault_session(tmp_path, None, [{"when": ".", "replies": [{"content": content}] * 60}])
    (proto,) = events(journal, "protocol")
    assert proto["mode"] == "text" and "no tool call back" in proto["reason"]
    assert journal[-1]["reason"] == "stuck" and "steps" in journal[-1]["detail"], journal[-1]
    nudges = [m["content"] for m in requests[-1]["messages"] if m["role"] == "user"][1:]
    assert nudges and set(nudges) == {FORMAT.format(found="found none")}
