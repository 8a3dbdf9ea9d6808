"""The scheduler launchers against the real engines: a Ray head with its Jobs API on loopback
(harness.engines.LocalRay), reached directly and over the loopback sshd, and Slurm's own daemons
(harness.engines.LocalSlurm). The verdict comes from the job's status, stop waits for a trainer's teardown,
what the job leaves behind is swept."""

import asyncio
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from harness.remote.launch import Launcher, LaunchFailed
from harness.remote.scheduled import RayJobLauncher, SlurmLauncher, launcher_for
from harness.remote.transport import HostSpec, connect
from harness.spec import Launch, RayJob, SlurmJob
from harness.engines import free_port

# one xdist worker runs every test that starts a Ray head or Slurm daemons, one engine at a time
pytestmark = [pytest.mark.xdist_group("engines"), pytest.mark.slow]

PY = sys.executable  # has ray: the job's Python must match the cluster's Ray


def launcher(t, head, **kw):
    return RayJobLauncher(t, RayJob(address=head.address, temp_dir=head.dir, **kw))


async def ended(lau, h, timeout=90, head=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = await lau.poll(h)
        if not st.alive:
            return st
        await asyncio.sleep(0.3)
    jobs = [j for j in head.jobs() if j["submission_id"] == h.run_id] if head else "?"
    raise AssertionError(f"run {h.run_id} still alive after {timeout}s: {jobs} {Path(h.log_path).read_text()[-2000:]}")


async def printed(h, text: str = "training", limit: float = 60):
    """Until the run's log has `text` (bounded: a run that never prints it fails later, at its check)."""
    deadline = time.monotonic() + limit
    while text not in Path(h.log_path).read_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.3)


def local(body):
    async def go():
        t = await connect(HostSpec(host="localhost", transport="local"))
        try:
            return await body(t)
        finally:
            await t.close()
    return asyncio.run(go())


def test_exit_code_comes_from_the_job_status_and_the_env_reaches_driver_and_workers(ray_head, tmp_path, monkeypatch):
    # a proxy on the host must neither carry the supervisor's calls to the head nor reach the job
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    (tmp_path / "job.py").write_text(
        "import os, ray\n"
        "ray.init()\n"
        "f = ray.remote(lambda: (os.environ.get('FOO'), os.environ.get('http_proxy'), os.environ['HARNESS_RUN_ID']))\n"
        "print('worker sees', *ray.get(f.remote()), flush=True)\n")
    cmd = f"echo driver sees $FOO ${{http_proxy-unset}}; {PY} job.py; exit 7"

    async def body(t):
        lau = launcher(t, ray_head)
        h = await lau.launch(cmd, workdir=str(tmp_path), env={"FOO": "bar"}, unset=["http_proxy"])
        return h, await ended(lau, h, head=ray_head)
    h, st = local(body)
    log = Path(h.log_path).read_text()
    assert st.exit_code == 7, log
    assert "driver sees bar unset" in log
    assert f"worker sees bar  {h.run_id}" in log  # runtime_env: FOO set, http_proxy emptied, marker
    assert f"harness: ray job {h.run_id} FAILED (JOB_ENTRYPOINT_COMMAND_ERROR)" in log.splitlines()[-1]
    job = {j["submission_id"]: j for j in ray_head.jobs()}[h.run_id]
    assert job["status"] == "FAILED" and job["runtime_env"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "60"


def test_a_driver_killed_hard_fails_though_its_log_ends_cleanly(ray_head, tmp_path):
    async def body(t):
        lau = launcher(t, ray_head)
        h = await lau.launch("echo all good; kill -9 $$", workdir=str(tmp_path))
        return h, await ended(lau, h)
    h, st = local(body)
    assert st.exit_code not in (0, None)
    assert "FAILED" in Path(h.log_path).read_text().splitlines()[-1]


def test_stop_lets_the_trainer_tear_down_then_sweeps_the_detached_actor_it_left(ray_head, tmp_path):
    (tmp_path / "keeper.py").write_text(
        "import os, ray\n"
        "ray.init()\n"
        "@ray.remote\n"
        "class Keeper:\n"
        "    def pid(self):\n"
        "        return os.getpid()\n"
        "k = Keeper.options(name='keeper-' + os.environ['HARNESS_RUN_ID'], lifetime='detached').remote()\n"
        "open('keeper.pid', 'w').write(str(ray.get(k.pid.remote())))\n")
    # Ray's default stop wait (3 s) would KILL this teardown half-way
    cmd = (f"trap 'echo tearing down; sleep 5; echo torn down; exit 0' TERM; {PY} keeper.py && echo training; "
           "while :; do sleep 300 & wait; done")

    async def body(t):
        lau = launcher(t, ray_head, stop_wait=30)
        h = await lau.launch(cmd, workdir=str(tmp_path))
        await printed(h, limit=90)
        keeper = int((tmp_path / "keeper.pid").read_text())
        assert Path(f"/proc/{keeper}").exists()
        rep = await lau.stop(h, grace=5)
        return h, keeper, rep, await lau.poll(h)
    h, keeper, rep, st = local(body)
    log = Path(h.log_path).read_text()
    assert "torn down" in log and "STOPPED" in log.splitlines()[-1], log
    assert not st.alive and rep.ok and not rep.survivors
    assert keeper in rep.terminated + rep.killed
    assert not Path(f"/proc/{keeper}").exists() or "Z" in Path(f"/proc/{keeper}/stat").read_text().split()[2]


RANKS = """\
import os, threading, time, ray
ray.init()
@ray.remote
class Rank:
    def update_actor(self):
        return self.all_reduce()
    def all_reduce(self):
        threading.Event().wait()
    def compute_score(self):
        while True:
            time.sleep(0.05)
ranks = [Rank.remote() for _ in range(3)]
calls = [r.compute_score.remote() if i == 1 else r.update_actor.remote() for i, r in enumerate(ranks)]
print("training", flush=True)
ray.get(calls)
"""


ATTACHED = """\
import sys, threading, ray
ray.init(address=sys.argv[1])
Waiter = type(sys.argv[2], (), {"wait": lambda self: threading.Event().wait()})
ref = ray.remote(Waiter).remote().wait.remote()
print("training", flush=True)
ray.get(ref)
"""


def test_a_run_on_a_ray_cluster_up_before_it_marks_the_workers_ray_starts_for_it(ray_head, tmp_path):
    """A detached run (the process launcher) whose driver joins a Ray cluster that was up before it,
    as `ray start` on each node leaves one: its actor's worker is the cluster's child, not the run's,
    and inherits nothing of the run's environment — but the runtime env Ray takes from
    RAY_JOB_CONFIG_JSON_ENV_VAR at ray.init carries the run's marker to it. The hang's evidence lists
    it (on every node the same way), and stopping the run stops it."""
    (tmp_path / "attached.py").write_text(ATTACHED)
    title = f"ray::Waiter{os.getpid()}"

    async def body(t):
        lau = Launcher(t)
        h = await lau.launch(f"{PY} attached.py 127.0.0.1:{ray_head.port} Waiter{os.getpid()}", workdir=str(tmp_path))
        await printed(h, limit=90)
        for _ in range(60):  # until the actor runs its method (Ray retitles its process then)
            evidence = await lau.evidence(h)
            if f"— {title}.wait" in evidence.split("\n\n")[0]:
                break
            await asyncio.sleep(0.5)
        stopped = await lau.stop(h, grace=2)
        return evidence, stopped
    evidence, stopped = local(body)
    assert f"— {title}.wait" in evidence.split("\n\n")[0], evidence[:3000]
    assert stopped.ok, stopped
    left = []
    for _ in range(50):  # the worker goes with the run (bounded: the kernel may take a moment)
        left = [c for c in Path("/proc").glob("[0-9]*/cmdline") if _reads(c).startswith(title)]
        if not left:
            break
        time.sleep(0.1)
    assert not left, left


def _reads(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_ray_job_s_hang_evidence_names_the_actor_its_peers_wait_for(ray_head, tmp_path, monkeypatch):
    """A Ray job whose three actors of one class hang: two in an all-reduce, one still scoring. The
    hang's evidence (the run's processes found by the marker the job's runtime env gives its
    workers, their stacks dumped with py-spy, titled `ray::Rank.<method>` by Ray) names the one the
    others wait for, and read with the log it places the hang there: the reward, at its frame."""
    from harness.analyze import Analyzer
    from harness.playbook import load_playbook

    monkeypatch.setenv("PATH", f"{Path(PY).parent}:{os.environ['PATH']}")  # py-spy, as on a host
    (tmp_path / "ranks.py").write_text(RANKS)

    async def body(t):
        lau = launcher(t, ray_head)
        h = await lau.launch(f"{PY} ranks.py", workdir=str(tmp_path))
        await printed(h, limit=90)
        for _ in range(40):  # until every actor runs its method (Ray retitles its process then)
            evidence = await lau.evidence(h)
            if evidence.split("\n\n")[0].count("— ray::Rank.") >= 3:
                break
            await asyncio.sleep(0.5)
        await lau.stop(h, grace=2)
        return h, evidence
    h, evidence = local(body)
    head = evidence.split("\n\n")[0]
    # py-spy names a method by its class: `Rank.compute_score`
    late = re.search(r"waited on: pid (\d+), in Rank\.compute_score \(\S*ranks\.py:\d+\) — not in the collective "
                     r"Rank\.all_reduce that 2 process\(es\) of its kind wait in", head)
    assert late, head
    assert re.search(rf"pid {late[1]} \S+ [\d.]+s CPU/s in Rank\.compute_score \(.*ray::Rank\.compute_score", head), head
    an = Analyzer(load_playbook(None))
    an.feed(Path(h.log_path).read_bytes(), ts=1000.0)
    an.finish()
    an.saw(evidence)
    v = an.verdict(now=1000.0 + 7 * 86400)
    assert (v["failed_stage"], v["root_cause"]["category"]) == (5, "distributed_comm_hang"), v["root_cause"]
    assert v["root_cause"]["text"].startswith("Rank.compute_score ("), v["root_cause"]


def test_an_unreachable_jobs_api_is_one_line_before_anything_runs(tmp_path):
    async def body(t):
        lau = launcher_for(Launch(command="true", via="ray-job",
                                  ray={"address": f"http://127.0.0.1:{free_port()}"}), t)
        with pytest.raises(LaunchFailed) as e:
            await lau.launch("touch ran", workdir=str(tmp_path))
        return str(e.value)
    msg = local(body)
    assert "\n" not in msg and "did not answer" in msg and "ray start --head" in msg
    assert not (tmp_path / "ran").exists()


def test_a_head_with_token_authentication_takes_the_token_from_where_ray_keeps_it(tmp_path, monkeypatch):
    """Ray 2.5x turns token authentication on for a head once ~/.ray/auth_token exists (any local
    `ray.init()` writes it): without the token the launch is one line saying where to put it;
    with RAY_AUTH_TOKEN_PATH (or ~/.ray/auth_token) the supervisor sends it."""
    from harness.engines import LocalRay

    token = "harness-test-token-" + os.urandom(8).hex()
    (tmp_path / "token").write_text(token + "\n")
    with LocalRay(token=token) as head:
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token of the machine's

        async def refused(t):
            with pytest.raises(LaunchFailed) as e:
                await launcher(t, head).launch("touch ran", workdir=str(tmp_path))
            return str(e.value)
        msg = local(refused)
        assert "\n" not in msg and "token authentication" in msg and "~/.ray/auth_token" in msg, msg
        assert not (tmp_path / "ran").exists() and token not in msg

        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "token"))

        async def body(t):
            lau = launcher(t, head)
            h = await lau.launch("echo with the token; exit 4", workdir=str(tmp_path))
            return h, await ended(lau, h, head=head)
        h, st = local(body)
    assert st.exit_code == 4 and "with the token" in Path(h.log_path).read_text()
    assert token not in Path(h.log_path).read_text()


def test_over_ssh_the_supervisor_needs_only_the_hosts_python(ray_head, ssh_lab, tmp_path):
    wd = tmp_path / "w"
    wd.mkdir()
    os.chmod(tmp_path, 0o755)

    async def body():
        t = await connect(HostSpec(host="box", transport="asyncssh", ssh_config=str(ssh_lab.ssh_config),
                                   known_hosts=str(ssh_lab.known_hosts)))
        try:
            lau = RayJobLauncher(t, RayJob(address=ray_head.address, temp_dir=ray_head.dir, python="/usr/bin/python3"))
            h = await lau.launch("echo over ssh; exit 3", workdir=str(wd))
            again = await RayJobLauncher(t, lau.job).find(str(wd), h.run_id)  # a new controller finds it
            return h, again, await ended(lau, h)
        finally:
            await t.close()
    h, again, st = asyncio.run(body())
    assert again is not None and again.pid == h.pid
    assert st.exit_code == 3 and "over ssh" in Path(h.log_path).read_text()


# --- Slurm -------------------------------------------------------------------------------

def queued(lab, run_id):
    """The run's job lines in slurmctld's queue (pending or running)."""
    return [line for line in lab.scontrol("show", "job", "-o").stdout.splitlines()
            if f"JobName=harness-{run_id} " in line and re.search(r"JobState=(PENDING|RUNNING)\b", line)]


def test_slurm_exit_code_from_scontrol_output_followed_env_exported(slurm_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")

    async def body(t):
        lau = SlurmLauncher(t, SlurmJob(options=["--time=5"]))
        h = await lau.launch("echo in $SLURM_JOB_ID as $HARNESS_RUN_ID with $FOO ${http_proxy-unset}; exit 5",
                             workdir=str(tmp_path), env={"FOO": "bar"}, unset=["http_proxy"])
        return h, await ended(lau, h)
    h, st = local(body)
    log = Path(h.log_path).read_text()
    job = (Path(h.run_dir) / "slurm_job").read_text().strip()
    assert st.exit_code == 5, log
    assert f"in {job} as {h.run_id} with bar unset" in log
    assert log.splitlines()[-1].startswith(f"harness: slurm job {h.run_id} FAILED job {job}")


def test_slurm_runs_your_own_batch_script_and_a_signal_is_an_exit_code(slurm_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)
    (tmp_path / "run.sbatch").write_text("#!/bin/bash\n#SBATCH --job-name=ignored-by-the-cli-option\n"
                                         "echo batch on $SLURM_JOB_NODELIST in $PWD\nkill -9 $$\n")

    async def body(t):
        lau = SlurmLauncher(t, SlurmJob(script="run.sbatch"))
        h = await lau.launch("unused", workdir=str(tmp_path))
        return h, await ended(lau, h)
    h, st = local(body)
    log = Path(h.log_path).read_text()
    assert f"in {tmp_path}" in log and st.exit_code == 128 + 9, log


def test_slurm_stop_is_scancel_waited_for_until_the_job_left_the_queue(slurm_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)
    # Slurm signals the job's processes one by one: a `sleep 300 & wait` whose sleep took its SIGTERM
    # first would end the script before bash took its own, its trap never run; a loop waits again
    cmd = ("trap 'echo tearing down; sleep 2; echo torn down; exit 0' TERM; echo training; "
           "while :; do sleep 300 & wait; done")

    async def body(t):
        lau = SlurmLauncher(t, SlurmJob(stop_wait=20))
        h = await lau.launch(cmd, workdir=str(tmp_path))
        await printed(h)
        assert queued(slurm_lab, h.run_id)
        rep = await lau.stop(h, grace=5)
        return h, rep, await lau.poll(h)
    h, rep, st = local(body)
    log = Path(h.log_path).read_text()
    assert "torn down" in log and "CANCELLED" in log.splitlines()[-1], log
    assert not st.alive and rep.ok and not queued(slurm_lab, h.run_id)


def test_slurm_down_is_one_line_before_anything_runs(tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=x\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={free_port()}\n"
                    "AuthType=auth/munge\nNodeName=localhost\nPartitionName=p Nodes=ALL\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))

    async def body(t):
        with pytest.raises(LaunchFailed) as e:
            await SlurmLauncher(t, SlurmJob()).launch("touch ran", workdir=str(tmp_path))
        return str(e.value)
    msg = local(body)
    assert "\n" not in msg and "scontrol ping" in msg and not (tmp_path / "ran").exists()


# --- evidence from where it is ----------------------------------------------------------

DIES_HARD = """\
import os, sys, ray
ray.init(log_to_driver=False)  # as on a node whose log stream is lost: the worker's words stay in its files
@ray.remote
class Rollout:
    def generate(self):
        print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "rollout.py", line 7, in generate', file=sys.stderr)
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
              "capacity of 79.15 GiB of which 1.02 GiB is free.", file=sys.stderr, flush=True)
        os._exit(1)
print("engine started", flush=True)
ray.get(Rollout.remote().generate.remote())
"""


def test_a_workers_own_error_in_its_ray_log_file_is_the_root_cause_not_the_drivers_actor_died(
        ray_head, tmp_path):
    from harness.session.journal import Journal
    from test_sessions import harness

    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    (work / "job.py").write_text(DIES_HARD)
    (tmp_path / "h.yaml").write_text(
        f"host: localhost\ntransport: local\nworkdir: {work}\n"
        f"launch: {{command: {PY} job.py, via: ray-job, settle: 3,\n"
        f"         ray: {{address: '{ray_head.address}', temp_dir: {ray_head.dir}}}}}\n"
        "budgets: {relaunches: 0}\n")
    r = harness("run", str(tmp_path / "h.yaml"), "--offline", home=home, timeout=300)
    session = next((home / "sessions").iterdir())
    verdict = next(e for e in Journal.read(session / "journal.jsonl") if e["type"] == "verdict")
    assert verdict["root"]["category"] == "oom", (r.stdout[-2000:], verdict)
    assert "CUDA out of memory" in verdict["root"]["text"]
    files = (session / "attempts" / "01.postmortem.txt").read_text()
    assert "@@harness-file worker-" in files and "CUDA out of memory" in files
    assert re.search(r"@@harness-file ray-actors\nactor Rollout pid=\d+ node=\S+ died: The actor is dead because "
                     r"its worker process has died\. Worker exit type: SYSTEM_ERROR", files), files
    # the driver's own log shows only the wrapper: without the worker's file, no OOM
    run_log = next(work.glob(".harness/runs/*/run.log"))
    assert "ActorDiedError" in run_log.read_text() and "CUDA out of memory" not in run_log.read_text()
    alone = harness("analyze", str(run_log), "--json", home=home)
    assert '"category": "oom"' not in alone.stdout


def test_doctor_says_whether_the_scheduler_answers(ray_head, slurm_lab, tmp_path):
    from test_sessions import harness

    def doctor(launch: str) -> tuple[int, list[str]]:
        (tmp_path / "h.yaml").write_text(f"host: localhost\ntransport: local\nworkdir: {tmp_path}\n"
                                         f"launch: {{command: 'true', {launch}}}\n")
        r = harness("doctor", str(tmp_path / "h.yaml"), home=tmp_path / "home")
        return r.returncode, [ln for ln in r.stdout.splitlines() if "scheduler" in ln]
    rc, lines = doctor(f"via: ray-job, ray: {{address: '{ray_head.address}'}}")
    assert lines and "✓" in lines[0] and f"the Ray Jobs API at {ray_head.address} answers" in lines[0]
    rc, lines = doctor(f"via: slurm, env: {{SLURM_CONF: {slurm_lab.conf}}}")
    assert lines and "✓" in lines[0] and "slurmctld (scontrol ping) answers" in lines[0]
    rc, lines = doctor(f"via: ray-job, ray: {{address: 'http://127.0.0.1:{free_port()}'}}")
    assert rc == 1 and "✗" in lines[0] and "did not answer" in lines[0], lines
    assert not list(Path("/tmp").glob("tmp*/jobsup.py"))  # its scratch dir is gone


def test_a_job_the_scheduler_holds_back_is_queued_not_hung(slurm_lab, tmp_path, monkeypatch):
    # a Slurm job with a begin time waits PENDING (BeginTime) and prints nothing; with a stall of
    # 3 s the session must wait for it (noting the queue), not call it hung at engine_start
    from harness.session.journal import Journal
    from harness.session.runner import run_spec
    from test_loop import spec_for

    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)
    (tmp_path / "run.sh").write_text("echo started after the queue; exit 4\n")
    spec = spec_for(tmp_path, launch={"via": "slurm", "stall": 3, "slurm": {"python": PY, "options": ["--begin=now+10"]}},
                    budgets={"relaunches": 0})
    d = tmp_path / "session"
    t0 = time.monotonic()
    ses = asyncio.run(run_spec(spec, d, offline=True))
    took = time.monotonic() - t0
    events = Journal.read(d / "journal.jsonl")
    notes = [e["text"] for e in events if e["type"] == "note"]
    verdict = next(e for e in events if e["type"] == "verdict")
    assert verdict["reason"] == "exited" and verdict["exit_code"] == 4, (verdict, notes)
    assert any("waits in the scheduler's queue (PENDING job" in n and "BeginTime" in n for n in notes), notes
    assert any(n.startswith("the job left the scheduler's queue after") for n in notes), notes
    assert took >= 8 and ses.state.ended["reason"] in ("gave_up", "budget:relaunches")
    assert "started after the queue" in (d / "attempts" / "01.log").read_text()


def test_a_ray_job_is_queued_while_ray_sets_it_up_and_not_once_it_ran(ray_head, tmp_path):
    # every Ray job starts PENDING (its supervisor actor, its runtime env); the supervisor's first
    # look comes right after the submission, so the poll sees why, and nothing once the job ran
    async def body(t):
        lau = launcher(t, ray_head)
        h = await lau.launch("echo ran", workdir=str(tmp_path))
        seen = []
        while (st := await lau.poll(h)).alive:
            seen.append(st.queued)
            await asyncio.sleep(0.1)
        return h, seen + [st.queued]
    h, seen = local(body)
    assert any(q.startswith("PENDING") for q in seen), seen
    assert seen[-1] == "" and not (Path(h.run_dir) / "queued").exists(), seen


def test_a_ray_head_that_dies_under_the_job_ends_the_run_as_the_infrastructure_s(tmp_path):
    """The head goes (its processes killed, the job's driver with them): the supervisor rides out
    `ray.patience` seconds of a Jobs API that does not answer, then says so as the run log's last
    line, which the playbook reads as the infrastructure's (harness_scheduler_lost)."""
    from harness.engines import LocalRay
    from harness.session.journal import Journal
    from test_sessions import HARNESS, PROXY_VARS, wait_for

    head = LocalRay().start()  # its own: this test takes it down
    try:
        work, home = tmp_path / "w", tmp_path / "home"
        work.mkdir()
        (work / "job.py").write_text("import time\nprint('engine started', flush=True)\ntime.sleep(600)\n")
        (tmp_path / "h.yaml").write_text(
            f"host: localhost\ntransport: local\nworkdir: {work}\n"
            f"launch: {{command: {PY} job.py, via: ray-job, settle: 2,\n"
            f"         ray: {{address: '{head.address}', temp_dir: {head.dir}, patience: 5}}}}\n"
            "budgets: {relaunches: 0, infra_retries: 0}\n")
        env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"HARNESS_HOME": str(home)}
        run = subprocess.Popen([str(HARNESS), "run", str(tmp_path / "h.yaml"), "--offline"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: any("engine started" in p.read_text(errors="replace")
                                 for p in work.glob(".harness/runs/*/run.log")) or run.poll() is not None,
                     "the job to start", 180)
            head.stop()
            out = run.communicate(timeout=240)[0]
        finally:
            run.kill()
    finally:
        head.stop()
    session = next((home / "sessions").iterdir())
    verdict = next(e for e in Journal.read(session / "journal.jsonl") if e["type"] == "verdict")
    assert verdict["root"] and verdict["root"]["signature"] == "harness_scheduler_lost", (out[-2000:], verdict)
    assert verdict["root"]["class"] == "infra" and verdict["outcome"] == "crash", verdict
    assert "gave up after 5s" in verdict["root"]["text"]


def saved(lab, h) -> None:
    """Until slurmctld has saved its state since the run's job started (bounded). Its state is saved a
    few seconds after a change: killed before that, it recovers the job as still pending — and runs
    it again —, or not at all, and the next job gets the same id, which drains the node."""
    job = (Path(h.run_dir) / "slurm_job").read_text().strip()
    m = re.search(r"\bStartTime=(\S+)", lab.scontrol("show", "job", job).stdout)
    started = datetime.fromisoformat(m[1]).timestamp() if m and m[1][:1].isdigit() else time.time()
    state, deadline = Path(lab.dir) / "state" / "job_state", time.monotonic() + 30
    while not (state.exists() and state.stat().st_mtime > started + 1) and time.monotonic() < deadline:
        time.sleep(0.2)


def kill_slurmctld(lab) -> None:
    """slurmctld dies (SIGKILL), slurmd and the job's processes go on."""
    from harness.engines import marked

    for pid in marked(lab.dir):
        if b"slurmctld" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, 9)


def start_slurmctld(lab) -> None:
    """slurmctld up again, its state recovered from its state dir; until it answers (bounded)."""
    lab._daemon("slurmctld", "-D", "-f", lab.conf)
    deadline = time.monotonic() + 60
    while "UP" not in lab.scontrol("ping").stdout and time.monotonic() < deadline:
        time.sleep(0.5)


def test_slurmctld_down_under_a_running_job_is_ridden_out_then_the_run_is_lost_with_it(slurm_lab, tmp_path,
                                                                                        monkeypatch):
    """slurmctld stops answering while the job runs: the supervisor keeps asking for `patience`
    seconds, then ends the run with the line the playbook reads as the infrastructure's. (Before,
    an unanswered `scontrol show job` read as a job still running, for ever.)"""
    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)

    async def body(t):
        lau = SlurmLauncher(t, SlurmJob(patience=4))
        h = await lau.launch("echo training; sleep 60", workdir=str(tmp_path))
        await printed(h)
        saved(slurm_lab, h)
        kill_slurmctld(slurm_lab)
        return h, await ended(lau, h, timeout=120)
    try:
        h, st = local(body)
    finally:  # the other tests' slurmctld: back up
        start_slurmctld(slurm_lab)
    last = Path(h.log_path).read_text().splitlines()[-1]
    assert st.exit_code == 2 and last.startswith("harness: slurmctld does not answer `scontrol show job`"), last
    assert last.endswith("gave up after 4s"), last
    subprocess.run(["scancel", (Path(h.run_dir) / "slurm_job").read_text().strip()], env={**os.environ})


def test_a_slurmctld_that_restarts_under_a_running_job_is_ridden_out(slurm_lab, tmp_path, monkeypatch):
    """slurmctld killed and started again while the job runs (state recovered from its state dir):
    within `patience` the supervisor goes on and the run ends with the job's own exit code."""
    monkeypatch.setenv("SLURM_CONF", slurm_lab.conf)

    async def body(t):
        lau = SlurmLauncher(t, SlurmJob(patience=90))
        h = await lau.launch("echo training; sleep 12; echo done; exit 3", workdir=str(tmp_path))
        await printed(h)
        saved(slurm_lab, h)
        kill_slurmctld(slurm_lab)
        await asyncio.sleep(3)
        start_slurmctld(slurm_lab)
        return h, await ended(lau, h, timeout=150)
    h, st = local(body)
    log = Path(h.log_path).read_text()
    assert st.exit_code == 3 and "done" in log, log
    assert "does not answer" not in log.splitlines()[-1], log
