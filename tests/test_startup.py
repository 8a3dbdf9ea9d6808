"""The everyday commands stay light (they load none of the heavy libraries), the CLI modules do
not import each other in a circle, and the disk memo of the playbooks' regexes is content-keyed,
shared between processes and harmless when broken. Times are measured by bench/startup_bench.py,
not here."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.memo import DiskMemo

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "harness" / "cli"
LOG = ROOT / "fixtures" / "logs" / "pangu-fp16-loss-nan.log"
HEAVY = ("openai", "asyncssh", "paramiko", "apprise", "httpx", "harness.spec", "harness.remote.transport")
SID = "20261202-060000-abcd"

# Runs the CLI in-process and prints, at exit, which heavy modules it loaded.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.__stderr__.write("LOADED " + json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in {heavy!r} or m in {heavy!r})) + "\\n"))
sys.argv = ["harness", *{args!r}]
from harness.cli import main
main()
"""


def _home(tmp_path: Path) -> dict:
    d = tmp_path / "home" / "sessions" / SID
    (d / "attempts").mkdir(parents=True)
    for name in ("journal.jsonl", "spec.yaml"):
        shutil.copy(ROOT / "fixtures" / "sessions" / "all-faults" / name, d / name)
    shutil.copy(LOG, d / "attempts" / "01.log")
    os.utime(d / "journal.jsonl", ns=(1, 1))
    (d / "diff.patch").write_text("diff --git a/x b/x\n")  # as the session's last report saved it
    return {**os.environ, "HARNESS_HOME": str(tmp_path / "home"), "HARNESS_CACHE": str(tmp_path / "cache")}


@pytest.mark.parametrize("args", [["--help"], ["status"], ["sessions"], ["logs", SID], ["report", SID],
                                  ["phone"], ["analyze", str(LOG)]], ids=lambda a: a[0])
def test_everyday_commands_load_no_heavy_library(tmp_path, args):
    env = _home(tmp_path) | {"SSH_ORIGINAL_COMMAND": "status"}
    r = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, args=args)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stderr.rsplit("LOADED ", 1)[1])
    assert loaded == [], f"harness {' '.join(args)} loaded {loaded}"


def test_report_of_a_finished_session_uses_the_saved_diff_until_the_journal_grows(tmp_path):
    env = _home(tmp_path)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "report", SID], capture_output=True, text=True,
                       env=env, timeout=60)
    assert "diff --git a/x b/x" in r.stdout and "unavailable" not in r.stderr
    journal = tmp_path / "home" / "sessions" / SID / "journal.jsonl"
    with open(journal, "a") as fh:  # the session was continued: the saved diff is stale
        fh.write(json.dumps({"type": "note", "ts": 1.0, "text": "continued"}) + "\n")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "report", SID], capture_output=True, text=True,
                       env=env, timeout=120)
    assert "diff --git a/x b/x" not in r.stdout
    assert "the cumulative diff is unavailable" in r.stderr  # it asked the (long gone) host


def _modules_of_cli() -> dict[str, set[str]]:
    """harness.cli.X -> the harness.cli modules it imports (relative imports resolved)."""
    out = {}
    for f in CLI.glob("*.py"):
        name = "harness.cli" if f.stem == "__init__" else f"harness.cli.{f.stem}"
        pkg = "harness.cli"
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg if node.level == 1 else ("harness" if node.level == 2 else "")
                mod = ".".join(x for x in (base, node.module) if x) if node.level else node.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t == "harness.cli" or t.startswith("harness.cli.")} - {name}
        out[name] = deps
    return out


def test_cli_group_modules_never_import_the_cli_package_or_each_other_in_a_circle():
    deps = _modules_of_cli()
    assert len(deps) >= 8  # the package, __main__ and a module per command group
    for mod, ds in deps.items():
        if mod not in ("harness.cli", "harness.cli.__main__"):
            assert "harness.cli" not in ds, f"{mod} imports the cli package back"
    def reach(m, seen):
        for d in deps.get(m, ()):
            if d not in seen:
                seen.add(d)
                reach(d, seen)
        return seen
    for mod in deps:
        assert mod not in reach(mod, set()), f"{mod} is in an import circle"


def test_python_dash_m_harness_cli_sees_every_command():
    r = subprocess.run([sys.executable, "-m", "harness.cli", "--help"], capture_output=True, text=True, timeout=60)
    for command in ("analyze", "run", "demo", "continue", "status", "report", "export", "replay", "doctor", "eval"):
        assert command in r.stdout, command


def test_memo_is_shared_between_processes_and_gives_the_same_verdict(tmp_path):
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "harness.cli", "analyze", "--json", str(LOG)]
    cold = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert [f.split("-")[0] for f in files] == ["gates", "literals", "regex"], files
    warm = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert cold.returncode == warm.returncode == 0
    assert json.loads(cold.stdout) == json.loads(warm.stdout)
    for f in (tmp_path / "cache").iterdir():  # a corrupt memo is an empty one
        f.write_text("{not json")
    broken = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert json.loads(broken.stdout) == json.loads(cold.stdout) and broken.stderr == ""
    assert all(json.loads(f.read_text()) for f in (tmp_path / "cache").iterdir())  # and it was written again


def test_a_cache_that_cannot_be_written_costs_only_time(tmp_path):
    (tmp_path / "file").write_text("x")
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "file" / "cache")}  # under a file: mkdir fails
    r = subprocess.run([sys.executable, "-m", "harness.cli", "analyze", "--json", str(LOG)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stderr == "" and json.loads(r.stdout)["outcome"]


def test_memo_versions_and_bounds(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    calls = []
    a = DiskMemo("t", "v1")
    assert a.get("k", lambda: calls.append(1) or [1, "x"]) == [1, "x"]
    assert a.get("k", lambda: calls.append(1) or "other") == [1, "x"] and len(calls) == 1
    a.save()
    assert DiskMemo("t", "v1").get("k", lambda: "recomputed") == [1, "x"]  # read back by the next process
    assert DiskMemo("t", "v2").get("k", lambda: "recomputed") == "recomputed"  # other code, other file
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_the_phone_gets_the_40_column_report(tmp_path):
    env = _home(tmp_path) | {"SSH_ORIGINAL_COMMAND": f"report {SID}"}
    env.pop("COLUMNS", None)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "phone"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "### attempt 11" in r.stdout and max(map(len, r.stdout.splitlines())) <= 40


def test_a_small_memo_keeps_the_most_recently_used(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    m = DiskMemo("s", "v1", max_entries=2)
    for k in ("a", "b"):
        m.get(k, lambda k=k: k)
    m.save()
    m = DiskMemo("s", "v1", max_entries=2)
    assert m.get("a", lambda: "recomputed") == "a"  # used: now the most recent
    m.get("c", lambda: "c")
    m.save()
    again = DiskMemo("s", "v1", max_entries=2)
    assert [again.get(k, lambda: "recomputed") for k in ("a", "c", "b")] == ["a", "c", "recomputed"]
