"""`harness learn` end to end: the all-faults demo session (the scripted model fixes six faults),
learned, then fresh sessions of the same faults with the learned playbook and no model at all.
Real processes, real git ledger, the real analyzer; nothing of the harness is patched."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from corpus_eval import cases

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.xdist_group("learn_e2e")
FAULTS = sorted(p.stem for p in (ROOT / "fixtures/targets/minichain/faults").glob("*.patch"))
HANG = "07-multiturn-no-timeout-hang"  # its fix touches two files: a hint, not a declared fix


def _harness(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args], env=env,
                       capture_output=True, text=True, timeout=600)
    if check and r.returncode:
        raise AssertionError(f"harness {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def _journal(home: Path, session: str) -> list[dict]:
    return [json.loads(x) for x in (home / "sessions" / session / "journal.jsonl").read_text().splitlines()]


def _session_of(out: str) -> str:
    return re.search(r"session (\d{8}-\d{6}-[0-9a-f]+): ", out).group(1)


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """(env, the demo's session id, the learned playbook file, `harness learn --json`'s answer)."""
    import os

    home = tmp_path_factory.mktemp("home")
    env = dict(os.environ, HARNESS_HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), COLUMNS="200")
    demo = _harness("demo", env=env)
    session = _session_of(demo.stdout)
    out = tmp_path_factory.mktemp("team") / "pangu-learned.yaml"
    answer = json.loads(_harness("learn", session, "-o", str(out), "--json", env=env).stdout)
    return env, home, session, out, answer


def test_learn_proposes_what_the_agent_fixed(learned):
    env, home, session, out, answer = learned
    agent_fixed = {e["attempt"] for e in _journal(home, session) if e["type"] == "tool" and e.get("end") == "relaunch"}
    rows = {r["attempt"]: r for r in answer["proposals"]}
    assert set(rows) == agent_fixed  # the declared fixes' attempts are skipped, each with why
    assert all(s["why"] for s in answer["skipped"])
    assert all(r["ok"] for r in rows.values()), [r["problems"] for r in rows.values() if not r["ok"]]
    pb = yaml.safe_load(out.read_text())
    assert pb["name"] == "pangu-learned" and pb["extends"] == ["minichain"]
    entries = pb.get("signatures", []) + pb.get("metric_rules", [])
    assert {e["evidence"] for e in entries} == {f"session {session} attempt {n}" for n in agent_fixed}
    # the hang's fix touched two files: its entry is a hint with the diff, not a fix
    kinds = {r["attempt"]: r["kind"] for r in rows.values()}
    hang_attempt = next(n for n, r in rows.items() if r["entry"].get("outcome") == "hang")
    assert kinds[hang_attempt] == "hint" and "diff --git" in rows[hang_attempt]["entry"]["hint"]
    assert "fix" not in rows[hang_attempt]["entry"]
    assert sum("fix" in r["entry"] for r in rows.values()) == len(rows) - 1
    # generalised: the run's temporary paths and numbers are masked, the stable words stay
    regexes = [r["entry"]["regex"] for r in rows.values() if "regex" in r["entry"]]
    assert not any("/tmp/" in rx for rx in regexes)
    assert any(r"\d" in rx for rx in regexes)
    listing = _harness("playbook", "check", str(out), env=env)
    assert "ok" in listing.stdout


def test_fresh_offline_session_fixes_them_without_a_model(learned):
    env, home, _, out, _ = learned
    r = _harness("demo", "--offline", "-p", str(out), env=env, check=False)
    assert r.returncode == 1, r.stdout  # it ends on the hang, whose learned knowledge is a hint
    events = _journal(home, _session_of(r.stdout))
    assert not [e for e in events if e["type"] == "model"]
    learned_fixes = [e for e in events if e["type"] == "fix" and "learned from session" in e.get("origin", "")]
    assert len(learned_fixes) == 3 and all(e["applied"] for e in learned_fixes)  # the three before the hang
    end = next(e for e in events if e["type"] == "end")
    assert end["reason"] == "gave_up"
    last = [e for e in events if e["type"] == "verdict"][-1]
    assert last["outcome"] == "hang" and "diff --git" in last["root"]["hint"]
    report = (home / "sessions" / _session_of(r.stdout) / "report.md").read_text()
    assert "fixed by the learned playbook pangu-learned (from session" in report
    assert "- hint: (playbook pangu-learned" in report


def test_fresh_offline_session_without_the_hang_passes(learned):
    env, home, _, out, answer = learned
    faults = [a for f in FAULTS if f != HANG for a in ("--fault", f)]
    r = _harness("demo", "--offline", "-p", str(out), *faults, env=env)
    events = _journal(home, _session_of(r.stdout))
    assert not [e for e in events if e["type"] == "model"]
    assert next(e for e in events if e["type"] == "end")["reason"] == "passed"
    used = {e["signature"] for e in events if e["type"] == "fix" and "learned from session" in e.get("origin", "")}
    assert used == {r["entry"]["id"] for r in answer["proposals"] if "fix" in r["entry"]}


def test_learned_playbook_fires_on_no_healthy_log_and_no_other_failure(learned):
    """Every learned signature against every shipped log fixture and every corpus case: it may
    match only logs of the very failure it refines."""
    _, _, _, out, _ = learned
    pb = yaml.safe_load(out.read_text())
    sigs = [(s["id"], re.compile(s["regex"]), re.search(r"refines (\S+)", s.get("note", "")).group(1))
            for s in pb["signatures"]]
    logs = []
    for verdict in sorted((ROOT / "fixtures/logs").glob("*.verdict.json")):
        root = json.loads(verdict.read_text()).get("root_cause") or {}
        logs.append((verdict.with_name(verdict.name.replace(".verdict.json", ".log")), root.get("signature")))
    logs += [(c["path"], None) for c in cases() if c["path"].is_file()]
    assert len(logs) > 120  # the 24 fixture logs and the corpus cases
    for path, same in logs:
        text = path.read_text(encoding="utf-8", errors="replace")
        for sid, rx, refines in sigs:
            if refines != same:
                assert not rx.search(text), f"{sid} fires on {path.name}"
