"""The agent's tools against real hosts: LocalTransport on a tmp workdir, and the loopback sshd.

Every command given to the tools here is harmless even if the policy let it through: refused
writes aim at a tmp dir beside the workdir, and the test checks nothing landed there. The
destructive commands of the policy's list are checked, without running, in test_policy.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from harness.agent.model import ToolCall
from harness.agent.policy import Policy, check_write
from harness.agent.tools import TOOL_SPECS, Tools, trim
from harness.remote.local import LocalTransport
from harness.remote.transport import HostSpec, connect

SECRET = "hf_abcdefghijklmnopqrstuvwx"


@pytest.fixture
def lab(tmp_path) -> tuple[Path, Path]:
    """(workdir, a dir beside it): workdir/ckpt is protected, workdir/link -> the dir beside it."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "ckpt").mkdir(parents=True)
    outside.mkdir()
    (work / "ckpt" / "model.txt").write_text("weights\n")
    (outside / "g").write_text("a\n")
    (work / "link").symlink_to(outside)
    return work, outside


def make(work: Path, transport=None, **kw) -> Tools:
    return Tools(transport or LocalTransport(), Policy(str(work), protected=("ckpt",)), **kw)


def call(tools: Tools, name: str, arguments) -> object:
    return asyncio.run(tools.call(name, arguments))


def bash(tools: Tools, command: str, **kw):
    return call(tools, "bash", {"command": command, **kw})


def test_bash_runs_in_the_workdir_and_reports_status_and_stderr(lab):
    work, _ = lab
    r = bash(make(work), "pwd; echo oops >&2; exit 3")
    assert not r.refused and r.end is None
    assert r.output.splitlines()[:2] == ["exit status 3", str(work)]
    assert "[stderr]\noops" in r.output
    assert bash(make(work), "true").output == "exit status 0\n(no output)"


@pytest.mark.parametrize("command,why", [
    ("echo x > ../outside/f", "outside"),
    ("echo x > link/f", "resolves to"),                 # symlink escape, seen only on the host
    ("touch link/f", "resolves to"),
    ("cp ckpt/model.txt link/f", "resolves to"),
    ("sed -i s/a/b/ link/g", "resolves to"),
    ("cd link && echo x > f", "resolves to"),
    ("mkdir -p ../outside/f", "outside"),
    ("echo x >> ckpt/model.txt", "protected"),
    ("sed -i s/weights/zeros/ ckpt/model.txt", "protected"),
    ("rm -rf ../outside/g", "outside"),
])
def test_writes_outside_the_workdir_or_into_protected_paths_are_refused(lab, command, why):
    work, outside = lab
    r = bash(make(work), command)
    assert r.refused and why in r.output, r.output
    assert sorted(p.name for p in outside.iterdir()) == ["g"] and (outside / "g").read_text() == "a\n"
    assert (work / "ckpt" / "model.txt").read_text() == "weights\n"


def test_a_symlink_into_a_protected_path_is_protected(lab):
    work, _ = lab
    (work / "alias").symlink_to(work / "ckpt")
    r = bash(make(work), "echo x > alias/model.txt")
    assert r.refused and "protected" in r.output
    assert (work / "ckpt" / "model.txt").read_text() == "weights\n"


def test_protected_paths_can_be_read(lab):
    work, _ = lab
    r = bash(make(work), "cat ckpt/model.txt && ls ckpt")
    assert not r.refused and "weights" in r.output


def test_check_write_resolves_on_the_host(lab):
    work, _ = lab
    policy, t = Policy(str(work), protected=("ckpt",)), LocalTransport()
    assert "resolves to" in asyncio.run(check_write(t, policy, "link/f"))
    assert "outside" in asyncio.run(check_write(t, policy, "../../etc/passwd"))
    assert "outside" in asyncio.run(check_write(t, policy, "sub/../../x"))
    assert "protected" in asyncio.run(check_write(t, policy, str(work / "ckpt" / "new")))
    assert asyncio.run(check_write(t, policy, "sub/new.txt")) is None
    assert asyncio.run(check_write(t, policy, str(work / "a.txt"))) is None


def test_rm_rf_inside_the_workdir_and_git_commit_are_allowed(lab):
    work, _ = lab
    (work / "build" / "sub").mkdir(parents=True)
    (work / "build" / "sub" / "f").write_text("x")
    tools = make(work)
    r = bash(tools, "rm -rf build")
    assert not r.refused and r.output.startswith("exit status 0") and not (work / "build").exists()
    r = bash(tools, "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm 'fix margin' "
                    "&& git log --oneline")
    assert not r.refused and r.output.startswith("exit status 0") and "fix margin" in r.output


def test_kill_is_allowed_only_for_processes_of_the_run(lab):
    work, _ = lab
    mine = subprocess.Popen(["sleep", "300"], env={**os.environ, "HARNESS_RUN_ID": "run-1"})
    other = subprocess.Popen(["sleep", "300"], env={**os.environ, "HARNESS_RUN_ID": "run-2"})
    stranger = subprocess.Popen(["sleep", "300"], env={k: v for k, v in os.environ.items() if k != "HARNESS_RUN_ID"})
    try:
        tools = make(work, run_id="run-1")
        for command in (f"kill {other.pid}", f"kill -9 {mine.pid} {other.pid}", f"kill {stranger.pid}"):
            r = bash(tools, command)
            assert r.refused and "not a process of this run" in r.output, r.output
        assert mine.poll() is None and other.poll() is None and stranger.poll() is None
        r = bash(make(work), f"kill {mine.pid}")  # no run id: nothing may be killed
        assert r.refused and "no run" in r.output and mine.poll() is None
        r = bash(tools, f"kill {mine.pid}")
        assert not r.refused and r.output.startswith("exit status 0"), r.output
        assert mine.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for p in (mine, other, stranger):
            p.kill()
            p.wait()


def test_long_output_keeps_head_and_tail_with_a_note(lab):
    work, _ = lab
    r = bash(make(work, max_output=1000), "seq 1 5000")
    lines = r.output.splitlines()
    assert lines[:3] == ["exit status 0", "1", "2"] and lines[-1] == "5000"
    note = next(line for line in lines if line.startswith("[…"))
    n, size = map(int, re.fullmatch(r"\[… (\d+) lines / (\d+) bytes cut …\]", note).groups())
    shown = [int(x) for x in lines[1:] if x.isdigit()]
    assert len(shown) + n == 5000 and len(r.output) < 1100
    assert size == sum(len(str(i)) + 1 for i in range(1, 5001) if i not in set(shown))


def test_trim_accounts_for_every_byte():
    for text in ["x" * 10_000, "é\n" * 3000, "a" * 50 + "\n" + "b" * 9000 + "\n" + "c" * 40]:
        out = trim(text, 500)
        n, size = map(int, re.search(r"\[… (\d+) lines / (\d+) bytes cut …\]\n", out).groups())
        head, tail = re.split(r"\[… \d+ lines / \d+ bytes cut …\]\n", out)
        cut = text[len(head):len(text) - len(tail)]
        assert len(cut.encode()) == size and n == cut.count("\n") + (not cut.endswith("\n"))
        assert text.startswith(head) and text.endswith(tail) and len(out) <= 560
    assert trim("short", 500) == "short"


def test_secrets_printed_by_bash_are_redacted(lab):
    work, _ = lab
    r = bash(make(work), f"echo HF_TOKEN={SECRET}; echo token {SECRET} >&2")
    assert SECRET not in r.output and "HF_TOKEN=<redacted>" in r.output


def test_bash_timeout_is_capped_and_said(lab):
    work, _ = lab
    r = bash(make(work, timeout=1), "echo started; sleep 30", timeout=100)
    assert r.output.startswith("timed out after 1 s") and "started" in r.output


def test_edit_one_match_replaces_it_and_keeps_the_mode(lab):
    work, _ = lab
    f = work / "run.sh"
    f.write_text("#!/bin/sh\nset -e\nmargin=2048\npython train.py\n")
    f.chmod(0o755)
    r = call(make(work), "edit", {"path": "run.sh", "old": "margin=2048", "new": "margin=16384"})
    assert not r.refused and r.output.startswith("edited run.sh"), r.output
    assert "3 | margin=16384" in r.output
    assert f.read_text() == "#!/bin/sh\nset -e\nmargin=16384\npython train.py\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o755
    r = call(make(work), "edit", {"path": str(f), "old": "set -e\n", "new": ""})  # absolute, inside
    assert not r.refused and f.read_text() == "#!/bin/sh\nmargin=16384\npython train.py\n"


def test_edit_zero_matches_shows_the_nearest_lines(lab):
    work, _ = lab
    body = [f"line {i}" for i in range(1, 40)]
    body[19] = "    rollout.token_margin: 2048"
    (work / "c.yaml").write_text("\n".join(body) + "\n")
    r = call(make(work), "edit", {"path": "c.yaml", "old": "rollout.token_margin:  2048", "new": "x"})
    assert not r.refused and "not found" in r.output and "20 |     rollout.token_margin: 2048" in r.output
    assert "whitespace" in r.output
    r = call(make(work), "edit", {"path": "c.yaml", "old": "line 7\nline 8\nlien 9", "new": "x"})
    assert "7 | line 7" in r.output and "9 | line 9" in r.output and "10 |" not in r.output
    assert (work / "c.yaml").read_text() == "\n".join(body) + "\n"


def test_edit_several_matches_lists_their_lines(lab):
    work, _ = lab
    (work / "a.py").write_text("x = 1\ny\nx = 1\nz\nx = 1\n")
    r = call(make(work), "edit", {"path": "a.py", "old": "x = 1", "new": "x = 2"})
    assert "matches 3 times" in r.output and "lines 1, 3, 5" in r.output
    assert (work / "a.py").read_text() == "x = 1\ny\nx = 1\nz\nx = 1\n"


@pytest.mark.parametrize("path,why", [
    ("../outside/g", "outside"), ("link/g", "resolves to"), ("ckpt/model.txt", "protected"),
    ("{outside}/g", "outside"), ("~/x", "outside"), ("$HOME/x", "outside"), ("$X/y", "cannot tell"),
])
def test_edit_outside_or_into_protected_paths_is_refused(lab, path, why):
    work, outside = lab
    path = path.format(outside=outside)
    r = call(make(work), "edit", {"path": path, "old": "a", "new": "b"})
    assert r.refused and why in r.output, r.output
    assert (outside / "g").read_text() == "a\n" and (work / "ckpt" / "model.txt").read_text() == "weights\n"


def test_edit_through_a_symlink_inside_the_workdir_edits_its_target(lab):
    work, _ = lab
    (work / "conf").mkdir()
    (work / "conf" / "real.yaml").write_text("a: 1\n")
    (work / "cfg.yaml").symlink_to(work / "conf" / "real.yaml")
    r = call(make(work), "edit", {"path": "cfg.yaml", "old": "a: 1", "new": "a: 2"})
    assert not r.refused and (work / "conf" / "real.yaml").read_text() == "a: 2\n"
    assert (work / "cfg.yaml").is_symlink()


def test_model_mistakes_come_back_as_messages(lab):
    work, _ = lab
    tools = make(work)
    cases = [("nope", {}, "unknown tool"), ("bash", {}, "missing argument `command`"),
             ("bash", {"command": 3}, "must be a string"), ("bash", ["ls"], "JSON object"),
             ("bash", {"command": "ls", "cwd": "/"}, "unknown argument `cwd`"),
             ("bash", {"command": "ls", "timeout": 0}, "positive"), ("bash", {"command": "  "}, "empty"),
             ("edit", {"path": "a", "old": "x"}, "missing argument `new`"),
             ("edit", {"path": "missing.txt", "old": "x", "new": "y"}, "does not exist"),
             ("edit", {"path": "ckpt", "old": "x", "new": "y"}, "protected"),
             ("edit", {"path": "a.txt", "old": "", "new": "y"}, "empty"),
             ("relaunch", {}, "missing argument `summary`")]
    for name, arguments, expected in cases:
        r = call(tools, name, arguments)
        assert expected in r.output and r.end is None, (name, arguments, r.output)
    assert bash(tools, "echo ok", timeout=None).output.startswith("exit status 0")  # null optional: fine
    r = asyncio.run(tools.call_tool(ToolCall("c1", "bash", {}, error="arguments are not valid JSON: {ls")))
    assert "not valid JSON" in r.output and not r.refused
    assert asyncio.run(tools.call_tool(ToolCall("c2", "bash", {"command": "echo hi"}))).output.endswith("hi")


def test_relaunch_and_give_up_end_the_turn(lab):
    work, _ = lab
    r = call(make(work), "relaunch", {"summary": "token margin 2048 -> 16384"})
    assert r.end == "relaunch" and r.summary == "token margin 2048 -> 16384"
    r = call(make(work), "give_up", {"reason": f"the NPU driver is broken; HF_TOKEN={SECRET}"})
    assert r.end == "give_up" and "driver" in r.summary and SECRET not in r.summary + r.output


def test_tool_specs_are_openai_function_tools():
    names = [s["function"]["name"] for s in TOOL_SPECS]
    assert names == ["bash", "edit", "relaunch", "give_up"]
    for s in TOOL_SPECS:
        assert s["type"] == "function" and s["function"]["description"]
        params = s["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    assert TOOL_SPECS[0]["function"]["parameters"]["required"] == ["command"]


def test_bash_and_edit_over_ssh(ssh_lab, lab):
    work, outside = lab
    (work / "c.yaml").write_text("margin: 2048\n")
    spec = HostSpec(host="box", transport="asyncssh", ssh_config=str(ssh_lab.ssh_config),
                    known_hosts=str(ssh_lab.known_hosts))

    async def session():
        t = await connect(spec)
        try:
            tools = make(work, t)
            return [await tools.call("bash", {"command": f"pwd; echo HF_TOKEN={SECRET}"}),
                    await tools.call("edit", {"path": "c.yaml", "old": "2048", "new": "16384"}),
                    await tools.call("bash", {"command": "echo x > link/f"}),
                    await tools.call("edit", {"path": "link/g", "old": "a", "new": "b"}),
                    await tools.call("bash", {"command": "cat ckpt/model.txt"})]
        finally:
            await t.close()

    ran, edited, escaped, edit_escaped, read = asyncio.run(asyncio.wait_for(session(), 60))
    assert ran.output.startswith(f"exit status 0\n{work}") and SECRET not in ran.output
    assert edited.output.startswith("edited c.yaml") and (work / "c.yaml").read_text() == "margin: 16384\n"
    assert escaped.refused and edit_escaped.refused and "resolves to" in escaped.output
    assert sorted(p.name for p in outside.iterdir()) == ["g"] and (outside / "g").read_text() == "a\n"
    assert "weights" in read.output and not read.refused
