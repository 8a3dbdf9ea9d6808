"""Sessions for people, through real processes: the background controller, its lock, stop,
re-attaching a live run, the phone's forced command over the real loopback sshd, nightly."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.session.detach import take_lock
from harness.session.journal import Journal
from sshd import keygen
from test_minichain import PROXY_VARS, TARGET, processes_of

HARNESS = Path(sys.executable).parent / "harness"


def harness(*args: str, home: Path, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"HARNESS_HOME": str(home), "COLUMNS": "160"}
    return subprocess.run([str(HARNESS), *args], capture_output=True, text=True, env=env, timeout=timeout, **kw)


def wait_for(predicate, what: str, limit: float = 120.0):
    """Poll a condition a background process will make true (bounded; not a timing assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def journal(home: Path, session: str) -> list[dict]:
    return Journal.read(home / "sessions" / session / "journal.jsonl")


def long_run_spec(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text("echo 'minichain driver pid=1: config x, seed 0'\nexec sleep 300\n")
    spec = tmp_path / "h.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nlaunch: {{command: bash run.sh}}\n"
                    "playbooks: [minichain]\n")
    return spec


def session_of(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def test_detach_status_stop_keep_run_and_a_single_controller(tmp_path):
    home, spec = tmp_path / "home", long_run_spec(tmp_path)
    sid = session_of(harness("run", str(spec), "--detach", "--offline", home=home))
    wait_for(lambda: any(e["type"] == "launch" for e in journal(home, sid)), "the launch")
    st = json.loads(harness("status", sid, "--json", home=home).stdout)
    assert st["running"] and st["attempt"] == 1 and st["doing"] == "watching attempt 1"
    lines = harness("status", sid, home=home).stdout.splitlines()
    assert lines[0] == f"session {sid}" and all(len(x) <= 40 for x in lines)

    again = harness("continue", sid, home=home)  # one controller per session
    assert again.returncode == 2 and "already running (pid" in again.stderr

    stop = harness("stop", sid, "--keep-run", home=home)  # the controller goes, the run stays
    assert stop.returncode == 0 and "run left alive" in stop.stdout
    assert journal(home, sid)[-1]["reason"] == "stopped" and processes_of(tmp_path / "work")

    # two `continue`s at once: one starts a controller, the other is told it runs
    procs = [subprocess.Popen([str(HARNESS), "continue", sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ, HARNESS_HOME=str(home))) for _ in range(2)]
    outs = [p.communicate(timeout=60) + (p.returncode,) for p in procs]
    assert sorted(o[2] for o in outs) == [0, 2], outs
    wait_for(lambda: any("re-attached" in e.get("text", "") for e in journal(home, sid)), "the re-attach")
    launches = [e for e in journal(home, sid) if e["type"] == "launch"]
    assert len(launches) == 1  # the live run was re-attached, never launched twice

    assert harness("stop", sid, home=home).returncode == 0
    ev = journal(home, sid)
    assert ev[-1]["type"] == "end" and ev[-1]["reason"] == "stopped"
    assert [e["type"] for e in ev].count("continue") == 1
    wait_for(lambda: not processes_of(tmp_path / "work"), "the run to be gone")
    assert "stopped" in harness("sessions", home=home).stdout


def minichain_fault03(tmp_path: Path) -> Path:
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "03-token-margin-2048.patch")], cwd=work, check=True)
    spec = tmp_path / "h.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nplaybooks: [minichain]\n"
                    f"launch: {{command: bash run.sh, env: {{PYTHON: {sys.executable}}}, settle: 1}}\n"
                    "budgets: {relaunches: 0}\n")
    return spec


def phone_key(ssh_lab, tmp_path: Path, forced: str):
    """A phone's key in box's authorized_keys with `forced` as its command (the README's line):
    (the keys file, its text before, `ssh(*words)` logging in with that key)."""
    key = tmp_path / "phone_key"
    pub = keygen(key)
    keys = ssh_lab.servers["box"].root / "authorized_keys"
    saved = keys.read_text()
    keys.write_text(saved + f'command="{forced}",restrict {pub}\n')

    def ssh(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(ssh_lab.ssh_config), "-i", str(key), "-o", "IdentitiesOnly=yes",
                               "-o", "BatchMode=yes", "box", *words], capture_output=True, text=True, timeout=60)
    return keys, saved, ssh


def test_phone_continue_disconnect_and_status_over_ssh(ssh_lab, tmp_path):
    """The phone's key runs `harness phone` as its forced command; `ssh box continue` returns at
    once, the session goes on after the SSH session ended, and a later `ssh box status` shows it."""
    home = tmp_path / "home"
    r = harness("run", str(minichain_fault03(tmp_path)), "--offline", home=home)
    assert r.returncode == 1 and "budget:relaunches" in r.stdout, r.stdout + r.stderr  # the fix needs a relaunch
    sid = r.stdout.split()[1]
    keys, saved, ssh = phone_key(ssh_lab, tmp_path, f"HARNESS_HOME={home} {HARNESS} phone")
    try:
        cont = ssh("continue", "--offline")
        assert cont.returncode == 0 and f"continuing {sid} in the background" in cont.stdout, cont.stdout + cont.stderr
        assert "fresh relaunches budget" in cont.stdout
        wait_for(lambda: [e["type"] for e in journal(home, sid)].count("end") == 2, "the session to end again")
        status = ssh("status")
        assert status.returncode == 0 and "ended: passed" in status.stdout, status.stdout
        assert all(len(x) <= 40 for x in status.stdout.splitlines())
        refused = ssh("rm", "-rf", "/")
        assert refused.returncode == 2 and "allowed: continue, status, stop, report, logs, sessions" in refused.stderr
    finally:
        keys.write_text(saved)
    assert [e["reason"] for e in journal(home, sid) if e["type"] == "end"] == ["budget:relaunches", "passed"]


@pytest.mark.slow
def test_nightly_exit_codes_and_no_overlap(tmp_path):
    home = tmp_path / "home"
    passing = minichain_fault03(tmp_path)
    passing.write_text(passing.read_text().replace("budgets: {relaunches: 0}", "budgets: {relaunches: 2}"))
    (tmp_path / "f").mkdir()
    failing = long_run_spec(tmp_path / "f")
    (tmp_path / "f" / "work" / "run.sh").write_text("echo 'Traceback (most recent call last):'\necho 'ValueError: no'\nexit 3\n")
    unreachable = tmp_path / "u.yaml"
    unreachable.write_text(f"host: 127.0.0.1\nport: 1\nworkdir: {tmp_path}\nlaunch: {{command: 'true'}}\n")
    assert harness("nightly", str(passing), "--offline", home=home).returncode == 0
    assert harness("nightly", str(passing), str(failing), "--offline", home=home).returncode == 1
    r = harness("nightly", str(unreachable), "--offline", home=home)
    assert r.returncode == 2 and "could not run" in r.stdout
    lock_dir = home / "nightly" / hashlib.sha1(str(passing.resolve()).encode()).hexdigest()[:16]
    fd = take_lock(lock_dir)  # a nightly session of this spec is still running
    try:
        r = harness("nightly", str(passing), "--offline", home=home)
        assert r.returncode == 2 and "still running; skipped" in r.stdout
    finally:
        os.close(fd)


REFUSED = ["report --md {evil}", "report --html={evil}", "report x --md {evil}", "logs ../../../etc/passwd",
           "status /etc/passwd", "continue --fg", "status; touch {evil}", "$(touch {evil})", "sessions x",
           "export {sid} {evil}", "run {evil}", "stop --keep-run=1", "status -- x", "logs {sid} {sid}"]


@pytest.mark.slow
def test_the_phone_key_can_do_what_it_says_and_nothing_more(ssh_lab, tmp_path):
    """The README's authorized_keys line, over the real sshd: each refused form writes nothing and
    says what is allowed; `continue` gets the model's key from the 0600 env file, never the line."""
    home, cfg = tmp_path / "home", tmp_path / "config"
    spec = minichain_fault03(tmp_path)
    spec.write_text(spec.read_text() + "model: {base_url: 'http://127.0.0.1:9/v1', name: m, api_key_env: PHONE_TEST_KEY}\n")
    r = harness("run", str(spec), "--offline", home=home)
    assert "budget:relaunches" in r.stdout, r.stdout + r.stderr
    sid = r.stdout.split()[1]
    keys, saved, ssh = phone_key(ssh_lab, tmp_path, f"HARNESS_HOME={home} XDG_CONFIG_HOME={cfg} {HARNESS} phone")
    evil = tmp_path / "evil"
    try:
        for form in REFUSED:
            r = ssh(form.format(evil=evil, sid=sid))
            assert r.returncode == 2 and "not allowed" in r.stderr and len(r.stderr.splitlines()) == 1, (form, r.stderr)
            assert not evil.exists(), form
        assert ssh(f"report {sid}").stdout.startswith(f"# harness session {sid}")
        no_key = ssh(f"continue {sid}")  # the controller would have no key: said at once, nothing started
        assert no_key.returncode == 2 and "PHONE_TEST_KEY" in no_key.stderr, no_key.stdout + no_key.stderr
        env_file = cfg / "harness" / "env"
        env_file.parent.mkdir(parents=True)
        env_file.write_text("# keys for the phone's continue\nexport PHONE_TEST_KEY='k-123'\n")
        env_file.chmod(0o644)
        loose = ssh(f"continue {sid}")
        assert loose.returncode == 2 and f"chmod 600 {env_file}" in loose.stderr
        env_file.chmod(0o600)
        cont = ssh(f"continue {sid}")
        assert cont.returncode == 0 and f"continuing {sid}" in cont.stdout, cont.stdout + cont.stderr
        wait_for(lambda: [e["type"] for e in journal(home, sid)].count("end") == 2, "the session to end again")
    finally:
        keys.write_text(saved)
    assert "k-123" not in keys.read_text() + "".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())


@pytest.mark.parametrize("cmd", ["report", "sessions"])
def test_phone_allows_only_its_commands_locally(tmp_path, cmd):
    env = dict(os.environ, HARNESS_HOME=str(tmp_path), SSH_ORIGINAL_COMMAND="reboot now")
    r = subprocess.run([str(HARNESS), "phone"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stderr.startswith("error: not allowed: reboot;") and cmd in r.stderr


def test_logs_and_attach_show_an_ended_session(tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text("echo 'hello from the run'\necho 'Traceback (most recent call last):'\n"
                                 "echo 'ValueError: broken on purpose'\nexit 1\n")
    spec = tmp_path / "h.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nlaunch: {{command: bash run.sh, settle: 0.5}}\n")
    assert harness("run", str(spec), "--offline", home=home).returncode == 1
    logs = harness("logs", home=home)
    assert logs.returncode == 0 and "hello from the run" in logs.stdout and "ValueError: broken" in logs.stdout
    no_ctl = harness("logs", "--controller", home=home)
    assert no_ctl.returncode == 2 and "never ran in the background" in no_ctl.stderr
    att = harness("attach", home=home, timeout=60)  # an ended session: its story, then it returns
    assert att.returncode == 0 and "attempt 1: crash" in att.stdout and "session ended: gave_up" in att.stdout
