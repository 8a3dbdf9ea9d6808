"""Crash safety: the controller is killed with SIGKILL at 20 random moments (seeded) and
`harness continue` resumes it each time. No journal event may be lost or duplicated, no run
that is still alive may be launched a second time, and every session must end exactly as an
uninterrupted one does (same verdicts, same fingerprints, same reason). The recording of each
such session, killed controllers and all, replays to the same end."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.demo import SCRIPT
from harness.remote.local import LocalTransport
from harness.session.detach import holder
from harness.session.journal import Journal
from harness.session.ledger import Ledger
from test_minichain import PROXY_VARS, TARGET, processes_of
from test_sessions import HARNESS, wait_for

KILLS = 20
KEY_ENV = "HARNESS_TEST_MODEL_KEY"


def workdir(root: Path) -> Path:
    """minichain with a configuration fault (03, a declared fix) and a code fault (06, the agent)."""
    work = root / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    for name in ("03-token-margin-2048", "06-reward-split-per-character"):
        subprocess.run(["git", "apply", str(TARGET / "faults" / f"{name}.patch")], cwd=work, check=True)
    return work


def spec(root: Path, url: str) -> Path:
    work = workdir(root)
    path = root / "h.yaml"
    path.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nplaybooks: [minichain]\n"
                    f"launch: {{command: bash run.sh, env: {{PYTHON: {sys.executable}}}, settle: 1}}\n"
                    f"model: {{base_url: '{url}', name: scripted, api_key_env: {KEY_ENV}}}\n")
    return path


def env(home: Path) -> dict:
    return {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"HARNESS_HOME": str(home), KEY_ENV: "k"}


def story(events: list[dict]) -> list[tuple]:
    return [(e["attempt"], e["outcome"], e["fingerprint"]) for e in events if e["type"] == "verdict"]


def check_journal(events: list[dict]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # nothing lost, nothing twice
    launches = Counter(e["attempt"] for e in events if e["type"] == "launch")
    assert set(launches.values()) == {1}, launches  # never a second launch of an attempt's run
    stages = Counter((e["attempt"], e["stage"]) for e in events if e["type"] == "stage")
    assert set(stages.values()) == {1}, stages
    verdicts = Counter(e["attempt"] for e in events if e["type"] == "verdict")
    assert set(verdicts.values()) == {1} and sorted(verdicts) == sorted(launches)
    ends = [e for e in events if e["type"] == "end"]
    assert len(ends) == 1 and events[-1] is ends[0]


@pytest.mark.slow
def test_kill_9_at_random_points_then_continue(tmp_path):
    rng = random.Random(int(os.environ.get("HARNESS_CRASH_SEED", "20261130")))
    with ScriptedServer(ScriptedModel.from_file(SCRIPT)) as server:
        ref_home = tmp_path / "ref"
        ref = subprocess.run([str(HARNESS), "run", str(spec(tmp_path / "r", server.url))], capture_output=True,
                             text=True, env=env(ref_home), timeout=300)
        assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr
        reference = Journal.read(next((ref_home / "sessions").glob("*/journal.jsonl")))
        assert [v[1] for v in story(reference)] == ["crash", "crash", "pass"]

        kills, n = 0, 0
        while kills < KILLS:
            n += 1
            root = tmp_path / f"s{n}"
            home = root / "home"
            r = subprocess.run([str(HARNESS), "run", str(spec(root, server.url)), "--detach"], capture_output=True,
                               text=True, env=env(home), timeout=60)
            assert r.returncode == 0, r.stderr
            sid = r.stdout.split()[1]
            d = home / "sessions" / sid
            while kills < KILLS:
                time.sleep(rng.uniform(0.05, 2.0))
                pid = holder(d)
                if pid is None:
                    break  # the session ended before this kill
                os.kill(pid, signal.SIGKILL)
                kills += 1
                wait_for(lambda: holder(d) is None, "the killed controller's lock to be free", 30)
                c = subprocess.run([str(HARNESS), "continue", sid], capture_output=True, text=True, env=env(home),
                                   timeout=60)
                assert c.returncode == 0, c.stdout + c.stderr
            wait_for(lambda: holder(d) is None and (Journal.read(d / "journal.jsonl") or [{}])[-1].get("type") == "end",
                     "the session to end", 300)
            events = Journal.read(d / "journal.jsonl")
            check_journal(events)
            assert events[-1]["reason"] == "passed", events[-1]
            assert story(events) == story(reference)
            assert processes_of(root / "minichain") == []
            # each attempt's ledger message carries its verdict, however the controllers were killed
            rows = asyncio.run(Ledger(LocalTransport(), str(root / "minichain"), sid).attempts())
            assert [m.rsplit(" -> ", 1)[1].split()[0] for _, _, m in rows] == [v[1] for v in story(events)], rows
            # the killed controllers' recordings replay too: each process up to where it was killed
            r = subprocess.run([str(HARNESS), "replay", str(d)], capture_output=True, text=True, env=env(home), timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
