"""A real two-node Ray cluster on this machine (Ray runs several nodes on one machine): the head
and worker nodes, each with its own temp dir as another machine's would be, the worker nodes
reached by the harness through their own sshd (`jump`), the head through `box`. The run is a Ray
job whose rollout actor is placed on a worker node by that node's resource.

- The actor's own error is only in the worker node's files (its `worker-*.err` under the node's
  temp dir, `log_to_driver=False`): the verdict's root cause is that line, named by the node.
- The worker node dies under the job (its processes killed at once, as a machine that goes): the
  verdict is an infrastructure failure naming the Ray node, from the state API's node table.
- No node offers what the actor asks for: Ray's autoscaler says so in the driver's log, the
  verdict is that hang, and the post-mortem names the actor still waiting and what it lacks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.engines import LocalRay, ray_bin
from harness.remote.launch import PROXY_VARS
from harness.session.journal import Journal
from sshd import SshLab
from test_sessions import HARNESS, harness, wait_for

# one xdist worker runs every test that starts a Ray head or Slurm daemons, one engine at a time
pytestmark = [pytest.mark.xdist_group("engines"), pytest.mark.slow]

PY = sys.executable  # has ray: the job's Python must match the cluster's Ray

ON_NODE = """\
import os, sys, time, ray
ray.init(log_to_driver=False)  # the worker's words stay in its node's files
@ray.remote(resources={{"{node}": 1}}, num_cpus=0)
class Rollout:
    def generate(self):
        {body}
print("engine started", flush=True)
ray.get(Rollout.remote().generate.remote())
"""

OOM = """print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "rollout.py", line 7, in generate', file=sys.stderr)
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (on the worker node)",
              file=sys.stderr, flush=True)
        os._exit(1)"""

WAITS = """open(os.environ["READY"], "w").write(str(os.getpid()))
        time.sleep(600)"""


@pytest.fixture(scope="module")
def cluster():
    if ray_bin() is None:
        pytest.skip("ray not installed (bash scripts/test.sh installs ray[default])")
    # a dead node is noticed in about two seconds rather than Ray's default half a minute
    head = LocalRay(system={"health_check_period_ms": 500, "health_check_failure_threshold": 4,
                            "health_check_timeout_ms": 500}).start()
    yield head
    head.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = SshLab(tmp_path_factory.mktemp("raynodes")).start()
    yield lab
    lab.stop()


def spec(tmp_path: Path, lab: SshLab, head: LocalRay, node: str, node_dir: str | None, body: str) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    (work / "job.py").write_text(ON_NODE.format(node=node, body=body))
    path = tmp_path / "h.yaml"
    path.write_text(textwrap.dedent(f"""\
        host: box
        ssh_config: {lab.ssh_config}
        workdir: {work}
        launch:
          command: {PY} job.py
          via: ray-job
          settle: 3
          env: {{READY: "{tmp_path}/ready"}}
          ray: {{address: '{head.address}', temp_dir: {head.dir}, python: /usr/bin/python3}}
        budgets: {{relaunches: 0, infra_retries: 0}}
        """) + (f"nodes:\n  - {{host: jump, name: {node}, ray_temp_dir: {node_dir}}}\n" if node_dir else ""))
    return path


def verdict_of(home: Path, out: str) -> tuple[Path, dict]:
    session = next((home / "sessions").iterdir())
    verdicts = [e for e in Journal.read(session / "journal.jsonl") if e["type"] == "verdict"]
    assert verdicts, out[-3000:]
    return session, verdicts[0]


def story(home: Path, out: str) -> str:
    """What a failed assertion shows: the session's output, the end of what the run printed and of
    the files gathered from its nodes (a Ray cluster misbehaving on a loaded machine says so there)."""
    parts = [out[-1500:]]
    for name in ("01.log", "01.postmortem.txt"):
        for f in (home / "sessions").glob(f"*/attempts/{name}"):
            parts.append(f"--- {name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(parts)


def test_an_error_only_in_a_worker_nodes_ray_files_is_the_root_cause_named_by_the_node(cluster, lab, tmp_path):
    node_dir = cluster.add_node("w1")
    try:
        path, home = spec(tmp_path, lab, cluster, "w1", node_dir, OOM), tmp_path / "home"
        r = harness("run", str(path), "--offline", home=home, timeout=300)
    finally:
        cluster.stop_node("w1")
    session, verdict = verdict_of(home, r.stdout + r.stderr)
    assert verdict["root"] and verdict["root"]["category"] == "oom", (story(home, r.stdout), verdict)
    assert "(on the worker node)" in verdict["root"]["text"]
    files = (session / "attempts" / "01.postmortem.txt").read_text()
    # the error is in the node's worker file, gathered over the node's own link; not on the head
    assert "@@harness-file w1:worker-" in files, files
    head_part = files.split("@@harness-file w1:")[0]
    assert "(on the worker node)" not in head_part
    log = (session / "attempts" / "01.log").read_text()
    assert "(log:w1:worker-" in log and "(on the worker node)" in log
    # the driver's own log shows only the wrapper
    run_log = next((path.parent / "w").glob(".harness/runs/*/run.log")).read_text()
    assert "ActorDiedError" in run_log and "(on the worker node)" not in run_log


def test_a_ray_node_that_dies_under_the_job_is_an_infrastructure_failure_naming_it(cluster, lab, tmp_path):
    node_dir = cluster.add_node("w2")
    path, home = spec(tmp_path, lab, cluster, "w2", node_dir, WAITS), tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"HARNESS_HOME": str(home)}
    run = subprocess.Popen([str(HARNESS), "run", str(path), "--offline"], env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: (tmp_path / "ready").exists() or run.poll() is not None, "the actor to start on w2", 180)
        assert (tmp_path / "ready").exists(), story(home, run.communicate()[0])
        cluster.stop_node("w2")  # the node dies as a machine does, its raylet and workers at once
        out = run.communicate(timeout=300)[0]
    finally:
        run.kill()
        cluster.stop_node("w2")
    session, verdict = verdict_of(home, out)
    assert verdict["root"] and verdict["root"]["class"] == "infra", (story(home, out), verdict)
    assert "w2" in verdict["root"]["text"], verdict["root"]
    files = (session / "attempts" / "01.postmortem.txt").read_text()
    assert "ray node w2 " in files and "died while the job ran" in files, files


def test_an_actor_no_node_can_hold_is_a_hang_naming_what_it_asked_for(cluster, lab, tmp_path):
    """No node offers the resource the actor asks for (a node that never joined, a resource name
    misspelt): Ray's autoscaler says so in the driver's log, the job waits for ever; the verdict
    is that, and the post-mortem names the actor and what no live node offers."""
    path, home = spec(tmp_path, lab, cluster, "w9", None, WAITS), tmp_path / "home"
    job = tmp_path / "w" / "job.py"  # the driver's log gets Ray's messages (the autoscaler's among them)
    job.write_text(job.read_text().replace("ray.init(log_to_driver=False)", "ray.init()"))
    r = harness("run", str(path), "--offline", "-c", "launch.stall=60", home=home, timeout=300)
    session, verdict = verdict_of(home, r.stdout + r.stderr)
    assert verdict["root"] and verdict["root"]["signature"] == "ray_unschedulable", (story(home, r.stdout), verdict)
    assert verdict["outcome"] == "hang" and verdict["root"]["category"] == "config_mismatch", verdict
    assert "'w9': 1.0" in verdict["root"]["text"]
    files = (session / "attempts" / "01.postmortem.txt").read_text()
    assert "actor Rollout pid=0 waits to be placed (PENDING_CREATION): it asked for w9=1; no live node offers w9" in files, files
    assert not (tmp_path / "ready").exists()  # it never ran
