"""Runs handed to a scheduler: a Ray job (the Jobs API of a running cluster) or a Slurm batch job.

Both are the process launcher's runs whose command is a supervisor (jobsup.py, copied into the
run dir) that submits the job, mirrors its output into the run's log and exits with the job's
code as the scheduler reports it. So finding a run again, polling it, following its log and
sweeping what carries its marker are the same for every launcher; what differs is written here:

    launcher_for(spec.launch, transport, once=…, token=…)   the spec's `launch.via`
    RayJobLauncher / SlurmLauncher.launch(...)               checks the scheduler answers first
    .stop(handle, grace, cleanup)                            the scheduler's stop, waited for,
                                                             then the process launcher's stop

The job's processes carry HARNESS_RUN_ID as every run's do (Ray: the job's runtime_env, which its
workers and the detached actors it creates inherit; Slurm: sbatch exports the environment), so
whatever the scheduler leaves behind on the host is still found and stopped.
"""

from __future__ import annotations

import json
import shlex
from importlib import resources
from typing import Sequence

from .launch import Launcher, LaunchFailed, RunHandle
from .postmortem import HEAD as POSTMORTEM_HEAD
from .procs import MARKER, StopReport


def _supervisor() -> bytes:
    return resources.files(__package__).joinpath("jobsup.py").read_bytes()


class _Scheduled(Launcher):
    kind = ""

    def __init__(self, transport, job, **kw):
        super().__init__(transport, **kw)
        self.job = job  # spec.RayJob or spec.SlurmJob

    def _conf(self, cmd: str, *, wd: str, rd: str, run_id: str, env: dict[str, str], unset: list[str]) -> dict:
        raise NotImplementedError

    def _sup(self, verb: str, rd: str) -> str:
        q = shlex.quote
        return f"{q(self.job.python)} {q(rd + '/jobsup.py')} {verb} {q(rd + '/job.json')}"

    async def _prepare(self, cmd: str, *, wd: str, rd: str, run_id: str, env: dict[str, str],
                       unset: list[str]) -> str:
        said = await self.check(cmd, wd=wd, rd=rd, run_id=run_id, env=env, unset=unset)
        if said:
            raise LaunchFailed(f"run {run_id} was not submitted: {said}")
        return "exec " + self._sup("run", rd)

    async def check(self, cmd: str, *, wd: str, rd: str, run_id: str, env: dict[str, str],
                    unset: list[str]) -> str:
        """Write the job's supervisor and conf into `rd` and ask whether the scheduler answers:
        "" when it does, else its one-line reason."""
        conf = self._conf(cmd, wd=wd, rd=rd, run_id=run_id, env=env, unset=unset) | {"env": env, "unset": unset}
        await self.t.write(f"{rd}/job.json", json.dumps(conf, indent=1).encode(), mode=0o600)
        await self.t.write(f"{rd}/jobsup.py", _supervisor(), mode=0o600)
        r = await self.t.run(self._sup("check", rd), timeout=self.timeout)
        return "" if r.ok else (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1].removeprefix("harness: ")

    async def stop(self, handle: RunHandle, grace: float = 10, cleanup: Sequence[str] = ()) -> StopReport:
        """The scheduler's stop first (waited for, so the job's own teardown runs), then the process
        launcher's: the supervisor, anything still carrying the run's marker, the spec's cleanup."""
        r = await self.t.run(self._sup("stop", handle.run_dir), timeout=self.job.stop_wait + 60)
        report = await super().stop(handle, grace, cleanup)
        if not r.ok and r.returncode != 2:  # 2: the scheduler is gone, and the job with it
            report.cleanup.insert(0, r)
        return report


class RayJobLauncher(_Scheduled):
    kind = "ray"

    async def postmortem(self, handle: RunHandle) -> str:
        """The job's dead actors and their death causes, as a post-mortem section."""
        r = await self.t.run(self._sup("deaths", handle.run_dir), timeout=self.timeout)
        return f"{POSTMORTEM_HEAD}ray-actors\n{r.stdout}" if r.ok and r.stdout.strip() else ""

    def _conf(self, cmd, *, wd, rd, run_id, env, unset):
        q, j = shlex.quote, self.job
        entry = f"cd {q(wd)} && exec " + " ".join(["env", *[f"-u {n}" for n in unset], "bash", q(rd + "/job.sh")])
        # workers get the run's env through the job's runtime_env; a variable to remove becomes
        # empty there (runtime_env cannot unset), which proxies and most libraries read as unset
        env_vars = {**{n: "" for n in unset}, **env, MARKER: run_id, "RAY_JOB_STOP_WAIT_TIME_S": f"{j.stop_wait:g}"}
        return {"kind": "ray", "id": run_id, "address": j.address, "entrypoint": entry, "env_vars": env_vars,
                "driver_log": f"{j.temp_dir.rstrip('/')}/session_latest/logs/job-driver-{run_id}.log",
                "stop_wait": j.stop_wait, "patience": j.patience}

    async def _prepare(self, cmd, *, wd, rd, run_id, env, unset):
        await self.t.write(f"{rd}/job.sh", cmd.rstrip("\n").encode() + b"\n", mode=0o600)
        return await super()._prepare(cmd, wd=wd, rd=rd, run_id=run_id, env=env, unset=unset)


class SlurmLauncher(_Scheduled):
    kind = "slurm"

    def _conf(self, cmd, *, wd, rd, run_id, env, unset):
        j = self.job
        script = f"{wd}/{j.script}" if j.script and not j.script.startswith("/") else j.script or f"{rd}/job.sh"
        return {"kind": "slurm", "id": run_id, "workdir": wd, "script": script, "options": list(j.options),
                "out": f"{rd}/job.out", "job_file": f"{rd}/slurm_job", "stop_wait": j.stop_wait,
                "patience": j.patience}

    async def _prepare(self, cmd, *, wd, rd, run_id, env, unset):
        if not self.job.script:  # sbatch exports the supervisor's environment: the run's env is in it
            await self.t.write(f"{rd}/job.sh", f"#!/bin/bash\n{cmd.rstrip()}\n".encode(), mode=0o700)
        return await super()._prepare(cmd, wd=wd, rd=rd, run_id=run_id, env=env, unset=unset)


def launcher_for(launch, transport, **kw) -> Launcher:
    """The launcher `launch.via` names (a spec.Launch)."""
    if launch.via == "ray-job":
        return RayJobLauncher(transport, launch.ray, **kw)
    if launch.via == "slurm":
        return SlurmLauncher(transport, launch.slurm, **kw)
    return Launcher(transport, **kw)


async def doctor_check(launch, transport, workdir: str) -> tuple[str, bool, str] | None:
    """`harness doctor`'s line for the scheduler `launch.via` names (None for a plain process):
    the same check a launch makes, from a scratch dir on the host."""
    lau = launcher_for(launch, transport)
    if not isinstance(lau, _Scheduled):
        return None
    r = await transport.run("mktemp -d", timeout=20)
    if not r.ok:
        return "scheduler", False, f"could not make a scratch dir on the host: {r.tail(1)}"
    rd = r.stdout.strip()
    try:
        said = await lau.check(launch.command, wd=workdir, rd=rd, run_id="doctor", env=dict(launch.env),
                               unset=list(launch.unset))
    finally:
        await transport.run(f"rm -rf {shlex.quote(rd)}", timeout=20)
    what = f"the Ray Jobs API at {launch.ray.address}" if lau.kind == "ray" else "slurmctld (scontrol ping)"
    return "scheduler", not said, said or f"{what} answers"
