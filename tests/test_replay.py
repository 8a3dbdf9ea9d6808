"""Replay: a recorded session run again through the real controller against its recording, on
its recorded clock. The same session replays green (one controller process or several: a
`continue` after a budget, a stop); a replay that leaves its recording stops at the first call
the recording does not have, and says what was expected and what came."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

import pytest

from harness.agent.scripted import ScriptedModel
from harness.record import read_recording
from harness.replay.run import replay_fixture
from harness.replay.tape import Divergence, ReplayTransport, Tape
from harness.session.journal import Journal
from harness.session.runner import run_spec
from harness.spec import dump_spec
from test_loop import FAILING, LOOK_AND_RELAUNCH, spec_for
from test_sessions import harness

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sessions"


def recorded_session(tmp_path: Path, **spec_over) -> tuple[Path, object]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "run.sh").write_text(FAILING)
    spec = spec_for(work, **spec_over)
    d = tmp_path / "sessions" / "s-replay"
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.yaml").write_text(dump_spec(spec))
    return d, spec


def replay(d: Path, tmp_path: Path):
    return asyncio.run(replay_fixture(d, tmp_path / "scratch"))


def test_a_recorded_session_replays_to_the_same_end_with_the_same_calls(tmp_path):
    d, spec = recorded_session(tmp_path, budgets={"relaunches": 2})
    ses = asyncio.run(run_spec(spec, d, model=ScriptedModel(LOOK_AND_RELAUNCH)))
    assert ses.state.ended["reason"] == "budget:relaunches"
    out = replay(d, tmp_path)
    assert out.ok, (out.divergence, out.differences)
    assert (out.recorded_end, out.replayed_end, out.processes) == ("budget:relaunches", "budget:relaunches", 1)
    assert out.calls == len(read_recording(d / "recording.jsonl")) - 1  # every call but the start entry
    # the replayed journal is the recorded one, event for event (times of writing aside)
    replayed = Journal.read(tmp_path / "scratch" / "s-replay" / "journal.jsonl")
    recorded = Journal.read(d / "journal.jsonl")
    assert [{k: v for k, v in e.items() if k != "t"} for e in replayed] == \
           [{k: v for k, v in e.items() if k != "t"} for e in recorded]
    # and no second of the recorded run was waited for
    assert out.virtual_seconds > 0


def test_a_continued_session_replays_process_by_process(tmp_path):
    d, spec = recorded_session(tmp_path, budgets={"relaunches": 1})
    model = ScriptedModel(LOOK_AND_RELAUNCH)
    asyncio.run(run_spec(spec, d, model=model))
    ses = asyncio.run(run_spec(spec, d, model=model))  # `harness continue`: a fresh budget
    assert [e["reason"] for e in Journal.read(d / "journal.jsonl") if e["type"] == "end"] == ["budget:relaunches"] * 2
    assert len(ses.state.attempts) == 4
    out = replay(d, tmp_path)
    assert out.ok and out.processes == 2, (out.divergence, out.differences)


def test_a_stopped_session_replays_its_stop(tmp_path):
    """`harness stop` cancels the controller mid-run: the recording marks the call it cut short,
    the replay cuts the same call, stops the run the same way and ends `stopped`."""
    d, spec = recorded_session(tmp_path, launch={"env": {"DELAY": "30", "PYTHON": sys.executable}})

    async def record_then_stop():
        box: dict = {}
        task = asyncio.create_task(run_spec(spec, d, model=ScriptedModel([]), on_session=lambda s: box.update(s=s)))
        while not (box.get("s") and box["s"].state.attempts and box["s"].live):
            await asyncio.sleep(0.05)  # until the run is launched and watched
        box["s"].stop_detail = "stopped by the test"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(record_then_stop())
    assert any(e.get("cancelled") for e in read_recording(d / "recording.jsonl"))
    out = replay(d, tmp_path)
    assert out.ok, (out.divergence, out.differences)
    assert out.replayed_end == "stopped"


def test_a_call_the_recording_does_not_have_stops_the_replay_with_a_diff():
    rec = [{"n": 7, "k": "write", "path": "/w/config.yaml", "mode": None,
            "data": base64.b64encode(b"a: 1\nmargin: 2048\nb: 3\n").decode()}]
    tape = Tape(rec, lambda: "attempt 3, after its verdict: crash at stage 2")
    with pytest.raises(Divergence) as e:
        asyncio.run(ReplayTransport(tape).write("/w/config.yaml", b"a: 1\nmargin: 16384\nb: 3\n"))
    text = str(e.value)
    assert text.splitlines()[0] == "diverged at recorded call 7 (attempt 3, after its verdict: crash at stage 2):"
    assert "  -margin: 2048" in text and "  +margin: 16384" in text
    with pytest.raises(Divergence):  # the session's cleanup gets the same answer, not a recorded result
        asyncio.run(ReplayTransport(tape).stat("/w/x"))


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for arg, says in ((str(tmp_path / "empty"), "has no spec.yaml"), (str(tmp_path / "nope.txt"), "not a directory")):
        r = harness("replay", arg, home=tmp_path / "home")
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
