"""The controller's stop rules with real runs on this machine (LocalTransport, real processes,
real git): each budget ends the session cleanly with its reason, the same failure K times ends
it as stuck, an infra failure is cleaned up and retried with no model call, refused tool calls
go back to the model, and no run is left alive."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.agent.scripted import ScriptedModel
from harness.remote.local import LocalTransport
from harness.session.controller import Session
from harness.session.journal import Journal
from harness.session.ledger import Ledger
from harness.spec import RunSpec
from test_minichain import PROXY_VARS, TARGET, processes_of
from names import unique

# A run that fails at the trajectory stage with a Python traceback, after DELAY seconds.
FAILING = textwrap.dedent("""\
    echo "minichain driver pid=$$: config run.sh, seed 0"
    sleep "${DELAY:-0}"
    "$PYTHON" -c 'raise ValueError("No valid rounds in trajectory t0: 3 round(s), the last is None")'
    """)


def spec_for(workdir: Path, command: str = "bash run.sh", **sections) -> RunSpec:
    data = {"host": "localhost", "transport": "local", "workdir": str(workdir),
            "launch": {"command": command, "env": {"PYTHON": sys.executable}, "unset": sorted(PROXY_VARS),
                       "settle": 0.5, "stall": 30},
            "playbooks": ["minichain"], "budgets": {"stuck_after": 10}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunSpec.model_validate(data)


def failing_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(FAILING)
    return work


def session(tmp_path: Path, spec: RunSpec, model=None, **kw) -> Session:
    return Session(spec, tmp_path / "sessions" / unique("s1"), LocalTransport(), model, **kw)


def events(ses: Session, kind: str) -> list[dict]:
    return [e for e in Journal.read(ses.dir / "journal.jsonl") if e["type"] == kind]


# a model that looks around, changes something that does not matter, and relaunches
LOOK_AND_RELAUNCH = [{"when": "No valid rounds", "replies": [
    {"calls": [{"tool": "bash", "args": {"command": "ls; echo 'tried again' >> notes.txt"}}]},
    {"calls": [{"tool": "relaunch", "args": {"summary": "try again"}}]}]}]
# a model whose edit fails, and that relaunches all the same
EDIT_FAILS = [{"when": "No valid rounds", "replies": [
    {"calls": [{"tool": "edit", "args": {"path": "run.sh", "old": "no such text", "new": "x"}}]},
    {"calls": [{"tool": "relaunch", "args": {"summary": "fixed it"}}]},
    {"calls": [{"tool": "relaunch", "args": {"summary": "fixed it, really"}}]}]}]


@pytest.mark.parametrize("budget,spec_over,prices", [
    ("relaunches", {"budgets": {"relaunches": 1}}, {}),
    ("agent_steps", {"budgets": {"agent_steps": 1}}, {}),
    ("tokens", {"budgets": {"tokens": 50}}, {}),
    ("money", {"budgets": {"money": 0.001}}, {"price_in": 100.0}),
    ("wall_clock", {"budgets": {"wall_clock": 1}, "launch": {"env": {"DELAY": "30", "PYTHON": sys.executable}}}, {}),
    ("accelerator_hours", {"budgets": {"accelerator_hours": 1},
                           "launch": {"devices": 3600, "env": {"DELAY": "30", "PYTHON": sys.executable}}}, {}),
])
def test_each_budget_ends_the_session_cleanly(tmp_path, budget, spec_over, prices):
    work = failing_workdir(tmp_path)
    launch = {"command": "bash run.sh", "env": {"PYTHON": sys.executable}, "unset": sorted(PROXY_VARS),
              "settle": 0.5, "stall": 30} | spec_over.pop("launch", {})
    spec = spec_for(work, **spec_over, launch=launch)
    ses = session(tmp_path, spec, ScriptedModel(LOOK_AND_RELAUNCH, **prices))
    assert asyncio.run(ses.run()) == f"budget:{budget}"
    end = events(ses, "end")
    assert len(end) == 1 and end[0]["reason"] == f"budget:{budget}" and budget in end[0]["detail"]
    assert processes_of(work) == []  # the run it started is not left alive
    st = ses.state
    if budget == "relaunches":
        assert len(st.attempts) == 2
    if budget in ("tokens", "money"):
        assert st.model_calls == 0  # checked before spending: the call was never made
    if budget in ("wall_clock", "accelerator_hours"):
        assert len(st.attempts) == 1 and st.attempts[0].verdict["reason"] == f"budget:{budget}"


def test_the_same_failure_k_times_is_stuck(tmp_path):
    spec = spec_for(failing_workdir(tmp_path), budgets={"stuck_after": 3})
    ses = session(tmp_path, spec, ScriptedModel(LOOK_AND_RELAUNCH))
    assert asyncio.run(ses.run()) == "stuck"
    fps = [e["fingerprint"] for e in events(ses, "verdict")]
    assert len(fps) == 3 and len(set(fps)) == 1
    assert "3 attempts in a row" in events(ses, "end")[0]["detail"]


def test_a_relaunch_that_changes_nothing_is_refused_then_ends_stuck(tmp_path):
    """The agent's edit failed: its relaunch would run the same code again. It is told so (no
    relaunch); asking again ends the session as stuck after one attempt, not K."""
    ses = session(tmp_path, spec_for(failing_workdir(tmp_path)), ScriptedModel(EDIT_FAILS))
    assert asyncio.run(ses.run()) == "stuck"
    assert len(events(ses, "launch")) == 1
    tools = events(ses, "tool")
    assert [t["end"] for t in tools] == [None, None]  # neither relaunch was taken as one
    assert "not relaunched: nothing in the workdir differs" in tools[1]["output"]
    assert "asked twice to relaunch attempt 1 without changing anything" in events(ses, "end")[0]["detail"]


def test_refused_tool_calls_are_journaled_and_answered(tmp_path):
    work = failing_workdir(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    rules = [{"when": "No valid rounds", "replies": [
        {"calls": [{"tool": "bash", "args": {"command": "git push origin main"}}]},
        {"calls": [{"tool": "edit", "args": {"path": "../outside.txt", "old": "keep me", "new": "lost"}}]},
        {"calls": [{"tool": "give_up", "args": {"reason": "cannot fix this"}}]}]}]
    ses = session(tmp_path, spec_for(work), ScriptedModel(rules))
    assert asyncio.run(ses.run()) == "gave_up"
    tools = events(ses, "tool")
    assert [(t["name"], t["refused"]) for t in tools] == [("bash", True), ("edit", True), ("give_up", False)]
    assert "git push" in tools[0]["output"] and outside.read_text() == "keep me\n"
    assert events(ses, "end")[0]["detail"] == "cannot fix this"


def test_offline_without_a_declared_fix_gives_up(tmp_path):
    ses = session(tmp_path, spec_for(failing_workdir(tmp_path)), offline=True)
    assert asyncio.run(ses.run()) == "gave_up"
    assert "offline" in events(ses, "end")[0]["detail"] and not events(ses, "model")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_infra_failure_is_cleaned_up_and_retried_without_the_model(tmp_path):
    """A leftover process holds the run's port: the run dies with EADDRINUSE (class infra);
    the spec's cleanup kills the leftover, the retry passes, and no model is ever asked."""
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    port = _free_port()
    holder = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.socket(); "
                               f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(600)", f"holder-{port}"])
    bind = f"import socket; socket.socket().bind(('127.0.0.1', {port}))"
    # the cleanup runs after every stop, the last one too: a `kill PID` of a holder already gone
    # would signal whoever has that number now (another test's run, under pytest-xdist); a name
    # is safe ([d]igit: the pattern does not match the cleanup's own shell)
    spec = spec_for(work, command=f"\"$PYTHON\" -c \"{bind}\" && exec bash run.sh",
                    cleanup=[f"pkill -f 'holder-[{str(port)[0]}]{str(port)[1:]}'; true"])
    try:
        ses = session(tmp_path, spec, ScriptedModel([]))  # any model call would give up
        assert asyncio.run(ses.run()) == "passed"
    finally:
        holder.kill()
        holder.wait()
    verdicts = events(ses, "verdict")
    assert [v["outcome"] for v in verdicts] == ["crash", "pass"]
    assert verdicts[0]["root"]["class"] == "infra" and "Address already in use" in verdicts[0]["root"]["text"]
    assert len(events(ses, "cleanup")) == 1 and not events(ses, "model")
    assert processes_of(work) == []


def test_an_infra_retry_says_what_still_holds_the_port(tmp_path):
    """No cleanup configured and a leftover holding the port the error names (asyncio's own bind
    error, as vLLM's and uvicorn's servers print it): each retry says who holds it and what to add."""
    work = tmp_path / "work"
    work.mkdir()
    port = _free_port()
    holder = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.socket(); "
                               f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(600)"])
    serve = f"import asyncio; asyncio.run(asyncio.start_server(lambda r, w: None, '127.0.0.1', {port}))"
    spec = spec_for(work, command=f"\"$PYTHON\" -c \"{serve}\"", budgets={"infra_retries": 1})
    try:
        wait_for_port(port)
        ses = session(tmp_path, spec, offline=True)
        assert asyncio.run(ses.run()) == "gave_up"
    finally:
        holder.kill()
        holder.wait()
    root = events(ses, "verdict")[0]["root"]
    assert root["class"] == "infra" and f"('127.0.0.1', {port})" in root["text"]
    cleanup = events(ses, "cleanup")
    assert len(cleanup) == 1 and not cleanup[0]["ok"]
    assert f"port {port} still in use by pid {holder.pid} ({sys.executable} -c import socket" in cleanup[0]["detail"]
    assert "no cleanup command configured — add one to `cleanup:`" in cleanup[0]["detail"]


def wait_for_port(port: int) -> None:
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        import time
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def test_a_known_fix_is_applied_without_the_model_and_committed(tmp_path):
    """minichain with fault 03 (token margin): the declared set_yaml fix repairs it; the ledger
    holds one commit per launch and its diff is the fix."""
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "03-token-margin-2048.patch")], cwd=work, check=True)
    ses = session(tmp_path, spec_for(work, launch={"settle": 1}), ScriptedModel([]))
    assert asyncio.run(ses.run()) == "passed"
    fixes = events(ses, "fix")
    assert len(fixes) == 1 and fixes[0]["applied"] and fixes[0]["signature"] == "minichain_prompt_too_long"
    assert not events(ses, "model")
    ledger = Ledger(LocalTransport(), str(work), ses.session)
    commits = asyncio.run(ledger.attempts())
    assert [c[0] for c in commits] == [1, 2]
    assert commits[0][2] == f"harness {ses.session} attempt 1: first run -> crash at completion"
    assert commits[1][2] == f"harness {ses.session} attempt 2: crash at completion -> pass"
    diff = asyncio.run(ledger.diff(1, 2))
    assert "-  token_margin: 2048" in diff and "+  token_margin: 16384" in diff
    assert os.path.isdir(work / ".harness" / "ledger.git")


def test_the_spec_logs_are_followed_with_the_runs_own(tmp_path):
    """The traceback goes to logs/actor.log, not to the run's stdout: the verdict still finds it,
    and the attempt's local log shows which file each line came from."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(FAILING.replace('"$PYTHON" -c', 'mkdir -p logs; "$PYTHON" -c')
                                 .rstrip("\n") + " 2> logs/actor.log\n")
    spec = spec_for(work, launch={"logs": ["logs/actor.log"]})
    ses = session(tmp_path, spec, offline=True)
    assert asyncio.run(ses.run()) == "gave_up"
    v = events(ses, "verdict")[0]
    assert v["outcome"] == "crash" and "No valid rounds" in v["root"]["text"], v
    local = (ses.dir / "attempts" / "01.log").read_text()
    assert "(log:actor.log) ValueError: No valid rounds" in local


def test_keep_run_leaves_a_passing_run_alive(tmp_path):
    """keep_run: the chain passed and the run goes on (training further); the session ends
    `passed` without stopping it, and says so."""
    from harness.remote.launch import Launcher

    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    ses = session(tmp_path, spec_for(work, command="bash run.sh && sleep 60", keep_run=True), offline=True)
    assert asyncio.run(ses.run()) == "passed"
    assert events(ses, "end")[0]["kept_run"] and processes_of(work) != []
    assert any("left running, as asked" in e["text"] for e in events(ses, "note"))
    launcher = Launcher(LocalTransport())
    handle = asyncio.run(launcher.find(str(work), f"{ses.session}-1"))
    assert asyncio.run(launcher.stop(handle, grace=2)).ok and processes_of(work) == []


HUNG = textwrap.dedent("""\
    echo "minichain driver pid=$$: config run.sh, seed 0"
    exec "$PYTHON" -c '
    import threading
    def all_reduce():
        threading.Event().wait()
    def rollout():
        all_reduce()
    rollout()
    '
    """)


def test_a_hang_comes_with_where_each_process_waits(tmp_path, monkeypatch):
    """A real run that blocks forever in a collective-like call, silent and idle: before it is
    stopped, its processes' states and Python stacks (py-spy) are gathered into the attempt's
    evidence and the digest the agent reads."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # py-spy, as on a host
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(HUNG)
    spec = spec_for(work, launch={"stall": 1.5})
    ses = session(tmp_path, spec, offline=True)
    assert asyncio.run(ses.run()) == "gave_up"
    v = events(ses, "verdict")[0]
    assert v["outcome"] == "hang" and v["reason"] == "hung"
    evidence = (ses.dir / "attempts" / "01.evidence.txt").read_text()
    assert "in all_reduce (<string>:" in evidence.split("\n\n")[0] or "in the collective all_reduce" in evidence
    # its last line said nothing; where it waits does: a collective's hang, in the rollout (its
    # main thread's call path), at the frame that waits
    assert v["root"]["category"] == "distributed_comm_hang", v["root"]
    assert v["failed_stage"] == 2 and v["root"]["text"].startswith("all_reduce (<string>:"), v
    assert "Thread" in evidence and "rollout (<string>:" in evidence  # the whole stack is kept
    digest = (ses.dir / "attempts" / "01.digest.txt").read_text()
    assert "## Where the hung run waits" in digest and "all_reduce" in digest
    assert any("the run hung; pid" in e["text"] for e in events(ses, "note"))
    assert processes_of(work) == []


# A rank of a run that hangs: rank 1 still scoring, every other rank in the update's all-reduce that
# needs it (tests/test_nodes.py runs rank 1 on a worker node).
RANK_PY = textwrap.dedent("""\
    import os, threading, time
    def say(what):
        print(f"[rank{os.environ['RANK']}]: {what}", flush=True)
    def all_reduce():
        threading.Event().wait()
    def update_actor():
        say("entering the all-reduce")
        all_reduce()
    def compute_score():
        say("scoring batch 4")
        while True:
            time.sleep(0.05)
    say("step 3 started")
    compute_score() if os.environ["RANK"] == "1" else update_actor()
    """)
PEERS = (f"echo \"minichain driver pid=$$: config run.sh, seed 0\"\ncat > rank.py <<'PY'\n{RANK_PY}PY\n"
         "for r in 0 1 2; do RANK=$r \"$PYTHON\" rank.py & done\nwait\n")


def test_a_hang_names_the_rank_its_peers_wait_for(tmp_path, monkeypatch):
    """Three ranks of one command line: two sit in the update's all-reduce, one is still scoring.
    The hang's evidence says which process the others wait for, and the verdict places the hang
    there — the reward, at that process's frame — not in the all-reduce; the evidence and the
    digest also hold the last line each rank printed."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # py-spy, as on a host
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(PEERS)
    ses = session(tmp_path, spec_for(work, launch={"stall": 1.5}), offline=True)
    assert asyncio.run(ses.run()) == "gave_up"
    v = events(ses, "verdict")[0]
    evidence = (ses.dir / "attempts" / "01.evidence.txt").read_text()
    head = evidence.split("\n\n")[0]
    assert head.count(", in the collective all_reduce — ") == 2 and "waited on: pid " in head, head
    assert "in compute_score (" in head.split("waited on: pid ")[1], head
    assert (v["outcome"], v["failed_stage"], v["root"]["category"]) == ("hang", 5, "distributed_comm_hang"), v
    assert v["root"]["text"].startswith("compute_score ("), v["root"]
    digest = (ses.dir / "attempts" / "01.digest.txt").read_text()
    assert "waited on: pid " in digest, digest[-1500:]
    assert any(e["text"].startswith("the run hung; waited on: pid ") for e in events(ses, "note")), events(ses, "note")
    last = digest.split("## the last line each process printed (silent longest first)\n")[1]
    for said in ("[rank0]: entering the all-reduce — ", "[rank1]: scoring batch 4 — ", "[rank2]: entering the all-reduce — "):
        assert said in last, last
    assert "== the last line each process printed, silent longest first\n" in evidence and "[rank1]: scoring batch 4" \
        in evidence.split("== the last line each process printed")[1], evidence[-800:]
    assert processes_of(work) == []


def test_without_py_spy_the_evidence_says_how_to_get_stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a host with no py-spy
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(HUNG)
    ses = session(tmp_path, spec_for(work, launch={"stall": 1.5}), offline=True)
    assert asyncio.run(ses.run()) == "gave_up"
    evidence = (ses.dir / "attempts" / "01.evidence.txt").read_text()
    assert "no py-spy on the host" in evidence and "pip install py-spy" in evidence
    assert "wchan futex" in evidence  # states and wait channels all the same
    # no stack says where it waits, nor its last line: a silent start-up, which waits on many
    # things, is `other` (with py-spy's stacks in a collective it is a collective's: the next test)
    assert events(ses, "verdict")[0]["root"]["category"] == "other"
    assert events(ses, "verdict")[0]["failed_stage"] == 1
