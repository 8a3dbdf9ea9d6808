"""Honest state, through real processes: commands that start a controller return 0 only once it
passed its start-up checks; a session that never got going is never the default target; a
controller that fails writes `end` with reason `error`, and `status` says why; a foreground run
survives its terminal hanging up, its pipe closing or its terminal dying, and ends cleanly on SIGTERM; a run the harness stopped is never
re-attached; no view shows a stage passed that the verdict does not count; the session's files
are the user's alone; `harness diff > file` is a patch `git apply` takes; a session that hit a
model error and was continued replays."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.session.journal import Journal
from test_minichain import TARGET, processes_of
from test_sessions import HARNESS, harness, journal, long_run_spec, minichain_fault03, session_of, wait_for


def sessions(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "sessions").iterdir())


def test_detach_and_continue_say_the_controllers_start_up_error(tmp_path):
    home = tmp_path / "home"
    spec = long_run_spec(tmp_path)
    ok = session_of(harness("run", str(spec), "--detach", "--offline", home=home))
    wait_for(lambda: any(e["type"] == "launch" for e in journal(home, ok)), "the launch")
    assert harness("stop", ok, home=home).returncode == 0
    keyed = tmp_path / "keyed.yaml"  # the model's key variable is not set
    keyed.write_text(spec.read_text() + "model: {base_url: 'http://127.0.0.1:9/v1', name: m, api_key_env: NO_SUCH_KEY_VAR}\n")
    r = harness("run", str(keyed), "--detach", home=home)
    assert r.returncode == 2 and r.stdout == "" and "NO_SUCH_KEY_VAR" in r.stderr and len(r.stderr.splitlines()) == 1
    down = tmp_path / "down.yaml"  # nothing listens on the host's port
    down.write_text(f"host: 127.0.0.1\nport: 9\nworkdir: {tmp_path}\nlaunch: {{command: 'true'}}\n")
    r = harness("run", str(down), "--detach", home=home)
    assert r.returncode == 2 and "connection refused" in r.stderr, r.stderr
    failed = [s for s in sessions(home) if s != ok]
    assert len(failed) == 2
    for sid in failed:
        assert [e["type"] for e in journal(home, sid)] == ["start_failed"]
        st = json.loads(harness("status", sid, "--json", home=home).stdout)
        assert st["failed_to_start"] and st["error"] and not st["running"]
    # the sessions that failed to start are never what `status` or `continue` pick by default
    assert json.loads(harness("status", "--json", home=home).stdout)["session"] == ok
    c = harness("continue", "--offline", home=home)
    assert c.returncode == 0 and f"continuing {ok}" in c.stdout, c.stdout + c.stderr
    wait_for(lambda: journal(home, ok)[-1]["type"] == "launch", "the relaunch")
    assert harness("stop", ok, home=home).returncode == 0


def test_a_run_the_harness_stopped_is_relaunched_not_reattached(tmp_path):
    home = tmp_path / "home"
    sid = session_of(harness("run", str(long_run_spec(tmp_path)), "--detach", "--offline", home=home))
    wait_for(lambda: any(e["type"] == "launch" for e in journal(home, sid)), "the launch")
    assert harness("stop", sid, home=home).returncode == 0
    ev = journal(home, sid)
    verdict = next(e for e in ev if e["type"] == "verdict")
    assert verdict["reason"] == "stopped" and ev[-1]["reason"] == "stopped"
    assert harness("continue", sid, "--offline", home=home).returncode == 0
    wait_for(lambda: [e["type"] for e in journal(home, sid)].count("launch") == 2, "attempt 2's launch")
    assert not any("re-attached" in e.get("text", "") for e in journal(home, sid))
    assert harness("stop", sid, home=home).returncode == 0
    wait_for(lambda: not processes_of(tmp_path / "work"), "the run to be gone")


def test_a_controller_error_is_an_end_with_its_cause(tmp_path):
    home = tmp_path / "home"
    spec = tmp_path / "h.yaml"  # the workdir is gone: the ledger cannot snapshot it
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {tmp_path / 'gone'}\nlaunch: {{command: 'true'}}\n")
    r = harness("run", str(spec), "--offline", home=home)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    sid = sessions(home)[0]
    end = journal(home, sid)[-1]
    assert end["type"] == "end" and end["reason"] == "error" and "does not exist" in end["detail"]
    st = json.loads(harness("status", sid, "--json", home=home).stdout)
    assert st["ended"] == "error" and "does not exist" in st["error"]
    lines = harness("status", sid, home=home).stdout.splitlines()  # it never launched: failed to start
    assert lines[1].startswith("failed to start") and lines[3].startswith("error: ")
    assert (home / "sessions" / sid / "report.md").is_file()


def _foreground(tmp_path: Path, out, close_first: bool = False) -> tuple[subprocess.Popen, Path, str]:
    home = tmp_path / "home"
    env = dict(os.environ, HARNESS_HOME=str(home))
    p = subprocess.Popen([str(HARNESS), "run", str(long_run_spec(tmp_path)), "--offline"], stdin=subprocess.DEVNULL,
                         stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    if close_first:  # before the controller wrote its first line: that line, not a later one, meets the closed pipe
        p.stdout.close()
    sid = wait_for(lambda: sessions(home)[0] if (home / "sessions").is_dir() and sessions(home) else None, "the session")
    return p, home, sid


def _goes_on_then_stops_on_sigterm(tmp_path: Path, p: subprocess.Popen, home: Path, sid: str, why: str,
                                   launched: int = 1) -> None:
    log = home / "sessions" / sid / "controller.log"
    wait_for(lambda: log.is_file() and why in log.read_text(), "the note in controller.log")
    wait_for(lambda: any(e["type"] == "launch" for e in journal(home, sid)), "the launch")
    assert p.poll() is None and journal(home, sid)[-1]["type"] != "end"
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 1
    end = journal(home, sid)[-1]
    assert end["type"] == "end" and end["reason"] == "stopped" and end["detail"] == "stopped by SIGTERM"
    text = log.read_text()  # plain lines, the last saying how it ended, and no traceback
    assert "Traceback" not in text and "\x1b[" not in text, text
    assert text.count("attempt 1: launched run") == launched and f"session {sid}: stopped after 1 attempt(s)" in text, text
    wait_for(lambda: not processes_of(tmp_path / "work"), "the run to be stopped")


def test_a_foreground_run_outlives_its_terminal_and_stops_cleanly_on_sigterm(tmp_path):
    p, home, sid = _foreground(tmp_path, subprocess.PIPE)
    while "attempt 1: launched run" not in p.stdout.readline().decode():  # the terminal showed the launch
        pass
    p.send_signal(signal.SIGHUP)  # then went away: the session goes on
    p.stdout.close()  # and nobody reads its output any more
    _goes_on_then_stops_on_sigterm(tmp_path, p, home, sid, "the terminal hung up (SIGHUP)", launched=0)


def test_a_foreground_run_whose_pipe_closes_goes_on(tmp_path):
    # `harness run | tee` and tee died: no SIGHUP, the next line meets a closed pipe
    p, home, sid = _foreground(tmp_path, subprocess.PIPE, close_first=True)
    _goes_on_then_stops_on_sigterm(tmp_path, p, home, sid, "the output could not be written")


def test_a_foreground_run_whose_terminal_dies_goes_on(tmp_path):
    controller, terminal = pty.openpty()
    p, home, sid = _foreground(tmp_path, terminal)  # on a terminal: the live footer is drawn too
    os.close(terminal)
    os.close(controller)  # the terminal is gone without a SIGHUP to this process: writes fail with EIO
    _goes_on_then_stops_on_sigterm(tmp_path, p, home, sid, "the output could not be written")


def test_a_wrong_result_never_shows_its_actor_update_passed(tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "02-grad-scale-func-uninitialised.patch")], cwd=work, check=True)
    spec = tmp_path / "h.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nplaybooks: [minichain]\n"
                    f"launch: {{command: bash run.sh, env: {{PYTHON: {sys.executable}}}, settle: 1}}\n")
    r = harness("run", str(spec), "--offline", home=home)
    assert r.returncode == 1, r.stdout + r.stderr
    sid = sessions(home)[0]
    ev = journal(home, sid)
    verdict = next(e for e in ev if e["type"] == "verdict")
    assert verdict["outcome"] == "wrong_result" and verdict["failed_stage"] == 7
    assert 7 not in [e["stage"] for e in ev if e["type"] == "stage"]  # no ✓ actor_update, live or journaled
    assert "✓ actor_update" not in r.stdout
    st = json.loads(harness("status", sid, "--json", home=home).stdout)
    assert st["reached"] == 6 and st["failed_stage"] == 7
    report = harness("report", sid, home=home).stdout
    assert "passed 6/7 (training_data)" in report and "passed 7/7" not in report
    assert "| 1 | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✗ |" in report


def test_session_files_are_private_and_diff_is_a_patch_git_applies(tmp_path):
    home = tmp_path / "home"
    spec = minichain_fault03(tmp_path)
    spec.write_text(spec.read_text().replace("budgets: {relaunches: 0}", "budgets: {relaunches: 2}"))
    assert harness("run", str(spec), "--offline", home=home).returncode == 0
    d = home / "sessions" / sessions(home)[0]
    for p in [d, *d.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), (p, oct(mode))
    patch = tmp_path / "change.patch"
    with open(patch, "w") as fh:  # stdout is a file: no terminal, no wrapping at 80 columns
        r = subprocess.run([str(HARNESS), "diff"], stdout=fh, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, HARNESS_HOME=str(home)))
    assert r.returncode == 0, r.stderr
    assert "token_margin: 16384" in patch.read_text()
    fresh = tmp_path / "fresh"
    shutil.copytree(TARGET, fresh, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "03-token-margin-2048.patch")], cwd=fresh, check=True)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=fresh, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=fresh, check=True)
    assert "token_margin: 16384" in (fresh / "config.yaml").read_text()


def test_a_session_that_hit_a_model_error_and_was_continued_replays(tmp_path):
    from test_crash import KEY_ENV, env, spec as crash_spec

    from harness.demo import SCRIPT

    with ScriptedServer(ScriptedModel.from_file(SCRIPT), fail=[401]) as server:
        home = tmp_path / "home"
        spec = crash_spec(tmp_path, server.url)
        r = subprocess.run([str(HARNESS), "run", str(spec)], capture_output=True, text=True, env=env(home), timeout=300)
        assert r.returncode == 2 and "401" in r.stderr, r.stdout + r.stderr
        sid = sessions(home)[0]
        assert journal(home, sid)[-1]["reason"] == "error"
        c = subprocess.run([str(HARNESS), "continue", sid, "--fg"], capture_output=True, text=True, env=env(home),
                           timeout=300)
        assert c.returncode == 0, c.stdout + c.stderr
        assert [e["reason"] for e in journal(home, sid) if e["type"] == "end"] == ["error", "passed"]
    assert KEY_ENV in env(home)
    r = subprocess.run([str(HARNESS), "replay", str(home / "sessions" / sid)], capture_output=True, text=True,
                       env=env(home), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    report = harness("report", sid, home=home).stdout
    assert "human interventions: 1" in report
    assert Journal.read(home / "sessions" / sid / "journal.jsonl")
