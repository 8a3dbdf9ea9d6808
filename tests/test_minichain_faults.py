"""minichain's fault patches end to end: each patch, applied with `git apply` to a clean copy
of the target, breaks the real run the way DESIGN.md's table says (failed stage, outcome,
root-cause category), and reversing it (`git apply -R`) makes the run pass again."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.analyze import analyze_file
from harness.chain import STAGES
from harness.playbook import load_playbook
from test_minichain import PROXY_VARS, TARGET, processes_of

FAULTS_DIR = TARGET / "faults"
HANG_LIMIT = 45.0  # seconds a run may take before the test kills it as hung (a hang is usually cut
# short by HANG_SIGN; the bound must hold on a loaded machine for runs that do end)

# patch, outcome, failed stage, root-cause category, regex the root cause's text matches
FAULTS = [
    ("01-final-layernorms-mapping", "crash", "engine_start", "weight_mapping", "final_layernorms.0"),
    ("02-grad-scale-func-uninitialised", "wrong_result", "actor_update", "precision_dtype", "grad_norm:nan"),
    ("03-token-margin-2048", "crash", "completion", "length_limit", "Prompt length exceeds"),
    ("04-speculative-config-without-mtp", "crash", "engine_start", "config_mismatch", "speculative_config"),
    ("05-none-rounds-unfiltered", "crash", "trajectory", "data_format", "No valid rounds"),
    ("06-reward-split-per-character", "crash", "reward", "reward_parsing", "could not convert string to float: '{'"),
    ("07-multiturn-no-timeout-hang", "hang", "trajectory", "timeout", "timed out waiting"),
    ("08-workers-through-proxy", "crash", "task_dispatch", "network_proxy", "Unable to connect to proxy"),
    ("09-precision-aware-optimizer-fp16", "crash", "actor_update", "precision_dtype", "precision-aware optimizer"),
    # the server's warning and access-log line and the agent's 503 come from two processes, in either order
    ("10-parallel-agents-256", "crash", "task_dispatch", "config_mismatch",
     "Exceeded concurrency limit|503"),
]
KILLED_WITHIN = 10.0  # seconds the processes of a run killed as hung may take to be gone
HANG_SIGN = "timed out waiting"  # the agent's watchdog line: the run is stuck, stop waiting for it


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def run(work: Path, log: Path, limit: float = 120.0, env: dict | None = None) -> tuple[int | None, float]:
    """Run the copy's run.sh in its own process group, log to `log`; a run still alive after
    `limit` seconds, or once it printed HANG_SIGN, is killed (group) and returns None. `env`:
    more variables (MINICHAIN_RAY=1, RAY_ADDRESS)."""
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"PYTHON": sys.executable} | (env or {})
    t0 = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", str(work / "run.sh")], stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        try:
            while True:
                try:
                    return proc.wait(timeout=0.2), time.monotonic() - t0
                except subprocess.TimeoutExpired:
                    if time.monotonic() - t0 > limit or HANG_SIGN in log.read_text(errors="replace"):
                        break
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            took = time.monotonic() - t0
            gone = time.monotonic() + KILLED_WITHIN
            while processes_of(work) and time.monotonic() < gone:  # SIGKILLed: on a loaded machine the
                time.sleep(0.1)                                      # kernel takes a moment to end them
            return None, took
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def analyse(log: Path):
    """Analyse with minichain's playbook; `now` = the log's mtime + the longest stage timeout + 1,
    so that a run gone silent counts as hung (its last line is its mtime)."""
    pb = load_playbook("minichain")
    now = log.stat().st_mtime + max(pb.timeouts.values()) + 1
    verdict, _ = analyze_file(log, playbook=pb, now=now)
    return verdict, verdict["playbook"]


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    """name -> (exit code or None if killed, seconds, log, copy); each fault runs once."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = run_patched(tmp_path_factory.mktemp(f"fault{name[:2]}-"), FAULTS_DIR / f"{name}.patch",
                                      HANG_LIMIT)
        return cache[name]
    return get


def run_patched(parent: Path, patch: Path, limit: float, env: dict | None = None):
    """A copy of minichain in parent/minichain (a neutral directory name: the log's first line
    shows the config path, and a slug such as "multiturn-no-timeout" would match the signatures
    themselves) with `patch` applied, run once: (exit code or None, seconds, log, copy)."""
    work = parent / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    git(work, "init", "-q")
    git(work, "apply", str(patch))
    log = parent / "run.log"
    code, took = run(work, log, limit, env)
    return code, took, log, work


def test_every_patch_has_a_row_and_all_apply_together(tmp_path):
    patches = sorted(p.stem for p in FAULTS_DIR.glob("*.patch"))
    assert patches == [f[0] for f in FAULTS]
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    git(work, "init", "-q")
    for name in patches:  # the README's recipe: all of them at once, in order
        git(work, "apply", str(FAULTS_DIR / f"{name}.patch"))


def by_fault(rows):
    """Parameters grouped by fault for pytest-xdist: a fault's tests share one patched run (the
    module fixture's cache), which a worker of their own would run again."""
    return [pytest.param(*row, id=row[0], marks=pytest.mark.xdist_group(f"fault-{row[0]}")) for row in rows]


@pytest.mark.parametrize("name,outcome,stage,category,text", by_fault(FAULTS))
def test_fault_breaks_the_run_where_expected(faulted, name, outcome, stage, category, text):
    code, took, log, work = faulted(name)
    verdict, pb_name = analyse(log)
    rc = verdict["root_cause"]
    got = (verdict["outcome"], STAGES[verdict["failed_stage"] - 1] if verdict["failed_stage"] else None,
           rc and rc["category"])
    assert pb_name == "minichain"
    assert got == (outcome, stage, category), (verdict, log.read_text()[-3000:])
    assert re.search(text, rc["text"]), rc
    if outcome == "hang":
        assert code is None, "a hanging run must still be alive when the test stops it"
    elif outcome == "crash":
        assert code == 1, log.read_text()[-3000:]
    assert processes_of(work) == []


@pytest.mark.parametrize("name", by_fault([f[:1] for f in FAULTS]))
def test_reversing_the_patch_passes_again(faulted, name):
    _, _, _, work = faulted(name)
    git(work, "apply", "-R", str(FAULTS_DIR / f"{name}.patch"))
    log = work.parent / "reverted.log"
    code, _ = run(work, log)
    verdict, _ = analyse(log)
    assert code == 0 and verdict["outcome"] == "pass", log.read_text()[-3000:]
    assert verdict["last_stage_passed"] == 7


def which_fault(verdict: dict) -> str | None:
    """The row of FAULTS a verdict shows, by outcome, stage, category and root-cause text."""
    rc = verdict["root_cause"]
    stage = STAGES[verdict["failed_stage"] - 1] if verdict["failed_stage"] else None
    for name, outcome, want_stage, category, text in FAULTS:
        if rc and (verdict["outcome"], stage, rc["category"]) == (outcome, want_stage, category) \
                and re.search(text, rc["text"]):
            return name
    return None


# faults/README.md's story: the order in which the run meets the faults when all are applied
STORY = ["04", "01", "06", "08", "10", "03", "07", "05", "09", "02"]


@pytest.mark.slow
def test_all_ten_at_once_fail_one_at_a_time(tmp_path):
    """With every patch applied the run fails at the first fault it meets; reversing the one
    the verdict names reveals the next, until the run passes (the night of the story)."""
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    git(work, "init", "-q")
    for name, *_ in FAULTS:
        git(work, "apply", str(FAULTS_DIR / f"{name}.patch"))
    met = []
    for attempt in range(len(FAULTS) + 1):
        log = tmp_path / f"attempt-{attempt}.log"
        run(work, log, HANG_LIMIT)
        verdict, _ = analyse(log)
        if verdict["outcome"] == "pass":
            break
        name = which_fault(verdict)
        assert name, (met, verdict, log.read_text()[-2000:])
        met.append(name[:2])
        git(work, "apply", "-R", str(FAULTS_DIR / f"{name}.patch"))
    assert met == STORY and verdict["outcome"] == "pass" and verdict["last_stage_passed"] == 7
    assert processes_of(work) == []
