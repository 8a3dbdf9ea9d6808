"""minichain's Ray mode (MINICHAIN_RAY=1) on a real Ray cluster: the TaskRunner, vLLMHttpServer
and WorkerDict actors and the reward tasks are Ray's, the prefixes and the wrappers
(RayTaskError, ActorDiedError) are Ray's own, and the proxy of fault 08 reaches the workers
through Ray's runtime_env. The faults break it the way they break the plain mode: the verdict
is the same stage, category and root cause."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.analyze import analyze_file
from harness.playbook import load_playbook
from test_minichain import processes_of
from test_minichain_faults import FAULTS, HANG_LIMIT, TARGET, analyse, run, run_patched
from test_minichain_more import LIMIT, MORE, MORE_FAULTS, got

# one xdist worker runs every test that starts a Ray head or Slurm daemons, one engine at a time
pytestmark = [pytest.mark.xdist_group("engines"), pytest.mark.slow]

# the ten faults of the story: each crosses actors (a constructor that fails, an actor method,
# a Ray task, an actor that hangs, the runtime_env's proxy, the trainer inside the TaskRunner)
RAY_FAULTS = FAULTS
# faults of our own whose code runs in another process in the Ray mode: an agent's observation in
# a WorkerDict actor, a reward task past its timeout, a NaN reward read from the step line. Not 11
# or 20 (the batch, the optimizer, inside the TaskRunner): placed by the lines printed just before
# the error, which Ray's log monitor at times has not forwarded when the driver exits with it, so
# they are read a stage earlier now and then (README, "minichain on Ray").
OWN_FAULTS = [f for f in MORE_FAULTS if f[0][:2] in ("14", "15", "26")]
WRAPPED = re.compile(r"ray\.exceptions\.(RayTaskError|ActorDiedError)|RayTaskError\(|ActorDiedError")


@pytest.fixture(scope="module")
def on_ray(ray_head):
    return {"MINICHAIN_RAY": "1", "RAY_ADDRESS": f"127.0.0.1:{ray_head.port}", "RAY_USAGE_STATS_ENABLED": "0"}


def test_healthy_run_on_ray_passes_with_rays_own_prefixes(on_ray, tmp_path):
    log = tmp_path / "run.log"
    code, _ = run(TARGET, log, 300, on_ray)
    text = log.read_text()
    verdict, _ = analyse(log)
    assert code == 0 and verdict["outcome"] == "pass", (verdict["root_cause"], text[-3000:])
    for actor in ("TaskRunner", "vLLMHttpServer", "WorkerDict"):
        assert re.search(rf"\({actor} pid=\d+\)", text), actor


@pytest.mark.parametrize("name,outcome,stage,category,text", RAY_FAULTS, ids=[f[0] for f in RAY_FAULTS])
def test_a_fault_breaks_the_ray_mode_as_it_breaks_the_plain_one(on_ray, tmp_path, name, outcome, stage,
                                                                 category, text):
    code, _, log, work = run_patched(tmp_path, TARGET / "faults" / f"{name}.patch", HANG_LIMIT + 60, on_ray)
    verdict, _ = analyse(log)
    assert got(verdict) == (outcome, stage, category), (verdict["root_cause"], log.read_text()[-3000:])
    assert re.search(text, verdict["root_cause"]["text"]), verdict["root_cause"]
    if outcome == "crash":  # the error crossed actors: Ray wrapped it on its way to the driver
        assert WRAPPED.search(log.read_text()), log.read_text()[-3000:]
    assert processes_of(work) == []


@pytest.mark.parametrize("name,outcome,stage,category,text", OWN_FAULTS, ids=[f[0] for f in OWN_FAULTS])
def test_a_fault_of_our_own_breaks_the_ray_mode_as_it_breaks_the_plain_one(on_ray, tmp_path, name, outcome,
                                                                          stage, category, text):
    code, _, log, work = run_patched(tmp_path, MORE / f"{name}.patch", LIMIT + 60, on_ray)
    verdict, _ = analyse(log)
    assert got(verdict) == (outcome, stage, category), (verdict["root_cause"], log.read_text()[-3000:])
    assert re.search(text, verdict["root_cause"]["text"]), verdict["root_cause"]
    assert (code is None) == (outcome == "hang") and processes_of(work) == []


OWNER_DIES = """
import time

import ray

ray.init()


@ray.remote
class Child:
    def ping(self):
        return "pong"


@ray.remote
class Owner:
    def make(self):
        self.child = Child.remote()  # owned by this actor: it dies with it
        ray.get(self.child.ping.remote())
        return [self.child]


owner = Owner.remote()
child = ray.get(owner.make.remote())[0]
ray.kill(owner)
print("owner killed", flush=True)
for _ in range(240):  # the GCS kills the child once it learns its owner died
    ray.get(child.ping.remote())
    time.sleep(0.25)
"""


def test_an_actor_whose_owner_died_is_rooted_in_rays_own_death_cause(on_ray, tmp_path):
    """Ray's ActorDiedError for an actor whose owner died: the error, its tab-indented fields, then
    at column 0 the death cause Ray's GCS wrote — the line that says why (not the wrapper)."""
    script = tmp_path / "owner_dies.py"
    script.write_text(OWNER_DIES)
    log = tmp_path / "run.log"
    env = dict(os.environ) | on_ray
    with log.open("w") as out:
        code = subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, env=env,
                              timeout=240).returncode
    text = log.read_text(errors="replace")
    assert code != 0 and "ActorDiedError" in text, text[-3000:]
    verdict, _ = analyze_file(log, playbook=load_playbook("ray"))
    assert verdict["outcome"] == "crash"
    assert verdict["root_cause"]["text"].startswith("The actor is dead because its owner has died"), \
        (verdict["root_cause"], text[-3000:])
