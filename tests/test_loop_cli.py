"""The loop's commands as a user runs them (real processes): `harness demo` ends green and says
where the report is and what the harness's own overhead was; `harness diff` and `harness undo`
read and rewind the ledger; `harness run` exits 1 when the chain does not pass and 2 with one
line on bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_sessions import harness

# the module fixture is built once: its tests share one xdist worker
pytestmark = pytest.mark.xdist_group("test_loop_cli")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return harness("demo", home=home, timeout=600), home


@pytest.mark.slow
def test_demo_ends_green_and_reports(demo):
    r, home = demo
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = r.stdout
    assert "The model is scripted" in out
    assert re.search(r"chain passed: 11 attempts in \d+ s; 4 declared fix\(es\)", out), out[-2000:]
    assert re.search(r"own overhead [\d.]+ s = [\d.]+% of the total", out)
    report = Path(re.search(r"report: (\S+)", out).group(1))
    assert report.is_file() and "**chain passed**" in report.read_text()
    assert r.stderr == ""


def test_diff_and_undo_read_and_rewind_the_ledger(demo):
    r, home = demo
    session = re.search(r"harness diff (\S+)", r.stdout).group(1)
    workdir = Path(re.search(r"workdir: (\S+)", r.stdout).group(1))
    d = harness("diff", session, home=home)
    assert d.returncode == 0
    assert '-    table["decoder.final_layernorms.0.weight"]' in d.stdout
    assert '+    table["decoder.final_layernorm.weight"]' in d.stdout
    u = harness("undo", session, "--to", "1", home=home)
    assert u.returncode == 0 and "minichain/bridge.py" in u.stdout
    assert "final_layernorms.0" in (workdir / "minichain" / "bridge.py").read_text()  # the faulted original
    assert harness("diff", home=home).stdout == d.stdout  # the latest session by default; the ledger is intact


def test_run_exits_1_when_the_chain_does_not_pass(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text("echo 'Traceback (most recent call last):'\necho 'ValueError: broken on purpose'\nexit 1\n")
    spec = tmp_path / "harness.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {work}\nlaunch:\n  command: bash run.sh\n  settle: 0.5\n")
    r = harness("run", str(spec), "--offline", home=tmp_path / "home")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"session \S+: gave_up after 1 attempt\(s\); report: ", r.stdout)


@pytest.mark.parametrize("args,message", [
    (["run", "missing.yaml"], "missing.yaml"),
    (["run", "SPEC", "-c", "budgets.relaunches"], "use key.sub=value"),
    (["diff", "no-such-session"], "no session 'no-such-session'"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    spec = tmp_path / "harness.yaml"
    spec.write_text(f"host: localhost\ntransport: local\nworkdir: {tmp_path}\nlaunch: {{command: 'true'}}\n")
    r = harness(*[str(spec) if a == "SPEC" else a for a in args], home=tmp_path / "home")
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_broken_playbook_is_one_line_and_leaves_no_session(tmp_path):
    (tmp_path / "bad.yaml").write_text("signatures:\n  - {id: x, regex: 'a', category: other}\n")
    (tmp_path / "h.yaml").write_text(f"host: localhost\ntransport: local\nworkdir: {tmp_path}\n"
                                     "launch: {command: 'true'}\nplaybooks: [bad.yaml]\n")
    home = tmp_path / "home"
    for extra in ([], ["--detach"]):
        r = harness("run", str(tmp_path / "h.yaml"), "--offline", *extra, home=home)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "bad.yaml:1" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr + r.stdout
    assert not (home / "sessions").exists() or not any((home / "sessions").iterdir())
