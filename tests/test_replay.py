"""Replay: a recorded session run again through the real controller against its recording, on
its recorded clock. The same session replays green (one controller process or several: a
`continue` after a budget, a stop); a replay that leaves its recording stops at the first call
the recording does not have, and says what was expected and what came."""

from __future__ import annotations

import asyncio
import base64
import json
import re
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
from names import unique

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sessions"


def recorded_session(tmp_path: Path, **spec_over) -> tuple[Path, object]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "run.sh").write_text(FAILING)
    spec = spec_for(work, **spec_over)
    d = tmp_path / "sessions" / unique("s-replay")
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
    # the replayed journal is the recorded one, event for event, to the times (the recorded clock's)
    assert Journal.read(tmp_path / "scratch" / d.name / "journal.jsonl") == Journal.read(d / "journal.jsonl")


def test_a_wall_clock_budget_ends_the_replay_where_it_ended_the_session(tmp_path):
    """Budgets count on the session's clock (the journal's times are its readings too), so an
    hour-long budget replays in no time and runs out at the same call."""
    d, spec = recorded_session(tmp_path, budgets={"wall_clock": 2}, launch={"env": {"DELAY": "30", "PYTHON": sys.executable}})
    ses = asyncio.run(run_spec(spec, d, model=ScriptedModel([])))
    assert ses.state.ended["reason"] == "budget:wall_clock"
    out = replay(d, tmp_path)
    assert out.ok and out.replayed_end == "budget:wall_clock", (out.divergence, out.differences)


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
    import shutil

    (tmp_path / "empty").mkdir()
    damaged = tmp_path / "damaged"
    shutil.copytree(FIXTURES / "stuck", damaged)
    lines = (damaged / "recording.jsonl").read_text().splitlines(keepends=True)
    (damaged / "recording.jsonl").write_text("".join(lines[:4] + ["{not json\n"] + lines[5:]))
    for arg, says in ((str(tmp_path / "empty"), "has no spec.yaml"), (str(tmp_path / "nope.txt"), "not a directory"),
                      (str(damaged), "recording.jsonl:5: corrupt line")):
        r = harness("replay", arg, home=tmp_path / "home")
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ---------------------------------------------------------------- the fixtures CI replays

def fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "recording.jsonl").is_file())


def test_the_fixtures_are_the_three_sessions_the_issue_asks_for():
    ends = {p.name: [e for e in Journal.read(p / "journal.jsonl") if e["type"] == "end"][-1]["reason"]
            for p in fixtures()}
    assert ends == {"all-faults": "passed", "budget": "budget:relaunches", "stuck": "stuck"}
    for p in fixtures():  # recorded over the loopback sshd, and scrubbed on the way out
        spec = (p / "spec.yaml").read_text()
        assert "transport: asyncssh" in spec and json.loads((p / "fixture.json").read_text())["scrubbed"]


def test_every_fixture_replays_green(tmp_path):
    r = harness("replay", *map(str, fixtures()), "--json", home=tmp_path / "home")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    out = json.loads(r.stdout)
    assert [o["ok"] for o in out] == [True] * len(fixtures())
    assert [o["replayed_end"] for o in out] == [o["recorded_end"] for o in out]


def test_step_shows_the_session_event_by_event_at_its_recorded_time(tmp_path):
    r = harness("replay", str(FIXTURES / "stuck"), "--step", home=tmp_path / "home")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"\+ +\d+\.\ds attempt 1: launched run stuck-1 \(pid \d+\)", lines[0]), lines[0]
    times = [float(ln.split("s ", 1)[0][1:]) for ln in lines if ln.startswith("+")]
    assert times == sorted(times) and times[-1] > 1  # the session's own seconds, not the replay's
    assert any("grep -n speculative minichain/server.py" in ln for ln in lines)  # the agent's call…
    assert any(ln.startswith(" " * 14) and "def build_speculative_config" in ln for ln in lines)  # …and what it saw
    assert "session ended: stuck" in r.stdout


def test_the_same_replay_anywhere(tmp_path):
    """Another checkout location, another HOME, time zone, locale and working directory: the
    replay is the same (nothing of the machine it runs on enters it)."""
    import shutil
    import subprocess

    copy = tmp_path / "elsewhere" / "fixture"
    shutil.copytree(FIXTURES / "all-faults", copy)
    runs = []
    for where, extra in ((tmp_path, {}), (tmp_path / "elsewhere", {"TZ": "Asia/Shanghai", "LC_ALL": "C", "HOME": str(tmp_path)})):
        env = {**__import__("os").environ, **extra, "HARNESS_HOME": str(where / "home")}
        keep = where / "kept"
        r = subprocess.run([str(Path(sys.executable).parent / "harness"), "replay", str(copy), "--json", "--keep", str(keep)],
                           cwd=where, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr
        journal = Journal.read(next(keep.glob("*/*/journal.jsonl")))
        runs.append((journal, {k: v for k, v in json.loads(r.stdout)[0].items() if k != "seconds"}))
    assert runs[0] == runs[1]
    assert runs[0][0] == Journal.read(copy / "journal.jsonl")  # and the recorded one, to the times


def test_changing_the_controller_makes_the_replay_fail_with_a_clear_diff(tmp_path):
    """The controller changed: it asks the agent before trying a playbook's declared fix. The
    recording of the session it made before says otherwise, at the first declared fix."""
    import os
    import shutil
    import subprocess

    pkg = tmp_path / "changed"
    shutil.copytree(Path(__file__).resolve().parent.parent / "harness", pkg / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    ctl = pkg / "harness" / "session" / "respond.py"
    old = 'if fix and fix["kind"] != "cleanup_retry" and key not in st.fixes_tried:'
    assert old in ctl.read_text()
    ctl.write_text(ctl.read_text().replace(old, "if False:  # changed: the agent before the declared fix"))
    env = {**os.environ, "PYTHONPATH": str(pkg), "HARNESS_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    cli = [sys.executable, "-c", "import harness, sys; from harness.cli import main; print(harness.__file__); main()"]
    r = subprocess.run([*cli, "replay", str(FIXTURES / "all-faults")], env=env, capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.stdout.splitlines()[0] == str(pkg / "harness" / "__init__.py")  # the changed controller ran
    assert r.returncode == 1, r.stdout + r.stderr
    text = r.stdout
    assert "✗" in text and "the replay left its recording (recorded end: passed)" in text
    first = [e for e in Journal.read(FIXTURES / "all-faults" / "journal.jsonl") if e["type"] == "fix"][0]
    assert f"(attempt {first['attempt']}, after its verdict: crash at stage" in text
    assert "replayed: projected (the budget check before a model request)" in text
    assert "recorded: read " in text or "recorded: write " in text or "recorded: run " in text


def test_a_playbook_file_travels_with_the_exported_fixture(tmp_path):
    import shutil

    from harness.playbook import shipped_dir

    own = tmp_path / "mine" / "my-playbook.yaml"
    own.parent.mkdir()
    own.write_text((shipped_dir() / "minichain.yaml").read_text().replace("\nname: minichain\n", "\nname: my-playbook\n", 1))
    d, spec = recorded_session(tmp_path, playbooks=[str(own)], budgets={"relaunches": 1})
    asyncio.run(run_spec(spec, d, model=ScriptedModel(LOOK_AND_RELAUNCH)))
    r = harness("export", str(d), str(tmp_path / "fixture"), "--scrub", home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    shutil.rmtree(own.parent)  # the fixture, elsewhere: the playbook file is not there
    assert (tmp_path / "fixture" / "my-playbook.yaml").is_file()
    r = harness("replay", str(tmp_path / "fixture"), home=tmp_path / "home")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_scrubbed_value_in_the_root_cause_still_replays(tmp_path):
    """The root cause names a host that scrubbing replaces: the replayed failure's fingerprint (a
    hash of its text) is not the recorded one, and the replay maps the one to the other — in the
    ledger's commit messages and the model's history lines too."""
    d, spec = recorded_session(tmp_path, budgets={"relaunches": 2})
    run = spec.workdir + "/run.sh"
    Path(run).write_text(FAILING.replace("the last is None", "the last is None on gpu-node-17"))
    asyncio.run(run_spec(spec, d, model=ScriptedModel(LOOK_AND_RELAUNCH)))
    assert "gpu-node-17" in [e for e in Journal.read(d / "journal.jsonl") if e["type"] == "verdict"][0]["root"]["text"]
    out = tmp_path / "fixture"
    r = harness("export", str(d), str(out), "--scrub", "--scrub-word", "gpu-node-17", home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    assert b"gpu-node-17" not in (out / "journal.jsonl").read_bytes()
    r = harness("replay", str(out), "--json", home=tmp_path / "home")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)[0]["replayed_end"] == "budget:relaunches"
