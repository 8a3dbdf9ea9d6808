"""A run that ends before the chain passed and printed no error the rules know is over, never
`running`: a crash at the stage it had not passed, its last line for the root cause, the exit
status in the hint; a SIGKILL with nothing said is the host's OOM killer's class. Real processes
through the local transport."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analyze import Analyzer
from harness.analyze.verdict import ended
from harness.playbook import load_playbook
from harness.session.journal import Journal
from test_sessions import harness

ENGINE = "echo 'INFO 12-04 10:00:00 api_server.py:1 Starting vLLM API server on http://127.0.0.1:8000'\n"


def verdict_of(tmp_path: Path, script: str) -> tuple[dict, str]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "run.sh").write_text(ENGINE + script)
    spec = tmp_path / "h.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nlaunch: {{command: bash run.sh}}\n"
                    "playbooks: [minichain]\nbudgets: {relaunches: 0, infra_retries: 0}\n")
    r = harness("run", str(spec), "--offline", home=home, timeout=120)
    session = next((home / "sessions").iterdir())
    verdicts = [e for e in Journal.read(session / "journal.jsonl") if e["type"] == "verdict"]
    assert len(verdicts) == 1, r.stdout + r.stderr
    return verdicts[0], r.stdout


@pytest.mark.parametrize("script, code, hint", [
    ("echo 'building the rollout workers'\nexit 3\n", 3, "exit status 3"),
    ("echo 'no more prompts: done'\n", 0, "stopped on its own"),
])
def test_a_run_that_ends_saying_nothing_wrong_is_a_crash_at_the_next_stage(tmp_path, script, code, hint):
    v, out = verdict_of(tmp_path, script)
    assert v["exit_code"] == code and v["reason"] == "exited", v
    assert v["outcome"] == "crash" and v["failed_stage"] == 2 and v["last_stage_passed"] == 1, v
    root = v["root"]
    assert root["signature"] == "ended" and root["category"] == "other", root
    assert root["text"] == script.split("'")[1] and root["stage"] == "completion", root
    assert hint in root["hint"], root
    assert "crash" in out and "running" not in out, out


def test_a_run_killed_saying_nothing_is_the_oom_killers_class(tmp_path):
    """The process launcher's shell reports the kill (`cmd: line 1: PID Killed`), which the
    playbook reads; through it or without it (a scheduler's exit code alone), the class is oom."""
    v, _ = verdict_of(tmp_path, "echo 'loading checkpoint shards'\nkill -KILL $$\n")
    assert v["exit_code"] == 137 and v["outcome"] == "crash", v
    assert v["root"]["category"] == "oom" and v["root"]["signature"] in ("host_oom_sigkill", "ended"), v["root"]


@pytest.mark.parametrize("last, code, category", [
    ("loading checkpoint shards", 137, "oom"),   # a scheduler's SIGKILL, nothing printed about it
    ("loading checkpoint shards", -9, "oom"),    # Python's subprocess says it so
    ("loading checkpoint shards", 1, "other"),
    ("connect to 10.0.0.2:29500 failed: Connection refused", 1, "network_proxy"),  # its last lines' family
])
def test_the_ended_root_cause_reads_the_last_lines_then_the_exit_status(last, code, category):
    an = Analyzer(load_playbook(["minichain"]))
    an.feed(f"Starting vLLM API server on http://127.0.0.1:8000\n{last}\n".encode())
    an.finish()
    f = ended(an, code, 2)
    assert (f.category, f.text, f.outcome, f.stage) == (category, last, "crash", 2), f
    assert f"exit status {code}" in f.detail and ("dmesg" in f.hint) == (code in (137, -9)), f
