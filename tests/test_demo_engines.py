"""`harness demo --ray` and `harness demo --slurm` as a user runs them (real processes, a real
throwaway Ray head or real Slurm daemons): every attempt is a job of that engine, the chain ends
green, and nothing of the demo's is left running."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness.engines import MARK, ray_bin, slurm_missing
from harness.remote.launch import PROXY_VARS
from test_sessions import HARNESS

# one xdist worker runs every test that starts a Ray head or Slurm daemons, one engine at a time
pytestmark = [pytest.mark.xdist_group("engines"), pytest.mark.slow]


def marked_processes(*marks: str) -> list[str]:
    """Live processes whose environment carries one of `marks` (NAME=value)."""
    want, found = {m.encode() for m in marks}, []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            if want & set(Path(environ).read_bytes().split(b"\0")):
                found.append(environ.split("/")[2])
        except OSError:
            pass
    return found


ENGINES = {"--ray": ("ray", lambda: ray_bin() is None and "ray"), "--slurm": ("slurm", slurm_missing)}


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """Both demos at once (each mostly waits on its runs and its scheduler): {flag: (stdout, rc)}."""
    procs = {}
    for flag, (_, missing) in ENGINES.items():
        if not missing():
            env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
            env |= {"HARNESS_HOME": str(tmp_path_factory.mktemp("home")), "COLUMNS": "160"}
            procs[flag] = subprocess.Popen([str(HARNESS), "demo", flag], env=env, text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return {flag: (p.communicate(timeout=900)[0], p.returncode) for flag, p in procs.items()}


@pytest.mark.parametrize("flag", list(ENGINES))
def test_demo_on_an_engine_ends_green_each_attempt_a_job_and_leaves_nothing_running(flag, demos):
    kind, missing = ENGINES[flag]
    if flag not in demos:
        pytest.skip(f"{missing()} is not installed (bash scripts/test.sh installs it)")
    out, rc = demos[flag]
    assert rc == 0, out[-3000:]
    assert re.search(r"chain passed: 11 attempts in \d+ s; 4 declared fix\(es\)", out), out[-2000:]
    engine_dir = re.search(r"throwaway local .* in (\S+)", out).group(1)
    assert not Path(engine_dir).exists()
    runs = sorted(Path(re.search(r"workdir: (\S+)", out).group(1)).glob(".harness/runs/*"))
    assert len(runs) == 11
    for rd in runs:
        assert json.loads((rd / "job.json").read_text())["kind"] == kind
        assert (rd / "run.log").read_text().splitlines()[-1].startswith(f"harness: {kind} job {rd.name} ")
    assert not marked_processes(f"{MARK}={engine_dir}", *(f"HARNESS_RUN_ID={rd.name}" for rd in runs))
