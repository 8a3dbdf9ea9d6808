"""Recording is always on: a session's recording.jsonl holds every remote call with its result,
every model request with its reply, and every reading of the controller's clock, in order."""

from __future__ import annotations

import asyncio
import base64
import json

from harness.agent.scripted import ScriptedModel
from harness.record import read_recording
from harness.session.journal import Journal
from harness.session.runner import run_spec
from test_loop import FAILING, spec_for
from names import unique


def test_a_session_records_its_commands_reads_and_model_calls(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(FAILING)
    rules = [{"when": "No valid rounds", "replies": [
        {"calls": [{"tool": "bash", "args": {"command": "echo looked at it"}},
                   {"tool": "edit", "args": {"path": "run.sh", "old": "seed 0", "new": "seed 1"}}]},
        {"calls": [{"tool": "give_up", "args": {"reason": "recorded enough"}}]}]}]
    d = tmp_path / unique("session")
    ses = asyncio.run(run_spec(spec_for(work), d, model=ScriptedModel(rules)))
    assert ses.state.ended["reason"] == "gave_up"
    rec = read_recording(d / "recording.jsonl")
    assert [e["n"] for e in rec] == list(range(1, len(rec) + 1))
    assert rec[0]["k"] == "start" and rec[0]["journal_seq"] == 0 and rec[0]["model"] == "scripted" and rec[0]["process"]
    calls = [e for e in rec if "t0" in e]
    assert all(e["t0"] <= e["t1"] for e in calls) and all(a["t0"] <= b["t0"] for a, b in zip(calls, calls[1:]))
    kinds = {e["k"] for e in rec}
    assert {"run", "read", "write", "stat", "model", "projected", "clock", "sleep"} <= kinds
    clock = [e["t"] for e in rec if e["k"] == "clock"]  # every reading of the controller's clock, in order
    assert clock == sorted(clock) and all(e["s"] == 0.25 for e in rec if e["k"] == "sleep")
    # a command run again (the launcher's status script) is stored once, read back whole
    raw = [json.loads(line) for line in (d / "recording.jsonl").read_text().splitlines()]
    again = [e for e in raw if "same_cmd" in e]
    assert again and all("cmd" not in e and raw[e["same_cmd"] - 1]["cmd"] == rec[e["n"] - 1]["cmd"] for e in again)
    assert all("command" not in e["result"] for e in rec if e["k"] == "run")  # it is `cmd`
    bash = [e for e in rec if e["k"] == "run" and "_hc='echo looked at it'" in e["cmd"]]  # sent guarded (once.py)
    assert len(bash) == 1 and bash[0]["result"]["stdout"] == "looked at it\n" and bash[0]["result"]["returncode"] == 0
    log = b"".join(base64.b64decode(e["data"]) for e in rec if e["k"] == "read" and e["path"].endswith("/run.log"))
    assert b"ValueError: No valid rounds" in log  # the run's log bytes as they arrived
    models = [e for e in rec if e["k"] == "model"]
    assert len(models) == 2 and models[0]["messages"][1]["content"].startswith("Attempt 1 failed at engine_start (crash). Root cause: ValueError: No valid rounds")
    assert models[1]["reply"]["calls"][0]["name"] == "give_up"
    writes = [e for e in rec if e["k"] == "write"]  # the agent's edit, its bytes as written
    assert [e["path"].rsplit("/", 1)[-1] for e in writes] == ["run.sh"] and b"seed 1" in base64.b64decode(writes[0]["data"])
    assert models[1]["reply"]["message"]["tool_calls"][0]["function"]["name"] == "give_up"
    assert models[0]["tools"] == ["bash", "edit", "relaunch", "give_up"]
    # the journal's model events match the recording's, one for one
    assert len([e for e in Journal.read(d / "journal.jsonl") if e["type"] == "model"]) == len(models)


def test_a_line_torn_by_a_killed_controller_is_cut_off_before_the_next_one(tmp_path):
    from harness.record import Recorder

    path = tmp_path / "recording.jsonl"
    path.write_text('{"n":1,"k":"start"}\n{"n":2,"k":"clock","t":1.')  # killed mid-write
    assert [e["n"] for e in read_recording(path)] == [1]
    rec = Recorder(path)
    rec.add("start")
    rec.close()
    assert [(e["n"], e["k"]) for e in read_recording(path)] == [(1, "start"), (2, "start")]
